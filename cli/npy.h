/* NumPy .npy arrays as data files (data.c hands over any file that starts with the .npy magic).
 *
 * Supported: format versions 1-3; a 2-D array (rows = points, columns = variables) or a 1-D
 * array (one column) of float64/float32 or (un)signed integers of 1-8 bytes, either byte order,
 * C or Fortran order; or a 1-D structured (record) array whose fields are such scalars, which
 * gives named columns. Anything else (object arrays, sub-arrays, padded records, complex) is a
 * clear error rather than a guess.
 */
#ifndef JF_CLI_NPY_H
#define JF_CLI_NPY_H

#include <stddef.h>

/* A parsed array, converted to doubles. */
typedef struct jf_npy {
    size_t nrows;   /* number of points (first dimension) */
    size_t ncols;   /* number of columns (second dimension, or number of fields) */
    char **names;   /* ncols field names of a structured array; NULL for a plain array,
                       whose columns are positional */
    double *values; /* column-major: column c holds values[c*nrows .. c*nrows+nrows) */
    size_t *inexact; /* ncols: the 1-based row of the column's first integer that a double does
                        not hold exactly (beyond 2^53), 0 if none: such a column's values may
                        compare equal where the file's differ */
} jf_npy;

/* 1 when the bytes start with the .npy magic "\x93NUMPY". */
int jf_npy_is_npy(const unsigned char *buf, size_t len);

/* Parses the .npy image buf[0..len) read from path (used in messages). Returns 0 and fills
 * *out (free with jf_npy_free), or a jf_status with *err a malloc'd message naming the file
 * and what is wrong ("data.npy: unsupported dtype '<c16' (complex)"). */
int jf_npy_parse(const char *path, const unsigned char *buf, size_t len, jf_npy *out,
                 char **err);

/* Frees the arrays of a (not a itself); accepts NULL. */
void jf_npy_free(jf_npy *a);

#endif
