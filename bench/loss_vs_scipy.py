#!/usr/bin/env python3
"""Randomized comparison of jitfit's robust losses with scipy.optimize.least_squares.

A correctness tool, not a timed benchmark. Draws N problems from five model families
(exponential decay with offset, damped sine, Gaussian peak with offset, logistic, rational),
adds noise and outliers (a fraction of the points with errors 10 to 1000 times the noise, in
one problem of three all of one sign), and fits each with every robust loss (soft_l1, huber,
cauchy, arctan) at an f_scale drawn relative to the noise (1e-3, 0.1, 1, 3 or 1e3 times it:
nearly L1, inside the noise, at it, and nearly linear), in one problem of three with sigma
(the residuals divided by it, as `--sigma`) and in one of four with a box around the truth.
jitfit (`jitfit fit --json --loss L --f-scale S`) and scipy's least_squares(method='trf', the
same loss, f_scale, start, bounds and tolerances, the exact Jacobian by complex steps) run from
the same start, a perturbation of the truth. The robust cost of both answers is recomputed here
at their parameters, 0.5 Σ f_scale² ρ((r_i/f_scale)²), and each problem is classified:

  same     the costs agree to 1e-9 relative
  jitfit   jitfit's cost is lower (scipy stopped higher)
  scipy    scipy's cost is lower
  failed   jitfit reported failure (max_nfev, stalled, ...) or gave no result

Each answer is also checked on its own: its stationarity, with g = Σ ρ'(z_i) r_i J_i (the
robust cost's gradient, J exact) and c_k = g_k / (‖J_k‖ ‖ρ'·r‖), the cosine between a column
and the ρ'-weighted residuals: |c_k| <= 1e-5 for an interior parameter (an ftol stop leaves
~sqrt(ftol)), of the sign that keeps the parameter in the box for one on a bound (within 1e-6
of it counts: scipy's trf stops just inside); a dead column (a peak off the data) is not
checked. Where scipy is lower and jitfit's point is
stationary the case is a different local minimum ('local'); where it is not, a defect
candidate ('nonstat'). jitfit's reported `cost` is compared with the recomputed one (its
bookkeeping), and where both fits reached the same minimum:

  params   max over k of |p_j - p_s| / max(stderr_k, 1e-12 |p_k|), after mapping both onto one
           of the parameter sets that give the same model (a Gaussian's ±s; a damped sine's
           (a, c, d), (-a, c, d + pi), (a, -c, pi - d))
  pcov     jitfit's covariance against curve_fit's: scipy 1.10's curve_fit(method='trf',
           loss=...) calls least_squares with these arguments and takes pcov = s² (J̃ᵀJ̃)⁺
           from the result's loss-scaled Jacobian J̃ (`res.jac`) with s² = 2·res.cost/dof, the
           robust cost; it is computed here from the least_squares result by that rule, and
           checked once against curve_fit itself (--check-curve-fit). Entries relative to
           √(C_kk C_ll).
  ref      jitfit's covariance against the same rule evaluated here at jitfit's own
           parameters (J̃ from scipy's scale_for_robust_loss_function formulas, columns scaled
           to unit norm before the SVD as jitfit's rank rule does): its bookkeeping, free of
           where the two solvers stopped. jitfit inverts J̃ᵀJ̃ for a robust loss, which loses
           κ²ε (κ the condition of the column-scaled J̃), so the tolerance is
           max(1e-6, 100 κ² ε); the worst differences are listed by κ.

Fits whose message says the data do not determine some parameters are left out of the
covariance comparisons.

Usage: /usr/bin/python3 bench/loss_vs_scipy.py [-n 100] [--seed 1] [--tol 1e-12] BINARY
Needs numpy and scipy. Exit status 1 when jitfit's own checks (cost bookkeeping, covariance
against the reference at its parameters) failed; the classification is reported, not judged.
"""
import argparse
import collections
import json
import os
import shutil
import subprocess
import tempfile
import warnings

import numpy as np
from scipy.optimize import curve_fit, least_squares

from random_vs_scipy import bound_arg  # --bounds text, as random_vs_scipy writes it

LOSSES = ("soft_l1", "huber", "cauchy", "arctan")
FSCALES = (1e-3, 0.1, 1.0, 3.0, 1e3)   # times the noise (of the weighted residuals)
SAME = 1e-9                            # relative cost difference of one minimum
STAT_TOL = 1e-5                        # stationarity cosine (an ftol stop leaves ~sqrt(ftol))
COV_TOL = 1e-6


def _exp3(x, a, b, c):
    return a * np.exp(-b * x) + c


def _dsine(x, a, b, c, d, e):
    return a * np.exp(-b * x) * np.sin(c * x + d) + e


def _gauss(x, a, m, s, c):
    return a * np.exp(-(x - m)**2 / (2 * s**2)) + c


def _logistic(x, a, b, c):
    return a / (1 + np.exp(-b * (x - c)))


def _rational(x, a, b, c):
    return (a + b * x) / (1 + c * x)


FAMILIES = {
    "exp3": ("a*exp(-b*x)+c", _exp3, ["a", "b", "c"]),
    "dsine": ("a*exp(-b*x)*sin(c*x+d)+e", _dsine, ["a", "b", "c", "d", "e"]),
    "gauss": ("a*exp(-(x-m)^2/(2*s^2))+c", _gauss, ["a", "m", "s", "c"]),
    "logistic": ("a/(1+exp(-b*(x-c)))", _logistic, ["a", "b", "c"]),
    "rational": ("(a+b*x)/(1+c*x)", _rational, ["a", "b", "c"]),
}


def canon(kind, p):
    """One representative of the parameter sets that give the same model, and the signs that
    map the covariance: a Gaussian's width enters squared (s ~ -s); a damped sine's
    a sin(cx + d) is -a sin(cx + d + pi) and a sin(-cx + pi - d)."""
    p = np.array(p, dtype=float)
    sg = np.ones(len(p))
    if kind == "gauss" and p[2] < 0:
        p[2], sg[2] = -p[2], -1.0
    if kind == "dsine":
        if p[2] < 0:
            p[2], p[3] = -p[2], np.pi - p[3]
            sg[2], sg[3] = -sg[2], -sg[3]
        if p[0] < 0:
            p[0], p[3] = -p[0], p[3] + np.pi
            sg[0] = -sg[0]
        p[3] = np.mod(p[3], 2 * np.pi)
    return p, sg


def draw(rng, kind):
    """x, y, sigma (or None), the truth, the start, the noise of the weighted residuals, and
    a description of the outliers."""
    n = int(rng.choice([20, 40, 100, 300]))
    u = rng.uniform
    x = np.sort(u(0, 10, n))
    if kind == "exp3":
        t = [u(1, 5), u(0.1, 1.5), u(-1, 1)]
    elif kind == "dsine":
        t = [u(1, 4), u(0.05, 0.3), u(1, 3), u(0, 2), u(-0.5, 0.5)]
    elif kind == "gauss":
        t = [u(1, 5), u(3, 7), u(0.5, 2), u(-0.5, 0.5)]
    elif kind == "logistic":
        t = [u(1, 5), u(0.5, 3), u(3, 7)]
    else:
        t = [u(0.5, 2), u(0.5, 3), u(0.1, 1)]
    f = FAMILIES[kind][1]
    yt = f(x, *t)
    noise = 0.02 * (np.ptp(yt) + 0.1)
    sigma = None
    if rng.random() < 1 / 3:
        sigma = noise * np.exp(rng.normal(0, 0.4, n))
        e = sigma * rng.standard_normal(n)
    else:
        e = noise * rng.standard_normal(n)
    frac = float(rng.choice([0.05, 0.15, 0.3]))
    k = max(1, int(round(frac * n)))
    idx = rng.choice(n, k, replace=False)
    size = noise * 10**rng.uniform(1, 3, k)
    onesided = rng.random() < 1 / 3
    sign = np.ones(k) if onesided else rng.choice([-1.0, 1.0], k)
    e[idx] += sign * size
    y = yt + e
    spread = float(rng.choice([0.1, 0.3]))
    p0 = list(np.array(t) * np.exp(rng.normal(0, spread, len(t))))
    # the weighted residuals' noise: 1 with sigma (e/sigma ~ N(0, 1)), else the noise itself
    scale = 1.0 if sigma is not None else noise
    desc = f"n={n} outliers={k}{' one-sided' if onesided else ''}"
    return x, y, sigma, t, p0, scale, desc


def box(rng, t, p0):
    """A box around the truth containing the start: wide on some sides, tight (may bind) on
    others."""
    lo, hi = [], []
    for tk, pk in zip(t, p0):
        sc = max(abs(tk), 0.1)
        a = min(tk, pk) - rng.uniform(0.05, 2) * sc
        b = max(tk, pk) + rng.uniform(0.05, 2) * sc
        r = rng.random()
        if r < 0.2:
            a = -np.inf
        elif r < 0.4:
            b = np.inf
        elif r < 0.55:    # a bound between the truth and the start's other side: may bind
            if pk > tk:
                a = pk - rng.uniform(0, 0.3) * abs(pk - tk)
            else:
                b = pk + rng.uniform(0, 0.3) * abs(pk - tk)
        lo.append(float(a))
        hi.append(float(b))
    return np.array(lo), np.array(hi)


def rho(loss, z):
    """rho(z), rho'(z), rho''(z) as scipy's least_squares defines them (soft_l1's rho in the
    form without cancellation, the same number)."""
    with np.errstate(all="ignore"):
        if loss == "soft_l1":
            t = 1 + z
            s = np.sqrt(t)
            return 2 * z / (s + 1), 1 / s, -0.5 / (t * s)
        if loss == "huber":
            s = np.sqrt(z)
            inl = z <= 1
            return (np.where(inl, z, 2 * s - 1), np.where(inl, 1.0, 1 / s),
                    np.where(inl, 0.0, -0.5 / (z * s)))
        if loss == "cauchy":
            t = 1 + z
            return np.log1p(z), 1 / t, -1 / t**2
        t = 1 + z * z
        return np.arctan(z), 1 / t, -2 * z / t**2


def jac_cs(f, x, p):
    """The model's Jacobian by complex steps (exact to rounding)."""
    p = np.asarray(p, dtype=float)
    J = np.empty((len(x), len(p)))
    with np.errstate(all="ignore"):
        for k in range(len(p)):
            pc = p.astype(complex)
            pc[k] += 1e-30j
            J[:, k] = np.imag(f(x, *pc)) / 1e-30
    return J


def robust(f, x, y, w, p, loss, fs):
    """Cost, gradient cosines (see the docstring) and the loss-scaled Jacobian J̃ at p."""
    p = np.asarray(p, dtype=float)
    with np.errstate(all="ignore"):
        r = (f(x, *p) - y) * w
        J = jac_cs(f, x, p) * w[:, None]
        z = (r / fs)**2
        r0, r1, r2 = rho(loss, z)
        cost = 0.5 * fs * fs * float(np.sum(r0))
        g = J.T @ (r1 * r)
        cn = np.linalg.norm(J, axis=0)
        den = cn * np.linalg.norm(r1 * r)
        # a dead column (a peak far off the data: ‖J_k‖ max(|p_k|, 1) below 1e-6 ‖r‖) is not
        # checked, as in random_vs_scipy.py: the cosine is scale-free and says nothing there
        live = (den > 0) & (cn * np.maximum(np.abs(p), 1) >= 1e-6 * np.linalg.norm(r))
        c = np.where(live, g / np.where(live, den, 1), 0.0)
        js = np.sqrt(np.maximum(r1 + 2 * r2 * z, np.finfo(float).eps))
    return cost, c, J * js[:, None]


def stationary(c, p, lo, hi):
    """Parameters whose first-order condition fails (cosine beyond STAT_TOL, of the sign that
    would lower the cost inside the box). A bound within 1e-6 (relative) counts as reached:
    scipy's trf stops just inside one, jitfit on it."""
    bad = []
    for k, ck in enumerate(c):
        if not np.isfinite(ck):
            bad.append(k)
            continue
        on_lo = np.isfinite(lo[k]) and p[k] - lo[k] <= 1e-6 * max(1, abs(lo[k]))
        on_hi = np.isfinite(hi[k]) and hi[k] - p[k] <= 1e-6 * max(1, abs(hi[k]))
        if (on_lo and ck < -STAT_TOL) or (on_hi and ck > STAT_TOL) or \
                (not on_lo and not on_hi and abs(ck) > STAT_TOL):
            bad.append(k)
    return bad


def pinv_cov(Jt, cost, dof, scaled=False):
    """curve_fit's rule: s² (J̃ᵀJ̃)⁺ by the SVD of J̃ with its threshold, s² = 2 cost/dof; with
    scaled, of J̃ with its columns scaled to unit norm first, as jitfit documents (its rank rule
    then does not drop a column only because it is small). Also returns the condition number of
    the column-scaled J̃."""
    D = np.linalg.norm(Jt, axis=0) if scaled else np.ones(Jt.shape[1])
    D[D == 0] = 1.0
    _, s, VT = np.linalg.svd(Jt / D, full_matrices=False)
    keep = s > np.finfo(float).eps * max(Jt.shape) * s[0]
    C = ((VT[keep].T / s[keep]**2) @ VT[keep]) / np.outer(D, D)
    Dn = np.linalg.norm(Jt, axis=0)
    sv = np.linalg.svd(Jt / np.where(Dn > 0, Dn, 1), compute_uv=False)
    return C * (2 * cost / dof), sv[0] / sv[-1] if sv[-1] > 0 else np.inf


def cov_diff(Cj, Cr):
    d = np.sqrt(np.abs(np.diag(Cr)))
    scale = np.outer(d, d)
    with np.errstate(all="ignore"):
        e = np.abs(Cj - Cr) / np.where(scale > 0, scale, 1)
    return float(np.max(e))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary")
    ap.add_argument("-n", type=int, default=100, help="problems (each fitted with every loss)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tol", type=float, default=1e-12, help="ftol = xtol = gtol for both")
    ap.add_argument("--show", type=int, default=15, help="cases listed per class")
    ap.add_argument("--dump", metavar="DIR", help="write each case not 'same' as DIR/case-I-LOSS.csv "
                    "with its jitfit command line")
    ap.add_argument("--check-curve-fit", type=int, default=5, metavar="K",
                    help="also call curve_fit itself on the first K agreeing fits and check that "
                    "its pcov is the one computed here from least_squares (default 5)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(args.seed)
    count = collections.Counter()
    by = collections.defaultdict(collections.Counter)
    cases = collections.defaultdict(list)
    worst = collections.defaultdict(float)
    own_bad = []
    cf_checked = 0
    tol = args.tol
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "d.csv")
        for i in range(args.n):
            kind = list(FAMILIES)[i % len(FAMILIES)]
            text, f, names = FAMILIES[kind]
            x, y, sigma, t, p0, scale, desc = draw(rng, kind)
            np_ = len(names)
            bounded = rng.random() < 0.25
            lo, hi = box(rng, t, p0) if bounded else (np.full(np_, -np.inf), np.full(np_, np.inf))
            w = 1 / sigma if sigma is not None else np.ones_like(x)
            cols = [x, y] + ([sigma] if sigma is not None else [])
            np.savetxt(data, np.column_stack(cols), delimiter=",", comments="",
                       header="x,y" + (",s" if sigma is not None else ""), fmt="%.17g")
            start = ",".join(f"{n}={float(v)!r}" for n, v in zip(names, p0))
            for loss in LOSSES:
                fs = float(rng.choice(FSCALES)) * scale
                fsname = f"{fs / scale:g}x"
                # scipy
                try:
                    res = least_squares(lambda p: (f(x, *p) - y) * w, p0,
                                        jac=lambda p: jac_cs(f, x, p) * w[:, None],
                                        bounds=(lo, hi), method="trf", loss=loss, f_scale=fs,
                                        ftol=tol, xtol=tol, gtol=tol, max_nfev=20000)
                    ps = res.x
                    s_ok = bool(res.success)
                except Exception as ex:  # noqa: BLE001 (report and go on)
                    res, ps, s_ok = None, None, False
                    print(f"case {i} {loss}: scipy raised {ex}")
                # jitfit
                cmd = [args.binary, "fit", text, data, "--json", "--p0", start, "--loss", loss,
                       "--f-scale", repr(fs), "--ftol", repr(tol), "--xtol", repr(tol),
                       "--gtol", repr(tol), "--max-nfev", "20000"]
                if sigma is not None:
                    cmd += ["--sigma", "s"]
                barg = bound_arg(names, lo, hi)
                if barg:
                    cmd += ["--bounds", barg]
                out = subprocess.run(cmd, capture_output=True, text=True)
                try:
                    d = json.loads(out.stdout)
                    pj = np.array([q["value"] for q in d["params"]], dtype=float)
                except (ValueError, KeyError, TypeError):
                    d, pj = None, None
                tag = (i, kind, loss, fsname, desc, "sigma" if sigma is not None else "",
                       "bounds" if bounded else "")
                if d is None:
                    verdict, info = "failed", [f"no result: {out.stderr.strip()[:200]}"]
                else:
                    cj, c_j, Jt = robust(f, x, y, w, pj, loss, fs)
                    bad_j = stationary(c_j, pj, lo, hi)
                    info = [d["status_name"]]
                    # jitfit's own bookkeeping: its cost at its point
                    e = abs(d["cost"] - cj) / max(abs(cj), 1e-300)
                    worst["cost field"] = max(worst["cost field"], e)
                    if e > 1e-10:
                        own_bad.append((*tag, f"reported cost {d['cost']!r} recomputed {cj!r}"))
                    dof = len(x) - np_
                    Cj = np.array([[np.nan if v is None else v for v in row]
                                   for row in d["covariance"]], dtype=float)
                    if np.all(np.isfinite(Cj)):
                        Cr, kappa = pinv_cov(Jt, cj, dof, scaled=True)
                        ecr = cov_diff(Cj, Cr)
                        # jitfit inverts J̃ᵀJ̃ for a robust loss (the iterations never hold J̃):
                        # that loses kappa²·ε, kappa the condition of the column-scaled J̃
                        allowed = max(COV_TOL, 100 * kappa**2 * np.finfo(float).eps)
                        key = "well" if kappa <= 1e4 else "ill"
                        worst[f"pcov vs rule at jitfit's point, cond <= 1e4"
                              if key == "well" else "pcov vs rule, cond > 1e4 (/ cond² eps)"] = max(
                            worst[f"pcov vs rule at jitfit's point, cond <= 1e4" if key == "well"
                                  else "pcov vs rule, cond > 1e4 (/ cond² eps)"],
                            ecr if key == "well" else ecr / (kappa**2 * np.finfo(float).eps))
                        if ecr > allowed:
                            own_bad.append((*tag, f"covariance off the rule at its point by "
                                            f"{ecr:.3g} (column-scaled cond {kappa:.3g})"))
                    if ps is not None:
                        cs, c_s, _ = robust(f, x, y, w, ps, loss, fs)
                        bad_s = stationary(c_s, ps, lo, hi)
                    else:
                        cs, bad_s = np.inf, []
                    info.append(f"cost/scipy {cj / cs if cs > 0 else np.inf:.10g}")
                    if bad_j:
                        info.append("jitfit nonstat " + ",".join(
                            f"{names[k]}:{c_j[k]:.2g}" for k in bad_j))
                    if bad_s:
                        info.append("scipy nonstat " + ",".join(
                            f"{names[k]}:{c_s[k]:.2g}" for k in bad_s))
                    if not d.get("success"):
                        verdict = "failed"
                    elif abs(cj - cs) <= SAME * max(cj, cs) + 1e-300:
                        verdict = "same"
                    elif cj < cs:
                        verdict = "jitfit"
                    else:
                        verdict = "scipy"
                        info.append("nonstat" if bad_j else "local")
                    if bad_j and d.get("success"):
                        count["jitfit claimed success, not stationary"] += 1
                    if bad_s and s_ok:
                        count["scipy claimed success, not stationary"] += 1
                    # a fit whose message says the data do not determine some parameters
                    # (a peak or step off the data) has a covariance of no use to compare
                    undetermined = ("do not determine" in d.get("message", "") or
                                    "hardly depends" in d.get("message", ""))
                    if verdict == "same" and res is not None and s_ok and not undetermined:
                        # the same model from other parameters (canon): compare representatives
                        qj, sj = canon(kind, pj)
                        qs, ss = canon(kind, ps)
                        sgn = sj * ss
                        se = np.sqrt(np.abs(np.diag(Cj)))
                        dq = np.abs(qj - qs)
                        if kind == "dsine":  # the phase modulo 2 pi
                            dq[3] = min(dq[3], 2 * np.pi - dq[3])
                        dp = np.max(dq / np.maximum(se, 1e-12 * np.abs(pj)))
                        worst["params (in stderr)"] = max(worst["params (in stderr)"], dp)
                        if dp > 1e-3:
                            info.append(f"params differ by {dp:.3g} stderr")
                        Cs, kappa = pinv_cov(res.jac, res.cost, dof)
                        Cs = Cs * np.outer(sgn, sgn)
                        if np.all(np.isfinite(Cj)):
                            ecs = cov_diff(Cj, Cs)
                            key = ("pcov vs curve_fit, cond <= 1e4" if kappa <= 1e4 else
                                   "pcov vs curve_fit, 1e4 < cond <= 1e6" if kappa <= 1e6 else
                                   "pcov vs curve_fit, cond > 1e6")
                            worst[key] = max(worst[key], ecs)
                            count[key] += 1
                            if ecs > 1e-4:
                                info.append(f"pcov vs curve_fit {ecs:.3g} (cond {kappa:.3g})")
                        if cf_checked < args.check_curve_fit:
                            pc, cov = curve_fit(f, x, y, p0=p0, sigma=sigma, bounds=(lo, hi),
                                                method="trf", loss=loss, f_scale=fs,
                                                jac=lambda xx, *p: jac_cs(f, xx, p), ftol=tol,
                                                xtol=tol, gtol=tol, max_nfev=20000)
                            e2 = cov_diff(cov * np.outer(sgn, sgn), Cs)
                            if not np.all(np.isfinite(cov)):
                                e2 = 0.0 if not np.all(np.isfinite(Cs)) else np.inf
                            if not np.allclose(pc, ps, rtol=0, atol=0) or e2 > 1e-12:
                                own_bad.append((*tag, f"curve_fit's own pcov differs from the "
                                                f"rule here by {e2:.3g}: fix this script"))
                            cf_checked += 1
                count[verdict] += 1
                by[loss][verdict] += 1
                by[fsname][verdict] += 1
                if verdict != "same" or len(info) > 2:
                    cases[verdict].append((*tag, *info))
                    if args.dump:
                        os.makedirs(args.dump, exist_ok=True)
                        keep = os.path.join(args.dump, f"case-{i}-{loss}.csv")
                        shutil.copyfile(data, keep)
                        with open(keep[:-4] + ".sh", "w") as sh:
                            sh.write(f"# {tag} {info}\n# scipy x {list(ps) if ps is not None else None}\n"
                                     + " ".join(f"'{a}'" for a in [os.path.abspath(cmd[0])] + cmd[1:]).replace(
                                         f"'{data}'", keep) + "\n")
    total = sum(count[v] for v in ("same", "jitfit", "scipy", "failed"))
    print(f"seed {args.seed}, {args.n} problems x {len(LOSSES)} losses = {total} fits, tol {tol:g}")
    print("  " + ", ".join(f"{v} {count[v]}" for v in ("same", "jitfit", "scipy", "failed")))
    for k in ("jitfit claimed success, not stationary", "scipy claimed success, not stationary"):
        print(f"  {k}: {count[k]}")
    for key in list(LOSSES) + [f"{s:g}x" for s in FSCALES]:
        c = by[key]
        print(f"  {key:8s} " + ", ".join(f"{v} {c[v]}" for v in ("same", "jitfit", "scipy", "failed")))
    print("fits at the same minimum whose pcov was compared: " + ", ".join(
        f"{k.split(', ', 1)[1]}: {count[k]}" for k in sorted(count) if k.startswith("pcov")))
    print("worst differences: " + ", ".join(f"{k} {v:.3g}" for k, v in worst.items()))
    for v in ("failed", "scipy", "jitfit", "same"):
        for z in cases[v][:args.show]:
            print(f"  [{v}]", *z)
    if own_bad:
        print(f"{len(own_bad)} of jitfit's own checks failed:")
        for z in own_bad[:args.show]:
            print("  ", *z)
    return 1 if own_bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
