/* Reader of NumPy .npy files (see npy.h). The header is a Python dict literal; only the three
 * keys NumPy writes are read, with a tiny hand parser: a full Python literal parser would accept
 * more than the converter below can honour. Values are converted element by element to double,
 * honouring the byte order each dtype states, so a file written on a big-endian machine reads
 * the same.
 */
#include "npy.h"
#include "util.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/jitfit.h"

/* Most fields a structured array may have (a sanity limit against hostile headers). */
#define MAX_FIELDS 4096

/* One scalar element type. */
typedef struct dtype {
    char kind;    /* 'f' float, 'i' signed, 'u' unsigned, 'b' boolean */
    size_t size;  /* bytes */
    int swap;     /* 1 when stored big-endian (this reader runs on little-endian hosts) */
    size_t off;   /* byte offset in a record (structured arrays) */
} dtype;

int jf_npy_is_npy(const unsigned char *buf, size_t len) {
    return len >= 6 && memcmp(buf, "\x93NUMPY", 6) == 0;
}

void jf_npy_free(jf_npy *a) {
    if (!a) return;
    if (a->names)
        for (size_t c = 0; c < a->ncols; c++) free(a->names[c]);
    free(a->names);
    free(a->values);
    free(a->inexact);
    memset(a, 0, sizeof *a);
}

/* Header cursor. */
typedef struct cursor {
    const char *p; /* next character */
    const char *e; /* end of the header */
} cursor;

static void skip_ws(cursor *c) {
    while (c->p < c->e && isspace((unsigned char)*c->p)) c->p++;
}

/* A quoted Python string ('...' or "..."), without escapes; returns a malloc'd copy or NULL. */
static char *parse_str(cursor *c) {
    skip_ws(c);
    if (c->p >= c->e || (*c->p != '\'' && *c->p != '"')) return NULL;
    char q = *c->p++;
    const char *s = c->p;
    while (c->p < c->e && *c->p != q) {
        if (*c->p == '\\') return NULL;
        c->p++;
    }
    if (c->p >= c->e) return NULL;
    char *r = strndup(s, (size_t)(c->p - s));
    c->p++;
    return r;
}

static int expect(cursor *c, char ch) {
    skip_ws(c);
    if (c->p < c->e && *c->p == ch) {
        c->p++;
        return 0;
    }
    return -1;
}

/* "<f8" and friends. Returns 0, or -1 when the text is not a supported scalar type. */
static int parse_dtype(const char *s, dtype *d) {
    memset(d, 0, sizeof *d);
    if (*s == '<' || *s == '|' || *s == '=') s++;
    else if (*s == '>') {
        d->swap = 1;
        s++;
    }
    d->kind = *s++;
    if (d->kind != 'f' && d->kind != 'i' && d->kind != 'u' && d->kind != 'b') return -1;
    char *end;
    unsigned long n = strtoul(s, &end, 10);
    if (end == s || *end) return -1;
    d->size = n;
    if (d->kind == 'f') return n == 4 || n == 8 ? 0 : -1;
    if (d->kind == 'b') return n == 1 ? 0 : -1;
    return n == 1 || n == 2 || n == 4 || n == 8 ? 0 : -1;
}

/* 1 when the magnitude v of an integer is no double's value: more than 53 significant bits. */
static int beyond_double(uint64_t v) {
    for (; v >> 53; v >>= 1)
        if (v & 1) return 1;
    return 0;
}

/* The element at p as a double; *inexact set when it is an integer the double rounds. */
static double load(const unsigned char *p, const dtype *d, int *inexact) {
    unsigned char b[8];
    for (size_t i = 0; i < d->size; i++) b[i] = d->swap ? p[d->size - 1 - i] : p[i];
    switch (d->kind) {
    case 'f':
        if (d->size == 8) {
            double v;
            memcpy(&v, b, 8);
            return v;
        } else {
            float v;
            memcpy(&v, b, 4);
            return (double)v;
        }
    case 'b': return b[0] ? 1.0 : 0.0;
    case 'u': {
        uint64_t v = 0;
        for (size_t i = d->size; i-- > 0;) v = v << 8 | b[i];
        *inexact = beyond_double(v);
        return (double)v;
    }
    default: {
        uint64_t v = 0;
        for (size_t i = d->size; i-- > 0;) v = v << 8 | b[i];
        unsigned bits = (unsigned)(8 * d->size);
        if (bits < 64 && (v >> (bits - 1)) & 1) v |= ~(uint64_t)0 << bits; /* sign-extend */
        *inexact = beyond_double(v >> 63 ? ~v + 1 : v);
        return (double)(int64_t)v;
    }
    }
}

int jf_npy_parse(const char *path, const unsigned char *buf, size_t len, jf_npy *out,
                 char **err) {
    memset(out, 0, sizeof *out);
    *err = NULL;
    dtype *fields = NULL;
    char **names = NULL;
    size_t nfields = 0, shape[2] = {0, 1}, ndim = 0;
    int fortran = 0, have_descr = 0, have_order = 0, have_shape = 0;
    int rc = JF_ERR_DATA;
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        *err = jf_cli_strf(__VA_ARGS__);                                                               \
        goto done;                                                                                 \
    } while (0)

    if (len < 10) FAIL("%s: truncated .npy header", path);
    unsigned major = buf[6];
    size_t hlen, hstart;
    if (major == 1) {
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        hstart = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12) FAIL("%s: truncated .npy header", path);
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 |
               (size_t)buf[11] << 24;
        hstart = 12;
    } else {
        FAIL("%s: unsupported .npy format version %u", path, major);
    }
    if (hlen > len - hstart) FAIL("%s: truncated .npy header", path);
    cursor c = {(const char *)buf + hstart, (const char *)buf + hstart + hlen};
    if (expect(&c, '{') != 0) FAIL("%s: malformed .npy header (expected a dict)", path);
    for (;;) {
        skip_ws(&c);
        if (c.p < c.e && *c.p == '}') break;
        char *key = parse_str(&c);
        if (!key || expect(&c, ':') != 0) {
            free(key);
            FAIL("%s: malformed .npy header", path);
        }
        skip_ws(&c);
        /* A key given twice would overwrite (and leak) what the first one parsed. */
        if ((strcmp(key, "descr") == 0 && have_descr) ||
            (strcmp(key, "fortran_order") == 0 && have_order) ||
            (strcmp(key, "shape") == 0 && have_shape)) {
            *err = jf_cli_strf("%s: key '%s' appears twice in the .npy header", path, key);
            free(key);
            goto done;
        }
        if (strcmp(key, "descr") == 0) {
            have_descr = 1;
            if (c.p < c.e && *c.p == '[') {
                c.p++;
                size_t cap = 0;
                for (;;) {
                    skip_ws(&c);
                    if (c.p < c.e && *c.p == ']') {
                        c.p++;
                        break;
                    }
                    if (nfields == MAX_FIELDS) {
                        free(key);
                        FAIL("%s: more than %d fields in a structured array", path, MAX_FIELDS);
                    }
                    if (nfields == cap) {
                        cap = cap ? 2 * cap : 8;
                        dtype *nf = realloc(fields, cap * sizeof *nf);
                        char **nn = nf ? realloc(names, cap * sizeof *nn) : NULL;
                        if (nf) fields = nf;
                        if (!nf || !nn) {
                            free(key);
                            rc = JF_ERR_NOMEM;
                            goto done;
                        }
                        names = nn;
                    }
                    names[nfields] = NULL;
                    if (expect(&c, '(') != 0 || !(names[nfields] = parse_str(&c)) ||
                        expect(&c, ',') != 0) {
                        nfields += names[nfields] != NULL;
                        free(key);
                        FAIL("%s: malformed field list in the .npy header", path);
                    }
                    nfields++;
                    skip_ws(&c);
                    int nested = c.p < c.e && *c.p == '[';
                    char *t = nested ? NULL : parse_str(&c);
                    skip_ws(&c);
                    int sub = t && c.p < c.e && *c.p == ','; /* ('a', '<f8', (3,)) */
                    if (!t || parse_dtype(t, &fields[nfields - 1]) != 0 || expect(&c, ')') != 0) {
                        if (nested || sub)
                            *err = jf_cli_strf("%s: field '%s' is a %s: only scalar float, "
                                               "integer and bool fields are supported",
                                               path, names[nfields - 1],
                                               nested ? "nested structure" : "sub-array");
                        else
                            *err = jf_cli_strf("%s: field '%s' has type '%s': only scalar float, "
                                               "integer and bool fields are supported",
                                               path, names[nfields - 1], t ? t : "?");
                        free(t);
                        free(key);
                        goto done;
                    }
                    free(t);
                    skip_ws(&c);
                    if (c.p < c.e && *c.p == ',') c.p++;
                }
            } else {
                char *t = parse_str(&c);
                fields = calloc(1, sizeof *fields);
                if (!fields) {
                    free(t);
                    free(key);
                    rc = JF_ERR_NOMEM;
                    goto done;
                }
                if (!t || parse_dtype(t, &fields[0]) != 0) {
                    free(key);
                    *err = jf_cli_strf("%s: unsupported dtype '%s' (use float64, float32, integer "
                                   "or bool)",
                                   path, t ? t : "?");
                    free(t);
                    goto done;
                }
                free(t);
            }
        } else if (strcmp(key, "fortran_order") == 0) {
            have_order = 1;
            if ((size_t)(c.e - c.p) >= 4 && memcmp(c.p, "True", 4) == 0) fortran = 1, c.p += 4;
            else if ((size_t)(c.e - c.p) >= 5 && memcmp(c.p, "False", 5) == 0) c.p += 5;
            else {
                free(key);
                FAIL("%s: malformed fortran_order in the .npy header", path);
            }
        } else if (strcmp(key, "shape") == 0) {
            have_shape = 1;
            if (expect(&c, '(') != 0) {
                free(key);
                FAIL("%s: malformed shape in the .npy header", path);
            }
            for (;;) {
                skip_ws(&c);
                if (c.p < c.e && *c.p == ')') {
                    c.p++;
                    break;
                }
                char *end;
                /* strtoull would take "-1" for 2^64 - 1: a size is digits only */
                unsigned long long v = isdigit((unsigned char)*c.p) ? strtoull(c.p, &end, 10) : 0;
                if (!isdigit((unsigned char)*c.p) || end > c.e) {
                    free(key);
                    FAIL("%s: malformed shape in the .npy header", path);
                }
                c.p = end;
                if (ndim == 2) {
                    free(key);
                    FAIL("%s: the array has more than 2 dimensions", path);
                }
                shape[ndim++] = (size_t)v;
                skip_ws(&c);
                if (c.p < c.e && *c.p == ',') c.p++;
            }
        } else {
            free(key);
            FAIL("%s: unexpected key in the .npy header", path);
        }
        free(key);
        skip_ws(&c);
        if (c.p < c.e && *c.p == ',') c.p++;
    }
    if (!have_descr || !have_order || !have_shape)
        FAIL("%s: the .npy header lacks descr, fortran_order or shape", path);
    if (ndim == 0) FAIL("%s: the array is a scalar, not a table", path);
    if (names && ndim != 1) FAIL("%s: a structured array must be 1-D", path);

    if (!fields || (names && nfields == 0)) FAIL("%s: the .npy descr has no fields", path);
    /* NumPy never writes two fields of one name; the reader could only refuse them later, as
     * a header's name twice, on a line 0 that a .npy file does not have */
    for (size_t k = 0; k < nfields; k++)
        for (size_t k2 = k + 1; k2 < nfields; k2++)
            if (strcmp(names[k], names[k2]) == 0)
                FAIL("%s: field '%s' appears twice in the .npy header (fields %zu and %zu)", path,
                     names[k], k + 1, k2 + 1);
    size_t nrows = shape[0], ncols = names ? nfields : shape[1], rec = 0;
    if (names)
        for (size_t k = 0; k < nfields; k++) {
            fields[k].off = rec;
            rec += fields[k].size;
        }
    else rec = fields[0].size * ncols;
    if (ncols == 0) FAIL("%s: the array has no columns", path);
    /* with no rows nothing bounds ncols by the file's length (shape (0, 10^16)) */
    if (nrows == 0) FAIL("%s: no data rows", path);
    /* Every element takes at least one byte, so nrows*ncols <= need <= the file size below:
     * that bounds the allocation and the copy loops by the input's length. */
    if (rec < ncols) FAIL("%s: the array has zero-sized elements", path);
    if (nrows && rec > SIZE_MAX / nrows / 2) FAIL("%s: the array is too large", path);
    size_t need = rec * nrows, have = len - hstart - hlen;
    if (have < need)
        FAIL("%s: truncated .npy data: expected %zu byte%s, found %zu", path, need,
             need == 1 ? "" : "s", have);
    out->values = malloc((nrows * ncols > 0 ? nrows * ncols : 1) * sizeof(double));
    out->inexact = calloc(ncols, sizeof *out->inexact);
    if (!out->values || !out->inexact) {
        rc = JF_ERR_NOMEM;
        goto done;
    }
    const unsigned char *d = buf + hstart + hlen;
    for (size_t col = 0; col < ncols; col++) {
        double *dst = out->values + col * nrows;
        for (size_t i = 0; i < nrows; i++) {
            int inexact = 0;
            if (names) {
                dst[i] = load(d + i * rec + fields[col].off, &fields[col], &inexact);
            } else {
                size_t idx = fortran ? col * nrows + i : i * ncols + col;
                dst[i] = load(d + idx * fields[0].size, &fields[0], &inexact);
            }
            if (inexact && !out->inexact[col]) out->inexact[col] = i + 1;
        }
    }
    out->nrows = nrows;
    out->ncols = ncols;
    out->names = names;
    names = NULL;
    rc = 0;
done:
#undef FAIL
    if (names)
        for (size_t k = 0; k < nfields; k++) free(names[k]);
    free(names);
    free(fields);
    if (rc != 0) {
        free(out->values);
        free(out->inexact);
        out->values = NULL;
        out->inexact = NULL;
        if (rc == JF_ERR_DATA && !*err) rc = JF_ERR_NOMEM;
    }
    return rc;
}
