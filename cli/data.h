/* The DATA file of `jitfit fit`: a text table with a header row of column names.
 *
 * Reading happens in two steps because the model decides which columns matter and the header
 * can decide the model's variables: jf_datafile_open reads the whole file in one go and parses
 * only the header; jf_datafile_read then converts the rows of the columns asked for into one
 * column-major block, ready to be handed to jf_data without copying. Every failure comes back
 * as a message naming the file, the line and the column, as the user sees it in an editor.
 *
 * Format: comment lines start with `#` (after optional blanks); blank lines are ignored; CRLF
 * and a UTF-8 byte-order mark are accepted; the separator is taken from the header line: a comma
 * if it has one, else a tab if it has one, else runs of spaces and tabs. Header names may be
 * wrapped in double quotes. Numbers are parsed independently of the locale. In CSV, fields may be
 * quoted as RFC 4180 says (a quoted field may hold commas, doubled quotes and line breaks).
 * gzip-compressed files and NumPy .npy arrays are recognised by their magic bytes, whatever
 * their name. With jf_datafile_open_ex a file may lack the header row (its first row is then
 * numbers): its columns are positional until named.
 */
#ifndef JF_CLI_DATA_H
#define JF_CLI_DATA_H

#include <stddef.h>

/* How the fields of a line are separated. */
typedef enum jf_datasep {
    JF_SEP_COMMA = ',', /* CSV: one comma between fields; blanks around a field are trimmed */
    JF_SEP_TAB = '\t',  /* TSV: one tab between fields; spaces around a field are trimmed */
    JF_SEP_BLANKS = ' ' /* any run of spaces and tabs; blanks at both ends of a line ignored */
} jf_datasep;

/* A data file held in memory with its header parsed. */
typedef struct jf_datafile {
    char *path;         /* the file name used in messages ("<stdin>" for "-") */
    char *text;         /* the whole file, NUL-terminated (the NUL is not part of it) */
    size_t len;         /* bytes of file content in text */
    jf_datasep sep;     /* the separator detected from the header */
    size_t ncols;       /* number of columns named by the header */
    char **names;       /* ncols column names, in file order */
    size_t header_line; /* 1-based line number of the header */
    size_t body;        /* offset in text of the line after the header */
    size_t body_line;   /* 1-based line number of that line (a quoted header name may hold
                           line breaks, so not always header_line + 1) */
    size_t max_rows;    /* lines after the header: an upper bound on the data rows, so the
                           column block can be allocated once instead of grown */
    int positional;     /* 1: no header row; names are "1", "2", ... until the caller names the
                           columns with jf_datafile_name_columns */
    int quoted;         /* 1: CSV text with a '"': records are split quote-aware (slower) */
    int allow_nan;      /* 1: "nan" and empty cells read as NaN instead of being errors */
    int nan_hint;       /* 1: the errors for such cells say that --nan-policy omit drops them */
    int gzipped;        /* 1: the file was gzip-compressed (for messages) */
    double *numeric;    /* a .npy file: ncols columns of numeric_rows doubles, column-major;
                           NULL for text */
    size_t numeric_rows; /* rows of numeric */
    size_t *numeric_inexact; /* a .npy file: per column, the 1-based row of the first integer
                                beyond what a double holds exactly (jf_npy.inexact), 0: none */
    size_t header_numbers; /* cells of the header row that read as numbers (for the hint that
                              a first row of data was taken for a header) */
    size_t hash_rows;   /* set by jf_datafile_read: lines after the header that start with '#'
                           and have as many fields as the header, skipped as comments though
                           they may be rows (a group label "#1" unquoted, as pandas writes it) */
    size_t hash_line;   /* the 1-based line of the first of them */
    int threads;        /* threads jf_datafile_read may parse a long text body on (0: one per
                           CPU, as --threads 0): jf_dataopts.threads, or as the caller sets */
} jf_datafile;

/* Options of jf_datafile_open_ex. All zero is jf_datafile_open's behaviour. */
typedef struct jf_dataopts {
    int allow_no_header;         /* a first row of numbers is data, not an error */
    const char *const *columns;  /* names of the columns in file order (replacing a header if
                                    the file has one), or NULL */
    size_t ncolumns;             /* entries in columns */
    int allow_nan;               /* see jf_datafile.allow_nan */
    int nan_hint;                /* see jf_datafile.nan_hint */
    int threads;                 /* threads that may read a long file (0: one per CPU, as
                                    --threads 0); also jf_datafile.threads */
} jf_dataopts;

/* Where a run of consecutive data rows sits in the file. Rows are usually on consecutive lines,
 * so the table keeps one of these only where comments or blank lines break the run; a row's line
 * number is then found by binary search without storing one number per row. */
typedef struct jf_rowrun {
    size_t row;  /* first row of the run (0-based) */
    size_t line; /* its 1-based line number in the file */
} jf_rowrun;

/* Columns of a data file converted to numbers. */
typedef struct jf_table {
    size_t ncols;     /* number of columns read (as many as names were asked for) */
    size_t nrows;     /* number of data rows */
    size_t ld;        /* column c starts at values + c*ld (ld >= nrows) */
    double *values;   /* the numbers, column-major in the order the names were asked for */
    size_t *file_col; /* ncols 0-based positions of the columns in the file */
    jf_rowrun *runs;  /* nruns runs of rows on consecutive lines, ordered by row */
    size_t nruns;     /* number of entries in runs */
} jf_table;

/* Reads the file at path ("-" reads standard input) and parses its header. On success returns 0
 * and *out receives the file (free it with jf_datafile_free). On failure returns a jf_status
 * (JF_ERR_IO, JF_ERR_DATA, JF_ERR_NOMEM), *out is NULL and *err receives a message ("data.csv:
 * no data rows") that the caller frees with free(). */
int jf_datafile_open(const char *path, jf_datafile **out, char **err);

/* jf_datafile_open with options (NULL: defaults). */
int jf_datafile_open_ex(const char *path, const jf_dataopts *o, jf_datafile **out, char **err);

/* Names the n columns of f (n must equal f->ncols), e.g. a positional file's columns after the
 * model is known. Returns 0, or JF_ERR_DATA/JF_ERR_NOMEM with *err set. */
int jf_datafile_name_columns(jf_datafile *f, const char *const *names, size_t n, char **err);

/* Frees the file; accepts NULL. */
void jf_datafile_free(jf_datafile *f);

/* The 0-based position of the column called name, or -1. */
long jf_datafile_column(const jf_datafile *f, const char *name);
/* For a .npy file: the 1-based row of column col's first integer beyond 2^53, which its double
 * rounds (0: none, or a text file, whose numbers are read as decimal doubles anyway). */
size_t jf_datafile_rounded_row(const jf_datafile *f, long col);

/* Converts the columns called names[0..nnames) (a name may be asked for twice) into *out.
 * Values must be finite numbers in those columns; other columns are only counted, so a text
 * column the model does not use is harmless. Returns 0, or a jf_status with *err set as for
 * jf_datafile_open, e.g. "data.csv:5: column 2 ('y'): 'abc' is not a number" or "data.csv: no
 * column 'x' (columns: t, y)". On failure *out holds nothing to free. */
int jf_datafile_read(jf_datafile *f, const char *const *names, size_t nnames, jf_table *out,
                     char **err);

/* After jf_datafile_read: the note that lines looking like rows were skipped as comments
 * (f->hash_rows), e.g. "spectra.csv:7: 2 lines that start with '#' and have as many fields
 * as the header were skipped as comments ...", malloc'd; NULL when there were none. */
char *jf_datafile_hash_note(const jf_datafile *f);

/* The text of column `name` for every data row, in the row order of jf_datafile_read (for a
 * group column, which may hold labels rather than numbers): quotes are removed, and a .npy
 * column's numbers are formatted. *out receives *nrows malloc'd strings in a malloc'd array
 * (free with jf_strings_free). Errors as jf_datafile_read. */
int jf_datafile_read_text(const jf_datafile *f, const char *name, char ***out, size_t *nrows,
                          char **err);
void jf_strings_free(char **s, size_t n);

/* 1 when the text s (a cell as jf_datafile_read_text gives it) is one of the words for a
 * missing value that --nan-policy omit reads as NaN in a numeric column (NA, N/A, n/a, #N/A,
 * #NA, <NA>, NULL, null, None): a group label column treats them as missing too. */
int jf_datafile_missing_word(const char *s);

/* Keeps only the rows i with keep[i] != 0, in order, in every column of t; line numbers stay
 * right. Returns the number of rows dropped (0 when out of memory: then t is unchanged). */
size_t jf_table_compact(jf_table *t, const unsigned char *keep);

/* The 1-based line number in the file of data row `row` (0-based); for a .npy file, the 1-based
 * row number. */
size_t jf_table_line(const jf_table *t, size_t row);

/* Frees the arrays of t (not t itself) and zeroes it; accepts NULL. */
void jf_table_free(jf_table *t);

#endif
