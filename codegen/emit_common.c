/* What the C and CUDA emitters share: the string builder, exact constant formatting, the
 * straight-line statements of a schedule, and the driver that puts prelude and models together.
 *
 * The statements are the same text for both targets: one `const double t<n> = ...;` per
 * operation, spelled as prelude.h's table says (libm names for builtins, C operators, jf_*
 * helpers for what is ours), so the compiled kernels perform the interpreter's operations in
 * the interpreter's order.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "prelude.h"

extern const char jf_embed_prelude_h[];
extern const char jf_embed_loss_h[];

/* ---- string builder -------------------------------------------------------------------------- */

static int buf_reserve(jf_buf *b, size_t extra) {
    if (b->nomem) return 0;
    if (b->len + extra + 1 <= b->cap) return 1;
    size_t ncap = b->cap ? b->cap : 4096;
    while (ncap < b->len + extra + 1) ncap *= 2;
    char *ns = realloc(b->s, ncap);
    if (!ns) {
        b->nomem = 1;
        return 0;
    }
    b->s = ns;
    b->cap = ncap;
    return 1;
}

void jf_buf_puts(jf_buf *b, const char *s) {
    size_t n = strlen(s);
    if (!buf_reserve(b, n)) return;
    memcpy(b->s + b->len, s, n + 1);
    b->len += n;
}

void jf_buf_printf(jf_buf *b, const char *fmt, ...) {
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->nomem = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        jf_buf_puts(b, small);
        return;
    }
    if (!buf_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *jf_buf_take(jf_buf *b) {
    char *s = b->nomem ? NULL : b->s;
    if (b->nomem) free(b->s);
    if (s == NULL && !b->nomem) s = calloc(1, 1);
    memset(b, 0, sizeof *b);
    return s;
}

/* ---- exact constants ------------------------------------------------------------------------ */

void jf_buf_double(jf_buf *b, double v) {
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    int neg = (int)(bits >> 63);
    int bexp = (int)((bits >> 52) & 0x7ff);
    uint64_t frac = bits & ((UINT64_C(1) << 52) - 1);
    if (bexp == 0x7ff) {
        jf_buf_puts(b, frac ? "(0.0/0.0)" : neg ? "(-1.0/0.0)" : "(1.0/0.0)");
        return;
    }
    if (bexp == 0 && frac == 0) {
        jf_buf_puts(b, neg ? "(-0.0)" : "0.0");
        return;
    }
    /* Normal numbers are 0x1.<frac>p<e>; subnormals 0x0.<frac>p-1022 (exactly their value). */
    char out[40];
    size_t n = 0;
    if (neg) {
        out[n++] = '(';
        out[n++] = '-';
    }
    out[n++] = '0';
    out[n++] = 'x';
    out[n++] = bexp ? '1' : '0';
    static const char hex[] = "0123456789abcdef";
    if (frac) {
        out[n++] = '.';
        int digits = 13;
        while ((frac & 0xf) == 0) {
            frac >>= 4;
            digits--;
        }
        for (int i = digits - 1; i >= 0; i--) out[n++] = hex[(frac >> (4 * i)) & 0xf];
    }
    int e = bexp ? bexp - 1023 : -1022;
    out[n++] = 'p';
    out[n++] = e < 0 ? '-' : '+';
    unsigned ue = (unsigned)(e < 0 ? -e : e);
    char ed[8];
    int ne = 0;
    do {
        ed[ne++] = (char)('0' + ue % 10);
        ue /= 10;
    } while (ue);
    while (ne) out[n++] = ed[--ne];
    if (neg) out[n++] = ')';
    out[n] = '\0';
    jf_buf_puts(b, out);
}

/* ---- models --------------------------------------------------------------------------------- */

size_t jf_emit_num_acc(size_t np) { return np * (np + 1) / 2 + np + 1; }

int jf_emit_model_init(jf_emit_model *em, const struct jf_model *m, const char *suffix) {
    memset(em, 0, sizeof *em);
    if (!m || !m->dag || m->f == JF_NOREF || (m->np && !m->df)) return JF_ERR_ARG;
    size_t size = jf_dag_size(m->dag);
    if (m->f >= size) return JF_ERR_ARG;
    for (size_t k = 0; k < m->np; k++)
        if (m->df[k] >= size) return JF_ERR_ARG;
    jf_ref *roots = malloc((m->np + 1) * sizeof *roots);
    if (!roots) return JF_ERR_NOMEM;
    roots[0] = m->f;
    for (size_t k = 0; k < m->np; k++) roots[k + 1] = m->df[k];
    em->m = m;
    em->suffix = suffix ? suffix : "";
    em->sf = jf_schedule_build(m->dag, roots, 1);
    em->sall = jf_schedule_build(m->dag, roots, m->np + 1);
    free(roots);
    if (!em->sf || !em->sall) {
        jf_emit_model_free(em);
        return JF_ERR_NOMEM;
    }
    return JF_OK;
}

void jf_emit_model_free(jf_emit_model *em) {
    jf_schedule_free(em->sf);
    jf_schedule_free(em->sall);
    memset(em, 0, sizeof *em);
}

void jf_emit_operand(jf_buf *b, const jf_schedule *s, size_t pos) {
    const jf_node *nd = jf_dag_node(s->dag, s->nodes[pos]);
    switch ((jf_op)nd->op) {
    case JF_OP_CONST:
        if (b->real) jf_buf_printf(b, "((%s)", b->real);
        jf_buf_double(b, nd->value);
        if (b->real) jf_buf_puts(b, ")");
        break;
    case JF_OP_PARAM: jf_buf_printf(b, "p%u", (unsigned)nd->index); break;
    case JF_OP_VAR: jf_buf_printf(b, "x%u", (unsigned)nd->index); break;
    default: jf_buf_printf(b, "t%zu", pos); break;
    }
}

void jf_emit_load_params(jf_buf *b, const jf_schedule *s, const char *indent) {
    for (size_t i = 0; i < s->n; i++) {
        const jf_node *nd = jf_dag_node(s->dag, s->nodes[i]);
        if (nd->op == JF_OP_PARAM && b->real)
            jf_buf_printf(b, "%sconst %s p%u = (%s)p[%u];\n", indent, b->real,
                          (unsigned)nd->index, b->real, (unsigned)nd->index);
        else if (nd->op == JF_OP_PARAM)
            jf_buf_printf(b, "%sconst double p%u = p[%u];\n", indent, (unsigned)nd->index,
                          (unsigned)nd->index);
    }
}

void jf_emit_load_vars(jf_buf *b, const jf_schedule *s, const char *indent) {
    for (size_t i = 0; i < s->n; i++) {
        const jf_node *nd = jf_dag_node(s->dag, s->nodes[i]);
        if (nd->op == JF_OP_VAR && b->real)
            jf_buf_printf(b, "%sconst %s x%u = (%s)x[%u * ldx + i];\n", indent, b->real,
                          (unsigned)nd->index, b->real, (unsigned)nd->index);
        else if (nd->op == JF_OP_VAR)
            jf_buf_printf(b, "%sconst double x%u = x[%u * ldx + i];\n", indent,
                          (unsigned)nd->index, (unsigned)nd->index);
    }
}

/* The spelling of each operation, as prelude.h's table prescribes. */
static const char *call_name(jf_op op) {
    switch (op) {
    case JF_OP_EXP: return "exp";
    case JF_OP_LOG: return "log";
    case JF_OP_LOG10: return "log10";
    case JF_OP_SQRT: return "sqrt";
    case JF_OP_CBRT: return "cbrt";
    case JF_OP_ABS: return "fabs";
    case JF_OP_SIN: return "sin";
    case JF_OP_COS: return "cos";
    case JF_OP_TAN: return "tan";
    case JF_OP_ASIN: return "asin";
    case JF_OP_ACOS: return "acos";
    case JF_OP_ATAN: return "atan";
    case JF_OP_SINH: return "sinh";
    case JF_OP_COSH: return "cosh";
    case JF_OP_TANH: return "tanh";
    case JF_OP_ERF: return "erf";
    case JF_OP_ERFC: return "erfc";
    case JF_OP_SIGN: return "jf_sign";
    case JF_OP_POW: return "pow";
    case JF_OP_ATAN2: return "atan2";
    case JF_OP_MIN: return "jf_min";
    case JF_OP_MAX: return "jf_max";
    case JF_OP_HYPOT: return "hypot";
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

static const char *infix_op(jf_op op) {
    switch (op) {
    case JF_OP_ADD: return " + ";
    case JF_OP_SUB: return " - ";
    case JF_OP_MUL: return " * ";
    case JF_OP_DIV: return " / ";
    default: return NULL;
    }
}

size_t jf_emit_sincos_partner(const jf_schedule *s, size_t pos) {
    jf_op want = jf_dag_node(s->dag, s->nodes[pos])->op == JF_OP_SIN ? JF_OP_COS : JF_OP_SIN;
    for (size_t j = 0; j < s->n; j++)
        if (jf_dag_node(s->dag, s->nodes[j])->op == want && s->argpos[3 * j] == s->argpos[3 * pos])
            return j;
    return s->n;
}

void jf_emit_statements(jf_buf *b, const jf_schedule *s, const char *indent) {
    const char *real = b->real ? b->real : "double";
    for (size_t i = 0; i < s->n; i++) {
        const jf_node *nd = jf_dag_node(s->dag, s->nodes[i]);
        jf_op op = (jf_op)nd->op;
        if (op == JF_OP_CONST || op == JF_OP_PARAM || op == JF_OP_VAR) continue;
        const uint32_t *ap = &s->argpos[3 * i];
        size_t pair = b->sincos && (op == JF_OP_SIN || op == JF_OP_COS)
                          ? jf_emit_sincos_partner(s, i)
                          : s->n;
        if (pair < s->n) {
            /* sincos (sincosf in single precision) gives the bits sin and cos give: the same
             * range reduction and polynomials, done once */
            size_t first = pair < i ? pair : i;
            if (first == i) {
                jf_buf_printf(b, "%s%s sc%zus, sc%zuc;\n%s%s(", indent, real, i, i, indent,
                              b->real ? "sincosf" : "sincos");
                jf_emit_operand(b, s, ap[0]);
                jf_buf_printf(b, ", &sc%zus, &sc%zuc);\n", i, i);
            }
            jf_buf_printf(b, "%sconst %s t%zu = sc%zu%c;\n", indent, real, i, first,
                          op == JF_OP_SIN ? 's' : 'c');
            continue;
        }
        jf_buf_printf(b, "%sconst %s t%zu = ", indent, real, i);
        if (op == JF_OP_NEG) {
            jf_buf_puts(b, "-");
            jf_emit_operand(b, s, ap[0]);
        } else if (infix_op(op)) {
            jf_emit_operand(b, s, ap[0]);
            jf_buf_puts(b, infix_op(op));
            jf_emit_operand(b, s, ap[1]);
        } else if (op == JF_OP_POW &&
                   jf_dag_node(s->dag, s->nodes[ap[1]])->op == JF_OP_CONST) {
            /* The project's POW rule (prelude.h, jf_pow_const): a constant integer exponent
             * with |n| <= JF_POWI_MAX is jf_powi, any other constant pow(). Deciding here
             * prints the call jf_pow_const would make, without its test. */
            double c = jf_dag_node(s->dag, s->nodes[ap[1]])->value;
            if (c >= -JF_POWI_MAX && c <= JF_POWI_MAX && c == (double)(int)c) {
                jf_buf_puts(b, "jf_powi(");
                jf_emit_operand(b, s, ap[0]);
                jf_buf_printf(b, ", %d)", (int)c);
            } else {
                jf_buf_puts(b, "pow(");
                jf_emit_operand(b, s, ap[0]);
                jf_buf_puts(b, ", ");
                jf_emit_operand(b, s, ap[1]);
                jf_buf_puts(b, ")");
            }
        } else {
            const char *name = call_name(op);
            jf_buf_printf(b, "%s(", name ? name : "jf_unknown_op");
            for (unsigned a = 0; a < nd->arity; a++) {
                if (a) jf_buf_puts(b, ", ");
                jf_emit_operand(b, s, ap[a]);
            }
            jf_buf_puts(b, ")");
        }
        jf_buf_puts(b, ";\n");
    }
}

void jf_emit_prelude(jf_buf *b, const jf_emit_options *o) {
    jf_buf_printf(b, "/* generated by jitfit %s (kernel ABI %d) for %s; do not edit */\n",
                  JITFIT_VERSION, JF_EMIT_ABI_VERSION,
                  o->target == JF_EMIT_CUDA ? "NVRTC" : "a C compiler");
    if (o->with_prelude) {
        jf_buf_puts(b, jf_embed_prelude_h);
        jf_buf_puts(b, "\n");
        jf_buf_puts(b, jf_embed_loss_h);
    } else {
        jf_buf_puts(b, "/* ... text of codegen/prelude.h and codegen/loss.h ... */\n");
    }
    jf_buf_puts(b, "\n");
    if (o->target == JF_EMIT_C) jf_emit_c_vec_prelude(b, o);
}

jf_emit_options jf_emit_options_default(jf_emit_target target) {
    jf_emit_options o;
    memset(&o, 0, sizeof o);
    o.target = target;
    o.neq_shape = JF_NEQ_FUSED;
    o.block = 8;
    o.with_prelude = 1;
    o.suffix = NULL;
    o.cuda_loss = -1;
    o.vec_isa = JF_VEC_NONE;
    return o;
}

static int suffix_ok(const char *s) {
    for (; s && *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return 0;
    return 1;
}

char *jf_emit_many(const struct jf_model *const *models, const char *const *suffixes,
                   size_t count, const jf_emit_options *opts) {
    jf_emit_options o = opts ? *opts : jf_emit_options_default(JF_EMIT_C);
    if (o.block < 1) o.block = 1;
    jf_buf b = {0};
    jf_emit_prelude(&b, &o);
    for (size_t i = 0; i < count; i++) {
        const char *suffix = suffixes ? suffixes[i] : o.suffix;
        jf_emit_model em;
        if (!suffix_ok(suffix) || jf_emit_model_init(&em, models[i], suffix) != JF_OK) {
            free(b.s);
            return NULL;
        }
        if (o.target == JF_EMIT_CUDA) jf_emit_cuda_model(&b, &em, &o);
        else jf_emit_c_model(&b, &em, &o);
        jf_emit_model_free(&em);
    }
    return jf_buf_take(&b);
}

char *jf_emit(const struct jf_model *m, const jf_emit_options *opts) {
    return jf_emit_many(&m, NULL, 1, opts);
}
