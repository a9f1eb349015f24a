/* bench_gpu_batch: many small independent fits in one call (jf_fit_batch_columns: results as
 * arrays, as a pipeline of 10⁷ fits wants them) on the GPU (one launch, a warp or block per
 * fit, the finish included) against jitfit's CPU batch on all cores, in one run
 * (docs/PERFORMANCE.md, "GPU batches").
 *
 * Two shapes of work, as issue 6 names them:
 *   gauss2d   A*exp(-((x-x0)^2+(y-y0)^2)/(2*s^2))+b on 5×5 pixels (Gpufit's benchmark shape:
 *             its paper reports 3.0 M fits/s on a GTX 1080, fp32, ≤ 10 iterations), fp64 and
 *             fp32, for each count in --fits;
 *   spectrum  --spectrum-lines K Gaussian lines (default 1) on a linear baseline,
 *             A0*exp(-(x-m0)^2/(2*w0^2))+...+c0+c1*x (3K+2 parameters: beyond 8 the GPU batch
 *             tiles its sums, a block per fit), on --spectrum-points points, --spectrum-fits fits.
 * Data: truth drawn per fit from a fixed-seed generator (splitmix64 + Box-Muller), Gaussian
 * noise; starting values from the data (moments: the brightest pixel or channel, the minimum
 * as background), as a real pipeline would. Tolerances 1e-8, at most 100 evaluations per fit.
 * Reported per row: fits, total points, GPU time (warm: the module was compiled by a small
 * batch first) and fits/s, CPU time and fits/s, CPU/GPU, converged fraction on each, median
 * iterations, and the largest parameter difference GPU vs CPU relative to the CPU's standard
 * error (fits that converged on both). Without a GPU the GPU columns are nan.
 * Not a test: it asserts nothing.
 *
 * usage: bench_gpu_batch [--fits 1e4,1e5,1e6,1e7] [--cpu-max N] [--spectrum-fits N]
 *                        [--spectrum-points N] [--spectrum-lines K] [--threads N]
 * (defaults: the four counts, CPU batches up to 1e6 fits, 1e5 spectra of 1000 points)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../include/jitfit.h"
#include "bench_util.h"


static int cmp_size(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* One problem set: nfits fits of npts points sharing the variables x (nv columns). */
typedef struct problem {
    size_t nfits, npts, nv, np;
    double *x;    /* nv × npts, shared */
    double *y;    /* nfits × npts */
    double *p0;   /* nfits × np */
    jf_data *d;   /* nfits */
} problem;

static void problem_free(problem *p) {
    free(p->x);
    free(p->y);
    free(p->p0);
    free(p->d);
}

static int problem_alloc(problem *p, size_t nfits, size_t npts, size_t nv, size_t np) {
    memset(p, 0, sizeof *p);
    p->nfits = nfits;
    p->npts = npts;
    p->nv = nv;
    p->np = np;
    p->x = malloc(nv * npts * sizeof *p->x);
    p->y = malloc(nfits * npts * sizeof *p->y);
    p->p0 = malloc(nfits * np * sizeof *p->p0);
    p->d = malloc(nfits * sizeof *p->d);
    if (!p->x || !p->y || !p->p0 || !p->d) {
        problem_free(p);
        return -1;
    }
    for (size_t f = 0; f < nfits; f++)
        p->d[f] = (jf_data){npts, p->x, npts, p->y + f * npts, NULL};
    return 0;
}

/* 5×5 pixels, spot near the centre: A in [80, 120], x0, y0 within ±0.5 px of 2, s in [0.9,
 * 1.1], background 10, noise sd 1. Start: brightest pixel, its value minus the minimum, s = 1. */
static int make_gauss2d(problem *p, size_t nfits) {
    if (problem_alloc(p, nfits, 25, 2, 5) != 0) return -1;
    for (size_t i = 0; i < 25; i++) {
        p->x[i] = (double)(i % 5);
        p->x[25 + i] = (double)(i / 5);
    }
    for (size_t f = 0; f < nfits; f++) {
        double A = 80 + 40 * uniform(), x0 = 1.5 + uniform(), y0 = 1.5 + uniform();
        double s = 0.9 + 0.2 * uniform(), b = 10;
        double *y = p->y + f * 25, lo = INFINITY, hi = -INFINITY;
        size_t best = 0;
        for (size_t i = 0; i < 25; i++) {
            double dx = p->x[i] - x0, dy = p->x[25 + i] - y0;
            y[i] = A * exp(-(dx * dx + dy * dy) / (2 * s * s)) + b + normal();
            if (y[i] > hi) hi = y[i], best = i;
            if (y[i] < lo) lo = y[i];
        }
        double *q = p->p0 + f * p->np;
        q[0] = hi - lo;
        q[1] = p->x[best];
        q[2] = p->x[25 + best];
        q[3] = 1.0;
        q[4] = lo;
    }
    return 0;
}

/* K lines on a baseline over [0, 100): line l has amp in [5, 15], mu within 5/K of
 * 100 (l + 1/2)/K, w in [1.5, 3.5]/K^(1/2); c0 in [0, 1], c1 in [-0.01, 0.01], noise sd 0.1.
 * Start: per line the brightest channel of its share of the axis, w = 2/K^(1/2), the baseline
 * flat at the minimum. idx maps (A_l, m_l, w_l, c0, c1) to the model's parameter indices. */
static int make_spectrum(problem *p, size_t nfits, size_t npts, int K, const size_t *idx) {
    if (problem_alloc(p, nfits, npts, 1, 3 * (size_t)K + 2) != 0) return -1;
    for (size_t i = 0; i < npts; i++) p->x[i] = 100.0 * (double)i / (double)npts;
    double ws = 1.0 / sqrt((double)K);
    for (size_t f = 0; f < nfits; f++) {
        double amp[16], mu[16], w[16];
        for (int l = 0; l < K; l++) {
            amp[l] = 5 + 10 * uniform();
            mu[l] = 100.0 * (l + 0.5) / K + 10.0 * (uniform() - 0.5) / K;
            w[l] = (1.5 + 2 * uniform()) * ws;
        }
        double c0 = uniform(), c1 = 0.02 * (uniform() - 0.5);
        double *y = p->y + f * npts, lo = INFINITY;
        for (size_t i = 0; i < npts; i++) {
            double v = c0 + c1 * p->x[i];
            for (int l = 0; l < K; l++) {
                double t = p->x[i] - mu[l];
                v += amp[l] * exp(-t * t / (2 * w[l] * w[l]));
            }
            y[i] = v + 0.1 * normal();
            if (y[i] < lo) lo = y[i];
        }
        double *q = p->p0 + f * p->np;
        for (int l = 0; l < K; l++) {
            size_t a = npts * (size_t)l / (size_t)K, b = npts * (size_t)(l + 1) / (size_t)K, best = a;
            for (size_t i = a; i < b; i++)
                if (y[i] > y[best]) best = i;
            q[idx[3 * l]] = y[best] - lo;
            q[idx[3 * l + 1]] = p->x[best];
            q[idx[3 * l + 2]] = 2.0 * ws;
        }
        q[idx[3 * K]] = lo;
        q[idx[3 * K + 1]] = 0.0;
    }
    return 0;
}

typedef struct run {
    double ms;           /* wall time of the batch call */
    size_t converged;    /* fits that converged */
    size_t median_iter;  /* median iterations */
    size_t np;           /* parameters per fit */
    /* the results as columns (jf_fit_batch_columns), kept for the comparison */
    int *code, *status;
    double *params, *se;
    size_t *iter;
} run;

static void run_free(run *r) {
    free(r->code);
    free(r->status);
    free(r->params);
    free(r->se);
    free(r->iter);
    memset(r, 0, sizeof *r);
}

static int converged(int status) { return status >= JF_FIT_FTOL && status <= JF_FIT_GTOL; }

static int batch(const jf_model *m, const problem *p, jf_device dev, int single, int threads,
                 run *out) {
    memset(out, 0, sizeof *out);
    out->ms = NAN;
    size_t n = p->nfits, np = jf_model_num_params(m);
    jf_fit_options o = jf_fit_options_default();
    o.device = dev;
    o.single_precision = single;
    o.nthreads = threads;
    o.max_nfev = 100;
    out->np = np;
    out->code = malloc(n * sizeof *out->code);
    out->status = malloc(n * sizeof *out->status);
    out->params = malloc(n * np * sizeof *out->params);
    out->se = malloc(n * np * sizeof *out->se);
    out->iter = malloc(n * sizeof *out->iter);
    size_t *it = malloc(n * sizeof *it);
    if (!out->code || !out->status || !out->params || !out->se || !out->iter || !it) {
        free(it);
        run_free(out);
        out->ms = NAN;
        return -1;
    }
    jf_batch_columns cols = {out->code, out->status, out->params, out->se, NULL, NULL, NULL,
                             NULL, out->iter};
    double t0 = now_ms();
    int st = jf_fit_batch_columns(m, n, p->d, p->p0, &o, &cols);
    out->ms = now_ms() - t0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (out->code[i] != JF_OK) continue;
        out->converged += converged(out->status[i]);
        it[k++] = out->iter[i];
    }
    qsort(it, k, sizeof *it, cmp_size);
    out->median_iter = k ? it[k / 2] : 0;
    free(it);
    if (st != JF_OK) fprintf(stderr, "batch on %s: %s\n", dev == JF_DEVICE_GPU ? "gpu" : "cpu",
                             jf_status_string(st));
    return st == JF_OK ? 0 : -1;
}

/* Largest |gpu - cpu| / se_cpu over the parameters of fits that converged on both. */
static double max_diff_se(const run *g, const run *c, size_t n) {
    double d = 0;
    size_t np = c->np;
    for (size_t i = 0; i < n; i++) {
        if (g->code[i] != JF_OK || c->code[i] != JF_OK || !converged(g->status[i]) ||
            !converged(c->status[i]))
            continue;
        for (size_t k = 0; k < np; k++) {
            double se = c->se[i * np + k];
            if (se > 0 && isfinite(se))
                d = fmax(d, fabs(g->params[i * np + k] - c->params[i * np + k]) / se);
        }
    }
    return d;
}

static void row(const char *label, const jf_model *m, const problem *p, int single, int gpu_ok,
                double cpu_max, int threads) {
    run g = {0}, c = {0};
    g.ms = c.ms = NAN;
    if (gpu_ok) batch(m, p, JF_DEVICE_GPU, single, threads, &g);
    if ((double)p->nfits <= cpu_max) batch(m, p, JF_DEVICE_CPU, 0, threads, &c);
    double diff = g.code && c.code ? max_diff_se(&g, &c, p->nfits) : NAN;
    double nf = (double)p->nfits;
    printf("%-14s %6s %9.3g %9.3g %10.1f %11.3g %10.1f %11.3g %8.2f %7.4f %7.4f %5zu %10.2g\n",
           label, single ? "fp32" : "fp64", nf, nf * (double)p->npts, g.ms, nf / g.ms * 1e3, c.ms,
           nf / c.ms * 1e3, c.ms / g.ms, g.code ? (double)g.converged / nf : NAN,
           c.code ? (double)c.converged / nf : NAN, g.code ? g.median_iter : c.median_iter, diff);
    fflush(stdout);
    run_free(&g);
    run_free(&c);
}

int main(int argc, char **argv) {
    double fits[16] = {1e4, 1e5, 1e6, 1e7};
    int nfits = 4, threads = 0;
    double cpu_max = 1e6, spec_fits = 1e5, spec_points = 1000;
    int lines = 1;
    rng_state = 7;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--fits")) {
            nfits = parse_list(argv[i + 1], fits, 16);
        } else if (!strcmp(argv[i], "--cpu-max")) cpu_max = strtod(argv[i + 1], NULL);
        else if (!strcmp(argv[i], "--spectrum-fits")) spec_fits = strtod(argv[i + 1], NULL);
        else if (!strcmp(argv[i], "--spectrum-points")) spec_points = strtod(argv[i + 1], NULL);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--spectrum-lines")) lines = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    static const char *const vars2[] = {"x", "y"};
    jf_model_options mo = jf_model_options_default();
    mo.vars = vars2;
    mo.nvars = 2;
    if (lines < 1 || lines > 16) {
        fprintf(stderr, "--spectrum-lines: 1 to 16\n");
        return 2;
    }
    char sptext[2048];
    size_t used = 0, idx[50];
    for (int l = 0; l < lines; l++)
        used += (size_t)snprintf(sptext + used, sizeof sptext - used,
                                 "A%d*exp(-(x-m%d)^2/(2*w%d^2))+", l, l, l);
    snprintf(sptext + used, sizeof sptext - used, "c0+c1*x");
    jf_model *g2 = NULL, *sp = NULL;
    if (jf_model_compile("A*exp(-((x-x0)^2+(y-y0)^2)/(2*s^2))+b", (size_t)-1, &mo, &g2, NULL) != JF_OK ||
        jf_model_compile(sptext, (size_t)-1, NULL, &sp, NULL) != JF_OK)
        return 1;
    for (int l = 0; l < lines; l++) {
        char name[16];
        const char *pre = "Amw";
        for (int k = 0; k < 3; k++) {
            snprintf(name, sizeof name, "%c%d", pre[k], l);
            idx[3 * l + k] = (size_t)jf_model_param_index(sp, name);
        }
    }
    idx[3 * lines] = (size_t)jf_model_param_index(sp, "c0");
    idx[3 * lines + 1] = (size_t)jf_model_param_index(sp, "c1");

    /* warm-up: compiles (or loads) the GPU batch modules and the CPU kernels, and finds out
     * whether there is a GPU */
    problem p;
    if (make_gauss2d(&p, 64) != 0) return 1;
    run w;
    int gpu_ok = 1;
    for (int single = 0; single <= 1; single++) {
        if (batch(g2, &p, JF_DEVICE_GPU, single, threads, &w) != 0) gpu_ok = 0;
        run_free(&w);
    }
    batch(g2, &p, JF_DEVICE_CPU, 0, threads, &w);
    run_free(&w);
    problem_free(&p);
    /* the spectra's module too (the kernel follows the fits' mean length: 64 spectra take the
     * kernel 10⁵ do): the H200's second session timed a 13.9 s compile as its first row */
    if (gpu_ok && spec_fits >= 1) {
        uint64_t keep = rng_state; /* the rows' data as without this warm-up */
        if (make_spectrum(&p, 64, (size_t)spec_points, lines, idx) != 0) return 1;
        rng_state = keep;
        batch(sp, &p, JF_DEVICE_GPU, 0, threads, &w);
        run_free(&w);
        batch(sp, &p, JF_DEVICE_CPU, 0, threads, &w);
        run_free(&w);
        problem_free(&p);
    }
    if (!gpu_ok) printf("(no GPU batch ran: GPU columns are nan)\n");

    printf("%-14s %6s %9s %9s %10s %11s %10s %11s %8s %7s %7s %5s %10s\n", "model", "prec",
           "fits", "points", "gpu ms", "gpu fits/s", "cpu ms", "cpu fits/s", "cpu/gpu",
           "gpu ok", "cpu ok", "iter", "diff (se)");
    for (int i = 0; i < nfits; i++) {
        if (make_gauss2d(&p, (size_t)fits[i]) != 0) {
            fprintf(stderr, "out of memory at %g fits\n", fits[i]);
            return 1;
        }
        row("gauss2d 5x5", g2, &p, 0, gpu_ok, cpu_max, threads);
        row("gauss2d 5x5", g2, &p, 1, gpu_ok, gpu_ok ? -1 : 0, threads); /* fp32: GPU only */
        problem_free(&p);
    }
    if (spec_fits >= 1) {
        if (make_spectrum(&p, (size_t)spec_fits, (size_t)spec_points, lines, idx) != 0) return 1;
        char label[32];
        snprintf(label, sizeof label, "spectrum %dL", lines);
        row(label, sp, &p, 0, gpu_ok, cpu_max, threads);
        problem_free(&p);
    }
    jf_model_free(g2);
    jf_model_free(sp);
    return 0;
}
