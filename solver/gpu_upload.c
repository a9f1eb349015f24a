/* A fit's data to the GPU: one copy from the caller's (pageable) memory, complete on return.
 *
 * cuMemcpyHtoD from pageable memory makes the driver copy the data through its own small
 * page-locked buffer on one host thread, and the H200's one session measured a fit's time
 * linear in its points at ≈ 11 ns per point from 10⁶ points on (docs/PERFORMANCE.md, "GPU
 * solver"): 16 bytes per point at ≈ 1.5 GB/s, far below what the loop needs. A staged upload
 * page-locks nothing per call: two page-locked buffers of JF_GPU_STAGE_BYTES, allocated on
 * first use and kept for the process (cuMemHostAlloc costs milliseconds), each with its own
 * stream; threads of a process-wide pool copy one chunk of the data into a buffer while the
 * other buffer's chunk goes up. Whether it beats the driver's copy is a measurement
 * (bench_gpu_copy's "staged" column, bench_gpu with $JITFIT_GPU_UPLOAD=direct); the rule below
 * is the expectation until then.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "solver.h"

/* Bytes per staging buffer; $JITFIT_GPU_STAGE (bytes, 4096 to 1 GiB, read once) overrides. */
#define JF_GPU_STAGE_BYTES ((size_t)32 << 20)
/* Smaller copies go straight to cuMemcpyHtoD: below a few chunks the pipeline has nothing to
 * overlap, and the driver's own staging is as good. */
#define JF_GPU_STAGE_MIN ((size_t)4 << 20)
/* Most threads copying into a staging buffer: a few saturate a socket's memory bandwidth;
 * $JITFIT_GPU_STAGE_THREADS (1 to 64, read once) sets the number instead. */
#define JF_GPU_STAGE_THREADS 8

/* The process's staging buffers, their streams and the copying threads. */
typedef struct stage {
    pthread_mutex_t mu; /* one staged upload at a time; others copy directly */
    int tried;          /* set-up attempted (failed == 0: usable) */
    int failed;
    size_t bytes;       /* per buffer */
    char *buf[2];
    jf_cuda_graph *q[2];
    jf_pool *pool;
} stage;

static stage g_stage = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The staging buffers and streams; 0 when page-locked memory or a stream is refused (then
 * every upload is direct). Called with g_stage.mu held. */
static int stage_ready(void) {
    stage *s = &g_stage;
    if (s->tried) return !s->failed;
    s->tried = 1;
    s->bytes = JF_GPU_STAGE_BYTES;
    const char *e = getenv("JITFIT_GPU_STAGE");
    if (e && *e) {
        double v = strtod(e, NULL);
        if (v >= 4096.0 && v <= 1073741824.0) s->bytes = ((size_t)v + 4095) & ~(size_t)4095;
    }
    char why[256];
    for (int b = 0; b < 2; b++)
        if (jf_cuda_host_alloc((void **)&s->buf[b], s->bytes, why, sizeof why) != JF_OK ||
            jf_cuda_graph_new(&s->q[b], NULL, why, sizeof why) != JF_OK)
            s->failed = 1;
    if (s->failed) {
        for (int b = 0; b < 2; b++) {
            jf_cuda_graph_free(s->q[b]);
            jf_cuda_host_free(s->buf[b]);
            s->q[b] = NULL;
            s->buf[b] = NULL;
        }
        return 0;
    }
    int nt = jf_threads_resolve(0), cap = JF_GPU_STAGE_THREADS;
    const char *t = getenv("JITFIT_GPU_STAGE_THREADS");
    if (t && *t) {
        long v = strtol(t, NULL, 10);
        if (v >= 1 && v <= 64) nt = cap = (int)v;
    }
    s->pool = jf_pool_create(nt < cap ? nt : cap);
    return 1;
}

/* The pieces, one after the other, through the staging buffers: the host fills buffer k & 1
 * while the other's chunk is copied up, and waits for a buffer's last copy before refilling
 * it. A chunk may hold the end of one piece and the start of the next (a copy up each): a fit's
 * x and y make one pipeline, not two that each fill and drain. */
static int staged(const jf_gpu_piece *pc, size_t npc, int *finite, char *why, size_t n) {
    stage *s = &g_stage;
    int code = JF_OK;
    size_t i = 0, off = 0; /* the next byte to send: piece i, offset off */
    while (i < npc && pc[i].bytes == 0) i++;
    for (size_t k = 0; code == JF_OK && i < npc; k++) {
        int b = (int)(k & 1);
        if (k >= 2) code = jf_cuda_graph_sync(s->q[b], why, n);
        for (size_t used = 0; code == JF_OK && i < npc;) {
            if (pc[i].check) used = (used + 7) & ~(size_t)7; /* doubles where they are tested */
            if (used >= s->bytes) break;
            size_t len = pc[i].bytes - off < s->bytes - used ? pc[i].bytes - off : s->bytes - used;
            const char *src = (const char *)pc[i].src + off;
            if (!pc[i].check)
                jf_pool_memcpy(s->pool, s->buf[b] + used, src, len);
            else if (!jf_pool_copy_finite(s->pool, (double *)(void *)(s->buf[b] + used),
                                          (const double *)(const void *)src, len / 8))
                *finite = 0;
            code = jf_cuda_graph_to_device(s->q[b], pc[i].dst + off, s->buf[b] + used, len, why,
                                           n);
            used += len;
            off += len;
            if (off == pc[i].bytes) {
                off = 0;
                for (i++; i < npc && pc[i].bytes == 0; i++) {
                }
            }
        }
    }
    /* both streams drained even after an error: no copy may read a buffer the next upload
     * refills */
    for (int b = 0; b < 2; b++) {
        char w2[256];
        int c = jf_cuda_graph_sync(s->q[b], w2, sizeof w2);
        if (code == JF_OK && c != JF_OK) {
            code = c;
            snprintf(why, n, "%s", w2);
        }
    }
    return code;
}

size_t jf_gpu_upload_stage_bytes(void) {
    pthread_mutex_lock(&g_stage.mu);
    size_t b = stage_ready() ? g_stage.bytes : 0;
    pthread_mutex_unlock(&g_stage.mu);
    return b;
}

int jf_gpu_upload_mode(void) {
    const char *e = getenv("JITFIT_GPU_UPLOAD");
    if (e && !strcmp(e, "direct")) return JF_UPLOAD_DIRECT;
    if (e && !strcmp(e, "staged")) return JF_UPLOAD_STAGED;
    return JF_UPLOAD_AUTO;
}

int jf_gpu_upload_pieces(const jf_gpu_piece *pc, size_t npc, int mode, int *how, int *finite,
                         char *why, size_t n) {
    size_t bytes = 0;
    for (size_t i = 0; i < npc; i++) bytes += pc[i].bytes;
    if (how) *how = JF_UPLOAD_DIRECT;
    int fin = -1;
    if (jf_gpu_upload_stages(bytes, mode) && bytes > 0 &&
        pthread_mutex_trylock(&g_stage.mu) == 0) {
        int code = JF_OK, done = 0;
        if (stage_ready()) {
            fin = 1;
            code = staged(pc, npc, &fin, why, n);
            done = 1;
        }
        pthread_mutex_unlock(&g_stage.mu);
        if (done) {
            if (how) *how = JF_UPLOAD_STAGED;
            if (finite) *finite = fin;
            return code;
        }
    }
    if (finite) *finite = fin;
    int code = JF_OK;
    for (size_t i = 0; code == JF_OK && i < npc; i++)
        if (pc[i].bytes) code = jf_cuda_to_device(pc[i].dst, pc[i].src, pc[i].bytes, why, n);
    return code;
}

int jf_gpu_upload_stages(size_t bytes, int mode) {
    return mode == JF_UPLOAD_STAGED || (mode == JF_UPLOAD_AUTO && bytes >= JF_GPU_STAGE_MIN);
}

int jf_gpu_upload(jf_devptr dst, const void *src, size_t bytes, int mode, int *how, char *why,
                  size_t n) {
    jf_gpu_piece pc = {dst, src, bytes, 0};
    return jf_gpu_upload_pieces(&pc, 1, mode, how, NULL, why, n);
}
