/* Replays the fuzzer's seed corpus (tests/fuzz/corpus) through jf_model_compile in the ordinary
 * test suite, with the same contract checks as the libFuzzer harness (tests/fuzz/fuzz_parser.c),
 * so every crash the fuzzer ever found stays fixed in builds without clang or libFuzzer. Files
 * named ok_* must compile; err_* and hostile_* only must not crash (most are errors).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/jitfit.h"
#include "tests/testlib.h"

static void replay(const char *name, const char *text, size_t len, void *ctx) {
    (void)ctx;
    jf_model_options o = jf_model_options_default();
    o.max_nodes = 1u << 16; /* as the harness */
    o.source_name = name;
    jf_model *m = NULL;
    jf_diagnostics *d = NULL;
    int st = jf_model_compile(text, len, &o, &m, &d);
    int ok = 1;
    if (st == JF_OK) {
        ok &= CHECK(m != NULL && jf_diagnostics_errors(d) == 0);
        char *t = jf_model_expression_text(m);
        ok &= CHECK(t != NULL);
        jf_free(t);
        for (size_t k = 0; k < jf_model_num_params(m); k++) {
            t = jf_model_derivative_text(m, k);
            ok &= CHECK(t != NULL);
            jf_free(t);
        }
    } else {
        ok &= CHECK(m == NULL);
        ok &= CHECK(st == JF_ERR_PARSE || st == JF_ERR_LIMIT);
        ok &= CHECK(d != NULL && jf_diagnostics_errors(d) >= 1);
    }
    if (d) ok &= CHECK(jf_diagnostics_text(d) != NULL);
    if (strncmp(name, "ok_", 3) == 0) ok &= CHECK(st == JF_OK);
    if (strncmp(name, "err_", 4) == 0) ok &= CHECK(st != JF_OK);
    if (!ok)
        fprintf(stderr, "corpus file %s: status %d\n%s", name, st,
                d ? jf_diagnostics_text(d) : "");
    jf_model_free(m);
    jf_diagnostics_free(d);
}

int main(void) {
    size_t files = jf_test_replay_dir(JF_SOURCE_DIR "/tests/fuzz/corpus", replay, NULL);
    CHECK(files >= 20);
    printf("replayed %zu corpus files\n", files);
    return jf_test_finish();
}
