/* cuBLAS through dlopen (see cublas_api.h). cublas_api.h of the toolkit is included for the
 * prototypes only, so each function pointer has the exact type of the _v2 entry point. */
#include "cublas_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cblas.h>

#include "cuda_emu.h"
#include "jit_nvrtc.h"
#include "kernels.h"

#if defined(JF_HAVE_CUDA_HEADERS) && defined(JF_HAVE_CUBLAS_HEADERS)
#include <cublas_api.h>

static struct {
    __typeof__(cublasCreate_v2) *create;
    __typeof__(cublasSetStream_v2) *set_stream;
    __typeof__(cublasDsyrk_v2) *dsyrk;
    __typeof__(cublasDgemv_v2) *dgemv;
    cublasHandle_t handle;
    int ok;
    char why[256];
} cb;

static pthread_once_t cb_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t cb_mu = PTHREAD_MUTEX_INITIALIZER;

static void load_cublas(void) {
    char why[256];
    if (jf_cuda_init(why, sizeof why) != JF_OK) {
        snprintf(cb.why, sizeof cb.why, "%s", why);
        return;
    }
    static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11",
                                        "libcublas.so"};
    void *lib = jf_nvrtc_open_beside(names, sizeof names / sizeof names[0]);
    if (!lib) {
        snprintf(cb.why, sizeof cb.why, "unavailable: libcublas.so not found");
        return;
    }
    void *f[4] = {dlsym(lib, "cublasCreate_v2"), dlsym(lib, "cublasSetStream_v2"),
                  dlsym(lib, "cublasDsyrk_v2"), dlsym(lib, "cublasDgemv_v2")};
    if (!f[0] || !f[1] || !f[2] || !f[3]) {
        snprintf(cb.why, sizeof cb.why, "unavailable: libcublas lacks a _v2 entry point");
        return;
    }
    memcpy(&cb.create, &f[0], sizeof f[0]);
    memcpy(&cb.set_stream, &f[1], sizeof f[1]);
    memcpy(&cb.dsyrk, &f[2], sizeof f[2]);
    memcpy(&cb.dgemv, &f[3], sizeof f[3]);
    cublasStatus_t s = cb.create(&cb.handle);
    if (s != CUBLAS_STATUS_SUCCESS) {
        snprintf(cb.why, sizeof cb.why, "unavailable: cublasCreate failed (status %d)", (int)s);
        return;
    }
    cb.ok = 1;
}

static int drv_init(char *why, size_t n) {
    pthread_once(&cb_once, load_cublas);
    if (!cb.ok) {
        snprintf(why, n, "%s", cb.why);
        return JF_ERR_UNAVAILABLE;
    }
    return JF_OK;
}

/* Every call: the handle is shared, so it is locked and pointed at g's stream first. */
static cublasStatus_t call_begin(jf_cuda_graph *g) {
    pthread_mutex_lock(&cb_mu);
    return cb.set_stream(cb.handle, (cudaStream_t)jf_cuda_graph_stream(g));
}

static int call_end(cublasStatus_t s, const char *what, char *why, size_t n) {
    pthread_mutex_unlock(&cb_mu);
    if (s == CUBLAS_STATUS_SUCCESS) return JF_OK;
    snprintf(why, n, "%s failed (status %d)", what, (int)s);
    return JF_ERR_INTERNAL;
}

static int drv_syrk_t(jf_cuda_graph *g, size_t nc, size_t k, jf_devptr A, size_t lda,
                      double beta, jf_devptr C, size_t ldc, char *why, size_t n) {
    if (drv_init(why, n) != JF_OK) return JF_ERR_UNAVAILABLE;
    const double one = 1.0;
    cublasStatus_t s = call_begin(g);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cb.dsyrk(cb.handle, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_T, (int)nc, (int)k, &one,
                     (const double *)(uintptr_t)A, (int)lda, &beta, (double *)(uintptr_t)C, (int)ldc);
    return call_end(s, "cublasDsyrk", why, n);
}

static int drv_gemv_t(jf_cuda_graph *g, size_t m, size_t nc, jf_devptr A, size_t lda,
                      jf_devptr x, double beta, jf_devptr y, char *why, size_t n) {
    if (drv_init(why, n) != JF_OK) return JF_ERR_UNAVAILABLE;
    const double one = 1.0;
    cublasStatus_t s = call_begin(g);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cb.dgemv(cb.handle, CUBLAS_OP_T, (int)m, (int)nc, &one, (const double *)(uintptr_t)A,
                     (int)lda, (const double *)(uintptr_t)x, 1, &beta, (double *)(uintptr_t)y, 1);
    return call_end(s, "cublasDgemv", why, n);
}

#else

static int drv_init(char *why, size_t n) {
    snprintf(why, n, "unavailable: jitfit was built without the cuBLAS headers");
    return JF_ERR_UNAVAILABLE;
}
static int drv_syrk_t(jf_cuda_graph *g, size_t nc, size_t k, jf_devptr A, size_t lda,
                      double beta, jf_devptr C, size_t ldc, char *why, size_t n) {
    (void)g, (void)nc, (void)k, (void)A, (void)lda, (void)beta, (void)C, (void)ldc;
    return drv_init(why, n);
}
static int drv_gemv_t(jf_cuda_graph *g, size_t m, size_t nc, jf_devptr A, size_t lda,
                      jf_devptr x, double beta, jf_devptr y, char *why, size_t n) {
    (void)g, (void)m, (void)nc, (void)A, (void)lda, (void)x, (void)beta, (void)y;
    return drv_init(why, n);
}

#endif

/* ---- the entry points: cuBLAS, or CBLAS on the emulator's memory ----------------------------- */

int jf_cublas_init(char *why, size_t n) { return jf_cuda_emulated() ? JF_OK : drv_init(why, n); }

int jf_cublas_syrk_t(jf_cuda_graph *g, size_t nc, size_t k, jf_devptr A, size_t lda, double beta,
                     jf_devptr C, size_t ldc, char *why, size_t n) {
    if (!jf_cuda_emulated()) return drv_syrk_t(g, nc, k, A, lda, beta, C, ldc, why, n);
    jf_blas_single_threaded();
    cblas_dsyrk(CblasColMajor, CblasUpper, CblasTrans, (int)nc, (int)k, 1.0,
                (const double *)(uintptr_t)A, (int)lda, beta, (double *)(uintptr_t)C, (int)ldc);
    return JF_OK;
}

int jf_cublas_gemv_t(jf_cuda_graph *g, size_t m, size_t nc, jf_devptr A, size_t lda, jf_devptr x,
                     double beta, jf_devptr y, char *why, size_t n) {
    if (!jf_cuda_emulated()) return drv_gemv_t(g, m, nc, A, lda, x, beta, y, why, n);
    jf_blas_single_threaded();
    cblas_dgemv(CblasColMajor, CblasTrans, (int)m, (int)nc, 1.0, (const double *)(uintptr_t)A,
                (int)lda, (const double *)(uintptr_t)x, 1, beta, (double *)(uintptr_t)y, 1);
    return JF_OK;
}
