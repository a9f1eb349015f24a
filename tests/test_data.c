/* Unit tests of the data file reader (cli/data.c): good files in every accepted layout, the
 * decimal parser (fast_float) against strtod bit for bit, threaded reads against one thread, and
 * every malformed input with its exact "file:line: column N ('name'): ..." message.
 *
 * The reader belongs to the jitfit executable, not to the library these tests link, so its
 * source (and the CLI helpers it calls) are compiled into this test directly.
 */
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* long bodies and files from 64 KiB, so that the threaded reads run on small files too */
#define SLURP_PARALLEL_MIN ((size_t)64 << 10)
#define PARALLEL_MIN_BYTES ((size_t)64 << 10)
#include "cli/data.c"
#include "cli/npy.c"
#include "cli/output.c"
#include "cli/util.c"
#include "tests/testlib.h"

/* Temporary files created by the tests, removed at the end. */
static char *tmp_paths[128];
static size_t ntmp;

static const char *tmp(const char *text) {
    char *p = jf_test_tmpfile(".csv", text);
    /* full slots fail here, not as leaks in the sanitizer build only */
    if (p && CHECK(ntmp < sizeof tmp_paths / sizeof tmp_paths[0])) tmp_paths[ntmp++] = p;
    return p;
}

/* Reads text as a data file and the columns names[0..n); returns the status and the table or
 * the message (with the temporary path replaced by "F"). */
static int read_text(const char *text, const char *const *names, size_t n, jf_table *t,
                     char *msgbuf, size_t msgcap) {
    const char *path = tmp(text);
    jf_datafile *f = NULL;
    char *err = NULL;
    msgbuf[0] = '\0';
    memset(t, 0, sizeof *t);
    if (!path) return -1;
    int rc = jf_datafile_open(path, &f, &err);
    if (rc == 0) rc = jf_datafile_read(f, names, n, t, &err);
    if (err) {
        size_t pl = strlen(path);
        if (strncmp(err, path, pl) == 0) snprintf(msgbuf, msgcap, "F%s", err + pl);
        else snprintf(msgbuf, msgcap, "%s", err);
    }
    free(err);
    jf_datafile_free(f);
    return rc;
}

static const char *const XY[] = {"x", "y"};

static void test_layouts(void) {
    jf_table t;
    char m[512];
    /* CSV */
    CHECK(read_text("x,y\n1,2\n3,4.5\n", XY, 2, &t, m, sizeof m) == 0);
    CHECK(t.nrows == 2 && t.ncols == 2);
    CHECK(t.values[0] == 1 && t.values[1] == 3);
    CHECK(t.values[t.ld] == 2 && t.values[t.ld + 1] == 4.5);
    CHECK(jf_table_line(&t, 0) == 2 && jf_table_line(&t, 1) == 3);
    jf_table_free(&t);
    /* whitespace: runs of spaces and tabs, leading and trailing blanks */
    CHECK(read_text("  x   y  \n 1   2\n3\t \t4  \n", XY, 2, &t, m, sizeof m) == 0);
    CHECK(t.nrows == 2 && t.values[1] == 3 && t.values[t.ld + 1] == 4);
    jf_table_free(&t);
    /* tab-separated, spaces around fields trimmed */
    CHECK(read_text("x\ty\n1\t 2 \n3\t4\n", XY, 2, &t, m, sizeof m) == 0);
    CHECK(t.nrows == 2 && t.values[t.ld] == 2);
    jf_table_free(&t);
    /* comments, blank lines, CRLF, no final newline; line numbers of rows survive gaps */
    CHECK(read_text("# generated\r\n\r\nx,y\r\n1,2\r\n# mid\r\n   \r\n3,4\r\n5,6", XY, 2, &t, m,
                    sizeof m) == 0);
    CHECK(t.nrows == 3);
    CHECK(jf_table_line(&t, 0) == 4);
    CHECK(jf_table_line(&t, 1) == 7);
    CHECK(jf_table_line(&t, 2) == 8);
    CHECK(t.values[2] == 5 && t.values[t.ld + 2] == 6);
    jf_table_free(&t);
    /* lines ended by lone CRs (classic Mac OS) are lines, numbered as such */
    CHECK(read_text("# old Mac\rx,y\r1,2\r\r3,4\r", XY, 2, &t, m, sizeof m) == 0);
    CHECK(t.nrows == 2 && t.values[1] == 3 && t.values[t.ld + 1] == 4);
    CHECK(jf_table_line(&t, 0) == 3 && jf_table_line(&t, 1) == 5);
    jf_table_free(&t);
    CHECK(read_text("x,y\r1,2\r3,z\r", XY, 2, &t, m, sizeof m) == JF_ERR_DATA);
    CHECK_STREQ(m, "F:3: column 2 ('y'): 'z' is not a number");
    /* UTF-8 byte-order mark, quoted header names, spaces around CSV fields */
    CHECK(read_text("\xEF\xBB\xBF\"x\" , \"y\"\n 1 , 2 \n", XY, 2, &t, m, sizeof m) == 0);
    CHECK(t.nrows == 1 && t.values[0] == 1 && t.values[t.ld] == 2);
    jf_table_free(&t);
    /* columns asked in another order, twice, and an unused text column */
    const char *const yxx[] = {"y", "x", "x"};
    CHECK(read_text("name,x,y\nfoo,1,2\nbar,3,4\n", yxx, 3, &t, m, sizeof m) == 0);
    CHECK(t.nrows == 2 && t.ncols == 3);
    CHECK(t.values[0] == 2 && t.values[1] == 4);
    CHECK(t.values[t.ld] == 1 && t.values[t.ld + 1] == 3);
    CHECK(t.values[2 * t.ld] == 1 && t.values[2 * t.ld + 1] == 3);
    CHECK(t.file_col[0] == 2 && t.file_col[1] == 1);
    jf_table_free(&t);
    /* nan in an unused column is not the model's business */
    CHECK(read_text("x,y,z\n1,2,nan\n", XY, 2, &t, m, sizeof m) == 0);
    jf_table_free(&t);
    /* a quote inside a bare field is text (12" pipe), as in RFC 4180: it opens no quoted
     * field that would run over the following lines */
    CHECK(read_text("x,y,note\n1,2,12\" pipe\n3,4,6\" pipe\n5,6,\"q\"\n", XY, 2, &t, m,
                    sizeof m) == 0);
    CHECK(t.nrows == 3 && t.values[2] == 5 && jf_table_line(&t, 2) == 4);
    jf_table_free(&t);
    /* a quoted header name with a line break: the rows' line numbers count it, and the comma
     * that makes the file CSV may come after it */
    static const char *const multi[] = {"x", "y\n(mm)"}, *const multi2[] = {"x\n(s)", "y"};
    CHECK(read_text("x,\"y\n(mm)\"\n1,2\n3,abc\n", multi, 2, &t, m, sizeof m) == JF_ERR_DATA);
    CHECK_STREQ(m, "F:4: column 2 ('y?(mm)'): 'abc' is not a number");
    CHECK(read_text("\"x\n(s)\",y\n1,2\n3,4\n", multi2, 2, &t, m, sizeof m) == 0);
    CHECK(t.nrows == 2 && t.values[1] == 3 && t.values[t.ld + 1] == 4);
    CHECK(jf_table_line(&t, 0) == 3 && jf_table_line(&t, 1) == 4);
    jf_table_free(&t);
    /* a single column */
    const char *const y[] = {"y"};
    CHECK(read_text("y\n1\n2\n", y, 1, &t, m, sizeof m) == 0);
    CHECK(t.nrows == 2 && t.values[1] == 2);
    jf_table_free(&t);
}

/* A decimal cell must give the very double strtod gives (correct rounding), and everything
 * else go to the general parser. */
static void test_numbers(void) {
    static const char *const cases[] = {
        "0", "-0", "1", "+1", "0.1", "-0.1", ".5", "5.", "1e5", "1E-5", "1e+22", "1e22",
        "1e23", "1e-22", "1e-23", "123456789012345678", "1234567890123456789",
        "12345678901234567890", "9007199254740992", "9007199254740993", "9007199254740995",
        "0.30000000000000004", "3.141592653589793", "2.718281828459045", "1.7976931348623157e308",
        "4.9406564584124654e-324", "2.2250738585072014e-308", "0.000123", "1e0022",
        "00001.2500", "0x1p-3", "-0x1.8p1", "6.02214076e23", "1.5e-10", "-273.15",
        "123.456e-2", "0.1234567890123456789", "98765.4321"};
    locale_t c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *s = cases[i];
        locale_t prev = uselocale(c);
        double got = -42, want = strtod(s, NULL);
        uselocale(prev);
        int ok = parse_cell(s, s + strlen(s), &got) == 0 &&
                 memcmp(&got, &want, sizeof got) == 0;
        if (!CHECK(ok)) fprintf(stderr, "  '%s': got %.17g, want %.17g\n", s, got, want);
    }
    /* random decimals: up to 25 digits, the point anywhere, exponents past both ends of the
     * doubles' range (fast_float's slow paths: long mantissas, subnormals, halfway cases) */
    uint64_t st = 0x9e3779b97f4a7c15u;
    int same = 1;
    for (int i = 0; i < 20000 && same; i++) {
        char buf[64];
        size_t k = 0;
        st = st * 6364136223846793005u + 1442695040888963407u;
        uint64_t r = st >> 11;
        if (r & 1) buf[k++] = '-';
        int nd = 1 + (int)((r >> 1) % 25), dot = (int)((r >> 6) % (uint64_t)(nd + 1));
        for (int d = 0; d < nd; d++) {
            if (d == dot) buf[k++] = '.';
            st = st * 6364136223846793005u + 1442695040888963407u;
            buf[k++] = (char)('0' + (st >> 33) % 10);
        }
        if ((r >> 11) & 1)
            k += (size_t)snprintf(buf + k, sizeof buf - k, "e%d", (int)((r >> 12) % 661) - 340);
        buf[k] = '\0';
        locale_t prev = uselocale(c);
        char *end;
        double got = -42, want = strtod(buf, &end);
        uselocale(prev);
        if (!isfinite(want)) continue; /* beyond the largest double: the general parser's */
        same = parse_cell(buf, buf + k, &got) == 0 && memcmp(&got, &want, sizeof got) == 0;
        if (!CHECK(same)) fprintf(stderr, "  '%s': got %.17g, want %.17g\n", buf, got, want);
    }
    freelocale(c);
    static const char *const bad[] = {"", "-", "+", ".", "e5", "1e", "1e+", "1..2", "1.2.3",
                                      "abc", "1,5", "1 2", "--1", "0x", "1e5x", "\"\""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        double v;
        if (!CHECK(parse_cell(bad[i], bad[i] + strlen(bad[i]), &v) != 0))
            fprintf(stderr, "  '%s' parsed as %g\n", bad[i], v);
    }
    double v = 0;
    static const char c_quoted[] = "\"2.5\"", c_inf[] = "inf", c_nan[] = "nan", c_nul[] = "1\0" "5";
    CHECK(parse_cell(c_quoted, c_quoted + 5, &v) == 0 && v == 2.5);
    CHECK(parse_cell(c_inf, c_inf + 3, &v) == 0 && isinf(v));
    CHECK(parse_cell(c_nan, c_nan + 3, &v) == 0 && isnan(v));
    /* A cell with a NUL byte inside is not a number, whatever precedes the NUL. */
    CHECK(parse_cell(c_nul, c_nul + 3, &v) != 0);
}

/* Each malformed input gives exactly this message ("F" stands for the file name). */
static void test_errors(void) {
    static const struct {
        const char *text;    /* file content */
        const char *message; /* expected message */
    } cases[] = {
        {"t,y\n1,2\n", "F: no column 'x' (columns: t, y)"},
        /* European CSV: ';' between fields, ',' as the decimal point */
        {"x;y\n0,5;1,25\n", "F: no column 'x' (columns: x;y); the fields seem separated by ';': "
                           "jitfit reads comma-, tab- or space-separated tables with '.' as the "
                           "decimal point, convert the file to one of those"},
        /* ... without a header: '1,5;2' reads as columns '1' and '5;2', and the hint to name
         * the columns of a numeric header with --columns would not help */
        {"1,5;2\n2,5;3\n", "F: no column 'x' (columns: 1, 5;2); the fields seem separated by "
                           "';': jitfit reads comma-, tab- or space-separated tables with '.' as "
                           "the decimal point, convert the file to one of those"},
        {"x,y,z\n1,2,3\n2,3,4\n3,4,5\n4,abc,6\n", "F:5: column 2 ('y'): 'abc' is not a number"},
        {"x,y,z\n1,2,3\n2,3,4\n3,4,5\n4,5,6\n5,6,7\n6,7\n", "F:7: expected 3 fields, found 2"},
        {"x,y\n1,2,3\n", "F:2: expected 2 fields, found 3"},
        {"x y\n1 2\n3\n", "F:3: expected 2 fields, found 1"},
        {"x,y\n1,2\n1,2,\n", "F:3: expected 2 fields, found 3"},
        {"", "F: no data rows"},
        {"\n\n  \n", "F: no data rows"},
        {"# only a comment\n", "F: no data rows"},
        {"x,y\n", "F: no data rows"},
        {"x,y\n# nothing\n\n", "F: no data rows"},
        {"x,y\n1,2\n2,3\n3,4\n4,5\n5,6\n6,7\n7,8\nnan,9\n",
         "F:9: column 1 ('x'): value is not finite"},
        {"x,y\n1,inf\n", "F:2: column 2 ('y'): value is not finite"},
        {"x,y\n1,-Inf\n", "F:2: column 2 ('y'): value is not finite"},
        {"x,y\n1,1e999\n", "F:2: column 2 ('y'): value is not finite"},
        {"x,y\n1,\n", "F:2: column 2 ('y'): missing value"},
        {"x,y\n,1\n", "F:2: column 1 ('x'): missing value"},
        {"x,y\n1,2\r\n3,4x\r\n", "F:3: column 2 ('y'): '4x' is not a number"},
        {"x,y\n1,1,5\n", "F:2: expected 2 fields, found 3"},
        /* a stray quote in a bare cell is that cell's error, not a record over three lines */
        {"x,y\n1,2\"\n3,4\n5,6\"\n", "F:2: column 2 ('y'): '2\"' is not a number"},
        {"x,y\n1,12345678901234567890123456789012345678901234567890z\n",
         "F:2: column 2 ('y'): '1234567890123456789012345678901234567890...' is not a number"},
        {"1,2\n3,4\n", "F:1: expected a header row of column names, found numbers"},
        {"# x y\n1 2\n", "F:2: expected a header row of column names, found numbers"},
        {"x,y,x\n1,2,3\n", "F:1: column 'x' appears twice in the header (columns 1 and 3)"},
        {"x\ty\n1,5\t2\n", "F:2: column 1 ('x'): '1,5' is not a number"},
        {"a,x,y\n1,2,3\n1,2\n", "F:3: expected 3 fields, found 2"},
        /* A cell's control bytes (a terminal's escape sequence) are not echoed raw. */
        {"x,y\n1,\x1b[2J\x07z\n", "F:2: column 2 ('y'): '?[2J?z' is not a number"},
        /* C1 controls too, in UTF-8 or as bare bytes; other UTF-8 is kept */
        {"x,y\n1,\xc2\x9b" "2J\x9b" "2J\xe2\x82\xacz\n",
         "F:2: column 2 ('y'): '??2J?2J\xe2\x82\xacz' is not a number"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        jf_table t;
        char m[512];
        int rc = read_text(cases[i].text, XY, 2, &t, m, sizeof m);
        if (!CHECK(rc == JF_ERR_DATA)) fprintf(stderr, "  case %zu: rc %d\n", i, rc);
        if (!CHECK_STREQ(m, cases[i].message)) fprintf(stderr, "  case %zu\n", i);
        CHECK(t.values == NULL && t.nrows == 0);
    }
    /* I/O errors name the file and the reason. */
    jf_datafile *f = NULL;
    char *err = NULL;
    CHECK(jf_datafile_open("/nonexistent/data.csv", &f, &err) == JF_ERR_IO);
    CHECK(f == NULL);
    CHECK_STREQ(err, "/nonexistent/data.csv: No such file or directory");
    free(err);
    CHECK(jf_datafile_open("/", &f, &err) == JF_ERR_IO);
    CHECK_STREQ(err, "/: Is a directory");
    free(err);
}

/* A larger file: many rows, the column block allocated once, runs of rows kept sparse. */
static void test_many_rows(void) {
    size_t n = 100000;
    char *text = malloc(n * 40 + 64);
    if (!CHECK(text != NULL)) return;
    char *p = text;
    p += sprintf(p, "# big\nx,y\n");
    for (size_t i = 0; i < n; i++) {
        if (i == n / 2) p += sprintf(p, "# halfway\n");
        p += sprintf(p, "%zu,%.15g\n", i, 0.5 * (double)i + 0.125);
    }
    jf_table t;
    char m[512];
    CHECK(read_text(text, XY, 2, &t, m, sizeof m) == 0);
    free(text);
    CHECK(t.nrows == n);
    CHECK(t.nruns == 2);
    CHECK(jf_table_line(&t, 0) == 3);
    CHECK(jf_table_line(&t, n / 2 - 1) == 3 + n / 2 - 1);
    CHECK(jf_table_line(&t, n / 2) == 3 + n / 2 + 1);
    CHECK(jf_table_line(&t, n - 1) == 3 + n);
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        ok &= t.values[i] == (double)i && t.values[t.ld + i] == 0.5 * (double)i + 0.125;
    CHECK(ok);
    jf_table_free(&t);
}

/* jf_cli_format_double of a finite v before it derived the 15 and 16 digit candidates from
 * one format: the reference its text must equal. */
static void format_double_ref(char *buf, size_t n, double v) {
    locale_t prev = uselocale(c_locale());
    snprintf(buf, n, "%.15g", v);
    if (strtod(buf, NULL) != v) {
        snprintf(buf, n, "%.16g", v);
        if (strtod(buf, NULL) != v) snprintf(buf, n, "%.17g", v);
    }
    uselocale(prev);
}

/* The shortest round-trip text of --output and the JSON: the same bytes as three formats and
 * three strtods, for random bit patterns (17 digits mostly), short decimals, integers, the
 * bounds of the fixed and exponent forms, subnormals and the largest doubles; including the
 * numbers whose 17 digits end in a bare half beyond the 15th or 16th (glibc formats those). */
static void test_format_double(void) {
    static const double fixed[] = {0.0, -0.0, 1.0, -1.0, 0.1, 0.5, 1e-4, 9.9999999999999995e-5,
                                   1e-5, 1e14, 1e15, 1e16, 1e17, 123456789012345678.0,
                                   999999999999999.9, 9999999999999998.0, 0.30000000000000004,
                                   1.7976931348623157e308, 2.2250738585072014e-308,
                                   4.9406564584124654e-324, 1e300, 1e-300, 5e-324, 1e100,
                                   9.999999999999999e22, 1e23, 0.1 + 0.2, 2.0 / 3.0};
    char a[64], b[64];
    int same = 1;
    size_t halves = 0;
    uint64_t st = 0x2545f4914f6cdd1du;
    for (size_t i = 0; i < 300000 && same; i++) {
        double v;
        st ^= st << 13;
        st ^= st >> 7;
        st ^= st << 17;
        if (i < sizeof fixed / sizeof fixed[0]) v = fixed[i];
        else if (i % 3 == 0) memcpy(&v, &st, sizeof v);           /* any bits */
        else if (i % 3 == 1) v = (double)(int64_t)(st >> 20) * 1e-6; /* short decimals */
        else v = (double)(st % 100000) * pow(10.0, (double)((int)(st >> 40) % 40 - 20));
        if (!isfinite(v)) continue;
        format_double_ref(a, sizeof a, v);
        jf_cli_format_double(b, sizeof b, v);
        same = strcmp(a, b) == 0;
        if (!CHECK(same)) fprintf(stderr, "  %a: '%s', reference '%s'\n", v, b, a);
        char e[40];
        snprintf(e, sizeof e, "%.16e", fabs(v));
        halves += (e[16] == '5' && e[17] == '0') || e[17] == '5'; /* 16th, 17th digits */
    }
    CHECK(halves > 1000); /* the fallback to glibc ran */
    /* JSON strings: runs written whole, escapes between them, bytes that are not UTF-8 */
    char *js = NULL;
    size_t jn = 0;
    FILE *mf = open_memstream(&js, &jn);
    if (CHECK(mf != NULL)) {
        jf_cli_json_string(mf, "plain");
        jf_cli_json_string(mf, "a\"b\\c\nd\te\x01" "f\x7f g\xc3\xa9h\xff");
        jf_cli_json_string(mf, "");
        jf_cli_json_string(mf, "\"");
        fclose(mf);
        CHECK_STREQ(js, "\"plain\"\"a\\\"b\\\\c\\nd\\te\\u0001f\x7f g\xc3\xa9h\\ufffd\"\"\"\"\\\"\"");
    }
    free(js);
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) { /* and reads back */
        jf_cli_format_double(b, sizeof b, fixed[i]);
        double back = strtod(b, NULL);
        CHECK(memcmp(&back, &fixed[i], sizeof back) == 0);
    }
}

/* Reads path's columns names[0..n) on `threads` threads; the status and the table or the
 * message. */
static int read_threads(const char *path, int threads, const char *const *names, size_t n,
                        jf_table *t, size_t *hash_rows, size_t *hash_line, char **err) {
    jf_datafile *f = NULL;
    *err = NULL;
    memset(t, 0, sizeof *t);
    int rc = jf_datafile_open(path, &f, err);
    if (rc == 0) {
        f->threads = threads;
        rc = jf_datafile_read(f, names, n, t, err);
        *hash_rows = f->hash_rows;
        *hash_line = f->hash_line;
    }
    jf_datafile_free(f);
    return rc;
}

/* A file read in pieces on threads is the file read in one loop, with the same scan of its
 * bytes: quotes anywhere, lone CRs turned into line ends, the lines that bound the rows. */
static void check_open_threads(const char *text) {
    const char *path = tmp(text);
    jf_datafile *f[2] = {NULL, NULL};
    for (int k = 0; k < 2 && path; k++) {
        jf_dataopts o;
        memset(&o, 0, sizeof o);
        o.threads = k ? 3 : 1;
        char *err = NULL;
        CHECK(jf_datafile_open_ex(path, &o, &f[k], &err) == 0);
        free(err);
    }
    if (f[0] && f[1]) {
        CHECK(f[0]->len == f[1]->len && memcmp(f[0]->text, f[1]->text, f[0]->len + 1) == 0);
        CHECK(f[0]->max_rows == f[1]->max_rows && f[0]->quoted == f[1]->quoted);
        CHECK(f[0]->body == f[1]->body && f[0]->body_line == f[1]->body_line);
    }
    jf_datafile_free(f[0]);
    jf_datafile_free(f[1]);
}

/* A body long enough for several threads (over PARALLEL_MIN_BYTES) reads as on one: the same
 * numbers, row lines (runs), comment-like rows and first error, wherever the spans' ends fall
 * among blank lines, comments, CRLF and a last line without a newline. */
static void test_parallel_read(void) {
    size_t n = 120000;
    char *text = malloc(n * 48 + 256);
    if (!CHECK(text != NULL)) return;
    char *p = text;
    p += sprintf(p, "x,y,w\n");
    uint64_t st = 12345;
    for (size_t i = 0; i < n; i++) {
        st = st * 6364136223846793005u + 1442695040888963407u;
        unsigned r = (unsigned)(st >> 40);
        if (r % 97 == 0) p += sprintf(p, "\n");
        if (r % 89 == 0) p += sprintf(p, "# note %zu\n", i);
        if (r % 1009 == 0) p += sprintf(p, "#%zu,1,2\n", i); /* a comment that looks like a row */
        p += sprintf(p, "%zu,%.17g,%u%s", i, (double)r * 1e-7, r % 7, r % 5 ? "\n" : "\r\n");
    }
    p += sprintf(p, "%zu,0.5,1", n); /* no newline at the end */
    check_open_threads(text);
    const char *path = tmp(text);
    static const char *const names[] = {"y", "x", "y"}; /* y twice: copied, not parsed again */
    jf_table t1, tk;
    size_t h1 = 0, l1 = 0, hk = 0, lk = 0;
    char *e1 = NULL, *ek = NULL;
    if (path && CHECK(read_threads(path, 1, names, 3, &t1, &h1, &l1, &e1) == 0)) {
        CHECK(t1.nrows == n + 1 && h1 > 0 && t1.nruns > 100);
        for (int threads = 2; threads <= 7; threads += 5) {
            if (!CHECK(read_threads(path, threads, names, 3, &tk, &hk, &lk, &ek) == 0)) break;
            CHECK(tk.nrows == t1.nrows && hk == h1 && lk == l1);
            int same = 1;
            for (size_t c = 0; c < 3; c++)
                same &= memcmp(t1.values + c * t1.ld, tk.values + c * tk.ld,
                               t1.nrows * sizeof(double)) == 0;
            CHECK(same);
            if (CHECK(tk.nruns == t1.nruns))
                CHECK(memcmp(t1.runs, tk.runs, t1.nruns * sizeof *t1.runs) == 0);
            jf_table_free(&tk);
        }
        jf_table_free(&t1);
    }
    free(e1);
    free(ek);
    /* a quote in the last piece only; the lines ended by lone CRs (classic Mac OS) */
    size_t len = strlen(text);
    char *other = malloc(len + 32);
    if (CHECK(other != NULL)) {
        memcpy(other, text, len);
        memcpy(other + len, "\n# \"q\"\n", 8);
        other[len + 8] = '\0';
        check_open_threads(other);
        for (size_t i = 0; i < len; i++) other[i] = text[i] == '\n' ? '\r' : text[i];
        other[len] = '\0';
        check_open_threads(other);
        free(other);
    }
    /* gzip: the bytes scanned while reading are not the text; the text's own scan counts */
    const char *gz = tmp("");
    gzFile z = gz ? gzopen(gz, "wb") : NULL;
    if (CHECK(z != NULL)) {
        CHECK(gzwrite(z, text, (unsigned)len) == (int)len);
        gzclose(z);
        jf_dataopts o;
        memset(&o, 0, sizeof o);
        o.threads = 3;
        jf_datafile *f = NULL;
        char *err = NULL;
        struct stat zs;
        CHECK(stat(gz, &zs) == 0 && (size_t)zs.st_size >= SLURP_PARALLEL_MIN); /* read in pieces */
        if (CHECK(jf_datafile_open_ex(gz, &o, &f, &err) == 0)) {
            CHECK(f->gzipped && f->len == len && !f->quoted);
            CHECK(f->max_rows >= n + 1 && f->max_rows <= n + 1 + len / 20);
            jf_table t;
            if (CHECK(jf_datafile_read(f, names, 3, &t, &err) == 0)) CHECK(t.nrows == n + 1);
            jf_table_free(&t);
        }
        free(err);
        jf_datafile_free(f);
    }
    /* errors: the first in the file, whichever span finds it, and a later one alone */
    char *bad_early = strstr(text + strlen(text) / 5, "\n");
    char *bad_late = strstr(text + strlen(text) / 5 * 4, "\n");
    if (CHECK(bad_early && bad_late)) {
        bad_late[1] = 'z'; /* the row's x: "z234,..." */
        for (int pass = 0; pass < 2; pass++) {
            if (pass == 1) memcpy(bad_early + 1, "1,2\n", 4); /* a short row, earlier */
            const char *bp = tmp(text);
            char *m1 = NULL, *mk = NULL;
            int r1 = bp ? read_threads(bp, 1, names, 3, &t1, &h1, &l1, &m1) : 0;
            int rk = bp ? read_threads(bp, 3, names, 3, &tk, &hk, &lk, &mk) : 0;
            CHECK(r1 == JF_ERR_DATA && rk == JF_ERR_DATA);
            if (CHECK(m1 && mk)) {
                CHECK_STREQ(mk, m1);
                CHECK(strstr(m1, pass ? "expected 3 fields, found 2" : "is not a number") != NULL);
            }
            free(m1);
            free(mk);
        }
    }
    free(text);
}

/* jf_text_printable (the messages' filter) reads only the n bytes it is given: a buffer
 * without a NUL after them, ending in the first bytes of a UTF-8 sequence, is judged byte by
 * byte there (ASan sees a read past it); sequences inside keep their rules. */
static void test_printable_bounds(void) {
    static const struct {
        const char *in, *out;
    } cases[] = {{"\xe2\x82", "\xe2?"}, {"a\xf0\x9f\x98", "a\xf0??"}, {"\xc3\xa9", "\xc3\xa9"},
                 {"\xc2\x9b", "??"}, {"\x1b\xe2\x82\xac", "?\xe2\x82\xac"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = strlen(cases[i].in);
        char *b = malloc(n); /* exactly n bytes, no NUL */
        if (!CHECK(b != NULL)) return;
        memcpy(b, cases[i].in, n);
        jf_text_printable(b, n, 0);
        if (!CHECK(memcmp(b, cases[i].out, n) == 0)) fprintf(stderr, "  printable case %zu\n", i);
        free(b);
    }
}

/* --output's CSV reads back as it was written: every group label and column name survives
 * this reader, whatever blanks, separators, quotes, line breaks or '#' it holds (a label "A "
 * was written bare and read back as "A": another group). The empty text and NA (which a group
 * column then treats as missing, written or read) come back as themselves too. */
static void test_output_round_trip(void) {
    static const char *const labels[] = {
        " A", "A ", "\tB", "B\t", "C\tD", " ", "x,y", "say \"hi\"", "\"", "#1", "# 2", "a#",
        "line\nbreak", "cr\r", "\r\n", "\xEF\xBB\xBF" "bom", "plain", "1.0", "", "NA", "#N/A",
        "nan", "-"};
    enum { N = sizeof labels / sizeof labels[0] };
    static const char *const names[] = {" x", "y "};
    static const char *const groups[] = {"g", " g", "g\t", "#g", "\xEF\xBB\xBF" "g", "g,h"};
    double cols[2 * N], fit[N], se[N];
    for (size_t i = 0; i < N; i++) {
        cols[i] = (double)i;
        cols[N + i] = 2.0 * (double)i + 1;
        fit[i] = cols[N + i];
        se[i] = 0.5;
    }
    for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++) {
        /* the group column comes first: a '#' label starts its row */
        const char *path = tmp("");
        char *err = NULL;
        if (!CHECK(path && jf_output_csv(path, groups[gi], (char *const *)labels, names, 2, cols,
                                         N, N, 1, fit, se, 1, &err) == 0)) {
            free(err);
            continue;
        }
        jf_datafile *f = NULL;
        char **got = NULL;
        size_t n = 0;
        int rc = jf_datafile_open(path, &f, &err);
        if (rc == 0) rc = jf_datafile_read_text(f, groups[gi], &got, &n, &err);
        if (!CHECK(rc == 0 && n == N)) fprintf(stderr, "  group '%s': %s\n", groups[gi], err);
        for (size_t i = 0; i < n && i < N; i++)
            if (!CHECK_STREQ(got[i], labels[i])) fprintf(stderr, "  label %zu\n", i);
        if (f && CHECK(f->ncols == 6)) {
            CHECK_STREQ(f->names[0], groups[gi]);
            CHECK_STREQ(f->names[1], " x");
            CHECK_STREQ(f->names[2], "y ");
        }
        /* the numbers are still where they were */
        static const char *const xy[] = {" x", "y "};
        jf_table t;
        memset(&t, 0, sizeof t);
        if (f && CHECK(jf_datafile_read(f, xy, 2, &t, &err) == 0) && CHECK(t.nrows == N))
            CHECK(t.values[N - 1] == N - 1 && t.values[t.ld + N - 1] == 2.0 * (N - 1) + 1);
        jf_table_free(&t);
        jf_strings_free(got, n);
        jf_datafile_free(f);
        free(err);
    }
}

/* A text column reads as written: quotes in a bare field are its text, doubled or not; only a
 * quoted field's "" is one quote. */
static void test_labels_as_written(void) {
    const char *path = tmp("g,x\na\"\"b,1\n\"a\"\"b\",2\n12\" pipe,3\n \"q\" ,4\n");
    jf_datafile *f = NULL;
    char **got = NULL, *err = NULL;
    size_t n = 0;
    int rc = path ? jf_datafile_open(path, &f, &err) : -1;
    if (rc == 0) rc = jf_datafile_read_text(f, "g", &got, &n, &err);
    if (CHECK(rc == 0 && n == 4)) {
        CHECK_STREQ(got[0], "a\"\"b");
        CHECK_STREQ(got[1], "a\"b");
        CHECK_STREQ(got[2], "12\" pipe");
        CHECK_STREQ(got[3], "q");
    }
    jf_strings_free(got, n);
    jf_datafile_free(f);
    free(err);
}

int main(void) {
    test_output_round_trip();
    test_labels_as_written();
    test_layouts();
    test_numbers();
    test_errors();
    test_printable_bounds();
    test_many_rows();
    test_parallel_read();
    test_format_double();
    for (size_t i = 0; i < ntmp; i++) {
        unlink(tmp_paths[i]);
        free(tmp_paths[i]);
    }
    return jf_test_finish();
}
