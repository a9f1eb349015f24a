/* Embedding jitfit: compile a model once, then fit many data sets with it and read the results.
 * Uses only the public header; builds against an installed jitfit with
 *
 *   cc embed.c $(pkg-config --cflags --libs jitfit) -lm -o embed
 *
 * or with CMake's find_package(jitfit) (see examples/embed/CMakeLists.txt). It fits an
 * exponential decay y = a*exp(-k*x) + c to eight synthetic decays, first one by one with jf_fit
 * (the compiled kernels are reused from the in-memory cache after the first fit), then all at
 * once with jf_fit_batch, and exits 0 when every fit recovered its true decay rate.
 */
#include <jitfit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NSETS 8  /* data sets to fit */
#define NPTS 50  /* points per data set */

int main(void) {
    /* The shared library must be the version this program was compiled for: the option and
     * data structs it allocates may differ in size between versions (docs/API.md). */
    if (strcmp(jf_version(), JITFIT_VERSION) != 0) {
        fprintf(stderr, "compiled for jitfit %s but running with %s\n", JITFIT_VERSION,
                jf_version());
        return 1;
    }
    jf_model *m = NULL;
    jf_diagnostics *diags = NULL;
    /* Compile once: parse, differentiate, and (at the first fit) generate and compile kernels. */
    int st = jf_model_compile("param a = 1\nparam k = 0.5 in [0, inf]\nparam c = 0\n"
                              "y ~ a*exp(-k*x) + c",
                              (size_t)-1, NULL, &m, &diags);
    if (st != JF_OK) {
        fprintf(stderr, "%s", diags ? jf_diagnostics_text(diags) : jf_status_string(st));
        jf_diagnostics_free(diags);
        return 1;
    }
    jf_diagnostics_free(diags);

    static double x[NSETS][NPTS], y[NSETS][NPTS];
    double true_k[NSETS];
    jf_data data[NSETS];
    unsigned seed = 12345;
    for (int s = 0; s < NSETS; s++) {
        true_k[s] = 0.2 + 0.1 * s;
        for (int i = 0; i < NPTS; i++) {
            seed = seed * 1103515245u + 12345u; /* small deterministic noise */
            double noise = ((double)(seed >> 16 & 0x7fff) / 32768.0 - 0.5) * 0.01;
            x[s][i] = 0.2 * i;
            y[s][i] = 3.0 * exp(-true_k[s] * x[s][i]) + 0.5 + noise;
        }
        data[s] = (jf_data){.n = NPTS, .x = x[s], .y = y[s]};
    }

    jf_fit_options opts = jf_fit_options_default();
    int bad = 0;
    for (int s = 0; s < NSETS; s++) {
        jf_fit_result *r = NULL;
        char *err = NULL;
        if (jf_fit(m, &data[s], &opts, &r, &err) != JF_OK) {
            fprintf(stderr, "fit %d: %s\n", s, err ? err : "failed");
            jf_free(err);
            bad = 1;
            continue;
        }
        long k = jf_model_param_index(m, "k");
        printf("set %d: k = %.5f +/- %.5f (true %.2f), %s, kernels: %s\n", s, r->params[k],
               r->std_errors[k], true_k[s], r->success ? "converged" : "NOT converged",
               r->cache == JF_CACHE_MEMORY ? "memory cache" : "compiled or loaded");
        if (!r->success || fabs(r->params[k] - true_k[s]) > 0.01) bad = 1;
        jf_fit_result_free(r);
    }

    /* The same fits as one batch: the library spreads them over threads. */
    jf_fit_result *res[NSETS];
    char *errs[NSETS];
    st = jf_fit_batch(m, NSETS, data, NULL, &opts, res, errs);
    for (int s = 0; s < NSETS; s++) {
        if (!res[s]) {
            fprintf(stderr, "batch fit %d: %s\n", s, errs[s] ? errs[s] : "failed");
            bad = 1;
        } else if (!res[s]->success || fabs(res[s]->params[1] - true_k[s]) > 0.01) {
            bad = 1;
        }
        jf_fit_result_free(res[s]);
        jf_free(errs[s]);
    }
    printf("batch: %s\n", st == JF_OK && !bad ? "all fits recovered k" : "FAILED");
    jf_model_free(m);
    return bad;
}
