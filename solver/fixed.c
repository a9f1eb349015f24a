/* Parameters held at numbers (jf_fit_options.fixed), as lmfit's vary=False.
 *
 * A held parameter is not a case the solver knows about: jf_model_fix writes its value into the
 * model, and the fit is of that smaller model, with the options narrowed to the parameters left
 * (starting values, bounds, x_scale). So every device and path — CPU, GPU, batches, polish,
 * covariance — fits held parameters the same way, and the statistics count only the fitted
 * ones (dof = n - fitted, as a model written with the numbers would have). The price is a
 * compile per set of held values (then the kernel cache), which is why a batch holds each
 * parameter at one value for all its fits. fit.c drives this; the result is widened back to
 * all of the model's parameters here.
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
    free(pl->value);
    free(pl->p0);
    free(pl->lo);
    free(pl->hi);
    free(pl->xs);
    free(pl->p0_rows);
    memset(pl, 0, sizeof *pl);
}

/* Checks that every row of p0_rows holds the fixed parameters at the first row's values
 * (bit for bit: -0 and 0 give different kernels) and inside [lo, hi]. */
static int rows_agree(const struct jf_model *m, const int *fixed, const double *rows,
                      size_t nfits, const double *lo, const double *hi, char *msg,
                      size_t msglen) {
    size_t np = m->np;
    for (size_t k = 0; k < np; k++) {
        if (!fixed[k]) continue;
        double v = rows[k];
        for (size_t i = 1; i < nfits; i++) {
            double u = rows[i * np + k];
            if (memcmp(&u, &v, sizeof u) != 0) {
                char a[40], b[40];
                jf_double_text(a, sizeof a, v);
                jf_double_text(b, sizeof b, u);
                snprintf(msg, msglen,
                         "parameter '%s' is held fixed, but the fits' starting values for it "
                         "differ (%s in fit 0, %s in fit %zu): a batch holds a fixed "
                         "parameter at one value for all its fits",
                         m->param_names[k], a, b, i);
                return JF_ERR_ARG;
            }
        }
        if (!isfinite(v) || v < lo[k] || v > hi[k]) {
            char a[40];
            jf_double_text(a, sizeof a, v);
            snprintf(msg, msglen,
                     "parameter '%s': the value %s it is held fixed at is %s", m->param_names[k],
                     a, isfinite(v) ? "outside its bounds" : "not finite");
            return JF_ERR_ARG;
        }
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
    pl->np = np;
    pl->nfree = nfree;
    pl->keep = malloc(nfree * sizeof *pl->keep);
    pl->value = malloc(np * sizeof *pl->value);
    double *lo = malloc(np * sizeof *lo), *hi = malloc(np * sizeof *hi);
    pl->p0 = malloc(nfree * sizeof *pl->p0);
    pl->lo = malloc(nfree * sizeof *pl->lo);
    pl->hi = malloc(nfree * sizeof *pl->hi);
    if (opts->x_scale) pl->xs = malloc(nfree * sizeof *pl->xs);
    if (p0_rows) pl->p0_rows = malloc(nfits * nfree * sizeof *pl->p0_rows);
    int st = JF_OK;
    if (!pl->keep || !pl->value || !lo || !hi || !pl->p0 || !pl->lo || !pl->hi ||
        (opts->x_scale && !pl->xs) || (p0_rows && !pl->p0_rows)) {
        snprintf(msg, msglen, "out of memory");
        st = JF_ERR_NOMEM;
    }
    /* The starting point as an unfixed fit would take it: its checks, its messages. A batch's
     * rows replace the shared start (which is then not checked: its fits never use it), and
     * each fit checks its own row; only the held values are checked here. */
    if (st == JF_OK) st = jf_bounds_resolve(m, opts->lower, opts->upper, lo, hi, msg, msglen);
    if (st == JF_OK && p0_rows) {
        st = rows_agree(m, opts->fixed, p0_rows, nfits, lo, hi, msg, msglen);
        if (st == JF_OK) memcpy(pl->value, p0_rows, np * sizeof *pl->value);
    } else if (st == JF_OK) {
        st = jf_bounds_start(m, opts->p0, lo, hi, pl->value, msg, msglen);
    }
    if (st == JF_OK) {
        for (size_t k = 0, j = 0; k < np; k++) {
            if (opts->fixed[k]) continue;
            pl->keep[j] = k;
            pl->p0[j] = pl->value[k];
            pl->lo[j] = lo[k];
            pl->hi[j] = hi[k];
            if (pl->xs) pl->xs[j] = opts->x_scale[k];
            j++;
        }
        for (size_t i = 0; p0_rows && i < nfits; i++)
            for (size_t j = 0; j < nfree; j++)
                pl->p0_rows[i * nfree + j] = p0_rows[i * np + pl->keep[j]];
        st = jf_model_fix(m, opts->fixed, pl->value, &pl->reduced);
        if (st != JF_OK)
            snprintf(msg, msglen, "%s",
                     st == JF_ERR_LIMIT ? "the model with its fixed parameters written in "
                                          "exceeds the node limit"
                                        : "out of memory");
    }
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

void jf_fixed_widen(const jf_fixed_plan *pl, const jf_fit_result *r, jf_fit_result *full) {
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
        params[k] = pl->value[k];
        se[k] = 0;
        at_bound[k] = 0;
        fixed[k] = pl->fixed[k] != 0;
        for (size_t l = 0; l < np; l++) {
            cov[k * np + l] = 0;
            cor[k * np + l] = k == l ? 1.0 : 0.0;
        }
    }
    for (size_t j = 0; j < nf; j++) {
        size_t k = pl->keep[j];
        params[k] = r->params[j];
        se[k] = r->std_errors[j];
        at_bound[k] = r->at_bound[j];
        for (size_t i = 0; i < nf; i++) {
            cov[k * np + pl->keep[i]] = r->covariance[j * nf + i];
            cor[k * np + pl->keep[i]] = r->correlation[j * nf + i];
        }
    }
}

void jf_fixed_widen_rows(const jf_fixed_plan *pl, const double *narrow, double *wide,
                         size_t nrows, const int *ran, int values) {
    size_t np = pl->np, nf = pl->nfree;
    for (size_t i = 0; i < nrows; i++) {
        for (size_t k = 0; k < np; k++)
            wide[i * np + k] = !ran[i] ? NAN : values ? pl->value[k] : 0.0;
        for (size_t j = 0; j < nf; j++) wide[i * np + pl->keep[j]] = narrow[i * nf + j];
    }
}
