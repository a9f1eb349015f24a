/* The everyday-tool features of the jitfit command, through the built binary: job files
 * (`jitfit run`: settings, overrides, errors with file:line), data formats (headerless, RFC 4180
 * quotes, gzip, stdin, .npy, --nan-policy), --output, --plot (the PNG is read back and its
 * pixels inspected; the SVG checked for well-formedness), -v, --group errors and `jitfit help`.
 */
#define _XOPEN_SOURCE 700 /* posix_openpt: a terminal for the progress counter */
#include <cairo.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "cli/plot.h"
#include "tests/testlib.h"

#define EX JF_SOURCE_DIR "/examples/"

/* Temporary files, removed at the end. */
static char *tmp_paths[256];
static size_t ntmp;

static const char *keep(char *p) {
    /* full slots fail here, not as leaks in the sanitizer build only */
    if (p && CHECK(ntmp < sizeof tmp_paths / sizeof tmp_paths[0])) tmp_paths[ntmp++] = p;
    return p;
}

static const char *tmp(const char *suffix, const char *text) {
    return keep(jf_test_tmpfile(suffix, text));
}

/* Runs `jitfit ARGS` (a shell fragment); returns the exit status. */
static int jf(const char *args, char **out, char **err) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s", jf_test_cli(), args);
    return jf_test_run(cmd, out, err);
}

/* A data set y = 2*x + 1 (exact) as CSV text without header. */
#define LINE_ROWS "0,1\n1,3\n2,5\n3,7\n4,9\n5,11\n"
/* What jitfit fit adds to the error for a NaN or empty cell. */
#define NAN_HINT " (--nan-policy omit, or nan_policy = omit in a job file, drops rows with NaN or missing values)"
/* 288 characters that change nothing in a model */
#define LONG_ZEROS_8 " + 0*x + 0*x + 0*x + 0*x + 0*x + 0*x"
/* A fit name of 45 characters: "fit " and it make the longest section name a job may hold. */
#define NAME_45 "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrs"
#define LONG_ZEROS LONG_ZEROS_8 LONG_ZEROS_8 LONG_ZEROS_8 LONG_ZEROS_8 LONG_ZEROS_8 LONG_ZEROS_8 LONG_ZEROS_8 LONG_ZEROS_8

/* The value of a parameter in --json output. */
static double param(const char *out, const char *name) {
    char key[128];
    snprintf(key, sizeof key, "{\"name\": \"%s\", \"value\": ", name);
    const char *p = out ? strstr(out, key) : NULL;
    return p ? strtod(p + strlen(key), NULL) : NAN;
}

/* Fits 'a*x+b' to path with extra args; checks a = 2, b = 1. */
static void fits_line(const char *args, const char *path) {
    char buf[2048], *out = NULL, *err = NULL;
    snprintf(buf, sizeof buf, "fit --json %s 'a*x+b' '%s'", args, path);
    int rc = jf(buf, &out, &err);
    if (!CHECK(rc == 0)) fprintf(stderr, "  %s\n  %s\n", buf, err ? err : "");
    CHECK_NEAR(param(out, "a"), 2, 1e-9);
    CHECK_NEAR(param(out, "b"), 1, 1e-9);
    free(out);
    free(err);
}

static void test_text_formats(void) {
    /* Without a header: default order (variables, then response), or named by --columns. */
    fits_line("", tmp(".csv", LINE_ROWS));
    fits_line("--columns x,y", tmp(".csv", "# no header\n" LINE_ROWS));
    fits_line("--columns 'x, obs' --y obs", tmp(".csv", LINE_ROWS));
    fits_line("", tmp(".txt", "0 1\n1 3\n2 5\n3 7\n4 9\n"));
    /* With --columns, a first row with numbers and a text column (a label) is data, not a
     * header to be renamed: all six rows are fitted. A row of names is still a header. */
    const char *labels = tmp(".csv", "0,1,a\n1,3,b\n2,5,c\n3,7,d\n4,9,e\n5,11,f\n");
    const char *named = tmp(".csv", "t,obs,note\n0,1,a\n1,3,b\n2,5,c\n3,7,d\n4,9,e\n5,11,f\n");
    for (int k = 0; k < 2; k++) {
        char cmd[1024], *o = NULL, *e = NULL;
        snprintf(cmd, sizeof cmd, "fit --json --columns x,y,note 'a*x+b' '%s'", k ? named : labels);
        CHECK(jf(cmd, &o, &e) == 0);
        CHECK_CONTAINS(o, "\"n\": 6,");
        CHECK_NEAR(param(o, "a"), 2, 1e-9);
        free(o);
        free(e);
    }
    /* RFC 4180 quotes: a text column with commas, doubled quotes and a line break. */
    fits_line("", tmp(".csv", "\"x\",\"note, with comma\",y\n0,\"a \"\"q\"\"\",1\n1,\"two\nlines\",3\n"
                              "2,plain,5\n3,\"\",7\n"));
    /* gzip, detected by its magic bytes whatever the name. */
    const char *gz = tmp(".dat", "");
    gzFile g = gzopen(gz, "wb");
    if (CHECK(g != NULL)) {
        gzputs(g, "x,y\n" LINE_ROWS);
        gzclose(g);
    }
    fits_line("", gz);
    /* Standard input. */
    char buf[1024], *out = NULL, *err = NULL;
    snprintf(buf, sizeof buf, "fit --json 'a*x+b' - < '%s'", tmp(".csv", "x,y\n" LINE_ROWS));
    CHECK(jf(buf, &out, &err) == 0);
    CHECK_NEAR(param(out, "a"), 2, 1e-9);
    free(out);
    free(err);
}

/* Writes a .npy file: header dict text, then raw bytes. */
static const char *npy(const char *dict, const void *data, size_t n) {
    char *path = jf_test_tmpfile(".npy", "");
    FILE *f = path ? fopen(path, "wb") : NULL;
    if (!f) return keep(path);
    size_t dl = strlen(dict), total = 10 + dl + 1;
    size_t pad = (64 - total % 64) % 64;
    unsigned short hl = (unsigned short)(dl + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hl & 0xff, f);
    fputc(hl >> 8, f);
    fputs(dict, f);
    for (size_t i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    fwrite(data, 1, n, f);
    fclose(f);
    return keep(path);
}

static void test_npy(void) {
    double c_order[12] = {0, 1, 1, 3, 2, 5, 3, 7, 4, 9, 5, 11};
    fits_line("", npy("{'descr': '<f8', 'fortran_order': False, 'shape': (6, 2), }", c_order,
                      sizeof c_order));
    float f_order[12] = {0, 1, 2, 3, 4, 5, 1, 3, 5, 7, 9, 11};
    fits_line("", npy("{'descr': '<f4', 'fortran_order': True, 'shape': (6, 2), }", f_order,
                      sizeof f_order));
    int32_t ints[12] = {0, 1, 1, 3, 2, 5, 3, 7, 4, 9, 5, 11};
    fits_line("", npy("{'descr': '<i4', 'fortran_order': False, 'shape': (6, 2), }", ints,
                      sizeof ints));
    /* A structured array: named columns, in any order. */
    struct {
        double y;
        int16_t x;
    } __attribute__((packed)) rec[6] = {{1, 0}, {3, 1}, {5, 2}, {7, 3}, {9, 4}, {11, 5}};
    fits_line("", npy("{'descr': [('y', '<f8'), ('x', '<i2')], 'fortran_order': False, "
                      "'shape': (6,), }",
                      rec, sizeof rec));
    /* Errors name the file and the problem. */
    static const struct {
        const char *dict; /* header */
        size_t bytes;     /* data bytes written */
        const char *msg;  /* expected on stderr */
    } bad[] = {
        {"{'descr': '<c16', 'fortran_order': False, 'shape': (6, 2), }", 96, "unsupported dtype '<c16'"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (6, 2), }", 40,
         "truncated .npy data: expected 96 bytes, found 40"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (1, 1), }", 0,
         "truncated .npy data: expected 1 byte, found 0"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3, 2), }", 96,
         "more than 2 dimensions"},
        {"{'descr': '|O', 'fortran_order': False, 'shape': (6, 2), }", 96, "unsupported dtype"},
        {"{'descr': [('x', '<f8'), ('y', '<f8', (2,))], 'fortran_order': False, 'shape': (4,), }",
         96, "field 'y' is a sub-array: only scalar"},
        {"{'descr': [('x', '<f8'), ('y', [('u', '<f8'), ('v', '<f8')])], 'fortran_order': False, "
         "'shape': (4,), }", 96, "field 'y' is a nested structure: only scalar"},
        {"{'descr': [('x', '<f8'), ('y', '<c8')], 'fortran_order': False, 'shape': (6,), }", 96,
         "field 'y' has type '<c8': only scalar"},
        /* a negative size is malformed, not 2^64 - 1 rows ("too large") */
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (-1, 2), }", 96,
         "malformed shape in the .npy header"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (6, -2), }", 96,
         "malformed shape in the .npy header"},
        /* a field name twice is the header's error, without the line 0 of a text header */
        {"{'descr': [('x', '<f8'), ('x', '<f8')], 'fortran_order': False, 'shape': (6,), }", 96,
         ": field 'x' appears twice in the .npy header (fields 1 and 2)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *p = npy(bad[i].dict, c_order, bad[i].bytes);
        char buf[1024], *out = NULL, *err = NULL;
        snprintf(buf, sizeof buf, "fit 'a*x+b' '%s'", p);
        CHECK(jf(buf, &out, &err) == 1);
        if (!CHECK_CONTAINS(err, bad[i].msg)) fprintf(stderr, "  npy case %zu\n", i);
        CHECK_CONTAINS(err, p);
        free(out);
        free(err);
    }
    /* A NaN in a .npy column: the row and column are named. */
    double withnan[12] = {0, 1, 1, 3, 2, NAN, 3, 7, 4, 9, 5, 11};
    const char *p = npy("{'descr': '<f8', 'fortran_order': False, 'shape': (6, 2), }", withnan,
                        sizeof withnan);
    char buf[1024], *out = NULL, *err = NULL;
    snprintf(buf, sizeof buf, "fit 'a*x+b' '%s'", p);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, "row 3, column 2 ('y'): value is NaN" NAN_HINT);
    free(out);
    free(err);
    fits_line("--nan-policy omit", p);
}

static void test_nan_policy(void) {
    const char *p = tmp(".csv", "x,y,note\n0,1,a\n1,nan,b\n2,5,c\n3,,d\n4,9,e\n5,11,f\nnan,2,g\n");
    char buf[1024], *out = NULL, *err = NULL;
    snprintf(buf, sizeof buf, "fit 'a*x+b' '%s'", p);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, ":3: column 2 ('y'): value is NaN" NAN_HINT);
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "fit --json --nan-policy omit 'a*x+b' '%s'", p);
    CHECK(jf(buf, &out, &err) == 0);
    CHECK_CONTAINS(err, "dropped 3 of 7 rows with NaN");
    CHECK_CONTAINS(out, "\"rows_dropped\": 3");
    CHECK_NEAR(param(out, "a"), 2, 1e-9);
    free(out);
    free(err);
    /* the words spreadsheets and pandas write for a missing value: an error naming the option
     * by default, missing with omit (a word that is not one of them stays an error) */
    const char *w = tmp(".csv", "x,y\n0,1\n1,NA\n2,5\n3,#N/A\n4,9\n5,\"NULL\"\n6,13\n"
                                "7,None\n8,17\n");
    snprintf(buf, sizeof buf, "fit 'a*x+b' '%s'", w);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, ":3: column 2 ('y'): 'NA' marks a missing value" NAN_HINT);
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "fit --json --nan-policy omit 'a*x+b' '%s'", w);
    CHECK(jf(buf, &out, &err) == 0);
    CHECK_CONTAINS(out, "\"rows_dropped\": 4");
    CHECK_NEAR(param(out, "a"), 2, 1e-9);
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "fit --nan-policy omit 'a*x+b' '%s'",
             tmp(".csv", "x,y\n0,1\n1,NAN!\n2,5\n3,7\n"));
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, ":3: column 2 ('y'): 'NAN!' is not a number");
    free(out);
    free(err);
    /* a row whose first cell is #N/A (a spreadsheet's export, unquoted) is data, not a
     * comment line dropped without a word; a '#' line that is not such a word stays one */
    const char *hn = tmp(".csv", "x,y\n# a comment\n0,1\n#N/A,3\n2,5\n#NA means missing\n"
                                 "3,7\n4,9\n#NA\t,1\n");
    snprintf(buf, sizeof buf, "fit 'a*x+b' '%s'", hn);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, ":4: column 1 ('x'): '#N/A' marks a missing value" NAN_HINT);
    free(out);
    free(err);
    /* the first cell by the file's separator decides: '#NA means missing' is a comment,
     * '#NA\t' (the cell's blanks trimmed) a missing value */
    snprintf(buf, sizeof buf, "fit --json --nan-policy omit 'a*x+b' '%s'", hn);
    CHECK(jf(buf, &out, &err) == 0);
    CHECK_CONTAINS(out, "\"rows_dropped\": 2");
    CHECK_NEAR(param(out, "a"), 2, 1e-9);
    free(out);
    free(err);
    /* a headerless file whose first row has such a word: that row is data, not a header */
    const char *h = tmp(".csv", "0,NA\n1,3\n2,5\n3,7\n4,9\n");
    snprintf(buf, sizeof buf, "fit 'a*x+b' '%s'", h);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, ":1: column 2 ('y'): 'NA' marks a missing value" NAN_HINT);
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "fit --json --nan-policy omit 'a*x+b' '%s'", h);
    CHECK(jf(buf, &out, &err) == 0);
    CHECK_CONTAINS(out, "\"rows_dropped\": 1");
    CHECK_NEAR(param(out, "a"), 2, 1e-9);
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "fit --nan-policy omit 'a*x+b' '%s'", h);
    CHECK(jf(buf, &out, &err) == 0);
    CHECK_CONTAINS(out, ": 4 points, 2 parameters (1 row with NaN dropped)");
    free(out);
    free(err);
    /* With --group, each group's rows_dropped counts its own rows; a group left with no rows
     * gets an error entry (after the others) and the exit status 1: no group is lost. */
    const char *g = tmp(".csv", "g,x,y\nA,0,1\nA,1,3\nA,2,nan\nA,3,7\nA,4,9\nB,0,1\nB,1,nan\n"
                                "B,2,5\nB,3,nan\nB,4,9\nB,5,11\nC,0,nan\n");
    snprintf(buf, sizeof buf, "fit --json --group g --nan-policy omit 'a*x+b' '%s'", g);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(out, "\"group\": \"A\",\n  \"rows_dropped\": 1,");
    CHECK_CONTAINS(out, "\"group\": \"B\",\n  \"rows_dropped\": 2,");
    CHECK_CONTAINS(out, "{\"group\": \"C\", \"success\": false, \"error\": \"--nan-policy omit "
                        "dropped every row of this group");
    /* its dropped rows are counted on its error entry, so the groups' counts add up */
    CHECK_CONTAINS(out, "\"name\": null, \"rows_dropped\": 1}");
    CHECK_CONTAINS(err, "1 of 3 group fits did not converge or could not run");
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "fit --group g --nan-policy omit 'a*x+b' '%s'", g);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(out, "  C      0  error: --nan-policy omit dropped every row");
    free(out);
    free(err);
    /* an empty group cell: an error naming it, or with omit a dropped row */
    const char *eg = tmp(".csv", "g,x,y\nA,0,1\nA,1,3\n,2,5\nA,3,7\nA,4,9\n");
    snprintf(buf, sizeof buf, "fit --group g 'a*x+b' '%s'", eg);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, ":4: column 1 ('g'): empty group label");
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "fit --json --group g --nan-policy omit 'a*x+b' '%s'", eg);
    CHECK(jf(buf, &out, &err) == 0);
    CHECK_CONTAINS(out, "\"n\": 4,");
    CHECK(!strstr(out ? out : "", "\"group\": \"\""));
    /* the note names the reason: no cell of the row is NaN */
    CHECK_CONTAINS(err, "dropped 1 of 5 rows with no group label (--nan-policy omit)");
    free(out);
    free(err);
    const char *one = tmp(".csv", "x,y\nnan,1\n");
    snprintf(buf, sizeof buf, "fit --nan-policy omit 'a*x+b' '%s'", one);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, "dropped 1 of 1 row with NaN in the used columns");
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "fit --group g --nan-policy omit 'a*x+b' '%s'", eg);
    CHECK(jf(buf, &out, &err) == 0);
    CHECK_CONTAINS(out, "\n  1 row with no group label dropped\n");
    free(out);
    free(err);
    /* The words for a missing value are no label either, as pandas' groupby drops NaN keys:
     * not groups named 'NA' or 'null' of one row each. */
    const char *wg = tmp(".csv", "g,x,y\nA,0,1\nA,1,3\nNA,2,5\nA,3,7\nnull,4,9\n\"#N/A\",5,0\n"
                                 "A,6,13\nB,0,2\nB,1,4\nB,2,nan\nB,3,8\n");
    snprintf(buf, sizeof buf, "fit --group g 'a*x+b' '%s'",
             tmp(".csv", "g,x,y\nA,0,1\nA,1,3\nNA,2,5\nA,3,7\n"));
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, ":4: column 1 ('g'): 'NA' marks a missing group label (--nan-policy "
                        "omit drops such rows)");
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "fit --json --group g --nan-policy omit 'a*x+b' '%s'", wg);
    CHECK(jf(buf, &out, &err) == 0);
    CHECK_CONTAINS(out, "\"group\": \"A\",\n  \"rows_dropped\": 0,");
    CHECK_CONTAINS(out, "\"group\": \"B\",\n  \"rows_dropped\": 1,");
    CHECK(out && !strstr(out, "\"group\": \"NA\"") && !strstr(out, "\"group\": \"null\"") &&
          !strstr(out, "\"group\": \"#N/A\""));
    CHECK_NEAR(param(out, "a"), 2, 1e-9);
    CHECK_CONTAINS(err, "dropped 4 of 11 rows: 1 with NaN in the used columns, 3 with no group "
                        "label (--nan-policy omit)");
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "fit --group g --nan-policy omit 'a*x+b' '%s'", wg);
    CHECK(jf(buf, &out, &err) == 0);
    CHECK_CONTAINS(out, "\n  4 rows dropped: 1 with NaN, 3 with no group label\n");
    free(out);
    free(err);
    /* so is 'nan' (any spelling a numeric column reads as NaN), not a group named 'nan' */
    snprintf(buf, sizeof buf, "fit --group g 'a*x+b' '%s'",
             tmp(".csv", "g,x,y\nA,0,1\nA,1,3\nA,2,5\nNaN,3,7\n"));
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, ":5: column 1 ('g'): 'NaN' marks a missing group label");
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "fit --group g --nan-policy omit 'a*x+b' '%s'",
             tmp(".csv", "g,x,y\nA,0,1\nA,1,3\nnan,2,0\nA,2,5\nB,0,2\nB,1,4\n-nan,1,9\n"
                         "B,2,6\n"));
    CHECK(jf(buf, &out, &err) == 0);
    CHECK(out && !strstr(out, "nan"));
    CHECK_CONTAINS(out, "\n  2 rows with no group label dropped\n");
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "fit --nan-policy never 'a*x+b' '%s'", p);
    CHECK(jf(buf, &out, &err) == 2);
    CHECK_CONTAINS(err, "--nan-policy: unknown policy 'never'");
    free(out);
    free(err);
}

static void test_data_errors(void) {
    static const struct {
        const char *text, *args, *msg; /* data, options, expected message after the path */
    } cases[] = {
        {"0,1,2\n1,3,4\n2,5,6\n", "",
         ": the data have no header row and 3 columns, but the model needs 2 (x,y)"},
        {LINE_ROWS, "--columns x,y,z ", ": 3 column names given, but the file has 2 columns"},
        /* control bytes in a header (a binary file read as text) are shown as '?' */
        {"x\x01\x02,y\n0,1\n1,3\n2,5\n", "", ": no column 'x' (columns: x??, y)"},
        /* without --columns such a first row is taken for a header: the message says so */
        {"0,1,a\n1,3,b\n2,5,c\n", "",
         ": no column 'x' (columns: 0, 1, a); the header row has numbers in it: if it is data, "
         "name the columns with --columns"},
        {"x,y\n0,\"1\n1,3\n", "", ":2: column 2: unterminated quoted field"},
        {"x,y\n0,\"1\"z\n", "", ":2: column 2: unterminated quoted field or text after"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *p = tmp(".csv", cases[i].text);
        char buf[1024], want[512], *out = NULL, *err = NULL;
        snprintf(buf, sizeof buf, "fit %s'a*x+b' '%s'", cases[i].args, p);
        snprintf(want, sizeof want, "%s%s", p, cases[i].msg);
        CHECK(jf(buf, &out, &err) == 1);
        if (!CHECK_CONTAINS(err, want)) fprintf(stderr, "  data case %zu\n", i);
        free(out);
        free(err);
    }
    const char *gz = tmp(".gz", "\x1f\x8b\x08\x00garbage");
    char buf[1024], *out = NULL, *err = NULL;
    snprintf(buf, sizeof buf, "fit 'a*x+b' '%s'", gz);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, "gzip:");
    free(out);
    free(err);
}

static void test_output(void) {
    const char *o = tmp(".csv", "");
    char buf[2048], *out = NULL, *err = NULL;
    snprintf(buf, sizeof buf, "fit --output '%s' '" EX "damped_sine.jf' '" EX "damped_sine.csv'", o);
    CHECK(jf(buf, &out, &err) == 0);
    free(out);
    free(err);
    char *text = jf_test_read_file(o, NULL);
    CHECK(text && strncmp(text, "x,y,fit,residual,fit_stderr\n", 28) == 0);
    /* Every row: residual = y - fit. */
    size_t rows = 0, ok = 0;
    for (char *p = text ? strchr(text, '\n') : NULL; p && p[1]; p = strchr(p + 1, '\n')) {
        double x, y, f, r;
        if (sscanf(p + 1, "%lf,%lf,%lf,%lf", &x, &y, &f, &r) == 4 && fabs(y - f - r) < 1e-12)
            ok++;
        rows++;
    }
    CHECK(rows == 200 && ok == rows);
    free(text);
    /* A batch writes the group column first. */
    snprintf(buf, sizeof buf, "fit --group sample --p0-file '" EX "spectra_p0.csv' --output '%s' '" EX
                              "spectra.jf' '" EX "spectra.csv'",
             o);
    CHECK(jf(buf, &out, &err) == 0);
    free(out);
    free(err);
    text = jf_test_read_file(o, NULL);
    CHECK(text && strncmp(text, "sample,x,y,fit,residual,fit_stderr\n", 35) == 0);
    free(text);
    /* Data columns that carry an added column's name keep it; the added one gets a '_' more,
     * so no two columns of the file share a name. */
    const char *d = tmp(".csv", "residual,fit\n1,2.1\n2,3.9\n3,6.2\n4,7.9\n");
    snprintf(buf, sizeof buf, "fit --y fit --output '%s' 'a*residual+b' '%s'", o, d);
    CHECK(jf(buf, &out, &err) == 0);
    free(out);
    free(err);
    text = jf_test_read_file(o, NULL);
    CHECK(text && strncmp(text, "residual,fit,fit_,residual_,fit_stderr\n1,2.1,2.06999", sizeof "residual,fit,fit_,residual_,fit_stderr\n1,2.1,2.06999" - 1) == 0);
    free(text);
    d = tmp(".csv", "fit,x,y\nA,1,2\nA,2,4.1\nA,3,5.9\nB,1,1\nB,2,2.1\nB,3,2.9\n");
    snprintf(buf, sizeof buf, "fit --group fit --output '%s' 'a*x+b' '%s'", o, d);
    CHECK(jf(buf, &out, &err) == 0);
    free(out);
    free(err);
    text = jf_test_read_file(o, NULL);
    CHECK(text && strncmp(text, "fit,x,y,fit_,residual,fit_stderr\nA,1,2,2.04", sizeof "fit,x,y,fit_,residual,fit_stderr\nA,1,2,2.04" - 1) == 0);
    free(text);
}

/* Pixels of the PNG near colour (r, g, b) (0..255) inside rows [y0, y1). */
static size_t count_color(cairo_surface_t *s, int r, int g, int b, int y0, int y1) {
    int w = cairo_image_surface_get_width(s), h = cairo_image_surface_get_height(s);
    int stride = cairo_image_surface_get_stride(s);
    const unsigned char *d = cairo_image_surface_get_data(s);
    size_t n = 0;
    for (int y = y0 < 0 ? 0 : y0; y < y1 && y < h; y++)
        for (int x = 0; x < w; x++) {
            uint32_t px;
            memcpy(&px, d + (size_t)y * (size_t)stride + (size_t)x * 4, 4);
            int pr = (int)(px >> 16 & 0xff), pg = (int)(px >> 8 & 0xff), pb = (int)(px & 0xff);
            if (abs(pr - r) <= 3 && abs(pg - g) <= 3 && abs(pb - b) <= 3) n++;
        }
    return n;
}

static void test_plot(void) {
    const char *png = tmp(".png", ""), *svg = tmp(".svg", "");
    char buf[2048], *out = NULL, *err = NULL;
    snprintf(buf, sizeof buf, "fit --plot '%s' '" EX "damped_sine.jf' '" EX "damped_sine.csv'", png);
    CHECK(jf(buf, &out, &err) == 0);
    free(out);
    free(err);
    cairo_surface_t *s = cairo_image_surface_create_from_png(png);
    if (CHECK(cairo_surface_status(s) == CAIRO_STATUS_SUCCESS)) {
        int h = cairo_image_surface_get_height(s);
        CHECK(cairo_image_surface_get_width(s) == 900 && h == 680);
        /* Layout of plot.c: the top panel ends about two thirds down, the residuals below. */
        int split = (int)(60 + (680 - 60 - 55 - 14) * 0.72 + 7);
        int dr = (int)(0.12 * 255 + 0.5), dg = (int)(0.47 * 255 + 0.5), db = (int)(0.71 * 255 + 0.5);
        int cr = (int)(0.84 * 255 + 0.5), cg = (int)(0.15 * 255 + 0.5), cb = (int)(0.16 * 255 + 0.5);
        CHECK(count_color(s, dr, dg, db, 60, split) > 500);  /* data points */
        CHECK(count_color(s, cr, cg, cb, 60, split) > 500);  /* the curve */
        CHECK(count_color(s, dr, dg, db, split, h) > 300);   /* residual panel */
        CHECK(count_color(s, cr, cg, cb, split, h) == 0);    /* no curve there */
    }
    cairo_surface_destroy(s);
    /* 2-D: three panels side by side, each painted. */
    snprintf(buf, sizeof buf, "fit --plot '%s' '" EX "gauss2d.jf' '" EX "gauss2d.csv'", png);
    CHECK(jf(buf, &out, &err) == 0);
    free(out);
    free(err);
    s = cairo_image_surface_create_from_png(png);
    if (CHECK(cairo_surface_status(s) == CAIRO_STATUS_SUCCESS)) {
        int w = cairo_image_surface_get_width(s), stride = cairo_image_surface_get_stride(s);
        const unsigned char *d = cairo_image_surface_get_data(s);
        int painted[3] = {0, 0, 0};
        double size = (w - 80 - 3 * 70) / 3.0;
        for (int k = 0; k < 3; k++) {
            int cx = (int)(80 + k * (size + 70) + size / 2), cy = (int)(80 + size / 2);
            uint32_t px;
            memcpy(&px, d + (size_t)cy * (size_t)stride + (size_t)cx * 4, 4);
            painted[k] = (px & 0xffffff) != 0xffffff || k == 2; /* residual may be near white */
        }
        CHECK(painted[0] && painted[1] && painted[2]);
    }
    cairo_surface_destroy(s);
    /* SVG: well-formed XML with an <svg> root. */
    snprintf(buf, sizeof buf, "fit --plot '%s' '" EX "damped_sine.jf' '" EX "damped_sine.csv'", svg);
    CHECK(jf(buf, &out, &err) == 0);
    free(out);
    free(err);
    char *text = jf_test_read_file(svg, NULL);
    CHECK_CONTAINS(text, "<svg");
    CHECK_CONTAINS(text, "</svg>");
    free(text);
    snprintf(buf, sizeof buf, "command -v xmllint >/dev/null && xmllint --noout '%s'", svg);
    int x = jf_test_run(buf, NULL, NULL);
    CHECK(x == 0 || x == 1); /* 1: no xmllint here */
    if (x != 0) fprintf(stderr, "  note: xmllint not found; SVG checked by tags only\n");
    /* Bad requests are clear errors. */
    CHECK(jf("fit --plot out.pdf 'a*x+b' x.csv", &out, &err) == 2);
    CHECK_CONTAINS(err, "must end in .svg or .png");
    free(out);
    free(err);
    /* a file that cannot be written is named with the reason, as --output's is */
    for (int k = 0; k < 2; k++) {
        snprintf(buf, sizeof buf, "fit --plot /nonexistent-dir/fit.%s '" EX "damped_sine.jf' '" EX
                 "damped_sine.csv'", k ? "svg" : "png");
        CHECK(jf(buf, &out, &err) == 1);
        CHECK_CONTAINS(err, "/nonexistent-dir/fit.");
        CHECK_CONTAINS(err, "No such file or directory");
        free(out);
        free(err);
    }
}

/* A model argument that names a missing file (it reads as a path, not a formula) fails with
 * the formula's error and a note saying there is no such file; a bad formula gets no note. */
static void test_missing_model_file(void) {
    const char *data = tmp(".csv", "x,y\n" LINE_ROWS);
    char buf[1024], *out = NULL, *err = NULL;
    snprintf(buf, sizeof buf, "fit /nonexistent/peak.model '%s'", data);
    CHECK(jf(buf, &out, &err) != 0);
    CHECK_CONTAINS(err, "there is no model file '/nonexistent/peak.model' (No such file or directory)");
    free(out);
    free(err);
    char job[1024];
    snprintf(job, sizeof job, "[fit a]\nmodel = models/peak.txt\ndata = %s\n", data);
    snprintf(buf, sizeof buf, "run '%s'", tmp(".ini", job));
    CHECK(jf(buf, &out, &err) != 0);
    CHECK_CONTAINS(err, "there is no model file 'models/peak.txt'");
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "fit 'a*exp(-b*x' '%s'", data);
    CHECK(jf(buf, &out, &err) != 0);
    CHECK(err && !strstr(err, "no model file"));
    free(out);
    free(err);
    /* a path that compiles (two parameters' quotient, no x) gets the note with its warning; a
     * formula that reads like a path but is a good model ('a/x') does not */
    snprintf(buf, sizeof buf, "fit models/peak '%s'", data);
    jf(buf, &out, &err);
    CHECK_CONTAINS(err, "there is no model file 'models/peak' (No such file or directory)");
    free(out);
    free(err);
    /* so does one on data without a column x, where it is read with no variable (fitted to
     * the response alone, without the plain reading's warning) */
    snprintf(buf, sizeof buf, "fit models/peak '%s'", tmp(".csv", "t,y\n" LINE_ROWS));
    jf(buf, &out, &err);
    CHECK_CONTAINS(err, "there is no model file 'models/peak' (No such file or directory)");
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "fit models/peak '%s'", tmp(".csv", "1\n3\n5\n7\n9\n"));
    jf(buf, &out, &err);
    CHECK_CONTAINS(err, "there is no model file 'models/peak' (No such file or directory)");
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "fit a/x '%s'", data);
    jf(buf, &out, &err);
    CHECK(err && !strstr(err, "no model file"));
    free(out);
    free(err);
    /* a missing name ending in .jf is an error of its own: it was not read as a formula, so no
     * note may say it was */
    snprintf(buf, sizeof buf, "fit /nonexistent/peak.jf '%s'", data);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, "jitfit: /nonexistent/peak.jf: No such file or directory");
    CHECK(err && !strstr(err, "read as a formula"));
    free(out);
    free(err);
}

/* JSON output is UTF-8 whatever the data's encoding: a Latin-1 label's byte becomes U+FFFD,
 * a UTF-8 label is kept as it is. */
static void test_json_utf8(void) {
    const char *data = tmp(".csv", "g,x,y\ncaf\xe9,0,1\ncaf\xe9,1,3\ncaf\xe9,2,5\n"
                                   "\xc3\xa9t\xc3\xa9,0,1\n\xc3\xa9t\xc3\xa9,1,3\n\xc3\xa9t\xc3\xa9,2,5\n");
    char buf[1024], *out = NULL, *err = NULL;
    snprintf(buf, sizeof buf, "fit --json 'a*x+b' '%s' --group g", data);
    CHECK(jf(buf, &out, &err) == 0);
    CHECK_CONTAINS(out, "\"group\": \"caf\\ufffd\"");
    CHECK_CONTAINS(out, "\"group\": \"\xc3\xa9t\xc3\xa9\"");
    free(out);
    free(err);
    /* the text table shows a label's control bytes (an escape sequence, a C1 CSI) as '?' */
    const char *esc = tmp(".csv", "g,x,y\n\x1b[31mred,0,1\n\x1b[31mred,1,3\n\x1b[31mred,2,5\n"
                                  "\xc2\x9b" "2J,0,1\n\xc2\x9b" "2J,1,3\n\xc2\x9b" "2J,2,5\n");
    snprintf(buf, sizeof buf, "fit 'a*x+b' '%s' --group g", esc);
    CHECK(jf(buf, &out, &err) == 0);
    CHECK_CONTAINS(out, "\n  ?[31mred ");
    CHECK_CONTAINS(out, "\n  ??2J ");
    CHECK(!strchr(out ? out : "", '\x1b') && !strstr(out ? out : "", "\xc2\x9b"));
    free(out);
    free(err);
}

/* One reason for every group (here: the emulated GPU refuses the batch's launch) is said once,
 * not once per group. */
static void test_batch_same_error(void) {
    const char *g = tmp(".csv", "g,x,y\nA,0,1\nA,1,3\nA,2,5\nB,0,1\nB,1,3\nB,2,5\nC,0,2\nC,1,3\nC,2,4\n");
    char cmd[4096], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd,
             "JITFIT_CUDA_EMULATE=1 JITFIT_CUDA_EMULATE_FAIL='launch#1' '%s' fit --group g "
             "--device gpu 'a*x+b' '%s'",
             jf_test_cli(), g);
    CHECK(jf_test_run(cmd, &out, &err) == 1);
    CHECK_CONTAINS(out, "  all 3 groups: error: kernel launch failed: refused "
                        "(JITFIT_CUDA_EMULATE_FAIL=launch#1)");
    CHECK(out && !strstr(out, "\n  A "));
    free(out);
    free(err);
    /* a GPU batch in fp32 says it ran on the GPU, without the CPU's "evaluates in fp64" note
     * (the CPU kernels it also gets only finish fits on the host) */
    snprintf(cmd, sizeof cmd,
             "JITFIT_CUDA_EMULATE=1 '%s' fit --group g --device gpu --precision single "
             "'a*x+b' '%s'",
             jf_test_cli(), g);
    CHECK(jf_test_run(cmd, &out, &err) == 0);
    CHECK_CONTAINS(out, "backend (3 groups): cuda");
    CHECK(!strstr(out ? out : "", "the CPU evaluates in fp64"));
    free(out);
    free(err);
    /* tolerances that can never stop the solver are a usage error, before any fit */
    snprintf(cmd, sizeof cmd, "fit --group g --ftol 0 --xtol 0 --gtol 0 'a*x+b' '%s'", g);
    CHECK(jf(cmd, &out, &err) == 2);
    CHECK_CONTAINS(err, "jitfit: fit: ftol, xtol and gtol are all below machine epsilon");
    free(out);
    free(err);
}

static void test_job_errors(void) {
    static const struct {
        const char *text; /* job file */
        int rc;           /* exit status */
        const char *msg;  /* expected after the path */
    } cases[] = {
        {"[fit a]\nmodel = a*x+b\ndata = d.csv\nftoll = 1\n", 2, ":4: unknown key 'ftoll' (did you mean 'ftol'?)"},
        {"[fit a]\nmodel = a*x+b\ndata = d.csv\n\nftol = abc\n", 2, ":5: ftol: 'abc' is not a non-negative number"},
        {"[fits a]\nmodel = a*x+b\n", 2, ":1: unknown section [fits a]"},
        {"[fit a]\nmodel = a*x+b\nthis line has no equals sign\n", 2, ":3: syntax error"},
        {"[fit a]\ndata = d.csv\n", 2, ":1: [fit a] needs a model"},
        {"[fit a]\nmodel = a*x+b\nmodel = c*x\ndata = d.csv\n", 2, ":3: 'model' is given twice in [fit a] (first on line 2)"},
        {"[defaults]\nloss = squared\n[fit a]\nmodel = a*x+b\ndata=d.csv\n", 2, ":2: loss: unknown loss 'squared'"},
        {"# nothing\n", 2, ": no [fit NAME] sections"},
        {"[fit a]\nmodel = a*x+b\ndata = d.csv\nparam q = 1\n", 2, ":4: p0: the model has no parameter 'q'"},
        {"[fit a]\nmodel = a*x+b\ndata = d.csv\nbounds = a=3:1\n", 2, ":4: bounds: the lower bound of 'a' is not below"},
        {"[fit a]\nmodel = a*x+b\ndata = d.csv\nparam a = 5 in [0, 1]\n", 2, ":4: parameter 'a': the starting value 5 is outside its bounds [0, 1]"},
        {"[fit a]\nmodel = a*x+b\ndata = d.csv\noutput = -\n", 2, ": [fit a]: output '-' (standard output) is for jitfit fit"},
        {"[fit a]\nmodel = a*x+b\ndata = d.csv\nparam a = nan\n", 2, ":4: param a: 'nan' is not a number (for parameter 'a')"},
        /* control bytes (an escape sequence) never reach the terminal */
        {"[fit a]\nmodel = a*x+b\ndata = d.csv\nftol = 1\x1b[2J\n", 2, ":4: ftol: '1?[2J' is not a non-negative number"},
        {"[fit \x1b[2J]\nmodel = a*x+b\ndata = d.csv\n", 2, ":1: a fit name cannot hold control characters"},
        {"[fit a]\nmodel = a*x+b\ndata = d.csv\nx_scale = a=1, b=0\n", 2, ":4: x_scale: '0' is not a positive finite scale (for 'b')"},
        {"[fit a]\nmodel = a*x+b\ndata = d.csv\nx_scale = a=1\n", 2, ":4: x_scale: no scale for 'b': name every parameter"},
        {"[fit \xc2\x9b" "2J]\nmodel = a*x+b\ndata = d.csv\n", 2, ":1: a fit name cannot hold control characters"},
        {"[fit a]\nmodel = a*x+b\ndata = d.csv\nbounds = a=1\x1b[2J\xc2\x9b" "2J:3\n", 2, ":4: bounds: '1?[2J??2J:3' is not LOW:HIGH with numbers (for 'a')"},
        {"[fit a]\nmodel = a*x+b\ndata = d.csv\nftol = 1\xc2\x9b" "2J\x9b" "2J\xc3\xa9\n", 2, ":4: ftol: '1??2J?2J\xc3\xa9' is not a non-negative number"},
    };
    const char *data = tmp(".csv", "x,y\n" LINE_ROWS);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[1024];
        /* d.csv stands for the data file's absolute path. */
        const char *dp = strstr(cases[i].text, "d.csv");
        if (dp) snprintf(text, sizeof text, "%.*s%s%s", (int)(dp - cases[i].text), cases[i].text,
                         data, dp + 5);
        else snprintf(text, sizeof text, "%s", cases[i].text);
        const char *p = tmp(".ini", text);
        char buf[1024], want[512], *out = NULL, *err = NULL;
        snprintf(buf, sizeof buf, "run '%s'", p);
        snprintf(want, sizeof want, "%s%s", p, cases[i].msg);
        int rc = jf(buf, &out, &err);
        if (!CHECK(rc == cases[i].rc)) fprintf(stderr, "  job case %zu: exit %d\n", i, rc);
        if (!CHECK_CONTAINS(err, want)) fprintf(stderr, "  job case %zu\n", i);
        free(out);
        free(err);
    }
    /* fopen opens a directory and only the read fails: that is the error, not an empty job */
    char *out = NULL, *err = NULL;
    CHECK(jf("run /", &out, &err) == 2);
    CHECK_CONTAINS(err, "jitfit: /: Is a directory");
    free(out);
    free(err);
}

/* Job files past libinih's limits and the checks that need several keys or fits: all before
 * any fit runs, with the line. %1$s in a case is the data file. */
static void test_job_checks(void) {
    static const struct {
        const char *text; /* job file; DATA stands for the data file */
        int rc;           /* exit status */
        const char *msg;  /* expected on stderr after the job's path ("" with rc 0) */
    } cases[] = {
        /* a 300-character model line (Debian's libinih reads 199) */
        {"[fit a]\nmodel = a*x + b" LONG_ZEROS "\ndata = DATA\n", 0, ""},
        /* an empty section is a fit: it takes the defaults, or says what it lacks */
        {"[defaults]\nmodel = a*x+b\ndata = DATA\n[fit first]\n# nothing\n[fit second]\nmodel = a*x+b\n", 0, ""},
        {"[fit a]\nmodel = a*x+b\ndata = DATA\n[fit b]\n", 2, ":4: [fit b] needs a model and data"},
        {"[fits]\n[fit a]\nmodel = a*x+b\ndata = DATA\n", 2, ":1: unknown section [fits]"},
        {"[fit a]\nmodel = a*x+b\ndata = DATA\n[fit a]\nmodel = a*x\n", 2, ":4: a second [fit a] (the first is on line 1)"},
        {"[fit a,b]\nmodel = a*x+b\ndata = DATA\n", 2, ":1: [fit a,b]: a fit name cannot hold ','"},
        /* blanks around a fit's name are not part of it: [fit  a] is a second [fit a], and a
         * name of blanks is none */
        {"[fit a]\nmodel = a*x+b\ndata = DATA\n[fit  a ]\nmodel = a*x\n", 2, ":4: a second [fit a] (the first is on line 1)"},
        {"[fit  ]\nmodel = a*x+b\ndata = DATA\n", 2, ":1: [fit  ]: a fit needs a name"},
        /* an indented key would be glued to the value above */
        {"[fit a]\nmodel = a*x+b\ndata = DATA\nloss = huber\n    ftol = 1e-3\n", 2, ":5: an indented line continues 'loss'"},
        /* ... but an indented first key of a section is that section's key, as inih reads it,
         * not a continuation of the key of that name in the section above */
        {"[fit a]\ndata = DATA\nmodel = a*x+b\n[fit b]\n  model = a*x\ndata = DATA\n", 0, ""},
        {"[fit a]\nmodel = a*x+b\ndata = DATA\n[fit b]\n\t data = DATA\nmodel = a*x\n", 0, ""},
        {"max_nfev = 3\n[defaults]\nmax_nfev = 50\n[fit a]\nmodel = a*x+b\ndata = DATA\n", 2, ":3: 'max_nfev' is given twice in [defaults] (first on line 1)"},
        {"[fit a]\nmodel = a*x+b\ndata = DATA\np0 = a=abc\n", 2, ":4: p0: 'abc' is not a number (for 'a')"},
        {"[fit a]\nmodel = a*x+b\ndata = DATA\n[fit g]\nmodel = a*x+b\ndata = DATA\ngroup = x\nplot = g.svg\n", 2, ":4: [fit g]: --plot draws one fit"},
        {"[fit a]\nmodel = a*x+b\ndata = DATA\noutput = same.csv\n[fit b]\nmodel = a*x\ndata = DATA\noutput = ./same.csv\n", 2, ":5: [fit b] and [fit a] (line 1) both write"},
        {"[fit a]\nmodel = a*x+b\ndata = DATA\noutput = DATA\n", 2, ":1: [fit a]: output "},
        /* the error names the limit the line passed: a section name of 49 characters (a fit's
         * name of 45) is the longest; a long line that is no key = value is a syntax error */
        {"[fit " NAME_45 "]\nmodel = a*x+b\ndata = DATA\n", 0, ""},
        {"[fit " NAME_45 "b]\nmodel = a*x+b\ndata = DATA\n", 2, ":1: section name longer than 49 characters\n"},
        {"[fit a]\nmodel = a*x+b\ndata = DATA\nno equals sign" LONG_ZEROS "\n", 2, ":4: syntax error: expected [section]"},
    };
    const char *data = tmp(".csv", "x,y\n" LINE_ROWS);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[2048] = "";
        for (const char *p = cases[i].text; *p;) { /* every DATA becomes the data's path */
            const char *d = strstr(p, "DATA");
            size_t len = strlen(text), n = d ? (size_t)(d - p) : strlen(p);
            snprintf(text + len, sizeof text - len, "%.*s%s", (int)n, p, d ? data : "");
            p += n + (d ? 4 : 0);
        }
        const char *p = tmp(".ini", text);
        char buf[1024], want[512], *out = NULL, *err = NULL;
        snprintf(buf, sizeof buf, "run '%s'", p);
        snprintf(want, sizeof want, "%s%s", p, cases[i].msg);
        int rc = jf(buf, &out, &err);
        if (!CHECK(rc == cases[i].rc)) fprintf(stderr, "  job check %zu: exit %d: %s\n", i, rc, err);
        if (cases[i].rc) {
            if (!CHECK_CONTAINS(err, want)) fprintf(stderr, "  job check %zu\n", i);
            CHECK(!strstr(out ? out : "", "summary of")); /* nothing ran */
        } else {
            CHECK_CONTAINS(out, "summary of");
        }
        free(out);
        free(err);
    }
}

/* A job's model file is relative to the job file, never to the working directory: a name
 * that is a file only there is refused (it was read, another model than the job's), and a
 * missing NAME.jf is named in the job's directory. */
static void test_job_model_dir(void) {
    char dir[] = "/tmp/jf_modeldir_XXXXXX";
    if (!CHECK(mkdtemp(dir))) return;
    char path[600], job[600], cmd[2048], text[1024], *out = NULL, *err = NULL;
    const char *data = tmp(".csv", "x,y\n" LINE_ROWS);
    snprintf(path, sizeof path, "%s/here.jf", dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("y ~ a*x\n", f);
        fclose(f);
    }
    snprintf(job, sizeof job, "%s/jobs", dir);
    CHECK(mkdir(job, 0700) == 0);
    snprintf(job, sizeof job, "%s/jobs/j.ini", dir);
    static const char *const models[] = {"here.jf", "gone.jf"};
    for (int k = 0; k < 2; k++) {
        snprintf(text, sizeof text, "[fit a]\nmodel = %s\ndata = %s\n", models[k], data);
        f = fopen(job, "w");
        if (f) {
            fputs(text, f);
            fclose(f);
        }
        snprintf(cmd, sizeof cmd, "cd '%s' && '%s' run jobs/j.ini", dir, jf_test_cli());
        CHECK(jf_test_run(cmd, &out, &err) == (k ? 1 : 2));
        CHECK_CONTAINS(err, k ? "jitfit: [fit a]: jobs/gone.jf: No such file or directory"
                              : "jobs/j.ini:2: model: 'here.jf' is no file in the job file's "
                                "directory (jobs) but one in the working directory");
        free(out);
        free(err);
    }
    unlink(job);
    unlink(path);
    snprintf(path, sizeof path, "%s/jobs", dir);
    rmdir(path);
    rmdir(dir);
}

/* `json = true` in a job file makes the run's whole output one JSON array. */
static void test_job_json_key(void) {
    const char *data = tmp(".csv", "x,y\n" LINE_ROWS);
    char text[1024], buf[1200], *out = NULL, *err = NULL;
    snprintf(text, sizeof text, "[fit a]\nmodel = a*x+b\ndata = %s\njson = true\n[fit b]\n"
                                "model = a*x\ndata = %s\n", data, data);
    snprintf(buf, sizeof buf, "run '%s'", tmp(".ini", text));
    jf(buf, &out, &err);
    CHECK(out && out[0] == '[');
    CHECK_CONTAINS(out, "\"name\": \"b\"");
    CHECK(!strstr(out ? out : "", "summary of"));
    free(out);
    free(err);
}

/* A fit section unsets what [defaults] sets with an empty value (`sigma =`), and the command
 * line of run does the same to the file's settings (`--sigma=`); another section overrides
 * the default with its own value. */
static void test_job_unset(void) {
    const char *data = tmp(".csv", "g,x,y,s\nA,0,1,0.1\nA,1,3.1,0.2\nA,2,4.9,0.1\nA,3,7,0.1\n"
                                   "B,0,2,0.1\nB,1,4,0.1\nB,2,6.1,0.2\nB,3,8,0.1\n");
    const char *p0 = tmp(".csv", "g,a\nA,1.5\nB,2.5\n");
    char dir[] = "/tmp/jf_unset_XXXXXX";
    if (!CHECK(mkdtemp(dir))) return;
    char text[2048], buf[2300], path[600], *out = NULL, *err = NULL;
    snprintf(text, sizeof text,
             "[defaults]\nmodel = a*x + b\ndata = %s\nsigma = s\ngroup = g\np0_file = %s\n"
             "output = %s/default.csv\nfix = b=1\nmax_nfev = 2\n"
             "[fit grouped]\noutput = %s/grouped.csv\nmax_nfev =\n"
             "[fit single]\nsigma =\ngroup =\np0_file =\noutput =\nfix =\nmax_nfev =\n",
             data, p0, dir, dir);
    const char *job = tmp(".ini", text);
    /* grouped: the defaults, but its own output */
    snprintf(buf, sizeof buf, "run --json --only grouped '%s'", job);
    int rc = jf(buf, &out, &err);
    if (!CHECK(rc == 0)) fprintf(stderr, "  %s\n", err ? err : "");
    CHECK_CONTAINS(out, "\"sigma\": \"s\"");
    CHECK_CONTAINS(out, "\"group\": \"B\"");
    CHECK_CONTAINS(out, "{\"name\": \"b\", \"value\": 1, \"stderr\": 0, \"initial\": 1, "
                        "\"at_bound\": null, \"fixed\": true}");
    snprintf(path, sizeof path, "%s/grouped.csv", dir);
    CHECK(access(path, F_OK) == 0);
    unlink(path);
    free(out);
    free(err);
    /* single: no sigma, no groups, b fitted, no output file */
    snprintf(buf, sizeof buf, "run --json --only single '%s'", job);
    rc = jf(buf, &out, &err);
    if (!CHECK(rc == 0)) fprintf(stderr, "  %s\n", err ? err : "");
    CHECK_CONTAINS(out, "\"sigma\": null");
    CHECK_CONTAINS(out, "\"group\": null");
    CHECK(out && !strstr(out, "\"fixed\": true"));
    CHECK_NEAR(param(out, "b"), 1.5, 0.2);
    snprintf(path, sizeof path, "%s/default.csv", dir);
    CHECK(access(path, F_OK) != 0);
    free(out);
    free(err);
    /* the command line unsets the file's setting in every fit */
    snprintf(buf, sizeof buf, "run --json --only grouped --sigma= --output= '%s'", job);
    rc = jf(buf, &out, &err);
    if (!CHECK(rc == 0)) fprintf(stderr, "  %s\n", err ? err : "");
    CHECK_CONTAINS(out, "\"group\": \"A\"");
    CHECK(out && !strstr(out, "\"sigma\": \"s\""));
    snprintf(path, sizeof path, "%s/grouped.csv", dir);
    CHECK(access(path, F_OK) != 0);
    free(out);
    free(err);
    /* fit has no file to unset: an empty value is a slip (an unset shell variable), refused */
    static const char *const empties[] = {"--sigma=", "--output ''", "--p0-file=", "--json="};
    for (int k = 0; k < 4; k++) {
        snprintf(buf, sizeof buf, "fit 'a*x + b' '%s' %s", data, empties[k]);
        rc = jf(buf, &out, &err);
        CHECK(rc == 2);
        CHECK_CONTAINS(err, "needs a value (it is empty)");
        free(out);
        free(err);
    }
    rmdir(dir);
}

/* A file that one fit writes and another reads (its data or p0 file) is refused before any fit
 * runs, as is a fit's own output over its p0 file: the user's input would be overwritten. Also
 * with --only leaving the reading fit out: the file is the user's all the same. */
static void test_no_clobber(void) {
    char dir[] = "/tmp/jf_clobber_XXXXXX";
    if (!CHECK(mkdtemp(dir))) return;
    char path[600], text[1024], buf[2300], *out = NULL, *err = NULL;
    static const char *const files[] = {"a.csv", "b.csv", "p0.csv", "o1.csv"};
    static const char *const texts[] = {"x,y\n" LINE_ROWS, "x,y\n" LINE_ROWS,
                                        "g,a\nu,2\n", "a result\n"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        FILE *f = fopen(path, "w");
        if (CHECK(f)) {
            fputs(texts[i], f);
            fclose(f);
        }
    }
    /* Hard links: another name of the same file, which a comparison of paths misses (the
     * output overwrote the data through it, exit 0). */
    static const char *const links[][2] = {
        {"a.csv", "la.csv"}, {"p0.csv", "lp0.csv"}, {"o1.csv", "o2.csv"}, {"a.csv", "la.png"}};
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        char from[700];
        snprintf(from, sizeof from, "%s/%s", dir, links[i][0]);
        snprintf(path, sizeof path, "%s/%s", dir, links[i][1]);
        CHECK(link(from, path) == 0);
    }
    static const struct {
        const char *job;  /* the job file's text, in dir */
        const char *args; /* after run */
        const char *msg;  /* on stderr after the job's path */
    } cases[] = {
        {"[fit a]\nmodel = a*x+b\ndata = a.csv\n[fit b]\nmodel = a*x+b\ndata = b.csv\n"
         "output = a.csv\n", "", ":4: [fit b] writes %s/a.csv, the data file of [fit a] (line 1): "
         "it would be overwritten"},
        {"[fit a]\nmodel = a*x+b\ndata = a.csv\n[fit b]\nmodel = a*x+b\ndata = b.csv\n"
         "output = a.csv\n", "--only b", ":4: [fit b] writes %s/a.csv, the data file of [fit a]"},
        {"[fit a]\nmodel = a*x+b\ndata = a.csv\noutput = ./b.csv\n[fit b]\nmodel = a*x+b\n"
         "data = b.csv\n", "", ":1: [fit a] writes %s/./b.csv, the data file of [fit b] (line 5)"},
        {"[fit a]\nmodel = a*x+b\ndata = a.csv\ngroup = x\np0_file = p0.csv\n[fit b]\n"
         "model = a*x+b\ndata = b.csv\noutput = p0.csv\n", "--only b",
         ":6: [fit b] writes %s/p0.csv, the p0 file of [fit a] (line 1)"},
        {"[fit a]\nmodel = a*x+b\ndata = a.csv\ngroup = x\np0_file = p0.csv\noutput = p0.csv\n",
         "", ":1: [fit a]: output %s/p0.csv is the p0 file: it would be overwritten"},
        {"[fit a]\nmodel = a*x+b\ndata = a.csv\n[fit b]\nmodel = a*x+b\ndata = b.csv\n"
         "output = la.csv\n", "--only b", ":4: [fit b] writes %s/la.csv, the data file of [fit a] "
         "(line 1): it would be overwritten"},
        {"[fit a]\nmodel = a*x+b\ndata = a.csv\ngroup = x\np0_file = p0.csv\noutput = lp0.csv\n",
         "", ":1: [fit a]: output %s/lp0.csv is the p0 file: it would be overwritten"},
        {"[fit a]\nmodel = a*x+b\ndata = a.csv\noutput = o1.csv\n[fit b]\nmodel = a*x+b\n"
         "data = b.csv\noutput = o2.csv\n", "",
         ":5: [fit b] and [fit a] (line 1) both write %s/o2.csv: give each fit its own file"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char job[700], want[2048];
        snprintf(job, sizeof job, "%s/job%zu.ini", dir, i);
        FILE *f = fopen(job, "w");
        if (!CHECK(f)) continue;
        fputs(cases[i].job, f);
        fclose(f);
        snprintf(buf, sizeof buf, "run %s '%s'", cases[i].args, job);
        snprintf(text, sizeof text, cases[i].msg, dir);
        snprintf(want, sizeof want, "%s%s", job, text);
        int rc = jf(buf, &out, &err);
        if (!CHECK(rc == 2)) fprintf(stderr, "  clobber case %zu: exit %d\n", i, rc);
        if (!CHECK_CONTAINS(err, want)) fprintf(stderr, "  clobber case %zu\n", i);
        CHECK(out && !strstr(out, "summary of")); /* nothing ran */
        free(out);
        free(err);
        unlink(job);
    }
    /* jitfit fit: --output over --p0-file */
    snprintf(buf, sizeof buf, "fit 'a*x+b' '%s/a.csv' --group x --p0-file '%s/p0.csv' --output "
                              "'%s/p0.csv'", dir, dir, dir);
    CHECK(jf(buf, &out, &err) == 2);
    snprintf(text, sizeof text, "output %s/p0.csv is the p0 file: it would be overwritten", dir);
    CHECK_CONTAINS(err, text);
    free(out);
    free(err);
    /* jitfit fit: --output or --plot a hard link of the data */
    for (int plot = 0; plot < 2; plot++) {
        snprintf(buf, sizeof buf, "fit 'a*x+b' '%s/a.csv' --%s '%s/la.%s'", dir,
                 plot ? "plot" : "output", dir, plot ? "png" : "csv");
        CHECK(jf(buf, &out, &err) == 2);
        snprintf(text, sizeof text, "%s %s/la.%s is the data file: it would be overwritten",
                 plot ? "plot" : "output", dir, plot ? "png" : "csv");
        CHECK_CONTAINS(err, text);
        free(out);
        free(err);
    }
    /* a dangling symbolic link is the file a write creates: --plot through a link (or a chain
     * of two, one relative) to the --output file is that file (one was lost, exit 0) */
    for (int chain = 0; chain < 2; chain++) {
        char link[700], link2[700];
        snprintf(link, sizeof link, "%s/dl%d.png", dir, chain);
        snprintf(link2, sizeof link2, "%s/dl%d-2.png", dir, chain);
        snprintf(text, sizeof text, "%s/new%d.csv", dir, chain);
        unlink(link);
        unlink(link2);
        if (chain == 0) CHECK(symlink(text, link) == 0);
        else CHECK(symlink("new1.csv", link2) == 0 && symlink(link2, link) == 0);
        snprintf(buf, sizeof buf, "fit 'a*x+b' '%s/a.csv' --output '%s' --plot '%s'", dir, text,
                 link);
        CHECK(jf(buf, &out, &err) == 2);
        CHECK_CONTAINS(err, "output and plot are the same file");
        struct stat lst;
        CHECK(stat(text, &lst) != 0); /* nothing was written */
        free(out);
        free(err);
        unlink(link);
        unlink(link2);
    }
    /* the model file and the job file are the user's too (both were overwritten, exit 0) */
    static const char *const model_text = "param a = 1\nparam b = 0\ny ~ a*x + b\n";
    char model[700], jobf[700];
    snprintf(model, sizeof model, "%s/m.jf", dir);
    snprintf(jobf, sizeof jobf, "%s/self.ini", dir);
    FILE *mf = fopen(model, "w"), *jfp = fopen(jobf, "w");
    if (CHECK(mf && jfp)) {
        fputs(model_text, mf);
        fprintf(jfp, "[fit a]\nmodel = m.jf\ndata = a.csv\n"
                     "[fit b]\nmodel = a*x+b\ndata = b.csv\noutput = self.ini\n");
    }
    if (mf) fclose(mf);
    if (jfp) fclose(jfp);
    snprintf(buf, sizeof buf, "fit '%s' '%s/a.csv' --output '%s'", model, dir, model);
    CHECK(jf(buf, &out, &err) == 2);
    snprintf(text, sizeof text, "output %s is the model file: it would be overwritten", model);
    CHECK_CONTAINS(err, text);
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "run '%s'", jobf);
    CHECK(jf(buf, &out, &err) == 2);
    snprintf(text, sizeof text, "%s:4: [fit b] writes %s/self.ini, the job file", jobf, dir);
    CHECK_CONTAINS(err, text);
    free(out);
    free(err);
    /* a job's model file written by another fit */
    jfp = fopen(jobf, "w");
    if (CHECK(jfp)) {
        fprintf(jfp, "[fit a]\nmodel = m.jf\ndata = a.csv\n"
                     "[fit b]\nmodel = a*x+b\ndata = b.csv\noutput = m.jf\n");
        fclose(jfp);
    }
    CHECK(jf(buf, &out, &err) == 2);
    snprintf(text, sizeof text, "[fit b] writes %s/m.jf, the model file of [fit a]", dir);
    CHECK_CONTAINS(err, text);
    free(out);
    free(err);
    char *now_model = jf_test_read_file(model, NULL);
    CHECK_STREQ(now_model, model_text);
    free(now_model);
    unlink(model);
    unlink(jobf);
    for (size_t i = 0; i < 4; i++) { /* untouched */
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        char *now = jf_test_read_file(path, NULL);
        CHECK_STREQ(now, texts[i]);
        free(now);
        unlink(path);
    }
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, links[i][1]);
        unlink(path);
    }
    rmdir(dir);
}

/* An empty quoted cell is empty; an output that is the data file is refused. */
static void test_cells_and_outputs(void) {
    const char *d = tmp(".csv", "x,y\n\"\",2\n" LINE_ROWS);
    char buf[1024], *out = NULL, *err = NULL;
    snprintf(buf, sizeof buf, "fit 'a*x+b' '%s'", d);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, ":2: column 1 ('x'): missing value" NAN_HINT);
    free(out);
    free(err);
    fits_line("--nan-policy omit", d);
    snprintf(buf, sizeof buf, "fit 'a*x+b' '%s' --output '%s'", d, d);
    CHECK(jf(buf, &out, &err) == 2);
    CHECK_CONTAINS(err, "is the data file: it would be overwritten");
    free(out);
    free(err);
    char *txt = jf_test_read_file(d, NULL);
    CHECK(txt && strncmp(txt, "x,y\n", 4) == 0); /* untouched */
    free(txt);
}

static void test_job_run(void) {
    const char *data = tmp(".csv", "x,y\n" LINE_ROWS);
    char text[2048];
    snprintf(text, sizeof text,
             "; a job\n[defaults]\nmax_nfev = 50\n\n[fit one]\nmodel = a*x + b\ndata = %s\n"
             "param a = 1.5 in [0, 10]\n\n[fit two]\nmodel = let s = a*x\n    y ~ s + b\ndata = %s\n"
             "p0 = a=3\n",
             data, data);
    const char *job = tmp(".ini", text);
    char buf[1024], *out = NULL, *err = NULL;
    snprintf(buf, sizeof buf, "run --json '%s'", job);
    CHECK(jf(buf, &out, &err) == 0);
    CHECK_CONTAINS(out, "\"name\": \"one\"");
    CHECK_CONTAINS(out, "\"name\": \"two\"");
    CHECK_NEAR(param(out, "a"), 2, 1e-9);
    free(out);
    free(err);
    /* Command-line options override the file: one evaluation is not enough to converge. */
    snprintf(buf, sizeof buf, "run --max-nfev 1 --only two '%s'", job);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(out, "summary of");
    CHECK_CONTAINS(out, "max_nfev");
    CHECK(!strstr(out ? out : "", "\n  one "));
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "run --only three '%s'", job);
    CHECK(jf(buf, &out, &err) == 2);
    CHECK_CONTAINS(err, "has no [fit three]");
    free(out);
    free(err);
    /* blanks around the names are not part of them, as in the file's [fit NAME] */
    snprintf(buf, sizeof buf, "run --max-nfev 1 --only ' two , one' '%s'", job);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(out, "\n  one ");
    CHECK_CONTAINS(out, "\n  two ");
    CHECK(!strstr(err ? err : "", "has no"));
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "run --only ' , ' '%s'", job);
    CHECK(jf(buf, &out, &err) == 2);
    CHECK_CONTAINS(err, "--only needs the names of fits");
    free(out);
    free(err);
    /* command-line errors in run: run's usage line, once, and the fit they failed in */
    snprintf(buf, sizeof buf, "run '%s' --bogus", job);
    CHECK(jf(buf, &out, &err) == 2);
    CHECK_CONTAINS(err, "jitfit: run: unknown option '--bogus'\nusage: jitfit run JOB");
    CHECK(!strstr(err ? err : "", "usage: jitfit fit"));
    const char *usage = strstr(err ? err : "", "usage:");
    CHECK(usage && !strstr(usage + 1, "usage:"));
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "run '%s' --only one --p0 q=2", job);
    CHECK(jf(buf, &out, &err) == 2);
    CHECK_CONTAINS(err, "jitfit: run: [fit one]: --p0: the model has no parameter 'q'");
    free(out);
    free(err);
    CHECK(jf("run /nonexistent/job.ini", &out, &err) == 2);
    CHECK_CONTAINS(err, "/nonexistent/job.ini: No such file or directory");
    free(out);
    free(err);
}

static void test_verbose_and_batch(void) {
    char *out = NULL, *err = NULL;
    CHECK(jf("fit -v '" EX "damped_sine.jf' '" EX "damped_sine.csv'", &out, &err) == 0);
    CHECK_CONTAINS(err, "damping");
    CHECK_CONTAINS(err, "GN"); /* Gauss-Newton steps are named, not printed as 0 */
    free(out);
    free(err);
    /* No progress output when stderr is not a terminal. */
    CHECK(jf("fit --group sample --p0-file '" EX "spectra_p0.csv' '" EX "spectra.jf' '" EX
             "spectra.csv'",
             &out, &err) == 0);
    CHECK(err && !strstr(err, "fitting groups"));
    free(out);
    free(err);
    /* On a terminal it is shown, with --json too (the array goes to stdout, whole) */
    int mfd = posix_openpt(O_RDWR | O_NOCTTY);
    const char *pts = mfd >= 0 && grantpt(mfd) == 0 && unlockpt(mfd) == 0 ? ptsname(mfd) : NULL;
    if (CHECK(pts != NULL)) {
        char cmd[2048], tty[4096];
        snprintf(cmd, sizeof cmd, "'%s' fit --json --group sample --p0-file '" EX
                 "spectra_p0.csv' '" EX "spectra.jf' '" EX "spectra.csv' 2>'%s'",
                 jf_test_cli(), pts);
        CHECK(jf_test_run(cmd, &out, NULL) == 0);
        CHECK(out && out[0] == '[' && strstr(out, "\"group\": \"D\"") && !strstr(out, "fitting"));
        free(out);
        fcntl(mfd, F_SETFL, O_NONBLOCK);
        ssize_t got, len = 0;
        while (len < (ssize_t)sizeof tty - 1 &&
               (got = read(mfd, tty + len, sizeof tty - 1 - (size_t)len)) > 0)
            len += got;
        tty[len > 0 ? len : 0] = '\0';
        CHECK_CONTAINS(tty, "fitting groups: 4/4");
    }
    if (mfd >= 0) close(mfd);
    const char *p0 = tmp(".csv", "sample,amp,zz\nA,1,2\n");
    char buf[1024];
    snprintf(buf, sizeof buf, "fit --group sample --p0-file '%s' '" EX "spectra.jf' '" EX "spectra.csv'", p0);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, "column 'zz' is not a parameter of the model");
    free(out);
    free(err);
    /* a file without its header row: the first row is read as one, and the message says so */
    p0 = tmp(".csv", "A,1\nB,2\n");
    snprintf(buf, sizeof buf, "fit --group sample --p0-file '%s' '" EX "spectra.jf' '" EX "spectra.csv'", p0);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, "column '1' is not a parameter of the model (parameters: ");
    CHECK_CONTAINS(err, "; the first row names the group column and the parameters)");
    free(out);
    free(err);
    /* ... in a .npy p0 file, which has no header line: the column, not a line 0 */
    double p0_rows[3] = {1, 2, 3};
    p0 = npy("{'descr': [('sample', '<f8'), ('amp', '<f8'), ('zz', '<f8')], "
             "'fortran_order': False, 'shape': (1,), }", p0_rows, sizeof p0_rows);
    snprintf(buf, sizeof buf, "fit --group sample --p0-file '%s' '" EX "spectra.jf' '" EX "spectra.csv'", p0);
    CHECK(jf(buf, &out, &err) == 1);
    snprintf(buf, sizeof buf, "%s: column 3 ('zz') is not a parameter of the model", p0);
    CHECK_CONTAINS(err, buf);
    free(out);
    free(err);
    p0 = tmp(".csv", "sample,amp\nQ,1\n");
    snprintf(buf, sizeof buf, "fit --group sample --p0-file '%s' '" EX "spectra.jf' '" EX "spectra.csv'", p0);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, ":2: group 'Q' is not in the data");
    free(out);
    free(err);
    CHECK(jf("fit --p0-file x.csv 'a*x+b' '" EX "damped_sine.csv'", &out, &err) == 2);
    CHECK_CONTAINS(err, "needs --group");
    free(out);
    free(err);
    /* one group's unusable start is that group's error row, with the p0 file's line; the
     * others are fitted */
    p0 = tmp(".csv", "sample,amp,mu,w\nA,8,44,3\nB,8,50,-1\nC,10,40,3\nD,6,58,3\n");
    snprintf(buf, sizeof buf, "fit --group sample --p0-file '%s' '" EX "spectra.jf' '" EX "spectra.csv'", p0);
    CHECK(jf(buf, &out, &err) == 1);
    char want[600];
    snprintf(want, sizeof want, "error: %s:3: parameter 'w': the starting value -1 is outside its bounds [0, inf]", p0);
    CHECK_CONTAINS(out, want);
    CHECK_CONTAINS(out, "4 groups, 3 converged");
    CHECK_CONTAINS(err, "1 of 4 group fits did not converge or could not run");
    free(out);
    free(err);
    /* a group twice in the p0 file: which row was meant? */
    p0 = tmp(".csv", "sample,amp\nA,1\nA,2\n");
    snprintf(buf, sizeof buf, "fit --group sample --p0-file '%s' '" EX "spectra.jf' '" EX "spectra.csv'", p0);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, ":3: group 'A' is given twice (first on line 2)");
    free(out);
    free(err);
    /* a NaN group label in a .npy file is a missing label, not a group called nan */
    double g[18] = {1, 0, 1, 1, 1, 3, NAN, 2, 5, 2, 3, 7, 2, 4, 9, 2, 5, 11};
    const char *np = npy("{'descr': [('g', '<f8'), ('x', '<f8'), ('y', '<f8')], "
                         "'fortran_order': False, 'shape': (6,), }", g, sizeof g);
    snprintf(buf, sizeof buf, "fit --group g 'a*x+b' '%s'", np);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, ":3: column 1 ('g'): a non-finite group label");
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "fit --group g --nan-policy omit 'a*x+b' '%s'", np);
    jf(buf, &out, &err);
    CHECK(out && !strstr(out, "nan"));
    CHECK_CONTAINS(out, "1 row with no group label dropped");
    CHECK(out && !strstr(out, "dropped every row")); /* said: 1 group (first 'nan') */
    free(out);
    free(err);
    /* int64 labels beyond 2^53: as doubles 2^62 and 2^62 + 1 were one group of both's rows */
    struct {
        int64_t g;
        double x, y;
    } big[6] = {{INT64_C(1) << 62, 0, 1},       {INT64_C(1) << 62, 1, 3},
                {INT64_C(1) << 62, 2, 5},       {(INT64_C(1) << 62) + 1, 0, 5},
                {(INT64_C(1) << 62) + 1, 1, 4}, {(INT64_C(1) << 62) + 1, 2, 3}};
    np = npy("{'descr': [('g', '<i8'), ('x', '<f8'), ('y', '<f8')], 'fortran_order': False, "
             "'shape': (6,), }", big, sizeof big);
    snprintf(buf, sizeof buf, "fit --group g 'a*x+b' '%s'", np);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, ":4: column 1 ('g'): an integer beyond 2^53");
    free(out);
    free(err);
    /* as a response such a column is read as doubles, as ever, with a note on the rounding */
    snprintf(buf, sizeof buf, "fit --y g 'a*x+b' '%s'", np);
    CHECK(jf(buf, &out, &err) == 0);
    CHECK_CONTAINS(err, "note: ");
    CHECK_CONTAINS(err, ": column 1 ('g') has integers beyond 2^53 (first at row 4), rounded to "
                        "the nearest double");
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "fit 'a*x+b' '%s'", np); /* g unused: no note */
    CHECK(jf(buf, &out, &err) == 0);
    CHECK(err && !strstr(err, "2^53"));
    free(out);
    free(err);
}

/* What a batch's table and JSON owe their readers: the results' warnings, whole labels, and a
 * job's fit name on its groups' error objects too. */
static void test_batch_report(void) {
    char buf[2048], *out = NULL, *err = NULL;
    const char *d = tmp(".csv", "g,x,y\nsample_with_a_very_long_name_number_1,0,1\n"
                                "sample_with_a_very_long_name_number_1,1,3\n"
                                "sample_with_a_very_long_name_number_1,2,5.1\n"
                                "sample_with_a_very_long_name_number_2,0,1\n"
                                "sample_with_a_very_long_name_number_2,1,3.1\n"
                                "sample_with_a_very_long_name_number_2,2,5\nshort,0,1\n");
    /* a single fit's report shows the warning; the table said nothing */
    snprintf(buf, sizeof buf, "fit --group g --precision single 'a*x+b' '%s'", d);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(out, "warning (2 groups): single precision applies to GPU fits");
    /* labels longer than the column were cut to 24 bytes: two rows read the same */
    CHECK_CONTAINS(out, "sample_with_a_very_long_name_number_1 ");
    CHECK_CONTAINS(out, "sample_with_a_very_long_name_number_2 ");
    free(out);
    free(err);
    /* a label's width is its characters, not its bytes: the counts stand in one column */
    const char *u = tmp(".csv", "g,x,y\nprobe_\xc3\xa4,0,1\nprobe_\xc3\xa4,1,2\nprobe_\xc3\xa4,2,3.1\n"
                                "probe_b,0,2\nprobe_b,1,4\nprobe_b,2,6.2\n");
    snprintf(buf, sizeof buf, "fit --group g 'a+b*x' '%s'", u);
    CHECK(jf(buf, &out, &err) == 0);
    CHECK_CONTAINS(out, "\n  probe_\xc3\xa4      3  ");
    CHECK_CONTAINS(out, "\n  probe_b      3  ");
    free(out);
    free(err);
    char job[1024];
    snprintf(job, sizeof job, "[fit lines]\nmodel = a*x+b\ndata = %s\ngroup = g\n", d);
    const char *jp = tmp(".ini", job);
    snprintf(buf, sizeof buf, "run --json '%s'", jp);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(out, "\"group\": \"short\", \"success\": false, \"error\": \"1 data point for 2 parameters");
    CHECK_CONTAINS(out, "a fit needs more points than parameters\", \"name\": \"lines\", \"rows_dropped\": 0}");
    free(out);
    free(err);
}

/* Lines of text (its '\n's). */
static size_t count_lines(const char *text) {
    size_t n = 0;
    for (const char *p = text; p && (p = strchr(p, '\n')); p++) n++;
    return n;
}

/* --output is complete, or the earlier file is left as it was, however the run ends: a batch
 * whose report is cut by `| head` (SIGPIPE while it prints: the file used to be written after
 * the report, so it never was), a write that fails half way (here the file size limit: the
 * file used to be left cut in the middle of a row), and a SIGTERM while it writes (the same). */
static void test_output_complete(void) {
    /* 3000 groups of 4 rows: a 270 kB table, more than a pipe holds */
    size_t ng = 3000, cap = ng * 4 * 40 + 16, len = 0;
    char *csv = malloc(cap), buf[4096], *out = NULL, *err = NULL;
    if (!CHECK(csv != NULL)) return;
    len += (size_t)snprintf(csv + len, cap - len, "g,x,y\n");
    for (size_t k = 0; k < ng; k++)
        for (int i = 0; i < 4; i++)
            len += (size_t)snprintf(csv + len, cap - len, "g%zu,%d,%.3f\n", k, i,
                                    (double)(k % 7) * i + 1 + 0.01 * ((i * 5 + (int)k) % 3));
    const char *d = tmp(".csv", csv);
    free(csv);
    const char *o = tmp(".csv", "");
    unlink(o);
    snprintf(buf, sizeof buf, "'%s' fit --group g --output '%s' 'a*x+b' '%s' | head -1",
             jf_test_cli(), o, d);
    CHECK(jf_test_run(buf, &out, &err) == 0);
    CHECK_CONTAINS(out, "batch fit of a*x+b to ");
    free(out);
    free(err);
    char *text = jf_test_read_file(o, NULL);
    CHECK(text && count_lines(text) == ng * 4 + 1);
    CHECK(text && strstr(text, "\ng2999,3,"));
    free(text);

    /* A write that fails: the earlier file stays, no temporary is left beside it. The limit
     * (1024 or 512-byte blocks, as the shell counts) holds the kernels, not the 500 kB file. */
    FILE *f = fopen(o, "w");
    if (f) {
        fputs("earlier\n", f);
        fclose(f);
    }
    snprintf(buf, sizeof buf, "trap '' XFSZ; ulimit -f 200; '%s' fit --group g --output '%s' "
                              "'a*x+b' '%s' > /dev/null", jf_test_cli(), o, d);
    CHECK(jf_test_run(buf, NULL, &err) == 1);
    CHECK_CONTAINS(err, ": write error");
    free(err);
    text = jf_test_read_file(o, NULL);
    CHECK_STREQ(text, "earlier\n");
    free(text);
    char dir[1024], base[512];
    snprintf(dir, sizeof dir, "%s", o);
    char *slash = strrchr(dir, '/');
    if (!CHECK(slash != NULL)) return;
    snprintf(base, sizeof base, "%s", slash + 1);
    *slash = '\0';
    snprintf(buf, sizeof buf, "ls -a '%s' | grep -c '^\\.%s\\.jitfit-'", dir, base);
    CHECK(jf_test_run(buf, &out, NULL) == 1); /* grep found none */
    CHECK_STREQ(out, "0\n");
    free(out);

    /* SIGTERM while the file is written (seen by its temporary): the handler removes the
     * temporary and the earlier file stays. 200000 rows take long enough to write (about a
     * second) that the loop sees the temporary; a run that ended first fails the check. */
    size_t big = 200000;
    cap = big * 24 + 16;
    len = 0;
    csv = malloc(cap);
    if (!CHECK(csv != NULL)) return;
    len += (size_t)snprintf(csv + len, cap - len, "x,y\n");
    for (size_t i = 0; i < big; i++)
        len += (size_t)snprintf(csv + len, cap - len, "%zu,%zu.5\n", i, 2 * i + (i % 3));
    const char *bigd = tmp(".csv", csv);
    free(csv);
    snprintf(buf, sizeof buf,
             "'%s' fit --output '%s' 'a*x+b' '%s' > /dev/null 2>&1 & pid=$!; seen=0; "
             "while kill -0 $pid 2>/dev/null; do "
             "if ls -a '%s' | grep -q '^\\.%s\\.jitfit-'; then seen=1; kill -TERM $pid; break; fi; "
             "done; wait $pid; echo \"seen=$seen rc=$?\"",
             jf_test_cli(), o, bigd, dir, base);
    CHECK(jf_test_run(buf, &out, NULL) == 0);
    CHECK_STREQ(out, "seen=1 rc=143\n");
    free(out);
    text = jf_test_read_file(o, NULL);
    CHECK_STREQ(text, "earlier\n");
    free(text);
    snprintf(buf, sizeof buf, "ls -a '%s' | grep -c '^\\.%s\\.jitfit-'", dir, base);
    CHECK(jf_test_run(buf, &out, NULL) == 1);
    CHECK_STREQ(out, "0\n");
    free(out);
}

/* What a batch's table, its JSON and run's summary say about the same groups agrees with what
 * their fits' reports say. */
static void test_batch_consistency(void) {
    char buf[2048], *out = NULL, *err = NULL;
    /* group 'first' cannot be fitted (one row); the others use the C kernels */
    const char *d = tmp(".csv", "g,x,y\nfirst,0,1\nu,0,1\nu,1,3\nu,2,5.1\nv,0,1\nv,1,3.1\n"
                                "v,2,5\n");
    char job[1024];
    snprintf(job, sizeof job, "[fit lines]\nmodel = a*x+b\ndata = %s\ngroup = g\n", d);
    const char *jp = tmp(".ini", job);
    /* run's summary: the cache column is the fitted groups', not "none" (the interpreter's) */
    snprintf(buf, sizeof buf, "run '%s'", jp);
    CHECK(jf(buf, &out, &err) == 1);
    const char *row = out ? strstr(out, "\n  lines ") : NULL;
    CHECK(row && strstr(row, "2/3 conv.!"));
    CHECK(row && !strstr(row, "  none\n"));
    free(out);
    free(err);
    /* a fit that converged but could not write its output: the summary marks it as failed,
     * as the exit status does */
    char job2[1024];
    snprintf(job2, sizeof job2,
             "[fit one]\nmodel = a*x+b\ndata = %s\noutput = /nonexistent/dir/o.csv\n", d);
    const char *jp2 = tmp(".ini", job2);
    snprintf(buf, sizeof buf, "run '%s'", jp2);
    CHECK(jf(buf, &out, &err) == 1);
    row = out ? strstr(out, "\n  one ") : NULL;
    const char *eol = row ? strchr(row + 1, '\n') : NULL;
    CHECK(row && eol && memchr(row, '!', (size_t)(eol - row)));
    free(out);
    free(err);
    /* a parameter that ended on a bound is marked in the table as in a single fit's report */
    snprintf(buf, sizeof buf, "fit --group g --bounds a=0:1.5 'a*x+b' '%s'", d);
    CHECK(jf(buf, &out, &err) == 1);
    row = out ? strstr(out, "\n  u ") : NULL;
    CHECK(row && strstr(row, "  a at upper bound\n"));
    free(out);
    free(err);
    /* the backend that fitted the groups, and with an explicit --device auto the device
     * note, as a single fit's report has them in its backend and device lines */
    snprintf(buf, sizeof buf, "fit --group g --backend interp --device auto 'a*x+b' '%s'", d);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(out, "\n  backend (2 groups): interp (kernel cache: none)\n");
    CHECK_CONTAINS(out, "\n  device (2 groups): cpu: ");
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "fit --group g --backend interp 'a*x+b' '%s'", d);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK(out && !strstr(out, "device ("));
    free(out);
    free(err);
}

static void test_help(void) {
    static const struct {
        const char *topic, *text; /* topic, a string its help must contain */
    } topics[] = {{"fit", "--group"}, {"fit", "--nan-policy"}, {"run", "[fit NAME]"},
                  {"dsl", "Grammar"}, {"model", "Grammar"}, {"howto", "job file"}, {"check", "caret"},
                  {"eval", "\"gradient\""}, {"diff", "d/dNAME"}, {"codegen", "hex"},
                  {"cache", "JITFIT_NO_CACHE"}};
    for (size_t i = 0; i < sizeof topics / sizeof topics[0]; i++) {
        char buf[256], *out = NULL, *err = NULL;
        snprintf(buf, sizeof buf, "help %s", topics[i].topic);
        CHECK(jf(buf, &out, &err) == 0);
        if (!CHECK_CONTAINS(out, topics[i].text)) fprintf(stderr, "  help %s\n", topics[i].topic);
        free(out);
        free(err);
    }
    char *out = NULL, *err = NULL;
    CHECK(jf("help nosuch", &out, &err) == 2);
    CHECK_CONTAINS(err, "no topic 'nosuch'");
    free(out);
    free(err);
    CHECK(jf("fit --help", &out, &err) == 0);
    CHECK_CONTAINS(out, "--absolute-sigma");
    free(out);
    free(err);
    /* every command takes --help (or -h) for its section, as `jitfit help COMMAND` prints it */
    static const char *const cmds[] = {"check", "eval 'a*x' --at x=1", "diff", "codegen -h",
                                       "cache prune", "doctor", "run --help", "help",
                                       "help -h"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char buf[256], head[64];
        snprintf(buf, sizeof buf, "%s%s", cmds[i], strstr(cmds[i], "-h") ? "" : " --help");
        snprintf(head, sizeof head, "## `jitfit %.*s`", (int)strcspn(cmds[i], " "), cmds[i]);
        if (!CHECK(jf(buf, &out, &err) == 0)) fprintf(stderr, "  %s\n", buf);
        if (!CHECK_CONTAINS(out, head)) fprintf(stderr, "  %s\n", buf);
        free(out);
        free(err);
    }
    /* the list of commands is a table: every summary starts in the same column */
    CHECK(jf("help", &out, &err) == 0);
    const char *line = out ? strstr(out, "commands:\n") : NULL;
    size_t col = 0, nlines = 0;
    for (line = line ? strchr(line, '\n') + 1 : NULL; line && strncmp(line, "  ", 2) == 0;
         line = strchr(line, '\n') + 1, nlines++) {
        size_t gap = strstr(line + 2, "  ") - line, c = gap + strspn(line + gap, " ");
        if (!col) col = c;
        if (!CHECK(c == col)) fprintf(stderr, "  %.*s\n", (int)strcspn(line, "\n"), line);
    }
    CHECK(nlines >= 10);
    CHECK_CONTAINS(out, "\n  dsl (or model)  "); /* the alias is listed where the topics are */
    free(out);
    free(err);
    /* after `--` it is a formula's text (--help is -(-help)), not an option */
    CHECK(jf("diff -- --help", &out, &err) == 0);
    CHECK_CONTAINS(out, "d/dhelp = 1");
    free(out);
    free(err);
}

/* --vector-math fits the bundled damped sine to the same parameters as the exact kernels (it
 * falls back to them with a warning where SLEEF or the CPU features are missing). */
static void test_vector_math(void) {
    char *out = NULL, *err = NULL, *vout = NULL, *verr = NULL;
    const char *base = "fit " JF_SOURCE_DIR "/examples/damped_sine.jf " JF_SOURCE_DIR
                       "/examples/damped_sine.csv --json";
    char args[1024];
    CHECK(jf(base, &out, &err) == 0);
    snprintf(args, sizeof args, "%s --vector-math", base);
    CHECK(jf(args, &vout, &verr) == 0);
    const char *names[] = {"a", "b", "c", "d", "e"};
    for (size_t k = 0; k < 5; k++) {
        double exact = param(out, names[k]), vec = param(vout, names[k]);
        CHECK(isfinite(exact));
        CHECK_NEAR(vec, exact, 1e-9);
    }
    free(out);
    free(err);
    free(vout);
    free(verr);
    CHECK(jf("fit 'a*x+b' - --vector-math=maybe", &out, &err) == 2);
    CHECK_CONTAINS(err, "--vector-math");
    free(out);
    free(err);
}

/* A model that never names a variable (a mean: `c`) needs only the response column: it is read
 * as a model of no variable when the data have no column x, instead of failing for want of one.
 * A model that names x (even where it cancels) or declares a variable still needs its column. */
static void test_no_variable(void) {
    char buf[1024], *out = NULL, *err = NULL;
    const char *y = tmp(".csv", "y\n1\n2\n3\n6\n");
    snprintf(buf, sizeof buf, "fit --json c '%s'", y);
    CHECK(jf(buf, &out, &err) == 0);
    CHECK_NEAR(param(out, "c"), 3, 1e-12);
    CHECK_CONTAINS(err, "note: the data have no column 'x' and the model does not name it: it is "
                        "fitted with no variable, to the response alone\n");
    CHECK(err && !strstr(err, "warning"));
    free(out);
    free(err);
    /* --plot cannot draw it: said before the fit runs (no report), not after */
    snprintf(buf, sizeof buf, "fit c '%s' --plot /tmp/jf_novar_plot.png", y);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, "/tmp/jf_novar_plot.png: --plot draws models of one or two variables; "
                        "this model has 0");
    CHECK(out && !strstr(out, "parameter"));
    free(out);
    free(err);
    /* a model file with parameters, the response named by --y, several parameters */
    const char *m = tmp(".jf", "param c = 0\nparam d = 1\ny ~ c + d^2 - d^2\n");
    snprintf(buf, sizeof buf, "fit --json --y z '%s' '%s'", m,
             tmp(".csv", "z\n1\n2\n3\n6\n"));
    CHECK(jf(buf, &out, &err) == 1); /* d cancels: unused_param, but it ran */
    CHECK_NEAR(param(out, "c"), 3, 1e-9);
    free(out);
    free(err);
    /* a headerless file of one column is the response */
    snprintf(buf, sizeof buf, "fit --json 'a + b' '%s'", tmp(".csv", "1\n2\n3\n6\n"));
    jf(buf, &out, &err);
    CHECK_CONTAINS(out, "\"n\": 4,");
    CHECK_NEAR(param(out, "a") + param(out, "b"), 3, 1e-9);
    free(out);
    free(err);
    /* no column for the response either: the missing column is the message, with no note that
     * the model is fitted to it (it named the response column 'Y' among the unused ones) */
    snprintf(buf, sizeof buf, "fit c '%s'", tmp(".csv", "t,Y\n1,1\n2,2\n3,3\n4,6\n"));
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, "no column 'y' (columns: t, Y)");
    CHECK(err && !strstr(err, "note:"));
    free(out);
    free(err);
    /* a response under another name: the error says how to name it, and which column when
     * only one is left over (scipy's curve_fit takes it by position) */
    snprintf(buf, sizeof buf, "fit 'a*exp(-b*t)' '%s'",
             tmp(".csv", "t,signal\n1,1\n2,2\n3,3\n4,6\n"));
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, "no column 'y' (columns: t, signal); name the response column with --y "
                        "signal (y = signal in a job file)\n");
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "fit 'a*exp(-b*t)' '%s'",
             tmp(".csv", "t,s1,s2\n1,1,1\n2,2,2\n3,3,3\n4,6,6\n"));
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, "no column 'y' (columns: t, s1, s2); name the response column with --y "
                        "NAME (y = NAME in a job file)\n");
    free(out);
    free(err);
    /* a --y that names no column: no hint, the name given is the mistake */
    snprintf(buf, sizeof buf, "fit --y sig 'a*exp(-b*t)' '%s'",
             tmp(".csv", "t,signal\n1,1\n2,2\n3,3\n4,6\n"));
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, "no column 'sig' (columns: t, signal)\n");
    free(out);
    free(err);
    /* other columns, not used: the note names them (a misspelt variable, `tt` for `t`) */
    snprintf(buf, sizeof buf, "fit 'a*exp(-b*tt)' '%s'", tmp(".csv", "t,y\n1,1\n2,2\n3,3\n4,6\n"));
    jf(buf, &out, &err);
    CHECK_CONTAINS(err, "fitted with no variable, to the response alone (columns not used: t)");
    free(out);
    free(err);
    /* naming x, even where it cancels, or declaring a variable: its column is needed */
    snprintf(buf, sizeof buf, "fit 'c + 0*x' '%s'", y);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, "no column 'x' (columns: y)");
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "fit '%s' '%s'", tmp(".jf", "var t\nparam c = 1\ny ~ c\n"), y);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, "no column 't' (columns: y)");
    free(out);
    free(err);
    /* with a column x the model keeps its variable, as before */
    snprintf(buf, sizeof buf, "fit --output - c '%s'", tmp(".csv", "x,y\n0,1\n1,2\n2,3\n3,6\n"));
    CHECK(jf(buf, &out, &err) == 0);
    CHECK_CONTAINS(out, "x,y,fit,residual,fit_stderr\n0,1,3,-2,1.0801234497346435\n");
    free(out);
    free(err);
    /* fit_stderr is the delta method's sqrt(gᵀ C g): for a line, s·sqrt(1/n + (x − x̄)²/Sxx)
     * (s² = 0.6, x̄ = 1.5, Sxx = 5 here: 0.648..., 0.424...) */
    snprintf(buf, sizeof buf, "fit --output - 'a*x+b' '%s'", tmp(".csv", "x,y\n0,1\n1,2\n2,3\n3,6\n"));
    CHECK(jf(buf, &out, &err) == 0);
    const char *row = out ? strchr(out, '\n') : NULL;
    for (int i = 0; i < 4 && row; i++, row = strchr(row + 1, '\n')) {
        const char *last = row + 1 + strcspn(row + 1, "\n");
        while (last > row + 1 && last[-1] != ',') last--;
        double dx = i - 1.5;
        CHECK_NEAR(strtod(last, NULL), sqrt(0.6 * (0.25 + dx * dx / 5)), 1e-14);
    }
    free(out);
    free(err);
}

/* A job file's `param NAME = START` is the number START spells, however long its text: a start
 * of 133 characters was cut to 127 and read as 0 (exit 0, no word), where --p0 gave 1e-131. */
static void test_long_param(void) {
    char zeros[131], text[1024], buf[1024], *out = NULL, *err = NULL;
    memset(zeros, '0', 130);
    zeros[130] = '\0';
    const char *data = tmp(".csv", "x,y\n" LINE_ROWS);
    for (int bounds = 0; bounds < 2; bounds++) {
        /* a long start; then a long bound too (refused as "expected bounds as [LOW, HIGH]") */
        snprintf(text, sizeof text, "[fit a]\nmodel = a*x+b\ndata = %s\nparam a = 0.%s1\n%s%s%s",
                 data, zeros, bounds ? "param b = [0." : "", bounds ? zeros : "",
                 bounds ? "1, 5]\n" : "");
        snprintf(buf, sizeof buf, "run --json '%s'", tmp(".ini", text));
        CHECK(jf(buf, &out, &err) == 0);
        CHECK_CONTAINS(out, "{\"name\": \"a\", \"value\": 2, ");
        CHECK_CONTAINS(out, "\"initial\": 1e-131, ");
        /* b: the default start, 1, or the midpoint of its bounds [1e-131, 5] */
        CHECK_CONTAINS(out, bounds ? "\"initial\": 2.5, " : "\"initial\": 1, ");
        free(out);
        free(err);
    }
    /* A message suggests --columns with every name, however long the list (it was cut at 512
     * bytes, and the message at 1024), on stderr and in the JSON object. */
    char model[4096] = "var ", cols[2048] = "", sum[2048] = "", want[2200];
    for (int i = 1; i <= 40; i++) {
        char v[64];
        snprintf(v, sizeof v, "%sa_rather_long_variable_name_%02d", i > 1 ? "," : "", i);
        strcat(model, v);
        strcat(cols, v);
        strcat(sum, v + (i > 1));
        if (i < 40) strcat(sum, "+");
    }
    snprintf(model + strlen(model), sizeof model - strlen(model), "\ny ~ c*(%s)\n", sum);
    snprintf(buf, sizeof buf, "fit --json '%s' '%s'", tmp(".jf", model), tmp(".csv", LINE_ROWS));
    snprintf(want, sizeof want, "(e.g. --columns %s,y)", cols);
    CHECK(jf(buf, &out, &err) == 1);
    CHECK_CONTAINS(err, want);
    CHECK_CONTAINS(out, want);
    free(out);
    free(err);
}

/* Standard input can be read once. A job read from it (`run -`) whose fit reads '-' too, two
 * fits that both read it, or one fit's data and p0 file both '-' found it empty: "<stdin>: no
 * data rows" (exit 1) after the fits before had run. Refused before any fit runs, saying why. */
static void test_stdin_once(void) {
    char buf[2048], want[1024], *out = NULL, *err = NULL;
    const char *data = tmp(".csv", "g,x,y\nu,0,1\nu,1,3\nu,2,5\nv,0,1\nv,1,3\nv,2,5\n");
    const char *p0 = tmp(".csv", "g,a\nu,2\nv,2\n");
    /* run -: the fit's data, or its p0 file from the file or the command line */
    snprintf(buf, sizeof buf, "run - < '%s'", tmp(".ini", "[fit a]\nmodel = a*x+b\ndata = -\n"));
    CHECK(jf(buf, &out, &err) == 2);
    CHECK_CONTAINS(err, "jitfit: -:1: [fit a]: data '-' reads standard input, but the job file "
                        "was read from it: name a file instead\n");
    CHECK(out && !strstr(out, "summary of"));
    free(out);
    free(err);
    snprintf(want, sizeof want, "[fit a]\nmodel = a*x+b\ndata = %s\ngroup = g\n", data);
    snprintf(buf, sizeof buf, "run --json --p0-file - - < '%s'", tmp(".ini", want));
    CHECK(jf(buf, &out, &err) == 2);
    CHECK_CONTAINS(err, "jitfit: -:1: [fit a]: p0_file '-' reads standard input, but the job file "
                        "was read from it: name a file instead\n");
    CHECK_CONTAINS(out, "{\"success\": false, \"error\": \"-:1: [fit a]: p0_file '-' reads");
    free(out);
    free(err);
    /* two fits of a job that both read standard input; --only one of them runs */
    const char *job = tmp(".ini", "[fit a]\nmodel = a*x+b\ndata = -\n[fit b]\nmodel = a*x+b\n"
                                  "data = -\n");
    snprintf(buf, sizeof buf, "run '%s' < '%s'", job, tmp(".csv", "x,y\n" LINE_ROWS));
    CHECK(jf(buf, &out, &err) == 2);
    snprintf(want, sizeof want, "%s:4: [fit b]: data '-' reads standard input, as [fit a] (line 1) "
                                "does: it can be read only once; name a file instead\n", job);
    CHECK_CONTAINS(err, want);
    CHECK(out && !strstr(out, "summary of"));
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "run --only b --json '%s' < '%s'", job, tmp(".csv", "x,y\n" LINE_ROWS));
    CHECK(jf(buf, &out, &err) == 0);
    CHECK_NEAR(param(out, "a"), 2, 1e-9);
    free(out);
    free(err);
    /* one fit, data and p0 file both standard input */
    snprintf(buf, sizeof buf, "fit 'a*x+b' - --group g --p0-file - < '%s'", data);
    CHECK(jf(buf, &out, &err) == 2);
    CHECK_CONTAINS(err, "jitfit: fit: the data and the p0 file are both '-': standard input can be "
                        "read only once; give one of them as a file\n");
    free(out);
    free(err);
    /* either of them alone reads it */
    snprintf(buf, sizeof buf, "fit --json 'a*x+b' '%s' --group g --p0-file - < '%s'", data, p0);
    CHECK(jf(buf, &out, &err) == 0);
    CHECK_CONTAINS(out, "\"initial\": 2, ");
    free(out);
    free(err);
}

/* The "group" values of a --json batch, in order, each as its JSON text, joined by '|'. */
static void json_groups(const char *out, char *buf, size_t n) {
    size_t used = 0;
    buf[0] = '\0';
    for (const char *p = out; p && (p = strstr(p, "\"group\": \"")); ) {
        p += 10;
        const char *e = p;
        while (*e && *e != '"') e += *e == '\\' && e[1] ? 2 : 1;
        used += (size_t)snprintf(buf + used, used < n ? n - used : 0, "%.*s|", (int)(e - p), p);
        p = e;
    }
}

/* Group labels survive --output: a label with a blank or tab at either end, a '#' first or a
 * quote is quoted there, so fitting the written file by the same column gives the same groups
 * (a quoted "A " was written bare, read back as "A", and "#1" started a comment line). */
static void test_output_labels(void) {
    const char *d = tmp(".csv", "x,g,y\n0,\" A\",1\n1,\" A\",3\n2,\" A\",5\n"
                                "0,\"A \",1\n1,\"A \",3\n2,\"A \",5.5\n"
                                "0,#1,1\n1,#1,3\n2,#1,5.25\n"
                                "0,\"t\tab\t\",1\n1,\"t\tab\t\",3\n2,\"t\tab\t\",6\n"
                                "0,\"q\"\"\",1\n1,\"q\"\"\",3\n2,\"q\"\"\",6.5\n");
    const char *o = tmp(".csv", "");
    char buf[1024], first[512], again[512], *out = NULL, *err = NULL;
    snprintf(buf, sizeof buf, "fit --json 'a*x+b' '%s' --group g --output '%s'", d, o);
    CHECK(jf(buf, &out, &err) == 0);
    json_groups(out, first, sizeof first);
    CHECK_STREQ(first, " A|A |#1|t\\tab\\t|q\\\"|");
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "fit --json 'a*x+b' '%s' --group g", o);
    CHECK(jf(buf, &out, &err) == 0);
    json_groups(out, again, sizeof again);
    CHECK_STREQ(again, first);
    free(out);
    free(err);
}

/* --group may not name the response or a variable of the model (every group would be one
 * row, or one value of x, and fail): refused as --sigma is, in fit (a headerless file named by
 * --columns too) and in a job file. */
static void test_group_column(void) {
    char buf[1024], want[1024], *out = NULL, *err = NULL;
    const char *h = tmp(".csv", LINE_ROWS);
    snprintf(buf, sizeof buf, "fit 'a*x+b' '%s' --columns x,y --group y", h);
    CHECK(jf(buf, &out, &err) == 2);
    CHECK_CONTAINS(err, "jitfit: fit: --group: column 'y' is the response\n");
    CHECK(out && !strstr(out, "groups"));
    free(out);
    free(err);
    snprintf(want, sizeof want, "[fit a]\nmodel = a*x+b\ndata = %s\ncolumns = x, y\ngroup = x\n", h);
    snprintf(buf, sizeof buf, "run --json '%s'", tmp(".ini", want));
    CHECK(jf(buf, &out, &err) == 2);
    CHECK_CONTAINS(err, "jitfit: run: [fit a]: --group: column 'x' is a variable of the model\n");
    CHECK_CONTAINS(out, "{\"name\": \"a\", \"success\": false, \"error\": \"--group: column 'x' "
                        "is a variable of the model\"}");
    free(out);
    free(err);
}

/* Lines that start with '#' are comments; one with as many fields as the header is likely a row
 * whose first cell starts with '#' (a group label "#1" unquoted, as pandas writes it): skipping
 * it says so, and the quoted label is data. Remarks (other field counts) pass silently. */
static void test_hash_rows(void) {
    char buf[1024], *out = NULL, *err = NULL;
    snprintf(buf, sizeof buf, "fit --group g --json 'a*x+b' '%s'",
             tmp(".csv", "g,x,y\n#1,0,1\n#1,1,3\n#1,2,5\n#1,3,7.1\n2,0,2\n2,1,4\n2,2,6.2\n2,3,8\n"));
    CHECK(jf(buf, &out, &err) == 0);
    CHECK_CONTAINS(err, ".csv:2: 4 lines that start with '#' and have as many fields as the header "
                        "were skipped as comments; a cell that starts with '#' is read as data "
                        "when quoted (\"#1\")\n");
    CHECK(out && !strstr(out, "\"#1\""));
    free(out);
    free(err);
    snprintf(buf, sizeof buf, "fit --group g --json 'a*x+b' '%s'",
             tmp(".csv", "g,x,y\n\"#1\",0,1\n\"#1\",1,3\n\"#1\",2,5\n\"#1\",3,7.1\n2,0,2\n2,1,4\n"
                         "2,2,6.2\n2,3,8\n"));
    CHECK(jf(buf, &out, &err) == 0);
    CHECK_CONTAINS(out, "\"group\": \"#1\"");
    CHECK(err && !strstr(err, "note:"));
    free(out);
    free(err);
    /* a remark above the header or among the rows, with another number of fields: no note */
    snprintf(buf, sizeof buf, "fit 'a*x+b' '%s'",
             tmp(".csv", "# by hand\nx,y\n# units: s\n0,1\n1,3\n# a, b, c\n2,5\n3,7\n"));
    CHECK(jf(buf, &out, &err) == 0);
    CHECK(err && !strstr(err, "note:"));
    free(out);
    free(err);
    /* one row: the singular, and the line of the first */
    snprintf(buf, sizeof buf, "fit 'a*x+b' '%s'", tmp(".csv", "x,y\n0,1\n1,3\n#2,5\n3,7\n4,9\n"));
    CHECK(jf(buf, &out, &err) == 0);
    CHECK_CONTAINS(err, ".csv:4: 1 line that starts with '#' and has as many fields as the header "
                        "was skipped as a comment;");
    free(out);
    free(err);
}

int main(void) {
    test_hash_rows();
    test_group_column();
    test_output_labels();
    test_stdin_once();
    test_long_param();
    test_no_variable();
    test_text_formats();
    test_npy();
    test_nan_policy();
    test_data_errors();
    test_output();
    test_plot();
    test_job_errors();
    test_batch_same_error();
    test_json_utf8();
    test_missing_model_file();
    test_job_checks();
    test_cells_and_outputs();
    test_job_model_dir();
    test_job_json_key();
    test_job_unset();
    test_no_clobber();
    test_job_run();
    test_verbose_and_batch();
    test_batch_report();
    test_batch_consistency();
    test_output_complete();
    test_help();
    test_vector_math();
    for (size_t i = 0; i < ntmp; i++) {
        unlink(tmp_paths[i]);
        free(tmp_paths[i]);
    }
    return jf_test_finish();
}
