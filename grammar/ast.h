/* The syntax tree shared by the parser (grammar/parser.y) and the resolver (grammar/resolve.c).
 *
 * The parser builds the tree bottom-up in its actions, so every expression node is created after
 * its operands. Each node is also threaded onto one list in creation order (`seq`): walking that
 * list is a post-order traversal, which lets the resolver check names and build the DAG without
 * recursing, however deep the input nests. All nodes, statements and name lists live in one
 * arena that is freed in a single call when the compile ends, on every path.
 *
 * Locations are byte spans [begin, end) into the model text; lines and columns are computed only
 * when a diagnostic is added (runtime/diag.c).
 */
#ifndef JF_AST_H
#define JF_AST_H

#include <locale.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "../codegen/expr.h"
#include "../runtime/diag.h"

/* A byte span [begin, end) in the model text; also bison's location type. */
typedef struct jf_span {
    uint32_t begin; /* offset of the first byte (texts are below 2 GiB: flex counts in int) */
    uint32_t end;   /* offset one past the last byte */
} jf_span;

/* Kinds of expression nodes. */
typedef enum jf_ast_kind {
    JF_AST_NUM,    /* a number literal (num) */
    JF_AST_NAME,   /* a name used as a value (resolved to a let, variable, parameter or pi) */
    JF_AST_UNARY,  /* op applied to a (only JF_OP_NEG: unary plus builds no node) */
    JF_AST_BINARY, /* op applied to a and b (arithmetic, ^ and comparisons) */
    JF_AST_CALL,   /* a call name(args); arguments chained from a through `next` */
    JF_AST_COND    /* a ? b : c (if(a, b, c) means the same but stays a CALL node) */
} jf_ast_kind;

/* One expression node. Kept small: a hostile 1 MiB text can hold half a million of them. */
typedef struct jf_ast {
    unsigned char kind;  /* a jf_ast_kind */
    unsigned char op;    /* the jf_op of UNARY and BINARY nodes */
    uint32_t sym;        /* resolve: symbol index of a NAME (UINT32_MAX: none) */
    jf_span span;        /* the whole expression; NAME and CALL spans start with the name */
    double num;          /* NUM: the value */
    struct jf_ast *a;    /* first operand (CALL: first argument, or NULL) */
    struct jf_ast *b;    /* second operand */
    struct jf_ast *c;    /* third operand (COND) */
    struct jf_ast *next; /* CALL arguments: the next argument of the same call */
    struct jf_ast *seq;  /* the node created after this one (post-order over the whole text) */
    jf_ref ref;          /* resolve: the DAG node this expression became */
} jf_ast;

/* A list of names (the operands of `var`). */
typedef struct jf_name_list {
    jf_span name;              /* span of one name */
    struct jf_name_list *next; /* the next name, in text order */
} jf_name_list;

/* Kinds of statements. */
typedef enum jf_stmt_kind {
    JF_STMT_PARAM, /* param NAME = NUMBER [in [LO, HI]] */
    JF_STMT_VAR,   /* var NAME {, NAME} */
    JF_STMT_LET,   /* let NAME = expr */
    JF_STMT_MODEL  /* NAME ~ expr, or a bare expr */
} jf_stmt_kind;

/* One statement. */
typedef struct jf_stmt {
    jf_stmt_kind kind;   /* what it declares */
    jf_span span;        /* the whole statement */
    jf_span name;        /* PARAM, LET: the declared name; MODEL: the response (if has_name) */
    int has_name;        /* MODEL: 1 when written `NAME ~ expr` */
    jf_ast *expr;        /* LET, MODEL: the expression (the last node of its post-order run) */
    jf_ast *first;       /* LET, MODEL: the first node of the expression in creation order */
    double value;        /* PARAM: initial value */
    jf_span value_span;  /* PARAM: span of the initial value (sign included) */
    int has_bounds;      /* PARAM: 1 when `in [LO, HI]` is given */
    double lo, hi;       /* PARAM: the bounds (-inf/+inf when not given) */
    jf_span bounds_span; /* PARAM: span of `[LO, HI]` */
    jf_name_list *names; /* VAR: the declared names */
    int live;            /* resolve: 1 when the model depends on it (MODEL, used LETs) */
    struct jf_stmt *next, *prev; /* neighbours in text order */
} jf_stmt;

/* One block of the arena. */
typedef struct jf_arena_block {
    struct jf_arena_block *next; /* the previously filled block */
    size_t used, cap;            /* bytes handed out and bytes available in data */
    max_align_t data[];          /* the memory itself */
} jf_arena_block;

/* A bump allocator freed in one call. */
typedef struct jf_arena {
    jf_arena_block *head; /* the block being filled (NULL before the first allocation) */
} jf_arena;

/* Zeroed memory for n bytes from a, aligned for any type; NULL when out of memory. */
JF_INTERNAL void *jf_arena_alloc(jf_arena *a, size_t n);
/* Frees every block of a and leaves it empty. */
JF_INTERNAL void jf_arena_free(jf_arena *a);

/* Everything the lexer and the parser share while one text is parsed (flex's yyextra and
 * bison's parse-param). Owned by jf_frontend_compile. */
typedef struct jf_parse {
    const char *src;        /* the model text (not NUL-terminated; may contain NULs) */
    size_t len;             /* bytes in src */
    jf_diagnostics *diags;  /* where errors go */
    jf_arena arena;         /* owns every node, statement and name list */
    locale_t c_locale;      /* the "C" locale, so numbers never depend on the process locale */
    size_t offset;          /* lexer: byte offset of the next token (spans come from here) */
    size_t paren_depth;     /* lexer: open '(' and '[': newlines inside them are spaces */
    size_t max_nest;        /* the nesting limit (opts->max_depth) */
    size_t open;            /* parser: nesting constructs open right now (see parser.y) */
    jf_ast *seq_head;       /* the first node created */
    jf_ast *seq_tail;       /* the last node created */
    jf_ast *stmt_mark;      /* seq_tail when the previous statement ended */
    jf_stmt *stmt_head;     /* the first statement */
    jf_stmt *stmt_tail;     /* the last statement */
    size_t nerrors;         /* errors reported so far (parser and resolver) */
    int nomem;              /* 1 after an allocation failed */
    int limit;              /* 1 after a limit error (the status becomes JF_ERR_LIMIT) */
    int bad_arg;            /* 1 after an error in the options (the status becomes JF_ERR_ARG) */
    int stop;               /* 1 when checking must end early (too many errors) */
    jmp_buf fatal;          /* where flex's fatal-error hook returns (out of memory only) */
    void *flex_mem[8];      /* flex's live allocations, freed here when flex fails half-way */
    size_t nflex;           /* entries used in flex_mem */
} jf_parse;

/* Stop reporting syntax errors after this many; the rest of the text is skipped. */
#define JF_PARSE_MAX_ERRORS 50

/* Parses p->src into p's statement list. Returns JF_OK (check p->nerrors for syntax errors),
 * JF_ERR_LIMIT (a limit error was reported) or JF_ERR_NOMEM. Defined in parser.y. */
JF_INTERNAL int jf_parse_run(jf_parse *p);

/* Reports an error over span `at` with the given status (JF_ERR_PARSE or JF_ERR_LIMIT) and
 * counts it; past JF_PARSE_MAX_ERRORS it notes that it stops and sets p->stop instead. */
JF_INTERNAL void jf_parse_error(jf_parse *p, int status, jf_span at, const char *fmt, ...)
    JF_PRINTF(4, 5);

/* Node constructors used by the grammar actions: each appends the node to the creation-order
 * list and returns NULL (after setting p->nomem) when out of memory. */
JF_INTERNAL jf_ast *jf_ast_new(jf_parse *p, jf_ast_kind kind, jf_span span);
JF_INTERNAL jf_stmt *jf_stmt_new(jf_parse *p, jf_stmt_kind kind, jf_span span);

/* Converts the NUL-terminated number literal text with the C locale. Sets *out_of_range when
 * the value overflows or a non-zero literal underflows to zero. */
JF_INTERNAL double jf_parse_number(jf_parse *p, const char *text, int *out_of_range);

#endif
