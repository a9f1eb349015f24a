/* The CPU driver of the Levenberg-Marquardt trust-region solver, and the final polish.
 *
 * Each trial point costs one pass over the data: the normal-equation kernel returns JᵀJ, Jᵀr
 * and the cost together (threads.c). Everything else works on p×p quantities:
 *   1. at an accepted point: update the scaling D, the active set of the bounds and the gradient
 *      test (step.h);
 *   2. find the step: the Gauss-Newton step if it fits the trust region, else the λ > 0 with
 *      ‖D s(λ)‖ ≈ Δ by MINPACK's safeguarded Newton iteration, each λ one factorization of the
 *      reduced p×p system (linalg.c);
 *   3. clip the trial point into the bounds, evaluate it, compare actual and predicted
 *      reductions, update Δ and λ, accept or reject, run the convergence tests (step.h).
 * A non-finite cost or JᵀJ at a trial point is a rejected step with the strongest shrink, so a
 * model with a restricted domain (log(b*x) with b stepping negative) simply backs off.
 *
 * Polish: the normal equations square J's condition number, and the stopping tests end the
 * iteration as soon as the cost stalls relative to ftol; on large-residual problems (MGH09,
 * Thurber) Gauss-Newton converges only linearly, so the parameters can then be 10⁻⁴ away from
 * the minimizer while the cost agrees to 10⁻⁸. When the loss is linear and n·p is at most
 * JF_LM_MATERIALIZE_MAX, converged runs continue with Gauss-Newton steps solved on J itself by
 * a column-scaled least-squares solve (no squaring), accepted while the cost does not rise above
 * its rounding level and the steps keep contracting. Up to JF_LSQ_MAX parameters each step's
 * pass folds blocks of [J | −r] into their QR triangle as the kernel produces them
 * (threads.c, jf_problem_triangle) and lsq_core.h's routines solve on it, so J is never stored;
 * above, J is materialized and LAPACK's dgelsy solves. This is what takes every NIST StRD
 * problem to 10+ correct digits (docs/ACCURACY.md). The polish starts from the triangle at the
 * last point, and a trial point that the convergence tests are about to end on (its predicted
 * reduction within ftol, or its step within xtol, known before the pass) is evaluated by the
 * triangle pass instead of the normal-equation kernel: JᵀJ = RᵀR and Jᵀr come from it as well,
 * and the polish does not evaluate that point a second time.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lsq_core.h"
#include "polish_core.h"
#include "solver.h"
#include "step.h"

_Static_assert(JF_STEP_FTOL == JF_FIT_FTOL && JF_STEP_XTOL == JF_FIT_XTOL &&
                   JF_STEP_FTOL_XTOL == JF_FIT_FTOL_XTOL && JF_STEP_GTOL == JF_FIT_GTOL &&
                   JF_STEP_MAX_NFEV == JF_FIT_MAX_NFEV && JF_STEP_STALLED == JF_FIT_STALLED,
               "step.h status codes must equal jf_fit_status");

/* Working storage of one run. */
typedef struct lm_work {
    size_t np;       /* parameters */
    double *acc;     /* kernel accumulator at the current point */
    double *acc_try; /* ... at the trial point */
    double *A;       /* np×np JᵀJ at the current point, full storage */
    double *g;       /* gradient Jᵀr at the current point */
    double *diag;    /* (JᵀJ)_kk */
    double *D;       /* scaling */
    double *s;       /* step from the λ search (zeros for fixed parameters) */
    double *s_act;   /* step actually taken after clipping */
    double *x_try;   /* trial point */
    int *free_;      /* 1: the parameter moves in this step */
    int *held;       /* 1: held for a negligible column (step.h jf_step_restart) */
    size_t *idx;     /* indices of the free parameters */
    double *M0;      /* reduced JᵀJ */
    double *M;       /* reduced JᵀJ + λD² */
    double *gF;      /* reduced gradient */
    double *DF;      /* reduced scaling */
    double *sF;      /* reduced step */
    double *wF;      /* D²s/‖Ds‖ of the λ search */
    jf_linalg la;    /* factorization workspace */
    double F;        /* cost at the current point */
} lm_work;

static void work_free(lm_work *w) {
    free(w->acc);
    free(w->acc_try);
    free(w->A);
    free(w->g);
    free(w->diag);
    free(w->D);
    free(w->s);
    free(w->s_act);
    free(w->x_try);
    free(w->free_);
    free(w->held);
    free(w->idx);
    free(w->M0);
    free(w->M);
    free(w->gF);
    free(w->DF);
    free(w->sF);
    free(w->wF);
    jf_linalg_free(&w->la);
}

static int work_init(lm_work *w, size_t np, size_t nacc) {
    memset(w, 0, sizeof *w);
    w->np = np;
    w->acc = malloc(nacc * sizeof(double));
    w->acc_try = malloc(nacc * sizeof(double));
    w->A = malloc(np * np * sizeof(double));
    w->M0 = malloc(np * np * sizeof(double));
    w->M = malloc(np * np * sizeof(double));
    double **vecs[] = {&w->g, &w->diag, &w->D, &w->s, &w->s_act, &w->x_try,
                       &w->gF, &w->DF, &w->sF, &w->wF};
    int ok = w->acc && w->acc_try && w->A && w->M0 && w->M;
    for (size_t i = 0; i < sizeof vecs / sizeof vecs[0]; i++) {
        *vecs[i] = malloc(np * sizeof(double));
        ok = ok && *vecs[i];
    }
    w->free_ = malloc(np * sizeof(int));
    w->held = calloc(np, sizeof(int));
    w->idx = malloc(np * sizeof(size_t));
    ok = ok && w->free_ && w->held && w->idx;
    if (!ok || jf_linalg_init(&w->la, np) != JF_OK) {
        work_free(w);
        return JF_ERR_NOMEM;
    }
    return JF_OK;
}

/* Unpacks the kernel's accumulator (row-major packed upper triangle, Jᵀr, Σ cost terms). */
static void unpack(lm_work *w, const double *acc) {
    size_t np = w->np, t = 0;
    for (size_t i = 0; i < np; i++)
        for (size_t j = i; j < np; j++) {
            w->A[i * np + j] = w->A[j * np + i] = acc[t++];
        }
    for (size_t k = 0; k < np; k++) {
        w->g[k] = acc[t + k];
        w->diag[k] = w->A[k * np + k];
    }
    w->F = 0.5 * acc[t + np];
}

/* The active set at x: a parameter is fixed when it is held by a bound (step.h), has a zero
 * Jacobian column (it cannot move the cost; keeping it out keeps the system nonsingular) or is
 * held for a negligible one (w->held, step.h jf_step_restart). */
static void active_set(lm_work *w, const double *x, const double *lo, const double *hi) {
    for (size_t k = 0; k < w->np; k++)
        w->free_[k] = w->diag[k] > 0 && !w->held[k] && jf_step_is_free(x[k], lo[k], hi[k], w->g[k]);
}

/* Solves (M0 + λ diag(DF²)) sF = -gF for the current reduced system. */
static int solve_damped(lm_work *w, size_t m, double lam) {
    memcpy(w->M, w->M0, m * m * sizeof(double));
    for (size_t a = 0; a < m; a++) w->M[a * m + a] += lam * w->DF[a] * w->DF[a];
    if (jf_linalg_factor(&w->la, w->M, m) < 0) return -1;
    jf_linalg_solve(&w->la, w->gF, w->sF);
    for (size_t a = 0; a < m; a++) w->sF[a] = -w->sF[a];
    return 0;
}

/* The trust-region step (MINPACK lmpar on the reduced normal equations). Writes w->s and
 * returns λ (0 for the Gauss-Newton step); -1 when the system cannot be factorized. */
static double tr_step(lm_work *w, double delta, double lambda_prev) {
    size_t np = w->np, m = 0;
    for (size_t k = 0; k < np; k++)
        if (w->free_[k]) w->idx[m++] = k;
    memset(w->s, 0, np * sizeof(double));
    if (m == 0) return 0.0;
    for (size_t a = 0; a < m; a++) {
        for (size_t b = 0; b < m; b++) w->M0[a * m + b] = w->A[w->idx[a] * np + w->idx[b]];
        w->gF[a] = w->g[w->idx[a]];
        w->DF[a] = w->D[w->idx[a]];
    }
    int mode = jf_linalg_factor(&w->la, w->M0, m);
    if (mode < 0) return -1.0;
    jf_linalg_solve(&w->la, w->gF, w->sF);
    for (size_t a = 0; a < m; a++) w->sF[a] = -w->sF[a];
    double dxnorm = jf_step_scaled_norm(w->DF, w->sF, m);
    double fp = dxnorm - delta;
    double lam = 0.0;
    int unbounded = mode == 0 && jf_step_gn_unexplained(w->M0, w->gF, w->sF, w->DF, m, w->wF) >
                                     JF_STEP_GN_UNEXPLAINED;
    if (fp > JF_STEP_LMPAR_SIGMA * delta || unbounded) {
        double parl = 0.0;
        if (mode == 1) { /* Newton's lower bound needs a nonsingular Gauss-Newton system */
            for (size_t a = 0; a < m; a++) w->wF[a] = w->DF[a] * w->DF[a] * w->sF[a] / dxnorm;
            double q = jf_linalg_quad(&w->la, w->wF);
            parl = q > 0 ? fp / delta / q : 0.0;
        }
        double gnorm = 0;
        for (size_t a = 0; a < m; a++) w->wF[a] = w->gF[a] / w->DF[a];
        gnorm = jf_step_scaled_norm(NULL, w->wF, m);
        jf_step_lmpar ls;
        /* an unbounded model's step lengthens without limit as λ → 0: the search must not
         * stop early for a region it cannot fill (fp ≤ 0 would say so) */
        lam = jf_step_lmpar_start(&ls, lambda_prev, parl, gnorm, delta, dxnorm,
                                  unbounded && !(fp > 0) ? delta : fp);
        for (;;) {
            if (solve_damped(w, m, lam) < 0) return -1.0;
            dxnorm = jf_step_scaled_norm(w->DF, w->sF, m);
            fp = dxnorm - delta;
            if (jf_step_lmpar_done(&ls, fp, delta)) break;
            for (size_t a = 0; a < m; a++) w->wF[a] = w->DF[a] * w->DF[a] * w->sF[a] / dxnorm;
            double q = jf_linalg_quad(&w->la, w->wF);
            lam = jf_step_lmpar_next(&ls, lam, fp, delta, q);
        }
    }
    for (size_t a = 0; a < m; a++) w->s[w->idx[a]] = w->sF[a];
    return lam;
}

static void report(const jf_lm_config *cfg, size_t iteration, size_t nfev, double cost,
                   double step_norm, double damping, double ratio, double optimality,
                   int accepted) {
    if (!cfg->progress) return;
    jf_iteration_info info;
    info.iteration = iteration;
    info.nfev = nfev;
    info.cost = cost;
    info.step_norm = step_norm;
    info.damping = damping;
    info.gain_ratio = ratio;
    info.optimality = optimality;
    info.accepted = accepted;
    cfg->progress(cfg->progress_ctx, &info);
}

/* Gradient, JᵀJ, cost and optimality from a materialized J (row-major n×np) and r. */
static void from_jacobian(lm_work *w, const double *J, const double *r, size_t n, const double *x,
                          const jf_lm_config *cfg, jf_lm_state *st) {
    size_t np = w->np;
    double ssr = 0;
    { /* restrict: A and g do not alias J or r, so the sums stay out of memory round trips and
       * the inner loop vectorizes over b; every entry still adds its terms in point order.
       * Their block ends here, as the sums are read through w below. */
        double *restrict A = w->A, *restrict g = w->g;
        const double *restrict Jr = J, *restrict rr = r;
        memset(A, 0, np * np * sizeof(double));
        memset(g, 0, np * sizeof(double));
        for (size_t i = 0; i < n; i++) {
            const double *restrict row = Jr + i * np;
            double ri = rr[i];
            for (size_t a = 0; a < np; a++) {
                double ra = row[a];
                g[a] += ra * ri;
                double *restrict Aa = A + a * np;
                for (size_t b = a; b < np; b++) Aa[b] += ra * row[b];
            }
            ssr += ri * ri;
        }
    }
    for (size_t a = 0; a < np; a++) {
        for (size_t b = 0; b < a; b++) w->A[a * np + b] = w->A[b * np + a];
        w->diag[a] = w->A[a * np + a];
    }
    w->F = 0.5 * ssr;
    active_set(w, x, cfg->lo, cfg->hi);
    st->cost = w->F;
    st->optimality = jf_step_gnorm(w->g, w->diag, w->free_, w->F, np);
}

/* Σ jf_pol_noise_term over the points with residuals r: the cost's rounding level, unscaled. */
static double noise_sum(const jf_problem *prob, const double *r) {
    const double *y = prob->view.y, *wt = prob->view.w;
    double s = 0;
    for (size_t i = 0; i < prob->n; i++)
        s += jf_pol_noise_term(r[i], y ? (wt ? wt[i] : 1.0) * y[i] : 0.0, prob->round_rel);
    return s;
}

static double half_ssr(const double *r, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += r[i] * r[i];
    return 0.5 * s;
}

/* Σ_i J[i, k]² of the n×np row-major J. Four sums of every fourth point, added in a fixed
 * order: deterministic, and not one chain of n dependent additions (a third of the polish's
 * own time at 1e4 points, by perf). A pass over the rows updating np sums in memory was no
 * better: each entry waited on the store of the previous row's sum. */
static double column_norm2(const double *J, size_t n, size_t np, size_t k) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    const double *c = J + k;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        double a0 = c[i * np], a1 = c[(i + 1) * np], a2 = c[(i + 2) * np], a3 = c[(i + 3) * np];
        s0 += a0 * a0;
        s1 += a1 * a1;
        s2 += a2 * a2;
        s3 += a3 * a3;
    }
    for (; i < n; i++) s0 += c[i * np] * c[i * np];
    return (s0 + s1) + (s2 + s3);
}

/* The normal-equation kernel's accumulator (packed upper triangle of JᵀJ, Jᵀr, Σr²) from a
 * triangle pass: JᵀJ = RᵀR and Jᵀr = −Rᵀ(Qᵀ(−r)), without another pass over the data. */
static void pack_triangle(const jf_tri *t, size_t np, double *acc) {
    const double *R = t->R;
    size_t k = 0;
    for (size_t a = 0; a < np; a++)
        for (size_t b = a; b < np; b++) {
            double v = 0;
            for (size_t i = 0; i <= a; i++) v += R[i * np + a] * R[i * np + b];
            acc[k++] = v;
        }
    for (size_t a = 0; a < np; a++) {
        double v = 0;
        for (size_t i = 0; i <= a; i++) v += R[i * np + a] * t->qb[i];
        acc[k++] = -v;
    }
    acc[k] = t->ssr;
}

/* Gradient, JᵀJ, cost and optimality from the polish pass's triangle. */
static void from_triangle(lm_work *w, const jf_tri *t, const double *x, const jf_lm_config *cfg,
                          jf_lm_state *st) {
    size_t np = w->np;
    double acc[JF_LSQ_MAX * (JF_LSQ_MAX + 1) / 2 + JF_LSQ_MAX + 1];
    pack_triangle(t, np, acc);
    unpack(w, acc);
    active_set(w, x, cfg->lo, cfg->hi);
    st->cost = w->F;
    st->optimality = jf_step_gnorm(w->g, w->diag, w->free_, w->F, np);
}

/* Gauss-Newton steps for np <= JF_LSQ_MAX, each step from one triangle pass (J never stored):
 * the scaling D from R's column norms (J's), the step by lsq_core.h's solve on the free
 * columns. Leaves the triangle at the final point in st (st->R, st->ssr) for the covariance.
 * Parameters on a bound stay there; a step that would leave the box ends the polish. */
static int polish_triangle(jf_problem *prob, const jf_lm_config *cfg, double *x, jf_lm_state *st,
                           lm_work *w, int run_steps, const jf_tri *at_x) {
    size_t n = prob->n, np = prob->np;
    double W[JF_LSQ_MAX * JF_LSQ_MAX], V[JF_LSQ_MAX * JF_LSQ_MAX], sv[JF_LSQ_MAX], c[JF_LSQ_MAX];
    int cols[JF_LSQ_MAX];
    jf_tri *cur = malloc(sizeof *cur), *trial = malloc(sizeof *trial);
    if (!cur || !trial) goto nomem;
    if (at_x) memcpy(cur, at_x, sizeof *cur); /* the iteration's last pass made it */
    else if (jf_problem_triangle(prob, x, cur) != JF_OK) goto nomem;
    if (!cur->finite) {
        /* Cannot happen after a finite normal-equation pass unless the kernels disagree; keep
         * the normal-equation results. */
        free(cur);
        free(trial);
        return JF_OK;
    }
    jf_pol P;
    jf_pol_begin(&P, np, cfg->max_nfev, st->nfev, 0.5 * cur->ssr, cur->noise);
    while (run_steps && jf_pol_more(&P)) {
        size_t m = 0;
        for (size_t k = 0; k < np; k++) {
            w->D[k] = jf_lsq_col_norm(cur->R, np, k);
            if (w->D[k] > 0 && !w->held[k] && x[k] > cfg->lo[k] && x[k] < cfg->hi[k])
                cols[m++] = (int)k;
        }
        if (m == 0) break;
        jf_lsq_solve(cur->R, cur->qb, np, n, cols, m, W, V, sv, c, w->sF);
        memset(w->s, 0, np * sizeof(double));
        for (size_t a = 0; a < m; a++) w->s[cols[a]] = w->sF[a];
        if (!jf_pol_propose(&P, w->D, x, w->s, cfg->lo, cfg->hi, w->x_try)) break;
        if (jf_problem_triangle(prob, w->x_try, trial) != JF_OK) goto nomem;
        int kept = jf_pol_judge(&P, trial->finite, trial->finite ? 0.5 * trial->ssr : 0.0,
                                trial->finite ? trial->noise : 0.0);
        if (!kept) break;
        jf_tri *t = cur;
        cur = trial;
        trial = t;
        memcpy(x, w->x_try, np * sizeof(double));
        if (kept == 2) break;
    }
    st->nfev = P.nfev;
    st->polish = (size_t)P.steps;
    st->R = malloc(np * np * sizeof *st->R);
    if (!st->R) goto nomem;
    memcpy(st->R, cur->R, np * np * sizeof *st->R);
    st->ssr = cur->ssr;
    from_triangle(w, cur, x, cfg, st);
    free(cur);
    free(trial);
    return JF_OK;
nomem:
    free(cur);
    free(trial);
    return JF_ERR_NOMEM;
}

/* Gauss-Newton steps on the materialized Jacobian for np > JF_LSQ_MAX (see the file comment),
 * each solved by jf_linalg_lstsq. Leaves J and r at the final point in st. Parameters on a
 * bound stay there; a step that would leave the box ends the polish. */
static int polish_materialized(jf_problem *prob, const jf_lm_config *cfg, double *x,
                               jf_lm_state *st, lm_work *w, int run_steps) {
    size_t n = prob->n, np = prob->np;
    double *J = malloc(n * np * sizeof *J), *r = malloc(n * sizeof *r);
    double *J2 = NULL, *r2 = NULL, *W = NULL, *b = NULL;
    if (!J || !r) goto nomem;
    jf_problem_jacobian(prob, x, r, J);
    if (!jf_all_finite(r, n) || !jf_all_finite(J, n * np)) {
        /* as in polish_triangle */
        free(J);
        free(r);
        return JF_OK;
    }
    double F = half_ssr(r, n);
    if (run_steps) {
        J2 = malloc(n * np * sizeof *J2);
        r2 = malloc(n * sizeof *r2);
        W = malloc(n * np * sizeof *W); /* LAPACK's copy of the columns */
        b = malloc(n * sizeof *b);
        if (!J2 || !r2 || !W || !b) goto nomem;
    }
    jf_pol P;
    jf_pol_begin(&P, np, cfg->max_nfev, st->nfev, F, noise_sum(prob, r));
    while (run_steps && jf_pol_more(&P)) {
        size_t m = 0;
        for (size_t k = 0; k < np; k++) {
            double cn2 = column_norm2(J, n, np, k);
            w->D[k] = sqrt(cn2);
            if (cn2 > 0 && !w->held[k] && x[k] > cfg->lo[k] && x[k] < cfg->hi[k])
                w->idx[m++] = k;
        }
        if (m == 0) break;
        for (size_t a = 0; a < m; a++)
            for (size_t i = 0; i < n; i++) W[a * n + i] = J[i * np + w->idx[a]];
        for (size_t i = 0; i < n; i++) b[i] = -r[i];
        int ls = jf_linalg_lstsq(W, n, m, b, w->sF);
        if (ls != JF_OK) {
            if (ls == JF_ERR_NOMEM) goto nomem;
            break;
        }
        memset(w->s, 0, np * sizeof(double));
        for (size_t a = 0; a < m; a++) w->s[w->idx[a]] = w->sF[a];
        if (!jf_pol_propose(&P, w->D, x, w->s, cfg->lo, cfg->hi, w->x_try)) break;
        jf_problem_jacobian(prob, w->x_try, r2, J2);
        int finite = jf_all_finite(r2, n) && jf_all_finite(J2, n * np);
        int kept = jf_pol_judge(&P, finite, finite ? half_ssr(r2, n) : 0.0,
                                finite ? noise_sum(prob, r2) : 0.0);
        if (!kept) break;
        double *t = J;
        J = J2;
        J2 = t;
        t = r;
        r = r2;
        r2 = t;
        memcpy(x, w->x_try, np * sizeof(double));
        if (kept == 2) break;
    }
    st->nfev = P.nfev;
    st->polish = (size_t)P.steps;
    free(r2);
    free(b);
    free(J2);
    free(W);
    st->J = J;
    st->r = r;
    from_jacobian(w, J, r, n, x, cfg, st);
    return JF_OK;
nomem:
    free(J);
    free(r);
    free(J2);
    free(r2);
    free(W);
    free(b);
    return JF_ERR_NOMEM;
}

/* Whether finish() will want the QR triangle at the final point (polish_triangle). */
static int wants_triangle(const jf_problem *prob) {
    return prob->loss == JF_LOSS_LINEAR && prob->n * prob->np <= JF_LM_MATERIALIZE_MAX &&
           prob->np <= JF_LSQ_MAX;
}

/* What every driver does after its iterations: the polish (linear loss, small n·np) and the
 * copies of JᵀJ and the gradient at the solution into st (st->A and st->g allocated). at_x:
 * the triangle pass at x when the iteration made one, else NULL. */
static int finish(jf_problem *prob, const jf_lm_config *cfg, double *x, jf_lm_state *st,
                  lm_work *w, const jf_tri *at_x) {
    size_t np = prob->np;
    int code = JF_OK;
    int converged = st->status >= JF_STEP_FTOL && st->status <= JF_STEP_GTOL;
    if (st->status != JF_FIT_NONFINITE && wants_triangle(prob))
        code = polish_triangle(prob, cfg, x, st, w, converged, at_x);
    else if (st->status != JF_FIT_NONFINITE && prob->loss == JF_LOSS_LINEAR &&
             prob->n * np <= JF_LM_MATERIALIZE_MAX)
        code = polish_materialized(prob, cfg, x, st, w, converged);
    memcpy(st->A, w->A, np * np * sizeof(double));
    memcpy(st->g, w->g, np * sizeof(double));
    if (code != JF_OK) jf_lm_state_free(st);
    return code;
}

int jf_lm_solve(jf_problem *prob, const jf_lm_config *cfg, double *x, jf_lm_state *st) {
    memset(st, 0, sizeof *st);
    size_t np = prob->np;
    lm_work w;
    if (work_init(&w, np, prob->nacc) != JF_OK) return JF_ERR_NOMEM;
    st->A = malloc(np * np * sizeof(double));
    st->g = malloc(np * sizeof(double));
    if (!st->A || !st->g) {
        work_free(&w);
        jf_lm_state_free(st);
        return JF_ERR_NOMEM;
    }

    jf_problem_normal_eq(prob, x, prob->loss, w.acc);
    st->nfev = 1;
    unpack(&w, w.acc);
    if (!jf_all_finite(w.acc, prob->nacc)) {
        st->status = JF_FIT_NONFINITE;
        st->cost = w.F;
        st->optimality = NAN;
        memcpy(st->A, w.A, np * np * sizeof(double));
        memcpy(st->g, w.g, np * sizeof(double));
        work_free(&w);
        return JF_OK;
    }
    /* the triangle pass of a trial point the tests are about to end on; without the memory the
     * iteration just keeps to the kernel */
    jf_tri *tri = wants_triangle(prob) ? malloc(sizeof *tri) : NULL;
    int tri_at_x = 0; /* tri holds the triangle at x */
    if (cfg->x_scale)
        for (size_t k = 0; k < np; k++) w.D[k] = 1.0 / cfg->x_scale[k];
    else
        jf_step_update_scale(w.D, w.diag, 1, np);
    jf_step_tr tr;
    jf_step_tr_init(&tr, jf_step_xnorm(w.D, x, w.held, np));
    active_set(&w, x, cfg->lo, cfg->hi);
    double gnorm = jf_step_gnorm(w.g, w.diag, w.free_, w.F, np);
    report(cfg, 0, st->nfev, w.F, 0.0, tr.lambda, NAN, gnorm, 0);

    int status = JF_STEP_CONTINUE, restarts = 0;
    while (status == JF_STEP_CONTINUE) {
        if (jf_step_gtol_test(gnorm, cfg->gtol)) {
            status = JF_STEP_GTOL;
            break;
        }
        if (st->nfev >= cfg->max_nfev) {
            status = JF_STEP_MAX_NFEV;
            break;
        }
        double lam;
        do lam = tr_step(&w, tr.delta, tr.lambda);
        while (lam >= 0 && jf_step_bind(w.free_, x, cfg->lo, cfg->hi, w.s, np));
        if (lam < 0) { /* JᵀJ at an accepted point is finite: LAPACK itself failed */
            status = JF_STEP_STALLED;
            break;
        }
        int projected = 0;
        for (size_t k = 0; k < np; k++) {
            w.x_try[k] = jf_step_clip(x[k] + w.s[k], cfg->lo[k], cfg->hi[k]);
            w.s_act[k] = w.x_try[k] - x[k];
            if (w.x_try[k] != x[k] + w.s[k]) projected = 1;
        }
        double pnorm = jf_step_scaled_norm(w.D, w.s_act, np);
        double xnorm = jf_step_xnorm(w.D, x, w.held, np);
        if (projected && pnorm == 0.0) {
            /* Every moving parameter ran into a bound at once: shrink without evaluating; a
             * short enough step points inward (it tends to -D⁻²g on the free set). */
            tr.lambda = lam;
            jf_step_update_radius(&tr, 0.0, -1.0, 0.0, jf_step_scaled_norm(w.D, w.s, np), 0);
            if (tr.delta <= JF_STEP_EPS * xnorm) status = JF_STEP_STALLED;
            active_set(&w, x, cfg->lo, cfg->hi); /* release jf_step_bind's holds */
            continue;
        }
        jf_step_first(&tr, pnorm);

        double sAs = 0, ds2 = 0, gs = 0;
        for (size_t a = 0; a < np; a++) {
            double t = 0;
            for (size_t b = 0; b < np; b++) t += w.A[a * np + b] * w.s_act[b];
            sAs += w.s_act[a] * t;
            ds2 += (w.D[a] * w.s_act[a]) * (w.D[a] * w.s_act[a]);
            gs += w.g[a] * w.s_act[a];
        }
        double prered, dirder;
        jf_step_predicted(w.F, sAs, lam * ds2, gs, projected, &prered, &dirder);
        /* jf_step_test's ftol and xtol conditions that do not need the pass: the point is
         * likely the last, whose triangle the polish needs */
        int want_tri = tri && (prered <= cfg->ftol || pnorm <= cfg->xtol * xnorm);
        int tri_pass = want_tri && jf_problem_triangle(prob, w.x_try, tri) == JF_OK;
        if (tri_pass) pack_triangle(tri, np, w.acc_try);
        else jf_problem_normal_eq(prob, w.x_try, prob->loss, w.acc_try);
        st->nfev++;
        st->iterations++;
        int finite = jf_all_finite(w.acc_try, prob->nacc) && (!tri_pass || tri->finite);
        double Fnew = 0.5 * w.acc_try[prob->nacc - 1];
        double actred = jf_step_actred(w.F, Fnew, finite);
        double ratio = finite ? jf_step_ratio(actred, prered) : 0.0;
        tr.lambda = lam;
        jf_step_update_radius(&tr, ratio, actred, dirder, pnorm, finite);
        int accepted = finite && jf_step_accepted(ratio);
        if (want_tri) tri_at_x = tri_pass && accepted; /* tri now holds the trial's, or nothing */
        else if (accepted) tri_at_x = 0;
        if (accepted) {
            memcpy(x, w.x_try, np * sizeof(double));
            double *t = w.acc;
            w.acc = w.acc_try;
            w.acc_try = t;
            unpack(&w, w.acc);
            if (!cfg->x_scale) jf_step_rescale(w.D, w.diag, x, np, &tr);
            active_set(&w, x, cfg->lo, cfg->hi);
            gnorm = jf_step_gnorm(w.g, w.diag, w.free_, w.F, np);
        } else {
            active_set(&w, x, cfg->lo, cfg->hi); /* release jf_step_bind's holds */
        }
        status = jf_step_test(cfg->ftol, cfg->xtol, actred, prered, ratio, pnorm, xnorm, tr.delta);
        if (!cfg->x_scale && status != JF_STEP_CONTINUE) {
            status = jf_step_restart(status, w.D, w.diag, x, w.F, np, &tr, &restarts, w.held);
            if (status == JF_STEP_CONTINUE) { /* the held set may have changed */
                active_set(&w, x, cfg->lo, cfg->hi);
                gnorm = jf_step_gnorm(w.g, w.diag, w.free_, w.F, np);
            }
        }
        /* A non-finite trial point has no gain ratio: report NaN so a log shows why. */
        report(cfg, st->iterations, st->nfev, w.F, pnorm, lam, finite ? ratio : NAN, gnorm,
               accepted);
    }
    st->status = status;
    st->cost = w.F;
    st->optimality = gnorm;

    int st_code = finish(prob, cfg, x, st, &w, tri_at_x ? tri : NULL);
    free(tri);
    work_free(&w);
    return st_code;
}

int jf_lm_finish(jf_problem *prob, const jf_lm_config *cfg, double *x, jf_lm_state *st,
                 const double *A, const double *g, const int *held) {
    size_t np = prob->np;
    lm_work w;
    if (work_init(&w, np, prob->nacc) != JF_OK) return JF_ERR_NOMEM;
    memcpy(w.A, A, np * np * sizeof(double));
    memcpy(w.g, g, np * sizeof(double));
    for (size_t k = 0; k < np; k++) {
        w.diag[k] = A[k * np + k];
        w.held[k] = held ? held[k] : 0;
    }
    w.F = st->cost;
    st->A = malloc(np * np * sizeof(double));
    st->g = malloc(np * sizeof(double));
    int code = st->A && st->g ? finish(prob, cfg, x, st, &w, NULL) : JF_ERR_NOMEM;
    if (code != JF_OK) jf_lm_state_free(st);
    work_free(&w);
    return code;
}

void jf_lm_state_free(jf_lm_state *st) {
    free(st->A);
    free(st->g);
    free(st->J);
    free(st->r);
    free(st->R);
    st->A = st->g = st->J = st->r = st->R = NULL;
}
