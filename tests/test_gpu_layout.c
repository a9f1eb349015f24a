/* The GPU solvers' data layouts (solver/gpu_layout.c), checked on the host with the CPU kernels.
 *
 * The streamed GPU fit copies the data chunk by chunk (x columns, y, w, each `chunk` long) and
 * adds the chunks' normal-equation sums; a GPU batch packs the fits one after the other. Both
 * are index arithmetic that no GPU is needed to check, and that a GPU run could not tell apart
 * from a numerical difference. Here:
 * - the chunk-major copy holds every value where the view of its chunk says (short last chunk,
 *   one to three variables, with and without weights, and a weighted layout read unweighted);
 * - each chunk's sums through its view equal the kernel's sums over the same points of the
 *   original arrays, bit for bit (same points in the same order), and their total equals the
 *   one-pass sums to 1e-12 of each entry's scale;
 * - a whole fit whose passes stream the chunks (jf_problem_ops, as lm_cuda.c runs them: sums
 *   added in chunk order, residual sums from linear-loss passes, the polish's Jacobian chunk by
 *   chunk) equals the in-memory fit to 1e-10 (polished) or to its stopping rule (robust loss);
 * - packed batches: offsets, values, weight 1 for a fit without sigma, and each fit's sums read
 *   from the packed arrays at its offset bit-identical to the sums of its own arrays.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/model.h"
#include "include/jitfit.h"
#include "runtime/kernels.h"
#include "solver/solver.h"
#include "tests/testlib.h"

static jf_model *compile(const char *text, const char *const *vars, size_t nvars) {
    jf_model_options mo = jf_model_options_default();
    mo.vars = vars;
    mo.nvars = nvars;
    jf_model *m = NULL;
    jf_diagnostics *d = NULL;
    int st = jf_model_compile(text, (size_t)-1, &mo, &m, &d);
    if (st != JF_OK) fprintf(stderr, "compile failed: %s\n%s\n", text, jf_diagnostics_text(d));
    jf_diagnostics_free(d);
    CHECK(st == JF_OK && m != NULL);
    return m;
}

static jf_kernels *kernels(const jf_model *m) {
    jf_jit_options jo;
    memset(&jo, 0, sizeof jo);
    jf_kernels *k = NULL;
    char *warn = NULL;
    CHECK(jf_kernels_get(m, JF_BACKEND_C, &jo, &k, &warn) == JF_OK);
    free(warn);
    return k;
}

/* Deterministic data for nv variables: x_j in a range each, y near the model's scale. */
static void make_data(size_t n, size_t nv, double *x, double *y, double *w) {
    for (size_t i = 0; i < n; i++) {
        double t = (double)i;
        for (size_t j = 0; j < nv; j++) x[j * n + i] = 10.0 * t / (double)n + 0.37 * (double)j * sin(t);
        y[i] = 2.5 * exp(-0.3 * x[i]) * sin(1.7 * x[i] + 0.4) + 0.5 +
               0.03 * (sin(12.9898 * t) + cos(78.233 * t));
        if (w) w[i] = 0.5 + fmod(0.618033988749895 * t, 1.0);
    }
}

/* Largest |a - b| over the accumulator, each entry against a bound of its terms' magnitudes:
 * √(A_aa A_bb) for JᵀJ, √(A_aa · 2 cost) for Jᵀr, the cost itself. */
static double sums_dev(const double *a, const double *b, size_t np) {
    size_t tri = np * (np + 1) / 2, q = 0;
    double dev = 0.0, cost = b[tri + np];
    for (size_t r = 0; r < np; r++)
        for (size_t c = r; c < np; c++, q++) {
            double s = sqrt(b[r * np - r * (r - 1) / 2] * b[c * np - c * (c - 1) / 2]);
            double e = fabs(a[q] - b[q]) / (s > 0 ? s : 1.0);
            if (e > dev) dev = e;
        }
    for (size_t r = 0; r < np; r++) {
        double s = sqrt(b[r * np - r * (r - 1) / 2] * 2 * cost);
        double e = fabs(a[tri + r] - b[tri + r]) / (s > 0 ? s : 1.0);
        if (e > dev) dev = e;
    }
    double e = fabs(a[tri + np] - cost) / (cost > 0 ? cost : 1.0);
    return e > dev ? e : dev;
}

/* ---- streaming ---------------------------------------------------------------------------- */

static void test_fill(size_t n, size_t nv, int weighted, size_t chunk) {
    double *x = malloc((nv ? nv : 1) * n * sizeof *x), *y = malloc(n * sizeof *y);
    double *w = malloc(n * sizeof *w);
    make_data(n, nv, x, y, w);
    jf_data_view d = {x, n, y, weighted ? w : NULL};
    jf_stream_layout l;
    jf_stream_layout_init(&l, n, nv, weighted, chunk);
    CHECK(l.ncols == nv + 1 + (weighted ? 1u : 0u));
    CHECK(l.nchunks == (n + chunk - 1) / chunk);
    double *buf = malloc(l.nchunks * l.ncols * chunk * sizeof *buf);
    for (size_t i = 0; i < l.nchunks * l.ncols * chunk; i++) buf[i] = NAN; /* the short tail stays NaN */
    jf_stream_fill(&l, &d, buf);
    size_t seen = 0, bad = 0;
    for (size_t k = 0; k < l.nchunks; k++) {
        size_t len = jf_stream_chunk_len(&l, k);
        CHECK(len >= 1 && len <= chunk && (k + 1 == l.nchunks || len == chunk));
        for (int use_w = 0; use_w <= 1; use_w++) {
            jf_data_view v = jf_stream_view(&l, buf + k * l.ncols * chunk, use_w);
            CHECK(v.ldx == chunk);
            CHECK((v.w != NULL) == (use_w && weighted));
            for (size_t i = 0; i < len; i++) {
                size_t g = k * chunk + i;
                for (size_t j = 0; j < nv; j++) bad += v.x[j * v.ldx + i] != x[j * n + g];
                bad += v.y[i] != y[g];
                if (v.w) bad += v.w[i] != w[g];
            }
        }
        seen += len;
    }
    CHECK(seen == n);
    CHECK(bad == 0);
    if (bad) fprintf(stderr, "fill n=%zu nv=%zu w=%d chunk=%zu: %zu values misplaced\n", n, nv, weighted, chunk, bad);
    /* a staged pass's pieces of chunk k (host addresses standing in for the device's) give the
     * chunk buffer the copy has, in every value the kernels read */
    double *one = malloc(l.ncols * chunk * sizeof *one);
    jf_gpu_piece *pc = malloc(l.ncols * sizeof *pc);
    size_t pbad = 0;
    for (size_t k = 0; one && pc && k < l.nchunks; k++) {
        for (size_t i = 0; i < l.ncols * chunk; i++) one[i] = NAN;
        size_t npc = jf_stream_pieces(&l, &d, k, (jf_devptr)(uintptr_t)one, pc);
        CHECK(npc == l.ncols);
        for (size_t q = 0; q < npc; q++) {
            CHECK(pc[q].bytes == jf_stream_chunk_len(&l, k) * sizeof(double) && !pc[q].check);
            memcpy((void *)(uintptr_t)pc[q].dst, pc[q].src, pc[q].bytes);
        }
        size_t len = jf_stream_chunk_len(&l, k);
        const double *ref = buf + k * l.ncols * chunk;
        for (size_t c = 0; c < l.ncols; c++)
            for (size_t i = 0; i < len; i++) pbad += one[c * chunk + i] != ref[c * chunk + i];
    }
    CHECK(pbad == 0);
    free(one);
    free(pc);
    free(buf);
    free(x);
    free(y);
    free(w);
}

/* A streamed problem on the host: the chunk-major copy and the CPU kernels. */
typedef struct host_stream {
    jf_stream_layout lay;
    double *buf;          /* chunk-major copy */
    const jf_kernels *k;
    size_t np, nacc;
    double f_scale;
    double *tmp;          /* nacc */
    unsigned long passes; /* chunked passes run */
} host_stream;

static void stream_pass(host_stream *hs, const double *p, jf_loss loss, int weighted, double *acc) {
    memset(acc, 0, hs->nacc * sizeof *acc);
    for (size_t c = 0; c < hs->lay.nchunks; c++) {
        jf_data_view v = jf_stream_view(&hs->lay, hs->buf + c * hs->lay.ncols * hs->lay.chunk, weighted);
        jf_kernels_normal_eq(hs->k, p, &v, 0, jf_stream_chunk_len(&hs->lay, c), loss, hs->f_scale,
                             hs->tmp);
        for (size_t i = 0; i < hs->nacc; i++) acc[i] += hs->tmp[i];
    }
    hs->passes++;
}

static void op_normal_eq(void *ctx, const double *p, jf_loss loss, double *acc) {
    stream_pass(ctx, p, loss, 1, acc);
}

static void op_jacobian(void *ctx, const double *p, double *r, double *J) {
    host_stream *hs = ctx;
    for (size_t c = 0; c < hs->lay.nchunks; c++) {
        jf_data_view v = jf_stream_view(&hs->lay, hs->buf + c * hs->lay.ncols * hs->lay.chunk, 1);
        size_t b = c * hs->lay.chunk;
        jf_kernels_jacobian_row(hs->k, p, &v, 0, jf_stream_chunk_len(&hs->lay, c), r + b,
                                J + b * hs->np);
    }
    hs->passes++; /* the polish's, and the iteration's last trial point (lm.c) */
}

static void op_residual_sums(void *ctx, const double *p, double sums[2]) {
    host_stream *hs = ctx;
    double *acc = malloc(hs->nacc * sizeof *acc);
    if (!acc) {
        sums[0] = sums[1] = NAN;
        return;
    }
    stream_pass(hs, p, JF_LOSS_LINEAR, 1, acc);
    sums[0] = sums[1] = acc[hs->nacc - 1];
    if (hs->lay.weighted) {
        stream_pass(hs, p, JF_LOSS_LINEAR, 0, acc);
        sums[0] = acc[hs->nacc - 1];
    }
    free(acc);
}

static const jf_problem_ops host_stream_ops = {op_normal_eq, op_jacobian, op_residual_sums};

/* A streamed copy of d (n points of m's nv variables) in chunks of `chunk` points. */
static void host_stream_init(host_stream *hs, const jf_model *m, const jf_kernels *k,
                             const jf_data_view *d, size_t n, int weighted, size_t chunk) {
    memset(hs, 0, sizeof *hs);
    jf_stream_layout_init(&hs->lay, n, m->nv, weighted, chunk);
    hs->buf = malloc(hs->lay.nchunks * hs->lay.ncols * chunk * sizeof(double));
    hs->k = k;
    hs->np = m->np;
    hs->nacc = m->np * (m->np + 1) / 2 + m->np + 1;
    hs->f_scale = 0.7;
    hs->tmp = malloc(hs->nacc * sizeof(double));
    jf_stream_fill(&hs->lay, d, hs->buf);
}

static void host_stream_free(host_stream *hs) {
    free(hs->tmp);
    free(hs->buf);
}

static void test_chunk_sums(const jf_model *m, const jf_kernels *k, size_t n, int weighted,
                            size_t chunk) {
    size_t nv = m->nv, np = m->np, nacc = np * (np + 1) / 2 + np + 1;
    double *x = malloc(nv * n * sizeof *x), *y = malloc(n * sizeof *y), *w = malloc(n * sizeof *w);
    make_data(n, nv, x, y, w);
    jf_data_view d = {x, n, y, weighted ? w : NULL};
    host_stream hs;
    host_stream_init(&hs, m, k, &d, n, weighted, chunk);
    double p[8] = {2.4, 0.28, 1.65, 0.35, 0.45, 0.1, 0.2, 0.3};
    double *one = malloc(nacc * sizeof *one), *ref = malloc(nacc * sizeof *ref);
    double *tot = malloc(nacc * sizeof *tot);
    static const jf_loss losses[] = {JF_LOSS_LINEAR, JF_LOSS_SOFT_L1, JF_LOSS_CAUCHY};
    for (size_t li = 0; li < sizeof losses / sizeof *losses; li++) {
        jf_loss loss = losses[li];
        size_t differ = 0;
        for (size_t c = 0; c < hs.lay.nchunks; c++) {
            jf_data_view v = jf_stream_view(&hs.lay, hs.buf + c * hs.lay.ncols * chunk, 1);
            size_t b = c * chunk, len = jf_stream_chunk_len(&hs.lay, c);
            jf_kernels_normal_eq(k, p, &v, 0, len, loss, hs.f_scale, one);
            jf_kernels_normal_eq(k, p, &d, b, b + len, loss, hs.f_scale, ref);
            differ += memcmp(one, ref, nacc * sizeof *one) != 0;
        }
        CHECK(differ == 0);
        if (differ)
            fprintf(stderr, "chunk sums n=%zu chunk=%zu loss=%d: %zu chunks differ\n", n, chunk,
                    (int)loss, differ);
        stream_pass(&hs, p, loss, 1, tot);
        jf_kernels_normal_eq(k, p, &d, 0, n, loss, hs.f_scale, ref);
        double dev = sums_dev(tot, ref, np);
        CHECK(dev <= 1e-12);
        if (dev > 1e-12)
            fprintf(stderr, "streamed total n=%zu chunk=%zu loss=%d: deviation %.3g\n", n, chunk,
                    (int)loss, dev);
    }
    free(one);
    free(ref);
    free(tot);
    host_stream_free(&hs);
    free(x);
    free(y);
    free(w);
}

/* One fit with jf_lm_solve, its passes in memory or streamed. Returns the solution in x. */
static jf_lm_state solve(const jf_kernels *k, const jf_data_view *d, size_t n, size_t np,
                         jf_loss loss, host_stream *hs, double *x) {
    jf_problem prob;
    CHECK(jf_problem_init(&prob, k, d, n, np, loss, 0.7, NULL) == JF_OK);
    if (hs) {
        prob.ops = &host_stream_ops;
        prob.ops_ctx = hs;
    }
    double lo[8], hi[8];
    for (size_t j = 0; j < np; j++) {
        lo[j] = -INFINITY;
        hi[j] = INFINITY;
    }
    jf_lm_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.lo = lo;
    cfg.hi = hi;
    cfg.ftol = cfg.xtol = cfg.gtol = 1e-10;
    cfg.max_nfev = 500;
    static const double x0[8] = {2.0, 0.25, 1.6, 0.3, 0.4, 0, 0, 0};
    memcpy(x, x0, np * sizeof *x);
    jf_lm_state st;
    CHECK(jf_lm_solve(&prob, &cfg, x, &st) == JF_OK);
    jf_problem_free(&prob);
    return st;
}

static void test_streamed_fit(const jf_model *m, const jf_kernels *k, size_t n, int weighted,
                              jf_loss loss, size_t chunk) {
    size_t nv = m->nv, np = m->np;
    double *x = malloc(nv * n * sizeof *x), *y = malloc(n * sizeof *y), *w = malloc(n * sizeof *w);
    make_data(n, nv, x, y, w);
    jf_data_view d = {x, n, y, weighted ? w : NULL};
    host_stream hs;
    host_stream_init(&hs, m, k, &d, n, weighted, chunk);

    double xa[8], xb[8];
    jf_lm_state a = solve(k, &d, n, np, loss, NULL, xa);
    jf_lm_state b = solve(k, &d, n, np, loss, &hs, xb);
    CHECK(hs.passes >= b.nfev - b.polish); /* the streamed passes really ran */
    int conv_a = a.status >= JF_FIT_FTOL && a.status <= JF_FIT_GTOL;
    int conv_b = b.status >= JF_FIT_FTOL && b.status <= JF_FIT_GTOL;
    CHECK(conv_a && conv_b);
    /* polished fits land on the least-squares solution to ~1e-12; without the polish a fit
     * stops on its cost, which fixes the parameters to about √ε (test_resident explains) */
    int polished = loss == JF_LOSS_LINEAR && n * np <= JF_LM_MATERIALIZE_MAX;
    double ptol = polished ? 1e-10 : 1e-6, worst = 0;
    for (size_t j = 0; j < np; j++) {
        double e = fabs(xa[j] - xb[j]) / fmax(fabs(xa[j]), 1e-300);
        if (e > worst) worst = e;
    }
    CHECK(worst <= ptol);
    CHECK_NEAR(b.cost, a.cost, 1e-12);
    /* a polished fit evaluates no point twice: the iteration's last trial point is evaluated by
     * the triangle pass the polish starts from (lm.c), so every pass is one counted evaluation */
    if (polished && !CHECK(hs.passes == b.nfev))
        fprintf(stderr, "  ^ %lu passes for nfev %zu\n", hs.passes, b.nfev);
    printf("streamed fit n=%zu chunk=%zu w=%d loss=%d: %zu chunks, %s, params within %.2g, costs "
           "%.17g / %.17g\n", n, chunk, weighted, (int)loss, hs.lay.nchunks,
           polished ? "polished" : "not polished", worst, a.cost, b.cost);
    jf_lm_state_free(&a);
    jf_lm_state_free(&b);
    host_stream_free(&hs);
    free(x);
    free(y);
    free(w);
}

/* ---- batches ------------------------------------------------------------------------------ */

static void test_batch_pack(const jf_model *m, const jf_kernels *k) {
    enum { NF = 4 };
    static const size_t len[NF] = {7, 20, 1, 13};
    size_t nv = m->nv, np = m->np, nacc = np * (np + 1) / 2 + np + 1, total = 0;
    for (int f = 0; f < NF; f++) total += len[f];
    double *xs[NF], *ys[NF], *ws[NF];
    jf_batch_fit fits[NF];
    for (int f = 0; f < NF; f++) {
        size_t ld = len[f] + 3; /* a leading dimension larger than the fit */
        xs[f] = malloc(nv * ld * sizeof(double));
        ys[f] = malloc(ld * sizeof(double));
        ws[f] = malloc(ld * sizeof(double));
        make_data(ld, nv, xs[f], ys[f], ws[f]);
        for (size_t i = 0; i < ld; i++) ys[f][i] += 0.1 * f;
        fits[f].n = len[f];
        fits[f].x = xs[f];
        fits[f].ldx = ld;
        fits[f].y = ys[f];
        fits[f].w = f == 1 ? NULL : ws[f]; /* one fit without sigma */
        fits[f].x0 = NULL;
    }
    double *x = malloc(nv * total * sizeof *x), *y = malloc(total * sizeof *y);
    double *w = malloc(total * sizeof *w);
    unsigned long long off[NF + 1];
    CHECK(jf_batch_pack(fits, NF, nv, total, x, y, w, off) == total);
    CHECK(off[0] == 0 && off[NF] == total);
    size_t bad = 0;
    double p[8] = {2.4, 0.28, 1.65, 0.35, 0.45, 0.1, 0.2, 0.3};
    double *one = malloc(nacc * sizeof *one), *ref = malloc(nacc * sizeof *ref);
    for (int f = 0; f < NF; f++) {
        CHECK(off[f + 1] - off[f] == len[f]);
        for (size_t i = 0; i < len[f]; i++) {
            size_t g = off[f] + i;
            for (size_t j = 0; j < nv; j++) bad += x[j * total + g] != xs[f][j * fits[f].ldx + i];
            bad += y[g] != ys[f][i];
            bad += w[g] != (fits[f].w ? fits[f].w[i] : 1.0);
        }
        jf_data_view packed = {x, total, y, w}, own = {xs[f], fits[f].ldx, ys[f], fits[f].w};
        jf_kernels_normal_eq(k, p, &packed, off[f], off[f + 1], JF_LOSS_LINEAR, 1.0, one);
        jf_kernels_normal_eq(k, p, &own, 0, len[f], JF_LOSS_LINEAR, 1.0, ref);
        CHECK(memcmp(one, ref, nacc * sizeof *one) == 0);
    }
    CHECK(bad == 0);
    /* an unweighted batch packs no weights */
    double sentinel = -42.0;
    w[0] = sentinel;
    CHECK(jf_batch_pack(fits, NF, nv, total, x, y, NULL, off) == total);
    CHECK(w[0] == sentinel);
    /* nor x or y where they go to the device as they are (shared x, y in one array): offsets
     * and weights only */
    x[0] = y[0] = sentinel;
    w[off[2]] = sentinel;
    unsigned long long off2[NF + 1];
    CHECK(jf_batch_pack(fits, NF, nv, total, NULL, NULL, w, off2) == total);
    CHECK(x[0] == sentinel && y[0] == sentinel && w[off[2]] == fits[2].w[0]);
    CHECK(memcmp(off, off2, sizeof off) == 0);
    free(one);
    free(ref);
    free(x);
    free(y);
    free(w);
    for (int f = 0; f < NF; f++) {
        free(xs[f]);
        free(ys[f]);
        free(ws[f]);
    }
}

int main(void) {
    /* layouts alone, including one point per chunk and a single chunk */
    static const size_t chunks[] = {1, 7, 250, 1003, 5000};
    for (size_t nv = 0; nv <= 3; nv++)
        for (int weighted = 0; weighted <= 1; weighted++)
            for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++)
                test_fill(1003, nv, weighted, chunks[c]);

    jf_model *m1 = compile("a*exp(-b*x)*sin(c*x+d)+e", NULL, 0);
    static const char *const vars2[] = {"x", "t"};
    jf_model *m2 = compile("a*exp(-b*x)*sin(c*x+d)+e+f*t", vars2, 2);
    if (!m1 || !m2) {
        jf_model_free(m1);
        jf_model_free(m2);
        return jf_test_finish();
    }
    jf_kernels *k1 = kernels(m1), *k2 = kernels(m2);
    if (k1 && k2) {
        for (int weighted = 0; weighted <= 1; weighted++)
            for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
                test_chunk_sums(m1, k1, 1003, weighted, chunks[c]);
                test_chunk_sums(m2, k2, 1003, weighted, chunks[c]);
            }
        /* polished (n·p small) and unpolished (robust loss; n·p above the materialize limit) */
        test_streamed_fit(m1, k1, 2000, 0, JF_LOSS_LINEAR, 333);
        test_streamed_fit(m1, k1, 2000, 1, JF_LOSS_LINEAR, 1000);
        test_streamed_fit(m2, k2, 2000, 1, JF_LOSS_LINEAR, 77);
        test_streamed_fit(m1, k1, 2000, 1, JF_LOSS_SOFT_L1, 333);
        test_streamed_fit(m1, k1, 40000, 0, JF_LOSS_LINEAR, 6000);
        test_batch_pack(m1, k1);
        test_batch_pack(m2, k2);
    }
    jf_kernels_free(k1);
    jf_kernels_free(k2);
    jf_model_free(m1);
    jf_model_free(m2);
    return jf_test_finish();
}
