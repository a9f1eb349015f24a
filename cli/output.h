/* `--output FILE`: the data that were fitted, next to the model's predictions, as CSV.
 *
 * Columns: the group column (with --group), the used data columns (variables, response, sigma)
 * under their names, then `fit` (the model at the fitted parameters), `residual` (response −
 * fit, the data minus the model as plots show it; the solver's internal residual has the other
 * sign and is divided by sigma) and `fit_stderr` (the standard error of `fit` from the
 * parameters' covariance: a confidence band is fit ± t·fit_stderr). Numbers are written with every digit (shortest round trip),
 * independently of the locale, so the file reads back exactly.
 */
#ifndef JF_CLI_OUTPUT_H
#define JF_CLI_OUTPUT_H

#include <stddef.h>

/* Writes the CSV to path ("-": standard output), under a temporary name beside it that is
 * renamed onto path when the file is complete (in place where path is not a regular file of
 * ours with one link: a device, a FIFO, a hard-linked file). keys/group_name may be NULL. Column c of the
 * data is cols[c*ld .. c*ld+n); ycol is the response's column. The rows are formatted on
 * nthreads threads (0: all cores; --threads), written in order. Returns 0, or -1 with *err a
 * malloc'd message ("out.csv: Permission denied"). */
int jf_output_csv(const char *path, const char *group_name, char *const *keys,
                  const char *const *names, size_t ncols, const double *cols, size_t ld,
                  size_t n, size_t ycol, const double *fit, const double *fit_se, int nthreads,
                  char **err);

/* Removes the temporary file jf_output_csv is writing, if any: for a handler of a terminating
 * signal (async-signal-safe), so that an interrupted run leaves no half-written file. */
void jf_output_signal_cleanup(void);

#endif
