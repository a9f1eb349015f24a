/* The CUDA driver API, loaded at run time.
 *
 * libcuda.so.1 is opened with dlopen on first use (once per process, thread-safe); every driver
 * entry point is then resolved through cuGetProcAddress at a pinned ABI version, checked at
 * compile time against the prototype cuda.h gives (cuda.h maps many names to _v2/_v3 variants
 * that plain dlsym would miss). Nothing links against libcuda, so the same binary runs
 * on machines without a driver or GPU: then every call reports "unavailable: <reason>".
 * Built without the CUDA headers (JF_HAVE_CUDA_HEADERS undefined), this module is a stub that
 * says so. Device pointers are passed as jf_devptr (CUdeviceptr's representation) so that no
 * CUDA header leaks to callers. Nothing here prints.
 */
#ifndef JF_CUDA_API_H
#define JF_CUDA_API_H

#include <stddef.h>

#include "common.h"

/* A device address (CUdeviceptr). */
typedef unsigned long long jf_devptr;

/* "available: <GPU name>, sm_XY" or "unavailable: <reason>" into buf. Returns 1 when a GPU
 * can be used, else 0. Initialises the driver on first use. */
JF_INTERNAL int jf_cuda_status(char *buf, size_t n);

/* Initialises the driver (once), selects device 0 and makes its primary context current on the
 * calling thread. JF_OK, or JF_ERR_UNAVAILABLE with "unavailable: <reason>" in why. */
JF_INTERNAL int jf_cuda_init(char *why, size_t n);

/* What the driver says about itself and one GPU, for diagnostics (runtime/device.c). */
typedef struct jf_cuda_driver_facts {
    int loaded;         /* 1 when libcuda was opened and every entry point we use resolved */
    int version;        /* cuDriverGetVersion (e.g. 13000 for CUDA 13.0); 0 when not loaded */
    int device_count;   /* CUDA devices seen (0 when cuInit failed) */
    int cond_create;    /* 1 when cuGraphConditionalHandleCreate resolves (WHILE nodes) */
    char why[256];      /* "unavailable: <reason>" when no GPU can be used; "" otherwise */
} jf_cuda_driver_facts;

/* One GPU as the driver describes it. */
typedef struct jf_cuda_gpu_facts {
    char name[256];     /* cuDeviceGetName */
    int major, minor;   /* compute capability */
    int sm_count;       /* multiprocessors */
    size_t mem_total;   /* bytes of device memory */
    size_t mem_free;    /* bytes free (cuMemGetInfo in the device's primary context) */
} jf_cuda_gpu_facts;

/* Loads the driver (once) and fills *out; never fails (what is missing is in out->why). */
JF_INTERNAL void jf_cuda_driver_facts_get(jf_cuda_driver_facts *out);
/* Facts of GPU `ordinal` (< device_count). Retains the device's primary context for the free
 * memory (released again, except device 0's, which jf_cuda_init keeps); the calling thread's
 * current context is restored. JF_OK, or JF_ERR_UNAVAILABLE with the reason in why. */
JF_INTERNAL int jf_cuda_gpu_facts_get(int ordinal, jf_cuda_gpu_facts *out, char *why, size_t n);

/* Compute capability of the device (after jf_cuda_init succeeded). */
JF_INTERNAL void jf_cuda_arch(int *major, int *minor);

/* Loads a CUBIN or PTX image (cuModuleLoadData); *module receives an opaque handle that stays
 * loaded until jf_cuda_module_unload. JF_OK or JF_ERR_COMPILE with the reason in why. */
JF_INTERNAL int jf_cuda_module_load(const void *image, void **module, char *why, size_t n);
/* Unloads a module from jf_cuda_module_load (its kernels must be finished); callable from any
 * thread, whatever context is current there (it is left as it was). */
JF_INTERNAL void jf_cuda_module_unload(void *module);
/* The kernel called name in module, or NULL (reason in why). */
JF_INTERNAL void *jf_cuda_module_function(void *module, const char *name, char *why, size_t n);
/* Bytes of device memory a launch of kernel fn takes as local memory: the driver reserves its
 * per-thread local size (stack frame, spills, local arrays) for every thread the GPU can hold,
 * whatever the grid. 0 when it has none or the driver does not say. */
JF_INTERNAL size_t jf_cuda_local_reserve(void *fn);

/* Device memory and copies (synchronous: complete on return, whichever stream reads the data
 * next). JF_OK or JF_ERR_UNAVAILABLE / JF_ERR_NOMEM with the
 * driver's message in why. */
JF_INTERNAL int jf_cuda_alloc(jf_devptr *p, size_t bytes, char *why, size_t n);
JF_INTERNAL void jf_cuda_free(jf_devptr p);
JF_INTERNAL int jf_cuda_to_device(jf_devptr dst, const void *src, size_t bytes, char *why,
                                  size_t n);
JF_INTERNAL int jf_cuda_to_host(void *dst, jf_devptr src, size_t bytes, char *why, size_t n);

/* Launches fn on a 1-D grid (block threads per block, shmem bytes of dynamic shared memory) on
 * the default stream with the given kernel arguments, and waits for it. JF_OK or
 * JF_ERR_INTERNAL with the driver's message in why. */
JF_INTERNAL int jf_cuda_launch(void *fn, unsigned grid, unsigned block, unsigned shmem,
                               void **args, char *why, size_t n);

/* ---- streams and graphs (the device-resident solver) ---------------------------------------- */

/* A CUDA graph under construction or ready to launch, with its own stream. Kernels are added in
 * sequence (each depends on the previous one); between jf_cuda_graph_while_begin and _end they
 * go into the body of a WHILE conditional node instead. */
typedef struct jf_cuda_graph jf_cuda_graph;

/* 1 when WHILE conditional nodes can be used (driver and headers >= CUDA 12.4). */
JF_INTERNAL int jf_cuda_cond_nodes(void);
/* Free and total device memory of the current context. JF_OK or JF_ERR_UNAVAILABLE. */
JF_INTERNAL int jf_cuda_mem_info(size_t *free_bytes, size_t *total_bytes);
/* An empty graph with a new non-blocking stream, or the stream of same_stream (not NULL: its
 * launches and copies are then ordered with that graph's). JF_OK or an error with the reason in
 * why. */
JF_INTERNAL int jf_cuda_graph_new(jf_cuda_graph **g, const jf_cuda_graph *same_stream, char *why,
                                  size_t n);
/* Appends a launch of fn (grid × block threads, no dynamic shared memory); the argument values
 * are copied now. */
JF_INTERNAL int jf_cuda_graph_kernel(jf_cuda_graph *g, void *fn, unsigned grid, unsigned block,
                                     void **args, char *why, size_t n);
/* Most dependencies of one node added with explicit dependencies. */
#define JF_CUDA_GRAPH_MAX_DEPS 64
/* Like jf_cuda_graph_kernel, with explicit dependencies: the node handles deps[0..ndeps) (NULL
 * entries skipped; ndeps < 0: the previous node of the current sequence, as
 * jf_cuda_graph_kernel). The new node becomes the sequence's last; *node_out (if not NULL)
 * receives its handle, for later dependencies. */
JF_INTERNAL int jf_cuda_graph_kernel_deps(jf_cuda_graph *g, void *fn, unsigned grid,
                                          unsigned block, void **args, void *const *deps,
                                          int ndeps, void **node_out, char *why, size_t n);
/* A copy of bytes from host memory src (pinned: jf_cuda_host_alloc, for the copy to overlap
 * with kernels) to dst, as a graph node with dependencies as jf_cuda_graph_kernel_deps. */
JF_INTERNAL int jf_cuda_graph_copy_deps(jf_cuda_graph *g, jf_devptr dst, const void *src,
                                        size_t bytes, void *const *deps, int ndeps,
                                        void **node_out, char *why, size_t n);
/* The last node of the current sequence (NULL when it is empty), for explicit dependencies. */
JF_INTERNAL void *jf_cuda_graph_last(jf_cuda_graph *g);
/* Page-locked host memory (cuMemHostAlloc), for copies that run asynchronously. JF_OK or
 * JF_ERR_NOMEM / JF_ERR_UNAVAILABLE with the reason in why. */
JF_INTERNAL int jf_cuda_host_alloc(void **p, size_t bytes, char *why, size_t n);
JF_INTERNAL void jf_cuda_host_free(void *p);
/* A condition for a WHILE node of g (a cudaGraphConditionalHandle for device code; 0 at each
 * launch until a kernel sets it). JF_ERR_UNAVAILABLE when conditional nodes are not available. */
JF_INTERNAL int jf_cuda_graph_while_handle(jf_cuda_graph *g, unsigned long long *handle,
                                           char *why, size_t n);
/* Appends a WHILE node on handle and directs further kernels into its body until _while_end. */
JF_INTERNAL int jf_cuda_graph_while_begin(jf_cuda_graph *g, unsigned long long handle, char *why,
                                          size_t n);
JF_INTERNAL void jf_cuda_graph_while_end(jf_cuda_graph *g);
/* Makes the graph executable (no more kernels may be added). */
JF_INTERNAL int jf_cuda_graph_instantiate(jf_cuda_graph *g, char *why, size_t n);
/* Launches the instantiated graph on its stream; returns without waiting. */
JF_INTERNAL int jf_cuda_graph_launch(jf_cuda_graph *g, char *why, size_t n);
/* Copies on the graph's stream, ordered with its launches. Asynchronous only with page-locked
 * host memory: the driver returns from a copy to ordinary (pageable) memory once it is done,
 * so such a read waits for everything queued before it, and host work meant to overlap the
 * device's goes before it. */
JF_INTERNAL int jf_cuda_graph_to_device(jf_cuda_graph *g, jf_devptr dst, const void *src,
                                        size_t bytes, char *why, size_t n);
JF_INTERNAL int jf_cuda_graph_to_host(jf_cuda_graph *g, void *dst, jf_devptr src, size_t bytes,
                                      char *why, size_t n);
/* The graph's stream (a CUstream; NULL under the emulator), for libraries that take one
 * (cuBLAS). */
JF_INTERNAL void *jf_cuda_graph_stream(jf_cuda_graph *g);
/* Launches fn on g's stream now, outside the graph, ordered with its launches and copies;
 * returns without waiting. */
JF_INTERNAL int jf_cuda_stream_launch(jf_cuda_graph *g, void *fn, unsigned grid, unsigned block,
                                      void **args, char *why, size_t n);
/* Marks on a graph's stream, for ordering two streams without the host. */
#define JF_CUDA_MARKS 4
/* Records mark `slot` (0 .. JF_CUDA_MARKS-1) at the current end of g's stream. */
JF_INTERNAL int jf_cuda_graph_mark(jf_cuda_graph *g, int slot, char *why, size_t n);
/* Makes work enqueued on g's stream from now on wait until other's stream has reached its
 * latest mark `slot` (recorded before this call; none recorded: no wait). */
JF_INTERNAL int jf_cuda_graph_wait_mark(jf_cuda_graph *g, jf_cuda_graph *other, int slot,
                                        char *why, size_t n);
/* Waits until g's stream has reached its latest mark `slot` (none recorded: returns at once),
 * not for what was queued after it: a host synchronization, counted. */
JF_INTERNAL int jf_cuda_graph_sync_mark(jf_cuda_graph *g, int slot, char *why, size_t n);
/* Waits for everything queued on the stream: a host synchronization, counted. */
JF_INTERNAL int jf_cuda_graph_sync(jf_cuda_graph *g, char *why, size_t n);
/* Host synchronizations made through jf_cuda_graph_sync so far. */
JF_INTERNAL unsigned long jf_cuda_graph_syncs(const jf_cuda_graph *g);
/* Destroys the graph, its executable and its stream; accepts NULL. */
JF_INTERNAL void jf_cuda_graph_free(jf_cuda_graph *g);

#endif
