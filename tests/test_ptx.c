/* The CUDA backend without a GPU: the generated CUDA source of every test model (one per builtin,
 * the damped sine, NIST formulas, a 20-parameter model) goes through NVRTC to PTX for
 * compute_80 and compute_90, and each PTX is assembled with `ptxas -arch=sm_80` / `sm_90`, so a
 * source that NVRTC accepts but ptxas rejects (or that needs something unresolved) fails here,
 * on CI, not on a user's GPU. The GPU solver's kernels (solver/lm_cuda.c) likewise. Also: a
 * CUBIN for sm_90 straight from NVRTC, the loss-specialised normal_eq, NVRTC's error path, that
 * the locale survives NVRTC, and the driver status line.
 *
 * JITFIT_PTXAS_VERBOSE=1 prints ptxas -v's report for every module assembled (registers, spill
 * stores and loads, stack frame per kernel; docs/PERFORMANCE.md, "GPU modules: compile time
 * and registers").
 *
 * SKIPs (exit 77) only when libnvrtc cannot be loaded or ptxas cannot be found ($JITFIT_PTXAS,
 * else bin/ptxas of the toolkit libnvrtc came from, else PATH).
 */
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen/emit.h"
#include "runtime/cuda_api.h"
#include "runtime/jit_nvrtc.h"
#include "solver/solver.h"
#include "tests/testlib.h"

static const char *const models[] = {
    "a*exp(b*x)", "a*log(b*x + 3)", "a*log10(b*x + 3)", "a*sqrt(b*x + 3)", "a*cbrt(b*x - 1)",
    "a*abs(b*x - 1)", "a*sin(b*x)", "a*cos(b*x)", "a*tan(b*x)", "a*asin(b*x/5)", "a*acos(b*x/5)",
    "a*atan(b*x)", "a*sinh(b*x)", "a*cosh(b*x)", "a*tanh(b*x)", "a*erf(b*x)", "a*erfc(b*x)",
    "a*pow(x + 4, b)", "a*atan2(x, b)", "min(a*x, b)", "max(a*x, b)", "hypot(a*x, b)",
    "a*x^3 + b*x^-2 + a^0.5", "if(x < a, b*x, a*b)",
    "(x >= a)*b + (x <= a)*b^2 + (x == a) + (x != b)*a + (x > b)*a", "pi*a*x + exp(1)*b",
    "a*exp(-b*x)*sin(c*x+d)+e",
    /* NIST StRD formulas */
    "b1*(1-exp(-b2*x))", "exp(-b1*x)/(b2+b3*x)", "b1*exp(-b2*x) + b3*exp(-b4*x) + b5*exp(-b6*x)",
    "b1*exp(-b2*x) + b3*exp(-(x-b4)^2/b5^2) + b6*exp(-(x-b7)^2/b8^2)", "b1*x^b2",
    "(b1+b2*x+b3*x^2+b4*x^3)/(1+b5*x+b6*x^2+b7*x^3)", "b1*(1-(1+2*b2*x)^(-0.5))",
    "b1 - b2*x - atan(b3/(x-b4))/pi", "b1*(x^2+x*b2)/(x^2+x*b3+b4)", "b1/(1+exp(b2-b3*x))",
    "(b1/b2)*exp(-0.5*((x-b3)/b2)^2)",
    /* 20 parameters: five Gaussian peaks on a cubic baseline */
    "a1*exp(-((x-m1)/s1)^2) + a2*exp(-((x-m2)/s2)^2) + a3*exp(-((x-m3)/s3)^2) + "
    "a4*exp(-((x-m4)/s4)^2) + a5*exp(-((x-m5)/s5)^2) + c0 + c1*x + c2*x^2 + c3*x^3 + c4*x^4",
};

static char ptxas[8192];

static int executable(const char *p) { return access(p, X_OK) == 0; }

static int find_ptxas(void) {
    const char *env = getenv("JITFIT_PTXAS");
    if (env && *env) {
        snprintf(ptxas, sizeof ptxas, "%s", env);
        return executable(ptxas);
    }
    const char *lib = jf_nvrtc_library_path();
    if (lib && *lib) {
        /* <toolkit>/lib[64]/libnvrtc.so → <toolkit>/bin/ptxas */
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", lib);
        char *slash = strrchr(dir, '/');
        if (slash) {
            *slash = '\0';
            snprintf(ptxas, sizeof ptxas, "%s/../bin/ptxas", dir);
            if (executable(ptxas)) return 1;
        }
    }
    const char *path = getenv("PATH");
    while (path && *path) {
        const char *e = strchr(path, ':');
        size_t len = e ? (size_t)(e - path) : strlen(path);
        snprintf(ptxas, sizeof ptxas, "%.*s/ptxas", (int)len, path);
        if (len && executable(ptxas)) return 1;
        path += len + (e ? 1 : 0);
    }
    return 0;
}

/* The model text with its variables: x alone, or x and y when xy (the 2-D Gaussian). */
static jf_model *compile_vars(const char *text, int xy) {
    static const char *const vars2[] = {"x", "y"};
    jf_model_options mo = jf_model_options_default();
    if (xy) {
        mo.vars = vars2;
        mo.nvars = 2;
    }
    jf_model *m = NULL;
    jf_diagnostics *d = NULL;
    if (jf_model_compile(text, (size_t)-1, &mo, &m, &d) != JF_OK)
        fprintf(stderr, "cannot compile %s: %s\n", text, d ? jf_diagnostics_text(d) : "?");
    jf_diagnostics_free(d);
    return m;
}

static jf_model *compile(const char *text) { return compile_vars(text, 0); }

/* NVRTC to PTX for compute_<arch>, then ptxas for sm_<arch>. */
static void ptx_and_assemble_entry(const char *src, int arch, const char *what,
                                   const char *tmpdir, const char *entry) {
    unsigned char *img = NULL;
    size_t size = 0;
    char *log = NULL;
    int st = jf_nvrtc_compile(src, arch, 0, &img, &size, &log);
    if (!CHECK(st == JF_OK && img && size > 1 && img[size - 1] == '\0')) {
        fprintf(stderr, "NVRTC compute_%d failed for %s:\n%s\n", arch, what, log ? log : "");
        free(log);
        free(img);
        return;
    }
    char want[128];
    snprintf(want, sizeof want, ".entry %s", entry);
    CHECK(strstr((const char *)img, want) != NULL);
    char ptx[4200], cubin[4200], cmd[8192 + 2 * 4200 + 64];
    snprintf(ptx, sizeof ptx, "%s/k.ptx", tmpdir);
    snprintf(cubin, sizeof cubin, "%s/k.cubin", tmpdir);
    FILE *f = fopen(ptx, "wb");
    if (CHECK(f != NULL)) {
        fwrite(img, 1, size - 1, f);
        fclose(f);
        snprintf(cmd, sizeof cmd, "'%s' -v -arch=sm_%d '%s' -o '%s'", ptxas, arch, ptx, cubin);
        char *out = NULL, *err = NULL;
        int rc = jf_test_run(cmd, &out, &err);
        if (!CHECK(rc == 0))
            fprintf(stderr, "ptxas -arch=sm_%d failed for %s:\n%s\n", arch, what, err ? err : "");
        else if (getenv("JITFIT_PTXAS_VERBOSE"))
            printf("ptxas -v sm_%d, %s (%s):\n%s", arch, what, entry, err ? err : "");
        free(out);
        free(err);
    }
    free(log);
    free(img);
}

static void ptx_and_assemble(const char *src, int arch, const char *what, const char *tmpdir) {
    ptx_and_assemble_entry(src, arch, what, tmpdir, "jf_normal_eq");
}

/* The GPU solver's own kernels (solver/lm_cuda.c): the device-resident LM loop, i.e. the very
 * text of solver/step.h and solver/lm_core.h that the CPU tests run on the host (test_resident),
 * plus the start/judge kernels; and the WHILE node's condition kernel, whose call to
 * cudaGraphSetConditional stays an external the driver resolves at load time. */
static void check_solver_module(const char *tmpdir) {
    char *src = jf_lm_cuda_source(0);
    char *cond = jf_lm_cuda_source(1);
    if (CHECK(src != NULL && cond != NULL)) {
        CHECK_CONTAINS(src, "JF_STEP_H");
        CHECK_CONTAINS(src, "JF_LM_CORE_H");
        for (int arch = 80; arch <= 90; arch += 10) {
            ptx_and_assemble_entry(src, arch, "the solver module", tmpdir, "jf_lm_step");
            ptx_and_assemble_entry(cond, arch, "the WHILE condition", tmpdir, "jf_lm_loop_cond");
        }
        unsigned char *img = NULL;
        size_t size = 0;
        if (CHECK(jf_nvrtc_compile(cond, 90, 0, &img, &size, NULL) == JF_OK))
            CHECK_CONTAINS((const char *)img, ".extern .func cudaGraphSetConditional");
        free(img);
    }
    free(src);
    free(cond);
    /* the batch modules (model kernels + jf_fit_sums + lm_core + the warp-, block- or
     * thread-per-fit kernel, with the finish on the device), for the damped sine and the 2D
     * Gaussian of issue 6, fp64 and fp32, linear and any loss: each kernel in its module */
    static const char *const batch_models[] = {
        "a*exp(-b*x)*sin(c*x+d)+e", "A*exp(-((x-x0)^2+(y-y0)^2)/(2*s^2))+b",
        /* 8 parameters: the most that keep their sums in registers */
        "A1*exp(-(x-m1)^2/(2*s1^2))+A2*exp(-(x-m2)^2/(2*s2^2))+c+d*x",
        /* 10 parameters: the block-per-fit kernel with tiled sums */
        "A1*exp(-(x-m1)^2/(2*s1^2))+A2*exp(-(x-m2)^2/(2*s2^2))+A3*exp(-(x-m3)^2/(2*s3^2))+c"};
    for (int i = 0; i < 4; i++) {
        jf_model *m = compile_vars(batch_models[i], i == 1);
        if (!CHECK(m != NULL)) continue;
        CHECK(jf_batch_cuda_supported(jf_model_num_params(m)));
        /* every kernel of every register-sum model in fp64; in fp32 (with a loss) one kernel
         * per model, each kernel once across them: NVRTC's time is this test's */
        for (int single = 0; single < 2; single++)
            for (int kind = 0; kind < (i < 3 && !single ? 3 : 1); kind++) {
                jf_batch_kernel k = i == 3 ? JF_BATCH_BLOCK
                                    : single ? (jf_batch_kernel)((i + 2) % 3)
                                             : (jf_batch_kernel)kind;
                char *bsrc = jf_batch_cuda_source(m, single ? -1 : 0, single, k);
                const char *entry = jf_batch_cuda_kernel_name(k);
                if (CHECK(bsrc != NULL)) {
                    CHECK_CONTAINS(bsrc, "jf_fit_sums");
                    /* the one kernel: a module compiles only what its batch runs */
                    static const char *const entries[] = {"jf_batch_lm(", "jf_batch_lm_block(",
                                                          "jf_batch_lm_thread("};
                    for (int e = 0; e < 3; e++)
                        CHECK((strstr(bsrc, entries[e]) != NULL) == (e == (int)k));
                    /* register sums: the finish on the device, in every kernel */
                    if (i < 3 && k == JF_BATCH_BLOCK)
                        CHECK_CONTAINS(bsrc, "jf_batch_finish_block(xf, ldx, yf, wf, 0, npts");
                    if (i < 3 && k == JF_BATCH_WARP)
                        CHECK_CONTAINS(bsrc, "jf_batch_finish(xf, ldx, y, w, off[f], off[f + 1], "
                                             "lane, 32");
                    if (i < 3 && k == JF_BATCH_THREAD) {
                        CHECK_CONTAINS(bsrc, "jf_batch_finish(xf, ldx, y, w, off[f], off[f + 1], "
                                             "0, 1");
                        CHECK_CONTAINS(bsrc, "#define JF_BATCH_WS "); /* its workspace, sized */
                    }
                    /* ... and the statistics for results as columns */
                    if (i < 3) CHECK_CONTAINS(bsrc, "__noinline__ void jf_batch_stats(");
                    ptx_and_assemble_entry(bsrc, 90, batch_models[i], tmpdir, entry);
                }
                free(bsrc);
            }
        jf_model_free(m);
    }
    /* register sums up to 8 parameters, tiled sums up to what a block's shared memory holds */
    CHECK(jf_batch_cuda_supported(8) && jf_batch_cuda_supported(9) && jf_batch_cuda_supported(60));
    CHECK(!jf_batch_cuda_supported(200));
}

/* What is compiled for a GPU: a CUBIN for an architecture NVRTC supports, PTX for the newest
 * older one for a GPU newer than NVRTC (the driver compiles it), nothing for one older than all;
 * and this NVRTC's list, with PTX for its newest architecture standing in for a newer GPU. */
static void test_target(void) {
    static const int archs[] = {75, 80, 86, 87, 89, 90, 100, 120};
    int cubin = -1;
    CHECK(jf_nvrtc_target(90, archs, 8, &cubin) == 90 && cubin == 1);
    CHECK(jf_nvrtc_target(75, archs, 8, &cubin) == 75 && cubin == 1);
    CHECK(jf_nvrtc_target(121, archs, 8, &cubin) == 120 && cubin == 0);
    CHECK(jf_nvrtc_target(95, archs, 8, &cubin) == 90 && cubin == 0);
    CHECK(jf_nvrtc_target(70, archs, 8, &cubin) == 0 && cubin == 0);
    CHECK(jf_nvrtc_target(61, NULL, 0, &cubin) == 61 && cubin == 1); /* NVRTC < 11.2: unknown */

    const int *have;
    int nhave;
    jf_nvrtc_archs(&have, &nhave);
    if (!CHECK(nhave > 0)) return; /* every NVRTC this project builds with has the list */
    for (int i = 1; i < nhave; i++) CHECK(have[i - 1] < have[i]);
    int newest = have[nhave - 1];
    CHECK(jf_nvrtc_target(90, have, nhave, &cubin) == 90 && cubin == 1);
    int arch = jf_nvrtc_target(newest + 1, have, nhave, &cubin);
    CHECK(arch == newest && cubin == 0);
    jf_model *m = compile("a*exp(-b*x)*sin(c*x+d)+e");
    jf_emit_options o = jf_emit_options_default(JF_EMIT_CUDA);
    char *src = m ? jf_emit(m, &o) : NULL;
    unsigned char *img = NULL;
    size_t size = 0;
    CHECK(src && jf_nvrtc_compile(src, arch, cubin, &img, &size, NULL) == JF_OK);
    CHECK(img && strstr((const char *)img, ".entry jf_normal_eq"));
    free(img);
    free(src);
    jf_model_free(m);
}

int main(void) {
    char why[512];
    if (jf_nvrtc_load(why, sizeof why) != JF_OK) return jf_test_skip(why);
    if (!find_ptxas()) return jf_test_skip("ptxas not found (set JITFIT_PTXAS)");
    int major, minor;
    jf_nvrtc_version(&major, &minor);
    printf("NVRTC %d.%d from %s, ptxas %s\n", major, minor, jf_nvrtc_library_path(), ptxas);

    char tmpdir[] = "/tmp/jf_test_ptx_XXXXXX";
    if (!CHECK(mkdtemp(tmpdir) != NULL)) return jf_test_finish();
    check_solver_module(tmpdir);

    /* The driver part reports itself in one line either way. */
    char status[256];
    int have = jf_cuda_status(status, sizeof status);
    printf("CUDA driver: %s\n", status);
    CHECK(strncmp(status, have ? "available: " : "unavailable: ", have ? 11 : 13) == 0);

    /* A locale with a decimal comma, if installed: NVRTC must neither see nor change it. */
    const char *loc = setlocale(LC_NUMERIC, "de_DE.UTF-8");
    char before[128];
    snprintf(before, sizeof before, "%s", setlocale(LC_ALL, NULL));

    size_t n = sizeof models / sizeof models[0];
    for (size_t i = 0; i < n; i++) {
        jf_model *m = compile(models[i]);
        if (!CHECK(m != NULL)) continue;
        jf_emit_options o = jf_emit_options_default(JF_EMIT_CUDA);
        char *src = jf_emit(m, &o);
        if (CHECK(src != NULL)) {
            ptx_and_assemble(src, 80, models[i], tmpdir);
            ptx_and_assemble(src, 90, models[i], tmpdir);
        }
        free(src);
        /* single precision (fp32 model, fp64 sums): the float overloads of prelude.h */
        o.cuda_single = 1;
        src = jf_emit(m, &o);
        if (CHECK(src != NULL)) {
            CHECK(strstr(src, "const double p0") == NULL && strstr(src, "const float p0") != NULL);
            ptx_and_assemble(src, 80, models[i], tmpdir);
        }
        free(src);
        jf_model_free(m);
    }
    {
        /* the single-precision damped sine computes in f32 and sums in f64 */
        jf_model *ms = compile("a*exp(-b*x)*sin(c*x+d)+e");
        jf_emit_options o = jf_emit_options_default(JF_EMIT_CUDA);
        o.cuda_single = 1;
        char *src = ms ? jf_emit(ms, &o) : NULL;
        unsigned char *img = NULL;
        size_t size = 0;
        if (CHECK(src && jf_nvrtc_compile(src, 90, 0, &img, &size, NULL) == JF_OK)) {
            CHECK_CONTAINS((const char *)img, ".f32");
            CHECK_CONTAINS((const char *)img, "add.rn.f64");
        }
        free(img);
        free(src);
        jf_model_free(ms);
    }
    CHECK_STREQ(setlocale(LC_ALL, NULL), before);
    if (loc) setlocale(LC_NUMERIC, "C");

    /* CUBIN straight from NVRTC, and the normal_eq built for one loss (all of them). */
    jf_model *m = compile("a*exp(-b*x)*sin(c*x+d)+e");
    if (CHECK(m != NULL)) {
        for (int loss = -1; loss < 5; loss++) {
            jf_emit_options o = jf_emit_options_default(JF_EMIT_CUDA);
            o.cuda_loss = loss;
            char *src = jf_emit(m, &o);
            unsigned char *img = NULL;
            size_t size = 0;
            char *log = NULL;
            int st = src ? jf_nvrtc_compile(src, 90, 1, &img, &size, &log) : JF_ERR_NOMEM;
            if (!CHECK(st == JF_OK && size > 4 && memcmp(img, "\177ELF", 4) == 0))
                fprintf(stderr, "CUBIN (loss %d): %s\n", loss, log ? log : "");
            if (loss == 0) CHECK(src && !strstr(src, "const int L = loss;"));
            free(img);
            free(log);
            free(src);
        }
        /* several models in one unit */
        jf_model *m2 = compile("a*x + b");
        if (m2) {
            const struct jf_model *ms[2] = {m, m2};
            const char *suffixes[2] = {"_0", "_1"};
            jf_emit_options o = jf_emit_options_default(JF_EMIT_CUDA);
            char *src = jf_emit_many(ms, suffixes, 2, &o);
            unsigned char *img = NULL;
            size_t size = 0;
            char *log = NULL;
            CHECK(src && jf_nvrtc_compile(src, 80, 0, &img, &size, &log) == JF_OK);
            CHECK(img && strstr((const char *)img, ".entry jf_reduce_blocks_1"));
            free(img);
            free(log);
            free(src);
            jf_model_free(m2);
        }
        jf_model_free(m);
    }

    test_target();

    /* Errors come back as a status and NVRTC's log. */
    unsigned char *img = NULL;
    size_t size = 0;
    char *log = NULL;
    CHECK(jf_nvrtc_compile("extern \"C\" __global__ void k(double *a) { a[0] = undefined_x; }", 80,
                           0, &img, &size, &log) == JF_ERR_COMPILE);
    CHECK(img == NULL && size == 0);
    CHECK_CONTAINS(log, "undefined_x");
    free(log);

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    jf_test_run(cmd, NULL, NULL);
    return jf_test_finish();
}
