/* `jitfit doctor`: what this machine offers jitfit, one fact per line, and a self-test fit on
 * each backend.
 *
 * The facts come from the library's own probes (runtime/device.c for NVRTC, the CUDA driver
 * and the GPUs; runtime/jit_cc.h and runtime/kernels.h for the C compiler; runtime/cache.h for
 * the kernel cache), so doctor sees exactly what a fit would see; this file only prints. It
 * writes nothing: the cache is looked at, never created, and the compiler check and the
 * self-tests run uncached. A missing GPU is a fact, not an error: the exit status is 0 when the
 * CPU path works and 1 when the compiler check or a self-test fails (the CUDA one only runs
 * with a usable GPU; one that fell back to another backend has failed). A broken C compiler
 * fails doctor even though fits still run (on the interpreter, far slower): a script that runs
 * `jitfit doctor` before a job wants to hear about it.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../runtime/cache.h"
#include "../runtime/cublas_api.h"
#include "../runtime/cuda_emu.h"
#include "../runtime/cusolver_api.h"
#include "../runtime/device.h"
#include "../runtime/jit_cc.h"
#include "../runtime/jit_nvrtc.h"
#include "../runtime/kernels.h"
#include "commands.h"
#include "plot.h"
#include "report.h"
#include "util.h"

/* The self-test problem: a damped sine, 200 points, with a deterministic small perturbation. */
#define SELFTEST_MODEL "a*exp(-b*x)*sin(c*x+d)+e"
#define SELFTEST_N 200
static const double selftest_true[5] = {2.0, 0.3, 2.5, 0.5, 0.1};
static const double selftest_p0[5] = {1.5, 0.2, 2.4, 0.3, 0.0};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* The first "model name" of /proc/cpuinfo (x86; "Hardware"/"CPU part" elsewhere is not worth a
 * table), or "unknown". */
static void cpu_model(char *buf, size_t n) {
    snprintf(buf, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *v = strchr(line, ':');
        if (!v) continue;
        v++;
        while (*v == ' ' || *v == '\t') v++;
        snprintf(buf, n, "%s", v);
        buf[strcspn(buf, "\n")] = '\0';
        break;
    }
    fclose(f);
}

static void print_cache(void) {
    jf_cache_dir dir;
    jf_cache_dir_open(NULL, 0, 0, &dir);
    printf("kernel cache: %s", dir.path[0] ? dir.path : "(none)");
    if (dir.state == JF_CACHE_DIR_OK) printf(" (ok");
    else if (dir.state == JF_CACHE_DIR_DISABLED) printf(" (%s", dir.reason); /* "disabled (why)" */
    else printf(" (refused: %s", dir.reason);
    size_t entries = 0;
    uint64_t bytes = 0;
    if (dir.path[0] && jf_cache_disk_info(&dir, &entries, &bytes) == JF_OK)
        printf(", %zu entr%s, %" PRIu64 " bytes)\n", entries, entries == 1 ? "y" : "ies", bytes);
    else if (dir.path[0]) printf(", cannot be listed)\n");
    else printf(")\n");
}

/* The compiler's identity and a real compile of a trivial model through jf_kernels_get.
 * Returns 1 when the compile and load worked. */
static int print_compiler(void) {
    const char *identity = NULL;
    char why[512];
    /* jf_cc_identity wants the command itself (it does not resolve NULL). */
    const char *cc = jf_cc_command(NULL);
    if (jf_cc_identity(cc, NULL, &identity, why, sizeof why) == JF_OK)
        printf("c compiler: %s\n", identity);
    else printf("c compiler: %s: %s\n", cc, why);

    jf_model *m = NULL;
    if (jf_model_compile("k*x", (size_t)-1, NULL, &m, NULL) != JF_OK) {
        printf("c compiler check: FAILED: the check model did not compile\n");
        return 0;
    }
    jf_jit_options jo;
    memset(&jo, 0, sizeof jo);
    jo.no_cache = 1; /* compile for real, and write nothing */
    jf_kernels *k = NULL;
    char *warning = NULL;
    double t0 = now_ms();
    int st = jf_kernels_get(m, JF_BACKEND_C, &jo, &k, &warning);
    double ms = now_ms() - t0;
    int ok = st == JF_OK && jf_kernels_backend(k) == JF_BACKEND_C;
    if (st != JF_OK)
        printf("c compiler check: FAILED: %s\n", warning ? warning : jf_status_string(st));
    else if (jf_kernels_backend(k) != JF_BACKEND_C)
        printf("c compiler check: FAILED (the interpreter stands in): %s\n",
               warning ? warning : "unknown reason");
    else printf("c compiler check: ok (a trivial kernel compiled and loaded in %.1f ms)\n", ms);
    free(warning);
    jf_kernels_free(k);
    jf_model_free(m);
    return ok;
}

static void print_nvrtc(const jf_device_info *di) {
    if (di->nvrtc_ok)
        printf("nvrtc: %s (version %d.%d)\n", di->nvrtc_path[0] ? di->nvrtc_path : "loaded",
               di->nvrtc_major, di->nvrtc_minor);
    else printf("nvrtc: %s\n", di->nvrtc_why);
}

/* The GPU libraries of the many-parameter path, loaded as a fit would load them. */
static void print_gpu_libraries(const jf_device_info *di) {
    if (!di->gpu_ok) {
        printf("cublas: not probed (no usable GPU)\ncusolver: not probed (no usable GPU)\n");
        return;
    }
    if (jf_cuda_emulated()) {
        printf("cublas: CBLAS on the CUDA emulator\ncusolver: LAPACKE on the CUDA emulator\n");
        return;
    }
    char why[256];
    printf("cublas: %s\n", jf_cublas_init(why, sizeof why) == JF_OK ? "ok (handle created)" : why);
    printf("cusolver: %s\n",
           jf_cusolver_init(why, sizeof why) == JF_OK ? "ok (handle created)" : why);
}

/* What the CUDA JIT compiles for GPU i of compute capability arch (jf_nvrtc_target): a CUBIN,
 * or PTX that the driver compiles for a GPU newer than NVRTC, or nothing for one older than
 * every architecture NVRTC knows. The emulator runs the source itself. */
static void print_code_target(const jf_device_info *di, int i, int arch) {
    if (jf_cuda_emulated()) {
        printf("gpu %d code: the emulator runs the CUDA source (no NVRTC)\n", i);
        return;
    }
    if (!di->nvrtc_ok) {
        printf("gpu %d code: none (NVRTC %s)\n", i, di->nvrtc_why);
        return;
    }
    const int *archs;
    int narchs, cubin;
    jf_nvrtc_archs(&archs, &narchs);
    int target = jf_nvrtc_target(arch, archs, narchs, &cubin);
    if (target && cubin) printf("gpu %d code: CUBIN for sm_%d from NVRTC\n", i, target);
    else if (target)
        printf("gpu %d code: PTX for compute_%d, which the driver compiles for sm_%d (NVRTC %d.%d "
               "cannot target sm_%d)\n",
               i, target, arch, di->nvrtc_major, di->nvrtc_minor, arch);
    else
        printf("gpu %d code: none: NVRTC %d.%d cannot compile for sm_%d (the oldest it supports "
               "is sm_%d)\n",
               i, di->nvrtc_major, di->nvrtc_minor, arch, archs[0]);
}

static void print_driver(const jf_device_info *di) {
    if (!di->driver_loaded) {
        printf("cuda driver: %s\n", di->gpu_why);
        return;
    }
    printf("cuda driver: %s, version %d.%d (%d)%s%s\n",
           jf_cuda_emulated() ? "the CUDA emulator (JITFIT_CUDA_EMULATE; no libcuda)" : "loaded",
           di->driver_version / 1000, di->driver_version % 1000 / 10, di->driver_version,
           di->gpu_ok ? "" : "; ", di->gpu_ok ? "" : di->gpu_why);
    printf("gpus: %d\n", di->ngpus);
    for (int i = 0; i < di->ndescribed; i++) {
        const jf_gpu_info *g = &di->gpu[i];
        printf("gpu %d: %s, sm_%d%d, %d SMs\n", i, g->name, g->cc_major, g->cc_minor, g->sm_count);
        printf("gpu %d memory: %.1f GiB total, %.1f GiB free\n", i,
               (double)g->mem_total / (1024.0 * 1024 * 1024),
               (double)g->mem_free / (1024.0 * 1024 * 1024));
        if (g->fp64_ratio == 2)
            printf("gpu %d fp64: full rate (fp32:fp64 2:1, datacenter sm_%d%d)\n", i, g->cc_major,
                   g->cc_minor);
        else if (g->fp64_ratio > 0)
            printf("gpu %d fp64: reduced (fp32:fp64 %d:1, sm_%d%d)\n", i, g->fp64_ratio,
                   g->cc_major, g->cc_minor);
        else printf("gpu %d fp64: unknown for sm_%d%d (assume reduced)\n", i, g->cc_major,
                    g->cc_minor);
        if (g->cond_nodes) printf("gpu %d conditional graph nodes (WHILE): yes\n", i);
        else
            printf("gpu %d conditional graph nodes (WHILE): no (%s)\n", i,
                   di->driver_version < JF_DEVICE_COND_NODES_MIN_DRIVER
                       ? "driver older than 12.3"
                       : "cuGraphConditionalHandleCreate not found");
        print_code_target(di, i, g->cc_major * 10 + g->cc_minor);
    }
    if (di->gpu_errors[0]) printf("gpu query: %s\n", di->gpu_errors);
}

/* One self-test fit on a backend. Returns 1 when it converged to the right parameters on that
 * backend: a fit that fell back (to the interpreter when the compiler fails, to the CPU when the
 * GPU does) is a failure of the backend under test, however right its answer. */
static int selftest(const jf_model *m, const double *x, const double *y, int backend) {
    jf_fit_options o = jf_fit_options_default();
    o.p0 = selftest_p0;
    o.backend = backend;
    o.device = backend == JF_BACKEND_CUDA ? JF_DEVICE_GPU : JF_DEVICE_CPU;
    o.no_cache = 1;
    jf_data d = {SELFTEST_N, x, 0, y, NULL};
    jf_fit_result *r = NULL;
    char *err = NULL;
    double t0 = now_ms();
    int st = jf_fit(m, &d, &o, &r, &err);
    double ms = now_ms() - t0;
    const char *name = jf_backend_name(backend);
    if (st != JF_OK) {
        printf("self-test %s: FAILED: %s\n", name, err ? err : jf_status_string(st));
        jf_free(err);
        return 0;
    }
    int right = 1;
    for (size_t k = 0; k < 5; k++)
        if (!(fabs(r->params[k] - selftest_true[k]) <= 0.02 * (1 + fabs(selftest_true[k]))))
            right = 0;
    int fell_back = r->backend != backend;
    int ok = r->success && right && !fell_back;
    printf("self-test %s: ", name);
    if (fell_back) printf("FAILED: the fit fell back to %s", jf_backend_name(r->backend));
    else printf("%s", !r->success ? "FAILED: did not converge"
                      : !right    ? "FAILED: wrong parameters"
                                  : "converged");
    printf(" (%s), %zu evaluations, %.1f ms (compile %.1f, solve %.1f)",
           jf_report_status_name(r->status), r->nfev, ms, r->time_compile_ms, r->time_solve_ms);
    if (r->warning) printf("; %s", r->warning);
    if (backend == JF_BACKEND_CUDA) printf("; %zu host synchronization%s while iterating", r->host_syncs,
                                           r->host_syncs == 1 ? "" : "s");
    printf("\n");
    jf_fit_result_free(r);
    return ok;
}

int jf_cmd_doctor(int argc, char **argv) {
    (void)argv;
    if (argc != 1) {
        fprintf(stderr, "usage: jitfit doctor\n");
        return 2;
    }
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    printf("jitfit: %s\n", JITFIT_VERSION);
    printf("cpu: %s, %ld core%s\n", cpu, cores, cores == 1 ? "" : "s");
    int ok = print_compiler();
    print_cache();
    char pwhy[600];
    if (jf_plot_available(pwhy, sizeof pwhy) == 0)
        printf("plots: cairo %s (opened at run time)\n", jf_plot_cairo_version());
    else printf("plots: unavailable: %s\n", pwhy);
    fflush(stdout);

    jf_device_info *di = malloc(sizeof *di);
    if (!di) {
        jf_cli_error("doctor: out of memory");
        return 1;
    }
    jf_device_probe(di);
    print_nvrtc(di);
    print_driver(di);
    print_gpu_libraries(di);
    fflush(stdout);

    double x[SELFTEST_N], y[SELFTEST_N];
    const double *p = selftest_true;
    for (int i = 0; i < SELFTEST_N; i++) {
        x[i] = 10.0 * i / (SELFTEST_N - 1);
        /* A deterministic perturbation of amplitude 0.01: same numbers on every machine. */
        double noise = 0.01 * sin(37.0 * i + 0.5);
        y[i] = p[0] * exp(-p[1] * x[i]) * sin(p[2] * x[i] + p[3]) + p[4] + noise;
    }
    jf_model *m = NULL;
    if (jf_model_compile(SELFTEST_MODEL, (size_t)-1, NULL, &m, NULL) != JF_OK) {
        printf("self-test: FAILED: the model %s did not compile\n", SELFTEST_MODEL);
        ok = 0;
    } else {
        ok &= selftest(m, x, y, JF_BACKEND_INTERP);
        ok &= selftest(m, x, y, JF_BACKEND_C);
        if (!di->gpu_ok) printf("self-test cuda: %s\n", di->gpu_why);
        else if (!jf_device_have_gpu_solver())
            printf("self-test cuda: skipped: jitfit was built without the CUDA headers\n");
        else ok &= selftest(m, x, y, JF_BACKEND_CUDA);
    }
    jf_model_free(m);
    free(di);
    return ok ? 0 : 1;
}
