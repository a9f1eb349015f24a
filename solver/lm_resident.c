/* The device-resident Levenberg-Marquardt loop (lm_core.h) driven on the host.
 *
 * The GPU solver runs jf_lmc_start / jf_lmc_judge in a one-thread kernel between normal_eq
 * passes; here the same functions run between host passes (jf_problem_normal_eq), so every
 * decision the GPU makes is exercised by the CPU tests (test_resident compares this driver
 * with lm.c on the NIST problems and the test models). The finish (polish, JᵀJ at the
 * solution) is lm.c's, shared with every driver. With jf_lm_resident_rounds set, the p×p
 * factorizations are handed out as the GPU's many-parameter path hands them to cuSOLVER, and
 * done here by LAPACK, so that protocol is tested without a GPU too.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <lapacke.h>

#include "lm_core.h"
#include "solver.h"

int jf_lm_resident_rounds = 0;
unsigned long jf_lm_resident_handed = 0;

/* The caller's factorization of a request (lm_core.h's jf_lmc_request), done as the GPU's
 * many-parameter path has cuSOLVER do it: potrf 'U' of F in place, then potrs on Finv = I. */
static void factor_request(jf_lmc_views *v, size_t np) {
    jf_lm_resident_handed++;
    lapack_int info = LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'U', (lapack_int)np, v->F,
                                          (lapack_int)np);
    v->finfo[0] = (int)info;
    if (info == 0)
        LAPACKE_dpotrs_work(LAPACK_COL_MAJOR, 'U', (lapack_int)np, (lapack_int)np, v->F,
                            (lapack_int)np, v->Finv, (lapack_int)np);
}

/* After a start or judge: up to `rounds` external factorizations, the last of them resumed
 * with inline factorization for whatever the step still needs (the GPU's fixed schedule). */
static int factor_rounds(jf_lmc *c, jf_lmc_views *v, int more, int rounds) {
    for (int k = 0; k < rounds && more == JF_LMC_WANT_FACTOR; k++) {
        factor_request(v, c->np);
        v->external = k + 1 < rounds;
        more = jf_lmc_resume(c, v);
    }
    v->external = rounds > 0;
    return more;
}

static void report(const jf_lm_config *cfg, const jf_lmc *c, int first) {
    if (!cfg->progress) return;
    jf_iteration_info info;
    info.iteration = c->iterations;
    info.nfev = c->nfev;
    info.cost = c->F;
    info.step_norm = first ? 0.0 : c->step_norm;
    info.damping = first ? 0.0 : c->damping;
    info.gain_ratio = first ? NAN : c->ratio;
    info.optimality = c->gnorm;
    info.accepted = first ? 0 : c->accepted;
    cfg->progress(cfg->progress_ctx, &info);
}

void jf_lmc_setup(jf_lmc *c, double *ws, int *iws, size_t np, size_t nh, const double *held,
                  const jf_lm_config *cfg, const double *x) {
    memset(c, 0, sizeof *c);
    c->np = np;
    c->nheld = nh;
    c->max_nfev = cfg->max_nfev;
    c->ftol = cfg->ftol;
    c->xtol = cfg->xtol;
    c->gtol = cfg->gtol;
    c->use_x_scale = cfg->x_scale != NULL;
    jf_lmc_views v;
    jf_lmc_views_init(&v, ws, iws, np, nh);
    memcpy(v.x, x, np * sizeof(double));
    if (nh) {
        memcpy(v.x + np, held, nh * sizeof(double));
        memcpy(v.x_try + np, held, nh * sizeof(double));
    }
    memcpy(v.lo, cfg->lo, np * sizeof(double));
    memcpy(v.hi, cfg->hi, np * sizeof(double));
    if (cfg->x_scale) memcpy(v.xs, cfg->x_scale, np * sizeof(double));
}

int jf_lmc_finish(jf_problem *prob, const jf_lm_config *cfg, const struct jf_lmc *c, double *ws,
                  int *iws, double *x, jf_lm_state *st) {
    size_t np = prob->np;
    jf_lmc_views v;
    jf_lmc_views_init(&v, ws, iws, np, c->nheld);
    memcpy(x, v.x, np * sizeof(double));
    st->status = c->status;
    st->nfev = c->nfev;
    st->iterations = c->iterations;
    st->cost = c->F;
    st->optimality = c->status == JF_LMC_NONFINITE ? NAN : c->gnorm;
    return jf_lm_finish(prob, cfg, x, st, v.A, v.g, v.held);
}

int jf_lm_solve_resident(jf_problem *prob, const jf_lm_config *cfg, double *x, jf_lm_state *st) {
    memset(st, 0, sizeof *st);
    size_t np = prob->np, nh = prob->nheld;
    double *ws = calloc(jf_lmc_ws_doubles(np, nh), sizeof *ws);
    int *iws = calloc(jf_lmc_ws_ints(np), sizeof *iws);
    double *acc = malloc(prob->nacc * sizeof *acc);
    int rounds = jf_lm_resident_rounds;
    double *F = rounds > 0 ? malloc(2 * np * np * sizeof *F) : NULL;
    int finfo = 0;
    if (!ws || !iws || !acc || (rounds > 0 && !F)) {
        free(ws);
        free(iws);
        free(acc);
        free(F);
        return JF_ERR_NOMEM;
    }
    jf_lmc c;
    jf_lmc_setup(&c, ws, iws, np, nh, jf_problem_held(prob), cfg, x);
    jf_lmc_views v;
    jf_lmc_views_init(&v, ws, iws, np, nh);
    if (rounds > 0) {
        v.F = F;
        v.Finv = F + np * np;
        v.finfo = &finfo;
        v.external = 1;
    }

    jf_problem_normal_eq(prob, v.x, prob->loss, acc);
    int more = factor_rounds(&c, &v, jf_lmc_start(&c, &v, acc), rounds);
    if (c.status != JF_LMC_NONFINITE) report(cfg, &c, 1);
    while (more) {
        jf_problem_normal_eq(prob, v.x_try, prob->loss, acc);
        more = factor_rounds(&c, &v, jf_lmc_judge(&c, &v, acc), rounds);
        report(cfg, &c, 0);
    }
    int code = jf_lmc_finish(prob, cfg, &c, ws, iws, x, st);
    free(ws);
    free(iws);
    free(acc);
    free(F);
    return code;
}
