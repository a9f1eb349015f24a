/* The kernel cache: compiled kernels are reused within a process (in memory) and across
 * processes (on disk), so a model is compiled once per machine, not once per fit.
 *
 * Place in the pipeline: emit (C | CUDA source) → key → memory? → disk? → JIT compile → store.
 * The key is an XXH3-128 hash over everything that determines the compiled bytes: the generated
 * source, the backend, the compiler's identity and version, the flags, the GPU architecture, the
 * jitfit version and the cache format version. The memory cache maps a key to a loaded module
 * (whatever the backend calls a module; the cache only stores the pointer and never unloads it).
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
 * A process-wide, mutex-protected map key → module pointer. Modules put here live until the
 * process ends (a loaded .so or CUDA module is cheap to keep and unsafe to unload while some
 * jf_kernels may still point into it). */

/* The module stored under key, or NULL. */
JF_INTERNAL void *jf_cache_mem_get(const jf_cache_key *key);
/* Stores module under key unless one is already there. Returns the module now stored under
 * key: `module` itself, or the earlier one (then the caller discards its own copy), or NULL
 * when out of memory (the module was not stored; the caller may still use and keep it). */
JF_INTERNAL void *jf_cache_mem_put(const jf_cache_key *key, void *module);

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
 * max_bytes (0: no size limit); also temporaries of writes interrupted a day ago or more. An
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
