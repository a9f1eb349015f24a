#!/usr/bin/env python3
"""Reading a data file: jitfit's reader (`timing_ms.read` of `jitfit fit --json`: open and
parse) against numpy.loadtxt on the same CSV, alternated, best and worst of --reps each, as a
ratio (docs/PERFORMANCE.md, "Reading data files").

usage: /usr/bin/python3 bench/bench_read.py --jitfit build/jitfit [--rows 1e6] [--reps 3]

Files (written once under /tmp/jitfit-bench-read): ROWS rows of x, y printed with %.15g, and
2·ROWS rows printed with repr() (17 significant digits, as numpy and Python write by default).
"""
import argparse
import json
import os
import random
import subprocess
import time

import numpy as np


def write(path, rows, fmt):
    if os.path.exists(path):
        return
    rnd = random.Random(1)
    with open(path + ".tmp", "w") as f:
        f.write("x,y\n")
        for i in range(rows):
            f.write(fmt(i * 1e-5, rnd.random()))
    os.replace(path + ".tmp", path)


def jitfit_read(exe, path):
    out = subprocess.run([exe, "fit", "a*x+b", path, "--json"], capture_output=True, check=True,
                         env=dict(os.environ, JITFIT_CACHE_DIR="/tmp/jitfit-bench-read/cache"))
    return json.loads(out.stdout)["timing_ms"]["read"] / 1e3


def numpy_read(path):
    t = time.perf_counter()
    np.loadtxt(path, delimiter=",", skiprows=1)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jitfit", required=True)
    ap.add_argument("--rows", type=float, default=1e6)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    d = "/tmp/jitfit-bench-read"
    os.makedirs(d, exist_ok=True)
    n = int(a.rows)
    files = [(f"{d}/g15_{n}.csv", n, lambda x, y: "%.15g,%.15g\n" % (x, y), "%.15g"),
             (f"{d}/repr_{2 * n}.csv", 2 * n, lambda x, y: "%r,%r\n" % (x, y), "repr")]
    print("| file | rows | MB | jitfit read, s | np.loadtxt, s | loadtxt / jitfit |")
    print("|---|---|---|---|---|---|")
    for path, rows, fmt, name in files:
        write(path, rows, fmt)
        jitfit_read(a.jitfit, path)  # the kernel cache and the page cache warm
        tj, tn = [], []
        for _ in range(a.reps):
            tj.append(jitfit_read(a.jitfit, path))
            tn.append(numpy_read(path))
        mb = os.path.getsize(path) / 1e6
        print(f"| {name} | {rows:.0e} | {mb:.0f} | {min(tj):.3f}–{max(tj):.3f} | "
              f"{min(tn):.3f}–{max(tn):.3f} | {min(tn) / min(tj):.1f}× |")


if __name__ == "__main__":
    main()
