/* GPU batches: many small independent fits in one kernel launch.
 *
 * All fits' data go to the device once as one set of columns (fit f owns points [off[f],
 * off[f+1])): packed, except x when every fit reads the same columns (pixel or channel
 * coordinates: one copy, fit f's point i is x's row i) and y when the fits' responses already
 * lie one after another; a jf_lmc state and workspace (solver/lm_core.h) per warp or block slot
 * stay in device memory. One launch runs everything: each warp takes a fit (a block for long
 * fits, a thread for short ones: see BLOCK_PER_FIT_POINTS, THREAD_PER_FIT_POINTS and
 * jf_batch_lm_block, jf_batch_lm_thread), its 32 lanes sum the normal equations
 * over the fit's points (the model's jf_fit_sums, generated with the same point code
 * as normal_eq), a shuffle reduction in fixed order gives lane 0 the totals, and lane 0 runs
 * the very jf_lmc_start / jf_lmc_judge of the single-fit GPU solver and of the host-driven
 * tests; the warp repeats until its fit has ended, then takes the next fit (grid-stride), so a
 * finished fit frees its lanes and no host synchronization happens until all are done. A batch
 * larger than BATCH_CHUNK_BYTES runs as a sequence of such launches over consecutive fits
 * (chunks), alternating between two streams so that one chunk's copies overlap another's
 * kernel (jf_batch_cuda_run).
 *
 * The finish runs on the device too where lm.c would polish (linear loss, n·p up to
 * JF_LM_MATERIALIZE_MAX; sums in registers, up to 8 parameters): after its loop the warp or
 * block evaluates the fit's sums and J's QR triangle (threads fold their points by Givens
 * rotations and merge in a fixed order, lsq_core.h), one thread runs the polish's decisions
 * (polish_core.h, as lm.c does) and leaves the final JᵀJ, gradient, cost, optimality, R and
 * Σ(f − y)²; the host then only assembles the result, the covariance from R (p×p work) — or,
 * for results as columns, the device computes those statistics too (jf_batch_stats: standard
 * errors from R, status, R²) and the host only copies a short record per fit into the
 * caller's arrays (jf_batch_stats_normal for fits the device does not polish: robust losses,
 * long fits). Other fits (many parameters, not finite at their start, and into result objects)
 * are finished on the host like the CPU batch's (solver/fit.c), so a GPU batch returns what
 * single fits return.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../codegen/emit.h"
#include "../runtime/cuda_api.h"
#include "../runtime/jit_nvrtc.h"
#include "lm_core.h"
#include "solver.h"

extern const char jf_embed_step_h[];
extern const char jf_embed_lm_core_h[];
extern const char jf_embed_lsq_core_h[];
extern const char jf_embed_polish_core_h[];


/* Warps per block of the batch kernel. */
#define WARPS_PER_BLOCK 8

/* Threads per block of the thread-per-fit kernel (its __launch_bounds__ says 128 too). */
#define THREAD_BLOCK 128

static const char batch_views[] =
    "\n/* ---- batched LM (solver/batch_cuda.c) ---- */\n"
    "/* The arguments of every batch kernel (warp, block, thread per fit: the host passes the same\n"
    " * list to whichever runs, jf_batch_cuda_run's args) */\n"
    "#define JF_BATCH_KERNEL_ARGS \\\n"
    "    const double *__restrict__ x, jf_index ldx, const double *__restrict__ y, \\\n"
    "    const double *__restrict__ w, const jf_index *__restrict__ off, int x_packed, \\\n"
    "    unsigned int nfits, int loss, double f_scale, const jf_lmc *c0, const double *x0s, \\\n"
    "    const double *sh, jf_lmc *cs, double *wss, int *iwss, double *res, \\\n"
    "    unsigned long long fin_max, double *fin, double *stats, int abs_sigma\n"
    "/* the views of a slot's workspace in the batch's arrays (a slot per warp or block: the fits\n"
    " * it runs one after the other reuse it) */\n"
    "static __device__ void jf_batch_views(jf_lmc_views *v, const jf_lmc *c, double *wss, int *iwss,\n"
    "                                      unsigned int slot)\n"
    "{\n"
    "    const unsigned long long np = c->np, nh = c->nheld;\n"
    "    jf_lmc_views_init(v, wss + (unsigned long long)slot * jf_lmc_ws_doubles(np, nh),\n"
    "                      iwss + (unsigned long long)slot * jf_lmc_ws_ints(np), np, nh);\n"
    "}\n"
    "/* A fit begins in a slot: its state from the batch's template c0, the workspace's inputs from\n"
    " * x0 (its start, then its held values: np + nheld) and the shared bounds and scales sh (lo,\n"
    " * hi, x_scale; np each). */\n"
    "static __device__ void jf_batch_begin(jf_lmc *c, const jf_lmc *c0, jf_lmc_views *v,\n"
    "                                      const double *x0, const double *sh)\n"
    "{\n"
    "    const unsigned long long np = c0->np, nh = c0->nheld;\n"
    "    *c = *c0;\n"
    "    for (unsigned long long k = 0; k < np; k++) {\n"
    "        v->x[k] = x0[k];\n"
    "        v->lo[k] = sh[k];\n"
    "        v->hi[k] = sh[np + k];\n"
    "        v->xs[k] = sh[2 * np + k];\n"
    "    }\n"
    "    for (unsigned long long h = 0; h < nh; h++) v->x[np + h] = v->x_try[np + h] = x0[np + h];\n"
    "}\n"
    "/* doubles of a fit's result record (jf_batch_end; res_doubles in batch_cuda.c) */\n"
    "static __device__ unsigned long long jf_batch_res_doubles(unsigned long long np)\n"
    "{\n"
    "    return 5 + 2 * np + np * np;\n"
    "}\n"
    "/* ... and ends: what the host reads of it — status, nfev, iterations, cost, optimality, x,\n"
    " * JtJ, g — in its result record res. */\n"
    "static __device__ void jf_batch_end(const jf_lmc *c, const jf_lmc_views *v, double *res)\n"
    "{\n"
    "    const unsigned long long np = c->np;\n"
    "    res[0] = (double)c->status;\n"
    "    res[1] = (double)c->nfev;\n"
    "    res[2] = (double)c->iterations;\n"
    "    res[3] = c->F;\n"
    "    res[4] = c->gnorm;\n"
    "    for (unsigned long long k = 0; k < np; k++) res[5 + k] = v->x[k];\n"
    "    for (unsigned long long q = 0; q < np * np; q++) res[5 + np + q] = v->A[q];\n"
    "    for (unsigned long long k = 0; k < np; k++) res[5 + np + np * np + k] = v->g[k];\n"
    "}\n"
    "/* doubles of a fit's statistics record (jf_batch_stats; JF_BATCH_STATS in solver.h) */\n"
    "#define JF_BATCH_STATS(np) (7u + 2u * (np))\n"
    "/* doubles of a fit's finish record (see JF_FIN_R; fin_doubles in batch_cuda.c) */\n"
    "static __device__ unsigned long long jf_batch_fin_doubles(unsigned long long np)\n"
    "{\n"
    "    return 3 + np * np + JF_FIT_NACC;\n"
    "}\n";

/* The finish on the device (after lsq_core.h and polish_core.h): helpers and the warp's. The
 * state a pass leaves is kept where the deciding thread alone reads it, not in every thread's
 * registers: the kept sums unpacked in the fit's workspace (as jf_lmc_unpack leaves them), R in
 * the fit's finish record fo, the polish's scratch in the workspace's p×p matrices that the loop
 * no longer needs. Every thread holds only the triangle it is folding. */
static const char batch_finish[] =
    "/* ---- the finish of a fit on the device: polish and J's triangle (solver/batch_cuda.c) ---- */\n"
    "/* A fit's finish record fo: done flag, polish steps kept, sum of (f - y)^2, R (JF_FIT_NP^2),\n"
    " * then the sums of the pass being judged (JF_FIT_NACC, the warp's; a block's stay shared). */\n"
    "#define JF_FIN_R 3u\n"
    "#define JF_FIN_SUMS (3u + JF_FIT_NP * JF_FIT_NP)\n"
    "/* The triangle of [J | -r] over points begin + first, + step, ... of [begin, end) at p, folded\n"
    " * by this thread with Givens rotations into R, qb, ex (rest, rounding sum, sum of (f - y)^2).\n"
    " * Returns whether every point's row and residual were finite. */\n"
    "static __device__ int jf_batch_fold(const double *__restrict__ p,\n"
    "        const double *__restrict__ x, jf_index ldx, const double *__restrict__ y,\n"
    "        const double *__restrict__ w, jf_index begin, jf_index end, jf_index first,\n"
    "        jf_index step, double *R, double *qb, double *ex)\n"
    "{\n"
    "    const unsigned long long np = JF_FIT_NP;\n"
    "    double row[JF_FIT_NP], rw[4];\n"
    "    int fin = 1;\n"
    "    jf_lsq_clear(R, qb, &ex[0], np);\n"
    "    ex[1] = ex[2] = 0.0;\n"
    "    for (jf_index i = begin + first; i < end; i += step) {\n"
    "        jf_fit_row(p, x, ldx, y, w, i, row, rw);\n"
    "        if (!jf_step_isfinite(rw[0]) || !jf_lmc_all_finite(row, np)) fin = 0;\n"
    "        ex[1] += jf_pol_noise_term(rw[0], rw[1] * rw[2], rw[3]);\n"
    "        const double d = rw[0] / rw[1];\n"
    "        ex[2] += d * d;\n"
    "        jf_lsq_add_row(R, qb, &ex[0], np, row, -rw[0]);\n"
    "    }\n"
    "    return fin;\n"
    "}\n"
    "/* ... folded by each lane of the warp (jf_batch_fold), then the warp's 32 merged in a fixed tree\n"
    " * (lane l takes the rows of lane l + 16, 8, 4, 2, 1, a row at a time), so lane 0 holds the\n"
    " * warp's. Returns (on lane 0) whether every point's row and residual were finite. */\n"
    "static __device__ int jf_batch_triangle(const double *__restrict__ p,\n"
    "        const double *__restrict__ x, jf_index ldx, const double *__restrict__ y,\n"
    "        const double *__restrict__ w, jf_index begin, jf_index end, jf_index first,\n"
    "        jf_index step, double *R, double *qb, double *ex)\n"
    "{\n"
    "    const unsigned long long np = JF_FIT_NP;\n"
    "    const unsigned int lane = threadIdx.x & 31u;\n"
    "    double row[JF_FIT_NP], rw[4];\n"
    "    int fin = jf_batch_fold(p, x, ldx, y, w, begin, end, first, step, R, qb, ex);\n"
    "    for (unsigned int off = 16; off > 0; off >>= 1) {\n"
    "        /* R's rows are rows for another R; the entries left of the diagonal are zeros */\n"
    "        for (unsigned long long k = 0; k < np; k++) {\n"
    "            for (unsigned long long j = 0; j < np; j++)\n"
    "                row[j] = j < k ? 0.0 : __shfl_down_sync(0xffffffffu, R[k * np + j], off);\n"
    "            const double b = __shfl_down_sync(0xffffffffu, qb[k], off);\n"
    "            if (lane < off) jf_lsq_add_row(R, qb, &ex[0], np, row, b);\n"
    "        }\n"
    "        for (unsigned long long q = 0; q < 3; q++) rw[q] = __shfl_down_sync(0xffffffffu, ex[q], off);\n"
    "        const int fo = __shfl_down_sync(0xffffffffu, fin, off);\n"
    "        if (lane < off) {\n"
    "            for (unsigned long long q = 0; q < 3; q++) ex[q] += rw[q];\n"
    "            fin = fin && fo;\n"
    "        }\n"
    "    }\n"
    "    return fin;\n"
    "}\n"
    "/* The deciding thread: the polish's next step from the kept point v->x (its sums unpacked in v,\n"
    " * its triangle R, qb; n points), proposed to the machine; 1 when v->x_try awaits a pass. As\n"
    " * lm.c's polish: D from the column norms, the free columns those nonzero, not held for a\n"
    " * negligible column (step.h) and strictly inside the bounds. The solve's scratch is the\n"
    " * workspace's (M, V, eig, work: the loop's, free now). */\n"
    "static __device__ __noinline__ int jf_batch_polish_step(jf_pol *P, jf_lmc_views *v,\n"
    "        const double *R, const double *qb, unsigned long long n)\n"
    "{\n"
    "    const unsigned long long np = JF_FIT_NP;\n"
    "    if (!jf_pol_more(P)) return 0;\n"
    "    unsigned long long m = 0;\n"
    "    for (unsigned long long k = 0; k < np; k++) {\n"
    "        v->D[k] = sqrt(v->diag[k]);\n"
    "        if (v->diag[k] > 0 && !v->held[k] && v->x[k] > v->lo[k] && v->x[k] < v->hi[k])\n"
    "            v->idx[m++] = (int)k;\n"
    "    }\n"
    "    if (m == 0) return 0;\n"
    "    jf_lsq_solve(R, qb, np, n, v->idx, m, v->M, v->V, v->eig, v->work, v->sF);\n"
    "    for (unsigned long long k = 0; k < np; k++) v->s[k] = 0.0;\n"
    "    for (unsigned long long q = 0; q < m; q++) v->s[v->idx[q]] = v->sF[q];\n"
    "    return jf_pol_propose(P, v->D, v->x, v->s, v->lo, v->hi, v->x_try);\n"
    "}\n"
    "/* The deciding thread's part of the finish, as lm.c's finish, after each pass (sums a, triangle\n"
    " * R, qb, ex, finite flag fin; n points): the first (started == 0) at x begins the polish (*ok\n"
    " * when that pass was finite), a later one at x_try is judged. A kept pass becomes the state\n"
    " * (x, v's unpacked sums, fo's R, qk, ek). 1 when the next polish step awaits its pass at\n"
    " * v->x_try (polishing only after a converged run). */\n"
    "static __device__ int jf_batch_fin_decide(jf_pol *P, jf_lmc *c, jf_lmc_views *v,\n"
    "        int started, const double *a, const double *R, const double *qb, const double *ex,\n"
    "        int fin, unsigned long long n, int *ok, double *qk, double *ek, double *fo)\n"
    "{\n"
    "    /* the normal equations' sums, the cost last (JF_FIT_NACC may add a rounding sum) */\n"
    "    const unsigned long long np = JF_FIT_NP, nacc = jf_lmc_nacc(JF_FIT_NP);\n"
    "    const int finite = fin && jf_lmc_all_finite(a, nacc);\n"
    "    int kept;\n"
    "    if (!started) {\n"
    "        *ok = finite;\n"
    "        if (!finite) return 0;\n"
    "        jf_pol_begin(P, np, c->max_nfev, c->nfev, 0.5 * a[nacc - 1], ex[1]);\n"
    "        kept = c->status >= JF_STEP_FTOL && c->status <= JF_STEP_GTOL ? 1 : 2;\n"
    "    } else {\n"
    "        kept = jf_pol_judge(P, finite, finite ? 0.5 * a[nacc - 1] : 0.0, finite ? ex[1] : 0.0);\n"
    "        if (kept)\n"
    "            for (unsigned long long k = 0; k < np; k++) v->x[k] = v->x_try[k];\n"
    "    }\n"
    "    if (kept) {\n"
    "        c->F = jf_lmc_unpack(v, np, a);\n"
    "        for (unsigned long long q = 0; q < np * np; q++) fo[JF_FIN_R + q] = R[q];\n"
    "        for (unsigned long long q = 0; q < np; q++) qk[q] = qb[q];\n"
    "        for (unsigned long long q = 0; q < 3; q++) ek[q] = ex[q];\n"
    "    }\n"
    "    return kept == 1 && jf_batch_polish_step(P, v, fo + JF_FIN_R, qk, n);\n"
    "}\n"
    "/* ... and leave the results at the final x: JtJ, g, cost and optimality in c and v, and fo's\n"
    " * head {1, steps kept, sum of (f - y)^2} beside its R; fo[0] = 0 (the host finishes) when the\n"
    " * pass at x was not finite. */\n"
    "static __device__ void jf_batch_fin_end(const jf_pol *P, int ok, jf_lmc *c, jf_lmc_views *v,\n"
    "                                        const double *ek, double *fo)\n"
    "{\n"
    "    const unsigned long long np = JF_FIT_NP;\n"
    "    fo[0] = 0.0;\n"
    "    if (!ok) return;\n"
    "    jf_lmc_active_set(v, np);\n"
    "    c->gnorm = jf_step_gnorm(v->g, v->diag, v->free_, c->F, np);\n"
    "    c->nfev = P->nfev;\n"
    "    fo[0] = 1.0;\n"
    "    fo[1] = (double)P->steps;\n"
    "    fo[2] = ek[2];\n"
    "}\n"
    "/* 1 for a converged fit with a zero column of J (A's diagonal) at its solution: fit.c's\n"
    " * run_fit decides whether that is JF_FIT_UNUSED_PARAM (the column was zero at the start\n"
    " * too), so the host reports it. */\n"
    "static __device__ int jf_batch_zero_column(const jf_lmc *c, const jf_lmc_views *v)\n"
    "{\n"
    "    const unsigned long long np = JF_FIT_NP;\n"
    "    int zero = 0;\n"
    "    for (unsigned long long k = 0; k < np; k++) zero |= !(v->A[k * np + k] > 0.0);\n"
    "    return zero && c->status >= JF_STEP_FTOL && c->status <= JF_STEP_GTOL;\n"
    "}\n"
    "/* A statistics record's end: x, the standard errors from cov (before the factor s2; infinite\n"
    " * for the unidentifiable, as jf_covar_finish), and its flag. */\n"
    "static __device__ void jf_batch_stats_tail(const jf_lmc_views *v, const int *unident,\n"
    "        const double *cov, double s2, double *st)\n"
    "{\n"
    "    const unsigned long long np = JF_FIT_NP;\n"
    "    for (unsigned long long k = 0; k < np; k++) {\n"
    "        st[7 + k] = v->x[k];\n"
    "        st[7 + np + k] = unident[k] ? (1.0 / 0.0) : sqrt(cov[k * np + k] * s2);\n"
    "    }\n"
    "    st[0] = 1.0;\n"
    "}\n"
    "/* The statistics of a fit the device finished (fo[0] = 1), computed as the host computes\n"
    " * them for a result (solver/fit.c's run_fit: the same calls in the same order), into its\n"
    " * statistics record st: {1, status, nfev, iterations, cost,\n"
    " * R^2, SSR, x, standard errors}; st[0] = 0 leaves the fit to the host. y: its n responses;\n"
    " * abs_sigma: the covariance is not scaled by the residual variance. The scratch is the workspace's\n"
    " * (the loop and the finish are over; jf_batch_end has read x, A and g). */\n"
    "static __device__ __noinline__ void jf_batch_stats(const jf_lmc *c, jf_lmc_views *v,\n"
    "        const double *fo, const double *__restrict__ y, unsigned long long n, int abs_sigma,\n"
    "        double *st)\n"
    "{\n"
    "    const unsigned long long np = JF_FIT_NP;\n"
    "    st[0] = 0.0;\n"
    "    if (fo == nullptr || fo[0] == 0.0) return;\n"
    "    double *cov = v->M;\n"
    "    int *unident = v->free_;\n"
    "    jf_lsq_covariance(fo + JF_FIN_R, np, n, v->idx, v->M0, v->Md, v->s, v->wF, cov, unident);\n"
    "    /* scipy's curve_fit: s^2 = 2 cost / dof */\n"
    "    const double s2 = abs_sigma ? 1.0 : 2.0 * c->F / (double)(n - np);\n"
    "    st[1] = (double)c->status;\n"
    "    st[2] = (double)c->nfev;\n"
    "    st[3] = (double)c->iterations;\n"
    "    st[4] = c->F;\n"
    "    st[5] = jf_lsq_r_squared(y, n, fo[2]); /* as fit.c's */\n"
    "    st[6] = 2.0 * c->F;\n"
    "    jf_batch_stats_tail(v, unident, cov, s2, st);\n"
    "}\n"
    "/* Sigma (f - y)^2 and Sigma (w (f - y))^2 at p over this thread's points begin + first, + step,\n"
    " * ... of [begin, end), as the host's residual sums (jf_problem_residual_sums) */\n"
    "static __device__ void jf_batch_plain_sums(const double *__restrict__ p,\n"
    "        const double *__restrict__ x, jf_index ldx, const double *__restrict__ y,\n"
    "        const double *__restrict__ w, jf_index begin, jf_index end, jf_index first,\n"
    "        jf_index step, double *e)\n"
    "{\n"
    "    double row[JF_FIT_NP], rw[4];\n"
    "    e[0] = e[1] = 0.0;\n"
    "    for (jf_index i = begin + first; i < end; i += step) {\n"
    "        jf_fit_row(p, x, ldx, y, w, i, row, rw);\n"
    "        const double d = rw[0] / rw[1];\n"
    "        e[0] += d * d;\n"
    "        e[1] += rw[0] * rw[0];\n"
    "    }\n"
    "}\n"
    "/* The statistics of a fit the device did not polish (a robust loss, or too many points: lm.c\n"
    " * polishes neither), as run_fit computes them for it: the covariance from the final J^T J\n"
    " * (covar.c's jf_covar_normal: Jacobi-scaled, its eigendecomposition here by lm_core.h's\n"
    " * Jacobi iteration where the host calls LAPACK's dsyevd, eigenvalues below m eps max\n"
    " * dropped), R^2 and SSR from the final point's sums e (jf_batch_plain_sums); the record as\n"
    " * jf_batch_stats'. */\n"
    "static __device__ __noinline__ void jf_batch_stats_normal(const jf_lmc *c, jf_lmc_views *v,\n"
    "        const double *e, const double *__restrict__ y, unsigned long long n, int abs_sigma,\n"
    "        double *st)\n"
    "{\n"
    "    const unsigned long long np = JF_FIT_NP;\n"
    "    double *cov = v->M, *S = v->M0, *V = v->Md, *Vt = v->V, *ev = v->eig, *cs = v->wF;\n"
    "    int *idx = v->idx, *unident = v->free_;\n"
    "    for (unsigned long long q = 0; q < np * np; q++) cov[q] = 0.0;\n"
    "    const unsigned long long m = jf_lsq_normal_scaled(v->A, np, idx, cs, S, unident);\n"
    "    if (m > 0) {\n"
    "        jf_lmc_jacobi(S, m, V, ev);\n"
    "        /* eigenvector j as row j, as jf_lsq_normal_assemble reads it */\n"
    "        for (unsigned long long a = 0; a < m; a++)\n"
    "            for (unsigned long long j = 0; j < m; j++) Vt[j * m + a] = V[a * m + j];\n"
    "        jf_lsq_normal_assemble(Vt, ev, m, idx, cs, np, cov, unident);\n"
    "    }\n"
    "    const double s2 = abs_sigma ? 1.0 : 2.0 * c->F / (double)(n - np);\n"
    "    st[1] = (double)c->status;\n"
    "    st[2] = (double)c->nfev;\n"
    "    st[3] = (double)c->iterations;\n"
    "    st[4] = c->F;\n"
    "    st[5] = jf_lsq_r_squared(y, n, e[0]); /* as fit.c's */\n"
    "    st[6] = e[1];\n"
    "    jf_batch_stats_tail(v, unident, cov, s2, st);\n"
    "}\n"
    "/* The finish of fit [begin, end) after its loop, by a warp (lanes 32: the warp evaluates each\n"
    " * pass, its sums to fo for lane 0, and the triangle; lane 0 decides) or by one thread alone\n"
    " * (lanes 1, lane 0: the thread kernel's, whose warp's lanes are other fits: no shuffles). */\n"
    "static __device__ void jf_batch_finish(const double *__restrict__ x, jf_index ldx,\n"
    "        const double *__restrict__ y, const double *__restrict__ w, jf_index begin,\n"
    "        jf_index end, unsigned int lane, unsigned int lanes, jf_lmc *c, jf_lmc_views *v,\n"
    "        double *fo)\n"
    "{\n"
    "    const unsigned long long n = (unsigned long long)(end - begin);\n"
    "    double R[JF_FIT_NP * JF_FIT_NP], qb[JF_FIT_NP], ex[3], qk[JF_FIT_NP], ek[3];\n"
    "    jf_pol P;\n"
    "    int ok = 0, started = 0, go = 1;\n"
    "    const double *p = v->x;\n"
    "    while (go) {\n"
    "        {\n"
    "            double a[JF_FIT_NACC];\n"
    "            jf_fit_sums(p, x, ldx, y, w, begin, end, lane, lanes, 0, 1.0, a);\n"
    "            for (unsigned int q = 0; q < JF_FIT_NACC; q++) {\n"
    "                const double t = lanes > 1 ? jf_warp_sum(a[q]) : a[q];\n"
    "                if (lane == 0) fo[JF_FIN_SUMS + q] = t;\n"
    "            }\n"
    "        }\n"
    "        const int fin = lanes > 1\n"
    "            ? jf_batch_triangle(p, x, ldx, y, w, begin, end, lane, 32, R, qb, ex)\n"
    "            : jf_batch_fold(p, x, ldx, y, w, begin, end, 0, 1, R, qb, ex);\n"
    "        if (lane == 0)\n"
    "            go = jf_batch_fin_decide(&P, c, v, started, fo + JF_FIN_SUMS, R, qb, ex, fin, n, &ok,\n"
    "                                     qk, ek, fo);\n"
    "        started = 1;\n"
    "        if (lanes > 1) {\n"
    "            go = __shfl_sync(0xffffffffu, go, 0);\n"
    "            __syncwarp(); /* lane 0's x_try is visible to the others */\n"
    "        }\n"
    "        p = v->x_try;\n"
    "    }\n"
    "    if (lane == 0) jf_batch_fin_end(&P, ok, c, v, ek, fo);\n"
    "    if (lanes > 1) __syncwarp();\n"
    "}\n"
    "/* Which statistics a fit gets (decided by the thread that ran its loop): 1 from its finish\n"
    " * record (jf_batch_stats), 2 from J^T J and a pass of residual sums (jf_batch_stats_normal),\n"
    " * 0 none (not finite at its start, or a zero column of J: the host reports it). */\n"
    "static __device__ int jf_batch_stats_path(const jf_lmc *c, const jf_lmc_views *v,\n"
    "        const double *fo)\n"
    "{\n"
    "    if (c->status == JF_LMC_NONFINITE || jf_batch_zero_column(c, v)) return 0;\n"
    "    return fo != nullptr && fo[0] != 0.0 ? 1 : 2;\n"
    "}\n"
    "/* Fit [begin, end) into its statistics record st, by a warp (lanes 32: lane 0 decides, the\n"
    " * warp sums) or by a thread (lanes 1, lane 0: the thread kernel's; no shuffles). */\n"
    "static __device__ __noinline__ void jf_batch_stats_fit(const jf_lmc *c, jf_lmc_views *v,\n"
    "        const double *fo, const double *__restrict__ x, jf_index ldx,\n"
    "        const double *__restrict__ y, const double *__restrict__ w, jf_index begin,\n"
    "        jf_index end, unsigned int lane, unsigned int lanes, int abs_sigma, double *st)\n"
    "{\n"
    "    const int mine = lane == 0 ? jf_batch_stats_path(c, v, fo) : 0;\n"
    "    const int path = lanes > 1 ? __shfl_sync(0xffffffffu, mine, 0) : mine;\n"
    "    const unsigned long long n = (unsigned long long)(end - begin);\n"
    "    if (path == 2) {\n"
    "        double e[2];\n"
    "        jf_batch_plain_sums(v->x, x, ldx, y, w, begin, end, lane, lanes, e);\n"
    "        if (lanes > 1) {\n"
    "            e[0] = jf_warp_sum(e[0]);\n"
    "            e[1] = jf_warp_sum(e[1]);\n"
    "        }\n"
    "        if (lane == 0) jf_batch_stats_normal(c, v, e, y + begin, n, abs_sigma, st);\n"
    "    } else if (lane == 0) {\n"
    "        if (path == 1) jf_batch_stats(c, v, fo, y + begin, n, abs_sigma, st);\n"
    "        else st[0] = 0.0;\n"
    "    }\n"
    "    if (lanes > 1) __syncwarp();\n"
    "}\n";

/* ... and the block's (after jf_batch_block_totals). */
static const char batch_finish_block[] =
    "/* The block's triangle for thread 0: its warps' (jf_batch_triangle) merged in warp order\n"
    " * through shared memory, a row at a time. */\n"
    "static __device__ int jf_batch_triangle_block(const double *__restrict__ p,\n"
    "        const double *__restrict__ x, jf_index ldx, const double *__restrict__ y,\n"
    "        const double *__restrict__ w, jf_index begin, jf_index end, double *R, double *qb,\n"
    "        double *ex)\n"
    "{\n"
    "    /* per warp: R, qb, ex, finite flag */\n"
    "    __shared__ double sh[(JF_BLOCK / 32u) * (JF_FIT_NP * JF_FIT_NP + JF_FIT_NP + 4u)];\n"
    "    const unsigned long long np = JF_FIT_NP, pack = JF_FIT_NP * JF_FIT_NP + JF_FIT_NP + 4u;\n"
    "    const unsigned int lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;\n"
    "    int fin = jf_batch_triangle(p, x, ldx, y, w, begin, end, threadIdx.x, blockDim.x, R, qb, ex);\n"
    "    if (lane == 0 && warp > 0) {\n"
    "        double *o = sh + warp * pack;\n"
    "        for (unsigned long long q = 0; q < np * np; q++) o[q] = R[q];\n"
    "        for (unsigned long long q = 0; q < np; q++) o[np * np + q] = qb[q];\n"
    "        for (unsigned long long q = 0; q < 3; q++) o[np * np + np + q] = ex[q];\n"
    "        o[np * np + np + 3] = (double)fin;\n"
    "    }\n"
    "    __syncthreads();\n"
    "    if (threadIdx.x == 0)\n"
    "        for (unsigned int k = 1; k < blockDim.x / 32u; k++) {\n"
    "            const double *o = sh + k * pack;\n"
    "            double row[JF_FIT_NP];\n"
    "            for (unsigned long long i = 0; i < np; i++) {\n"
    "                for (unsigned long long j = 0; j < np; j++) row[j] = o[i * np + j];\n"
    "                jf_lsq_add_row(R, qb, &ex[0], np, row, o[np * np + i]);\n"
    "            }\n"
    "            for (unsigned long long q = 0; q < 3; q++) ex[q] += o[np * np + np + q];\n"
    "            fin = fin && o[np * np + np + 3] != 0.0;\n"
    "        }\n"
    "    __syncthreads(); /* sh is free again */\n"
    "    return fin;\n"
    "}\n"
    "/* The finish of fit [begin, end) by a block after its loop: the block evaluates, thread 0\n"
    " * decides; tot (the kernel's shared totals) and flag (a shared int) carry its answers. */\n"
    "static __device__ void jf_batch_finish_block(const double *__restrict__ x, jf_index ldx,\n"
    "        const double *__restrict__ y, const double *__restrict__ w, jf_index begin,\n"
    "        jf_index end, jf_lmc *c, jf_lmc_views *v, double *fo, double *tot, int *flag)\n"
    "{\n"
    "    const unsigned long long n = (unsigned long long)(end - begin);\n"
    "    double R[JF_FIT_NP * JF_FIT_NP], qb[JF_FIT_NP], ex[3], qk[JF_FIT_NP], ek[3];\n"
    "    jf_pol P;\n"
    "    int ok = 0, started = 0, go = 1;\n"
    "    const double *p = v->x;\n"
    "    while (go) {\n"
    "        jf_batch_block_totals(p, x, ldx, y, w, begin, end, 0, 1.0, tot);\n"
    "        const int fin = jf_batch_triangle_block(p, x, ldx, y, w, begin, end, R, qb, ex);\n"
    "        if (threadIdx.x == 0)\n"
    "            *flag = jf_batch_fin_decide(&P, c, v, started, tot, R, qb, ex, fin, n, &ok, qk, ek, fo);\n"
    "        started = 1;\n"
    "        __syncthreads(); /* thread 0's decision and x_try are visible to the block */\n"
    "        go = *flag;\n"
    "        p = v->x_try;\n"
    "    }\n"
    "    if (threadIdx.x == 0) jf_batch_fin_end(&P, ok, c, v, ek, fo);\n"
    "    __syncthreads();\n"
    "}\n"
    "/* A block's fit (points 0 .. n - 1) into its statistics record st: thread 0 decides, the\n"
    " * block sums; tot and flag are the kernel's shared totals and int. */\n"
    "static __device__ __noinline__ void jf_batch_stats_block(const jf_lmc *c, jf_lmc_views *v,\n"
    "        const double *fo, const double *__restrict__ x, jf_index ldx,\n"
    "        const double *__restrict__ y, const double *__restrict__ w, jf_index n,\n"
    "        int abs_sigma, double *tot, int *flag, double *st)\n"
    "{\n"
    "    if (threadIdx.x == 0) *flag = jf_batch_stats_path(c, v, fo);\n"
    "    __syncthreads();\n"
    "    const int path = *flag;\n"
    "    if (path == 2) {\n"
    "        double e[2];\n"
    "        jf_batch_plain_sums(v->x, x, ldx, y, w, 0, n, threadIdx.x, blockDim.x, e);\n"
    "        jf_block_sums(e, 2u, tot);\n"
    "        if (threadIdx.x == 0)\n"
    "            jf_batch_stats_normal(c, v, tot, y, (unsigned long long)n, abs_sigma, st);\n"
    "    } else if (threadIdx.x == 0) {\n"
    "        if (path == 1) jf_batch_stats(c, v, fo, y, (unsigned long long)n, abs_sigma, st);\n"
    "        else st[0] = 0.0;\n"
    "    }\n"
    "    __syncthreads();\n"
    "}\n";

/* The kernels, after the model (jf_fit_sums, or for many parameters jf_fit_sums_tiled), step.h,
 * lm_core.h and jf_batch_views; a module holds the one a batch runs (jf_batch_cuda_source), as
 * NVRTC's time is the kernels' call trees. A model with register sums can have any: the
 * warp-per-fit kernel here, the thread's (batch_thread) or the block's (batch_block_totals, a
 * block reduction, then batch_finish_block and batch_block); one with tiled sums only the
 * block's, its totals from the tiles (batch_tiled). (Plain C decides, not the preprocessor:
 * the emulator wraps every kernel in the text.) */
static const char batch_warp[] =
    "/* one warp per fit */\n"
    "extern \"C\" __global__ void __launch_bounds__(32 * " "8" ")\n"
    "jf_batch_lm(JF_BATCH_KERNEL_ARGS)\n"
    "{\n"
    "    const unsigned int lane = threadIdx.x & 31u;\n"
    "    const unsigned int nwarps = (gridDim.x * blockDim.x) >> 5;\n"
    "    const unsigned int slot = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;\n"
    "    for (unsigned int f = slot; f < nfits; f += nwarps) {\n"
    "        jf_lmc *c = cs + slot;\n"
    "        jf_lmc_views v;\n"
    "        jf_batch_views(&v, c0, wss, iwss, slot);\n"
    "        /* fit f's points off[f] ..: x's row i - off[f] when every fit reads the same x (its\n"
    "         * base moved as an integer, not a pointer, which may not point before an array;\n"
    "         * one more register, where per-fit x, y and w pointers made ptxas spill here) */\n"
    "        const jf_index npts = off[f + 1] - off[f];\n"
    "        const double *xf = x_packed ? x\n"
    "            : (const double *)((unsigned long long)x - off[f] * sizeof(double));\n"
    "        if (lane == 0) jf_batch_begin(c, c0, &v, x0s + (unsigned long long)f * (JF_FIT_NP + c0->nheld), sh);\n"
    "        __syncwarp(); /* lane 0's start is visible to the others */\n"
    "        double a[JF_FIT_NACC];\n"
    "        const double *p = v.x;\n"
    "        int more = 1, started = 0;\n"
    "        while (more) {\n"
    "            jf_fit_sums(p, xf, ldx, y, w, off[f], off[f + 1], lane, 32, loss, f_scale, a);\n"
    "#pragma unroll\n"
    "            for (unsigned int q = 0; q < JF_FIT_NACC; q++) a[q] = jf_warp_sum(a[q]);\n"
    "            if (lane == 0) more = started ? jf_lmc_judge(c, &v, a) : jf_lmc_start(c, &v, a);\n"
    "            started = 1;\n"
    "            more = __shfl_sync(0xffffffffu, more, 0);\n"
    "            __syncwarp(); /* lane 0's x_try is visible to the others */\n"
    "            p = v.x_try;\n"
    "        }\n"
    "        /* the finish here too (linear loss, J small enough to materialize on the host); its\n"
    "         * record says 0 (the host finishes) where it does not run */\n"
    "        double *fo = fin != nullptr ? fin + (unsigned long long)f * jf_batch_fin_doubles(JF_FIT_NP) : nullptr;\n"
    "        if (fo != nullptr && c->status != JF_LMC_NONFINITE &&\n"
    "            (unsigned long long)npts * JF_FIT_NP <= fin_max)\n"
    "            jf_batch_finish(xf, ldx, y, w, off[f], off[f + 1], lane, 32, c, &v, fo);\n"
    "        else if (fo != nullptr && lane == 0)\n"
    "            fo[0] = 0.0;\n"
    "        if (lane == 0) jf_batch_end(c, &v, res + (unsigned long long)f * jf_batch_res_doubles(JF_FIT_NP));\n"
    "        if (stats != nullptr)\n"
    "            jf_batch_stats_fit(c, &v, fo, xf, ldx, y, w, off[f], off[f + 1], lane, 32, abs_sigma,\n"
    "                               stats + (unsigned long long)f * JF_BATCH_STATS(JF_FIT_NP));\n"
    "        __syncwarp(); /* the slot is free for the next fit */\n"
    "    }\n"
    "}\n";

/* The block's totals for the block-per-fit kernel with register sums (with tiled sums
 * batch_tiled defines them). */
static const char batch_block_totals[] =
    "/* the block's totals of one fit's points [begin, end) at p, in tot, for every thread */\n"
    "static __device__ void jf_batch_block_totals(const double *__restrict__ p,\n"
    "        const double *__restrict__ x, jf_index ldx, const double *__restrict__ y,\n"
    "        const double *__restrict__ w, jf_index begin, jf_index end, int loss, double f_scale,\n"
    "        double *tot)\n"
    "{\n"
    "    double a[JF_FIT_NACC];\n"
    "    jf_fit_sums(p, x, ldx, y, w, begin, end, threadIdx.x, blockDim.x, loss, f_scale, a);\n"
    "    jf_block_sums(a, JF_FIT_NACC, tot); /* warp shuffles, then warps in order */\n"
    "    __syncthreads();\n"
    "}\n";

/* A thread per fit (short fits, register sums). The fit's state and workspace are arrays in the
 * thread's local memory, sized by JF_BATCH_WS and JF_BATCH_IWS (jf_batch_cuda_source): the
 * hardware lays local memory out so that word k of a warp's 32 lanes is contiguous, so the 32
 * fits of a warp, each at the same point of the same code, reach their workspaces in coalesced
 * accesses — where the slots of global memory the warp and block kernels use lie a workspace
 * apart — and need no slot memory. No shuffles or barriers: a warp's lanes are different fits,
 * at different iterations. */
static const char batch_thread[] =
    "/* one thread per fit (128 per block: THREAD_BLOCK); the slot arguments (cs, wss, iwss) are\n"
    " * unused: local memory instead */\n"
    "extern \"C\" __global__ void __launch_bounds__(128)\n"
    "jf_batch_lm_thread(JF_BATCH_KERNEL_ARGS)\n"
    "{\n"
    "    (void)cs;\n"
    "    (void)wss;\n"
    "    (void)iwss;\n"
    "    const unsigned int nthreads = gridDim.x * blockDim.x;\n"
    "    jf_lmc cl;\n"
    "    double wsl[JF_BATCH_WS];\n"
    "    int iwsl[JF_BATCH_IWS];\n"
    "    for (unsigned int f = blockIdx.x * blockDim.x + threadIdx.x; f < nfits; f += nthreads) {\n"
    "        jf_lmc *c = &cl;\n"
    "        jf_lmc_views v;\n"
    "        jf_lmc_views_init(&v, wsl, iwsl, JF_FIT_NP, c0->nheld);\n"
    "        /* fit f's points off[f] ..: x's row i - off[f] when every fit reads the same x (as\n"
    "         * the warp kernel's) */\n"
    "        const jf_index npts = off[f + 1] - off[f];\n"
    "        const double *xf = x_packed ? x\n"
    "            : (const double *)((unsigned long long)x - off[f] * sizeof(double));\n"
    "        jf_batch_begin(c, c0, &v, x0s + (unsigned long long)f * (JF_FIT_NP + c0->nheld), sh);\n"
    "        double a[JF_FIT_NACC];\n"
    "        const double *p = v.x;\n"
    "        int more = 1, started = 0;\n"
    "        while (more) {\n"
    "            jf_fit_sums(p, xf, ldx, y, w, off[f], off[f + 1], 0, 1, loss, f_scale, a);\n"
    "            more = started ? jf_lmc_judge(c, &v, a) : jf_lmc_start(c, &v, a);\n"
    "            started = 1;\n"
    "            p = v.x_try;\n"
    "        }\n"
    "        double *fo = fin != nullptr ? fin + (unsigned long long)f * jf_batch_fin_doubles(JF_FIT_NP) : nullptr;\n"
    "        if (fo != nullptr && c->status != JF_LMC_NONFINITE &&\n"
    "            (unsigned long long)npts * JF_FIT_NP <= fin_max)\n"
    "            jf_batch_finish(xf, ldx, y, w, off[f], off[f + 1], 0, 1, c, &v, fo);\n"
    "        else if (fo != nullptr)\n"
    "            fo[0] = 0.0;\n"
    "        jf_batch_end(c, &v, res + (unsigned long long)f * jf_batch_res_doubles(JF_FIT_NP));\n"
    "        if (stats != nullptr)\n"
    "            jf_batch_stats_fit(c, &v, fo, xf, ldx, y, w, off[f], off[f + 1], 0, 1, abs_sigma,\n"
    "                               stats + (unsigned long long)f * JF_BATCH_STATS(JF_FIT_NP));\n"
    "    }\n"
    "}\n";

/* Many parameters: the tiles' totals, and no finish on the device (the kernel gets no fin). */
static const char batch_tiled[] =
    "#define jf_batch_block_totals jf_fit_sums_tiled\n"
    "static __device__ void jf_batch_finish_block(const double *x, jf_index ldx, const double *y,\n"
    "        const double *w, jf_index begin, jf_index end, jf_lmc *c, jf_lmc_views *v, double *fo,\n"
    "        double *tot, int *flag)\n"
    "{\n"
    "    (void)x; (void)ldx; (void)y; (void)w; (void)begin; (void)end; (void)c; (void)v;\n"
    "    (void)fo; (void)tot; (void)flag;\n"
    "}\n"
    "static __device__ void jf_batch_stats_block(const jf_lmc *c, jf_lmc_views *v,\n"
    "        const double *fo, const double *x, jf_index ldx, const double *y, const double *w,\n"
    "        jf_index n, int abs_sigma, double *tot, int *flag, double *st)\n"
    "{\n"
    "    (void)c; (void)v; (void)fo; (void)x; (void)ldx; (void)y; (void)w; (void)n;\n"
    "    (void)abs_sigma; (void)tot; (void)flag;\n"
    "    if (threadIdx.x == 0) st[0] = 0.0; /* no statistics on the device: the host's */\n"
    "}\n";

static const char batch_block[] =
    "\n/* ---- batched LM: one block per fit, for long fits and for many parameters ---- */\n"
    "extern \"C\" __global__ void __launch_bounds__(JF_BLOCK)\n"
    "jf_batch_lm_block(JF_BATCH_KERNEL_ARGS)\n"
    "{\n"
    "    __shared__ double tot[JF_FIT_NACC];\n"
    "    __shared__ int more_sh;\n"
    "    const unsigned int slot = blockIdx.x;\n"
    "    for (unsigned int f = blockIdx.x; f < nfits; f += gridDim.x) {\n"
    "        jf_lmc *c = cs + slot;\n"
    "        jf_lmc_views v;\n"
    "        jf_batch_views(&v, c0, wss, iwss, slot);\n"
    "        /* fit f's points 0 .. npts - 1, x's columns shared by every fit unless packed (the\n"
    "         * warp kernel moves only x's base: ptxas's register choices differ between the two,\n"
    "         * and each form is the one that spills least in its kernel) */\n"
    "        const jf_index npts = off[f + 1] - off[f];\n"
    "        const double *xf = x_packed ? x + off[f] : x;\n"
    "        const double *yf = y + off[f], *wf = w != nullptr ? w + off[f] : nullptr;\n"
    "        if (threadIdx.x == 0) jf_batch_begin(c, c0, &v, x0s + (unsigned long long)f * (c0->np + c0->nheld), sh);\n"
    "        __syncthreads(); /* thread 0's start is visible to the block */\n"
    "        const double *p = v.x;\n"
    "        int more = 1, started = 0;\n"
    "        while (more) {\n"
    "            jf_batch_block_totals(p, xf, ldx, yf, wf, 0, npts, loss, f_scale, tot);\n"
    "            if (threadIdx.x == 0) more_sh = started ? jf_lmc_judge(c, &v, tot) : jf_lmc_start(c, &v, tot);\n"
    "            started = 1;\n"
    "            __syncthreads(); /* thread 0's decision and x_try are visible to the block */\n"
    "            more = more_sh;\n"
    "            p = v.x_try;\n"
    "        }\n"
    "        __syncthreads(); /* the shared totals are free */\n"
    "        /* the finish here too (linear loss, J small enough to materialize on the host); its\n"
    "         * record says 0 (the host finishes) where it does not run */\n"
    "        double *fo = fin != nullptr ? fin + (unsigned long long)f * jf_batch_fin_doubles(c->np) : nullptr;\n"
    "        if (fo != nullptr && c->status != JF_LMC_NONFINITE &&\n"
    "            (unsigned long long)npts * c->np <= fin_max)\n"
    "            jf_batch_finish_block(xf, ldx, yf, wf, 0, npts, c, &v, fo, tot, &more_sh);\n"
    "        else if (fo != nullptr && threadIdx.x == 0)\n"
    "            fo[0] = 0.0;\n"
    "        if (threadIdx.x == 0) jf_batch_end(c, &v, res + (unsigned long long)f * jf_batch_res_doubles(c->np));\n"
    "        if (stats != nullptr)\n"
    "            jf_batch_stats_block(c, &v, fo, xf, ldx, yf, wf, npts, abs_sigma, tot, &more_sh,\n"
    "                                 stats + (unsigned long long)f * JF_BATCH_STATS(c->np));\n"
    "        __syncthreads(); /* the slot is free for the next fit */\n"
    "    }\n"
    "}\n";

/* How many fits run at once decides a batch's speed more than how fast a pass over one fit's
 * points is: the step logic between passes is one thread's serial, latency-bound work. The H200
 * (docs/PERFORMANCE.md, "GPU solver") ran 5x5-pixel fits with a warp each at 2.6e5 fits/s, no
 * more than 16 CPU cores, and 1000-point spectra with a block each 13x slower than those cores.
 * At the batch kernels' 128 registers a multiprocessor holds 512 threads: 512 fits with a thread
 * each, 16 with a warp each, 2 with a block each.
 *
 * Mean points per fit up to which each fit gets a thread of its own (jf_batch_lm_thread): one
 * thread then sums all the fit's points, 64 of them about the instructions of one step.
 * $JITFIT_GPU_BATCH_THREAD overrides it (points; 0: never). Not measured on a GPU. */
#define THREAD_PER_FIT_POINTS 64

/* Mean points per fit from which a block (JF_CUDA_BLOCK threads) runs each fit instead of a warp:
 * a warp would go round its fit's points 128 times or more per pass. 512 before the H200's
 * spectra (a warp would have gone round 32 times, a block held 8x fewer fits at once). Not
 * measured on a GPU since; $JITFIT_GPU_BATCH_BLOCK overrides it (points; 1 makes every batch use
 * blocks). */
#define BLOCK_PER_FIT_POINTS 4096

int jf_batch_cuda_supported(size_t np) { return jf_emit_cuda_batch_ok(np); }

int jf_batch_cuda_register_sums(size_t np) { return jf_emit_num_acc(np) <= JF_CUDA_REGISTER_SUMS; }
static int register_sums(size_t np) { return jf_batch_cuda_register_sums(np); }

jf_batch_kernel jf_batch_cuda_kernel(size_t np, size_t nfits, size_t total) {
    if (!register_sums(np)) return JF_BATCH_BLOCK;
    const char *e = getenv("JITFIT_GPU_BATCH_BLOCK");
    double from = e && *e ? strtod(e, NULL) : BLOCK_PER_FIT_POINTS;
    if ((double)total >= from * (double)nfits) return JF_BATCH_BLOCK;
    e = getenv("JITFIT_GPU_BATCH_THREAD");
    double upto = e && *e ? strtod(e, NULL) : THREAD_PER_FIT_POINTS;
    return (double)total <= upto * (double)nfits ? JF_BATCH_THREAD : JF_BATCH_WARP;
}

const char *jf_batch_cuda_kernel_name(jf_batch_kernel kind) {
    return kind == JF_BATCH_BLOCK ? "jf_batch_lm_block"
           : kind == JF_BATCH_THREAD ? "jf_batch_lm_thread" : "jf_batch_lm";
}

char *jf_batch_cuda_source(const struct jf_model *m, int loss, int single_precision,
                           jf_batch_kernel kind) {
    if (!register_sums(m->np)) kind = JF_BATCH_BLOCK;
    jf_emit_options eo = jf_emit_options_default(JF_EMIT_CUDA);
    eo.cuda_batch = 1;
    eo.cuda_loss = loss;
    eo.cuda_single = single_precision;
    eo.cuda_no_prefetch = jf_cuda_no_prefetch();
    char *model = jf_emit(m, &eo);
    if (!model) return NULL;
    jf_buf b = {0};
    jf_buf_puts(&b, model);
    free(model);
    jf_buf_puts(&b, jf_embed_step_h);
    jf_buf_puts(&b, jf_embed_lm_core_h);
    jf_buf_puts(&b, batch_views);
    if (register_sums(m->np)) {
        jf_buf_puts(&b, jf_embed_lsq_core_h);
        jf_buf_puts(&b, jf_embed_polish_core_h);
        jf_buf_puts(&b, batch_finish);
        if (kind == JF_BATCH_WARP) jf_buf_puts(&b, batch_warp);
        if (kind == JF_BATCH_THREAD) {
            /* the thread kernel's local workspace: its size is the model's */
            jf_buf_printf(&b, "#define JF_BATCH_WS %lluu\n#define JF_BATCH_IWS %lluu\n",
                          jf_lmc_ws_doubles(m->np, m->nheld), jf_lmc_ws_ints(m->np));
            jf_buf_puts(&b, batch_thread);
        }
        if (kind == JF_BATCH_BLOCK) {
            jf_buf_puts(&b, batch_block_totals);
            jf_buf_puts(&b, batch_finish_block);
        }
    } else {
        jf_buf_puts(&b, batch_tiled);
    }
    if (kind == JF_BATCH_BLOCK) jf_buf_puts(&b, batch_block);
    return jf_buf_take(&b);
}

/* Doubles of a fit's finish record on the device: its head (done, polish steps, Σ(f − y)²), R
 * (np×np) and the sums of the pass being judged (jf_batch_fin_doubles there). */
static size_t fin_doubles(size_t np, int single) {
    return 3 + np * np + jf_emit_cuda_fit_nsums(np, single);
}

/* Doubles of a fit's result record on the device (jf_batch_end there). */
static size_t res_doubles(size_t np) { return 5 + 2 * np + np * np; }

/* Blocks per multiprocessor the batch's grid may have. The kernel strides over the fits, so
 * beyond the blocks a GPU can hold at once (a few per multiprocessor at these register counts)
 * more blocks only mean more slots — a state and a workspace each — not more speed; a few
 * waves' worth keep the load balanced at the end. Not measured on a GPU. */
#define BATCH_BLOCKS_PER_SM 32

/* BATCH_BLOCKS_PER_SM, or $JITFIT_GPU_BATCH_BLOCKS_PER_SM (1 to 64): a grid of one or two
 * blocks per multiprocessor holds fewer fits at once, and the thread kernel's workspaces (local
 * memory, ≈2.7 KB a fit at 5 parameters: ≈180 MB for the 67 584 fits an H200 holds, more than
 * its 50 MB L2) may then stay in cache — a knob for measuring that. */
static size_t blocks_per_sm(void) {
    const char *e = getenv("JITFIT_GPU_BATCH_BLOCKS_PER_SM");
    long v = e && *e ? strtol(e, NULL, 10) : 0;
    return v >= 1 && v <= 64 ? (size_t)v : BATCH_BLOCKS_PER_SM;
}

/* Device memory of one launch's data and records (a chunk) beyond which a batch is split into
 * chunks that run one after another on two streams: one chunk's kernel runs while the next
 * one's data go up and the previous one's records come down, and a batch of any size needs
 * only two chunks' memory (10⁸ 5×5-pixel fits need ≈110 GB in one piece). A chunk this size
 * takes ≈10 ms to copy over PCIe 4/5. Not measured on a GPU; $JITFIT_GPU_BATCH_CHUNK (fits
 * per chunk) overrides it. */
#define BATCH_CHUNK_BYTES ((size_t)256 << 20)

/* What a batch needs on the device, per fit, per point and per launch's slots. */
typedef struct batch_sizes {
    size_t np, nh, nv, nres, nfin, nst, nws, niws; /* nh: held values after each fit's start */
    size_t per_fit, per_point; /* bytes */
    size_t fits_per_block, most_blocks;
    int x_packed, y_direct, weighted;
    jf_batch_kernel kind; /* what runs each fit */
} batch_sizes;

/* Bytes of the slots (states and workspaces) of a launch of nf fits. */
static size_t slot_bytes(const batch_sizes *z, size_t nf) {
    if (z->kind == JF_BATCH_THREAD) return 0; /* the thread kernel's are in local memory */
    size_t blocks = (nf + z->fits_per_block - 1) / z->fits_per_block;
    if (blocks > z->most_blocks) blocks = z->most_blocks;
    return blocks * z->fits_per_block *
           (sizeof(jf_lmc) + z->nws * sizeof(double) + z->niws * sizeof(int));
}

/* Bytes of a launch of nf fits with pts points: its data, records and slots. */
static size_t chunk_bytes(const batch_sizes *z, size_t nf, size_t pts) {
    return nf * z->per_fit + sizeof(unsigned long long) + pts * z->per_point + slot_bytes(z, nf);
}

/* The batch's chunks: fits [at[c], at[c + 1]) for c < *nchunks (at: nfits + 1 entries), each at
 * most `budget` bytes (chunk_bytes) and max_fits fits, at least one fit. The largest chunk's fits
 * and points in *cap_fits, *cap_pts. */
static size_t plan_chunks(const batch_sizes *z, const jf_batch_fit *fits, size_t nfits,
                          size_t budget, size_t max_fits, size_t *at, size_t *cap_fits,
                          size_t *cap_pts) {
    size_t nchunks = 0, f = 0;
    *cap_fits = *cap_pts = 0;
    while (f < nfits) {
        size_t nf = 1, pts = fits[f].n;
        while (f + nf < nfits && nf < max_fits &&
               chunk_bytes(z, nf + 1, pts + fits[f + nf].n) <= budget)
            pts += fits[f + nf++].n;
        at[nchunks++] = f;
        if (nf > *cap_fits) *cap_fits = nf;
        if (pts > *cap_pts) *cap_pts = pts;
        f += nf;
    }
    at[nchunks] = nfits;
    return nchunks;
}

/* The batch's chunks for `avail` bytes of device memory, `fixed` of them taken by what every
 * chunk shares: one launch when the whole batch is a chunk (at most BATCH_CHUNK_BYTES, or
 * chunk_fits ≥ nfits: whenever it fits), else chunks for two buffers, each within
 * BATCH_CHUNK_BYTES and half of the rest, of at most chunk_fits fits (0: no limit). Fills at,
 * *cf, *cp as plan_chunks; returns the chunks, and the bytes they need in *need (more than
 * avail when one fit's chunk is too much). */
static size_t plan_batch(const batch_sizes *z, const jf_batch_fit *fits, size_t nfits,
                         size_t total, size_t fixed, size_t avail, double chunk_fits, size_t *at,
                         size_t *cf, size_t *cp, size_t *need) {
    size_t whole = fixed + chunk_bytes(z, nfits, total), nchunks;
    int one = chunk_fits >= (double)nfits ||
              (chunk_fits < 1.0 && whole - fixed <= BATCH_CHUNK_BYTES);
    if (one && whole <= avail) {
        at[0] = 0;
        at[1] = nfits;
        *cf = nfits;
        *cp = total;
        *need = whole;
        return 1;
    }
    size_t max_fits = chunk_fits >= 1.0 && chunk_fits < (double)nfits ? (size_t)chunk_fits : nfits;
    /* a buffer holds the most fits of any chunk and the most points of any (maybe another):
     * shrink the chunks until two such buffers fit */
    size_t budget = avail > fixed ? (avail - fixed) / 2 : 0;
    if (budget > BATCH_CHUNK_BYTES) budget = BATCH_CHUNK_BYTES;
    for (;;) {
        nchunks = plan_chunks(z, fits, nfits, budget, max_fits, at, cf, cp);
        if (*cf == 1 || fixed + 2 * chunk_bytes(z, *cf, *cp) <= avail) break;
        budget -= budget / 8;
    }
    *need = fixed + (nchunks > 1 ? 2 : 1) * chunk_bytes(z, *cf, *cp);
    return nchunks;
}

/* The error of a batch whose smallest plan needs more than the usable device memory. */
static void batch_too_big(size_t need, size_t local, size_t avail, char *why, size_t n) {
    char of[96] = "";
    if (local)
        snprintf(of, sizeof of, " (%.1f MiB of it the kernel's local memory)",
                 (double)local / 1048576.0);
    snprintf(why, n, "the batch needs %.1f MiB of GPU memory%s, %.1f MiB are usable",
             (double)need / 1048576.0, of, (double)avail / 1048576.0);
}

/* One chunk's buffers on the device, its host staging (one block, page-locked when the batch is
 * pipelined, so that the copies overlap the other stream's kernel) and the stream it runs on. */
typedef struct batch_buf {
    jf_cuda_graph *q;
    jf_devptr x, y, w, off, x0, cs, ws, iws, res, fin, st;
    void *hmem; /* the staging below, in one block */
    int hmem_pinned;
    double *hx, *hy, *hw, *hx0, *hst, *hres, *hfin;
    unsigned long long *hoff;
    int busy;      /* a chunk is in flight on q */
    size_t f0, f1; /* that chunk: fits [f0, f1) */
} batch_buf;

static void batch_buf_free(batch_buf *b) {
    jf_devptr *dev[] = {&b->x,  &b->y,   &b->w,   &b->off, &b->x0, &b->cs,
                        &b->ws, &b->iws, &b->res, &b->fin, &b->st};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) jf_cuda_free(*dev[i]);
    if (b->hmem_pinned) jf_cuda_host_free(b->hmem);
    else free(b->hmem);
    jf_cuda_graph_free(b->q);
}

/* A batch being run: its sizes, shared device data and (one or two) chunk buffers. */
typedef struct batch_run {
    const jf_batch_fit *fits;
    batch_sizes z;
    jf_devptr x, c0, sh; /* x when every fit reads the same columns, else 0 */
    size_t ldx_same;
    void *fn;
    unsigned block_threads;
    int loss, abs_sigma;
    double f_scale;
    jf_batch_out *out;
    jf_batch_chunk_fn done;
    void *done_ctx;
    jf_batch_times *times;
    jf_pool *pool; /* packs a chunk's fits */
} batch_run;

/* Allocates buffer b for chunks of up to cf fits and cp points; pinned staging when pipelined. */
static int batch_buf_init(const batch_run *r, batch_buf *b, size_t cf, size_t cp, int pipelined,
                          char *why, size_t n) {
    const batch_sizes *z = &r->z;
    size_t nxd = z->x_packed ? z->nv * cp : 0, slots = slot_bytes(z, cf) /
        (sizeof(jf_lmc) + z->nws * sizeof(double) + z->niws * sizeof(int));
    int code = jf_cuda_graph_new(&b->q, NULL, why, n);
    if (code == JF_OK && nxd) code = jf_cuda_alloc(&b->x, nxd * sizeof(double), why, n);
    if (code == JF_OK) code = jf_cuda_alloc(&b->y, cp * sizeof(double), why, n);
    if (code == JF_OK && z->weighted) code = jf_cuda_alloc(&b->w, cp * sizeof(double), why, n);
    if (code == JF_OK) code = jf_cuda_alloc(&b->off, (cf + 1) * sizeof(unsigned long long), why, n);
    if (code == JF_OK) code = jf_cuda_alloc(&b->x0, cf * (z->np + z->nh) * sizeof(double), why, n);
    if (code == JF_OK && slots) code = jf_cuda_alloc(&b->cs, slots * sizeof(jf_lmc), why, n);
    if (code == JF_OK && slots) code = jf_cuda_alloc(&b->ws, slots * z->nws * sizeof(double), why, n);
    if (code == JF_OK && slots) code = jf_cuda_alloc(&b->iws, slots * z->niws * sizeof(int), why, n);
    if (code == JF_OK) code = jf_cuda_alloc(&b->res, cf * z->nres * sizeof(double), why, n);
    if (code == JF_OK && z->nfin) code = jf_cuda_alloc(&b->fin, cf * z->nfin * sizeof(double), why, n);
    if (code == JF_OK && z->nst) code = jf_cuda_alloc(&b->st, cf * z->nst * sizeof(double), why, n);
    if (code != JF_OK) return code;
    /* host staging: what is packed on the way up; the statistics records on the way down, or
     * (without them) the result and finish records */
    size_t up = nxd + (z->y_direct ? 0 : cp) + (z->weighted ? cp : 0) + cf * (z->np + z->nh) +
                cf + 1;
    size_t down = z->nst ? cf * z->nst : cf * (z->nres + z->nfin);
    size_t bytes = (up + down) * sizeof(double);
    if (pipelined && jf_cuda_host_alloc(&b->hmem, bytes, why, n) == JF_OK) b->hmem_pinned = 1;
    else b->hmem = malloc(bytes); /* page-locked memory may be scarce: slower copies, same results */
    if (!b->hmem) {
        snprintf(why, n, "out of memory");
        return JF_ERR_NOMEM;
    }
    double *h = b->hmem;
    b->hoff = (unsigned long long *)h; /* 8 bytes, as a double */
    h += cf + 1;
    b->hx0 = h;
    h += cf * (z->np + z->nh);
    b->hx = nxd ? h : NULL;
    h += nxd;
    b->hy = z->y_direct ? NULL : h;
    h += z->y_direct ? 0 : cp;
    b->hw = z->weighted ? h : NULL;
    h += z->weighted ? cp : 0;
    if (z->nst) {
        b->hst = h;
    } else {
        b->hres = h;
        b->hfin = z->nfin ? h + cf * z->nres : NULL;
    }
    return JF_OK;
}

/* Fits per task of a chunk's packing. */
#define PACK_TASK_FITS 4096

/* A chunk being packed: its fits, their points, b's staging. */
typedef struct pack_job {
    const batch_run *r;
    batch_buf *b;
    const jf_batch_fit *fits;
    size_t nf, pts;
} pack_job;

/* Packs fits [task·PACK_TASK_FITS, ...) of the chunk: their data at the offsets in b->hoff,
 * then each fit's start and its held values. */
static void pack_task(void *vctx, size_t task, int worker) {
    (void)worker;
    const pack_job *j = vctx;
    const batch_sizes *z = &j->r->z;
    size_t np = z->np, nh = z->nh, f0 = task * PACK_TASK_FITS;
    size_t f1 = f0 + PACK_TASK_FITS < j->nf ? f0 + PACK_TASK_FITS : j->nf;
    batch_buf *b = j->b;
    jf_batch_pack_range(j->fits, f0, f1, z->nv, j->pts, b->hx, b->hy, b->hw, b->hoff);
    for (size_t f = f0; f < f1; f++) {
        memcpy(b->hx0 + f * (np + nh), j->fits[f].x0, np * sizeof(double));
        if (nh) memcpy(b->hx0 + f * (np + nh) + np, j->fits[f].held, nh * sizeof(double));
    }
}

/* Packs fits [f0, f1) into b's staging (on the pool's threads: one thread packed 10⁷ 5×5 fits
 * in 0.5 s on the H200's host, a fifth of the batch), queues their copies up, the launch and
 * the copies of their records down on b's stream; returns without waiting. */
static int batch_submit(const batch_run *r, batch_buf *b, size_t f0, size_t f1, char *why,
                        size_t n) {
    const batch_sizes *z = &r->z;
    const jf_batch_fit *fits = r->fits + f0;
    size_t nf = f1 - f0, np = z->np, nh = z->nh, pts = jf_batch_offsets(fits, nf, b->hoff);
    pack_job job = {.r = r, .b = b, .fits = fits, .nf = nf, .pts = pts};
    jf_pool_run(r->pool, (nf + PACK_TASK_FITS - 1) / PACK_TASK_FITS, pack_task, &job);
    int code = JF_OK;
    if (b->hx) code = jf_cuda_graph_to_device(b->q, b->x, b->hx, z->nv * pts * sizeof(double), why, n);
    if (code == JF_OK)
        code = jf_cuda_graph_to_device(b->q, b->y, b->hy ? b->hy : fits[0].y,
                                       pts * sizeof(double), why, n);
    if (code == JF_OK && b->hw)
        code = jf_cuda_graph_to_device(b->q, b->w, b->hw, pts * sizeof(double), why, n);
    if (code == JF_OK)
        code = jf_cuda_graph_to_device(b->q, b->off, b->hoff, (nf + 1) * sizeof *b->hoff, why, n);
    if (code == JF_OK)
        code = jf_cuda_graph_to_device(b->q, b->x0, b->hx0, nf * (np + nh) * sizeof(double), why, n);
    if (code != JF_OK) return code;
    jf_devptr x = z->x_packed ? b->x : r->x;
    unsigned long long ldx = z->x_packed ? pts : r->ldx_same, fin_max = JF_LM_MATERIALIZE_MAX;
    int x_packed = z->x_packed, loss = r->loss, abs_sigma = r->abs_sigma;
    unsigned int nfu = (unsigned int)nf;
    double fs = r->f_scale;
    jf_devptr c0 = r->c0, sh = r->sh;
    void *args[] = {&x,   &ldx,  &b->y,   &b->w,   &b->off,   &x_packed, &nfu,
                    &loss, &fs,  &c0,     &b->x0,  &sh,       &b->cs,    &b->ws,
                    &b->iws, &b->res, &fin_max, &b->fin, &b->st, &abs_sigma};
    size_t blocks = (nf + z->fits_per_block - 1) / z->fits_per_block;
    if (blocks > z->most_blocks) blocks = z->most_blocks; /* the kernel strides over the rest */
    code = jf_cuda_stream_launch(b->q, r->fn, (unsigned)blocks, r->block_threads, args, why, n);
    /* the statistics records, or without them the records the host finishes from */
    if (code == JF_OK && z->nst)
        code = jf_cuda_graph_to_host(b->q, b->hst, b->st, nf * z->nst * sizeof(double), why, n);
    if (code == JF_OK && !z->nst)
        code = jf_cuda_graph_to_host(b->q, b->hres, b->res, nf * z->nres * sizeof(double), why, n);
    if (code == JF_OK && !z->nst && z->nfin)
        code = jf_cuda_graph_to_host(b->q, b->hfin, b->fin, nf * z->nfin * sizeof(double), why, n);
    b->busy = code == JF_OK;
    b->f0 = f0;
    b->f1 = f1;
    return code;
}

/* One fit's loop result from its records r (jf_batch_end's) and fo (the finish's, or NULL). */
static void out_from_records(jf_batch_out *o, size_t np, const double *r, const double *fo) {
    o->status = (int)r[0];
    o->nfev = (size_t)r[1];
    o->iterations = (size_t)r[2];
    o->cost = r[3];
    o->optimality = r[4];
    memcpy(o->x, r + 5, np * sizeof(double));
    memcpy(o->A, r + 5 + np, np * np * sizeof(double));
    memcpy(o->g, r + 5 + np + np * np, np * sizeof(double));
    o->finished = fo && fo[0] != 0.0;
    o->polish = o->finished ? (size_t)fo[1] : 0;
    o->ssr_plain = o->finished ? fo[2] : NAN;
    if (o->finished) memcpy(o->R, fo + 3, np * np * sizeof(double));
}

/* Waits for b's chunk and hands its results over: out[f] for every fit without a statistics
 * record (its records fetched now; the buffer is not reused before this returns), then the
 * chunk with its statistics records to the caller's callback. */
static int batch_collect(const batch_run *r, batch_buf *b, char *why, size_t n) {
    const batch_sizes *z = &r->z;
    size_t nf = b->f1 - b->f0, np = z->np;
    double tw = jf_clock_ms();
    int code = jf_cuda_graph_sync(b->q, why, n);
    r->times->wait += jf_clock_ms() - tw;
    b->busy = 0;
    if (code != JF_OK) return code;
    size_t left = nf;
    double *hres = b->hres, *hfin = b->hfin, *tmp = NULL, t0 = jf_clock_ms();
    const double *st = b->hst;
    if (z->nst) {
        left = 0;
        for (size_t f = 0; f < nf; f++) left += st[f * z->nst] == 0.0;
        if (left) { /* rare: a fit not finite at its start, or tiled sums */
            tmp = malloc(nf * (z->nres + z->nfin) * sizeof *tmp);
            if (!tmp) {
                snprintf(why, n, "out of memory");
                return JF_ERR_NOMEM;
            }
            hres = tmp;
            hfin = z->nfin ? tmp + nf * z->nres : NULL;
            code = jf_cuda_graph_to_host(b->q, hres, b->res, nf * z->nres * sizeof(double), why, n);
            if (code == JF_OK && hfin)
                code = jf_cuda_graph_to_host(b->q, hfin, b->fin, nf * z->nfin * sizeof(double), why, n);
            if (code == JF_OK) code = jf_cuda_graph_sync(b->q, why, n);
        }
    }
    for (size_t f = 0; code == JF_OK && left && f < nf; f++) {
        if (z->nst && st[f * z->nst] != 0.0) continue;
        out_from_records(&r->out[b->f0 + f], np, hres + f * z->nres,
                         hfin ? hfin + f * z->nfin : NULL);
    }
    free(tmp);
    if (code == JF_OK && r->done) r->done(r->done_ctx, b->f0, b->f1, z->nst ? st : NULL);
    r->times->rows += jf_clock_ms() - t0;
    return code;
}

int jf_batch_cuda_run(const struct jf_model *m, const jf_jit_options *jo, jf_loss loss,
                      double f_scale, size_t nfits, const jf_batch_fit *fits,
                      const jf_lm_config *cfg, size_t max_mem, jf_batch_out *out, int stats,
                      int abs_sigma, jf_batch_chunk_fn done, void *done_ctx, size_t *launches,
                      const char **per_fit, jf_batch_times *times, jf_pool *pool, char *why,
                      size_t n) {
    size_t np = m->np, nv = m->nv, total = 0, maxn = 0;
    const int single = jo ? jo->single_precision : 0;
    *launches = 0;
    memset(times, 0, sizeof *times);
    if (!jf_batch_cuda_supported(np)) {
        snprintf(why, n, "a GPU batch's per-fit sums of %zu parameters do not fit a block's shared "
                         "memory", np);
        return JF_ERR_UNAVAILABLE;
    }
    batch_sizes z = {.np = np, .nh = m->nheld, .nv = nv, .x_packed = 1, .y_direct = 1};
    int x_same = 1;
    for (size_t f = 0; f < nfits; f++) {
        total += fits[f].n;
        z.weighted |= fits[f].w != NULL;
        if (fits[f].n > maxn) maxn = fits[f].n;
        x_same &= fits[f].x == fits[0].x && fits[f].ldx == fits[0].ldx;
        if (f > 0) z.y_direct &= fits[f].y == fits[f - 1].y + fits[f - 1].n;
    }
    /* What goes up without packing: x's columns once when every fit reads the same ones (pixel
     * or channel coordinates: a fit's row i is x's row i), and y straight from the caller when
     * the fits' responses lie one after another in one array. */
    size_t ldx_same = x_same && nv ? fits[0].ldx : 0;
    z.x_packed = nv && !(x_same && ldx_same <= total);
    size_t nx_shared = nv && !z.x_packed ? (nv - 1) * ldx_same + maxn : 0; /* x's doubles */
    z.nws = jf_lmc_ws_doubles(np, z.nh);
    z.niws = jf_lmc_ws_ints(np);
    z.nres = res_doubles(np);
    /* the finish on the device: register sums (a warp or a block per fit), linear loss (as
     * lm.c's polish) */
    int regs = register_sums(np);
    z.nfin = regs && loss == JF_LOSS_LINEAR ? fin_doubles(np, single) : 0;
    z.nst = stats ? JF_BATCH_STATS(np) : 0;
    z.per_fit = (np + z.nh + z.nres + z.nfin + z.nst) * sizeof(double) + sizeof(unsigned long long);
    z.per_point = (1 + (size_t)z.weighted + (z.x_packed ? nv : 0)) * sizeof(double);
    /* a warp, a block (long fits) or a thread (short ones) per fit (decided for the whole
     * batch: how its chunks fall does not change a fit's sums); the grid, and with it the slots
     * (a state and a workspace each, reused by the fits a warp or block runs one after another) */
    jf_batch_kernel kind = z.kind = jf_batch_cuda_kernel(np, nfits, total);
    static const size_t fits_per_block[] = {WARPS_PER_BLOCK, 1, THREAD_BLOCK};
    static const char *const who[] = {"a warp", "a block", "a thread"};
    z.fits_per_block = fits_per_block[kind];
    *per_fit = who[kind];
    jf_cuda_gpu_facts gf;
    char fwhy[256];
    z.most_blocks = 65535;
    if (jf_cuda_gpu_facts_get(0, &gf, fwhy, sizeof fwhy) == JF_OK && gf.sm_count > 0)
        z.most_blocks = (size_t)gf.sm_count * blocks_per_sm();

    /* the plan: one launch, or chunks on two streams ($JITFIT_GPU_BATCH_CHUNK: fits per chunk;
     * as many as the batch's or more: one launch whenever the memory allows) */
    size_t fixed = (nx_shared + 3 * np) * sizeof(double) + sizeof(jf_lmc);
    size_t avail = jf_gpu_usable_memory(max_mem), cf, cp, need;
    const char *ce = getenv("JITFIT_GPU_BATCH_CHUNK");
    double chunk_fits = ce && *ce ? strtod(ce, NULL) : 0.0;
    size_t *at = malloc((nfits + 1) * sizeof *at);
    if (!at) {
        snprintf(why, n, "out of memory");
        return JF_ERR_NOMEM;
    }
    size_t nchunks = plan_batch(&z, fits, nfits, total, fixed, avail, chunk_fits, at, &cf, &cp, &need);
    if (need > avail) { /* a single fit is more than half of what is usable */
        batch_too_big(need, 0, avail, why, n);
        free(at);
        return JF_ERR_NOMEM;
    }
    size_t nbuf = nchunks > 1 ? 2 : 1;
    /* page-locked staging when pipelined: faster copies that overlap the other stream's
     * kernel, at the price of pinning it each call (unmeasured on a GPU either way;
     * $JITFIT_GPU_BATCH_PINNED=0 leaves the staging pageable, for that comparison) */
    const char *pe = getenv("JITFIT_GPU_BATCH_PINNED");
    int pin = !(pe && strcmp(pe, "0") == 0);

    char *src = jf_batch_cuda_source(m, (int)loss, single, kind);
    if (!src) {
        snprintf(why, n, "out of memory");
        free(at);
        return JF_ERR_NOMEM;
    }
    const char *names[1] = {jf_batch_cuda_kernel_name(kind)};
    void *fns[1] = {NULL};
    struct jf_cache_entry *held = NULL; /* keeps fns loaded until the last chunk is collected */
    double t0 = jf_clock_ms();
    int code = jf_cuda_module_get(src, names, 1, jo, fns, &held, NULL, why, n, NULL, 0);
    times->module = jf_clock_ms() - t0;
    free(src);
    if (code != JF_OK) {
        free(at);
        return code;
    }
    /* the kernel's local memory, which the driver reserves at the launch for every thread the
     * GPU can hold (a thread kernel's frame of ≈2.8 KB: ≈0.75 GB on an H200), is the chunks'
     * as much as their buffers */
    size_t local = jf_cuda_local_reserve(fns[0]);
    if (local) {
        fixed += local;
        nchunks = plan_batch(&z, fits, nfits, total, fixed, avail, chunk_fits, at, &cf, &cp, &need);
        nbuf = nchunks > 1 ? 2 : 1;
        if (need > avail) {
            batch_too_big(need, local, avail, why, n);
            free(at);
            jf_cuda_module_release(held);
            return JF_ERR_NOMEM;
        }
    }

    batch_run r = {.fits = fits, .z = z, .ldx_same = ldx_same, .loss = (int)loss,
                   .abs_sigma = abs_sigma, .f_scale = f_scale, .out = out, .done = done,
                   .done_ctx = done_ctx, .times = times, .pool = pool};
    t0 = jf_clock_ms();
    r.fn = fns[0];
    static const unsigned block_threads[] = {32 * WARPS_PER_BLOCK, JF_CUDA_BLOCK, THREAD_BLOCK};
    r.block_threads = block_threads[kind];
    batch_buf bufs[2];
    memset(bufs, 0, sizeof bufs);
    /* what every chunk shares: the settings, bounds and scales (the template state lays them
     * out), and x when every fit reads the same columns */
    double *tws = calloc(z.nws, sizeof *tws), *hsh = malloc(3 * np * sizeof *hsh);
    int *tiws = calloc(z.niws, sizeof *tiws);
    jf_lmc c0;
    if (!tws || !tiws || !hsh) {
        snprintf(why, n, "out of memory");
        code = JF_ERR_NOMEM;
        goto done;
    }
    jf_lmc_setup(&c0, tws, tiws, np, z.nh, fits[0].held, cfg, fits[0].x0);
    /* fp32 sums end with the cost's rounding sum (jf_emit_cuda_fit_nsums) */
    if (jf_emit_cuda_fit_nsums(np, single) > jf_emit_num_acc(np)) c0.noise_eps = JF_LMC_NOISE_EPS;
    {
        jf_lmc_views tv;
        jf_lmc_views_init(&tv, tws, tiws, np, z.nh);
        memcpy(hsh, tv.lo, np * sizeof *hsh);
        memcpy(hsh + np, tv.hi, np * sizeof *hsh);
        memcpy(hsh + 2 * np, tv.xs, np * sizeof *hsh);
    }
    /* the device memory; where the GPU refuses what it said was free (other work took it),
     * smaller chunks, down to one fit's, before the batch goes to the CPU */
    for (;;) {
        for (size_t k = 0; code == JF_OK && k < nbuf; k++)
            code = batch_buf_init(&r, &bufs[k], cf, cp, nbuf > 1 && pin, why, n);
        if (code == JF_OK && nx_shared) code = jf_cuda_alloc(&r.x, nx_shared * sizeof(double), why, n);
        if (code == JF_OK) code = jf_cuda_alloc(&r.c0, sizeof c0, why, n);
        if (code == JF_OK) code = jf_cuda_alloc(&r.sh, 3 * np * sizeof(double), why, n);
        if (code != JF_ERR_NOMEM || !strstr(why, "device memory")) break;
        for (size_t k = 0; k < nbuf; k++) batch_buf_free(&bufs[k]);
        memset(bufs, 0, sizeof bufs);
        jf_cuda_free(r.x);
        jf_cuda_free(r.c0);
        jf_cuda_free(r.sh);
        r.x = r.c0 = r.sh = 0;
        if (cf == 1) {
            char refused[200];
            snprintf(refused, sizeof refused, "%s", why);
            snprintf(why, n, "not enough GPU memory: the GPU refused even chunks of one fit "
                     "(%zu bytes): %s", need, refused);
            goto done;
        }
        nchunks = plan_batch(&z, fits, nfits, total, fixed, need / 2, 0.0, at, &cf, &cp, &need);
        nbuf = nchunks > 1 ? 2 : 1;
        code = JF_OK;
    }
    times->memory = jf_clock_ms() - t0;
    /* the shared data go up on the first stream, before its first chunk; the second stream
     * waits for them there (no host synchronization) */
    if (code == JF_OK && nx_shared)
        code = jf_cuda_graph_to_device(bufs[0].q, r.x, fits[0].x, nx_shared * sizeof(double), why, n);
    if (code == JF_OK) code = jf_cuda_graph_to_device(bufs[0].q, r.c0, &c0, sizeof c0, why, n);
    if (code == JF_OK) code = jf_cuda_graph_to_device(bufs[0].q, r.sh, hsh, 3 * np * sizeof(double), why, n);
    if (code == JF_OK && nbuf > 1) code = jf_cuda_graph_mark(bufs[0].q, 0, why, n);
    if (code == JF_OK && nbuf > 1) code = jf_cuda_graph_wait_mark(bufs[1].q, bufs[0].q, 0, why, n);
    /* the pipeline: chunk k on buffer k mod 2, once that buffer's previous chunk is collected */
    for (size_t k = 0; code == JF_OK && k < nchunks; k++) {
        batch_buf *b = &bufs[k % nbuf];
        if (b->busy) code = batch_collect(&r, b, why, n);
        double ts = jf_clock_ms();
        if (code == JF_OK) code = batch_submit(&r, b, at[k], at[k + 1], why, n);
        times->submit += jf_clock_ms() - ts;
        if (code == JF_OK) ++*launches;
    }
    for (size_t k = nchunks; code == JF_OK && k < nchunks + nbuf; k++)
        if (bufs[k % nbuf].busy) code = batch_collect(&r, &bufs[k % nbuf], why, n);
done:
    /* an error may leave copies or a chunk in flight: wait before freeing what they use */
    for (size_t k = 0; k < nbuf; k++) {
        char ignore[64];
        if (bufs[k].q) jf_cuda_graph_sync(bufs[k].q, ignore, sizeof ignore);
        batch_buf_free(&bufs[k]);
    }
    jf_cuda_free(r.x);
    jf_cuda_free(r.c0);
    jf_cuda_free(r.sh);
    free(tws);
    free(tiws);
    free(hsh);
    free(at);
    jf_cuda_module_release(held);
    return code;
}
