/* The trust-region step logic of the Levenberg-Marquardt solver, written once for every driver.
 *
 * This is the decision-making half of the solver: scaling, the search for the damping parameter
 * λ that fits a step into the trust region (Moré 1978, MINPACK's lmpar), the predicted and actual
 * reductions, the gain ratio, the radius update, acceptance, the convergence tests and the
 * handling of box bounds. The arithmetic half (evaluating the model, factorizing the p×p system)
 * belongs to each driver: solver/lm.c on the CPU, the future GPU solver in device code.
 *
 * The text must be valid C11 and CUDA C: the build embeds it (jf_embed_step_h) so NVRTC compiles
 * the very same functions the CPU driver runs. Hence: no project includes, no includes at all
 * under NVRTC, only scalars and caller-provided arrays, no allocation, no recursion.
 *
 * Units: F is the cost ½ Σ f_scale² ρ((r_i/f_scale)²); reductions are relative to F, as in
 * MINPACK (actred = 1 - F_new/F, prered = predicted reduction / F). Norms of steps and points are
 * scaled by the diagonal D (‖D s‖), MINPACK's column scaling.
 */
#ifndef JF_STEP_H
#define JF_STEP_H

#ifndef __CUDACC_RTC__
#include <math.h>
#include <stddef.h>
#endif

#ifndef JF_HD
#ifdef __CUDACC__
#define JF_HD static __host__ __device__ inline
#else
#define JF_HD static inline
#endif
#endif

/* For the large, branchy routines that several callers share (lm_core.h's start, judge and
 * proposal, its eigensolver): on the device compiled once and called, not inlined at every call
 * site, which multiplied a module's size and its compile time (NVRTC and ptxas) for no speed —
 * one thread of a fit runs them, on state in memory. */
#ifndef JF_HD_CALL
#ifdef __CUDACC__
#define JF_HD_CALL static __host__ __device__ __noinline__
#else
#define JF_HD_CALL static inline
#endif
#endif

/* Machine epsilon and the smallest normal double (MINPACK's dpmpar(1) and dpmpar(2)). */
#define JF_STEP_EPS 2.220446049250313e-16
#define JF_STEP_DWARF 2.2250738585072014e-308

/* Why to stop; the same numbers as jf_fit_status in include/jitfit.h (lm.c checks this). */
#define JF_STEP_CONTINUE 0  /* keep iterating */
#define JF_STEP_FTOL 1      /* actual and predicted relative reductions at most ftol */
#define JF_STEP_XTOL 2      /* scaled step at most xtol ‖D x‖ */
#define JF_STEP_FTOL_XTOL 3 /* both at the same step */
#define JF_STEP_GTOL 4      /* scaled gradient at most gtol */
#define JF_STEP_MAX_NFEV 5  /* evaluation budget spent */
#define JF_STEP_STALLED 6   /* no representable progress is possible */

/* Moré's initial radius is factor·‖D x0‖. MINPACK uses 100; 1 (scipy's trf) keeps the first
 * step near the starting point, which is what rescues BoxBOD from its start 1 (see
 * docs/SOLVER.md). */
#define JF_STEP_FACTOR 1.0
/* A trial point is accepted when it achieves this fraction of the predicted reduction. */
#define JF_STEP_ACCEPT 1e-4
/* The λ search stops when ‖D s‖ is within this fraction of the radius. */
#define JF_STEP_LMPAR_SIGMA 0.1
/* The λ search gives up after this many trial λ (MINPACK: 10). */
#define JF_STEP_LMPAR_MAXIT 10

/* Trust-region state carried between iterations. */
typedef struct jf_step_tr {
    double delta;  /* radius: steps satisfy ‖D s‖ ≲ delta */
    double lambda; /* damping of the last step; the next λ search starts from it */
    int first;     /* 1 until the first step: the radius is then cut to that step's length */
} jf_step_tr;

/* State of one λ search (MINPACK lmpar's safeguarded Newton iteration on ‖D s(λ)‖ = Δ). */
typedef struct jf_step_lmpar {
    double parl;    /* lower bound of the wanted λ */
    double paru;    /* upper bound of the wanted λ */
    double fp_prev; /* ‖D s‖ - Δ of the previous trial λ */
    int iter;       /* trial λ tried so far */
} jf_step_lmpar;

JF_HD int jf_step_isfinite(double v) { return v == v && v - v == 0.0; }

JF_HD double jf_step_max(double a, double b) { return a > b ? a : b; }

JF_HD double jf_step_min(double a, double b) { return a < b ? a : b; }

/* ‖D v‖ over the k with skip[k] == 0 (skip NULL: all; D NULL: the identity), with scaling
 * against overflow (the values can be huge before a step is rejected). */
JF_HD double jf_step_norm_skip(const double *D, const double *v, const int *skip, size_t p) {
    double big = 0.0, sum = 0.0;
    for (size_t k = 0; k < p; k++) {
        if (skip && skip[k]) continue;
        double a = D ? D[k] * v[k] : v[k];
        a = a < 0 ? -a : a;
        if (a > big) big = a;
    }
    if (big == 0.0 || !jf_step_isfinite(big)) return big;
    for (size_t k = 0; k < p; k++) {
        if (skip && skip[k]) continue;
        double a = (D ? D[k] * v[k] : v[k]) / big;
        sum += a * a;
    }
    return big * sqrt(sum);
}

/* ‖D v‖ (jf_step_norm_skip over every k). */
JF_HD double jf_step_scaled_norm(const double *D, const double *v, size_t p) {
    return jf_step_norm_skip(D, v, (const int *)0, p);
}

/* A column is negligible when moving its parameter by its own size (at least 1) changes the
 * residuals by at most JF_STEP_NEGLIGIBLE times their norm: ‖J_k‖ max(|x_k|, 1) ≤ ν ‖r‖
 * (‖r‖ = √(2F)), so that at first order the cost changes by at most 2νF. With ν = ε that is
 * below the rounding of the cost: numerically the parameter has no influence there, like a
 * zero column (a Gaussian peak far off the data, columns ~1e-22). Column-norm scaling gives
 * such a parameter a scale D_k as small, so the trust region lets it move by 10²⁰ at a radius
 * that is tiny for the others; the model's curvature there is not in JᵀJ, the steps fail or
 * a bound clips them, and the radius shrank until XTOL stopped the run with the other
 * parameters far from their optimum. colnorm2 is (JᵀJ)_kk. */
#define JF_STEP_NEGLIGIBLE JF_STEP_EPS
JF_HD int jf_step_negligible(double colnorm2, double x, double F) {
    double ax = x < 0 ? -x : x;
    if (ax < 1.0) ax = 1.0;
    return !(sqrt(colnorm2) * ax > JF_STEP_NEGLIGIBLE * sqrt(2.0 * F));
}

/* ‖D x‖ over the parameters not held as negligible (held[k], jf_step_restart; NULL: all): the
 * size of the point for the radius and the XTOL test. A held parameter's D x is as negligible
 * as its column but would be all of ‖D x‖ beside others at 0 (an offset starting at 0): the
 * restart's radius was then ~1e-20 and every step rounded to no change. */
JF_HD double jf_step_xnorm(const double *D, const double *x, const int *held, size_t p) {
    return jf_step_norm_skip(D, x, held, p);
}

/* MINPACK mode 1 scaling: D_k = max over iterations of the Jacobian column norm √(JᵀJ)_kk; a
 * zero column gets 1 so the damping term stays positive. Taking the maximum makes D monotone,
 * which Moré's convergence proof needs. diag holds (JᵀJ)_kk. */
JF_HD void jf_step_update_scale(double *D, const double *diag, int first, size_t p) {
    for (size_t k = 0; k < p; k++) {
        double c = diag[k] > 0 ? sqrt(diag[k]) : 0.0;
        if (first) D[k] = c > 0 ? c : 1.0;
        else if (c > D[k]) D[k] = c;
    }
}

/* The scale update after an accepted step at x, and the radius with it. D_k only grows; when
 * an update multiplies ‖D x‖ by more than JF_STEP_RESCALE (the Jacobian changed regime: a
 * robust loss's residuals leaving the region where its scaling is clipped to √ε, or an
 * exponential far from its start), the radius, which is measured in D's units, is multiplied
 * by the same factor. Otherwise the rescaling alone shrinks the trust region in parameter
 * space by that factor and the next steps pass the XTOL test far from any minimum (a huber
 * fit whose start had every residual beyond f_scale stopped there). MINPACK does not do this;
 * below the threshold nothing differs from it. */
#define JF_STEP_RESCALE 2.0
JF_HD void jf_step_rescale(double *D, const double *diag, const double *x, size_t p,
                           jf_step_tr *tr) {
    double before = jf_step_scaled_norm(D, x, p);
    jf_step_update_scale(D, diag, 0, p);
    double after = jf_step_scaled_norm(D, x, p);
    if (before > 0 && after > JF_STEP_RESCALE * before) tr->delta *= after / before;
}

/* A scale D_k above JF_STEP_STALE times the column norm √(JᵀJ)_kk at the current point is
 * stale: the monotone maximum still remembers a far bigger column (an exponential at its start:
 * a*exp(b*x) from b = 1 on x up to 50, where one step takes a to 10⁻¹⁷ and b's column from
 * 10²³ to 10⁴). The radius and the XTOL test are measured in D's units, so such a parameter can
 * hardly move and every step looks negligible. */
#define JF_STEP_STALE 1e3
/* Fresh starts allowed per run (jf_step_restart). */
#define JF_STEP_RESTARTS 8
JF_HD int jf_step_stale(const double *D, const double *diag, size_t p) {
    for (size_t k = 0; k < p; k++)
        if (diag[k] > 0 && D[k] > JF_STEP_STALE * sqrt(diag[k])) return 1;
    return 0;
}

/* The starting radius factor·‖D x0‖ (factor itself when x0 = 0, as MINPACK). */
JF_HD void jf_step_tr_init(jf_step_tr *tr, double xnorm) {
    tr->delta = xnorm > 0 ? JF_STEP_FACTOR * xnorm : JF_STEP_FACTOR;
    tr->lambda = 0.0;
    tr->first = 1;
}

/* Where the convergence tests stopped a run (status FTOL, XTOL or STALLED) with a stale
 * scale at the current point x, the run starts afresh there instead: D from the current
 * columns, the initial radius, λ = 0 (JF_STEP_CONTINUE is returned; restarts counts them, at
 * most JF_STEP_RESTARTS). A true minimum stops again within a step or two; a false stop gets
 * a trust region in the right units. A restart needs an accepted step since the last one (D
 * only grows between them, and D fresh at x is not stale), so the run still ends. Only at a
 * stop: restarting at every stale accepted point also threw fits onto plateaus (a Gaussian
 * peak whose columns shrink as it slides off the data).
 *
 * A stop with a fresh scale restarts too when the set of parameters with negligible columns
 * at x (jf_step_negligible; F the cost there) differs from held[], the set the run holds: held
 * becomes that set, and the run goes on with the others (the driver's active set leaves the
 * held out, jf_step_xnorm too). Column scaling gives such a parameter a D as small as its
 * column, so a radius that is small for the others lets it move by 10²⁰: a Gaussian peak far
 * off the data (columns ~1e-22) stepped onto the data, or a bound clipped the step there, every
 * trial failed, and the radius shrank until XTOL stopped the run with the offset still far
 * from its optimum (scipy's finite differences round such columns to 0). Before any stop those
 * huge steps are left alone: they are also how a fit leaves a plateau (holding them from the
 * start cost the randomized comparison more cases than it fixed). Not when every parameter
 * with influence is negligible: a plateau, nothing to go on with; nor when held already is
 * that set: the stop stands. */
JF_HD int jf_step_restart(int status, double *D, const double *diag, const double *x, double F,
                          size_t p, jf_step_tr *tr, int *restarts, int *held) {
    if (status != JF_STEP_FTOL && status != JF_STEP_XTOL && status != JF_STEP_FTOL_XTOL &&
        status != JF_STEP_STALLED)
        return status;
    if (*restarts >= JF_STEP_RESTARTS) return status;
    if (!jf_step_stale(D, diag, p)) {
        int changed = 0, live = 0;
        for (size_t k = 0; k < p; k++) {
            int neg = diag[k] > 0 && jf_step_negligible(diag[k], x[k], F);
            changed |= neg != held[k];
            live += diag[k] > 0 && !neg;
        }
        if (!changed || live == 0) return status;
        for (size_t k = 0; k < p; k++)
            held[k] = diag[k] > 0 && jf_step_negligible(diag[k], x[k], F);
    }
    jf_step_update_scale(D, diag, 1, p);
    jf_step_tr_init(tr, jf_step_xnorm(D, x, held, p));
    (*restarts)++;
    return JF_STEP_CONTINUE;
}

/* A parameter moves freely unless it sits on a bound and the cost decreases by leaving the box
 * there (g is the cost gradient Jᵀr: the descent direction is -g). Such a parameter is held
 * fixed for this step: this is the active set of the projected method. */
JF_HD int jf_step_is_free(double x, double lo, double hi, double g) {
    if (x <= lo && g > 0) return 0;
    if (x >= hi && g < 0) return 0;
    return 1;
}

/* The binding part of the active set, decided by the step itself: a free parameter sits on a
 * bound with the descent direction pointing into the box (jf_step_is_free), yet the step s of
 * the coupled system moves it out (a correlated parameter pulls it along). Clipping then leaves
 * it where it is while the others take a step computed for its move: a projected step that
 * the model often predicts no gain for, rejected unevaluated in all but name (ρ = 0), again at
 * each smaller radius while the coupling keeps the sign, until a test stopped the run short
 * of the minimum. Such parameters are held (free_[k] = 0) and the driver recomputes the step
 * without them: the trust-region step on that face, a descent step for the model. Returns how
 * many were newly held (0: the step stands). It cannot hold every free parameter: a lone free
 * parameter's step is -g_k/(A_kk + λD_k²), into the box. The holds last for the proposals at
 * the current point; the driver resets the active set after a rejected step, so that a
 * smaller step (larger λ, closer to -D⁻²g, into the box) can release them. */
JF_HD int jf_step_bind(int *free_, const double *x, const double *lo, const double *hi,
                       const double *s, size_t p) {
    int held = 0;
    for (size_t k = 0; k < p; k++)
        if (free_[k] && ((x[k] <= lo[k] && s[k] < 0) || (x[k] >= hi[k] && s[k] > 0))) {
            free_[k] = 0;
            held++;
        }
    return held;
}

/* Projection of a trial value onto [lo, hi]: results always stay inside the bounds. */
JF_HD double jf_step_clip(double v, double lo, double hi) {
    if (v < lo) return lo;
    if (v > hi) return hi;
    return v;
}

/* The scaled gradient measure tested against gtol: max over free k of |g_k| / (‖J_k‖ ‖r‖),
 * the cosine between the residual and a Jacobian column (MINPACK's gnorm; scipy's gtol for
 * method 'lm'). colnorm2 is (JᵀJ)_kk; free may be NULL (all free); cost = ½‖r‖². */
JF_HD double jf_step_gnorm(const double *g, const double *colnorm2, const int *free_, double cost,
                           size_t p) {
    double fnorm = sqrt(2.0 * cost), gn = 0.0;
    if (!(fnorm > 0)) return 0.0;
    for (size_t k = 0; k < p; k++) {
        if ((free_ && !free_[k]) || !(colnorm2[k] > 0)) continue;
        double c = g[k] / (sqrt(colnorm2[k]) * fnorm);
        c = c < 0 ? -c : c;
        if (c > gn) gn = c;
    }
    return gn;
}

/* The part of the gradient that a Gauss-Newton step s of a singular system leaves unexplained,
 * ‖D⁻¹(g + M s)‖ / ‖D⁻¹ g‖ (M the m×m system, row-major). The pseudo-inverse drops directions
 * of numerically zero curvature. For plain least squares g lies in M's range and this is
 * roundoff. A robust loss far beyond f_scale clips the curvature of most residuals to ~ε
 * (scipy's rule), which the normal equations square into the dropped directions while the
 * gradient there stays large. The model then falls linearly along them, so the truncated step,
 * however short, is not its minimizer: above JF_STEP_GN_UNEXPLAINED the λ search runs to the
 * region's boundary, as scipy's trf does for a rank-deficient J. Without this a nearly-L1 huber
 * fit stopped on FTOL with the optimality still 3e-3. work: m doubles of scratch. */
#define JF_STEP_GN_UNEXPLAINED 1e-2
JF_HD double jf_step_gn_unexplained(const double *M, const double *g, const double *s,
                                    const double *D, size_t m, double *work) {
    for (size_t a = 0; a < m; a++) work[a] = g[a] / D[a];
    double gn = jf_step_scaled_norm((const double *)0, work, m);
    if (!(gn > 0)) return 0.0;
    for (size_t a = 0; a < m; a++) {
        double t = g[a];
        for (size_t b = 0; b < m; b++) t += M[a * m + b] * s[b];
        work[a] = t / D[a];
    }
    return jf_step_scaled_norm((const double *)0, work, m) / gn;
}

/* Starts a λ search once the Gauss-Newton step (‖D s_GN‖ = dxnorm, Δ + fp0 with fp0 > σΔ) is
 * too long. parl is MINPACK's Newton lower bound from the Gauss-Newton step (0 when JᵀJ is
 * singular), gnorm = ‖D⁻¹ g‖. Returns the first λ to try: the previous one clamped to
 * [parl, paru], or gnorm/dxnorm when that is 0. */
JF_HD double jf_step_lmpar_start(jf_step_lmpar *s, double lambda_prev, double parl, double gnorm,
                                 double delta, double dxnorm, double fp0) {
    s->parl = parl;
    s->paru = gnorm / delta;
    if (s->paru == 0.0) s->paru = JF_STEP_DWARF / jf_step_min(delta, 0.1);
    s->fp_prev = fp0;
    s->iter = 0;
    double lam = jf_step_min(jf_step_max(lambda_prev, s->parl), s->paru);
    if (lam == 0.0) lam = dxnorm > 0 ? gnorm / dxnorm : s->paru;
    if (lam == 0.0) lam = jf_step_max(JF_STEP_DWARF, 0.001 * s->paru);
    return lam;
}

/* After solving with λ (‖D s(λ)‖ - Δ = fp): 1 when s(λ) is good enough. MINPACK stops when the
 * length is within σΔ, when λ is at a zero lower bound and the step got no longer than it
 * already was while inside the region, or after JF_STEP_LMPAR_MAXIT trials. */
JF_HD int jf_step_lmpar_done(jf_step_lmpar *s, double fp, double delta) {
    double prev = s->fp_prev;
    s->iter++;
    if (fabs(fp) <= JF_STEP_LMPAR_SIGMA * delta) return 1;
    if (s->parl == 0.0 && fp <= prev && prev < 0.0) return 1;
    if (s->iter >= JF_STEP_LMPAR_MAXIT) return 1;
    return 0;
}

/* The next λ: a Newton step on 1/‖D s(λ)‖ (Hebden, Moré), safeguarded by [parl, paru].
 * qnorm2 = wᵀ (JᵀJ + λD²)⁻¹ w with w = D² s / ‖D s‖, i.e. ‖L⁻¹ w‖² for the Cholesky factor. */
JF_HD double jf_step_lmpar_next(jf_step_lmpar *s, double lam, double fp, double delta,
                                double qnorm2) {
    double parc = qnorm2 > 0 ? fp / delta / qnorm2 : 0.0;
    if (fp > 0) s->parl = jf_step_max(s->parl, lam);
    if (fp < 0) s->paru = jf_step_min(s->paru, lam);
    s->fp_prev = fp;
    lam = jf_step_max(s->parl, lam + parc);
    if (lam == 0.0) lam = jf_step_max(JF_STEP_DWARF, 0.001 * s->paru);
    return lam;
}

/* Predicted relative reduction and relative directional derivative of a step s.
 * For an unprojected LM step ((JᵀJ + λD²) s = -g) MINPACK's cancellation-free forms are used:
 *   prered = (½ sᵀJᵀJs + λ‖Ds‖²)/F,  dirder = -(½ sᵀJᵀJs + ½ λ‖Ds‖²)/F;
 * for a step changed by projection onto the bounds the model's own values:
 *   prered = -(gᵀs + ½ sᵀJᵀJs)/F,    dirder = gᵀs / F.
 * sAs = sᵀJᵀJs, lds2 = λ‖Ds‖², gs = gᵀs. */
JF_HD void jf_step_predicted(double F, double sAs, double lds2, double gs, int projected,
                             double *prered, double *dirder) {
    if (!(F > 0)) {
        *prered = 0.0;
        *dirder = 0.0;
        return;
    }
    if (!projected) {
        *prered = (0.5 * sAs + lds2) / F;
        *dirder = -(0.5 * sAs + 0.5 * lds2) / F;
    } else {
        *prered = -(gs + 0.5 * sAs) / F;
        *dirder = gs / F;
    }
}

/* Actual relative reduction 1 - F_new/F; -1 when the cost grew more than 100-fold (MINPACK's
 * guard against overflow in the ratio) or the trial point is not finite. */
JF_HD double jf_step_actred(double F, double Fnew, int finite) {
    if (!finite || !jf_step_isfinite(Fnew)) return -1.0;
    if (!(F > 0)) return Fnew > 0 ? -1.0 : 0.0;
    if (Fnew >= 100.0 * F) return -1.0;
    return 1.0 - Fnew / F;
}

/* The gain ratio ρ = actual / predicted reduction; 0 when the model predicts no reduction
 * (possible only for a projected step that is not a descent direction): such a step must be
 * rejected whatever the cost did. */
JF_HD double jf_step_ratio(double actred, double prered) {
    return prered > 0.0 ? actred / prered : 0.0;
}

/* Whether the trial point replaces the current one. */
JF_HD int jf_step_accepted(double ratio) { return ratio >= JF_STEP_ACCEPT; }

/* Moré's radius update after a trial step of scaled length pnorm. A poor step (ρ ≤ ¼) shrinks
 * the radius by a factor in [0.1, 0.5] chosen by quadratic interpolation along the step (0.1
 * for a non-finite trial point); a good one (ρ ≥ ¾, or a pure Gauss-Newton step) doubles it
 * relative to the step. λ follows inversely so the next search starts near the answer. */
JF_HD void jf_step_update_radius(jf_step_tr *tr, double ratio, double actred, double dirder,
                                 double pnorm, int finite) {
    if (ratio <= 0.25) {
        double temp;
        if (!finite) temp = 0.1;
        else {
            temp = actred >= 0 ? 0.5 : 0.5 * dirder / (dirder + 0.5 * actred);
            /* 0.1 once the cost at least doubled (actred ≤ -1); MINPACK interpolates up to a
             * 100-fold growth. Its rule, measured: the NIST runs took 1052 evaluations in all
             * instead of 1038, with the same digits (docs/SOLVER.md) */
            if (actred <= -1.0 || !(temp >= 0.1)) temp = 0.1;
            if (temp > 0.5) temp = 0.5; /* only a projected ascent step gets here */
        }
        tr->delta = temp * jf_step_min(tr->delta, pnorm / 0.1);
        tr->lambda = tr->lambda / temp;
    } else if (tr->lambda == 0.0 || ratio >= 0.75) {
        tr->delta = pnorm / 0.5;
        tr->lambda = 0.5 * tr->lambda;
    }
}

/* The first step cuts the initial radius to its own length (MINPACK). */
JF_HD void jf_step_first(jf_step_tr *tr, double pnorm) {
    if (tr->first) {
        tr->delta = jf_step_min(tr->delta, pnorm);
        tr->first = 0;
    }
}

/* Convergence tests after a trial step (accepted or not), MINPACK's order:
 *   FTOL  |actred| ≤ ftol, prered ≤ ftol and ρ ≤ 2 (the model is trustworthy and predicts
 *         nothing more to gain);
 *   XTOL  ‖D s‖ ≤ xtol ‖D x‖, relative as MINPACK's Δ ≤ xtol ‖D x‖. Not scipy's
 *         ‖s‖ ≤ xtol (xtol + ‖x‖): its absolute term xtol² is in the parameters' units, while
 *         D s and D x are in the residuals' (D is the column norms). Added to ‖D x‖, it let
 *         every step pass where the columns are small: data of order 10⁻¹⁵⁰ stopped on XTOL at
 *         the first step, and a logistic whose columns had fallen to ~10⁻³⁵ at a step that
 *         moved it by O(10), both reporting success with the gradient cosine still 0.3–0.9;
 *   STALLED when the same tests hold at machine precision, or the radius fell below ε‖D x‖:
 *         no representable step can reduce the cost any more.
 * xnorm is ‖D x‖ at the point the step started from. */
JF_HD int jf_step_test(double ftol, double xtol, double actred, double prered, double ratio,
                       double pnorm, double xnorm, double delta) {
    int st = JF_STEP_CONTINUE;
    if (fabs(actred) <= ftol && prered <= ftol && 0.5 * ratio <= 1.0) st |= JF_STEP_FTOL;
    if (pnorm <= xtol * xnorm) st |= JF_STEP_XTOL;
    if (st) return st;
    if (fabs(actred) <= JF_STEP_EPS && prered <= JF_STEP_EPS && 0.5 * ratio <= 1.0)
        return JF_STEP_STALLED;
    if (delta <= JF_STEP_EPS * xnorm) return JF_STEP_STALLED;
    return JF_STEP_CONTINUE;
}

/* The gradient test at a new point (gnorm from jf_step_gnorm). */
JF_HD int jf_step_gtol_test(double gnorm, double gtol) {
    return gnorm <= gtol ? JF_STEP_GTOL : JF_STEP_CONTINUE;
}

#endif
