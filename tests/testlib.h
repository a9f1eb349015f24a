/* A tiny test harness shared by all tests: checks that count and report, plus helpers to run
 * the jitfit command and capture its output. A test's main returns jf_test_finish(), which
 * prints "N passed, N failed" and gives the exit status; 77 means skipped (CTest SKIP). */
#ifndef JF_TESTLIB_H
#define JF_TESTLIB_H

#include <stddef.h>
#include <stdio.h>

extern int jf_test_passed, jf_test_failed;

/* Records one check; prints the failing expression with file:line. Returns cond. */
int jf_test_check(int cond, const char *expr, const char *file, int line);
/* Checks |a-b| <= tol*max(1,|b|) or both NaN / equal infinities. */
int jf_test_near(double a, double b, double tol, const char *ea, const char *eb,
                 const char *file, int line);
/* Checks that two strings are equal (NULLs are equal only to NULL); prints both when not. */
int jf_test_streq(const char *a, const char *b, const char *ea, const char *eb, const char *file,
                  int line);
/* Checks that haystack contains needle. */
int jf_test_contains(const char *haystack, const char *needle, const char *eh, const char *file,
                     int line);

#define CHECK(c) jf_test_check(!!(c), #c, __FILE__, __LINE__)
#define CHECK_NEAR(a, b, tol) jf_test_near((a), (b), (tol), #a, #b, __FILE__, __LINE__)
#define CHECK_STREQ(a, b) jf_test_streq((a), (b), #a, #b, __FILE__, __LINE__)
#define CHECK_CONTAINS(h, n) jf_test_contains((h), (n), #h, __FILE__, __LINE__)

/* Prints the summary line and returns the exit status (0 all passed, 1 any failed). */
int jf_test_finish(void);
/* Prints a skip message and returns 77. */
int jf_test_skip(const char *why);

/* Runs `sh -c cmd`, stores stdout and stderr (malloc'd, NUL-terminated) and returns the exit
 * status (or -1 if it could not run / was killed by a signal: then *out has what was read).
 * out or err may be NULL. */
int jf_test_run(const char *cmd, char **out, char **err);
/* The path of the built jitfit command. */
const char *jf_test_cli(void);
/* Writes text to a fresh temporary file and returns its path (malloc'd); NULL on failure. */
char *jf_test_tmpfile(const char *suffix, const char *text);
/* Writes an executable script text as dir/name (its path into path, of n bytes) and makes it
 * $JITFIT_CC, a compiler command the process has not probed yet; 0, or -1 after a failed
 * check. */
int jf_test_use_cc_script(const char *dir, const char *name, const char *text, char *path,
                          size_t n);
/* Reads a whole file (malloc'd, NUL-terminated) or NULL. */
char *jf_test_read_file(const char *path, size_t *len);
/* The ../shared directory beside the source tree if it exists (for NIST data), else NULL. */
const char *jf_test_shared_dir(void);
/* Calls fn(name, bytes, len, ctx) for each file of dir (a fuzz corpus: bytes of any kind, NULs
 * included), in name order; returns the number of files (a missing or unreadable one fails a
 * check). */
size_t jf_test_replay_dir(const char *dir,
                          void (*fn)(const char *name, const char *bytes, size_t len, void *ctx),
                          void *ctx);

/* Data of a nearly-L1 robust fit (tests of the solver, CPU and GPU): n points of 3 exp(-0.4x)
 * sin(1.3x + 0.5) + 0.2 + U(-0.3, 0.3) on x in [0, 10], every 11th point + U(-4, 4), the
 * uniforms from a 64-bit LCG started at seed (the same in any libm). scipy's answers for seed
 * 22, n 300 are in test_solver.c's test_huber_nearly_l1. */
void jf_test_outlier_sine(unsigned long long seed, size_t n, double *x, double *y);

#endif
