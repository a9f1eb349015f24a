/* libFuzzer harness for job files (cli/job.c over libinih, every key's validator in cli/spec.c):
 * bytes of any kind as a job file, read as `jitfit run` reads it.
 *
 * The contract checked on every input (a violation aborts, so the fuzzer records it): a job file
 * is either accepted — at least one fit, each with a name, a model and data, a copy of each
 * spec that frees cleanly — or refused with status 1 and nothing left to free (errors go to
 * stderr). A model file and a data file lie beside the job file, so `model = m.jf` takes the
 * path that resolves files. tests/test_fuzz_corpora.c compiles this same file into the
 * ordinary test suite and replays tests/fuzz/corpus_job through it.
 *
 * Build (separate configure, see fuzz_parser.c):
 *   CC=clang cmake -S . -B build-fuzz -DJITFIT_FUZZ=ON -DBUILD_TESTING=OFF
 *   cmake --build build-fuzz --target fuzz_job
 *   build-fuzz/tests/fuzz/fuzz_job -max_len=4096 -timeout=10 -close_fd_mask=2 \
 *       -dict=tests/fuzz/job.dict build-fuzz/corpus_job tests/fuzz/corpus_job
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/job.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Inputs accepted as job files so far (the corpus replay checks that its valid seeds are). */
static size_t fuzz_job_accepted;

static char job_tmp[] = "/tmp/jitfit-fuzz-job-XXXXXX";
static const char *const job_files[][2] = {
    {"m.jf", "var x\nparam a = 1\ny ~ a*x\n"},
    {"d.csv", "x,y,s\n1,2,0.1\n2,4,0.1\n"},
    {"p0.csv", "g,a\nA,1\n"},
    {"job.ini", ""},
};

static void job_dir_remove(void) {
    for (size_t i = 0; i < sizeof job_files / sizeof job_files[0]; i++) {
        char path[sizeof job_tmp + 16];
        snprintf(path, sizeof path, "%s/%s", job_tmp, job_files[i][0]);
        unlink(path);
    }
    rmdir(job_tmp);
}

/* A private directory holding job.ini and the files it may name; made once per process and
 * removed at its exit. */
static const char *job_dir(void) {
    static const char *dir;
    if (!dir) {
        if (!mkdtemp(job_tmp)) abort();
        dir = job_tmp;
        atexit(job_dir_remove);
        for (size_t i = 0; i < sizeof job_files / sizeof job_files[0]; i++) {
            const char *const *files = job_files[i];
            char path[sizeof job_tmp + 16];
            snprintf(path, sizeof path, "%s/%s", dir, files[0]);
            FILE *f = fopen(path, "w");
            if (!f) abort();
            fputs(files[1], f);
            fclose(f);
        }
    }
    return dir;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    snprintf(path, sizeof path, "%s/job.ini", job_dir());
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    jf_job job;
    int rc = jf_job_read(path, &job);
    if (rc == 0) {
        fuzz_job_accepted++;
        if (job.nfits == 0 || !job.fits || !job.lines || !job.path) abort();
        for (size_t i = 0; i < job.nfits; i++) {
            const jf_spec *s = &job.fits[i];
            if (!s->name || !s->model || !s->data) abort();
            jf_spec c;
            if (jf_spec_copy(&c, s) != 0) abort();
            if (!c.name || strcmp(c.name, s->name) != 0 || strcmp(c.model, s->model) != 0) abort();
            jf_spec_free(&c);
        }
    } else if (rc != 1 || job.nfits != 0 || job.fits || job.path) {
        abort();
    }
    jf_job_free(&job);
    return 0;
}
