/* solver/lsq_core.h — the small fits' least squares and covariance from a Givens QR built row by
 * row — against LAPACK on the same matrices:
 * - the solution of min ‖J s − b‖ equals dgelsd's on the column-scaled J (rcond ε·max(n, m)),
 *   for all columns (the triangle's back substitution) and for column subsets (the SVD), over
 *   sizes 1..16 and column scales spanning 10⁻⁶..10⁶, from the Givens triangle and from the
 *   CPU's Householder one (jf_linalg_triangle), and what the rotations leave over equals the
 *   residual ‖J s − b‖²;
 * - the covariance (JᵀJ)⁺ equals the pseudo-inverse built from dgesvd of the scaled J, from the
 *   Givens triangle and through covar.c (jf_covar_jacobian);
 * - rank deficiency: a column that is a multiple of another gives dgelsd's minimum-norm
 *   solution and marks both parameters unidentifiable; a zero column is unidentifiable and the
 *   rest of the covariance is that of the other columns;
 * - a triangle merged from two halves of the rows (as GPU lanes would merge) equals the triangle
 *   of all rows;
 * - the Householder fold of blocks of [J | b] (the CPU polish's pass), whole, in blocks and
 *   merged from two parts, equals the Givens triangle, also for columns whose squares underflow
 *   or overflow and for a zero column.
 */
#include <lapacke.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "solver/solver.h"
#include "solver/lsq_core.h"
#include "tests/testlib.h"

#define EPS 2.220446049250313e-16
#define MAXN 64
#define MAXP JF_LSQ_MAX

static unsigned long long rng_state = 12345;

static double uniform(void) { /* splitmix64 */
    unsigned long long z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* J (n×p row-major) with column k scaled by scale[k], and b. */
static void random_problem(size_t n, size_t p, const double *scale, double *J, double *b) {
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < p; k++) J[i * p + k] = uniform() * scale[k];
        b[i] = uniform();
    }
}

static void triangle(const double *J, const double *b, size_t n, size_t p, double *R, double *qb,
                     double *rest) {
    double row[MAXP];
    jf_lsq_clear(R, qb, rest, p);
    for (size_t i = 0; i < n; i++) {
        memcpy(row, J + i * p, p * sizeof *row);
        jf_lsq_add_row(R, qb, rest, p, row, b[i]);
    }
}

/* dgelsd on J[:, idx] with columns scaled to unit norm, unscaled: LAPACK's answer. */
static void lapack_lstsq(const double *J, const double *b, size_t n, size_t p, const int *idx,
                         size_t m, double *s) {
    double A[MAXN * MAXP], B[MAXN], c[MAXP], sv[MAXP];
    for (size_t a = 0; a < m; a++) {
        double q = 0;
        for (size_t i = 0; i < n; i++) q += J[i * p + idx[a]] * J[i * p + idx[a]];
        c[a] = sqrt(q);
        for (size_t i = 0; i < n; i++) A[a * n + i] = J[i * p + idx[a]] / c[a];
    }
    memcpy(B, b, n * sizeof *B);
    lapack_int rank;
    lapack_int info = LAPACKE_dgelsd(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)m, 1, A,
                                     (lapack_int)n, B, (lapack_int)n, sv,
                                     EPS * (double)(n > m ? n : m), &rank);
    CHECK(info == 0);
    for (size_t a = 0; a < m; a++) s[a] = B[a] / c[a];
}

/* (JᵀJ)⁺ from dgesvd of the scaled J (all columns nonzero). */
static void lapack_covariance(const double *J, size_t n, size_t p, double *cov) {
    double A[MAXN * MAXP], c[MAXP], sv[MAXP], VT[MAXP * MAXP], sup[MAXP];
    for (size_t a = 0; a < p; a++) {
        double q = 0;
        for (size_t i = 0; i < n; i++) q += J[i * p + a] * J[i * p + a];
        c[a] = sqrt(q);
        for (size_t i = 0; i < n; i++) A[a * n + i] = J[i * p + a] / c[a];
    }
    lapack_int info = LAPACKE_dgesvd(LAPACK_COL_MAJOR, 'N', 'A', (lapack_int)n, (lapack_int)p, A,
                                     (lapack_int)n, sv, NULL, 1, VT, (lapack_int)p, sup);
    CHECK(info == 0);
    double thr = EPS * (double)(n > p ? n : p) * sv[0];
    for (size_t a = 0; a < p; a++)
        for (size_t bb = 0; bb < p; bb++) {
            double t = 0;
            for (size_t j = 0; j < p; j++)
                if (sv[j] > thr) t += VT[j + a * p] * VT[j + bb * p] / (sv[j] * sv[j]);
            cov[a * p + bb] = t / (c[a] * c[bb]);
        }
}

/* max |x - y| / max|y|. */
static double rel_diff(const double *x, const double *y, size_t m) {
    double d = 0, big = 0;
    for (size_t a = 0; a < m; a++) {
        if (fabs(x[a] - y[a]) > d) d = fabs(x[a] - y[a]);
        if (fabs(y[a]) > big) big = fabs(y[a]);
    }
    return big > 0 ? d / big : d;
}

/* max over entries of |cov - ref| / sqrt(ref_aa ref_bb): the error relative to the scale of the
 * entry's variances, as a correlation-sized number. */
static double cov_diff(const double *cov, const double *ref, size_t p) {
    double d = 0;
    for (size_t a = 0; a < p; a++)
        for (size_t b = 0; b < p; b++) {
            double e = fabs(cov[a * p + b] - ref[a * p + b]) / sqrt(ref[a * p + a] * ref[b * p + b]);
            if (e > d) d = e;
        }
    return d;
}

static void test_random(void) {
    static const size_t sizes[][2] = {{1, 1}, {3, 2}, {25, 5}, {10, 10}, {40, 8}, {60, 12}, {64, 16}};
    double worst_s = 0, worst_sub = 0, worst_cov = 0, worst_rest = 0;
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++)
        for (int rep = 0; rep < 20; rep++) {
            size_t n = sizes[t][0], p = sizes[t][1];
            double scale[MAXP], J[MAXN * MAXP], b[MAXN], R[MAXP * MAXP], qb[MAXP], rest;
            for (size_t k = 0; k < p; k++) scale[k] = pow(10.0, 6.0 * uniform());
            random_problem(n, p, scale, J, b);
            triangle(J, b, n, p, R, qb, &rest);
            int idx[MAXP];
            double W[MAXP * MAXP], V[MAXP * MAXP], sv[MAXP], c[MAXP], s[MAXP], ref[MAXP];
            for (size_t k = 0; k < p; k++) idx[k] = (int)k;
            jf_lsq_solve(R, qb, p, n, idx, p, W, V, sv, c, s);
            lapack_lstsq(J, b, n, p, idx, p, ref);
            double d = rel_diff(s, ref, p);
            if (d > worst_s) worst_s = d;
            /* what the rotations leave over is the least-squares residual */
            double ssr = 0;
            for (size_t i = 0; i < n; i++) {
                double r = -b[i];
                for (size_t k = 0; k < p; k++) r += J[i * p + k] * s[k];
                ssr += r * r;
            }
            double bb = 0;
            for (size_t i = 0; i < n; i++) bb += b[i] * b[i];
            if (fabs(rest - ssr) / bb > worst_rest) worst_rest = fabs(rest - ssr) / bb;
            /* the CPU's triangle: LAPACK's Householder QR of [J | b] (jf_linalg_triangle) */
            double A[MAXN * (MAXP + 1)], R2[MAXP * MAXP], qb2[MAXP], s2[MAXP], mr[MAXN];
            for (size_t i = 0; i < n; i++) mr[i] = -b[i];
            CHECK(jf_linalg_triangle(J, mr, n, p, A, R2, qb2) == JF_OK);
            jf_lsq_solve(R2, qb2, p, n, idx, p, W, V, sv, c, s2);
            d = rel_diff(s2, ref, p);
            if (d > worst_s) worst_s = d;
            /* every other column: the SVD on R's columns */
            size_t m = 0;
            for (size_t k = 0; k < p; k += 2) idx[m++] = (int)k;
            jf_lsq_solve(R, qb, p, n, idx, m, W, V, sv, c, s);
            lapack_lstsq(J, b, n, p, idx, m, ref);
            d = rel_diff(s, ref, m);
            if (d > worst_sub) worst_sub = d;
            /* covariance */
            double cov[MAXP * MAXP], cref[MAXP * MAXP];
            int unident[MAXP];
            jf_lsq_covariance(R, p, n, idx, W, V, sv, c, cov, unident);
            lapack_covariance(J, n, p, cref);
            for (size_t k = 0; k < p; k++) CHECK(!unident[k]);
            d = cov_diff(cov, cref, p);
            if (d > worst_cov) worst_cov = d;
            CHECK(jf_covar_jacobian(J, n, p, cov, unident) == JF_OK);
            for (size_t k = 0; k < p; k++) CHECK(!unident[k]);
            d = cov_diff(cov, cref, p);
            if (d > worst_cov) worst_cov = d;
        }
    printf("random problems (n x p up to 64 x 16, column scales 1e-6..1e6): worst relative "
           "difference from LAPACK: solution %.2g (column subsets %.2g), covariance %.2g; "
           "leftover vs residual %.2g\n",
           worst_s, worst_sub, worst_cov, worst_rest);
    CHECK(worst_s < 1e-10);
    CHECK(worst_sub < 1e-10);
    CHECK(worst_cov < 1e-10);
    CHECK(worst_rest < 1e-12);
}

static void test_rank_deficient(void) {
    size_t n = 20, p = 4;
    double scale[4] = {1, 1e3, 1e-2, 1}, J[MAXN * MAXP], b[MAXN], R[MAXP * MAXP], qb[MAXP], rest;
    random_problem(n, p, scale, J, b);
    for (size_t i = 0; i < n; i++) J[i * p + 3] = -2.0 * J[i * p + 1]; /* column 3 ∝ column 1 */
    triangle(J, b, n, p, R, qb, &rest);
    int idx[MAXP] = {0, 1, 2, 3};
    double W[MAXP * MAXP], V[MAXP * MAXP], sv[MAXP], c[MAXP], s[MAXP], ref[MAXP];
    CHECK(!jf_lsq_tri_inverse((jf_lsq_scaled(R, p, idx, p, W, c), W), p, n, V));
    jf_lsq_solve(R, qb, p, n, idx, p, W, V, sv, c, s);
    lapack_lstsq(J, b, n, p, idx, p, ref);
    printf("rank-deficient (column 3 = -2 column 1): solution vs dgelsd's minimum norm %.2g\n",
           rel_diff(s, ref, p));
    CHECK(rel_diff(s, ref, p) < 1e-10);
    double cov[MAXP * MAXP];
    int unident[MAXP];
    jf_lsq_covariance(R, p, n, idx, W, V, sv, c, cov, unident);
    CHECK(!unident[0] && unident[1] && !unident[2] && unident[3]);

    /* a zero column: unidentifiable, the others as if it were absent */
    random_problem(n, p, scale, J, b);
    for (size_t i = 0; i < n; i++) J[i * p + 2] = 0.0;
    triangle(J, b, n, p, R, qb, &rest);
    jf_lsq_covariance(R, p, n, idx, W, V, sv, c, cov, unident);
    CHECK(!unident[0] && !unident[1] && unident[2] && !unident[3]);
    double J3[MAXN * 3], cref[9];
    for (size_t i = 0; i < n; i++) {
        J3[i * 3 + 0] = J[i * p + 0];
        J3[i * 3 + 1] = J[i * p + 1];
        J3[i * 3 + 2] = J[i * p + 3];
    }
    lapack_covariance(J3, n, 3, cref);
    static const int keep[3] = {0, 1, 3};
    double worst = 0;
    for (size_t a = 0; a < 3; a++)
        for (size_t bb = 0; bb < 3; bb++) {
            double e = fabs(cov[keep[a] * 4 + keep[bb]] - cref[a * 3 + bb]) /
                       sqrt(cref[a * 3 + a] * cref[bb * 3 + bb]);
            if (e > worst) worst = e;
        }
    CHECK(worst < 1e-10);
    CHECK(cov[2 * 4 + 2] == 0.0);
}

static void test_merge(void) {
    size_t n = 30, p = 6;
    double scale[MAXP], J[MAXN * MAXP], b[MAXN];
    for (size_t k = 0; k < p; k++) scale[k] = pow(10.0, (double)k - 3.0);
    random_problem(n, p, scale, J, b);
    double R[MAXP * MAXP], qb[MAXP], rest, R1[MAXP * MAXP], qb1[MAXP], rest1, R2[MAXP * MAXP],
        qb2[MAXP], rest2, row[MAXP];
    triangle(J, b, n, p, R, qb, &rest);
    triangle(J, b, 13, p, R1, qb1, &rest1);
    triangle(J + 13 * p, b + 13, n - 13, p, R2, qb2, &rest2);
    for (size_t k = 0; k < p; k++) { /* the rows of R2 into R1 */
        memcpy(row, R2 + k * p, p * sizeof *row);
        jf_lsq_add_row(R1, qb1, &rest1, p, row, qb2[k]);
    }
    rest1 += rest2;
    double d = 0;
    for (size_t k = 0; k < p; k++)
        for (size_t j = k; j < p; j++) {
            double e = fabs(R1[k * p + j] - R[k * p + j]) / jf_lsq_col_norm(R, p, j);
            if (e > d) d = e;
        }
    printf("triangle merged from two halves of the rows vs all rows: %.2g\n", d);
    CHECK(d < 1e-13);
    CHECK_NEAR(rest1, rest, 1e-12);
    for (size_t k = 0; k < p; k++) CHECK(R1[k * p + k] >= 0);
}

/* [J | b] folded into a (p+1)×(p+1) triangle by jf_lsq_fold, in blocks of `block` rows, then
 * (when split) the second half's triangle folded into the first's as the CPU polish merges
 * its chunks; out as the Givens routines' R (row-major p×p) and qb, with the signs of R's rows
 * made non-negative on the diagonal (a row and its qb entry change sign together). */
static void fold_triangle(const double *J, const double *b, size_t n, size_t p, size_t block,
                          size_t split, double *R, double *qb) {
    size_t c = p + 1;
    double T[2][(MAXP + 1) * (MAXP + 1)], B[MAXN * (MAXP + 1)];
    size_t parts[3] = {0, split ? split : n, n};
    for (int h = 0; h < (split ? 2 : 1); h++) {
        memset(T[h], 0, sizeof T[h]);
        for (size_t i0 = parts[h]; i0 < parts[h + 1]; i0 += block) {
            size_t m = parts[h + 1] - i0 < block ? parts[h + 1] - i0 : block;
            for (size_t i = 0; i < m; i++) {
                for (size_t a = 0; a < p; a++) B[a * m + i] = J[(i0 + i) * p + a];
                B[p * m + i] = b[i0 + i];
            }
            jf_lsq_fold(T[h], c, B, m);
        }
    }
    if (split) jf_lsq_fold(T[0], c, T[1], c);
    for (size_t i = 0; i < p; i++) {
        double sg = T[0][i * c + i] < 0 ? -1.0 : 1.0;
        for (size_t a = 0; a < p; a++) R[i * p + a] = a >= i ? sg * T[0][a * c + i] : 0.0;
        qb[i] = sg * T[0][p * c + i];
    }
}

/* The Householder fold (the CPU polish's pass) gives the Givens triangle: whole, in blocks,
 * merged from two parts, and with columns whose squares underflow or overflow. */
static void test_fold(void) {
    size_t n = 60, p = 5;
    double scale[MAXP], J[MAXN * MAXP], b[MAXN];
    double R[MAXP * MAXP], qb[MAXP], rest, F[MAXP * MAXP], fqb[MAXP];
    const double scales[][5] = {{1e-3, 1e-1, 1, 1e2, 1e4},
                                {1e-190, 1, 1, 1, 1},  /* squares underflow: a decay in the hundreds */
                                {1, 1e200, 1, 1, 1e-160}, /* squares overflow */
                                {0, 1, 2, 3, 4}};      /* a zero column */
    const size_t blocks[] = {60, 7, 1, 256};
    const size_t splits[] = {0, 0, 31, 13};
    double worst = 0;
    for (size_t sc = 0; sc < sizeof scales / sizeof scales[0]; sc++) {
        for (size_t k = 0; k < p; k++) scale[k] = scales[sc][k];
        random_problem(n, p, scale, J, b);
        triangle(J, b, n, p, R, qb, &rest);
        for (size_t v = 0; v < sizeof blocks / sizeof blocks[0]; v++) {
            fold_triangle(J, b, n, p, blocks[v], splits[v], F, fqb);
            for (size_t k = 0; k < p; k++) {
                double cn = jf_lsq_col_norm(R, p, k);
                for (size_t j = 0; j <= k; j++) {
                    double e = cn > 0 ? fabs(F[j * p + k] - R[j * p + k]) / cn
                                      : fabs(F[j * p + k]);
                    CHECK(isfinite(e));
                    if (e > worst) worst = e;
                }
            }
            double bn = 0;
            for (size_t k = 0; k < p; k++) bn += qb[k] * qb[k];
            for (size_t k = 0; k < p; k++) {
                double e = fabs(fqb[k] - qb[k]) / sqrt(bn);
                if (e > worst) worst = e;
            }
            if (sc == 3)
                for (size_t j = 0; j < p; j++) CHECK(F[j * p + 0] == 0.0);
        }
    }
    printf("Householder fold (blocks, merged parts, tiny and huge columns) vs Givens: %.2g\n",
           worst);
    CHECK(worst < 1e-13);
}

/* The data scans of long data (solver/threads.c: two doubles per operation, eight values per
 * step, the rest one by one) on 2^18 + 13 values, chunked over a pool of 3 threads: the first
 * non-finite value and the first bad sigma or weight found wherever they sit (each lane of a
 * step, a chunk's first and last values, the odd end), the weights exactly 1/sigma, and the
 * total sum of squares as the plain sums' to rounding (a long double reference), the same on
 * 1 thread, and exactly 0 for equal values. */
static void count_task(void *ctx, size_t task, int worker) {
    (void)worker;
    __atomic_add_fetch((size_t *)ctx, task + 1, __ATOMIC_RELAXED);
}

/* The pool a call released is the next call's when it asks for as many threads, not when it
 * asks for another number; a forked child does not get it (its threads stayed in the parent:
 * a run on it would wait for them for ever) and starts its own. */
static void test_pool_reuse(void) {
    jf_pool *a = jf_pool_acquire(3);
    if (!CHECK(a && jf_pool_size(a) == 3)) return;
    jf_pool_release(a);
    jf_pool *b = jf_pool_acquire(3);
    CHECK(b == a);
    jf_pool *c = jf_pool_acquire(2); /* the kept one (none now) is not taken */
    CHECK(c && c != b && jf_pool_size(c) == 2);
    jf_pool_release(c);
    jf_pool_release(b); /* b kept, c freed */
    pid_t pid = fork();
    if (pid == 0) {
        jf_pool *d = jf_pool_acquire(3);
        if (!d || d == b) _exit(1); /* (a run on b would hang) */
        size_t sum = 0;
        jf_pool_run(d, 100, count_task, &sum);
        _exit(sum == 5050 ? 0 : 1);
    }
    int status = 0;
    if (CHECK(pid > 0 && waitpid(pid, &status, 0) == pid))
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    jf_pool *e = jf_pool_acquire(3); /* the parent's is still there */
    CHECK(e == b);
    size_t sum = 0;
    jf_pool_run(e, 100, count_task, &sum);
    CHECK(sum == 5050);
    jf_pool_release(e);
}

static void test_scans(void) {
    const size_t n = ((size_t)1 << 18) + 13;
    double *v = malloc(n * sizeof *v), *w = malloc(n * sizeof *w);
    jf_pool *pool = jf_pool_create(3), *one = NULL; /* NULL: the caller alone */
    if (!CHECK(v && w && pool)) goto out;
    size_t chunk = (n + jf_problem_chunks(n) - 1) / jf_problem_chunks(n), at[64], nat = 0;
    for (size_t k = 0; k < 16; k++) at[nat++] = k; /* two steps' lanes */
    for (size_t k = 0; k < 9; k++) at[nat++] = n - 1 - k; /* the odd end, and its last step */
    for (size_t c = 1; c < 4 && c * chunk < n; c++) { /* around chunk boundaries (nominal) */
        at[nat++] = c * chunk - 1;
        at[nat++] = c * chunk;
        at[nat++] = c * chunk + 3;
    }
    at[nat++] = n / 2 + 5;
    const double bad[] = {NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < n; i++) v[i] = 1.0 + 1e-3 * (double)(i % 977);
    CHECK(jf_first_nonfinite(pool, v, n) == 0);
    int found = 1, first = 1;
    for (size_t a = 0; a < nat; a++)
        for (size_t b = 0; b < 3; b++) {
            double keep = v[at[a]];
            v[at[a]] = bad[b];
            found &= jf_first_nonfinite(pool, v, n) == at[a] + 1;
            v[at[a]] = keep;
        }
    v[7] = NAN; /* two bad ones: the first is reported */
    v[n - 2] = INFINITY;
    first &= jf_first_nonfinite(pool, v, n) == 8;
    v[7] = 1.0;
    v[n - 2] = 1.0;
    CHECK(found && first);

    /* the staged upload's copy that tests (jf_pool_copy_finite: 1 MiB slices, each copied and
     * then tested by the lanes above): every value copied, and a bad one seen wherever it sits,
     * into a destination 16-aligned or not */
    int copied = 1;
    found = 1;
    for (size_t shift = 0; shift < 2; shift++) {
        copied &= jf_pool_copy_finite(pool, w + shift, v, n - shift) == 1 &&
                  memcmp(w + shift, v, (n - shift) * sizeof *v) == 0;
        for (size_t a = 0; a < nat; a++)
            for (size_t b = 0; b < 3; b++) {
                if (at[a] >= n - shift) continue;
                double keep = v[at[a]];
                v[at[a]] = bad[b];
                found &= jf_pool_copy_finite(b ? one : pool, w + shift, v, n - shift) == 0;
                copied &= memcmp(w + shift, v, (n - shift) * sizeof *v) == 0;
                v[at[a]] = keep;
            }
    }
    for (size_t len = 0; len < 20; len++) /* short copies: only the odd end's loop */
        copied &= jf_pool_copy_finite(one, w + 1, v, len) == 1 && memcmp(w + 1, v, len * 8) == 0;
    CHECK(copied && found);

    /* sigma: bad ones (not positive, not finite) and tiny ones (weight overflows) */
    size_t bs = 1, bw = 1;
    jf_sigma_weights(pool, v, w, n, &bs, &bw);
    int exact = 1;
    for (size_t i = 0; i < n; i++) exact &= w[i] == 1.0 / v[i];
    CHECK(bs == 0 && bw == 0 && exact);
    const double bad_sigma[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, -1.0};
    found = 1;
    for (size_t a = 0; a < nat; a++) {
        double keep = v[at[a]];
        for (size_t b = 0; b < 6; b++) {
            v[at[a]] = bad_sigma[b];
            jf_sigma_weights(pool, v, w, n, &bs, &bw);
            /* 1/0 and 1/±inf: an infinite or zero weight; only a non-finite one counts */
            found &= bs == at[a] + 1 && (bw == (isfinite(w[at[a]]) ? 0 : at[a] + 1));
        }
        v[at[a]] = 1e-310; /* positive and finite, but 1/sigma overflows */
        jf_sigma_weights(pool, v, w, n, &bs, &bw);
        found &= bs == 0 && bw == at[a] + 1;
        v[at[a]] = keep;
    }
    CHECK(found);

    /* the total sum of squares */
    long double mean = 0, tss = 0;
    for (size_t i = 0; i < n; i++) mean += v[i];
    mean /= (long double)n;
    for (size_t i = 0; i < n; i++) tss += (v[i] - mean) * (v[i] - mean);
    double t3 = jf_total_ss(pool, v, n), t1 = jf_total_ss(one, v, n);
    double plain = jf_lsq_total_ss(v, n);
    if (!CHECK(fabs(t3 - (double)tss) <= 1e-14 * (double)tss && t3 == t1 &&
               fabs(plain - (double)tss) <= 1e-12 * (double)tss))
        fprintf(stderr, "  TSS %.17g (1 thread %.17g, plain %.17g), long double %.17Lg\n", t3, t1,
                plain, tss);
    for (size_t i = 0; i < n; i++) v[i] = 0.7;
    CHECK(jf_total_ss(pool, v, n) == 0.0);
    CHECK(jf_total_ss(pool, v, 1000) == 0.0); /* one loop below 2^18 */

    /* a weight array past glibc's mmap threshold: huge-page aligned, all of it usable; small
     * ones plain */
    size_t big = ((size_t)40 << 20) / sizeof(double) + 3;
    double *h = jf_alloc_large(big * sizeof *h), *small = jf_alloc_large(100 * sizeof *small);
    if (CHECK(h && small)) {
        CHECK((uintptr_t)h % ((size_t)2 << 20) == 0);
        jf_sigma_weights(pool, v, h, n, &bs, &bw); /* through the pool's threads */
        for (size_t i = n; i < big; i++) h[i] = (double)i;
        int kept = bs == 0 && bw == 0;
        for (size_t i = 0; i < big; i++) kept &= h[i] == (i < n ? 1.0 / 0.7 : (double)i);
        CHECK(kept);
        small[99] = 1.0;
    }
    free(h);
    free(small);
out:
    jf_pool_free(pool);
    free(v);
    free(w);
}

int main(void) {
    test_scans();
    test_pool_reuse();
    test_random();
    test_rank_deficient();
    test_merge();
    test_fold();
    return jf_test_finish();
}
