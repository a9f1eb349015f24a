/* Tests of jitfit inside a host program that starts processes of its own: the C backend runs
 * the system compiler as a child process, and what it does must not depend on what the rest of
 * the program does with processes and signals.
 *
 * - While jitfit starts the compiler, the pipe it reads the compiler's messages from is
 *   close-on-exec: a process another thread of the host starts at that moment (a job runner, a
 *   helper daemon) must not inherit its write end, or jitfit waits for that process to exit
 *   before it sees the end of the compiler's output (up to the compiler time limit, then the
 *   fit falls back to the interpreter). posix_spawnp is wrapped here to look at the process's
 *   descriptors at the moment of the start, which makes the check independent of timing.
 * - A host that ignores SIGCHLD (children reaped by the kernel: waitpid then fails with ECHILD)
 *   still gets compiled kernels.
 * - A host that closed its standard descriptors (a daemon) still gets the compiler's messages
 *   and its --version line: the pipe jitfit reads them from is then created among 0..2.
 *
 * Fresh cache directories under a temporary root; the cases that change the process's signal
 * disposition run in a forked child.
 */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "include/jitfit.h"
#include "tests/testlib.h"

static char root[] = "/tmp/jf_test_host_XXXXXX";
static int ncase;

/* A fresh cache directory path below root (not created), made the current JITFIT_CACHE_DIR. */
static void fresh_dir(void) {
    char path[256];
    snprintf(path, sizeof path, "%s/case%d", root, ++ncase);
    setenv("JITFIT_CACHE_DIR", path, 1);
}

/* ---- posix_spawnp, wrapped ------------------------------------------------------------------ */

#define MAX_FD 1024

static int baseline[MAX_FD]; /* 1: a pipe without close-on-exec before the case started */
static int spawns;           /* posix_spawnp calls seen */
static int leaks;            /* pipes (not in baseline) a process started then would inherit */

/* Marks in mark[] the pipe descriptors above stderr that a new process would inherit. */
static int inheritable_pipes(int *mark) {
    int n = 0;
    for (int fd = 3; fd < MAX_FD; fd++) {
        struct stat st;
        int fl = fcntl(fd, F_GETFD);
        mark[fd] = fl >= 0 && !(fl & FD_CLOEXEC) && fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
        n += mark[fd];
    }
    return n;
}

/* Interposes the C library's: jitfit starts its compiler with it. Another thread of the host
 * could start a process at this very moment, which would inherit every pipe counted here. */
int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                 const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
    int now[MAX_FD];
    inheritable_pipes(now);
    spawns++;
    for (int fd = 3; fd < MAX_FD; fd++) leaks += now[fd] && !baseline[fd];
    int (*real)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                const posix_spawnattr_t *, char *const[], char *const[]);
    *(void **)&real = dlsym(RTLD_NEXT, "posix_spawnp");
    return real(pid, file, fa, attr, argv, envp);
}

/* ---- cases ------------------------------------------------------------------------------------ */

static double xs[40], ys[40];

/* Fits text (a new model in a fresh cache directory: its kernels are compiled); returns the
 * result (caller frees) or NULL. */
static jf_fit_result *fit_fresh(const char *text) {
    for (int i = 0; i < 40; i++) {
        xs[i] = 0.1 * i;
        ys[i] = 2.0 * xs[i] + 1.0 + 0.01 * ((i * 7) % 5);
    }
    jf_model *m = NULL;
    if (!CHECK(jf_model_compile(text, (size_t)-1, NULL, &m, NULL) == JF_OK)) return NULL;
    jf_data d = {.n = 40, .x = xs, .y = ys};
    jf_fit_options o = jf_fit_options_default();
    jf_fit_result *r = NULL;
    char *err = NULL;
    CHECK(jf_fit(m, &d, &o, &r, &err) == JF_OK);
    if (err) printf("fit: %s\n", err);
    jf_free(err);
    jf_model_free(m);
    return r;
}

/* The compiler's output pipe is never inheritable by a process started meanwhile. */
static void test_pipes_close_on_exec(void) {
    fresh_dir();
    inheritable_pipes(baseline);
    spawns = leaks = 0;
    jf_fit_result *r = fit_fresh("a*x + b + 0.5e-12*x^3");
    CHECK(r && r->backend == JF_BACKEND_C && r->cache == JF_CACHE_MISS);
    printf("compiler starts: %d, pipes a process started meanwhile would inherit: %d\n", spawns,
           leaks);
    CHECK(spawns >= 1); /* the compile (and the --version probe for a new compiler) */
    CHECK(leaks == 0);
    jf_fit_result_free(r);
}

/* Writes an executable script as root/name and makes it $JITFIT_CC (a compiler command this
 * process has not probed yet). */
static int use_cc_script(const char *name, const char *text) {
    char path[512];
    return jf_test_use_cc_script(root, name, text, path, sizeof path);
}

/* With SIGCHLD ignored, the compiler's exit status cannot be collected; its output can, and
 * the object it wrote is loaded and checked against the model as always: the fit runs the
 * compiled kernels, without a warning. A compiler that fails still falls back, with its
 * message. In a child process (the signal disposition is process-wide). */
static void test_sigchld_ignored(void) {
    static const char *const scripts[] = {
        "#!/bin/sh\nexec cc \"$@\"\n",
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'failing-cc 1.0'; exit 0; fi\n"
        "echo 'kernels.c:1:1: error: this compiler always fails' >&2\nexit 1\n",
    };
    for (int i = 0; i < 2; i++) {
        fresh_dir();
        char name[64];
        snprintf(name, sizeof name, "cc-%d.sh", i);
        if (use_cc_script(name, scripts[i]) != 0) return;
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            signal(SIGCHLD, SIG_IGN);
            char text[64];
            snprintf(text, sizeof text, "a*x + b + %d.25e-12*x^2", i);
            jf_fit_result *r = fit_fresh(text);
            int code = 1;
            if (r && i == 0) {
                if (r->warning) printf("warning: %s\n", r->warning);
                code = r->backend == JF_BACKEND_C && !r->warning ? 0 : 2;
            } else if (r) {
                if (r->warning) printf("warning: %s\n", r->warning);
                code = r->backend == JF_BACKEND_INTERP && r->warning &&
                               strstr(r->warning, "this compiler always fails")
                           ? 0
                           : 3;
            }
            jf_fit_result_free(r);
            fflush(NULL);
            _exit(code + (jf_test_failed ? 10 : 0));
        }
        int ws = 0;
        CHECK(pid > 0 && waitpid(pid, &ws, 0) == pid);
        CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
        unsetenv("JITFIT_CC");
    }
}

/* The text of the compiler identity file (cc-*.id) in the current cache directory, or NULL. */
static char *identity_text(void) {
    const char *dir = getenv("JITFIT_CACHE_DIR");
    DIR *d = dir ? opendir(dir) : NULL;
    char *text = NULL;
    for (struct dirent *e; d && !text && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "cc-", 3) != 0 || len < 3 || strcmp(e->d_name + len - 3, ".id") != 0)
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        text = jf_test_read_file(path, NULL);
    }
    if (d) closedir(d);
    return text;
}

/* With descriptors 0, 1 and 2 closed, the compiler's output pipe was created among them and
 * the child's redirections closed or replaced it: a failing compiler's message became "exited
 * with status 1", and the --version line was lost from the compiler's identity. In a child
 * process (which closes its own standard descriptors); the exit code tells what went wrong. */
static void test_standard_fds_closed(void) {
    static const char *const scripts[] = {
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'closed-fds-cc 2.5'; exit 0; fi\n"
        "exec cc \"$@\"\n",
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'closed-fds-cc 2.6'; exit 0; fi\n"
        "echo 'kernels.c:1:1: error: this compiler always fails' >&2\nexit 1\n",
    };
    for (int i = 0; i < 2; i++) {
        fresh_dir();
        char name[64];
        snprintf(name, sizeof name, "closed-fds-cc-%d.sh", i);
        if (use_cc_script(name, scripts[i]) != 0) return;
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            close(0);
            close(1);
            close(2);
            char text[64];
            snprintf(text, sizeof text, "a*x + b + %d.75e-12*x^2", i);
            jf_fit_result *r = fit_fresh(text);
            int code = 1;
            if (r && i == 0) { /* compiled, and the identity has the version line */
                char *id = identity_text();
                code = r->backend != JF_BACKEND_C || r->warning ? 2
                       : !id || !strstr(id, "closed-fds-cc 2.5") ? 3
                                                                 : 0;
                free(id);
            } else if (r) { /* the interpreter, with the compiler's own words */
                code = r->backend == JF_BACKEND_INTERP && r->warning &&
                               strstr(r->warning, "this compiler always fails")
                           ? 0
                           : 4;
            }
            jf_fit_result_free(r);
            _exit(code + (jf_test_failed ? 10 : 0));
        }
        int ws = 0;
        CHECK(pid > 0 && waitpid(pid, &ws, 0) == pid);
        if (!CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0))
            printf("closed descriptors, case %d: child exit %d\n", i,
                   WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
        unsetenv("JITFIT_CC");
    }
}

int main(void) {
    if (!mkdtemp(root)) return jf_test_skip("cannot create a temporary directory");
    unsetenv("JITFIT_NO_CACHE");
    unsetenv("JITFIT_CC");
    test_pipes_close_on_exec();
    test_sigchld_ignored();
    test_standard_fds_closed();
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    jf_test_run(cmd, NULL, NULL);
    return jf_test_finish();
}
