/* The CUDA emulator's host half (see cuda_emu.h): modules built by the host C++ compiler,
 * device memory in host memory, launches through the module's coroutine scheduler
 * (cuda_emu_device.h), and graphs run node by node in an adversarial dependency order.
 *
 * One lock serializes launches (a module's scheduler state is global) and the memory count.
 */
#include "cuda_emu.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../codegen/emit.h"
#include "jit_cc.h"

extern const char jf_embed_cuda_emu_device_h[];

static pthread_once_t emu_once = PTHREAD_ONCE_INIT;
static int emu_on;
static size_t emu_total;
static size_t emu_used;
static int emu_fail_while; /* JITFIT_CUDA_EMULATE_FAIL=while: refuse WHILE nodes (a driver that
                              cannot build them), to test the fallback */
static size_t emu_local; /* JITFIT_CUDA_EMULATE_LOCAL: local bytes per thread a kernel reports */
static unsigned long emu_ulps; /* JITFIT_CUDA_EMULATE_ULPS: device math rounds unlike the host's
                                  libm, the value seeding which way (0: off) */
static pthread_mutex_t emu_mu = PTHREAD_MUTEX_INITIALIZER;

static void emu_read_env(void) {
    const char *v = getenv("JITFIT_CUDA_EMULATE");
    emu_on = v && *v && strcmp(v, "0") != 0;
    emu_total = (size_t)4 << 30;
    const char *f = getenv("JITFIT_CUDA_EMULATE_FAIL");
    emu_fail_while = f && strcmp(f, "while") == 0;
    const char *lb = getenv("JITFIT_CUDA_EMULATE_LOCAL");
    emu_local = lb && *lb ? (size_t)strtoull(lb, NULL, 10) : 0;
    const char *u = getenv("JITFIT_CUDA_EMULATE_ULPS");
    emu_ulps = u && *u ? strtoul(u, NULL, 10) : 0;
    if (u && *u && emu_ulps == 0 && strcmp(u, "0") != 0) emu_ulps = 1;
    const char *m = getenv("JITFIT_CUDA_EMULATE_MEM");
    if (m && *m) {
        char *end;
        double d = strtod(m, &end);
        if (end != m && d >= 1 && d < 0x1p62) emu_total = (size_t)d;
    }
}

int jf_cuda_emulated(void) {
    pthread_once(&emu_once, emu_read_env);
    return emu_on;
}

void jf_cuda_emulate_reread(void) {
    pthread_once(&emu_once, emu_read_env);
    pthread_mutex_lock(&emu_mu);
    emu_read_env();
    pthread_mutex_unlock(&emu_mu);
}

/* ---- the device ----------------------------------------------------------------------------- */

static const char emu_name[] = "CUDA emulator on the CPU (JITFIT_CUDA_EMULATE)";

int jf_emu_status(char *buf, size_t n) {
    snprintf(buf, n, "available: %s, sm_90", emu_name);
    return 1;
}

void jf_emu_arch(int *major, int *minor) {
    *major = 9;
    *minor = 0;
}

void jf_emu_driver_facts_get(jf_cuda_driver_facts *out) {
    memset(out, 0, sizeof *out);
    out->loaded = 1;
    out->version = 13000;
    out->device_count = 1;
    out->cond_create = 1;
}

int jf_emu_gpu_facts_get(int ordinal, jf_cuda_gpu_facts *out, char *why, size_t n) {
    memset(out, 0, sizeof *out);
    if (ordinal != 0) {
        snprintf(why, n, "unavailable: no such CUDA device");
        return JF_ERR_UNAVAILABLE;
    }
    snprintf(out->name, sizeof out->name, "%s", emu_name);
    out->major = 9;
    out->sm_count = 1;
    jf_emu_mem_info(&out->mem_free, &out->mem_total);
    return JF_OK;
}

/* ---- memory --------------------------------------------------------------------------------- */

/* Allocations carry their size in front (for the free-memory count), 256 bytes like the driver's
 * alignment. */
#define EMU_HEAD 256

/* JITFIT_CUDA_EMULATE_FAIL=alloc>BYTES (read at each allocation, so a test can set it between
 * calls): allocations larger than BYTES fail as a crowded GPU's would, though the free memory
 * reported says they fit; SIZE_MAX when not set. */
static size_t emu_alloc_limit(void) {
    const char *f = getenv("JITFIT_CUDA_EMULATE_FAIL");
    if (!f || strncmp(f, "alloc>", 6) != 0) return (size_t)-1;
    double d = strtod(f + 6, NULL);
    return d >= 0 && d < 0x1p62 ? (size_t)d : (size_t)-1;
}

int jf_emu_alloc(jf_devptr *p, size_t bytes, char *why, size_t n) {
    *p = 0;
    if (!bytes) bytes = 8;
    pthread_mutex_lock(&emu_mu);
    int room = bytes <= emu_total - emu_used && bytes <= emu_alloc_limit();
    if (room) emu_used += bytes;
    pthread_mutex_unlock(&emu_mu);
    void *mem = NULL;
    if (room && posix_memalign(&mem, EMU_HEAD, EMU_HEAD + bytes) != 0) mem = NULL;
    if (!mem) {
        if (room) {
            pthread_mutex_lock(&emu_mu);
            emu_used -= bytes;
            pthread_mutex_unlock(&emu_mu);
        }
        char limit[80] = "";
        if (bytes > emu_alloc_limit())
            snprintf(limit, sizeof limit, ", JITFIT_CUDA_EMULATE_FAIL=alloc>%zu refuses %zu",
                     emu_alloc_limit(), bytes);
        snprintf(why, n, "cannot allocate device memory: out of memory (emulated device: %zu of "
                 "%zu bytes in use%s)", emu_used, emu_total, limit);
        return JF_ERR_NOMEM;
    }
    memcpy(mem, &bytes, sizeof bytes);
    /* all bits set: a double read before it was written is NaN */
    memset((char *)mem + EMU_HEAD, 0xff, bytes);
    *p = (jf_devptr)(uintptr_t)((char *)mem + EMU_HEAD);
    return JF_OK;
}

void jf_emu_free(jf_devptr p) {
    if (!p) return;
    char *mem = (char *)(uintptr_t)p - EMU_HEAD;
    size_t bytes;
    memcpy(&bytes, mem, sizeof bytes);
    pthread_mutex_lock(&emu_mu);
    emu_used -= bytes;
    pthread_mutex_unlock(&emu_mu);
    free(mem);
}

int jf_emu_mem_info(size_t *free_bytes, size_t *total_bytes) {
    pthread_once(&emu_once, emu_read_env);
    pthread_mutex_lock(&emu_mu);
    *free_bytes = emu_total - emu_used;
    *total_bytes = emu_total;
    pthread_mutex_unlock(&emu_mu);
    return JF_OK;
}

/* ---- modules -------------------------------------------------------------------------------- */

typedef int (*emu_launch_fn)(void (*body)(void **), void **args, unsigned grid, unsigned block,
                             char *why, size_t n);

typedef struct emu_module emu_module;

/* A kernel of a loaded module. */
typedef struct emu_fn {
    emu_module *mod;          /* its module */
    void (*body)(void **);    /* calls the kernel with the unpacked arguments */
    size_t nargs;             /* number of arguments */
    const size_t *sizes;      /* their sizes in bytes */
    unsigned max_block;       /* most threads per block: its __launch_bounds__, else 1024 */
    struct emu_fn *next;      /* the module's list */
} emu_fn;

struct emu_module {
    void *dl;                 /* the dlopen handle */
    emu_launch_fn launch;     /* its scheduler */
    emu_fn *fns;              /* kernels looked up */
};

/* Appends the kernel names of src (the identifiers after `__global__ void`, past an optional
 * __launch_bounds__(...)) as trampoline definitions to b, with each bound as a function the
 * launches check. Returns the number of kernels. */
static size_t add_trampolines(jf_buf *b, const char *src) {
    size_t count = 0;
    for (const char *s = strstr(src, "__global__"); s; s = strstr(s + 1, "__global__")) {
        const char *p = s + strlen("__global__");
        while (*p == ' ' || *p == '\n' || *p == '\t') p++;
        if (strncmp(p, "void", 4) != 0) continue;
        p += 4;
        while (*p == ' ' || *p == '\n' || *p == '\t') p++;
        const char *bound = NULL; /* __launch_bounds__'s first argument, up to its ')' */
        size_t bound_len = 0;
        if (strncmp(p, "__launch_bounds__", 17) == 0) {
            bound = strchr(p, '(');
            p = strchr(p, ')');
            if (!p || !bound || bound > p) break;
            bound++;
            bound_len = strcspn(bound, ",)");
            p++;
            while (*p == ' ' || *p == '\n' || *p == '\t') p++;
        }
        size_t len = 0;
        while ((p[len] >= 'a' && p[len] <= 'z') || (p[len] >= 'A' && p[len] <= 'Z') ||
               (p[len] >= '0' && p[len] <= '9') || p[len] == '_')
            len++;
        if (len == 0 || p[len] != '(') continue;
        jf_buf_printf(b,
                      "extern \"C\" void jf_emu_body_%.*s(void **a) { jf_emu_invoke(%.*s, a); }\n"
                      "extern \"C\" size_t jf_emu_args_%.*s(const size_t **s) {"
                      " return jf_emu_arg_sizes(%.*s, s); }\n",
                      (int)len, p, (int)len, p, (int)len, p, (int)len, p);
        /* the threads per block the kernel was compiled for: a GPU refuses a launch of more */
        if (bound)
            jf_buf_printf(b, "extern \"C\" unsigned int jf_emu_bound_%.*s(void) { return (%.*s); }\n",
                          (int)len, p, (int)bound_len, bound);
        count++;
    }
    return count;
}

int jf_emu_module_load(const void *image, void **module, char *why, size_t n) {
    *module = NULL;
    const char *src = image;
    jf_buf b = {0};
    pthread_mutex_lock(&emu_mu);
    unsigned long ulps = emu_ulps;
    pthread_mutex_unlock(&emu_mu);
    if (ulps) jf_buf_printf(&b, "#define JF_EMU_ULPS %luul\n", ulps);
    jf_buf_puts(&b, jf_embed_cuda_emu_device_h);
    jf_buf_puts(&b, src);
    jf_buf_puts(&b, "\n/* ---- emulator entry points ---- */\n");
    add_trampolines(&b, src);
    char *tu = jf_buf_take(&b);
    if (!tu) {
        snprintf(why, n, "out of memory");
        return JF_ERR_NOMEM;
    }
    char dir[4096], so[4200];
    if (jf_cc_tmpdir(dir, sizeof dir) != JF_OK) {
        free(tu);
        snprintf(why, n, "cannot create a temporary directory: %s", strerror(errno));
        return JF_ERR_IO;
    }
    char *log = NULL;
    /* C++ after the C defaults; no _FORTIFY_SOURCE, whose longjmp check rejects the jumps
     * between coroutine stacks */
    int st = jf_cc_compile(jf_cc_command(NULL), "-x c++ -std=gnu++17 -O1 -w -U_FORTIFY_SOURCE", tu, dir, so,
                           sizeof so, &log);
    free(tu);
    void *dl = NULL;
    if (st == JF_OK) dl = jf_cc_load_file(so, why, n);
    else snprintf(why, n, "emulated module does not compile: %.*s",
                  (int)strcspn(log ? log : "", "\n"), log ? log : "");
    free(log);
    jf_cc_tmpdir_remove(dir);
    if (!dl) return st == JF_OK ? JF_ERR_COMPILE : st;
    emu_module *m = calloc(1, sizeof *m);
    if (!m) {
        dlclose(dl);
        snprintf(why, n, "out of memory");
        return JF_ERR_NOMEM;
    }
    m->dl = dl;
    *(void **)&m->launch = dlsym(dl, "jf_emu_launch");
    if (!m->launch) {
        dlclose(dl);
        free(m);
        snprintf(why, n, "emulated module has no scheduler");
        return JF_ERR_COMPILE;
    }
    *module = m;
    return JF_OK;
}

size_t jf_emu_local_reserve(void *fn) {
    (void)fn;
    pthread_mutex_lock(&emu_mu);
    size_t b = emu_local * 2048;
    pthread_mutex_unlock(&emu_mu);
    return b;
}

void jf_emu_module_unload(void *module) {
    emu_module *m = module;
    if (!m) return;
    while (m->fns) {
        emu_fn *f = m->fns;
        m->fns = f->next;
        free(f);
    }
    dlclose(m->dl);
    free(m);
}

void *jf_emu_module_function(void *module, const char *name, char *why, size_t n) {
    emu_module *m = module;
    char sym[256];
    emu_fn *f = calloc(1, sizeof *f);
    if (!f) {
        snprintf(why, n, "out of memory");
        return NULL;
    }
    size_t (*args)(const size_t **) = NULL;
    snprintf(sym, sizeof sym, "jf_emu_body_%s", name);
    *(void **)&f->body = dlsym(m->dl, sym);
    snprintf(sym, sizeof sym, "jf_emu_args_%s", name);
    *(void **)&args = dlsym(m->dl, sym);
    if (!f->body || !args) {
        free(f);
        snprintf(why, n, "no kernel %s in the CUDA module (emulated)", name);
        return NULL;
    }
    f->nargs = args(&f->sizes);
    unsigned int (*bound)(void) = NULL;
    snprintf(sym, sizeof sym, "jf_emu_bound_%s", name);
    *(void **)&bound = dlsym(m->dl, sym);
    f->max_block = bound ? bound() : 1024u;
    f->mod = m;
    pthread_mutex_lock(&emu_mu);
    f->next = m->fns;
    m->fns = f;
    pthread_mutex_unlock(&emu_mu);
    return f;
}

/* JITFIT_CUDA_EMULATE_FAIL=launch#K (read at each launch, so a test can set it between calls):
 * the K-th launch since the variable took that value is refused, as a driver refuses a launch
 * it cannot run. Called with emu_mu held. */
static int emu_launch_refused(void) {
    static char seen[64];
    static unsigned long count;
    const char *f = getenv("JITFIT_CUDA_EMULATE_FAIL");
    if (!f || strncmp(f, "launch#", 7) != 0) {
        seen[0] = '\0';
        return 0;
    }
    if (strcmp(f, seen) != 0) {
        snprintf(seen, sizeof seen, "%s", f);
        count = 0;
    }
    return ++count == strtoul(f + 7, NULL, 10);
}

/* A launch of more threads per block than the kernel's __launch_bounds__: the driver refuses it
 * (CUDA_ERROR_INVALID_VALUE: its registers were allotted for that many). 1 with the reason. */
static int over_bound(const emu_fn *f, unsigned block, char *why, size_t n) {
    if (block <= f->max_block) return 0;
    snprintf(why, n, "kernel launch failed: %u threads per block, more than the kernel's "
             "__launch_bounds__ (%u) (emulated)", block, f->max_block);
    return 1;
}

int jf_emu_launch(void *fn, unsigned grid, unsigned block, void **args, char *why, size_t n) {
    emu_fn *f = fn;
    if (over_bound(f, block, why, n)) return JF_ERR_INTERNAL;
    pthread_mutex_lock(&emu_mu);
    int refused = emu_launch_refused();
    int r = refused ? -1 : f->mod->launch(f->body, args, grid, block, why, n);
    pthread_mutex_unlock(&emu_mu);
    if (refused)
        snprintf(why, n, "kernel launch failed: refused (JITFIT_CUDA_EMULATE_FAIL=%.40s)",
                 getenv("JITFIT_CUDA_EMULATE_FAIL"));
    return r == 0 ? JF_OK : JF_ERR_INTERNAL;
}

/* ---- graphs --------------------------------------------------------------------------------- */

enum { NODE_KERNEL, NODE_COPY, NODE_WHILE };

typedef struct emu_seq emu_seq;

typedef struct emu_node {
    int kind;                 /* NODE_* */
    emu_fn *fn;               /* kernel: the function, launch shape and a copy of the args */
    unsigned grid, block;
    unsigned char *argbuf;
    void **argv;
    jf_devptr dst;            /* copy: host src to device dst */
    const void *src;
    size_t bytes;
    emu_seq *body;            /* WHILE: the body, run while *cond != 0 */
    unsigned *cond;
    struct emu_node **deps;   /* nodes of the same sequence this one waits for */
    size_t ndeps;
    int done;                 /* run in the current execution of its sequence */
} emu_node;

struct emu_seq {
    emu_node **nodes;
    size_t n, cap;
};

/* Most WHILE handles of one graph. */
#define EMU_MAX_CONDS 8

typedef struct emu_graph {
    emu_seq top;              /* the graph */
    emu_seq *body;            /* the open WHILE body, or NULL */
    emu_node *last, *last_body; /* last node of each sequence */
    unsigned cond[EMU_MAX_CONDS]; /* the conditions (a handle is an address in here) */
    int ncond;
    int instantiated;
    unsigned long syncs;
} emu_graph;

int jf_emu_graph_new(jf_cuda_graph **out, char *why, size_t n) {
    emu_graph *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(why, n, "out of memory");
        *out = NULL;
        return JF_ERR_NOMEM;
    }
    *out = (jf_cuda_graph *)g;
    return JF_OK;
}

static void seq_free(emu_seq *s) {
    for (size_t i = 0; i < s->n; i++) {
        emu_node *nd = s->nodes[i];
        if (nd->body) {
            seq_free(nd->body);
            free(nd->body);
        }
        free(nd->argbuf);
        free(nd->argv);
        free(nd->deps);
        free(nd);
    }
    free(s->nodes);
}

void jf_emu_graph_free(jf_cuda_graph *gg) {
    emu_graph *g = (emu_graph *)gg;
    if (!g) return;
    seq_free(&g->top);
    free(g);
}

/* Adds nd to the current sequence with its dependencies (as jf_cuda_graph_kernel_deps). */
static int add_node(emu_graph *g, emu_node *nd, void *const *deps, int ndeps, void **node_out,
                    char *why, size_t n) {
    emu_seq *s = g->body ? g->body : &g->top;
    emu_node **last = g->body ? &g->last_body : &g->last;
    if (g->instantiated) {
        snprintf(why, n, "emulated graph: node added after instantiation");
        return JF_ERR_INTERNAL;
    }
    size_t k = 0, want = ndeps < 0 ? 1 : (size_t)ndeps;
    nd->deps = want ? calloc(want, sizeof *nd->deps) : NULL;
    if (want && !nd->deps) goto nomem;
    if (ndeps < 0) {
        if (*last) nd->deps[k++] = *last;
    } else {
        for (int i = 0; i < ndeps && i < JF_CUDA_GRAPH_MAX_DEPS; i++) {
            if (!deps[i]) continue;
            emu_node *d = deps[i];
            int mine = 0; /* a dependency must be a node of the same sequence */
            for (size_t j = 0; j < s->n && !mine; j++) mine = s->nodes[j] == d;
            if (!mine) {
                snprintf(why, n, "emulated graph: a dependency is not a node of this graph level");
                free(nd->deps);
                return JF_ERR_INTERNAL;
            }
            nd->deps[k++] = d;
        }
    }
    nd->ndeps = k;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        emu_node **v = realloc(s->nodes, cap * sizeof *v);
        if (!v) goto nomem;
        s->nodes = v;
        s->cap = cap;
    }
    s->nodes[s->n++] = nd;
    *last = nd;
    if (node_out) *node_out = nd;
    return JF_OK;
nomem:
    free(nd->deps);
    snprintf(why, n, "out of memory");
    return JF_ERR_NOMEM;
}

int jf_emu_graph_kernel_deps(jf_cuda_graph *gg, void *fn, unsigned grid, unsigned block,
                             void **args, void *const *deps, int ndeps, void **node_out,
                             char *why, size_t n) {
    emu_graph *g = (emu_graph *)gg;
    emu_fn *f = fn;
    if (over_bound(f, block, why, n)) return JF_ERR_INTERNAL;
    emu_node *nd = calloc(1, sizeof *nd);
    size_t total = 0;
    for (size_t i = 0; i < f->nargs; i++) total += (f->sizes[i] + 15) / 16 * 16;
    if (nd) {
        nd->argbuf = malloc(total ? total : 1);
        nd->argv = malloc((f->nargs ? f->nargs : 1) * sizeof *nd->argv);
    }
    if (!nd || !nd->argbuf || !nd->argv) {
        if (nd) {
            free(nd->argbuf);
            free(nd->argv);
        }
        free(nd);
        snprintf(why, n, "out of memory");
        return JF_ERR_NOMEM;
    }
    /* the argument values are copied now, as cuGraphAddKernelNode does */
    size_t at = 0;
    for (size_t i = 0; i < f->nargs; i++) {
        memcpy(nd->argbuf + at, args[i], f->sizes[i]);
        nd->argv[i] = nd->argbuf + at;
        at += (f->sizes[i] + 15) / 16 * 16;
    }
    nd->kind = NODE_KERNEL;
    nd->fn = f;
    nd->grid = grid;
    nd->block = block;
    int st = add_node(g, nd, deps, ndeps, node_out, why, n);
    if (st != JF_OK) {
        free(nd->argbuf);
        free(nd->argv);
        free(nd);
    }
    return st;
}

int jf_emu_graph_copy_deps(jf_cuda_graph *gg, jf_devptr dst, const void *src, size_t bytes,
                           void *const *deps, int ndeps, void **node_out, char *why, size_t n) {
    emu_graph *g = (emu_graph *)gg;
    emu_node *nd = calloc(1, sizeof *nd);
    if (!nd) {
        snprintf(why, n, "out of memory");
        return JF_ERR_NOMEM;
    }
    nd->kind = NODE_COPY;
    nd->dst = dst;
    nd->src = src;
    nd->bytes = bytes;
    int st = add_node(g, nd, deps, ndeps, node_out, why, n);
    if (st != JF_OK) free(nd);
    return st;
}

void *jf_emu_graph_last(jf_cuda_graph *gg) {
    emu_graph *g = (emu_graph *)gg;
    return g->body ? g->last_body : g->last;
}

int jf_emu_graph_while_handle(jf_cuda_graph *gg, unsigned long long *handle, char *why, size_t n) {
    emu_graph *g = (emu_graph *)gg;
    *handle = 0;
    if (g->ncond == EMU_MAX_CONDS) {
        snprintf(why, n, "emulated graph: too many conditional handles");
        return JF_ERR_UNAVAILABLE;
    }
    *handle = (unsigned long long)(uintptr_t)&g->cond[g->ncond++];
    return JF_OK;
}

int jf_emu_graph_while_begin(jf_cuda_graph *gg, unsigned long long handle, char *why, size_t n) {
    emu_graph *g = (emu_graph *)gg;
    if (g->body || emu_fail_while) {
        snprintf(why, n, "cannot add a WHILE node to the CUDA graph: %s",
                 emu_fail_while ? "refused (JITFIT_CUDA_EMULATE_FAIL=while)"
                                : "one is open already");
        return JF_ERR_UNAVAILABLE;
    }
    emu_node *nd = calloc(1, sizeof *nd);
    emu_seq *body = calloc(1, sizeof *body);
    if (!nd || !body) {
        free(nd);
        free(body);
        snprintf(why, n, "out of memory");
        return JF_ERR_NOMEM;
    }
    nd->kind = NODE_WHILE;
    nd->cond = (unsigned *)(uintptr_t)handle;
    int st = add_node(g, nd, NULL, -1, NULL, why, n);
    if (st != JF_OK) {
        free(nd);
        free(body);
        return st;
    }
    nd->body = body;
    g->body = body;
    g->last_body = NULL;
    return JF_OK;
}

void jf_emu_graph_while_end(jf_cuda_graph *gg) {
    emu_graph *g = (emu_graph *)gg;
    g->body = NULL;
    g->last_body = NULL;
}

int jf_emu_graph_instantiate(jf_cuda_graph *gg, char *why, size_t n) {
    emu_graph *g = (emu_graph *)gg;
    if (g->body) {
        snprintf(why, n, "emulated graph: instantiated with an open WHILE body");
        return JF_ERR_INTERNAL;
    }
    g->instantiated = 1;
    return JF_OK;
}

/* Most executions of one WHILE body per launch before the emulator calls it a runaway loop. */
#define EMU_MAX_TRIPS 1000000

/* Runs every node of s once, dependencies first, choosing among the ready nodes the one added
 * last. */
static int run_seq(emu_seq *s, char *why, size_t n) {
    for (size_t i = 0; i < s->n; i++) s->nodes[i]->done = 0;
    for (size_t left = s->n; left > 0; left--) {
        emu_node *pick = NULL;
        for (size_t i = s->n; i-- > 0 && !pick;) {
            emu_node *nd = s->nodes[i];
            if (nd->done) continue;
            int ready = 1;
            for (size_t d = 0; d < nd->ndeps && ready; d++) ready = nd->deps[d]->done;
            if (ready) pick = nd;
        }
        if (!pick) {
            snprintf(why, n, "emulated graph: a dependency cycle");
            return JF_ERR_INTERNAL;
        }
        int st = JF_OK;
        if (pick->kind == NODE_KERNEL) {
            if (pick->fn->mod->launch(pick->fn->body, pick->argv, pick->grid, pick->block, why, n))
                st = JF_ERR_INTERNAL;
        } else if (pick->kind == NODE_COPY) {
            memcpy((void *)(uintptr_t)pick->dst, pick->src, pick->bytes);
        } else {
            unsigned long trips = 0;
            while (st == JF_OK && *pick->cond) {
                if (++trips > EMU_MAX_TRIPS) {
                    snprintf(why, n, "emulated graph: a WHILE node ran %d times", EMU_MAX_TRIPS);
                    st = JF_ERR_INTERNAL;
                } else {
                    st = run_seq(pick->body, why, n);
                }
            }
        }
        if (st != JF_OK) return st;
        pick->done = 1;
    }
    return JF_OK;
}

int jf_emu_graph_launch(jf_cuda_graph *gg, char *why, size_t n) {
    emu_graph *g = (emu_graph *)gg;
    if (!g->instantiated) {
        snprintf(why, n, "emulated graph: launched before instantiation");
        return JF_ERR_INTERNAL;
    }
    /* CU_GRAPH_COND_ASSIGN_DEFAULT with default 0: every launch starts with the conditions 0 */
    memset(g->cond, 0, sizeof g->cond);
    pthread_mutex_lock(&emu_mu);
    int st = run_seq(&g->top, why, n);
    pthread_mutex_unlock(&emu_mu);
    return st;
}

int jf_emu_graph_sync(jf_cuda_graph *gg, char *why, size_t n) {
    (void)why;
    (void)n;
    ((emu_graph *)gg)->syncs++;
    return JF_OK;
}

unsigned long jf_emu_graph_syncs(const jf_cuda_graph *gg) {
    return ((const emu_graph *)gg)->syncs;
}
