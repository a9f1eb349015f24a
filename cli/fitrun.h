/* Running one fit description (spec.h) end to end: the body of `jitfit fit` and of each fit of
 * `jitfit run`.
 *
 * Order of work: open the data file (data.c: text, gzip, .npy; header or positional columns) →
 * compile the model, taking independent variables from the data's column names when the default
 * `x` is absent → name positional columns (model variables, then the response, then sigma) →
 * read the used columns into the column-major block jf_data wants (no copy) → drop rows with NaN
 * if asked → starting values and bounds (model file, then p0/bounds lists in order) → jf_fit,
 * or jf_fit_batch per group (batch.c) → report (report.c), --output (output.c), --plot (plot.c).
 */
#ifndef JF_CLI_FITRUN_H
#define JF_CLI_FITRUN_H

#include <stdio.h>

#include "../include/jitfit.h"
#include "data.h"
#include "spec.h"

/* What `jitfit run` shows in its summary table about one fit. */
typedef struct jf_run_summary {
    int ran;          /* 1 when the solver ran and its report was printed (the other fields
                         are valid) */
    int success;      /* 1 when it converged (a batch: every group converged) */
    int status;       /* jf_fit_status of a single fit; -1 for a batch */
    double cost;      /* final cost (a batch: the sum over groups) */
    size_t nfev;      /* model evaluations (a batch: the sum) */
    double time_ms;   /* wall time of the whole fit, reading and reporting included */
    int cache;        /* jf_cache_result of the kernels (a batch: of its first fit) */
    size_t nfits;     /* fits run: 1, or the number of groups */
    size_t nconverged; /* fits that converged */
} jf_run_summary;

/* The prepared state of a fit: what batch.c, output.c and plot.c work from. */
typedef struct jf_fitctx {
    const jf_spec *spec;   /* the description */
    jf_model *model;       /* the compiled model */
    jf_datafile *df;       /* the data file (its text is released after reading) */
    jf_table table;        /* columns: the model's variables, the response, [sigma] */
    const char **names;    /* table.ncols column names, in table order */
    char **keys;           /* group label of each row (table.nrows), or NULL without --group */
    size_t nv;             /* number of model variables */
    const char *response;  /* response column name */
    double *p0;            /* num_params starting values (shared by the groups of a batch) */
    double *lo, *hi;       /* num_params bounds */
    double *x_scale;       /* num_params fixed scales (--x-scale), or NULL: 'jac' */
    int *fixed;            /* num_params flags: 1 held at its start (--fix NAME), 2 held at
                              the value its fix gave (--fix NAME=VALUE, which then also is p0's
                              entry), 0 fitted; or NULL: none held */
    size_t rows_dropped;   /* rows dropped by --nan-policy omit */
    size_t rows_no_label;  /* of those, rows dropped for a missing group label (the others had
                              NaN in a used column) */
    char **dropped_keys;   /* with --group: the group labels of those rows, sorted (strcmp) */
    double time_read_ms;   /* reading the data */
    double time_model_ms;  /* compiling the model */
} jf_fitctx;

/* Runs the fit that s describes and prints its report on out. Setting errors name s's origin
 * (job file and line) or, from the command line, end with the usage line of `jitfit fit`.
 * Fills *sum (may be NULL). Returns the exit status: 0 converged, 1 error or not converged,
 * 2 a usage error. */
int jf_run_spec(const jf_spec *s, FILE *out, jf_run_summary *sum);
/* jf_run_spec for --json onto to (stdout; stderr for `fit --output -`): a fit that fails before
 * printing its report still gets one object there (jf_run_json_error with the message stderr
 * had), so the report's stream stays JSON (`fit --json`, and each element of `run --json`'s
 * array). */
int jf_run_spec_json(const jf_spec *s, FILE *to, jf_run_summary *sum);
/* Prints the object of a fit or job that failed before its report on f:
 * {"name": name (when not NULL), "success": false, "error": msg ("the fit could not run" when
 * NULL or empty)}, one line. */
void jf_run_json_error(FILE *f, const char *name, const char *msg);

/* Prints a setting error: "jitfit: ORIGIN: message" for a job file, or "jitfit: fit: message"
 * plus the usage line when origin is NULL. Returns 2 (1 when out of memory). */
int jf_run_setting_error(const char *origin, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The rows --nan-policy omit dropped from group label's rows (c->dropped_keys). */
size_t jf_run_dropped_in_group(const jf_fitctx *c, const char *label);

/* The usage line that ends every usage error of `jitfit fit`. */
void jf_run_usage_hint(void);
/* Called once by `jitfit run`: setting errors then print run's usage line and name the fit. */
void jf_run_set_job_mode(void);

/* The model of fit r at one point xs (num_vars values) into *f and, when se is not NULL, the
 * standard error of that value from r's covariance by the delta method, sqrt(gᵀ C g) with
 * g = ∂f/∂θ (lmfit's eval_uncertainty): 0 where no fitted parameter moves f, inf where one of
 * infinite variance does, NaN when the covariance is not finite. grad: num_params doubles of
 * scratch. Returns 0, or -1 if the evaluator fails. */
int jf_run_eval_point(const jf_model *m, const jf_fit_result *r, const double *xs, double *f,
                      double *se, double *grad);
/* jf_run_eval_point for the n rows of the table's variable columns (ld = table.ld) into f and
 * se; returns 0, or -1 if the evaluator fails or memory runs out. */
int jf_run_predict(const jf_model *m, const jf_fit_result *r, const double *x, size_t ld,
                   size_t n, double *f, double *se);

/* For a fit whose covariance is infinite in some directions (the data do not determine some
 * parameters), se[q] = inf at the rows where such a parameter moves the model: recomputes
 * those from the pseudo-inverse of the weighted Jacobian at the fit's rows (rows[q], or q when
 * rows is NULL; x, ld and sigma as in the table, sigma NULL without), with the library's rank
 * rule on its columns scaled to unit norm (solver/covar.c), times 2·cost/dof unless
 * absolute_sigma — scipy's curve_fit, but for the scaling. A prediction at a row the
 * fit used is estimable (its gradient lies in the rows' span), so this is its standard error.
 * Linear loss only (a robust covariance uses the loss-scaled J). 0, or -1 when the evaluator
 * or LAPACK fails or memory runs out. */
int jf_run_band_pinv(const jf_model *m, const jf_fit_result *r, const double *x, size_t ld,
                     const double *sigma, const size_t *rows, size_t n, int absolute_sigma,
                     double *se);

/* Runs the batch of a prepared context with --group (batch.c). Same return as jf_run_spec. */
int jf_batch_run(jf_fitctx *c, FILE *out, jf_run_summary *sum);

/* The model's parameter names (vars = 0) or variable names (vars = 1) joined by ", " for a
 * message; malloc'd, NULL when memory ran out. */
char *jf_run_name_list(const jf_model *m, int vars);

/* After a successful jf_datafile_read of df: prints the note that rows starting with '#' were
 * skipped as comments (jf_datafile_hash_note), if any, to stderr. */
void jf_run_note_hash_rows(const jf_datafile *df);

#endif
