/* Models with many parameters: normal_eq from jacobian_row blocks with BLAS (runtime/kernels.c).
 *
 * Above JF_LARGE_P the generated C has no normal_eq, and jf_kernels_normal_eq forms the sums
 * from blocks of jacobian_row rows with dsyrk/dgemv. For a sum of 20 Gaussian peaks
 * (60 parameters) this checks that:
 * - the default kernels are the chunked ones, their source has no jf_normal_eq, and the
 *   unrolled kernels can still be built (jf_jit_options.large_p) for comparison;
 * - the chunked sums equal the unrolled kernel's to 1e-12 (relative to sqrt(A_aa·A_bb) for an
 *   entry of JᵀJ, ‖J_a‖·‖r‖ for Jᵀr with the loss-scaled r, the value for the cost: bounds of
 *   the sums of the terms' magnitudes, so cancellation does not inflate it) for every loss, with and without weights, with compiled and
 *   interpreted rows, over ranges that are not whole blocks;
 * - a whole jf_fit recovers the peaks, gives bit-identical results on 1 and 2 threads, and
 *   agrees with the fit through the unrolled kernel to 1e-10.
 * The unrolled 60-parameter kernel is the one slow compile here (about 5 s, then cached).
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/emit.h"
#include "codegen/loss.h"
#include "include/jitfit.h"
#include "runtime/kernels.h"
#include "testlib.h"

#define PEAKS 20
#define NP (3 * PEAKS)
#define N 4000

static double xs[N], ys[N], ws[N];
static double truth[NP];

static jf_model *peaks_model(void) {
    static char text[4096];
    size_t used = 0;
    for (int k = 0; k < PEAKS; k++)
        used += (size_t)snprintf(text + used, sizeof text - used,
                                 "%sA%d*exp(-(x-m%d)^2/(2*s%d^2))", k ? "+" : "", k, k, k);
    jf_model_options mo = jf_model_options_default();
    jf_model *m = NULL;
    CHECK(jf_model_compile(text, (size_t)-1, &mo, &m, NULL) == JF_OK);
    return m;
}

/* Truth by parameter name, the data (deterministic noise), weights in [0.5, 1.5). */
static void make_data(const jf_model *m) {
    for (size_t k = 0; k < NP; k++) {
        const char *name = jf_model_param_name(m, k);
        double j = atof(name + 1);
        truth[k] = name[0] == 'A' ? 1.0 + fmod(j, 3.0)
                 : name[0] == 'm' ? 100.0 * (j + 0.5) / PEAKS
                                  : 100.0 / PEAKS / 6.0 * (1.0 + 0.1 * fmod(j, 2.0));
    }
    for (size_t i = 0; i < N; i++) {
        double x = 100.0 * (double)i / N, f = 0.0;
        for (size_t k = 0; k < NP; k++) {
            const char *name = jf_model_param_name(m, k);
            if (name[0] != 'A') continue;
            double mu = truth[jf_model_param_index(m, name) + 0], mm = 0, ss = 0;
            char buf[16];
            snprintf(buf, sizeof buf, "m%s", name + 1);
            mm = truth[jf_model_param_index(m, buf)];
            snprintf(buf, sizeof buf, "s%s", name + 1);
            ss = truth[jf_model_param_index(m, buf)];
            f += mu * exp(-(x - mm) * (x - mm) / (2 * ss * ss));
        }
        xs[i] = x;
        ys[i] = f + 0.01 * (sin(12.9898 * (double)i) + cos(78.233 * (double)i));
        ws[i] = 0.5 + fmod(0.618033988749895 * (double)i, 1.0);
    }
}

/* Largest deviation of acc from ref, each entry against its scale (see the top comment). */
static double sums_dev(const double *acc, const double *ref, double rn) {
    size_t tri = NP * (NP + 1) / 2, q = 0;
    double diag[NP], dev = 0.0;
    for (size_t a = 0; a < NP; a++) diag[a] = ref[a * NP - a * (a - 1) / 2];
    for (size_t a = 0; a < NP; a++)
        for (size_t b = a; b < NP; b++, q++) {
            double s = sqrt(diag[a] * diag[b]), d = fabs(acc[q] - ref[q]) / (s > 0 ? s : 1.0);
            if (!(d <= dev)) dev = d; /* NaN sticks */
        }
    for (size_t a = 0; a < NP; a++) {
        double s = sqrt(diag[a]) * rn, d = fabs(acc[tri + a] - ref[tri + a]) / (s > 0 ? s : 1.0);
        if (!(d <= dev)) dev = d;
    }
    double d = fabs(acc[tri + NP] - ref[tri + NP]) / fabs(ref[tri + NP]);
    return d > dev || d != d ? d : dev;
}

static jf_kernels *kernels(const jf_model *m, jf_backend b, int large_p) {
    jf_jit_options jo;
    memset(&jo, 0, sizeof jo);
    jo.large_p = large_p;
    jf_kernels *k = NULL;
    char *warn = NULL;
    CHECK(jf_kernels_get(m, b, &jo, &k, &warn) == JF_OK);
    free(warn);
    return k;
}

static void test_sums(const jf_model *m) {
    /* The emitted source: O(np) without normal_eq. */
    jf_emit_options eo = jf_emit_options_default(JF_EMIT_C);
    char *full = jf_emit(m, &eo);
    eo.no_normal_eq = 1;
    char *lean = jf_emit(m, &eo);
    CHECK(full && lean && strstr(full, "jf_normal_eq") && !strstr(lean, "jf_normal_eq"));
    if (full && lean) CHECK(strlen(lean) * 4 < strlen(full));
    /* the CUDA module of the GPU's many-parameter path: residual and jacobian_row only */
    jf_emit_options ec = jf_emit_options_default(JF_EMIT_CUDA);
    ec.no_normal_eq = 1;
    char *cu = jf_emit(m, &ec);
    CHECK(cu && strstr(cu, "jf_jacobian_row") && strstr(cu, "jf_residual") &&
          !strstr(cu, "jf_normal_eq") && !strstr(cu, "jf_reduce_blocks"));
    free(cu);
    free(full);
    free(lean);

    jf_kernels *kc = kernels(m, JF_BACKEND_C, 0);       /* default: chunked */
    jf_kernels *ku = kernels(m, JF_BACKEND_C, INT_MAX); /* the unrolled kernel */
    jf_kernels *ki = kernels(m, JF_BACKEND_INTERP, 0);  /* interpreted rows, chunked */
    if (!kc || !ku || !ki) goto out;
    CHECK(jf_kernels_chunked(kc) && !jf_kernels_chunked(ku) && jf_kernels_chunked(ki));
    CHECK(jf_kernels_backend(kc) == JF_BACKEND_C && jf_kernels_backend(ku) == JF_BACKEND_C);
    double p[NP];
    for (size_t k = 0; k < NP; k++) p[k] = truth[k] * (1.0 + 0.02 * sin((double)k));
    size_t nacc = jf_emit_num_acc(NP);
    double *ref = malloc(nacc * sizeof *ref), *acc = malloc(nacc * sizeof *acc);
    if (!ref || !acc) goto out2;
    /* a range that starts and ends inside blocks */
    const size_t begin = 37, end = N - 101;
    double *r = malloc(N * sizeof *r), *J = malloc(N * NP * sizeof *J);
    if (!r || !J) goto out3;
    for (int weighted = 0; weighted < 2; weighted++)
        for (int loss = 0; loss <= 4; loss++) {
            jf_data_view dv = {xs, N, ys, weighted ? ws : NULL};
            double fs = loss ? 0.02 : 1.0, rn = 0.0;
            /* ‖r‖ after the loss's scaling, the scale of Jᵀr's terms */
            jf_kernels_jacobian_row(ku, p, &dv, begin, end, r, J);
            for (size_t i = 0; i < end - begin; i++) {
                double rs = r[i], js;
                if (loss) jf_loss_scale(loss, r[i], fs * fs, 1.0 / (fs * fs), &rs, &js);
                rn += rs * rs;
            }
            rn = sqrt(rn);
            jf_kernels_normal_eq(ku, p, &dv, begin, end, (jf_loss)loss, fs, ref);
            jf_kernels_normal_eq(kc, p, &dv, begin, end, (jf_loss)loss, fs, acc);
            double dc = sums_dev(acc, ref, rn);
            jf_kernels_normal_eq(ki, p, &dv, begin, end, (jf_loss)loss, fs, acc);
            double di = sums_dev(acc, ref, rn);
            if (!CHECK(dc <= 1e-12 && di <= 1e-12))
                printf("  loss %d, weighted %d: compiled %.3g, interpreted %.3g\n", loss,
                       weighted, dc, di);
        }
out3:
    free(r);
    free(J);
out2:
    free(ref);
    free(acc);
out:
    jf_kernels_free(kc);
    jf_kernels_free(ku);
    jf_kernels_free(ki);
}

static jf_fit_result *fit(const jf_model *m, int threads) {
    double p0[NP];
    for (size_t k = 0; k < NP; k++) {
        const char *name = jf_model_param_name(m, k);
        p0[k] = truth[k] * (name[0] == 'm' ? 1.0 + 0.002 * cos((double)k)
                                           : 1.0 + 0.05 * sin((double)k));
    }
    jf_fit_options o = jf_fit_options_default();
    o.p0 = p0;
    o.nthreads = threads;
    o.ftol = o.xtol = o.gtol = 1e-15;
    jf_data d = {N, xs, 0, ys, NULL};
    jf_fit_result *r = NULL;
    char *err = NULL;
    if (!CHECK(jf_fit(m, &d, &o, &r, &err) == JF_OK)) printf("  %s\n", err ? err : "?");
    jf_free(err);
    return r;
}

static void test_fit(const jf_model *m) {
    jf_fit_result *r1 = fit(m, 1), *r2 = fit(m, 2), *ru = NULL;
    /* the unrolled path through the same public call */
    setenv("JITFIT_LARGE_P", "1000000", 1);
    ru = fit(m, 2);
    unsetenv("JITFIT_LARGE_P");
    if (!r1 || !r2 || !ru) goto out;
    CHECK(r1->success && r2->success && ru->success);
    CHECK(memcmp(r1->params, r2->params, NP * sizeof(double)) == 0);
    CHECK(r1->cost == r2->cost && r1->nfev == r2->nfev);
    double dev = 0.0, rec = 0.0;
    for (size_t k = 0; k < NP; k++) {
        double d = fabs(r2->params[k] - ru->params[k]) / fabs(ru->params[k]);
        double e = fabs(r2->params[k] - truth[k]) / r2->std_errors[k];
        if (!(d <= dev)) dev = d;
        if (!(e <= rec)) rec = e;
    }
    if (!CHECK(dev <= 1e-10)) printf("  chunked vs unrolled: %.3g\n", dev);
    /* within 5 standard errors of the truth for every parameter */
    if (!CHECK(rec < 5.0)) printf("  recovery: %.3g standard errors\n", rec);
    CHECK_NEAR(r2->cost, ru->cost, 1e-12);
out:
    jf_fit_result_free(r1);
    jf_fit_result_free(r2);
    jf_fit_result_free(ru);
}

int main(void) {
    jf_model *m = peaks_model();
    if (!m) return jf_test_finish();
    CHECK(jf_model_num_params(m) == NP);
    make_data(m);
    test_sums(m);
    test_fit(m);
    jf_model_free(m);
    return jf_test_finish();
}
