/* Hash-consed expression DAG: the symbolic core of jitfit.
 *
 * Every model, its derivatives and every generated kernel are built from the nodes of one
 * jf_dag. Nodes are immutable and interned: constructing a node that already exists returns the
 * existing reference, so identical subterms are one node and common subexpressions are shared
 * for free (f and its partials share everything they can). Constructors simplify as they build
 * (constant folding and exact identities; the rules and their IEEE caveats are documented at each
 * rule in expr.c and summarised in docs/DSL.md).
 *
 * A node's children always have smaller references than the node itself, so increasing
 * reference order is a valid evaluation order (schedule.c relies on this).
 *
 * Errors: constructors return JF_NOREF when memory runs out or the node limit is reached; every
 * constructor accepts JF_NOREF operands and then returns JF_NOREF, so callers check once at the
 * end. jf_dag_error() tells which error happened.
 */
#ifndef JF_EXPR_H
#define JF_EXPR_H

#include <stddef.h>
#include <stdint.h>

#include "../runtime/common.h"

/* A reference to a node in a jf_dag. */
typedef uint32_t jf_ref;
#define JF_NOREF UINT32_MAX

/* Default limit on the number of nodes in one DAG (model, derivatives and helpers together). */
#define JF_DAG_MAX_NODES (1u << 20)

/* Node operations. Order matters only for the tables in expr.c. */
typedef enum jf_op {
    JF_OP_CONST, /* a double constant (node.value) */
    JF_OP_PARAM, /* parameter number node.index: p[index] */
    JF_OP_VAR,   /* independent variable number node.index: x[index] */
    /* unary */
    JF_OP_NEG,
    JF_OP_EXP,
    JF_OP_LOG,
    JF_OP_LOG10,
    JF_OP_SQRT,
    JF_OP_CBRT,
    JF_OP_ABS,
    JF_OP_SIN,
    JF_OP_COS,
    JF_OP_TAN,
    JF_OP_ASIN,
    JF_OP_ACOS,
    JF_OP_ATAN,
    JF_OP_SINH,
    JF_OP_COSH,
    JF_OP_TANH,
    JF_OP_ERF,
    JF_OP_ERFC,
    JF_OP_SIGN, /* -1, 0 or +1 (NaN for NaN); appears in derivatives of abs */
    /* binary */
    JF_OP_ADD,
    JF_OP_SUB,
    JF_OP_MUL,
    JF_OP_DIV,
    JF_OP_POW, /* pow(a, b); small integer constant exponents evaluate as jf_powi (prelude.h) */
    JF_OP_ATAN2,
    JF_OP_MIN,
    JF_OP_MAX,
    JF_OP_HYPOT,
    JF_OP_LT, /* comparisons give 1.0 or 0.0 */
    JF_OP_LE,
    JF_OP_GT,
    JF_OP_GE,
    JF_OP_EQ,
    JF_OP_NE,
    /* ternary */
    JF_OP_SELECT, /* arg0 != 0 ? arg1 : arg2 (a NaN condition selects arg2... see prelude.h) */
    JF_OP_COUNT
} jf_op;

/* One interned node. */
typedef struct jf_node {
    uint8_t op;     /* a jf_op */
    uint8_t arity;  /* number of used entries of arg (0..3) */
    uint32_t index; /* parameter or variable number for JF_OP_PARAM / JF_OP_VAR, else 0 */
    uint32_t depth; /* 1 + the largest depth of its operands (leaves: 1); bounds recursion */
    jf_ref arg[3];  /* operands, each < this node's own reference */
    double value;   /* the constant for JF_OP_CONST, else 0 */
} jf_node;

/* Static facts about an operation. */
typedef struct jf_op_info {
    const char *name; /* DSL spelling: "exp", "+", "<", "if" (SELECT), ... */
    uint8_t arity;    /* number of operands */
    uint8_t infix;    /* 1 for operators printed infix (+ - * / ^ and comparisons) */
    uint8_t commutative; /* 1 when operands may be reordered exactly (+, *, min, max, hypot, ==, !=) */
} jf_op_info;

/* Facts about op; op must be < JF_OP_COUNT. */
JF_INTERNAL const jf_op_info *jf_op_get_info(jf_op op);

/* Peak shapes: builtins defined by a formula of other operations (jf_dag_shape), so their
 * derivatives, code and simplification come from those. */
typedef enum jf_shape {
    JF_SHAPE_NONE = 0,
    JF_SHAPE_GAUSS,   /* gauss(x, c, s) = exp(-((x - c)/s)^2/2): height 1 at c, std. dev. s */
    JF_SHAPE_LORENTZ, /* lorentz(x, c, w) = 1/(1 + ((x - c)/w)^2): height 1 at c, HWHM w */
    JF_SHAPE_PVOIGT   /* pvoigt(x, c, w, eta) = eta lorentz(x, c, w) + (1 - eta) gauss(x, c,
                         w/sqrt(2 ln 2)): both parts with the half width w at half maximum */
} jf_shape;

/* Most arguments a builtin takes. */
#define JF_BUILTIN_MAX_ARGS 4

/* A builtin function as the DSL spells it. */
typedef struct jf_builtin {
    const char *name; /* "exp", "pow", "if", ... */
    jf_op op;         /* the operation it builds ("if" builds JF_OP_SELECT); JF_OP_COUNT for
                         a shape */
    uint8_t arity;    /* number of arguments it takes */
    uint8_t shape;    /* a jf_shape, or JF_SHAPE_NONE */
} jf_builtin;


/* The builtin called `name` (len bytes, not necessarily NUL-terminated), or NULL. */
JF_INTERNAL const jf_builtin *jf_builtin_find(const char *name, size_t len);
/* All builtins, for listings and "did you mean" suggestions; *count receives the number. */
JF_INTERNAL const jf_builtin *jf_builtin_all(size_t *count);

typedef struct jf_dag jf_dag;

/* A new empty DAG with the given node limit (0 means JF_DAG_MAX_NODES); NULL when out of memory.
 * The caller owns it and frees it with jf_dag_free. */
JF_INTERNAL jf_dag *jf_dag_create(size_t max_nodes);
/* Frees the DAG and all its nodes; accepts NULL. */
JF_INTERNAL void jf_dag_free(jf_dag *d);
/* JF_OK, or the first error a constructor met (JF_ERR_NOMEM or JF_ERR_LIMIT). */
JF_INTERNAL int jf_dag_error(const jf_dag *d);
/* Number of nodes. */
JF_INTERNAL size_t jf_dag_size(const jf_dag *d);
/* The node limit it was created with (after defaults and clamping). */
JF_INTERNAL size_t jf_dag_max_nodes(const jf_dag *d);
/* The node r (r < jf_dag_size(d)). The pointer is invalidated by the next constructor call. */
JF_INTERNAL const jf_node *jf_dag_node(const jf_dag *d, jf_ref r);

/* Constructors. All intern their result and simplify (see expr.c). */
JF_INTERNAL jf_ref jf_dag_const(jf_dag *d, double v);
JF_INTERNAL jf_ref jf_dag_param(jf_dag *d, uint32_t k);
JF_INTERNAL jf_ref jf_dag_var(jf_dag *d, uint32_t j);
JF_INTERNAL jf_ref jf_dag_unary(jf_dag *d, jf_op op, jf_ref a);
JF_INTERNAL jf_ref jf_dag_binary(jf_dag *d, jf_op op, jf_ref a, jf_ref b);
JF_INTERNAL jf_ref jf_dag_select(jf_dag *d, jf_ref cond, jf_ref a, jf_ref b);
/* Generic constructor by arity: args has jf_op_get_info(op)->arity entries. */
JF_INTERNAL jf_ref jf_dag_make(jf_dag *d, jf_op op, const jf_ref *args);
/* The expression of a shape builtin (jf_shape) over its argument nodes args, built from the
 * operations its formula names. */
JF_INTERNAL jf_ref jf_dag_shape(jf_dag *d, jf_shape shape, const jf_ref *args);

/* 1 when r is a constant node with value v (compared bitwise-equal as doubles, so -0 != 0). */
JF_INTERNAL int jf_dag_is_const(const jf_dag *d, jf_ref r, double v);

/* 1 when node r may depend on parameter p[k]: exact for k < 63; for larger k it can say 1
 * spuriously (those share one flag, narrowed by the node's range of parameter numbers). Lets
 * walkers such as jf_dag_diff skip subtrees that do not involve p[k]. */
JF_INTERNAL int jf_dag_depends(const jf_dag *d, jf_ref r, uint32_t k);
/* Records code as the DAG's error unless one is already recorded (for helpers outside expr.c,
 * e.g. jf_dag_diff running out of memory for its memo table). */
JF_INTERNAL void jf_dag_set_error(jf_dag *d, int code);

/* ∂f/∂p[k], built in the same DAG (sharing subterms with f). Kink conventions (abs, min, max,
 * select) are documented in diff.c and docs/DSL.md. Returns JF_NOREF on error. */
JF_INTERNAL jf_ref jf_dag_diff(jf_dag *d, jf_ref f, uint32_t k);

/* Renders the expression rooted at r as DSL text with minimal parentheses, naming parameters
 * and variables through the given arrays (NULL arrays print p[k] and x[j]). The caller frees
 * the result with free(); NULL when out of memory. */
JF_INTERNAL char *jf_dag_to_text(const jf_dag *d, jf_ref r, const char *const *param_names,
                                 const char *const *var_names);

/* Writes v into buf (at least 32 bytes) as the model text writes a constant: the shortest
 * decimal that reads back to v, in the "C" locale whatever the process locale; nan, inf, -inf
 * for the others. For messages that quote a number the user can type back in. */
JF_INTERNAL void jf_double_text(char *buf, size_t size, double v);

/* Depth of node r (see jf_node.depth). Recursive walkers rely on callers having bounded it
 * (the resolver rejects models deeper than JF_DAG_MAX_DEPTH). */
#define JF_DAG_MAX_DEPTH 4096u

/* Number of distinct nodes reachable from the given roots (shared nodes counted once). */
JF_INTERNAL size_t jf_dag_count_reachable(const jf_dag *d, const jf_ref *roots, size_t nroots);

#endif
