/* `jitfit doctor` and the device choice, through the built binary and the internal API.
 *
 * What doctor must print depends on the machine (a GPU or not, NVRTC or not), so the
 * expectations come from the library's own probe (jf_device_probe): the test checks that the
 * command reports what the library knows, in its documented one-fact-per-line form, that it
 * writes nothing into the kernel cache, and that the CPU self-tests converge. The device choice
 * is checked both as a function (jf_device_choose, jf_device_fp64_ratio) and through
 * `jitfit fit --device gpu|auto`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/cuda_emu.h"
#include "runtime/device.h"
#include "tests/testlib.h"

#define EXAMPLE_JF "'" JF_SOURCE_DIR "/examples/damped_sine.jf'"
#define EXAMPLE_CSV "'" JF_SOURCE_DIR "/examples/damped_sine.csv'"

/* Runs `ENV jitfit ARGS`; returns the exit status. */
static int jf(const char *env, const char *args, char **out, char **err) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s '%s' %s", env, jf_test_cli(), args);
    return jf_test_run(cmd, out, err);
}

/* The line of text starting with prefix (a static copy, "" when absent). */
static const char *line_of(const char *text, const char *prefix) {
    static char buf[1024];
    buf[0] = '\0';
    size_t pl = strlen(prefix);
    for (const char *p = text; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len >= pl && strncmp(p, prefix, pl) == 0) {
            snprintf(buf, sizeof buf, "%.*s", (int)len, p);
            return buf;
        }
        p = e ? e + 1 : NULL;
    }
    return buf;
}

static void test_doctor(const jf_device_info *di) {
    char dir[] = "/tmp/jf-doctor-XXXXXX";
    if (!CHECK(mkdtemp(dir) != NULL)) return;
    char env[256], want[512], *out = NULL, *err = NULL;
    snprintf(env, sizeof env, "JITFIT_CACHE_DIR='%s'", dir);
    int rc = jf(env, "doctor", &out, &err);
    if (!CHECK(rc == 0)) fprintf(stderr, "  stdout:\n%s\n  stderr:\n%s\n", out, err);
    if (!out) out = strdup("");

    CHECK_CONTAINS(line_of(out, "jitfit: "), JITFIT_VERSION);
    CHECK_CONTAINS(line_of(out, "cpu: "), "core");
    CHECK(strlen(line_of(out, "c compiler: ")) > strlen("c compiler: "));
    CHECK_CONTAINS(line_of(out, "c compiler check: "), "ok");
    CHECK_CONTAINS(line_of(out, "plots: "), "plots: cairo 1."); /* opened at run time */
    /* doctor looks at the cache and writes nothing into it */
    snprintf(want, sizeof want, "kernel cache: %s (ok, 0 entries, 0 bytes)", dir);
    CHECK_STREQ(line_of(out, "kernel cache: "), want);

    if (di->nvrtc_ok) {
        snprintf(want, sizeof want, "(version %d.%d)", di->nvrtc_major, di->nvrtc_minor);
        CHECK_CONTAINS(line_of(out, "nvrtc: "), want);
    } else {
        printf("note: libnvrtc is unavailable here (%s): the NVRTC version is not checked\n",
               di->nvrtc_why);
        CHECK_CONTAINS(line_of(out, "nvrtc: "), "unavailable: ");
    }
    if (!di->driver_loaded) {
        CHECK_CONTAINS(line_of(out, "cuda driver: "), "cuda driver: unavailable: ");
        CHECK_CONTAINS(line_of(out, "self-test cuda: "), "unavailable: ");
    } else {
        CHECK_CONTAINS(line_of(out, "cuda driver: "),
                       jf_cuda_emulated() ? "cuda driver: the CUDA emulator (JITFIT_CUDA_EMULATE; "
                                            "no libcuda), version "
                                          : "cuda driver: loaded, version ");
        for (int i = 0; i < di->ndescribed; i++) {
            char p[64];
            snprintf(p, sizeof p, "gpu %d: ", i);
            CHECK_CONTAINS(line_of(out, p), di->gpu[i].name);
            snprintf(p, sizeof p, "gpu %d memory: ", i);
            CHECK_CONTAINS(line_of(out, p), "GiB total");
            snprintf(p, sizeof p, "gpu %d fp64: ", i);
            CHECK(line_of(out, p)[0] != '\0');
            snprintf(p, sizeof p, "gpu %d conditional graph nodes (WHILE): ", i);
            CHECK(line_of(out, p)[0] != '\0');
            /* what the JIT compiles for it: CUBIN, PTX for a GPU newer than NVRTC, or none */
            snprintf(p, sizeof p, "gpu %d code: ", i);
            const char *code = line_of(out, p);
            if (jf_cuda_emulated()) CHECK_CONTAINS(code, "the emulator runs the CUDA source");
            else
                CHECK(strstr(code, "CUBIN for sm_") || strstr(code, "PTX for compute_") ||
                      strstr(code, "code: none"));
        }
        CHECK_CONTAINS(line_of(out, "self-test cuda: "),
                       di->gpu_ok ? "converged" : "unavailable: ");
    }
    /* the many-parameter path's libraries: probed only with a usable GPU (on a real one, a
     * toolkit without them is a fact, reported as unavailable) */
    char libs[512], libs2[512]; /* line_of's buffer is static */
    snprintf(libs, sizeof libs, "%s", line_of(out, "cublas: "));
    snprintf(libs2, sizeof libs2, "%s", line_of(out, "cusolver: "));
    if (!di->gpu_ok) {
        CHECK_CONTAINS(libs, "not probed (no usable GPU)");
        CHECK_CONTAINS(libs2, "not probed (no usable GPU)");
    } else if (jf_cuda_emulated()) {
        CHECK_CONTAINS(libs, "CBLAS on the CUDA emulator");
        CHECK_CONTAINS(libs2, "LAPACKE on the CUDA emulator");
    } else {
        CHECK(strstr(libs, "ok (handle created)") || strstr(libs, "unavailable: "));
        CHECK(strstr(libs2, "ok (handle created)") || strstr(libs2, "unavailable: "));
    }
    CHECK_CONTAINS(line_of(out, "self-test interp: "), "converged");
    CHECK_CONTAINS(line_of(out, "self-test c: "), "converged");
    CHECK(strstr(out, "FAILED") == NULL);
    free(out);
    free(err);
    out = err = NULL;

    /* a cache directory others can write is reported as refused; JITFIT_NO_CACHE disables */
    CHECK(chmod(dir, 0777) == 0);
    rc = jf(env, "doctor", &out, &err);
    CHECK(rc == 0);
    CHECK_CONTAINS(line_of(out, "kernel cache: "), "(refused: ");
    free(out);
    free(err);
    out = err = NULL;
    CHECK(chmod(dir, 0700) == 0);
    snprintf(env, sizeof env, "JITFIT_CACHE_DIR='%s' JITFIT_NO_CACHE=1", dir);
    rc = jf(env, "doctor", &out, &err);
    CHECK(rc == 0);
    /* the reason says "disabled" once, as `jitfit cache info`'s state line has it */
    CHECK_CONTAINS(line_of(out, "kernel cache: "), "(disabled (JITFIT_NO_CACHE is set), ");
    free(out);
    free(err);
    out = err = NULL;

    /* a broken C compiler fails doctor: fits still run, on the interpreter, but far slower */
    snprintf(env, sizeof env, "JITFIT_CACHE_DIR='%s' JITFIT_CC=/bin/false", dir);
    rc = jf(env, "doctor", &out, &err);
    CHECK(rc == 1);
    CHECK_CONTAINS(line_of(out, "c compiler check: "), "FAILED");
    CHECK_CONTAINS(line_of(out, "self-test c: "), "FAILED: the fit fell back to interp");
    CHECK_CONTAINS(line_of(out, "self-test interp: "), "converged");
    free(out);
    free(err);
    out = err = NULL;

    rc = jf("", "doctor extra", &out, &err);
    CHECK(rc == 2);
    CHECK_CONTAINS(err, "usage: jitfit doctor");
    free(out);
    free(err);
    rmdir(dir);
}

static void test_choose(const jf_device_info *di) {
    char why[512];
    jf_device_request req = {JF_DEVICE_CPU, 100, 3, 1, JF_BACKEND_C, 1, 2, NULL, NULL, 0, 0, NULL};
    CHECK(jf_device_choose(&req, why, sizeof why) == JF_DEVICE_CPU);
    CHECK_STREQ(why, "cpu: requested");

    /* A small fit: auto picks the CPU without probing the GPU (the probe costs a cuInit on GPU
     * machines), whatever the machine has. */
    req.device = JF_DEVICE_AUTO;
    CHECK(jf_device_choose(&req, why, sizeof why) == JF_DEVICE_CPU);
    CHECK_CONTAINS(why, "cpu: small fit (estimated ");

    /* A big one: the GPU when there is one, else the CPU saying why. */
    req.npoints = 100000000;
    int big = jf_device_choose(&req, why, sizeof why);
    if (di->gpu_ok && jf_device_have_gpu_solver()) {
        CHECK(big == JF_DEVICE_GPU);
        CHECK_CONTAINS(why, "gpu: estimated ");
    } else {
        CHECK(big == JF_DEVICE_CPU);
        CHECK_CONTAINS(why, jf_device_have_gpu_solver() ? "cpu: no usable GPU (unavailable: "
                                                        : "cpu: jitfit was built without");
    }
    /* a batch counts the work of all its fits: 10 fits of 100 points are small */
    req.nfits = 10;
    req.npoints = 100;
    CHECK(jf_device_choose(&req, why, sizeof why) == JF_DEVICE_CPU);
    CHECK_CONTAINS(why, "cpu: small fit (estimated ");
    /* a GPU batch keeps one fit's sums in registers (up to 8 parameters) or in a block's
     * shared memory (up to about 80): beyond that, the CPU */
    req.nparams = 200;
    CHECK(jf_device_choose(&req, why, sizeof why) == JF_DEVICE_CPU);
    CHECK_STREQ(why, "cpu: a GPU batch's per-fit sums of 200 parameters do not fit a block's "
                     "shared memory");
    req.device = JF_DEVICE_GPU;
    CHECK(jf_device_choose(&req, why, sizeof why) == -JF_ERR_UNAVAILABLE);
    CHECK_CONTAINS(why, "GPU requested but unavailable: a GPU batch's per-fit sums of 200 ");
    req.nfits = 1;
    req.nparams = 3;

    CHECK(jf_device_choose(&req, why, sizeof why) == (di->gpu_ok ? JF_DEVICE_GPU : -JF_ERR_UNAVAILABLE));
    if (!di->gpu_ok) {
        CHECK(strncmp(why, "GPU requested but unavailable: ", 31) == 0);
        CHECK_CONTAINS(why, jf_device_have_gpu_solver() ? di->gpu_why + 13 : "without the CUDA");
    }

    req.device = (jf_device)7;
    CHECK(jf_device_choose(&req, why, sizeof why) == -JF_ERR_ARG);

    /* the estimates behind auto: a fit costs the CPU something besides its passes, and a GPU
     * batch costs the host per fit, less when its results go into arrays (the device's
     * statistics records) than into result objects (the host assembles each) */
    jf_device_request b = {JF_DEVICE_AUTO, 25, 5, 1000000, JF_BACKEND_C, 2, 16, NULL, NULL, 0, 0,
                           NULL};
    double cpu_obj, gpu_obj, cpu_col, gpu_col, cpu_one, gpu_one;
    jf_device_estimate(&b, &cpu_obj, &gpu_obj);
    b.columns = 1;
    jf_device_estimate(&b, &cpu_col, &gpu_col);
    b.nfits = 1;
    jf_device_estimate(&b, &cpu_one, &gpu_one);
    printf("estimates, 1e6 fits of 25 points x 5 parameters on 16 threads: cpu %.3g s, gpu %.3g s "
           "into arrays, %.3g s into objects\n", cpu_col, gpu_col, gpu_obj);
    CHECK(cpu_obj == cpu_col && cpu_col > 1e6 * 1e-5 / 16);
    CHECK(gpu_obj > gpu_col + 1e6 * 5e-7 && gpu_col > gpu_one + 1e6 * 1e-7);
    CHECK(cpu_one > 1e-5 / 16 && cpu_one < cpu_col / 1e5);
    /* one fit whose data are streamed copies them with every pass (15 passes): 10⁹ points are
     * 24 GB as the model counts them (x, y and weights), so ≥ 14 copies more than resident */
    jf_device_request one = {JF_DEVICE_AUTO, 1000000000, 5, 1, JF_BACKEND_C, 1, 16, NULL, NULL,
                             0, 0, NULL};
    double cpu_res, gpu_res, cpu_str, gpu_str;
    jf_device_estimate(&one, &cpu_res, &gpu_res);
    one.streamed = 1;
    jf_device_estimate(&one, &cpu_str, &gpu_str);
    printf("estimates, one fit of 1e9 points x 5 parameters: cpu %.3g s on 16 threads, gpu %.3g s "
           "resident, %.3g s streamed\n", cpu_res, gpu_res, gpu_str);
    CHECK(cpu_str == cpu_res && gpu_str > gpu_res + 14 * 24e9 / 2.7e10 - 1.0);
    one.nfits = 2; /* a batch goes up once, in chunks: streamed means nothing there */
    jf_device_estimate(&one, &cpu_str, &gpu_str);
    one.streamed = 0;
    jf_device_estimate(&one, &cpu_res, &gpu_res);
    CHECK(gpu_str == gpu_res);

    /* Once a GPU fit has run in the process the GPU's fixed cost is a warm fit's (ms), not the
     * driver's start: a fit of 10⁵ points (0.024 s on one CPU thread) is no longer too small
     * to consider the GPU. (Last here: the state is the process's.) */
    jf_device_request mid = {JF_DEVICE_AUTO, 100000, 3, 1, JF_BACKEND_C, 1, 1, NULL, NULL, 0, 0,
                             NULL};
    double cpu_cold, gpu_cold, cpu_warm, gpu_warm;
    jf_device_estimate(&mid, &cpu_cold, &gpu_cold);
    CHECK(jf_device_choose(&mid, why, sizeof why) == JF_DEVICE_CPU);
    CHECK_CONTAINS(why, "cpu: small fit (estimated 0.024 s on the CPU, less than starting a GPU)");
    jf_device_note_gpu_run();
    jf_device_estimate(&mid, &cpu_warm, &gpu_warm);
    CHECK(cpu_warm == cpu_cold && gpu_warm > 0 && gpu_warm < gpu_cold - 0.2);
    int dev = jf_device_choose(&mid, why, sizeof why);
    CHECK(strstr(why, "small fit") == NULL);
    if (di->gpu_ok && jf_device_have_gpu_solver()) CHECK(dev == JF_DEVICE_GPU);
    else CHECK(dev == JF_DEVICE_CPU);
    mid.npoints = 100; /* 2.4e-5 s: below even a warm GPU fit */
    CHECK(jf_device_choose(&mid, why, sizeof why) == JF_DEVICE_CPU);
    CHECK_CONTAINS(why, "less than a GPU fit's fixed cost)");

    /* the fp64 rule (device.h): datacenter SM versions are full rate */
    CHECK(jf_device_fp64_ratio(6, 0) == 2);
    CHECK(jf_device_fp64_ratio(7, 0) == 2);
    CHECK(jf_device_fp64_ratio(8, 0) == 2);
    CHECK(jf_device_fp64_ratio(9, 0) == 2);
    CHECK(jf_device_fp64_ratio(7, 5) == 32);
    CHECK(jf_device_fp64_ratio(8, 6) == 64);
    CHECK(jf_device_fp64_ratio(8, 9) == 64);
    CHECK(jf_device_fp64_ratio(12, 0) == 64);
    CHECK(jf_device_fp64_ratio(10, 3) == 0);
}

static void test_fit_device(const jf_device_info *di) {
    char *out = NULL, *err = NULL;
    int rc = jf("", "fit --device gpu " EXAMPLE_JF " " EXAMPLE_CSV, &out, &err);
    if (di->gpu_ok) {
        CHECK(rc == 0); /* test_gpu checks the GPU fit itself */
    } else {
        CHECK(rc == 1);
        CHECK_CONTAINS(err, "GPU requested but unavailable: ");
        CHECK_CONTAINS(err, di->gpu_why + 13);
    }
    free(out);
    free(err);
    out = err = NULL;

    rc = jf("", "fit --json --device auto " EXAMPLE_JF " " EXAMPLE_CSV, &out, &err);
    CHECK(rc == 0);
    CHECK_CONTAINS(out, "\"device_note\": \"cpu: ");
    CHECK_CONTAINS(out, "\"device_note\": \"cpu: small fit (estimated ");
    free(out);
    free(err);
    out = err = NULL;

    /* the human report names the device when --device auto is explicit or with -v only */
    rc = jf("", "fit --device auto " EXAMPLE_JF " " EXAMPLE_CSV, &out, &err);
    CHECK(rc == 0);
    CHECK_CONTAINS(out, "  device         cpu: ");
    free(out);
    free(err);
    out = err = NULL;
    rc = jf("", "fit " EXAMPLE_JF " " EXAMPLE_CSV, &out, &err);
    CHECK(rc == 0);
    CHECK(out && !strstr(out, "  device  "));
    free(out);
    free(err);
    out = err = NULL;
    rc = jf("", "fit --device cpu --json " EXAMPLE_JF " " EXAMPLE_CSV, &out, &err);
    CHECK(rc == 0);
    CHECK_CONTAINS(out, "\"device_note\": \"cpu: requested\"");
    free(out);
    free(err);
}

int main(void) {
    jf_device_info *di = malloc(sizeof *di);
    if (!di) return 1;
    jf_device_probe(di);
    test_doctor(di);
    test_choose(di);
    test_fit_device(di);
    free(di);
    return jf_test_finish();
}
