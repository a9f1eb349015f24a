/* soak: the library as a long-running service uses it, with the process's resources sampled
 * as it goes, to see that they level off (docs/PERFORMANCE.md, "Long-running use").
 *
 * Several threads take work items from one counter. Most items compile a model no earlier item
 * compiled (its own constant, one of a few shapes) and fit it; the others fit one of a few
 * "hot" models again (memory-cache hits, or disk-cache hits once they were unloaded; some with
 * a parameter held fixed), run a
 * batch of one (jf_fit_batch, jf_fit_batch_columns), fail on purpose (a model with a syntax
 * error, data with a NaN, an evaluation budget of 2), or fit without the disk cache. At chosen
 * moments the disk cache directory is emptied under the running fits (as `jitfit cache clear`
 * from another process would), and for a stretch made unwritable.
 *
 * Every --every items one line is printed: RSS and the heap in use (mallinfo2), open file
 * descriptors (/proc/self/fd), shared objects mapped from jitfit's private directories
 * (/proc/self/maps: "jitfit-PID-XXXXXX/kernels-N.so"), threads (/proc/self/task), entries
 * left in $TMPDIR whose names start with "jitfit-", entries in the cache directory, and the
 * memory cache's own counts. Nothing is asserted: it is a measurement tool.
 *
 * usage: soak [--items N] [--threads T] [--every K] [--no-disturb] [--gpu]
 *   --gpu fits on the GPU (JITFIT_CUDA_EMULATE=1: the emulator, whose device memory in use is
 *   then sampled too; each of its modules is a C++ compile of seconds, so use few items).
 *   Set TMPDIR and JITFIT_CACHE_DIR to private directories (the counts are of those), and
 *   JITFIT_CACHE_MODULES to try other limits.
 */
#define _GNU_SOURCE /* mallinfo2 */
#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../runtime/cache.h"
#include "../runtime/cuda_api.h"
#include "jitfit.h"

#define NPTS 64
#define HOT 6

static long items = 3000;
static int nthreads = 4;
static long every = 250;
static int disturb = 1;
static jf_device device = JF_DEVICE_CPU; /* --gpu: JF_DEVICE_GPU */

static atomic_long next_item;
static atomic_long done_items;
static atomic_long fails_expected, fails_unexpected, warnings_seen;
static char last_warning[512];
static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;

static jf_model *hot[HOT];
static const char *cache_dir;
static const char *tmp_dir;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- what the process holds ----------------------------------------------------------------- */

static long count_dir(const char *path, const char *prefix) {
    DIR *d = opendir(path);
    if (!d) return -1;
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (prefix && strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
        n++;
    }
    closedir(d);
    return n;
}

/* Distinct files mapped from jitfit's private directories (a module maps 4-5 segments of one
 * file), and all mappings. */
static void count_maps(long *modules, long *mappings) {
    *modules = *mappings = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return;
    char line[8192], last[8192] = "";
    while (fgets(line, sizeof line, f)) {
        (*mappings)++;
        char *p = strstr(line, "/kernels-");
        if (!p || !strstr(line, "/jitfit-")) continue;
        char *path = strchr(line, '/');
        if (strcmp(path, last) != 0) (*modules)++;
        snprintf(last, sizeof last, "%s", path);
    }
    fclose(f);
}

static double rss_mib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &rss) != 2) rss = 0;
        fclose(f);
    }
    return (double)rss * (double)sysconf(_SC_PAGESIZE) / 1048576.0;
}

/* Device memory in use (MiB), or -1 without a GPU (the emulator counts its own). */
static double device_mib(void) {
    size_t free_b = 0, total_b = 0;
    if (device != JF_DEVICE_GPU || jf_cuda_mem_info(&free_b, &total_b) != JF_OK) return -1;
    return (double)(total_b - free_b) / 1048576.0;
}

static void sample(const char *label, double t0) {
    long mods, maps;
    count_maps(&mods, &maps);
    struct mallinfo2 mi = mallinfo2();
    jf_cache_mem_stats cs;
    jf_cache_mem_stats_get(&cs);
    printf("%-8s %7ld %7.1f %8.1f %8.2f %7.2f %5ld %6ld %6ld %5ld %5ld %6ld %6zu %5zu %7zu %6ld "
           "%6ld\n",
           label, atomic_load(&done_items), now_s() - t0, rss_mib(),
           (double)mi.uordblks / 1048576.0, device_mib(), count_dir("/proc/self/fd", NULL), mods, maps,
           count_dir("/proc/self/task", NULL), count_dir(tmp_dir, "jitfit-"),
           count_dir(cache_dir, NULL), cs.loaded, cs.idle, cs.unloaded,
           atomic_load(&fails_unexpected), atomic_load(&warnings_seen));
    fflush(stdout);
}

/* ---- the work ------------------------------------------------------------------------------- */

/* Model i: a shape picked by i, with the constant 1 + i/1000 written in, so that every i
 * has source code of its own (constants are part of the generated code). */
static int model_text(long i, char *buf, size_t n) {
    static const char *const shapes[] = {
        "param a = 1\nparam b = 1\ny ~ a*exp(-b*x) + %ld.%03ld",
        "param a = 1\nparam b = 1\nparam c = 0\ny ~ a*exp(-b*x) + c*x + %ld.%03ld",
        "param a = 1\nparam b = 1\nparam c = 0\ny ~ a*exp(-b*x)*(1 + c*sin(x)) + %ld.%03ld",
        "param a = 1\nparam b = 1\nparam c = 0\ny ~ a*exp(-b*x) + c*x^2 + %ld.%03ld",
    };
    return snprintf(buf, n, shapes[i % 4], 1 + i / 1000, i % 1000);
}

static double model_const(long i) { return (double)(1 + i / 1000) + (double)(i % 1000) / 1000.0; }

static void make_data(double c, double *x, double *y) {
    for (int j = 0; j < NPTS; j++) {
        x[j] = 8.0 * j / NPTS;
        y[j] = 2.0 * exp(-0.5 * x[j]) + c;
    }
}

static jf_model *compile(const char *text) {
    jf_model *m = NULL;
    jf_diagnostics *d = NULL;
    jf_model_compile(text, (size_t)-1, NULL, &m, &d);
    jf_diagnostics_free(d);
    return m;
}

static void note_warning(const jf_fit_result *r) {
    if (!r || !r->warning) return;
    atomic_fetch_add(&warnings_seen, 1);
    pthread_mutex_lock(&print_lock);
    snprintf(last_warning, sizeof last_warning, "%s", r->warning);
    pthread_mutex_unlock(&print_lock);
}

/* One fit; returns 1 when it ran and converged. */
static int fit_one(const jf_model *m, double c, int no_cache, size_t max_nfev) {
    double x[NPTS], y[NPTS];
    make_data(c, x, y);
    jf_data d = {NPTS, x, 0, y, NULL};
    jf_fit_options o = jf_fit_options_default();
    o.nthreads = 1;
    o.device = device;
    o.no_cache = no_cache;
    o.max_nfev = max_nfev;
    jf_fit_result *r = NULL;
    char *err = NULL;
    int ok = jf_fit(m, &d, &o, &r, &err) == JF_OK && r->success;
    note_warning(r);
    jf_fit_result_free(r);
    jf_free(err);
    return ok;
}

static void do_item(long i) {
    char text[256];
    long kind = i % 20;
    if (kind < 12 || kind == 19) { /* a new model; 19: without the disk cache */
        model_text(i, text, sizeof text);
        jf_model *m = compile(text);
        if (!m || !fit_one(m, model_const(i), kind == 19, 0))
            atomic_fetch_add(&fails_unexpected, 1);
        jf_model_free(m);
    } else if (kind == 14) { /* a hot model with a parameter held (c = 0, else b = 0.5) */
        int h = (int)(i % HOT);
        size_t np = jf_model_num_params(hot[h]);
        double x[NPTS], y[NPTS], p0[3] = {1, 0.5, 0};
        int fixed[3] = {0, np < 3, np >= 3};
        make_data(model_const(100000 + h), x, y);
        jf_data d = {NPTS, x, 0, y, NULL};
        jf_fit_options o = jf_fit_options_default();
        o.nthreads = 1;
        o.device = device;
        o.p0 = p0;
        o.fixed = fixed;
        jf_fit_result *r = NULL;
        char *err = NULL;
        if (jf_fit(hot[h], &d, &o, &r, &err) != JF_OK || !r->success)
            atomic_fetch_add(&fails_unexpected, 1);
        note_warning(r);
        jf_fit_result_free(r);
        jf_free(err);
    } else if (kind < 15) { /* a hot model again */
        int h = (int)(i % HOT);
        if (!fit_one(hot[h], model_const(100000 + h), 0, 0)) atomic_fetch_add(&fails_unexpected, 1);
    } else if (kind == 15) { /* a batch of a hot model, results as objects */
        enum { NF = 8 };
        double x[NF][NPTS], y[NF][NPTS];
        jf_data d[NF];
        int h = (int)(i % HOT);
        for (int f = 0; f < NF; f++) {
            make_data(model_const(100000 + h), x[f], y[f]);
            d[f] = (jf_data){NPTS, x[f], 0, y[f], NULL};
        }
        d[NF - 1].n = 1; /* too few points: fails alone */
        jf_fit_options o = jf_fit_options_default();
        o.nthreads = 2;
        o.device = device;
        jf_fit_result *res[NF];
        char *errs[NF];
        jf_fit_batch(hot[h], NF, d, NULL, &o, res, errs);
        for (int f = 0; f < NF; f++) {
            if ((res[f] == NULL) != (f == NF - 1)) atomic_fetch_add(&fails_unexpected, 1);
            jf_fit_result_free(res[f]);
            jf_free(errs[f]);
        }
        atomic_fetch_add(&fails_expected, 1);
    } else if (kind == 16) { /* a batch of a new model, into columns */
        enum { NF = 6 };
        model_text(i, text, sizeof text);
        jf_model *m = compile(text);
        double x[NPTS], y[NPTS], params[NF * 3];
        int code[NF];
        make_data(model_const(i), x, y);
        jf_data d[NF];
        for (int f = 0; f < NF; f++) d[f] = (jf_data){NPTS, x, 0, y, NULL};
        jf_fit_options o = jf_fit_options_default();
        o.nthreads = 3;
        o.device = device;
        jf_batch_columns cols = {.code = code, .params = params};
        if (!m || jf_fit_batch_columns(m, NF, d, NULL, &o, &cols) != JF_OK)
            atomic_fetch_add(&fails_unexpected, 1);
        jf_model_free(m);
    } else if (kind == 17) { /* failures: a bad model, bad data */
        snprintf(text, sizeof text, "param a = 1\ny ~ a*exp(-x + %ld", i);
        jf_model *m = compile(text);
        if (m) atomic_fetch_add(&fails_unexpected, 1);
        jf_model_free(m);
        double x[NPTS], y[NPTS];
        make_data(1.0, x, y);
        y[3] = NAN;
        jf_data d = {NPTS, x, 0, y, NULL};
        jf_fit_result *r = NULL;
        char *err = NULL;
        if (jf_fit(hot[0], &d, NULL, &r, &err) == JF_OK) atomic_fetch_add(&fails_unexpected, 1);
        jf_fit_result_free(r);
        jf_free(err);
        atomic_fetch_add(&fails_expected, 2);
    } else { /* 18: a new model stopped by max_nfev */
        model_text(i, text, sizeof text);
        jf_model *m = compile(text);
        if (!m || fit_one(m, model_const(i) + 5, 0, 2)) atomic_fetch_add(&fails_unexpected, 1);
        jf_model_free(m);
        atomic_fetch_add(&fails_expected, 1);
    }
}

/* ---- disturbances --------------------------------------------------------------------------- */

/* What `jitfit cache clear` does, from outside the library's code. */
static long clear_cache_dir(void) {
    DIR *d = opendir(cache_dir);
    if (!d) return 0;
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".jfc") && unlinkat(dirfd(d), e->d_name, 0) == 0) n++;
    closedir(d);
    return n;
}

static void disturb_at(long at) {
    if (!disturb) return;
    if (at == items / 4 || at == items / 2) {
        long n = clear_cache_dir();
        pthread_mutex_lock(&print_lock);
        printf("# after item %ld: removed %ld cache entries under the running fits\n", at, n);
        pthread_mutex_unlock(&print_lock);
    } else if (at == 5 * items / 8) {
        chmod(cache_dir, 0500);
        printf("# after item %ld: cache directory made read-only\n", at);
    } else if (at == 3 * items / 4) {
        chmod(cache_dir, 0700);
        pthread_mutex_lock(&print_lock);
        printf("# after item %ld: cache directory writable again; last warning: %s\n", at,
               last_warning);
        pthread_mutex_unlock(&print_lock);
    }
}

static double t_start;

static void *worker(void *arg) {
    (void)arg;
    for (;;) {
        long i = atomic_fetch_add(&next_item, 1);
        if (i >= items) break;
        do_item(i);
        long done = atomic_fetch_add(&done_items, 1) + 1;
        disturb_at(done);
        if (done % every == 0) {
            pthread_mutex_lock(&print_lock);
            sample("run", t_start);
            pthread_mutex_unlock(&print_lock);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--items") == 0 && a + 1 < argc) items = atol(argv[++a]);
        else if (strcmp(argv[a], "--threads") == 0 && a + 1 < argc) nthreads = atoi(argv[++a]);
        else if (strcmp(argv[a], "--every") == 0 && a + 1 < argc) every = atol(argv[++a]);
        else if (strcmp(argv[a], "--no-disturb") == 0) disturb = 0;
        else if (strcmp(argv[a], "--gpu") == 0) device = JF_DEVICE_GPU;
        else {
            fprintf(stderr, "usage: soak [--items N] [--threads T] [--every K] [--no-disturb] "
                            "[--gpu]\n");
            return 2;
        }
    }
    if (nthreads < 1 || every < 1 || items < 1) return 2;
    tmp_dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    cache_dir = getenv("JITFIT_CACHE_DIR");
    if (!cache_dir || !*cache_dir) {
        fprintf(stderr, "soak: set JITFIT_CACHE_DIR to a private directory\n");
        return 2;
    }
    mkdir(cache_dir, 0700);
    printf("# soak: %ld items on %d threads; TMPDIR=%s JITFIT_CACHE_DIR=%s "
           "JITFIT_CACHE_MODULES=%s\n",
           items, nthreads, tmp_dir, cache_dir,
           getenv("JITFIT_CACHE_MODULES") ? getenv("JITFIT_CACHE_MODULES") : "(unset)");
    printf("%-8s %7s %7s %8s %8s %7s %5s %6s %6s %5s %5s %6s %6s %5s %7s %6s %6s\n", "#",
           "items", "sec", "rss_MiB", "heap_MiB", "dev_MiB", "fds", "so", "maps", "thr", "tmp", "cache", "loaded",
           "idle", "unload", "unexp", "warn");
    t_start = now_s();
    sample("start", t_start);
    for (int h = 0; h < HOT; h++) {
        char text[256];
        model_text(100000 + h, text, sizeof text);
        hot[h] = compile(text);
        if (!hot[h]) {
            fprintf(stderr, "soak: hot model %d does not compile\n", h);
            return 1;
        }
    }
    pthread_t *t = calloc((size_t)nthreads, sizeof *t);
    int started = 0;
    for (int i = 0; i < nthreads; i++) started += pthread_create(&t[i], NULL, worker, NULL) == 0;
    for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
    free(t);
    sample("end", t_start);
    for (int h = 0; h < HOT; h++) jf_model_free(hot[h]);
    printf("# %ld failures expected (and seen), %ld unexpected; %ld results with a warning\n",
           atomic_load(&fails_expected), atomic_load(&fails_unexpected),
           atomic_load(&warnings_seen));
    if (last_warning[0]) printf("# last warning: %s\n", last_warning);
    return 0;
}
