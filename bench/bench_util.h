/* Helpers shared by the benchmark drivers: option lists, a monotonic clock and a fixed-seed
 * generator (splitmix64 → uniform in (0, 1) → Box-Muller), so the same data come out on every
 * machine; bench/bench_gpu_anchors.py reproduces the generator in numpy. */
#ifndef JF_BENCH_UTIL_H
#define JF_BENCH_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The numbers of a comma-separated option value (1e5,1e6), at most max of them, into out;
 * returns how many. The text is cut up (strtok). */
static inline int parse_list(char *text, double *out, int max) {
    int k = 0;
    for (char *t = strtok(text, ","); t && k < max; t = strtok(NULL, ","))
        out[k++] = strtod(t, NULL);
    return k;
}

static inline double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* The generator's state; set it to start a sequence. */
static uint64_t rng_state = 42;

static inline double uniform(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}

/* A standard normal deviate from two uniforms (one Box-Muller branch). */
static inline double normal(void) {
    double u1 = uniform(), u2 = uniform();
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif
