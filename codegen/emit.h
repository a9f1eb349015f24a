/* Code generation: from a compiled model to C or CUDA C source for its three kernel flavours.
 *
 * Place in the pipeline: model (DAG with f and every ∂f/∂p_k) → schedule (codegen/schedule.c:
 * {f} for `residual`, {f, df_0..df_np-1} for `jacobian_row` and `normal_eq`, so subexpressions
 * shared by f and its partials are computed once) → this module → runtime/jit_cc.c (C) or
 * runtime/jit_nvrtc.c (CUDA). The source starts with the text of codegen/prelude.h and
 * codegen/loss.h (embedded in the library), so generated code and the interpreter share every
 * helper. No user text reaches the source: parameters are p[k] (loaded into locals p<k>),
 * variables x[j*ldx+i] (locals x<j>), temporaries t<n>, and constants are exact hex floats
 * formatted here without the C library (the C locale's radix character cannot leak in).
 *
 * The generated C ABI (exported, C linkage; names get the optional suffix):
 *   void jf_residual(const double *p, const double *x, size_t ldx, const double *y,
 *                    const double *w, size_t begin, size_t end, double *r);
 *   void jf_jacobian_row(same, double *r, double *J);           J[(i-begin)*np + k]
 *   void jf_normal_eq(same up to end, int loss, double f_scale, double *acc);
 *                                 (absent with jf_emit_options.no_normal_eq)
 *   const int jf_abi_version, jf_num_params, jf_num_vars;       checked after dlopen
 * with the meaning documented in runtime/kernels.h (r = w·(f - y), y/w may be NULL, acc layout).
 * The generated CUDA ABI (extern "C" __global__, grid-stride loops, indices as unsigned long
 * long; every pointer is a device pointer, p included, so a device-resident solver can use it):
 *   jf_residual(p, x, ldx, y, w, begin, end, r)
 *   jf_jacobian_row(p, x, ldx, y, w, begin, end, r, J, ldj)  J column-major: J[k*ldj + (i-begin)]
 *   jf_normal_eq(p, x, ldx, y, w, begin, end, loss, f_scale, partial)
 *       launched with JF_CUDA_BLOCK threads per block; block b writes its sums (acc layout,
 *       jf_emit_num_acc(np) values) to partial[b*nacc ..]
 *   jf_reduce_blocks(partial, nblocks, acc)  acc[q] = Σ_b partial[b*nacc + q]
 *       launched with JF_CUDA_BLOCK threads per block, best one block per sum (grid nacc; any
 *       grid is right): thread t adds rows b ≡ t (mod JF_CUDA_BLOCK) ascending, then the warp
 *       and the block reduce in a fixed order
 */
#ifndef JF_EMIT_H
#define JF_EMIT_H

#include <stddef.h>

#include "model.h"
#include "schedule.h"

/* Version of the generated ABI (exported as jf_abi_version and part of every cache key). */
#define JF_EMIT_ABI_VERSION 1

/* Threads per block the CUDA normal_eq kernel is written for (its reduction assumes it). */
#define JF_CUDA_BLOCK 256
/* Up to this many sums (np <= 8) normal_eq keeps them in registers per thread; beyond, it
 * works on shared-memory tiles (emit_cuda.c). The batched solver needs the register form. */
#define JF_CUDA_REGISTER_SUMS 45

/* Which language to write. */
typedef enum jf_emit_target {
    JF_EMIT_C = 0,   /* C11 for the system compiler */
    JF_EMIT_CUDA = 1 /* CUDA C++ for NVRTC */
} jf_emit_target;

/* Shape of the C normal_eq loop (CUDA has one shape). All shapes compute the same sums; they
 * differ in summation order (so in rounding) and in what the compiler can vectorize. See
 * docs/PERFORMANCE.md for the measurements. */
typedef enum jf_neq_shape {
    JF_NEQ_FUSED = 0,  /* one loop over points, accumulating into scalar locals */
    JF_NEQ_SIMD = 1,   /* the fused loop under `#pragma omp simd reduction(+: ...)` */
    JF_NEQ_BLOCKED = 2 /* blocks of points: f and J of a block into small arrays (scalar), then
                          an accumulation loop over the block into per-lane sums (vectorizes):
                          10-20 % faster than FUSED up to ~12 parameters, twice as slow at 20,
                          and 2.5x the compile time, hence not the default */
} jf_neq_shape;

/* Vector math for the C kernels (opt-in, jf_jit_options.vector_math): the point loops run on
 * blocks of lanes with GCC vector types and call SLEEF's vectorized transcendentals (≤ 1 ulp,
 * "u10"; not bit-identical to libm, hence not the default). The ISA fixes the lane count and
 * the SLEEF entry points, so the source (and the cache key) differs per ISA; the caller checks
 * that the CPU supports it and passes the matching flags (runtime/kernels.c). */
typedef enum jf_vec_isa {
    JF_VEC_NONE = 0,  /* scalar libm: the exact default */
    JF_VEC_AVX2 = 1,  /* 4 lanes, Sleef_*d4_*avx2, compiled with -mavx2 -mfma */
    JF_VEC_AVX512 = 2 /* 8 lanes, Sleef_*d8_*avx512f, compiled with -mavx512f */
} jf_vec_isa;

/* Options of jf_emit. */
typedef struct jf_emit_options {
    jf_emit_target target;  /* C or CUDA */
    jf_neq_shape neq_shape; /* C normal_eq loop shape (default JF_NEQ_FUSED) */
    int block;              /* points per block for JF_NEQ_BLOCKED (default 8) */
    int with_prelude;       /* 1: paste prelude.h and loss.h (default); 0: a comment naming them
                               instead (listings, golden files; such source does not compile) */
    const char *suffix;     /* appended to every exported name (NULL or "": none), so several
                               models can share one translation unit; [A-Za-z0-9_] only */
    int cuda_loss;          /* CUDA normal_eq: -1 (default) handles every loss at run time; a
                               jf_loss value builds it for that loss alone (its `loss` argument is
                               then ignored): the linear kernel carries no robust-loss code, which
                               cuts NVRTC's compile time by a quarter (docs/PERFORMANCE.md) */
    jf_vec_isa vec_isa;     /* C: vector math for this ISA (default JF_VEC_NONE: exact) */
    int cuda_batch;         /* CUDA: 1 also emits the batched solver's pass (solver/batch_cuda.c):
                               for np <= 8 the device function jf_fit_sums<suffix> (the sums of
                               one thread's points of one fit, in registers), else
                               jf_fit_sums_tiled<suffix> (one block's tiles of one fit) */
    int cuda_single;        /* CUDA: 1 evaluates the model (f and its gradient) in fp32 and converts
                               r and J to fp64 before the loss and the sums (default 0: fp64) */
    int cuda_min_blocks;    /* CUDA: > 0 asks ptxas to keep that many blocks of jf_normal_eq per
                               multiprocessor (__launch_bounds__'s second argument: fewer
                               registers, perhaps spills; default 0: ptxas's choice, 94 registers
                               and 2 blocks for the damped sine on sm_90) */
    int cuda_no_prefetch;   /* CUDA: 1 loads each point's x and y at the top of its own iteration
                               in normal_eq and jf_fit_sums, not one iteration ahead (default 0;
                               $JITFIT_GPU_PREFETCH=0, an experiment's knob: unmeasured) */
    int no_normal_eq;       /* 1 leaves jf_normal_eq (and for CUDA jf_reduce_blocks) out (default
                               0). Its sums are O(np²) code; above JF_LARGE_P runtime/kernels.c
                               forms them from jacobian_row blocks with BLAS instead, and above
                               JF_GPU_LARGE_P the GPU solver with cuBLAS, so the source stays
                               O(np) (NVRTC: 319 instead of 626 ms for 60 parameters) */
} jf_emit_options;

/* Defaults for a target. */
JF_INTERNAL jf_emit_options jf_emit_options_default(jf_emit_target target);

/* The source of all kernels of m. The caller frees it with free(). NULL when out of memory or
 * when m has no built f/df (or the suffix has other characters). */
JF_INTERNAL char *jf_emit(const struct jf_model *m, const jf_emit_options *opts);

/* The source of several models in one unit: the prelude once, then each model's kernels named
 * with suffixes[i]. The caller frees it with free(); NULL when out of memory. */
JF_INTERNAL char *jf_emit_many(const struct jf_model *const *models, const char *const *suffixes,
                               size_t count, const jf_emit_options *opts);

/* Number of values normal_eq accumulates for np parameters: np(np+1)/2 + np + 1. */
JF_INTERNAL size_t jf_emit_num_acc(size_t np);
/* Number of sums normal_eq and the batch kernels' jf_fit_sums (JF_FIT_NACC) of np parameters
 * write: the normal equations', and in single precision with register sums one more, the cost's
 * rounding sum the loop reads (solver/lm_core.h, JF_LMC_NOISE_EPS). */
JF_INTERNAL size_t jf_emit_cuda_fit_nsums(size_t np, int single);
/* 1 when jf_fit_sums_tiled of np parameters fits a block's static shared memory (tiles of at
 * least 32 points beside the fit's totals). */
JF_INTERNAL int jf_emit_cuda_batch_tiled_ok(size_t np);
/* 1 when a model of np parameters can be batched on the GPU at all (register or tiled sums). */
JF_INTERNAL int jf_emit_cuda_batch_ok(size_t np);

/* ---- shared by emit_c.c and emit_cuda.c ---------------------------------------------------- */

/* A growable string. Errors are sticky: after a failed allocation every append is a no-op and
 * nomem stays set, so emitters check once at the end. */
typedef struct jf_buf {
    char *s;    /* the text, NUL-terminated (NULL while empty) */
    size_t len; /* its length */
    size_t cap; /* allocated bytes */
    int nomem;  /* 1 once an allocation failed */
    const char *real; /* type of the model's values in emitted loads and statements (NULL:
                         double; "float" for the CUDA single-precision kernels, which also
                         casts constants and loaded values to it) */
    int sincos; /* 1: sin(a) and cos(a) of one operand are one sincos call in the emitted
                   statements (CUDA: libdevice then reduces a's range once, not twice) */
} jf_buf;

JF_INTERNAL void jf_buf_puts(jf_buf *b, const char *s);
JF_INTERNAL void jf_buf_printf(jf_buf *b, const char *fmt, ...) JF_PRINTF(2, 3);
/* Appends v as an exact C99/C++17 hex float literal ("0x1.8p+1", "(-0x1p-3)", "0.0", "(-0.0)");
 * infinities and NaN as "(1.0/0.0)", "(-1.0/0.0)", "(0.0/0.0)", valid in C and CUDA alike.
 * Formatted digit by digit, independent of any locale. */
JF_INTERNAL void jf_buf_double(jf_buf *b, double v);
/* Takes the text (caller frees); the buffer is left empty. NULL after an allocation failure. */
JF_INTERNAL char *jf_buf_take(jf_buf *b);

/* A model prepared for emission: its two schedules. */
typedef struct jf_emit_model {
    const struct jf_model *m; /* the model (not owned) */
    jf_schedule *sf;          /* schedule of {f} */
    jf_schedule *sall;        /* schedule of {f, df_0 .. df_np-1} */
    const char *suffix;       /* name suffix ("" for none) */
} jf_emit_model;

/* Builds both schedules. JF_OK, JF_ERR_NOMEM, or JF_ERR_ARG when m is not fully built. */
JF_INTERNAL int jf_emit_model_init(jf_emit_model *em, const struct jf_model *m, const char *suffix);
JF_INTERNAL void jf_emit_model_free(jf_emit_model *em);

/* The value of schedule entry pos as an operand: a literal, p<k>, x<j> or t<pos>. */
JF_INTERNAL void jf_emit_operand(jf_buf *b, const jf_schedule *s, size_t pos);
/* `const double p<k> = p[k];` for every parameter s uses. */
JF_INTERNAL void jf_emit_load_params(jf_buf *b, const jf_schedule *s, const char *indent);
/* `const double x<j> = x[j * ldx + i];` for every variable s uses. */
JF_INTERNAL void jf_emit_load_vars(jf_buf *b, const jf_schedule *s, const char *indent);
/* The position of cos(a) for the sin(a) at pos (or of sin(a) for a cos(a)), or s->n if s has
 * none. */
JF_INTERNAL size_t jf_emit_sincos_partner(const jf_schedule *s, size_t pos);
/* One `const double t<n> = ...;` per operation of s, in schedule order (with b->sincos, the
 * first of a sin/cos pair of one operand also declares and fills both: `sc<n>s`, `sc<n>c`). */
JF_INTERNAL void jf_emit_statements(jf_buf *b, const jf_schedule *s, const char *indent);
/* The prelude.h and loss.h texts (or the comment replacing them), then a newline. */
JF_INTERNAL void jf_emit_prelude(jf_buf *b, const jf_emit_options *o);

/* The vector-math support code of the C kernels for o->vec_isa (nothing for JF_VEC_NONE):
 * lane type, SLEEF declarations, helpers. Appended by jf_emit_prelude (emit_c.c). */
JF_INTERNAL void jf_emit_c_vec_prelude(jf_buf *b, const jf_emit_options *o);

/* Per-target model writers (emit_c.c, emit_cuda.c): append em's kernels to b. */
JF_INTERNAL void jf_emit_c_model(jf_buf *b, const jf_emit_model *em, const jf_emit_options *o);
JF_INTERNAL void jf_emit_cuda_model(jf_buf *b, const jf_emit_model *em, const jf_emit_options *o);

#endif
