/* Helpers shared by the subcommands: loading a model from inline text or a file, parsing
 * `name=value,...` lists and numbers strictly, and printing errors in one style. */
#ifndef JF_CLI_UTIL_H
#define JF_CLI_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "../include/jitfit.h"

/* A malloc'd formatted string; NULL only when out of memory. The caller frees it. */
char *jf_cli_strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* jf_cli_strf with a va_list (ap is used up). */
char *jf_cli_vstrf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* Prints "jitfit: " + message + newline on stderr ("jitfit: [fit NAME]: " + message while a
 * job's fit runs, so a message about its files says whose they are). The message is whole
 * however long: it quotes the user's values (names, paths, suggested options). */
void jf_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The job fit that following errors belong to; NULL outside of one. */
void jf_cli_error_fit(const char *name);
/* Remembers msg's first line as the last error (jf_cli_error and printed diagnostics do this
 * themselves), so `run --json` can put a failed fit's reason into its object. */
void jf_cli_note_error(const char *msg);
/* The last error noted ("" before any); jf_cli_note_error("") clears it. */
const char *jf_cli_last_error(void);
/* The first error noted since jf_cli_note_error("") (or the start), "" if none. */
const char *jf_cli_first_error(void);

/* Compiles MODEL: a path to an existing file is read as a model file, anything else is model
 * text (source name "<command line>"). vars/nvars as in jf_model_options (NULL: default).
 * Diagnostics (warnings too) are printed on stderr. Returns the model or NULL after printing
 * the errors. */
jf_model *jf_cli_load_model(const char *arg, const char *const *vars, size_t nvars);
/* As jf_cli_load_model, with the name model text gets in diagnostics. With keep non-NULL
 * its diagnostics are not printed but go to *keep (NULL if none could be made), for a trial
 * compile whose caller decides which reading's to print (jf_cli_print_model_diagnostics); a
 * failure without diagnostics is still printed. */
/* jf_cli_print_diagnostics(d) (which frees d) for the model m compiled from arg, then, when arg
 * reads like a file's name that does not exist and it did not compile (m NULL) or compiled
 * with a warning, a note on stderr that there is no such model file and arg was read as a
 * formula. */
void jf_cli_print_model_diagnostics(const char *arg, const jf_model *m, jf_diagnostics *d);
/* That note alone, for a reading of arg kept although the plain one warned (jitfit fit's reading
 * with no variable: `models/peak` is then a quotient of two parameters fitted to the response
 * alone, with no warning of its own). */
void jf_cli_note_missing_model_file(const char *arg);
jf_model *jf_cli_load_model_ex(const char *arg, const char *text_name, const char *const *vars,
                               size_t nvars, jf_diagnostics **keep);
/* strcmp of two char * elements, for qsort and bsearch over arrays of strings. */
int jf_cli_cmp_str(const void *a, const void *b);
/* Prints d (errors and warnings, with carets) on stderr and frees it; NULL does nothing. */
void jf_cli_print_diagnostics(jf_diagnostics *d);

/* Parses a number the way the DSL does (locale-independent, whole string, "inf"/"-inf"/"nan"
 * accepted). Returns 0 on success. */
int jf_cli_parse_double(const char *s, double *out);

/* One `name=value` item of a comma-separated list. */
typedef struct jf_cli_assign {
    char *name;  /* the name (malloc'd) */
    char *value; /* the text after '=' (malloc'd) */
} jf_cli_assign;

/* Splits "a=1,b=2" into items. Returns the count, or -1 with a malloc'd message in *msg
 * ("expected NAME=VALUE, got 'a'"; NULL when out of memory). The caller frees the items with
 * jf_cli_assign_free. */
long jf_cli_split_assignments(const char *text, jf_cli_assign **out, char **msg);
void jf_cli_assign_free(jf_cli_assign *a, long n);

/* Fills values[k] for each parameter (or variable, when vars is 1) of m named in "a=1,b=2".
 * Unknown names are errors (with a suggestion); set[k] (if not NULL) marks the ones given.
 * Returns 0, or -1 with a malloc'd "WHAT: message" in *msg (NULL when out of memory): the
 * caller prints it with its command's prefix, as its other option errors. */
int jf_cli_assign_by_name(const jf_model *m, int vars, const char *text, const char *what,
                          double *values, int *set, char **msg);

/* Writes a double as JSON: shortest round-trip decimal, locale-independent; non-finite values
 * become null (JSON has no inf/nan) unless as_string_nonfinite, then "inf"/"-inf"/"nan". */
void jf_cli_json_number(FILE *f, double v);
/* Writes s as a JSON string literal with escapes; bytes that are not UTF-8 become U+FFFD (JSON
 * is UTF-8, and a Latin-1 label made the output unreadable). */
void jf_cli_json_string(FILE *f, const char *s);
/* Formats v as the shortest decimal that round-trips (locale-independent) into buf. */
void jf_cli_format_double(char *buf, size_t n, double v);
/* Columns s takes on a terminal: one per UTF-8 character (East Asian wide ones excepted), one
 * per byte outside a sequence; for padding table cells, which printf's widths count in bytes. */
int jf_cli_text_width(const char *s);
/* Writes s, then blanks up to width columns (jf_cli_text_width); nothing more when s is wider. */
void jf_cli_put_padded(FILE *f, const char *s, int width);

#endif
