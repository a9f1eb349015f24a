/* bench_gpu: the device-resident GPU solver against jitfit's CPU solver, one damped sine fit
 * per size, in one run (docs/PERFORMANCE.md, "GPU solver").
 *
 * For N in --sizes (default 1e5, 1e6, 1e7, 1e8): data as bench_fit.py makes them (x in [0, 20),
 * truth 2, 0.25, 1.5, 0.3, 0.5, noise 0.05 from a fixed-seed generator, start 1.5, 0.2, 1.45,
 * 0, 0, ftol = xtol = gtol = 1e-8). Reported per N:
 *   - GPU cold: the first fit in the process with an empty kernel cache (driver start, NVRTC,
 *     module load, copies, the loop); GPU warm: the median of --reps later fits (cache hit);
 *   - CPU: the median of --reps fits on all cores after one untimed fit that obtains the C
 *     kernel (skipped above --cpu-max points);
 *   - per iteration on the GPU: warm solve time / nfev, against the roofline of one pass:
 *     max(bytes moved / --bandwidth, fp64 flops / --fp64-peak) with 16 bytes (x, y) and
 *     --flops-per-point flops per point (the damped sine's f and gradient and the 21 sums:
 *     121, an fma counted as 2, by counting the fp64 instructions on normal_eq's path for a
 *     point in the PTX of `nvcc -ptx -arch=sm_90 -fmad=false`, CUDA 13.0: 51 fma, 14 mul, 4 add,
 *     1 sub; 138 before the kernels used sincos and fma sums). The peak is the fp64 units'
 *     (H100 and H200 SXM: 34 Tflop/s); the 67 of their data sheets are the tensor cores', which
 *     a pass over points does not use;
 *   - host synchronizations, and the largest relative parameter difference GPU vs CPU;
 *   - under each row, the last warm fit's device note, whose host clock splits its time into
 *     the data's upload, the solver's set-up, the loop and the finish (the ms/iteration
 *     column divides all of them by nfev).
 * Without a GPU it says so and times the CPU only. Not a test: it asserts nothing.
 *
 * usage: bench_gpu [--sizes 1e5,1e6] [--reps R] [--cpu-max N] [--bandwidth B/s]
 *                  [--fp64-peak flop/s] [--flops-per-point F] [--tsv 1] [--max-gpu-mem BYTES]
 * --max-gpu-mem limits the GPU fits' device memory, so data above it are streamed (the note
 * is printed): the same command with and without it compares streamed and in-memory
 * throughput (Gpts/s: points per second of one pass).
 * --tsv 1 prints tab-separated rows instead (N, gpu cold, gpu warm, cpu ms, ms/iteration,
 * roofline ms, syncs, the five GPU parameters, else the CPU's) for bench/bench_gpu_anchors.py.
 * (defaults: 3 reps, CPU up to 1e7, H100 SXM nominal 3.35e12 B/s and 3.4e13 flop/s, 121 flops)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../include/jitfit.h"
#include "bench_util.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}


/* --max-gpu-mem: GPU fits use at most this many bytes (0: no limit), to time streaming */
static size_t max_gpu_mem;

static int fit(const jf_model *m, const jf_data *d, jf_device dev, jf_fit_result **r) {
    static const double p0[5] = {1.5, 0.2, 1.45, 0.0, 0.0};
    jf_fit_options o = jf_fit_options_default();
    o.p0 = p0;
    o.device = dev;
    o.max_gpu_mem = max_gpu_mem;
    char *err = NULL;
    int st = jf_fit(m, d, &o, r, &err);
    if (st != JF_OK) fprintf(stderr, "fit failed: %s\n", err ? err : jf_status_string(st));
    jf_free(err);
    return st;
}

int main(int argc, char **argv) {
    double sizes[16] = {1e5, 1e6, 1e7, 1e8};
    int nsizes = 4, reps = 3;
    double cpu_max = 1e7, bw = 3.35e12, peak = 3.4e13, fpp = 121;
    int tsv = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--sizes")) {
            nsizes = parse_list(argv[i + 1], sizes, 16);
        } else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--cpu-max")) cpu_max = strtod(argv[i + 1], NULL);
        else if (!strcmp(argv[i], "--bandwidth")) bw = strtod(argv[i + 1], NULL);
        else if (!strcmp(argv[i], "--fp64-peak")) peak = strtod(argv[i + 1], NULL);
        else if (!strcmp(argv[i], "--flops-per-point")) fpp = strtod(argv[i + 1], NULL);
        else if (!strcmp(argv[i], "--tsv")) tsv = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--max-gpu-mem")) max_gpu_mem = (size_t)strtod(argv[i + 1], NULL);
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    /* an empty private cache, so the first GPU fit is a cold one */
    char cache[] = "/tmp/jitfit-bench-gpu-XXXXXX";
    if (!mkdtemp(cache)) return 1;
    setenv("JITFIT_CACHE_DIR", cache, 1);
    jf_model *m = NULL;
    if (jf_model_compile("a*exp(-b*x)*sin(c*x+d)+e", (size_t)-1, NULL, &m, NULL) != JF_OK) return 1;
    int first_gpu = 1, first_cpu = 1, have_gpu = 1;
    if (!tsv)
        printf("%10s %10s %10s %10s %8s %12s %12s %9s %6s %12s\n", "N", "gpu cold", "gpu warm",
               "cpu", "cpu/gpu", "gpu ms/iter", "roofline ms", "Gpts/s", "syncs", "max rel diff");
    for (int s = 0; s < nsizes; s++) {
        size_t n = (size_t)sizes[s];
        double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        if (!x || !y) {
            fprintf(stderr, "out of memory at N = %zu\n", n);
            return 1;
        }
        rng_state = 42;
        for (size_t i = 0; i < n; i++) {
            x[i] = 20.0 * (double)i / (double)n;
            double u1 = uniform(), u2 = uniform();
            y[i] = 2.0 * exp(-0.25 * x[i]) * sin(1.5 * x[i] + 0.3) + 0.5 +
                   0.05 * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
        }
        jf_data d = {n, x, 0, y, NULL};
        double cold = NAN, warm = NAN, cpu = NAN, iter_ms = NAN, diff = NAN;
        char warm_note[640] = "";
        size_t syncs = 0;
        jf_fit_result *g = NULL, *c = NULL;
        if (have_gpu) {
            double t0 = now_ms();
            if (fit(m, &d, JF_DEVICE_GPU, &g) != JF_OK) have_gpu = 0;
            else if (first_gpu) cold = now_ms() - t0;
            first_gpu = 0;
        }
        if (have_gpu) {
            double *t = malloc((size_t)reps * sizeof *t);
            for (int r = 0; r < reps; r++) {
                jf_fit_result *gr = NULL;
                double t0 = now_ms();
                if (fit(m, &d, JF_DEVICE_GPU, &gr) != JF_OK) {
                    t[r] = NAN;
                    continue;
                }
                t[r] = now_ms() - t0;
                if (r == reps - 1) {
                    iter_ms = gr->time_solve_ms / (double)gr->nfev;
                    syncs = gr->host_syncs;
                    snprintf(warm_note, sizeof warm_note, "%s", gr->device_note ? gr->device_note : "");
                }
                jf_fit_result_free(gr);
            }
            qsort(t, (size_t)reps, sizeof *t, cmp_double);
            warm = t[reps / 2];
            free(t);
        }
        if ((double)n <= cpu_max) {
            if (first_cpu) { /* the C kernel's compile (or cache load) is not a CPU fit's time */
                jf_fit_result *cr = NULL;
                if (fit(m, &d, JF_DEVICE_CPU, &cr) == JF_OK) jf_fit_result_free(cr);
                first_cpu = 0;
            }
            double *t = malloc((size_t)reps * sizeof *t);
            for (int r = 0; r < reps; r++) {
                jf_fit_result *cr = NULL;
                double t0 = now_ms();
                if (fit(m, &d, JF_DEVICE_CPU, &cr) != JF_OK) {
                    t[r] = NAN;
                    continue;
                }
                t[r] = now_ms() - t0;
                if (r == reps - 1) c = cr;
                else jf_fit_result_free(cr);
            }
            qsort(t, (size_t)reps, sizeof *t, cmp_double);
            cpu = t[reps / 2];
            free(t);
        }
        if (g && c) {
            diff = 0;
            for (int k = 0; k < 5; k++)
                diff = fmax(diff, fabs(g->params[k] - c->params[k]) / fabs(c->params[k]));
        }
        double roof = fmax(16.0 * (double)n / bw, fpp * (double)n / peak) * 1e3;
        if (tsv) {
            const jf_fit_result *pr = g ? g : c;
            printf("%zu\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%zu", n, cold, warm, cpu, iter_ms, roof, syncs);
            for (int k = 0; k < 5; k++) printf("\t%.17g", pr ? pr->params[k] : NAN);
            printf("\n");
        } else {
            printf("%10.0e %10.2f %10.2f %10.2f %8.2f %12.4f %12.4f %9.3g %6zu %12.2g\n",
                   (double)n, cold, warm, cpu, cpu / warm, iter_ms, roof,
                   (double)n / iter_ms * 1e-6, syncs, diff);
            /* the last warm fit's note: where its time went (host clock: upload, loop, finish) */
            if (warm_note[0]) printf("           (%s)\n", warm_note);
            if (!have_gpu && s == 0) printf("(no GPU solver run: see the message above)\n");
        }
        fflush(stdout);
        jf_fit_result_free(g);
        jf_fit_result_free(c);
        free(x);
        free(y);
    }
    jf_model_free(m);
    return 0;
}
