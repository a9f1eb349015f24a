/* The kernel cache: compiled kernels are reused within a process (in memory) and across
 * processes (on disk), so a model is compiled once per machine, not once per fit.
 *
 * Place in the pipeline: emit (C | CUDA source) → key → memory? → disk? → JIT compile → store.
 * The key is an XXH3-128 hash over everything that determines the compiled bytes: the generated
 * source, the backend, the compiler's identity and version, the flags, the GPU architecture, the
 * jitfit version and the cache format version. The memory cache maps a key to a loaded module
 * (whatever the backend calls a module: the cache stores the pointer and the backend's function
 * that unloads it). Users hold references; of the modules nobody holds, only the most recently
 * used few stay loaded (see "in memory" below), so a process that compiles model after model
 * does not grow without bound, and a module in use is never unloaded.
 * The disk cache stores one file per key, named by the hex key, holding a header (magic, format
 * version, backend, the full key, payload size and an XXH3-128 hash of the payload) followed
 * by the payload (a shared object or a CUBIN). Entries are verified in full before use; anything
 * truncated, corrupt or foreign is reported as invalid so the caller rebuilds (overwrites) it.
 * Writes are atomic (mkstemp in the cache directory, fsync, rename), so concurrent processes
 * never see a partial entry and the last writer of identical bytes wins.
 *
 * Native code is never loaded from a place others can write: the directory must belong to the
 * effective user and must not be group- or world-writable, or the disk cache is refused (the
 * caller runs uncached and shows the reason as a warning).
 */
#ifndef JF_CACHE_H
#define JF_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* Version of the entry layout and of the key's composition; bump it when either changes. */
#define JF_CACHE_FORMAT_VERSION 1u

/* A 128-bit cache key. */
typedef struct jf_cache_key {
    unsigned char bytes[16]; /* XXH3-128 digest, big-endian (canonical xxhash order) */
} jf_cache_key;

/* Everything that goes into a key besides the jitfit and cache format versions. */
typedef struct jf_cache_key_parts {
    const char *backend;  /* "c" or "cuda" */
    const char *source;   /* the generated source text */
    const char *compiler; /* compiler identity: resolved path and version line, or NVRTC version */
    const char *flags;    /* the compiler flags exactly as passed */
    const char *arch;     /* GPU architecture ("sm_90", "compute_80"), or the host ABI of a C
                             module ("x86_64-le") */
} jf_cache_key_parts;

/* The key of the given parts (NULL members count as ""). */
JF_INTERNAL jf_cache_key jf_cache_key_make(const jf_cache_key_parts *parts);
/* XXH3-128 of arbitrary bytes, for callers that build keys of their own (e.g. a fast
 * in-memory key from a model's DAG). */
JF_INTERNAL jf_cache_key jf_cache_hash(const void *data, size_t n);
/* Writes the 32-digit lowercase hex form of key into buf (at least 33 bytes). */
JF_INTERNAL void jf_cache_key_hex(const jf_cache_key *key, char *buf);

/* ---- in memory ----------------------------------------------------------------------------
 * A process-wide, mutex-protected map key → loaded module, with a reference count per module.
 * Whoever uses a module holds a reference (jf_cache_mem_get and jf_cache_mem_put take one,
 * jf_cache_mem_release gives it back), for as long as anything may call into the module.
 * Modules nobody holds stay loaded for reuse, least recently used first in line: when more than
 * jf_cache_mem_limit() of them are idle, the oldest idle one is unloaded by the function its
 * backend stored with it (dlclose for C, cuModuleUnload for CUDA), after all its keys are
 * removed, outside the cache's lock. A held module is never unloaded, whatever the limit. One
 * module may be stored under several keys (the C backend's fast and full keys): it is one
 * entry, counted and unloaded once. */

/* Idle modules kept loaded when $JITFIT_CACHE_MODULES is not set. A loaded C module costs
 * 26-41 KiB of resident memory and 5 memory mappings (measured for 5- and 15-parameter models;
 * a CUDA module holds its code in device memory), and reloading one that was unloaded costs a
 * disk-cache hit (0.3 ms) or, without the disk cache, a compile (0.1 s; more for a CUDA module,
 * and under the emulator, which has no disk cache, always): 64 keeps a service's working set of
 * models loaded for under 3 MiB, where an unbounded cache grows by that much every 64 new
 * models and runs into the kernel's 65530 mappings per process after about 13000. */
#define JF_CACHE_MEM_MODULES 64

/* A module in the memory cache. */
typedef struct jf_cache_entry jf_cache_entry;

/* A backend's way to unload one of its modules (and free the module's own record). */
typedef void (*jf_cache_unload_fn)(void *module);

/* The entry stored under key with a reference taken for the caller (release it with
 * jf_cache_mem_release), or NULL when there is none. */
JF_INTERNAL jf_cache_entry *jf_cache_mem_get(const jf_cache_key *key);
/* 1 when a module is stored under key; takes no reference and does not count as a use. */
JF_INTERNAL int jf_cache_mem_has(const jf_cache_key *key);
/* Stores module under key, to be unloaded by unload, unless a module is already there. Returns
 * the entry now under key with a reference taken for the caller: module's own (the cache now
 * owns module), or the earlier one (jf_cache_entry_module differs from module: the caller
 * unloads its copy). NULL when out of memory: nothing was stored and the caller still owns
 * module. Should the table be unable to grow, module gets an entry under no key, unloaded when
 * its last reference goes. */
JF_INTERNAL jf_cache_entry *jf_cache_mem_put(const jf_cache_key *key, void *module,
                                             jf_cache_unload_fn unload);
/* Stores e, which the caller holds, under key too (a second name for the same module). Returns
 * 1 when key now names e; 0 when key names another module, e has JF_CACHE_ENTRY_KEYS keys
 * already, or memory is short: then key is left as it was (a lookup by it only misses). */
JF_INTERNAL int jf_cache_mem_alias(const jf_cache_key *key, jf_cache_entry *e);
/* Gives back a reference taken by jf_cache_mem_get or jf_cache_mem_put; the module may be
 * unloaded once nobody holds it. Accepts NULL. */
JF_INTERNAL void jf_cache_mem_release(jf_cache_entry *e);
/* The module of an entry the caller holds. */
JF_INTERNAL void *jf_cache_entry_module(const jf_cache_entry *e);

/* Most keys one entry has: a C module has two, a third when another command names the same
 * compiler (a new fast key, the same full key); beyond a few, a name is only a lookup that
 * misses and goes on to the full key, so a fixed array does. */
#define JF_CACHE_ENTRY_KEYS 4

/* The idle modules kept loaded: $JITFIT_CACHE_MODULES when it is a whole number >= 0 (0:
 * unload a module as soon as nobody holds it), else JF_CACHE_MEM_MODULES. Read at each put and
 * release, so a change applies from the next one on. */
JF_INTERNAL size_t jf_cache_mem_limit(void);

/* A snapshot of the memory cache, for tests and diagnostics. */
typedef struct jf_cache_mem_stats {
    size_t loaded;   /* modules loaded now (held or idle), each counted once */
    size_t idle;     /* of those, the ones nobody holds */
    size_t keys;     /* keys stored */
    size_t unloaded; /* modules unloaded since the process started */
} jf_cache_mem_stats;

/* Fills *out with the counts at the moment of the call. */
JF_INTERNAL void jf_cache_mem_stats_get(jf_cache_mem_stats *out);

/* ---- on disk ------------------------------------------------------------------------------ */

/* State of the disk cache for one lookup. */
typedef enum jf_cache_state {
    JF_CACHE_DIR_OK = 0,       /* the directory exists (or was created) and is safe to use */
    JF_CACHE_DIR_DISABLED = 1, /* disabled by JITFIT_NO_CACHE=1 or an option */
    JF_CACHE_DIR_REFUSED = 2   /* unusable: wrong owner, writable by others, not a directory,
                                  cannot be created; `reason` says which */
} jf_cache_state;

/* The longest cache directory path, in bytes: an entry's temporary file name (46 bytes with
 * its slash) must still fit below it in PATH_MAX (4096). */
#define JF_CACHE_DIR_MAX 4032u

/* The resolved disk cache directory. */
typedef struct jf_cache_dir {
    jf_cache_state state; /* whether the directory may be used */
    char path[4096];      /* the directory ("" when no home directory could be found, or
                             when the path is longer than JF_CACHE_DIR_MAX) */
    char reason[4096 + 160]; /* why it is disabled or refused (one line), "" when OK */
} jf_cache_dir;

/* Resolves the cache directory: `override` if not NULL, else $JITFIT_CACHE_DIR, else
 * $XDG_CACHE_HOME/jitfit (an absolute XDG_CACHE_HOME only, as the XDG spec says), else
 * ~/.cache/jitfit (an absolute $HOME, else the home directory in the user database). no_cache (or JITFIT_NO_CACHE set to a value other than "" and "0") disables
 * it. With create, a missing directory is created with mode 0700 (parents too); without, a
 * missing directory is OK (empty) when it could be created, else refused. A path longer than
 * JF_CACHE_DIR_MAX is refused, never cut, and so is one starting with an unexpanded '~'. Then the directory's ownership and mode are checked.
 * Always fills *out; returns its state. */
JF_INTERNAL jf_cache_state jf_cache_dir_open(const char *override, int no_cache, int create,
                                             jf_cache_dir *out);
/* jf_cache_dir_open(NULL, 0, 0, out) for `jitfit cache clear|prune`, with JITFIT_NO_CACHE
 * ignored: it keeps fits off the cache, while these act on the directory all the same, and
 * so must check it all the same (a disabled state skips the checks). */
JF_INTERNAL jf_cache_state jf_cache_dir_open_upkeep(jf_cache_dir *out);

/* Kinds of payload, stored in the header so a C entry is never taken for a CUDA one. */
#define JF_CACHE_KIND_C_SO 1u     /* a shared object from the C backend */
#define JF_CACHE_KIND_CUDA_CUBIN 2u /* a CUBIN (or PTX) image from NVRTC */

/* Outcome of a disk lookup. */
typedef enum jf_cache_lookup_result {
    JF_CACHE_ENTRY_HIT = 0,     /* a verified payload was returned */
    JF_CACHE_ENTRY_ABSENT = 1,  /* no entry for the key */
    JF_CACHE_ENTRY_INVALID = 2, /* an entry exists but is truncated, corrupt or foreign */
    JF_CACHE_ENTRY_ERROR = 3    /* it could not be read (I/O error, out of memory) */
} jf_cache_lookup_result;

/* Reads and verifies the entry for key. On a hit *payload receives the payload bytes (the
 * caller frees them with free()) and *size their number. why (if not NULL, n bytes) receives
 * a one-line reason for INVALID and ERROR. dir must be in state OK. */
JF_INTERNAL jf_cache_lookup_result jf_cache_disk_load(const jf_cache_dir *dir,
                                                      const jf_cache_key *key, uint32_t kind,
                                                      unsigned char **payload, size_t *size,
                                                      char *why, size_t n);
/* Writes (or atomically replaces) the entry for key. JF_OK or JF_ERR_IO with a one-line reason
 * in why. dir must be in state OK. */
JF_INTERNAL int jf_cache_disk_store(const jf_cache_dir *dir, const jf_cache_key *key,
                                    uint32_t kind, const unsigned char *payload, size_t size,
                                    char *why, size_t n);
/* The path of key's entry in dir (n bytes at least strlen(dir->path) + 40). */
JF_INTERNAL void jf_cache_entry_path(const jf_cache_dir *dir, const jf_cache_key *key,
                                     char *buf, size_t n);

/* Number of entries (regular files with an entry's name) and their total size in bytes.
 * JF_OK, or JF_ERR_IO with errno set when the directory cannot be listed (a missing
 * directory, or a file in its place, counts as empty). */
JF_INTERNAL int jf_cache_disk_info(const jf_cache_dir *dir, size_t *entries, uint64_t *bytes);
/* Removes every entry (and leftover temporary files of interrupted writes); other files are
 * left alone. *removed (if not NULL) receives the number of entries removed. JF_OK, or
 * JF_ERR_IO with a one-line reason in why (if not NULL, n bytes) naming the first file that
 * could not be removed (e.g. a directory made under an entry's name, which blocks that entry)
 * or saying that the directory cannot be listed. */
JF_INTERNAL int jf_cache_disk_clear(const jf_cache_dir *dir, size_t *removed, char *why, size_t n);

/* Removes the entries not used for more than max_age_s seconds (negative: no age limit), then,
 * least recently used first, as many as it takes to bring the entries' total size to at most
 * max_bytes (UINT64_MAX: no size limit; 0 removes every entry); also temporaries of writes interrupted a day ago or more. An
 * entry's use time is its mtime: when it was written, or last loaded (to the hour). *removed,
 * *kept and *kept_bytes receive the counts; only regular files count as entries. JF_OK,
 * JF_ERR_IO (the directory cannot be listed, or an entry not removed) or JF_ERR_NOMEM, with a
 * one-line reason in why (if not NULL, n bytes). */
JF_INTERNAL int jf_cache_disk_prune(const jf_cache_dir *dir, double max_age_s, uint64_t max_bytes,
                                    size_t *removed, size_t *kept, uint64_t *kept_bytes,
                                    char *why, size_t n);

/* Size of the entry header in bytes (for tests that damage entries on purpose). */
#define JF_CACHE_HEADER_SIZE 64u

#endif
