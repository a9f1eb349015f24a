/* The CUDA JIT backend: generated CUDA C → NVRTC → CUBIN (or PTX) → driver module.
 *
 * Place in the pipeline: codegen/emit_cuda.c writes the source; this module compiles it with
 * NVRTC (libnvrtc.so* opened with dlopen on first use, never linked), keeps the images in the
 * kernel cache (memory and disk, like the C backend, keyed additionally by the NVRTC version and
 * the GPU architecture) and loads them through runtime/cuda_api.c. CUBIN for the present GPU is
 * preferred over PTX: PTX from a newer NVRTC does not load on an older driver. A GPU newer than
 * the NVRTC (an architecture it cannot target) gets PTX for the newest one it can, which the
 * driver compiles when loading (jf_nvrtc_target). PTX is also available on request (tests
 * assemble it with ptxas on machines without a GPU).
 *
 * Generated code is compiled with --fmad=false so that, like the C kernels (-ffp-contract=off),
 * it performs the interpreter's separate multiplies and adds in the model's values; the sums of
 * the normal equations are explicit fma() calls (codegen/emit_cuda.c, one rounding per term, a
 * third of the damped sine's fp64 instructions fewer), and libdevice's math functions differ
 * from glibc's by an ulp or so.
 */
#ifndef JF_JIT_NVRTC_H
#define JF_JIT_NVRTC_H

#include <stddef.h>

#include "cache.h"
#include "kernels.h"

struct jf_cache_entry; /* a held module of the memory cache (cache.h) */

/* Options always passed to NVRTC besides the architecture, one by one and as the text that
 * enters the cache key (one definition, so the key cannot miss a change). */
#define JF_NVRTC_STD "--std=c++17"
#define JF_NVRTC_FMAD "--fmad=false"
#define JF_NVRTC_FLAGS JF_NVRTC_STD " " JF_NVRTC_FMAD

/* Loads libnvrtc (once, thread-safe). JF_OK, or JF_ERR_UNAVAILABLE with "unavailable: <reason>"
 * in why (built without the CUDA headers, or no libnvrtc.so* found). */
JF_INTERNAL int jf_nvrtc_load(char *why, size_t n);
/* NVRTC's version (0.0 when not loaded). */
JF_INTERNAL void jf_nvrtc_version(int *major, int *minor);
/* The file libnvrtc was loaded from ("" when unknown or not loaded); tools of the same toolkit
 * (ptxas) are found relative to it. */
JF_INTERNAL const char *jf_nvrtc_library_path(void);
/* The architectures NVRTC compiles for (e.g. 75, 80, ..., 120), ascending, from
 * nvrtcGetSupportedArchs; *count is 0 when unknown (NVRTC not loaded, or older than 11.2). */
JF_INTERNAL void jf_nvrtc_archs(const int **archs, int *count);
/* Opens the first of count shared-library names that loads, by SONAME and then in the
 * directory libnvrtc came from (a toolkit's lib directory is often not on the loader's path);
 * NULL when none does. For the toolkit's other libraries (cuBLAS, cuSOLVER). */
JF_INTERNAL void *jf_nvrtc_open_beside(const char *const *names, size_t count);

/* Compiles CUDA source for compute capability `arch` (e.g. 90): a CUBIN for sm_<arch> when
 * want_cubin, else PTX for compute_<arch> (NUL-terminated; size counts the NUL). *image (caller
 * frees with free()) and *size receive the result. *log (if not NULL) receives NVRTC's log on
 * failure, or NULL (caller frees with free()). JF_OK, JF_ERR_UNAVAILABLE, JF_ERR_COMPILE or
 * JF_ERR_NOMEM. The calling thread's and the process's locale are restored afterwards (some
 * NVRTC releases change them). */
JF_INTERNAL int jf_nvrtc_compile(const char *source, int arch, int want_cubin,
                                 unsigned char **image, size_t *size, char **log);

/* What to compile for a GPU of compute capability `arch` (e.g. 90) with an NVRTC that
 * supports the nsupported architectures in supported[] (ascending, as nvrtcGetSupportedArchs
 * gives them; nsupported 0: unknown, an NVRTC before 11.2). A CUBIN for sm_<arch> when arch is
 * supported (or unknown): returns arch, *cubin = 1. A GPU newer than the NVRTC: PTX for the
 * newest supported architecture below arch, which the driver compiles for the GPU when it
 * loads it: returns that architecture, *cubin = 0. A GPU older than every supported
 * architecture: returns 0. */
JF_INTERNAL int jf_nvrtc_target(int arch, const int *supported, int nsupported, int *cubin);

/* The kernel cache's key of the CUDA module of src: compiled by NVRTC nvrtc_major.nvrtc_minor
 * (nvrtc_major < 0: the emulator's module) for a GPU of compute capability device_arch, as a
 * CUBIN for sm_<arch> (cubin) or PTX for compute_<arch> (jf_nvrtc_target's choice). */
JF_INTERNAL jf_cache_key jf_cuda_cache_key(const char *src, int nvrtc_major, int nvrtc_minor,
                                           int device_arch, int arch, int cubin);
/* Compiles src with NVRTC for a GPU of compute capability device_arch (no GPU needed) and stores
 * it in the kernel cache directory dirname under the key such a GPU looks up with this NVRTC,
 * unless it is there already. With the emulator and $JITFIT_CUDA_PRECOMPILE_DIR, every module
 * the emulator builds is also precompiled for sm_90 there (with a warning when that fails): a
 * run on the emulator fills a cache that a GPU machine with the same NVRTC version uses as is
 * (scripts/gpu_bundle.sh). JF_OK, or an error with the reason in why. */
JF_INTERNAL int jf_cuda_precompile(const char *src, const char *dirname, int device_arch,
                                   char *why, size_t n);

/* Most kernels one module may hold for jf_cuda_module_get. */
#define JF_CUDA_MODULE_MAX_FNS 8

/* Compiles (or finds in the kernel cache, memory then disk) and loads any CUDA source for the
 * present GPU, and looks up the kernels called names[0..nnames) into fns (CUfunction handles).
 * Used for the code that is not a model's: the device-resident solver's kernels. *held
 * receives a reference to the module: the fns stay valid until the caller gives it back with
 * jf_cuda_module_release, after the last launch or graph that uses them has finished (NULL on
 * failure). JF_OK, or JF_ERR_UNAVAILABLE (no GPU or NVRTC) /
 * JF_ERR_COMPILE (NVRTC failed, the module does not load or lacks a kernel) / JF_ERR_NOMEM with
 * a one-line reason in why; cache problems add to warn. */
JF_INTERNAL int jf_cuda_module_get(const char *source, const char *const *names, size_t nnames,
                                   const jf_jit_options *opts, void **fns,
                                   struct jf_cache_entry **held, jf_cache_result *cache,
                                   char *why, size_t n, char *warn, size_t wn);
/* Gives back a module reference from jf_cuda_module_get; accepts NULL. */
JF_INTERNAL void jf_cuda_module_release(struct jf_cache_entry *held);

/* 1 when the module of source is ready without compiling it for the present GPU: in the
 * memory cache (not held by this call, so it may be unloaded before it is asked for), or a
 * valid entry in the disk cache (opts as for jf_cuda_module_get); 0 when it
 * would be compiled, or there is no usable GPU. For the device choice's compile estimate. */
JF_INTERNAL int jf_cuda_module_cached(const char *source, const jf_jit_options *opts);

/* ---- model kernels on the device ------------------------------------------------------------ */

/* The loaded CUDA kernels of one model. */
typedef struct jf_cuda_kernels jf_cuda_kernels;

/* Kernel entry points, for jf_cuda_kernels_function. */
typedef enum jf_cuda_kernel {
    JF_CUDA_RESIDUAL = 0,     /* jf_residual */
    JF_CUDA_JACOBIAN_ROW = 1, /* jf_jacobian_row */
    JF_CUDA_NORMAL_EQ = 2,    /* jf_normal_eq */
    JF_CUDA_REDUCE_BLOCKS = 3 /* jf_reduce_blocks */
} jf_cuda_kernel;

/* 1 when $JITFIT_GPU_PREFETCH is 0 (jf_emit_options.cuda_no_prefetch: an experiment's knob). */
JF_INTERNAL int jf_cuda_no_prefetch(void);
/* The CUDA source of m's kernels as jf_cuda_kernels_get builds them (loss and opts as there);
 * malloc'd, NULL when out of memory. */
JF_INTERNAL char *jf_cuda_model_source(const struct jf_model *m, const jf_jit_options *opts,
                                       int loss);

/* Compiles (or finds in the kernel cache) and loads m's CUDA kernels for the present GPU.
 * loss is -1 for a normal_eq that takes any loss at run time, or the one jf_loss it will be
 * used with (smaller, faster to compile; see jf_emit_options.cuda_loss). *cache (if not NULL)
 * says where they came from. JF_OK, or JF_ERR_UNAVAILABLE /
 * JF_ERR_COMPILE / JF_ERR_NOMEM with a one-line reason in why; disk-cache problems only add a
 * warning to warn (if not NULL; wn bytes, appended). m must outlive the result; the caller frees
 * it with jf_cuda_kernels_free once no launch or graph uses its kernels any more (the result
 * holds the module loaded until then; after, the memory cache may keep it for reuse). */
JF_INTERNAL int jf_cuda_kernels_get(const struct jf_model *m, const jf_jit_options *opts,
                                    int loss, jf_cuda_kernels **out, jf_cache_result *cache, char *why,
                                    size_t n, char *warn, size_t wn);
/* Frees k and gives back its module reference; accepts NULL. */
JF_INTERNAL void jf_cuda_kernels_free(jf_cuda_kernels *k);
/* Sums k's normal_eq writes per row: jf_emit_num_acc, and one more (the cost's rounding) for
 * single-precision kernels with register sums (jf_emit_cuda_fit_nsums). */
JF_INTERNAL size_t jf_cuda_kernels_nsums(const jf_cuda_kernels *k);
/* The driver's CUfunction of a kernel, for launching by a device solver. */
JF_INTERNAL void *jf_cuda_kernels_function(const jf_cuda_kernels *k, jf_cuda_kernel which);

/* Host convenience for checks: copies p and the data of points [0, npts) to the device, runs
 * jacobian_row and copies back r[i] and J[i*np + k] (row-major, as the CPU kernels). x has
 * ldx >= npts; y and w may be NULL. JF_OK or an error with the reason in why. */
JF_INTERNAL int jf_cuda_jacobian_rows(const jf_cuda_kernels *k, const double *p, const double *x,
                                      size_t ldx, const double *y, const double *w, size_t npts,
                                      double *r, double *J, char *why, size_t n);
/* Host convenience: normal_eq over [0, npts) on the device with the block partials reduced by
 * jf_reduce_blocks; acc as jf_kernels_normal_eq. JF_ERR_ARG when k was built for another loss. */
JF_INTERNAL int jf_cuda_normal_eq(const jf_cuda_kernels *k, const double *p, const double *x,
                                  size_t ldx, const double *y, const double *w, size_t npts,
                                  jf_loss loss, double f_scale, double *acc, char *why, size_t n);

#endif
