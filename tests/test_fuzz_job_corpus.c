/* Replays the job reader's fuzz corpus (tests/fuzz/corpus_job) through the libFuzzer harness
 * itself (tests/fuzz/fuzz_job.c, compiled in here), so the contract checks it makes run in
 * every build and every input the fuzzer ever found stays a test. The harness aborts on a
 * broken contract, which fails this test. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/job.c"
#include "cli/spec.c"
#include "cli/util.c"
#include "tests/fuzz/fuzz_job.c"
#include "tests/testlib.h"

int main(void) {
    const char *dir = JF_SOURCE_DIR "/tests/fuzz/corpus_job";
    DIR *d = opendir(dir);
    if (!CHECK(d != NULL)) return jf_test_finish();
    size_t files = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len = 0;
        char *bytes = NULL;
        FILE *f = fopen(path, "rb");
        if (!CHECK(f != NULL)) continue;
        size_t cap = 1 << 16;
        bytes = malloc(cap);
        if (bytes) len = fread(bytes, 1, cap, f);
        fclose(f);
        if (!CHECK(bytes != NULL)) continue;
        CHECK(LLVMFuzzerTestOneInput((const uint8_t *)bytes, len) == 0);
        free(bytes);
        files++;
    }
    closedir(d);
    CHECK(files >= 5);
    /* the valid seeds (examples/jobs.ini, every key once, [defaults] after a fit) are accepted */
    CHECK(fuzz_job_accepted >= 3);
    printf("replayed %zu corpus files, %zu accepted as job files\n", files, fuzz_job_accepted);
    return jf_test_finish();
}
