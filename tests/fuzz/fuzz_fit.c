/* libFuzzer harness for the solver on models of any kind: the input's first byte picks the
 * options, the rest is model text; a model that compiles is fitted (reference interpreter, one
 * thread, a small evaluation budget) to small fixed data sets, alone and as a batch.
 *
 * The contract checked on every input (a violation aborts, so the fuzzer records it):
 * - jf_fit returns a result or an error with a message, never both, never neither;
 * - a result is consistent: its status is a jf_fit_status, success says whether it converged,
 *   its sizes are the data's; unless the start was not finite, its parameters are finite and
 *   within their bounds, and its cost is finite, non-negative and the one the model gives
 *   there (so a result is never silently wrong about itself);
 * - a batch of the same fits returns, fit by fit, the single fits' outcome and numbers (bit
 *   for bit: the same code runs them), into result objects and into columns.
 * $JITFIT_FUZZ_FIT_BACKEND=c fits with the generated C kernels instead, =gpu on the GPU (or
 * the CUDA emulator), where single fits and the batch run different kernels (not compared)
 * and the columns' statistics come from the device (χ², R² to 1e-13 — its own order of the
 * final residual sums for fits it does not polish —, standard errors to 1e-6 where the fit
 * determines them — its own eigendecomposition of JᵀJ, whose rounding the matrix's condition
 * amplifies: 1e-5 seen on a degree-11 polynomial, 6e-3 on a rank-deficient model): a compile
 * per model, for replaying a corpus with -runs=0, too slow to fuzz with.
 * Beyond that the sanitizers check for crashes, leaks and undefined behaviour (a float
 * converted to an integer out of range, say). tests/test_fuzz_corpora.c compiles this same
 * file into the ordinary test suite and replays tests/fuzz/corpus_fit through it.
 *
 * Build (separate configure, see fuzz_parser.c):
 *   CC=clang cmake -S . -B build-fuzz -DJITFIT_FUZZ=ON -DBUILD_TESTING=OFF
 *   cmake --build build-fuzz --target fuzz_fit
 *   build-fuzz/tests/fuzz/fuzz_fit -max_len=1024 -timeout=20 -dict=tests/fuzz/jitfit.dict \
 *       build-fuzz/corpus_fit tests/fuzz/corpus_fit
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jitfit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken contract: which check, then abort (the fuzzer keeps the input). */
#define FUZZ_FIT_FAIL() (fprintf(stderr, "fuzz_fit.c:%d: contract broken\n", __LINE__), abort())

/* Points of the data sets (the batch's three fits take the first 12, 9 and 16). */
#define FUZZ_FIT_N 16
/* Most variables a fuzzed model may have (the data have that many columns). */
#define FUZZ_FIT_NV 3

/* Inputs fitted so far (the corpus replay checks that its models are). */
static size_t fuzz_fit_fitted;

/* The data: three columns of x, y from a smooth function (or with outliers, huge and tiny
 * values when hostile), sigma. */
static void fuzz_fit_data(int hostile, double *x, double *y, double *sigma) {
    for (int i = 0; i < FUZZ_FIT_N; i++) {
        double t = 0.37 * i - 2.0;
        x[i] = t;
        x[FUZZ_FIT_N + i] = sin(1.3 * i);
        x[2 * FUZZ_FIT_N + i] = (double)(i % 3);
        y[i] = 1.5 * exp(-0.3 * t) + 0.1 * x[FUZZ_FIT_N + i] + 0.01 * cos(7.1 * i);
        sigma[i] = 0.05 + 0.01 * (i % 4);
    }
    if (hostile) {
        y[3] = 1e300;
        y[5] = -1e-300;
        y[7] = 0.0;
        x[9] = 1e200;
        x[FUZZ_FIT_N + 2] = -1e-310;
        sigma[4] = 1e-300;
    }
}

/* The cost at p as scipy defines it: 0.5 sum of rho(((f - y)/sigma)^2) (f_scale 1), the
 * model evaluated point by point by jf_model_eval; NaN when it cannot be evaluated. *scale
 * receives sum |r| (|f| + |y|) / sigma, what a last-bit difference in f can change it by (in
 * units of eps), for kernels that round f differently (the GPU's). */
static double fuzz_fit_cost(const jf_model *m, jf_loss loss, const double *p, size_t n,
                            const double *x, const double *y, const double *sigma,
                            double *scale) {
    size_t nv = jf_model_num_vars(m);
    double sum = 0.0;
    *scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        double vars[FUZZ_FIT_NV], f;
        for (size_t j = 0; j < nv; j++) vars[j] = x[j * FUZZ_FIT_N + i];
        if (jf_model_eval(m, p, vars, &f, NULL) != JF_OK) return NAN;
        double r = (f - y[i]) / (sigma ? sigma[i] : 1.0), z = r * r;
        *scale += fabs(r) * (fabs(f) + fabs(y[i])) / (sigma ? sigma[i] : 1.0);
        sum += loss == JF_LOSS_SOFT_L1 ? 2.0 * (sqrt(1.0 + z) - 1.0)
               : loss == JF_LOSS_HUBER ? (z <= 1.0 ? z : 2.0 * sqrt(z) - 1.0)
               : loss == JF_LOSS_CAUCHY ? log1p(z)
                                        : z;
    }
    return 0.5 * sum;
}

/* Aborts unless r or (code, msg) describe the outcome of fit d coherently. */
static void fuzz_fit_check(const jf_model *m, const jf_fit_options *o, const jf_data *d, int code,
                           const jf_fit_result *r, const char *msg) {
    if ((code == JF_OK) != (r != NULL)) FUZZ_FIT_FAIL();
    if (code != JF_OK) {
        if (!msg || !*msg) FUZZ_FIT_FAIL();
        return;
    }
    size_t np = jf_model_num_params(m);
    if (r->status < JF_FIT_FTOL || r->status > JF_FIT_UNUSED_PARAM) FUZZ_FIT_FAIL();
    if (r->success != (r->status >= JF_FIT_FTOL && r->status <= JF_FIT_GTOL)) FUZZ_FIT_FAIL();
    if (r->num_params != np || r->n != d->n || r->dof != d->n - np || !r->message) FUZZ_FIT_FAIL();
    if (r->status == JF_FIT_NONFINITE) return;
    if (!(r->cost >= 0) || !isfinite(r->cost)) FUZZ_FIT_FAIL();
    for (size_t k = 0; k < np; k++) {
        double lo, hi;
        if (jf_model_param_bounds(m, k, &lo, &hi) != JF_OK) FUZZ_FIT_FAIL();
        if (!isfinite(r->params[k]) || r->params[k] < lo || r->params[k] > hi) FUZZ_FIT_FAIL();
    }
    /* the cost reported is the cost at the parameters reported (a sum of non-negative terms:
     * only the order of the additions may differ, and on a GPU the model's last bits) */
    double scale, c = fuzz_fit_cost(m, o->loss, r->params, d->n, d->x, d->y, d->sigma, &scale);
    double tol = 1e-10 * c + 1e-300 + (o->device == JF_DEVICE_GPU ? 1e-13 * scale : 0.0);
    if (!(fabs(c - r->cost) <= tol)) FUZZ_FIT_FAIL();
}

/* 1 when the two results are the same numbers (NaNs equal). */
static int fuzz_fit_same(double a, double b) {
    return a == b || (isnan(a) && isnan(b));
}

/* 1 when a and b agree to rel (relative), or are the same non-finite number. */
static int fuzz_fit_near(double a, double b, double rel) {
    return fuzz_fit_same(a, b) || fabs(a - b) <= rel * fmax(fabs(a), fabs(b));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    unsigned sel = data[0];
    jf_model_options mo = jf_model_options_default();
    mo.max_nodes = 1u << 12; /* each evaluation walks the model: keep inputs cheap */
    jf_model *m = NULL;
    if (jf_model_compile((const char *)data + 1, size - 1, &mo, &m, NULL) != JF_OK) return 0;
    if (jf_model_num_vars(m) > FUZZ_FIT_NV) {
        jf_model_free(m);
        return 0;
    }
    static const jf_loss losses[] = {JF_LOSS_LINEAR, JF_LOSS_SOFT_L1, JF_LOSS_HUBER,
                                     JF_LOSS_CAUCHY};
    double x[FUZZ_FIT_NV * FUZZ_FIT_N], y[FUZZ_FIT_N], sigma[FUZZ_FIT_N];
    fuzz_fit_data((sel >> 3) & 1, x, y, sigma);
    jf_fit_options o = jf_fit_options_default();
    const char *be = getenv("JITFIT_FUZZ_FIT_BACKEND");
    int gpu = be && strcmp(be, "gpu") == 0;
    o.backend = be && strcmp(be, "c") == 0 ? JF_BACKEND_C : JF_BACKEND_INTERP;
    o.device = gpu ? JF_DEVICE_GPU : JF_DEVICE_CPU;
    o.nthreads = 1;
    o.no_cache = 1;
    o.loss = losses[sel & 3];
    o.absolute_sigma = (sel >> 4) & 1;
    o.max_nfev = 40;
    const double *sg = (sel >> 2) & 1 ? sigma : NULL;
    /* the batch's fits: different lengths, the same columns */
    static const size_t lens[3] = {12, 9, FUZZ_FIT_N};
    jf_data d[3];
    for (int k = 0; k < 3; k++) d[k] = (jf_data){lens[k], x, FUZZ_FIT_N, y, sg};

    jf_fit_result *single[3];
    char *msg[3];
    int code[3];
    for (int k = 0; k < 3; k++) {
        msg[k] = NULL;
        code[k] = jf_fit(m, &d[k], &o, &single[k], &msg[k]);
        fuzz_fit_check(m, &o, &d[k], code[k], single[k], msg[k]);
    }
    jf_fit_result *batch[3];
    char *bmsg[3];
    int bcode = jf_fit_batch(m, 3, d, NULL, &o, batch, bmsg);
    enum { NPMAX = 64 };
    size_t np = jf_model_num_params(m);
    double cpar[3 * NPMAX], cse[3 * NPMAX], ccost[3], cchi2[3], cr2[3];
    int ccode[3], cstatus[3];
    size_t cnfev[3], citer[3];
    jf_batch_columns cols = {ccode, cstatus, cpar, cse, ccost, cchi2, cr2, cnfev, citer};
    int ccall = np <= NPMAX ? jf_fit_batch_columns(m, 3, d, NULL, &o, &cols) : bcode;
    if (ccall != bcode) FUZZ_FIT_FAIL();
    for (int k = 0; k < 3; k++) {
        fuzz_fit_check(m, &o, &d[k], batch[k] ? JF_OK : code[k], batch[k], bmsg[k]);
        if ((batch[k] != NULL) != (single[k] != NULL)) FUZZ_FIT_FAIL();
        if (bcode == JF_OK && code[k] != JF_OK) FUZZ_FIT_FAIL();
        if (single[k] && batch[k] && !gpu) {
            const jf_fit_result *a = single[k], *b = batch[k];
            if (a->status != b->status || a->nfev != b->nfev || a->iterations != b->iterations ||
                !fuzz_fit_same(a->cost, b->cost) || !fuzz_fit_same(a->r_squared, b->r_squared))
                FUZZ_FIT_FAIL();
            for (size_t j = 0; j < a->num_params; j++)
                if (!fuzz_fit_same(a->params[j], b->params[j]) ||
                    !fuzz_fit_same(a->std_errors[j], b->std_errors[j]))
                    FUZZ_FIT_FAIL();
        }
        if (np <= NPMAX) { /* the columns' row k is batch[k], or says why there is none */
            const jf_fit_result *b = batch[k];
            if ((ccode[k] == JF_OK) != (b != NULL)) FUZZ_FIT_FAIL();
            /* on the GPU, standard errors are compared where the fit determines them: all
             * finite, no two parameters correlated beyond 0.99 (else its eigensolver's rounding,
             * amplified by JᵀJ's condition, may move them by any amount) */
            int determined = b != NULL;
            for (size_t i = 0; b && i < np; i++) {
                determined &= isfinite(b->std_errors[i]);
                for (size_t j = 0; j < np; j++)
                    determined &= i == j || fabs(b->correlation[i * np + j]) < 0.99;
            }
            double rs = gpu ? 1e-13 : 0.0, re = !gpu ? 0.0 : determined ? 1e-6 : INFINITY;
            if (b && (cstatus[k] != b->status || cnfev[k] != b->nfev || citer[k] != b->iterations ||
                      !fuzz_fit_same(ccost[k], b->cost) || !fuzz_fit_near(cchi2[k], b->chi2, rs) ||
                      !fuzz_fit_near(1.0 - cr2[k], 1.0 - b->r_squared, rs)))
                FUZZ_FIT_FAIL();
            for (size_t j = 0; b && j < np; j++)
                if (!fuzz_fit_same(cpar[k * np + j], b->params[j]) ||
                    !fuzz_fit_near(cse[k * np + j], b->std_errors[j], re))
                    FUZZ_FIT_FAIL();
            if (!b && (cstatus[k] != 0 || !isnan(ccost[k]))) FUZZ_FIT_FAIL();
        }
        jf_fit_result_free(single[k]);
        jf_fit_result_free(batch[k]);
        jf_free(msg[k]);
        jf_free(bmsg[k]);
    }
    fuzz_fit_fitted++;
    jf_model_free(m);
    return 0;
}
