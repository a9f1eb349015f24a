/* The GPU solver on a GPU (CTest label "gpu"; skipped with the reason where there is none).
 *
 * Against the CPU solver through the public API: every NIST problem from both starts and the
 * damped sine with 1000 points (both polished: parameters equal to 1e-10 relative), the damped
 * sine with 10⁶ points (unpolished: costs equal to 1e-12, parameters within 1e-3 standard
 * errors, as test_resident explains; 4·10⁴ under the emulator), a robust loss with bounds,
 * sigma. Also: one host
 * synchronization per fit with WHILE graph nodes (and few without: JITFIT_GPU_NO_WHILE), two
 * runs bit-identical, single precision within 0.01 standard errors of fp64, data larger than a
 * forced memory limit streamed in chunks with the in-memory answer, or, when not even the chunk
 * buffers fit, fitted on the CPU with a note,
 * `jitfit fit --device gpu -v` reports the synchronizations (`--group` on the GPU prints the
 * CPU's table), and a batch of 300 fits of
 * different lengths in one launch equals the CPU batch (fp64 to 1e-10, parameters, standard errors
 * and statistics from the finish on the device; fp32 to 0.01 s.e.), and a
 * 60-parameter sum of peaks equals the CPU fit to 1e-10 (through the many-parameter path:
 * J in chunks, cuBLAS, p×p factorizations by cuSOLVER or by the kernel), as do the NIST
 * problems and the damped sine with that path forced (one cuSOLVER round per pass), streamed
 * too (with and without sigma). The staged upload (solver/gpu_upload.c) delivers what was sent
 * and gives the direct upload's fit bit for bit (its R², summed on the host while the loop
 * runs, that of a long-double sum); a pass over 1024 blocks reduces to the
 * interpreter's sums, bit-identical twice.
 */
#include <pthread.h>
#include <stdlib.h>

#include "codegen/emit.h"
#include "runtime/cuda_api.h"
#include "runtime/cuda_emu.h"
#include "solver/solver.h"
#include "runtime/device.h"
#include "runtime/jit_nvrtc.h"
#include "runtime/kernels.h"
#include "tests/nist_data.h"

static int have_while;
static void sine(size_t n, double *x, double *y, double *sig);

/* One upload of bytes (a pattern seeded by seed) in the given mode, read back: 1 when what
 * arrived is what was sent, *how the way it took. No CHECKs: threads call it. */
static int upload_round_trip(size_t bytes, int mode, unsigned seed, int *how) {
    char why[256];
    unsigned char *h = malloc(bytes + 1), *back = malloc(bytes + 1);
    jf_devptr d = 0;
    int ok = h && back && jf_cuda_alloc(&d, bytes + 1, why, sizeof why) == JF_OK;
    if (ok) {
        for (size_t i = 0; i < bytes; i++) h[i] = (unsigned char)((i * 2654435761u + seed) >> 13);
        ok = jf_gpu_upload(d, h, bytes, mode, how, why, sizeof why) == JF_OK &&
             jf_cuda_to_host(back, d, bytes, why, sizeof why) == JF_OK &&
             memcmp(h, back, bytes) == 0;
        jf_cuda_free(d);
    }
    if (!ok) printf("upload of %zu bytes (mode %d) failed or arrived changed\n", bytes, mode);
    free(h);
    free(back);
    return ok;
}

/* Pieces in one staged upload (jf_gpu_upload_pieces, as a fit's x, y and weights go up):
 * staging chunks that hold the end of one piece and the start of the next, an empty piece, a
 * piece that ends a chunk exactly, a last piece of one byte. 1 when each arrived as sent. */
static int upload_pieces(size_t sb) {
    size_t bytes[] = {sb / 3, 0, 2 * sb + 5, sb - (sb / 3 + 2 * sb + 5) % sb, sb + 17, 1};
    enum { NPC = sizeof bytes / sizeof *bytes };
    size_t total = 0;
    for (int i = 0; i < NPC; i++) total += bytes[i];
    unsigned char *h = malloc(total), *back = malloc(total);
    jf_devptr d = 0;
    char why[256];
    int ok = h && back && jf_cuda_alloc(&d, total + 1, why, sizeof why) == JF_OK, how = -1;
    if (ok) {
        for (size_t i = 0; i < total; i++) h[i] = (unsigned char)((i * 2654435761u + 5) >> 11);
        /* each piece to the place of the one NPC − 1 − i pieces later in the source order */
        jf_gpu_piece pc[NPC];
        size_t at = 0, dst[NPC];
        for (int i = NPC - 1; i >= 0; i--) {
            dst[i] = at;
            at += bytes[i];
        }
        for (size_t i = 0, src = 0; i < NPC; src += bytes[i], i++)
            pc[i] = (jf_gpu_piece){d + dst[i], h + src, bytes[i], 0};
        ok = jf_gpu_upload_pieces(pc, NPC, JF_UPLOAD_STAGED, &how, NULL, why, sizeof why) ==
                 JF_OK &&
             how == JF_UPLOAD_STAGED && jf_cuda_to_host(back, d, total, why, sizeof why) == JF_OK;
        for (size_t i = 0, src = 0; ok && i < NPC; src += bytes[i], i++)
            ok = memcmp(h + src, back + dst[i], bytes[i]) == 0;
        jf_cuda_free(d);
    }
    if (!ok) printf("upload of %d pieces failed or arrived changed\n", (int)NPC);
    free(h);
    free(back);
    return ok;
}

typedef struct upload_arg {
    size_t bytes;
    unsigned seed;
    int ok;
} upload_arg;

static void *upload_thread(void *arg) {
    upload_arg *a = arg;
    char why[256];
    int how;
    a->ok = jf_cuda_init(why, sizeof why) == JF_OK &&
            upload_round_trip(a->bytes, JF_UPLOAD_STAGED, a->seed, &how);
    return NULL;
}

/* One normal_eq pass over more points than its grid has threads (the grid's cap: 1024 blocks),
 * so that jf_reduce_blocks' threads each add several blocks' rows: the sums equal the
 * interpreter's to rounding, and two passes are bit-identical. The fits' passes elsewhere here
 * have fewer rows than a block has threads under the emulator. */
static void test_many_blocks(void) {
    jf_model *m = NULL;
    if (!CHECK(jf_model_compile("a*exp(-b*x)*sin(c*x+d)+e", (size_t)-1, NULL, &m, NULL) == JF_OK))
        return;
    const size_t n = (size_t)JF_LM_CUDA_MAX_GRID * JF_CUDA_BLOCK + 777, nacc = 21;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *sg = malloc(n * sizeof *sg);
    double p[5] = {2.4, 0.31, 1.68, 0.41, 0.52}, a1[21], a2[21], ref[21];
    char why[512];
    jf_jit_options o;
    memset(&o, 0, sizeof o);
    jf_cuda_kernels *ck = NULL;
    jf_kernels *ik = NULL;
    sine(n, x, y, sg);
    if (CHECK(x && y && sg) &&
        CHECK(jf_cuda_kernels_get(m, &o, -1, &ck, NULL, why, sizeof why, NULL, 0) == JF_OK) &&
        CHECK(jf_kernels_get(m, JF_BACKEND_INTERP, &o, &ik, NULL) == JF_OK) &&
        CHECK(jf_cuda_normal_eq(ck, p, x, n, y, sg, n, JF_LOSS_LINEAR, 1.0, a1, why,
                                sizeof why) == JF_OK) &&
        CHECK(jf_cuda_normal_eq(ck, p, x, n, y, sg, n, JF_LOSS_LINEAR, 1.0, a2, why,
                                sizeof why) == JF_OK)) {
        jf_data_view v = {x, n, y, sg};
        jf_kernels_normal_eq(ik, p, &v, 0, n, JF_LOSS_LINEAR, 1.0, ref);
        CHECK(memcmp(a1, a2, sizeof a1) == 0);
        /* each sum against the scale of its terms: √(A_aa·A_bb), √(A_aa·cost), cost */
        double diag[6], worst = 0;
        for (size_t a = 0, t = 0; a < 5; t += 5 - a, a++) diag[a] = ref[t];
        diag[5] = ref[nacc - 1];
        size_t q = 0;
        for (size_t a = 0; a < 5; a++) /* JᵀJ's upper triangle, row by row */
            for (size_t b = a; b < 5; b++, q++)
                worst = fmax(worst, fabs(a1[q] - ref[q]) / sqrt(diag[a] * diag[b]));
        for (size_t a = 0; a < 5; a++, q++) /* Jᵀr */
            worst = fmax(worst, fabs(a1[q] - ref[q]) / sqrt(diag[a] * diag[5]));
        worst = fmax(worst, fabs(a1[q] - ref[q]) / diag[5]); /* Σr² */
        printf("normal_eq over %zu points (1024 blocks' rows): within %.2g of the interpreter, "
               "bit-identical twice\n", n, worst);
        CHECK(worst <= 1e-12);
    }
    jf_cuda_kernels_free(ck);
    jf_kernels_free(ik);
    free(x);
    free(y);
    free(sg);
    jf_model_free(m);
}

/* The error of a fit of d under o on dev with the upload mode `mode` ($JITFIT_GPU_UPLOAD, NULL
 * for the default), malloc'd ("" when it succeeded); *code its status. */
static char *fit_error(const jf_model *m, const jf_data *d, jf_fit_options o, jf_device dev,
                       const char *mode, int *code) {
    if (mode) setenv("JITFIT_GPU_UPLOAD", mode, 1);
    o.device = dev;
    jf_fit_result *r = NULL;
    char *err = NULL;
    *code = jf_fit(m, d, &o, &r, &err);
    unsetenv("JITFIT_GPU_UPLOAD");
    jf_fit_result_free(r);
    char *e = strdup(err ? err : "");
    jf_free(err);
    return e;
}

/* A fit's x and y are tested for values that are not finite on their staged way up, not in a
 * scan of their own (solver/fit.c, check_data's deferred scans): a NaN or infinity anywhere —
 * the first value, either side of a staging buffer's end, the last — gives the CPU's error
 * naming the first such point, staged, direct and on the CPU by auto; with a bad sigma too,
 * the data's error first, as on the CPU. d has sigma; its values are restored. */
static void upload_checks(const jf_model *m, const jf_data *d, const jf_fit_options *o) {
    double *x = (double *)d->x, *y = (double *)d->y, *sg = (double *)d->sigma;
    size_t n = d->n, per = jf_gpu_upload_stage_bytes() / sizeof(double);
    size_t at[] = {0, 1, per - 1, per, n - 1, 2 * per + 3};
    const char *modes[] = {"staged", "direct", NULL};
    int bad = 0, runs = 0;
    for (size_t k = 0; k < sizeof at / sizeof *at; k++) {
        for (int which = 0; which < 3; which++) { /* y NaN, x +inf, both (x first: later) */
            size_t i = at[k], j = which == 2 ? (i + 7) % n : i;
            double keep_y = y[i], keep_x = x[j];
            if (which != 1) y[i] = NAN;
            if (which != 0) x[j] = INFINITY;
            int cc, cg;
            char *want = fit_error(m, d, *o, JF_DEVICE_CPU, NULL, &cc);
            CHECK(cc == JF_ERR_DATA && strstr(want, "is not finite"));
            for (int md = 0; md < 3; md++) {
                char *got = fit_error(m, d, *o, md < 2 ? JF_DEVICE_GPU : JF_DEVICE_AUTO, modes[md],
                                      &cg);
                runs++;
                if (!CHECK(cg == cc && strcmp(got, want) == 0)) {
                    printf("  point %zu, case %d, %s: \"%s\", the CPU \"%s\"\n", i, which,
                           modes[md] ? modes[md] : "auto", got, want);
                    bad++;
                }
                free(got);
            }
            free(want);
            y[i] = keep_y;
            x[j] = keep_x;
        }
    }
    /* x's error before sigma's (check_data's order), staged */
    double keep_x = x[5], keep_s = sg[3];
    x[5] = NAN;
    sg[3] = -1.0;
    int cc, cg;
    char *want = fit_error(m, d, *o, JF_DEVICE_CPU, NULL, &cc);
    char *got = fit_error(m, d, *o, JF_DEVICE_GPU, "staged", &cg);
    CHECK(cc == JF_ERR_DATA && cg == cc);
    CHECK_STREQ(got, want);
    CHECK_STREQ(want, "point 6: variable 'x' is not finite");
    free(want);
    free(got);
    x[5] = keep_x;
    sg[3] = keep_s;
    printf("upload: values that are not finite, tested on the way up: %d of %d errors as the "
           "CPU's\n", runs - bad, runs);
}

/* The fit's upload through the page-locked staging buffers (solver/gpu_upload.c): what arrives is
 * what was sent, from chunks of the staging buffers' size and its odd ends, from two threads at
 * once (the second staged or direct), and a fit whose data go up staged equals the direct one
 * bit for bit. `test_gpu upload` runs it with 4 KiB buffers (JITFIT_GPU_STAGE). */
static void test_upload(void) {
    size_t sb = jf_gpu_upload_stage_bytes();
    if (!CHECK(sb >= 4096)) return;
    printf("upload: staging buffers of %zu bytes\n", sb);
    size_t sizes[] = {1, 4095, sb, 2 * sb, 3 * sb + 8, 7 * sb / 2 + 5};
    int how = -1;
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        CHECK(upload_round_trip(sizes[k], JF_UPLOAD_STAGED, (unsigned)k, &how));
        CHECK(how == JF_UPLOAD_STAGED);
        CHECK(upload_round_trip(sizes[k], JF_UPLOAD_DIRECT, (unsigned)k + 100, &how));
        CHECK(how == JF_UPLOAD_DIRECT);
    }
    CHECK(upload_round_trip(1000, JF_UPLOAD_AUTO, 7, &how) && how == JF_UPLOAD_DIRECT);
    CHECK(upload_pieces(sb));
    pthread_t th[2];
    upload_arg ua[2] = {{5 * sb + 3, 11, 0}, {4 * sb + 1, 12, 0}};
    int started[2];
    for (int t = 0; t < 2; t++)
        started[t] = pthread_create(&th[t], NULL, upload_thread, &ua[t]) == 0;
    for (int t = 0; t < 2; t++)
        if (CHECK(started[t])) {
            pthread_join(th[t], NULL);
            CHECK(ua[t].ok);
        }

    jf_model *m = NULL;
    if (!CHECK(jf_model_compile("a*exp(-b*x)*sin(c*x+d)+e", (size_t)-1, NULL, &m, NULL) == JF_OK))
        return;
    size_t n = 3 * sb / sizeof(double) + 77; /* x and y: 3 buffers and some each */
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *sg = malloc(n * sizeof *sg);
    double p0[5] = {2, 0.25, 1.6, 0.3, 0.4};
    jf_fit_options o = jf_fit_options_default();
    o.p0 = p0;
    o.device = JF_DEVICE_GPU;
    sine(n, x, y, sg);
    jf_data d = {n, x, 0, y, sg};
    jf_fit_result *a = NULL, *b = NULL;
    setenv("JITFIT_GPU_UPLOAD", "staged", 1);
    int ok = CHECK(jf_fit(m, &d, &o, &a, NULL) == JF_OK);
    setenv("JITFIT_GPU_UPLOAD", "direct", 1);
    ok = CHECK(jf_fit(m, &d, &o, &b, NULL) == JF_OK) && ok;
    unsetenv("JITFIT_GPU_UPLOAD");
    if (ok) {
        CHECK_CONTAINS(a->device_note, "data to the GPU");
        CHECK_CONTAINS(a->device_note, " ms (staged)");
        CHECK_CONTAINS(b->device_note, " ms (direct)");
        /* R²'s host sums ran before the loop's first read (which waits for it on a GPU) */
        CHECK(strstr(a->device_note, "ordering bug") == NULL);
        CHECK(strstr(b->device_note, "ordering bug") == NULL);
        CHECK(a->backend == JF_BACKEND_CUDA && a->cost == b->cost && a->nfev == b->nfev);
        CHECK(memcmp(a->params, b->params, 5 * sizeof(double)) == 0);
        /* R²'s sums over y, done on the host while the loop ran: R² of the fit's parameters
         * summed here in long double */
        long double sy = 0, tss = 0, ssu = 0;
        for (size_t i = 0; i < n; i++) sy += y[i];
        const double *q = a->params;
        for (size_t i = 0; i < n; i++) {
            long double dy = y[i] - sy / (long double)n;
            long double f = q[0] * expl(-q[1] * x[i]) * sinl(q[2] * x[i] + q[3]) + q[4] - y[i];
            tss += dy * dy;
            ssu += f * f;
        }
        CHECK(a->r_squared == b->r_squared);
        CHECK(fabs(a->r_squared - (double)(1 - ssu / tss)) <= 1e-12);
        printf("upload: %zu points with sigma, staged and direct: the same fit (cost %.17g)\n", n,
               a->cost);
    }
    jf_fit_result_free(a);
    jf_fit_result_free(b);
    upload_checks(m, &d, &o);
    free(x);
    free(y);
    free(sg);
    jf_model_free(m);
}

/* CPU and GPU fits of the same problem; tol: parameter agreement (relative), or negative for
 * the unpolished comparison. */
static void compare(const char *label, const jf_model *m, const jf_data *d, jf_fit_options o,
                    double tol) {
    jf_fit_result *c = NULL, *g = NULL;
    char *err = NULL;
    o.device = JF_DEVICE_CPU;
    int sc = jf_fit(m, d, &o, &c, &err);
    jf_free(err);
    err = NULL;
    o.device = JF_DEVICE_GPU;
    int sg = jf_fit(m, d, &o, &g, &err);
    if (sg != JF_OK) fprintf(stderr, "%s: GPU fit failed: %s\n", label, err ? err : "?");
    jf_free(err);
    if (!CHECK(sc == JF_OK && sg == JF_OK)) {
        jf_fit_result_free(c);
        jf_fit_result_free(g);
        return;
    }
    double dev = 0, dse = 0;
    for (size_t k = 0; k < c->num_params; k++) {
        dev = fmax(dev, fabs(c->params[k] - g->params[k]) / fmax(fabs(c->params[k]), 1e-2));
        if (isfinite(c->std_errors[k]) && c->std_errors[k] > 0)
            dse = fmax(dse, fabs(c->params[k] - g->params[k]) / c->std_errors[k]);
    }
    printf("%-22s status %d/%d nfev %3zu/%3zu syncs %zu  max rel. diff %.2g (%.2g s.e.)  "
           "cpu %.1f ms, gpu %.1f ms\n",
           label, c->status, g->status, c->nfev, g->nfev, g->host_syncs, dev, dse,
           c->time_solve_ms, g->time_solve_ms);
    CHECK(g->backend == JF_BACKEND_CUDA);
    CHECK_CONTAINS(g->device_note, "device loop: ");
    CHECK(c->success && g->success);
    if (tol > 0) {
        if (!CHECK(dev <= tol)) fprintf(stderr, "  ^ %s\n", label);
    } else {
        CHECK(dse <= 1e-3);
        CHECK(fabs(c->cost - g->cost) <= 1e-12 * c->cost);
    }
    if (have_while) CHECK(g->host_syncs == 1);
    else CHECK(g->host_syncs >= 1 && g->host_syncs <= g->iterations / 8 + 2);
    jf_fit_result_free(c);
    jf_fit_result_free(g);
}

static void test_nist(void) {
    char dir[512];
    FILE *tsv = nist_open(dir, sizeof dir);
    if (!CHECK(tsv != NULL)) return;
    static problem prob;
    long idx[MAXP];
    jf_model *m;
    while ((m = nist_next(tsv, dir, &prob, idx)) != NULL) {
        for (int s = 0; s < 2; s++) {
            double p0[MAXP];
            for (size_t k = 0; k < prob.np; k++) p0[idx[k]] = prob.start[s][k];
            jf_fit_options o = jf_fit_options_default();
            o.p0 = p0;
            jf_data d = {prob.n, prob.x, MAXN, prob.y, NULL};
            char label[64];
            snprintf(label, sizeof label, "%s start %d", prob.name, s + 1);
            compare(label, m, &d, o, 1e-10);
        }
        jf_model_free(m);
    }
    fclose(tsv);
}

/* Every NIST problem as a GPU batch of its two starts, a warp and then a block per fit, the
 * finish on the device (the polish's up to 60 Gauss-Newton steps on MGH09 and Thurber, J's
 * triangle from the threads' Givens rotations): equal to the CPU's single fits to 1e-10 in
 * parameters and standard errors (their ratio to √cost); both converge. */
static void test_batch_nist(void) {
    char dir[512];
    FILE *tsv = nist_open(dir, sizeof dir);
    if (!CHECK(tsv != NULL)) return;
    static problem prob;
    long idx[MAXP];
    jf_model *m;
    double worst = 0, worst_se = 0;
    int finished = 0, total = 0;
    /* a warp per fit, a block per fit, a thread per fit (forced: the defaults choose by length) */
    static const char *const kinds[] = {"a warp", "a block", "a thread"};
    while ((m = nist_next(tsv, dir, &prob, idx)) != NULL)
        for (int block = 0; block < 3; block++) {
        double p0[2 * MAXP];
        for (int s = 0; s < 2; s++)
            for (size_t k = 0; k < prob.np; k++) p0[s * prob.np + idx[k]] = prob.start[s][k];
        jf_data d[2] = {{prob.n, prob.x, MAXN, prob.y, NULL}, {prob.n, prob.x, MAXN, prob.y, NULL}};
        jf_fit_options o = jf_fit_options_default();
        jf_fit_result *rc[2] = {NULL, NULL}, *rg[2] = {NULL, NULL};
        o.device = JF_DEVICE_CPU;
        CHECK(jf_fit_batch(m, 2, d, p0, &o, rc, NULL) == JF_OK);
        o.device = JF_DEVICE_GPU;
        setenv("JITFIT_GPU_BATCH_BLOCK", block == 1 ? "1" : "1e9", 1);
        setenv("JITFIT_GPU_BATCH_THREAD", block == 2 ? "1e9" : "0", 1);
        CHECK(jf_fit_batch(m, 2, d, p0, &o, rg, NULL) == JF_OK);
        unsetenv("JITFIT_GPU_BATCH_BLOCK");
        unsetenv("JITFIT_GPU_BATCH_THREAD");
        for (int s = 0; s < 2; s++) {
            if (!CHECK(rc[s] && rg[s])) continue;
            char kind[64];
            /* beyond register sums (ENSO's 9 parameters) only the block kernel exists */
            snprintf(kind, sizeof kind, "%s per fit",
                     jf_batch_cuda_register_sums(prob.np) ? kinds[block] : "a block");
            CHECK_CONTAINS(rg[s]->device_note, kind);
            total++;
            finished += strstr(rg[s]->device_note, "finish (polish, J's triangle) included") != NULL;
            /* standard errors over √cost: Lanczos1's residuals are rounding noise (certified RSS
             * 1e-24), so its s² differs with any change in summation order */
            double e = 0, es = 0, sc = sqrt(rc[s]->cost / rg[s]->cost);
            for (size_t k = 0; k < prob.np; k++) {
                e = fmax(e, fabs(rg[s]->params[k] / rc[s]->params[k] - 1));
                es = fmax(es, fabs(rg[s]->std_errors[k] * sc / rc[s]->std_errors[k] - 1));
            }
            if (e > 1e-10 || es > 1e-10 || rg[s]->status != rc[s]->status)
                printf("  %s start %d (%s): parameters %.2g, standard errors %.2g, status %d/%d, nfev %zu/%zu\n",
                       prob.name, s + 1, kinds[block], e, es, rg[s]->status,
                       rc[s]->status, rg[s]->nfev, rc[s]->nfev);
            worst = fmax(worst, e);
            worst_se = fmax(worst_se, es);
            CHECK(rg[s]->success == rc[s]->success);
        }
        for (int s = 0; s < 2; s++) {
            jf_fit_result_free(rc[s]);
            jf_fit_result_free(rg[s]);
        }
        if (block == 2) jf_model_free(m);
    }
    fclose(tsv);
    printf("NIST problems as GPU batches (%d fits, %d finished on the device): max rel. diff from "
           "the CPU %.2g, standard errors %.2g\n", total, finished, worst, worst_se);
    CHECK(finished == total);
    CHECK(worst <= 1e-10);
    CHECK(worst_se <= 1e-10);
}

static void sine(size_t n, double *x, double *y, double *sig) {
    for (size_t i = 0; i < n; i++) {
        x[i] = 10.0 * (double)i / (double)(n - 1);
        y[i] = 2.5 * exp(-0.3 * x[i]) * sin(1.7 * x[i] + 0.4) + 0.5 + 0.05 * sin(12.9898 * (double)i);
        sig[i] = 0.05 + 0.01 * cos(0.37 * (double)i);
    }
}

/* More data than a (forced) memory limit that still holds two chunk buffers: streamed in
 * chunks of BIG/10 points, the same answer as in memory (same cost; parameters as far apart as
 * a different summation order allows without the polish); the limit is the option's. large:
 * the many-parameter path (forced by the caller), whose streamed loop waits once per
 * iteration instead of once per 8. Both ways of sending the chunks: from a page-locked copy
 * ($JITFIT_GPU_STREAM=pinned; graph copy nodes, or the copy stream), and staged from the
 * caller's arrays with each pass (the default; the host drives the loop), bit for bit the
 * same. */
static void test_streamed(const jf_model *m, const jf_data *db, jf_fit_options o, size_t BIG,
                          int large) {
    char chunk[64], note[128];
    snprintf(chunk, sizeof chunk, "%zu", BIG / 10);
    snprintf(note, sizeof note, "data streamed: 10 chunks of %zu points", BIG / 10);
    setenv("JITFIT_GPU_CHUNK", chunk, 1);
    setenv("JITFIT_GPU_STREAM", "pinned", 1);
    jf_fit_result *a = NULL, *b = NULL;
    jf_fit_options omem = o;
    omem.device = JF_DEVICE_GPU;
    /* in memory, less by half (plain path) or by one byte (the many-parameter path, whose
     * in-memory J chunks the caller has made small) */
    size_t need = jf_gpu_problem_bytes(BIG, 5, 0, 1, db->sigma != NULL);
    omem.max_gpu_mem = large ? need - 1 : need / 2;
    o.device = JF_DEVICE_GPU;
    if (CHECK(jf_fit(m, db, &omem, &b, NULL) == JF_OK)) {
        CHECK_CONTAINS(b->device_note, note);
        CHECK_CONTAINS(b->device_note, "per pass, from a page-locked copy");
        if (large) CHECK_CONTAINS(b->device_note, "JᵀJ and Jᵀr by cuBLAS");
        if (large) CHECK_CONTAINS(b->device_note, "kernels and cuBLAS on a stream, 1 iteration per wait");
        if (CHECK(jf_fit(m, db, &o, &a, NULL) == JF_OK)) {
            CHECK(a->success && b->success && b->backend == JF_BACKEND_CUDA);
            if (large) CHECK(b->host_syncs >= b->iterations && b->host_syncs <= b->iterations + 2);
            else if (have_while) CHECK(b->host_syncs == a->host_syncs);
            else { /* unrolled: one iteration per graph (leftovers would copy all data again) */
                CHECK_CONTAINS(b->device_note, "CUDA graphs of 1 iteration,");
                CHECK(b->host_syncs >= a->host_syncs && b->host_syncs <= b->iterations + 2);
            }
            CHECK(fabs(a->cost - b->cost) <= 1e-12 * a->cost);
            for (int k = 0; k < 5; k++)
                CHECK(fabs(a->params[k] - b->params[k]) <= 1e-3 * a->std_errors[k]);
            printf("streamed%s%s: %s; cost %.17g vs %.17g in memory\n", large ? ", many-parameter path" : "",
                   db->sigma ? ", sigma" : "", b->device_note, b->cost, a->cost);
        }
    }
    unsetenv("JITFIT_GPU_STREAM");
    /* the chunks (64 KB) go up directly by default; forced through the staging buffers too */
    for (int forced = 0; forced <= 1; forced++) {
        if (forced) setenv("JITFIT_GPU_UPLOAD", "staged", 1);
        jf_fit_result *st = NULL;
        if (b && CHECK(jf_fit(m, db, &omem, &st, NULL) == JF_OK)) {
            CHECK_CONTAINS(st->device_note, note);
            CHECK_CONTAINS(st->device_note, "per pass, staged from the caller's arrays");
            CHECK_CONTAINS(st->device_note,
                           large ? "kernels and cuBLAS on a stream, 1 iteration per wait"
                                 : "kernels on a stream, 1 iteration per wait");
            CHECK(st->success && st->backend == JF_BACKEND_CUDA);
            CHECK(st->cost == b->cost && st->iterations == b->iterations && st->nfev == b->nfev);
            for (int k = 0; k < 5; k++) {
                CHECK(st->params[k] == b->params[k]);
                CHECK(st->std_errors[k] == b->std_errors[k]);
            }
            /* a wait after each iteration (the start's too), and one per chunk for its buffer */
            CHECK(st->host_syncs >= st->iterations + 1 &&
                  st->host_syncs <= (st->iterations + 3) * 11);
            printf("streamed staged%s%s%s: %s\n", large ? ", many-parameter path" : "",
                   db->sigma ? ", sigma" : "", forced ? ", JITFIT_GPU_UPLOAD=staged" : "",
                   st->device_note);
        }
        jf_fit_result_free(st);
        unsetenv("JITFIT_GPU_UPLOAD");
    }
    if (!large && b && jf_cuda_emulated()) {
        /* the GPU refuses the resident arrays its free memory said would fit (other work took
         * it meanwhile): streamed as above, not sent to the CPU. Only the emulator can be made
         * to refuse (JITFIT_CUDA_EMULATE_FAIL); a real driver ignores the variable. */
        char lim[64];
        snprintf(lim, sizeof lim, "alloc>%zu", BIG * sizeof(double) - 1);
        setenv("JITFIT_CUDA_EMULATE_FAIL", lim, 1);
        jf_fit_result *c = NULL;
        if (CHECK(jf_fit(m, db, &o, &c, NULL) == JF_OK)) {
            CHECK_CONTAINS(c->device_note, note);
            CHECK_CONTAINS(c->device_note, "(the GPU refused the data's memory in one piece)");
            CHECK(c->backend == JF_BACKEND_CUDA && c->cost == b->cost);
            for (int k = 0; k < 5; k++) CHECK(c->params[k] == b->params[k]);
        }
        unsetenv("JITFIT_CUDA_EMULATE_FAIL");
        jf_fit_result_free(c);
    }
    jf_fit_result_free(a);
    jf_fit_result_free(b);
    unsetenv("JITFIT_GPU_CHUNK");
}

/* A fit whose statistics need passes beyond the loop's (weights: Σ (f − y)²; a robust loss:
 * the linear-loss sums): the loop runs them behind its last iteration (no blocking call after
 * it, the WHILE form's one wait), with the very results of the passes after the loop
 * ($JITFIT_GPU_NO_TAIL), bit for bit. */
static void test_tails(const char *label, const jf_model *m, const jf_data *d, jf_fit_options o) {
    o.device = JF_DEVICE_GPU;
    jf_fit_result *t = NULL, *p = NULL;
    char *err = NULL;
    int st = jf_fit(m, d, &o, &t, &err);
    setenv("JITFIT_GPU_NO_TAIL", "1", 1);
    int sp = st == JF_OK ? jf_fit(m, d, &o, &p, &err) : st;
    unsetenv("JITFIT_GPU_NO_TAIL");
    if (!CHECK(st == JF_OK && sp == JF_OK)) {
        fprintf(stderr, "%s: %s\n", label, err ? err : "?");
    } else {
        printf("%s: %s\n  without the tail: %s\n", label, strstr(t->device_note, "device loop"),
               strstr(p->device_note, "device loop"));
        CHECK_CONTAINS(t->device_note, "(0 blocking calls after");
        CHECK(strstr(t->device_note, "ordering bug") == NULL); /* R²'s sums before the reads */
        CHECK(strstr(p->device_note, "(0 blocking calls after") == NULL);
        if (have_while) CHECK(t->host_syncs == 1);
        CHECK(memcmp(t->params, p->params, t->num_params * sizeof(double)) == 0);
        CHECK(t->cost == p->cost && t->ssr == p->ssr && t->chi2 == p->chi2);
        CHECK(t->r_squared == p->r_squared && t->optimality == p->optimality);
        CHECK(memcmp(t->std_errors, p->std_errors, t->num_params * sizeof(double)) == 0);
        CHECK(isfinite(t->r_squared) && t->r_squared > 0.5 && t->r_squared < 1.0);
        CHECK(isfinite(t->optimality));
    }
    jf_free(err);
    jf_fit_result_free(t);
    jf_fit_result_free(p);
}

/* test_tails on the damped sine's big data with sigma, in each form of the device loop: a
 * least-squares fit (Σ (f − y)²) and a robust one (both tails) with the WHILE node and with
 * unrolled graphs, the robust one on the many-parameter path. */
static void test_tail_modes(void) {
    jf_model *m = NULL;
    if (!CHECK(jf_model_compile("a*exp(-b*x)*sin(c*x+d)+e", (size_t)-1, NULL, &m, NULL) == JF_OK))
        return;
    const size_t BIG = jf_cuda_emulated() ? 40000 : 1000000; /* as test_sine's */
    double *x = malloc(BIG * sizeof *x), *y = malloc(BIG * sizeof *y), *sg = malloc(BIG * sizeof *sg);
    double p0[5] = {2, 0.25, 1.6, 0.3, 0.4};
    if (!CHECK(x && y && sg)) goto out;
    sine(BIG, x, y, sg);
    jf_data dw = {BIG, x, 0, y, sg};
    jf_fit_options o = jf_fit_options_default(), orw;
    o.p0 = p0;
    orw = o;
    orw.loss = JF_LOSS_SOFT_L1;
    orw.f_scale = 0.1;
    for (int mode = 0; mode < 2; mode++) {
        if (mode == 1) setenv("JITFIT_GPU_NO_WHILE", "1", 1);
        have_while = mode == 0 && jf_cuda_cond_nodes();
        printf("-- tails, device loop: %s\n", have_while ? "WHILE graph node" : "unrolled graphs");
        test_tails("big fit with sigma", m, &dw, o);
        test_tails("big soft_l1 with sigma", m, &dw, orw);
        if (mode == 0 && !jf_cuda_cond_nodes()) break;
    }
    unsetenv("JITFIT_GPU_NO_WHILE");
    setenv("JITFIT_GPU_LARGE_P", "-1", 1);
    setenv("JITFIT_GPU_LP_CHUNK", "1000", 1);
    have_while = 0;
    printf("-- tails, device loop: many-parameter path\n");
    test_tails("large: soft_l1 with sigma", m, &dw, orw);
    unsetenv("JITFIT_GPU_LARGE_P");
    unsetenv("JITFIT_GPU_LP_CHUNK");
out:
    free(x);
    free(y);
    free(sg);
    jf_model_free(m);
}

/* large: the many-parameter path is forced, which has no fp32 model sums of its own: the
 * comparisons, determinism and streaming run. */
static void test_sine(int large) {
    jf_model *m = NULL;
    if (!CHECK(jf_model_compile("a*exp(-b*x)*sin(c*x+d)+e", (size_t)-1, NULL, &m, NULL) == JF_OK))
        return;
    /* 10⁶ points on a GPU; 4·10⁴ under the emulator (still unpolished: n·p > 2^17), whose
     * passes cost a second per 10⁵ points */
    const size_t BIG = jf_cuda_emulated() ? 40000 : 1000000;
    double *x = malloc(BIG * sizeof *x), *y = malloc(BIG * sizeof *y), *sg = malloc(BIG * sizeof *sg);
    double p0[5] = {2, 0.25, 1.6, 0.3, 0.4};
    jf_fit_options o = jf_fit_options_default();
    o.p0 = p0;
    sine(1000, x, y, sg);
    jf_data d = {1000, x, 0, y, NULL};
    compare("damped sine 1e3", m, &d, o, 1e-10);
    jf_data ds = {1000, x, 0, y, sg};
    compare("damped sine 1e3 sigma", m, &ds, o, 1e-10);
    /* fp32 on a polished fit: the polish's cost tolerance knows fp32's rounding, so its step is
     * kept (with fp64's tolerance it was refused on rounding noise); the fp64 answer to a small
     * fraction of a standard error */
    {
        jf_fit_options o32 = o;
        o32.device = JF_DEVICE_GPU;
        o32.single_precision = 1;
        jf_fit_result *a64 = NULL, *a32 = NULL;
        if (CHECK(jf_fit(m, &d, &o, &a64, NULL) == JF_OK && jf_fit(m, &d, &o32, &a32, NULL) == JF_OK)) {
            double d32 = 0;
            for (int k = 0; k < 5; k++)
                d32 = fmax(d32, fabs(a64->params[k] - a32->params[k]) / a64->std_errors[k]);
            printf("polished fit in fp32: within %.2g s.e. of fp64 (%s); %zu trial steps, fp64 "
                   "%zu\n", d32, a32->message, a32->iterations, a64->iterations);
            CHECK_CONTAINS(a32->message, "polish");
            CHECK(d32 <= 0.001);
            /* the loop's tests read the fp32 cost's rounding sum (jf_lmc_noise), as a batch's;
             * the many-parameter path's sums (cuBLAS) have none: 8 trial steps there */
            if (!strstr(a32->device_note ? a32->device_note : "", "cuBLAS"))
                CHECK(a32->iterations <= a64->iterations + 1);
        }
        jf_fit_result_free(a64);
        jf_fit_result_free(a32);
    }
    sine(BIG, x, y, sg);
    jf_data db = {BIG, x, 0, y, NULL};
    compare("damped sine big", m, &db, o, -1);
    jf_fit_options ol = o;
    ol.loss = JF_LOSS_SOFT_L1;
    ol.f_scale = 0.1;
    double lo[5] = {-INFINITY, 0.31, -INFINITY, -INFINITY, -INFINITY};
    double p0b[5] = {2, 0.35, 1.6, 0.3, 0.4};
    ol.lower = lo;
    ol.p0 = p0b;
    compare("big soft_l1 + bound", m, &db, ol, -1);
    /* nearly L1: the λ search for a singular system whose truncated step leaves the gradient
     * unexplained (test_solver's test_huber_nearly_l1) */
    jf_fit_options oh = o;
    oh.loss = JF_LOSS_HUBER;
    oh.f_scale = 0.001;
    double p0h[5] = {2, 0.3, 1.2, 0.3, 0};
    oh.p0 = p0h;
    jf_test_outlier_sine(22, 300, x, y);
    jf_data dh = {300, x, 0, y, NULL};
    compare("huber nearly L1", m, &dh, oh, 1e-10);

    /* determinism: the same GPU fit twice, bit for bit */
    o.device = JF_DEVICE_GPU;
    jf_fit_result *a = NULL, *b = NULL;
    if (CHECK(jf_fit(m, &db, &o, &a, NULL) == JF_OK && jf_fit(m, &db, &o, &b, NULL) == JF_OK))
        CHECK(memcmp(a->params, b->params, 5 * sizeof(double)) == 0 && a->cost == b->cost);
    /* an unpolished least-squares fit without weights takes its statistics from the loop's
     * last pass (SSR = 2·cost): no blocking call after the loop; with weights, or a robust
     * loss, from the tail passes the loop runs after its last iteration */
    if (a && !large) {
        CHECK(a->ssr == 2.0 * a->cost);
        CHECK_CONTAINS(a->device_note, "(0 blocking calls after");
    }

    jf_fit_result_free(a);
    jf_fit_result_free(b);
    if (large) { /* streamed through the many-parameter path, with and without sigma */
        test_streamed(m, &db, o, BIG, 1);
        jf_data dbs = {BIG, x, 0, y, sg};
        test_streamed(m, &dbs, o, BIG, 1);
        free(x);
        free(y);
        free(sg);
        jf_model_free(m);
        return;
    }

    /* single precision: fp32 model, fp64 sums (the polish's tolerance knows the fp32
     * rounding); within a hundredth of a standard error */
    jf_fit_options os = o;
    os.single_precision = 1;
    a = b = NULL;
    if (CHECK(jf_fit(m, &db, &o, &a, NULL) == JF_OK && jf_fit(m, &db, &os, &b, NULL) == JF_OK)) {
        CHECK(b->success && b->backend == JF_BACKEND_CUDA);
        double d32 = 0;
        for (int k = 0; k < 5; k++) d32 = fmax(d32, fabs(a->params[k] - b->params[k]) / a->std_errors[k]);
        printf("single fit in fp32: within %.2g s.e. of fp64 (%s)\n", d32, b->message);
        CHECK(d32 <= 0.01);
    }
    jf_fit_result_free(a);
    jf_fit_result_free(b);

    test_streamed(m, &db, o, BIG, 0);

    /* more data than the (forced) memory limit, too little even for streaming: the CPU fits
     * them, and says so */
    setenv("JITFIT_MAX_GPU_MEM", "50000", 1);
    a = NULL;
    if (CHECK(jf_fit(m, &db, &o, &a, NULL) == JF_OK)) {
        CHECK(a->success && a->backend != JF_BACKEND_CUDA && a->host_syncs == 0);
        CHECK_CONTAINS(a->device_note, "cpu: fell back from the GPU: the data need ");
    }
    jf_fit_result_free(a);
    /* a small fit (polished: its finish needs the whole Jacobian) is never streamed: the CPU
     * fits it, and says why */
    static double xsm[2000], ysm[2000], ssm[2000];
    sine(2000, xsm, ysm, ssm);
    jf_data small = {2000, xsm, 0, ysm, NULL};
    setenv("JITFIT_MAX_GPU_MEM", "1000", 1);
    a = NULL;
    if (CHECK(jf_fit(m, &small, &o, &a, NULL) == JF_OK)) {
        CHECK(a->success && a->backend != JF_BACKEND_CUDA);
        CHECK_CONTAINS(a->device_note, "is not streamed");
    }
    jf_fit_result_free(a);
    unsetenv("JITFIT_MAX_GPU_MEM");
    free(x);
    free(y);
    free(sg);
    jf_model_free(m);
}

/* Emulator only: a driver that refuses to build the WHILE form (it may, for reasons of its
 * own) costs the fit nothing but more synchronizations: the unrolled graphs run instead. */
static void test_while_refused(void) {
    jf_model *m = NULL;
    if (!CHECK(jf_model_compile("a*exp(-b*x)*sin(c*x+d)+e", (size_t)-1, NULL, &m, NULL) == JF_OK))
        return;
    static double x[1000], y[1000], sg[1000];
    sine(1000, x, y, sg);
    double p0[5] = {2, 0.25, 1.6, 0.3, 0.4};
    jf_fit_options o = jf_fit_options_default();
    o.p0 = p0;
    o.device = JF_DEVICE_GPU;
    jf_data d = {1000, x, 0, y, NULL};
    jf_fit_result *a = NULL, *b = NULL;
    CHECK(jf_fit(m, &d, &o, &a, NULL) == JF_OK);
    setenv("JITFIT_CUDA_EMULATE_FAIL", "while", 1);
    jf_cuda_emulate_reread();
    char *err = NULL;
    if (CHECK(jf_fit(m, &d, &o, &b, &err) == JF_OK) && a) {
        CHECK(b->success && b->backend == JF_BACKEND_CUDA);
        CHECK_CONTAINS(b->device_note, "CUDA graphs of 8 iterations");
        CHECK_CONTAINS(b->device_note, "no WHILE graph nodes (cannot add a WHILE node");
        CHECK(memcmp(a->params, b->params, 5 * sizeof(double)) == 0);
        printf("WHILE refused: %s\n", b->device_note);
    } else {
        fprintf(stderr, "WHILE refused: %s\n", err ? err : "?");
    }
    jf_free(err);
    unsetenv("JITFIT_CUDA_EMULATE_FAIL");
    jf_cuda_emulate_reread();
    jf_fit_result_free(a);
    jf_fit_result_free(b);
    jf_model_free(m);
}

/* Many parameters: a sum of 20 Gaussian peaks (60 parameters) on 2000 points, polished
 * (n·p ≤ 2^17), so GPU and CPU agree to 1e-10, on both GPU paths. */
static void test_peaks(void) {
    enum { PEAKS = 20, NP = 3 * PEAKS, N = 2000 };
    static char text[4096];
    size_t used = 0;
    for (int k = 0; k < PEAKS; k++)
        used += (size_t)snprintf(text + used, sizeof text - used, "%sA%d*exp(-(x-m%d)^2/(2*s%d^2))",
                                 k ? "+" : "", k, k, k);
    jf_model *m = NULL;
    if (!CHECK(jf_model_compile(text, (size_t)-1, NULL, &m, NULL) == JF_OK)) return;
    static double x[N], y[N], p0[NP];
    for (size_t i = 0; i < N; i++) {
        x[i] = 100.0 * (double)i / N;
        y[i] = 0.01 * (sin(12.9898 * (double)i) + cos(78.233 * (double)i));
    }
    for (int k = 0; k < PEAKS; k++) {
        double a = 1.0 + k % 3, mu = 100.0 * (k + 0.5) / PEAKS, sd = 100.0 / PEAKS / 6.0 * (1 + 0.1 * (k % 2));
        for (size_t i = 0; i < N; i++) y[i] += a * exp(-(x[i] - mu) * (x[i] - mu) / (2 * sd * sd));
        char name[16];
        snprintf(name, sizeof name, "A%d", k);
        p0[jf_model_param_index(m, name)] = a + 0.1;
        snprintf(name, sizeof name, "m%d", k);
        p0[jf_model_param_index(m, name)] = mu + 0.2;
        snprintf(name, sizeof name, "s%d", k);
        p0[jf_model_param_index(m, name)] = sd * 1.05;
    }
    jf_fit_options o = jf_fit_options_default();
    o.p0 = p0;
    jf_data d = {N, x, 0, y, NULL};
    /* the model's own (tiled) normal_eq kernel, the default at 60 parameters since the H200
     * measured it faster than the many-parameter path there (JF_GPU_LARGE_P); then that path,
     * forced, with the p×p factorizations by cuSOLVER (its default) and by the state machine */
    for (int k = 0; k < 3; k++) {
        if (k >= 1) setenv("JITFIT_GPU_LARGE_P", "16", 1);
        if (k == 2) setenv("JITFIT_GPU_FACTOR_ROUNDS", "0", 1);
        static const char *const label[] = {"20 peaks, 60 params", "20 peaks, cuBLAS, cuSOLVER",
                                            "20 peaks, cuBLAS, kernel Cholesky"};
        compare(label[k], m, &d, o, 1e-10);
        /* that went the way asked */
        jf_fit_result *g = NULL;
        jf_fit_options og = o;
        og.device = JF_DEVICE_GPU;
        if (CHECK(jf_fit(m, &d, &og, &g, NULL) == JF_OK) && k == 0) {
            CHECK(strstr(g->device_note, "by cuBLAS") == NULL);
        } else if (g) {
            CHECK_CONTAINS(g->device_note,
                           "60 parameters: J in 1 chunk of 2000 rows, JᵀJ and Jᵀr by cuBLAS, ");
            CHECK_CONTAINS(g->device_note, k == 2 ? "p×p factorizations in the kernel "
                                                    "(JITFIT_GPU_FACTOR_ROUNDS=0)"
                                                  : "p×p factorizations by cuSOLVER (2 per pass)");
        }
        jf_fit_result_free(g);
    }
    unsetenv("JITFIT_GPU_LARGE_P");
    unsetenv("JITFIT_GPU_FACTOR_ROUNDS");
    jf_model_free(m);
}

/* A batch of a model with more sums than registers hold (3 Gaussian lines on a constant: 10
 * parameters, 65 sums): a block per fit with tiled sums, equal to the CPU batch to 1e-10
 * (polished fits), for fits of different lengths, with sigma on some. */
static void test_batch_tiled(void) {
    jf_model *m = NULL;
    if (!CHECK(jf_model_compile("A1*exp(-(x-m1)^2/(2*s1^2))+A2*exp(-(x-m2)^2/(2*s2^2))+"
                                "A3*exp(-(x-m3)^2/(2*s3^2))+c",
                                (size_t)-1, NULL, &m, NULL) == JF_OK))
        return;
    enum { NF = 24, MAXPTS = 400, P = 10 };
    static double xs[NF][MAXPTS], ys[NF][MAXPTS], ss[NF][MAXPTS], p0[NF * P];
    static jf_data d[NF];
    const char *names[P] = {"A1", "m1", "s1", "A2", "m2", "s2", "A3", "m3", "s3", "c"};
    double truth[P] = {3, 2.5, 0.4, 2, 5, 0.6, 1.5, 7.5, 0.5, 0.3};
    for (int f = 0; f < NF; f++) {
        size_t n = 150 + (size_t)(f * 11 % 250);
        for (size_t i = 0; i < n; i++) {
            double x = 10.0 * (double)i / (double)(n - 1), v = truth[9];
            for (int l = 0; l < 3; l++) {
                double a = truth[3 * l] * (1 + 0.01 * f), mu = truth[3 * l + 1], sd = truth[3 * l + 2];
                v += a * exp(-(x - mu) * (x - mu) / (2 * sd * sd));
            }
            xs[f][i] = x;
            ys[f][i] = v + 0.02 * sin(12.9898 * (double)(i + 7 * f));
            ss[f][i] = 0.02 + 0.005 * cos(0.37 * (double)i);
        }
        d[f] = (jf_data){n, xs[f], 0, ys[f], f % 3 == 0 ? ss[f] : NULL};
        for (int k = 0; k < P; k++)
            p0[f * P + jf_model_param_index(m, names[k])] = truth[k] * (k % 3 == 1 ? 1.02 : 1.1);
    }
    static jf_fit_result *rc[NF], *rg[NF];
    jf_fit_options o = jf_fit_options_default();
    o.device = JF_DEVICE_CPU;
    CHECK(jf_fit_batch(m, NF, d, p0, &o, rc, NULL) == JF_OK);
    o.device = JF_DEVICE_GPU;
    CHECK(jf_fit_batch(m, NF, d, p0, &o, rg, NULL) == JF_OK);
    double dev = 0;
    for (int f = 0; f < NF; f++) {
        if (!CHECK(rc[f] && rg[f])) continue;
        CHECK(rg[f]->backend == JF_BACKEND_CUDA && rc[f]->success && rg[f]->success);
        if (f == 0) CHECK_CONTAINS(rg[f]->device_note, "batch: one launch");
        /* the device loop did the iterating (the host's polish alone would hide a dead loop) */
        CHECK(rg[f]->iterations >= 2 && rg[f]->iterations + 2 >= rc[f]->iterations &&
              rc[f]->iterations + 2 >= rg[f]->iterations);
        for (int k = 0; k < P; k++) {
            double a = rc[f]->params[k];
            dev = fmax(dev, fabs(rg[f]->params[k] - a) / fmax(fabs(a), 1e-2));
        }
    }
    printf("batch of %d fits of %d parameters, tiled sums: GPU vs CPU max rel. diff %.2g\n", NF, P,
           dev);
    CHECK(dev <= 1e-10);
    /* into columns: no statistics records for tiled sums, so every row is the host's finish of
     * the device's full records, as the result objects' */
    static double cp[NF * P], cse[NF * P], cchi2[NF];
    static int ccode[NF], cst[NF];
    jf_batch_columns cols = {ccode, cst, cp, cse, NULL, cchi2, NULL, NULL, NULL};
    CHECK(jf_fit_batch_columns(m, NF, d, p0, &o, &cols) == JF_OK);
    int same = 1;
    for (int f = 0; f < NF; f++) {
        if (!rg[f] || ccode[f] != JF_OK || cst[f] != (int)rg[f]->status ||
            !(d[f].sigma ? cchi2[f] == rg[f]->chi2 : isnan(cchi2[f])))
            same = 0;
        for (int k = 0; rg[f] && k < P; k++)
            if (cp[f * P + k] != rg[f]->params[k] || cse[f * P + k] != rg[f]->std_errors[k]) same = 0;
    }
    CHECK(same);
    for (int f = 0; f < NF; f++) {
        jf_fit_result_free(rc[f]);
        jf_fit_result_free(rg[f]);
    }
    jf_model_free(m);
}

/* A statistic the device computed for a batch's columns (jf_batch_stats) against the host's
 * for the fit's result: the same operations, --fmad=false, IEEE division and square root, so
 * the same bits (as on the emulator); the tolerance only allows for a GPU's libm should it ever
 * differ in a last bit. */
static int same_stat(double dev, double host) {
    if (isnan(dev) || isnan(host)) return isnan(dev) && isnan(host);
    return dev == host || fabs(dev - host) <= 1e-13 * fabs(host);
}

/* A batch on the GPU (one launch, a warp per fit) against the same batch on the CPU: fits of
 * different lengths, each polished afterwards, so parameters agree to 1e-10; fp32 close. */
static void test_batch(void) {
    jf_model *m = NULL;
    if (!CHECK(jf_model_compile("a*exp(-b*x)*sin(c*x+d)+e", (size_t)-1, NULL, &m, NULL) == JF_OK))
        return;
    enum { NF = 300, MAXPTS = 120 };
    static double xs[NF][MAXPTS], ys[NF][MAXPTS];
    static jf_data d[NF];
    for (int f = 0; f < NF; f++) {
        size_t n = 40 + (size_t)(f % 81);
        for (size_t i = 0; i < n; i++) {
            xs[f][i] = 10.0 * (double)i / (double)(n - 1);
            ys[f][i] = (2.0 + 0.002 * f) * exp(-0.25 * xs[f][i]) * sin(1.5 * xs[f][i] + 0.3) + 0.5 +
                       0.03 * sin(12.9898 * (double)(i + 7 * f));
        }
        d[f] = (jf_data){n, xs[f], 0, ys[f], NULL};
    }
    double p0[5] = {1.8, 0.2, 1.45, 0.2, 0.4};
    jf_fit_options o = jf_fit_options_default();
    o.p0 = p0;
    static jf_fit_result *rc[NF], *rg[NF], *rs[NF];
    o.device = JF_DEVICE_CPU;
    CHECK(jf_fit_batch(m, NF, d, NULL, &o, rc, NULL) == JF_OK);
    o.device = JF_DEVICE_GPU;
    CHECK(jf_fit_batch(m, NF, d, NULL, &o, rg, NULL) == JF_OK);
    o.single_precision = 1;
    CHECK(jf_fit_batch(m, NF, d, NULL, &o, rs, NULL) == JF_OK);
    double dev = 0, dev32 = 0, devse = 0, devstat = 0;
    int same_nfev = 0, polished = 0;
    size_t it64 = 0, it32 = 0, ok32 = 0;
    for (int f = 0; f < NF; f++) {
        if (!CHECK(rc[f] && rg[f] && rs[f])) continue;
        it64 += rg[f]->iterations;
        it32 += rs[f]->iterations;
        ok32 += rs[f]->success;
        CHECK(rg[f]->backend == JF_BACKEND_CUDA && rg[f]->success == rc[f]->success);
        for (int k = 0; k < 5; k++) {
            double a = rc[f]->params[k];
            dev = fmax(dev, fabs(rg[f]->params[k] - a) / fmax(fabs(a), 1e-2));
            devse = fmax(devse, fabs(rg[f]->std_errors[k] / rc[f]->std_errors[k] - 1));
            dev32 = fmax(dev32, fabs(rs[f]->params[k] - a) / rc[f]->std_errors[k]);
        }
        /* the finish ran on the device: statistics and correlations as the CPU's */
        devstat = fmax(devstat, fabs(rg[f]->ssr / rc[f]->ssr - 1));
        devstat = fmax(devstat, fabs(rg[f]->r_squared - rc[f]->r_squared));
        devstat = fmax(devstat, fabs(rg[f]->cost / rc[f]->cost - 1));
        devstat = fmax(devstat, fabs(rg[f]->correlation[1] - rc[f]->correlation[1]));
        same_nfev += rg[f]->nfev == rc[f]->nfev;
        polished += strstr(rc[f]->message, "polish") != NULL;
        if (f == 0) CHECK_CONTAINS(rg[f]->device_note, "the finish (polish, J's triangle) included");
    }
    printf("batch of %d fits: GPU vs CPU max rel. diff %.2g (standard errors %.2g, statistics "
           "%.2g; same nfev in %d, %d polished); fp32 within %.2g s.e.\n",
           NF, dev, devse, devstat, same_nfev, polished, dev32);
    CHECK(dev <= 1e-10);
    CHECK(devse <= 1e-10);
    CHECK(devstat <= 1e-10);
    /* fp32's costs carry its rounding: the loop's convergence tests read the rounding sum
     * (lm_core.h, jf_lmc_noise), so most fp32 fits converge in fp64's trial steps instead of
     * ending on XTOL after the noise has rejected a few (emulated, thread kernel: 2651 trial
     * steps before, 1855 after, fp64 1495) */
    printf("trial steps: fp64 %zu, fp32 %zu (%zu of %d fp32 fits converged)\n", it64, it32, ok32,
           NF);
    CHECK(ok32 == (size_t)NF);
    CHECK(2 * it32 <= 3 * it64);
    /* the same GPU batch into columns: the values of the GPU batch's results */
    {
        /* (the rows come from the device's statistics records, not from result objects) */
        static double params[NF * 5], se[NF * 5], cost[NF], chi2[NF], r2[NF];
        static int code[NF], status[NF];
        static size_t nfev[NF], iters[NF];
        jf_batch_columns cols = {code, status, params, se, cost, chi2, r2, nfev, iters};
        o.single_precision = 0;
        CHECK(jf_fit_batch_columns(m, NF, d, NULL, &o, &cols) == JF_OK);
        int same = 1;
        for (int f = 0; f < NF; f++) {
            if (!rg[f] || code[f] != JF_OK || !isnan(chi2[f])) same = 0;
            if (rg[f] && ((int)rg[f]->status != status[f] || rg[f]->cost != cost[f] ||
                          !same_stat(rg[f]->r_squared, r2[f]) || rg[f]->nfev != nfev[f] ||
                          rg[f]->iterations != iters[f]))
                same = 0;
            for (int k = 0; rg[f] && k < 5; k++)
                if (params[f * 5 + k] != rg[f]->params[k] || !same_stat(se[f * 5 + k], rg[f]->std_errors[k])) same = 0;
        }
        CHECK(same);
        /* with sigma (χ², weighted R²) and absolute_sigma, the first 40 fits */
        enum { NS = 40 };
        static double sig[MAXPTS];
        static jf_data dsig[NS];
        static jf_fit_result *rw[NS];
        for (int i = 0; i < MAXPTS; i++) sig[i] = 0.02 + 0.001 * i;
        for (int f = 0; f < NS; f++) dsig[f] = (jf_data){d[f].n, d[f].x, 0, d[f].y, sig};
        o.absolute_sigma = 1;
        CHECK(jf_fit_batch(m, NS, dsig, NULL, &o, rw, NULL) == JF_OK);
        CHECK(jf_fit_batch_columns(m, NS, dsig, NULL, &o, &cols) == JF_OK);
        o.absolute_sigma = 0;
        same = 1;
        for (int f = 0; f < NS; f++) {
            if (!CHECK(rw[f])) continue;
            CHECK_CONTAINS(rw[f]->device_note, "the finish (polish, J's triangle) included");
            if (code[f] != JF_OK || !(chi2[f] > 0) || rw[f]->chi2 != chi2[f] || rw[f]->cost != cost[f] ||
                !same_stat(rw[f]->r_squared, r2[f]))
                same = 0;
            for (int k = 0; k < 5; k++)
                if (params[f * 5 + k] != rw[f]->params[k] || !same_stat(se[f * 5 + k], rw[f]->std_errors[k])) same = 0;
            jf_fit_result_free(rw[f]);
        }
        CHECK(same);
        o.single_precision = 1;
    }
    CHECK(polished > NF / 2);
    CHECK(dev32 <= 0.01);
    /* a fit that is not finite at its start (exp overflows): the kernel skips its finish and
     * says so in the finish record (device memory is not zeroed: the emulator fills it with
     * NaN), and the host reports it as the CPU does */
    {
        enum { NN = 12 };
        static double pn[NN * 5];
        static jf_fit_result *rn[NN], *rcn[NN];
        for (int f = 0; f < NN; f++) memcpy(pn + f * 5, p0, sizeof p0);
        pn[3 * 5 + 1] = -1000.0;
        o.single_precision = 0;
        o.device = JF_DEVICE_CPU;
        CHECK(jf_fit_batch(m, NN, d, pn, &o, rcn, NULL) == JF_OK);
        o.device = JF_DEVICE_GPU;
        CHECK(jf_fit_batch(m, NN, d, pn, &o, rn, NULL) == JF_OK);
        /* ... and into columns: the device's statistics for eleven rows, the host's for the
         * twelfth */
        static double cp[NN * 5], cse[NN * 5], ccost[NN], cchi2[NN], cr2[NN];
        static int ccode[NN], cstatus[NN];
        static size_t cnfev[NN], citers[NN];
        jf_batch_columns cc = {ccode, cstatus, cp, cse, ccost, cchi2, cr2, cnfev, citers};
        CHECK(jf_fit_batch_columns(m, NN, d, pn, &o, &cc) == JF_OK);
        for (int f = 0; f < NN; f++) {
            if (!CHECK(rn[f] && rcn[f])) continue;
            CHECK(rn[f]->status == rcn[f]->status);
            CHECK(ccode[f] == JF_OK && cstatus[f] == (int)rn[f]->status && cnfev[f] == rn[f]->nfev &&
                  citers[f] == rn[f]->iterations && isnan(cchi2[f]));
            if (f == 3) {
                CHECK(rn[f]->status == JF_FIT_NONFINITE && isnan(rn[f]->std_errors[0]));
                CHECK(isnan(cse[f * 5]) && isnan(cr2[f]));
            } else {
                CHECK(ccost[f] == rn[f]->cost && same_stat(cr2[f], rn[f]->r_squared));
                for (int k = 0; k < 5; k++) {
                    CHECK(fabs(rn[f]->params[k] - rcn[f]->params[k]) <= 1e-10 * fmax(fabs(rcn[f]->params[k]), 1e-2));
                    CHECK(cp[f * 5 + k] == rn[f]->params[k] && same_stat(cse[f * 5 + k], rn[f]->std_errors[k]));
                }
            }
            jf_fit_result_free(rn[f]);
            jf_fit_result_free(rcn[f]);
        }
        o.single_precision = 1;
    }
    /* a block per fit (what long fits get): forced on 60 of them */
    enum { NB = 60 };
    static jf_fit_result *rb[NB];
    setenv("JITFIT_GPU_BATCH_BLOCK", "1", 1);
    o.single_precision = 0;
    CHECK(jf_fit_batch(m, NB, d, NULL, &o, rb, NULL) == JF_OK);
    unsetenv("JITFIT_GPU_BATCH_BLOCK");
    double devb = 0;
    for (int f = 0; f < NB; f++) {
        if (!CHECK(rb[f])) continue;
        CHECK(rb[f]->backend == JF_BACKEND_CUDA && rb[f]->success == rc[f]->success);
        for (int k = 0; k < 5; k++) {
            devb = fmax(devb, fabs(rb[f]->params[k] - rc[f]->params[k]) / fmax(fabs(rc[f]->params[k]), 1e-2));
            devb = fmax(devb, fabs(rb[f]->std_errors[k] / rc[f]->std_errors[k] - 1));
        }
        if (f == 0) CHECK_CONTAINS(rb[f]->device_note, "the finish (polish, J's triangle) included");
        jf_fit_result_free(rb[f]);
    }
    printf("batch of %d fits, a block per fit: GPU vs CPU max rel. diff %.2g\n", NB, devb);
    CHECK(devb <= 1e-10);
    /* a batch of which not even one fit's chunk fits in the GPU memory it may use: the CPU fits
     * it, and says why */
    o.single_precision = 0;
    o.max_gpu_mem = 4000;
    static jf_fit_result *rf[NF];
    CHECK(jf_fit_batch(m, NF, d, NULL, &o, rf, NULL) == JF_OK);
    for (int f = 0; f < NF; f++) {
        if (!CHECK(rf[f])) continue;
        if (f == 0) CHECK_CONTAINS(rf[f]->device_note, "cpu: fell back from the GPU: the batch needs");
        CHECK(rf[f]->backend != JF_BACKEND_CUDA && rf[f]->success == rc[f]->success);
        for (int k = 0; k < 5; k++) CHECK(rf[f]->params[k] == rc[f]->params[k]);
        jf_fit_result_free(rf[f]);
    }
    for (int f = 0; f < NF; f++) {
        jf_fit_result_free(rc[f]);
        jf_fit_result_free(rg[f]);
        jf_fit_result_free(rs[f]);
    }
    jf_model_free(m);
}

/* Bitwise equality of two doubles, NaN equal to NaN (a fit's numbers do not depend on which
 * launch or slot ran it). */
static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/* The batch of nf fits under o runs in chunks (its note says so) with the parameters of ref
 * (the same batch in one launch) bit for bit. */
static void check_chunked(const jf_model *m, size_t nf, const jf_data *d, const double *p0,
                          const jf_fit_options *o, jf_fit_result *const *ref, const char *label) {
    static jf_fit_result *r[64];
    if (!CHECK(nf <= 64) || !CHECK(jf_fit_batch(m, nf, d, p0, o, r, NULL) == JF_OK)) return;
    if (CHECK(r[0])) {
        printf("%s: %s\n", label, r[0]->device_note);
        CHECK_CONTAINS(r[0]->device_note, "launches on two streams");
        /* short fits: a thread each by default (the sanitizer build's only run of that kernel) */
        const char *th = getenv("JITFIT_GPU_BATCH_THREAD");
        if (!th || !*th) CHECK_CONTAINS(r[0]->device_note, "a thread per fit");
    }
    int same = 1;
    for (size_t f = 0; f < nf; f++) {
        if (!CHECK(ref[f] && r[f])) continue;
        for (size_t k = 0; k < r[f]->num_params; k++)
            same &= same_bits(r[f]->params[k], ref[f]->params[k]);
        jf_fit_result_free(r[f]);
    }
    CHECK(same);
}

/* batch_progress calls, recorded */
typedef struct progress_log {
    size_t calls, done[64], total;
} progress_log;
static void log_progress(void *ctx, size_t done, size_t total) {
    progress_log *l = ctx;
    if (l->calls < 64) l->done[l->calls] = done;
    l->calls++;
    l->total = total;
}

/* A batch in chunks (several launches, two streams) equals the batch in one launch bit for
 * bit: fits of different lengths, some with sigma, one not finite at its start (its records
 * fetched from a chunk's buffers), into result objects and into columns, the linear loss (the
 * finish on the device) and soft_l1 (no finish records), a warp and a block per fit. A memory
 * limit a batch exceeds splits it into chunks; one that not even a chunk of one fit fits sends
 * it to the CPU. */
/* A GPU batch's note accounts for its time on the host clock (fit.c's batch_note): six parts,
 * none negative, the packing and the rows nonzero, together no more than the call took. */
static void check_batch_times(const char *note, double wall_ms) {
    const char *h = note ? strstr(note, "; host ms: ") : NULL;
    double t[6] = {-1, -1, -1, -1, -1, -1};
    int got = h ? sscanf(h, "; host ms: checks %lf, module %lf, memory %lf, packing and launches "
                            "%lf, waiting for the GPU %lf, rows %lf",
                         &t[0], &t[1], &t[2], &t[3], &t[4], &t[5])
                : 0;
    if (!CHECK(got == 6)) {
        printf("  note: %s\n", note ? note : "(none)");
        return;
    }
    double sum = 0;
    for (int k = 0; k < 6; k++) {
        CHECK(t[k] >= 0);
        sum += t[k];
    }
    CHECK(t[3] > 0 && t[5] > 0);
    /* the note's three digits round each part by up to half a unit of its third */
    if (!CHECK(sum <= wall_ms * 1.005 + 0.01))
        printf("  parts %g ms, call %g ms: %s\n", sum, wall_ms, h);
}

/* What the driver reserves for the local memory of m's batch kernel `kind` (linear loss, fp64):
 * 0 on the emulator unless $JITFIT_CUDA_EMULATE_LOCAL says, 0.7 GB on an H200 for the thread
 * kernel (2.7 KB a thread). A memory limit meant to split a batch into chunks is this plus the
 * chunks' buffers: below it, the batch goes to the CPU (the first H200 run of that kernel). */
static size_t kernel_local(const jf_model *m, jf_batch_kernel kind) {
    char *src = jf_batch_cuda_source(m, JF_LOSS_LINEAR, 0, kind);
    if (!CHECK(src)) return 0;
    const char *name = jf_batch_cuda_kernel_name(kind);
    void *fn = NULL;
    jf_jit_options jo;
    memset(&jo, 0, sizeof jo); /* as a fit's defaults (fit.c, gpu_jit_options) */
    struct jf_cache_entry *held = NULL;
    char why[512];
    size_t local = 0;
    if (CHECK(jf_cuda_module_get(src, &name, 1, &jo, &fn, &held, NULL, why, sizeof why, NULL,
                                 0) == JF_OK))
        local = jf_cuda_local_reserve(fn);
    else
        printf("batch kernel: %s\n", why);
    jf_cuda_module_release(held);
    free(src);
    return local;
}

static void test_batch_chunks(void) {
    jf_model *m = NULL;
    if (!CHECK(jf_model_compile("a*exp(-b*x)*sin(c*x+d)+e", (size_t)-1, NULL, &m, NULL) == JF_OK))
        return;
    enum { NF = 50, MAXPTS = 90, NP = 5 };
    static double xs[NF][MAXPTS], ys[NF][MAXPTS], sg[MAXPTS], p0[NF * NP];
    static jf_data d[NF];
    for (int i = 0; i < MAXPTS; i++) sg[i] = 0.03 + 0.0002 * i;
    for (int f = 0; f < NF; f++) {
        size_t n = 30 + (size_t)(f * 7 % 61);
        for (size_t i = 0; i < n; i++) {
            xs[f][i] = 10.0 * (double)i / (double)(n - 1);
            ys[f][i] = (2.0 + 0.01 * f) * exp(-0.25 * xs[f][i]) * sin(1.5 * xs[f][i] + 0.3) + 0.5 +
                       0.03 * sin(12.9898 * (double)(i + 7 * f));
        }
        d[f] = (jf_data){n, xs[f], 0, ys[f], f % 4 == 1 ? sg : NULL};
        double s0[NP] = {1.8, 0.2, 1.45, 0.2, 0.4};
        memcpy(p0 + f * NP, s0, sizeof s0);
    }
    p0[17 * NP + 1] = -1000.0; /* exp overflows at the start */
    static jf_fit_result *r1[NF], *rk[NF];
    static double par[2][NF * NP], se[2][NF * NP], cost[2][NF], chi2[2][NF], r2[2][NF];
    static int code[2][NF], status[2][NF];
    static size_t nfev[2][NF], iters[2][NF];
    jf_fit_options o = jf_fit_options_default();
    o.device = JF_DEVICE_GPU;
    for (int variant = 0; variant < 3; variant++) {
        /* 0: warp per fit, linear; 1: soft_l1; 2: a block per fit, linear */
        o.loss = variant == 1 ? JF_LOSS_SOFT_L1 : JF_LOSS_LINEAR;
        if (variant == 2) setenv("JITFIT_GPU_BATCH_BLOCK", "1", 1);
        int same = 1;
        for (int run = 0; run < 2; run++) {
            jf_fit_result **r = run ? rk : r1;
            if (run) setenv("JITFIT_GPU_BATCH_CHUNK", "7", 1);
            struct timespec c0, c1;
            clock_gettime(CLOCK_MONOTONIC, &c0);
            CHECK(jf_fit_batch(m, NF, d, p0, &o, r, NULL) == JF_OK);
            clock_gettime(CLOCK_MONOTONIC, &c1);
            if (r[0])
                check_batch_times(r[0]->device_note, (double)(c1.tv_sec - c0.tv_sec) * 1e3 +
                                                         (double)(c1.tv_nsec - c0.tv_nsec) * 1e-6);
            jf_batch_columns cols = {code[run], status[run], par[run], se[run], cost[run],
                                     chi2[run], r2[run], nfev[run], iters[run]};
            CHECK(jf_fit_batch_columns(m, NF, d, p0, &o, &cols) == JF_OK);
            unsetenv("JITFIT_GPU_BATCH_CHUNK");
            if (CHECK(r[0]))
                CHECK_CONTAINS(r[0]->device_note, run ? "batch: 8 launches on two streams"
                                                      : "batch: one launch");
        }
        for (int f = 0; f < NF; f++) {
            if (!CHECK(r1[f] && rk[f])) continue;
            CHECK(rk[f]->backend == JF_BACKEND_CUDA);
            if (rk[f]->status != r1[f]->status || rk[f]->nfev != r1[f]->nfev ||
                rk[f]->iterations != r1[f]->iterations || !same_bits(rk[f]->cost, r1[f]->cost) ||
                !same_bits(rk[f]->r_squared, r1[f]->r_squared))
                same = 0;
            for (int k = 0; k < NP; k++)
                if (!same_bits(rk[f]->params[k], r1[f]->params[k]) ||
                    !same_bits(rk[f]->std_errors[k], r1[f]->std_errors[k]))
                    same = 0;
            if (code[1][f] != code[0][f] || status[1][f] != status[0][f] ||
                nfev[1][f] != nfev[0][f] || iters[1][f] != iters[0][f] ||
                !same_bits(cost[1][f], cost[0][f]) || !same_bits(chi2[1][f], chi2[0][f]) ||
                !same_bits(r2[1][f], r2[0][f]))
                same = 0;
            for (int k = 0; k < NP; k++)
                if (!same_bits(par[1][f * NP + k], par[0][f * NP + k]) ||
                    !same_bits(se[1][f * NP + k], se[0][f * NP + k]))
                    same = 0;
        }
        CHECK(r1[17] && r1[17]->status == JF_FIT_NONFINITE && status[0][17] == JF_FIT_NONFINITE);
        CHECK(r1[3] && r1[3]->success && code[0][3] == JF_OK && cost[0][3] == r1[3]->cost);
        if (!CHECK(same)) printf("chunked batch (variant %d) differs from one launch\n", variant);
        for (int f = 0; f < NF; f++) {
            jf_fit_result_free(r1[f]);
            jf_fit_result_free(rk[f]);
        }
        unsetenv("JITFIT_GPU_BATCH_BLOCK");
    }
    /* a memory limit: chunks as many as it takes (the same fits), or the CPU when a fit alone
     * is too much */
    o.loss = JF_LOSS_LINEAR;
    CHECK(jf_fit_batch(m, NF, d, p0, &o, r1, NULL) == JF_OK);
    size_t total = 0;
    for (int f = 0; f < NF; f++) total += d[f].n;
    size_t local = kernel_local(m, jf_batch_cuda_kernel(NP, NF, total));
    o.max_gpu_mem = local + 60000;
    char label[96];
    snprintf(label, sizeof label, "a limit of 60000 bytes beyond the kernel's %zu of local memory",
             local);
    check_chunked(m, NF, d, p0, &o, r1, label);
    /* a GPU that refuses allocations its free memory says fit (other work took it meanwhile):
     * smaller chunks, the same fits; refused even one fit's chunk: the CPU, saying why. Only
     * on the emulator, which can be made to refuse (a real driver ignores the variable). */
    if (jf_cuda_emulated()) {
        setenv("JITFIT_CUDA_EMULATE_FAIL", "alloc>20000", 1);
        o.max_gpu_mem = 0;
        check_chunked(m, NF, d, p0, &o, r1, "allocations over 20000 bytes refused");
        /* (a warp per fit: a thread's workspace is local memory, no allocation, and a chunk of
         * one fit needs less than 1000 bytes then) */
        const char *th = getenv("JITFIT_GPU_BATCH_THREAD");
        char *keep = th ? strdup(th) : NULL;
        setenv("JITFIT_GPU_BATCH_THREAD", "0", 1);
        setenv("JITFIT_CUDA_EMULATE_FAIL", "alloc>1000", 1);
        CHECK(jf_fit_batch(m, NF, d, p0, &o, rk, NULL) == JF_OK);
        unsetenv("JITFIT_CUDA_EMULATE_FAIL");
        if (keep) setenv("JITFIT_GPU_BATCH_THREAD", keep, 1);
        else unsetenv("JITFIT_GPU_BATCH_THREAD");
        free(keep);
        for (int f = 0; f < NF; f++) {
            if (!CHECK(r1[f] && rk[f])) continue;
            if (f == 0)
                CHECK_CONTAINS(rk[f]->device_note, "cpu: fell back from the GPU: not enough GPU memory: "
                                                   "the GPU refused even chunks of one fit");
            CHECK(rk[f]->backend != JF_BACKEND_CUDA && rk[f]->status == r1[f]->status);
            jf_fit_result_free(rk[f]);
        }
    }
    /* the kernel's local memory, which the driver reserves for every thread the GPU holds,
     * counts against the limit: chunks when the rest does not hold the batch, the CPU when it
     * is more than the limit (on the emulator, which says how much: JITFIT_CUDA_EMULATE_LOCAL
     * bytes per thread, 2048 threads) */
    if (jf_cuda_emulated()) {
        o.max_gpu_mem = 1000000;
        CHECK(jf_fit_batch(m, NF, d, p0, &o, rk, NULL) == JF_OK);
        if (CHECK(rk[0])) CHECK_CONTAINS(rk[0]->device_note, "batch: one launch");
        for (int f = 0; f < NF; f++) jf_fit_result_free(rk[f]);
        setenv("JITFIT_CUDA_EMULATE_LOCAL", "450", 1); /* 0.92 MB */
        jf_cuda_emulate_reread();
        check_chunked(m, NF, d, p0, &o, r1, "a 1e6-byte limit, 921600 bytes of it local memory");
        setenv("JITFIT_CUDA_EMULATE_LOCAL", "500", 1); /* 1.02 MB */
        jf_cuda_emulate_reread();
        CHECK(jf_fit_batch(m, NF, d, p0, &o, rk, NULL) == JF_OK);
        unsetenv("JITFIT_CUDA_EMULATE_LOCAL");
        jf_cuda_emulate_reread();
        for (int f = 0; f < NF; f++) {
            if (!CHECK(r1[f] && rk[f])) continue;
            if (f == 0) CHECK_CONTAINS(rk[f]->device_note, "(1.0 MiB of it the kernel's local memory)");
            CHECK(rk[f]->backend != JF_BACKEND_CUDA && rk[f]->status == r1[f]->status);
            jf_fit_result_free(rk[f]);
        }
    }
    o.max_gpu_mem = 4000;
    CHECK(jf_fit_batch(m, NF, d, p0, &o, rk, NULL) == JF_OK);
    for (int f = 0; f < NF; f++) {
        if (!CHECK(r1[f] && rk[f])) continue;
        if (f == 0) CHECK_CONTAINS(rk[f]->device_note, "cpu: fell back from the GPU: the batch needs");
        CHECK(rk[f]->backend != JF_BACKEND_CUDA && rk[f]->status == r1[f]->status);
        jf_fit_result_free(r1[f]);
        jf_fit_result_free(rk[f]);
    }
    /* progress as the chunks come back (every chance taken: an interval of 0 ms): after each
     * of the 8 chunks, the fits done so far — each row from its statistics record, or the fit
     * finished by the host then (fit 17, not finite at its start; every fit into result
     * objects) — then the end */
    for (int objects = 0; objects < 2; objects++) {
        progress_log pl = {0};
        static double cpar[NF * NP];
        static int ccode[NF];
        jf_batch_columns cc = {ccode, NULL, cpar, NULL, NULL, NULL, NULL, NULL, NULL};
        jf_fit_options op = o;
        op.max_gpu_mem = 0;
        op.batch_progress = log_progress;
        op.batch_progress_ctx = &pl;
        setenv("JITFIT_GPU_BATCH_CHUNK", "7", 1);
        setenv("JITFIT_BATCH_PROGRESS_MS", "0", 1);
        if (objects) CHECK(jf_fit_batch(m, NF, d, p0, &op, rk, NULL) == JF_OK);
        else CHECK(jf_fit_batch_columns(m, NF, d, p0, &op, &cc) == JF_OK);
        unsetenv("JITFIT_GPU_BATCH_CHUNK");
        unsetenv("JITFIT_BATCH_PROGRESS_MS");
        static const size_t want[] = {7, 14, 21, 28, 35, 42, 49, 50};
        int ok = pl.calls == 8 && pl.total == NF;
        for (size_t k = 0; ok && k < 8; k++) ok = pl.done[k] == want[k];
        if (!CHECK(ok)) {
            printf("progress calls into %s (%zu):", objects ? "objects" : "columns", pl.calls);
            for (size_t k = 0; k < pl.calls && k < 64; k++) printf(" %zu", pl.done[k]);
            printf("\n");
        }
        for (int f = 0; objects && f < NF; f++) {
            if (CHECK(rk[f])) CHECK(rk[f]->backend == JF_BACKEND_CUDA);
            jf_fit_result_free(rk[f]);
        }
    }
    /* the third chunk's launch refused: the batch fails as a whole with the reason (the rows of
     * the two chunks before it are not left looking like results), nothing leaks. The
     * emulator's refusal (JITFIT_CUDA_EMULATE_FAIL), which a real driver does not know. */
    if (jf_cuda_emulated()) {
        static double cpar[NF * NP];
        static int ccode[NF];
        static char *errs[NF];
        jf_batch_columns cc = {ccode, NULL, cpar, NULL, NULL, NULL, NULL, NULL, NULL};
        o.max_gpu_mem = 0;
        setenv("JITFIT_GPU_BATCH_CHUNK", "7", 1);
        setenv("JITFIT_CUDA_EMULATE_FAIL", "launch#3", 1);
        int rc = jf_fit_batch_columns(m, NF, d, p0, &o, &cc);
        CHECK(rc == JF_ERR_INTERNAL);
        int all = 1;
        for (int f = 0; f < NF; f++) all &= ccode[f] == rc && isnan(cpar[f * NP]);
        CHECK(all);
        setenv("JITFIT_CUDA_EMULATE_FAIL", "launch#2", 1);
        CHECK(jf_fit_batch(m, NF, d, p0, &o, rk, errs) == JF_ERR_INTERNAL);
        all = 1;
        for (int f = 0; f < NF; f++) {
            all &= rk[f] == NULL && errs[f] && strstr(errs[f], "kernel launch failed") != NULL;
            jf_free(errs[f]);
        }
        CHECK(all);
        unsetenv("JITFIT_CUDA_EMULATE_FAIL");
        unsetenv("JITFIT_GPU_BATCH_CHUNK");
    }
    /* chunks of more fits than the batch has: one launch */
    o.max_gpu_mem = 0;
    setenv("JITFIT_GPU_BATCH_CHUNK", "1e6", 1);
    CHECK(jf_fit_batch(m, NF, d, p0, &o, rk, NULL) == JF_OK);
    unsetenv("JITFIT_GPU_BATCH_CHUNK");
    if (CHECK(rk[0])) CHECK_CONTAINS(rk[0]->device_note, "batch: one launch");
    for (int f = 0; f < NF; f++) jf_fit_result_free(rk[f]);
    jf_model_free(m);
}

/* The ways a batch's data can lie in memory give the same fits: x shared by every fit (one
 * copy goes to the device; ldx beyond the points; fits of different lengths reading its first
 * rows) and the responses one after another in one array (sent as they are), against every fit
 * with its own copies (packed). 5×5-pixel 2-D Gaussians. */
static void test_batch_layouts(void) {
    jf_model *m = NULL;
    if (!CHECK(jf_model_compile("var u, v\nparam A = 1\nparam x0 = 2\nparam y0 = 2\n"
                                "param s = 1\nparam b = 0\n"
                                "z ~ A*exp(-((u-x0)^2+(v-y0)^2)/(2*s^2))+b\n",
                                (size_t)-1, NULL, &m, NULL) == JF_OK))
        return;
    enum { NF = 96, LDX = 27, NP = 5 };
    static double x[2 * LDX], y[NF * 25], xc[NF][2 * 25], yc[NF][25];
    static jf_data shared[NF], packed[NF];
    for (int i = 0; i < 25; i++) {
        x[i] = i % 5;
        x[LDX + i] = i / 5;
    }
    size_t at = 0;
    for (int f = 0; f < NF; f++) {
        size_t n = 20 + (size_t)(f % 6); /* the first n pixels */
        for (size_t i = 0; i < n; i++) {
            double du = x[i] - 2.0 - 0.01 * (f % 7), dv = x[LDX + i] - 1.9 + 0.01 * (f % 5);
            y[at + i] = (90.0 + f) * exp(-(du * du + dv * dv) / (2 * 1.05 * 1.05)) + 10.0 +
                        0.5 * sin(12.9898 * (double)(i + 7 * f));
            yc[f][i] = y[at + i];
            xc[f][i] = x[i];
            xc[f][25 + i] = x[LDX + i];
        }
        shared[f] = (jf_data){n, x, LDX, y + at, NULL};
        packed[f] = (jf_data){n, xc[f], 25, yc[f], NULL};
        at += n;
    }
    double p0[NP] = {80, 2, 2, 1, 9};
    jf_fit_options o = jf_fit_options_default();
    o.p0 = p0;
    o.device = JF_DEVICE_GPU;
    static double pa[NF * NP], pb[NF * NP], sa[NF * NP], sb[NF * NP], ca[NF], cb[NF];
    static int codea[NF], codeb[NF];
    static size_t na[NF], nb[NF];
    jf_batch_columns A = {codea, NULL, pa, sa, ca, NULL, NULL, na, NULL};
    jf_batch_columns B = {codeb, NULL, pb, sb, cb, NULL, NULL, nb, NULL};
    CHECK(jf_fit_batch_columns(m, NF, shared, NULL, &o, &A) == JF_OK);
    CHECK(jf_fit_batch_columns(m, NF, packed, NULL, &o, &B) == JF_OK);
    static double pc[NF * NP];
    static int codec[NF];
    jf_batch_columns C = {codec, NULL, pc, NULL, NULL, NULL, NULL, NULL, NULL};
    setenv("JITFIT_GPU_BATCH_BLOCK", "1", 1); /* and a block per fit */
    CHECK(jf_fit_batch_columns(m, NF, shared, NULL, &o, &C) == JF_OK);
    unsetenv("JITFIT_GPU_BATCH_BLOCK");
    /* and in chunks of 10 fits: x shared by all of them, each chunk's y straight from the array */
    static double pd[NF * NP], sd[NF * NP], cd[NF];
    static int coded[NF];
    static size_t nd[NF];
    jf_batch_columns D = {coded, NULL, pd, sd, cd, NULL, NULL, nd, NULL};
    setenv("JITFIT_GPU_BATCH_CHUNK", "10", 1);
    CHECK(jf_fit_batch_columns(m, NF, shared, NULL, &o, &D) == JF_OK);
    unsetenv("JITFIT_GPU_BATCH_CHUNK");
    o.device = JF_DEVICE_CPU;
    int same = 1;
    double dev = 0;
    for (int f = 0; f < NF; f++) {
        jf_fit_result *r = NULL;
        if (!CHECK(jf_fit(m, &packed[f], &o, &r, NULL) == JF_OK)) continue;
        if (codea[f] != JF_OK || codeb[f] != JF_OK || ca[f] != cb[f] || na[f] != nb[f]) same = 0;
        if (coded[f] != JF_OK || cd[f] != ca[f] || nd[f] != na[f]) same = 0;
        for (int k = 0; k < NP; k++) {
            if (pa[f * NP + k] != pb[f * NP + k] || sa[f * NP + k] != sb[f * NP + k]) same = 0;
            if (pd[f * NP + k] != pa[f * NP + k] || sd[f * NP + k] != sa[f * NP + k]) same = 0;
            if (codec[f] != JF_OK || fabs(pc[f * NP + k] - r->params[k]) > 1e-10 * fmax(fabs(r->params[k]), 1e-2))
                same = 0;
            dev = fmax(dev, fabs(pa[f * NP + k] - r->params[k]) / fmax(fabs(r->params[k]), 1e-2));
        }
        jf_fit_result_free(r);
    }
    printf("batch with x shared and y in one array (one launch, chunks of 10 fits): %s the packed "
           "batch's; CPU max rel. diff %.2g\n",
           same ? "the same as" : "DIFFERENT from", dev);
    CHECK(same);
    CHECK(dev <= 1e-10);
    /* x shared, not finite at pixel 23: the fits that read it fail their check, the shorter
     * ones run as before (x's values are checked once per run of fits, up to the longest) */
    static double xbad[2 * LDX];
    static jf_data dbad[NF];
    memcpy(xbad, x, sizeof x);
    xbad[22] = NAN;
    for (int f = 0; f < NF; f++) dbad[f] = (jf_data){shared[f].n, xbad, LDX, shared[f].y, NULL};
    o.device = JF_DEVICE_GPU;
    CHECK(jf_fit_batch_columns(m, NF, dbad, NULL, &o, &C) == JF_ERR_DATA);
    same = 1;
    for (int f = 0; f < NF; f++) {
        if (dbad[f].n >= 23 ? codec[f] != JF_ERR_DATA || !isnan(pc[f * NP]) : codec[f] != JF_OK)
            same = 0;
        for (int k = 0; dbad[f].n < 23 && k < NP; k++)
            if (pc[f * NP + k] != pa[f * NP + k]) same = 0;
    }
    CHECK(same);
    /* with sigma (weights packed, x still shared) the same as packed too */
    static double sig[25];
    static jf_data ssig[NF], psig[NF];
    for (int i = 0; i < 25; i++) sig[i] = 0.5 + 0.05 * i;
    for (int f = 0; f < NF; f++) {
        ssig[f] = shared[f];
        ssig[f].sigma = sig;
        psig[f] = packed[f];
        psig[f].sigma = sig;
    }
    o.device = JF_DEVICE_GPU;
    CHECK(jf_fit_batch_columns(m, NF, ssig, NULL, &o, &A) == JF_OK);
    CHECK(jf_fit_batch_columns(m, NF, psig, NULL, &o, &B) == JF_OK);
    setenv("JITFIT_GPU_BATCH_BLOCK", "1", 1);
    CHECK(jf_fit_batch_columns(m, NF, ssig, NULL, &o, &C) == JF_OK);
    unsetenv("JITFIT_GPU_BATCH_BLOCK");
    same = 1;
    for (int f = 0; f < NF; f++) {
        if (codea[f] != JF_OK || codeb[f] != JF_OK || codec[f] != JF_OK || ca[f] != cb[f]) same = 0;
        for (int k = 0; k < NP; k++)
            if (pa[f * NP + k] != pb[f * NP + k] || sa[f * NP + k] != sb[f * NP + k] ||
                fabs(pc[f * NP + k] - pb[f * NP + k]) > 1e-10 * fmax(fabs(pb[f * NP + k]), 1e-2))
                same = 0;
    }
    CHECK(same);
    jf_model_free(m);
}

/* Fits the device does not polish get their statistics there too, from the final JᵀJ and a pass
 * of residual sums (jf_batch_stats_normal), as the CPU computes them: a robust loss (soft_l1,
 * outliers), with and without sigma, a warp and a block per fit; and linear fits too long to
 * polish (n·p beyond JF_LM_MATERIALIZE_MAX). Columns against single CPU fits. */
static void test_batch_normal_stats(void) {
    jf_model *m = NULL;
    if (!CHECK(jf_model_compile("a*exp(-b*x)*sin(c*x+d)+e", (size_t)-1, NULL, &m, NULL) == JF_OK))
        return;
    enum { NF = 40, N = 80, NP = 5, NL = 3, LONG = 30000 };
    static double x[N], y[NF * N + NL * LONG], sig[N];
    static jf_data d[NF], ds[NF], dl[NL];
    for (int i = 0; i < N; i++) {
        x[i] = 10.0 * i / (N - 1);
        sig[i] = 0.02 + 0.0001 * i;
    }
    for (int f = 0; f < NF; f++) {
        for (int i = 0; i < N; i++) {
            double t = x[i];
            y[f * N + i] = (2.0 + 0.01 * f) * exp(-0.25 * t) * sin(1.5 * t + 0.3) + 0.5 +
                           0.03 * sin(12.9898 * (double)(i + 7 * f)) + (i % 17 == 5 ? 1.5 : 0.0);
        }
        d[f] = (jf_data){N, x, 0, y + f * N, NULL};
        ds[f] = (jf_data){N, x, 0, y + f * N, sig};
    }
    static double xl[LONG];
    for (int i = 0; i < LONG; i++) xl[i] = 10.0 * i / (LONG - 1);
    for (int f = 0; f < NL; f++) {
        double *yl = y + NF * N + f * LONG;
        for (int i = 0; i < LONG; i++)
            yl[i] = (2.0 + 0.1 * f) * exp(-0.25 * xl[i]) * sin(1.5 * xl[i] + 0.3) + 0.5 +
                    0.03 * sin(12.9898 * (double)(i + 7 * f));
        dl[f] = (jf_data){LONG, xl, 0, yl, NULL};
    }
    double p0[NP] = {1.8, 0.2, 1.45, 0.2, 0.4};
    static double pg[NF * NP], sg[NF * NP], cg[NF], chig[NF], r2g[NF];
    static int codeg[NF], stg[NF];
    static size_t nfevg[NF];
    jf_batch_columns cols = {codeg, stg, pg, sg, cg, chig, r2g, nfevg, NULL};
    double dp = 0, dse = 0, dstat = 0;
    int same_status = 1, ran = 0;
    for (int run = 0; run < 5; run++) {
        /* runs: soft_l1 warp, soft_l1 block, soft_l1 with sigma, huber with sigma and
         * absolute_sigma, linear loss on the long fits */
        jf_fit_options o = jf_fit_options_default();
        o.p0 = p0;
        o.loss = run == 4 ? JF_LOSS_LINEAR : run == 3 ? JF_LOSS_HUBER : JF_LOSS_SOFT_L1;
        o.f_scale = run >= 2 ? 3.0 : 0.1; /* (with sigma, residuals are in units of it) */
        o.absolute_sigma = run == 3;
        const jf_data *dd = run == 4 ? dl : run >= 2 ? ds : d;
        size_t nf = run == 4 ? NL : NF;
        o.device = JF_DEVICE_GPU;
        if (run == 1) setenv("JITFIT_GPU_BATCH_BLOCK", "1", 1);
        CHECK(jf_fit_batch_columns(m, nf, dd, NULL, &o, &cols) == JF_OK);
        unsetenv("JITFIT_GPU_BATCH_BLOCK");
        o.device = JF_DEVICE_CPU;
        for (size_t f = 0; f < nf; f++) {
            jf_fit_result *r = NULL;
            if (!CHECK(jf_fit(m, &dd[f], &o, &r, NULL) == JF_OK && r)) continue;
            ran++;
            same_status &= codeg[f] == JF_OK && stg[f] == (int)r->status;
            dstat = fmax(dstat, fabs(cg[f] / r->cost - 1));
            dstat = fmax(dstat, fabs(r2g[f] - r->r_squared));
            if (dd[f].sigma) dstat = fmax(dstat, fabs(chig[f] / r->chi2 - 1));
            else same_status &= isnan(chig[f]);
            for (int k = 0; k < NP; k++) {
                dp = fmax(dp, fabs(pg[f * NP + k] - r->params[k]) / fmax(fabs(r->params[k]), 1e-2));
                dse = fmax(dse, fabs(sg[f * NP + k] / r->std_errors[k] - 1));
            }
            jf_fit_result_free(r);
        }
    }
    printf("batch statistics from JtJ on the device (robust losses, long fits; %d fits): "
           "parameters %.2g, standard errors %.2g, cost, chi2, R2 %.2g from the CPU's%s\n",
           ran, dp, dse, dstat, same_status ? "" : "; STATUS DIFFERS");
    CHECK(ran == 4 * NF + NL);
    CHECK(same_status);
    CHECK(dp <= 1e-10);
    CHECK(dse <= 1e-8);
    CHECK(dstat <= 1e-10);
    jf_model_free(m);
}

/* A GPU batch of m into columns against single CPU fits of the same data: the same code and
 * status, parameters within 1e-10, standard errors within 1e-10 or infinite on both sides, R²
 * within 1e-10, and expect(f, r) true of each CPU result r. Prints and checks the verdict. */
static void columns_as_cpu(const jf_model *m, size_t nf, const jf_data *d,
                           int (*expect)(size_t f, const jf_fit_result *r), const char *what) {
    size_t np = jf_model_num_params(m);
    double *p = calloc(nf * np, sizeof *p), *se = calloc(nf * np, sizeof *se);
    double *r2 = calloc(nf, sizeof *r2);
    int *code = calloc(nf, sizeof *code), *status = calloc(nf, sizeof *status);
    if (!CHECK(p && se && r2 && code && status)) goto out;
    jf_fit_options o = jf_fit_options_default();
    o.device = JF_DEVICE_GPU;
    jf_batch_columns cols = {code, status, p, se, NULL, NULL, r2, NULL, NULL};
    CHECK(jf_fit_batch_columns(m, nf, d, NULL, &o, &cols) == JF_OK);
    o.device = JF_DEVICE_CPU;
    int same = 1;
    for (size_t f = 0; f < nf; f++) {
        jf_fit_result *r = NULL;
        if (!CHECK(jf_fit(m, &d[f], &o, &r, NULL) == JF_OK)) continue;
        if (code[f] != JF_OK || status[f] != r->status || !expect(f, r) ||
            fabs(r2[f] - r->r_squared) > 1e-10)
            same = 0;
        for (size_t k = 0; k < np; k++) {
            double e = r->std_errors[k], g = se[f * np + k];
            if (fabs(p[f * np + k] - r->params[k]) > 1e-10 * fabs(r->params[k]) ||
                (isinf(e) ? !(isinf(g) && g > 0) : fabs(g / e - 1) > 1e-10))
                same = 0;
        }
        jf_fit_result_free(r);
    }
    printf("%s into columns: %s\n", what, same ? "as the CPU's" : "DIFFERENT");
    CHECK(same);
out:
    free(p);
    free(se);
    free(r2);
    free(code);
    free(status);
}

/* c has no influence on a + b*x: JF_FIT_UNUSED_PARAM with c's standard error infinite and c at
 * its start. */
static int unused_c(size_t f, const jf_fit_result *r) {
    (void)f;
    return r->status == JF_FIT_UNUSED_PARAM && isinf(r->std_errors[2]) && r->params[2] == 1.0;
}

/* A parameter without influence (its Jacobian column zero): a GPU batch into columns says
 * JF_FIT_UNUSED_PARAM with an infinite standard error for it, as single CPU fits do. */
static void test_batch_unused(void) {
    jf_model *m = NULL;
    if (!CHECK(jf_model_compile("param a = 1\nparam b = 1\nparam c = 1\nvar x\ny ~ a + b*x\n",
                                (size_t)-1, NULL, &m, NULL) == JF_OK))
        return;
    enum { NF = 20, N = 10 };
    static double x[N], y[NF][N];
    static jf_data d[NF];
    for (int i = 0; i < N; i++) x[i] = i;
    for (int f = 0; f < NF; f++) {
        for (int i = 0; i < N; i++) y[f][i] = 2 + 0.1 * f + 3 * x[i] + 0.01 * sin(12.9898 * (i + 3 * f));
        d[f] = (jf_data){N, x, 0, y[f], NULL};
    }
    columns_as_cpu(m, NF, d, unused_c, "batch with an unused parameter");
    jf_model_free(m);
}

/* Even fits: a ends on its bound 0 and b's column vanishes there (not at the start): converged,
 * b's standard error infinite; odd fits: an ordinary power law. */
static int vanished_b(size_t f, const jf_fit_result *r) {
    return r->success && (f % 2 == 0) == (isinf(r->std_errors[1]) && r->params[0] == 0.0);
}

/* A column that vanishes only at the solution (b once a sits on its bound 0) leaves the
 * device's statistics to the host, which finds the column non-zero at the start: converged, as
 * single CPU fits, with b's standard error infinite; the fits without a vanished column keep
 * the device's numbers. */
static void test_batch_vanished(void) {
    jf_model *m = NULL;
    if (!CHECK(jf_model_compile("param a = 1 in [0, inf]\nparam b = 1\nvar x\ny ~ a*x^b\n",
                                (size_t)-1, NULL, &m, NULL) == JF_OK))
        return;
    enum { NF = 12, N = 16 };
    static double x[N], y[NF][N];
    static jf_data d[NF];
    for (int i = 0; i < N; i++) x[i] = 0.1 + 0.2 * i;
    for (int f = 0; f < NF; f++) { /* even fits: y < 0, a ends on 0; odd: y = 2 x^1.5 */
        for (int i = 0; i < N; i++)
            y[f][i] = (f % 2 ? 2 * pow(x[i], 1.5) : -0.5) + 0.01 * sin(12.9898 * (i + 3 * f));
        d[f] = (jf_data){N, x, 0, y[f], NULL};
    }
    columns_as_cpu(m, NF, d, vanished_b, "batch with a column vanishing at the solution");
    jf_model_free(m);
}

/* A single GPU fit not finite at its start says where, as the CPU does (the host has no CPU
 * kernels for it: the interpreter looks), and a start whose residuals are finite (only a
 * derivative is not: sqrt(x - b) at x = b) gets the same SSR. */
static void test_single_nonfinite(void) {
    jf_model *m = NULL;
    if (!CHECK(jf_model_compile("param a = 1\nparam b = 1\nvar x\ny ~ a*sqrt(x - b)\n",
                                (size_t)-1, NULL, &m, NULL) == JF_OK))
        return;
    enum { N = 40 };
    static double x[N], y[N];
    for (int i = 0; i < N; i++) {
        x[i] = 0.05 * i;
        y[i] = 2 * sqrt(x[i]) + 0.01 * sin(12.9898 * i);
    }
    jf_data d = {N, x, 0, y, NULL};
    const double starts[2][2] = {{1, 1}, {1, 0}}; /* residual NaN at x = 0; ∂/∂b = -inf there */
    for (int c = 0; c < 2; c++) {
        jf_fit_options o = jf_fit_options_default();
        o.p0 = starts[c];
        jf_fit_result *rc = NULL, *rg = NULL;
        o.device = JF_DEVICE_CPU;
        CHECK(jf_fit(m, &d, &o, &rc, NULL) == JF_OK);
        o.device = JF_DEVICE_GPU;
        CHECK(jf_fit(m, &d, &o, &rg, NULL) == JF_OK);
        if (CHECK(rc && rg)) {
            CHECK(rc->status == JF_FIT_NONFINITE && rg->status == JF_FIT_NONFINITE);
            if (!CHECK(strcmp(rc->message, rg->message) == 0))
                fprintf(stderr, "  CPU: %s\n  GPU: %s\n", rc->message, rg->message);
            CHECK_CONTAINS(rg->message, "first at point 0 (0-based, x = 0)");
            CHECK(c == 0 ? isnan(rg->ssr) : fabs(rg->ssr - rc->ssr) <= 1e-12 * rc->ssr);
        }
        jf_fit_result_free(rc);
        jf_fit_result_free(rg);
    }
    jf_model_free(m);
}

/* AUTO prices compiling what the kernel cache lacks (runtime/device.c): before the first GPU
 * run of a model the estimate includes it, after it (the modules in the memory cache) not.
 * max_nfev 2 keeps the fits short: only the choice is looked at. Runs first, before any other
 * test has loaded these modules. */
static void test_auto_compile(void) {
    jf_model *m = NULL;
    if (!CHECK(jf_model_compile("a*exp(-b*x)+c", (size_t)-1, NULL, &m, NULL) == JF_OK)) return;
    enum { N = 2000000 }; /* 15 passes of 2e6 points x 4 terms: 0.48 s on one CPU thread */
    double *x = malloc(2 * N * sizeof *x), *y = x ? x + N : NULL;
    if (!CHECK(x != NULL)) {
        jf_model_free(m);
        return;
    }
    for (size_t i = 0; i < N; i++) {
        x[i] = 5.0 * (double)i / N;
        y[i] = 2.0 * exp(-0.7 * x[i]) + 0.1;
    }
    jf_data d[2] = {{N / 2, x, 0, y, NULL}, {N / 2, x + N / 2, 0, y + N / 2, NULL}};
    jf_data one = {N, x, 0, y, NULL};
    double p0[3] = {1.5, 0.5, 0.0};
    jf_fit_options o = jf_fit_options_default();
    o.p0 = p0;
    o.nthreads = 1;
    o.max_nfev = 2;
    o.no_cache = 1; /* the disk cache of earlier runs does not count */
    const int emu = jf_cuda_emulated();
    for (int batch = 0; batch < 2; batch++) {
        jf_fit_result *r[2] = {NULL, NULL};
        o.device = JF_DEVICE_AUTO;
        int st = batch ? jf_fit_batch(m, 2, d, NULL, &o, r, NULL) : jf_fit(m, &one, &o, &r[0], NULL);
        if (CHECK(st == JF_OK && r[0])) {
            printf("auto, %s, nothing compiled yet: %s\n", batch ? "batch" : "one fit", r[0]->device_note);
            CHECK_CONTAINS(r[0]->device_note, "s of it compiling kernels not in the cache)");
            /* the emulator keeps no disk cache: the model's kernels and the solver module are
             * missing before the one fit, the batch module (alone) before the batch */
            if (emu) CHECK_CONTAINS(r[0]->device_note, batch ? "(4.8 s of it" : "(2.75 s of it");
        }
        jf_fit_result *first[2] = {r[0], r[1]};
        o.device = JF_DEVICE_GPU;
        st = batch ? jf_fit_batch(m, 2, d, NULL, &o, r, NULL) : jf_fit(m, &one, &o, &r[0], NULL);
        CHECK(st == JF_OK && r[0] && r[0]->backend == JF_BACKEND_CUDA);
        /* AUTO may have chosen either device (an H200 wins this fit, the emulator never): the
         * GPU's answer equals the CPU's, obtained explicitly where AUTO chose the GPU (these
         * fits are too long for the device's finish: the host's, from the device's final
         * state) */
        if (first[0] && first[0]->backend == JF_BACKEND_CUDA) {
            CHECK(!emu);
            for (int k = 0; k < 2; k++) jf_fit_result_free(first[k]);
            first[0] = first[1] = NULL;
            o.device = JF_DEVICE_CPU;
            st = batch ? jf_fit_batch(m, 2, d, NULL, &o, first, NULL)
                       : jf_fit(m, &one, &o, &first[0], NULL);
            CHECK(st == JF_OK);
        }
        for (int f = 0; f < (batch ? 2 : 1); f++) {
            if (!CHECK(r[f] && first[f] && first[f]->backend != JF_BACKEND_CUDA)) continue;
            if (batch) CHECK_CONTAINS(r[f]->device_note, "then the finish on the CPU");
            for (int k = 0; k < 3; k++) {
                CHECK(fabs(r[f]->params[k] - first[f]->params[k]) <= 1e-10 * fmax(fabs(first[f]->params[k]), 1e-2));
                CHECK(fabs(r[f]->std_errors[k] / first[f]->std_errors[k] - 1) <= 1e-8);
            }
        }
        for (int k = 0; k < 2; k++) {
            jf_fit_result_free(r[k]);
            jf_fit_result_free(first[k]);
        }
        o.device = JF_DEVICE_AUTO;
        st = batch ? jf_fit_batch(m, 2, d, NULL, &o, r, NULL) : jf_fit(m, &one, &o, &r[0], NULL);
        if (CHECK(st == JF_OK && r[0])) {
            printf("auto, %s, after a GPU run: %s\n", batch ? "batch" : "one fit", r[0]->device_note);
            CHECK(strstr(r[0]->device_note, "compiling") == NULL);
            CHECK_CONTAINS(r[0]->device_note, "gpu: estimated ");
        }
        for (int k = 0; k < 2; k++) jf_fit_result_free(r[k]);
    }
    /* AUTO knows when one fit's data would be streamed (more than the usable GPU memory): its
     * estimate copies them with every pass, and the fit, on the GPU, streams them */
    o.device = JF_DEVICE_AUTO;
    o.max_gpu_mem = 8000000;
    jf_fit_result *s = NULL;
    if (CHECK(jf_fit(m, &one, &o, &s, NULL) == JF_OK && s)) {
        printf("auto, one fit beyond --max-gpu-mem: %s\n", s->device_note);
        CHECK_CONTAINS(s->device_note, "(data streamed: copied with every pass)");
        if (s->backend == JF_BACKEND_CUDA)
            CHECK_CONTAINS(s->device_note, "per pass, staged from the caller's arrays");
        CHECK(s->backend == JF_BACKEND_CUDA || !emu);
    }
    jf_fit_result_free(s);
    free(x);
    jf_model_free(m);
}

/* The batch into columns on the CPU (params into pc) and on the GPU (into pg): 1 when every fit
 * ran and every parameter agrees to 1e-10 relative (absolute below 1e-2). */
static int held_columns_agree(const jf_model *m, size_t nf, const jf_data *d, const double *rows,
                              jf_fit_options o, jf_batch_columns *cols, double *pc, double *pg) {
    o.device = JF_DEVICE_CPU;
    cols->params = pc;
    CHECK(jf_fit_batch_columns(m, nf, d, rows, &o, cols) == JF_OK);
    o.device = JF_DEVICE_GPU;
    cols->params = pg;
    CHECK(jf_fit_batch_columns(m, nf, d, rows, &o, cols) == JF_OK);
    int same = 1;
    for (size_t i = 0; i < nf * 5; i++) same &= fabs(pc[i] - pg[i]) <= 1e-10 * fmax(fabs(pc[i]), 1e-2);
    for (size_t f = 0; f < nf; f++) same &= cols->code[f] == JF_OK;
    return same;
}

/* Held parameters (jf_fit_options.fixed) on the GPU: the reduced model's kernels, which read
 * the held values after the fitted ones (the device loop's workspace, each batch fit's start
 * record), one fit and batches, as on the CPU: every fit at one value, and each fit at its own
 * (rows of p0), by warps and by blocks, and one fit on the many-parameter path. */
static void test_fixed(void) {
    enum { N = 300, NF = 6 };
    static double x[N], y[NF][N];
    for (int i = 0; i < N; i++) {
        x[i] = 0.05 * i;
        for (int f = 0; f < NF; f++)
            y[f][i] = (2 + 0.2 * f) * exp(-(0.5 + 0.05 * f) * x[i]) * sin(1.3 * x[i] + 0.4) + 0.3 +
                      0.01 * sin(17.0 * i + f);
    }
    jf_model *m = NULL;
    CHECK(jf_model_compile("a*exp(-b*x)*sin(c*x + d) + e", (size_t)-1, NULL, &m, NULL) == JF_OK);
    if (!m) return;
    double p0[5] = {1.8, 0.4, 1.25, 0.4, 0.3};
    int fixed[5] = {0, 0, 0, 1, 1};
    jf_fit_options o = jf_fit_options_default();
    o.p0 = p0;
    o.fixed = fixed;
    jf_data d[NF];
    for (int f = 0; f < NF; f++) d[f] = (jf_data){N, x, 0, y[f], NULL};
    compare("fixed d, e", m, &d[0], o, 1e-10);
    double pc[NF * 5], pg[NF * 5];
    int code[NF];
    jf_batch_columns cols;
    memset(&cols, 0, sizeof cols);
    cols.code = code;
    cols.params = pc;
    o.device = JF_DEVICE_CPU;
    CHECK(jf_fit_batch_columns(m, NF, d, NULL, &o, &cols) == JF_OK);
    cols.params = pg;
    o.device = JF_DEVICE_GPU;
    CHECK(jf_fit_batch_columns(m, NF, d, NULL, &o, &cols) == JF_OK);
    for (int i = 0; i < NF * 5; i++) CHECK(fabs(pc[i] - pg[i]) <= 1e-10 * fmax(fabs(pc[i]), 1e-2));
    CHECK(pg[3] == 0.4 && pg[NF * 5 - 1] == 0.3);

    /* each fit holds d and e at its own values */
    double rows[NF * 5];
    for (int f = 0; f < NF; f++) {
        memcpy(rows + 5 * f, p0, sizeof p0);
        rows[5 * f + 3] = 0.4 + 0.02 * f;
        rows[5 * f + 4] = 0.3 - 0.01 * f;
    }
    for (int blocks = 0; blocks < 2; blocks++) {
        if (blocks) setenv("JITFIT_GPU_BATCH_BLOCK", "1", 1);
        int same = held_columns_agree(m, NF, d, rows, o, &cols, pc, pg);
        for (int f = 0; f < NF; f++)
            same &= pg[5 * f + 3] == rows[5 * f + 3] && pg[5 * f + 4] == rows[5 * f + 4];
        o.device = JF_DEVICE_GPU;
        printf("fixed d, e at each fit's own values, %s: %s\n", blocks ? "blocks" : "warps",
               same ? "as the CPU's" : "DIFFERENT");
        CHECK(same);
        /* into result objects, each as the single CPU fit held at its row's values */
        jf_fit_result *res[NF];
        CHECK(jf_fit_batch(m, NF, d, rows, &o, res, NULL) == JF_OK);
        for (int f = 0; f < NF; f++) {
            jf_fit_options oc = o;
            oc.device = JF_DEVICE_CPU;
            oc.p0 = rows + 5 * f;
            jf_fit_result *one = NULL;
            CHECK(jf_fit(m, &d[f], &oc, &one, NULL) == JF_OK);
            if (res[f] && one)
                for (int k = 0; k < 5; k++)
                    CHECK(fabs(res[f]->params[k] - one->params[k]) <=
                          1e-10 * fmax(fabs(one->params[k]), 1e-2));
            jf_fit_result_free(one);
            jf_fit_result_free(res[f]);
        }
    }
    unsetenv("JITFIT_GPU_BATCH_BLOCK");
    /* b held at 0 in some fits (exp(-b*x): 0*x → 0 where b is written in): those get the
     * model with 0 written in (a batch of their own), the others the shared one, on the GPU as
     * on the CPU */
    static const int fixed_b[5] = {0, 1, 0, 0, 0};
    o.fixed = fixed_b;
    for (int f = 0; f < NF; f++) rows[5 * f + 1] = f == 1 || f == 4 ? 0.0 : 0.5 + 0.05 * f;
    int same0 = held_columns_agree(m, NF, d, rows, o, &cols, pc, pg);
    printf("fixed b at 0 in two fits (their own batch): %s\n", same0 ? "as the CPU's" : "DIFFERENT");
    CHECK(same0 && pg[5 * 1 + 1] == 0.0 && pg[5 * 2 + 1] == rows[5 * 2 + 1]);
    o.fixed = fixed;
    for (int f = 0; f < NF; f++) rows[5 * f + 1] = p0[1];
    o.p0 = rows + 5 * (NF - 1);
    compare("fixed d, e at other values", m, &d[NF - 1], o, 1e-10);
    setenv("JITFIT_GPU_LARGE_P", "-1", 1);
    compare("fixed d, e, many-parameter path", m, &d[NF - 1], o, 1e-10);
    unsetenv("JITFIT_GPU_LARGE_P");
    jf_model_free(m);
}

static void test_cli(void) {
    char cmd[2048], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "'%s' fit --device gpu -v '%s/examples/damped_sine.jf' '%s/examples/damped_sine.csv'",
             jf_test_cli(), JF_SOURCE_DIR, JF_SOURCE_DIR);
    int rc = jf_test_run(cmd, &out, &err);
    CHECK(rc == 0);
    CHECK_CONTAINS(out, "gpu: requested");
    CHECK_CONTAINS(out, "host synchronization");
    free(out);
    free(err);
    /* `--group` on the GPU: one launch with the finish on the device, the CPU's table */
    const char *grp = "fit --group sample --p0-file '%s/examples/spectra_p0.csv' "
                      "'%s/examples/spectra.jf' '%s/examples/spectra.csv'";
    char args[1536], *cpu = NULL, *gpu = NULL;
    snprintf(args, sizeof args, grp, JF_SOURCE_DIR, JF_SOURCE_DIR, JF_SOURCE_DIR);
    snprintf(cmd, sizeof cmd, "'%s' %s --device gpu --json", jf_test_cli(), args);
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    CHECK_CONTAINS(out, "batch: one launch, a warp per fit, the finish (polish, J's triangle) "
                        "included");
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' %s --device cpu", jf_test_cli(), args);
    CHECK(jf_test_run(cmd, &cpu, NULL) == 0);
    snprintf(cmd, sizeof cmd, "'%s' %s --device gpu", jf_test_cli(), args);
    CHECK(jf_test_run(cmd, &gpu, NULL) == 0);
    CHECK_CONTAINS(gpu, "4 groups, 4 converged");
    CHECK_CONTAINS(gpu, "\n  backend (4 groups): cuda (");
    CHECK_CONTAINS(cpu, "\n  backend (4 groups): c (");
    /* the same table (8 significant digits); only the backend line under it differs */
    char *bg = gpu ? strstr(gpu, "\n  backend (") : NULL;
    char *bc = cpu ? strstr(cpu, "\n  backend (") : NULL;
    if (bg) *bg = '\0';
    if (bc) *bc = '\0';
    CHECK_STREQ(gpu, cpu);
    free(cpu);
    free(gpu);
}

/* The memory limits through the CLI, on the emulator (whose device memory
 * JITFIT_CUDA_EMULATE_MEM sets): a small linear-loss fit polishes on J materialized on the
 * device, so a device just large enough for what jf_gpu_problem_bytes says must hold that J
 * too; the fit runs there, not on the CPU after a refused allocation. A $JITFIT_GPU_CHUNK too
 * small for a pass is named as the reason of the fallback, and the text report of a fit that
 * fell back shows the device line; a $JITFIT_GPU_LARGE_P that is no number keeps the default;
 * $JITFIT_MAX_GPU_MEM takes units. */
static void test_limits(void) {
    enum { N = 4000 };
    char *csv = malloc(N * 64 + 16), cmd[2048], *out = NULL;
    if (!CHECK(csv != NULL)) return;
    size_t len = (size_t)snprintf(csv, 16, "x,y\n");
    for (int i = 0; i < N; i++) {
        double x = 0.005 * i;
        len += (size_t)snprintf(csv + len, 64, "%.17g,%.17g\n", x,
                                2.0 * exp(-0.25 * x) * sin(1.5 * x + 0.3) + 0.5 +
                                    0.03 * sin(12.9898 * (double)i));
    }
    char *data = jf_test_tmpfile(".csv", csv);
    free(csv);
    size_t need = jf_gpu_problem_bytes(N, 5, 0, 1, 0);
    snprintf(cmd, sizeof cmd,
             "JITFIT_CUDA_EMULATE_MEM=%zu '%s' fit --device gpu --json "
             "--p0 a=1.8,b=0.2,c=1.45,d=0.2,e=0.4 'a*exp(-b*x)*sin(c*x+d)+e' '%s'",
             need / 9 * 10 + 4096, jf_test_cli(), data);
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    CHECK_CONTAINS(out, "\"device_note\": \"gpu: requested");
    CHECK_CONTAINS(out, "Gauss-Newton polish step");
    free(out);
    /* streamed (a robust loss: no polish) in chunks of at most 10 points, 400 chunks where a
     * pass holds 64: the fallback's note names the setting, not the memory, which would do */
    snprintf(cmd, sizeof cmd,
             "JITFIT_GPU_CHUNK=10 '%s' fit --device gpu --json --loss huber --max-gpu-mem %zu "
             "--p0 a=1.8,b=0.2,c=1.45,d=0.2,e=0.4 'a*exp(-b*x)*sin(c*x+d)+e' '%s'",
             jf_test_cli(), need / 2, data);
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    CHECK_CONTAINS(out, "\"device_note\": \"cpu: fell back from the GPU: ");
    CHECK_CONTAINS(out, "JITFIT_GPU_CHUNK=10 would make 400 chunks of the 4000 points, more than "
                        "the 64 a pass holds (at least 63 points per chunk)");
    free(out);
    snprintf(cmd, sizeof cmd,
             "JITFIT_GPU_CHUNK=63 '%s' fit --device gpu --json --loss huber --max-gpu-mem %zu "
             "--p0 a=1.8,b=0.2,c=1.45,d=0.2,e=0.4 'a*exp(-b*x)*sin(c*x+d)+e' '%s'",
             jf_test_cli(), need / 2, data);
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    CHECK_CONTAINS(out, "data streamed: 64 chunks of 63 points per pass");
    free(out);
    /* $JITFIT_MAX_GPU_MEM with a unit as --max-gpu-mem reads it ('2M' was 2 bytes: every fit
     * went to the CPU) */
    snprintf(cmd, sizeof cmd,
             "JITFIT_MAX_GPU_MEM=%zuK '%s' fit --device gpu --json --loss huber "
             "--p0 a=1.8,b=0.2,c=1.45,d=0.2,e=0.4 'a*exp(-b*x)*sin(c*x+d)+e' '%s'",
             need / 2048, jf_test_cli(), data);
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    CHECK_CONTAINS(out, "data streamed: ");
    free(out);
    /* a $JITFIT_GPU_LARGE_P that is no number keeps the default threshold (it was read as 0:
     * every model on the many-parameter path) */
    snprintf(cmd, sizeof cmd,
             "JITFIT_GPU_LARGE_P=abc '%s' fit --device gpu --json "
             "--p0 a=1.8,b=0.2,c=1.45,d=0.2,e=0.4 'a*exp(-b*x)*sin(c*x+d)+e' '%s'",
             jf_test_cli(), data);
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    CHECK_CONTAINS(out, "\"device_note\": \"gpu: requested");
    CHECK(out && !strstr(out, "JᵀJ and Jᵀr by cuBLAS"));
    free(out);
    /* the human report of a --device gpu fit that fell back says so and why */
    snprintf(cmd, sizeof cmd,
             "'%s' fit --device gpu --max-gpu-mem 1K "
             "--p0 a=1.8,b=0.2,c=1.45,d=0.2,e=0.4 'a*exp(-b*x)*sin(c*x+d)+e' '%s'",
             jf_test_cli(), data);
    CHECK(jf_test_run(cmd, &out, NULL) == 0);
    CHECK_CONTAINS(out, "  device         cpu: fell back from the GPU: the data need ");
    free(out);
    remove(data);
    free(data);
}

int main(int argc, char **argv) {
    char status[512];
    if (!jf_device_have_gpu_solver()) return jf_test_skip("built without the CUDA headers");
    if (!jf_cuda_status(status, sizeof status)) return jf_test_skip(status);
    printf("%s\n", status);
    /* `test_gpu batch-chunks`: that test alone (quick enough for the sanitizer build's run) */
    if (argc > 1 && strcmp(argv[1], "batch-chunks") == 0) {
        test_batch_chunks();
        return jf_test_finish();
    }
    /* `test_gpu batch-thread`: the batch tests again with a thread per fit whatever the fits'
     * lengths (by default only fits of up to 64 points get one; the chunked batches' fits are
     * that short, so batch-chunks runs it already) */
    if (argc > 1 && strcmp(argv[1], "batch-thread") == 0) {
        setenv("JITFIT_GPU_BATCH_THREAD", "1e9", 1);
        test_batch();
        test_batch_unused();
        test_batch_vanished();
        test_batch_normal_stats();
        test_batch_layouts();
        test_fixed();
        return jf_test_finish();
    }
    if (argc > 1 && strcmp(argv[1], "limits") == 0) {
        if (jf_cuda_emulated()) test_limits();
        return jf_test_finish();
    }
    if (argc > 1 && strcmp(argv[1], "fixed") == 0) {
        test_fixed();
        return jf_test_finish();
    }
    if (argc > 1 && strcmp(argv[1], "many-blocks") == 0) {
        test_many_blocks();
        return jf_test_finish();
    }
    if (argc > 1 && strcmp(argv[1], "tails") == 0) {
        test_tail_modes();
        return jf_test_finish();
    }
    if (argc > 1 && strcmp(argv[1], "upload") == 0) {
        setenv("JITFIT_GPU_STAGE", "4096", 1); /* before the staging buffers exist */
        test_upload();
        return jf_test_finish();
    }
    if (argc > 1) {
        fprintf(stderr, "test_gpu: unknown test '%s' (known: batch-chunks, batch-thread, limits, "
                        "fixed, upload, many-blocks, tails)\n",
                argv[1]);
        return 2;
    }
    test_auto_compile();
    /* staging buffers small enough for the emulator's fit of 3 of them (a second per 10⁵ points
     * and pass there) and for many chunks on a GPU */
    setenv("JITFIT_GPU_STAGE", jf_cuda_emulated() ? "65536" : "1048576", 1);
    test_upload();
    test_many_blocks();
    for (int mode = 0; mode < 2; mode++) {
        if (mode == 1) setenv("JITFIT_GPU_NO_WHILE", "1", 1);
        have_while = mode == 0 && jf_cuda_cond_nodes();
        printf("-- device loop: %s\n", have_while ? "WHILE graph node" : "unrolled graphs");
        test_nist();
        test_sine(0);
        if (mode == 0 && !jf_cuda_cond_nodes()) break; /* both passes would be the same */
    }
    unsetenv("JITFIT_GPU_NO_WHILE");
    test_tail_modes();
    /* the many-parameter path (cuBLAS) for every fit, J in chunks of 1000 rows, one cuSOLVER
     * factorization per pass (a λ search factorizes the rest in the kernel) */
    setenv("JITFIT_GPU_LARGE_P", "-1", 1);
    setenv("JITFIT_GPU_LP_CHUNK", "1000", 1);
    setenv("JITFIT_GPU_FACTOR_ROUNDS", "1", 1);
    have_while = 0;
    printf("-- device loop: many-parameter path (cuBLAS, cuSOLVER) for every fit\n");
    test_nist();
    test_sine(1);
    unsetenv("JITFIT_GPU_LARGE_P");
    unsetenv("JITFIT_GPU_LP_CHUNK");
    unsetenv("JITFIT_GPU_FACTOR_ROUNDS");
    if (jf_cuda_emulated()) test_while_refused();
    if (jf_cuda_emulated()) test_limits();
    test_peaks();
    test_batch();
    test_batch_chunks();
    test_batch_unused();
    test_batch_vanished();
    test_single_nonfinite();
    test_batch_normal_stats();
    test_batch_layouts();
    test_batch_nist();
    test_batch_tiled();
    test_fixed();
    test_cli();
    return jf_test_finish();
}
