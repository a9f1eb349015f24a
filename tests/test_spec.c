/* Fit settings as `jitfit fit` options and job-file keys share them (cli/spec.c): values that
 * need more than the end-to-end CLI tests show, read back from the spec. Memory sizes
 * (max_gpu_mem): units as GNU tools read them (K/KiB = 1024, kB = 1000, case-insensitive), the
 * byte count exact, and every malformed or out-of-range size refused with the same message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/spec.c"
#include "cli/util.c"
#include "tests/testlib.h"

static void test_sizes(void) {
    static const struct {
        const char *text;
        size_t bytes;
    } ok[] = {
        {"1", 1},          {"7b", 7},           {"7B", 7},
        {"1e6", 1000000},  {"512M", 536870912}, {"512mib", 536870912},
        {"3kB", 3000},     {"3K", 3072},        {"1.5GiB", 1610612736},
        {"2G", 2147483648u}, {"2GB", 2000000000}, {"1T", (size_t)1 << 40},
        {"0.75k", 768},    {"1.0009", 1},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        jf_spec s;
        jf_spec_init(&s);
        char *msg = NULL;
        int rc = jf_spec_set(&s, "max_gpu_mem", ok[i].text, NULL, NULL, &msg);
        if (!CHECK(rc == JF_SPEC_OK && s.opts.max_gpu_mem == ok[i].bytes))
            fprintf(stderr, "  '%s': rc %d, %zu bytes (want %zu)\n", ok[i].text, rc,
                    s.opts.max_gpu_mem, ok[i].bytes);
        free(msg);
        jf_spec_free(&s);
    }
    static const char *const bad[] = {"0", "-1", "0.5", "12X", "M", "KiB", "1e30", "inf", "nan",
                                      "1 M", "1MM", "2e", "0x10", "1e19"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        jf_spec s;
        jf_spec_init(&s);
        char *msg = NULL;
        int rc = jf_spec_set(&s, "max_gpu_mem", bad[i], NULL, NULL, &msg);
        if (!CHECK(rc == JF_SPEC_BAD)) fprintf(stderr, "  '%s' accepted\n", bad[i]);
        CHECK_CONTAINS(msg, "is not a memory size");
        CHECK(s.opts.max_gpu_mem == 0);
        free(msg);
        jf_spec_free(&s);
    }
    /* NULL text or NULL bytes: -1, as the header says, not a crash */
    size_t bytes = 7;
    CHECK(jf_memory_size_from_text(NULL, &bytes) == -1 && bytes == 7);
    CHECK(jf_memory_size_from_text("1G", NULL) == -1);
    /* the default: no limit of the caller's */
    CHECK(jf_fit_options_default().max_gpu_mem == 0);
}

int main(void) {
    test_sizes();
    return jf_test_finish();
}
