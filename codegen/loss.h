/* Robust loss functions, shared by the CPU kernels (interpreter fallback), generated C kernels
 * and generated CUDA kernels.
 *
 * Like prelude.h this text is compiled three ways (included by runtime/kernels.c, pasted after
 * the prelude into generated C and into CUDA source for NVRTC), so all three scale residuals
 * identically. It must stay self-contained, C11 and CUDA C, with internal linkage only.
 *
 * Meaning, as scipy.optimize.least_squares (_lsq/least_squares.py): with z = (r/f_scale)^2,
 *   cost      = 0.5 sum f_scale^2 rho(z)
 *   J_scale   = sqrt(max(rho'(z) + 2 rho''(z) z, EPS))      (scale_for_robust_loss_function)
 *   r_scaled  = r * rho'(z) / J_scale,   J_row_scaled = J_row * J_scale
 * so that J^TJ and J^Tr built from the scaled quantities are scipy's Gauss-Newton model of the
 * robust cost. Loss codes are the values of enum jf_loss in include/jitfit.h (0 linear,
 * 1 soft_l1, 2 huber, 3 cauchy, 4 arctan); runtime/kernels.c checks that they agree.
 * The linear loss never comes here: kernels take a separate branch with no scaling at all.
 */
#ifndef JF_LOSS_H
#define JF_LOSS_H

#ifndef __CUDACC_RTC__
#include <math.h>
#endif

/* Same definition as prelude.h, for units that include this header alone. */
#ifndef JF_HD
#ifdef __CUDACC__
#define JF_HD static __host__ __device__ inline
#else
#define JF_HD static inline
#endif
#endif

/* numpy's float64 eps, the floor scipy puts under J_scale before the square root. */
#define JF_LOSS_EPS 0x1p-52

/* rho(z), rho'(z) and rho''(z) of loss code `loss` (not linear). The powers are written with
 * sqrt where scipy uses t**0.5 and t**-1.5: those agree to within an ulp or two, and sqrt is the
 * same correctly rounded operation on every platform, unlike pow(). */
JF_HD void jf_loss_rho(int loss, double z, double *rho0, double *rho1, double *rho2) {
    if (loss == 1) { /* soft_l1: 2((1+z)^0.5 - 1) */
        double t = 1.0 + z;
        double s = sqrt(t);
        /* as 2z/(s + 1), the same number without the cancellation of s - 1 (scipy's form):
         * that is 0 for z below 1e-16, so a fit whose residuals are all far inside f_scale
         * (data of order 1e-9 with f_scale 1) had cost 0 and "converged" at its start */
        *rho0 = 2.0 * (z / (s + 1.0)); /* not (2z)/(s + 1): 2z overflows for z > 9e307;
                                          * scaling by 2 is exact, so the value is the same */
        *rho1 = 1.0 / s;
        *rho2 = -0.5 / (t * s);
    } else if (loss == 2) { /* huber: z if z <= 1 else 2 z^0.5 - 1 */
        if (z <= 1.0) {
            *rho0 = z;
            *rho1 = 1.0;
            *rho2 = 0.0;
        } else {
            double s = sqrt(z);
            *rho0 = 2.0 * s - 1.0;
            *rho1 = 1.0 / s;
            *rho2 = -0.5 / (z * s);
        }
    } else if (loss == 3) { /* cauchy: ln(1+z) */
        double t = 1.0 + z;
        *rho0 = log1p(z);
        *rho1 = 1.0 / t;
        *rho2 = -1.0 / (t * t);
    } else { /* arctan: arctan(z) */
        double t = 1.0 + z * z;
        *rho0 = atan(z);
        *rho1 = 1.0 / t;
        /* -2/z^3 to rounding once z > 2^1022, where 2z overflows and made this -inf/inf = NaN
         * (J_scale NaN for |r| within [0.95, 1] * 1.34e154 f_scale) */
        *rho2 = z < 0x1p1022 ? -2.0 * z / (t * t) : -0.0;
    }
}

/* The largest finite double (DBL_MAX; float.h is not at hand under NVRTC). */
#define JF_LOSS_HUGE 1.7976931348623157e308

/* jf_loss_scale where r^2/f_scale^2, as it computes it, overflows: an outlier a robust loss is
 * meant to absorb (|r| beyond ~1.3e154 f_scale, or r^2 alone beyond the largest double), whose
 * cost term is finite (~2 f_scale |r| for soft_l1 and huber, 2 f_scale^2 ln(|r|/f_scale) for
 * cauchy, f_scale^2 pi/2 for arctan), as are rho'(z) r and J_scale. With z overflowed the
 * formulas gave inf*0 = NaN, so one such point made the whole start NONFINITE ("the sums of
 * squares overflow ... rescale the data") or rejected every step that reached it; scipy's
 * least_squares fails the same way (its SVD raises on NaN). Here u = |r|/f_scale: up to 2^500
 * z = u^2 is finite and scipy's formulas are used with it (2 rho'' z for 2 rho'' r^2/f_scale^2);
 * beyond, the leading terms in u are the values to rounding, and rho' + 2 rho'' z is below EPS
 * for every loss (1/(t sqrt(t)), 0, (1 - z)/t^2, (1 - 3z^2)/t^2 with t = 1 + z), so J_scale is
 * its floor sqrt(EPS). A residual that is itself inf or NaN stays NaN (a failed step). */
JF_HD double jf_loss_far(int loss, double r, double f_scale2, double *r_scaled,
                         double *j_scale) {
    double a = fabs(r);
    if (!(a <= JF_LOSS_HUGE)) {
        *r_scaled = *j_scale = r - r; /* NaN for r = NaN or ±inf */
        return r - r;
    }
    double fs = sqrt(f_scale2), u = a / fs;
    if (u <= 0x1p500) {
        double rho0, rho1, rho2, z = u * u;
        jf_loss_rho(loss, z, &rho0, &rho1, &rho2);
        double js = rho1 + 2.0 * rho2 * z;
        if (js < JF_LOSS_EPS) js = JF_LOSS_EPS;
        js = sqrt(js);
        *j_scale = js;
        *r_scaled = r * (rho1 / js);
        return f_scale2 * rho0;
    }
    double q = fs / a;      /* 1/u, below 2^-500 */
    double js = 0x1p-26;    /* sqrt(JF_LOSS_EPS), exact */
    double cost, rho1r;     /* the cost term and rho'(z) |r| */
    if (loss == 1 || loss == 2) { /* rho = 2u (-2 or -1), rho' = 1/u */
        cost = 2.0 * fs * a;
        rho1r = fs;
    } else if (loss == 3) { /* rho = ln(1 + u^2), rho' = 1/(1 + u^2) */
        cost = f_scale2 * 2.0 * (log(a) - log(fs));
        rho1r = fs * q;
    } else { /* rho = atan(u^2) -> pi/2, rho' = 1/(1 + u^4) */
        cost = f_scale2 * 1.5707963267948966;
        rho1r = fs * q * q * q;
    }
    *j_scale = js;
    *r_scaled = copysign(rho1r, r) / js;
    return cost;
}

/* Scales one residual for a robust loss. r is the weighted residual w*(f - y). Writes the
 * scaled residual to *r_scaled and the factor for the Jacobian row to *j_scale; returns the
 * point's cost term f_scale^2 rho(z) (the kernels' acc[T+np] sums these). inv_fs2 is
 * 1/f_scale^2, passed in so a kernel computes it once. */
JF_HD double jf_loss_scale(int loss, double r, double f_scale2, double inv_fs2, double *r_scaled,
                           double *j_scale) {
    double rho0, rho1, rho2;
    double z = r * r * inv_fs2;
    if (!(z <= JF_LOSS_HUGE)) return jf_loss_far(loss, r, f_scale2, r_scaled, j_scale);
    jf_loss_rho(loss, z, &rho0, &rho1, &rho2);
    /* scipy: rho[0] *= f_scale^2, rho[2] /= f_scale^2, J_scale = rho[1] + 2 rho[2] r^2 */
    double js = rho1 + 2.0 * (rho2 * inv_fs2) * (r * r);
    if (js < JF_LOSS_EPS) js = JF_LOSS_EPS;
    js = sqrt(js);
    *j_scale = js;
    *r_scaled = r * (rho1 / js);
    return f_scale2 * rho0;
}

#endif
