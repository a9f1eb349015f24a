/* End-to-end tests of `jitfit check`, `jitfit eval` and `jitfit diff` through the built
 * command: exit codes, exact JSON of eval, diagnostics on stderr. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

static int run(const char *args, char **out, char **err) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "JITFIT_CACHE_DIR=%s '%s' %s", getenv("JF_TEST_CACHE"), jf_test_cli(),
             args);
    return jf_test_run(cmd, out, err);
}

static void test_check(void) {
    char *out = NULL, *err = NULL;
    CHECK(run("check 'a*exp(-b*x)*sin(c*x+d)+e'", &out, &err) == 0);
    CHECK_CONTAINS(out, "variables (1): x");
    CHECK_CONTAINS(out, "parameters (5):\n  a\n  b\n  c\n  d\n  e\n");
    free(out);
    free(err);

    char *path = jf_test_tmpfile(".jf", "# decay\nparam A = 2 in [0, inf]\nparam k = 0.5\n"
                                        "var t\nsignal ~ A*exp(-k*t)\n");
    char args[512];
    snprintf(args, sizeof args, "check %s", path);
    CHECK(run(args, &out, &err) == 0);
    CHECK_CONTAINS(out, "response: signal");
    CHECK_CONTAINS(out, "variables (1): t");
    CHECK_CONTAINS(out, "  A = 2 in [0, inf]");
    CHECK_CONTAINS(out, "  k = 0.5\n");
    free(out);
    free(err);
    remove(path);
    free(path);

    /* a constant prints as the shortest text that reads back, without a needless exponent */
    CHECK(run("check 'a*x + 2.5E+3 + 100*x^2'", &out, &err) == 0);
    CHECK_CONTAINS(out, "model: y ~ a*x + 2500 + 100*x^2\n");
    free(out);
    free(err);
    CHECK(run("diff 'a*x^2 + 1e-7*a'", &out, &err) == 0);
    CHECK_STREQ(out, "d/da = x^2 + 1e-07\n");
    free(out);
    free(err);

    CHECK(run("check 'a*exq(-b*x)'", &out, &err) == 1);
    CHECK_CONTAINS(err, "<command line>:1:3: error: unknown function 'exq' (did you mean 'exp'?)");
    CHECK_CONTAINS(err, "    a*exq(-b*x)\n      ^^^\n");
    CHECK(out && out[0] == '\0');
    free(out);
    free(err);

    CHECK(run("check", &out, &err) == 2);
    free(out);
    free(err);
}

static void test_eval(void) {
    char *out = NULL, *err = NULL;
    CHECK(run("eval 'a*x^2+b' --params a=3,b=1 --at x=2 --json", &out, &err) == 0);
    CHECK_STREQ(out, "{\"value\": 13, \"gradient\": {\"a\": 4, \"b\": 1}}\n");
    free(out);
    free(err);

    /* Order of the gradient follows the model's parameters, not the --params list. */
    CHECK(run("eval 'b*sin(a*x)' --params a=0,b=2 --at x=0.5 --json", &out, &err) == 0);
    CHECK_STREQ(out, "{\"value\": 0, \"gradient\": {\"b\": 0, \"a\": 1}}\n");
    free(out);
    free(err);

    /* values that do not fit the model are usage errors, as fit's --p0 */
    CHECK(run("eval 'a*x' --params a=1,zz=2 --at x=1", &out, &err) == 2);
    CHECK_CONTAINS(err, "jitfit: eval: --params: the model has no parameter 'zz'");
    free(out);
    free(err);
    CHECK(run("eval 'a*x' --params a=1", &out, &err) == 2);
    CHECK_CONTAINS(err, "no value for variable 'x'");
    free(out);
    free(err);
    CHECK(run("eval 'a*x' --params a=abc --at x=1", &out, &err) == 2);
    CHECK_CONTAINS(err, "'abc' is not a number");
    free(out);
    free(err);
    CHECK(run("eval 'a*x' --params a=1 --at x=1 --backend gpu3", &out, &err) == 2);
    free(out);
    free(err);
}

static void test_diff(void) {
    char *out = NULL, *err = NULL;
    CHECK(run("diff 'a*x+b'", &out, &err) == 0);
    CHECK_STREQ(out, "d/da = x\nd/db = 1\n");
    free(out);
    free(err);
    CHECK(run("diff 'a*exp(-b*x)' --param a", &out, &err) == 0);
    CHECK_STREQ(out, "d/da = exp(-b*x)\n");
    free(out);
    free(err);
    CHECK(run("diff 'a*x' --param q", &out, &err) == 2); /* a usage error, as eval --params q=1 */
    CHECK_CONTAINS(err, "no parameter 'q'");
    free(out);
    free(err);
}

/* Texts print shared subexpressions in full and stop at 16 MiB: a derivative or a model over
 * that is said to be too long, not "out of memory", and check does not drop its line silently. */
static void test_long_text(void) {
    /* f = sin(sin(...sin(a*x))) 3000 deep: f's text is short, d/da's (a product of the
     * cosines of every level) about 18 MB */
    size_t cap = 64 * 3000, n = 0;
    char *text = malloc(cap), args[512], *out = NULL, *err = NULL;
    if (!CHECK(text != NULL)) return;
    n += (size_t)snprintf(text + n, cap - n, "let u0 = a*x\n");
    for (int i = 1; i <= 3000; i++)
        n += (size_t)snprintf(text + n, cap - n, "let u%d = sin(u%d)\n", i, i - 1);
    snprintf(text + n, cap - n, "y ~ u3000\n");
    char *path = jf_test_tmpfile(".jf", text);
    snprintf(args, sizeof args, "diff %s", path);
    CHECK(run(args, &out, &err) == 1);
    CHECK_CONTAINS(err, "d/da is too long to print");
    CHECK(err && !strstr(err, "out of memory"));
    free(out);
    free(err);
    remove(path);
    free(path);

    /* f = u24 with u_i = u_{i-1}*u_{i-1} + b: a small DAG whose text doubles 24 times */
    n = (size_t)snprintf(text, cap, "let u0 = a*x\n");
    for (int i = 1; i <= 24; i++)
        n += (size_t)snprintf(text + n, cap - n, "let u%d = u%d*u%d + b\n", i, i - 1, i - 1);
    snprintf(text + n, cap - n, "y ~ u24\n");
    path = jf_test_tmpfile(".jf", text);
    snprintf(args, sizeof args, "check %s", path);
    CHECK(run(args, &out, &err) == 0);
    CHECK_CONTAINS(out, "parameters (2):\n  a\n  b\n");
    CHECK_CONTAINS(err, "the model expression is too long to print");
    free(out);
    free(err);
    remove(path);
    free(path);
    free(text);
}

/* min/max at a tie of -0 and +0: C leaves fmin's answer open, and GCC's at -O2 differed from
 * the interpreter's; every backend now gives -0 for min, +0 for max */
static void test_signed_zero_ties(void) {
    static const char *const backends[] = {"interp", "c"};
    for (int b = 0; b < 2; b++) {
        char args[256], *out = NULL, *err = NULL;
        snprintf(args, sizeof args, "eval '1/min(x^2, a*x)' --params a=1 --at x=-0 --backend %s", backends[b]);
        CHECK(run(args, &out, &err) == 0);
        CHECK_CONTAINS(out, "value: -inf");
        free(out);
        free(err);
        snprintf(args, sizeof args, "eval '1/max(a*x, x^2)' --params a=1 --at x=-0 --backend %s", backends[b]);
        CHECK(run(args, &out, &err) == 0);
        CHECK_CONTAINS(out, "value: inf");
        free(out);
        free(err);
    }
}

/* `--` ends the options of every command, so a formula may start with '-' */
static void test_double_dash(void) {
    static const struct {
        const char *args, *want;
    } cases[] = {
        {"check -- '-a*x'", "parameters (1):\n  a\n"},
        {"eval --params a=2 --at x=3 -- '-a*x'", "value: -6\n"},
        {"diff -- '-a*x^2'", "d/da = -x^2"},
        {"codegen --no-prelude -- '-sin(a*x)'", "jf_jacobian_row"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *out = NULL, *err = NULL;
        if (!CHECK(run(cases[i].args, &out, &err) == 0)) fprintf(stderr, "  %s: %s", cases[i].args, err);
        CHECK_CONTAINS(out, cases[i].want);
        free(out);
        free(err);
    }
    /* without it such a formula is an unknown option, and a second model is refused */
    char *out = NULL, *err = NULL;
    CHECK(run("eval --params a=2 --at x=3 '-a*x'", &out, &err) == 2);
    CHECK_CONTAINS(err, "unknown option '-a*x'");
    free(out);
    free(err);
    CHECK(run("diff -- '-a*x' 'b*x'", &out, &err) == 2);
    CHECK_CONTAINS(err, "unexpected argument 'b*x'");
    free(out);
    free(err);
}

/* codegen --vars takes every name it is given: from the 65th on they were dropped and became
 * parameters of the model without a word (a fixed array of 64). */
static void test_codegen_many_vars(void) {
    char vars[1024] = "", model[1024] = "a*(0", args[2300];
    for (int i = 1; i <= 70; i++) {
        size_t n = strlen(vars), m = strlen(model);
        snprintf(vars + n, sizeof vars - n, "%sv%d", i > 1 ? "," : "", i);
        snprintf(model + m, sizeof model - m, "+v%d", i);
    }
    strcat(model, ")");
    snprintf(args, sizeof args, "codegen --no-prelude --vars %s '%s'", vars, model);
    char *out = NULL, *err = NULL;
    CHECK(run(args, &out, &err) == 0);
    CHECK_CONTAINS(out, "p[0]");
    CHECK(out && !strstr(out, "p[1]")); /* one parameter: a */
    CHECK_STREQ(err, "");
    free(out);
    free(err);
}

int main(void) {
    char dir[] = "/tmp/jf_cli_cacheXXXXXX";
    if (!mkdtemp(dir)) return 1;
    setenv("JF_TEST_CACHE", dir, 1);
    test_check();
    test_eval();
    test_diff();
    test_long_text();
    test_double_dash();
    test_signed_zero_ties();
    test_codegen_many_vars();
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return jf_test_finish();
}
