/* `jitfit run JOB [options]`: every fit of a job file (job.c), in one process.
 *
 * One process matters: the kernels of a model compiled for the first fit sit in the library's
 * in-memory cache, so a later fit of the same model gets them in microseconds (the summary's
 * cache column shows "memory"). Command-line options are applied to every fit after the file's
 * settings, so they override it. The summary table at the end has one row per fit: name,
 * status, cost, nfev, time and where the kernels came from. Exit status: 0 when every fit
 * converged, 1 when any failed or did not converge, 2 for usage or job-file errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "fitrun.h"
#include "help.h"
#include "job.h"
#include "report.h"
#include "spec.h"
#include "util.h"

/* The summary line of one fit. */
static void summary_row(FILE *f, const char *name, const jf_run_summary *s, int rc) {
    char cost[32], status[48], fits[52];
    if (!s->ran) {
        fprintf(f, "  %-16s %-14s %14s %7s %10.1f  %s\n", name, rc == 2 ? "setting error" : "error",
                "-", "-", s->time_ms, "-");
        return;
    }
    snprintf(cost, sizeof cost, "%.6g", s->cost);
    if (s->status >= 0) snprintf(status, sizeof status, "%s", jf_report_status_name(s->status));
    else snprintf(status, sizeof status, "%zu/%zu conv.", s->nconverged, s->nfits);
    /* '!': this fit makes the exit status 1, whether it did not converge or converged and then
     * could not write its --output or --plot (its report shows a converged fit) */
    snprintf(fits, sizeof fits, "%s%s", status, s->success && rc == 0 ? "" : "!");
    fprintf(f, "  %-16s %-14s %14s %7zu %10.1f  %s\n", name, fits, cost, s->nfev, s->time_ms,
            jf_report_cache_name(s->cache));
}

/* --only's list without the blanks around its names ("a, b" is "a,b": fit names have none
 * either); NULL when out of memory. */
static char *trim_names(const char *list) {
    char *out = malloc(strlen(list) + 1), *o = out;
    if (!out) return NULL;
    for (const char *p = list;;) {
        size_t l = strcspn(p, ",");
        const char *b = p, *e = p + l;
        while (b < e && (*b == ' ' || *b == '\t')) b++;
        while (e > b && (e[-1] == ' ' || e[-1] == '\t')) e--;
        memcpy(o, b, (size_t)(e - b));
        o += e - b;
        if (!p[l]) break;
        *o++ = ',';
        p += l + 1;
    }
    *o = '\0';
    return out;
}

/* 1 when fit name is selected by --only's comma-separated list (every fit without one). */
static int selected(const char *only, const char *name) {
    if (!only) return 1;
    size_t nl = strlen(name);
    for (const char *p = only; *p;) {
        size_t l = strcspn(p, ",");
        if (l == nl && strncmp(p, name, l) == 0) return 1;
        p += l + (p[l] == ',');
    }
    return 0;
}

/* The files of one fit as jf_spec_same_file compares them (jf_spec_file: inode, canonical
 * path): what it reads, then what it writes. */
enum { DATA, P0_FILE, MODEL, OUTPUT, PLOT, NFILES };

static int same(const jf_spec_file *a, int i, const jf_spec_file *b, int j) {
    return jf_spec_file_same(&a[i], &b[j]);
}

/* Standard input can be read once: a fit's data or p0 file '-' finds it empty when the job
 * file was read from it (`jitfit run -`), or when a fit before it read it ("<stdin>: no data
 * rows" either way). Refused before any fit runs, for the fits --only selects; a fit whose data
 * and p0 file are both '-' is jf_spec_check's. 0 or 2. */
static int check_stdin(const jf_job *job, const char *only) {
    int rc = 0, job_stdin = strcmp(job->path, "-") == 0;
    size_t first = job->nfits; /* the first fit that reads standard input */
    for (size_t k = 0; k < job->nfits; k++) {
        const jf_spec *s = &job->fits[k];
        if (!selected(only, s->name)) continue;
        const char *key = s->data && strcmp(s->data, "-") == 0 ? "data"
                          : s->p0_file && strcmp(s->p0_file, "-") == 0 ? "p0_file"
                                                                        : NULL;
        if (!key) continue;
        if (job_stdin) {
            jf_cli_error("%s:%zu: [fit %s]: %s '-' reads standard input, but the job file was "
                         "read from it: name a file instead",
                         job->path, job->lines[k], s->name, key);
            rc = 2;
        } else if (first < k) {
            jf_cli_error("%s:%zu: [fit %s]: %s '-' reads standard input, as [fit %s] (line %zu) "
                         "does: it can be read only once; name a file instead",
                         job->path, job->lines[k], s->name, key, job->fits[first].name,
                         job->lines[first]);
            rc = 2;
        } else {
            first = k;
        }
    }
    return rc;
}

/* The checks that need a fit's settings together, files two fits would both write, and a
 * file a fit writes that another fit reads (its data or p0 file, whether or not --only selects
 * that fit: it is the user's file all the same): before any fit runs, with the job file's line
 * of each fit. The files are identified once per fit (jf_spec_file_id), so a job of many fits
 * costs comparisons, not realpath and stat calls, per pair. 0, 1 (out of memory) or 2. */
static int check_fits(const jf_job *job, const char *only) {
    int rc = 0;
    static const char *const what[NFILES] = {"data", "p0", "model", "output", "plot"};
    jf_spec_file *ids = calloc(job->nfits * NFILES + 1, sizeof *ids);
    if (!ids) {
        jf_cli_error("out of memory");
        return 1;
    }
    for (size_t k = 0; k < job->nfits; k++) {
        const jf_spec *s = &job->fits[k];
        const char *files[NFILES] = {s->data, s->p0_file, jf_spec_model_file(s), s->output,
                                     s->plot};
        for (int f = 0; f < NFILES; f++)
            if (jf_spec_file_id(files[f], &ids[k * NFILES + f]) != 0) rc = 1;
    }
    if (rc) jf_cli_error("out of memory");
    for (size_t k = 0; rc != 1 && k < job->nfits; k++) {
        const jf_spec *s = &job->fits[k];
        if (!selected(only, s->name)) continue;
        char *why = NULL;
        if (jf_spec_check(s, &why)) {
            jf_cli_error("%s:%zu: [fit %s]: %s", job->path, job->lines[k], s->name,
                         why ? why : "out of memory");
            rc = 2;
        }
        free(why);
        const jf_spec_file *mine = ids + k * NFILES;
        /* the job file itself (read already, but it is the user's file all the same) */
        for (int a = OUTPUT; strcmp(job->path, "-") != 0 && a <= PLOT; a++) {
            const char *w = a == OUTPUT ? s->output : s->plot;
            if (w && jf_spec_same_file(w, job->path)) {
                jf_cli_error("%s:%zu: [fit %s] writes %s, the job file: it would be overwritten",
                             job->path, job->lines[k], s->name, w);
                rc = 2;
            }
        }
        for (size_t j = 0; j < job->nfits; j++) {
            const jf_spec *t = &job->fits[j];
            const jf_spec_file *theirs = ids + j * NFILES;
            if (j == k) continue;
            for (int a = OUTPUT; a <= PLOT; a++)
                for (int b = DATA; b <= MODEL; b++)
                    if (same(mine, a, theirs, b)) {
                        jf_cli_error("%s:%zu: [fit %s] writes %s, the %s file of [fit %s] (line "
                                     "%zu): it would be overwritten",
                                     job->path, job->lines[k], s->name,
                                     a == OUTPUT ? s->output : s->plot, what[b], t->name,
                                     job->lines[j]);
                        rc = 2;
                    }
            if (j > k || !selected(only, t->name)) continue; /* each pair once */
            for (int a = OUTPUT; a <= PLOT; a++)
                for (int b = OUTPUT; b <= PLOT; b++)
                    if (same(mine, a, theirs, b)) {
                        jf_cli_error("%s:%zu: [fit %s] and [fit %s] (line %zu) both write %s: "
                                     "give each fit its own file",
                                     job->path, job->lines[k], s->name, t->name, job->lines[j],
                                     a == OUTPUT ? s->output : s->plot);
                        rc = 2;
                    }
        }
    }
    for (size_t i = 0; i < job->nfits * NFILES; i++) jf_spec_file_free(&ids[i]);
    free(ids);
    return rc ? rc : check_stdin(job, only);
}

int jf_cmd_run(int argc, char **argv) {
    const char *path = NULL, *only = NULL;
    int options = 1, rc = 0, from_option = 0;
    /* Options are validated once here on a scratch spec, then replayed onto every fit. */
    jf_spec scratch;
    jf_spec_init(&scratch);
    jf_run_set_job_mode();
    jf_cli_note_error(""); /* a job that cannot start reports its first error */
    int *optidx = calloc((size_t)argc + 1, sizeof *optidx), nopt = 0;
    if (!optidx) {
        jf_cli_error("out of memory");
        return 1;
    }
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *arg = argv[i];
        if (!options || arg[0] != '-' || arg[1] == '\0') {
            if (!path) path = arg;
            else {
                jf_cli_error("run: unexpected argument '%s'", arg);
                rc = 2;
            }
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            options = 0;
            continue;
        }
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            jf_help_print(stdout, "run");
            jf_spec_free(&scratch);
            free(optidx);
            return 0;
        }
        if (strcmp(arg, "--only") == 0 || strncmp(arg, "--only=", 7) == 0) {
            if (arg[6] == '=') only = arg + 7;
            else if (i + 1 < argc) only = argv[++i];
            else {
                jf_cli_error("run: option --only needs a value");
                rc = 2;
            }
            continue;
        }
        optidx[nopt++] = i;
        rc = jf_cli_parse_option(argc, argv, &i, &scratch, "run");
        from_option = rc != 0; /* its message came with the usage line */
    }
    if (rc == 0 && !path) {
        jf_cli_error("run: expected a job file");
        rc = 2;
    }
    if (rc != 0) {
        if (!from_option) jf_run_usage_hint();
        /* with --json, stdout gets the JSON object of a job that could not start */
        if (jf_cli_wants_json(argc, argv, NULL))
            jf_run_json_error(stdout, NULL, jf_cli_first_error());
        jf_spec_free(&scratch);
        free(optidx);
        return rc;
    }
    int json = scratch.json;
    jf_spec_free(&scratch);

    jf_job job;
    if (jf_job_read(path, &job) != 0) {
        if (json) jf_run_json_error(stdout, NULL, jf_cli_first_error());
        free(optidx);
        return 2;
    }
    /* Replay the command-line options onto each fit: they win over the file. */
    for (size_t k = 0; k < job.nfits && rc == 0; k++)
        for (int j = 0; j < nopt && rc == 0; j++) {
            int i = optidx[j];
            rc = jf_cli_parse_option(argc, argv, &i, &job.fits[k], "run");
        }
    /* Several fits' CSV on one standard output (next to the report) could not be told apart. */
    for (size_t k = 0; k < job.nfits && rc == 0; k++)
        if (job.fits[k].output && strcmp(job.fits[k].output, "-") == 0) {
            jf_cli_error("%s: [fit %s]: output '-' (standard output) is for jitfit fit; give "
                         "each fit of a job a file",
                         path, job.fits[k].name);
            rc = 2;
        }
    char *only_trimmed = NULL;
    if (rc == 0 && only) {
        if (!(only_trimmed = trim_names(only))) {
            jf_cli_error("out of memory");
            rc = 1;
        }
        only = only_trimmed;
    }
    if (rc == 0 && only && !only[strspn(only, ",")]) {
        jf_cli_error("run: --only needs the names of fits");
        rc = 2;
    }
    if (rc == 0 && only) {
        /* Every name in --only must exist: a typo should not silently run nothing. */
        char *list = strdup(only), *save = NULL;
        for (char *tok = list ? strtok_r(list, ",", &save) : NULL; tok;
             tok = strtok_r(NULL, ",", &save)) {
            int found = 0;
            for (size_t k = 0; k < job.nfits; k++) found |= strcmp(job.fits[k].name, tok) == 0;
            if (!found) {
                jf_cli_error("run: --only: %s has no [fit %s]", path, tok);
                rc = 2;
            }
        }
        free(list);
    }
    /* `json = true` in the file makes the whole run JSON (an array, no text summary after
     * it), every fit of it included: one output, one format; and an error before any fit
     * runs one JSON object */
    for (size_t k = 0; k < job.nfits; k++)
        if (selected(only, job.fits[k].name)) json |= job.fits[k].json;
    if (rc == 0) rc = check_fits(&job, only);
    for (size_t k = 0; rc == 0 && json && k < job.nfits; k++) job.fits[k].json = 1;
    jf_run_summary *sums = rc == 0 ? calloc(job.nfits, sizeof *sums) : NULL;
    int *rcs = rc == 0 ? calloc(job.nfits, sizeof *rcs) : NULL;
    char **ran = rc == 0 ? calloc(job.nfits, sizeof *ran) : NULL;
    if (rc == 0 && (!sums || !rcs || !ran)) {
        jf_cli_error("out of memory");
        rc = 1;
    }
    int any_failed = 0, first = 1;
    size_t nrun = 0;
    if (rc == 0 && json) fputs("[\n", stdout);
    for (size_t k = 0; rc == 0 && k < job.nfits; k++) {
        jf_spec *s = &job.fits[k];
        if (!selected(only, s->name)) continue;
        if (json && !first) fputs(",\n", stdout);
        if (!json && !first) fputs("\n", stdout);
        first = 0;
        fflush(stdout);
        if (json) {
            /* A fit that fails before printing its object still gets one, so the output stays
             * one JSON array with every fit in it. */
            rcs[nrun] = jf_run_spec_json(s, stdout, &sums[nrun]);
        } else {
            rcs[nrun] = jf_run_spec(s, stdout, &sums[nrun]);
        }
        ran[nrun] = s->name;
        if (rcs[nrun] > any_failed) any_failed = rcs[nrun];
        nrun++;
    }
    if (rc == 0 && json) fputs("]\n", stdout);
    if (rc == 0 && !json) {
        printf("\nsummary of %s: %zu fit%s\n", path, nrun, nrun == 1 ? "" : "s");
        printf("  %-16s %-14s %14s %7s %10s  %s\n", "name", "status", "cost", "nfev", "time (ms)",
               "cache");
        for (size_t k = 0; k < nrun; k++) summary_row(stdout, ran[k], &sums[k], rcs[k]);
    }
    fflush(stdout);
    free(sums);
    free(rcs);
    free(ran);
    free(optidx);
    free(only_trimmed);
    jf_job_free(&job);
    if (rc && json) jf_run_json_error(stdout, NULL, jf_cli_first_error());
    if (rc) return rc;
    return any_failed; /* 2 when a setting was wrong, else 1 when a fit failed */
}
