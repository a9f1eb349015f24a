/* Threads for the CPU solver: a small pool, and the data-parallel passes over one fit's points.
 *
 * A pass splits the points into chunks of a size that depends on n alone (at least
 * JF_CHUNK_MIN points, at most JF_CHUNKS_MAX chunks); every chunk is one task whose sums go to
 * its own slot, and the slots are added in chunk order on the calling thread. So the result is
 * bit-identical for any number of threads, and the batched API (one thread per fit) computes
 * exactly what jf_fit computes with many threads. The kernel pass itself is the generated
 * normal-equation kernel: one read of the data per trial point.
 *
 * The pool is plain pthreads (already a dependency of the library) rather than OpenMP: tasks
 * are claimed from an atomic counter, so who runs a chunk is timing-dependent, but nothing
 * else is.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "solver.h"

/* Smallest chunk: large enough that a task's overhead is noise against the kernel work. */
#define JF_CHUNK_MIN ((size_t)4096)
/* Most chunks per pass: bounds the per-chunk accumulator memory for huge n. */
#define JF_CHUNKS_MAX ((size_t)1024)

struct jf_pool {
    int nthreads;             /* threads including the caller */
    pthread_t *threads;       /* nthreads - 1 workers */
    pthread_mutex_t mu;       /* guards everything below except next */
    pthread_cond_t cv_work;   /* a new job or shutdown */
    pthread_cond_t cv_done;   /* the last worker finished the job */
    unsigned long generation; /* bumped for every job */
    int stop;                 /* 1: workers exit */
    int busy;                 /* workers still inside the current job */
    void (*fn)(void *, size_t, int); /* current job */
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
    long c = sysconf(_SC_NPROCESSORS_ONLN);
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

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    jf_pool *pool = wa->pool;
    int id = wa->id;
    free(wa);
    unsigned long seen = 0;
    pthread_mutex_lock(&pool->mu);
    for (;;) {
        while (!pool->stop && pool->generation == seen) pthread_cond_wait(&pool->cv_work, &pool->mu);
        if (pool->stop) break;
        seen = pool->generation;
        pthread_mutex_unlock(&pool->mu);
        run_tasks(pool, id);
        pthread_mutex_lock(&pool->mu);
        if (--pool->busy == 0) pthread_cond_signal(&pool->cv_done);
    }
    pthread_mutex_unlock(&pool->mu);
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
    pool->stop = 1;
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

void jf_pool_run(jf_pool *pool, size_t ntasks, void (*fn)(void *ctx, size_t task, int worker),
                 void *ctx) {
    if (!pool || ntasks <= 1) {
        for (size_t t = 0; t < ntasks; t++) fn(ctx, t, 0);
        return;
    }
    pthread_mutex_lock(&pool->mu);
    pool->fn = fn;
    pool->ctx = ctx;
    pool->ntasks = ntasks;
    atomic_store(&pool->next, 0);
    pool->busy = pool->nthreads - 1;
    pool->generation++;
    pthread_cond_broadcast(&pool->cv_work);
    pthread_mutex_unlock(&pool->mu);
    run_tasks(pool, 0);
    pthread_mutex_lock(&pool->mu);
    while (pool->busy > 0) pthread_cond_wait(&pool->cv_done, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
}

/* ---- passes over the data ------------------------------------------------------------------- */

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
    size_t chunk = (n + JF_CHUNKS_MAX - 1) / JF_CHUNKS_MAX;
    prob->chunk = chunk < JF_CHUNK_MIN ? JF_CHUNK_MIN : chunk;
    prob->nchunks = n ? (n + prob->chunk - 1) / prob->chunk : 0;
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
    prob->partial = NULL;
    prob->scratch = NULL;
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
    pass_ctx pc = {prob, p, loss, NULL, NULL};
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
    pass_ctx pc = {prob, p, JF_LOSS_LINEAR, r, J};
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
    pass_ctx pc = {prob, p, JF_LOSS_LINEAR, NULL, NULL};
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
