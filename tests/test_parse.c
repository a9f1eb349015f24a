/* Front-end tests through the public API (jf_model_compile): tables of texts that compile, with
 * the parameters, variables, response and expression they must produce; texts that evaluate
 * to known numbers (precedence and associativity, literals, builtins); and texts that must
 * fail, with the exact line, column and message of their first diagnostic.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/jitfit.h"
#include "tests/testlib.h"

/* Space-separated names of the model's parameters or variables. */
static void names_of(const jf_model *m, int params, char *buf, size_t cap) {
    size_t n = params ? jf_model_num_params(m) : jf_model_num_vars(m), used = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < n; k++) {
        const char *s = params ? jf_model_param_name(m, k) : jf_model_var_name(m, k);
        int w = snprintf(buf + used, cap - used, "%s%s", k ? " " : "", s);
        if (w < 0 || (size_t)w >= cap - used) break;
        used += (size_t)w;
    }
}

/* ---- texts that compile ---------------------------------------------------------------- */

typedef struct ok_case {
    const char *text;     /* the model text */
    const char *params;   /* expected parameter names, in order */
    const char *vars;     /* expected variable names */
    const char *response; /* expected response */
    const char *expr;     /* expected jf_model_expression_text, or NULL not to check */
    size_t warnings;      /* expected number of warnings */
} ok_case;

static const ok_case ok_cases[] = {
    {"a*exp(-b*x)*sin(c*x+d)+e", "a b c d e", "x", "y", "a*exp(-b*x)*sin(c*x + d) + e", 0},
    {"-x^2", "", "x", "y", "-x^2", 0},
    {"(-x)^2", "", "x", "y", "(-x)^2", 0},
    {"a-b-c", "a b c", "x", "y", "a - b - c", 1},
    {"a-(b-c)", "a b c", "x", "y", "a - (b - c)", 1},
    {"a/b/c", "a b c", "x", "y", "a/b/c", 1},
    {"a/(b/c)", "a b c", "x", "y", "a/(b/c)", 1},
    {"a^b^c", "a b c", "x", "y", "a^b^c", 1},
    {"(a^b)^c", "a b c", "x", "y", "(a^b)^c", 1},
    {"a^-x", "a", "x", "y", "a^(-x)", 0},
    {"c ? a : b ? d : e", "c a b d e", "x", "y", "if(c, a, if(b, d, e))", 1},
    {"(c ? a : b) ? d : e", "c a b d e", "x", "y", "if(if(c, a, b), d, e)", 1},
    {"x < a ? a : x", "a", "x", "y", "if(x < a, a, x)", 0},
    {"if(x > 0, a, b)", "a b", "x", "y", "if(x > 0, a, b)", 0},
    {"a*x + 1 <= b", "a b", "x", "y", "a*x + 1 <= b", 0},
    {".5*x + 1e-3", "", "x", "y", "0.5*x + 0.001", 0},
    {"atan2(a, x) + hypot(x, b) + min(a, b) + max(a, x)", "a b", "x", "y",
     NULL, 0},
    {"atan2(a, x)", "a", "x", "y", "atan2(a, x)", 0},
    {"pi*x + e", "e", "x", "y", "3.141592653589793*x + e", 0},
    {"a*exp(-b*x) + e", "a b e", "x", "y", NULL, 0},
    /* bare formulas: parameters in order of first appearance */
    {"b*x + a", "b a", "x", "y", "b*x + a", 0},
    {"let u = b*x\ny ~ a*u", "b a", "x", "y", "a*(b*x)", 0},
    {"let u = q*x\ny ~ a*x", "a", "x", "y", "a*x", 1},
    {"conc ~ k*x", "k", "x", "conc", "k*x", 0},
    /* model files */
    {"# a model file\nparam a = 2.0 in [0, inf]\nparam b = -1 in [-inf, 0]\nvar t\n"
     "let env = a*exp(b*t) ; y ~ env*t\n",
     "a b", "t", "y", NULL, 0},
    {"# CRLF\r\nparam a = 2.0 in [0, inf]\r\nvar t\r\ny ~ a*t\r\n", "a", "t", "y", "a*t", 0},
    {"param b = 1\nparam a = 2\ny ~ a*x + b", "b a", "x", "y", "a*x + b", 0},
    {"\n\n# only comments here\n;;\n  y ~ a*x;\n\n", "a", "x", "y", "a*x", 0},
    {"y ~ (a*x +\n     b)  # a newline inside parentheses is a space", "a b", "x", "y",
     "a*x + b", 0},
    {"var t, s\ny ~ a*t + b*s", "a b", "t s", "y", "a*t + b*s", 0},
    {"var t\nvar s\ny ~ a*t + b*s", "a b", "t s", "y", NULL, 0},
    {"let u = a*x\nlet v = u + b\ny ~ v*u", "a b", "x", "y", NULL, 0},
    {"param x = 1\ny ~ 2*x", "x", "", "y", "2*x", 0}, /* declaring x drops the default variable */
    {"param a = 1\nparam c = 3\ny ~ a*x", "a c", "x", "y", "a*x", 1},
    {"param a = +1.5 in [-1, +inf]\nparam b = -.5 in [-1, 1]\ny ~ a*x + b", "a b", "x", "y",
     NULL, 0},
    {"int + return + main + system + include", "int return main system include", "x", "y",
     NULL, 1},
    {"e*x", "e", "x", "y", "e*x", 0},
    {"a*x + 0*b", "a b", "x", "y", "a*x", 1}, /* b cancels: a warning, still a parameter */
    /* a model that does not depend on a variable: a warning (often a misspelt variable) */
    {"a*exp(-b*t)", "a b t", "x", "y", "a*exp(-b*t)", 1},
    {"a + 0*x", "a", "x", "y", "a", 1}, /* x cancels */
    {"var t, s\ny ~ a*t", "a", "t s", "y", "a*t", 1},
};

/* Where the warning about an unused variable points, and what it says. */
static void test_unused_variable(void) {
    static const struct {
        const char *text;
        int line, col;
        const char *msg;
    } cases[] = {
        {"a*exp(-b*t)", 1, 1,
         "the model does not depend on its variable 'x'; every other name in it is a parameter"},
        {"var t, s\ny ~ a*t", 1, 8, "the model does not depend on variable 's'"},
        {"# comment\ny ~ 2*a + b", 2, 5, "the model does not depend on its variable 'x'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        jf_model *m = NULL;
        jf_diagnostics *d = NULL;
        CHECK(jf_model_compile(cases[i].text, (size_t)-1, NULL, &m, &d) == JF_OK && m);
        if (CHECK(jf_diagnostics_count(d) == 1)) {
            CHECK(jf_diagnostic_severity(d, 0) == JF_SEVERITY_WARNING);
            CHECK(jf_diagnostic_line(d, 0) == cases[i].line);
            CHECK(jf_diagnostic_column(d, 0) == cases[i].col);
            CHECK_CONTAINS(jf_diagnostic_message(d, 0), cases[i].msg);
        }
        jf_diagnostics_free(d);
        jf_model_free(m);
    }
    /* the variable used, even only inside a let or a condition: no warning */
    static const char *const quiet[] = {"let u = b*x\ny ~ a*u", "x < a ? a : b",
                                        "var t\ny ~ a*t"};
    for (size_t i = 0; i < sizeof quiet / sizeof quiet[0]; i++) {
        jf_model *m = NULL;
        jf_diagnostics *d = NULL;
        CHECK(jf_model_compile(quiet[i], (size_t)-1, NULL, &m, &d) == JF_OK && m);
        CHECK(jf_diagnostics_count(d) == 0);
        jf_diagnostics_free(d);
        jf_model_free(m);
    }
}

static void test_ok_cases(void) {
    for (size_t i = 0; i < sizeof ok_cases / sizeof ok_cases[0]; i++) {
        const ok_case *c = &ok_cases[i];
        jf_model *m = NULL;
        jf_diagnostics *d = NULL;
        int st = jf_model_compile(c->text, (size_t)-1, NULL, &m, &d);
        if (!CHECK(st == JF_OK && m)) {
            fprintf(stderr, "case %zu: %s\n%s", i, c->text, d ? jf_diagnostics_text(d) : "");
            jf_diagnostics_free(d);
            continue;
        }
        char buf[512];
        names_of(m, 1, buf, sizeof buf);
        CHECK_STREQ(buf, c->params);
        names_of(m, 0, buf, sizeof buf);
        CHECK_STREQ(buf, c->vars);
        CHECK_STREQ(jf_model_response_name(m), c->response);
        if (c->expr) {
            char *t = jf_model_expression_text(m);
            CHECK_STREQ(t, c->expr);
            jf_free(t);
        }
        if (!CHECK(jf_diagnostics_count(d) == c->warnings))
            fprintf(stderr, "case %zu: %s\n%s", i, c->text, d ? jf_diagnostics_text(d) : "");
        for (size_t k = 0; k < jf_diagnostics_count(d); k++)
            CHECK(jf_diagnostic_severity(d, k) == JF_SEVERITY_WARNING);
        jf_diagnostics_free(d);
        jf_model_free(m);
    }
}

/* ---- texts with known values ---------------------------------------------------------------- */

typedef struct value_case {
    const char *text; /* a model in a, b and x */
    double a, b, x;   /* parameter values (by name) and x */
    double expected;  /* f(a, b, x) */
} value_case;

static const value_case value_cases[] = {
    {"2^3^2", 0, 0, 0, 512},
    {"-2^2", 0, 0, 0, -4},
    {"-x^2", 0, 0, 3, -9},
    {"2^-1", 0, 0, 0, 0.5},
    {"2^-1*4", 0, 0, 0, 2},
    {"2^-x^2", 0, 0, 1, 0.5},
    {"2*-x", 0, 0, 2, -4},
    {"- -x", 0, 0, 2, 2},
    {"+x", 0, 0, 2, 2},
    {"10-3-2", 0, 0, 0, 5},
    {"12/3/2", 0, 0, 0, 2},
    {"2+3*4", 0, 0, 0, 14},
    {"(2+3)*4", 0, 0, 0, 20},
    {"a-b-x", 10, 3, 2, 5},
    {"a/b/x", 12, 3, 2, 2},
    {"a^b^x", 2, 3, 2, 512},
    {"1 ? 2 : 0 ? 3 : 4", 0, 0, 0, 2},
    {"0 ? 2 : 0 ? 3 : 4", 0, 0, 0, 4},
    {"0 ? 2 : 1 ? 3 : 4", 0, 0, 0, 3},
    {"x > 1 ? a : b", 5, 6, 2, 5},
    {"x > 1 ? a : b", 5, 6, 0, 6},
    {"1 < 2", 0, 0, 0, 1},
    {"2 <= 1", 0, 0, 0, 0},
    {"3 == 3", 0, 0, 0, 1},
    {"3 != 3", 0, 0, 0, 0},
    {"2 > 1", 0, 0, 0, 1},
    {"1 >= 2", 0, 0, 0, 0},
    {"1 + 2 < 4", 0, 0, 0, 1},
    {"x < 2 ? 10 : 20", 0, 0, 1, 10},
    {".5", 0, 0, 0, 0.5},
    {"1.", 0, 0, 0, 1},
    {"1e-3", 0, 0, 0, 1e-3},
    {"2.5E+3", 0, 0, 0, 2500},
    {"1.5e2", 0, 0, 0, 150},
    {"0.1", 0, 0, 0, 0.1},
    {"atan2(1, 2)", 0, 0, 0, 0.46364760900080611},
    {"if(x > 1, 5, 6)", 0, 0, 2, 5},
    {"pow(2, 10)", 0, 0, 0, 1024},
    {"min(3, 4) + max(3, 4)", 0, 0, 0, 7},
    {"hypot(3, 4)", 0, 0, 0, 5},
    {"log10(1000) + cbrt(27) + abs(-2) + sqrt(16)", 0, 0, 0, 12},
    {"exp(0) + erf(0) + erfc(0) + log(1)", 0, 0, 0, 2},
    {"sinh(0) + cosh(0) + tanh(0) + sin(0) + cos(0) + tan(0)", 0, 0, 0, 2},
    {"asin(0) + acos(1) + atan(0)", 0, 0, 0, 0},
    {"pi", 0, 0, 0, 3.141592653589793},
    {"a*x + b", 2, 3, 5, 13},
    {"let u = a*x\nlet v = u + b\ny ~ v*u", 2, 3, 5, 130},
};

static void test_values(void) {
    for (size_t i = 0; i < sizeof value_cases / sizeof value_cases[0]; i++) {
        const value_case *c = &value_cases[i];
        jf_model *m = NULL;
        int st = jf_model_compile(c->text, (size_t)-1, NULL, &m, NULL);
        if (!CHECK(st == JF_OK && m)) {
            fprintf(stderr, "case %zu: %s\n", i, c->text);
            continue;
        }
        double p[2] = {0, 0};
        for (size_t k = 0; k < jf_model_num_params(m) && k < 2; k++)
            p[k] = strcmp(jf_model_param_name(m, k), "a") == 0 ? c->a : c->b;
        double v = NAN, x = c->x;
        CHECK(jf_model_num_params(m) <= 2);
        CHECK(jf_model_eval(m, p, &x, &v, NULL) == JF_OK);
        if (!CHECK_NEAR(v, c->expected, 1e-15)) fprintf(stderr, "case %zu: %s\n", i, c->text);
        jf_model_free(m);
    }
}

/* ---- declared values, bounds and options ---------------------------------------------------- */

static void test_declarations(void) {
    jf_model *m = NULL;
    const char *text = "param a = 2.0 in [0, inf]\nparam b = -1 in [-inf, 0]\n"
                       "param c = 0.25 in [-1, +1]\nparam d = 3\ny ~ a*x + b + c + d\n";
    CHECK(jf_model_compile(text, (size_t)-1, NULL, &m, NULL) == JF_OK);
    if (m) {
        double lo, hi;
        CHECK(jf_model_param_initial(m, 0) == 2.0);
        CHECK(jf_model_param_bounds(m, 0, &lo, &hi) == JF_OK && lo == 0 && isinf(hi) && hi > 0);
        CHECK(jf_model_param_initial(m, 1) == -1.0);
        CHECK(jf_model_param_bounds(m, 1, &lo, &hi) == JF_OK && isinf(lo) && lo < 0 && hi == 0);
        CHECK(jf_model_param_initial(m, 2) == 0.25);
        CHECK(jf_model_param_bounds(m, 2, &lo, &hi) == JF_OK && lo == -1 && hi == 1);
        CHECK(jf_model_param_initial(m, 3) == 3.0);
        CHECK(jf_model_param_bounds(m, 3, &lo, &hi) == JF_OK && isinf(lo) && isinf(hi));
    }
    jf_model_free(m);

    /* undeclared (implicit) parameters: no initial value, no bounds */
    CHECK(jf_model_compile("a*x", (size_t)-1, NULL, &m, NULL) == JF_OK);
    if (m) {
        double lo, hi;
        CHECK(isnan(jf_model_param_initial(m, 0)));
        CHECK(jf_model_param_bounds(m, 0, &lo, &hi) == JF_OK && lo < 0 && isinf(lo) && isinf(hi));
    }
    jf_model_free(m);

    /* variables named by the caller (data columns) when the text has no `var` */
    static const char *const cols[] = {"t", "s"};
    jf_model_options o = jf_model_options_default();
    o.vars = cols;
    o.nvars = 2;
    CHECK(jf_model_compile("a*t + b*s + x", (size_t)-1, &o, &m, NULL) == JF_OK);
    if (m) {
        char buf[128];
        names_of(m, 1, buf, sizeof buf);
        CHECK_STREQ(buf, "a b x");
        names_of(m, 0, buf, sizeof buf);
        CHECK_STREQ(buf, "t s");
    }
    jf_model_free(m);
    /* ... but a `var` statement decides */
    CHECK(jf_model_compile("var u\ny ~ a*u", (size_t)-1, &o, &m, NULL) == JF_OK);
    if (m) CHECK(jf_model_num_vars(m) == 1 && strcmp(jf_model_var_name(m, 0), "u") == 0);
    jf_model_free(m);
    /* the caller's names obey the rules of `var`: a NULL, a non-name, a keyword, a builtin,
     * pi or a repeated name is an argument error, not a silently different model (`pi` as a
     * variable hid the constant; a NULL entry turned x into a parameter) */
    static const struct {
        const char *names[2];
        size_t n;
        const char *message;
    } bad[] = {
        {{"pi", NULL}, 1, "variable name 'pi' given in the options is the builtin constant pi"},
        {{"exp", NULL}, 1, "variable name 'exp' given in the options is a builtin function"},
        {{"param", NULL}, 1, "variable name 'param' given in the options is a keyword"},
        {{"1x", NULL}, 1, "variable name 1 of 1 given in the options is not a name"},
        {{"x", "a\n"}, 2, "variable name 2 of 2 given in the options is not a name"},
        {{"", NULL}, 1, "variable name '' given in the options is empty"},
        {{"t", "t"}, 2, "variable name 't' given in the options is given twice"},
        {{NULL, NULL}, 1, "variable name 1 of 1 given in the options is NULL"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        jf_model_options ob = jf_model_options_default();
        ob.vars = bad[i].names;
        ob.nvars = bad[i].n;
        jf_diagnostics *dg = NULL;
        m = NULL;
        CHECK(jf_model_compile("a*x", (size_t)-1, &ob, &m, &dg) == JF_ERR_ARG);
        CHECK(m == NULL);
        if (CHECK(dg && jf_diagnostics_count(dg) >= 1))
            CHECK_CONTAINS(jf_diagnostic_message(dg, 0), bad[i].message);
        jf_diagnostics_free(dg);
    }
    jf_model_options on = jf_model_options_default();
    on.nvars = 2; /* vars NULL */
    CHECK(jf_model_compile("a*x", (size_t)-1, &on, &m, NULL) == JF_ERR_ARG);

    /* the number syntax is independent of the text's length argument: no NUL needed */
    const char text2[] = {'a', '*', 'x', '+', '1'};
    CHECK(jf_model_compile(text2, 3, NULL, &m, NULL) == JF_OK);
    if (m) {
        char *t = jf_model_expression_text(m);
        CHECK_STREQ(t, "a*x");
        jf_free(t);
    }
    jf_model_free(m);
}

/* ---- texts that fail ------------------------------------------------------------------------ */

typedef struct fail_case {
    const char *text;    /* the model text */
    int status;          /* expected status */
    int line, col;       /* position of the first diagnostic (0 0: none) */
    const char *message; /* a substring of its message */
} fail_case;

#define P JF_ERR_PARSE
#define L JF_ERR_LIMIT

static const fail_case fail_cases[] = {
    /* names and calls */
    {"y ~ a*exq(-b*x)", P, 1, 7, "unknown function 'exq' (did you mean 'exp'?)"},
    {"foo(x)", P, 1, 1, "unknown function 'foo'"},
    {"atan2(x)", P, 1, 1, "'atan2' takes 2 arguments, got 1"},
    {"exp(x, 2)", P, 1, 1, "'exp' takes 1 argument, got 2"},
    {"if(x, 1)", P, 1, 1, "'if' takes 3 arguments, got 2"},
    {"sin()", P, 1, 1, "'sin' takes 1 argument, got 0"},
    {"exp + x", P, 1, 1, "'exp' is a function; call it as exp(...)"},
    {"param a = 1\nparam amp = 2\ny ~ amq*x", P, 3, 5, "unknown name 'amq' (did you mean 'amp'?)"},
    {"param alpha = 1\ny ~ alpha*x + beta", P, 2, 15, "unknown name 'beta'"},
    {"param a = 1\ny ~ a(x)", P, 2, 5, "'a' is not a function"},
    {"pi(2)", P, 1, 1, "'pi' is not a function"},
    /* declarations */
    {"param sin = 1\ny ~ x", P, 1, 7,
     "'sin' is a builtin function and cannot be used as a parameter name"},
    {"param pi = 1\ny ~ x", P, 1, 7,
     "'pi' is a builtin constant and cannot be used as a parameter name"},
    {"var exp\ny ~ a", P, 1, 5,
     "'exp' is a builtin function and cannot be used as a variable name"},
    {"let log = 2\ny ~ a*x", P, 1, 5,
     "'log' is a builtin function and cannot be used as a let-binding name"},
    {"exp ~ a*x", P, 1, 1, "'exp' is a builtin function and cannot be used as a response name"},
    {"param a = 1\nparam a = 2\ny ~ a*x", P, 2, 7, "parameter 'a' is already declared"},
    {"var t, t\ny ~ a*t", P, 1, 8, "variable 't' is already declared"},
    {"let u = 1\nlet u = 2\ny ~ u*x", P, 2, 5, "let-binding 'u' is already defined"},
    {"param a = 1\nlet a = 2\ny ~ a*x", P, 2, 5, "'a' is already declared as a parameter"},
    {"var t\nparam t = 1\ny ~ t", P, 2, 7, "'t' is already declared as a variable"},
    {"let u = 2*x\nvar u\ny ~ u", P, 2, 5, "'u' is already declared as a let-binding"},
    {"param y = 1\ny ~ y*x", P, 2, 1, "'y' is already declared as a parameter"},
    {"var t\nt ~ a*x", P, 2, 1, "'t' is already declared as a variable"},
    {"y ~ a*x\nparam y = 1", P, 2, 7, "'y' is already declared as the response"},
    {"x ~ a*x", P, 1, 7, "'x' is the response; it cannot be used in an expression"},
    {"let u = v*x\nlet v = 2\ny ~ u", P, 1, 9, "let-binding 'v' is used before its definition"},
    {"y ~ u\nlet u = 2*x", P, 1, 5, "let-binding 'u' is used before its definition"},
    {"let u = u*x\ny ~ u", P, 1, 9, "let-binding 'u' refers to itself"},
    {"a*x\nb*x", P, 2, 1, "more than one model statement"},
    {"param a = 1", P, 0, 0, "no model expression"},
    {"", P, 0, 0, "no model expression"},
    {"# only a comment\n\n", P, 0, 0, "no model expression"},
    {"param a = 5 in [0, 1]\ny ~ a*x", P, 1, 11,
     "initial value 5 of parameter 'a' is outside its bounds [0, 1]"},
    {"param a = 0 in [1, 0]\ny ~ a*x", P, 1, 16, "empty bounds [1, 0] for parameter 'a'"},
    {"param a = 1 in [1, 1]\ny ~ a*x", P, 1, 16, "empty bounds [1, 1]"},
    {"param a = 1 in [inf, inf]\ny ~ a*x", P, 1, 16, "empty bounds [inf, inf]"},
    /* syntax */
    {"y ~ a*x)", P, 1, 8, "syntax error: unexpected ')', expected an operator or end of line"},
    {"y ~ (a*x", P, 1, 9, "syntax error: unexpected end of input, expected ')' or an operator"},
    /* end of input right after the last token, not past trailing blank lines and comments
     * (a mutant pointing at the text's end gives 4:1 and 2:1) */
    {"y ~ (a*x # scale\n\n  # more\n", P, 1, 9, "unexpected end of input, expected ')'"},
    {"y ~ a*x +\r\n", P, 1, 10, "unexpected end of line, expected an expression"},
    {"y ~ (a*x +\r\n \t\n", P, 1, 11, "unexpected end of input, expected an expression"},
    {"a +* b", P, 1, 4, "syntax error: unexpected '*', expected an expression"},
    {"y ~", P, 1, 4, "syntax error: unexpected end of input, expected an expression"},
    {"y ~ a*x +\nb", P, 1, 10, "syntax error: unexpected end of line, expected an expression"},
    {"f(a b)", P, 1, 5, "syntax error: unexpected name 'b'"},
    {"a ? b", P, 1, 6, "unexpected end of input, expected ':' or an operator"},
    {")", P, 1, 1, "syntax error: unexpected ')', expected a statement or end of line"},
    {"a < b < c", P, 1, 7, "syntax error: comparisons cannot be chained; add parentheses"},
    {"y = a*x", P, 1, 3, "syntax error: unexpected '=', expected '~', an operator or end of "
                         "line (write 'y ~ expr' to name the response)"},
    {"a**2", P, 1, 3, "unexpected '*', expected an expression (the power operator is '^')"},
    {"param", P, 1, 6, "syntax error: unexpected end of input, expected a name"},
    {"param a 1", P, 1, 9, "syntax error: unexpected number '1', expected '='"},
    {"param a = x", P, 1, 11, "syntax error: unexpected name 'x', expected a number"},
    {"param a = 1 in 0", P, 1, 16, "syntax error: unexpected number '0', expected '['"},
    {"param a = 1 in [0 1]", P, 1, 19, "unexpected number '1', expected ','"},
    {"param a = 1 in [0, x]", P, 1, 20, "unexpected name 'x', expected a number or 'inf'"},
    {"param a = 1 in [0,1", P, 1, 20, "unexpected end of input, expected ']'"},
    {"param a = inf", P, 1, 11, "unexpected 'inf', expected a number"},
    {"var 1", P, 1, 5, "syntax error: unexpected number '1', expected a name"},
    {"var a b", P, 1, 7, "unexpected name 'b', expected ',' or end of line"},
    {"let = 2", P, 1, 5, "unexpected '=', expected a name"},
    {"inf*x", P, 1, 1, "syntax error: unexpected 'inf'"},
    {"let*x", P, 1, 4, "syntax error: unexpected '*', expected a name"},
    {"param a = 1\n\n  y ~ a*)", P, 3, 9, "unexpected ')'"},
    {"param a = 1\r\ny ~ a*exq(x)\r\n", P, 2, 7, "unknown function 'exq'"},
    /* a line that ends too early ends at its CR: the column of the CR, not of the LF after it */
    {"param a = 1\r\ny ~ a*x +\r\n", P, 2, 10, "unexpected end of line, expected an expression"},
    {"y ~ a*x + # c\r\n", P, 1, 14, "unexpected end of line, expected an expression"},
    /* lexical */
    {"a $ b", P, 1, 3, "invalid character '$'"},
    {"a ! b", P, 1, 3, "invalid character '!'"},
    {"if x > x0 then a*x else b", P, 1, 4, "(a conditional is written if(c, a, b) or c ? a : b)"},
    {"y ~ a + if\tx", P, 1, 12, "(a conditional is written if(c, a, b) or c ? a : b)"},
    {"a & b", P, 1, 3, "invalid character '&'"},
    {"a \x7f b", P, 1, 3, "invalid character '\\x7f'"},
    {"\xce\xb8*x", P, 1, 1, "non-ASCII character"},
    {"1e999*x", P, 1, 1, "number out of range"},
    {"1e-999*x", P, 1, 1, "number out of range"},
    {"param a = 1e400\ny ~ a", P, 1, 11, "number out of range"},
    {"2x", P, 1, 1, "invalid number '2x' (write 2*x for a product)"},
    {"1e", P, 1, 1, "invalid number '1e'"},
    {"1e+", P, 1, 1, "invalid number '1e+': the exponent has no digits"},
    {"1.2.3", P, 1, 4, "unexpected number '.3'"},
    /* limits */
    {"((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((("
     "((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((("
     "((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((("
     "x",
     L, 1, 257, "expression nests deeper than 256 levels"},
};

static void test_fail_cases(void) {
    for (size_t i = 0; i < sizeof fail_cases / sizeof fail_cases[0]; i++) {
        const fail_case *c = &fail_cases[i];
        jf_model *m = (jf_model *)1;
        jf_diagnostics *d = NULL;
        int st = jf_model_compile(c->text, (size_t)-1, NULL, &m, &d);
        int ok = CHECK(st == c->status) & CHECK(m == NULL) & CHECK(jf_diagnostics_errors(d) >= 1);
        if (jf_diagnostics_count(d) >= 1) {
            ok &= CHECK(jf_diagnostic_severity(d, 0) == JF_SEVERITY_ERROR);
            ok &= CHECK(jf_diagnostic_line(d, 0) == c->line);
            ok &= CHECK(jf_diagnostic_column(d, 0) == c->col);
            ok &= CHECK_CONTAINS(jf_diagnostic_message(d, 0), c->message);
        }
        if (!ok) fprintf(stderr, "case %zu: %s\n%s", i, c->text, d ? jf_diagnostics_text(d) : "");
        jf_diagnostics_free(d);
    }
}

/* ---- details of particular diagnostics ------------------------------------------------------ */

/* Compiles text and returns the diagnostics (the model, if any, is freed). */
static jf_diagnostics *diags_of(const char *text, const jf_model_options *o, int *st) {
    jf_model *m = NULL;
    jf_diagnostics *d = NULL;
    *st = jf_model_compile(text, (size_t)-1, o, &m, &d);
    jf_model_free(m);
    return d;
}

static void test_notes_and_warnings(void) {
    int st;
    jf_diagnostics *d = diags_of("param a = 1\nparam a = 2\ny ~ a*x", NULL, &st);
    CHECK(st == JF_ERR_PARSE);
    CHECK(jf_diagnostics_count(d) == 2);
    CHECK(jf_diagnostic_severity(d, 1) == JF_SEVERITY_NOTE);
    CHECK(jf_diagnostic_line(d, 1) == 1 && jf_diagnostic_column(d, 1) == 7);
    CHECK_STREQ(jf_diagnostic_message(d, 1), "previous declaration is here");
    jf_diagnostics_free(d);

    d = diags_of("a*x\nb*x", NULL, &st);
    CHECK(jf_diagnostics_count(d) == 2);
    CHECK(jf_diagnostic_severity(d, 1) == JF_SEVERITY_NOTE);
    CHECK_STREQ(jf_diagnostic_message(d, 1), "the first model statement is here");
    jf_diagnostics_free(d);

    d = diags_of("let u = v*x\nlet v = 2\ny ~ u", NULL, &st);
    CHECK(jf_diagnostics_count(d) == 2);
    CHECK(jf_diagnostic_severity(d, 1) == JF_SEVERITY_NOTE);
    CHECK(jf_diagnostic_line(d, 1) == 2 && jf_diagnostic_column(d, 1) == 5);
    jf_diagnostics_free(d);

    /* A byte-order mark is invisible in an editor: columns and the caret line do not count it
     * (it was column 6 and a caret 3 places right of the '='). */
    d = diags_of("\357\273\277y = a*x", NULL, &st);
    CHECK(st == JF_ERR_PARSE);
    CHECK(jf_diagnostic_line(d, 0) == 1 && jf_diagnostic_column(d, 0) == 3);
    CHECK_CONTAINS(jf_diagnostics_text(d), "<model>:1:3: error: ");
    CHECK_CONTAINS(jf_diagnostics_text(d), "\n    y = a*x\n      ^\n");
    jf_diagnostics_free(d);
    /* with CRLF the caret of an error at the end of a line is under the end, and the CR is
     * not quoted (it was '?', the caret one place right) */
    d = diags_of("\357\273\277y ~ a*x +\r\n", NULL, &st);
    CHECK(st == JF_ERR_PARSE);
    CHECK(jf_diagnostic_line(d, 0) == 1 && jf_diagnostic_column(d, 0) == 10);
    CHECK_CONTAINS(jf_diagnostics_text(d), "\n    y ~ a*x +\n             ^\n");
    jf_diagnostics_free(d);
    /* only on the first line: a later line's columns are counted as always */
    d = diags_of("\357\273\277a*x\n+ b = 1", NULL, &st);
    CHECK(st == JF_ERR_PARSE);
    CHECK(jf_diagnostic_line(d, 0) == 2 && jf_diagnostic_column(d, 0) == 5);
    jf_diagnostics_free(d);

    /* an unused declared parameter is a warning, and stays a parameter */
    jf_model *m = NULL;
    d = NULL;
    st = jf_model_compile("param a = 1\nparam c = 3\ny ~ a*x", (size_t)-1, NULL, &m, &d);
    CHECK(st == JF_OK && m && jf_model_num_params(m) == 2);
    CHECK(jf_diagnostics_count(d) == 1 && jf_diagnostics_errors(d) == 0);
    CHECK(jf_diagnostic_severity(d, 0) == JF_SEVERITY_WARNING);
    CHECK(jf_diagnostic_line(d, 0) == 2 && jf_diagnostic_column(d, 0) == 7);
    CHECK_STREQ(jf_diagnostic_message(d, 0),
                "parameter 'c' is declared but not used by the model");
    jf_model_free(m);
    jf_diagnostics_free(d);

    /* a parameter used only by an unused let is unused too */
    d = diags_of("param a = 1\nparam c = 3\nlet u = c*x\ny ~ a*x", NULL, &st);
    CHECK(st == JF_OK && jf_diagnostics_count(d) == 2);
    CHECK_STREQ(jf_diagnostic_message(d, 0), "let-binding 'u' is defined but not used");
    CHECK_STREQ(jf_diagnostic_message(d, 1),
                "parameter 'c' is declared but not used by the model");
    jf_diagnostics_free(d);

    /* one error per bad line: the parser resumes at the next line */
    d = diags_of("y ~ a*)\nb +* c\nparam a = x\n", NULL, &st);
    CHECK(st == JF_ERR_PARSE && jf_diagnostics_errors(d) == 3);
    CHECK(jf_diagnostic_line(d, 0) == 1 && jf_diagnostic_line(d, 1) == 2 &&
          jf_diagnostic_line(d, 2) == 3);
    jf_diagnostics_free(d);

    /* an unknown name is reported once, however often it is used */
    d = diags_of("param a = 1\ny ~ a*q + q^2 + exp(q)", NULL, &st);
    CHECK(jf_diagnostics_count(d) == 1);
    jf_diagnostics_free(d);

    /* many errors stop at a cap instead of flooding */
    char *many = malloc(200 * 4 + 1);
    if (many) {
        for (int i = 0; i < 200; i++) memcpy(many + 4 * i, "a$\n\n", 4);
        many[800] = '\0';
        d = diags_of(many, NULL, &st);
        CHECK(st == JF_ERR_PARSE);
        CHECK(jf_diagnostics_count(d) < 60);
        CHECK_CONTAINS(jf_diagnostics_text(d), "too many errors");
        jf_diagnostics_free(d);
        free(many);
    }
}

static void test_limits(void) {
    int st;
    jf_model_options o = jf_model_options_default();
    o.max_source_bytes = 10;
    jf_diagnostics *d = diags_of("a*x + b*x + c", &o, &st);
    CHECK(st == JF_ERR_LIMIT);
    CHECK_STREQ(jf_diagnostic_message(d, 0), "model text is 13 bytes; the limit is 10 bytes");
    jf_diagnostics_free(d);

    o = jf_model_options_default();
    o.max_depth = 10;
    d = diags_of("((((((((((x))))))))))", &o, &st); /* 10 levels: fine */
    CHECK(st == JF_OK && jf_diagnostics_count(d) == 0);
    jf_diagnostics_free(d);
    d = diags_of("(((((((((((x)))))))))))", &o, &st);
    CHECK(st == JF_ERR_LIMIT);
    CHECK_STREQ(jf_diagnostic_message(d, 0), "expression nests deeper than 10 levels");
    CHECK(jf_diagnostic_column(d, 0) == 11);
    jf_diagnostics_free(d);
    d = diags_of("x^x^x^x^x^x^x^x^x^x^x^x", &o, &st); /* the exponent of ^ nests */
    CHECK(st == JF_ERR_LIMIT);
    jf_diagnostics_free(d);
    d = diags_of("- - - - - - - - - - - x", &o, &st);
    CHECK(st == JF_ERR_LIMIT);
    jf_diagnostics_free(d);
    d = diags_of("exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(exp(x)))))))))))", &o, &st);
    CHECK(st == JF_ERR_LIMIT);
    CHECK(jf_diagnostic_column(d, 0) == 44);
    jf_diagnostics_free(d);
    /* a flat chain does not nest */
    d = diags_of("x+x+x+x+x+x+x+x+x+x+x+x+x+x+x+x+x+x+x+x+x+x+x+x", &o, &st);
    CHECK(st == JF_OK);
    jf_diagnostics_free(d);

    o = jf_model_options_default();
    o.max_nodes = 6;
    d = diags_of("a*x + b*x + c*x", &o, &st);
    CHECK(st == JF_ERR_LIMIT);
    CHECK_CONTAINS(jf_diagnostic_message(d, 0), "model needs more than 6 expression nodes");
    jf_diagnostics_free(d);

    /* a long chain exceeds the DAG's depth limit: a located error, no deep recursion */
    size_t n = 5000;
    char *s = malloc(2 * n + 1);
    if (s) {
        for (size_t i = 0; i < n; i++) memcpy(s + 2 * i, "+x", 2);
        s[0] = ' ';
        s[2 * n] = '\0';
        d = diags_of(s, NULL, &st);
        CHECK(st == JF_ERR_LIMIT);
        CHECK_CONTAINS(jf_diagnostic_message(d, 0), "expression is deeper than 4096 levels");
        CHECK(jf_diagnostic_column(d, 0) == 2 * 4096 + 1);
        jf_diagnostics_free(d);
        free(s);
    }

    /* the variable limit */
    s = malloc(300 * 8 + 64);
    if (s) {
        size_t k = 0;
        k += (size_t)sprintf(s + k, "var ");
        for (int i = 0; i < 300; i++) k += (size_t)sprintf(s + k, "%sv%d", i ? ", " : "", i);
        k += (size_t)sprintf(s + k, "\ny ~ a");
        d = diags_of(s, NULL, &st);
        CHECK(st == JF_ERR_LIMIT);
        CHECK_CONTAINS(jf_diagnostic_message(d, 0), "more than 256 variables");
        jf_diagnostics_free(d);
        free(s);
    }
    /* 4097 parameters, each used in its own let and combined pairwise so depth stays small */
    size_t cap = 4097 * 40 + 4096 * 40;
    s = malloc(cap);
    if (s) {
        size_t k = 0;
        size_t level = 0, count = 4097;
        for (size_t i = 0; i < count; i++) k += (size_t)sprintf(s + k, "let t0_%zu = p%zu\n", i, i);
        while (count > 1) {
            size_t next = (count + 1) / 2;
            for (size_t i = 0; i < next; i++) {
                if (2 * i + 1 < count)
                    k += (size_t)sprintf(s + k, "let t%zu_%zu = t%zu_%zu + t%zu_%zu\n", level + 1,
                                         i, level, 2 * i, level, 2 * i + 1);
                else
                    k += (size_t)sprintf(s + k, "let t%zu_%zu = t%zu_%zu\n", level + 1, i, level,
                                         2 * i);
            }
            count = next;
            level++;
        }
        k += (size_t)sprintf(s + k, "y ~ t%zu_0\n", level);
        if (CHECK(k < cap)) {
            d = diags_of(s, NULL, &st);
            CHECK(st == JF_ERR_LIMIT);
            CHECK_CONTAINS(jf_diagnostic_message(d, 0), "the model has more than 4096 parameters");
            jf_diagnostics_free(d);
        }
        free(s);
    }
}

/* ---- printed derivatives are models ------------------------------------------------------- */

/* jf_model_derivative_text prints DSL: compiled again as a bare formula it gives the derivative's
 * values (parameters matched by name; a parameter the derivative lost is simply absent). abs's
 * derivative printed sign(), which was no DSL function. */
static void test_derivative_text_round_trip(void) {
    static const char *const models[] = {
        "abs(a)*x",          "a*abs(x - b)",        "min(a*x, b) + max(b, x)",
        "if(x > a, a*x, b)", "a*x^b + sqrt(b*x^2)", "hypot(a*x, b) + atan2(x, a)*b",
        "a*sign(x - b)",     "exp(-a*x)*sin(b*x)",  "log(a + x^2)/b",
    };
    static const double xs[] = {-1.7, 0.3, 2.5};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        jf_model *m = NULL;
        if (!CHECK(jf_model_compile(models[i], (size_t)-1, NULL, &m, NULL) == JF_OK)) continue;
        size_t np = jf_model_num_params(m);
        double p[4] = {1.3, 0.7, 0, 0}, grad[4], value;
        for (size_t k = 0; k < np; k++) {
            char *t = jf_model_derivative_text(m, k);
            jf_model *dm = NULL;
            jf_diagnostics *dg = NULL;
            if (!CHECK(t && jf_model_compile(t, (size_t)-1, NULL, &dm, &dg) == JF_OK))
                fprintf(stderr, "  d/d%s of %s printed as %s: %s\n", jf_model_param_name(m, k),
                        models[i], t ? t : "(null)", dg ? jf_diagnostics_text(dg) : "");
            for (size_t j = 0; dm && j < sizeof xs / sizeof *xs; j++) {
                double dp[4] = {0, 0, 0, 0}, dv, dgrad[4];
                for (size_t q = 0; q < jf_model_num_params(dm); q++) {
                    long at = jf_model_param_index(m, jf_model_param_name(dm, q));
                    CHECK(at >= 0);
                    dp[q] = at >= 0 ? p[at] : NAN;
                }
                CHECK(jf_model_eval(m, p, &xs[j], &value, grad) == JF_OK);
                CHECK(jf_model_eval(dm, dp, &xs[j], &dv, dgrad) == JF_OK);
                if (!CHECK_NEAR(dv, grad[k], 1e-14))
                    fprintf(stderr, "  d/d%s of %s at x = %g\n", jf_model_param_name(m, k),
                            models[i], xs[j]);
            }
            jf_model_free(dm);
            jf_diagnostics_free(dg);
            jf_free(t);
        }
        jf_model_free(m);
    }
}

/* ---- model files ------------------------------------------------------------------------- */

/* jf_model_compile_file: a file compiles as its text does, its diagnostics name the path
 * unless the options name the source, and a file that cannot be read is JF_ERR_IO with the
 * reason (a directory opens but cannot be read: the reason was missing). */
static void test_compile_file(void) {
    char *path = jf_test_tmpfile(".jf", "param a = 2\nparam k = 0.5\ny ~ a*exp(-k*x)\n");
    char *bad = jf_test_tmpfile(".jf", "param a = 2\ny ~ a*exq(x)\n");
    if (!CHECK(path && bad)) return;
    jf_model *m = NULL;
    jf_diagnostics *d = NULL;
    CHECK(jf_model_compile_file(path, NULL, &m, &d) == JF_OK && m && !d);
    CHECK(jf_model_num_params(m) == 2 && jf_model_param_initial(m, 1) == 0.5);
    jf_model_free(m);

    CHECK(jf_model_compile_file(bad, NULL, &m, &d) == JF_ERR_PARSE && !m);
    char where[300];
    snprintf(where, sizeof where, "%s:2:7: error: unknown function 'exq'", bad);
    CHECK_CONTAINS(jf_diagnostics_text(d), where);
    jf_diagnostics_free(d);
    jf_model_options o = jf_model_options_default();
    o.source_name = "decay.jf";
    CHECK(jf_model_compile_file(bad, &o, &m, &d) == JF_ERR_PARSE);
    CHECK_CONTAINS(jf_diagnostics_text(d), "decay.jf:2:7: error:");
    jf_diagnostics_free(d);

    CHECK(jf_model_compile_file("/nonexistent/model.jf", NULL, &m, &d) == JF_ERR_IO && !m);
    CHECK(jf_diagnostics_errors(d) == 1 && jf_diagnostic_line(d, 0) == 0);
    CHECK_STREQ(jf_diagnostic_message(d, 0), "cannot open model file: No such file or directory");
    jf_diagnostics_free(d);
    CHECK(jf_model_compile_file("/tmp", NULL, &m, &d) == JF_ERR_IO && !m);
    CHECK_STREQ(jf_diagnostic_message(d, 0), "cannot read model file: Is a directory");
    CHECK_CONTAINS(jf_diagnostics_text(d), "/tmp: error: cannot read model file");
    jf_diagnostics_free(d);
    CHECK(jf_model_compile_file("/tmp", NULL, &m, NULL) == JF_ERR_IO && !m);
    CHECK(jf_model_compile_file(NULL, NULL, &m, &d) == JF_ERR_ARG && !m && !d);
    remove(path);
    remove(bad);
    free(path);
    free(bad);
}

int main(void) {
    test_ok_cases();
    test_unused_variable();
    test_values();
    test_declarations();
    test_fail_cases();
    test_notes_and_warnings();
    test_limits();
    test_derivative_text_round_trip();
    test_compile_file();
    return jf_test_finish();
}
