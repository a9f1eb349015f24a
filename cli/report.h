/* Reports of `jitfit fit`: the human table and the JSON object (schema in docs/CLI.md).
 *
 * Both are rendered from the same jf_report so they cannot disagree; this module only formats,
 * it decides nothing about the fit.
 */
#ifndef JF_CLI_REPORT_H
#define JF_CLI_REPORT_H

#include <stdio.h>

#include "../include/jitfit.h"

/* Everything a report shows. Pointers are borrowed for the duration of the call. */
typedef struct jf_report {
    const jf_model *model;         /* the fitted model (parameter names) */
    const jf_fit_result *result;   /* the fit */
    const double *p0;              /* num_params starting values the solver was given */
    const char *model_name;        /* MODEL as given on the command line */
    const char *data_name;         /* DATA as given on the command line */
    const char *response;          /* name of the response column */
    const char *sigma;             /* name of the sigma column, or NULL when unweighted */
    int absolute_sigma;            /* 1: covariance not rescaled by the reduced χ² */
    jf_loss loss;                  /* the robust loss used */
    double f_scale;                /* its scale */
    double time_read_ms;           /* reading and parsing the data file */
    double time_model_ms;          /* compiling the model (parse, resolve, differentiate) */
    const char *name;              /* the fit's name in a job file, or NULL */
    const char *group;             /* the group label of a batch fit (--group), or NULL */
    size_t rows_dropped;           /* rows dropped by --nan-policy omit */
    int show_device;               /* 1: the human report shows the result's device_note */
} jf_report;

/* Correlations beyond this magnitude are flagged: the parameters are nearly redundant. */
#define JF_REPORT_HIGH_CORRELATION 0.95

/* The short name of a jf_fit_status ("ftol", "max_nfev", ...); "unknown" otherwise. */
const char *jf_report_status_name(int status);
/* The name of a jf_cache_result: "miss", "memory", "disk" or "none". */
const char *jf_report_cache_name(int cache);
/* The name of a jf_loss ("linear", "soft_l1", ...). */
const char *jf_report_loss_name(int loss);

/* Prints the human report: parameter table, fit statistics, correlation matrix. */
void jf_report_text(FILE *f, const jf_report *r);
/* Prints the report as one JSON object followed by a newline; non-finite numbers are null. */
void jf_report_json(FILE *f, const jf_report *r);

#endif
