/* Covariance of the fitted parameters: s² (JᵀJ)⁺ at the solution.
 *
 * With the Jacobian materialized (linear loss and n·p up to JF_LM_MATERIALIZE_MAX) the inverse
 * comes from an SVD of J with its columns scaled to unit norm, as scipy's curve_fit does for
 * 'trf' (it uses the unscaled J; scaling first keeps the small singular values of badly scaled
 * problems such as Thurber accurate): singular values below ε·max(n, p)·σ_max are dropped.
 * Up to JF_LSQ_MAX parameters the same comes from J's QR triangle R (dgeqrf) through
 * lsq_core.h: W⁻¹W⁻ᵀ of the scaled R when it is well conditioned, else its one-sided Jacobi
 * SVD (the same singular values and right vectors as J's); dgesvd took a sixth of a small
 * fit's time (docs/PERFORMANCE.md). Above it, LAPACK's dgesvd of J.
 * Otherwise it comes from the kernel's JᵀJ (loss-scaled for robust losses, which is scipy's
 * choice: its curve_fit uses the Jacobian least_squares returns) through an eigen-decomposition
 * of the Jacobi-scaled matrix, dropping eigenvalues below p·ε·max — the normal equations cannot
 * resolve more.
 *
 * Unidentifiable parameters: a zero Jacobian column, or a significant component in a dropped
 * direction, means the data do not determine the parameter; its variance is infinite (its row
 * and column of the covariance are +inf and its correlations NaN), where the pseudo-inverse
 * alone would report a meaningless finite number.
 */
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lsq_core.h"
#include "solver.h"

#define EPS 2.220446049250313e-16

void jf_covar_triangle(const double *R, size_t n, size_t np, double *cov, int *unident) {
    double W[JF_LSQ_MAX * JF_LSQ_MAX], V[JF_LSQ_MAX * JF_LSQ_MAX], sv[JF_LSQ_MAX], c[JF_LSQ_MAX];
    int idx[JF_LSQ_MAX];
    jf_lsq_covariance(R, np, n, idx, W, V, sv, c, cov, unident);
}

/* np <= JF_LSQ_MAX: J's QR triangle (jf_linalg_triangle), then jf_covar_triangle. */
static int covar_small(const double *J, size_t n, size_t np, double *cov, int *unident) {
    double R[JF_LSQ_MAX * JF_LSQ_MAX], qb[JF_LSQ_MAX];
    double *A = malloc(n * (np + 1) * sizeof *A);
    if (!A) return JF_ERR_NOMEM;
    int code = jf_linalg_triangle(J, NULL, n, np, A, R, qb);
    free(A);
    if (code == JF_OK) jf_covar_triangle(R, n, np, cov, unident);
    return code;
}

int jf_covar_jacobian(const double *J, size_t n, size_t np, double *cov, int *unident) {
    if (np <= JF_LSQ_MAX) return covar_small(J, n, np, cov, unident);
    memset(cov, 0, np * np * sizeof *cov);
    int *idx = malloc(np * sizeof *idx);
    double *c = malloc(np * sizeof *c);
    if (!idx || !c) {
        free(idx);
        free(c);
        return JF_ERR_NOMEM;
    }
    size_t m = 0;
    for (size_t k = 0; k < np; k++) {
        double big = 0, s = 0;
        for (size_t i = 0; i < n; i++)
            if (fabs(J[i * np + k]) > big) big = fabs(J[i * np + k]);
        if (big > 0)
            for (size_t i = 0; i < n; i++) s += (J[i * np + k] / big) * (J[i * np + k] / big);
        unident[k] = !(big > 0);
        if (big > 0) {
            idx[m] = (int)k;
            c[m++] = big * sqrt(s);
        }
    }
    int st = JF_OK;
    if (m > 0) {
        double *W = malloc(n * m * sizeof *W);
        double *VT = malloc(m * m * sizeof *VT);
        double *sv = malloc(m * sizeof *sv);
        double *sup = malloc(m * sizeof *sup);
        if (!W || !VT || !sv || !sup) st = JF_ERR_NOMEM;
        if (st == JF_OK) {
            for (size_t a = 0; a < m; a++)
                for (size_t i = 0; i < n; i++) W[a * n + i] = J[i * np + idx[a]] / c[a];
            lapack_int info = LAPACKE_dgesvd(LAPACK_COL_MAJOR, 'N', 'A', (lapack_int)n,
                                             (lapack_int)m, W, (lapack_int)n, sv, NULL, 1, VT,
                                             (lapack_int)m, sup);
            if (info == LAPACK_WORK_MEMORY_ERROR) st = JF_ERR_NOMEM;
            else if (info != 0) st = JF_ERR_INTERNAL;
        }
        if (st == JF_OK) {
            /* VT holds Vᵀ: row j is singular vector j, i.e. V[j*m + a] in assemble's layout
             * is VT[a*m + j]; transpose into W's space to reuse assemble. */
            double thr = EPS * (double)(n > m ? n : m) * sv[0];
            for (size_t j = 0; j < m; j++) sup[j] = sv[j] > thr ? 1.0 / (sv[j] * sv[j]) : 0.0;
            for (size_t j = 0; j < m; j++)
                for (size_t a = 0; a < m; a++) W[j * m + a] = VT[a * m + j];
            jf_lsq_assemble(W, sup, m, idx, c, np, cov, unident);
        }
        free(W);
        free(VT);
        free(sv);
        free(sup);
    }
    free(idx);
    free(c);
    return st;
}

int jf_covar_normal(const double *A, size_t np, double *cov, int *unident) {
    memset(cov, 0, np * np * sizeof *cov);
    int *idx = malloc(np * sizeof *idx);
    double *c = malloc(np * sizeof *c);
    double *V = malloc(np * np * sizeof *V);
    double *w = malloc(np * sizeof *w);
    int st = (idx && c && V && w) ? JF_OK : JF_ERR_NOMEM;
    size_t m = 0;
    if (st == JF_OK) {
        m = jf_lsq_normal_scaled(A, np, idx, c, V, unident);
        if (m > 0) {
            lapack_int info = LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'U', (lapack_int)m, V,
                                             (lapack_int)m, w);
            if (info == LAPACK_WORK_MEMORY_ERROR) st = JF_ERR_NOMEM;
            else if (info != 0) st = JF_ERR_INTERNAL;
        }
    }
    /* column-major V: eigenvector j is V[j*m + 0..m), as jf_lsq_normal_assemble reads it */
    if (st == JF_OK && m > 0) jf_lsq_normal_assemble(V, w, m, idx, c, np, cov, unident);
    free(idx);
    free(c);
    free(V);
    free(w);
    return st;
}

void jf_covar_finish(double *cov, const int *unident, size_t np, double s2, double *std_errors,
                     double *correlation) {
    for (size_t k = 0; k < np; k++) {
        for (size_t l = 0; l < np; l++) {
            double v = cov[k * np + l];
            if (unident[k] || unident[l]) {
                correlation[k * np + l] = k == l ? 1.0 : NAN;
                cov[k * np + l] = INFINITY;
                continue;
            }
            /* The correlation does not depend on s², so it stays defined for an exact fit.
             * A root of each variance, not of their product: with data on scales of 1e±150
             * the variances are ~1e±300 and the product would overflow (correlation 0) or
             * underflow (NaN). */
            double d = sqrt(cov[k * np + k]) * sqrt(cov[l * np + l]);
            correlation[k * np + l] = k == l ? 1.0 : (d > 0 ? v / d : NAN);
        }
    }
    for (size_t k = 0; k < np; k++)
        for (size_t l = 0; l < np; l++)
            if (!unident[k] && !unident[l]) cov[k * np + l] *= s2;
    for (size_t k = 0; k < np; k++) std_errors[k] = unident[k] ? INFINITY : sqrt(cov[k * np + k]);
}
