/* The finish of a small fit — the polish's least-squares steps and the covariance — from a QR
 * factorization built row by row, written once for the GPU and the host.
 *
 * The polish (lm.c) and the covariance (covar.c) need J itself, not JᵀJ: the normal equations
 * square J's condition number. For few parameters both come from the p×p triangle R of J = QR:
 * R and Qᵀb are built by Givens rotations one row of J at a time (jf_lsq_add_row), so J need
 * not be stored — a GPU lane can fold its points into its own R, and lanes merge triangles the
 * same way (the rows of one R are rows for another) — and J[:, S] = Q R[:, S] for any column
 * subset S, so the least-squares problem on the free columns is the p-row problem on R's.
 * The columns are scaled to unit norm (W). When all columns take part and W is well
 * conditioned (a cheap sufficient test on its triangular inverse), back substitution and
 * W⁻¹W⁻ᵀ answer; otherwise a one-sided Jacobi SVD (Hestenes) of W gives J's singular values and
 * right vectors to high relative accuracy, and singular values below ε·max(n, m)·σ_max are
 * dropped, the rule the LAPACK paths for larger p use (dgelsy's rcond in the polish, covar.c's
 * threshold for dgesvd).
 *
 * Same rules as step.h: valid C11 and CUDA C, no includes under NVRTC, no allocation, no
 * recursion; everything sits in caller-provided memory. Matrices are small (p ≤ JF_LSQ_MAX).
 */
#ifndef JF_LSQ_CORE_H
#define JF_LSQ_CORE_H

#ifndef __CUDACC_RTC__
#include "step.h"
#endif

#ifndef JF_RESTRICT
#ifdef __cplusplus
#define JF_RESTRICT __restrict__
#else
#define JF_RESTRICT restrict
#endif
#endif

/* Largest p these routines serve (callers size stack arrays with it). */
#define JF_LSQ_MAX 16
/* Sweeps of the one-sided Jacobi iteration before giving up (it converges quadratically; about
 * five suffice at these sizes). */
#define JF_LSQ_SWEEPS 60
/* A parameter whose squared weight in the dropped directions exceeds this (about √ε) is
 * unidentifiable; below it the weight is rounding noise of the decomposition. */
#define JF_LSQ_NULL_WEIGHT 1.4901161193847656e-08

/* Empties the p×p upper triangle R (row-major), Qᵀb (qb, p) and *rest (‖b‖² outside J's range). */
JF_HD void jf_lsq_clear(double *R, double *qb, double *rest, unsigned long long p) {
    for (unsigned long long k = 0; k < p * p; k++) R[k] = 0.0;
    for (unsigned long long k = 0; k < p; k++) qb[k] = 0.0;
    *rest = 0.0;
}

/* Folds the row (row[0..p), right-hand side b) into R and qb by Givens rotations, one per
 * nonzero entry; the part of b the rotations leave over adds its square to *rest. row is
 * overwritten. R's diagonal stays non-negative. */
JF_HD void jf_lsq_add_row(double *R, double *qb, double *rest, unsigned long long p, double *row,
                          double b) {
    for (unsigned long long k = 0; k < p; k++) {
        double h = row[k];
        if (h == 0.0) continue;
        double d = R[k * p + k];
        /* the rotation from the ratio of the smaller entry to the larger (at most 1: no overflow
         * or harmful underflow where d² + h² would), with two divisions and a square root
         * instead of four divisions (a GPU batch's fit folds every row of its polish passes so,
         * and fp64 division is a dozen instructions there): r = |big|·q, q = √(1 + ratio²), and
         * the larger entry's cosine or sine is ±1/q, the other ratio times it */
        int dbig = fabs(d) >= fabs(h);
        double big = dbig ? d : h, ratio = (dbig ? h : d) / big;
        double q = sqrt(1.0 + ratio * ratio), u = copysign(1.0 / q, big);
        double c = dbig ? u : ratio * u, s = dbig ? ratio * u : u;
        double r = fabs(big) * q;
        R[k * p + k] = r;
        for (unsigned long long j = k + 1; j < p; j++) {
            double t = R[k * p + j];
            R[k * p + j] = c * t + s * row[j];
            row[j] = c * row[j] - s * t;
        }
        double t = qb[k];
        qb[k] = c * t + s * b;
        b = c * b - s * t;
    }
    *rest += b * b;
}

/* Σ a_i b_i over n entries in four interleaved partial sums added in a fixed order: the same
 * result every run, and not one chain of n dependent additions (which made the fold a quarter
 * of a small fit's time, by perf). */
JF_HD double jf_lsq_dot(const double *a, const double *b, unsigned long long n) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    unsigned long long i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++) s0 += a[i] * b[i];
    return (s0 + s2) + (s1 + s3);
}

/* y -= w x over n entries (x and y do not overlap: columns of one block). Written four at a
 * time, as jf_lsq_dot, so that GCC's -O2 vectorizes it (its cheap cost model leaves a loop with
 * an unknown trip count scalar, but packs straight-line statements); each entry is computed
 * exactly as the plain loop would. */
JF_HD void jf_lsq_axpy(double *JF_RESTRICT y, const double *JF_RESTRICT x, double w,
                       unsigned long long n) {
    unsigned long long i = 0;
    for (; i + 4 <= n; i += 4) {
        y[i] -= w * x[i];
        y[i + 1] -= w * x[i + 1];
        y[i + 2] -= w * x[i + 2];
        y[i + 3] -= w * x[i + 3];
    }
    for (; i < n; i++) y[i] -= w * x[i];
}

/* x *= v over n entries, four at a time as jf_lsq_axpy. */
JF_HD void jf_lsq_scale(double *x, double v, unsigned long long n) {
    unsigned long long i = 0;
    for (; i + 4 <= n; i += 4) {
        x[i] *= v;
        x[i + 1] *= v;
        x[i + 2] *= v;
        x[i + 3] *= v;
    }
    for (; i < n; i++) x[i] *= v;
}

/* Folds the m×c block B (column-major, B[j*m + i]; finite) into the c×c upper triangle T
 * (column-major, T[j*c + i]) by one Householder reflection per column, as LAPACK's dtpqrt2
 * reduces [T; B]: afterwards TᵀT has gained BᵀB. B is overwritten. The CPU polish folds blocks
 * of [J | −r] this way (c = p + 1), so J is never stored; written out rather than called from
 * LAPACK because dtpqrt2 makes two level-2 BLAS calls per column, and OpenBLAS serializes those
 * across threads (linalg.c), which a batch of small fits on many cores would wait on. Squares
 * are summed directly, and again scaled by the column's largest entry only where they could
 * overflow or underflow (a decay constant in the hundreds gives entries ~1e-190). T's diagonal
 * may come out negative, as LAPACK's does; the routines below take either sign. */
JF_HD void jf_lsq_fold(double *T, unsigned long long c, double *B, unsigned long long m) {
    for (unsigned long long k = 0; k < c; k++) {
        double *x = B + k * m;
        double s = jf_lsq_dot(x, x, m);
        double xnorm;
        if (s > 1e-280 && s < 1e280) {
            xnorm = sqrt(s);
        } else {
            double big = 0.0;
            for (unsigned long long i = 0; i < m; i++)
                if (fabs(x[i]) > big) big = fabs(x[i]);
            if (!(big > 0.0)) continue; /* a zero column: the reflection is the identity */
            double t2 = 0.0;
            for (unsigned long long i = 0; i < m; i++) t2 += (x[i] / big) * (x[i] / big);
            xnorm = big * sqrt(t2);
        }
        double alpha = T[k * c + k];
        double beta = -copysign(hypot(alpha, xnorm), alpha);
        double tau = (beta - alpha) / beta;
        double d = alpha - beta; /* |d| >= xnorm: alpha and -beta have one sign */
        if (fabs(d) > 1e-290) {
            jf_lsq_scale(x, 1.0 / d, m);
        } else {
            for (unsigned long long i = 0; i < m; i++) x[i] /= d;
        }
        T[k * c + k] = beta;
        for (unsigned long long j = k + 1; j < c; j++) {
            double *y = B + j * m;
            double w = (T[j * c + k] + jf_lsq_dot(x, y, m)) * tau;
            T[j * c + k] -= w;
            jf_lsq_axpy(y, x, w, m);
        }
    }
}

/* One-sided Jacobi SVD of W (rows×m, column-major W[j*rows + i]): rotates pairs of columns
 * until all are orthogonal, so W ends as U·Σ (sv[j] = ‖W_j‖) and V (m×m, V[j*m + a] is entry a
 * of right singular vector j) holds the rotations: W_in = U Σ Vᵀ. Not sorted. */
JF_HD void jf_lsq_svd(double *W, unsigned long long rows, unsigned long long m, double *V,
                      double *sv) {
    for (unsigned long long j = 0; j < m; j++)
        for (unsigned long long a = 0; a < m; a++) V[j * m + a] = j == a ? 1.0 : 0.0;
    for (int sweep = 0; sweep < JF_LSQ_SWEEPS; sweep++) {
        int rotated = 0;
        for (unsigned long long a = 0; a < m; a++)
            for (unsigned long long b = a + 1; b < m; b++) {
                double *wa = W + a * rows, *wb = W + b * rows;
                double al = 0.0, be = 0.0, ga = 0.0;
                for (unsigned long long i = 0; i < rows; i++) {
                    al += wa[i] * wa[i];
                    be += wb[i] * wb[i];
                    ga += wa[i] * wb[i];
                }
                if (ga == 0.0 || !(fabs(ga) > JF_STEP_EPS * sqrt(al) * sqrt(be))) continue;
                double zeta = (be - al) / (2.0 * ga);
                double t = fabs(zeta) > 1e150 ? 0.5 / zeta
                                              : (zeta >= 0 ? 1.0 : -1.0) /
                                                    (fabs(zeta) + sqrt(1.0 + zeta * zeta));
                double c = 1.0 / sqrt(1.0 + t * t), s = c * t;
                for (unsigned long long i = 0; i < rows; i++) {
                    double x = wa[i], y = wb[i];
                    wa[i] = c * x - s * y;
                    wb[i] = s * x + c * y;
                }
                double *va = V + a * m, *vb = V + b * m;
                for (unsigned long long i = 0; i < m; i++) {
                    double x = va[i], y = vb[i];
                    va[i] = c * x - s * y;
                    vb[i] = s * x + c * y;
                }
                rotated = 1;
            }
        if (!rotated) break;
    }
    for (unsigned long long j = 0; j < m; j++) {
        double s = 0.0;
        for (unsigned long long i = 0; i < rows; i++) s += W[j * rows + i] * W[j * rows + i];
        sv[j] = sqrt(s);
    }
}

/* ‖column k of the p×p R‖ (rows 0..k), without overflow: J's column norm. */
JF_HD double jf_lsq_col_norm(const double *R, unsigned long long p, unsigned long long k) {
    double big = 0.0, s = 0.0;
    for (unsigned long long i = 0; i <= k; i++)
        if (fabs(R[i * p + k]) > big) big = fabs(R[i * p + k]);
    if (!(big > 0.0)) return big;
    for (unsigned long long i = 0; i <= k; i++) s += (R[i * p + k] / big) * (R[i * p + k] / big);
    return big * sqrt(s);
}

/* W (p×m, column-major) = R[:, idx] with each column divided by its norm c[a] (nonzero for
 * every idx). With idx = 0..p-1 in order, W is upper triangular. */
JF_HD void jf_lsq_scaled(const double *R, unsigned long long p, const int *idx,
                         unsigned long long m, double *W, double *c) {
    for (unsigned long long a = 0; a < m; a++) {
        unsigned long long k = (unsigned long long)idx[a];
        c[a] = jf_lsq_col_norm(R, p, k);
        for (unsigned long long i = 0; i < p; i++) W[a * p + i] = i <= k ? R[i * p + k] / c[a] : 0.0;
    }
}

/* 1 when idx is 0..p-1 in order (m = p): W is then the scaled triangle itself. */
JF_HD int jf_lsq_all_columns(const int *idx, unsigned long long m, unsigned long long p) {
    if (m != p) return 0;
    for (unsigned long long a = 0; a < m; a++)
        if (idx[a] != (int)a) return 0;
    return 1;
}

/* The inverse of the m×m upper triangular W (column-major) into Ti (same layout), and 1 when
 * the SVD could drop nothing: σ_max/σ_min ≤ ‖W‖_F‖W⁻¹‖_F, so ε·max(n, m)·‖W‖_F‖W⁻¹‖_F < 1
 * keeps every singular value above the threshold and the triangle answers exactly what the SVD
 * would, for m³/6 flops. 0: the SVD must decide. */
JF_HD int jf_lsq_tri_inverse(const double *W, unsigned long long m, unsigned long long n,
                             double *Ti) {
    double wf = 0.0, tf = 0.0;
    for (unsigned long long j = 0; j < m; j++) {
        for (unsigned long long i = 0; i <= j; i++) wf += W[j * m + i] * W[j * m + i];
        for (unsigned long long i = j + 1; i < m; i++) Ti[j * m + i] = 0.0;
        for (unsigned long long ii = j + 1; ii-- > 0;) { /* W t = e_j, rows j down to 0 */
            double t = ii == j ? 1.0 : 0.0;
            for (unsigned long long k = ii + 1; k <= j; k++) t -= W[k * m + ii] * Ti[j * m + k];
            t /= W[ii * m + ii];
            Ti[j * m + ii] = t;
            tf += t * t;
        }
    }
    return JF_STEP_EPS * (double)(n > m ? n : m) * sqrt(wf) * sqrt(tf) < 1.0;
}

/* The SVD (jf_lsq_svd) of the p×m W from jf_lsq_scaled; returns the threshold below which
 * singular values are dropped, ε·max(n, m)·σ_max for n rows of J. */
JF_HD double jf_lsq_scaled_svd(double *W, unsigned long long p, unsigned long long n,
                               unsigned long long m, double *V, double *sv) {
    jf_lsq_svd(W, p, m, V, sv);
    double smax = 0.0;
    for (unsigned long long j = 0; j < m; j++)
        if (sv[j] > smax) smax = sv[j];
    return JF_STEP_EPS * (double)(n > m ? n : m) * smax;
}

/* The minimum-norm solution s (m entries, for the columns idx) of min ‖J[:, idx] s − b‖, from
 * R and qb of J and b (n rows): back substitution on the scaled triangle when all columns take
 * part and it is well conditioned (jf_lsq_tri_inverse), else Σ_j V_j (U_jᵀ Qᵀb) / σ_j over the
 * kept singular values; then unscaled. W and V (p·p), sv and c (p) are work. */
JF_HD void jf_lsq_solve(const double *R, const double *qb, unsigned long long p,
                        unsigned long long n, const int *idx, unsigned long long m, double *W,
                        double *V, double *sv, double *c, double *s) {
    jf_lsq_scaled(R, p, idx, m, W, c);
    if (jf_lsq_all_columns(idx, m, p) && jf_lsq_tri_inverse(W, m, n, V)) {
        for (unsigned long long ii = m; ii-- > 0;) {
            double t = qb[ii];
            for (unsigned long long k = ii + 1; k < m; k++) t -= W[k * m + ii] * s[k];
            s[ii] = t / W[ii * m + ii];
        }
    } else {
        double thr = jf_lsq_scaled_svd(W, p, n, m, V, sv);
        for (unsigned long long a = 0; a < m; a++) s[a] = 0.0;
        for (unsigned long long j = 0; j < m; j++) {
            if (!(sv[j] > thr)) continue;
            double u = 0.0;
            for (unsigned long long i = 0; i < p; i++) u += W[j * p + i] * qb[i];
            u /= sv[j] * sv[j]; /* W_j = σ_j U_j */
            for (unsigned long long a = 0; a < m; a++) s[a] += V[j * m + a] * u;
        }
    }
    for (unsigned long long a = 0; a < m; a++) s[a] /= c[a];
}

/* Adds Σ_j v_j v_jᵀ · inv[j] (v_j = V[j*m + 0..m)) into cov (np×np) at the rows and columns
 * idx, unscaling by 1/(c_a c_b); marks unident[idx[a]] when parameter a has a significant
 * component in a dropped direction (inv[j] = 0). covar.c's LAPACK paths share it. */
JF_HD void jf_lsq_assemble(const double *V, const double *inv, unsigned long long m,
                           const int *idx, const double *c, unsigned long long np, double *cov,
                           int *unident) {
    for (unsigned long long a = 0; a < m; a++) {
        double dropped = 0.0;
        for (unsigned long long j = 0; j < m; j++)
            if (inv[j] == 0.0) dropped += V[j * m + a] * V[j * m + a];
        if (dropped > JF_LSQ_NULL_WEIGHT) unident[idx[a]] = 1;
        for (unsigned long long b = 0; b < m; b++) {
            double s = 0.0;
            for (unsigned long long j = 0; j < m; j++) s += V[j * m + a] * V[j * m + b] * inv[j];
            cov[(unsigned long long)idx[a] * np + (unsigned long long)idx[b]] = s / (c[a] * c[b]);
        }
    }
}

/* (JᵀJ)⁺ (np×np, before the factor s²) from J's triangle R and its n rows, as covar.c builds it
 * from J: zero columns are unidentifiable, the rest scaled to unit norm, singular values below
 * ε·max(n, m)·σ_max dropped; a well-conditioned triangle gives W⁻¹W⁻ᵀ directly. idx (np ints),
 * W and V (np·np), sv and c (np) are work. */
JF_HD void jf_lsq_covariance(const double *R, unsigned long long np, unsigned long long n,
                             int *idx, double *W, double *V, double *sv, double *c, double *cov,
                             int *unident) {
    for (unsigned long long k = 0; k < np * np; k++) cov[k] = 0.0;
    unsigned long long m = 0;
    for (unsigned long long k = 0; k < np; k++) {
        unident[k] = !(jf_lsq_col_norm(R, np, k) > 0.0);
        if (!unident[k]) idx[m++] = (int)k;
    }
    if (m == 0) return;
    jf_lsq_scaled(R, np, idx, m, W, c);
    if (m == np && jf_lsq_tri_inverse(W, m, n, V)) {
        /* (WᵀW)⁻¹ = W⁻¹W⁻ᵀ; row a of W⁻¹ is V[k*m + a] for k ≥ a */
        for (unsigned long long a = 0; a < m; a++)
            for (unsigned long long b = 0; b < m; b++) {
                double t = 0.0;
                for (unsigned long long k = a > b ? a : b; k < m; k++) t += V[k * m + a] * V[k * m + b];
                cov[a * np + b] = t / (c[a] * c[b]);
            }
        return;
    }
    double thr = jf_lsq_scaled_svd(W, np, n, m, V, sv);
    for (unsigned long long j = 0; j < m; j++) sv[j] = sv[j] > thr ? 1.0 / (sv[j] * sv[j]) : 0.0;
    jf_lsq_assemble(V, sv, m, idx, c, np, cov, unident);
}

/* The covariance from the normal equations (JᵀJ = A, np×np row-major, when J itself is not kept:
 * robust losses, fits too long to polish), in two halves around a symmetric eigendecomposition
 * that the caller brings (covar.c: LAPACK's dsyevd; the GPU batch: lm_core.h's Jacobi). First A
 * scaled to unit diagonal: zero diagonals are unidentifiable (unident), the others' indices go
 * to idx and their scales √A_kk to c, the m×m scaled matrix to S (row-major); returns m. */
JF_HD unsigned long long jf_lsq_normal_scaled(const double *A, unsigned long long np, int *idx,
                                              double *c, double *S, int *unident) {
    unsigned long long m = 0;
    for (unsigned long long k = 0; k < np; k++) {
        const double d = A[k * np + k];
        unident[k] = !(d > 0.0);
        if (d > 0.0) {
            idx[m] = (int)k;
            c[m++] = sqrt(d);
        }
    }
    for (unsigned long long a = 0; a < m; a++)
        for (unsigned long long b = 0; b < m; b++)
            S[a * m + b] =
                A[(unsigned long long)idx[a] * np + (unsigned long long)idx[b]] / (c[a] * c[b]);
    return m;
}

/* ... then from S's eigenvalues ev (inverted in place; those below m·ε·max dropped) and
 * eigenvectors (vector j as V[j*m + 0..m)), (JᵀJ)⁺ into cov (np×np, zeroed by the caller) at
 * idx, unscaled by c (jf_lsq_assemble). */
JF_HD void jf_lsq_normal_assemble(const double *V, double *ev, unsigned long long m,
                                  const int *idx, const double *c, unsigned long long np,
                                  double *cov, int *unident) {
    double wmax = 0.0;
    for (unsigned long long j = 0; j < m; j++)
        if (ev[j] > wmax) wmax = ev[j];
    const double thr = (double)m * JF_STEP_EPS * wmax;
    for (unsigned long long j = 0; j < m; j++) ev[j] = ev[j] > thr ? 1.0 / ev[j] : 0.0;
    jf_lsq_assemble(V, ev, m, idx, c, np, cov, unident);
}

/* Σ(y − ȳ)² of n responses y (the total sum of squares). ȳ gets one correction, ȳ + Σ(y − ȳ)/n
 * (the corrected two-pass sum): the plain Σy/n of equal values is an ulp or so off wherever
 * their sum rounds (seven 0.1s), and the TSS of ~1e-33 that left made a constant response's R²
 * 1, 0.86 or 0.6. With equal values the correction is exact (the deviations are a few ulps,
 * their sum has the bits to spare up to millions of points), so ȳ is the value and the TSS 0.
 * solver/threads.c's jf_total_ss sums the same three sums chunk by chunk for long data. */
JF_HD double jf_lsq_total_ss(const double *JF_RESTRICT y, unsigned long long n) {
    double mean = 0.0, dev = 0.0, tss = 0.0;
    for (unsigned long long i = 0; i < n; i++) mean += y[i];
    mean /= (double)n;
    for (unsigned long long i = 0; i < n; i++) dev += y[i] - mean;
    mean += dev / (double)n;
    for (unsigned long long i = 0; i < n; i++) tss += (y[i] - mean) * (y[i] - mean);
    return tss;
}

/* R² = 1 − ssu/tss, ssu the fit's unweighted Σ(f − y)²; NaN when the y are all equal (tss 0:
 * nothing to explain). */
JF_HD double jf_lsq_r_squared_of(double tss, double ssu) {
    return tss > 0.0 ? 1.0 - ssu / tss : (0.0 / 0.0);
}

/* R² of n responses y and a fit's ssu. */
JF_HD double jf_lsq_r_squared(const double *JF_RESTRICT y, unsigned long long n, double ssu) {
    return jf_lsq_r_squared_of(jf_lsq_total_ss(y, n), ssu);
}

#endif
