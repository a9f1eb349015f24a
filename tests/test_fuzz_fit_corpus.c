/* Replays the solver's fuzz corpus (tests/fuzz/corpus_fit) through the libFuzzer harness
 * itself (tests/fuzz/fuzz_fit.c, compiled in here), so the contract checks it makes run in
 * every build and every input the fuzzer ever found stays a test. The harness aborts on a
 * broken contract, which fails this test. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_fit.c"
#include "tests/testlib.h"

/* One corpus file through the harness, which aborts on a broken contract; a file named ok_*
 * holds a model that compiles, so it must be fitted. */
static void replay(const char *name, const char *bytes, size_t len, void *ctx) {
    (void)ctx;
    size_t before = fuzz_fit_fitted;
    CHECK(LLVMFuzzerTestOneInput((const uint8_t *)bytes, len) == 0);
    if (strncmp(name, "ok_", 3) == 0 && !CHECK(fuzz_fit_fitted == before + 1))
        fprintf(stderr, "corpus file %s: its model was not fitted\n", name);
}

int main(void) {
    size_t files = jf_test_replay_dir(JF_SOURCE_DIR "/tests/fuzz/corpus_fit", replay, NULL);
    CHECK(files >= 5);
    printf("replayed %zu corpus files, %zu fitted\n", files, fuzz_fit_fitted);
    return jf_test_finish();
}
