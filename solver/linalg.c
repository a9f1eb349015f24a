/* Dense linear algebra of the CPU solver, on LAPACKE over OpenBLAS.
 *
 * The trust-region step solves (JᵀJ + λD²) s = -g for p unknowns, p small. The matrix is
 * Jacobi-scaled to unit diagonal first (S M S with S = diag(1/√M_kk)): the columns of J differ
 * in scale by many orders of magnitude on problems like Thurber or Hahn1, and the scaled
 * matrix's condition number is the one that matters (van der Sluis: within a factor p of the
 * best diagonal scaling). Then:
 *   - Cholesky (dpotrf/dpotrs), kept when the reciprocal condition estimate (dpocon) is at
 *     least m·ε; the normal equations square J's condition number, so this accepts up to
 *     cond(J) ≈ 10⁸ after scaling;
 *   - otherwise, or when Cholesky finds the matrix indefinite (rounding can make JᵀJ of a
 *     rank-deficient J slightly indefinite), the symmetric eigen-decomposition (dsyevd) and the
 *     pseudo-inverse dropping eigenvalues below m·ε·max. That is the minimum-norm solution MINPACK
 *     obtains from its pivoted QR in the rank-deficient case, and it never fails.
 * Up to JF_LINALG_SMALL unknowns the same three steps run in lm_core.h's routines (the GPU
 * state machine's, exact inverse 1-norm instead of dpocon's estimate, Jacobi instead of dsyevd):
 * OpenBLAS serializes every level-2/3 call on a global buffer lock, and a small fit makes
 * hundreds of them, which kept CPU batches from scaling with threads (docs/PERFORMANCE.md).
 * A step computed this way is only as accurate as the normal equations allow; the gain ratio
 * protects the iteration, and the final Gauss-Newton polish (lm.c) works on the materialized J
 * with jf_linalg_lstsq, which does not square the condition number: LAPACK's dgelsy (QR with
 * column pivoting, the rank from R's incremental condition estimate, minimum-norm solution by
 * a complete orthogonal factorization; MINPACK's pivoted QR, made rank-revealing). It replaced
 * the SVD driver dgelsd, which gave the same solutions but took 40 % of a small fit's time
 * (docs/PERFORMANCE.md, "CPU batches").
 */
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lm_core.h"
#include "lsq_core.h"
#include "solver.h"

#define EPS 2.220446049250313e-16

/* The views lm_core.h's p×p routines use, over la's buffers. */
static jf_lmc_views small_views(jf_linalg *la) {
    jf_lmc_views v;
    memset(&v, 0, sizeof v);
    v.M = la->fac;
    v.scale = la->scale;
    v.work = la->work;
    v.V = la->work + 3 * la->cap;
    v.eig = la->eig;
    return v;
}

int jf_linalg_init(jf_linalg *la, size_t cap) {
    /* the solver's threads split the data; OpenBLAS's would only spin against them */
    jf_blas_single_threaded();
    memset(la, 0, sizeof *la);
    if (cap == 0) cap = 1;
    la->cap = cap;
    la->scale = malloc(cap * sizeof(double));
    la->fac = malloc(cap * cap * sizeof(double));
    la->eig = malloc(cap * sizeof(double));
    la->work = malloc((3 * cap + cap * cap) * sizeof(double));
    la->iwork = malloc(cap * sizeof(int));
    if (!la->scale || !la->fac || !la->eig || !la->work || !la->iwork) {
        jf_linalg_free(la);
        return JF_ERR_NOMEM;
    }
    return JF_OK;
}

void jf_linalg_free(jf_linalg *la) {
    free(la->scale);
    free(la->fac);
    free(la->eig);
    free(la->work);
    free(la->iwork);
    memset(la, 0, sizeof *la);
}

/* The pseudo-inverse through the eigen-decomposition of the scaled matrix already in la->fac. */
static int factor_eigen(jf_linalg *la, size_t m) {
    lapack_int n = (lapack_int)m;
    lapack_int info = LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'U', n, la->fac, n, la->eig);
    if (info != 0) return -1;
    double wmax = 0;
    for (size_t k = 0; k < m; k++)
        if (la->eig[k] > wmax) wmax = la->eig[k];
    double thr = (double)m * EPS * wmax;
    for (size_t k = 0; k < m; k++) la->eig[k] = la->eig[k] > thr ? 1.0 / la->eig[k] : 0.0;
    la->mode = 0;
    return 0;
}

int jf_linalg_factor(jf_linalg *la, const double *M, size_t m) {
    if (m == 0 || m > la->cap) return -1;
    la->m = m;
    la->small = m <= JF_LINALG_SMALL;
    if (la->small) {
        jf_lmc_views v = small_views(la);
        la->mode = jf_lmc_factor(&v, M, m);
        return la->mode;
    }
    for (size_t k = 0; k < m; k++) {
        double d = M[k * m + k];
        if (!isfinite(d)) return -1;
        la->scale[k] = d > 0 ? 1.0 / sqrt(d) : 1.0;
    }
    double anorm = 0;
    for (size_t j = 0; j < m; j++) {
        double colsum = 0;
        for (size_t i = 0; i < m; i++) {
            double v = M[j * m + i] * la->scale[i] * la->scale[j];
            if (!isfinite(v)) return -1;
            la->fac[j * m + i] = v;
            colsum += fabs(v);
        }
        if (colsum > anorm) anorm = colsum;
    }
    lapack_int n = (lapack_int)m;
    /* Keep a copy for the eigen fallback: dpotrf overwrites its input. */
    double *copy = la->work + 3 * la->cap;
    memcpy(copy, la->fac, m * m * sizeof(double));
    lapack_int info = LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'U', n, la->fac, n);
    if (info == 0) {
        double rcond = 0;
        info = LAPACKE_dpocon_work(LAPACK_COL_MAJOR, 'U', n, la->fac, n, anorm, &rcond, la->work,
                                   la->iwork);
        if (info == 0 && rcond >= (double)m * EPS) {
            la->mode = 1;
            return 1;
        }
    }
    memcpy(la->fac, copy, m * m * sizeof(double));
    return factor_eigen(la, m) == 0 ? 0 : -1;
}

void jf_linalg_solve(jf_linalg *la, const double *b, double *x) {
    size_t m = la->m;
    if (la->small) {
        jf_lmc_views v = small_views(la);
        jf_lmc_solve(&v, la->mode, m, b, x);
        return;
    }
    double *t = la->work; /* m values; dpocon's scratch is free again */
    for (size_t k = 0; k < m; k++) t[k] = b[k] * la->scale[k];
    if (la->mode == 1) {
        LAPACKE_dpotrs_work(LAPACK_COL_MAJOR, 'U', (lapack_int)m, 1, la->fac, (lapack_int)m, t,
                            (lapack_int)m);
    } else {
        /* t ← V diag(1/w) Vᵀ t */
        double *u = la->work + m;
        for (size_t j = 0; j < m; j++) {
            double s = 0;
            for (size_t i = 0; i < m; i++) s += la->fac[j * m + i] * t[i];
            u[j] = s * la->eig[j];
        }
        for (size_t i = 0; i < m; i++) {
            double s = 0;
            for (size_t j = 0; j < m; j++) s += la->fac[j * m + i] * u[j];
            t[i] = s;
        }
    }
    for (size_t k = 0; k < m; k++) x[k] = t[k] * la->scale[k];
}

double jf_linalg_quad(jf_linalg *la, const double *w) {
    size_t m = la->m;
    if (la->small) {
        jf_lmc_views v = small_views(la);
        return jf_lmc_quad(&v, la->mode, m, w);
    }
    double *t = la->work + 2 * la->cap; /* jf_linalg_solve uses work[0, 2m) */
    jf_linalg_solve(la, w, t);
    double q = 0;
    for (size_t k = 0; k < m; k++) q += w[k] * t[k];
    return q;
}

int jf_linalg_lstsq(double *A, size_t n, size_t m, double *b, double *x) {
    /* the solver's threads split the data; OpenBLAS's would only spin against them */
    jf_blas_single_threaded();
    double *c = malloc(m * sizeof *c);
    lapack_int *jpvt = calloc(m, sizeof *jpvt); /* 0: every column free to be pivoted */
    if (!c || !jpvt) {
        free(c);
        free(jpvt);
        return JF_ERR_NOMEM;
    }
    for (size_t j = 0; j < m; j++) {
        double big = 0, s = 0;
        const double *col = A + j * n;
        for (size_t i = 0; i < n; i++)
            if (fabs(col[i]) > big) big = fabs(col[i]);
        if (big > 0)
            for (size_t i = 0; i < n; i++) s += (col[i] / big) * (col[i] / big);
        c[j] = big > 0 ? big * sqrt(s) : 1.0;
        for (size_t i = 0; i < n; i++) A[j * n + i] /= c[j];
    }
    lapack_int rank = 0;
    double rcond = EPS * (double)(n > m ? n : m);
    lapack_int info = LAPACKE_dgelsy(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)m, 1, A,
                                     (lapack_int)n, b, (lapack_int)n, jpvt, rcond, &rank);
    if (info == 0)
        for (size_t j = 0; j < m; j++) x[j] = b[j] / c[j];
    free(c);
    free(jpvt);
    if (info == LAPACK_WORK_MEMORY_ERROR || info == LAPACK_TRANSPOSE_MEMORY_ERROR)
        return JF_ERR_NOMEM;
    return info == 0 ? JF_OK : JF_ERR_INTERNAL;
}

int jf_linalg_triangle(const double *J, const double *r, size_t n, size_t np, double *A,
                       double *R, double *qb) {
    jf_blas_single_threaded();
    if (np > JF_LSQ_MAX) return JF_ERR_INTERNAL;
    size_t cols = np + 1;
    for (size_t i = 0; i < n; i++) {
        for (size_t a = 0; a < np; a++) A[a * n + i] = J[i * np + a];
        A[np * n + i] = r ? -r[i] : 0.0;
    }
    /* The _work driver with the workspace LAPACKE_dgeqrf would query (cols × 32, ilaenv's
     * block size; at most 17 columns dgeqrf takes its unblocked path either way), on the
     * stack: LAPACKE_dgeqrf also scans all of A for NaN first, and J and r are already known
     * to be finite (lm.c checks each evaluation). The same factorization, without an n·cols
     * scan and a malloc per call. */
    double tau[JF_LSQ_MAX + 1], work[(JF_LSQ_MAX + 1) * 32];
    lapack_int info = LAPACKE_dgeqrf_work(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)cols, A,
                                          (lapack_int)n, tau, work, (lapack_int)(cols * 32));
    if (info == LAPACK_WORK_MEMORY_ERROR) return JF_ERR_NOMEM;
    if (info != 0) return JF_ERR_INTERNAL;
    for (size_t i = 0; i < np; i++) {
        for (size_t a = 0; a < np; a++) R[i * np + a] = i <= a && i < n ? A[a * n + i] : 0.0;
        qb[i] = i < n ? A[np * n + i] : 0.0;
    }
    return JF_OK;
}
