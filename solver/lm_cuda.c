/* The GPU solver: the whole Levenberg-Marquardt loop on the device, launched as one CUDA graph.
 *
 * Data go to the device once (jf_gpu_problem_init). The loop state (lm_core.h's jf_lmc and its
 * workspace: parameters, scaling, trust region, λ, the accept/reject decision, the status word)
 * lives in device memory; one iteration is three kernels:
 *   normal_eq(x_try) → reduce_blocks → jf_lm_step(judge) (model kernels from jit_nvrtc.c, the
 *                                                          step from the solver module below)
 * preceded once by normal_eq(x) → reduce_blocks → jf_lm_step(start). Where the driver has WHILE
 * conditional nodes (CUDA 12.4), the iteration is the body of one, whose condition a tiny
 * kernel sets from the status word: the host launches the graph and synchronizes once, to read
 * the result. Otherwise the graph holds JF_LM_CUDA_UNROLL iterations whose kernels return at
 * once when the status word says the loop ended, and the host relaunches it until then (one
 * synchronization per block of iterations). The finish (polish for small problems, statistics)
 * runs through jf_problem_ops on the same device data.
 *
 * The conditional kernel sits in its own module: it calls cudaGraphSetConditional, which the
 * driver resolves when the module loads, so a driver that cannot only loses the WHILE form.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../codegen/emit.h"
#include "../runtime/cublas_api.h"
#include "../runtime/cuda_api.h"
#include "../runtime/cusolver_api.h"
#include "../runtime/jit_nvrtc.h"
#include "lm_core.h"
#include "solver.h"

extern const char jf_embed_step_h[];
extern const char jf_embed_lm_core_h[];
extern const char jf_embed_loss_h[];

/* Kernels of the solver module, after step.h and lm_core.h. One thread runs the state machine:
 * the p×p work is tiny and sequential, and a block of idle threads would cost nothing more. */
static const char solver_kernels[] =
    "\n/* ---- device-resident LM loop (solver/lm_cuda.c) ---- */\n"
    "/* The state machine's one entry (ptxas compiles a kernel's whole call tree, so one entry\n"
    " * compiles lm_core.h once): what 0 starts, 1 judges, with the p×p factorizations in the\n"
    " * kernel when F is null. With them handed to cuSOLVER (many parameters; F, then Finv, np × np\n"
    " * each, and finfo): 0 and 1 as before, 2 resumes after the host's potrf/potrs on F, 3 resumes\n"
    " * and factorizes whatever else the step needs here (the last round of a pass). */\n"
    "#define JF_STEP_SHARED_WS 4800u  /* doubles: the workspace of up to 29 parameters */\n"
    "#define JF_STEP_SHARED_IWS 96u\n"
    "/* The state and its workspace are copied into shared memory by the warp, worked on by one\n"
    " * thread and copied back: the state machine's serial code makes one dependent access after\n"
    " * another, each a round trip to L2 in global memory (the H200 timed the kernel at 70 µs a\n"
    " * step for 5 parameters). Larger workspaces stay in global memory. */\n"
    "extern \"C\" __global__ void jf_lm_step(jf_lmc *c, double *ws, int *iws, const double *acc,\n"
    "                                       double *F, int *finfo, int what)\n"
    "{\n"
    "    if (blockIdx.x != 0) return;\n"
    "    __shared__ double s_ws[JF_STEP_SHARED_WS];\n"
    "    __shared__ int s_iws[JF_STEP_SHARED_IWS];\n"
    "    __shared__ jf_lmc s_c;\n"
    "    const unsigned long long np = c->np, nh = c->nheld;\n"
    "    const unsigned long long nws = jf_lmc_ws_doubles(np, nh), niws = jf_lmc_ws_ints(np);\n"
    "    const unsigned long long nc = sizeof(jf_lmc) / 8;\n"
    "    const bool staged = sizeof(jf_lmc) % 8 == 0 && nws <= JF_STEP_SHARED_WS &&\n"
    "                        niws <= JF_STEP_SHARED_IWS;\n"
    "    if (staged) {\n"
    "        for (unsigned long long i = threadIdx.x; i < nws; i += blockDim.x) s_ws[i] = ws[i];\n"
    "        for (unsigned long long i = threadIdx.x; i < niws; i += blockDim.x)\n"
    "            s_iws[i] = iws[i];\n"
    "        for (unsigned long long i = threadIdx.x; i < nc; i += blockDim.x)\n"
    "            ((unsigned long long *)&s_c)[i] = ((const unsigned long long *)c)[i];\n"
    "        __syncthreads();\n"
    "    }\n"
    "    if (threadIdx.x == 0) {\n"
    "        jf_lmc *cc = staged ? &s_c : c;\n"
    "        jf_lmc_views v;\n"
    "        jf_lmc_views_init(&v, staged ? s_ws : ws, staged ? s_iws : iws, np, nh);\n"
    "        if (F != nullptr) {\n"
    "            v.F = F;\n"
    "            v.Finv = F + np * np;\n"
    "            v.finfo = finfo;\n"
    "            v.external = what != 3;\n"
    "        }\n"
    "        if (what == 0) (void)jf_lmc_start(cc, &v, acc);\n"
    "        else if (what == 1) (void)jf_lmc_judge(cc, &v, acc);\n"
    "        else (void)jf_lmc_resume(cc, &v);\n"
    "    }\n"
    "    if (staged) {\n"
    "        __syncthreads();\n"
    "        for (unsigned long long i = threadIdx.x; i < nws; i += blockDim.x) ws[i] = s_ws[i];\n"
    "        for (unsigned long long i = threadIdx.x; i < niws; i += blockDim.x)\n"
    "            iws[i] = s_iws[i];\n"
    "        for (unsigned long long i = threadIdx.x; i < nc; i += blockDim.x)\n"
    "            ((unsigned long long *)c)[i] = ((const unsigned long long *)&s_c)[i];\n"
    "    }\n"
    "}\n"
    "/* Many parameters (gp->large): the sums of a pass come from chunks of J and r written by\n"
    " * the model's jacobian_row, scaled here for the loss (loss.h, as the CPU's chunked path),\n"
    " * multiplied by cuBLAS (syrk, gemv) into A and g, and packed into the acc layout. Each\n"
    " * kernel returns at once when stop says the loop has ended. */\n"
    "extern \"C\" __global__ void jf_lp_zero(double *v, unsigned long long n, const int *stop)\n"
    "{\n"
    "    if (stop && *stop != 0) return;\n"
    "    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "         i < n; i += (unsigned long long)blockDim.x * gridDim.x)\n"
    "        v[i] = 0.0;\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256)\n"
    "jf_lp_scale(double *r, double *J, unsigned long long ldj, unsigned long long len,\n"
    "            unsigned long long np, int loss, double f_scale, double *cost_part, const int *stop)\n"
    "{\n"
    "    __shared__ double sh[256];\n"
    "    if (stop && *stop != 0) return;\n"
    "    const double fs2 = f_scale * f_scale, ifs2 = 1.0 / fs2;\n"
    "    double c = 0.0;\n"
    "    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "         i < len; i += (unsigned long long)blockDim.x * gridDim.x) {\n"
    "        const double ri = r[i];\n"
    "        if (loss == 0) {\n"
    "            c += ri * ri;\n"
    "            continue;\n"
    "        }\n"
    "        double rs, js;\n"
    "        c += jf_loss_scale(loss, ri, fs2, ifs2, &rs, &js);\n"
    "        r[i] = rs;\n"
    "        for (unsigned long long k = 0; k < np; k++) J[k * ldj + i] *= js;\n"
    "    }\n"
    "    sh[threadIdx.x] = c;\n"
    "    __syncthreads();\n"
    "    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) { /* fixed order */\n"
    "        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];\n"
    "        __syncthreads();\n"
    "    }\n"
    "    if (threadIdx.x == 0) cost_part[blockIdx.x] = sh[0];\n"
    "}\n"
    "extern \"C\" __global__ void jf_lp_pack(const double *Ag, const double *cost_part,\n"
    "                                       unsigned int ncost, unsigned long long np, double *acc,\n"
    "                                       const int *stop)\n"
    "{\n"
    "    if (threadIdx.x != 0 || blockIdx.x != 0 || (stop && *stop != 0)) return;\n"
    "    unsigned long long q = 0, tri = np * (np + 1) / 2;\n"
    "    for (unsigned long long a = 0; a < np; a++) /* upper triangle, column-major */\n"
    "        for (unsigned long long b = a; b < np; b++) acc[q++] = Ag[a + b * np];\n"
    "    for (unsigned long long a = 0; a < np; a++) acc[tri + a] = Ag[np * np + a];\n"
    "    double c = 0.0;\n"
    "    for (unsigned int k = 0; k < ncost; k++) c += cost_part[k];\n"
    "    acc[tri + np] = c;\n"
    "}\n";

/* The WHILE node's condition: run the body again while the status word is 0 (continue). The
 * declaration is the device runtime's (cuda_device_runtime_api.h), which NVRTC does not see. */
static const char cond_source[] =
    "extern \"C\" __device__ void cudaGraphSetConditional(unsigned long long handle,\n"
    "                                                      unsigned int value);\n"
    "extern \"C\" __global__ void jf_lm_loop_cond(unsigned long long handle, const int *status)\n"
    "{\n"
    "    if (threadIdx.x == 0 && blockIdx.x == 0) cudaGraphSetConditional(handle, *status == 0 ? 1u : 0u);\n"
    "}\n";

static const char *const solver_names[] = {"jf_lm_step", "jf_lp_zero", "jf_lp_scale",
                                            "jf_lp_pack"};
enum { SOLVER_FNS = 4 };
static const char *const cond_names[] = {"jf_lm_loop_cond"};

char *jf_lm_cuda_source(int which) {
    if (which == 1) return strdup(cond_source);
    jf_buf b = {0};
    jf_buf_puts(&b, jf_embed_step_h);
    jf_buf_puts(&b, jf_embed_lm_core_h);
    jf_buf_puts(&b, jf_embed_loss_h);
    jf_buf_puts(&b, solver_kernels);
    return jf_buf_take(&b);
}

/* ---- the data on the device, and the passes the finish needs ------------------------------- */

static unsigned grid_for(size_t npts) {
    size_t g = (npts + JF_CUDA_BLOCK - 1) / JF_CUDA_BLOCK;
    return (unsigned)(g < 1 ? 1 : g > JF_LM_CUDA_MAX_GRID ? JF_LM_CUDA_MAX_GRID : g);
}

int jf_gpu_large_p(size_t np) {
    const char *e = getenv("JITFIT_GPU_LARGE_P");
    char *end = NULL;
    long v = e && *e ? strtol(e, &end, 10) : JF_GPU_LARGE_P;
    if (e && *e && end == e) v = JF_GPU_LARGE_P; /* no number (as JITFIT_LARGE_P): the default */
    return v < 0 || np > (size_t)v;
}

/* Rows of J per chunk of the many-parameter path: all of them up to 2^25 doubles (256 MiB) of J,
 * at least 4096; $JITFIT_GPU_LP_CHUNK forces fewer (tests). */
static size_t lp_chunk_rows(size_t n, size_t np) {
    size_t rows = ((size_t)1 << 25) / (np ? np : 1);
    if (rows < 4096) rows = 4096;
    const char *e = getenv("JITFIT_GPU_LP_CHUNK");
    if (e && *e) {
        unsigned long long v = strtoull(e, NULL, 10);
        if (v > 0 && v < rows) rows = (size_t)v;
    }
    return rows < n ? rows : n;
}

/* cuSOLVER rounds per pass of the many-parameter path (JF_GPU_FACTOR_ROUNDS). */
static int lp_factor_rounds(void) {
    const char *e = getenv("JITFIT_GPU_FACTOR_ROUNDS");
    long v = e && *e ? strtol(e, NULL, 10) : JF_GPU_FACTOR_ROUNDS;
    return v < 0 ? 0 : v > 64 ? 64 : (int)v;
}

/* Blocks of jf_lp_scale per chunk: a grid-stride loop, so any number covers the chunk. */
static unsigned lp_grid_for(size_t rows) {
    unsigned g = grid_for(rows);
    return g > 256 ? 256 : g;
}

/* Device bytes of the many-parameter buffers for n points. */
static size_t lp_bytes(size_t n, size_t np) {
    size_t rows = lp_chunk_rows(n, np), nch = rows ? (n + rows - 1) / rows : 0;
    /* + the factorization request (F, Finv) and potrf's workspace (a guess before the query) */
    return (rows * (np + 1) + np * np + np + nch * lp_grid_for(rows) + 2 * np * np + 64 * np +
            1024) * sizeof(double);
}

void jf_gpu_problem_free(jf_gpu_problem *gp) {
    if (gp->lp_copy) { /* no copy may still read the pinned chunks freed below */
        char why[256];
        (void)jf_cuda_graph_sync(gp->lp_copy, why, sizeof why);
    }
    jf_cuda_graph_free(gp->lp_copy);
    gp->lp_copy = NULL;
    jf_cuda_graph_free(gp->lp_stream);
    gp->lp_stream = NULL;
    /* after the graphs and streams: nothing can launch their kernels any more */
    jf_cuda_module_release(gp->solver_mod);
    gp->solver_mod = NULL;
    jf_cuda_module_release(gp->cond_mod);
    gp->cond_mod = NULL;
    jf_devptr *all[] = {&gp->x,   &gp->y, &gp->w, &gp->p,      &gp->partial,
                        &gp->acc, &gp->r, &gp->J, &gp->buf[0], &gp->buf[1],
                        &gp->lp_J, &gp->lp_r, &gp->lp_Ag, &gp->lp_cost, &gp->lp_F,
                        &gp->lp_info, &gp->lp_work, &gp->tail_dev};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        jf_cuda_free(*all[i]);
        *all[i] = 0;
    }
    free(gp->Jc);
    gp->Jc = NULL;
    free(gp->tail);
    gp->tail = NULL;
    gp->tail_have = 0;
    free(gp->ph);
    gp->ph = NULL;
    jf_cuda_host_free(gp->pinned);
    gp->pinned = NULL;
}

/* Streaming: chunk k in the pinned copy, and its kernel arguments in device buffer buf. */
static const double *chunk_host(const jf_gpu_problem *gp, size_t k) {
    return gp->pinned + k * gp->lay.ncols * gp->chunk;
}
typedef struct chunk_args {
    jf_devptr x, y, w, partial;
    unsigned long long ldx, begin, end;
} chunk_args;
static chunk_args chunk_at(const jf_gpu_problem *gp, size_t k, jf_devptr buf, int weighted) {
    /* the offsets of the host-side layout (gpu_layout.c, tested with the CPU kernels) */
    size_t yo, wo;
    int has_w = jf_stream_offsets(&gp->lay, weighted, &yo, &wo);
    chunk_args a;
    a.x = buf;
    a.y = buf + yo * sizeof(double);
    a.w = has_w ? buf + wo * sizeof(double) : 0;
    a.partial = gp->partial + k * (size_t)gp->grid * gp->nacc * sizeof(double);
    a.ldx = gp->lay.chunk;
    a.begin = 0;
    a.end = jf_stream_chunk_len(&gp->lay, k);
    return a;
}

/* $JITFIT_MAX_GPU_MEM in bytes (jf_memory_size_from_text: --max-gpu-mem's units; '2M' was read
 * as 2 bytes), or -1 when unset or not a size. */
static double env_gpu_mem(void) {
    size_t bytes;
    const char *lim = getenv("JITFIT_MAX_GPU_MEM");
    return lim && jf_memory_size_from_text(lim, &bytes) == 0 ? (double)bytes : -1.0;
}

size_t jf_gpu_usable_memory(size_t limit) {
    size_t fr = 0, tot = 0;
    size_t avail = jf_cuda_mem_info(&fr, &tot) == JF_OK ? fr / 10 * 9 : (size_t)-1;
    if (limit && limit < avail) avail = limit;
    double v = env_gpu_mem();
    if (v >= 0 && (double)avail > v) avail = (size_t)v;
    return avail;
}

size_t jf_gpu_problem_bytes(size_t n, size_t np, size_t nh, size_t nv, int weighted) {
    size_t nacc = np * (np + 1) / 2 + np + 1;
    size_t per_point = nv + 1 + (weighted ? 1 : 0);
    /* a fit small enough for the polish may materialize J and r on the device (op_jacobian),
     * at most 2^17 + n doubles: counted whatever the loss, so a limit holds for the finish too */
    size_t polish = n * np <= JF_LM_MATERIALIZE_MAX ? n * np + n : 0;
    return (n * per_point + (size_t)grid_for(n) * nacc + 2 * nacc + np + nh + polish + 1024) *
               sizeof(double) +
           (jf_lmc_ws_doubles(np, nh) * sizeof(double) + jf_lmc_ws_ints(np) * sizeof(int) +
            sizeof(jf_lmc)) + (jf_gpu_large_p(np) ? lp_bytes(n, np) : 0);
}

/* Counts a blocking call of the finish. */
static int blocking(jf_gpu_problem *gp, int st) {
    gp->syncs_after++;
    if (st != JF_OK && !gp->failed) gp->failed = st;
    return st;
}

static void poison(double *v, size_t n) {
    for (size_t i = 0; i < n; i++) v[i] = NAN;
}

/* Streamed many-parameter pass: chunk c is copied into buffer b on the copy stream once the
 * jacobian_row that last read b (mark b of g) is done, and g's next work waits for the copy
 * (mark b of the copy stream). So the copy of chunk c+1 overlaps the work of chunk c, and the
 * host waits for neither. */
static int stream_chunk(jf_gpu_problem *gp, jf_cuda_graph *g, size_t c, int b, char *why,
                        size_t n) {
    jf_cuda_graph *cp = gp->lp_copy;
    int st = jf_cuda_graph_wait_mark(cp, g, b, why, n);
    if (st == JF_OK)
        st = jf_cuda_graph_to_device(cp, gp->buf[b], chunk_host(gp, c),
                                     gp->lay.ncols * gp->chunk * sizeof(double), why, n);
    if (st == JF_OK) st = jf_cuda_graph_mark(cp, b, why, n);
    if (st == JF_OK) st = jf_cuda_graph_wait_mark(g, cp, b, why, n);
    return st;
}

/* Streaming staged: chunk k from the caller's arrays into buffer b through the staging
 * buffers, once the kernel that last read b (mark b of g; g NULL: the caller knows it is done)
 * has finished; complete on return, so the host orders what reads it. */
static int staged_chunk(jf_gpu_problem *gp, jf_cuda_graph *g, size_t k, int b, char *why,
                        size_t n) {
    jf_gpu_piece *pc = malloc(gp->lay.ncols * sizeof *pc);
    if (!pc) {
        snprintf(why, n, "out of memory");
        return JF_ERR_NOMEM;
    }
    int st = g ? jf_cuda_graph_sync_mark(g, b, why, n) : JF_OK;
    size_t npc = jf_stream_pieces(&gp->lay, &gp->view, k, gp->buf[b], pc);
    if (st == JF_OK) st = jf_gpu_upload_pieces(pc, npc, jf_gpu_upload_mode(), NULL, NULL, why, n);
    free(pc);
    return st;
}

/* The many-parameter pass at device parameters p on g's stream, into out (gp->acc's layout): J
 * and r chunk by chunk (jacobian_row, weights w or none), scaled for the loss, JᵀJ and Jᵀr by
 * cuBLAS, then packed. Our kernels return at once once stop (0: never) says the loop has
 * ended; cuBLAS calls cannot, and then multiply what is left in the buffers, which nothing
 * reads. */
static int large_pass(jf_gpu_problem *gp, jf_cuda_graph *g, jf_devptr p, jf_loss loss,
                      int weighted, jf_devptr stop, jf_devptr out, char *why, size_t n) {
    jf_devptr w = weighted ? gp->w : 0;
    unsigned long long np = gp->np, len, ldx = gp->n, ldj = gp->lp_chunk, nag = np * np + np;
    int loss_ = (int)loss;
    double fs = gp->f_scale;
    void *zargs[] = {&gp->lp_Ag, &nag, &stop};
    int st = jf_cuda_stream_launch(g, gp->fn_lp_zero, 1, JF_CUDA_BLOCK, zargs, why, n);
    for (size_t c = 0; st == JF_OK && c < gp->lp_nchunks; c++) {
        unsigned long long begin = c * gp->lp_chunk, end = begin + gp->lp_chunk;
        if (end > gp->n) end = gp->n;
        len = end - begin;
        jf_devptr part = gp->lp_cost + c * gp->lp_grid * sizeof(double);
        jf_devptr xc = gp->x, yc = gp->y, wc = w;
        unsigned long long ldxc = ldx;
        if (gp->chunk) { /* streamed: chunk c arrives in buffer c mod 2 on the copy stream */
            int b = (int)(c & 1);
            chunk_args a = chunk_at(gp, c, gp->buf[b], weighted);
            xc = a.x, yc = a.y, wc = a.w, ldxc = a.ldx, begin = a.begin, end = a.end;
            st = gp->stream_staged ? staged_chunk(gp, g, c, b, why, n)
                                   : stream_chunk(gp, g, c, b, why, n);
        }
        void *jargs[] = {&p, &xc, &ldxc, &yc, &wc, &begin, &end, &gp->lp_r, &gp->lp_J, &ldj};
        void *sargs[] = {&gp->lp_r, &gp->lp_J, &ldj, &len, &np, &loss_, &fs, &part, &stop};
        if (st == JF_OK)
            st = jf_cuda_stream_launch(g, gp->fn_jacobian_row, grid_for(len), JF_CUDA_BLOCK, jargs,
                                       why, n);
        /* buffer b is free again once jacobian_row has read it */
        if (st == JF_OK && gp->chunk) st = jf_cuda_graph_mark(g, (int)(c & 1), why, n);
        if (st == JF_OK)
            st = jf_cuda_stream_launch(g, gp->fn_lp_scale, gp->lp_grid, JF_CUDA_BLOCK, sargs, why, n);
        if (st == JF_OK)
            st = jf_cublas_syrk_t(g, np, len, gp->lp_J, ldj, 1.0, gp->lp_Ag, np, why, n);
        if (st == JF_OK)
            st = jf_cublas_gemv_t(g, len, np, gp->lp_J, ldj, gp->lp_r, 1.0,
                                  gp->lp_Ag + np * np * sizeof(double), why, n);
    }
    unsigned int ncost = (unsigned)(gp->lp_nchunks * gp->lp_grid);
    void *pargs[] = {&gp->lp_Ag, &gp->lp_cost, &ncost, &np, &out, &stop};
    if (st == JF_OK) st = jf_cuda_stream_launch(g, gp->fn_lp_pack, 1, 32, pargs, why, n);
    return st;
}

/* The kernels' parameter vector for the fitted parameters p (host): p, or p followed by the
 * held values in gp->ph; (np + nheld) doubles go to the device. */
static const double *staged(jf_gpu_problem *gp, const double *p) {
    if (!gp->nheld) return p;
    memcpy(gp->ph, p, gp->np * sizeof *p);
    return gp->ph;
}

/* normal_eq + reduce at p (host values) into acc (host). */
static int pass(jf_gpu_problem *gp, const double *p, jf_loss loss, int weighted, double *acc) {
    char *why = gp->why;
    size_t wn = sizeof gp->why, pbytes = (gp->np + gp->nheld) * sizeof(double);
    p = staged(gp, p);
    if (gp->large) { /* everything on the many-parameter stream, one wait */
        jf_cuda_graph *g = gp->lp_stream;
        int st = jf_cuda_graph_to_device(g, gp->p, p, pbytes, why, wn);
        if (st == JF_OK) st = large_pass(gp, g, gp->p, loss, weighted, 0, gp->acc, why, wn);
        if (st == JF_OK)
            st = jf_cuda_graph_to_host(g, acc, gp->acc, gp->nacc_host * sizeof(double), why, wn);
        return blocking(gp, st == JF_OK ? jf_cuda_graph_sync(g, why, wn) : st);
    }
    int st = blocking(gp, jf_cuda_to_device(gp->p, p, pbytes, why, wn));
    if (st != JF_OK) return st;
    int loss_ = (int)loss;
    double fs = gp->f_scale;
    jf_devptr nostop = 0;
    if (gp->chunk) { /* streamed: one chunk at a time through the first buffer */
        for (size_t k = 0; k < gp->lay.nchunks; k++) {
            chunk_args a = chunk_at(gp, k, gp->buf[0], weighted);
            /* (jf_cuda_launch returns once its kernel is done: buffer 0 is free) */
            st = blocking(gp, gp->stream_staged
                                  ? staged_chunk(gp, NULL, k, 0, why, wn)
                                  : jf_cuda_to_device(gp->buf[0], chunk_host(gp, k),
                                                      gp->lay.ncols * gp->chunk * sizeof(double),
                                                      why, wn));
            void *args[] = {&gp->p, &a.x, &a.ldx, &a.y, &a.w, &a.begin, &a.end,
                            &loss_, &fs, &a.partial, &nostop};
            if (st == JF_OK)
                st = blocking(gp, jf_cuda_launch(gp->fn_normal_eq, gp->grid, JF_CUDA_BLOCK, 0, args,
                                                 why, wn));
            if (st != JF_OK) return st;
        }
    } else {
        unsigned long long ldx = gp->n, begin = 0, end = gp->n;
        jf_devptr w = weighted ? gp->w : 0;
        void *args[] = {&gp->p, &gp->x, &ldx, &gp->y, &w, &begin, &end, &loss_, &fs, &gp->partial, &nostop};
        st = blocking(gp, jf_cuda_launch(gp->fn_normal_eq, gp->grid, JF_CUDA_BLOCK, 0, args, why, wn));
        if (st != JF_OK) return st;
    }
    unsigned int nb = gp->grid * (unsigned)(gp->chunk ? gp->lay.nchunks : 1);
    void *rargs[] = {&gp->partial, &nb, &gp->acc, &nostop};
    st = blocking(gp, jf_cuda_launch(gp->fn_reduce, (unsigned)gp->nacc, JF_CUDA_BLOCK, 0, rargs,
                                     why, wn));
    if (st != JF_OK) return st;
    return blocking(gp, jf_cuda_to_host(acc, gp->acc, gp->nacc_host * sizeof(double), why, wn));
}

static void op_normal_eq(void *ctx, const double *p, jf_loss loss, double *acc) {
    jf_gpu_problem *gp = ctx;
    if (pass(gp, p, loss, 1, acc) != JF_OK) poison(acc, gp->nacc_host);
}

static void op_jacobian(void *ctx, const double *p, double *r, double *J) {
    jf_gpu_problem *gp = ctx;
    size_t n = gp->n, np = gp->np;
    char *why = gp->why;
    size_t wn = sizeof gp->why;
    int st = JF_OK;
    if (gp->chunk) { /* only the polish asks, and solve_gpu (fit.c) never streams a polished fit */
        snprintf(why, wn, "no Jacobian for streamed data");
        st = blocking(gp, JF_ERR_INTERNAL);
    }
    if (st == JF_OK && !gp->J) { /* only small problems materialize J (the polish) */
        st = blocking(gp, jf_cuda_alloc(&gp->r, n * sizeof(double), why, wn));
        if (st == JF_OK) st = blocking(gp, jf_cuda_alloc(&gp->J, n * np * sizeof(double), why, wn));
        if (st == JF_OK && !(gp->Jc = malloc(n * np * sizeof(double)))) st = JF_ERR_NOMEM;
    }
    if (st == JF_OK)
        st = blocking(gp, jf_cuda_to_device(gp->p, staged(gp, p), (np + gp->nheld) * sizeof(double),
                                            why, wn));
    if (st == JF_OK) {
        unsigned long long ldx = n, begin = 0, end = n, ldj = n;
        void *args[] = {&gp->p, &gp->x, &ldx, &gp->y, &gp->w, &begin, &end, &gp->r, &gp->J, &ldj};
        st = blocking(gp, jf_cuda_launch(gp->fn_jacobian_row, grid_for(n), JF_CUDA_BLOCK, 0, args,
                                         why, wn));
    }
    if (st == JF_OK) st = blocking(gp, jf_cuda_to_host(r, gp->r, n * sizeof(double), why, wn));
    if (st == JF_OK) st = blocking(gp, jf_cuda_to_host(gp->Jc, gp->J, n * np * sizeof(double), why, wn));
    if (st != JF_OK) {
        poison(r, n);
        poison(J, n * np);
        return;
    }
    for (size_t i = 0; i < n; i++) /* the device writes J column-major */
        for (size_t k = 0; k < np; k++) J[i * np + k] = gp->Jc[k * n + i];
}

static void op_residual_sums(void *ctx, const double *p, double sums[2]) {
    jf_gpu_problem *gp = ctx;
    const size_t last = gp->nacc_host - 1;
    double *acc = malloc(gp->nacc_host * sizeof *acc);
    if (!acc) {
        sums[0] = sums[1] = NAN;
        return;
    }
    /* the linear-loss pass's last sum is Σ r²: weighted, then (with sigma) unweighted */
    sums[0] = sums[1] = NAN;
    if (pass(gp, p, JF_LOSS_LINEAR, 1, acc) == JF_OK) sums[1] = sums[0] = acc[last];
    if (gp->weighted && pass(gp, p, JF_LOSS_LINEAR, 0, acc) == JF_OK) sums[0] = acc[last];
    free(acc);
}

static const jf_problem_ops gpu_ops = {op_normal_eq, op_jacobian, op_residual_sums};

/* The part of both set-ups that does not depend on where the data live. */
static void begin_init(jf_gpu_problem *gp, const jf_problem *prob, const jf_cuda_kernels *k) {
    memset(gp, 0, sizeof *gp);
    gp->n = prob->n;
    gp->np = prob->np;
    gp->nheld = prob->nheld;
    gp->nacc = jf_cuda_kernels_nsums(k);
    gp->nacc_host = prob->nacc;
    gp->f_scale = prob->f_scale;
    gp->weighted = prob->view.w != NULL;
    gp->data_finite = -1;
    gp->fn_normal_eq = jf_cuda_kernels_function(k, JF_CUDA_NORMAL_EQ);
    gp->fn_reduce = jf_cuda_kernels_function(k, JF_CUDA_REDUCE_BLOCKS);
    gp->fn_jacobian_row = jf_cuda_kernels_function(k, JF_CUDA_JACOBIAN_ROW);
}

/* Ends a set-up: on success the problem's passes run on the device; on failure everything is
 * released (the reason stays in gp->why). */
static int attach(jf_gpu_problem *gp, jf_problem *prob, int st) {
    if (st == JF_OK && gp->nheld) { /* the held values, staged after each pass's parameters */
        gp->ph = malloc((gp->np + gp->nheld) * sizeof *gp->ph);
        if (gp->ph) {
            memcpy(gp->ph + gp->np, jf_problem_held(prob), gp->nheld * sizeof *gp->ph);
        } else {
            snprintf(gp->why, sizeof gp->why, "out of memory");
            st = JF_ERR_NOMEM;
        }
    }
    if (st != JF_OK) {
        char keep[sizeof gp->why];
        memcpy(keep, gp->why, sizeof keep);
        jf_gpu_problem_free(gp);
        memcpy(gp->why, keep, sizeof keep);
        return st;
    }
    prob->ops = &gpu_ops;
    prob->ops_ctx = gp;
    return JF_OK;
}

/* The many-parameter path's p×p factorizations: cuSOLVER's buffers, or (rounds 0, or no
 * libcusolver: the reason in lp_solver) the state machine's own Cholesky. Only an allocation
 * failure is an error. */
static int large_solver_init(jf_gpu_problem *gp, char *why, size_t wn) {
    size_t np = gp->np;
    gp->lp_rounds = lp_factor_rounds();
    if (gp->lp_rounds == 0) {
        snprintf(gp->lp_solver, sizeof gp->lp_solver, "JITFIT_GPU_FACTOR_ROUNDS=0");
        return JF_OK;
    }
    char cwhy[256];
    if (jf_cusolver_init(cwhy, sizeof cwhy) != JF_OK) {
        snprintf(gp->lp_solver, sizeof gp->lp_solver, "%.150s", cwhy);
        gp->lp_rounds = 0;
        return JF_OK;
    }
    int st = jf_cuda_alloc(&gp->lp_F, 2 * np * np * sizeof(double), why, wn);
    if (st == JF_OK) st = jf_cuda_alloc(&gp->lp_info, 2 * sizeof(int), why, wn);
    if (st == JF_OK && jf_cusolver_potrf_lwork(np, gp->lp_F, np, &gp->lp_lwork, cwhy,
                                               sizeof cwhy) != JF_OK) {
        snprintf(gp->lp_solver, sizeof gp->lp_solver, "%.150s", cwhy);
        gp->lp_rounds = 0;
        return JF_OK;
    }
    if (st == JF_OK) st = jf_cuda_alloc(&gp->lp_work, gp->lp_lwork * sizeof(double), why, wn);
    return st;
}

/* The many-parameter path's buffers and streams for J chunks of `rows` rows (the data's
 * chunks when streamed: then also the copy stream, unless they go up staged). */
static int large_init(jf_gpu_problem *gp, size_t rows, char *why, size_t wn) {
    size_t np = gp->np;
    gp->large = 1;
    gp->nacc = gp->nacc_host; /* its sums come from cuBLAS, without the rounding sum */
    gp->lp_chunk = rows;
    gp->lp_nchunks = (gp->n + rows - 1) / rows;
    gp->lp_grid = lp_grid_for(rows);
    int st = jf_cublas_init(why, wn);
    if (st == JF_OK) st = jf_cuda_alloc(&gp->lp_J, rows * np * sizeof(double), why, wn);
    if (st == JF_OK) st = jf_cuda_alloc(&gp->lp_r, rows * sizeof(double), why, wn);
    if (st == JF_OK) st = jf_cuda_alloc(&gp->lp_Ag, (np * np + np) * sizeof(double), why, wn);
    if (st == JF_OK)
        st = jf_cuda_alloc(&gp->lp_cost, gp->lp_nchunks * gp->lp_grid * sizeof(double), why, wn);
    if (st == JF_OK) st = jf_cuda_graph_new(&gp->lp_stream, NULL, why, wn);
    if (st == JF_OK && gp->chunk && !gp->stream_staged)
        st = jf_cuda_graph_new(&gp->lp_copy, NULL, why, wn);
    if (st == JF_OK) st = large_solver_init(gp, why, wn);
    return st;
}

int jf_gpu_problem_init(jf_gpu_problem *gp, jf_problem *prob, const jf_cuda_kernels *k,
                        size_t nv, int check) {
    size_t n = prob->n, np = prob->np;
    char *why = gp->why;
    size_t wn = sizeof gp->why;
    begin_init(gp, prob, k);
    gp->grid = grid_for(n);
    const jf_data_view *d = &prob->view;
    int how = JF_UPLOAD_DIRECT;
    int st = jf_cuda_alloc(&gp->p, (np + gp->nheld) * sizeof(double), why, wn);
    if (st == JF_OK && nv) st = jf_cuda_alloc(&gp->x, nv * n * sizeof(double), why, wn);
    if (st == JF_OK) st = jf_cuda_alloc(&gp->y, n * sizeof(double), why, wn);
    if (st == JF_OK && d->w) st = jf_cuda_alloc(&gp->w, n * sizeof(double), why, wn);
    /* x's columns (packed with ldx = n), y and the weights in one upload */
    jf_gpu_piece *pc = st == JF_OK ? malloc((nv + 2) * sizeof *pc) : NULL;
    size_t npc = 0;
    if (st == JF_OK && !pc) {
        snprintf(why, wn, "out of memory");
        st = JF_ERR_NOMEM;
    }
    for (size_t j = 0; pc && j < nv; j++)
        pc[npc++] = (jf_gpu_piece){gp->x + j * n * sizeof(double), d->x + j * d->ldx,
                                   n * sizeof(double), check};
    if (pc) pc[npc++] = (jf_gpu_piece){gp->y, d->y, n * sizeof(double), check};
    if (pc && d->w) pc[npc++] = (jf_gpu_piece){gp->w, d->w, n * sizeof(double), 0};
    if (st == JF_OK)
        st = jf_gpu_upload_pieces(pc, npc, jf_gpu_upload_mode(), &how, &gp->data_finite, why,
                                  wn);
    free(pc);
    gp->upload_staged = how == JF_UPLOAD_STAGED;
    if (st == JF_OK)
        st = jf_cuda_alloc(&gp->partial, (size_t)gp->grid * gp->nacc * sizeof(double), why, wn);
    if (st == JF_OK) st = jf_cuda_alloc(&gp->acc, gp->nacc * sizeof(double), why, wn);
    if (st == JF_OK && jf_gpu_large_p(np))
        st = large_init(gp, lp_chunk_rows(n, np), why, wn);
    return attach(gp, prob, st);
}

/* How streamed data go up: 1 staged from the caller's arrays with every pass (the default), 0
 * from a page-locked copy made at the start ($JITFIT_GPU_STREAM=pinned). The H200 measured
 * page-locking at ≈0.6 s per GB against ≈37 ms per GB for a staged copy and ≈29 ms from
 * page-locked memory (docs/PERFORMANCE.md, "GPU solver"): the copy pays only after ≈80 passes,
 * and it doubles the host memory the data take. */
static int stream_staged(void) {
    const char *e = getenv("JITFIT_GPU_STREAM");
    return !(e && strcmp(e, "pinned") == 0);
}

int jf_gpu_problem_init_streamed(jf_gpu_problem *gp, jf_problem *prob,
                                 const jf_cuda_kernels *k, size_t nv, size_t avail) {
    size_t n = prob->n, np = prob->np;
    char *why = gp->why;
    size_t wn = sizeof gp->why;
    begin_init(gp, prob, k);
    const jf_data_view *d = &prob->view;
    int large = jf_gpu_large_p(np);
    jf_stream_layout_init(&gp->lay, n, nv, d->w != NULL, 1);
    size_t fixed, per_point = 2 * gp->lay.ncols * sizeof(double);
    if (large) {
        /* the many-parameter path: a chunk of J and r per chunk of data; JᵀJ and Jᵀr, the
         * factorization request, potrf's workspace (a guess before the query) and the cost
         * partials (at most 256 blocks per chunk) do not grow with the data */
        per_point += (np + 1) * sizeof(double);
        fixed = (2 * gp->nacc + np + 4096 + 3 * np * np + np + 64 * np + 1024 +
                 (size_t)JF_CUDA_GRAPH_MAX_DEPS * 256) * sizeof(double);
    } else {
        /* block partials: chunk k has grid_for(len_k) <= len_k/JF_CUDA_BLOCK + 1 rows, so all
         * chunks together at most n/JF_CUDA_BLOCK + nchunks (and never more than the grid cap) */
        size_t rows = (n + JF_CUDA_BLOCK - 1) / JF_CUDA_BLOCK + JF_CUDA_GRAPH_MAX_DEPS;
        size_t rows_cap = (size_t)JF_CUDA_GRAPH_MAX_DEPS * JF_LM_CUDA_MAX_GRID;
        fixed = (2 * gp->nacc + np + 4096) * sizeof(double) +
                (rows < rows_cap ? rows : rows_cap) * gp->nacc * sizeof(double);
    }
    size_t chunk = avail > fixed ? (avail - fixed) / per_point : 0;
    size_t min_chunk = (n + JF_CUDA_GRAPH_MAX_DEPS - 1) / JF_CUDA_GRAPH_MAX_DEPS;
    const char *force = getenv("JITFIT_GPU_CHUNK");
    if (force && *force) {
        unsigned long long v = strtoull(force, NULL, 10);
        if (v > 0 && v < min_chunk && chunk >= min_chunk && chunk > 0) {
            /* the memory would do: say that the forced chunk is what does not */
            snprintf(why, wn, "JITFIT_GPU_CHUNK=%llu would make %zu chunks of the %zu points, "
                     "more than the %d a pass holds (at least %zu points per chunk)", v,
                     (size_t)((n + v - 1) / v), n, JF_CUDA_GRAPH_MAX_DEPS, min_chunk);
            return JF_ERR_NOMEM;
        }
        if (v > 0 && v < chunk) chunk = (size_t)v;
    }
    if (chunk < min_chunk || chunk == 0) {
        snprintf(why, wn, "even streaming needs %.1f MiB of GPU memory, %.1f MiB are usable",
                 (double)(fixed + min_chunk * per_point) / 1048576.0, (double)avail / 1048576.0);
        return JF_ERR_NOMEM;
    }
    /* a chunk's copy is one graph memcpy node whose pitch is its byte count, and cuMemcpy3D's
     * rules refuse pitches above the device's maximum (2^31 - 1 on current GPUs): copies of at
     * most 1 GiB, unless that needs more chunks than a graph holds (data beyond ~64 GiB) */
    size_t copy_cap = ((size_t)1 << 30) / (gp->lay.ncols * sizeof(double));
    if (chunk > copy_cap && copy_cap >= min_chunk) chunk = copy_cap;
    if (chunk > n) chunk = n;
    gp->chunk = chunk;
    jf_stream_layout_init(&gp->lay, n, nv, d->w != NULL, chunk);
    gp->grid = grid_for(chunk);
    gp->view = *d;
    gp->stream_staged = stream_staged();
    int st = JF_OK;
    if (!gp->stream_staged) {
        st = jf_cuda_host_alloc((void **)&gp->pinned,
                                gp->lay.nchunks * gp->lay.ncols * chunk * sizeof(double), why, wn);
        if (st == JF_OK) jf_stream_fill(&gp->lay, d, gp->pinned);
    }
    if (st == JF_OK) st = jf_cuda_alloc(&gp->p, (np + gp->nheld) * sizeof(double), why, wn);
    for (int b = 0; st == JF_OK && b < 2; b++)
        st = jf_cuda_alloc(&gp->buf[b], gp->lay.ncols * chunk * sizeof(double), why, wn);
    if (st == JF_OK && !large)
        st = jf_cuda_alloc(&gp->partial,
                           gp->lay.nchunks * (size_t)gp->grid * gp->nacc * sizeof(double), why, wn);
    if (st == JF_OK) st = jf_cuda_alloc(&gp->acc, gp->nacc * sizeof(double), why, wn);
    if (st == JF_OK && large) st = large_init(gp, chunk, why, wn);
    return attach(gp, prob, st);
}

/* ---- the loop ------------------------------------------------------------------------------- */

/* Device buffers of one run of the loop. */
typedef struct loop_mem {
    jf_devptr c, ws, iws; /* jf_lmc, its workspace */
} loop_mem;

static void loop_mem_free(loop_mem *lm) {
    jf_cuda_free(lm->c);
    jf_cuda_free(lm->ws);
    jf_cuda_free(lm->iws);
}

/* A streamed pass as graph nodes: chunk k is copied into buffer k mod 2 once the kernel that
 * last used that buffer is done, and its normal_eq runs once it has arrived and p is final
 * (entry), so the copy of chunk k+1 overlaps the kernel of chunk k; the reduction waits for all
 * chunks. Each chunk has its own rows of block partials: the sums stay in a fixed order. */
static int add_streamed_pass(jf_cuda_graph *g, jf_gpu_problem *gp, jf_devptr p, jf_loss loss,
                             jf_devptr stop, void **reduce_deps, char *why, size_t n) {
    int loss_ = (int)loss;
    double fs = gp->f_scale;
    void *entry = jf_cuda_graph_last(g), *last_use[2] = {NULL, NULL};
    int st = JF_OK;
    for (size_t k = 0; st == JF_OK && k < gp->lay.nchunks; k++) {
        int b = (int)(k & 1);
        chunk_args a = chunk_at(gp, k, gp->buf[b], 1);
        void *copy = NULL, *kern = NULL;
        void *cdeps[2] = {last_use[b], entry};
        st = jf_cuda_graph_copy_deps(g, gp->buf[b], chunk_host(gp, k),
                                     gp->lay.ncols * gp->chunk * sizeof(double), cdeps, 2, &copy, why, n);
        void *kdeps[2] = {copy, entry};
        void *args[] = {&p, &a.x, &a.ldx, &a.y, &a.w, &a.begin, &a.end, &loss_, &fs, &a.partial, &stop};
        if (st == JF_OK)
            st = jf_cuda_graph_kernel_deps(g, gp->fn_normal_eq, gp->grid, JF_CUDA_BLOCK, args, kdeps,
                                           2, &kern, why, n);
        last_use[b] = kern;
        reduce_deps[k] = kern;
    }
    return st;
}

/* The caller's host work that overlaps with the loop (gp->while_looping), once: the host would
 * only wait for the device meanwhile. */
static void overlap_host_work(jf_gpu_problem *gp) {
    void (*f)(void *) = gp->while_looping;
    gp->while_looping = NULL;
    if (!f) return;
    gp->overlap_late = gp->loop_reads > 0;
    f(gp->looping_ctx);
}

/* A read of the loop's results into (pageable) host memory, which returns once the device is
 * done: counted, so that host work meant to overlap the loop is known to come first. */
static int loop_read(jf_gpu_problem *gp, jf_cuda_graph *g, void *dst, jf_devptr src, size_t bytes,
                     char *why, size_t n) {
    gp->loop_reads++;
    return jf_cuda_graph_to_host(g, dst, src, bytes, why, n);
}

/* The tail passes (JF_GPU_TAIL_*) the statistics of a fit with this loss will ask for. */
static int tails_wanted(const jf_gpu_problem *gp, jf_loss loss) {
    const char *off = getenv("JITFIT_GPU_NO_TAIL"); /* tests: the ops' passes, to compare */
    if (off && *off) return 0;
    if (gp->chunk && !gp->large) return 0; /* each pass copies the data in again: the ops do */
    if (loss == JF_LOSS_LINEAR && gp->n * gp->np <= JF_LM_MATERIALIZE_MAX) return 0; /* polish */
    return (loss != JF_LOSS_LINEAR ? JF_GPU_TAIL_LINEAR : 0) |
           (gp->weighted ? JF_GPU_TAIL_PLAIN : 0);
}

/* Enqueues the tail passes `want` at device parameters p on g's stream, after the loop's
 * work: linear-loss sums with the weights, then without, each into its half of gp->tail_dev
 * (read_tails copies them). Launches only: nothing here waits. */
static int enqueue_tails(jf_gpu_problem *gp, jf_cuda_graph *g, jf_devptr p, int want, char *why,
                         size_t n) {
    int st = JF_OK;
    for (int k = 0; st == JF_OK && k < 2; k++) {
        if (!(want & (1 << k))) continue;
        int weighted = k == 0 && gp->weighted;
        jf_devptr out = gp->tail_dev + (size_t)k * gp->nacc * sizeof(double);
        if (gp->large) {
            st = large_pass(gp, g, p, JF_LOSS_LINEAR, weighted, 0, out, why, n);
        } else {
            unsigned long long ldx = gp->n, begin = 0, end = gp->n;
            int loss_ = JF_LOSS_LINEAR;
            double fs = gp->f_scale;
            jf_devptr w = weighted ? gp->w : 0, nostop = 0;
            unsigned int nb = gp->grid;
            void *args[] = {&p, &gp->x, &ldx, &gp->y, &w, &begin, &end, &loss_, &fs, &gp->partial,
                            &nostop};
            void *rargs[] = {&gp->partial, &nb, &out, &nostop};
            st = jf_cuda_stream_launch(g, gp->fn_normal_eq, gp->grid, JF_CUDA_BLOCK, args, why, n);
            if (st == JF_OK)
                st = jf_cuda_stream_launch(g, gp->fn_reduce, (unsigned)gp->nacc, JF_CUDA_BLOCK,
                                           rargs, why, n);
        }
    }
    return st;
}

/* Queues the copy of the tails' sums to gp->tail. A copy to ordinary (pageable) host memory
 * returns only once it is done, so it comes after the host's own work of the wait. */
static int read_tails(jf_gpu_problem *gp, jf_cuda_graph *g, int want, char *why, size_t n) {
    return want ? loop_read(gp, g, gp->tail, gp->tail_dev, 2 * gp->nacc * sizeof(double), why, n)
                : JF_OK;
}

/* Appends normal_eq at device parameters p, the block reduction, then the state machine's step
 * (what: 0 start, 1 judge). */
static int add_iteration(jf_cuda_graph *g, jf_gpu_problem *gp, const loop_mem *lm, jf_devptr p,
                         jf_loss loss, int what, jf_devptr stop, char *why, size_t n) {
    unsigned long long ldx = gp->n, begin = 0, end = gp->n;
    int loss_ = (int)loss;
    double fs = gp->f_scale;
    int st;
    unsigned int nb = gp->grid;
    void *rargs[] = {&gp->partial, &nb, &gp->acc, &stop};
    if (gp->chunk) {
        void *rdeps[JF_CUDA_GRAPH_MAX_DEPS];
        nb = gp->grid * (unsigned)gp->lay.nchunks;
        st = add_streamed_pass(g, gp, p, loss, stop, rdeps, why, n);
        if (st == JF_OK)
            st = jf_cuda_graph_kernel_deps(g, gp->fn_reduce, (unsigned)gp->nacc, JF_CUDA_BLOCK,
                                           rargs, rdeps, (int)gp->lay.nchunks, NULL, why, n);
    } else {
        void *args[] = {&p, &gp->x, &ldx, &gp->y, &gp->w, &begin, &end, &loss_, &fs, &gp->partial, &stop};
        st = jf_cuda_graph_kernel(g, gp->fn_normal_eq, gp->grid, JF_CUDA_BLOCK, args, why, n);
        if (st == JF_OK)
            st = jf_cuda_graph_kernel(g, gp->fn_reduce, (unsigned)gp->nacc, JF_CUDA_BLOCK, rargs,
                                      why, n);
    }
    jf_devptr c = lm->c, ws = lm->ws, iws = lm->iws, acc = gp->acc, none = 0;
    void *sargs[] = {&c, &ws, &iws, &acc, &none, &none, &what};
    if (st == JF_OK) st = jf_cuda_graph_kernel(g, gp->fn_step, 1, 32, sargs, why, n);
    return st;
}

/* A step of the many-parameter loop on g's stream (what: 0 start, 1 judge). With cuSOLVER, the
 * state machine hands its factorizations out: each round runs potrf on F and potrs on Finv
 * (= I), then resumes the machine, the last round telling it to factorize whatever else the
 * step needs itself. Rounds with nothing pending factorize a stale F nobody reads. */
static int large_step(jf_gpu_problem *gp, jf_cuda_graph *g, const loop_mem *lm, int what,
                      char *why, size_t n) {
    jf_devptr cd = lm->c, wsd = lm->ws, iwsd = lm->iws, acc = gp->acc;
    if (gp->lp_rounds == 0) {
        jf_devptr none = 0;
        void *sargs[] = {&cd, &wsd, &iwsd, &acc, &none, &none, &what};
        return jf_cuda_stream_launch(g, gp->fn_step, 1, 32, sargs, why, n);
    }
    size_t np = gp->np;
    jf_devptr F = gp->lp_F, Finv = F + np * np * sizeof(double);
    jf_devptr info = gp->lp_info, info_s = info + sizeof(int); /* potrs must not clear potrf's */
    int w = what;
    void *xargs[] = {&cd, &wsd, &iwsd, &acc, &F, &info, &w};
    int st = jf_cuda_stream_launch(g, gp->fn_step, 1, 32, xargs, why, n);
    for (int r = 0; st == JF_OK && r < gp->lp_rounds; r++) {
        st = jf_cusolver_potrf_u(g, np, F, np, gp->lp_work, gp->lp_lwork, info, why, n);
        if (st == JF_OK) st = jf_cusolver_potrs_u(g, np, np, F, np, Finv, np, info_s, why, n);
        w = r + 1 < gp->lp_rounds ? 2 : 3;
        if (st == JF_OK) st = jf_cuda_stream_launch(g, gp->fn_step, 1, 32, xargs, why, n);
    }
    return st;
}

/* The end of a host-driven block of iterations on g: the host's own work first (a read into
 * pageable memory waits for the device), then the state (c, ws) read back and the wait. */
static int wait_state(jf_gpu_problem *gp, jf_cuda_graph *g, const loop_mem *lm, jf_lmc *c,
                      double *ws, size_t nws, char *why, size_t n) {
    overlap_host_work(gp);
    int code = loop_read(gp, g, c, lm->c, sizeof *c, why, n);
    if (code == JF_OK) code = loop_read(gp, g, ws, lm->ws, nws * sizeof(double), why, n);
    if (code == JF_OK) code = jf_cuda_graph_sync(g, why, n);
    return code;
}

/* The many-parameter loop: cuBLAS calls cannot be graph nodes without stream capture, so the
 * iterations are enqueued on a stream as they are in the unrolled graph, JF_LM_CUDA_UNROLL at a
 * time, each pass's kernels returning at once after the end; one synchronization per batch of
 * iterations. On JF_OK c and ws hold the final state. */
static int run_loop_large(jf_gpu_problem *gp, const loop_mem *lm, jf_loss loss,
                          jf_lmc *c, double *ws, size_t nws,
                          jf_gpu_stats *stats, char *why, size_t n) {
    size_t np = gp->np;
    jf_cuda_graph *g = gp->lp_stream;
    jf_devptr dx = lm->ws, dx_try = lm->ws + (np + gp->nheld) * sizeof(double);
    int w = gp->weighted;
    jf_devptr status = lm->c + offsetof(jf_lmc, status);
    unsigned long syncs0 = jf_cuda_graph_syncs(g);
    stats->mode = JF_GPU_LOOP_STREAM;
    int code = jf_cuda_graph_to_device(g, lm->c, c, sizeof *c, why, n);
    if (code == JF_OK) code = jf_cuda_graph_to_device(g, lm->ws, ws, nws * sizeof(double), why, n);
    if (code == JF_OK) code = large_pass(gp, g, dx, loss, w, 0, gp->acc, why, n);
    if (code == JF_OK) code = large_step(gp, g, lm, 0, why, n);
    /* streamed data: one iteration per wait, as the leftover iterations of a batch would copy
     * all the data again for nothing */
    int per_wait = gp->chunk ? 1 : JF_LM_CUDA_UNROLL;
    stats->per_wait = per_wait;
    while (code == JF_OK) {
        for (int k = 0; code == JF_OK && k < per_wait; k++) {
            code = large_pass(gp, g, dx_try, loss, w, status, gp->acc, why, n);
            if (code == JF_OK) code = large_step(gp, g, lm, 1, why, n);
        }
        stats->launches++;
        if (code == JF_OK) code = wait_state(gp, g, lm, c, ws, nws, why, n);
        if (code != JF_OK || c->status != JF_STEP_CONTINUE) break;
    }
    /* the statistics' passes at the final point: one wait more, none after the loop */
    int want = gp->tail ? tails_wanted(gp, loss) : 0;
    if (code == JF_OK && want) code = enqueue_tails(gp, g, dx, want, why, n);
    if (code == JF_OK && want) code = read_tails(gp, g, want, why, n);
    if (code == JF_OK && want) code = jf_cuda_graph_sync(g, why, n);
    if (code == JF_OK) gp->tail_have = want;
    stats->loop_syncs = jf_cuda_graph_syncs(g) - syncs0;
    return code;
}

/* A streamed pass with staged chunks at device parameters p, then the block reduction, on g's
 * stream: chunk k goes up into buffer k mod 2 once the kernel that last read that buffer is
 * done (the upload of chunk k overlaps the kernel of chunk k - 1), its normal_eq is queued
 * behind it. */
static int staged_pass(jf_gpu_problem *gp, jf_cuda_graph *g, jf_devptr p, jf_loss loss,
                       char *why, size_t n) {
    int loss_ = (int)loss, st = JF_OK;
    double fs = gp->f_scale;
    jf_devptr nostop = 0;
    for (size_t k = 0; st == JF_OK && k < gp->lay.nchunks; k++) {
        int b = (int)(k & 1);
        chunk_args a = chunk_at(gp, k, gp->buf[b], 1);
        void *args[] = {&p, &a.x, &a.ldx, &a.y, &a.w, &a.begin, &a.end, &loss_, &fs, &a.partial,
                        &nostop};
        st = staged_chunk(gp, g, k, b, why, n);
        if (st == JF_OK)
            st = jf_cuda_stream_launch(g, gp->fn_normal_eq, gp->grid, JF_CUDA_BLOCK, args, why, n);
        if (st == JF_OK) st = jf_cuda_graph_mark(g, b, why, n);
    }
    unsigned int nb = gp->grid * (unsigned)gp->lay.nchunks;
    void *rargs[] = {&gp->partial, &nb, &gp->acc, &nostop};
    if (st == JF_OK)
        st = jf_cuda_stream_launch(g, gp->fn_reduce, (unsigned)gp->nacc, JF_CUDA_BLOCK, rargs, why,
                                   n);
    return st;
}

/* The loop over data streamed staged: the uploads are the host's work, so the host drives it,
 * a pass and a step at a time, and reads the state after each (a copy's wait is milliseconds per
 * chunk; a read, microseconds). On JF_OK c and ws hold the final state. */
static int run_loop_staged(jf_gpu_problem *gp, const loop_mem *lm, jf_loss loss, jf_lmc *c,
                           double *ws, size_t nws, jf_gpu_stats *stats, char *why, size_t n) {
    size_t np = gp->np;
    jf_cuda_graph *g = NULL;
    stats->mode = JF_GPU_LOOP_STREAM;
    stats->per_wait = 1;
    int code = jf_cuda_graph_new(&g, NULL, why, n);
    if (code == JF_OK) code = jf_cuda_graph_to_device(g, lm->c, c, sizeof *c, why, n);
    if (code == JF_OK) code = jf_cuda_graph_to_device(g, lm->ws, ws, nws * sizeof(double), why, n);
    jf_devptr dx = lm->ws, dx_try = lm->ws + (np + gp->nheld) * sizeof(double);
    jf_devptr cd = lm->c, wsd = lm->ws, iwsd = lm->iws, acc = gp->acc, none = 0;
    for (int what = 0; code == JF_OK; what = 1) {
        void *sargs[] = {&cd, &wsd, &iwsd, &acc, &none, &none, &what};
        code = staged_pass(gp, g, what ? dx_try : dx, loss, why, n);
        if (code == JF_OK) code = jf_cuda_stream_launch(g, gp->fn_step, 1, 32, sargs, why, n);
        stats->launches++;
        if (code == JF_OK) code = wait_state(gp, g, lm, c, ws, nws, why, n);
        if (code != JF_OK || c->status != JF_STEP_CONTINUE) break;
    }
    stats->loop_syncs = g ? jf_cuda_graph_syncs(g) : 0;
    jf_cuda_graph_free(g);
    return code;
}

/* Builds and runs the loop; on JF_OK c and ws hold the final state. *launched says whether
 * anything ran on the device (before that, c and ws are untouched and the loop can be built
 * again in another form). */
static int run_loop(jf_gpu_problem *gp, const loop_mem *lm, jf_loss loss, void *cond_fn, jf_lmc *c, double *ws, size_t nws, jf_gpu_stats *stats,
                    int *launched, char *why, size_t n) {
    size_t np = gp->np;
    *launched = 0;
    jf_cuda_graph *g = NULL, *g2 = NULL;
    int code = jf_cuda_graph_new(&g, NULL, why, n);
    if (code == JF_OK) code = jf_cuda_graph_to_device(g, lm->c, c, sizeof *c, why, n);
    if (code == JF_OK) code = jf_cuda_graph_to_device(g, lm->ws, ws, nws * sizeof(double), why, n);
    jf_devptr dx = lm->ws, dx_try = lm->ws + (np + gp->nheld) * sizeof(double);
    jf_devptr status = lm->c + offsetof(jf_lmc, status);
    unsigned long long h = 0;
    if (code == JF_OK && cond_fn) {
        char cwhy[256];
        if (jf_cuda_graph_while_handle(g, &h, cwhy, sizeof cwhy) != JF_OK) {
            snprintf(stats->note, sizeof stats->note, "no WHILE graph nodes (%s)", cwhy);
            cond_fn = NULL;
        }
    }
    /* start: normal_eq(x) → reduce → jf_lm_step(start) */
    if (code == JF_OK) code = add_iteration(g, gp, lm, dx, loss, 0, 0, why, n);
    if (code == JF_OK && cond_fn) {
        /* condition → WHILE { normal_eq(x_try) → reduce → judge → condition } */
        void *cargs[] = {&h, &status};
        code = jf_cuda_graph_kernel(g, cond_fn, 1, 32, cargs, why, n);
        if (code == JF_OK) code = jf_cuda_graph_while_begin(g, h, why, n);
        if (code == JF_OK) code = add_iteration(g, gp, lm, dx_try, loss, 1, 0, why, n);
        if (code == JF_OK) code = jf_cuda_graph_kernel(g, cond_fn, 1, 32, cargs, why, n);
        jf_cuda_graph_while_end(g);
        stats->mode = JF_GPU_LOOP_WHILE;
    } else if (code == JF_OK) {
        /* a second graph on the same stream: JF_LM_CUDA_UNROLL iterations whose kernels return
         * at once after the end (the status word is their stop flag). Streamed data: one, as
         * the copy nodes cannot see the flag and each leftover iteration would copy all the
         * data again, which costs far more than a host wait per iteration. */
        int unroll = gp->chunk ? 1 : JF_LM_CUDA_UNROLL;
        stats->per_wait = unroll;
        code = jf_cuda_graph_new(&g2, g, why, n);
        for (int k = 0; code == JF_OK && k < unroll; k++)
            code = add_iteration(g2, gp, lm, dx_try, loss, 1, status, why, n);
        if (code == JF_OK) code = jf_cuda_graph_instantiate(g2, why, n);
        stats->mode = JF_GPU_LOOP_UNROLLED;
    }
    if (code == JF_OK) code = jf_cuda_graph_instantiate(g, why, n);
    if (code == JF_OK) {
        *launched = 1;
        code = jf_cuda_graph_launch(g, why, n);
    }
    stats->launches = 1;
    /* the statistics' passes at the final point: behind the WHILE node, read with the loop's
     * one wait; after unrolled graphs, once the host has seen the end (one wait more) */
    int want = gp->tail ? tails_wanted(gp, loss) : 0;
    for (;;) {
        if (code == JF_OK && g2) {
            code = jf_cuda_graph_launch(g2, why, n);
            stats->launches++;
        }
        if (code == JF_OK && !g2 && want) code = enqueue_tails(gp, g, dx, want, why, n);
        /* the host's own work while the device runs: before the reads, as a copy to pageable
         * memory returns only once the device has done everything queued before it */
        if (code == JF_OK) overlap_host_work(gp);
        /* the only reads of the loop: the state (and the tails), after the queued work */
        if (code == JF_OK) code = loop_read(gp, g, c, lm->c, sizeof *c, why, n);
        if (code == JF_OK) code = loop_read(gp, g, ws, lm->ws, nws * sizeof(double), why, n);
        if (code == JF_OK && !g2) code = read_tails(gp, g, want, why, n);
        if (code == JF_OK) code = jf_cuda_graph_sync(g, why, n);
        if (code != JF_OK || !g2 || c->status != JF_STEP_CONTINUE) break;
    }
    if (code == JF_OK && g2 && want) {
        code = enqueue_tails(gp, g, dx, want, why, n);
        if (code == JF_OK) code = read_tails(gp, g, want, why, n);
        if (code == JF_OK) code = jf_cuda_graph_sync(g, why, n);
    }
    if (code == JF_OK) gp->tail_have = want;
    stats->loop_syncs = jf_cuda_graph_syncs(g);
    jf_cuda_graph_free(g2);
    jf_cuda_graph_free(g);
    return code;
}

int jf_lm_solve_cuda(jf_problem *prob, jf_gpu_problem *gp, const jf_lm_config *cfg, double *x,
                     jf_lm_state *st, jf_gpu_stats *stats, char *why, size_t n) {
    memset(st, 0, sizeof *st);
    double upload_ms = stats->upload_ms; /* the caller's, from jf_gpu_problem_init */
    memset(stats, 0, sizeof *stats);
    stats->upload_ms = upload_ms;
    double t0 = jf_clock_ms();
    size_t np = prob->np;
    void *cfn[1] = {NULL};
    char *src = jf_lm_cuda_source(0);
    if (!src) {
        snprintf(why, n, "out of memory");
        return JF_ERR_NOMEM;
    }
    void *fns[SOLVER_FNS];
    /* held by gp (released by jf_gpu_problem_free): the finish's passes may launch them */
    jf_cuda_module_release(gp->solver_mod);
    gp->solver_mod = NULL;
    int code = jf_cuda_module_get(src, solver_names, SOLVER_FNS, NULL, fns, &gp->solver_mod, NULL,
                                  why, n, NULL, 0);
    free(src);
    stats->modules_ms = jf_clock_ms() - t0;
    if (code != JF_OK) return code;
    gp->fn_step = fns[0];
    gp->fn_lp_zero = fns[1];
    gp->fn_lp_scale = fns[2];
    gp->fn_lp_pack = fns[3];
    void *cond_fn = NULL;
    if (!jf_cuda_cond_nodes())
        snprintf(stats->note, sizeof stats->note,
                 "no WHILE graph nodes (the driver is older than CUDA 12.4)");
    else if (getenv("JITFIT_GPU_NO_WHILE") && *getenv("JITFIT_GPU_NO_WHILE"))
        snprintf(stats->note, sizeof stats->note, "no WHILE graph nodes (JITFIT_GPU_NO_WHILE is set)");
    else {
        char cwhy[256];
        char *csrc = jf_lm_cuda_source(1);
        jf_cuda_module_release(gp->cond_mod);
        gp->cond_mod = NULL;
        if (csrc && jf_cuda_module_get(csrc, cond_names, 1, NULL, cfn, &gp->cond_mod, NULL, cwhy,
                                       sizeof cwhy, NULL, 0) == JF_OK)
            cond_fn = cfn[0];
        else
            snprintf(stats->note, sizeof stats->note, "no WHILE graph nodes (%s)",
                     csrc ? cwhy : "out of memory");
        free(csrc);
        stats->modules_ms = jf_clock_ms() - t0;
    }

    size_t nh = prob->nheld, nws = jf_lmc_ws_doubles(np, nh), niws = jf_lmc_ws_ints(np);
    double *ws = calloc(nws, sizeof *ws);
    int *iws = calloc(niws, sizeof *iws); /* only for the views: the device has its own */
    jf_lmc c;
    loop_mem lm;
    memset(&lm, 0, sizeof lm);
    if (!ws || !iws) {
        free(ws);
        free(iws);
        snprintf(why, n, "out of memory");
        return JF_ERR_NOMEM;
    }
    jf_lmc_setup(&c, ws, iws, np, nh, jf_problem_held(prob), cfg, x);
    /* fp32 passes end with the cost's rounding sum (jf_cuda_kernels_nsums) */
    if (gp->nacc > gp->nacc_host) c.noise_eps = JF_LMC_NOISE_EPS;
    jf_lmc_views v;
    jf_lmc_views_init(&v, ws, iws, np, nh);
    gp->tail_have = 0;
    gp->loop_reads = 0;
    gp->overlap_late = 0;
    if (tails_wanted(gp, prob->loss) && !gp->tail) { /* none: the ops' passes instead */
        char twhy[256];
        gp->tail = malloc(2 * gp->nacc * sizeof *gp->tail);
        if (gp->tail && jf_cuda_alloc(&gp->tail_dev, 2 * gp->nacc * sizeof(double), twhy,
                                      sizeof twhy) != JF_OK) {
            free(gp->tail);
            gp->tail = NULL;
        }
    }
    code = jf_cuda_alloc(&lm.c, sizeof c, why, n);
    if (code == JF_OK) code = jf_cuda_alloc(&lm.ws, nws * sizeof(double), why, n);
    if (code == JF_OK) code = jf_cuda_alloc(&lm.iws, niws * sizeof(int), why, n);
    int launched = 0;
    double t_loop = jf_clock_ms();
    stats->setup_ms = t_loop - t0 - stats->modules_ms;
    if (code == JF_OK && gp->large) {
        char fac[200];
        if (gp->lp_rounds)
            snprintf(fac, sizeof fac, "p×p factorizations by cuSOLVER (%d per pass)", gp->lp_rounds);
        else
            snprintf(fac, sizeof fac, "p×p factorizations in the kernel (%.150s)", gp->lp_solver);
        snprintf(stats->note, sizeof stats->note,
                 "%zu parameters: J in %zu chunk%s of %zu rows, JᵀJ and Jᵀr by cuBLAS, %s", np,
                 gp->lp_nchunks, gp->lp_nchunks == 1 ? "" : "s", gp->lp_chunk, fac);
        code = run_loop_large(gp, &lm, prob->loss, &c, ws, nws, stats, why, n);
        launched = 1;
    } else if (code == JF_OK && gp->chunk && gp->stream_staged) {
        code = run_loop_staged(gp, &lm, prob->loss, &c, ws, nws, stats, why, n);
        launched = 1;
    } else if (code == JF_OK) {
        code = run_loop(gp, &lm, prob->loss, cond_fn, &c, ws, nws, stats, &launched, why, n);
    }
    if (code != JF_OK && cond_fn && !launched) {
        /* the driver would not build or instantiate the WHILE form: the unrolled one needs
         * nothing beyond plain graphs */
        snprintf(stats->note, sizeof stats->note, "no WHILE graph nodes (%.280s)", why);
        code = run_loop(gp, &lm, prob->loss, NULL, &c, ws, nws, stats, &launched, why, n);
    }
    loop_mem_free(&lm);
    double t_finish = jf_clock_ms();
    stats->loop_ms = t_finish - t_loop;
    if (code == JF_OK && c.status == JF_STEP_CONTINUE) {
        snprintf(why, n, "the device loop ended without a status");
        code = JF_ERR_INTERNAL;
    }
    if (code != JF_OK) {
        free(ws);
        free(iws);
        return code;
    }
    stats->iterations = c.iterations;
    gp->syncs_after = 0;
    code = jf_lmc_finish(prob, cfg, &c, ws, iws, x, st);
    stats->finish_syncs = gp->syncs_after;
    stats->finish_ms = jf_clock_ms() - t_finish;
    free(ws);
    free(iws);
    if (code == JF_OK && gp->failed) {
        snprintf(why, n, "%s", gp->why);
        jf_lm_state_free(st);
        return gp->failed;
    }
    if (code != JF_OK) snprintf(why, n, "out of memory");
    return code;
}
