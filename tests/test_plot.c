/* Tests of the plots (cli/plot.c): neighbouring ticks must read differently however large the
 * values are next to their spacing (Unix times, wavelengths in metres), and the legend must not
 * hide data (the PNG of `jitfit fit --plot` is read back), and dense data must not make a huge
 * SVG.
 *
 * The plotter belongs to the jitfit executable, not to the library these tests link, so its
 * source (and the CLI helpers it calls) are compiled into this test directly.
 */
#include <cairo.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/plot.c"
#include "cli/cairo_api.c" /* after plot.c: its calls, and this test's, go through the pointers */
#include "cli/util.c"
#include "tests/testlib.h"
#ifndef cairo_create /* cairo_api.c first would leave plot.c calling cairo directly, untested */
#error "include cli/plot.c before cli/cairo_api.c: cairo's calls must go through the pointers"
#endif

/* The labels of ticks lo, lo + step, ... up to hi are pairwise different and each reads back as
 * its tick to within a thousandth of the step. */
static void distinct_labels(double lo, double hi, double step) {
    char prev[64] = "", buf[64];
    for (double v = lo; v <= hi + step * 1e-9; v += step) {
        tick_label(buf, sizeof buf, v, step);
        if (!CHECK(strcmp(buf, prev) != 0)) fprintf(stderr, "  tick %.17g: '%s' repeated\n", v, buf);
        if (!CHECK(fabs(strtod(buf, NULL) - v) <= step * 1e-3))
            fprintf(stderr, "  tick %.17g: label '%s'\n", v, buf);
        strcpy(prev, buf);
    }
}

static void test_tick_labels(void) {
    distinct_labels(1.7e9, 1.7e9 + 3500, 500);   /* Unix times over an hour */
    distinct_labels(1.7e9, 1.7e9 + 10, 2);       /* ... over ten seconds */
    distinct_labels(4e-7, 7e-7, 5e-8);           /* wavelengths in metres */
    distinct_labels(1.000001, 1.000002, 2e-7);   /* a small relative change */
    distinct_labels(-3e-14, 3e-14, 1e-14);       /* tiny residuals around zero */
    /* The ordinary labels are %g's. */
    char buf[64];
    tick_label(buf, sizeof buf, 0.30000000000000004, 0.1);
    CHECK_STREQ(buf, "0.3");
    tick_label(buf, sizeof buf, 1e-17, 0.5);
    CHECK_STREQ(buf, "0");
    tick_label(buf, sizeof buf, 2.5e-12, 5e-13);
    CHECK_STREQ(buf, "2.5e-12");
    tick_label(buf, sizeof buf, 1.7e9, 500);
    CHECK_STREQ(buf, "1.7e+09");
}

/* Fits model (a formula or a model file's path) to data_text with --plot into a PNG and returns
 * the image (destroy it), or NULL after a failed check; the temporary files are removed. */
static cairo_surface_t *plot_png(const char *model, const char *data_text) {
    char *data = jf_test_tmpfile(".csv", data_text), *png = jf_test_tmpfile(".png", "");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' fit --plot '%s' '%s' '%s'", jf_test_cli(), png, model, data);
    CHECK(jf_test_run(cmd, NULL, NULL) == 0);
    cairo_surface_t *s = cairo_image_surface_create_from_png(png);
    if (!CHECK(cairo_surface_status(s) == CAIRO_STATUS_SUCCESS)) {
        cairo_surface_destroy(s);
        s = NULL;
    }
    remove(data);
    remove(png);
    free(data);
    free(png);
    return s;
}

/* A rising line ends in the top right corner, where the legend used to be drawn over it: the
 * last data point (x = 10, y = 10) must still show. */
static void test_legend(void) {
    cairo_surface_t *s =
        plot_png("a*x+b", "x,y\n0,0\n1,1\n2,2\n3,3\n4,4\n5,5\n6,6\n7,7\n8,8\n9,9\n10,10\n");
    if (s) {
        /* Layout of draw_1d: panel x 90..870 over x -0.3..10.3, top panel y 60..60+551*0.72
         * over y -0.6..10.6. */
        double ph = (680 - 60 - 55 - 14) * 0.72;
        int X = (int)(90 + 10.3 / 10.6 * 780), Y = (int)(60 + ph - 10.6 / 11.2 * ph);
        int stride = cairo_image_surface_get_stride(s);
        const unsigned char *d = cairo_image_surface_get_data(s);
        int dr = (int)(0.12 * 255 + 0.5), dg = (int)(0.47 * 255 + 0.5), db = (int)(0.71 * 255 + 0.5);
        size_t blue = 0;
        for (int y = Y - 5; y <= Y + 5; y++)
            for (int x = X - 5; x <= X + 5; x++) {
                uint32_t p;
                memcpy(&p, d + (size_t)y * (size_t)stride + (size_t)x * 4, 4);
                blue += abs((int)(p >> 16 & 0xff) - dr) <= 3 && abs((int)(p >> 8 & 0xff) - dg) <= 3 &&
                        abs((int)(p & 0xff) - db) <= 3;
            }
        if (!CHECK(blue > 0)) fprintf(stderr, "  no data colour around (%d, %d)\n", X, Y);
        cairo_surface_destroy(s);
    }
}

/* 20000 points on a line: dots that fall on the same half pixel are drawn once, so the SVG
 * holds a few thousand dots (about 300 bytes each), not 20000 (6 MB). */
static void test_dense_svg(void) {
    size_t cap = 64 + 20000 * 48, len = 0;
    char *text = malloc(cap);
    len += (size_t)snprintf(text, cap, "x,y\n");
    for (int i = 0; i < 20000; i++) {
        double x = i * 10.0 / 20000;
        len += (size_t)snprintf(text + len, cap - len, "%.17g,%.17g\n", x, 2 * x + 1);
    }
    char *data = jf_test_tmpfile(".csv", text), *svg = jf_test_tmpfile(".svg", "");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' fit --plot '%s' 'a*x+b' '%s'", jf_test_cli(), svg, data);
    CHECK(jf_test_run(cmd, NULL, NULL) == 0);
    size_t size = 0;
    char *out = jf_test_read_file(svg, &size);
    CHECK_CONTAINS(out, "</svg>");
    if (!CHECK(size < 2000000)) fprintf(stderr, "  the SVG of 20000 points has %zu bytes\n", size);
    free(out);
    remove(data);
    remove(svg);
    free(data);
    free(svg);
    free(text);
}

/* Axes over a range whose tick step is below half an ulp of its values (data 16 apart at 1e17,
 * where 1e17 + 2 == 1e17): the tick loop stepped v += step forever. alarm() makes a hang a
 * failure. */
static void test_axes_beyond_2p53(void) {
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 900, 680);
    cairo_t *cr = cairo_create(s);
    alarm(20);
    panel p = {90, 60, 780, 400, 1e17 - 1, 1e17 + 17, 1e17 - 1, 1e17 + 17};
    axes(cr, &p, 1, "x", "y");
    alarm(0);
    CHECK(cairo_status(cr) == CAIRO_STATUS_SUCCESS);
    cairo_destroy(cr);
    cairo_surface_destroy(s);
}

/* The plot file's check names what is wrong before the drawing: a directory is "Is a directory"
 * (access(W_OK) holds for one, and cairo then said only "error while writing to output
 * stream"), and a symbolic link to a file not there yet is written through, as fopen does (the
 * O_EXCL probe said "File exists"). */
static void test_plot_path(void) {
    char *data = jf_test_tmpfile(".csv", "x,y\n1,1\n2,2.1\n3,2.9\n");
    char *dir = jf_test_tmpfile(".png", ""), *target = jf_test_tmpfile(".png", "");
    char link[4096], cmd[8192], *err = NULL;
    remove(dir);
    CHECK(mkdir(dir, 0700) == 0);
    snprintf(cmd, sizeof cmd, "'%s' fit --plot '%s' 'a*x+b' '%s'", jf_test_cli(), dir, data);
    CHECK(jf_test_run(cmd, NULL, &err) != 0);
    CHECK_CONTAINS(err, "Is a directory");
    free(err);
    err = NULL;
    remove(target);
    snprintf(link, sizeof link, "%s.link.png", target);
    CHECK(symlink(target, link) == 0);
    snprintf(cmd, sizeof cmd, "'%s' fit --plot '%s' 'a*x+b' '%s'", jf_test_cli(), link, data);
    if (!CHECK(jf_test_run(cmd, NULL, &err) == 0)) fprintf(stderr, "  %s\n", err ? err : "");
    struct stat st;
    CHECK(stat(target, &st) == 0 && st.st_size > 0);
    free(err);
    remove(link);
    remove(target);
    rmdir(dir);
    remove(data);
    free(data);
    free(dir);
    free(target);
}

/* Pixels of colour (r, g, b) (0..1, within 3 of 255) in the rectangle x0..x1, y0..y1 of s. */
static size_t count_rgb(cairo_surface_t *s, int x0, int y0, int x1, int y1, double r, double g,
                        double b) {
    int stride = cairo_image_surface_get_stride(s);
    const unsigned char *d = cairo_image_surface_get_data(s);
    int cr = (int)(r * 255 + 0.5), cg = (int)(g * 255 + 0.5), cb = (int)(b * 255 + 0.5);
    size_t hits = 0;
    for (int y = y0; y <= y1; y++)
        for (int x = x0; x <= x1; x++) {
            uint32_t p;
            memcpy(&p, d + (size_t)y * (size_t)stride + (size_t)x * 4, 4);
            hits += abs((int)(p >> 16 & 0xff) - cr) <= 3 && abs((int)(p >> 8 & 0xff) - cg) <= 3 &&
                    abs((int)(p & 0xff) - cb) <= 3;
        }
    return hits;
}

/* Data from -1e308 to 1e308, a span beyond the largest double: the axes' scales divided by an
 * infinite width and every point and the curve were NaN, an empty plot of a good fit. The
 * residual panel (no legend there) must show the data's dots, the top panel the curve. */
static void test_huge_range(void) {
    char text[4096];
    size_t len = (size_t)snprintf(text, sizeof text, "x,y\n");
    for (int i = 0; i <= 10; i++) {
        double x = (i - 5) * 2e307;
        len += (size_t)snprintf(text + len, sizeof text - len, "%.17g,%.17g\n", x,
                                1 + 2 * (x * 1e-308) + 0.01 * sin(7 * i));
    }
    cairo_surface_t *s = plot_png("a + b*(x*1e-308)", text);
    if (s) {
        /* draw_1d's layout: panels from x 90 to 870; the top one from y 60 to 456, the
         * residuals' from 471 to 625 */
        size_t dots = count_rgb(s, 91, 472, 869, 624, JF_PLOT_DATA_RGB);
        size_t curve = count_rgb(s, 91, 61, 869, 455, JF_PLOT_CURVE_RGB);
        if (!CHECK(dots > 0 && curve > 100))
            fprintf(stderr, "  %zu residual pixels, %zu curve pixels\n", dots, curve);
        cairo_surface_destroy(s);
    }
}

/* An image 40 points wide and 10 high: the cells were squares of sqrt(n) a side, so white
 * bands lay between the rows and each cell covered half its neighbour. The data panel (the
 * first, from x 80 and y 80, 323 pixels a side) must be covered. */
static void test_grid_not_square(void) {
    char text[16384];
    size_t len = (size_t)snprintf(text, sizeof text, "x,t,y\n");
    for (int j = 0; j < 10; j++)
        for (int i = 0; i < 40; i++)
            len += (size_t)snprintf(text + len, sizeof text - len, "%d,%d,%.17g\n", i, j,
                                    1 + 0.1 * i + 0.5 * j + 0.01 * sin(i * 7.0 + j));
    char *model = jf_test_tmpfile(".jf", "var x, t\ny ~ a + b*x + c*t\n");
    cairo_surface_t *s = model ? plot_png(model, text) : NULL;
    if (s) {
        size_t white = count_rgb(s, 82, 82, 400, 400, 1, 1, 1);
        if (!CHECK(white < 319 * 319 / 100)) fprintf(stderr, "  %zu white pixels\n", white);
        cairo_surface_destroy(s);
    }
    if (model) remove(model);
    free(model);
}

/* Constant data (y = 5) and a line fitted to them with rounding in it (4.999999999999999 at
 * some x): the y range was the ulp between them, and the curve a step from the top of the
 * panel to its bottom. It must be a level line in the middle (top panel 60..456). */
static void test_constant_data(void) {
    cairo_surface_t *s = plot_png("a*x+b", "x,y\n1,5\n2,5\n3,5\n4,5\n");
    if (s) {
        size_t middle = count_rgb(s, 91, 238, 869, 278, JF_PLOT_CURVE_RGB);
        size_t edges = count_rgb(s, 91, 61, 869, 100, JF_PLOT_CURVE_RGB) +
                       count_rgb(s, 91, 420, 869, 455, JF_PLOT_CURVE_RGB);
        if (!CHECK(middle > 700 && edges < 100))
            fprintf(stderr, "  curve pixels: %zu in the middle, %zu at the edges\n", middle, edges);
        cairo_surface_destroy(s);
    }
}

/* A data file named in Latin-1 (a legal Linux name, here with an e-acute as the byte 0xE9):
 * the title quotes it, cairo refused the text as not UTF-8 and the plot failed after the fit,
 * leaving an emptied SVG. The byte is drawn as U+FFFD. */
static void test_plot_non_utf8(void) {
    char *data = jf_test_tmpfile("-caf\xe9.csv", "x,y\n1,1\n2,2.1\n3,2.9\n4,4.2\n");
    char *svg = jf_test_tmpfile(".svg", "");
    char cmd[8192], *err = NULL;
    snprintf(cmd, sizeof cmd, "'%s' fit --plot '%s' 'a*x+b' '%s'", jf_test_cli(), svg, data);
    if (!CHECK(jf_test_run(cmd, NULL, &err) == 0)) fprintf(stderr, "  %s\n", err ? err : "");
    char *out = jf_test_read_file(svg, NULL);
    CHECK_CONTAINS(out, "</svg>");
    free(out);
    free(err);
    remove(data);
    remove(svg);
    free(data);
    free(svg);
}

int main(void) {
    char why[600];
    if (!CHECK(jf_cairo_load(why, sizeof why) == 0)) { /* the test's own cairo calls need it */
        fprintf(stderr, "%s\n", why);
        return jf_test_finish();
    }
    test_plot_path();
    test_plot_non_utf8();
    test_huge_range();
    test_grid_not_square();
    test_constant_data();
    test_axes_beyond_2p53();
    test_tick_labels();
    test_legend();
    test_dense_svg();
    return jf_test_finish();
}
