/* Benchmark driver for batched fitting: many independent small fits through jf_fit_batch.
 *
 * bench/bench_fit.py writes the data (so scipy and jitfit fit the very same numbers), runs this
 * program, and compares the parameters it writes back with scipy's. The model is the damped sine
 * a*exp(-b*x)*sin(c*x+d)+e from the start [1.5, 0.2, 1.45, 0, 0]. The first batch call compiles
 * the kernels (or finds them in the cache) and is reported apart; the timed calls are warm.
 *
 * usage: bench_batch DATA.bin [--repeat R] [--threads N] [--out PARAMS.bin] [--single]
 *                    [--vector-math]
 *                             [--ftol X] [--xtol X] [--gtol X] [--backend c|interp]
 *   DATA.bin   "JFBATCH1", uint64 nfits, uint64 npts, float64 x[npts], float64 y[nfits][npts]
 *   --out      writes float64 params[nfits][5] then int32 status[nfits] (NaN/-1 for a fit that
 *              could not run)
 *   --single   also times a plain loop of jf_fit over the fits, for the per-call overhead
 * Prints one JSON object on stdout.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jitfit.h"

#define NP 5

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int die(const char *what) {
    fprintf(stderr, "bench_batch: %s\n", what);
    return 1;
}

static void free_results(jf_fit_result **r, size_t n) {
    for (size_t i = 0; i < n; i++) {
        jf_fit_result_free(r[i]);
        r[i] = NULL;
    }
}

int main(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    int repeat = 3, single = 0;
    jf_fit_options o = jf_fit_options_default();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--single") == 0) single = 1;
        else if (strcmp(a, "--repeat") == 0 && v) repeat = atoi(argv[++i]);
        else if (strcmp(a, "--threads") == 0 && v) o.nthreads = atoi(argv[++i]);
        else if (strcmp(a, "--out") == 0 && v) out = argv[++i];
        else if (strcmp(a, "--vector-math") == 0) o.vector_math = 1;
        else if (strcmp(a, "--ftol") == 0 && v) o.ftol = strtod(argv[++i], NULL);
        else if (strcmp(a, "--xtol") == 0 && v) o.xtol = strtod(argv[++i], NULL);
        else if (strcmp(a, "--gtol") == 0 && v) o.gtol = strtod(argv[++i], NULL);
        else if (strcmp(a, "--backend") == 0 && v)
            o.backend = strcmp(argv[++i], "interp") == 0 ? JF_BACKEND_INTERP : JF_BACKEND_C;
        else if (a[0] != '-' && !in) in = a;
        else return die("usage: bench_batch DATA.bin [--repeat R] [--threads N] [--out F] "
                        "[--single] [--ftol X] [--xtol X] [--gtol X] [--backend c|interp]");
    }
    if (!in || repeat < 1) return die("expected DATA.bin (and --repeat >= 1)");

    FILE *f = fopen(in, "rb");
    if (!f) return die("cannot open the data file");
    char magic[8];
    uint64_t hdr[2];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "JFBATCH1", 8) != 0 ||
        fread(hdr, sizeof hdr[0], 2, f) != 2) {
        fclose(f);
        return die("not a JFBATCH1 file");
    }
    size_t nfits = (size_t)hdr[0], npts = (size_t)hdr[1];
    double *x = malloc(npts * sizeof *x), *y = malloc(nfits * npts * sizeof *y);
    jf_data *data = calloc(nfits, sizeof *data);
    jf_fit_result **res = calloc(nfits, sizeof *res);
    if (!x || !y || !data || !res) return die("out of memory");
    if (fread(x, sizeof *x, npts, f) != npts ||
        fread(y, sizeof *y, nfits * npts, f) != nfits * npts) {
        fclose(f);
        return die("short data file");
    }
    fclose(f);
    for (size_t i = 0; i < nfits; i++) {
        data[i].n = npts;
        data[i].x = x; /* one shared grid: the fits differ in their responses */
        data[i].ldx = npts;
        data[i].y = y + i * npts;
        data[i].sigma = NULL;
    }

    jf_model *m = NULL;
    jf_model_options mo = jf_model_options_default();
    double t0 = now_ms();
    if (jf_model_compile("a*exp(-b*x)*sin(c*x+d)+e", (size_t)-1, &mo, &m, NULL) != JF_OK)
        return die("model compilation failed");
    double t_model = now_ms() - t0;
    const double p0[NP] = {1.5, 0.2, 1.45, 0, 0};
    o.p0 = p0;

    /* First call: obtains the kernels (compile or cache) besides fitting. */
    t0 = now_ms();
    int st = jf_fit_batch(m, nfits, data, NULL, &o, res, NULL);
    double t_first = now_ms() - t0;
    if (st != JF_OK) return die(jf_status_string(st));
    int backend = res[0] ? res[0]->backend : -1;
    int cache = res[0] ? res[0]->cache : -1;
    double best = INFINITY, sum = 0;
    for (int r = 0; r < repeat; r++) {
        free_results(res, nfits);
        t0 = now_ms();
        st = jf_fit_batch(m, nfits, data, NULL, &o, res, NULL);
        double t = now_ms() - t0;
        if (st != JF_OK) return die(jf_status_string(st));
        best = t < best ? t : best;
        sum += t;
    }
    size_t converged = 0, nfev = 0;
    for (size_t i = 0; i < nfits; i++)
        if (res[i]) {
            converged += res[i]->success != 0;
            nfev += res[i]->nfev;
        }

    double t_single = NAN;
    if (single) {
        /* The same fits one jf_fit call at a time (threads inside each fit left to default). */
        jf_fit_result *r1 = NULL;
        t0 = now_ms();
        for (size_t i = 0; i < nfits; i++) {
            if (jf_fit(m, &data[i], &o, &r1, NULL) != JF_OK) return die("jf_fit failed");
            jf_fit_result_free(r1);
        }
        t_single = now_ms() - t0;
    }

    if (out) {
        FILE *g = fopen(out, "wb");
        if (!g) return die("cannot write --out");
        for (size_t i = 0; i < nfits; i++) {
            double p[NP];
            for (int k = 0; k < NP; k++) p[k] = res[i] ? res[i]->params[k] : NAN;
            fwrite(p, sizeof p[0], NP, g);
        }
        for (size_t i = 0; i < nfits; i++) {
            int32_t s = res[i] ? (int32_t)res[i]->status : -1;
            fwrite(&s, sizeof s, 1, g);
        }
        fclose(g);
    }

    printf("{\"nfits\": %zu, \"npts\": %zu, \"threads\": %d, \"backend\": \"%s\", "
           "\"cache\": %d, \"model_ms\": %.3f, \"first_ms\": %.3f, \"best_ms\": %.3f, "
           "\"mean_ms\": %.3f, \"repeat\": %d, \"converged\": %zu, \"mean_nfev\": %.2f, "
           "\"single_loop_ms\": %.3f}\n",
           nfits, npts, o.nthreads, jf_backend_name(backend), cache, t_model, t_first, best,
           sum / repeat, repeat, converged, (double)nfev / (double)nfits,
           isnan(t_single) ? -1.0 : t_single);
    free_results(res, nfits);
    free(res);
    free(data);
    free(x);
    free(y);
    jf_model_free(m);
    return 0;
}
