/* Fit settings as `jitfit fit` options and job-file keys share them (cli/spec.c): values that
 * need more than the end-to-end CLI tests show, read back from the spec. Memory sizes
 * (max_gpu_mem): units as GNU tools read them (K/KiB = 1024, kB = 1000, case-insensitive), the
 * byte count exact, and every malformed or out-of-range size refused with the same message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/spec.c"
#include "cli/util.c"
#include "tests/testlib.h"

static void test_sizes(void) {
    static const struct {
        const char *text;
        size_t bytes;
    } ok[] = {
        {"1", 1},          {"7b", 7},           {"7B", 7},
        {"1e6", 1000000},  {"512M", 536870912}, {"512mib", 536870912},
        {"3kB", 3000},     {"3K", 3072},        {"1.5GiB", 1610612736},
        {"2G", 2147483648u}, {"2GB", 2000000000}, {"1T", (size_t)1 << 40},
        {"0.75k", 768},    {"1.0009", 1},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        jf_spec s;
        jf_spec_init(&s);
        char *msg = NULL;
        int rc = jf_spec_set(&s, "max_gpu_mem", ok[i].text, NULL, NULL, &msg);
        if (!CHECK(rc == JF_SPEC_OK && s.opts.max_gpu_mem == ok[i].bytes))
            fprintf(stderr, "  '%s': rc %d, %zu bytes (want %zu)\n", ok[i].text, rc,
                    s.opts.max_gpu_mem, ok[i].bytes);
        free(msg);
        jf_spec_free(&s);
    }
    static const char *const bad[] = {"0", "-1", "0.5", "12X", "M", "KiB", "1e30", "inf", "nan",
                                      "1 M", "1MM", "2e", "0x10", "1e19"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        jf_spec s;
        jf_spec_init(&s);
        char *msg = NULL;
        int rc = jf_spec_set(&s, "max_gpu_mem", bad[i], NULL, NULL, &msg);
        if (!CHECK(rc == JF_SPEC_BAD)) fprintf(stderr, "  '%s' accepted\n", bad[i]);
        CHECK_CONTAINS(msg, "is not a memory size");
        CHECK(s.opts.max_gpu_mem == 0);
        free(msg);
        jf_spec_free(&s);
    }
    /* NULL text or NULL bytes: -1, as the header says, not a crash */
    size_t bytes = 7;
    CHECK(jf_memory_size_from_text(NULL, &bytes) == -1 && bytes == 7);
    CHECK(jf_memory_size_from_text("1G", NULL) == -1);
    /* the default: no limit of the caller's */
    CHECK(jf_fit_options_default().max_gpu_mem == 0);
}

/* An empty value returns a key to its default, undoing what earlier layers ([defaults], an
 * earlier line, the job file under run's command line) set: a fit section can say "no sigma
 * column here". The lists undo what their own key wrote: p0 the starts of p0 and param (a held
 * parameter keeps the value its fix gave), bounds those of bounds and param, fix the holds and
 * their values. model, data and param NAME have no default: empty is still an error. */
static void test_empty_resets(void) {
    static const char *const strs[] = {"columns", "y", "sigma", "group", "p0_file", "output",
                                       "plot"};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        jf_spec s;
        jf_spec_init(&s);
        char *msg = NULL;
        CHECK(jf_spec_set(&s, strs[i], "some.png", "job.ini:2", NULL, &msg) == JF_SPEC_OK);
        free(msg);
        int rc = jf_spec_set(&s, strs[i], "", "job.ini:5", NULL, &msg);
        if (!CHECK(rc == JF_SPEC_OK)) fprintf(stderr, "  %s: %s\n", strs[i], msg ? msg : "");
        free(msg);
        CHECK(!s.columns && !s.ycol && !s.sigma && !s.group && !s.p0_file && !s.output && !s.plot);
        jf_spec_free(&s);
    }
    /* every option back to jf_fit_options_default() and the spec's own defaults */
    static const struct {
        const char *key, *value;
    } scalars[] = {{"absolute_sigma", "true"}, {"no_cache", "yes"}, {"vector_math", "on"},
                   {"json", "1"}, {"verbose", "true"}, {"loss", "huber"}, {"f_scale", "3"},
                   {"ftol", "1e-3"}, {"xtol", "1e-3"}, {"gtol", "1e-3"}, {"max_nfev", "7"},
                   {"device", "cpu"}, {"backend", "interp"}, {"threads", "3"},
                   {"precision", "single"}, {"max_gpu_mem", "1G"}, {"nan_policy", "omit"},
                   {"x_scale", "a=1, b=2"}};
    jf_spec fresh;
    jf_spec_init(&fresh);
    for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; i++) {
        jf_spec s;
        jf_spec_init(&s);
        char *msg = NULL;
        CHECK(jf_spec_set(&s, scalars[i].key, scalars[i].value, "job.ini:2", NULL, &msg) ==
              JF_SPEC_OK);
        free(msg);
        CHECK(jf_spec_set(&s, scalars[i].key, "", "job.ini:3", NULL, &msg) == JF_SPEC_OK);
        free(msg);
        const jf_fit_options *o = &s.opts, *d = &fresh.opts;
        int same = o->absolute_sigma == d->absolute_sigma && o->loss == d->loss &&
                   o->f_scale == d->f_scale && o->ftol == d->ftol && o->xtol == d->xtol &&
                   o->gtol == d->gtol && o->max_nfev == d->max_nfev && o->device == d->device &&
                   o->nthreads == d->nthreads && o->backend == d->backend &&
                   o->no_cache == d->no_cache && o->single_precision == d->single_precision &&
                   o->vector_math == d->vector_math && o->max_gpu_mem == d->max_gpu_mem &&
                   s.json == fresh.json &&
                   s.verbose == fresh.verbose && s.nan_omit == fresh.nan_omit &&
                   s.device_given == fresh.device_given && !s.x_scale.text && !s.x_scale.origin;
        if (!CHECK(same)) fprintf(stderr, "  '%s =' left a setting\n", scalars[i].key);
        jf_spec_free(&s);
    }
    /* the lists: each empty key undoes its own lines (param counts as p0 and bounds) */
    jf_spec s;
    jf_spec_init(&s);
    char *msg = NULL;
    CHECK(jf_spec_set(&s, "p0", "a=1", "job.ini:2", NULL, &msg) == JF_SPEC_OK);
    CHECK(jf_spec_set(&s, "param b", "2 in [0, 5]", "job.ini:3", NULL, &msg) == JF_SPEC_OK);
    CHECK(jf_spec_set(&s, "fix", "c=3, d", "job.ini:4", NULL, &msg) == JF_SPEC_OK);
    CHECK(jf_spec_set(&s, "bounds", "a=0:9", "job.ini:5", NULL, &msg) == JF_SPEC_OK);
    CHECK(s.np0 == 3 && s.nbounds == 2 && s.nfix == 1);
    CHECK(jf_spec_set(&s, "p0", "", "job.ini:6", NULL, &msg) == JF_SPEC_OK);
    /* the start a fix gave stays with its hold */
    CHECK(s.np0 == 1 && s.p0[0].key && strcmp(s.p0[0].text, "c=3") == 0);
    CHECK(jf_spec_set(&s, "p0", "a=4", "job.ini:7", NULL, &msg) == JF_SPEC_OK);
    CHECK(jf_spec_set(&s, "bounds", "", "job.ini:8", NULL, &msg) == JF_SPEC_OK);
    CHECK(s.nbounds == 0 && s.np0 == 2);
    CHECK(jf_spec_set(&s, "fix", "", "job.ini:9", NULL, &msg) == JF_SPEC_OK);
    CHECK(s.nfix == 0 && s.np0 == 1 && !s.p0[0].key && strcmp(s.p0[0].text, "a=4") == 0);
    /* no default to go back to */
    static const char *const needed[] = {"model", "data", "param a"};
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++) {
        CHECK(jf_spec_set(&s, needed[i], "", "job.ini:9", NULL, &msg) == JF_SPEC_BAD);
        free(msg);
        msg = NULL;
    }
    jf_spec_free(&s);
    jf_spec_free(&fresh);
}

/* `param NAME = START [in [LOW, HIGH]]` keeps its text whole: a start or bound of any length
 * is the number it spells (a fixed buffer cut 0.000...1 to 127 characters, which read as 0),
 * and text after the closing bracket is refused, not dropped. */
static void test_param_whole(void) {
    char zeros[301];
    memset(zeros, '0', 300);
    zeros[300] = '\0';
    char *start = jf_cli_strf("0.%s1", zeros), *want = jf_cli_strf("a=0.%s1", zeros);
    char *bounded = jf_cli_strf("%s in [-0.%s1, 1]", start, zeros);
    char *name = jf_cli_strf("param p%s", zeros), *want_name = jf_cli_strf("p%s=2", zeros);
    jf_spec s;
    jf_spec_init(&s);
    char *msg = NULL;
    CHECK(jf_spec_set(&s, "param a", start, "job.ini:2", NULL, &msg) == JF_SPEC_OK);
    CHECK(s.np0 == 1 && s.nbounds == 0);
    if (s.np0) CHECK_STREQ(s.p0[0].text, want);
    jf_spec_free(&s);
    CHECK(jf_spec_set(&s, "param a", bounded, "job.ini:2", NULL, &msg) == JF_SPEC_OK);
    CHECK(s.np0 == 1 && s.nbounds == 1);
    if (s.np0) CHECK_STREQ(s.p0[0].text, want);
    if (s.nbounds) CHECK_STREQ(s.bounds[0].text, "a=-1e-301:1");
    jf_spec_free(&s);
    CHECK(jf_spec_set(&s, name, "2", "job.ini:2", NULL, &msg) == JF_SPEC_OK);
    if (CHECK(s.np0 == 1)) CHECK_STREQ(s.p0[0].text, want_name);
    jf_spec_free(&s);
    /* nothing may follow the bounds (a job file's comment starts with " ;", not "#") */
    static const char *const trailing[] = {"1 in [0, 2] 3", "[0, 2], b = 1", "[0, 2] # why",
                                           "1 in [0, 2]]"};
    for (size_t i = 0; i < sizeof trailing / sizeof trailing[0]; i++) {
        int rc = jf_spec_set(&s, "param a", trailing[i], "job.ini:2", NULL, &msg);
        if (!CHECK(rc == JF_SPEC_BAD)) fprintf(stderr, "  '%s' accepted\n", trailing[i]);
        CHECK_CONTAINS(msg, "expected bounds as [LOW, HIGH], and nothing after them");
        CHECK(s.np0 == 0 && s.nbounds == 0); /* a refused line changes nothing */
        free(msg);
        msg = NULL;
    }
    jf_spec_free(&s);
    free(start);
    free(want);
    free(bounded);
    free(name);
    free(want_name);
}

int main(void) {
    test_sizes();
    test_empty_resets();
    test_param_whole();
    return jf_test_finish();
}
