/* The C JIT backend: generated C → system compiler → shared object → dlopen.
 *
 * Place in the pipeline: codegen/emit_c.c produces the source, runtime/kernels.c asks the cache
 * and, on a miss, calls jf_cc_compile here, stores the bytes in the disk cache and loads them.
 * The compiler runs as a child process (posix_spawnp, no shell), with its stderr captured for
 * the error message; nothing here prints. Generated code contains no user text, but the
 * compiler command comes from $JITFIT_CC, so it is split into words without a shell as well.
 */
#ifndef JF_JIT_CC_H
#define JF_JIT_CC_H

#include <stddef.h>

#include "common.h"

/* The flags always passed to the compiler (they enter the cache key):
 * -O2 -fPIC -shared, IEEE semantics kept (no -ffast-math; -ffp-contract=off so no FMA is
 * formed where the interpreter does a separate multiply and add; -fno-math-errno only drops
 * errno updates), -fopenmp-simd for the `#pragma omp simd` of the generated normal_eq loop.
 * See docs/PERFORMANCE.md ("JIT and cache") for the measurements behind this choice. */
#define JF_CC_DEFAULT_FLAGS "-O2 -fPIC -shared -std=gnu11 -ffp-contract=off -fno-math-errno -fopenmp-simd"

/* The compiler's time limit in seconds: $JITFIT_CC_TIMEOUT when it is a number >= 0 (0: no
 * limit), else 300. A compiler (or its --version probe) running longer is killed and the fit
 * uses the interpreter, with a warning saying so. */
JF_INTERNAL double jf_cc_timeout_s(void);

/* Sends sig to the process group of each compiler (and its --version probe) this process is
 * running now. Each runs in a group of its own, so that a timeout kills what it started, and
 * so the terminal's Ctrl-C, sent to the foreground group, does not reach it: a host that ends
 * on SIGINT, SIGTERM or SIGHUP calls this from its handler first, or the compiler outlives it
 * (one that hangs, for good: its time limit was the host's to enforce). A compiler being
 * started by another thread is waited for (a few ms, at most 1 s) and signalled too, and none
 * is started after this call (the compile fails): the host is ending. Async-signal-safe (it
 * calls kill and nanosleep only). */
JF_INTERNAL void jf_cc_signal_running(int sig);

/* The compiler command to use: cc if not NULL/empty, else $JITFIT_CC if set and non-empty,
 * else "cc". The string is returned as is (it may hold several words). */
JF_INTERNAL const char *jf_cc_command(const char *cc);

/* The compiler's identity for cache keys: "<resolved path of the first word> <the other words>:
 * <first line of `cc --version`>", computed once per process per command. Running the compiler
 * costs a few milliseconds, more than a whole disk-cache hit, so when cache_dir is not NULL the
 * identity is also remembered there (file cc-<hash>.id) with the stat signature of the resolved
 * compiler binary (device, inode, size, mtime, ctime), and of every later word of the command
 * that names an executable (the compiler behind a launcher: "ccache gcc"); a new process that
 * finds the same signature uses it without running the compiler, and a replaced or upgraded
 * compiler is probed again (ccache's compiler_check=mtime). On success *identity points to a string owned by this
 * module (valid until the process ends). JF_ERR_UNAVAILABLE when the compiler cannot be found
 * or run, with a one-line reason in why; that failure is remembered, and the compiler probed
 * again once one of its files changes (installed, replaced) or a minute has passed (then 2, 4,
 * ... up to an hour while it keeps failing), so a long-running process gets its compiled
 * kernels back after a passing failure. */
JF_INTERNAL int jf_cc_identity(const char *cc, const char *cache_dir, const char **identity,
                               char *why, size_t n);

/* Creates a fresh private directory (mode 0700, from mkdtemp) under $TMPDIR, or under /tmp
 * when TMPDIR is unset, relative or unusable; its path goes to buf. JF_OK, or JF_ERR_IO with
 * errno telling why /tmp failed. */
JF_INTERNAL int jf_cc_tmpdir(char *buf, size_t n);
/* Removes the files in a directory made by jf_cc_tmpdir, then the directory. */
JF_INTERNAL void jf_cc_tmpdir_remove(const char *dir);

/* Compiles source with `cc flags extra_flags` into the shared object dir/kernels-N.so (dir from
 * jf_cc_tmpdir; N counts the objects of this process, so no two loaded objects ever share a path,
 * which dlopen would take for the same object); its path goes to so_path. JF_OK, JF_ERR_UNAVAILABLE (the compiler could not be
 * started) or JF_ERR_COMPILE (it failed); then *log (if not NULL) receives the compiler's stderr
 * or the reason (caller frees with free()). extra_flags may be NULL. The compiler runs with
 * TMPDIR=dir, so jf_cc_tmpdir_remove takes its temporaries too, even those of one killed. */
JF_INTERNAL int jf_cc_compile(const char *cc, const char *extra_flags, const char *source,
                              const char *dir, char *so_path, size_t n, char **log);

/* jf_cc_compile with libraries to link (e.g. "-l:libsleef.so.3"), placed after the source;
 * libs may be NULL. */
JF_INTERNAL int jf_cc_compile_libs(const char *cc, const char *extra_flags, const char *libs,
                                   const char *source, const char *dir, char *so_path, size_t n,
                                   char **log);

/* Reads a whole file into memory (caller frees *bytes). JF_OK, JF_ERR_IO or JF_ERR_NOMEM. */
JF_INTERNAL int jf_cc_read_file(const char *path, unsigned char **bytes, size_t *size);

/* dlopen(path, RTLD_NOW | RTLD_LOCAL). NULL on failure with dlerror()'s text in why. */
JF_INTERNAL void *jf_cc_load_file(const char *path, char *why, size_t n);

/* Loads a shared object held in memory (e.g. a verified cache payload): the bytes are written to
 * a private temporary file (O_EXCL in a fresh 0700 directory), dlopen'ed and unlinked at once,
 * so what is loaded is exactly what was verified. NULL on failure with the reason in why. */
JF_INTERNAL void *jf_cc_load_bytes(const unsigned char *bytes, size_t size, char *why, size_t n);

#endif
