/* The kernel cache (see cache.h for the design): key hashing, the in-memory map and the
 * on-disk entries with their verification and atomic replacement.
 *
 * Entry layout (all integers little-endian, header JF_CACHE_HEADER_SIZE = 64 bytes):
 *   0  magic "JFKCACHE"           8 bytes
 *   8  format version             u32 (JF_CACHE_FORMAT_VERSION)
 *  12  payload kind               u32 (JF_CACHE_KIND_*)
 *  16  the full key               16 bytes
 *  32  payload size               u64
 *  40  XXH3-128 of the payload    16 bytes (canonical order)
 *  56  reserved                   8 zero bytes
 *  64  payload
 * The header repeats the key because a file name is only a name: a file copied or renamed into
 * place by mistake (a "foreign" entry) is recognised by the mismatch and rebuilt.
 */
#define _GNU_SOURCE /* mkostemp */
#include "cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>
#include <pwd.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

static const char entry_magic[8] = {'J', 'F', 'K', 'C', 'A', 'C', 'H', 'E'};
static const char entry_suffix[] = ".jfc";
static const char tmp_prefix[] = ".tmp-";

/* ---- keys ---------------------------------------------------------------------------------- */

static jf_cache_key key_from_hash(XXH128_hash_t h) {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, h);
    jf_cache_key k;
    memcpy(k.bytes, c.digest, sizeof k.bytes);
    return k;
}

jf_cache_key jf_cache_hash(const void *data, size_t n) { return key_from_hash(XXH3_128bits(data, n)); }

/* Each field is hashed with its length in front, so ("ab","c") and ("a","bc") differ. */
static void hash_field(XXH3_state_t *st, const char *s) {
    if (!s) s = "";
    uint64_t len = strlen(s);
    unsigned char lb[8];
    for (int i = 0; i < 8; i++) lb[i] = (unsigned char)(len >> (8 * i));
    XXH3_128bits_update(st, lb, sizeof lb);
    XXH3_128bits_update(st, s, (size_t)len);
}

jf_cache_key jf_cache_key_make(const jf_cache_key_parts *p) {
    char fmt[16];
    snprintf(fmt, sizeof fmt, "%u", JF_CACHE_FORMAT_VERSION);
    /* On the stack (XXH_STATIC_LINKING_ONLY): key making must not fail for lack of memory. */
    XXH3_state_t st;
    XXH3_INITSTATE(&st);
    XXH3_128bits_reset(&st);
    hash_field(&st, "jitfit-kernel-cache");
    hash_field(&st, fmt);
    hash_field(&st, JITFIT_VERSION);
    hash_field(&st, p->backend);
    hash_field(&st, p->source);
    hash_field(&st, p->compiler);
    hash_field(&st, p->flags);
    hash_field(&st, p->arch);
    return key_from_hash(XXH3_128bits_digest(&st));
}

void jf_cache_key_hex(const jf_cache_key *key, char *buf) {
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        buf[2 * i] = hex[key->bytes[i] >> 4];
        buf[2 * i + 1] = hex[key->bytes[i] & 15];
    }
    buf[32] = '\0';
}

/* ---- in memory ------------------------------------------------------------------------------
 * Open addressing with linear probing, key → entry; an entry's keys are removed by backward
 * shifting (no tombstones, so lookups never slow down as modules come and go). Idle entries
 * (no references) are also on a doubly linked list, least recently used at the head, which
 * the trim takes from. */

struct jf_cache_entry {
    void *module;                          /* the backend's module */
    jf_cache_unload_fn unload;             /* how to unload it */
    size_t refs;                           /* references held; 0: idle */
    jf_cache_key keys[JF_CACHE_ENTRY_KEYS]; /* the keys naming it in the table */
    unsigned nkeys;                        /* their number; 0: unloaded at its last release */
    jf_cache_entry *prev, *next;           /* the idle list while idle; next also links the
                                              unload list of one trim */
};

typedef struct mem_slot {
    jf_cache_key key;  /* the key of this slot */
    jf_cache_entry *e; /* the entry; NULL marks an empty slot */
} mem_slot;

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static mem_slot *mem_slots;  /* mem_cap slots */
static size_t mem_cap;       /* a power of two, or 0 before the first put */
static size_t mem_count;     /* occupied slots (keys) */
static size_t mem_loaded;    /* live entries */
static size_t mem_idle;      /* entries on the idle list */
static size_t mem_unloaded;  /* entries unloaded so far */
static jf_cache_entry *idle_head, *idle_tail; /* least and most recently used idle entry */

static size_t slot_of(const jf_cache_key *key, size_t cap) {
    uint64_t h = 0;
    for (int i = 0; i < 8; i++) h = (h << 8) | key->bytes[i];
    return (size_t)h & (cap - 1);
}

static mem_slot *find_slot(mem_slot *slots, size_t cap, const jf_cache_key *key) {
    for (size_t i = slot_of(key, cap);; i = (i + 1) & (cap - 1)) {
        mem_slot *s = &slots[i];
        if (!s->e || memcmp(s->key.bytes, key->bytes, 16) == 0) return s;
    }
}

/* Room for one more key (the load factor stays at most 1/2); 0 when out of memory. */
static int table_reserve(void) {
    if (2 * (mem_count + 1) <= mem_cap) return 1;
    size_t ncap = mem_cap ? 2 * mem_cap : 64;
    mem_slot *ns = calloc(ncap, sizeof *ns);
    if (!ns) return 0;
    for (size_t i = 0; i < mem_cap; i++)
        if (mem_slots[i].e) *find_slot(ns, ncap, &mem_slots[i].key) = mem_slots[i];
    free(mem_slots);
    mem_slots = ns;
    mem_cap = ncap;
    return 1;
}

/* Removes key's slot, moving later slots of its probe run back into the hole, so that every key
 * stays reachable from its home slot without tombstones. */
static void table_remove(const jf_cache_key *key) {
    size_t mask = mem_cap - 1;
    mem_slot *s = find_slot(mem_slots, mem_cap, key);
    if (!s->e) return;
    size_t hole = (size_t)(s - mem_slots);
    for (size_t i = (hole + 1) & mask; mem_slots[i].e; i = (i + 1) & mask) {
        size_t home = slot_of(&mem_slots[i].key, mem_cap);
        /* movable unless its home lies cyclically in (hole, i] */
        if (((i - home) & mask) >= ((i - hole) & mask)) {
            mem_slots[hole] = mem_slots[i];
            hole = i;
        }
    }
    mem_slots[hole].e = NULL;
    mem_count--;
}

static void idle_unlink(jf_cache_entry *e) {
    if (e->prev) e->prev->next = e->next;
    else idle_head = e->next;
    if (e->next) e->next->prev = e->prev;
    else idle_tail = e->prev;
    e->prev = e->next = NULL;
    mem_idle--;
}

static void idle_append(jf_cache_entry *e) {
    e->prev = idle_tail;
    e->next = NULL;
    if (idle_tail) idle_tail->next = e;
    else idle_head = e;
    idle_tail = e;
    mem_idle++;
}

/* Takes the least recently used idle entries beyond limit out of the cache; returns them as a
 * list linked by next, for unload_all once the lock is released. */
static jf_cache_entry *trim_locked(size_t limit) {
    jf_cache_entry *out = NULL;
    while (mem_idle > limit) {
        jf_cache_entry *e = idle_head;
        idle_unlink(e);
        for (unsigned k = 0; k < e->nkeys; k++) table_remove(&e->keys[k]);
        e->nkeys = 0;
        mem_loaded--;
        mem_unloaded++;
        e->next = out;
        out = e;
    }
    return out;
}

/* Unloads the modules of a list from trim_locked, without the lock: an unload may take long
 * (dlclose runs the object's destructors; cuModuleUnload may wait for the GPU) and must not
 * stall every other thread's lookups, and a backend's unload is then free to use the cache. */
static void unload_all(jf_cache_entry *list) {
    while (list) {
        jf_cache_entry *e = list;
        list = e->next;
        e->unload(e->module);
        free(e);
    }
}

size_t jf_cache_mem_limit(void) {
    const char *v = getenv("JITFIT_CACHE_MODULES");
    if (!v || !*v) return JF_CACHE_MEM_MODULES;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    /* strtoull accepts a sign: "-1" would be a huge limit, not the default */
    if (*end || errno || strchr(v, '-') || strchr(v, '+')) return JF_CACHE_MEM_MODULES;
    return n > SIZE_MAX ? SIZE_MAX : (size_t)n;
}

jf_cache_entry *jf_cache_mem_get(const jf_cache_key *key) {
    jf_cache_entry *e = NULL;
    pthread_mutex_lock(&mem_lock);
    if (mem_cap) e = find_slot(mem_slots, mem_cap, key)->e;
    if (e && e->refs++ == 0) idle_unlink(e);
    pthread_mutex_unlock(&mem_lock);
    return e;
}

int jf_cache_mem_has(const jf_cache_key *key) {
    pthread_mutex_lock(&mem_lock);
    int has = mem_cap && find_slot(mem_slots, mem_cap, key)->e;
    pthread_mutex_unlock(&mem_lock);
    return has;
}

jf_cache_entry *jf_cache_mem_put(const jf_cache_key *key, void *module, jf_cache_unload_fn unload) {
    /* allocated before the lock: no other thread waits on malloc */
    jf_cache_entry *ne = calloc(1, sizeof *ne);
    if (!ne) return NULL;
    ne->module = module;
    ne->unload = unload;
    ne->refs = 1;
    size_t limit = jf_cache_mem_limit();
    pthread_mutex_lock(&mem_lock);
    jf_cache_entry *result = ne;
    if (table_reserve()) {
        mem_slot *s = find_slot(mem_slots, mem_cap, key);
        if (s->e) {
            result = s->e;
            if (result->refs++ == 0) idle_unlink(result);
        } else {
            s->key = *key;
            s->e = ne;
            mem_count++;
            ne->keys[ne->nkeys++] = *key;
        }
    }
    if (result == ne) mem_loaded++;
    jf_cache_entry *gone = trim_locked(limit);
    pthread_mutex_unlock(&mem_lock);
    if (result != ne) free(ne);
    unload_all(gone);
    return result;
}

int jf_cache_mem_alias(const jf_cache_key *key, jf_cache_entry *e) {
    int ok = 0;
    pthread_mutex_lock(&mem_lock);
    mem_slot *s = mem_cap ? find_slot(mem_slots, mem_cap, key) : NULL;
    if (s && s->e) {
        ok = s->e == e;
    } else if (e->nkeys > 0 && e->nkeys < JF_CACHE_ENTRY_KEYS && table_reserve()) {
        /* (an entry under no key stays so: it is unloaded at its last release, not named) */
        s = find_slot(mem_slots, mem_cap, key);
        s->key = *key;
        s->e = e;
        mem_count++;
        e->keys[e->nkeys++] = *key;
        ok = 1;
    }
    pthread_mutex_unlock(&mem_lock);
    return ok;
}

void jf_cache_mem_release(jf_cache_entry *e) {
    if (!e) return;
    size_t limit = jf_cache_mem_limit();
    jf_cache_entry *gone = NULL;
    pthread_mutex_lock(&mem_lock);
    if (--e->refs == 0) {
        if (e->nkeys == 0) { /* under no key: nobody can find it again */
            mem_loaded--;
            mem_unloaded++;
            gone = e;
            e->next = NULL;
        } else {
            idle_append(e);
            gone = trim_locked(limit);
        }
    }
    pthread_mutex_unlock(&mem_lock);
    unload_all(gone);
}

void *jf_cache_entry_module(const jf_cache_entry *e) { return e->module; }

void jf_cache_mem_stats_get(jf_cache_mem_stats *out) {
    pthread_mutex_lock(&mem_lock);
    out->loaded = mem_loaded;
    out->idle = mem_idle;
    out->keys = mem_count;
    out->unloaded = mem_unloaded;
    pthread_mutex_unlock(&mem_lock);
}

/* ---- the directory -------------------------------------------------------------------------- */

static int env_set(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

/* mkdir -p with mode 0700 for every directory it creates. */
static int make_dirs(const char *path) {
    char buf[4096];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof buf) return ENAMETOOLONG;
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST) return errno;
        buf[i] = c;
    }
    return 0;
}

/* Into buf, the first prefix of path (path itself included) that is a symbolic link whose
 * target does not exist; 0 when there is none. make_dirs meets one as EEXIST and cannot create
 * anything through it. */
static int dangling_link(const char *path, char *buf, size_t n) {
    char p[4096];
    size_t len = strlen(path);
    if (len >= sizeof p) return 0;
    memcpy(p, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        char c = p[i];
        p[i] = '\0';
        struct stat st;
        if (lstat(p, &st) != 0) return 0; /* from here on nothing exists: make_dirs can */
        if (S_ISLNK(st.st_mode) && stat(p, &st) != 0 && errno == ENOENT) {
            snprintf(buf, n, "%s", p);
            return 1;
        }
        p[i] = c;
    }
    return 0;
}

/* For a directory that does not exist yet: 0 when make_dirs could create it (its nearest
 * existing ancestor is a directory we may write and search, and no dangling link is in the
 * way), else the errno it would meet. */
static int creatable(const char *path) {
    char buf[4096];
    if (dangling_link(path, buf, sizeof buf)) return ENOENT;
    snprintf(buf, sizeof buf, "%s", path);
    for (;;) {
        char *slash = strrchr(buf, '/');
        if (!slash) snprintf(buf, sizeof buf, ".");
        else if (slash == buf) buf[1] = '\0';
        else *slash = '\0';
        struct stat st;
        if (stat(buf, &st) == 0) {
            if (!S_ISDIR(st.st_mode)) return ENOTDIR;
            return access(buf, W_OK | X_OK) == 0 ? 0 : errno;
        }
        if (errno != ENOENT) return errno;
        if (strcmp(buf, ".") == 0 || strcmp(buf, "/") == 0) return ENOENT;
    }
}

/* jf_cache_dir_open; env_off: whether JITFIT_NO_CACHE may disable it. */
static jf_cache_state dir_open(const char *override, int no_cache, int env_off, int create,
                               jf_cache_dir *out) {
    memset(out, 0, sizeof *out);
    const char *v;
    int want = 0; /* the length of the whole path, which out->path may have cut */
    if (override && *override) {
        want = snprintf(out->path, sizeof out->path, "%s", override);
    } else if ((v = getenv("JITFIT_CACHE_DIR")) && *v) {
        want = snprintf(out->path, sizeof out->path, "%s", v);
    } else if ((v = getenv("XDG_CACHE_HOME")) && v[0] == '/') {
        want = snprintf(out->path, sizeof out->path, "%s/jitfit", v);
    } else {
        const char *home = getenv("HOME");
        /* the reentrant form: the host's threads may be calling getpwuid themselves; home may
         * point into buf, so it lives as long as home is used. A relative HOME counts as none,
         * as a relative XDG_CACHE_HOME does: it would put a cache below each working
         * directory. */
        struct passwd pwbuf, *pw = NULL;
        char buf[4096];
        if (!home || home[0] != '/') {
            if (getpwuid_r(geteuid(), &pwbuf, buf, sizeof buf, &pw) != 0) pw = NULL;
            home = pw ? pw->pw_dir : NULL;
        }
        if (home && home[0] == '/') want = snprintf(out->path, sizeof out->path, "%s/.cache/jitfit", home);
    }
    /* Trailing slashes would only make messages and entry paths ugly. */
    for (size_t l = strlen(out->path); l > 1 && out->path[l - 1] == '/'; l--) {
        out->path[l - 1] = 0;
        want--;
    }

    if (no_cache || (env_off && env_set("JITFIT_NO_CACHE"))) {
        out->state = JF_CACHE_DIR_DISABLED;
        snprintf(out->reason, sizeof out->reason, "disabled (%s)",
                 no_cache ? "no_cache option" : "JITFIT_NO_CACHE is set");
        return out->state;
    }
    out->state = JF_CACHE_DIR_REFUSED;
    if (!out->path[0]) {
        snprintf(out->reason, sizeof out->reason, "no home directory to put the cache in");
        return out->state;
    }
    /* "~" is the shell's to expand: one that reached us unexpanded (a quoted assignment, a
     * systemd or docker environment file) would make a directory named "~" below the working
     * directory, which the user may then try to remove with `rm -rf ~`. */
    if (out->path[0] == '~') {
        snprintf(out->reason, sizeof out->reason,
                 "cache directory '%.200s' starts with '~', which only a shell expands (write "
                 "the home directory's path)", out->path);
        return out->state;
    }
    /* A path cut to fit would be another directory (made, listed and cleared in the user's
     * name); one that fits but leaves no room for the names below it could hold no entry. */
    if (want < 0 || (size_t)want > JF_CACHE_DIR_MAX) {
        snprintf(out->reason, sizeof out->reason,
                 "cache directory path is too long (%d bytes, at most %u): %.60s...", want,
                 (unsigned)JF_CACHE_DIR_MAX, out->path);
        out->path[0] = '\0';
        return out->state;
    }
    struct stat st;
    if (stat(out->path, &st) != 0) {
        int err = errno;
        if (err == ENOENT && create) err = make_dirs(out->path);
        if (err == 0 && stat(out->path, &st) != 0) err = errno;
        if (err != 0) {
            /* Not there yet and not asked to create it: usable, simply empty, if a fit could
             * create it (else `jitfit cache info` and doctor would say "ok" while every fit
             * warns that it cannot). */
            if (err == ENOENT && !create && (err = creatable(out->path)) == 0) {
                out->state = JF_CACHE_DIR_OK;
                return out->state;
            }
            char link[4096];
            if (err == ENOENT && dangling_link(out->path, link, sizeof link))
                snprintf(out->reason, sizeof out->reason,
                         "cannot create cache directory '%.2000s': '%.2000s' is a symbolic link "
                         "whose target does not exist", out->path, link);
            else
                snprintf(out->reason, sizeof out->reason,
                         "cannot create cache directory '%s': %s", out->path, strerror(err));
            return out->state;
        }
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(out->reason, sizeof out->reason, "cache directory '%s' is not a directory",
                 out->path);
    } else if (st.st_uid != geteuid()) {
        snprintf(out->reason, sizeof out->reason,
                 "cache directory '%s' belongs to uid %lu, not to the current user (uid %lu)",
                 out->path, (unsigned long)st.st_uid, (unsigned long)geteuid());
    } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(out->reason, sizeof out->reason,
                 "cache directory '%s' is writable by %s (mode %04o)", out->path,
                 (st.st_mode & S_IWOTH) ? "others" : "its group",
                 (unsigned)(st.st_mode & 07777));
    } else {
        out->state = JF_CACHE_DIR_OK;
    }
    return out->state;
}

jf_cache_state jf_cache_dir_open(const char *override, int no_cache, int create,
                                 jf_cache_dir *out) {
    return dir_open(override, no_cache, 1, create, out);
}

jf_cache_state jf_cache_dir_open_upkeep(jf_cache_dir *out) { return dir_open(NULL, 0, 0, 0, out); }

/* ---- entries ------------------------------------------------------------------------------- */

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

void jf_cache_entry_path(const jf_cache_dir *dir, const jf_cache_key *key, char *buf, size_t n) {
    char hex[33];
    jf_cache_key_hex(key, hex);
    snprintf(buf, n, "%s/%s%s", dir->path, hex, entry_suffix);
}

/* Reads up to n bytes (fewer only at the end of the file or on an error); returns how many. */
static size_t read_all(int fd, unsigned char *p, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, p + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    return got;
}

jf_cache_lookup_result jf_cache_disk_load(const jf_cache_dir *dir, const jf_cache_key *key,
                                          uint32_t kind, unsigned char **payload, size_t *size,
                                          char *why, size_t n) {
    char path[4096 + 64];
    *payload = NULL;
    *size = 0;
    if (why && n) why[0] = '\0';
    jf_cache_entry_path(dir, key, path, sizeof path);
    /* O_NOFOLLOW: an entry is a plain file we wrote; a link is never followed. O_NONBLOCK: a
     * FIFO in its place must not block the open (it is then refused as not a regular file). */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT) return JF_CACHE_ENTRY_ABSENT;
        if (why) snprintf(why, n, "cannot open cache entry %s: %s", path, strerror(errno));
        return errno == ELOOP ? JF_CACHE_ENTRY_INVALID : JF_CACHE_ENTRY_ERROR;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        if (why) snprintf(why, n, "cache entry %s is not a regular file", path);
        return JF_CACHE_ENTRY_INVALID;
    }
    size_t fsize = (size_t)st.st_size;
    if (fsize < JF_CACHE_HEADER_SIZE) {
        close(fd);
        if (why) snprintf(why, n, "cache entry %s is truncated (%zu bytes)", path, fsize);
        return JF_CACHE_ENTRY_INVALID;
    }
    /* The header first: a damaged file (one that a crash or a full disk extended to
     * gigabytes, sparse) is refused by its size field, not read into memory to be hashed. */
    unsigned char hdr[JF_CACHE_HEADER_SIZE];
    size_t psize = fsize - JF_CACHE_HEADER_SIZE;
    const char *bad = NULL;
    unsigned char *buf = NULL;
    if (read_all(fd, hdr, sizeof hdr) != sizeof hdr) bad = "could not be read in full";
    else if (memcmp(hdr, entry_magic, 8) != 0) bad = "is not a jitfit cache entry";
    else if (get_u32(hdr + 8) != JF_CACHE_FORMAT_VERSION) bad = "has another format version";
    else if (get_u32(hdr + 12) != kind) bad = "holds another kind of payload";
    else if (memcmp(hdr + 16, key->bytes, 16) != 0) bad = "belongs to another key";
    else if (get_u64(hdr + 32) != psize) bad = "is truncated or padded";
    else if ((buf = malloc(psize ? psize : 1)) == NULL) {
        close(fd);
        if (why) snprintf(why, n, "out of memory reading cache entry %s", path);
        return JF_CACHE_ENTRY_ERROR;
    } else if (read_all(fd, buf, psize) != psize) {
        bad = "could not be read in full";
    } else {
        jf_cache_key h = jf_cache_hash(buf, psize);
        if (memcmp(hdr + 40, h.bytes, 16) != 0) bad = "is corrupt (content hash mismatch)";
    }
    /* Mark the entry used (its mtime), for `jitfit cache prune`'s age and least-recently-used
     * order: at most once an hour, so a fit loop does not write metadata on every load. A
     * failure (a read-only mount) only costs prune's accuracy. */
    if (!bad && difftime(time(NULL), st.st_mtime) > 3600) (void)futimens(fd, NULL);
    close(fd);
    if (bad) {
        free(buf);
        if (why) snprintf(why, n, "cache entry %s %s", path, bad);
        return JF_CACHE_ENTRY_INVALID;
    }
    *size = psize;
    *payload = buf;
    return JF_CACHE_ENTRY_HIT;
}

static int write_all(int fd, const unsigned char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int jf_cache_disk_store(const jf_cache_dir *dir, const jf_cache_key *key, uint32_t kind,
                        const unsigned char *payload, size_t size, char *why, size_t n) {
    char path[4096 + 64], tmp[4096 + 64], hex[33];
    if (why && n) why[0] = '\0';
    jf_cache_key_hex(key, hex);
    jf_cache_entry_path(dir, key, path, sizeof path);
    /* The temporary file lives in the cache directory itself so rename() is atomic. */
    snprintf(tmp, sizeof tmp, "%s/%s%s-XXXXXX", dir->path, tmp_prefix, hex);
    /* close-on-exec: a process the host starts meanwhile must not inherit it */
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        if (why) snprintf(why, n, "cannot write to cache directory %s: %s", dir->path,
                          strerror(errno));
        return JF_ERR_IO;
    }
    unsigned char hdr[JF_CACHE_HEADER_SIZE];
    memset(hdr, 0, sizeof hdr);
    memcpy(hdr, entry_magic, 8);
    put_u32(hdr + 8, JF_CACHE_FORMAT_VERSION);
    put_u32(hdr + 12, kind);
    memcpy(hdr + 16, key->bytes, 16);
    put_u64(hdr + 32, (uint64_t)size);
    jf_cache_key h = jf_cache_hash(payload, size);
    memcpy(hdr + 40, h.bytes, 16);
    /* fsync before rename: after a crash the name must never point at unwritten blocks. */
    int ok = write_all(fd, hdr, sizeof hdr) == 0 && write_all(fd, payload, size) == 0 &&
             fsync(fd) == 0;
    int err = errno;
    if (close(fd) != 0 && ok) {
        ok = 0;
        err = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = 0;
        err = errno;
    }
    if (!ok) {
        unlink(tmp);
        if (why) snprintf(why, n, "cannot write cache entry %s: %s", path, strerror(err));
        return JF_ERR_IO;
    }
    return JF_OK;
}

/* Whether s starts with n lowercase hex digits. */
static int hex_run(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

/* 1 for names of entries ("<32 hex digits>.jfc"), 2 for our temporary files
 * (".tmp-<32 hex>-XXXXXX") and remembered compiler identities (runtime/jit_cc.c:
 * "cc-<16 hex>.id", written through "cc-<16 hex>.id.tmp-XXXXXX"), else 0. Exact patterns:
 * `jitfit cache clear` deletes what this says is ours, and the directory may be one the user
 * shares with other files. */
static int classify(const char *name) {
    size_t len = strlen(name), tp = sizeof tmp_prefix - 1, es = sizeof entry_suffix - 1;
    if (len == 32 + es && hex_run(name, 32) && strcmp(name + 32, entry_suffix) == 0) return 1;
    if (len == tp + 32 + 7 && strncmp(name, tmp_prefix, tp) == 0 && hex_run(name + tp, 32) &&
        name[tp + 32] == '-')
        return 2;
    if (len >= 3 + 16 + 3 && strncmp(name, "cc-", 3) == 0 && hex_run(name + 3, 16) &&
        strncmp(name + 19, ".id", 3) == 0 &&
        (len == 22 || (len == 22 + 5 + 6 && strncmp(name + 22, ".tmp-", 5) == 0)))
        return 2;
    return 0;
}

int jf_cache_disk_info(const jf_cache_dir *dir, size_t *entries, uint64_t *bytes) {
    *entries = 0;
    *bytes = 0;
    DIR *d = opendir(dir->path);
    /* a path that is not there, or through a file (`info` has said so in its state line) */
    if (!d) return errno == ENOENT || errno == ENOTDIR ? JF_OK : JF_ERR_IO;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (classify(e->d_name) != 1) continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        (*entries)++;
        *bytes += (uint64_t)st.st_size;
    }
    closedir(d);
    return JF_OK;
}

/* JF_ERR_IO for an opendir that failed (a missing directory is empty: JF_OK), with why. */
static int list_failed(const jf_cache_dir *dir, char *why, size_t n) {
    if (errno == ENOENT) return JF_OK;
    if (why) snprintf(why, n, "cannot list %s: %s", dir->path, strerror(errno));
    return JF_ERR_IO;
}

/* Records the first failure to remove name (errno says why) in why. */
static void remove_failed(const jf_cache_dir *dir, const char *name, int *st, char *why,
                          size_t n) {
    if (*st == JF_OK && why) snprintf(why, n, "cannot remove %s/%s: %s", dir->path, name,
                                      strerror(errno));
    *st = JF_ERR_IO;
}

int jf_cache_disk_clear(const jf_cache_dir *dir, size_t *removed, char *why, size_t n) {
    if (removed) *removed = 0;
    if (why && n) why[0] = '\0';
    DIR *d = opendir(dir->path);
    if (!d) return list_failed(dir, why, n);
    int st = JF_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int c = classify(e->d_name);
        if (c == 0) continue;
        if (unlinkat(dirfd(d), e->d_name, 0) != 0) {
            if (errno != ENOENT) remove_failed(dir, e->d_name, &st, why, n);
        } else if (c == 1 && removed) {
            (*removed)++;
        }
    }
    closedir(d);
    return st;
}

/* One entry as prune sees it. */
typedef struct prune_entry {
    char name[40]; /* "<32 hex>.jfc" */
    time_t used;   /* mtime: written, or last loaded (to the hour) */
    uint64_t bytes;
} prune_entry;

static int by_use(const void *a, const void *b) {
    const prune_entry *x = a, *y = b;
    if (x->used != y->used) return x->used < y->used ? -1 : 1;
    return strcmp(x->name, y->name); /* a fixed order for equal times */
}

int jf_cache_disk_prune(const jf_cache_dir *dir, double max_age_s, uint64_t max_bytes,
                        size_t *removed, size_t *kept, uint64_t *kept_bytes, char *why, size_t n) {
    *removed = *kept = 0;
    *kept_bytes = 0;
    if (why && n) why[0] = '\0';
    DIR *d = opendir(dir->path);
    if (!d) return list_failed(dir, why, n);
    prune_entry *e = NULL;
    size_t count = 0, cap = 0;
    int st = JF_OK;
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int c = classify(de->d_name);
        struct stat sb;
        if (c == 0 || fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (c == 2) { /* a temporary an interrupted write left a day ago or more */
            if (strstr(de->d_name, ".tmp-") && difftime(now, sb.st_mtime) > 86400)
                unlinkat(dirfd(d), de->d_name, 0);
            continue;
        }
        if (!S_ISREG(sb.st_mode)) continue; /* not an entry (`cache clear` reports these) */
        if (count == cap) {
            cap = cap ? 2 * cap : 64;
            prune_entry *ne = realloc(e, cap * sizeof *ne);
            if (!ne) {
                st = JF_ERR_NOMEM;
                if (why) snprintf(why, n, "out of memory listing %s", dir->path);
                break;
            }
            e = ne;
        }
        memcpy(e[count].name, de->d_name, 32 + sizeof entry_suffix); /* classify: 36 bytes + NUL */
        e[count].used = sb.st_mtime;
        e[count].bytes = (uint64_t)sb.st_size;
        count++;
    }
    if (st == JF_OK) {
        qsort(e, count, sizeof *e, by_use);
        uint64_t total = 0;
        for (size_t i = 0; i < count; i++) total += e[i].bytes;
        for (size_t i = 0; i < count; i++) { /* oldest first */
            int old = max_age_s >= 0 && difftime(now, e[i].used) > max_age_s;
            int over = total > max_bytes || max_bytes == 0; /* 0: empty entries go too */
            if (!old && !over) {
                (*kept)++;
                *kept_bytes += e[i].bytes;
                continue;
            }
            if (unlinkat(dirfd(d), e[i].name, 0) != 0 && errno != ENOENT) {
                remove_failed(dir, e[i].name, &st, why, n);
                (*kept)++;
                *kept_bytes += e[i].bytes;
                continue;
            }
            total -= e[i].bytes;
            (*removed)++;
        }
    }
    free(e);
    closedir(d);
    return st;
}
