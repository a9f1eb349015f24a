/* libFuzzer harness for the data reader (cli/data.c, cli/npy.c): bytes of any kind as a data
 * file — CSV, TSV, whitespace, quoted CSV, gzip, .npy — opened with and without a header, every
 * column read as numbers and as text.
 *
 * The contract checked on every input (a violation aborts, so the fuzzer records it): a failed
 * open or read returns nonzero with a message that names the file; a successful read gives a
 * table whose numbers are finite unless NaN was allowed. tests/test_fuzz_corpora.c compiles
 * this same file into the ordinary test suite and replays tests/fuzz/corpus_data through it.
 *
 * Build (separate configure, see fuzz_parser.c):
 *   CC=clang cmake -S . -B build-fuzz -DJITFIT_FUZZ=ON -DBUILD_TESTING=OFF
 *   cmake --build build-fuzz --target fuzz_data
 *   build-fuzz/tests/fuzz/fuzz_data -max_len=4096 -timeout=10 build-fuzz/corpus_data \
 *       tests/fuzz/corpus_data
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cli/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Opens the bytes as a file (a memory file, so no disk traffic) with the given options and
 * reads every column; aborts when the contract above is broken. */
static void read_all(const char *path, const jf_dataopts *o) {
    jf_datafile *f = NULL;
    char *err = NULL;
    if (jf_datafile_open_ex(path, o, &f, &err) != 0) {
        if (!err || !strstr(err, path)) abort();
        free(err);
        return;
    }
    if (f->positional) {
        /* Name positional columns c0, c1, ... as a user's --columns would. */
        char **names = calloc(f->ncols ? f->ncols : 1, sizeof *names);
        if (!names) abort();
        for (size_t c = 0; c < f->ncols; c++) {
            names[c] = malloc(24);
            if (!names[c]) abort();
            snprintf(names[c], 24, "c%zu", c);
        }
        int rc = jf_datafile_name_columns(f, (const char *const *)names, f->ncols, &err);
        for (size_t c = 0; c < f->ncols; c++) free(names[c]);
        free(names);
        if (rc != 0) {
            if (!err) abort();
            free(err);
            jf_datafile_free(f);
            return;
        }
    }
    jf_table t;
    memset(&t, 0, sizeof t);
    if (jf_datafile_read(f, (const char *const *)f->names, f->ncols, &t, &err) == 0) {
        if (t.ncols != f->ncols) abort();
        if (!o->allow_nan)
            for (size_t c = 0; c < t.ncols; c++)
                for (size_t r = 0; r < t.nrows; r++)
                    if (!isfinite(t.values[c * t.ld + r])) abort();
        for (size_t r = 0; r < t.nrows; r++) (void)jf_table_line(&t, r);
        jf_table_free(&t);
    } else {
        if (!err || !strstr(err, path)) abort();
        free(err);
        err = NULL;
    }
    if (f->ncols > 0 && !f->numeric) {
        char **cells = NULL;
        size_t n = 0;
        if (jf_datafile_read_text(f, f->names[0], &cells, &n, &err) == 0) jf_strings_free(cells, n);
        else free(err);
    }
    jf_datafile_free(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("jf_fuzz_data", 0);
    if (fd < 0) return 0;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    jf_dataopts o;
    memset(&o, 0, sizeof o);
    read_all(path, &o);
    o.allow_no_header = 1;
    o.allow_nan = 1;
    read_all(path, &o);
    close(fd);
    return 0;
}
