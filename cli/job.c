/* Job file reader (see job.h). Two passes: inih collects every (section, key, value, line)
 * entry, then the entries are applied to one spec per fit — [defaults] first — so an entry in
 * [defaults] that comes after a fit section still applies to it, as in Python's configparser.
 *
 * Debian's libinih is built with a 200-byte line buffer, 50-byte section names and no call for
 * a section without keys. The line reader therefore reads whole lines itself: a line too long
 * for inih reaches it as a short stand-in whose value is kept here, and section headers are
 * recorded as they pass, so an empty [fit NAME] still exists. */
#include "job.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/text.h"
#include "util.h"

/* Longest job-file line accepted. */
#define JOB_MAX_LINE 4096
/* Longest section name inih keeps (its MAX_SECTION, 50, with the NUL). */
#define JOB_MAX_SECTION 49
/* The value inih sees for a line too long for it; the handler takes the kept one instead. */
#define LONG_VALUE "\x01"

/* One key = value line (continuation lines already joined with '\n'). */
typedef struct entry {
    char *section; /* section name as written ("defaults", "fit damped"; keys before any
                      section are stored under "defaults") */
    char *key;     /* key as written */
    char *value;   /* value, continuation lines joined */
    size_t line;   /* line of the key */
} entry;

/* One section header, as it passed. */
typedef struct header {
    char *name;  /* between the brackets */
    size_t line; /* its line */
} header;

/* State shared by the line reader and the handler. */
typedef struct reader {
    FILE *f;           /* the job file */
    const char *path;  /* its name, for messages */
    char *buf;         /* the current line, whole (getline) */
    size_t bufcap;     /* its capacity */
    size_t line;       /* number of the line inih is handling now */
    int continuation;  /* 1 when inih reads that line as a continued value: indented, under a
                          key (an indented first key of a section is a key of that section) */
    int after_key;     /* 1 when inih would read an indented line as a continuation */
    char *long_value;  /* the value of the current line when inih got a stand-in, else NULL */
    int too_long;      /* line number of a line over JOB_MAX_LINE (or a section name over
                          JOB_MAX_SECTION, or one inih cannot be given), or 0 */
    char too_long_why[96]; /* what is wrong with that line: the error names the limit hit */
    entry *e;          /* entries so far */
    size_t n, cap;     /* count and capacity of e */
    header *h;         /* section headers so far */
    size_t nh, hcap;   /* count and capacity of h */
    int read_errno;    /* errno of a failed read (EISDIR: fopen opens a directory), or 0 */
    int errors;        /* errors printed so far */
    int nomem;         /* an allocation failed */
} reader;

/* inih's find_chars_or_comment: the first of chars, or a ';' after a blank (an inline
 * comment), or the end. */
static char *find_or_comment(char *s, const char *chars) {
    int was_space = 0;
    while (*s && !(chars && strchr(chars, *s)) && !(was_space && *s == ';')) {
        was_space = isspace((unsigned char)*s);
        s++;
    }
    return s;
}

/* A value as inih makes it: cut at an inline comment, blanks stripped at both ends. */
static char *clean_value(char *v) {
    *find_or_comment(v, NULL) = '\0';
    while (isspace((unsigned char)*v)) v++;
    size_t len = strlen(v);
    while (len && isspace((unsigned char)v[len - 1])) v[--len] = '\0';
    return v;
}

static void add_header(reader *r, const char *name, size_t len) {
    if (r->nh == r->hcap) {
        size_t nc = r->hcap ? 2 * r->hcap : 16;
        header *nh = realloc(r->h, nc * sizeof *nh);
        if (!nh) {
            r->nomem = 1;
            return;
        }
        r->h = nh;
        r->hcap = nc;
    }
    char *copy = strndup(name, len);
    if (!copy) {
        r->nomem = 1;
        return;
    }
    r->h[r->nh].name = copy;
    r->h[r->nh].line = r->line;
    r->nh++;
}

/* inih's line source: the whole line is read here; inih gets it as it is when it fits its
 * buffer of num bytes, else a stand-in (a key with the value LONG_VALUE, an indented
 * LONG_VALUE for a continuation, a bare '#' for a comment) with the real value in
 * r->long_value. Section headers are recorded, and whether the next indented line continues
 * a value is tracked as inih tracks it. */
static char *read_line(char *str, int num, void *stream) {
    reader *r = stream;
    free(r->long_value);
    r->long_value = NULL;
    errno = 0;
    ssize_t got = getline(&r->buf, &r->bufcap, r->f);
    if (got < 0) {
        /* inih takes NULL for the end of the file: a failed read must not pass for one, or
         * the lines before it would run as the whole job */
        if (ferror(r->f)) r->read_errno = errno ? errno : EIO;
        return NULL;
    }
    r->line++;
    char *s = r->buf;
    size_t len = (size_t)got;
    if (r->line == 1 && strncmp(s, "\xEF\xBB\xBF", 3) == 0) s += 3, len -= 3; /* inih skips it */
    if (len && len > JOB_MAX_LINE - 2 + (s[len - 1] == '\n') && !r->too_long) {
        r->too_long = (int)r->line;
        snprintf(r->too_long_why, sizeof r->too_long_why, "line longer than %d characters",
                 JOB_MAX_LINE - 2);
    }
    int indented = s[0] == ' ' || s[0] == '\t';
    char *t = s;
    while (isspace((unsigned char)*t)) t++;
    int comment = *t == '#' || *t == ';', blank = *t == '\0';
    int continued = !comment && !blank && indented && r->after_key;
    r->continuation = continued;
    if (!comment && !blank && !continued && *t == '[') {
        char *end = find_or_comment(t + 1, "]");
        if (*end == ']') {
            if ((size_t)(end - t - 1) > JOB_MAX_SECTION && !r->too_long) {
                r->too_long = (int)r->line;
                snprintf(r->too_long_why, sizeof r->too_long_why,
                         "section name longer than %d characters", JOB_MAX_SECTION);
            }
            add_header(r, t + 1, (size_t)(end - t - 1));
        }
        r->after_key = 0;
    } else if (!comment && !blank && !continued) {
        r->after_key = 1;
    }
    if (len + 1 <= (size_t)num) {
        memcpy(str, s, len + 1);
        return str;
    }
    /* too long for inih: a stand-in, and the value kept */
    if (comment || blank) {
        snprintf(str, (size_t)num, "#\n");
    } else if (continued) {
        r->long_value = strdup(clean_value(t));
        snprintf(str, (size_t)num, " %s\n", LONG_VALUE);
    } else {
        char *sep = find_or_comment(t, "=:");
        size_t key = (size_t)(sep - s);
        if ((*sep != '=' && *sep != ':') || key + 4 > (size_t)num) {
            if (!r->too_long) { /* no stand-in can say this */
                r->too_long = (int)r->line;
                if (*sep != '=' && *sep != ':')
                    snprintf(r->too_long_why, sizeof r->too_long_why,
                             "syntax error: expected [section], key = value, or a comment");
                else
                    snprintf(r->too_long_why, sizeof r->too_long_why,
                             "key longer than %d characters", num - 4);
            }
            snprintf(str, (size_t)num, "#\n");
        } else {
            r->long_value = strdup(clean_value(sep + 1));
            snprintf(str, (size_t)num, "%.*s=%s\n", (int)key, s, LONG_VALUE);
        }
    }
    if ((continued || !(comment || blank)) && !r->long_value && !r->too_long) r->nomem = 1;
    return str;
}

static int handler(void *user, const char *section, const char *name, const char *value) {
    reader *r = user;
    if (value && r->long_value && strcmp(value, LONG_VALUE) == 0) value = r->long_value;
    if (r->continuation && r->n && strcmp(r->e[r->n - 1].key, name) == 0) {
        entry *last = &r->e[r->n - 1];
        if (strcmp(name, "model") != 0) {
            /* inih would glue it to the value ("o.csv\nftol = 1e-3" as a file name) */
            jf_cli_error("%s:%zu: an indented line continues '%s' (only a model may span "
                    "lines; start a key at the beginning of its line)",
                    r->path, r->line, name);
            r->errors++;
            return 1;
        }
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
    e->section = strdup(*section ? section : "defaults"); /* keys before any section */
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
        jf_cli_error("%s:%zu: unknown key '%s' (did you mean '%s'?)", path, e->line,
                e->key, best);
    else
        jf_cli_error("%s:%zu: unknown key '%s' (keys: see `jitfit help run`)", path,
                e->line, e->key);
}

/* Keys that may be given several times in one section (they accumulate). */
static int repeatable(const char *key) {
    return strcmp(key, "p0") == 0 || strcmp(key, "bounds") == 0 || strcmp(key, "fix") == 0 ||
           strncmp(key, "param ", 6) == 0;
}

/* The name of section "fit NAME": NAME without the blanks around it (so [fit  a] and
 * [fit a ] are fit "a", which --only selects), its length in *len. */
static const char *fit_name(const char *sec, size_t *len) {
    const char *name = sec + 4;
    while (*name == ' ' || *name == '\t') name++;
    size_t n = strlen(name);
    while (n && (name[n - 1] == ' ' || name[n - 1] == '\t')) n--;
    *len = n;
    return name;
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
                jf_cli_error("%s:%zu: '%s' is given twice in [%s] (first on line %zu)",
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
            jf_cli_error("%s: %s: %s", origin, e->key, msg);
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
    free(r.buf);
    free(r.long_value);
    int errors = r.errors;
    if (r.read_errno) {
        jf_cli_error("%s: %s", path, strerror(r.read_errno));
        errors++;
    } else if (r.nomem || bad_line == -2) {
        jf_cli_error("out of memory");
        errors++;
    } else if (r.too_long) {
        jf_cli_error("%s:%d: %s", path, r.too_long, r.too_long_why);
        errors++;
    } else if (bad_line > 0) {
        jf_cli_error("%s:%d: syntax error: expected [section], key = value, or a "
                        "comment",
                path, bad_line);
        errors++;
    }
    /* The directory relative paths are resolved against. */
    char *base = NULL;
    const char *slash = strrchr(path, '/');
    if (slash) base = strndup(path, (size_t)(slash - path + (slash == path)));
    /* The headers first: unknown sections, fit names used twice or holding a comma. */
    for (size_t i = 0; i < r.nh && !errors; i++) {
        const char *sec = r.h[i].name;
        if (strcmp(sec, "defaults") == 0) continue;
        if (strncmp(sec, "fit ", 4) != 0 || !sec[4]) {
            jf_cli_error("%s:%zu: unknown section [%s] (use [defaults] or "
                            "[fit NAME])",
                    path, r.h[i].line, sec);
            errors++;
            continue;
        }
        size_t nl;
        const char *name = fit_name(sec, &nl);
        if (!nl) {
            jf_cli_error("%s:%zu: [%s]: a fit needs a name ([fit NAME])", path, r.h[i].line,
                         sec);
            errors++;
            continue;
        }
        for (size_t j = 0; j < i; j++) {
            size_t ol = 0;
            const char *other = strncmp(r.h[j].name, "fit ", 4) == 0
                                    ? fit_name(r.h[j].name, &ol) : NULL;
            if (other && ol == nl && strncmp(other, name, nl) == 0) {
                jf_cli_error("%s:%zu: a second [fit %.*s] (the first is on line %zu): fit "
                                "names must differ",
                        path, r.h[i].line, (int)nl, name, r.h[j].line);
                errors++;
                break;
            }
        }
        char *shown = strdup(sec);
        if (shown) jf_text_printable(shown, strlen(shown), 0);
        if (shown && strcmp(shown, sec) != 0) {
            jf_cli_error("%s:%zu: a fit name cannot hold control characters (bytes below 0x20, "
                         "0x7f, or C1 controls: 0x80-0x9f outside UTF-8, U+0080-U+009F in it)",
                         path, r.h[i].line);
            errors++;
        }
        free(shown);
        if (strchr(sec, ',')) {
            jf_cli_error("%s:%zu: [%s]: a fit name cannot hold ',' (--only "
                            "separates names with commas)",
                    path, r.h[i].line, sec);
            errors++;
        }
    }
    /* Sections, in the order of their headers (a section without keys too). */
    for (size_t i = 0; i < r.nh && !errors; i++) {
        const char *sec = r.h[i].name;
        if (strcmp(sec, "defaults") == 0) continue;
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
        job->lines[job->nfits] = r.h[i].line;
        job->nfits++;
        size_t namelen;
        const char *name = fit_name(sec, &namelen);
        if (!(s->name = strndup(name, namelen))) {
            jf_cli_error("out of memory");
            errors++;
            break;
        }
        errors += apply(&r, "defaults", s, base);
        errors += apply(&r, sec, s, base);
        if (!errors && (!s->model || !s->data)) {
            jf_cli_error("%s:%zu: [fit %s] needs %s", path, r.h[i].line, s->name,
                         !s->model && !s->data ? "a model and data"
                         : !s->model           ? "a model"
                                               : "data");
            errors++;
        }
    }
    if (!errors && job->nfits == 0) {
        jf_cli_error("%s: no [fit NAME] sections: nothing to run", path);
        errors++;
    }
    free(base);
    for (size_t i = 0; i < r.n; i++) {
        free(r.e[i].section);
        free(r.e[i].key);
        free(r.e[i].value);
    }
    free(r.e);
    for (size_t i = 0; i < r.nh; i++) free(r.h[i].name);
    free(r.h);
    if (errors) {
        jf_job_free(job);
        return 1;
    }
    job->path = strdup(path);
    return 0;
}
