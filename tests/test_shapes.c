/* The peak-shape builtins gauss, lorentz and pvoigt: each is its formula (value and gradient
 * equal, bit for bit, to the model written out by hand, on the interpreter and the C kernels),
 * their arity is checked like any builtin's, and a sum of pseudo-Voigt peaks fits its own
 * synthetic data back to the truth. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/jitfit.h"
#include "tests/testlib.h"

static jf_model *compile(const char *text) {
    jf_model *m = NULL;
    jf_diagnostics *d = NULL;
    if (!CHECK(jf_model_compile(text, (size_t)-1, NULL, &m, &d) == JF_OK))
        fprintf(stderr, "  %s\n", d ? jf_diagnostics_text(d) : text);
    jf_diagnostics_free(d);
    return m;
}

/* Value and gradient of shape and of formula agree exactly at points around the centre. */
static void same_as_formula(const char *shape, const char *formula, int backend) {
    /* declared, so that both number the parameters alike */
    static const char decl[] = "param c = 1\nparam s = 1\nparam eta = 1\nvar x\n";
    char ta[512], tb[512];
    snprintf(ta, sizeof ta, "%s%s", decl, shape);
    snprintf(tb, sizeof tb, "%s%s", decl, formula);
    jf_model *a = compile(ta), *b = compile(tb);
    if (!a || !b) goto out;
    size_t np = jf_model_num_params(a);
    if (!CHECK(np == jf_model_num_params(b) && np <= 4)) goto out;
    for (size_t k = 0; k < np; k++)
        CHECK_STREQ(jf_model_param_name(a, k), jf_model_param_name(b, k));
    const double p[4] = {1.2, 0.7, 0.3, 0.25};
    int same = 1;
    for (int i = 0; i < 41; i++) {
        double x = -2.0 + 0.1 * i, fa, fb, ga[4], gb[4];
        if (!CHECK(jf_model_eval_backend(a, backend, p, &x, &fa, ga, NULL) == JF_OK &&
                   jf_model_eval_backend(b, backend, p, &x, &fb, gb, NULL) == JF_OK))
            break;
        same &= memcmp(&fa, &fb, sizeof fa) == 0 && memcmp(ga, gb, np * sizeof *ga) == 0;
    }
    if (!CHECK(same)) fprintf(stderr, "  %s differs from %s (backend %d)\n", shape, formula, backend);
out:
    jf_model_free(a);
    jf_model_free(b);
}

static void test_formulas(void) {
    for (int be = 0; be < 2; be++) {
        int backend = be ? JF_BACKEND_C : JF_BACKEND_INTERP;
        same_as_formula("y ~ gauss(x, c, s) + 0*eta", "y ~ exp(-(((x - c)/s)*((x - c)/s))/2) + 0*eta",
                        backend);
        same_as_formula("y ~ lorentz(x, c, s) + 0*eta",
                        "y ~ 1/(1 + ((x - c)/s)*((x - c)/s)) + 0*eta", backend);
        same_as_formula("y ~ pvoigt(x, c, s, eta)",
                        "y ~ eta*(1/(1 + ((x - c)/s)*((x - c)/s))) + (1 - eta)*exp(-(((x - c)/s*"
                        "1.1774100225154747)*((x - c)/s*1.1774100225154747))/2)",
                        backend);
    }
    /* the half width at half maximum: every shape is 1 at c; lorentz and pvoigt are 1/2 at
     * c ± w, gauss at c ± s·sqrt(2 ln 2) */
    jf_model *m = compile("y ~ pvoigt(x, c, w, eta)");
    if (m) {
        const double p[3] = {1.0, 0.5, 0.37}, xs[2] = {1.0, 1.5};
        double f[2];
        for (int i = 0; i < 2; i++) CHECK(jf_model_eval(m, p, &xs[i], &f[i], NULL) == JF_OK);
        CHECK(f[0] == 1.0);
        CHECK_NEAR(f[1], 0.5, 1e-15);
    }
    jf_model_free(m);
}

static void test_arity(void) {
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"y ~ gauss(x, c)", "'gauss' takes 3 arguments, got 2"},
        {"y ~ pvoigt(x, c, w)", "'pvoigt' takes 4 arguments, got 3"},
        {"y ~ lorentz(x, c, w, q)", "'lorentz' takes 3 arguments, got 4"},
        {"param gauss = 1\nvar x\ny ~ gauss*x", "'gauss' is a builtin function"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        jf_model *m = NULL;
        jf_diagnostics *d = NULL;
        CHECK(jf_model_compile(bad[i].text, (size_t)-1, NULL, &m, &d) != JF_OK && !m);
        CHECK_CONTAINS(d ? jf_diagnostics_text(d) : "", bad[i].msg);
        jf_diagnostics_free(d);
    }
}

/* Two pseudo-Voigt peaks on a line, noise-free: the fit returns the truth. */
static void test_fit(void) {
    jf_model *m = compile("param a1 = 1\nparam c1 = 2.9\nparam w1 = 0.4\nparam e1 = 0.5\n"
                          "param a2 = 0.5\nparam c2 = 6.2\nparam w2 = 0.6\nparam e2 = 0.5\n"
                          "param b = 0\nvar x\n"
                          "y ~ a1*pvoigt(x, c1, w1, e1) + a2*pvoigt(x, c2, w2, e2) + b");
    if (!m) return;
    enum { N = 400 };
    static double x[N], y[N];
    const double truth[9] = {2.0, 3.0, 0.5, 0.3, 1.2, 6.0, 0.8, 0.7, 0.1};
    for (int i = 0; i < N; i++) {
        x[i] = 10.0 * i / N;
        CHECK(jf_model_eval(m, truth, &x[i], &y[i], NULL) == JF_OK);
    }
    jf_data d = {N, x, 0, y, NULL};
    jf_fit_result *r = NULL;
    char *err = NULL;
    CHECK(jf_fit(m, &d, NULL, &r, &err) == JF_OK);
    if (r) {
        CHECK(r->success);
        for (int k = 0; k < 9; k++)
            if (!CHECK(fabs(r->params[k] - truth[k]) <= 1e-8 * fmax(1.0, fabs(truth[k]))))
                fprintf(stderr, "  %s = %.17g, truth %g\n", jf_model_param_name(m, (size_t)k),
                        r->params[k], truth[k]);
    } else {
        fprintf(stderr, "  %s\n", err ? err : "?");
    }
    jf_free(err);
    jf_fit_result_free(r);
    jf_model_free(m);
}

int main(void) {
    test_formulas();
    test_arity();
    test_fit();
    return jf_test_finish();
}
