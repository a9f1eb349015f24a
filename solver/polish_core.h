/* The decisions of the Gauss-Newton polish (docs/SOLVER.md, "The polish"), written once for the
 * host (lm.c) and the GPU batch (solver/batch_cuda.c).
 *
 * After a converged run, Gauss-Newton steps solved on J itself (not the normal equations) take
 * the parameters to the digits the data determine. The caller owns the data and the linear
 * algebra: it evaluates passes (J and r, or their QR triangle and sums) and solves for the step;
 * this machine decides whether a step is tried, and whether its result is kept:
 *   jf_pol_begin(cost and rounding sum at x)
 *   while jf_pol_more: solve for s at x; jf_pol_propose(s) → x_try or stop;
 *                      pass at x_try; jf_pol_judge → 1 keep (x = x_try), 2 keep and stop, 0 stop.
 * A step is tried while it contracts (≤ 0.9 of the last kept one), is above 4ε‖D x‖ and stays in
 * the box; it is kept while the cost does not rise above its rounding level at x,
 * 16ε Σ|r_i|(|w_i f_i| + |r_i|), with the model's own ε in the first term (near the minimum the cost changes below the rounding of the
 * residuals, so a strict decrease test would stop at random); at most JF_POL_MAXIT steps and the
 * evaluation budget; a kept step below JF_POL_RTOL‖D x‖ is the last, and so is one whose
 * geometric rest (from the last two steps' rate) is below that.
 *
 * Same rules as step.h: valid C11 and CUDA C, no includes under NVRTC, no allocation.
 */
#ifndef JF_POLISH_CORE_H
#define JF_POLISH_CORE_H

#ifndef __CUDACC_RTC__
#include "step.h"
#endif

/* At most this many steps (linear convergence at rate ≈0.65 on MGH09 needs about 40 to reach
 * 10⁻¹² from 10⁻⁴). */
#define JF_POL_MAXIT 60
/* Steps must shrink by this factor (else rounding noise has been reached, or Gauss-Newton does
 * not converge here). */
#define JF_POL_CONTRACT 0.9
/* A kept step this small relative to ‖D x‖ is the last: further digits are noise. */
#define JF_POL_RTOL 1e-13
/* A kept step at most this (relative to ‖D x‖) is also the last when the steps' geometric rate
 * says the rest adds less than JF_POL_RTOL: Gauss-Newton converges linearly on data with
 * residuals (rate ≈ 0.03 on 5×5-pixel Gaussians), and the pass that found the next step below
 * JF_POL_RTOL was a fifth of the polish. The gate bounds what a misjudged rate can leave:
 * 9·10⁻¹¹ at the contraction limit, 8·10⁻¹³ seen on 2000 such fits. */
#define JF_POL_TAIL_GATE 1e-11

/* The polish's state between passes. */
typedef struct jf_pol {
    unsigned long long np;       /* parameters */
    unsigned long long max_nfev; /* evaluation budget */
    unsigned long long nfev;     /* evaluations so far (judge counts the trial passes) */
    int it;                      /* steps proposed */
    int steps;                   /* steps kept */
    int have_prev;               /* a step was kept (sn_prev is set) */
    double F;                    /* cost at x */
    double noise;                /* its rounding level */
    double sn, xn;               /* pending step's ‖D s‖, and ‖D x‖ */
    double sn_prev;              /* ‖D s‖ of the last kept step */
} jf_pol;

/* One point's term of the rounding sum: r its weighted residual, wy its weighted observation
 * (w_i f_i = r + wy), rel the model value's rounding in units of fp64's (1; 2²⁹ for a model
 * evaluated in fp32, whose f_i carries an error of a few fp32 ε). */
JF_HD double jf_pol_noise_term(double r, double wy, double rel) {
    double wf = r + wy;
    return fabs(r) * (fabs(wf) * rel + fabs(r));
}

/* Begins at x: F its cost, noise_sum Σ jf_pol_noise_term over its points. */
JF_HD void jf_pol_begin(jf_pol *P, unsigned long long np, unsigned long long max_nfev,
                        unsigned long long nfev, double F, double noise_sum) {
    P->np = np;
    P->max_nfev = max_nfev;
    P->nfev = nfev;
    P->it = 0;
    P->steps = 0;
    P->have_prev = 0;
    P->F = F;
    P->noise = noise_sum * (16 * JF_STEP_EPS);
    P->sn = P->xn = P->sn_prev = 0.0;
}

/* 1 while another step may be tried (step count and budget). */
JF_HD int jf_pol_more(const jf_pol *P) {
    return P->it < JF_POL_MAXIT && P->nfev < P->max_nfev;
}

/* Takes the Gauss-Newton step s (np, zero for parameters held fixed) from x with scaling D:
 * 1 with the trial point in x_try when it is to be evaluated, 0 when the polish ends. */
JF_HD int jf_pol_propose(jf_pol *P, const double *D, const double *x, const double *s,
                         const double *lo, const double *hi, double *x_try) {
    unsigned long long np = P->np;
    P->it++;
    P->sn = jf_step_scaled_norm(D, s, np);
    P->xn = jf_step_scaled_norm(D, x, np);
    if (!(P->sn > 4 * JF_STEP_EPS * P->xn)) return 0;
    if (P->have_prev && P->sn > JF_POL_CONTRACT * P->sn_prev) return 0;
    int inside = 1;
    for (unsigned long long k = 0; k < np; k++) {
        x_try[k] = x[k] + s[k];
        if (!(x_try[k] >= lo[k] && x_try[k] <= hi[k])) inside = 0;
    }
    return inside;
}

/* Judges the pass at x_try: finite whether its residuals and Jacobian are, F2 its cost,
 * noise_sum2 its rounding sum. 1: keep it (the caller moves x to x_try), 2: keep it and stop,
 * 0: discard it and stop. */
JF_HD int jf_pol_judge(jf_pol *P, int finite, double F2, double noise_sum2) {
    P->nfev++;
    if (!finite) return 0;
    if (!(F2 <= P->F + P->noise)) return 0;
    P->F = F2;
    P->noise = noise_sum2 * (16 * JF_STEP_EPS);
    P->steps++;
    /* the last kept step: below JF_POL_RTOL, or (below JF_POL_TAIL_GATE) shrinking at a rate
     * rho = sn / sn_prev whose geometric rest, sn·rho/(1 − rho), is below JF_POL_RTOL: the next
     * pass would only confirm digits beneath that (contraction keeps rho ≤ 0.9) */
    int last = P->sn <= JF_POL_RTOL * P->xn;
    if (!last && P->have_prev && P->sn <= JF_POL_TAIL_GATE * P->xn) {
        double rho = P->sn / P->sn_prev;
        last = P->sn * rho <= JF_POL_RTOL * P->xn * (1.0 - rho);
    }
    P->sn_prev = P->sn;
    P->have_prev = 1;
    return last ? 2 : 1;
}

#endif
