/* The CUDA emitter: one model's kernels as `extern "C" __global__` functions for NVRTC, with the
 * ABI described in emit.h. They share the straight-line model code with the C emitter
 * (emit_common.c) and the prelude/loss texts with the interpreter.
 *
 * All kernels are grid-stride loops, so any grid size covers any range. normal_eq (like the
 * batches' jf_fit_sums) loads each point's x and y one iteration ahead (prefetch_loop), keeps
 * its sums in registers per thread, reduces them per warp with shuffles and across the block's
 * warps in shared memory, and writes one row of block partial sums; jf_reduce_blocks adds those
 * rows, a block of JF_BLOCK threads per sum (thread t adds rows t, t + JF_BLOCK, ... in order,
 * then the warps' shuffles and the warps in order). One thread per sum walking all the rows
 * (up to 1024, 65536 streamed) waited out an L2 latency per few rows: by that estimate tens of
 * microseconds per pass, as long as a 10⁷-point pass at an H200's bandwidth (unmeasured). Both
 * orders are fixed, so for a given launch configuration the result is
 * deterministic (no atomics). Both take `stop` (NULL: always run): the device-resident
 * solver's status word, so that passes queued after convergence in an unrolled CUDA graph
 * return at once. Branches on y, w and the loss are uniform across the grid and
 * cost nothing worth versioning for, unlike on the CPU; the weights' products sit behind the
 * branch on w, so that a fit without weights does not pay np + 1 multiplications by 1.
 */
#include <stdio.h>
#include <string.h>

#include "emit.h"


/* Definitions every CUDA unit needs once, whatever the number of models in it. */
static const char cuda_common[] =
    "#ifndef JF_CUDA_COMMON\n"
    "#define JF_CUDA_COMMON\n"
    "/* NVRTC has no <stddef.h>; indices are 64-bit like the host's size_t. */\n"
    "typedef unsigned long long jf_index;\n";

/* After the JF_BLOCK definition (printed between the two). */
static const char cuda_common_tail[] =
    "/* Sum over the 32 lanes of a warp; lane 0 gets the total (fixed order). */\n"
    "static __device__ __forceinline__ double jf_warp_sum(double v)\n"
    "{\n"
    "    v += __shfl_down_sync(0xffffffffu, v, 16);\n"
    "    v += __shfl_down_sync(0xffffffffu, v, 8);\n"
    "    v += __shfl_down_sync(0xffffffffu, v, 4);\n"
    "    v += __shfl_down_sync(0xffffffffu, v, 2);\n"
    "    v += __shfl_down_sync(0xffffffffu, v, 1);\n"
    "    return v;\n"
    "}\n"
    "/* Block totals of the n per-thread sums v[] into out[0..n): each warp reduces with shuffles,\n"
    " * lane 0 of each warp parks its totals in shared memory (JF_CHUNK sums at a time), and thread\n"
    " * t adds the warps' values of sum t in warp order. A loop, not unrolled code: it runs once\n"
    " * per thread and would otherwise dominate NVRTC's compile time for many parameters. */\n"
    "#define JF_CHUNK 128u\n"
    "static __device__ __noinline__ void jf_block_sums(const double *v, unsigned int n, double *out)\n"
    "{\n"
    "    __shared__ double sh[(JF_BLOCK / 32u) * JF_CHUNK];\n"
    "    const unsigned int lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;\n"
    "    for (unsigned int q0 = 0; q0 < n; q0 += JF_CHUNK) {\n"
    "        const unsigned int len = n - q0 < JF_CHUNK ? n - q0 : JF_CHUNK;\n"
    "#pragma unroll 1\n"
    "        for (unsigned int q = 0; q < len; q++) {\n"
    "            const double t = jf_warp_sum(v[q0 + q]);\n"
    "            if (lane == 0) sh[warp * JF_CHUNK + q] = t;\n"
    "        }\n"
    "        __syncthreads();\n"
    "        if (threadIdx.x < len) {\n"
    "            double s = 0.0;\n"
    "            for (unsigned int k = 0; k < JF_BLOCK / 32u; k++) s += sh[k * JF_CHUNK + threadIdx.x];\n"
    "            out[q0 + threadIdx.x] = s;\n"
    "        }\n"
    "        __syncthreads();\n"
    "    }\n"
    "}\n"
    "#endif\n\n";

static void kernel_head(jf_buf *b, const char *name, const char *suffix, int min_blocks) {
    jf_buf_printf(b, "extern \"C\" __global__ void __launch_bounds__(%d", JF_CUDA_BLOCK);
    if (min_blocks > 0) jf_buf_printf(b, ", %d", min_blocks);
    jf_buf_printf(b,
                  ")\n"
                  "%s%s(const double *__restrict__ p, const double *__restrict__ x, jf_index ldx,\n"
                  "        const double *__restrict__ y, const double *__restrict__ w,\n"
                  "        jf_index begin, jf_index end",
                  name, suffix);
}

static void loop_head(jf_buf *b) {
    jf_buf_puts(b, "    (void)p;\n    (void)x;\n    (void)ldx;\n"
                   "    const jf_index stride = (jf_index)blockDim.x * gridDim.x;\n"
                   "    for (jf_index i = begin + (jf_index)blockIdx.x * blockDim.x + threadIdx.x;"
                   " i < end; i += stride) {\n");
}

/* `xn<j> = x[j * ldx + at];` for every variable s uses, and `yn = ...` (the next point's loads). */
static void next_loads(jf_buf *b, const jf_schedule *s, const char *at, const char *ind) {
    for (size_t q = 0; q < s->n; q++) {
        const jf_node *nd = jf_dag_node(s->dag, s->nodes[q]);
        if (nd->op == JF_OP_VAR)
            jf_buf_printf(b, "%s    xn%u = x[%u * ldx + %s];\n", ind, (unsigned)nd->index,
                          (unsigned)nd->index, at);
    }
    jf_buf_printf(b, "%s    yn = y ? y[%s] : 0.0;\n", ind, at);
}

/* The loop over points first, first + step, ... below end whose body point_rj_pre(..., step)
 * begins: each point's x and y are loaded one iteration ahead, into xn<j> and yn, so that their
 * latency (a DRAM access: hundreds of cycles) overlaps the previous point's arithmetic instead
 * of stalling the thread at the top of every iteration (ncu, H200: the damped sine's normal_eq
 * at 34 % of the SM's compute throughput and 19 % of DRAM's, latency-bound). */
static void prefetch_loop(jf_buf *b, const jf_schedule *s, const char *first, const char *step) {
    jf_buf_printf(b, "    jf_index i = %s;\n    double yn = 0.0", first);
    for (size_t q = 0; q < s->n; q++) {
        const jf_node *nd = jf_dag_node(s->dag, s->nodes[q]);
        if (nd->op == JF_OP_VAR) jf_buf_printf(b, ", xn%u = 0.0", (unsigned)nd->index);
    }
    jf_buf_puts(b, ";\n    if (i < end) {\n");
    next_loads(b, s, "i", "    ");
    jf_buf_printf(b, "    }\n    for (; i < end; i += %s) {\n", step);
}

/* r of point i (weighted), and with_j: the weighted row J<k>. In single precision (b->real set)
 * the model's values are fp32 and become fp64 here, before the weights, the loss and the sums.
 * pre: inside prefetch_loop (step: its step), the point's x and y are the loads made ahead. */
static void point_rj_pre(jf_buf *b, const jf_schedule *s, size_t np, int with_j, const char *ind,
                         const char *step) {
    const char *cast = b->real ? "(double)" : "";
    if (step) {
        for (size_t q = 0; q < s->n; q++) {
            const jf_node *nd = jf_dag_node(s->dag, s->nodes[q]);
            if (nd->op == JF_OP_VAR && b->real)
                jf_buf_printf(b, "%sconst %s x%u = (%s)xn%u;\n", ind, b->real, (unsigned)nd->index,
                              b->real, (unsigned)nd->index);
            else if (nd->op == JF_OP_VAR)
                jf_buf_printf(b, "%sconst double x%u = xn%u;\n", ind, (unsigned)nd->index,
                              (unsigned)nd->index);
        }
        jf_buf_printf(b, "%sconst double yi = yn;\n%sif (i + %s < end) {\n", ind, ind, step);
        char at[64];
        snprintf(at, sizeof at, "i + %s", step);
        next_loads(b, s, at, ind);
        jf_buf_printf(b, "%s}\n", ind);
    } else {
        jf_emit_load_vars(b, s, ind);
    }
    jf_emit_statements(b, s, ind);
    if (!step) jf_buf_printf(b, "%sconst double yi = y ? y[i] : 0.0;\n", ind);
    jf_buf_printf(b, "%sdouble r = %s", ind, cast);
    jf_emit_operand(b, s, s->rootpos[0]);
    jf_buf_puts(b, " - yi;\n");
    for (size_t k = 0; with_j && k < np; k++) {
        jf_buf_printf(b, "%sdouble J%zu = %s", ind, k, cast);
        jf_emit_operand(b, s, s->rootpos[k + 1]);
        jf_buf_puts(b, ";\n");
    }
    /* the weights' products only where there are weights (x * 1.0 is x: the same bits) */
    jf_buf_printf(b, "%sdouble wi = 1.0;\n%sif (w) {\n%s    wi = w[i];\n%s    r *= wi;\n", ind,
                  ind, ind, ind);
    for (size_t k = 0; with_j && k < np; k++) jf_buf_printf(b, "%s    J%zu *= wi;\n", ind, k);
    jf_buf_printf(b, "%s}\n", ind);
}

static void point_rj(jf_buf *b, const jf_schedule *s, size_t np, int with_j, const char *ind) {
    point_rj_pre(b, s, np, with_j, ind, NULL);
}

static void emit_residual(jf_buf *b, const jf_emit_model *em) {
    kernel_head(b, "jf_residual", em->suffix, 0);
    jf_buf_puts(b, ", double *__restrict__ rout)\n{\n");
    jf_emit_load_params(b, em->sf, "    ");
    loop_head(b);
    point_rj(b, em->sf, 0, 0, "        ");
    jf_buf_puts(b, "        rout[i - begin] = r;\n    }\n}\n\n");
}

static void emit_jacobian_row(jf_buf *b, const jf_emit_model *em) {
    size_t np = em->m->np;
    kernel_head(b, "jf_jacobian_row", em->suffix, 0);
    jf_buf_puts(b, ", double *__restrict__ rout,\n        double *__restrict__ J, jf_index ldj)\n{\n"
                   "    (void)J;\n    (void)ldj;\n");
    jf_emit_load_params(b, em->sall, "    ");
    loop_head(b);
    point_rj(b, em->sall, np, 1, "        ");
    jf_buf_puts(b, "        rout[i - begin] = r;\n");
    for (size_t k = 0; k < np; k++)
        jf_buf_printf(b, "        J[%zu * ldj + (i - begin)] = J%zu;\n", k, k);
    jf_buf_puts(b, "    }\n}\n\n");
}

/* The products are fused into their sums (fma: one rounding, and one fp64 instruction where
 * --fmad=false would leave a multiply and an add): the sums are the kernel's most numerous
 * instructions for small models (21 of the damped sine's ~100 per point). */
static void accumulate(jf_buf *b, size_t np, const char *ind, const char *cost) {
    size_t q = 0;
    for (size_t k = 0; k < np; k++)
        for (size_t l = k; l < np; l++, q++)
            jf_buf_printf(b, "%sa%zu = fma(J%zu, J%zu, a%zu);\n", ind, q, k, l, q);
    for (size_t k = 0; k < np; k++, q++)
        jf_buf_printf(b, "%sa%zu = fma(J%zu, r, a%zu);\n", ind, q, k, q);
    jf_buf_printf(b, "%sa%zu += %s;\n", ind, q, cost);
}

/* In single precision (nsums past the normal equations' nacc): the point's term of the cost's
 * rounding sum, |r| (|w f| 2^29 + |r|) as the polish's (polish_core.h), before a robust loss
 * rescales r. */
static void rounding_sum(jf_buf *b, size_t np, size_t nsums) {
    if (nsums > jf_emit_num_acc(np))
        jf_buf_printf(b,
                      "        a%zu = fma(fabs(r), fabs(fma(yi, wi, r)) * 536870912.0 + fabs(r),"
                      " a%zu);\n",
                      nsums - 1, nsums - 1);
}

/* The point's cost term, with r and J<k> scaled in place for a robust loss. L is the loss:
 * a constant when the kernel is built for one loss (dead branches vanish), else the argument;
 * one code path for every loss, since the test is uniform across the grid and a second copy of
 * the model's code would double NVRTC's compile time for no speed. */
static void point_cost(jf_buf *b, size_t np, const char *ind) {
    jf_buf_printf(b, "%sdouble cost;\n%sif (L == 0) {\n%s    cost = r * r;\n%s} else {\n"
                     "%s    double js;\n%s    cost = jf_loss_scale(L, r, fs2, ifs2, &r, &js);\n",
                  ind, ind, ind, ind, ind, ind);
    for (size_t k = 0; k < np; k++) jf_buf_printf(b, "%s    J%zu *= js;\n", ind, k);
    jf_buf_printf(b, "%s}\n", ind);
}

static void loss_head(jf_buf *b, const jf_emit_options *o) {
    if (o->cuda_loss >= 0)
        jf_buf_printf(b, "    const int L = %d; /* built for this loss alone */\n    (void)loss;\n",
                      o->cuda_loss);
    else
        jf_buf_puts(b, "    const int L = loss;\n");
    jf_buf_puts(b, "    const double fs2 = f_scale * f_scale, ifs2 = 1.0 / fs2;\n");
}

/* Few sums (np <= 8): each thread keeps its own in registers over its points of the grid-stride
 * loop, then the block adds them up (jf_block_sums). */
static void emit_normal_eq_registers(jf_buf *b, const jf_emit_model *em, const jf_emit_options *o) {
    const jf_schedule *s = em->sall;
    size_t np = em->m->np, nacc = jf_emit_cuda_fit_nsums(np, b->real != NULL);
    for (size_t q = 0; q < nacc; q++) jf_buf_printf(b, "    double a%zu = 0.0;\n", q);
    loss_head(b, o);
    if (o->cuda_no_prefetch) {
        loop_head(b);
        point_rj(b, s, np, 1, "        ");
    } else {
        jf_buf_puts(b, "    (void)p;\n    (void)x;\n    (void)ldx;\n"
                       "    const jf_index stride = (jf_index)blockDim.x * gridDim.x;\n");
        prefetch_loop(b, s, "begin + (jf_index)blockIdx.x * blockDim.x + threadIdx.x", "stride");
        point_rj_pre(b, s, np, 1, "        ", "stride");
    }
    rounding_sum(b, np, nacc);
    point_cost(b, np, "        ");
    accumulate(b, np, "        ", "cost");
    jf_buf_puts(b, "    }\n");
    /* The sums leave their registers once, for the block reduction (jf_block_sums). */
    jf_buf_printf(b, "    double v[%zu] = {", nacc);
    for (size_t q = 0; q < nacc; q++) jf_buf_printf(b, "%sa%zu", q ? ", " : "", q);
    jf_buf_printf(b, "};\n    jf_block_sums(v, %zuu, partial + (jf_index)blockIdx.x * %zu);\n", nacc,
                  nacc);
}

/* Many sums: per-thread registers would spill (231 doubles for 20 parameters) and make ptxas
 * slow. Instead the block works on tiles of T points: thread t < T evaluates point t of the
 * tile and parks its row (J_0..J_np-1, r, cost) in shared memory; then every thread owns
 * ceil(nacc / JF_BLOCK) of the sums and adds the tile's products for them, points in order.
 * Registers stay few, and the order of every sum is still fixed. */
/* Points per tile for np parameters: as many as fit 48 KiB of static shared memory besides
 * `reserve` doubles, a multiple of 32, at most a block; 0 when not even 32 fit. */
static size_t tile_points(size_t np, size_t reserve) {
    size_t rows = np + 2, budget = 48 * 1024 / 8;
    if (budget <= reserve + 33 * rows) return 0;
    size_t tile = ((budget - reserve) / rows - 1) / 32 * 32;
    return tile > JF_CUDA_BLOCK ? JF_CUDA_BLOCK : tile;
}

/* Doubles of shared memory a tiled batch kernel keeps besides the tile: the fit's totals. */
static size_t batch_reserve(size_t np) { return jf_emit_num_acc(np) + 8; }

int jf_emit_cuda_batch_tiled_ok(size_t np) { return tile_points(np, batch_reserve(np)) >= 32; }

size_t jf_emit_cuda_fit_nsums(size_t np, int single) {
    size_t nacc = jf_emit_num_acc(np);
    return nacc + (single && nacc <= JF_CUDA_REGISTER_SUMS);
}

int jf_emit_cuda_batch_ok(size_t np) {
    return np > 0 && (jf_emit_num_acc(np) <= JF_CUDA_REGISTER_SUMS || jf_emit_cuda_batch_tiled_ok(np));
}

/* batch = 0: normal_eq's body (tiles strided over the grid, block sums to partial); batch = 1:
 * the body of jf_fit_sums_tiled, where one block walks all the tiles of [begin, end) and leaves
 * the totals in out (shared memory), in the same fixed order. */
static void emit_tiled_sums(jf_buf *b, const jf_emit_model *em, const jf_emit_options *o,
                            int batch) {
    const jf_schedule *s = em->sall;
    size_t np = em->m->np, nacc = jf_emit_num_acc(np), rows = np + 2;
    size_t nq = (nacc + JF_CUDA_BLOCK - 1) / JF_CUDA_BLOCK;
    size_t tile = tile_points(np, batch ? batch_reserve(np) : 0);
    if (tile < 32) tile = 32;
    jf_buf_printf(b,
                  "    /* rows of the tile: J_0..J_%zu, r, cost; stride T+1 against bank conflicts */\n"
                  "    enum { T = %zu, RS = %zu + 1 };\n"
                  "    __shared__ double jt[%zu * RS];\n",
                  np - 1, tile, tile, rows);
    loss_head(b, o);
    /* which two rows each owned sum multiplies: (k, l) for JᵀJ, (k, r) for Jᵀr, (cost) */
    jf_buf_printf(b,
                  "    double sum[%zu];\n"
                  "    unsigned int ra[%zu], rb[%zu];\n"
                  "    for (unsigned int j = 0; j < %zuu; j++) {\n"
                  "        unsigned int q = threadIdx.x + j * JF_BLOCK, k = 0;\n"
                  "        sum[j] = 0.0;\n"
                  "        ra[j] = rb[j] = %zuu; /* past the last sum: unused */\n"
                  "        if (q < %zuu) {\n"
                  "            while (q >= %zuu - k) {\n"
                  "                q -= %zuu - k;\n"
                  "                k++;\n"
                  "            }\n"
                  "            ra[j] = k;\n"
                  "            rb[j] = k + q;\n"
                  "        } else if (q < %zuu) {\n"
                  "            ra[j] = q - %zuu;\n"
                  "            rb[j] = %zuu;\n"
                  "        } else if (q == %zuu) {\n"
                  "            ra[j] = rb[j] = %zuu;\n"
                  "        }\n"
                  "    }\n",
                  nq, nq, nq, nq, rows, np * (np + 1) / 2, np, np, nacc - 1, np * (np + 1) / 2,
                  np, nacc - 1, np + 1);
    jf_buf_puts(b, "    (void)p;\n    (void)x;\n    (void)ldx;\n");
    if (batch)
        jf_buf_puts(b, "    for (jf_index t0 = begin; t0 < end; t0 += T) {\n");
    else
        jf_buf_puts(b, "    for (jf_index t0 = begin + (jf_index)blockIdx.x * T; t0 < end;"
                       " t0 += (jf_index)gridDim.x * T) {\n");
    jf_buf_puts(b, "        if (threadIdx.x < T) {\n"
                   "            const jf_index i = t0 + threadIdx.x;\n"
                   "            if (i < end) {\n");
    point_rj(b, s, np, 1, "                ");
    point_cost(b, np, "                ");
    for (size_t k = 0; k < np; k++)
        jf_buf_printf(b, "                jt[%zu * RS + threadIdx.x] = J%zu;\n", k, k);
    jf_buf_printf(b,
                  "                jt[%zu * RS + threadIdx.x] = r;\n"
                  "                jt[%zu * RS + threadIdx.x] = cost;\n"
                  "            } else {\n"
                  "                for (unsigned int k = 0; k < %zuu; k++) jt[k * RS + threadIdx.x] = 0.0;\n"
                  "            }\n"
                  "        }\n"
                  "        __syncthreads();\n"
                  "        for (unsigned int j = 0; j < %zuu; j++) {\n"
                  "            if (ra[j] == %zuu) continue;\n"
                  "            const double *A = jt + ra[j] * RS, *B = jt + rb[j] * RS;\n"
                  "            double acc = sum[j];\n"
                  "            if (ra[j] == %zuu) {\n"
                  "                for (unsigned int t = 0; t < T; t++) acc += A[t];\n"
                  "            } else {\n"
                  "                for (unsigned int t = 0; t < T; t++)\n"
                  "                    acc = fma(A[t], B[t], acc);\n"
                  "            }\n"
                  "            sum[j] = acc;\n"
                  "        }\n"
                  "        __syncthreads();\n"
                  "    }\n"
                  "    for (unsigned int j = 0; j < %zuu; j++) {\n"
                  "        const unsigned int q = threadIdx.x + j * JF_BLOCK;\n",
                  np, np + 1, rows, nq, rows, np + 1, nq);
    if (batch)
        jf_buf_printf(b, "        if (q < %zuu) out[q] = sum[j];\n    }\n"
                         "    __syncthreads(); /* the totals are complete for every thread */\n",
                      nacc);
    else
        jf_buf_printf(b, "        if (q < %zuu) partial[(jf_index)blockIdx.x * %zu + q] = sum[j];\n"
                         "    }\n",
                      nacc, nacc);
}

static void emit_normal_eq(jf_buf *b, const jf_emit_model *em, const jf_emit_options *o) {
    size_t np = em->m->np, nacc = jf_emit_cuda_fit_nsums(np, o->cuda_single);
    kernel_head(b, "jf_normal_eq", em->suffix, o->cuda_min_blocks);
    jf_buf_puts(b, ", int loss, double f_scale,\n        double *__restrict__ partial, const int *__restrict__ stop)\n{\n"
                   "    if (stop != nullptr && *stop != 0) return; /* the solver's loop has ended */\n");
    jf_emit_load_params(b, em->sall, "    ");
    if (jf_emit_num_acc(np) <= JF_CUDA_REGISTER_SUMS) emit_normal_eq_registers(b, em, o);
    else emit_tiled_sums(b, em, o, 0);
    jf_buf_puts(b, "}\n\n");
    jf_buf_printf(b,
                  "extern \"C\" __global__ void __launch_bounds__(JF_BLOCK)\n"
                  "jf_reduce_blocks%s(const double *__restrict__ partial, unsigned int nblocks,\n"
                  "        double *__restrict__ acc, const int *__restrict__ stop)\n"
                  "{\n"
                  "    __shared__ double sh[JF_BLOCK / 32u];\n"
                  "    if (stop != nullptr && *stop != 0) return;\n"
                  "    const unsigned int lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;\n"
                  "    for (unsigned int q = blockIdx.x; q < %zuu; q += gridDim.x) {\n"
                  "        double s = 0.0;\n"
                  "        for (unsigned int b = threadIdx.x; b < nblocks; b += JF_BLOCK)\n"
                  "            s += partial[(jf_index)b * %zuu + q];\n"
                  "        s = jf_warp_sum(s);\n"
                  "        if (lane == 0) sh[warp] = s;\n"
                  "        __syncthreads();\n"
                  "        if (threadIdx.x == 0) {\n"
                  "            double t = 0.0;\n"
                  "            for (unsigned int k = 0; k < JF_BLOCK / 32u; k++) t += sh[k];\n"
                  "            acc[q] = t;\n"
                  "        }\n"
                  "        __syncthreads();\n"
                  "    }\n"
                  "}\n\n",
                  em->suffix, nacc, nacc);
}

/* The batched solver's per-thread pass: the sums of points first, first + step, ... of [begin,
 * end) at p, in registers, written to out[0..nacc) (the caller reduces over the warp). The same
 * point code as normal_eq. */
static void emit_fit_sums(jf_buf *b, const jf_emit_model *em, const jf_emit_options *o) {
    const jf_schedule *s = em->sall;
    size_t np = em->m->np, nacc = jf_emit_cuda_fit_nsums(np, b->real != NULL);
    jf_buf_printf(b,
                  "#define JF_FIT_NACC%s %zuu\n"
                  "static __device__ __forceinline__ void jf_fit_sums%s(const double *__restrict__ p,\n"
                  "        const double *__restrict__ x, jf_index ldx, const double *__restrict__ y,\n"
                  "        const double *__restrict__ w, jf_index begin, jf_index end, jf_index first,\n"
                  "        jf_index step, int loss, double f_scale, double *out)\n{\n",
                  em->suffix, nacc, em->suffix);
    jf_emit_load_params(b, s, "    ");
    for (size_t q = 0; q < nacc; q++) jf_buf_printf(b, "    double a%zu = 0.0;\n", q);
    loss_head(b, o);
    jf_buf_puts(b, "    (void)x;\n    (void)ldx;\n");
    if (o->cuda_no_prefetch) {
        jf_buf_puts(b, "    for (jf_index i = begin + first; i < end; i += step) {\n");
        point_rj(b, s, np, 1, "        ");
    } else {
        prefetch_loop(b, s, "begin + first", "step");
        point_rj_pre(b, s, np, 1, "        ", "step");
    }
    rounding_sum(b, np, nacc);
    point_cost(b, np, "        ");
    accumulate(b, np, "        ", "cost");
    jf_buf_puts(b, "    }\n");
    for (size_t q = 0; q < nacc; q++) jf_buf_printf(b, "    out[%zu] = a%zu;\n", q, q);
    jf_buf_puts(b, "}\n\n");
}

/* The batched solver's finish on the device (polish and covariance from J's triangle,
 * solver/lsq_core.h): point i's weighted Jacobian row, and in rw its residual r, weight,
 * observation and the model's rounding relative to fp64. The same point code as jf_fit_sums. */
static void emit_fit_row(jf_buf *b, const jf_emit_model *em) {
    const jf_schedule *s = em->sall;
    size_t np = em->m->np;
    jf_buf_printf(b,
                  "#define JF_FIT_NP%s %zuu\n"
                  "static __device__ __forceinline__ void jf_fit_row%s(const double *__restrict__ p,\n"
                  "        const double *__restrict__ x, jf_index ldx, const double *__restrict__ y,\n"
                  "        const double *__restrict__ w, jf_index i, double *row, double *rw)\n{\n",
                  em->suffix, np, em->suffix);
    jf_emit_load_params(b, s, "    ");
    jf_buf_puts(b, "    (void)x;\n    (void)ldx;\n");
    point_rj(b, s, np, 1, "    ");
    for (size_t k = 0; k < np; k++) jf_buf_printf(b, "    row[%zu] = J%zu;\n", k, k);
    /* rw[3]: the model's rounding in units of fp64's (fp32: 2^29) */
    jf_buf_printf(b, "    rw[0] = r;\n    rw[1] = wi;\n    rw[2] = yi;\n    rw[3] = %s;\n}\n\n",
                  b->real ? "536870912.0" : "1.0");
}

/* The batched solver's block-per-fit pass for many sums: jf_fit_sums_tiled leaves the totals
 * of [begin, end) at p in out (nacc doubles of shared memory) for every thread of the block.
 * The same point code and tiling as the tiled normal_eq. */
static void emit_fit_sums_tiled(jf_buf *b, const jf_emit_model *em, const jf_emit_options *o) {
    size_t nacc = jf_emit_num_acc(em->m->np);
    jf_buf_printf(b,
                  "#define JF_FIT_NACC%s %zuu\n"
                  "static __device__ __noinline__ void jf_fit_sums_tiled%s(const double *__restrict__ p,\n"
                  "        const double *__restrict__ x, jf_index ldx, const double *__restrict__ y,\n"
                  "        const double *__restrict__ w, jf_index begin, jf_index end, int loss,\n"
                  "        double f_scale, double *out)\n{\n",
                  em->suffix, nacc, em->suffix);
    jf_emit_load_params(b, em->sall, "    ");
    emit_tiled_sums(b, em, o, 1);
    jf_buf_puts(b, "}\n\n");
}

void jf_emit_cuda_model(jf_buf *b, const jf_emit_model *em, const jf_emit_options *o) {
    const struct jf_model *m = em->m;
    const char *real = b->real;
    const int sincos = b->sincos;
    b->real = o->cuda_single ? "float" : NULL;
    b->sincos = 1;
    jf_buf_puts(b, cuda_common);
    jf_buf_printf(b, "/* Threads per block of normal_eq (JF_CUDA_BLOCK); its reduction relies on it. */\n"
                     "#define JF_BLOCK %du\n", JF_CUDA_BLOCK);
    jf_buf_puts(b, cuda_common_tail);
    jf_buf_printf(b,
                  "/* ---- model%s%s: %zu parameter(s), %zu variable(s); %zu operations for f, "
                  "%zu for f and its gradient; ",
                  em->suffix[0] ? " " : "", em->suffix, m->np, m->nv, em->sf->n, em->sall->n);
    /* without normal_eq (a large model) no kernel sums: the line must not say one does */
    if (o->no_normal_eq)
        jf_buf_puts(b, "no normal_eq: the solver forms J^T J from jacobian_row with cuBLAS ---- */\n");
    else
        jf_buf_printf(b, "normal_eq sums %zu values ---- */\n",
                      jf_emit_cuda_fit_nsums(m->np, o->cuda_single));
    if (o->cuda_single)
        jf_buf_puts(b, "/* single precision: the model is evaluated in fp32; r, J, the loss and "
                       "the sums are fp64 */\n");
    emit_residual(b, em);
    emit_jacobian_row(b, em);
    if (!o->no_normal_eq) emit_normal_eq(b, em, o);
    if (o->cuda_batch && jf_emit_num_acc(m->np) <= JF_CUDA_REGISTER_SUMS) {
        emit_fit_sums(b, em, o);
        emit_fit_row(b, em);
    }
    else if (o->cuda_batch) emit_fit_sums_tiled(b, em, o);
    b->real = real;
    b->sincos = sincos;
}
