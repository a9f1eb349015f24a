/* Rendering of a fit result for people (aligned table) and for programs (JSON). See report.h.
 *
 * Human numbers use %g with a fixed number of significant digits: enough to read, not a promise
 * of accuracy (the JSON carries every digit, through jf_cli_json_number's shortest round-trip
 * form). The process never calls setlocale, so printf's decimal point is always '.'.
 */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

const char *jf_report_status_name(int status) {
    switch (status) {
    case JF_FIT_RUNNING: return "running";
    case JF_FIT_FTOL: return "ftol";
    case JF_FIT_XTOL: return "xtol";
    case JF_FIT_FTOL_XTOL: return "ftol_xtol";
    case JF_FIT_GTOL: return "gtol";
    case JF_FIT_MAX_NFEV: return "max_nfev";
    case JF_FIT_STALLED: return "stalled";
    case JF_FIT_NONFINITE: return "nonfinite";
    case JF_FIT_UNUSED_PARAM: return "unused_param";
    default: return "unknown";
    }
}

const char *jf_report_cache_name(int cache) {
    switch (cache) {
    case JF_CACHE_MISS: return "miss";
    case JF_CACHE_MEMORY: return "memory";
    case JF_CACHE_DISK: return "disk";
    case JF_CACHE_NONE: return "none";
    default: return "unknown";
    }
}

const char *jf_report_loss_name(int loss) {
    switch (loss) {
    case JF_LOSS_LINEAR: return "linear";
    case JF_LOSS_SOFT_L1: return "soft_l1";
    case JF_LOSS_HUBER: return "huber";
    case JF_LOSS_CAUCHY: return "cauchy";
    case JF_LOSS_ARCTAN: return "arctan";
    default: return "unknown";
    }
}

/* A number for the table: `digits` significant digits, "inf"/"nan" spelled out. */
static const char *num(char *buf, size_t n, double v, int digits) {
    if (isnan(v)) snprintf(buf, n, "nan");
    else if (isinf(v)) snprintf(buf, n, v < 0 ? "-inf" : "inf");
    else snprintf(buf, n, "%.*g", digits, v);
    return buf;
}

static size_t name_width(const jf_report *r) {
    size_t w = strlen("parameter");
    for (size_t k = 0; k < r->result->num_params; k++) {
        size_t l = strlen(jf_model_param_name(r->model, k));
        if (l > w) w = l;
    }
    return w;
}

/* One statistic line: a label column, then the value. */
static void stat_line(FILE *f, const char *label, const char *value) {
    fprintf(f, "  %-14s %s\n", label, value);
}

void jf_report_text(FILE *f, const jf_report *r) {
    const jf_fit_result *res = r->result;
    size_t np = res->num_params;
    int w = (int)name_width(r);
    char a[64], b[64], c[64], line[512];

    if (r->name) fprintf(f, "[%s] ", r->name);
    fprintf(f, "fit of %s to %s", r->model_name, r->data_name);
    if (r->group) fprintf(f, " (group %s)", r->group);
    fprintf(f, ": %zu points, %zu parameter%s", res->n, np, np == 1 ? "" : "s");
    size_t nfixed = 0;
    for (size_t k = 0; res->fixed && k < np; k++) nfixed += res->fixed[k] != 0;
    if (nfixed) fprintf(f, " (%zu fixed)", nfixed);
    if (r->rows_dropped)
        fprintf(f, " (%zu row%s with NaN dropped)", r->rows_dropped, r->rows_dropped == 1 ? "" : "s");
    if (r->sigma) fprintf(f, ", sigma from column '%s'%s", r->sigma,
                          r->absolute_sigma ? " (absolute)" : "");
    if (r->loss != JF_LOSS_LINEAR)
        fprintf(f, ", loss %s (f_scale %s)", jf_report_loss_name(r->loss),
                num(a, sizeof a, r->f_scale, 6));
    fprintf(f, "\n\n");

    /* gnuplot's layout: value ± standard error, then the error relative to the value. */
    fprintf(f, "  %-*s  %16s     %-12s  %10s\n", w, "parameter", "value", "std. error",
            "rel. error");
    for (size_t k = 0; k < np; k++) {
        double v = res->params[k], se = res->std_errors[k];
        if (v != 0 && isfinite(se)) snprintf(c, sizeof c, "%.3g%%", 100 * se / fabs(v));
        else snprintf(c, sizeof c, "-");
        const char *mark = res->at_bound && res->at_bound[k] < 0   ? "  at lower bound"
                           : res->at_bound && res->at_bound[k] > 0 ? "  at upper bound"
                                                                   : "";
        if (res->fixed && res->fixed[k])
            fprintf(f, "  %-*s  %16s      %-12s  %10s\n", w, jf_model_param_name(r->model, k),
                    num(a, sizeof a, v, 10), "(fixed)", "");
        else
            fprintf(f, "  %-*s  %16s  +/- %-12s  %10s%s\n", w, jf_model_param_name(r->model, k),
                    num(a, sizeof a, v, 10), num(b, sizeof b, se, 4), c, mark);
    }
    fprintf(f, "\n");

    /* the message of a converged fit starts with "converged: ", which the line says already */
    const char *msg = res->message ? res->message : "";
    if (res->success && strncmp(msg, "converged: ", 11) == 0) msg += 11;
    snprintf(line, sizeof line, "%s (%s): %s", res->success ? "converged" : "NOT CONVERGED",
             jf_report_status_name(res->status), msg);
    stat_line(f, "status", line);
    stat_line(f, "cost", num(a, sizeof a, res->cost, 10));
    stat_line(f, "SSR", num(a, sizeof a, res->ssr, 10));
    if (r->sigma) {
        stat_line(f, "chi2", num(a, sizeof a, res->chi2, 10));
        stat_line(f, "reduced chi2", num(a, sizeof a, res->reduced_chi2, 10));
    }
    if (res->dof > 0) {
        /* Without sigma these are gnuplot's "variance of residuals" and "rms of residuals":
         * the scale of the noise the fit implies. */
        stat_line(f, "SSR/dof", num(a, sizeof a, res->ssr / (double)res->dof, 10));
        stat_line(f, "rms residual", num(a, sizeof a, sqrt(res->ssr / (double)res->dof), 6));
    }
    stat_line(f, "R^2", num(a, sizeof a, res->r_squared, 10));
    snprintf(line, sizeof line, "%zu", res->dof);
    stat_line(f, "dof", line);
    snprintf(line, sizeof line, "%zu", res->nfev);
    stat_line(f, "nfev", line);
    snprintf(line, sizeof line, "%zu", res->iterations);
    stat_line(f, "iterations", line);
    stat_line(f, "optimality", num(a, sizeof a, res->optimality, 4));
    snprintf(line, sizeof line, "%s (kernel cache: %s)", jf_backend_name(res->backend),
             jf_report_cache_name(res->cache));
    stat_line(f, "backend", line);
    snprintf(line, sizeof line,
             "compile %.3g ms, solve %.3g ms, total %.3g ms (data file %.3g ms, model %.3g ms)",
             res->time_compile_ms, res->time_solve_ms, res->time_total_ms, r->time_read_ms,
             r->time_model_ms);
    stat_line(f, "time", line);
    if (r->show_device && res->device_note) stat_line(f, "device", res->device_note);
    if (res->backend == JF_BACKEND_CUDA) {
        snprintf(line, sizeof line, "%zu while iterating", res->host_syncs);
        stat_line(f, "host syncs", line);
    }
    if (res->warning) stat_line(f, "warning", res->warning);

    /* the fitted parameters' correlations (a fixed one has none) */
    if (np - nfixed > 1 && res->correlation) {
        /* columns as wide as the longest name, so that no header is cut (amplitude_1 and
         * amplitude_2 would read alike) */
        int cw = 8;
        for (size_t j = 0; j < np; j++)
            if (!res->fixed || !res->fixed[j]) {
                size_t len = strlen(jf_model_param_name(r->model, j));
                if (len > (size_t)cw) cw = (int)len;
            }
        fprintf(f, "\n  correlation\n  %-*s", w, "");
        for (size_t j = 0; j < np; j++)
            if (!res->fixed || !res->fixed[j])
                fprintf(f, "  %*s", cw, jf_model_param_name(r->model, j));
        fprintf(f, "\n");
        int high = 0;
        for (size_t i = 0; i < np; i++) {
            if (res->fixed && res->fixed[i]) continue;
            fprintf(f, "  %-*s", w, jf_model_param_name(r->model, i));
            for (size_t j = 0; j <= i; j++) {
                if (res->fixed && res->fixed[j]) continue;
                double v = res->correlation[i * np + j];
                int flag = i != j && fabs(v) > JF_REPORT_HIGH_CORRELATION;
                high |= flag;
                if (isfinite(v) && j == i) fprintf(f, "  %*.4f", cw - 1, v); /* last: no flag */
                else if (isfinite(v)) fprintf(f, "  %*.4f%c", cw - 1, v, flag ? '*' : ' ');
                else fprintf(f, "  %*s", cw, num(a, sizeof a, v, 4));
            }
            fprintf(f, "\n");
        }
        if (high)
            fprintf(f, "  * |correlation| > %.2f: these parameters are nearly redundant; the data "
                       "hardly tell them apart\n",
                    JF_REPORT_HIGH_CORRELATION);
    }
}

/* "key": value helpers; the first key of an object is written without the comma. */
static void key(FILE *f, const char *k) {
    fprintf(f, ",\n  ");
    jf_cli_json_string(f, k);
    fputs(": ", f);
}

static void json_matrix(FILE *f, const double *m, size_t n) {
    if (!m) {
        fputs("null", f);
        return;
    }
    fputc('[', f);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ",\n    [" : "\n    [", f);
        for (size_t j = 0; j < n; j++) {
            if (j) fputs(", ", f);
            jf_cli_json_number(f, m[i * n + j]);
        }
        fputc(']', f);
    }
    fputs(n ? "\n  ]" : "]", f);
}

void jf_report_json(FILE *f, const jf_report *r) {
    const jf_fit_result *res = r->result;
    size_t np = res->num_params;
    fprintf(f, "{\n  \"success\": %s", res->success ? "true" : "false");
    key(f, "status");
    fprintf(f, "%d", res->status);
    key(f, "status_name");
    jf_cli_json_string(f, jf_report_status_name(res->status));
    key(f, "message");
    jf_cli_json_string(f, res->message ? res->message : "");
    key(f, "model");
    jf_cli_json_string(f, r->model_name);
    key(f, "data");
    jf_cli_json_string(f, r->data_name);
    key(f, "response");
    jf_cli_json_string(f, r->response);
    key(f, "sigma");
    if (r->sigma) jf_cli_json_string(f, r->sigma);
    else fputs("null", f);
    key(f, "absolute_sigma");
    fputs(r->absolute_sigma ? "true" : "false", f);
    key(f, "loss");
    jf_cli_json_string(f, jf_report_loss_name(r->loss));
    key(f, "f_scale");
    jf_cli_json_number(f, r->f_scale);
    key(f, "n");
    fprintf(f, "%zu", res->n);
    key(f, "num_params");
    fprintf(f, "%zu", np);
    key(f, "params");
    fputc('[', f);
    for (size_t k = 0; k < np; k++) {
        fputs(k ? ",\n    {\"name\": " : "\n    {\"name\": ", f);
        jf_cli_json_string(f, jf_model_param_name(r->model, k));
        fputs(", \"value\": ", f);
        jf_cli_json_number(f, res->params[k]);
        fputs(", \"stderr\": ", f);
        jf_cli_json_number(f, res->std_errors[k]);
        fputs(", \"initial\": ", f);
        jf_cli_json_number(f, r->p0 ? r->p0[k] : NAN);
        int ab = res->at_bound ? res->at_bound[k] : 0;
        fputs(", \"at_bound\": ", f);
        fputs(ab < 0 ? "\"lower\"" : ab > 0 ? "\"upper\"" : "null", f);
        fputs(", \"fixed\": ", f);
        fputs(res->fixed && res->fixed[k] ? "true" : "false", f);
        fputc('}', f);
    }
    fputs(np ? "\n  ]" : "]", f);
    key(f, "cost");
    jf_cli_json_number(f, res->cost);
    key(f, "ssr");
    jf_cli_json_number(f, res->ssr);
    key(f, "chi2");
    jf_cli_json_number(f, res->chi2);
    key(f, "reduced_chi2");
    jf_cli_json_number(f, res->reduced_chi2);
    key(f, "r_squared");
    jf_cli_json_number(f, res->r_squared);
    key(f, "optimality");
    jf_cli_json_number(f, res->optimality);
    key(f, "dof");
    fprintf(f, "%zu", res->dof);
    key(f, "nfev");
    fprintf(f, "%zu", res->nfev);
    key(f, "iterations");
    fprintf(f, "%zu", res->iterations);
    key(f, "host_syncs");
    fprintf(f, "%zu", res->host_syncs);
    key(f, "backend");
    jf_cli_json_string(f, jf_backend_name(res->backend));
    key(f, "cache");
    jf_cli_json_string(f, jf_report_cache_name(res->cache));
    key(f, "timing_ms");
    fputs("{\"read\": ", f);
    jf_cli_json_number(f, r->time_read_ms);
    fputs(", \"model\": ", f);
    jf_cli_json_number(f, r->time_model_ms);
    fputs(", \"compile\": ", f);
    jf_cli_json_number(f, res->time_compile_ms);
    fputs(", \"solve\": ", f);
    jf_cli_json_number(f, res->time_solve_ms);
    fputs(", \"total\": ", f);
    jf_cli_json_number(f, res->time_total_ms);
    fputc('}', f);
    key(f, "warning");
    if (res->warning) jf_cli_json_string(f, res->warning);
    else fputs("null", f);
    key(f, "covariance");
    json_matrix(f, res->covariance, np);
    key(f, "correlation");
    json_matrix(f, res->correlation, np);
    key(f, "name");
    if (r->name) jf_cli_json_string(f, r->name);
    else fputs("null", f);
    key(f, "group");
    if (r->group) jf_cli_json_string(f, r->group);
    else fputs("null", f);
    key(f, "rows_dropped");
    fprintf(f, "%zu", r->rows_dropped);
    key(f, "device_note");
    if (res->device_note) jf_cli_json_string(f, res->device_note);
    else fputs("null", f);
    fputs("\n}\n", f);
}
