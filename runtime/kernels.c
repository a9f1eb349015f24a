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
 */
#include "kernels.h"

#include <dlfcn.h>
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

/* One loaded shared object. Owned by the memory cache once stored there (never unloaded). */
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
    jf_schedule *sf;          /* INTERP: schedule of {f} */
    jf_schedule *sall;        /* INTERP: schedule of {f, df...} */
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Appends a one-line warning to w (separated by "; "). */
static void add_warning(char *w, size_t n, const char *msg) {
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
                             const char *libs) {
    XXH3_state_t st;
    XXH3_INITSTATE(&st);
    XXH3_128bits_reset(&st);
    char head[512];
    int hl = snprintf(head, sizeof head, "jitfit-fast-key|%d|%d|%s|%zu|%zu|%u|", JF_EMIT_ABI_VERSION,
                      (int)DEFAULT_NEQ_SHAPE, JF_CC_DEFAULT_FLAGS, m->np, m->nv, (unsigned)m->f);
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
static c_module *module_from_handle(void *h, const struct jf_model *m, char *why, size_t n) {
    const int *abi = sym(h, "jf_abi_version");
    const int *np = sym(h, "jf_num_params");
    const int *nv = sym(h, "jf_num_vars");
    void *f1 = sym(h, "jf_residual"), *f2 = sym(h, "jf_jacobian_row"), *f3 = sym(h, "jf_normal_eq");
    if (!abi || !np || !nv || !f1 || !f2 || !f3 || *abi != JF_EMIT_ABI_VERSION ||
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

/* Stores mod in the memory cache under both keys; returns the module to use. */
static const c_module *remember(const jf_cache_key *full, const jf_cache_key *fast, c_module *mod) {
    c_module *kept = jf_cache_mem_put(full, mod);
    if (kept && kept != mod) {
        /* another thread got there first: use its module, drop ours */
        dlclose(mod->handle);
        free(mod);
        mod = kept;
    }
    jf_cache_mem_put(fast, mod);
    return mod;
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

/* The C backend's path through the caches; NULL with a warning when it cannot produce code. */
static const c_module *get_c(const struct jf_model *m, const jf_jit_options *o,
                             jf_cache_result *cache, char *warn, size_t wn) {
    const char *cc = jf_cc_command(o->cc);
    char why[1024], msg[4600];
    jf_vec_isa isa = JF_VEC_NONE;
    if (o->vector_math) {
        isa = vector_isa(why, sizeof why);
        if (isa == JF_VEC_NONE) {
            snprintf(msg, sizeof msg, "vector math unavailable (%s); using the exact kernels", why);
            add_warning(warn, wn, msg);
        }
    }
    /* The ISA's flags and libraries join the caller's flags: both keys then tell the modes and
     * the ISAs apart (the source differs as well). */
    char cflags[2048], libs[64];
    snprintf(cflags, sizeof cflags, "%s%s%s", o->cflags ? o->cflags : "",
             o->cflags && isa ? " " : "", vector_flags(isa));
    snprintf(libs, sizeof libs, "%s", vector_libs(isa));
    jf_cache_key fk = fast_key(m, cc, cflags, libs);
    const c_module *mod = jf_cache_mem_get(&fk);
    if (mod) {
        *cache = JF_CACHE_MEMORY;
        return mod;
    }

    jf_cache_dir dir;
    jf_cache_dir_open(o->cache_dir, o->no_cache, 1, &dir);
    const char *identity;
    if (jf_cc_identity(cc, dir.state == JF_CACHE_DIR_OK ? dir.path : NULL, &identity, why,
                       sizeof why) != JF_OK) {
        snprintf(msg, sizeof msg, "%s; using the interpreter", why);
        add_warning(warn, wn, msg);
        return NULL;
    }
    jf_emit_options eo = jf_emit_options_default(JF_EMIT_C);
    eo.neq_shape = DEFAULT_NEQ_SHAPE;
    eo.vec_isa = isa;
    char *src = jf_emit(m, &eo);
    if (!src) {
        add_warning(warn, wn, "out of memory generating C code; using the interpreter");
        return NULL;
    }
    char flags[4096];
    int fl = snprintf(flags, sizeof flags, "%s %s%s%s", JF_CC_DEFAULT_FLAGS, cflags,
                      libs[0] ? " " : "", libs);
    if (fl < 0 || (size_t)fl >= sizeof flags) {
        /* A truncated flag string would make a wrong cache key: refuse instead. */
        free(src);
        add_warning(warn, wn, "compiler flags too long; using the interpreter");
        return NULL;
    }
    jf_cache_key_parts parts = {"c", src, identity, flags, ""};
    jf_cache_key key = jf_cache_key_make(&parts);
    if ((mod = jf_cache_mem_get(&key)) != NULL) {
        free(src);
        jf_cache_mem_put(&fk, (void *)mod);
        *cache = JF_CACHE_MEMORY;
        return mod;
    }

    if (dir.state == JF_CACHE_DIR_REFUSED) {
        snprintf(msg, sizeof msg, "kernel cache not used: %s", dir.reason);
        add_warning(warn, wn, msg);
    }
    if (dir.state == JF_CACHE_DIR_OK) {
        unsigned char *payload;
        size_t size;
        jf_cache_lookup_result lr =
            jf_cache_disk_load(&dir, &key, JF_CACHE_KIND_C_SO, &payload, &size, why, sizeof why);
        if (lr == JF_CACHE_ENTRY_HIT) {
            void *h = jf_cc_load_bytes(payload, size, why, sizeof why);
            free(payload);
            c_module *nm = h ? module_from_handle(h, m, why, sizeof why) : NULL;
            if (nm) {
                nm->vec_isa = (int)isa;
                free(src);
                *cache = JF_CACHE_DISK;
                return remember(&key, &fk, nm);
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
        add_warning(warn, wn, "cannot create a temporary directory for the C compiler; using "
                              "the interpreter");
        return NULL;
    }
    st = jf_cc_compile_libs(cc, cflags, libs, src, tmp, so, sizeof so, &log);
    free(src);
    if (st != JF_OK) {
        char line[400];
        first_error_line(log ? log : "", line, sizeof line);
        snprintf(msg, sizeof msg, "C compiler '%s' failed (%s); using the interpreter", cc, line);
        add_warning(warn, wn, msg);
        free(log);
        jf_cc_tmpdir_remove(tmp);
        return NULL;
    }
    free(log);
    if (dir.state == JF_CACHE_DIR_OK) {
        unsigned char *bytes;
        size_t size;
        if (jf_cc_read_file(so, &bytes, &size) == JF_OK) {
            if (jf_cache_disk_store(&dir, &key, JF_CACHE_KIND_C_SO, bytes, size, why,
                                    sizeof why) != JF_OK) {
                snprintf(msg, sizeof msg, "kernel cache not updated: %s", why);
                add_warning(warn, wn, msg);
            }
            free(bytes);
        }
    }
    void *h = jf_cc_load_file(so, why, sizeof why);
    jf_cc_tmpdir_remove(tmp);
    c_module *nm = h ? module_from_handle(h, m, why, sizeof why) : NULL;
    if (!nm) {
        snprintf(msg, sizeof msg, "%s; using the interpreter", why);
        add_warning(warn, wn, msg);
        return NULL;
    }
    nm->vec_isa = (int)isa;
    *cache = JF_CACHE_MISS;
    return remember(&key, &fk, nm);
}

/* ---- the interface ---------------------------------------------------------------------------- */

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
    char warn[2048] = "";
    if (b == JF_BACKEND_C) {
        jf_jit_options o;
        memset(&o, 0, sizeof o);
        if (opts) o = *opts;
        k->mod = get_c(m, &o, &k->cache, warn, sizeof warn);
        if (k->mod) k->backend = JF_BACKEND_C;
        else k->cache = JF_CACHE_NONE;
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
    jf_schedule_free(k->sf);
    jf_schedule_free(k->sall);
    free(k);
}

jf_backend jf_kernels_backend(const jf_kernels *k) { return k->backend; }
jf_cache_result jf_kernels_cache_result(const jf_kernels *k) { return k->cache; }
double jf_kernels_compile_ms(const jf_kernels *k) { return k->compile_ms; }
int jf_kernels_vector_isa(const jf_kernels *k) { return k->mod ? k->mod->vec_isa : 0; }

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

void jf_kernels_normal_eq(const jf_kernels *k, const double *p, const jf_data_view *d,
                          size_t begin, size_t end, jf_loss loss, double f_scale, double *acc) {
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
