/* The arithmetic shared by the reference interpreter and all generated code.
 *
 * This text is compiled three ways: included by codegen/interp.c (host C), pasted at the top of
 * generated C kernels (system cc), and pasted at the top of generated CUDA kernels (NVRTC, which
 * has the math functions built in and no headers). Every operation whose meaning is ours rather
 * than libm's lives here once, so the interpreter, the constant folder, the C kernels and the
 * CUDA kernels cannot drift apart. It must stay self-contained: no project includes, no
 * non-static symbols (it may be included into several translation units), C11 and CUDA C only.
 *
 * Operation → code, for emitters (the interpreter does exactly this):
 *   unary builtins      libm: exp log log10 sqrt cbrt fabs sin cos tan asin acos atan sinh cosh
 *                       tanh erf erfc; NEG is -a; SIGN is jf_sign
 *   + - * /             the C operators
 *   POW                 constant exponent: jf_pow_const(a, c) (or directly jf_powi(a, n) when c
 *                       is an integer n with |n| <= JF_POWI_MAX); any other exponent: pow(a, b)
 *   atan2 hypot         libm
 *   min max             jf_min jf_max
 *   < <= > >= == !=     jf_lt jf_le jf_gt jf_ge jf_eq jf_ne
 *   select (DSL `if`)   jf_select
 */
#ifndef JF_PRELUDE_H
#define JF_PRELUDE_H

#ifndef __CUDACC_RTC__
#include <math.h>
#endif

/* Host and device functions with internal linkage: under CUDA the same body serves host code
 * and kernels; `static` keeps every helper private to the unit that pastes this text. */
#ifndef JF_HD
#ifdef __CUDACC__
#define JF_HD static __host__ __device__ inline
#else
#define JF_HD static inline
#endif
#endif

/* Largest |n| that a constant integer exponent may have to be evaluated by jf_powi. */
#define JF_POWI_MAX 64

/* x^m by binary exponentiation (the multiplications jf_powi's results are made of). */
JF_HD double jf_powu(double x, unsigned int m) {
    double r = 1.0;
    while (m != 0u) {
        if (m & 1u)
            r *= x;
        m >>= 1;
        if (m != 0u)
            x *= x;
    }
    return r;
}

/* x^n by binary exponentiation. Exists because pow() rounds differently in glibc and in CUDA's
 * libdevice, while a fixed sequence of IEEE multiplications is bit-identical everywhere, and
 * because x^2, x^3 dominate model formulas and are far cheaper as products. A negative n is
 * 1/x^|n| (so 0^-n is inf with the sign rules of division), or (1/x)^|n| where x^|n| overflows
 * but x is finite (1e155^-2 is 1e-310, not 0); x^0 is 1 even for NaN, as pow(). */
JF_HD double jf_powi(double x, int n) {
    /* unsigned so that n == INT_MIN negates without overflow */
    unsigned int m = n < 0 ? 0u - (unsigned int)n : (unsigned int)n;
    double r = jf_powu(x, m);
    if (n >= 0)
        return r;
    if (r - r != 0.0 && x - x == 0.0) /* r = ±inf from a finite x: it overflowed */
        return jf_powu(1.0 / x, m);
    return 1.0 / r;
}

/* a^c for an exponent c that is a constant of the expression. The rule of the whole project:
 * an integer c with |c| <= JF_POWI_MAX evaluates as jf_powi, anything else as pow(). It exists so
 * the interpreter, the constant folder and the emitters apply that rule in one place; with a
 * literal c the compiler folds the test away. */
JF_HD double jf_pow_const(double a, double c) {
    if (c >= -JF_POWI_MAX && c <= JF_POWI_MAX && c == (double)(int)c)
        return jf_powi(a, (int)c);
    return pow(a, c);
}

/* -1, 0 or +1; a zero keeps its sign and NaN stays NaN. libm has no sign function; it appears in
 * derivatives of abs, where sign(0) = 0 makes the derivative at the kink 0. */
JF_HD double jf_sign(double x) { return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : x); }

/* Truth of a condition value: nonzero and not NaN. NaN counts as false so that a NaN condition
 * (only possible from a NaN parameter or variable: comparisons give 1 or 0) picks the else
 * branch, as the NaN-is-unordered rule of comparisons would. */
JF_HD int jf_truth(double c) { return c > 0.0 || c < 0.0; }

/* The DSL's `if(c, a, b)`: both branches are already evaluated (straight-line code), this only
 * chooses, so it compiles to a branch-free select on CPUs and GPUs. */
JF_HD double jf_select(double c, double a, double b) { return jf_truth(c) ? a : b; }

/* Comparisons give 1.0 or 0.0 so that they can be used as numbers (e.g. as step functions).
 * IEEE rules: every comparison with NaN is false except != . */
JF_HD double jf_lt(double a, double b) { return a < b ? 1.0 : 0.0; }
JF_HD double jf_le(double a, double b) { return a <= b ? 1.0 : 0.0; }
JF_HD double jf_gt(double a, double b) { return a > b ? 1.0 : 0.0; }
JF_HD double jf_ge(double a, double b) { return a >= b ? 1.0 : 0.0; }
JF_HD double jf_eq(double a, double b) { return a == b ? 1.0 : 0.0; }
JF_HD double jf_ne(double a, double b) { return a != b ? 1.0 : 0.0; }

/* min and max ignore a NaN operand (the other one is returned, as C's fmin/fmax), which keeps a
 * fit alive when one branch of a piecewise model is undefined, and order -0 below +0. C leaves
 * fmin(-0, +0) unspecified, and compilers (GCC's minsd at -O2 next to comparisons) and GPUs
 * resolve it differently, so the backends disagreed on such ties: written out, every backend
 * gives the same bits. */
JF_HD double jf_min(double a, double b) {
    if (a < b) return a;
    if (b < a) return b;
    if (a != a) return b; /* NaN when b is NaN too */
    if (b != b) return a;
    return signbit(a) ? a : b; /* equal: -0 when either is */
}
JF_HD double jf_max(double a, double b) {
    if (a > b) return a;
    if (b > a) return b;
    if (a != a) return b;
    if (b != b) return a;
    return signbit(a) ? b : a; /* equal: +0 when either is */
}

#ifdef __CUDACC__
/* fp32 twins of the helpers above for the CUDA single-precision kernels (jf_emit_options
 * .cuda_single): C++ overloads, so that the same generated calls pick them when every operand
 * is a float. Same rules, float arithmetic. */
JF_HD float jf_powu(float x, unsigned int m) {
    float r = 1.0f;
    while (m != 0u) {
        if (m & 1u)
            r *= x;
        m >>= 1;
        if (m != 0u)
            x *= x;
    }
    return r;
}
JF_HD float jf_powi(float x, int n) {
    unsigned int m = n < 0 ? 0u - (unsigned int)n : (unsigned int)n;
    float r = jf_powu(x, m);
    if (n >= 0)
        return r;
    if (r - r != 0.0f && x - x == 0.0f)
        return jf_powu(1.0f / x, m);
    return 1.0f / r;
}
JF_HD float jf_sign(float x) { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x); }
JF_HD float jf_select(float c, float a, float b) { return (c > 0.0f || c < 0.0f) ? a : b; }
JF_HD float jf_lt(float a, float b) { return a < b ? 1.0f : 0.0f; }
JF_HD float jf_le(float a, float b) { return a <= b ? 1.0f : 0.0f; }
JF_HD float jf_gt(float a, float b) { return a > b ? 1.0f : 0.0f; }
JF_HD float jf_ge(float a, float b) { return a >= b ? 1.0f : 0.0f; }
JF_HD float jf_eq(float a, float b) { return a == b ? 1.0f : 0.0f; }
JF_HD float jf_ne(float a, float b) { return a != b ? 1.0f : 0.0f; }
JF_HD float jf_min(float a, float b) {
    if (a < b) return a;
    if (b < a) return b;
    if (a != a) return b;
    if (b != b) return a;
    return signbit(a) ? a : b;
}
JF_HD float jf_max(float a, float b) {
    if (a > b) return a;
    if (b > a) return b;
    if (a != a) return b;
    if (b != b) return a;
    return signbit(a) ? b : a;
}
#endif

#endif
