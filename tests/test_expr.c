/* Tests of the expression DAG (codegen/expr.c, print.c, diff.c basics): hash-consing, the
 * simplification rules as a table (built with the constructors, compared as text), constant
 * folding, node sharing between f and its derivatives, the node limit, and printing
 * precedence. The parser is not used: every expression is built with the constructors. */
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/expr.h"
#include "codegen/interp.h"
#include "tests/testlib.h"

static jf_dag *D;
static const char *const PN[] = {"a", "b", "c", "d", "e"};
static const char *const VN[] = {"x", "y"};

static jf_ref K(double v) { return jf_dag_const(D, v); }
static jf_ref P(unsigned k) { return jf_dag_param(D, k); }
static jf_ref X(unsigned j) { return jf_dag_var(D, j); }
static jf_ref U(jf_op op, jf_ref a) { return jf_dag_unary(D, op, a); }
static jf_ref B(jf_op op, jf_ref a, jf_ref b) { return jf_dag_binary(D, op, a, b); }
static jf_ref ADD(jf_ref a, jf_ref b) { return B(JF_OP_ADD, a, b); }
static jf_ref SUB(jf_ref a, jf_ref b) { return B(JF_OP_SUB, a, b); }
static jf_ref MUL(jf_ref a, jf_ref b) { return B(JF_OP_MUL, a, b); }
static jf_ref DIV(jf_ref a, jf_ref b) { return B(JF_OP_DIV, a, b); }
static jf_ref POW(jf_ref a, jf_ref b) { return B(JF_OP_POW, a, b); }
static jf_ref NEG(jf_ref a) { return U(JF_OP_NEG, a); }
static jf_ref SEL(jf_ref c, jf_ref a, jf_ref b) { return jf_dag_select(D, c, a, b); }

/* Renders r with the names a..e and x, y and compares with want. */
static void text_is(jf_ref r, const char *want, int line) {
    char *t = r == JF_NOREF ? NULL : jf_dag_to_text(D, r, PN, VN);
    jf_test_streq(t, want, "text", want, __FILE__, line);
    free(t);
}
#define TEXT(r, want) text_is((r), (want), __LINE__)

/* The damped sine a*exp(-b*x)*sin(c*x+d)+e, built bottom-up and left to right as the parser
 * does (compound operands of commutative operations are ordered by creation). */
static jf_ref damped_sine(void) {
    jf_ref a = P(0), b = P(1), x = X(0);
    jf_ref env = MUL(a, U(JF_OP_EXP, NEG(MUL(b, x))));
    jf_ref s = U(JF_OP_SIN, ADD(MUL(P(2), x), P(3)));
    jf_ref m = MUL(env, s);
    return ADD(m, P(4));
}

static void test_builtins(void) {
    const jf_builtin *b = jf_builtin_find("exp", 3);
    CHECK(b != NULL && b->op == JF_OP_EXP && b->arity == 1);
    b = jf_builtin_find("powxyz", 3); /* not NUL-terminated at len */
    CHECK(b != NULL && b->op == JF_OP_POW && b->arity == 2);
    b = jf_builtin_find("if", 2);
    CHECK(b != NULL && b->op == JF_OP_SELECT && b->arity == 3);
    CHECK(jf_builtin_find("pi", 2) == NULL);
    CHECK(jf_builtin_find("e", 1) == NULL);
    CHECK(jf_builtin_find("ex", 2) == NULL);
    const char *names[] = {"exp",  "log",  "log10", "sqrt", "cbrt", "pow",  "abs",   "sin",
                           "cos",  "tan",  "asin",  "acos", "atan", "atan2", "sinh", "cosh",
                           "tanh", "erf",  "erfc",  "min",  "max",  "hypot", "if",   "sign"};
    const char *shapes[] = {"gauss", "lorentz", "pvoigt"}; /* built by formula (test_shapes) */
    size_t n = 0;
    const jf_builtin *all = jf_builtin_all(&n);
    CHECK(n == sizeof names / sizeof names[0] + sizeof shapes / sizeof shapes[0]);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        b = jf_builtin_find(names[i], strlen(names[i]));
        CHECK(b != NULL && !b->shape && b->arity == jf_op_get_info(b->op)->arity);
    }
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        b = jf_builtin_find(shapes[i], strlen(shapes[i]));
        CHECK(b != NULL && b->shape && b->op == JF_OP_COUNT && b->arity <= JF_BUILTIN_MAX_ARGS);
    }
    for (size_t i = 0; i < n; i++)
        CHECK(jf_builtin_find(all[i].name, strlen(all[i].name)) == &all[i]);
    for (int op = 0; op < JF_OP_COUNT; op++)
        CHECK(jf_op_get_info((jf_op)op)->name != NULL);
}

static void test_hash_consing(void) {
    jf_ref a = P(0), b = P(1), x = X(0);
    CHECK(MUL(a, b) == MUL(b, a));
    CHECK(ADD(a, x) == ADD(x, a));
    CHECK(MUL(K(2), x) == MUL(x, K(2)));
    CHECK(B(JF_OP_MIN, a, b) == B(JF_OP_MIN, b, a));
    CHECK(B(JF_OP_HYPOT, a, b) == B(JF_OP_HYPOT, b, a));
    CHECK(B(JF_OP_EQ, a, b) == B(JF_OP_EQ, b, a));
    CHECK(B(JF_OP_LT, a, b) != B(JF_OP_LT, b, a));
    CHECK(SUB(a, b) != SUB(b, a));
    CHECK(K(0.0) != K(-0.0));
    CHECK(K(NAN) == K(NAN));
    CHECK(P(0) == a && X(0) == x && P(3) != P(4) && X(1) != P(1));

    /* building the damped sine twice gives the same root and no new nodes */
    jf_ref f1 = damped_sine();
    size_t n1 = jf_dag_size(D);
    jf_ref f2 = ADD(P(4), MUL(U(JF_OP_SIN, ADD(P(3), MUL(x, P(2)))),
                              MUL(U(JF_OP_EXP, NEG(MUL(x, b))), a)));
    CHECK(f1 == damped_sine());
    CHECK(f1 == f2);
    CHECK(jf_dag_size(D) == n1);

    /* creation order is evaluation order; depth as documented */
    for (jf_ref r = 0; r < jf_dag_size(D); r++) {
        const jf_node *nd = jf_dag_node(D, r);
        uint32_t depth = 0;
        for (unsigned i = 0; i < nd->arity; i++) {
            CHECK(nd->arg[i] < r);
            if (jf_dag_node(D, nd->arg[i])->depth > depth)
                depth = jf_dag_node(D, nd->arg[i])->depth;
        }
        CHECK(nd->depth == depth + 1);
    }
    CHECK(jf_dag_is_const(D, K(-0.0), -0.0));
    CHECK(!jf_dag_is_const(D, K(-0.0), 0.0));
    CHECK(!jf_dag_is_const(D, x, 0.0));
    CHECK(jf_dag_error(D) == JF_OK);
}

static void test_simplify(void) {
    jf_ref a = P(0), b = P(1), c = P(2), x = X(0), y = X(1);
    /* identities (each line: input → expected text) */
    TEXT(ADD(x, K(0)), "x");
    TEXT(ADD(K(0), x), "x");
    TEXT(ADD(x, K(-0.0)), "x");
    TEXT(SUB(x, K(0)), "x");
    TEXT(SUB(K(0), x), "-x");
    TEXT(MUL(x, K(1)), "x");
    TEXT(MUL(K(1), x), "x");
    TEXT(MUL(x, K(0)), "0");
    TEXT(MUL(K(0), U(JF_OP_LOG, x)), "0");
    TEXT(MUL(x, K(-1)), "-x");
    TEXT(DIV(x, K(1)), "x");
    TEXT(DIV(x, K(-1)), "-x");
    TEXT(DIV(K(0), x), "0");
    TEXT(NEG(NEG(x)), "x");
    TEXT(POW(x, K(1)), "x");
    TEXT(POW(x, K(0)), "1");
    TEXT(POW(K(1), x), "1");
    TEXT(SEL(K(1), a, b), "a");
    TEXT(SEL(K(0), a, b), "b");
    TEXT(SEL(K(NAN), a, b), "b");
    TEXT(SEL(x, a, a), "a");
    TEXT(ADD(a, NEG(b)), "a - b");
    TEXT(ADD(NEG(a), b), "b - a");
    TEXT(SUB(a, NEG(b)), "a + b");
    TEXT(MUL(NEG(a), b), "-a*b");
    TEXT(MUL(a, NEG(b)), "-a*b");
    TEXT(MUL(NEG(a), NEG(b)), "a*b");
    TEXT(DIV(NEG(a), b), "-a/b");
    TEXT(DIV(a, NEG(b)), "-a/b");
    TEXT(ADD(x, K(-2)), "x - 2");
    TEXT(SUB(x, K(-2)), "x + 2");
    TEXT(ADD(K(2), x), "x + 2");
    TEXT(MUL(x, K(2)), "2*x");
    TEXT(MUL(x, a), "a*x");
    TEXT(MUL(b, a), "a*b");
    TEXT(ADD(b, a), "a + b");
    TEXT(ADD(K(1), ADD(a, x)), "a + x + 1");
    TEXT(NEG(MUL(K(2), x)), "-2*x");
    TEXT(U(JF_OP_ABS, NEG(x)), "abs(x)");
    TEXT(U(JF_OP_ABS, U(JF_OP_ABS, x)), "abs(x)");
    TEXT(B(JF_OP_MIN, x, x), "x");
    TEXT(B(JF_OP_MAX, x, x), "x");
    CHECK(MUL(NEG(a), b) == NEG(MUL(a, b)));
    CHECK(NEG(MUL(K(2), x)) == MUL(K(-2), x));
    CHECK(MUL(K(2), NEG(x)) == MUL(K(-2), x));
    CHECK(ADD(x, K(0)) == x);
    /* value-changing rewrites are not done */
    TEXT(SUB(x, x), "x - x");
    TEXT(DIV(x, x), "x/x");
    TEXT(ADD(ADD(a, b), c), "a + b + c");
    TEXT(ADD(a, ADD(b, c)), "b + c + a"); /* canonical order: compound terms first */
    TEXT(SUB(a, ADD(b, c)), "a - (b + c)");
    TEXT(MUL(a, ADD(b, c)), "a*(b + c)");
    TEXT(MUL(SUB(x, x), y), "y*(x - x)");
    TEXT(DIV(SUB(x, x), y), "(x - x)/y");
    TEXT(B(JF_OP_LT, x, x), "x < x");
    /* the kept caveats: x*0 with x = Inf is folded to 0 only when x is not constant */
    TEXT(MUL(K(INFINITY), K(0)), "nan");
    CHECK(jf_dag_error(D) == JF_OK);
}

static void test_folding(void) {
    TEXT(ADD(K(2), K(3)), "5");
    TEXT(U(JF_OP_EXP, K(0)), "1");
    TEXT(POW(K(2), K(10)), "1024");
    TEXT(POW(K(2), K(-2)), "0.25");
    TEXT(POW(K(2), K(0.5)), "1.4142135623730951");
    TEXT(U(JF_OP_LOG, K(-1)), "nan");
    TEXT(DIV(K(1), K(0)), "inf");
    TEXT(DIV(K(-1), K(0)), "-inf");
    TEXT(DIV(K(1), K(3)), "0.3333333333333333");
    TEXT(B(JF_OP_LT, K(1), K(2)), "1");
    TEXT(B(JF_OP_GE, K(1), K(2)), "0");
    TEXT(B(JF_OP_MIN, K(NAN), K(3)), "3");
    TEXT(U(JF_OP_SIGN, K(-2.5)), "-1");
    TEXT(SEL(B(JF_OP_GT, K(2), K(1)), P(0), P(1)), "a");
    TEXT(MUL(ADD(K(1), K(2)), X(0)), "3*x");
    TEXT(U(JF_OP_SIN, K(0.5)), "0.479425538604203");
    /* folding computes with the interpreter's arithmetic (pow with a constant exponent: powi) */
    jf_ref r = POW(K(1.1), K(7));
    CHECK(jf_dag_is_const(D, r, jf_interp_op(JF_OP_POW, 1.1, 7, 0)));
    /* NaN constants intern by bit pattern */
    jf_ref n1 = U(JF_OP_LOG, K(-1)), n2 = U(JF_OP_LOG, K(-2));
    CHECK(n1 == n2);
    CHECK(jf_dag_node(D, n1)->op == JF_OP_CONST && isnan(jf_dag_node(D, n1)->value));
}

static void test_printing(void) {
    jf_ref a = P(0), b = P(1), c = P(2), x = X(0), y = X(1);
    TEXT(NEG(POW(x, K(2))), "-x^2");
    TEXT(POW(NEG(x), K(2)), "(-x)^2");
    TEXT(SUB(a, SUB(b, c)), "a - (b - c)");
    TEXT(SUB(SUB(a, b), c), "a - b - c");
    TEXT(DIV(a, MUL(b, c)), "a/(b*c)");
    TEXT(MUL(DIV(a, b), c), "c*(a/b)");
    TEXT(DIV(MUL(a, b), c), "a*b/c");
    jf_ref ab = DIV(a, b), cx = U(JF_OP_COS, x);
    TEXT(MUL(ab, cx), "a/b*cos(x)");
    TEXT(MUL(cx, ab), "a/b*cos(x)");
    TEXT(DIV(DIV(a, b), c), "a/b/c");
    TEXT(MUL(a, DIV(b, c)), "a*(b/c)");
    TEXT(POW(a, POW(b, c)), "a^b^c");
    TEXT(POW(POW(a, b), c), "(a^b)^c");
    TEXT(POW(x, K(-1)), "x^(-1)");
    TEXT(POW(x, NEG(a)), "x^(-a)");
    TEXT(POW(K(-2), x), "(-2)^x");
    TEXT(POW(MUL(a, x), K(2)), "(a*x)^2");
    TEXT(POW(U(JF_OP_EXP, x), K(0.5)), "exp(x)^0.5");
    TEXT(MUL(ADD(a, b), c), "c*(a + b)");
    TEXT(DIV(ADD(a, b), c), "(a + b)/c");
    TEXT(NEG(ADD(a, b)), "-(a + b)");
    TEXT(NEG(SUB(NEG(a), b)), "-(-a - b)");
    TEXT(SUB(NEG(a), b), "-a - b");
    TEXT(U(JF_OP_EXP, NEG(MUL(b, x))), "exp(-b*x)");
    TEXT(DIV(x, K(-2)), "x/(-2)");
    TEXT(MUL(K(-2), x), "-2*x");
    jf_ref q = DIV(K(-2), x), sy = U(JF_OP_SIN, y);
    TEXT(MUL(q, sy), "-2/x*sin(y)");
    TEXT(NEG(MUL(q, sy)), "-(-2/x*sin(y))");
    TEXT(SUB(a, MUL(q, sy)), "a - (-2/x*sin(y))");
    TEXT(SEL(B(JF_OP_LT, x, a), b, c), "if(x < a, b, c)");
    TEXT(U(JF_OP_SIGN, x), "sign(x)");
    TEXT(B(JF_OP_LT, B(JF_OP_LT, a, b), c), "(a < b) < c");
    TEXT(ADD(a, B(JF_OP_LT, b, c)), "(b < c) + a");
    TEXT(SUB(a, B(JF_OP_LT, b, c)), "a - (b < c)");
    TEXT(B(JF_OP_GT, x, K(-1)), "x > -1");
    jf_ref apb = ADD(a, b), cx2 = MUL(c, x);
    TEXT(B(JF_OP_NE, cx2, apb), "c*x != a + b");
    TEXT(NEG(B(JF_OP_LE, a, b)), "-(a <= b)");
    TEXT(B(JF_OP_ATAN2, y, NEG(x)), "atan2(y, -x)");
    TEXT(B(JF_OP_HYPOT, x, y), "hypot(x, y)");
    TEXT(K(0.1), "0.1");
    TEXT(K(1e300), "1e+300");
    TEXT(K(-0.0), "-0");
    TEXT(K(5e-324), "5e-324");
    TEXT(K(INFINITY), "inf");
    TEXT(K(-INFINITY), "-inf");
    TEXT(K(NAN), "nan");
    TEXT(SUB(x, K(INFINITY)), "x - inf");
    char *t = jf_dag_to_text(D, MUL(a, x), NULL, NULL);
    CHECK_STREQ(t, "p[0]*x[0]");
    free(t);
    /* every shortest form reads back to the same double */
    double vals[] = {0.1, 1.0 / 3, 2.0 / 3, 3.141592653589793, 1e-7, 123456789.125, 1.7976931348623157e308,
                     2.2250738585072014e-308, 0.30000000000000004};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        t = jf_dag_to_text(D, K(vals[i]), NULL, NULL);
        CHECK(t != NULL && strtod(t, NULL) == vals[i] && strlen(t) <= 24);
        free(t);
    }
    /* the process locale does not leak into the text */
    const char *comma_locales[] = {"de_DE.UTF-8", "de_DE", "fr_FR.UTF-8", "ru_RU.UTF-8"};
    for (size_t i = 0; i < sizeof comma_locales / sizeof comma_locales[0]; i++) {
        if (setlocale(LC_NUMERIC, comma_locales[i]) == NULL)
            continue;
        t = jf_dag_to_text(D, MUL(K(2.5), x), PN, VN);
        CHECK_STREQ(t, "2.5*x");
        free(t);
        setlocale(LC_NUMERIC, "C");
        break;
    }
    /* an exponentially large expansion of a shared DAG is refused, not attempted */
    jf_ref big = x;
    for (int i = 0; i < 40; i++)
        big = ADD(big, big);
    CHECK(jf_dag_to_text(D, big, PN, VN) == NULL);
    /* the limit is 16 MiB of text, wherever the buffer's growth happens to stand: 21 doublings
     * of x + x print 10485755 bytes, 22 print 20971515 */
    big = x;
    for (int i = 0; i < 21; i++)
        big = ADD(big, big);
    t = jf_dag_to_text(D, big, PN, VN);
    CHECK(t != NULL && strlen(t) == 10485755);
    free(t);
    t = jf_dag_to_text(D, ADD(big, big), PN, VN);
    CHECK(t == NULL);
    free(t);
}

static void test_derivatives(void) {
    jf_ref a = P(0), x = X(0);
    /* ∂(a*x)/∂a is exactly the node x, and the derivative w.r.t. an absent parameter is 0 */
    CHECK(jf_dag_diff(D, MUL(a, x), 0) == x);
    CHECK(jf_dag_diff(D, MUL(x, a), 0) == x);
    CHECK(jf_dag_is_const(D, jf_dag_diff(D, MUL(a, x), 1), 0.0));
    TEXT(jf_dag_diff(D, U(JF_OP_EXP, MUL(a, x)), 0), "x*exp(a*x)");
    TEXT(jf_dag_diff(D, POW(a, K(3)), 0), "3*a^2");
    TEXT(jf_dag_diff(D, POW(a, K(2)), 0), "2*a");
    TEXT(jf_dag_diff(D, U(JF_OP_ABS, a), 0), "sign(a)");
    TEXT(jf_dag_diff(D, U(JF_OP_SQRT, a), 0), "0.5/sqrt(a)");
    TEXT(jf_dag_diff(D, U(JF_OP_TAN, a), 0), "tan(a)^2 + 1");
    TEXT(jf_dag_diff(D, B(JF_OP_MIN, a, x), 0), "if(x < a, 0, if(a != a, 0, 1))");

    /* the damped sine: f and its partials share nodes */
    jf_ref f = damped_sine();
    TEXT(f, "a*exp(-b*x)*sin(c*x + d) + e");
    jf_ref roots[6] = {f};
    size_t sum = jf_dag_count_reachable(D, &f, 1), nf = sum;
    for (uint32_t k = 0; k < 5; k++) {
        roots[k + 1] = jf_dag_diff(D, f, k);
        CHECK(roots[k + 1] != JF_NOREF);
        sum += jf_dag_count_reachable(D, &roots[k + 1], 1);
    }
    size_t all = jf_dag_count_reachable(D, roots, 6);
    printf("damped sine: reachable(f) = %zu, sum over f and its 5 partials = %zu, "
           "reachable(f and partials together) = %zu\n",
           nf, sum, all);
    for (int k = 0; k < 5; k++) {
        char *t = jf_dag_to_text(D, roots[k + 1], PN, VN);
        printf("  d/d%s = %s\n", PN[k], t ? t : "(null)");
        free(t);
    }
    CHECK(all < sum);
    CHECK(all <= nf + 14); /* measured 12 extra nodes when written; generous bound */
    TEXT(roots[1], "exp(-b*x)*sin(c*x + d)");
    TEXT(roots[5], "1");
    CHECK(jf_dag_error(D) == JF_OK);
}

static void test_errors(void) {
    jf_dag *d = jf_dag_create(10);
    CHECK(d != NULL);
    jf_ref last = jf_dag_var(d, 0);
    size_t made = 1;
    for (int i = 0; i < 20 && last != JF_NOREF; i++) {
        last = jf_dag_unary(d, JF_OP_SIN, last);
        if (last != JF_NOREF)
            made++;
    }
    CHECK(last == JF_NOREF);
    CHECK(made == 10);
    CHECK(jf_dag_size(d) == 10);
    CHECK(jf_dag_error(d) == JF_ERR_LIMIT);
    /* existing nodes can still be found at the limit */
    CHECK(jf_dag_var(d, 0) == 0);
    /* JF_NOREF propagates without touching the DAG */
    CHECK(jf_dag_binary(d, JF_OP_ADD, JF_NOREF, 0) == JF_NOREF);
    CHECK(jf_dag_select(d, 0, JF_NOREF, 0) == JF_NOREF);
    CHECK(jf_dag_diff(d, JF_NOREF, 0) == JF_NOREF);
    CHECK(jf_dag_to_text(d, JF_NOREF, NULL, NULL) == NULL);
    jf_dag_free(d);
    jf_dag_free(NULL);

    d = jf_dag_create(0);
    CHECK(jf_dag_unary(d, JF_OP_ADD, jf_dag_var(d, 0)) == JF_NOREF); /* wrong arity */
    CHECK(jf_dag_error(d) == JF_ERR_ARG);
    jf_dag_free(d);

    /* derivatives of expressions deeper than the documented limit are refused */
    d = jf_dag_create(0);
    jf_ref r = jf_dag_param(d, 0);
    for (unsigned i = 0; i < JF_DAG_MAX_DEPTH + 10; i++)
        r = jf_dag_unary(d, JF_OP_SIN, r);
    CHECK(r != JF_NOREF && jf_dag_error(d) == JF_OK);
    CHECK(jf_dag_diff(d, r, 0) == JF_NOREF);
    CHECK(jf_dag_error(d) == JF_ERR_LIMIT);
    jf_dag_free(d);
}

int main(void) {
    D = jf_dag_create(0);
    if (D == NULL)
        return 1;
    test_builtins();
    test_hash_consing();
    test_simplify();
    test_folding();
    test_printing();
    test_derivatives();
    test_errors();
    jf_dag_free(D);
    return jf_test_finish();
}
