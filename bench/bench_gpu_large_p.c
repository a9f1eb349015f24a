/* bench_gpu_large_p: where the GPU's many-parameter path (J in chunks, cuBLAS syrk/gemv) starts
 * to beat the model's own normal_eq kernel, to choose JF_GPU_LARGE_P (docs/PERFORMANCE.md,
 * "GPU solver"), and whether its p×p factorizations should go to cuSOLVER. For sums of K
 * Gaussian peaks (3K parameters) on --points points, one fit per path, forced with
 * $JITFIT_GPU_LARGE_P and $JITFIT_GPU_FACTOR_ROUNDS: the cuBLAS path with cuSOLVER (-1, the
 * default rounds), the cuBLAS path factorizing in the state machine's thread (rounds 0), and
 * the register/tiled kernel (a huge threshold), warm (the second of two fits), with the time
 * per pass (solve ÷ nfev), and
 * the CPU fit for reference (warm too, up to --cpu-max points). Without a GPU only the CPU column is
 * filled. Not a test: it asserts nothing.
 *
 * usage: bench_gpu_large_p [--points N] [--peaks 2,4,6,8,12,20,40] [--cpu-max N]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/jitfit.h"
#include "bench_util.h"

/* One fit's time (ms) and passes; NAN when it failed or did not run on the wanted device. */
static double fit_ms(const jf_model *m, const jf_data *d, const double *p0, jf_device dev,
                     size_t *nfev, double *solve_ms) {
    jf_fit_options o = jf_fit_options_default();
    o.p0 = p0;
    o.device = dev;
    jf_fit_result *r = NULL;
    double t0 = now_ms();
    int st = jf_fit(m, d, &o, &r, NULL);
    double t = now_ms() - t0;
    if (st != JF_OK || (dev == JF_DEVICE_GPU && r->backend != JF_BACKEND_CUDA)) t = NAN;
    if (r) {
        *nfev = r->nfev;
        *solve_ms = r->time_solve_ms;
    }
    jf_fit_result_free(r);
    return t;
}

int main(int argc, char **argv) {
    double points = 1e6, cpu_max = 1e6;
    int peaks[16] = {2, 4, 6, 8, 12, 20, 40}, npeaks = 7;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--points")) points = strtod(argv[i + 1], NULL);
        else if (!strcmp(argv[i], "--cpu-max")) cpu_max = strtod(argv[i + 1], NULL);
        else if (!strcmp(argv[i], "--peaks")) {
            npeaks = 0;
            for (char *t = strtok(argv[i + 1], ","); t && npeaks < 16; t = strtok(NULL, ","))
                peaks[npeaks++] = atoi(t);
        } else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    size_t n = (size_t)points;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    if (!x || !y) return 1;
    printf("%6s %6s %10s %12s %12s %12s %12s %12s %12s %10s\n", "peaks", "params", "points",
           "cusolver ms", "cusolver/pass", "kchol ms", "kchol/pass", "kernel ms", "kernel/pass",
           "cpu ms");
    for (int c = 0; c < npeaks; c++) {
        int K = peaks[c];
        static char text[16384];
        size_t used = 0;
        for (int k = 0; k < K && used < sizeof text; k++)
            used += (size_t)snprintf(text + used, sizeof text - used,
                                     "%sA%d*exp(-(x-m%d)^2/(2*s%d^2))", k ? "+" : "", k, k, k);
        jf_model *m = NULL;
        if (jf_model_compile(text, (size_t)-1, NULL, &m, NULL) != JF_OK) return 1;
        double *truth = malloc(3 * (size_t)K * sizeof *truth), *p0 = malloc(3 * (size_t)K * sizeof *p0);
        for (int k = 0; k < K; k++) {
            char name[16];
            double a = 1 + k % 3, mu = 100.0 * (k + 0.5) / K, sd = 100.0 / K / 6.0;
            snprintf(name, sizeof name, "A%d", k);
            size_t ia = (size_t)jf_model_param_index(m, name);
            snprintf(name, sizeof name, "m%d", k);
            size_t im = (size_t)jf_model_param_index(m, name);
            snprintf(name, sizeof name, "s%d", k);
            size_t is = (size_t)jf_model_param_index(m, name);
            truth[ia] = a, truth[im] = mu, truth[is] = sd;
            p0[ia] = a * 1.05, p0[im] = mu + 0.1 * sd, p0[is] = sd * 1.05;
        }
        rng_state = 11;
        for (size_t i = 0; i < n; i++) {
            x[i] = 100.0 * (double)i / (double)n;
            double f = 0;
            for (int k = 0; k < K; k++) {
                double a = 1 + k % 3, mu = 100.0 * (k + 0.5) / K, sd = 100.0 / K / 6.0, t = x[i] - mu;
                f += a * exp(-t * t / (2 * sd * sd));
            }
            y[i] = f + 0.01 * normal();
        }
        jf_data d = {n, x, 0, y, NULL};
        double ms[3] = {NAN, NAN, NAN}, per[3] = {NAN, NAN, NAN};
        for (int path = 0; path < 3; path++) {
            setenv("JITFIT_GPU_LARGE_P", path < 2 ? "-1" : "1000000", 1);
            if (path == 1) setenv("JITFIT_GPU_FACTOR_ROUNDS", "0", 1);
            else unsetenv("JITFIT_GPU_FACTOR_ROUNDS");
            size_t nfev = 0;
            double solve = NAN;
            if (isnan(fit_ms(m, &d, p0, JF_DEVICE_GPU, &nfev, &solve))) continue; /* cold */
            ms[path] = fit_ms(m, &d, p0, JF_DEVICE_GPU, &nfev, &solve);
            per[path] = nfev ? solve / (double)nfev : NAN;
        }
        unsetenv("JITFIT_GPU_LARGE_P");
        unsetenv("JITFIT_GPU_FACTOR_ROUNDS");
        size_t nfev = 0;
        double solve = NAN;
        double cpu = NAN;
        if ((double)n <= cpu_max && !isnan(fit_ms(m, &d, p0, JF_DEVICE_CPU, &nfev, &solve)))
            cpu = fit_ms(m, &d, p0, JF_DEVICE_CPU, &nfev, &solve); /* warm */
        printf("%6d %6d %10.0e %12.2f %12.4f %12.2f %12.4f %12.2f %12.4f %10.2f\n", K, 3 * K,
               (double)n, ms[0], per[0], ms[1], per[1], ms[2], per[2], cpu);
        fflush(stdout);
        free(truth);
        free(p0);
        jf_model_free(m);
    }
    free(x);
    free(y);
    return 0;
}
