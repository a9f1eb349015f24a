/* Internal interfaces of the CPU solver (the solver/ sources), in the order a fit uses them.
 *
 *   fit.c     public API: validates the call, obtains the kernels, runs one fit or a batch,
 *             assembles jf_fit_result
 *   fixed.c   parameters held at numbers: the reduced model and options, the result widened
 *   bounds.c  bounds and starting point: resolution from options and model, checks, flags
 *   threads.c a small deterministic thread pool, and the data-parallel passes over the points
 *             (normal equations, materialized Jacobian, residual statistics)
 *   lm.c      the Levenberg-Marquardt trust-region driver (decisions in step.h) and the final
 *             Gauss-Newton polish
 *   lm_resident.c  the device-resident loop (lm_core.h) driven on the host, which is how the
 *             GPU solver's logic is tested without a GPU
 *   linalg.c  p×p factorizations (Jacobi-scaled Cholesky, eigen pseudo-inverse fallback) and
 *             the column-scaled least-squares solve of a materialized Jacobian
 *   covar.c   covariance at the solution (SVD of J, or eigen-decomposition of JᵀJ)
 *
 * Determinism: every pass over the data splits the points into chunks whose size depends on the
 * number of points only; each chunk's sums land in their own slot and are added in chunk order.
 * The thread count changes who computes a chunk, never what is added to what.
 */
#ifndef JF_SOLVER_H
#define JF_SOLVER_H

#include <stddef.h>

#include "../runtime/common.h"
#include "../runtime/cuda_api.h"
#include "../runtime/kernels.h"

/* ---- threads.c ----------------------------------------------------------------------------- */

/* A fixed set of worker threads that run numbered tasks. */
typedef struct jf_pool jf_pool;

/* The number of threads to use for a request of n (n <= 0: the processors the calling thread
 * may run on, its CPU affinity; at most 1024). */
JF_INTERNAL int jf_threads_resolve(int n);
/* A pool of nthreads threads, the caller counting as one (so nthreads - 1 are created).
 * NULL when out of memory or when nthreads <= 1 (callers then pass NULL: run inline). */
JF_INTERNAL jf_pool *jf_pool_create(int nthreads);
/* Joins the workers and frees the pool; accepts NULL. */
JF_INTERNAL void jf_pool_free(jf_pool *pool);
/* jf_pool_create, or the pool a jf_pool_release kept if it has nthreads threads (a loop of fits
 * starts its threads once). */
JF_INTERNAL jf_pool *jf_pool_acquire(int nthreads);
/* Gives a pool from jf_pool_acquire back: kept for the next (the one kept before is freed);
 * accepts NULL. */
JF_INTERNAL void jf_pool_release(jf_pool *pool);
/* Number of threads including the caller (1 for NULL). */
JF_INTERNAL int jf_pool_size(const jf_pool *pool);
/* Runs fn(ctx, task, worker) for task = 0..ntasks-1 and returns when all are done. worker is in
 * [0, jf_pool_size) and names the thread (for per-thread scratch). With pool NULL the tasks run
 * in order on the calling thread. Not reentrant: one run per pool at a time. */
JF_INTERNAL void jf_pool_run(jf_pool *pool, size_t ntasks,
                             void (*fn)(void *ctx, size_t task, int worker), void *ctx);
/* memcpy of len bytes split in 1 MiB slices over pool (NULL: the calling thread alone). */
JF_INTERNAL void jf_pool_memcpy(jf_pool *pool, void *dst, const void *src, size_t len);
/* The same for n doubles that also tests them: 1 when every value is finite (a fit's staged
 * upload checks its data on the way, instead of a pass of its own). */
JF_INTERNAL int jf_pool_copy_finite(jf_pool *pool, double *dst, const double *src, size_t n);

/* Passes over the data done elsewhere than by the CPU kernels (the GPU solver's device copy of
 * the data): when a problem has ops, jf_problem_normal_eq/_jacobian/_residual_sums call them
 * with ops_ctx instead of running the CPU kernels. A failure inside must leave non-finite
 * values in the outputs, which the solver treats as a rejected point, and say why in its ctx. */
typedef struct jf_problem_ops {
    void (*normal_eq)(void *ctx, const double *p, jf_loss loss, double *acc);
    void (*jacobian)(void *ctx, const double *p, double *r, double *J);
    void (*residual_sums)(void *ctx, const double *p, double sums[2]);
} jf_problem_ops;

/* Most parameters of jf_problem_triangle's pass: lsq_core.h's JF_LSQ_MAX (checked there). */
#define JF_TRI_MAX 16

/* One fit's data as the kernels see it, with the chunking and buffers of its passes. */
typedef struct jf_problem {
    const jf_kernels *k;   /* the model's kernels (shared, read-only) */
    jf_data_view view;     /* x, y and w = 1/sigma (w NULL without sigma) */
    size_t n;              /* number of points */
    size_t np;             /* number of parameters */
    size_t nacc;           /* length of a normal-equation accumulator: np(np+1)/2 + np + 1 */
    jf_loss loss;          /* robust loss of the fit */
    double f_scale;        /* its scale */
    jf_pool *pool;         /* threads over the chunks, or NULL */
    size_t chunk;          /* points per chunk: a function of n only (determinism) */
    size_t nchunks;        /* ceil(n / chunk) */
    double *partial;       /* nchunks × nacc per-chunk sums, reduced in chunk order */
    double *scratch;       /* jf_pool_size × chunk doubles for the residual pass */
    const jf_problem_ops *ops; /* NULL: the CPU kernels k; else where the passes run */
    void *ops_ctx;         /* passed to ops */
    double round_rel;      /* the passes' model values round at this many fp64 ε (1; 2²⁹ for
                              fp32 evaluation on the GPU): the polish's cost tolerance */
    size_t nheld;          /* values of parameters held fixed that the kernels read after the
                              np fitted ones (jf_model_hold), 0 for most fits */
    double *pfull;         /* np + nheld: the parameter vector a pass hands the kernels, its
                              tail the held values (jf_problem_hold); NULL when nheld is 0 */
} jf_problem;

/* The number of chunks (tasks) of every pass over n points: a pool with more threads than
 * this leaves the rest idle. */
JF_INTERNAL size_t jf_problem_chunks(size_t n);
/* Sets up prob for n points (allocates the per-chunk buffers). JF_OK or JF_ERR_NOMEM. */
JF_INTERNAL int jf_problem_init(jf_problem *prob, const jf_kernels *k, const jf_data_view *view,
                                size_t n, size_t np, jf_loss loss, double f_scale, jf_pool *pool);
/* Frees the buffers of prob (not the kernels or the pool); accepts a zeroed struct. */
JF_INTERNAL void jf_problem_free(jf_problem *prob);
/* Gives prob the nh values of its model's held parameters (codegen/model.h, nheld), which
 * every pass appends to the fitted parameters it is given. JF_OK or JF_ERR_NOMEM. */
JF_INTERNAL int jf_problem_hold(jf_problem *prob, const double *held, size_t nh);
/* The held values (nheld of them), or NULL when there are none. */
JF_INTERNAL const double *jf_problem_held(const jf_problem *prob);
/* The whole parameter vector of the kernels for the fitted parameters p: p itself, or p and
 * the held values in prob's own buffer (valid until the next call). */
JF_INTERNAL const double *jf_problem_params(jf_problem *prob, const double *p);
/* acc (nacc values, the layout of jf_kernels_normal_eq) for parameters p and the given loss,
 * summed over all points. */
JF_INTERNAL void jf_problem_normal_eq(jf_problem *prob, const double *p, jf_loss loss,
                                      double *acc);
/* The weighted residuals r (n) and the Jacobian J (n × np, row-major) at p. */
JF_INTERNAL void jf_problem_jacobian(jf_problem *prob, const double *p, double *r, double *J);
/* sums[0] = Σ (f - y)², sums[1] = Σ (w (f - y))² at p (no robust loss). */
JF_INTERNAL void jf_problem_residual_sums(jf_problem *prob, const double *p, double sums[2]);
/* The same sums from residuals r (n) already evaluated at p without weights (the polish's
 * final r), added chunk by chunk as the pass adds them: bit-identical, without the pass. */
JF_INTERNAL void jf_problem_residual_sums_of(const jf_problem *prob, const double *r,
                                            double sums[2]);

/* The polish's pass at one point (np <= JF_LSQ_MAX): the QR triangle of [J | −r] and the sums
 * the polish judges by, with J never stored. Each chunk folds its rows, a block at a time as
 * the kernel produces them, into its own triangle (jf_lsq_fold), and the chunks' triangles are
 * folded together in chunk order: bit-identical for any number of threads, like the other
 * passes. */
typedef struct jf_tri {
    double R[JF_TRI_MAX * JF_TRI_MAX]; /* np×np upper triangle of J = QR, row-major */
    double qb[JF_TRI_MAX];             /* (Qᵀ(−r))[0..np) */
    double ssr;                        /* Σ r_i² (weighted residuals) */
    double noise;                      /* Σ jf_pol_noise_term: the cost's rounding level */
    int finite;                        /* 0 when some r_i or J entry is not finite (then the
                                          rest is not meaningful) */
} jf_tri;
/* Fills *t at p. With ops, J comes whole from ops->jacobian (n·np doubles for the call) and is
 * folded the same way. JF_OK or JF_ERR_NOMEM. */
JF_INTERNAL int jf_problem_triangle(jf_problem *prob, const double *p, jf_tri *t);
/* 1 when none of the n values is infinite or NaN. */
JF_INTERNAL int jf_all_finite(const double *v, size_t n);
/* Checks and statistics of a fit's data, split in the passes' chunks over pool from
 * JF_SCAN_POOL_MIN values (a function of n alone, whatever the pool), in one loop below. */
#define JF_SCAN_POOL_MIN ((size_t)1 << 18)
/* 1 + the index of v's first non-finite value, 0 when all are finite. */
JF_INTERNAL size_t jf_first_nonfinite(jf_pool *pool, const double *v, size_t n);
/* Memory for an array as long as a fit's data (its weights), freed with free(): from 32 MiB on
 * 2 MiB boundaries and advised into transparent huge pages, so that writing it the first time
 * costs 512× fewer page faults (a fresh 10⁷-point weight array cost more to fault in than to
 * compute: 36 ms against 10 ms on 2 threads). NULL when out of memory. */
JF_INTERNAL void *jf_alloc_large(size_t bytes);

/* The monotonic host clock in milliseconds, for the accounts of where a fit's time went. */
JF_INTERNAL double jf_clock_ms(void);
/* w[i] = 1/sigma[i] for all n; *bad_sigma = 1 + the first i whose sigma is not positive and
 * finite, *bad_weight = 1 + the first i whose weight is not finite (0: none). */
JF_INTERNAL void jf_sigma_weights(jf_pool *pool, const double *sigma, double *w, size_t n,
                                  size_t *bad_sigma, size_t *bad_weight);
/* Σ(y − ȳ)² as lsq_core.h's jf_lsq_total_ss (the same value below 2^18 points; above, its sums
 * by chunks, in chunk order). */
JF_INTERNAL double jf_total_ss(jf_pool *pool, const double *y, size_t n);

/* ---- linalg.c ------------------------------------------------------------------------------ */

/* Systems of at most this order are factorized by lm_core.h's routines, not LAPACK. */
#define JF_LINALG_SMALL 16
/* Workspace for factorizing symmetric positive semidefinite m×m systems, m <= capacity. */
typedef struct jf_linalg {
    size_t cap;    /* largest m the buffers hold */
    size_t m;      /* order of the last factorization */
    int mode;      /* 1: Cholesky of the scaled matrix; 0: eigen pseudo-inverse */
    int small;     /* the last factorization went through lm_core.h's routines */
    double *scale; /* Jacobi scaling s_k = 1/√M_kk of the last matrix */
    double *fac;   /* cap² : Cholesky factor, or eigenvectors */
    double *eig;   /* cap : inverted eigenvalues (0 for the discarded ones) */
    double *work;  /* 3·cap + cap² scratch */
    int *iwork;    /* cap scratch */
} jf_linalg;

JF_INTERNAL int jf_linalg_init(jf_linalg *la, size_t cap);
JF_INTERNAL void jf_linalg_free(jf_linalg *la);
/* Factorizes the symmetric m×m matrix M (full storage). Returns 1 for a well-conditioned
 * Cholesky factorization, 0 when it fell back to the eigen pseudo-inverse (not positive
 * definite, or reciprocal condition number below m·ε), -1 when M is not finite or LAPACK
 * failed. */
JF_INTERNAL int jf_linalg_factor(jf_linalg *la, const double *M, size_t m);
/* x = M⁺ b for the last factorization (x may alias b). */
JF_INTERNAL void jf_linalg_solve(jf_linalg *la, const double *b, double *x);
/* wᵀ M⁺ w for the last factorization. */
JF_INTERNAL double jf_linalg_quad(jf_linalg *la, const double *w);
/* The minimum-norm least-squares solution x (m) of A x ≈ b, A n×m column-major. Columns are
 * scaled to unit norm first; the rank is where the pivoted QR's condition estimate passes
 * 1/(ε·max(n, m)) (dgelsy). A and b are destroyed. JF_OK, JF_ERR_NOMEM or JF_ERR_INTERNAL. */
JF_INTERNAL int jf_linalg_lstsq(double *A, size_t n, size_t m, double *b, double *x);

/* The triangle of J = QR (np×np row-major, upper; rows beyond n zero) and qb = (Qᵀb)[0..np) for
 * the n×np row-major J and b = -r (r NULL: b = 0), from LAPACK's Householder QR (dgeqrf) of
 * [J | b]; lsq_core.h's routines then solve and give the covariance. A is n·(np+1) doubles of
 * work. JF_OK, JF_ERR_NOMEM or JF_ERR_INTERNAL. */
JF_INTERNAL int jf_linalg_triangle(const double *J, const double *r, size_t n, size_t np,
                                   double *A, double *R, double *qb);

/* ---- covar.c ------------------------------------------------------------------------------- */

/* cov = (JᵀJ)⁺ (np × np, row-major) from the materialized Jacobian (n × np row-major), by an
 * SVD of the column-scaled J. unident[k] = 1 marks parameters the data do not determine (zero
 * column, or part of a direction dropped as singular): their rows and columns are infinite.
 * The solver gets the covariance of up to JF_LSQ_MAX parameters from the polish's triangle
 * (jf_covar_triangle) instead; this serves larger models and tests. */
JF_INTERNAL int jf_covar_jacobian(const double *J, size_t n, size_t np, double *cov,
                                  int *unident);
/* The same from JᵀJ (np × np full storage) by an eigen-decomposition of the Jacobi-scaled
 * matrix, for when J is not materialized. */
JF_INTERNAL int jf_covar_normal(const double *A, size_t np, double *cov, int *unident);
/* The same from J's QR triangle R (np × np row-major upper, from n rows), as the GPU batch's
 * finish leaves it: lsq_core.h's routines. */
JF_INTERNAL void jf_covar_triangle(const double *R, size_t n, size_t np, double *cov, int *unident);
/* Scales cov by s2 and derives the standard errors and the correlation matrix. */
JF_INTERNAL void jf_covar_finish(double *cov, const int *unident, size_t np, double s2,
                                 double *std_errors, double *correlation);

/* ---- fixed.c ------------------------------------------------------------------------------- */

/* A fit (or a batch of fits) with some parameters held at numbers: the fit of the reduced model
 * (jf_model_hold), whose kernels read the held values after the fitted parameters. */
typedef struct jf_fixed_plan {
    struct jf_model *reduced; /* the model without the held parameters (jf_model_hold) */
    size_t np, nfree, nheld;  /* parameters of the model, of reduced, and held (np - nfree) */
    size_t nfits;             /* rows of held: the batch's fits, 1 for a single fit */
    size_t *keep;             /* nfree: the model's index of reduced's parameter j */
    size_t *hold;             /* nheld: the model's index of held value h (reduced's p[nfree+h]) */
    double *value;            /* np: the (first fit's) starting point */
    double *held;             /* nfits × nheld: each fit's held values (its row of p0;
                                 jf_fixed_held) */
    unsigned char *exact;     /* nfits: 1 when reduced reading the row's held values computes
                                 what the model with them written in does
                                 (jf_model_hold_exact), 0: that fit needs jf_model_fix's */
    double *hlo, *hhi;        /* nheld: the held parameters' bounds, for jf_fixed_check */
    char *const *names;       /* the model's parameter names (borrowed), for messages */
    const int *fixed;         /* np: the caller's flags (jf_fit_options.fixed) */
    double *p0, *lo, *hi, *xs; /* nfree each: narrowed start, bounds, x_scale (NULL: jac) */
    double *p0_rows;          /* nfits × nfree narrowed per-fit starts of a batch, or NULL */
    jf_fit_options o;         /* the options for reduced (fixed NULL, arrays above) */
} jf_fixed_plan;

/* 1 when opts holds some parameter of m fixed. */
JF_INTERNAL int jf_fixed_any(const struct jf_model *m, const jf_fit_options *opts);
/* Resolves the starting point and bounds as jf_fit would (same checks and messages), takes the
 * held values from it (from each row of p0_rows, nfits × np, when not NULL: each fit holds its
 * own) and builds the reduced model and options. A single fit's held values are checked here,
 * a batch's with jf_fixed_check. JF_OK, or a status with a message in msg. */
JF_INTERNAL int jf_fixed_plan_init(jf_fixed_plan *pl, const struct jf_model *m,
                                   const jf_fit_options *opts, const double *p0_rows,
                                   size_t nfits, char *msg, size_t msglen);
/* Fit i's nheld held values (every fit's, when the plan has one row: a batch without p0 rows). */
JF_INTERNAL const double *jf_fixed_held(const jf_fixed_plan *pl, size_t i);
/* 1 when fit i can be fitted with pl->reduced (its exact flag). */
JF_INTERNAL int jf_fixed_exact(const jf_fixed_plan *pl, size_t i);
/* The model with fit i's held values written in (jf_model_fix), for a fit that is not exact.
 * JF_OK with *out (the caller frees it), JF_ERR_NOMEM or JF_ERR_LIMIT. */
JF_INTERNAL int jf_fixed_written(const jf_fixed_plan *pl, const struct jf_model *m, size_t i,
                                 struct jf_model **out);
/* JF_OK when fit i's held values are finite and inside their bounds, else JF_ERR_ARG with the
 * reason in msg. */
JF_INTERNAL int jf_fixed_check(const jf_fixed_plan *pl, size_t i, char *msg, size_t msglen);
/* Frees what the plan owns; accepts a zeroed or freed plan. */
JF_INTERNAL void jf_fixed_plan_free(jf_fixed_plan *pl);
/* Fills full (a result allocated for np parameters) from r, the reduced model's result of fit
 * i: held parameters at fit i's values with zero standard errors and covariance. The text
 * pointers are copied from r; the caller points them at full's own copies. */
JF_INTERNAL void jf_fixed_widen(const jf_fixed_plan *pl, size_t i, const jf_fit_result *r,
                                jf_fit_result *full);
/* Widens nrows rows of nfree values (narrow) to np (wide): held columns get each fit's values
 * (values 1: parameters) or 0 (standard errors); a row whose fit did not run (ran[i] 0) is NaN. */
JF_INTERNAL void jf_fixed_widen_rows(const jf_fixed_plan *pl, const double *narrow, double *wide,
                                     size_t nrows, const int *ran, int values);

/* ---- bounds.c ------------------------------------------------------------------------------ */

/* Fills lo and hi (np each) from the options, else the model's declared bounds, and checks
 * lo < hi. On error returns JF_ERR_ARG and writes a message into msg (msglen bytes). */
JF_INTERNAL int jf_bounds_resolve(const struct jf_model *m, const double *lower,
                                  const double *upper, double *lo, double *hi, char *msg,
                                  size_t msglen);
/* Fills x0 from p0 (if not NULL) or the model's initial values; a parameter without one starts
 * as scipy's curve_fit does: 1, or inside finite bounds (midpoint, lo + 1 or hi - 1). Checks
 * that x0 is finite and inside [lo, hi]; JF_ERR_ARG with a message otherwise. */
JF_INTERNAL int jf_bounds_start(const struct jf_model *m, const double *p0, const double *lo,
                                const double *hi, double *x0, char *msg, size_t msglen);
/* at_bound[k] = -1 when x_k == lo_k, +1 when x_k == hi_k, else 0. */
JF_INTERNAL void jf_bounds_flags(const double *x, const double *lo, const double *hi, size_t np,
                                 int *at_bound);

/* ---- lm.c ---------------------------------------------------------------------------------- */

/* Settings of one Levenberg-Marquardt run (already validated). */
typedef struct jf_lm_config {
    const double *lo;      /* np lower bounds (-inf for none) */
    const double *hi;      /* np upper bounds (+inf for none) */
    const double *x_scale; /* np characteristic scales, or NULL: Jacobian column norms */
    double ftol;           /* relative cost-reduction tolerance */
    double xtol;           /* relative step tolerance */
    double gtol;           /* scaled-gradient tolerance */
    size_t max_nfev;       /* evaluation budget (> 0) */
    void (*progress)(void *ctx, const jf_iteration_info *info); /* per-iteration callback */
    void *progress_ctx;    /* passed to progress */
} jf_lm_config;

/* What a run leaves behind (jf_lm_state_free releases the arrays). */
typedef struct jf_lm_state {
    int status;        /* a jf_fit_status */
    size_t nfev;       /* passes over the data by the solver and the polish */
    size_t iterations; /* trial steps (accepted and rejected) */
    size_t polish;     /* Gauss-Newton polish steps accepted */
    double cost;       /* cost at the solution */
    double optimality; /* scaled-gradient measure at the solution (jf_step_gnorm) */
    double *A;         /* np × np JᵀJ (loss-scaled) at the solution */
    double *g;         /* np gradient Jᵀr at the solution */
    double *J;         /* n × np row-major Jacobian at the solution when the polish of a
                          model of more than JF_LSQ_MAX parameters materialized it, else NULL */
    double *r;         /* n residuals at the solution alongside J, else NULL */
    double *R;         /* np × np row-major triangle of J = QR at the solution when the polish
                          pass of np <= JF_LSQ_MAX parameters ran (jf_problem_triangle), else
                          NULL */
    double ssr;        /* Σ r² at the solution alongside R */
} jf_lm_state;

/* Largest n·np that is polished and gets its covariance from J itself (its QR triangle, or for
 * more than JF_LSQ_MAX parameters its SVD, with J materialized: three n×np arrays, 3 MiB at
 * this size). Above it the polish and the covariance from J would cost more than the rest of
 * the fit (35 of 45 ms at n = 1e5, np = 5, measured when every polish materialized J). */
#define JF_LM_MATERIALIZE_MAX ((size_t)1 << 17)

/* Minimizes the cost of prob from x (np values, inside [lo, hi]; overwritten by the solution).
 * JF_OK (the outcome is st->status) or JF_ERR_NOMEM. */
JF_INTERNAL int jf_lm_solve(jf_problem *prob, const jf_lm_config *cfg, double *x,
                            jf_lm_state *st);
JF_INTERNAL void jf_lm_state_free(jf_lm_state *st);
/* The end of every driver after its iterations, for drivers other than jf_lm_solve: st holds
 * status, nfev, iterations, cost and optimality at x; A (np×np) and g are JᵀJ and Jᵀr there.
 * Runs the polish when it applies (linear loss, n·np <= JF_LM_MATERIALIZE_MAX; only converged
 * runs take steps) and fills st->A, st->g (and st->R or st->J and st->r from its pass). held:
 * the parameters the run held for negligible columns (step.h jf_step_restart), which the polish
 * and the final optimality leave out as the run did; NULL for none. JF_OK or JF_ERR_NOMEM. */
JF_INTERNAL int jf_lm_finish(jf_problem *prob, const jf_lm_config *cfg, double *x,
                             jf_lm_state *st, const double *A, const double *g, const int *held);

/* A run's settings and starting state: c from cfg, and in the workspace ws/iws of np
 * parameters and nh held values the point x, the held values (after x and after x_try), the
 * bounds and x_scale (for the host driver, the GPU solver and each fit of a GPU batch alike). */
struct jf_lmc;
JF_INTERNAL void jf_lmc_setup(struct jf_lmc *c, double *ws, int *iws, size_t np, size_t nh,
                              const double *held, const jf_lm_config *cfg, const double *x);
/* The end of a run of the state machine: x and st from c and the workspace, then jf_lm_finish.
 * JF_OK or JF_ERR_NOMEM. */
JF_INTERNAL int jf_lmc_finish(jf_problem *prob, const jf_lm_config *cfg, const struct jf_lmc *c,
                              double *ws, int *iws, double *x, jf_lm_state *st);

/* ---- fit.c --------------------------------------------------------------------------------- */

/* 1: CPU fits run jf_lm_solve_resident instead of jf_lm_solve (tests set it to check the GPU
 * solver's state machine against lm.c through the public API); 0 by default. */
JF_INTERNAL extern int jf_fit_host_resident;

/* ---- lm_resident.c ------------------------------------------------------------------------- */

/* jf_lm_solve's contract, computed by the device-resident state machine of lm_core.h with one
 * jf_problem_normal_eq pass per trial point on the host: the GPU solver's decisions without a
 * GPU. Progress callbacks are called as jf_lm_solve calls them. */
JF_INTERNAL int jf_lm_solve_resident(jf_problem *prob, const jf_lm_config *cfg, double *x,
                                     jf_lm_state *st);

/* 0 (default): jf_lm_solve_resident's state machine factorizes inline. k > 0: it hands each
 * factorization to the driver (v->external), which runs LAPACK potrf/potrs on it as the GPU's
 * many-parameter path runs cuSOLVER, at most k per pass, the rest inline. Tests set it. */
JF_INTERNAL extern int jf_lm_resident_rounds;
/* Factorizations handed to the driver so far (tests read it to know the protocol ran). */
JF_INTERNAL extern unsigned long jf_lm_resident_handed;

/* ---- gpu_layout.c --------------------------------------------------------------------------- */

/* The chunking of streamed data (see gpu_layout.c). */
typedef struct jf_stream_layout {
    size_t n, nv;       /* points, variables */
    int weighted;       /* weights are streamed too */
    size_t ncols;       /* arrays per chunk: nv + 1 (+ 1 weighted) */
    size_t chunk;       /* points per chunk */
    size_t nchunks;     /* chunks */
} jf_stream_layout;

JF_INTERNAL void jf_stream_layout_init(jf_stream_layout *l, size_t n, size_t nv, int weighted,
                                       size_t chunk);
/* Points in chunk k (the last one may be short). */
JF_INTERNAL size_t jf_stream_chunk_len(const jf_stream_layout *l, size_t k);
/* Writes the chunk-major copy of d (nchunks × ncols × chunk doubles) into dst. */
JF_INTERNAL void jf_stream_fill(const jf_stream_layout *l, const jf_data_view *d, double *dst);
/* Where y and w start in a chunk buffer (in doubles); 1 when w is to be used (weighted and the
 * layout has weights). */
JF_INTERNAL int jf_stream_offsets(const jf_stream_layout *l, int weighted, size_t *y_off,
                                  size_t *w_off);
/* The view of one chunk held in chunk_buf (x at ldx = chunk, y, and w when weighted and the
 * layout has weights), as the kernels read it. */
JF_INTERNAL jf_data_view jf_stream_view(const jf_stream_layout *l, const double *chunk_buf,
                                        int weighted);

struct jf_batch_fit;
/* off[0..nfits]: the fits' first points when they are packed one after the other; returns the
 * total. */
JF_INTERNAL size_t jf_batch_offsets(const struct jf_batch_fit *fits, size_t nfits,
                                    unsigned long long *off);
/* Packs the fits' data one after the other into x (nv columns of total points), y and w (each
 * when not NULL; w is 1 for fits without weights), off[0..nfits] the fits' first points.
 * Returns the points packed (total). */
JF_INTERNAL size_t jf_batch_pack(const struct jf_batch_fit *fits, size_t nfits, size_t nv,
                                 size_t total, double *x, double *y, double *w,
                                 unsigned long long *off);
/* The same for fits [f0, f1) only, at the offsets off already holds (so that ranges of one
 * chunk can be packed on several threads). */
JF_INTERNAL void jf_batch_pack_range(const struct jf_batch_fit *fits, size_t f0, size_t f1,
                                     size_t nv, size_t total, double *x, double *y, double *w,
                                     const unsigned long long *off);

/* ---- lm_cuda.c ------------------------------------------------------------------------------ */

struct jf_cuda_kernels;

/* Iterations per launch of the unrolled graph (drivers without WHILE nodes): one host
 * synchronization per this many iterations; typical fits need 5 to 20. */
#define JF_LM_CUDA_UNROLL 8
/* Most blocks of a normal_eq pass (grid-stride beyond): the block partials stay small and the
 * one-block reduction short. */
#define JF_LM_CUDA_MAX_GRID 1024

/* How the device loop ran. */
enum { JF_GPU_LOOP_WHILE = 1, JF_GPU_LOOP_UNROLLED = 2, JF_GPU_LOOP_STREAM = 3 };

/* Above this many parameters a GPU fit forms its sums from chunks of the materialized
 * Jacobian with cuBLAS (syrk, gemv) instead of the model's own normal_eq kernel (register or
 * tiled sums); $JITFIT_GPU_LARGE_P overrides it (negative: always). On an H200
 * (bench_gpu_large_p, 10⁶ points, sums of Gaussian peaks; docs/PERFORMANCE.md) the kernel's
 * pass took 0.40–7.0 ms from 6 to 60 parameters against cuBLAS's 12.6–15.3 ms, and 37.9
 * against 23.3 ms at 120: the power laws through 60 and 120 cross near 90 (not measured
 * between). */
#define JF_GPU_LARGE_P 90
/* 1 when a GPU fit of np parameters takes that path ($JITFIT_GPU_LARGE_P, else JF_GPU_LARGE_P). */
JF_INTERNAL int jf_gpu_large_p(size_t np);
/* cuSOLVER factorizations the many-parameter path runs after each pass (a fixed schedule: a
 * trust-region step needs one, or more while it searches λ; the state machine factorizes the
 * rest itself). $JITFIT_GPU_FACTOR_ROUNDS overrides; 0 keeps every factorization in the kernel. */
#define JF_GPU_FACTOR_ROUNDS 2

/* What a GPU fit reports beyond jf_lm_state. */
typedef struct jf_gpu_stats {
    int mode;                   /* JF_GPU_LOOP_WHILE or JF_GPU_LOOP_UNROLLED */
    unsigned long loop_syncs;   /* host synchronizations while iterating (1 with WHILE) */
    unsigned long finish_syncs; /* blocking calls of the finish (polish, covariance inputs) */
    unsigned long launches;     /* graph launches */
    int per_wait;               /* JF_GPU_LOOP_STREAM, _UNROLLED: iterations enqueued per host
                                   wait (the unrolled graph's length) */
    unsigned long long iterations; /* trial steps judged on the device */
    char note[320];             /* why the WHILE form was not used, or "" */
    /* host clock, ms: the data's allocation and copy to the device (jf_gpu_problem_init; the
     * streamed copies are in the loop), obtaining the solver's modules (NVRTC or the cache: a
     * compile time, which the result counts as one), the loop's buffers, the loop (its graphs
     * built, launched and synchronized, and the host work overlapped with it), the finish.
     * Where a fit's time goes, for the device note: the solve time divided by the passes mixes
     * them. */
    double upload_ms, modules_ms, setup_ms, loop_ms, finish_ms;
} jf_gpu_stats;

/* The passes a GPU fit's statistics take at its final point, run by the loop after its last
 * iteration on the device, so that the host reads them with the loop's result rather than with
 * blocking calls of their own (jf_gpu_problem.tail): the linear-loss sums with the weights (a
 * robust loss's SSR and optimality), and the sums without weights (R²'s Σ (f − y)² of a fit
 * with sigma). Neither for a fit the polish may move (linear loss, n·np <=
 * JF_LM_MATERIALIZE_MAX), nor for streamed data outside the many-parameter path. */
enum { JF_GPU_TAIL_LINEAR = 1, JF_GPU_TAIL_PLAIN = 2 };

/* One fit's data on the device, and the passes the finish runs there (jf_problem_ops). */
typedef struct jf_gpu_problem {
    size_t n, np, nacc;          /* points, parameters, sums of a pass on the device (a row of
                                    partials, the reduced totals, a tail): the accumulator's,
                                    and in fp32 one more, the cost's rounding (lm_core.h) */
    size_t nacc_host;            /* the accumulator's length the host reads (jf_problem.nacc) */
    size_t nheld;                /* held values the kernels read after the np parameters */
    double *ph;                  /* np + nheld: host staging of a pass's parameters, the held
                                    values at its end (NULL when nheld is 0) */
    double f_scale;              /* loss scale */
    unsigned grid;               /* blocks of a normal_eq pass */
    void *fn_normal_eq, *fn_reduce, *fn_jacobian_row; /* the model's kernels */
    jf_devptr x, y, w;           /* data (x packed with ldx = n; w 0 without sigma) */
    int data_finite;             /* x and y tested on their staged way up (init's check): 1
                                    all finite, 0 not, -1 not tested */
    jf_devptr p, partial, acc;   /* parameters, block partials, accumulator */
    jf_devptr r, J;              /* residuals and Jacobian (polish only; allocated on use) */
    size_t chunk;                /* streaming: points per chunk; 0 when the data are resident */
    int refused;                 /* streaming because the GPU refused the resident arrays */
    int upload_staged;           /* resident: arrays uploaded through the staging buffers */
    jf_stream_layout lay;        /* streaming: the chunk layout */
    int weighted;                /* the fit has weights (1/sigma) */
    double *pinned;              /* streaming: page-locked chunk-major copy of the data, or
                                    NULL when the chunks go up staged (stream_staged) */
    int stream_staged;           /* streaming: each pass's chunks go up from the caller's
                                    arrays (view) through the staging buffers (jf_gpu_upload),
                                    the host driving the loop; nothing page-locked per fit */
    jf_data_view view;           /* streaming: the caller's data (prob->view) */
    jf_devptr buf[2];            /* streaming: the two device chunk buffers */
    double *Jc;                  /* host copy of the column-major J */
    int large;                   /* many parameters: sums from J chunks and cuBLAS */
    size_t lp_chunk, lp_nchunks; /* large: rows per chunk, chunks per pass */
    unsigned lp_grid;            /* large: blocks of the scaling kernel per chunk */
    jf_devptr lp_J, lp_r;        /* large: one chunk of J (column-major, ld lp_chunk) and r */
    jf_devptr lp_Ag;             /* large: JᵀJ (np × np, upper) then Jᵀr (np), contiguous */
    jf_devptr lp_cost;           /* large: cost partials, lp_nchunks × lp_grid */
    void *fn_step;                                /* the solver module's state machine */
    void *fn_lp_zero, *fn_lp_scale, *fn_lp_pack; /* large: solver module kernels */
    struct jf_cache_entry *solver_mod; /* the reference that keeps fn_step, fn_lp_* loaded */
    struct jf_cache_entry *cond_mod;   /* the same for the WHILE node's condition kernel */
    int lp_rounds;               /* large: cuSOLVER factorizations per pass (0: in the kernel) */
    jf_devptr lp_F;              /* large: the factorization request, F then Finv (np × np) */
    jf_devptr lp_info, lp_work;  /* large: potrf's and potrs's info, potrf's workspace */
    size_t lp_lwork;             /* large: doubles at lp_work */
    char lp_solver[160];         /* large: why cuSOLVER is not used, or "" */
    jf_cuda_graph *lp_stream;    /* large: the stream the finish's passes run on */
    jf_cuda_graph *lp_copy;      /* large, streamed: the stream copying chunks in */
    void (*while_looping)(void *ctx); /* host work to overlap with the loop (the caller's,
                                    set after init): called once, after the loop's first
                                    launch, before its first wait; NULL: none */
    void *looping_ctx;           /* its argument */
    unsigned long loop_reads;    /* reads of the loop's results so far (each waits for it) */
    int overlap_late;            /* 1 when while_looping ran after such a read: it waited for
                                    the loop instead of overlapping it (an ordering bug that only
                                    a real driver's timing would show; the note says it) */
    double *tail;                /* the statistics' passes at the loop's final point, read with
                                    its last wait (host, 2·nacc: JF_GPU_TAIL_LINEAR's sums, then
                                    JF_GPU_TAIL_PLAIN's), or NULL */
    int tail_have;               /* which of them the loop left: JF_GPU_TAIL_* bits */
    jf_devptr tail_dev;          /* the same on the device, where the tail passes sum */
    unsigned long syncs_after;   /* blocking calls of the ops */
    int failed;                  /* first error of an op (a jf_status), or 0 */
    char why[512];               /* its reason */
} jf_gpu_problem;

/* ---- gpu_upload.c --------------------------------------------------------------------------- */

/* How jf_gpu_upload copies: AUTO stages copies of at least 4 MiB and sends smaller ones
 * directly; $JITFIT_GPU_UPLOAD=direct|staged forces one way for every fit (jf_gpu_upload_mode). */
enum { JF_UPLOAD_AUTO = 0, JF_UPLOAD_DIRECT = 1, JF_UPLOAD_STAGED = 2 };
/* The mode $JITFIT_GPU_UPLOAD asks for (JF_UPLOAD_AUTO when unset or not a mode's name). */
JF_INTERNAL int jf_gpu_upload_mode(void);
/* Copies bytes from ordinary host memory src to device memory dst, complete on return. STAGED
 * goes through the process's two page-locked buffers (allocated on first use and kept), the host
 * copy of one chunk on a pool of threads overlapping the device copy of the other; DIRECT is
 * cuMemcpyHtoD. A staged copy falls back to a direct one when page-locked memory is refused or
 * another thread's staged upload holds the buffers. *how (if not NULL) receives the way taken.
 * JF_OK or an error with the driver's message in why. */
JF_INTERNAL int jf_gpu_upload(jf_devptr dst, const void *src, size_t bytes, int mode, int *how,
                              char *why, size_t n);
/* One piece of a fit's data for jf_gpu_upload_pieces: bytes from src to dst; with check, src
 * holds doubles (bytes a multiple of 8) that a staged upload tests for finiteness. */
typedef struct jf_gpu_piece {
    jf_devptr dst;
    const void *src;
    size_t bytes;
    int check;
} jf_gpu_piece;
/* jf_gpu_upload of npc pieces at once, in order: AUTO stages them when they add up to 4 MiB,
 * and staged they make one pipeline (a fit's x, y and weights). *finite (if not NULL): 1 when
 * the upload was staged and every value of the pieces with check is finite, 0 when one is
 * not, -1 when nothing was tested (a direct upload: the caller scans the data itself). */
JF_INTERNAL int jf_gpu_upload_pieces(const jf_gpu_piece *pc, size_t npc, int mode, int *how,
                                     int *finite, char *why, size_t n);
/* The pieces (at most l->ncols) that carry chunk k of d into a chunk buffer at dst, in
 * jf_stream_fill's layout of one chunk (x's columns, y, w; each column l->chunk doubles apart,
 * the last chunk's short columns not padded); returns how many (gpu_layout.c). */
JF_INTERNAL size_t jf_stream_pieces(const jf_stream_layout *l, const jf_data_view *d, size_t k,
                                    jf_devptr dst, jf_gpu_piece *pc);
/* 1 when an upload of bytes in mode goes through the staging buffers unless they are busy or
 * cannot be had (AUTO: from 4 MiB). */
JF_INTERNAL int jf_gpu_upload_stages(size_t bytes, int mode);
/* Bytes per staging buffer (set up now if it was not), 0 when the buffers cannot be had. */
JF_INTERNAL size_t jf_gpu_upload_stage_bytes(void);

/* Device memory a fit may use: 90 % of what is free now, or limit bytes (jf_fit_options.
 * max_gpu_mem; 0: none) or $JITFIT_MAX_GPU_MEM (bytes, or with --max-gpu-mem's units) if smaller (SIZE_MAX when the driver
 * cannot say and no limit is set). */
JF_INTERNAL size_t jf_gpu_usable_memory(size_t limit);
/* Device memory a fit of n points needs (data, partials, loop state with nh held values, the
 * polish's J and r when n·np <= JF_LM_MATERIALIZE_MAX), for the out-of-memory decision before
 * anything is allocated. */
JF_INTERNAL size_t jf_gpu_problem_bytes(size_t n, size_t np, size_t nh, size_t nv, int weighted);
/* Copies prob's data to the device once and makes prob's passes run there (prob->ops); with
 * check, a staged upload also tests x and y for finiteness (gp->data_finite).
 * JF_OK, or JF_ERR_NOMEM (device memory: fall back) / JF_ERR_UNAVAILABLE with gp->why. */
JF_INTERNAL int jf_gpu_problem_init(jf_gpu_problem *gp, jf_problem *prob,
                                    const struct jf_cuda_kernels *k, size_t nv, int check);
/* The same for data larger than the device memory `avail` (bytes) allows: the data stay in
 * page-locked host memory, chunk by chunk, and every pass streams them through two device
 * buffers, copies overlapped with the kernels ($JITFIT_GPU_CHUNK forces the points per chunk).
 * JF_OK, or JF_ERR_NOMEM when not even the buffers fit (fall back to the CPU). */
JF_INTERNAL int jf_gpu_problem_init_streamed(jf_gpu_problem *gp, jf_problem *prob,
                                             const struct jf_cuda_kernels *k, size_t nv,
                                             size_t avail);
JF_INTERNAL void jf_gpu_problem_free(jf_gpu_problem *gp);
/* jf_lm_solve's contract on the GPU: the loop runs device-resident (see lm_cuda.c), then the
 * shared finish. prob must have been set up by jf_gpu_problem_init. JF_OK, or an error with
 * a one-line reason in why. */
JF_INTERNAL int jf_lm_solve_cuda(jf_problem *prob, jf_gpu_problem *gp, const jf_lm_config *cfg,
                                 double *x, jf_lm_state *st, jf_gpu_stats *stats, char *why,
                                 size_t n);
/* ---- batch_cuda.c --------------------------------------------------------------------------- */

/* One fit of a GPU batch, checked: n points, x with leading dimension ldx, y, w = 1/sigma or
 * NULL, and its starting point x0 (np values). */
typedef struct jf_batch_fit {
    size_t n;
    const double *x;
    size_t ldx;
    const double *y;
    const double *w;
    const double *x0;
    const double *held; /* the model's nheld held values for this fit, or NULL when none */
} jf_batch_fit;

/* What the device loop leaves for one fit (x, A, g and R point to caller memory: np, np², np,
 * np²). With finished set the device also ran the finish (polish, J's triangle R and
 * Σ(f − y)² at the final x; cost, optimality, A and g there), else the host must. */
typedef struct jf_batch_out {
    int status;
    size_t nfev, iterations;
    double cost, optimality;
    double *x, *A, *g, *R;
    int finished;     /* the device ran the finish */
    size_t polish;    /* its polish steps kept */
    double ssr_plain; /* Σ (f − y)² at the final x */
} jf_batch_out;

/* Doubles of a GPU batch fit's statistics record: {1 (0: the host must finish this fit), status,
 * nfev, iterations, cost, R², SSR, x (np), standard errors (np)} — what a jf_batch_columns row
 * needs besides its code (χ² is the SSR where the fit has sigma). */
#define JF_BATCH_STATS(np) (7 + 2 * (np))

/* 1 when a model of np parameters can be batched on the GPU (register sums up to 8, tiled sums
 * in a block's shared memory up to about 80). */
JF_INTERNAL int jf_batch_cuda_supported(size_t np);
/* 1 when the batch of np-parameter fits keeps its sums in registers (a warp or block per fit,
 * the finish on the device), 0 when it tiles them (a block per fit). */
JF_INTERNAL int jf_batch_cuda_register_sums(size_t np);
/* What runs each fit of a GPU batch: a warp, a block (long fits; every fit beyond 8
 * parameters) or a thread (short fits). */
typedef enum { JF_BATCH_WARP, JF_BATCH_BLOCK, JF_BATCH_THREAD } jf_batch_kernel;
/* The kernel a batch of nfits fits of np parameters and total points in all runs (the
 * thresholds in batch_cuda.c; $JITFIT_GPU_BATCH_BLOCK and $JITFIT_GPU_BATCH_THREAD move them). */
JF_INTERNAL jf_batch_kernel jf_batch_cuda_kernel(size_t np, size_t nfits, size_t total);
/* Its entry point's name: jf_batch_lm, jf_batch_lm_block or jf_batch_lm_thread. */
JF_INTERNAL const char *jf_batch_cuda_kernel_name(jf_batch_kernel kind);
/* The CUDA source of m's batch module for kernel `kind` (JF_BATCH_BLOCK whatever kind beyond 8
 * parameters, over jf_fit_sums_tiled): the model's kernels with jf_fit_sums, step.h, lm_core.h
 * and that one entry point; malloc'd, NULL when out of memory. For test_ptx too. */
JF_INTERNAL char *jf_batch_cuda_source(const struct jf_model *m, int loss, int single_precision,
                                       jf_batch_kernel kind);
/* Called by jf_batch_cuda_run as the fits [f0, f1) of a launch are done, in order: out[f0..f1)
 * is filled for the fits without a statistics record; st (valid during the call) holds the
 * chunk's (f1 − f0) × JF_BATCH_STATS(np) records, NULL when none were asked for. */
typedef void (*jf_batch_chunk_fn)(void *ctx, size_t f0, size_t f1, const double *st);

/* Where a GPU batch's run spent its time on the host clock (ms): getting the module (the kernel
 * cache, or NVRTC), allocating device and staging memory, packing chunks and enqueueing their
 * copies and launches, waiting for the device (its kernels and copies, as far as the host did not
 * overlap them), and the chunk callbacks (the rows). */
typedef struct jf_batch_times {
    double module, memory, submit, wait, rows;
} jf_batch_times;

/* Runs the device loops of nfits fits (see batch_cuda.c): in one launch, or when the batch is
 * larger than a chunk (about 256 MiB of device memory, or half of what is usable) in chunks of
 * consecutive fits pipelined on two streams; *launches receives the launches made, *per_fit
 * what runs each fit ("a thread", "a warp" or "a block", static text), *times its split on
 * the host clock (zeroed first; chunks are packed on pool's threads, NULL: the caller's), and done
 * (if not NULL) each chunk's results as it comes back, while the next chunks run. With stats,
 * the device also computes each fit's statistics as the host would (covariance scaled unless
 * abs_sigma; register sums only, up to 8 parameters), and out[f] is filled only for the fits
 * whose record says 0. JF_OK; JF_ERR_NOMEM when not even a chunk of one fit fits in GPU
 * memory (at most max_mem bytes, 0: no limit but the free memory; fall back to the CPU);
 * another error with a one-line reason in why. */
JF_INTERNAL int jf_batch_cuda_run(const struct jf_model *m, const jf_jit_options *jo,
                                  jf_loss loss, double f_scale, size_t nfits,
                                  const jf_batch_fit *fits, const jf_lm_config *cfg,
                                  size_t max_mem, jf_batch_out *out, int stats, int abs_sigma,
                                  jf_batch_chunk_fn done, void *done_ctx, size_t *launches,
                                  const char **per_fit, jf_batch_times *times, jf_pool *pool,
                                  char *why, size_t n);

/* The CUDA source of the solver module (which 0: step.h, lm_core.h and the start/judge
 * kernels) or of the WHILE condition kernel (which 1), malloc'd; for the tests that compile it
 * to PTX without a GPU. */
JF_INTERNAL char *jf_lm_cuda_source(int which);

#endif
