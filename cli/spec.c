/* Settings of a fit (see spec.h): one validator per key, shared by `jitfit fit` options and
 * job-file keys, so a value means the same and fails with the same words in both places. */
#include "spec.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

const char *const jf_spec_keys[] = {
    "model", "data", "columns", "y", "sigma", "absolute_sigma", "p0", "bounds", "param NAME",
    "fix", "loss", "f_scale", "x_scale", "ftol", "xtol", "gtol", "max_nfev", "device", "backend", "threads",
    "precision", "max_gpu_mem", "no_cache", "vector_math", "nan_policy", "group", "p0_file", "output", "plot", "json", "verbose", NULL};

void jf_spec_init(jf_spec *s) {
    memset(s, 0, sizeof *s);
    s->opts = jf_fit_options_default();
}

static void items_free(jf_spec_item *it, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(it[i].text);
        free(it[i].origin);
    }
    free(it);
}

void jf_spec_free(jf_spec *s) {
    char **strs[] = {&s->name, &s->model, &s->model_origin, &s->data, &s->columns, &s->ycol,
                     &s->sigma, &s->group, &s->p0_file, &s->output, &s->plot};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) free(*strs[i]);
    items_free(s->p0, s->np0);
    items_free(s->bounds, s->nbounds);
    items_free(s->fix, s->nfix);
    free(s->x_scale.text);
    free(s->x_scale.origin);
    jf_spec_init(s);
}

static int dup_or_null(char **dst, const char *src) {
    *dst = src ? strdup(src) : NULL;
    return src && !*dst ? -1 : 0;
}

static int items_copy(jf_spec_item **dst, const jf_spec_item *src, size_t n) {
    *dst = NULL;
    if (!n) return 0;
    *dst = calloc(n, sizeof **dst);
    if (!*dst) return -1;
    for (size_t i = 0; i < n; i++)
    {
        (*dst)[i].key = src[i].key; /* a static string */
        if (dup_or_null(&(*dst)[i].text, src[i].text) || dup_or_null(&(*dst)[i].origin, src[i].origin))
            return -1;
    }
    return 0;
}

int jf_spec_copy(jf_spec *dst, const jf_spec *src) {
    *dst = *src;
    int bad = 0;
    bad |= dup_or_null(&dst->name, src->name);
    bad |= dup_or_null(&dst->model, src->model);
    bad |= dup_or_null(&dst->model_origin, src->model_origin);
    bad |= dup_or_null(&dst->data, src->data);
    bad |= dup_or_null(&dst->columns, src->columns);
    bad |= dup_or_null(&dst->ycol, src->ycol);
    bad |= dup_or_null(&dst->sigma, src->sigma);
    bad |= dup_or_null(&dst->group, src->group);
    bad |= dup_or_null(&dst->p0_file, src->p0_file);
    bad |= dup_or_null(&dst->output, src->output);
    bad |= dup_or_null(&dst->plot, src->plot);
    bad |= items_copy(&dst->p0, src->p0, src->np0);
    bad |= items_copy(&dst->fix, src->fix, src->nfix);
    bad |= items_copy(&dst->bounds, src->bounds, src->nbounds);
    bad |= dup_or_null(&dst->x_scale.text, src->x_scale.text);
    bad |= dup_or_null(&dst->x_scale.origin, src->x_scale.origin);
    return bad ? -1 : 0;
}

int jf_spec_is_flag(const char *key) {
    return strcmp(key, "absolute_sigma") == 0 || strcmp(key, "no_cache") == 0 ||
           strcmp(key, "vector_math") == 0 ||
           strcmp(key, "json") == 0 || strcmp(key, "verbose") == 0;
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

/* A memory size as the library reads one (jf_memory_size_from_text: K, M, G, T powers of 1024,
 * kB, MB, GB, TB powers of 1000, as GNU tools read them), at least one byte. */
static int parse_size(const char *s, size_t *out) {
    size_t bytes;
    if (jf_memory_size_from_text(s, &bytes) != 0 || bytes == 0) return -1;
    *out = bytes;
    return 0;
}

static int parse_bool(const char *v, int *out) {
    static const char *const yes[] = {"true", "yes", "on", "1"}, *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0) return *out = 1, 0;
        if (strcasecmp(v, no[i]) == 0) return *out = 0, 0;
    }
    return -1;
}

/* value as a path: relative to base when base is set and the path is relative. */
static char *resolve(const char *value, const char *base) {
    if (!base || value[0] == '/' || strcmp(value, "-") == 0) return strdup(value);
    return jf_cli_strf("%s/%s", base, value);
}

static jf_spec_rc set_str(char **dst, const char *v) {
    char *c = strdup(v);
    if (!c) return JF_SPEC_NOMEM;
    free(*dst);
    *dst = c;
    return JF_SPEC_OK;
}

static jf_spec_rc set_path(char **dst, const char *v, const char *base) {
    char *c = resolve(v, base);
    if (!c) return JF_SPEC_NOMEM;
    free(*dst);
    *dst = c;
    return JF_SPEC_OK;
}

/* A message for the first item of a NAME=NUMBER list ("a=2, b=1e-3") whose number is not one
 * (a NaN is no number: it would read as "no value given"), or with scales set not a positive
 * finite scale (x_scale); NULL when all are (or out of memory). */
static char *list_syntax(const char *v, int scales) {
    jf_cli_assign *a = NULL;
    char *msg = NULL;
    long n = jf_cli_split_assignments(v, &a, &msg);
    for (long i = 0; i < n && !msg; i++) {
        double x;
        int number = jf_cli_parse_double(a[i].value, &x) == 0 && !isnan(x);
        if (!number && !scales)
            msg = jf_cli_strf("'%s' is not a number (for '%s')", a[i].value, a[i].name);
        else if (scales && !(number && x > 0 && isfinite(x)))
            msg = jf_cli_strf("'%s' is not a positive finite scale (for '%s')", a[i].value,
                              a[i].name);
    }
    jf_cli_assign_free(a, n);
    return msg;
}

static jf_spec_rc push_item(jf_spec_item **items, size_t *n, const char *text, const char *origin) {
    jf_spec_item *ni = realloc(*items, (*n + 1) * sizeof *ni);
    if (!ni) return JF_SPEC_NOMEM;
    *items = ni;
    ni[*n].text = strdup(text);
    ni[*n].origin = origin ? strdup(origin) : NULL;
    ni[*n].key = NULL;
    if (!ni[*n].text || (origin && !ni[*n].origin)) {
        free(ni[*n].text);
        free(ni[*n].origin);
        return JF_SPEC_NOMEM;
    }
    ++*n;
    return JF_SPEC_OK;
}

/* `param NAME = START [in [LO, HI]]` or `param NAME = [LO, HI]`, as the DSL declares them.
 * The start is kept whole however long (a 0.000...1 of 200 digits is that number, not the
 * 0 of its first 127 characters), and text after the closing bracket is an error, not
 * dropped. */
static jf_spec_rc set_param(jf_spec *s, const char *name, const char *v, const char *origin,
                            char **msg) {
    while (*name == ' ') name++;
    if (!*name || strpbrk(name, " ,=:")) {
        *msg = jf_cli_strf("'param %s': expected `param NAME = VALUE [in [LOW, HIGH]]`", name);
        return *msg ? JF_SPEC_BAD : JF_SPEC_NOMEM;
    }
    const char *br = strchr(v, '[');
    char *start = strndup(v, br ? (size_t)(br - v) : strlen(v));
    if (!start) return JF_SPEC_NOMEM;
    /* Strip blanks and a trailing "in". */
    char *e = start + strlen(start);
    while (e > start && e[-1] == ' ') *--e = '\0';
    if (br && e - start >= 2 && strcmp(e - 2, "in") == 0) {
        e -= 2;
        *e = '\0';
        while (e > start && e[-1] == ' ') *--e = '\0';
    }
    char *b = start;
    while (*b == ' ') b++;
    double x;
    jf_spec_rc rc = JF_SPEC_OK;
    if (*b && (jf_cli_parse_double(b, &x) != 0 || isnan(x))) {
        *msg = jf_cli_strf("'%s' is not a number (for parameter '%s')", b, name);
        rc = *msg ? JF_SPEC_BAD : JF_SPEC_NOMEM;
    }
    char *l = NULL, *h = NULL, *item = NULL;
    double lo = 0, hi = 0;
    if (rc == JF_SPEC_OK && br) {
        const char *comma = strchr(br, ','), *close = strchr(br, ']');
        const char *after = close ? close + 1 + strspn(close + 1, " \t") : NULL;
        if (!comma || !close || close < comma || *after) {
            *msg = jf_cli_strf("'%s': expected bounds as [LOW, HIGH]%s", br,
                               close && after && *after ? ", and nothing after them" : "");
            rc = *msg ? JF_SPEC_BAD : JF_SPEC_NOMEM;
        } else if (!(l = strndup(br + 1, (size_t)(comma - br - 1))) ||
                   !(h = strndup(comma + 1, (size_t)(close - comma - 1)))) {
            rc = JF_SPEC_NOMEM;
        } else if (jf_cli_parse_double(l, &lo) != 0 || jf_cli_parse_double(h, &hi) != 0 ||
                   isnan(lo) || isnan(hi)) {
            *msg = jf_cli_strf("'%s': bounds must be numbers (inf allowed)", br);
            rc = *msg ? JF_SPEC_BAD : JF_SPEC_NOMEM;
        }
    }
    if (rc == JF_SPEC_OK && !*b && !br) {
        *msg = jf_cli_strf("parameter '%s': expected a starting value and/or [LOW, HIGH]", name);
        rc = *msg ? JF_SPEC_BAD : JF_SPEC_NOMEM;
    }
    /* Only a line that is valid as a whole changes the spec. */
    if (rc == JF_SPEC_OK && *b) {
        item = jf_cli_strf("%s=%s", name, b);
        rc = item ? push_item(&s->p0, &s->np0, item, origin) : JF_SPEC_NOMEM;
        free(item);
    }
    if (rc == JF_SPEC_OK && br) {
        char ls[64], hs[64];
        jf_cli_format_double(ls, sizeof ls, lo);
        jf_cli_format_double(hs, sizeof hs, hi);
        item = jf_cli_strf("%s=%s:%s", name, ls, hs);
        rc = item ? push_item(&s->bounds, &s->nbounds, item, origin) : JF_SPEC_NOMEM;
        free(item);
    }
    free(start);
    free(l);
    free(h);
    return rc;
}

/* `fix = a, c=0.5`: the names go to the fix list, each NAME=VALUE also to p0 (so it is the
 * start the parameter is held at). Names are checked against the model later; the syntax and
 * numbers now, where they were written. */
static jf_spec_rc set_fix(jf_spec *s, const char *v, const char *origin, char **msg) {
    size_t len = strlen(v);
    char *names = malloc(len + 1), *values = malloc(len + 2);
    if (!names || !values) {
        free(names);
        free(values);
        return JF_SPEC_NOMEM;
    }
    names[0] = values[0] = '\0';
    jf_spec_rc rc = JF_SPEC_OK;
    for (const char *p = v; rc == JF_SPEC_OK;) {
        size_t n = strcspn(p, ",");
        const char *eq = memchr(p, '=', n);
        size_t nl = eq ? (size_t)(eq - p) : n, b = 0;
        while (b < nl && p[b] == ' ') b++;
        while (nl > b && p[nl - 1] == ' ') nl--;
        if (nl == b || memchr(p + b, ' ', nl - b)) {
            *msg = jf_cli_strf("expected NAME or NAME=VALUE, got '%.*s'", (int)n, p);
            rc = *msg ? JF_SPEC_BAD : JF_SPEC_NOMEM;
            break;
        }
        strncat(names, p + b, nl - b);
        if (eq) {
            strncat(values, p + b, n - b);
            strcat(values, ",");
        }
        if (!p[n]) break;
        strcat(names, ",");
        p += n + 1;
    }
    if (rc == JF_SPEC_OK && values[0]) {
        values[strlen(values) - 1] = '\0'; /* the last comma */
        char *bad = list_syntax(values, 0);
        if (bad) {
            *msg = bad;
            rc = JF_SPEC_BAD;
        } else {
            rc = push_item(&s->p0, &s->np0, values, origin);
            if (rc == JF_SPEC_OK) s->p0[s->np0 - 1].key = "fix";
        }
    }
    if (rc == JF_SPEC_OK) rc = push_item(&s->fix, &s->nfix, names, origin);
    free(names);
    free(values);
    return rc;
}

/* Removes from a list the items a fix wrote (the NAME=VALUE starts it adds to p0, whose key
 * is "fix") when fix_items is 1, or all the others when it is 0. */
static void drop_items(jf_spec_item *items, size_t *n, int fix_items) {
    size_t kept = 0;
    for (size_t i = 0; i < *n; i++) {
        if ((items[i].key != NULL) == fix_items) {
            free(items[i].text);
            free(items[i].origin);
        } else {
            items[kept++] = items[i];
        }
    }
    *n = kept;
}

/* `KEY =` (an empty value): KEY as if no earlier layer or line had set it. A list undoes what
 * its own lines wrote: p0 the starts of p0 and param lines (a start a fix gave stays with its
 * hold), bounds the bounds of bounds and param lines, fix the holds and the starts they gave. */
static void reset(jf_spec *s, const char *key) {
    const jf_fit_options d = jf_fit_options_default();
    jf_fit_options *o = &s->opts;
    char **str = strcmp(key, "columns") == 0   ? &s->columns
                 : strcmp(key, "y") == 0       ? &s->ycol
                 : strcmp(key, "sigma") == 0   ? &s->sigma
                 : strcmp(key, "group") == 0   ? &s->group
                 : strcmp(key, "p0_file") == 0 ? &s->p0_file
                 : strcmp(key, "output") == 0  ? &s->output
                 : strcmp(key, "plot") == 0    ? &s->plot
                                               : NULL;
    if (str) {
        free(*str);
        *str = NULL;
    } else if (strcmp(key, "p0") == 0) {
        drop_items(s->p0, &s->np0, 0);
    } else if (strcmp(key, "bounds") == 0) {
        drop_items(s->bounds, &s->nbounds, 0);
    } else if (strcmp(key, "fix") == 0) {
        drop_items(s->fix, &s->nfix, 0);
        drop_items(s->p0, &s->np0, 1);
    } else if (strcmp(key, "x_scale") == 0) {
        free(s->x_scale.text);
        free(s->x_scale.origin);
        s->x_scale.text = s->x_scale.origin = NULL;
    } else if (strcmp(key, "absolute_sigma") == 0) {
        o->absolute_sigma = d.absolute_sigma;
    } else if (strcmp(key, "no_cache") == 0) {
        o->no_cache = d.no_cache;
    } else if (strcmp(key, "vector_math") == 0) {
        o->vector_math = d.vector_math;
    } else if (strcmp(key, "json") == 0) {
        s->json = 0;
    } else if (strcmp(key, "verbose") == 0) {
        s->verbose = 0;
    } else if (strcmp(key, "loss") == 0) {
        o->loss = d.loss;
    } else if (strcmp(key, "f_scale") == 0) {
        o->f_scale = d.f_scale;
    } else if (strcmp(key, "ftol") == 0) {
        o->ftol = d.ftol;
    } else if (strcmp(key, "xtol") == 0) {
        o->xtol = d.xtol;
    } else if (strcmp(key, "gtol") == 0) {
        o->gtol = d.gtol;
    } else if (strcmp(key, "max_nfev") == 0) {
        o->max_nfev = d.max_nfev;
    } else if (strcmp(key, "threads") == 0) {
        o->nthreads = d.nthreads;
    } else if (strcmp(key, "precision") == 0) {
        o->single_precision = d.single_precision;
    } else if (strcmp(key, "max_gpu_mem") == 0) {
        o->max_gpu_mem = d.max_gpu_mem;
    } else if (strcmp(key, "device") == 0) {
        o->device = d.device;
        s->device_given = 0;
    } else if (strcmp(key, "backend") == 0) {
        o->backend = d.backend;
    } else if (strcmp(key, "nan_policy") == 0) {
        s->nan_omit = 0;
    }
}

#define BAD(...)                                                                                   \
    do {                                                                                           \
        *msg = jf_cli_strf(__VA_ARGS__);                                                                   \
        return *msg ? JF_SPEC_BAD : JF_SPEC_NOMEM;                                                 \
    } while (0)

int jf_spec_is_key(const char *key) {
    for (size_t i = 0; jf_spec_keys[i]; i++)
        if (strcmp(key, jf_spec_keys[i]) == 0) return 1;
    return 0;
}

jf_spec_rc jf_spec_set(jf_spec *s, const char *key, const char *v, const char *origin,
                       const char *base, char **msg) {
    *msg = NULL;
    jf_fit_options *o = &s->opts;
    if (strncmp(key, "param ", 6) == 0) return set_param(s, key + 6, v, origin, msg);
    if (jf_spec_is_flag(key)) {
        int b;
        if (!*v) { /* the default: false */
            reset(s, key);
            return JF_SPEC_OK;
        }
        if (parse_bool(v, &b) != 0) BAD("'%s' is not true or false", v);
        if (strcmp(key, "absolute_sigma") == 0) o->absolute_sigma = b;
        else if (strcmp(key, "no_cache") == 0) o->no_cache = b;
        else if (strcmp(key, "vector_math") == 0) o->vector_math = b;
        else if (strcmp(key, "json") == 0) s->json = b;
        else s->verbose = b;
        return JF_SPEC_OK;
    }
    if (!jf_spec_is_key(key)) return JF_SPEC_UNKNOWN;
    /* An empty value returns the key to its default (model and data have none) */
    if (!*v) {
        if (strcmp(key, "model") == 0 || strcmp(key, "data") == 0) BAD("needs a value");
        reset(s, key);
        return JF_SPEC_OK;
    }
    if (strcmp(key, "model") == 0) {
        /* A model in a job file is a file relative to the job's directory when one exists
         * there; otherwise it is model text. */
        char *path = resolve(v, base);
        struct stat st;
        if (!path) return JF_SPEC_NOMEM;
        int is_file = base && stat(path, &st) == 0 && S_ISREG(st.st_mode);
        /* Model text is read as a file wherever a file of its name exists (the CLI's model
         * loader), that is from the working directory: a name that is no file beside the job
         * but is one there would silently be another model than the job's. A missing NAME.jf
         * is a file's name (a formula cannot end so): the loader's "No such file" then names
         * it in the job's directory. */
        if (base && !is_file && strcmp(path, v) != 0) {
            size_t n = strlen(v);
            if (stat(v, &st) == 0 && S_ISREG(st.st_mode)) {
                *msg = jf_cli_strf("'%s' is no file in the job file's directory (%s) but one in "
                                   "the working directory: a job's model file is relative to "
                                   "the job file",
                                   v, base);
                free(path);
                return *msg ? JF_SPEC_BAD : JF_SPEC_NOMEM;
            }
            is_file = n > 3 && strcmp(v + n - 3, ".jf") == 0;
        }
        jf_spec_rc rc = set_str(&s->model, is_file ? path : v);
        free(path);
        if (rc == JF_SPEC_OK) {
            free(s->model_origin);
            s->model_origin = origin ? strdup(origin) : NULL;
            if (origin && !s->model_origin) rc = JF_SPEC_NOMEM;
        }
        return rc;
    }
    if (strcmp(key, "data") == 0) return set_path(&s->data, v, base);
    if (strcmp(key, "p0_file") == 0) return set_path(&s->p0_file, v, base);
    if (strcmp(key, "output") == 0) return set_path(&s->output, v, base);
    if (strcmp(key, "plot") == 0) {
        const char *dot = strrchr(v, '.');
        if (!dot || (strcasecmp(dot, ".svg") != 0 && strcasecmp(dot, ".png") != 0))
            BAD("'%s': the plot file must end in .svg or .png", v);
        return set_path(&s->plot, v, base);
    }
    if (strcmp(key, "columns") == 0) return set_str(&s->columns, v);
    if (strcmp(key, "y") == 0) return set_str(&s->ycol, v);
    if (strcmp(key, "sigma") == 0) return set_str(&s->sigma, v);
    if (strcmp(key, "group") == 0) return set_str(&s->group, v);
    if (strcmp(key, "p0") == 0) {
        /* the names need the model, but the numbers can be checked now (in a job file: before
         * any fit runs, at the line that set them) */
        char *bad = list_syntax(v, 0);
        if (bad) {
            *msg = bad;
            return JF_SPEC_BAD;
        }
        return push_item(&s->p0, &s->np0, v, origin);
    }
    if (strcmp(key, "bounds") == 0) return push_item(&s->bounds, &s->nbounds, v, origin);
    if (strcmp(key, "fix") == 0) return set_fix(s, v, origin, msg);
    if (strcmp(key, "loss") == 0) {
        int l = jf_loss_from_name(v);
        if (l < 0) BAD("unknown loss '%s' (use linear, soft_l1, huber, cauchy or arctan)", v);
        o->loss = (jf_loss)l;
        return JF_SPEC_OK;
    }
    if (strcmp(key, "f_scale") == 0) {
        if (parse_nonneg(v, 1, &o->f_scale) != 0) BAD("'%s' is not a positive number", v);
        return JF_SPEC_OK;
    }
    if (strcmp(key, "x_scale") == 0) {
        /* scipy's x_scale: 'jac' (column norms, updated as they grow) or fixed scales. The
         * names need the model; the numbers are checked now, where they were written. */
        char *text = NULL;
        if (strcmp(v, "jac") != 0) {
            double one;
            if (jf_cli_parse_double(v, &one) == 0) {
                if (!(one > 0) || !isfinite(one))
                    BAD("'%s': a scale must be positive and finite", v);
            } else {
                char *bad = list_syntax(v, 1);
                if (bad) {
                    *msg = bad;
                    return JF_SPEC_BAD;
                }
            }
            if (!(text = strdup(v))) return JF_SPEC_NOMEM;
        }
        char *from = origin ? strdup(origin) : NULL;
        if (origin && !from) {
            free(text);
            return JF_SPEC_NOMEM;
        }
        free(s->x_scale.text);
        free(s->x_scale.origin);
        s->x_scale.text = text;
        s->x_scale.origin = from;
        return JF_SPEC_OK;
    }
    if (strcmp(key, "ftol") == 0 || strcmp(key, "xtol") == 0 || strcmp(key, "gtol") == 0) {
        double t;
        if (parse_nonneg(v, 0, &t) != 0) BAD("'%s' is not a non-negative number", v);
        if (key[0] == 'f') o->ftol = t;
        else if (key[0] == 'x') o->xtol = t;
        else o->gtol = t;
        return JF_SPEC_OK;
    }
    if (strcmp(key, "max_nfev") == 0) {
        unsigned long long n;
        if (parse_count(v, (unsigned long long)SIZE_MAX, &n) != 0 || n == 0)
            BAD("'%s' is not a positive integer", v);
        o->max_nfev = (size_t)n;
        return JF_SPEC_OK;
    }
    if (strcmp(key, "threads") == 0) {
        unsigned long long n;
        if (parse_count(v, 4096, &n) != 0) BAD("'%s' is not a thread count (0 to 4096)", v);
        o->nthreads = (int)n;
        return JF_SPEC_OK;
    }
    if (strcmp(key, "precision") == 0) {
        if (strcmp(v, "double") == 0) o->single_precision = 0;
        else if (strcmp(v, "single") == 0) o->single_precision = 1;
        else BAD("unknown precision '%s' (use double or single)", v);
        return JF_SPEC_OK;
    }
    if (strcmp(key, "max_gpu_mem") == 0) {
        if (parse_size(v, &o->max_gpu_mem) != 0)
            BAD("'%s' is not a memory size (bytes, or a number with K, M, G, T or kB, MB, GB, TB)", v);
        return JF_SPEC_OK;
    }
    if (strcmp(key, "device") == 0) {
        if (strcmp(v, "cpu") == 0) o->device = JF_DEVICE_CPU;
        else if (strcmp(v, "gpu") == 0) o->device = JF_DEVICE_GPU;
        else if (strcmp(v, "auto") == 0) o->device = JF_DEVICE_AUTO;
        else BAD("unknown device '%s' (use cpu, auto or gpu)", v);
        s->device_given = 1;
        return JF_SPEC_OK;
    }
    if (strcmp(key, "backend") == 0) {
        if (strcmp(v, "c") == 0) o->backend = JF_BACKEND_C;
        else if (strcmp(v, "interp") == 0) o->backend = JF_BACKEND_INTERP;
        else BAD("unknown backend '%s' (use c or interp)", v);
        return JF_SPEC_OK;
    }
    if (strcmp(key, "nan_policy") == 0) {
        if (strcmp(v, "raise") == 0) s->nan_omit = 0;
        else if (strcmp(v, "omit") == 0) s->nan_omit = 1;
        else BAD("unknown policy '%s' (use raise or omit)", v);
        return JF_SPEC_OK;
    }
    return JF_SPEC_UNKNOWN;
}

/* The file a write to path creates when path is a dangling symbolic link (or a chain of them):
 * the last link's target, relative to that link's directory; a copy of path when it is no
 * link; NULL only when out of memory. At most 40 links are followed (the kernel's limit). */
static char *link_target(const char *path) {
    char *cur = strdup(path);
    for (int hop = 0; cur && hop < 40; hop++) {
        struct stat st;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode)) break;
        size_t cap = (size_t)st.st_size + 2; /* a link that grew meanwhile shows as cut */
        char *t = malloc(cap);
        ssize_t len = t ? readlink(cur, t, cap) : -1;
        if (len < 0 || (size_t)len >= cap) {
            free(t);
            break;
        }
        t[len] = '\0';
        const char *slash = strrchr(cur, '/');
        char *next = t[0] == '/' || !slash ? strdup(t)
                                           : jf_cli_strf("%.*s/%s", (int)(slash - cur), cur, t);
        free(t);
        free(cur);
        cur = next;
    }
    return cur;
}

char *jf_spec_canonical(const char *path) {
    char *r = realpath(path, NULL);
    if (r) return r;
    /* a dangling symbolic link is the file its target will be */
    char *target = link_target(path);
    if (!target) return NULL;
    path = target;
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, (size_t)(slash - path + (slash == path))) : strdup(".");
    char *rd = dir ? realpath(dir, NULL) : NULL;
    free(dir);
    if (!rd) return target;
    r = jf_cli_strf("%s/%s", strcmp(rd, "/") == 0 ? "" : rd, slash ? slash + 1 : path);
    free(rd);
    free(target);
    return r;
}

int jf_spec_file_id(const char *path, jf_spec_file *id) {
    memset(id, 0, sizeof *id);
    if (!path || strcmp(path, "-") == 0) return 0;
    if (!(id->path = jf_spec_canonical(path))) return -1;
    struct stat st;
    if (stat(path, &st) == 0) {
        id->exists = 1;
        id->dev = st.st_dev;
        id->ino = st.st_ino;
    }
    return 0;
}

void jf_spec_file_free(jf_spec_file *id) {
    free(id->path);
    memset(id, 0, sizeof *id);
}

int jf_spec_file_same(const jf_spec_file *a, const jf_spec_file *b) {
    if (!a->path || !b->path) return 0;
    /* a hard link has a path of its own: only the inode says it is the data file */
    if (a->exists && b->exists) return a->dev == b->dev && a->ino == b->ino;
    return strcmp(a->path, b->path) == 0;
}

int jf_spec_same_file(const char *a, const char *b) {
    jf_spec_file ia, ib;
    if (jf_spec_file_id(a, &ia) != 0) return 0;
    if (jf_spec_file_id(b, &ib) != 0) {
        jf_spec_file_free(&ia);
        return 0;
    }
    int same = jf_spec_file_same(&ia, &ib);
    jf_spec_file_free(&ia);
    jf_spec_file_free(&ib);
    return same;
}

const char *jf_spec_model_file(const jf_spec *s) {
    struct stat st;
    return s->model && strcmp(s->model, "-") != 0 && stat(s->model, &st) == 0 &&
                   S_ISREG(st.st_mode)
               ? s->model
               : NULL;
}

int jf_spec_check(const jf_spec *s, char **msg) {
    *msg = NULL;
    const char *what = NULL, *model = jf_spec_model_file(s);
    if (s->plot && s->group)
        *msg = jf_cli_strf("--plot draws one fit; it cannot be used with --group");
    else if (s->p0_file && !s->group)
        *msg = jf_cli_strf("--p0-file gives starting values per group; it needs --group");
    else if (s->opts.ftol < DBL_EPSILON && s->opts.xtol < DBL_EPSILON &&
             s->opts.gtol < DBL_EPSILON)
        *msg = jf_cli_strf("ftol, xtol and gtol are all below machine epsilon (%.2g): at least "
                           "one must stop the solver", DBL_EPSILON);
    else if (s->data && s->p0_file && strcmp(s->data, "-") == 0 && strcmp(s->p0_file, "-") == 0)
        *msg = jf_cli_strf("the data and the p0 file are both '-': standard input can be read "
                           "only once; give one of them as a file");
    else if (jf_spec_same_file(s->output, s->data) || jf_spec_same_file(s->output, s->p0_file))
        what = "output";
    else if (jf_spec_same_file(s->plot, s->data) || jf_spec_same_file(s->plot, s->p0_file))
        what = "plot";
    else if (jf_spec_same_file(s->output, s->plot))
        *msg = jf_cli_strf("output and plot are the same file (%s)", s->output);
    else if (jf_spec_same_file(s->output, model) || jf_spec_same_file(s->plot, model))
        *msg = jf_cli_strf("%s %s is the model file: it would be overwritten",
                           jf_spec_same_file(s->output, model) ? "output" : "plot",
                           jf_spec_same_file(s->output, model) ? s->output : s->plot);
    if (what) {
        const char *file = strcmp(what, "output") == 0 ? s->output : s->plot;
        *msg = jf_cli_strf("%s %s is the %s file: it would be overwritten", what, file,
                           jf_spec_same_file(file, s->data) ? "data" : "p0");
    }
    return *msg != NULL;
}
