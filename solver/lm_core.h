/* The device-resident Levenberg-Marquardt loop: the whole iteration as a state machine over
 * memory the device owns, written once for the GPU and the host.
 *
 * The GPU solver keeps everything between two passes over the data on the device: parameters,
 * scaling, trust region, λ, the accept/reject decision and the convergence flag live in one
 * jf_lmc struct and one workspace; a single device thread advances them after each normal_eq
 * pass. The host launches the passes (a CUDA graph) and reads the result once. So that this
 * logic is tested where there is no GPU, the same text is compiled into the library and driven
 * by the CPU kernels (solver/lm_resident.c); tests compare that driver with solver/lm.c.
 *
 * One iteration, as lm.c does it (same decisions, same step.h functions):
 *   jf_lmc_start(acc at x0)        → scaling, radius, active set, first trial point in x_try
 *   jf_lmc_judge(acc at x_try)     → gain ratio, radius, accept/reject, convergence tests,
 *                                    next trial point in x_try
 * each returning 1 while another pass at x_try is wanted. The p×p systems are solved here, not
 * by LAPACK: Cholesky of the Jacobi-scaled matrix when its exact 1-norm reciprocal condition
 * number is at least m·ε (LAPACK's dpocon estimates the same number), else the pseudo-inverse
 * from a cyclic Jacobi eigen-decomposition dropping eigenvalues below m·ε·max (lm.c uses
 * dsyevd with the same threshold). Both are O(p³) per λ, trivial for the p this path serves.
 * For many parameters the caller may factorize instead (v->external: cuSOLVER on the GPU):
 * the step then stops at each factorization with JF_LMC_WANT_FACTOR, its progress kept in
 * jf_lmc (c->phase, the λ search), and jf_lmc_resume continues it once F and Finv hold the
 * factor and the inverse; the decisions (condition test, eigen fallback) stay here.
 *
 * Same rules as step.h: valid C11 and CUDA C, no includes under NVRTC (the library embeds this
 * text after step.h), no allocation, no recursion. Everything sits in caller-provided memory.
 */
#ifndef JF_LM_CORE_H
#define JF_LM_CORE_H

#ifndef __CUDACC_RTC__
#include "step.h"
#endif

/* Status for a start point where the residuals or JᵀJ are not finite (JF_FIT_NONFINITE). */
#define JF_LMC_NONFINITE 7
/* jf_lmc_start/judge/resume's answer when an external factorization is wanted (v->external). */
#define JF_LMC_WANT_FACTOR 2
/* Where a proposal resumes: at the top, after the Gauss-Newton or after a damped factorization. */
#define JF_LMC_AT_TOP 0
#define JF_LMC_AT_GN 1
#define JF_LMC_AT_DAMPED 2
/* Sweeps of the Jacobi eigenvalue iteration before giving up (it converges quadratically;
 * 10 sweeps suffice for p ≤ 100 in practice). */
#define JF_LMC_JACOBI_SWEEPS 60

/* Settings and scalar state of one device-resident run. The host writes the settings and
 * reads everything back at the end; the device thread owns it in between. */
typedef struct jf_lmc {
    /* settings */
    unsigned long long np;       /* parameters */
    unsigned long long nheld;    /* values held after x and after x_try in the workspace: the
                                    model's kernels read p[np .. np + nheld) there (parameters
                                    held fixed, jf_model_hold); the loop never writes them */
    unsigned long long max_nfev; /* evaluation budget (> 0) */
    double ftol, xtol, gtol;     /* tolerances */
    int use_x_scale;             /* 1: D = 1/x_scale (array xs), 0: Jacobian column norms */
    double noise_eps;            /* 0, or (a model evaluated in fp32, JF_LMC_NOISE_EPS) a pass's
                                    sums end with a rounding sum after the cost (jf_lmc_noise) */
    /* state */
    int status;          /* JF_STEP_CONTINUE while running, then a jf_fit_status */
    int projected;       /* the pending trial step was changed by the bounds */
    int accepted;        /* the last judged step was accepted */
    int mode;            /* 1: last factorization was Cholesky, 0: eigen pseudo-inverse */
    double F;            /* cost at x */
    double noise;        /* the rounding sum at x (noise_eps > 0) */
    double gnorm;        /* scaled gradient measure at x */
    double lam;          /* λ of the pending trial step */
    double prered;       /* its predicted relative reduction */
    double dirder;       /* its relative directional derivative */
    double pnorm;        /* its scaled length ‖D s‖ */
    double xnorm;        /* ‖D x‖ at the point it starts from */
    double ratio;        /* gain ratio of the last judged step (NaN when not finite) */
    double step_norm;    /* ‖D s‖ of the last judged step (for progress reports) */
    double damping;      /* its λ */
    jf_step_tr tr;       /* trust region */
    /* the trust-region step in progress, kept here so that it can wait for a factorization */
    int phase;           /* where jf_lmc_propose resumes: JF_LMC_AT_TOP, _AT_GN or _AT_DAMPED */
    int fac_ext;         /* the pending factorization was handed to the caller */
    int chol_ok;         /* its Cholesky succeeded (inline: known at once) */
    unsigned long long m; /* order of the reduced system */
    double anorm, inorm; /* 1-norms of the scaled matrix and of its inverse */
    double lam_try;      /* λ of the system being factorized (0: Gauss-Newton) */
    jf_step_lmpar ls;    /* the λ search */
    unsigned long long nfev;       /* passes over the data so far */
    unsigned long long iterations; /* trial steps judged */
    int restarts;        /* fresh starts for a stale scale so far (jf_step_restart) */
} jf_lmc;

/* Doubles and ints of the workspace of a run with np parameters and nh held values. */
JF_HD unsigned long long jf_lmc_ws_doubles(unsigned long long np, unsigned long long nh) {
    return 17 * np + 2 * nh + 5 * np * np;
}
JF_HD unsigned long long jf_lmc_ws_ints(unsigned long long np) { return 3 * np; }

/* The arrays of the workspace, by name. x, x_try, lo, hi and xs are inputs/outputs the host
 * reads or writes; the rest is scratch. A, M0, Md, M and V are np×np row-major. x and x_try
 * are each followed by the nh held values (written by the host), so that either is the whole
 * parameter vector the model's kernels read. */
typedef struct jf_lmc_views {
    double *x, *x_try, *lo, *hi, *xs;  /* point, trial point, bounds, x_scale */
    double *D, *g, *diag, *s, *s_act;  /* scaling, gradient, (JᵀJ)_kk, step, clipped step */
    double *gF, *DF, *sF, *wF;         /* reduced gradient, scaling, step, λ-search vector */
    double *scale, *eig, *work;        /* factorization: Jacobi scaling, eigenvalues, scratch */
    double *A, *M0, *Md, *M, *V;       /* JᵀJ, reduced JᵀJ, its damped copy, factor, eigenvectors */
    int *free_, *idx;                  /* active set, indices of the free parameters */
    int *held;                         /* held for a negligible column (jf_step_restart) */
    /* External factorization (cuSOLVER), off unless the caller sets all four: F receives the
     * scaled matrix padded with the identity to np×np (column-major, ld np) and must hold its
     * upper Cholesky factor U (F = UᵀU, as potrf 'U' leaves it) when resumed; Finv receives the
     * identity and must hold F⁻¹ (potrs); finfo[0] the potrf info. */
    double *F, *Finv;
    int *finfo;
    int external;
} jf_lmc_views;

JF_HD void jf_lmc_views_init(jf_lmc_views *v, double *ws, int *iws, unsigned long long np,
                             unsigned long long nh) {
    v->x = ws;
    v->x_try = ws + np + nh;
    ws += 2 * (np + nh);
    double **one[] = {&v->lo, &v->hi, &v->xs,    &v->D,   &v->g,    &v->diag, &v->s,
                      &v->s_act, &v->gF, &v->DF, &v->sF, &v->wF,  &v->scale, &v->eig, &v->work};
    for (int k = 0; k < 15; k++) *one[k] = ws + (unsigned long long)k * np;
    double *sq = ws + 15 * np;
    v->A = sq;
    v->M0 = sq + np * np;
    v->Md = sq + 2 * np * np;
    v->M = sq + 3 * np * np;
    v->V = sq + 4 * np * np;
    v->free_ = iws;
    v->idx = iws + np;
    v->held = iws + 2 * np;
    v->F = v->Finv = 0;
    v->finfo = 0;
    v->external = 0;
}

JF_HD int jf_lmc_all_finite(const double *v, unsigned long long n) {
    for (unsigned long long i = 0; i < n; i++)
        if (!jf_step_isfinite(v[i])) return 0;
    return 1;
}

/* Length of a normal_eq accumulator: packed upper JᵀJ, Jᵀr, Σ cost terms. */
JF_HD unsigned long long jf_lmc_nacc(unsigned long long np) { return np * (np + 1) / 2 + np + 1; }

/* A model evaluated in fp32 gives each f_i a few fp32 ε of error, so a cost is known only to
 * about noise_eps Σ |r_i| (|w_i f_i| 2²⁹ + |r_i|) (the polish's rounding level, polish_core.h:
 * 16 fp64 ε in units of fp64's): the single-precision kernels with register sums (normal_eq,
 * a batch's jf_fit_sums) add that sum after the cost, and noise_eps = JF_LMC_NOISE_EPS tells
 * the loop to read it. */
#define JF_LMC_NOISE_EPS (16 * JF_STEP_EPS)

/* The actual reduction the convergence tests see (actred, ratio in place): none where the two
 * costs' difference is within their rounding (noise_eps > 0), as it is at a minimum of a cost
 * evaluated in fp32. There FTOL rests on the predicted reduction alone, where MINPACK's
 * |actred| ≤ ftol and ρ ≤ 2 could not hold (fp32 fits of 5×5 Gaussians took 8-9 trial steps
 * to fp64's 5, ending on XTOL after the noise had rejected steps). Acceptance is not changed:
 * the sum is a worst case, far above the typical rounding, and would accept bad steps. */
JF_HD void jf_lmc_noise(const jf_lmc *c, double noise_try, double *actred, double *ratio) {
    if (c->noise_eps > 0 && fabs(*actred) * c->F <= c->noise_eps * (c->noise + noise_try))
        *actred = *ratio = 0.0;
}

/* Unpacks an accumulator into A, g, diag; returns the cost ½ Σ cost terms. */
JF_HD double jf_lmc_unpack(jf_lmc_views *v, unsigned long long np, const double *acc) {
    unsigned long long t = 0;
    for (unsigned long long i = 0; i < np; i++)
        for (unsigned long long j = i; j < np; j++) v->A[i * np + j] = v->A[j * np + i] = acc[t++];
    for (unsigned long long k = 0; k < np; k++) {
        v->g[k] = acc[t + k];
        v->diag[k] = v->A[k * np + k];
    }
    return 0.5 * acc[t + np];
}

/* The active set (lm.c): fixed when held by a bound, when the Jacobian column is zero, or
 * when held for a negligible one (v->held, step.h jf_step_restart). */
JF_HD void jf_lmc_active_set(jf_lmc_views *v, unsigned long long np) {
    for (unsigned long long k = 0; k < np; k++)
        v->free_[k] = v->diag[k] > 0 && !v->held[k] &&
                      jf_step_is_free(v->x[k], v->lo[k], v->hi[k], v->g[k]);
}

/* ---- p×p linear algebra ---------------------------------------------------------------------- */

/* In-place Cholesky of the m×m row-major symmetric matrix L (lower triangle used and
 * written). 0 when a pivot is not positive. */
JF_HD int jf_lmc_cholesky(double *L, unsigned long long m) {
    for (unsigned long long j = 0; j < m; j++) {
        double d = L[j * m + j];
        for (unsigned long long k = 0; k < j; k++) d -= L[j * m + k] * L[j * m + k];
        if (!(d > 0)) return 0;
        d = sqrt(d);
        L[j * m + j] = d;
        for (unsigned long long i = j + 1; i < m; i++) {
            double s = L[i * m + j];
            for (unsigned long long k = 0; k < j; k++) s -= L[i * m + k] * L[j * m + k];
            L[i * m + j] = s / d;
        }
    }
    return 1;
}

/* Solves L Lᵀ x = b in place (x = b on entry). */
JF_HD void jf_lmc_chol_solve(const double *L, unsigned long long m, double *x) {
    for (unsigned long long i = 0; i < m; i++) {
        double s = x[i];
        for (unsigned long long k = 0; k < i; k++) s -= L[i * m + k] * x[k];
        x[i] = s / L[i * m + i];
    }
    for (unsigned long long i = m; i-- > 0;) {
        double s = x[i];
        for (unsigned long long k = i + 1; k < m; k++) s -= L[k * m + i] * x[k];
        x[i] = s / L[i * m + i];
    }
}

/* Cyclic Jacobi eigen-decomposition of the symmetric m×m row-major S (destroyed; its diagonal
 * ends as the eigenvalues, copied to eig). V receives the eigenvectors as columns. */
JF_HD_CALL void jf_lmc_jacobi(double *S, unsigned long long m, double *V, double *eig) {
    for (unsigned long long i = 0; i < m; i++)
        for (unsigned long long j = 0; j < m; j++) V[i * m + j] = i == j ? 1.0 : 0.0;
    for (int sweep = 0; sweep < JF_LMC_JACOBI_SWEEPS; sweep++) {
        double off = 0.0, on = 0.0;
        for (unsigned long long i = 0; i < m; i++) {
            on += S[i * m + i] * S[i * m + i];
            for (unsigned long long j = i + 1; j < m; j++) off += S[i * m + j] * S[i * m + j];
        }
        if (!(off > JF_STEP_EPS * JF_STEP_EPS * on * 1e-4)) break;
        for (unsigned long long p = 0; p < m; p++)
            for (unsigned long long q = p + 1; q < m; q++) {
                double apq = S[p * m + q];
                if (apq == 0.0) continue;
                double theta = (S[q * m + q] - S[p * m + p]) / (2.0 * apq);
                double t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1.0));
                double c = 1.0 / sqrt(t * t + 1.0), s = t * c;
                for (unsigned long long k = 0; k < m; k++) { /* columns p, q */
                    double skp = S[k * m + p], skq = S[k * m + q];
                    S[k * m + p] = c * skp - s * skq;
                    S[k * m + q] = s * skp + c * skq;
                }
                for (unsigned long long k = 0; k < m; k++) { /* rows p, q */
                    double spk = S[p * m + k], sqk = S[q * m + k];
                    S[p * m + k] = c * spk - s * sqk;
                    S[q * m + k] = s * spk + c * sqk;
                }
                S[p * m + q] = S[q * m + p] = 0.0;
                for (unsigned long long k = 0; k < m; k++) {
                    double vkp = V[k * m + p], vkq = V[k * m + q];
                    V[k * m + p] = c * vkp - s * vkq;
                    V[k * m + q] = s * vkp + c * vkq;
                }
            }
    }
    for (unsigned long long i = 0; i < m; i++) eig[i] = S[i * m + i];
}

/* Jacobi scaling of the symmetric m×m Min (row-major): v->scale, the scaled matrix in v->M
 * and its 1-norm in *anorm. -1 when something is not finite, else 0. */
JF_HD int jf_lmc_scaled(jf_lmc_views *v, const double *Min, unsigned long long m, double *anorm) {
    double *S = v->M, *sc = v->scale;
    for (unsigned long long k = 0; k < m; k++) {
        double d = Min[k * m + k];
        if (!jf_step_isfinite(d)) return -1;
        sc[k] = d > 0 ? 1.0 / sqrt(d) : 1.0;
    }
    *anorm = 0.0;
    for (unsigned long long j = 0; j < m; j++) {
        double col = 0.0;
        for (unsigned long long i = 0; i < m; i++) {
            double a = sc[i] * Min[i * m + j] * sc[j];
            if (!jf_step_isfinite(a)) return -1;
            S[i * m + j] = a;
            col += fabs(a);
        }
        if (col > *anorm) *anorm = col;
    }
    return 0;
}

/* Exact ‖S⁻¹‖₁ from the Cholesky factor of S in v->M: one solve per unit vector (m³, tiny
 * for the m the inline path serves). */
JF_HD double jf_lmc_inv_norm(jf_lmc_views *v, unsigned long long m) {
    double *w = v->work, inorm = 0.0;
    for (unsigned long long j = 0; j < m; j++) {
        for (unsigned long long i = 0; i < m; i++) w[i] = i == j ? 1.0 : 0.0;
        jf_lmc_chol_solve(v->M, m, w);
        double col = 0.0;
        for (unsigned long long i = 0; i < m; i++) col += fabs(w[i]);
        if (col > inorm) inorm = col;
    }
    return inorm;
}

/* Keeps the Cholesky factor in v->M when it exists and the reciprocal condition number
 * 1/(anorm·inorm) is at least m·ε (1); else the eigen pseudo-inverse of the scaled Min into
 * v->V/v->eig (0). */
JF_HD int jf_lmc_decide(jf_lmc_views *v, const double *Min, unsigned long long m, int chol_ok,
                        double anorm, double inorm) {
    if (chol_ok) {
        double rcond = anorm > 0 && inorm > 0 ? 1.0 / (anorm * inorm) : 0.0;
        if (rcond >= (double)m * JF_STEP_EPS) return 1;
    }
    double *S = v->M, *sc = v->scale;
    /* the scaled matrix again (Cholesky overwrote it), then its eigen-decomposition */
    for (unsigned long long i = 0; i < m; i++)
        for (unsigned long long j = 0; j < m; j++) S[i * m + j] = sc[i] * Min[i * m + j] * sc[j];
    jf_lmc_jacobi(S, m, v->V, v->eig);
    double emax = 0.0;
    for (unsigned long long k = 0; k < m; k++)
        if (v->eig[k] > emax) emax = v->eig[k];
    double thr = (double)m * JF_STEP_EPS * emax;
    for (unsigned long long k = 0; k < m; k++) v->eig[k] = v->eig[k] > thr ? 1.0 / v->eig[k] : 0.0;
    return 0;
}

/* Factorizes the symmetric m×m matrix Min (row-major) into v->M (Cholesky factor of the scaled
 * matrix) or v->V/v->eig (pseudo-inverse). Returns 1 (Cholesky), 0 (eigen fallback) or -1 (not
 * finite), like jf_linalg_factor. */
JF_HD int jf_lmc_factor(jf_lmc_views *v, const double *Min, unsigned long long m) {
    double anorm;
    if (jf_lmc_scaled(v, Min, m, &anorm) < 0) return -1;
    int ok = jf_lmc_cholesky(v->M, m);
    return jf_lmc_decide(v, Min, m, ok, anorm, ok ? jf_lmc_inv_norm(v, m) : 0.0);
}

/* x = M⁺ b for the last factorization of mode `mode` (x may alias b). */
JF_HD void jf_lmc_solve(jf_lmc_views *v, int mode, unsigned long long m, const double *b,
                        double *x) {
    double *w = v->work;
    for (unsigned long long i = 0; i < m; i++) w[i] = v->scale[i] * b[i];
    if (mode == 1) {
        jf_lmc_chol_solve(v->M, m, w);
        for (unsigned long long i = 0; i < m; i++) x[i] = v->scale[i] * w[i];
        return;
    }
    /* x = S V diag(eig⁺) Vᵀ S b; eig holds the inverted eigenvalues */
    double *t = v->M; /* the scaled matrix is no longer needed: its first row holds Vᵀ S b */
    for (unsigned long long k = 0; k < m; k++) {
        double s = 0.0;
        for (unsigned long long i = 0; i < m; i++) s += v->V[i * m + k] * w[i];
        t[k] = s * v->eig[k];
    }
    for (unsigned long long i = 0; i < m; i++) {
        double s = 0.0;
        for (unsigned long long k = 0; k < m; k++) s += v->V[i * m + k] * t[k];
        x[i] = v->scale[i] * s;
    }
}

/* wᵀ M⁺ w for the last factorization. */
JF_HD double jf_lmc_quad(jf_lmc_views *v, int mode, unsigned long long m, const double *wv) {
    double *w = v->work, q = 0.0;
    for (unsigned long long i = 0; i < m; i++) w[i] = v->scale[i] * wv[i];
    if (mode == 1) { /* ‖L⁻¹ S w‖² */
        for (unsigned long long i = 0; i < m; i++) {
            double s = w[i];
            for (unsigned long long k = 0; k < i; k++) s -= v->M[i * m + k] * w[k];
            w[i] = s / v->M[i * m + i];
            q += w[i] * w[i];
        }
        return q;
    }
    for (unsigned long long k = 0; k < m; k++) {
        double s = 0.0;
        for (unsigned long long i = 0; i < m; i++) s += v->V[i * m + k] * w[i];
        q += v->eig[k] * s * s;
    }
    return q;
}

/* ---- the trust-region step, resumable around its factorizations ------------------------------ */

/* Starts the factorization of Min (order m, row-major): inline at once (1), or handed to the
 * caller when v->external (JF_LMC_WANT_FACTOR: F = the scaled matrix padded with the identity,
 * Finv = I; the caller runs potrf 'U' on F and potrs on Finv, then jf_lmc_resume). The padding
 * leaves the factor and inverse of the m×m block exact in their top-left corners, so the host
 * writes one np×np request whatever the active set. -1 when something is not finite. */
JF_HD int jf_lmc_request(jf_lmc *c, jf_lmc_views *v, const double *Min, unsigned long long m) {
    if (jf_lmc_scaled(v, Min, m, &c->anorm) < 0) return -1;
    c->fac_ext = v->external;
    if (!v->external) {
        c->chol_ok = jf_lmc_cholesky(v->M, m);
        c->inorm = c->chol_ok ? jf_lmc_inv_norm(v, m) : 0.0;
        return 1;
    }
    unsigned long long np = c->np;
    for (unsigned long long j = 0; j < np; j++)
        for (unsigned long long i = 0; i < np; i++) {
            v->F[i + j * np] = i < m && j < m ? v->M[i * m + j] : (i == j ? 1.0 : 0.0);
            v->Finv[i + j * np] = i == j ? 1.0 : 0.0;
        }
    return JF_LMC_WANT_FACTOR;
}

/* Finishes the pending factorization of Min: c->mode = 1 (Cholesky) or 0 (eigen). */
JF_HD void jf_lmc_complete(jf_lmc *c, jf_lmc_views *v, const double *Min, unsigned long long m) {
    if (c->fac_ext) { /* L = Uᵀ from F, ‖S⁻¹‖₁ from the top-left block of Finv */
        unsigned long long np = c->np;
        c->chol_ok = v->finfo[0] == 0;
        c->inorm = 0.0;
        for (unsigned long long i = 0; c->chol_ok && i < m; i++)
            for (unsigned long long k = 0; k <= i; k++) v->M[i * m + k] = v->F[k + i * np];
        for (unsigned long long j = 0; c->chol_ok && j < m; j++) {
            double col = 0.0;
            for (unsigned long long i = 0; i < m; i++) col += fabs(v->Finv[i + j * np]);
            if (!jf_step_isfinite(col)) c->chol_ok = 0;
            if (col > c->inorm) c->inorm = col;
        }
        c->fac_ext = 0;
    }
    c->mode = jf_lmc_decide(v, Min, m, c->chol_ok, c->anorm, c->inorm);
}

/* sF = -M⁺ gF from the finished factorization of Min; returns ‖DF sF‖. */
JF_HD double jf_lmc_tr_solve(jf_lmc *c, jf_lmc_views *v, const double *Min) {
    unsigned long long m = c->m;
    jf_lmc_complete(c, v, Min, m);
    jf_lmc_solve(v, c->mode, m, v->gF, v->sF);
    for (unsigned long long a = 0; a < m; a++) v->sF[a] = -v->sF[a];
    return jf_step_scaled_norm(v->DF, v->sF, m);
}

/* The damped system (M0 + λ diag(DF²)) of lm.c's solve_damped, and its factorization. */
JF_HD int jf_lmc_tr_damp(jf_lmc *c, jf_lmc_views *v, double lam) {
    unsigned long long m = c->m;
    for (unsigned long long i = 0; i < m * m; i++) v->Md[i] = v->M0[i];
    for (unsigned long long a = 0; a < m; a++) v->Md[a * m + a] += lam * v->DF[a] * v->DF[a];
    c->lam_try = lam;
    c->phase = JF_LMC_AT_DAMPED;
    return jf_lmc_request(c, v, v->Md, m);
}

/* The top of lm.c's tr_step (MINPACK lmpar on the reduced normal equations): the system of
 * the free parameters and its Gauss-Newton factorization. 0 when none is free (the step is 0). */
JF_HD int jf_lmc_tr_begin(jf_lmc *c, jf_lmc_views *v) {
    unsigned long long np = c->np, m = 0;
    for (unsigned long long k = 0; k < np; k++)
        if (v->free_[k]) v->idx[m++] = (int)k;
    for (unsigned long long k = 0; k < np; k++) v->s[k] = 0.0;
    c->m = m;
    c->lam_try = 0.0;
    if (m == 0) return 0;
    for (unsigned long long a = 0; a < m; a++) {
        for (unsigned long long b = 0; b < m; b++)
            v->M0[a * m + b] = v->A[(unsigned long long)v->idx[a] * np + v->idx[b]];
        v->gF[a] = v->g[v->idx[a]];
        v->DF[a] = v->D[v->idx[a]];
    }
    c->phase = JF_LMC_AT_GN;
    return jf_lmc_request(c, v, v->M0, m);
}

/* After the Gauss-Newton factorization: done (0) when that step lies in the region, else the
 * search for λ begins with its first damped system. */
JF_HD int jf_lmc_tr_gn(jf_lmc *c, jf_lmc_views *v) {
    unsigned long long m = c->m;
    double delta = c->tr.delta;
    double dxnorm = jf_lmc_tr_solve(c, v, v->M0);
    double fp = dxnorm - delta;
    int unbounded = c->mode == 0 && jf_step_gn_unexplained(v->M0, v->gF, v->sF, v->DF, m, v->wF) >
                                        JF_STEP_GN_UNEXPLAINED;
    if (!(fp > JF_STEP_LMPAR_SIGMA * delta) && !unbounded) return 0;
    double parl = 0.0;
    if (c->mode == 1) { /* Newton's lower bound needs a nonsingular Gauss-Newton system */
        for (unsigned long long a = 0; a < m; a++)
            v->wF[a] = v->DF[a] * v->DF[a] * v->sF[a] / dxnorm;
        double q = jf_lmc_quad(v, c->mode, m, v->wF);
        parl = q > 0 ? fp / delta / q : 0.0;
    }
    for (unsigned long long a = 0; a < m; a++) v->wF[a] = v->gF[a] / v->DF[a];
    double gnorm = jf_step_scaled_norm((const double *)0, v->wF, m);
    return jf_lmc_tr_damp(c, v,
                          jf_step_lmpar_start(&c->ls, c->tr.lambda, parl, gnorm, delta, dxnorm,
                                              unbounded && !(fp > 0) ? delta : fp));
}

/* After a damped factorization: done (0) when λ is found, else the next damped system. */
JF_HD int jf_lmc_tr_damped(jf_lmc *c, jf_lmc_views *v) {
    unsigned long long m = c->m;
    double delta = c->tr.delta;
    double dxnorm = jf_lmc_tr_solve(c, v, v->Md);
    double fp = dxnorm - delta;
    if (jf_step_lmpar_done(&c->ls, fp, delta)) return 0;
    for (unsigned long long a = 0; a < m; a++) v->wF[a] = v->DF[a] * v->DF[a] * v->sF[a] / dxnorm;
    double q = jf_lmc_quad(v, c->mode, m, v->wF);
    return jf_lmc_tr_damp(c, v, jf_step_lmpar_next(&c->ls, c->lam_try, fp, delta, q));
}

/* Proposes the next trial point x_try from the current point (the top of lm.c's loop): the
 * gradient and budget tests, the step, its projection onto the bounds, its predicted
 * reduction. 1 when x_try awaits evaluation; 0 when the run ended (c->status says why);
 * JF_LMC_WANT_FACTOR when a factorization was handed to the caller (v->external). Resumes
 * where c->phase says. */
JF_HD_CALL int jf_lmc_propose(jf_lmc *c, jf_lmc_views *v) {
    unsigned long long np = c->np;
    for (;;) {
        int r;
        if (c->phase == JF_LMC_AT_GN) {
            r = jf_lmc_tr_gn(c, v);
        } else if (c->phase == JF_LMC_AT_DAMPED) {
            r = jf_lmc_tr_damped(c, v);
        } else {
            if (jf_step_gtol_test(c->gnorm, c->gtol)) {
                c->status = JF_STEP_GTOL;
                return 0;
            }
            if (c->nfev >= c->max_nfev) {
                c->status = JF_STEP_MAX_NFEV;
                return 0;
            }
            r = jf_lmc_tr_begin(c, v);
        }
        if (r == 1) continue; /* factorized inline: go on where c->phase says */
        if (r == JF_LMC_WANT_FACTOR) return r;
        c->phase = JF_LMC_AT_TOP;
        if (r < 0) { /* JᵀJ at an accepted point is finite: cannot happen but for overflow */
            c->status = JF_STEP_STALLED;
            return 0;
        }
        double lam = c->lam_try;
        for (unsigned long long a = 0; a < c->m; a++) v->s[v->idx[a]] = v->sF[a];
        if (jf_step_bind(v->free_, v->x, v->lo, v->hi, v->s, np)) continue; /* the step anew */
        int projected = 0;
        for (unsigned long long k = 0; k < np; k++) {
            v->x_try[k] = jf_step_clip(v->x[k] + v->s[k], v->lo[k], v->hi[k]);
            v->s_act[k] = v->x_try[k] - v->x[k];
            if (v->x_try[k] != v->x[k] + v->s[k]) projected = 1;
        }
        double pnorm = jf_step_scaled_norm(v->D, v->s_act, np);
        double xnorm = jf_step_xnorm(v->D, v->x, v->held, np);
        if (projected && pnorm == 0.0) { /* every moving parameter hit a bound: shrink */
            c->tr.lambda = lam;
            jf_step_update_radius(&c->tr, 0.0, -1.0, 0.0, jf_step_scaled_norm(v->D, v->s, np), 0);
            if (c->tr.delta <= JF_STEP_EPS * xnorm) {
                c->status = JF_STEP_STALLED;
                return 0;
            }
            jf_lmc_active_set(v, np); /* release jf_step_bind's holds */
            continue;
        }
        jf_step_first(&c->tr, pnorm);
        double sAs = 0.0, ds2 = 0.0, gs = 0.0;
        for (unsigned long long a = 0; a < np; a++) {
            double t = 0.0;
            for (unsigned long long b = 0; b < np; b++) t += v->A[a * np + b] * v->s_act[b];
            sAs += v->s_act[a] * t;
            ds2 += (v->D[a] * v->s_act[a]) * (v->D[a] * v->s_act[a]);
            gs += v->g[a] * v->s_act[a];
        }
        jf_step_predicted(c->F, sAs, lam * ds2, gs, projected, &c->prered, &c->dirder);
        c->lam = lam;
        c->pnorm = pnorm;
        c->xnorm = xnorm;
        c->projected = projected;
        return 1;
    }
}

/* Continues a proposal after the caller's factorization (F, Finv, finfo written as
 * jf_lmc_request asked); same answers as jf_lmc_propose. With nothing pending (or after the
 * end) it changes nothing: 1 while a pass at x_try is wanted, else 0. */
JF_HD int jf_lmc_resume(jf_lmc *c, jf_lmc_views *v) {
    if (c->status != JF_STEP_CONTINUE) return 0;
    if (c->phase == JF_LMC_AT_TOP) return 1;
    return jf_lmc_propose(c, v);
}

/* Begins a run at v->x from the accumulator of the pass there (c's settings and v->x, lo, hi,
 * xs set by the caller). 1 when v->x_try awaits evaluation. */
JF_HD_CALL int jf_lmc_start(jf_lmc *c, jf_lmc_views *v, const double *acc) {
    unsigned long long np = c->np;
    c->nfev = 1;
    c->iterations = 0;
    c->restarts = 0;
    c->accepted = 0;
    c->ratio = 0.0;
    c->phase = JF_LMC_AT_TOP;
    c->F = jf_lmc_unpack(v, np, acc);
    c->noise = c->noise_eps > 0 ? acc[jf_lmc_nacc(np)] : 0.0;
    if (!jf_lmc_all_finite(acc, jf_lmc_nacc(np))) {
        c->status = JF_LMC_NONFINITE;
        c->gnorm = 0.0 / 0.0;
        return 0;
    }
    for (unsigned long long k = 0; k < np; k++) v->held[k] = 0;
    if (c->use_x_scale)
        for (unsigned long long k = 0; k < np; k++) v->D[k] = 1.0 / v->xs[k];
    else
        jf_step_update_scale(v->D, v->diag, 1, np);
    jf_step_tr_init(&c->tr, jf_step_xnorm(v->D, v->x, v->held, np));
    jf_lmc_active_set(v, np);
    c->gnorm = jf_step_gnorm(v->g, v->diag, v->free_, c->F, np);
    c->status = JF_STEP_CONTINUE;
    return jf_lmc_propose(c, v);
}

/* Judges the pending trial point from the accumulator of the pass at v->x_try: accepts or
 * rejects it, updates the trust region, runs the convergence tests and proposes the next
 * point. 1 when v->x_try awaits evaluation; 0 when the run has ended (also when called after
 * the end, as the unrolled graph does). */
JF_HD_CALL int jf_lmc_judge(jf_lmc *c, jf_lmc_views *v, const double *acc_try) {
    if (c->status != JF_STEP_CONTINUE) return 0;
    unsigned long long np = c->np, nacc = jf_lmc_nacc(np);
    c->nfev++;
    c->iterations++;
    int finite = jf_lmc_all_finite(acc_try, nacc);
    double Fnew = 0.5 * acc_try[nacc - 1];
    double actred = jf_step_actred(c->F, Fnew, finite);
    double ratio = finite ? jf_step_ratio(actred, c->prered) : 0.0;
    c->tr.lambda = c->lam;
    c->step_norm = c->pnorm;
    c->damping = c->lam;
    jf_step_update_radius(&c->tr, ratio, actred, c->dirder, c->pnorm, finite);
    c->accepted = finite && jf_step_accepted(ratio);
    c->ratio = finite ? ratio : 0.0 / 0.0;
    const double noise_try = c->noise_eps > 0 ? acc_try[nacc] : 0.0;
    double act_test = actred, ratio_test = ratio;
    if (finite) jf_lmc_noise(c, noise_try, &act_test, &ratio_test);
    if (c->accepted) {
        for (unsigned long long k = 0; k < np; k++) v->x[k] = v->x_try[k];
        c->noise = noise_try;
        c->F = jf_lmc_unpack(v, np, acc_try);
        if (!c->use_x_scale) jf_step_rescale(v->D, v->diag, v->x, np, &c->tr);
        jf_lmc_active_set(v, np);
        c->gnorm = jf_step_gnorm(v->g, v->diag, v->free_, c->F, np);
    } else {
        jf_lmc_active_set(v, np); /* release jf_step_bind's holds */
    }
    c->status = jf_step_test(c->ftol, c->xtol, act_test, c->prered, ratio_test, c->pnorm,
                             c->xnorm, c->tr.delta);
    if (!c->use_x_scale && c->status != JF_STEP_CONTINUE) {
        c->status = jf_step_restart(c->status, v->D, v->diag, v->x, c->F, np, &c->tr,
                                    &c->restarts, v->held);
        if (c->status == JF_STEP_CONTINUE) { /* the held set may have changed */
            jf_lmc_active_set(v, np);
            c->gnorm = jf_step_gnorm(v->g, v->diag, v->free_, c->F, np);
        }
    }
    if (c->status != JF_STEP_CONTINUE) return 0;
    return jf_lmc_propose(c, v);
}

#endif
