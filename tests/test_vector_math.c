/* Vector math (jf_jit_options.vector_math, SLEEF): the vectorized C kernels against the
 * reference interpreter. Skipped (77) when the vector kernels cannot be had here (no libsleef,
 * or a CPU without AVX2+FMA).
 *
 * Vector math is not bit-identical to the interpreter (SLEEF's functions are ≤ 1 ulp, libm's
 * are others), so the checks are tolerances, for every ISA the CPU offers (AVX2 through
 * JITFIT_VECTOR_ISA=avx2, then the widest):
 * - value, gradient and residual of the damped sine, NIST formulas and models using every
 *   builtin agree with the interpreter to 1e-13 relative on well-conditioned points: those where
 *   the interpreter's value is not a cancellation (at least 1 % of the largest magnitude of that
 *   output over the points; smaller values are held to 1e-13 of that 1 %); non-finite values
 *   agree in kind;
 * - normal_eq's sums equal the sums built from the same kernels' jacobian_row (every loss, with
 *   and without weights, without y), over ranges that end in a partial block;
 * - a whole fit of the damped sine (1e5 noisy points) lands within 1e-9 relative of the exact
 *   kernels' parameters;
 * - exact and vector kernels of one model are different modules (the mode enters the keys).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/emit.h"
#include "codegen/loss.h"
#include "runtime/kernels.h"
#include "tests/testlib.h"

typedef struct rng {
    uint64_t s; /* xorshift64* state, never 0 */
} rng;

static double uni(rng *g) {
    g->s ^= g->s >> 12;
    g->s ^= g->s << 25;
    g->s ^= g->s >> 27;
    return (double)((g->s * 0x2545F4914F6CDD1Du) >> 11) * 0x1p-53;
}
static double range(rng *g, double lo, double hi) { return lo + (hi - lo) * uni(g); }

static jf_model *from_text(const char *text, const char *vars) {
    jf_model_options o = jf_model_options_default();
    const char *names[3];
    char buf[64];
    size_t nv = 0;
    if (vars) {
        snprintf(buf, sizeof buf, "%s", vars);
        for (char *s = buf, *t; (t = strsep(&s, ",")) != NULL;) names[nv++] = t;
        o.vars = names;
        o.nvars = nv;
    }
    jf_model *m = NULL;
    jf_diagnostics *d = NULL;
    if (jf_model_compile(text, (size_t)-1, &o, &m, &d) != JF_OK) {
        fprintf(stderr, "cannot compile %s: %s\n", text, d ? jf_diagnostics_text(d) : "?");
        CHECK(0);
    }
    jf_diagnostics_free(d);
    return m;
}

/* Vector kernels of m (asserting that they are vector kernels of the ISA expected). */
static jf_kernels *vector_kernels(const jf_model *m, int isa) {
    jf_jit_options o;
    memset(&o, 0, sizeof o);
    o.vector_math = 1;
    jf_kernels *k = NULL;
    char *warn = NULL;
    if (!CHECK(jf_kernels_get(m, JF_BACKEND_C, &o, &k, &warn) == JF_OK)) return NULL;
    if (warn) fprintf(stderr, "warning: %s\n", warn);
    CHECK(warn == NULL);
    free(warn);
    CHECK(jf_kernels_backend(k) == JF_BACKEND_C);
    CHECK(jf_kernels_vector_isa(k) == isa);
    return k;
}

enum { NPTS = 61, B0 = 3, MAXP = 20, MAXACC = MAXP * (MAXP + 1) / 2 + MAXP + 1 };

static size_t nvalues, nskipped, nbad;

/* Compares n outputs of np+1 columns (r, then J row by row) with the reference. */
static void compare_rows(const double *r, const double *J, const double *rr, const double *JJ,
                         size_t n, size_t np, const char *model) {
    for (size_t c = 0; c <= np; c++) {
        double big = 0;
        for (size_t i = 0; i < n; i++) {
            double v = c == 0 ? rr[i] : JJ[i * np + c - 1];
            if (isfinite(v)) big = fmax(big, fabs(v));
        }
        for (size_t i = 0; i < n; i++) {
            double a = c == 0 ? r[i] : J[i * np + c - 1], b = c == 0 ? rr[i] : JJ[i * np + c - 1];
            int ok;
            if (!isfinite(a) || !isfinite(b)) {
                ok = (isnan(a) && isnan(b)) || a == b;
            } else {
                /* below 1 % of the column's scale the value is a cancellation: its error is
                 * that of the terms, so it is measured against 1 % of the scale */
                if (fabs(b) < 1e-2 * big) nskipped++;
                ok = fabs(a - b) <= 1e-13 * fmax(fmax(fabs(a), fabs(b)), 1e-2 * big);
            }
            nvalues++;
            if (!ok && nbad++ < 10)
                fprintf(stderr, "%s: point %zu output %zu: vector %.17g, interpreter %.17g\n",
                        model, i, c, a, b);
        }
    }
}

static void sums_from_rows(size_t np, const double *r, const double *J, size_t n, int loss,
                           double f_scale, double *acc, double *mag) {
    size_t nacc = jf_emit_num_acc(np), tri = np * (np + 1) / 2;
    memset(acc, 0, nacc * sizeof *acc);
    memset(mag, 0, nacc * sizeof *mag);
    double fs2 = f_scale * f_scale, ifs2 = 1.0 / fs2, Jr[MAXP];
    for (size_t i = 0; i < n; i++) {
        double ri = r[i], cost, js = 1.0;
        if (loss == 0) cost = ri * ri;
        else cost = jf_loss_scale(loss, ri, fs2, ifs2, &ri, &js);
        for (size_t c = 0; c < np; c++) Jr[c] = J[i * np + c] * js;
        size_t q = 0;
        for (size_t a = 0; a < np; a++)
            for (size_t b = a; b < np; b++, q++) {
                acc[q] += Jr[a] * Jr[b];
                mag[q] += fabs(Jr[a] * Jr[b]);
            }
        for (size_t a = 0; a < np; a++) {
            acc[tri + a] += Jr[a] * ri;
            mag[tri + a] += fabs(Jr[a] * ri);
        }
        acc[tri + np] += cost;
        mag[tri + np] += fabs(cost);
    }
}

static size_t nsums, nsums_bad;

static void check_sums(const double *got, const double *want, const double *mag, size_t nacc,
                       const char *model) {
    for (size_t q = 0; q < nacc; q++, nsums++) {
        if (fabs(got[q] - want[q]) <= 1e-12 * mag[q] + 1e-300) continue;
        if (nsums_bad++ < 10)
            fprintf(stderr, "%s: sum %zu is %.17g, rows give %.17g\n", model, q, got[q], want[q]);
    }
}

static const struct {
    const char *text;
    const char *vars;
    double xlo, xhi;
} models[] = {
    {"a*exp(-b*x)*sin(c*x+d)+e", NULL, 0, 20},
    /* every builtin, each through its SLEEF function or lane by lane */
    {"a*exp(b*x) + a*log(b*x + 3) + log10(b*x + 3)", NULL, -1, 2},
    {"a*sqrt(b*x + 3) + cbrt(a*x - 1) + abs(b*x - 1)", NULL, -3, 3},
    {"a*sin(b*x) + cos(a*x) + a*tan(b*x/3)", NULL, -1, 1},
    {"a*cos(b*x) - sin(b*x)*b", NULL, -3, 3},
    {"a*asin(b*x/5) + acos(b*x/5)*b + atan(a*x)", NULL, -2, 2},
    {"a*sinh(b*x) + cosh(a*x) + b*tanh(a*x)", NULL, -3, 3},
    {"a*erf(b*x) + erfc(a*x)", NULL, -2, 2},
    {"a*pow(x + 4, b) + atan2(x, b) + hypot(a*x, b)", NULL, -3, 3},
    {"min(a*x, b) + max(a*x, b) + abs(x - a)", NULL, -3, 3}, /* abs' derivative: sign */
    {"a*x^3 + b*x^-2 + a^0.5 + x^a", NULL, 0.2, 3},
    /* SLEEF's sinh/cosh overflow 0.7 before libm's, its tan flushes subnormals: repaired */
    {"a*cosh(x)*1e-300", NULL, 709.8, 710.45},
    {"a*sinh(x)*1e-300", NULL, 709.8, 710.45},
    {"a*tan(b*x*1e-310)*1e300", NULL, -1, 1},
    /* negative powers whose positive power overflows: (1/x)^n, not 1/inf = 0 */
    {"a*(b*x)^-2 + x^-3 + b*x^-64", NULL, 1e150, 1e160},
    {"if(x < a, b*x, a*b) + (x >= a)*b + (x != b)*a", NULL, -3, 3},
    {"a*log(-x)", NULL, -1, 1}, /* NaN for half the points: kinds must agree */
    /* NIST StRD */
    {"b1*(1-exp(-b2*x))", NULL, 0.5, 5},
    {"exp(-b1*x)/(b2+b3*x)", NULL, 0.5, 5},
    {"b1*exp(-b2*x) + b3*exp(-b4*x) + b5*exp(-b6*x)", NULL, 0, 1.2},
    {"b1*exp(-b2*x) + b3*exp(-(x-b4)^2/b5^2) + b6*exp(-(x-b7)^2/b8^2)", NULL, 0, 5},
    {"b1*x^b2", NULL, 0.5, 5},
    {"(b1+b2*x+b3*x^2+b4*x^3)/(1+b5*x+b6*x^2+b7*x^3)", NULL, 0.5, 5},
    {"b1 - b2*x1*exp(-b3*x2)", "x1,x2", 0.5, 5},
    {"b1*(1-(1+2*b2*x)^(-0.5))", NULL, 0.5, 5},
    {"b1 - b2*x - atan(b3/(x-b4))/pi", NULL, 0.5, 5},
    {"b1*(x^2+x*b2)/(x^2+x*b3+b4)", NULL, 0.5, 5},
    {"b1/(1+exp(b2-b3*x))", NULL, 0.5, 5},
    {"(b1/b2)*exp(-0.5*((x-b3)/b2)^2)", NULL, 0.5, 5},
    {"b1*cos(2*pi*x/12) + b2*sin(2*pi*x/12) + b4*cos(2*pi*x/b3) + b5*sin(2*pi*x/b3) + "
     "b7*cos(2*pi*x/b6) + b8*sin(2*pi*x/b6)", NULL, 1, 50},
    /* 20 parameters */
    {"a1*exp(-((x-m1)/s1)^2) + a2*exp(-((x-m2)/s2)^2) + a3*exp(-((x-m3)/s3)^2) + "
     "a4*exp(-((x-m4)/s4)^2) + a5*exp(-((x-m5)/s5)^2) + c0 + c1*x + c2*x^2 + c3*x^3 + c4*x^4",
     NULL, -3, 3},
};

static void check_model(const jf_model *m, int isa, rng *g, double xlo, double xhi,
                        const char *text) {
    size_t np = m->np, nv = m->nv, nacc = jf_emit_num_acc(np);
    jf_kernels *kv = vector_kernels(m, isa), *ki = NULL;
    if (!kv || !CHECK(jf_kernels_get(m, JF_BACKEND_INTERP, NULL, &ki, NULL) == JF_OK)) {
        jf_kernels_free(kv);
        return;
    }
    double p[MAXP], x[3 * NPTS], y[NPTS], w[NPTS];
    for (size_t k = 0; k < np; k++) p[k] = range(g, 0.5, 2.0);
    for (size_t j = 0; j < nv; j++)
        for (size_t i = 0; i < NPTS; i++) x[j * NPTS + i] = range(g, xlo, xhi);
    for (size_t i = 0; i < NPTS; i++) {
        y[i] = range(g, -2, 2);
        w[i] = range(g, 0.5, 2);
    }
    /* values and gradients, weighted, from B0 (blocks, then a partial one) */
    jf_data_view dv = {x, NPTS, y, w};
    static double r[NPTS], J[NPTS * MAXP], rr[NPTS], JJ[NPTS * MAXP], res[NPTS];
    jf_kernels_jacobian_row(kv, p, &dv, B0, NPTS, r, J);
    jf_kernels_jacobian_row(ki, p, &dv, B0, NPTS, rr, JJ);
    compare_rows(r, J, rr, JJ, NPTS - B0, np, text);
    jf_kernels_residual(kv, p, &dv, B0, NPTS, res);
    compare_rows(res, J, rr, J, NPTS - B0, 0, text);
    /* f and ∂f alone (no y, no w): no cancellation with y */
    jf_data_view bare = {x, NPTS, NULL, NULL};
    jf_kernels_jacobian_row(kv, p, &bare, 0, NPTS, r, J);
    jf_kernels_jacobian_row(ki, p, &bare, 0, NPTS, rr, JJ);
    compare_rows(r, J, rr, JJ, NPTS, np, text);

    /* normal_eq against the vector kernels' own rows, on the finite points */
    size_t nf = 0;
    double xs[3 * NPTS], ys[NPTS], ws[NPTS];
    for (size_t i = 0; i < NPTS; i++) {
        int fin = isfinite(r[i]) && fabs(r[i]) < 1e100;
        for (size_t c = 0; c < np; c++) fin = fin && isfinite(J[i * np + c]) && fabs(J[i * np + c]) < 1e100;
        if (!fin) continue;
        for (size_t j = 0; j < nv; j++) xs[j * NPTS + nf] = x[j * NPTS + i];
        ys[nf] = y[i];
        ws[nf] = w[i];
        nf++;
    }
    double acc[MAXACC], want[MAXACC], mag[MAXACC];
    for (int variant = 0; variant < 3; variant++) {
        jf_data_view fv = {xs, NPTS, variant == 2 ? NULL : ys, variant == 1 ? ws : NULL};
        jf_kernels_jacobian_row(kv, p, &fv, 0, nf, rr, JJ);
        for (int loss = 0; loss < 5; loss++) {
            double fscale = loss ? 0.8 : 1.0;
            sums_from_rows(np, rr, JJ, nf, loss, fscale, want, mag);
            memset(acc, 0xff, sizeof acc); /* poison: every sum must be written */
            jf_kernels_normal_eq(kv, p, &fv, 0, nf, (jf_loss)loss, fscale, acc);
            check_sums(acc, want, mag, nacc, text);
        }
    }
    jf_kernels_free(kv);
    jf_kernels_free(ki);
}

/* The damped sine fitted to n noisy points with the exact and the vector kernels. */
static void check_fit(size_t n) {
    jf_model *m = from_text("a*exp(-b*x)*sin(c*x+d)+e", NULL);
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    if (!m || !CHECK(x && y)) {
        free(x);
        free(y);
        jf_model_free(m);
        return;
    }
    rng g = {0x2545F4914F6CDD1Du};
    for (size_t i = 0; i < n; i++) {
        x[i] = 20.0 * (double)i / (double)n;
        double u1 = uni(&g) + 0x1p-60, u2 = uni(&g);
        double noise = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        y[i] = 2.0 * exp(-0.25 * x[i]) * sin(1.5 * x[i] + 0.3) + 0.5 + 0.05 * noise;
    }
    const double start[5] = {1.5, 0.2, 1.45, 0, 0};
    jf_data d = {n, x, n, y, NULL};
    jf_fit_result *res[2] = {NULL, NULL};
    /* Two evaluations only: the parameters after one step differ a little (which shows that
     * jf_fit used the vector kernels), by far less than the tolerance. */
    for (int mode = 0; mode < 2; mode++) {
        jf_fit_options o = jf_fit_options_default();
        o.p0 = start;
        o.vector_math = mode;
        o.max_nfev = 2;
        CHECK(jf_fit(m, &d, &o, &res[mode], NULL) == JF_OK);
    }
    if (res[0] && res[1]) {
        double worst = 0;
        for (int k = 0; k < 5; k++)
            worst = fmax(worst, fabs(res[1]->params[k] - res[0]->params[k]) /
                                    fabs(res[0]->params[k]));
        printf("after one step: largest relative parameter difference %.2g\n", worst);
        CHECK(worst > 0 && worst <= 1e-9);
    }
    jf_fit_result_free(res[0]);
    jf_fit_result_free(res[1]);
    res[0] = res[1] = NULL;
    for (int mode = 0; mode < 2; mode++) {
        jf_fit_options o = jf_fit_options_default();
        o.p0 = start;
        o.vector_math = mode;
        if (!CHECK(jf_fit(m, &d, &o, &res[mode], NULL) == JF_OK)) break;
        CHECK(res[mode]->success);
        CHECK(res[mode]->backend == JF_BACKEND_C);
        CHECK(res[mode]->warning == NULL);
    }
    if (res[0] && res[1]) {
        double worst = 0;
        for (int k = 0; k < 5; k++)
            worst = fmax(worst, fabs(res[1]->params[k] - res[0]->params[k]) /
                                    fabs(res[0]->params[k]));
        printf("fit of %zu points: largest relative parameter difference %.2g\n", n, worst);
        CHECK(worst <= 1e-9);
        CHECK(fabs(res[1]->cost - res[0]->cost) <= 1e-9 * res[0]->cost);
    }
    jf_fit_result_free(res[0]);
    jf_fit_result_free(res[1]);
    jf_model_free(m);
    free(x);
    free(y);
}

int main(void) {
    char cache[] = "/tmp/jf_test_vector_math_XXXXXX";
    if (mkdtemp(cache)) setenv("JITFIT_CACHE_DIR", cache, 1);
    unsetenv("JITFIT_VECTOR_ISA");

    /* Which ISAs are offered here; none: skip. */
    jf_model *ds = from_text("a*exp(-b*x)*sin(c*x+d)+e", NULL);
    if (!ds) return jf_test_finish();
    jf_jit_options o;
    memset(&o, 0, sizeof o);
    o.vector_math = 1;
    jf_kernels *k = NULL;
    char *warn = NULL;
    if (!CHECK(jf_kernels_get(ds, JF_BACKEND_C, &o, &k, &warn) == JF_OK)) return jf_test_finish();
    int widest = jf_kernels_vector_isa(k);
    jf_kernels_free(k);
    if (widest == JF_VEC_NONE) {
        char msg[600];
        snprintf(msg, sizeof msg, "no vector math here: %s", warn ? warn : "?");
        free(warn);
        jf_model_free(ds);
        return jf_test_skip(msg);
    }
    free(warn);

    /* The mode and the ISA enter the keys: exact, then vector, then exact again. */
    o.vector_math = 0;
    CHECK(jf_kernels_get(ds, JF_BACKEND_C, &o, &k, NULL) == JF_OK && jf_kernels_vector_isa(k) == 0);
    jf_kernels_free(k);
    jf_model_free(ds);

    int isas[2] = {JF_VEC_AVX2, widest};
    for (int n = widest == JF_VEC_AVX2 ? 1 : 0; n < 2; n++) {
        if (n == 0) setenv("JITFIT_VECTOR_ISA", "avx2", 1);
        else unsetenv("JITFIT_VECTOR_ISA");
        rng g = {0x853c49e6748fea9bu};
        nvalues = nskipped = nbad = nsums = nsums_bad = 0;
        for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
            jf_model *m = from_text(models[i].text, models[i].vars);
            if (!m) continue;
            for (int rep = 0; rep < 3; rep++)
                check_model(m, isas[n], &g, models[i].xlo, models[i].xhi, models[i].text);
            jf_model_free(m);
        }
        printf("%s: %zu values within 1e-13 of the interpreter (%zu failed; %zu of them "
               "cancellations); %zu sums checked (%zu failed)\n",
               isas[n] == JF_VEC_AVX512 ? "AVX-512F" : "AVX2", nvalues, nbad, nskipped, nsums,
               nsums_bad);
        CHECK(nbad == 0);
        CHECK(nsums_bad == 0);
        CHECK(nvalues > 10 * nskipped);
    }
    unsetenv("JITFIT_VECTOR_ISA");
    check_fit(100000);
    return jf_test_finish();
}
