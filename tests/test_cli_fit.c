/* End-to-end tests of `jitfit fit` through the built command: the bundled damped-sine example
 * against scipy's answer, the JSON report (validated by a small JSON checker, then read key by
 * key), the effect of --p0/--bounds/--sigma/--loss/--max-nfev/--backend, the kernel cache across
 * two processes, every bad-data case (exit 1 and its message) and usage errors (exit 2).
 *
 * Every run gets a private JITFIT_CACHE_DIR so tests neither read nor pollute the user's cache.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/testlib.h"

static char cache_dir[] = "/tmp/jf_test_cacheXXXXXX";
static char *tmp_paths[64];
static size_t ntmp;

static const char *tmp(const char *text) {
    char *p = jf_test_tmpfile(".csv", text);
    /* full slots fail here, not as leaks in the sanitizer build only */
    if (p && CHECK(ntmp < sizeof tmp_paths / sizeof tmp_paths[0])) tmp_paths[ntmp++] = p;
    return p;
}

/* Runs `jitfit fit ARGS` with the private cache; returns the exit status. */
static int fit(const char *args, char **out, char **err) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "JITFIT_CACHE_DIR='%s' '%s' fit %s", cache_dir, jf_test_cli(),
             args);
    return jf_test_run(cmd, out, err);
}

#define EXAMPLE_JF "'" JF_SOURCE_DIR "/examples/damped_sine.jf'"
#define EXAMPLE_CSV "'" JF_SOURCE_DIR "/examples/damped_sine.csv'"

/* ---- a minimal JSON checker: accepts exactly the JSON grammar (RFC 8259), no extensions ---- */

static const char *ws(const char *p) {
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') p++;
    return p;
}

static const char *json_value(const char *p, int depth);

static const char *json_str(const char *p) {
    if (*p++ != '"') return NULL;
    while (*p && *p != '"') {
        if ((unsigned char)*p < 0x20) return NULL;
        if (*p == '\\') {
            p++;
            if (*p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!strchr("0123456789abcdefABCDEF", p[i]) || !p[i]) return NULL;
                p += 4;
            } else if (!*p || !strchr("\"\\/bfnrt", *p)) {
                return NULL;
            }
        }
        p++;
    }
    return *p == '"' ? p + 1 : NULL;
}

static const char *json_num(const char *p) {
    if (*p == '-') p++;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') while (*p >= '0' && *p <= '9') p++;
    else return NULL;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9')) return NULL;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return NULL;
        while (*p >= '0' && *p <= '9') p++;
    }
    return p;
}

static const char *json_value(const char *p, int depth) {
    if (!p || depth > 64) return NULL;
    p = ws(p);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        p = ws(p + 1);
        if (*p == close) return p + 1;
        for (;;) {
            if (close == '}') {
                p = json_str(ws(p));
                if (!p) return NULL;
                p = ws(p);
                if (*p++ != ':') return NULL;
            }
            p = json_value(p, depth + 1);
            if (!p) return NULL;
            p = ws(p);
            if (*p == close) return p + 1;
            if (*p++ != ',') return NULL;
        }
    }
    if (*p == '"') return json_str(p);
    if (strncmp(p, "true", 4) == 0) return p + 4;
    if (strncmp(p, "false", 5) == 0) return p + 5;
    if (strncmp(p, "null", 4) == 0) return p + 4;
    return json_num(p);
}

/* 1 when s is one JSON value and nothing else but whitespace. */
static int json_valid(const char *s) {
    const char *p = s ? json_value(s, 0) : NULL;
    return p && *ws(p) == '\0';
}

/* The number after `"key": ` (the first occurrence at or after from); NaN for null/absent. */
static double json_number_at(const char *from, const char *key) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = from ? strstr(from, pat) : NULL;
    if (!p) return NAN;
    p += strlen(pat);
    if (strncmp(p, "null", 4) == 0) return NAN;
    return strtod(p, NULL);
}

static double json_number(const char *json, const char *key) { return json_number_at(json, key); }

/* The "value" (or another field) of the parameter called name in "params". */
static double json_param(const char *json, const char *name, const char *field) {
    char pat[128];
    snprintf(pat, sizeof pat, "{\"name\": \"%s\"", name);
    const char *p = json ? strstr(json, pat) : NULL;
    return p ? json_number_at(p, field) : NAN;
}

/* ---------------------------------------------------------------------------------------- */

/* scipy 1.10 curve_fit (lm) on examples/damped_sine.csv from [1.5, 0.2, 1.45, 0, 0]. */
static const char *const names[] = {"a", "b", "c", "d", "e"};
static const double scipy_p[] = {2.01802273, 0.25658306, 1.50626509, 0.29488582, 0.50181374};
static const double scipy_se[] = {0.03853251, 0.00691838, 0.00676879, 0.01938025, 0.00593416};
/* ... and with sigma=column sigma, absolute_sigma=True. */
static const double scipy_ps[] = {2.00713738, 0.25440594, 1.50483405, 0.29859049, 0.50445492};
static const double scipy_ses[] = {0.02650346, 0.00541756, 0.00515055, 0.01292788, 0.00525052};
static const double truth[] = {2.0, 0.25, 1.5, 0.3, 0.5};

static void test_example(void) {
    char *out = NULL, *err = NULL;
    int rc = fit(EXAMPLE_JF " " EXAMPLE_CSV, &out, &err);
    CHECK(rc == 0);
    /* the status line says "converged" once (the message's own "converged: " is dropped) */
    CHECK_CONTAINS(out, "  status         converged (");
    CHECK(out && !strstr(out, "): converged: "));
    CHECK_CONTAINS(out, "std. error");
    CHECK_CONTAINS(out, "correlation");
    CHECK_CONTAINS(out, "R^2");
    /* No line of the report ends in a blank (the correlation matrix's rows did: the slot of the
     * '*' flag after the diagonal). */
    CHECK(out && !strstr(out, " \n"));
    if (rc != 0) fprintf(stderr, "stderr: %s\n", err ? err : "");
    free(out);
    free(err);

    /* Correlation headers are never cut: names longer than 8 characters widen the columns
     * (amplitude_1 and amplitude_2 both read "amplitud"), and each value ends under the end of
     * its name. */
    char args[512];
    snprintf(args, sizeof args, "'amplitude_1*x+amplitude_2*x^2+c' '%s'",
             tmp("x,y\n1,2.1\n2,3.9\n3,6.2\n4,7.9\n5,10.1\n"));
    CHECK(fit(args, &out, &err) == 0);
    const char *head = out ? strstr(out, "\n  correlation\n") : NULL;
    CHECK(head != NULL);
    if (head) {
        head = strchr(head + 1, '\n') + 1;
        const char *row = strstr(head, "\n  amplitude_2 ");
        const char *a1 = strstr(head, " amplitude_1 "), *a2 = strstr(head, " amplitude_2 ");
        CHECK(row && a1 && a2 && a1 < row && a2 < row);
        /* the row's first value ends one column (the flag's) before "amplitude_1" does */
        if (row && a1) {
            row += 1;
            size_t end1 = (size_t)(a1 + strlen(" amplitude_1") - head);
            CHECK(strlen(row) > end1 && row[end1 - 2] >= '0' && row[end1 - 2] <= '9' &&
                  row[end1 - 1] == '*');
        }
    }
    free(out);
    free(err);

    rc = fit("--json " EXAMPLE_JF " " EXAMPLE_CSV, &out, &err);
    CHECK(rc == 0);
    CHECK(json_valid(out));
    CHECK_CONTAINS(out, "\"success\": true");
    CHECK_CONTAINS(out, "\"backend\": \"");
    CHECK_CONTAINS(out, "\"cache\": \"");
    CHECK_CONTAINS(out, "\"timing_ms\": {");
    CHECK_CONTAINS(out, "\"covariance\": [");
    CHECK_CONTAINS(out, "\"correlation\": [");
    CHECK_CONTAINS(out, "\"chi2\": null");
    CHECK(json_number(out, "n") == 200);
    CHECK(json_number(out, "dof") == 195);
    double st = json_number(out, "status");
    CHECK(st >= 1 && st <= 4);
    CHECK(json_number(out, "nfev") >= 1);
    CHECK_NEAR(json_number(out, "r_squared"), 0.96947417, 1e-6); /* numpy at scipy's optimum */
    CHECK_NEAR(json_number(out, "ssr"), 1.3116122, 1e-6);
    CHECK_NEAR(json_number(out, "cost"), 0.5 * json_number(out, "ssr"), 1e-12);
    for (size_t k = 0; k < 5; k++) {
        double v = json_param(out, names[k], "value"), se = json_param(out, names[k], "stderr");
        CHECK_NEAR(v, scipy_p[k], 1e-5);
        CHECK_NEAR(se, scipy_se[k], 1e-3 * scipy_se[k]);
        CHECK(fabs(v - truth[k]) < 4 * se);
    }
    double total = json_number(out, "total");
    CHECK(total >= 0 && isfinite(total));
    free(out);
    free(err);

    /* With the bundled standard deviations, as scipy with absolute_sigma=True. */
    rc = fit("--json --sigma sigma --absolute-sigma " EXAMPLE_JF " " EXAMPLE_CSV, &out, &err);
    CHECK(rc == 0);
    CHECK(json_valid(out));
    CHECK_CONTAINS(out, "\"sigma\": \"sigma\"");
    CHECK_CONTAINS(out, "\"absolute_sigma\": true");
    for (size_t k = 0; k < 5; k++) {
        CHECK_NEAR(json_param(out, names[k], "value"), scipy_ps[k], 1e-5);
        CHECK_NEAR(json_param(out, names[k], "stderr"), scipy_ses[k], 1e-3 * scipy_ses[k]);
    }
    double chi2 = json_number(out, "chi2"), red = json_number(out, "reduced_chi2");
    CHECK(chi2 > 0 && isfinite(chi2));
    CHECK_NEAR(red, chi2 / 195, 1e-12);
    CHECK(red > 0.7 && red < 1.4);
    CHECK_NEAR(json_number(out, "ssr"), chi2, 1e-12);
    free(out);
    free(err);

    /* Human report with sigma shows the chi-square lines. */
    rc = fit("--sigma sigma " EXAMPLE_JF " " EXAMPLE_CSV, &out, &err);
    CHECK(rc == 0);
    CHECK_CONTAINS(out, "reduced chi2");
    free(out);
    free(err);
}

static void test_options(void) {
    char *out = NULL, *err = NULL;
    /* --p0 overrides the model file's starting values (and is reported back). */
    int rc = fit("--json --p0 'a=1.8, c=1.52' " EXAMPLE_JF " " EXAMPLE_CSV, &out, &err);
    CHECK(rc == 0);
    CHECK(json_param(out, "a", "initial") == 1.8);
    CHECK(json_param(out, "b", "initial") == 0.2);
    CHECK(json_param(out, "c", "initial") == 1.52);
    CHECK_NEAR(json_param(out, "a", "value"), scipy_p[0], 1e-5);
    free(out);
    free(err);

    /* --bounds keeps e above its unconstrained optimum: it ends on the bound, marked. */
    rc = fit("--json --bounds e=0.6:1 --p0 e=0.7 " EXAMPLE_JF " " EXAMPLE_CSV, &out, &err);
    CHECK(rc == 0);
    CHECK(json_valid(out));
    CHECK_NEAR(json_param(out, "e", "value"), 0.6, 1e-6);
    CHECK_CONTAINS(out, "\"at_bound\": \"lower\"");
    free(out);
    free(err);
    rc = fit("--bounds e=0.6: --p0=e=0.7 " EXAMPLE_JF " " EXAMPLE_CSV, &out, &err);
    CHECK(rc == 0);
    CHECK_CONTAINS(out, "at lower bound");
    free(out);
    free(err);

    /* A budget too small to converge: exit 1, but the result is still printed. */
    rc = fit("--json --max-nfev 2 " EXAMPLE_JF " " EXAMPLE_CSV, &out, &err);
    CHECK(rc == 1);
    CHECK(json_valid(out));
    CHECK_CONTAINS(out, "\"success\": false");
    CHECK_CONTAINS(out, "\"status_name\": \"max_nfev\"");
    CHECK_CONTAINS(err, "did not converge");
    free(out);
    free(err);

    /* Tight and loose tolerances both converge to scipy's answer within their accuracy. */
    rc = fit("--json --ftol 1e-12 --xtol 1e-12 --gtol 1e-12 " EXAMPLE_JF " " EXAMPLE_CSV, &out,
             &err);
    CHECK(rc == 0 || rc == 1);
    CHECK_NEAR(json_param(out, "b", "value"), scipy_p[1], 1e-5);
    free(out);
    free(err);

    /* The interpreter backend gives the same fit, and caches nothing. */
    rc = fit("--json --backend interp --threads 1 " EXAMPLE_JF " " EXAMPLE_CSV, &out, &err);
    CHECK(rc == 0);
    CHECK_CONTAINS(out, "\"backend\": \"interp\"");
    CHECK_CONTAINS(out, "\"cache\": \"none\"");
    CHECK_NEAR(json_param(out, "c", "value"), scipy_p[2], 1e-5);
    free(out);
    free(err);

    /* --precision: single is a GPU setting; on the CPU the fit is the fp64 one plus a warning */
    rc = fit("--json --device cpu --precision single " EXAMPLE_JF " " EXAMPLE_CSV, &out, &err);
    CHECK(rc == 0);
    CHECK_CONTAINS(out, "single precision applies to GPU fits");
    CHECK_CONTAINS(out, "\"host_syncs\": 0");
    CHECK_NEAR(json_param(out, "c", "value"), scipy_p[2], 1e-5);
    free(out);
    free(err);
    rc = fit("--precision half " EXAMPLE_JF " " EXAMPLE_CSV, &out, &err);
    CHECK(rc == 2);
    CHECK_CONTAINS(err, "unknown precision 'half' (use double or single)");
    free(out);
    free(err);

    /* -v: one line per iteration on stderr; stdout stays one JSON object. */
    rc = fit("-v --json " EXAMPLE_JF " " EXAMPLE_CSV, &out, &err);
    CHECK(rc == 0);
    CHECK(json_valid(out));
    CHECK_CONTAINS(err, "iteration");
    CHECK_CONTAINS(err, "gain ratio");
    CHECK_CONTAINS(err, "damping");
    size_t lines = 0;
    for (const char *p = err; p && *p; p++) lines += *p == '\n';
    CHECK(lines >= 3);
    free(out);
    free(err);

    /* A bare formula whose variable is the data's column t, read from standard input, with the
     * response chosen by --y and whitespace-separated columns. */
    const char *lin = tmp("# line\n t   obs\n0 1.1\n1 2.9\n2 5.1\n3 7.0\n4 8.9\n5 11.1\n");
    char args[4096];
    snprintf(args, sizeof args, "--json --y obs 'a*t + b' - < '%s'", lin);
    rc = fit(args, &out, &err);
    CHECK(rc == 0);
    CHECK_NEAR(json_param(out, "a", "value"), 1.9971428571428571, 1e-7);
    CHECK_NEAR(json_param(out, "b", "value"), 1.0238095238095237, 1e-7);
    CHECK_CONTAINS(out, "\"response\": \"obs\"");
    /* the first reading (variable x, unused) is not the one kept: its warning is not printed;
     * a note says how the formula was read */
    CHECK(!err || !strstr(err, "warning"));
    CHECK_CONTAINS(err, "note: the data have no column 'x'; the model's variable: t (columns");
    if (rc != 0) fprintf(stderr, "stderr: %s\n", err ? err : "");
    free(out);
    free(err);

    /* The same formula on data whose variable column is x: t is a parameter, and a warning
     * (with the formula under a caret) says the model does not depend on x. */
    const char *linx = tmp("x,y\n0,1.1\n1,2.9\n2,5.1\n3,7.0\n4,8.9\n5,11.1\n");
    snprintf(args, sizeof args, "--json 'a*t + b' '%s'", linx);
    rc = fit(args, &out, &err);
    CHECK(rc == 0);
    CHECK_CONTAINS(err,
                   "<command line>:1:1: warning: the model does not depend on its variable 'x'");
    CHECK_CONTAINS(err, "    ^^^^^^^");
    CHECK_CONTAINS(out, "\"name\": \"t\"");
    free(out);
    free(err);

    /* A parameter named like an unused column of the data: a warning, the fit still runs. */
    const char *xt = tmp("x,t,y\n0,2,1\n1,1.2,2\n2,0.7,3\n3,0.45,4\n4,0.3,5\n5,0.2,6\n");
    snprintf(args, sizeof args, "--json 'a*x + b*t' '%s'", xt);
    rc = fit(args, &out, &err);
    CHECK(rc == 0);
    CHECK_CONTAINS(err, "warning: 't' is a parameter of the model and also a column of");
    CHECK_CONTAINS(err, "declare the variables in a model file: var x, t)");
    CHECK(!strstr(err ? err : "", "'y' is a parameter")); /* the response is no such column */
    free(out);
    free(err);

    /* After "--" a formula may start with '-'; options may follow MODEL and DATA. */
    const char *neg = tmp("x,y\n0,1\n1,-1\n2,-3\n3,-5\n");
    snprintf(args, sizeof args, "--json -- '-a*x + b' '%s'", neg);
    rc = fit(args, &out, &err);
    CHECK(rc == 0);
    CHECK_NEAR(json_param(out, "a", "value"), 2, 1e-9);
    CHECK_NEAR(json_param(out, "b", "value"), 1, 1e-9);
    free(out);
    free(err);

    /* A robust loss resists outliers that drag the linear fit away. */
    const char *outl = tmp("x,y\n0,1\n1,3\n2,5\n3,7\n4,9\n5,11\n6,13\n7,15\n8,17\n9,19\n10,71\n"
                           "11,23\n12,25\n13,27\n14,89\n15,31\n");
    snprintf(args, sizeof args, "--json 'a*x + b' '%s'", outl);
    rc = fit(args, &out, &err);
    CHECK(rc == 0);
    double a_lin = json_param(out, "a", "value");
    free(out);
    free(err);
    snprintf(args, sizeof args, "--json --loss soft_l1 --f-scale 0.5 'a*x + b' '%s'", outl);
    rc = fit(args, &out, &err);
    CHECK(rc == 0);
    CHECK_CONTAINS(out, "\"loss\": \"soft_l1\"");
    double a_rob = json_param(out, "a", "value");
    CHECK(fabs(a_rob - 2) < 0.1);
    CHECK(fabs(a_lin - 2) > 0.3);
    free(out);
    free(err);
}

/* The kernel cache: a fresh directory misses, the next process finds the entry on disk. */
static void test_cache(void) {
    char *out = NULL, *err = NULL;
    char dir[] = "/tmp/jf_test_cache2XXXXXX";
    if (!CHECK(mkdtemp(dir) != NULL)) return;
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "JITFIT_CACHE_DIR='%s' '%s' fit --json %s %s", dir, jf_test_cli(),
             EXAMPLE_JF, EXAMPLE_CSV);
    int rc = jf_test_run(cmd, &out, &err);
    CHECK(rc == 0);
    int compiled = strstr(out ? out : "", "\"backend\": \"c\"") != NULL;
    if (compiled) CHECK_CONTAINS(out, "\"cache\": \"miss\"");
    free(out);
    free(err);
    rc = jf_test_run(cmd, &out, &err);
    CHECK(rc == 0);
    if (compiled) CHECK_CONTAINS(out, "\"cache\": \"disk\"");
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    jf_test_run(cmd, NULL, NULL);
}

/* Bad data: exit 1, the message names file, line and column. */
static void test_bad_data(void) {
    static const struct {
        const char *text;    /* data file content */
        const char *args;    /* options before MODEL DATA */
        const char *message; /* expected on stderr after "<path>" */
    } cases[] = {
        {"t,y\n1,2\n2,3\n3,4\n4,5\n", "", ": no column 'x' (columns: t, y)"},
        {"x,y\n1,2\n2,3\n3,4\n4,abc\n", "", ":5: column 2 ('y'): 'abc' is not a number"},
        {"x,y,z\n1,2,3\n2,3,4\n3,4,5\n4,5,6\n5,6,7\n6,7\n", "", ":7: expected 3 fields, found 2"},
        {"", "", ": no data rows"},
        {"x,y\n", "", ": no data rows"},
        {"x,y\n1,2\n2,3\n3,4\n4,5\n5,6\n6,7\n7,8\nnan,9\n", "",
         ":9: column 1 ('x'): value is NaN (--nan-policy omit, or nan_policy = omit in a job "
         "file, drops rows with NaN or missing values)"},
        {"x,y\n1,2\n2,3\n", "", ": 2 data rows for 2 parameters: a fit needs more rows than "
                                "parameters"},
        {"x,y,s\n1,2,1\n2,3,0.5\n3,4,0\n4,5,1\n", "--sigma s ",
         ":4: column 3 ('s'): sigma must be positive, found 0"},
        {"x,y,s\n1,2,1\n2,3,-0.5\n3,4,1\n", "--sigma s ",
         ":3: column 3 ('s'): sigma must be positive, found -0.5"},
        {"x,y\n1,2\n2,3\n3,4\n", "--sigma s ", ": no column 's' (columns: x, y)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *path = tmp(cases[i].text);
        char args[4096], want[1024];
        snprintf(args, sizeof args, "%s'a*x + b' '%s'", cases[i].args, path);
        snprintf(want, sizeof want, "%s%s", path, cases[i].message);
        char *out = NULL, *err = NULL;
        int rc = fit(args, &out, &err);
        if (!CHECK(rc == 1)) fprintf(stderr, "  case %zu: exit %d\n", i, rc);
        if (!CHECK_CONTAINS(err, want)) fprintf(stderr, "  case %zu\n", i);
        free(out);
        free(err);
    }
    char *out = NULL, *err = NULL, args0[1024];
    CHECK(fit("'a*x+b' /nonexistent/data.csv", &out, &err) == 1);
    CHECK_CONTAINS(err, "/nonexistent/data.csv: No such file or directory");
    free(out);
    free(err);
    /* A starting value outside the bounds is refused before fitting. */
    CHECK(fit("--p0 b=-1 " EXAMPLE_JF " " EXAMPLE_CSV, &out, &err) == 2);
    CHECK_CONTAINS(err, "parameter 'b': the starting value -1 is outside its bounds [0, inf]");
    free(out);
    free(err);
    /* A point where the model is not finite is named by its x as written, not 17 digits. */
    snprintf(args0, sizeof args0, "'a*log(x)+b' '%s'", tmp("x,y\n0.1,1\n0.2,2\n-0.3,3\n0.4,4\n"));
    CHECK(fit(args0, &out, &err) == 1);
    CHECK_CONTAINS(err, "first at point 2 (0-based, x = -0.3), where the residual is NaN");
    free(out);
    free(err);
    /* A model with errors: the compiler's diagnostics, exit 1. */
    CHECK(fit("'a*exq(x)' " EXAMPLE_CSV, &out, &err) == 1);
    CHECK_CONTAINS(err, "exq");
    free(out);
    free(err);
    /* --output -: the CSV alone on stdout, the report (here JSON) on stderr. */
    CHECK(fit("--json --output - " EXAMPLE_JF " " EXAMPLE_CSV, &out, &err) == 0);
    CHECK(out && strncmp(out, "x,y,fit,residual,fit_stderr\n", 28) == 0);
    CHECK(json_valid(err));
    CHECK_CONTAINS(err, "\"params\"");
    free(out);
    free(err);
    /* A report that cannot be written (a full disk) is lost: exit 1 and say so, not 0. */
    CHECK(fit("--json " EXAMPLE_JF " " EXAMPLE_CSV " >/dev/full", &out, &err) == 1);
    CHECK_CONTAINS(err, "standard output: write error");
    free(out);
    free(err);
    /* ... whatever the command (main.c checks for all) */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' check 'a*x+b' >/dev/full", jf_test_cli());
    CHECK(jf_test_run(cmd, NULL, &err) == 1);
    CHECK_CONTAINS(err, "jitfit: standard output: write error (No space left on device)");
    free(err);
    /* A model file that does not exist is that, not a formula with a '.' in it. */
    CHECK(fit("/nonexistent/model.jf " EXAMPLE_CSV, &out, &err) == 1);
    CHECK_CONTAINS(err, "jitfit: /nonexistent/model.jf: No such file or directory");
    free(out);
    free(err);
}

static void test_usage(void) {
    static const struct {
        const char *args;    /* arguments after `fit` */
        const char *message; /* expected on stderr */
    } cases[] = {
        {"", "expected MODEL and DATA"},
        {EXAMPLE_JF, "expected MODEL and DATA"},
        {EXAMPLE_JF " " EXAMPLE_CSV " extra", "unexpected argument 'extra'"},
        {"--frobnicate " EXAMPLE_JF " " EXAMPLE_CSV, "unknown option '--frobnicate'"},
        {"--loss squared " EXAMPLE_JF " " EXAMPLE_CSV, "--loss: unknown loss 'squared'"},
        {"--f-scale 0 " EXAMPLE_JF " " EXAMPLE_CSV, "--f-scale: '0' is not a positive number"},
        {"--ftol abc " EXAMPLE_JF " " EXAMPLE_CSV, "--ftol: 'abc' is not a non-negative number"},
        {"--xtol -1 " EXAMPLE_JF " " EXAMPLE_CSV, "--xtol: '-1' is not a non-negative number"},
        {"--gtol=nan " EXAMPLE_JF " " EXAMPLE_CSV, "--gtol: 'nan' is not a non-negative number"},
        {"--max-nfev 0 " EXAMPLE_JF " " EXAMPLE_CSV, "--max-nfev: '0' is not a positive integer"},
        {"--max-nfev 1.5 " EXAMPLE_JF " " EXAMPLE_CSV, "--max-nfev: '1.5' is not a positive"},
        {"--threads -2 " EXAMPLE_JF " " EXAMPLE_CSV, "--threads: '-2' is not a thread count"},
        {"--max-gpu-mem 0 " EXAMPLE_JF " " EXAMPLE_CSV, "--max-gpu-mem: '0' is not a memory size"},
        {"--device tpu " EXAMPLE_JF " " EXAMPLE_CSV, "--device: unknown device 'tpu'"},
        {"--backend cuda " EXAMPLE_JF " " EXAMPLE_CSV, "--backend: unknown backend 'cuda'"},
        {EXAMPLE_JF " " EXAMPLE_CSV " --ftol", "option --ftol needs a value"},
        {EXAMPLE_JF " " EXAMPLE_CSV " --bogus", "unknown option '--bogus'"},
        {"--p0 q=1 " EXAMPLE_JF " " EXAMPLE_CSV, "jitfit: fit: --p0: the model has no parameter 'q'"},
        {"--p0 a=x " EXAMPLE_JF " " EXAMPLE_CSV, "'x' is not a number"},
        {"--p0 a " EXAMPLE_JF " " EXAMPLE_CSV, "expected NAME=VALUE"},
        /* NaN reads as "no value given" downstream: it would become the default 1 */
        {"--p0 a=nan " EXAMPLE_JF " " EXAMPLE_CSV, "--p0: 'nan' is not a number (for 'a')"},
        {"--p0 a=1,b=2,a=3 " EXAMPLE_JF " " EXAMPLE_CSV, "jitfit: fit: --p0: 'a' is given twice"},
        {"--bounds a " EXAMPLE_JF " " EXAMPLE_CSV, "jitfit: fit: --bounds: expected NAME=VALUE"},
        {"--bounds a=1 " EXAMPLE_JF " " EXAMPLE_CSV, "--bounds: expected LOW:HIGH for 'a'"},
        {"--bounds a=2:1 " EXAMPLE_JF " " EXAMPLE_CSV,
         "--bounds: the lower bound of 'a' is not below its upper bound"},
        {"--bounds q=0:1 " EXAMPLE_JF " " EXAMPLE_CSV,
         "--bounds: the model has no parameter 'q' (parameters: a, b, c, d, e)"},
        {"--bounds a=x:1 " EXAMPLE_JF " " EXAMPLE_CSV, "--bounds: 'x:1' is not LOW:HIGH"},
        {"--sigma y " EXAMPLE_JF " " EXAMPLE_CSV, "--sigma: column 'y' is the response"},
        {"--y x " EXAMPLE_JF " " EXAMPLE_CSV, "column 'x' is a variable of the model"},
        /* a group per value of the response or a variable: groups of one row, all failing */
        {"--group y " EXAMPLE_JF " " EXAMPLE_CSV, "--group: column 'y' is the response"},
        {"--group x " EXAMPLE_JF " " EXAMPLE_CSV, "--group: column 'x' is a variable of the model"},
        /* the weights would be the groups' labels */
        {"--group sigma --sigma sigma " EXAMPLE_JF " " EXAMPLE_CSV,
         "--group: column 'sigma' is the sigma"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = NULL, *err = NULL;
        int rc = fit(cases[i].args, &out, &err);
        if (!CHECK(rc == 2)) fprintf(stderr, "  case %zu (%s): exit %d\n", i, cases[i].args, rc);
        if (!CHECK_CONTAINS(err, cases[i].message)) fprintf(stderr, "  case %zu\n", i);
        CHECK_CONTAINS(err, "usage: jitfit fit MODEL DATA");
        free(out);
        free(err);
    }
    char *out = NULL, *err = NULL;
    CHECK(fit("--help", &out, &err) == 0);
    CHECK_CONTAINS(out, "--absolute-sigma");
    free(out);
    free(err);
}

/* A parameter without a starting value starts where scipy's curve_fit and the C API start
 * it: 1, or within its bounds at their midpoint, lower + 1 or upper - 1. */
static void test_default_start(void) {
    const char *data = tmp("x,y\n0,2\n1,1.2\n2,0.7\n3,0.45\n4,0.3\n5,0.2\n");
    char args[1024], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "--json --bounds a=0:10,b=0.5:,c=:-0.5 'a*exp(-b*x) + c' '%s'",
             data);
    CHECK(fit(args, &out, &err) == 0 || out);
    CHECK_NEAR(json_param(out, "a", "initial"), 5, 0);
    CHECK_NEAR(json_param(out, "b", "initial"), 1.5, 0);
    CHECK_NEAR(json_param(out, "c", "initial"), -1.5, 0);
    free(out);
    free(err);
    snprintf(args, sizeof args, "--json 'a*exp(-b*x) + c' '%s'", data);
    CHECK(fit(args, &out, &err) == 0);
    CHECK_NEAR(json_param(out, "c", "initial"), 1, 0);
    free(out);
    free(err);
}

/* --x-scale: fixed scales reach the minimum of a*exp(-b*x)+c from a start 1e5 times too small
 * (with the Jacobian's scales the trust region stays in a valley far from it, as MINPACK's);
 * one number means the same as naming each parameter; a list must name every one. */
static void test_x_scale(void) {
    char csv[4096] = "x,y\n";
    size_t len = strlen(csv);
    for (int i = 0; i < 40; i++)
        len += (size_t)snprintf(csv + len, sizeof csv - len, "%.17g,%.17g\n", 0.25 * i,
                                55566.7 * exp(-0.193 * 0.25 * i) + 84895 + 50 * sin(12.9898 * i));
    const char *data = tmp(csv);
    const char *start = "--p0 a=0.35,b=-0.085,c=1.4 'a*exp(-b*x)+c'";
    char args[1024], *out = NULL, *err = NULL, *out2 = NULL;
    snprintf(args, sizeof args, "--json %s '%s' --x-scale 1", start, data);
    CHECK(fit(args, &out, &err) == 0);
    CHECK_CONTAINS(out, "\"success\": true");
    CHECK_NEAR(json_param(out, "a", "value") / 55566.7, 1, 2e-3);
    CHECK_NEAR(json_param(out, "b", "value") / 0.193, 1, 5e-3);
    CHECK_NEAR(json_param(out, "c", "value") / 84895, 1, 2e-3);
    free(err);
    snprintf(args, sizeof args, "--json %s '%s' --x-scale 'a=1, b=1, c=1'", start, data);
    CHECK(fit(args, &out2, &err) == 0);
    for (int k = 0; k < 3; k++)
        CHECK(json_param(out, names[k], "value") == json_param(out2, names[k], "value"));
    free(out);
    free(out2);
    free(err);
    static const struct {
        const char *opt, *msg;
    } bad[] = {
        {"--x-scale a=1,b=1", "jitfit: fit: --x-scale: no scale for 'c': name every parameter"},
        {"--x-scale a=1,b=0,c=1", "'0' is not a positive finite scale (for 'b')"},
        {"--x-scale q=1", "jitfit: fit: --x-scale: the model has no parameter 'q'"},
        {"--x-scale -1", "'-1': a scale must be positive and finite"},
        {"--x-scale inf", "'inf': a scale must be positive and finite"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "%s '%s' %s", start, data, bad[i].opt);
        if (!CHECK(fit(args, &out, &err) == 2)) fprintf(stderr, "  x_scale case %zu\n", i);
        CHECK_CONTAINS(err, bad[i].msg);
        free(out);
        free(err);
    }
}

/* --fix: the fit equals that of the model with the number written in; the report marks the
 * held parameter; names, numbers, bounds and a batch's per-group starts are checked. */
static void test_fix(void) {
    char csv[4096] = "g,x,y\n";
    size_t len = strlen(csv);
    for (int i = 0; i < 40; i++)
        len += (size_t)snprintf(csv + len, sizeof csv - len, "%s,%.17g,%.17g\n",
                                i < 20 ? "u" : "v", 0.25 * (i % 20),
                                (i < 20 ? 2.5 : 3.0) * exp(-0.7 * 0.25 * (i % 20)) + 0.3 +
                                    0.01 * sin(12.9898 * i));
    const char *data = tmp(csv);
    char args[1024], *out = NULL, *err = NULL, *out2 = NULL;
    snprintf(args, sizeof args, "--json 'a*exp(-b*x)+c' '%s' --fix c=0.3", data);
    CHECK(fit(args, &out, &err) == 0);
    free(err);
    snprintf(args, sizeof args, "--json 'a*exp(-b*x)+0.3' '%s'", data);
    CHECK(fit(args, &out2, &err) == 0);
    free(err);
    CHECK(json_param(out, "a", "value") == json_param(out2, "a", "value"));
    CHECK(json_param(out, "b", "stderr") == json_param(out2, "b", "stderr"));
    CHECK(json_param(out, "c", "value") == 0.3);
    CHECK(json_param(out, "c", "stderr") == 0);
    CHECK(json_number(out, "dof") == 38);
    CHECK_CONTAINS(out, "\"name\": \"c\", \"value\": 0.3, \"stderr\": 0, \"initial\": 0.3, "
                        "\"at_bound\": null, \"fixed\": true}");
    CHECK_CONTAINS(out, "\"name\": \"a\"");
    free(out2);
    /* held at the start --p0 gave; the text report */
    snprintf(args, sizeof args, "'a*exp(-b*x)+c' '%s' --p0 c=0.3 --fix c", data);
    CHECK(fit(args, &out2, &err) == 0);
    CHECK_CONTAINS(out2, "40 points, 3 parameters (1 fixed)");
    CHECK_CONTAINS(out2, "(fixed)");
    CHECK(strstr(out2, "  correlation") && !strstr(strstr(out2, "  correlation"), "\n  c "));
    free(out);
    free(out2);
    free(err);
    /* the rows needed count the fitted parameters only, as the library's */
    const char *three = tmp("x,y\n0,2.8\n1,1.5\n2,0.9\n");
    snprintf(args, sizeof args, "--json 'a*exp(-b*x)+c' '%s' --fix c=0.3", three);
    CHECK(fit(args, &out, &err) == 0);
    CHECK(json_number(out, "dof") == 1);
    free(out);
    free(err);
    snprintf(args, sizeof args, "'a*exp(-b*x)+c' '%s' --fix b=1,c=0.3", three);
    CHECK(fit(args, &out, &err) == 0);
    free(out);
    free(err);
    const char *two = tmp("x,y\n0,2.8\n1,1.5\n");
    snprintf(args, sizeof args, "'a*exp(-b*x)+c' '%s' --fix c=0.3", two);
    CHECK(fit(args, &out, &err) == 1);
    CHECK_CONTAINS(err, "2 data rows for 2 fitted parameters (1 held by --fix): a fit needs "
                        "more rows than the parameters it fits");
    free(out);
    free(err);
    /* --x-scale names the fitted parameters only: a held one's scale is never used */
    snprintf(args, sizeof args, "--json 'a*exp(-b*x)+c' '%s' --fix c=0.3 --x-scale a=1,b=2", data);
    CHECK(fit(args, &out, &err) == 0);
    CHECK(json_param(out, "c", "value") == 0.3);
    free(out);
    free(err);
    /* a job file's key, and its line in the error */
    char text[2048];
    snprintf(text, sizeof text, "[fit a]\nmodel = a*exp(-b*x)+c\ndata = %s\nfix = c=0.3\n"
                                "[fit b]\nmodel = a*exp(-b*x)+c\ndata = %s\nfix = q\n", data, data);
    char *job = jf_test_tmpfile(".ini", text), cmd[8192];
    snprintf(cmd, sizeof cmd, "JITFIT_CACHE_DIR='%s' '%s' run --json '%s'", cache_dir,
             jf_test_cli(), job ? job : "");
    CHECK(jf_test_run(cmd, &out, &err) == 2); /* as for a p0 naming no parameter */
    CHECK_CONTAINS(out, "\"value\": 0.3, \"stderr\": 0, \"initial\": 0.3, \"at_bound\": null, "
                        "\"fixed\": true}");
    CHECK_CONTAINS(err, ".ini:8: fix: the model has no parameter 'q'");
    free(out);
    free(err);
    if (job) unlink(job);
    free(job);
    /* the errors of a job file's fix name its line, not --p0 or --fix */
    snprintf(text, sizeof text, "[defaults]\ndata = %s\nfix = c=0.3\n"
                                "[fit a]\nmodel = a*exp(-k*x)+d\n"
                                "[fit b]\nmodel = a*exp(-b*x)+c\nfix = a, b\n", data);
    job = jf_test_tmpfile(".ini", text);
    snprintf(cmd, sizeof cmd, "JITFIT_CACHE_DIR='%s' '%s' run '%s'", cache_dir, jf_test_cli(),
             job ? job : "");
    CHECK(jf_test_run(cmd, &out, &err) == 2);
    CHECK_CONTAINS(err, ".ini:3: fix: the model has no parameter 'c'");
    CHECK_CONTAINS(err, ".ini:8: fix holds every parameter of the model: nothing is left to fit");
    CHECK(!strstr(err, "p0:") && !strstr(err, "--fix"));
    free(out);
    free(err);
    if (job) unlink(job);
    free(job);
    /* fix may repeat in a section, as p0, bounds and param: each line holds more */
    snprintf(text, sizeof text, "[fit a]\nmodel = a*exp(-b*x)+c\ndata = %s\nfix = c=0.3\n"
                                "fix = b=0.5\n", data);
    job = jf_test_tmpfile(".ini", text);
    snprintf(cmd, sizeof cmd, "JITFIT_CACHE_DIR='%s' '%s' run --json '%s'", cache_dir,
             jf_test_cli(), job ? job : "");
    CHECK(jf_test_run(cmd, &out, &err) == 0);
    CHECK(!strstr(err, "given twice"));
    CHECK_CONTAINS(out, "\"value\": 0.3, \"stderr\": 0, \"initial\": 0.3, \"at_bound\": null, "
                        "\"fixed\": true}");
    CHECK_CONTAINS(out, "\"value\": 0.5, \"stderr\": 0, \"initial\": 0.5, \"at_bound\": null, "
                        "\"fixed\": true}");
    free(out);
    free(err);
    if (job) unlink(job);
    free(job);
    static const struct {
        const char *opt, *msg;
        int rc;
    } bad[] = {
        {"--fix q", "jitfit: fit: --fix: the model has no parameter 'q'", 2},
        /* NAME=VALUE also sets the start, but the name is the --fix's, not a --p0's */
        {"--fix q=1", "--fix: the model has no parameter 'q'", 2},
        {"--fix c=0.3,c=0.4", "--fix: 'c' is given twice", 2},
        {"--fix a,b,c", "jitfit: fit: --fix holds every parameter of the model: nothing is left "
                        "to fit", 2},
        {"--fix c=x", "--fix: 'x' is not a number (for 'c')", 2},
        {"--fix 'a b'", "--fix: expected NAME or NAME=VALUE, got 'a b'", 2},
        {"--fix c,", "--fix: expected NAME or NAME=VALUE, got ''", 2},
        {"--fix c=5 --bounds c=0:1", "parameter 'c': the starting value 5 is outside its bounds", 2},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "'a*exp(-b*x)+c' '%s' %s", data, bad[i].opt);
        if (!CHECK(fit(args, &out, &err) == bad[i].rc)) fprintf(stderr, "  fix case %zu\n", i);
        CHECK_CONTAINS(err, bad[i].msg);
        free(out);
        free(err);
    }
    /* a batch: the groups held at the values their --p0-file starts give */
    const char *p0same = tmp("g,a,c\nu,2,0.3\nv,3,0.3\n");
    const char *p0diff = tmp("g,a,c\nu,2,0.3\nv,3,0.4\n");
    snprintf(args, sizeof args, "--json 'a*exp(-b*x)+c' '%s' --group g --fix c --p0-file '%s'",
             data, p0same);
    CHECK(fit(args, &out, &err) == 0);
    CHECK_CONTAINS(out, "\"group\": \"v\"");
    CHECK(strstr(out, "\"fixed\": true") && strstr(strstr(out, "\"fixed\": true") + 1,
                                                   "\"fixed\": true"));
    free(out);
    free(err);
    snprintf(args, sizeof args, "'a*exp(-b*x)+c' '%s' --group g --fix c --p0-file '%s'", data,
             p0same);
    CHECK(fit(args, &out, &err) == 0);
    CHECK_CONTAINS(out, "0.3 (fixed)");
    free(out);
    free(err);
    /* groups held at different values: one batch, the same answers as runs of one group with
     * --fix c=VALUE */
    snprintf(args, sizeof args, "--json 'a*exp(-b*x)+c' '%s' --group g --fix c --p0-file '%s'",
             data, p0diff);
    CHECK(fit(args, &out, &err) == 0);
    /* the array's objects, u's then v's (each starts with "success") */
    const char *gu = out ? strstr(out, "\"success\"") : NULL;
    const char *gv = gu ? strstr(gu + 1, "\"success\"") : NULL;
    CHECK(gu && gv);
    if (gu && gv) {
        CHECK(strstr(gu, "{\"name\": \"c\", \"value\": 0.3, \"stderr\": 0, \"initial\": 0.3"));
        CHECK(strstr(gv, "{\"name\": \"c\", \"value\": 0.4, \"stderr\": 0, \"initial\": 0.4"));
    }
    char *one = NULL, *err1 = NULL;
    free(err);
    snprintf(args, sizeof args, "--json 'a*exp(-b*x)+c' '%s' --group g --fix c=0.4 --p0 a=3",
             data);
    CHECK(fit(args, &one, &err1) == 0);
    const char *ov = one ? strstr(one, "\"success\"") : NULL;
    ov = ov ? strstr(ov + 1, "\"success\"") : NULL;
    if (gv && ov) {
        CHECK(json_param(gv, "a", "value") == json_param(ov, "a", "value"));
        CHECK(json_param(gv, "b", "stderr") == json_param(ov, "b", "stderr"));
    }
    free(one);
    free(err1);
    free(out);
    /* ... from one compile: the held values are not in the kernels (an empty cache directory
     * gets one entry, where each value used to compile its own) */
    char cdir[] = "/tmp/jf_test_fixcacheXXXXXX";
    if (CHECK(mkdtemp(cdir) != NULL)) {
        snprintf(cmd, sizeof cmd,
                 "JITFIT_CACHE_DIR='%s' '%s' fit --json 'a*exp(-b*x)+c' '%s' --group g --fix c "
                 "--p0-file '%s' && JITFIT_CACHE_DIR='%s' '%s' cache info",
                 cdir, jf_test_cli(), data, p0diff, cdir, jf_test_cli());
        CHECK(jf_test_run(cmd, &out, &err) == 0);
        if (out && strstr(out, "\"backend\": \"c\"")) CHECK_CONTAINS(out, "entries: 1\n");
        free(out);
        free(err);
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", cdir);
        jf_test_run(cmd, NULL, NULL);
    }
    /* the value --fix names is the held value: a file that starts every group elsewhere does
     * not replace it silently */
    snprintf(args, sizeof args, "'a*exp(-b*x)+c' '%s' --group g --fix c=0.5 --p0-file '%s'",
             data, p0same);
    CHECK(fit(args, &out, &err) == 1);
    CHECK_CONTAINS(err, "parameter 'c' is held at 0.5 (--fix c=0.5), but the file starts group "
                        "'u' (line 2) at 0.3");
    free(out);
    free(err);
    /* a later --p0 sets the start the parameter is held at, which the file then must match */
    snprintf(args, sizeof args,
             "'a*exp(-b*x)+c' '%s' --group g --fix c=0.5 --p0 c=0.3 --p0-file '%s'", data, p0same);
    CHECK(fit(args, &out, &err) == 0);
    CHECK_CONTAINS(out, "0.3 (fixed)");
    free(out);
    free(err);
}

/* The last line of text (without its newline), in buf. */
static const char *last_line(const char *text, char *buf, size_t n) {
    size_t len = text ? strlen(text) : 0;
    while (len && text[len - 1] == '\n') len--;
    size_t start = len;
    while (start && text[start - 1] != '\n') start--;
    snprintf(buf, n, "%.*s", (int)(len - start), text ? text + start : "");
    return buf;
}

/* Every failure before the report gets the JSON object where the report would have gone: a
 * usage error too (exit 2, whichever side of --json the bad option is), with --group, and with
 * --output - on stderr after the message (stdout is the CSV, which a failed fit never starts);
 * run --json prints one object with the first error for a job it cannot start. */
static void json_early_failures(const char *data) {
    static const struct {
        const char *args; /* %s: the data file */
        int rc;           /* exit status */
        const char *error; /* the start of the "error" string */
    } cases[] = {
        {"--json --ftol abc 'a*x+b' '%s'", 2, "--ftol: 'abc' is not a non-negative number"},
        {"--ftol abc 'a*x+b' '%s' --json", 2, "--ftol: 'abc' is not a non-negative number"},
        {"--json --bogus 'a*x+b' '%s'", 2, "unknown option '--bogus'"},
        {"--json 'a*x+b'", 2, "expected MODEL and DATA"},
        {"--json --group nosuch 'a*x+b' '%s'", 1, "%s: no column 'nosuch' (columns: x, y)"},
        /* (the group column may be neither the response nor a variable: c has none) */
        {"--json --columns g,y --group g --p0-file /nonexistent/p0.csv c '%s'", 1,
         "/nonexistent/p0.csv: No such file"},
    };
    char args[4096], want[4096], line[4096], *out = NULL, *err = NULL;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, cases[i].args, data);
        char error[1024];
        snprintf(error, sizeof error, cases[i].error, data);
        snprintf(want, sizeof want, "{\"success\": false, \"error\": \"%s", error);
        int rc = fit(args, &out, &err);
        if (!CHECK(rc == cases[i].rc)) fprintf(stderr, "  fit %s: exit %d\n", args, rc);
        if (!CHECK(json_valid(out))) fprintf(stderr, "  fit %s printed:\n%s\n", args, out);
        if (!CHECK_CONTAINS(out, want)) fprintf(stderr, "  fit %s\n", args);
        CHECK_CONTAINS(err, error); /* the human message as before */
        free(out);
        free(err);
    }
    /* --output -: the report, and so the object, go to stderr */
    snprintf(args, sizeof args, "--json --output - 'a*x+b' /nonexistent/nosuch.csv");
    CHECK(fit(args, &out, &err) == 1);
    CHECK(out && !*out);
    CHECK_CONTAINS(err, "jitfit: /nonexistent/nosuch.csv: No such file or directory\n{");
    last_line(err, line, sizeof line);
    CHECK(json_valid(line));
    CHECK_STREQ(line, "{\"success\": false, \"error\": \"/nonexistent/nosuch.csv: No such "
                      "file or directory\"}");
    free(out);
    free(err);
    snprintf(args, sizeof args, "--json --output - --ftol abc 'a*x+b' '%s'", data);
    CHECK(fit(args, &out, &err) == 2);
    CHECK(out && !*out);
    CHECK(json_valid(last_line(err, line, sizeof line)));
    CHECK_CONTAINS(line, "\"error\": \"--ftol: 'abc' is not");
    free(out);
    free(err);
    /* without --json (or with --json=false) none */
    snprintf(args, sizeof args, "--json=false --ftol abc 'a*x+b' '%s'", data);
    CHECK(fit(args, &out, &err) == 2);
    CHECK(out && !*out);
    CHECK(err && !strchr(err, '{'));
    free(out);
    free(err);

    /* run --json: a job that cannot start is one object, with the first error */
    char text[1024], cmd[8192];
    snprintf(text, sizeof text,
             "[fit a]\nmodel = a*x+b\ndata = %s\nftoll = 1\nxtoll = 1\n", data);
    char *job = jf_test_tmpfile(".ini", text);
    snprintf(text, sizeof text,
             "[fit a]\nmodel = a*x+b\ndata = %s\njson = true\noutput = o.csv\n"
             "[fit b]\nmodel = a*x+b\ndata = %s\noutput = o.csv\n", data, data);
    char *job2 = jf_test_tmpfile(".ini", text);
    const struct {
        const char *args; /* after run */
        const char *error;
    } runs[] = {
        {"--json '%s'", ":4: unknown key 'ftoll' (did you mean 'ftol'?)"},
        {"'%s' --json --ftol abc", "--ftol: 'abc' is not"},
        {"--json --bogus '%s'", "unknown option '--bogus'"},
        {"--json --only nosuch '%s'", "run: --only: "}, /* job2: found before its error */
        {"--json /nonexistent/job.ini", "/nonexistent/job.ini: No such file"},
        /* job2: json = true in the file */
        {"'%s'", ":6: [fit b] and [fit a] (line 1) both write"},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char a[2048];
        snprintf(a, sizeof a, runs[i].args, i == 3 || i == 5 ? job2 : job);
        snprintf(cmd, sizeof cmd, "JITFIT_CACHE_DIR='%s' '%s' run %s", cache_dir, jf_test_cli(),
                 a);
        int rc = jf_test_run(cmd, &out, &err);
        if (!CHECK(rc == 2)) fprintf(stderr, "  run %s: exit %d\n", a, rc);
        if (!CHECK(json_valid(out))) fprintf(stderr, "  run %s printed:\n%s\n", a, out);
        const char *head = "{\"success\": false, \"error\": \"";
        CHECK(out && strncmp(out, head, strlen(head)) == 0);
        if (!CHECK_CONTAINS(out, runs[i].error)) fprintf(stderr, "  run %s\n", a);
        CHECK(out && !strstr(out, "xtoll")); /* the first error */
        free(out);
        free(err);
    }
    if (job) unlink(job);
    if (job2) unlink(job2);
    free(job);
    free(job2);
}

/* `jitfit run --json` stays one JSON array with an object for every fit, also for fits that
 * fail before they print anything (a missing data file, a model error). */
static void test_run_json_failures(void) {
    const char *data = tmp("x,y\n0,2\n1,1.2\n2,0.7\n3,0.45\n4,0.3\n5,0.2\n");
    char text[2048];
    snprintf(text, sizeof text,
             "[fit a]\nmodel = a*exp(-b*x)+c\ndata = /nonexistent/nosuch.csv\n"
             "[fit b]\nmodel = a*exp(-b*x)+c\ndata = %s\n"
             "[fit c]\nmodel = a*exp(-b*x)+\ndata = %s\n"
             "[fit d]\nmodel = a*exp(-b*x)+c\ndata = %s\nmax_nfev = 2\n",
             data, data, data);
    char *job = jf_test_tmpfile(".ini", text);
    char cmd[8192], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "JITFIT_CACHE_DIR='%s' '%s' run --json '%s'", cache_dir,
             jf_test_cli(), job ? job : "");
    CHECK(jf_test_run(cmd, &out, &err) == 1);
    if (!CHECK(json_valid(out))) fprintf(stderr, "run --json printed:\n%s\n", out ? out : "");
    CHECK_CONTAINS(out, "{\"name\": \"a\", \"success\": false, \"error\": "
                        "\"/nonexistent/nosuch.csv: No such file or directory\"}");
    CHECK_CONTAINS(out, "\"name\": \"b\"");
    CHECK_CONTAINS(out, "{\"name\": \"c\", \"success\": false, \"error\": \"<model at ");
    CHECK_CONTAINS(out, "error: syntax error: unexpected end of input");
    CHECK_CONTAINS(out, "\"name\": \"d\"");
    /* a fit that ran but did not converge prints its own object, and stderr names it */
    CHECK_CONTAINS(err, "jitfit: [fit d]: the fit did not converge");
    /* a fit that fails before its report is named on stderr too */
    CHECK_CONTAINS(err, "jitfit: [fit a]: /nonexistent/nosuch.csv: No such file or directory");
    free(out);
    free(err);
    if (job) unlink(job);
    free(job);

    /* reports that cannot be written (a full disk) are lost: exit 1 and say so, not 0 */
    snprintf(text, sizeof text, "[fit b]\nmodel = a*exp(-b*x)+c\ndata = %s\n", data);
    job = jf_test_tmpfile(".ini", text);
    snprintf(cmd, sizeof cmd, "JITFIT_CACHE_DIR='%s' '%s' run '%s' >/dev/full", cache_dir,
             jf_test_cli(), job ? job : "");
    CHECK(jf_test_run(cmd, NULL, &err) == 1);
    CHECK_CONTAINS(err, "standard output: write error");
    free(err);
    if (job) unlink(job);
    free(job);

    /* `fit --json` likewise: a fit that fails before its report prints one JSON object, with
     * the message stderr has too; exit 1 as ever */
    snprintf(cmd, sizeof cmd, "--json 'a*exp(-b*x)+c' /nonexistent/nosuch.csv");
    CHECK(fit(cmd, &out, &err) == 1);
    if (!CHECK(json_valid(out))) fprintf(stderr, "fit --json printed:\n%s\n", out ? out : "");
    CHECK_CONTAINS(out, "{\"success\": false, \"error\": \"/nonexistent/nosuch.csv: No such file "
                        "or directory\"}");
    CHECK_CONTAINS(err, "/nonexistent/nosuch.csv: No such file or directory");
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "--json 'a*exp(-b*x)+' '%s'", data);
    CHECK(fit(cmd, &out, &err) == 1);
    CHECK(json_valid(out));
    CHECK_CONTAINS(out, "\"success\": false, \"error\": \"<command line>:1:");
    free(out);
    free(err);
    json_early_failures(data);
}

/* --output of many rows (several chunks formatted on threads, written in order): the same
 * bytes on 1 and 3 threads, every row in input order with its group label, the data columns
 * read back exactly and residual = y - fit exactly. */
static void test_output_rows(void) {
    enum { N = 10007 };
    size_t cap = (size_t)N * 64 + 64, len = 0;
    char *text = malloc(cap);
    double *xs = malloc(N * sizeof *xs), *ys = malloc(N * sizeof *ys);
    if (!CHECK(text && xs && ys)) return;
    len += (size_t)snprintf(text, cap, "g,x,y\n");
    for (int i = 0; i < N; i++) {
        xs[i] = i / 7.0;
        ys[i] = 2 * xs[i] + 1 + ((i * 7919) % 13 - 6) / 97.0;
        len += (size_t)snprintf(text + len, cap - len, "%c,%.17g,%.17g\n", "ABC"[i * 3 / N],
                                xs[i], ys[i]);
    }
    const char *path = tmp(text);
    char args[2048], *out[2] = {NULL, NULL}, *err = NULL;
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args, "--group g --threads %d --output - 'a*x + b' '%s'",
                 k ? 3 : 1, path);
        CHECK(fit(args, &out[k], &err) == 0);
        free(err);
        err = NULL;
    }
    if (CHECK(out[0] && out[1])) {
        CHECK_STREQ(out[1], out[0]);
        const char *p = out[0];
        CHECK(strncmp(p, "g,x,y,fit,residual,fit_stderr\n", 30) == 0);
        p = strchr(p, '\n');
        int rows = 0, bad = 0;
        while (p && p[1]) {
            p++;
            char key = p[0];
            char *e;
            double x = strtod(p + 2, &e), y = strtod(e + 1, &e), f = strtod(e + 1, &e),
                   r = strtod(e + 1, &e);
            if (rows >= N || key != "ABC"[rows * 3 / N] || x != xs[rows] || y != ys[rows] ||
                r != y - f)
                bad++;
            rows++;
            p = strchr(e, '\n');
        }
        CHECK(rows == N);
        if (!CHECK(bad == 0)) fprintf(stderr, "  %d of %d rows differ\n", bad, rows);
    }
    free(out[0]);
    free(out[1]);
    free(text);
    free(xs);
    free(ys);
}

/* The last column of each data row of an --output CSV (fit_stderr), at most max of them. */
static size_t last_column(const char *csv, double *v, size_t max) {
    size_t n = 0;
    const char *p = csv ? strchr(csv, '\n') : NULL;
    while (p && p[1] && n < max) {
        const char *e = strchr(p + 1, '\n');
        const char *c = p + 1;
        for (const char *q = p + 1; q < (e ? e : p + 1 + strlen(p + 1)); q++)
            if (*q == ',') c = q + 1;
        v[n++] = strtod(c, NULL);
        p = e;
    }
    return n;
}

static void band_rank_deficient(double x0, double scale);

/* --output's fit_stderr of a model whose parameters the data do not all determine
 * (a*x + b*x + c: only a + b is) is the prediction's standard error all the same, from the
 * pseudo-inverse: with absolute sigma that of the model k*x + c exactly, and otherwise that
 * times √((n−2)/(n−3)) (s² divides by n minus every parameter, as scipy's curve_fit); also per
 * group with --group. Also where x < 0: there the delta method's inf·x·1 terms of opposite
 * signs summed to NaN, which the pseudo-inverse never replaced. And with x in units 1e15 times
 * larger (the columns of a and b 1e15 times c's): the pseudo-inverse of J as it stands dropped
 * c's direction with the rank-deficient one (its singular value is below ε·n·σ_max), and the
 * band was that of a model without c, up to 97 % too small; with J's columns scaled to unit
 * norm first, as the library's covariance does (solver/covar.c), it is not. */
static void test_band_rank_deficient(void) {
    for (int shift = 0; shift < 2; shift++) band_rank_deficient(shift ? -1.55 : 0.0, 1.0);
    band_rank_deficient(0.0, 1e15);
}

static void band_rank_deficient(double x0, double scale) {
    enum { N = 30 };
    char text[N * 96 + 32];
    size_t len = (size_t)snprintf(text, sizeof text, "g,x,y,s\n");
    for (int i = 0; i < N; i++) {
        double x = x0 + i * 0.1, y = 2 * x + 1 + 0.1 * (((i * 7) % 11) - 5) / 5.0;
        len += (size_t)snprintf(text + len, sizeof text - len, "%s,%.17g,%.17g,%.17g\n",
                                i < N / 2 ? "A" : "B", x * scale, y, 0.05 + 0.01 * (i % 4));
    }
    const char *path = tmp(text);
    static const char *const opts[] = {"--sigma s --absolute-sigma", "--sigma s", "",
                                       "--group g --sigma s --absolute-sigma"};
    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++) {
        char args[1024], *out[2] = {NULL, NULL}, *err = NULL;
        double se[2][N];
        size_t got[2];
        for (int m = 0; m < 2; m++) {
            snprintf(args, sizeof args, "%s --output - '%s' '%s'", opts[k],
                     m ? "k*x + c" : "a*x + b*x + c", path);
            CHECK(fit(args, &out[m], &err) == 0);
            free(err);
            err = NULL;
            got[m] = last_column(out[m], se[m], N);
        }
        CHECK(got[0] == N && got[1] == N);
        double ratio = k == 0 || k == 3 ? 1.0 : sqrt((N - 2.0) / (N - 3.0));
        int bad = 0;
        for (int i = 0; i < N && got[0] == N && got[1] == N; i++)
            if (!(isfinite(se[0][i]) && fabs(se[0][i] - ratio * se[1][i]) <= 1e-9 * se[1][i]))
                bad++;
        if (!CHECK(bad == 0))
            fprintf(stderr, "  %s, x from %g times %g: %d rows differ\n", opts[k], x0, scale, bad);
        free(out[0]);
        free(out[1]);
    }
}

int main(void) {
    if (access(jf_test_cli(), X_OK) != 0) return jf_test_skip("the jitfit command is not built");
    if (!mkdtemp(cache_dir)) return jf_test_skip("cannot create a temporary cache directory");
    test_example();
    test_options();
    test_cache();
    test_bad_data();
    test_usage();
    test_run_json_failures();
    test_default_start();
    test_x_scale();
    test_fix();
    test_output_rows();
    test_band_rank_deficient();
    for (size_t i = 0; i < ntmp; i++) {
        unlink(tmp_paths[i]);
        free(tmp_paths[i]);
    }
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    jf_test_run(cmd, NULL, NULL);
    return jf_test_finish();
}
