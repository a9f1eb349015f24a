/* Kernels of a model for the CPU solvers (implements kernels.h): compiled C when possible, the
 * reference interpreter otherwise.
 *
 * jf_kernels_get runs the JIT pipeline for the C backend:
 *   fast key (model DAG + options) → memory cache? → emit C → full key (source, compiler
 *   identity, flags, versions) → memory cache? → disk cache? → cc → disk cache → dlopen
 * Any failure of the compiler falls back to the interpreter with a one-line warning, so a fit
 * never fails for want of a compiler; problems with the disk cache (refused directory, failed
 * write) only cost the caching and are reported as warnings too.
 *
 * The fast key exists because a memory hit must cost microseconds: emitting and hashing the
 * source of a large model takes longer than that, while hashing its DAG does not. The DAG and
 * the emitter together determine the source, so within one process (one emitter) the fast key
 * identifies the module as well as the full key does.
 *
 * Vector math (jf_jit_options.vector_math) picks an ISA at run time (CPU and libsleef.so.3),
 * emits the vector kernels for it and adds its flags and library to the compiler command; both
 * keys see them, so exact and vector modules, and the ISAs, never mix in either cache.
 *
 * Models with many parameters (more than jf_jit_options.large_p, default JF_LARGE_P) get no
 * generated normal_eq: its p(p+1)/2 unrolled sums make the source, and the compile, O(p²).
 * jf_kernels_normal_eq then forms the same sums from blocks of jacobian_row rows with
 * cblas_dsyrk/cblas_dgemv, for every backend, so its callers never know. The choice enters the
 * fast key and changes the source (so the full key).
 */
#include "kernels.h"

#include <cblas.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "../codegen/emit.h"
#include "../codegen/interp.h"
#include "../codegen/loss.h"
#include "cache.h"
#include "jit_cc.h"

/* The ABI a C module must have to load into this process: a cache directory shared by hosts
 * of different architectures (an NFS home) gives each its own entries, where compiler path and
 * version line alone (the same on every architecture on some distributions) would not. */
#if defined(__x86_64__)
#define HOST_ARCH "x86_64"
#elif defined(__aarch64__)
#define HOST_ARCH "aarch64"
#elif defined(__powerpc64__)
#define HOST_ARCH "ppc64"
#elif defined(__riscv) && __riscv_xlen == 64
#define HOST_ARCH "riscv64"
#elif defined(__i386__)
#define HOST_ARCH "i386"
#elif defined(__arm__)
#define HOST_ARCH "arm"
#else
#define HOST_ARCH "other"
#endif
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define HOST_ABI HOST_ARCH "-be"
#else
#define HOST_ABI HOST_ARCH "-le"
#endif

/* loss.h speaks in numbers; they must be the public enum's. */
_Static_assert(JF_LOSS_LINEAR == 0 && JF_LOSS_SOFT_L1 == 1 && JF_LOSS_HUBER == 2 &&
                   JF_LOSS_CAUCHY == 3 && JF_LOSS_ARCTAN == 4,
               "codegen/loss.h numbers the losses like enum jf_loss");

/* The shape of the generated normal_eq loop (see docs/PERFORMANCE.md, "JIT and cache"). */
#define DEFAULT_NEQ_SHAPE JF_NEQ_FUSED

typedef void (*residual_fn)(const double *, const double *, size_t, const double *,
                            const double *, size_t, size_t, double *);
typedef void (*jacobian_fn)(const double *, const double *, size_t, const double *,
                            const double *, size_t, size_t, double *, double *);
typedef void (*normal_eq_fn)(const double *, const double *, size_t, const double *,
                             const double *, size_t, size_t, int, double, double *);

/* One loaded shared object. Owned by the memory cache once stored there, which unloads it
 * (c_module_unload) once no jf_kernels holds it and it has aged out of the idle modules. */
typedef struct c_module {
    void *handle;           /* from dlopen */
    residual_fn residual;   /* jf_residual */
    jacobian_fn jacobian;   /* jf_jacobian_row */
    normal_eq_fn normal_eq; /* jf_normal_eq */
    int vec_isa;            /* jf_vec_isa it was generated for (0: exact) */
} c_module;

struct jf_kernels {
    const struct jf_model *m; /* the model (not owned; must outlive the kernels) */
    jf_backend backend;       /* C, or INTERP (asked for or fallen back to) */
    jf_cache_result cache;    /* where the code came from */
    double compile_ms;        /* time spent in jf_kernels_get */
    const c_module *mod;      /* C: the module (owned by the memory cache) */
    jf_cache_entry *held;     /* C: the reference to mod's cache entry, given back when freed */
    int chunked;              /* 1: normal_eq from jacobian_row blocks and BLAS (no generated one) */
    jf_schedule *sf;          /* INTERP: schedule of {f} */
    jf_schedule *sall;        /* INTERP: schedule of {f, df...} */
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

void jf_warning_append(char *w, size_t n, const char *msg) {
    if (!w || !n) return;
    size_t l = strlen(w);
    if (l && l + 2 < n) {
        memcpy(w + l, "; ", 2);
        l += 2;
    }
    /* truncated to fit: a long warning is still worth its first part */
    size_t m = strlen(msg);
    if (m > n - 1 - l) m = n - 1 - l;
    memcpy(w + l, msg, m);
    w[l + m] = '\0';
}

/* ---- fast key ------------------------------------------------------------------------------- */

static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

static jf_cache_key fast_key(const struct jf_model *m, const char *cc, const char *cflags,
                             const char *libs, int chunked) {
    XXH3_state_t st;
    XXH3_INITSTATE(&st);
    XXH3_128bits_reset(&st);
    char head[512];
    int hl = snprintf(head, sizeof head, "jitfit-fast-key|%d|%d|%d|%s|%zu|%zu|%u|",
                      JF_EMIT_ABI_VERSION, (int)DEFAULT_NEQ_SHAPE, chunked, JF_CC_DEFAULT_FLAGS,
                      m->np, m->nv, (unsigned)m->f);
    XXH3_128bits_update(&st, head, (size_t)hl);
    XXH3_128bits_update(&st, cc, strlen(cc) + 1);
    XXH3_128bits_update(&st, cflags, strlen(cflags) + 1);
    XXH3_128bits_update(&st, libs, strlen(libs) + 1);
    XXH3_128bits_update(&st, m->df, m->np * sizeof *m->df);
    /* Nodes packed field by field (the struct has padding), in chunks. */
    unsigned char buf[4096];
    size_t used = 0, size = jf_dag_size(m->dag);
    for (size_t r = 0; r < size; r++) {
        const jf_node *nd = jf_dag_node(m->dag, (jf_ref)r);
        unsigned char *q = buf + used;
        uint64_t v;
        memcpy(&v, &nd->value, 8);
        put64(q, (uint64_t)nd->op | (uint64_t)nd->arity << 8 | (uint64_t)nd->index << 32);
        put64(q + 8, (uint64_t)nd->arg[0] | (uint64_t)nd->arg[1] << 32);
        put64(q + 16, (uint64_t)nd->arg[2]);
        put64(q + 24, v);
        used += 32;
        if (used + 32 > sizeof buf) {
            XXH3_128bits_update(&st, buf, used);
            used = 0;
        }
    }
    XXH3_128bits_update(&st, buf, used);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&st));
    jf_cache_key k;
    memcpy(k.bytes, c.digest, 16);
    return k;
}

/* ---- vector math ---------------------------------------------------------------------------- */

/* The SLEEF library the vector kernels link (by soname, so only the runtime package is needed). */
#define SLEEF_SONAME "libsleef.so.3"

/* What the process found of SLEEF: probed once, the handle kept open for the process. */
static pthread_once_t sleef_once = PTHREAD_ONCE_INIT;
static int sleef_avx2, sleef_avx512; /* its entry points for these ISAs exist */
static char sleef_why[256];          /* why it is unusable, when neither exists */

static void sleef_probe(void) {
    void *h = dlopen(SLEEF_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(sleef_why, sizeof sleef_why, "%s", e ? e : SLEEF_SONAME " not found");
        return;
    }
    sleef_avx2 = dlsym(h, "Sleef_expd4_u10avx2") && dlsym(h, "Sleef_sincosd4_u10avx2");
    sleef_avx512 = dlsym(h, "Sleef_expd8_u10avx512f") && dlsym(h, "Sleef_sincosd8_u10avx512f");
    if (!sleef_avx2 && !sleef_avx512)
        snprintf(sleef_why, sizeof sleef_why, SLEEF_SONAME " lacks the AVX2/AVX-512 functions");
}

/* The widest ISA that the CPU, SLEEF and $JITFIT_VECTOR_ISA allow, or JF_VEC_NONE with the
 * reason in why. The CPU is asked at run time: the cache key names the ISA, so an object built
 * for AVX-512 is never taken by a process on a CPU without it (a shared cache directory). */
static jf_vec_isa vector_isa(char *why, size_t n) {
    pthread_once(&sleef_once, sleef_probe);
    if (!sleef_avx2 && !sleef_avx512) {
        snprintf(why, n, "%s", sleef_why);
        return JF_VEC_NONE;
    }
    const char *cap = getenv("JITFIT_VECTOR_ISA");
    int allow512 = !cap || !*cap || strcmp(cap, "avx512") == 0;
    __builtin_cpu_init();
    if (allow512 && sleef_avx512 && __builtin_cpu_supports("avx512f")) return JF_VEC_AVX512;
    if (sleef_avx2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return JF_VEC_AVX2;
    snprintf(why, n, "the CPU has neither AVX2+FMA nor AVX-512F");
    return JF_VEC_NONE;
}

/* Compiler flags and libraries for an ISA (they enter both cache keys). */
static const char *vector_flags(jf_vec_isa isa) {
    return isa == JF_VEC_AVX512 ? "-mavx512f" : isa == JF_VEC_AVX2 ? "-mavx2 -mfma" : "";
}
static const char *vector_libs(jf_vec_isa isa) {
    return isa == JF_VEC_NONE ? "" : "-l:" SLEEF_SONAME;
}

/* ---- C modules ------------------------------------------------------------------------------ */

static void *sym(void *h, const char *name) { return dlsym(h, name); }

/* Wraps a freshly dlopen'ed object after checking that it is what we generated for m. */
static c_module *module_from_handle(void *h, const struct jf_model *m, int chunked, char *why,
                                    size_t n) {
    const int *abi = sym(h, "jf_abi_version");
    const int *np = sym(h, "jf_num_params");
    const int *nv = sym(h, "jf_num_vars");
    void *f1 = sym(h, "jf_residual"), *f2 = sym(h, "jf_jacobian_row"), *f3 = sym(h, "jf_normal_eq");
    if (!abi || !np || !nv || !f1 || !f2 || (!f3 && !chunked) || *abi != JF_EMIT_ABI_VERSION ||
        (size_t)*np != m->np || (size_t)*nv != m->nv) {
        snprintf(why, n, "the compiled kernels do not match the model");
        dlclose(h);
        return NULL;
    }
    c_module *mod = calloc(1, sizeof *mod);
    if (!mod) {
        snprintf(why, n, "out of memory");
        dlclose(h);
        return NULL;
    }
    mod->handle = h;
    memcpy(&mod->residual, &f1, sizeof f1);
    memcpy(&mod->jacobian, &f2, sizeof f2);
    memcpy(&mod->normal_eq, &f3, sizeof f3);
    return mod;
}

/* jf_cache_unload_fn of C modules. */
static void c_module_unload(void *p) {
    c_module *mod = p;
    dlclose(mod->handle);
    free(mod);
}

/* Stores mod in the memory cache under both keys (one entry); returns the entry to use, held
 * for the caller, or NULL when out of memory (mod is then unloaded). */
static jf_cache_entry *remember(const jf_cache_key *full, const jf_cache_key *fast, c_module *mod) {
    jf_cache_entry *e = jf_cache_mem_put(full, mod, c_module_unload);
    if (!e) {
        c_module_unload(mod);
        return NULL;
    }
    /* another thread got there first: use its module, drop ours */
    if (jf_cache_entry_module(e) != mod) c_module_unload(mod);
    jf_cache_mem_alias(fast, e);
    return e;
}

/* The first line of a compiler log that says "error", else its first line. */
static void first_error_line(const char *log, char *out, size_t n) {
    const char *line = log, *pick = NULL;
    while (line && *line) {
        const char *e = strchr(line, '\n');
        size_t len = e ? (size_t)(e - line) : strlen(line);
        if (!pick && len) pick = line;
        if (strstr(line, "error") && (size_t)(strstr(line, "error") - line) < len) {
            pick = line;
            break;
        }
        line = e ? e + 1 : NULL;
    }
    if (!pick) {
        snprintf(out, n, "no message");
        return;
    }
    size_t len = strcspn(pick, "\n");
    snprintf(out, n, "%.*s", (int)(len < 300 ? len : 300), pick);
}

/* The C backend's path through the caches: the module's cache entry, held for the caller;
 * NULL with a warning when it cannot produce code. */
static jf_cache_entry *get_c(const struct jf_model *m, const jf_jit_options *o, int chunked,
                             jf_cache_result *cache, char *warn, size_t wn) {
    const char *cc = jf_cc_command(o->cc);
    char why[1024], msg[4600];
    jf_vec_isa isa = JF_VEC_NONE;
    if (o->vector_math) {
        isa = vector_isa(why, sizeof why);
        if (isa == JF_VEC_NONE) {
            snprintf(msg, sizeof msg, "vector math unavailable (%s); using the exact kernels", why);
            jf_warning_append(warn, wn, msg);
        }
    }
    /* The ISA's flags and libraries join the caller's flags: both keys then tell the modes and
     * the ISAs apart (the source differs as well). */
    char cflags[2048], libs[64];
    snprintf(cflags, sizeof cflags, "%s%s%s", o->cflags ? o->cflags : "",
             o->cflags && isa ? " " : "", vector_flags(isa));
    snprintf(libs, sizeof libs, "%s", vector_libs(isa));
    jf_cache_key fk = fast_key(m, cc, cflags, libs, chunked);
    jf_cache_entry *held = jf_cache_mem_get(&fk);
    if (held) {
        *cache = JF_CACHE_MEMORY;
        return held;
    }

    jf_cache_dir dir;
    jf_cache_dir_open(o->cache_dir, o->no_cache, 1, &dir);
    const char *identity;
    if (jf_cc_identity(cc, dir.state == JF_CACHE_DIR_OK ? dir.path : NULL, &identity, why,
                       sizeof why) != JF_OK) {
        snprintf(msg, sizeof msg, "%s; using the interpreter", why);
        jf_warning_append(warn, wn, msg);
        return NULL;
    }
    jf_emit_options eo = jf_emit_options_default(JF_EMIT_C);
    eo.neq_shape = DEFAULT_NEQ_SHAPE;
    eo.vec_isa = isa;
    eo.no_normal_eq = chunked;
    char *src = jf_emit(m, &eo);
    if (!src) {
        jf_warning_append(warn, wn, "out of memory generating C code; using the interpreter");
        return NULL;
    }
    char flags[4096];
    int fl = snprintf(flags, sizeof flags, "%s %s%s%s", JF_CC_DEFAULT_FLAGS, cflags,
                      libs[0] ? " " : "", libs);
    if (fl < 0 || (size_t)fl >= sizeof flags) {
        /* A truncated flag string would make a wrong cache key: refuse instead. */
        free(src);
        jf_warning_append(warn, wn, "compiler flags too long; using the interpreter");
        return NULL;
    }
    jf_cache_key_parts parts = {"c", src, identity, flags, HOST_ABI};
    jf_cache_key key = jf_cache_key_make(&parts);
    if ((held = jf_cache_mem_get(&key)) != NULL) {
        free(src);
        jf_cache_mem_alias(&fk, held);
        *cache = JF_CACHE_MEMORY;
        return held;
    }

    if (dir.state == JF_CACHE_DIR_REFUSED) {
        snprintf(msg, sizeof msg, "kernel cache not used: %s", dir.reason);
        jf_warning_append(warn, wn, msg);
    }
    if (dir.state == JF_CACHE_DIR_OK) {
        unsigned char *payload;
        size_t size;
        jf_cache_lookup_result lr =
            jf_cache_disk_load(&dir, &key, JF_CACHE_KIND_C_SO, &payload, &size, why, sizeof why);
        if (lr == JF_CACHE_ENTRY_HIT) {
            void *h = jf_cc_load_bytes(payload, size, why, sizeof why);
            free(payload);
            c_module *nm = h ? module_from_handle(h, m, chunked, why, sizeof why) : NULL;
            if (nm) {
                nm->vec_isa = (int)isa;
                free(src);
                *cache = JF_CACHE_DISK;
                held = remember(&key, &fk, nm);
                if (!held) jf_warning_append(warn, wn, "out of memory; using the interpreter");
                return held;
            }
            /* a verified entry that does not load is rebuilt like a corrupt one */
        }
    }

    /* Compile. */
    char tmp[4096], so[4200];
    char *log = NULL;
    int st = jf_cc_tmpdir(tmp, sizeof tmp);
    if (st != JF_OK) {
        free(src);
        snprintf(msg, sizeof msg, "cannot create a temporary directory for the C compiler in "
                 "$TMPDIR or /tmp: %s; using the interpreter", strerror(errno));
        jf_warning_append(warn, wn, msg);
        return NULL;
    }
    st = jf_cc_compile_libs(cc, cflags, libs, src, tmp, so, sizeof so, &log);
    free(src);
    if (st != JF_OK) {
        char line[400];
        first_error_line(log ? log : "", line, sizeof line);
        snprintf(msg, sizeof msg, "C compiler '%s' failed (%s); using the interpreter", cc, line);
        jf_warning_append(warn, wn, msg);
        free(log);
        jf_cc_tmpdir_remove(tmp);
        return NULL;
    }
    free(log);
    void *h = jf_cc_load_file(so, why, sizeof why);
    c_module *nm = h ? module_from_handle(h, m, chunked, why, sizeof why) : NULL;
    if (!nm) {
        jf_cc_tmpdir_remove(tmp);
        snprintf(msg, sizeof msg, "%s; using the interpreter", why);
        jf_warning_append(warn, wn, msg);
        return NULL;
    }
    /* Stored only once it has loaded and matched the model: a compiler that exits 0 without
     * writing a usable object must not leave an entry that every later process reads, fails to
     * load and rewrites. */
    if (dir.state == JF_CACHE_DIR_OK) {
        unsigned char *bytes;
        size_t size;
        if (jf_cc_read_file(so, &bytes, &size) == JF_OK) {
            if (jf_cache_disk_store(&dir, &key, JF_CACHE_KIND_C_SO, bytes, size, why,
                                    sizeof why) != JF_OK) {
                snprintf(msg, sizeof msg, "kernel cache not updated: %s", why);
                jf_warning_append(warn, wn, msg);
            }
            free(bytes);
        }
    }
    jf_cc_tmpdir_remove(tmp);
    nm->vec_isa = (int)isa;
    *cache = JF_CACHE_MISS;
    held = remember(&key, &fk, nm);
    if (!held) jf_warning_append(warn, wn, "out of memory; using the interpreter");
    return held;
}

/* ---- the interface ---------------------------------------------------------------------------- */

/* Whether a model of np parameters gets the chunked normal_eq (jf_jit_options.large_p). */
static int large_p_chunked(size_t np, int large_p) {
    if (large_p == 0) {
        const char *e = getenv("JITFIT_LARGE_P");
        long v = e && *e ? strtol(e, NULL, 10) : JF_LARGE_P;
        large_p = v > INT_MAX ? INT_MAX : v < INT_MIN ? INT_MIN : (int)v;
        if (large_p == 0) large_p = JF_LARGE_P;
    }
    return large_p < 0 || np > (size_t)large_p;
}

int jf_kernels_large_p(size_t np) { return large_p_chunked(np, 0); }

const char *jf_backend_name(int backend) {
    switch (backend) {
    case JF_BACKEND_INTERP: return "interp";
    case JF_BACKEND_C: return "c";
    case JF_BACKEND_CUDA: return "cuda";
    default: return "?";
    }
}

static int init_interp(jf_kernels *k) {
    const struct jf_model *m = k->m;
    jf_ref *roots = malloc((m->np + 1) * sizeof *roots);
    if (!roots) return JF_ERR_NOMEM;
    roots[0] = m->f;
    for (size_t i = 0; i < m->np; i++) roots[i + 1] = m->df[i];
    k->sf = jf_schedule_build(m->dag, roots, 1);
    k->sall = jf_schedule_build(m->dag, roots, m->np + 1);
    free(roots);
    return k->sf && k->sall ? JF_OK : JF_ERR_NOMEM;
}

int jf_kernels_get(const struct jf_model *m, jf_backend b, const jf_jit_options *opts,
                   jf_kernels **out, char **warning) {
    double t0 = now_ms();
    if (out) *out = NULL;
    if (warning) *warning = NULL;
    if (!m || !out || !m->dag || (m->np && !m->df) || (b != JF_BACKEND_C && b != JF_BACKEND_INTERP))
        return JF_ERR_ARG;
    jf_kernels *k = calloc(1, sizeof *k);
    if (!k) return JF_ERR_NOMEM;
    k->m = m;
    k->backend = JF_BACKEND_INTERP;
    k->cache = JF_CACHE_NONE;
    /* The interpreter follows the same rule: its per-point O(np²) loop loses to BLAS there too,
     * and a fallback then computes what the compiled kernels would have. */
    int chunked = large_p_chunked(m->np, opts ? opts->large_p : 0);
    k->chunked = chunked;
    char warn[2048] = "";
    if (b == JF_BACKEND_C) {
        jf_jit_options o;
        memset(&o, 0, sizeof o);
        if (opts) o = *opts;
        k->held = get_c(m, &o, chunked, &k->cache, warn, sizeof warn);
        if (k->held) {
            k->mod = jf_cache_entry_module(k->held);
            k->backend = JF_BACKEND_C;
        } else {
            k->cache = JF_CACHE_NONE;
        }
    }
    if (!k->mod && init_interp(k) != JF_OK) {
        jf_kernels_free(k);
        return JF_ERR_NOMEM;
    }
    if (warn[0] && warning) *warning = strdup(warn);
    k->compile_ms = now_ms() - t0;
    *out = k;
    return JF_OK;
}

void jf_kernels_free(jf_kernels *k) {
    if (!k) return;
    jf_cache_mem_release(k->held);
    jf_schedule_free(k->sf);
    jf_schedule_free(k->sall);
    free(k);
}

jf_backend jf_kernels_backend(const jf_kernels *k) { return k->backend; }
jf_cache_result jf_kernels_cache_result(const jf_kernels *k) { return k->cache; }
double jf_kernels_compile_ms(const jf_kernels *k) { return k->compile_ms; }
int jf_kernels_vector_isa(const jf_kernels *k) { return k->mod ? k->mod->vec_isa : 0; }
int jf_kernels_chunked(const jf_kernels *k) { return k->chunked; }

/* ---- interpreter flavours ------------------------------------------------------------------- */

/* Scratch for one call: the schedule's values, one point's variables and the roots. On the
 * stack for small models so the common call allocates nothing. */
typedef struct interp_scratch {
    double local[512]; /* storage when it fits */
    double *heap;      /* storage when it does not (or NULL) */
    double *vals;      /* schedule values */
    double *xv;        /* the point's variables */
    double *out;       /* root values: f, then the partials */
} interp_scratch;

static int scratch_init(interp_scratch *s, const jf_kernels *k, const jf_schedule *sch) {
    size_t need = sch->n + k->m->nv + k->m->np + 1;
    s->heap = NULL;
    double *base = s->local;
    if (need > sizeof s->local / sizeof s->local[0]) {
        base = s->heap = malloc(need * sizeof *base);
        if (!base) return 0;
    }
    s->vals = base;
    s->xv = base + sch->n;
    s->out = s->xv + k->m->nv;
    return 1;
}

static void eval_point(const jf_kernels *k, const jf_schedule *sch, interp_scratch *s,
                       const double *p, const jf_data_view *d, size_t i) {
    for (size_t j = 0; j < k->m->nv; j++) s->xv[j] = d->x[j * d->ldx + i];
    jf_interp_run(sch, p, s->xv, s->vals, s->out);
}

static void fill_nan(double *a, size_t n) {
    for (size_t i = 0; i < n; i++) a[i] = NAN;
}

void jf_kernels_residual(const jf_kernels *k, const double *p, const jf_data_view *d,
                         size_t begin, size_t end, double *r) {
    if (k->mod) {
        k->mod->residual(p, d->x, d->ldx, d->y, d->w, begin, end, r);
        return;
    }
    interp_scratch s;
    if (!scratch_init(&s, k, k->sf)) {
        fill_nan(r, end - begin);
        return;
    }
    for (size_t i = begin; i < end; i++) {
        eval_point(k, k->sf, &s, p, d, i);
        double yi = d->y ? d->y[i] : 0.0, wi = d->w ? d->w[i] : 1.0;
        r[i - begin] = (s.out[0] - yi) * wi;
    }
    free(s.heap);
}

void jf_kernels_jacobian_row(const jf_kernels *k, const double *p, const jf_data_view *d,
                             size_t begin, size_t end, double *r, double *J) {
    if (k->mod) {
        k->mod->jacobian(p, d->x, d->ldx, d->y, d->w, begin, end, r, J);
        return;
    }
    size_t np = k->m->np;
    interp_scratch s;
    if (!scratch_init(&s, k, k->sall)) {
        fill_nan(r, end - begin);
        fill_nan(J, (end - begin) * np);
        return;
    }
    for (size_t i = begin; i < end; i++) {
        eval_point(k, k->sall, &s, p, d, i);
        double yi = d->y ? d->y[i] : 0.0, wi = d->w ? d->w[i] : 1.0;
        r[i - begin] = (s.out[0] - yi) * wi;
        for (size_t c = 0; c < np; c++) J[(i - begin) * np + c] = s.out[c + 1] * wi;
    }
    free(s.heap);
}

/* ---- chunked normal equations (many parameters) ---------------------------------------------- */

/* OpenBLAS's own threads are turned off: the solver's threads already split the data, and
 * OpenBLAS's workers only spin (sched_yield) against them — at 1e4 points they took most of the
 * fit's time. Debian installs OpenBLAS as several shared objects, each a full copy with its own
 * thread pool (libopenblas.so.0, and liblapack.so.3 / libblas.so.3 through the alternatives),
 * and LAPACKE calls the liblapack.so.3 copy: so the setter is looked up in every copy that is
 * loaded. With another BLAS none has it and nothing happens. This is process-wide;
 * docs/SOLVER.md says so. */
static void blas_threads_off(void) {
    static const char *const libs[] = {"libopenblas.so.0", "liblapack.so.3", "libblas.so.3",
                                       "libopenblas.so"};
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        void *h = dlopen(libs[i], RTLD_LAZY | RTLD_NOLOAD);
        if (!h) continue;
        void (*set)(int);
        *(void **)&set = dlsym(h, "openblas_set_num_threads");
        if (set) set(1);
        dlclose(h);
    }
}

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

void jf_blas_single_threaded(void) { pthread_once(&blas_once, blas_threads_off); }

/* Bytes of one block of Jacobian rows: well inside L2 (2 MiB a core on the machine measured,
 * 256 KiB on older ones), so dsyrk reads what jacobian_row has just written from cache. */
#define JF_BLOCK_BYTES ((size_t)256 * 1024)

/* Rows per block for np parameters: a multiple of 8 (whole vector-math blocks in
 * jacobian_row), at least 32 so BLAS has work, at most 1024. Depends on np only. */
static size_t block_rows(size_t np) {
    size_t rows = JF_BLOCK_BYTES / (sizeof(double) * (np + 1));
    rows &= ~(size_t)7;
    return rows < 32 ? 32 : rows > 1024 ? 1024 : rows;
}

/* normal_eq for large models: the rows of J and r of one block from jacobian_row (weighted
 * there), scaled per point exactly as the generated loop does (codegen/loss.h), then
 * C += JᵀJ (dsyrk, upper) and g += Jᵀr (dgemv); blocks in ascending order from begin. */
static void normal_eq_chunked(const jf_kernels *k, const double *p, const jf_data_view *d,
                              size_t begin, size_t end, jf_loss loss, double f_scale,
                              double *acc) {
    size_t np = k->m->np, nacc = jf_emit_num_acc(np), tri = np * (np + 1) / 2;
    size_t rows = block_rows(np);
    if (end - begin < rows) rows = end > begin ? end - begin : 1;
    double *buf = malloc((rows * (np + 1) + np * np) * sizeof *buf);
    if (!buf) {
        fill_nan(acc, nacc);
        return;
    }
    jf_blas_single_threaded();
    double *J = buf, *r = J + rows * np, *C = r + rows;
    double *g = acc + tri, cost = 0.0;
    memset(C, 0, np * np * sizeof *C);
    for (size_t a = 0; a < np; a++) g[a] = 0.0;
    double fs2 = f_scale * f_scale, ifs2 = 1.0 / fs2;
    for (size_t b = begin; b < end; b += rows) {
        size_t e = end - b < rows ? end : b + rows, nb = e - b;
        jf_kernels_jacobian_row(k, p, d, b, e, r, J);
        if (loss == JF_LOSS_LINEAR) {
            for (size_t i = 0; i < nb; i++) cost += r[i] * r[i];
        } else {
            for (size_t i = 0; i < nb; i++) {
                double js;
                cost += jf_loss_scale((int)loss, r[i], fs2, ifs2, &r[i], &js);
                double *Ji = J + i * np;
                for (size_t c = 0; c < np; c++) Ji[c] *= js;
            }
        }
        /* BLAS takes int dimensions: np and nb are bounded by the model and the block size. */
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)np, (int)nb, 1.0, J, (int)np,
                    1.0, C, (int)np);
        cblas_dgemv(CblasRowMajor, CblasTrans, (int)nb, (int)np, 1.0, J, (int)np, r, 1, 1.0, g,
                    1);
    }
    size_t q = 0;
    for (size_t a = 0; a < np; a++)
        for (size_t c = a; c < np; c++) acc[q++] = C[a * np + c];
    acc[tri + np] = cost;
    free(buf);
}

void jf_kernels_normal_eq(const jf_kernels *k, const double *p, const jf_data_view *d,
                          size_t begin, size_t end, jf_loss loss, double f_scale, double *acc) {
    if (k->chunked) {
        normal_eq_chunked(k, p, d, begin, end, loss, f_scale, acc);
        return;
    }
    if (k->mod) {
        k->mod->normal_eq(p, d->x, d->ldx, d->y, d->w, begin, end, (int)loss, f_scale, acc);
        return;
    }
    size_t np = k->m->np, nacc = jf_emit_num_acc(np), tri = np * (np + 1) / 2;
    for (size_t q = 0; q < nacc; q++) acc[q] = 0.0;
    interp_scratch s;
    if (!scratch_init(&s, k, k->sall)) {
        fill_nan(acc, nacc);
        return;
    }
    /* The same operations in the same order as the generated fused loop (emit_c.c). */
    double fs2 = f_scale * f_scale, ifs2 = 1.0 / fs2;
    double *J = s.out + 1;
    for (size_t i = begin; i < end; i++) {
        eval_point(k, k->sall, &s, p, d, i);
        double yi = d->y ? d->y[i] : 0.0;
        double r = s.out[0] - yi, cost;
        if (d->w) {
            r *= d->w[i];
            for (size_t c = 0; c < np; c++) J[c] *= d->w[i];
        }
        if (loss == JF_LOSS_LINEAR) {
            cost = r * r;
        } else {
            double js;
            cost = jf_loss_scale((int)loss, r, fs2, ifs2, &r, &js);
            for (size_t c = 0; c < np; c++) J[c] *= js;
        }
        size_t q = 0;
        for (size_t a = 0; a < np; a++)
            for (size_t b = a; b < np; b++) acc[q++] += J[a] * J[b];
        for (size_t a = 0; a < np; a++) acc[tri + a] += J[a] * r;
        acc[tri + np] += cost;
    }
    free(s.heap);
}
