/* Every bundled example runs and recovers its known truth: the damped sine (generated with known
 * parameters), NIST Misra1a (certified values), the 2-D Gaussian image, the batch of spectra
 * (--group, with and without per-group starting values) and the job file with several fits.
 * Values are read from the --json output. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testlib.h"

#define EX JF_SOURCE_DIR "/examples/"

/* The value of parameter name in the JSON object starting at obj; NaN when absent. */
static double param(const char *obj, const char *name) {
    char key[128];
    snprintf(key, sizeof key, "{\"name\": \"%s\", \"value\": ", name);
    const char *p = obj ? strstr(obj, key) : NULL;
    return p ? strtod(p + strlen(key), NULL) : NAN;
}

/* Runs `jitfit ARGS`; returns stdout (caller frees) and the exit status in *rc. */
static char *run(const char *args, int *rc) {
    char cmd[2048];
    char *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "'%s' %s", jf_test_cli(), args);
    *rc = jf_test_run(cmd, &out, &err);
    if (*rc != 0) fprintf(stderr, "  `%s` exited %d:\n%s\n", cmd, *rc, err ? err : "");
    free(err);
    return out;
}

static void test_damped_sine(void) {
    int rc;
    char *out = run("fit --json '" EX "damped_sine.jf' '" EX "damped_sine.csv'", &rc);
    CHECK(rc == 0);
    /* Truth a=2, b=0.25, c=1.5, d=0.3, e=0.5; noise sd 0.05-0.1 over 200 points. */
    CHECK(fabs(param(out, "a") - 2) < 0.1);
    CHECK(fabs(param(out, "b") - 0.25) < 0.02);
    CHECK(fabs(param(out, "c") - 1.5) < 0.02);
    CHECK(fabs(param(out, "d") - 0.3) < 0.06);
    CHECK(fabs(param(out, "e") - 0.5) < 0.02);
    free(out);
}

static void test_nist(void) {
    int rc;
    char *out = run("fit --json --ftol 1e-12 --xtol 1e-12 --gtol 1e-12 '" EX "nist_misra1a.jf' '" EX
                    "nist_misra1a.csv'",
                    &rc);
    CHECK(rc == 0);
    CHECK_NEAR(param(out, "b1"), 2.3894212918E+02, 1e-6);
    CHECK_NEAR(param(out, "b2"), 5.5015643181E-04, 1e-6);
    free(out);
}

static void test_gauss2d(void) {
    int rc;
    char *out = run("fit --json '" EX "gauss2d.jf' '" EX "gauss2d.csv'", &rc);
    CHECK(rc == 0);
    CHECK(fabs(param(out, "amp") - 5) < 0.05);
    CHECK(fabs(param(out, "x0") - 13.3) < 0.03);
    CHECK(fabs(param(out, "y0") - 17.8) < 0.03);
    CHECK(fabs(param(out, "sx") - 3.2) < 0.03);
    CHECK(fabs(param(out, "sy") - 4.5) < 0.04);
    CHECK(fabs(param(out, "bg") - 1) < 0.01);
    free(out);
}

/* The object of group g in a --group --json array. */
static const char *group_obj(const char *out, const char *g) {
    char key[64];
    snprintf(key, sizeof key, "\"group\": \"%s\"", g);
    const char *end = out ? strstr(out, key) : NULL;
    if (!end) return NULL;
    const char *start = out, *p = out;
    while ((p = strstr(p, "{\n  \"success\"")) && p < end) start = p++;
    return start;
}

static void test_spectra(void) {
    static const struct {
        const char *g;                    /* sample */
        double amp, mu, w, c0, c1;        /* truth */
    } truth[] = {{"A", 10.0, 45.0, 3.0, 0.5, 0.01},
                 {"B", 7.5, 52.0, 2.5, 0.8, -0.005},
                 {"C", 12.0, 38.5, 4.0, 0.2, 0.02},
                 {"D", 5.0, 60.0, 2.0, 1.0, 0.0}};
    int rc;
    char *out = run("fit --json --group sample --p0-file '" EX "spectra_p0.csv' '" EX
                    "spectra.jf' '" EX "spectra.csv'",
                    &rc);
    CHECK(rc == 0);
    CHECK(out && out[0] == '[');
    for (size_t i = 0; i < 4; i++) {
        const char *o = group_obj(out, truth[i].g);
        if (!CHECK(o != NULL)) continue;
        CHECK(fabs(param(o, "amp") - truth[i].amp) < 0.1);
        CHECK(fabs(param(o, "mu") - truth[i].mu) < 0.05);
        CHECK(fabs(param(o, "w") - truth[i].w) < 0.05);
        CHECK(fabs(param(o, "c0") - truth[i].c0) < 0.08);
        CHECK(fabs(param(o, "c1") - truth[i].c1) < 0.002);
    }
    free(out);
    /* The table, and groups in order of first appearance. */
    out = run("fit --group sample --p0-file '" EX "spectra_p0.csv' '" EX "spectra.jf' '" EX
              "spectra.csv'",
              &rc);
    CHECK(rc == 0);
    CHECK_CONTAINS(out, "4 groups, 4 converged");
    const char *a = out ? strstr(out, "\n  A ") : NULL, *d = out ? strstr(out, "\n  D ") : NULL;
    CHECK(a && d && a < d);
    free(out);
}

static void test_job(void) {
    int rc;
    char *out = run("run '" EX "jobs.ini'", &rc);
    CHECK(rc == 0);
    CHECK_CONTAINS(out, "summary of");
    CHECK_CONTAINS(out, "5 fits");
    /* The second fit of the same model gets its kernels from the in-memory cache. */
    const char *line = out ? strstr(out, "\n  damped-weighted") : NULL;
    CHECK(line && strstr(line, "memory") && strstr(line, "memory") < strchr(line + 1, '\n'));
    free(out);
    out = run("run --json '" EX "jobs.ini'", &rc);
    CHECK(rc == 0);
    CHECK(out && out[0] == '[');
    const char *nist = out ? strstr(out, "\"name\": \"nist\"") : NULL;
    const char *start = out, *p = out;
    while (nist && (p = strstr(p, "{\n  \"success\"")) && p < nist) start = p++;
    CHECK(nist != NULL);
    if (nist) {
        CHECK_NEAR(param(start, "b1"), 2.3894212918E+02, 1e-5);
    }
    const char *g = out ? strstr(out, "\"name\": \"gauss2d\"") : NULL;
    CHECK(g != NULL);
    free(out);
}

int main(void) {
    test_damped_sine();
    test_nist();
    test_gauss2d();
    test_spectra();
    test_job();
    return jf_test_finish();
}
