/* cuBLAS, loaded at run time, for the GPU solver's many-parameter path (solver/lm_cuda.c).
 *
 * Like libcuda and libnvrtc, libcublas is opened with dlopen on first use (its SONAMEs, then
 * beside the libnvrtc that was found, since toolkits keep both in one directory) and never
 * linked, so the same binary runs without it. One handle serves the process, behind a lock;
 * each call names the stream of a jf_cuda_graph (its work is ordered with that graph's
 * launches and copies). Matrices are column-major device arrays, as cuBLAS takes them.
 * Under the CUDA emulator (cuda_emu.h) the same calls run CBLAS (OpenBLAS) on the emulated
 * device memory. Nothing here prints.
 */
#ifndef JF_CUBLAS_API_H
#define JF_CUBLAS_API_H

#include <stddef.h>

#include "cuda_api.h"

/* Loads libcublas and creates the handle (once). JF_OK, or JF_ERR_UNAVAILABLE with
 * "unavailable: <reason>" in why. */
JF_INTERNAL int jf_cublas_init(char *why, size_t n);

/* C (nc × nc, upper triangle, ldc) = Aᵀ A + beta C for A (k × nc, lda), on g's stream:
 * cublasDsyrk with CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_T. JF_OK or JF_ERR_INTERNAL with the
 * reason in why. */
JF_INTERNAL int jf_cublas_syrk_t(jf_cuda_graph *g, size_t nc, size_t k, jf_devptr A, size_t lda,
                                 double beta, jf_devptr C, size_t ldc, char *why, size_t n);

/* y (nc) = Aᵀ x + beta y for A (m × nc, lda), x (m), on g's stream: cublasDgemv with
 * CUBLAS_OP_T. JF_OK or JF_ERR_INTERNAL with the reason in why. */
JF_INTERNAL int jf_cublas_gemv_t(jf_cuda_graph *g, size_t m, size_t nc, jf_devptr A, size_t lda,
                                 jf_devptr x, double beta, jf_devptr y, char *why, size_t n);

#endif
