/* The GPU solver's state machine (solver/lm_core.h) driven on the host, against lm.c.
 *
 * The device-resident loop makes the same decisions as the CPU driver with its own p×p linear
 * algebra (Cholesky with an exact condition test, Jacobi eigen fallback). test_nist compares
 * the two on the NIST problems, where the final polish also runs; here the fits are large
 * enough that there is no polish (n·p > JF_LM_MATERIALIZE_MAX), so the loop's own answer is
 * compared: damped sine with every loss, with sigma, with bounds that become active, with
 * x_scale, a rank-deficient model (eigen fallback), a budget stop, and a non-finite start.
 * Without the polish a fit stops on the cost, which resolves the parameters only to about
 * √ε relative: two correct implementations whose p×p solves round differently (LAPACK's
 * recursive dpotrf2, standing in for cuSOLVER, vs the loop here) may stop 1e-8 apart. So the
 * checks are what the cost determines: costs equal to 1e-12, every identifiable parameter
 * within 1e-3 of its standard error (where the paths may stop apart, what the cost tolerance
 * allows: compare_rounds), both converged (or both stopped by the budget at the
 * same count), progress reports consistent with the result. Factorizing inline, the machine
 * and lm.c share their p×p code (JF_LINALG_SMALL), and must then agree bit for bit. The 1e-10 parameter agreement is checked where the polish runs (test_nist). Also the workspace layout and the p×p kernels
 * directly: jf_lmc_factor/solve/quad against a direct solve.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/jitfit.h"
#include "solver/lm_core.h"
#include "solver/solver.h"
#include "tests/testlib.h"

#define N 60000

static double xs[N], ys[N], sig[N];

static jf_model *compile(const char *text) {
    jf_model *m = NULL;
    jf_diagnostics *d = NULL;
    int st = jf_model_compile(text, (size_t)-1, NULL, &m, &d);
    if (st != JF_OK) fprintf(stderr, "compile failed: %s\n%s\n", text, jf_diagnostics_text(d));
    jf_diagnostics_free(d);
    CHECK(st == JF_OK && m != NULL);
    return m;
}

/* Costs seen by a progress callback, in order. */
typedef struct trace {
    double cost[512];
    size_t n;
} trace;

static void on_progress(void *ctx, const jf_iteration_info *info) {
    trace *t = ctx;
    if (t->n < 512) t->cost[t->n++] = info->cost;
}

/* Fits with lm.c and with the resident loop (rounds: jf_lm_resident_rounds) and compares. */
/* cost_tol: relative agreement of the final costs; 1e-12 where the cost is resolved, ftol where
 * only the stopping rule bounds it (a singular JᵀJ makes the last steps crawl). */
static void compare_rounds(const char *label, const jf_model *m, const jf_data *d,
                           jf_fit_options o, double cost_tol, int rounds) {
    jf_fit_result *a = NULL, *b = NULL;
    char *err = NULL;
    static trace ta, tb;
    memset(&ta, 0, sizeof ta);
    memset(&tb, 0, sizeof tb);
    o.progress = on_progress;
    o.progress_ctx = &ta;
    int sa = jf_fit(m, d, &o, &a, &err);
    if (sa != JF_OK) fprintf(stderr, "%s: %s\n", label, err ? err : "?");
    jf_free(err);
    err = NULL;
    o.progress_ctx = &tb;
    jf_fit_host_resident = 1;
    jf_lm_resident_rounds = rounds;
    int sb = jf_fit(m, d, &o, &b, &err);
    jf_fit_host_resident = 0;
    jf_lm_resident_rounds = 0;
    if (sb != JF_OK) fprintf(stderr, "%s (resident): %s\n", label, err ? err : "?");
    jf_free(err);
    CHECK(sa == JF_OK && sb == JF_OK);
    if (sa != JF_OK || sb != JF_OK) {
        jf_fit_result_free(a);
        jf_fit_result_free(b);
        return;
    }
    /* costs within cost_tol (relative) of each other put the parameters within
     * √(2 Δcost)/s = √(cost_tol·dof) standard errors (s² = 2 cost/dof): with cost_tol = 1e-12
     * under 1e-3, with ftol itself (paths that take different steps through a singular valley
     * and stop at different points the ftol test accepts) up to 0.025 here */
    double se_tol = fmax(1e-3, sqrt(cost_tol * (double)a->dof)), dev = 0, dse = 0;
    for (size_t k = 0; k < a->num_params; k++) {
        double e = fabs(a->params[k] - b->params[k]) / fmax(fabs(a->params[k]), 1e-2);
        if (e > dev) dev = e;
        if (isfinite(a->std_errors[k]) && a->std_errors[k] > 0) {
            double es = fabs(a->params[k] - b->params[k]) / a->std_errors[k];
            if (es > dse) dse = es;
            double rs = fabs(a->std_errors[k] - b->std_errors[k]) / a->std_errors[k];
            if (!CHECK(rs <= 0.1 * se_tol))
                fprintf(stderr, "  ^ %s: s.e. %zu %.2g\n", label, k, rs);
        }
    }
    printf("%-24s %s status %d/%d  nfev %2zu/%2zu  cost %.17g/%.17g  max rel. diff %.2g (%.2g "
           "s.e.)\n",
           label, rounds ? "ext" : "inl", a->status, b->status, a->nfev, b->nfev, a->cost, b->cost,
           dev, dse);
    if (!CHECK(dse <= se_tol)) fprintf(stderr, "  ^ %s\n", label);
    /* factorizing inline, the state machine and lm.c share the p×p code (p <= JF_LINALG_SMALL):
     * the same decisions, bit for bit */
    if (rounds == 0 && !CHECK(dev == 0 && a->nfev == b->nfev && a->cost == b->cost))
        fprintf(stderr, "  ^ %s: not identical to lm.c\n", label);
    if (!CHECK(fabs(a->cost - b->cost) <= cost_tol * fabs(a->cost))) fprintf(stderr, "  ^ %s\n", label);
    if (a->status == JF_FIT_MAX_NFEV) CHECK(b->status == JF_FIT_MAX_NFEV && a->nfev == b->nfev);
    else CHECK(a->success && b->success);
    for (size_t k = 0; k < a->num_params; k++) CHECK(a->at_bound[k] == b->at_bound[k]);
    /* the reports: iteration 0 first, one per judged step, ending at the result's cost */
    if (CHECK(tb.n == b->iterations + 1)) CHECK(tb.cost[tb.n - 1] == b->cost);
    jf_fit_result_free(a);
    jf_fit_result_free(b);
}

/* Fits with lm.c and with the resident loop, factorizing inline and then handing its
 * factorizations out (2 rounds per pass, LAPACK standing in for cuSOLVER), and compares. */
static void compare(const char *label, const jf_model *m, const jf_data *d, jf_fit_options o,
                    double cost_tol) {
    compare_rounds(label, m, d, o, cost_tol, 0);
    unsigned long h0 = jf_lm_resident_handed;
    compare_rounds(label, m, d, o, cost_tol, 2);
    CHECK(jf_lm_resident_handed > h0);
}

static void test_fits(void) {
    for (int i = 0; i < N; i++) {
        double x = 10.0 * i / (N - 1);
        xs[i] = x;
        ys[i] = 2.5 * exp(-0.3 * x) * sin(1.7 * x + 0.4) + 0.5 + 0.05 * sin(12.9898 * i) +
                (i % 97 == 0 ? 3.0 : 0.0); /* a few outliers for the robust losses */
        sig[i] = 0.05 + 0.02 * cos(0.37 * i) * cos(0.37 * i);
    }
    jf_model *m = compile("a*exp(-b*x)*sin(c*x+d)+e");
    if (!m) return;
    double p0[5] = {2, 0.25, 1.6, 0.3, 0.4};
    jf_data d = {N, xs, 0, ys, NULL};
    jf_fit_options o = jf_fit_options_default();
    o.p0 = p0;
    compare("linear", m, &d, o, 1e-12);
    static const char *const losses[] = {"soft_l1", "huber", "cauchy", "arctan"};
    for (int l = 0; l < 4; l++) {
        jf_fit_options ol = o;
        ol.loss = (jf_loss)jf_loss_from_name(losses[l]);
        ol.f_scale = 0.1;
        compare(losses[l], m, &d, ol, 1e-12);
    }
    jf_data ds = d;
    ds.sigma = sig;
    compare("sigma", m, &ds, o, 1e-12);
    /* bounds that hold at the solution: e ≤ 0.45 and b ≥ 0.31 */
    double lo[5] = {-INFINITY, 0.31, -INFINITY, -INFINITY, -INFINITY};
    double hi[5] = {INFINITY, INFINITY, INFINITY, INFINITY, 0.45};
    double p0b[5] = {2, 0.35, 1.6, 0.3, 0.4};
    jf_fit_options ob = o;
    ob.lower = lo;
    ob.upper = hi;
    ob.p0 = p0b;
    compare("bounds (active)", m, &d, ob, 1e-12);
    /* a on its bound, free (the cost falls as it grows) but pushed out by the step of the
     * correlated pair: both loops hold it and recompute the step (step.h, jf_step_bind) */
    jf_model *mb = compile("a + b*(1 + x/10) + c*sin(x)");
    if (mb) {
        static double yb[N];
        for (int i = 0; i < N; i++)
            yb[i] = -1 + (1 + xs[i] / 10) + 0.2 * sin(xs[i]) + 0.01 * sin(12.9898 * i);
        jf_data db = {N, xs, 0, yb, NULL};
        double p0c[3] = {0, 0.3, 0.2}, loc[3] = {0, -INFINITY, -INFINITY};
        double hic[3] = {INFINITY, INFINITY, INFINITY};
        jf_fit_options oc = jf_fit_options_default();
        oc.p0 = p0c;
        oc.lower = loc;
        oc.upper = hic;
        compare("bounds (binding)", mb, &db, oc, 1e-12);
        jf_model_free(mb);
    }
    double xsc[5] = {1, 0.1, 1, 1, 0.5};
    jf_fit_options ox = o;
    ox.x_scale = xsc;
    compare("x_scale", m, &d, ox, 1e-12);
    jf_fit_options on = o;
    on.max_nfev = 4;
    compare("max_nfev = 4", m, &d, on, 1e-12);
    jf_fit_options ot = o;
    ot.ftol = ot.xtol = ot.gtol = 1e-14;
    compare("tight tolerances", m, &d, ot, 1e-12);
    jf_model_free(m);

    /* a*b only enters as a product: JᵀJ is singular, the eigen fallback carries the steps */
    jf_model *md = compile("a*b*exp(-c*x) + e");
    if (md) {
        double p0d[4] = {1.5, 1.2, 0.2, 0.1};
        jf_fit_options od = jf_fit_options_default();
        od.p0 = p0d;
        compare("rank-deficient (a*b)", md, &d, od, 1e-8);
        jf_model_free(md);
    }
    /* a*exp(b*x) from b = 1 on x up to 49: the scale of b goes stale by 10¹⁷ after the first
     * step, and both loops start afresh there (step.h's jf_step_accept_scale); enough points
     * that no polish runs after the loop, so the last report is the result */
    jf_model *me = compile("a*exp(b*x)");
    if (me) {
        enum { NE = 70000 };
        static double xe[NE], ye[NE];
        for (int i = 0; i < NE; i++) {
            xe[i] = 0.7 + 48.3 * i / (NE - 1);
            ye[i] = 2 * exp(0.1 * xe[i]) * (1 + 0.05 * sin(12.9898 * i));
        }
        jf_data de = {NE, xe, 0, ye, NULL};
        static const double p0e[2] = {1, 1};
        jf_fit_options oe = jf_fit_options_default();
        oe.p0 = p0e;
        compare("stale scale (a*exp(b*x))", me, &de, oe, 1e-12);
        jf_model_free(me);
    }
    /* data of order 1e-150: the XTOL test, measured in the columns' units (step.h,
     * jf_step_test), stopped neither loop at the first step */
    jf_model *mt = compile("a*exp(-b*x) + c");
    if (mt) {
        static double yt[N];
        for (int i = 0; i < N; i++)
            yt[i] = 1e-150 * (2 * exp(-0.7 * xs[i]) + 0.5 + 0.05 * sin(12.9898 * i));
        jf_data dt = {N, xs, 0, yt, NULL};
        static const double p0t[3] = {1e-150, 2, 0};
        jf_fit_options ot1 = jf_fit_options_default();
        ot1.p0 = p0t;
        compare("data of order 1e-150", mt, &dt, ot1, 1e-12);
        jf_model_free(mt);
    }
    /* a Gaussian peak held at m = 60, far off the data (columns of a and s ~1e-34): both loops
     * stop, hold a and s for their negligible columns and go on with c (step.h,
     * jf_step_restart) */
    jf_model *mg = compile("a*exp(-(x-m)^2/(2*s^2))+c");
    if (mg) {
        static double yg[N];
        for (int i = 0; i < N; i++) yg[i] = 1 + 0.1 * xs[i] + 0.05 * sin(12.9898 * i);
        jf_data dg = {N, xs, 0, yg, NULL};
        static const double p0g[4] = {1, 60, 4, 0.5};
        static const int fixg[4] = {0, 1, 0, 0};
        jf_fit_options og = jf_fit_options_default();
        og.p0 = p0g;
        og.fixed = fixg;
        compare("negligible columns held", mg, &dg, og, 1e-12);
        jf_model_free(mg);
    }
    /* log of a negative argument at the start: NONFINITE from both */
    jf_model *ml = compile("a*log(b*x) + c");
    if (ml) {
        double p0l[3] = {1, -1, 0};
        jf_fit_options ol = jf_fit_options_default();
        ol.p0 = p0l;
        jf_fit_result *r = NULL;
        jf_fit_host_resident = 1;
        int st = jf_fit(ml, &d, &ol, &r, NULL);
        jf_fit_host_resident = 0;
        CHECK(st == JF_OK && r && r->status == JF_FIT_NONFINITE && !r->success);
        jf_fit_result_free(r);
        jf_model_free(ml);
    }
}

/* The p×p kernels alone: a well-conditioned matrix goes through Cholesky, a singular one
 * through the eigen path; both must solve (or least-squares solve) like a direct method. */
static void test_linalg(void) {
    enum { P = 6 };
    double ws[17 * P + 5 * P * P];
    int iws[3 * P];
    CHECK(jf_lmc_ws_doubles(P, 0) == sizeof ws / sizeof ws[0]);
    CHECK(jf_lmc_ws_ints(P) == sizeof iws / sizeof iws[0]);
    jf_lmc_views v;
    jf_lmc_views_init(&v, ws, iws, P, 0);
    CHECK(v.V + P * P == ws + sizeof ws / sizeof ws[0]);
    /* M = BᵀB + I scaled wildly per column: SPD, badly scaled, well conditioned after scaling */
    double B[P][P], M[P * P], b[P], x[P], r[P];
    for (int i = 0; i < P; i++)
        for (int j = 0; j < P; j++) B[i][j] = sin(1.0 + 3 * i + 7 * j);
    static const double colscale[P] = {1e-6, 1, 1e3, 1e8, 3e-2, 1};
    for (int i = 0; i < P; i++) {
        for (int j = 0; j < P; j++) {
            double s = i == j ? 1.0 : 0.0;
            for (int k = 0; k < P; k++) s += B[k][i] * B[k][j];
            M[i * P + j] = s * colscale[i] * colscale[j];
        }
        b[i] = cos(2.0 * i) * colscale[i];
    }
    CHECK(jf_lmc_factor(&v, M, P) == 1);
    jf_lmc_solve(&v, 1, P, b, x);
    double worst = 0;
    for (int i = 0; i < P; i++) {
        r[i] = -b[i];
        for (int j = 0; j < P; j++) r[i] += M[i * P + j] * x[j];
        worst = fmax(worst, fabs(r[i]) / fabs(b[i]));
    }
    CHECK(worst < 1e-10);
    /* quad = bᵀ M⁻¹ b = bᵀ x */
    double q = 0;
    for (int i = 0; i < P; i++) q += b[i] * x[i];
    CHECK_NEAR(jf_lmc_quad(&v, 1, P, b), q, 1e-12);

    /* rank 2: M = u uᵀ + w wᵀ; b in its range → the minimum-norm solution, M x = b */
    double u[P], w[P];
    for (int i = 0; i < P; i++) {
        u[i] = 1.0 + i;
        w[i] = (i % 2 ? 1.0 : -1.0) * 0.5;
    }
    for (int i = 0; i < P; i++)
        for (int j = 0; j < P; j++) M[i * P + j] = u[i] * u[j] + w[i] * w[j];
    for (int i = 0; i < P; i++) b[i] = 2.0 * u[i] - 3.0 * w[i];
    CHECK(jf_lmc_factor(&v, M, P) == 0);
    jf_lmc_solve(&v, 0, P, b, x);
    worst = 0;
    for (int i = 0; i < P; i++) {
        double s = -b[i];
        for (int j = 0; j < P; j++) s += M[i * P + j] * x[j];
        worst = fmax(worst, fabs(s));
    }
    CHECK(worst < 1e-10);
    /* minimum norm in the Jacobi-scaled variables z = x·√M_kk: z lies in span(u/√M_kk, w/√M_kk) */
    double z[P], us[P], wsc[P];
    for (int i = 0; i < P; i++) {
        double d = sqrt(M[i * P + i]);
        z[i] = x[i] * d;
        us[i] = u[i] / d;
        wsc[i] = w[i] / d;
    }
    double uu = 0, ww = 0, uw = 0, zu = 0, zw = 0;
    for (int i = 0; i < P; i++) {
        uu += us[i] * us[i];
        ww += wsc[i] * wsc[i];
        uw += us[i] * wsc[i];
        zu += z[i] * us[i];
        zw += z[i] * wsc[i];
    }
    double det = uu * ww - uw * uw, cu = (zu * ww - zw * uw) / det, cw = (zw * uu - zu * uw) / det;
    double orth = 0;
    for (int i = 0; i < P; i++) orth = fmax(orth, fabs(z[i] - cu * us[i] - cw * wsc[i]));
    CHECK(orth < 1e-10);
    M[3] = NAN;
    CHECK(jf_lmc_factor(&v, M, P) == -1);
}

int main(void) {
    test_linalg();
    test_fits();
    return jf_test_finish();
}
