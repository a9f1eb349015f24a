#!/usr/bin/env python3
"""The anchors of bench_gpu on the same data: NLSQ (JAX, on the GPU when JAX has one) and
scipy.optimize.curve_fit, side by side with jitfit's GPU and CPU solvers, as ratios.

The damped sine data are regenerated here bit for bit as bench_gpu.c makes them (splitmix64,
Box-Muller; x = 20 i / N), so every solver fits the same numbers from the same start with
ftol = xtol = gtol = 1e-8. bench_gpu runs first (--bench-gpu, its --tsv rows); then, per N,
NLSQ's curve_fit twice (cold: the first call, including JAX's tracing and compilation; warm:
the second) and scipy's curve_fit(method='lm') with the analytic Jacobian once (skipped above
--scipy-max points). Printed: times in ms, the ratios anchor / jitfit GPU warm (and / jitfit CPU
where the GPU did not run), and each anchor's largest relative parameter difference from jitfit.
Not a test; docs/PERFORMANCE.md ("GPU solver") records its output and command.

usage: python3 bench/bench_gpu_anchors.py [--bench-gpu build/bench/bench_gpu] [--sizes 1e5,1e6]
       [--scipy-max 1e7] [--no-nlsq]
NLSQ and JAX come from PyPI (pip install nlsq); without them the NLSQ column says so.
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

M64 = (1 << 64) - 1
P0 = [1.5, 0.2, 1.45, 0.0, 0.0]
TOL = 1e-8


def data(n):
    """x and y exactly as bench_gpu.c: splitmix64 from 42, two uniforms per point."""
    k = np.arange(1, 2 * n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(42) + k * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    u = ((z >> np.uint64(11)).astype(np.float64) + 0.5) / 9007199254740992.0
    u1, u2 = u[0::2], u[1::2]
    x = 20.0 * np.arange(n, dtype=np.float64) / n
    y = (2.0 * np.exp(-0.25 * x) * np.sin(1.5 * x + 0.3) + 0.5 +
         0.05 * np.sqrt(-2 * np.log(u1)) * np.cos(6.283185307179586 * u2))
    return x, y


def f_np(x, a, b, c, d, e):
    return a * np.exp(-b * x) * np.sin(c * x + d) + e


def jac_np(x, a, b, c, d, e):
    env = np.exp(-b * x)
    s, co = np.sin(c * x + d), np.cos(c * x + d)
    return np.stack([env * s, -a * x * env * s, a * x * env * co, a * env * co, np.ones_like(x)], 1)


def rel(p, q):
    return max(abs(a - b) / abs(b) for a, b in zip(p, q))


def run_bench_gpu(path, sizes):
    out = subprocess.run([path, "--sizes", ",".join("%g" % n for n in sizes), "--tsv", "1"],
                         capture_output=True, text=True)
    rows = {}
    for line in out.stdout.splitlines():
        v = line.split("\t")
        if len(v) == 12:
            rows[int(v[0])] = {"cold": float(v[1]), "warm": float(v[2]), "cpu": float(v[3]),
                               "params": [float(t) for t in v[7:12]]}
    if out.stderr.strip():
        print("bench_gpu:", out.stderr.strip().splitlines()[0])
    return rows


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench-gpu", default=os.path.join(here, "..", "build", "bench", "bench_gpu"))
    ap.add_argument("--sizes", default="1e5,1e6,1e7,1e8")
    ap.add_argument("--scipy-max", type=float, default=1e7)
    ap.add_argument("--no-nlsq", action="store_true")
    args = ap.parse_args()
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    nlsq = None
    if not args.no_nlsq:
        try:
            import jax
            jax.config.update("jax_enable_x64", True)
            import jax.numpy as jnp
            import logging
            import nlsq
            logging.getLogger("nlsq").setLevel(logging.WARNING)
            logging.getLogger("nlsq").propagate = False
            nlsq = (nlsq, jnp, jax)
            print("NLSQ %s, JAX %s on %s" % (getattr(nlsq[0], "__version__", "?"), jax.__version__,
                                               jax.devices()[0]))
        except Exception as exc:  # noqa: BLE001 - any import problem means: no NLSQ column
            print("NLSQ unavailable: %s" % exc)
    import scipy
    from scipy.optimize import curve_fit
    print("scipy %s, numpy %s, python %s" % (scipy.__version__, np.__version__, sys.version.split()[0]))
    jf = run_bench_gpu(args.bench_gpu, sizes)
    print("%8s %10s %10s %10s %10s %10s %10s %9s %9s %9s" %
          ("N", "jf gpu", "jf cpu", "nlsq cold", "nlsq warm", "scipy lm", "ref", "nlsq/ref",
           "scipy/ref", "max diff"))
    for n in sizes:
        x, y = data(n)
        row = jf.get(n, {})
        ref_name, ref = ("gpu", row.get("warm")) if row.get("warm") == row.get("warm") else \
            ("cpu", row.get("cpu"))
        nl_cold = nl_warm = sp = float("nan")
        diffs = []
        if nlsq:
            mod, jnp, jax = nlsq

            def f_jax(x, a, b, c, d, e):
                return a * jnp.exp(-b * x) * jnp.sin(c * x + d) + e
            fitter = mod.CurveFit() if hasattr(mod, "CurveFit") else None
            for k in range(2):
                t0 = time.perf_counter()
                if fitter is not None:
                    popt, _ = fitter.curve_fit(f_jax, x, y, p0=P0, ftol=TOL, xtol=TOL, gtol=TOL)
                else:
                    popt, _ = mod.curve_fit(f_jax, x, y, p0=P0, ftol=TOL, xtol=TOL, gtol=TOL)
                t = (time.perf_counter() - t0) * 1e3
                if k == 0:
                    nl_cold = t
                else:
                    nl_warm = t
            if row.get("params"):
                diffs.append(rel(list(np.asarray(popt)), row["params"]))
        if n <= args.scipy_max:
            t0 = time.perf_counter()
            popt, _ = curve_fit(f_np, x, y, p0=P0, jac=jac_np, method="lm", ftol=TOL, xtol=TOL,
                                gtol=TOL)
            sp = (time.perf_counter() - t0) * 1e3
            if row.get("params"):
                diffs.append(rel(list(popt), row["params"]))
        print("%8.0e %10.2f %10.2f %10.2f %10.2f %10.2f %10s %9.1f %9.1f %9.2g" %
              (n, row.get("warm", float("nan")), row.get("cpu", float("nan")), nl_cold, nl_warm,
               sp, "jf " + ref_name, nl_warm / ref if ref else float("nan"),
               sp / ref if ref else float("nan"), max(diffs) if diffs else float("nan")))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
