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
 * - Threads: any function may be called from several threads at once. A model does not change
 *   after jf_model_compile, so one model may be fitted, evaluated and printed from several
 *   threads at once; it must outlive those calls. Callbacks run on the calling thread (progress)
 *   or as jf_fit_options.batch_progress says.
 * - Process-wide effects an embedding program should know: compiled kernels stay loaded after
 *   a fit for the next one (one set per distinct model and options; jf_model_free does not
 *   unload them), but only the 64 most recently used sets that no call is using
 *   ($JITFIT_CACHE_MODULES changes that number); the C backend runs the system compiler as a
 *   child process; a CPU fit sets OpenBLAS
 *   to one thread for the whole process (docs/SOLVER.md); the JITFIT_* environment variables
 *   are read during calls, so they must not be changed while another thread is inside the
 *   library.
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

/* The library version as "MAJOR.MINOR.PATCH"; its one source: the build reads it from this
 * line (cmake/jitfit_version.cmake). */
#define JITFIT_VERSION "0.1.0"

/* The version of the library in use: JITFIT_VERSION as it was when the library was built.
 * The structs the caller allocates grow between versions and the SONAME does not tell them
 * apart (docs/API.md, "Conventions"), so a program linked to the shared library can compare
 * this with the JITFIT_VERSION it was compiled with before anything else. Never NULL. */
JF_API const char *jf_version(void);

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
                                  declarations; NULL means {"x"}. Each must be a name `var`
                                  could declare (not a keyword, builtin or pi), given once;
                                  a name the text declares as something else is skipped.
                                  Otherwise the compile fails with JF_ERR_ARG */
    size_t nvars;              /* number of entries in vars (0 when vars is NULL) */
    size_t max_depth;          /* nesting limit of expressions (default 256; 0: the default) */
    size_t max_source_bytes;   /* size limit of the model text (default 1 MiB; 0: the default) */
    size_t max_nodes;          /* limit of DAG nodes incl. derivatives (default 1<<20; 0: the
                                  default) */
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

/* Evaluates value and gradient like jf_model_eval, but with the kernels of the given backend
 * (JF_BACKEND_INTERP, JF_BACKEND_C or JF_BACKEND_CUDA), compiling them (or loading them from the
 * kernel cache) as needed. If the C compiler is missing or fails, the interpreter stands in
 * and *note receives a one-line warning. JF_ERR_UNAVAILABLE (with the reason in *note) when
 * the CUDA backend cannot run here. *note, if set, is freed by the caller with jf_free. */
JF_API int jf_model_eval_backend(const jf_model *m, int backend, const double *params,
                                 const double *vars, double *value, double *grad, char **note);

/* The simplified model expression as DSL text. Caller frees with jf_free; NULL when out of
 * memory or when the text would be longer than 16 MiB (shared subexpressions are written out
 * at every use, so a small model can have a huge text). */
JF_API char *jf_model_expression_text(const jf_model *m);
/* The simplified derivative ∂f/∂θk as DSL text. Caller frees with jf_free; NULL when k is out
 * of range, out of memory or the text would be longer than 16 MiB. */
JF_API char *jf_model_derivative_text(const jf_model *m, size_t k);

/* ------------------------------------------------------------------------------------------
 * Fitting: nonlinear least squares with a trust-region Levenberg-Marquardt solver.
 */

/* Which engine evaluates the model's kernels. */
typedef enum jf_backend {
    JF_BACKEND_INTERP = 0, /* the reference evaluator (interpreter); also the fallback */
    JF_BACKEND_C = 1,      /* generated C compiled by the system compiler, loaded with dlopen */
    JF_BACKEND_CUDA = 2    /* generated CUDA C compiled by NVRTC, run on an NVIDIA GPU */
} jf_backend;

/* "interp", "c" or "cuda" ("?" for other values). */
JF_API const char *jf_backend_name(int backend);

/* Where compiled kernels came from. */
typedef enum jf_cache_result {
    JF_CACHE_MISS = 0,   /* compiled now (and stored, unless the disk cache is off or refused) */
    JF_CACHE_MEMORY = 1, /* found in this process's in-memory cache */
    JF_CACHE_DISK = 2,   /* loaded from a verified disk cache entry */
    JF_CACHE_NONE = 3    /* nothing to cache (the interpreter ran) */
} jf_cache_result;

/* Robust loss functions with scipy.optimize.least_squares's meaning: the cost is
 * 0.5 * Σ f_scale² rho((r_i/f_scale)²). */
typedef enum jf_loss {
    JF_LOSS_LINEAR = 0,  /* rho(z) = z: ordinary least squares */
    JF_LOSS_SOFT_L1 = 1, /* rho(z) = 2((1+z)^0.5 - 1) */
    JF_LOSS_HUBER = 2,   /* rho(z) = z if z <= 1 else 2 z^0.5 - 1 */
    JF_LOSS_CAUCHY = 3,  /* rho(z) = ln(1+z) */
    JF_LOSS_ARCTAN = 4   /* rho(z) = arctan(z) */
} jf_loss;

/* The loss called name ("linear", "soft_l1", "huber", "cauchy", "arctan"), or -1. */
JF_API int jf_loss_from_name(const char *name);

/* Reads a memory size as jitfit's --max-gpu-mem and $JITFIT_MAX_GPU_MEM take it: a decimal
 * number (locale-independent) and an optional unit, case-insensitive: B; K, M, G, T or KiB, MiB,
 * GiB, TiB (powers of 1024); kB, MB, GB, TB (powers of 1000). Fractions of a byte are dropped.
 * 0 with the bytes in *bytes, or -1 (text or bytes NULL, blanks, other text, negative, not
 * finite, 2^63 or more) leaving *bytes unchanged. */
JF_API int jf_memory_size_from_text(const char *text, size_t *bytes);

/* Where to run a fit. */
typedef enum jf_device {
    JF_DEVICE_AUTO = 0, /* choose by estimated time (small fits and batches: the CPU, without
                           probing for a GPU); the result's device_note says what was chosen
                           and why */
    JF_DEVICE_CPU = 1,  /* the CPU solver */
    JF_DEVICE_GPU = 2   /* the device-resident GPU solver (single fits); JF_ERR_UNAVAILABLE
                           when there is no usable GPU (errmsg "GPU requested but unavailable:
                           <reason>"). Data that do not fit in GPU memory are streamed
                           through it in chunks (a batch runs in chunks of fits); only what
                           does not fit even so is fitted on the CPU, which device_note says */
} jf_device;

/* The data of one fit. x holds the independent variables column by column in the model's
 * variable order: variable j of point i is x[j*ldx + i]. The arrays are read, never kept. */
typedef struct jf_data {
    size_t n;            /* number of points (must exceed the number of fitted parameters) */
    const double *x;     /* num_vars columns; may be NULL for a model without variables */
    size_t ldx;          /* leading dimension of x; 0 means n */
    const double *y;     /* n observed responses */
    const double *sigma; /* NULL, or n standard deviations: residuals are divided by them */
} jf_data;

/* Why the solver stopped. Members 1..4 are convergence (success); the others are not. */
typedef enum jf_fit_status {
    JF_FIT_RUNNING = 0,     /* not finished (only seen in progress callbacks) */
    JF_FIT_FTOL = 1,        /* both the actual and the predicted relative reduction of the cost
                               in the last step were at most ftol */
    JF_FIT_XTOL = 2,        /* the step was at most xtol * ||x|| in scaled norm (MINPACK) */
    JF_FIT_FTOL_XTOL = 3,   /* both FTOL and XTOL held at the same step */
    JF_FIT_GTOL = 4,        /* the scaled gradient's infinity norm (|g_k| / (|J_k| |r|), the
                               cosine of residual and column k, as MINPACK) was at most gtol
                               (for a parameter at a bound, only inward components count) */
    JF_FIT_MAX_NFEV = 5,    /* max_nfev evaluations of the model were spent without converging */
    JF_FIT_STALLED = 6,     /* the trust region shrank below machine precision relative to the
                               parameters: no further reduction of the cost is possible */
    JF_FIT_NONFINITE = 7,   /* the residuals or Jacobian at the starting point are not finite,
                               or their sums of squares overflow (the message says which) */
    JF_FIT_UNUSED_PARAM = 8 /* the others converged, but some parameter has no influence on the
                               model on these data (its Jacobian column is zero at the start and
                               at the solution): its standard error is infinite; see the message
                               for which. A column zero only at the solution keeps status 1..4 */
} jf_fit_status;

/* A short description of a fit status; never NULL. */
JF_API const char *jf_fit_status_string(int status);

/* Information passed to the progress callback once per iteration. */
typedef struct jf_iteration_info {
    size_t iteration;  /* iteration number, from 0 (the starting point) */
    size_t nfev;       /* model evaluations so far */
    double cost;       /* current cost 0.5 Σ f_scale² rho(z) */
    double step_norm;  /* scaled norm of the last step (0 at iteration 0) */
    double damping;    /* current Levenberg-Marquardt damping parameter */
    double gain_ratio; /* actual / predicted reduction of the last trial step (NaN at 0) */
    double optimality; /* the gradient test's measure: max over free k of |g_k|/(‖J_k‖·‖r‖)
                          (MINPACK's cosine); for a robust loss of the loss-scaled J with
                          √(2·cost) for ‖r‖, which can exceed 1 far beyond f_scale */
    int accepted;      /* 1 when the last trial step was accepted */
} jf_iteration_info;

/* Options of jf_fit. Obtain defaults with jf_fit_options_default(); fields are added only at
 * the end, with defaults that keep earlier behaviour. Arrays have num_params entries. */
typedef struct jf_fit_options {
    const double *p0;      /* starting values; NULL: the model's declared initial values (a
                              parameter with none starts as in scipy's curve_fit: at the
                              midpoint of two finite bounds, at lower + 1 or upper - 1 with
                              one, else at 1) */
    const double *lower;   /* lower bounds; NULL: the model's declared bounds (-inf if none) */
    const double *upper;   /* upper bounds; NULL: declared bounds (+inf if none) */
    int absolute_sigma;    /* 1: sigma is absolute (covariance not rescaled by reduced χ²) */
    jf_loss loss;          /* robust loss (default linear) */
    double f_scale;        /* soft margin between inlier and outlier residuals (default 1);
                              positive and finite, and for a robust loss with a normal double
                              for its square (about 1.5e-154 to 1.3e154), else JF_ERR_ARG */
    double ftol;           /* relative cost-reduction tolerance (default 1e-8, as scipy) */
    double xtol;           /* relative step tolerance (default 1e-8) */
    double gtol;           /* gradient tolerance (default 1e-8); at least one of the three
                              must be >= machine epsilon (as scipy), else JF_ERR_ARG */
    size_t max_nfev;       /* evaluation budget; 0: 100 * num_params (scipy's default) */
    const double *x_scale; /* characteristic scale of each parameter; NULL: scale from the
                              Jacobian's column norms (MINPACK's mode 1, scipy x_scale='jac') */
    jf_device device;      /* where to run (default auto) */
    int nthreads;          /* worker threads over the data; 0: all cores the calling thread
                              may run on (its CPU affinity: taskset, a cpuset, a batch
                              scheduler's allocation) (< 0 or > 4096:
                              JF_ERR_ARG). A fit uses at most one per 4096 points (a pass's
                              chunks), a batch at most one per fit */
    int backend;           /* JF_BACKEND_C (default) or JF_BACKEND_INTERP for the CPU kernels;
                              JF_BACKEND_CUDA means the GPU (device gpu; with device cpu an
                              argument error) */
    int no_cache;          /* 1: do not use the on-disk kernel cache */
    void (*progress)(void *ctx, const jf_iteration_info *info); /* per-iteration callback (CPU
                              fits; a GPU fit iterates on the device and never calls it) */
    void *progress_ctx;    /* passed to progress */
    void (*batch_progress)(void *ctx, size_t done, size_t total); /* jf_fit_batch and
                              jf_fit_batch_columns only: called as fits finish (a GPU batch:
                              as each chunk's fits are done), from one thread
                              at a time (not necessarily the caller's; the fits go on meanwhile,
                              and a report due during a call is skipped), at most about every
                              100 ms, and always once at the end with done == total from the
                              calling thread (also when no fit could run, and with 0, 0 for
                              no fits); NULL: not called */
    void *batch_progress_ctx; /* passed to batch_progress */
    int single_precision;  /* GPU fits: 1 evaluates the model (f and its gradient) in fp32, for
                              GPUs with slow fp64; residuals, Jacobian rows, losses and all sums
                              stay fp64. The CPU always evaluates in fp64 (a warning says so).
                              Default 0 */
    int vector_math;       /* 1: let the C backend use SLEEF's vectorized transcendentals (≤ 1
                              ulp each, not bit-identical to the interpreter; needs AVX2 or
                              AVX-512 and libsleef, else the exact kernels run and the result's
                              warning says why); 0 (default): exact */
    size_t max_gpu_mem;    /* GPU fits: use at most this many bytes of device memory (besides
                              the kernels); 0 (default): 90 % of the free memory. A single fit
                              whose data need more is streamed through the GPU in chunks; a
                              GPU batch that needs more runs in chunks of fits (on the CPU when
                              one fit's chunk is too much). $JITFIT_MAX_GPU_MEM
                              (bytes, or K, M, G, T / kB, MB, GB, TB as
                              jitfit's --max-gpu-mem), when smaller, also
                              applies */
    const int *fixed;      /* NULL, or num_params flags: non-zero holds that parameter at its
                              starting value (p0, else the model's; it must lie inside its
                              bounds) instead of fitting it, as lmfit's vary=False. The fit
                              is of the model with those parameters as constants (kernels
                              compiled once per set of held parameters, whatever their
                              values), so dof, the default max_nfev and the statistics count
                              only the fitted parameters; a value the simplifier would use
                              (0 in c*log(x), a small integer exponent) is written in, and
                              the fit is then that of the text with the number.
                              In a batch with per-fit starting values each fit holds the
                              parameter at its own; a fit whose held value is outside its
                              bounds or not finite fails alone. At least one parameter must
                              be left to fit */
} jf_fit_options;

/* The default options. */
JF_API jf_fit_options jf_fit_options_default(void);

/* The result of one fit. Allocated by the library; all arrays belong to it. Fields are added
 * only at the end. Matrices are num_params × num_params, row-major. */
typedef struct jf_fit_result {
    int status;            /* a jf_fit_status */
    int success;           /* 1 when status is one of the converged members */
    const char *message;   /* a one-line explanation of status; it also names the parameters
                              the data do not determine (rank-deficient J), if any */
    size_t num_params;     /* number of parameters */
    size_t n;              /* number of data points */
    size_t dof;            /* n - the fitted parameters (num_params less those held fixed) */
    double *params;        /* fitted values */
    double *std_errors;    /* standard errors: sqrt(diag(covariance)); inf for a parameter
                              the model does not depend on */
    double *covariance;    /* s² (JᵀJ)⁻¹, s² = 2·cost/dof (SSR/dof for the linear loss; a
                              robust loss: its cost and the loss-scaled J, as scipy's
                              curve_fit) unless absolute_sigma (then 1) */
    double *correlation;   /* covariance normalised to unit diagonal */
    int *at_bound;         /* -1 at its lower bound, +1 at its upper bound, 0 inside */
    double cost;           /* 0.5 Σ f_scale² rho(z) at the solution (0.5 SSR when linear) */
    double ssr;            /* Σ r_i², r_i = (f - y)/sigma_i (sigma_i = 1 without sigma) */
    double chi2;           /* χ² = SSR with sigma given; NaN without sigma */
    double reduced_chi2;   /* χ²/dof with sigma given; NaN without sigma */
    double r_squared;      /* 1 - Σ(f-y)² / Σ(y-ȳ)² (unweighted); NaN for a constant y */
    double optimality;     /* max over free k of |g_k|/(‖J_k‖·‖r‖) at the solution (MINPACK's
                              cosine, at most 1): g the cost's gradient, J and r weighted by
                              1/sigma but not scaled by a robust loss */
    size_t nfev;           /* model evaluations (passes over the data) at the start, the trial
                              points and the polish steps (not the final statistics) */
    size_t iterations;     /* accepted and rejected trial steps */
    size_t host_syncs;     /* times the host waited for the GPU while iterating: 1 when the
                              device-resident loop ran as one CUDA graph with a WHILE node, one
                              per block of iterations otherwise; 0 on the CPU */
    int backend;           /* the jf_backend that evaluated the model */
    int cache;             /* the jf_cache_result of obtaining the kernels */
    double time_compile_ms; /* obtaining the kernels (compile or cache load) */
    double time_solve_ms;  /* the iterations and the covariance */
    double time_total_ms;  /* everything inside jf_fit */
    const char *warning;   /* a one-line warning (e.g. compiler fallback), or NULL */
    const char *device_note; /* where the fit ran and why, one line: "cpu: requested",
                              "cpu: no usable GPU (unavailable: <reason>)", "gpu: requested
                              (...); device loop: ..."; owned by the result */
    int *fixed;            /* 1 for a parameter held at its starting value (jf_fit_options.
                              fixed), else 0. A fixed parameter's standard error, covariance
                              row and column and correlations are 0 (its own correlation 1),
                              its at_bound 0 */
} jf_fit_result;

/* Fits model m to data. On JF_OK *out receives a result (even when the solver did not
 * converge: see status); the caller frees it with jf_fit_result_free. opts NULL means
 * jf_fit_options_default(). Errors: JF_ERR_ARG (NULL model, data or out, n not above the
 * number of fitted parameters, a starting value outside its bounds, lower >= upper, an
 * invalid option),
 * JF_ERR_DATA (non-finite x, y or sigma, sigma <= 0, or a sigma so small that 1/sigma
 * overflows: subnormal), JF_ERR_UNAVAILABLE (device GPU without one), JF_ERR_COMPILE (device
 * GPU whose kernels fail to compile or load; a CPU fit falls back to the interpreter instead),
 * JF_ERR_LIMIT (parameters held at values written into the model, which then exceeds its node
 * limit), JF_ERR_NOMEM. On error *out is NULL; if errmsg is not NULL it receives a
 * one-line explanation the caller frees with jf_free. */
JF_API int jf_fit(const jf_model *m, const jf_data *data, const jf_fit_options *opts,
                  jf_fit_result **out, char **errmsg);

/* Fits m independently to nfits data sets, in parallel over fits. p0 is NULL (use opts->p0 or
 * the model's values for all) or nfits × num_params starting values, row by row. results
 * receives nfits pointers (each freed with jf_fit_result_free; a fit that could not run gets
 * NULL and its reason in errmsgs[i] if errmsgs is not NULL). Returns JF_OK when every fit ran,
 * else the first error's status. opts->progress is not called (the fits run concurrently);
 * opts->batch_progress, if set, reports how many fits have finished. */
JF_API int jf_fit_batch(const jf_model *m, size_t nfits, const jf_data *data, const double *p0,
                        const jf_fit_options *opts, jf_fit_result **results, char **errmsgs);

/* Where jf_fit_batch_columns writes a batch's results: arrays the caller owns, one row per fit
 * (fit f's parameters at params[f * num_params ...]). Any member may be NULL (not wanted). A
 * fit that could not run has its jf_status in code[f] and NaN (counts 0) elsewhere (with a NULL
 * model, whose rows of params and std_errors have no known width, those two are not written).
 * Members are added only at the end. */
typedef struct jf_batch_columns {
    int *code;          /* nfits: JF_OK when the fit ran, else why it could not */
    int *status;        /* nfits: a jf_fit_status (0 for a fit that did not run) */
    double *params;     /* nfits × num_params: fitted values */
    double *std_errors; /* nfits × num_params: standard errors (as jf_fit_result's) */
    double *cost;       /* nfits: cost at the solution */
    double *chi2;       /* nfits: χ² with sigma given, NaN without */
    double *r_squared;  /* nfits: coefficient of determination */
    size_t *nfev;       /* nfits: model evaluations */
    size_t *iterations; /* nfits: trial steps */
} jf_batch_columns;

/* jf_fit_batch with the results written into the caller's arrays (out) instead of one
 * jf_fit_result per fit: the same fits, the same values, no per-fit objects to free — for
 * batches of many small fits (pixels, spectra). Returns JF_OK when every fit ran, else the
 * first failing fit's status (by index; see out->code for each). */
JF_API int jf_fit_batch_columns(const jf_model *m, size_t nfits, const jf_data *data,
                                const double *p0, const jf_fit_options *opts,
                                const jf_batch_columns *out);

/* Frees a result; accepts NULL. */
JF_API void jf_fit_result_free(jf_fit_result *r);

#ifdef __cplusplus
}
#endif

#endif
