/* Hash-consed expression DAG: interning, simplification at construction, operation tables.
 *
 * Every node is built through jf_dag_make (the other constructors are thin wrappers). It checks
 * the operands, tries the simplification rules (constant folding, then exact identities), and
 * only when no rule applies interns the node: a hash table keyed by (op, index, operands, bit
 * pattern of the value) returns the existing reference for a node that already exists. That is
 * what gives common-subexpression elimination for free and lets f and its derivatives share
 * every subterm they have in common.
 *
 * Simplification policy: a rule may only rewrite an expression into one that computes the same
 * IEEE value for every input, with the few listed exceptions (marked CAVEAT) where a zero's sign
 * or a NaN/Inf operand can differ; those are accepted because derivatives would otherwise be
 * littered with 0*u' and 0+u' terms. Rewrites that change values (x-x → 0, x/x → 1,
 * reassociation, distribution) are never done. The rules are summarised in docs/DSL.md.
 *
 * Beside each node the DAG keeps a parameter-dependency mask so that differentiation can skip
 * subtrees that do not depend on the parameter at hand (diff.c).
 */
#include <stdlib.h>
#include <string.h>

#include "expr.h"
#include "interp.h"
#include "prelude.h"

/* Parameters k >= DEP_BITS-1 share the last bit of the mask; for them the range [lo, hi] of
 * parameter numbers narrows the answer (a false "depends" only costs work, never correctness). */
#define DEP_BITS 64u

/* What a node depends on. */
typedef struct deps {
    uint64_t mask; /* bit min(k, DEP_BITS-1) set when the node depends on p[k] */
    uint32_t lo;   /* smallest k it depends on (UINT32_MAX: none) */
    uint32_t hi;   /* largest k it depends on (0 when none) */
} deps;

static const deps no_deps = {0, UINT32_MAX, 0};

struct jf_dag {
    jf_node *nodes;    /* n nodes in creation order (children before parents) */
    deps *deps;        /* per node: which parameters it depends on */
    size_t n;          /* number of nodes */
    size_t cap;        /* allocated entries of nodes and deps */
    size_t max_nodes;  /* node limit (jf_dag_create) */
    uint32_t *slots;   /* open-addressing hash table of node references; JF_NOREF = empty */
    size_t nslots;     /* size of slots, a power of two, kept at least twice n */
    int error;         /* first error met by a constructor (JF_OK while none) */
};

/* ---------------------------------------------------------------------------------------------
 * Tables
 */

/* Indexed by jf_op; names are the DSL spellings (SELECT prints as the DSL's `if`). */
static const jf_op_info op_table[JF_OP_COUNT] = {
    [JF_OP_CONST] = {"const", 0, 0, 0},
    [JF_OP_PARAM] = {"param", 0, 0, 0},
    [JF_OP_VAR] = {"var", 0, 0, 0},
    [JF_OP_NEG] = {"-", 1, 0, 0},
    [JF_OP_EXP] = {"exp", 1, 0, 0},
    [JF_OP_LOG] = {"log", 1, 0, 0},
    [JF_OP_LOG10] = {"log10", 1, 0, 0},
    [JF_OP_SQRT] = {"sqrt", 1, 0, 0},
    [JF_OP_CBRT] = {"cbrt", 1, 0, 0},
    [JF_OP_ABS] = {"abs", 1, 0, 0},
    [JF_OP_SIN] = {"sin", 1, 0, 0},
    [JF_OP_COS] = {"cos", 1, 0, 0},
    [JF_OP_TAN] = {"tan", 1, 0, 0},
    [JF_OP_ASIN] = {"asin", 1, 0, 0},
    [JF_OP_ACOS] = {"acos", 1, 0, 0},
    [JF_OP_ATAN] = {"atan", 1, 0, 0},
    [JF_OP_SINH] = {"sinh", 1, 0, 0},
    [JF_OP_COSH] = {"cosh", 1, 0, 0},
    [JF_OP_TANH] = {"tanh", 1, 0, 0},
    [JF_OP_ERF] = {"erf", 1, 0, 0},
    [JF_OP_ERFC] = {"erfc", 1, 0, 0},
    [JF_OP_SIGN] = {"sign", 1, 0, 0},
    [JF_OP_ADD] = {"+", 2, 1, 1},
    [JF_OP_SUB] = {"-", 2, 1, 0},
    [JF_OP_MUL] = {"*", 2, 1, 1},
    [JF_OP_DIV] = {"/", 2, 1, 0},
    [JF_OP_POW] = {"^", 2, 1, 0},
    [JF_OP_ATAN2] = {"atan2", 2, 0, 0},
    /* min/max are commutative: prelude.h orders -0 below +0 (C leaves fmin(-0, +0) open) */
    [JF_OP_MIN] = {"min", 2, 0, 1},
    [JF_OP_MAX] = {"max", 2, 0, 1},
    [JF_OP_HYPOT] = {"hypot", 2, 0, 1},
    [JF_OP_LT] = {"<", 2, 1, 0},
    [JF_OP_LE] = {"<=", 2, 1, 0},
    [JF_OP_GT] = {">", 2, 1, 0},
    [JF_OP_GE] = {">=", 2, 1, 0},
    [JF_OP_EQ] = {"==", 2, 1, 1},
    [JF_OP_NE] = {"!=", 2, 1, 1},
    [JF_OP_SELECT] = {"if", 3, 0, 0},
};

const jf_op_info *jf_op_get_info(jf_op op) { return &op_table[op]; }

/* What users may call. SIGN is here because derivatives of abs use it, and the derivative
 * texts jf_model_derivative_text prints must compile as models; `pi` is a constant the parser makes;
 * `e` is deliberately not a constant, so it stays free for parameter names. */
static const jf_builtin builtin_table[] = {
    {"exp", JF_OP_EXP, 1, JF_SHAPE_NONE}, {"log", JF_OP_LOG, 1, JF_SHAPE_NONE},
    {"log10", JF_OP_LOG10, 1, JF_SHAPE_NONE}, {"sqrt", JF_OP_SQRT, 1, JF_SHAPE_NONE},
    {"cbrt", JF_OP_CBRT, 1, JF_SHAPE_NONE}, {"pow", JF_OP_POW, 2, JF_SHAPE_NONE},
    {"abs", JF_OP_ABS, 1, JF_SHAPE_NONE}, {"sin", JF_OP_SIN, 1, JF_SHAPE_NONE},
    {"cos", JF_OP_COS, 1, JF_SHAPE_NONE}, {"tan", JF_OP_TAN, 1, JF_SHAPE_NONE},
    {"asin", JF_OP_ASIN, 1, JF_SHAPE_NONE}, {"acos", JF_OP_ACOS, 1, JF_SHAPE_NONE},
    {"atan", JF_OP_ATAN, 1, JF_SHAPE_NONE}, {"atan2", JF_OP_ATAN2, 2, JF_SHAPE_NONE},
    {"sinh", JF_OP_SINH, 1, JF_SHAPE_NONE}, {"cosh", JF_OP_COSH, 1, JF_SHAPE_NONE},
    {"tanh", JF_OP_TANH, 1, JF_SHAPE_NONE}, {"erf", JF_OP_ERF, 1, JF_SHAPE_NONE},
    {"erfc", JF_OP_ERFC, 1, JF_SHAPE_NONE}, {"min", JF_OP_MIN, 2, JF_SHAPE_NONE},
    {"max", JF_OP_MAX, 2, JF_SHAPE_NONE}, {"hypot", JF_OP_HYPOT, 2, JF_SHAPE_NONE},
    {"if", JF_OP_SELECT, 3, JF_SHAPE_NONE}, {"sign", JF_OP_SIGN, 1, JF_SHAPE_NONE},
    {"gauss", JF_OP_COUNT, 3, JF_SHAPE_GAUSS}, {"lorentz", JF_OP_COUNT, 3, JF_SHAPE_LORENTZ},
    {"pvoigt", JF_OP_COUNT, 4, JF_SHAPE_PVOIGT},
};

const jf_builtin *jf_builtin_find(const char *name, size_t len) {
    if (name == NULL)
        return NULL;
    for (size_t i = 0; i < sizeof builtin_table / sizeof builtin_table[0]; i++) {
        const char *b = builtin_table[i].name;
        if (strlen(b) == len && memcmp(b, name, len) == 0)
            return &builtin_table[i];
    }
    return NULL;
}

const jf_builtin *jf_builtin_all(size_t *count) {
    if (count != NULL)
        *count = sizeof builtin_table / sizeof builtin_table[0];
    return builtin_table;
}

/* ---------------------------------------------------------------------------------------------
 * Storage and interning
 */

jf_dag *jf_dag_create(size_t max_nodes) {
    jf_dag *d = calloc(1, sizeof *d);
    if (d == NULL)
        return NULL;
    /* references are uint32_t and JF_NOREF is reserved */
    if (max_nodes == 0)
        max_nodes = JF_DAG_MAX_NODES;
    if (max_nodes > (size_t)JF_NOREF - 1)
        max_nodes = (size_t)JF_NOREF - 1;
    d->max_nodes = max_nodes;
    d->nslots = 64;
    d->slots = malloc(d->nslots * sizeof *d->slots);
    if (d->slots == NULL) {
        free(d);
        return NULL;
    }
    memset(d->slots, 0xff, d->nslots * sizeof *d->slots);
    return d;
}

void jf_dag_free(jf_dag *d) {
    if (d == NULL)
        return;
    free(d->nodes);
    free(d->deps);
    free(d->slots);
    free(d);
}

int jf_dag_error(const jf_dag *d) { return d == NULL ? JF_ERR_ARG : d->error; }

void jf_dag_set_error(jf_dag *d, int code) {
    if (d != NULL && d->error == JF_OK)
        d->error = code;
}

size_t jf_dag_size(const jf_dag *d) { return d == NULL ? 0 : d->n; }

size_t jf_dag_max_nodes(const jf_dag *d) { return d == NULL ? 0 : d->max_nodes; }

const jf_node *jf_dag_node(const jf_dag *d, jf_ref r) { return &d->nodes[r]; }

int jf_dag_depends(const jf_dag *d, jf_ref r, uint32_t k) {
    const deps *x = &d->deps[r];
    if (k < DEP_BITS - 1)
        return (int)((x->mask >> k) & 1u);
    return (int)((x->mask >> (DEP_BITS - 1)) & 1u) && x->lo <= k && k <= x->hi;
}

static uint64_t mix64(uint64_t h) {
    /* splitmix64 finaliser: cheap and spreads every input bit over the word */
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h;
}

static uint64_t double_bits(double v) {
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

static uint64_t node_hash(const jf_node *x) {
    uint64_t h = mix64(((uint64_t)x->op << 32) ^ x->index);
    h = mix64(h ^ ((uint64_t)x->arg[0] << 32 | x->arg[1]));
    h = mix64(h ^ x->arg[2]);
    /* by bit pattern: -0 and +0 are different nodes, and NaNs intern by payload */
    return mix64(h ^ double_bits(x->value));
}

static int node_equal(const jf_node *a, const jf_node *b) {
    return a->op == b->op && a->index == b->index && a->arg[0] == b->arg[0] &&
           a->arg[1] == b->arg[1] && a->arg[2] == b->arg[2] &&
           double_bits(a->value) == double_bits(b->value);
}

static int rehash(jf_dag *d, size_t nslots) {
    uint32_t *s = malloc(nslots * sizeof *s);
    if (s == NULL)
        return 0;
    memset(s, 0xff, nslots * sizeof *s);
    for (size_t r = 0; r < d->n; r++) {
        size_t i = (size_t)node_hash(&d->nodes[r]) & (nslots - 1);
        while (s[i] != JF_NOREF)
            i = (i + 1) & (nslots - 1);
        s[i] = (uint32_t)r;
    }
    free(d->slots);
    d->slots = s;
    d->nslots = nslots;
    return 1;
}

static jf_ref fail(jf_dag *d, int code) {
    jf_dag_set_error(d, code);
    return JF_NOREF;
}

/* Returns the reference of the node equal to *x, adding it if it does not exist yet. x->depth
 * is computed here; everything else must be filled (unused operands JF_NOREF). */
static jf_ref intern(jf_dag *d, jf_node *x, deps dp) {
    size_t mask = d->nslots - 1;
    size_t i = (size_t)node_hash(x) & mask;
    for (; d->slots[i] != JF_NOREF; i = (i + 1) & mask)
        if (node_equal(&d->nodes[d->slots[i]], x))
            return d->slots[i];
    if (d->n >= d->max_nodes)
        return fail(d, JF_ERR_LIMIT);
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 256;
        jf_node *nodes = realloc(d->nodes, cap * sizeof *nodes);
        if (nodes == NULL)
            return fail(d, JF_ERR_NOMEM);
        d->nodes = nodes;
        deps *nd = realloc(d->deps, cap * sizeof *nd);
        if (nd == NULL)
            return fail(d, JF_ERR_NOMEM);
        d->deps = nd;
        d->cap = cap;
    }
    uint32_t depth = 0;
    for (unsigned a = 0; a < x->arity; a++)
        if (d->nodes[x->arg[a]].depth > depth)
            depth = d->nodes[x->arg[a]].depth;
    x->depth = depth + 1;
    jf_ref r = (jf_ref)d->n;
    d->nodes[r] = *x;
    d->deps[r] = dp;
    d->n++;
    d->slots[i] = r;
    /* keep the load factor at most 1/2 so probe sequences stay short */
    if (2 * d->n > d->nslots && !rehash(d, 2 * d->nslots)) {
        /* the node is stored and findable (the old table still has room); only growth failed */
        return fail(d, JF_ERR_NOMEM);
    }
    return r;
}

static jf_ref leaf(jf_dag *d, jf_op op, uint32_t index, double v, deps dp) {
    if (d == NULL)
        return JF_NOREF;
    jf_node x;
    memset(&x, 0, sizeof x);
    x.op = (uint8_t)op;
    x.index = index;
    x.arg[0] = x.arg[1] = x.arg[2] = JF_NOREF;
    x.value = v;
    return intern(d, &x, dp);
}

jf_ref jf_dag_const(jf_dag *d, double v) { return leaf(d, JF_OP_CONST, 0, v, no_deps); }

jf_ref jf_dag_param(jf_dag *d, uint32_t k) {
    deps dp = {(uint64_t)1 << (k < DEP_BITS - 1 ? k : DEP_BITS - 1), k, k};
    return leaf(d, JF_OP_PARAM, k, 0.0, dp);
}

jf_ref jf_dag_var(jf_dag *d, uint32_t j) { return leaf(d, JF_OP_VAR, j, 0.0, no_deps); }

int jf_dag_is_const(const jf_dag *d, jf_ref r, double v) {
    if (d == NULL || r >= d->n || d->nodes[r].op != JF_OP_CONST)
        return 0;
    return double_bits(d->nodes[r].value) == double_bits(v);
}

/* ---------------------------------------------------------------------------------------------
 * Simplification
 */

static int is_const(const jf_dag *d, jf_ref r) { return d->nodes[r].op == JF_OP_CONST; }

/* A constant zero of either sign. */
static int is_zero(const jf_dag *d, jf_ref r) {
    return is_const(d, r) && d->nodes[r].value == 0.0;
}

static int is_val(const jf_dag *d, jf_ref r, double v) {
    return is_const(d, r) && d->nodes[r].value == v;
}

/* A constant below zero (NaN and -0 are not). */
static int is_negconst(const jf_dag *d, jf_ref r) {
    return is_const(d, r) && d->nodes[r].value < 0.0;
}

static int is_op(const jf_dag *d, jf_ref r, jf_op op) { return d->nodes[r].op == op; }

static jf_ref arg0(const jf_dag *d, jf_ref r) { return d->nodes[r].arg[0]; }
static jf_ref arg1(const jf_dag *d, jf_ref r) { return d->nodes[r].arg[1]; }

static double cval(const jf_dag *d, jf_ref r) { return d->nodes[r].value; }

/* Canonical operand order of commutative operations, so that a*b and b*a (and 2*x, x*2) are one
 * node and the rules below need to look at one side only. Any fixed order would do; this one is
 * chosen so that printed formulas read the way people write them: factors as "2*a*x" (constants,
 * then parameters, then variables, then compound terms) and sums as "c*x + d + 1" (compound terms,
 * then parameters, variables, constants). Parameters and variables sort by number, compound terms
 * by reference (the order the parser met them in). */
static int rank(const jf_dag *d, jf_op op, jf_ref r) {
    static const int factor_rank[3] = {0, 1, 2}; /* CONST, PARAM, VAR; compound: 3 */
    static const int term_rank[3] = {3, 1, 2};   /* CONST, PARAM, VAR; compound: 0 */
    unsigned o = d->nodes[r].op;
    if (o > JF_OP_VAR)
        return op == JF_OP_ADD ? 0 : 3;
    return op == JF_OP_ADD ? term_rank[o] : factor_rank[o];
}

static int before(const jf_dag *d, jf_op op, jf_ref a, jf_ref b) {
    int ra = rank(d, op, a), rb = rank(d, op, b);
    if (ra != rb)
        return ra < rb;
    const jf_node *x = &d->nodes[a], *y = &d->nodes[b];
    if (x->op != JF_OP_CONST && x->op <= JF_OP_VAR && x->index != y->index)
        return x->index < y->index;
    return a < b;
}

/* Tries the rules for op(a, b, c) (a, b, c valid as the arity needs). Returns 1 and stores the
 * result (possibly JF_NOREF after an error) in *out when a rule applied, 0 when the node must be
 * built as it is. May swap *a and *b into canonical order. */
static int simplify(jf_dag *d, jf_op op, jf_ref *pa, jf_ref *pb, jf_ref c, jf_ref *out) {
    unsigned arity = op_table[op].arity;
    jf_ref a = *pa, b = *pb;

    if (op == JF_OP_SELECT) {
        /* select(const, a, b): the branch chosen with the runtime's own truth rule (NaN → else),
         * exact by construction */
        if (is_const(d, a)) {
            *out = jf_truth(cval(d, a)) ? b : c;
            return 1;
        }
        /* select(c, a, a) → a: exact, whatever c is */
        if (b == c) {
            *out = b;
            return 1;
        }
        return 0;
    }

    /* Constant folding of every op, with the evaluator's own arithmetic (jf_interp_op), so a
     * folded constant is the value the interpreter and the generated code would compute. */
    if (is_const(d, a) && (arity < 2 || is_const(d, b))) {
        *out = jf_dag_const(d, jf_interp_op(op, cval(d, a), arity >= 2 ? cval(d, b) : 0.0, 0.0));
        return 1;
    }

    if (arity == 2 && op_table[op].commutative && before(d, op, b, a)) {
        *pa = b;
        *pb = a;
        a = *pa;
        b = *pb;
    }

    switch (op) {
    case JF_OP_NEG:
        /* --x → x: exact (negation only flips the sign bit) */
        if (is_op(d, a, JF_OP_NEG)) {
            *out = arg0(d, a);
            return 1;
        }
        /* -(c*x) → (-c)*x and -(c/x) → (-c)/x: exact (rounding is sign-symmetric); keeps
         * negative constant factors in one canonical place, so `-2*x` is one node */
        if ((is_op(d, a, JF_OP_MUL) || is_op(d, a, JF_OP_DIV)) && is_const(d, arg0(d, a))) {
            *out = jf_dag_binary(d, (jf_op)d->nodes[a].op, jf_dag_const(d, -cval(d, arg0(d, a))),
                                 arg1(d, a));
            return 1;
        }
        return 0;
    case JF_OP_ABS:
        /* abs(-x) → abs(x), abs(abs(x)) → abs(x): exact */
        if (is_op(d, a, JF_OP_NEG) || is_op(d, a, JF_OP_ABS)) {
            *out = jf_dag_unary(d, JF_OP_ABS, arg0(d, a));
            return 1;
        }
        return 0;
    case JF_OP_ADD:
        /* x+0 → x (only the right side: in canonical order a sum's constant comes last).
         * CAVEAT: exact for -0; for +0 it turns -0+0 (= +0) into -0. */
        if (is_zero(d, b)) {
            *out = a;
            return 1;
        }
        /* x+(-c) → x-c for a constant c > 0: exact (a+(-b) and a-b are the same IEEE op) */
        if (is_negconst(d, b)) {
            *out = jf_dag_binary(d, JF_OP_SUB, a, jf_dag_const(d, -cval(d, b)));
            return 1;
        }
        /* a+(-b) → a-b, (-a)+b → b-a: exact, as above */
        if (is_op(d, b, JF_OP_NEG)) {
            *out = jf_dag_binary(d, JF_OP_SUB, a, arg0(d, b));
            return 1;
        }
        if (is_op(d, a, JF_OP_NEG)) {
            *out = jf_dag_binary(d, JF_OP_SUB, b, arg0(d, a));
            return 1;
        }
        return 0;
    case JF_OP_SUB:
        /* x-0 → x. Exact for +0; CAVEAT for -0: (-0)-(-0) is +0, not -0. */
        if (is_zero(d, b)) {
            *out = a;
            return 1;
        }
        /* 0-x → -x. Exact for -0; CAVEAT for +0: 0-0 is +0 where -0 is -0. */
        if (is_zero(d, a)) {
            *out = jf_dag_unary(d, JF_OP_NEG, b);
            return 1;
        }
        /* x-(-c) → x+c for a constant c > 0, and a-(-b) → a+b: exact */
        if (is_negconst(d, b)) {
            *out = jf_dag_binary(d, JF_OP_ADD, a, jf_dag_const(d, -cval(d, b)));
            return 1;
        }
        if (is_op(d, b, JF_OP_NEG)) {
            *out = jf_dag_binary(d, JF_OP_ADD, a, arg0(d, b));
            return 1;
        }
        return 0;
    case JF_OP_MUL:
        /* 1*x → x: exact (a product's constant comes first in canonical order) */
        if (is_val(d, a, 1.0)) {
            *out = b;
            return 1;
        }
        /* 0*x → 0. CAVEAT: not IEEE-exact: NaN*0 and Inf*0 are NaN, and (-x)*0 is -0. Done anyway
         * because derivatives are full of 0*u' terms (the derivative of a product where one
         * factor does not depend on the parameter); without it they would neither collapse nor
         * let whole subtrees drop out. A derivative may thus be 0 where IEEE arithmetic on the
         * unsimplified formula would give NaN (e.g. at points where an unrelated factor is Inf). */
        if (is_zero(d, a)) {
            *out = a;
            return 1;
        }
        /* (-1)*x → -x: exact */
        if (is_val(d, a, -1.0)) {
            *out = jf_dag_unary(d, JF_OP_NEG, b);
            return 1;
        }
        /* (-a)*b → -(a*b), a*(-b) → -(a*b): exact (rounding is sign-symmetric) */
        if (is_op(d, a, JF_OP_NEG)) {
            *out = jf_dag_unary(d, JF_OP_NEG, jf_dag_binary(d, JF_OP_MUL, arg0(d, a), b));
            return 1;
        }
        if (is_op(d, b, JF_OP_NEG)) {
            *out = jf_dag_unary(d, JF_OP_NEG, jf_dag_binary(d, JF_OP_MUL, a, arg0(d, b)));
            return 1;
        }
        return 0;
    case JF_OP_DIV:
        /* x/1 → x, x/(-1) → -x: exact */
        if (is_val(d, b, 1.0)) {
            *out = a;
            return 1;
        }
        if (is_val(d, b, -1.0)) {
            *out = jf_dag_unary(d, JF_OP_NEG, a);
            return 1;
        }
        /* 0/x → 0. CAVEAT: 0/0 and 0/NaN are NaN, and 0/(-x) is -0. Needed for the same reason as
         * 0*x: quotient-rule terms with a zero numerator must vanish. */
        if (is_zero(d, a)) {
            *out = a;
            return 1;
        }
        /* (-a)/b → -(a/b), a/(-b) → -(a/b): exact (rounding is sign-symmetric) */
        if (is_op(d, a, JF_OP_NEG)) {
            *out = jf_dag_unary(d, JF_OP_NEG, jf_dag_binary(d, JF_OP_DIV, arg0(d, a), b));
            return 1;
        }
        if (is_op(d, b, JF_OP_NEG)) {
            *out = jf_dag_unary(d, JF_OP_NEG, jf_dag_binary(d, JF_OP_DIV, a, arg0(d, b)));
            return 1;
        }
        return 0;
    case JF_OP_POW:
        /* x^1 → x: exact (pow(x, 1) = x and jf_powi(x, 1) = x, NaN included) */
        if (is_val(d, b, 1.0)) {
            *out = a;
            return 1;
        }
        /* x^0 → 1 and 1^x → 1: exact, C's pow gives 1 even for NaN operands there, and
         * jf_powi(x, 0) = jf_powi(1, n) = 1 */
        if (is_zero(d, b) || is_val(d, a, 1.0)) {
            *out = jf_dag_const(d, 1.0);
            return 1;
        }
        return 0;
    case JF_OP_MIN:
    case JF_OP_MAX:
        /* min(x, x) → x: exact */
        if (a == b) {
            *out = a;
            return 1;
        }
        return 0;
    default:
        return 0;
    }
}

jf_ref jf_dag_make(jf_dag *d, jf_op op, const jf_ref *args) {
    if (d == NULL)
        return JF_NOREF;
    if ((unsigned)op >= JF_OP_COUNT || op_table[op].arity == 0 || args == NULL)
        return fail(d, JF_ERR_ARG);
    unsigned arity = op_table[op].arity;
    jf_ref a[3] = {JF_NOREF, JF_NOREF, JF_NOREF};
    for (unsigned i = 0; i < arity; i++) {
        if (args[i] == JF_NOREF)
            return JF_NOREF; /* an earlier constructor failed and recorded why */
        if (args[i] >= d->n)
            return fail(d, JF_ERR_ARG);
        a[i] = args[i];
    }
    jf_ref out;
    if (simplify(d, op, &a[0], &a[1], a[2], &out))
        return out;
    jf_node x;
    memset(&x, 0, sizeof x);
    x.op = (uint8_t)op;
    x.arity = (uint8_t)arity;
    deps dp = no_deps;
    for (unsigned i = 0; i < 3; i++) {
        x.arg[i] = a[i];
        if (i < arity) {
            const deps *o = &d->deps[a[i]];
            dp.mask |= o->mask;
            dp.lo = o->lo < dp.lo ? o->lo : dp.lo;
            dp.hi = o->hi > dp.hi ? o->hi : dp.hi;
        }
    }
    return intern(d, &x, dp);
}

jf_ref jf_dag_unary(jf_dag *d, jf_op op, jf_ref a) {
    if (d != NULL && ((unsigned)op >= JF_OP_COUNT || op_table[op].arity != 1))
        return fail(d, JF_ERR_ARG);
    return jf_dag_make(d, op, &a);
}

jf_ref jf_dag_binary(jf_dag *d, jf_op op, jf_ref a, jf_ref b) {
    if (d != NULL && ((unsigned)op >= JF_OP_COUNT || op_table[op].arity != 2))
        return fail(d, JF_ERR_ARG);
    jf_ref args[2] = {a, b};
    return jf_dag_make(d, op, args);
}

jf_ref jf_dag_select(jf_dag *d, jf_ref cond, jf_ref a, jf_ref b) {
    jf_ref args[3] = {cond, a, b};
    return jf_dag_make(d, JF_OP_SELECT, args);
}

size_t jf_dag_count_reachable(const jf_dag *d, const jf_ref *roots, size_t nroots) {
    if (d == NULL || d->n == 0)
        return 0;
    size_t top = 0;
    for (size_t i = 0; i < nroots; i++)
        if (roots[i] < d->n && roots[i] + (size_t)1 > top)
            top = roots[i] + (size_t)1;
    if (top == 0)
        return 0;
    unsigned char *mark = calloc(top, 1);
    if (mark == NULL)
        return 0;
    for (size_t i = 0; i < nroots; i++)
        if (roots[i] < d->n)
            mark[roots[i]] = 1;
    size_t count = 0;
    /* children have smaller references, so one descending sweep visits every reachable node
     * after all of its users */
    for (size_t r = top; r-- > 0;) {
        if (!mark[r])
            continue;
        count++;
        const jf_node *x = &d->nodes[r];
        for (unsigned a = 0; a < x->arity; a++)
            mark[x->arg[a]] = 1;
    }
    free(mark);
    return count;
}

/* ---- peak shapes (builtins defined by formula) ----------------------------------------------- */

/* u = (x - c)/w, the shapes' reduced distance from the centre. */
static jf_ref reduced(jf_dag *d, jf_ref x, jf_ref c, jf_ref w) {
    return jf_dag_binary(d, JF_OP_DIV, jf_dag_binary(d, JF_OP_SUB, x, c), w);
}

static jf_ref gauss_of(jf_dag *d, jf_ref u) { /* exp(-(u*u)/2) */
    jf_ref half_sq = jf_dag_binary(d, JF_OP_DIV, jf_dag_binary(d, JF_OP_MUL, u, u),
                                   jf_dag_const(d, 2.0));
    return jf_dag_unary(d, JF_OP_EXP, jf_dag_unary(d, JF_OP_NEG, half_sq));
}

static jf_ref lorentz_of(jf_dag *d, jf_ref u) { /* 1/(1 + u*u) */
    jf_ref one = jf_dag_const(d, 1.0);
    return jf_dag_binary(d, JF_OP_DIV, one,
                         jf_dag_binary(d, JF_OP_ADD, one, jf_dag_binary(d, JF_OP_MUL, u, u)));
}

jf_ref jf_dag_shape(jf_dag *d, jf_shape shape, const jf_ref *args) {
    switch (shape) {
    case JF_SHAPE_GAUSS: return gauss_of(d, reduced(d, args[0], args[1], args[2]));
    case JF_SHAPE_LORENTZ: return lorentz_of(d, reduced(d, args[0], args[1], args[2]));
    case JF_SHAPE_PVOIGT: {
        /* the Gaussian's standard deviation for half width w at half maximum: w/sqrt(2 ln 2);
         * dividing u by that constant is multiplying it by sqrt(2 ln 2) = 1.1774100225154747 */
        jf_ref u = reduced(d, args[0], args[1], args[2]);
        jf_ref ug = jf_dag_binary(d, JF_OP_MUL, u, jf_dag_const(d, 1.1774100225154747));
        jf_ref eta = args[3];
        jf_ref l = jf_dag_binary(d, JF_OP_MUL, eta, lorentz_of(d, u));
        jf_ref g = jf_dag_binary(d, JF_OP_MUL,
                                 jf_dag_binary(d, JF_OP_SUB, jf_dag_const(d, 1.0), eta),
                                 gauss_of(d, ug));
        return jf_dag_binary(d, JF_OP_ADD, l, g);
    }
    case JF_SHAPE_NONE: break;
    }
    return fail(d, JF_ERR_ARG);
}
