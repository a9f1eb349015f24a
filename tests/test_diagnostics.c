/* Golden diagnostics: the complete rendered text (jf_diagnostics_text) of front-end errors,
 * warnings and notes, byte for byte, so that a change in a message, a span or a caret shows up
 * here. The format itself (indentation, carets, tabs) belongs to runtime/diag.c.
 */
#include <stdio.h>
#include <string.h>

#include "include/jitfit.h"
#include "tests/testlib.h"

typedef struct golden {
    const char *text;     /* the model text, compiled as "model.jf" */
    int status;           /* expected status */
    const char *rendered; /* expected jf_diagnostics_text */
} golden;

static const golden cases[] = {
    {"param a = 1\nparam b = 2\ny ~ a*exq(-b*x)\n", JF_ERR_PARSE,
     "model.jf:3:7: error: unknown function 'exq' (did you mean 'exp'?)\n"
     "    y ~ a*exq(-b*x)\n"
     "          ^^^\n"},
    {"param amp = 1\nparam k = 2\ny ~ amq*exp(-k*x)\n", JF_ERR_PARSE,
     "model.jf:3:5: error: unknown name 'amq' (did you mean 'amp'?)\n"
     "    y ~ amq*exp(-k*x)\n"
     "        ^^^\n"},
    {"param a = 1\nparam a = 2\ny ~ a*x\n", JF_ERR_PARSE,
     "model.jf:2:7: error: parameter 'a' is already declared\n"
     "    param a = 2\n"
     "          ^\n"
     "model.jf:1:7: note: previous declaration is here\n"
     "    param a = 1\n"
     "          ^\n"},
    {"y ~ atan2(x) + 1", JF_ERR_PARSE,
     "model.jf:1:5: error: 'atan2' takes 2 arguments, got 1\n"
     "    y ~ atan2(x) + 1\n"
     "        ^^^^^\n"},
    {"y ~ a*(x + b", JF_ERR_PARSE,
     "model.jf:1:13: error: syntax error: unexpected end of input, expected ')' or an operator\n"
     "    y ~ a*(x + b\n"
     "                ^\n"},
    {"y ~ a*(x + b  # an open parenthesis\n\n", JF_ERR_PARSE,
     "model.jf:1:13: error: syntax error: unexpected end of input, expected ')' or an operator\n"
     "    y ~ a*(x + b  # an open parenthesis\n"
     "                ^\n"},
    {"y ~ a*x)\r\nz ~ 2\r\n", JF_ERR_PARSE,
     "model.jf:1:8: error: syntax error: unexpected ')', expected an operator or end of line\n"
     "    y ~ a*x)\n"
     "           ^\n"},
    {"param a = 1\n\ty ~ a*exq(x)\n", JF_ERR_PARSE,
     "model.jf:2:8: error: unknown function 'exq' (did you mean 'exp'?)\n"
     "    \ty ~ a*exq(x)\n"
     "    \t      ^^^\n"},
    {"param a = 0.5 in [1, 2]\ny ~ a*x\n", JF_ERR_PARSE,
     "model.jf:1:11: error: initial value 0.5 of parameter 'a' is outside its bounds [1, 2]\n"
     "    param a = 0.5 in [1, 2]\n"
     "              ^^^\n"},
    {"# nothing but a comment\n", JF_ERR_PARSE, "model.jf: error: no model expression\n"},
    {"param a = 1\nparam c = 3\ny ~ a*x\n", JF_OK,
     "model.jf:2:7: warning: parameter 'c' is declared but not used by the model\n"
     "    param c = 3\n"
     "          ^\n"},
    {"let u = v*x\nlet v = 2\ny ~ u\n", JF_ERR_PARSE,
     "model.jf:1:9: error: let-binding 'v' is used before its definition\n"
     "    let u = v*x\n"
     "            ^\n"
     "model.jf:2:5: note: 'v' is defined here\n"
     "    let v = 2\n"
     "        ^\n"},
    {"y ~ a $ b\n", JF_ERR_PARSE,
     "model.jf:1:7: error: invalid character '$'\n"
     "    y ~ a $ b\n"
     "          ^\n"},
    {"y ~ 2x + 1e999\n", JF_ERR_PARSE,
     "model.jf:1:5: error: invalid number '2x' (write 2*x for a product)\n"
     "    y ~ 2x + 1e999\n"
     "        ^^\n"
     "model.jf:1:10: error: number out of range\n"
     "    y ~ 2x + 1e999\n"
     "             ^^^^^\n"},
    /* A quoted line's control bytes, C1 ones too (U+009B is CSI, in UTF-8 or as a bare byte in
     * an 8-bit terminal), are shown as '?'; other UTF-8 is kept. */
    {"y ~ a $ b # \xc2\x9b" "2J \x9b" "2J \xce\xb8 \x1b[2J\n", JF_ERR_PARSE,
     "model.jf:1:7: error: invalid character '$'\n"
     "    y ~ a $ b # ??2J ?2J \xce\xb8 ?[2J\n"
     "          ^\n"},
    /* an operation on finite constants that folds to NaN or an infinity is named, the
     * innermost only (not the sum it flows into, nor 2 + inf) */
    {"y ~ a*x + log(-1) + sqrt(-1)*(2 + 1/0)\n", JF_OK,
     "model.jf:1:11: warning: this evaluates to NaN for every input\n"
     "    y ~ a*x + log(-1) + sqrt(-1)*(2 + 1/0)\n"
     "              ^^^^^^^\n"
     "model.jf:1:21: warning: this evaluates to NaN for every input\n"
     "    y ~ a*x + log(-1) + sqrt(-1)*(2 + 1/0)\n"
     "                        ^^^^^^^^\n"
     "model.jf:1:35: warning: this evaluates to inf for every input\n"
     "    y ~ a*x + log(-1) + sqrt(-1)*(2 + 1/0)\n"
     "                                      ^^^\n"},
    /* The caret line steps over a UTF-8 character as one column, as a terminal shows it
     * (the location's column counts bytes); a stray byte is one column too. */
    {"y ~ \xc3\xa9\xc3\xa9 + 1e999\n", JF_ERR_PARSE,
     "model.jf:1:5: error: non-ASCII character (names are ASCII letters, digits and '_')\n"
     "    y ~ \xc3\xa9\xc3\xa9 + 1e999\n"
     "        ^^\n"
     "model.jf:1:12: error: number out of range\n"
     "    y ~ \xc3\xa9\xc3\xa9 + 1e999\n"
     "             ^^^^^\n"},
    {"y ~ \xa9*(\xce\xb8 + 1e999)\n", JF_ERR_PARSE,
     "model.jf:1:5: error: non-ASCII character (names are ASCII letters, digits and '_')\n"
     "    y ~ \xa9*(\xce\xb8 + 1e999)\n"
     "        ^\n"
     "model.jf:1:13: error: number out of range\n"
     "    y ~ \xa9*(\xce\xb8 + 1e999)\n"
     "               ^^^^^\n"},
    {"y ~ a*x +\n  b*x\n", JF_ERR_PARSE,
     "model.jf:1:10: error: syntax error: unexpected end of line, expected an expression\n"
     "    y ~ a*x +\n"
     "             ^\n"},
};

static void test_golden(void) {
    jf_model_options o = jf_model_options_default();
    o.source_name = "model.jf";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        jf_model *m = NULL;
        jf_diagnostics *d = NULL;
        int st = jf_model_compile(cases[i].text, (size_t)-1, &o, &m, &d);
        if (!CHECK(st == cases[i].status)) fprintf(stderr, "case %zu: status %d\n", i, st);
        if (!CHECK_STREQ(jf_diagnostics_text(d), cases[i].rendered))
            fprintf(stderr, "case %zu\n", i);
        jf_model_free(m);
        jf_diagnostics_free(d);
    }
}

/* A NUL byte in the source (a model file is read with its length) is a control byte like the
 * others: shown as '?', and the quote, its carets and the diagnostics after it are not cut
 * there (the rendered text is a C string). */
static void test_nul_in_quote(void) {
    static const char src[] = "y ~ a*x + \0\x1b[2J b\ny ~ c $\n";
    jf_model_options o = jf_model_options_default();
    o.source_name = "model.jf";
    jf_model *m = NULL;
    jf_diagnostics *d = NULL;
    int st = jf_model_compile(src, sizeof src - 1, &o, &m, &d);
    CHECK(st == JF_ERR_PARSE);
    const char *t = jf_diagnostics_text(d);
    CHECK(t && strstr(t, "    y ~ a*x + ??[2J b\n              ^\n"));
    CHECK(t && !strchr(t, '\x1b'));
    jf_model_free(m);
    jf_diagnostics_free(d);
}

/* The depth limit points at the opener where nesting went too deep, not at the whole text. */
static void test_limit_caret(void) {
    jf_model_options o = jf_model_options_default();
    o.source_name = "deep.jf";
    o.max_depth = 3;
    jf_model *m = NULL;
    jf_diagnostics *d = NULL;
    int st = jf_model_compile("y ~ exp(-(x^(2)))", (size_t)-1, &o, &m, &d);
    CHECK(st == JF_ERR_LIMIT);
    CHECK_STREQ(jf_diagnostics_text(d),
                "deep.jf:1:12: error: expression nests deeper than 3 levels\n"
                "    y ~ exp(-(x^(2)))\n"
                "               ^\n");
    jf_model_free(m);
    jf_diagnostics_free(d);
}

int main(void) {
    test_golden();
    test_limit_caret();
    test_nul_in_quote();
    return jf_test_finish();
}
