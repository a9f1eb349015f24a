/* Diagnostics as values: collected by the front end, rendered by whoever shows them.
 *
 * Locations are byte spans [begin, end) into the source text; line and column are computed
 * only when a diagnostic is added (once per diagnostic, never per token). The library never
 * prints: jf_diagnostics_text() renders the compiler-style text with the source line and a
 * caret/underline, and the CLI decides where it goes.
 */
#ifndef JF_DIAG_H
#define JF_DIAG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* One diagnostic. */
typedef struct jf_diag {
    jf_severity severity; /* error, warning or note */
    int status;           /* jf_status this error stands for (JF_ERR_PARSE, JF_ERR_LIMIT, ...) */
    size_t begin, end;    /* byte span in the source; begin == end == SIZE_MAX: no location */
    int line, col;        /* 1-based position of begin; 0 when no location */
    char *message;        /* the message without location or severity */
} jf_diag;

/* The list (the public jf_diagnostics type). */
struct jf_diagnostics {
    char *source_name;  /* copy of the source name used in rendered text */
    char *source;       /* copy of the source text (for the quoted line) */
    size_t source_len;  /* bytes in source */
    jf_diag *items;     /* diagnostics in the order they were added */
    size_t n, cap;      /* count and capacity of items */
    size_t nerrors;     /* number of items with severity error */
    char *text;         /* rendered text, built lazily by jf_diagnostics_text */
    int nomem;          /* 1 if an allocation failed while adding (the list is then incomplete) */
};

/* A new list for the given source (both copied); NULL when out of memory. */
JF_INTERNAL jf_diagnostics *jf_diag_create(const char *source_name, const char *source, size_t len);

/* Adds a diagnostic over the span [begin, end) (SIZE_MAX for no location). Allocation failure
 * sets d->nomem and drops the diagnostic. */
JF_INTERNAL void jf_diag_add(jf_diagnostics *d, jf_severity sev, int status, size_t begin,
                             size_t end, const char *fmt, ...) JF_PRINTF(6, 7);
JF_INTERNAL void jf_diag_addv(jf_diagnostics *d, jf_severity sev, int status, size_t begin,
                              size_t end, const char *fmt, va_list ap) JF_PRINTF(6, 0);

/* The closest candidate to `name` (len bytes) by edit distance, if it is close enough to
 * suggest (distance <= max(1, len/3)); else NULL. */
JF_INTERNAL const char *jf_diag_suggest(const char *name, size_t len, const char *const *candidates,
                                        size_t ncandidates);

/* Computes 1-based line and column of byte offset off in src; a UTF-8 byte-order mark at the
 * start of src is not counted (an editor does not show it). */
JF_INTERNAL void jf_diag_line_col(const char *src, size_t len, size_t off, int *line, int *col);

#endif
