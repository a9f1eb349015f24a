/* The public model API of include/jitfit.h: compile, inspect, evaluate, render, free; and
 * jf_model_hold and jf_model_fix, the derived models with some parameters held fixed
 * (jf_fit_options.fixed).
 *
 * jf_model_compile chains the front-end stages in data-flow order:
 *   grammar/ (parse + resolve into the DAG) → codegen/diff (∂f/∂θk for every k)
 * and owns the error policy: every failure leaves *out NULL, returns a status and explains
 * itself in the diagnostics; nothing is printed here.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../codegen/interp.h"
#include "../codegen/model.h"
#include "../codegen/prelude.h"
#include "../codegen/schedule.h"
#include "../grammar/frontend.h"
#include "diag.h"

const char *jf_status_string(int status) {
    switch (status) {
    case JF_OK: return "success";
    case JF_ERR_NOMEM: return "out of memory";
    case JF_ERR_ARG: return "invalid argument";
    case JF_ERR_PARSE: return "the model has errors";
    case JF_ERR_LIMIT: return "a size or depth limit was exceeded";
    case JF_ERR_IO: return "input/output error";
    case JF_ERR_DATA: return "malformed data";
    case JF_ERR_COMPILE: return "compiling generated code failed";
    case JF_ERR_UNAVAILABLE: return "backend unavailable";
    case JF_ERR_INTERNAL: return "internal error";
    default: return "unknown status";
    }
}

void jf_free(void *p) { free(p); }

const char *jf_version(void) { return JITFIT_VERSION; }

jf_model_options jf_model_options_default(void) {
    jf_model_options o;
    memset(&o, 0, sizeof o);
    o.source_name = "<model>";
    o.vars = NULL;
    o.nvars = 0;
    o.max_depth = 256;
    o.max_source_bytes = (size_t)1 << 20;
    o.max_nodes = JF_DAG_MAX_NODES;
    return o;
}

struct jf_model *jf_model_alloc(size_t max_nodes) {
    struct jf_model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->dag = jf_dag_create(max_nodes);
    if (!m->dag) {
        free(m);
        return NULL;
    }
    m->f = JF_NOREF;
    return m;
}

static void free_names(char **names, size_t n) {
    if (!names) return;
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

void jf_model_free(jf_model *m) {
    if (!m) return;
    jf_dag_free(m->dag);
    free(m->df);
    free_names(m->param_names, m->np);
    free_names(m->var_names, m->nv);
    free(m->p_init);
    free(m->p_lo);
    free(m->p_hi);
    free(m->response);
    free(m->source_name);
    jf_schedule_free(m->sched);
    free(m);
}

/* Builds ∂f/∂θk for every parameter. A limit hit here is reported against the whole text:
 * the derivatives, not any one span, are what grew too large. */
static int differentiate(struct jf_model *m, jf_diagnostics *diags) {
    m->df = calloc(m->np ? m->np : 1, sizeof *m->df);
    if (!m->df) return JF_ERR_NOMEM;
    for (size_t k = 0; k < m->np; k++) {
        m->df[k] = jf_dag_diff(m->dag, m->f, (uint32_t)k);
        if (m->df[k] == JF_NOREF) {
            int err = jf_dag_error(m->dag);
            if (err == JF_ERR_LIMIT)
                jf_diag_add(diags, JF_SEVERITY_ERROR, JF_ERR_LIMIT, SIZE_MAX, SIZE_MAX,
                            "the model and its derivatives need more than %zu expression nodes",
                            jf_dag_size(m->dag));
            return err ? err : JF_ERR_INTERNAL;
        }
    }
    /* The evaluator's schedule, built once: jf_model_eval is called per point. */
    jf_ref *roots = malloc((m->np + 1) * sizeof *roots);
    if (!roots) return JF_ERR_NOMEM;
    roots[0] = m->f;
    for (size_t k = 0; k < m->np; k++) roots[k + 1] = m->df[k];
    m->sched = jf_schedule_build(m->dag, roots, m->np + 1);
    free(roots);
    return m->sched ? JF_OK : JF_ERR_NOMEM;
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* jf_model_hold (values NULL) and jf_model_fix (values given): m with the parameters flagged in
 * fixed held, as parameters read after the fitted ones or as the numbers values[k]. */
static int rebuild(const struct jf_model *m, const int *fixed, const double *values,
                   struct jf_model **out) {
    *out = NULL;
    size_t total = jf_dag_size(m->dag), nall = m->np + m->nheld;
    struct jf_model *r = jf_model_alloc(jf_dag_max_nodes(m->dag));
    jf_ref *map = malloc((total ? total : 1) * sizeof *map);
    uint32_t *index = malloc((nall ? nall : 1) * sizeof *index);
    int st = r && map && index ? JF_OK : JF_ERR_NOMEM;
    size_t np = 0, nnew = 0;
    for (size_t k = 0; st == JF_OK && k < m->np; k++) np += !fixed[k];
    if (!values) nnew = m->np - np;
    /* p's new order: the parameters left, then the newly held ones (unless written in as
     * numbers), then those m held */
    for (size_t k = 0, j = 0, h = np; st == JF_OK && k < m->np; k++)
        index[k] = (uint32_t)(!fixed[k] ? j++ : values ? UINT32_MAX : h++);
    for (size_t k = m->np; st == JF_OK && k < nall; k++) index[k] = (uint32_t)(np + nnew + k - m->np);
    if (st == JF_OK) {
        r->np = np;
        r->nheld = nnew + m->nheld;
        r->nfixed = m->nfixed + (m->np - np);
        r->nv = m->nv;
        r->param_names = calloc(np ? np : 1, sizeof *r->param_names);
        r->p_init = malloc((np ? np : 1) * sizeof *r->p_init);
        r->p_lo = malloc((np ? np : 1) * sizeof *r->p_lo);
        r->p_hi = malloc((np ? np : 1) * sizeof *r->p_hi);
        r->var_names = calloc(m->nv ? m->nv : 1, sizeof *r->var_names);
        r->response = dup_or_null(m->response);
        r->source_name = dup_or_null(m->source_name);
        if (!r->param_names || !r->p_init || !r->p_lo || !r->p_hi || !r->var_names ||
            (m->response && !r->response) || (m->source_name && !r->source_name))
            st = JF_ERR_NOMEM;
    }
    for (size_t k = 0; st == JF_OK && k < m->np; k++) {
        if (fixed[k]) continue;
        uint32_t j = index[k];
        if (!(r->param_names[j] = strdup(m->param_names[k]))) st = JF_ERR_NOMEM;
        r->p_init[j] = m->p_init ? m->p_init[k] : NAN;
        r->p_lo[j] = m->p_lo ? m->p_lo[k] : -INFINITY;
        r->p_hi[j] = m->p_hi ? m->p_hi[k] : INFINITY;
    }
    for (size_t j = 0; st == JF_OK && j < m->nv; j++)
        if (!(r->var_names[j] = strdup(m->var_names[j]))) st = JF_ERR_NOMEM;
    /* Operands have smaller references than their users, so one upward sweep rebuilds f with
     * the parameters renumbered, and the constructors simplify again where numbers were
     * written in (b*x with b = 0 is 0). A held parameter that is not written in stays a
     * parameter node, read from p like the others: its value is not in the model, so one
     * compile serves every value it is held at. Only f is rebuilt: its derivatives are taken
     * afresh below, for the parameters left (a node of index >= np has none). */
    for (size_t i = 0; st == JF_OK && i <= (size_t)m->f; i++) {
        const jf_node *nd = jf_dag_node(m->dag, (jf_ref)i);
        jf_ref args[3] = {JF_NOREF, JF_NOREF, JF_NOREF};
        for (unsigned a = 0; a < nd->arity; a++) args[a] = map[nd->arg[a]];
        switch ((jf_op)nd->op) {
        case JF_OP_CONST: map[i] = jf_dag_const(r->dag, nd->value); break;
        case JF_OP_VAR: map[i] = jf_dag_var(r->dag, nd->index); break;
        case JF_OP_PARAM:
            map[i] = index[nd->index] == UINT32_MAX ? jf_dag_const(r->dag, values[nd->index])
                                                    : jf_dag_param(r->dag, index[nd->index]);
            break;
        default: map[i] = jf_dag_make(r->dag, (jf_op)nd->op, args); break;
        }
        if (map[i] == JF_NOREF) st = jf_dag_error(r->dag) ? jf_dag_error(r->dag) : JF_ERR_INTERNAL;
    }
    if (st == JF_OK) {
        r->f = map[m->f];
        st = differentiate(r, NULL);
    }
    free(map);
    free(index);
    if (st != JF_OK) {
        jf_model_free(r);
        return st;
    }
    *out = r;
    return JF_OK;
}

int jf_model_hold(const struct jf_model *m, const int *fixed, struct jf_model **out) {
    return rebuild(m, fixed, NULL, out);
}

int jf_model_fix(const struct jf_model *m, const int *fixed, const double *values,
                 struct jf_model **out) {
    return rebuild(m, fixed, values, out);
}

/* 1 when the exponent v of a POW node would make the written-in model evaluate it by jf_powi
 * (prelude.h's rule for constant exponents) where the reading model calls pow(). */
static int powi_exponent(double v) {
    return v >= -JF_POWI_MAX && v <= JF_POWI_MAX && v == (double)(int)v && v != 0.0 && v != 1.0;
}

int jf_model_hold_exact(const struct jf_model *r, const double *held) {
    /* Written in as numbers, the held values make every node that depends on them alone (and
     * on constants) a number — and a select whose condition does, its chosen branch; x^0 and
     * 1^x the number 1 — and the simplifier then applies its identities (codegen/expr.c). The
     * reading model computes the same values but where the written-in one
     *   - drops a term by 0*u → 0 or 0/u → 0, which IEEE arithmetic does not do where u is
     *     infinite or NaN (the first such drop in any chain has as its zero a node found here:
     *     a product's operand, a quotient's numerator);
     *   - drops a zero from a sum or difference (x+0 → x, x-0 → x, 0-x → -x), which can change
     *     the sign of a zero result, and with it 1/(0 - x) at x = 0;
     *   - evaluates a small integer power by multiplications (jf_powi) where the reading model
     *     calls pow(), which may differ in the last bit.
     * Each of those makes the fit take the written-in model. */
    size_t n = jf_dag_size(r->dag);
    double *val = malloc((n ? n : 1) * sizeof *val);
    unsigned char *pure = malloc(n ? n : 1); /* 1: a constant; 2: a number only where the held
                                                values are written in */
    int exact = val && pure;
    for (size_t i = 0; exact && i < n; i++) {
        const jf_node *nd = jf_dag_node(r->dag, (jf_ref)i);
        jf_op op = (jf_op)nd->op;
        const jf_ref *a = nd->arg;
        pure[i] = 0;
        if (op == JF_OP_CONST) {
            pure[i] = 1;
            val[i] = nd->value;
            continue;
        }
        if (op == JF_OP_VAR) continue;
        if (op == JF_OP_PARAM) {
            if (nd->index >= r->np) {
                pure[i] = 2;
                val[i] = held[nd->index - r->np];
            }
            continue;
        }
        if (op == JF_OP_SELECT && pure[a[0]] == 2) { /* the branch the number chooses */
            jf_ref b = jf_interp_op(JF_OP_SELECT, val[a[0]], 1.0, 0.0) != 0.0 ? a[1] : a[2];
            pure[i] = pure[b] ? 2 : 0;
            val[i] = val[b];
            continue;
        }
        int all = 1, any = 0;
        for (unsigned k = 0; k < nd->arity; k++) {
            all = all && pure[a[k]];
            any = any || pure[a[k]] == 2;
        }
        if (op == JF_OP_POW && pure[a[1]] == 2 && powi_exponent(val[a[1]])) exact = 0;
        if (all && any) {
            pure[i] = 2;
            val[i] = jf_interp_op(op, val[a[0]], nd->arity > 1 ? val[a[1]] : 0.0,
                                  nd->arity > 2 ? val[a[2]] : 0.0);
            continue;
        }
        switch (op) {
        case JF_OP_MUL:
        case JF_OP_ADD:
        case JF_OP_SUB:
            for (unsigned k = 0; k < 2; k++)
                if (pure[a[k]] == 2 && val[a[k]] == 0.0) exact = 0;
            break;
        case JF_OP_DIV:
            if (pure[a[0]] == 2 && val[a[0]] == 0.0) exact = 0;
            break;
        case JF_OP_POW: /* x^0 → 1, 1^x → 1 */
            if ((pure[a[1]] == 2 && val[a[1]] == 0.0) || (pure[a[0]] == 2 && val[a[0]] == 1.0)) {
                pure[i] = 2;
                val[i] = 1.0;
            }
            break;
        default: break;
        }
    }
    free(val);
    free(pure);
    return exact;
}

int jf_model_compile(const char *text, size_t len, const jf_model_options *opts, jf_model **out,
                     jf_diagnostics **diags_out) {
    if (diags_out) *diags_out = NULL;
    if (out) *out = NULL;
    if (!text || !out) return JF_ERR_ARG;
    if (len == (size_t)-1) len = strlen(text);
    jf_model_options o = opts ? *opts : jf_model_options_default();
    if (!o.source_name) o.source_name = "<model>";
    if (!o.max_depth) o.max_depth = 256;
    if (!o.max_source_bytes) o.max_source_bytes = (size_t)1 << 20;
    if (!o.max_nodes) o.max_nodes = JF_DAG_MAX_NODES;

    /* Quote at most the limit's worth of an oversized source in messages. */
    jf_diagnostics *diags =
        jf_diag_create(o.source_name, text, len > o.max_source_bytes ? o.max_source_bytes : len);
    if (!diags) return JF_ERR_NOMEM;
    struct jf_model *m = jf_model_alloc(o.max_nodes);
    int st = m ? JF_OK : JF_ERR_NOMEM;
    if (st == JF_OK) {
        m->source_name = strdup(o.source_name);
        if (!m->source_name) st = JF_ERR_NOMEM;
    }
    if (st == JF_OK) st = jf_frontend_compile(text, len, &o, m, diags);
    if (st == JF_OK && diags->nerrors) st = JF_ERR_PARSE;
    if (st == JF_OK) st = differentiate(m, diags);
    if (st == JF_OK && diags->nomem) st = JF_ERR_NOMEM;
    if (st != JF_OK) {
        if (st == JF_ERR_NOMEM && diags->n == 0)
            jf_diag_add(diags, JF_SEVERITY_ERROR, JF_ERR_NOMEM, SIZE_MAX, SIZE_MAX, "out of memory");
        jf_model_free(m);
        m = NULL;
    }
    *out = m;
    if (diags_out && diags->n) *diags_out = diags;
    else jf_diagnostics_free(diags);
    return st;
}

int jf_model_compile_file(const char *path, const jf_model_options *opts, jf_model **out,
                          jf_diagnostics **diags_out) {
    if (diags_out) *diags_out = NULL;
    if (out) *out = NULL;
    if (!path || !out) return JF_ERR_ARG;
    jf_model_options o = opts ? *opts : jf_model_options_default();
    size_t limit = o.max_source_bytes ? o.max_source_bytes : ((size_t)1 << 20);
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (diags_out) {
            jf_diagnostics *d = jf_diag_create(path, "", 0);
            if (d) jf_diag_add(d, JF_SEVERITY_ERROR, JF_ERR_IO, SIZE_MAX, SIZE_MAX,
                               "cannot open model file: %s", strerror(errno));
            *diags_out = d;
        }
        return JF_ERR_IO;
    }
    /* Read one byte past the limit so the front end can report the size against it. */
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    int st = buf ? JF_OK : JF_ERR_NOMEM, read_errno = 0;
    while (st == JF_OK) {
        if (n == cap) {
            if (n > limit) break;
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                st = JF_ERR_NOMEM;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        if (got == 0) {
            if (ferror(f)) {
                st = JF_ERR_IO;
                read_errno = errno; /* a directory opens; reading it fails with EISDIR */
            }
            break;
        }
        n += got;
    }
    fclose(f);
    if (st == JF_OK) {
        if (!opts || !opts->source_name || strcmp(opts->source_name, "<model>") == 0)
            o.source_name = path;
        st = jf_model_compile(buf, n, &o, out, diags_out);
    } else if (diags_out) {
        jf_diagnostics *d = jf_diag_create(path, "", 0);
        if (d && st == JF_ERR_IO)
            jf_diag_add(d, JF_SEVERITY_ERROR, st, SIZE_MAX, SIZE_MAX, "cannot read model file: %s",
                        strerror(read_errno));
        else if (d)
            jf_diag_add(d, JF_SEVERITY_ERROR, st, SIZE_MAX, SIZE_MAX, "out of memory");
        *diags_out = d;
    }
    free(buf);
    return st;
}

size_t jf_model_num_params(const jf_model *m) { return m ? m->np : 0; }
size_t jf_model_num_vars(const jf_model *m) { return m ? m->nv : 0; }

const char *jf_model_param_name(const jf_model *m, size_t k) {
    return (m && k < m->np) ? m->param_names[k] : NULL;
}

long jf_model_param_index(const jf_model *m, const char *name) {
    if (!m || !name) return -1;
    for (size_t k = 0; k < m->np; k++)
        if (strcmp(m->param_names[k], name) == 0) return (long)k;
    return -1;
}

double jf_model_param_initial(const jf_model *m, size_t k) {
    return (m && k < m->np) ? m->p_init[k] : NAN;
}

int jf_model_param_bounds(const jf_model *m, size_t k, double *lo, double *hi) {
    if (!m || k >= m->np) return JF_ERR_ARG;
    if (lo) *lo = m->p_lo[k];
    if (hi) *hi = m->p_hi[k];
    return JF_OK;
}

const char *jf_model_var_name(const jf_model *m, size_t j) {
    return (m && j < m->nv) ? m->var_names[j] : NULL;
}

const char *jf_model_response_name(const jf_model *m) { return m ? m->response : NULL; }

int jf_model_eval(const jf_model *m, const double *params, const double *vars, double *value,
                  double *grad) {
    if (!m || !value || (m->np && !params) || (m->nv && !vars)) return JF_ERR_ARG;
    return jf_interp_model_eval(m, params, vars, value, grad);
}

char *jf_model_expression_text(const jf_model *m) {
    if (!m) return NULL;
    return jf_dag_to_text(m->dag, m->f, (const char *const *)m->param_names,
                          (const char *const *)m->var_names);
}

char *jf_model_derivative_text(const jf_model *m, size_t k) {
    if (!m || k >= m->np) return NULL;
    return jf_dag_to_text(m->dag, m->df[k], (const char *const *)m->param_names,
                          (const char *const *)m->var_names);
}
