/* Devices: probing the GPU side and choosing where a fit runs (see device.h).
 *
 * The probe only collects what cuda_api.c and jit_nvrtc.c already load; the choice is the seam
 * where the cost model of docs/SOLVER.md ("Device choice") will go once a GPU solver exists.
 * Until then AUTO always means the CPU, and the reason says whether a GPU was there at all.
 */
#include "device.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "../codegen/emit.h"
#include "cuda_api.h"
#include "cuda_emu.h"
#include "jit_nvrtc.h"

int jf_device_fp64_ratio(int major, int minor) {
    int sm = major * 10 + minor;
    switch (sm) {
    case 60: case 70: case 80: case 90: case 100: return 2;
    case 72: return 16;
    case 50: case 52: case 53: case 61: case 62: case 75: return 32;
    case 86: case 87: case 89: case 120: case 121: return 64;
    default: return 0;
    }
}

void jf_device_probe(jf_device_info *out) {
    memset(out, 0, sizeof *out);
    char why[256];
    if (jf_nvrtc_load(why, sizeof why) == JF_OK) {
        out->nvrtc_ok = 1;
        jf_nvrtc_version(&out->nvrtc_major, &out->nvrtc_minor);
        snprintf(out->nvrtc_path, sizeof out->nvrtc_path, "%s", jf_nvrtc_library_path());
    } else {
        snprintf(out->nvrtc_why, sizeof out->nvrtc_why, "%s", why);
    }

    /* jf_cuda_status initialises the driver and device 0: it decides gpu_ok. */
    char status[512];
    out->gpu_ok = jf_cuda_status(status, sizeof status);
    jf_cuda_driver_facts facts;
    jf_cuda_driver_facts_get(&facts);
    out->driver_loaded = facts.loaded;
    out->driver_version = facts.version;
    out->cond_create = facts.cond_create;
    out->ngpus = facts.device_count;
    if (!out->gpu_ok) snprintf(out->gpu_why, sizeof out->gpu_why, "%s", status);
    int cond = facts.cond_create && facts.version >= JF_DEVICE_COND_NODES_MIN_DRIVER;
    for (int i = 0; i < facts.device_count && out->ndescribed < JF_DEVICE_MAX_GPUS; i++) {
        jf_cuda_gpu_facts g;
        if (jf_cuda_gpu_facts_get(i, &g, why, sizeof why) != JF_OK) {
            if (!out->gpu_errors[0])
                snprintf(out->gpu_errors, sizeof out->gpu_errors, "GPU %d: %s", i, why);
            continue;
        }
        jf_gpu_info *gi = &out->gpu[out->ndescribed++];
        snprintf(gi->name, sizeof gi->name, "%s", g.name);
        gi->cc_major = g.major;
        gi->cc_minor = g.minor;
        gi->sm_count = g.sm_count;
        gi->mem_total = g.mem_total;
        gi->mem_free = g.mem_free;
        gi->fp64_ratio = jf_device_fp64_ratio(g.major, g.minor);
        gi->cond_nodes = cond;
    }
}

/* The reason without its "unavailable: " prefix, so that it reads inside a sentence. */
static const char *bare(const char *reason) {
    static const char prefix[] = "unavailable: ";
    return strncmp(reason, prefix, sizeof prefix - 1) == 0 ? reason + sizeof prefix - 1 : reason;
}

/* The cost model of `auto` (docs/SOLVER.md, "Device choice"). One fit costs about
 * iterations × points × (parameters + 1) × a per-term time on each side, plus, on the GPU, the
 * fixed costs of starting the driver and of copying the data once. The CPU constant is measured
 * (the damped sine's normal_eq pass: 20 ms for 10⁶ points × 5 parameters on one core of the
 * development machine, docs/PERFORMANCE.md). The GPU's are those of an H200's second session
 * (docs/PERFORMANCE.md, "GPU solver", 2026-11-28), put in this formula's terms: a single fit's
 * warm time less its upload (the damped sine, 10⁷ and 10⁸ points: 5.9 and 5.5·10⁻¹² s; the
 * first session's 1.1·10⁻¹⁰ came before the changes between the runs), its upload (25 GB/s staged
 * at 10⁷ points, 39 at 10⁸), the warm fixed cost (a 10⁵-point fit's 1.2 ms in all), and a
 * batch's time less its modelled host work and copies (5×5 Gaussians, 10⁶ and 10⁷ fits:
 * 5.5 and 5.2·10⁻¹¹ s; 10⁵ spectra of 1000 points: 8·10⁻¹²). The cold fixed cost stays
 * nominal (the first fit of a process took 0.30–0.34 s there, its model's compile included). */
#define COST_ITERATIONS 15.0   /* passes over the data in a typical fit */
#define COST_CPU_TERM_S 4.0e-9 /* seconds per point·(parameter+1) per pass, one core */
#define COST_GPU_TERM_S 6.0e-12 /* the same for one fit on the GPU */
#define COST_GPU_BATCH_TERM_S 5.5e-11 /* the same for the fits of a GPU batch */
#define COST_GPU_FIXED_S 0.25  /* driver start, module load, graph set-up (first fit) */
/* The same once a GPU fit has run in the process (the driver up, the modules loaded): the
 * H200's warm fit of 10⁵ points took 1.22 ms in all, its first 344 ms. */
#define COST_GPU_WARM_FIXED_S 1.2e-3

static atomic_int gpu_ran; /* a GPU fit has run in this process */

void jf_device_note_gpu_run(void) { atomic_store(&gpu_ran, 1); }

/* The GPU's fixed cost for the next fit. */
static double gpu_fixed_s(void) {
    return atomic_load(&gpu_ran) ? COST_GPU_WARM_FIXED_S : COST_GPU_FIXED_S;
}
#define COST_PCIE_BPS 2.5e10   /* bytes per second host → device (staged) */
/* The same for streamed data, which go up staged with every pass (the H200's staged copy of
 * 10⁹ bytes: 36.6 ms, bench_gpu_copy) */
#define COST_STREAM_BPS 2.7e10
/* A fit's cost besides its passes on the CPU (start, polish bookkeeping, covariance, result):
 * 5×5-pixel 2-D Gaussians take 21.7 µs each on one core (bench_gpu_batch, docs/PERFORMANCE.md),
 * ≈9 µs of which the term above accounts for. */
#define COST_CPU_FIT_S 1.3e-5
/* The host's work per fit of a GPU batch (checks, packing, copying results back, unpacking,
 * the finish's assembly), serial and spread over the CPU threads; measured around each host
 * pass with the loop on the emulator (docs/PERFORMANCE.md, "GPU batches"): results as arrays
 * (the device's statistics records) ≈0.1 + 0.12 µs, as objects ≈0.6 + 1.3 µs. */
#define COST_BATCH_HOST_SERIAL_S 1.0e-7
#define COST_BATCH_HOST_PARALLEL_S 1.2e-7
#define COST_BATCH_HOST_OBJ_SERIAL_S 6.0e-7
#define COST_BATCH_HOST_OBJ_PARALLEL_S 1.3e-6
/* Compiling a module NVRTC → CUBIN (one host core; measured with NVRTC 13.0 for sm_90 on the
 * development machine, docs/PERFORMANCE.md "GPU modules: compile time and registers"): a
 * model's kernels, the solver module, a batch module with register sums or with tiled sums.
 * Paid only when the kernel cache lacks the module. A register-sum batch module holds one
 * kernel since 2026-11-28: 9 s for the two it held, times the ratio one kernel / two measured
 * in one session on a slower machine (20 / 37.5 s). */
#define COST_COMPILE_MODEL_S 0.15
#define COST_COMPILE_SOLVER_S 2.6
#define COST_COMPILE_BATCH_S 4.8
#define COST_COMPILE_BATCH_TILED_S 3.0

/* Seconds of compiling what a GPU run lacks (req->compiles). */
static double compile_seconds(const jf_device_request *req) {
    if (!req->compiles) return 0.0;
    jf_device_compiles c = {0, 0, 0, 0};
    req->compiles(req->compiles_ctx, &c);
    return c.model * COST_COMPILE_MODEL_S + c.solver * COST_COMPILE_SOLVER_S +
           c.batch * COST_COMPILE_BATCH_S + c.batch_tiled * COST_COMPILE_BATCH_TILED_S;
}

int jf_device_have_gpu_solver(void) {
#ifdef JF_HAVE_CUDA_HEADERS
    return 1;
#else
    return jf_cuda_emulated(); /* the emulator needs no CUDA headers */
#endif
}

void jf_device_estimate(const jf_device_request *req, double *t_cpu, double *t_gpu) {
    int threads = req->threads > 0 ? req->threads : 1;
    /* a batch: the work of all its fits (npoints is the largest fit's) */
    double fits = (double)(req->nfits > 1 ? req->nfits : 1);
    double points = (double)req->npoints * fits;
    double terms = points * (double)(req->nparams + 1);
    *t_cpu = (COST_ITERATIONS * terms * COST_CPU_TERM_S + fits * COST_CPU_FIT_S) / threads;
    double bytes = points * 8.0 * (double)(req->nvars + 2);
    *t_gpu = gpu_fixed_s() +
             COST_ITERATIONS * terms * (req->nfits > 1 ? COST_GPU_BATCH_TERM_S : COST_GPU_TERM_S) +
             (req->streamed && req->nfits <= 1 ? COST_ITERATIONS * bytes / COST_STREAM_BPS
                                               : bytes / COST_PCIE_BPS);
    if (req->nfits > 1 && req->columns)
        *t_gpu += fits * (COST_BATCH_HOST_SERIAL_S + COST_BATCH_HOST_PARALLEL_S / threads);
    else if (req->nfits > 1)
        *t_gpu += fits * (COST_BATCH_HOST_OBJ_SERIAL_S + COST_BATCH_HOST_OBJ_PARALLEL_S / threads);
}

int jf_device_choose(const jf_device_request *req, char *why, size_t n) {
    if (req->device == JF_DEVICE_CPU) {
        snprintf(why, n, "cpu: requested");
        return JF_DEVICE_CPU;
    }
    if (req->device != JF_DEVICE_AUTO && req->device != JF_DEVICE_GPU) {
        snprintf(why, n, "unknown device %d", (int)req->device);
        return -JF_ERR_ARG;
    }
    if (req->nfits > 1 && !jf_emit_cuda_batch_ok(req->nparams)) {
        /* a block's shared memory holds one fit's sums (up to about 80 parameters) */
        if (req->device == JF_DEVICE_GPU) {
            snprintf(why, n, "GPU requested but unavailable: a GPU batch's per-fit sums of %zu "
                             "parameters do not fit a block's shared memory", req->nparams);
            return -JF_ERR_UNAVAILABLE;
        }
        snprintf(why, n, "cpu: a GPU batch's per-fit sums of %zu parameters do not fit a block's "
                         "shared memory", req->nparams);
        return JF_DEVICE_CPU;
    }
    int threads = req->threads > 0 ? req->threads : 1;
    double t_cpu, t_gpu;
    jf_device_estimate(req, &t_cpu, &t_gpu);
    /* AUTO does not probe for a fit the CPU finishes before a GPU could start: the probe
     * (dlopen of libcuda, cuInit) alone costs more. The probe's result is kept by cuda_api.c. */
    if (req->device == JF_DEVICE_AUTO && t_cpu < gpu_fixed_s()) {
        snprintf(why, n, "cpu: small fit (estimated %.3g s on the CPU, less than %s)", t_cpu,
                 atomic_load(&gpu_ran) ? "a GPU fit's fixed cost" : "starting a GPU");
        return JF_DEVICE_CPU;
    }
    if (!jf_device_have_gpu_solver()) {
        if (req->device == JF_DEVICE_GPU) {
            snprintf(why, n, "GPU requested but unavailable: jitfit was built without the CUDA "
                             "headers");
            return -JF_ERR_UNAVAILABLE;
        }
        snprintf(why, n, "cpu: jitfit was built without the CUDA headers");
        return JF_DEVICE_CPU;
    }
    char status[512];
    int gpu = jf_cuda_status(status, sizeof status);
    if (req->device == JF_DEVICE_GPU) {
        if (!gpu) {
            snprintf(why, n, "GPU requested but unavailable: %s", bare(status));
            return -JF_ERR_UNAVAILABLE;
        }
        snprintf(why, n, "gpu: requested (%s)", status + 11);
        return JF_DEVICE_GPU;
    }
    if (!gpu) {
        snprintf(why, n, "cpu: no usable GPU (%s)", status);
        return JF_DEVICE_CPU;
    }
    char streamed[64] = "";
    if (req->nfits <= 1 && req->streams && req->streams(req->compiles_ctx)) {
        jf_device_request r = *req;
        r.streamed = 1;
        jf_device_estimate(&r, &t_cpu, &t_gpu);
        snprintf(streamed, sizeof streamed, " (data streamed: copied with every pass)");
    }
    const double t_compile = compile_seconds(req);
    t_gpu += t_compile;
    char compiling[96] = "";
    if (t_compile > 0)
        snprintf(compiling, sizeof compiling, " (%.3g s of it compiling kernels not in the cache)",
                 t_compile);
    char gpu_part[200];
    snprintf(gpu_part, sizeof gpu_part, "%s%s", compiling, streamed);
    if (t_gpu < t_cpu) {
        snprintf(why, n, "gpu: estimated %.3g s on the GPU%s vs %.3g s on %d CPU thread%s (%s)",
                 t_gpu, gpu_part, t_cpu, threads, threads == 1 ? "" : "s", status + 11);
        return JF_DEVICE_GPU;
    }
    snprintf(why, n, "cpu: estimated %.3g s on %d CPU thread%s vs %.3g s on the GPU%s", t_cpu,
             threads, threads == 1 ? "" : "s", t_gpu, gpu_part);
    return JF_DEVICE_CPU;
}
