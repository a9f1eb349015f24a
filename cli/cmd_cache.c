/* `jitfit cache dir|info|clear|prune`: where the kernel cache lives, what state it is in, and
 * ways to empty or trim it (runtime/cache.c). Nothing here creates the directory: looking must
 * not write. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "../runtime/cache.h"
#include "../runtime/text.h"
#include "commands.h"
#include "util.h"

static int usage(void) {
    fprintf(stderr, "usage: jitfit cache dir|info|clear\n"
                    "       jitfit cache prune [--older-than DAYS] [--max-size SIZE]\n"
                    "  dir    print the cache directory\n"
                    "  info   directory, state, number of entries and their size\n"
                    "  clear  remove every entry\n"
                    "  prune  remove the entries not used for DAYS days, then the least recently\n"
                    "         used until the rest take at most SIZE (512M, 2G, ...)\n");
    return 2;
}

/* 1 for a directory refused because it does not exist (and could not be created): it holds
 * nothing to remove. */
static int missing(const jf_cache_dir *dir) {
    struct stat st;
    return dir->state == JF_CACHE_DIR_REFUSED && dir->path[0] && stat(dir->path, &st) != 0 &&
           (errno == ENOENT || errno == ENOTDIR);
}

/* A refused directory's reason as a note on stderr (fits run uncached there): `dir`, and a
 * clear or prune with nothing to remove, still say why the cache is not used. */
static void note_refused(const jf_cache_dir *dir) {
    if (dir->state != JF_CACHE_DIR_REFUSED) return;
    char why[sizeof dir->reason];
    snprintf(why, sizeof why, "%s", dir->reason);
    jf_text_printable(why, sizeof why, 0);
    fprintf(stderr, "jitfit: note: the kernel cache is not used: %s\n", why);
}

/* prune's options into *age_s (-1: none) and *bytes (UINT64_MAX: none); 0, or 2 after a usage
 * error. */
static int prune_options(int argc, char **argv, double *age_s, uint64_t *bytes) {
    *age_s = -1;
    *bytes = UINT64_MAX;
    for (int i = 2; i < argc; i++) {
        /* `--opt VALUE` or `--opt=VALUE`, as every other command reads its options */
        char name[32];
        const char *eq = strchr(argv[i], '='), *v;
        size_t nl = eq ? (size_t)(eq - argv[i]) : strlen(argv[i]);
        snprintf(name, sizeof name, "%.*s", (int)(nl < sizeof name ? nl : sizeof name - 1), argv[i]);
        if (eq) v = eq + 1;
        else v = i + 1 < argc ? argv[++i] : NULL;
        double days;
        size_t size;
        if (strcmp(name, "--older-than") == 0 && v) {
            if (jf_cli_parse_double(v, &days) != 0 || !(days >= 0) || days > 1e6) {
                jf_cli_error("cache prune: --older-than: '%s' is not a number of days", v);
                return 2;
            }
            *age_s = days * 86400.0;
        } else if (strcmp(name, "--max-size") == 0 && v) {
            if (jf_memory_size_from_text(v, &size) != 0) {
                jf_cli_error("cache prune: --max-size: '%s' is not a size (bytes, or a number "
                             "with K, M, G, T or kB, MB, GB, TB)", v);
                return 2;
            }
            *bytes = size;
        } else {
            jf_cli_error("cache prune: %s '%s'", v ? "unknown option" : "missing value for",
                         v && !eq ? argv[i - 1] : argv[i]);
            return usage();
        }
    }
    if (*age_s < 0 && *bytes == UINT64_MAX) {
        jf_cli_error("cache prune: give --older-than DAYS, --max-size SIZE or both");
        return usage();
    }
    return 0;
}

int jf_cmd_cache(int argc, char **argv) {
    if (argc < 2 || (argc != 2 && strcmp(argv[1], "prune") != 0)) return usage();
    const char *what = argv[1];
    jf_cache_dir dir;
    if (strcmp(what, "clear") == 0 || strcmp(what, "prune") == 0) jf_cache_dir_open_upkeep(&dir);
    else jf_cache_dir_open(NULL, 0, 0, &dir);
    if (strcmp(what, "prune") == 0) {
        double age_s;
        uint64_t max_bytes;
        int u = prune_options(argc, argv, &age_s, &max_bytes);
        if (u) return u;
        if (missing(&dir)) {
            note_refused(&dir);
            printf("removed 0 entries from %s\n", dir.path);
            return 0;
        }
        if (dir.state != JF_CACHE_DIR_OK) {
            jf_cli_error("cache: not pruning: %s", dir.reason);
            return 1;
        }
        size_t removed, kept;
        uint64_t kept_bytes;
        char why[4400];
        if (jf_cache_disk_prune(&dir, age_s, max_bytes, &removed, &kept, &kept_bytes, why,
                                sizeof why) != JF_OK) {
            jf_cli_error("cache: could not prune %s: %s", dir.path, why);
            return 1;
        }
        printf("removed %zu entr%s from %s; %zu left, %" PRIu64 " bytes\n", removed,
               removed == 1 ? "y" : "ies", dir.path, kept, kept_bytes);
        return 0;
    }
    if (strcmp(what, "dir") == 0) {
        if (!dir.path[0]) {
            jf_cli_error("cache: %s", dir.reason);
            return 1;
        }
        note_refused(&dir);
        printf("%s\n", dir.path);
        return 0;
    }
    if (strcmp(what, "info") == 0) {
        printf("directory: %s\n", dir.path[0] ? dir.path : "(none)");
        struct stat dst;
        if (dir.state == JF_CACHE_DIR_OK)
            printf("state: ok%s\n", stat(dir.path, &dst) != 0 ? " (not created yet)" : "");
        else if (dir.state == JF_CACHE_DIR_DISABLED) printf("state: %s\n", dir.reason);
        else printf("state: refused: %s\n", dir.reason);
        size_t entries = 0;
        uint64_t bytes = 0;
        if (dir.path[0] && jf_cache_disk_info(&dir, &entries, &bytes) != JF_OK) {
            jf_cli_error("cache: cannot list %s: %s", dir.path, strerror(errno));
            return 1;
        }
        printf("entries: %zu\nbytes: %" PRIu64 "\n", entries, bytes);
        return 0;
    }
    if (strcmp(what, "clear") == 0) {
        /* A refused directory may belong to someone else: its files are not ours to delete.
         * One that does not exist (refused because it could not be created) holds nothing. */
        if (missing(&dir)) {
            note_refused(&dir);
            printf("removed 0 entries from %s\n", dir.path);
            return 0;
        }
        if (dir.state == JF_CACHE_DIR_REFUSED) {
            jf_cli_error("cache: not clearing: %s", dir.reason);
            return 1;
        }
        size_t removed = 0;
        char why[4400];
        if (jf_cache_disk_clear(&dir, &removed, why, sizeof why) != JF_OK) {
            jf_cli_error("cache: could not remove every entry from %s: %s", dir.path, why);
            return 1;
        }
        printf("removed %zu entr%s from %s\n", removed, removed == 1 ? "y" : "ies", dir.path);
        return 0;
    }
    jf_cli_error("cache: unknown action '%s'", what);
    return usage();
}
