/* Scheduling: from DAG roots to straight-line code.
 *
 * A schedule lists the nodes needed to compute a set of roots, each exactly once, operands
 * before users (so subexpressions common to f and its partials are computed once). The
 * interpreter walks it; the C and CUDA emitters print one statement per entry. Leaves
 * (constants, parameters, variables) are included so every consumer sees the same list;
 * emitters may print constants inline.
 */
#ifndef JF_SCHEDULE_H
#define JF_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "expr.h"

typedef struct jf_schedule {
    const jf_dag *dag; /* the DAG the entries refer to (not owned) */
    jf_ref *nodes;     /* n node references in evaluation order */
    uint32_t *argpos;  /* 3*n: position in `nodes` of each operand of entry i (unused: UINT32_MAX) */
    size_t n;          /* number of entries */
    uint32_t *rootpos; /* nroots: position in `nodes` of each root */
    size_t nroots;     /* number of roots */
} jf_schedule;

/* Builds the schedule for roots (each a valid reference in d). Returns NULL when out of
 * memory. The caller frees it with jf_schedule_free. */
JF_INTERNAL jf_schedule *jf_schedule_build(const jf_dag *d, const jf_ref *roots, size_t nroots);
/* Frees s; accepts NULL. */
JF_INTERNAL void jf_schedule_free(jf_schedule *s);

#endif
