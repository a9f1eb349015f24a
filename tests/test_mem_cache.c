/* The memory cache's bound (runtime/cache.h, "in memory"): modules are reference-counted, at
 * most $JITFIT_CACHE_MODULES idle ones stay loaded (the least recently used is unloaded first),
 * a held module is never unloaded whatever the limit, and a module stored under two keys is one
 * module.
 *
 * First with stand-in modules whose unloads are recorded: the exact order of unloading, the
 * table's removal of keys amid long probe runs, the parsing of the limit, and threads taking and
 * releasing modules under a limit of 2 without one ever being unloaded while held. Then with
 * compiled C models in a fresh cache directory: more distinct models than the limit keep the
 * count of loaded modules bounded; a model whose kernels are held stays loaded, evaluates and
 * fits correctly through all of it; a model that was unloaded is fitted again from the disk
 * cache, or compiled again without it; threads fitting models under a limit of 1. Last, on the
 * CUDA emulator when the host has a C++ compiler: held CUDA kernels survive the unloading of
 * others, an unloaded CUDA module is built again, and an unloaded module's thread stacks are
 * unmapped with it.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/model.h"
#include "runtime/cache.h"
#include "runtime/cuda_api.h"
#include "runtime/cuda_emu.h"
#include "runtime/jit_nvrtc.h"
#include "runtime/kernels.h"
#include "tests/testlib.h"

static void set_limit(const char *v) { setenv("JITFIT_CACHE_MODULES", v, 1); }

static jf_cache_mem_stats stats(void) {
    jf_cache_mem_stats s;
    jf_cache_mem_stats_get(&s);
    return s;
}

/* ---- stand-in modules ------------------------------------------------------------------------ */

/* A stand-in module: its unloads, and the threads using it now. */
typedef struct fake {
    atomic_int users;    /* threads between taking it and releasing it */
    atomic_int unloads;  /* times unloaded */
    atomic_int bad;      /* unloads while a thread used it */
} fake;

static void fake_unload(void *p) {
    fake *f = p;
    if (atomic_load(&f->users) != 0) atomic_fetch_add(&f->bad, 1);
    atomic_fetch_add(&f->unloads, 1);
}

static jf_cache_key name(const char *what, int i) {
    char buf[64];
    int len = snprintf(buf, sizeof buf, "test_mem_cache %s %d", what, i);
    return jf_cache_hash(buf, (size_t)len);
}

/* Unloads every idle module (limit 0, applied at the release of a throwaway module). */
static void flush(void) {
    static fake dummy;
    set_limit("0");
    jf_cache_key k = name("flush", 0);
    jf_cache_mem_release(jf_cache_mem_put(&k, &dummy, fake_unload));
}

static void test_order(void) {
    static fake f[8];
    jf_cache_key k[8], a2 = name("alias", 0);
    for (int i = 0; i < 8; i++) k[i] = name("order", i);
    jf_cache_mem_stats s0 = stats();
    set_limit("2");
    jf_cache_entry *ea = jf_cache_mem_put(&k[0], &f[0], fake_unload);
    jf_cache_entry *eb = jf_cache_mem_put(&k[1], &f[1], fake_unload);
    jf_cache_entry *ec = jf_cache_mem_put(&k[2], &f[2], fake_unload);
    CHECK(ea && eb && ec && jf_cache_entry_module(eb) == &f[1]);
    /* a second key names the same module: one module, two keys */
    CHECK(jf_cache_mem_alias(&a2, ea) == 1);
    CHECK(jf_cache_mem_alias(&a2, ea) == 1);
    CHECK(jf_cache_mem_alias(&a2, eb) == 0); /* a2 names another module */
    jf_cache_mem_stats s = stats();
    CHECK(s.loaded == s0.loaded + 3 && s.keys == s0.keys + 4 && s.idle == s0.idle);
    /* three idle, two kept: the least recently released goes, with both its keys */
    jf_cache_mem_release(ea);
    jf_cache_mem_release(eb);
    CHECK(f[0].unloads == 0 && stats().idle == s0.idle + 2);
    jf_cache_mem_release(ec);
    CHECK(f[0].unloads == 1 && f[1].unloads == 0 && f[2].unloads == 0);
    s = stats();
    CHECK(s.loaded == s0.loaded + 2 && s.idle == s0.idle + 2 && s.keys == s0.keys + 2);
    CHECK(s.unloaded == s0.unloaded + 1);
    CHECK(jf_cache_mem_get(&k[0]) == NULL && jf_cache_mem_get(&a2) == NULL);
    CHECK(!jf_cache_mem_has(&k[0]) && jf_cache_mem_has(&k[1]));
    /* a lookup is a use: b, taken again, outlives c */
    eb = jf_cache_mem_get(&k[1]);
    CHECK(eb && jf_cache_entry_module(eb) == &f[1] && stats().idle == s0.idle + 1);
    jf_cache_entry *ed = jf_cache_mem_put(&k[3], &f[3], fake_unload);
    jf_cache_mem_release(ed);
    CHECK(f[2].unloads == 0);
    jf_cache_mem_release(eb);
    CHECK(f[2].unloads == 1 && f[1].unloads == 0 && f[3].unloads == 0);
    /* jf_cache_mem_has is not a use: d stays the least recently used */
    CHECK(jf_cache_mem_has(&k[3]));
    jf_cache_mem_release(jf_cache_mem_put(&k[4], &f[4], fake_unload));
    CHECK(f[3].unloads == 1 && f[1].unloads == 0 && f[4].unloads == 0);
    /* a second put of a key gives the first module; the caller's own is not stored */
    static fake other;
    jf_cache_entry *e = jf_cache_mem_put(&k[4], &other, fake_unload);
    CHECK(e && jf_cache_entry_module(e) == &f[4]);
    jf_cache_mem_release(e);
    CHECK(other.unloads == 0);
    /* a held module stays loaded at limit 0; idle ones go at once */
    set_limit("0");
    jf_cache_entry *eh = jf_cache_mem_put(&k[5], &f[5], fake_unload);
    jf_cache_mem_release(jf_cache_mem_put(&k[6], &f[6], fake_unload));
    CHECK(f[6].unloads == 1 && f[1].unloads == 1 && f[4].unloads == 1 && f[5].unloads == 0);
    s = stats();
    CHECK(s.loaded == s0.loaded + 1 && s.idle == s0.idle && s.keys == s0.keys + 1);
    e = jf_cache_mem_get(&k[5]);
    CHECK(e == eh);
    jf_cache_mem_release(e);
    CHECK(f[5].unloads == 0);
    jf_cache_mem_release(eh);
    CHECK(f[5].unloads == 1);
    jf_cache_mem_release(NULL);
    s = stats();
    CHECK(s.loaded == s0.loaded && s.keys == s0.keys && s.unloaded == s0.unloaded + 7);
    for (int i = 0; i < 8; i++) CHECK(f[i].bad == 0 && f[i].unloads <= 1);
}

/* Many keys, so that removals happen inside long probe runs: the keys that stay must all be
 * found, the removed ones not, and removed ones can come back. */
static void test_removal(void) {
    enum { N = 700, KEEP = 300 };
    static fake f[N];
    static jf_cache_key k[N];
    flush();
    jf_cache_mem_stats s0 = stats();
    set_limit("100000");
    for (int i = 0; i < N; i++) {
        k[i] = name("removal", i);
        jf_cache_mem_release(jf_cache_mem_put(&k[i], &f[i], fake_unload));
    }
    CHECK(stats().idle == s0.idle + N);
    char limit[32];
    snprintf(limit, sizeof limit, "%d", KEEP);
    set_limit(limit);
    static fake g;
    jf_cache_key kg = name("removal", -1);
    jf_cache_mem_release(jf_cache_mem_put(&kg, &g, fake_unload)); /* trims: N + 1 - KEEP go */
    int wrong = 0;
    for (int i = 0; i < N; i++) {
        int kept = i >= N + 1 - KEEP;
        wrong += jf_cache_mem_has(&k[i]) != kept || f[i].unloads != !kept;
    }
    CHECK(wrong == 0);
    CHECK(jf_cache_mem_has(&kg) && g.unloads == 0);
    jf_cache_mem_stats s = stats();
    CHECK(s.idle == KEEP && s.keys == s0.keys + KEEP && s.loaded == s0.loaded + KEEP);
    set_limit("100000");
    for (int i = 0; i < N; i++) {
        jf_cache_entry *e = jf_cache_mem_get(&k[i]);
        if (!e) e = jf_cache_mem_put(&k[i], &f[i], fake_unload);
        wrong += !e || jf_cache_entry_module(e) != &f[i];
        jf_cache_mem_release(e);
    }
    CHECK(wrong == 0);
    for (int i = 0; i < N; i++) wrong += !jf_cache_mem_has(&k[i]);
    CHECK(wrong == 0);
    flush();
    s = stats();
    CHECK(s.loaded == s0.loaded && s.idle == 0 && s.keys == s0.keys);
}

static void test_limit_parsing(void) {
    static const struct {
        const char *v;
        size_t want;
    } cases[] = {{"", JF_CACHE_MEM_MODULES}, {"abc", JF_CACHE_MEM_MODULES},
                 {"-1", JF_CACHE_MEM_MODULES}, {"+3", JF_CACHE_MEM_MODULES},
                 {"5x", JF_CACHE_MEM_MODULES}, {"0", 0}, {"7", 7}, {"1000", 1000}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        set_limit(cases[i].v);
        if (!CHECK(jf_cache_mem_limit() == cases[i].want))
            fprintf(stderr, "JITFIT_CACHE_MODULES='%s'\n", cases[i].v);
    }
    unsetenv("JITFIT_CACHE_MODULES");
    CHECK(jf_cache_mem_limit() == JF_CACHE_MEM_MODULES);
}

/* ---- stand-ins on many threads --------------------------------------------------------------- */

#define FT_THREADS 8
#define FT_ITERS 20000
#define FT_KEYS 12

/* Every stand-in a thread put: each put makes a new one (a key's module may be unloaded and put
 * again while its old copy is still being unloaded), so that an unload can be told from a use of
 * the next copy. */
static fake *ft_made[FT_THREADS * FT_ITERS];
static atomic_int ft_count;
static atomic_int ft_wrong;

static void *ft_worker(void *arg) {
    unsigned seed = (unsigned)(size_t)arg * 2654435761u + 1;
    for (int it = 0; it < FT_ITERS; it++) {
        seed = seed * 1103515245u + 12345u;
        int key = (int)((seed >> 16) % FT_KEYS);
        jf_cache_key k = name("threads", key);
        jf_cache_entry *e = jf_cache_mem_get(&k);
        if (!e) {
            fake *mine = calloc(1, sizeof *mine);
            if (!mine) {
                atomic_fetch_add(&ft_wrong, 1);
                continue;
            }
            e = jf_cache_mem_put(&k, mine, fake_unload);
            if (!e || jf_cache_entry_module(e) != mine) free(mine); /* never stored */
            else ft_made[atomic_fetch_add(&ft_count, 1)] = mine;
            if (!e) {
                atomic_fetch_add(&ft_wrong, 1);
                continue;
            }
        }
        fake *f = jf_cache_entry_module(e);
        atomic_fetch_add(&f->users, 1);
        if (atomic_load(&f->unloads) != 0) atomic_fetch_add(&ft_wrong, 1);
        /* sometimes hold it while taking a second one */
        jf_cache_entry *e2 = NULL;
        if (seed & 0x100) {
            jf_cache_key k2 = name("threads", (key + 1) % FT_KEYS);
            e2 = jf_cache_mem_get(&k2);
        }
        if (atomic_load(&f->unloads) != 0) atomic_fetch_add(&ft_wrong, 1);
        atomic_fetch_sub(&f->users, 1);
        jf_cache_mem_release(e2);
        jf_cache_mem_release(e);
    }
    return NULL;
}

static void test_threads_stand_ins(void) {
    flush();
    jf_cache_mem_stats s0 = stats();
    set_limit("2");
    pthread_t t[FT_THREADS];
    int started = 0;
    for (int i = 0; i < FT_THREADS; i++)
        started += pthread_create(&t[i], NULL, ft_worker, (void *)(size_t)(i + 1)) == 0;
    CHECK(started == FT_THREADS);
    for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
    CHECK(ft_wrong == 0);
    jf_cache_mem_stats s = stats();
    CHECK(s.idle <= 2 && s.loaded == s.idle && s.loaded <= FT_KEYS);
    int n = atomic_load(&ft_count), bad = 0, unloaded = 0;
    for (int i = 0; i < n; i++) {
        bad += ft_made[i]->bad + (ft_made[i]->unloads > 1);
        unloaded += ft_made[i]->unloads;
    }
    CHECK(bad == 0);
    CHECK((size_t)unloaded == s.unloaded - s0.unloaded);
    printf("stand-ins on %d threads: %d modules made, %d unloaded, %zu left\n", FT_THREADS, n,
           unloaded, s.loaded);
    CHECK(n > 100); /* the limit made them come and go */
    flush();
    for (int i = 0; i < n; i++) {
        bad += ft_made[i]->unloads != 1;
        free(ft_made[i]);
    }
    CHECK(bad == 0);
}

/* ---- compiled models ------------------------------------------------------------------------- */

#define NPTS 200

static double xs[NPTS], ys[NPTS];

/* y = 2 exp(-0.5 x) + c on [0, 8), exactly. */
static void make_data(double c) {
    for (int i = 0; i < NPTS; i++) {
        xs[i] = 8.0 * i / NPTS;
        ys[i] = 2.0 * exp(-0.5 * xs[i]) + c;
    }
}

/* The model "a*exp(-b*x) + c" with the constant written in as c = K + 0.25 (distinct text,
 * distinct kernels). */
static jf_model *numbered_model(int K) {
    char text[128];
    snprintf(text, sizeof text, "param a = 1\nparam b = 1\ny ~ a*exp(-b*x) + %d.25", K);
    jf_model *m = NULL;
    CHECK(jf_model_compile(text, (size_t)-1, NULL, &m, NULL) == JF_OK);
    return m;
}

/* Fits m (a numbered_model(K)) to its data; checks the answer; returns the result's cache. */
static int fit_numbered(const jf_model *m, int K, int no_cache) {
    make_data(K + 0.25);
    jf_data d = {NPTS, xs, 0, ys, NULL};
    jf_fit_options o = jf_fit_options_default();
    o.nthreads = 1;
    o.no_cache = no_cache;
    o.device = JF_DEVICE_CPU;
    jf_fit_result *r = NULL;
    char *err = NULL;
    int st = jf_fit(m, &d, &o, &r, &err);
    if (!CHECK(st == JF_OK && r)) {
        fprintf(stderr, "fit of model %d: %s\n", K, err ? err : "?");
        jf_free(err);
        return -1;
    }
    int ok = CHECK(r->success && r->backend == JF_BACKEND_C);
    ok &= CHECK_NEAR(r->params[0], 2.0, 1e-7);
    ok &= CHECK_NEAR(r->params[1], 0.5, 1e-7);
    if (!ok) fprintf(stderr, "fit of model %d: %s\n", K, r->message);
    int cache = r->cache;
    jf_fit_result_free(r);
    return cache;
}

/* The file the shell runs for command word (a search of $PATH); 0 when none. */
static int path_of(const char *word, char *buf, size_t n) {
    const char *path = getenv("PATH");
    while (path && *path) {
        size_t len = strcspn(path, ":");
        snprintf(buf, n, "%.*s/%s", (int)len, path, word);
        if (len && access(buf, X_OK) == 0) return 1;
        path += len + (path[len] == ':');
    }
    return 0;
}

static void test_models(void) {
    flush();
    enum { LIMIT = 4, MODELS = 12 };
    set_limit("4");
    jf_cache_mem_stats s0 = stats();
    /* held: the kernels of H, taken before everything else */
    jf_model *h = numbered_model(1000);
    jf_kernels *kh = NULL;
    CHECK(jf_kernels_get(h, JF_BACKEND_C, NULL, &kh, NULL) == JF_OK);
    CHECK(kh && jf_kernels_backend(kh) == JF_BACKEND_C);
    /* one module under its fast and its full key */
    jf_cache_mem_stats s = stats();
    CHECK(s.loaded == s0.loaded + 1 && s.keys == s0.keys + 2 && s.idle == s0.idle);

    /* B, fitted once, then left idle */
    jf_model *b = numbered_model(2000);
    CHECK(fit_numbered(b, 2000, 0) != JF_CACHE_MEMORY);
    CHECK(fit_numbered(b, 2000, 0) == JF_CACHE_MEMORY);

    size_t most = 0;
    for (int i = 0; i < MODELS; i++) {
        jf_model *m = numbered_model(i);
        int c = fit_numbered(m, i, 0);
        CHECK(c == JF_CACHE_MISS || c == JF_CACHE_DISK);
        jf_model_free(m);
        s = stats();
        if (s.loaded > most) most = s.loaded;
        CHECK(s.idle <= LIMIT);
    }
    printf("%d models at limit %d: at most %zu loaded, %zu unloaded\n", MODELS + 2, LIMIT, most,
           s.unloaded - s0.unloaded);
    CHECK(most <= LIMIT + 1); /* the idle ones and H's */
    CHECK(s.unloaded - s0.unloaded >= MODELS + 1 - LIMIT);

    /* H's module stayed: its held kernels still run (a module unloaded under them would crash
     * here), and match the interpreter */
    double p[2] = {1.7, 0.3}, r[NPTS], want[NPTS];
    make_data(0.0);
    jf_data_view v = {xs, NPTS, ys, NULL};
    jf_kernels_residual(kh, p, &v, 0, NPTS, r);
    jf_kernels *ki = NULL;
    CHECK(jf_kernels_get(h, JF_BACKEND_INTERP, NULL, &ki, NULL) == JF_OK);
    jf_kernels_residual(ki, p, &v, 0, NPTS, want);
    jf_kernels_free(ki);
    int differ = 0;
    for (int i = 0; i < NPTS; i++) differ += !(fabs(r[i] - want[i]) <= 1e-13 * (1 + fabs(want[i])));
    CHECK(differ == 0);
    /* and a fit of H finds it in memory */
    CHECK(fit_numbered(h, 1000, 0) == JF_CACHE_MEMORY);

    /* B was unloaded: fitted again from the disk cache */
    CHECK(fit_numbered(b, 2000, 0) == JF_CACHE_DISK);
    /* model 0 was unloaded too: without the disk cache it is compiled again */
    jf_model *m0 = numbered_model(0);
    CHECK(fit_numbered(m0, 0, 1) == JF_CACHE_MISS);

    jf_model_free(m0);

    /* limit 0: only H stays loaded between fits */
    set_limit("0");
    jf_model *m1 = numbered_model(1);
    CHECK(fit_numbered(m1, 1, 0) == JF_CACHE_DISK);
    s = stats();
    CHECK(s.loaded == s0.loaded + 1 && s.idle == 0);
    CHECK(fit_numbered(m1, 1, 0) == JF_CACHE_DISK);
    jf_model_free(m1);

    /* the same compiler by another command (its path): a new fast key finds the module by its
     * full key and becomes a third name for it, still one module */
    char cc[4096];
    if (path_of("cc", cc, sizeof cc)) {
        set_limit("4");
        jf_cache_mem_stats s1 = stats();
        jf_jit_options jo;
        memset(&jo, 0, sizeof jo);
        jo.cc = cc;
        jf_kernels *k2 = NULL;
        CHECK(jf_kernels_get(h, JF_BACKEND_C, &jo, &k2, NULL) == JF_OK);
        CHECK(k2 && jf_kernels_cache_result(k2) == JF_CACHE_MEMORY);
        s = stats();
        CHECK(s.loaded == s1.loaded && s.keys == s1.keys + 1);
        jf_kernels_free(k2);
        CHECK(jf_kernels_get(h, JF_BACKEND_C, &jo, &k2, NULL) == JF_OK); /* by the fast key */
        CHECK(k2 && jf_kernels_cache_result(k2) == JF_CACHE_MEMORY);
        jf_kernels_free(k2);
    } else {
        printf("no cc on PATH: the third key is not checked\n");
    }

    jf_kernels_free(kh);
    s = stats();
    CHECK(s.idle == s.loaded && s.idle <= LIMIT);
    jf_model_free(h);
    jf_model_free(b);
}

/* ---- compiled models on many threads --------------------------------------------------------- */

#define MT_THREADS 4
#define MT_ROUNDS 6
#define MT_MODELS 5

static jf_model *mt_models[MT_MODELS];
static atomic_int mt_wrong;

/* Fits model i of mt_models on data of its own (testlib's checks are not for threads). */
static void *mt_worker(void *arg) {
    int id = (int)(size_t)arg;
    double x[NPTS], y[NPTS];
    for (int round = 0; round < MT_ROUNDS; round++) {
        int i = (id + round) % MT_MODELS, K = 3000 + i;
        for (int j = 0; j < NPTS; j++) {
            x[j] = 8.0 * j / NPTS;
            y[j] = 2.0 * exp(-0.5 * x[j]) + K + 0.25;
        }
        jf_data d = {NPTS, x, 0, y, NULL};
        jf_fit_options o = jf_fit_options_default();
        o.nthreads = 1;
        o.device = JF_DEVICE_CPU;
        jf_fit_result *r = NULL;
        if (jf_fit(mt_models[i], &d, &o, &r, NULL) != JF_OK || !r->success ||
            r->backend != JF_BACKEND_C || fabs(r->params[0] - 2.0) > 1e-7 ||
            fabs(r->params[1] - 0.5) > 1e-7)
            atomic_fetch_add(&mt_wrong, 1);
        jf_fit_result_free(r);
    }
    return NULL;
}

static void test_threads_models(void) {
    flush();
    set_limit("1");
    jf_cache_mem_stats s0 = stats();
    for (int i = 0; i < MT_MODELS; i++) mt_models[i] = numbered_model(3000 + i);
    pthread_t t[MT_THREADS];
    int started = 0;
    for (int i = 0; i < MT_THREADS; i++)
        started += pthread_create(&t[i], NULL, mt_worker, (void *)(size_t)i) == 0;
    CHECK(started == MT_THREADS);
    for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
    CHECK(mt_wrong == 0);
    jf_cache_mem_stats s = stats();
    CHECK(s.idle <= 1 && s.loaded == s.idle);
    CHECK(s.unloaded - s0.unloaded >= MT_MODELS - 1);
    printf("%d threads fitting %d models at limit 1: %zu unloaded\n", MT_THREADS, MT_MODELS,
           s.unloaded - s0.unloaded);
    for (int i = 0; i < MT_MODELS; i++) jf_model_free(mt_models[i]);
}

/* ---- CUDA modules on the emulator ------------------------------------------------------------ */

/* r and J of model K's CUDA kernels at a few points against the CPU's interpreter. */
static int cuda_agrees(const jf_cuda_kernels *ck, const jf_model *m) {
    enum { N = 8 };
    double p[2] = {1.3, 0.7}, x[N], r[N], J[N * 2], rw[N], Jw[N * 2];
    for (int i = 0; i < N; i++) x[i] = 0.5 * i;
    char why[512];
    if (jf_cuda_jacobian_rows(ck, p, x, N, NULL, NULL, N, r, J, why, sizeof why) != JF_OK) {
        fprintf(stderr, "CUDA jacobian_rows: %s\n", why);
        return 0;
    }
    jf_kernels *ki = NULL;
    if (jf_kernels_get(m, JF_BACKEND_INTERP, NULL, &ki, NULL) != JF_OK) return 0;
    jf_data_view v = {x, N, NULL, NULL};
    jf_kernels_jacobian_row(ki, p, &v, 0, N, rw, Jw);
    jf_kernels_free(ki);
    int ok = 1;
    for (int i = 0; i < N * 2; i++) ok &= fabs(J[i] - Jw[i]) <= 1e-12 * (1 + fabs(Jw[i]));
    for (int i = 0; i < N; i++) ok &= fabs(r[i] - rw[i]) <= 1e-12 * (1 + fabs(rw[i]));
    return ok;
}

/* Bytes of the process's anonymous read-write mappings of 256 MiB or more (adjacent ones may
 * have merged): the size of an emulated module's thread stacks (cuda_emu_device.h), which no
 * other mapping of this test reaches. */
static unsigned long long big_anon_bytes(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return 0;
    unsigned long long total = 0, lo, hi;
    char line[512], perms[8];
    while (fgets(line, sizeof line, f)) {
        int path = 0;
        if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %n", &lo, &hi, perms, &path) < 3) continue;
        /* no path: %n has skipped the blanks and the newline after the inode */
        if (strcmp(perms, "rw-p") == 0 && line[path] == '\0' && hi - lo >= (256ull << 20))
            total += hi - lo;
    }
    fclose(f);
    return total;
}

static unsigned long long emu_big_before; /* big_anon_bytes before the emulator's modules */
static int emu_ran;

static void test_cuda_emulated(void) {
    emu_big_before = big_anon_bytes();
    setenv("JITFIT_CUDA_EMULATE", "1", 1);
    jf_cuda_emulate_reread();
    char status[256];
    if (jf_cuda_status(status, sizeof status) != 1) {
        printf("CUDA emulator unavailable (%s): its modules are not checked\n", status);
        return;
    }
    flush();
    set_limit("1");
    jf_cache_mem_stats s0 = stats();
    jf_model *m[3];
    jf_cuda_kernels *ck[3] = {NULL, NULL, NULL};
    char why[512];
    for (int i = 0; i < 3; i++) {
        m[i] = numbered_model(4000 + i);
        int st = jf_cuda_kernels_get(m[i], NULL, JF_LOSS_LINEAR, &ck[i], NULL, why, sizeof why,
                                     NULL, 0);
        if (!CHECK(st == JF_OK)) {
            fprintf(stderr, "CUDA kernels of model %d: %s\n", i, why);
            for (int j = 0; j <= i; j++) jf_model_free(m[j]);
            for (int j = 0; j < i; j++) jf_cuda_kernels_free(ck[j]);
            return;
        }
        /* 1 and 2 are let go at once: at limit 1, 1 is unloaded when 2 is released */
        if (i > 0) {
            jf_cuda_kernels_free(ck[i]);
            ck[i] = NULL;
        }
    }
    jf_cache_mem_stats s = stats();
    CHECK(s.loaded == s0.loaded + 2 && s.idle == s0.idle + 1 && s.unloaded == s0.unloaded + 1);
    /* model 0's module, held all along, still runs */
    CHECK(cuda_agrees(ck[0], m[0]));
    /* model 1's is built again (the emulator has no disk cache), and runs */
    jf_cache_result cache = JF_CACHE_NONE;
    CHECK(jf_cuda_kernels_get(m[1], NULL, JF_LOSS_LINEAR, &ck[1], &cache, why, sizeof why, NULL,
                              0) == JF_OK);
    CHECK(cache == JF_CACHE_MISS);
    if (ck[1]) CHECK(cuda_agrees(ck[1], m[1]));
    /* model 2's is still there */
    CHECK(jf_cuda_kernels_get(m[2], NULL, JF_LOSS_LINEAR, &ck[2], &cache, why, sizeof why, NULL,
                              0) == JF_OK);
    CHECK(cache == JF_CACHE_MEMORY);
    for (int i = 0; i < 3; i++) {
        jf_cuda_kernels_free(ck[i]);
        jf_model_free(m[i]);
    }
    s = stats();
    CHECK(s.idle <= 1 && s.loaded == s.idle);
    printf("CUDA emulator: %zu modules unloaded\n", s.unloaded - s0.unloaded);
    /* the idle module left is unloaded by main's flush with the emulator off: by the
     * emulator all the same (else the sanitizer build reports its records as leaked) */
    CHECK(s.idle == 1);
    emu_ran = 1;
    unsetenv("JITFIT_CUDA_EMULATE");
    jf_cuda_emulate_reread();
}

static char cache_dir[] = "/tmp/jf_test_mem_cacheXXXXXX";

int main(void) {
    unsetenv("JITFIT_CC");
    unsetenv("JITFIT_NO_CACHE");
    unsetenv("JITFIT_CUDA_EMULATE");
    if (!mkdtemp(cache_dir)) return jf_test_skip("cannot create a temporary directory");
    setenv("JITFIT_CACHE_DIR", cache_dir, 1);
    test_limit_parsing();
    test_order();
    test_removal();
    test_threads_stand_ins();
    test_models();
    test_threads_models();
    test_cuda_emulated();
    flush();
    CHECK(stats().loaded == 0);
    /* every emulated module is unloaded now, and its thread stacks with it */
    if (emu_ran && !CHECK(big_anon_bytes() <= emu_big_before))
        fprintf(stderr, "emulated modules unloaded, but %llu MiB of stacks still mapped (%llu "
                "before)\n", big_anon_bytes() >> 20, emu_big_before >> 20);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    CHECK(system(cmd) == 0);
    return jf_test_finish();
}
