/* Cross-checks of the three kernel implementations: the reference interpreter, generated C
 * compiled by the system compiler, and generated CUDA on a GPU when there is one (skipped with a
 * message otherwise).
 *
 * Models: one per builtin function and operator, the damped sine, NIST StRD formulas (written
 * out here, so the test needs nothing outside the tree) and 240 random expressions built with
 * the DAG constructors from a fixed seed (every operation, constant exponents integer and not,
 * piecewise selects, up to 5 parameters and 3 variables). For each model, at random points:
 * - value and gradient (jacobian_row) and residual agree between interpreter and C to 1e-12
 *   relative where finite, and non-finite results agree in kind;
 * - normal_eq's sums equal the sums built from jacobian_row's r and J (with and without weights,
 *   for every loss, scaled with loss.h as scipy does), on both backends;
 * - on the GPU, r and J agree with the interpreter's to the same tolerances, widened where the
 *   value is sensitive to the last ulps of libm results (a GPU's libm rounds unlike glibc; see
 *   libm_sensitivity), and normal_eq's sums equal those of its own rows.
 *
 * $JITFIT_CROSSCHECK_SEED (a nonzero number) draws other random models, for campaigns.
 *
 * With $JITFIT_CROSSCHECK_CORPUS set to a directory (a fuzzer's corpus, e.g. fuzz_fit's), it
 * checks the models of its files instead (a leading byte below ' ' is taken as fuzz_fit's
 * option byte and skipped; files that do not compile are counted and passed over): a campaign
 * over the model text the fuzzers found, not a test of its own.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/emit.h"
#include "codegen/interp.h"
#include "codegen/loss.h"
#include "codegen/prelude.h"
#include "codegen/schedule.h"
#include "runtime/cuda_api.h"
#include "runtime/jit_nvrtc.h"
#include "runtime/kernels.h"
#include "tests/testlib.h"

/* ---- random numbers (xorshift64*) ----------------------------------------------------------- */

typedef struct rng {
    uint64_t s; /* state, never 0 */
} rng;

static uint64_t next(rng *g) {
    g->s ^= g->s >> 12;
    g->s ^= g->s << 25;
    g->s ^= g->s >> 27;
    return g->s * 0x2545F4914F6CDD1Du;
}
static double uni(rng *g) { return (double)(next(g) >> 11) * 0x1p-53; }
static double range(rng *g, double lo, double hi) { return lo + (hi - lo) * uni(g); }
static int pick(rng *g, int n) { return (int)(next(g) % (uint64_t)n); }

/* ---- models ---------------------------------------------------------------------------------- */

static jf_model *from_text(const char *text, const char *vars) {
    jf_model_options o = jf_model_options_default();
    const char *names[3];
    char buf[64];
    size_t nv = 0;
    if (vars) {
        snprintf(buf, sizeof buf, "%s", vars);
        for (char *s = buf, *t; (t = strsep(&s, ",")) != NULL;) names[nv++] = t;
        o.vars = names;
        o.nvars = nv;
    }
    jf_model *m = NULL;
    jf_diagnostics *d = NULL;
    if (jf_model_compile(text, (size_t)-1, &o, &m, &d) != JF_OK) {
        fprintf(stderr, "cannot compile %s: %s\n", text, d ? jf_diagnostics_text(d) : "?");
        CHECK(0);
    }
    jf_diagnostics_free(d);
    return m;
}

static jf_ref gen(jf_dag *d, rng *g, int depth, int np, int nv) {
    if (depth == 0 || uni(g) < 0.25) {
        double u = uni(g);
        if (u < 0.45) return jf_dag_param(d, (uint32_t)pick(g, np));
        if (u < 0.8) return jf_dag_var(d, (uint32_t)pick(g, nv));
        static const double consts[] = {2, 3, 0.5, -1, 1.5, 10, 0.1, -2.5};
        return jf_dag_const(d, u < 0.9 ? consts[pick(g, 8)] : range(g, -5, 5));
    }
    static const jf_op unary[] = {JF_OP_NEG,  JF_OP_EXP,  JF_OP_LOG,  JF_OP_LOG10, JF_OP_SQRT,
                                  JF_OP_CBRT, JF_OP_ABS,  JF_OP_SIN,  JF_OP_COS,   JF_OP_TAN,
                                  JF_OP_ASIN, JF_OP_ACOS, JF_OP_ATAN, JF_OP_SINH,  JF_OP_COSH,
                                  JF_OP_TANH, JF_OP_ERF,  JF_OP_ERFC, JF_OP_SIGN};
    static const jf_op binary[] = {JF_OP_ADD,   JF_OP_SUB, JF_OP_MUL, JF_OP_DIV, JF_OP_ADD,
                                   JF_OP_MUL,   JF_OP_POW, JF_OP_ATAN2, JF_OP_MIN, JF_OP_MAX,
                                   JF_OP_HYPOT, JF_OP_LT, JF_OP_LE, JF_OP_GT, JF_OP_GE,
                                   JF_OP_EQ,    JF_OP_NE};
    double u = uni(g);
    if (u < 0.35) {
        jf_op op = unary[pick(g, (int)(sizeof unary / sizeof unary[0]))];
        return jf_dag_unary(d, op, gen(d, g, depth - 1, np, nv));
    }
    if (u < 0.92) {
        jf_op op = binary[pick(g, (int)(sizeof binary / sizeof binary[0]))];
        jf_ref a = gen(d, g, depth - 1, np, nv);
        jf_ref b;
        if (op == JF_OP_POW && uni(g) < 0.7) {
            /* constant exponents: integers take the jf_powi path, others pow() */
            static const double ex[] = {2, 3, -1, -2, 4, 0.5, 1.5, -0.5, 0, 1};
            b = jf_dag_const(d, ex[pick(g, 10)]);
        } else {
            b = gen(d, g, depth - 1, np, nv);
        }
        return jf_dag_binary(d, op, a, b);
    }
    jf_ref c = jf_dag_binary(d, uni(g) < 0.5 ? JF_OP_LT : JF_OP_GE, gen(d, g, depth - 1, np, nv),
                             gen(d, g, depth - 1, np, nv));
    return jf_dag_select(d, c, gen(d, g, depth - 1, np, nv), gen(d, g, depth - 1, np, nv));
}

static jf_model *random_model(rng *g) {
    struct jf_model *m = jf_model_alloc(0);
    if (!m) return NULL;
    m->np = (size_t)(1 + pick(g, 5));
    m->nv = (size_t)(1 + pick(g, 3));
    /* a sum of a few terms so that most parameters appear */
    jf_ref f = gen(m->dag, g, 4, (int)m->np, (int)m->nv);
    for (int t = pick(g, 3); t > 0; t--)
        f = jf_dag_binary(m->dag, JF_OP_ADD, f, gen(m->dag, g, 3, (int)m->np, (int)m->nv));
    m->f = f;
    m->df = calloc(m->np, sizeof *m->df);
    for (size_t k = 0; m->df && k < m->np; k++) m->df[k] = jf_dag_diff(m->dag, m->f, (uint32_t)k);
    if (!m->df || jf_dag_error(m->dag) != JF_OK || m->f == JF_NOREF) {
        jf_model_free(m);
        return NULL;
    }
    return m;
}

/* ---- comparisons ------------------------------------------------------------------------------ */

static int nkinds_bad, nvalues_bad;

/* a (compiled) against b (reference): equal kind when not finite, else 1e-12 relative. */
static int agree(double a, double b, double tol) {
    if (!isfinite(a) || !isfinite(b)) {
        if (isnan(a) && isnan(b)) return 1;
        if (a == b) return 1;
        nkinds_bad++;
        return 0;
    }
    if (fabs(a - b) <= tol * fmax(fabs(a), fabs(b)) || a == b) return 1;
    nvalues_bad++;
    return 0;
}

enum { NPTS = 64, MAXP = 20, MAXACC = MAXP * (MAXP + 1) / 2 + MAXP + 1 };

/* The data of one check: points, responses, weights. */
typedef struct dataset {
    double x[3 * NPTS]; /* variables, column-major with ldx = NPTS */
    double y[NPTS];     /* responses */
    double w[NPTS];     /* weights */
    double p[MAXP];     /* parameters */
} dataset;

static void make_data(dataset *ds, rng *g, size_t np, size_t nv, double xlo, double xhi) {
    for (size_t k = 0; k < np; k++) ds->p[k] = range(g, 0.5, 2.0) * (uni(g) < 0.2 ? -1 : 1);
    for (size_t j = 0; j < nv; j++)
        for (int i = 0; i < NPTS; i++) ds->x[j * NPTS + i] = range(g, xlo, xhi);
    for (int i = 0; i < NPTS; i++) {
        ds->y[i] = range(g, -2, 2);
        ds->w[i] = range(g, 0.5, 2);
    }
}

/* Sums of normal_eq built from rows (r, J) of npts points, as kernels.h defines them, and the
 * sums of absolute terms (for a tolerance that does not depend on summation order). */
static void sums_from_rows(size_t np, const double *r, const double *J, size_t npts, int loss,
                           double f_scale, double *acc, double *mag) {
    size_t nacc = jf_emit_num_acc(np), tri = np * (np + 1) / 2;
    memset(acc, 0, nacc * sizeof *acc);
    memset(mag, 0, nacc * sizeof *mag);
    double fs2 = f_scale * f_scale, ifs2 = 1.0 / fs2;
    double Jr[MAXP];
    for (size_t i = 0; i < npts; i++) {
        double ri = r[i], cost, js = 1.0;
        if (loss == 0) cost = ri * ri;
        else cost = jf_loss_scale(loss, ri, fs2, ifs2, &ri, &js);
        for (size_t c = 0; c < np; c++) Jr[c] = J[i * np + c] * js;
        size_t q = 0;
        for (size_t a = 0; a < np; a++)
            for (size_t b = a; b < np; b++, q++) {
                acc[q] += Jr[a] * Jr[b];
                mag[q] += fabs(Jr[a] * Jr[b]);
            }
        for (size_t a = 0; a < np; a++) {
            acc[tri + a] += Jr[a] * ri;
            mag[tri + a] += fabs(Jr[a] * ri);
        }
        acc[tri + np] += cost;
        mag[tri + np] += fabs(cost);
    }
}

static int nsums_bad;

static void check_sums(const double *got, const double *want, const double *mag, size_t nacc,
                       const char *what) {
    for (size_t q = 0; q < nacc; q++) {
        if (fabs(got[q] - want[q]) <= 1e-12 * mag[q] + 1e-300) continue;
        if (nsums_bad++ < 5)
            fprintf(stderr, "%s: sum %zu is %.17g, rows give %.17g\n", what, q, got[q], want[q]);
    }
}

typedef struct stats {
    size_t models;        /* models checked */
    size_t compiled;      /* models that ran on the C backend */
    size_t finite_points; /* points with finite value and gradient */
    size_t sum_checks;    /* normal_eq comparisons made */
    size_t cuda_models;   /* models checked on the GPU */
    size_t cuda_values;   /* GPU residuals and J entries compared */
    size_t cuda_widened;  /* of those, compared within their libm sensitivity */
    size_t cuda_rounding; /* not compared: decided by rounding (a comparison that can flip) */
} stats;

/* ---- libm sensitivity --------------------------------------------------------------------- */

/* The GPU's libm is not the host's: each function may return a different double, up to CUDA's
 * documented error plus glibc's (a few ulps). Where a model's value depends sharply on such a
 * result (tan near a pole, cos(acos(x)) >= x, which rounding decides), two correct backends
 * disagree by far more than a fixed tolerance; the emulator shows it with
 * JITFIT_CUDA_EMULATE_ULPS. So each GPU value is compared within the spread the reference
 * itself shows when every libm result moves by that much. */
static double libm_ulps(jf_op op) {
    switch (op) {
    case JF_OP_EXP: case JF_OP_LOG: case JF_OP_LOG10: case JF_OP_CBRT: case JF_OP_COSH:
    case JF_OP_TANH: return 3;
    case JF_OP_SIN: case JF_OP_COS: case JF_OP_TAN: case JF_OP_ASIN: case JF_OP_ACOS:
    case JF_OP_ATAN: case JF_OP_SINH: case JF_OP_ERF: case JF_OP_POW: case JF_OP_ATAN2:
    case JF_OP_HYPOT: return 4;
    case JF_OP_ERFC: return 10;
    default: return 0; /* IEEE operations (+ - * / sqrt) and ours: the same bits everywhere */
    }
}

/* The schedule s of {f, df...} at p, x, each libm result moved by a random fraction of its
 * bound (g NULL: exactly). Integer powers take jf_powi, exact multiplications: not moved. */
static void eval_moved(const jf_schedule *s, const double *p, const double *x, double *sc,
                       double *out, rng *g) {
    const jf_dag *d = s->dag;
    for (size_t i = 0; i < s->n; i++) {
        const jf_node *nd = jf_dag_node(d, s->nodes[i]);
        const uint32_t *ap = &s->argpos[3 * i];
        double v, k = libm_ulps((jf_op)nd->op);
        switch ((jf_op)nd->op) {
        case JF_OP_CONST: v = nd->value; break;
        case JF_OP_PARAM: v = p[nd->index]; break;
        case JF_OP_VAR: v = x[nd->index]; break;
        case JF_OP_POW:
            if (jf_dag_node(d, nd->arg[1])->op == JF_OP_CONST) {
                double e = sc[ap[1]];
                v = jf_interp_op(JF_OP_POW, sc[ap[0]], e, 0.0);
                if (e == floor(e) && fabs(e) <= JF_POWI_MAX) k = 0;
            } else {
                v = pow(sc[ap[0]], sc[ap[1]]);
            }
            break;
        default:
            v = jf_interp_op((jf_op)nd->op, sc[ap[0]], nd->arity > 1 ? sc[ap[1]] : 0.0,
                             nd->arity > 2 ? sc[ap[2]] : 0.0);
            break;
        }
        /* an ulp is relative, down to the subnormals' fixed spacing (x^500 at |x| < 1); an
         * exact 0 stays (sin(0), log(1): a libm's exact cases, as the emulator keeps them) */
        if (g && k > 0 && v != 0)
            v += k * fmax(fabs(v) * 0x1p-52, 0x1p-1074) * (2 * uni(g) - 1);
        sc[i] = v;
    }
    for (size_t r = 0; r < s->nroots; r++) out[r] = sc[s->rootpos[r]];
}

enum { SENS_TRIALS = 64 };

/* sens[i * (np + 1) + c]: the largest relative change of the weighted residual (c = 0) or of
 * J column c - 1 at point i of ds over SENS_TRIALS moved evaluations; infinite where a finite
 * value can become inf or NaN. */
static void libm_sensitivity(const jf_model *m, const dataset *ds, double *sens) {
    size_t np = m->np, nr = np + 1;
    jf_ref roots[MAXP + 1];
    roots[0] = m->f;
    for (size_t k = 0; k < np; k++) roots[k + 1] = m->df[k];
    for (size_t q = 0; q < NPTS * nr; q++) sens[q] = INFINITY; /* unless measured */
    jf_schedule *s = jf_schedule_build(m->dag, roots, nr);
    double *sc = s ? malloc((s->n ? s->n : 1) * sizeof *sc) : NULL;
    if (!CHECK(sc != NULL)) {
        jf_schedule_free(s);
        return;
    }
    rng g = {0x9e3779b97f4a7c15u};
    for (int i = 0; i < NPTS; i++) {
        double x[3] = {ds->x[i], ds->x[NPTS + i], ds->x[2 * NPTS + i]}, v0[MAXP + 1], v[MAXP + 1];
        double *si = &sens[(size_t)i * nr];
        eval_moved(s, ds->p, x, sc, v0, NULL);
        v0[0] = ds->w[i] * (v0[0] - ds->y[i]);
        for (size_t c = 0; c < nr; c++) si[c] = 0;
        for (int t = 0; t < SENS_TRIALS; t++) {
            eval_moved(s, ds->p, x, sc, v, &g);
            v[0] = ds->w[i] * (v[0] - ds->y[i]);
            for (size_t c = 0; c < nr; c++) {
                if (v[c] == v0[c] || (isnan(v[c]) && isnan(v0[c]))) continue;
                double rel = isfinite(v[c]) && isfinite(v0[c])
                                 ? fabs(v[c] - v0[c]) / fmax(fabs(v[c]), fabs(v0[c]))
                                 : INFINITY;
                si[c] = fmax(si[c], rel);
            }
        }
    }
    free(sc);
    jf_schedule_free(s);
}

static int have_gpu;

/* The GPU comparisons' counts; most values must have been compared, and only a few of them
 * need more than the fixed tolerance (or the sensitivity would hide a wrong kernel). */
static void report_cuda(const stats *st) {
    if (!have_gpu) return;
    printf("GPU: %zu values compared, %zu of them within their libm sensitivity; %zu decided by "
           "rounding, not compared\n",
           st->cuda_values, st->cuda_widened, st->cuda_rounding);
    CHECK(st->cuda_rounding <= st->cuda_values / 50 && st->cuda_widened <= st->cuda_values / 20);
}

static void check_cuda(const jf_model *m, const dataset *ds, const double *r_ref,
                       const double *J_ref, const double *xs, const double *ys, const double *ws,
                       size_t nf, double tol, stats *st) {
    size_t np = m->np;
    char why[512];
    jf_jit_options o;
    memset(&o, 0, sizeof o);
    o.no_cache = 1;
    jf_cuda_kernels *ck = NULL;
    if (!CHECK(jf_cuda_kernels_get(m, &o, -1, &ck, NULL, why, sizeof why, NULL, 0) == JF_OK)) {
        fprintf(stderr, "CUDA kernels: %s\n", why);
        return;
    }
    double r[NPTS], J[NPTS * MAXP], sens[NPTS * (MAXP + 1)];
    libm_sensitivity(m, ds, sens);
    if (CHECK(jf_cuda_jacobian_rows(ck, ds->p, ds->x, NPTS, ds->y, ds->w, NPTS, r, J, why,
                                    sizeof why) == JF_OK)) {
        int bad = 0;
        for (int i = 0; i < NPTS; i++) {
            /* column -1: the residual; what disagrees is shown, for the GPU machine's log */
            for (long c = -1; c < (long)np; c++) {
                double g = c < 0 ? r[i] : J[i * np + (size_t)c];
                double want = c < 0 ? r_ref[i] : J_ref[i * np + (size_t)c];
                /* 8x the spread seen: the trials sample the ulps, they do not bound them */
                double t = fmax(tol, 8 * sens[(size_t)i * (np + 1) + (size_t)(c + 1)]);
                if (!(t < 0.5)) { /* a value rounding decides (or may make non-finite) */
                    st->cuda_rounding++;
                    continue;
                }
                st->cuda_values++;
                st->cuda_widened += t > tol;
                if (agree(g, want, t)) continue;
                char what[32] = "residual";
                if (c >= 0) snprintf(what, sizeof what, "J column %ld", c);
                if (bad++ < 3)
                    fprintf(stderr, "  CUDA %s at point %d (x0 = %.17g): %.17g, reference %.17g "
                                    "(relative %.3g, tolerance %.3g)\n",
                            what, i, ds->x[i], g, want, fabs(g - want) / fmax(fabs(g), fabs(want)),
                            t);
            }
        }
        if (!CHECK(bad == 0)) {
            char *t = jf_dag_to_text(m->dag, m->f, NULL, NULL);
            fprintf(stderr, "  model: %s (%d disagreements)\n", t ? t : "?", bad);
            free(t);
        }
    }
    if (nf > 0) {
        double acc[MAXACC], want[MAXACC], mag[MAXACC], rr[NPTS], JJ[NPTS * MAXP];
        size_t nacc = jf_emit_num_acc(np);
        for (int loss = 0; loss < 5; loss++) {
            if (jf_cuda_jacobian_rows(ck, ds->p, xs, NPTS, ys, ws, nf, rr, JJ, why, sizeof why) !=
                    JF_OK ||
                !CHECK(jf_cuda_normal_eq(ck, ds->p, xs, NPTS, ys, ws, nf, (jf_loss)loss, 1.3, acc,
                                         why, sizeof why) == JF_OK))
                break;
            sums_from_rows(np, rr, JJ, nf, loss, 1.3, want, mag);
            check_sums(acc, want, mag, nacc, "CUDA normal_eq");
        }
    }
    st->cuda_models++;
    jf_cuda_kernels_free(ck);
}

/* All checks of one model at the data ds. */
static void check_model(const jf_model *m, dataset *ds, stats *st, double cuda_tol) {
    size_t np = m->np, nv = m->nv, nacc = jf_emit_num_acc(np);
    if (np > MAXP || nv > 3) return;
    jf_jit_options o;
    memset(&o, 0, sizeof o);
    o.no_cache = 1;
    jf_kernels *kc = NULL, *ki = NULL;
    char *warn = NULL;
    if (!CHECK(jf_kernels_get(m, JF_BACKEND_C, &o, &kc, &warn) == JF_OK) ||
        !CHECK(jf_kernels_get(m, JF_BACKEND_INTERP, NULL, &ki, NULL) == JF_OK)) {
        jf_kernels_free(kc);
        free(warn);
        return;
    }
    if (warn) fprintf(stderr, "warning: %s\n", warn);
    free(warn);
    st->models++;
    st->compiled += jf_kernels_backend(kc) == JF_BACKEND_C;
    CHECK(jf_kernels_backend(kc) == JF_BACKEND_C);

    /* value, gradient and residual at all points, weighted, over a range not starting at 0 */
    jf_data_view dv = {ds->x, NPTS, ds->y, ds->w};
    double rc[NPTS], ri[NPTS], Jc[NPTS * MAXP], Ji[NPTS * MAXP], res[NPTS];
    const size_t b0 = 3;
    jf_kernels_jacobian_row(kc, ds->p, &dv, b0, NPTS, rc, Jc);
    jf_kernels_jacobian_row(ki, ds->p, &dv, b0, NPTS, ri, Ji);
    jf_kernels_residual(kc, ds->p, &dv, b0, NPTS, res);
    int bad = 0;
    for (size_t i = 0; i < NPTS - b0; i++) {
        bad += !agree(rc[i], ri[i], 1e-12);
        bad += !agree(res[i], ri[i], 1e-12);
        for (size_t c = 0; c < np; c++) bad += !agree(Jc[i * np + c], Ji[i * np + c], 1e-12);
    }
    if (!CHECK(bad == 0)) {
        char *t = jf_dag_to_text(m->dag, m->f, NULL, NULL);
        fprintf(stderr, "  model: %s\n", t ? t : "?");
        free(t);
    }

    /* normal_eq on the points where everything is finite */
    double xs[3 * NPTS], ys[NPTS], ws[NPTS], r_all[NPTS], J_all[NPTS * MAXP];
    jf_kernels_jacobian_row(ki, ds->p, &dv, 0, NPTS, r_all, J_all);
    size_t nf = 0;
    for (size_t i = 0; i < NPTS; i++) {
        int fin = isfinite(r_all[i]);
        for (size_t c = 0; c < np; c++) fin = fin && isfinite(J_all[i * np + c]);
        /* keep magnitudes sane, so squares cannot overflow */
        fin = fin && fabs(r_all[i]) < 1e100;
        for (size_t c = 0; c < np; c++) fin = fin && fabs(J_all[i * np + c]) < 1e100;
        if (!fin) continue;
        for (size_t j = 0; j < nv; j++) xs[j * NPTS + nf] = ds->x[j * NPTS + i];
        ys[nf] = ds->y[i];
        ws[nf] = ds->w[i];
        nf++;
    }
    st->finite_points += nf;
    if (nf > 0) {
        double acc[MAXACC], want[MAXACC], mag[MAXACC], rr[NPTS], JJ[NPTS * MAXP];
        for (int weighted = 0; weighted < 2; weighted++) {
            jf_data_view fv = {xs, NPTS, ys, weighted ? ws : NULL};
            jf_kernels_jacobian_row(ki, ds->p, &fv, 0, nf, rr, JJ);
            for (int loss = 0; loss < 5; loss++) {
                double fscale = loss ? 0.8 : 1.0;
                sums_from_rows(np, rr, JJ, nf, loss, fscale, want, mag);
                for (int be = 0; be < 2; be++) {
                    memset(acc, 0xff, sizeof acc); /* poison: every sum must be written */
                    jf_kernels_normal_eq(be ? kc : ki, ds->p, &fv, 0, nf, (jf_loss)loss, fscale, acc);
                    check_sums(acc, want, mag, nacc, be ? "C normal_eq" : "interpreter normal_eq");
                    st->sum_checks++;
                }
            }
        }
        /* y absent means y = 0 */
        jf_data_view noy = {xs, NPTS, NULL, NULL};
        jf_kernels_jacobian_row(ki, ds->p, &noy, 0, nf, rr, JJ);
        sums_from_rows(np, rr, JJ, nf, 0, 1.0, want, mag);
        jf_kernels_normal_eq(kc, ds->p, &noy, 0, nf, JF_LOSS_LINEAR, 1.0, acc);
        check_sums(acc, want, mag, nacc, "C normal_eq without y");
    }
    if (have_gpu) check_cuda(m, ds, r_all, J_all, xs, ys, ws, nf, cuda_tol, st);
    jf_kernels_free(kc);
    jf_kernels_free(ki);
}

/* The builtin functions and operators, one model each, then formulas from practice. */
static const struct {
    const char *text;
    const char *vars;
    double xlo, xhi;
} fixed[] = {
    {"a*exp(b*x)", NULL, -2, 2},
    {"a*log(b*x + 3)", NULL, -1, 4},
    {"a*log10(b*x + 3)", NULL, -1, 4},
    {"a*sqrt(b*x + 3)", NULL, -1, 4},
    {"a*cbrt(b*x - 1)", NULL, -3, 3},
    {"a*abs(b*x - 1)", NULL, -3, 3},
    {"a*sin(b*x)", NULL, -3, 3},
    {"a*cos(b*x)", NULL, -3, 3},
    {"a*tan(b*x)", NULL, -0.7, 0.7},
    {"a*asin(b*x/5)", NULL, -2, 2},
    {"a*acos(b*x/5)", NULL, -2, 2},
    {"a*atan(b*x)", NULL, -3, 3},
    {"a*sinh(b*x)", NULL, -3, 3},
    {"a*cosh(b*x)", NULL, -3, 3},
    {"a*tanh(b*x)", NULL, -3, 3},
    {"a*erf(b*x)", NULL, -3, 3},
    {"a*erfc(b*x)", NULL, -3, 3},
    {"a*pow(x + 4, b)", NULL, -3, 3},
    {"a*atan2(x, b)", NULL, -3, 3},
    {"min(a*x, b)", NULL, -3, 3},
    {"max(a*x, b)", NULL, -3, 3},
    {"hypot(a*x, b)", NULL, -3, 3},
    {"a*sign(x - b) + b*x", NULL, -3, 3},
    {"a*x^3 + b*x^-2 + a^0.5", NULL, 0.2, 3},
    /* negative powers whose positive power overflows: (1/x)^n, not 1/inf = 0 */
    {"a*(b*x)^-2 + x^-3 + b*x^-64", NULL, 1e150, 1e160},
    {"a/(b + x) - a*x", NULL, 0.5, 3},
    /* J columns in the subnormals, where an ulp is absolute (a fuzzer's model) */
    {"a + x + b*x^2 + c + e*(d*x^500)", NULL, 0.222, 0.245},
    {"if(x < a, b*x, a*b)", NULL, -3, 3},
    {"(x >= a)*b + (x <= a)*b^2 + (x == a) + (x != b)*a + (x > b)*a", NULL, -3, 3},
    {"pi*a*x + exp(1)*b", NULL, -3, 3},
    {"a*exp(-b*x)*sin(c*x+d)+e", NULL, 0, 10},
    /* NIST StRD (../shared/nist/models.tsv) */
    {"b1*(1-exp(-b2*x))", NULL, 0.5, 5},
    {"exp(-b1*x)/(b2+b3*x)", NULL, 0.5, 5},
    {"b1*exp(-b2*x) + b3*exp(-b4*x) + b5*exp(-b6*x)", NULL, 0, 1.2},
    {"b1*exp(-b2*x) + b3*exp(-(x-b4)^2/b5^2) + b6*exp(-(x-b7)^2/b8^2)", NULL, 0, 5},
    {"b1*x^b2", NULL, 0.5, 5},
    {"(b1+b2*x+b3*x^2+b4*x^3)/(1+b5*x+b6*x^2+b7*x^3)", NULL, 0.5, 5},
    {"b1 - b2*x1*exp(-b3*x2)", "x1,x2", 0.5, 5},
    {"b1*(1-(1+2*b2*x)^(-0.5))", NULL, 0.5, 5},
    {"b1 - b2*x - atan(b3/(x-b4))/pi", NULL, 0.5, 5},
    {"b1*(x^2+x*b2)/(x^2+x*b3+b4)", NULL, 0.5, 5},
    {"b1/(1+exp(b2-b3*x))", NULL, 0.5, 5},
    {"(b1/b2)*exp(-0.5*((x-b3)/b2)^2)", NULL, 0.5, 5},
    /* larger models: the fused C loop and the tiled CUDA normal_eq */
    {"a1*exp(-((x-m1)/s1)^2) + a2*exp(-((x-m2)/s2)^2) + a3*exp(-((x-m3)/s3)^2) + c0 + c1*x + "
     "c2*x^2", NULL, -3, 3},
    {"a1*exp(-((x-m1)/s1)^2) + a2*exp(-((x-m2)/s2)^2) + a3*exp(-((x-m3)/s3)^2) + "
     "a4*exp(-((x-m4)/s4)^2) + a5*exp(-((x-m5)/s5)^2) + c0 + c1*x + c2*x^2 + c3*x^3 + c4*x^4",
     NULL, -3, 3},
};

/* The corpus campaign: each file's model, as a fixed one over [-3, 3]. */
typedef struct corpus_ctx {
    rng *g;
    stats *st;
    size_t files, compiled;
} corpus_ctx;

static void corpus_model(const char *name, const char *bytes, size_t len, void *vctx) {
    corpus_ctx *c = vctx;
    c->files++;
    if (len && (unsigned char)bytes[0] < 0x20) bytes++, len--;
    jf_model_options o = jf_model_options_default();
    o.max_nodes = 1u << 12;
    jf_model *m = NULL;
    if (jf_model_compile(bytes, len, &o, &m, NULL) != JF_OK) return;
    c->compiled++;
    if (m->np > MAXP || m->nv > 3) { /* beyond what a dataset holds */
        jf_model_free(m);
        return;
    }
    dataset ds;
    make_data(&ds, c->g, m->np, m->nv, -3, 3);
    int before = jf_test_failed;
    check_model(m, &ds, c->st, 1e-9);
    if (jf_test_failed != before) fprintf(stderr, "  corpus file: %s\n", name);
    jf_model_free(m);
}

/* loss.h where r²/f_scale² overflows (jf_loss_far): the cost term, ρ'(z)·r (= r_scaled·J_scale)
 * and J_scale against closed forms in u = |r|/f_scale, for residuals on both sides of the
 * overflow up to the largest double, and f_scale from 1e-150 to 1e150. These were NaN (inf·0)
 * from |r| ≈ 1.3e154·f_scale on (arctan's J_scale from 0.95 times that). Beyond u ~ 1e20 every loss's ρ' + 2ρ''z is below ε, so J_scale
 * is its floor √ε = 2^-26; an infinite or NaN residual stays NaN. */
static void check_loss_far(void) {
    static const double fss[3] = {1e-150, 1.0, 1e150};
    static const double us[7] = {1e100, 1e150, 1.3e154, 1.4e154, 1e160, 1e250, 1e300};
    for (int loss = 1; loss <= 4; loss++)
        for (int f = 0; f < 3; f++)
            for (int k = 0; k < 8; k++)
                for (int sign = -1; sign <= 1; sign += 2) {
                    double fs = fss[f], fs2 = fs * fs, ifs2 = 1.0 / fs2;
                    double r = k < 7 ? sign * us[k] * fs : sign * DBL_MAX, a = fabs(r);
                    if (!(a <= DBL_MAX)) continue; /* 1e300·1e150 */
                    double lu = log(a) - log(fs); /* ln u, u itself may overflow */
                    double rs, js, cost = jf_loss_scale(loss, r, fs2, ifs2, &rs, &js);
                    double want, rho1r; /* closed forms to rounding for u >= 1e100 */
                    if (loss <= 2) {
                        want = 2 * fs * a;
                        rho1r = fs;
                    } else if (loss == 3) {
                        want = 2 * fs2 * lu;
                        rho1r = fs * exp(-lu);
                    } else {
                        want = fs2 * 1.5707963267948966;
                        rho1r = fs * exp(-3 * lu);
                    }
                    /* the cost itself may exceed the doubles (2 f_scale |r|); ρ'r below
                     * 1e-280 f_scale (u^-3 for arctan) may underflow to 0 */
                    int ok = (isfinite(want) ? fabs(cost - want) <= 1e-13 * want : cost == want) &&
                             js == 0x1p-26 &&
                             fabs(rs * js - sign * rho1r) <= 1e-12 * rho1r + 1e-280 * fs;
                    if (!CHECK(ok))
                        fprintf(stderr, "  loss %d, f_scale %g, r %g: cost %.17g (want %.17g), "
                                "js %g, rho'r %g (want %g)\n", loss, fs, r, cost, want, js,
                                rs * js, sign * rho1r);
                }
    for (int loss = 1; loss <= 4; loss++) {
        double rs, js, cost = jf_loss_scale(loss, INFINITY, 1.0, 1.0, &rs, &js);
        CHECK(isnan(cost) && isnan(rs) && isnan(js));
        cost = jf_loss_scale(loss, NAN, 1.0, 1.0, &rs, &js);
        CHECK(isnan(cost) && isnan(rs) && isnan(js));
    }
}

int main(void) {
    char cache[] = "/tmp/jf_test_crosscheck_XXXXXX";
    if (mkdtemp(cache)) setenv("JITFIT_CACHE_DIR", cache, 1);
    char status[256];
    have_gpu = jf_cuda_status(status, sizeof status);
    if (!have_gpu) printf("CUDA part skipped: %s\n", status);
    else printf("CUDA: %s\n", status);

    check_loss_far();
    rng g = {0x853c49e6748fea9bu};
    const char *seed = getenv("JITFIT_CROSSCHECK_SEED"); /* other random models: a campaign */
    if (seed && strtoull(seed, NULL, 0)) g.s = strtoull(seed, NULL, 0);
    stats st = {0};
    dataset ds;
    const char *corpus = getenv("JITFIT_CROSSCHECK_CORPUS");
    if (corpus && *corpus) {
        corpus_ctx c = {&g, &st, 0, 0};
        jf_test_replay_dir(corpus, corpus_model, &c);
        printf("corpus %s: %zu files, %zu models compiled, %zu checked (%zu compiled to C), %zu "
               "finite points, %zu normal_eq comparisons, %zu on the GPU\n",
               corpus, c.files, c.compiled, st.models, st.compiled, st.finite_points,
               st.sum_checks, st.cuda_models);
        report_cuda(&st);
        printf("disagreements: %d in kind, %d in value, %d in sums\n", nkinds_bad, nvalues_bad,
               nsums_bad);
        CHECK(nkinds_bad == 0 && nvalues_bad == 0 && nsums_bad == 0);
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", cache);
        jf_test_run(cmd, NULL, NULL);
        return jf_test_finish();
    }
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        jf_model *m = from_text(fixed[i].text, fixed[i].vars);
        if (!m) continue;
        for (int rep = 0; rep < 2; rep++) {
            make_data(&ds, &g, m->np, m->nv, fixed[i].xlo, fixed[i].xhi);
            check_model(m, &ds, &st, 1e-12);
        }
        jf_model_free(m);
    }
    size_t nfixed = st.models, nrandom = 0;
    for (int i = 0; i < 240; i++) {
        jf_model *m = random_model(&g);
        if (!m) continue;
        make_data(&ds, &g, m->np, m->nv, -3, 3);
        check_model(m, &ds, &st, 1e-9);
        nrandom++;
        jf_model_free(m);
    }
    printf("%zu fixed and %zu random model checks (%zu compiled to C), %zu finite points, "
           "%zu normal_eq comparisons, %zu on the GPU\n",
           nfixed, nrandom, st.compiled, st.finite_points, st.sum_checks, st.cuda_models);
    report_cuda(&st);
    printf("disagreements: %d in kind, %d in value, %d in sums\n", nkinds_bad, nvalues_bad,
           nsums_bad);
    CHECK(nrandom >= 200);
    CHECK(nkinds_bad == 0 && nvalues_bad == 0 && nsums_bad == 0);
    /* most random models must have had finite points to compare sums on */
    CHECK(st.sum_checks > 20 * (nfixed + nrandom) / 2);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache);
    jf_test_run(cmd, NULL, NULL);
    return jf_test_finish();
}
