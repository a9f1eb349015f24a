/* Job file reader (see job.h). Two passes: inih collects every (section, key, value, line)
 * entry, then the entries are applied to one spec per fit — [defaults] first — so an entry in
 * [defaults] that comes after a fit section still applies to it, as in Python's configparser. */
#include "job.h"

#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Longest job-file line accepted. */
#define JOB_MAX_LINE 4096

/* One key = value line (continuation lines already joined with '\n'). */
typedef struct entry {
    char *section; /* section name as written ("defaults", "fit damped"; "" before any) */
    char *key;     /* key as written */
    char *value;   /* value, continuation lines joined */
    size_t line;   /* line of the key */
} entry;

/* State shared by the line reader and the handler. */
typedef struct reader {
    FILE *f;           /* the job file */
    const char *path;  /* its name, for messages */
    size_t line;       /* number of the line inih is handling now */
    int continuation;  /* 1 when that line starts with a blank (a continued value) */
    int too_long;      /* line number of a line over JOB_MAX_LINE, or 0 */
    entry *e;          /* entries so far */
    size_t n, cap;     /* count and capacity of e */
    int errors;        /* errors printed so far */
    int nomem;         /* an allocation failed */
} reader;

/* inih's line source: fgets that counts lines and notes continuation lines. */
static char *read_line(char *str, int num, void *stream) {
    reader *r = stream;
    int limit = num < JOB_MAX_LINE ? num : JOB_MAX_LINE;
    if (!fgets(str, limit, r->f)) return NULL;
    r->line++;
    size_t len = strlen(str);
    if (len && str[len - 1] != '\n' && !feof(r->f)) {
        /* Swallow the rest of the line and report it once: inih would read it as a new line. */
        int ch;
        while ((ch = fgetc(r->f)) != EOF && ch != '\n') {
        }
        if (!r->too_long) r->too_long = (int)r->line;
        str[0] = '\0';
    }
    r->continuation = str[0] == ' ' || str[0] == '\t';
    return str;
}

static int handler(void *user, const char *section, const char *name, const char *value) {
    reader *r = user;
    if (r->continuation && r->n && strcmp(r->e[r->n - 1].key, name) == 0) {
        entry *last = &r->e[r->n - 1];
        size_t a = strlen(last->value), b = strlen(value);
        char *nv = realloc(last->value, a + b + 2);
        if (!nv) {
            r->nomem = 1;
            return 0;
        }
        nv[a] = '\n';
        memcpy(nv + a + 1, value, b + 1);
        last->value = nv;
        return 1;
    }
    if (r->n == r->cap) {
        size_t nc = r->cap ? 2 * r->cap : 32;
        entry *ne = realloc(r->e, nc * sizeof *ne);
        if (!ne) {
            r->nomem = 1;
            return 0;
        }
        r->e = ne;
        r->cap = nc;
    }
    entry *e = &r->e[r->n];
    e->section = strdup(section);
    e->key = strdup(name);
    e->value = strdup(value ? value : "");
    e->line = r->line;
    if (!e->section || !e->key || !e->value) {
        free(e->section);
        free(e->key);
        free(e->value);
        r->nomem = 1;
        return 0;
    }
    r->n++;
    return 1;
}

/* Edit distance, for "did you mean". */
static size_t distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b), d[64];
    if (lb >= 63 || la >= 63) return 99;
    for (size_t j = 0; j <= lb; j++) d[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t prev = d[0];
        d[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t t = d[j];
            size_t best = prev + (a[i - 1] != b[j - 1]);
            if (d[j] + 1 < best) best = d[j] + 1;
            if (d[j - 1] + 1 < best) best = d[j - 1] + 1;
            d[j] = best;
            prev = t;
        }
    }
    return d[lb];
}

static void unknown_key(const char *path, const entry *e) {
    const char *best = NULL;
    size_t bd = 3;
    for (size_t i = 0; jf_spec_keys[i]; i++) {
        size_t d = distance(e->key, jf_spec_keys[i]);
        if (d < bd) bd = d, best = jf_spec_keys[i];
    }
    if (best)
        fprintf(stderr, "jitfit: %s:%zu: unknown key '%s' (did you mean '%s'?)\n", path, e->line,
                e->key, best);
    else
        fprintf(stderr, "jitfit: %s:%zu: unknown key '%s' (keys: see `jitfit help run`)\n", path,
                e->line, e->key);
}

/* Keys that may be given several times in one section (they accumulate). */
static int repeatable(const char *key) {
    return strcmp(key, "p0") == 0 || strcmp(key, "bounds") == 0 || strncmp(key, "param ", 6) == 0;
}

/* Applies the entries of one section to s. Returns the number of errors printed. */
static int apply(reader *r, const char *section, jf_spec *s, const char *base) {
    int errors = 0;
    for (size_t i = 0; i < r->n; i++) {
        const entry *e = &r->e[i];
        if (strcmp(e->section, section) != 0) continue;
        for (size_t j = 0; j < i; j++)
            if (strcmp(r->e[j].section, section) == 0 && strcmp(r->e[j].key, e->key) == 0 &&
                !repeatable(e->key)) {
                fprintf(stderr, "jitfit: %s:%zu: '%s' is given twice in [%s] (first on line %zu)\n",
                        r->path, e->line, e->key, section, r->e[j].line);
                errors++;
            }
        char origin[4200], *msg = NULL;
        snprintf(origin, sizeof origin, "%s:%zu", r->path, e->line);
        jf_spec_rc rc = jf_spec_set(s, e->key, e->value, origin, base, &msg);
        if (rc == JF_SPEC_UNKNOWN) {
            unknown_key(r->path, e);
            errors++;
        } else if (rc == JF_SPEC_BAD) {
            fprintf(stderr, "jitfit: %s: %s: %s\n", origin, e->key, msg);
            errors++;
        } else if (rc == JF_SPEC_NOMEM) {
            r->nomem = 1;
            errors++;
        }
        free(msg);
    }
    return errors;
}

void jf_job_free(jf_job *job) {
    for (size_t i = 0; i < job->nfits; i++) jf_spec_free(&job->fits[i]);
    free(job->fits);
    free(job->lines);
    free(job->path);
    memset(job, 0, sizeof *job);
}

/* The line of the first entry of a section, or of the section header as best known. */
static size_t section_line(const reader *r, const char *section) {
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->e[i].section, section) == 0) return r->e[i].line;
    return 0;
}

int jf_job_read(const char *path, jf_job *job) {
    memset(job, 0, sizeof *job);
    reader r;
    memset(&r, 0, sizeof r);
    r.path = path;
    r.f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!r.f) {
        jf_cli_error("%s: %s", path, strerror(errno));
        return 1;
    }
    int bad_line = ini_parse_stream(read_line, &r, handler, &r);
    if (r.f != stdin) fclose(r.f);
    int errors = 0;
    if (r.nomem || bad_line == -2) {
        jf_cli_error("out of memory");
        errors++;
    } else if (r.too_long) {
        fprintf(stderr, "jitfit: %s:%d: line longer than %d characters\n", path, r.too_long,
                JOB_MAX_LINE - 2);
        errors++;
    } else if (bad_line > 0) {
        fprintf(stderr, "jitfit: %s:%d: syntax error: expected [section], key = value, or a "
                        "comment\n",
                path, bad_line);
        errors++;
    }
    /* The directory relative paths are resolved against. */
    char *base = NULL;
    const char *slash = strrchr(path, '/');
    if (slash) base = strndup(path, (size_t)(slash - path + (slash == path)));
    /* Sections, in order of first appearance. */
    for (size_t i = 0; i < r.n && !errors; i++) {
        const char *sec = r.e[i].section;
        int seen = 0;
        for (size_t j = 0; j < i; j++) seen |= strcmp(r.e[j].section, sec) == 0;
        if (seen || *sec == '\0' || strcmp(sec, "defaults") == 0) continue;
        if (strncmp(sec, "fit ", 4) != 0 || !sec[4]) {
            fprintf(stderr, "jitfit: %s:%zu: unknown section [%s] (use [defaults] or "
                            "[fit NAME])\n",
                    path, r.e[i].line, sec);
            errors++;
            continue;
        }
        jf_spec *nf = realloc(job->fits, (job->nfits + 1) * sizeof *nf);
        size_t *nl = nf ? realloc(job->lines, (job->nfits + 1) * sizeof *nl) : NULL;
        if (nf) job->fits = nf;
        if (!nf || !nl) {
            jf_cli_error("out of memory");
            errors++;
            break;
        }
        job->lines = nl;
        jf_spec *s = &job->fits[job->nfits];
        jf_spec_init(s);
        job->lines[job->nfits] = section_line(&r, sec);
        job->nfits++;
        const char *name = sec + 4;
        while (*name == ' ') name++;
        s->name = strdup(name);
        for (size_t j = 0; j + 1 < job->nfits; j++)
            if (strcmp(job->fits[j].name, name) == 0) {
                fprintf(stderr, "jitfit: %s:%zu: a second [fit %s]: fit names must differ\n",
                        path, r.e[i].line, name);
                errors++;
            }
        errors += apply(&r, "", s, base);
        errors += apply(&r, "defaults", s, base);
        errors += apply(&r, sec, s, base);
        if (!errors && (!s->model || !s->data))
            fprintf(stderr, "jitfit: %s:%zu: [fit %s] needs %s\n", path, r.e[i].line, name,
                    !s->model && !s->data ? "a model and data"
                    : !s->model           ? "a model"
                                          : "data"),
                errors++;
    }
    if (!errors && job->nfits == 0) {
        fprintf(stderr, "jitfit: %s: no [fit NAME] sections: nothing to run\n", path);
        errors++;
    }
    free(base);
    for (size_t i = 0; i < r.n; i++) {
        free(r.e[i].section);
        free(r.e[i].key);
        free(r.e[i].value);
    }
    free(r.e);
    if (errors) {
        jf_job_free(job);
        return 1;
    }
    job->path = strdup(path);
    return 0;
}
