/* Threads for the CPU solver: a small pool, and the data-parallel passes over one fit's points.
 *
 * A pass splits the points into chunks of a size that depends on n alone (about JF_CHUNK_MIN
 * points, at most JF_CHUNKS_MAX chunks); every chunk is one task whose sums go to
 * its own slot, and the slots are added in chunk order on the calling thread. So the result is
 * bit-identical for any number of threads, and the batched API (one thread per fit) computes
 * exactly what jf_fit computes with many threads. The kernel pass itself is the generated
 * normal-equation kernel: one read of the data per trial point.
 *
 * The pool is plain pthreads (already a dependency of the library) rather than OpenMP: tasks
 * are claimed from an atomic counter, so who runs a chunk is timing-dependent, but nothing
 * else is.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "lsq_core.h"
#include "polish_core.h"
#include "solver.h"

_Static_assert(JF_TRI_MAX == JF_LSQ_MAX, "jf_tri holds lsq_core.h's largest triangle");

/* Chunk size before the rounding of their count (chunk_size): from half of it up, a task's
 * overhead is noise against the kernel work. */
#define JF_CHUNK_MIN ((size_t)4096)
/* Most chunks per pass: bounds the per-chunk accumulator memory for huge n. */
#define JF_CHUNKS_MAX ((size_t)1024)

/* How long a worker keeps polling for the next job, and the caller for the workers' end,
 * before sleeping on a condition variable (ns). A small fit's passes take 0.1–0.2 ms each with
 * microseconds of p×p work between them; waking a sleeping thread on an idle core (a futex
 * wake, an IPI, on a VM a halted vCPU) took as long as half a pass, so at N = 1e4 two threads
 * were no faster than one. The polish's QR between its passes takes ≈ 0.1 ms at N = 1e4. */
#define JF_POOL_SPIN_NS 200000L

struct jf_pool {
    int nthreads;             /* threads including the caller */
    pthread_t *threads;       /* nthreads - 1 workers */
    pthread_mutex_t mu;       /* guards sleeping and the condition variables */
    pthread_cond_t cv_work;   /* a new job or shutdown */
    pthread_cond_t cv_done;   /* the last worker finished the job */
    atomic_ulong generation;  /* bumped for every job (under mu) */
    atomic_int stop;          /* 1: workers exit */
    atomic_int busy;          /* workers still inside the current job */
    int sleeping;             /* workers waiting on cv_work; guarded by mu */
    void (*fn)(void *, size_t, int); /* current job (written before generation is bumped) */
    void *ctx;                /* its context */
    size_t ntasks;            /* its number of tasks */
    atomic_size_t next;       /* next unclaimed task */
};

/* Startup argument of a worker thread. */
typedef struct worker_arg {
    jf_pool *pool; /* the pool */
    int id;        /* worker number, 1 .. nthreads-1 (0 is the caller) */
} worker_arg;

int jf_threads_resolve(int n) {
    if (n > 0) return n;
    /* The CPUs this thread may run on (taskset, a container's cpuset, a batch scheduler's
     * allocation), not the machine's online ones: a job given a few cores of a big node ran a
     * thread per core of the node, contending for its few. More CPUs than a cpu_set_t holds
     * (1024) fail the call: then the online count. */
    cpu_set_t set;
    long c = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    if (c < 1) c = sysconf(_SC_NPROCESSORS_ONLN);
    if (c < 1) return 1;
    if (c > 1024) return 1024;
    return (int)c;
}

static void run_tasks(jf_pool *pool, int worker) {
    for (;;) {
        size_t t = atomic_fetch_add(&pool->next, 1);
        if (t >= pool->ntasks) break;
        pool->fn(pool->ctx, t, worker);
    }
}

static long elapsed_ns(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1000000000L + (t.tv_nsec - t0->tv_nsec);
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Polls until cond(pool, arg) holds or JF_POOL_SPIN_NS have passed; returns cond. */
static int spin_until(jf_pool *pool, int (*cond)(jf_pool *, unsigned long), unsigned long arg) {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned i = 1;; i++) {
        if (cond(pool, arg)) return 1;
        cpu_relax();
        if (i % 64 == 0) {
            if (elapsed_ns(&t0) > JF_POOL_SPIN_NS) return cond(pool, arg);
            /* more threads than free cores (nthreads above the core count, other processes):
             * let a runnable thread, perhaps one of this job's, have the core */
            sched_yield();
        }
    }
}

static int new_job(jf_pool *pool, unsigned long seen) {
    return atomic_load(&pool->stop) || atomic_load(&pool->generation) != seen;
}

static int job_done(jf_pool *pool, unsigned long unused) {
    (void)unused;
    return atomic_load(&pool->busy) == 0;
}

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    jf_pool *pool = wa->pool;
    int id = wa->id;
    free(wa);
    unsigned long seen = 0;
    for (;;) {
        if (!spin_until(pool, new_job, seen)) {
            pthread_mutex_lock(&pool->mu);
            pool->sleeping++;
            while (!new_job(pool, seen)) pthread_cond_wait(&pool->cv_work, &pool->mu);
            pool->sleeping--;
            pthread_mutex_unlock(&pool->mu);
        }
        if (atomic_load(&pool->stop)) break;
        seen = atomic_load(&pool->generation);
        run_tasks(pool, id);
        if (atomic_fetch_sub(&pool->busy, 1) == 1) {
            pthread_mutex_lock(&pool->mu);
            pthread_cond_signal(&pool->cv_done);
            pthread_mutex_unlock(&pool->mu);
        }
    }
    return NULL;
}

jf_pool *jf_pool_create(int nthreads) {
    if (nthreads <= 1) return NULL;
    jf_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return NULL;
    pool->threads = calloc((size_t)nthreads - 1, sizeof *pool->threads);
    if (!pool->threads) {
        free(pool);
        return NULL;
    }
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->cv_work, NULL);
    pthread_cond_init(&pool->cv_done, NULL);
    atomic_init(&pool->next, 0);
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->stop, 0);
    atomic_init(&pool->busy, 0);
    pool->nthreads = 1;
    for (int i = 1; i < nthreads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) break;
        wa->pool = pool;
        wa->id = i;
        if (pthread_create(&pool->threads[i - 1], NULL, worker_main, wa) != 0) {
            free(wa);
            break;
        }
        pool->nthreads++;
    }
    /* Fewer threads than asked (resource limits) only costs speed: chunking is independent of
     * the count. With none at all the caller runs inline. */
    if (pool->nthreads == 1) {
        jf_pool_free(pool);
        return NULL;
    }
    return pool;
}

void jf_pool_free(jf_pool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->mu);
    atomic_store(&pool->stop, 1);
    pthread_cond_broadcast(&pool->cv_work);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 1; i < pool->nthreads; i++) pthread_join(pool->threads[i - 1], NULL);
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->cv_work);
    pthread_cond_destroy(&pool->cv_done);
    free(pool->threads);
    free(pool);
}

int jf_pool_size(const jf_pool *pool) { return pool ? pool->nthreads : 1; }

/* The pool the last call released, kept for the next call that asks for as many threads:
 * starting and joining 15 threads took 2-4 ms on the 2-core development machine, the whole of
 * a GPU fit of 10⁶ points on the H200 (4.1 ms). One pool at most; a forked child forgets it
 * (its threads did not follow), and the process's end leaves it to the system. */
static pthread_mutex_t g_spare_mu = PTHREAD_MUTEX_INITIALIZER;
static jf_pool *g_spare;
static pthread_once_t g_spare_once = PTHREAD_ONCE_INIT;

static void spare_forget_in_child(void) {
    g_spare = NULL; /* its threads exist only in the parent; the memory stays unreferenced */
    pthread_mutex_init(&g_spare_mu, NULL);
}
static void spare_init(void) { pthread_atfork(NULL, NULL, spare_forget_in_child); }

jf_pool *jf_pool_acquire(int nthreads) {
    if (nthreads <= 1) return NULL;
    pthread_once(&g_spare_once, spare_init);
    jf_pool *p = NULL;
    pthread_mutex_lock(&g_spare_mu);
    if (g_spare && g_spare->nthreads == nthreads) {
        p = g_spare;
        g_spare = NULL;
    }
    pthread_mutex_unlock(&g_spare_mu);
    return p ? p : jf_pool_create(nthreads);
}

void jf_pool_release(jf_pool *pool) {
    if (!pool) return;
    pthread_once(&g_spare_once, spare_init);
    pthread_mutex_lock(&g_spare_mu);
    jf_pool *old = g_spare;
    g_spare = pool;
    pthread_mutex_unlock(&g_spare_mu);
    jf_pool_free(old);
}

void jf_pool_run(jf_pool *pool, size_t ntasks, void (*fn)(void *ctx, size_t task, int worker),
                 void *ctx) {
    if (!pool || ntasks <= 1) {
        for (size_t t = 0; t < ntasks; t++) fn(ctx, t, 0);
        return;
    }
    /* The job's fields before the generation bump (a sequentially consistent store): a worker
     * that sees the new generation, polling or woken, sees them too. */
    pool->fn = fn;
    pool->ctx = ctx;
    pool->ntasks = ntasks;
    atomic_store(&pool->next, 0);
    atomic_store(&pool->busy, pool->nthreads - 1);
    pthread_mutex_lock(&pool->mu);
    atomic_fetch_add(&pool->generation, 1);
    if (pool->sleeping) pthread_cond_broadcast(&pool->cv_work);
    pthread_mutex_unlock(&pool->mu);
    run_tasks(pool, 0);
    if (!spin_until(pool, job_done, 0)) {
        pthread_mutex_lock(&pool->mu);
        while (atomic_load(&pool->busy) > 0) pthread_cond_wait(&pool->cv_done, &pool->mu);
        pthread_mutex_unlock(&pool->mu);
    }
}

/* Bytes per task of jf_pool_memcpy (a multiple of the page). */
#define JF_COPY_SLICE ((size_t)1 << 20)

/* One jf_pool_memcpy call. */
typedef struct copy_job {
    char *dst;
    const char *src;
    size_t len;
} copy_job;

static void copy_slice(void *ctx, size_t t, int worker) {
    (void)worker;
    const copy_job *j = ctx;
    size_t off = t * JF_COPY_SLICE;
    memcpy(j->dst + off, j->src + off, j->len - off < JF_COPY_SLICE ? j->len - off : JF_COPY_SLICE);
}

void jf_pool_memcpy(jf_pool *pool, void *dst, const void *src, size_t len) {
    copy_job j = {dst, src, len};
    jf_pool_run(pool, (len + JF_COPY_SLICE - 1) / JF_COPY_SLICE, copy_slice, &j);
}

/* ---- passes over the data ------------------------------------------------------------------- */

/* Points per chunk of a pass over n points: a function of n only (determinism). The count of
 * JF_CHUNK_MIN-point chunks is rounded up to a multiple of the next power of two (at most 16),
 * so that 2, 4, 8 or 16 threads share a small fit evenly: 10⁴ points made three chunks of
 * 4096, 8192 and 1808 points for two threads, which ran no faster than one; now four of 2500. */
static size_t chunk_size(size_t n) {
    size_t k = (n + JF_CHUNK_MIN - 1) / JF_CHUNK_MIN, m = 1;
    while (m < k && m < 16) m <<= 1;
    k = (k + m - 1) / m * m;
    if (k > JF_CHUNKS_MAX) k = JF_CHUNKS_MAX;
    return k ? (n + k - 1) / k : JF_CHUNK_MIN;
}

size_t jf_problem_chunks(size_t n) {
    size_t chunk = chunk_size(n);
    return n ? (n + chunk - 1) / chunk : 0;
}

int jf_problem_init(jf_problem *prob, const jf_kernels *k, const jf_data_view *view, size_t n,
                    size_t np, jf_loss loss, double f_scale, jf_pool *pool) {
    memset(prob, 0, sizeof *prob);
    prob->k = k;
    prob->view = *view;
    prob->n = n;
    prob->np = np;
    prob->nacc = np * (np + 1) / 2 + np + 1;
    prob->loss = loss;
    prob->f_scale = f_scale;
    prob->pool = pool;
    prob->round_rel = 1.0;
    prob->chunk = chunk_size(n);
    prob->nchunks = jf_problem_chunks(n);
    if (prob->chunk > n) prob->chunk = n ? n : 1;
    prob->partial = malloc((prob->nchunks ? prob->nchunks : 1) * prob->nacc * sizeof(double));
    prob->scratch = malloc((size_t)jf_pool_size(pool) * prob->chunk * sizeof(double));
    if (!prob->partial || !prob->scratch) {
        jf_problem_free(prob);
        return JF_ERR_NOMEM;
    }
    return JF_OK;
}

void jf_problem_free(jf_problem *prob) {
    free(prob->partial);
    free(prob->scratch);
    free(prob->pfull);
    prob->partial = NULL;
    prob->scratch = NULL;
    prob->pfull = NULL;
}

int jf_problem_hold(jf_problem *prob, const double *held, size_t nh) {
    free(prob->pfull);
    prob->pfull = NULL;
    prob->nheld = nh;
    if (!nh) return JF_OK;
    prob->pfull = malloc((prob->np + nh) * sizeof *prob->pfull);
    if (!prob->pfull) return JF_ERR_NOMEM;
    memcpy(prob->pfull + prob->np, held, nh * sizeof *held);
    return JF_OK;
}

const double *jf_problem_held(const jf_problem *prob) {
    return prob->nheld ? prob->pfull + prob->np : NULL;
}

const double *jf_problem_params(jf_problem *prob, const double *p) {
    if (!prob->nheld) return p;
    memcpy(prob->pfull, p, prob->np * sizeof *p);
    return prob->pfull;
}

/* Context of one pass: what every chunk task reads. */
typedef struct pass_ctx {
    jf_problem *prob; /* the fit */
    const double *p;  /* parameters */
    jf_loss loss;     /* loss of a normal-equation pass */
    double *r;        /* jacobian pass: n residuals */
    double *J;        /* jacobian pass: n × np */
} pass_ctx;

static void chunk_range(const jf_problem *prob, size_t c, size_t *b, size_t *e) {
    *b = c * prob->chunk;
    *e = *b + prob->chunk;
    if (*e > prob->n) *e = prob->n;
}

static void normal_eq_task(void *ctx, size_t c, int worker) {
    (void)worker;
    pass_ctx *pc = ctx;
    jf_problem *prob = pc->prob;
    size_t b, e;
    chunk_range(prob, c, &b, &e);
    jf_kernels_normal_eq(prob->k, pc->p, &prob->view, b, e, pc->loss, prob->f_scale,
                         prob->partial + c * prob->nacc);
}

void jf_problem_normal_eq(jf_problem *prob, const double *p, jf_loss loss, double *acc) {
    if (prob->ops) {
        prob->ops->normal_eq(prob->ops_ctx, p, loss, acc);
        return;
    }
    pass_ctx pc = {prob, jf_problem_params(prob, p), loss, NULL, NULL};
    jf_pool_run(prob->pool, prob->nchunks, normal_eq_task, &pc);
    memcpy(acc, prob->partial, prob->nacc * sizeof *acc);
    for (size_t c = 1; c < prob->nchunks; c++) {
        const double *src = prob->partial + c * prob->nacc;
        for (size_t i = 0; i < prob->nacc; i++) acc[i] += src[i];
    }
}

static void jacobian_task(void *ctx, size_t c, int worker) {
    (void)worker;
    pass_ctx *pc = ctx;
    jf_problem *prob = pc->prob;
    size_t b, e;
    chunk_range(prob, c, &b, &e);
    jf_kernels_jacobian_row(prob->k, pc->p, &prob->view, b, e, pc->r + b, pc->J + b * prob->np);
}

void jf_problem_jacobian(jf_problem *prob, const double *p, double *r, double *J) {
    if (prob->ops) {
        prob->ops->jacobian(prob->ops_ctx, p, r, J);
        return;
    }
    pass_ctx pc = {prob, jf_problem_params(prob, p), JF_LOSS_LINEAR, r, J};
    jf_pool_run(prob->pool, prob->nchunks, jacobian_task, &pc);
}

static void residual_task(void *ctx, size_t c, int worker) {
    pass_ctx *pc = ctx;
    jf_problem *prob = pc->prob;
    size_t b, e;
    chunk_range(prob, c, &b, &e);
    double *r = prob->scratch + (size_t)worker * prob->chunk;
    jf_data_view unweighted = prob->view;
    unweighted.w = NULL;
    jf_kernels_residual(prob->k, pc->p, &unweighted, b, e, r);
    const double *w = prob->view.w;
    double su = 0, sw = 0;
    for (size_t i = b; i < e; i++) {
        double d = r[i - b];
        su += d * d;
        if (w) d *= w[i];
        sw += d * d;
    }
    prob->partial[c * prob->nacc] = su;
    prob->partial[c * prob->nacc + 1] = sw;
}

void jf_problem_residual_sums(jf_problem *prob, const double *p, double sums[2]) {
    if (prob->ops) {
        prob->ops->residual_sums(prob->ops_ctx, p, sums);
        return;
    }
    pass_ctx pc = {prob, jf_problem_params(prob, p), JF_LOSS_LINEAR, NULL, NULL};
    jf_pool_run(prob->pool, prob->nchunks, residual_task, &pc);
    sums[0] = sums[1] = 0;
    for (size_t c = 0; c < prob->nchunks; c++) {
        sums[0] += prob->partial[c * prob->nacc];
        sums[1] += prob->partial[c * prob->nacc + 1];
    }
}

void jf_problem_residual_sums_of(const jf_problem *prob, const double *r, double sums[2]) {
    sums[0] = 0;
    for (size_t c = 0; c < prob->nchunks; c++) {
        size_t b, e;
        chunk_range(prob, c, &b, &e);
        double su = 0;
        for (size_t i = b; i < e; i++) su += r[i] * r[i];
        sums[0] += su;
    }
    sums[1] = sums[0];
}

/* ---- checks and statistics of a fit's data ------------------------------------------------ */

/* From JF_SCAN_POOL_MIN points the scans below split the data in the passes' chunks (whatever
 * the pool: the total sum of squares' rounding depends on n alone); below, one loop. */
#define JF_SCAN_CHUNKED_MIN JF_SCAN_POOL_MIN

/* One scan over chunks: what each chunk found, by chunk. */
typedef struct scan_ctx {
    const double *v;     /* the values scanned */
    double *w;           /* sigma scan: the weights written */
    size_t n, chunk;
    double mean;         /* sum of squares: the mean, once known */
    int what;            /* 0 first non-finite, 1 sigma, 2 sum, 3 deviation sum, 4 squares */
    size_t bad[JF_CHUNKS_MAX], bad2[JF_CHUNKS_MAX]; /* first bad index + 1 per chunk, or 0 */
    double sum[JF_CHUNKS_MAX];
} scan_ctx;

/* The scans below work on two doubles per operation (SSE2, x86-64's baseline, or the target's
 * equivalent: GCC's and Clang's vector extensions), eight values per step in four independent
 * sums: one scalar sum's chain of additions ran at half the memory's speed (a 10⁷-point sum of
 * squares 10 ms per pass on two threads, 4.2 ms for a plain read). */
typedef double jf_v2 __attribute__((vector_size(16)));
typedef long long jf_m2 __attribute__((vector_size(16))); /* a comparison's lanes: 0 or -1 */

static jf_v2 load2(const double *p) {
    jf_v2 v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Σ v[b..e) (what 2), Σ (v − m) (3) or Σ (v − m)² (4): eight lanes, added in a fixed order, then
 * the last values one by one; the rounding depends on b and e alone, not on v's alignment. */
static double lane_sum(const double *v, size_t b, size_t e, double m, int what) {
    jf_v2 s0 = {0.0, 0.0}, s1 = s0, s2 = s0, s3 = s0, mm = {m, m};
    size_t i = b;
    /* four sums in registers, written out: a loop over an array of them kept it in memory */
#define JF_LANE_TERM(x) (what == 2 ? (x) : what == 3 ? (x) - mm : ((x) - mm) * ((x) - mm))
    for (; i + 8 <= e; i += 8) {
        s0 += JF_LANE_TERM(load2(v + i));
        s1 += JF_LANE_TERM(load2(v + i + 2));
        s2 += JF_LANE_TERM(load2(v + i + 4));
        s3 += JF_LANE_TERM(load2(v + i + 6));
    }
#undef JF_LANE_TERM
    jf_v2 a = (s0 + s1) + (s2 + s3);
    double t = a[0] + a[1];
    for (; i < e; i++) t += what == 2 ? v[i] : what == 3 ? v[i] - m : (v[i] - m) * (v[i] - m);
    return t;
}

/* 1 when v[b..e) are all finite: x·0 is ±0 for a finite x and NaN for an infinite or NaN one,
 * and a NaN stays in a sum, so no branch per value. */
static int lanes_finite(const double *v, size_t b, size_t e) {
    jf_v2 zero = {0.0, 0.0}, s0 = zero, s1 = zero, s2 = zero, s3 = zero;
    size_t i = b;
    for (; i + 8 <= e; i += 8) {
        s0 += load2(v + i) * zero;
        s1 += load2(v + i + 2) * zero;
        s2 += load2(v + i + 4) * zero;
        s3 += load2(v + i + 6) * zero;
    }
    jf_v2 a = (s0 + s1) + (s2 + s3);
    int ok = a[0] == 0.0 && a[1] == 0.0;
    for (; i < e && ok; i++) ok = isfinite(v[i]);
    return ok;
}

/* The same check for every caller: it runs over every row of the polish's passes, where a
 * branch per entry cost as much as the pass's own loops (and gcc -O2 left the former
 * branch-free scalar loop unvectorized). */
int jf_all_finite(const double *v, size_t n) { return lanes_finite(v, 0, n); }

/* One jf_pool_copy_finite call. */
typedef struct copy_finite_job {
    double *dst;
    const double *src;
    size_t n;
    atomic_int bad;
} copy_finite_job;

/* A slice's copy, then its test while the slice (1 MiB) is still in this core's cache. */
static void copy_finite_slice(void *ctx, size_t t, int worker) {
    (void)worker;
    copy_finite_job *j = ctx;
    size_t per = JF_COPY_SLICE / sizeof(double), off = t * per;
    size_t len = j->n - off < per ? j->n - off : per;
    memcpy(j->dst + off, j->src + off, len * sizeof(double));
    if (!lanes_finite(j->src + off, 0, len))
        atomic_store_explicit(&j->bad, 1, memory_order_relaxed);
}

int jf_pool_copy_finite(jf_pool *pool, double *dst, const double *src, size_t n) {
    copy_finite_job j = {dst, src, n, 0};
    size_t per = JF_COPY_SLICE / sizeof(double);
    jf_pool_run(pool, (n + per - 1) / per, copy_finite_slice, &j);
    return !atomic_load(&j.bad);
}

/* w[i] = 1/sigma[i] for i in [b, e); 1 when every sigma is positive and finite and every weight
 * finite (a tiny sigma's weight overflows), else 0 and the caller looks for the first bad one. */
static int lanes_weights(const double *sg, double *w, size_t b, size_t e) {
    jf_v2 one = {1.0, 1.0}, zero = {0.0, 0.0};
    jf_m2 bad = {0, 0};
    size_t i = b;
    for (; i + 2 <= e; i += 2) {
        jf_v2 x = load2(sg + i), r = one / x;
        memcpy(w + i, &r, sizeof r);
        /* not (x > 0 and x·0 == 0 and r·0 == 0): a NaN compares false */
        bad |= ~((x > zero) & (x * zero == zero) & (r * zero == zero));
    }
    int ok = bad[0] == 0 && bad[1] == 0;
    for (; i < e; i++) {
        w[i] = 1.0 / sg[i];
        ok = ok && sg[i] > 0 && isfinite(sg[i]) && isfinite(w[i]);
    }
    return ok;
}

static void scan_range(const scan_ctx *sc, size_t b, size_t e, size_t c, scan_ctx *out) {
    const double *v = sc->v;
    switch (sc->what) {
    case 0:
        out->bad[c] = 0;
        if (!lanes_finite(v, b, e))
            for (size_t i = b; i < e; i++)
                if (!isfinite(v[i])) {
                    out->bad[c] = i + 1;
                    break;
                }
        break;
    case 1: {
        size_t bs = 0, bw = 0;
        if (!lanes_weights(v, sc->w, b, e))
            for (size_t i = b; i < e && !(bs && bw); i++) {
                if (!bs && (!(v[i] > 0) || !isfinite(v[i]))) bs = i + 1;
                if (!bw && !isfinite(sc->w[i])) bw = i + 1;
            }
        out->bad[c] = bs;
        out->bad2[c] = bw;
        break;
    }
    default:
        out->sum[c] = lane_sum(v, b, e, sc->mean, sc->what);
    }
}

static void scan_task(void *ctx, size_t c, int worker) {
    (void)worker;
    scan_ctx *sc = ctx;
    size_t b = c * sc->chunk, e = b + sc->chunk < sc->n ? b + sc->chunk : sc->n;
    scan_range(sc, b, e, c, sc);
}

/* Runs scan `what` over v's n values: chunk by chunk on pool from JF_SCAN_CHUNKED_MIN points,
 * else as one range (chunk 0). Returns the number of chunks whose results sc holds. */
static size_t scan(jf_pool *pool, scan_ctx *sc, int what) {
    sc->what = what;
    if (sc->n < JF_SCAN_CHUNKED_MIN) {
        scan_range(sc, 0, sc->n, 0, sc);
        return 1;
    }
    sc->chunk = chunk_size(sc->n);
    size_t nch = jf_problem_chunks(sc->n);
    jf_pool_run(pool, nch, scan_task, sc);
    return nch;
}

static scan_ctx *scan_new(const double *v, double *w, size_t n) {
    scan_ctx *sc = malloc(sizeof *sc);
    if (sc) {
        sc->v = v;
        sc->w = w;
        sc->n = n;
        sc->chunk = n;
        sc->mean = 0.0;
    }
    return sc;
}

/* Huge pages from this size on (2 MiB each on x86-64 and most arm64 kernels): glibc's malloc
 * maps anything larger afresh on every call (its dynamic mmap threshold stops at 32 MiB on
 * 64-bit), so each fit faulted all of it in again; smaller arrays come back from its heap
 * already mapped after the first fit, and advising those cost more than it saved (1e6 points,
 * 8 MB: a weighted fit 7.2–7.9 → 9.9–11.2 ms). */
#define JF_HUGE_MIN ((size_t)32 << 20)
#define JF_HUGE_ALIGN ((size_t)2 << 20)

double jf_clock_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

void *jf_alloc_large(size_t bytes) {
#ifdef MADV_HUGEPAGE
    if (bytes >= JF_HUGE_MIN) {
        void *p = NULL;
        if (posix_memalign(&p, JF_HUGE_ALIGN, bytes) != 0) return NULL;
        /* advice only: where the kernel has no transparent huge pages, plain pages */
        size_t whole = bytes / JF_HUGE_ALIGN * JF_HUGE_ALIGN;
        (void)madvise(p, whole, MADV_HUGEPAGE);
        return p;
    }
#endif
    return malloc(bytes);
}

size_t jf_first_nonfinite(jf_pool *pool, const double *v, size_t n) {
    scan_ctx *sc = scan_new(v, NULL, n);
    if (!sc) { /* no memory for the chunks' results: one loop */
        for (size_t i = 0; i < n; i++)
            if (!isfinite(v[i])) return i + 1;
        return 0;
    }
    size_t nch = scan(pool, sc, 0), bad = 0;
    for (size_t c = 0; c < nch && !bad; c++) bad = sc->bad[c];
    free(sc);
    return bad;
}

void jf_sigma_weights(jf_pool *pool, const double *sigma, double *w, size_t n, size_t *bad_sigma,
                      size_t *bad_weight) {
    scan_ctx *sc = scan_new(sigma, w, n);
    *bad_sigma = *bad_weight = 0;
    if (!sc) { /* no memory for the chunks' results: one loop */
        for (size_t i = 0; i < n; i++) {
            w[i] = 1.0 / sigma[i];
            if (!*bad_sigma && (!(sigma[i] > 0) || !isfinite(sigma[i]))) *bad_sigma = i + 1;
            if (!*bad_weight && !isfinite(w[i])) *bad_weight = i + 1;
        }
        return;
    }
    size_t nch = scan(pool, sc, 1);
    for (size_t c = 0; c < nch; c++) {
        if (!*bad_sigma) *bad_sigma = sc->bad[c];
        if (!*bad_weight) *bad_weight = sc->bad2[c];
    }
    free(sc);
}

double jf_total_ss(jf_pool *pool, const double *y, size_t n) {
    scan_ctx *sc = n >= JF_SCAN_CHUNKED_MIN ? scan_new(y, NULL, n) : NULL;
    if (!sc) return jf_lsq_total_ss(y, n); /* (out of memory: the same sums in one loop) */
    /* lsq_core.h's three sums, each over the chunks in order */
    double t[3];
    for (int k = 0; k < 3; k++) {
        size_t nch = scan(pool, sc, 2 + k);
        t[k] = 0.0;
        for (size_t c = 0; c < nch; c++) t[k] += sc->sum[c];
        if (k == 0) sc->mean = t[0] / (double)n;
        if (k == 1) sc->mean += t[1] / (double)n;
    }
    free(sc);
    return t[2];
}

/* Rows per block of the triangle pass: the block of [J | −r] (at most 17 columns, 35 KiB)
 * stays in the L1/L2 cache between the kernel writing it and the fold reading it. */
#define JF_TRI_BLOCK ((size_t)256)

/* Context of a triangle pass. */
typedef struct tri_ctx {
    jf_problem *prob;
    const double *p;     /* parameters */
    const double *J_all; /* ops: the whole n × np Jacobian, r_all its residuals; else NULL */
    const double *r_all;
    double *slots;       /* nchunks slots of slot doubles: triangle, ssr, noise, finite */
    size_t slot;
    double *bufs;        /* per worker: the block [J | −r] (column-major), J's rows, r */
    size_t buf;
} tri_ctx;

static void triangle_task(void *ctx, size_t ch, int worker) {
    tri_ctx *tc = ctx;
    jf_problem *prob = tc->prob;
    size_t np = prob->np, c = np + 1, b, e;
    chunk_range(prob, ch, &b, &e);
    double *T = tc->slots + ch * tc->slot;
    memset(T, 0, tc->slot * sizeof *T);
    double *blk = tc->bufs + (size_t)worker * tc->buf;
    double *Jb = blk + JF_TRI_BLOCK * c, *rb = Jb + JF_TRI_BLOCK * np;
    const double *y = prob->view.y, *w = prob->view.w;
    double ssr = 0, noise = 0;
    int finite = 1;
    for (size_t i0 = b; i0 < e && finite; i0 += JF_TRI_BLOCK) {
        size_t m = e - i0 < JF_TRI_BLOCK ? e - i0 : JF_TRI_BLOCK;
        const double *J = Jb, *r = rb;
        if (tc->J_all) {
            J = tc->J_all + i0 * np;
            r = tc->r_all + i0;
        } else {
            jf_kernels_jacobian_row(prob->k, tc->p, &prob->view, i0, i0 + m, rb, Jb);
        }
        for (size_t i = 0; i < m; i++) {
            double ri = r[i];
            ssr += ri * ri;
            noise += jf_pol_noise_term(ri, y ? (w ? w[i0 + i] : 1.0) * y[i0 + i] : 0.0,
                                       prob->round_rel);
            for (size_t a = 0; a < np; a++) blk[a * m + i] = J[i * np + a];
            blk[np * m + i] = -ri;
        }
        finite = jf_all_finite(blk, m * c);
        if (finite) jf_lsq_fold(T, c, blk, m);
    }
    T[c * c] = ssr;
    T[c * c + 1] = noise;
    T[c * c + 2] = finite;
}

int jf_problem_triangle(jf_problem *prob, const double *p, jf_tri *t) {
    size_t n = prob->n, np = prob->np, c = np + 1;
    if (np > JF_TRI_MAX) return JF_ERR_INTERNAL;
    tri_ctx tc = {prob, jf_problem_params(prob, p), NULL, NULL, NULL, c * c + 3, NULL,
                  JF_TRI_BLOCK * (c + np + 1)};
    double *J_all = NULL, *r_all = NULL;
    if (prob->ops) {
        J_all = malloc(n * np * sizeof *J_all);
        r_all = malloc(n * sizeof *r_all);
        if (!J_all || !r_all) goto nomem;
        prob->ops->jacobian(prob->ops_ctx, p, r_all, J_all);
        tc.J_all = J_all;
        tc.r_all = r_all;
    }
    tc.slots = malloc((prob->nchunks ? prob->nchunks : 1) * tc.slot * sizeof *tc.slots);
    tc.bufs = malloc((size_t)jf_pool_size(prob->pool) * tc.buf * sizeof *tc.bufs);
    if (!tc.slots || !tc.bufs) goto nomem;
    jf_pool_run(prob->pool, prob->nchunks, triangle_task, &tc);

    double T[(JF_TRI_MAX + 1) * (JF_TRI_MAX + 1)];
    memset(T, 0, sizeof T);
    t->ssr = t->noise = 0;
    t->finite = 1;
    for (size_t ch = 0; ch < prob->nchunks; ch++) {
        double *S = tc.slots + ch * tc.slot;
        t->ssr += S[c * c];
        t->noise += S[c * c + 1];
        t->finite = t->finite && S[c * c + 2] != 0;
        if (!t->finite) break;
        if (ch == 0) memcpy(T, S, c * c * sizeof *T);
        else jf_lsq_fold(T, c, S, c); /* the chunk's triangle as c more rows */
    }
    for (size_t i = 0; i < np; i++) {
        for (size_t a = 0; a < np; a++) t->R[i * np + a] = a >= i ? T[a * c + i] : 0.0;
        t->qb[i] = T[np * c + i];
    }
    free(tc.slots);
    free(tc.bufs);
    free(J_all);
    free(r_all);
    return JF_OK;
nomem:
    free(tc.slots);
    free(tc.bufs);
    free(J_all);
    free(r_all);
    return JF_ERR_NOMEM;
}
