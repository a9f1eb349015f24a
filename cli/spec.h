/* The description of one fit, filled from the command line and from job files alike.
 *
 * Every setting has one key (as written in a job file: `ftol = 1e-10`) and one option (the key
 * with '-' for '_': `--ftol 1e-10`), and both go through jf_spec_set, so the two front ends
 * accept exactly the same values with the same messages. Layers are applied in order — a job's
 * [defaults], then its [fit NAME] section, then the command line — and a later value replaces an
 * earlier one, except the parameter lists (p0, bounds, param NAME, fix), which accumulate: each
 * item changes only the parameters it names. An empty value returns a key to its default (a
 * list: drops what its own key wrote), so a fit section can unset what [defaults] set.
 */
#ifndef JF_CLI_SPEC_H
#define JF_CLI_SPEC_H

#include <stddef.h>
#include <sys/types.h>

#include "../include/jitfit.h"

/* One list of name=value items (a p0 or bounds setting) and where it was written. */
typedef struct jf_spec_item {
    char *text;   /* "a=1,b=2" (bounds: "a=0:inf") */
    char *origin; /* "jobs.ini:12" for a job file; NULL for the command line */
    const char *key; /* the key it was written under when not the list's own: "fix" for the
                        NAME=VALUE of a fix, which joins p0 (messages name it); else NULL */
} jf_spec_item;

/* Everything a fit needs to know, before the model and data are read. Strings are malloc'd. */
typedef struct jf_spec {
    char *name;             /* the fit's name in a job file ([fit NAME]); NULL otherwise */
    char *model;            /* MODEL: a formula or a model file path */
    char *model_origin;     /* where model was set ("jobs.ini:3"), NULL from the command line */
    char *data;             /* DATA path ("-": standard input) */
    char *columns;          /* names of the data columns in file order ("x, y"), or NULL */
    char *ycol;             /* response column, or NULL for the model's response */
    char *sigma;            /* column of standard deviations, or NULL */
    char *group;            /* column whose distinct values split the data into a batch */
    char *p0_file;          /* per-group starting values (CSV: group column + parameters) */
    char *output;           /* CSV of predictions and residuals to write, or NULL */
    char *plot;             /* .svg or .png plot to write, or NULL */
    jf_spec_item *p0;       /* starting-value lists in the order given (later items win) */
    size_t np0;             /* entries in p0 */
    jf_spec_item *bounds;   /* bounds lists in the order given */
    size_t nbounds;         /* entries in bounds */
    jf_spec_item *fix;      /* lists of parameter names to hold fixed ("a, c"), in the order
                               given; they accumulate (a NAME=VALUE in `fix` went to p0) */
    size_t nfix;            /* entries in fix */
    jf_spec_item x_scale;   /* "jac" (text NULL: the default), one number for every parameter,
                               or NAME=SCALE for each; a later setting replaces it whole */
    int json;               /* 1: print JSON instead of the human report */
    int verbose;            /* 1: one line per iteration on stderr */
    int nan_omit;           /* 1: --nan-policy omit (drop rows with NaN); 0: raise */
    jf_fit_options opts;    /* solver options (p0/lower/upper are filled later) */
    int device_given;       /* 1: a device was set explicitly (the report then says which ran) */
} jf_spec;

/* An empty spec with the default options. */
void jf_spec_init(jf_spec *s);
/* Frees the strings of s (not s) and re-initializes it. */
void jf_spec_free(jf_spec *s);
/* Deep copy of src into dst (dst uninitialized). Returns 0 or -1 when out of memory. */
int jf_spec_copy(jf_spec *dst, const jf_spec *src);

/* Result of jf_spec_set. */
typedef enum jf_spec_rc {
    JF_SPEC_OK = 0,      /* applied */
    JF_SPEC_UNKNOWN = 1, /* no such key */
    JF_SPEC_BAD = 2,     /* the value is not valid for the key: *msg says why */
    JF_SPEC_NOMEM = 3    /* out of memory */
} jf_spec_rc;

/* Applies `key = value` to s. origin is "FILE:LINE" for a job file (kept with parameter lists
 * for later messages) or NULL for the command line. base is the directory that relative paths
 * (model file, data, p0_file, output, plot) are relative to, or NULL for the current one.
 * Boolean keys take true/false/yes/no/on/off/1/0. An empty value resets the key to its default
 * (p0 drops the starts of p0 and param items, bounds all bounds, fix the holds and the starts
 * they gave); model, data and param NAME need a value. On JF_SPEC_BAD *msg receives a malloc'd
 * message without prefix ("'abc' is not a non-negative number"). */
jf_spec_rc jf_spec_set(jf_spec *s, const char *key, const char *value, const char *origin,
                       const char *base, char **msg);

/* s->model when it names an existing regular file (a model file), else NULL (a formula). */
const char *jf_spec_model_file(const jf_spec *s);

/* The checks that need several settings of one fit together (--plot with --group, --p0-file
 * without it, tolerances that can never stop the solver, data and p0 file both standard input,
 * an output or plot that is the data file, the p0 file or each other): 0, or 1 with a malloc'd
 * message in *msg. jitfit run makes them for every fit before any runs. */
int jf_spec_check(const jf_spec *s, char **msg);
/* 1 when paths a and b name the same file: when both exist, the same (device, inode), so a
 * hard link or a symbolic link is its target; else the same canonical path (jf_spec_canonical:
 * an output that does not exist yet); "-" and NULL are never the same file. */
int jf_spec_same_file(const char *a, const char *b);

/* What jf_spec_same_file compares of one path, taken once (jitfit run compares every pair of
 * its fits' files). */
typedef struct jf_spec_file {
    char *path;  /* jf_spec_canonical of the path, or NULL for none and for "-" */
    int exists;  /* 1: the path names an existing file (stat follows links), dev and ino set */
    dev_t dev;   /* the device holding it */
    ino_t ino;   /* its inode there */
} jf_spec_file;

/* Fills *id for path (NULL or "-": an id that is no file). 0, or -1 when out of memory (*id
 * then holds nothing to free). Free with jf_spec_file_free. */
int jf_spec_file_id(const char *path, jf_spec_file *id);
/* Frees what *id holds; accepts an id that is no file. */
void jf_spec_file_free(jf_spec_file *id);
/* 1 when a and b are the same file, by jf_spec_same_file's rule. */
int jf_spec_file_same(const jf_spec_file *a, const jf_spec_file *b);
/* path made absolute and free of "." and ".." through its directory (the file itself need not
 * exist yet; a dangling symbolic link stands for its target, the file a write creates), as
 * jf_spec_same_file compares paths; a malloc'd copy of path (or of that target) when the
 * directory does not exist either; NULL only when out of memory. The caller frees it. */
char *jf_spec_canonical(const char *path);

/* 1 when key is a boolean setting (a flag without value on the command line). */
int jf_spec_is_flag(const char *key);
/* 1 when key is one of jf_spec_keys. */
int jf_spec_is_key(const char *key);

/* The keys, NULL-terminated, for help and for "did you mean" messages. */
extern const char *const jf_spec_keys[];

#endif
