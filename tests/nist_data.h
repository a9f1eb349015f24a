/* The NIST StRD problems of tests/data/nist for the tests that fit them (test_nist, test_gpu):
 * the .dat parser and the loop over models.tsv. Header-only: each test is one executable.
 * Format notes in test_nist.c. */
#ifndef JF_TESTS_NIST_DATA_H
#define JF_TESTS_NIST_DATA_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/jitfit.h"
#include "tests/testlib.h"

#define MAXP 8
#define MAXN 512
#define LINE 1024

/* One certified problem as parsed from its .dat file. */
typedef struct problem {
    char name[32];        /* e.g. "MGH09" */
    char formula[256];    /* from models.tsv */
    int log_response;     /* 1: the model predicts log(y) */
    size_t np;            /* parameters */
    size_t nv;            /* predictors */
    double start[2][MAXP]; /* start 1 and start 2 */
    double cert[MAXP];    /* certified values */
    double cert_sd[MAXP]; /* certified standard deviations */
    double cert_rss;      /* certified residual sum of squares */
    size_t n;             /* observations */
    double x[2 * MAXN];   /* predictors, column-major */
    double y[MAXN];       /* responses (log taken when log_response) */
} problem;

static inline double lre(double est, double cert) {
    if (est == cert) return 11.0;
    if (!isfinite(est)) return 0.0;
    double v = cert != 0 ? -log10(fabs(est - cert) / fabs(cert)) : -log10(fabs(est));
    if (!(v > 0)) return 0.0;
    return v > 11 ? 11 : v;
}

static inline void chomp(char *s) {
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r')) s[--n] = 0;
}

/* Parses dir/name.dat into p (np, nv and log_response already set). */
static inline int parse_dat(const char *dir, problem *p) {
    char path[600], line[LINE];
    snprintf(path, sizeof path, "%s/%s.dat", dir, p->name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return -1;
    }
    int ln = 0, last = 0;
    size_t got = 0;
    p->n = 0;
    p->cert_rss = NAN;
    while (fgets(line, sizeof line, f)) {
        ln++;
        chomp(line);
        const char *d = strstr(line, "Data");
        if (ln < 41 && d && strstr(line, "(lines")) sscanf(strstr(line, "(lines"), "(lines %*d to %d)", &last);
        if (ln >= 41 && ln < 41 + (int)p->np) {
            const char *eq = strchr(line, '=');
            if (eq && sscanf(eq + 1, "%lf %lf %lf %lf", &p->start[0][got], &p->start[1][got],
                             &p->cert[got], &p->cert_sd[got]) == 4)
                got++;
        }
        if (ln > 40 && ln < 61 && strncmp(line, "Residual Sum of Squares:", 24) == 0)
            p->cert_rss = strtod(line + 24, NULL);
        if (ln >= 61 && ln <= last && p->n < MAXN) {
            double v[3];
            int k = sscanf(line, "%lf %lf %lf", &v[0], &v[1], &v[2]);
            if (k == (int)p->nv + 1) {
                p->y[p->n] = p->log_response ? log(v[0]) : v[0];
                for (size_t j = 0; j < p->nv; j++) p->x[j * MAXN + p->n] = v[1 + j];
                p->n++;
            }
        }
    }
    fclose(f);
    if (got != p->np || p->n == 0 || isnan(p->cert_rss) || (int)p->n != last - 60) {
        fprintf(stderr, "%s: malformed .dat (%zu parameters, %zu points)\n", p->name, got, p->n);
        return -1;
    }
    return 0;
}

/* Opens the repository's tests/data/nist/models.tsv; dir (n bytes) receives its directory for
 * nist_next. NULL when it cannot be read. */
static inline FILE *nist_open(char *dir, size_t n) {
    char path[700];
    snprintf(dir, n, "%s/tests/data/nist", JF_SOURCE_DIR);
    snprintf(path, sizeof path, "%s/models.tsv", dir);
    return fopen(path, "rb");
}

/* Reads the next problem of models.tsv (open as tsv, directory dir) into p, compiles its model
 * and maps b1..bp to the model's parameter indices idx. Returns the model (caller frees), or
 * NULL at the end of the file; problems that fail to parse or compile are failed checks and
 * skipped. */
static inline jf_model *nist_next(FILE *tsv, const char *dir, problem *p, long idx[MAXP]) {
    char line[LINE];
    while (fgets(line, sizeof line, tsv)) {
        chomp(line);
        if (strncmp(line, "name\t", 5) == 0 || !line[0]) continue;
        char difficulty[32], response[32];
        int np = 0;
        memset(p, 0, sizeof *p);
        if (sscanf(line, "%31[^\t]\t%31[^\t]\t%d\t%31[^\t]\t%255[^\n]", p->name, difficulty, &np,
                   response, p->formula) != 5 ||
            np < 1 || np > MAXP) {
            CHECK(!"malformed models.tsv line");
            continue;
        }
        p->np = (size_t)np;
        p->log_response = strcmp(response, "log(y)") == 0;
        p->nv = strstr(p->formula, "x2") ? 2 : 1;
        if (parse_dat(dir, p) != 0) {
            CHECK(!"cannot parse a NIST .dat file");
            continue;
        }
        static const char *const vars2[] = {"x1", "x2"};
        static const char *const vars1[] = {"x"};
        jf_model_options mo = jf_model_options_default();
        mo.source_name = p->name;
        mo.vars = p->nv == 2 ? vars2 : vars1;
        mo.nvars = p->nv;
        jf_model *m = NULL;
        jf_diagnostics *diags = NULL;
        if (jf_model_compile(p->formula, (size_t)-1, &mo, &m, &diags) != JF_OK) {
            fprintf(stderr, "%s: %s\n", p->name, jf_diagnostics_text(diags));
            jf_diagnostics_free(diags);
            CHECK(!"a NIST model does not compile");
            continue;
        }
        jf_diagnostics_free(diags);
        int mapped = jf_model_num_params(m) == p->np;
        for (size_t k = 0; k < p->np && mapped; k++) {
            char nm[24];
            snprintf(nm, sizeof nm, "b%zu", k + 1);
            idx[k] = jf_model_param_index(m, nm);
            if (idx[k] < 0) mapped = 0;
        }
        if (!CHECK(mapped)) {
            jf_model_free(m);
            continue;
        }
        return m;
    }
    return NULL;
}

#endif
