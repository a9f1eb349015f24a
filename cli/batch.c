/* `jitfit fit MODEL DATA --group COL`: one independent fit per distinct value of COL, all in one
 * jf_fit_batch call (the library spreads the fits over threads).
 *
 * Groups are numbered in order of first appearance, found with a small open-addressing table
 * keyed by XXH3 (labels are text: "A", "sample 3", "12.5"). Each group's rows are copied into
 * one block of its own in jf_data's column layout, so groups of any length may be interleaved in
 * the file. Output: one table row per group (or a JSON array of the usual fit objects with
 * "group" set), and the progress counter on a terminal only.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "../runtime/text.h"
#include "fitrun.h"
#include "output.h"
#include "report.h"
#include "util.h"

/* Group labels → ids, in order of first appearance. */
typedef struct groups {
    size_t n;          /* number of groups */
    char **label;      /* n labels (borrowed from the row keys) */
    size_t *count;     /* n row counts */
    size_t *id;        /* group id of each row */
    size_t *slot;      /* hash table of group ids + 1 (0: empty) */
    size_t nslots;     /* power of two */
} groups;

/* jf_run_band_pinv for each group whose standard errors of fit are infinite somewhere (its
 * data do not determine some parameters), over the group's rows. -1 when memory runs out. */
static int band_pinv(const jf_fitctx *c, const groups *g, jf_fit_result *const *res, double *se) {
    const jf_table *t = &c->table;
    const jf_spec *s = c->spec;
    const double *sigma = s->sigma ? t->values + (c->nv + 1) * t->ld : NULL;
    /* the rows grouped by a counting sort: group k's are rows[at[k] .. at[k + 1]) */
    size_t *rows = malloc((t->nrows + 1) * sizeof *rows), *at = calloc(g->n + 2, sizeof *at);
    double *gse = malloc((t->nrows + 1) * sizeof *gse);
    char *inf = calloc(g->n + 1, 1);
    int rc = rows && at && gse && inf ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < t->nrows; i++) {
        at[g->id[i] + 2]++;
        if (isinf(se[i])) inf[g->id[i]] = 1;
    }
    for (size_t k = 0; rc == 0 && k < g->n; k++) at[k + 2] += at[k + 1];
    for (size_t i = 0; rc == 0 && i < t->nrows; i++) {
        size_t q = at[g->id[i] + 1]++;
        rows[q] = i;
        gse[q] = se[i];
    }
    for (size_t k = 0; rc == 0 && k < g->n; k++) {
        if (!res[k] || !inf[k]) continue;
        size_t b = at[k], n = at[k + 1] - b;
        /* a failure of the evaluator or LAPACK leaves the group's inf in place */
        if (jf_run_band_pinv(c->model, res[k], t->values, t->ld, sigma, rows + b, n,
                             s->opts.absolute_sigma, gse + b) == 0)
            for (size_t q = b; q < b + n; q++) se[rows[q]] = gse[q];
    }
    free(rows);
    free(at);
    free(gse);
    free(inf);
    return rc;
}

/* The slot that holds label, or the empty one where it would go (the table is never full). */
static size_t group_slot(const groups *g, const char *label) {
    size_t h = (size_t)XXH3_64bits(label, strlen(label)) & (g->nslots - 1);
    while (g->slot[h] && strcmp(g->label[g->slot[h] - 1], label) != 0)
        h = (h + 1) & (g->nslots - 1);
    return h;
}

/* The id of label, or (size_t)-1. */
static size_t group_find(const groups *g, const char *label) {
    size_t h = group_slot(g, label);
    return g->slot[h] ? g->slot[h] - 1 : (size_t)-1;
}

/* Groups the rows by their keys, then adds the labels of extra (the rows --nan-policy omit
 * dropped; "" is no label) that no row has, as groups of no rows: they get a row saying why. */
static int group_rows(groups *g, char **keys, size_t nrows, char **extra, size_t nextra) {
    memset(g, 0, sizeof *g);
    size_t nall = nrows + nextra;
    g->nslots = 16;
    while (g->nslots < 2 * nall + 2) g->nslots *= 2;
    g->slot = calloc(g->nslots, sizeof *g->slot);
    g->label = malloc((nall + 1) * sizeof *g->label);
    g->count = calloc(nall + 1, sizeof *g->count);
    g->id = malloc((nrows + 1) * sizeof *g->id);
    if (!g->slot || !g->label || !g->count || !g->id) return -1;
    for (size_t i = 0; i < nall; i++) {
        char *key = i < nrows ? keys[i] : extra[i - nrows];
        if (i >= nrows && !*key) continue;
        size_t h = group_slot(g, key);
        if (!g->slot[h]) {
            g->label[g->n] = key;
            g->slot[h] = ++g->n;
        }
        if (i < nrows) {
            g->id[i] = g->slot[h] - 1;
            g->count[g->id[i]]++;
        }
    }
    return 0;
}

static void groups_free(groups *g) {
    free(g->slot);
    free(g->label);
    free(g->count);
    free(g->id);
}

/* Reads --p0-file into p0 (ngroups × np, already holding the shared starting values) and the
 * file's line of each group's row into line (0: none). Returns 0 or 1 after printing an error. */
static int read_p0_file(const jf_fitctx *c, const groups *g, double *p0, size_t *line) {
    const jf_spec *s = c->spec;
    const jf_model *m = c->model;
    size_t np = jf_model_num_params(m);
    jf_datafile *df = NULL;
    jf_table t;
    char *err = NULL, **labels = NULL;
    size_t nl = 0;
    int rc = 1;
    memset(&t, 0, sizeof t);
    const char **names = NULL;
    long *param_of = NULL;
    jf_dataopts dopts;
    memset(&dopts, 0, sizeof dopts);
    dopts.threads = s->opts.nthreads;
    if (jf_datafile_open_ex(s->p0_file, &dopts, &df, &err) != 0) goto fail;
    /* The group column is named like --group's, else it is the first column. */
    long gcol = jf_datafile_column(df, s->group);
    if (gcol < 0) gcol = 0;
    names = malloc((df->ncols + 1) * sizeof *names);
    param_of = malloc((df->ncols + 1) * sizeof *param_of);
    if (!names || !param_of) goto nomem;
    size_t nn = 0;
    for (size_t col = 0; col < df->ncols; col++) {
        if ((long)col == gcol) continue;
        long k = jf_model_param_index(m, df->names[col]);
        if (k < 0) {
            if (df->numeric) /* a .npy file has no header line to name */
                jf_cli_error("%s: column %zu ('%s') is not a parameter of the model", df->path,
                             col + 1, df->names[col]);
            else { /* a file without a header has its first row taken for one */
                char *params = jf_run_name_list(m, 0);
                jf_cli_error("%s:%zu: column '%s' is not a parameter of the model (parameters: "
                             "%s; the first row names the group column and the parameters)",
                             df->path, df->header_line, df->names[col], params ? params : "?");
                free(params);
            }
            goto out;
        }
        param_of[nn] = k;
        names[nn++] = df->names[col];
    }
    if (jf_datafile_read(df, names, nn, &t, &err) != 0) goto fail;
    jf_run_note_hash_rows(df);
    if (jf_datafile_read_text(df, df->names[gcol], &labels, &nl, &err) != 0) goto fail;
    for (size_t i = 0; i < nl; i++) {
        size_t id = group_find(g, labels[i]);
        if (id == (size_t)-1) {
            jf_cli_error("%s:%zu: group '%s' is not in the data (column '%s' of %s)", df->path,
                         jf_table_line(&t, i), labels[i], s->group, s->data);
            goto out;
        }
        if (line[id]) {
            jf_cli_error("%s:%zu: group '%s' is given twice (first on line %zu)", df->path,
                         jf_table_line(&t, i), labels[i], line[id]);
            goto out;
        }
        line[id] = jf_table_line(&t, i);
        for (size_t j = 0; j < nn; j++) p0[id * np + (size_t)param_of[j]] = t.values[j * t.ld + i];
    }
    rc = 0;
    goto out;
nomem:
    jf_cli_error("out of memory");
    goto out;
fail:
    jf_cli_error("%s", err ? err : "out of memory");
out:
    free(err);
    free(names);
    free(param_of);
    jf_strings_free(labels, nl);
    jf_table_free(&t);
    jf_datafile_free(df);
    return rc;
}

/* --fix in a batch: a --fix NAME=VALUE (c->fixed 2) holds every group at that value, so the
 * groups --p0-file starts must not silently replace it (a plain --fix NAME holds each group at
 * its own start, which the file may set). Groups that will not be fitted (pre_err) are not
 * checked. Returns 0, or 1 after printing the group whose start differs. */
static int held_values(const jf_fitctx *c, const groups *g, const double *p0, const size_t *line,
                       char *const *pre_err) {
    const jf_model *m = c->model;
    size_t np = jf_model_num_params(m), first = 0;
    while (first < g->n && pre_err[first]) first++;
    if (first == g->n) return 0;
    for (size_t j = 0; j < np; j++) {
        if (!c->fixed[j]) continue;
        double v = c->fixed[j] == 2 ? c->p0[j] : p0[first * np + j];
        for (size_t k = 0; k < g->n; k++) {
            double u = p0[k * np + j];
            if (!pre_err[k] && c->fixed[j] == 2 && memcmp(&u, &v, sizeof u) != 0) {
                char a[64], b[64], wb[64] = "";
                jf_cli_format_double(a, sizeof a, v);
                jf_cli_format_double(b, sizeof b, u);
                if (line[k]) snprintf(wb, sizeof wb, " (line %zu)", line[k]);
                jf_cli_error("%s: parameter '%s' is held at %s (--fix %s=%s), but the file "
                             "starts group '%s'%s at %s: a held parameter has one value; drop "
                             "it from the file or the value from --fix",
                             c->spec->p0_file, jf_model_param_name(m, j), a,
                             jf_model_param_name(m, j), a, g->label[k], wb, b);
                return 1;
            }
        }
    }
    return 0;
}

/* Lines under the table that the table has no column for: each distinct text of w (nw of
 * them, one per group that has one) once, as "  LABEL (N groups): text", in text order. The
 * first line ever printed (*first) is preceded by a blank line. */
static void print_counted(FILE *out, const char *label, const char **w, size_t nw, int *first) {
    qsort(w, nw, sizeof *w, jf_cli_cmp_str);
    for (size_t i = 0, j; i < nw; i = j) {
        for (j = i + 1; j < nw && strcmp(w[j], w[i]) == 0; j++) continue;
        fprintf(out, "%s  %s (%zu group%s): %s\n", *first ? "\n" : "", label, j - i,
                j - i == 1 ? "" : "s", w[i]);
        *first = 0;
    }
}

/* What a single fit's report says under its statistics and the table has no room for: the
 * backend and kernel cache that fitted the groups (always, as the report's backend line), the
 * device note (when the report would show its device line: -v, an explicit --device auto, or
 * --device gpu that ran on the CPU) and the results' warnings. */
static void print_footer(FILE *out, const jf_spec *s, jf_fit_result *const *res, size_t n) {
    const char **w = malloc((n ? n : 1) * sizeof *w);
    char *backends = malloc(n ? n * 64 : 1);
    size_t nw = 0;
    int first = 1;
    int show_device = s->verbose || (s->device_given && s->opts.device == JF_DEVICE_AUTO);
    if (!w || !backends) {
        free(w);
        free(backends);
        return;
    }
    for (size_t k = 0; k < n; k++)
        if (res[k]) {
            snprintf(backends + 64 * nw, 64, "%s (kernel cache: %s)",
                     jf_backend_name(res[k]->backend), jf_report_cache_name(res[k]->cache));
            w[nw] = backends + 64 * nw;
            nw++;
            if (s->opts.device == JF_DEVICE_GPU && res[k]->backend != JF_BACKEND_CUDA)
                show_device = 1;
        }
    print_counted(out, "backend", w, nw, &first);
    nw = 0;
    for (size_t k = 0; show_device && k < n; k++)
        if (res[k] && res[k]->device_note) w[nw++] = res[k]->device_note;
    print_counted(out, "device", w, nw, &first);
    nw = 0;
    for (size_t k = 0; k < n; k++)
        if (res[k] && res[k]->warning) w[nw++] = res[k]->warning;
    print_counted(out, "warning", w, nw, &first);
    free(w);
    free(backends);
}

/* The terminal progress line; batch_progress calls it from one thread at a time. */
static void show_progress(void *ctx, size_t done, size_t total) {
    (void)ctx;
    fprintf(stderr, "\r  fitting groups: %zu/%zu%s", done, total, done == total ? "\n" : "");
    fflush(stderr);
}

int jf_batch_run(jf_fitctx *c, FILE *out, jf_run_summary *sum) {
    const jf_spec *s = c->spec;
    const jf_model *m = c->model;
    const jf_table *t = &c->table;
    size_t np = jf_model_num_params(m), ncols = t->ncols, nv = c->nv;
    groups g;
    int rc = 1;
    double **blocks = NULL, *p0 = NULL, *fit = NULL;
    jf_data *data = NULL;
    jf_fit_result **res = NULL;
    char **errs = NULL, **pre_err = NULL;
    size_t *fill = NULL, *p0_line = NULL;
    if (group_rows(&g, c->keys, t->nrows, c->dropped_keys, c->dropped_keys ? c->rows_dropped : 0) !=
        0)
        goto nomem;
    blocks = calloc(g.n + 1, sizeof *blocks);
    data = calloc(g.n + 1, sizeof *data);
    p0 = malloc((g.n * np + 1) * sizeof *p0);
    res = calloc(g.n + 1, sizeof *res);
    errs = calloc(g.n + 1, sizeof *errs);
    fill = calloc(g.n + 1, sizeof *fill);
    pre_err = calloc(g.n + 1, sizeof *pre_err);
    p0_line = calloc(g.n + 1, sizeof *p0_line);
    if (!blocks || !data || !p0 || !res || !errs || !fill || !pre_err || !p0_line) goto nomem;
    for (size_t k = 0; k < g.n; k++) {
        if (!(blocks[k] = malloc((ncols * g.count[k] + 1) * sizeof(double)))) goto nomem;
        memcpy(p0 + k * np, c->p0, np * sizeof *p0);
    }
    for (size_t i = 0; i < t->nrows; i++) {
        size_t k = g.id[i], len = g.count[k], r = fill[k]++;
        for (size_t col = 0; col < ncols; col++)
            blocks[k][col * len + r] = t->values[col * t->ld + i];
    }
    for (size_t k = 0; k < g.n; k++) {
        size_t len = g.count[k];
        data[k].n = len;
        data[k].x = nv ? blocks[k] : NULL;
        data[k].ldx = len;
        data[k].y = blocks[k] + nv * len;
        data[k].sigma = s->sigma ? blocks[k] + (nv + 1) * len : NULL;
    }
    if (s->p0_file && read_p0_file(c, &g, p0, p0_line) != 0) goto out;
    /* A group whose rows were all dropped, or whose start cannot be used, gets a row with the
     * reason (and the p0 file's line); the others are fitted. jf_fit_batch refuses such a fit
     * too: its message is replaced. */
    for (size_t k = 0; k < g.n; k++)
        if (!g.count[k] && !(pre_err[k] = jf_cli_strf("--nan-policy omit dropped every row of "
                                                      "this group (NaN in the used columns)")))
            goto nomem;
    for (size_t k = 0; k < g.n; k++)
        for (size_t j = 0; j < np && !pre_err[k]; j++)
            if (p0[k * np + j] < c->lo[j] || p0[k * np + j] > c->hi[j] || !isfinite(p0[k * np + j])) {
                char v[64], l[64], h[64], where[600] = "";
                jf_cli_format_double(v, sizeof v, p0[k * np + j]);
                jf_cli_format_double(l, sizeof l, c->lo[j]);
                jf_cli_format_double(h, sizeof h, c->hi[j]);
                if (p0_line[k]) snprintf(where, sizeof where, "%s:%zu: ", s->p0_file, p0_line[k]);
                pre_err[k] = jf_cli_strf("%sparameter '%s': the starting value %s is %s [%s, %s]",
                                         where, jf_model_param_name(m, j), v,
                                         isfinite(p0[k * np + j]) ? "outside its bounds"
                                                                  : "not finite; bounds",
                                         l, h);
                if (!pre_err[k]) goto nomem;
            }
    if (c->fixed && held_values(c, &g, p0, p0_line, pre_err) != 0) goto out;

    jf_fit_options o = s->opts;
    o.p0 = NULL;
    o.lower = c->lo;
    o.upper = c->hi;
    o.x_scale = c->x_scale;
    o.fixed = c->fixed;
    /* A live counter is for people: only when stderr is a terminal, never into a log file;
     * with --json too (`--json > fits.json` is where a long batch is watched; the counter's
     * line ends before anything else is printed, so JSON on stderr, --output -, stays whole). */
    if (isatty(STDERR_FILENO)) {
        o.batch_progress = show_progress;
        o.batch_progress_ctx = NULL;
    }
    /* one batch, each group holding the --fix parameters at its own start (one compile) */
    jf_fit_batch(m, g.n, data, p0, &o, res, errs); /* failures are reported per row below */
    for (size_t k = 0; k < g.n; k++)
        if (pre_err[k]) {
            jf_fit_result_free(res[k]);
            res[k] = NULL;
            free(errs[k]);
            errs[k] = pre_err[k];
            pre_err[k] = NULL;
        }

    size_t nconv = 0, nfev = 0;
    double cost = 0;
    for (size_t k = 0; k < g.n; k++)
        if (res[k]) {
            nconv += (size_t)res[k]->success;
            nfev += res[k]->nfev;
            cost += res[k]->cost;
        }
    /* --output is written before the report: a reader of the report that stops early (`| head`)
     * ends jitfit by SIGPIPE while it prints, and the file must be complete by then. */
    int out_rc = 0;
    if (s->output) {
        /* Predictions in the file's row order, each with its own group's parameters. */
        fit = malloc((2 * t->nrows + 1) * sizeof *fit); /* then the standard errors */
        double *xs = malloc((nv + 1) * sizeof *xs), *grad = malloc((np + 1) * sizeof *grad);
        double *se = fit ? fit + t->nrows : NULL;
        out_rc = !fit || !xs || !grad;
        for (size_t i = 0; !out_rc && i < t->nrows; i++) {
            const jf_fit_result *r = res[g.id[i]];
            for (size_t j = 0; j < nv; j++) xs[j] = t->values[j * t->ld + i];
            if (!r || jf_run_eval_point(m, r, xs, &fit[i], &se[i], grad) != 0) fit[i] = se[i] = NAN;
        }
        free(xs);
        free(grad);
        if (!out_rc && s->opts.loss == JF_LOSS_LINEAR) out_rc = band_pinv(c, &g, res, se) != 0;
        char *err = NULL;
        /* the report still follows a file that could not be written */
        if (out_rc || jf_output_csv(s->output, s->group, c->keys, c->names, ncols, t->values,
                                    t->ld, t->nrows, nv, fit, se, s->opts.nthreads, &err) != 0) {
            jf_cli_error("%s", err ? err : "out of memory");
            out_rc = 1;
        }
        free(err);
    }
    if (s->json) {
        fputs("[\n", out);
        for (size_t k = 0; k < g.n; k++) {
            if (k) fputs(",\n", out);
            if (!res[k]) {
                fputs("{\"group\": ", out);
                jf_cli_json_string(out, g.label[k]);
                fputs(", \"success\": false, \"error\": ", out);
                jf_cli_json_string(out, errs[k] ? errs[k] : "the fit could not run");
                /* the fit objects' "name" (a job file's fit), so that run's groups all carry it */
                fputs(", \"name\": ", out);
                if (s->name) jf_cli_json_string(out, s->name);
                else fputs("null", out);
                /* the rows --nan-policy omit dropped from it (all of them for a group left with
                 * none): without it the array's rows_dropped do not add up to the note's */
                fprintf(out, ", \"rows_dropped\": %zu}\n", jf_run_dropped_in_group(c, g.label[k]));
                continue;
            }
            jf_report r;
            memset(&r, 0, sizeof r);
            r.model = m;
            r.result = res[k];
            r.p0 = p0 + k * np;
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
            r.group = g.label[k];
            r.rows_dropped = jf_run_dropped_in_group(c, g.label[k]);
            jf_report_json(out, &r);
        }
        fputs("]\n", out);
    } else {
        int gw = jf_cli_text_width(s->group);
        for (size_t k = 0; k < g.n; k++)
            if (jf_cli_text_width(g.label[k]) > gw) gw = jf_cli_text_width(g.label[k]);
        if (gw > 24) gw = 24;
        if (s->name) fprintf(out, "[%s] ", s->name);
        fprintf(out, "batch fit of %s to %s by column '%s': %zu group%s, %zu converged\n\n",
                s->model, s->data, s->group, g.n, g.n == 1 ? "" : "s", nconv);
        fputs("  ", out);
        jf_cli_put_padded(out, s->group, gw);
        fprintf(out, " %6s  %-10s", "n", "status");
        for (size_t j = 0; j < np; j++)
            fprintf(out, "  %14s %-11s", jf_model_param_name(m, j), "+/- error");
        fprintf(out, "  %12s %5s\n", s->sigma ? "chi2/dof" : "SSR", "iter");
        /* One reason for every group (no GPU, an option the solver refuses) is said once, not
         * once per group of thousands. */
        int same = g.n > 1;
        for (size_t k = 0; k < g.n && same; k++)
            same = !res[k] && errs[k] && strcmp(errs[k], errs[0]) == 0;
        if (same) fprintf(out, "  all %zu groups: error: %s\n", g.n, errs[0]);
        for (size_t k = 0; k < g.n && !same; k++) {
            /* a label longer than the column is printed whole: cut, two could read the same.
             * It is the data file's text: its control bytes must not act on the terminal. */
            char *shown = strdup(g.label[k]);
            if (shown) jf_text_printable(shown, strlen(shown), 0);
            fputs("  ", out);
            jf_cli_put_padded(out, shown ? shown : "?", gw);
            fprintf(out, " %6zu  ", g.count[k]);
            free(shown);
            if (!res[k]) {
                fprintf(out, "error: %s\n", errs[k] ? errs[k] : "the fit could not run");
                continue;
            }
            fprintf(out, "%-10s", jf_report_status_name(res[k]->status));
            for (size_t j = 0; j < np; j++)
                if (res[k]->fixed[j])
                    fprintf(out, "  %14.8g %-11s", res[k]->params[j], "(fixed)");
                else
                    fprintf(out, "  %14.8g %-11.3g", res[k]->params[j], res[k]->std_errors[j]);
            fprintf(out, "  %12.6g %5zu%s", s->sigma ? res[k]->reduced_chi2 : res[k]->ssr,
                    res[k]->iterations, res[k]->success ? "" : "  NOT CONVERGED");
            /* a single fit's report marks a parameter that ended on a bound (its error is then
             * not a confidence interval); the row says it too, after the columns */
            for (size_t j = 0; res[k]->at_bound && j < np; j++)
                if (res[k]->at_bound[j] && !res[k]->fixed[j])
                    fprintf(out, "  %s at %s bound", jf_model_param_name(m, j),
                            res[k]->at_bound[j] < 0 ? "lower" : "upper");
            fputc('\n', out);
        }
        size_t nd = c->rows_dropped, nl = c->rows_no_label;
        if (nd && (nl == 0 || nl == nd))
            fprintf(out, "\n  %zu row%s with %s dropped\n", nd, nd == 1 ? "" : "s",
                    nl ? "no group label" : "NaN");
        else if (nd)
            fprintf(out, "\n  %zu rows dropped: %zu with NaN, %zu with no group label\n", nd,
                    nd - nl, nl);
        print_footer(out, s, res, g.n);
    }
    fflush(out);
    rc = nconv == g.n && !out_rc ? 0 : 1;
    if (nconv != g.n)
        jf_cli_error("%zu of %zu group fits did not converge or could not run", g.n - nconv, g.n);
    if (sum) {
        sum->ran = 1;
        sum->success = nconv == g.n;
        sum->status = -1;
        sum->cost = cost;
        sum->nfev = nfev;
        /* of the first group that was fitted: a first group that could not run (too few rows)
         * has no kernels, and "none" would say that the interpreter fitted them all */
        sum->cache = JF_CACHE_NONE;
        for (size_t k = 0; k < g.n; k++)
            if (res[k]) {
                sum->cache = res[k]->cache;
                break;
            }
        sum->nfits = g.n;
        sum->nconverged = nconv;
    }
    goto out;
nomem:
    jf_cli_error("out of memory");
    rc = 1;
out:
    for (size_t k = 0; blocks && k < g.n; k++) free(blocks[k]);
    for (size_t k = 0; res && k < g.n; k++) jf_fit_result_free(res[k]);
    for (size_t k = 0; errs && k < g.n; k++) jf_free(errs[k]);
    for (size_t k = 0; pre_err && k < g.n; k++) free(pre_err[k]);
    free(pre_err);
    free(p0_line);
    free(blocks);
    free(data);
    free(p0);
    free(res);
    free(errs);
    free(fill);
    free(fit);
    groups_free(&g);
    return rc;
}
