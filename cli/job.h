/* Job files: several fit descriptions in one INI file, read with libinih.
 *
 *   # comment                      ; comments start a line with # or ;
 *   [defaults]                     ; optional: settings every fit starts from
 *   backend = c
 *   [fit damped]                   ; one section per fit, run in file order
 *   model = damped_sine.jf         ; a model file (relative to the job file) or formula text
 *   data  = damped_sine.csv        ; relative paths are relative to the job file
 *   param b = 0.2 in [0, inf]      ; starting value and bounds, as the DSL declares them
 *
 * Keys are those of spec.h (the long options of `jitfit fit` with '_' for '-'). A value may go
 * on over several lines by indenting the continuation lines (a multi-line model). Unknown
 * sections and keys, repeated keys, bad values and syntax errors are errors that name the file
 * and line; no fit runs until the whole file is valid. inih gives its handler no line numbers
 * in Debian's build, so the job reader feeds inih line by line and counts the lines itself.
 */
#ifndef JF_CLI_JOB_H
#define JF_CLI_JOB_H

#include <stddef.h>

#include "spec.h"

/* The fits of a job file. */
typedef struct jf_job {
    jf_spec *fits;     /* nfits descriptions, [defaults] already applied, in file order */
    size_t *lines;     /* nfits line numbers of the [fit NAME] headers */
    size_t nfits;      /* number of [fit NAME] sections */
    char *path;        /* the job file's path, as given */
} jf_job;

/* Reads and validates the job file at path. Returns 0 and fills *job (free with jf_job_free),
 * or 1 after printing every error found ("jobs.ini:7: unknown key 'ftoll' (did you mean
 * 'ftol'?)"). */
int jf_job_read(const char *path, jf_job *job);

/* Frees the fits of job (not job); accepts a zeroed job. */
void jf_job_free(jf_job *job);

#endif
