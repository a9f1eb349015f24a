/* `--plot FILE.svg|FILE.png`: a picture of a fit, drawn with cairo (which writes both formats
 * from the same drawing code).
 *
 * One variable: the data as points and the fitted curve (the model evaluated on a fine grid, not
 * just at the data) in a top panel, the residuals (data − fit) against the same x axis in a
 * panel below, with a zero line. Two variables: three square panels side by side — data, model,
 * residuals — each an image coloured by value (data and model on one shared colour scale, the
 * residuals on a symmetric scale of their own), with a colour bar under each. Axes carry "nice"
 * tick values (1, 2, 5 × 10^k) with labels; the title names the model and the data.
 */
#ifndef JF_CLI_PLOT_H
#define JF_CLI_PLOT_H

#include <stddef.h>

#include "../include/jitfit.h"

/* What to draw. Pointers are borrowed. */
typedef struct jf_plot_data {
    const char *title;     /* first title line (e.g. "fit of model.jf to data.csv") */
    const char *subtitle;  /* second line (e.g. "R² = 0.998, χ²/dof = 1.02"), or NULL */
    size_t nv;             /* number of variables: 1 or 2 */
    const char *xname[2];  /* variable names */
    const char *yname;     /* response name */
    const double *x[2];    /* variable columns (n values each) */
    const double *y;       /* n observed responses */
    const double *fit;     /* n model values at the data */
    size_t n;              /* number of points */
    const jf_model *model; /* for the smooth curve (nv == 1) and the model image (nv == 2) */
    const double *params;  /* fitted parameters */
} jf_plot_data;

/* The data colour (points) and the curve colour, as 0..1 RGB: tests look for these pixels. */
#define JF_PLOT_DATA_RGB 0.12, 0.47, 0.71
#define JF_PLOT_CURVE_RGB 0.84, 0.15, 0.16

/* NULL when a model of nv variables can be drawn (one or two), else the malloc'd message
 * naming path; so a fit with --plot fails before it runs. */
char *jf_plot_vars_error(const char *path, size_t nv);
/* Writes the plot; the format follows the extension (.svg or .png, any case). Returns 0, or -1
 * with *err a malloc'd message (unsupported variable count, cannot write the file, ...). */
int jf_plot_write(const char *path, const jf_plot_data *d, char **err);
/* 0 when plots can be drawn (cairo, opened at run time, loads), else -1 with the reason in
 * why: so a fit with --plot fails before it runs, not after. */
int jf_plot_available(char *why, size_t n);
/* The loaded cairo's version ("1.16.0"), or "" when plots are unavailable. */
const char *jf_plot_cairo_version(void);

#endif
