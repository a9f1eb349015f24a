/* bench_gpu_copy: what moving a fit's data to the GPU costs, by way of copying, for choosing how
 * a single GPU fit uploads its data (docs/PERFORMANCE.md, "GPU solver").
 *
 * The H200's one session (2026-11-28) timed a warm 1e8-point damped-sine fit at 1233 ms, linear
 * in N from 1e6 points at ≈1.2 ns per point per pass, far above its loop's roofline; the
 * upload of x and y (16 bytes per point) from pageable memory is one candidate. For each size
 * in --bytes this times, median of --reps:
 *   alloc      cuMemAlloc + cuMemFree of the size (each fit allocates its data's buffers)
 *   pageable   cuMemcpyHtoD from ordinary (malloc'd, touched) memory: what a fit did before
 *              the staged upload, and does below 4 MiB or with $JITFIT_GPU_UPLOAD=direct
 *   pin        cuMemHostAlloc of the size (what page-locking costs, per call)
 *   memcpy     the host's memcpy of the size into that page-locked memory
 *   memcpy xT  the same split over a pool of --threads threads (default: the CPUs;
 *              jf_pool_memcpy, as the staged upload's): whether a staged upload's threaded
 *              host side could keep up with the pinned copy
 *   pinned     cuMemcpyHtoD from the page-locked memory
 *   staged     what a fit does from 4 MiB on (jf_gpu_upload, solver/gpu_upload.c): pageable
 *              memory through two page-locked buffers of --stage bytes on two streams, the
 *              host copying one chunk in (on up to 8 threads) while the other goes up
 * as ms and GB/s. Without a GPU it says so and exits 0. Not a test: it asserts nothing.
 *
 * usage: bench_gpu_copy [--bytes 1.6e7,1.6e8,1.6e9] [--reps 3] [--stage 3.2e7] [--threads T]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../runtime/cuda_api.h"
#include "../solver/solver.h"
#include "bench_util.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return t[n / 2];
}

int main(int argc, char **argv) {
    double sizes[16] = {1.6e7, 1.6e8, 1.6e9};
    int nsizes = 3, reps = 3, threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    size_t stage = (size_t)32 << 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--bytes")) {
            nsizes = parse_list(argv[i + 1], sizes, 16);
        } else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--stage")) stage = (size_t)strtod(argv[i + 1], NULL);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (reps < 1 || reps > 64) reps = 3;
    if (stage < 4096) stage = 4096;
    if (threads < 1) threads = 1;
    if (threads > 64) threads = 64;
    char why[512];
    if (jf_cuda_init(why, sizeof why) != JF_OK) {
        printf("bench_gpu_copy: no GPU (%s)\n", why);
        return 0;
    }
    char status[512];
    jf_cuda_status(status, sizeof status);
    char sz[64];
    snprintf(sz, sizeof sz, "%zu", stage);
    setenv("JITFIT_GPU_STAGE", sz, 0); /* before the staging buffers exist; the caller's wins */
    printf("%s; staging buffers 2 x %.3g MB (jf_gpu_upload); memcpy xT: %d threads\n", status,
           (double)stage / 1e6, threads);
    if (jf_gpu_upload_stage_bytes() == 0) { /* sets the staging buffers up, untimed */
        printf("bench_gpu_copy: no page-locked staging buffers\n");
        return 1;
    }
    jf_pool *copiers = jf_pool_create(threads); /* memcpy xT (NULL for 1: the caller alone) */
    printf("%12s %10s %22s %10s %10s %22s %22s %22s\n", "bytes", "alloc ms", "pageable ms (GB/s)",
           "pin ms", "memcpy ms", "memcpy xT ms (GB/s)", "pinned ms (GB/s)", "staged ms (GB/s)");
    for (int s = 0; s < nsizes; s++) {
        size_t bytes = (size_t)sizes[s];
        char *host = malloc(bytes);
        if (!host) {
            printf("%12.3g out of host memory\n", (double)bytes);
            continue;
        }
        memset(host, 1, bytes); /* the pages exist, as a fit's data do */
        double t_alloc[64], t_page[64], t_pin[64], t_cpy[64], t_par[64], t_pinned[64],
            t_staged[64];
        int ok = 1;
        for (int r = 0; r < reps && ok; r++) {
            jf_devptr dev = 0;
            double t0 = now_ms();
            ok = jf_cuda_alloc(&dev, bytes, why, sizeof why) == JF_OK;
            if (!ok) break;
            jf_cuda_free(dev);
            t_alloc[r] = now_ms() - t0;
            ok = jf_cuda_alloc(&dev, bytes, why, sizeof why) == JF_OK;
            if (!ok) break;
            t0 = now_ms();
            ok = jf_cuda_to_device(dev, host, bytes, why, sizeof why) == JF_OK;
            t_page[r] = now_ms() - t0;
            char *pin = NULL;
            t0 = now_ms();
            if (ok) ok = jf_cuda_host_alloc((void **)&pin, bytes, why, sizeof why) == JF_OK;
            t_pin[r] = now_ms() - t0;
            if (ok) {
                t0 = now_ms();
                memcpy(pin, host, bytes);
                t_cpy[r] = now_ms() - t0;
                t0 = now_ms();
                jf_pool_memcpy(copiers, pin, host, bytes);
                t_par[r] = now_ms() - t0;
                t0 = now_ms();
                ok = jf_cuda_to_device(dev, pin, bytes, why, sizeof why) == JF_OK;
                t_pinned[r] = now_ms() - t0;
                jf_cuda_host_free(pin);
            }
            t0 = now_ms();
            int how = 0;
            if (ok) ok = jf_gpu_upload(dev, host, bytes, JF_UPLOAD_STAGED, &how, why,
                                       sizeof why) == JF_OK && how == JF_UPLOAD_STAGED;
            t_staged[r] = now_ms() - t0;
            jf_cuda_free(dev);
        }
        free(host);
        if (!ok) {
            printf("%12.3g failed: %s\n", (double)bytes, why);
            continue;
        }
        double a = median(t_alloc, reps), pg = median(t_page, reps), pn = median(t_pin, reps),
               cp = median(t_cpy, reps), pc = median(t_par, reps), pd = median(t_pinned, reps),
               sg = median(t_staged, reps);
        printf("%12.3g %10.2f %11.2f (%8.2f) %10.2f %10.2f %11.2f (%8.2f) %11.2f (%8.2f) "
               "%11.2f (%8.2f)\n",
               (double)bytes, a, pg, (double)bytes / pg / 1e6, pn, cp, pc,
               (double)bytes / pc / 1e6, pd, (double)bytes / pd / 1e6, sg,
               (double)bytes / sg / 1e6);
        fflush(stdout);
    }
    jf_pool_free(copiers);
    return 0;
}
