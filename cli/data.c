/* The data file reader of `jitfit fit` (see data.h for the format).
 *
 * Files of 1e7 rows feed the benchmarks, so the reader is built for throughput: the file is read
 * with one read loop into one buffer, the number of lines bounds the rows so the column block is
 * allocated once, cells are parsed in place between their delimiters (no per-cell allocation)
 * by fast_float instead of strtod, and long bodies are parsed by several threads. Row line
 * numbers are kept as runs (see jf_rowrun), not one per row. Messages follow the compiler style
 * "FILE:LINE: ...".
 */
#include "data.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "../include/jitfit.h"
#include "../runtime/text.h"
#include "../solver/solver.h"
#include "decimal.h"
#include "npy.h"
#include "util.h"

/* Longest cell text quoted in a message; longer cells are cut with "...". */
#define CELL_QUOTE_MAX 40

static int is_blank(char c) { return c == ' ' || c == '\t'; }

/* What a file's bytes hold, found by the threads that read them (read_pieces). */
typedef struct text_scan {
    int valid;        /* 1: the fields below describe the text as read */
    int quote, cr, lf; /* it has a '"', a '\r', a '\n' */
    size_t newlines;  /* its '\n' */
} text_scan;

/* Regular files of at least this many bytes are read by several threads: most of a read's time
 * is the faults of the fresh buffer's pages (about 1 GB/s on one core of a virtual machine),
 * which divide among threads. */
#ifndef SLURP_PARALLEL_MIN /* tests set it lower */
#define SLURP_PARALLEL_MIN ((size_t)16 << 20)
#endif

/* One piece of a file read by read_pieces. */
typedef struct piece {
    int fd;
    char *buf;
    size_t off, len;
    int ok;
    text_scan scan;
} piece;

static void read_piece(void *ctx, size_t k, int worker) {
    (void)worker;
    piece *pc = &((piece *)ctx)[k];
    size_t got = 0;
    while (got < pc->len) {
        ssize_t r = pread(pc->fd, pc->buf + pc->off + got, pc->len - got, (off_t)(pc->off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return; /* an error, or the file shrank: pc->ok stays 0 */
        got += (size_t)r;
    }
    const char *b = pc->buf + pc->off, *end = b + pc->len;
    pc->scan.quote = memchr(b, '"', pc->len) != NULL;
    pc->scan.cr = memchr(b, '\r', pc->len) != NULL;
    for (const char *p = b; (p = memchr(p, '\n', (size_t)(end - p))); p++) pc->scan.newlines++;
    pc->scan.lf = pc->scan.newlines > 0;
    pc->ok = 1;
}

/* Reads the size bytes of the regular file fd into buf in pieces on threads, scanning each piece
 * while it is in the cache (*scan). 0 when the pieces came back whole and the file ends where
 * it did; else -1 (an error, or the file changed: the caller reads it again in one loop). */
static int read_pieces(int fd, int threads, char *buf, size_t size, text_scan *scan) {
    size_t np = (size_t)threads;
    piece *pcs = calloc(np, sizeof *pcs);
    jf_pool *pool = pcs ? jf_pool_acquire(threads) : NULL;
    if (!pool) {
        free(pcs);
        return -1;
    }
    for (size_t k = 0; k < np; k++) {
        pcs[k].fd = fd;
        pcs[k].buf = buf;
        pcs[k].off = size / np * k;
        pcs[k].len = (k + 1 == np ? size : size / np * (k + 1)) - pcs[k].off;
    }
    jf_pool_run(pool, np, read_piece, pcs);
    jf_pool_release(pool);
    char more;
    int ok = pread(fd, &more, 1, (off_t)size) == 0;
    memset(scan, 0, sizeof *scan);
    for (size_t k = 0; k < np; k++) {
        ok &= pcs[k].ok;
        scan->quote |= pcs[k].scan.quote;
        scan->cr |= pcs[k].scan.cr;
        scan->lf |= pcs[k].scan.lf;
        scan->newlines += pcs[k].scan.newlines;
    }
    scan->valid = ok;
    free(pcs);
    return ok ? 0 : -1;
}

/* Reads all of fd into a NUL-terminated buffer: a long regular file on `threads` threads (0:
 * one per CPU), with *scan of its bytes; else one read loop (scan->valid 0), regular files
 * sized up front, pipes growing the buffer geometrically. Returns 0 or an errno value. */
static int slurp(int fd, int threads, char **text, size_t *len, text_scan *scan) {
    struct stat st;
    size_t cap = 1 << 16;
    memset(scan, 0, sizeof *scan);
    int regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
    if (regular) cap = (size_t)st.st_size + 1;
    char *buf = malloc(cap);
    if (!buf) return ENOMEM;
    size_t n = 0;
    /* pieces from the start: not where a shell's redirection left part of the file read */
    int nt = regular && cap - 1 >= SLURP_PARALLEL_MIN && lseek(fd, 0, SEEK_CUR) == 0
                 ? jf_threads_resolve(threads)
                 : 1;
    if (nt > 1 && read_pieces(fd, nt, buf, cap - 1, scan) == 0) {
        buf[cap - 1] = '\0';
        *text = buf;
        *len = cap - 1;
        (void)lseek(fd, (off_t)(cap - 1), SEEK_SET); /* where a read loop would have left it */
        return 0;
    }
    for (;;) { /* (pread moved nothing: after failed pieces this reads from the start too) */
        if (n + 1 >= cap) {
            if (cap > SIZE_MAX / 2) {
                free(buf);
                return ENOMEM;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                return ENOMEM;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t got = read(fd, buf + n, cap - n - 1);
        if (got < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            free(buf);
            return e;
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return 0;
}

/* The end of the line starting at s (before "\n" or "\r\n"), and in *next the start of the
 * following line. */
static const char *line_end(const char *s, const char *end, const char **next) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    const char *e = nl ? nl : end;
    *next = nl ? nl + 1 : end;
    if (e > s && e[-1] == '\r') e--;
    return e;
}

/* The end of the record starting at s for a CSV file with quotes: like line_end, but a line
 * break inside a quoted field belongs to the record; *extra counts such breaks so line numbers
 * stay those of an editor. As in RFC 4180 and next_field, only a quote that opens a field
 * (after blanks) starts a quoted field: one inside a bare field (a label 12" pipe) is text,
 * not the start of a quote that would swallow the following lines. A quote left open runs to
 * the end of the file, where next_field reports it. */
static const char *record_end(const jf_datafile *f, const char *s, const char *end,
                              const char **next, size_t *extra) {
    *extra = 0;
    if (!f->quoted) return line_end(s, end, next);
    int inq = 0, field_start = 1;
    const char *p = s;
    for (; p < end; p++) {
        if (inq) {
            if (*p == '"') {
                if (p + 1 < end && p[1] == '"') p++; /* "" stands for one quote */
                else inq = 0;
            } else if (*p == '\n') {
                ++*extra;
            }
            continue;
        }
        if (*p == '\n') break;
        if (*p == '"' && field_start) inq = 1;
        if (*p == ',') field_start = 1;
        else if (!is_blank(*p)) field_start = 0;
    }
    *next = p < end ? p + 1 : end;
    const char *e = p;
    if (e > s && e[-1] == '\r') e--;
    return e;
}

/* Parses the cell [s, e) (already trimmed) as a number: a decimal by fast_float (decimal.h),
 * else the CLI's locale-independent parser (which also knows inf, nan and hex floats). A cell
 * wrapped in double quotes is unwrapped. Returns 0 or -1. */
static int parse_cell(const char *s, const char *e, double *out) {
    if (jf_cli_parse_decimal(s, e, out) == 0) return 0;
    if (e - s >= 2 && *s == '"' && e[-1] == '"') {
        s++;
        e--;
    }
    size_t n = (size_t)(e - s);
    if (n == 0 || memchr(s, '\0', n)) return -1;
    char small[128];
    char *buf = n < sizeof small ? small : malloc(n + 1);
    if (!buf) return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    int rc = jf_cli_parse_double(buf, out);
    if (buf != small) free(buf);
    return rc;
}

/* 1 when the cell [s, e) (trimmed, maybe quoted) is one of the words spreadsheets and pandas
 * write for a missing value: NA, N/A, n/a, #N/A, #NA, <NA>, NULL, null, None (pandas' own
 * defaults, less its exotic ones). With --nan-policy omit they are missing, like empty cells. */
static int is_missing_word(const char *s, const char *e) {
    static const char *const words[] = {"NA", "N/A", "n/a", "#N/A", "#NA", "<NA>",
                                        "NULL", "null", "None"};
    if (e - s >= 2 && *s == '"' && e[-1] == '"') {
        s++;
        e--;
    }
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if ((size_t)(e - s) == strlen(words[i]) && memcmp(s, words[i], (size_t)(e - s)) == 0)
            return 1;
    return 0;
}

int jf_datafile_missing_word(const char *s) { return is_missing_word(s, s + strlen(s)); }

/* 1 when the line whose first non-blank byte is q (up to e) is a comment: it starts with '#',
 * unless its first field (by the file's separator sep; 0 before the header has set it: the
 * header's own rule, a comma, else a tab, else blanks) is a missing-value word that starts so
 * (#N/A, #NA: what a spreadsheet writes into a cell), which makes it a row of data to read or
 * reject, never one dropped without a word. "#NA means missing" stays a comment. */
static int is_comment(const char *q, const char *e, int sep) {
    if (q == e || *q != '#') return 0;
    if (!sep)
        sep = memchr(q, ',', (size_t)(e - q))    ? JF_SEP_COMMA
              : memchr(q, '\t', (size_t)(e - q)) ? JF_SEP_TAB
                                                 : JF_SEP_BLANKS;
    const char *f = q;
    while (f < e && *f != sep && !(sep == JF_SEP_BLANKS && *f == '\t')) f++;
    while (f > q && is_blank(f[-1])) f--; /* blanks around a field are not part of it */
    return !is_missing_word(q, f);
}

static int next_field(jf_datasep sep, const char **p, const char *e, const char **fs,
                      const char **fe, int *last);

/* 1 when the comment line [q, e) splits into as many fields as the file has columns: a row whose
 * first cell starts with '#' (unquoted) rather than a remark, most likely. */
static int comment_like_row(const jf_datafile *f, const char *q, const char *e) {
    const char *p = q, *fs, *fe;
    size_t n = 0;
    int last = 0, r;
    while (!last && (r = next_field(f->sep, &p, e, &fs, &fe, &last)) != 0) {
        if (r < 0) return 0;
        n++;
    }
    return n == f->ncols;
}

/* Splits off the next field of a line [*p, e) for separator sep: sets [*fs, *fe) to the field
 * without surrounding blanks and advances *p past it and its separator. Returns 0 when there
 * was no field left (only for JF_SEP_BLANKS; CSV/TSV lines always have one more field after a
 * separator). *last is set when the line ends after this field. A CSV field that starts with a
 * quote runs to the matching quote ("" inside stands for one quote) and keeps its quotes in
 * [*fs, *fe); -1 when that quote is not closed or text follows it. */
static int next_field(jf_datasep sep, const char **p, const char *e, const char **fs,
                      const char **fe, int *last) {
    const char *s = *p;
    if (sep == JF_SEP_COMMA) {
        const char *a = s;
        while (a < e && is_blank(*a)) a++;
        if (a < e && *a == '"') {
            const char *t = a + 1;
            for (; t < e; t++)
                if (*t == '"') {
                    if (t + 1 < e && t[1] == '"') t++;
                    else break;
                }
            if (t >= e) return -1;
            *fs = a;
            *fe = t + 1;
            t++;
            while (t < e && is_blank(*t)) t++;
            if (t < e && *t != ',') return -1;
            *p = t < e ? t + 1 : e;
            *last = t == e;
            return 1;
        }
    }
    if (sep == JF_SEP_BLANKS) {
        while (s < e && is_blank(*s)) s++;
        if (s == e) return 0;
        const char *t = s;
        while (t < e && !is_blank(*t)) t++;
        *fs = s;
        *fe = t;
        while (t < e && is_blank(*t)) t++;
        *p = t;
        *last = t == e;
        return 1;
    }
    const char *t = s < e ? memchr(s, (int)sep, (size_t)(e - s)) : NULL;
    const char *stop = t ? t : e;
    const char *a = s, *b = stop;
    while (a < b && is_blank(*a)) a++;
    while (b > a && is_blank(b[-1])) b--;
    *fs = a;
    *fe = b;
    *p = t ? t + 1 : e;
    *last = t == NULL;
    return 1;
}

/* A malloc'd copy of the field [fs, fe) without its surrounding quotes, "" between them read
 * as one quote. A bare field is its text, quotes and all (RFC 4180): a""b is not the "a""b"
 * that reads a"b, or the two would be one group. */
static char *unquote(const char *fs, const char *fe) {
    int quoted = fe - fs >= 2 && *fs == '"' && fe[-1] == '"';
    if (quoted) {
        fs++;
        fe--;
    }
    char *r = malloc((size_t)(fe - fs) + 1), *q = r;
    if (!r) return NULL;
    for (const char *p = fs; p < fe; p++) {
        *q++ = *p;
        if (quoted && *p == '"' && p + 1 < fe && p[1] == '"') p++;
    }
    *q = '\0';
    return r;
}

void jf_datafile_free(jf_datafile *f) {
    if (!f) return;
    if (f->names)
        for (size_t i = 0; i < f->ncols; i++) free(f->names[i]);
    free(f->names);
    free(f->text);
    free(f->path);
    free(f->numeric);
    free(f->numeric_inexact);
    free(f);
}

/* Fails with status st and message m (NULL m means the message itself ran out of memory). */
static int fail(char **err, int st, char *m) {
    *err = m;
    return m ? st : JF_ERR_NOMEM;
}

/* Splits the header line [s, e) into f->names. A line of numbers is an error, unless
 * allow_no_header: then it is the first data row and the columns are named "1", "2", ...
 * (a line of numbers and missing-value words, "1,NA", is such a row too, whose NA is then
 * read as data: missing with --nan-policy omit, else the error that says so).
 * With named (--columns), a line with any number in it is data too: only a line of names
 * is a header to be renamed, so the first row of a headerless file with a text column (a
 * label, a group) is not dropped as a header. */
static int parse_header(jf_datafile *f, const char *s, const char *e, int allow_no_header,
                        int named, char **err) {
    if (memchr(s, ',', (size_t)(e - s))) f->sep = JF_SEP_COMMA;
    else if (memchr(s, '\t', (size_t)(e - s))) f->sep = JF_SEP_TAB;
    else f->sep = JF_SEP_BLANKS;
    size_t cap = 8, numeric = 0, missing = 0;
    f->names = malloc(cap * sizeof *f->names);
    if (!f->names) return fail(err, JF_ERR_NOMEM, NULL);
    const char *p = s, *fs, *fe;
    int last = 0, r;
    while (!last && (r = next_field(f->sep, &p, e, &fs, &fe, &last)) != 0) {
        double v;
        if (r < 0)
            return fail(err, JF_ERR_DATA,
                        jf_cli_strf("%s:%zu: column %zu: unterminated quoted field or text after its "
                            "closing quote",
                            f->path, f->header_line, f->ncols + 1));
        if (parse_cell(fs, fe, &v) == 0) numeric++;
        else if (is_missing_word(fs, fe)) missing++;
        if (f->ncols == cap) {
            char **nn = realloc(f->names, 2 * cap * sizeof *nn);
            if (!nn) return fail(err, JF_ERR_NOMEM, NULL);
            f->names = nn;
            cap *= 2;
        }
        f->names[f->ncols] = unquote(fs, fe);
        if (!f->names[f->ncols]) return fail(err, JF_ERR_NOMEM, NULL);
        f->ncols++;
    }
    f->header_numbers = numeric;
    if ((numeric > 0 && numeric + missing == f->ncols && allow_no_header) ||
        (named && numeric > 0)) {
        for (size_t c = 0; c < f->ncols; c++) {
            char buf[32];
            snprintf(buf, sizeof buf, "%zu", c + 1);
            free(f->names[c]);
            f->names[c] = strdup(buf);
            if (!f->names[c]) return fail(err, JF_ERR_NOMEM, NULL);
        }
        f->positional = 1;
        return 0;
    }
    if (numeric == f->ncols)
        return fail(err, JF_ERR_DATA,
                    jf_cli_strf("%s:%zu: expected a header row of column names, found numbers", f->path,
                        f->header_line));
    return 0;
}

/* Inflates a gzip image (one or more members, as `cat a.gz b.gz` makes) into a new
 * NUL-terminated buffer. Returns 0, or a jf_status with *why set to zlib's reason. */
static int gunzip(const char *in, size_t n, char **out, size_t *outlen, const char **why) {
    z_stream z;
    memset(&z, 0, sizeof z);
    *why = NULL;
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return JF_ERR_NOMEM;
    size_t cap = n * 4 + 1024, used = 0;
    char *buf = malloc(cap);
    int rc = 0;
    if (!buf) rc = JF_ERR_NOMEM;
    z.next_in = (Bytef *)(uintptr_t)in;
    size_t in_left = n;
    while (rc == 0) {
        if (cap - used < 2) {
            char *nb = cap < SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (!nb) {
                rc = JF_ERR_NOMEM;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        uInt chunk_in = in_left > UINT_MAX ? UINT_MAX : (uInt)in_left;
        size_t room = cap - used - 1;
        uInt chunk_out = room > UINT_MAX ? UINT_MAX : (uInt)room;
        z.next_in = (Bytef *)(uintptr_t)(in + (n - in_left));
        z.avail_in = chunk_in;
        z.next_out = (Bytef *)buf + used;
        z.avail_out = chunk_out;
        int zr = inflate(&z, Z_NO_FLUSH);
        in_left -= chunk_in - z.avail_in;
        used += chunk_out - z.avail_out;
        if (zr == Z_STREAM_END) {
            /* Another member may follow (concatenated gzip files); trailing zeros may pad. */
            while (in_left && in[n - in_left] == 0) in_left--;
            if (!in_left) break;
            if (inflateReset(&z) != Z_OK) rc = JF_ERR_DATA;
        } else if (zr == Z_BUF_ERROR && z.avail_in == 0 && in_left == 0) {
            *why = "truncated compressed data";
            rc = JF_ERR_DATA;
        } else if (zr != Z_OK && zr != Z_BUF_ERROR) {
            *why = z.msg ? z.msg : "corrupt compressed data";
            rc = zr == Z_MEM_ERROR ? JF_ERR_NOMEM : JF_ERR_DATA;
        }
    }
    inflateEnd(&z);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    buf[used] = '\0';
    *out = buf;
    *outlen = used;
    return 0;
}

/* Takes over a parsed .npy array as the file's columns. */
static int open_npy(jf_datafile *f, const jf_dataopts *o, char **err) {
    jf_npy a;
    int rc = jf_npy_parse(f->path, (const unsigned char *)f->text, f->len, &a, err);
    if (rc != 0) return rc;
    free(f->text);
    f->text = NULL;
    f->len = 0;
    f->numeric = a.values;
    f->numeric_inexact = a.inexact;
    f->numeric_rows = a.nrows;
    f->ncols = a.ncols;
    f->max_rows = a.nrows;
    f->sep = JF_SEP_COMMA;
    if (a.names) {
        f->names = a.names;
    } else {
        f->names = calloc(a.ncols, sizeof *f->names);
        if (!f->names) return JF_ERR_NOMEM;
        for (size_t c = 0; c < a.ncols; c++) {
            char buf[32];
            snprintf(buf, sizeof buf, "%zu", c + 1);
            if (!(f->names[c] = strdup(buf))) return JF_ERR_NOMEM;
        }
        f->positional = 1;
    }
    (void)o;
    if (a.nrows == 0) return fail(err, JF_ERR_DATA, jf_cli_strf("%s: no data rows", f->path));
    return 0;
}

int jf_datafile_open(const char *path, jf_datafile **out, char **err) {
    return jf_datafile_open_ex(path, NULL, out, err);
}

int jf_datafile_open_ex(const char *path, const jf_dataopts *o, jf_datafile **out, char **err) {
    jf_dataopts none;
    memset(&none, 0, sizeof none);
    if (!o) o = &none;
    *out = NULL;
    *err = NULL;
    jf_datafile *f = calloc(1, sizeof *f);
    if (!f) return JF_ERR_NOMEM;
    int is_stdin = strcmp(path, "-") == 0;
    f->path = strdup(is_stdin ? "<stdin>" : path);
    f->allow_nan = o->allow_nan;
    f->threads = o->threads;
    f->nan_hint = o->nan_hint && !o->allow_nan;
    if (!f->path) {
        jf_datafile_free(f);
        return JF_ERR_NOMEM;
    }
    int fd = is_stdin ? STDIN_FILENO : open(path, O_RDONLY);
    int e = fd < 0 ? errno : 0;
    struct stat st;
    if (!e && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) e = EISDIR;
    text_scan scan;
    if (!e) e = slurp(fd, o->threads, &f->text, &f->len, &scan);
    if (fd >= 0 && !is_stdin) close(fd);
    if (e) {
        int st_code = e == ENOMEM ? JF_ERR_NOMEM : JF_ERR_IO;
        *err = jf_cli_strf("%s: %s", f->path, strerror(e));
        jf_datafile_free(f);
        return *err ? st_code : JF_ERR_NOMEM;
    }
    int rc = 0;
    if (f->len >= 2 && (unsigned char)f->text[0] == 0x1f && (unsigned char)f->text[1] == 0x8b) {
        char *plain = NULL;
        size_t plen = 0;
        const char *why = NULL;
        rc = gunzip(f->text, f->len, &plain, &plen, &why);
        if (rc != 0) {
            if (why) *err = jf_cli_strf("%s: gzip: %s", f->path, why);
            jf_datafile_free(f);
            return rc == JF_ERR_DATA && !*err ? JF_ERR_NOMEM : rc;
        }
        free(f->text);
        f->text = plain;
        f->len = plen;
        f->gzipped = 1;
        scan.valid = 0; /* the scan was of the compressed bytes */
    }
    if (jf_npy_is_npy((const unsigned char *)f->text, f->len)) {
        rc = open_npy(f, o, err);
    } else {
        /* A file with a CR but not one LF ends its lines in lone CRs (classic Mac OS, Excel's
         * "CSV (Macintosh)"): they are its lines, as Python's csv and R read them, not one
         * header line holding the whole file. A mix of LF and lone CR is left as it is. */
        if (scan.valid ? scan.cr && !scan.lf
                       : memchr(f->text, '\r', f->len) && !memchr(f->text, '\n', f->len)) {
            for (size_t i = 0; i < f->len; i++)
                if (f->text[i] == '\r') f->text[i] = '\n';
            scan.valid = 0;
        }
        const char *s = f->text, *end = f->text + f->len, *next;
        if (f->len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) s += 3;
        f->quoted = scan.valid ? scan.quote : memchr(f->text, '"', f->len) != NULL;
        for (size_t line = 1; s < end; s = next, line++) {
            size_t extra = 0;
            const char *le = line_end(s, end, &next);
            const char *q = s;
            while (q < le && is_blank(*q)) q++;
            if (q == le || is_comment(q, le, 0)) continue;
            /* The separator is known only once the header is split. A header record with a
             * comma is CSV, and then a quoted name may hold a line break: the comma may come
             * after it ("x\nunit",y), and the rows start that many lines further down. */
            if (f->quoted) {
                const char *rnext, *re = record_end(f, s, end, &rnext, &extra);
                if (memchr(q, ',', (size_t)(re - q))) le = re, next = rnext;
                else extra = 0;
            }
            f->header_line = line;
            f->body_line = line + 1 + extra;
            f->body = (size_t)(next - f->text);
            rc = parse_header(f, q, le, o->allow_no_header || o->columns, o->columns != NULL,
                              err);
            if (f->sep != JF_SEP_COMMA) f->quoted = 0;
            if (rc == 0 && f->positional) {
                /* The row of numbers is data: reading starts on it. */
                f->header_line = line - 1;
                f->body_line = line;
                f->body = (size_t)(s - f->text);
            }
            break;
        }
        if (rc == 0 && f->header_line == 0 && !f->positional)
            rc = fail(err, JF_ERR_DATA, jf_cli_strf("%s: no data rows", f->path));
        if (rc == 0) { /* the lines after the header: all of them, less those before */
            size_t lines = 1;
            const char *from = scan.valid ? f->text : f->text + f->body;
            const char *to = scan.valid ? f->text + f->body : end;
            for (const char *p = from; (p = memchr(p, '\n', (size_t)(to - p))); p++) lines++;
            f->max_rows = scan.valid ? scan.newlines + 2 - lines : lines;
        }
    }
    if (rc == 0 && o->columns) rc = jf_datafile_name_columns(f, o->columns, o->ncolumns, err);
    if (rc != 0) {
        jf_datafile_free(f);
        return rc == JF_ERR_DATA && !*err ? JF_ERR_NOMEM : rc;
    }
    *out = f;
    return 0;
}

int jf_datafile_name_columns(jf_datafile *f, const char *const *names, size_t n, char **err) {
    *err = NULL;
    if (n != f->ncols)
        return fail(err, JF_ERR_DATA,
                    jf_cli_strf("%s: %zu column name%s given, but the file has %zu column%s", f->path, n,
                        n == 1 ? "" : "s", f->ncols, f->ncols == 1 ? "" : "s"));
    for (size_t c = 0; c < n; c++)
        for (size_t d = c + 1; d < n; d++)
            if (strcmp(names[c], names[d]) == 0)
                return fail(err, JF_ERR_DATA,
                            jf_cli_strf("%s: column name '%s' given twice", f->path, names[c]));
    for (size_t c = 0; c < n; c++) {
        char *nm = strdup(names[c]);
        if (!nm) return JF_ERR_NOMEM;
        free(f->names[c]);
        f->names[c] = nm;
    }
    f->positional = 0;
    return 0;
}

size_t jf_datafile_rounded_row(const jf_datafile *f, long col) {
    return f->numeric && col >= 0 && (size_t)col < f->ncols ? f->numeric_inexact[col] : 0;
}

long jf_datafile_column(const jf_datafile *f, const char *name) {
    for (size_t i = 0; i < f->ncols; i++)
        if (strcmp(f->names[i], name) == 0) return (long)i;
    return -1;
}

/* "t, y": the header's names for the "no column" message. */
static char *column_list(const jf_datafile *f) {
    /* A binary file read as text has "names" of control bytes and no end: the list shows
     * them as '?' and stops after about 300 bytes, so the message stays one readable line. */
    enum { CAP = 300 };
    char *s = malloc(CAP + 8), *p = s;
    if (!s) return NULL;
    for (size_t i = 0; i < f->ncols; i++) {
        if (p - s > CAP) {
            memcpy(p, ", ...", 5);
            p += 5;
            break;
        }
        if (i) *p++ = ',', *p++ = ' ';
        for (const char *c = f->names[i]; *c && p - s <= CAP; c++) *p++ = *c;
    }
    *p = '\0';
    jf_text_printable(s, (size_t)(p - s), 0);
    return s;
}

/* "no column 'x' (columns: t, y)" into *err; when a column's name has a ';' in it, the hint
 * that semicolon-separated tables (European CSV) are not read; else, when the header row holds
 * numbers, the hint that it may be a first row of data read as a header. The ';' comes first:
 * a headerless '1,5;2' row reads as columns '1' and '5;2', and --columns would not help.
 * Returns JF_ERR_DATA (JF_ERR_NOMEM). */
static int no_column(const jf_datafile *f, const char *name, char **err) {
    char *list = column_list(f);
    int semicolons = 0;
    for (size_t i = 0; i < f->ncols && !f->positional; i++) semicolons |= !!strchr(f->names[i], ';');
    int rc = fail(err, JF_ERR_DATA,
                  list ? jf_cli_strf("%s: no column '%s' (columns: %s)%s", f->path, name, list,
                                     semicolons
                                         ? "; the fields seem separated by ';': jitfit reads "
                                           "comma-, tab- or space-separated tables with '.' as "
                                           "the decimal point, convert the file to one of those"
                                     : f->header_numbers && !f->positional
                                         ? "; the header row has numbers in it: if it is data, "
                                           "name the columns with --columns"
                                         : "")
                       : NULL);
    free(list);
    return rc;
}

/* A copy of the n bytes at s (at most n; a NUL ends them) for a message, with control bytes
 * (escape sequences of a terminal, line breaks) shown as '?' as column_list does: the text of a
 * data file must not act on the terminal that reads the error. NULL when out of memory. */
static char *shown_text(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    size_t i = 0;
    for (; i < n && s[i]; i++) d[i] = s[i];
    d[i] = '\0';
    jf_text_printable(d, i, 0);
    return d;
}

/* What `jitfit fit` adds to the error for a NaN or empty cell: the option that drops such rows. */
#define NAN_HINT                                                                                   \
    " (--nan-policy omit, or nan_policy = omit in a job file, drops rows with NaN or missing "   \
    "values)"

/* The error's words for a cell that reads as v, not finite. */
static const char *not_finite(const jf_datafile *f, double v) {
    if (!isnan(v)) return "value is not finite";
    return f->nan_hint ? "value is NaN" NAN_HINT : "value is not finite";
}

/* The message for a cell [fs, fe) of column col (0-based) on line that is not a number. */
static char *cell_message(const jf_datafile *f, size_t line, size_t col, const char *fs,
                          const char *fe) {
    size_t n = (size_t)(fe - fs);
    int cut = n > CELL_QUOTE_MAX;
    char *name = shown_text(f->names[col], strlen(f->names[col]));
    char *cell = shown_text(fs, cut ? CELL_QUOTE_MAX : n);
    char *msg = NULL;
    if (name && cell) {
        if (n == 0)
            msg = jf_cli_strf("%s:%zu: column %zu ('%s'): missing value%s", f->path, line, col + 1,
                              name, f->nan_hint ? NAN_HINT : "");
        else if (f->nan_hint && is_missing_word(fs, fe))
            msg = jf_cli_strf("%s:%zu: column %zu ('%s'): '%s' marks a missing value%s", f->path,
                              line, col + 1, name, cell, NAN_HINT);
        else
            msg = jf_cli_strf("%s:%zu: column %zu ('%s'): '%s%s' is not a number", f->path, line,
                              col + 1, name, cell, cut ? "..." : "");
    }
    free(name);
    free(cell);
    return msg;
}

/* Appends the run (row, line) to t. */
static int push_run(jf_table *t, size_t *cap, size_t row, size_t line) {
    if (t->nruns == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        jf_rowrun *nr = realloc(t->runs, nc * sizeof *nr);
        if (!nr) return -1;
        t->runs = nr;
        *cap = nc;
    }
    t->runs[t->nruns].row = row;
    t->runs[t->nruns].line = line;
    t->nruns++;
    return 0;
}

/* The rows of a .npy file into t's columns (slot as in jf_datafile_read). Messages name the
 * 1-based row, as there are no lines. */
static int read_numeric(const jf_datafile *f, const long *slot, jf_table *t, char **err) {
    for (size_t c = 0; c < f->ncols; c++) {
        if (slot[c] < 0) continue;
        const double *src = f->numeric + c * f->numeric_rows;
        double *dst = t->values + (size_t)slot[c] * t->ld;
        for (size_t i = 0; i < f->numeric_rows; i++) {
            if (!isfinite(src[i]) && !(isnan(src[i]) && f->allow_nan))
                return fail(err, JF_ERR_DATA,
                            jf_cli_strf("%s: row %zu, column %zu ('%s'): %s", f->path, i + 1, c + 1,
                                        f->names[c], not_finite(f, src[i])));
            dst[i] = src[i];
        }
    }
    t->nrows = f->numeric_rows;
    return 0;
}

char *jf_datafile_hash_note(const jf_datafile *f) {
    if (!f->hash_rows) return NULL;
    int one = f->hash_rows == 1;
    return jf_cli_strf("%s:%zu: %zu line%s that start%s with '#' and %s as many fields as the "
                       "header %s skipped as %s; a cell that starts with '#' is read as data "
                       "when quoted (\"#1\")",
                       f->path, f->hash_line, f->hash_rows, one ? "" : "s", one ? "s" : "",
                       one ? "has" : "have", one ? "was" : "were", one ? "a comment" : "comments");
}

/* A span of whole lines of a text body and what parse_span found in it. */
typedef struct span {
    const char *s, *end; /* the span */
    size_t line;         /* 1-based line number of s */
    size_t lines;        /* its line ends ('\n'): at most as many rows, and one more */
    size_t row0;         /* row of the table that its first row fills */
    size_t rows;         /* rows parsed */
    jf_rowrun *runs;     /* their lines, rows counted from the table's row 0 as if row0 held */
    size_t nruns, runcap;
    size_t hash_rows, hash_line; /* as jf_datafile's, for this span */
    int rc;              /* 0, or the failure whose message is err */
    char *err;
} span;

/* Parses the records of sp's text into the columns of values (ld apart; file column c into
 * column slot[c] when slot[c] >= 0) from row sp->row0 on, stopping at the first bad record:
 * the one parser of jf_datafile_read, over the whole body or over one span of it per thread. */
static void parse_span(const jf_datafile *f, const long *slot, double *values, size_t ld,
                       span *sp) {
    const char *next;
    size_t row = sp->row0, line = sp->line;
    jf_table runs = {.runs = NULL, .nruns = 0};
    for (size_t extra = 0; sp->s < sp->end; sp->s = next, line += 1 + extra) {
        const char *s = sp->s, *e = record_end(f, s, sp->end, &next, &extra);
        const char *q = s;
        while (q < e && is_blank(*q)) q++;
        if (q == e) continue;
        if (is_comment(q, e, f->sep)) {
            if (comment_like_row(f, q, e) && sp->hash_rows++ == 0) sp->hash_line = line;
            continue;
        }
        const char *p = f->sep == JF_SEP_BLANKS ? q : s, *fs, *fe;
        size_t col = 0;
        int last = 0, r;
        while (!last && (r = next_field(f->sep, &p, e, &fs, &fe, &last)) != 0) {
            if (r < 0) {
                sp->rc = fail(&sp->err, JF_ERR_DATA,
                              jf_cli_strf("%s:%zu: column %zu: unterminated quoted field or text "
                                          "after its closing quote",
                                          f->path, line, col + 1));
                goto done;
            }
            if (col < f->ncols && slot[col] >= 0) {
                double v;
                if (fe - fs == 2 && fs[0] == '"' && fs[1] == '"') fe = fs; /* "" is empty */
                if (f->allow_nan && (fs == fe || is_missing_word(fs, fe))) {
                    v = NAN;
                } else if (parse_cell(fs, fe, &v) != 0) {
                    sp->rc = fail(&sp->err, JF_ERR_DATA, cell_message(f, line, col, fs, fe));
                    goto done;
                }
                if (!isfinite(v) && !(isnan(v) && f->allow_nan)) {
                    sp->rc = fail(&sp->err, JF_ERR_DATA,
                                  jf_cli_strf("%s:%zu: column %zu ('%s'): %s", f->path, line,
                                              col + 1, f->names[col], not_finite(f, v)));
                    goto done;
                }
                values[(size_t)slot[col] * ld + row] = v;
            }
            col++;
        }
        if (col != f->ncols) {
            sp->rc = fail(&sp->err, JF_ERR_DATA,
                          jf_cli_strf("%s:%zu: expected %zu field%s, found %zu", f->path, line,
                                      f->ncols, f->ncols == 1 ? "" : "s", col));
            goto done;
        }
        if (runs.nruns == 0 ||
            line != runs.runs[runs.nruns - 1].line + (row - runs.runs[runs.nruns - 1].row)) {
            if (push_run(&runs, &sp->runcap, row, line) != 0) {
                sp->rc = JF_ERR_NOMEM;
                goto done;
            }
        }
        row++;
    }
done:
    sp->rows = row - sp->row0;
    sp->runs = runs.runs;
    sp->nruns = runs.nruns;
}

/* Bodies of at least this many bytes are parsed by several threads (jf_datafile.threads):
 * about 5 ms of parsing on one core, against tens of microseconds to start threads. */
#ifndef PARALLEL_MIN_BYTES /* tests set it lower */
#define PARALLEL_MIN_BYTES ((size_t)1 << 20)
#endif
/* Spans per thread: spans of equal bytes may still differ in work (comments, long lines). */
#define SPANS_PER_THREAD 4

/* The spans of a parallel read, and the file's columns they fill. */
typedef struct span_job {
    const jf_datafile *f;
    const long *slot;
    double *values;
    size_t ld;
    span *sp;
} span_job;

/* jf_pool task: counts the line ends of span k. */
static void count_lines_task(void *ctx, size_t k, int worker) {
    (void)worker;
    span *sp = &((span_job *)ctx)->sp[k];
    for (const char *p = sp->s; (p = memchr(p, '\n', (size_t)(sp->end - p))); p++) sp->lines++;
}

static void parse_span_task(void *ctx, size_t k, int worker) {
    (void)worker;
    span_job *j = ctx;
    parse_span(j->f, j->slot, j->values, j->ld, &j->sp[k]);
}

/* Appends span sp's runs to t's (its rows `shift` lower there), joining its first run to t's
 * last where they continue one another, as one pass over the body would have. */
static int append_runs(jf_table *t, size_t *cap, const span *sp, size_t shift) {
    for (size_t i = 0; i < sp->nruns; i++) {
        size_t row = sp->runs[i].row - shift, line = sp->runs[i].line;
        if (t->nruns && line == t->runs[t->nruns - 1].line + (row - t->runs[t->nruns - 1].row))
            continue;
        if (push_run(t, cap, row, line) != 0) return JF_ERR_NOMEM;
    }
    return 0;
}

/* The body of f (no quoted records: a line is a record) into t on a pool of threads: spans of
 * whole lines, each parsed into the rows that its first line's number bounds (rows are at most
 * lines), then moved down over the rows that blank and comment lines left free. The table, its
 * runs, hash rows and the first error in the file are those of one pass over the body. 1 when
 * it ran (status in *rc), 0 when there is no pool to run it on. */
static int read_parallel(jf_datafile *f, const long *slot, jf_table *t, size_t *runcap, int *rc,
                         char **err) {
    int nt = jf_threads_resolve(f->threads);
    size_t len = f->len - f->body;
    if (nt < 2 || len < PARALLEL_MIN_BYTES) return 0;
    size_t nspans = (size_t)nt * SPANS_PER_THREAD;
    span *sp = calloc(nspans, sizeof *sp);
    jf_pool *pool = sp ? jf_pool_acquire(nt) : NULL;
    if (!pool) {
        free(sp);
        return 0;
    }
    const char *body = f->text + f->body, *end = f->text + f->len, *s = body;
    for (size_t k = 0; k < nspans; k++) {
        const char *e = k + 1 == nspans ? end : body + len / nspans * (k + 1);
        if (e < s) e = s;
        const char *nl = e < end ? memchr(e, '\n', (size_t)(end - e)) : NULL;
        sp[k].s = s;
        sp[k].end = e == end ? end : nl ? nl + 1 : end;
        s = sp[k].end;
    }
    span_job job = {.f = f, .slot = slot, .values = t->values, .ld = t->ld, .sp = sp};
    jf_pool_run(pool, nspans, count_lines_task, &job);
    size_t lines = 0;
    for (size_t k = 0; k < nspans; k++) {
        sp[k].row0 = lines;
        sp[k].line = f->body_line + lines;
        lines += sp[k].lines;
    }
    jf_pool_run(pool, nspans, parse_span_task, &job);
    jf_pool_release(pool);
    size_t rows = 0;
    *rc = 0;
    for (size_t k = 0; k < nspans && *rc == 0; k++) {
        if (sp[k].rc != 0) {
            *rc = sp[k].rc;
            *err = sp[k].err;
            sp[k].err = NULL;
            break;
        }
        size_t shift = sp[k].row0 - rows;
        if (shift && sp[k].rows)
            for (size_t c = 0; c < t->ncols; c++) /* the columns parsed into */
                if (slot[t->file_col[c]] == (long)c)
                    memmove(t->values + c * t->ld + rows, t->values + c * t->ld + sp[k].row0,
                            sp[k].rows * sizeof(double));
        if (append_runs(t, runcap, &sp[k], shift) != 0) *rc = JF_ERR_NOMEM;
        if (sp[k].hash_rows && f->hash_rows == 0) f->hash_line = sp[k].hash_line;
        f->hash_rows += sp[k].hash_rows;
        rows += sp[k].rows;
    }
    t->nrows = rows;
    for (size_t k = 0; k < nspans; k++) {
        free(sp[k].runs);
        free(sp[k].err);
    }
    free(sp);
    return 1;
}

int jf_datafile_read(jf_datafile *f, const char *const *names, size_t nnames, jf_table *out,
                     char **err) {
    memset(out, 0, sizeof *out);
    *err = NULL;
    jf_table t;
    memset(&t, 0, sizeof t);
    long *slot = malloc((f->ncols ? f->ncols : 1) * sizeof *slot);
    t.file_col = malloc((nnames ? nnames : 1) * sizeof *t.file_col);
    int rc = 0;
    if (!slot || !t.file_col) {
        rc = JF_ERR_NOMEM;
        goto done;
    }
    /* slot[c]: the first requested column that file column c fills, or -1 to skip it. */
    for (size_t c = 0; c < f->ncols; c++) slot[c] = -1;
    for (size_t k = 0; k < nnames; k++) {
        long c = jf_datafile_column(f, names[k]);
        if (c < 0) {
            rc = no_column(f, names[k], err);
            goto done;
        }
        for (size_t c2 = (size_t)c + 1; c2 < f->ncols; c2++)
            if (strcmp(f->names[c2], names[k]) == 0) {
                rc = fail(err, JF_ERR_DATA,
                          jf_cli_strf("%s:%zu: column '%s' appears twice in the header (columns %ld and "
                              "%zu)",
                              f->path, f->header_line, names[k], c + 1, c2 + 1));
                goto done;
            }
        t.file_col[k] = (size_t)c;
        if (slot[c] < 0) slot[c] = (long)k;
    }
    t.ncols = nnames;
    t.ld = f->max_rows;
    if (nnames && t.ld > SIZE_MAX / sizeof(double) / nnames) {
        rc = JF_ERR_NOMEM;
        goto done;
    }
    t.values = malloc((nnames ? nnames * t.ld : 1) * sizeof *t.values);
    if (!t.values) {
        rc = JF_ERR_NOMEM;
        goto done;
    }

    size_t runcap = 0, row = 0;
    f->hash_rows = 0;
    if (f->numeric) {
        rc = read_numeric(f, slot, &t, err);
        row = t.nrows;
        if (rc == 0 && push_run(&t, &runcap, 0, 1) != 0) rc = JF_ERR_NOMEM;
        if (rc != 0) goto done;
    } else if (f->text && !f->quoted && read_parallel(f, slot, &t, &runcap, &rc, err)) {
        if (rc != 0) goto done;
        row = t.nrows;
    } else if (f->text) {
        span sp = {.s = f->text + f->body, .end = f->text + f->len, .line = f->body_line};
        parse_span(f, slot, t.values, t.ld, &sp);
        t.runs = sp.runs;
        t.nruns = sp.nruns;
        f->hash_rows = sp.hash_rows;
        f->hash_line = sp.hash_line;
        row = sp.rows;
        rc = sp.rc;
        *err = sp.err;
        if (rc != 0) goto done;
    }
    t.nrows = row;
    if (row == 0 && !f->numeric) {
        rc = fail(err, JF_ERR_DATA, jf_cli_strf("%s: no data rows", f->path));
        goto done;
    }
    /* A column asked for twice was parsed once; copy it to its other slots. */
    for (size_t k = 0; k < nnames; k++) {
        size_t first = (size_t)slot[t.file_col[k]];
        if (first != k) memcpy(t.values + k * t.ld, t.values + first * t.ld, row * sizeof(double));
    }
done:
    free(slot);
    if (rc != 0) {
        jf_table_free(&t);
        if (rc == JF_ERR_NOMEM && !*err) *err = jf_cli_strf("%s: out of memory", f->path);
        return rc;
    }
    *out = t;
    return 0;
}

size_t jf_table_line(const jf_table *t, size_t row) {
    if (t->nruns == 0) return 0;
    size_t lo = 0, hi = t->nruns;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->runs[mid].row <= row) lo = mid;
        else hi = mid;
    }
    return t->runs[lo].line + (row - t->runs[lo].row);
}

void jf_table_free(jf_table *t) {
    if (!t) return;
    free(t->values);
    free(t->file_col);
    free(t->runs);
    memset(t, 0, sizeof *t);
}

void jf_strings_free(char **s, size_t n) {
    if (!s) return;
    for (size_t i = 0; i < n; i++) free(s[i]);
    free(s);
}

int jf_datafile_read_text(const jf_datafile *f, const char *name, char ***out, size_t *nrows,
                          char **err) {
    *out = NULL;
    *nrows = 0;
    *err = NULL;
    long c = jf_datafile_column(f, name);
    if (c < 0) return no_column(f, name, err);
    size_t cap = f->max_rows ? f->max_rows : 1, row = 0;
    char **v = calloc(cap, sizeof *v);
    if (!v) return JF_ERR_NOMEM;
    if (f->numeric) {
        /* labels are compared as text: integers a double rounds would merge (2^62 and 2^62+1) */
        if (f->numeric_inexact[c]) {
            free(v);
            return fail(err, JF_ERR_DATA,
                        jf_cli_strf("%s:%zu: column %ld ('%s'): an integer beyond 2^53, which a "
                                    "double does not hold exactly: as labels, such numbers could "
                                    "not be told apart",
                                    f->path, f->numeric_inexact[c], c + 1, f->names[c]));
        }
        for (; row < f->numeric_rows; row++) {
            char buf[64];
            jf_cli_format_double(buf, sizeof buf, f->numeric[(size_t)c * f->numeric_rows + row]);
            if (!(v[row] = strdup(buf))) goto nomem;
        }
        *out = v;
        *nrows = row;
        return 0;
    }
    const char *s = f->text + f->body, *end = f->text + f->len, *next;
    size_t line = f->body_line;
    for (size_t extra = 0; s < end; s = next, line += 1 + extra) {
        const char *e = record_end(f, s, end, &next, &extra);
        const char *q = s;
        while (q < e && is_blank(*q)) q++;
        if (q == e || is_comment(q, e, f->sep)) continue;
        const char *p = f->sep == JF_SEP_BLANKS ? q : s, *fs = NULL, *fe = NULL;
        size_t col = 0;
        int last = 0, r;
        char *cell = NULL;
        while (!last && (r = next_field(f->sep, &p, e, &fs, &fe, &last)) != 0) {
            if (r < 0) {
                free(cell); /* the wanted column may come before the broken field */
                jf_strings_free(v, row);
                return fail(err, JF_ERR_DATA,
                            jf_cli_strf("%s:%zu: column %zu: unterminated quoted field or text after "
                                "its closing quote",
                                f->path, line, col + 1));
            }
            if (col == (size_t)c && !(cell = unquote(fs, fe))) goto nomem;
            col++;
        }
        if (col != f->ncols) {
            free(cell);
            jf_strings_free(v, row);
            return fail(err, JF_ERR_DATA,
                        jf_cli_strf("%s:%zu: expected %zu field%s, found %zu", f->path, line, f->ncols,
                            f->ncols == 1 ? "" : "s", col));
        }
        if (row == cap) { /* cannot happen: max_rows bounds the rows */
            free(cell);
            goto nomem;
        }
        v[row++] = cell;
    }
    *out = v;
    *nrows = row;
    return 0;
nomem:
    jf_strings_free(v, cap);
    return JF_ERR_NOMEM;
}

size_t jf_table_compact(jf_table *t, const unsigned char *keep) {
    size_t n = t->nrows, kept = 0;
    for (size_t i = 0; i < n; i++) kept += keep[i] != 0;
    if (kept == n) return 0;
    /* Both allocations come first: t stays unchanged when either fails. The runs are rebuilt
     * from the kept rows' lines; there are at most as many as before plus one per dropped row. */
    size_t *lines = malloc((kept ? kept : 1) * sizeof *lines);
    size_t cap = t->nruns + (n - kept) + 1, nr = 0;
    jf_rowrun *runs = malloc(cap * sizeof *runs);
    if (!lines || !runs) {
        free(lines);
        free(runs);
        return 0;
    }
    for (size_t i = 0, j = 0; i < n; i++)
        if (keep[i]) lines[j++] = jf_table_line(t, i);
    for (size_t c = 0; c < t->ncols; c++) {
        double *col = t->values + c * t->ld;
        for (size_t i = 0, j = 0; i < n; i++)
            if (keep[i]) col[j++] = col[i];
    }
    for (size_t j = 0; j < kept; j++)
        if (nr == 0 || lines[j] != runs[nr - 1].line + (j - runs[nr - 1].row)) {
            runs[nr].row = j;
            runs[nr].line = lines[j];
            nr++;
        }
    free(lines);
    free(t->runs);
    t->runs = runs;
    t->nruns = nr;
    t->nrows = kept;
    return n - kept;
}
