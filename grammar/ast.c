/* Memory and small helpers of the front end: the arena that owns the syntax tree, the node
 * constructors the grammar actions call, error counting, and locale-independent numbers.
 *
 * Everything the parser allocates comes from one arena so that any exit (a syntax error, a
 * limit, an allocation failure half-way through an action) frees the whole tree in one call and
 * bison never needs %destructor bookkeeping.
 */
#include "ast.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Blocks are large enough that a big text costs few mallocs, small enough that a one-line
 * formula costs one. */
enum { ARENA_BLOCK = 64 * 1024 };

void *jf_arena_alloc(jf_arena *a, size_t n) {
    const size_t align = sizeof(max_align_t);
    if (n > SIZE_MAX / 2) return NULL;
    n = (n + align - 1) / align * align;
    jf_arena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > ARENA_BLOCK ? n : ARENA_BLOCK;
        b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        a->head = b;
    }
    void *r = (char *)b->data + b->used;
    b->used += n;
    memset(r, 0, n);
    return r;
}

void jf_arena_free(jf_arena *a) {
    jf_arena_block *b = a->head;
    while (b) {
        jf_arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
}

void jf_parse_error(jf_parse *p, int status, jf_span at, const char *fmt, ...) {
    if (status == JF_ERR_LIMIT) p->limit = 1;
    if (p->stop) return;
    if (p->nerrors >= JF_PARSE_MAX_ERRORS) {
        jf_diag_add(p->diags, JF_SEVERITY_NOTE, JF_ERR_PARSE, SIZE_MAX, SIZE_MAX,
                    "too many errors; the rest of the model text was not checked");
        p->stop = 1;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    jf_diag_addv(p->diags, JF_SEVERITY_ERROR, status, at.begin, at.end, fmt, ap);
    va_end(ap);
    p->nerrors++;
}

jf_ast *jf_ast_new(jf_parse *p, jf_ast_kind kind, jf_span span) {
    jf_ast *n = jf_arena_alloc(&p->arena, sizeof *n);
    if (!n) {
        p->nomem = 1;
        return NULL;
    }
    n->kind = (unsigned char)kind;
    n->span = span;
    n->sym = UINT32_MAX;
    n->ref = JF_NOREF;
    if (p->seq_tail) p->seq_tail->seq = n;
    else p->seq_head = n;
    p->seq_tail = n;
    return n;
}

jf_stmt *jf_stmt_new(jf_parse *p, jf_stmt_kind kind, jf_span span) {
    jf_stmt *s = jf_arena_alloc(&p->arena, sizeof *s);
    if (!s) {
        p->nomem = 1;
        return NULL;
    }
    s->kind = kind;
    s->span = span;
    s->lo = -INFINITY;
    s->hi = INFINITY;
    /* The nodes created since the previous statement ended are this statement's expression
     * (bison reduces strictly left to right, so runs never interleave). */
    s->first = p->stmt_mark ? p->stmt_mark->seq : p->seq_head;
    p->stmt_mark = p->seq_tail;
    s->prev = p->stmt_tail;
    if (p->stmt_tail) p->stmt_tail->next = s;
    else p->stmt_head = s;
    p->stmt_tail = s;
    return s;
}

double jf_parse_number(jf_parse *p, const char *text, int *out_of_range) {
    /* uselocale switches only this thread, so a host program's setlocale(LC_NUMERIC, "de_DE")
     * cannot turn "2.5" into 2 here, and other threads are untouched. */
    locale_t old = uselocale(p->c_locale);
    errno = 0;
    char *end;
    double v = strtod(text, &end);
    int err = errno;
    uselocale(old);
    *out_of_range = 0;
    if (err == ERANGE && (isinf(v) || v == 0.0)) *out_of_range = 1;
    return v;
}
