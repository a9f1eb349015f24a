/* Scheduling: the nodes needed by a set of roots, each once, operands first.
 *
 * Because every node's operands have smaller references than the node (expr.c guarantees it),
 * no graph search is needed: one descending sweep marks what the roots reach, and listing the
 * marked nodes by increasing reference is already a valid evaluation order. The order is thus
 * deterministic (it depends only on the DAG and the roots), which keeps generated code, and the
 * cache keys computed from it, stable.
 */
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

jf_schedule *jf_schedule_build(const jf_dag *d, const jf_ref *roots, size_t nroots) {
    if (d == NULL || (roots == NULL && nroots > 0))
        return NULL;
    size_t size = jf_dag_size(d);
    size_t top = 0;
    for (size_t i = 0; i < nroots; i++) {
        if (roots[i] >= size)
            return NULL;
        if (roots[i] + (size_t)1 > top)
            top = roots[i] + (size_t)1;
    }
    jf_schedule *s = calloc(1, sizeof *s);
    /* pos[r]: position of node r in the schedule, UINT32_MAX while unmarked/unreached */
    uint32_t *pos = malloc((top ? top : 1) * sizeof *pos);
    if (s == NULL || pos == NULL)
        goto nomem;
    s->dag = d;
    s->nroots = nroots;
    memset(pos, 0, top * sizeof *pos);
    for (size_t i = 0; i < nroots; i++)
        pos[roots[i]] = 1;
    size_t n = 0;
    for (size_t r = top; r-- > 0;) {
        if (!pos[r])
            continue;
        n++;
        const jf_node *x = jf_dag_node(d, (jf_ref)r);
        for (unsigned a = 0; a < x->arity; a++)
            pos[x->arg[a]] = 1;
    }
    s->n = n;
    s->nodes = malloc((n ? n : 1) * sizeof *s->nodes);
    s->argpos = malloc((n ? 3 * n : 1) * sizeof *s->argpos);
    s->rootpos = malloc((nroots ? nroots : 1) * sizeof *s->rootpos);
    if (s->nodes == NULL || s->argpos == NULL || s->rootpos == NULL)
        goto nomem;
    size_t k = 0;
    for (size_t r = 0; r < top; r++) {
        if (!pos[r]) {
            pos[r] = UINT32_MAX;
            continue;
        }
        const jf_node *x = jf_dag_node(d, (jf_ref)r);
        s->nodes[k] = (jf_ref)r;
        for (unsigned a = 0; a < 3; a++)
            s->argpos[3 * k + a] = a < x->arity ? pos[x->arg[a]] : UINT32_MAX;
        pos[r] = (uint32_t)k;
        k++;
    }
    for (size_t i = 0; i < nroots; i++)
        s->rootpos[i] = pos[roots[i]];
    free(pos);
    return s;
nomem:
    free(pos);
    jf_schedule_free(s);
    return NULL;
}

void jf_schedule_free(jf_schedule *s) {
    if (s == NULL)
        return;
    free(s->nodes);
    free(s->argpos);
    free(s->rootpos);
    free(s);
}
