/* Devices: what this machine offers for fitting, and where a fit runs.
 *
 * Place in the pipeline: between the checked fit call and the solver. solver/fit.c asks
 * jf_device_choose where to run (CPU or GPU) before it obtains kernels; `jitfit doctor` asks
 * jf_device_probe for everything the library knows about the GPU side (NVRTC, the CUDA driver,
 * each GPU) and only prints it. Both go through runtime/cuda_api.c and runtime/jit_nvrtc.c, which
 * open libcuda and libnvrtc with dlopen on first use, so nothing here needs a GPU: on a machine
 * without one every fact says "unavailable: <reason>". Nothing here prints.
 */
#ifndef JF_DEVICE_H
#define JF_DEVICE_H

#include <stddef.h>

#include "common.h"

/* GPUs described by jf_device_probe (further ones are counted, not described). */
#define JF_DEVICE_MAX_GPUS 16

/* CUDA driver version (cuDriverGetVersion) from which WHILE conditional graph nodes exist. */
#define JF_DEVICE_COND_NODES_MIN_DRIVER 12030

/* One GPU. */
typedef struct jf_gpu_info {
    char name[256];         /* the driver's name ("NVIDIA H100 80GB HBM3") */
    int cc_major, cc_minor; /* compute capability (sm_<major><minor>) */
    int sm_count;           /* multiprocessors */
    size_t mem_total;       /* bytes of device memory */
    size_t mem_free;        /* bytes free now (0 when unknown) */
    int fp64_ratio;         /* fp32:fp64 peak throughput ratio (2 = full-rate fp64, 32, 64);
                               0 when the architecture is not in our table (jf_device_fp64_ratio) */
    int cond_nodes;         /* 1 when WHILE conditional graph nodes can be used (driver >=
                               JF_DEVICE_COND_NODES_MIN_DRIVER and cuGraphConditionalHandleCreate
                               resolves) */
} jf_gpu_info;

/* What the library knows about the GPU side of this machine. */
typedef struct jf_device_info {
    int nvrtc_ok;            /* 1 when libnvrtc was loaded */
    char nvrtc_path[4096];   /* the file it was loaded from ("" when unknown) */
    int nvrtc_major, nvrtc_minor; /* nvrtcVersion */
    char nvrtc_why[256];     /* "unavailable: <reason>" when not nvrtc_ok */
    int driver_loaded;       /* 1 when libcuda was opened and its entry points resolved */
    int driver_version;      /* cuDriverGetVersion (12030 = CUDA 12.3); 0 when not loaded */
    int cond_create;         /* 1 when cuGraphConditionalHandleCreate resolves */
    int gpu_ok;              /* 1 when a GPU can be used (device 0 initialised) */
    char gpu_why[512];       /* "unavailable: <reason>" when not gpu_ok */
    int ngpus;               /* GPUs the driver reports */
    int ndescribed;          /* entries filled in gpu[] (≤ JF_DEVICE_MAX_GPUS, ≤ ngpus) */
    jf_gpu_info gpu[JF_DEVICE_MAX_GPUS]; /* the GPUs, by ordinal */
    char gpu_errors[320];    /* the first per-GPU query failure, or "" */
} jf_device_info;

/* Fills *out with the facts above (loading libnvrtc and libcuda on first use, thread-safe).
 * Never fails: what is missing is said in the *_why fields. Cost: the first call in a process
 * pays dlopen and cuInit; later ones only query. */
JF_INTERNAL void jf_device_probe(jf_device_info *out);

/* fp32:fp64 peak throughput ratio of compute capability major.minor, from the per-SM
 * throughput table of NVIDIA's CUDA C++ Programming Guide ("Arithmetic Instructions"):
 *   2  full-rate fp64: the datacenter parts sm_60 (GP100), sm_70 (GV100), sm_80 (GA100),
 *      sm_90 (GH100), sm_100 (GB100/GB200)
 *   16 sm_72 (Xavier)
 *   32 Maxwell sm_5x, consumer Pascal sm_61/62, Turing sm_75
 *   64 consumer and embedded Ampere/Ada/Blackwell: sm_86, sm_87, sm_89, sm_120, sm_121
 *   0  anything else (not in the table: treat fp64 as slow), e.g. sm_103 whose fp64 is cut.
 * The rule is by SM version only: a datacenter SM version means full-rate fp64 units. */
JF_INTERNAL int jf_device_fp64_ratio(int major, int minor);

/* The GPU kernel modules a run would compile because the kernel cache lacks them; the cost
 * model prices each kind (device.c, docs/SOLVER.md "Device choice"). */
typedef struct jf_device_compiles {
    int model;       /* the model's kernels (normal_eq, jacobian_row, ...) */
    int solver;      /* the device-resident solver's module (model-independent) */
    int batch;       /* a batch module, sums in registers (up to 8 parameters) */
    int batch_tiled; /* a batch module, tiled sums (more parameters) */
} jf_device_compiles;

/* What a fit asks for, with the sizes the cost model needs (docs/SOLVER.md, "Device
 * choice"). */
typedef struct jf_device_request {
    jf_device device; /* what the caller asked for */
    size_t npoints;   /* points per fit */
    size_t nparams;   /* parameters */
    size_t nfits;     /* independent fits (1 for jf_fit) */
    int backend;      /* the jf_backend asked for */
    size_t nvars;     /* variables per point (for the copy to the device) */
    int threads;      /* CPU threads the CPU solver would use (<= 0: 1) */
    /* Fills in what a GPU run would compile (NULL: nothing); called by AUTO only, after the
     * GPU probe found a usable GPU (the cache's key names the GPU). */
    void (*compiles)(void *ctx, jf_device_compiles *out);
    void *compiles_ctx;
    int columns; /* a batch's results go into arrays (jf_fit_batch_columns), not objects */
    int streamed; /* one fit whose data exceed the usable device memory: a GPU run streams them,
                     copying them again with every pass (set by jf_device_choose from streams) */
    /* 1 when a GPU run of this one fit would stream its data (NULL: never); called by AUTO
     * only, after the GPU probe found a usable GPU, with compiles_ctx */
    int (*streams)(void *ctx);
} jf_device_request;

/* The cost model's estimates for req, in seconds: *t_cpu on req->threads CPU threads, *t_gpu on
 * a GPU (without compiling: that term is added by jf_device_choose from req->compiles). */
JF_INTERNAL void jf_device_estimate(const jf_device_request *req, double *t_cpu, double *t_gpu);

/* Tells the cost model that a GPU fit has run in this process: from then on the GPU's fixed
 * cost is that of a warm fit (milliseconds), not the driver's start (a quarter second), so
 * repeated fits of a program that embeds the library go to the GPU where it is faster. */
JF_INTERNAL void jf_device_note_gpu_run(void);

/* Decides where a fit runs. Returns JF_DEVICE_CPU or JF_DEVICE_GPU, with a one-line reason in
 * why ("cpu: no usable GPU (unavailable: libcuda.so.1 not found)", "gpu: estimated 0.31 s on
 * the GPU vs 2.4 s on 2 CPU threads (...)"); or, when the request cannot be met, a negated
 * jf_status (-JF_ERR_UNAVAILABLE for device GPU without a usable GPU or for a batch, -JF_ERR_ARG
 * for an unknown device) with the reason in why ("GPU requested but unavailable: ..."). AUTO
 * weighs estimated CPU and GPU times (a cost model with measured CPU and compile constants and
 * nominal GPU constants, see device.c; compiling counts only for modules not in the kernel
 * cache) and does not probe the GPU for fits the CPU finishes before a GPU could start;
 * otherwise the first call in a process probes the driver (dlopen, cuInit). */
JF_INTERNAL int jf_device_choose(const jf_device_request *req, char *why, size_t n);

/* 1 when this build has the GPU solver (the library was built with the CUDA headers). */
JF_INTERNAL int jf_device_have_gpu_solver(void);

#endif
