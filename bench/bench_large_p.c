/* bench_large_p: where the unrolled normal_eq stops paying, to choose JF_LARGE_P.
 *
 * For sums of Gaussian peaks A_k*exp(-(x-m_k)^2/(2*s_k^2)) with a polynomial baseline making up
 * the count (p = 3·peaks + p mod 3), p = 8 .. 60, on N points of x in [0, 100) (--poly: a
 * polynomial of p coefficients on [0, 1)):
 *   - the cold compile (no disk cache) of the generated C with the unrolled normal_eq
 *     (jf_jit_options.large_p huge) and without it (large_p negative: residual and jacobian_row
 *     only, the normal equations from jacobian_row blocks with dsyrk/dgemv);
 *   - one normal_eq pass over the N points on one thread (linear loss, y given, no weights) for
 *     both, and the largest deviation between their sums (relative to sqrt(A_aa·A_bb) for JᵀJ,
 *     to ‖J_a‖·‖r‖ for Jᵀr, so that cancellation does not inflate it).
 * Times are medians. Not a test: it asserts nothing; docs/PERFORMANCE.md ("Many parameters
 * (CPU)") records its output.
 *
 * usage: bench_large_p [--points N] [--reps R] [--vector-math] [--max-p P] [--poly]
 */
#include <limits.h>
#include <math.h>
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

/* The model text for p parameters: peaks and a baseline, or with poly a polynomial
 * c0 + c1*x + c2*x^2 + ... on x in [0, 1) (no transcendental: the accumulation alone). */
static int model_text(size_t np, int poly, char *buf, size_t len) {
    size_t peaks = poly ? 0 : np / 3, base = poly ? np : np % 3, used = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < peaks; k++)
        used += (size_t)snprintf(buf + used, len - used, "%sA%zu*exp(-(x-m%zu)^2/(2*s%zu^2))",
                                 k ? "+" : "", k, k, k);
    for (size_t c = 0; c < base && used < len; c++) {
        used += (size_t)snprintf(buf + used, len - used, "%sc%zu", used ? "+" : "", c);
        if (c == 1) used += (size_t)snprintf(buf + used, len - used, "*x");
        if (c > 1) used += (size_t)snprintf(buf + used, len - used, "*x^%zu", c);
    }
    return used < len;
}

static double param_value(const char *name, size_t peaks) {
    double k = atof(name + 1);
    switch (name[0]) {
    case 'A': return 1.0 + fmod(k, 3.0);
    case 'm': return 100.0 * (k + 0.5) / (double)peaks;
    case 's': return 100.0 / (double)peaks / 6.0;
    default: return 0.1;
    }
}

/* Median time of one pass, in ms. */
static double time_pass(const jf_kernels *k, const double *p, const jf_data_view *dv, size_t n,
                        int reps, double *acc) {
    double t[64];
    jf_kernels_normal_eq(k, p, dv, 0, n, JF_LOSS_LINEAR, 1.0, acc);
    for (int r = 0; r < reps; r++) {
        double t0 = now_ms();
        jf_kernels_normal_eq(k, p, dv, 0, n, JF_LOSS_LINEAR, 1.0, acc);
        t[r] = now_ms() - t0;
    }
    return median(t, reps);
}

int main(int argc, char **argv) {
    size_t n = 20000, maxp = 60;
    int reps = 9, vec = 0, poly = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--points") == 0 && i + 1 < argc) n = (size_t)atof(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--max-p") == 0 && i + 1 < argc) maxp = (size_t)atoi(argv[++i]);
        else if (strcmp(argv[i], "--vector-math") == 0) vec = 1;
        else if (strcmp(argv[i], "--poly") == 0) poly = 1;
        else {
            fprintf(stderr, "usage: bench_large_p [--points N] [--reps R] [--vector-math] "
                            "[--max-p P] [--poly]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 64) reps = 9;
    if (n < 1) n = 1;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    if (!x || !y) return 1;
    for (size_t i = 0; i < n; i++) x[i] = (poly ? 1.0 : 100.0) * (double)i / (double)n;
    static const size_t sizes[] = {8, 12, 16, 24, 32, 48, 60};
    printf("normal_eq, %s, %zu points, one thread, linear loss, %s kernels, median of %d\n",
           poly ? "polynomial" : "Gaussian peaks", n, vec ? "vector-math" : "exact", reps);
    printf("%4s %12s %12s %13s %13s %9s %10s\n", "p", "unrolled cc", "chunked cc", "unrolled pass",
           "chunked pass", "ratio", "max dev");
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t np = sizes[si];
        if (np > maxp) break;
        char text[8192];
        if (!model_text(np, poly, text, sizeof text)) return 1;
        jf_model_options mo = jf_model_options_default();
        jf_model *m = NULL;
        if (jf_model_compile(text, (size_t)-1, &mo, &m, NULL) != JF_OK || m->np != np) {
            fprintf(stderr, "model for p = %zu did not compile\n", np);
            return 1;
        }
        double p[64];
        for (size_t k = 0; k < np; k++) p[k] = param_value(m->param_names[k], np / 3);
        for (size_t i = 0; i < n; i++) y[i] = 0.0;
        jf_data_view dv = {x, n, y, NULL};
        size_t nacc = jf_emit_num_acc(np);
        double *acc[2] = {malloc(nacc * sizeof(double)), malloc(nacc * sizeof(double))};
        if (!acc[0] || !acc[1]) return 1;
        double cc[2], pass[2];
        for (int mode = 0; mode < 2; mode++) {
            jf_jit_options jo;
            memset(&jo, 0, sizeof jo);
            jo.no_cache = 1;
            jo.vector_math = vec;
            jo.large_p = mode == 0 ? INT_MAX : -1;
            jf_kernels *k = NULL;
            char *warn = NULL;
            if (jf_kernels_get(m, JF_BACKEND_C, &jo, &k, &warn) != JF_OK ||
                jf_kernels_backend(k) != JF_BACKEND_C) {
                fprintf(stderr, "no compiled kernels: %s\n", warn ? warn : "?");
                return 1;
            }
            free(warn);
            cc[mode] = jf_kernels_compile_ms(k);
            pass[mode] = time_pass(k, p, &dv, n, reps, acc[mode]);
            jf_kernels_free(k);
        }
        /* deviation, normwise per entry */
        size_t tri = np * (np + 1) / 2, q = 0;
        double dev = 0.0, rn = sqrt(acc[0][tri + np]);
        double diag[64];
        for (size_t a = 0; a < np; a++) diag[a] = acc[0][a * np - a * (a - 1) / 2];
        for (size_t a = 0; a < np; a++)
            for (size_t b = a; b < np; b++, q++) {
                double s = sqrt(diag[a] * diag[b]);
                double d = fabs(acc[0][q] - acc[1][q]) / (s > 0 ? s : 1.0);
                if (d > dev) dev = d;
            }
        for (size_t a = 0; a < np; a++) {
            double s = sqrt(diag[a]) * rn, d = fabs(acc[0][tri + a] - acc[1][tri + a]);
            if (d / (s > 0 ? s : 1.0) > dev) dev = d / (s > 0 ? s : 1.0);
        }
        printf("%4zu %9.0f ms %9.0f ms %10.3f ms %10.3f ms %9.2f %10.1e\n", np, cc[0], cc[1],
               pass[0], pass[1], pass[1] / pass[0], dev);
        fflush(stdout);
        free(acc[0]);
        free(acc[1]);
        jf_model_free(m);
    }
    free(x);
    free(y);
    return 0;
}
