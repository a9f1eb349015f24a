/* Unit tests of the plot's tick labels (cli/plot.c): neighbouring ticks must read differently
 * however large the values are next to their spacing (Unix times, wavelengths in metres).
 *
 * The plotter belongs to the jitfit executable, not to the library these tests link, so its
 * source (and the CLI helpers it calls) are compiled into this test directly.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/plot.c"
#include "cli/util.c"
#include "tests/testlib.h"

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

int main(void) {
    test_tick_labels();
    return jf_test_finish();
}
