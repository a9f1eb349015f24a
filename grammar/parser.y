/* The grammar of the jitfit model language: tokens from grammar/lexer.l → statements and
 * expression trees (grammar/ast.h), which grammar/resolve.c turns into the DAG.
 *
 * This file is the specification of the syntax: each rule carries a one-line EBNF comment, and
 * docs/DSL.md repeats them. Operator precedence is declared below (never by raising %expect):
 * from loosest to tightest `?:`, comparisons (non-associative), `+ -`, `* /`, unary `+ -`, and
 * `^` (right-associative, so -x^2 = -(x^2), 2^3^2 = 2^9, and 2^-x is allowed).
 *
 * Nesting is bounded without recursion: every construct that can nest (parentheses, calls,
 * unary signs, the exponent of `^`, the branches of `?:`) starts with an "opener" nonterminal
 * whose action runs as soon as its token is shifted, counts the constructs open at that moment
 * and rejects the text once the count passes the limit. So a text of 100000 '(' is refused at
 * the 257th with a located error, long before bison's stack could grow; each open construct
 * keeps at most a few dozen entries on that stack, so YYMAXDEPTH is never reached in practice
 * (if it were, the parser reports it as a located error rather than crashing). Left-associative
 * chains such as x+x+...+x reduce as they go and need no stack at all.
 *
 * Syntax errors are reported by yyreport_syntax_error below in words ("unexpected ')',
 * expected an expression"); after one, the parser skips to the end of the line and goes on, so
 * one run reports one error per bad statement.
 */

%code requires {
#include "grammar/ast.h"

#ifndef YY_TYPEDEF_YY_SCANNER_T
#define YY_TYPEDEF_YY_SCANNER_T
typedef void *yyscan_t;
#endif

/* A call's argument list while it is being parsed. */
typedef struct jf_arglist {
    jf_ast *head; /* the first argument */
    jf_ast *tail; /* the last argument (new ones are appended here) */
} jf_arglist;
}

%code {
#include <math.h>
#include <stdio.h>
#include <string.h>

int jf_yylex(JF_YYSTYPE *lvalp, JF_YYLTYPE *llocp, yyscan_t scanner);
static void jf_yyerror(JF_YYLTYPE *loc, yyscan_t scanner, jf_parse *ctx, const char *msg);

/* Each open construct uses at most ~20 stack entries (an argument list, a pending operator per
 * precedence level) and the nesting limit is capped at JF_FRONTEND_MAX_NEST (frontend.h), so
 * this is never reached unless the opener bookkeeping is wrong. */
#define YYMAXDEPTH 4000000
#define YYINITDEPTH 256

/* Spans: a rule covers its first to its last symbol; an empty rule sits at the previous end. */
#define YYLLOC_DEFAULT(Cur, Rhs, N)                                                         \
    do {                                                                                    \
        if (N) {                                                                            \
            (Cur).begin = YYRHSLOC(Rhs, 1).begin;                                           \
            (Cur).end = YYRHSLOC(Rhs, N).end;                                               \
        } else {                                                                            \
            (Cur).begin = (Cur).end = YYRHSLOC(Rhs, 0).end;                                 \
        }                                                                                   \
    } while (0)

/* Abort the parse when a constructor ran out of memory (ctx->nomem tells why). */
#define NEED(x)                                                                             \
    do {                                                                                    \
        if (!(x)) YYABORT;                                                                  \
    } while (0)

static int open_nest(jf_parse *p, jf_span at);
static jf_ast *make_binary(jf_parse *p, jf_op op, jf_ast *a, jf_ast *b, jf_span at);
}

%define api.pure full
%define api.prefix {jf_yy}
%define api.token.prefix {TOK_}
%define api.location.type {jf_span}
%define parse.error custom
%define parse.lac full
%locations
%expect 0
%lex-param {yyscan_t scanner}
%parse-param {yyscan_t scanner} {jf_parse *ctx}
%initial-action { @$.begin = @$.end = 0; }

%union {
    double num;         /* NUMBER, signed numbers and bounds */
    jf_ast *node;       /* expressions */
    jf_arglist args;    /* call arguments */
    jf_name_list *names; /* the names of `var` (in reverse while parsing) */
}

%token <num> NUMBER "number"
%token NAME "name"
%token PARAM "'param'" VAR "'var'" LET "'let'" IN "'in'" INF "'inf'"
%token PLUS "'+'" MINUS "'-'" STAR "'*'" SLASH "'/'" CARET "'^'"
%token LPAREN "'('" RPAREN "')'" LBRACKET "'['" RBRACKET "']'"
%token COMMA "','" SEMI "';'" ASSIGN "'='" TILDE "'~'" QUESTION "'?'" COLON "':'"
%token LT "'<'" LE "'<='" GT "'>'" GE "'>='" EQ "'=='" NE "'!='"
%token NEWLINE "end of line"
%token INVALID "invalid character"

%type <node> expr
%type <args> args
%type <num> number bound
%type <names> names

%right QUESTION COLON
%nonassoc LT LE GT GE EQ NE
%left PLUS MINUS
%left STAR SLASH
%precedence UNARY
%right CARET

%%

/* program = line { sep line } */
program:
    line
  | program sep line
  ;

/* sep = NEWLINE | ";" */
sep:
    NEWLINE
  | SEMI
  ;

/* line = [ statement ]   (a bad line is skipped to its end after the error is reported) */
line:
    %empty
  | stmt            { ctx->open = 0; }
  | error           {
                        ctx->open = 0;
                        ctx->stmt_mark = ctx->seq_tail;
                        if (ctx->stop) YYABORT;
                    }
  ;

/* statement = "param" NAME "=" number [ "in" "[" bound "," bound "]" ]
 *           | "var" NAME { "," NAME }
 *           | "let" NAME "=" expr
 *           | NAME "~" expr
 *           | expr */
stmt:
    PARAM NAME ASSIGN number
                    {
                        jf_stmt *s = jf_stmt_new(ctx, JF_STMT_PARAM, @$);
                        NEED(s);
                        s->name = @2;
                        s->value = $4;
                        s->value_span = @4;
                    }
  | PARAM NAME ASSIGN number IN LBRACKET bound COMMA bound RBRACKET
                    {
                        jf_stmt *s = jf_stmt_new(ctx, JF_STMT_PARAM, @$);
                        NEED(s);
                        s->name = @2;
                        s->value = $4;
                        s->value_span = @4;
                        s->has_bounds = 1;
                        s->lo = $7;
                        s->hi = $9;
                        s->bounds_span.begin = @6.begin;
                        s->bounds_span.end = @10.end;
                    }
  | VAR names       {
                        jf_stmt *s = jf_stmt_new(ctx, JF_STMT_VAR, @$);
                        NEED(s);
                        jf_name_list *rev = NULL, *l = $2;
                        while (l) {
                            jf_name_list *next = l->next;
                            l->next = rev;
                            rev = l;
                            l = next;
                        }
                        s->names = rev;
                    }
  | LET NAME ASSIGN expr
                    {
                        jf_stmt *s = jf_stmt_new(ctx, JF_STMT_LET, @$);
                        NEED(s);
                        s->name = @2;
                        s->expr = $4;
                    }
  | NAME TILDE expr {
                        jf_stmt *s = jf_stmt_new(ctx, JF_STMT_MODEL, @$);
                        NEED(s);
                        s->name = @1;
                        s->has_name = 1;
                        s->expr = $3;
                    }
  | expr            {
                        jf_stmt *s = jf_stmt_new(ctx, JF_STMT_MODEL, @$);
                        NEED(s);
                        s->expr = $1;
                    }
  ;

/* number = [ "+" | "-" ] NUMBER */
number:
    NUMBER          { $$ = $1; }
  | MINUS NUMBER    { $$ = -$2; }
  | PLUS NUMBER     { $$ = $2; }
  ;

/* bound = number | [ "+" | "-" ] "inf" */
bound:
    number          { $$ = $1; }
  | INF             { $$ = INFINITY; }
  | PLUS INF        { $$ = INFINITY; }
  | MINUS INF       { $$ = -INFINITY; }
  ;

/* names = NAME { "," NAME } */
names:
    NAME            {
                        $$ = jf_arena_alloc(&ctx->arena, sizeof *$$);
                        if (!$$) ctx->nomem = 1;
                        NEED($$);
                        $$->name = @1;
                    }
  | names COMMA NAME
                    {
                        $$ = jf_arena_alloc(&ctx->arena, sizeof *$$);
                        if (!$$) ctx->nomem = 1;
                        NEED($$);
                        $$->name = @3;
                        $$->next = $1;
                    }
  ;

/* expr = NUMBER | NAME | NAME "(" [ expr { "," expr } ] ")" | "(" expr ")"
 *      | ( "-" | "+" ) expr | expr "^" expr | expr ( "*" | "/" ) expr
 *      | expr ( "+" | "-" ) expr | expr ( "<" | "<=" | ">" | ">=" | "==" | "!=" ) expr
 *      | expr "?" expr ":" expr          (precedence and associativity as declared above) */
expr:
    NUMBER          {
                        $$ = jf_ast_new(ctx, JF_AST_NUM, @$);
                        NEED($$);
                        $$->num = $1;
                    }
  | NAME            { NEED($$ = jf_ast_new(ctx, JF_AST_NAME, @$)); }
  | NAME lparen RPAREN
                    {
                        ctx->open--;
                        NEED($$ = jf_ast_new(ctx, JF_AST_CALL, @$));
                    }
  | NAME lparen args RPAREN
                    {
                        ctx->open--;
                        NEED($$ = jf_ast_new(ctx, JF_AST_CALL, @$));
                        $$->a = $3.head;
                    }
  | lparen expr RPAREN
                    {
                        ctx->open--;
                        $$ = $2;
                    }
  | minus expr %prec UNARY
                    {
                        ctx->open--;
                        NEED($$ = jf_ast_new(ctx, JF_AST_UNARY, @$));
                        $$->op = JF_OP_NEG;
                        $$->a = $2;
                    }
  | plus expr %prec UNARY
                    {
                        /* +e is e; no node, so +x and x build the same DAG */
                        ctx->open--;
                        $$ = $2;
                    }
  | expr caret expr %prec CARET
                    {
                        ctx->open--;
                        NEED($$ = make_binary(ctx, JF_OP_POW, $1, $3, @$));
                    }
  | expr STAR expr  { NEED($$ = make_binary(ctx, JF_OP_MUL, $1, $3, @$)); }
  | expr SLASH expr { NEED($$ = make_binary(ctx, JF_OP_DIV, $1, $3, @$)); }
  | expr PLUS expr  { NEED($$ = make_binary(ctx, JF_OP_ADD, $1, $3, @$)); }
  | expr MINUS expr { NEED($$ = make_binary(ctx, JF_OP_SUB, $1, $3, @$)); }
  | expr LT expr    { NEED($$ = make_binary(ctx, JF_OP_LT, $1, $3, @$)); }
  | expr LE expr    { NEED($$ = make_binary(ctx, JF_OP_LE, $1, $3, @$)); }
  | expr GT expr    { NEED($$ = make_binary(ctx, JF_OP_GT, $1, $3, @$)); }
  | expr GE expr    { NEED($$ = make_binary(ctx, JF_OP_GE, $1, $3, @$)); }
  | expr EQ expr    { NEED($$ = make_binary(ctx, JF_OP_EQ, $1, $3, @$)); }
  | expr NE expr    { NEED($$ = make_binary(ctx, JF_OP_NE, $1, $3, @$)); }
  | expr question expr COLON expr
                    {
                        ctx->open--;
                        NEED($$ = jf_ast_new(ctx, JF_AST_COND, @$));
                        $$->a = $1;
                        $$->b = $3;
                        $$->c = $5;
                    }
  ;

/* args = expr { "," expr } */
args:
    expr            { $$.head = $$.tail = $1; }
  | args COMMA expr {
                        $$ = $1;
                        $$.tail->next = $3;
                        $$.tail = $3;
                    }
  ;

/* The openers: each counts one open construct as soon as its token is shifted (see the top);
 * the rule that completes the construct closes it again (ctx->open--). */

/* lparen = "(" */
lparen:   LPAREN    { if (!open_nest(ctx, @1)) YYABORT; } ;
/* minus = "-"   (unary) */
minus:    MINUS     { if (!open_nest(ctx, @1)) YYABORT; } ;
/* plus = "+"   (unary) */
plus:     PLUS      { if (!open_nest(ctx, @1)) YYABORT; } ;
/* caret = "^" */
caret:    CARET     { if (!open_nest(ctx, @1)) YYABORT; } ;
/* question = "?" */
question: QUESTION  { if (!open_nest(ctx, @1)) YYABORT; } ;

%%

static int open_nest(jf_parse *p, jf_span at) {
    if (++p->open <= p->max_nest) return 1;
    jf_parse_error(p, JF_ERR_LIMIT, at, "expression nests deeper than %zu levels", p->max_nest);
    return 0;
}

static jf_ast *make_binary(jf_parse *p, jf_op op, jf_ast *a, jf_ast *b, jf_span at) {
    jf_ast *n = jf_ast_new(p, JF_AST_BINARY, at);
    if (!n) return NULL;
    n->op = (unsigned char)op;
    n->a = a;
    n->b = b;
    return n;
}

/* ---- syntax error messages ---------------------------------------------------------------- */

/* A growable message; on allocation failure the message is cut, never lost. */
typedef struct msgbuf {
    char s[512]; /* the text (long token texts are shortened, so this suffices) */
    size_t n;    /* bytes used */
} msgbuf;

static void put(msgbuf *m, const char *s) {
    size_t l = strlen(s);
    if (l > sizeof m->s - 1 - m->n) l = sizeof m->s - 1 - m->n;
    memcpy(m->s + m->n, s, l);
    m->n += l;
    m->s[m->n] = '\0';
}

/* Appends src[sp] quoted, shortened to 32 bytes; it is a NAME or NUMBER token, so printable. */
static void put_token_text(msgbuf *m, const jf_parse *p, jf_span sp) {
    char t[48];
    size_t l = sp.end - sp.begin;
    int cut = l > 32;
    snprintf(t, sizeof t, "'%.*s%s'", (int)(cut ? 32 : l), p->src + sp.begin, cut ? "..." : "");
    put(m, t);
}

/* How a token is named in "unexpected X" and "expected X". */
static const char *token_words(yysymbol_kind_t k) {
    switch (k) {
    case YYSYMBOL_YYEOF: return "end of input";
    case YYSYMBOL_NUMBER: return "number";
    case YYSYMBOL_NAME: return "name";
    case YYSYMBOL_NEWLINE: return "end of line";
    case YYSYMBOL_PARAM: return "'param'";
    case YYSYMBOL_VAR: return "'var'";
    case YYSYMBOL_LET: return "'let'";
    case YYSYMBOL_IN: return "'in'";
    case YYSYMBOL_INF: return "'inf'";
    case YYSYMBOL_PLUS: return "'+'";
    case YYSYMBOL_MINUS: return "'-'";
    case YYSYMBOL_STAR: return "'*'";
    case YYSYMBOL_SLASH: return "'/'";
    case YYSYMBOL_CARET: return "'^'";
    case YYSYMBOL_LPAREN: return "'('";
    case YYSYMBOL_RPAREN: return "')'";
    case YYSYMBOL_LBRACKET: return "'['";
    case YYSYMBOL_RBRACKET: return "']'";
    case YYSYMBOL_COMMA: return "','";
    case YYSYMBOL_SEMI: return "';'";
    case YYSYMBOL_ASSIGN: return "'='";
    case YYSYMBOL_TILDE: return "'~'";
    case YYSYMBOL_QUESTION: return "'?'";
    case YYSYMBOL_COLON: return "':'";
    case YYSYMBOL_LT: return "'<'";
    case YYSYMBOL_LE: return "'<='";
    case YYSYMBOL_GT: return "'>'";
    case YYSYMBOL_GE: return "'>='";
    case YYSYMBOL_EQ: return "'=='";
    case YYSYMBOL_NE: return "'!='";
    default: return "invalid text";
    }
}

static int is_comparison(yysymbol_kind_t k) {
    return k == YYSYMBOL_LT || k == YYSYMBOL_LE || k == YYSYMBOL_GT || k == YYSYMBOL_GE ||
           k == YYSYMBOL_EQ || k == YYSYMBOL_NE;
}

static int is_operator(yysymbol_kind_t k) {
    return k == YYSYMBOL_PLUS || k == YYSYMBOL_MINUS || k == YYSYMBOL_STAR ||
           k == YYSYMBOL_SLASH || k == YYSYMBOL_CARET || k == YYSYMBOL_QUESTION ||
           is_comparison(k);
}

/* An invalid byte run as a message: printable ASCII quoted, anything else as \xNN. */
static void report_invalid(jf_parse *p, jf_span sp) {
    unsigned char c = (unsigned char)p->src[sp.begin];
    if (c >= 0x80) {
        jf_parse_error(p, JF_ERR_PARSE, sp,
                       "non-ASCII character (names are ASCII letters, digits and '_')");
    } else if (c >= 0x20 && c < 0x7f) {
        jf_parse_error(p, JF_ERR_PARSE, sp, "invalid character '%c'", (char)c);
    } else {
        jf_parse_error(p, JF_ERR_PARSE, sp, "invalid character '\\x%02x'", (unsigned)c);
    }
}

/* 1 when the text before offset at, blanks skipped, ends with the whole word w: the error
 * follows `if` used as a keyword (`if x > 0 then ...`), which the language spells as a call. */
static int follows_word(const char *src, size_t at, const char *w) {
    size_t n = strlen(w), e = at;
    while (e > 0 && (src[e - 1] == ' ' || src[e - 1] == '\t')) e--;
    if (e < n || memcmp(src + e - n, w, n) != 0) return 0;
    if (e == n) return 1;
    char c = src[e - n - 1];
    return !(c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
}

/* Where "unexpected end of input" points: right after the text's last token, past trailing
 * blank lines and comments (an unclosed '(' on the last line gets its caret there, not on an
 * empty line below). Comments are found by their '#': the language has no string literals, so
 * a line's first '#' starts one. */
static size_t end_of_tokens(const char *src, size_t len) {
    size_t e = len;
    for (;;) {
        while (e > 0 && (src[e - 1] == ' ' || src[e - 1] == '\t' || src[e - 1] == '\r' ||
                         src[e - 1] == '\n' || src[e - 1] == '\f' || src[e - 1] == '\v'))
            e--;
        size_t line = e;
        while (line > 0 && src[line - 1] != '\n') line--;
        const char *hash = memchr(src + line, '#', e - line);
        if (!hash) return e;
        e = (size_t)(hash - src);
    }
}

/* Builds "syntax error: unexpected X, expected A, B or C". The expected set comes from LAC, so
 * it is exact; it is summarised into groups a reader recognises ("an expression" rather than
 * number, name, '(', '-', '+'). */
static int yyreport_syntax_error(const yypcontext_t *yyctx, yyscan_t scanner, jf_parse *ctx) {
    (void)scanner;
    yysymbol_kind_t tok = yypcontext_token(yyctx);
    jf_span at = *yypcontext_location(yyctx);
    if (tok == YYSYMBOL_YYEOF) at.begin = at.end = (uint32_t)end_of_tokens(ctx->src, at.begin);
    if (tok == YYSYMBOL_INVALID) {
        report_invalid(ctx, at);
        return 0;
    }
    enum { MAXEXP = YYNTOKENS };
    yysymbol_kind_t exp[MAXEXP];
    int nexp = yypcontext_expected_tokens(yyctx, exp, MAXEXP);
    if (nexp < 0) nexp = 0;
    unsigned char has[YYNTOKENS] = {0};
    for (int i = 0; i < nexp; i++)
        if (exp[i] >= 0 && exp[i] < YYNTOKENS) has[exp[i]] = 1;

    if (is_comparison(tok) && !has[YYSYMBOL_LT] && has[YYSYMBOL_PLUS]) {
        jf_parse_error(ctx, JF_ERR_PARSE, at,
                       "syntax error: comparisons cannot be chained; add parentheses");
        return 0;
    }

    msgbuf m = {.n = 0};
    m.s[0] = '\0';
    put(&m, "syntax error: unexpected ");
    put(&m, token_words(tok));
    if (tok == YYSYMBOL_NAME || tok == YYSYMBOL_NUMBER) {
        put(&m, " ");
        put_token_text(&m, ctx, at);
    }

    /* Groups, each swallowing the tokens it stands for. */
    const char *words[YYNTOKENS];
    int nwords = 0;
    if (has[YYSYMBOL_PARAM]) {
        words[nwords++] = "a statement";
        has[YYSYMBOL_PARAM] = has[YYSYMBOL_VAR] = has[YYSYMBOL_LET] = 0;
        has[YYSYMBOL_NUMBER] = has[YYSYMBOL_NAME] = has[YYSYMBOL_LPAREN] = 0;
        has[YYSYMBOL_MINUS] = has[YYSYMBOL_PLUS] = 0;
    }
    if (has[YYSYMBOL_NUMBER] && has[YYSYMBOL_NAME] && has[YYSYMBOL_LPAREN]) {
        words[nwords++] = "an expression";
        has[YYSYMBOL_NUMBER] = has[YYSYMBOL_NAME] = has[YYSYMBOL_LPAREN] = 0;
        has[YYSYMBOL_MINUS] = has[YYSYMBOL_PLUS] = 0;
    }
    if (has[YYSYMBOL_NUMBER] && !has[YYSYMBOL_STAR]) {
        words[nwords++] = "a number";
        has[YYSYMBOL_NUMBER] = has[YYSYMBOL_MINUS] = has[YYSYMBOL_PLUS] = 0;
    }
    if (has[YYSYMBOL_INF]) {
        words[nwords++] = "'inf'";
        has[YYSYMBOL_INF] = 0;
    }
    if (has[YYSYMBOL_NAME]) {
        words[nwords++] = "a name";
        has[YYSYMBOL_NAME] = 0;
    }
    int any_op = 0;
    if (has[YYSYMBOL_STAR]) {
        for (int k = 0; k < YYNTOKENS; k++)
            if (is_operator((yysymbol_kind_t)k)) has[k] = 0;
        /* after a name '(' would make a call; true, but only noise next to "an operator" */
        has[YYSYMBOL_LPAREN] = 0;
        any_op = 1;
    }
    int end_line = has[YYSYMBOL_NEWLINE], end_input = has[YYSYMBOL_YYEOF] && !end_line;
    has[YYSYMBOL_NEWLINE] = has[YYSYMBOL_YYEOF] = 0;
    if (end_line) has[YYSYMBOL_SEMI] = 0;
    for (int k = 0; k < YYNTOKENS; k++)
        if (has[k] && k != YYSYMBOL_YYerror && k != YYSYMBOL_YYUNDEF && k != YYSYMBOL_INVALID)
            words[nwords++] = token_words((yysymbol_kind_t)k);
    if (any_op) words[nwords++] = "an operator";
    if (end_line) words[nwords++] = "end of line";
    if (end_input) words[nwords++] = "end of input";

    for (int i = 0; i < nwords; i++) {
        put(&m, i == 0 ? ", expected " : i == nwords - 1 ? " or " : ", ");
        put(&m, words[i]);
    }
    /* Two mistakes common enough to deserve a hint. */
    if (tok == YYSYMBOL_ASSIGN && has[YYSYMBOL_TILDE])
        put(&m, " (write 'y ~ expr' to name the response)");
    if (tok == YYSYMBOL_STAR && at.begin > 0 && ctx->src[at.begin - 1] == '*')
        put(&m, " (the power operator is '^')");
    if (follows_word(ctx->src, at.begin, "if"))
        put(&m, " (a conditional is written if(c, a, b) or c ? a : b)");
    jf_parse_error(ctx, JF_ERR_PARSE, at, "%s", m.s);
    return 0;
}

/* With parse.error custom, bison calls yyerror only when its stack cannot grow: out of memory,
 * or YYMAXDEPTH (unreachable while the openers bound nesting; see the top of the file). */
static void jf_yyerror(JF_YYLTYPE *loc, yyscan_t scanner, jf_parse *ctx, const char *msg) {
    (void)scanner;
    (void)msg;
    ctx->nomem = 1;
    jf_parse_error(ctx, JF_ERR_NOMEM, *loc, "out of memory while parsing");
}

/* Flex's prototypes, repeated here because lexer.h cannot be included before bison's types. */
typedef struct yy_buffer_state *YY_BUFFER_STATE;
int jf_yylex_init_extra(jf_parse *extra, yyscan_t *scanner);
YY_BUFFER_STATE jf_yy_scan_bytes(const char *bytes, int len, yyscan_t scanner);
void jf_yy_delete_buffer(YY_BUFFER_STATE b, yyscan_t scanner);
int jf_yylex_destroy(yyscan_t scanner);

/* Kept apart from jf_parse_run so that nothing it modifies after setjmp lives in a register
 * when flex's fatal-error hook longjmps back (all state is in *p). */
static int run_with_scanner(jf_parse *p, yyscan_t scanner) {
    /* p->offset may skip a byte-order mark; spans still count from the start of src */
    YY_BUFFER_STATE buf = jf_yy_scan_bytes(p->src + p->offset, (int)(p->len - p->offset), scanner);
    int rc = jf_yyparse(scanner, p);
    jf_yy_delete_buffer(buf, scanner);
    return rc;
}

int jf_parse_run(jf_parse *p) {
    yyscan_t scanner;
    if (jf_yylex_init_extra(p, &scanner) != 0) {
        p->nomem = 1;
        return JF_ERR_NOMEM;
    }
    if (setjmp(p->fatal) == 0) {
        run_with_scanner(p, scanner);
        jf_yylex_destroy(scanner);
    } else {
        /* flex's state is half-built: free its blocks directly (the scanner is one of them) */
        for (size_t i = 0; i < p->nflex; i++) free(p->flex_mem[i]);
        p->nflex = 0;
        p->nomem = 1;
    }
    if (p->nomem) return JF_ERR_NOMEM;
    if (p->limit) return JF_ERR_LIMIT;
    return JF_OK;
}
