/* `jitfit codegen MODEL --target c|cuda`: prints the kernel source the JIT backends compile
 * (codegen/emit_*), so users can see, and compile by hand, exactly what runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../codegen/emit.h"
#include "../runtime/kernels.h"
#include "../solver/solver.h"
#include "commands.h"
#include "util.h"

static int usage(void) {
    fprintf(stderr,
            "usage: jitfit codegen MODEL [--target c|cuda] [--vars x,y] [--shape fused|simd|blocked]\n"
            "                            [--no-prelude]   (-- MODEL for a formula starting with '-')\n");
    return 2;
}

/* Splits "a,b" into *names (a malloc'd array of pointers into a copy kept in *storage): every
 * name, however many (the model compiler says when there are too many variables); empty names
 * are skipped. Returns the count, 0 when out of memory. */
static size_t split_names(const char *text, char **storage, const char ***names) {
    size_t max = 1;
    for (const char *p = text; *p; p++) max += *p == ',';
    *storage = strdup(text);
    *names = malloc(max * sizeof **names);
    size_t n = 0;
    if (!*storage || !*names) return 0;
    for (char *s = *storage, *tok; (tok = strsep(&s, ",")) != NULL;)
        if (*tok) (*names)[n++] = tok;
    return n;
}

int jf_cmd_codegen(int argc, char **argv) {
    const char *model = NULL, *target = "c", *vars = NULL, *shape = NULL;
    int no_prelude = 0, options = 1; /* options: cleared by "--" */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (options && strcmp(a, "--") == 0) {
            options = 0;
            continue;
        }
        if (!options) {
            if (model) {
                jf_cli_error("codegen: unexpected argument '%s'", a);
                return usage();
            }
            model = a;
            continue;
        }
        const char *opts[] = {"--target", "--vars", "--shape"};
        int which = -1;
        for (int o = 0; o < 3; o++) {
            size_t n = strlen(opts[o]);
            if (strncmp(a, opts[o], n) == 0 && (a[n] == '=' || a[n] == '\0')) {
                which = o;
                if (a[n] == '=') v = a + n + 1;
                else if (i + 1 < argc) v = argv[++i];
                else {
                    jf_cli_error("codegen: option %s needs a value", opts[o]);
                    return 2;
                }
            }
        }
        if (which == 0) target = v;
        else if (which == 1) vars = v;
        else if (which == 2) shape = v;
        else if (strcmp(a, "--no-prelude") == 0) no_prelude = 1;
        else if (a[0] == '-' && a[1] != '\0' && !model) {
            jf_cli_error("codegen: unknown option '%s'", a);
            return usage();
        } else if (!model) model = a;
        else {
            jf_cli_error("codegen: unexpected argument '%s'", a);
            return usage();
        }
    }
    if (!model) return usage();
    jf_emit_options o;
    if (strcmp(target, "c") == 0) o = jf_emit_options_default(JF_EMIT_C);
    else if (strcmp(target, "cuda") == 0) o = jf_emit_options_default(JF_EMIT_CUDA);
    else {
        jf_cli_error("codegen: unknown target '%s' (use c or cuda)", target);
        return 2;
    }
    if (shape) {
        if (strcmp(shape, "fused") == 0) o.neq_shape = JF_NEQ_FUSED;
        else if (strcmp(shape, "simd") == 0) o.neq_shape = JF_NEQ_SIMD;
        else if (strcmp(shape, "blocked") == 0) o.neq_shape = JF_NEQ_BLOCKED;
        else {
            jf_cli_error("codegen: unknown shape '%s' (use fused, simd or blocked)", shape);
            return 2;
        }
    }
    o.with_prelude = !no_prelude;

    char *storage = NULL;
    const char **names = NULL;
    size_t nvars = vars ? split_names(vars, &storage, &names) : 0;
    if (vars && nvars == 0) {
        int nomem = !storage || !names;
        free(storage);
        free(names);
        if (nomem) {
            jf_cli_error("codegen: out of memory");
            return 1;
        }
        jf_cli_error("codegen: --vars needs a comma-separated list of names");
        return 2;
    }
    jf_model *m = jf_cli_load_model(model, nvars ? names : NULL, nvars);
    free(storage);
    free(names);
    if (!m) return 1;
    /* what the JIT builds: above JF_LARGE_P parameters (the GPU's JF_GPU_LARGE_P for CUDA) there
     * is no normal_eq, the sums come from blocks of jacobian_row rows through BLAS (cuBLAS) */
    size_t np = jf_model_num_params(m);
    o.no_normal_eq = o.target == JF_EMIT_CUDA ? jf_gpu_large_p(np) : jf_kernels_large_p(np);
    char *src = jf_emit(m, &o);
    jf_model_free(m);
    if (!src) {
        jf_cli_error("codegen: out of memory");
        return 1;
    }
    fputs(src, stdout);
    free(src);
    return fflush(stdout) == 0 ? 0 : 1;
}
