/* One fit description run end to end (see fitrun.h). This is the former body of `jitfit fit`,
 * shared with `jitfit run` so a job file and a command line behave identically. */
#include "fitrun.h"

#include <float.h>
#include <lapacke.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../runtime/text.h"
#include "output.h"
#include "plot.h"
#include "report.h"
#include "util.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* `jitfit run` sets these: its usage line, and which fit a command-line setting failed in. */
static int in_run;
static const char *current_fit;

void jf_run_set_job_mode(void) {
    in_run = 1;
}

void jf_run_usage_hint(void) {
    if (in_run)
        fputs("usage: jitfit run JOB [--only NAME,...] [options of jitfit fit]  (jitfit help "
              "run)\n",
              stderr);
    else
        fputs("usage: jitfit fit MODEL DATA [options]  (jitfit fit --help lists the options)\n",
              stderr);
}

int jf_run_setting_error(const char *origin, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *msg = jf_cli_vstrf(fmt, ap);
    va_end(ap);
    if (!msg) {
        fputs("jitfit: out of memory\n", stderr);
        return 1;
    }
    /* as in jf_cli_error: the message quotes a value from a job file or the command line, and
     * its control bytes (an escape sequence) must not act on the terminal; whole, however long */
    jf_text_printable(msg, strlen(msg), 0);
    if (origin) fprintf(stderr, "jitfit: %s: %s\n", origin, msg);
    else if (in_run && current_fit) fprintf(stderr, "jitfit: run: [fit %s]: %s\n", current_fit, msg);
    else fprintf(stderr, "jitfit: %s: %s\n", in_run ? "run" : "fit", msg);
    jf_cli_note_error(msg);
    free(msg);
    if (!origin) jf_run_usage_hint();
    return 2;
}

/* 1 when every variable of m names a column of df. */
static int vars_in_data(const jf_model *m, const jf_datafile *df) {
    for (size_t j = 0; j < jf_model_num_vars(m); j++)
        if (jf_datafile_column(df, jf_model_var_name(m, j)) < 0) return 0;
    return 1;
}

/* names[0..n) joined by sep: a malloc'd string (NULL when out of memory), whole however
 * long, since a message or a suggestion (`--columns x,y`, `var x, t`) that cut a name would
 * name something else. */
static char *join_names(const char *const *names, size_t n, const char *sep) {
    size_t len = 1;
    for (size_t k = 0; k < n; k++) len += strlen(names[k]) + (k ? strlen(sep) : 0);
    char *r = malloc(len), *o = r;
    if (!r) return NULL;
    for (size_t k = 0; k < n; k++) {
        if (k) o = stpcpy(o, sep);
        o = stpcpy(o, names[k]);
    }
    *o = '\0';
    return r;
}

void jf_run_note_hash_rows(const jf_datafile *df) {
    char *note = jf_datafile_hash_note(df);
    if (note) fprintf(stderr, "jitfit: note: %s\n", note);
    free(note);
}

/* "a, b, c": the model's parameter (vars = 0) or variable names, for messages; malloc'd, NULL
 * when out of memory. */
char *jf_run_name_list(const jf_model *m, int vars) {
    size_t count = vars ? jf_model_num_vars(m) : jf_model_num_params(m);
    const char **names = malloc((count ? count : 1) * sizeof *names);
    if (!names) return NULL;
    for (size_t k = 0; k < count; k++)
        names[k] = vars ? jf_model_var_name(m, k) : jf_model_param_name(m, k);
    char *r = join_names(names, count, ", ");
    free(names);
    return r;
}

/* 1 when the column named nm plays a role other than a variable's: the response resp, the
 * sigma column or the group column. */
static int role_column(const jf_spec *s, const char *resp, const char *nm) {
    return strcmp(nm, resp) == 0 || (s->sigma && strcmp(nm, s->sigma) == 0) ||
           (s->group && strcmp(nm, s->group) == 0);
}

/* For a missing response column that no --y named: how to name it, with the column to name
 * when the data have exactly one the fit does not use otherwise (`time,signal` for
 * `a*exp(-b*time)`: scipy's curve_fit takes the response positionally, jitfit by name, and
 * "no column 'y'" alone does not say how to choose another). "" when there is nothing to add,
 * NULL when out of memory. */
static char *response_hint(const jf_model *m, const jf_spec *s, const jf_datafile *df,
                           const char *resp) {
    if (s->ycol || df->positional || jf_datafile_column(df, resp) >= 0) return jf_cli_strf("%s", "");
    const char *only = NULL;
    size_t spare = 0;
    for (size_t i = 0; i < df->ncols; i++) {
        const char *nm = df->names[i];
        int used = role_column(s, resp, nm);
        for (size_t j = 0; j < jf_model_num_vars(m) && !used; j++)
            used = strcmp(nm, jf_model_var_name(m, j)) == 0;
        if (used) continue;
        only = nm;
        spare++;
    }
    if (spare == 1) {
        char *shown = jf_cli_strf("%s", only);
        if (!shown) return NULL;
        jf_text_printable(shown, strlen(shown), 0);
        char *h = jf_cli_strf("; name the response column with --y %s (y = %s in a job file)",
                              shown, shown);
        free(shown);
        return h;
    }
    return jf_cli_strf("%s", spare ? "; name the response column with --y NAME (y = NAME in a "
                                     "job file)"
                                   : "");
}

/* A parameter named like a column of the data (other than the response, sigma and group):
 * the column is not used, which is rarely what was meant (`a*x + b*t` on columns x,t,y). */
static void warn_param_columns(const jf_model *m, const jf_spec *s, const jf_datafile *df) {
    const char *resp = s->ycol ? s->ycol : jf_model_response_name(m);
    for (size_t k = 0; k < jf_model_num_params(m); k++) {
        const char *p = jf_model_param_name(m, k);
        if (jf_datafile_column(df, p) < 0 || role_column(s, resp, p)) continue;
        char *vars = jf_run_name_list(m, 1);
        if (!vars) continue; /* out of memory: a warning less */
        fprintf(stderr,
                "jitfit: warning: '%s' is a parameter of the model and also a column of %s; the "
                "column is not used (to fit against it, declare the variables in a model file: "
                "var %s%s%s)\n",
                p, df->path, vars, *vars ? ", " : "", p);
        free(vars);
    }
}

/* The reading of MODEL with no variable at all, for data that have no column for its default
 * variable x: taken only when the text never names x (it then has as many parameters as the
 * first reading m; a name x in it would now be one more), so `c` (a mean) or `a + b` is fitted
 * to the response alone, while `c + 0*x` keeps x and needs its column. A model that declares its
 * variables with `var` keeps them (the options' names do not apply): NULL, as for any other
 * model. *d receives the reading's diagnostics (NULL with the NULL result). */
static jf_model *no_var_reading(const jf_spec *s, const char *text_name, const jf_model *m,
                                jf_diagnostics **d) {
    static const char *const none[1] = {NULL}; /* vars given, and empty: not the default x */
    jf_model *m0 = jf_cli_load_model_ex(s->model, text_name, none, 0, d);
    if (m0 && jf_model_num_vars(m0) == 0 && jf_model_num_params(m0) == jf_model_num_params(m))
        return m0;
    jf_model_free(m0);
    jf_diagnostics_free(*d);
    *d = NULL;
    return NULL;
}

/* The note for a model read with no variable (no_var_reading), naming the columns of df that
 * the fit leaves unused: when the model was meant to have a variable (a misspelt `tt` for a
 * column t), they show which. */
static void note_no_var(const jf_spec *s, const jf_model *m, const jf_datafile *df) {
    const char *resp = s->ycol ? s->ycol : jf_model_response_name(m);
    /* without the response's column the fit fails on it: that is the message, not this */
    if (!df->positional && jf_datafile_column(df, resp) < 0) return;
    fprintf(stderr, "jitfit: note: the data have no column 'x' and the model does not name it: "
                    "it is fitted with no variable, to the response alone");
    size_t unused = 0;
    for (size_t c = 0; c < df->ncols && !df->positional; c++) { /* positional: none unused */
        const char *nm = df->names[c];
        if (role_column(s, resp, nm)) continue;
        char *shown = strdup(nm);
        if (shown) jf_text_printable(shown, strlen(shown), 0);
        fprintf(stderr, "%s%s", unused++ ? ", " : " (columns not used: ", shown ? shown : "?");
        free(shown);
    }
    fprintf(stderr, "%s\n", unused ? ")" : "");
}

/* load_model with text_name, the name formula text has in diagnostics. */
static jf_model *load_model_named(const jf_spec *s, const jf_datafile *df, const char *text_name) {
    /* Each reading's warnings (a variable the model does not use) are printed only for the
     * reading that is kept. */
    jf_diagnostics *d = NULL, *d2 = NULL;
    jf_model *m = jf_cli_load_model_ex(s->model, text_name, NULL, 0, &d);
    /* a headerless file of as many columns as the response, sigma and group need */
    int no_var_cols = df->positional && df->ncols == 1 + (size_t)(s->sigma != NULL) +
                                                         (size_t)(s->group != NULL);
    jf_model *m0 = m && no_var_cols ? no_var_reading(s, text_name, m, &d2) : NULL;
    if (m0) {
        jf_model_free(m);
        jf_diagnostics_free(d);
        jf_cli_print_diagnostics(d2);
        note_no_var(s, m0, df);
        /* the plain reading warned (no x): a path of a missing file says so, as it would */
        jf_cli_note_missing_model_file(s->model);
        return m0;
    }
    if (!m || vars_in_data(m, df) || df->positional) {
        jf_cli_print_model_diagnostics(s->model, m, d);
        if (m && !df->positional) warn_param_columns(m, s, df);
        return m;
    }
    const char *resp = s->ycol ? s->ycol : jf_model_response_name(m);
    const char **vars = malloc((df->ncols ? df->ncols : 1) * sizeof *vars);
    size_t nv = 0;
    if (!vars) {
        jf_cli_print_diagnostics(d);
        return m;
    }
    for (size_t c = 0; c < df->ncols; c++) {
        const char *nm = df->names[c];
        if (role_column(s, resp, nm)) continue;
        if (jf_model_param_index(m, nm) >= 0) vars[nv++] = nm;
    }
    jf_model *m2 = nv ? jf_cli_load_model_ex(s->model, text_name, vars, nv, &d2)
                      : no_var_reading(s, text_name, m, &d2);
    free(vars);
    int ok = m2 && vars_in_data(m2, df);
    for (size_t j = 0; ok && j < jf_model_num_vars(m); j++) {
        const char *v = jf_model_var_name(m, j);
        if (jf_datafile_column(df, v) < 0 && jf_model_param_index(m2, v) >= 0) ok = 0;
    }
    if (!ok) {
        jf_model_free(m2);
        jf_diagnostics_free(d2);
        jf_cli_print_model_diagnostics(s->model, m, d);
        return m;
    }
    jf_model_free(m);
    jf_diagnostics_free(d);
    jf_cli_print_diagnostics(d2);
    if (jf_model_num_vars(m2) == 0) {
        note_no_var(s, m2, df);
        jf_cli_note_missing_model_file(s->model);
        return m2;
    }
    /* The formula now means something else than its plain reading: say how it was read. */
    char *list = jf_run_name_list(m2, 1);
    fprintf(stderr,
            "jitfit: note: the data have no column 'x'; the model's variable%s: %s (columns of "
            "the data)\n",
            jf_model_num_vars(m2) == 1 ? "" : "s", list ? list : "?");
    free(list);
    return m2;
}

/* Compiles MODEL. A formula without `var` declarations has the variable x; when the data have
 * no column x but do have columns named like some of the formula's free names (`a*exp(-b*t)`
 * with columns t,y), those names are the variables instead, as the design prescribes ("the data
 * columns named"). The second reading is taken only when it matches the data and does not turn
 * a missing variable into a parameter; otherwise the first stands and the missing column is
 * reported. Returns NULL after printing the model's errors. */
static jf_model *load_model(const jf_spec *s, const jf_datafile *df) {
    char *text_name = s->model_origin ? jf_cli_strf("<model at %s>", s->model_origin)
                                      : strdup("<command line>");
    if (!text_name) {
        jf_cli_error("out of memory");
        return NULL;
    }
    jf_model *m = load_model_named(s, df, text_name);
    free(text_name);
    return m;
}


/* Applies one bounds list "a=0:inf,b=-1:1" to lo/hi. what is "--bounds" or "FILE:LINE: bounds".
 * Returns 0 or the exit status of the (printed) error. */
static int apply_bounds(const jf_model *m, const jf_spec_item *it, double *lo, double *hi) {
    const char *origin = it->origin;
    const char *what = origin ? "bounds" : "--bounds";
    jf_cli_assign *items = NULL;
    char *msg = NULL;
    long n = jf_cli_split_assignments(it->text, &items, &msg);
    if (n < 0) {
        int rc = jf_run_setting_error(origin, "%s: %s", what, msg ? msg : "out of memory");
        free(msg);
        return rc;
    }
    int rc = 0;
    for (long i = 0; i < n && rc == 0; i++) {
        long k = jf_model_param_index(m, items[i].name);
        char *val = items[i].value, *colon = strchr(val, ':');
        double l = -INFINITY, h = INFINITY;
        if (k < 0) {
            char *names = jf_run_name_list(m, 0);
            rc = jf_run_setting_error(origin, "%s: the model has no parameter '%s' (parameters: %s)",
                                      what, items[i].name, names ? names : "?");
            free(names);
        } else if (!colon) {
            rc = jf_run_setting_error(origin, "%s: expected LOW:HIGH for '%s', got '%s'", what,
                                      items[i].name, val);
        } else {
            *colon = '\0';
            if ((*val && (jf_cli_parse_double(val, &l) != 0 || isnan(l))) ||
                (colon[1] && (jf_cli_parse_double(colon + 1, &h) != 0 || isnan(h)))) {
                *colon = ':';
                rc = jf_run_setting_error(origin, "%s: '%s' is not LOW:HIGH with numbers (for '%s')",
                                          what, val, items[i].name);
            } else if (!(l < h)) {
                rc = jf_run_setting_error(origin,
                                          "%s: the lower bound of '%s' is not below its upper bound",
                                          what, items[i].name);
            } else {
                lo[k] = l;
                hi[k] = h;
            }
        }
    }
    jf_cli_assign_free(items, n);
    return rc;
}

/* The -v callback: one line per iteration on stderr, as scipy's verbose=2 does on stdout (stdout
 * is kept for the report so that --json -v still prints valid JSON there). The damping column
 * shows "GN" when the step was the undamped Gauss-Newton step (λ = 0: it fitted inside the
 * trust region, as MINPACK's lmpar decides), which is most steps near a solution. */
static void print_progress(void *ctx, const jf_iteration_info *it) {
    FILE *f = ctx;
    char step[32], gain[32], damp[32];
    if (it->iteration == 0)
        fprintf(f, "%9s %7s %16s %11s %10s %10s %11s\n", "iteration", "nfev", "cost",
                "step norm", "damping", "gain ratio", "optimality");
    if (it->iteration == 0) snprintf(step, sizeof step, "-");
    else snprintf(step, sizeof step, "%.3e", it->step_norm);
    if (isnan(it->gain_ratio)) snprintf(gain, sizeof gain, "-");
    else snprintf(gain, sizeof gain, "%.3g", it->gain_ratio);
    if (it->iteration == 0) snprintf(damp, sizeof damp, "-");
    else if (it->damping == 0) snprintf(damp, sizeof damp, "GN");
    else snprintf(damp, sizeof damp, "%.3e", it->damping);
    fprintf(f, "%9zu %7zu %16.9e %11s %10s %10s %11.3e%s\n", it->iteration, it->nfev, it->cost,
            step, damp, gain, it->optimality,
            it->iteration == 0 || it->accepted ? "" : "  rejected");
    fflush(f);
}

/* Splits "x, y ,z" into malloc'd names. Returns the count, or -1 when out of memory or a name
 * is empty. */
static long split_names(const char *text, char ***out) {
    long n = 0;
    char **v = NULL;
    const char *p = text;
    for (;;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        while (len && (*p == ' ' || *p == '\t')) p++, len--;
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
        char **nv = realloc(v, (size_t)(n + 1) * sizeof *nv);
        if (!nv) break;
        v = nv;
        if (!len || !(v[n] = strndup(p, len))) break;
        n++;
        if (!c) {
            *out = v;
            return n;
        }
        p = c + 1;
    }
    jf_strings_free(v, (size_t)n);
    *out = NULL;
    return -1;
}

int jf_run_eval_point(const jf_model *m, const jf_fit_result *r, const double *xs, double *f,
                      double *se, double *grad) {
    if (jf_model_eval(m, r->params, xs, f, se ? grad : NULL) != JF_OK) return -1;
    if (!se) return 0;
    size_t np = r->num_params;
    const double *C = r->covariance;
    double v = 0;
    int undetermined = 0, finite = 1;
    /* a parameter that does not move f here adds nothing, even with an infinite variance */
    for (size_t k = 0; k < np; k++) {
        finite = finite && isfinite(grad[k]);
        if (grad[k] == 0) continue;
        undetermined |= isinf(C[k * np + k]);
        for (size_t l = 0; l < np; l++)
            if (grad[l] != 0) v += grad[k] * C[k * np + l] * grad[l];
    }
    /* One that the data do not determine (its covariance row inf) and that moves f: inf, which
     * jf_run_band_pinv replaces for a linear loss. The sum alone would be NaN wherever the
     * gradient's signs differ (inf·x·1 at x < 0 for a*x + b*x + c: inf − inf). */
    if (finite && undetermined) v = INFINITY;
    *se = isnan(v) ? NAN : sqrt(v > 0 ? v : 0.0); /* rounding can leave a tiny negative */
    return 0;
}

int jf_run_predict(const jf_model *m, const jf_fit_result *r, const double *x, size_t ld,
                   size_t n, double *f, double *se) {
    size_t nv = jf_model_num_vars(m);
    double *xs = malloc((nv + 1) * sizeof *xs), *grad = malloc((r->num_params + 1) * sizeof *grad);
    int rc = xs && grad ? 0 : -1;
    for (size_t i = 0; i < n && rc == 0; i++) {
        for (size_t j = 0; j < nv; j++) xs[j] = x[j * ld + i];
        rc = jf_run_eval_point(m, r, xs, &f[i], se ? &se[i] : NULL, grad);
    }
    free(xs);
    free(grad);
    return rc;
}

int jf_run_band_pinv(const jf_model *m, const jf_fit_result *r, const double *x, size_t ld,
                     const double *sigma, const size_t *rows, size_t n, int absolute_sigma,
                     double *se) {
    size_t np = r->num_params, nv = jf_model_num_vars(m), mf = 0, want = 0;
    for (size_t i = 0; i < n; i++) want += isinf(se[i]) != 0;
    if (want == 0 || r->dof == 0) return 0;
    if (n > (size_t)INT_MAX) return -1; /* LAPACK's dimensions are int */
    size_t *free_k = malloc((np + 1) * sizeof *free_k);
    double *xs = malloc((nv + 1) * sizeof *xs), *g = malloc((np + 1) * sizeof *g);
    double *G = free_k ? malloc((n * np + 1) * sizeof *G) : NULL;
    double *S = malloc((np + 1) * sizeof *S), *VT = malloc((np * np + 1) * sizeof *VT);
    double *D = malloc((np + 1) * sizeof *D);
    int rc = free_k && xs && g && G && S && VT && D ? 0 : -1;
    for (size_t k = 0; rc == 0 && k < np; k++)
        if (!r->fixed[k]) free_k[mf++] = k;
    /* G: the weighted Jacobian of the fit at its rows, column-major for LAPACK */
    for (size_t q = 0; rc == 0 && q < n; q++) {
        size_t i = rows ? rows[q] : q;
        double f;
        for (size_t j = 0; j < nv; j++) xs[j] = x[j * ld + i];
        if (jf_model_eval(m, r->params, xs, &f, g) != JF_OK) rc = -1;
        double w = sigma ? 1.0 / sigma[i] : 1.0;
        for (size_t a = 0; a < mf; a++) G[a * n + q] = w * g[free_k[a]];
    }
    /* Columns scaled to unit norm, as the library's covariance scales them (solver/covar.c):
     * with parameters on different scales (x in units 1e15 too small: a's column 1e15 times
     * c's) the rank rule below on J as it stands dropped c's direction with the null one, and
     * the band was that of a model without c. The norms as covar.c's, without overflow. */
    for (size_t a = 0; rc == 0 && a < mf; a++) {
        double big = 0, ss = 0;
        for (size_t q = 0; q < n; q++)
            if (fabs(G[a * n + q]) > big) big = fabs(G[a * n + q]);
        for (size_t q = 0; big > 0 && q < n; q++) ss += (G[a * n + q] / big) * (G[a * n + q] / big);
        D[a] = big > 0 ? big * sqrt(ss) : 1.0;
        for (size_t q = 0; q < n; q++) G[a * n + q] /= D[a];
    }
    double *super = malloc((mf + 1) * sizeof *super);
    if (rc == 0 && (!super || mf == 0 ||
                    LAPACKE_dgesvd(LAPACK_COL_MAJOR, 'N', 'A', (lapack_int)n, (lapack_int)mf, G,
                                   (lapack_int)n, S, NULL, 1, VT, (lapack_int)mf, super) != 0))
        rc = -1;
    free(super);
    if (rc == 0) {
        /* the rank rule of the library's covariance (solver/covar.c) */
        double cut = DBL_EPSILON * (double)(n > mf ? n : mf) * S[0];
        double s2 = absolute_sigma ? 1.0 : 2.0 * r->cost / (double)r->dof;
        for (size_t q = 0; q < n; q++) {
            if (!isinf(se[q])) continue;
            size_t i = rows ? rows[q] : q;
            double f, v = 0;
            for (size_t j = 0; j < nv; j++) xs[j] = x[j * ld + i];
            if (jf_model_eval(m, r->params, xs, &f, g) != JF_OK) continue;
            for (size_t k = 0; k < mf && S[k] > cut; k++) {
                double t = 0;
                for (size_t a = 0; a < mf; a++) t += VT[a * mf + k] * (g[free_k[a]] / D[a]);
                t /= S[k];
                v += t * t;
            }
            se[q] = sqrt(s2 * v);
        }
    }
    free(free_k);
    free(xs);
    free(g);
    free(G);
    free(S);
    free(VT);
    free(D);
    return rc;
}

/* Names a positional file's columns in the default order: the model's variables, then the
 * response, then sigma (when asked for). Returns 0 or 1 after printing an error. */
static int name_positional(jf_datafile *df, const jf_model *m, const jf_spec *s, const char *resp) {
    size_t nv = jf_model_num_vars(m), want = nv + 1 + (s->sigma != NULL) + (s->group != NULL);
    const char **names = malloc((want + 1) * sizeof *names);
    if (!names) return 1;
    size_t k = 0;
    if (s->group) names[k++] = s->group;
    for (size_t j = 0; j < nv; j++) names[k++] = jf_model_var_name(m, j);
    names[k++] = resp;
    if (s->sigma) names[k++] = s->sigma;
    if (df->ncols != want) {
        /* the message suggests this list for --columns: whole, however long */
        char *expect = join_names(names, k, ",");
        jf_cli_error("%s: the data have no header row and %zu column%s, but the model needs %zu "
                     "(%s); name the columns with --columns (e.g. --columns %s)",
                     df->path, df->ncols, df->ncols == 1 ? "" : "s", want, expect ? expect : "?",
                     expect ? expect : "?");
        free(expect);
        free(names);
        return 1;
    }
    char *err = NULL;
    int rc = jf_datafile_name_columns(df, names, k, &err);
    free(names);
    if (rc != 0) {
        jf_cli_error("%s", err ? err : "out of memory");
        free(err);
        return 1;
    }
    return 0;
}

size_t jf_run_dropped_in_group(const jf_fitctx *c, const char *label) {
    if (!c->dropped_keys) return 0;
    size_t lo = 0, hi = c->rows_dropped; /* the first label >= label */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(c->dropped_keys[mid], label) < 0) lo = mid + 1;
        else hi = mid;
    }
    size_t n = 0;
    while (lo + n < c->rows_dropped && strcmp(c->dropped_keys[lo + n], label) == 0) n++;
    return n;
}

/* Drops rows with NaN in the used columns or with no group label ("" in c->keys), with their
 * labels; the note says how many for each reason, as one is not the other. Returns 0, or -1
 * when memory ran out (said; nothing dropped, so the rows are not fitted with their NaNs). */
static int drop_nan_rows(jf_fitctx *c) {
    jf_table *t = &c->table;
    unsigned char *keep = malloc(t->nrows ? t->nrows : 1);
    if (!keep) {
        jf_cli_error("out of memory");
        return -1;
    }
    size_t bad = 0, no_label = 0;
    for (size_t i = 0; i < t->nrows; i++) {
        keep[i] = 1;
        if (c->keys && !c->keys[i][0]) {
            keep[i] = 0;
            no_label++;
        }
        for (size_t col = 0; keep[i] && col < t->ncols; col++)
            if (isnan(t->values[col * t->ld + i])) keep[i] = 0;
        bad += !keep[i];
    }
    if (bad) {
        size_t n0 = t->nrows;
        /* the table first: it is left as it was when memory runs out, the labels then too */
        if (jf_table_compact(t, keep) == 0) {
            free(keep);
            jf_cli_error("out of memory");
            return -1;
        }
        if (c->keys) {
            /* the dropped rows' labels are kept, sorted, for each group's rows_dropped */
            c->dropped_keys = malloc(bad * sizeof *c->dropped_keys);
            size_t j = 0, nd = 0;
            for (size_t i = 0; i < n0; i++) {
                if (keep[i]) c->keys[j++] = c->keys[i];
                else if (c->dropped_keys) c->dropped_keys[nd++] = c->keys[i];
                else free(c->keys[i]);
            }
            for (size_t i = j; i < n0; i++) c->keys[i] = NULL;
            if (c->dropped_keys) qsort(c->dropped_keys, nd, sizeof *c->dropped_keys, jf_cli_cmp_str);
        }
        c->rows_dropped = bad;
        c->rows_no_label = no_label;
        if (no_label == 0 || no_label == bad)
            fprintf(stderr, "jitfit: note: %s: dropped %zu of %zu row%s with %s (--nan-policy omit)\n",
                    c->df->path, bad, n0, n0 == 1 ? "" : "s",
                    no_label ? "no group label" : "NaN in the used columns");
        else
            fprintf(stderr, "jitfit: note: %s: dropped %zu of %zu rows: %zu with NaN in the used "
                            "columns, %zu with no group label (--nan-policy omit)\n",
                    c->df->path, bad, n0, bad - no_label, no_label);
    }
    free(keep);
    return 0;
}

static int check_starts(jf_fitctx *c, const char *const *from);

/* --x-scale: c->x_scale stays NULL for 'jac'; one number scales every parameter; a NAME=SCALE
 * list must name each (a mix of fixed and Jacobian scales is not what scipy means either).
 * Returns 0 or the exit status after printing the error (2). */
static int fixed_scales(jf_fitctx *c) {
    const jf_spec_item *it = &c->spec->x_scale;
    if (!it->text) return 0;
    size_t np = jf_model_num_params(c->model);
    c->x_scale = malloc((np + 1) * sizeof *c->x_scale);
    int *set = calloc(np + 1, sizeof *set);
    if (!c->x_scale || !set) {
        free(set);
        jf_cli_error("out of memory");
        return 1;
    }
    const char *what = it->origin ? "x_scale" : "--x-scale";
    double one;
    int rc = 0;
    char *msg = NULL;
    if (jf_cli_parse_double(it->text, &one) == 0) {
        for (size_t k = 0; k < np; k++) c->x_scale[k] = one;
    } else if (jf_cli_assign_by_name(c->model, 0, it->text, what, c->x_scale, set, &msg) != 0) {
        rc = jf_run_setting_error(it->origin, "%s", msg ? msg : "out of memory");
        free(msg);
    } else {
        for (size_t k = 0; k < np && !rc; k++)
            if (!set[k] && c->fixed && c->fixed[k])
                c->x_scale[k] = 1; /* held (--fix): not fitted, so its scale is never used */
            else if (!set[k])
                rc = jf_run_setting_error(it->origin,
                                          "%s: no scale for '%s': name every parameter, or give "
                                          "one number for all, or 'jac'",
                                          what, jf_model_param_name(c->model, k));
    }
    free(set);
    return rc;
}

/* --fix: c->fixed flags the parameters each list names (NULL when none does). Returns 0 or the
 * exit status after printing the error (2 for a name the model lacks). */
static int held_params(jf_fitctx *c) {
    const jf_spec *s = c->spec;
    if (!s->nfix) return 0;
    size_t np = jf_model_num_params(c->model);
    c->fixed = calloc(np + 1, sizeof *c->fixed);
    if (!c->fixed) {
        jf_cli_error("out of memory");
        return 1;
    }
    for (size_t i = 0; i < s->nfix; i++) {
        const char *p = s->fix[i].text; /* "a,c": checked by jf_spec_set */
        while (*p) {
            size_t n = strcspn(p, ",");
            char *name = strndup(p, n);
            if (!name) {
                jf_cli_error("out of memory");
                return 1;
            }
            long k = jf_model_param_index(c->model, name);
            free(name);
            if (k < 0)
                return jf_run_setting_error(s->fix[i].origin,
                                            "%s: the model has no parameter '%.*s'",
                                            s->fix[i].origin ? "fix" : "--fix", (int)n, p);
            c->fixed[k] = 1;
            p += n + (p[n] == ',');
        }
    }
    size_t nfixed = 0;
    for (size_t k = 0; k < np; k++) nfixed += (size_t)c->fixed[k];
    if (nfixed == np) { /* the last list completed the set: name where it was written */
        const char *origin = s->fix[s->nfix - 1].origin;
        return jf_run_setting_error(origin, "%s holds every parameter of the model: nothing is "
                                            "left to fit",
                                    origin ? "fix" : "--fix");
    }
    return 0;
}

/* Starting values and bounds: the model's, then each p0/bounds list in order. The --fix names
 * are checked first: a `--fix q=1` also went to the p0 lists, and a name the model lacks must be
 * reported as the --fix it was written in, not as a --p0. Returns 0 or the exit status after
 * printing the error: 2, as a value the user gave is wrong. */
static int start_and_bounds(jf_fitctx *c) {
    const jf_spec *s = c->spec;
    jf_model *m = c->model;
    size_t np = jf_model_num_params(m);
    c->p0 = malloc((np + 1) * sizeof *c->p0);
    c->lo = malloc((np + 1) * sizeof *c->lo);
    c->hi = malloc((np + 1) * sizeof *c->hi);
    if (!c->p0 || !c->lo || !c->hi) {
        jf_cli_error("out of memory");
        return 1;
    }
    int hrc = held_params(c);
    if (hrc) return hrc;
    for (size_t k = 0; k < np; k++) {
        c->p0[k] = jf_model_param_initial(m, k);
        jf_model_param_bounds(m, k, &c->lo[k], &c->hi[k]);
    }
    /* where each start was last set (a job file's "FILE:LINE", or NULL), for the messages */
    const char **from = calloc(np + 1, sizeof *from);
    int *set = calloc(np + 1, sizeof *set);
    if (!from || !set) {
        free(from);
        free(set);
        jf_cli_error("out of memory");
        return 1;
    }
    for (size_t i = 0; i < s->np0; i++) {
        char what[64], *msg = NULL;
        const char *key = s->p0[i].key ? s->p0[i].key : "p0"; /* a fix's NAME=VALUE: "fix" */
        snprintf(what, sizeof what, "%s%s", s->p0[i].origin ? "" : "--", key);
        memset(set, 0, np * sizeof *set);
        if (jf_cli_assign_by_name(m, 0, s->p0[i].text, what, c->p0, set, &msg) != 0) {
            int rc = jf_run_setting_error(s->p0[i].origin, "%s", msg ? msg : "out of memory");
            free(msg);
            free(from);
            free(set);
            return rc;
        }
        for (size_t k = 0; k < np; k++) {
            if (set[k]) from[k] = s->p0[i].origin;
            /* held at the value its fix named (2), unless a later p0 set another start */
            if (set[k] && c->fixed && c->fixed[k]) c->fixed[k] = s->p0[i].key ? 2 : 1;
        }
    }
    free(set);
    for (size_t i = 0; i < s->nbounds; i++) {
        int brc = apply_bounds(m, &s->bounds[i], c->lo, c->hi);
        if (brc) {
            free(from);
            return brc;
        }
    }
    int rc = check_starts(c, from);
    free(from);
    return rc ? rc : fixed_scales(c);
}

/* The starts (defaults filled in) against the bounds; from[k] names where start k was set. */
static int check_starts(jf_fitctx *c, const char *const *from) {
    const jf_spec *s = c->spec;
    jf_model *m = c->model;
    size_t np = jf_model_num_params(m);
    for (size_t k = 0; k < np; k++) {
        const char *name = jf_model_param_name(m, k);
        int declared = !isnan(c->p0[k]);
        /* scipy curve_fit's default start (its _initialize_feasible), as the library's: 1,
         * or within the bounds: their midpoint, lower + 1, upper - 1 */
        if (!declared) {
            int lf = isfinite(c->lo[k]), hf = isfinite(c->hi[k]);
            c->p0[k] = lf && hf ? 0.5 * (c->lo[k] + c->hi[k])
                       : lf     ? c->lo[k] + 1.0
                       : hf     ? c->hi[k] - 1.0
                                : 1.0;
        }
        char sl[64], sh[64], sv[64];
        jf_cli_format_double(sl, sizeof sl, c->lo[k]);
        jf_cli_format_double(sh, sizeof sh, c->hi[k]);
        jf_cli_format_double(sv, sizeof sv, c->p0[k]);
        if (!isfinite(c->p0[k])) {
            jf_cli_error("parameter '%s': the starting value %s is not finite", name, sv);
            return 2;
        }
        if (!(c->lo[k] < c->hi[k])) {
            jf_cli_error("parameter '%s': the lower bound %s is not below the upper bound %s",
                         name, sl, sh);
            return 2;
        }
        /* In a batch, per-group starting values may still come from --p0-file. */
        if ((c->p0[k] < c->lo[k] || c->p0[k] > c->hi[k]) && !s->p0_file) {
            jf_cli_error("%s%sparameter '%s': the starting value %s is outside its bounds [%s, %s]",
                         from[k] ? from[k] : "", from[k] ? ": " : "", name, sv, sl, sh);
            return 2;
        }
    }
    return 0;
}

/* The single (non-batch) fit of a prepared context. */
static int run_single(jf_fitctx *c, FILE *out, jf_run_summary *sum) {
    const jf_spec *s = c->spec;
    jf_model *m = c->model;
    jf_table *t = &c->table;
    size_t nv = c->nv;
    jf_fit_options o = s->opts;
    o.p0 = c->p0;
    o.lower = c->lo;
    o.upper = c->hi;
    o.x_scale = c->x_scale;
    o.fixed = c->fixed;
    if (s->verbose) {
        o.progress = print_progress;
        o.progress_ctx = stderr;
    }
    jf_data d;
    d.n = t->nrows;
    d.x = nv ? t->values : NULL;
    d.ldx = t->ld;
    d.y = t->values + nv * t->ld;
    d.sigma = s->sigma ? t->values + (nv + 1) * t->ld : NULL;
    jf_fit_result *res = NULL;
    char *fit_err = NULL;
    double *fit = NULL;
    int rc = 1;
    int st = jf_fit(m, &d, &o, &res, &fit_err);
    if (st != JF_OK) {
        jf_cli_error("%s", fit_err ? fit_err : jf_status_string(st));
        goto done;
    }
    jf_report r;
    memset(&r, 0, sizeof r);
    r.model = m;
    r.result = res;
    r.p0 = c->p0;
    r.model_name = s->model;
    r.data_name = s->data;
    r.response = c->response;
    r.sigma = s->sigma;
    r.absolute_sigma = s->opts.absolute_sigma;
    r.loss = s->opts.loss;
    r.f_scale = s->opts.f_scale;
    r.time_read_ms = c->time_read_ms;
    r.time_model_ms = c->time_model_ms;
    r.name = s->name;
    r.rows_dropped = c->rows_dropped;
    /* a --device gpu fit that ran on the CPU says why (the note's "cpu: fell back ...") */
    r.show_device = s->verbose || (s->device_given && s->opts.device == JF_DEVICE_AUTO) ||
                    (s->opts.device == JF_DEVICE_GPU && res->backend != JF_BACKEND_CUDA);
    if (s->json) jf_report_json(out, &r);
    else jf_report_text(out, &r);
    fflush(out);
    if (sum) {
        sum->ran = 1;
        sum->success = res->success;
        sum->status = res->status;
        sum->cost = res->cost;
        sum->nfev = res->nfev;
        sum->cache = res->cache;
        sum->nfits = 1;
        sum->nconverged = (size_t)res->success;
    }
    rc = res->success ? 0 : 1;
    if (!res->success)
        jf_cli_error("the fit did not converge: %s", res->message ? res->message : "");
    if (s->output || s->plot) {
        /* the fit, then (for --output) its standard errors, in one allocation */
        fit = malloc((2 * t->nrows + 1) * sizeof *fit);
        if (!fit || jf_run_predict(m, res, t->values, t->ld, t->nrows, fit,
                                   s->output ? fit + t->nrows : NULL) != 0) {
            jf_cli_error("could not evaluate the model for --output/--plot");
            rc = 1;
            goto done;
        }
        /* a failure (no memory for the n·p copy of J, an SVD that does not converge) leaves
         * those rows inf, as in a --group run: the file is still worth writing */
        if (s->output && s->opts.loss == JF_LOSS_LINEAR)
            (void)jf_run_band_pinv(m, res, t->values, t->ld,
                                   s->sigma ? t->values + (nv + 1) * t->ld : NULL, NULL,
                                   t->nrows, s->opts.absolute_sigma, fit + t->nrows);
    }
    if (s->output) {
        char *err = NULL;
        if (jf_output_csv(s->output, NULL, NULL, c->names, t->ncols, t->values, t->ld, t->nrows,
                          nv, fit, fit + t->nrows, s->opts.nthreads, &err) != 0) {
            jf_cli_error("%s", err ? err : "out of memory");
            rc = 1;
        }
        free(err);
    }
    if (s->plot) {
        jf_plot_data p;
        char sub[256];
        memset(&p, 0, sizeof p);
        /* whole, not cut by a buffer: a cut could split a UTF-8 character, which cairo refuses */
        char *title = jf_cli_strf("fit of %s to %s", s->model, s->data);
        if (s->sigma && isfinite(res->reduced_chi2))
            snprintf(sub, sizeof sub, "R^2 = %.6g, chi^2/dof = %.4g, %zu points", res->r_squared,
                     res->reduced_chi2, res->n);
        else
            snprintf(sub, sizeof sub, "R^2 = %.6g, %zu points, %s", res->r_squared, res->n,
                     res->success ? "converged" : "NOT converged");
        p.title = title;
        p.subtitle = sub;
        p.nv = nv;
        for (size_t j = 0; j < nv && j < 2; j++) {
            p.xname[j] = c->names[j];
            p.x[j] = t->values + j * t->ld;
        }
        p.yname = c->response;
        p.y = d.y;
        p.fit = fit;
        p.n = t->nrows;
        p.model = m;
        p.params = res->params;
        char *err = NULL;
        if (!title || jf_plot_write(s->plot, &p, &err) != 0) {
            jf_cli_error("%s", err ? err : "out of memory");
            rc = 1;
        }
        free(err);
        free(title);
    }
done:
    free(fit);
    jf_free(fit_err);
    jf_fit_result_free(res);
    return rc;
}

int jf_run_spec(const jf_spec *s, FILE *out, jf_run_summary *sum) {
    double t_start = now_ms();
    current_fit = s->name;
    if (in_run) jf_cli_error_fit(s->name);
    jf_fitctx c;
    memset(&c, 0, sizeof c);
    c.spec = s;
    if (sum) memset(sum, 0, sizeof *sum);
    if (sum) sum->status = -1;
    char *err = NULL, **colnames = NULL;
    long ncolnames = 0;
    int rc = 1;
    if (!s->model || !s->data) {
        rc = jf_run_setting_error(s->name ? s->name : NULL, "expected MODEL and DATA");
        goto done;
    }
    {
        char *why = NULL;
        if (jf_spec_check(s, &why)) {
            rc = jf_run_setting_error(NULL, "%s", why ? why : "out of memory");
            free(why);
            goto done;
        }
    }
    if (s->plot) { /* cairo is opened at run time: a missing one fails before the fit, not after */
        char why[600];
        if (jf_plot_available(why, sizeof why) != 0) {
            jf_cli_error("%s: %s", s->plot, why);
            goto done;
        }
    }
    if (s->columns && (ncolnames = split_names(s->columns, &colnames)) < 0) {
        rc = jf_run_setting_error(NULL, "--columns: '%s' is not a list of names", s->columns);
        goto done;
    }
    jf_dataopts dopts;
    memset(&dopts, 0, sizeof dopts);
    dopts.allow_no_header = 1;
    dopts.columns = (const char *const *)colnames;
    dopts.ncolumns = (size_t)ncolnames;
    dopts.allow_nan = s->nan_omit;
    dopts.nan_hint = 1;
    dopts.threads = s->opts.nthreads;

    double t0 = now_ms();
    if (jf_datafile_open_ex(s->data, &dopts, &c.df, &err) != 0) {
        jf_cli_error("%s", err ? err : "out of memory");
        goto done;
    }
    c.time_read_ms = now_ms() - t0;

    t0 = now_ms();
    c.model = load_model(s, c.df);
    c.time_model_ms = now_ms() - t0;
    if (!c.model) goto done;
    jf_model *m = c.model;
    size_t nv = jf_model_num_vars(m);
    c.nv = nv;
    const char *resp = s->ycol ? s->ycol : jf_model_response_name(m);
    c.response = resp;
    for (size_t j = 0; j < nv; j++)
        if (strcmp(jf_model_var_name(m, j), resp) == 0 ||
            (s->sigma && strcmp(jf_model_var_name(m, j), s->sigma) == 0)) {
            rc = jf_run_setting_error(NULL, "column '%s' is a variable of the model; it cannot be "
                                            "the %s",
                                      jf_model_var_name(m, j),
                                      strcmp(jf_model_var_name(m, j), resp) == 0 ? "response"
                                                                                 : "sigma");
            goto done;
        }
    if (s->sigma && strcmp(s->sigma, resp) == 0) {
        rc = jf_run_setting_error(NULL, "--sigma: column '%s' is the response", s->sigma);
        goto done;
    }
    /* A group holds the rows of one value of its column: grouped by the response or a
     * variable, every group is a point or a vertical line, and every fit fails. */
    for (size_t j = 0; s->group && j < nv; j++)
        if (strcmp(jf_model_var_name(m, j), s->group) == 0) {
            rc = jf_run_setting_error(NULL, "--group: column '%s' is a variable of the model",
                                      s->group);
            goto done;
        }
    if (s->group && strcmp(s->group, resp) == 0) {
        rc = jf_run_setting_error(NULL, "--group: column '%s' is the response", s->group);
        goto done;
    }
    /* every row of a group would have one sigma: the fit's weights would be the group's label */
    if (s->group && s->sigma && strcmp(s->group, s->sigma) == 0) {
        rc = jf_run_setting_error(NULL, "--group: column '%s' is the sigma", s->group);
        goto done;
    }
    if (s->plot) { /* before the fit, as a missing cairo is */
        char *why = nv == 1 || nv == 2 ? NULL : jf_plot_vars_error(s->plot, nv);
        if (nv != 1 && nv != 2) {
            jf_cli_error("%s", why ? why : "out of memory");
            free(why);
            goto done;
        }
    }
    if (c.df->positional && name_positional(c.df, m, s, resp) != 0) goto done;

    /* Variables, response, sigma: adjacent columns of one block, which is exactly jf_data's
     * layout, so the solver reads the parsed numbers in place. */
    c.names = malloc((nv + 2) * sizeof *c.names);
    if (!c.names) {
        jf_cli_error("out of memory");
        goto done;
    }
    for (size_t j = 0; j < nv; j++) c.names[j] = jf_model_var_name(m, j);
    c.names[nv] = resp;
    if (s->sigma) c.names[nv + 1] = s->sigma;
    t0 = now_ms();
    int st = jf_datafile_read(c.df, c.names, nv + 1 + (s->sigma != NULL), &c.table, &err);
    if (st == 0 && s->group) {
        size_t nk = 0;
        st = jf_datafile_read_text(c.df, s->group, &c.keys, &nk, &err);
        if (st == 0 && nk != c.table.nrows) {
            jf_cli_error("%s: internal error: %zu group labels for %zu rows", c.df->path, nk,
                         c.table.nrows);
            jf_strings_free(c.keys, nk);
            c.keys = NULL;
            goto done;
        }
    }
    c.time_read_ms += now_ms() - t0;
    if (st == 0) jf_run_note_hash_rows(c.df);
    if (st != 0) {
        char *hint = err ? response_hint(m, s, c.df, resp) : NULL;
        jf_cli_error("%s%s", err ? err : "out of memory", hint ? hint : "");
        free(hint);
        goto done;
    }
    /* int64 data beyond 2^53 (nanosecond timestamps) are rounded to doubles: harmless as
     * values, ruinous for a model that subtracts a large offset from them, so say it */
    for (size_t j = 0; j < nv + 1 + (s->sigma != NULL); j++) {
        long col = jf_datafile_column(c.df, c.names[j]);
        size_t row = jf_datafile_rounded_row(c.df, col);
        if (row)
            fprintf(stderr,
                    "jitfit: note: %s: column %ld ('%s') has integers beyond 2^53 (first at row "
                    "%zu), rounded to the nearest double (to within 1.1e-16 relative): subtract "
                    "a large offset before saving, not in the model\n",
                    c.df->path, col + 1, c.names[j], row);
    }
    /* An empty group cell is a missing label, not a group named "": an error, or with
     * --nan-policy omit a row to drop (drop_nan_rows drops the rows whose label is ""). So are
     * the words for a missing value that a numeric column reads as NaN ('NA', 'null', ...), as
     * pandas' groupby drops NaN keys: not a group 'NA' of the rows whose label was lost. */
    /* In a .npy file the labels are numbers, and a NaN or an infinity is no label either. */
    for (size_t i = 0; c.keys && i < c.table.nrows; i++) {
        const char *k = c.keys[i];
        int nonfinite = c.df->numeric && (strcmp(k, "nan") == 0 || strcmp(k, "inf") == 0 ||
                                          strcmp(k, "-inf") == 0);
        /* a CSV's 'nan' too: a numeric column reads it as NaN, and so do pandas' labels */
        double kv = 0;
        int word = !c.df->numeric && (jf_datafile_missing_word(k) ||
                                      (jf_cli_parse_double(k, &kv) == 0 && isnan(kv)));
        if (k[0] && !nonfinite && !word) continue;
        if (!s->nan_omit) {
            long col = jf_datafile_column(c.df, s->group) + 1;
            size_t line = jf_table_line(&c.table, i);
            if (word)
                jf_cli_error("%s:%zu: column %ld ('%s'): '%s' marks a missing group label "
                             "(--nan-policy omit drops such rows)",
                             c.df->path, line, col, s->group, k);
            else
                jf_cli_error("%s:%zu: column %ld ('%s'): %s group label (--nan-policy omit drops "
                             "such rows)",
                             c.df->path, line, col, s->group, nonfinite ? "a non-finite" : "empty");
            goto done;
        }
        c.keys[i][0] = '\0'; /* no label: not a group 'nan' whose rows were all dropped */
    }
    /* The text can be as large as the data ten times over; release it before fitting. */
    free(c.df->text);
    c.df->text = NULL;
    c.df->len = 0;
    if (s->nan_omit && drop_nan_rows(&c) != 0) goto done;

    jf_table *t = &c.table;
    const double *sigma = s->sigma ? t->values + (nv + 1) * t->ld : NULL;
    for (size_t i = 0; sigma && i < t->nrows; i++)
        if (!(sigma[i] > 0)) {
            char v[64];
            jf_cli_format_double(v, sizeof v, sigma[i]);
            jf_cli_error("%s:%zu: column %zu ('%s'): sigma must be positive, found %s", c.df->path,
                         jf_table_line(t, i), t->file_col[nv + 1] + 1, s->sigma, v);
            goto done;
        }
    if ((rc = start_and_bounds(&c)) != 0) goto done;
    /* the parameters fitted count: those --fix holds do not (the library's rule) */
    size_t np = jf_model_num_params(m), nheld = 0;
    for (size_t k = 0; c.fixed && k < np; k++) nheld += c.fixed[k] != 0;
    if (!s->group && t->nrows <= np - nheld) {
        if (nheld)
            jf_cli_error("%s: %zu data row%s for %zu fitted parameter%s (%zu held by --fix): a "
                         "fit needs more rows than the parameters it fits",
                         c.df->path, t->nrows, t->nrows == 1 ? "" : "s", np - nheld,
                         np - nheld == 1 ? "" : "s", nheld);
        else
            jf_cli_error("%s: %zu data row%s for %zu parameter%s: a fit needs more rows than "
                         "parameters",
                         c.df->path, t->nrows, t->nrows == 1 ? "" : "s", np, np == 1 ? "" : "s");
        rc = 1;
        goto done;
    }
    rc = s->group ? jf_batch_run(&c, out, sum) : run_single(&c, out, sum);

done:
    jf_cli_error_fit(NULL);
    if (sum) sum->time_ms = now_ms() - t_start;
    free(err);
    jf_strings_free(colnames, (size_t)(ncolnames > 0 ? ncolnames : 0));
    jf_strings_free(c.keys, c.table.nrows);
    jf_strings_free(c.dropped_keys, c.dropped_keys ? c.rows_dropped : 0);
    free(c.names);
    free(c.p0);
    free(c.lo);
    free(c.hi);
    free(c.x_scale);
    free(c.fixed);
    jf_table_free(&c.table);
    jf_model_free(c.model);
    jf_datafile_free(c.df);
    return rc;
}

void jf_run_json_error(FILE *f, const char *name, const char *msg) {
    fputs("{", f);
    if (name) {
        fputs("\"name\": ", f);
        jf_cli_json_string(f, name);
        fputs(", ", f);
    }
    fputs("\"success\": false, \"error\": ", f);
    jf_cli_json_string(f, msg && *msg ? msg : "the fit could not run");
    fputs("}\n", f);
    fflush(f);
}

int jf_run_spec_json(const jf_spec *s, FILE *to, jf_run_summary *sum) {
    jf_run_summary own;
    if (!sum) sum = &own;
    jf_cli_note_error("");
    /* written as it comes (not held back to see whether anything came), so that on stderr
     * (fit --output -) the report keeps its place before the messages that follow it */
    int rc = jf_run_spec(s, to, sum);
    if (!sum->ran) jf_run_json_error(to, s->name, jf_cli_last_error());
    return rc;
}
