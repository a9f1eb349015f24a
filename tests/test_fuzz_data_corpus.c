/* Replays the data reader's fuzz corpus (tests/fuzz/corpus_data) through the libFuzzer harness
 * itself (tests/fuzz/fuzz_data.c, compiled in here), so the contract checks it makes run in
 * every build and every input the fuzzer ever found stays a test. The harness aborts on a
 * broken contract, which fails this test. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/data.c"
#include "cli/npy.c"
#include "cli/util.c"
#include "tests/fuzz/fuzz_data.c"
#include "tests/testlib.h"

/* One corpus file through the harness, which aborts on a broken contract. */
static void replay(const char *name, const char *bytes, size_t len, void *ctx) {
    (void)name;
    (void)ctx;
    CHECK(LLVMFuzzerTestOneInput((const uint8_t *)bytes, len) == 0);
}

int main(void) {
    size_t files = jf_test_replay_dir(JF_SOURCE_DIR "/tests/fuzz/corpus_data", replay, NULL);
    CHECK(files >= 10);
    printf("replayed %zu corpus files\n", files);
    return jf_test_finish();
}
