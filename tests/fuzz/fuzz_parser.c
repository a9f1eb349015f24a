/* libFuzzer harness for the model compiler's front door, jf_model_compile: model text of any
 * bytes → parse, resolve, DAG, derivatives, and the rendering of diagnostics and expressions.
 *
 * Beyond "no crash, no leak, no undefined behaviour" (the sanitizers check those), it checks the
 * API contract on every input: success means a model and no errors; failure means no model,
 * a parse/limit status and at least one error diagnostic. A violated contract aborts, so the
 * fuzzer records the input as a crash. Every crash found becomes a file in corpus/, which
 * tests/test_fuzz_corpus.c replays in the ordinary test suite.
 *
 * Build (a separate configure, since the library must be instrumented by clang):
 *   CC=clang cmake -S . -B build-fuzz -DJITFIT_FUZZ=ON -DBUILD_TESTING=OFF
 *   cmake --build build-fuzz --target fuzz_parser
 *   build-fuzz/tests/fuzz/fuzz_parser -max_len=4096 -timeout=10 \
 *       -dict=tests/fuzz/jitfit.dict build-fuzz/corpus tests/fuzz/corpus
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "jitfit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    jf_model_options o = jf_model_options_default();
    /* Keep each input cheap: the derivatives of a large model dominate otherwise. */
    o.max_nodes = 1u << 16;
    jf_model *m = NULL;
    jf_diagnostics *d = NULL;
    int st = jf_model_compile((const char *)data, size, &o, &m, &d);
    if (st == JF_OK) {
        if (!m || jf_diagnostics_errors(d) != 0) abort();
        char *t = jf_model_expression_text(m);
        jf_free(t);
        for (size_t k = 0; k < jf_model_num_params(m); k++) {
            if (!jf_model_param_name(m, k)) abort();
            t = jf_model_derivative_text(m, k);
            jf_free(t);
        }
    } else {
        if (m) abort();
        if (st != JF_ERR_PARSE && st != JF_ERR_LIMIT && st != JF_ERR_NOMEM) abort();
        if (st != JF_ERR_NOMEM && (!d || jf_diagnostics_errors(d) == 0)) abort();
    }
    if (d && !jf_diagnostics_text(d)) abort();
    jf_model_free(m);
    jf_diagnostics_free(d);
    return 0;
}
