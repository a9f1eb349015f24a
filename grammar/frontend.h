/* The front end: model text → the model's expression DAG, parameters and variables.
 *
 * One entry point chains the stages of grammar/: lexer.l (tokens) → parser.y (statements and
 * expression trees, ast.h) → resolve.c (names, checks, DAG). runtime/api.c calls it from
 * jf_model_compile and then differentiates; nothing here prints, exits or keeps state between
 * calls, so models may be compiled from many threads at once.
 */
#ifndef JF_FRONTEND_H
#define JF_FRONTEND_H

#include <stddef.h>

#include "../runtime/diag.h"

struct jf_model;

/* At most this many parameters (declared or implicit) in one model. */
#define JF_FRONTEND_MAX_PARAMS 4096
/* At most this many independent variables. */
#define JF_FRONTEND_MAX_VARS 256
/* opts->max_depth is clamped to this, which keeps bison's stack far below YYMAXDEPTH. */
#define JF_FRONTEND_MAX_NEST 100000

/* Parses and resolves `len` bytes of model text (any bytes; NULs are errors, not ends) with
 * options opts (non-NULL, defaults filled in by the caller), filling m, which comes from
 * jf_model_alloc with an empty DAG: m->f, np, param_names, p_init (NaN when not declared),
 * p_lo/p_hi (-inf/+inf when not declared), nv, var_names and response, as malloc'd strings that
 * jf_model_free releases. m->df is left for the caller. Errors, warnings and notes go to diags
 * with byte spans.
 * Returns JF_OK (warnings only), JF_ERR_PARSE (errors in the text), JF_ERR_LIMIT (a size or
 * depth limit; the message names it) or JF_ERR_NOMEM. On failure m may be partly filled but is
 * consistent for jf_model_free; nothing is leaked on any path. */
JF_INTERNAL int jf_frontend_compile(const char *text, size_t len, const jf_model_options *opts,
                                    struct jf_model *m, jf_diagnostics *diags);

#endif
