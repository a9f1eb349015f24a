/* bench_anchors: jitfit's CPU solver against the C and C++ libraries people fit with in
 * compiled code, GSL's multifit_nlinear and Ceres (its general Problem and its TinySolver), in
 * one run, on the same data, from the same start, with the same tolerances, as ratios
 * (docs/PERFORMANCE.md, "CPU solver vs GSL and Ceres").
 *
 * Every anchor gets the model's analytic Jacobian written by hand (Ceres's usual way, automatic
 * differentiation with Jets, is timed too), so the comparison is of solvers and evaluation, not
 * of finite differences. Every answer is checked: the tables print its largest relative
 * parameter difference from jitfit's and its optimality (how far from a stationary point, worked
 * out here in long double, whatever the solver claims). Because the libraries' tolerances do not
 * mean the same things, the anchors also run "tight" (every tolerance at --tight), to time them
 * at the accuracy jitfit's polish reaches by default.
 *
 * usage: bench_anchors [--sizes 1e4,1e5,1e6] [--repeat R] [--threads T]
 *                      [--batch FITSxPOINTS] [--ceres-max N] [--tight TOL] [--skip-batch]
 *   --sizes     points of the single fits (damped sine, as bench/bench_fit.py)
 *   --threads   threads for jitfit, Ceres's evaluation and the batch loops (default 2)
 *   --batch     the many-small-fits case, e.g. 1e4x1e3 (default); the anchors run one fit per
 *               call, spread over --threads threads as a user would
 *   --ceres-max largest single fit given to ceres::Problem (its residual blocks take ≈ 0.5 kB
 *               per point; default 1e7)
 *   --tight     the anchors' tolerance in the "tight" rows (default 1e-12)
 * Prints markdown tables on stdout.
 */
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <ceres/ceres.h>
#include <ceres/tiny_solver.h>
#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_vector.h>
#include <gsl/gsl_version.h>

#include "bench_util.h"
#include "jitfit.h"

extern "C" void openblas_set_num_threads(int);

namespace {

constexpr int NP = 5;
constexpr double TOL = 1e-8;
constexpr int MAXITER = 200;
const double P0[NP] = {1.5, 0.2, 1.45, 0, 0};
const char *const FORMULA = "a*exp(-b*x)*sin(c*x+d)+e";

/* One fit's data and what a solver made of it. */
struct Data {
    const double *x;
    const double *y;
    size_t n;
};

struct Outcome {
    double p[NP];
    int converged = 0; /* the solver's own claim */
    long nfev = 0;     /* residual evaluations (passes over the data) */
    long njev = 0;     /* Jacobian evaluations, where the solver counts them apart */
};

/* The model and its gradient at one point; the anchors all call this. */
inline double damped_sine(const double *p, double x, double *g) {
    double e = std::exp(-p[1] * x), s = std::sin(p[2] * x + p[3]);
    if (g) {
        double c = std::cos(p[2] * x + p[3]);
        g[0] = e * s;
        g[1] = -p[0] * x * e * s;
        g[2] = p[0] * e * c * x;
        g[3] = p[0] * e * c;
        g[4] = 1;
    }
    return p[0] * e * s + p[4];
}

/* ---- jitfit ---------------------------------------------------------------------------- */

jf_fit_options jitfit_options(int threads, bool vector_math) {
    jf_fit_options o = jf_fit_options_default();
    o.ftol = o.xtol = o.gtol = TOL;
    o.p0 = P0;
    o.nthreads = threads;
    o.vector_math = vector_math;
    return o;
}

bool jitfit_one(const jf_model *m, const Data &d, int threads, bool vector_math, Outcome &out) {
    jf_data jd = {};
    jd.n = d.n;
    jd.x = d.x;
    jd.ldx = d.n;
    jd.y = d.y;
    jf_fit_options o = jitfit_options(threads, vector_math);
    jf_fit_result *r = nullptr;
    if (jf_fit(m, &jd, &o, &r, nullptr) != JF_OK) return false;
    std::copy(r->params, r->params + NP, out.p);
    out.converged = r->success;
    out.nfev = (long)r->nfev;
    jf_fit_result_free(r);
    return true;
}

/* ---- GSL multifit_nlinear (trust region, LM, Moré scaling) -------------------------------- */

int gsl_f(const gsl_vector *p, void *arg, gsl_vector *f) {
    const Data *d = static_cast<const Data *>(arg);
    const double *q = gsl_vector_const_ptr(p, 0);
    for (size_t i = 0; i < d->n; i++)
        gsl_vector_set(f, i, damped_sine(q, d->x[i], nullptr) - d->y[i]);
    return GSL_SUCCESS;
}

int gsl_df(const gsl_vector *p, void *arg, gsl_matrix *J) {
    const Data *d = static_cast<const Data *>(arg);
    const double *q = gsl_vector_const_ptr(p, 0);
    for (size_t i = 0; i < d->n; i++) damped_sine(q, d->x[i], gsl_matrix_ptr(J, i, 0));
    return GSL_SUCCESS;
}

/* GSL as its manual shows it: allocate, init, driver, covariance from the final J, free. */
bool gsl_one(const Data &d, const gsl_multifit_nlinear_solver *solver, double tol,
             Outcome &out) {
    gsl_multifit_nlinear_parameters par = gsl_multifit_nlinear_default_parameters();
    par.solver = solver;
    gsl_multifit_nlinear_fdf fdf = {};
    fdf.f = gsl_f;
    fdf.df = gsl_df;
    fdf.n = d.n;
    fdf.p = NP;
    fdf.params = const_cast<Data *>(&d);
    gsl_multifit_nlinear_workspace *w =
        gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &par, d.n, NP);
    if (!w) return false;
    gsl_vector_const_view p0 = gsl_vector_const_view_array(P0, NP);
    int info = 0;
    gsl_multifit_nlinear_init(&p0.vector, &fdf, w);
    int st = gsl_multifit_nlinear_driver(MAXITER, tol, tol, tol, nullptr, nullptr, &info, w);
    gsl_matrix *covar = gsl_matrix_alloc(NP, NP);
    gsl_multifit_nlinear_covar(gsl_multifit_nlinear_jac(w), 0.0, covar);
    gsl_matrix_free(covar);
    const gsl_vector *p = gsl_multifit_nlinear_position(w);
    for (int k = 0; k < NP; k++) out.p[k] = gsl_vector_get(p, (size_t)k);
    out.converged = st == GSL_SUCCESS;
    out.nfev = (long)fdf.nevalf;
    out.njev = (long)fdf.nevaldf;
    gsl_multifit_nlinear_free(w);
    return true;
}

/* ---- Ceres ------------------------------------------------------------------------------ */

/* One residual block per point, as Ceres's curve-fitting example writes it. */
struct SineResidual {
    double x, y;
    template <typename T> bool operator()(const T *p, T *r) const {
        r[0] = p[0] * exp(-p[1] * x) * sin(p[2] * x + p[3]) + p[4] - y;
        return true;
    }
};

class SineAnalytic final : public ceres::SizedCostFunction<1, NP> {
  public:
    SineAnalytic(double x, double y) : x_(x), y_(y) {}
    bool Evaluate(double const *const *p, double *r, double **J) const override {
        r[0] = damped_sine(p[0], x_, J && J[0] ? J[0] : nullptr) - y_;
        return true;
    }

  private:
    double x_, y_;
};

enum CeresCost { CERES_AUTODIFF, CERES_ANALYTIC };

bool ceres_one(const Data &d, CeresCost cost, ceres::LinearSolverType ls, double tol,
               int threads, Outcome &out) {
    std::copy(P0, P0 + NP, out.p);
    ceres::Problem problem;
    for (size_t i = 0; i < d.n; i++) {
        ceres::CostFunction *f;
        if (cost == CERES_AUTODIFF)
            f = new ceres::AutoDiffCostFunction<SineResidual, 1, NP>(
                new SineResidual{d.x[i], d.y[i]});
        else
            f = new SineAnalytic(d.x[i], d.y[i]);
        problem.AddResidualBlock(f, nullptr, out.p);
    }
    ceres::Solver::Options o;
    o.trust_region_strategy_type = ceres::LEVENBERG_MARQUARDT;
    o.linear_solver_type = ls;
    o.function_tolerance = o.gradient_tolerance = o.parameter_tolerance = tol;
    o.max_num_iterations = MAXITER;
    o.num_threads = threads;
    o.logging_type = ceres::SILENT;
    ceres::Solver::Summary s;
    ceres::Solve(o, &problem, &s);
    out.converged = s.termination_type == ceres::CONVERGENCE;
    out.nfev = s.num_successful_steps + s.num_unsuccessful_steps + 1;
    return s.IsSolutionUsable();
}

/* TinySolver: Ceres's dense LM for small problems, header only, no Problem to build. */
struct TinySine {
    using Scalar = double;
    enum { NUM_RESIDUALS = Eigen::Dynamic, NUM_PARAMETERS = NP };
    const Data *d;
    int NumResiduals() const { return (int)d->n; }
    bool operator()(const double *p, double *r, double *J) const {
        const size_t n = d->n;
        for (size_t i = 0; i < n; i++) {
            double g[NP];
            r[i] = damped_sine(p, d->x[i], J ? g : nullptr) - d->y[i];
            if (J)
                for (int k = 0; k < NP; k++) J[(size_t)k * n + i] = g[k]; /* column-major */
        }
        return true;
    }
};

bool tiny_one(const Data &d, double tol, Outcome &out) {
    TinySine f{&d};
    ceres::TinySolver<TinySine> solver;
    solver.options.function_tolerance = solver.options.gradient_tolerance =
        solver.options.parameter_tolerance = tol;
    solver.options.max_num_iterations = MAXITER;
    Eigen::Matrix<double, NP, 1> p;
    for (int k = 0; k < NP; k++) p[k] = P0[k];
    solver.Solve(f, &p);
    for (int k = 0; k < NP; k++) out.p[k] = p[k];
    out.converged = solver.summary.status != ceres::TinySolver<TinySine>::HIT_MAX_ITERATIONS;
    out.nfev = solver.summary.iterations + 1;
    return true;
}

/* ---- the runs --------------------------------------------------------------------------- */

double max_rel_diff(const double *a, const double *b) {
    double worst = 0;
    for (int k = 0; k < NP; k++)
        worst = std::max(worst, std::fabs(a[k] - b[k]) / std::max(std::fabs(b[k]), 1e-300));
    return worst;
}

/* How far p is from a stationary point, on a scale that does not depend on the units:
 * max_k |g_k| / (‖J_k‖ ‖r‖), g = Jᵀr (MINPACK's gtol test, jitfit's `optimality`), in long
 * double so the rounding of the sum does not hide it. Independent of any solver's own claim. */
double optimality(const Data &d, const double *p) {
    long double g[NP] = {0}, jj[NP] = {0}, rr = 0;
    for (size_t i = 0; i < d.n; i++) {
        double gi[NP];
        long double r = (long double)damped_sine(p, d.x[i], gi) - d.y[i];
        rr += r * r;
        for (int k = 0; k < NP; k++) {
            g[k] += r * gi[k];
            jj[k] += (long double)gi[k] * gi[k];
        }
    }
    long double worst = 0;
    for (int k = 0; k < NP; k++)
        worst = std::max(worst, fabsl(g[k]) / (sqrtl(jj[k]) * sqrtl(rr)));
    return (double)worst;
}

/* A configuration: which solver, its tolerance (for every test it has), where it runs. */
enum Kind { JITFIT, JITFIT_VECTOR, GSL_QR, GSL_CHOL, CERES_AUTO_QR, CERES_AN_CHOL, TINY };

struct Config {
    const char *name;
    Kind kind;
    double tol;
    bool one_thread; /* jitfit only: 1 thread instead of T */
    bool single;     /* in the single-fit table */
    bool batch;      /* in the many-fits table */
};

const jf_model *g_model;
double g_tight = 1e-12;

bool run(const Config &cf, const Data &d, int threads, Outcome &o) {
    Config c = cf;
    if (c.tol == 0) c.tol = g_tight;
    switch (c.kind) {
    case JITFIT:
    case JITFIT_VECTOR:
        return jitfit_one(g_model, d, c.one_thread ? 1 : threads, c.kind == JITFIT_VECTOR, o);
    case GSL_QR: return gsl_one(d, gsl_multifit_nlinear_solver_qr, c.tol, o);
    case GSL_CHOL: return gsl_one(d, gsl_multifit_nlinear_solver_cholesky, c.tol, o);
    case CERES_AUTO_QR: return ceres_one(d, CERES_AUTODIFF, ceres::DENSE_QR, c.tol, threads, o);
    case CERES_AN_CHOL:
        return ceres_one(d, CERES_ANALYTIC, ceres::DENSE_NORMAL_CHOLESKY, c.tol, threads, o);
    case TINY: return tiny_one(d, c.tol, o);
    }
    return false;
}

/* The anchors twice: with jitfit's tolerances (1e-8), and "tight", with every tolerance at
 * --tight (a tol of 0 below), for the time each takes to come as close to the least-squares
 * optimum as jitfit's polish does (the parameter column shows how close it came). */
const Config CONFIGS[] = {
    {"jitfit, 1 thread", JITFIT, TOL, true, true, false},
    {"jitfit `jf_fit`/`jf_fit_batch`, T threads", JITFIT, TOL, false, true, true},
    {"jitfit, vector math, T threads", JITFIT_VECTOR, TOL, false, true, true},
    {"GSL trust/lm, QR (default)", GSL_QR, TOL, false, true, true},
    {"GSL trust/lm, Cholesky", GSL_CHOL, TOL, false, true, true},
    {"Ceres Problem, autodiff, DENSE_QR", CERES_AUTO_QR, TOL, false, true, false},
    {"Ceres Problem, analytic, DENSE_NORMAL_CHOLESKY", CERES_AN_CHOL, TOL, false, true, true},
    {"Ceres TinySolver, analytic", TINY, TOL, false, true, true},
    {"GSL trust/lm, Cholesky, tight", GSL_CHOL, 0, false, true, true},
    {"Ceres Problem, analytic, DENSE_NORMAL_CHOLESKY, tight", CERES_AN_CHOL, 0, false, true,
     true},
    {"Ceres TinySolver, analytic, tight", TINY, 0, false, true, true},
};
constexpr int NCONFIG = (int)(sizeof CONFIGS / sizeof CONFIGS[0]);
constexpr int REF = 1; /* jitfit on T threads: the reference row */

void single_fits(const std::vector<double> &sizes, int repeat, int threads, double ceres_max) {
    std::printf("\n### One fit of N points (damped sine; T = %d; best of %d)\n\n", threads,
                repeat);
    std::printf("| N | configuration | time | ÷ jitfit (T threads) | max rel. param. diff vs "
                "jitfit | optimality | evaluations | converged |\n"
                "|---|---|---|---|---|---|---|---|\n");
    for (double dn : sizes) {
        size_t n = (size_t)dn;
        std::vector<double> x(n), y(n);
        rng_state = 42;
        const double truth[NP] = {2, 0.25, 1.5, 0.3, 0.5};
        for (size_t i = 0; i < n; i++) {
            x[i] = 20.0 * (double)i / (double)n;
            y[i] = damped_sine(truth, x[i], nullptr) + 0.05 * normal();
        }
        Data d{x.data(), y.data(), n};
        double ms[NCONFIG];
        Outcome res[NCONFIG];
        bool on[NCONFIG];
        for (int c = 0; c < NCONFIG; c++) {
            const Config &cf = CONFIGS[c];
            bool problem = cf.kind == CERES_AUTO_QR || cf.kind == CERES_AN_CHOL;
            on[c] = cf.single && !(problem && dn > ceres_max);
            ms[c] = NAN;
            if (on[c] && cf.kind <= JITFIT_VECTOR) run(cf, d, threads, res[c]); /* kernels */
        }
        /* rounds over the configurations, so that a slow spell of the machine (a shared VM's
         * speed drifts by tens of percent over seconds) is not all charged to one of them */
        int reps = dn >= 1e7 ? 1 : repeat;
        for (int r = 0; r < reps; r++)
            for (int c = 0; c < NCONFIG; c++) {
                if (!on[c]) continue;
                Outcome o;
                double t0 = now_ms();
                bool ok = run(CONFIGS[c], d, threads, o);
                double t = now_ms() - t0;
                if (!ok) {
                    std::fprintf(stderr, "bench_anchors: %s failed at N = %zu\n",
                                 CONFIGS[c].name, n);
                    on[c] = false;
                    ms[c] = NAN;
                    continue;
                }
                if (!(t >= ms[c])) ms[c] = t;
                res[c] = o;
            }
        for (int c = 0; c < NCONFIG; c++) {
            if (!CONFIGS[c].single) continue;
            if (std::isnan(ms[c])) {
                std::printf("| %.0e | %s | (skipped) | | | | | |\n", dn, CONFIGS[c].name);
                continue;
            }
            std::string ev = std::to_string(res[c].nfev);
            if (res[c].njev) ev += " + " + std::to_string(res[c].njev) + " J";
            std::printf("| %.0e | %s | %.4g ms | %.2f× | %.1e | %.1e | %s | %s |\n", dn,
                        CONFIGS[c].name, ms[c], ms[c] / ms[REF],
                        max_rel_diff(res[c].p, res[REF].p), optimality(d, res[c].p),
                        ev.c_str(), res[c].converged ? "yes" : "no");
        }
        std::fflush(stdout);
    }
}

/* Runs fit(i) for i in [0, nfits) on `threads` threads, each taking the next index. */
template <typename F> double spread(size_t nfits, int threads, F fit) {
    std::atomic<size_t> next{0};
    double t0 = now_ms();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; t++)
        pool.emplace_back([&] {
            for (size_t i; (i = next.fetch_add(1)) < nfits;) fit(i);
        });
    for (auto &th : pool) th.join();
    return now_ms() - t0;
}

void batch_fits(size_t nfits, size_t npts, int repeat, int threads) {
    std::vector<double> x(npts), y(nfits * npts);
    rng_state = 7;
    for (size_t j = 0; j < npts; j++) x[j] = 20.0 * (double)j / (double)npts;
    for (size_t i = 0; i < nfits; i++) {
        const double t[NP] = {1.5 + uniform(), 0.2 + 0.1 * uniform(), 1.45 + 0.1 * uniform(),
                              0.2 + 0.2 * uniform(), 0.4 + 0.2 * uniform()};
        for (size_t j = 0; j < npts; j++)
            y[i * npts + j] = damped_sine(t, x[j], nullptr) + 0.05 * normal();
    }
    std::vector<Data> d(nfits);
    std::vector<jf_data> jd(nfits);
    for (size_t i = 0; i < nfits; i++) {
        d[i] = Data{x.data(), y.data() + i * npts, npts};
        jd[i] = jf_data{};
        jd[i].n = npts;
        jd[i].x = x.data();
        jd[i].ldx = npts;
        jd[i].y = d[i].y;
    }

    std::printf("\n### %zu fits of %zu points (T = %d threads each; best of %d)\n\n", nfits, npts,
                threads, repeat);
    std::printf("| configuration | time | per fit | ÷ jitfit | max rel. param. diff vs jitfit "
                "(median) | optimality, worst (median) | mean evaluations | converged |\n"
                "|---|---|---|---|---|---|---|---|\n");
    /* one row: the time, and the spread of the answers over the fits */
    auto row = [&](const char *name, double ms, double ms_ref, const double *p, const double *pr,
                   double evals, size_t ok) {
        std::vector<double> diff(nfits), opt(nfits);
        for (size_t i = 0; i < nfits; i++) {
            diff[i] = max_rel_diff(&p[i * NP], &pr[i * NP]);
            opt[i] = optimality(d[i], &p[i * NP]);
        }
        std::sort(diff.begin(), diff.end());
        std::sort(opt.begin(), opt.end());
        std::printf("| %s | %.4g ms | %.3g µs | %.2f× | %.1e (%.1e) | %.1e (%.1e) | %.1f | %zu "
                    "|\n",
                    name, ms, 1e3 * ms / (double)nfits, ms / ms_ref, diff.back(), diff[nfits / 2],
                    opt.back(), opt[nfits / 2], evals, ok);
        std::fflush(stdout);
    };
    /* one timed run of configuration c: its best time, and its answers of the last run */
    struct Tally {
        double best = INFINITY;
        std::vector<double> p;
        double evals = 0;
        size_t ok = 0;
    };
    std::vector<Tally> tally(NCONFIG);
    auto once = [&](int c) {
        const Config &a = CONFIGS[c];
        Tally &t = tally[(size_t)c];
        t.p.assign(nfits * NP, NAN);
        t.evals = 0;
        t.ok = 0;
        double ms;
        if (a.kind <= JITFIT_VECTOR) {
            jf_fit_options o = jitfit_options(threads, a.kind == JITFIT_VECTOR);
            std::vector<jf_fit_result *> r(nfits, nullptr);
            double t0 = now_ms();
            int st = jf_fit_batch(g_model, nfits, jd.data(), nullptr, &o, r.data(), nullptr);
            ms = now_ms() - t0;
            for (size_t i = 0; i < nfits; i++) {
                if (!r[i]) continue;
                std::copy(r[i]->params, r[i]->params + NP, &t.p[i * NP]);
                t.ok += r[i]->success != 0;
                t.evals += (double)r[i]->nfev;
                jf_fit_result_free(r[i]);
            }
            if (st != JF_OK) std::fprintf(stderr, "bench_anchors: jf_fit_batch failed\n");
        } else {
            std::vector<Outcome> out(nfits);
            ms = spread(nfits, threads, [&](size_t i) { run(a, d[i], 1, out[i]); });
            for (size_t i = 0; i < nfits; i++) {
                std::copy(out[i].p, out[i].p + NP, &t.p[i * NP]);
                t.ok += out[i].converged != 0;
                t.evals += (double)out[i].nfev;
            }
        }
        t.best = std::min(t.best, ms);
    };
    for (int c = 0; c < NCONFIG; c++)
        if (CONFIGS[c].batch && CONFIGS[c].kind <= JITFIT_VECTOR) {
            once(c); /* the first call obtains the kernels */
            tally[(size_t)c].best = INFINITY;
        }
    for (int k = 0; k < repeat; k++) /* in rounds, as the single fits */
        for (int c = 0; c < NCONFIG; c++)
            if (CONFIGS[c].batch) once(c);
    const Tally &ref = tally[REF];
    for (int c = 0; c < NCONFIG; c++) {
        const Tally &t = tally[(size_t)c];
        if (CONFIGS[c].batch)
            row(CONFIGS[c].name, t.best, ref.best, t.p.data(), ref.p.data(),
                t.evals / (double)nfits, t.ok);
    }
}

int usage() {
    std::fprintf(stderr, "usage: bench_anchors [--sizes 1e4,1e5,1e6] [--repeat R] [--threads T] "
                         "[--batch FITSxPOINTS] [--ceres-max N] [--tight TOL] [--skip-batch]\n");
    return 2;
}

} // namespace

int main(int argc, char **argv) {
    std::vector<double> sizes = {1e4, 1e5, 1e6};
    int repeat = 3, threads = 2;
    double ceres_max = 1e7, bf = 1e4, bp = 1e3;
    bool batch = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (!std::strcmp(a, "--sizes") && v) {
            double s[16];
            std::vector<char> text(v, v + std::strlen(v) + 1);
            int k = parse_list(text.data(), s, 16);
            sizes.assign(s, s + k);
            i++;
        } else if (!std::strcmp(a, "--repeat") && v) repeat = std::atoi(argv[++i]);
        else if (!std::strcmp(a, "--threads") && v) threads = std::atoi(argv[++i]);
        else if (!std::strcmp(a, "--tight") && v) g_tight = std::strtod(argv[++i], nullptr);
        else if (!std::strcmp(a, "--ceres-max") && v) ceres_max = std::strtod(argv[++i], nullptr);
        else if (!std::strcmp(a, "--batch") && v) {
            if (std::sscanf(argv[++i], "%lfx%lf", &bf, &bp) != 2) return usage();
        } else if (!std::strcmp(a, "--skip-batch")) batch = false;
        else return usage();
    }
    if (repeat < 1 || threads < 1 || bf < 1 || bp < NP) return usage();
    gsl_set_error_handler_off();

    jf_model *m = nullptr;
    jf_model_options mo = jf_model_options_default();
    if (jf_model_compile(FORMULA, (size_t)-1, &mo, &m, nullptr) != JF_OK) {
        std::fprintf(stderr, "bench_anchors: the model did not compile\n");
        return 1;
    }
    g_model = m;
    std::printf("bench_anchors: model %s, start (1.5, 0.2, 1.45, 0, 0), ftol = xtol = gtol = "
                "%g, at most %d iterations; GSL %s, Ceres %s\n",
                FORMULA, TOL, MAXITER, GSL_VERSION, CERES_VERSION_STRING);
    single_fits(sizes, repeat, threads, ceres_max);
    if (batch) {
        /* a fit per thread: the libraries' own BLAS threads would only contend */
        openblas_set_num_threads(1);
        batch_fits((size_t)bf, (size_t)bp, repeat, threads);
    }
    jf_model_free(m);
    return 0;
}
