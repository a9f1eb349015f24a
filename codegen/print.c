/* Rendering a DAG expression as DSL text (jf_model_expression_text, messages, golden tests).
 *
 * The tree is printed in full (shared nodes are repeated) with the fewest parentheses that the
 * DSL's precedence allows, from loosest to tightest: comparisons (non-associative), + and -,
 * * and /, unary minus, ^ (right-associative, tighter than unary minus: -x^2 is -(x^2)), then
 * atoms (numbers, names, calls). Binary + - * / are left-associative, so a-(b-c) and a/(b*c)
 * keep their parentheses. Two conveniences beyond pure precedence:
 *  - an operand that begins with a minus sign is parenthesised when it is the right operand of
 *    an arithmetic operator or the exponent of ^ (x/(-2), x^(-1)), for readability;
 *  - -(a*b) prints as -a*b: the parser reads that as (-a)*b, which the simplifier turns back into
 *    -(a*b) exactly (expr.c), so the text still denotes this very node.
 * Constants print as the shortest %.<n>g (n = 1..17) that reads back to the same double, in
 * the "C" locale whatever the process locale is (uselocale, per thread; setlocale would change
 * other threads). Output is a pure function of the DAG, so it is deterministic.
 */
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expr.h"

/* Text longer than this is refused (NULL, as for out of memory): printing expands shared nodes,
 * and a deeply shared DAG could otherwise need exponential space. */
#define MAX_TEXT ((size_t)1 << 24)

/* Precedence levels, loosest first. */
enum { P_CMP = 1, P_ADD, P_MUL, P_UNARY, P_POW, P_ATOM };

typedef struct out {
    char *buf;   /* the text so far, NUL-terminated */
    size_t len;  /* its length */
    size_t cap;  /* allocated bytes */
    int failed;  /* out of memory or over MAX_TEXT: stop appending */
    const char *const *pnames; /* parameter names or NULL (print p[k]) */
    const char *const *vnames; /* variable names or NULL (print x[j]) */
} out;

static void put(out *o, const char *s, size_t n) {
    if (o->failed)
        return;
    /* tested at every append, not only when the buffer grows: growth doubles, so a text that
     * first outgrows a 16 MiB buffer at exactly 16 MiB would get 32 MiB unchecked */
    if (o->len + n > MAX_TEXT) {
        o->failed = 1;
        return;
    }
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 64;
        while (cap < o->len + n + 1)
            cap *= 2;
        char *b = realloc(o->buf, cap);
        if (b == NULL) {
            o->failed = 1;
            return;
        }
        o->buf = b;
        o->cap = cap;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    o->buf[o->len] = '\0';
}

static void puts_(out *o, const char *s) { put(o, s, strlen(s)); }

/* Shortest round-tripping decimal of a finite v; the caller's thread is in the C locale. At
 * most 17 significant digits always suffice for a double. The fewest digits decide the value,
 * but not the form: %.2g of 2500 is 2.5e+03, so a number whose decimal exponent is below
 * max(digits, 15) (and at least -4) is written out as %.15g would write it, 2500; %.15g itself
 * is not used, as it shows digits past the shortest for a subnormal (4.94065645841247e-324). */
static void format_double(char *buf, size_t size, double v) {
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    char e[40];
    snprintf(e, sizeof e, "%.*e", prec - 1, v);
    int exp10 = atoi(strchr(e, 'e') + 1);
    if (exp10 >= -4 && exp10 < (prec > 15 ? prec : 15))
        snprintf(buf, size, "%.*f", exp10 < prec - 1 ? prec - 1 - exp10 : 0, v);
    else
        snprintf(buf, size, "%.*g", prec, v);
}

static void put_const(out *o, double v) {
    char buf[40];
    if (isnan(v))
        snprintf(buf, sizeof buf, "nan");
    else if (isinf(v))
        snprintf(buf, sizeof buf, "%sinf", v < 0 ? "-" : "");
    else
        format_double(buf, sizeof buf, v);
    puts_(o, buf);
}

static int prec_of(const jf_dag *d, jf_ref r) {
    const jf_node *x = jf_dag_node(d, r);
    switch ((jf_op)x->op) {
    case JF_OP_CONST: return (signbit(x->value) && !isnan(x->value)) ? P_UNARY : P_ATOM;
    case JF_OP_NEG: return P_UNARY;
    case JF_OP_ADD:
    case JF_OP_SUB: return P_ADD;
    case JF_OP_MUL:
    case JF_OP_DIV: return P_MUL;
    case JF_OP_POW: return P_POW;
    case JF_OP_LT:
    case JF_OP_LE:
    case JF_OP_GT:
    case JF_OP_GE:
    case JF_OP_EQ:
    case JF_OP_NE: return P_CMP;
    default: return P_ATOM;
    }
}

/* Whether r printed in a context requiring precedence min would begin with '-'. Follows the
 * leftmost operand for as long as it is printed without parentheses. */
static int starts_with_minus(const jf_dag *d, jf_ref r, int min) {
    for (;;) {
        int p = prec_of(d, r);
        if (p < min)
            return 0; /* parenthesised */
        const jf_node *x = jf_dag_node(d, r);
        if (x->op == JF_OP_NEG || (x->op == JF_OP_CONST && p == P_UNARY))
            return 1;
        if (p == P_ATOM)
            return 0;
        /* a binary infix operator: its text starts with its left operand's, printed in the
         * context the operator gives its left operand */
        if (p == P_POW)
            min = P_ATOM;
        else if (p == P_CMP)
            min = P_ADD;
        else
            min = p;
        r = x->arg[0];
    }
}

static void print(out *o, const jf_dag *d, jf_ref r);

static void print_paren(out *o, const jf_dag *d, jf_ref r, int min) {
    if (prec_of(d, r) < min) {
        put(o, "(", 1);
        print(o, d, r);
        put(o, ")", 1);
    } else {
        print(o, d, r);
    }
}

/* Right operand of an arithmetic operator: also parenthesised when it would begin with '-'. */
static void print_right(out *o, const jf_dag *d, jf_ref r, int min) {
    if (prec_of(d, r) >= min && starts_with_minus(d, r, min)) {
        put(o, "(", 1);
        print(o, d, r);
        put(o, ")", 1);
    } else {
        print_paren(o, d, r, min);
    }
}

static void print(out *o, const jf_dag *d, jf_ref r) {
    if (o->failed)
        return;
    const jf_node *x = jf_dag_node(d, r);
    const jf_op_info *info = jf_op_get_info((jf_op)x->op);
    char buf[32];
    int p = prec_of(d, r);
    switch ((jf_op)x->op) {
    case JF_OP_CONST: put_const(o, x->value); return;
    case JF_OP_PARAM:
        if (o->pnames != NULL) {
            puts_(o, o->pnames[x->index]);
        } else {
            snprintf(buf, sizeof buf, "p[%u]", (unsigned)x->index);
            puts_(o, buf);
        }
        return;
    case JF_OP_VAR:
        if (o->vnames != NULL) {
            puts_(o, o->vnames[x->index]);
        } else {
            snprintf(buf, sizeof buf, "x[%u]", (unsigned)x->index);
            puts_(o, buf);
        }
        return;
    case JF_OP_NEG: {
        jf_ref a = x->arg[0];
        int pa = prec_of(d, a);
        put(o, "-", 1);
        /* -(a*b) as -a*b (see the file comment); anything that would begin with '-' gets
         * parentheses so that no "--" appears */
        int need = pa == P_MUL ? P_MUL : P_UNARY;
        if (pa >= need && starts_with_minus(d, a, need)) {
            put(o, "(", 1);
            print(o, d, a);
            put(o, ")", 1);
        } else {
            print_paren(o, d, a, need);
        }
        return;
    }
    default: break;
    }
    if (info->infix) {
        const char *sp = p == P_CMP || p == P_ADD ? " " : "";
        if (x->op == JF_OP_POW) {
            /* the base must be an atom: (-x)^2, (a^b)^c; the exponent is right-associative */
            print_paren(o, d, x->arg[0], P_ATOM);
            put(o, "^", 1);
            print_right(o, d, x->arg[1], P_POW);
            return;
        }
        if (p == P_CMP) {
            /* comparisons do not chain: both operands must bind tighter */
            print_paren(o, d, x->arg[0], P_ADD);
            puts_(o, sp);
            puts_(o, info->name);
            puts_(o, sp);
            print_paren(o, d, x->arg[1], P_ADD);
            return;
        }
        /* left-associative + - * / */
        print_paren(o, d, x->arg[0], p);
        puts_(o, sp);
        puts_(o, info->name);
        puts_(o, sp);
        print_right(o, d, x->arg[1], p + 1);
        return;
    }
    /* calls: SELECT prints as the DSL's if(c, a, b), SIGN as sign(x) */
    puts_(o, info->name);
    put(o, "(", 1);
    for (unsigned i = 0; i < x->arity; i++) {
        if (i > 0)
            put(o, ", ", 2);
        print(o, d, x->arg[i]);
    }
    put(o, ")", 1);
}

void jf_double_text(char *buf, size_t size, double v) {
    if (!isfinite(v)) {
        snprintf(buf, size, "%s", isnan(v) ? "nan" : v < 0 ? "-inf" : "inf");
        return;
    }
    locale_t c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    locale_t old = c_locale ? uselocale(c_locale) : (locale_t)0;
    format_double(buf, size, v);
    if (c_locale) {
        uselocale(old);
        freelocale(c_locale);
    }
}

char *jf_dag_to_text(const jf_dag *d, jf_ref r, const char *const *param_names,
                     const char *const *var_names) {
    if (d == NULL || r >= jf_dag_size(d))
        return NULL;
    locale_t c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (c_locale == (locale_t)0)
        return NULL;
    locale_t old = uselocale(c_locale);
    out o = {NULL, 0, 0, 0, param_names, var_names};
    print(&o, d, r);
    uselocale(old);
    freelocale(c_locale);
    if (o.failed) {
        free(o.buf);
        return NULL;
    }
    return o.buf;
}
