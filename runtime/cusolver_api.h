/* cuSOLVER, loaded at run time, for the p×p systems of the GPU solver's many-parameter path
 * (solver/lm_cuda.c, lm_core.h's external factorizations).
 *
 * Opened with dlopen like libcublas (cublas_api.h) and never linked; one handle serves the
 * process, behind a lock, and each call runs on the stream of a jf_cuda_graph. Matrices are
 * column-major device arrays. Under the CUDA emulator (cuda_emu.h) the same calls run LAPACK
 * (LAPACKE) on the emulated device memory. Nothing here prints.
 */
#ifndef JF_CUSOLVER_API_H
#define JF_CUSOLVER_API_H

#include <stddef.h>

#include "cuda_api.h"

/* Loads libcusolver and creates the handle (once). JF_OK, or JF_ERR_UNAVAILABLE with
 * "unavailable: <reason>" in why. */
JF_INTERNAL int jf_cusolver_init(char *why, size_t n);

/* *lwork = doubles of workspace jf_cusolver_potrf_u needs for order nn at A (ld lda). */
JF_INTERNAL int jf_cusolver_potrf_lwork(size_t nn, jf_devptr A, size_t lda, size_t *lwork,
                                        char *why, size_t n);

/* Cholesky A = UᵀU in place (nn × nn, upper triangle, ld lda) on g's stream, with lwork doubles
 * of workspace at work; the int at info receives 0, or the order of the first non-positive
 * pivot: cusolverDnDpotrf with CUBLAS_FILL_MODE_UPPER. JF_OK or JF_ERR_INTERNAL (why). */
JF_INTERNAL int jf_cusolver_potrf_u(jf_cuda_graph *g, size_t nn, jf_devptr A, size_t lda,
                                    jf_devptr work, size_t lwork, jf_devptr info, char *why,
                                    size_t n);

/* B (nn × nrhs, ld ldb) = A⁻¹ B from potrf's factor in A, on g's stream: cusolverDnDpotrs
 * with CUBLAS_FILL_MODE_UPPER; the int at info receives 0 (or -i for a bad argument). */
JF_INTERNAL int jf_cusolver_potrs_u(jf_cuda_graph *g, size_t nn, size_t nrhs, jf_devptr A,
                                    size_t lda, jf_devptr B, size_t ldb, jf_devptr info,
                                    char *why, size_t n);

#endif
