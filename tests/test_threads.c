/* The header's promise that any function may be called from several threads at once.
 *
 * Several threads compile models (the same text on two of them, the others different: a
 * many-parameter one among them, for the chunked normal_eq and BLAS), fit them with pools of
 * their own, fit batches (objects and columns, with batch_progress), evaluate them with the
 * interpreter and the compiled kernels and print them, all at once, in a kernel cache directory
 * that starts empty: so compiles of one model race in the memory cache and in the directory
 * (rename over rename), and the compiler identity is probed by many threads at once.
 * Every answer is checked against the truth, but a data race mostly shows only under
 * ThreadSanitizer: docs/TESTING.md says how to build and run this test there.
 *
 * Before them, alone: nthreads = 0 means the CPUs the caller may run on (its affinity), not
 * the machine's.
 */
#define _GNU_SOURCE /* sched_setaffinity, CPU_SET */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/jitfit.h"
#include "testlib.h"

#define NTHREADS 6
#define ROUNDS 3
#define NPTS 9000 /* above one chunk of points (4096): jf_fit runs a pool of workers */
#define NB 5      /* fits per batch */
#define NB_PTS 400
#define MAXP 32

static const char *const models[] = {
    "param a = 1\nparam k = 0.5 in [0, inf]\nparam c = 0\ny ~ a*exp(-k*x) + c",
    "param a = 1\nparam k = 0.5 in [0, inf]\nparam c = 0\ny ~ a*exp(-k*x) + c",
    "a*exp(-k*x) + c",
    /* d is held at 0 (jf_fit_options.fixed): the reduced model is compiled per call */
    "param a = 2\nparam k = 0.3\nparam c = 0.1\nparam d = 0\ny ~ a*exp(-k*x) + c + d*x",
    /* more parameters than JF_LARGE_P (16) */
    "a*exp(-k*x) + c + e1*0.001*sin(x) + e2*0.001*sin(2*x) + e3*0.001*sin(3*x) + "
    "e4*0.001*sin(4*x) + e5*0.001*sin(5*x) + e6*0.001*sin(6*x) + e7*0.001*sin(7*x) + "
    "e8*0.001*sin(8*x) + e9*0.001*cos(x) + e10*0.001*cos(2*x) + e11*0.001*cos(3*x) + "
    "e12*0.001*cos(4*x) + e13*0.001*cos(5*x) + e14*0.001*cos(6*x) + e15*0.001*cos(7*x)",
};
#define NMODELS (sizeof models / sizeof models[0])

static char cache_dir[] = "/tmp/jf_test_threadsXXXXXX";

/* What one thread found wrong: the checks run on the main thread (testlib's counters are not
 * for threads). */
typedef struct worker {
    int id;
    int failures;
    char first[512]; /* the first failure */
} worker;

__attribute__((format(printf, 2, 3))) static void failed(worker *w, const char *fmt, ...) {
    if (w->failures++) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->first, sizeof w->first, fmt, ap);
    va_end(ap);
}

/* y = 3 exp(-k x) + 0.5 with a small deterministic wiggle, x on [0, 10). */
static void make_data(size_t n, double k, double *x, double *y) {
    for (size_t i = 0; i < n; i++) {
        x[i] = 10.0 * (double)i / (double)n;
        y[i] = 3.0 * exp(-k * x[i]) + 0.5 + 1e-4 * sin(7.0 * (double)i);
    }
}

/* batch_progress: from one thread at a time, counts never beyond the total */
static void on_batch(void *ctx, size_t done, size_t total) {
    size_t *last = ctx;
    *last = done <= total ? done : (size_t)-1;
}

static void one_round(worker *w, int round, double *x, double *y, double *bx, double *by) {
    int pick = (w->id + round) % (int)NMODELS;
    jf_model *m = NULL;
    if (jf_model_compile(models[pick], (size_t)-1, NULL, &m, NULL) != JF_OK) {
        failed(w, "model %d did not compile", pick);
        return;
    }
    size_t np = jf_model_num_params(m);
    long k = jf_model_param_index(m, "k");
    double p0[MAXP] = {1, 0.5, 0, 0};
    static const int hold_d[4] = {0, 0, 0, 1};
    jf_fit_options o = jf_fit_options_default();
    o.p0 = p0;
    o.nthreads = 2;
    o.backend = (w->id + round) % 4 == 1 ? JF_BACKEND_INTERP : JF_BACKEND_C;
    o.loss = (w->id + round) % 3 == 1 ? JF_LOSS_SOFT_L1 : JF_LOSS_LINEAR;
    o.no_cache = (w->id + round) % 5 == 4;
    if (np == 4) o.fixed = hold_d;

    jf_data d = {.n = NPTS, .x = x, .y = y};
    jf_fit_result *r = NULL;
    if (jf_fit(m, &d, &o, &r, NULL) != JF_OK || !r) failed(w, "jf_fit failed");
    else if (!r->success || fabs(r->params[k] - 0.4) > 1e-3)
        failed(w, "jf_fit: k = %g, not %g", r->params[k], 0.4);
    jf_fit_result_free(r);

    jf_data bd[NB];
    for (int b = 0; b < NB; b++) {
        make_data(NB_PTS, 0.2 + 0.05 * b, bx + b * NB_PTS, by + b * NB_PTS);
        bd[b] = (jf_data){.n = NB_PTS, .x = bx + b * NB_PTS, .y = by + b * NB_PTS};
    }
    size_t last = 0;
    o.nthreads = 3;
    o.batch_progress = on_batch;
    o.batch_progress_ctx = &last;
    jf_fit_result *res[NB];
    if (jf_fit_batch(m, NB, bd, NULL, &o, res, NULL) != JF_OK)
        failed(w, "jf_fit_batch failed");
    for (int b = 0; b < NB; b++) {
        if (res[b] && fabs(res[b]->params[k] - (0.2 + 0.05 * b)) > 1e-3)
            failed(w, "batch: k = %g, not %g", res[b]->params[k], 0.2 + 0.05 * b);
        jf_fit_result_free(res[b]);
    }
    if (last != NB) failed(w, "batch_progress ended at %zu of %d", last, NB);
    double params[NB * MAXP];
    int code[NB];
    jf_batch_columns cols = {.code = code, .params = params};
    if (jf_fit_batch_columns(m, NB, bd, NULL, &o, &cols) != JF_OK)
        failed(w, "jf_fit_batch_columns failed");
    for (int b = 0; b < NB; b++)
        if (code[b] == JF_OK && fabs(params[b * (int)np + k] - (0.2 + 0.05 * b)) > 1e-3)
            failed(w, "columns: k = %g, not %g", params[b * (int)np + k], 0.2 + 0.05 * b);

    double pv[MAXP] = {3, 0.4, 0.5, 0}, xv = 1.5, v0, v1, g0[MAXP], g1[MAXP];
    if (jf_model_eval(m, pv, &xv, &v0, g0) != JF_OK ||
        jf_model_eval_backend(m, JF_BACKEND_C, pv, &xv, &v1, g1, NULL) != JF_OK)
        failed(w, "evaluation failed");
    else if (fabs(v0 - v1) > 1e-12 * fabs(v0)) failed(w, "eval: %g by C, %g interpreted", v1, v0);
    char *text = jf_model_expression_text(m);
    if (!text) failed(w, "no expression text");
    jf_free(text);
    for (size_t q = 0; q < np; q++) jf_free(jf_model_derivative_text(m, q));
    jf_model_free(m);
}

static void *run_worker(void *arg) {
    worker *w = arg;
    double *x = malloc(NPTS * sizeof *x), *y = malloc(NPTS * sizeof *y);
    double *bx = malloc(NB * NB_PTS * sizeof *bx), *by = malloc(NB * NB_PTS * sizeof *by);
    if (!x || !y || !bx || !by) {
        failed(w, "out of memory");
    } else {
        make_data(NPTS, 0.4, x, y);
        for (int round = 0; round < ROUNDS; round++) one_round(w, round, x, y, bx, by);
    }
    free(x);
    free(y);
    free(bx);
    free(by);
    return NULL;
}

/* The threads of this process now (from /proc), or 0 when that cannot be read. */
static int process_threads(void) {
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

/* progress: the most threads seen during the fit */
static void count_threads(void *ctx, const jf_iteration_info *info) {
    (void)info;
    int *most = ctx, n = process_threads();
    if (n > *most) *most = n;
}

/* The most threads during a fit of NPTS points (two chunks: room for two) with nthreads 0,
 * beyond those before it (OpenBLAS may have started its own). */
static int threads_during_fit(void) {
    static double x[NPTS], y[NPTS];
    make_data(NPTS, 0.4, x, y);
    jf_model *m = NULL;
    int most = 0;
    if (!CHECK(jf_model_compile(models[2], (size_t)-1, NULL, &m, NULL) == JF_OK)) return 0;
    jf_data d = {.n = NPTS, .x = x, .y = y};
    jf_fit_options o = jf_fit_options_default();
    o.progress = count_threads;
    o.progress_ctx = &most;
    jf_fit_result *r = NULL;
    int before = process_threads();
    CHECK(jf_fit(m, &d, &o, &r, NULL) == JF_OK && r && r->success);
    jf_fit_result_free(r);
    jf_model_free(m);
    return most - before + 1;
}

/* nthreads = 0 is every CPU the calling thread may run on: restricted to one (taskset -c 0, a
 * cpuset, a scheduler's allocation), a fit runs on the caller alone. It took the online CPUs
 * instead: two threads here under taskset -c 0 on two CPUs. */
static void test_affinity(void) {
    cpu_set_t all, one;
    if (process_threads() < 1 || sched_getaffinity(0, sizeof all, &all) != 0) {
        printf("affinity: not checked (no /proc/self/task or sched_getaffinity)\n");
        return;
    }
    int first = 0;
    while (first < CPU_SETSIZE && !CPU_ISSET(first, &all)) first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    if (!CHECK(sched_setaffinity(0, sizeof one, &one) == 0)) return;
    int alone = threads_during_fit();
    CHECK(sched_setaffinity(0, sizeof all, &all) == 0);
    int everywhere = threads_during_fit();
    printf("affinity: %d CPUs allowed; threads in a fit on one of them: %d, on all: %d\n",
           CPU_COUNT(&all), alone, everywhere);
    CHECK(alone == 1);
    if (CPU_COUNT(&all) > 1) CHECK(everywhere == 2); /* the check sees the pool when there is one */
}

int main(void) {
    if (!mkdtemp(cache_dir)) return jf_test_skip("cannot create a temporary cache directory");
    /* before any thread starts: the library reads the environment during calls */
    setenv("JITFIT_CACHE_DIR", cache_dir, 1);
    unsetenv("JITFIT_NO_CACHE");
    test_affinity();
    worker w[NTHREADS];
    pthread_t th[NTHREADS];
    int started = 0;
    memset(w, 0, sizeof w);
    for (int i = 0; i < NTHREADS; i++) {
        w[i].id = i;
        if (pthread_create(&th[i], NULL, run_worker, &w[i]) != 0) break;
        started++;
    }
    CHECK(started == NTHREADS);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < started; i++) {
        if (w[i].failures) fprintf(stderr, "thread %d: %d failures, first: %s\n", i,
                                   w[i].failures, w[i].first);
        CHECK(w[i].failures == 0);
    }
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    jf_test_run(cmd, NULL, NULL);
    return jf_test_finish();
}
