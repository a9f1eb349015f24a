/* bench_jit: what the JIT and the kernel cache cost, and how fast the generated normal_eq is.
 *
 * Measures, for the damped sine a*exp(-b*x)*sin(c*x+d)+e (5 parameters) and a 20-parameter
 * model (five Gaussian peaks on a quartic baseline):
 *   - cold C compile + load through jf_kernels_get (new process, empty cache directory), with
 *     its parts: emitting the source, the compiler, loading;
 *   - NVRTC to CUBIN for sm_90 (no load: there may be no GPU), first call in the process and
 *     warm, for the normal_eq built for the linear loss and for any loss;
 *   - a disk-cache hit (new process, verified entry) and an in-memory hit;
 *   - one normal_eq pass over 1e6 points with the generated kernels (every loop shape, several
 *     flag sets) against a hand-written fused loop compiled with the same compiler and flags;
 *     and, as an experiment only, the hand-written loop with -ffast-math (glibc's libmvec
 *     vectorizes exp/sin/cos then) with how far its sums move.
 * Times are medians. Not a test: it asserts nothing; docs/PERFORMANCE.md records its output
 * and the command.
 *
 * usage: bench_jit [--points N] [--reps R] [--quick]
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../codegen/emit.h"
#include "../runtime/jit_cc.h"
#include "../runtime/jit_nvrtc.h"
#include "../runtime/kernels.h"

static const char *const damped_sine = "a*exp(-b*x)*sin(c*x+d)+e";
static const char *const peaks20 =
    "a1*exp(-((x-m1)/s1)^2) + a2*exp(-((x-m2)/s2)^2) + a3*exp(-((x-m3)/s3)^2) + "
    "a4*exp(-((x-m4)/s4)^2) + a5*exp(-((x-m5)/s5)^2) + c0 + c1*x + c2*x^2 + c3*x^3 + c4*x^4";

/* The fused loop a person would write for the damped sine: linear loss, y given, no weights,
 * acc in the layout of kernels.h. Compiled by the same compiler with the same flags as the
 * generated code. */
static const char *const hand_source =
    "#include <math.h>\n"
    "#include <stddef.h>\n"
    "void hand_normal_eq(const double *p, const double *x, const double *y, size_t begin,\n"
    "                    size_t end, double *acc)\n"
    "{\n"
    "    const double a = p[0], b = p[1], c = p[2], d = p[3], e = p[4];\n"
    "    double h00 = 0, h01 = 0, h02 = 0, h03 = 0, h04 = 0, h11 = 0, h12 = 0, h13 = 0, h14 = 0;\n"
    "    double h22 = 0, h23 = 0, h24 = 0, h33 = 0, h34 = 0, h44 = 0;\n"
    "    double g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, cost = 0;\n"
    "    for (size_t i = begin; i < end; i++) {\n"
    "        const double xi = x[i];\n"
    "        const double E = exp(-b * xi), arg = c * xi + d;\n"
    "        const double S = sin(arg), C = cos(arg), aE = a * E;\n"
    "        const double r = aE * S + e - y[i];\n"
    "        const double j0 = E * S, j1 = -xi * aE * S, j2 = xi * aE * C, j3 = aE * C;\n"
    "        h00 += j0 * j0; h01 += j0 * j1; h02 += j0 * j2; h03 += j0 * j3; h04 += j0;\n"
    "        h11 += j1 * j1; h12 += j1 * j2; h13 += j1 * j3; h14 += j1;\n"
    "        h22 += j2 * j2; h23 += j2 * j3; h24 += j2;\n"
    "        h33 += j3 * j3; h34 += j3; h44 += 1.0;\n"
    "        g0 += j0 * r; g1 += j1 * r; g2 += j2 * r; g3 += j3 * r; g4 += r;\n"
    "        cost += r * r;\n"
    "    }\n"
    "    double out[21] = {h00, h01, h02, h03, h04, h11, h12, h13, h14, h22, h23, h24, h33, h34,\n"
    "                      h44, g0, g1, g2, g3, g4, cost};\n"
    "    for (int q = 0; q < 21; q++) acc[q] = out[q];\n"
    "}\n";

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static jf_model *compile(const char *text) {
    jf_model *m = NULL;
    jf_diagnostics *d = NULL;
    if (jf_model_compile(text, (size_t)-1, NULL, &m, &d) != JF_OK) {
        fprintf(stderr, "bench_jit: cannot compile %s\n%s", text, d ? jf_diagnostics_text(d) : "");
        exit(1);
    }
    jf_diagnostics_free(d);
    return m;
}

static char root[] = "/tmp/jitfit-bench-XXXXXX";

/* jf_kernels_get in a new process (an empty memory cache); returns its time in ms, or -1. */
static double get_in_child(const char *text, jf_cache_result want) {
    int p[2];
    if (pipe(p) != 0) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        jf_model *m = compile(text);
        jf_kernels *k = NULL;
        double t0 = now_ms();
        int st = jf_kernels_get(m, JF_BACKEND_C, NULL, &k, NULL);
        double ms = now_ms() - t0;
        if (st != JF_OK || jf_kernels_backend(k) != JF_BACKEND_C || jf_kernels_cache_result(k) != want)
            ms = -1;
        ssize_t w = write(p[1], &ms, sizeof ms);
        _exit(w == (ssize_t)sizeof ms ? 0 : 1);
    }
    close(p[1]);
    double ms = -1;
    if (read(p[0], &ms, sizeof ms) != (ssize_t)sizeof ms) ms = -1;
    close(p[0]);
    int ws;
    waitpid(pid, &ws, 0);
    return ms;
}

/* Each in a new process, as a new `jitfit` run: cold (empty directory: probes the compiler,
 * compiles, stores, loads), disk hit (the compiler identity remembered in the directory), and
 * disk hit once the remembered identity is gone (runs `cc --version` again). */
static void bench_cold_and_disk(const char *name, const char *text, int reps) {
    double cold[16], disk[16], probe[16];
    char dir[256], cmd[400];
    for (int r = 0; r < reps; r++) {
        snprintf(dir, sizeof dir, "%s/%s-cold-%d", root, name, r);
        setenv("JITFIT_CACHE_DIR", dir, 1);
        cold[r] = get_in_child(text, JF_CACHE_MISS);
        disk[r] = get_in_child(text, JF_CACHE_DISK);
        snprintf(cmd, sizeof cmd, "rm -f %s/cc-*.id", dir);
        if (system(cmd) != 0) exit(1);
        probe[r] = get_in_child(text, JF_CACHE_DISK);
    }
    printf("  %-12s cold compile+load %7.1f ms   disk hit %6.2f ms   (%.2f ms when it must run "
           "cc --version)\n",
           name, median(cold, reps), median(disk, reps), median(probe, reps));
}

/* The parts of a cold compile, measured one by one. */
static void bench_parts(const char *name, const jf_model *m, int reps) {
    double emit[16], cc[16], load[16];
    const char *cmd = jf_cc_command(NULL);
    for (int r = 0; r < reps; r++) {
        double t0 = now_ms();
        jf_emit_options o = jf_emit_options_default(JF_EMIT_C);
        char *src = jf_emit(m, &o);
        emit[r] = now_ms() - t0;
        char dir[4096], so[4200], why[512];
        if (!src || jf_cc_tmpdir(dir, sizeof dir) != JF_OK) exit(1);
        t0 = now_ms();
        if (jf_cc_compile(cmd, NULL, src, dir, so, sizeof so, NULL) != JF_OK) exit(1);
        cc[r] = now_ms() - t0;
        t0 = now_ms();
        void *h = jf_cc_load_file(so, why, sizeof why);
        load[r] = now_ms() - t0;
        if (h) dlclose(h);
        jf_cc_tmpdir_remove(dir);
        free(src);
    }
    printf("  %-12s parts: emit %.3f ms, cc %.1f ms, dlopen %.2f ms\n", name, median(emit, reps),
           median(cc, reps), median(load, reps));
}

static void bench_memory_hit(const char *name, const jf_model *m) {
    jf_kernels *k = NULL;
    jf_kernels_get(m, JF_BACKEND_C, NULL, &k, NULL);
    jf_kernels_free(k);
    enum { N = 100000 };
    double t0 = now_ms();
    for (int i = 0; i < N; i++) {
        jf_kernels_get(m, JF_BACKEND_C, NULL, &k, NULL);
        jf_kernels_free(k);
    }
    printf("  %-12s in-memory hit %.2f us\n", name, (now_ms() - t0) * 1e3 / N);
}

static void bench_nvrtc(const char *name, const jf_model *m, int reps) {
    char why[256];
    if (jf_nvrtc_load(why, sizeof why) != JF_OK) {
        printf("  %-12s NVRTC %s\n", name, why);
        return;
    }
    for (int lossmode = 0; lossmode < 2; lossmode++) {
        jf_emit_options o = jf_emit_options_default(JF_EMIT_CUDA);
        o.cuda_loss = lossmode == 0 ? JF_LOSS_LINEAR : -1;
        double t[16], first = 0;
        for (int r = 0; r <= reps; r++) {
            double t0 = now_ms();
            char *src = jf_emit(m, &o);
            unsigned char *img = NULL;
            size_t size = 0;
            char *log = NULL;
            int st = jf_nvrtc_compile(src, 90, 1, &img, &size, &log);
            double ms = now_ms() - t0;
            if (st != JF_OK) {
                printf("  NVRTC failed: %s\n", log ? log : "?");
                exit(1);
            }
            if (r == 0) first = ms;
            else t[r - 1] = ms;
            free(src);
            free(img);
            free(log);
        }
        printf("  %-12s NVRTC → CUBIN sm_90, normal_eq for %-8s first %6.1f ms, warm %6.1f ms\n",
               name, lossmode == 0 ? "linear:" : "any loss:", first, median(t, reps));
    }
}

typedef void (*neq_fn)(const double *, const double *, size_t, const double *, const double *,
                       size_t, size_t, int, double, double *);
typedef void (*hand_fn)(const double *, const double *, const double *, size_t, size_t, double *);

/* Compiles src with the default flags plus extra; returns the handle (or exits). */
static void *build(const char *src, const char *extra) {
    char dir[4096], so[4200], why[512];
    char *log = NULL;
    if (jf_cc_tmpdir(dir, sizeof dir) != JF_OK) exit(1);
    if (jf_cc_compile(jf_cc_command(NULL), extra, src, dir, so, sizeof so, &log) != JF_OK) {
        fprintf(stderr, "bench_jit: compile failed (%s):\n%s\n", extra, log ? log : "");
        exit(1);
    }
    void *h = jf_cc_load_file(so, why, sizeof why);
    jf_cc_tmpdir_remove(dir);
    free(log);
    if (!h) {
        fprintf(stderr, "bench_jit: %s\n", why);
        exit(1);
    }
    return h;
}

static void *sym(void *h, const char *name) {
    void *s = dlsym(h, name);
    if (!s) {
        fprintf(stderr, "bench_jit: no %s\n", name);
        exit(1);
    }
    return s;
}

/* The data of the normal_eq runs. */
typedef struct data {
    size_t n;    /* points */
    double *x;   /* variable */
    double *y;   /* response */
    double p[20]; /* parameters */
} data;

static double time_neq(neq_fn f, const data *d, int reps, double *acc) {
    double t[32];
    for (int r = 0; r < reps; r++) {
        double t0 = now_ms();
        f(d->p, d->x, d->n, d->y, NULL, 0, d->n, 0, 1.0, acc);
        t[r] = now_ms() - t0;
    }
    return median(t, reps);
}

static double time_hand(hand_fn f, const data *d, int reps, double *acc) {
    double t[32];
    for (int r = 0; r < reps; r++) {
        double t0 = now_ms();
        f(d->p, d->x, d->y, 0, d->n, acc);
        t[r] = now_ms() - t0;
    }
    return median(t, reps);
}

static double max_rel(const double *a, const double *b, int n) {
    double m = 0;
    for (int q = 0; q < n; q++) m = fmax(m, fabs(a[q] - b[q]) / fmax(fabs(b[q]), 1e-300));
    return m;
}

static const char *shape_name(int s) {
    return s == JF_NEQ_FUSED ? "fused" : s == JF_NEQ_SIMD ? "omp simd" : "blocked(8)";
}

static void bench_neq_damped(const jf_model *m, size_t n, int reps) {
    data d;
    d.n = n;
    d.x = malloc(n * sizeof *d.x);
    d.y = malloc(n * sizeof *d.y);
    double p[5] = {2.5, 0.3, 1.7, 0.4, 0.5};
    memcpy(d.p, p, sizeof p);
    for (size_t i = 0; i < n; i++) {
        d.x[i] = 10.0 * (double)i / (double)n;
        d.y[i] = 2.4 * exp(-0.31 * d.x[i]) * sin(1.69 * d.x[i] + 0.41) + 0.5 + 0.01 * sin(1e3 * d.x[i]);
    }
    static const char *const flagsets[] = {"", "-O1", "-O3", "-march=native", "-O3 -march=native"};
    printf("\n  normal_eq, damped sine, %zu points (linear loss, y, no weights), median of %d\n"
           "  rounds, each timing every variant once (so background load hits all alike):\n",
           n, reps);
    printf("  %-20s %-24s %10s %10s %8s\n", "flags (+defaults)", "kernel", "ms/pass", "ns/point",
           "vs hand");
    for (size_t fi = 0; fi < sizeof flagsets / sizeof flagsets[0]; fi++) {
        /* variant 0: hand-written; 1..3: generated fused, omp simd, blocked */
        void *h[4];
        hand_fn hand;
        neq_fn gen[3];
        h[0] = build(hand_source, flagsets[fi]);
        void *s = sym(h[0], "hand_normal_eq");
        memcpy(&hand, &s, sizeof s);
        for (int shape = 0; shape < 3; shape++) {
            jf_emit_options o = jf_emit_options_default(JF_EMIT_C);
            o.neq_shape = (jf_neq_shape)shape;
            char *src = jf_emit(m, &o);
            h[shape + 1] = build(src, flagsets[fi]);
            s = sym(h[shape + 1], "jf_normal_eq");
            memcpy(&gen[shape], &s, sizeof s);
            free(src);
        }
        double t[4][32], acc[4][21];
        for (int r = 0; r < reps; r++) {
            for (int v = 0; v < 4; v++) {
                double t0 = now_ms();
                if (v == 0) hand(d.p, d.x, d.y, 0, d.n, acc[0]);
                else gen[v - 1](d.p, d.x, d.n, d.y, NULL, 0, d.n, 0, 1.0, acc[v]);
                t[v][r] = now_ms() - t0;
            }
        }
        double th = median(t[0], reps);
        const char *fl = flagsets[fi][0] ? flagsets[fi] : "-O2";
        printf("  %-20s %-24s %10.2f %10.2f %8s\n", fl, "hand-written fused", th,
               th * 1e6 / (double)n, "1.00");
        for (int v = 1; v < 4; v++) {
            double tg = median(t[v], reps);
            char label[64];
            snprintf(label, sizeof label, "generated %s%s", shape_name(v - 1),
                     v == 1 ? " *" : "");
            printf("  %-20s %-24s %10.2f %10.2f %8.2f   (sums differ by %.1e rel.)\n", fl, label,
                   tg, tg * 1e6 / (double)n, tg / th, max_rel(acc[v], acc[0], 21));
        }
        for (int v = 0; v < 4; v++) dlclose(h[v]);
    }
    printf("  (* the default shape)\n");
    double ref[21];
    /* Experiment only: -ffast-math lets glibc's vector math (libmvec) take exp/sin/cos. */
    double acc[21];
    /* GCC 12 merges sin and cos of one argument into sincos, which has no vector variant it
     * uses; writing cos as sin(arg + pi/2) keeps two vectorizable calls. */
    char *vec_source = strdup(hand_source);
    char *at = vec_source ? strstr(vec_source, "C = cos(arg)") : NULL;
    if (!at) exit(1);
    char *vs = malloc(strlen(vec_source) + 64);
    if (!vs) exit(1);
    snprintf(vs, strlen(vec_source) + 64, "%.*sC = sin(arg + 0x1.921fb54442d18p+0)%s",
             (int)(at - vec_source), vec_source, at + strlen("C = cos(arg)"));
    free(vec_source);
    void *hh = build(vs, "-O3 -march=native -ffast-math");
    free(vs);
    void *s = sym(hh, "hand_normal_eq");
    hand_fn fast;
    memcpy(&fast, &s, sizeof s);
    double fastacc[21];
    double tf = time_hand(fast, &d, reps, fastacc);
    void *h0 = build(hand_source, "");
    s = sym(h0, "hand_normal_eq");
    hand_fn hand;
    memcpy(&hand, &s, sizeof s);
    double th = time_hand(hand, &d, reps, ref);
    printf("  experiment, not used: hand-written, cos as a 2nd sin, -O3 -march=native -ffast-math "
           "(libmvec vectorizes exp/sin):\n    "
           "%.2f ms/pass (%.2fx of -O2 IEEE), sums move by up to %.1e rel.\n",
           tf, tf / th, max_rel(fastacc, ref, 21));
    dlclose(hh);
    dlclose(h0);

    /* the interpreter, for scale */
    jf_kernels *ki = NULL;
    jf_kernels_get(m, JF_BACKEND_INTERP, NULL, &ki, NULL);
    jf_data_view dv = {d.x, d.n, d.y, NULL};
    double t0 = now_ms();
    jf_kernels_normal_eq(ki, d.p, &dv, 0, d.n, JF_LOSS_LINEAR, 1.0, acc);
    double ti = now_ms() - t0;
    printf("  interpreter: %.1f ms/pass (%.1fx of hand-written -O2)\n", ti, ti / th);
    jf_kernels_free(ki);
    free(d.x);
    free(d.y);
}

static void bench_neq_peaks(const jf_model *m, size_t n, int reps) {
    data d;
    d.n = n;
    d.x = malloc(n * sizeof *d.x);
    d.y = malloc(n * sizeof *d.y);
    /* a1 m1 s1 ... in model order: a1, m1, s1, a2, ... then c0..c4 */
    for (size_t k = 0; k < jf_model_num_params(m); k++) {
        const char *nm = jf_model_param_name(m, k);
        int idx = nm[1] - '0';
        d.p[k] = nm[0] == 'a' ? 1.0 + 0.2 * idx : nm[0] == 'm' ? 2.0 * idx - 1.0
               : nm[0] == 's' ? 0.5 + 0.1 * idx : 0.01 * (idx + 1);
    }
    for (size_t i = 0; i < n; i++) {
        d.x[i] = 10.0 * (double)i / (double)n;
        d.y[i] = exp(-(d.x[i] - 3) * (d.x[i] - 3)) + 0.1 * d.x[i];
    }
    printf("\n  normal_eq, 20-parameter peaks model, %zu points, median of %d:\n", n, reps);
    double acc[231], ref[231];
    double tref = 0;
    for (int shape = 0; shape < 3; shape++) {
        jf_emit_options o = jf_emit_options_default(JF_EMIT_C);
        o.neq_shape = (jf_neq_shape)shape;
        char *src = jf_emit(m, &o);
        void *h = build(src, "");
        neq_fn f;
        void *s = sym(h, "jf_normal_eq");
        memcpy(&f, &s, sizeof s);
        double t = time_neq(f, &d, reps, shape ? acc : ref);
        if (shape == 0) tref = t;
        printf("  -O2 generated %-12s %8.2f ms/pass %8.2f ns/point  %.2fx of fused\n",
               shape_name(shape), t, t * 1e6 / (double)n, t / tref);
        free(src);
        dlclose(h);
    }
    free(d.x);
    free(d.y);
}

/* Loop shapes against each other over models of growing size, with their compile times. */
static void bench_shapes(size_t n, int reps) {
    static const char *const models[][2] = {
        {"Misra1a (2)", "b1*(1-exp(-b2*x))"},
        {"Rat42 (3)", "b1/(1+exp(b2-b3*x))"},
        {"damped sine (5)", "a*exp(-b*x)*sin(c*x+d)+e"},
        {"Lanczos (6)", "b1*exp(-b2*x) + b3*exp(-b4*x) + b5*exp(-b6*x)"},
        {"Hahn1 (7)", "(b1+b2*x+b3*x^2+b4*x^3)/(1+b5*x+b6*x^2+b7*x^3)"},
        {"Gauss1 (8)", "b1*exp(-b2*x) + b3*exp(-(x-b4)^2/b5^2) + b6*exp(-(x-b7)^2/b8^2)"},
        {"12 params", "a1*exp(-((x-m1)/s1)^2) + a2*exp(-((x-m2)/s2)^2) + a3*exp(-((x-m3)/s3)^2)"
                      " + c0 + c1*x + c2*x^2"},
        {"peaks (20)", NULL},
    };
    data d;
    d.n = n;
    d.x = malloc(n * sizeof *d.x);
    d.y = malloc(n * sizeof *d.y);
    for (size_t i = 0; i < n; i++) {
        d.x[i] = 0.1 + 3.0 * (double)i / (double)n;
        d.y[i] = 0.5 * sin(3.0 * d.x[i]);
    }
    printf("\n  normal_eq loop shapes by model size, -O2, %zu points, ns/point (median of %d),\n"
           "  and the compile time of the whole unit:\n", n, reps);
    printf("  %-18s %6s %9s %9s %9s %11s %11s\n", "model (params)", "sums", "fused", "omp simd",
           "blocked", "cc fused", "cc blocked");
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
        jf_model *m = compile(models[mi][1] ? models[mi][1] : peaks20);
        size_t np = jf_model_num_params(m);
        for (size_t k = 0; k < np; k++) d.p[k] = 0.8 + 0.05 * (double)k;
        double t[3], ccms[3] = {0, 0, 0};
        for (int shape = 0; shape < 3; shape++) {
            jf_emit_options o = jf_emit_options_default(JF_EMIT_C);
            o.neq_shape = (jf_neq_shape)shape;
            char *src = jf_emit(m, &o);
            double t0 = now_ms();
            void *h = build(src, "");
            ccms[shape] = now_ms() - t0;
            neq_fn f;
            void *s = sym(h, "jf_normal_eq");
            memcpy(&f, &s, sizeof s);
            double acc[231];
            t[shape] = time_neq(f, &d, reps, acc) * 1e6 / (double)n;
            free(src);
            dlclose(h);
        }
        printf("  %-18s %6zu %9.2f %9.2f %9.2f %8.0f ms %8.0f ms\n", models[mi][0],
               jf_emit_num_acc(np), t[0], t[1], t[2], ccms[0], ccms[2]);
        jf_model_free(m);
    }
    free(d.x);
    free(d.y);
}

int main(int argc, char **argv) {
    size_t n = 1000000;
    int reps = 7, quick = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--points") == 0 && i + 1 < argc) n = (size_t)atol(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else {
            fprintf(stderr, "usage: bench_jit [--points N] [--reps R] [--quick]\n");
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (reps > 15) reps = 15;
    if (!mkdtemp(root)) return 1;
    unsetenv("JITFIT_NO_CACHE");
    jf_model *ds = compile(damped_sine), *pk = compile(peaks20);

    printf("\nJIT and cache (targets: cold C <= 100 ms, NVRTC <= 150 ms, disk hit <= 3 ms, "
           "memory hit <= 10 us):\n");
    int creps = quick ? 3 : 5;
    bench_cold_and_disk("damped-sine", damped_sine, creps);
    bench_parts("damped-sine", ds, creps);
    bench_cold_and_disk("peaks-20", peaks20, creps);
    bench_parts("peaks-20", pk, creps);
    char mdir[256];
    snprintf(mdir, sizeof mdir, "%s/memory", root);
    setenv("JITFIT_CACHE_DIR", mdir, 1);
    /* only now in this process: the children above probed the compiler as a new process does */
    const char *ident;
    char why[512];
    if (jf_cc_identity(jf_cc_command(NULL), NULL, &ident, why, sizeof why) != JF_OK) {
        fprintf(stderr, "bench_jit: %s\n", why);
        return 1;
    }
    printf("  (compiler: %s; flags: %s)\n", ident, JF_CC_DEFAULT_FLAGS);
    bench_memory_hit("damped-sine", ds);
    bench_memory_hit("peaks-20", pk);
    bench_nvrtc("damped-sine", ds, creps);
    bench_nvrtc("peaks-20", pk, creps);

    bench_neq_damped(ds, n, reps);
    bench_neq_peaks(pk, n, reps);
    bench_shapes(n, quick ? 3 : 5);

    jf_model_free(ds);
    jf_model_free(pk);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (system(cmd) != 0) fprintf(stderr, "bench_jit: could not remove %s\n", root);
    return 0;
}
