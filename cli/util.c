/* Shared helpers of the jitfit command (see util.h). Numbers are parsed and printed through a
 * "C" locale object so the command behaves the same whatever LC_NUMERIC says. */
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../runtime/text.h"
#include "decimal.h"

char *jf_cli_vstrf(const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s) vsnprintf(s, (size_t)n + 1, fmt, again);
    va_end(again);
    return s;
}

char *jf_cli_strf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = jf_cli_vstrf(fmt, ap);
    va_end(ap);
    return s;
}

/* The first line of the last error printed, for `run --json`'s object of a failed fit, and of
 * the first one since the last clearing, for the object of a job that could not start; NULL
 * for none. Whole, as stderr has them. */
static char *last_error, *first_error;

void jf_cli_note_error(const char *msg) {
    size_t n = strcspn(msg, "\n");
    char *copy = strndup(msg, n);
    if (!copy) return; /* out of memory: the previous one stays */
    free(last_error);
    last_error = copy;
    if (!n) {
        free(first_error);
        first_error = NULL;
    } else if (!first_error) {
        first_error = strdup(copy);
    }
}

const char *jf_cli_last_error(void) {
    return last_error ? last_error : "";
}

const char *jf_cli_first_error(void) {
    return first_error ? first_error : "";
}

/* The fit of a job whose errors are being printed, or NULL. */
static const char *error_fit;

void jf_cli_error_fit(const char *name) {
    error_fit = name;
}

void jf_cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *msg = jf_cli_vstrf(fmt, ap);
    va_end(ap);
    if (!msg) {
        fputs("jitfit: out of memory\n", stderr);
        return;
    }
    /* A message quotes the user's text (a job file's value, a column name): its control bytes,
     * an escape sequence say, must not reach the terminal. Messages are one line. */
    jf_text_printable(msg, strlen(msg), 0);
    if (error_fit) fprintf(stderr, "jitfit: [fit %s]: %s\n", error_fit, msg);
    else fprintf(stderr, "jitfit: %s\n", msg);
    jf_cli_note_error(msg);
    free(msg);
}

static locale_t c_loc = (locale_t)0;
static void make_c_locale(void) { c_loc = newlocale(LC_ALL_MASK, "C", (locale_t)0); }

/* The C locale object, made once (--output formats numbers on several threads). */
static locale_t c_locale(void) {
    static pthread_once_t made = PTHREAD_ONCE_INIT;
    pthread_once(&made, make_c_locale);
    return c_loc;
}

/* A model argument that reads as a file's name rather than a formula: no blanks, and a '.'
 * after a letter ("peak.model": formulas have '.' only in numbers) or nothing but names and
 * '/' ("models/peak"). Only used to explain a formula that does not compile, or compiles with
 * a warning ("models/peak" is a quotient of two parameters without x; "a/x" has none). */
static int looks_like_path(const char *arg) {
    int only_names = 1;
    for (const char *c = arg; *c; c++) {
        if (isspace((unsigned char)*c)) return 0;
        if (*c == '.' && c > arg && (isalpha((unsigned char)c[-1]) || c[-1] == '_')) return 1;
        if (!isalnum((unsigned char)*c) && *c != '_' && *c != '/') only_names = 0;
    }
    return only_names && strchr(arg, '/');
}

/* 1 when arg ends in ".jf": a missing one is an error of its own, never read as a formula
 * (a formula cannot end in ".jf"). */
static int is_jf_name(const char *arg) {
    size_t n = strlen(arg);
    return n > 3 && strcmp(arg + n - 3, ".jf") == 0;
}

jf_model *jf_cli_load_model_ex(const char *arg, const char *text_name, const char *const *vars,
                               size_t nvars, jf_diagnostics **keep) {
    jf_model_options o = jf_model_options_default();
    o.vars = vars;
    o.nvars = nvars;
    jf_model *m = NULL;
    jf_diagnostics *d = NULL;
    struct stat st;
    int st_code;
    if (is_jf_name(arg) && stat(arg, &st) != 0) {
        /* a model file's name, not a formula (which cannot end in ".jf") */
        jf_cli_error("%s: %s", arg, strerror(errno));
        if (keep) *keep = NULL;
        return NULL;
    }
    if (stat(arg, &st) == 0 && S_ISREG(st.st_mode)) {
        o.source_name = arg;
        st_code = jf_model_compile_file(arg, &o, &m, &d);
    } else {
        o.source_name = text_name;
        st_code = jf_model_compile(arg, (size_t)-1, &o, &m, &d);
    }
    if (st_code != JF_OK && !d) jf_cli_error("%s", jf_status_string(st_code));
    if (keep) {
        *keep = d;
        return m;
    }
    jf_cli_print_model_diagnostics(arg, m, d);
    return m;
}

void jf_cli_print_model_diagnostics(const char *arg, const jf_model *m, jf_diagnostics *d) {
    /* asked before printing: jf_cli_print_diagnostics frees d */
    int flagged = !m || jf_diagnostics_count(d) > 0;
    jf_cli_print_diagnostics(d);
    if (flagged) jf_cli_note_missing_model_file(arg);
}

void jf_cli_note_missing_model_file(const char *arg) {
    struct stat st;
    /* a missing "x.jf" already said "No such file"; it was not read as a formula */
    if (!is_jf_name(arg) && looks_like_path(arg) && stat(arg, &st) != 0)
        fprintf(stderr, "jitfit: note: there is no model file '%s' (%s), so it was read as a "
                        "formula\n", arg, strerror(errno));
}

int jf_cli_cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void jf_cli_print_diagnostics(jf_diagnostics *d) {
    if (d) fputs(jf_diagnostics_text(d), stderr);
    /* the first error's line as printed ("SOURCE:LINE:COL: error: message") */
    const char *text = d ? jf_diagnostics_text(d) : "", *e = strstr(text, ": error: ");
    if (e) {
        while (e > text && e[-1] != '\n') e--;
        jf_cli_note_error(e);
    }
    jf_diagnostics_free(d);
}

jf_model *jf_cli_load_model(const char *arg, const char *const *vars, size_t nvars) {
    return jf_cli_load_model_ex(arg, "<command line>", vars, nvars, 0);
}

int jf_cli_parse_double(const char *s, double *out) {
    if (!s || !*s) return -1;
    while (*s == ' ') s++;
    const char *t = s;
    int neg = 0;
    if (*t == '+' || *t == '-') neg = *t++ == '-';
    if (strcmp(t, "inf") == 0 || strcmp(t, "Inf") == 0 || strcmp(t, "INF") == 0) {
        *out = neg ? -INFINITY : INFINITY;
        return 0;
    }
    char *end = NULL;
    locale_t prev = uselocale(c_locale());
    double v = strtod(s, &end);
    uselocale(prev);
    if (end == s) return -1;
    while (*end == ' ') end++;
    if (*end) return -1;
    *out = v;
    return 0;
}

void jf_cli_assign_free(jf_cli_assign *a, long n) {
    if (!a) return;
    for (long i = 0; i < n; i++) {
        free(a[i].name);
        free(a[i].value);
    }
    free(a);
}

long jf_cli_split_assignments(const char *text, jf_cli_assign **out, char **msg) {
    *out = NULL;
    *msg = NULL;
    long n = 0, cap = 0;
    jf_cli_assign *items = NULL;
    const char *p = text;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (!eq || eq == p) {
            *msg = jf_cli_strf("expected NAME=VALUE, got '%.*s'", (int)len, p);
            jf_cli_assign_free(items, n);
            return -1;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            jf_cli_assign *ni = realloc(items, (size_t)cap * sizeof *ni);
            if (!ni) {
                jf_cli_assign_free(items, n);
                return -1;
            }
            items = ni;
        }
        size_t nl = (size_t)(eq - p);
        while (nl && p[nl - 1] == ' ') nl--;
        const char *nb = p;
        while (*nb == ' ' && nl) nb++, nl--;
        items[n].name = strndup(nb, nl);
        items[n].value = strndup(eq + 1, len - (size_t)(eq - p) - 1);
        n++;
        if (!items[n - 1].name || !items[n - 1].value) {
            jf_cli_assign_free(items, n);
            return -1;
        }
        p += len;
        if (*p == ',') p++;
    }
    *out = items;
    return n;
}

int jf_cli_assign_by_name(const jf_model *m, int vars, const char *text, const char *what,
                          double *values, int *set, char **msg) {
    jf_cli_assign *a = NULL;
    char *why = NULL;
    *msg = NULL;
    long n = jf_cli_split_assignments(text, &a, &why);
    if (n < 0) {
        if (why) *msg = jf_cli_strf("%s: %s", what, why);
        free(why);
        return -1;
    }
    size_t count = vars ? jf_model_num_vars(m) : jf_model_num_params(m);
    /* A name twice in one list is a slip (which value was meant?), not a last-one-wins. */
    unsigned char *seen = calloc(count ? count : 1, 1);
    int rc = seen ? 0 : -1;
    for (long i = 0; i < n && rc == 0; i++) {
        size_t k = 0;
        double v;
        while (k < count) {
            const char *nm = vars ? jf_model_var_name(m, k) : jf_model_param_name(m, k);
            if (strcmp(nm, a[i].name) == 0) break;
            k++;
        }
        if (k == count) {
            *msg = jf_cli_strf("%s: the model has no %s '%s'", what, vars ? "variable" : "parameter",
                               a[i].name);
            rc = -1;
        } else if (jf_cli_parse_double(a[i].value, &v) != 0 || isnan(v)) {
            /* NaN would read as "no value given" downstream, silently replaced by a default */
            *msg = jf_cli_strf("%s: '%s' is not a number (for '%s')", what, a[i].value, a[i].name);
            rc = -1;
        } else if (seen[k]) {
            *msg = jf_cli_strf("%s: '%s' is given twice", what, a[i].name);
            rc = -1;
        } else {
            values[k] = v;
            seen[k] = 1;
            if (set) set[k] = 1;
        }
    }
    free(seen);
    jf_cli_assign_free(a, n);
    return rc;
}

/* "%.Pg" of the number (-1)^neg × 0.d[0]d[1]…d[len-1] × 10^(x+1) (d without trailing zeros:
 * d[0] is the 10^x digit), as glibc writes it: fixed when -4 <= x < P, else d.ddde±XX. */
static void layout_g(char *out, int neg, const char *d, int len, int x, int prec) {
    char *o = out;
    if (neg) *o++ = '-';
    if (x >= -4 && x < prec) {
        if (x >= 0) {
            for (int i = 0; i <= x; i++) *o++ = i < len ? d[i] : '0';
            if (len > x + 1) {
                *o++ = '.';
                for (int i = x + 1; i < len; i++) *o++ = d[i];
            }
        } else {
            *o++ = '0';
            *o++ = '.';
            for (int i = 0; i < -x - 1; i++) *o++ = '0';
            for (int i = 0; i < len; i++) *o++ = d[i];
        }
    } else {
        *o++ = d[0];
        if (len > 1) {
            *o++ = '.';
            for (int i = 1; i < len; i++) *o++ = d[i];
        }
        *o++ = 'e';
        *o++ = x < 0 ? '-' : '+';
        int ax = x < 0 ? -x : x;
        if (ax >= 100) *o++ = (char)('0' + ax / 100);
        *o++ = (char)('0' + ax / 10 % 10);
        *o++ = (char)('0' + ax % 10);
    }
    *o = '\0';
}

/* Rounds the 17 digits d17 (of "%.16e": the value correctly rounded to 17 digits) to prec
 * digits into d, *len without trailing zeros, *x adjusted for a carry: the digits "%.{prec}e"
 * gives, derived from the 17 without formatting again. 0 when the 17 digits cannot tell (the
 * dropped ones are 5 then zeros: the value may lie on either side of that half, or on it), and
 * the caller formats with glibc. */
static int round_digits(const char *d17, int prec, char *d, int *len, int *x) {
    int up = 0;
    if (prec < 17) {
        int rest = 0;
        for (int i = prec + 1; i < 17; i++) rest |= d17[i] != '0';
        if (d17[prec] == '5' && !rest) return 0;
        up = d17[prec] >= '5';
    }
    memcpy(d, d17, (size_t)prec);
    for (int i = prec - 1; up && i >= 0; i--) {
        if (d[i] == '9') {
            d[i] = '0';
        } else {
            d[i]++;
            up = 0;
        }
    }
    if (up) { /* 99…9 became 100…0 */
        d[0] = '1';
        ++*x;
    }
    int n = prec;
    while (n > 1 && d[n - 1] == '0') n--;
    *len = n;
    return 1;
}

void jf_cli_format_double(char *buf, size_t n, double v) {
    if (isnan(v)) {
        snprintf(buf, n, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, n, v < 0 ? "-inf" : "inf");
        return;
    }
    if (v == 0) {
        snprintf(buf, n, signbit(v) ? "-0" : "0");
        return;
    }
    /* The shortest of "%.15g", "%.16g", "%.17g" that reads back as v (the last always does).
     * glibc formats once, 17 digits; the 15 and 16 digit candidates are those digits rounded
     * (correct unless the 17 end in a bare half: then glibc formats them) and read back by
     * fast_float: a third of the time of three formats and three strtods, the same text. */
    locale_t prev = uselocale(c_locale());
    char e17[40], d[17], cand[48];
    /* strfromd (ISO/IEC TS 18661-1) formats without vfprintf's parse of the format; like
     * snprintf it follows the thread's locale, the C one here */
    strfromd(e17, sizeof e17, "%.16e", v);
    int neg = e17[0] == '-';
    const char *m = e17 + neg; /* d.dddddddddddddddde±X… */
    char d17[17];
    d17[0] = m[0];
    memcpy(d17 + 1, m + 2, 16);
    int x17 = 0; /* the exponent after "e±" */
    for (const char *c = m + 20; *c; c++) x17 = 10 * x17 + (*c - '0');
    if (m[19] == '-') x17 = -x17;
    for (int prec = 15; prec <= 17; prec++) {
        int len, x = x17;
        double back;
        if (round_digits(d17, prec, d, &len, &x)) {
            layout_g(cand, neg, d, len, x, prec);
            if (prec == 17 || (jf_cli_parse_decimal(cand, cand + strlen(cand), &back) == 0 &&
                               back == v))
                break;
        } else {
            strfromd(cand, sizeof cand, prec == 15 ? "%.15g" : "%.16g", v);
            if (strtod(cand, NULL) == v) break;
        }
    }
    uselocale(prev);
    size_t len = strlen(cand);
    if (n == 0) return;
    if (len >= n) len = n - 1; /* as snprintf would cut it */
    memcpy(buf, cand, len);
    buf[len] = '\0';
}

void jf_cli_json_number(FILE *f, double v) {
    if (!isfinite(v)) {
        fputs("null", f);
        return;
    }
    char buf[64];
    jf_cli_format_double(buf, sizeof buf, v);
    fputs(buf, f);
}

void jf_cli_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; p && *p; p++) {
        const unsigned char *q = p; /* a run that needs no escape: one write (JSON of 1e5 fits) */
        while (*q >= 0x20 && *q < 0x80 && *q != '"' && *q != '\\') q++;
        if (q > p) {
            fwrite(p, 1, (size_t)(q - p), f);
            p = q - 1;
            continue;
        }
        if (*p >= 0x80) { /* JSON is UTF-8: a byte of another encoding becomes U+FFFD */
            size_t len = jf_utf8_len(p);
            if (len) fwrite(p, 1, len, f);
            else fputs("\\ufffd", f);
            p += len ? len - 1 : 0;
            continue;
        }
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20) fprintf(f, "\\u%04x", *p);
            else fputc(*p, f);
        }
    }
    fputc('"', f);
}

int jf_cli_text_width(const char *s) { return (int)jf_text_columns(s, strlen(s)); }

void jf_cli_put_padded(FILE *f, const char *s, int width) {
    fputs(s, f);
    for (int w = jf_cli_text_width(s); w < width; w++) fputc(' ', f);
}
