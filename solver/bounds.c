/* Box bounds and the starting point of a fit.
 *
 * The solver handles bounds by projection with an active set (step.h): a parameter sitting on a
 * bound with the descent direction pointing out of the box is held fixed for the step, the
 * others take the Levenberg-Marquardt step of the reduced system, and the trial point is
 * clipped into the box. Iterates never leave [lo, hi], so a model is never evaluated outside
 * its declared domain, and a solution on a bound is exactly on it (at_bound flags are exact
 * comparisons). This file resolves the bounds and the starting point and checks them.
 */
#include <math.h>
#include <stdio.h>

#include "../codegen/model.h"
#include "solver.h"

int jf_bounds_resolve(const struct jf_model *m, const double *lower, const double *upper,
                      double *lo, double *hi, char *msg, size_t msglen) {
    for (size_t k = 0; k < m->np; k++) {
        lo[k] = lower ? lower[k] : (m->p_lo ? m->p_lo[k] : -INFINITY);
        hi[k] = upper ? upper[k] : (m->p_hi ? m->p_hi[k] : INFINITY);
        /* isnan first: NaN compares false and would slip through lo < hi. */
        if (isnan(lo[k]) || isnan(hi[k]) || !(lo[k] < hi[k]) || lo[k] == INFINITY ||
            hi[k] == -INFINITY) {
            char a[40], b[40];
            jf_double_text(a, sizeof a, lo[k]);
            jf_double_text(b, sizeof b, hi[k]);
            snprintf(msg, msglen, "parameter '%s': bounds [%s, %s] are empty (need lower < upper)",
                     m->param_names[k], a, b);
            return JF_ERR_ARG;
        }
    }
    return JF_OK;
}

int jf_bounds_start(const struct jf_model *m, const double *p0, const double *lo,
                    const double *hi, double *x0, char *msg, size_t msglen) {
    for (size_t k = 0; k < m->np; k++) {
        double v;
        if (p0) v = p0[k];
        else if (m->p_init && !isnan(m->p_init[k])) v = m->p_init[k];
        /* the halves, not the sum, which may overflow (the same number elsewhere but among
         * subnormals) */
        else if (isfinite(lo[k]) && isfinite(hi[k])) v = 0.5 * lo[k] + 0.5 * hi[k];
        else if (isfinite(lo[k])) v = lo[k] + 1.0;
        else if (isfinite(hi[k])) v = hi[k] - 1.0;
        else v = 1.0; /* the last four: scipy's _initialize_feasible for p0=None */
        /* the texts only for a message: a batch checks millions of starts, and the shortest
         * round-trip text costs up to 17 formats and parses per number */
        char a[40], b[40], c[40];
        if (!isfinite(v)) {
            jf_double_text(a, sizeof a, v);
            snprintf(msg, msglen, "parameter '%s': starting value %s is not finite",
                     m->param_names[k], a);
            return JF_ERR_ARG;
        }
        if (v < lo[k] || v > hi[k]) {
            jf_double_text(a, sizeof a, v);
            jf_double_text(b, sizeof b, lo[k]);
            jf_double_text(c, sizeof c, hi[k]);
            snprintf(msg, msglen, "parameter '%s': starting value %s is outside its bounds [%s, %s]",
                     m->param_names[k], a, b, c);
            return JF_ERR_ARG;
        }
        x0[k] = v;
    }
    return JF_OK;
}

void jf_bounds_flags(const double *x, const double *lo, const double *hi, size_t np,
                     int *at_bound) {
    for (size_t k = 0; k < np; k++) at_bound[k] = x[k] <= lo[k] ? -1 : (x[k] >= hi[k] ? 1 : 0);
}
