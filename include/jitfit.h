/* jitfit: a model compiler and trust-region curve fitter.
 *
 * A model is written as a formula ("a*exp(-b*x)*sin(c*x+d)+e") or as a model file with
 * declarations. jf_model_compile parses it, resolves names, builds a hash-consed expression DAG
 * and differentiates it symbolically with respect to every parameter. The compiled model can be
 * evaluated (value and gradient) by the reference evaluator, rendered as text, and fitted.
 *
 * Conventions for the whole API:
 * - Functions that can fail return a jf_status (JF_OK == 0); they never print and never exit.
 * - Objects are opaque handles with a create/free pair; every *_free accepts NULL.
 * - Strings returned as `char *` are owned by the caller and released with jf_free();
 *   strings returned as `const char *` belong to the object they came from and live as long
 *   as it does.
 * - All numbers are IEEE double precision unless stated otherwise.
 */
#ifndef JITFIT_H
#define JITFIT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define JF_API
#elif defined(__GNUC__)
#define JF_API __attribute__((visibility("default")))
#else
#define JF_API
#endif

/* The library version as "MAJOR.MINOR.PATCH". */
#define JITFIT_VERSION "0.1.0"

/* Result codes of fallible calls. */
typedef enum jf_status {
    JF_OK = 0,          /* success */
    JF_ERR_NOMEM = 1,   /* an allocation failed; nothing was leaked */
    JF_ERR_ARG = 2,     /* an argument was invalid (NULL handle, index out of range, ...) */
    JF_ERR_PARSE = 3,   /* the model text has errors; see the diagnostics */
    JF_ERR_LIMIT = 4,   /* a size or depth limit was exceeded; the message names the limit */
    JF_ERR_IO = 5,      /* a file could not be read or written */
    JF_ERR_DATA = 6,    /* input data are malformed (non-numeric, ragged, non-finite, ...) */
    JF_ERR_COMPILE = 7, /* a JIT backend failed to compile or load generated code */
    JF_ERR_UNAVAILABLE = 8, /* the requested backend is not available on this machine */
    JF_ERR_INTERNAL = 9 /* an invariant was violated: a bug in jitfit */
} jf_status;

/* A short English description of a status code ("out of memory", ...); never NULL. */
JF_API const char *jf_status_string(int status);

/* Frees a string or array that the API returned as owned by the caller; accepts NULL. */
JF_API void jf_free(void *p);

/* ------------------------------------------------------------------------------------------
 * Diagnostics: errors and warnings about model text, as values.
 */

/* Severity of one diagnostic. */
typedef enum jf_severity {
    JF_SEVERITY_ERROR = 0,   /* the model cannot be compiled */
    JF_SEVERITY_WARNING = 1, /* suspicious but compiled (e.g. a declared parameter is unused) */
    JF_SEVERITY_NOTE = 2     /* extra information attached to the previous diagnostic */
} jf_severity;

/* A list of diagnostics produced by one compilation. */
typedef struct jf_diagnostics jf_diagnostics;

/* Number of diagnostics in d (0 for NULL). */
JF_API size_t jf_diagnostics_count(const jf_diagnostics *d);
/* Severity of diagnostic i (i < count). */
JF_API jf_severity jf_diagnostic_severity(const jf_diagnostics *d, size_t i);
/* Message of diagnostic i without location, e.g. "unknown function 'exq' (did you mean 'exp'?)". */
JF_API const char *jf_diagnostic_message(const jf_diagnostics *d, size_t i);
/* 1-based line and column (in bytes) of diagnostic i; 0 when it has no location. */
JF_API int jf_diagnostic_line(const jf_diagnostics *d, size_t i);
JF_API int jf_diagnostic_column(const jf_diagnostics *d, size_t i);
/* All diagnostics rendered as a compiler prints them:
 *   SOURCE:LINE:COL: error: message
 *       <the source line>
 *       ^^^^ (under the offending span)
 * The string belongs to d. Never NULL for a non-NULL d ("" when empty). */
JF_API const char *jf_diagnostics_text(const jf_diagnostics *d);
/* Number of diagnostics of severity JF_SEVERITY_ERROR. */
JF_API size_t jf_diagnostics_errors(const jf_diagnostics *d);
/* Frees d; accepts NULL. */
JF_API void jf_diagnostics_free(jf_diagnostics *d);

/* ------------------------------------------------------------------------------------------
 * Models: compile once, evaluate and fit many times.
 */

typedef struct jf_model jf_model;

/* Options for jf_model_compile. Obtain defaults with jf_model_options_default() and change
 * fields; new fields are added at the end with defaults that keep old behaviour. */
typedef struct jf_model_options {
    const char *source_name;   /* name used in diagnostics ("<model>" by default) */
    const char *const *vars;   /* independent variable names for a formula without `var`
                                  declarations; NULL means {"x"} */
    size_t nvars;              /* number of entries in vars */
    size_t max_depth;          /* nesting limit of expressions (default 256) */
    size_t max_source_bytes;   /* size limit of the model text (default 1 MiB) */
    size_t max_nodes;          /* limit of DAG nodes incl. derivatives (default 1<<20) */
} jf_model_options;

/* The default options. */
JF_API jf_model_options jf_model_options_default(void);

/* Compiles model text (a bare formula or a model file; len bytes, or NUL-terminated when len is
 * (size_t)-1). On success *out receives a new model (caller frees with jf_model_free).
 * If diags is not NULL, *diags receives the diagnostics (warnings too, also on success; NULL if
 * there are none); the caller frees them with jf_diagnostics_free.
 * Returns JF_OK, JF_ERR_PARSE (errors in the text), JF_ERR_LIMIT, JF_ERR_NOMEM or JF_ERR_ARG.
 * On failure *out is set to NULL. */
JF_API int jf_model_compile(const char *text, size_t len, const jf_model_options *opts,
                            jf_model **out, jf_diagnostics **diags);

/* Reads a model file and compiles it (source_name defaults to the path). JF_ERR_IO if the file
 * cannot be read; otherwise as jf_model_compile. */
JF_API int jf_model_compile_file(const char *path, const jf_model_options *opts, jf_model **out,
                                 jf_diagnostics **diags);

/* Frees the model; accepts NULL. */
JF_API void jf_model_free(jf_model *m);

/* Number of parameters, in model order (declaration order, then order of first use). */
JF_API size_t jf_model_num_params(const jf_model *m);
/* Name of parameter k (k < num_params), owned by m; NULL when out of range. */
JF_API const char *jf_model_param_name(const jf_model *m, size_t k);
/* Index of the parameter called name, or -1. */
JF_API long jf_model_param_index(const jf_model *m, const char *name);
/* Declared initial value of parameter k; NaN when the model text gives none. */
JF_API double jf_model_param_initial(const jf_model *m, size_t k);
/* Declared bounds of parameter k; -inf / +inf when none. JF_ERR_ARG when k is out of range. */
JF_API int jf_model_param_bounds(const jf_model *m, size_t k, double *lo, double *hi);

/* Number of independent variables. */
JF_API size_t jf_model_num_vars(const jf_model *m);
/* Name of variable j, owned by m; NULL when out of range. */
JF_API const char *jf_model_var_name(const jf_model *m, size_t j);
/* Name of the response (left of `~`; "y" for a bare expression), owned by m. */
JF_API const char *jf_model_response_name(const jf_model *m);

/* Evaluates the model with the reference evaluator (interpreter) at parameters params
 * (num_params values) and variables vars (num_vars values). Writes f to *value and, if grad is
 * not NULL, the num_params partial derivatives ∂f/∂θk to grad. Non-finite results are returned
 * as they are (the evaluator follows IEEE arithmetic). JF_ERR_ARG on NULL arguments. */
JF_API int jf_model_eval(const jf_model *m, const double *params, const double *vars,
                         double *value, double *grad);

/* The simplified model expression as DSL text. Caller frees with jf_free; NULL when out of
 * memory. */
JF_API char *jf_model_expression_text(const jf_model *m);
/* The simplified derivative ∂f/∂θk as DSL text. Caller frees with jf_free; NULL when k is out
 * of range or out of memory. */
JF_API char *jf_model_derivative_text(const jf_model *m, size_t k);

#ifdef __cplusplus
}
#endif

#endif
