/* Writer of `--output` (see output.h). CSV quoting follows RFC 4180, so group labels with commas
 * or quotes survive a round trip through jitfit's own reader. */
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../codegen/emit.h"
#include "../solver/solver.h"
#include "util.h"

/* 1 when text s, written bare as a field of this CSV, would read back as other text in
 * jitfit's reader (cli/data.c): it holds a comma (the separator: the header always has one, so
 * the file reads as CSV), a quote (one that opens a field starts a quoted field; RFC 4180
 * quotes a field with any) or a line break (RFC 4180 quotes those too; a CR before the LF would be dropped); it
 * starts or ends with a blank (space or tab: the reader trims them around a field); it starts
 * with '#' (a row whose first field does is a comment) or with a UTF-8 byte-order mark (dropped
 * at the start of the file). Quoted, a field is read verbatim. The empty text and the words
 * for a missing value (NA, ...) read back as themselves bare or quoted. */
static int needs_quotes(const char *s) {
    size_t n = strlen(s);
    if (!n) return 0;
    return strpbrk(s, ",\"\r\n") || s[0] == ' ' || s[0] == '\t' || s[n - 1] == ' ' ||
           s[n - 1] == '\t' || s[0] == '#' || strncmp(s, "\xEF\xBB\xBF", 3) == 0;
}

/* A CSV field, quoted (RFC 4180: "" for a quote) when needs_quotes says so. */
static void csv_text(jf_buf *c, const char *s) {
    if (!needs_quotes(s)) {
        jf_buf_puts(c, s);
        return;
    }
    char *q = malloc(2 * strlen(s) + 3), *o = q;
    if (!q) {
        c->nomem = 1;
        return;
    }
    *o++ = '"';
    for (; *s; s++) {
        if (*s == '"') *o++ = '"'; /* doubled */
        *o++ = *s;
    }
    *o++ = '"';
    *o = '\0';
    jf_buf_puts(c, q);
    free(q);
}

/* 1 when name is the group column's or one of the data columns' name. */
static int name_taken(const char *name, const char *group_name, const char *const *names,
                      size_t ncols) {
    if (group_name && strcmp(group_name, name) == 0) return 1;
    for (size_t c = 0; c < ncols; c++)
        if (strcmp(names[c], name) == 0) return 1;
    return 0;
}

/* The header field of an added column: its name, or, where a data column already carries that
 * name (a response called `fit`), the name with '_' appended until it is free, so that every
 * column of the file can be told apart by name (pandas, R and jitfit's own reader key on it). */
static void added_name(jf_buf *head, const char *name, const char *group_name,
                       const char *const *names, size_t ncols) {
    jf_buf b = {0};
    jf_buf_puts(&b, name);
    while (!b.nomem && name_taken(b.s, group_name, names, ncols)) jf_buf_puts(&b, "_");
    head->nomem |= b.nomem;
    if (!b.nomem) csv_text(head, b.s);
    free(b.s);
}

static void csv_num(jf_buf *c, double v, char sep) {
    char buf[64];
    jf_cli_format_double(buf, sizeof buf, v);
    size_t n = strlen(buf);
    buf[n] = sep;
    buf[n + 1] = '\0';
    jf_buf_puts(c, buf);
}

/* Rows a task formats: big enough that a task costs far more than handing it out. */
#define CHUNK_ROWS 4096

/* What the tasks of a round share: the data, and the round's first chunk. */
typedef struct rows_job {
    const char *const *keys; /* group labels, or NULL */
    size_t ncols, ld, n, ycol;
    const double *cols, *fit, *fit_se;
    size_t first;  /* chunk number of task 0 of this round */
    jf_buf *out;   /* one per task of the round */
} rows_job;

static void format_rows(void *ctx, size_t task, int worker) {
    (void)worker;
    rows_job *j = ctx;
    jf_buf *c = &j->out[task];
    size_t begin = (j->first + task) * CHUNK_ROWS;
    size_t end = begin + CHUNK_ROWS < j->n ? begin + CHUNK_ROWS : j->n;
    c->len = 0; /* the buffer is reused round after round */
    for (size_t i = begin; i < end; i++) {
        if (j->keys) {
            csv_text(c, j->keys[i]);
            jf_buf_puts(c, ",");
        }
        for (size_t k = 0; k < j->ncols; k++) csv_num(c, j->cols[k * j->ld + i], ',');
        csv_num(c, j->fit[i], ',');
        csv_num(c, j->cols[j->ycol * j->ld + i] - j->fit[i], ',');
        csv_num(c, j->fit_se[i], '\n');
    }
}

/* The temporary file being written, for jf_output_signal_cleanup: the name is complete before
 * temp_live is set, and temp_live is cleared before the name changes. */
static char temp_path[PATH_MAX + 32];
static volatile sig_atomic_t temp_live;

void jf_output_signal_cleanup(void) {
    if (temp_live) unlink(temp_path);
}

/* Opens a temporary file beside the file that path names (through a symbolic link: beside its
 * target), to be renamed onto it when complete, and sets *target to the name to rename onto
 * (malloc'd). NULL (and errno unchanged) where path is not a regular file of ours with one
 * link that can be replaced so: a device (/dev/null, /dev/stdout), a FIFO, another user's
 * file, a hard-linked file (a rename would part the names), a directory without write access;
 * the caller then writes path in place. A new file gets the mode fopen would give it, an
 * existing one keeps its own. */
static FILE *open_temp(const char *path, char **target) {
    struct stat st;
    int exists = stat(path, &st) == 0;
    *target = NULL;
    if (exists && (!S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_uid != geteuid()))
        return NULL;
    if (!exists && errno != ENOENT) return NULL;
    struct stat lst;
    char *dest = NULL;
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
        /* a link to a file that does not exist yet is written through, in place */
        if (!exists || !(dest = realpath(path, NULL))) return NULL;
    } else if (!(dest = strdup(path)))
        return NULL;
    const char *slash = strrchr(dest, '/');
    size_t dirlen = slash ? (size_t)(slash - dest) + 1 : 0;
    if (strlen(dest) + 24 > sizeof temp_path) {
        free(dest);
        return NULL;
    }
    /* hidden and named after the file, so that one left by a SIGKILL says whose it is */
    snprintf(temp_path, sizeof temp_path, "%.*s.%s.jitfit-XXXXXX", (int)dirlen, dest,
             dest + dirlen);
    mode_t mask = umask(0);
    umask(mask);
    int fd = mkstemp(temp_path);
    if (fd < 0) {
        free(dest);
        return NULL;
    }
    temp_live = 1;
    FILE *f = NULL;
    if (fchmod(fd, exists ? st.st_mode & 07777 : 0666 & ~mask) != 0 || !(f = fdopen(fd, "w"))) {
        temp_live = 0;
        close(fd);
        unlink(temp_path);
        free(dest);
        return NULL;
    }
    *target = dest;
    return f;
}

int jf_output_csv(const char *path, const char *group_name, char *const *keys,
                  const char *const *names, size_t ncols, const double *cols, size_t ld,
                  size_t n, size_t ycol, const double *fit, const double *fit_se, int nthreads,
                  char **err) {
    *err = NULL;
    int to_stdout = strcmp(path, "-") == 0;
    /* A file is written under a temporary name and renamed onto path when complete: a run
     * ended while it writes (Ctrl-C; a full disk) leaves the earlier file or none, never one
     * cut in the middle of a row, whose last number may still read as a number. */
    char *target = NULL;
    FILE *f = to_stdout ? stdout : open_temp(path, &target);
    if (!f && !to_stdout) f = fopen(path, "w");
    if (!f) {
        int e = errno;
        size_t len = strlen(path) + strlen(strerror(e)) + 4;
        *err = malloc(len);
        if (*err) snprintf(*err, len, "%s: %s", path, strerror(e));
        return -1;
    }
    /* The shortest round-trip digits cost about a microsecond a number (glibc's printf and
     * strtod work in multiple precision), fifteen times the fit's own time per point: so the
     * rows are formatted in parallel, a round of chunks at a time, and written in order. */
    int nomem = 0;
    jf_buf head = {0};
    if (keys) {
        csv_text(&head, group_name);
        jf_buf_puts(&head, ",");
    }
    for (size_t c = 0; c < ncols; c++) {
        csv_text(&head, names[c]);
        jf_buf_puts(&head, ",");
    }
    static const char *const added[] = {"fit", "residual", "fit_stderr"};
    for (size_t a = 0; a < 3; a++) {
        added_name(&head, added[a], keys ? group_name : NULL, names, ncols);
        jf_buf_puts(&head, a < 2 ? "," : "\n");
    }
    nomem |= head.nomem;
    if (!nomem) fwrite(head.s, 1, head.len, f);
    free(head.s);
    size_t nchunks = (n + CHUNK_ROWS - 1) / CHUNK_ROWS;
    int threads = jf_threads_resolve(nthreads);
    if ((size_t)threads > nchunks) threads = nchunks > 0 ? (int)nchunks : 1;
    jf_pool *pool = threads > 1 ? jf_pool_acquire(threads) : NULL;
    size_t per_round = (size_t)jf_pool_size(pool) * 4;
    rows_job job = {(const char *const *)keys, ncols, ld, n, ycol, cols, fit, fit_se, 0, NULL};
    job.out = calloc(per_round, sizeof *job.out);
    nomem |= job.out == NULL;
    /* a write error (a full disk) ends the formatting too: it is reported below */
    for (size_t first = 0; !nomem && !ferror(f) && first < nchunks; first += per_round) {
        size_t tasks = nchunks - first < per_round ? nchunks - first : per_round;
        job.first = first;
        jf_pool_run(pool, tasks, format_rows, &job);
        for (size_t t = 0; t < tasks && !nomem; t++) {
            nomem |= job.out[t].nomem;
            if (!nomem) fwrite(job.out[t].s, 1, job.out[t].len, f);
        }
    }
    if (job.out)
        for (size_t t = 0; t < per_round; t++) free(job.out[t].s);
    free(job.out);
    jf_pool_release(pool);
    int bad = ferror(f);
    if (to_stdout) bad |= fflush(f) != 0;
    else bad |= fclose(f) != 0;
    if (target) {
        /* on failure the earlier file stays as it was */
        if (!bad && !nomem && rename(temp_path, target) != 0) bad = 1;
        temp_live = 0;
        if (bad || nomem) unlink(temp_path);
        free(target);
    }
    if (bad || nomem) {
        size_t len = strlen(path) + 32;
        *err = malloc(len);
        if (*err) snprintf(*err, len, "%s: %s", path, nomem ? "out of memory" : "write error");
        return -1;
    }
    return 0;
}
