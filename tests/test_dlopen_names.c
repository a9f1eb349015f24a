/* Loaded kernels are never confused by their file name (runtime/jit_cc.c).
 *
 * glibc's dlopen returns the object already loaded under the same path name without looking at
 * the file, so a temporary directory name that comes back later in a process (mkdtemp picks 6
 * random characters and the directory is removed after each load) would hand a new model the
 * kernels of an old one; with the same numbers of parameters and variables nothing would notice.
 * Here mkdtemp is replaced by one that always returns the same name: each model must still get
 * its own kernels, compiled and loaded from the disk cache.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/kernels.h"
#include "tests/testlib.h"

/* The worst case of the real one: the same name every time (it is free again each time). */
char *mkdtemp(char *tmpl) {
    size_t len = strlen(tmpl);
    if (len < 6 || strcmp(tmpl + len - 6, "XXXXXX") != 0) {
        errno = EINVAL;
        return NULL;
    }
    if (strstr(tmpl, "/jitfit-")) {
        memcpy(tmpl + len - 6, "SAME00", 6);
    } else { /* the test's own directory: unique enough */
        char pid[16];
        snprintf(pid, sizeof pid, "%06ld", (long)getpid() % 1000000);
        memcpy(tmpl + len - 6, pid, 6);
    }
    return mkdir(tmpl, 0700) == 0 ? tmpl : NULL;
}

/* The residual at p = (1, 2), x = 3 of text's C kernels, and what the interpreter says. */
static void residual_of(const char *text, int want_cache, double *got, double *want) {
    *got = *want = NAN;
    jf_model *m = NULL;
    jf_kernels *k = NULL;
    if (!CHECK(jf_model_compile(text, (size_t)-1, NULL, &m, NULL) == JF_OK)) return;
    if (CHECK(jf_kernels_get(m, JF_BACKEND_C, NULL, &k, NULL) == JF_OK) &&
        CHECK(jf_kernels_backend(k) == JF_BACKEND_C)) {
        if (want_cache >= 0) CHECK(jf_kernels_cache_result(k) == (jf_cache_result)want_cache);
        double p[2] = {1, 2}, x = 3;
        jf_data_view dv = {&x, 1, NULL, NULL};
        jf_kernels_residual(k, p, &dv, 0, 1, got);
        jf_model_eval(m, p, &x, want, NULL);
    }
    jf_kernels_free(k);
    jf_model_free(m);
}

static const char *const models[] = {"a*x + b", "a*x - b", "a*x*b"};

int main(void) {
    char root[] = "/tmp/jf_test_dlopen_XXXXXX";
    char *r = mkdtemp(root);
    if (!r) return jf_test_skip("cannot create a temporary directory");
    char dir[600];
    snprintf(dir, sizeof dir, "%s/cache", root);
    setenv("JITFIT_CACHE_DIR", dir, 1);
    setenv("TMPDIR", root, 1);
    /* fill the disk cache, one model per process */
    for (size_t i = 0; i < 3; i++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            double got, want;
            residual_of(models[i], JF_CACHE_MISS, &got, &want);
            _exit(got == want ? 0 : 1);
        }
        int ws = 0;
        CHECK(pid > 0 && waitpid(pid, &ws, 0) == pid && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    }
    /* one process loads all three from the disk cache, then compiles them again uncached */
    for (size_t i = 0; i < 3; i++) {
        double got, want;
        residual_of(models[i], JF_CACHE_DISK, &got, &want);
        if (!CHECK(got == want)) fprintf(stderr, "  %s from disk: %g, want %g\n", models[i], got, want);
    }
    setenv("JITFIT_NO_CACHE", "1", 1);
    static const char *const again[] = {"a*x + b*b", "a*x - b*b", "a*x/b"};
    for (size_t i = 0; i < 3; i++) {
        double got, want;
        residual_of(again[i], JF_CACHE_MISS, &got, &want);
        if (!CHECK(got == want)) fprintf(stderr, "  %s compiled: %g, want %g\n", again[i], got, want);
    }
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    jf_test_run(cmd, NULL, NULL);
    return jf_test_finish();
}
