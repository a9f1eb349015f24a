/* Passes over the data that a fit's diagnostics cost, counted by wrapping the linear-loss pass
 * (linked with -Wl,--wrap=jf_problem_normal_eq, tests/CMakeLists.txt): every call from the
 * solver and from fit.c's finish goes through __wrap_jf_problem_normal_eq. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/jitfit.h"
#include "solver/solver.h"
#include "tests/testlib.h"

void __real_jf_problem_normal_eq(jf_problem *prob, const double *p, jf_loss loss, double *acc);
void __wrap_jf_problem_normal_eq(jf_problem *prob, const double *p, jf_loss loss, double *acc);

/* The points of the passes (np ≤ MAXP, at most MAXPASS of them). */
enum { MAXP = 16, MAXPASS = 4096 };
static double at[MAXPASS][MAXP];
static size_t passes;

void __wrap_jf_problem_normal_eq(jf_problem *prob, const double *p, jf_loss loss, double *acc) {
    if (passes < MAXPASS && prob->np <= MAXP) memcpy(at[passes], p, prob->np * sizeof *p);
    passes++;
    __real_jf_problem_normal_eq(prob, p, loss, acc);
}

/* Passes at the solution x with one parameter moved (fit.c's symmetric-start check). */
static size_t moved_passes(const double *x, size_t np) {
    size_t count = 0;
    for (size_t i = 0; i < passes && i < MAXPASS; i++) {
        size_t differ = 0;
        for (size_t k = 0; k < np; k++) differ += at[i][k] != x[k];
        count += differ == 1;
    }
    return count;
}

/* A sum of m exponentials from the default start (every parameter 1) keeps the twins equal:
 * the message names the symmetric start, and telling the rates' pairs from the amplitudes'
 * (whose columns never part) takes one pass per parameter at most, not one per pair (m = 6:
 * 15 pairs of amplitudes and 5 of rates: 20 passes, at 10⁶ points as long as the fit). */
static void test_symmetric_start_passes(void) {
    enum { N = 400, M = 6 };
    static double x[N], y[N];
    for (int i = 0; i < N; i++) {
        x[i] = i * 0.01;
        y[i] = 3 * exp(-0.5 * x[i]) + 2 * exp(-3 * x[i]) + 0.001 * ((i * 37) % 7 - 3);
    }
    char text[400] = "";
    for (int k = 1; k <= M; k++) {
        size_t len = strlen(text);
        snprintf(text + len, sizeof text - len, "%sa%d*exp(-k%d*x)", k > 1 ? "+" : "", k, k);
    }
    jf_model *m = NULL;
    jf_diagnostics *d = NULL;
    CHECK(jf_model_compile(text, (size_t)-1, NULL, &m, &d) == JF_OK);
    jf_diagnostics_free(d);
    jf_data data = {N, x, 0, y, NULL};
    jf_fit_result *r = NULL;
    char *err = NULL;
    jf_fit_options o = jf_fit_options_default();
    o.nthreads = 1;
    passes = 0;
    if (m && CHECK(jf_fit(m, &data, &o, &r, &err) == JF_OK)) {
        CHECK_CONTAINS(r->message, "'k1' and 'k2', 'k1' and 'k3'");
        CHECK_CONTAINS(r->message, "started equal");
        size_t moved = moved_passes(r->params, 2 * M);
        if (!CHECK(moved <= M))
            fprintf(stderr, "  %zu passes with one parameter moved (%zu passes in all, %zu "
                            "evaluations)\n", moved, passes, r->nfev);
    }
    free(err);
    jf_fit_result_free(r);
    jf_model_free(m);
}

int main(void) {
    test_symmetric_start_passes();
    return jf_test_finish();
}
