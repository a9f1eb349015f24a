/* Name resolution: statements and expression trees (ast.h) → the model's DAG and its tables.
 *
 * This is the last stage of the front end and the home of its entry point,
 * jf_frontend_compile (grammar/frontend.h), which runs the stages in order:
 *   parse (parser.y) → declare → check expressions → liveness → implicit parameters → build.
 * - declare: `param`, `var`, `let` and the response enter one symbol table, in text order, so
 *   a clash is reported at the later declaration with a note at the earlier one.
 * - check: every name in every expression is a let-binding defined earlier, a variable, a
 *   parameter or `pi`; every call names a builtin with the right number of arguments.
 * - liveness: a let-binding is live when the model depends on it; others get a warning and
 *   build nothing (nor, in a bare formula, any parameter).
 * - implicit parameters: without any `param` statement, every other free name is a parameter,
 *   numbered in order of first appearance.
 * - build: nodes are visited in creation order, which is post-order (see ast.h), so the DAG is
 *   built bottom-up without recursion; a let-binding is built once and shared by its uses.
 * Every error carries the span of the offending text. User names never go further than the
 * model's name tables: the DAG knows parameters and variables only by number.
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../codegen/model.h"
#include "ast.h"
#include "frontend.h"

/* What a name stands for. */
typedef enum sym_kind {
    SYM_PARAM,    /* a parameter (declared, or implicit in a bare formula) */
    SYM_VAR,      /* an independent variable */
    SYM_LET,      /* a let-binding */
    SYM_RESPONSE, /* the response (left of `~`); never a value */
    SYM_UNKNOWN   /* a name already reported as unknown (later uses stay quiet) */
} sym_kind;

/* One entry of the symbol table. */
typedef struct symbol {
    const char *name;  /* the name's bytes (in the model text or in opts->vars) */
    size_t len;        /* its length */
    sym_kind kind;     /* what it stands for */
    jf_span decl;      /* where it was declared (implicit parameters: first use) */
    int has_decl;      /* 0 for default variables, which come from options, not the text */
    uint32_t index;    /* SYM_PARAM: parameter number; SYM_VAR: variable number */
    size_t pos;        /* SYM_LET: position of its statement in the text */
    jf_stmt *stmt;     /* SYM_PARAM (declared): its statement; SYM_LET: its statement */
    jf_ref ref;        /* SYM_LET: the DAG node of its expression once built */
} symbol;

/* A NAME node's `sym` for `pi`, which is a constant and no symbol. */
#define SYM_PI (UINT32_MAX - 1)

/* The state of one resolution. */
typedef struct resolver {
    jf_parse *p;                  /* text, diagnostics, tree and error counts */
    struct jf_model *m;           /* the model being filled */
    const jf_model_options *opts; /* the caller's options */
    symbol *syms;                 /* the symbol table's entries, in order of declaration */
    size_t nsyms, cap;            /* used and allocated entries of syms */
    uint32_t *slots;              /* open-addressing hash of names: symbol index + 1, 0 empty */
    size_t nslots;                /* a power of two, at least twice nsyms */
    uint32_t *params;             /* symbol index of parameter k, in parameter order */
    size_t np;                    /* number of parameters so far */
    uint32_t *vars;               /* symbol index of variable j */
    size_t nv;                    /* number of variables so far */
    int declared_mode;            /* 1 when the text has a `param` statement */
    jf_stmt *model;               /* the (first) model statement */
    size_t max_nodes;             /* the DAG's node limit, for messages */
} resolver;

/* ---- symbol table ---------------------------------------------------------------------- */

static size_t hash_name(const char *s, size_t n) {
    size_t h = 1469598103934665603u & SIZE_MAX; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211u;
    return h;
}

static int same_name(const symbol *s, const char *name, size_t len) {
    return s->len == len && memcmp(s->name, name, len) == 0;
}

/* The index of the symbol called name, or SIZE_MAX. */
static size_t lookup(const resolver *r, const char *name, size_t len) {
    if (!r->nslots) return SIZE_MAX;
    size_t mask = r->nslots - 1;
    for (size_t i = hash_name(name, len) & mask;; i = (i + 1) & mask) {
        uint32_t v = r->slots[i];
        if (!v) return SIZE_MAX;
        if (same_name(&r->syms[v - 1], name, len)) return v - 1;
    }
}

static int grow_slots(resolver *r) {
    size_t n = r->nslots ? r->nslots * 2 : 64;
    uint32_t *slots = calloc(n, sizeof *slots);
    if (!slots) return 0;
    for (size_t k = 0; k < r->nsyms; k++) {
        size_t i = hash_name(r->syms[k].name, r->syms[k].len) & (n - 1);
        while (slots[i]) i = (i + 1) & (n - 1);
        slots[i] = (uint32_t)(k + 1);
    }
    free(r->slots);
    r->slots = slots;
    r->nslots = n;
    return 1;
}

/* Adds a symbol (the name must not be present); NULL when out of memory. */
static symbol *add_symbol(resolver *r, const char *name, size_t len, sym_kind kind) {
    if (r->nsyms == r->cap) {
        size_t nc = r->cap ? r->cap * 2 : 32;
        symbol *ns = realloc(r->syms, nc * sizeof *ns);
        if (!ns) return NULL;
        r->syms = ns;
        r->cap = nc;
    }
    if (2 * (r->nsyms + 1) > r->nslots && !grow_slots(r)) return NULL;
    size_t k = r->nsyms++;
    symbol *s = &r->syms[k];
    memset(s, 0, sizeof *s);
    s->name = name;
    s->len = len;
    s->kind = kind;
    s->ref = JF_NOREF;
    size_t mask = r->nslots - 1, i = hash_name(name, len) & mask;
    while (r->slots[i]) i = (i + 1) & mask;
    r->slots[i] = (uint32_t)(k + 1);
    return s;
}

/* ---- helpers ------------------------------------------------------------------------------ */

static const char *span_text(const resolver *r, jf_span sp) { return r->p->src + sp.begin; }
static int span_len(jf_span sp) { return (int)(sp.end - sp.begin); }

/* The span of the name a CALL node starts with. */
static jf_span call_name(const resolver *r, const jf_ast *n) {
    jf_span sp = n->span;
    uint32_t e = sp.begin;
    while (e < sp.end) {
        char c = r->p->src[e];
        int ident = c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9');
        if (!ident) break;
        e++;
    }
    sp.end = e;
    return sp;
}

static int is_pi(const char *s, size_t len) { return len == 2 && memcmp(s, "pi", 2) == 0; }

static void note(resolver *r, jf_span at, const char *fmt, ...) JF_PRINTF(3, 4);
static void note(resolver *r, jf_span at, const char *fmt, ...) {
    if (r->p->stop) return;
    va_list ap;
    va_start(ap, fmt);
    jf_diag_addv(r->p->diags, JF_SEVERITY_NOTE, JF_ERR_PARSE, at.begin, at.end, fmt, ap);
    va_end(ap);
}

static const char *kind_noun(sym_kind k) {
    switch (k) {
    case SYM_PARAM: return "parameter";
    case SYM_VAR: return "variable";
    case SYM_LET: return "let-binding";
    case SYM_RESPONSE: return "response";
    default: return "name";
    }
}

/* Rejects a declaration named like a builtin function or `pi`. */
static int check_decl_name(resolver *r, jf_span sp, sym_kind as) {
    const char *s = span_text(r, sp);
    size_t len = sp.end - sp.begin;
    if (jf_builtin_find(s, len)) {
        jf_parse_error(r->p, JF_ERR_PARSE, sp,
                       "'%.*s' is a builtin function and cannot be used as a %s name",
                       span_len(sp), s, kind_noun(as));
        return 0;
    }
    if (is_pi(s, len)) {
        jf_parse_error(r->p, JF_ERR_PARSE, sp,
                       "'pi' is a builtin constant and cannot be used as a %s name", kind_noun(as));
        return 0;
    }
    return 1;
}

/* Declares a name from the text. Returns the new symbol, or NULL after reporting a clash
 * (or when out of memory: r->p->nomem). */
static symbol *declare(resolver *r, jf_span sp, sym_kind kind) {
    if (!check_decl_name(r, sp, kind)) return NULL;
    const char *s = span_text(r, sp);
    size_t len = sp.end - sp.begin;
    size_t old = lookup(r, s, len);
    if (old != SIZE_MAX) {
        const symbol *o = &r->syms[old];
        if (o->kind == kind)
            jf_parse_error(r->p, JF_ERR_PARSE, sp, "%s '%.*s' is already %s", kind_noun(kind),
                           span_len(sp), s, kind == SYM_LET ? "defined" : "declared");
        else
            jf_parse_error(r->p, JF_ERR_PARSE, sp, "'%.*s' is already declared as %s %s",
                           span_len(sp), s, o->kind == SYM_RESPONSE ? "the" : "a",
                           kind_noun(o->kind));
        if (o->has_decl) note(r, o->decl, "previous declaration is here");
        return NULL;
    }
    symbol *n = add_symbol(r, s, len, kind);
    if (!n) {
        r->p->nomem = 1;
        return NULL;
    }
    n->decl = sp;
    n->has_decl = 1;
    return n;
}

static int add_param(resolver *r, uint32_t sym, jf_span at) {
    if (r->np >= JF_FRONTEND_MAX_PARAMS) {
        jf_parse_error(r->p, JF_ERR_LIMIT, at, "the model has more than %d parameters",
                       JF_FRONTEND_MAX_PARAMS);
        return 0;
    }
    r->syms[sym].index = (uint32_t)r->np;
    r->params[r->np++] = sym;
    return 1;
}

static int add_var(resolver *r, uint32_t sym, jf_span at, int located) {
    if (r->nv >= JF_FRONTEND_MAX_VARS) {
        if (located)
            jf_parse_error(r->p, JF_ERR_LIMIT, at, "the model has more than %d variables",
                           JF_FRONTEND_MAX_VARS);
        else
            jf_diag_add(r->p->diags, JF_SEVERITY_ERROR, JF_ERR_LIMIT, SIZE_MAX, SIZE_MAX,
                        "more than %d variables were given", JF_FRONTEND_MAX_VARS);
        r->p->limit = 1;
        return 0;
    }
    r->syms[sym].index = (uint32_t)r->nv;
    r->vars[r->nv++] = sym;
    return 1;
}

/* ---- stage: declarations -------------------------------------------------------------------- */

static void check_param_values(resolver *r, const jf_stmt *s) {
    if (!s->has_bounds) return;
    if (!(s->lo < s->hi)) {
        jf_parse_error(r->p, JF_ERR_PARSE, s->bounds_span,
                       "empty bounds [%g, %g] for parameter '%.*s': the lower bound must be "
                       "less than the upper bound",
                       s->lo, s->hi, span_len(s->name), span_text(r, s->name));
    } else if (!(s->lo <= s->value && s->value <= s->hi)) {
        jf_parse_error(r->p, JF_ERR_PARSE, s->value_span,
                       "initial value %g of parameter '%.*s' is outside its bounds [%g, %g]",
                       s->value, span_len(s->name), span_text(r, s->name), s->lo, s->hi);
    }
}

/* An error in jf_model_options (no position in the text): the compile fails with JF_ERR_ARG. */
static void option_error(resolver *r, const char *fmt, ...) JF_PRINTF(2, 3);
static void option_error(resolver *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    jf_diag_addv(r->p->diags, JF_SEVERITY_ERROR, JF_ERR_ARG, SIZE_MAX, SIZE_MAX, fmt, ap);
    va_end(ap);
    r->p->bad_arg = 1;
    r->p->nerrors++;
}

/* The variable names given in jf_model_options (not in the text, so no position): each must be
 * a name the text could declare with `var` — an identifier, not a keyword, builtin or `pi` —
 * and appear once. 0 after reporting the first that is not (status JF_ERR_ARG). */
static int check_option_vars(resolver *r, const char *const *names, size_t n) {
    static const char *const keywords[] = {"param", "var", "let", "in", "inf"};
    for (size_t i = 0; i < n; i++) {
        const char *v = names[i], *why = NULL;
        if (!v) {
            option_error(r, "variable name %zu of %zu given in the options is NULL", i + 1, n);
            return 0;
        }
        size_t len = strlen(v);
        int not_name = 0;
        if (len == 0) why = "is empty";
        for (size_t k = 0; !why && k < len; k++) {
            unsigned char c = (unsigned char)v[k];
            int ok = c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                     (k > 0 && c >= '0' && c <= '9');
            if (!ok) {
                why = "is not a name (letters, digits and '_', not starting with a digit)";
                not_name = 1;
            }
        }
        for (size_t w = 0; !why && w < sizeof keywords / sizeof *keywords; w++)
            if (strcmp(v, keywords[w]) == 0) why = "is a keyword";
        if (!why && jf_builtin_find(v, len)) why = "is a builtin function";
        if (!why && is_pi(v, len)) why = "is the builtin constant pi";
        for (size_t j = 0; !why && j < i; j++)
            if (names[j] && strcmp(names[j], v) == 0) why = "is given twice";
        if (not_name) /* not a name: its bytes may be anything, so it goes by number */
            option_error(r, "variable name %zu of %zu given in the options %s", i + 1, n, why);
        else if (why)
            option_error(r, "variable name '%.*s' given in the options %s", len > 64 ? 64 : (int)len,
                        v, why);
        if (why) return 0;
    }
    return 1;
}

static void declare_all(resolver *r) {
    size_t pos = 0;
    int any_var = 0;
    for (jf_stmt *s = r->p->stmt_head; s; s = s->next, pos++) {
        symbol *sym;
        switch (s->kind) {
        case JF_STMT_PARAM:
            r->declared_mode = 1;
            check_param_values(r, s);
            if ((sym = declare(r, s->name, SYM_PARAM)) != NULL) {
                sym->stmt = s;
                add_param(r, (uint32_t)(sym - r->syms), s->name);
            }
            break;
        case JF_STMT_VAR:
            any_var = 1;
            for (jf_name_list *l = s->names; l; l = l->next)
                if ((sym = declare(r, l->name, SYM_VAR)) != NULL)
                    add_var(r, (uint32_t)(sym - r->syms), l->name, 1);
            break;
        case JF_STMT_LET:
            if ((sym = declare(r, s->name, SYM_LET)) != NULL) {
                sym->stmt = s;
                sym->pos = pos;
            }
            break;
        case JF_STMT_MODEL:
            if (r->model) {
                jf_parse_error(r->p, JF_ERR_PARSE, s->span, "more than one model statement");
                note(r, r->model->span, "the first model statement is here");
                break;
            }
            r->model = s;
            if (s->has_name) declare(r, s->name, SYM_RESPONSE);
            break;
        }
        if (r->p->nomem) return;
    }
    if (!any_var) {
        /* Default variables (the data's columns, or x): explicit declarations win, so a
         * `param x` or `let x` simply means x is not a variable. */
        static const char *const x_only[] = {"x"};
        const char *const *names = r->opts->vars ? r->opts->vars : x_only;
        size_t n = r->opts->vars ? r->opts->nvars : 1;
        if (!r->opts->vars && r->opts->nvars) {
            option_error(r, "the options give %zu variable names but no names (vars is NULL)",
                        r->opts->nvars);
            return;
        }
        if (!check_option_vars(r, names, n)) return;
        for (size_t i = 0; i < n; i++) {
            size_t len = strlen(names[i]);
            if (lookup(r, names[i], len) != SIZE_MAX) continue;
            symbol *sym = add_symbol(r, names[i], len, SYM_VAR);
            if (!sym) {
                r->p->nomem = 1;
                return;
            }
            if (!add_var(r, (uint32_t)(sym - r->syms), sym->decl, 0)) return;
        }
    }
    if (!r->model)
        jf_diag_add(r->p->diags, JF_SEVERITY_ERROR, JF_ERR_PARSE, SIZE_MAX, SIZE_MAX,
                    "no model expression");
}

/* ---- stage: checks ------------------------------------------------------------------------ */

/* Reports an unknown name once, with a suggestion among the declared names and `pi`. */
static void unknown_name(resolver *r, const jf_ast *n) {
    const char *s = span_text(r, n->span);
    size_t len = n->span.end - n->span.begin;
    size_t nc = 0;
    char **cands = malloc((r->nsyms + 1) * sizeof *cands);
    if (cands) {
        for (size_t k = 0; k < r->nsyms; k++) {
            const symbol *y = &r->syms[k];
            if (y->kind == SYM_PARAM || y->kind == SYM_VAR || y->kind == SYM_LET) {
                char *c = strndup(y->name, y->len);
                if (c) cands[nc++] = c;
            }
        }
        char *pi = strdup("pi");
        if (pi) cands[nc++] = pi;
    }
    const char *best = cands ? jf_diag_suggest(s, len, (const char *const *)cands, nc) : NULL;
    if (best)
        jf_parse_error(r->p, JF_ERR_PARSE, n->span, "unknown name '%.*s' (did you mean '%s'?)",
                       (int)len, s, best);
    else
        jf_parse_error(r->p, JF_ERR_PARSE, n->span, "unknown name '%.*s'", (int)len, s);
    for (size_t k = 0; k < nc; k++) free(cands[k]);
    free(cands);
    symbol *u = add_symbol(r, s, len, SYM_UNKNOWN);
    if (!u) r->p->nomem = 1;
}

static void check_name(resolver *r, jf_ast *n, const jf_stmt *in, size_t pos) {
    const char *s = span_text(r, n->span);
    size_t len = n->span.end - n->span.begin;
    size_t k = lookup(r, s, len);
    if (k != SIZE_MAX) {
        const symbol *y = &r->syms[k];
        switch (y->kind) {
        case SYM_LET:
            if (y->pos >= pos) {
                if (y->stmt == in)
                    jf_parse_error(r->p, JF_ERR_PARSE, n->span,
                                   "let-binding '%.*s' refers to itself", (int)len, s);
                else {
                    jf_parse_error(r->p, JF_ERR_PARSE, n->span,
                                   "let-binding '%.*s' is used before its definition", (int)len,
                                   s);
                    note(r, y->decl, "'%.*s' is defined here", (int)len, s);
                }
                return;
            }
            break;
        case SYM_RESPONSE:
            jf_parse_error(r->p, JF_ERR_PARSE, n->span,
                           "'%.*s' is the response; it cannot be used in an expression",
                           (int)len, s);
            return;
        case SYM_UNKNOWN: return;
        default: break;
        }
        n->sym = (uint32_t)k;
        return;
    }
    if (is_pi(s, len)) {
        n->sym = SYM_PI;
    } else if (jf_builtin_find(s, len)) {
        jf_parse_error(r->p, JF_ERR_PARSE, n->span, "'%.*s' is a function; call it as %.*s(...)",
                       (int)len, s, (int)len, s);
    } else if (r->declared_mode) {
        unknown_name(r, n);
    }
    /* else: a free name of a bare formula; a parameter if the model uses it */
}

static void check_call(resolver *r, const jf_ast *n) {
    jf_span sp = call_name(r, n);
    const char *s = span_text(r, sp);
    size_t len = sp.end - sp.begin;
    const jf_builtin *b = jf_builtin_find(s, len);
    if (!b) {
        if (lookup(r, s, len) != SIZE_MAX || is_pi(s, len)) {
            jf_parse_error(r->p, JF_ERR_PARSE, sp, "'%.*s' is not a function", (int)len, s);
            return;
        }
        size_t nb = 0;
        const jf_builtin *all = jf_builtin_all(&nb);
        const char **names = malloc((nb ? nb : 1) * sizeof *names);
        const char *best = NULL;
        if (names) {
            for (size_t i = 0; i < nb; i++) names[i] = all[i].name;
            best = jf_diag_suggest(s, len, names, nb);
        }
        if (best)
            jf_parse_error(r->p, JF_ERR_PARSE, sp, "unknown function '%.*s' (did you mean '%s'?)",
                           (int)len, s, best);
        else
            jf_parse_error(r->p, JF_ERR_PARSE, sp, "unknown function '%.*s'", (int)len, s);
        free(names);
        return;
    }
    size_t nargs = 0;
    for (const jf_ast *a = n->a; a; a = a->next) nargs++;
    if (nargs != b->arity)
        jf_parse_error(r->p, JF_ERR_PARSE, sp, "'%.*s' takes %u argument%s, got %zu", (int)len, s,
                       (unsigned)b->arity, b->arity == 1 ? "" : "s", nargs);
}

static void check_all(resolver *r) {
    size_t pos = 0;
    for (jf_stmt *s = r->p->stmt_head; s && !r->p->nomem; s = s->next, pos++) {
        if (s->kind != JF_STMT_LET && s->kind != JF_STMT_MODEL) continue;
        for (jf_ast *n = s->first; n && !r->p->nomem; n = n->seq) {
            if (n->kind == JF_AST_NAME) check_name(r, n, s, pos);
            else if (n->kind == JF_AST_CALL) check_call(r, n);
            if (n == s->expr) break;
        }
    }
}

/* ---- stage: liveness and implicit parameters ------------------------------------------- */

/* Lets refer only to earlier lets, so one backward sweep marks everything the model needs. */
static void mark_live(resolver *r) {
    if (r->model) r->model->live = 1;
    for (jf_stmt *s = r->p->stmt_tail; s; s = s->prev) {
        if (!s->live) continue;
        for (jf_ast *n = s->first; n; n = n->seq) {
            if (n->kind == JF_AST_NAME && n->sym < r->nsyms && r->syms[n->sym].kind == SYM_LET)
                r->syms[n->sym].stmt->live = 1;
            if (n == s->expr) break;
        }
    }
    /* After errors, liveness is incomplete (a let used too early is not marked): stay quiet. */
    if (jf_diagnostics_errors(r->p->diags)) return;
    for (jf_stmt *s = r->p->stmt_head; s; s = s->next)
        if (s->kind == JF_STMT_LET && !s->live)
            jf_diag_add(r->p->diags, JF_SEVERITY_WARNING, JF_ERR_PARSE, s->name.begin, s->name.end,
                        "let-binding '%.*s' is defined but not used", span_len(s->name),
                        span_text(r, s->name));
}

static void implicit_params(resolver *r) {
    for (jf_stmt *s = r->p->stmt_head; s; s = s->next) {
        if (!s->live) continue;
        for (jf_ast *n = s->first; n; n = n->seq) {
            if (n->kind == JF_AST_NAME && n->sym == UINT32_MAX) {
                const char *t = span_text(r, n->span);
                size_t len = n->span.end - n->span.begin;
                size_t k = lookup(r, t, len);
                if (k == SIZE_MAX) {
                    symbol *y = add_symbol(r, t, len, SYM_PARAM);
                    if (!y) {
                        r->p->nomem = 1;
                        return;
                    }
                    y->decl = n->span;
                    y->has_decl = 1;
                    k = (size_t)(y - r->syms);
                    if (!add_param(r, (uint32_t)k, n->span)) return;
                }
                n->sym = (uint32_t)k;
            }
            if (n == s->expr) break;
        }
    }
}

/* ---- stage: build the DAG ------------------------------------------------------------------- */

static jf_ref build_node(resolver *r, const jf_ast *n) {
    jf_dag *d = r->m->dag;
    switch ((jf_ast_kind)n->kind) {
    case JF_AST_NUM: return jf_dag_const(d, n->num);
    case JF_AST_NAME: {
        if (n->sym == SYM_PI) return jf_dag_const(d, 3.141592653589793);
        const symbol *y = &r->syms[n->sym];
        if (y->kind == SYM_PARAM) return jf_dag_param(d, y->index);
        if (y->kind == SYM_VAR) return jf_dag_var(d, y->index);
        return y->ref;
    }
    case JF_AST_UNARY: return jf_dag_unary(d, (jf_op)n->op, n->a->ref);
    case JF_AST_BINARY: return jf_dag_binary(d, (jf_op)n->op, n->a->ref, n->b->ref);
    case JF_AST_COND: return jf_dag_select(d, n->a->ref, n->b->ref, n->c->ref);
    case JF_AST_CALL: {
        jf_span sp = call_name(r, n);
        const jf_builtin *b = jf_builtin_find(span_text(r, sp), sp.end - sp.begin);
        jf_ref args[JF_BUILTIN_MAX_ARGS] = {JF_NOREF, JF_NOREF, JF_NOREF, JF_NOREF};
        size_t i = 0;
        for (const jf_ast *a = n->a; a && i < JF_BUILTIN_MAX_ARGS; a = a->next) args[i++] = a->ref;
        if (!b) return JF_NOREF;
        return b->shape ? jf_dag_shape(d, (jf_shape)b->shape, args) : jf_dag_make(d, b->op, args);
    }
    }
    return JF_NOREF;
}

/* Where to point when node n crossed a limit: its operator or name, not the whole (possibly
 * megabyte-long) expression. */
static jf_span limit_span(const resolver *r, const jf_ast *n) {
    jf_span sp = n->span;
    if ((n->kind == JF_AST_BINARY || n->kind == JF_AST_COND) && n->a && n->b) {
        sp.begin = n->a->span.end;
        sp.end = n->b->span.begin;
        /* the operand spans exclude parentheses and spaces around the operator: trim to it */
        while (sp.begin < sp.end && strchr(" \t\r\n()", r->p->src[sp.begin])) sp.begin++;
        while (sp.end > sp.begin && strchr(" \t\r\n()", r->p->src[sp.end - 1])) sp.end--;
        if (sp.begin == sp.end) sp = n->span;
    } else if (n->kind == JF_AST_CALL) {
        sp = call_name(r, n);
    } else if (n->kind == JF_AST_UNARY) {
        sp.end = sp.begin + 1;
    }
    return sp;
}

/* The non-finite constant ref stands for, or 0.0 when it is no constant or a finite one. */
static double nonfinite_const(const jf_dag *d, jf_ref ref) {
    const jf_node *k = jf_dag_node(d, ref);
    return k->op == JF_OP_CONST && !isfinite(k->value) ? k->value : 0.0;
}

/* Warns where an operation on finite constants folded to a non-finite one (log(-1), 1/0,
 * exp(1000)): that term is NaN or infinite at every point, so a fit through it fails at its
 * first evaluation, far from the text that did it. Only the innermost such operation is
 * named, not every one its value flows into. */
static void warn_nonfinite(resolver *r, const jf_ast *n) {
    if (n->kind == JF_AST_NUM || n->kind == JF_AST_NAME) return;
    jf_dag *d = r->m->dag;
    double v = nonfinite_const(d, n->ref);
    if (v == 0.0) return;
    if (n->kind == JF_AST_CALL) {
        for (const jf_ast *a = n->a; a; a = a->next)
            if (nonfinite_const(d, a->ref) != 0.0) return;
    } else if ((n->a && nonfinite_const(d, n->a->ref) != 0.0) ||
               (n->b && nonfinite_const(d, n->b->ref) != 0.0) ||
               (n->c && nonfinite_const(d, n->c->ref) != 0.0)) {
        return;
    }
    jf_diag_add(r->p->diags, JF_SEVERITY_WARNING, JF_ERR_PARSE, n->span.begin, n->span.end,
                "this evaluates to %s for every input", isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf");
}

/* Builds every live statement; returns JF_OK or the error status (already reported). */
static int build_all(resolver *r) {
    jf_dag *d = r->m->dag;
    for (jf_stmt *s = r->p->stmt_head; s; s = s->next) {
        if (!s->live) continue;
        for (jf_ast *n = s->first; n; n = n->seq) {
            n->ref = build_node(r, n);
            if (n->ref == JF_NOREF) {
                int err = jf_dag_error(d);
                if (err == JF_ERR_LIMIT) {
                    jf_parse_error(r->p, JF_ERR_LIMIT, limit_span(r, n),
                                   "model needs more than %zu expression nodes", r->max_nodes);
                    return JF_ERR_LIMIT;
                }
                return err ? err : JF_ERR_INTERNAL;
            }
            /* Checked at every node, so no constructor ever sees an operand deeper than the
             * limit that recursive walkers (diff, printing) rely on. */
            if (jf_dag_node(d, n->ref)->depth > JF_DAG_MAX_DEPTH) {
                jf_parse_error(r->p, JF_ERR_LIMIT, limit_span(r, n),
                               "expression is deeper than %u levels (each operator of a chain "
                               "like a+b+c counts, and let-bindings are expanded)",
                               JF_DAG_MAX_DEPTH);
                return JF_ERR_LIMIT;
            }
            warn_nonfinite(r, n);
            if (n == s->expr) break;
        }
        if (s->kind == JF_STMT_LET) {
            size_t k = lookup(r, span_text(r, s->name), s->name.end - s->name.begin);
            if (k != SIZE_MAX) r->syms[k].ref = s->expr->ref;
        }
    }
    r->m->f = r->model->expr->ref;
    return JF_OK;
}

/* Warns about parameters the built model does not contain: declared but unused, or written
 * but cancelled by simplification (x - x). They stay parameters; the fit reports them.
 * Likewise variables: a model that does not depend on its variable is most often a misspelt
 * one (`a*exp(-b*t)` where the variable is x), which would otherwise be fitted as a parameter
 * without a word; a default variable has no declaration, so the caret marks the model. */
static int warn_unused(resolver *r) {
    jf_dag *d = r->m->dag;
    size_t size = jf_dag_size(d);
    unsigned char *mark = calloc(size ? size : 1, 1);
    unsigned char *used = calloc(r->np ? r->np : 1, 1);
    unsigned char *var_used = calloc(r->nv ? r->nv : 1, 1);
    if (!mark || !used || !var_used) {
        free(mark);
        free(used);
        free(var_used);
        return JF_ERR_NOMEM;
    }
    /* Operands have smaller references than their users: one downward sweep marks all. */
    mark[r->m->f] = 1;
    for (size_t i = (size_t)r->m->f + 1; i-- > 0;) {
        if (!mark[i]) continue;
        const jf_node *nd = jf_dag_node(d, (jf_ref)i);
        if (nd->op == JF_OP_PARAM && nd->index < r->np) used[nd->index] = 1;
        if (nd->op == JF_OP_VAR && nd->index < r->nv) var_used[nd->index] = 1;
        for (unsigned a = 0; a < nd->arity; a++) mark[nd->arg[a]] = 1;
    }
    for (size_t k = 0; k < r->np; k++) {
        if (used[k]) continue;
        const symbol *y = &r->syms[r->params[k]];
        if (y->stmt)
            jf_diag_add(r->p->diags, JF_SEVERITY_WARNING, JF_ERR_PARSE, y->decl.begin, y->decl.end,
                        "parameter '%.*s' is declared but not used by the model", (int)y->len,
                        y->name);
        else
            jf_diag_add(r->p->diags, JF_SEVERITY_WARNING, JF_ERR_PARSE, y->decl.begin, y->decl.end,
                        "parameter '%.*s' cancels out of the model expression", (int)y->len,
                        y->name);
    }
    for (size_t j = 0; j < r->nv; j++) {
        if (var_used[j]) continue;
        const symbol *y = &r->syms[r->vars[j]];
        if (y->has_decl)
            jf_diag_add(r->p->diags, JF_SEVERITY_WARNING, JF_ERR_PARSE, y->decl.begin,
                        y->decl.end, "the model does not depend on variable '%.*s'", (int)y->len,
                        y->name);
        else
            jf_diag_add(r->p->diags, JF_SEVERITY_WARNING, JF_ERR_PARSE, r->model->expr->span.begin,
                        r->model->expr->span.end,
                        "the model does not depend on its variable '%.*s'; every other name in "
                        "it is a parameter",
                        (int)y->len, y->name);
    }
    free(mark);
    free(used);
    free(var_used);
    return JF_OK;
}

/* ---- filling the model ---------------------------------------------------------------------- */

static int fill_model(resolver *r) {
    struct jf_model *m = r->m;
    size_t np = r->np ? r->np : 1, nv = r->nv ? r->nv : 1;
    m->param_names = calloc(np, sizeof *m->param_names);
    m->p_init = malloc(np * sizeof *m->p_init);
    m->p_lo = malloc(np * sizeof *m->p_lo);
    m->p_hi = malloc(np * sizeof *m->p_hi);
    m->var_names = calloc(nv, sizeof *m->var_names);
    if (!m->param_names || !m->p_init || !m->p_lo || !m->p_hi || !m->var_names)
        return JF_ERR_NOMEM;
    m->np = r->np;
    m->nv = r->nv;
    for (size_t k = 0; k < r->np; k++) {
        const symbol *y = &r->syms[r->params[k]];
        m->param_names[k] = strndup(y->name, y->len);
        if (!m->param_names[k]) return JF_ERR_NOMEM;
        m->p_init[k] = y->stmt ? y->stmt->value : NAN;
        m->p_lo[k] = y->stmt ? y->stmt->lo : -INFINITY;
        m->p_hi[k] = y->stmt ? y->stmt->hi : INFINITY;
    }
    for (size_t j = 0; j < r->nv; j++) {
        const symbol *y = &r->syms[r->vars[j]];
        m->var_names[j] = strndup(y->name, y->len);
        if (!m->var_names[j]) return JF_ERR_NOMEM;
    }
    const jf_stmt *ms = r->model;
    m->response = ms->has_name ? strndup(span_text(r, ms->name), ms->name.end - ms->name.begin)
                               : strdup("y");
    return m->response ? JF_OK : JF_ERR_NOMEM;
}

/* ---- the entry point ------------------------------------------------------------------------ */

/* The status that the errors reported so far stand for. */
static int error_status(const jf_parse *p) {
    if (p->nomem) return JF_ERR_NOMEM;
    if (p->limit) return JF_ERR_LIMIT;
    if (p->bad_arg) return JF_ERR_ARG;
    return JF_ERR_PARSE;
}

static int resolve(resolver *r) {
    jf_parse *p = r->p;
    r->params = malloc(JF_FRONTEND_MAX_PARAMS * sizeof *r->params);
    r->vars = malloc(JF_FRONTEND_MAX_VARS * sizeof *r->vars);
    if (!r->params || !r->vars) return JF_ERR_NOMEM;
    declare_all(r);
    if (p->nomem) return JF_ERR_NOMEM;
    check_all(r);
    if (p->nomem) return JF_ERR_NOMEM;
    if (!r->model) return error_status(p);
    mark_live(r);
    if (jf_diagnostics_errors(p->diags)) return error_status(p);
    if (!r->declared_mode) implicit_params(r);
    if (jf_diagnostics_errors(p->diags)) return error_status(p);
    int st = build_all(r);
    if (st != JF_OK) return st;
    st = warn_unused(r);
    if (st != JF_OK) return st;
    return fill_model(r);
}

int jf_frontend_compile(const char *text, size_t len, const jf_model_options *opts,
                        struct jf_model *m, jf_diagnostics *diags) {
    /* Flex measures its input in int and spans are 32-bit; the option cannot raise this. */
    size_t limit = opts->max_source_bytes;
    if (limit > (size_t)INT_MAX - 2) limit = (size_t)INT_MAX - 2;
    if (len > limit) {
        jf_diag_add(diags, JF_SEVERITY_ERROR, JF_ERR_LIMIT, SIZE_MAX, SIZE_MAX,
                    "model text is %zu bytes; the limit is %zu bytes", len, limit);
        return JF_ERR_LIMIT;
    }
    jf_parse p;
    memset(&p, 0, sizeof p);
    p.src = text;
    p.len = len;
    p.diags = diags;
    /* Editors on some systems start UTF-8 files with a byte-order mark: it is not text. */
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) p.offset = 3;
    p.max_nest = opts->max_depth ? opts->max_depth : 256;
    if (p.max_nest > JF_FRONTEND_MAX_NEST) p.max_nest = JF_FRONTEND_MAX_NEST;
    p.c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (p.c_locale == (locale_t)0) return JF_ERR_NOMEM;

    resolver r;
    memset(&r, 0, sizeof r);
    r.p = &p;
    r.m = m;
    r.opts = opts;
    r.max_nodes = opts->max_nodes ? opts->max_nodes : JF_DAG_MAX_NODES;

    int st = jf_parse_run(&p);
    if (st == JF_OK && p.nerrors) st = error_status(&p);
    if (st == JF_OK) st = resolve(&r);
    if (st == JF_OK && p.nomem) st = JF_ERR_NOMEM;

    free(r.syms);
    free(r.slots);
    free(r.params);
    free(r.vars);
    jf_arena_free(&p.arena);
    freelocale(p.c_locale);
    return st;
}
