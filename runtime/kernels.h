/* Compiled kernels of one model, whichever backend produced them.
 *
 * This is the seam between code generation/JIT and the solvers: a solver asks for the kernels
 * of a model on a backend and calls the three flavours through this interface; it never knows
 * whether they came from the system C compiler (dlopen'ed .so, possibly from the disk cache),
 * or are the reference interpreter standing in (no compiler available). The CUDA backend has
 * its own device-side entry points (runtime/jit_nvrtc.h) because its kernels take device
 * pointers; it shares the generated source and the cache.
 *
 * Conventions for all flavours (they are also the ABI of the generated C code, see emit_c.c):
 * - x is column-major: variable j of point i is x[j*ldx + i]; y[i] is the response (NULL: 0);
 *   w[i] multiplies the residual (NULL: 1; sigma becomes w = 1/sigma).
 * - The residual is r_i = w_i * (f(x_i; p) - y_i), the sign scipy uses; J = ∂r/∂p.
 * - Ranges are [begin, end) in point numbers; outputs for a range start at index 0.
 */
#ifndef JF_KERNELS_H
#define JF_KERNELS_H

#include <stddef.h>

#include "../codegen/model.h"

/* jf_backend, jf_cache_result and jf_loss are public (include/jitfit.h). */

/* Data passed to the CPU kernels (see conventions above). */
typedef struct jf_data_view {
    const double *x; /* nvars columns of ldx points each (may be NULL when nvars == 0) */
    size_t ldx;      /* leading dimension of x (>= number of points used) */
    const double *y; /* response, or NULL for 0 */
    const double *w; /* residual multipliers, or NULL for 1 */
} jf_data_view;

/* A loaded set of kernels for one model on one CPU-side backend. */
typedef struct jf_kernels jf_kernels;

/* JIT options that affect the generated code or the compiler invocation (all enter the key). */
typedef struct jf_jit_options {
    const char *cc;        /* compiler command; NULL: $JITFIT_CC, else "cc" */
    const char *cflags;    /* extra flags appended to the defaults; NULL: none */
    int no_cache;          /* 1: do not read or write the disk cache (also JITFIT_NO_CACHE=1) */
    const char *cache_dir; /* NULL: $JITFIT_CACHE_DIR, $XDG_CACHE_HOME/jitfit, ~/.cache/jitfit */
    int vector_math;       /* 1: let the C backend use SLEEF's vectorized transcendentals (≤ 1 ulp
                              each, not bit-identical to the interpreter); 0 (default): exact.
                              Needs AVX2+FMA or AVX-512F (checked at run time; the widest one is
                              used, at most $JITFIT_VECTOR_ISA = avx2 | avx512 when set) and
                              libsleef.so.3; without them the exact kernels are used, with a
                              one-line warning */
    int single_precision;  /* CUDA: evaluate the model in fp32 (jf_emit_options.cuda_single) */
    int cuda_no_normal_eq; /* CUDA: 1 builds the module without normal_eq and reduce_blocks (the
                              GPU solver's many-parameter path forms the sums with cuBLAS);
                              jf_cuda_kernels_function then returns NULL for them */
    int large_p;           /* normal_eq is formed from jacobian_row blocks with BLAS when the model
                              has more than large_p parameters (and the generated C then has no
                              normal_eq: O(np) source instead of O(np²)); 0 (default):
                              $JITFIT_LARGE_P when set, else JF_LARGE_P; negative: always.
                              A large value forces the unrolled kernel (tests, benchmarks) */
} jf_jit_options;

/* Above this many parameters normal_eq is chunked jacobian_row + dsyrk/dgemv: the unrolled
 * kernel's compile time grows as np² and its pass stops being faster (measurements in
 * docs/PERFORMANCE.md, "Many parameters (CPU)"). */
#define JF_LARGE_P 16
/* 1 when jf_kernels_get builds a model of np parameters without normal_eq (more than
 * $JITFIT_LARGE_P, else JF_LARGE_P; what jf_jit_options.large_p = 0 means). */
JF_INTERNAL int jf_kernels_large_p(size_t np);

/* Kernels of model m on backend b (JF_BACKEND_C or JF_BACKEND_INTERP). For JF_BACKEND_C, a
 * compiler failure or absence falls back to the interpreter: *out is then an interpreter set and
 * *warning (if not NULL) receives a one-line explanation (caller frees with free()).
 * The kernels reference m, which must outlive them. Caller frees *out with jf_kernels_free. */
JF_INTERNAL int jf_kernels_get(const struct jf_model *m, jf_backend b, const jf_jit_options *opts,
                               jf_kernels **out, char **warning);
/* Appends a one-line warning msg to the buffer w of n bytes, after "; " when w is not empty;
 * cut to fit (a long warning is still worth its first part). */
JF_INTERNAL void jf_warning_append(char *w, size_t n, const char *msg);

/* Releases the kernels and their reference to the compiled module, which stays loaded for reuse
 * while it is among the most recently used idle modules (cache.h, "in memory"); accepts NULL. */
JF_INTERNAL void jf_kernels_free(jf_kernels *k);
/* Backend that actually runs (may be INTERP after a fallback). */
JF_INTERNAL jf_backend jf_kernels_backend(const jf_kernels *k);
/* Where the code came from, and milliseconds spent obtaining it (compile or load). */
JF_INTERNAL jf_cache_result jf_kernels_cache_result(const jf_kernels *k);
JF_INTERNAL double jf_kernels_compile_ms(const jf_kernels *k);
/* 1 when jf_kernels_normal_eq forms its sums from jacobian_row blocks with BLAS (see large_p). */
JF_INTERNAL int jf_kernels_chunked(const jf_kernels *k);
/* Limits OpenBLAS to one thread in every loaded copy, once per process: the solver's threads
 * already split the data, and OpenBLAS's own workers would only spin against them. */
JF_INTERNAL void jf_blas_single_threaded(void);
/* The vector ISA the kernels use (a jf_vec_isa of codegen/emit.h; 0: exact scalar math). */
JF_INTERNAL int jf_kernels_vector_isa(const jf_kernels *k);

/* r[i-begin] for i in [begin, end). */
JF_INTERNAL void jf_kernels_residual(const jf_kernels *k, const double *p, const jf_data_view *d,
                                     size_t begin, size_t end, double *r);
/* r as above and J[(i-begin)*np + k] = ∂r_i/∂p_k. */
JF_INTERNAL void jf_kernels_jacobian_row(const jf_kernels *k, const double *p,
                                         const jf_data_view *d, size_t begin, size_t end,
                                         double *r, double *J);
/* One pass over [begin, end) accumulating, after robust-loss scaling of r and its row as scipy
 * does (linear: no scaling):
 *   acc[0 .. np(np+1)/2)      upper triangle of JᵀJ, row-major packed: (0,0),(0,1)..(0,np-1),(1,1)..
 *   acc[T .. T+np)            Jᵀr,   with T = np(np+1)/2
 *   acc[T+np]                 Σ f_scale² rho((r/f_scale)²)  (= Σ r² for the linear loss)
 * acc is overwritten (not added to). The N×np Jacobian is never stored: for models above the
 * large_p threshold (jf_kernels_chunked) the sums are formed from blocks of a few hundred
 * jacobian_row rows (scaled as above, kept in L2) with cblas_dsyrk and cblas_dgemv, in a fixed
 * block order, so the result still depends on [begin, end) alone. */
JF_INTERNAL void jf_kernels_normal_eq(const jf_kernels *k, const double *p, const jf_data_view *d,
                                      size_t begin, size_t end, jf_loss loss, double f_scale,
                                      double *acc);

/* Evaluates value and gradient of m at one point on the GPU (compile with NVRTC, load, launch
 * jacobian_row, copy back). JF_ERR_UNAVAILABLE with the reason in *note ("unavailable: ...")
 * when there is no usable GPU. Implemented by the CUDA backend (runtime/jit_nvrtc.c). */
JF_INTERNAL int jf_cuda_eval_point(const struct jf_model *m, const double *p, const double *x,
                                   double *value, double *grad, char **note);

#endif
