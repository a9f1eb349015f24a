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
    size_t nheld;         /* parameters of the model this one was derived from that jf_model_fix
                             held at numbers (for messages: "3 parameters" would mislead the
                             caller, whose model has np + nheld); 0 for a compiled model */
    struct jf_schedule *sched; /* schedule of {f, df[0..np)} built once at compile time, so the
                                  reference evaluator does not rebuild it per point; may be NULL
                                  (models assembled by hand in tests) */
};

/* Allocates an empty model with a fresh DAG of at most max_nodes nodes; NULL when out of
 * memory. Fields are filled by the resolver. */
JF_INTERNAL struct jf_model *jf_model_alloc(size_t max_nodes);

/* A new model equal to m with every parameter k where fixed[k] is non-zero replaced by the
 * constant values[k] (a parameter of m no longer: the others keep their order, names, declared
 * values and bounds), simplified and differentiated afresh. Its kernels are those of a model
 * whose text had the numbers written in, so fitting it fits m with those parameters held.
 * JF_OK with *out (freed with jf_model_free), JF_ERR_NOMEM, or JF_ERR_LIMIT (m's node limit). */
JF_INTERNAL int jf_model_fix(const struct jf_model *m, const int *fixed, const double *values,
                             struct jf_model **out);

#endif
