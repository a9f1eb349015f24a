/* Decimal numbers of data files to doubles, correctly rounded, through fast_float
 * (libfast-float-dev: Eisel-Lemire with an exact fallback, several times faster than strtod and
 * giving the same double for every decimal text). The one C++ file of the CLI, behind a C call. */
#ifndef JF_CLI_DECIMAL_H
#define JF_CLI_DECIMAL_H

#ifdef __cplusplus
extern "C" {
#endif

/* 0 with *out set when [s, e) is exactly one finite decimal number ([+-]digits[.digits]
 * [(e|E)[+-]digits], digits on at least one side of the point), the double nearest to it as
 * strtod rounds; else -1 and *out untouched (the text may still be a number: inf, nan, hex,
 * or beyond the largest double; the caller's general parser decides). */
int jf_cli_parse_decimal(const char *s, const char *e, double *out);

#ifdef __cplusplus
}
#endif

#endif
