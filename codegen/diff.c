/* Symbolic differentiation: ∂f/∂p[k] built in the same DAG as f.
 *
 * Forward-mode rules applied by a memoized recursion over f: each node of f that depends on p[k]
 * is differentiated once per call (a hash table maps node → derivative), and any node that does
 * not depend on p[k] (the DAG's dependency mask) is 0 without being visited, so differentiating
 * with respect to each of many parameters costs only the part of f that involves it. The rules
 * reuse f's own nodes (d exp(u) = exp(u)·u' uses the exp node; d tan(u) uses tan(u)), and the
 * constructors' simplification drops the 0·u' and 0+u' terms, so f and its partials share most
 * of their nodes and the schedule computes them once.
 *
 * Recursion depth equals f's depth, which the resolver bounds by JF_DAG_MAX_DEPTH; deeper inputs
 * are refused with JF_ERR_LIMIT. Conventions at non-differentiable points (documented in
 * docs/DSL.md): d|u| = sign(u)·u' with sign(0) = 0; min/max take the derivative of the operand
 * fmin/fmax return (the first in canonical order at ties; the other one when an operand is NaN);
 * select differentiates its branches and not its condition; comparisons and sign have
 * derivative 0.
 */
#include <stdlib.h>

#include "expr.h"

/* ln 10 and 2/sqrt(pi), rounded to double (the M_ names are POSIX, not C11) */
#define LN10 2.302585092994045684017991454684364208
#define TWO_OVER_SQRTPI 1.128379167095512573896158903121545172

/* Memo of one jf_dag_diff call: open addressing on node references. */
typedef struct memo {
    jf_ref *keys; /* nodes of f already differentiated; JF_NOREF = empty slot */
    jf_ref *vals; /* their derivatives */
    size_t cap;   /* slots, a power of two */
    size_t n;     /* used slots */
} memo;

typedef struct ctx {
    jf_dag *d;  /* the DAG, where derivatives are built */
    uint32_t k; /* the parameter */
    memo m;     /* node → derivative */
    int nomem;  /* set when the memo could not grow */
} ctx;

static size_t slot_of(jf_ref r, size_t cap) {
    /* Fibonacci hashing: references are dense integers, multiply to spread them */
    return (size_t)(((uint64_t)r * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
}

static jf_ref memo_get(const memo *m, jf_ref r) {
    if (m->cap == 0)
        return JF_NOREF;
    for (size_t i = slot_of(r, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == r)
            return m->vals[i];
        if (m->keys[i] == JF_NOREF)
            return JF_NOREF;
    }
}

static void memo_put_raw(memo *m, jf_ref r, jf_ref v) {
    size_t i = slot_of(r, m->cap);
    while (m->keys[i] != JF_NOREF)
        i = (i + 1) & (m->cap - 1);
    m->keys[i] = r;
    m->vals[i] = v;
    m->n++;
}

static int memo_put(memo *m, jf_ref r, jf_ref v) {
    if (2 * (m->n + 1) > m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 64;
        memo g = {malloc(cap * sizeof(jf_ref)), malloc(cap * sizeof(jf_ref)), cap, 0};
        if (g.keys == NULL || g.vals == NULL) {
            free(g.keys);
            free(g.vals);
            return 0;
        }
        for (size_t i = 0; i < cap; i++)
            g.keys[i] = JF_NOREF;
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i] != JF_NOREF)
                memo_put_raw(&g, m->keys[i], m->vals[i]);
        free(m->keys);
        free(m->vals);
        *m = g;
    }
    memo_put_raw(m, r, v);
    return 1;
}

/* Short constructor names: the rules below read like the formulas they implement. */
static jf_ref C(ctx *c, double v) { return jf_dag_const(c->d, v); }
static jf_ref un(ctx *c, jf_op op, jf_ref a) { return jf_dag_unary(c->d, op, a); }
static jf_ref bin(ctx *c, jf_op op, jf_ref a, jf_ref b) { return jf_dag_binary(c->d, op, a, b); }
static jf_ref add(ctx *c, jf_ref a, jf_ref b) { return bin(c, JF_OP_ADD, a, b); }
static jf_ref sub(ctx *c, jf_ref a, jf_ref b) { return bin(c, JF_OP_SUB, a, b); }
static jf_ref mul(ctx *c, jf_ref a, jf_ref b) { return bin(c, JF_OP_MUL, a, b); }
static jf_ref dvd(ctx *c, jf_ref a, jf_ref b) { return bin(c, JF_OP_DIV, a, b); }
static jf_ref neg(ctx *c, jf_ref a) { return un(c, JF_OP_NEG, a); }
static jf_ref sq(ctx *c, jf_ref a) { return bin(c, JF_OP_POW, a, C(c, 2.0)); }
static jf_ref one_minus_sq(ctx *c, jf_ref a) {
    return mul(c, sub(c, C(c, 1.0), a), add(c, C(c, 1.0), a));
}

static jf_ref deriv(ctx *c, jf_ref f);

/* The derivative of node f, which depends on p[k]; u, v, w are its operands and du, dv, dw
 * their derivatives (computed lazily: most rules need only some). */
static jf_ref rule(ctx *c, jf_ref f) {
    jf_node nd = *jf_dag_node(c->d, f); /* a copy: constructors may move the node array */
    jf_ref u = nd.arg[0], v = nd.arg[1];
    switch ((jf_op)nd.op) {
    case JF_OP_PARAM: return C(c, nd.index == c->k ? 1.0 : 0.0);
    case JF_OP_CONST:
    case JF_OP_VAR:
    case JF_OP_SIGN:
    case JF_OP_LT:
    case JF_OP_LE:
    case JF_OP_GT:
    case JF_OP_GE:
    case JF_OP_EQ:
    case JF_OP_NE:
        /* piecewise constant: 0 (where they jump, the derivative does not exist; 0 is the
         * derivative everywhere else, and a fit cannot use more) */
        return C(c, 0.0);
    /* the condition is piecewise constant: only the branches are differentiated */
    case JF_OP_SELECT: return jf_dag_select(c->d, u, deriv(c, v), deriv(c, nd.arg[2]));
    default: break;
    }
    /* every remaining rule needs u' (nodes built for an unused derivative would be garbage) */
    jf_ref du = deriv(c, u);
    switch ((jf_op)nd.op) {
    case JF_OP_NEG: return neg(c, du);
    case JF_OP_EXP: return mul(c, f, du);
    case JF_OP_LOG: return dvd(c, du, u);
    /* (u'/u)/ln 10, not u'/(u ln 10): u ln 10 overflows for u beyond 7.8e307, where log10 is
     * fine (and u'/u is log's derivative, shared when both occur) */
    case JF_OP_LOG10: return dvd(c, dvd(c, du, u), C(c, LN10));
    /* infinite at u = 0, as the true derivative */
    case JF_OP_SQRT: return mul(c, dvd(c, C(c, 0.5), f), du);
    case JF_OP_CBRT: return dvd(c, du, mul(c, C(c, 3.0), sq(c, f)));
    /* sign(0) = 0: the derivative at the kink is 0 (the subgradient nearest to zero) */
    case JF_OP_ABS: return mul(c, un(c, JF_OP_SIGN, u), du);
    case JF_OP_SIN: return mul(c, un(c, JF_OP_COS, u), du);
    case JF_OP_COS: return mul(c, neg(c, un(c, JF_OP_SIN, u)), du);
    /* 1 + tan², reusing the tan node rather than building 1/cos² */
    case JF_OP_TAN: return mul(c, add(c, C(c, 1.0), sq(c, f)), du);
    /* √((1-u)(1+u)), not √(1-u²): near u = ±1 the square's rounding cancels (2.5e-11 relative
     * error at u = 1-1e-10) */
    case JF_OP_ASIN: return dvd(c, du, un(c, JF_OP_SQRT, one_minus_sq(c, u)));
    case JF_OP_ACOS: return neg(c, dvd(c, du, un(c, JF_OP_SQRT, one_minus_sq(c, u))));
    case JF_OP_ATAN: return dvd(c, du, add(c, C(c, 1.0), sq(c, u)));
    case JF_OP_SINH: return mul(c, un(c, JF_OP_COSH, u), du);
    case JF_OP_COSH: return mul(c, un(c, JF_OP_SINH, u), du);
    /* 1/cosh², not 1 - tanh²: tanh rounds to 1 beyond |u| ≈ 19, and 1 - tanh² lost all its
     * digits well before (4 % wrong at 18, exactly 0 at 20, where 1/cosh² is 3.4e-16) */
    case JF_OP_TANH: return dvd(c, du, sq(c, un(c, JF_OP_COSH, u)));
    case JF_OP_ERF:
    case JF_OP_ERFC: {
        /* 2/sqrt(pi) exp(-u²); erfc = 1 - erf flips the sign */
        jf_ref g = mul(c, mul(c, C(c, TWO_OVER_SQRTPI), un(c, JF_OP_EXP, neg(c, sq(c, u)))), du);
        return nd.op == JF_OP_ERF ? g : neg(c, g);
    }
    case JF_OP_ADD: return add(c, du, deriv(c, v));
    case JF_OP_SUB: return sub(c, du, deriv(c, v));
    case JF_OP_MUL: return add(c, mul(c, du, v), mul(c, u, deriv(c, v)));
    case JF_OP_DIV:
        /* (u' - (u/v)·v')/v: reuses the quotient node f instead of forming v² */
        return dvd(c, sub(c, du, mul(c, f, deriv(c, v))), v);
    case JF_OP_POW: {
        int u_dep = jf_dag_depends(c->d, u, c->k), v_dep = jf_dag_depends(c->d, v, c->k);
        jf_ref t1 = C(c, 0.0), t2 = C(c, 0.0);
        if (u_dep) {
            /* v·u^(v-1)·u'; with a constant v = c the exponent c-1 folds to a constant, so an
             * integer power stays on the jf_powi path */
            jf_ref vm1 = sub(c, v, C(c, 1.0));
            t1 = mul(c, mul(c, v, bin(c, JF_OP_POW, u, vm1)), du);
            /* a run-time exponent that is 0 makes u^v ≡ 1, derivative 0; at u = 0 the product
             * above would be 0·inf = NaN */
            if (jf_dag_node(c->d, v)->op != JF_OP_CONST)
                t1 = jf_dag_select(c->d, bin(c, JF_OP_EQ, v, C(c, 0.0)), C(c, 0.0), t1);
        }
        if (v_dep) {
            /* u^v·log(u)·v': NaN for u < 0, where u^v is itself only defined for integer v.
             * At u = 0 it is the limit 0 (u^v·log u → 0 for v > 0), taken as JAX does, with
             * log(1) for log(0): a power law a·x^b on data with x = 0 would otherwise have a
             * NaN Jacobian there (0·-inf) and could not even start. For v < 0, u^v = inf and
             * the product is still NaN, as it should be. */
            jf_ref safe_u = jf_dag_select(c->d, bin(c, JF_OP_EQ, u, C(c, 0.0)), C(c, 1.0), u);
            t2 = mul(c, mul(c, f, un(c, JF_OP_LOG, safe_u)), deriv(c, v));
        }
        return add(c, t1, t2);
    }
    case JF_OP_ATAN2: {
        /* atan2(y, x)' = (x y' - y x')/(x² + y²), as ((x/h) y' - (y/h) x')/h with h =
         * hypot(x, y): x² + y² overflows (or underflows) beyond about 1e±154, which made the
         * derivative NaN or infinite where atan2 itself is fine */
        jf_ref dv = deriv(c, v);
        jf_ref h = bin(c, JF_OP_HYPOT, v, u);
        return dvd(c, sub(c, mul(c, dvd(c, v, h), du), mul(c, dvd(c, u, h), dv)), h);
    }
    case JF_OP_HYPOT: {
        /* (a a' + b b')/h with h = hypot(a, b), as (a/h) a' + (b/h) b': a a' overflows (or
         * underflows) beyond about 1e±154, where hypot itself is fine; NaN at (0, 0), where
         * hypot has a cone point */
        jf_ref dv = deriv(c, v);
        return add(c, mul(c, dvd(c, u, f), du), mul(c, dvd(c, v, f), dv));
    }
    /* The derivative of the operand that fmin/fmax return: ties take the first operand's
     * (operands are in canonical order, see expr.c), and a NaN operand is ignored as fmin/fmax
     * ignore it, e.g. max(0, log(u)) where log(u) is NaN has derivative 0, not log's. Written
     *   min' = if(v < u, v', if(u != u, v', u'))    max' = if(v > u, v', if(u != u, v', u'))
     * which is if(u <= v, u', v') (resp. >=) whenever neither operand is NaN. */
    case JF_OP_MIN:
    case JF_OP_MAX: {
        jf_ref dv = deriv(c, v);
        jf_ref v_wins = bin(c, nd.op == JF_OP_MIN ? JF_OP_LT : JF_OP_GT, v, u);
        return jf_dag_select(c->d, v_wins, dv,
                             jf_dag_select(c->d, bin(c, JF_OP_NE, u, u), dv, du));
    }
    default: break;
    }
    jf_dag_set_error(c->d, JF_ERR_INTERNAL);
    return JF_NOREF;
}

static jf_ref deriv(ctx *c, jf_ref f) {
    if (f == JF_NOREF)
        return JF_NOREF;
    if (!jf_dag_depends(c->d, f, c->k))
        return C(c, 0.0);
    jf_ref r = memo_get(&c->m, f);
    if (r != JF_NOREF)
        return r;
    r = rule(c, f);
    if (r != JF_NOREF && !memo_put(&c->m, f, r)) {
        c->nomem = 1;
        jf_dag_set_error(c->d, JF_ERR_NOMEM);
        return JF_NOREF;
    }
    return r;
}

jf_ref jf_dag_diff(jf_dag *d, jf_ref f, uint32_t k) {
    if (d == NULL || f == JF_NOREF)
        return JF_NOREF;
    if (f >= jf_dag_size(d)) {
        jf_dag_set_error(d, JF_ERR_ARG);
        return JF_NOREF;
    }
    if (jf_dag_node(d, f)->depth > JF_DAG_MAX_DEPTH) {
        jf_dag_set_error(d, JF_ERR_LIMIT);
        return JF_NOREF;
    }
    ctx c = {d, k, {NULL, NULL, 0, 0}, 0};
    jf_ref r = deriv(&c, f);
    free(c.m.keys);
    free(c.m.vals);
    return c.nomem ? JF_NOREF : r;
}
