/* Tests of the kernel cache (runtime/cache.c) through the C backend (runtime/kernels.c):
 * miss then hit in memory and on disk; corrupt, truncated and foreign entries are rebuilt, never
 * trusted; a directory writable by others or owned by someone else is refused with a warning
 * while the fit still runs; many processes on a cold cache all succeed; JITFIT_NO_CACHE=1
 * writes nothing; directory resolution; key sensitivity; the `jitfit cache` command; and the
 * cost of an in-memory hit.
 *
 * Every case uses a fresh temporary directory through JITFIT_CACHE_DIR, never the user's cache.
 * The memory cache lives as long as the process, so anything that must reach the disk runs in
 * a forked child (a new process, as a second `jitfit` invocation would be).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "runtime/cache.h"
#include "runtime/kernels.h"
#include "tests/testlib.h"

static char root[] = "/tmp/jf_test_cache_XXXXXX";
static int ncase;

/* A fresh cache directory path below root (not created), made the current JITFIT_CACHE_DIR. */
static const char *fresh_dir(void) {
    static char path[256];
    snprintf(path, sizeof path, "%s/case%d", root, ++ncase);
    setenv("JITFIT_CACHE_DIR", path, 1);
    return path;
}

static jf_model *compile(const char *text) {
    jf_model *m = NULL;
    CHECK(jf_model_compile(text, (size_t)-1, NULL, &m, NULL) == JF_OK);
    return m;
}

/* What a child process saw. */
typedef struct outcome {
    int ok;           /* 1 when the child reported */
    int backend;      /* jf_backend of the kernels */
    int cache;        /* jf_cache_result */
    int value_ok;     /* the kernels computed the right value */
    char warning[1024]; /* the warning, "" for none */
} outcome;

/* In a new process: compile `text`, get its C kernels, evaluate at one point, report. */
static outcome in_child(const char *text) {
    outcome o;
    memset(&o, 0, sizeof o);
    int p[2];
    if (pipe(p) != 0) return o;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        jf_model *m = NULL;
        jf_kernels *k = NULL;
        char *warn = NULL;
        outcome c;
        memset(&c, 0, sizeof c);
        if (jf_model_compile(text, (size_t)-1, NULL, &m, NULL) == JF_OK &&
            jf_kernels_get(m, JF_BACKEND_C, NULL, &k, &warn) == JF_OK) {
            c.ok = 1;
            c.backend = jf_kernels_backend(k);
            c.cache = jf_kernels_cache_result(k);
            double params[8] = {1.5, 0.5, 2, 0.25, 0.75, 1, 1, 1}, x = 0.3, r, want;
            jf_data_view dv = {&x, 1, NULL, NULL};
            jf_kernels_residual(k, params, &dv, 0, 1, &r);
            jf_model_eval(m, params, &x, &want, NULL);
            c.value_ok = r == want;
            if (warn) snprintf(c.warning, sizeof c.warning, "%s", warn);
        }
        ssize_t w = write(p[1], &c, sizeof c);
        _exit(w == (ssize_t)sizeof c ? 0 : 1);
    }
    close(p[1]);
    if (pid > 0) {
        ssize_t got = 0;
        while (got < (ssize_t)sizeof o) {
            ssize_t r = read(p[0], (char *)&o + got, sizeof o - (size_t)got);
            if (r <= 0) break;
            got += r;
        }
        if (got != (ssize_t)sizeof o) memset(&o, 0, sizeof o);
        int ws;
        waitpid(pid, &ws, 0);
    }
    close(p[0]);
    return o;
}

/* Entries and leftover temporaries in dir. */
static int count_files(const char *dir, int *tmps) {
    int n = 0;
    if (tmps) *tmps = 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strstr(e->d_name, ".jfc")) n++;
        else if (tmps && strncmp(e->d_name, ".tmp-", 5) == 0) (*tmps)++;
    }
    closedir(d);
    return n;
}

/* The path of the (single) entry in dir into buf. */
static int entry_path(const char *dir, char *buf, size_t n) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int found = 0;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".jfc")) {
            snprintf(buf, n, "%s/%s", dir, e->d_name);
            found = 1;
        }
    closedir(d);
    return found;
}

static const char *model_a = "a*exp(-b*x)*sin(c*x+d)+e";

static void test_miss_then_hit(void) {
    const char *dir = fresh_dir();
    outcome o = in_child(model_a);
    CHECK(o.ok && o.backend == JF_BACKEND_C && o.cache == JF_CACHE_MISS && o.value_ok);
    CHECK_STREQ(o.warning, "");
    CHECK(count_files(dir, NULL) == 1);
    struct stat st;
    CHECK(stat(dir, &st) == 0 && (st.st_mode & 07777) == 0700);
    o = in_child(model_a);
    CHECK(o.ok && o.backend == JF_BACKEND_C && o.cache == JF_CACHE_DISK && o.value_ok);
    CHECK(count_files(dir, NULL) == 1);
}

/* In this process, last (forked children would inherit the memory cache): loaded once, then
 * from memory, also for another model object of the same formula. */
static void test_memory(void) {
    const char *dir = fresh_dir();
    outcome o = in_child(model_a);
    CHECK(o.ok && o.cache == JF_CACHE_MISS && count_files(dir, NULL) == 1);
    jf_model *m = compile(model_a);
    jf_model *m2 = compile(model_a); /* another model object with the same formula */
    jf_kernels *k = NULL;
    CHECK(jf_kernels_get(m, JF_BACKEND_C, NULL, &k, NULL) == JF_OK);
    CHECK(k && jf_kernels_cache_result(k) == JF_CACHE_DISK);
    jf_kernels_free(k);
    CHECK(jf_kernels_get(m, JF_BACKEND_C, NULL, &k, NULL) == JF_OK);
    CHECK(k && jf_kernels_cache_result(k) == JF_CACHE_MEMORY && jf_kernels_backend(k) == JF_BACKEND_C);
    jf_kernels_free(k);
    CHECK(jf_kernels_get(m2, JF_BACKEND_C, NULL, &k, NULL) == JF_OK);
    CHECK(k && jf_kernels_cache_result(k) == JF_CACHE_MEMORY);
    jf_kernels_free(k);

    /* an in-memory hit costs well under 10 µs (more under the sanitizers: ASan, TSan) */
    enum { N = 2000 };
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < N; i++) {
        jf_kernels_get(m, JF_BACKEND_C, NULL, &k, NULL);
        jf_kernels_free(k);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / N / 1e3;
    printf("in-memory hit: %.2f us\n", us);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    CHECK(us < 50.0);
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
    CHECK(us < 50.0);
#else
    CHECK(us < 10.0);
#endif
#else
    CHECK(us < 10.0);
#endif
    jf_model_free(m);
    jf_model_free(m2);
}

/* Damages the entry, checks that the next process rebuilds it and the one after loads it. */
static void damaged(const char *what, void (*damage)(const char *path, const char *dir)) {
    const char *dir = fresh_dir();
    outcome o = in_child(model_a);
    char path[512];
    if (!CHECK(o.ok && o.cache == JF_CACHE_MISS && entry_path(dir, path, sizeof path))) return;
    damage(path, dir);
    o = in_child(model_a);
    if (!CHECK(o.ok && o.backend == JF_BACKEND_C && o.cache == JF_CACHE_MISS && o.value_ok))
        fprintf(stderr, "%s entry was not rebuilt (cache result %d)\n", what, o.cache);
    o = in_child(model_a);
    if (!CHECK(o.ok && o.cache == JF_CACHE_DISK && o.value_ok))
        fprintf(stderr, "rebuilt %s entry was not used\n", what);
    int tmps;
    CHECK(count_files(dir, &tmps) == 1 && tmps == 0);
}

static void flip_payload_byte(const char *path, const char *dir) {
    (void)dir;
    int fd = open(path, O_RDWR);
    unsigned char c;
    off_t at = JF_CACHE_HEADER_SIZE + 1000;
    if (CHECK(fd >= 0) && CHECK(pread(fd, &c, 1, at) == 1)) {
        c ^= 0x40;
        CHECK(pwrite(fd, &c, 1, at) == 1);
    }
    close(fd);
}

static void truncate_half(const char *path, const char *dir) {
    (void)dir;
    struct stat st;
    CHECK(stat(path, &st) == 0 && truncate(path, st.st_size / 2) == 0);
}

static void truncate_header(const char *path, const char *dir) {
    (void)dir;
    CHECK(truncate(path, 10) == 0);
}

/* Another model's entry, renamed to this key's name. */
static void foreign(const char *path, const char *dir) {
    (void)dir;
    outcome o = in_child("p*x + q");
    CHECK(o.ok && o.cache == JF_CACHE_MISS);
    DIR *d = opendir(dir);
    struct dirent *e;
    char other[512] = "";
    while (d && (e = readdir(d)) != NULL) {
        char full[512];
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        if (strstr(e->d_name, ".jfc") && strcmp(full, path) != 0) snprintf(other, sizeof other, "%s", full);
    }
    if (d) closedir(d);
    CHECK(other[0] && rename(other, path) == 0);
}

static void test_damaged_entries(void) {
    damaged("corrupt", flip_payload_byte);
    damaged("truncated", truncate_half);
    damaged("header-only", truncate_header);
    damaged("foreign", foreign);

    /* the verification itself, entry by entry */
    const char *dir = fresh_dir();
    jf_cache_dir cd;
    CHECK(jf_cache_dir_open(NULL, 0, 1, &cd) == JF_CACHE_DIR_OK);
    CHECK_STREQ(cd.path, dir);
    jf_cache_key_parts parts = {"c", "source", "cc 1.0", "-O2", ""};
    jf_cache_key key = jf_cache_key_make(&parts);
    unsigned char payload[3000];
    for (size_t i = 0; i < sizeof payload; i++) payload[i] = (unsigned char)(i * 7);
    char why[512];
    CHECK(jf_cache_disk_store(&cd, &key, JF_CACHE_KIND_C_SO, payload, sizeof payload, why,
                              sizeof why) == JF_OK);
    unsigned char *got = NULL;
    size_t size = 0;
    CHECK(jf_cache_disk_load(&cd, &key, JF_CACHE_KIND_C_SO, &got, &size, why, sizeof why) ==
          JF_CACHE_ENTRY_HIT);
    CHECK(got && size == sizeof payload && memcmp(got, payload, size) == 0);
    free(got);
    CHECK(jf_cache_disk_load(&cd, &key, JF_CACHE_KIND_CUDA_CUBIN, &got, &size, why, sizeof why) ==
          JF_CACHE_ENTRY_INVALID);
    CHECK_CONTAINS(why, "another kind");
    parts.flags = "-O3";
    jf_cache_key other = jf_cache_key_make(&parts);
    CHECK(jf_cache_disk_load(&cd, &other, JF_CACHE_KIND_C_SO, &got, &size, why, sizeof why) ==
          JF_CACHE_ENTRY_ABSENT);
    char p1[512], p2[512];
    jf_cache_entry_path(&cd, &key, p1, sizeof p1);
    jf_cache_entry_path(&cd, &other, p2, sizeof p2);
    CHECK(link(p1, p2) == 0);
    CHECK(jf_cache_disk_load(&cd, &other, JF_CACHE_KIND_C_SO, &got, &size, why, sizeof why) ==
          JF_CACHE_ENTRY_INVALID);
    CHECK_CONTAINS(why, "another key");
    unlink(p2);
    CHECK(symlink(p1, p2) == 0); /* a link is never followed */
    CHECK(jf_cache_disk_load(&cd, &other, JF_CACHE_KIND_C_SO, &got, &size, why, sizeof why) ==
          JF_CACHE_ENTRY_INVALID);
    unlink(p2);
    /* a corrupt byte in the header's hash */
    int fd = open(p1, O_RDWR);
    unsigned char c = 0;
    CHECK(fd >= 0 && pread(fd, &c, 1, 45) == 1);
    c ^= 1;
    CHECK(pwrite(fd, &c, 1, 45) == 1);
    close(fd);
    CHECK(jf_cache_disk_load(&cd, &key, JF_CACHE_KIND_C_SO, &got, &size, why, sizeof why) ==
          JF_CACHE_ENTRY_INVALID);
    CHECK_CONTAINS(why, "corrupt");
    /* extended to terabytes (sparse): refused by the header's size, not read into memory */
    const off_t huge = (off_t)1 << 43;
    if (truncate(p1, huge) == 0) {
        CHECK(jf_cache_disk_load(&cd, &key, JF_CACHE_KIND_C_SO, &got, &size, why, sizeof why) ==
              JF_CACHE_ENTRY_INVALID);
        CHECK_CONTAINS(why, "truncated or padded");
        CHECK(truncate(p1, JF_CACHE_HEADER_SIZE + sizeof payload) == 0);
    }
    size_t entries = 0;
    uint64_t bytes = 0;
    CHECK(jf_cache_disk_info(&cd, &entries, &bytes) == JF_OK && entries == 1 &&
          bytes == JF_CACHE_HEADER_SIZE + sizeof payload);
    size_t removed = 0;
    CHECK(jf_cache_disk_clear(&cd, &removed, NULL, 0) == JF_OK && removed == 1);
    CHECK(jf_cache_disk_info(&cd, &entries, &bytes) == JF_OK && entries == 0);
}

/* Refused directories: the kernels still compile and the fit still runs, with a warning. */
static void test_bad_permissions(void) {
    const char *dir = fresh_dir();
    CHECK(mkdir(dir, 0700) == 0 && chmod(dir, 0777) == 0);
    outcome o = in_child(model_a);
    CHECK(o.ok && o.backend == JF_BACKEND_C && o.cache == JF_CACHE_MISS && o.value_ok);
    CHECK_CONTAINS(o.warning, "kernel cache not used");
    CHECK_CONTAINS(o.warning, "writable by others (mode 0777)");
    CHECK(count_files(dir, NULL) == 0);
    CHECK(chmod(dir, 0770) == 0);
    o = in_child(model_a);
    CHECK_CONTAINS(o.warning, "writable by its group");

    /* the fit runs and reports the warning */
    jf_model *m = compile("a*exp(-b*x) + c");
    if (m) {
        enum { N = 40 };
        double x[N], y[N];
        for (int i = 0; i < N; i++) {
            x[i] = 0.1 * i;
            y[i] = 2.0 * exp(-0.7 * x[i]) + 0.5 + 1e-3 * sin(7.0 * i);
        }
        jf_data data = {N, x, 0, y, NULL};
        jf_fit_options fo = jf_fit_options_default();
        double p0[3] = {1, 1, 0};
        fo.p0 = p0;
        fo.nthreads = 1;
        jf_fit_result *r = NULL;
        char *err = NULL;
        int st = jf_fit(m, &data, &fo, &r, &err);
        if (CHECK(st == JF_OK && r)) {
            CHECK(r->success);
            CHECK_NEAR(r->params[0], 2.0, 1e-2);
            CHECK(r->backend == JF_BACKEND_C);
            CHECK_CONTAINS(r->warning, "writable by its group");
        } else {
            fprintf(stderr, "fit: %s\n", err ? err : "?");
        }
        jf_fit_result_free(r);
        jf_free(err);
        jf_model_free(m);
    }
    CHECK(count_files(dir, NULL) == 0);

    /* owned by someone else: only root can arrange that */
    if (geteuid() == 0) {
        dir = fresh_dir();
        CHECK(mkdir(dir, 0700) == 0 && chown(dir, 12345, 12345) == 0);
        o = in_child(model_a);
        CHECK(o.ok && o.backend == JF_BACKEND_C && o.value_ok);
        CHECK_CONTAINS(o.warning, "belongs to uid 12345");
        CHECK(count_files(dir, NULL) == 0);
    } else {
        printf("not root: ownership refusal not tested\n");
    }
    /* not a directory */
    dir = fresh_dir();
    FILE *f = fopen(dir, "w");
    if (f) fclose(f);
    o = in_child(model_a);
    CHECK(o.ok && o.backend == JF_BACKEND_C);
    CHECK_CONTAINS(o.warning, "not a directory");
}

/* >= 8 processes on a cold cache: all succeed, one valid entry, no temporary left. */
static void test_concurrency(void) {
    enum { NPROC = 10 };
    const char *dir = fresh_dir();
    const char *text = "k1*exp(-k2*x) + k3*x^2";
    int go[2];
    CHECK(pipe(go) == 0);
    pid_t pids[NPROC];
    fflush(NULL);
    for (int i = 0; i < NPROC; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            close(go[1]);
            char c;
            /* start together: wait until the parent closes the pipe */
            while (read(go[0], &c, 1) > 0) {
            }
            jf_model *m = NULL;
            jf_kernels *k = NULL;
            int code = 1;
            if (jf_model_compile(text, (size_t)-1, NULL, &m, NULL) == JF_OK &&
                jf_kernels_get(m, JF_BACKEND_C, NULL, &k, NULL) == JF_OK &&
                jf_kernels_backend(k) == JF_BACKEND_C) {
                double p[3] = {1, 2, 3}, x = 0.5, r, want;
                jf_data_view dv = {&x, 1, NULL, NULL};
                jf_kernels_residual(k, p, &dv, 0, 1, &r);
                jf_model_eval(m, p, &x, &want, NULL);
                code = r == want ? 10 + (int)jf_kernels_cache_result(k) : 2;
            }
            _exit(code);
        }
    }
    close(go[0]);
    close(go[1]);
    int ok = 0, misses = 0, disk = 0;
    for (int i = 0; i < NPROC; i++) {
        int ws;
        if (pids[i] > 0 && waitpid(pids[i], &ws, 0) == pids[i] && WIFEXITED(ws) &&
            WEXITSTATUS(ws) >= 10) {
            ok++;
            misses += WEXITSTATUS(ws) == 10 + JF_CACHE_MISS;
            disk += WEXITSTATUS(ws) == 10 + JF_CACHE_DISK;
        }
    }
    printf("concurrent processes: %d of %d succeeded (%d compiled, %d loaded from disk)\n", ok,
           NPROC, misses, disk);
    CHECK(ok == NPROC);
    int tmps;
    CHECK(count_files(dir, &tmps) == 1 && tmps == 0);
    outcome o = in_child(text);
    CHECK(o.ok && o.cache == JF_CACHE_DISK);

    /* the same through the command line, when it exists */
    dir = fresh_dir();
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd %s && for i in 1 2 3 4 5 6 7 8 9 10; do "
             "( '%s' eval 'g1*cos(g2*x)+g3' --params g1=1,g2=2,g3=3 --at x=0.5 --backend c "
             "> out$i 2>&1; echo $? > rc$i ) & done; wait; cat rc* | sort | uniq -c; cat out1",
             root, jf_test_cli());
    char *out = NULL;
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    CHECK_CONTAINS(out, "     10 0\n");
    CHECK_CONTAINS(out, "value: 3.5403023058681398");
    free(out);
    CHECK(count_files(dir, &tmps) == 1 && tmps == 0);
}

/* Writes an executable script text as root/name and makes it $JITFIT_CC; 0 or -1. */
static int use_cc_script(const char *name, const char *text, char *path, size_t n) {
    return jf_test_use_cc_script(root, name, text, path, n);
}

/* A new process does not run `cc --version` again while the compiler binary is unchanged. */
static void test_identity_remembered(void) {
    const char *dir = fresh_dir();
    char wrapper[512], log[512], script[1024];
    snprintf(log, sizeof log, "%s/cc-wrapper.log", root);
    snprintf(script, sizeof script,
             "#!/bin/sh\nif [ \"$1\" = --version ]; then echo probe >> '%s'; fi\nexec cc \"$@\"\n",
             log);
    if (use_cc_script("cc-wrapper.sh", script, wrapper, sizeof wrapper) != 0) return;
    outcome o = in_child(model_a);
    CHECK(o.ok && o.backend == JF_BACKEND_C && o.cache == JF_CACHE_MISS);
    o = in_child(model_a);
    CHECK(o.ok && o.cache == JF_CACHE_DISK);
    char *text = jf_test_read_file(log, NULL);
    CHECK_STREQ(text, "probe\n");
    free(text);
    /* a changed compiler (new mtime) is probed again; same version, so the entry still fits */
    struct timespec ts[2] = {{0, UTIME_OMIT}, {1000000000, 0}};
    CHECK(utimensat(AT_FDCWD, wrapper, ts, 0) == 0);
    o = in_child(model_a);
    CHECK(o.ok && o.cache == JF_CACHE_DISK);
    text = jf_test_read_file(log, NULL);
    CHECK_STREQ(text, "probe\nprobe\n");
    free(text);
    unsetenv("JITFIT_CC");
    (void)dir;
}

/* A compiler started through a launcher ($JITFIT_CC = "ccache gcc", "distcc gcc") is the later
 * word: when it is upgraded, a new process probes it again and gets a new key, even though the
 * launcher, the first word, is unchanged. Before, the identity remembered for the launcher's
 * stat signature kept the old version, and the old compiler's objects were loaded. */
static void test_identity_launcher(void) {
    fresh_dir();
    char launcher[512], inner[512], cmd[1100];
    if (use_cc_script("launcher.sh", "#!/bin/sh\nexec \"$@\"\n", launcher, sizeof launcher) != 0)
        return;
    static const char *const versions[] = {"inner-cc 1.0", "inner-cc 2.00"};
    for (int v = 0; v < 2; v++) {
        char script[512];
        snprintf(script, sizeof script,
                 "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '%s'; exit 0; fi\n"
                 "exec cc \"$@\"\n", versions[v]);
        if (use_cc_script("inner-cc.sh", script, inner, sizeof inner) != 0) return;
        snprintf(cmd, sizeof cmd, "%s %s", launcher, inner);
        setenv("JITFIT_CC", cmd, 1);
        outcome o = in_child(model_a);
        if (!CHECK(o.ok && o.backend == JF_BACKEND_C && o.cache == JF_CACHE_MISS))
            fprintf(stderr, "  %s: cache %d (2: disk)\n", versions[v], o.cache);
        o = in_child(model_a);
        CHECK(o.ok && o.backend == JF_BACKEND_C && o.cache == JF_CACHE_DISK);
    }
    unsetenv("JITFIT_CC");
}

/* A compiler that exits 0 but leaves no loadable object: the fit falls back to the interpreter
 * and nothing is stored (an entry would be read, fail to load and be rewritten by every later
 * process). */
static void test_broken_compiler_not_stored(void) {
    static const char *const bodies[] = {
        /* writes garbage where the object should go */
        "while [ $# -gt 0 ]; do if [ \"$1\" = -o ]; then echo 'not an object' > \"$2\"; fi; "
        "shift; done\n",
        /* writes nothing at all */
        ":\n",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        const char *dir = fresh_dir();
        char wrapper[512], name[64], text[1024];
        snprintf(name, sizeof name, "broken-cc%zu.sh", i);
        snprintf(text, sizeof text,
                 "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'broken-cc 1.0'; exit 0; fi\n%s"
                 "exit 0\n", bodies[i]);
        if (use_cc_script(name, text, wrapper, sizeof wrapper) != 0) return;
        outcome o = in_child(model_a);
        CHECK(o.ok && o.backend == JF_BACKEND_INTERP && o.value_ok);
        CHECK_CONTAINS(o.warning, "cannot load");
        int tmps;
        CHECK(count_files(dir, &tmps) == 0 && tmps == 0);
        unsetenv("JITFIT_CC");
        /* the real compiler then fills the entry as usual */
        o = in_child(model_a);
        CHECK(o.ok && o.backend == JF_BACKEND_C && o.cache == JF_CACHE_MISS);
        CHECK(count_files(dir, NULL) == 1);
    }
}

/* A compiler that hangs (in the compile or in the --version probe) is killed after
 * $JITFIT_CC_TIMEOUT seconds and the fit goes on with the interpreter. */
static void test_compiler_timeout(void) {
    static const char *const scripts[] = {
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'slow-cc 1.0'; exit 0; fi\nsleep 60\n",
        "#!/bin/sh\nif [ \"$1\" = --version ]; then sleep 60; fi\nexec cc \"$@\"\n",
    };
    static const char *const want[] = {"did not finish within 1 s",
                                       "--version' did not finish within 1 s"};
    for (size_t i = 0; i < sizeof scripts / sizeof scripts[0]; i++) {
        const char *dir = fresh_dir();
        char wrapper[512], name[64];
        snprintf(name, sizeof name, "slow-cc%zu.sh", i);
        if (use_cc_script(name, scripts[i], wrapper, sizeof wrapper) != 0) return;
        setenv("JITFIT_CC_TIMEOUT", "1", 1);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        outcome o = in_child(model_a);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        CHECK(o.ok && o.backend == JF_BACKEND_INTERP && o.value_ok);
        CHECK(s < 45.0); /* killed: not a timing check, the compiler would sleep 60 s */
        CHECK_CONTAINS(o.warning, want[i]);
        CHECK(count_files(dir, NULL) == 0);
        unsetenv("JITFIT_CC");
        unsetenv("JITFIT_CC_TIMEOUT");
    }
}

/* A compiler killed at its time limit cannot remove its own temporaries (gcc's ccXXXXXX.s in
 * $TMPDIR): they go to the compile's private directory, which is removed, not to $TMPDIR, where
 * every timed-out compile used to leave one for good. */
static void test_compiler_timeout_temporaries(void) {
    fresh_dir();
    char wrapper[512], tmpdir[512], saved[1024] = "";
    const char *t = getenv("TMPDIR");
    if (t) snprintf(saved, sizeof saved, "%s", t);
    snprintf(tmpdir, sizeof tmpdir, "%s/timeout-tmp", root);
    CHECK(mkdir(tmpdir, 0700) == 0);
    if (use_cc_script("temp-cc.sh",
                      "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'temp-cc 1.0'; exit 0; fi\n"
                      "echo asm > \"${TMPDIR:-/tmp}/ccTEST01.s\"\nsleep 60\n",
                      wrapper, sizeof wrapper) != 0)
        return;
    setenv("JITFIT_CC_TIMEOUT", "1", 1);
    setenv("TMPDIR", tmpdir, 1);
    outcome o = in_child(model_a);
    CHECK(o.ok && o.backend == JF_BACKEND_INTERP && o.value_ok);
    CHECK_CONTAINS(o.warning, "did not finish within 1 s");
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    int left = 0;
    while (d && (e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') {
            fprintf(stderr, "  left in $TMPDIR: %s\n", e->d_name);
            left++;
        }
    if (d) closedir(d);
    CHECK(left == 0);
    if (saved[0]) setenv("TMPDIR", saved, 1);
    else unsetenv("TMPDIR");
    unsetenv("JITFIT_CC");
    unsetenv("JITFIT_CC_TIMEOUT");
}

/* A compiler that has exited but left a process in the background holding its output open (a
 * wrapper that starts a compile server, a script's `cmd &`) has finished: its kernels are used
 * at once, not after $JITFIT_CC_TIMEOUT waiting for the end of output that never comes. */
static void test_compiler_leaves_background_process(void) {
    const char *dir = fresh_dir();
    char wrapper[512], pids[512], script[1024];
    snprintf(pids, sizeof pids, "%s/bg-cc.pids", root);
    /* in the --version probe (stdout captured) and in the compile (stderr captured) */
    snprintf(script, sizeof script,
             "#!/bin/sh\nsleep 60 & echo $! >> '%s'\n"
             "if [ \"$1\" = --version ]; then echo 'bg-cc 1.0'; exit 0; fi\nexec cc \"$@\"\n",
             pids);
    if (use_cc_script("bg-cc.sh", script, wrapper, sizeof wrapper) != 0) return;
    setenv("JITFIT_CC_TIMEOUT", "20", 1);
    outcome o = in_child(model_a);
    if (!CHECK(o.ok && o.backend == JF_BACKEND_C && o.cache == JF_CACHE_MISS && o.value_ok))
        fprintf(stderr, "  warning: %s\n", o.warning);
    CHECK_STREQ(o.warning, "");
    CHECK(count_files(dir, NULL) == 1);
    unsetenv("JITFIT_CC");
    unsetenv("JITFIT_CC_TIMEOUT");
    /* the sleeps this test started */
    FILE *f = fopen(pids, "r");
    long pid;
    while (f && fscanf(f, "%ld", &pid) == 1)
        if (pid > 1) kill((pid_t)pid, SIGTERM);
    if (f) fclose(f);
}

/* The state letter of process pid from /proc (R, S, Z, ...), or 0 when it is gone. */
static char proc_state(long pid) {
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char *got = fgets(line, sizeof line, f);
    fclose(f);
    char *paren = got ? strrchr(line, ')') : NULL;
    return paren && paren[1] == ' ' ? paren[2] : 0;
}

/* Ctrl-C while the compiler runs (SIGINT to jitfit's process group, as a terminal sends it)
 * ends the compiler too, although it runs in a process group of its own: it must not go on
 * compiling, or hang, with nobody left to wait for it. */
static void test_interrupt_stops_compiler(void) {
    fresh_dir();
    char wrapper[512], pidfile[512], script[2048];
    snprintf(pidfile, sizeof pidfile, "%s/interrupted-cc.pid", root);
    unlink(pidfile);
    snprintf(script, sizeof script,
             "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'slow-cc 1.0'; exit 0; fi\n"
             "echo $$ > '%s.tmp' && mv '%s.tmp' '%s'\nexec sleep 60\n",
             pidfile, pidfile, pidfile);
    if (use_cc_script("interrupted-cc.sh", script, wrapper, sizeof wrapper) != 0) return;
    char tmpdir[512]; /* the interrupted compile's directory stays: below root, not in /tmp */
    snprintf(tmpdir, sizeof tmpdir, "%s/interrupted-tmp", root);
    CHECK(mkdir(tmpdir, 0700) == 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0); /* a group of its own, as a shell gives a foreground job */
        setenv("TMPDIR", tmpdir, 1);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execl(jf_test_cli(), "jitfit", "eval", "h1*cos(h2*x)+h3", "--params", "h1=1,h2=2,h3=3",
              "--at", "x=0.5", "--backend", "c", (char *)NULL);
        _exit(127);
    }
    unsetenv("JITFIT_CC");
    if (!CHECK(pid > 0)) return;
    long cc = 0;
    for (int i = 0; i < 3000 && cc == 0; i++) { /* the compiler has started: up to 30 s */
        FILE *f = fopen(pidfile, "r");
        if (f) {
            if (fscanf(f, "%ld", &cc) != 1) cc = 0;
            fclose(f);
        }
        if (cc == 0) usleep(10000);
    }
    kill(-pid, SIGINT);
    int ws = 0;
    CHECK(waitpid(pid, &ws, 0) == pid && WIFSIGNALED(ws) && WTERMSIG(ws) == SIGINT);
    if (!CHECK(cc > 0)) return;
    char state = 'S';
    for (int i = 0; i < 500 && state != 0 && state != 'Z'; i++) { /* up to 5 s */
        state = proc_state(cc);
        if (state != 0 && state != 'Z') usleep(10000);
    }
    if (!CHECK(state == 0 || state == 'Z'))
        fprintf(stderr, "  the compiler (pid %ld) still runs after Ctrl-C (state %c)\n", cc, state);
    kill((pid_t)cc, SIGKILL); /* the test's own compiler, if it was left running */
}

/* Ctrl-C while the compiler is being started (posix_spawn has not returned its pid yet): it is
 * ended too. The start is made long (60 ms or so) by a PATH of 40000 entries before the
 * compiler's directory, which posix_spawnp searches in the child while jitfit waits; the
 * signal is sent 20 ms after the compiler's --version probe ran, so within the compile's start.
 * Before, jitfit died before it tracked the compiler, which then ran on, orphaned. */
static void test_interrupt_while_starting_compiler(void) {
    fresh_dir();
    char dir[512], path[512], marker[512], pidfile[512], script[4096], cc[600];
    snprintf(dir, sizeof dir, "%s/starting-bin", root);
    snprintf(marker, sizeof marker, "%s/starting-cc.probed", root);
    snprintf(pidfile, sizeof pidfile, "%s/starting-cc.pid", root);
    unlink(marker);
    unlink(pidfile);
    CHECK(mkdir(dir, 0700) == 0);
    snprintf(script, sizeof script,
             "#!/bin/sh\nif [ \"$1\" = --version ]; then : > '%s'; echo 'starting-cc 1.0'; "
             "exit 0; fi\necho $$ > '%s.tmp' && mv '%s.tmp' '%s'\nexec sleep 60\n",
             marker, pidfile, pidfile, pidfile);
    if (use_cc_script("starting-bin/starting-cc", script, cc, sizeof cc) != 0) return;
    unsetenv("JITFIT_CC");
    size_t cap = 40000 * 3 + sizeof dir + 32;
    char *long_path = malloc(cap);
    if (!CHECK(long_path != NULL)) return;
    long_path[0] = '\0';
    for (int i = 0; i < 40000; i++) memcpy(long_path + 3 * i, "/x:", 4);
    snprintf(long_path + 3 * 40000, cap - 3 * 40000, "%s:/usr/bin:/bin", dir);
    snprintf(path, sizeof path, "%s/starting-tmp", root);
    CHECK(mkdir(path, 0700) == 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        setenv("TMPDIR", path, 1);
        setenv("PATH", long_path, 1);
        setenv("JITFIT_CC", "starting-cc", 1);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execl(jf_test_cli(), "jitfit", "eval", "h1*cos(h2*x)+h4", "--params", "h1=1,h2=2,h4=3",
              "--at", "x=0.5", "--backend", "c", (char *)NULL);
        _exit(127);
    }
    free(long_path);
    if (!CHECK(pid > 0)) return;
    for (int i = 0; i < 3000 && access(marker, F_OK) != 0; i++) usleep(10000); /* up to 30 s */
    usleep(20000);
    kill(-pid, SIGINT);
    int ws = 0;
    CHECK(waitpid(pid, &ws, 0) == pid && WIFSIGNALED(ws) && WTERMSIG(ws) == SIGINT);
    usleep(300000); /* a compiler started after all would have written its pid by now */
    long started = 0;
    FILE *f = fopen(pidfile, "r");
    if (f) {
        if (fscanf(f, "%ld", &started) != 1) started = 0;
        fclose(f);
    }
    char state = started ? 'S' : 0;
    for (int i = 0; i < 500 && state != 0 && state != 'Z'; i++) { /* up to 5 s */
        state = proc_state(started);
        if (state != 0 && state != 'Z') usleep(10000);
    }
    if (!CHECK(state == 0 || state == 'Z'))
        fprintf(stderr, "  the compiler (pid %ld) still runs after Ctrl-C (state %c)\n", started,
                state);
    if (started) kill((pid_t)started, SIGKILL);
}

/* A $TMPDIR that cannot be used (removed since it was set, a file) does not cost the fit its
 * compiled kernels: the compile and the load of a cached entry go to /tmp instead, as the
 * compiler itself does. */
static void test_tmpdir_unusable(void) {
    char saved[1024] = "", file[512], gone[512];
    const char *t = getenv("TMPDIR");
    if (t) snprintf(saved, sizeof saved, "%s", t);
    snprintf(file, sizeof file, "%s/tmpdir-file", root);
    snprintf(gone, sizeof gone, "%s/tmpdir-gone", root);
    FILE *f = fopen(file, "w");
    if (f) fclose(f);
    const char *const tmpdirs[] = {gone, file};
    for (size_t i = 0; i < 2; i++) {
        fresh_dir();
        setenv("TMPDIR", tmpdirs[i], 1);
        outcome o = in_child(model_a); /* compiled */
        if (!CHECK(o.ok && o.backend == JF_BACKEND_C && o.cache == JF_CACHE_MISS && o.value_ok))
            fprintf(stderr, "  TMPDIR=%s: %s\n", tmpdirs[i], o.warning);
        CHECK_STREQ(o.warning, "");
        o = in_child(model_a); /* loaded from the disk cache */
        CHECK(o.ok && o.backend == JF_BACKEND_C && o.cache == JF_CACHE_DISK && o.value_ok);
    }
    if (saved[0]) setenv("TMPDIR", saved, 1);
    else unsetenv("TMPDIR");
}

/* A jf_fit refused for its data (no response values) compiles nothing: the data are checked
 * before the kernels are obtained, so the cache stays empty. */
static void test_bad_data_no_compile(void) {
    const char *dir = fresh_dir();
    pid_t pid = fork();
    if (pid == 0) {
        jf_model *m = NULL;
        /* a model no other test compiles: the forked child inherits the memory cache */
        if (jf_model_compile("a*exp(-b*x)+c*x+0.5", (size_t)-1, NULL, &m, NULL) != JF_OK)
            _exit(3);
        double x[5] = {0, 1, 2, 3, 4};
        jf_data d = {5, x, 0, NULL, NULL};
        jf_fit_result *r = NULL;
        char *err = NULL;
        int st = jf_fit(m, &d, NULL, &r, &err);
        _exit(st == JF_ERR_ARG && err && strstr(err, "no response values") ? 0 : 4);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(count_files(dir, NULL) == 0);
}

static void age(const char *path, double days);

static int exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

/* A private compile directory left by a process that ended mid-compile (killed, crashed) is
 * removed by a later process's first compile: only one named for a process that no longer
 * exists, owned by this user and hours old. The directories of a live process, a fresh one,
 * one of another naming and a link (nor what it points to) stay; so does a user's file in a
 * directory named like ours ($TMPDIR may be a home directory: "jitfit-2024-backup"). */
static void test_stale_tmpdirs(void) {
    char saved[1024] = "", base[100], path[8][200], target_file[sizeof path[5] + 16];
    char user_file[sizeof path[6] + 16];
    const char *t = getenv("TMPDIR");
    if (t) snprintf(saved, sizeof saved, "%s", t);
    snprintf(base, sizeof base, "%s/sweep", root);
    CHECK(mkdir(base, 0700) == 0);
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, NULL, 0);
    snprintf(path[0], sizeof path[0], "%s/jitfit-%ld-stale1", base, (long)dead);
    snprintf(path[1], sizeof path[1], "%s/jitfit-%ld-fresh1", base, (long)dead);
    snprintf(path[2], sizeof path[2], "%s/jitfit-%ld-alive1", base, (long)getpid());
    snprintf(path[3], sizeof path[3], "%s/jitfit-other1", base);
    snprintf(path[4], sizeof path[4], "%s/jitfit-%ld-link01", base, (long)dead);
    snprintf(path[5], sizeof path[5], "%s/target", base);
    snprintf(path[6], sizeof path[6], "%s/jitfit-%ld-backup", base, (long)dead);
    snprintf(path[7], sizeof path[7], "%s/jitfit-%ld-old-runs", base, (long)dead);
    for (int i = 0; i < 8; i++) {
        if (i == 4) continue;
        CHECK(mkdir(path[i], 0700) == 0);
        char file[sizeof path + 16];
        snprintf(file, sizeof file, "%s/kernels-1.so", path[i]);
        FILE *f = fopen(file, "w");
        if (CHECK(f != NULL)) fclose(f);
    }
    CHECK(symlink(path[5], path[4]) == 0);
    snprintf(target_file, sizeof target_file, "%s/kernels-1.so", path[5]);
    snprintf(user_file, sizeof user_file, "%s/results.csv", path[6]);
    FILE *uf = fopen(user_file, "w");
    if (CHECK(uf != NULL)) fclose(uf);
    for (int i = 0; i < 8; i++)
        if (i != 1) age(path[i], 1.0);
    fresh_dir();
    setenv("TMPDIR", base, 1);
    char cmd[1200], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' eval 'a*x + b' --params a=1,b=2 --at x=3 --backend c",
             jf_test_cli());
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    free(out);
    CHECK(!exists(path[0]));
    for (int i = 1; i < 8; i++)
        if (!CHECK(exists(path[i]))) fprintf(stderr, "  %s was removed\n", path[i]);
    CHECK(exists(target_file));
    CHECK(exists(user_file));
    if (saved[0]) setenv("TMPDIR", saved, 1);
    else unsetenv("TMPDIR");
}

/* A FIFO in place of an entry or of the remembered compiler identity is not read (opening it
 * would block until a writer came): the kernels are rebuilt and the FIFOs replaced. A new
 * process each time (the CLI), as the identity is remembered per process too. */
static void test_fifo_entries(void) {
    const char *dir = fresh_dir();
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "timeout 60 '%s' eval 'f1*cos(f2*x)+f3' --params f1=1,f2=2,f3=3 --at x=0.5 "
             "--backend c",
             jf_test_cli());
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    free(out);
    DIR *d = opendir(dir);
    int fifos = 0;
    if (CHECK(d != NULL)) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            char path[600];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            if (CHECK(unlink(path) == 0 && mkfifo(path, 0600) == 0)) fifos++;
        }
        closedir(d);
    }
    if (!CHECK(fifos == 2)) fprintf(stderr, "  %d files replaced\n", fifos); /* entry, cc-*.id */
    int rc = jf_test_run(cmd, &out, NULL); /* 124: it blocked on a FIFO */
    CHECK(rc == 0);
    CHECK_CONTAINS(out, "value: 3.5403023058681398");
    free(out);
    struct stat st;
    CHECK(count_files(dir, NULL) == 1);
    if (entry_path(dir, cmd, sizeof cmd)) CHECK(stat(cmd, &st) == 0 && S_ISREG(st.st_mode));
}

static void test_disabled(void) {
    const char *dir = fresh_dir();
    setenv("JITFIT_NO_CACHE", "1", 1);
    outcome o = in_child(model_a);
    CHECK(o.ok && o.backend == JF_BACKEND_C && o.cache == JF_CACHE_MISS && o.value_ok);
    CHECK_STREQ(o.warning, "");
    struct stat st;
    CHECK(stat(dir, &st) != 0 && errno == ENOENT); /* not even the directory */
    setenv("JITFIT_NO_CACHE", "0", 1);             /* "0" means not disabled */
    o = in_child(model_a);
    CHECK(o.ok && o.cache == JF_CACHE_MISS && count_files(dir, NULL) == 1);
    unsetenv("JITFIT_NO_CACHE");
    /* the option does the same as the variable */
    dir = fresh_dir();
    jf_model *m = compile("u*x + v*x^3");
    jf_jit_options jo;
    memset(&jo, 0, sizeof jo);
    jo.no_cache = 1;
    jf_kernels *k = NULL;
    CHECK(m && jf_kernels_get(m, JF_BACKEND_C, &jo, &k, NULL) == JF_OK);
    CHECK(k && jf_kernels_backend(k) == JF_BACKEND_C && stat(dir, &st) != 0);
    jf_kernels_free(k);
    jf_model_free(m);
}

static void test_dir_resolution(void) {
    jf_cache_dir d;
    char saved_home[1024] = "";
    const char *h = getenv("HOME");
    if (h) snprintf(saved_home, sizeof saved_home, "%s", h);
    unsetenv("JITFIT_CACHE_DIR");
    char xdg[512], want[600];
    snprintf(xdg, sizeof xdg, "%s/absent-xdg", root);
    snprintf(want, sizeof want, "%s/jitfit", xdg);
    setenv("XDG_CACHE_HOME", xdg, 1);
    jf_cache_dir_open(NULL, 0, 0, &d);
    CHECK_STREQ(d.path, want);
    CHECK(d.state == JF_CACHE_DIR_OK); /* absent and not created: usable, empty */
    struct stat st;
    CHECK(stat(xdg, &st) != 0); /* looking created nothing */
    setenv("XDG_CACHE_HOME", "/nonexistent-xdg", 1);
    jf_cache_dir_open(NULL, 0, 0, &d);
    CHECK_STREQ(d.path, "/nonexistent-xdg/jitfit");
    setenv("XDG_CACHE_HOME", "relative/ignored", 1);
    setenv("HOME", "/nonexistent-home", 1);
    jf_cache_dir_open(NULL, 0, 0, &d);
    CHECK_STREQ(d.path, "/nonexistent-home/.cache/jitfit");
    unsetenv("XDG_CACHE_HOME");
    jf_cache_dir_open(NULL, 0, 0, &d);
    CHECK_STREQ(d.path, "/nonexistent-home/.cache/jitfit");
    jf_cache_dir_open("/explicit/dir/", 0, 0, &d);
    CHECK_STREQ(d.path, "/explicit/dir");
    jf_cache_dir_open(NULL, 1, 0, &d);
    CHECK(d.state == JF_CACHE_DIR_DISABLED);
    /* a relative HOME is no home (the user database's is taken): never a cache below the
     * working directory */
    setenv("HOME", "relative-home", 1);
    jf_cache_dir_open(NULL, 0, 0, &d);
    if (!CHECK(d.path[0] == '/' || d.path[0] == '\0')) fprintf(stderr, "  path %s\n", d.path);
    if (saved_home[0]) setenv("HOME", saved_home, 1);
    /* parents are created 0700 */
    char deep[512];
    snprintf(deep, sizeof deep, "%s/deep/er/cache", root);
    setenv("JITFIT_CACHE_DIR", deep, 1);
    CHECK(jf_cache_dir_open(NULL, 0, 1, &d) == JF_CACHE_DIR_OK);
    char mid[512];
    snprintf(mid, sizeof mid, "%s/deep/er", root);
    CHECK(stat(deep, &st) == 0 && (st.st_mode & 07777) == 0700);
    CHECK(stat(mid, &st) == 0 && (st.st_mode & 07777) == 0700);
}

/* A missing directory that could not be created (no write permission on its nearest existing
 * ancestor, or a file in the way) is refused when only looked at too, as a fit would find it:
 * `jitfit cache info` and doctor must not say "ok" there. */
static void test_dir_not_creatable(void) {
    char file[512], below[600];
    snprintf(file, sizeof file, "%s/plain-file", root);
    FILE *f = fopen(file, "w");
    if (f) fclose(f);
    snprintf(below, sizeof below, "%s/sub/cache", file);
    jf_cache_dir d;
    CHECK(jf_cache_dir_open(below, 0, 0, &d) == JF_CACHE_DIR_REFUSED);
    CHECK_CONTAINS(d.reason, "cannot create");
    /* nothing there, so nothing to clear: not an error */
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "JITFIT_CACHE_DIR='%s' '%s' cache clear", below, jf_test_cli());
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    CHECK_CONTAINS(out, "removed 0 entries");
    free(out);
    snprintf(cmd, sizeof cmd, "JITFIT_CACHE_DIR='%s' '%s' cache clear 2>&1", file, jf_test_cli());
    CHECK(jf_test_run(cmd, &out, NULL) == 1); /* a file in its place is still refused */
    CHECK_CONTAINS(out, "not a directory");
    free(out);
    /* info says so in its state line, with nothing to list: no second error, status 0 */
    const char *const infos[] = {file, below};
    for (size_t i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "JITFIT_CACHE_DIR='%s' '%s' cache info 2>&1", infos[i],
                 jf_test_cli());
        CHECK(jf_test_run(cmd, &out, NULL) == 0);
        CHECK_CONTAINS(out, "state: refused");
        CHECK_CONTAINS(out, "entries: 0\n");
        CHECK(out && !strstr(out, "cannot list"));
        free(out);
    }
    /* A dangling symbolic link, as the directory or on the way to it: mkdir cannot go through
     * it, so info must not say "ok (not created yet)" while every fit warns it cannot create
     * the directory. */
    char link[512], through[600];
    snprintf(link, sizeof link, "%s/dangling-link", root);
    snprintf(through, sizeof through, "%s/cache", link);
    CHECK(symlink("/nonexistent-jitfit-target/x", link) == 0);
    const char *const dangling[] = {link, through};
    for (size_t i = 0; i < 2; i++) {
        int open_st = jf_cache_dir_open(dangling[i], 0, 0, &d);
        CHECK_CONTAINS(d.reason, "cannot create");
        int create_st = jf_cache_dir_open(dangling[i], 0, 1, &d);
        CHECK(open_st == JF_CACHE_DIR_REFUSED && create_st == JF_CACHE_DIR_REFUSED);
        CHECK_CONTAINS(d.reason, "symbolic link");
    }
    /* an unwritable ancestor: only a user other than root meets it */
    char ro[512], path[600];
    snprintf(ro, sizeof ro, "%s/read-only", root);
    snprintf(path, sizeof path, "%s/home/.cache/jitfit", ro);
    CHECK(mkdir(ro, 0755) == 0);
    CHECK(chmod(root, 0711) == 0); /* nobody may pass through, to meet read-only itself */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        /* as root, become nobody (the directory belongs to root then) */
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(3);
        if (chmod(ro, 0555) != 0 && geteuid() != 65534) _exit(3);
        jf_cache_dir c;
        int open_st = jf_cache_dir_open(path, 0, 0, &c);
        int create_st = jf_cache_dir_open(path, 0, 1, &c);
        _exit(open_st == JF_CACHE_DIR_REFUSED && create_st == JF_CACHE_DIR_REFUSED &&
                      strstr(c.reason, "cannot create")
                  ? 0
                  : 1);
    }
    int ws = 0;
    CHECK(pid > 0 && waitpid(pid, &ws, 0) == pid && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    CHECK(chmod(root, 0700) == 0);
}

/* A cache path too long to hold entries (or to fit at all) is refused with a warning, never
 * cut to a shorter path: that would be another directory, made and used in the user's name. */
static void test_dir_too_long(void) {
    char top[512];
    snprintf(top, sizeof top, "%s/long", root);
    static const size_t lengths[] = {JF_CACHE_DIR_MAX + 1, 4095, 5000};
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        char path[6000];
        size_t len = (size_t)snprintf(path, sizeof path, "%s", top);
        while (len < lengths[i]) { /* components of at most 100 bytes, each a legal name */
            size_t part = lengths[i] - len - 1 < 100 ? lengths[i] - len - 1 : 100;
            path[len++] = '/';
            for (size_t j = 0; j < (part ? part : 1); j++) path[len++] = 'd';
        }
        path[len] = '\0';
        setenv("JITFIT_CACHE_DIR", path, 1);
        jf_cache_dir d;
        CHECK(jf_cache_dir_open(NULL, 0, 1, &d) == JF_CACHE_DIR_REFUSED);
        CHECK_CONTAINS(d.reason, "too long");
        CHECK_STREQ(d.path, "");
        outcome o = in_child(model_a);
        CHECK(o.ok && o.backend == JF_BACKEND_C && o.cache == JF_CACHE_MISS && o.value_ok);
        CHECK_CONTAINS(o.warning, "kernel cache not used: cache directory path is too long");
        struct stat st;
        if (!CHECK(stat(top, &st) != 0 && errno == ENOENT)) /* nothing made on the way */
            fprintf(stderr, "  a %zu-byte cache path made directories\n", len);
        char cmd[256], *err = NULL;
        snprintf(cmd, sizeof cmd, "'%s' cache dir", jf_test_cli());
        CHECK(jf_test_run(cmd, NULL, &err) == 1);
        CHECK_CONTAINS(err, "too long");
        free(err);
    }
    unsetenv("JITFIT_CACHE_DIR");
}

/* A "~" the shell did not expand (JITFIT_CACHE_DIR='~/cache' in an environment file) is
 * refused with a warning, never made into a directory named "~" below the working directory. */
static void test_dir_tilde(void) {
    char cwd[4096], work[512];
    snprintf(work, sizeof work, "%s/tilde-cwd", root);
    if (!CHECK(getcwd(cwd, sizeof cwd) != NULL && mkdir(work, 0700) == 0 && chdir(work) == 0))
        return;
    setenv("JITFIT_CACHE_DIR", "~/.cache/jitfit", 1);
    outcome o = in_child(model_a);
    CHECK(o.ok && o.backend == JF_BACKEND_C && o.cache == JF_CACHE_MISS && o.value_ok);
    CHECK_CONTAINS(o.warning, "starts with '~'");
    struct stat st;
    CHECK(stat("~", &st) != 0 && errno == ENOENT);
    /* `cache dir` and a `cache clear` with nothing to remove say that the cache is not used */
    static const char *const cmds[] = {"dir", "clear"};
    for (size_t i = 0; i < 2; i++) {
        char cmd[4096], *out = NULL, *err = NULL;
        snprintf(cmd, sizeof cmd, "'%s' cache %s", jf_test_cli(), cmds[i]);
        CHECK(jf_test_run(cmd, &out, &err) == 0);
        CHECK_CONTAINS(out, "~/.cache/jitfit");
        CHECK_CONTAINS(err, "note: the kernel cache is not used: cache directory "
                            "'~/.cache/jitfit' starts with '~'");
        free(out);
        free(err);
    }
    CHECK(stat("~", &st) != 0 && errno == ENOENT);
    unsetenv("JITFIT_CACHE_DIR");
    CHECK(chdir(cwd) == 0);
}

/* `jitfit cache clear` removes entries, its temporaries and identity files, and nothing else:
 * the directory may hold other files (JITFIT_CACHE_DIR=$HOME by mistake). */
static void test_clear_only_ours(void) {
    const char *dir = fresh_dir();
    in_child("a*x + b");
    static const char *const theirs[] = {".tmp-notes", "cc-notes.identity", "cc-1.id",
                                         "notes.jfc", ".tmp-0123456789abcdef0123456789abcdef"};
    static const char *const ours[] = {".tmp-0123456789abcdef0123456789abcdef-Ab3dE9",
                                       "cc-0123456789abcdef.id", "cc-0123456789abcdef.id.tmp-Xy12Z9"};
    char path[600];
    for (size_t i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, theirs[i]);
        FILE *f = fopen(path, "w");
        if (f) fclose(f);
    }
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, ours[i]);
        FILE *f = fopen(path, "w");
        if (f) fclose(f);
    }
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' cache clear", jf_test_cli());
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    CHECK_CONTAINS(out, "removed 1 entry");
    free(out);
    struct stat st;
    for (size_t i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, theirs[i]);
        if (!CHECK(stat(path, &st) == 0)) fprintf(stderr, "  %s was removed\n", theirs[i]);
    }
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, ours[i]);
        if (!CHECK(stat(path, &st) != 0)) fprintf(stderr, "  %s was kept\n", ours[i]);
    }
    CHECK(count_files(dir, NULL) == 1); /* notes.jfc */
}

/* Sets path's mtime to days ago. */
static void age(const char *path, double days) {
    struct timespec t[2];
    clock_gettime(CLOCK_REALTIME, &t[0]);
    t[0].tv_sec -= (time_t)(days * 86400);
    t[1] = t[0];
    CHECK(utimensat(AT_FDCWD, path, t, AT_SYMLINK_NOFOLLOW) == 0);
}

/* A directory made under an entry's name is no entry: the fit says once that it cannot store
 * the kernels there, `cache info` and `cache prune` leave it out, and `cache clear`, which
 * cannot remove it, names it and says why. */
static void test_entry_name_taken(void) {
    const char *dir = fresh_dir();
    outcome o = in_child(model_a);
    char entry[600], inner[700];
    if (!CHECK(o.ok && entry_path(dir, entry, sizeof entry))) return;
    CHECK(unlink(entry) == 0 && mkdir(entry, 0700) == 0);
    snprintf(inner, sizeof inner, "%s/file", entry);
    FILE *f = fopen(inner, "w"); /* not empty, so not removable with rmdir either */
    if (f) fclose(f);
    o = in_child(model_a);
    CHECK(o.ok && o.backend == JF_BACKEND_C && o.cache == JF_CACHE_MISS && o.value_ok);
    CHECK_CONTAINS(o.warning, "Is a directory");
    in_child("a*x + b"); /* one real entry beside it */
    char cmd[4096], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "'%s' cache info", jf_test_cli());
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    CHECK_CONTAINS(out, "entries: 1\n");
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' cache prune --max-size 0", jf_test_cli());
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    CHECK_CONTAINS(out, "removed 1 entry");
    free(out);
    in_child("a*x + b");
    snprintf(cmd, sizeof cmd, "'%s' cache clear", jf_test_cli());
    CHECK(jf_test_run(cmd, NULL, &err) == 1);
    CHECK_CONTAINS(err, entry);
    CHECK_CONTAINS(err, "Is a directory");
    free(err);
    unlink(inner);
    rmdir(entry);
}

/* `jitfit cache prune`: entries older than --older-than go, then the least recently used until
 * --max-size holds; a load marks an entry used; other files, and temporaries of writes still
 * running, stay. */
static void test_prune(void) {
    const char *dir = fresh_dir();
    jf_cache_dir cd;
    CHECK(jf_cache_dir_open(NULL, 0, 1, &cd) == JF_CACHE_DIR_OK);
    jf_cache_key keys[4];
    char paths[4][600], why[512];
    unsigned char payload[1000] = {0};
    const double days[4] = {30, 10, 2, 1};
    for (int i = 0; i < 4; i++) {
        char src[16];
        snprintf(src, sizeof src, "source %d", i);
        jf_cache_key_parts parts = {"c", src, "cc 1.0", "-O2", ""};
        keys[i] = jf_cache_key_make(&parts);
        CHECK(jf_cache_disk_store(&cd, &keys[i], JF_CACHE_KIND_C_SO, payload, 100 * (size_t)(i + 1),
                                  why, sizeof why) == JF_OK);
        jf_cache_entry_path(&cd, &keys[i], paths[i], sizeof paths[i]);
        age(paths[i], days[i]);
    }
    /* loading entry 0 (30 days old) makes it the most recently used */
    unsigned char *got = NULL;
    size_t size = 0;
    CHECK(jf_cache_disk_load(&cd, &keys[0], JF_CACHE_KIND_C_SO, &got, &size, why, sizeof why) ==
          JF_CACHE_ENTRY_HIT);
    free(got);
    struct stat st;
    CHECK(stat(paths[0], &st) == 0 && difftime(time(NULL), st.st_mtime) < 60);
    char other[700], tmp_old[700], tmp_new[700];
    snprintf(other, sizeof other, "%s/notes.txt", dir);
    snprintf(tmp_old, sizeof tmp_old, "%s/.tmp-0123456789abcdef0123456789abcdef-Ab3dE9", dir);
    snprintf(tmp_new, sizeof tmp_new, "%s/.tmp-0123456789abcdef0123456789abcdef-Zz3dE9", dir);
    const char *made[] = {other, tmp_old, tmp_new};
    for (int i = 0; i < 3; i++) {
        FILE *f = fopen(made[i], "w");
        if (f) fclose(f);
    }
    age(other, 100);
    age(tmp_old, 3);
    char cmd[4096], *out = NULL, *err = NULL;
    /* older than 5 days: entry 1 (10 days) goes; 0 was just used */
    snprintf(cmd, sizeof cmd, "'%s' cache prune --older-than 5", jf_test_cli());
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    CHECK_CONTAINS(out, "removed 1 entry");
    CHECK_CONTAINS(out, "3 left, 992 bytes"); /* 100, 300 and 400 bytes, each with its header */
    free(out);
    CHECK(stat(paths[1], &st) != 0 && stat(paths[0], &st) == 0);
    CHECK(stat(tmp_old, &st) != 0 && stat(tmp_new, &st) == 0 && stat(other, &st) == 0);
    /* at most 500 bytes of entries: the least recently used go first (entry 2, then 3), the
     * just-used entry 0 stays (an option's value may also follow an '=', as elsewhere) */
    snprintf(cmd, sizeof cmd, "'%s' cache prune --max-size=500", jf_test_cli());
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    CHECK_CONTAINS(out, "removed 2 entries");
    free(out);
    CHECK(stat(paths[0], &st) == 0 && stat(paths[2], &st) != 0 && stat(paths[3], &st) != 0);
    /* --max-size 0 removes every entry, an empty one too (a write cut short by a full disk
     * leaves those: 0 was once taken as a limit of 1 byte, which kept them) */
    CHECK(truncate(paths[0], 0) == 0);
    snprintf(cmd, sizeof cmd, "'%s' cache prune --max-size 0", jf_test_cli());
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    CHECK_CONTAINS(out, "removed 1 entry");
    CHECK_CONTAINS(out, "0 left, 0 bytes");
    free(out);
    CHECK(stat(paths[0], &st) != 0 && stat(other, &st) == 0);
    /* usage errors */
    static const char *const bad[] = {"", "--older-than", "--older-than x", "--max-size 1Q",
                                      "--keep 3", "--older-than=x", "--max-size=", "--keep=3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "'%s' cache prune %s", jf_test_cli(), bad[i]);
        if (!CHECK(jf_test_run(cmd, NULL, &err) == 2)) fprintf(stderr, "  prune %s\n", bad[i]);
        CHECK_CONTAINS(err, "cache prune");
        free(err);
        err = NULL;
    }
}

/* The unload function of the stand-in modules of test_keys, which are never unloaded. */
static void no_unload(void *module) { (void)module; }

static void test_keys(void) {
    jf_cache_key_parts base = {"c", "src", "gcc 12", "-O2", ""};
    jf_cache_key k0 = jf_cache_key_make(&base);
    jf_cache_key k1 = jf_cache_key_make(&base);
    CHECK(memcmp(k0.bytes, k1.bytes, 16) == 0);
    const char **fields[] = {&base.backend, &base.source, &base.compiler, &base.flags, &base.arch};
    for (size_t i = 0; i < 5; i++) {
        jf_cache_key_parts p = base;
        const char **f = (const char **)((char *)&p + ((char *)fields[i] - (char *)&base));
        *f = "changed";
        jf_cache_key k = jf_cache_key_make(&p);
        CHECK(memcmp(k.bytes, k0.bytes, 16) != 0);
    }
    /* fields are delimited: moving a character between them changes the key */
    jf_cache_key_parts a = {"c", "ab", "c", "", ""}, b = {"c", "a", "bc", "", ""};
    jf_cache_key ka = jf_cache_key_make(&a), kb = jf_cache_key_make(&b);
    CHECK(memcmp(ka.bytes, kb.bytes, 16) != 0);
    char hex[33];
    jf_cache_key_hex(&k0, hex);
    CHECK(strlen(hex) == 32 && strspn(hex, "0123456789abcdef") == 32);
    /* the memory map (its trimming: test_mem_cache.c); the modules are never unloaded here,
     * as each stays held */
    static int x = 1, y = 2;
    CHECK(jf_cache_mem_get(&ka) == NULL);
    jf_cache_entry *ex = jf_cache_mem_put(&ka, &x, no_unload);
    CHECK(ex && jf_cache_entry_module(ex) == &x);
    jf_cache_entry *e2 = jf_cache_mem_put(&ka, &y, no_unload);
    CHECK(e2 == ex && jf_cache_entry_module(e2) == &x);
    jf_cache_mem_release(e2);
    e2 = jf_cache_mem_get(&ka);
    CHECK(e2 == ex && jf_cache_mem_get(&kb) == NULL);
    jf_cache_mem_release(e2);
    static int many[500];
    for (int i = 0; i < 500; i++) { /* growth keeps every entry */
        jf_cache_key k = jf_cache_hash(&i, sizeof i);
        CHECK(jf_cache_mem_put(&k, &many[i], no_unload) != NULL);
    }
    e2 = jf_cache_mem_get(&ka);
    CHECK(e2 == ex);
    jf_cache_mem_release(e2);
    int i7 = 7;
    jf_cache_key k7 = jf_cache_hash(&i7, sizeof i7);
    e2 = jf_cache_mem_get(&k7);
    CHECK(e2 && jf_cache_entry_module(e2) == &many[7]);
    jf_cache_mem_release(e2);
}

/* The path of an entry-named file in dir, into buf. */
static const char *dir_entry_name(const char *dir, char *buf, size_t n) {
    snprintf(buf, n, "%s/0123456789abcdef0123456789abcdef.jfc", dir);
    return buf;
}

static void test_cli(void) {
    const char *dir = fresh_dir();
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' cache dir", jf_test_cli());
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    char want[600];
    snprintf(want, sizeof want, "%s\n", dir);
    CHECK_STREQ(out, want);
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' cache info", jf_test_cli());
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    CHECK_CONTAINS(out, "state: ok (not created yet)\nentries: 0\nbytes: 0\n");
    free(out);
    struct stat st;
    CHECK(stat(dir, &st) != 0); /* looking does not create */
    in_child(model_a);
    in_child("a*x + b");
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    CHECK_CONTAINS(out, "state: ok\nentries: 2\n");
    free(out);
    chmod(dir, 0777);
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    CHECK_CONTAINS(out, "state: refused: cache directory");
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' cache clear", jf_test_cli());
    CHECK(jf_test_run(cmd, &out, NULL) == 1);
    free(out);
    chmod(dir, 0700);
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    CHECK_CONTAINS(out, "removed 2 entries");
    free(out);
    CHECK(count_files(dir, NULL) == 0);
    setenv("JITFIT_NO_CACHE", "1", 1);
    snprintf(cmd, sizeof cmd, "'%s' cache info", jf_test_cli());
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    CHECK_CONTAINS(out, "state: disabled (JITFIT_NO_CACHE is set)");
    free(out);
    /* JITFIT_NO_CACHE keeps fits off the cache; clear and prune still manage the directory,
     * with the same checks: before, clear skipped them (it removed the entries of a directory
     * writable by others, which it refuses otherwise) and prune refused to run at all. */
    FILE *f = fopen(dir_entry_name(dir, want, sizeof want), "w");
    if (f) {
        fputs("not really an entry", f);
        fclose(f);
    }
    chmod(dir, 0777);
    snprintf(cmd, sizeof cmd, "'%s' cache clear 2>&1", jf_test_cli());
    CHECK(jf_test_run(cmd, &out, NULL) == 1);
    CHECK_CONTAINS(out, "not clearing: cache directory");
    free(out);
    CHECK(count_files(dir, NULL) == 1);
    chmod(dir, 0700);
    snprintf(cmd, sizeof cmd, "'%s' cache prune --max-size 0 2>&1", jf_test_cli());
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    CHECK_CONTAINS(out, "removed 1 entry");
    free(out);
    CHECK(count_files(dir, NULL) == 0);
    unsetenv("JITFIT_NO_CACHE");
    snprintf(cmd, sizeof cmd, "'%s' cache frobnicate", jf_test_cli());
    CHECK(jf_test_run(cmd, &out, NULL) == 2);
    free(out);
}

int main(void) {
    if (!mkdtemp(root)) return jf_test_skip("cannot create a temporary directory");
    unsetenv("JITFIT_NO_CACHE");
    unsetenv("JITFIT_CC");
    test_keys();
    test_miss_then_hit();
    test_damaged_entries();
    test_bad_permissions();
    test_concurrency();
    test_identity_remembered();
    test_identity_launcher();
    test_broken_compiler_not_stored();
    test_compiler_timeout();
    test_compiler_timeout_temporaries();
    test_compiler_leaves_background_process();
    test_tmpdir_unusable();
    test_stale_tmpdirs();
    test_bad_data_no_compile();
    test_interrupt_stops_compiler();
    test_interrupt_while_starting_compiler();
    test_fifo_entries();
    test_disabled();
    test_cli();
    test_clear_only_ours();
    test_entry_name_taken();
    test_prune();
    test_dir_resolution();
    test_dir_not_creatable();
    test_dir_too_long();
    test_dir_tilde();
    test_memory(); /* last: it fills this process's memory cache */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "chmod -R u+rwx %s 2>/dev/null; rm -rf %s", root, root);
    jf_test_run(cmd, NULL, NULL);
    return jf_test_finish();
}
