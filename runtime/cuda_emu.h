/* A CUDA emulator on the CPU behind the driver interface of cuda_api.h, for testing the GPU
 * solvers on machines without a GPU (CI, most developers' machines).
 *
 * With JITFIT_CUDA_EMULATE=1 in the environment, every jf_cuda_* call of runtime/cuda_api.c
 * comes here instead of going to libcuda, and runtime/jit_nvrtc.c hands the CUDA source itself
 * to jf_cuda_module_load instead of compiling it with NVRTC. A module is then the source behind
 * the device shim (cuda_emu_device.h) built by the host's C++ compiler and loaded with dlopen;
 * device memory is host memory (filled with NaN bytes when allocated, so reads of memory never
 * written show up as NaN), limited to $JITFIT_CUDA_EMULATE_MEM bytes (default 4 GiB) so the
 * out-of-memory paths can be exercised; a graph runs when launched, its nodes in an order that
 * respects their dependencies but is otherwise as far from the order of insertion as it can be
 * (the newest ready node first), so a missing dependency changes the result; WHILE nodes loop
 * while their condition is set, the condition being reset to 0 at each launch.
 * JITFIT_CUDA_EMULATE_FAIL=while makes it refuse WHILE nodes, as a driver might, so that the
 * fallback to unrolled graphs is tested. JITFIT_CUDA_EMULATE_ULPS=N (N > 0) makes the device's
 * double-precision math functions round differently from the host's libm, within CUDA's
 * documented error bounds, N choosing which way (see cuda_emu_device.h), for tests of
 * agreement between backends.
 *
 * It checks logic, not speed: the emulated GPU is orders of magnitude slower than the CPU
 * solver, its math is the host's libm (moved by a few ulps with JITFIT_CUDA_EMULATE_ULPS), and
 * it has no concurrency (a race on a real GPU is not seen here). Results report "CUDA emulator"
 * as the GPU's name. Nothing here prints.
 */
#ifndef JF_CUDA_EMU_H
#define JF_CUDA_EMU_H

#include <stddef.h>

#include "cuda_api.h"

/* 1 when JITFIT_CUDA_EMULATE is set to a value other than "" or "0" (read once). */
JF_INTERNAL int jf_cuda_emulated(void);
/* Reads the JITFIT_CUDA_EMULATE* variables again (tests that change them). */
JF_INTERNAL void jf_cuda_emulate_reread(void);

/* The emulated counterparts of the jf_cuda_* functions of cuda_api.h, same contracts. */
JF_INTERNAL int jf_emu_status(char *buf, size_t n);
JF_INTERNAL void jf_emu_arch(int *major, int *minor);
JF_INTERNAL void jf_emu_driver_facts_get(jf_cuda_driver_facts *out);
JF_INTERNAL int jf_emu_gpu_facts_get(int ordinal, jf_cuda_gpu_facts *out, char *why, size_t n);
/* image is the module's CUDA source (NUL-terminated). */
JF_INTERNAL int jf_emu_module_load(const void *image, void **module, char *why, size_t n);
JF_INTERNAL void jf_emu_module_unload(void *module);
JF_INTERNAL void *jf_emu_module_function(void *module, const char *name, char *why, size_t n);
/* $JITFIT_CUDA_EMULATE_LOCAL bytes per thread (default 0: the emulator has no frames to
 * measure) for the 2048 threads of its one multiprocessor, whatever fn. */
JF_INTERNAL size_t jf_emu_local_reserve(void *fn);
JF_INTERNAL int jf_emu_alloc(jf_devptr *p, size_t bytes, char *why, size_t n);
JF_INTERNAL void jf_emu_free(jf_devptr p);
JF_INTERNAL int jf_emu_launch(void *fn, unsigned grid, unsigned block, void **args, char *why,
                              size_t n);
JF_INTERNAL int jf_emu_mem_info(size_t *free_bytes, size_t *total_bytes);
JF_INTERNAL int jf_emu_graph_new(jf_cuda_graph **g, char *why, size_t n);
JF_INTERNAL void jf_emu_graph_free(jf_cuda_graph *g);
JF_INTERNAL int jf_emu_graph_kernel_deps(jf_cuda_graph *g, void *fn, unsigned grid,
                                         unsigned block, void **args, void *const *deps,
                                         int ndeps, void **node_out, char *why, size_t n);
JF_INTERNAL int jf_emu_graph_copy_deps(jf_cuda_graph *g, jf_devptr dst, const void *src,
                                       size_t bytes, void *const *deps, int ndeps,
                                       void **node_out, char *why, size_t n);
JF_INTERNAL void *jf_emu_graph_last(jf_cuda_graph *g);
JF_INTERNAL int jf_emu_graph_while_handle(jf_cuda_graph *g, unsigned long long *handle,
                                          char *why, size_t n);
JF_INTERNAL int jf_emu_graph_while_begin(jf_cuda_graph *g, unsigned long long handle, char *why,
                                         size_t n);
JF_INTERNAL void jf_emu_graph_while_end(jf_cuda_graph *g);
JF_INTERNAL int jf_emu_graph_instantiate(jf_cuda_graph *g, char *why, size_t n);
JF_INTERNAL int jf_emu_graph_launch(jf_cuda_graph *g, char *why, size_t n);
JF_INTERNAL int jf_emu_graph_sync(jf_cuda_graph *g, char *why, size_t n);
JF_INTERNAL unsigned long jf_emu_graph_syncs(const jf_cuda_graph *g);

#endif
