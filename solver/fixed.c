/* Parameters held at numbers (jf_fit_options.fixed), as lmfit's vary=False.
 *
 * A held parameter is not a case the solver's steps know about: jf_model_hold makes it a
 * parameter without a derivative that the kernels still read, after the fitted ones, and the
 * fit is of that smaller model, with the options narrowed to the parameters left (starting
 * values, bounds, x_scale) and the held values handed to every pass (jf_problem_hold, the GPU
 * loop's workspace). So every device and path — CPU, GPU, batches, polish, covariance — fits
 * held parameters the same way, and the statistics count only the fitted ones (dof = n -
 * fitted, as a model written with the numbers would have). The values are not part of the
 * model: one compile serves them all, so each fit of a batch may hold a parameter at its own
 * value (its row of p0). Only where writing a fit's values in would make the simplifier do
 * something the reading kernels cannot repeat bit for bit (jf_model_hold_exact: drop a term
 * that is not finite somewhere by 0*u → 0, as --fix c=0 of c*log(x) with x = 0 among the data;
 * drop a zero from a sum; decide an if; evaluate a small integer power by multiplications)
 * does that fit get the model with the numbers written in instead (jf_model_fix, a compile per
 * set of such values): the fit of the text with the number, as a user switching a term off
 * expects. fit.c drives this; the result is widened back to all of the model's parameters
 * here.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../codegen/model.h"
#include "solver.h"

int jf_fixed_any(const struct jf_model *m, const jf_fit_options *opts) {
    if (!m || !opts || !opts->fixed) return 0;
    for (size_t k = 0; k < m->np; k++)
        if (opts->fixed[k]) return 1;
    return 0;
}

void jf_fixed_plan_free(jf_fixed_plan *pl) {
    jf_model_free(pl->reduced);
    free(pl->keep);
    free(pl->hold);
    free(pl->value);
    free(pl->held);
    free(pl->exact);
    free(pl->hlo);
    free(pl->hhi);
    free(pl->p0);
    free(pl->lo);
    free(pl->hi);
    free(pl->xs);
    free(pl->p0_rows);
    memset(pl, 0, sizeof *pl);
}

const double *jf_fixed_held(const jf_fixed_plan *pl, size_t i) {
    return pl->held + (pl->nfits > 1 ? i : 0) * pl->nheld;
}

int jf_fixed_exact(const jf_fixed_plan *pl, size_t i) { return pl->exact[pl->nfits > 1 ? i : 0]; }

int jf_fixed_written(const jf_fixed_plan *pl, const struct jf_model *m, size_t i,
                     struct jf_model **out) {
    double *v = calloc(pl->np, sizeof *v);
    if (!v) return JF_ERR_NOMEM;
    const double *row = jf_fixed_held(pl, i);
    for (size_t h = 0; h < pl->nheld; h++) v[pl->hold[h]] = row[h];
    int st = jf_model_fix(m, pl->fixed, v, out);
    free(v);
    return st;
}

int jf_fixed_check(const jf_fixed_plan *pl, size_t i, char *msg, size_t msglen) {
    const double *row = jf_fixed_held(pl, i);
    for (size_t h = 0; h < pl->nheld; h++) {
        double v = row[h];
        if (isfinite(v) && v >= pl->hlo[h] && v <= pl->hhi[h]) continue;
        char a[40];
        jf_double_text(a, sizeof a, v);
        snprintf(msg, msglen, "parameter '%s': the value %s it is held fixed at is %s",
                 pl->names[pl->hold[h]], a, isfinite(v) ? "outside its bounds" : "not finite");
        return JF_ERR_ARG;
    }
    return JF_OK;
}

int jf_fixed_plan_init(jf_fixed_plan *pl, const struct jf_model *m, const jf_fit_options *opts,
                       const double *p0_rows, size_t nfits, char *msg, size_t msglen) {
    memset(pl, 0, sizeof *pl);
    size_t np = m->np, nfree = 0;
    for (size_t k = 0; k < np; k++) nfree += !opts->fixed[k];
    if (nfree == 0) {
        snprintf(msg, msglen, "every parameter is held fixed: nothing is left to fit");
        return JF_ERR_ARG;
    }
    size_t nh = np - nfree, rows = p0_rows ? nfits : 1;
    pl->np = np;
    pl->nfree = nfree;
    pl->nheld = nh;
    pl->nfits = rows;
    pl->names = m->param_names;
    pl->keep = malloc(nfree * sizeof *pl->keep);
    pl->hold = malloc(nh * sizeof *pl->hold);
    pl->value = malloc(np * sizeof *pl->value);
    pl->held = malloc(rows * nh * sizeof *pl->held);
    pl->hlo = malloc(nh * sizeof *pl->hlo);
    pl->hhi = malloc(nh * sizeof *pl->hhi);
    double *lo = malloc(np * sizeof *lo), *hi = malloc(np * sizeof *hi);
    pl->p0 = malloc(nfree * sizeof *pl->p0);
    pl->lo = malloc(nfree * sizeof *pl->lo);
    pl->hi = malloc(nfree * sizeof *pl->hi);
    if (opts->x_scale) pl->xs = malloc(nfree * sizeof *pl->xs);
    if (p0_rows) pl->p0_rows = malloc(nfits * nfree * sizeof *pl->p0_rows);
    int st = JF_OK;
    if (!pl->keep || !pl->hold || !pl->value || !pl->held || !pl->hlo || !pl->hhi || !lo || !hi ||
        !pl->p0 || !pl->lo || !pl->hi || (opts->x_scale && !pl->xs) ||
        (p0_rows && !pl->p0_rows)) {
        snprintf(msg, msglen, "out of memory");
        st = JF_ERR_NOMEM;
    }
    /* The starting point as an unfixed fit would take it: its checks, its messages. A batch's
     * rows replace the shared start (which is then not checked: its fits never use it), and
     * each fit checks its own row, its held values included (jf_fixed_check). */
    if (st == JF_OK) st = jf_bounds_resolve(m, opts->lower, opts->upper, lo, hi, msg, msglen);
    if (st == JF_OK && p0_rows) memcpy(pl->value, p0_rows, np * sizeof *pl->value);
    else if (st == JF_OK) st = jf_bounds_start(m, opts->p0, lo, hi, pl->value, msg, msglen);
    if (st == JF_OK) {
        for (size_t k = 0, j = 0, h = 0; k < np; k++) {
            if (opts->fixed[k]) {
                pl->hold[h] = k;
                pl->hlo[h] = lo[k];
                pl->hhi[h] = hi[k];
                h++;
                continue;
            }
            pl->keep[j] = k;
            pl->p0[j] = pl->value[k];
            pl->lo[j] = lo[k];
            pl->hi[j] = hi[k];
            if (pl->xs) pl->xs[j] = opts->x_scale[k];
            j++;
        }
        for (size_t i = 0; i < rows; i++) {
            const double *src = p0_rows ? p0_rows + i * np : pl->value;
            for (size_t h = 0; h < nh; h++) pl->held[i * nh + h] = src[pl->hold[h]];
            for (size_t j = 0; p0_rows && j < nfree; j++)
                pl->p0_rows[i * nfree + j] = src[pl->keep[j]];
        }
        /* a single fit's held values are checked here, a batch's fit by fit */
        if (!p0_rows) st = jf_fixed_check(pl, 0, msg, msglen);
    }
    if (st == JF_OK) {
        st = jf_model_hold(m, opts->fixed, &pl->reduced);
        if (st != JF_OK)
            snprintf(msg, msglen, "%s",
                     st == JF_ERR_LIMIT ? "the model with its fixed parameters held "
                                          "exceeds the node limit"
                                        : "out of memory");
    }
    if (st == JF_OK && !(pl->exact = malloc(rows))) {
        snprintf(msg, msglen, "out of memory");
        st = JF_ERR_NOMEM;
    }
    for (size_t i = 0; st == JF_OK && i < rows; i++)
        pl->exact[i] = (unsigned char)jf_model_hold_exact(pl->reduced, pl->held + i * nh);
    free(lo);
    free(hi);
    if (st != JF_OK) {
        jf_fixed_plan_free(pl);
        return st;
    }
    pl->o = *opts;
    pl->o.fixed = NULL;
    pl->o.p0 = pl->p0;
    pl->o.lower = pl->lo;
    pl->o.upper = pl->hi;
    pl->o.x_scale = pl->xs;
    pl->fixed = opts->fixed;
    return JF_OK;
}

void jf_fixed_widen(const jf_fixed_plan *pl, size_t i, const jf_fit_result *r,
                    jf_fit_result *full) {
    size_t np = pl->np, nf = pl->nfree;
    double *params = full->params, *se = full->std_errors, *cov = full->covariance,
           *cor = full->correlation;
    int *at_bound = full->at_bound, *fixed = full->fixed;
    *full = *r; /* the scalars and the texts' pointers, which the caller replaces */
    full->params = params;
    full->std_errors = se;
    full->covariance = cov;
    full->correlation = cor;
    full->at_bound = at_bound;
    full->fixed = fixed;
    full->num_params = np;
    for (size_t k = 0; k < np; k++) {
        params[k] = 0;
        se[k] = 0;
        at_bound[k] = 0;
        fixed[k] = pl->fixed[k] != 0;
        for (size_t l = 0; l < np; l++) {
            cov[k * np + l] = 0;
            cor[k * np + l] = k == l ? 1.0 : 0.0;
        }
    }
    const double *row = jf_fixed_held(pl, i);
    for (size_t h = 0; h < pl->nheld; h++) params[pl->hold[h]] = row[h];
    for (size_t j = 0; j < nf; j++) {
        size_t k = pl->keep[j];
        params[k] = r->params[j];
        se[k] = r->std_errors[j];
        at_bound[k] = r->at_bound[j];
        for (size_t l = 0; l < nf; l++) {
            cov[k * np + pl->keep[l]] = r->covariance[j * nf + l];
            cor[k * np + pl->keep[l]] = r->correlation[j * nf + l];
        }
    }
}

void jf_fixed_widen_rows(const jf_fixed_plan *pl, const double *narrow, double *wide,
                         size_t nrows, const int *ran, int values) {
    size_t np = pl->np, nf = pl->nfree;
    for (size_t i = 0; i < nrows; i++) {
        for (size_t k = 0; k < np; k++) wide[i * np + k] = !ran[i] ? NAN : 0.0;
        if (!ran[i]) continue;
        const double *row = jf_fixed_held(pl, i);
        for (size_t h = 0; values && h < pl->nheld; h++) wide[i * np + pl->hold[h]] = row[h];
        for (size_t j = 0; j < nf; j++) wide[i * np + pl->keep[j]] = narrow[i * nf + j];
    }
}
