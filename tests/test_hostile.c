/* Hostile input for the front end: text that looks like C or shell code, control bytes, NULs,
 * invalid UTF-8, pathological nesting (100000 '('), megabyte inputs, 10^5-term sums and a few
 * thousand random byte strings (fixed seed). None may crash, hang or leak (the sanitizer build
 * checks the last); each must compile or fail with at least one located-or-not error.
 * Also: the process locale must not change how numbers are read, compiles may run in parallel
 * threads, and a failure of any single allocation must give JF_ERR_NOMEM (or a result that
 * does not depend on it), never a crash or a leak.
 */
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/jitfit.h"
#include "tests/testlib.h"

/* Compiles text[0..len) and checks the contract of jf_model_compile; returns the status. */
static int compile_checked(const char *text, size_t len, const jf_model_options *o,
                           const char *label) {
    jf_model *m = (jf_model *)1;
    jf_diagnostics *d = NULL;
    int st = jf_model_compile(text, len, o, &m, &d);
    int ok = 1;
    if (st == JF_OK) {
        ok &= CHECK(m != NULL);
        ok &= CHECK(jf_diagnostics_errors(d) == 0);
        if (m) {
            for (size_t k = 0; k < jf_model_num_params(m); k++)
                ok &= CHECK(jf_model_param_name(m, k) != NULL);
            for (size_t j = 0; j < jf_model_num_vars(m); j++)
                ok &= CHECK(jf_model_var_name(m, j) != NULL);
            ok &= CHECK(jf_model_response_name(m) != NULL);
        }
    } else {
        ok &= CHECK(m == NULL);
        ok &= CHECK(st == JF_ERR_PARSE || st == JF_ERR_LIMIT);
        ok &= CHECK(d != NULL && jf_diagnostics_errors(d) >= 1);
        /* rendering quotes source lines: keep it to texts of reasonable size */
        if (d && len <= 65536) ok &= CHECK(jf_diagnostics_text(d) != NULL);
    }
    if (!ok) fprintf(stderr, "input: %s (status %d)\n", label, st);
    jf_model_free(m);
    jf_diagnostics_free(d);
    return st;
}

static int compile_str(const char *s) { return compile_checked(s, strlen(s), NULL, s); }

static void test_code_lookalikes(void) {
    /* Each of these must be rejected: they cannot be read as a formula. */
    static const char *const bad[] = {
        "x); system(\"rm -rf /\"); (",
        "$(reboot)",
        "`reboot`",
        "a*x \"; DROP TABLE models; --",
        "'a'*x",
        "#include <stdio.h>",
        "/* comment */ a*x",
        "a*x // comment",
        "a*x; }; int main() { return 0; } {",
        "p[0]*x",
        "__asm__(\"int3\")",
        "a\\\nb",
        "y ~ a*x\n}",
        "{a}",
        "a @ b",
        "a | b && c",
        "x . y",
        "!x",
        "a = b = c",
        "${HOME}",
        "%s%s%s%n",
        "a*x\x1b[31m",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(compile_str(bad[i]) != JF_OK);

    /* Names that are C keywords or library functions are ordinary parameters: user text never
     * reaches generated code, which names them p[k]. */
    jf_model *m = NULL;
    CHECK(jf_model_compile("int*x + return + system + main + printf + __LINE__ + x0", (size_t)-1,
                           NULL, &m, NULL) == JF_OK);
    if (m) {
        CHECK(jf_model_num_params(m) == 7);
        CHECK_STREQ(jf_model_param_name(m, 2), "system");
    }
    jf_model_free(m);

    /* NUL bytes are errors, not the end of the text. */
    static const char nul1[] = "a*x\0+b";
    CHECK(compile_checked(nul1, sizeof nul1 - 1, NULL, "a*x NUL +b") == JF_ERR_PARSE);
    static const char nul2[] = "\0";
    CHECK(compile_checked(nul2, 1, NULL, "NUL") == JF_ERR_PARSE);
    /* ... but inside a comment they are just comment text. */
    static const char nul3[] = "a*x # \0 comment";
    CHECK(compile_checked(nul3, sizeof nul3 - 1, NULL, "NUL in a comment") == JF_OK);

    /* A UTF-8 byte-order mark at the start is skipped; anywhere else it is an error. */
    CHECK(compile_str("\357\273\277a*x") == JF_OK);
    CHECK(compile_str("a*x\xef\xbb\xbf") == JF_ERR_PARSE);

    /* Invalid UTF-8, overlong encodings, control characters. */
    static const char *const bytes[] = {
        "\377\376a*x", "a*\xc0\xaf", "a*x\x01", "a\x08*x",
        "\xed\xa0\x80", "a*x\xf4\x90\x80\x80",
    };
    for (size_t i = 0; i < sizeof bytes / sizeof bytes[0]; i++)
        CHECK(compile_str(bytes[i]) == JF_ERR_PARSE);
}

/* n copies of unit, then tail; caller frees. */
static char *repeat(const char *unit, size_t n, const char *tail, size_t *len) {
    size_t u = strlen(unit), t = strlen(tail);
    char *s = malloc(u * n + t + 1);
    if (!s) return NULL;
    for (size_t i = 0; i < n; i++) memcpy(s + i * u, unit, u);
    memcpy(s + u * n, tail, t + 1);
    *len = u * n + t;
    return s;
}

static void test_deep_nesting(void) {
    static const struct {
        const char *unit, *tail;
    } deep[] = {
        {"(", ""}, {"(", "x"}, {"-", "x"}, {"+", "x"}, {"exp(", "x"}, {"x^", "x"},
        {"x?x:", "x"}, {"2^-", "x"}, {"min(x,", "x"}, {"if(x,x,", "x"},
    };
    for (size_t i = 0; i < sizeof deep / sizeof deep[0]; i++) {
        size_t len;
        char *s = repeat(deep[i].unit, 100000, deep[i].tail, &len);
        if (!s) continue;
        jf_diagnostics *d = NULL;
        jf_model *m = NULL;
        int st = jf_model_compile(s, len, NULL, &m, &d);
        if (!CHECK(st == JF_ERR_LIMIT)) fprintf(stderr, "deep '%s': %d\n", deep[i].unit, st);
        CHECK_STREQ(jf_diagnostic_message(d, 0), "expression nests deeper than 256 levels");
        CHECK(jf_diagnostic_line(d, 0) == 1);
        jf_model_free(m);
        jf_diagnostics_free(d);
        free(s);
    }

    /* 100000 balanced parentheses around x */
    size_t n = 100000, len = 2 * n + 1;
    char *s = malloc(len + 1);
    if (s) {
        memset(s, '(', n);
        s[n] = 'x';
        memset(s + n + 1, ')', n);
        s[len] = '\0';
        CHECK(compile_checked(s, len, NULL, "100000 balanced parentheses") == JF_ERR_LIMIT);

        /* An unbounded max_depth is clamped, so bison's stack stays bounded. */
        jf_model_options o = jf_model_options_default();
        o.max_depth = SIZE_MAX;
        CHECK(compile_checked(s, len, &o, "100000 parentheses, max_depth SIZE_MAX") == JF_OK);
        free(s);
    }
    s = repeat("(", 300000, "x", &len);
    if (s) {
        jf_model_options o = jf_model_options_default();
        o.max_depth = SIZE_MAX;
        jf_diagnostics *d = NULL;
        jf_model *m = NULL;
        CHECK(jf_model_compile(s, len, &o, &m, &d) == JF_ERR_LIMIT);
        CHECK(jf_diagnostic_column(d, 0) == 100001);
        jf_model_free(m);
        jf_diagnostics_free(d);
        free(s);
    }
    /* Deep unary chains allowed by a large max_depth end at the DAG's depth limit or fold. */
    s = repeat("-", 50000, "x", &len);
    if (s) {
        jf_model_options o = jf_model_options_default();
        o.max_depth = 60000;
        int st = compile_checked(s, len, &o, "50000 unary minus");
        CHECK(st == JF_OK || st == JF_ERR_LIMIT);
        free(s);
    }
}

static void test_big_inputs(void) {
    size_t mb = 1000000, len;
    char *s = malloc(mb + 1);
    if (!s) return;

    /* 10^5-term sums: longer than the DAG's depth limit */
    char *t = repeat("x+", 99999, "x", &len);
    if (t) {
        CHECK(compile_checked(t, len, NULL, "x+x+...") == JF_ERR_LIMIT);
        free(t);
    }
    t = repeat("x*", 99999, "x", &len);
    if (t) {
        int st = compile_checked(t, len, NULL, "x*x*...");
        CHECK(st == JF_OK || st == JF_ERR_LIMIT);
        free(t);
    }
    t = malloc(100000 * 10);
    if (t) {
        size_t k = 0;
        for (int i = 0; i < 100000; i++) k += (size_t)sprintf(t + k, "%sa%d", i ? "+" : "", i);
        CHECK(compile_checked(t, k, NULL, "a0+a1+...") == JF_ERR_LIMIT);
        free(t);
    }

    /* 10^6-byte texts of every shape */
    static const char *const units[] = {"x+", "a\n", ";", "\n", "(", ")", "2x\n", "# c\n",
                                        "let a = 1\n", "param a = 1\n", "var q\n", "\xff", "~"};
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        size_t ul = strlen(units[u]);
        for (size_t i = 0; i < mb; i++) s[i] = units[u][i % ul];
        s[mb] = '\0';
        compile_checked(s, mb, NULL, units[u]);
    }
    memset(s, 'a', mb);
    CHECK(compile_checked(s, mb, NULL, "one 10^6-byte name") == JF_OK);
    memset(s, 0, mb);
    CHECK(compile_checked(s, mb, NULL, "10^6 NULs") == JF_ERR_PARSE);
    uint32_t seed = 12345;
    for (size_t i = 0; i < mb; i++) {
        seed = seed * 1664525u + 1013904223u;
        s[i] = (char)(32 + (seed >> 24) % 95);
    }
    compile_checked(s, mb, NULL, "10^6 random printable bytes");

    /* over the size limit: refused before parsing */
    char *big = malloc(2 * mb);
    if (big) {
        memset(big, 'x', 2 * mb);
        jf_diagnostics *d = NULL;
        jf_model *m = NULL;
        CHECK(jf_model_compile(big, 2 * mb, NULL, &m, &d) == JF_ERR_LIMIT);
        CHECK_CONTAINS(jf_diagnostic_message(d, 0), "model text is 2000000 bytes; the limit is");
        jf_model_free(m);
        jf_diagnostics_free(d);
        free(big);
    }
    free(s);
}

/* Random inputs: raw bytes, and token soup that gets deeper into the grammar. */
static void test_random(void) {
    static const char *const vocab[] = {
        "a", "b", "x", "e", "pi", "exp", "sin", "atan2", "if", "min", "param", "var", "let",
        "in", "inf", "1", "2.5", ".5", "1e-3", "1e999", "2x", "+", "-", "*", "/", "^", "(",
        ")", "[", "]", ",", ";", "\n", "=", "~", "?", ":", "<", "<=", "==", "!=", ">", ">=",
        " ", "#", "$", "\r\n", "\t", "y",
    };
    const size_t nv = sizeof vocab / sizeof vocab[0];
    uint32_t seed = 20240611;
    char buf[2048];
    for (int round = 0; round < 3000; round++) {
        seed = seed * 1664525u + 1013904223u;
        size_t len = (seed >> 16) % 200;
        for (size_t i = 0; i < len; i++) {
            seed = seed * 1664525u + 1013904223u;
            buf[i] = (char)(seed >> 24);
        }
        compile_checked(buf, len, NULL, "random bytes");
    }
    int compiled = 0;
    for (int round = 0; round < 3000; round++) {
        seed = seed * 1664525u + 1013904223u;
        size_t ntok = (seed >> 16) % 40, len = 0;
        for (size_t i = 0; i < ntok; i++) {
            seed = seed * 1664525u + 1013904223u;
            const char *w = vocab[(seed >> 16) % nv];
            size_t wl = strlen(w);
            memcpy(buf + len, w, wl);
            len += wl;
        }
        if (compile_checked(buf, len, NULL, "token soup") == JF_OK) compiled++;
    }
    CHECK(compiled > 0); /* the soup does reach the resolver and the DAG */
}

/* Numbers are read in the "C" locale whatever the process locale is. */
static void test_locale(void) {
    static const char *const locales[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8",
                                          "fr_FR.utf8", "ru_RU.UTF-8", "C.UTF-8"};
    const char *set = NULL;
    for (size_t i = 0; i < sizeof locales / sizeof locales[0] && !set; i++)
        set = setlocale(LC_ALL, locales[i]);
    jf_model *m = NULL;
    CHECK(jf_model_compile("param a = 2.5\ny ~ a*x + 0.25", (size_t)-1, NULL, &m, NULL) == JF_OK);
    if (m) {
        double v = 0, p = 2.5, x = 2;
        CHECK(jf_model_param_initial(m, 0) == 2.5);
        CHECK(jf_model_eval(m, &p, &x, &v, NULL) == JF_OK && v == 5.25);
    }
    jf_model_free(m);
    setlocale(LC_ALL, "C");
}

static void *compile_many(void *arg) {
    int *failures = arg;
    for (int i = 0; i < 200; i++) {
        jf_model *m = NULL;
        jf_diagnostics *d = NULL;
        int st = jf_model_compile("param a = 1.5 in [0, 10]\nlet u = a*exp(-b*x)\ny ~ u + c",
                                  (size_t)-1, NULL, &m, &d);
        if (st != JF_ERR_PARSE) (*failures)++; /* b and c are undeclared */
        jf_diagnostics_free(d);
        jf_model_free(m);
        st = jf_model_compile("a*exp(-b*x)*sin(c*x+d)+e", (size_t)-1, NULL, &m, NULL);
        if (st != JF_OK || jf_model_num_params(m) != 5) (*failures)++;
        jf_model_free(m);
    }
    return NULL;
}

/* One diagnostics list rendered by several threads at once (a const object, so allowed): all
 * must get the one cached text; a second copy would leak (the sanitizer build) and differ. */
typedef struct render_ctx {
    const jf_diagnostics *d;
    int *go;
    const char *text;
} render_ctx;

static void *render_shared(void *arg) {
    render_ctx *c = arg;
    while (!__atomic_load_n(c->go, __ATOMIC_ACQUIRE)) {
    }
    c->text = jf_diagnostics_text(c->d);
    return NULL;
}

static void test_shared_diagnostics(void) {
    /* fifty errors quoting a long line: rendering takes long enough for the threads to meet */
    char text[64 * 8] = "y ~ ";
    for (int i = 0; i < 60; i++) strcat(text, "foo(x)+");
    strcat(text, "a");
    int differ = 0;
    for (int it = 0; it < 300; it++) {
        jf_model *m = NULL;
        jf_diagnostics *d = NULL;
        CHECK(jf_model_compile(text, (size_t)-1, NULL, &m, &d) == JF_ERR_PARSE && d);
        int go = 0;
        render_ctx c[3];
        pthread_t th[3];
        int started = 0;
        for (int i = 0; i < 3; i++) {
            c[i] = (render_ctx){d, &go, NULL};
            if (pthread_create(&th[i], NULL, render_shared, &c[i]) != 0) break;
            started++;
        }
        __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
        for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
        for (int i = 0; i < started; i++) differ += c[i].text != jf_diagnostics_text(d);
        jf_diagnostics_free(d);
    }
    CHECK(differ == 0);
}

static void test_threads(void) {
    test_shared_diagnostics();
    pthread_t th[4];
    int failures[4] = {0};
    int started = 0;
    for (int i = 0; i < 4; i++)
        if (pthread_create(&th[i], NULL, compile_many, &failures[i]) == 0) started++;
        else break;
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < started; i++) CHECK(failures[i] == 0);
}


/* ---- allocation failure injection ----------------------------------------------------------
 * With glibc, a program may replace malloc and friends (glibc's own internal calls then use the
 * replacement too); the replacements here forward to glibc and can fail the k-th allocation of
 * an armed window, counting allocations minus frees to find leaks. Not in sanitizer builds
 * (ASan, MSan, TSan), whose runtimes own malloc. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer) || \
    __has_feature(thread_sanitizer)
#define JF_TEST_OWN_MALLOC 0
#endif
#endif
#ifndef JF_TEST_OWN_MALLOC
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define JF_TEST_OWN_MALLOC 1
#else
#define JF_TEST_OWN_MALLOC 0
#endif
#endif

#if JF_TEST_OWN_MALLOC
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);

static int alloc_armed;       /* 1 while allocations are counted and may fail */
static long alloc_countdown;  /* allocations left before the one that fails (-1: none) */
static long alloc_net;        /* successful allocations minus frees while armed */
static int alloc_failed;      /* 1 once the chosen allocation has failed */

static int alloc_should_fail(void) {
    if (!alloc_armed || alloc_countdown < 0) return 0;
    if (alloc_countdown-- == 0) {
        alloc_failed = 1;
        return 1;
    }
    return 0;
}

void *malloc(size_t n) {
    if (alloc_should_fail()) return NULL;
    void *p = __libc_malloc(n);
    if (p && alloc_armed) alloc_net++;
    return p;
}

void *calloc(size_t n, size_t size) {
    if (alloc_should_fail()) return NULL;
    void *p = __libc_calloc(n, size);
    if (p && alloc_armed) alloc_net++;
    return p;
}

void *realloc(void *old, size_t n) {
    if (alloc_should_fail()) return NULL;
    void *p = __libc_realloc(old, n);
    if (alloc_armed) {
        if (!old && p) alloc_net++;
        else if (old && !p && n == 0) alloc_net--;
    }
    return p;
}

void free(void *p) {
    if (p && alloc_armed) alloc_net--;
    __libc_free(p);
}

/* Compiles text with allocation k failing, for k = 0, 1, ... until no allocation is left to
 * fail. ok_status is what the text gives when nothing fails. */
static void alloc_failure_sweep(const char *text, int ok_status) {
    long k;
    for (k = 0; k < 100000; k++) {
        jf_model *m = NULL;
        jf_diagnostics *d = NULL;
        alloc_net = 0;
        alloc_failed = 0;
        alloc_countdown = k;
        alloc_armed = 1;
        int st = jf_model_compile(text, (size_t)-1, NULL, &m, &d);
        if (d) (void)jf_diagnostics_text(d);
        jf_model_free(m);
        jf_diagnostics_free(d);
        alloc_armed = 0;
        int ok = CHECK(st == ok_status || (alloc_failed && st == JF_ERR_NOMEM));
        ok &= CHECK(st == JF_OK ? m != NULL : 1);
        ok &= CHECK(alloc_net == 0);
        if (!ok) fprintf(stderr, "allocation %ld failing: status %d, net allocations %ld\n", k,
                         st, alloc_net);
        if (!alloc_failed) break; /* every allocation has had its turn */
    }
    CHECK(k > 10);
}
#endif

static void test_alloc_failures(void) {
#if JF_TEST_OWN_MALLOC
    alloc_failure_sweep("# a model file\nparam a = 2.0 in [0, inf]\nparam b = 1\nparam c = 3\n"
                        "var t\nlet env = a*exp(-b*t)\nlet unused = 2\n"
                        "y ~ env*sin(3*t) + if(t > 1, t^2, -t) + atan2(t, 2)\n",
                        JF_OK);
    alloc_failure_sweep("param amp = 1\ny ~ amq*exq(x) + (1\nz ~ 2x\n", JF_ERR_PARSE);
    alloc_failure_sweep("a*x + b/c - pi", JF_OK);
#else
    printf("allocation failure injection skipped (sanitizer build)\n");
#endif
}

int main(void) {
    test_alloc_failures();
    test_code_lookalikes();
    test_deep_nesting();
    test_big_inputs();
    test_random();
    test_locale();
    test_threads();
    return jf_test_finish();
}
