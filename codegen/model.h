/* The compiled model: what the front end hands to code generation, the evaluator and the solver.
 *
 * grammar/resolve.c builds it from the AST: names are resolved to parameter and variable
 * numbers, let-bindings are inlined (they are shared in the DAG anyway), and every partial
 * derivative is built in the same DAG as f. From here on no user text is used except the names
 * kept for display; generated code refers to p[k] and x[j] only.
 */
#ifndef JF_MODEL_H
#define JF_MODEL_H

#include <stddef.h>

#include "expr.h"

struct jf_model {
    jf_dag *dag;          /* owns every node of f and its derivatives */
    jf_ref f;             /* the model expression */
    jf_ref *df;           /* df[k] = ∂f/∂p[k], np entries */
    size_t np;            /* number of parameters */
    size_t nv;            /* number of independent variables */
    char **param_names;   /* np names, in model order */
    double *p_init;       /* np declared initial values; NaN when not declared */
    double *p_lo, *p_hi;  /* np declared bounds; -inf/+inf when not declared */
    char **var_names;     /* nv names, in declaration order */
    char *response;       /* response name ("y" unless the model says `NAME ~ ...`) */
    char *source_name;    /* name of the source for messages */
    size_t nheld;         /* parameters held fixed and read at run time (jf_model_hold):
                             parameter nodes of index np .. np + nheld - 1, which have no
                             derivative here, so the kernels read p[0 .. np + nheld) and a caller
                             appends the held values to the fitted ones; 0 for a compiled model */
    size_t nfixed;        /* parameters of the model this one was derived from that are held
                             fixed, read (nheld) or written in as numbers (jf_model_fix), for
                             messages: "3 parameters" would mislead the caller, whose model has
                             np + nfixed; 0 for a compiled model */
    struct jf_schedule *sched; /* schedule of {f, df[0..np)} built once at compile time, so the
                                  reference evaluator does not rebuild it per point; may be NULL
                                  (models assembled by hand in tests) */
};

/* Allocates an empty model with a fresh DAG of at most max_nodes nodes; NULL when out of
 * memory. Fields are filled by the resolver. */
JF_INTERNAL struct jf_model *jf_model_alloc(size_t max_nodes);

/* A new model equal to m with every parameter k where fixed[k] is non-zero held: a parameter
 * of the new model no longer (the others keep their order, names, declared values and bounds;
 * no derivative is taken for it), but still read from p, after the parameters left: the new
 * model's p is [the parameters left | the newly held, in m's order | those m held]. Its value
 * is not part of the model, so its kernels serve every value. JF_OK with *out (freed with
 * jf_model_free), JF_ERR_NOMEM, or JF_ERR_LIMIT (m's node limit). */
JF_INTERNAL int jf_model_hold(const struct jf_model *m, const int *fixed, struct jf_model **out);
/* The same with each held parameter k written in as the number values[k] (its kernels then
 * serve those values only), simplified again: the model a text with the numbers would give. */
JF_INTERNAL int jf_model_fix(const struct jf_model *m, const int *fixed, const double *values,
                             struct jf_model **out);
/* 1 when r (from jf_model_hold) reading the held values held (r->nheld) computes what the
 * model with them written in (jf_model_fix) does, bit for bit; 0 when writing them in lets
 * the simplifier drop a term by 0*u → 0 or 0/u → 0 (u may be infinite or NaN where 0 times it
 * is not 0: --fix c=0 of c*log(x) at x = 0), drop a zero from a sum (the sign of a zero
 * result), or evaluate a small integer power by multiplications; also 0 when out of memory. */
JF_INTERNAL int jf_model_hold_exact(const struct jf_model *r, const double *held);
#endif
