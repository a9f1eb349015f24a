/* Tests of symbolic differentiation (codegen/diff.c) against numbers: every builtin's derivative
 * against Richardson-extrapolated central differences on a grid of its domain, thousands of
 * random expressions over all operations whose symbolic gradient (run by the interpreter) must
 * match finite differences wherever the function is smooth near the point, the conventions at
 * kinks, and the cost of differentiating a large model with many parameters. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/interp.h"
#include "tests/testlib.h"

#define NP 3 /* parameters of the test expressions */

static const char *const PN[] = {"a", "b", "c"};
static const char *const VN[] = {"x", "y"};

/* f and its NP partials, ready to evaluate. */
typedef struct fn {
    jf_dag *d;         /* the DAG (not owned) */
    jf_ref r[1 + NP];  /* f, ∂f/∂p0, ∂f/∂p1, ∂f/∂p2 */
    jf_schedule *s;    /* schedule of r */
    double *scratch;   /* s->n doubles */
} fn;

static int fn_init(fn *F, jf_dag *d, jf_ref f) {
    memset(F, 0, sizeof *F);
    F->d = d;
    F->r[0] = f;
    for (uint32_t k = 0; k < NP; k++)
        F->r[k + 1] = jf_dag_diff(d, f, k);
    for (int i = 0; i <= NP; i++)
        if (F->r[i] == JF_NOREF)
            return 0;
    F->s = jf_schedule_build(d, F->r, 1 + NP);
    F->scratch = F->s ? malloc((F->s->n + 1) * sizeof(double)) : NULL;
    return F->scratch != NULL;
}

static void fn_free(fn *F) {
    jf_schedule_free(F->s);
    free(F->scratch);
}

/* Evaluates f and the partials at (p, x) into out[0..NP]. */
static void fn_eval(fn *F, const double *p, const double *x, double *out) {
    jf_interp_run(F->s, p, x, F->scratch, out);
}

static double fn_value(fn *F, const double *p, const double *x) {
    double out[1 + NP];
    fn_eval(F, p, x, out);
    return out[0];
}

/* Central difference in p[k] with step h. */
static double central(fn *F, double *p, const double *x, int k, double h) {
    double save = p[k];
    p[k] = save + h;
    double fp = fn_value(F, p, x);
    p[k] = save - h;
    double fm = fn_value(F, p, x);
    p[k] = save;
    return (fp - fm) / (2 * h);
}

/* One Richardson step on central differences (error O(h^4)). */
static double richardson(fn *F, double *p, const double *x, int k, double h) {
    return (4 * central(F, p, x, k, h / 2) - central(F, p, x, k, h)) / 3;
}

/* |a - b| <= tol * max(1, |b|) */
static int close_to(double a, double b, double tol) {
    return fabs(a - b) <= tol * fmax(1.0, fabs(b));
}

static void report(fn *F, const double *p, const double *x, int k, double sym, double fd) {
    char *t = jf_dag_to_text(F->d, F->r[0], PN, VN);
    char *dt = jf_dag_to_text(F->d, F->r[k + 1], PN, VN);
    printf("  f = %s\n  d/d%s = %s\n  at a=%.17g b=%.17g c=%.17g x=%.17g y=%.17g: symbolic %.17g, "
           "finite differences %.17g\n",
           t ? t : "?", PN[k], dt ? dt : "?", p[0], p[1], p[2], x[0], x[1], sym, fd);
    free(t);
    free(dt);
}

/* Checks ∂f/∂p[k] at (p, x) against finite differences; requires smoothness. */
static void check_point(fn *F, double *p, const double *x, int k, double tol) {
    double out[1 + NP];
    fn_eval(F, p, x, out);
    double h = 1e-4 * fmax(1.0, fabs(p[k]));
    double fd = richardson(F, p, x, k, h);
    if (!jf_test_check(close_to(out[k + 1], fd, tol), "symbolic == finite differences", __FILE__,
                       __LINE__))
        report(F, p, x, k, out[k + 1], fd);
}

/* ------------------------------------------------------------------------------------------- */

static jf_dag *D;
static jf_ref K(double v) { return jf_dag_const(D, v); }
static jf_ref P(unsigned k) { return jf_dag_param(D, k); }
static jf_ref U(jf_op op, jf_ref a) { return jf_dag_unary(D, op, a); }
static jf_ref B(jf_op op, jf_ref a, jf_ref b) { return jf_dag_binary(D, op, a, b); }

/* A unary builtin applied to p0, checked on a grid of [lo, hi], skipping points closer than
 * `gap` to the points in avoid (kinks, poles). */
static void check_unary(jf_op op, double lo, double hi, const double *avoid, int navoid) {
    fn F;
    if (!CHECK(fn_init(&F, D, U(op, P(0)))))
        return;
    int n = 0;
    for (int i = 0; i <= 60; i++) {
        double p[NP] = {lo + (hi - lo) * i / 60.0, 0.3, 0.7}, x[2] = {0, 0};
        int skip = 0;
        for (int j = 0; j < navoid; j++)
            skip |= fabs(p[0] - avoid[j]) < 1e-2;
        if (skip)
            continue;
        check_point(&F, p, x, 0, 1e-7);
        n++;
    }
    CHECK(n >= 50);
    fn_free(&F);
}

/* A binary builtin applied to (p0, p1) on a grid of [lo0,hi0]×[lo1,hi1]; `near` returns 1 at
 * points to skip (ties, poles). */
static void check_binary(jf_ref f, double lo0, double hi0, double lo1, double hi1,
                         int (*near)(double, double)) {
    fn F;
    if (!CHECK(fn_init(&F, D, f)))
        return;
    int n = 0;
    for (int i = 0; i <= 12; i++) {
        for (int j = 0; j <= 12; j++) {
            double p[NP] = {lo0 + (hi0 - lo0) * i / 12.0, lo1 + (hi1 - lo1) * j / 12.0, 0.7};
            double x[2] = {0.6, -0.4};
            if (near != NULL && near(p[0], p[1]))
                continue;
            check_point(&F, p, x, 0, 1e-7);
            check_point(&F, p, x, 1, 1e-7);
            n++;
        }
    }
    CHECK(n >= 100);
    fn_free(&F);
}

static int near_tie(double a, double b) { return fabs(a - b) < 1e-2; }
static int near_origin(double a, double b) { return hypot(a, b) < 1e-2; }
static int near_zero_b(double a, double b) { return (void)a, fabs(b) < 1e-2; }
static int near_zero_a(double a, double b) { return (void)b, fabs(a) < 1e-2; }
static int near_atan2_cut(double a, double b) {
    return hypot(a, b) < 1e-2 || (fabs(a) < 1e-2 && b < 0);
}

static void test_builtins(void) {
    const double zero[] = {0.0};
    check_unary(JF_OP_NEG, -3, 3, NULL, 0);
    check_unary(JF_OP_EXP, -5, 5, NULL, 0);
    check_unary(JF_OP_LOG, 0.2, 5, NULL, 0);
    check_unary(JF_OP_LOG10, 0.2, 5, NULL, 0);
    check_unary(JF_OP_SQRT, 0.05, 5, NULL, 0);
    check_unary(JF_OP_CBRT, -3, 3, zero, 1);
    check_unary(JF_OP_ABS, -3, 3, zero, 1);
    check_unary(JF_OP_SIN, -5, 5, NULL, 0);
    check_unary(JF_OP_COS, -5, 5, NULL, 0);
    check_unary(JF_OP_TAN, -1.4, 1.4, NULL, 0);
    check_unary(JF_OP_ASIN, -0.95, 0.95, NULL, 0);
    check_unary(JF_OP_ACOS, -0.95, 0.95, NULL, 0);
    check_unary(JF_OP_ATAN, -5, 5, NULL, 0);
    check_unary(JF_OP_SINH, -3, 3, NULL, 0);
    check_unary(JF_OP_COSH, -3, 3, NULL, 0);
    check_unary(JF_OP_TANH, -3, 3, NULL, 0);
    check_unary(JF_OP_ERF, -3, 3, NULL, 0);
    check_unary(JF_OP_ERFC, -3, 3, NULL, 0);
    check_unary(JF_OP_SIGN, -3, 3, zero, 1);

    jf_ref a = P(0), b = P(1);
    check_binary(B(JF_OP_ADD, a, b), -3, 3, -3, 3, NULL);
    check_binary(B(JF_OP_SUB, a, b), -3, 3, -3, 3, NULL);
    check_binary(B(JF_OP_MUL, a, b), -3, 3, -3, 3, NULL);
    check_binary(B(JF_OP_DIV, a, b), -3, 3, -3, 3, near_zero_b);
    check_binary(B(JF_OP_POW, a, b), 0.2, 3, -2.5, 2.5, NULL);
    check_binary(B(JF_OP_ATAN2, a, b), -3, 3, -3, 3, near_atan2_cut);
    check_binary(B(JF_OP_HYPOT, a, b), -3, 3, -3, 3, near_origin);
    check_binary(B(JF_OP_MIN, a, b), -3, 3, -2.9, 3.1, near_tie);
    check_binary(B(JF_OP_MAX, a, b), -3, 3, -2.9, 3.1, near_tie);
    const jf_op cmp[] = {JF_OP_LT, JF_OP_LE, JF_OP_GT, JF_OP_GE, JF_OP_EQ, JF_OP_NE};
    for (size_t i = 0; i < sizeof cmp / sizeof cmp[0]; i++)
        check_binary(B(cmp[i], a, b), -3, 3, -2.9, 3.1, near_tie);
    check_binary(jf_dag_select(D, B(JF_OP_LT, a, b), B(JF_OP_MUL, a, b), U(JF_OP_SIN, a)), -3, 3,
                 -2.9, 3.1, near_tie);
    /* pow: constant exponents (integer → powi path, negative bases allowed), constant base,
     * and an exponent that is a variable (independent of the parameters, but not constant) */
    const double ints[] = {2, 3, -1, -2, 5};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        check_binary(B(JF_OP_ADD, B(JF_OP_POW, a, K(ints[i])), b), -2, 2, -1, 1,
                     ints[i] < 0 ? near_zero_a : NULL);
    const double reals[] = {0.5, 2.5, -1.5, 1.0 / 3};
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++)
        check_binary(B(JF_OP_ADD, B(JF_OP_POW, a, K(reals[i])), b), 0.1, 3, -1, 1, NULL);
    check_binary(B(JF_OP_MUL, B(JF_OP_POW, K(2.5), a), b), -3, 3, -1, 1, NULL);
    check_binary(B(JF_OP_MUL, B(JF_OP_POW, a, jf_dag_var(D, 0)), b), 0.1, 3, -1, 1, NULL);
    /* chain rule through every unary builtin at once: f = op(a*x + b) */
    const jf_op un[] = {JF_OP_EXP, JF_OP_SIN, JF_OP_COS, JF_OP_ATAN, JF_OP_SINH, JF_OP_COSH,
                        JF_OP_TANH, JF_OP_ERF, JF_OP_ERFC, JF_OP_CBRT};
    jf_ref u = B(JF_OP_ADD, B(JF_OP_MUL, a, jf_dag_var(D, 0)), b);
    for (size_t i = 0; i < sizeof un / sizeof un[0]; i++)
        check_binary(U(un[i], u), -2, 2, -1.05, 0.95, NULL);
}

/* ------------------------------------------------------------------------------------------- */

/* A fixed-seed PRNG (splitmix64) so the random expressions are the same on every run. */
static uint64_t rng = 0x6a09e667f3bcc909ull;
static uint64_t next_u64(void) {
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double unif(double lo, double hi) {
    return lo + (hi - lo) * (double)(next_u64() >> 11) * 0x1.0p-53;
}
static unsigned pick(unsigned n) { return (unsigned)(next_u64() % n); }

static int nvars_cur;

/* A random expression of at most the given depth over every operation. Arguments of functions
 * with restricted domains are usually (not always) shaped to stay inside the domain, so that
 * most points are comparable. */
static jf_ref gen(int depth) {
    if (depth <= 0 || pick(100) < 20) {
        unsigned r = pick(100);
        if (r < 45)
            return P(pick(NP));
        if (r < 75)
            return jf_dag_var(D, pick((unsigned)nvars_cur));
        static const double consts[] = {0, 1, -1, 2, 0.5, 3, -2.5, 1.25};
        return r < 90 ? K(consts[pick(8)]) : K(unif(-3, 3));
    }
    jf_op op = (jf_op)(JF_OP_NEG + pick(JF_OP_COUNT - JF_OP_NEG));
    int safe = pick(100) < 75;
    jf_ref a, b;
    switch (op) {
    case JF_OP_LOG:
    case JF_OP_LOG10:
    case JF_OP_SQRT:
        a = gen(depth - 1);
        if (safe)
            a = B(JF_OP_ADD, B(JF_OP_POW, a, K(2)), K(0.5));
        return U(op, a);
    case JF_OP_ASIN:
    case JF_OP_ACOS:
        a = gen(depth - 1);
        if (safe)
            a = B(JF_OP_MUL, K(0.9), U(JF_OP_TANH, a));
        return U(op, a);
    case JF_OP_POW: {
        a = gen(depth - 1);
        unsigned e = pick(100);
        if (e < 40)
            return B(op, a, K((double)((int)pick(8) - 3)));
        if (safe)
            a = B(JF_OP_ADD, B(JF_OP_POW, a, K(2)), K(0.5));
        return B(op, a, e < 60 ? K(unif(-2, 2)) : gen(depth - 1));
    }
    case JF_OP_DIV:
        a = gen(depth - 1);
        b = gen(depth - 1);
        if (safe)
            b = B(JF_OP_ADD, B(JF_OP_POW, b, K(2)), K(0.5));
        return B(op, a, b);
    case JF_OP_SELECT: {
        /* one call per statement: argument evaluation order is unspecified, and the sequence of
         * random numbers must not depend on the compiler */
        jf_ref c = gen(depth - 1);
        if (pick(100) < 80) {
            jf_op cmp = (jf_op)(JF_OP_LT + pick(6));
            c = B(cmp, c, gen(depth - 1));
        }
        a = gen(depth - 1);
        return jf_dag_select(D, c, a, gen(depth - 1));
    }
    default: break;
    }
    if (jf_op_get_info(op)->arity == 1)
        return U(op, gen(depth - 1));
    a = gen(depth - 1);
    return B(op, a, gen(depth - 1));
}

static void test_random(void) {
    int nexpr = 0, pairs = 0, compared = 0, failed_before = jf_test_failed;
    size_t nodes_f = 0, nodes_all = 0;
    for (int e = 0; e < 1500; e++) {
        nvars_cur = 1 + (int)pick(2);
        jf_ref f = gen(3 + (int)pick(4));
        if (getenv("SHOW_EXPR") && e < 15) {
            char *t = jf_dag_to_text(D, f, PN, VN);
            printf("%s\n", t ? t : "?");
            free(t);
        }
        fn F;
        if (!CHECK(fn_init(&F, D, f))) {
            fn_free(&F);
            continue;
        }
        nexpr++;
        nodes_f += jf_dag_count_reachable(D, &f, 1);
        nodes_all += F.s->n;
        for (int trial = 0; trial < 2; trial++) {
            double p[NP], x[2];
            for (int k = 0; k < NP; k++)
                p[k] = unif(-2, 2);
            x[0] = unif(-2, 2);
            x[1] = unif(-2, 2);
            double out[1 + NP];
            fn_eval(&F, p, x, out);
            for (int k = 0; k < NP; k++) {
                if (!jf_dag_depends(D, f, (uint32_t)k))
                    continue;
                pairs++;
                double h = 1e-4 * fmax(1.0, fabs(p[k]));
                double r1 = richardson(&F, p, x, k, h), r2 = richardson(&F, p, x, k, 4 * h);
                /* comparable: everything finite and the function smooth at the scale of both
                 * steps (a kink or jump nearby makes the two estimates disagree) */
                if (!isfinite(out[0]) || !isfinite(out[k + 1]) || !isfinite(r1) ||
                    !isfinite(r2) || !close_to(r1, r2, 1e-8))
                    continue;
                compared++;
                if (!jf_test_check(close_to(out[k + 1], r1, 1e-7), "random: symbolic == fd",
                                   __FILE__, __LINE__) &&
                    jf_test_failed - failed_before <= 5)
                    report(&F, p, x, k, out[k + 1], r1);
            }
        }
        fn_free(&F);
    }
    printf("random expressions: %d, (expression, point, parameter) pairs: %d, compared: %d "
           "(%.1f%%); schedule nodes: %zu for f alone, %zu for f and its %d partials\n",
           nexpr, pairs, compared, 100.0 * compared / (pairs ? pairs : 1), nodes_f, nodes_all,
           NP);
    CHECK(nexpr >= 1000);
    CHECK(compared >= 0.7 * pairs);
    CHECK(jf_dag_error(D) == JF_OK);
}

/* ------------------------------------------------------------------------------------------- */

static double eval_at(jf_ref f, jf_ref df, const double *p, const double *x, double *grad) {
    jf_ref roots[2] = {f, df};
    jf_schedule *s = jf_schedule_build(D, roots, 2);
    double *scratch = s ? malloc((s->n + 1) * sizeof *scratch) : NULL, out[2] = {NAN, NAN};
    if (scratch != NULL)
        jf_interp_run(s, p, x, scratch, out);
    free(scratch);
    jf_schedule_free(s);
    *grad = out[1];
    return out[0];
}

static void test_kinks(void) {
    jf_ref a = P(0), b = P(1), x = jf_dag_var(D, 0);
    double g, p[NP] = {0, 0, 0}, xv[2] = {0, 0};
    /* d|a|/da at 0 is 0 (sign(0) = 0), at ±1 it is ±1 */
    jf_ref f = U(JF_OP_ABS, a), df = jf_dag_diff(D, f, 0);
    eval_at(f, df, p, xv, &g);
    CHECK(g == 0.0);
    p[0] = -0.0;
    eval_at(f, df, p, xv, &g);
    CHECK(g == 0.0);
    p[0] = -1;
    eval_at(f, df, p, xv, &g);
    CHECK(g == -1.0);
    /* d|a*x|/da at x = 0 is 0 */
    f = U(JF_OP_ABS, B(JF_OP_MUL, a, x));
    p[0] = 2;
    eval_at(f, jf_dag_diff(D, f, 0), p, xv, &g);
    CHECK(g == 0.0);
    /* min/max ties take the first operand in canonical order (constants, parameters by number,
     * variables by number, compound terms by creation), whichever way they were written */
    p[0] = p[1] = 1.5;
    jf_ref fs[] = {B(JF_OP_MIN, a, b), B(JF_OP_MIN, b, a), B(JF_OP_MAX, a, b), B(JF_OP_MAX, b, a)};
    for (int i = 0; i < 4; i++) {
        eval_at(fs[i], jf_dag_diff(D, fs[i], 0), p, xv, &g);
        CHECK(g == 1.0);
        eval_at(fs[i], jf_dag_diff(D, fs[i], 1), p, xv, &g);
        CHECK(g == 0.0);
    }
    /* variables come before compound terms: at the tie x = 3a the derivative is x's, 0 */
    xv[0] = 1.5;
    f = B(JF_OP_MIN, B(JF_OP_MUL, K(3), a), x);
    p[0] = 0.5;
    eval_at(f, jf_dag_diff(D, f, 0), p, xv, &g);
    CHECK(g == 0.0);
    p[0] = 0.4;
    eval_at(f, jf_dag_diff(D, f, 0), p, xv, &g);
    CHECK(g == 3.0);
    f = B(JF_OP_MAX, x, a);
    p[0] = 1.5;
    eval_at(f, jf_dag_diff(D, f, 0), p, xv, &g);
    CHECK(g == 1.0);
    /* a NaN operand of min/max is ignored, by the derivative as by fmin/fmax */
    jf_ref lb = U(JF_OP_LOG, b);
    jf_ref nanops[] = {B(JF_OP_MAX, a, lb), B(JF_OP_MAX, lb, a), B(JF_OP_MIN, a, lb),
                       B(JF_OP_MIN, lb, a)};
    p[0] = 0.25;
    p[1] = -1;
    for (int i = 0; i < 4; i++) {
        eval_at(nanops[i], jf_dag_diff(D, nanops[i], 0), p, xv, &g);
        CHECK(g == 1.0);
        eval_at(nanops[i], jf_dag_diff(D, nanops[i], 1), p, xv, &g);
        CHECK(g == 0.0);
    }
    /* select differentiates the chosen branch; the condition contributes nothing */
    f = jf_dag_select(D, B(JF_OP_LT, a, K(1)), B(JF_OP_POW, a, K(2)), B(JF_OP_MUL, K(3), a));
    df = jf_dag_diff(D, f, 0);
    p[0] = 0.5;
    eval_at(f, df, p, xv, &g);
    CHECK(g == 1.0);
    p[0] = 1;
    eval_at(f, df, p, xv, &g);
    CHECK(g == 3.0);
    p[0] = 2;
    eval_at(f, df, p, xv, &g);
    CHECK(g == 3.0);
    /* comparisons and sign: derivative 0 everywhere */
    CHECK(jf_dag_is_const(D, jf_dag_diff(D, B(JF_OP_LT, a, b), 0), 0.0));
    CHECK(jf_dag_is_const(D, jf_dag_diff(D, U(JF_OP_SIGN, a), 0), 0.0));
    /* documented non-finite points: sqrt' at 0 is inf, hypot' at (0,0) is NaN */
    p[0] = 0;
    f = U(JF_OP_SQRT, a);
    eval_at(f, jf_dag_diff(D, f, 0), p, xv, &g);
    CHECK(g == INFINITY);
    p[0] = p[1] = 0;
    f = B(JF_OP_HYPOT, a, b);
    eval_at(f, jf_dag_diff(D, f, 0), p, xv, &g);
    CHECK(isnan(g));
}

/* Derivatives of hypot, atan2 and log10 wherever the function itself is finite: a a' + b b'
 * and x² + y² overflow beyond about 1e154 and underflow below 1e-154, where hypot does not,
 * and u ln 10 overflows beyond 7.8e307. */
static int rel_close(double got, double want) {
    return fabs(got - want) <= 1e-14 * fabs(want);
}

static void test_range(void) {
    jf_ref a = P(0), b = P(1), x = jf_dag_var(D, 0);
    double g, p[NP] = {1, 1, 0}, xv[2] = {1e200, 0};
    /* hypot(a x, b) at a = b = 1, x = 1e200: ∂/∂a = x (a x)/hypot = 1e200, ∂/∂b = 1e-200 */
    jf_ref f = B(JF_OP_HYPOT, B(JF_OP_MUL, a, x), b);
    eval_at(f, jf_dag_diff(D, f, 0), p, xv, &g);
    CHECK(rel_close(g, 1e200));
    eval_at(f, jf_dag_diff(D, f, 1), p, xv, &g);
    CHECK(rel_close(g, 1e-200));
    /* hypot(a x, b x) at a = 3, b = 4, x = 1e-170: ∂/∂a = (3/5) x, ∂/∂b = (4/5) x */
    f = B(JF_OP_HYPOT, B(JF_OP_MUL, a, x), B(JF_OP_MUL, b, x));
    p[0] = 3;
    p[1] = 4;
    xv[0] = 1e-170;
    eval_at(f, jf_dag_diff(D, f, 0), p, xv, &g);
    CHECK(rel_close(g, 0.6e-170));
    eval_at(f, jf_dag_diff(D, f, 1), p, xv, &g);
    CHECK(rel_close(g, 0.8e-170));
    /* the same at x = 1e160, and atan2 of those operands: ∂/∂a = b x²/(x² (a² + b²)) = 0.16 */
    xv[0] = 1e160;
    eval_at(f, jf_dag_diff(D, f, 0), p, xv, &g);
    CHECK(rel_close(g, 0.6e160));
    f = B(JF_OP_ATAN2, B(JF_OP_MUL, a, x), B(JF_OP_MUL, b, x));
    eval_at(f, jf_dag_diff(D, f, 0), p, xv, &g);
    CHECK(rel_close(g, 0.16));
    /* log10(a x) at a = 1, x = 1e308: ∂/∂a = 1/(a ln 10), though u ln 10 overflows */
    f = U(JF_OP_LOG10, B(JF_OP_MUL, a, x));
    p[0] = 1;
    xv[0] = 1e308;
    eval_at(f, jf_dag_diff(D, f, 0), p, xv, &g);
    CHECK(rel_close(g, 1 / log(10.0)));
}

/* A model with thousands of nodes and 120 parameters: a sum of 40 Gaussians
 * A_k exp(-((x - mu_k)/s_k)^2). Each partial must only cost the part of f that involves it. */
static void test_large(void) {
    jf_dag *d = jf_dag_create(0);
    jf_ref x = jf_dag_var(d, 0), f = jf_dag_const(d, 0);
    const uint32_t ng = 40, np = 3 * ng;
    for (uint32_t k = 0; k < ng; k++) {
        jf_ref z = jf_dag_binary(d, JF_OP_DIV,
                                 jf_dag_binary(d, JF_OP_SUB, x, jf_dag_param(d, 3 * k + 1)),
                                 jf_dag_param(d, 3 * k + 2));
        jf_ref g = jf_dag_unary(d, JF_OP_EXP,
                                jf_dag_unary(d, JF_OP_NEG, jf_dag_binary(d, JF_OP_POW, z,
                                                                         jf_dag_const(d, 2))));
        /* nest a few harmless layers so f has thousands of nodes */
        for (int j = 0; j < 20; j++)
            g = jf_dag_binary(d, JF_OP_ADD, jf_dag_unary(d, JF_OP_TANH, g),
                              jf_dag_binary(d, JF_OP_MUL, jf_dag_const(d, 1e-3 * (j + 1)), g));
        f = jf_dag_binary(d, JF_OP_ADD, f, jf_dag_binary(d, JF_OP_MUL, jf_dag_param(d, 3 * k), g));
    }
    size_t nf = jf_dag_count_reachable(d, &f, 1);
    jf_ref *roots = malloc((np + 1) * sizeof *roots);
    if (!CHECK(roots != NULL))
        return;
    roots[0] = f;
    clock_t t0 = clock();
    for (uint32_t k = 0; k < np; k++)
        roots[k + 1] = jf_dag_diff(d, f, k);
    double ms = 1000.0 * (double)(clock() - t0) / CLOCKS_PER_SEC;
    int ok = 1;
    for (uint32_t k = 0; k <= np; k++)
        ok &= roots[k] != JF_NOREF;
    CHECK(ok);
    size_t nall = jf_dag_count_reachable(d, roots, np + 1);
    printf("large model: %zu nodes in f, %zu with all %u partials (DAG size %zu), "
           "differentiated in %.1f ms\n",
           nf, nall, np, jf_dag_size(d), ms);
    CHECK(nf > 2000);
    CHECK(nall < 6 * nf);
    CHECK(ms < 2000);
    /* spot-check one partial numerically */
    jf_schedule *s = jf_schedule_build(d, roots, np + 1);
    double *p = malloc(np * sizeof *p), *scratch = s ? malloc(s->n * sizeof *scratch) : NULL;
    double *out = malloc((np + 1) * sizeof *out), *out2 = malloc((np + 1) * sizeof *out2);
    if (CHECK(s && p && scratch && out && out2)) {
        for (uint32_t k = 0; k < ng; k++) {
            p[3 * k] = 1 + 0.1 * k;
            p[3 * k + 1] = -2 + 0.1 * k;
            p[3 * k + 2] = 0.5 + 0.01 * k;
        }
        double xv = 0.3;
        jf_interp_run(s, p, &xv, scratch, out);
        for (uint32_t k = 60; k < 66; k++) {
            double h = 1e-5, save = p[k];
            p[k] = save + h;
            jf_interp_run(s, p, &xv, scratch, out2);
            double fp = out2[0];
            p[k] = save - h;
            jf_interp_run(s, p, &xv, scratch, out2);
            p[k] = save;
            CHECK_NEAR(out[k + 1], (fp - out2[0]) / (2 * h), 1e-7);
        }
    }
    free(p);
    free(scratch);
    free(out);
    free(out2);
    free(roots);
    jf_schedule_free(s);
    jf_dag_free(d);
}

/* The deepest expressions the resolver lets through: differentiation (recursive, depth of f)
 * and printing (recursive, depth of the derivative) must fit the stack, also under sanitizers. */
static void test_deep(void) {
    jf_dag *d = jf_dag_create(0);
    jf_ref f = jf_dag_param(d, 0);
    for (unsigned i = 0; 2 * i + 3 <= JF_DAG_MAX_DEPTH; i++) /* two levels per step */
        f = jf_dag_unary(d, i % 2 ? JF_OP_SIN : JF_OP_TANH,
                         jf_dag_binary(d, JF_OP_ADD, f, jf_dag_const(d, 0.25)));
    CHECK(f != JF_NOREF && jf_dag_node(d, f)->depth <= JF_DAG_MAX_DEPTH);
    jf_ref df = jf_dag_diff(d, f, 0);
    CHECK(df != JF_NOREF);
    if (df != JF_NOREF) {
        printf("deep model: depth %u, derivative depth %u\n", jf_dag_node(d, f)->depth,
               jf_dag_node(d, df)->depth);
        /* (the derivative's text repeats the nested arguments: quadratic in depth, over the
         * printing limit; f's text is linear) */
        char *t = jf_dag_to_text(d, f, PN, VN);
        CHECK(t != NULL && strlen(t) > 4 * JF_DAG_MAX_DEPTH);
        free(t);
        double p[NP] = {0.3, 0, 0}, xv[2] = {0, 0}, g = 0, g2 = 0;
        jf_ref roots[2] = {f, df};
        jf_schedule *s = jf_schedule_build(d, roots, 2);
        double *scratch = s ? malloc(s->n * sizeof *scratch) : NULL, out[2];
        if (CHECK(scratch != NULL)) {
            jf_interp_run(s, p, xv, scratch, out);
            g = out[1];
            double h = 1e-5;
            p[0] = 0.3 + h;
            jf_interp_run(s, p, xv, scratch, out);
            g2 = out[0];
            p[0] = 0.3 - h;
            jf_interp_run(s, p, xv, scratch, out);
            g2 = (g2 - out[0]) / (2 * h);
            CHECK_NEAR(g, g2, 1e-6);
        }
        free(scratch);
        jf_schedule_free(s);
    }
    jf_dag_free(d);
}

int main(void) {
    D = jf_dag_create(0);
    if (D == NULL)
        return 1;
    test_builtins();
    test_kinks();
    test_range();
    test_random();
    test_large();
    test_deep();
    jf_dag_free(D);
    return jf_test_finish();
}
