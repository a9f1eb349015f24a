/* bench_vector: exact scalar kernels against vector math (SLEEF, jf_jit_options.vector_math).
 *
 * For the damped sine a*exp(-b*x)*sin(c*x+d)+e on x in [0, 20):
 *   - one normal_eq pass over N points on one thread (linear loss, y given, no weights), for the
 *     exact kernels and for each vector ISA the CPU offers (AVX2 through JITFIT_VECTOR_ISA=avx2,
 *     then the widest), with the largest deviation of the sums from the exact ones (relative to
 *     the sum of the terms' magnitudes, so cancellation does not inflate it);
 *     the same pass with the soft_l1 loss, and what obtaining the kernels cost (a compile when
 *     the cache directory is new: JITFIT_CACHE_DIR);
 *   - a whole jf_fit of N points (truth 2, 0.25, 1.5, 0.3, 0.5, Gaussian noise 0.05, start
 *     1.5, 0.2, 1.45, 0, 0, all cores, ftol = xtol = gtol = 1e-8 as bench_fit.py), both modes:
 *     time_total_ms, evaluations, and the largest relative parameter difference.
 * Kernels are obtained (and compiled if needed) before timing. Times are medians. Not a test:
 * it asserts nothing; docs/PERFORMANCE.md ("Vector math (SLEEF)") records its output.
 *
 * usage: bench_vector [--points N] [--reps R]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../codegen/emit.h"
#include "../runtime/kernels.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* xorshift64* and Box-Muller: the same data on every run. */
static uint64_t rng_state = 0x9E3779B97F4A7C15u;
static double uni(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return ((double)((rng_state * 0x2545F4914F6CDD1Du) >> 11) + 0.5) * 0x1p-53;
}
static double gauss(void) { return sqrt(-2.0 * log(uni())) * cos(6.283185307179586 * uni()); }

static const char *isa_name(int isa) {
    return isa == JF_VEC_AVX512 ? "AVX-512F" : isa == JF_VEC_AVX2 ? "AVX2" : "exact";
}

int main(int argc, char **argv) {
    size_t n = 1000000;
    int reps = 9;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--points") == 0 && i + 1 < argc) n = (size_t)atof(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_vector [--points N] [--reps R]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 1000) reps = 9;
    const double truth[5] = {2, 0.25, 1.5, 0.3, 0.5}, start[5] = {1.5, 0.2, 1.45, 0, 0};
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    if (!x || !y) return 1;
    for (size_t i = 0; i < n; i++) {
        x[i] = 20.0 * (double)i / (double)n;
        y[i] = truth[0] * exp(-truth[1] * x[i]) * sin(truth[2] * x[i] + truth[3]) + truth[4] +
               0.05 * gauss();
    }
    jf_model_options mo = jf_model_options_default();
    jf_model *m = NULL;
    if (jf_model_compile("a*exp(-b*x)*sin(c*x+d)+e", (size_t)-1, &mo, &m, NULL) != JF_OK) return 1;

    /* normal_eq passes: exact, AVX2 (if offered), the widest ISA */
    printf("normal_eq, %zu points, one thread, median of %d:\n", n, reps);
    jf_data_view dv = {x, n, y, NULL};
    double exact_acc[21], mag[21];
    for (int mode = 0; mode < 3; mode++) {
        jf_jit_options jo;
        memset(&jo, 0, sizeof jo);
        jo.vector_math = mode > 0;
        if (mode == 1) setenv("JITFIT_VECTOR_ISA", "avx2", 1);
        else unsetenv("JITFIT_VECTOR_ISA");
        jf_kernels *k = NULL;
        char *warn = NULL;
        if (jf_kernels_get(m, JF_BACKEND_C, &jo, &k, &warn) != JF_OK) return 1;
        int isa = jf_kernels_vector_isa(k);
        double got_ms = jf_kernels_compile_ms(k);
        jf_cache_result got = jf_kernels_cache_result(k);
        if (warn) printf("  (warning: %s)\n", warn);
        free(warn);
        if ((mode == 1 && isa != JF_VEC_AVX2) || (mode == 2 && isa != JF_VEC_AVX512)) {
            if (mode > 0) printf("  %-9s not available here\n", mode == 1 ? "AVX2" : "AVX-512F");
            jf_kernels_free(k);
            continue;
        }
        double acc[21], t[1000];
        jf_kernels_normal_eq(k, start, &dv, 0, n, JF_LOSS_LINEAR, 1.0, acc);
        for (int r = 0; r < reps; r++) {
            double t0 = now_ms();
            jf_kernels_normal_eq(k, start, &dv, 0, n, JF_LOSS_LINEAR, 1.0, acc);
            t[r] = now_ms() - t0;
        }
        double dev = 0;
        if (mode == 0) {
            memcpy(exact_acc, acc, sizeof acc);
            /* magnitudes from the exact kernels' rows */
            double *rr = malloc(n * sizeof *rr), *JJ = malloc(5 * n * sizeof *JJ);
            if (!rr || !JJ) return 1;
            jf_kernels_jacobian_row(k, start, &dv, 0, n, rr, JJ);
            memset(mag, 0, sizeof mag);
            for (size_t i = 0; i < n; i++) {
                size_t q = 0;
                for (int a = 0; a < 5; a++)
                    for (int b = a; b < 5; b++) mag[q++] += fabs(JJ[i * 5 + a] * JJ[i * 5 + b]);
                for (int a = 0; a < 5; a++) mag[q++] += fabs(JJ[i * 5 + a] * rr[i]);
                mag[q] += rr[i] * rr[i];
            }
            free(rr);
            free(JJ);
        } else {
            for (int q = 0; q < 21; q++) dev = fmax(dev, fabs(acc[q] - exact_acc[q]) / mag[q]);
        }
        double med = median(t, reps);
        printf("  %-9s %8.2f ms  %6.2f ns/point", isa_name(isa), med, med * 1e6 / (double)n);
        if (mode) printf("  max |sum - exact| / sum|terms| = %.1e", dev);
        for (int r = 0; r < reps; r++) {
            double t0 = now_ms();
            jf_kernels_normal_eq(k, start, &dv, 0, n, JF_LOSS_SOFT_L1, 1.0, acc);
            t[r] = now_ms() - t0;
        }
        printf("\n            soft_l1 loss %.2f ms; kernels obtained in %.1f ms (%s)\n",
               median(t, reps), got_ms,
               got == JF_CACHE_MISS ? "compiled" : got == JF_CACHE_DISK ? "disk cache" : "memory");
        jf_kernels_free(k);
    }
    unsetenv("JITFIT_VECTOR_ISA");

    /* whole fits */
    printf("jf_fit, %zu points, all cores, median of %d:\n", n, reps < 5 ? reps : 5);
    jf_data d = {n, x, n, y, NULL};
    double pexact[5] = {0};
    for (int mode = 0; mode < 2; mode++) {
        jf_fit_options o = jf_fit_options_default();
        o.p0 = start;
        o.vector_math = mode;
        double t[5];
        int nr = reps < 5 ? reps : 5;
        jf_fit_result *res = NULL;
        if (jf_fit(m, &d, &o, &res, NULL) != JF_OK) return 1; /* warm: kernels */
        jf_fit_result_free(res);
        for (int r = 0; r < nr; r++) {
            if (jf_fit(m, &d, &o, &res, NULL) != JF_OK) return 1;
            t[r] = res->time_total_ms;
            if (r + 1 < nr) jf_fit_result_free(res);
        }
        double dp = 0;
        for (int k = 0; k < 5; k++) {
            if (mode == 0) pexact[k] = res->params[k];
            else dp = fmax(dp, fabs(res->params[k] - pexact[k]) / fabs(pexact[k]));
        }
        printf("  %-6s %8.1f ms  nfev %zu  status %s", mode ? "vector" : "exact", median(t, nr),
               res->nfev, jf_fit_status_string(res->status));
        if (mode) printf("  max rel. param. diff vs exact %.1e", dp);
        printf("\n         params");
        for (int k = 0; k < 5; k++) printf(" %.17g", res->params[k]);
        if (res->warning) printf("  (warning: %s)", res->warning);
        printf("\n");
        jf_fit_result_free(res);
    }
    jf_model_free(m);
    free(x);
    free(y);
    return 0;
}
