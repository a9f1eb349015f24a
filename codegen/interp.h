/* The reference evaluator: interprets a schedule with the same arithmetic the generated code
 * uses (the shared prelude.h), so compiled kernels can be checked against it and it can stand
 * in when no compiler is available. */
#ifndef JF_INTERP_H
#define JF_INTERP_H

#include "model.h"
#include "schedule.h"

/* Evaluates schedule s at parameters p and variables x. scratch must hold s->n doubles; the
 * value of root i is written to out[i]. */
JF_INTERNAL void jf_interp_run(const jf_schedule *s, const double *p, const double *x,
                               double *scratch, double *out);

/* Evaluates one node operation on already computed operand values (a, b, c as the arity
 * needs). Shared by the interpreter and the constant folder so both compute alike. */
JF_INTERNAL double jf_interp_op(jf_op op, double a, double b, double c);

/* Value and (if grad != NULL) gradient of model m at (p, x). JF_OK or JF_ERR_NOMEM. */
JF_INTERNAL int jf_interp_model_eval(const struct jf_model *m, const double *p, const double *x,
                                     double *value, double *grad);

#endif
