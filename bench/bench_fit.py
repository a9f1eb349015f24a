#!/usr/bin/python3
"""jitfit's CPU solver against scipy.optimize.curve_fit, in one run on one machine.

Two benchmarks (results and the exact commands in docs/PERFORMANCE.md, "CPU solver vs scipy"):

1. single: the damped sine a*exp(-b*x)*sin(c*x+d)+e from [1.5, 0.2, 1.45, 0, 0] on N points
   (default N = 1e4, 1e5, 1e6, 1e7). The data are written once per N as CSV (%.15g) and read
   back with numpy, so both sides fit the same numbers. scipy: curve_fit with method='lm'
   (MINPACK, finite-difference Jacobian, as users call it), method='trf', and 'lm' with the
   analytic Jacobian (to separate the cost of finite differences from the rest). jitfit: the
   `jitfit fit --json` command on the CSV, with a warm kernel cache; reported are the library's
   own timing_ms.total (the fit: kernels from the cache, iterations, covariance) and the wall time
   of the whole process (start, reading and parsing the CSV, compiling the model, fitting,
   printing). All fits use ftol = xtol = gtol = 1e-8 and must reach the same optimum: the table
   shows the largest relative parameter difference from scipy lm.

2. batch: 1e4 independent fits of 1e3 points (each its own truth and noise) through
   jf_fit_batch (bench/bench_batch.c) against a loop of curve_fit(method='lm'); the scipy loop is
   timed on a subset (--batch-subset, default 1000) and extrapolated to all fits, which the
   output says.

usage: /usr/bin/python3 bench/bench_fit.py --jitfit JITFIT --bench-batch BENCH_BATCH
(defaults: build/jitfit and build/bench/bench_batch beside this directory)
Debian's python3-numpy/python3-scipy live under /usr/bin/python3. Timings are best of --repeat
runs (1 run at N >= 1e7, where one scipy fit takes tens of seconds).
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np
import scipy
from scipy.optimize import curve_fit

FORMULA = "a*exp(-b*x)*sin(c*x+d)+e"
NAMES = ["a", "b", "c", "d", "e"]
P0 = [1.5, 0.2, 1.45, 0.0, 0.0]
TRUTH = [2.0, 0.25, 1.5, 0.3, 0.5]
NOISE = 0.05
TOL = 1e-8


def model(x, a, b, c, d, e):
    return a * np.exp(-b * x) * np.sin(c * x + d) + e


def jac(x, a, b, c, d, e):
    env = np.exp(-b * x)
    s, co = np.sin(c * x + d), np.cos(c * x + d)
    return np.stack([env * s, -a * x * env * s, a * x * env * co, a * env * co, np.ones_like(x)],
                    axis=1)


def machine():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = "%.1f GiB" % (kb / 2**20)
    except (OSError, ValueError, IndexError):
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "memory": mem,
            "python": platform.python_version(), "numpy": np.__version__,
            "scipy": scipy.__version__, "kernel": platform.release()}


def single_data(n, data_dir):
    """The CSV for N points (written once) and its numbers as numpy reads them back."""
    csv = os.path.join(data_dir, "damped_sine_%d.csv" % n)
    npy = os.path.join(data_dir, "damped_sine_%d.npy" % n)
    if not os.path.exists(csv) or not os.path.exists(npy):
        rng = np.random.default_rng(1000 + n)
        x = np.linspace(0.0, 20.0, n, endpoint=False)
        y = model(x, *TRUTH) + NOISE * rng.standard_normal(n)
        t0 = time.perf_counter()
        np.savetxt(csv + ".tmp", np.column_stack([x, y]), fmt="%.15g", delimiter=",",
                   header="x,y", comments="")
        os.replace(csv + ".tmp", csv)
        xy = np.loadtxt(csv, delimiter=",", skiprows=1)
        np.save(npy, xy)
        print("  wrote %s (%.1f s)" % (csv, time.perf_counter() - t0), file=sys.stderr)
    xy = np.load(npy)
    return csv, np.ascontiguousarray(xy[:, 0]), np.ascontiguousarray(xy[:, 1])


def best_of(repeats, fn):
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def scipy_fit(x, y, method, use_jac=False):
    kw = dict(p0=P0, method=method, ftol=TOL, xtol=TOL, gtol=TOL, full_output=True)
    if use_jac:
        kw["jac"] = jac
    p, cov, info, _, _ = curve_fit(model, x, y, **kw)
    cost = 0.5 * float(np.sum((model(x, *p) - y) ** 2))
    return {"params": list(map(float, p)), "nfev": int(info.get("nfev", -1)), "cost": cost}


def run_jitfit(jitfit, csv, env, threads, vector_math=False):
    cmd = [jitfit, "fit", "--json", FORMULA, csv, "--p0", ",".join(
        "%s=%r" % kv for kv in zip(NAMES, P0)), "--ftol", str(TOL), "--xtol", str(TOL),
        "--gtol", str(TOL)]
    if threads:
        cmd += ["--threads", str(threads)]
    if vector_math:
        cmd.append("--vector-math")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1) or not proc.stdout.strip():
        raise RuntimeError("jitfit failed (%d): %s" % (proc.returncode, proc.stderr))
    j = json.loads(proc.stdout)
    return wall, j, " ".join(cmd)


def rel_diff(p, q):
    return max(abs(a - b) / max(abs(b), 1e-300) for a, b in zip(p, q))


def bench_single(args, env):
    rows = []
    for n in args.sizes:
        print("N = %d" % n, file=sys.stderr)
        csv, x, y = single_data(n, args.data_dir)
        reps = 1 if n >= 10**7 else args.repeat
        row = {"n": n, "repeats": reps}
        for label, method, use_jac in (("lm", "lm", False), ("trf", "trf", False),
                                       ("lm_jac", "lm", True)):
            if label in args.skip:
                continue
            t, r = best_of(reps, lambda: scipy_fit(x, y, method, use_jac))
            r["seconds"] = t
            row["scipy_" + label] = r
            print("  scipy %-6s %8.3f s  nfev %d" % (label, t, r["nfev"]), file=sys.stderr)
        modes = [("jitfit", False)] + ([("jitfit_vec", True)] if args.vector_math else [])
        for key, vec in modes:
            run_jitfit(args.jitfit, csv, env, args.threads, vec)  # warm the caches
            best_wall, best_total, j = float("inf"), float("inf"), None
            for _ in range(reps):
                wall, j1, cmd = run_jitfit(args.jitfit, csv, env, args.threads, vec)
                best_wall = min(best_wall, wall)
                if j1["timing_ms"]["total"] < best_total:
                    best_total, j = j1["timing_ms"]["total"], j1
            row[key] = {"wall_s": best_wall, "total_ms": best_total, "json": j, "command": cmd}
            print("  %s total %.3f ms, wall %.3f s, nfev %d, %s" % (
                key, best_total, best_wall, j["nfev"], j["status_name"]), file=sys.stderr)
        pj = [p["value"] for p in row["jitfit"]["json"]["params"]]
        if "jitfit_vec" in row:
            row["vec_rel_diff_vs_exact"] = rel_diff(
                [p["value"] for p in row["jitfit_vec"]["json"]["params"]], pj)
        if "scipy_lm" in row:
            row["max_rel_diff_vs_lm"] = rel_diff(pj, row["scipy_lm"]["params"])
        rows.append(row)
    return rows


def batch_data(path, nfits, npts):
    rng = np.random.default_rng(424242)
    x = np.linspace(0.0, 20.0, npts, endpoint=False)
    lo = np.array([1.5, 0.2, 1.45, 0.2, 0.4])
    hi = np.array([2.5, 0.3, 1.55, 0.4, 0.6])
    truth = lo + (hi - lo) * rng.random((nfits, 5))
    y = model(x[None, :], *[truth[:, k:k + 1] for k in range(5)])
    y = y + NOISE * rng.standard_normal((nfits, npts))
    with open(path, "wb") as f:
        f.write(b"JFBATCH1")
        f.write(np.array([nfits, npts], dtype="<u8").tobytes())
        f.write(x.astype("<f8").tobytes())
        f.write(np.ascontiguousarray(y).astype("<f8").tobytes())
    return x, y


def bench_batch(args, env):
    nfits, npts = args.batch_fits, args.batch_points
    path = os.path.join(args.data_dir, "batch_%dx%d.bin" % (nfits, npts))
    out = path + ".params"
    x, y = batch_data(path, nfits, npts)
    cmd = [args.bench_batch, path, "--out", out, "--repeat", str(args.repeat), "--ftol", str(TOL),
           "--xtol", str(TOL), "--gtol", str(TOL)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    if args.single_loop:
        cmd.append("--single")
    jb_vec = None
    if args.vector_math:
        proc = subprocess.run(cmd + ["--vector-math"], capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise RuntimeError("bench_batch --vector-math failed: " + proc.stderr)
        jb_vec = json.loads(proc.stdout)
        print("  jf_fit_batch (vector math) best %.1f ms, %d/%d converged" % (
            jb_vec["best_ms"], jb_vec["converged"], nfits), file=sys.stderr)
    # The exact run goes last: its parameters (in `out`) are the ones compared with scipy.
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError("bench_batch failed: " + proc.stderr)
    jb = json.loads(proc.stdout)
    raw = np.fromfile(out, dtype="<f8", count=nfits * 5).reshape(nfits, 5)
    status = np.fromfile(out, dtype="<i4", offset=nfits * 5 * 8)
    print("  jf_fit_batch best %.1f ms (first %.1f ms), %d/%d converged" % (
        jb["best_ms"], jb["first_ms"], jb["converged"], nfits), file=sys.stderr)

    subset = min(args.batch_subset, nfits)
    sp = np.full((subset, 5), np.nan)
    t0 = time.perf_counter()
    failures = 0
    for i in range(subset):
        try:
            sp[i] = curve_fit(model, x, y[i], p0=P0, method="lm", ftol=TOL, xtol=TOL,
                              gtol=TOL)[0]
        except RuntimeError:
            failures += 1
    t_subset = time.perf_counter() - t0
    per_fit = t_subset / subset
    ok = np.isfinite(sp).all(axis=1) & np.isin(status[:subset], [1, 2, 3, 4])
    diffs = np.abs(raw[:subset][ok] - sp[ok]) / np.abs(sp[ok])
    return {"nfits": nfits, "npts": npts, "jitfit": jb, "jitfit_vec": jb_vec,
            "command": " ".join(cmd),
            "scipy_subset": subset, "scipy_subset_s": t_subset,
            "scipy_extrapolated_s": per_fit * nfits, "scipy_failures": failures,
            "compared": int(ok.sum()),
            "max_rel_diff": float(diffs.max()) if diffs.size else float("nan"),
            "median_rel_diff": float(np.median(diffs.max(axis=1))) if diffs.size else float("nan"),
            "fits_over_1e-6": int((diffs.max(axis=1) > 1e-6).sum()) if diffs.size else 0}


def fmt_ratio(v):
    return ("%.0f×" if v >= 10 else "%.2g×") % v


def report(args, mach, rows, batch):
    print("Machine: %d cores (nproc), %s, %s RAM; Python %s, numpy %s, scipy %s" % (
        mach["nproc"], mach["cpu"], mach["memory"], mach["python"], mach["numpy"], mach["scipy"]))
    print()
    if rows:
        print("| N | scipy lm | scipy trf | scipy lm + analytic jac | jitfit fit (library total) "
              "| jitfit wall (process, incl. reading CSV) | lm / jitfit total | lm / jitfit wall "
              "| trf / jitfit total | max rel. param diff vs lm | nfev lm / trf / jitfit |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            j = r["jitfit"]
            tot, wall = j["total_ms"] / 1e3, j["wall_s"]

            def sec(key):
                return "%.3f s" % r[key]["seconds"] if key in r else "-"

            def ratio(key, t):
                return fmt_ratio(r[key]["seconds"] / t) if key in r else "-"

            def nfev(key):
                return str(r[key]["nfev"]) if key in r else "-"

            print(("| %.0e | %s | %s | %s | %.2f ms | %.3f s | %s | %s | %s | %.1e "
                   "| %s / %s / %d |") % (
                r["n"], sec("scipy_lm"), sec("scipy_trf"), sec("scipy_lm_jac"), j["total_ms"],
                wall, ratio("scipy_lm", tot), ratio("scipy_lm", wall), ratio("scipy_trf", tot),
                r.get("max_rel_diff_vs_lm", float("nan")), nfev("scipy_lm"), nfev("scipy_trf"),
                j["json"]["nfev"]))
        print()
        if any("jitfit_vec" in r for r in rows):
            print("With `--vector-math` (SLEEF vectorized transcendentals):")
            print()
            print("| N | jitfit total (vector math) | jitfit wall (vector math) | lm / total "
                  "| lm / wall | trf / total | max rel. param diff vs exact jitfit |")
            print("|---|---|---|---|---|---|---|")
            for r in rows:
                if "jitfit_vec" not in r:
                    continue
                v = r["jitfit_vec"]
                tot, wall = v["total_ms"] / 1e3, v["wall_s"]

                def ratio2(key, t):
                    return fmt_ratio(r[key]["seconds"] / t) if key in r else "-"

                print("| %.0e | %.2f ms | %.3f s | %s | %s | %s | %.1e |" % (
                    r["n"], v["total_ms"], wall, ratio2("scipy_lm", tot), ratio2("scipy_lm", wall),
                    ratio2("scipy_trf", tot), r["vec_rel_diff_vs_exact"]))
            print()
        for r in rows:
            j = r["jitfit"]["json"]
            print("N=%.0e jitfit: backend %s, cache %s, status %s, iterations %d, timing_ms %s" % (
                r["n"], j["backend"], j["cache"], j["status_name"], j["iterations"],
                json.dumps(j["timing_ms"])))
        print()
    if batch:
        jb = batch["jitfit"]
        sub = batch["scipy_subset"]
        extrap = "" if sub == batch["nfits"] else " (timed %d fits: %.2f s, extrapolated ×%g)" % (
            sub, batch["scipy_subset_s"], batch["nfits"] / sub)
        print("Batch: %d fits × %d points" % (batch["nfits"], batch["npts"]))
        print("- jf_fit_batch: best %.1f ms of %d (first call, incl. obtaining kernels: %.1f ms), "
              "backend %s, %d/%d converged, mean nfev %.1f" % (
                  jb["best_ms"], jb["repeat"], jb["first_ms"], jb["backend"], jb["converged"],
                  batch["nfits"], jb["mean_nfev"]))
        if jb.get("single_loop_ms", -1) >= 0:
            print("- loop of jf_fit: %.1f ms" % jb["single_loop_ms"])
        if batch.get("jitfit_vec"):
            jv = batch["jitfit_vec"]
            print("- jf_fit_batch with vector math: best %.1f ms, %d/%d converged, ratio scipy / "
                  "it: %s" % (jv["best_ms"], jv["converged"], batch["nfits"], fmt_ratio(
                      batch["scipy_extrapolated_s"] * 1e3 / jv["best_ms"])))
        print("- scipy curve_fit lm loop: %.1f s%s" % (batch["scipy_extrapolated_s"], extrap))
        print("- ratio scipy / jf_fit_batch: %s" % fmt_ratio(
            batch["scipy_extrapolated_s"] * 1e3 / jb["best_ms"]))
        print("- parameters vs scipy on %d fits where both converged: max rel. diff %.1e, "
              "median %.1e, %d fits differ by more than 1e-6; scipy failures %d" % (
                  batch["compared"], batch["max_rel_diff"], batch["median_rel_diff"],
                  batch["fits_over_1e-6"], batch["scipy_failures"]))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jitfit", default=os.path.join(here, "..", "build", "jitfit"))
    ap.add_argument("--bench-batch", default=os.path.join(here, "..", "build", "bench",
                                                          "bench_batch"))
    ap.add_argument("--sizes", type=lambda s: [int(float(v)) for v in s.split(",")],
                    default=[10**4, 10**5, 10**6, 10**7])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="jitfit threads (0: all cores)")
    ap.add_argument("--skip", default="", help="comma list of lm,trf,lm_jac,single,batch")
    ap.add_argument("--batch-fits", type=int, default=10000)
    ap.add_argument("--batch-points", type=int, default=1000)
    ap.add_argument("--batch-subset", type=int, default=1000)
    ap.add_argument("--single-loop", action="store_true", help="also time a loop of jf_fit")
    ap.add_argument("--data-dir", default="/tmp/jitfit-bench")
    ap.add_argument("--vector-math", action="store_true",
                    help="run jitfit with SLEEF vector math (jitfit fit --vector-math)")
    ap.add_argument("--json-out", help="write all results as JSON here")
    args = ap.parse_args()
    args.skip = set(filter(None, args.skip.split(",")))
    os.makedirs(args.data_dir, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("JITFIT_CACHE_DIR", os.path.join(args.data_dir, "cache"))
    os.makedirs(env["JITFIT_CACHE_DIR"], mode=0o700, exist_ok=True)

    mach = machine()
    rows = [] if "single" in args.skip else bench_single(args, env)
    batch = None if "batch" in args.skip else bench_batch(args, env)
    report(args, mach, rows, batch)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"machine": mach, "single": rows, "batch": batch}, f, indent=1)


if __name__ == "__main__":
    main()
