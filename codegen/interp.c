/* The reference evaluator: walks a schedule and applies each node's operation.
 *
 * It is the yardstick for the generated C and CUDA kernels and the fallback when no compiler is
 * available, so its arithmetic is, operation by operation, what the emitters print: libm calls
 * for the builtins and the prelude.h helpers for everything that is ours (powi, sign, select,
 * comparisons, min/max). The constant folder in expr.c calls jf_interp_op too, so a folded
 * constant is the value evaluation would have produced.
 */
#include <math.h>
#include <stdlib.h>

#include "interp.h"
#include "prelude.h"

/* For POW the exponent b is treated as a constant of the expression (jf_pow_const): that is
 * what the constant folder needs, and the interpreter calls pow() itself for non-constant
 * exponents. */
double jf_interp_op(jf_op op, double a, double b, double c) {
    switch (op) {
    case JF_OP_NEG: return -a;
    case JF_OP_EXP: return exp(a);
    case JF_OP_LOG: return log(a);
    case JF_OP_LOG10: return log10(a);
    case JF_OP_SQRT: return sqrt(a);
    case JF_OP_CBRT: return cbrt(a);
    case JF_OP_ABS: return fabs(a);
    case JF_OP_SIN: return sin(a);
    case JF_OP_COS: return cos(a);
    case JF_OP_TAN: return tan(a);
    case JF_OP_ASIN: return asin(a);
    case JF_OP_ACOS: return acos(a);
    case JF_OP_ATAN: return atan(a);
    case JF_OP_SINH: return sinh(a);
    case JF_OP_COSH: return cosh(a);
    case JF_OP_TANH: return tanh(a);
    case JF_OP_ERF: return erf(a);
    case JF_OP_ERFC: return erfc(a);
    case JF_OP_SIGN: return jf_sign(a);
    case JF_OP_ADD: return a + b;
    case JF_OP_SUB: return a - b;
    case JF_OP_MUL: return a * b;
    case JF_OP_DIV: return a / b;
    case JF_OP_POW: return jf_pow_const(a, b);
    case JF_OP_ATAN2: return atan2(a, b);
    case JF_OP_MIN: return jf_min(a, b);
    case JF_OP_MAX: return jf_max(a, b);
    case JF_OP_HYPOT: return hypot(a, b);
    case JF_OP_LT: return jf_lt(a, b);
    case JF_OP_LE: return jf_le(a, b);
    case JF_OP_GT: return jf_gt(a, b);
    case JF_OP_GE: return jf_ge(a, b);
    case JF_OP_EQ: return jf_eq(a, b);
    case JF_OP_NE: return jf_ne(a, b);
    case JF_OP_SELECT: return jf_select(a, b, c);
    case JF_OP_CONST:
    case JF_OP_PARAM:
    case JF_OP_VAR:
    case JF_OP_COUNT: break;
    }
    /* leaves have no operation; reaching here is a caller bug, and NaN makes it visible */
    return NAN;
}

void jf_interp_run(const jf_schedule *s, const double *p, const double *x, double *scratch,
                   double *out) {
    const jf_dag *d = s->dag;
    for (size_t i = 0; i < s->n; i++) {
        const jf_node *nd = jf_dag_node(d, s->nodes[i]);
        const uint32_t *ap = &s->argpos[3 * i];
        double v;
        switch ((jf_op)nd->op) {
        case JF_OP_CONST: v = nd->value; break;
        case JF_OP_PARAM: v = p[nd->index]; break;
        case JF_OP_VAR: v = x[nd->index]; break;
        case JF_OP_POW:
            /* the project's POW rule: only a constant exponent may take the jf_powi path */
            if (jf_dag_node(d, nd->arg[1])->op == JF_OP_CONST)
                v = jf_pow_const(scratch[ap[0]], scratch[ap[1]]);
            else
                v = pow(scratch[ap[0]], scratch[ap[1]]);
            break;
        default:
            v = jf_interp_op((jf_op)nd->op, scratch[ap[0]],
                             nd->arity > 1 ? scratch[ap[1]] : 0.0,
                             nd->arity > 2 ? scratch[ap[2]] : 0.0);
            break;
        }
        scratch[i] = v;
    }
    for (size_t r = 0; r < s->nroots; r++)
        out[r] = scratch[s->rootpos[r]];
}

int jf_interp_model_eval(const struct jf_model *m, const double *p, const double *x,
                         double *value, double *grad) {
    if (m == NULL || m->dag == NULL || value == NULL || (m->np > 0 && p == NULL) ||
        (m->nv > 0 && x == NULL))
        return JF_ERR_ARG;
    if (m->sched != NULL) {
        /* The compiled model's schedule of {f, df...}: the gradient comes at no extra cost. */
        const jf_schedule *s = m->sched;
        double small[64];
        size_t need = s->n + s->nroots;
        double *scratch = need <= 64 ? small : malloc(need * sizeof *scratch);
        if (scratch == NULL) return JF_ERR_NOMEM;
        double *out = scratch + s->n;
        jf_interp_run(s, p, x, scratch, out);
        *value = out[0];
        if (grad != NULL)
            for (size_t k = 0; k < m->np; k++) grad[k] = out[k + 1];
        if (scratch != small) free(scratch);
        return JF_OK;
    }
    size_t nroots = 1 + (grad != NULL ? m->np : 0);
    if (grad != NULL && m->np > 0 && m->df == NULL)
        return JF_ERR_INTERNAL;
    jf_ref *roots = malloc(nroots * sizeof *roots);
    double *out = malloc(nroots * sizeof *out);
    if (roots == NULL || out == NULL) {
        free(roots);
        free(out);
        return JF_ERR_NOMEM;
    }
    roots[0] = m->f;
    for (size_t k = 1; k < nroots; k++)
        roots[k] = m->df[k - 1];
    for (size_t k = 0; k < nroots; k++) {
        if (roots[k] >= jf_dag_size(m->dag)) {
            /* a model is only handed out when f and every df[k] were built */
            free(roots);
            free(out);
            return JF_ERR_INTERNAL;
        }
    }
    int rc = JF_OK;
    jf_schedule *s = jf_schedule_build(m->dag, roots, nroots);
    double *scratch = s != NULL ? malloc((s->n ? s->n : 1) * sizeof *scratch) : NULL;
    if (scratch == NULL) {
        rc = JF_ERR_NOMEM;
    } else {
        jf_interp_run(s, p, x, scratch, out);
        *value = out[0];
        for (size_t k = 1; k < nroots; k++)
            grad[k - 1] = out[k];
    }
    free(scratch);
    jf_schedule_free(s);
    free(roots);
    free(out);
    return rc;
}
