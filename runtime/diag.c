/* Diagnostics list: collection, "did you mean" suggestions and compiler-style rendering.
 *
 * The front end adds diagnostics with byte spans; this file turns them into the one format the
 * project prints (chibicc/jq style):
 *   model.jf:3:14: error: unknown function 'exq' (did you mean 'exp'?)
 *       y ~ a*exq(-b*x)
 *             ^^^
 * Rendering happens lazily in jf_diagnostics_text so a caller that only inspects fields pays
 * nothing for it.
 */
#include "diag.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

static char *dup_n(const char *s, size_t n) {
    char *r = malloc(n + 1);
    if (!r) return NULL;
    if (n) memcpy(r, s, n);
    r[n] = '\0';
    return r;
}

jf_diagnostics *jf_diag_create(const char *source_name, const char *source, size_t len) {
    jf_diagnostics *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    const char *name = source_name ? source_name : "<model>";
    d->source_name = dup_n(name, strlen(name));
    d->source = dup_n(source ? source : "", source ? len : 0);
    d->source_len = source ? len : 0;
    if (!d->source_name || !d->source) {
        jf_diagnostics_free(d);
        return NULL;
    }
    return d;
}

/* The bytes of a UTF-8 byte-order mark at the start of src (3 or 0). The parser skips it (see
 * jf_frontend_compile); an editor does not show it, so the first line's columns and its quote
 * start after it. */
static size_t bom_len(const char *src, size_t len) {
    return len >= 3 && memcmp(src, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
}

void jf_diag_line_col(const char *src, size_t len, size_t off, int *line, int *col) {
    int l = 1;
    size_t bom = bom_len(src, len);
    size_t bol = off >= bom ? bom : 0;
    if (off > len) off = len;
    for (size_t i = 0; i < off; i++) {
        if (src[i] == '\n') {
            l++;
            bol = i + 1;
        }
    }
    *line = l;
    *col = (int)(off - bol) + 1;
}

void jf_diag_addv(jf_diagnostics *d, jf_severity sev, int status, size_t begin, size_t end,
                  const char *fmt, va_list ap) {
    if (!d) return;
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 8;
        jf_diag *ni = realloc(d->items, nc * sizeof *ni);
        if (!ni) {
            d->nomem = 1;
            return;
        }
        d->items = ni;
        d->cap = nc;
    }
    va_list ap2;
    va_copy(ap2, ap);
    int need = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    char *msg = need >= 0 ? malloc((size_t)need + 1) : NULL;
    if (!msg) {
        d->nomem = 1;
        return;
    }
    vsnprintf(msg, (size_t)need + 1, fmt, ap);
    jf_diag *g = &d->items[d->n++];
    g->severity = sev;
    g->status = status;
    g->message = msg;
    if (begin == SIZE_MAX) {
        g->begin = g->end = SIZE_MAX;
        g->line = g->col = 0;
    } else {
        if (begin > d->source_len) begin = d->source_len;
        if (end < begin) end = begin;
        if (end > d->source_len) end = d->source_len;
        g->begin = begin;
        g->end = end;
        jf_diag_line_col(d->source, d->source_len, begin, &g->line, &g->col);
    }
    if (sev == JF_SEVERITY_ERROR) d->nerrors++;
    free(d->text);
    d->text = NULL;
}

void jf_diag_add(jf_diagnostics *d, jf_severity sev, int status, size_t begin, size_t end,
                 const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    jf_diag_addv(d, sev, status, begin, end, fmt, ap);
    va_end(ap);
}

/* Levenshtein distance, bounded to short identifiers (longer strings are never suggested). */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb) {
    enum { MAXL = 64 };
    if (la >= MAXL || lb >= MAXL) return SIZE_MAX;
    size_t prev[MAXL + 1], cur[MAXL + 1];
    for (size_t j = 0; j <= lb; j++) prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            size_t m = sub < del ? sub : del;
            cur[j] = m < ins ? m : ins;
        }
        memcpy(prev, cur, (lb + 1) * sizeof *prev);
    }
    return prev[lb];
}

const char *jf_diag_suggest(const char *name, size_t len, const char *const *cands, size_t n) {
    /* A one-letter name is one edit away from every other one-letter name: no suggestion. */
    if (len < 2) return NULL;
    size_t limit = len / 3 > 1 ? len / 3 : 1;
    const char *best = NULL;
    size_t bestd = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        if (!cands[i]) continue;
        size_t cl = strlen(cands[i]);
        if (cl == len && memcmp(cands[i], name, len) == 0) continue;
        size_t dist = edit_distance(name, len, cands[i], cl);
        if (dist <= limit && dist < bestd) {
            bestd = dist;
            best = cands[i];
        }
    }
    return best;
}

size_t jf_diagnostics_count(const jf_diagnostics *d) { return d ? d->n : 0; }
size_t jf_diagnostics_errors(const jf_diagnostics *d) { return d ? d->nerrors : 0; }

jf_severity jf_diagnostic_severity(const jf_diagnostics *d, size_t i) {
    return (d && i < d->n) ? d->items[i].severity : JF_SEVERITY_ERROR;
}
const char *jf_diagnostic_message(const jf_diagnostics *d, size_t i) {
    return (d && i < d->n) ? d->items[i].message : NULL;
}
int jf_diagnostic_line(const jf_diagnostics *d, size_t i) {
    return (d && i < d->n) ? d->items[i].line : 0;
}
int jf_diagnostic_column(const jf_diagnostics *d, size_t i) {
    return (d && i < d->n) ? d->items[i].col : 0;
}

/* A growable string; failure is sticky and reported once at the end. */
typedef struct sbuf {
    char *s;    /* NUL-terminated contents */
    size_t n;   /* length */
    size_t cap; /* allocated bytes */
    int failed; /* 1 after an allocation failure */
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *ns = realloc(b->s, nc);
        if (!ns) {
            b->failed = 1;
            return;
        }
        b->s = ns;
        b->cap = nc;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static const char *severity_word(jf_severity s) {
    switch (s) {
    case JF_SEVERITY_WARNING: return "warning";
    case JF_SEVERITY_NOTE: return "note";
    default: return "error";
    }
}

/* Longest stretch of a source line quoted under a diagnostic; longer lines are shown as a
 * window around the span, with "..." where text was cut, so a 1 MB one-line model does not
 * produce megabytes of message. */
#define QUOTE_WINDOW 120

/* Quotes the source line of g, indented by 4, with '^' under the span (at least one; a span
 * reaching past the end of the line or the window is cut there). Tabs in the prefix are kept
 * in the caret line so carets line up in a terminal. Control bytes are shown as '?'. */
static void render_quote(sbuf *b, const jf_diagnostics *d, const jf_diag *g) {
    size_t bol = g->begin;
    while (bol > 0 && d->source[bol - 1] != '\n') bol--;
    if (bol == 0 && g->begin >= bom_len(d->source, d->source_len))
        bol = bom_len(d->source, d->source_len);
    size_t eol = g->begin;
    while (eol < d->source_len && d->source[eol] != '\n' && d->source[eol] != '\r') eol++;
    size_t from = bol, to = eol;
    if (to - from > QUOTE_WINDOW) {
        from = g->begin > bol + QUOTE_WINDOW / 3 ? g->begin - QUOTE_WINDOW / 3 : bol;
        to = from + QUOTE_WINDOW < eol ? from + QUOTE_WINDOW : eol;
    }
    const char *lead = from > bol ? "..." : "";
    sb_puts(b, "    ");
    sb_puts(b, lead);
    char shown[QUOTE_WINDOW + 1]; /* the window above keeps to - from within it */
    memcpy(shown, d->source + from, to - from);
    shown[to - from] = '\0';
    /* a NUL in the line (a source is counted, not terminated) is a control byte too: '?', as
     * jf_text_printable stops at the first NUL and the rendered text must not end there */
    for (size_t i = 0; i < to - from; i++)
        if (!shown[i]) shown[i] = '?';
    jf_text_printable(shown, to - from, 1);
    sb_put(b, shown, to - from);
    if (to < eol) sb_puts(b, "...");
    sb_puts(b, "\n    ");
    for (size_t i = 0; lead[i]; i++) sb_put(b, " ", 1);
    /* a terminal shows most UTF-8 characters in one column (not East Asian wide ones), so the
     * caret line steps over each as one, and a byte outside a sequence as one (the location's
     * column stays a byte count, as documented) */
    size_t i = 0, stop = g->begin - from;
    while (i < stop) {
        size_t k = jf_utf8_len((const unsigned char *)shown + i);
        sb_put(b, shown[i] == '\t' ? "\t" : " ", 1);
        i += k > 1 ? k : 1;
    }
    size_t end = (g->end < to ? g->end : to) - from;
    size_t width = i < end ? jf_text_columns(shown + i, end - i) : 0;
    for (size_t j = 0; j < (width ? width : 1); j++) sb_put(b, "^", 1);
    sb_puts(b, "\n");
}

const char *jf_diagnostics_text(const jf_diagnostics *cd) {
    if (!cd) return NULL;
    jf_diagnostics *d = (jf_diagnostics *)cd; /* the rendered text is a cache */
    char *cached = __atomic_load_n(&d->text, __ATOMIC_ACQUIRE);
    if (cached) return cached;
    sbuf b = {0};
    sb_put(&b, "", 0);
    for (size_t i = 0; i < d->n; i++) {
        const jf_diag *g = &d->items[i];
        char head[64];
        sb_puts(&b, d->source_name);
        if (g->line > 0) {
            snprintf(head, sizeof head, ":%d:%d", g->line, g->col);
            sb_puts(&b, head);
        }
        sb_puts(&b, ": ");
        sb_puts(&b, severity_word(g->severity));
        sb_puts(&b, ": ");
        sb_puts(&b, g->message);
        sb_puts(&b, "\n");
        if (g->line > 0) render_quote(&b, d, g);
    }
    if (d->nomem) sb_puts(&b, "note: out of memory while collecting diagnostics; list incomplete\n");
    if (b.failed) {
        free(b.s);
        return "error: out of memory while rendering diagnostics\n";
    }
    /* const d may be shared by threads (the header's thread rule): two that render at once
     * publish only the first text; the other frees its own copy instead of leaking it. */
    if (!__atomic_compare_exchange_n(&d->text, &cached, b.s, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        free(b.s);
        return cached;
    }
    return b.s;
}

void jf_diagnostics_free(jf_diagnostics *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n; i++) free(d->items[i].message);
    free(d->items);
    free(d->source_name);
    free(d->source);
    free(d->text);
    free(d);
}
