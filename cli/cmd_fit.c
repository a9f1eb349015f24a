/* `jitfit fit MODEL DATA [options]`: the whole pipeline from the command line.
 *
 * Order of work: parse options (usage errors exit 2 before any file is touched) → read the data
 * file and its header (data.c) → compile the model, taking independent variables from the
 * data's column names when the default `x` is absent → read the needed columns straight into the
 * column-major block jf_data wants (no copy) → starting values and bounds (model file, then
 * --p0/--bounds) → jf_fit → report (report.c). Exit status: 0 converged, 1 any error or a fit
 * that did not converge (its result is still printed), 2 usage.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../include/jitfit.h"
#include "commands.h"
#include "data.h"
#include "report.h"
#include "util.h"

static const char usage_text[] =
    "usage: jitfit fit MODEL DATA [options]\n"
    "  MODEL                 a formula or a model file; DATA a CSV/TSV/whitespace table with a\n"
    "                        header row ('-' reads standard input)\n"
    "  --p0 a=1,b=2          starting values (override the model file's)\n"
    "  --bounds a=0:inf,b=-1:1  bounds (override the model file's; an empty side is infinite)\n"
    "  --y NAME              response column (default: the model's response, 'y')\n"
    "  --sigma COL           column of standard deviations (weights 1/sigma^2)\n"
    "  --absolute-sigma      do not rescale the covariance by the reduced chi-square\n"
    "  --loss NAME           linear, soft_l1, huber, cauchy or arctan\n"
    "  --f-scale S           robust loss scale (default 1)\n"
    "  --ftol X --xtol X --gtol X   stopping tolerances (default 1e-8)\n"
    "  --max-nfev N          evaluation budget (default 100 * parameters)\n"
    "  --device cpu|auto|gpu  where to fit (default auto)\n"
    "  --backend c|interp    CPU kernels: generated C (default) or the interpreter\n"
    "  --threads N           worker threads (default 0: all cores)\n"
    "  --no-cache            do not use the on-disk kernel cache\n"
    "  --json                print the result as JSON (schema in docs/CLI.md)\n"
    "  -v, --verbose         print one line per iteration on stderr\n"
    "  --                    ends the options (for a formula that starts with '-')\n";

/* The parsed command line. */
typedef struct fit_args {
    const char *model;      /* MODEL argument */
    const char *data;       /* DATA argument */
    const char *p0;         /* --p0 list, or NULL */
    const char *bounds;     /* --bounds list, or NULL */
    const char *ycol;       /* --y column, or NULL for the model's response */
    const char *sigma;      /* --sigma column, or NULL */
    int json;               /* --json */
    int verbose;            /* -v */
    jf_fit_options opts;    /* solver options filled from the rest */
} fit_args;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* The line that ends every usage error. */
static void usage_hint(void) {
    fputs("usage: jitfit fit MODEL DATA [options]  (jitfit fit --help lists the options)\n",
          stderr);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints "jitfit: fit: MESSAGE" and the usage; returns the usage exit status. */
static int usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("jitfit: fit: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\n", stderr);
    va_end(ap);
    usage_hint();
    return 2;
}

/* `--name value` or `--name=value` at argv[*i]. Returns 1 and sets *val when argv[*i] is this
 * option, -1 when its value is missing, 0 when it is another argument. */
static int opt(int argc, char **argv, int *i, const char *name, const char **val) {
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0) return 0;
    if (argv[*i][n] == '=') {
        *val = argv[*i] + n + 1;
        return 1;
    }
    if (argv[*i][n] != '\0') return 0;
    if (*i + 1 >= argc) return -1;
    *val = argv[++*i];
    return 1;
}

/* A tolerance or scale: finite, >= 0 (> 0 when positive is set). */
static int parse_nonneg(const char *s, int positive, double *out) {
    double v;
    if (jf_cli_parse_double(s, &v) != 0 || !isfinite(v) || v < 0 || (positive && v == 0))
        return -1;
    *out = v;
    return 0;
}

/* A non-negative decimal integer that fits in max. */
static int parse_count(const char *s, unsigned long long max, unsigned long long *out) {
    if (!*s) return -1;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9') return -1;
    errno = 0;
    unsigned long long v = strtoull(s, NULL, 10);
    if (errno || v > max) return -1;
    *out = v;
    return 0;
}

/* Fills a from argv; returns 0 or the exit status of a usage error (already printed). */
static int parse_args(int argc, char **argv, fit_args *a) {
    memset(a, 0, sizeof *a);
    a->opts = jf_fit_options_default();
    int options = 1; /* cleared by "--", so a formula may start with '-' */
    for (int i = 1; i < argc; i++) {
        const char *v = NULL, *arg = argv[i];
        int r;
        if (!options || arg[0] != '-' || arg[1] == '\0') {
            if (!a->model) a->model = arg;
            else if (!a->data) a->data = arg;
            else return usage_error("unexpected argument '%s'", arg);
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            options = 0;
            continue;
        }
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            fputs(usage_text, stdout);
            return -1;
        }
        if (strcmp(arg, "--json") == 0) a->json = 1;
        else if (strcmp(arg, "-v") == 0 || strcmp(arg, "--verbose") == 0) a->verbose = 1;
        else if (strcmp(arg, "--absolute-sigma") == 0) a->opts.absolute_sigma = 1;
        else if (strcmp(arg, "--no-cache") == 0) a->opts.no_cache = 1;
        else if ((r = opt(argc, argv, &i, "--p0", &v)) != 0) {
            if (r < 0 || !*v) return usage_error("option %s needs a value", "--p0");
            a->p0 = v;
        } else if ((r = opt(argc, argv, &i, "--bounds", &v)) != 0) {
            if (r < 0 || !*v) return usage_error("option %s needs a value", "--bounds");
            a->bounds = v;
        } else if ((r = opt(argc, argv, &i, "--y", &v)) != 0) {
            if (r < 0 || !*v) return usage_error("option %s needs a value", "--y");
            a->ycol = v;
        } else if ((r = opt(argc, argv, &i, "--sigma", &v)) != 0) {
            if (r < 0 || !*v) return usage_error("option %s needs a value", "--sigma");
            a->sigma = v;
        } else if ((r = opt(argc, argv, &i, "--loss", &v)) != 0) {
            if (r < 0) return usage_error("option %s needs a value", "--loss");
            int l = jf_loss_from_name(v);
            if (l < 0)
                return usage_error("--loss: unknown loss '%s' (use linear, soft_l1, huber, cauchy "
                                   "or arctan)",
                                   v);
            a->opts.loss = (jf_loss)l;
        } else if ((r = opt(argc, argv, &i, "--f-scale", &v)) != 0) {
            if (r < 0) return usage_error("option %s needs a value", "--f-scale");
            if (parse_nonneg(v, 1, &a->opts.f_scale) != 0)
                return usage_error("--f-scale: '%s' is not a positive number", v);
        } else if ((r = opt(argc, argv, &i, "--ftol", &v)) != 0 ||
                   (r = opt(argc, argv, &i, "--xtol", &v)) != 0 ||
                   (r = opt(argc, argv, &i, "--gtol", &v)) != 0) {
            const char *which = strncmp(arg, "--ftol", 6) == 0   ? "--ftol"
                                : strncmp(arg, "--xtol", 6) == 0 ? "--xtol"
                                                                 : "--gtol";
            if (r < 0) return usage_error("option %s needs a value", which);
            double t;
            if (parse_nonneg(v, 0, &t) != 0)
                return usage_error("%s: '%s' is not a non-negative number", which, v);
            if (which[2] == 'f') a->opts.ftol = t;
            else if (which[2] == 'x') a->opts.xtol = t;
            else a->opts.gtol = t;
        } else if ((r = opt(argc, argv, &i, "--max-nfev", &v)) != 0) {
            unsigned long long n;
            if (r < 0) return usage_error("option %s needs a value", "--max-nfev");
            if (parse_count(v, (unsigned long long)SIZE_MAX, &n) != 0 || n == 0)
                return usage_error("--max-nfev: '%s' is not a positive integer", v);
            a->opts.max_nfev = (size_t)n;
        } else if ((r = opt(argc, argv, &i, "--threads", &v)) != 0) {
            unsigned long long n;
            if (r < 0) return usage_error("option %s needs a value", "--threads");
            if (parse_count(v, 4096, &n) != 0)
                return usage_error("--threads: '%s' is not a thread count (0 to 4096)", v);
            a->opts.nthreads = (int)n;
        } else if ((r = opt(argc, argv, &i, "--device", &v)) != 0) {
            if (r < 0) return usage_error("option %s needs a value", "--device");
            if (strcmp(v, "cpu") == 0) a->opts.device = JF_DEVICE_CPU;
            else if (strcmp(v, "gpu") == 0) a->opts.device = JF_DEVICE_GPU;
            else if (strcmp(v, "auto") == 0) a->opts.device = JF_DEVICE_AUTO;
            else return usage_error("--device: unknown device '%s' (use cpu, auto or gpu)", v);
        } else if ((r = opt(argc, argv, &i, "--backend", &v)) != 0) {
            if (r < 0) return usage_error("option %s needs a value", "--backend");
            if (strcmp(v, "c") == 0) a->opts.backend = JF_BACKEND_C;
            else if (strcmp(v, "interp") == 0) a->opts.backend = JF_BACKEND_INTERP;
            else return usage_error("--backend: unknown backend '%s' (use c or interp)", v);
        } else {
            return usage_error("unknown option '%s'", arg);
        }
    }
    if (!a->model || !a->data) return usage_error("expected MODEL and DATA");
    return 0;
}

/* 1 when every variable of m names a column of df. */
static int vars_in_data(const jf_model *m, const jf_datafile *df) {
    for (size_t j = 0; j < jf_model_num_vars(m); j++)
        if (jf_datafile_column(df, jf_model_var_name(m, j)) < 0) return 0;
    return 1;
}

/* Compiles MODEL like jf_cli_load_model but prints nothing: for the second attempt of
 * load_model, whose diagnostics the first attempt has already shown. */
static jf_model *compile_quiet(const char *arg, const char *const *vars, size_t nvars) {
    jf_model_options o = jf_model_options_default();
    o.vars = vars;
    o.nvars = nvars;
    jf_model *m = NULL;
    struct stat st;
    if (stat(arg, &st) == 0 && S_ISREG(st.st_mode)) {
        o.source_name = arg;
        jf_model_compile_file(arg, &o, &m, NULL);
    } else {
        o.source_name = "<command line>";
        jf_model_compile(arg, (size_t)-1, &o, &m, NULL);
    }
    return m;
}

/* Compiles MODEL. A formula without `var` declarations has the variable x; when the data have
 * no column x but do have columns named like some of the formula's free names (`a*exp(-b*t)`
 * with columns t,y), those names are the variables instead, as the design prescribes ("the data
 * columns named"). The second reading is taken only when it matches the data and does not turn
 * a missing variable into a parameter; otherwise the first stands and the missing column is
 * reported. Returns NULL after printing the model's errors. */
static jf_model *load_model(const fit_args *a, const jf_datafile *df) {
    jf_model *m = jf_cli_load_model(a->model, NULL, 0);
    if (!m || vars_in_data(m, df)) return m;
    const char *resp = a->ycol ? a->ycol : jf_model_response_name(m);
    const char **vars = malloc((df->ncols ? df->ncols : 1) * sizeof *vars);
    size_t nv = 0;
    if (!vars) return m;
    for (size_t c = 0; c < df->ncols; c++) {
        const char *nm = df->names[c];
        if (strcmp(nm, resp) == 0 || (a->sigma && strcmp(nm, a->sigma) == 0)) continue;
        if (jf_model_param_index(m, nm) >= 0) vars[nv++] = nm;
    }
    jf_model *m2 = nv ? compile_quiet(a->model, vars, nv) : NULL;
    free(vars);
    if (!m2) return m;
    int ok = vars_in_data(m2, df);
    for (size_t j = 0; ok && j < jf_model_num_vars(m); j++) {
        const char *v = jf_model_var_name(m, j);
        if (jf_datafile_column(df, v) < 0 && jf_model_param_index(m2, v) >= 0) ok = 0;
    }
    if (!ok) {
        jf_model_free(m2);
        return m;
    }
    jf_model_free(m);
    return m2;
}

/* "a, b, c" into buf, for messages about unknown parameter names. */
static const char *param_list(const jf_model *m, char *buf, size_t n) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < jf_model_num_params(m) && used < n; k++) {
        int w = snprintf(buf + used, n - used, "%s%s", k ? ", " : "", jf_model_param_name(m, k));
        if (w < 0) break;
        used += (size_t)w;
    }
    return buf;
}

/* Applies --bounds "a=0:inf,b=-1:1" to lo/hi. Returns 0 or the usage exit status. */
static int apply_bounds(const jf_model *m, const char *text, double *lo, double *hi) {
    jf_cli_assign *items = NULL;
    long n = jf_cli_parse_assignments(text, "--bounds", &items);
    if (n < 0) {
        usage_hint();
        return 2;
    }
    int rc = 0;
    char names[512];
    for (long i = 0; i < n && rc == 0; i++) {
        long k = jf_model_param_index(m, items[i].name);
        char *val = items[i].value, *colon = strchr(val, ':');
        double l = -INFINITY, h = INFINITY;
        if (k < 0) {
            rc = usage_error("--bounds: the model has no parameter '%s' (parameters: %s)",
                             items[i].name, param_list(m, names, sizeof names));
        } else if (!colon) {
            rc = usage_error("--bounds: expected LOW:HIGH for '%s', got '%s'", items[i].name, val);
        } else {
            *colon = '\0';
            if ((*val && (jf_cli_parse_double(val, &l) != 0 || isnan(l))) ||
                (colon[1] && (jf_cli_parse_double(colon + 1, &h) != 0 || isnan(h)))) {
                *colon = ':';
                rc = usage_error("--bounds: '%s' is not LOW:HIGH with numbers (for '%s')", val,
                                 items[i].name);
            } else if (!(l < h)) {
                rc = usage_error("--bounds: the lower bound of '%s' is not below its upper bound",
                                 items[i].name);
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
 * is kept for the report so that --json -v still prints valid JSON there). */
static void print_progress(void *ctx, const jf_iteration_info *it) {
    FILE *f = ctx;
    char step[32], gain[32];
    if (it->iteration == 0)
        fprintf(f, "%9s %7s %16s %11s %10s %10s %11s\n", "iteration", "nfev", "cost",
                "step norm", "damping", "gain ratio", "optimality");
    if (it->iteration == 0) snprintf(step, sizeof step, "-");
    else snprintf(step, sizeof step, "%.3e", it->step_norm);
    if (isnan(it->gain_ratio)) snprintf(gain, sizeof gain, "-");
    else snprintf(gain, sizeof gain, "%.3g", it->gain_ratio);
    fprintf(f, "%9zu %7zu %16.9e %11s %10.3e %10s %11.3e%s\n", it->iteration, it->nfev, it->cost,
            step, it->damping, gain, it->optimality,
            it->iteration == 0 || it->accepted ? "" : "  rejected");
    fflush(f);
}

int jf_cmd_fit(int argc, char **argv) {
    fit_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != 0) return rc < 0 ? 0 : rc;

    jf_datafile *df = NULL;
    jf_model *m = NULL;
    jf_table t;
    jf_fit_result *res = NULL;
    char *err = NULL, *fit_err = NULL;
    double *p0 = NULL, *lo = NULL, *hi = NULL;
    memset(&t, 0, sizeof t);
    rc = 1;

    double t0 = now_ms();
    if (jf_datafile_open(a.data, &df, &err) != 0) {
        jf_cli_error("%s", err ? err : "out of memory");
        goto done;
    }
    double time_read = now_ms() - t0;

    t0 = now_ms();
    m = load_model(&a, df);
    double time_model = now_ms() - t0;
    if (!m) goto done;
    size_t np = jf_model_num_params(m), nv = jf_model_num_vars(m);
    const char *resp = a.ycol ? a.ycol : jf_model_response_name(m);
    for (size_t j = 0; j < nv; j++)
        if (strcmp(jf_model_var_name(m, j), resp) == 0 ||
            (a.sigma && strcmp(jf_model_var_name(m, j), a.sigma) == 0)) {
            rc = usage_error("column '%s' is a variable of the model; it cannot be the %s",
                             jf_model_var_name(m, j),
                             strcmp(jf_model_var_name(m, j), resp) == 0 ? "response" : "sigma");
            goto done;
        }
    if (a.sigma && strcmp(a.sigma, resp) == 0) {
        rc = usage_error("--sigma: column '%s' is the response", a.sigma);
        goto done;
    }

    /* Variables, response, sigma: adjacent columns of one block, which is exactly jf_data's
     * layout, so the solver reads the parsed numbers in place. */
    const char **names = malloc((nv + 2) * sizeof *names);
    if (!names) {
        jf_cli_error("out of memory");
        goto done;
    }
    for (size_t j = 0; j < nv; j++) names[j] = jf_model_var_name(m, j);
    names[nv] = resp;
    if (a.sigma) names[nv + 1] = a.sigma;
    t0 = now_ms();
    int st = jf_datafile_read(df, names, nv + 1 + (a.sigma != NULL), &t, &err);
    free(names);
    time_read += now_ms() - t0;
    if (st != 0) {
        jf_cli_error("%s", err ? err : "out of memory");
        goto done;
    }
    /* The text can be as large as the data ten times over; release it before fitting. */
    free(df->text);
    df->text = NULL;
    df->len = 0;

    if (t.nrows <= np) {
        jf_cli_error("%s: %zu data row%s for %zu parameter%s: a fit needs more rows than "
                     "parameters",
                     df->path, t.nrows, t.nrows == 1 ? "" : "s", np, np == 1 ? "" : "s");
        goto done;
    }
    const double *sigma = a.sigma ? t.values + (nv + 1) * t.ld : NULL;
    for (size_t i = 0; sigma && i < t.nrows; i++)
        if (!(sigma[i] > 0)) {
            char v[64];
            jf_cli_format_double(v, sizeof v, sigma[i]);
            jf_cli_error("%s:%zu: column %zu ('%s'): sigma must be positive, found %s", df->path,
                         jf_table_line(&t, i), t.file_col[nv + 1] + 1, a.sigma, v);
            goto done;
        }

    p0 = malloc((np + 1) * sizeof *p0);
    lo = malloc((np + 1) * sizeof *lo);
    hi = malloc((np + 1) * sizeof *hi);
    if (!p0 || !lo || !hi) {
        jf_cli_error("out of memory");
        goto done;
    }
    for (size_t k = 0; k < np; k++) {
        p0[k] = jf_model_param_initial(m, k);
        jf_model_param_bounds(m, k, &lo[k], &hi[k]);
    }
    if (a.p0 && jf_cli_assign_by_name(m, 0, a.p0, "--p0", p0, NULL) != 0) {
        usage_hint();
        rc = 2;
        goto done;
    }
    if (a.bounds && (rc = apply_bounds(m, a.bounds, lo, hi)) != 0) goto done;
    rc = 1;
    for (size_t k = 0; k < np; k++) {
        const char *name = jf_model_param_name(m, k);
        int declared = !isnan(p0[k]);
        if (!declared) p0[k] = 1; /* scipy curve_fit's default start */
        char sl[64], sh[64], sv[64];
        jf_cli_format_double(sl, sizeof sl, lo[k]);
        jf_cli_format_double(sh, sizeof sh, hi[k]);
        jf_cli_format_double(sv, sizeof sv, p0[k]);
        if (!isfinite(p0[k])) {
            jf_cli_error("parameter '%s': the starting value %s is not finite", name, sv);
            goto done;
        }
        if (!(lo[k] < hi[k])) {
            jf_cli_error("parameter '%s': the lower bound %s is not below the upper bound %s",
                         name, sl, sh);
            goto done;
        }
        if (p0[k] < lo[k] || p0[k] > hi[k]) {
            if (declared)
                jf_cli_error("parameter '%s': the starting value %s is outside its bounds "
                             "[%s, %s]",
                             name, sv, sl, sh);
            else
                jf_cli_error("parameter '%s' has no starting value and the default 1 is outside "
                             "its bounds [%s, %s]; give one with --p0 %s=VALUE",
                             name, sl, sh, name);
            goto done;
        }
    }

    a.opts.p0 = p0;
    a.opts.lower = lo;
    a.opts.upper = hi;
    if (a.verbose) {
        a.opts.progress = print_progress;
        a.opts.progress_ctx = stderr;
    }
    jf_data d;
    d.n = t.nrows;
    d.x = nv ? t.values : NULL;
    d.ldx = t.ld;
    d.y = t.values + nv * t.ld;
    d.sigma = sigma;
    st = jf_fit(m, &d, &a.opts, &res, &fit_err);
    if (st != JF_OK) {
        jf_cli_error("%s", fit_err ? fit_err : jf_status_string(st));
        goto done;
    }

    jf_report r;
    memset(&r, 0, sizeof r);
    r.model = m;
    r.result = res;
    r.p0 = p0;
    r.model_name = a.model;
    r.data_name = a.data;
    r.response = resp;
    r.sigma = a.sigma;
    r.absolute_sigma = a.opts.absolute_sigma;
    r.loss = a.opts.loss;
    r.f_scale = a.opts.f_scale;
    r.time_read_ms = time_read;
    r.time_model_ms = time_model;
    if (a.json) jf_report_json(stdout, &r);
    else jf_report_text(stdout, &r);
    fflush(stdout);
    if (res->success) rc = 0;
    else jf_cli_error("the fit did not converge: %s", res->message ? res->message : "");

done:
    free(err);
    jf_free(fit_err);
    free(p0);
    free(lo);
    free(hi);
    jf_fit_result_free(res);
    jf_table_free(&t);
    jf_model_free(m);
    jf_datafile_free(df);
    return rc;
}
