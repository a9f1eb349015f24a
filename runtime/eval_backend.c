/* jf_model_eval_backend: one point through the kernels of a chosen backend.
 *
 * This is the user-visible way to check that compiled code agrees with the reference
 * evaluator (`jitfit eval --backend c|cuda`). It goes through the same kernels and cache the
 * solver uses, with a data set of one point and no response (y = 0, so r = f).
 */
#include <stdlib.h>
#include <string.h>

#include "../codegen/interp.h"
#include "kernels.h"

int jf_model_eval_backend(const jf_model *m, int backend, const double *params, const double *vars,
                          double *value, double *grad, char **note) {
    if (note) *note = NULL;
    if (!m || !value || (m->np && !params) || (m->nv && !vars)) return JF_ERR_ARG;
    if (backend == JF_BACKEND_INTERP) return jf_interp_model_eval(m, params, vars, value, grad);
    if (backend == JF_BACKEND_CUDA) return jf_cuda_eval_point(m, params, vars, value, grad, note);
    if (backend != JF_BACKEND_C) return JF_ERR_ARG;

    jf_jit_options jo;
    memset(&jo, 0, sizeof jo);
    jf_kernels *k = NULL;
    char *warning = NULL;
    int st = jf_kernels_get(m, JF_BACKEND_C, &jo, &k, &warning);
    if (st != JF_OK) {
        if (note) *note = warning;
        else free(warning);
        return st;
    }
    if (note) *note = warning;
    else free(warning);
    double *J = calloc(m->np ? m->np : 1, sizeof *J);
    if (!J) {
        jf_kernels_free(k);
        return JF_ERR_NOMEM;
    }
    jf_data_view dv = {vars, 1, NULL, NULL};
    jf_kernels_jacobian_row(k, params, &dv, 0, 1, value, J);
    if (grad) memcpy(grad, J, m->np * sizeof *J);
    free(J);
    jf_kernels_free(k);
    return JF_OK;
}
