/* bench_gpu_compile: what the GPU's modules cost to compile, without a GPU.
 *
 * For each module a GPU run may build — a model's kernels (normal_eq, jacobian_row, ...), the
 * device-resident solver's module, a batch module (register sums up to 8 parameters, tiled
 * beyond) — it times NVRTC to a CUBIN for one architecture (the whole JIT cost a cache miss
 * pays on a GPU machine), and with --ptxas PATH it also prints ptxas -v's report of the batch
 * kernels (registers, spill bytes, stack frame), which NVRTC's CUBIN path does not show. The
 * times calibrate the compile constants of `--device auto`'s cost model (runtime/device.c);
 * results and the command are in docs/PERFORMANCE.md, "GPU modules: compile time and
 * registers".
 *
 *   bench_gpu_compile [--arch 90] [--reps 1] [--ptxas /usr/local/cuda/bin/ptxas]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../codegen/model.h"
#include "../include/jitfit.h"
#include "../runtime/jit_nvrtc.h"
#include "../solver/solver.h"
#include "bench_util.h"

/* Best of reps NVRTC → CUBIN compiles of src, in seconds; < 0 when it fails. */
static double compile_s(const char *src, int arch, int reps) {
    double best = -1;
    for (int r = 0; r < reps; r++) {
        unsigned char *img = NULL;
        size_t size = 0;
        char *log = NULL;
        double t0 = now_ms();
        int st = jf_nvrtc_compile(src, arch, 1, &img, &size, &log);
        double t = (now_ms() - t0) / 1e3;
        if (st != JF_OK) {
            fprintf(stderr, "NVRTC failed: %s\n", log ? log : "?");
            free(log);
            return -1;
        }
        free(img);
        free(log);
        if (best < 0 || t < best) best = t;
    }
    return best;
}

/* ptxas -v's lines for the batch kernels of src (PTX for compute_<arch>, then ptxas). */
static void ptxas_report(const char *src, int arch, const char *ptxas) {
    unsigned char *img = NULL;
    size_t size = 0;
    if (jf_nvrtc_compile(src, arch, 0, &img, &size, NULL) != JF_OK) return;
    char path[] = "/tmp/jf_bench_ptx_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (f) {
        fwrite(img, 1, size - 1, f);
        fclose(f);
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "'%s' -v -arch=sm_%d '%s' -o /dev/null 2>&1", ptxas, arch, path);
        FILE *p = popen(cmd, "r");
        char line[512], kernel[128] = "";
        while (p && fgets(line, sizeof line, p)) {
            const char *k = strstr(line, "Function properties for jf_batch_lm");
            if (k) {
                snprintf(kernel, sizeof kernel, "%s", k + strlen("Function properties for "));
                kernel[strcspn(kernel, "\n")] = '\0';
                continue;
            }
            const char *used = strstr(line, "Used ");
            if (kernel[0] && (strstr(line, "stack frame") || used)) {
                line[strcspn(line, "\n")] = '\0';
                printf("      %-18s %s\n", kernel, used ? used : line + strspn(line, " "));
                if (used) kernel[0] = '\0';
            }
        }
        if (p) pclose(p);
    }
    if (fd >= 0) remove(path);
    free(img);
}

int main(int argc, char **argv) {
    int arch = 90, reps = 1;
    const char *ptxas = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--arch") && i + 1 < argc) arch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ptxas") && i + 1 < argc) ptxas = argv[++i];
        else {
            fprintf(stderr, "usage: bench_gpu_compile [--arch 90] [--reps 1] [--ptxas PATH]\n");
            return 2;
        }
    }
    char why[512];
    if (jf_nvrtc_load(why, sizeof why) != JF_OK) {
        printf("NVRTC unavailable: %s\n", why);
        return 0;
    }
    int vmaj, vmin;
    jf_nvrtc_version(&vmaj, &vmin);
    printf("NVRTC %d.%d, CUBIN for sm_%d, best of %d; seconds\n", vmaj, vmin, arch, reps);

    char *src = jf_lm_cuda_source(0);
    printf("%-44s %8.2f\n", "solver module (once per machine)", src ? compile_s(src, arch, reps) : -1);
    free(src);

    static const char *const vars2[] = {"x", "y"};
    static const struct {
        const char *name, *text;
        int xy;
    } models[] = {
        {"exponential, 2 p", "a*exp(-b*x)", 0},
        {"damped sine, 5 p", "a*exp(-b*x)*sin(c*x+d)+e", 0},
        {"2-D Gaussian, 5 p", "A*exp(-((x-x0)^2+(y-y0)^2)/(2*s^2))+b", 1},
        {"2 Gaussians + line, 8 p", "A1*exp(-(x-m1)^2/(2*s1^2))+A2*exp(-(x-m2)^2/(2*s2^2))+c+d*x", 0},
        {"3 Gaussians + c, 10 p",
         "A1*exp(-(x-m1)^2/(2*s1^2))+A2*exp(-(x-m2)^2/(2*s2^2))+A3*exp(-(x-m3)^2/(2*s3^2))+c", 0},
    };
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        jf_model_options mo = jf_model_options_default();
        if (models[i].xy) {
            mo.vars = vars2;
            mo.nvars = 2;
        }
        jf_model *m = NULL;
        if (jf_model_compile(models[i].text, (size_t)-1, &mo, &m, NULL) != JF_OK) return 1;
        printf("%s\n", models[i].name);
        jf_jit_options jo;
        memset(&jo, 0, sizeof jo);
        src = jf_cuda_model_source(m, &jo, JF_LOSS_LINEAR);
        printf("  %-52s %8.2f\n", "model kernels (linear loss)", src ? compile_s(src, arch, reps) : -1);
        free(src);
        int regs = jf_batch_cuda_register_sums(m->np);
        for (int single = 0; single < 2; single++)
            for (int kind = 0; kind < (regs ? 3 : 1); kind++) {
                jf_batch_kernel k = regs ? (jf_batch_kernel)kind : JF_BATCH_BLOCK;
                static const char *const kinds[] = {"warp", "block", "thread"};
                src = jf_batch_cuda_source(m, JF_LOSS_LINEAR, single, k);
                char what[96];
                snprintf(what, sizeof what, "batch module, %s sums, %s, %s per fit",
                         regs ? "register" : "tiled", single ? "fp32" : "fp64", kinds[k]);
                printf("  %-52s %8.2f\n", what, src ? compile_s(src, arch, reps) : -1);
                if (src && ptxas) ptxas_report(src, arch, ptxas);
                free(src);
            }
        jf_model_free(m);
    }
    return 0;
}
