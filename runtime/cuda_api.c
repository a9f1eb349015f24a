/* The CUDA driver API through dlopen + cuGetProcAddress (see cuda_api.h).
 *
 * cuda.h is included for types and constants, cudaTypedefs.h for the PFN_<name>_v<N> types of
 * every ABI an entry point has had. Each entry point is requested with a pinned version N and
 * held in a PFN_<name>_v<N> pointer, and a static assertion checks that this is the ABI cuda.h's
 * prototype describes (the one the calls below are written for). Asking with the headers'
 * CUDA_VERSION instead is not safe: CUDA 13's driver returns cuCtxSynchronize(CUcontext) for
 * "cuCtxSynchronize" at 13000 while cuda.h still declares cuCtxSynchronize(void).
 * cuGetProcAddress is the only symbol taken with dlsym.
 */
#include "cuda_api.h"

#include <stdint.h>
#include <stdlib.h>

#include "cuda_emu.h"

#include <stdio.h>
#include <string.h>

#ifndef JF_HAVE_CUDA_HEADERS

static const char no_headers[] = "unavailable: jitfit was built without the CUDA headers";

static int drv_status(char *buf, size_t n) {
    snprintf(buf, n, "%s", no_headers);
    return 0;
}
static int drv_init(char *why, size_t n) {
    snprintf(why, n, "%s", no_headers);
    return JF_ERR_UNAVAILABLE;
}
static void drv_arch(int *major, int *minor) {
    *major = 0;
    *minor = 0;
}
static void drv_driver_facts_get(jf_cuda_driver_facts *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->why, sizeof out->why, "%s", no_headers);
}
static int drv_gpu_facts_get(int ordinal, jf_cuda_gpu_facts *out, char *why, size_t n) {
    (void)ordinal;
    memset(out, 0, sizeof *out);
    snprintf(why, n, "%s", no_headers);
    return JF_ERR_UNAVAILABLE;
}
static int drv_module_load(const void *image, void **module, char *why, size_t n) {
    (void)image;
    *module = NULL;
    snprintf(why, n, "%s", no_headers);
    return JF_ERR_UNAVAILABLE;
}
static void drv_module_unload(void *module) { (void)module; }
static void *drv_module_function(void *module, const char *name, char *why, size_t n) {
    (void)module;
    (void)name;
    snprintf(why, n, "%s", no_headers);
    return NULL;
}
static size_t drv_local_reserve(void *fn) {
    (void)fn;
    return 0;
}
static int drv_alloc(jf_devptr *p, size_t bytes, char *why, size_t n) {
    (void)bytes;
    *p = 0;
    snprintf(why, n, "%s", no_headers);
    return JF_ERR_UNAVAILABLE;
}
static void drv_free(jf_devptr p) { (void)p; }
static int drv_to_device(jf_devptr dst, const void *src, size_t bytes, char *why, size_t n) {
    (void)dst;
    (void)src;
    (void)bytes;
    snprintf(why, n, "%s", no_headers);
    return JF_ERR_UNAVAILABLE;
}
static int drv_to_host(void *dst, jf_devptr src, size_t bytes, char *why, size_t n) {
    (void)dst;
    (void)src;
    (void)bytes;
    snprintf(why, n, "%s", no_headers);
    return JF_ERR_UNAVAILABLE;
}
static int drv_launch(void *fn, unsigned grid, unsigned block, unsigned shmem, void **args, char *why,
                   size_t n) {
    (void)fn;
    (void)grid;
    (void)block;
    (void)shmem;
    (void)args;
    snprintf(why, n, "%s", no_headers);
    return JF_ERR_UNAVAILABLE;
}

static int drv_cond_nodes(void) { return 0; }
static int drv_mem_info(size_t *free_bytes, size_t *total_bytes) {
    *free_bytes = *total_bytes = 0;
    return JF_ERR_UNAVAILABLE;
}
static int drv_graph_new(jf_cuda_graph **out, const jf_cuda_graph *same_stream, char *why, size_t n) {
    (void)same_stream;
    *out = NULL;
    snprintf(why, n, "%s", no_headers);
    return JF_ERR_UNAVAILABLE;
}
static void drv_graph_free(jf_cuda_graph *g) { (void)g; }
static int drv_graph_kernel_deps(jf_cuda_graph *g, void *fn, unsigned grid, unsigned block,
                              void **args, void *const *deps, int ndeps, void **node_out,
                              char *why, size_t n) {
    (void)g, (void)fn, (void)grid, (void)block, (void)args, (void)deps, (void)ndeps;
    if (node_out) *node_out = NULL;
    snprintf(why, n, "%s", no_headers);
    return JF_ERR_UNAVAILABLE;
}
static int drv_graph_copy_deps(jf_cuda_graph *g, jf_devptr dst, const void *src, size_t bytes,
                            void *const *deps, int ndeps, void **node_out, char *why, size_t n) {
    (void)g, (void)dst, (void)src, (void)bytes, (void)deps, (void)ndeps;
    if (node_out) *node_out = NULL;
    snprintf(why, n, "%s", no_headers);
    return JF_ERR_UNAVAILABLE;
}
static int drv_host_alloc(void **p, size_t bytes, char *why, size_t n) {
    (void)bytes;
    *p = NULL;
    snprintf(why, n, "%s", no_headers);
    return JF_ERR_UNAVAILABLE;
}
static void drv_host_free(void *p) { (void)p; }
static void *drv_graph_last(jf_cuda_graph *g) {
    (void)g;
    return NULL;
}
static int drv_graph_while_handle(jf_cuda_graph *g, unsigned long long *handle, char *why, size_t n) {
    (void)g;
    *handle = 0;
    snprintf(why, n, "%s", no_headers);
    return JF_ERR_UNAVAILABLE;
}
static int drv_graph_while_begin(jf_cuda_graph *g, unsigned long long handle, char *why, size_t n) {
    (void)g;
    (void)handle;
    snprintf(why, n, "%s", no_headers);
    return JF_ERR_UNAVAILABLE;
}
static void drv_graph_while_end(jf_cuda_graph *g) { (void)g; }
static int drv_graph_instantiate(jf_cuda_graph *g, char *why, size_t n) {
    (void)g;
    snprintf(why, n, "%s", no_headers);
    return JF_ERR_UNAVAILABLE;
}
static int drv_graph_launch(jf_cuda_graph *g, char *why, size_t n) {
    return drv_graph_instantiate(g, why, n);
}
static int drv_graph_to_device(jf_cuda_graph *g, jf_devptr dst, const void *src, size_t bytes,
                            char *why, size_t n) {
    (void)dst, (void)src, (void)bytes;
    return drv_graph_instantiate(g, why, n);
}
static int drv_graph_to_host(jf_cuda_graph *g, void *dst, jf_devptr src, size_t bytes, char *why,
                          size_t n) {
    (void)dst, (void)src, (void)bytes;
    return drv_graph_instantiate(g, why, n);
}
static int drv_graph_sync(jf_cuda_graph *g, char *why, size_t n) {
    return drv_graph_instantiate(g, why, n);
}
static unsigned long drv_graph_syncs(const jf_cuda_graph *g) {
    (void)g;
    return 0;
}
static void *drv_graph_stream(jf_cuda_graph *g) {
    (void)g;
    return NULL;
}
static int drv_stream_launch(jf_cuda_graph *g, void *fn, unsigned grid, unsigned block, void **args,
                             char *why, size_t n) {
    (void)g, (void)fn, (void)grid, (void)block, (void)args;
    snprintf(why, n, "%s", no_headers);
    return JF_ERR_UNAVAILABLE;
}
static int drv_graph_mark(jf_cuda_graph *g, int slot, char *why, size_t n) {
    (void)g, (void)slot;
    snprintf(why, n, "%s", no_headers);
    return JF_ERR_UNAVAILABLE;
}
static int drv_graph_wait_mark(jf_cuda_graph *g, jf_cuda_graph *other, int slot, char *why,
                               size_t n) {
    (void)g, (void)other, (void)slot;
    snprintf(why, n, "%s", no_headers);
    return JF_ERR_UNAVAILABLE;
}
static int drv_graph_sync_mark(jf_cuda_graph *g, int slot, char *why, size_t n) {
    (void)g, (void)slot;
    snprintf(why, n, "%s", no_headers);
    return JF_ERR_UNAVAILABLE;
}

#else

#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <pthread.h>

/* The driver entry points we use and the ABI version each is pinned to (the PFN_<name>_v<N>
 * of cudaTypedefs.h that matches cuda.h's prototype; all exist since CUDA 12.0). */
#define JF_CU_FUNCS(X)                                                                             \
    X(cuInit, 2000)                                                                                \
    X(cuDeviceGetCount, 2000)                                                                      \
    X(cuDeviceGet, 2000)                                                                           \
    X(cuDeviceGetName, 2000)                                                                       \
    X(cuDeviceGetAttribute, 2000)                                                                  \
    X(cuDevicePrimaryCtxRetain, 7000)                                                              \
    X(cuCtxSetCurrent, 4000)                                                                       \
    X(cuCtxSynchronize, 2000)                                                                      \
    X(cuModuleLoadData, 2000)                                                                      \
    X(cuModuleUnload, 2000)                                                                        \
    X(cuModuleGetFunction, 2000)                                                                   \
    X(cuMemAlloc, 3020)                                                                            \
    X(cuMemFree, 3020)                                                                             \
    X(cuMemcpyHtoD, 3020)                                                                          \
    X(cuMemcpyDtoH, 3020)                                                                          \
    X(cuLaunchKernel, 4000)                                                                        \
    X(cuGetErrorString, 6000)                                                                      \
    X(cuDriverGetVersion, 2020)                                                                    \
    X(cuDeviceTotalMem, 3020)                                                                      \
    X(cuMemGetInfo, 3020)                                                                          \
    X(cuDevicePrimaryCtxRelease, 11000)                                                            \
    X(cuCtxGetCurrent, 4000)                                                                       \
    X(cuStreamCreate, 2000)                                                                        \
    X(cuStreamDestroy, 4000)                                                                       \
    X(cuStreamSynchronize, 2000)                                                                   \
    X(cuMemcpyHtoDAsync, 3020)                                                                     \
    X(cuMemcpyDtoHAsync, 3020)                                                                     \
    X(cuGraphCreate, 10000)                                                                        \
    X(cuGraphAddKernelNode, 12000)                                                                 \
    X(cuGraphInstantiateWithFlags, 11040)                                                          \
    X(cuGraphLaunch, 10000)                                                                        \
    X(cuGraphExecDestroy, 10000)                                                                   \
    X(cuGraphDestroy, 10000)                                                                       \
    X(cuGraphAddMemcpyNode, 10000)                                                                 \
    X(cuMemHostAlloc, 2020)                                                                        \
    X(cuMemFreeHost, 2000)                                                                         \
    X(cuEventCreate, 2000)                                                                         \
    X(cuEventRecord, 2000)                                                                         \
    X(cuEventDestroy, 4000)                                                                        \
    X(cuStreamWaitEvent, 3020)                                                                     \
    X(cuEventSynchronize, 2000)                                                                    \
    X(cuFuncGetAttribute, 2020)

/* Each pinned ABI is the one the calls are written for (cuda.h's prototype of the name). */
#define JF_CU_CHECK(name, ver)                                                                     \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&name), PFN_##name##_v##ver),         \
                   #name ": the pinned ABI version " #ver " differs from cuda.h's prototype");
JF_CU_FUNCS(JF_CU_CHECK)
#if CUDA_VERSION >= 12040
JF_CU_CHECK(cuGraphConditionalHandleCreate, 12030)
JF_CU_CHECK(cuGraphAddNode, 12030) /* with edge data (the WHILE node's dependencies) */
#endif
#undef JF_CU_CHECK

/* The resolved driver, filled once by load_driver. */
static struct {
#define JF_CU_MEMBER(name, ver) PFN_##name##_v##ver name;
    JF_CU_FUNCS(JF_CU_MEMBER)
#undef JF_CU_MEMBER
    int ok;           /* 1 when the driver, a device and its primary context are usable */
    char why[256];    /* "unavailable: <reason>" when not ok */
    char gpu_name[256]; /* the GPU's name */
    int major, minor; /* its compute capability */
    int sm_count;     /* its multiprocessors */
    int sm_threads;   /* the threads a multiprocessor holds */
    CUcontext ctx;    /* the primary context of device 0 */
    int loaded;       /* 1 when every entry point above resolved */
    int version;      /* cuDriverGetVersion */
    int count;        /* number of devices (0 when cuInit failed) */
    int cond_create;  /* 1 when cuGraphConditionalHandleCreate resolves (optional) */
#if CUDA_VERSION >= 12040
    /* optional: WHILE conditional nodes (driver >= 12.4 for cuGraphAddNode with edge data) */
    PFN_cuGraphConditionalHandleCreate_v12030 cond_handle_create;
    PFN_cuGraphAddNode_v12030 graph_add_node;
#endif
} cu;

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

static const char *cu_err(CUresult r) {
    const char *s = NULL;
    if (cu.cuGetErrorString && cu.cuGetErrorString(r, &s) == CUDA_SUCCESS && s) return s;
    return "unknown CUDA error";
}

static void load_driver(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(cu.why, sizeof cu.why, "unavailable: libcuda.so.1 not found");
        return;
    }
    /* cuGetProcAddress_v2 (CUDA >= 12) reports why a symbol is missing; older drivers only have
     * the first version, whose signature lacks the last argument. */
    typedef CUresult (*gpa2_t)(const char *, void **, int, cuuint64_t,
                               CUdriverProcAddressQueryResult *);
    typedef CUresult (*gpa1_t)(const char *, void **, int, cuuint64_t);
    gpa2_t gpa2 = NULL;
    gpa1_t gpa1 = NULL;
    void *sym = dlsym(lib, "cuGetProcAddress_v2");
    if (sym) memcpy(&gpa2, &sym, sizeof sym);
    else if ((sym = dlsym(lib, "cuGetProcAddress")) != NULL) memcpy(&gpa1, &sym, sizeof sym);
    if (!gpa2 && !gpa1) {
        snprintf(cu.why, sizeof cu.why,
                 "unavailable: the CUDA driver is too old (no cuGetProcAddress)");
        return;
    }
#define JF_CU_RESOLVE(name, ver)                                                                   \
    {                                                                                              \
        void *fn = NULL;                                                                           \
        CUdriverProcAddressQueryResult qr = CU_GET_PROC_ADDRESS_SUCCESS;                           \
        CUresult r = gpa2 ? gpa2(#name, &fn, ver, CU_GET_PROC_ADDRESS_DEFAULT, &qr)                \
                          : gpa1(#name, &fn, ver, CU_GET_PROC_ADDRESS_DEFAULT);                    \
        if (r != CUDA_SUCCESS || !fn) {                                                            \
            snprintf(cu.why, sizeof cu.why,                                                        \
                     "unavailable: the CUDA driver lacks %s (ABI %d; a CUDA 12.0 or newer driver " \
                     "is needed)", #name, ver);                                                    \
            return;                                                                                \
        }                                                                                          \
        memcpy(&cu.name, &fn, sizeof fn);                                                          \
    }
    JF_CU_FUNCS(JF_CU_RESOLVE)
#undef JF_CU_RESOLVE
    cu.loaded = 1;
    if (cu.cuDriverGetVersion(&cu.version) != CUDA_SUCCESS) cu.version = 0;
    {
        /* Optional: conditional graph nodes (CUDA 12.3); their absence only disables them. */
        void *fn = NULL, *fn2 = NULL;
        CUdriverProcAddressQueryResult qr = CU_GET_PROC_ADDRESS_SUCCESS;
        CUresult rc = gpa2 ? gpa2("cuGraphConditionalHandleCreate", &fn, 12030,
                                  CU_GET_PROC_ADDRESS_DEFAULT, &qr)
                           : gpa1("cuGraphConditionalHandleCreate", &fn, 12030,
                                  CU_GET_PROC_ADDRESS_DEFAULT);
        cu.cond_create = rc == CUDA_SUCCESS && fn != NULL;
#if CUDA_VERSION >= 12040
        CUresult rc2 = gpa2 ? gpa2("cuGraphAddNode", &fn2, 12030, CU_GET_PROC_ADDRESS_DEFAULT, &qr)
                            : gpa1("cuGraphAddNode", &fn2, 12030, CU_GET_PROC_ADDRESS_DEFAULT);
        if (cu.cond_create && rc2 == CUDA_SUCCESS && fn2) {
            memcpy(&cu.cond_handle_create, &fn, sizeof fn);
            memcpy(&cu.graph_add_node, &fn2, sizeof fn2);
        }
#else
        (void)fn2;
#endif
    }

    CUresult r = cu.cuInit(0);
    int count = 0;
    if (r == CUDA_SUCCESS) r = cu.cuDeviceGetCount(&count);
    if (r == CUDA_SUCCESS) cu.count = count;
    if (r != CUDA_SUCCESS || count == 0) {
        snprintf(cu.why, sizeof cu.why, "unavailable: %s",
                 r == CUDA_SUCCESS || r == CUDA_ERROR_NO_DEVICE ? "no CUDA device" : cu_err(r));
        return;
    }
    CUdevice dev;
    r = cu.cuDeviceGet(&dev, 0);
    if (r == CUDA_SUCCESS) r = cu.cuDeviceGetName(cu.gpu_name, (int)sizeof cu.gpu_name, dev);
    if (r == CUDA_SUCCESS)
        r = cu.cuDeviceGetAttribute(&cu.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    if (r == CUDA_SUCCESS)
        r = cu.cuDeviceGetAttribute(&cu.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    if (r == CUDA_SUCCESS)
        r = cu.cuDeviceGetAttribute(&cu.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    if (r == CUDA_SUCCESS)
        r = cu.cuDeviceGetAttribute(&cu.sm_threads,
                                    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, dev);
    if (r == CUDA_SUCCESS) r = cu.cuDevicePrimaryCtxRetain(&cu.ctx, dev);
    if (r != CUDA_SUCCESS) {
        snprintf(cu.why, sizeof cu.why, "unavailable: %s", cu_err(r));
        return;
    }
    cu.ok = 1;
}

static int drv_init(char *why, size_t n) {
    pthread_once(&cu_once, load_driver);
    if (!cu.ok) {
        snprintf(why, n, "%s", cu.why);
        return JF_ERR_UNAVAILABLE;
    }
    /* The context is current per thread: set it on every entry (cheap). */
    CUresult r = cu.cuCtxSetCurrent(cu.ctx);
    if (r != CUDA_SUCCESS) {
        snprintf(why, n, "unavailable: %s", cu_err(r));
        return JF_ERR_UNAVAILABLE;
    }
    return JF_OK;
}

static int drv_status(char *buf, size_t n) {
    char why[256];
    if (drv_init(why, sizeof why) != JF_OK) {
        snprintf(buf, n, "%s", why);
        return 0;
    }
    snprintf(buf, n, "available: %s, sm_%d%d", cu.gpu_name, cu.major, cu.minor);
    return 1;
}

static void drv_arch(int *major, int *minor) {
    *major = cu.major;
    *minor = cu.minor;
}

static int fail(CUresult r, const char *what, char *why, size_t n, int status) {
    snprintf(why, n, "%s: %s", what, cu_err(r));
    return status;
}

static void drv_driver_facts_get(jf_cuda_driver_facts *out) {
    pthread_once(&cu_once, load_driver);
    memset(out, 0, sizeof *out);
    out->loaded = cu.loaded;
    out->version = cu.version;
    out->device_count = cu.count;
    out->cond_create = cu.cond_create;
    if (!cu.ok) snprintf(out->why, sizeof out->why, "%s", cu.why);
}

static int drv_gpu_facts_get(int ordinal, jf_cuda_gpu_facts *out, char *why, size_t n) {
    memset(out, 0, sizeof *out);
    pthread_once(&cu_once, load_driver);
    if (!cu.loaded || ordinal < 0 || ordinal >= cu.count) {
        snprintf(why, n, "%s", cu.why[0] ? cu.why : "unavailable: no such CUDA device");
        return JF_ERR_UNAVAILABLE;
    }
    CUdevice dev;
    CUresult r = cu.cuDeviceGet(&dev, ordinal);
    if (r == CUDA_SUCCESS) r = cu.cuDeviceGetName(out->name, (int)sizeof out->name, dev);
    if (r == CUDA_SUCCESS)
        r = cu.cuDeviceGetAttribute(&out->major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    if (r == CUDA_SUCCESS)
        r = cu.cuDeviceGetAttribute(&out->minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    if (r == CUDA_SUCCESS)
        r = cu.cuDeviceGetAttribute(&out->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    if (r == CUDA_SUCCESS) r = cu.cuDeviceTotalMem(&out->mem_total, dev);
    if (r != CUDA_SUCCESS) return fail(r, "cannot query the CUDA device", why, n, JF_ERR_UNAVAILABLE);
    /* Free memory is a property of a context: ask in the device's primary context. */
    CUcontext prev = NULL, ctx = NULL;
    cu.cuCtxGetCurrent(&prev);
    if (cu.cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS) {
        size_t fr = 0, tot = 0;
        if (cu.cuCtxSetCurrent(ctx) == CUDA_SUCCESS && cu.cuMemGetInfo(&fr, &tot) == CUDA_SUCCESS)
            out->mem_free = fr;
        cu.cuCtxSetCurrent(prev);
        cu.cuDevicePrimaryCtxRelease(dev);
    }
    return JF_OK;
}

static int drv_module_load(const void *image, void **module, char *why, size_t n) {
    *module = NULL;
    int st = drv_init(why, n);
    if (st != JF_OK) return st;
    CUmodule mod;
    CUresult r = cu.cuModuleLoadData(&mod, image);
    if (r != CUDA_SUCCESS) return fail(r, "cannot load CUDA module", why, n, JF_ERR_COMPILE);
    *module = mod;
    return JF_OK;
}

/* The memory cache unloads an idle module from whichever thread let go of it or loaded
 * another, which may have no context current, or the embedding program's own: the module's
 * context is made current for the call and the thread's own restored after. */
static void drv_module_unload(void *module) {
    if (!module || !cu.ok) return;
    CUcontext prev = NULL;
    if (cu.cuCtxGetCurrent(&prev) != CUDA_SUCCESS) prev = NULL;
    if (prev != cu.ctx) cu.cuCtxSetCurrent(cu.ctx);
    cu.cuModuleUnload((CUmodule)module);
    if (prev != cu.ctx) cu.cuCtxSetCurrent(prev);
}

static void *drv_module_function(void *module, const char *name, char *why, size_t n) {
    CUfunction fn = NULL;
    CUresult r = cu.ok ? cu.cuModuleGetFunction(&fn, (CUmodule)module, name) : CUDA_ERROR_NOT_INITIALIZED;
    if (r != CUDA_SUCCESS) {
        char what[160];
        snprintf(what, sizeof what, "no kernel %s in the CUDA module", name);
        fail(r, what, why, n, 0);
        return NULL;
    }
    return fn;
}

static size_t drv_local_reserve(void *fn) {
    int per_thread = 0;
    if (!cu.ok || !fn ||
        cu.cuFuncGetAttribute(&per_thread, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, (CUfunction)fn) !=
            CUDA_SUCCESS ||
        per_thread <= 0 || cu.sm_count <= 0 || cu.sm_threads <= 0)
        return 0;
    return (size_t)per_thread * (size_t)cu.sm_count * (size_t)cu.sm_threads;
}

static int drv_alloc(jf_devptr *p, size_t bytes, char *why, size_t n) {
    *p = 0;
    int st = drv_init(why, n);
    if (st != JF_OK) return st;
    CUdeviceptr d;
    CUresult r = cu.cuMemAlloc(&d, bytes ? bytes : 8);
    if (r != CUDA_SUCCESS)
        return fail(r, "cannot allocate device memory", why, n,
                    r == CUDA_ERROR_OUT_OF_MEMORY ? JF_ERR_NOMEM : JF_ERR_UNAVAILABLE);
    *p = (jf_devptr)d;
    return JF_OK;
}

static void drv_free(jf_devptr p) {
    if (p && cu.ok) cu.cuMemFree((CUdeviceptr)p);
}

static int drv_to_device(jf_devptr dst, const void *src, size_t bytes, char *why, size_t n) {
    if (!bytes) return JF_OK;
    CUresult r = cu.cuMemcpyHtoD((CUdeviceptr)dst, src, bytes);
    /* From pageable memory the call may return once the data are staged, before the DMA has
     * landed, and the solver's streams are non-blocking (no implicit ordering with stream 0):
     * the copy is complete when this returns. */
    if (r == CUDA_SUCCESS) r = cu.cuCtxSynchronize();
    return r == CUDA_SUCCESS ? JF_OK : fail(r, "copy to the device failed", why, n, JF_ERR_INTERNAL);
}

static int drv_to_host(void *dst, jf_devptr src, size_t bytes, char *why, size_t n) {
    if (!bytes) return JF_OK;
    CUresult r = cu.cuMemcpyDtoH(dst, (CUdeviceptr)src, bytes);
    return r == CUDA_SUCCESS ? JF_OK : fail(r, "copy from the device failed", why, n, JF_ERR_INTERNAL);
}

static int drv_launch(void *fn, unsigned grid, unsigned block, unsigned shmem, void **args, char *why,
                   size_t n) {
    CUresult r = cu.cuLaunchKernel((CUfunction)fn, grid, 1, 1, block, 1, 1, shmem, NULL, args, NULL);
    if (r == CUDA_SUCCESS) r = cu.cuCtxSynchronize();
    return r == CUDA_SUCCESS ? JF_OK : fail(r, "kernel launch failed", why, n, JF_ERR_INTERNAL);
}

/* ---- streams and graphs --------------------------------------------------------------------- */

struct jf_cuda_graph {
    CUstream stream;     /* where the graph and its copies run */
    CUgraph graph;       /* the top-level graph */
    CUgraph body;        /* the open WHILE body, or NULL */
    CUgraphNode last;    /* last node of the top-level sequence (NULL: none yet) */
    CUgraphNode last_body; /* last node of the body sequence */
    CUgraphExec exec;    /* after instantiation */
    unsigned long syncs; /* host synchronizations so far */
    int own_stream;      /* 1: the stream is this graph's to destroy */
    CUevent marks[JF_CUDA_MARKS]; /* jf_cuda_graph_mark's events, created on first use */
};

static void drv_graph_free(jf_cuda_graph *g);

static int drv_cond_nodes(void) {
#if CUDA_VERSION >= 12040
    return cu.ok && cu.graph_add_node != NULL && cu.version >= 12040;
#else
    return 0;
#endif
}

static int drv_mem_info(size_t *free_bytes, size_t *total_bytes) {
    char why[256];
    *free_bytes = *total_bytes = 0;
    if (drv_init(why, sizeof why) != JF_OK) return JF_ERR_UNAVAILABLE;
    return cu.cuMemGetInfo(free_bytes, total_bytes) == CUDA_SUCCESS ? JF_OK : JF_ERR_UNAVAILABLE;
}

static int drv_graph_new(jf_cuda_graph **out, const jf_cuda_graph *same_stream, char *why, size_t n) {
    *out = NULL;
    int st = drv_init(why, n);
    if (st != JF_OK) return st;
    jf_cuda_graph *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(why, n, "out of memory");
        return JF_ERR_NOMEM;
    }
    CUresult r = CUDA_SUCCESS;
    if (same_stream) g->stream = same_stream->stream;
    else {
        r = cu.cuStreamCreate(&g->stream, CU_STREAM_NON_BLOCKING);
        g->own_stream = r == CUDA_SUCCESS;
    }
    if (r == CUDA_SUCCESS) r = cu.cuGraphCreate(&g->graph, 0);
    if (r != CUDA_SUCCESS) {
        drv_graph_free(g);
        return fail(r, "cannot create a CUDA graph", why, n, JF_ERR_INTERNAL);
    }
    *out = g;
    return JF_OK;
}

static void drv_graph_free(jf_cuda_graph *g) {
    if (!g) return;
    if (cu.ok) {
        /* after an error the stream may still run work that reads buffers the caller frees
         * next (device memory, pinned staging): wait for it first (its error is already
         * reported) */
        if (g->stream) cu.cuStreamSynchronize(g->stream);
        if (g->exec) cu.cuGraphExecDestroy(g->exec);
        if (g->graph) cu.cuGraphDestroy(g->graph);
        if (g->own_stream) cu.cuStreamDestroy(g->stream);
        for (int k = 0; k < JF_CUDA_MARKS; k++)
            if (g->marks[k]) cu.cuEventDestroy(g->marks[k]);
    }
    free(g);
}

/* Dependencies of a new node: the given ones, or (ndeps < 0) the previous node of the current
 * sequence. Points deps_out at an array of *count nodes. */
static void node_deps(jf_cuda_graph *g, void *const *deps, int ndeps, CUgraphNode *buf,
                      const CUgraphNode **deps_out, size_t *count) {
    CUgraphNode *last = g->body ? &g->last_body : &g->last;
    if (ndeps < 0) {
        *deps_out = *last ? last : NULL;
        *count = *last ? 1 : 0;
        return;
    }
    size_t k = 0;
    for (int i = 0; i < ndeps && i < JF_CUDA_GRAPH_MAX_DEPS; i++)
        if (deps[i]) buf[k++] = (CUgraphNode)deps[i];
    *deps_out = k ? buf : NULL;
    *count = k;
}

static int drv_graph_kernel_deps(jf_cuda_graph *g, void *fn, unsigned grid, unsigned block,
                              void **args, void *const *deps, int ndeps, void **node_out,
                              char *why, size_t n) {
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof kp);
    kp.func = (CUfunction)fn;
    kp.gridDimX = grid;
    kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = block;
    kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = args;
    CUgraphNode buf[JF_CUDA_GRAPH_MAX_DEPS];
    const CUgraphNode *d;
    size_t nd;
    node_deps(g, deps, ndeps, buf, &d, &nd);
    CUgraphNode node;
    CUresult r = cu.cuGraphAddKernelNode(&node, g->body ? g->body : g->graph, d, nd, &kp);
    if (r != CUDA_SUCCESS) return fail(r, "cannot add a kernel to the CUDA graph", why, n, JF_ERR_INTERNAL);
    *(g->body ? &g->last_body : &g->last) = node;
    if (node_out) *node_out = node;
    return JF_OK;
}


static int drv_graph_copy_deps(jf_cuda_graph *g, jf_devptr dst, const void *src, size_t bytes,
                            void *const *deps, int ndeps, void **node_out, char *why, size_t n) {
    CUDA_MEMCPY3D cp;
    memset(&cp, 0, sizeof cp);
    cp.srcMemoryType = CU_MEMORYTYPE_HOST;
    cp.srcHost = src;
    cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    cp.dstDevice = (CUdeviceptr)dst;
    cp.WidthInBytes = bytes;
    cp.Height = 1;
    cp.Depth = 1;
    /* one row: pitches equal to the width (cuMemcpy3D wants pitch >= width) */
    cp.srcPitch = cp.dstPitch = bytes;
    cp.srcHeight = cp.dstHeight = 1;
    CUgraphNode buf[JF_CUDA_GRAPH_MAX_DEPS];
    const CUgraphNode *d;
    size_t nd;
    node_deps(g, deps, ndeps, buf, &d, &nd);
    CUgraphNode node;
    CUresult r = cu.cuGraphAddMemcpyNode(&node, g->body ? g->body : g->graph, d, nd, &cp, cu.ctx);
    if (r != CUDA_SUCCESS) return fail(r, "cannot add a copy to the CUDA graph", why, n, JF_ERR_INTERNAL);
    *(g->body ? &g->last_body : &g->last) = node;
    if (node_out) *node_out = node;
    return JF_OK;
}

static void *drv_graph_last(jf_cuda_graph *g) { return g->body ? g->last_body : g->last; }

static int drv_host_alloc(void **p, size_t bytes, char *why, size_t n) {
    *p = NULL;
    int st = drv_init(why, n);
    if (st != JF_OK) return st;
    CUresult r = cu.cuMemHostAlloc(p, bytes ? bytes : 8, 0);
    if (r != CUDA_SUCCESS)
        return fail(r, "cannot allocate pinned host memory", why, n, JF_ERR_NOMEM);
    return JF_OK;
}

static void drv_host_free(void *p) {
    if (p && cu.ok) cu.cuMemFreeHost(p);
}

static int drv_graph_while_handle(jf_cuda_graph *g, unsigned long long *handle, char *why, size_t n) {
    *handle = 0;
#if CUDA_VERSION >= 12040
    if (!drv_cond_nodes()) {
        snprintf(why, n, "conditional graph nodes are not available");
        return JF_ERR_UNAVAILABLE;
    }
    CUgraphConditionalHandle h;
    /* 0 at every launch unless a kernel before the node sets it */
    CUresult r = cu.cond_handle_create(&h, g->graph, cu.ctx, 0, CU_GRAPH_COND_ASSIGN_DEFAULT);
    if (r != CUDA_SUCCESS)
        return fail(r, "cannot create a conditional handle", why, n, JF_ERR_UNAVAILABLE);
    *handle = (unsigned long long)h;
    return JF_OK;
#else
    (void)g;
    snprintf(why, n, "conditional graph nodes need CUDA 12.4 headers at build time");
    return JF_ERR_UNAVAILABLE;
#endif
}

static int drv_graph_while_begin(jf_cuda_graph *g, unsigned long long handle, char *why, size_t n) {
#if CUDA_VERSION >= 12040
    if (!drv_cond_nodes() || g->body) {
        snprintf(why, n, "conditional graph nodes are not available");
        return JF_ERR_UNAVAILABLE;
    }
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    np.conditional.handle = (CUgraphConditionalHandle)handle;
    np.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
    np.conditional.size = 1;
    np.conditional.ctx = cu.ctx;
    CUgraphNode node;
    CUresult r =
        cu.graph_add_node(&node, g->graph, g->last ? &g->last : NULL, NULL, g->last ? 1 : 0, &np);
    if (r != CUDA_SUCCESS)
        return fail(r, "cannot add a WHILE node to the CUDA graph", why, n, JF_ERR_UNAVAILABLE);
    g->last = node;
    g->body = np.conditional.phGraph_out[0];
    g->last_body = NULL;
    return JF_OK;
#else
    (void)g;
    (void)handle;
    snprintf(why, n, "conditional graph nodes need CUDA 12.4 headers at build time");
    return JF_ERR_UNAVAILABLE;
#endif
}

static void drv_graph_while_end(jf_cuda_graph *g) {
    g->body = NULL;
    g->last_body = NULL;
}

static int drv_graph_instantiate(jf_cuda_graph *g, char *why, size_t n) {
    CUresult r = cu.cuGraphInstantiateWithFlags(&g->exec, g->graph, 0);
    return r == CUDA_SUCCESS ? JF_OK
                             : fail(r, "cannot instantiate the CUDA graph", why, n, JF_ERR_INTERNAL);
}

static int drv_graph_launch(jf_cuda_graph *g, char *why, size_t n) {
    CUresult r = cu.cuGraphLaunch(g->exec, g->stream);
    return r == CUDA_SUCCESS ? JF_OK : fail(r, "CUDA graph launch failed", why, n, JF_ERR_INTERNAL);
}

static int drv_graph_to_device(jf_cuda_graph *g, jf_devptr dst, const void *src, size_t bytes,
                            char *why, size_t n) {
    if (!bytes) return JF_OK;
    CUresult r = cu.cuMemcpyHtoDAsync((CUdeviceptr)dst, src, bytes, g->stream);
    return r == CUDA_SUCCESS ? JF_OK : fail(r, "copy to the device failed", why, n, JF_ERR_INTERNAL);
}

static int drv_graph_to_host(jf_cuda_graph *g, void *dst, jf_devptr src, size_t bytes, char *why,
                          size_t n) {
    if (!bytes) return JF_OK;
    CUresult r = cu.cuMemcpyDtoHAsync(dst, (CUdeviceptr)src, bytes, g->stream);
    return r == CUDA_SUCCESS ? JF_OK : fail(r, "copy from the device failed", why, n, JF_ERR_INTERNAL);
}

static int drv_graph_sync(jf_cuda_graph *g, char *why, size_t n) {
    g->syncs++;
    CUresult r = cu.cuStreamSynchronize(g->stream);
    return r == CUDA_SUCCESS ? JF_OK : fail(r, "the GPU reported an error", why, n, JF_ERR_INTERNAL);
}

static unsigned long drv_graph_syncs(const jf_cuda_graph *g) { return g->syncs; }

static void *drv_graph_stream(jf_cuda_graph *g) { return g->stream; }

static int drv_stream_launch(jf_cuda_graph *g, void *fn, unsigned grid, unsigned block, void **args,
                             char *why, size_t n) {
    CUresult r = cu.cuLaunchKernel((CUfunction)fn, grid, 1, 1, block, 1, 1, 0, g->stream, args, NULL);
    return r == CUDA_SUCCESS ? JF_OK : fail(r, "kernel launch failed", why, n, JF_ERR_INTERNAL);
}

static int drv_graph_mark(jf_cuda_graph *g, int slot, char *why, size_t n) {
    CUresult r = CUDA_SUCCESS;
    if (!g->marks[slot]) r = cu.cuEventCreate(&g->marks[slot], CU_EVENT_DISABLE_TIMING);
    if (r == CUDA_SUCCESS) r = cu.cuEventRecord(g->marks[slot], g->stream);
    return r == CUDA_SUCCESS ? JF_OK : fail(r, "cannot record a CUDA event", why, n, JF_ERR_INTERNAL);
}

static int drv_graph_wait_mark(jf_cuda_graph *g, jf_cuda_graph *other, int slot, char *why,
                               size_t n) {
    if (!other->marks[slot]) return JF_OK; /* never marked: nothing to wait for */
    CUresult r = cu.cuStreamWaitEvent(g->stream, other->marks[slot], 0);
    return r == CUDA_SUCCESS ? JF_OK : fail(r, "cannot order two CUDA streams", why, n, JF_ERR_INTERNAL);
}

static int drv_graph_sync_mark(jf_cuda_graph *g, int slot, char *why, size_t n) {
    if (!g->marks[slot]) return JF_OK; /* never marked: nothing to wait for */
    g->syncs++;
    CUresult r = cu.cuEventSynchronize(g->marks[slot]);
    return r == CUDA_SUCCESS ? JF_OK : fail(r, "the GPU reported an error", why, n, JF_ERR_INTERNAL);
}

#endif

/* ---- the entry points: the driver above, or the emulator (cuda_emu.h) ----------------------- */

int jf_cuda_status(char *buf, size_t n) {
    return jf_cuda_emulated() ? jf_emu_status(buf, n) : drv_status(buf, n);
}
int jf_cuda_init(char *why, size_t n) { return jf_cuda_emulated() ? JF_OK : drv_init(why, n); }
void jf_cuda_arch(int *major, int *minor) {
    if (jf_cuda_emulated()) jf_emu_arch(major, minor);
    else drv_arch(major, minor);
}
void jf_cuda_driver_facts_get(jf_cuda_driver_facts *out) {
    if (jf_cuda_emulated()) jf_emu_driver_facts_get(out);
    else drv_driver_facts_get(out);
}
int jf_cuda_gpu_facts_get(int ordinal, jf_cuda_gpu_facts *out, char *why, size_t n) {
    return jf_cuda_emulated() ? jf_emu_gpu_facts_get(ordinal, out, why, n)
                              : drv_gpu_facts_get(ordinal, out, why, n);
}
int jf_cuda_module_load(const void *image, void **module, char *why, size_t n) {
    return jf_cuda_emulated() ? jf_emu_module_load(image, module, why, n)
                              : drv_module_load(image, module, why, n);
}
void jf_cuda_module_unload(void *module) {
    if (jf_cuda_emulated()) jf_emu_module_unload(module);
    else drv_module_unload(module);
}
void *jf_cuda_module_function(void *module, const char *name, char *why, size_t n) {
    return jf_cuda_emulated() ? jf_emu_module_function(module, name, why, n)
                              : drv_module_function(module, name, why, n);
}
size_t jf_cuda_local_reserve(void *fn) {
    return jf_cuda_emulated() ? jf_emu_local_reserve(fn) : drv_local_reserve(fn);
}
int jf_cuda_alloc(jf_devptr *p, size_t bytes, char *why, size_t n) {
    return jf_cuda_emulated() ? jf_emu_alloc(p, bytes, why, n) : drv_alloc(p, bytes, why, n);
}
void jf_cuda_free(jf_devptr p) {
    if (jf_cuda_emulated()) jf_emu_free(p);
    else drv_free(p);
}
/* Emulated device memory is host memory: copies are memcpy. */
int jf_cuda_to_device(jf_devptr dst, const void *src, size_t bytes, char *why, size_t n) {
    if (!jf_cuda_emulated()) return drv_to_device(dst, src, bytes, why, n);
    if (bytes) memcpy((void *)(uintptr_t)dst, src, bytes);
    return JF_OK;
}
int jf_cuda_to_host(void *dst, jf_devptr src, size_t bytes, char *why, size_t n) {
    if (!jf_cuda_emulated()) return drv_to_host(dst, src, bytes, why, n);
    if (bytes) memcpy(dst, (const void *)(uintptr_t)src, bytes);
    return JF_OK;
}
int jf_cuda_launch(void *fn, unsigned grid, unsigned block, unsigned shmem, void **args, char *why,
                   size_t n) {
    return jf_cuda_emulated() ? jf_emu_launch(fn, grid, block, args, why, n)
                              : drv_launch(fn, grid, block, shmem, args, why, n);
}
int jf_cuda_cond_nodes(void) { return jf_cuda_emulated() ? 1 : drv_cond_nodes(); }
int jf_cuda_mem_info(size_t *free_bytes, size_t *total_bytes) {
    return jf_cuda_emulated() ? jf_emu_mem_info(free_bytes, total_bytes)
                              : drv_mem_info(free_bytes, total_bytes);
}
int jf_cuda_graph_new(jf_cuda_graph **g, const jf_cuda_graph *same_stream, char *why, size_t n) {
    return jf_cuda_emulated() ? jf_emu_graph_new(g, why, n) : drv_graph_new(g, same_stream, why, n);
}
void jf_cuda_graph_free(jf_cuda_graph *g) {
    if (jf_cuda_emulated()) jf_emu_graph_free(g);
    else drv_graph_free(g);
}
int jf_cuda_graph_kernel(jf_cuda_graph *g, void *fn, unsigned grid, unsigned block, void **args,
                         char *why, size_t n) {
    return jf_cuda_graph_kernel_deps(g, fn, grid, block, args, NULL, -1, NULL, why, n);
}
int jf_cuda_graph_kernel_deps(jf_cuda_graph *g, void *fn, unsigned grid, unsigned block,
                              void **args, void *const *deps, int ndeps, void **node_out,
                              char *why, size_t n) {
    return jf_cuda_emulated()
               ? jf_emu_graph_kernel_deps(g, fn, grid, block, args, deps, ndeps, node_out, why, n)
               : drv_graph_kernel_deps(g, fn, grid, block, args, deps, ndeps, node_out, why, n);
}
int jf_cuda_graph_copy_deps(jf_cuda_graph *g, jf_devptr dst, const void *src, size_t bytes,
                            void *const *deps, int ndeps, void **node_out, char *why, size_t n) {
    return jf_cuda_emulated()
               ? jf_emu_graph_copy_deps(g, dst, src, bytes, deps, ndeps, node_out, why, n)
               : drv_graph_copy_deps(g, dst, src, bytes, deps, ndeps, node_out, why, n);
}
void *jf_cuda_graph_last(jf_cuda_graph *g) {
    return jf_cuda_emulated() ? jf_emu_graph_last(g) : drv_graph_last(g);
}
int jf_cuda_host_alloc(void **p, size_t bytes, char *why, size_t n) {
    if (!jf_cuda_emulated()) return drv_host_alloc(p, bytes, why, n);
    *p = malloc(bytes ? bytes : 8);
    if (*p) return JF_OK;
    snprintf(why, n, "cannot allocate pinned host memory: out of memory");
    return JF_ERR_NOMEM;
}
void jf_cuda_host_free(void *p) {
    if (jf_cuda_emulated()) free(p);
    else drv_host_free(p);
}
int jf_cuda_graph_while_handle(jf_cuda_graph *g, unsigned long long *handle, char *why, size_t n) {
    return jf_cuda_emulated() ? jf_emu_graph_while_handle(g, handle, why, n)
                              : drv_graph_while_handle(g, handle, why, n);
}
int jf_cuda_graph_while_begin(jf_cuda_graph *g, unsigned long long handle, char *why, size_t n) {
    return jf_cuda_emulated() ? jf_emu_graph_while_begin(g, handle, why, n)
                              : drv_graph_while_begin(g, handle, why, n);
}
void jf_cuda_graph_while_end(jf_cuda_graph *g) {
    if (jf_cuda_emulated()) jf_emu_graph_while_end(g);
    else drv_graph_while_end(g);
}
int jf_cuda_graph_instantiate(jf_cuda_graph *g, char *why, size_t n) {
    return jf_cuda_emulated() ? jf_emu_graph_instantiate(g, why, n) : drv_graph_instantiate(g, why, n);
}
int jf_cuda_graph_launch(jf_cuda_graph *g, char *why, size_t n) {
    return jf_cuda_emulated() ? jf_emu_graph_launch(g, why, n) : drv_graph_launch(g, why, n);
}
/* The emulator runs a graph when it is launched: its stream has nothing in flight. */
int jf_cuda_graph_to_device(jf_cuda_graph *g, jf_devptr dst, const void *src, size_t bytes,
                            char *why, size_t n) {
    return jf_cuda_emulated() ? jf_cuda_to_device(dst, src, bytes, why, n)
                              : drv_graph_to_device(g, dst, src, bytes, why, n);
}
int jf_cuda_graph_to_host(jf_cuda_graph *g, void *dst, jf_devptr src, size_t bytes, char *why,
                          size_t n) {
    return jf_cuda_emulated() ? jf_cuda_to_host(dst, src, bytes, why, n)
                              : drv_graph_to_host(g, dst, src, bytes, why, n);
}
int jf_cuda_graph_sync(jf_cuda_graph *g, char *why, size_t n) {
    return jf_cuda_emulated() ? jf_emu_graph_sync(g, why, n) : drv_graph_sync(g, why, n);
}
unsigned long jf_cuda_graph_syncs(const jf_cuda_graph *g) {
    return jf_cuda_emulated() ? jf_emu_graph_syncs(g) : drv_graph_syncs(g);
}
void *jf_cuda_graph_stream(jf_cuda_graph *g) {
    return jf_cuda_emulated() ? NULL : drv_graph_stream(g);
}
/* The emulator runs everything at once, in the order it is enqueued: no stream is ever behind. */
int jf_cuda_graph_mark(jf_cuda_graph *g, int slot, char *why, size_t n) {
    if (slot < 0 || slot >= JF_CUDA_MARKS) {
        snprintf(why, n, "mark slot %d out of range", slot);
        return JF_ERR_INTERNAL;
    }
    return jf_cuda_emulated() ? JF_OK : drv_graph_mark(g, slot, why, n);
}
int jf_cuda_graph_wait_mark(jf_cuda_graph *g, jf_cuda_graph *other, int slot, char *why, size_t n) {
    if (slot < 0 || slot >= JF_CUDA_MARKS) {
        snprintf(why, n, "mark slot %d out of range", slot);
        return JF_ERR_INTERNAL;
    }
    return jf_cuda_emulated() ? JF_OK : drv_graph_wait_mark(g, other, slot, why, n);
}
int jf_cuda_graph_sync_mark(jf_cuda_graph *g, int slot, char *why, size_t n) {
    if (slot < 0 || slot >= JF_CUDA_MARKS) {
        snprintf(why, n, "mark slot %d out of range", slot);
        return JF_ERR_INTERNAL;
    }
    /* the emulator: nothing to wait for, but a wait all the same (counted) */
    return jf_cuda_emulated() ? jf_emu_graph_sync(g, why, n) : drv_graph_sync_mark(g, slot, why, n);
}
/* The emulator runs a launch at once: nothing else is in flight on its streams. */
int jf_cuda_stream_launch(jf_cuda_graph *g, void *fn, unsigned grid, unsigned block, void **args,
                          char *why, size_t n) {
    return jf_cuda_emulated() ? jf_emu_launch(fn, grid, block, args, why, n)
                              : drv_stream_launch(g, fn, grid, block, args, why, n);
}
