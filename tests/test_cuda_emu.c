/* The CUDA emulator itself (runtime/cuda_emu.c, cuda_emu_device.h), on which test_gpu_emulated
 * and test_crosscheck_emulated rely: through the same jf_cuda_* calls the GPU solvers make,
 * - shuffles: __shfl_down_sync keeps a lane's own value past the warp's end, __shfl_sync reads
 *   the source lane of the caller's warp;
 * - a shared-memory tree reduction with __syncthreads gives the block sums exactly;
 * - a kernel that reads shared memory another thread writes without a barrier (a race) gives
 *   different answers in blocks that run their threads in opposite orders;
 * - threads waiting at different barriers are reported as a deadlock, not a hang;
 * - a launch of more threads per block than the kernel's __launch_bounds__ is refused;
 * - device memory starts as NaN, and allocations beyond JITFIT_CUDA_EMULATE_MEM fail as out of
 *   memory;
 * - graphs: a WHILE node loops while a kernel sets its condition (reset at each launch);
 *   two nodes with no edge between them run newest first, with an edge in order; argument
 *   values are copied when a node is added;
 * - JITFIT_CUDA_EMULATE_ULPS=N: double-precision libm results move by at most the function's
 *   bound, some do, the same call twice gives the same value, exact (integer) results and fp32
 *   stay, and another N moves them another way.
 * Under ASan the coroutine switches make ASan warn once that it ignores
 * __asan_handle_no_return (the emulated threads' stacks are not the thread's); harmless here.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda_api.h"
#include "runtime/cuda_emu.h"
#include "runtime/jit_nvrtc.h"
#include "tests/testlib.h"

static const char source[] =
    "extern \"C\" __device__ __cudart_builtin__ void cudaGraphSetConditional(unsigned long long h,\n"
    "                                                                     unsigned int v);\n"
    "extern \"C\" __global__ void shfl_test(const double *in, double *out, int *iout)\n"
    "{\n"
    "    unsigned int t = threadIdx.x;\n"
    "    out[t] = __shfl_down_sync(0xffffffffu, in[t], 3);\n"
    "    iout[t] = __shfl_sync(0xffffffffu, (int)t * 10, 5);\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(256) block_sum(const double *in, double *out)\n"
    "{\n"
    "    __shared__ double sh[256];\n"
    "    sh[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];\n"
    "    __syncthreads();\n"
    "    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {\n"
    "        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];\n"
    "        __syncthreads();\n"
    "    }\n"
    "    if (threadIdx.x == 0) out[blockIdx.x] = sh[0];\n"
    "}\n"
    "extern \"C\" __global__ void racy(double *out)\n"
    "{\n"
    "    __shared__ double sh[64];\n"
    "    sh[threadIdx.x] = 1000.0 * blockIdx.x + threadIdx.x;\n"
    "    out[blockIdx.x * blockDim.x + threadIdx.x] = sh[(threadIdx.x + 1) % blockDim.x];\n"
    "}\n"
    "extern \"C\" __global__ void deadlock(double *out)\n"
    "{\n"
    "    if (threadIdx.x < 16) __syncthreads();\n"
    "    else __syncwarp();\n"
    "    out[threadIdx.x] = 1.0;\n"
    "}\n"
    "extern \"C\" __global__ void loop_cond(unsigned long long h, const int *count, int limit)\n"
    "{\n"
    "    if (threadIdx.x == 0) cudaGraphSetConditional(h, *count < limit ? 1u : 0u);\n"
    "}\n"
    "extern \"C\" __global__ void bump(int *count)\n"
    "{\n"
    "    if (threadIdx.x == 0) *count += 1;\n"
    "}\n"
    "extern \"C\" __global__ void put(int *where, int value)\n"
    "{\n"
    "    if (threadIdx.x == 0) *where = value;\n"
    "}\n";

enum { K_SHFL, K_SUM, K_RACY, K_DEADLOCK, K_COND, K_BUMP, K_PUT, NK };
static const char *const names[NK] = {"shfl_test", "block_sum", "racy", "deadlock",
                                      "loop_cond", "bump", "put"};

static void test_kernels(void *const *fn) {
    char why[512];
    jf_devptr in, out, iout;
    CHECK(jf_cuda_alloc(&in, 1024 * sizeof(double), why, sizeof why) == JF_OK);
    CHECK(jf_cuda_alloc(&out, 1024 * sizeof(double), why, sizeof why) == JF_OK);
    CHECK(jf_cuda_alloc(&iout, 64 * sizeof(int), why, sizeof why) == JF_OK);
    double h[1024], r[1024];
    int ir[64];
    /* fresh device memory reads as NaN */
    CHECK(jf_cuda_to_host(r, out, sizeof r, why, sizeof why) == JF_OK);
    CHECK(isnan(r[0]) && isnan(r[1023]));

    for (int i = 0; i < 1024; i++) h[i] = (double)(i * 7 % 13) + 0.25 * i;
    CHECK(jf_cuda_to_device(in, h, sizeof h, why, sizeof why) == JF_OK);

    /* shuffles over two warps */
    void *a1[] = {&in, &out, &iout};
    CHECK(jf_cuda_launch(fn[K_SHFL], 1, 64, 0, a1, why, sizeof why) == JF_OK);
    CHECK(jf_cuda_to_host(r, out, 64 * sizeof(double), why, sizeof why) == JF_OK);
    CHECK(jf_cuda_to_host(ir, iout, sizeof ir, why, sizeof why) == JF_OK);
    int bad = 0;
    for (int t = 0; t < 64; t++) {
        bad += r[t] != ((t & 31) + 3 < 32 ? h[t + 3] : h[t]);
        bad += ir[t] != ((t & ~31) + 5) * 10;
    }
    CHECK(bad == 0);

    /* block reduction: 4 blocks of 256 */
    void *a2[] = {&in, &out};
    CHECK(jf_cuda_launch(fn[K_SUM], 4, 256, 0, a2, why, sizeof why) == JF_OK);
    CHECK(jf_cuda_to_host(r, out, 4 * sizeof(double), why, sizeof why) == JF_OK);
    for (int b = 0; b < 4; b++) {
        double s = 0;
        for (int i = 0; i < 256; i++) s += h[b * 256 + i];
        CHECK_NEAR(r[b], s, 1e-15);
    }
    /* more threads than its __launch_bounds__(256): a GPU refuses the launch, and so does the
     * emulator, directly and as a graph node */
    why[0] = '\0';
    CHECK(jf_cuda_launch(fn[K_SUM], 1, 512, 0, a2, why, sizeof why) == JF_ERR_INTERNAL);
    CHECK_CONTAINS(why, "more than the kernel's __launch_bounds__ (256)");
    jf_cuda_graph *bg = NULL;
    CHECK(jf_cuda_graph_new(&bg, NULL, why, sizeof why) == JF_OK);
    CHECK(jf_cuda_graph_kernel(bg, fn[K_SUM], 1, 512, a2, why, sizeof why) == JF_ERR_INTERNAL);
    CHECK(jf_cuda_graph_kernel(bg, fn[K_SUM], 1, 256, a2, why, sizeof why) == JF_OK);
    jf_cuda_graph_free(bg);

    /* a race: block 0 runs its threads forward and reads neighbours not written yet, block 1
     * runs them backward and reads them written */
    void *a3[] = {&out};
    CHECK(jf_cuda_launch(fn[K_RACY], 2, 64, 0, a3, why, sizeof why) == JF_OK);
    CHECK(jf_cuda_to_host(r, out, 128 * sizeof(double), why, sizeof why) == JF_OK);
    int wrong0 = 0, wrong1 = 0;
    for (int t = 0; t < 64; t++) {
        wrong0 += r[t] != (double)((t + 1) % 64);
        wrong1 += r[64 + t] != 1000.0 + (double)((t + 1) % 64);
    }
    printf("race: %d of 64 wrong in the forward block, %d in the backward one\n", wrong0, wrong1);
    CHECK(wrong0 + wrong1 > 0);

    /* threads of one warp at different barriers */
    why[0] = '\0';
    CHECK(jf_cuda_launch(fn[K_DEADLOCK], 1, 32, 0, a3, why, sizeof why) == JF_ERR_INTERNAL);
    CHECK_CONTAINS(why, "emulated kernel deadlock in block 0");

    jf_cuda_free(in);
    jf_cuda_free(out);
    jf_cuda_free(iout);
}

static void test_graphs(void *const *fn) {
    char why[512];
    jf_devptr count, slot;
    CHECK(jf_cuda_alloc(&count, sizeof(int), why, sizeof why) == JF_OK);
    CHECK(jf_cuda_alloc(&slot, sizeof(int), why, sizeof why) == JF_OK);
    int zero = 0, got = -1, limit = 5;

    /* count = 0 → cond → WHILE { bump → cond }: 5 trips; twice, as the condition restarts at 0 */
    jf_cuda_graph *g = NULL;
    unsigned long long h = 0;
    CHECK(jf_cuda_graph_new(&g, NULL, why, sizeof why) == JF_OK);
    CHECK(jf_cuda_graph_while_handle(g, &h, why, sizeof why) == JF_OK);
    void *ca[] = {&h, &count, &limit}, *ba[] = {&count};
    CHECK(jf_cuda_graph_kernel(g, fn[K_COND], 1, 32, ca, why, sizeof why) == JF_OK);
    limit = 999; /* the node copied the value 5 */
    CHECK(jf_cuda_graph_while_begin(g, h, why, sizeof why) == JF_OK);
    limit = 5;
    CHECK(jf_cuda_graph_kernel(g, fn[K_BUMP], 1, 32, ba, why, sizeof why) == JF_OK);
    CHECK(jf_cuda_graph_kernel(g, fn[K_COND], 1, 32, ca, why, sizeof why) == JF_OK);
    jf_cuda_graph_while_end(g);
    CHECK(jf_cuda_graph_instantiate(g, why, sizeof why) == JF_OK);
    for (int rep = 0; rep < 2; rep++) {
        CHECK(jf_cuda_graph_to_device(g, count, &zero, sizeof zero, why, sizeof why) == JF_OK);
        CHECK(jf_cuda_graph_launch(g, why, sizeof why) == JF_OK);
        CHECK(jf_cuda_graph_to_host(g, &got, count, sizeof got, why, sizeof why) == JF_OK);
        CHECK(jf_cuda_graph_sync(g, why, sizeof why) == JF_OK);
        CHECK(got == 5);
    }
    CHECK(jf_cuda_graph_syncs(g) == 2);
    jf_cuda_graph_free(g);

    /* put(1) and put(2), no edge: the newer runs first, so 1 stays; with the edge, 2 */
    for (int edge = 0; edge <= 1; edge++) {
        CHECK(jf_cuda_graph_new(&g, NULL, why, sizeof why) == JF_OK);
        int one = 1, two = 2;
        void *pa[] = {&slot, &one}, *pb[] = {&slot, &two};
        void *first = NULL;
        CHECK(jf_cuda_graph_kernel_deps(g, fn[K_PUT], 1, 1, pa, NULL, 0, &first, why, sizeof why) == JF_OK);
        void *deps[1] = {first};
        CHECK(jf_cuda_graph_kernel_deps(g, fn[K_PUT], 1, 1, pb, deps, edge, NULL, why, sizeof why) == JF_OK);
        CHECK(jf_cuda_graph_instantiate(g, why, sizeof why) == JF_OK);
        CHECK(jf_cuda_graph_launch(g, why, sizeof why) == JF_OK);
        CHECK(jf_cuda_to_host(&got, slot, sizeof got, why, sizeof why) == JF_OK);
        CHECK(got == (edge ? 2 : 1));
        jf_cuda_graph_free(g);
    }
    jf_cuda_free(count);
    jf_cuda_free(slot);
}

/* One thread per input: exp, cos, erfc, pow and expf of it. */
static const char math_source[] =
    "extern \"C\" __global__ void math_k(const double *in, double *out, float *fout)\n"
    "{\n"
    "    unsigned int t = threadIdx.x;\n"
    "    double x = in[t];\n"
    "    out[5 * t] = exp(x);\n"
    "    out[5 * t + 1] = cos(x);\n"
    "    out[5 * t + 2] = erfc(x);\n"
    "    out[5 * t + 3] = pow(x + 4.0, 1.3);\n"
    "    out[5 * t + 4] = exp(x);\n"
    "    fout[t] = expf((float)x);\n"
    "}\n";

enum { NMATH = 256 };

/* math_k's results on the inputs h with JITFIT_CUDA_EMULATE_ULPS=ulps ("" for off); each
 * setting is a different source text, so that the module cache builds it anew. */
static int run_math(const char *ulps, const double *h, double *r, float *fr) {
    char why[512], src[sizeof math_source + 64];
    setenv("JITFIT_CUDA_EMULATE_ULPS", ulps, 1);
    jf_cuda_emulate_reread();
    snprintf(src, sizeof src, "%s/* ulps %s */\n", math_source, ulps);
    const char *name = "math_k";
    void *fn = NULL;
    jf_jit_options jo;
    memset(&jo, 0, sizeof jo);
    jo.no_cache = 1;
    struct jf_cache_entry *held = NULL;
    int st = jf_cuda_module_get(src, &name, 1, &jo, &fn, &held, NULL, why, sizeof why, NULL, 0);
    unsetenv("JITFIT_CUDA_EMULATE_ULPS");
    jf_cuda_emulate_reread();
    if (!CHECK(st == JF_OK)) {
        fprintf(stderr, "math module: %s\n", why);
        return 0;
    }
    jf_devptr in = 0, out = 0, fout = 0;
    int ok = jf_cuda_alloc(&in, NMATH * sizeof *h, why, sizeof why) == JF_OK &&
             jf_cuda_alloc(&out, 5 * NMATH * sizeof *r, why, sizeof why) == JF_OK &&
             jf_cuda_alloc(&fout, NMATH * sizeof *fr, why, sizeof why) == JF_OK &&
             jf_cuda_to_device(in, h, NMATH * sizeof *h, why, sizeof why) == JF_OK;
    void *a[] = {&in, &out, &fout};
    ok = ok && jf_cuda_launch(fn, 1, NMATH, 0, a, why, sizeof why) == JF_OK &&
         jf_cuda_to_host(r, out, 5 * NMATH * sizeof *r, why, sizeof why) == JF_OK &&
         jf_cuda_to_host(fr, fout, NMATH * sizeof *fr, why, sizeof why) == JF_OK;
    if (!CHECK(ok)) fprintf(stderr, "math kernel: %s\n", why);
    jf_cuda_free(in);
    jf_cuda_free(out);
    jf_cuda_free(fout);
    jf_cuda_module_release(held);
    return ok;
}

/* Whole ulps from a to b (same sign, finite). */
static long ulps_apart(double a, double b) {
    long n = 0;
    for (double v = a; v != b && n < 100; n++) v = nextafter(v, b);
    return n;
}

static void test_ulps(void) {
    double h[NMATH], host[5 * NMATH], m7[5 * NMATH], m8[5 * NMATH];
    float fhost[NMATH], f7[NMATH], f8[NMATH];
    for (int i = 0; i < NMATH; i++) h[i] = i == 0 ? 0.0 : -3.0 + 6.0 * i / NMATH + 1e-3 / i;
    if (!run_math("", h, host, fhost) || !run_math("7", h, m7, f7) || !run_math("8", h, m8, f8))
        return;
    static const long bound[5] = {1, 2, 5, 2, 1};
    int over = 0, moved = 0, differ = 0, unstable = 0, exact = 0, fp32 = 0;
    for (int i = 0; i < NMATH; i++) {
        for (int c = 0; c < 5; c++) {
            size_t q = (size_t)(5 * i + c);
            over += ulps_apart(host[q], m7[q]) > bound[c] || ulps_apart(host[q], m8[q]) > bound[c];
            moved += m7[q] != host[q];
            differ += m7[q] != m8[q];
        }
        unstable += m7[5 * i] != m7[5 * i + 4]; /* exp(x) twice */
        fp32 += f7[i] != fhost[i];
    }
    exact = m7[0] == 1.0 && m7[1] == 1.0 && m8[0] == 1.0; /* exp(0), cos(0) */
    if (!CHECK(over == 0 && moved > NMATH && differ > NMATH && unstable == 0 && exact &&
               fp32 == 0))
        fprintf(stderr, "  ulps: %d beyond the bound, %d moved, %d differ between seeds, %d "
                        "unstable, exact %d, %d fp32 moved\n",
                over, moved, differ, unstable, exact, fp32);
}

static void test_memory(void) {
    char why[512];
    size_t fr, tot;
    CHECK(jf_cuda_mem_info(&fr, &tot) == JF_OK);
    CHECK(tot == 64u << 20 && fr <= tot);
    jf_devptr big = 0, p = 0;
    CHECK(jf_cuda_alloc(&big, (size_t)48 << 20, why, sizeof why) == JF_OK);
    CHECK(jf_cuda_alloc(&p, (size_t)32 << 20, why, sizeof why) == JF_ERR_NOMEM);
    CHECK_CONTAINS(why, "out of memory (emulated device");
    jf_cuda_free(big);
    CHECK(jf_cuda_alloc(&p, (size_t)32 << 20, why, sizeof why) == JF_OK);
    jf_cuda_free(p);
    CHECK(jf_cuda_mem_info(&fr, &tot) == JF_OK && fr == tot);
}

/* $JITFIT_CUDA_PRECOMPILE_DIR: a module the emulator builds is also compiled by NVRTC into a
 * CUBIN for sm_90, stored in that directory under the key an sm_90 GPU with this NVRTC looks up
 * (jf_cuda_cache_key, as module_key makes it); not without the variable. Skipped without
 * NVRTC. */
static void test_precompile(void) {
    char why[512];
    if (jf_nvrtc_load(why, sizeof why) != JF_OK) {
        printf("precompile: not checked (%s)\n", why);
        return;
    }
    char dir[] = "/tmp/jitfit-precompile-XXXXXX";
    if (!CHECK(mkdtemp(dir))) return;
    static const char src[] =
        "extern \"C\" __global__ void k(double *v) { v[threadIdx.x] *= 2.0; }\n";
    const char *name = "k";
    jf_jit_options jo;
    memset(&jo, 0, sizeof jo);
    void *fn = NULL;
    struct jf_cache_entry *held = NULL;
    int vmaj, vmin, nsup, cubin;
    const int *sup;
    jf_nvrtc_version(&vmaj, &vmin);
    jf_nvrtc_archs(&sup, &nsup);
    int arch = jf_nvrtc_target(90, sup, nsup, &cubin);
    jf_cache_key key = jf_cuda_cache_key(src, vmaj, vmin, 90, arch, cubin);
    jf_cache_dir cd;
    jf_cache_dir_open(dir, 0, 1, &cd);
    unsigned char *image = NULL;
    size_t size = 0;
    /* without the variable: the emulator's module only */
    CHECK(jf_cuda_module_get(src, &name, 1, &jo, &fn, &held, NULL, why, sizeof why, NULL, 0) ==
          JF_OK);
    jf_cuda_module_release(held);
    CHECK(jf_cache_disk_load(&cd, &key, JF_CACHE_KIND_CUDA_CUBIN, &image, &size, NULL, 0) !=
          JF_CACHE_ENTRY_HIT);
    free(image);
    image = NULL;
    /* with it (another source text: the memory cache holds the first one's module) */
    static const char src2[] =
        "extern \"C\" __global__ void k(double *v) { v[threadIdx.x] *= 3.0; }\n";
    key = jf_cuda_cache_key(src2, vmaj, vmin, 90, arch, cubin);
    setenv("JITFIT_CUDA_PRECOMPILE_DIR", dir, 1);
    char warn[512] = "";
    CHECK(jf_cuda_module_get(src2, &name, 1, &jo, &fn, &held, NULL, why, sizeof why, warn,
                             sizeof warn) == JF_OK);
    unsetenv("JITFIT_CUDA_PRECOMPILE_DIR");
    jf_cuda_module_release(held);
    CHECK_STREQ(warn, "");
    int hit = jf_cache_disk_load(&cd, &key, JF_CACHE_KIND_CUDA_CUBIN, &image, &size, why,
                                 sizeof why) == JF_CACHE_ENTRY_HIT;
    CHECK(hit && size > 4 && memcmp(image, cubin ? "\177ELF" : "//", cubin ? 4 : 2) == 0);
    printf("precompile: NVRTC %d.%d, %s for sm_90, %zu bytes in the cache\n", vmaj, vmin,
           cubin ? "a CUBIN" : "PTX", size);
    free(image);
    /* again: found in the cache */
    CHECK(jf_cuda_precompile(src2, dir, 90, why, sizeof why) == JF_OK);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

int main(void) {
    setenv("JITFIT_CUDA_EMULATE", "1", 1);
    setenv("JITFIT_CUDA_EMULATE_MEM", "67108864", 1);
    jf_cuda_emulate_reread();
    char why[512], status[256];
    CHECK(jf_cuda_status(status, sizeof status) == 1);
    CHECK_CONTAINS(status, "CUDA emulator");
    void *fn[NK];
    jf_jit_options jo;
    memset(&jo, 0, sizeof jo);
    struct jf_cache_entry *held = NULL;
    int st = jf_cuda_module_get(source, names, NK, &jo, fn, &held, NULL, why, sizeof why, NULL, 0);
    if (!CHECK(st == JF_OK)) {
        fprintf(stderr, "module: %s\n", why);
        return jf_test_finish();
    }
    test_kernels(fn);
    test_graphs(fn);
    test_memory();
    test_ulps();
    test_precompile();
    jf_cuda_module_release(held);
    return jf_test_finish();
}
