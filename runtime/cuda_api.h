/* The CUDA driver API, loaded at run time.
 *
 * libcuda.so.1 is opened with dlopen on first use (once per process, thread-safe); every driver
 * entry point is then resolved through cuGetProcAddress with the CUDA_VERSION of the headers we
 * were built with, so we get the ABI those headers describe (cuda.h maps many names to _v2/_v3
 * variants that plain dlsym would miss). Nothing links against libcuda, so the same binary runs
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

/* Compute capability of the device (after jf_cuda_init succeeded). */
JF_INTERNAL void jf_cuda_arch(int *major, int *minor);

/* Loads a CUBIN or PTX image (cuModuleLoadData); *module receives an opaque handle that stays
 * loaded until jf_cuda_module_unload. JF_OK or JF_ERR_COMPILE with the reason in why. */
JF_INTERNAL int jf_cuda_module_load(const void *image, void **module, char *why, size_t n);
JF_INTERNAL void jf_cuda_module_unload(void *module);
/* The kernel called name in module, or NULL (reason in why). */
JF_INTERNAL void *jf_cuda_module_function(void *module, const char *name, char *why, size_t n);

/* Device memory and copies (synchronous). JF_OK or JF_ERR_UNAVAILABLE / JF_ERR_NOMEM with the
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

#endif
