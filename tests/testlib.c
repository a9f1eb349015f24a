/* Implementation of the test harness in testlib.h. */
#include "testlib.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int jf_test_passed, jf_test_failed;

int jf_test_check(int cond, const char *expr, const char *file, int line) {
    if (cond) {
        jf_test_passed++;
    } else {
        jf_test_failed++;
        fprintf(stderr, "%s:%d: check failed: %s\n", file, line, expr);
    }
    return cond;
}

int jf_test_near(double a, double b, double tol, const char *ea, const char *eb, const char *file,
                 int line) {
    int ok;
    if (isnan(a) || isnan(b)) ok = isnan(a) && isnan(b);
    else if (isinf(a) || isinf(b)) ok = a == b;
    else ok = fabs(a - b) <= tol * fmax(1.0, fabs(b));
    if (ok) {
        jf_test_passed++;
    } else {
        jf_test_failed++;
        fprintf(stderr, "%s:%d: %s = %.17g, %s = %.17g, differ by more than %g\n", file, line, ea,
                a, eb, b, tol);
    }
    return ok;
}

int jf_test_streq(const char *a, const char *b, const char *ea, const char *eb, const char *file,
                  int line) {
    int ok = (a == NULL || b == NULL) ? a == b : strcmp(a, b) == 0;
    if (ok) {
        jf_test_passed++;
    } else {
        jf_test_failed++;
        fprintf(stderr, "%s:%d: %s != %s\n--- got:\n%s\n--- expected:\n%s\n---\n", file, line, ea,
                eb, a ? a : "(null)", b ? b : "(null)");
    }
    return ok;
}

int jf_test_contains(const char *h, const char *n, const char *eh, const char *file, int line) {
    int ok = h && n && strstr(h, n) != NULL;
    if (ok) {
        jf_test_passed++;
    } else {
        jf_test_failed++;
        fprintf(stderr, "%s:%d: %s does not contain \"%s\"; it is:\n%s\n", file, line, eh,
                n ? n : "(null)", h ? h : "(null)");
    }
    return ok;
}

int jf_test_finish(void) {
    printf("%d passed, %d failed\n", jf_test_passed, jf_test_failed);
    return jf_test_failed ? 1 : 0;
}

int jf_test_skip(const char *why) {
    printf("SKIP: %s\n", why);
    return 77;
}

static char *slurp_fd(FILE *f) {
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    for (;;) {
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) break;
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        if (got == 0) break;
        n += got;
    }
    buf[n] = '\0';
    return buf;
}

int jf_test_run(const char *cmd, char **out, char **err) {
    char errpath[] = "/tmp/jf_test_errXXXXXX";
    int efd = mkstemp(errpath);
    if (efd < 0) return -1;
    close(efd);
    size_t len = strlen(cmd) + strlen(errpath) + 16;
    char *full = malloc(len);
    if (!full) return -1;
    snprintf(full, len, "(%s) 2>%s", cmd, errpath);
    FILE *p = popen(full, "r");
    free(full);
    if (!p) return -1;
    char *o = slurp_fd(p);
    int st = pclose(p);
    if (out) *out = o; else free(o);
    if (err) *err = jf_test_read_file(errpath, NULL);
    unlink(errpath);
    if (st == -1 || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

const char *jf_test_cli(void) { return JF_CLI; }

char *jf_test_tmpfile(const char *suffix, const char *text) {
    const char *dir = getenv("TMPDIR");
    if (!dir) dir = "/tmp";
    size_t len = strlen(dir) + strlen(suffix) + 32;
    char *path = malloc(len);
    if (!path) return NULL;
    snprintf(path, len, "%s/jf_testXXXXXX%s", dir, suffix);
    int fd = mkstemps(path, (int)strlen(suffix));
    if (fd < 0) { free(path); return NULL; }
    size_t n = strlen(text);
    if (write(fd, text, n) != (ssize_t)n) { close(fd); free(path); return NULL; }
    close(fd);
    return path;
}

int jf_test_use_cc_script(const char *dir, const char *name, const char *text, char *path,
                          size_t n) {
    snprintf(path, n, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!CHECK(f != NULL)) return -1;
    fputs(text, f);
    fclose(f);
    chmod(path, 0755);
    setenv("JITFIT_CC", path, 1);
    return 0;
}

char *jf_test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *s = slurp_fd(f);
    fclose(f);
    if (s && len) *len = strlen(s);
    return s;
}

const char *jf_test_shared_dir(void) {
    static char path[4096];
    const char *env = getenv("JITFIT_SHARED_DIR");
    if (env && *env) snprintf(path, sizeof path, "%s", env);
    else snprintf(path, sizeof path, "%s/../shared", JF_SOURCE_DIR);
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return NULL;
    return path;
}

/* A whole file, NULs included (malloc'd; *len its size); NULL on failure. */
static char *read_bytes(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        if (got == 0) break;
        n += got;
    }
    fclose(f);
    *len = n;
    return buf;
}

static int name_order(const struct dirent **a, const struct dirent **b) {
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int not_hidden(const struct dirent *e) { return e->d_name[0] != '.'; }

size_t jf_test_replay_dir(const char *dir,
                          void (*fn)(const char *name, const char *bytes, size_t len, void *ctx),
                          void *ctx) {
    struct dirent **list = NULL;
    int n = scandir(dir, &list, not_hidden, name_order);
    if (!CHECK(n >= 0)) return 0;
    size_t files = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, list[i]->d_name);
        size_t len = 0;
        char *bytes = read_bytes(path, &len);
        if (CHECK(bytes != NULL)) {
            fn(list[i]->d_name, bytes, len, ctx);
            files++;
        }
        free(bytes);
        free(list[i]);
    }
    free(list);
    return files;
}

static double lcg_uniform(unsigned long long *st) {
    *st = *st * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*st >> 11) * 0x1p-53;
}

void jf_test_outlier_sine(unsigned long long seed, size_t n, double *x, double *y) {
    for (size_t i = 0; i < n; i++) {
        double noise = 0.3 * (2 * lcg_uniform(&seed) - 1);
        x[i] = 10.0 * (double)i / (double)(n - 1);
        y[i] = 3 * exp(-0.4 * x[i]) * sin(1.3 * x[i] + 0.5) + 0.2 + noise;
        if (i % 11 == 0) y[i] += 8 * lcg_uniform(&seed) - 4;
    }
}
