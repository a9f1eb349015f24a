/* bench_host_passes: what a fit's host-side scans of its data cost, on a model whose passes are
 * cheap (docs/PERFORMANCE.md, "Checks and statistics of long data").
 *
 * A straight line `a + b*x` (three passes over the data to converge) at each N in --sizes,
 * without and with sigma, on --threads threads (0: all): the median of --reps fits after one
 * untimed fit that obtains the C kernel. Besides the fit's passes, jf_fit scans the data: x
 * and y for non-finite values, sigma into weights, and y three times for R²'s total sum of
 * squares. Those scans ran on one thread before 2026-11-28 (8–15 ms per 10⁷ values each on
 * the 2-core machine of docs/PERFORMANCE.md), as long as the fit's own passes there, and as
 * long as a GPU fit's loop; now they run on the fit's threads. Build it against two versions
 * of the library to compare them. Not a test: it asserts nothing.
 *
 * usage: bench_host_passes [--sizes 1e6,1e7] [--reps 5] [--threads 0]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/jitfit.h"
#include "bench_util.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    double sizes[16] = {1e6, 1e7};
    int nsizes = 2, reps = 5, threads = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--sizes")) {
            nsizes = parse_list(argv[i + 1], sizes, 16);
        } else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (reps < 1 || reps > 64) reps = 5;
    jf_model *m = NULL;
    if (jf_model_compile("a + b*x", (size_t)-1, NULL, &m, NULL) != JF_OK) return 1;
    printf("%12s %8s %12s %6s\n", "N", "sigma", "fit ms", "nfev");
    for (int s = 0; s < nsizes; s++) {
        size_t n = (size_t)sizes[s];
        double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *sg = malloc(n * sizeof *sg);
        if (!x || !y || !sg) {
            printf("%12.3g out of memory\n", (double)n);
            free(x);
            free(y);
            free(sg);
            continue;
        }
        rng_state = 42;
        for (size_t i = 0; i < n; i++) {
            x[i] = (double)i / (double)n;
            sg[i] = 0.05 * (1.0 + 0.1 * uniform());
            y[i] = 1.0 + 2.0 * x[i] + sg[i] * normal();
        }
        for (int weighted = 0; weighted < 2; weighted++) {
            jf_data d = {n, x, 0, y, weighted ? sg : NULL};
            jf_fit_options o = jf_fit_options_default();
            static const double p0[2] = {0.5, 0.5};
            o.p0 = p0;
            o.device = JF_DEVICE_CPU;
            o.nthreads = threads;
            double t[64];
            size_t nfev = 0;
            int ok = 1;
            for (int r = -1; r < reps && ok; r++) {
                jf_fit_result *res = NULL;
                double t0 = now_ms();
                ok = jf_fit(m, &d, &o, &res, NULL) == JF_OK;
                if (r >= 0) t[r] = now_ms() - t0;
                if (ok) nfev = res->nfev;
                jf_fit_result_free(res);
            }
            if (!ok) {
                printf("%12.3g %8s fit failed\n", (double)n, weighted ? "yes" : "no");
                continue;
            }
            qsort(t, (size_t)reps, sizeof *t, cmp_double);
            printf("%12.3g %8s %12.2f %6zu\n", (double)n, weighted ? "yes" : "no", t[reps / 2],
                   nfev);
            fflush(stdout);
        }
        free(x);
        free(y);
        free(sg);
    }
    jf_model_free(m);
    return 0;
}
