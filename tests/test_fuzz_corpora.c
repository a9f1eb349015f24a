/* Replays the corpora of the data, job-file and fit fuzzers (tests/fuzz/corpus_data,
 * corpus_job, corpus_fit) through the libFuzzer harnesses themselves (tests/fuzz/fuzz_*.c,
 * compiled in here under their own names), so the contract checks they make run in every
 * build and every input a fuzzer ever found stays a test. A harness aborts on a broken
 * contract, which fails this test. (The model-text corpus has its own test,
 * test_fuzz_corpus.c, with per-file expectations.) */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/data.c"
#include "cli/job.c"
#include "cli/npy.c"
#include "cli/spec.c"
#include "cli/util.c"
#define LLVMFuzzerTestOneInput fuzz_data_input
#include "tests/fuzz/fuzz_data.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_job_input
#include "tests/fuzz/fuzz_job.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_fit_input
#include "tests/fuzz/fuzz_fit.c"
#undef LLVMFuzzerTestOneInput
#include "tests/testlib.h"

typedef int (*harness_fn)(const uint8_t *data, size_t size);

/* One corpus file through a harness (ctx). Of the fit corpus, a file named ok_* holds a model
 * that compiles: it must be fitted. */
static void replay(const char *name, const char *bytes, size_t len, void *ctx) {
    harness_fn fn = (harness_fn)(uintptr_t)ctx;
    size_t fitted = fuzz_fit_fitted;
    if (fn == fuzz_fit_input && getenv("JITFIT_FUZZ_FIT_CORPUS"))
        fprintf(stderr, "corpus_fit: %s\n", name); /* a campaign: which input broke it */
    CHECK(fn((const uint8_t *)bytes, len) == 0);
    if (fn == fuzz_fit_input && strncmp(name, "ok_", 3) == 0 &&
        !CHECK(fuzz_fit_fitted == fitted + 1))
        fprintf(stderr, "corpus_fit/%s: its model was not fitted\n", name);
}

static size_t replay_corpus(const char *dir, harness_fn fn) {
    return jf_test_replay_dir(dir, replay, (void *)(uintptr_t)fn);
}

int main(void) {
    size_t nd = replay_corpus(JF_SOURCE_DIR "/tests/fuzz/corpus_data", fuzz_data_input);
    size_t nj = replay_corpus(JF_SOURCE_DIR "/tests/fuzz/corpus_job", fuzz_job_input);
    /* $JITFIT_FUZZ_FIT_CORPUS: another corpus for the fit harness (a fuzzer's, for a campaign
     * with $JITFIT_FUZZ_FIT_BACKEND, see fuzz_fit.c) */
    const char *fc = getenv("JITFIT_FUZZ_FIT_CORPUS");
    size_t nf = replay_corpus(fc && *fc ? fc : JF_SOURCE_DIR "/tests/fuzz/corpus_fit", fuzz_fit_input);
    CHECK(nd >= 10 && nj >= 5 && nf >= 5);
    /* the job corpus's valid seeds (examples/jobs.ini, every key once, [defaults] after a
     * fit) are accepted */
    CHECK(fuzz_job_accepted >= 3);
    printf("replayed %zu data files, %zu job files (%zu accepted), %zu models (%zu fitted)\n", nd,
           nj, fuzz_job_accepted, nf, fuzz_fit_fitted);
    return jf_test_finish();
}
