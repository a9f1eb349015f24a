/* Tests of code generation (codegen/emit_*.c) and the C JIT backend (runtime/jit_cc.c):
 * exact hex-float constants whatever the locale, golden generated code for a few small models
 * (regenerate with JITFIT_UPDATE_GOLDEN=1 after an intended change and review the diff), no
 * user text in generated code, generated C that compiles cleanly with -Wall -Wextra, several
 * models in one unit, the `jitfit codegen` command, and the fallback to the interpreter when
 * the compiler is missing or fails. Agreement of the compiled kernels with the interpreter is
 * tested at length in test_crosscheck.c. */
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen/emit.h"
#include "runtime/jit_cc.h"
#include "runtime/kernels.h"
#include "tests/testlib.h"

static jf_model *compile(const char *text) {
    jf_model *m = NULL;
    jf_diagnostics *d = NULL;
    int st = jf_model_compile(text, (size_t)-1, NULL, &m, &d);
    if (!CHECK(st == JF_OK)) fprintf(stderr, "model %s: %s\n", text, d ? jf_diagnostics_text(d) : "?");
    jf_diagnostics_free(d);
    return m;
}

static char *fmt_double(double v) {
    jf_buf b = {0};
    jf_buf_double(&b, v);
    return jf_buf_take(&b);
}

static void test_hex_floats(void) {
    static const struct {
        double v;
        const char *text;
    } table[] = {
        {1.0, "0x1p+0"},
        {0.5, "0x1p-1"},
        {3.0, "0x1.8p+1"},
        {-2.5, "(-0x1.4p+1)"},
        {0.1, "0x1.999999999999ap-4"},
        {0.0, "0.0"},
        {-0.0, "(-0.0)"},
        {DBL_MAX, "0x1.fffffffffffffp+1023"},
        {DBL_MIN, "0x1p-1022"},
        {4.9406564584124654e-324, "0x0.0000000000001p-1022"},
        {-2.2250738585072009e-308, "(-0x0.fffffffffffffp-1022)"},
        {1e300, "0x1.7e43c8800759cp+996"},
        {INFINITY, "(1.0/0.0)"},
        {-INFINITY, "(-1.0/0.0)"},
        {NAN, "(0.0/0.0)"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        char *s = fmt_double(table[i].v);
        CHECK_STREQ(s, table[i].text);
        free(s);
    }
    /* Round trip through the C library's parser for many bit patterns (incl. subnormals),
     * with a locale whose radix character is a comma if the system has one: the formatter
     * must not care. */
    const char *loc = setlocale(LC_NUMERIC, "de_DE.UTF-8");
    if (!loc) loc = setlocale(LC_NUMERIC, "fr_FR.UTF-8");
    uint64_t state = 0x9e3779b97f4a7c15u;
    int bad = 0;
    for (int i = 0; i < 20000; i++) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        double v;
        uint64_t bits = state;
        if (i % 4 == 0) bits &= 0x800fffffffffffffu; /* subnormals */
        memcpy(&v, &bits, sizeof v);
        if (!isfinite(v)) continue;
        char *s = fmt_double(v);
        if (!s || strchr(s, ',')) {
            bad++;
            free(s);
            continue;
        }
        /* strip "(" and ")" of negatives, parse in the C locale */
        const char *p = s[0] == '(' ? s + 1 : s;
        setlocale(LC_NUMERIC, "C");
        double back = strtod(p, NULL);
        if (loc) setlocale(LC_NUMERIC, loc);
        if (memcmp(&back, &v, sizeof v) != 0) {
            if (bad < 5) fprintf(stderr, "hex float %s does not round-trip %.17g\n", s, v);
            bad++;
        }
        free(s);
    }
    setlocale(LC_NUMERIC, "C");
    CHECK(bad == 0);
}

/* Compares text with tests/golden/<name>, or rewrites it with JITFIT_UPDATE_GOLDEN=1. */
static void golden(const char *name, const char *text) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/golden/%s", JF_SOURCE_DIR, name);
    const char *upd = getenv("JITFIT_UPDATE_GOLDEN");
    if (upd && strcmp(upd, "1") == 0) {
        FILE *f = fopen(path, "wb");
        if (CHECK(f != NULL)) {
            fputs(text, f);
            fclose(f);
        }
        return;
    }
    char *want = jf_test_read_file(path, NULL);
    if (!CHECK(want != NULL)) {
        fprintf(stderr, "missing golden file %s (JITFIT_UPDATE_GOLDEN=1 creates it)\n", path);
        return;
    }
    if (!CHECK_STREQ(text, want)) fprintf(stderr, "golden file %s differs\n", path);
    free(want);
}

/* The CUDA point loops: the next point's loads ahead (default), or in their own iteration
 * (cuda_no_prefetch: $JITFIT_GPU_PREFETCH=0's knob); sin and cos of one operand one sincos; the
 * sums as fma. */
static void test_cuda_loops(void) {
    jf_model *m = compile("a*exp(-b*x)*sin(c*x+d)+e");
    if (!m) return;
    for (int pre = 0; pre < 2; pre++) {
        jf_emit_options o = jf_emit_options_default(JF_EMIT_CUDA);
        o.with_prelude = 0;
        o.cuda_batch = 1;
        o.cuda_no_prefetch = !pre;
        char *src = jf_emit(m, &o);
        if (!CHECK(src != NULL)) continue;
        /* normal_eq and jf_fit_sums: two loops each way */
        size_t ahead = 0, own = 0;
        for (const char *q = src; (q = strstr(q, "if (i + ")) != NULL; q++) ahead++;
        for (const char *q = src; (q = strstr(q, "const double x0 = x[0 * ldx + i];")) != NULL; q++)
            own++;
        CHECK(ahead == (pre ? 2u : 0u));
        /* residual and jacobian_row load in their own iteration either way, as does the finish's
         * jf_fit_row */
        CHECK(own == (pre ? 3u : 5u));
        /* every kernel that needs both (jacobian_row, normal_eq, jf_fit_sums, jf_fit_row; the
         * residual has sin alone) */
        size_t sc = 0;
        for (const char *q = src; (q = strstr(q, "sincos(")) != NULL; q++) sc++;
        CHECK(sc == 4 && strstr(src, " cos(") == NULL);
        CHECK_CONTAINS(src, "a19 = fma(J4, r, a19);");
        free(src);
    }
    jf_model_free(m);
}

static void test_golden(void) {
    static const struct {
        const char *model;
        const char *name;
    } cases[] = {
        {"a*exp(-b*x)*sin(c*x+d)+e", "damped_sine"},
        {"a*x^2 + b*x + c", "quadratic"},
        {"if(x < c, a, b*(x - c) + a)", "piecewise"},
        {"a*pow(x, b) + abs(c) + hypot(x, d)", "pow_abs"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        jf_model *m = compile(cases[i].model);
        if (!m) continue;
        for (int t = 0; t < 2; t++) {
            jf_emit_options o = jf_emit_options_default(t ? JF_EMIT_CUDA : JF_EMIT_C);
            o.with_prelude = 0;
            char *src = jf_emit(m, &o);
            char name[128];
            snprintf(name, sizeof name, "%s.%s", cases[i].name, t ? "cu" : "c");
            if (CHECK(src != NULL)) golden(name, src);
            free(src);
        }
        jf_model_free(m);
    }
}

static void test_no_user_text(void) {
    jf_model *m = NULL;
    const char *vars[] = {"qqtime"};
    jf_model_options mo = jf_model_options_default();
    mo.vars = vars;
    mo.nvars = 1;
    int st = jf_model_compile("zzamp*exp(-zzrate*qqtime) + zzoffset", (size_t)-1, &mo, &m, NULL);
    if (!CHECK(st == JF_OK)) return;
    for (int t = 0; t < 2; t++) {
        jf_emit_options o = jf_emit_options_default(t ? JF_EMIT_CUDA : JF_EMIT_C);
        char *src = jf_emit(m, &o);
        CHECK(src && !strstr(src, "zz") && !strstr(src, "qq"));
        CHECK(src && strstr(src, "p[2]") && strstr(src, "x[0 * ldx + i]"));
        free(src);
    }
    jf_model_free(m);
}

/* Generated C (with the prelude) compiles without a single warning under -Wall -Wextra, for
 * every shape of the normal_eq loop, and every shape computes the same sums. */
static void test_compiles_cleanly(void) {
    jf_model *m = compile("a*exp(-b*x)*sin(c*x+d)+e + if(x > 2, erf(x), 0)");
    if (!m) return;
    const char *cc = jf_cc_command(NULL);
    const char *ident;
    char why[512];
    if (jf_cc_identity(cc, NULL, &ident, why, sizeof why) != JF_OK) {
        printf("no C compiler (%s): skipping compile checks\n", why);
        jf_model_free(m);
        return;
    }
    enum { N = 1000 };
    static double x[N], y[N], w[N];
    for (int i = 0; i < N; i++) {
        x[i] = -1 + 0.005 * i;
        y[i] = sin(0.37 * i);
        w[i] = 1 + 0.1 * (i % 7);
    }
    double p[5] = {2, 0.3, 1.7, 0.2, 0.5};
    double ref[21];
    for (int shape = 0; shape < 3; shape++) {
        jf_emit_options o = jf_emit_options_default(JF_EMIT_C);
        o.neq_shape = (jf_neq_shape)shape;
        o.block = shape == 2 ? 4 : 8;
        char *src = jf_emit(m, &o);
        char dir[4096], so[4200];
        char *log = NULL;
        if (!CHECK(src && jf_cc_tmpdir(dir, sizeof dir) == JF_OK)) {
            free(src);
            continue;
        }
        int st = jf_cc_compile(cc, "-Wall -Wextra -Werror", src, dir, so, sizeof so, &log);
        if (!CHECK(st == JF_OK)) fprintf(stderr, "shape %d:\n%s\n", shape, log ? log : "");
        char err[512];
        void *h = st == JF_OK ? jf_cc_load_file(so, err, sizeof err) : NULL;
        if (h) {
            void *sym = dlsym(h, "jf_normal_eq");
            void (*neq)(const double *, const double *, size_t, const double *, const double *,
                        size_t, size_t, int, double, double *);
            memcpy(&neq, &sym, sizeof sym);
            for (int loss = 0; loss < 5; loss++) {
                for (int weighted = 0; weighted < 2; weighted++) {
                    double acc[21];
                    neq(p, x, N, y, weighted ? w : NULL, 3, N - 2, loss, 0.8, acc);
                    if (shape == 0 && loss == 1 && weighted == 1) memcpy(ref, acc, sizeof ref);
                    if (shape > 0 && loss == 1 && weighted == 1)
                        for (int q = 0; q < 21; q++) CHECK_NEAR(acc[q], ref[q], 1e-12);
                }
            }
            dlclose(h);
        }
        jf_cc_tmpdir_remove(dir);
        free(log);
        free(src);
    }
    jf_model_free(m);
}

/* Several models in one unit, told apart by their suffixes. */
static void test_many(void) {
    const char *texts[] = {"a*x + b", "a*sin(b*x)", "exp(-a*x)"};
    jf_model *ms[3];
    for (int i = 0; i < 3; i++) ms[i] = compile(texts[i]);
    if (!ms[0] || !ms[1] || !ms[2]) goto out;
    const char *suffixes[] = {"_m0", "_m1", "_m2"};
    jf_emit_options o = jf_emit_options_default(JF_EMIT_C);
    char *src = jf_emit_many((const struct jf_model *const *)ms, suffixes, 3, &o);
    CHECK(src != NULL);
    const char *bad[] = {"_m0", "no space"};
    CHECK(jf_emit_many((const struct jf_model *const *)ms, bad, 2, &o) == NULL);
    char dir[4096], so[4200], err[512];
    if (src && jf_cc_tmpdir(dir, sizeof dir) == JF_OK) {
        if (CHECK(jf_cc_compile(jf_cc_command(NULL), NULL, src, dir, so, sizeof so, NULL) == JF_OK)) {
            void *h = jf_cc_load_file(so, err, sizeof err);
            if (CHECK(h != NULL)) {
                double p[2] = {2, 3}, xv = 0.5, r[1];
                for (int i = 0; i < 3; i++) {
                    char name[64];
                    snprintf(name, sizeof name, "jf_residual%s", suffixes[i]);
                    void *sym = dlsym(h, name);
                    void (*res)(const double *, const double *, size_t, const double *,
                                const double *, size_t, size_t, double *);
                    if (!CHECK(sym != NULL)) continue;
                    memcpy(&res, &sym, sizeof sym);
                    res(p, &xv, 1, NULL, NULL, 0, 1, r);
                    double want;
                    jf_model_eval(ms[i], p, &xv, &want, NULL);
                    CHECK(r[0] == want);
                }
                dlclose(h);
            }
        }
        jf_cc_tmpdir_remove(dir);
    }
    free(src);
out:
    for (int i = 0; i < 3; i++) jf_model_free(ms[i]);
}

static void test_cli(void) {
    char cmd[2048], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "%s codegen 'a*exp(-b*x)+c' --target c", jf_test_cli());
    CHECK(jf_test_run(cmd, &out, &err) == 0);
    CHECK_CONTAINS(out, "void jf_normal_eq(");
    CHECK_CONTAINS(out, "JF_PRELUDE_H");
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "%s codegen 'a*exp(-b*x)+c' --target=cuda --no-prelude",
             jf_test_cli());
    CHECK(jf_test_run(cmd, &out, &err) == 0);
    CHECK_CONTAINS(out, "extern \"C\" __global__ void __launch_bounds__(256)\njf_normal_eq(");
    CHECK_CONTAINS(out, "jf_reduce_blocks(");
    CHECK(out && !strstr(out, "JF_PRELUDE_H"));
    free(out);
    free(err);
    /* a model file path works like inline text */
    char *path = jf_test_tmpfile(".jf", "param a = 1\nparam b = 2\ny ~ a*x + b\n");
    snprintf(cmd, sizeof cmd, "%s codegen %s --no-prelude", jf_test_cli(), path ? path : "/none");
    CHECK(jf_test_run(cmd, &out, &err) == 0);
    CHECK_CONTAINS(out, "const int jf_num_params = 2;");
    free(out);
    free(err);
    if (path) remove(path);
    free(path);
    snprintf(cmd, sizeof cmd, "%s codegen 'a*exq(x)'", jf_test_cli());
    CHECK(jf_test_run(cmd, &out, &err) == 1);
    CHECK_CONTAINS(err, "exq");
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "%s codegen 'a*x' --target fortran", jf_test_cli());
    CHECK(jf_test_run(cmd, &out, &err) == 2);
    CHECK_CONTAINS(err, "unknown target");
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "%s codegen", jf_test_cli());
    CHECK(jf_test_run(cmd, &out, &err) == 2);
    free(out);
    free(err);
    /* the source the JIT builds: above JF_LARGE_P parameters (16; JF_GPU_LARGE_P for CUDA, 90)
     * it has no normal_eq (the sums come through BLAS); $JITFIT_LARGE_P and $JITFIT_GPU_LARGE_P
     * move the thresholds there too */
    char f17[512] = "p0";
    for (int k = 1; k < 17; k++)
        snprintf(f17 + strlen(f17), sizeof f17 - strlen(f17), " + p%d*x^%d", k, k);
    static const struct {
        const char *env, *target;
        int has;
    } big[] = {{"", "c", 0}, {"", "cuda", 1}, {"JITFIT_LARGE_P=17", "c", 1},
               {"JITFIT_GPU_LARGE_P=16", "cuda", 0}};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s %s codegen '%s' --target %s --no-prelude", big[i].env,
                 jf_test_cli(), f17, big[i].target);
        CHECK(jf_test_run(cmd, &out, &err) == 0);
        CHECK_CONTAINS(out, "jf_jacobian_row(");
        if (!CHECK((out && strstr(out, "jf_normal_eq(") != NULL) == big[i].has))
            fprintf(stderr, "  %s codegen --target %s\n", big[i].env, big[i].target);
        /* the CUDA header says whether a kernel sums, and how many values */
        if (strcmp(big[i].target, "cuda") == 0)
            CHECK_CONTAINS(out, big[i].has ? "; normal_eq sums 171 values ---- */"
                                           : "; no normal_eq: the solver forms J^T J");
        free(out);
        free(err);
    }
}

/* No compiler, or one that fails: the interpreter stands in, with a one-line warning. */
static void test_fallback(void) {
    jf_model *m = compile("a*exp(-b*x) + 0.25");
    if (!m) return;
    static const char *ccs[] = {"/nonexistent/jitfit-cc", "cc -fno-such-flag-for-jitfit"};
    for (int i = 0; i < 2; i++) {
        jf_jit_options o;
        memset(&o, 0, sizeof o);
        o.cc = ccs[i];
        o.no_cache = 1;
        jf_kernels *k = NULL;
        char *warn = NULL;
        CHECK(jf_kernels_get(m, JF_BACKEND_C, &o, &k, &warn) == JF_OK);
        if (!CHECK(k != NULL)) continue;
        CHECK(jf_kernels_backend(k) == JF_BACKEND_INTERP);
        CHECK(jf_kernels_cache_result(k) == JF_CACHE_NONE);
        CHECK_CONTAINS(warn, "using the interpreter");
        CHECK(warn && !strchr(warn, '\n'));
        if (i == 0) CHECK_CONTAINS(warn, "not found");
        else CHECK_CONTAINS(warn, "failed");
        /* and the interpreter computes */
        double p[2] = {2, 0.5}, x[3] = {0, 1, 2}, r[3], J[6];
        jf_data_view dv = {x, 3, NULL, NULL};
        jf_kernels_jacobian_row(k, p, &dv, 0, 3, r, J);
        CHECK_NEAR(r[1], 2 * exp(-0.5) + 0.25, 1e-15);
        CHECK_NEAR(J[2], exp(-0.5), 1e-15);
        free(warn);
        jf_kernels_free(k);
    }
    /* $JITFIT_CC is the default compiler */
    setenv("JITFIT_CC", "/nonexistent/other-cc", 1);
    CHECK_STREQ(jf_cc_command(NULL), "/nonexistent/other-cc");
    CHECK_STREQ(jf_cc_command("gcc"), "gcc");
    jf_jit_options o;
    memset(&o, 0, sizeof o);
    o.no_cache = 1;
    jf_kernels *k = NULL;
    char *warn = NULL;
    CHECK(jf_kernels_get(m, JF_BACKEND_C, &o, &k, &warn) == JF_OK);
    CHECK(k && jf_kernels_backend(k) == JF_BACKEND_INTERP);
    CHECK_CONTAINS(warn, "other-cc");
    free(warn);
    jf_kernels_free(k);
    unsetenv("JITFIT_CC");
    /* JF_BACKEND_INTERP asked for: no compiler involved, no warning */
    CHECK(jf_kernels_get(m, JF_BACKEND_INTERP, NULL, &k, &warn) == JF_OK);
    CHECK(k && jf_kernels_backend(k) == JF_BACKEND_INTERP && warn == NULL);
    jf_kernels_free(k);
    CHECK(jf_kernels_get(m, JF_BACKEND_CUDA, NULL, &k, &warn) == JF_ERR_ARG);
    CHECK(jf_kernels_get(NULL, JF_BACKEND_C, NULL, &k, &warn) == JF_ERR_ARG);
    jf_model_free(m);
}

static void test_names(void) {
    CHECK_STREQ(jf_backend_name(JF_BACKEND_INTERP), "interp");
    CHECK_STREQ(jf_backend_name(JF_BACKEND_C), "c");
    CHECK_STREQ(jf_backend_name(JF_BACKEND_CUDA), "cuda");
    CHECK_STREQ(jf_backend_name(42), "?");
    CHECK_STREQ(jf_version(), JITFIT_VERSION);
    CHECK(jf_emit_num_acc(0) == 1 && jf_emit_num_acc(5) == 21 && jf_emit_num_acc(20) == 231);
}

/* A compiler whose `--version` hangs holds up no other compiler's identity: the probe runs
 * outside the lock that guards the list. The fake compiler answers only once the marker file
 * exists, which the main thread creates after its own jf_cc_identity("cc") returned; it gives
 * up after 20 s, so with the probe under the lock (as it was) both calls waited for that and
 * the fake one failed. */
typedef struct slow_cc {
    const char *script;
    int st;
    char ident[256];
} slow_cc;

static void *probe_slow(void *arg) {
    slow_cc *c = arg;
    const char *id = NULL;
    char why[256] = "";
    c->st = jf_cc_identity(c->script, NULL, &id, why, sizeof why);
    snprintf(c->ident, sizeof c->ident, "%s", id ? id : why);
    return NULL;
}

static void test_identity_unlocked(void) {
    char dir[] = "/tmp/jf_test_ident_XXXXXX";
    if (!CHECK(mkdtemp(dir) != NULL)) return;
    char script[128], marker[128];
    snprintf(script, sizeof script, "%s/slowcc", dir);
    snprintf(marker, sizeof marker, "%s/go", dir);
    FILE *f = fopen(script, "w");
    if (!CHECK(f != NULL)) return;
    fprintf(f, "#!/bin/sh\ni=0\nwhile [ ! -e '%s' ]; do\n  i=$((i+1))\n"
               "  [ $i -gt 200 ] && exit 1\n  sleep 0.1\ndone\necho 'slowcc 1.0'\n", marker);
    fclose(f);
    chmod(script, 0755);
    slow_cc c = {script, -1, ""};
    pthread_t t;
    if (!CHECK(pthread_create(&t, NULL, probe_slow, &c) == 0)) return;
    usleep(100000); /* lets the probe start first: without it a broken build could pass */
    const char *id = NULL;
    char why[256] = "";
    CHECK(jf_cc_identity(NULL, NULL, &id, why, sizeof why) == JF_OK);
    FILE *g = fopen(marker, "w");
    if (g) fclose(g);
    pthread_join(t, NULL);
    printf("slow compiler's identity: %s\n", c.ident);
    CHECK(c.st == JF_OK);
    CHECK_CONTAINS(c.ident, "slowcc 1.0");
    /* asked again: remembered, no second probe */
    CHECK(jf_cc_identity(script, NULL, &id, why, sizeof why) == JF_OK && id &&
          strstr(id, "slowcc 1.0"));
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    jf_test_run(cmd, NULL, NULL);
}

/* A compiler that failed its probe is not given up for good: once its file changes (a
 * toolchain installed or repaired while the process runs) it is probed again and used. Before,
 * one failure sent every later fit of the process to the interpreter. */
static void test_identity_retry(void) {
    char dir[] = "/tmp/jf_test_ident_XXXXXX";
    if (!CHECK(mkdtemp(dir) != NULL)) return;
    char script[128];
    snprintf(script, sizeof script, "%s/latecc", dir);
    FILE *f = fopen(script, "w");
    if (!CHECK(f != NULL)) return;
    fprintf(f, "#!/bin/sh\nexit 3\n");
    fclose(f);
    chmod(script, 0755);
    const char *id = NULL;
    char why[256] = "";
    CHECK(jf_cc_identity(script, NULL, &id, why, sizeof why) == JF_ERR_UNAVAILABLE && !id);
    CHECK_CONTAINS(why, "exit status 3");
    /* unchanged and within the minute: the failure stands, without another probe */
    CHECK(jf_cc_identity(script, NULL, &id, why, sizeof why) == JF_ERR_UNAVAILABLE);
    f = fopen(script, "w");
    if (!CHECK(f != NULL)) return;
    fprintf(f, "#!/bin/sh\necho 'latecc 2.0'\n");
    fclose(f);
    id = NULL;
    CHECK(jf_cc_identity(script, NULL, &id, why, sizeof why) == JF_OK && id &&
          strstr(id, "latecc 2.0"));
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    jf_test_run(cmd, NULL, NULL);
}

int main(void) {
    /* Never the user's cache, whatever a test forgets. */
    char cache[] = "/tmp/jf_test_codegen_XXXXXX";
    if (mkdtemp(cache)) setenv("JITFIT_CACHE_DIR", cache, 1);
    test_hex_floats();
    test_golden();
    test_cuda_loops();
    test_no_user_text();
    test_compiles_cleanly();
    test_many();
    test_cli();
    test_fallback();
    test_names();
    test_identity_unlocked();
    test_identity_retry();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache);
    jf_test_run(cmd, NULL, NULL);
    return jf_test_finish();
}
