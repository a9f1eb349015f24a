/* cuSOLVER through dlopen (see cusolver_api.h). cusolverDn.h of the toolkit is included for the
 * prototypes only, so each function pointer has the exact type of the entry point. */
#include "cusolver_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <lapacke.h>

#include "cuda_emu.h"
#include "jit_nvrtc.h"
#include "kernels.h"

#if defined(JF_HAVE_CUDA_HEADERS) && defined(JF_HAVE_CUSOLVER_HEADERS)
#include <cusolverDn.h>

static struct {
    __typeof__(cusolverDnCreate) *create;
    __typeof__(cusolverDnSetStream) *set_stream;
    __typeof__(cusolverDnDpotrf_bufferSize) *potrf_size;
    __typeof__(cusolverDnDpotrf) *potrf;
    __typeof__(cusolverDnDpotrs) *potrs;
    cusolverDnHandle_t handle;
    int ok;
    char why[256];
} cs;

static pthread_once_t cs_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t cs_mu = PTHREAD_MUTEX_INITIALIZER;

static void load_cusolver(void) {
    char why[256];
    if (jf_cuda_init(why, sizeof why) != JF_OK) {
        snprintf(cs.why, sizeof cs.why, "%s", why);
        return;
    }
    static const char *const names[] = {"libcusolver.so.13", "libcusolver.so.12", "libcusolver.so.11",
                                        "libcusolver.so"};
    void *lib = jf_nvrtc_open_beside(names, sizeof names / sizeof names[0]);
    if (!lib) {
        snprintf(cs.why, sizeof cs.why, "unavailable: libcusolver.so not found");
        return;
    }
    static const char *const syms[] = {"cusolverDnCreate", "cusolverDnSetStream",
                                       "cusolverDnDpotrf_bufferSize", "cusolverDnDpotrf",
                                       "cusolverDnDpotrs"};
    void *f[5];
    for (int i = 0; i < 5; i++)
        if (!(f[i] = dlsym(lib, syms[i]))) {
            snprintf(cs.why, sizeof cs.why, "unavailable: libcusolver lacks %s", syms[i]);
            return;
        }
    memcpy(&cs.create, &f[0], sizeof f[0]);
    memcpy(&cs.set_stream, &f[1], sizeof f[1]);
    memcpy(&cs.potrf_size, &f[2], sizeof f[2]);
    memcpy(&cs.potrf, &f[3], sizeof f[3]);
    memcpy(&cs.potrs, &f[4], sizeof f[4]);
    cusolverStatus_t s = cs.create(&cs.handle);
    if (s != CUSOLVER_STATUS_SUCCESS) {
        snprintf(cs.why, sizeof cs.why, "unavailable: cusolverDnCreate failed (status %d)", (int)s);
        return;
    }
    cs.ok = 1;
}

static int drv_init(char *why, size_t n) {
    pthread_once(&cs_once, load_cusolver);
    if (!cs.ok) {
        snprintf(why, n, "%s", cs.why);
        return JF_ERR_UNAVAILABLE;
    }
    return JF_OK;
}

/* Every call: the handle is shared, so it is locked and pointed at g's stream first. */
static cusolverStatus_t call_begin(jf_cuda_graph *g) {
    pthread_mutex_lock(&cs_mu);
    return g ? cs.set_stream(cs.handle, (cudaStream_t)jf_cuda_graph_stream(g))
             : CUSOLVER_STATUS_SUCCESS;
}

static int call_end(cusolverStatus_t s, const char *what, char *why, size_t n) {
    pthread_mutex_unlock(&cs_mu);
    if (s == CUSOLVER_STATUS_SUCCESS) return JF_OK;
    snprintf(why, n, "%s failed (status %d)", what, (int)s);
    return JF_ERR_INTERNAL;
}

static int drv_potrf_lwork(size_t nn, jf_devptr A, size_t lda, size_t *lwork, char *why,
                           size_t n) {
    if (drv_init(why, n) != JF_OK) return JF_ERR_UNAVAILABLE;
    int lw = 0;
    cusolverStatus_t s = call_begin(NULL);
    if (s == CUSOLVER_STATUS_SUCCESS)
        s = cs.potrf_size(cs.handle, CUBLAS_FILL_MODE_UPPER, (int)nn, (double *)(uintptr_t)A,
                          (int)lda, &lw);
    *lwork = lw > 0 ? (size_t)lw : 1;
    return call_end(s, "cusolverDnDpotrf_bufferSize", why, n);
}

static int drv_potrf_u(jf_cuda_graph *g, size_t nn, jf_devptr A, size_t lda, jf_devptr work,
                       size_t lwork, jf_devptr info, char *why, size_t n) {
    if (drv_init(why, n) != JF_OK) return JF_ERR_UNAVAILABLE;
    cusolverStatus_t s = call_begin(g);
    if (s == CUSOLVER_STATUS_SUCCESS)
        s = cs.potrf(cs.handle, CUBLAS_FILL_MODE_UPPER, (int)nn, (double *)(uintptr_t)A, (int)lda,
                     (double *)(uintptr_t)work, (int)lwork, (int *)(uintptr_t)info);
    return call_end(s, "cusolverDnDpotrf", why, n);
}

static int drv_potrs_u(jf_cuda_graph *g, size_t nn, size_t nrhs, jf_devptr A, size_t lda,
                       jf_devptr B, size_t ldb, jf_devptr info, char *why, size_t n) {
    if (drv_init(why, n) != JF_OK) return JF_ERR_UNAVAILABLE;
    cusolverStatus_t s = call_begin(g);
    if (s == CUSOLVER_STATUS_SUCCESS)
        s = cs.potrs(cs.handle, CUBLAS_FILL_MODE_UPPER, (int)nn, (int)nrhs,
                     (const double *)(uintptr_t)A, (int)lda, (double *)(uintptr_t)B, (int)ldb,
                     (int *)(uintptr_t)info);
    return call_end(s, "cusolverDnDpotrs", why, n);
}

#else

static int drv_init(char *why, size_t n) {
    snprintf(why, n, "unavailable: jitfit was built without the cuSOLVER headers");
    return JF_ERR_UNAVAILABLE;
}
static int drv_potrf_lwork(size_t nn, jf_devptr A, size_t lda, size_t *lwork, char *why,
                           size_t n) {
    (void)nn, (void)A, (void)lda;
    *lwork = 0;
    return drv_init(why, n);
}
static int drv_potrf_u(jf_cuda_graph *g, size_t nn, jf_devptr A, size_t lda, jf_devptr work,
                       size_t lwork, jf_devptr info, char *why, size_t n) {
    (void)g, (void)nn, (void)A, (void)lda, (void)work, (void)lwork, (void)info;
    return drv_init(why, n);
}
static int drv_potrs_u(jf_cuda_graph *g, size_t nn, size_t nrhs, jf_devptr A, size_t lda,
                       jf_devptr B, size_t ldb, jf_devptr info, char *why, size_t n) {
    (void)g, (void)nn, (void)nrhs, (void)A, (void)lda, (void)B, (void)ldb, (void)info;
    return drv_init(why, n);
}

#endif

/* ---- the entry points: cuSOLVER, or LAPACK on the emulator's memory -------------------------- */

int jf_cusolver_init(char *why, size_t n) { return jf_cuda_emulated() ? JF_OK : drv_init(why, n); }

int jf_cusolver_potrf_lwork(size_t nn, jf_devptr A, size_t lda, size_t *lwork, char *why,
                            size_t n) {
    if (!jf_cuda_emulated()) return drv_potrf_lwork(nn, A, lda, lwork, why, n);
    *lwork = 1;
    return JF_OK;
}

int jf_cusolver_potrf_u(jf_cuda_graph *g, size_t nn, jf_devptr A, size_t lda, jf_devptr work,
                        size_t lwork, jf_devptr info, char *why, size_t n) {
    if (!jf_cuda_emulated()) return drv_potrf_u(g, nn, A, lda, work, lwork, info, why, n);
    jf_blas_single_threaded();
    *(int *)(uintptr_t)info = (int)LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'U', (lapack_int)nn,
                                                        (double *)(uintptr_t)A, (lapack_int)lda);
    return JF_OK;
}

int jf_cusolver_potrs_u(jf_cuda_graph *g, size_t nn, size_t nrhs, jf_devptr A, size_t lda,
                        jf_devptr B, size_t ldb, jf_devptr info, char *why, size_t n) {
    if (!jf_cuda_emulated()) return drv_potrs_u(g, nn, nrhs, A, lda, B, ldb, info, why, n);
    jf_blas_single_threaded();
    *(int *)(uintptr_t)info = (int)LAPACKE_dpotrs_work(
        LAPACK_COL_MAJOR, 'U', (lapack_int)nn, (lapack_int)nrhs, (const double *)(uintptr_t)A,
        (lapack_int)lda, (double *)(uintptr_t)B, (lapack_int)ldb);
    return JF_OK;
}
