/* Writer of `--output` (see output.h). CSV quoting follows RFC 4180, so group labels with commas
 * or quotes survive a round trip through jitfit's own reader. */
#include "output.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* A CSV field, quoted when it holds a separator, a quote or a line break. */
static void csv_text(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\r\n") && s[0] != ' ' && s[0] != '#') {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void csv_num(FILE *f, double v) {
    char buf[64];
    jf_cli_format_double(buf, sizeof buf, v);
    fputs(buf, f);
}

int jf_output_csv(const char *path, const char *group_name, char *const *keys,
                  const char *const *names, size_t ncols, const double *cols, size_t ld,
                  size_t n, size_t ycol, const double *fit, const double *fit_se, char **err) {
    *err = NULL;
    int to_stdout = strcmp(path, "-") == 0;
    FILE *f = to_stdout ? stdout : fopen(path, "w");
    if (!f) {
        int e = errno;
        size_t len = strlen(path) + strlen(strerror(e)) + 4;
        *err = malloc(len);
        if (*err) snprintf(*err, len, "%s: %s", path, strerror(e));
        return -1;
    }
    if (keys) {
        csv_text(f, group_name);
        fputc(',', f);
    }
    for (size_t c = 0; c < ncols; c++) {
        csv_text(f, names[c]);
        fputc(',', f);
    }
    fputs("fit,residual,fit_stderr\n", f);
    for (size_t i = 0; i < n; i++) {
        if (keys) {
            csv_text(f, keys[i]);
            fputc(',', f);
        }
        for (size_t c = 0; c < ncols; c++) {
            csv_num(f, cols[c * ld + i]);
            fputc(',', f);
        }
        csv_num(f, fit[i]);
        fputc(',', f);
        csv_num(f, cols[ycol * ld + i] - fit[i]);
        fputc(',', f);
        csv_num(f, fit_se[i]);
        fputc('\n', f);
    }
    int bad = ferror(f);
    if (to_stdout) bad |= fflush(f) != 0;
    else bad |= fclose(f) != 0;
    if (bad) {
        size_t len = strlen(path) + 32;
        *err = malloc(len);
        if (*err) snprintf(*err, len, "%s: write error", path);
        return -1;
    }
    return 0;
}
