/* The device half of the CUDA emulator (runtime/cuda_emu.c): C++ text put in front of a CUDA
 * module's source so that the host's C++ compiler builds it into a shared object whose kernels
 * run on the CPU with CUDA's execution model. It is never included by the library; the build
 * embeds it (jf_embed_cuda_emu_device_h), like the prelude.
 *
 * What is emulated: the CUDA keywords the generated kernels use, threadIdx/blockIdx/blockDim/
 * gridDim, __syncthreads, __syncwarp, __shfl_sync, __shfl_down_sync, __shared__ memory and
 * cudaGraphSetConditional. Every CUDA thread of a block is a coroutine with its own stack
 * (entered once through makecontext, then switched with _setjmp/_longjmp, which costs no system
 * call); blocks run one after the other, so function-scope __shared__ variables can be plain
 * statics. A barrier releases its threads once every live thread of the block (or warp) has
 * reached it; threads that wait at different barriers are a deadlock, reported as an error
 * instead of hanging (on a GPU that is undefined behaviour); odd-numbered blocks run their
 * threads in the reverse order, so a race between barriers shows. Shuffles go through a slot per
 * thread and two warp barriers (deposit, then read). Math is the host's libm, not libdevice:
 * emulated results check the kernels' logic and indexing, not the GPU's rounding or speed.
 *
 * The host appends, for each kernel K, jf_emu_body_K (calls K with unpacked arguments) and
 * jf_emu_args_K (the arguments' sizes, for graph nodes that copy them).
 */
#include <math.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <type_traits>
#include <ucontext.h>
#include <utility>

#define __CUDACC__ 1
#define __CUDACC_RTC__ 1 /* the embedded headers then include nothing themselves */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __shared__ static
#define __cudart_builtin__

struct jf_emu_dim3 {
    unsigned int x, y, z;
};
static jf_emu_dim3 threadIdx, blockIdx, blockDim, gridDim;

/* Most threads of a block (CUDA's limit) and the stack of each emulated thread. */
#define JF_EMU_MAX_BLOCK 1024u
#define JF_EMU_STACK ((size_t)256 << 10)

enum { JF_EMU_RUN, JF_EMU_AT_WARP, JF_EMU_AT_BLOCK, JF_EMU_DONE };

struct jf_emu_thread {
    jmp_buf jb;     /* where it waits */
    int state;      /* JF_EMU_* */
    int started;    /* entered its coroutine yet */
};

static struct {
    jf_emu_thread t[JF_EMU_MAX_BLOCK];
    char *stacks;                  /* JF_EMU_MAX_BLOCK stacks, mapped on first use */
    unsigned int nt, cur;          /* threads of the block, the running one */
    jmp_buf sched;                 /* the scheduler */
    ucontext_t sched_uc, start_uc; /* for entering a fresh coroutine */
    void (*body)(void **);         /* the kernel being run */
    void **args;                   /* its arguments */
    unsigned char slot[JF_EMU_MAX_BLOCK][8]; /* shuffle values */
} jf_emu;

static void jf_emu_wait(int state) {
    jf_emu.t[jf_emu.cur].state = state;
    if (!_setjmp(jf_emu.t[jf_emu.cur].jb)) _longjmp(jf_emu.sched, 1);
}

static void jf_emu_entry(void) {
    jf_emu.body(jf_emu.args);
    jf_emu.t[jf_emu.cur].state = JF_EMU_DONE;
    _longjmp(jf_emu.sched, 1);
}

static void __syncthreads(void) { jf_emu_wait(JF_EMU_AT_BLOCK); }
static void __syncwarp(unsigned int mask = 0xffffffffu) {
    (void)mask;
    jf_emu_wait(JF_EMU_AT_WARP);
}

/* The value of thread src of the block as seen by the caller, all lanes of the warp taking part. */
template <class T> static T jf_emu_exchange(T v, unsigned int src, int valid) {
    static_assert(sizeof(T) <= 8, "shuffles move at most 8 bytes");
    unsigned int me = jf_emu.cur;
    memcpy(jf_emu.slot[me], &v, sizeof v);
    jf_emu_wait(JF_EMU_AT_WARP);
    T r = v;
    if (valid && src < jf_emu.nt) memcpy(&r, jf_emu.slot[src], sizeof r);
    jf_emu_wait(JF_EMU_AT_WARP);
    return r;
}
template <class T>
static T __shfl_down_sync(unsigned int mask, T v, unsigned int delta, int width = 32) {
    (void)mask;
    (void)width;
    unsigned int me = jf_emu.cur;
    return jf_emu_exchange(v, me + delta, (me & 31u) + delta < 32u);
}
template <class T> static T __shfl_sync(unsigned int mask, T v, int src_lane, int width = 32) {
    (void)mask;
    (void)width;
    return jf_emu_exchange(v, (jf_emu.cur & ~31u) + ((unsigned int)src_lane & 31u), 1);
}

/* A WHILE node's condition: the emulator's handle is the address of the value. */
extern "C" void cudaGraphSetConditional(unsigned long long handle, unsigned int value) {
    if (handle) *(unsigned int *)(uintptr_t)handle = value;
}

/* Runs one block to its end. 0, or -1 when its threads wait at barriers that cannot open. */
static int jf_emu_block(char *why, size_t n) {
    unsigned int nt = jf_emu.nt;
    for (unsigned int i = 0; i < nt; i++) {
        jf_emu.t[i].state = JF_EMU_RUN;
        jf_emu.t[i].started = 0;
    }
    /* odd blocks run their threads in reverse order: a kernel whose result depends on the
     * order of its threads between barriers (a race on a GPU) then disagrees with itself */
    int reverse = blockIdx.x & 1u;
    for (;;) {
        for (unsigned int k = 0; k < nt; k++) {
            unsigned int i = reverse ? nt - 1 - k : k;
            if (jf_emu.t[i].state != JF_EMU_RUN) continue;
            jf_emu.cur = i;
            threadIdx.x = i;
            if (!_setjmp(jf_emu.sched)) {
                if (jf_emu.t[i].started) _longjmp(jf_emu.t[i].jb, 1);
                jf_emu.t[i].started = 1;
                getcontext(&jf_emu.start_uc);
                jf_emu.start_uc.uc_stack.ss_sp = jf_emu.stacks + (size_t)i * JF_EMU_STACK;
                jf_emu.start_uc.uc_stack.ss_size = JF_EMU_STACK;
                jf_emu.start_uc.uc_link = NULL;
                makecontext(&jf_emu.start_uc, jf_emu_entry, 0);
                swapcontext(&jf_emu.sched_uc, &jf_emu.start_uc);
            }
        }
        /* everyone waits or is done: open the barriers that every live thread has reached */
        unsigned int live = 0, at_block = 0, opened = 0;
        for (unsigned int i = 0; i < nt; i++) {
            live += jf_emu.t[i].state != JF_EMU_DONE;
            at_block += jf_emu.t[i].state == JF_EMU_AT_BLOCK;
        }
        if (live == 0) return 0;
        for (unsigned int w = 0; w < nt; w += 32) {
            unsigned int end = w + 32 < nt ? w + 32 : nt, wl = 0, aw = 0;
            for (unsigned int i = w; i < end; i++) {
                wl += jf_emu.t[i].state != JF_EMU_DONE;
                aw += jf_emu.t[i].state == JF_EMU_AT_WARP;
            }
            if (wl > 0 && aw == wl) {
                for (unsigned int i = w; i < end; i++)
                    if (jf_emu.t[i].state == JF_EMU_AT_WARP) jf_emu.t[i].state = JF_EMU_RUN;
                opened = 1;
            }
        }
        if (!opened && at_block == live) {
            for (unsigned int i = 0; i < nt; i++)
                if (jf_emu.t[i].state == JF_EMU_AT_BLOCK) jf_emu.t[i].state = JF_EMU_RUN;
            opened = 1;
        }
        if (!opened) {
            snprintf(why, n,
                     "emulated kernel deadlock in block %u: of %u live threads %u wait at "
                     "__syncthreads and the others at warp barriers (shuffles, __syncwarp) that "
                     "not all of their warp reach",
                     blockIdx.x, live, at_block);
            return -1;
        }
    }
}

/* Runs body(args) on grid × block emulated threads. 0, or -1 with the reason in why. */
extern "C" int jf_emu_launch(void (*body)(void **), void **args, unsigned int grid,
                             unsigned int block, char *why, size_t n) {
    if (block == 0 || block > JF_EMU_MAX_BLOCK || grid == 0) {
        snprintf(why, n, "emulated launch of %u blocks of %u threads: invalid configuration", grid,
                 block);
        return -1;
    }
    if (!jf_emu.stacks) {
        void *s = mmap(NULL, JF_EMU_MAX_BLOCK * JF_EMU_STACK, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (s == MAP_FAILED) {
            snprintf(why, n, "emulator: cannot map the thread stacks");
            return -1;
        }
        jf_emu.stacks = (char *)s;
    }
    jf_emu.body = body;
    jf_emu.args = args;
    jf_emu.nt = block;
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    threadIdx = {0, 0, 0};
    for (unsigned int b = 0; b < grid; b++) {
        blockIdx = {b, 0, 0};
        if (jf_emu_block(why, n) != 0) return -1;
    }
    return 0;
}

/* The stacks go with the module (dlclose runs this): the memory cache unloads idle modules
 * and builds them again when they are fitted again, and every module that had launched kept
 * 256 MiB of address space, one mapping and the stack pages its threads touched after it was
 * unloaded, about 1 MiB of RSS a module in a long run. */
__attribute__((destructor)) static void jf_emu_unmap_stacks(void) {
    if (jf_emu.stacks) munmap(jf_emu.stacks, JF_EMU_MAX_BLOCK * JF_EMU_STACK);
    jf_emu.stacks = NULL;
}

template <class... A, size_t... I>
static void jf_emu_invoke_(void (*f)(A...), void **a, std::index_sequence<I...>) {
    f(*static_cast<typename std::remove_cv<A>::type *>(a[I])...);
}
template <class... A> static void jf_emu_invoke(void (*f)(A...), void **a) {
    jf_emu_invoke_(f, a, std::index_sequence_for<A...>{});
}
template <class... A> static size_t jf_emu_arg_sizes(void (*)(A...), const size_t **sizes) {
    static const size_t s[] = {sizeof(A)..., 0};
    *sizes = s;
    return sizeof...(A);
}

#ifdef JF_EMU_ULPS
/* JITFIT_CUDA_EMULATE_ULPS: double-precision functions that round like another libm. A GPU's
 * libm is not glibc's: CUDA documents up to 1 or 2 ulps for most functions (5 for erfc), so a
 * value that depends sharply on one of them (a comparison of cos(acos(x)) with x, tan near a
 * pole) differs between the backends, and the host's libm alone never shows it. Here each result
 * moves by a whole number of ulps in [-k, k], k the function's documented bound, picked by a hash
 * of the function, its arguments and N: the same call gives the same value wherever it is made
 * (jacobian_row and normal_eq agree with each other, as on a GPU). Integers, zero and non-finite
 * results stay as they are, as a real libm's exact cases do; fp32 calls are left alone. */
static double jf_emu_moved(double v, int k, uint64_t h) {
    if (!isfinite(v) || v == floor(v)) return v;
    h *= 0xD6E8FEB86659FD93ull;
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ull;
    h ^= h >> 29;
    for (int m = (int)(h % (uint64_t)(2 * k + 1)) - k; m != 0; m += m > 0 ? -1 : 1)
        v = nextafter(v, m > 0 ? INFINITY : -INFINITY);
    return v;
}
template <class... A> static float jf_emu_round(float v, int, int, A...) { return v; }
template <class... A> static double jf_emu_round(double v, int k, int id, A... a) {
    const double args[] = {(double)a...};
    uint64_t h = (uint64_t)id << 56 ^ JF_EMU_ULPS, u;
    for (double x : args) {
        memcpy(&u, &x, sizeof u);
        h = (h ^ u) * 0x9E3779B97F4A7C15ull;
    }
    return jf_emu_moved(v, k, h);
}
#define JF_EMU_ULP_FN(name, k, id)                                                              \
    template <class... A> static auto jf_emu_##name(A... a)->decltype(name(a...)) {             \
        return jf_emu_round(name(a...), k, id, a...);                                           \
    }
JF_EMU_ULP_FN(exp, 1, 1) JF_EMU_ULP_FN(log, 1, 2) JF_EMU_ULP_FN(log10, 1, 3)
JF_EMU_ULP_FN(log1p, 1, 4) JF_EMU_ULP_FN(cbrt, 1, 5) JF_EMU_ULP_FN(sin, 2, 6)
JF_EMU_ULP_FN(cos, 2, 7) JF_EMU_ULP_FN(tan, 2, 8) JF_EMU_ULP_FN(asin, 2, 9)
JF_EMU_ULP_FN(acos, 2, 10) JF_EMU_ULP_FN(atan, 2, 11) JF_EMU_ULP_FN(sinh, 2, 12)
JF_EMU_ULP_FN(cosh, 1, 13) JF_EMU_ULP_FN(tanh, 1, 14) JF_EMU_ULP_FN(erf, 2, 15)
JF_EMU_ULP_FN(erfc, 5, 16) JF_EMU_ULP_FN(pow, 2, 17) JF_EMU_ULP_FN(atan2, 2, 18)
JF_EMU_ULP_FN(hypot, 2, 19)
#define exp(...) jf_emu_exp(__VA_ARGS__)
#define log(...) jf_emu_log(__VA_ARGS__)
#define log10(...) jf_emu_log10(__VA_ARGS__)
#define log1p(...) jf_emu_log1p(__VA_ARGS__)
#define cbrt(...) jf_emu_cbrt(__VA_ARGS__)
#define sin(...) jf_emu_sin(__VA_ARGS__)
#define cos(...) jf_emu_cos(__VA_ARGS__)
#define tan(...) jf_emu_tan(__VA_ARGS__)
#define asin(...) jf_emu_asin(__VA_ARGS__)
#define acos(...) jf_emu_acos(__VA_ARGS__)
#define atan(...) jf_emu_atan(__VA_ARGS__)
#define sinh(...) jf_emu_sinh(__VA_ARGS__)
#define cosh(...) jf_emu_cosh(__VA_ARGS__)
#define tanh(...) jf_emu_tanh(__VA_ARGS__)
#define erf(...) jf_emu_erf(__VA_ARGS__)
#define erfc(...) jf_emu_erfc(__VA_ARGS__)
#define pow(...) jf_emu_pow(__VA_ARGS__)
#define atan2(...) jf_emu_atan2(__VA_ARGS__)
#define hypot(...) jf_emu_hypot(__VA_ARGS__)
#endif

/* ---- the module's source follows ---- */
