/* Devices: probing the GPU side and choosing where a fit runs (see device.h).
 *
 * The probe only collects what cuda_api.c and jit_nvrtc.c already load; the choice is the seam
 * where the cost model of docs/SOLVER.md ("Device choice") will go once a GPU solver exists.
 * Until then AUTO always means the CPU, and the reason says whether a GPU was there at all.
 */
#include "device.h"

#include <stdio.h>
#include <string.h>

#include "cuda_api.h"
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

int jf_device_choose(const jf_device_request *req, char *why, size_t n) {
    if (req->device == JF_DEVICE_CPU) {
        snprintf(why, n, "cpu: requested");
        return JF_DEVICE_CPU;
    }
    if (req->device != JF_DEVICE_AUTO && req->device != JF_DEVICE_GPU) {
        snprintf(why, n, "unknown device %d", (int)req->device);
        return -JF_ERR_ARG;
    }
    /* Without a GPU solver AUTO can only pick the CPU: it does not probe, because on a machine
     * with a GPU the probe (dlopen of libcuda, cuInit) costs far more than a small fit. With a
     * GPU solver, AUTO will weigh the request's sizes here (docs/SOLVER.md, "Device choice").
     * The probe's result is kept by cuda_api.c, so only the first call in a process pays. */
    if (req->device == JF_DEVICE_AUTO && !JF_DEVICE_HAVE_GPU_SOLVER) {
        snprintf(why, n, "cpu: the GPU solver is not implemented in this build");
        return JF_DEVICE_CPU;
    }
    char status[512];
    int gpu = jf_cuda_status(status, sizeof status);
    if (req->device == JF_DEVICE_GPU) {
        if (!gpu) snprintf(why, n, "GPU requested but unavailable: %s", bare(status));
        else if (!JF_DEVICE_HAVE_GPU_SOLVER)
            snprintf(why, n, "GPU requested but unavailable: the GPU solver is not implemented "
                             "in this build");
        if (!gpu || !JF_DEVICE_HAVE_GPU_SOLVER) return -JF_ERR_UNAVAILABLE;
        snprintf(why, n, "gpu: requested");
        return JF_DEVICE_GPU;
    }
    if (!gpu) snprintf(why, n, "cpu: no usable GPU (%s)", status);
    else snprintf(why, n, "cpu: the GPU solver is not implemented in this build");
    return JF_DEVICE_CPU;
}
