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
 * With vector math (jf_emit_options.vec_isa, opt-in) all three kernels are written instead as
 * a loop over blocks of points in GCC vector types calling SLEEF, plus the exact scalar loop for
 * the points after the last block; see "vector math" below.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "emit.h"
#include "prelude.h"

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

/* The body of the scalar point loop of `residual` (jacobian = 0) or `jacobian_row`
 * (jacobian = 1): point i's statements, then r[i - begin] and, for jacobian_row, its row of J.
 * y absent is 0 and w absent is 1: subtracting 0.0 and multiplying by 1.0 are exact, so one loop
 * serves all cases with the meaning of kernels.h. Shared by the scalar kernels and the scalar
 * tail of the vector kernels, so both compute a point alike. */
static void emit_point_r(jf_buf *b, const jf_schedule *s, int jacobian) {
    size_t np = jacobian ? s->nroots - 1 : 0;
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
}

static void emit_residual(jf_buf *b, const jf_emit_model *em) {
    const jf_schedule *s = em->sf;
    params_decl(b, em->suffix, "jf_residual");
    jf_buf_puts(b, ", double *restrict r)\n{\n");
    void_params(b);
    jf_emit_load_params(b, s, "    ");
    jf_buf_puts(b, "    for (size_t i = begin; i < end; i++) {\n");
    emit_point_r(b, s, 0);
    jf_buf_puts(b, "    }\n}\n\n");
}

static void emit_jacobian_row(jf_buf *b, const jf_emit_model *em) {
    const jf_schedule *s = em->sall;
    params_decl(b, em->suffix, "jf_jacobian_row");
    jf_buf_puts(b, ", double *restrict r,\n        double *restrict J)\n{\n");
    void_params(b);
    jf_buf_puts(b, "    (void)J;\n");
    jf_emit_load_params(b, s, "    ");
    jf_buf_puts(b, "    for (size_t i = begin; i < end; i++) {\n");
    emit_point_r(b, s, 1);
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

/* ---- vector math (jf_emit_options.vec_isa) ----------------------------------------------------
 *
 * The point loops run over blocks of JF_W points held in GCC vector types (jf_vd: __m256d or
 * __m512d), with the model's statements spelled as vector operations: + - * / and negation are
 * the IEEE operations of the scalar code lane by lane; sqrt is the correctly rounded vector
 * instruction; exp, log, sin, cos, ... are SLEEF's u10 functions (≤ 1.0 ulp; erfc, whose best
 * SLEEF version is 1.5 ulp, stays libm's); sin and cos of the same argument are one sincos call;
 * everything that is ours (jf_powi, comparisons, select, min/max, sign, abs) gives exactly the
 * scalar result, jf_powi by the same multiplications and the rest lane by lane. Points left over
 * after the last full block go through the exact scalar code. The sums of normal_eq are kept
 * per lane and added in lane order at the end, so results depend on the ISA but not on luck.
 * Robust losses are applied lane by lane with loss.h (their cost is small next to the model's).
 */

/* SLEEF functions the vector statements use: DSL operation, SLEEF stem, accuracy suffix. */
static const struct {
    jf_op op;
    const char *stem;
    const char *acc;
    int arity;
} vec_funcs[] = {
    {JF_OP_EXP, "exp", "u10", 1},     {JF_OP_LOG, "log", "u10", 1},
    {JF_OP_LOG10, "log10", "u10", 1}, {JF_OP_CBRT, "cbrt", "u10", 1},
    {JF_OP_SIN, "sin", "u10", 1},     {JF_OP_COS, "cos", "u10", 1},
    {JF_OP_TAN, "tan", "u10", 1},     {JF_OP_ASIN, "asin", "u10", 1},
    {JF_OP_ACOS, "acos", "u10", 1},   {JF_OP_ATAN, "atan", "u10", 1},
    {JF_OP_SINH, "sinh", "u10", 1},   {JF_OP_COSH, "cosh", "u10", 1},
    {JF_OP_TANH, "tanh", "u10", 1},   {JF_OP_ERF, "erf", "u10", 1},
    {JF_OP_POW, "pow", "u10", 2},     {JF_OP_ATAN2, "atan2", "u10", 2},
    {JF_OP_HYPOT, "hypot", "u05", 2},
};

void jf_emit_c_vec_prelude(jf_buf *b, const jf_emit_options *o) {
    if (o->vec_isa != JF_VEC_AVX2 && o->vec_isa != JF_VEC_AVX512) return;
    int avx512 = o->vec_isa == JF_VEC_AVX512, w = avx512 ? 8 : 4;
    const char *isa = avx512 ? "d8_%savx512f" : "d4_%savx2";
    /* GCC's generic vector types rather than <immintrin.h>: same ABI as __m256d/__m512d, and
     * parsing immintrin.h alone costs the compiler 0.25 s, three times the rest of the unit. */
    jf_buf_printf(b,
                  "/* ---- vector math: %s, %d lanes, SLEEF (libsleef.so.3) ---- */\n"
                  "typedef double jf_vd __attribute__((vector_size(%d))); /* a block of lanes */\n"
                  "typedef struct { jf_vd x, y; } jf_vd2; /* SLEEF's sincos result: sin, cos */\n"
                  "enum { JF_W = %d };\n",
                  avx512 ? "AVX-512F" : "AVX2", w, 8 * w, w);
    for (size_t f = 0; f < sizeof vec_funcs / sizeof vec_funcs[0]; f++) {
        char name[64];
        const char *stem = vec_funcs[f].stem;
        snprintf(name, sizeof name, isa, vec_funcs[f].acc);
        jf_buf_printf(b, "jf_vd Sleef_%s%s(jf_vd%s);\n", stem, name,
                      vec_funcs[f].arity == 2 ? ", jf_vd" : "");
        if (vec_funcs[f].op == JF_OP_SINH || vec_funcs[f].op == JF_OP_COSH)
            /* SLEEF's sinh/cosh overflow from |x| = 709.78, libm's only past 710.48: those
             * lanes take libm's finite value */
            jf_buf_printf(b,
                          "static inline jf_vd jf_v_%s(jf_vd a) {\n"
                          "    jf_vd r = Sleef_%s%s(a);\n"
                          "    for (int l = 0; l < JF_W; l++)\n"
                          "        if (r[l] - r[l] != 0.0 && __builtin_fabs(a[l]) < 710.5) r[l] = %s(a[l]);\n"
                          "    return r;\n}\n",
                          stem, stem, name, stem);
        else if (vec_funcs[f].op == JF_OP_TAN)
            /* SLEEF's tan flushes subnormal arguments to 0; tan(x) = x there */
            jf_buf_printf(b,
                          "static inline jf_vd jf_v_tan(jf_vd a) {\n"
                          "    jf_vd r = Sleef_tan%s(a);\n"
                          "    for (int l = 0; l < JF_W; l++)\n"
                          "        if (__builtin_fabs(a[l]) < 0x1p-1022) r[l] = a[l];\n"
                          "    return r;\n}\n",
                          name);
        else
            jf_buf_printf(b, "#define jf_v_%s Sleef_%s%s\n", stem, stem, name);
    }
    char name[64];
    snprintf(name, sizeof name, isa, "u10");
    jf_buf_printf(b, "jf_vd2 Sleef_sincos%s(jf_vd);\n#define jf_v_sincos Sleef_sincos%s\n", name,
                  name);
    jf_buf_puts(b,
                "static inline jf_vd jf_v_set1(double a) {\n"
                "    jf_vd v;\n"
                "    for (int l = 0; l < JF_W; l++) v[l] = a;\n"
                "    return v;\n}\n"
                "static inline jf_vd jf_v_load(const double *p) {\n"
                "    jf_vd v;\n"
                "    __builtin_memcpy(&v, p, sizeof v);\n"
                "    return v;\n}\n"
                "static inline void jf_v_store(double *p, jf_vd a) { __builtin_memcpy(p, &a, sizeof a); }\n"
                "/* Lane by lane: exactly the scalar function's results. */\n"
                "static inline jf_vd jf_v_map1(double (*f)(double), jf_vd a) {\n"
                "    for (int l = 0; l < JF_W; l++) a[l] = f(a[l]);\n"
                "    return a;\n}\n"
                "static inline jf_vd jf_v_map2(double (*f)(double, double), jf_vd a, jf_vd b) {\n"
                "    for (int l = 0; l < JF_W; l++) a[l] = f(a[l], b[l]);\n"
                "    return a;\n}\n"
                "static inline jf_vd jf_v_map3(double (*f)(double, double, double), jf_vd a,\n"
                "                              jf_vd b, jf_vd c) {\n"
                "    for (int l = 0; l < JF_W; l++) a[l] = f(a[l], b[l], c[l]);\n"
                "    return a;\n}\n"
                "/* sqrt is correctly rounded: the vector instruction gives libm's result. */\n"
                "static inline jf_vd jf_v_sqrt(jf_vd a) { return jf_v_map1(sqrt, a); }\n"
                "/* jf_powi's multiplications, lane-parallel (so bit-identical to it). */\n"
                "static inline jf_vd jf_v_powi(jf_vd x, int n) {\n"
                "    unsigned int m = n < 0 ? 0u - (unsigned int)n : (unsigned int)n;\n"
                "    jf_vd r = jf_v_set1(1.0), x0 = x;\n"
                "    while (m != 0u) {\n"
                "        if (m & 1u) r = r * x;\n"
                "        m >>= 1;\n"
                "        if (m != 0u) x = x * x;\n"
                "    }\n"
                "    if (n >= 0) return r;\n"
                "    jf_vd q = jf_v_set1(1.0) / r;\n"
                "    /* lanes where x^|n| overflowed from a finite x: jf_powi's (1/x)^|n| */\n"
                "    for (int l = 0; l < JF_W; l++)\n"
                "        if (r[l] - r[l] != 0.0 && x0[l] - x0[l] == 0.0) q[l] = jf_powi(x0[l], n);\n"
                "    return q;\n}\n"
                "/* Lanes added in lane order: the result does not depend on the compiler. */\n"
                "static inline double jf_v_sum(jf_vd a) {\n"
                "    double s = a[0];\n"
                "    for (int l = 1; l < JF_W; l++) s += a[l];\n"
                "    return s;\n}\n\n");
}

/* The value of schedule entry pos as a vector operand. */
static void vec_operand(jf_buf *b, const jf_schedule *s, size_t pos) {
    const jf_node *nd = jf_dag_node(s->dag, s->nodes[pos]);
    switch ((jf_op)nd->op) {
    case JF_OP_CONST:
        jf_buf_puts(b, "jf_v_set1(");
        jf_buf_double(b, nd->value);
        jf_buf_puts(b, ")");
        break;
    case JF_OP_PARAM: jf_buf_printf(b, "vp%u", (unsigned)nd->index); break;
    case JF_OP_VAR: jf_buf_printf(b, "x%u", (unsigned)nd->index); break;
    default: jf_buf_printf(b, "t%zu", pos); break;
    }
}

static jf_op sched_op(const jf_schedule *s, size_t pos) {
    return (jf_op)jf_dag_node(s->dag, s->nodes[pos])->op;
}

/* `const jf_vd vp<k> = jf_v_set1(p<k>);` for every parameter s uses (p<k> already loaded). */
static void vec_load_params(jf_buf *b, const jf_schedule *s, const char *ind) {
    for (size_t i = 0; i < s->n; i++) {
        const jf_node *nd = jf_dag_node(s->dag, s->nodes[i]);
        if (nd->op == JF_OP_PARAM)
            jf_buf_printf(b, "%sconst jf_vd vp%u = jf_v_set1(p%u);\n", ind, (unsigned)nd->index,
                          (unsigned)nd->index);
    }
}

static void vec_load_vars(jf_buf *b, const jf_schedule *s, const char *ind) {
    for (size_t i = 0; i < s->n; i++) {
        const jf_node *nd = jf_dag_node(s->dag, s->nodes[i]);
        if (nd->op == JF_OP_VAR)
            jf_buf_printf(b, "%sconst jf_vd x%u = jf_v_load(x + %u * ldx + i);\n", ind,
                          (unsigned)nd->index, (unsigned)nd->index);
    }
}

/* Lane-by-lane spelling of the operations that are not SLEEF calls or operators. */
static const char *vec_lane_name(jf_op op) {
    switch (op) {
    case JF_OP_ABS: return "fabs";
    case JF_OP_ERFC: return "erfc"; /* SLEEF's erfc is 1.5 ulp: keep libm's */
    case JF_OP_SIGN: return "jf_sign";
    case JF_OP_MIN: return "jf_min";
    case JF_OP_MAX: return "jf_max";
    case JF_OP_LT: return "jf_lt";
    case JF_OP_LE: return "jf_le";
    case JF_OP_GT: return "jf_gt";
    case JF_OP_GE: return "jf_ge";
    case JF_OP_EQ: return "jf_eq";
    case JF_OP_NE: return "jf_ne";
    case JF_OP_SELECT: return "jf_select";
    default: return NULL;
    }
}

/* One `const jf_vd t<n> = ...;` per operation of s (see the comment above jf_emit_c_vec_prelude). */
static void vec_statements(jf_buf *b, const jf_schedule *s, const char *ind) {
    for (size_t i = 0; i < s->n; i++) {
        const jf_node *nd = jf_dag_node(s->dag, s->nodes[i]);
        jf_op op = (jf_op)nd->op;
        if (op == JF_OP_CONST || op == JF_OP_PARAM || op == JF_OP_VAR) continue;
        const uint32_t *ap = &s->argpos[3 * i];
        if (op == JF_OP_SIN || op == JF_OP_COS) {
            size_t j = jf_emit_sincos_partner(s, i);
            if (j < s->n) {
                size_t first = j < i ? j : i;
                if (first == i) {
                    jf_buf_printf(b, "%sconst jf_vd2 sc%zu = jf_v_sincos(", ind, i);
                    vec_operand(b, s, ap[0]);
                    jf_buf_puts(b, ");\n");
                }
                jf_buf_printf(b, "%sconst jf_vd t%zu = sc%zu.%c;\n", ind, i, first,
                              op == JF_OP_SIN ? 'x' : 'y');
                continue;
            }
        }
        jf_buf_printf(b, "%sconst jf_vd t%zu = ", ind, i);
        const char *infix = op == JF_OP_ADD   ? " + "
                            : op == JF_OP_SUB ? " - "
                            : op == JF_OP_MUL ? " * "
                            : op == JF_OP_DIV ? " / "
                                              : NULL;
        const char *lane = vec_lane_name(op);
        if (op == JF_OP_NEG) {
            jf_buf_puts(b, "-");
            vec_operand(b, s, ap[0]);
        } else if (infix) {
            vec_operand(b, s, ap[0]);
            jf_buf_puts(b, infix);
            vec_operand(b, s, ap[1]);
        } else if (op == JF_OP_SQRT) {
            jf_buf_puts(b, "jf_v_sqrt(");
            vec_operand(b, s, ap[0]);
            jf_buf_puts(b, ")");
        } else if (op == JF_OP_POW && sched_op(s, ap[1]) == JF_OP_CONST &&
                   jf_dag_node(s->dag, s->nodes[ap[1]])->value >= -JF_POWI_MAX &&
                   jf_dag_node(s->dag, s->nodes[ap[1]])->value <= JF_POWI_MAX &&
                   jf_dag_node(s->dag, s->nodes[ap[1]])->value ==
                       (double)(int)jf_dag_node(s->dag, s->nodes[ap[1]])->value) {
            /* the project's POW rule (prelude.h): small integer constants are jf_powi */
            jf_buf_puts(b, "jf_v_powi(");
            vec_operand(b, s, ap[0]);
            jf_buf_printf(b, ", %d)", (int)jf_dag_node(s->dag, s->nodes[ap[1]])->value);
        } else if (lane) {
            jf_buf_printf(b, "jf_v_map%u(%s", (unsigned)nd->arity, lane);
            for (unsigned a = 0; a < nd->arity; a++) {
                jf_buf_puts(b, ", ");
                vec_operand(b, s, ap[a]);
            }
            jf_buf_puts(b, ")");
        } else {
            const char *stem = NULL;
            for (size_t f = 0; f < sizeof vec_funcs / sizeof vec_funcs[0]; f++)
                if (vec_funcs[f].op == op) stem = vec_funcs[f].stem;
            jf_buf_printf(b, "jf_v_%s(", stem ? stem : "unknown_op");
            for (unsigned a = 0; a < nd->arity; a++) {
                if (a) jf_buf_puts(b, ", ");
                vec_operand(b, s, ap[a]);
            }
            jf_buf_puts(b, ")");
        }
        jf_buf_puts(b, ";\n");
    }
}

/* The vector block loop's head (loads and statements of s) for the functions below. */
static void vec_block_head(jf_buf *b, const jf_schedule *s) {
    jf_buf_puts(b, "    size_t i = begin;\n"
                   "    for (; end - i >= JF_W; i += JF_W) {\n");
    vec_load_vars(b, s, "        ");
    vec_statements(b, s, "        ");
    jf_buf_puts(b, "        const jf_vd yi = y ? jf_v_load(y + i) : jf_v_set1(0.0);\n");
}

static void emit_residual_vec(jf_buf *b, const jf_emit_model *em) {
    const jf_schedule *s = em->sf;
    params_decl(b, em->suffix, "jf_residual");
    jf_buf_puts(b, ", double *restrict r)\n{\n");
    void_params(b);
    jf_emit_load_params(b, s, "    ");
    vec_load_params(b, s, "    ");
    vec_block_head(b, s);
    jf_buf_puts(b, "        const jf_vd wi = w ? jf_v_load(w + i) : jf_v_set1(1.0);\n"
                   "        jf_v_store(r + (i - begin), (");
    vec_operand(b, s, s->rootpos[0]);
    jf_buf_puts(b, " - yi) * wi);\n    }\n    for (; i < end; i++) {\n");
    emit_point_r(b, s, 0);
    jf_buf_puts(b, "    }\n}\n\n");
}

static void emit_jacobian_row_vec(jf_buf *b, const jf_emit_model *em) {
    const jf_schedule *s = em->sall;
    size_t np = em->m->np;
    params_decl(b, em->suffix, "jf_jacobian_row");
    jf_buf_puts(b, ", double *restrict r,\n        double *restrict J)\n{\n");
    void_params(b);
    jf_buf_puts(b, "    (void)J;\n");
    jf_emit_load_params(b, s, "    ");
    vec_load_params(b, s, "    ");
    vec_block_head(b, s);
    jf_buf_puts(b, "        const jf_vd wi = w ? jf_v_load(w + i) : jf_v_set1(1.0);\n"
                   "        jf_v_store(r + (i - begin), (");
    vec_operand(b, s, s->rootpos[0]);
    jf_buf_puts(b, " - yi) * wi);\n");
    for (size_t k = 0; k < np; k++) {
        jf_buf_printf(b, "        const jf_vd J%zu = ", k);
        vec_operand(b, s, s->rootpos[k + 1]);
        jf_buf_puts(b, " * wi;\n");
    }
    if (np) {
        jf_buf_printf(b, "        double *restrict Jb = J + (i - begin) * %zu;\n"
                         "        for (int l = 0; l < JF_W; l++) {\n", np);
        for (size_t k = 0; k < np; k++)
            jf_buf_printf(b, "            Jb[l * %zu + %zu] = J%zu[l];\n", np, k, k);
        jf_buf_puts(b, "        }\n");
    }
    jf_buf_puts(b, "    }\n    for (; i < end; i++) {\n");
    emit_point_r(b, s, 1);
    jf_buf_puts(b, "    }\n}\n\n");
}

/* One vector loop for every case (y and w are tested once per block, the loss too: next to
 * JF_W points' transcendentals the tests cost nothing, and one loop keeps the compile short),
 * then the exact scalar loop for the points after the last full block. */
static void emit_normal_eq_vec(jf_buf *b, const jf_emit_model *em) {
    const jf_schedule *s = em->sall;
    size_t np = em->m->np, nacc = jf_emit_num_acc(np);
    params_decl(b, em->suffix, "jf_normal_eq");
    jf_buf_puts(b, ", int loss, double f_scale,\n        double *restrict acc)\n{\n");
    void_params(b);
    jf_emit_load_params(b, s, "    ");
    vec_load_params(b, s, "    ");
    jf_buf_puts(b, "    const double fs2 = f_scale * f_scale, ifs2 = 1.0 / fs2;\n");
    for (size_t q = 0; q < nacc; q++)
        jf_buf_printf(b, "    jf_vd va%zu = jf_v_set1(0.0);\n    double a%zu = 0.0;\n", q, q);
    vec_block_head(b, s);
    jf_buf_puts(b, "        jf_vd r = ");
    vec_operand(b, s, s->rootpos[0]);
    jf_buf_puts(b, " - yi;\n");
    for (size_t k = 0; k < np; k++) {
        jf_buf_printf(b, "        jf_vd J%zu = ", k);
        vec_operand(b, s, s->rootpos[k + 1]);
        jf_buf_puts(b, ";\n");
    }
    jf_buf_puts(b, "        if (w) {\n"
                   "            const jf_vd wi = jf_v_load(w + i);\n"
                   "            r = r * wi;\n");
    for (size_t k = 0; k < np; k++) jf_buf_printf(b, "            J%zu = J%zu * wi;\n", k, k);
    jf_buf_puts(b, "        }\n"
                   "        jf_vd cost = r * r;\n"
                   "        if (loss != 0) {\n"
                   "            for (int l = 0; l < JF_W; l++) {\n"
                   "                double rs, js;\n"
                   "                cost[l] = jf_loss_scale(loss, r[l], fs2, ifs2, &rs, &js);\n"
                   "                r[l] = rs;\n");
    for (size_t k = 0; k < np; k++) jf_buf_printf(b, "                J%zu[l] *= js;\n", k);
    jf_buf_puts(b, "            }\n        }\n");
    size_t q = 0;
    for (size_t k = 0; k < np; k++)
        for (size_t l = k; l < np; l++)
            jf_buf_printf(b, "        va%zu += J%zu * J%zu;\n", q++, k, l);
    for (size_t k = 0; k < np; k++) jf_buf_printf(b, "        va%zu += J%zu * r;\n", q++, k);
    jf_buf_printf(b, "        va%zu += cost;\n    }\n    for (; i < end; i++) {\n", q);
    neq_case general = {0, 2, 2};
    emit_point_rj(b, em, general, "        ");
    emit_cost(b, np, "        ");
    emit_accumulate(b, np, "        ", "cost");
    jf_buf_puts(b, "    }\n");
    for (q = 0; q < nacc; q++) jf_buf_printf(b, "    acc[%zu] = jf_v_sum(va%zu) + a%zu;\n", q, q, q);
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
    if (o->vec_isa != JF_VEC_NONE) {
        emit_residual_vec(b, em);
        emit_jacobian_row_vec(b, em);
        if (!o->no_normal_eq) emit_normal_eq_vec(b, em);
        return;
    }
    emit_residual(b, em);
    emit_jacobian_row(b, em);
    if (!o->no_normal_eq) emit_normal_eq(b, em, o);
}
