#!/usr/bin/env python3
"""Randomized comparison of jitfit's answers with scipy's, for solver changes.

Draws N problems from six model families (exponential growth/decay, exponential plus offset,
logistic, power law, Gaussian peak, damped sine) with 5 % noise, half from the default start
(all 1) and half from a start perturbed around the truth, fits each with `jitfit fit --json`
(one or more binaries, to compare versions) and with scipy.optimize.least_squares from the
same start (methods trf, lm and dogbox, the lowest cost counts), and counts per binary:

  worse   jitfit reported success at a cost above scipy's best (by more than 1e-6 relative):
          a false stop, or another local minimum
  failed  jitfit reported failure (max_nfev, ...)
  ok      success at scipy's best cost or below

Bounded mode (--bounds): each problem also gets a box per parameter, drawn around the
unconstrained optimum u (scipy's best fit from the true parameters) so that some bounds are
inactive and some active at the constrained optimum:

  wide      [u - a, u + b] with a, b in 0.5..3 times max(|u|, 0.1): contains u (inactive)
  cut       one side between the start and u (u - c or u + c, c in 0.05..1 times the scale),
            the other side wide or infinite: that bound is active at the optimum
  onesided  0:inf, or -inf:0 (by the sign of the truth; the sign of u decides whether it binds)
  tight     width 0.01..0.2 times the scale around a point near u (may contain u or not)
  free      -inf:inf

The start is that of the unbounded mode when it lies in the box, else a point drawn inside it;
one problem in eight then moves one parameter of the start exactly onto a finite bound (jitfit
and scipy both allow a start on the boundary). jitfit gets `--bounds`, scipy's least_squares
methods trf and dogbox the same box (lm takes no bounds), all with the default tolerances
(1e-8). Counted per method against the better of trf and dogbox: worse, failed, ok as above. jitfit's answer is also checked on its own:

  kkt       first-order conditions at jitfit's point: with g = Jᵀr (J by complex steps) and
            c_k = g_k / (‖J_k‖ ‖r‖) (MINPACK's cosine), an interior parameter needs |c_k| <= 1e-4,
            one on its lower bound c_k >= -1e-4 (the cost falls only by leaving the box), one on
            its upper bound c_k <= 1e-4; a dead column (‖J_k‖ max(|p_k|, 1) < 1e-6 ‖r‖, a peak
            or step far off the data) is not checked
  at_bound  the JSON's at_bound must be "lower"/"upper" exactly when the value equals that bound
  outside   a value outside its box

and a success with a KKT violation is listed as a false convergence. Where the best cost is
not jitfit's but jitfit's point satisfies KKT, the case is marked 'local' (another local
minimum, no defect by itself). Problems where every method failed count as 'none' and are left
out of the comparison.

Usage: /usr/bin/python3 bench/random_vs_scipy.py [-n 300] [--seed 7] [--bounds] BINARY [BINARY ...]
Needs numpy and scipy (Debian's python3-scipy). A correctness tool, not a timed benchmark.
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
from scipy.optimize import least_squares

FAMILIES = {
    "exp": ("a*exp(b*x)", lambda x, a, b: a * np.exp(b * x), ["a", "b"]),
    "exp3": ("a*exp(-b*x)+c", lambda x, a, b, c: a * np.exp(-b * x) + c, ["a", "b", "c"]),
    "logistic": ("a/(1+exp(-b*(x-c)))", lambda x, a, b, c: a / (1 + np.exp(-b * (x - c))),
                 ["a", "b", "c"]),
    "power": ("a*x^b", lambda x, a, b: a * x**b, ["a", "b"]),
    "gauss": ("a*exp(-(x-m)^2/(2*s^2))+c",
              lambda x, a, m, s, c: a * np.exp(-(x - m)**2 / (2 * s**2)) + c, ["a", "m", "s", "c"]),
    "dsine": ("a*exp(-b*x)*sin(c*x+d)+e",
              lambda x, a, b, c, d, e: a * np.exp(-b * x) * np.sin(c * x + d) + e,
              ["a", "b", "c", "d", "e"]),
}


def draw(rng, kind):
    n = int(rng.choice([8, 20, 60, 200]))
    X = float(rng.choice([5, 20, 50]))
    u = rng.uniform
    x = np.sort(u(0, X, n))
    if kind == "exp":
        t = [u(0.5, 5), rng.choice([-1, 1]) * u(0.01, 10 / X)]
        x = np.sort(u(0.01 * X, X, n))
    elif kind == "exp3":
        t = [u(0.5, 5), u(0.05, 10 / X), u(-2, 2)]
    elif kind == "logistic":
        t = [u(0.5, 5), u(0.2, 3), u(0.2 * X, 0.8 * X)]
    elif kind == "power":
        t = [u(0.5, 5), u(-2, 3)]
        x = np.sort(u(0.1, X, n))
    elif kind == "gauss":
        t = [u(0.5, 5), u(0.2 * X, 0.8 * X), u(0.05 * X, 0.3 * X), u(-1, 1)]
    else:
        t = [u(0.5, 5), u(0.01, 3 / X), u(0.5, 3), u(0, 3), u(-1, 1)]
    f = FAMILIES[kind][1]
    y = f(x, *t)
    y = y + 0.05 * np.std(y) * rng.standard_normal(n)
    p0 = [1.0] * len(t) if rng.random() < 0.5 else list(np.array(t) * np.exp(rng.normal(0, 0.7, len(t))))
    return x, y, p0, t


METHODS = ("trf", "lm", "dogbox")


def scipy_costs(f, x, y, p0):
    """Each method's final cost, or None where it failed; scipy's best is their minimum."""
    costs = {}
    for method in METHODS:
        try:
            r = least_squares(lambda p: f(x, *p) - y, p0, method=method, max_nfev=5000)
            costs[method] = r.cost if r.success and np.isfinite(r.cost) else None
        except Exception:
            costs[method] = None
    return costs


def above(cost, best):
    return cost > best * (1 + 1e-6) + 1e-12


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("-n", type=int, default=300)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--show", type=int, default=10, help="cases listed per binary")
    ap.add_argument("--dump", metavar="DIR",
                    help="write each case that is not ok as DIR/case-I.csv with its command line")
    ap.add_argument("--bounds", action="store_true",
                    help="bounded mode: a box per parameter, jitfit against trf and dogbox")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    if args.bounds:
        return main_bounded(args)
    rng = np.random.default_rng(args.seed)
    counts = {b: collections.Counter() for b in args.binaries}
    cases = {b: [] for b in args.binaries}
    scipy_counts = {m: collections.Counter() for m in METHODS}
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "d.csv")
        for i in range(args.n):
            kind = list(FAMILIES)[i % len(FAMILIES)]
            text, f, names = FAMILIES[kind]
            x, y, p0, _ = draw(rng, kind)
            costs = scipy_costs(f, x, y, p0)
            found = [c for c in costs.values() if c is not None]
            best = min(found) if found else np.inf
            for m, c in costs.items():
                scipy_counts[m]["failed" if c is None else "worse" if above(c, best) else "ok"] += 1
            np.savetxt(data, np.c_[x, y], delimiter=",", header="x,y", comments="")
            start = ",".join(f"{n}={v!r}" for n, v in zip(names, p0))
            for b in args.binaries:
                out = subprocess.run([b, "fit", text, data, "--json", "--p0", start],
                                     capture_output=True, text=True)
                try:
                    d = json.loads(out.stdout)
                except ValueError:
                    counts[b]["failed"] += 1
                    cases[b].append((i, kind, "no result"))
                    continue
                ratio = d["cost"] / best if best > 0 else float("inf")
                if not d.get("success"):
                    counts[b]["failed"] += 1
                elif above(d["cost"], best):
                    counts[b]["worse"] += 1
                else:
                    counts[b]["ok"] += 1
                    continue
                cases[b].append((i, kind, d["status_name"], f"cost/scipy {ratio:.6g}"))
                if args.dump:
                    os.makedirs(args.dump, exist_ok=True)
                    keep = os.path.join(args.dump, f"case-{i}.csv")
                    shutil.copyfile(data, keep)
                    with open(keep[:-4] + ".sh", "w") as cmd:
                        cmd.write(f"# scipy {costs}\n{b} fit '{text}' {keep} --p0 {start}\n")
    for b in args.binaries:
        c = counts[b]
        by_kind = collections.Counter(z[1] for z in cases[b])
        print(f"{b}: worse {c['worse']}, failed {c['failed']}, ok {c['ok']} of {args.n}; "
              f"not ok by family: {dict(by_kind)}")
        for z in cases[b][:args.show]:
            print("   case", *z)
    # the same measure for each scipy method alone, against the best of the three: how often
    # one local method from one start misses the lowest minimum found
    for m in METHODS:
        c = scipy_counts[m]
        print(f"scipy {m}: worse {c['worse']}, failed {c['failed']}, ok {c['ok']} of {args.n}")


# ---- bounded mode ------------------------------------------------------------------------------

BOUNDED_METHODS = ("trf", "dogbox")
BOX_KINDS = ("wide", "cut", "onesided", "tight", "free")
KKT_TOL = 1e-4


def unconstrained(f, x, y, t):
    """scipy's best unbounded fit from the true parameters: the centre the boxes are drawn
    around (the truth itself where every method failed)."""
    best = None
    for method in METHODS:
        try:
            r = least_squares(lambda p: f(x, *p) - y, t, method=method, max_nfev=5000)
        except Exception:
            continue
        if r.success and np.isfinite(r.cost) and (best is None or r.cost < best.cost):
            best = r
    return np.array(best.x if best is not None else t, dtype=float)


def draw_box(rng, u, t):
    """A box per parameter around the unconstrained optimum u; returns lo, hi and the kinds."""
    lo, hi, kinds = [], [], []
    for k in range(len(u)):
        sc = max(abs(u[k]), 0.1)
        kind = str(rng.choice(BOX_KINDS, p=[0.25, 0.3, 0.15, 0.15, 0.15]))
        if kind == "wide":
            a, b = u[k] - rng.uniform(0.5, 3) * sc, u[k] + rng.uniform(0.5, 3) * sc
        elif kind == "cut":
            c = rng.uniform(0.05, 1) * sc
            far = rng.uniform(1, 4) * sc
            if rng.random() < 0.5:
                b = u[k] - c
                a = -np.inf if rng.random() < 0.3 else b - far
            else:
                a = u[k] + c
                b = np.inf if rng.random() < 0.3 else a + far
        elif kind == "onesided":
            # by the truth's sign, reversed one time in three: a bound at 0 that binds
            positive = (t[k] >= 0) != (rng.random() < 1 / 3)
            a, b = (0.0, np.inf) if positive else (-np.inf, 0.0)
        elif kind == "tight":
            centre = u[k] + rng.normal(0, 0.1) * sc
            w = rng.uniform(0.01, 0.2) * sc
            a, b = centre - w / 2, centre + w / 2
        else:
            a, b = -np.inf, np.inf
        lo.append(float(a))
        hi.append(float(b))
        kinds.append(kind)
    return np.array(lo), np.array(hi), kinds


def start_in_box(rng, p0, lo, hi, u):
    """The unbounded mode's start where it lies strictly inside the box, else a point drawn
    inside; one time in eight one parameter then starts exactly on a finite bound."""
    p = np.array(p0, dtype=float)
    for k in range(len(p)):
        if lo[k] < p[k] < hi[k]:
            continue
        sc = max(abs(u[k]), 0.1)
        if np.isfinite(lo[k]) and np.isfinite(hi[k]):
            w = hi[k] - lo[k]
            p[k] = rng.uniform(lo[k] + 0.05 * w, hi[k] - 0.05 * w)
        elif np.isfinite(lo[k]):
            p[k] = lo[k] + rng.uniform(0.1, 2) * sc
        else:
            p[k] = hi[k] - rng.uniform(0.1, 2) * sc
    if rng.random() < 1 / 8:
        ends = [(k, v) for k in range(len(p)) for v in (lo[k], hi[k]) if np.isfinite(v)]
        if ends:
            k, v = ends[int(rng.integers(len(ends)))]
            p[k] = v
    return p


def bounded_costs(f, x, y, p0, lo, hi):
    """Each bounded scipy method's (cost, point), or None where it failed."""
    out = {}
    for method in BOUNDED_METHODS:
        try:
            r = least_squares(lambda p: f(x, *p) - y, p0, bounds=(lo, hi), method=method,
                              max_nfev=5000)
            out[method] = (r.cost, r.x) if r.success and np.isfinite(r.cost) else None
        except Exception:
            out[method] = None
    return out


def cosines(f, x, y, p):
    """c_k = g_k / (‖J_k‖ ‖r‖) at p, with J by complex steps (exact to rounding); 0 for a dead
    column, ‖J_k‖ max(|p_k|, 1) < 1e-6 ‖r‖: such a parameter (a peak far off the data) hardly
    moves the model, and its cosine, scale-free, says nothing about what is left to gain."""
    p = np.array(p, dtype=float)
    with np.errstate(all="ignore"):
        r = f(x, *p) - y
        J = np.empty((len(x), len(p)))
        for k in range(len(p)):
            pc = p.astype(complex)
            pc[k] += 1e-30j
            J[:, k] = np.imag(f(x, *pc)) / 1e-30
    fn = np.linalg.norm(r)
    cn = np.linalg.norm(J, axis=0)
    g = J.T @ r
    den = cn * fn
    live = (den > 0) & (cn * np.maximum(np.abs(p), 1) >= 1e-6 * fn)
    return np.where(live, g / np.where(live, den, 1), 0.0)


def kkt_violations(c, p, lo, hi, names, on_bound):
    """Parameters whose first-order condition fails; on_bound(k) is -1, +1 or 0."""
    bad = []
    for k, ck in enumerate(c):
        if not np.isfinite(ck):
            bad.append(f"{names[k]}: c nan")
            continue
        side = on_bound(k)
        if (side == 0 and abs(ck) > KKT_TOL) or (side < 0 and ck < -KKT_TOL) or \
                (side > 0 and ck > KKT_TOL):
            near = min(abs(p[k] - lo[k]), abs(hi[k] - p[k]))
            bad.append(f"{names[k]}: c {ck:.3g} side {side} dist {near:.3g}")
    return bad


def bound_arg(names, lo, hi):
    """--bounds text: an infinite side is empty; parameters without bounds are left out."""
    items = []
    for n, a, b in zip(names, lo, hi):
        if np.isfinite(a) or np.isfinite(b):
            items.append(f"{n}={repr(float(a)) if np.isfinite(a) else ''}:"
                         f"{repr(float(b)) if np.isfinite(b) else ''}")
    return ",".join(items)


def main_bounded(args):
    rng = np.random.default_rng(args.seed)
    counts = {b: collections.Counter() for b in args.binaries}
    cases = {b: [] for b in args.binaries}
    scipy_counts = {m: collections.Counter() for m in BOUNDED_METHODS}
    scipy_kkt = collections.Counter()
    box_kinds = collections.Counter()
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "d.csv")
        for i in range(args.n):
            kind = list(FAMILIES)[i % len(FAMILIES)]
            text, f, names = FAMILIES[kind]
            x, y, p0, t = draw(rng, kind)
            u = unconstrained(f, x, y, t)
            lo, hi, kinds = draw_box(rng, u, t)
            box_kinds.update(kinds)
            p0 = start_in_box(rng, p0, lo, hi, u)
            res = bounded_costs(f, x, y, p0, lo, hi)
            found = [c[0] for c in res.values() if c is not None]
            best = min(found) if found else np.inf
            for m, c in res.items():
                scipy_counts[m]["failed" if c is None else "worse" if above(c[0], best) else "ok"] += 1
                if c is not None:  # calibration: scipy's trf/dogbox stop just inside a bound
                    near = lambda k, q=c[1]: (-1 if q[k] - lo[k] <= 1e-6 * max(1, abs(lo[k])) else
                                              1 if hi[k] - q[k] <= 1e-6 * max(1, abs(hi[k])) else 0)
                    if kkt_violations(cosines(f, x, y, c[1]), c[1], lo, hi, names, near):
                        scipy_kkt[m] += 1
            np.savetxt(data, np.c_[x, y], delimiter=",", header="x,y", comments="")
            start = ",".join(f"{n}={float(v)!r}" for n, v in zip(names, p0))
            barg = bound_arg(names, lo, hi)
            for b in args.binaries:
                cmd = [b, "fit", text, data, "--json", "--p0", start]
                if barg:
                    cmd += ["--bounds", barg]
                out = subprocess.run(cmd, capture_output=True, text=True)
                tags = []
                try:
                    d = json.loads(out.stdout)
                    p = np.array([q["value"] for q in d["params"]], dtype=float)
                    flags = [q["at_bound"] for q in d["params"]]
                except (ValueError, KeyError, TypeError):
                    d = None
                if d is None or "cost" not in d:
                    status, success, cost = "no result", False, np.inf
                else:
                    status, success, cost = d["status_name"], bool(d.get("success")), d["cost"]
                    if np.any(p < lo) or np.any(p > hi):
                        tags.append("outside")
                    want = ["lower" if p[k] == lo[k] else "upper" if p[k] == hi[k] else None
                            for k in range(len(p))]
                    if want != flags:
                        tags.append(f"at_bound {flags} want {want}")
                    side = lambda k: -1 if p[k] <= lo[k] else 1 if p[k] >= hi[k] else 0
                    bad = kkt_violations(cosines(f, x, y, p), p, lo, hi, names, side)
                    if bad:
                        tags.append("kkt " + "; ".join(bad))
                        counts[b]["kkt"] += 1
                        if success:
                            counts[b]["false_conv"] += 1
                if any(z.startswith("at_bound") for z in tags):
                    counts[b]["at_bound"] += 1
                if "outside" in tags:
                    counts[b]["outside"] += 1
                if not found and not success:
                    counts[b]["none"] += 1
                    verdict = "none"
                elif not success:
                    counts[b]["failed"] += 1
                    verdict = "failed"
                elif above(cost, best):
                    counts[b]["worse"] += 1
                    verdict = "worse"
                    if not any(z.startswith("kkt") for z in tags):
                        counts[b]["local"] += 1
                        tags.append("local")
                else:
                    counts[b]["ok"] += 1
                    verdict = "ok"
                if verdict == "ok" and not tags:
                    continue
                ratio = cost / best if best > 0 else float("inf")
                cases[b].append((i, kind, verdict, status, f"cost/scipy {ratio:.6g}",
                                 "boxes " + ",".join(kinds), *tags))
                if args.dump:
                    os.makedirs(args.dump, exist_ok=True)
                    keep = os.path.join(args.dump, f"case-{i}.csv")
                    shutil.copyfile(data, keep)
                    with open(keep[:-4] + ".sh", "w") as sh:
                        sh.write(f"# scipy {({m: None if c is None else (c[0], list(c[1])) for m, c in res.items()})}\n"
                                 f"# {cases[b][-1]}\n"
                                 f"{os.path.abspath(b)} fit '{text}' {keep} --p0 {start}"
                                 + (f" --bounds {barg}" if barg else "") + "\n")
    print(f"bounded mode, seed {args.seed}: boxes drawn {dict(box_kinds)}")
    for b in args.binaries:
        c = counts[b]
        print(f"{b}: worse {c['worse']} (of which local, KKT holds: {c['local']}), "
              f"failed {c['failed']}, ok {c['ok']}, all failed {c['none']} of {args.n}; "
              f"KKT violated {c['kkt']} (claimed converged: {c['false_conv']}), "
              f"at_bound wrong {c['at_bound']}, outside the box {c['outside']}")
        for z in cases[b][:args.show]:
            print("   case", *z)
    for m in BOUNDED_METHODS:
        c = scipy_counts[m]
        print(f"scipy {m}: worse {c['worse']}, failed {c['failed']}, ok {c['ok']} of {args.n}; "
              f"KKT violated {scipy_kkt[m]} (a bound within 1e-6 counts as reached)")


if __name__ == "__main__":
    main()
