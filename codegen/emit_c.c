/* The C emitter: one model's residual, jacobian_row and normal_eq as C11 functions with the ABI
 * described in emit.h, for runtime/jit_cc.c to compile into a shared object.
 *
 * normal_eq is the hot loop of every CPU fit, so it is written for the compiler:
 * - the model's straight-line code sits inside the point loop, parameters are hoisted into
 *   locals, and the sums live in scalar locals a<q> (registers), stored to acc once at the end;
 * - the loop is versioned on what the caller passes, so the common cases carry no per-point test
 *   and no multiply by an absent weight: (linear loss, y, no w), (linear loss, y, w), and one
 *   general loop for robust losses or a missing y;
 * - the shape of the loop (plain, `omp simd`, or blocked) is an option; which one is the default
 *   is decided by measurement (docs/PERFORMANCE.md).
 * residual and jacobian_row are not hot (cost-only trial steps, verification, materialised J)
 * and use one general loop each.
 */
#include <stdio.h>
#include <string.h>

#include "emit.h"

/* normal_eq gets versions for (linear, y, no w) and (linear, y, w) only up to this many sums
 * (np <= 8); see emit_normal_eq. */
#define JF_EMIT_VERSIONED_MAX_ACC 45

/* What one version of the normal_eq loop may assume. */
typedef struct neq_case {
    int y_given;  /* 1: y is not NULL; 0: test it per point */
    int w;        /* 0: w is NULL, 1: w is not NULL, 2: test it per point */
    int loss;     /* 0: linear, 2: test `loss` per point (robust or linear) */
} neq_case;

static void params_decl(jf_buf *b, const char *suffix, const char *name) {
    jf_buf_printf(b,
                  "void %s%s(const double *restrict p, const double *restrict x, size_t ldx,\n"
                  "        const double *restrict y, const double *restrict w, size_t begin,\n"
                  "        size_t end",
                  name, suffix);
}

/* Silences unused-parameter warnings for models that use no variable or no parameter. */
static void void_params(jf_buf *b) {
    jf_buf_puts(b, "    (void)p;\n    (void)x;\n    (void)ldx;\n");
}

static void emit_residual(jf_buf *b, const jf_emit_model *em) {
    const jf_schedule *s = em->sf;
    params_decl(b, em->suffix, "jf_residual");
    jf_buf_puts(b, ", double *restrict r)\n{\n");
    void_params(b);
    jf_emit_load_params(b, s, "    ");
    jf_buf_puts(b, "    for (size_t i = begin; i < end; i++) {\n");
    jf_emit_load_vars(b, s, "        ");
    jf_emit_statements(b, s, "        ");
    /* y absent is 0 and w absent is 1: subtracting 0.0 and multiplying by 1.0 are exact, so
     * one loop serves all cases with the meaning of kernels.h. */
    jf_buf_puts(b, "        const double yi = y ? y[i] : 0.0;\n"
                   "        const double wi = w ? w[i] : 1.0;\n"
                   "        r[i - begin] = (");
    jf_emit_operand(b, s, s->rootpos[0]);
    jf_buf_puts(b, " - yi) * wi;\n    }\n}\n\n");
}

static void emit_jacobian_row(jf_buf *b, const jf_emit_model *em) {
    const jf_schedule *s = em->sall;
    size_t np = em->m->np;
    params_decl(b, em->suffix, "jf_jacobian_row");
    jf_buf_puts(b, ", double *restrict r,\n        double *restrict J)\n{\n");
    void_params(b);
    jf_buf_puts(b, "    (void)J;\n");
    jf_emit_load_params(b, s, "    ");
    jf_buf_puts(b, "    for (size_t i = begin; i < end; i++) {\n");
    jf_emit_load_vars(b, s, "        ");
    jf_emit_statements(b, s, "        ");
    jf_buf_puts(b, "        const double yi = y ? y[i] : 0.0;\n"
                   "        const double wi = w ? w[i] : 1.0;\n"
                   "        r[i - begin] = (");
    jf_emit_operand(b, s, s->rootpos[0]);
    jf_buf_puts(b, " - yi) * wi;\n");
    if (np) jf_buf_printf(b, "        double *restrict Ji = J + (i - begin) * %zu;\n", np);
    for (size_t k = 0; k < np; k++) {
        jf_buf_printf(b, "        Ji[%zu] = ", k);
        jf_emit_operand(b, s, s->rootpos[k + 1]);
        jf_buf_puts(b, " * wi;\n");
    }
    jf_buf_puts(b, "    }\n}\n\n");
}

/* The residual r and the row J<k> of point i, weighted as c says, as local definitions. */
static void emit_point_rj(jf_buf *b, const jf_emit_model *em, neq_case c, const char *ind) {
    const jf_schedule *s = em->sall;
    jf_emit_load_vars(b, s, ind);
    jf_emit_statements(b, s, ind);
    jf_buf_printf(b, "%sconst double yi = %s;\n", ind, c.y_given ? "y[i]" : "y ? y[i] : 0.0");
    if (c.w) jf_buf_printf(b, "%sconst double wi = %s;\n", ind, c.w == 1 ? "w[i]" : "w ? w[i] : 1.0");
    jf_buf_printf(b, "%sdouble r = (", ind);
    jf_emit_operand(b, s, s->rootpos[0]);
    jf_buf_printf(b, " - yi)%s;\n", c.w ? " * wi" : "");
    for (size_t k = 0; k < em->m->np; k++) {
        jf_buf_printf(b, "%sdouble J%zu = ", ind, k);
        jf_emit_operand(b, s, s->rootpos[k + 1]);
        jf_buf_printf(b, "%s;\n", c.w ? " * wi" : "");
    }
}

/* Defines `cost`, the point's term of the last sum: r² for the linear loss, else f_scale² rho
 * after scaling r and J<k> in place as scipy does. One accumulation follows for every loss, so
 * the general loop holds the O(np²) sums once. */
static void emit_cost(jf_buf *b, size_t np, const char *ind) {
    jf_buf_printf(b, "%sdouble cost;\n%sif (loss == 0) {\n%s    cost = r * r;\n%s} else {\n"
                     "%s    double js;\n%s    cost = jf_loss_scale(loss, r, fs2, ifs2, &r, &js);\n",
                  ind, ind, ind, ind, ind, ind);
    for (size_t k = 0; k < np; k++) jf_buf_printf(b, "%s    J%zu *= js;\n", ind, k);
    jf_buf_printf(b, "%s}\n", ind);
}

/* a<q> += ... for the packed triangle, the gradient and the cost (`cost_expr`). */
static void emit_accumulate(jf_buf *b, size_t np, const char *ind, const char *cost_expr) {
    size_t q = 0;
    for (size_t k = 0; k < np; k++)
        for (size_t l = k; l < np; l++) jf_buf_printf(b, "%sa%zu += J%zu * J%zu;\n", ind, q++, k, l);
    for (size_t k = 0; k < np; k++) jf_buf_printf(b, "%sa%zu += J%zu * r;\n", ind, q++, k);
    jf_buf_printf(b, "%sa%zu += %s;\n", ind, q, cost_expr);
}

static void emit_reduction_clause(jf_buf *b, size_t nacc) {
    jf_buf_puts(b, "reduction(+:");
    for (size_t q = 0; q < nacc; q++) jf_buf_printf(b, "%sa%zu", q ? "," : " ", q);
    jf_buf_puts(b, ")");
}

/* One version of the fused loop (shapes FUSED and SIMD). */
static void emit_neq_fused(jf_buf *b, const jf_emit_model *em, int simd, neq_case c) {
    size_t np = em->m->np, nacc = jf_emit_num_acc(np);
    if (simd) {
        jf_buf_puts(b, "        #pragma omp simd ");
        emit_reduction_clause(b, nacc);
        jf_buf_puts(b, "\n");
    }
    jf_buf_puts(b, "        for (size_t i = begin; i < end; i++) {\n");
    emit_point_rj(b, em, c, "            ");
    if (c.loss == 0) {
        emit_accumulate(b, np, "            ", "r * r");
    } else {
        emit_cost(b, np, "            ");
        emit_accumulate(b, np, "            ", "cost");
    }
    jf_buf_puts(b, "        }\n");
}

/* One version of the blocked loop: phase 1 fills R[], C[] and Jk[] for up to B points
 * (scalar: it calls libm), phase 2 adds them into per-lane sums L<q>[] with a loop over the
 * block that has no calls and no dependences between lanes, so it vectorizes. */
static void emit_neq_blocked(jf_buf *b, const jf_emit_model *em, neq_case c) {
    size_t np = em->m->np;
    jf_buf_puts(b, "        for (size_t i0 = begin; i0 < end; i0 += JF_B) {\n"
                   "            const size_t nb = end - i0 < JF_B ? end - i0 : JF_B;\n"
                   "            double R[JF_B], C[JF_B]");
    for (size_t k = 0; k < np; k++) jf_buf_printf(b, ", B%zu[JF_B]", k);
    jf_buf_puts(b, ";\n            for (size_t bi = 0; bi < JF_B; bi++) {\n"
                   "                if (bi >= nb) {\n"
                   "                    R[bi] = 0.0;\n                    C[bi] = 0.0;\n");
    for (size_t k = 0; k < np; k++) jf_buf_printf(b, "                    B%zu[bi] = 0.0;\n", k);
    jf_buf_puts(b, "                    continue;\n                }\n"
                   "                const size_t i = i0 + bi;\n");
    emit_point_rj(b, em, c, "                ");
    if (c.loss == 0) {
        jf_buf_puts(b, "                C[bi] = r * r;\n");
    } else {
        emit_cost(b, np, "                ");
        jf_buf_puts(b, "                C[bi] = cost;\n");
    }
    jf_buf_puts(b, "                R[bi] = r;\n");
    for (size_t k = 0; k < np; k++) jf_buf_printf(b, "                B%zu[bi] = J%zu;\n", k, k);
    jf_buf_puts(b, "            }\n            #pragma omp simd\n"
                   "            for (size_t bi = 0; bi < JF_B; bi++) {\n");
    size_t q = 0;
    for (size_t k = 0; k < np; k++)
        for (size_t l = k; l < np; l++)
            jf_buf_printf(b, "                L%zu[bi] += B%zu[bi] * B%zu[bi];\n", q++, k, l);
    for (size_t k = 0; k < np; k++)
        jf_buf_printf(b, "                L%zu[bi] += B%zu[bi] * R[bi];\n", q++, k);
    jf_buf_printf(b, "                L%zu[bi] += C[bi];\n            }\n        }\n", q);
}

static void emit_normal_eq(jf_buf *b, const jf_emit_model *em, const jf_emit_options *o) {
    const jf_schedule *s = em->sall;
    size_t np = em->m->np, nacc = jf_emit_num_acc(np);
    jf_neq_shape shape = o->neq_shape;
    /* Lane sums of the blocked shape live on the stack: beyond 32 KiB, use the fused loop. */
    int blocked = shape == JF_NEQ_BLOCKED && nacc * (size_t)o->block * 8 <= 32768;
    params_decl(b, em->suffix, "jf_normal_eq");
    jf_buf_puts(b, ", int loss, double f_scale,\n        double *restrict acc)\n{\n");
    void_params(b);
    jf_emit_load_params(b, s, "    ");
    if (blocked) {
        jf_buf_printf(b, "    enum { JF_B = %d };\n", o->block);
        for (size_t q = 0; q < nacc; q++)
            jf_buf_printf(b, "    double L%zu[JF_B] = {0.0};\n", q);
    } else {
        for (size_t q = 0; q < nacc; q++) jf_buf_printf(b, "    double a%zu = 0.0;\n", q);
    }
    /* Versions for the common cases pay off while the sums are few; with many, the sums
     * dominate both the run time (the per-point tests are noise) and the compile time (each
     * version costs the compiler as much as the rest of the file), so one general loop. */
    static const neq_case cases[3] = {{1, 0, 0}, {1, 1, 0}, {0, 2, 2}};
    int first = nacc <= JF_EMIT_VERSIONED_MAX_ACC ? 0 : 2;
    for (int ci = first; ci < 3; ci++) {
        if (ci == 0) jf_buf_puts(b, "    if (loss == 0 && y && !w) {\n");
        else if (ci == 1) jf_buf_puts(b, "    } else if (loss == 0 && y) {\n");
        else jf_buf_puts(b, first == 2 ? "    {\n" : "    } else {\n");
        if (ci == 2)
            jf_buf_puts(b, "        const double fs2 = f_scale * f_scale, ifs2 = 1.0 / fs2;\n"
                           "        (void)fs2;\n        (void)ifs2;\n");
        if (blocked) emit_neq_blocked(b, em, cases[ci]);
        else emit_neq_fused(b, em, shape == JF_NEQ_SIMD, cases[ci]);
    }
    jf_buf_puts(b, "    }\n");
    if (blocked) {
        for (size_t q = 0; q < nacc; q++) {
            /* lanes summed in a fixed order, so results do not depend on the vector width */
            jf_buf_printf(b, "    acc[%zu] = L%zu[0]", q, q);
            for (int l = 1; l < o->block; l++) jf_buf_printf(b, " + L%zu[%d]", q, l);
            jf_buf_puts(b, ";\n");
        }
    } else {
        for (size_t q = 0; q < nacc; q++) jf_buf_printf(b, "    acc[%zu] = a%zu;\n", q, q);
    }
    jf_buf_puts(b, "}\n\n");
}

void jf_emit_c_model(jf_buf *b, const jf_emit_model *em, const jf_emit_options *o) {
    const struct jf_model *m = em->m;
    jf_buf_printf(b,
                  "/* ---- model%s%s: %zu parameter(s), %zu variable(s); %zu operations for f, "
                  "%zu for f and its gradient ---- */\n",
                  em->suffix[0] ? " " : "", em->suffix, m->np, m->nv, em->sf->n, em->sall->n);
    jf_buf_puts(b, "#include <stddef.h>\n\n");
    jf_buf_printf(b, "const int jf_abi_version%s = %d;\n", em->suffix, JF_EMIT_ABI_VERSION);
    jf_buf_printf(b, "const int jf_num_params%s = %zu;\n", em->suffix, m->np);
    jf_buf_printf(b, "const int jf_num_vars%s = %zu;\n\n", em->suffix, m->nv);
    emit_residual(b, em);
    emit_jacobian_row(b, em);
    emit_normal_eq(b, em, o);
}
