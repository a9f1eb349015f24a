#!/usr/bin/env python3
"""Randomized check of `jitfit fit --group` (batches) against single fits and a scipy loop.

A correctness tool, not a timed benchmark. Each set draws a table of many groups from one of
five model families (line, exponential plus offset, Gaussian peak, logistic, power law) with a
random mix of sigma, bounds (some of which bind), a parameter held by --fix, and a --p0-file
that starts only some of the groups. The groups are of every awkward kind: ordinary ones of
5..40 points, fewer points than fitted parameters, exactly as many, one point, an all-constant
response, every x the same (duplicated x), NaN rows (the set then uses --nan-policy omit; a
second run without it must fail naming the row), and a group whose rows are all NaN. Labels are
numbers (`12`, `-3`, `1.0` next to `1`), and text with commas, quotes and non-ASCII letters; the
rows are shuffled, so no group is contiguous. Each set is fitted with

  batch   `jitfit fit MODEL DATA --group g --json --output OUT.csv` (and the text report)
  single  `jitfit fit MODEL ROWS.csv --json` of each group's rows alone (no --group), with the
          group's start as --p0
  scipy   least_squares per group (methods lm/trf without bounds, trf with them; the lower
          cost counts), same start and tolerances; held parameters left out of the vector

and checked:

  same    each group's batch JSON equals its single fit's in every number (parameters, standard
          errors, covariance, cost, SSR, R², nfev, iterations, status): bit for bit, compared as
          the shortest round-trip text jitfit prints; a group the single fit refuses (too few
          rows) must be an error row of the batch with the same reason
  order   the JSON array and the text table list the groups in order of first appearance (the
          all-NaN group after them); --output has one row per kept data row, in file order, each
          with its own label and its own group's fit, and reads back to the data exactly
  ref     at jitfit's parameters, numpy recomputes SSR, χ², R², dof and the standard errors
          (s²(JᵀWJ)⁻¹) from the analytic Jacobian: relative 1e-7
  scipy   when both converge: jitfit's cost within 1e-6 relative of scipy's best (or below it)
          — a higher one is listed as 'worse'; status disagreements are listed
  sane    1 <= iterations <= nfev + 1, success iff status 1..4, rows_dropped per group
  p0      a --p0-file that names a group the data lack is an error naming the file's line

Usage: /usr/bin/python3 bench/batch_vs_scipy.py [--sets 8] [--seed 1] [--groups 30]
           [--jitfit build/jitfit] [--emulate-gpu] [--keep DIR]
--emulate-gpu also fits each batch with JITFIT_CUDA_EMULATE=1 --device gpu and compares it
with the CPU batch (statuses equal, numbers to 1e-10 relative, see max_rel_diff for the
scales; two converged stops of a constant group that both pass through every point count as
the same answer, listed as notes); keep --groups small, the emulator is slow. -v prints the
notes (the error texts of refused groups beside the single fit's, scipy disagreements).
Exit status 1 when a check failed.

Legitimate differences, not failures: a group with no more points than fitted parameters is
an error row (jitfit needs dof > 0; curve_fit's lm accepts n = p and returns an infinite
covariance); the batch's message for it comes from the library ("3 data points for 3
parameters") where a single fit's comes from the reader ("3 data rows ..."); a label that
starts with '#' must be quoted in the data and the --p0-file (an unquoted one is a comment
line: its rows are not read).
"""
import argparse
import csv
import json
import math
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
from scipy.optimize import least_squares

REF_TOL = 1e-7
GPU_TOL = 1e-10


def fam_line():
    def f(x, a, b):
        return a * x + b

    def jac(x, a, b):
        return np.stack([x, np.ones_like(x)], axis=1)

    def truth(rng):
        return [rng.uniform(-3, 3), rng.uniform(-2, 2)]
    return dict(text="a*x+b", f=f, jac=jac, names=["a", "b"], truth=truth, x=(-5, 5),
                p0=[1.0, 0.0], bounds={"a": (-2.0, 10.0)}, fix="b")


def fam_exp():
    def f(x, a, b, c):
        return a * np.exp(-b * x) + c

    def jac(x, a, b, c):
        e = np.exp(-b * x)
        return np.stack([e, -a * x * e, np.ones_like(x)], axis=1)

    def truth(rng):
        return [rng.uniform(1, 5), rng.uniform(0.3, 2), rng.uniform(-1, 1)]
    return dict(text="a*exp(-b*x)+c", f=f, jac=jac, names=["a", "b", "c"], truth=truth,
                x=(0, 5), p0=[2.0, 1.0, 0.0], bounds={"b": (0.0, 1.5), "a": (0.0, math.inf)},
                fix="c")


def fam_gauss():
    def f(x, a, m, w):
        return a * np.exp(-(x - m)**2 / (2 * w**2))

    def jac(x, a, m, w):
        e = np.exp(-(x - m)**2 / (2 * w**2))
        return np.stack([e, a * e * (x - m) / w**2, a * e * (x - m)**2 / w**3], axis=1)

    def truth(rng):
        return [rng.uniform(1, 5), rng.uniform(-2, 2), rng.uniform(0.6, 2)]
    return dict(text="a*exp(-(x-m)^2/(2*w^2))", f=f, jac=jac, names=["a", "m", "w"],
                truth=truth, x=(-5, 5), p0=[2.0, 0.0, 1.0],
                bounds={"w": (0.1, 1.5), "a": (0.0, 8.0)}, fix="w")


def fam_logistic():
    def f(x, L, k, x0):
        return L / (1 + np.exp(-k * (x - x0)))

    def jac(x, L, k, x0):
        q = np.exp(-k * (x - x0))
        d = (1 + q)**2
        return np.stack([1 / (1 + q), L * q * (x - x0) / d, -L * q * k / d], axis=1)

    def truth(rng):
        return [rng.uniform(1, 5), rng.uniform(0.5, 3), rng.uniform(-2, 2)]
    return dict(text="L/(1+exp(-k*(x-x0)))", f=f, jac=jac, names=["L", "k", "x0"],
                truth=truth, x=(-5, 5), p0=[2.0, 1.0, 0.0],
                bounds={"k": (0.0, 2.0)}, fix="L")


def fam_power():
    def f(x, a, b):
        return a * x**b

    def jac(x, a, b):
        return np.stack([x**b, a * x**b * np.log(x)], axis=1)

    def truth(rng):
        return [rng.uniform(1, 3), rng.uniform(-1.5, 1.5)]
    return dict(text="a*x^b", f=f, jac=jac, names=["a", "b"], truth=truth, x=(0.5, 5),
                p0=[1.0, 0.5], bounds={"b": (-1.0, 1.0)}, fix="a")


FAMILIES = [fam_line, fam_exp, fam_gauss, fam_logistic, fam_power]

# Labels of every kind the reader and writer must keep apart and round-trip.
SPECIAL_LABELS = ["12", "-3", "1", "1.0", "0.5e1", "a,b", 'say "hi"', "café ü", "x;y",
                  "#notcomment", "tab\there", "日本"]


def fmt(v):
    return repr(float(v))


class Checker:
    def __init__(self):
        self.fails = []
        self.notes = []
        self.counts = {}

    def count(self, key):
        self.counts[key] = self.counts.get(key, 0) + 1

    def fail(self, where, msg):
        self.fails.append(f"{where}: {msg}")

    def note(self, where, msg):
        self.notes.append(f"{where}: {msg}")


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, env=env)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def make_set(rng, fam, ngroups, sigma, nan):
    """Rows [(label, x, y, s)], per-group truth, the kinds of the groups."""
    p = len(fam["names"])
    kinds = ["few", "exact", "one", "const", "dupx"]
    if nan:
        kinds.append("allnan")
    kinds += ["normal"] * max(ngroups - len(kinds), 0)
    rng.shuffle(kinds)
    labels = list(SPECIAL_LABELS)
    rng.shuffle(labels)
    groups = []
    for k, kind in enumerate(kinds):
        label = labels[k] if k < len(labels) else f"g{k}" if k % 3 else str(rng.integers(-99, 1000))
        while label in [g["label"] for g in groups]:
            label += "_"
        n = {"few": int(rng.integers(1, p)), "exact": p, "one": 1}.get(kind, int(rng.integers(5, 41)))
        lo, hi = fam["x"]
        x = np.sort(rng.uniform(lo, hi, n))
        if kind == "dupx":
            x = np.full(n, x[0])
        truth = fam["truth"](rng)
        y = fam["f"](x, *truth)
        y = y + 0.05 * max(np.std(y), 0.1) * rng.standard_normal(n)
        if kind == "const":
            y = np.full(n, round(float(rng.uniform(-2, 2)), 3))
        s = rng.uniform(0.5, 2, n) * 0.05 if sigma else None
        rows = [[label, x[i], y[i], s[i] if sigma else None] for i in range(n)]
        if nan and kind == "normal" and rng.random() < 0.4:
            for r in rng.choice(n, size=min(2, n - p - 1), replace=False) if n > p + 3 else []:
                rows[r][2 if rng.random() < 0.5 else 1] = math.nan
        if kind == "allnan":
            for r in rows:
                r[2] = math.nan
        groups.append(dict(label=label, kind=kind, truth=truth, rows=rows))
    rows = [r for g in groups for r in g["rows"]]
    # shuffle keeping each group's first rows early enough that order of appearance is random
    order = rng.permutation(len(rows))
    rows = [rows[i] for i in order]
    return rows, groups


def csv_field(text):
    """RFC 4180 quoting, and a quoted '#' at the start of a line: jitfit's reader takes a line
    whose first character is '#' for a comment (docs/CLI.md), which pandas' to_csv does not
    know; blanks at either end are quoted too, as the reader trims bare ones."""
    if any(c in text for c in ',"\r\n') or text[:1] in ("#", " ", "\t") or text[-1:] in (" ", "\t"):
        return '"' + text.replace('"', '""') + '"'
    return text


def write_table(path, rows, sigma, nanword):
    with open(path, "w") as fh:
        fh.write("g,x,y" + (",s" if sigma else "") + "\n")
        for r in rows:
            out = [csv_field(r[0])]
            for v in r[1:3] + ([r[3]] if sigma else []):
                out.append(nanword if isinstance(v, float) and math.isnan(v) else fmt(v))
            fh.write(",".join(out) + "\n")


def scipy_fit(fam, x, y, s, p0, lo, hi, free):
    """Best of lm/trf (trf only with bounds) from p0; returns (params, cost, ok) or None."""
    names = fam["names"]
    full0 = np.array(p0, float)
    fi = [k for k in range(len(names)) if free[k]]
    w = 1 / s if s is not None else np.ones_like(y)

    def expand(q):
        v = full0.copy()
        v[fi] = q
        return v

    def fun(q):
        return (fam["f"](x, *expand(q)) - y) * w

    def jac(q):
        return fam["jac"](x, *expand(q))[:, fi] * w[:, None]

    bounded = any(np.isfinite(lo[k]) or np.isfinite(hi[k]) for k in fi)
    best = None
    for method in (["trf"] if bounded else ["lm", "trf"]):
        if len(x) < len(fi) and method == "lm":
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = least_squares(fun, full0[fi], jac=jac, method=method,
                                  bounds=([lo[k] for k in fi], [hi[k] for k in fi]) if bounded
                                  else (-np.inf, np.inf), x_scale="jac",
                                  max_nfev=100 * len(fi) if method != "lm" else None)
        except Exception:
            continue
        if not np.isfinite(r.cost):
            continue
        if best is None or r.cost < best[1]:
            best = (expand(r.x), r.cost, r.status > 0)
    return best


def reference_stats(fam, x, y, s, params, free):
    """SSR, R², dof and standard errors at params, from the analytic Jacobian."""
    w = 1 / s if s is not None else np.ones_like(y)
    f = fam["f"](x, *params)
    r = (f - y) * w
    ssr = float(r @ r)
    J = fam["jac"](x, *params)[:, [k for k in range(len(free)) if free[k]]] * w[:, None]
    dof = len(x) - sum(free)
    sst = float(((y - y.mean())**2).sum())
    r2 = 1 - float(((f - y)**2).sum()) / sst if np.ptp(y) > 0 else None
    se = None
    # (JᵀJ)⁻¹ from the SVD of J with unit columns: accurate to cond(J)·eps, not cond²
    norms = np.linalg.norm(J, axis=0)
    if np.any(norms == 0):
        return ssr, r2, dof, None
    u, sv, vt = np.linalg.svd(J / norms, full_matrices=False)
    if sv[-1] < 1e-10 * sv[0]:  # jitfit's errors are then inf (docs/SOLVER.md)
        return ssr, r2, dof, None
    cov = (vt.T / sv**2) @ vt / np.outer(norms, norms) * (ssr / dof if dof > 0 else math.inf)
    se = np.sqrt(np.diag(cov))
    return ssr, r2, dof, se


def rel(a, b):
    if a is None or b is None:
        return 0.0 if a is b else math.inf
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(a), abs(b), 1e-300)


NUMERIC_KEYS = ["status", "success", "cost", "ssr", "chi2", "reduced_chi2", "r_squared", "dof",
                "nfev", "iterations", "n", "optimality", "covariance", "correlation", "message",
                "warning", "rows_dropped"]


def compare_fit(a, b):
    """Names of the keys where two fit objects' numbers differ (text of the shortest digits)."""
    diff = [k for k in NUMERIC_KEYS if json.dumps(a.get(k)) != json.dumps(b.get(k))]
    for pa, pb in zip(a.get("params", []), b.get("params", [])):
        for k in ("value", "stderr", "initial", "at_bound", "fixed"):
            if json.dumps(pa.get(k)) != json.dumps(pb.get(k)):
                diff.append(f"{pa['name']}.{k}")
    return diff


def max_rel_diff(a, b):
    """Largest relative difference between the numbers of two fit objects. A parameter's value
    is compared relative to max(|value|, its standard error, 1e-6 × the largest |parameter|):
    a slope that is 0 in the data (a constant group) ends at 1e-17 or 3e-17, both rounding
    noise around the same answer. A cost (SSR) is compared relative to max(cost, 1e-28·n).
    Two converged fits that both pass through every point (SSR below 1e-28·n: a constant
    group) are the same answer whatever their parameters and (rounding-noise) errors."""
    big = max([abs(q["value"]) for q in a["params"]] + [0.0])
    exact = a["ssr"] < 1e-28 * a["n"] and b["ssr"] < 1e-28 * b["n"]
    if exact and a["success"] and b["success"]:
        # both pass through every point of a constant group, which a logistic or a peak does
        # along a whole valley (w -> inf): where they stop on it is rounding, not an answer
        return 0.0
    m = 0.0
    for k in ("cost", "ssr", "chi2"):
        if isinstance(a.get(k), (int, float)) and isinstance(b.get(k), (int, float)):
            d = abs(a[k] - b[k])
            m = max(m, d / max(abs(a[k]), abs(b[k]), 1e-28 * a["n"]) if d else 0.0)
    if isinstance(a.get("r_squared"), float) and isinstance(b.get("r_squared"), float):
        m = max(m, abs(a["r_squared"] - b["r_squared"]))
    for pa, pb in zip(a["params"], b["params"]):
        d = abs(pa["value"] - pb["value"])
        scale = max(abs(pa["value"]), abs(pb["value"]), pa["stderr"] or 0.0, 1e-6 * big)
        m = max(m, d / scale if d else 0.0)
        if pa["stderr"] is not None and pb["stderr"] is not None:
            m = max(m, rel(pa["stderr"], pb["stderr"]))
    return m


def check_set(args, seed, ck, tmp):
    rng = np.random.default_rng(seed)
    fam = FAMILIES[seed % len(FAMILIES)]()
    names = fam["names"]
    p = len(names)
    sigma = bool(rng.random() < 0.5)
    bounds = bool(rng.random() < 0.5)
    fix = bool(rng.random() < 0.3)
    nan = bool(rng.random() < 0.5)
    use_p0file = bool(rng.random() < 0.7)
    where = f"set {seed} ({fam['text']}{', sigma' if sigma else ''}{', bounds' if bounds else ''}" \
            f"{', fix ' + fam['fix'] if fix else ''}{', nan' if nan else ''}" \
            f"{', p0-file' if use_p0file else ''})"
    rows, groups = make_set(rng, fam, args.groups, sigma, nan)
    d = os.path.join(tmp, f"set{seed}")
    os.makedirs(d, exist_ok=True)
    data = os.path.join(d, "data.csv")
    write_table(data, rows, sigma, ["nan", "NA", ""][seed % 3])
    lo = [-math.inf] * p
    hi = [math.inf] * p
    opts = ["--p0", ",".join(f"{n}={fmt(v)}" for n, v in zip(names, fam["p0"]))]
    if bounds:
        for n, (l, h) in fam["bounds"].items():
            lo[names.index(n)], hi[names.index(n)] = l, h
        opts += ["--bounds", ",".join(f"{n}={'' if math.isinf(l) else fmt(l)}:"
                                      f"{'' if math.isinf(h) else fmt(h)}"
                                      for n, (l, h) in fam["bounds"].items())]
    free = [True] * p
    if fix:
        free[names.index(fam["fix"])] = False
        opts += ["--fix", fam["fix"]]
    if sigma:
        opts += ["--sigma", "s"]
    if nan:
        opts += ["--nan-policy", "omit"]
    # per-group starts: the shared one, or from the file for about half of the groups
    starts = {g["label"]: list(fam["p0"]) for g in groups}
    if use_p0file:
        p0file = os.path.join(d, "p0.csv")
        cols = [n for n in names if rng.random() < 0.7] or names[:1]
        with open(p0file, "w") as fh:
            fh.write(",".join(["g"] + cols) + "\n")
            for g in groups:
                if rng.random() < 0.5:
                    continue
                st = starts[g["label"]]
                for n in cols:
                    k = names.index(n)
                    v = g["truth"][k] * rng.uniform(0.8, 1.2)
                    v = min(max(v, lo[k]), hi[k])
                    st[k] = v
                fh.write(",".join([csv_field(g["label"])] + [fmt(st[names.index(n)]) for n in cols])
                         + "\n")
        opts += ["--p0-file", p0file]
        # a file that names a group the data lack is an error naming it
        bad = os.path.join(d, "p0bad.csv")
        with open(bad, "w") as fh:
            fh.write(f"g,{names[0]}\nno such group,1\n")
        rc, out, err = run([args.jitfit, "fit", fam["text"], data, "--group", "g"] +
                           [o if o != p0file else bad for o in opts])
        ck.count("p0 bad file")
        if rc != 1 or "p0bad.csv:2: group 'no such group' is not in the data" not in err:
            ck.fail(where, f"--p0-file naming a missing group: rc {rc}, {err.strip()[:200]}")

    out_csv = os.path.join(d, "out.csv")
    base = [args.jitfit, "fit", fam["text"], data, "--group", "g"] + opts
    rc, out, err = run(base + ["--json", "--output", out_csv])
    try:
        batch = json.loads(out)
    except ValueError:
        ck.fail(where, f"batch JSON does not parse (rc {rc}): {err.strip()[:300]}")
        return
    rc_text, text, _ = run(base)
    if rc != rc_text:
        ck.fail(where, f"exit status {rc} with --json, {rc_text} without")

    kept = {g["label"]: [r for r in g["rows"] if not any(
        isinstance(v, float) and math.isnan(v) for v in r[1:3])] for g in groups}
    # order of first appearance of a kept row (rows --nan-policy omit drops do not count, as
    # for pandas' groupby(sort=False) after dropna); a group whose rows were all dropped last
    order = []
    for r in rows:
        if r[0] not in order and not any(isinstance(v, float) and math.isnan(v) for v in r[1:3]):
            order.append(r[0])
    order += [g["label"] for g in groups if not kept[g["label"]]]
    got = [o.get("group") for o in batch]
    ck.count("order")
    if got != order:
        ck.fail(where, f"JSON group order {got[:6]}... expected {order[:6]}...")
    pos = 0
    for lab in order:
        shown = lab.replace("\t", "?")  # control bytes are shown as '?' on a terminal
        at = text.find("  " + shown, pos)
        if at < 0:
            ck.fail(where, f"text report: group {lab!r} missing or out of order")
            break
        pos = at + 1
    any_fail = any(not o.get("success") for o in batch)
    if (rc == 1) != any_fail or rc not in (0, 1):
        ck.fail(where, f"exit status {rc} with {'a' if any_fail else 'no'} failed group")

    # nan rows without omit: the whole command fails naming a row
    if nan:
        rc2, _, err2 = run([o for o in base if o not in ("--nan-policy", "omit")])
        ck.count("nan raise")
        if rc2 != 1 or "data.csv:" not in err2:
            ck.fail(where, f"NaN rows without omit: rc {rc2} {err2.strip()[:200]}")

    byname = {o["group"]: o for o in batch}
    # each group's rows alone, as a single fit
    for g in groups:
        lab = g["label"]
        obj = byname.get(lab)
        if obj is None:
            ck.fail(where, f"group {lab!r} missing from the JSON")
            continue
        kr = [r for r in rows if r[0] == lab and not any(
            isinstance(v, float) and math.isnan(v) for v in r[1:3])]
        x = np.array([r[1] for r in kr])
        y = np.array([r[2] for r in kr])
        s = np.array([r[3] for r in kr]) if sigma else None
        single_data = os.path.join(d, "one.csv")
        # the group's rows in the order the batch file has them
        write_table(single_data, [r for r in rows if r[0] == lab], sigma, "nan")
        sopts = [o for o in opts]
        i = sopts.index("--p0")
        sopts[i + 1] = ",".join(f"{n}={fmt(v)}" for n, v in zip(names, starts[lab]))
        if "--p0-file" in sopts:
            j = sopts.index("--p0-file")
            del sopts[j:j + 2]
        rc1, out1, err1 = run([args.jitfit, "fit", fam["text"], single_data, "--json"] + sopts)
        ck.count("same")
        try:
            one = json.loads(out1)
        except ValueError:
            one = None
        if not kr:
            if obj.get("success") is not False or "dropped every row" not in obj.get("error", ""):
                ck.fail(where, f"group {lab!r} (all NaN): {json.dumps(obj)[:200]}")
            continue
        if one is None or "error" in one:
            e1 = (one or {}).get("error", err1.strip())
            if "error" not in obj:
                ck.fail(where, f"group {lab!r} ({g['kind']}, {len(kr)} rows): single fit "
                               f"refused ({e1[:120]}) but the batch fitted it")
            elif obj["error"].split(":")[-1].strip()[:40] not in e1:
                ck.note(where, f"group {lab!r}: batch error {obj['error']!r}, single {e1!r}")
            continue
        if "error" in obj:
            ck.fail(where, f"group {lab!r} ({g['kind']}): batch error {obj['error']!r} but the "
                           "single fit ran")
            continue
        diff = compare_fit(obj, one)
        if diff:
            ck.fail(where, f"group {lab!r} ({g['kind']}, {len(kr)} rows): batch != single in "
                           f"{diff[:6]} (max rel {max_rel_diff(obj, one):.3g})")
        # sanity of the counters and the status
        ck.count("sane")
        if obj["success"] != (1 <= obj["status"] <= 4) or obj["iterations"] > obj["nfev"] + 1 \
                or obj["nfev"] < 1:
            ck.fail(where, f"group {lab!r}: status {obj['status']} success {obj['success']} "
                           f"nfev {obj['nfev']} iterations {obj['iterations']}")
        if obj.get("rows_dropped") != len(g["rows"]) - len(kr):
            ck.fail(where, f"group {lab!r}: rows_dropped {obj.get('rows_dropped')} expected "
                           f"{len(g['rows']) - len(kr)}")
        params = np.array([q["value"] for q in obj["params"]])
        # statistics recomputed at jitfit's own parameters
        ssr, r2, dof, se = reference_stats(fam, x, y, s, params, free)
        ck.count("ref")
        bad = []
        if rel(ssr, obj["ssr"]) > REF_TOL and abs(ssr - obj["ssr"]) > 1e-20:
            bad.append(f"ssr {obj['ssr']} vs {ssr}")
        if obj["dof"] != dof:
            bad.append(f"dof {obj['dof']} vs {dof}")
        if r2 is None and obj["r_squared"] is not None or r2 is not None and \
                (obj["r_squared"] is None or abs(r2 - obj["r_squared"]) > REF_TOL * max(1, abs(r2))):
            bad.append(f"r2 {obj['r_squared']} vs {r2}")
        if sigma and rel(obj["chi2"], ssr) > REF_TOL and abs(ssr - obj["chi2"]) > 1e-20:
            bad.append(f"chi2 {obj['chi2']} vs {ssr}")
        if se is not None and np.all(np.isfinite(se)) and ssr > 1e-20 * len(x):
            fse = [q["stderr"] for q, fr in zip(obj["params"], free) if fr]
            for k, (a, b) in enumerate(zip(fse, se)):
                if a is None or rel(a, b) > 1e-5:
                    bad.append(f"stderr[{k}] {a} vs {b}")
        if bad:
            ck.fail(where, f"group {lab!r} ({g['kind']}): statistics: {'; '.join(bad)}")
        # scipy from the same start
        sp = scipy_fit(fam, x, y, s, starts[lab], lo, hi, free)
        ck.count("scipy")
        if sp is None:
            ck.note(where, f"group {lab!r} ({g['kind']}): scipy failed, jitfit status "
                           f"{obj['status_name']}")
            continue
        sp_p, sp_cost, sp_ok = sp
        if obj["success"] and sp_ok:
            if obj["cost"] > sp_cost * (1 + 1e-6) + 1e-14:
                ck.note(where, f"group {lab!r} ({g['kind']}): worse: cost {obj['cost']:.10g} "
                               f"vs scipy {sp_cost:.10g}")
                ck.count("worse")
        elif obj["success"] != sp_ok:
            ck.note(where, f"group {lab!r} ({g['kind']}): jitfit {obj['status_name']} "
                           f"(cost {obj['cost']:.6g}), scipy {'ok' if sp_ok else 'failed'} "
                           f"(cost {sp_cost:.6g})")
            ck.count("status differs")

    # --output: one row per kept row, in file order, each with its own group's fit
    ck.count("output")
    with open(out_csv, newline="") as fh:
        rd = list(csv.reader(fh))
    head = rd[0]
    want = ["g", "x", "y"] + (["s"] if sigma else []) + ["fit", "residual", "fit_stderr"]
    if head != want:
        ck.fail(where, f"--output header {head}")
        return
    krows = [r for r in rows if not any(isinstance(v, float) and math.isnan(v) for v in r[1:3])]
    if len(rd) - 1 != len(krows):
        ck.fail(where, f"--output has {len(rd) - 1} rows for {len(krows)} kept")
        return
    for i, (o, r) in enumerate(zip(rd[1:], krows)):
        if o[0] != r[0] or float(o[1]) != r[1] or float(o[2]) != r[2]:
            ck.fail(where, f"--output row {i + 1}: {o[:3]} != {r[:3]}")
            break
        obj = byname[r[0]]
        if "params" not in obj:
            if o[-3] not in ("nan", "NaN", ""):
                ck.fail(where, f"--output row {i + 1}: fit {o[-3]} for a group with no fit")
                break
            continue
        fv = fam["f"](np.array([r[1]]), *[q["value"] for q in obj["params"]])[0]
        if abs(float(o[-3]) - fv) > 1e-12 * max(1, abs(fv)):
            ck.fail(where, f"--output row {i + 1}: fit {o[-3]} vs {fv} of group {r[0]!r}")
            break

    if args.emulate_gpu:
        env = dict(os.environ, JITFIT_CUDA_EMULATE="1")
        rcg, outg, errg = run(base + ["--json", "--device", "gpu"], env=env)
        ck.count("gpu")
        try:
            gb = {o["group"]: o for o in json.loads(outg)}
        except ValueError:
            ck.fail(where, f"GPU batch JSON does not parse (rc {rcg}): {errg.strip()[:300]}")
            return
        if rcg != rc:
            ck.fail(where, f"GPU batch exit status {rcg}, CPU {rc}")
        worst = 0.0
        kinds = {g["label"]: g["kind"] for g in groups}
        for lab, o in byname.items():
            og = gb.get(lab)
            if og is None or ("error" in o) != ("error" in og):
                ck.fail(where, f"GPU group {lab!r}: {json.dumps(og)[:160]} vs CPU "
                               f"{json.dumps(o)[:160]}")
                continue
            if "error" in o:
                continue
            m = max_rel_diff(o, og)
            if og["status"] != o["status"]:
                # two converged stops of a degenerate fit (a constant group: every test is met
                # at once, and rounding decides which is seen first) are the same answer
                if o["success"] and og["success"] and m <= GPU_TOL:
                    ck.note(where, f"GPU group {lab!r} ({kinds[lab]}): status "
                                   f"{og['status_name']} vs CPU {o['status_name']}, same answer")
                    ck.count("gpu status differs, both converged")
                else:
                    ck.fail(where, f"GPU group {lab!r}: status {og['status_name']} vs CPU "
                                   f"{o['status_name']}")
            worst = max(worst, m)
            if m > GPU_TOL and not (o["success"] is False and og["success"] is False):
                ck.fail(where, f"GPU group {lab!r}: max rel diff {m:.3g} from the CPU")
        ck.note(where, f"GPU vs CPU: {len(byname)} groups, worst rel diff {worst:.3g}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--groups", type=int, default=30)
    ap.add_argument("--jitfit", default="build/jitfit")
    ap.add_argument("--emulate-gpu", action="store_true")
    ap.add_argument("--keep", help="write the data sets under this directory")
    ap.add_argument("-v", "--verbose", action="store_true", help="print the notes")
    args = ap.parse_args()
    ck = Checker()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or tmp
        for k in range(args.sets):
            check_set(args, args.seed + k, ck, root)
    print("checks:", ", ".join(f"{k} {v}" for k, v in sorted(ck.counts.items())))
    if args.verbose:
        for n in ck.notes:
            print("note:", n)
    for f in ck.fails:
        print("FAIL:", f)
    print(f"{len(ck.fails)} failures, {len(ck.notes)} notes")
    return 1 if ck.fails else 0


if __name__ == "__main__":
    sys.exit(main())
