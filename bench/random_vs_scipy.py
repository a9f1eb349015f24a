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

Usage: /usr/bin/python3 bench/random_vs_scipy.py [-n 300] [--seed 7] BINARY [BINARY ...]
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
    return x, y, p0


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
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(args.seed)
    counts = {b: collections.Counter() for b in args.binaries}
    cases = {b: [] for b in args.binaries}
    scipy_counts = {m: collections.Counter() for m in METHODS}
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "d.csv")
        for i in range(args.n):
            kind = list(FAMILIES)[i % len(FAMILIES)]
            text, f, names = FAMILIES[kind]
            x, y, p0 = draw(rng, kind)
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


if __name__ == "__main__":
    main()
