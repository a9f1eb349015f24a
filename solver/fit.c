/* The fitting API of include/jitfit.h: jf_fit, jf_fit_batch and their options and results.
 *
 * A fit runs in data-flow order: check the call (arguments, data, bounds, starting point) →
 * obtain the model's kernels (JIT or cache, runtime/kernels.h) → the trust-region solver
 * (lm.c, threaded over the data) → covariance at the solution (covar.c) → statistics (one
 * residual pass) → result. A batch checks its shared options once, obtains the kernels once and
 * runs the fits in parallel over fits, each single-threaded; since chunking never depends on
 * the thread count (threads.c), a batch result is bit-identical to the same jf_fit.
 *
 * Errors are values: every failure returns a jf_status and, when asked, a one-line errmsg the
 * caller frees with jf_free. A fit that ran but did not converge is not an error: its result
 * carries the status.
 */
#include <ctype.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "../codegen/model.h"
#include "../runtime/device.h"
#include "../runtime/jit_nvrtc.h"
#include "lsq_core.h"
#include "solver.h"

int jf_fit_host_resident = 0;

/* Length of the message buffers inside a result. */
#define MSG_LEN 512

/* The most threads a call may ask for (jf_fit_options.nthreads; the CLI's --threads limit). */
#define NTHREADS_MAX 4096

/* A result and the storage its const char * fields point into. pub comes first so that the
 * public pointer is also the allocation. */
typedef struct result_block {
    jf_fit_result pub;     /* what the caller sees */
    char message[MSG_LEN]; /* pub.message */
    char *warning;         /* pub.warning (malloc'd by the kernel layer), or NULL */
    char device_note[MSG_LEN]; /* pub.device_note: where the fit ran and why */
} result_block;

/* Options checked once for all fits of a call. */
typedef struct fit_setup {
    const struct jf_model *m; /* the model */
    jf_fit_options o;         /* the options with defaults filled in */
    double *lo, *hi;          /* resolved bounds (np each) */
    size_t max_nfev;          /* resolved evaluation budget */
    jf_kernels *k;            /* CPU kernels, shared by all fits (NULL for a GPU fit) */
    int gpu;                  /* 1: the fit runs on the GPU with ck */
    struct jf_cuda_kernels *ck; /* the GPU kernels, or NULL */
    int cuda_cache;           /* jf_cache_result of obtaining ck */
    double compile_ms;        /* time to obtain them */
    char *warning;            /* kernel-layer warning (fallback to the interpreter), or NULL */
    char device_note[MSG_LEN]; /* jf_device_choose's reason, copied into every result */
    const jf_fixed_plan *fx;  /* parameters held fixed: m is fx->reduced, and fit i hands its
                                 passes fx->held's row i (fixed.c); NULL when none is */
} fit_setup;

/* Fit i's held values (fit_setup.fx), or NULL. */
static const double *held_row(const fit_setup *s, size_t i) {
    return s->fx ? jf_fixed_held(s->fx, i) : NULL;
}

JF_PRINTF(3, 4)
static int fail(char **errmsg, int status, const char *fmt, ...) {
    if (errmsg) {
        char buf[MSG_LEN];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        *errmsg = strdup(buf);
    }
    return status;
}

jf_fit_options jf_fit_options_default(void) {
    jf_fit_options o;
    memset(&o, 0, sizeof o);
    o.loss = JF_LOSS_LINEAR;
    o.f_scale = 1.0;
    o.ftol = 1e-8;
    o.xtol = 1e-8;
    o.gtol = 1e-8;
    o.max_nfev = 0;
    o.device = JF_DEVICE_AUTO;
    o.nthreads = 0;
    o.backend = JF_BACKEND_C;
    return o;
}

int jf_loss_from_name(const char *name) {
    static const char *const names[] = {"linear", "soft_l1", "huber", "cauchy", "arctan"};
    if (!name) return -1;
    for (int i = 0; i < 5; i++)
        if (strcmp(name, names[i]) == 0) return i;
    return -1;
}

int jf_memory_size_from_text(const char *text, size_t *bytes) {
    static const struct {
        const char *unit;
        double factor;
    } units[] = {{"", 1}, {"b", 1}, {"k", 0x1p10}, {"kib", 0x1p10}, {"kb", 1e3},
                 {"m", 0x1p20}, {"mib", 0x1p20}, {"mb", 1e6}, {"g", 0x1p30}, {"gib", 0x1p30},
                 {"gb", 1e9}, {"t", 0x1p40}, {"tib", 0x1p40}, {"tb", 1e12}};
    if (!text || !bytes) return -1;
    size_t len = strlen(text), u = len;
    while (u > 0 && isalpha((unsigned char)text[u - 1])) u--;
    /* decimal only: no hex, no blanks, no "inf" or "nan" (those end in letters anyway) */
    if (u == 0 || u > 63 || strspn(text, "0123456789.eE+-") != u) return -1;
    char num[64], *end;
    memcpy(num, text, u);
    num[u] = '\0';
    /* the "C" locale for this thread only: a host program's locale may use ',' */
    locale_t c_loc = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    locale_t old = c_loc ? uselocale(c_loc) : (locale_t)0;
    double v = strtod(num, &end);
    if (c_loc) {
        uselocale(old);
        freelocale(c_loc);
    }
    if (end != num + u || !(v >= 0) || !isfinite(v)) return -1;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcasecmp(text + u, units[i].unit) == 0) {
            double b = floor(v * units[i].factor);
            if (!(b < 0x1p63)) return -1;
            *bytes = (size_t)b;
            return 0;
        }
    return -1;
}

const char *jf_fit_status_string(int status) {
    switch (status) {
    case JF_FIT_RUNNING: return "running";
    case JF_FIT_FTOL: return "converged: relative reduction of the cost below ftol";
    case JF_FIT_XTOL: return "converged: relative step below xtol";
    case JF_FIT_FTOL_XTOL: return "converged: relative reduction below ftol and step below xtol";
    case JF_FIT_GTOL: return "converged: scaled gradient below gtol";
    case JF_FIT_MAX_NFEV: return "stopped: evaluation budget (max_nfev) spent";
    case JF_FIT_STALLED: return "stopped: no further reduction of the cost is possible";
    case JF_FIT_NONFINITE: return "failed: non-finite residuals or Jacobian at the start";
    case JF_FIT_UNUSED_PARAM: return "a parameter has no influence on the model on these data (the others converged)";
    default: return "unknown fit status";
    }
}

void jf_fit_result_free(jf_fit_result *r) {
    if (!r) return;
    result_block *b = (result_block *)r;
    free(b->warning);
    free(b); /* the arrays live in the same allocation (result_alloc) */
}

static void setup_free(fit_setup *s) {
    free(s->lo);
    free(s->hi);
    jf_kernels_free(s->k);
    jf_cuda_kernels_free(s->ck);
    free(s->warning);
    memset(s, 0, sizeof *s);
}

/* The CPU kernels of the setup's model (also after a GPU fit fell back to the CPU). */
static int setup_cpu_kernels(fit_setup *s, char **errmsg) {
    const jf_fit_options *o = &s->o;
    jf_backend b = o->backend == JF_BACKEND_INTERP ? JF_BACKEND_INTERP : JF_BACKEND_C;
    jf_jit_options jo;
    memset(&jo, 0, sizeof jo);
    jo.no_cache = o->no_cache;
    jo.vector_math = o->vector_math;
    double t0 = jf_clock_ms();
    int st = jf_kernels_get(s->m, b, &jo, &s->k, &s->warning);
    s->compile_ms += jf_clock_ms() - t0;
    /* a GPU batch gets the CPU kernels too, to finish fits on the host: there the fits ran
     * in fp32 as asked, and the note would contradict the report's backend */
    if (st == JF_OK && o->single_precision && !s->gpu) {
        static const char note[] = "single precision applies to GPU fits: the CPU evaluates in fp64";
        size_t len = s->warning ? strlen(s->warning) : 0;
        char *w = malloc(len + sizeof note + 2);
        if (w) {
            snprintf(w, len + sizeof note + 2, "%s%s%s", s->warning ? s->warning : "",
                     len ? "; " : "", note);
            free(s->warning);
            s->warning = w;
        }
    }
    if (st != JF_OK) {
        if (s->warning) st = fail(errmsg, st, "%s", s->warning);
        else st = fail(errmsg, st, "cannot obtain the model's kernels: %s", jf_status_string(st));
    }
    return st;
}

/* The JIT options of the GPU kernels (the batch module's too), and the loss the model's are
 * built for: normal_eq for the fit's loss alone when it is linear, the common case and the
 * quicker compile; for any loss otherwise, since the statistics need a linear pass. */
static jf_jit_options gpu_jit_options(const fit_setup *s, int *loss) {
    jf_jit_options jo;
    memset(&jo, 0, sizeof jo);
    jo.no_cache = s->o.no_cache;
    jo.single_precision = s->o.single_precision;
    jo.cuda_no_normal_eq = jf_gpu_large_p(s->m->np); /* cuBLAS forms the sums then */
    *loss = s->o.loss == JF_LOSS_LINEAR ? JF_LOSS_LINEAR : -1;
    return jo;
}

/* The model's GPU kernels. */
static int setup_gpu_kernels(fit_setup *s, char *why, size_t n) {
    int loss;
    jf_jit_options jo = gpu_jit_options(s, &loss);
    char warn[MSG_LEN] = "";
    jf_cache_result cache = JF_CACHE_NONE;
    double t0 = jf_clock_ms();
    int st = jf_cuda_kernels_get(s->m, &jo, loss, &s->ck, &cache, why, n, warn, sizeof warn);
    s->compile_ms += jf_clock_ms() - t0;
    s->cuda_cache = (int)cache;
    if (warn[0] && !s->warning) s->warning = strdup(warn);
    return st;
}

/* What a GPU run of nfits fits would compile (the device choice's jf_device_request.compiles):
 * the model's kernels, and the solver module (one fit) or the batch module, each unless the
 * kernel cache has it. The sources are those the run would build. */
typedef struct compiles_ctx {
    const fit_setup *s;
    size_t nfits, total; /* total: the fits' points in all (the batch kernel's choice) */
    int weighted;        /* one fit: it has sigma (a column more on the device) */
} compiles_ctx;

static void gpu_compiles(void *ctx, jf_device_compiles *out) {
    const compiles_ctx *c = ctx;
    const fit_setup *s = c->s;
    int loss;
    jf_jit_options jo = gpu_jit_options(s, &loss);
    char *src = jf_cuda_model_source(s->m, &jo, loss);
    out->model = !src || !jf_cuda_module_cached(src, &jo);
    free(src);
    if (c->nfits > 1) {
        src = jf_batch_cuda_source(s->m, (int)s->o.loss, jo.single_precision,
                                   jf_batch_cuda_kernel(s->m->np, c->nfits, c->total));
        int missing = !src || !jf_cuda_module_cached(src, &jo);
        if (jf_batch_cuda_register_sums(s->m->np)) out->batch = missing;
        else out->batch_tiled = missing;
    } else {
        src = jf_lm_cuda_source(0);
        out->solver = !src || !jf_cuda_module_cached(src, NULL);
    }
    free(src);
}

/* jf_device_request.streams: whether one fit's data exceed the usable GPU memory, as
 * solve_gpu will find (it streams them then). */
static int gpu_streams(void *ctx) {
    const compiles_ctx *c = ctx;
    const struct jf_model *m = c->s->m;
    return c->nfits <= 1 &&
           jf_gpu_problem_bytes(c->total, m->np, m->nheld, m->nv, c->weighted) >
               jf_gpu_usable_memory(c->s->o.max_gpu_mem);
}

/* Checks what all fits of a call share, decides the device and obtains the kernels. npoints
 * (the longest fit's) and nfits size the device choice, total (all fits' points) says which
 * batch kernel would run; columns: a batch's results go into arrays; weighted: one fit with
 * sigma (whether its data would be streamed). */
static int setup_init(fit_setup *s, const jf_model *m, const jf_fit_options *opts, size_t npoints,
                      size_t nfits, size_t total, int columns, int weighted, char **errmsg) {
    memset(s, 0, sizeof *s);
    s->m = m;
    s->o = opts ? *opts : jf_fit_options_default();
    const jf_fit_options *o = &s->o;
    size_t np = m->np;
    if (o->backend != JF_BACKEND_C && o->backend != JF_BACKEND_INTERP &&
        o->backend != JF_BACKEND_CUDA)
        return fail(errmsg, JF_ERR_ARG, "unknown backend %d", o->backend);
    if (o->backend == JF_BACKEND_CUDA && o->device == JF_DEVICE_CPU)
        return fail(errmsg, JF_ERR_ARG, "the cuda backend runs on the GPU: use device gpu or auto");
    if (np == 0) return fail(errmsg, JF_ERR_ARG, "the model has no parameters to fit");
    if ((int)o->loss < 0 || (int)o->loss > JF_LOSS_ARCTAN)
        return fail(errmsg, JF_ERR_ARG, "unknown loss %d", (int)o->loss);
    if (!(o->f_scale > 0) || !isfinite(o->f_scale))
        return fail(errmsg, JF_ERR_ARG, "f_scale must be positive and finite (got %g)",
                    o->f_scale);
    /* a robust cost is f_scale² rho(r²/f_scale²): beyond these every fit would end on
     * NONFINITE, its message blaming the data */
    double fs2 = o->f_scale * o->f_scale;
    if (o->loss != JF_LOSS_LINEAR && !(fs2 >= DBL_MIN && fs2 <= DBL_MAX))
        return fail(errmsg, JF_ERR_ARG,
                    "f_scale %g is out of range for a robust loss: its square must be a normal "
                    "double (f_scale from about 1.5e-154 to 1.3e154)",
                    o->f_scale);
    if (!(o->ftol >= 0) || !(o->xtol >= 0) || !(o->gtol >= 0))
        return fail(errmsg, JF_ERR_ARG, "ftol, xtol and gtol must be >= 0 (got %g, %g, %g)",
                    o->ftol, o->xtol, o->gtol);
    if (o->nthreads < 0)
        return fail(errmsg, JF_ERR_ARG, "nthreads must be >= 0 (0: all cores; got %d)", o->nthreads);
    /* every thread asked for is created (20000 took 15 s for a fit of 2 ms) */
    if (o->nthreads > NTHREADS_MAX)
        return fail(errmsg, JF_ERR_ARG, "nthreads must be at most %d (got %d)", NTHREADS_MAX,
                    o->nthreads);
    /* as scipy: with every tolerance below ε no test can ever pass, and a good fit would end
     * as "stalled" (not a success) */
    if (o->ftol < JF_STEP_EPS && o->xtol < JF_STEP_EPS && o->gtol < JF_STEP_EPS)
        return fail(errmsg, JF_ERR_ARG,
                    "at least one of ftol, xtol and gtol must be at least machine epsilon "
                    "(2.2e-16; got %g, %g, %g)",
                    o->ftol, o->xtol, o->gtol);
    if (o->x_scale)
        for (size_t k = 0; k < np; k++)
            if (!(o->x_scale[k] > 0) || !isfinite(o->x_scale[k]))
                return fail(errmsg, JF_ERR_ARG,
                            "x_scale of parameter '%s' must be positive and finite (got %g)",
                            m->param_names[k], o->x_scale[k]);
    s->max_nfev = o->max_nfev ? o->max_nfev : 100 * np;
    s->lo = malloc(np * sizeof(double));
    s->hi = malloc(np * sizeof(double));
    if (!s->lo || !s->hi) return fail(errmsg, JF_ERR_NOMEM, "out of memory");
    char msg[MSG_LEN];
    if (jf_bounds_resolve(m, o->lower, o->upper, s->lo, s->hi, msg, sizeof msg) != JF_OK)
        return fail(errmsg, JF_ERR_ARG, "%s", msg);

    /* Where to run (docs/SOLVER.md, "Device choice"). The cuda backend means the GPU. */
    jf_device want = o->backend == JF_BACKEND_CUDA ? JF_DEVICE_GPU : o->device;
    compiles_ctx cc = {s, nfits, total, weighted};
    jf_device_request req = {want, npoints, np, nfits, o->backend, m->nv,
                             jf_threads_resolve(o->nthreads), gpu_compiles, &cc, 0, 0,
                             gpu_streams};
    /* a GPU batch into arrays whose device computes the fits' statistics: the host only
     * copies records */
    req.columns = columns && jf_batch_cuda_register_sums(np);
    int dev = jf_device_choose(&req, s->device_note, sizeof s->device_note);
    if (dev < 0) return fail(errmsg, -dev, "%s", s->device_note);
    if (dev == JF_DEVICE_GPU) {
        char why[MSG_LEN];
        int st = setup_gpu_kernels(s, why, sizeof why);
        if (st == JF_OK) {
            s->gpu = 1;
            return JF_OK;
        }
        if (want == JF_DEVICE_GPU)
            return fail(errmsg, st, "GPU requested but its kernels failed: %s", why);
        snprintf(s->device_note, sizeof s->device_note, "cpu: the GPU kernels failed (%.400s)", why);
    }
    return setup_cpu_kernels(s, errmsg);
}

/* The data's scans for values that are not finite: the n values of each of x's columns (ldx
 * apart; not when x_checked: a batch's fits that share them) and of y. JF_OK, or JF_ERR_DATA
 * with the message in msg. */
static int scan_data(const fit_setup *s, const double *x, size_t ldx, const double *y, size_t n,
                     int x_checked, jf_pool *pool, char *msg, size_t msgn) {
    const struct jf_model *m = s->m;
    for (size_t j = 0; !x_checked && j < m->nv; j++) {
        size_t bad = jf_first_nonfinite(pool, x + j * ldx, n);
        if (bad) {
            snprintf(msg, msgn, "point %zu: variable '%s' is not finite", bad, m->var_names[j]);
            return JF_ERR_DATA;
        }
    }
    size_t bad = jf_first_nonfinite(pool, y, n);
    if (bad) {
        snprintf(msg, msgn, "point %zu: the response is not finite", bad);
        return JF_ERR_DATA;
    }
    return JF_OK;
}

/* Checks one data set; w receives 1/sigma (n values) when sigma is given. x_checked: its
 * variables' values are known to be finite (a batch's fits that share them). With deferred
 * not NULL, x's and y's scans are left to the caller (*deferred = 1): a fit whose data go up
 * to the GPU staged tests them on the way (solve_gpu), else runs scan_data later. */
static int check_data(const fit_setup *s, const jf_data *d, double **w, char **errmsg,
                      int x_checked, jf_pool *pool, int *deferred) {
    const struct jf_model *m = s->m;
    *w = NULL;
    size_t np = m->np, n = d->n;
    if (n <= np && m->nfixed) /* the reduced model of a fit with held parameters (fixed.c) */
        return fail(errmsg, JF_ERR_ARG,
                    "%zu data point%s for %zu fitted parameter%s (%zu held fixed): a fit needs "
                    "more points than the parameters it fits",
                    n, n == 1 ? "" : "s", np, np == 1 ? "" : "s", m->nfixed);
    if (n <= np)
        return fail(errmsg, JF_ERR_ARG,
                    "%zu data point%s for %zu parameter%s: a fit needs more points than "
                    "parameters",
                    n, n == 1 ? "" : "s", np, np == 1 ? "" : "s");
    if (!d->y) return fail(errmsg, JF_ERR_ARG, "no response values (y is NULL)");
    size_t ldx = d->ldx ? d->ldx : n;
    if (m->nv > 0 && !d->x) return fail(errmsg, JF_ERR_ARG, "no values of the variables (x is NULL)");
    if (m->nv > 0 && ldx < n)
        return fail(errmsg, JF_ERR_ARG, "ldx %zu is smaller than the number of points %zu", ldx, n);
    char msg[MSG_LEN];
    if (deferred) *deferred = 1;
    else if (scan_data(s, d->x, ldx, d->y, n, x_checked, pool, msg, sizeof msg) != JF_OK)
        return fail(errmsg, JF_ERR_DATA, "%s", msg);
    if (d->sigma) {
        *w = jf_alloc_large(n * sizeof **w);
        if (!*w) return fail(errmsg, JF_ERR_NOMEM, "out of memory");
        size_t bad_sigma, bad_weight;
        jf_sigma_weights(pool, d->sigma, *w, n, &bad_sigma, &bad_weight);
        if (bad_sigma || bad_weight) {
            free(*w);
            *w = NULL;
            /* x's and y's errors come first, deferred or not */
            if (deferred && scan_data(s, d->x, ldx, d->y, n, x_checked, pool, msg, sizeof msg))
                return fail(errmsg, JF_ERR_DATA, "%s", msg);
        }
        if (bad_sigma)
            return fail(errmsg, JF_ERR_DATA,
                        "point %zu: sigma must be positive and finite (got %g)", bad_sigma,
                        d->sigma[bad_sigma - 1]);
        /* a subnormal sigma's weight overflows: the fit would fail on NONFINITE at that
         * point's residual, the message not naming sigma */
        if (bad_weight)
            return fail(errmsg, JF_ERR_DATA,
                        "point %zu: sigma %g is too small (its reciprocal, the weight, "
                        "overflows)",
                        bad_weight, d->sigma[bad_weight - 1]);
    }
    return JF_OK;
}

/* One allocation holds the block and its arrays (a batch makes one result per fit). */
static result_block *result_alloc(size_t np) {
    size_t head = (sizeof(result_block) + sizeof(double) - 1) / sizeof(double) * sizeof(double);
    size_t doubles = 2 * np + 2 * np * np;
    result_block *b = calloc(1, head + doubles * sizeof(double) + 2 * np * sizeof(int));
    if (!b) return NULL;
    jf_fit_result *r = &b->pub;
    double *a = (double *)(void *)((char *)b + head);
    r->params = a;
    r->std_errors = a + np;
    r->covariance = a + 2 * np;
    r->correlation = a + 2 * np + np * np;
    r->at_bound = (int *)(void *)(a + doubles);
    r->fixed = r->at_bound + np;
    r->message = b->message;
    return b;
}

/* The result of the reduced model's fit r (fit i of the plan), widened to all of pl's
 * parameters (fixed.c); r is consumed. NULL when out of memory. */
static jf_fit_result *widen_result(const jf_fixed_plan *pl, size_t i, jf_fit_result *r) {
    result_block *b = result_alloc(pl->np), *rb = (result_block *)r;
    if (b && rb->warning && !(b->warning = strdup(rb->warning))) {
        free(b);
        b = NULL;
    }
    if (b) {
        jf_fixed_widen(pl, i, r, &b->pub);
        memcpy(b->message, rb->message, MSG_LEN);
        memcpy(b->device_note, rb->device_note, MSG_LEN);
        b->pub.message = b->message;
        b->pub.warning = b->warning;
        b->pub.device_note = r->device_note ? b->device_note : NULL;
    }
    jf_fit_result_free(r);
    return b ? &b->pub : NULL;
}

static int fit_model(const jf_model *m, const jf_data *data, const jf_fit_options *opts,
                     const jf_fixed_plan *fx, jf_fit_result **out, char **errmsg);

/* jf_fit with parameters held fixed: the reduced model's fit, widened. */
static int fit_fixed(const jf_model *m, const jf_data *data, const jf_fit_options *opts,
                     jf_fit_result **out, char **errmsg) {
    double t0 = jf_clock_ms();
    jf_fixed_plan pl;
    char msg[MSG_LEN];
    int st = jf_fixed_plan_init(&pl, m, opts, NULL, 1, msg, sizeof msg);
    if (st != JF_OK) return fail(errmsg, st, "%s", msg);
    jf_fit_result *r = NULL;
    if (jf_fixed_exact(&pl, 0)) {
        st = fit_model(pl.reduced, data, &pl.o, &pl, &r, errmsg);
    } else { /* the values written in: their kernels drop a term the reduced model cannot */
        jf_model *wm = NULL;
        st = jf_fixed_written(&pl, m, 0, &wm);
        if (st == JF_OK) st = fit_model(wm, data, &pl.o, NULL, &r, errmsg);
        else fail(errmsg, st, "%s", st == JF_ERR_NOMEM ? "out of memory" : "the model with its "
                                    "fixed parameters written in exceeds the node limit");
        jf_model_free(wm);
    }
    if (st == JF_OK) {
        *out = widen_result(&pl, 0, r);
        if (!*out) st = fail(errmsg, JF_ERR_NOMEM, "out of memory");
        else (*out)->time_total_ms = jf_clock_ms() - t0;
    }
    jf_fixed_plan_free(&pl);
    return st;
}

/* Marks in zero[k] the parameters whose Jacobian column is zero at the solution (A's diagonal);
 * returns their number. */
static size_t zero_columns(const double *A, size_t np, int *zero) {
    size_t count = 0;
    for (size_t k = 0; k < np; k++) count += zero[k] = !(A[k * np + k] > 0);
    return count;
}

/* Of the columns zero at the solution, clears in zero[] those not zero at the start x0 (one
 * pass of plain JᵀJ there): those parameters influence the model, and only the solution took it
 * away (a peak's centre once its amplitude sits on the bound 0). What is left marks parameters
 * without influence on the model on these data (all of them when memory runs out). */
static void zero_at_start(jf_problem *prob, const double *x0, int *zero) {
    double *acc = malloc(prob->nacc * sizeof *acc);
    if (!acc) return;
    jf_problem_normal_eq(prob, x0, JF_LOSS_LINEAR, acc);
    for (size_t k = 0, t = 0; k < prob->np; t += prob->np - k, k++)
        if (zero[k] && acc[t] > 0) zero[k] = 0; /* acc[t]: (JᵀJ)_kk of the packed upper rows */
    free(acc);
}

/* The first marked index and the number marked (np, 0 when none). */
static size_t first_marked(const int *mark, size_t np, size_t *count) {
    size_t first = np;
    *count = 0;
    for (size_t k = 0; k < np; k++)
        if (mark[k]) {
            if (first == np) first = k;
            (*count)++;
        }
    return first;
}

/* Appends to msg (of MSG_LEN) "<lead> 'a', 'b' and N more<why>: their standard errors are
 * infinite" (without that ending when infinite is 0) for the parameters marked in mark (np),
 * when any is. */
static void note_params(char *msg, const int *mark, size_t np, char *const *names,
                        const char *lead, const char *why, int infinite) {
    size_t count = 0, listed = 0, len = strlen(msg);
    for (size_t k = 0; k < np; k++) count += mark[k] != 0;
    if (!count || len >= MSG_LEN - 1) return;
    len += (size_t)snprintf(msg + len, MSG_LEN - len, "%s", lead);
    for (size_t k = 0; k < np && len < MSG_LEN - 80; k++) {
        if (!mark[k]) continue;
        len += (size_t)snprintf(msg + len, MSG_LEN - len, "%s '%s'", listed ? "," : "", names[k]);
        listed++;
    }
    if (len >= MSG_LEN) len = MSG_LEN - 1;
    if (listed < count)
        len += (size_t)snprintf(msg + len, MSG_LEN - len, " and %zu more", count - listed);
    if (len < MSG_LEN && infinite)
        snprintf(msg + len, MSG_LEN - len, "%s: %s infinite", why,
                 count == 1 ? "its standard error is" : "their standard errors are");
    else if (len < MSG_LEN)
        snprintf(msg + len, MSG_LEN - len, "%s", why);
}

/* The linear-loss normal equations (packed, as jf_problem_normal_eq) at x with x_j alone moved
 * by 1e-2 relative, into acc; xp: np doubles of scratch. One pass over the data. */
static void normal_eq_moved(jf_problem *prob, const double *x, size_t j, double *xp,
                            double *acc) {
    memcpy(xp, x, prob->np * sizeof *xp);
    xp[j] += 1e-2 * fmax(fabs(x[j]), 1.0);
    jf_problem_normal_eq(prob, xp, JF_LOSS_LINEAR, acc);
}

/* Whether the Jacobian columns j < k, equal at x, part in acc (normal_eq_moved's for j): then
 * they were equal because x_j = x_k (a1*exp(-k1*x)+a2*exp(-k2*x) at k1 = k2), not because the
 * model cannot tell them apart at all (a*x + b*x). */
static int columns_part(const double *acc, size_t np, size_t j, size_t k) {
    /* the packed upper triangle, row by row: (a, b ≥ a) at a·np − a(a−1)/2 + (b − a) */
    double ajj = acc[j * np - j * (j - 1) / 2], akk = acc[k * np - k * (k - 1) / 2];
    double ajk = acc[j * np - j * (j - 1) / 2 + (k - j)];
    return ajj > 0 && akk > 0 && ajk / sqrt(ajj * akk) < 1.0 - 1e-9;
}

/* Appends to msg which parameters the data do not determine although they influence the model
 * (rank-deficient J: collinear columns, e.g. a+b), as scipy's curve_fit warns that the
 * covariance could not be estimated; zero columns are noted apart. mark: np ints of scratch. */
static void note_undetermined(char *msg, const int *unident, const double *A, const double *x,
                              const double *x0, jf_problem *prob, char *const *names,
                              int *mark) {
    size_t np = prob->np;
    for (size_t k = 0; k < np; k++) mark[k] = unident[k] && A[k * np + k] > 0;
    /* Pairs of those that started equal and are still equal, with equal Jacobian columns, are
     * a symmetric start, such as the default start 1 for both terms of
     * a1*exp(-k1*x)+a2*exp(-k2*x): every step keeps them equal (up to rounding), so the fit
     * never tells them apart, whatever the data. One pass per j that has a candidate k, not
     * one per pair: a sum of m such terms from the default start has m(m-1)/2 pairs of equal
     * amplitudes (whose columns never part) besides those of the rates. The advice comes
     * before the list of undetermined parameters, which long names may cut short. */
    char adv[MSG_LEN];
    size_t len = 0, pairs = 0, room = MSG_LEN - strlen(msg);
    const double close = 1e-8;
    double *acc = NULL, *xp = NULL;
    int *paired = calloc(np + 1, sizeof *paired);
    adv[0] = '\0';
    for (size_t j = 0; paired && j < np; j++) {
        if (!mark[j] || paired[j]) continue;
        int moved = 0; /* acc holds normal_eq_moved's for this j */
        /* leave room for the explanation (about 120 bytes) */
        for (size_t k = j + 1; k < np && len + 160 < room; k++) {
            double ajj = A[j * np + j], akk = A[k * np + k], ajk = A[j * np + k];
            if (!mark[k] || paired[k] || x0[j] != x0[k] ||
                !(fabs(x[j] - x[k]) <= close * fmax(fabs(x[j]), fabs(x[k]))) ||
                !(fabs(ajj - akk) <= close * ajj) || !(fabs(ajk - ajj) <= close * ajj))
                continue;
            if (!acc) {
                acc = malloc(prob->nacc * sizeof *acc);
                xp = malloc(np * sizeof *xp);
                if (!acc || !xp) goto list;
            }
            if (!moved) normal_eq_moved(prob, x, j, xp, acc);
            moved = 1;
            if (!columns_part(acc, np, j, k)) continue;
            len += (size_t)snprintf(adv + len, sizeof adv - len, "%s '%s' and '%s'",
                                    pairs ? "," : ";", names[j], names[k]);
            pairs++;
            paired[k] = 1; /* a third equal one pairs with j only */
        }
    }
    if (pairs && len < sizeof adv) {
        snprintf(adv + len, sizeof adv - len, " started equal and the model treats %s alike, "
                 "so no step can part them: give them different starting values",
                 pairs == 1 ? "them" : "each pair");
        size_t at = strlen(msg);
        snprintf(msg + at, MSG_LEN - at, "%s", adv);
    }
list:
    note_params(msg, mark, np, names, "; the data do not determine",
                " (the Jacobian is rank-deficient at the solution)", 1);
    free(acc);
    free(xp);
    free(paired);
}

/* Writes to msg (of MSG_LEN) why the start is not usable: where the model value or a
 * derivative (∂f/∂p) is first NaN or infinite — the point and its variable values (x^b at x = 0
 * has ∂/∂b = x^b·log x = NaN) — or, when all of them are finite, that the squares overflow and
 * where the largest value is (a residual or derivative beyond ~1e154): what the user must
 * change, the data or p0. */
static void note_nonfinite(char *msg, jf_problem *prob, const double *p,
                           const struct jf_model *m) {
    enum { BLOCK = 256 };
    size_t np = prob->np, big_i = 0, big_k = np; /* big_k np: the residual */
    double big = -1.0, r[BLOCK], *J = malloc(BLOCK * (np ? np : 1) * sizeof *J);
    const char *generic = "the residuals or the Jacobian are not finite at the starting point";
    snprintf(msg, MSG_LEN, "%s", generic);
    if (!J) return;
    for (size_t b0 = 0; b0 < prob->n; b0 += BLOCK) {
        size_t b1 = b0 + BLOCK < prob->n ? b0 + BLOCK : prob->n;
        jf_kernels_jacobian_row(prob->k, jf_problem_params(prob, p), &prob->view, b0, b1, r, J);
        for (size_t i = 0; i < b1 - b0; i++) {
            size_t bad = np + 1; /* np: the residual; else the parameter */
            if (!isfinite(r[i])) bad = np;
            for (size_t k = 0; k < np && bad > np; k++)
                if (!isfinite(J[i * np + k])) bad = k;
            if (bad > np) {
                for (size_t t = 0; t <= np; t++) { /* the residual first: it wins ties */
                    size_t k = t == 0 ? np : t - 1;
                    double a = fabs(k == np ? r[i] : J[i * np + k]);
                    if (a > big) big = a, big_i = b0 + i, big_k = k;
                }
                continue;
            }
            size_t len = strlen(msg);
            len += (size_t)snprintf(msg + len, MSG_LEN - len, ": first at point %zu (0-based", b0 + i);
            for (size_t j = 0; j < m->nv && j < 4 && len < MSG_LEN; j++) {
                char xv[40];
                jf_double_text(xv, sizeof xv, prob->view.x[j * prob->view.ldx + b0 + i]);
                len += (size_t)snprintf(msg + len, MSG_LEN - len, ", %s = %s", m->var_names[j], xv);
            }
            double v = bad == np ? r[i] : J[i * np + bad];
            const char *what = isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf";
            if (len < MSG_LEN) {
                if (bad == np)
                    snprintf(msg + len, MSG_LEN - len, "), where the residual is %s", what);
                else
                    snprintf(msg + len, MSG_LEN - len,
                             "), where the derivative with respect to '%s' is %s",
                             m->param_names[bad], what);
            }
            free(J);
            return;
        }
    }
    free(J);
    if (big < 0) return; /* no points: the generic message stays */
    size_t len = (size_t)snprintf(msg, MSG_LEN,
                                  "the sums of squares overflow at the starting point: every "
                                  "residual and derivative is finite, but their squares add up "
                                  "beyond the largest double (the largest is ");
    if (big_k == np)
        len += (size_t)snprintf(msg + len, MSG_LEN - len, "a residual of magnitude %.3g", big);
    else
        len += (size_t)snprintf(msg + len, MSG_LEN - len,
                                "the derivative with respect to '%s', of magnitude %.3g",
                                m->param_names[big_k], big);
    if (len < MSG_LEN)
        len += (size_t)snprintf(msg + len, MSG_LEN - len, " at point %zu (0-based", big_i);
    for (size_t j = 0; j < m->nv && j < 4 && len < MSG_LEN; j++) {
        char xv[40];
        jf_double_text(xv, sizeof xv, prob->view.x[j * prob->view.ldx + big_i]);
        len += (size_t)snprintf(msg + len, MSG_LEN - len, ", %s = %s", m->var_names[j], xv);
    }
    if (len < MSG_LEN)
        snprintf(msg + len, MSG_LEN - len, ")); start closer to the solution or rescale "
                 "the data");
}

/* An FTOL/XTOL stop whose optimality (the scaled gradient's cosine measure) is above this
 * gets a warning in its message. A full Gauss-Newton step gains about cos² of the cost, so an
 * FTOL stop at a minimum has cos ≲ √ftol: the bound keeps a factor 10 above that (and at
 * least 1e-3) to stay quiet on honest stops with a loose ftol. */
static double suspect_optimality(double ftol) {
    double b = 10.0 * sqrt(ftol);
    return b > 1e-3 ? b : 1e-3;
}

/* Whether the residuals are at the rounding level of the data (SSR ≤ (64ε)² Σ (y/σ)²): an exact
 * fit. The cosine measure compares directions, and the direction of rounding noise is random,
 * so there a large optimality says nothing about the minimum. */
static int rounding_level(double ssr, const jf_data *d, size_t n) {
    double yy = 0.0;
    for (size_t i = 0; i < n; i++) {
        double v = d->sigma ? d->y[i] / d->sigma[i] : d->y[i];
        yy += v * v;
    }
    double e = 64.0 * JF_STEP_EPS;
    return ssr <= e * e * yy;
}

/* The reported optimality of a robust fit at x with the robust cost's gradient g: MINPACK's
 * cosine max |g_k| / (‖J_k‖·‖r‖) over the free parameters, with J and r unscaled (weighted by
 * 1/sigma only). g = Σ ρ'(z_i) r_i J_i and 0 < ρ' ≤ 1 for every loss offered, so it is at most 1,
 * and for the linear loss it is the iterations' own measure. Those divide by the loss-scaled
 * columns instead, which scipy's rule clips to √ε·J beyond f_scale (every outlier of a huber
 * fit): at true minima of fits far below the noise they read 1e2 to 1e6 and warned "this may
 * not be a minimum". One normal-equation pass with the linear loss; NAN when it is not finite. */
static double robust_optimality(jf_problem *prob, const double *x, const double *g,
                                const double *lo, const double *hi, const double *lin) {
    size_t np = prob->np, nacc = prob->nacc;
    double *acc = malloc(nacc * sizeof *acc);
    if (!acc) return NAN;
    if (lin) memcpy(acc, lin, nacc * sizeof *acc); /* the GPU loop's tail pass at x */
    else jf_problem_normal_eq(prob, x, JF_LOSS_LINEAR, acc);
    double rnorm = sqrt(acc[nacc - 1]), best = 0.0;
    int finite = isfinite(rnorm);
    size_t t = 0; /* acc: JᵀJ's upper triangle row by row, so row a's diagonal is at t */
    for (size_t a = 0; a < np; a++) {
        double cn2 = acc[t];
        t += np - a;
        finite = finite && isfinite(cn2);
        if (!(cn2 > 0) || !(rnorm > 0) || !jf_step_is_free(x[a], lo[a], hi[a], g[a])) continue;
        double c = fabs(g[a]) / (sqrt(cn2) * rnorm);
        if (c > best) best = c;
    }
    free(acc);
    return finite ? best : NAN;
}

/* R²'s total sum of squares of a fit's y, computed once: by a GPU fit while its loop runs on
 * the device (jf_gpu_problem.while_looping), else when the statistics need it. */
typedef struct tss_job {
    jf_pool *pool;
    const double *y;
    size_t n;
    int done;
    double tss;
} tss_job;

static void tss_run(void *ctx) {
    tss_job *j = ctx;
    j->tss = jf_total_ss(j->pool, j->y, j->n);
    j->done = 1;
}

static double total_ss(tss_job *j) {
    if (!j->done) tss_run(j);
    return j->tss;
}

/* run_fit's return when a GPU fit must go to the CPU instead (not a jf_status). */
#define FIT_GPU_FALLBACK 1000

/* The GPU half of run_fit: data to the device, the device-resident loop. FIT_GPU_FALLBACK with
 * the reason in fallback when the data do not fit in device memory. With *unchecked, x's and y's
 * scans are this function's: a staged upload tests them on the way, else (or when it found a
 * value that is not finite, to name the first) scan_data runs before the loop; JF_ERR_DATA
 * with its message in why then. A fallback leaves *unchecked set for the CPU's run. */
static int solve_gpu(const fit_setup *s, jf_problem *prob, jf_gpu_problem *gp,
                     const jf_lm_config *cfg, double *x, jf_lm_state *st, jf_gpu_stats *stats,
                     char *why, size_t n, char *fallback, tss_job *tss, int *unchecked) {
    const struct jf_model *m = s->m;
    size_t need = jf_gpu_problem_bytes(prob->n, prob->np, prob->nheld, m->nv, prob->view.w != NULL);
    size_t avail = jf_gpu_usable_memory(s->o.max_gpu_mem);
    int code;
    if (need > avail && prob->loss == JF_LOSS_LINEAR && prob->n * prob->np <= JF_LM_MATERIALIZE_MAX) {
        /* the finish of such a fit materializes J (the polish), which streamed data cannot
         * give; a fit this small costs the CPU milliseconds */
        snprintf(fallback, MSG_LEN, "the data need %.1f MiB of GPU memory, %.1f MiB are usable, "
                 "and a fit this small (points x parameters <= %zu) is not streamed",
                 (double)need / 1048576.0, (double)avail / 1048576.0, JF_LM_MATERIALIZE_MAX);
        return FIT_GPU_FALLBACK;
    }
    double t_upload = jf_clock_ms();
    if (need > avail) { /* stream the data through the GPU, or leave them to the CPU */
        code = jf_gpu_problem_init_streamed(gp, prob, s->ck, m->nv, avail);
        if (code == JF_ERR_NOMEM) {
            snprintf(fallback, MSG_LEN, "the data need %.1f MiB of GPU memory, %.1f MiB are usable, "
                     "and %.300s", (double)need / 1048576.0, (double)avail / 1048576.0, gp->why);
            return FIT_GPU_FALLBACK;
        }
    } else {
        code = jf_gpu_problem_init(gp, prob, s->ck, m->nv, *unchecked);
        if (code == JF_ERR_NOMEM && strstr(gp->why, "device memory") &&
            !(prob->loss == JF_LOSS_LINEAR && prob->n * prob->np <= JF_LM_MATERIALIZE_MAX)) {
            /* the GPU refused what its free memory said would fit (other work took it
             * meanwhile): stream the data through half as much */
            char refused[MSG_LEN];
            snprintf(refused, sizeof refused, "%s", gp->why);
            code = jf_gpu_problem_init_streamed(gp, prob, s->ck, m->nv, need / 2);
            gp->refused = code == JF_OK;
            if (code == JF_ERR_NOMEM) {
                char streamed[MSG_LEN];
                snprintf(streamed, sizeof streamed, "%s", gp->why);
                snprintf(gp->why, sizeof gp->why, "%.200s; streamed: %.200s", refused, streamed);
            }
        }
        if (code == JF_ERR_NOMEM) {
            snprintf(fallback, MSG_LEN, "out of GPU memory (%.300s)", gp->why);
            return FIT_GPU_FALLBACK;
        }
    }
    stats->upload_ms = jf_clock_ms() - t_upload;
    int scan = *unchecked && gp->data_finite != 1;
    *unchecked = 0;
    if (scan) { /* before another error, as check_data's scans */
        const jf_data_view *v = &prob->view;
        int c = scan_data(s, v->x, v->ldx, v->y, prob->n, 0, tss->pool, why, n);
        if (c != JF_OK) return c;
    }
    if (code != JF_OK) {
        snprintf(why, n, "%s", gp->why);
        return code;
    }
    gp->while_looping = tss_run;
    gp->looping_ctx = tss;
    if (s->o.single_precision) prob->round_rel = 536870912.0; /* 2^29: fp32's ε in fp64's */
    code = jf_lm_solve_cuda(prob, gp, cfg, x, st, stats, why, n);
    if (code == JF_ERR_NOMEM && strstr(why, "device memory")) {
        snprintf(fallback, MSG_LEN, "out of GPU memory (%.300s)", why);
        return FIT_GPU_FALLBACK;
    }
    return code;
}

/* Runs one checked fit from x0 and fills *out. With fallback (MSG_LEN bytes) not NULL the fit
 * runs on the GPU (s->gpu), and FIT_GPU_FALLBACK means: not enough device memory, see
 * fallback, run it on the CPU. With pre not NULL the iterations already ran (a GPU batch):
 * only the finish runs, with the CPU kernels. unchecked (GPU only; NULL: none): x's and y's
 * scans are left to the GPU path (check_data's deferred), which clears it once they ran. */
static int run_fit(const fit_setup *s, const jf_data *d, const double *w, const double *x0,
                   const double *held, jf_pool *pool, const jf_lm_config *cfg, double t_start,
                   jf_fit_result **out, char **errmsg, char *fallback, const jf_batch_out *pre,
                   int *unchecked) {
    const struct jf_model *m = s->m;
    size_t np = m->np, n = d->n;
    result_block *b = result_alloc(np);
    if (!b) return fail(errmsg, JF_ERR_NOMEM, "out of memory");
    jf_fit_result *r = &b->pub;
    double t_solve = jf_clock_ms();

    jf_data_view view;
    view.x = d->x;
    view.ldx = d->ldx ? d->ldx : n;
    view.y = d->y;
    view.w = w;
    jf_problem prob;
    memset(&prob, 0, sizeof prob); /* freed below even when unident's malloc fails first */
    int *unident = malloc(3 * np * sizeof *unident); /* then zero columns, vanished ones */
    if (!unident || jf_problem_init(&prob, s->k, &view, n, np, s->o.loss, s->o.f_scale, pool) != JF_OK ||
        jf_problem_hold(&prob, held, m->nheld) != JF_OK) {
        jf_problem_free(&prob);
        free(unident);
        jf_fit_result_free(r);
        return fail(errmsg, JF_ERR_NOMEM, "out of memory");
    }
    memcpy(r->params, x0, np * sizeof(double));
    jf_lm_state st;
    jf_gpu_problem gp;
    jf_gpu_stats gs;
    memset(&gp, 0, sizeof gp);
    memset(&gs, 0, sizeof gs);
    char gwhy[MSG_LEN] = "";
    tss_job tss = {pool, d->y, n, 0, 0.0};
    int code;
    if (fallback) {
        int none = 0;
        code = solve_gpu(s, &prob, &gp, cfg, r->params, &st, &gs, gwhy, sizeof gwhy, fallback,
                         &tss, unchecked ? unchecked : &none);
        if (code != JF_OK) {
            jf_gpu_problem_free(&gp);
            jf_problem_free(&prob);
            free(unident);
            jf_fit_result_free(r);
            if (code == FIT_GPU_FALLBACK) return code;
            if (code == JF_ERR_DATA) return fail(errmsg, code, "%s", gwhy);
            return fail(errmsg, code, "GPU fit failed: %s", gwhy);
        }
    } else if (pre) {
        memcpy(r->params, pre->x, np * sizeof(double));
        memset(&st, 0, sizeof st);
        st.status = pre->status;
        st.nfev = pre->nfev;
        st.iterations = pre->iterations;
        st.cost = pre->cost;
        st.optimality = pre->status == JF_FIT_NONFINITE ? NAN : pre->optimality;
        if (pre->finished) { /* the device ran the finish: its results at the final point */
            st.polish = pre->polish;
            st.A = malloc(np * np * sizeof *st.A);
            st.g = malloc(np * sizeof *st.g);
            code = st.A && st.g ? JF_OK : JF_ERR_NOMEM;
            if (code == JF_OK) {
                memcpy(st.A, pre->A, np * np * sizeof *st.A);
                memcpy(st.g, pre->g, np * sizeof *st.g);
            } else {
                jf_lm_state_free(&st);
            }
        } else {
            code = jf_lm_finish(&prob, cfg, r->params, &st, pre->A, pre->g, NULL);
        }
    } else {
        code = jf_fit_host_resident ? jf_lm_solve_resident(&prob, cfg, r->params, &st)
                                    : jf_lm_solve(&prob, cfg, r->params, &st);
    }
    int solved = code == JF_OK; /* st holds arrays to free */
    if (code == JF_OK) {
        r->status = st.status;
        r->num_params = np;
        r->n = n;
        r->dof = n - np;
        r->nfev = st.nfev;
        r->iterations = st.iterations;
        r->cost = st.cost;
        r->optimality = st.optimality;
        jf_bounds_flags(r->params, s->lo, s->hi, np, r->at_bound);
        if (st.status == JF_FIT_NONFINITE) {
            for (size_t k = 0; k < np * np; k++) r->covariance[k] = r->correlation[k] = NAN;
            for (size_t k = 0; k < np; k++) r->std_errors[k] = NAN;
            r->ssr = r->chi2 = r->reduced_chi2 = r->r_squared = NAN;
            if (isnan(r->cost)) r->cost = NAN; /* not -nan in reports */
            snprintf(b->message, MSG_LEN,
                     "the residuals or the Jacobian are not finite at the starting point");
            if (prob.k) {
                note_nonfinite(b->message, &prob, r->params, m);
            } else if (!s->o.single_precision) {
                /* a GPU fit has no CPU kernels: the interpreter (no compile) finds the point,
                 * as the CPU's would (in fp64; an fp32 overflow it would not see) */
                jf_kernels *ik = NULL;
                char *iw = NULL;
                jf_jit_options jo;
                memset(&jo, 0, sizeof jo);
                if (jf_kernels_get(m, JF_BACKEND_INTERP, &jo, &ik, &iw) == JF_OK) {
                    jf_problem ip = prob;
                    ip.k = ik;
                    ip.ops = NULL;
                    note_nonfinite(b->message, &ip, r->params, m);
                }
                jf_kernels_free(ik);
                free(iw);
            }
            {
                /* the statistics of the start (the result holds p0) when its residuals are
                 * finite (only a derivative is not): SSR must agree with the cost then */
                double sums[2];
                jf_problem_residual_sums(&prob, r->params, sums);
                if (isfinite(sums[0]) && isfinite(sums[1])) {
                    r->ssr = sums[1];
                    r->chi2 = d->sigma ? sums[1] : NAN;
                    r->reduced_chi2 = d->sigma ? sums[1] / (double)r->dof : NAN;
                    r->r_squared = jf_lsq_r_squared_of(total_ss(&tss), sums[0]);
                }
            }
        } else {
            if (pre && pre->finished) jf_covar_triangle(pre->R, n, np, r->covariance, unident);
            else if (st.R || st.J) {
                /* A column whose squares underflow in JᵀJ (entries ~1e-190: a decay constant
                 * in the hundreds) is zero to the solver and to the status below (no
                 * influence, infinite standard error); it is zero here too, or the scaled SVD
                 * would treat it as a full column and the others' errors would be those of a
                 * model where it is free (a point's worth larger), unlike a robust loss's.
                 * Zeroing column k of R is zeroing it in J = QR. */
                for (size_t k = 0; k < np; k++) {
                    if (st.A[k * np + k] > 0) continue;
                    if (st.R)
                        for (size_t i = 0; i < np; i++) st.R[i * np + k] = 0.0;
                    else
                        for (size_t i = 0; i < n; i++) st.J[i * np + k] = 0.0;
                }
                if (st.R) jf_covar_triangle(st.R, n, np, r->covariance, unident);
                else code = jf_covar_jacobian(st.J, n, np, r->covariance, unident);
            }
            else code = jf_covar_normal(st.A, np, r->covariance, unident);
        }
    }
    if (code == JF_OK && st.status != JF_FIT_NONFINITE) {
        double sums[2];
        /* the GPU loop's tail passes at its final point, where the finish left it there */
        int moved = st.R || st.J || st.polish;
        const double *tail_lin = fallback && !moved && (gp.tail_have & JF_GPU_TAIL_LINEAR)
                                     ? gp.tail : NULL;
        const double *tail_plain = fallback && !moved && (gp.tail_have & JF_GPU_TAIL_PLAIN)
                                       ? gp.tail + gp.nacc : NULL;
        /* Σ r² (weighted) and Σ (f − y)² from the loop: r² is the linear loss's cost, 2F */
        const double *r2 = prob.loss == JF_LOSS_LINEAR ? NULL : tail_lin;
        int from_tail = prob.loss == JF_LOSS_LINEAR ? tail_plain != NULL : r2 && (!w || tail_plain);
        if (pre && pre->finished) { /* the device's final pass: Σ (f − y)², and SSR = 2F */
            sums[0] = pre->ssr_plain;
            sums[1] = 2.0 * st.cost;
        } else if (fallback && prob.loss == JF_LOSS_LINEAR && !w && !st.R && !st.J && !st.polish) {
            /* the GPU loop's kept pass at the solution summed r² = (f − y)² by the very pass a
             * statistics pass would run (the same kernel at the same point: the same bits), and
             * its cost is half that: no pass and no host synchronization more */
            sums[0] = sums[1] = 2.0 * st.cost;
        } else if (from_tail) {
            /* the tail passes ran the kernels these sums would run, at the same point, behind
             * the loop on the device: the same bits, without a blocking call after the loop */
            sums[1] = r2 ? r2[prob.nacc - 1] : 2.0 * st.cost;
            sums[0] = w ? tail_plain[prob.nacc - 1] : sums[1];
        } else if (st.R && !w && !prob.ops) {
            /* the polish's last pass summed r² = (f − y)² at the solution (no weights), chunk
             * by chunk as jf_problem_residual_sums does: the same sums without another pass
             * over the data (a tenth of a small fit's passes) */
            sums[0] = sums[1] = st.ssr;
        } else if (st.r && !w && !prob.ops) {
            jf_problem_residual_sums_of(&prob, st.r, sums);
        } else {
            jf_problem_residual_sums(&prob, r->params, sums);
        }
        r->ssr = sums[1];
        r->chi2 = d->sigma ? sums[1] : NAN;
        r->reduced_chi2 = d->sigma ? sums[1] / (double)r->dof : NAN;
        r->r_squared = jf_lsq_r_squared_of(total_ss(&tss), sums[0]);
        if (prob.loss != JF_LOSS_LINEAR && st.g) {
            double opt = robust_optimality(&prob, r->params, st.g, s->lo, s->hi, tail_lin);
            if (!isnan(opt)) r->optimality = opt;
        }
        /* scipy's curve_fit: s² = 2·cost/dof (its cost is the robust one for robust losses). */
        double s2 = s->o.absolute_sigma ? 1.0 : 2.0 * r->cost / (double)r->dof;
        jf_covar_finish(r->covariance, unident, np, s2, r->std_errors, r->correlation);

        /* A converged fit with zero columns of J at the solution: JF_FIT_UNUSED_PARAM for the
         * parameters without influence at the start as well; the others converged, and only
         * their standard errors say it (as collinear columns do below). */
        int *zero = unident + np;
        int converged = st.status >= JF_FIT_FTOL && st.status <= JF_FIT_GTOL;
        size_t nzero = converged ? zero_columns(st.A, np, zero) : 0, nunused = 0, unused = np;
        if (nzero) {
            int *vanished = zero + np;
            memcpy(vanished, zero, np * sizeof *zero);
            zero_at_start(&prob, x0, zero);
            for (size_t k = 0; k < np; k++) vanished[k] &= !zero[k];
            unused = first_marked(zero, np, &nunused);
        }
        r->status = nunused ? JF_FIT_UNUSED_PARAM : st.status;
        if (nunused == 1) {
            snprintf(b->message, MSG_LEN,
                     "parameter '%s' has no influence on the model on these data (its Jacobian "
                     "column is zero at the start and at the solution): its standard error is "
                     "infinite; the others converged",
                     m->param_names[unused]);
        } else if (nunused) {
            snprintf(b->message, MSG_LEN,
                     "%zu parameters (first '%s') have no influence on the model on these data "
                     "(zero Jacobian columns at the start and at the solution): their standard "
                     "errors are infinite; the others converged",
                     nunused, m->param_names[unused]);
        } else {
            if (r->status == JF_FIT_MAX_NFEV)
                snprintf(b->message, MSG_LEN,
                         "stopped: evaluation budget (max_nfev = %zu) spent; a larger max_nfev "
                         "lets the run go further",
                         s->max_nfev);
            else snprintf(b->message, MSG_LEN, "%s", jf_fit_status_string(r->status));
            if (st.polish && r->status >= JF_FIT_FTOL && r->status <= JF_FIT_GTOL) {
                size_t len = strlen(b->message);
                snprintf(b->message + len, MSG_LEN - len, " (then %zu Gauss-Newton polish step%s)",
                         st.polish, st.polish == 1 ? "" : "s");
            }
        }
        if (nzero > nunused)
            note_params(b->message, zero + np, np, m->param_names,
                        "; at the solution the model does not depend on",
                        " (a zero Jacobian column there but not at the start: a factor vanished, "
                        "e.g. a parameter on its bound at 0)", 1);
        /* Columns that are not zero but negligible at the solution (step.h jf_step_negligible:
         * moving the parameter by its own size, or 1, changes the residuals below the cost's
         * rounding; a Gaussian peak far off the data), which the run held still once it saw
         * them (jf_step_restart). Their standard errors are finite but of no use (1e34 for a
         * value of 1), and nothing else said why: the note names them. */
        int *negl = zero + np;
        size_t nnegl = 0;
        for (size_t k = 0; converged && k < np; k++) {
            double dk = st.A[k * np + k];
            negl[k] = dk > 0 && !unident[k] && jf_step_negligible(dk, r->params[k], st.cost);
            nnegl += negl[k] != 0;
        }
        if (nnegl)
            note_params(b->message, negl, np, m->param_names,
                        "; at the solution the model hardly depends on",
                        nnegl == 1 ? " (moving it by its own size changes the residuals below "
                                     "rounding): the data do not determine it"
                                   : " (moving each by its own size changes the residuals below "
                                     "rounding): the data do not determine them",
                        0);
        note_undetermined(b->message, unident, st.A, r->params, x0, &prob, m->param_names, zero);
        /* FTOL and XTOL say the steps stopped paying, not that the gradient vanished: with a
         * scale D far above the columns (a user's x_scale; a stale scale restarts, step.h) they
         * can fire far from a minimum, as in scipy's trf. The cosine measure was ~1e-7 or less
         * at the minima seen (1e-13 after the polish), 4e-3 to 1 there. */
        if (r->status >= JF_FIT_FTOL && r->status <= JF_FIT_FTOL_XTOL &&
            r->optimality > suspect_optimality(s->o.ftol) && !rounding_level(r->ssr, d, n)) {
            size_t len = strlen(b->message);
            if (len < MSG_LEN)
                snprintf(b->message + len, MSG_LEN - len,
                         "; but the scaled gradient is still %.3g (gtol %g): this may not be a "
                         "minimum (try another start)",
                         r->optimality, s->o.gtol);
        }
        /* A converged least-squares fit that is worse than the constant ȳ: a minimum the start
         * led to where a better one exists (a*exp(b*x) from b = 1 on decaying data ends at a
         * ≈ 0, fitting only the last point), or a model that cannot follow the data's offset.
         * Neither the gradient nor the status says it, so the message does. Not for robust
         * losses or weights, which minimize another sum (a robust fit that ignores an outlier
         * may well have a negative R²), and clearly below 0 (a fit no better than a constant, e.g. a
         * peak shrunk to nothing over an offset, has R² ≈ 0 up to rounding). */
        if (r->status >= JF_FIT_FTOL && r->status <= JF_FIT_GTOL &&
            prob.loss == JF_LOSS_LINEAR && !d->sigma && r->r_squared < -1e-6) {
            size_t len = strlen(b->message);
            if (len < MSG_LEN)
                snprintf(b->message + len, MSG_LEN - len,
                         "; but R^2 is %.3g: the model fits worse than the mean of y (another "
                         "start may find a better minimum, or the model lacks an offset)",
                         r->r_squared);
        }
    }
    if (solved) jf_lm_state_free(&st);
    /* the blocking calls after the loop: the finish's and the statistics' (weights, a robust
     * loss, a zero column) */
    if (fallback) gs.finish_syncs = gp.syncs_after;
    if (fallback && gp.failed && code == JF_OK) {
        code = gp.failed;
        fail(errmsg, code, "GPU fit failed: %s", gp.why);
    }
    jf_gpu_problem_free(&gp);
    jf_problem_free(&prob);
    free(unident);
    if (code != JF_OK && fallback && errmsg && *errmsg) {
        jf_fit_result_free(r);
        return code;
    }
    if (code != JF_OK) {
        jf_fit_result_free(r);
        return fail(errmsg, code, "%s during the fit", jf_status_string(code));
    }
    r->success = r->status >= JF_FIT_FTOL && r->status <= JF_FIT_GTOL;
    r->backend = fallback || pre ? JF_BACKEND_CUDA : (int)jf_kernels_backend(s->k);
    if (r->backend == JF_BACKEND_CUDA) jf_device_note_gpu_run();
    r->cache = fallback || pre ? s->cuda_cache : (int)jf_kernels_cache_result(s->k);
    r->host_syncs = pre ? 1 : gs.loop_syncs;
    /* the GPU solver's own modules (NVRTC on a cold cache: seconds) are compiled, not solved */
    r->time_compile_ms = s->compile_ms + gs.modules_ms;
    double t_end = jf_clock_ms();
    r->time_solve_ms = t_end - t_solve - gs.modules_ms;
    r->time_total_ms = t_end - t_start;
    if (s->warning) {
        b->warning = strdup(s->warning);
        r->warning = b->warning;
    }
    if (s->device_note[0]) {
        memcpy(b->device_note, s->device_note, sizeof b->device_note);
        r->device_note = b->device_note;
    }
    if (fallback) {
        size_t len = strlen(b->device_note);
        if (gs.mode == JF_GPU_LOOP_WHILE)
            snprintf(b->device_note + len, MSG_LEN - len,
                     "; device loop: one CUDA graph with a WHILE node, %lu host synchronization%s "
                     "for %llu iterations (%lu blocking calls after: polish, statistics)",
                     gs.loop_syncs, gs.loop_syncs == 1 ? "" : "s", gs.iterations, gs.finish_syncs);
        else if (gs.mode == JF_GPU_LOOP_STREAM)
            snprintf(b->device_note + len, MSG_LEN - len,
                     "; device loop: kernels%s on a stream, %d iteration%s per wait, %lu "
                     "host synchronization%s for %llu iterations (%lu blocking calls after)%s%s",
                     gp.large ? " and cuBLAS" : "", gs.per_wait, gs.per_wait == 1 ? "" : "s",
                     gs.loop_syncs, gs.loop_syncs == 1 ? "" : "s", gs.iterations, gs.finish_syncs,
                     gs.note[0] ? "; " : "", gs.note);
        else
            snprintf(b->device_note + len, MSG_LEN - len,
                     "; device loop: CUDA graphs of %d iteration%s, %lu host synchronization%s "
                     "for %llu iterations (%lu blocking calls after); %s",
                     gs.per_wait, gs.per_wait == 1 ? "" : "s", gs.loop_syncs, gs.loop_syncs == 1 ? "" : "s",
                     gs.iterations, gs.finish_syncs, gs.note);
        if (gp.overlap_late) {
            len = strlen(b->device_note);
            snprintf(b->device_note + len, MSG_LEN - len,
                     "; the host's work for the loop's time ran after a read of its results "
                     "(an ordering bug in the GPU loop)");
        }
        if (gp.chunk) {
            len = strlen(b->device_note);
            snprintf(b->device_note + len, MSG_LEN - len,
                     "; data streamed: %zu chunks of %zu points per pass, %s%s", gp.lay.nchunks,
                     gp.chunk, gp.stream_staged ? "staged from the caller's arrays"
                                                : "from a page-locked copy",
                     gp.refused ? " (the GPU refused the data's memory in one piece)" : "");
        }
        /* the rest of the solve time: the host's own work (checks, R² over y, covariance) */
        double other = jf_clock_ms() - t_solve - gs.upload_ms - gs.modules_ms - gs.setup_ms -
                       gs.loop_ms - gs.finish_ms;
        len = strlen(b->device_note);
        snprintf(b->device_note + len, MSG_LEN - len,
                 "; host clock: data to the GPU %.3g ms (%s), solver modules %.3g ms, "
                 "buffers %.3g ms, loop %.3g ms, finish %.3g ms, the rest on the host %.3g ms",
                 gs.upload_ms,
                 gp.chunk ? (gp.stream_staged ? "with each pass" : "page-locked copy")
                          : gp.upload_staged ? "staged" : "direct",
                 gs.modules_ms, gs.setup_ms, gs.loop_ms, gs.finish_ms,
                 other > 0 ? other : 0.0);
        r->device_note = b->device_note;
    }
    *out = r;
    return JF_OK;
}

static jf_lm_config make_config(const fit_setup *s, int with_progress) {
    jf_lm_config cfg;
    cfg.lo = s->lo;
    cfg.hi = s->hi;
    cfg.x_scale = s->o.x_scale;
    cfg.ftol = s->o.ftol;
    cfg.xtol = s->o.xtol;
    cfg.gtol = s->o.gtol;
    cfg.max_nfev = s->max_nfev;
    cfg.progress = with_progress ? s->o.progress : NULL;
    cfg.progress_ctx = s->o.progress_ctx;
    return cfg;
}

int jf_fit(const jf_model *m, const jf_data *data, const jf_fit_options *opts,
           jf_fit_result **out, char **errmsg) {
    if (errmsg) *errmsg = NULL;
    if (out) *out = NULL;
    if (!m || !data || !out) return fail(errmsg, JF_ERR_ARG, "NULL model, data or result pointer");
    if (jf_fixed_any(m, opts)) return fit_fixed(m, data, opts, out, errmsg);
    return fit_model(m, data, opts, NULL, out, errmsg);
}

/* The scans check_data left to the upload, run here (*deferred = 0): their error replaces st
 * and its message, else st stands. */
static int scan_deferred(const fit_setup *s, const jf_data *d, jf_pool *pool, int st,
                         char **errmsg, int *deferred) {
    char msg[MSG_LEN];
    *deferred = 0;
    if (scan_data(s, d->x, d->ldx ? d->ldx : d->n, d->y, d->n, 0, pool, msg, sizeof msg) ==
        JF_OK)
        return st;
    if (errmsg) {
        free(*errmsg);
        *errmsg = NULL;
    }
    return fail(errmsg, JF_ERR_DATA, "%s", msg);
}

/* jf_fit of m, which holds fx's parameters when fx is not NULL (fit_fixed). */
static int fit_model(const jf_model *m, const jf_data *data, const jf_fit_options *opts,
                     const jf_fixed_plan *fx, jf_fit_result **out, char **errmsg) {
    double t0 = jf_clock_ms();
    fit_setup s;
    double *w = NULL, *x0 = NULL;
    /* Threads pay off only with more than one chunk of points, and a pass has one task per
     * chunk, so threads beyond the chunks would only be created and wait. Long data get them
     * before the checks, which scan all of it (as do a GPU fit's statistics: 8–15 ms per
     * 10⁷-point pass on one thread, as long as that fit's loop). */
    int req = opts ? opts->nthreads : 0; /* out of range: setup_init's error, no threads */
    int nt = req < 0 || req > NTHREADS_MAX ? 1 : jf_threads_resolve(req);
    size_t chunks = jf_problem_chunks(data ? data->n : 0);
    if ((size_t)nt > chunks) nt = (int)chunks;
    jf_pool *pool = data && data->n >= JF_SCAN_POOL_MIN && nt > 1 ? jf_pool_acquire(nt) : NULL;
    /* the data first: setup_init obtains the kernels, a compile a bad call need not pay for */
    memset(&s, 0, sizeof s);
    s.m = m;
    /* a fit that may go to the GPU with its data staged leaves x's and y's scans to the
     * upload, which reads every value anyway (one pass less over 10⁷ points: ≈2.5 ms of the
     * H200's 11.7) */
    int deferred = 0;
    size_t up = data && m ? data->n * sizeof(double) * (m->nv + 1 + (data->sigma != NULL)) : 0;
    int may_defer = opts && opts->device != JF_DEVICE_CPU && jf_device_have_gpu_solver() &&
                    jf_gpu_upload_stages(up, jf_gpu_upload_mode());
    int st = check_data(&s, data, &w, errmsg, 0, pool, may_defer ? &deferred : NULL);
    if (st == JF_OK)
        st = setup_init(&s, m, opts, data->n, 1, data->n, 0, data->sigma != NULL, errmsg);
    s.fx = fx;
    if (st == JF_OK) {
        x0 = malloc(m->np * sizeof *x0);
        char msg[MSG_LEN];
        if (!x0) st = fail(errmsg, JF_ERR_NOMEM, "out of memory");
        else if (jf_bounds_start(m, s.o.p0, s.lo, s.hi, x0, msg, sizeof msg) != JF_OK)
            st = fail(errmsg, JF_ERR_ARG, "%s", msg);
    }
    /* the deferred scans now unless the GPU runs the fit, and before any other error: the data's
     * come first, as when check_data scans */
    if (deferred && (st != JF_OK || !s.gpu))
        st = scan_deferred(&s, data, pool, st, errmsg, &deferred);
    jf_lm_config cfg = make_config(&s, 1);
    if (st == JF_OK && s.gpu) {
        char fallback[MSG_LEN] = "";
        st = run_fit(&s, data, w, x0, held_row(&s, 0), pool, &cfg, t0, out, errmsg, fallback,
                     NULL, &deferred);
        if (st == FIT_GPU_FALLBACK) { /* too big for the GPU: the CPU does it */
            char note[MSG_LEN];
            snprintf(note, sizeof note, "cpu: fell back from the GPU: %.400s", fallback);
            memcpy(s.device_note, note, sizeof note);
            s.gpu = 0;
            st = setup_cpu_kernels(&s, errmsg);
            if (deferred) st = scan_deferred(&s, data, pool, st, errmsg, &deferred);
        } else {
            goto done;
        }
    }
    if (st == JF_OK) {
        if (!pool && nt > 1) pool = jf_pool_acquire(nt);
        st = run_fit(&s, data, w, x0, held_row(&s, 0), pool, &cfg, t0, out, errmsg, NULL, NULL,
                     NULL);
    }
done:
    jf_pool_release(pool);
    free(w);
    free(x0);
    setup_free(&s);
    return st;
}

/* Shared state of a batch. */
typedef struct batch_ctx {
    const fit_setup *s;       /* checked options and kernels */
    const jf_data *data;      /* nfits data sets */
    const double *p0;         /* nfits × np starting values, or NULL */
    jf_fit_result **results;  /* nfits outputs */
    char **errmsgs;           /* nfits messages, or NULL */
    int *codes;               /* nfits statuses */
    double t0;                /* start of the call */
    size_t nfits;             /* number of fits, for the progress callback */
    size_t done;              /* fits finished; guarded by lock */
    double last_report;       /* time of the last batch_progress call (ms); guarded by lock */
    pthread_mutex_t lock;     /* guards done and last_report */
    const jf_batch_out *pre;  /* GPU batch: nfits device results (status -1: not run), or NULL */
    const jf_batch_columns *cols; /* jf_fit_batch_columns: where each result goes, or NULL */
    const size_t *todo;       /* the fits this pass runs (the others' rows are written), or NULL */
    double interval;          /* ms between batch_progress calls (progress_interval) */
    pthread_mutex_t report;   /* held during a batch_progress call: one at a time */
} batch_ctx;

/* Row i of the columns from result r (NULL: the fit did not run, code says why). */
static void columns_put(const jf_batch_columns *c, size_t i, size_t np, const jf_fit_result *r,
                        int code) {
    if (c->code) c->code[i] = code;
    if (c->status) c->status[i] = r ? r->status : 0;
    for (size_t k = 0; k < np; k++) {
        if (c->params) c->params[i * np + k] = r ? r->params[k] : NAN;
        if (c->std_errors) c->std_errors[i * np + k] = r ? r->std_errors[k] : NAN;
    }
    if (c->cost) c->cost[i] = r ? r->cost : NAN;
    if (c->chi2) c->chi2[i] = r ? r->chi2 : NAN;
    if (c->r_squared) c->r_squared[i] = r ? r->r_squared : NAN;
    if (c->nfev) c->nfev[i] = r ? r->nfev : 0;
    if (c->iterations) c->iterations[i] = r ? r->iterations : 0;
}

/* pre[i].status of a fit whose row of the columns the GPU's statistics record already gave. */
#define PRE_WRITTEN (-2)
/* pre[i].status of a fit the host finished as its chunk came back (its result or row is in
 * place; pre[i].finished still says whether the device ran the polish). */
#define PRE_FINISHED (-3)

/* Row i of the columns from the statistics record st of a GPU batch's fit (jf_batch_stats or
 * jf_batch_stats_normal computed there what run_fit computes for a result; d: the fit's data,
 * for χ²). */
static void columns_from_stats(const jf_batch_columns *c, size_t i, size_t np, const jf_data *d,
                               const double *st) {
    if (c->code) c->code[i] = JF_OK;
    if (c->status) c->status[i] = (int)st[1];
    if (c->nfev) c->nfev[i] = (size_t)st[2];
    if (c->iterations) c->iterations[i] = (size_t)st[3];
    if (c->cost) c->cost[i] = st[4];
    if (c->chi2) c->chi2[i] = d->sigma ? st[6] : NAN;
    if (c->r_squared) c->r_squared[i] = st[5];
    if (c->params) memcpy(c->params + i * np, st + 7, np * sizeof(double));
    if (c->std_errors) memcpy(c->std_errors + i * np, st + 7 + np, np * sizeof(double));
}

/* Interval between batch_progress calls: often enough for a live counter, rarely enough that a
 * batch of a million tiny fits does not spend its time reporting. */
#define BATCH_PROGRESS_MS 100.0

/* BATCH_PROGRESS_MS, or $JITFIT_BATCH_PROGRESS_MS (tests: 0 reports at every chance). */
static double progress_interval(void) {
    const char *e = getenv("JITFIT_BATCH_PROGRESS_MS");
    return e && *e ? strtod(e, NULL) : BATCH_PROGRESS_MS;
}

/* Counts k more finished fits and calls batch_progress when the last call is old enough (the
 * CPU pass after each fit, a GPU batch after each chunk). */
static void batch_progress(batch_ctx *c, size_t k) {
    const jf_fit_options *o = &c->s->o;
    if (!o->batch_progress) return;
    pthread_mutex_lock(&c->lock);
    size_t done = c->done += k;
    double t = jf_clock_ms();
    int due = t - c->last_report >= c->interval && done < c->nfits;
    if (due) c->last_report = t;
    pthread_mutex_unlock(&c->lock);
    /* The user's callback runs outside the counter's lock, so a slow one (a terminal write)
     * holds up no fit: a worker that finds another report in progress skips its own, the next
     * one is due soon. The count is read again under the report lock, so successive calls
     * never go down. */
    if (!due || pthread_mutex_trylock(&c->report) != 0) return;
    pthread_mutex_lock(&c->lock);
    done = c->done;
    pthread_mutex_unlock(&c->lock);
    if (done < c->nfits) o->batch_progress(o->batch_progress_ctx, done, c->nfits);
    pthread_mutex_unlock(&c->report);
}

/* Fit i of the batch from its checked data (st: JF_OK, or why the checks failed; w: its
 * weights; x0: its start) into its result or row, with pre[i] the device loop's results of a
 * GPU batch: run_fit runs the iterations (CPU) or only the finish. */
static void batch_fit_one(batch_ctx *c, size_t i, int st, const double *w, const double *x0) {
    const fit_setup *s = c->s;
    size_t np = s->m->np;
    char **em = c->errmsgs ? &c->errmsgs[i] : NULL;
    if (st == JF_OK && c->pre && c->pre[i].status < 0)
        st = fail(em, JF_ERR_INTERNAL, "the GPU batch did not run this fit");
    jf_fit_result *res = NULL;
    if (st == JF_OK) {
        jf_lm_config cfg = make_config(s, 0);
        st = run_fit(s, &c->data[i], w, x0, held_row(s, i), NULL, &cfg, c->t0, &res, em, NULL,
                     c->pre ? &c->pre[i] : NULL, NULL);
    }
    if (c->cols) {
        columns_put(c->cols, i, np, st == JF_OK ? res : NULL, st);
        jf_fit_result_free(res);
    } else {
        c->results[i] = res;
    }
    c->codes[i] = st;
}

static void batch_task(void *vctx, size_t k, int worker) {
    (void)worker;
    batch_ctx *c = vctx;
    const fit_setup *s = c->s;
    size_t np = s->m->np, i = c->todo ? c->todo[k] : k;
    char **em = c->errmsgs ? &c->errmsgs[i] : NULL;
    double *w = NULL;
    double *x0 = malloc(np * sizeof *x0);
    char msg[MSG_LEN];
    int st;
    if (!x0) st = fail(em, JF_ERR_NOMEM, "out of memory");
    else st = check_data(s, &c->data[i], &w, em, 0, NULL, NULL);
    if (st == JF_OK &&
        jf_bounds_start(s->m, c->p0 ? c->p0 + i * np : s->o.p0, s->lo, s->hi, x0, msg,
                        sizeof msg) != JF_OK)
        st = fail(em, JF_ERR_ARG, "%s", msg);
    if (st == JF_OK && s->fx && jf_fixed_check(s->fx, i, msg, sizeof msg) != JF_OK)
        st = fail(em, JF_ERR_ARG, "%s", msg);
    batch_fit_one(c, i, st, w, x0);
    free(w);
    free(x0);
    batch_progress(c, 1);
}

/* Fits per task of a GPU batch's host passes (the checks before the launch, the rows after):
 * enough that a task is worth handing to a thread, few enough to balance. */
#define BATCH_HOST_CHUNK 2048

/* What the host passes around a GPU batch's launch share. */
typedef struct gpu_pass {
    const fit_setup *s;
    const jf_data *data;
    const double *p0;           /* nfits × np starting values, or NULL */
    jf_batch_out *pre;          /* nfits: what the device leaves, for the CPU pass */
    double *store;              /* their arrays */
    double **ws;                /* nfits weights (fits with sigma) */
    double *x0;                 /* nfits × np starts */
    char *ok;                   /* nfits: passed the checks */
    size_t nfits;
    /* the launch's list, filled by the tasks in parallel: task t's passing fits go to
     * [first[t], first[t] + their count), in the batch's order */
    jf_batch_fit *fits;
    size_t *first;              /* per task: its passing fits, then where they start */
    /* after the launch */
    const jf_batch_columns *cols;
    batch_ctx *bc;              /* the batch: where a fit finished on the host goes */
    size_t *map;                /* nok: the launch's fits' indices in the batch */
    size_t nok;
    jf_batch_out *outs;         /* nok: the device loop's results */
    size_t k0, k1;              /* the launch's fits whose results came back: [k0, k1) */
    const double *stats;        /* their statistics records, or NULL */
    size_t *written;            /* per task: fits whose result or row is in place */
    size_t rows_chunk;          /* fits per task of gpu_pass_rows */
    jf_pool *pool;
    size_t nwritten;            /* fits done so far */
} gpu_pass;

/* Checks fits [task·BATCH_HOST_CHUNK, ...) as a single fit would be checked (a failing one is
 * checked again by the CPU pass, for its message) and finds their starts. x's values are checked
 * once for a run of fits that read the same x (pixels, channels). */
static void gpu_pass_check(void *vctx, size_t task, int worker) {
    (void)worker;
    gpu_pass *g = vctx;
    const fit_setup *s = g->s;
    size_t np = s->m->np, end = (task + 1) * BATCH_HOST_CHUNK;
    const double *x_ok = NULL;
    size_t x_ok_ldx = 0, x_ok_n = 0;
    for (size_t i = task * BATCH_HOST_CHUNK; i < end && i < g->nfits; i++) {
        const jf_data *d = &g->data[i];
        jf_batch_out *o = &g->pre[i];
        o->status = -1;
        o->x = g->store + i * (2 * np * np + 2 * np);
        o->A = o->x + np;
        o->g = o->A + np * np;
        o->R = o->g + np;
        size_t ldx = d->ldx ? d->ldx : d->n;
        int x_checked = d->x && d->x == x_ok && ldx == x_ok_ldx && d->n <= x_ok_n;
        char msg[MSG_LEN];
        g->ok[i] = check_data(s, d, &g->ws[i], NULL, x_checked, NULL, NULL) == JF_OK &&
                   jf_bounds_start(s->m, g->p0 ? g->p0 + i * np : s->o.p0, s->lo, s->hi,
                                   g->x0 + i * np, msg, sizeof msg) == JF_OK &&
                   (!s->fx || jf_fixed_check(s->fx, i, msg, sizeof msg) == JF_OK);
        if (g->ok[i] && !x_checked) {
            x_ok = d->x;
            x_ok_ldx = ldx;
            x_ok_n = d->n;
        }
        g->first[task] += (size_t)g->ok[i];
    }
}

/* The launch's entries of the passing fits [task·BATCH_HOST_CHUNK, ...), from first[task] on
 * (a serial loop over 10⁷ fits took most of the H200's 1.2 s of checks: 90 ns a fit). */
static void gpu_pass_list(void *vctx, size_t task, int worker) {
    (void)worker;
    gpu_pass *g = vctx;
    const fit_setup *s = g->s;
    size_t np = s->m->np, end = (task + 1) * BATCH_HOST_CHUNK, k = g->first[task];
    for (size_t i = task * BATCH_HOST_CHUNK; i < end && i < g->nfits; i++) {
        if (!g->ok[i]) continue;
        const jf_data *d = &g->data[i];
        g->fits[k] = (jf_batch_fit){.n = d->n, .x = d->x, .ldx = d->ldx ? d->ldx : d->n,
                                    .y = d->y, .w = g->ws[i], .x0 = g->x0 + i * np,
                                    .held = held_row(s, i)};
        g->outs[k] = g->pre[i];
        g->map[k++] = i;
    }
}

/* As a chunk of the launch's fits [k0, k1) comes back, for its fits [k0 + task·rows_chunk,
 * ...): a row of the columns from each statistics record, else the finish from the device
 * loop's results on the host, now, while the device runs the next chunks. */
static void gpu_pass_rows(void *vctx, size_t task, int worker) {
    (void)worker;
    gpu_pass *g = vctx;
    size_t np = g->s->m->np, nst = JF_BATCH_STATS(np), k = g->k0 + task * g->rows_chunk;
    size_t end = k + g->rows_chunk < g->k1 ? k + g->rows_chunk : g->k1;
    g->written[task] = 0;
    for (; k < end; k++) {
        size_t i = g->map[k];
        const double *st = g->stats ? g->stats + (k - g->k0) * nst : NULL;
        if (st && st[0] != 0.0) {
            columns_from_stats(g->cols, i, np, &g->data[i], st);
            g->pre[i].status = PRE_WRITTEN;
            g->written[task]++;
        } else {
            g->pre[i] = g->outs[k];
            batch_fit_one(g->bc, i, JF_OK, g->ws[i], g->x0 + i * np);
            g->pre[i].status = PRE_FINISHED;
            g->written[task]++;
        }
    }
}

/* jf_batch_chunk_fn: the results or rows of a chunk, on the pool's threads while the device
 * runs the next chunks; they count as finished for batch_progress. */
static void gpu_chunk_done(void *vctx, size_t f0, size_t f1, const double *st) {
    gpu_pass *g = vctx;
    /* tasks for 8 per thread at least: a fit the host finishes (no statistics record: more
     * than 8 parameters, a robust loss into objects) costs milliseconds, and 10⁴ 11-parameter
     * spectra in tasks of 2048 kept 5 of the H200 host's 16 threads busy for 2 s */
    size_t n = f1 - f0, per = 8 * (size_t)jf_pool_size(g->pool);
    size_t chunk = (n + per - 1) / per;
    g->rows_chunk = chunk < 1 ? 1 : chunk > BATCH_HOST_CHUNK ? BATCH_HOST_CHUNK : chunk;
    size_t ntasks = (n + g->rows_chunk - 1) / g->rows_chunk;
    g->k0 = f0;
    g->k1 = f1;
    g->stats = st;
    jf_pool_run(g->pool, ntasks, gpu_pass_rows, g);
    size_t k = 0;
    for (size_t t = 0; t < ntasks; t++) k += g->written[t];
    g->nwritten += k;
    batch_progress(g->bc, k);
}

/* A GPU batch: every fit that passes its checks goes to the device (in one launch, or in
 * chunks: *launches), and is done as its chunk comes back (bc: the batch's outputs): with
 * cols, its row straight from the device's statistics record (pre[i].status PRE_WRITTEN), else
 * its finish on the host from its loop's results (PRE_FINISHED); *written counts both. The
 * fits that did not pass keep status -1: the CPU pass over the batch reports their errors.
 * The host's passes run on pool's threads. JF_OK, FIT_GPU_FALLBACK (not enough GPU memory:
 * reason in fallback; no fit is done then) or an error with the reason in why. */
static int batch_gpu_fits(batch_ctx *bc, jf_batch_out *pre, double *store, jf_pool *pool,
                          size_t *written, size_t *launches, const char **per_fit,
                          jf_batch_times *times, double *checks_ms, char *why, size_t n,
                          char *fallback) {
    const fit_setup *s = bc->s;
    const struct jf_model *m = s->m;
    const jf_data *data = bc->data;
    const double *p0 = bc->p0;
    const jf_batch_columns *cols = bc->cols;
    size_t nfits = bc->nfits;
    size_t np = m->np, nok = 0, ntasks = (nfits + BATCH_HOST_CHUNK - 1) / BATCH_HOST_CHUNK;
    jf_batch_fit *fits = calloc(nfits, sizeof *fits);
    size_t *map = calloc(nfits, sizeof *map);
    double **ws = calloc(nfits, sizeof *ws);
    double *x0 = malloc(nfits * np * sizeof *x0);
    jf_batch_out *outs = calloc(nfits, sizeof *outs);
    char *ok = malloc(nfits);
    /* (gpu_chunk_done's tasks: at most ntasks, or 8 per thread and one) */
    size_t *wtask = calloc(ntasks + 8 * (size_t)jf_pool_size(pool) + 1, sizeof *wtask);
    size_t *first = calloc(ntasks, sizeof *first);
    int code = JF_OK;
    *written = 0;
    *launches = 0;
    *checks_ms = 0.0;
    memset(times, 0, sizeof *times);
    if (!fits || !map || !ws || !x0 || !outs || !ok || !wtask || !first) {
        snprintf(why, n, "out of memory");
        code = JF_ERR_NOMEM;
        goto done;
    }
    gpu_pass g = {.s = s, .data = data, .p0 = p0, .pre = pre, .store = store, .ws = ws,
                  .x0 = x0, .ok = ok, .nfits = nfits, .cols = cols, .bc = bc, .map = map,
                  .outs = outs,
                  .written = wtask, .pool = pool, .fits = fits, .first = first};
    double t0 = jf_clock_ms();
    jf_pool_run(pool, ntasks, gpu_pass_check, &g);
    for (size_t t = 0; t < ntasks; t++) {
        size_t c = first[t];
        first[t] = nok;
        nok += c;
    }
    jf_pool_run(pool, ntasks, gpu_pass_list, &g);
    *checks_ms = jf_clock_ms() - t0;
    if (nok) {
        int loss_unused;
        jf_jit_options jo = gpu_jit_options(s, &loss_unused); /* as gpu_compiles checks it */
        jf_lm_config cfg = make_config(s, 0);
        g.nok = nok;
        code = jf_batch_cuda_run(m, &jo, s->o.loss, s->o.f_scale, nok, fits, &cfg, s->o.max_gpu_mem,
                                 outs, cols != NULL, s->o.absolute_sigma, gpu_chunk_done, &g,
                                 launches, per_fit, times, pool, why, n);
        if (code == JF_ERR_NOMEM && strstr(why, "GPU memory")) {
            snprintf(fallback, MSG_LEN, "%s", why);
            code = FIT_GPU_FALLBACK;
        }
        if (code == JF_OK) *written = g.nwritten;
    }
done:
    for (size_t i = 0; ws && i < nfits; i++) free(ws[i]);
    free(ws);
    free(fits);
    free(map);
    free(x0);
    free(outs);
    free(ok);
    free(wtask);
    free(first);
    return code;
}

/* Frees the results and messages that fits of the batch already have (before every fit gets
 * the reason why the batch failed, or before the CPU runs them all again). */
static void batch_forget(batch_ctx *c) {
    for (size_t i = 0; c->results && i < c->nfits; i++) {
        jf_fit_result_free(c->results[i]);
        c->results[i] = NULL;
    }
    for (size_t i = 0; c->errmsgs && i < c->nfits; i++) {
        free(c->errmsgs[i]);
        c->errmsgs[i] = NULL;
    }
}

/* The device_note's account of a GPU batch that ran: how it was launched, where the finish ran,
 * where the time went on the host clock (checks: the host's checks of the fits before the
 * launch). With $JITFIT_GPU_BATCH_TIMES=1 also on stderr (jf_fit_batch_columns has no note). */
static void batch_note(fit_setup *s, const jf_batch_out *pre, size_t nfits, size_t launches,
                       const char *per_fit, const jf_batch_times *t, double checks_ms) {
    size_t len = strlen(s->device_note), ndev = 0;
    for (size_t i = 0; i < nfits; i++)
        ndev += pre[i].status == PRE_WRITTEN || (pre[i].status != -1 && pre[i].finished);
    char how[96];
    if (launches == 1) snprintf(how, sizeof how, "one launch, %s per fit", per_fit);
    else snprintf(how, sizeof how, "%zu launches on two streams, %s per fit", launches, per_fit);
    if (ndev == 0)
        snprintf(s->device_note + len, sizeof s->device_note - len,
                 "; batch: %s, then the finish on the CPU", how);
    else if (ndev == nfits)
        snprintf(s->device_note + len, sizeof s->device_note - len,
                 "; batch: %s, the finish (polish, J's triangle) included", how);
    else
        snprintf(s->device_note + len, sizeof s->device_note - len,
                 "; batch: %s, the finish (polish, J's triangle) on the GPU for %zu of %zu fits, "
                 "the rest on the CPU",
                 how, ndev, nfits);
    len = strlen(s->device_note);
    snprintf(s->device_note + len, sizeof s->device_note - len,
             "; host ms: checks %.3g, module %.3g, memory %.3g, packing and launches %.3g, "
             "waiting for the GPU %.3g, rows %.3g",
             checks_ms, t->module, t->memory, t->submit, t->wait, t->rows);
    const char *e = getenv("JITFIT_GPU_BATCH_TIMES");
    if (e && strcmp(e, "1") == 0) fprintf(stderr, "jitfit: GPU batch of %zu fits: %s\n", nfits,
                                          s->device_note);
}

/* jf_fit_batch (results) and jf_fit_batch_columns (cols) in one, but for the final
 * batch_progress call (batch_run). */
static int batch_fits(const jf_model *m, size_t nfits, const jf_data *data, const double *p0,
                      const jf_fit_options *opts, const jf_fixed_plan *fx,
                      jf_fit_result **results, char **errmsgs, const jf_batch_columns *cols);

/* Forwards the batch_progress calls of one part of a batch (batch_held) as counts of the whole. */
typedef struct part_progress {
    void (*fn)(void *ctx, size_t done, size_t total);
    void *ctx;
    size_t base, total;
} part_progress;

static void part_progress_fn(void *vctx, size_t done, size_t total) {
    (void)total;
    part_progress *pp = vctx;
    pp->fn(pp->ctx, pp->base + done, pp->total);
}

/* Copies row k of the part's columns sc (nf values per row for params and standard errors) to
 * row i of c. */
static void columns_copy_row(const jf_batch_columns *c, size_t i, const jf_batch_columns *sc,
                             size_t k, size_t nf) {
    if (c->code) c->code[i] = sc->code[k];
    if (c->status) c->status[i] = sc->status[k];
    if (c->params) memcpy(c->params + i * nf, sc->params + k * nf, nf * sizeof(double));
    if (c->std_errors) memcpy(c->std_errors + i * nf, sc->std_errors + k * nf, nf * sizeof(double));
    if (c->cost) c->cost[i] = sc->cost[k];
    if (c->chi2) c->chi2[i] = sc->chi2[k];
    if (c->r_squared) c->r_squared[i] = sc->r_squared[k];
    if (c->nfev) c->nfev[i] = sc->nfev[k];
    if (c->iterations) c->iterations[i] = sc->iterations[k];
}

/* The fits of pl (results and errmsgs, or the narrow columns nc: nfree values a row, code
 * always there) by the reduced model, which reads each fit's held values; a fit it cannot read
 * them for exactly (jf_fixed_exact) is fitted with them written in, each distinct set of values
 * a batch of its own (a compile each). Returns JF_OK when every fit ran, else the first failing
 * fit's status, as jf_fit_batch. */
static int batch_held(const jf_model *m, const jf_fixed_plan *pl, size_t nfits,
                      const jf_data *data, jf_fit_result **results, char **errmsgs,
                      const jf_batch_columns *nc) {
    size_t nh = pl->nheld, nf = pl->nfree, nparts = 1;
    size_t *part = malloc(nfits * sizeof *part), *rep = malloc((nfits + 1) * sizeof *rep);
    int st = part && rep ? JF_OK : JF_ERR_NOMEM;
    char msg[MSG_LEN];
    for (size_t i = 0; st == JF_OK && i < nfits; i++) {
        /* a fit whose held values are out of bounds or not finite goes with the reduced model,
         * whose batch checks them (fx) and says why */
        if (jf_fixed_exact(pl, i) || jf_fixed_check(pl, i, msg, sizeof msg) != JF_OK) {
            part[i] = 0;
            continue;
        }
        size_t q = 1;
        while (q < nparts && memcmp(jf_fixed_held(pl, rep[q]), jf_fixed_held(pl, i),
                                    nh * sizeof(double)) != 0)
            q++;
        if (q == nparts) rep[nparts++] = i;
        part[i] = q;
    }
    if (st == JF_OK && nparts == 1) { /* the common case: one batch of the reduced model */
        st = batch_fits(pl->reduced, nfits, data, pl->p0_rows, &pl->o, pl, results, errmsgs, nc);
        free(part);
        free(rep);
        return st;
    }
    part_progress pp = {pl->o.batch_progress, pl->o.batch_progress_ctx, 0, nfits};
    jf_fit_options po = pl->o;
    if (po.batch_progress) {
        po.batch_progress = part_progress_fn;
        po.batch_progress_ctx = &pp;
    }
    /* a part's fits, gathered (p0 rows exist whenever fits differ in their held values) */
    size_t *idx = malloc(nfits * sizeof *idx);
    jf_data *sd = malloc(nfits * sizeof *sd);
    double *sp = pl->p0_rows ? malloc(nfits * nf * sizeof *sp) : NULL;
    double *sh = malloc((nfits * nh + 1) * sizeof *sh);
    jf_fit_result **sr = results ? malloc(nfits * sizeof *sr) : NULL;
    char **se = errmsgs ? malloc(nfits * sizeof *se) : NULL;
    jf_batch_columns sc;
    memset(&sc, 0, sizeof sc);
    double *cbuf = nc ? malloc(nfits * (2 * nf + 3) * sizeof *cbuf) : NULL;
    size_t *zbuf = nc ? malloc(2 * nfits * sizeof *zbuf) : NULL;
    int *ibuf = nc ? malloc(2 * nfits * sizeof *ibuf) : NULL;
    if (st == JF_OK && (!idx || !sd || (pl->p0_rows && !sp) || !sh || (results && !sr) ||
                        (errmsgs && !se) || (nc && (!cbuf || !zbuf || !ibuf))))
        st = JF_ERR_NOMEM;
    if (nc && cbuf && zbuf && ibuf) { /* every column, read back only where the caller has it */
        sc.code = ibuf;
        sc.status = ibuf + nfits;
        sc.params = cbuf;
        sc.std_errors = cbuf + nfits * nf;
        sc.cost = cbuf + 2 * nfits * nf;
        sc.chi2 = sc.cost + nfits;
        sc.r_squared = sc.chi2 + nfits;
        sc.nfev = zbuf;
        sc.iterations = zbuf + nfits;
    }
    int *pstat = malloc(nparts * sizeof *pstat); /* each part's status */
    if (!pstat) st = JF_ERR_NOMEM;
    int first = JF_OK;
    for (size_t q = 0; st == JF_OK && q < nparts; q++) {
        pstat[q] = JF_OK;
        size_t cnt = 0;
        for (size_t i = 0; i < nfits; i++) {
            if (part[i] != q) continue;
            idx[cnt] = i;
            sd[cnt] = data[i];
            if (sp) memcpy(sp + cnt * nf, pl->p0_rows + i * nf, nf * sizeof *sp);
            memcpy(sh + cnt * nh, jf_fixed_held(pl, i), nh * sizeof *sh);
            cnt++;
        }
        if (!cnt) continue;
        jf_model *wm = NULL;
        jf_fixed_plan sub = *pl; /* part 0: the plan with the part's rows of held values */
        sub.held = sh;
        sub.nfits = cnt;
        int pst = q ? jf_fixed_written(pl, m, rep[q], &wm) : JF_OK;
        if (pst == JF_OK)
            pst = batch_fits(q ? wm : pl->reduced, cnt, sd, sp, &po, q ? NULL : &sub, sr, se,
                             nc ? &sc : NULL);
        else /* the written-in model could not be built: the part's fits say why */
            for (size_t k = 0; k < cnt; k++) {
                if (se) se[k] = strdup(pst == JF_ERR_NOMEM ? "out of memory" : "the model with "
                                       "its fixed parameters written in exceeds the node limit");
                if (sr) sr[k] = NULL;
                if (nc) columns_put(&sc, k, nf, NULL, pst);
            }
        jf_model_free(wm);
        for (size_t k = 0; k < cnt; k++) {
            if (results) results[idx[k]] = sr[k];
            if (errmsgs) errmsgs[idx[k]] = se[k];
            if (nc) columns_copy_row(nc, idx[k], &sc, k, nf);
        }
        pstat[q] = pst;
        pp.base += cnt;
    }
    /* the first failing fit's status: the status of its part, where it is the first to fail */
    for (size_t i = 0; st == JF_OK && i < nfits; i++) {
        int failed = nc ? nc->code[i] != JF_OK : !results || !results[i];
        if (!failed || pstat[part[i]] == JF_OK) continue;
        first = nc ? nc->code[i] : pstat[part[i]];
        break;
    }
    if (st != JF_OK) { /* nothing ran: every fit says why */
        for (size_t i = 0; i < nfits; i++) {
            if (results) results[i] = NULL;
            if (errmsgs) errmsgs[i] = strdup("out of memory");
            if (nc) columns_put(nc, i, nf, NULL, st);
        }
        first = st;
    }
    free(pstat);
    free(part);
    free(rep);
    free(idx);
    free(sd);
    free(sp);
    free(sh);
    free(sr);
    free(se);
    free(cbuf);
    free(zbuf);
    free(ibuf);
    return first;
}

/* A batch with parameters held fixed: the reduced model's batch, each fit widened (fixed.c).
 * Into columns, the per-fit scalars go straight to the caller's arrays; parameters and
 * standard errors through narrow ones. */
static int batch_fixed(const jf_model *m, size_t nfits, const jf_data *data, const double *p0,
                       const jf_fit_options *opts, jf_fit_result **results, char **errmsgs,
                       const jf_batch_columns *cols) {
    jf_fixed_plan pl;
    char msg[MSG_LEN];
    int st = jf_fixed_plan_init(&pl, m, opts, p0, nfits, msg, sizeof msg);
    if (st != JF_OK) { /* nothing could run: every fit gets the reason */
        for (size_t i = 0; errmsgs && i < nfits; i++) errmsgs[i] = strdup(msg);
        for (size_t i = 0; cols && i < nfits; i++) columns_put(cols, i, m->np, NULL, st);
        return st;
    }
    if (!cols) {
        st = batch_held(m, &pl, nfits, data, results, errmsgs, NULL);
        for (size_t i = 0; i < nfits; i++) {
            if (!results[i]) continue;
            if (!(results[i] = widen_result(&pl, i, results[i]))) {
                if (errmsgs) errmsgs[i] = strdup("out of memory");
                if (st == JF_OK) st = JF_ERR_NOMEM;
            }
        }
        jf_fixed_plan_free(&pl);
        return st;
    }
    size_t nf = pl.nfree;
    jf_batch_columns nc = *cols;
    int *code = cols->code ? cols->code : malloc(nfits * sizeof *code);
    nc.code = code;
    nc.params = cols->params ? malloc(nfits * nf * sizeof *nc.params) : NULL;
    nc.std_errors = cols->std_errors ? malloc(nfits * nf * sizeof *nc.std_errors) : NULL;
    if (!code || (cols->params && !nc.params) || (cols->std_errors && !nc.std_errors)) {
        st = JF_ERR_NOMEM;
        for (size_t i = 0; i < nfits; i++) columns_put(cols, i, m->np, NULL, st);
    } else {
        st = batch_held(m, &pl, nfits, data, NULL, NULL, &nc);
        int *ran = malloc(nfits * sizeof *ran);
        if (!ran) { /* cannot tell rows apart any more */
            st = JF_ERR_NOMEM;
            for (size_t i = 0; i < nfits; i++) columns_put(cols, i, m->np, NULL, st);
        } else {
            for (size_t i = 0; i < nfits; i++) ran[i] = code[i] == JF_OK;
            if (cols->params) jf_fixed_widen_rows(&pl, nc.params, cols->params, nfits, ran, 1);
            if (cols->std_errors)
                jf_fixed_widen_rows(&pl, nc.std_errors, cols->std_errors, nfits, ran, 0);
        }
        free(ran);
    }
    if (!cols->code) free(code);
    free(nc.params);
    free(nc.std_errors);
    jf_fixed_plan_free(&pl);
    return st;
}

static int batch_fits(const jf_model *m, size_t nfits, const jf_data *data, const double *p0,
                      const jf_fit_options *opts, const jf_fixed_plan *fx,
                      jf_fit_result **results, char **errmsgs, const jf_batch_columns *cols) {
    double t0 = jf_clock_ms();
    if (results)
        for (size_t i = 0; i < nfits; i++) results[i] = NULL;
    if (errmsgs)
        for (size_t i = 0; i < nfits; i++) errmsgs[i] = NULL;
    if (!m || (nfits && (!data || (!results && !cols)))) {
        /* every fit gets the reason, as the header promises for a fit that could not run */
        const char *why = !m ? "the model is NULL" : !data ? "data is NULL" : "results is NULL";
        for (size_t i = 0; errmsgs && i < nfits; i++) errmsgs[i] = strdup(why);
        /* without a model the rows of params and std_errors have no known width: only the
         * per-fit members are written */
        for (size_t i = 0; cols && i < nfits; i++)
            columns_put(cols, i, m ? m->np : 0, NULL, JF_ERR_ARG);
        return JF_ERR_ARG;
    }
    if (nfits == 0) return JF_OK;
    if (jf_fixed_any(m, opts)) return batch_fixed(m, nfits, data, p0, opts, results, errmsgs, cols);
    fit_setup s;
    char *setup_err = NULL;
    size_t maxn = 0, total = 0;
    for (size_t i = 0; data && i < nfits; i++) {
        if (data[i].n > maxn) maxn = data[i].n;
        total += data[i].n;
    }
    int st = setup_init(&s, m, opts, maxn, nfits, total, cols != NULL, 0, &setup_err);
    s.fx = fx;
    /* a GPU batch finishes fits on the host as their chunks come back (and falls back to the
     * CPU): the CPU kernels come first */
    if (st == JF_OK && s.gpu) st = setup_cpu_kernels(&s, &setup_err);
    int *codes = st == JF_OK ? calloc(nfits, sizeof *codes) : NULL;
    if (st == JF_OK && !codes) st = fail(&setup_err, JF_ERR_NOMEM, "out of memory");
    if (st != JF_OK) {
        /* Nothing could run: every fit gets the reason. */
        if (errmsgs)
            for (size_t i = 0; i < nfits; i++) errmsgs[i] = setup_err ? strdup(setup_err) : NULL;
        for (size_t i = 0; cols && i < nfits; i++) columns_put(cols, i, m->np, NULL, st);
        free(setup_err);
        setup_free(&s);
        return st;
    }
    batch_ctx c = {&s, data, p0, results, errmsgs, codes, t0, nfits, 0, t0,
                   PTHREAD_MUTEX_INITIALIZER, NULL, cols, NULL, progress_interval(),
                   PTHREAD_MUTEX_INITIALIZER};
    jf_batch_out *pre = NULL;
    double *store = NULL;
    size_t *todo = NULL, ntodo = nfits, written = 0;
    int nt = jf_threads_resolve(s.o.nthreads);
    jf_pool *pool =
        (nt > 1 && nfits > 1) ? jf_pool_acquire((size_t)nt < nfits ? nt : (int)nfits) : NULL;
    if (s.gpu) {
        size_t np = m->np;
        char why[MSG_LEN] = "", fallback[MSG_LEN] = "";
        size_t launches = 0;
        const char *per_fit = "";
        jf_batch_times times;
        double checks_ms = 0.0;
        pre = calloc(nfits, sizeof *pre);
        store = malloc(nfits * (2 * np * np + 2 * np) * sizeof *store);
        c.pre = pre;
        st = pre && store ? batch_gpu_fits(&c, pre, store, pool, &written, &launches, &per_fit,
                                           &times, &checks_ms, why, sizeof why, fallback)
                          : JF_ERR_NOMEM;
        if (st == FIT_GPU_FALLBACK) { /* the CPU runs the batch */
            char note[MSG_LEN];
            snprintf(note, sizeof note, "cpu: fell back from the GPU: %.400s", fallback);
            memcpy(s.device_note, note, sizeof note);
            batch_forget(&c);
            written = 0;
            free(pre);
            pre = NULL;
            c.pre = NULL;
            st = JF_OK;
        } else if (st == JF_OK) {
            batch_note(&s, pre, nfits, launches, per_fit, &times, checks_ms);
            /* the results made as their chunks came back, before the batch's note was complete */
            for (size_t i = 0; results && i < nfits; i++)
                if (pre[i].status == PRE_FINISHED && results[i]) {
                    result_block *b = (result_block *)results[i];
                    memcpy(b->device_note, s.device_note, strlen(s.device_note) + 1);
                    results[i]->device_note = b->device_note;
                }
        } else { /* the batch failed: every fit gets the reason, rows already written too */
            batch_forget(&c);
            for (size_t i = 0; errmsgs && i < nfits; i++) errmsgs[i] = strdup(why[0] ? why : "out of memory");
            for (size_t i = 0; cols && i < nfits; i++) columns_put(cols, i, m->np, NULL, st);
            free(pre);
            free(store);
            free(codes);
            jf_pool_release(pool);
            setup_free(&s);
            return st;
        }
        if (written) { /* the CPU pass runs the rest: the fits that did not pass their checks */
            todo = malloc((nfits - written) * sizeof *todo + 1);
            if (!todo) st = JF_ERR_NOMEM;
            ntodo = 0;
            for (size_t i = 0; todo && i < nfits; i++)
                if (pre[i].status != PRE_WRITTEN && pre[i].status != PRE_FINISHED) todo[ntodo++] = i;
                else if (pre[i].status == PRE_WRITTEN) codes[i] = JF_OK;
        }
    }
    c.todo = todo; /* c.done already counts the fits the GPU batch did */
    if (st == JF_OK) jf_pool_run(pool, ntodo, batch_task, &c);
    jf_pool_release(pool);
    pthread_mutex_destroy(&c.lock);
    pthread_mutex_destroy(&c.report);
    if (st == JF_OK)
        for (size_t i = 0; i < nfits && st == JF_OK; i++) st = codes[i];
    else /* out of memory for the CPU pass: the GPU's fits stand; the rest could not run */
        for (size_t i = 0; i < nfits; i++)
            if (!pre || (pre[i].status != PRE_WRITTEN && pre[i].status != PRE_FINISHED)) {
                if (cols) columns_put(cols, i, m->np, NULL, st);
                if (errmsgs && !errmsgs[i]) errmsgs[i] = strdup("out of memory");
            }
    free(todo);
    free(codes);
    free(pre);
    free(store);
    setup_free(&s);
    return st;
}

/* batch_fits, then the final batch_progress call, on every path: the header promises it
 * "always", and a caller may wait for it (a progress bar closed, another thread told), also when
 * no fit could run. */
static int batch_run(const jf_model *m, size_t nfits, const jf_data *data, const double *p0,
                     const jf_fit_options *opts, jf_fit_result **results, char **errmsgs,
                     const jf_batch_columns *cols) {
    int st = batch_fits(m, nfits, data, p0, opts, NULL, results, errmsgs, cols);
    if (opts && opts->batch_progress) opts->batch_progress(opts->batch_progress_ctx, nfits, nfits);
    return st;
}

int jf_fit_batch(const jf_model *m, size_t nfits, const jf_data *data, const double *p0,
                 const jf_fit_options *opts, jf_fit_result **results, char **errmsgs) {
    return batch_run(m, nfits, data, p0, opts, results, errmsgs, NULL);
}

int jf_fit_batch_columns(const jf_model *m, size_t nfits, const jf_data *data, const double *p0,
                         const jf_fit_options *opts, const jf_batch_columns *out) {
    return batch_run(m, nfits, data, p0, opts, NULL, NULL, out);
}
