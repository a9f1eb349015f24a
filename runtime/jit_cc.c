/* The C JIT backend (see jit_cc.h): runs the system compiler without a shell and loads the
 * shared objects it produces. */
#define _GNU_SOURCE /* pipe2, mkostemp: glibc declares them only with _GNU_SOURCE */
#include "jit_cc.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <stdint.h>

extern char **environ;

const char *jf_cc_command(const char *cc) {
    if (cc && *cc) return cc;
    const char *env = getenv("JITFIT_CC");
    if (env && *env) return env;
    return "cc";
}

/* ---- argument vectors ------------------------------------------------------------------------ */

/* An argv under construction: words split from strings, each malloc'd. */
typedef struct argvec {
    char **v;    /* NULL-terminated vector of n words */
    size_t n;    /* number of words */
    size_t cap;  /* capacity of v */
    int nomem;   /* 1 once an allocation failed */
} argvec;

static void av_push(argvec *a, const char *s, size_t len) {
    if (a->nomem) return;
    if (a->n + 2 > a->cap) {
        size_t ncap = a->cap ? 2 * a->cap : 16;
        char **nv = realloc(a->v, ncap * sizeof *nv);
        if (!nv) {
            a->nomem = 1;
            return;
        }
        a->v = nv;
        a->cap = ncap;
    }
    char *w = malloc(len + 1);
    if (!w) {
        a->nomem = 1;
        return;
    }
    memcpy(w, s, len);
    w[len] = '\0';
    a->v[a->n++] = w;
    a->v[a->n] = NULL;
}

/* Splits on blanks; no quoting (compiler commands and flags with spaces in one word are not
 * supported, which keeps the rule simple and shell-free). */
static void av_split(argvec *a, const char *s) {
    while (s && *s) {
        while (*s == ' ' || *s == '\t' || *s == '\n') s++;
        const char *b = s;
        while (*s && *s != ' ' && *s != '\t' && *s != '\n') s++;
        if (s > b) av_push(a, b, (size_t)(s - b));
    }
}

static void av_free(argvec *a) {
    for (size_t i = 0; i < a->n; i++) free(a->v[i]);
    free(a->v);
    memset(a, 0, sizeof *a);
}

/* statvfs's flag for a file system mounted noexec: Linux's value, for C libraries that do not
 * declare it (glibc does with _GNU_SOURCE) */
#ifndef ST_NOEXEC
#define ST_NOEXEC 8
#endif

/* ---- running a program ----------------------------------------------------------------------- */

/* The compiler's time limit in seconds ($JITFIT_CC_TIMEOUT; 0: none). A compiler that hangs
 * (a toolchain on a dead network mount, a licence server) must not hang the fit: past the
 * limit it is killed and the fit falls back to the interpreter. The default is far above the
 * slowest compile measured (14 s, a model with hundreds of parameters, docs/PERFORMANCE.md). */
#define JF_CC_DEFAULT_TIMEOUT_S 300.0

double jf_cc_timeout_s(void) {
    const char *e = getenv("JITFIT_CC_TIMEOUT");
    if (!e || !*e) return JF_CC_DEFAULT_TIMEOUT_S;
    char *end;
    double v = strtod(e, &end);
    return end != e && !*end && v >= 0 && v < 1e9 ? v : JF_CC_DEFAULT_TIMEOUT_S;
}

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The process groups of the compilers running now (0: a free slot), for
 * jf_cc_signal_running; read and written with atomics only, as a signal handler reads them.
 * A compiler that finds no free slot (more than 64 at once) runs untracked. */
enum { MAX_RUNNING = 64 };
static pid_t running[MAX_RUNNING];

static int track(pid_t pid) {
    for (int i = 0; i < MAX_RUNNING; i++) {
        pid_t free_slot = 0;
        if (__atomic_compare_exchange_n(&running[i], &free_slot, pid, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST))
            return i;
    }
    return -1;
}

/* Called once the compiler has been reaped: its group id may then be given out again, but
 * not within the instant before the slot is cleared (pids cycle through millions). */
static void untrack(int slot) {
    if (slot >= 0) __atomic_store_n(&running[slot], 0, __ATOMIC_SEQ_CST);
}

/* Compilers being started now (posix_spawn has not returned their pid to track yet), and the
 * signal jf_cc_signal_running forwarded (0: none). A compiler started in that window would be
 * missed by the handler and outlive jitfit: run_capture starts none once a signal is
 * forwarded, and the handler waits for one being started to be tracked. Each side writes its
 * own variable before it reads the other's (sequentially consistent), so at least one of them
 * sees the other. */
static int spawning;
static int forwarded;

void jf_cc_signal_running(int sig) {
    __atomic_store_n(&forwarded, sig, __ATOMIC_SEQ_CST);
    /* A start takes milliseconds (the exec of the compiler); the spawning thread blocks these
     * signals meanwhile, so this runs on another thread and does not wait for itself. At most
     * about 1 s, then on regardless. */
    for (int i = 0; i < 1000 && __atomic_load_n(&spawning, __ATOMIC_SEQ_CST) > 0; i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    for (int i = 0; i < MAX_RUNNING; i++) {
        pid_t pgid = __atomic_load_n(&running[i], __ATOMIC_SEQ_CST);
        if (pgid > 0) kill(-pgid, sig);
    }
}

/* *status of a program that ran to its end but was reaped by someone else: the host program
 * ignores SIGCHLD (the kernel reaps its children) or collects every child itself, and waitpid
 * fails with ECHILD. Its output is complete (read to its end); its exit status is unknown. */
#define STATUS_UNKNOWN (-1)

/* Runs argv[0] (searched in PATH) with stdin from /dev/null; captures the output of file
 * descriptor `capture` (1 or 2) into *out (malloc'd, NUL-terminated, at most 64 KiB kept) and
 * sends the other to /dev/null. Returns 0 and the exit status (or STATUS_UNKNOWN) in *status,
 * an errno value when it could not be started, or ETIMEDOUT when it ran past jf_cc_timeout_s()
 * and was killed with the processes it started (it runs in a process group of its own).
 * The program's end is its exit, not the end of its output: a process it left running in the
 * background (a wrapper's compile server, a `cmd &` in a script) may hold the pipe open for
 * long after, and waiting for that would fail a finished compile at the time limit.
 * envp: its environment, NULL for this process's. */
static int run_capture(char **argv, char **envp, int capture, char **out, int *status) {
    int p[2];
    *out = NULL;
    *status = -1;
    /* Both ends close-on-exec from the start (the child gets the write end through dup2): a
     * process another thread of the host program starts meanwhile must not inherit the write
     * end, or the read below would wait for that process to exit, not for the compiler. */
    if (pipe2(p, O_CLOEXEC) != 0) return errno;
    /* A host that closed its standard descriptors (a daemon; `prog >&- 2>&-`) gets a pipe
     * among 0..2, where the child's redirections below replace or close it: the compiler's
     * messages and its --version line were lost ("exited with status 1", an identity without
     * a version). Both ends move above 2 first. */
    for (int i = 0; i < 2; i++) {
        if (p[i] > 2) continue;
        int fd = fcntl(p[i], F_DUPFD_CLOEXEC, 3);
        if (fd < 0) {
            int e = errno;
            close(p[0]);
            close(p[1]);
            return e;
        }
        close(p[i]);
        p[i] = fd;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, capture == 1 ? 2 : 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, p[1], capture);
    posix_spawn_file_actions_addclose(&fa, p[1]);
    /* its own process group, so that a timeout kills what it started too (cc1, as, ld) */
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    /* Until its pid is tracked, the terminating signals wait in this thread (see spawning);
     * the compiler itself starts with this thread's mask as it was. */
    sigset_t term, mask;
    sigemptyset(&term);
    sigaddset(&term, SIGINT);
    sigaddset(&term, SIGTERM);
    sigaddset(&term, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &term, &mask);
    posix_spawnattr_setsigmask(&attr, &mask);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
    posix_spawnattr_setpgroup(&attr, 0);
    pid_t pid;
    __atomic_add_fetch(&spawning, 1, __ATOMIC_SEQ_CST);
    int err = __atomic_load_n(&forwarded, __ATOMIC_SEQ_CST) ? EINTR /* jitfit is ending */
                                                            : posix_spawnp(&pid, argv[0], &fa,
                                                                           &attr, argv,
                                                                           envp ? envp : environ);
    int slot = err == 0 ? track(pid) : -1;
    __atomic_sub_fetch(&spawning, 1, __ATOMIC_SEQ_CST);
    pthread_sigmask(SIG_SETMASK, &mask, NULL);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (err != 0) {
        close(p[0]);
        return err;
    }
    const double timeout = jf_cc_timeout_s();
    const double deadline = timeout > 0 ? mono_s() + timeout : 0.0;
    int timed_out = 0;
    size_t cap = 4096, len = 0, limit = 64 * 1024;
    char *buf = malloc(cap);
    char sink[4096];
    /* exited: it has been waited for (ws holds its status) or, reaped by someone else, is
     * gone; from then on only what is already in the pipe is read. nap_ms: how long a poll
     * waits before looking whether it has exited, doubled up to 100 ms (a compile of a few
     * ms pays nothing; EOF, the usual end, wakes the poll at once). */
    int ws, exited = 0, reaped = 0, drained = 0, nap_ms = 1;
    for (;;) {
        int wait_ms = exited ? 0 : nap_ms;
        if (deadline > 0 && !exited) {
            double left = deadline - mono_s();
            if (left <= 0) {
                timed_out = 1;
                break;
            }
            if (left * 1e3 < wait_ms) wait_ms = (int)(left * 1e3) + 1;
        }
        struct pollfd pf = {p[0], POLLIN, 0};
        int pr = poll(&pf, 1, wait_ms);
        if (pr < 0 && errno == EINTR) continue;
        if (pr == 0 || (exited && ++drained > 256)) { /* 256 reads: 1 MiB after its exit */
            if (exited) break;
            pid_t r = waitpid(pid, &ws, WNOHANG);
            if (r == pid) exited = 1;
            else if (r < 0 && errno == ECHILD) exited = reaped = 1;
            if (nap_ms < 100) nap_ms *= 2;
            continue; /* once more: what it wrote between the poll and its exit */
        }
        char *dst = sink;
        size_t room = sizeof sink;
        if (buf && len + 1 < limit) {
            if (len + 1 >= cap) {
                char *nb = realloc(buf, cap * 2);
                if (nb) {
                    buf = nb;
                    cap *= 2;
                }
            }
            if (len + 1 < cap) {
                dst = buf + len;
                room = cap - len - 1;
            }
        }
        ssize_t r = read(p[0], dst, room);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        if (dst != sink) len += (size_t)r;
    }
    close(p[0]);
    if (buf) buf[len] = '\0';
    *out = buf;
    /* Its output closed: it has (almost always) exited. One that lives on past the deadline
     * with its output closed is killed too. */
    long nap_ns = 100000;
    while (!exited) {
        if (timed_out) kill(-pid, SIGKILL); /* the group: the compiler and its children */
        pid_t r = waitpid(pid, &ws, timed_out || deadline <= 0 ? 0 : WNOHANG);
        if (r == pid) break;
        if (r < 0 && errno == ECHILD) { /* it has exited, and someone else collected it */
            reaped = 1;
            break;
        }
        if (r < 0 && errno != EINTR) {
            int e = errno;
            untrack(slot);
            return e;
        }
        if (r == 0 && mono_s() >= deadline) timed_out = 1;
        else if (r == 0) {
            struct timespec nap = {0, nap_ns};
            nanosleep(&nap, NULL);
            if (nap_ns < 10000000) nap_ns *= 2;
        }
    }
    untrack(slot);
    if (timed_out) return ETIMEDOUT;
    if (reaped) {
        *status = STATUS_UNKNOWN;
        return 0;
    }
    *status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + (WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
    return 0;
}

/* ---- compiler identity ------------------------------------------------------------------------ */

/* One remembered identity. */
typedef struct ident {
    struct ident *next; /* next in the list */
    char *command;      /* the compiler command it was computed for */
    char *identity;     /* its identity, or NULL when it failed */
    char *why;          /* the reason it failed */
    int ready;          /* 1 once identity or why is set (guarded by ident_lock) */
    /* A failure is not for good: a long-running process must not fit with the interpreter
     * for the rest of its life because the compiler was missing, hung or could not be
     * started once (a mount not up yet, a process limit). Guarded by ident_lock. */
    int probing;        /* 1 while a thread probes it again (the others use the failure) */
    double retry_at;    /* mono_s() after which a failure is probed again */
    double backoff_s;   /* the wait before that, doubled at each failure */
    char sig[1024];     /* command_signature at the last probe (compute_identity): after a
                           failure, a change is probed at once */
} ident;

/* The first wait before a failed compiler is probed again, and the longest: a compiler that
 * hangs at --version costs the fit that probes it up to $JITFIT_CC_TIMEOUT, so the waits
 * double (1 min, 2, 4, ... 1 h); a changed compiler file is probed at the next call. */
#define IDENT_RETRY_S 60.0
#define IDENT_RETRY_MAX_S 3600.0

/* ident_lock guards the list and the ready flags, not the computation: `cc --version` runs
 * unlocked (it may take seconds), so a thread that needs another compiler's identity, or one
 * already known, does not wait for it; threads that need the same one wait on ident_done. */
static pthread_mutex_t ident_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ident_done = PTHREAD_COND_INITIALIZER;
static ident *idents;

/* The executable the shell would run for `word`, resolved through symlinks. */
static int resolve_path(const char *word, char *buf, size_t n) {
    char cand[PATH_MAX];
    if (strchr(word, '/')) {
        snprintf(cand, sizeof cand, "%s", word);
    } else {
        const char *path = getenv("PATH");
        if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
        int found = 0;
        while (*path && !found) {
            const char *e = strchr(path, ':');
            size_t len = e ? (size_t)(e - path) : strlen(path);
            snprintf(cand, sizeof cand, "%.*s/%s", (int)(len ? len : 1), len ? path : ".", word);
            if (access(cand, X_OK) == 0) found = 1;
            path += len + (e ? 1 : 0);
        }
        if (!found) return ENOENT;
    }
    char real[PATH_MAX];
    if (!realpath(cand, real)) return errno;
    snprintf(buf, n, "%s", real);
    return 0;
}

/* "dev:ino:size:mtime:ctime" of the file at path, or "" when it cannot be stat'ed. */
static void stat_signature(const char *path, char *buf, size_t n) {
    struct stat st;
    buf[0] = '\0';
    if (stat(path, &st) == 0)
        snprintf(buf, n, "%llu:%llu:%llu:%lld.%09ld:%lld.%09ld", (unsigned long long)st.st_dev,
                 (unsigned long long)st.st_ino, (unsigned long long)st.st_size,
                 (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec, (long long)st.st_ctim.tv_sec,
                 st.st_ctim.tv_nsec);
}

/* The signature of the command a: its resolved first word path's (stat_signature), then, after
 * '|', that of each later word that names an executable file (PATH searched as for the first).
 * A launcher ("ccache gcc", "distcc gcc") is the first word and stays unchanged when the
 * compiler it starts, a later word, is upgraded: that must be probed again too. "" when path
 * cannot be stat'ed; a signature cut to fit n is "" as well (never remembered). */
static void command_signature(const argvec *a, const char *path, char *buf, size_t n) {
    stat_signature(path, buf, n);
    for (size_t i = 1; buf[0] && i < a->n; i++) {
        char word[PATH_MAX], sig[256];
        struct stat st;
        if (a->v[i][0] == '-' || resolve_path(a->v[i], word, sizeof word) != 0 ||
            stat(word, &st) != 0 || !S_ISREG(st.st_mode) || access(word, X_OK) != 0)
            continue;
        stat_signature(word, sig, sizeof sig);
        size_t len = strlen(buf);
        if ((size_t)snprintf(buf + len, n - len, "|%s", sig) >= n - len) buf[0] = '\0';
    }
}

/* The remembered identity file of command `cc` in dir. */
static void identity_file(const char *dir, const char *cc, const char *path, char *buf, size_t n) {
    /* FNV-1a is enough to tell commands apart in a file name; the content is checked anyway */
    uint64_t h = 1469598103934665603u;
    for (const char *s = cc; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    h = (h ^ 0) * 1099511628211u;
    for (const char *s = path; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    snprintf(buf, n, "%s/cc-%016llx.id", dir, (unsigned long long)h);
}

/* The identity remembered in file for signature sig, or NULL (malloc'd). */
static char *read_identity(const char *file, const char *sig) {
    char buf[8192];
    /* a plain file only: a FIFO or device in its place must not block or be read */
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return NULL;
    }
    ssize_t r = read(fd, buf, sizeof buf - 1);
    close(fd);
    size_t got = r > 0 ? (size_t)r : 0;
    buf[got] = '\0';
    char *nl = strchr(buf, '\n');
    if (!nl || (size_t)(nl - buf) != strlen(sig) || strncmp(buf, sig, strlen(sig)) != 0) return NULL;
    char *idt = nl + 1, *end = strchr(idt, '\n');
    if (!end || end == idt) return NULL;
    *end = '\0';
    return strdup(idt);
}

/* Best effort: a failed write only means the next process runs the compiler again. */
static void write_identity(const char file[4200], const char *sig, const char *identity) {
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", file);
    int fd = mkostemp(tmp, O_CLOEXEC); /* not inherited by a process the host starts meanwhile */
    if (fd < 0) return;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        unlink(tmp);
        return;
    }
    int ok = fprintf(f, "%s\n%s\n", sig, identity) > 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, file) != 0) unlink(tmp);
}

static void compute_identity(ident *id, const char *cache_dir) {
    char why[512];
    argvec a = {0};
    av_split(&a, id->command);
    if (a.nomem || a.n == 0) {
        snprintf(why, sizeof why, a.nomem ? "out of memory" : "empty compiler command");
        id->why = strdup(why);
        av_free(&a);
        return;
    }
    char path[PATH_MAX];
    int err = resolve_path(a.v[0], path, sizeof path);
    if (err) {
        snprintf(why, sizeof why, "C compiler '%s' not found (%s)", a.v[0], strerror(err));
        id->why = strdup(why);
        av_free(&a);
        return;
    }
    char *sig = id->sig, file[4200]; /* kept: a failure is probed again when it changes */
    command_signature(&a, path, sig, sizeof id->sig);
    if (cache_dir && sig[0]) {
        identity_file(cache_dir, id->command, path, file, sizeof file);
        if ((id->identity = read_identity(file, sig)) != NULL) {
            av_free(&a);
            return;
        }
    }
    av_push(&a, "--version", 9);
    char *out = NULL;
    int status;
    err = a.nomem ? ENOMEM : run_capture(a.v, NULL, 1, &out, &status);
    /* with its exit status unknown, a version line is taken as success */
    if (err || !out || (status != 0 && !(status == STATUS_UNKNOWN && out[0]))) {
        if (err == ETIMEDOUT)
            snprintf(why, sizeof why, "C compiler '%s --version' did not finish within %g s, "
                     "see JITFIT_CC_TIMEOUT", a.v[0], jf_cc_timeout_s());
        else if (err) snprintf(why, sizeof why, "cannot run C compiler '%s': %s", a.v[0], strerror(err));
        else if (status == STATUS_UNKNOWN)
            snprintf(why, sizeof why, "C compiler '%s --version' printed nothing", a.v[0]);
        else snprintf(why, sizeof why, "C compiler '%s --version' failed (exit status %d)", a.v[0],
                      status);
        id->why = strdup(why);
    } else {
        size_t l = strcspn(out, "\n");
        out[l] = '\0';
        /* The words after the first (e.g. "gcc -m32") change the output, so they are part of
         * the identity too; path first so two installs of one version differ. */
        size_t need = strlen(path) + strlen(id->command) + l + 8;
        id->identity = malloc(need);
        if (id->identity) {
            const char *rest = id->command + strspn(id->command, " \t\n");
            rest += strcspn(rest, " \t\n");
            snprintf(id->identity, need, "%s%s: %s", path, rest, out);
            if (cache_dir && sig[0] && !strchr(id->identity, '\n'))
                write_identity(file, sig, id->identity);
        } else {
            id->why = strdup("out of memory");
        }
    }
    free(out);
    av_free(&a);
}

/* The signature (command_signature) of the executables of command, "" when its first word
 * is not found. */
static void signature_of(const char *command, char *buf, size_t n) {
    argvec a = {0};
    char path[PATH_MAX];
    buf[0] = '\0';
    av_split(&a, command);
    if (!a.nomem && a.n && resolve_path(a.v[0], path, sizeof path) == 0)
        command_signature(&a, path, buf, n);
    av_free(&a);
}

/* Called with ident_lock held on a failed id: when its wait is over or the compiler's files
 * have changed, probes again (unlocked; other threads meanwhile use the failure) and keeps
 * the result. Returns with the lock held. */
static void retry_failed(ident *id, const char *cache_dir) {
    char sig[sizeof id->sig];
    if (id->probing) return;
    pthread_mutex_unlock(&ident_lock);
    signature_of(id->command, sig, sizeof sig);
    pthread_mutex_lock(&ident_lock);
    if (id->probing || (mono_s() < id->retry_at && strcmp(sig, id->sig) == 0)) return;
    id->probing = 1;
    pthread_mutex_unlock(&ident_lock);
    ident fresh;
    memset(&fresh, 0, sizeof fresh);
    fresh.command = id->command;
    compute_identity(&fresh, cache_dir);
    pthread_mutex_lock(&ident_lock);
    id->probing = 0;
    if (fresh.identity) { /* set once: callers keep the pointer */
        id->identity = fresh.identity;
        free(fresh.why);
        return;
    }
    free(id->why);
    id->why = fresh.why;
    memcpy(id->sig, fresh.sig, sizeof id->sig);
    id->backoff_s = id->backoff_s * 2 < IDENT_RETRY_MAX_S ? id->backoff_s * 2 : IDENT_RETRY_MAX_S;
    id->retry_at = mono_s() + id->backoff_s;
}

int jf_cc_identity(const char *cc, const char *cache_dir, const char **identity, char *why,
                   size_t n) {
    *identity = NULL;
    cc = jf_cc_command(cc); /* NULL or "" means the default compiler, as for compiling */
    pthread_mutex_lock(&ident_lock);
    ident *id = idents;
    while (id && strcmp(id->command, cc) != 0) id = id->next;
    if (!id) {
        id = calloc(1, sizeof *id);
        if (id) id->command = strdup(cc);
        if (!id || !id->command) {
            if (id) free(id);
            pthread_mutex_unlock(&ident_lock);
            snprintf(why, n, "out of memory");
            return JF_ERR_NOMEM;
        }
        id->next = idents;
        idents = id;
        pthread_mutex_unlock(&ident_lock);
        compute_identity(id, cache_dir); /* only this thread writes id's fields until ready */
        pthread_mutex_lock(&ident_lock);
        id->backoff_s = IDENT_RETRY_S;
        id->retry_at = mono_s() + id->backoff_s;
        id->ready = 1;
        pthread_cond_broadcast(&ident_done);
    }
    while (!id->ready) pthread_cond_wait(&ident_done, &ident_lock);
    if (!id->identity) retry_failed(id, cache_dir);
    int st = JF_OK;
    if (id->identity) {
        *identity = id->identity;
    } else {
        snprintf(why, n, "%s", id->why ? id->why : "out of memory");
        st = JF_ERR_UNAVAILABLE;
    }
    pthread_mutex_unlock(&ident_lock);
    return st;
}

/* ---- files and directories ------------------------------------------------------------------ */

/* A private directory lives for one compile or load (removed right after), so one of ours
 * older than this was left by a process that ended mid-compile: killed (SIGKILL, Ctrl-C with
 * no handler in a program embedding the library), or crashed. Far above the compile time
 * limit's default (300 s). */
#define STALE_TMPDIR_S (6 * 3600)

/* The pid in a name "jitfit-PID-XXXXXX" exactly as jf_cc_tmpdir makes it (digits, then six of
 * mkdtemp's letters and digits), else 0: $TMPDIR may be a home or project directory, where a
 * name like "jitfit-2024-notes" is the user's, and strtol alone would read it as pid 2024. */
static long private_dir_pid(const char *name) {
    const char *p = name + 7;
    if (strncmp(name, "jitfit-", 7) != 0 || *p < '1' || *p > '9') return 0;
    long pid = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (pid > 99999999) return 0;
        pid = pid * 10 + (*p - '0');
    }
    if (*p++ != '-') return 0;
    for (int i = 0; i < 6; i++, p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
            return 0;
    return *p ? 0 : pid;
}

/* 1 for the names of the files a compile writes in its private directory (jf_cc_compile_libs,
 * object_path): the sweep removes only those, so a directory of the user's that happens to be
 * named like ours loses nothing else (and, not empty, stays). */
static int compile_file_name(const char *name) {
    if (strcmp(name, "kernels.c") == 0) return 1;
    if (strncmp(name, "kernels-", 8) != 0) return 0;
    const char *p = name + 8;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') p++;
    return strcmp(p, ".so") == 0;
}

/* Removes the directories named jitfit-PID-XXXXXX in base that this user owns, that were last
 * changed STALE_TMPDIR_S ago or more, and whose process no longer exists here, with the files
 * a compile writes in them (compile_file_name). Both conditions, since another pid namespace
 * sharing /tmp has pids this one cannot see. Nothing is followed through a link; what cannot
 * be removed stays, silently: this is housekeeping, not part of the fit. */
static void sweep_stale(const char *base) {
    DIR *d = opendir(base);
    if (!d) return;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        long pid = private_dir_pid(e->d_name);
        if (pid <= 0 || pid == (long)getpid()) continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
            st.st_uid != geteuid() || now - st.st_mtime < STALE_TMPDIR_S)
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *sub = fd >= 0 ? fdopendir(fd) : NULL;
        if (!sub) {
            if (fd >= 0) close(fd);
            continue;
        }
        struct dirent *f;
        while ((f = readdir(sub)) != NULL) {
            struct stat fs;
            if (compile_file_name(f->d_name) &&
                fstatat(dirfd(sub), f->d_name, &fs, AT_SYMLINK_NOFOLLOW) == 0 &&
                !S_ISDIR(fs.st_mode))
                unlinkat(dirfd(sub), f->d_name, 0);
        }
        closedir(sub);
        unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
    }
    closedir(d);
}

int jf_cc_tmpdir(char *buf, size_t n) {
    /* $TMPDIR, else /tmp: also when $TMPDIR is unusable (removed since it was set, a file, not
     * writable, too long), as the compiler itself does (gcc's choose_tmpdir), so a stale
     * variable does not cost every fit its compiled kernels. The pid in the name lets a later
     * process tell a directory left by an interrupted compile (sweep_stale). */
    const char *t = getenv("TMPDIR");
    const char *base = NULL;
    long pid = (long)getpid();
    if (t && t[0] == '/' && (size_t)snprintf(buf, n, "%s/jitfit-%ld-XXXXXX", t, pid) < n &&
        mkdtemp(buf))
        base = t;
    else if ((size_t)snprintf(buf, n, "/tmp/jitfit-%ld-XXXXXX", pid) < n && mkdtemp(buf))
        base = "/tmp";
    if (!base) return JF_ERR_IO;
    static int swept; /* once per process, in the directory of its first private one */
    if (!__atomic_exchange_n(&swept, 1, __ATOMIC_SEQ_CST)) sweep_stale(base);
    return JF_OK;
}

void jf_cc_tmpdir_remove(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                unlinkat(dirfd(d), e->d_name, 0);
        closedir(d);
    }
    rmdir(dir);
}

/* A name for a shared object that no earlier one in this process had. glibc's dlopen hands
 * back the object already loaded under the same path without opening the file, and the private
 * directories are removed after each load, so mkdtemp may give a directory's name out again:
 * with a fixed file name in it, a new model would silently get an old model's kernels. */
static void object_path(const char *dir, char *buf, size_t n) {
    static unsigned long counter;
    unsigned long id = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    snprintf(buf, n, "%s/kernels-%lu.so", dir, id);
}

static int write_file(const char *path, const void *data, size_t size) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return errno;
    const char *p = data;
    while (size) {
        ssize_t w = write(fd, p, size);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int err = errno ? errno : EIO;
            close(fd);
            return err;
        }
        p += w;
        size -= (size_t)w;
    }
    return close(fd) == 0 ? 0 : errno;
}

int jf_cc_read_file(const char *path, unsigned char **bytes, size_t *size) {
    *bytes = NULL;
    *size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return JF_ERR_IO;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return JF_ERR_IO;
    }
    size_t n = (size_t)st.st_size, got = 0;
    unsigned char *b = malloc(n ? n : 1);
    if (!b) {
        close(fd);
        return JF_ERR_NOMEM;
    }
    while (got < n) {
        ssize_t r = read(fd, b + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got != n) {
        free(b);
        return JF_ERR_IO;
    }
    *bytes = b;
    *size = n;
    return JF_OK;
}

/* ---- compiling and loading ------------------------------------------------------------------ */

/* This process's environment with TMPDIR set to dir, in one allocation (free() it). The
 * compiler's own temporaries (gcc's ccXXXXXX.s and .o) then go to the compile's private
 * directory, which is removed after the compile: a compiler killed at its time limit cannot
 * remove them itself, and in $TMPDIR they would stay for good. NULL when out of memory. */
static char **env_with_tmpdir(const char *dir) {
    size_t n = 0;
    while (environ && environ[n]) n++;
    size_t len = strlen(dir) + sizeof "TMPDIR=";
    char **env = malloc((n + 2) * sizeof *env + len);
    if (!env) return NULL;
    char *var = (char *)(env + n + 2);
    snprintf(var, len, "TMPDIR=%s", dir);
    size_t k = 0;
    env[k++] = var;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "TMPDIR=", 7) != 0) env[k++] = environ[i];
    env[k] = NULL;
    return env;
}

int jf_cc_compile(const char *cc, const char *extra_flags, const char *source, const char *dir,
                  char *so_path, size_t n, char **log) {
    return jf_cc_compile_libs(cc, extra_flags, NULL, source, dir, so_path, n, log);
}

int jf_cc_compile_libs(const char *cc, const char *extra_flags, const char *libs,
                       const char *source, const char *dir, char *so_path, size_t n, char **log) {
    if (log) *log = NULL;
    char src[PATH_MAX];
    snprintf(src, sizeof src, "%s/kernels.c", dir);
    object_path(dir, so_path, n);
    int err = write_file(src, source, strlen(source));
    if (err) {
        if (log) {
            char m[PATH_MAX + 64];
            snprintf(m, sizeof m, "cannot write %s: %s", src, strerror(err));
            *log = strdup(m);
        }
        return JF_ERR_IO;
    }
    argvec a = {0};
    av_split(&a, cc);
    av_split(&a, JF_CC_DEFAULT_FLAGS);
    av_split(&a, extra_flags);
    av_push(&a, "-o", 2);
    av_push(&a, so_path, strlen(so_path));
    av_push(&a, src, strlen(src));
    /* Libraries after the source, so that a linker with --as-needed keeps them. */
    av_split(&a, libs);
    /* The kernels call libm; saying so keeps the .so loadable into any process. */
    av_push(&a, "-lm", 3);
    if (a.nomem || a.n == 0) {
        av_free(&a);
        if (log) *log = strdup("out of memory");
        return JF_ERR_NOMEM;
    }
    char **env = env_with_tmpdir(dir);
    if (!env) {
        av_free(&a);
        if (log) *log = strdup("out of memory");
        return JF_ERR_NOMEM;
    }
    char *out = NULL;
    int status;
    err = run_capture(a.v, env, 2, &out, &status);
    free(env);
    int st = JF_OK;
    if (err) {
        st = JF_ERR_UNAVAILABLE;
        if (log) {
            char m[512];
            if (err == ETIMEDOUT)
                snprintf(m, sizeof m, "did not finish within %g s, see JITFIT_CC_TIMEOUT",
                         jf_cc_timeout_s());
            else snprintf(m, sizeof m, "cannot run C compiler '%s': %s", a.v[0], strerror(err));
            *log = strdup(m);
        }
    } else if (status != 0 && !(status == STATUS_UNKNOWN && access(so_path, F_OK) == 0)) {
        /* with its exit status unknown, the object it wrote counts (the caller loads it and
         * checks it against the model) */
        st = JF_ERR_COMPILE;
        if (log) {
            char m[128];
            if (status == STATUS_UNKNOWN) snprintf(m, sizeof m, "C compiler wrote no object");
            else snprintf(m, sizeof m, "C compiler exited with status %d", status);
            *log = (out && *out) ? out : strdup(m);
            if (*log == out) out = NULL;
        }
    }
    free(out);
    av_free(&a);
    return st;
}

void *jf_cc_load_file(const char *path, char *why, size_t n) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        size_t len = (size_t)snprintf(why, n, "cannot load %s: %s", path, e ? e : "unknown error");
        /* hardened systems mount /tmp noexec; dlerror only says "failed to map segment" */
        struct statvfs fs;
        if (len < n && statvfs(path, &fs) == 0 && (fs.f_flag & ST_NOEXEC))
            snprintf(why + len, n - len, " (its file system is mounted noexec: set TMPDIR to a "
                     "directory where programs may run)");
    }
    return h;
}

void *jf_cc_load_bytes(const unsigned char *bytes, size_t size, char *why, size_t n) {
    char dir[PATH_MAX], path[PATH_MAX + 16];
    if (jf_cc_tmpdir(dir, sizeof dir) != JF_OK) {
        snprintf(why, n, "cannot create a temporary directory: %s", strerror(errno));
        return NULL;
    }
    object_path(dir, path, sizeof path);
    int err = write_file(path, bytes, size);
    void *h = NULL;
    if (err) snprintf(why, n, "cannot write %s: %s", path, strerror(err));
    else h = jf_cc_load_file(path, why, n);
    /* The mapping keeps the inode alive; the name is not needed once loaded. */
    jf_cc_tmpdir_remove(dir);
    return h;
}
