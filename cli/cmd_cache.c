/* `jitfit cache dir|info|clear`: where the kernel cache lives, what state it is in, and a way
 * to empty it (runtime/cache.c). Nothing here creates the directory: looking must not write. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "../runtime/cache.h"
#include "commands.h"
#include "util.h"

static int usage(void) {
    fprintf(stderr, "usage: jitfit cache dir|info|clear\n"
                    "  dir    print the cache directory\n"
                    "  info   directory, state, number of entries and their size\n"
                    "  clear  remove every entry\n");
    return 2;
}

int jf_cmd_cache(int argc, char **argv) {
    if (argc != 2) return usage();
    const char *what = argv[1];
    jf_cache_dir dir;
    jf_cache_dir_open(NULL, 0, 0, &dir);
    if (strcmp(what, "dir") == 0) {
        if (!dir.path[0]) {
            jf_cli_error("cache: %s", dir.reason);
            return 1;
        }
        printf("%s\n", dir.path);
        return 0;
    }
    if (strcmp(what, "info") == 0) {
        printf("directory: %s\n", dir.path[0] ? dir.path : "(none)");
        if (dir.state == JF_CACHE_DIR_OK) printf("state: ok\n");
        else if (dir.state == JF_CACHE_DIR_DISABLED) printf("state: %s\n", dir.reason);
        else printf("state: refused: %s\n", dir.reason);
        size_t entries = 0;
        uint64_t bytes = 0;
        if (dir.path[0] && jf_cache_disk_info(&dir, &entries, &bytes) != JF_OK) {
            jf_cli_error("cache: cannot list %s", dir.path);
            return 1;
        }
        printf("entries: %zu\nbytes: %" PRIu64 "\n", entries, bytes);
        return 0;
    }
    if (strcmp(what, "clear") == 0) {
        /* A refused directory may belong to someone else: its files are not ours to delete.
         * One that does not exist (refused because it could not be created) holds nothing. */
        struct stat st;
        if (dir.state == JF_CACHE_DIR_REFUSED && dir.path[0] && stat(dir.path, &st) != 0 &&
            (errno == ENOENT || errno == ENOTDIR)) {
            printf("removed 0 entries from %s\n", dir.path);
            return 0;
        }
        if (dir.state == JF_CACHE_DIR_REFUSED) {
            jf_cli_error("cache: not clearing: %s", dir.reason);
            return 1;
        }
        size_t removed = 0;
        if (jf_cache_disk_clear(&dir, &removed) != JF_OK) {
            jf_cli_error("cache: could not remove every entry from %s", dir.path);
            return 1;
        }
        printf("removed %zu entr%s from %s\n", removed, removed == 1 ? "y" : "ies", dir.path);
        return 0;
    }
    jf_cli_error("cache: unknown action '%s'", what);
    return usage();
}
