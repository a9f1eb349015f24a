/* Plots of a fit with cairo (see plot.h). One drawing routine draws on any cairo surface; the
 * file's extension picks an image surface written as PNG or an SVG surface. Coordinates are in
 * pixels of the PNG (points of the SVG); every scale maps data to a panel rectangle. */
#include "plot.h"
#include "util.h"

#include "../runtime/text.h"

#include "cairo_api.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* Points of the fitted curve: smooth at any zoom a page allows. */
#define CURVE_POINTS 600

/* A panel: a rectangle on the page and the data range it shows. */
typedef struct panel {
    double x, y, w, h;       /* rectangle on the page (y grows downwards) */
    double x0, x1, y0, y1;   /* data range shown */
} panel;

/* Where v lies from a to b, as a fraction. Data may span more than the largest double
 * (-1e308 to 1e308): b - a is then infinite and every point NaN, an empty plot, so the
 * differences are taken of halves there (elsewhere exactly, for a range of 16 at 1e17). */
static double frac_of(double v, double a, double b) {
    double d = v - a, span = b - a;
    if (isfinite(d) && isfinite(span)) return d / span;
    return (v / 2 - a / 2) / (b / 2 - a / 2);
}

static double px(const panel *p, double v) { return p->x + frac_of(v, p->x0, p->x1) * p->w; }
static double py(const panel *p, double v) {
    return p->y + p->h - frac_of(v, p->y0, p->y1) * p->h;
}

/* A tick step of 1, 2 or 5 × 10^k giving about `target` ticks from lo to hi (halves: the span
 * may overflow). */
static double nice_step(double lo, double hi, int target) {
    double raw = (hi / 2 - lo / 2) / target * 2, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

/* Widens [*lo, *hi] by a margin and away from zero width, within the finite doubles. */
static void pad_range(double *lo, double *hi, double frac) {
    if (!isfinite(*lo) || !isfinite(*hi)) *lo = 0, *hi = 1;
    if (*hi <= *lo) {
        double c = *lo, d = fabs(c) > 0 ? fabs(c) * 0.1 : 1;
        *lo = c - d;
        *hi = c + d;
    }
    double m = (*hi / 2 - *lo / 2) * (2 * frac);
    *lo = fmax(*lo - m, -DBL_MAX);
    *hi = fmin(*hi + m, DBL_MAX);
}

static void range_of(const double *v, size_t n, double *lo, double *hi) {
    *lo = INFINITY;
    *hi = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i])) {
            if (v[i] < *lo) *lo = v[i];
            if (v[i] > *hi) *hi = v[i];
        }
}

/* s with every byte outside a well-formed UTF-8 sequence replaced by U+FFFD, as the JSON writes
 * it; the caller frees it (NULL: out of memory). */
static char *utf8_text(const char *s) {
    char *u = malloc(3 * strlen(s) + 1), *o = u;
    for (const unsigned char *p = (const unsigned char *)s; u && *p;) {
        size_t len = *p < 0x80 ? 1 : jf_utf8_len(p);
        if (len) {
            memcpy(o, p, len);
            o += len;
            p += len;
        } else {
            memcpy(o, "\xEF\xBF\xBD", 3);
            o += 3;
            p++;
        }
    }
    if (u) *o = '\0';
    return u;
}

/* cairo refuses text that is not UTF-8 and fails the whole plot (after an SVG surface has
 * emptied its file): a path, model or column name in Latin-1 is legal on Linux, so such bytes
 * are drawn as U+FFFD. */
static void text_at(cairo_t *cr, double x, double y, const char *s, double ax, double ay) {
    char *u = utf8_text(s);
    if (!u) return; /* no memory for a label: the plot without it */
    cairo_text_extents_t e;
    cairo_text_extents(cr, u, &e);
    cairo_move_to(cr, x - e.width * ax - e.x_bearing, y - e.height * ay - e.y_bearing);
    cairo_show_text(cr, u);
    free(u);
}

/* A tick label: %g, with "0" for the rounding noise of a tick at zero, and more than %g's 6
 * significant digits when the step needs them (ticks 1700000000, 1700000500 on Unix times). */
static void tick_label(char *buf, size_t n, double v, double step) {
    if (fabs(v) < step * 1e-9) v = 0;
    int digits = v == 0 ? 1 : (int)floor(log10(fabs(v))) - (int)floor(log10(step)) + 1;
    snprintf(buf, n, "%.*g", digits < 6 ? 6 : digits > 17 ? 17 : digits, v);
}

/* The i-th tick from lo, a multiple of step. Ticks are counted, not stepped by adding step,
 * which stops moving once step is below half an ulp of the value (1e17 + 2 == 1e17, on data
 * 16 apart at 1e17): the caller draws at most MAX_TICKS, and a tick that rounds to the one
 * before it once. */
#define MAX_TICKS 100
static double tick_at(double lo, double step, int i) {
    double v = ceil(lo / step) * step + i * step;
    return isfinite(v) ? v : (ceil(lo / step) + i) * step; /* i * step overflowed (1e308s) */
}

/* Frame, ticks and tick labels of a panel; labels on the x axis only when xlabels. */
static void axes(cairo_t *cr, const panel *p, int xlabels, const char *xname, const char *yname) {
    char buf[64];
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, p->x, p->y, p->w, p->h);
    cairo_stroke(cr);
    cairo_set_font_size(cr, 12);
    double sx = nice_step(p->x0, p->x1, 6), sy = nice_step(p->y0, p->y1, 5);
    double v, prev = NAN;
    for (int i = 0; (v = tick_at(p->x0, sx, i)) <= p->x1 + sx * 1e-9 && i < MAX_TICKS; i++) {
        if (v == prev) continue;
        prev = v;
        double X = px(p, v);
        cairo_move_to(cr, X, p->y + p->h);
        cairo_line_to(cr, X, p->y + p->h - 5);
        cairo_stroke(cr);
        if (xlabels) {
            tick_label(buf, sizeof buf, v, sx);
            text_at(cr, X, p->y + p->h + 6, buf, 0.5, 0);
        }
    }
    prev = NAN;
    for (int i = 0; (v = tick_at(p->y0, sy, i)) <= p->y1 + sy * 1e-9 && i < MAX_TICKS; i++) {
        if (v == prev) continue;
        prev = v;
        double Y = py(p, v);
        cairo_move_to(cr, p->x, Y);
        cairo_line_to(cr, p->x + 5, Y);
        cairo_stroke(cr);
        tick_label(buf, sizeof buf, v, sy);
        text_at(cr, p->x - 6, Y, buf, 1, 0.5);
    }
    cairo_set_font_size(cr, 13);
    if (xname) text_at(cr, p->x + p->w / 2, p->y + p->h + 26, xname, 0.5, 0);
    if (yname) {
        cairo_save(cr);
        cairo_translate(cr, p->x - 62, p->y + p->h / 2);
        cairo_rotate(cr, -M_PI / 2);
        text_at(cr, 0, 0, yname, 0.5, 0.5);
        cairo_restore(cr);
    }
}

static void titles(cairo_t *cr, const jf_plot_data *d, double width) {
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_font_size(cr, 15);
    text_at(cr, width / 2, 14, d->title ? d->title : "", 0.5, 0);
    if (d->subtitle) {
        cairo_set_font_size(cr, 12);
        text_at(cr, width / 2, 36, d->subtitle, 0.5, 0);
    }
}

/* Fills a dot of radius r at each point (x[i], y[i]) of panel p. Above SPARSE_POINTS points a
 * dot on the same half pixel as one already drawn is left out: it changes hardly a pixel, and
 * a million points would otherwise make an SVG of 300 MB. */
#define SPARSE_POINTS 2000
static void points(cairo_t *cr, const panel *p, const double *x, const double *y, size_t n,
                   double r) {
    size_t gw = (size_t)(2 * p->w) + 1, gh = (size_t)(2 * p->h) + 1;
    unsigned char *seen = n > SPARSE_POINTS ? calloc(gw * gh, 1) : NULL;
    for (size_t i = 0; i < n; i++) {
        double X = px(p, x[i]), Y = py(p, y[i]);
        double gx = floor(2 * (X - p->x) + 0.5), gy = floor(2 * (Y - p->y) + 0.5);
        if (seen && gx >= 0 && gy >= 0 && gx < (double)gw && gy < (double)gh) {
            size_t k = (size_t)gy * gw + (size_t)gx;
            if (seen[k]) continue;
            seen[k] = 1;
        }
        cairo_new_sub_path(cr);
        cairo_arc(cr, X, Y, r, 0, 2 * M_PI);
    }
    cairo_fill(cr);
    free(seen);
}

/* Whether a point drawn at (X, Y) with radius r touches the legend box drawn for (lx, ly). */
static int in_box(double X, double Y, double lx, double ly, double r) {
    return X + r >= lx - 8 && X - r <= lx + 100 && Y + r >= ly - 6 && Y - r <= ly + 38;
}

/* Data points, fitted curve and residuals against one variable. */
static void draw_1d(cairo_t *cr, const jf_plot_data *d, double W, double H) {
    const double *x = d->x[0];
    size_t n = d->n;
    double xlo, xhi, ylo, yhi, flo, fhi;
    range_of(x, n, &xlo, &xhi);
    range_of(d->y, n, &ylo, &yhi);
    /* The curve on a fine grid: shows the model between the points, not only at them. */
    double cx[CURVE_POINTS], cy[CURVE_POINTS];
    for (int i = 0; i < CURVE_POINTS; i++) {
        double t = (double)i / (CURVE_POINTS - 1);
        cx[i] = isfinite(xhi - xlo) ? xlo + (xhi - xlo) * t : xlo * (1 - t) + xhi * t;
        if (jf_model_eval(d->model, d->params, &cx[i], &cy[i], NULL) != JF_OK) cy[i] = NAN;
    }
    range_of(cy, CURVE_POINTS, &flo, &fhi);
    double dlo = ylo, dhi = yhi;
    if (flo < ylo) ylo = flo;
    if (fhi > yhi) yhi = fhi;
    /* Constant data and a fit off them only by rounding (5 and 4.999999999999999): a range of
     * a few ulps drew the rounding as a step across the whole panel. The data's value is the
     * range then, widened as any constant. */
    if (dlo == dhi && yhi - ylo <= 8 * DBL_EPSILON * fmax(fabs(ylo), fabs(yhi))) ylo = yhi = dlo;
    pad_range(&xlo, &xhi, 0.03);
    pad_range(&ylo, &yhi, 0.06);

    double *res = malloc((n ? n : 1) * sizeof *res);
    double rlo = 0, rhi = 0;
    if (res) {
        for (size_t i = 0; i < n; i++) res[i] = d->y[i] - d->fit[i];
        range_of(res, n, &rlo, &rhi);
        double a = fmax(fabs(rlo), fabs(rhi));
        rlo = -a;
        rhi = a;
        pad_range(&rlo, &rhi, 0.1);
    }
    double left = 90, right = 30, top = 60, gap = 14, bottom = 55;
    double avail = H - top - bottom - gap;
    panel top_p = {left, top, W - left - right, avail * 0.72, xlo, xhi, ylo, yhi};
    panel res_p = {left, top + avail * 0.72 + gap, W - left - right, avail * 0.28, xlo, xhi, rlo, rhi};
    double r = n > 2000 ? 1.2 : n > 300 ? 2.0 : 3.0;

    titles(cr, d, W);
    /* Data. */
    cairo_save(cr);
    cairo_rectangle(cr, top_p.x, top_p.y, top_p.w, top_p.h);
    cairo_clip(cr);
    cairo_set_source_rgb(cr, JF_PLOT_DATA_RGB);
    points(cr, &top_p, x, d->y, n, r);
    /* Curve, broken where the model is not finite. */
    cairo_set_source_rgb(cr, JF_PLOT_CURVE_RGB);
    cairo_set_line_width(cr, 2.2);
    int pen = 0;
    for (int i = 0; i < CURVE_POINTS; i++) {
        if (!isfinite(cy[i])) {
            pen = 0;
            continue;
        }
        if (pen) cairo_line_to(cr, px(&top_p, cx[i]), py(&top_p, cy[i]));
        else cairo_move_to(cr, px(&top_p, cx[i]), py(&top_p, cy[i]));
        pen = 1;
    }
    cairo_stroke(cr);
    cairo_restore(cr);
    axes(cr, &top_p, 0, NULL, d->yname);

    /* Legend, in the corner that hides the fewest data points and curve points (top right
     * unless it hides more than another: a rising curve ends there). */
    double lx = top_p.x + top_p.w - 110, ly = top_p.y + 12;
    size_t best = SIZE_MAX;
    for (int k = 0; k < 4; k++) {
        double bx = k & 1 ? top_p.x + 20 : top_p.x + top_p.w - 110;
        double by = k & 2 ? top_p.y + top_p.h - 50 : top_p.y + 12;
        size_t hidden = 0;
        for (size_t i = 0; i < n; i++)
            hidden += in_box(px(&top_p, x[i]), py(&top_p, d->y[i]), bx, by, r);
        for (int i = 0; i < CURVE_POINTS; i++)
            hidden += isfinite(cy[i]) && in_box(px(&top_p, cx[i]), py(&top_p, cy[i]), bx, by, 1);
        if (hidden < best) best = hidden, lx = bx, ly = by;
    }
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_rectangle(cr, lx - 8, ly - 6, 108, 44);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, 0.6, 0.6, 0.6);
    cairo_set_line_width(cr, 1);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, JF_PLOT_DATA_RGB);
    cairo_arc(cr, lx + 10, ly + 6, 3.5, 0, 2 * M_PI);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, JF_PLOT_CURVE_RGB);
    cairo_set_line_width(cr, 2.2);
    cairo_move_to(cr, lx, ly + 26);
    cairo_line_to(cr, lx + 20, ly + 26);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_font_size(cr, 12);
    text_at(cr, lx + 28, ly + 6, "data", 0, 0.5);
    text_at(cr, lx + 28, ly + 26, "fit", 0, 0.5);

    /* Residual panel: zero line, then the residuals. */
    if (res) {
        cairo_save(cr);
        cairo_rectangle(cr, res_p.x, res_p.y, res_p.w, res_p.h);
        cairo_clip(cr);
        cairo_set_source_rgb(cr, 0.5, 0.5, 0.5);
        cairo_set_line_width(cr, 1);
        double dash = 4;
        cairo_set_dash(cr, &dash, 1, 0);
        cairo_move_to(cr, res_p.x, py(&res_p, 0));
        cairo_line_to(cr, res_p.x + res_p.w, py(&res_p, 0));
        cairo_stroke(cr);
        cairo_set_dash(cr, NULL, 0, 0);
        cairo_set_source_rgb(cr, JF_PLOT_DATA_RGB);
        points(cr, &res_p, x, res, n, r * 0.8);
        cairo_restore(cr);
        axes(cr, &res_p, 1, d->xname[0], "residual");
    }
    free(res);
}

/* Viridis-like colour map on [0, 1] (a few anchors, linear between them). */
static void seq_color(double t, double *r, double *g, double *b) {
    static const double a[5][3] = {{0.267, 0.005, 0.329}, {0.230, 0.322, 0.546},
                                   {0.128, 0.567, 0.551}, {0.369, 0.789, 0.383},
                                   {0.993, 0.906, 0.144}};
    if (!(t >= 0)) t = 0;
    if (t > 1) t = 1;
    double s = t * 4;
    int i = (int)s;
    if (i > 3) i = 3;
    double f = s - i;
    *r = a[i][0] + f * (a[i + 1][0] - a[i][0]);
    *g = a[i][1] + f * (a[i + 1][1] - a[i][1]);
    *b = a[i][2] + f * (a[i + 1][2] - a[i][2]);
}

/* Blue–white–red on [-1, 1], for residuals. */
static void div_color(double t, double *r, double *g, double *b) {
    if (!(t >= -1)) t = -1;
    if (t > 1) t = 1;
    if (t < 0) *r = 1 + t * 0.85, *g = 1 + t * 0.6, *b = 1;
    else *r = 1, *g = 1 - t * 0.75, *b = 1 - t * 0.8;
}

/* One 2-D panel: each point a cell coloured by its value, kx cells across and ky down. */
static void image_panel(cairo_t *cr, const panel *p, const jf_plot_data *d, const double *v,
                        double lo, double hi, int diverging, const char *title, double kx,
                        double ky) {
    size_t n = d->n;
    double cw = p->w / kx + 1, ch = p->h / ky + 1;
    cairo_save(cr);
    cairo_rectangle(cr, p->x, p->y, p->w, p->h);
    cairo_clip(cr);
    for (size_t i = 0; i < n; i++) {
        double r, g, b;
        if (diverging) div_color(hi > 0 ? v[i] / hi : 0, &r, &g, &b);
        else seq_color(hi > lo ? frac_of(v[i], lo, hi) : 0.5, &r, &g, &b);
        cairo_set_source_rgb(cr, r, g, b);
        cairo_rectangle(cr, px(p, d->x[0][i]) - cw / 2, py(p, d->x[1][i]) - ch / 2, cw, ch);
        cairo_fill(cr);
    }
    cairo_restore(cr);
    axes(cr, p, 1, d->xname[0], d->xname[1]);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_font_size(cr, 14);
    text_at(cr, p->x + p->w / 2, p->y - 8, title, 0.5, 1);
    /* Colour bar under the panel with its end values. */
    double by = p->y + p->h + 48, bh = 12;
    for (int i = 0; i < 100; i++) {
        double r, g, b, t = i / 99.0;
        if (diverging) div_color(2 * t - 1, &r, &g, &b);
        else seq_color(t, &r, &g, &b);
        cairo_set_source_rgb(cr, r, g, b);
        cairo_rectangle(cr, p->x + p->w * i / 100.0, by, p->w / 100.0 + 0.5, bh);
        cairo_fill(cr);
    }
    char buf[64];
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_font_size(cr, 11);
    snprintf(buf, sizeof buf, "%.4g", diverging ? -hi : lo);
    text_at(cr, p->x, by + bh + 4, buf, 0, 0);
    snprintf(buf, sizeof buf, "%.4g", hi);
    text_at(cr, p->x + p->w, by + bh + 4, buf, 1, 0);
}

static int cmp_double(const void *a, const void *b) {
    double u = *(const double *)a, v = *(const double *)b;
    return (u > v) - (u < v);
}

/* The number of distinct values among the n of v (n when there is no memory to count). */
static size_t distinct(const double *v, size_t n) {
    double *s = malloc((n ? n : 1) * sizeof *s);
    if (!s) return n;
    memcpy(s, v, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_double);
    size_t k = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) k += s[i] != s[i - 1];
    free(s);
    return k;
}

/* Data, model and residual images of a model of two variables. */
static void draw_2d(cairo_t *cr, const jf_plot_data *d, double W) {
    size_t n = d->n;
    double *res = malloc((n ? n : 1) * sizeof *res);
    if (!res) return;
    for (size_t i = 0; i < n; i++) res[i] = d->y[i] - d->fit[i];
    double lo, hi, flo, fhi, rlo, rhi, xlo, xhi, ylo, yhi;
    range_of(d->y, n, &lo, &hi);
    range_of(d->fit, n, &flo, &fhi);
    range_of(res, n, &rlo, &rhi);
    range_of(d->x[0], n, &xlo, &xhi);
    range_of(d->x[1], n, &ylo, &yhi);
    /* Cells per side: a grid's own counts (an image 40 wide and 10 high, a few points
     * missing), else sqrt(n) each way for scattered points. A square cell of sqrt(n) on a
     * 40 x 10 grid left white bands between the rows and covered every other column. */
    double kx = (double)distinct(d->x[0], n), ky = (double)distinct(d->x[1], n);
    if (kx * ky > 2.0 * (double)n) kx = ky = sqrt((double)n);
    if (kx < 1) kx = 1;
    if (ky < 1) ky = 1;
    /* Half a cell of margin so edge cells are whole. */
    pad_range(&xlo, &xhi, kx > 1 ? 0.5 / (kx - 1) : 0);
    pad_range(&ylo, &yhi, ky > 1 ? 0.5 / (ky - 1) : 0);
    if (flo < lo) lo = flo;
    if (fhi > hi) hi = fhi;
    double ra = fmax(fabs(rlo), fabs(rhi));
    titles(cr, d, W);
    double left = 80, size = (W - left - 3 * 70) / 3;
    for (int k = 0; k < 3; k++) {
        panel p = {left + k * (size + 70), 80, size, size, xlo, xhi, ylo, yhi};
        if (k == 0) image_panel(cr, &p, d, d->y, lo, hi, 0, "data", kx, ky);
        else if (k == 1) image_panel(cr, &p, d, d->fit, lo, hi, 0, "model", kx, ky);
        else image_panel(cr, &p, d, res, -ra, ra, 1, "residuals (data - model)", kx, ky);
    }
    free(res);
}

int jf_plot_available(char *why, size_t n) { return jf_cairo_load(why, n); }

const char *jf_plot_cairo_version(void) {
    char why[600];
    return jf_cairo_load(why, sizeof why) == 0 ? cairo_version_string() : "";
}

char *jf_plot_vars_error(const char *path, size_t nv) {
    if (nv == 1 || nv == 2) return NULL;
    return jf_cli_strf("%s: --plot draws models of one or two variables; this model has %zu",
                       path, nv);
}

int jf_plot_write(const char *path, const jf_plot_data *d, char **err) {
    *err = NULL;
    if (d->nv != 1 && d->nv != 2) {
        *err = jf_plot_vars_error(path, d->nv);
        return -1;
    }
    const char *dot = strrchr(path, '.');
    int svg = dot && strcasecmp(dot, ".svg") == 0;
    if (!svg && !(dot && strcasecmp(dot, ".png") == 0)) {
        *err = jf_cli_strf("%s: the plot file must end in .svg or .png", path);
        return -1;
    }
    char why[600];
    if (jf_cairo_load(why, sizeof why) != 0) {
        *err = jf_cli_strf("%s: %s", path, why);
        return -1;
    }
    /* cairo only says "error while writing to output stream": check first that the file can
     * be written, so that a missing directory or a read-only file is named as --output names
     * it, without truncating an existing plot here (a PNG is written only once drawn; an SVG
     * surface empties its file when created, just before drawing) */
    struct stat pst;
    int writable = 0;
    if (stat(path, &pst) == 0) {
        if (S_ISDIR(pst.st_mode)) errno = EISDIR; /* access(W_OK) says a directory is writable */
        else writable = access(path, W_OK) == 0;
    } else if (errno == ENOENT) {
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            close(fd);
            unlink(path);
            writable = 1;
        } else if (errno == EEXIST && lstat(path, &pst) == 0 && S_ISLNK(pst.st_mode)) {
            /* a symbolic link to a file not there yet, which O_EXCL refuses: cairo's fopen
             * creates the file it names */
            writable = 1;
        }
    }
    if (!writable) {
        *err = jf_cli_strf("%s: %s", path, strerror(errno));
        return -1;
    }
    double W = d->nv == 1 ? 900 : 1260, H = d->nv == 1 ? 680 : 520;
    cairo_surface_t *sf = svg ? cairo_svg_surface_create(path, W, H)
                              : cairo_image_surface_create(CAIRO_FORMAT_ARGB32, (int)W, (int)H);
    if (cairo_surface_status(sf) != CAIRO_STATUS_SUCCESS) {
        *err = jf_cli_strf("%s: %s", path, cairo_status_to_string(cairo_surface_status(sf)));
        cairo_surface_destroy(sf);
        return -1;
    }
    cairo_t *cr = cairo_create(sf);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    if (d->nv == 1) draw_1d(cr, d, W, H);
    else draw_2d(cr, d, W);
    cairo_status_t st = cairo_status(cr);
    cairo_destroy(cr);
    if (st == CAIRO_STATUS_SUCCESS) {
        if (svg) {
            cairo_surface_finish(sf);
            st = cairo_surface_status(sf);
        } else {
            st = cairo_surface_write_to_png(sf, path);
        }
    }
    cairo_surface_destroy(sf);
    if (st != CAIRO_STATUS_SUCCESS) {
        *err = jf_cli_strf("%s: cannot write the plot: %s", path, cairo_status_to_string(st));
        return -1;
    }
    return 0;
}
