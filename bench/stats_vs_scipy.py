#!/usr/bin/env python3
"""Randomized check of jitfit's result statistics against numpy and scipy's curve_fit.

A correctness tool, not a timed benchmark. Draws N problems from model families that are
linear in their parameters (polynomials, two nearly collinear columns: the covariance is
(JᵀWJ)⁻¹·s² exactly) and nonlinear ones (exponential plus offset, Gaussian peak, damped sine,
and an exponential with two offsets that the data cannot tell apart), each with a random mix of
sigma (relative or --absolute-sigma), a parameter held by --fix, rows of NaN with
--nan-policy omit, and bounds around the solution. Each problem is fitted with
`jitfit fit --json --output FILE` from a start near the truth, then checked:

  ref    at jitfit's own parameters, numpy recomputes every statistic from the analytic
         Jacobian (weighted by 1/sigma, the held parameters' columns left out, the rows with
         NaN dropped): SSR, chi2, reduced chi2, R², dof, the covariance s²·(JᵀWJ)⁺ (scipy's
         SVD pseudo-inverse and threshold, of J with its columns scaled to unit norm as jitfit
         scales them; s² = SSR/dof, or 1 with absolute sigma), standard
         errors, correlations, and each output row's fit_stderr √(gᵀCg). Relative 1e-6
         (covariance entries relative to √(C_kk C_ll), correlations absolute).
  scipy  curve_fit (trf, same start, same bounds, the reduced model for held parameters)
         where its parameters agree with jitfit's to 1e-8 (relative to max(|p|, stderr)):
         its pcov against jitfit's covariance, same tolerance.

Conventions where jitfit differs on purpose (docs/SOLVER.md, "Results and covariance") are
checked as such, not counted as mismatches: a parameter the data do not determine has an
infinite standard error (JSON null) and covariance row, where curve_fit's pseudo-inverse gives
finite numbers; the held parameters' entries are 0 (their correlation 1 on the diagonal).

Usage: /usr/bin/python3 bench/stats_vs_scipy.py [-n 200] [--seed 1] [--scale S] BINARY
Exit status 1 when a check failed.
"""
import argparse
import collections
import json
import os
import subprocess
import tempfile
import warnings

import numpy as np
from scipy.optimize import curve_fit

TOL = 1e-6
PTOL = 1e-8


def poly(deg):
    names = "abcd"[:deg + 1]
    text = " + ".join(n if k == 0 else f"{n}*x" if k == 1 else f"{n}*x^{k}"
                      for k, n in enumerate(names))

    def f(x, *p):
        return sum(c * x**k for k, c in enumerate(p))

    def jac(x, *p):
        return np.stack([x**k for k in range(deg + 1)], axis=1)
    return text, f, jac, list(names)


def exp3():
    def f(x, a, b, c):
        return a * np.exp(-b * x) + c

    def jac(x, a, b, c):
        e = np.exp(-b * x)
        return np.stack([e, -a * x * e, np.ones_like(x)], axis=1)
    return "a*exp(-b*x)+c", f, jac, ["a", "b", "c"]


def gauss():
    def f(x, a, m, s, c):
        return a * np.exp(-(x - m)**2 / (2 * s**2)) + c

    def jac(x, a, m, s, c):
        e = np.exp(-(x - m)**2 / (2 * s**2))
        return np.stack([e, a * e * (x - m) / s**2, a * e * (x - m)**2 / s**3,
                         np.ones_like(x)], axis=1)
    return "a*exp(-(x-m)^2/(2*s^2))+c", f, jac, ["a", "m", "s", "c"]


def dsine():
    def f(x, a, b, c, d, e):
        return a * np.exp(-b * x) * np.sin(c * x + d) + e

    def jac(x, a, b, c, d, e):
        ex, sn, cs = np.exp(-b * x), np.sin(c * x + d), np.cos(c * x + d)
        return np.stack([ex * sn, -a * x * ex * sn, a * ex * cs * x, a * ex * cs,
                         np.ones_like(x)], axis=1)
    return "a*exp(-b*x)*sin(c*x+d)+e", f, jac, ["a", "b", "c", "d", "e"]


def collinear(eps):
    """Two columns x and x + eps·x²: nearly collinear, linear in a and b."""
    def f(x, a, b):
        return a * x + b * (x + eps * x * x)

    def jac(x, a, b):
        return np.stack([x, x + eps * x * x], axis=1)
    return f"a*x + b*(x + {eps!r}*x^2)", f, jac, ["a", "b"]


def twin():
    """c and d enter only as c + d: the data do not determine either."""
    def f(x, a, b, c, d):
        return a * np.exp(-b * x) + c + d

    def jac(x, a, b, c, d):
        e = np.exp(-b * x)
        one = np.ones_like(x)
        return np.stack([e, -a * x * e, one, one], axis=1)
    return "a*exp(-b*x)+c+d", f, jac, ["a", "b", "c", "d"]


FAMILIES = ["poly1", "poly2", "poly3", "exp3", "gauss", "dsine", "collinear", "twin"]
# the parameters that scale with y (the others are rates, centres, widths, phases)
AMPLITUDES = {"exp3": "ac", "gauss": "ac", "dsine": "ae", "twin": "acd"}


def draw(rng, kind):
    """(model, x, y, truth); x on [0, X] or so, noise 5 % of the spread."""
    u = rng.uniform
    n = int(rng.choice([6, 12, 40, 150]))
    X = float(rng.choice([1, 5, 20]))
    x = np.sort(u(0, X, n))
    if kind.startswith("poly"):
        deg = int(kind[4:])
        model = poly(deg)
        t = list(u(-3, 3, deg + 1) / np.maximum(1, X)**np.arange(deg + 1))
    elif kind == "exp3":
        model, t = exp3(), [u(0.5, 5), u(0.5, 5) / X, u(-2, 2)]
    elif kind == "gauss":
        n = max(n, 12)
        x = np.sort(u(0, X, n))
        model, t = gauss(), [u(0.5, 5), u(0.3 * X, 0.7 * X), u(0.1 * X, 0.3 * X), u(-1, 1)]
    elif kind == "dsine":
        n = max(n, 40)
        x = np.sort(u(0, X, n))
        model = dsine()
        t = [u(0.5, 5), u(0.1, 1) / X, u(4, 12) / X, u(0, 3), u(-1, 1)]
    elif kind == "collinear":
        model = collinear(float(rng.choice([1e-2, 1e-4])))
        x = np.sort(u(1, 1 + X, n))
        t = [u(-3, 3), u(-3, 3)]
    else:
        model, t = twin(), [u(0.5, 5), u(0.5, 5) / X, u(-1, 1), u(-1, 1)]
    y = model[1](x, *t)
    y = y + 0.05 * (np.ptp(y) + 1e-3) * rng.standard_normal(n)
    return model, x, y, t


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-300)


def num(v):
    return np.inf if v is None else float(v)


def reference(model, x, y, sigma, absolute, free, p):
    """numpy at the parameters p (all of them): the statistics of the fit of the free ones."""
    _, f, jac, _ = model
    fx = f(x, *p)
    w = 1 / sigma if sigma is not None else np.ones_like(x)
    r = (fx - y) * w
    ssr = float(r @ r)
    dof = len(x) - len(free)
    J = jac(x, *p)[:, free] * w[:, None]
    # columns scaled to unit norm first, as jitfit does (solver/covar.c): with data on a scale
    # S far from 1 the amplitudes' columns are S times smaller than the rates', and scipy's
    # unscaled SVD would drop them as if they were a null space
    D = np.sqrt((J**2).sum(axis=0))
    D[D == 0] = 1.0
    _, s, VT = np.linalg.svd(J / D, full_matrices=False)
    keep = s > np.finfo(float).eps * max(J.shape) * s[0]
    C0 = ((VT[keep].T / s[keep]) @ (VT[keep] / s[keep][:, None])) / np.outer(D, D)
    s2 = 1.0 if absolute else ssr / dof
    C = C0 * s2
    np_ = len(p)
    Cf = np.zeros((np_, np_))
    Cf[np.ix_(free, free)] = C
    # the rows' standard errors of the fit, √(s²·‖S⁻¹Vᵀg‖²) over the kept directions: the
    # same as √(gᵀCg) but without its cancellation, which loses cond(J)²·ε of gᵀCg
    G = jac(x, *p)[:, free] / D
    band = np.sqrt(s2 * (((G @ VT[keep].T) / s[keep])**2).sum(axis=1))
    # a parameter is undetermined where it has weight in the dropped directions
    null = VT[~keep] if (~keep).any() else np.zeros((0, len(free)))
    undet = np.zeros(np_, bool)
    for j, k in enumerate(free):
        undet[k] = (null[:, j]**2).sum() > np.sqrt(np.finfo(float).eps) or not J[:, j].any()
    tss = float(((y - y.mean())**2).sum())
    return dict(ssr=ssr, dof=dof, cov=Cf, band=band, undet=undet,
                chi2=ssr if sigma is not None else None,
                reduced_chi2=ssr / dof if sigma is not None else None,
                r_squared=1 - float(((fx - y)**2).sum()) / tss if tss > 0 else None)


def compare_cov(tag, Cj, Cr, fixed, undet, bad):
    np_ = len(Cr)
    d = np.sqrt(np.abs(np.diag(Cr)))
    worst = 0.0
    for k in range(np_):
        for l in range(np_):
            cj = Cj[k][l]
            if fixed[k] or fixed[l]:
                if cj != 0:
                    bad.append(f"{tag}: covariance[{k}][{l}] of a held parameter is {cj}")
                continue
            if undet[k] or undet[l]:
                if cj is not None:
                    bad.append(f"{tag}: covariance[{k}][{l}] of an undetermined parameter is "
                               f"{cj}, not inf (null)")
                continue
            if cj is None:
                bad.append(f"{tag}: covariance[{k}][{l}] is null, reference {Cr[k, l]:.6g}")
                continue
            scale = d[k] * d[l]
            e = abs(cj - Cr[k, l]) / scale if scale > 0 else abs(cj - Cr[k, l])
            worst = max(worst, e)
    if worst > TOL:
        bad.append(f"{tag}: covariance off by {worst:.3g} (relative to sqrt(C_kk C_ll))")
    return worst


def check(res, out_rows, model, x, y, sigma, absolute, fixed, p0, bounds, show):
    """Returns (mismatches, worst differences by key, whether scipy was compared)."""
    text, f, jac, names = model
    np_ = len(names)
    free = [k for k in range(np_) if not fixed[k]]
    pj = np.array([q["value"] for q in res["params"]], float)
    ref = reference(model, x, y, sigma, absolute, free, pj)
    bad, worst = [], {}

    def scalar(key, got, want):
        if want is None:
            if got is not None:
                bad.append(f"{key}: {got}, expected null")
            return
        if got is None:
            bad.append(f"{key}: null, expected {want:.10g}")
            return
        e = rel(got, want)
        worst[key] = max(worst.get(key, 0), e)
        if e > TOL:
            bad.append(f"{key}: {got:.10g} vs {want:.10g} (rel {e:.2g})")

    if res["dof"] != ref["dof"]:
        bad.append(f"dof: {res['dof']} vs {ref['dof']}")
    if res["n"] != len(x):
        bad.append(f"n: {res['n']} vs {len(x)}")
    scalar("ssr", res["ssr"], ref["ssr"])
    scalar("chi2", res["chi2"], ref["chi2"])
    scalar("reduced_chi2", res["reduced_chi2"], ref["reduced_chi2"])
    # R² = 1 - SSR/TSS: compare 1 - R² (what is computed), relative
    if ref["r_squared"] is not None and res["r_squared"] is not None:
        e = rel(1 - res["r_squared"], 1 - ref["r_squared"])
        worst["1-r_squared"] = max(worst.get("1-r_squared", 0), e)
        if e > TOL:
            bad.append(f"r_squared: {res['r_squared']!r} vs {ref['r_squared']!r}")
    else:
        scalar("r_squared", res["r_squared"], ref["r_squared"])
    Cj = res["covariance"]
    undet = ref["undet"]
    worst["cov"] = compare_cov("ref", Cj, ref["cov"], fixed, undet, bad)
    d = np.sqrt(np.diag(ref["cov"]))
    for k in range(np_):
        se = res["params"][k]["stderr"]
        if fixed[k]:
            if se != 0:
                bad.append(f"stderr[{names[k]}] of a held parameter is {se}")
            continue
        if undet[k]:
            if se is not None:
                bad.append(f"stderr[{names[k]}] is {se}, an undetermined parameter's is inf")
            continue
        if se is None:
            bad.append(f"stderr[{names[k]}] is null, reference {d[k]:.6g}")
            continue
        e = rel(se, d[k])
        worst["stderr"] = max(worst.get("stderr", 0), e)
        if e > TOL:
            bad.append(f"stderr[{names[k]}]: {se:.10g} vs {d[k]:.10g} (rel {e:.2g})")
    cor = res["correlation"]
    for k in range(np_):
        for l in range(np_):
            c = cor[k][l]
            if k == l:
                if c != 1:
                    bad.append(f"correlation[{k}][{k}] = {c}")
                continue
            if fixed[k] or fixed[l]:
                if c != 0:
                    bad.append(f"correlation[{k}][{l}] of a held parameter is {c}")
                continue
            if undet[k] or undet[l]:
                if c is not None:
                    bad.append(f"correlation[{k}][{l}] of an undetermined parameter is {c}")
                continue
            want = ref["cov"][k, l] / (d[k] * d[l])
            e = abs((c if c is not None else np.nan) - want)
            worst["corr"] = max(worst.get("corr", 0), e if np.isfinite(e) else np.inf)
            if not e <= TOL:
                bad.append(f"correlation[{k}][{l}]: {c} vs {want:.10g}")
    # --output: fit, residual, fit_stderr per row
    if out_rows is not None:
        fit, resid, band = out_rows
        fx = f(x, *pj)
        e = np.max(np.abs(fit - fx) / np.maximum(np.abs(fx), 1e-300 + np.max(np.abs(fx))))
        if e > 1e-12:
            bad.append(f"output fit off by {e:.3g}")
        e = np.max(np.abs(resid - (y - fit)))
        if e > 0:
            bad.append(f"output residual is not y - fit (off by {e:.3g})")
        scale = np.max(ref["band"]) if np.max(ref["band"]) > 0 else 1.0
        e = np.max(np.abs(band - ref["band"]) / np.maximum(np.abs(ref["band"]), 1e-3 * scale))
        worst["fit_stderr"] = max(worst.get("fit_stderr", 0), e)
        if not e <= TOL:
            i = int(np.argmax(np.where(np.isnan(band - ref["band"]), np.inf,
                                       np.abs(band - ref["band"]))))
            bad.append(f"fit_stderr off by {e:.3g} (row {i}: {band[i]!r} vs {ref['band'][i]!r})")
    # scipy's curve_fit on the model of the free parameters
    compared = False
    held = pj.copy()

    def g(xx, *q):
        pp = held.copy()
        pp[free] = q
        return f(xx, *pp)

    def gj(xx, *q):
        pp = held.copy()
        pp[free] = q
        return jac(xx, *pp)[:, free]
    lo = [bounds[k][0] for k in free] if bounds else -np.inf
    hi = [bounds[k][1] for k in free] if bounds else np.inf
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ps, pcov = curve_fit(g, x, y, p0=[p0[k] for k in free], sigma=sigma,
                                 absolute_sigma=absolute, method="trf", jac=gj, bounds=(lo, hi),
                                 xtol=1e-15, ftol=1e-15, gtol=1e-15, max_nfev=10000)
    except Exception:
        ps = None
    if ps is not None:
        sej = np.array([num(res["params"][k]["stderr"]) for k in free])
        same = all(abs(pj[k] - ps[j]) <= PTOL * max(abs(ps[j]), sej[j] if np.isfinite(sej[j])
                                                    else 0, 1e-300)
                   for j, k in enumerate(free))
        if same:
            compared = True
            Cs = np.zeros((np_, np_))
            Cs[np.ix_(free, free)] = pcov
            worst["scipy_cov"] = compare_cov("scipy", Cj, Cs, fixed, undet, bad)
        elif not undet.any():
            worst["params_vs_scipy"] = max(
                worst.get("params_vs_scipy", 0),
                max(abs(pj[k] - ps[j]) / max(abs(ps[j]), 1e-300) for j, k in enumerate(free)))
    return bad, worst, compared


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary")
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show", type=int, default=20, help="mismatching problems listed")
    ap.add_argument("--keep", metavar="DIR", help="keep each mismatching problem's data in DIR")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply y, sigma and the amplitudes by this (1e150, 1e-150: data "
                         "whose sums of squares are near the ends of the double range)")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    tally = collections.Counter()
    worst = {}
    shown = 0
    with tempfile.TemporaryDirectory() as tmp:
        data, outp = os.path.join(tmp, "d.csv"), os.path.join(tmp, "o.csv")
        for i in range(args.n):
            kind = FAMILIES[i % len(FAMILIES)]
            model, x, y, t = draw(rng, kind)
            text, f, jac, names = model
            # --scale: y, sigma and the amplitudes times S (every statistic but the covariance
            # and standard errors is invariant; those scale with S², S)
            amp = AMPLITUDES.get(kind, "abcd")
            y = y * args.scale
            t = [v * args.scale if nm in amp else v for nm, v in zip(names, t)]
            np_ = len(names)
            n = len(x)
            sigma = None
            if rng.random() < 0.5:
                sigma = np.exp(rng.normal(0, 0.5, n)) * 0.05 * (np.ptp(y) + 1e-3 * args.scale)
            absolute = sigma is not None and rng.random() < 0.5
            fixed = [False] * np_
            if np_ > 1 and rng.random() < 0.25:
                fixed[int(rng.integers(np_))] = True
            if n - (np_ - sum(fixed)) < 1:
                fixed = [False] * np_
                if n <= np_:
                    continue
            p0 = [v * float(np.exp(rng.normal(0, 0.05))) for v in t]
            bounds = None
            if rng.random() < 0.25:
                bounds = [(v - 10 * abs(v) - (args.scale if nm in amp else 1),
                           v + 10 * abs(v) + (args.scale if nm in amp else 1))
                          for nm, v in zip(names, t)]
            omit = rng.random() < 0.25 and n > np_ + 3
            cols = {"x": x.copy(), "y": y.copy()}
            if sigma is not None:
                cols["s"] = sigma.copy()
            if omit:
                # NaN in some rows of x, y or s: those rows are not part of the fit
                rows = rng.choice(n, size=min(3, n - np_ - 1), replace=False)
                for r in rows:
                    cols[str(rng.choice(list(cols)))][r] = np.nan
            keepr = np.all([np.isfinite(c) for c in cols.values()], axis=0)
            with open(data, "w") as fh:
                fh.write(",".join(cols) + "\n")
                for r in range(n):
                    fh.write(",".join(repr(float(c[r])) for c in cols.values()) + "\n")
            cmd = [args.binary, "fit", text, data, "--json", "--output", outp,
                   "--p0", ",".join(f"{nm}={v!r}" for nm, v in zip(names, p0))]
            if sigma is not None:
                cmd += ["--sigma", "s"]
            if absolute:
                cmd += ["--absolute-sigma"]
            if any(fixed):
                cmd += ["--fix", ",".join(nm for nm, fx in zip(names, fixed) if fx)]
            if omit:
                cmd += ["--nan-policy", "omit"]
            if bounds:
                cmd += ["--bounds", ",".join(f"{nm}={lo!r}:{hi!r}"
                                             for nm, (lo, hi) in zip(names, bounds))]
            run = subprocess.run(cmd, capture_output=True, text=True)
            try:
                res = json.loads(run.stdout)
            except ValueError:
                res = None
            desc = (f"#{i} {kind} n={int(keepr.sum())} sigma={'abs' if absolute else 'rel' if sigma is not None else '-'}"
                    f" fix={[nm for nm, fx in zip(names, fixed) if fx]} omit={omit}"
                    f" bounds={bool(bounds)}")
            if res is None or "params" not in res:
                tally["no result"] += 1
                if shown < args.show:
                    shown += 1
                    print(desc, "no result:", run.stderr.strip()[:300])
                continue
            xs, ys = x[keepr], y[keepr]
            ss = sigma[keepr] if sigma is not None else None
            # x, y, sigma as jitfit read them: the written digits round-trip exactly
            o = np.genfromtxt(outp, delimiter=",", names=True)
            out_rows = (o["fit"], o["residual"], o["fit_stderr"])
            if res["status_name"] == "nonfinite":
                # the sums of squares overflow (sigma ~1e-150 squares to 1e300 weights): no
                # statistics to check; the message says so
                tally["nonfinite, not checked"] += 1
                continue
            if not res["success"]:
                tally["not converged"] += 1
            bad, w, compared = check(res, out_rows, model, xs, ys, ss, absolute, fixed, p0,
                                     bounds, args.show)
            tally["scipy compared"] += compared
            for k, v in w.items():
                if k not in worst or v > worst[k][0]:
                    worst[k] = (v, desc)
            if bad:
                tally["mismatch"] += 1
                if args.keep:
                    os.makedirs(args.keep, exist_ok=True)
                    keep = os.path.join(args.keep, f"case-{i}")
                    subprocess.run(["cp", data, keep + ".csv"])
                    with open(keep + ".sh", "w") as fh:
                        fh.write(" ".join(f"'{c}'" if c != data else keep + ".csv"
                                          for c in cmd) + "\n")
                if shown < args.show:
                    shown += 1
                    print(desc, res["status_name"])
                    for b in bad[:6]:
                        print("   ", b)
            else:
                tally["agree"] += 1
    print(f"{args.n} problems: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.items())))
    print("worst differences (relative; correlation absolute):")
    for k, (v, where) in sorted(worst.items()):
        print(f"  {k:16s} {v:.3g}   {where}")
    return 1 if tally["mismatch"] or tally["no result"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
