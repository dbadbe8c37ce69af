#!/usr/bin/env python3
"""Read the traces of tools/experiments/record_pp_calibration.sh for what docs/CALIBRATION.md says about
PyTorch's schedules beyond the calibration (nothing here feeds ppsim):

  pp_trace_clock.py actions TMIN_MS TRACE...   each action's kernel time against the median of its kind
      (F, B, I, W, ...) in time order, and a least-squares line through those ratios against the
      action's start for actions from TMIN_MS on: % per 100 ms, +- its standard error
  pp_trace_clock.py diff TRACE_A TRACE_B       kernel time by kernel name, B minus A (ms), largest first
  pp_trace_clock.py beside REF TRACE...        each compute kernel of 0.1 ms or more against its median in REF
      (by name and grid, kernels clear of NCCL; REF: the calibration trace): the clock level of the
      kernels clear of NCCL (their time over REF's medians), and the p2p share of those beside an
      NCCL kernel (their time beyond that level over the time NCCL sat beside them), per trace and,
      with -k, per kernel
  pp_trace_clock.py spans DIR...               per schedule: the profiled step's span (first to last
      kernel of both ranks) against rank 0's timed steps (pp_runs.json), and each timed step

A kernel belongs to the action (a CPU range `Forward i`, `Backward i` or `PP:...`) during which its
launch (runtime or driver call) was made; NCCL kernels are left out.
"""
import bisect
import collections
import gzip
import json
import math
import re
import statistics
import sys


def events(path):
    with gzip.open(path) as f:
        return json.load(f)["traceEvents"]


def actions(path):
    ev = events(path)
    rngs = sorted((e for e in ev if e.get("cat") == "user_annotation" and
                   re.match(r"(Forward|Backward) \d+$|PP:", e["name"])), key=lambda e: e["ts"])
    launch = {e["args"]["correlation"]: e for e in ev
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    t0 = min(e["ts"] for e in kernels)
    acts = {id(r): [r["name"], float("inf"), 0.0] for r in rngs}
    for k in kernels:
        r = launch.get(k["args"]["correlation"])
        if r is None or "nccl" in k["name"].lower():
            continue
        for a in rngs:
            if a["ts"] <= r["ts"] <= a["ts"] + a["dur"]:
                x = acts[id(a)]
                x[1] = min(x[1], k["ts"] - t0)
                x[2] += k["dur"]
                break
    kind = lambda n: n.split()[0] if not n.startswith("PP:") else re.sub(r"\d+", "", n)
    return [(kind(n), t / 1e3, busy / 1e3) for n, t, busy in acts.values() if busy > 1000]


def cmd_actions(tmin, paths):
    for p in paths:
        a = actions(p)
        med = {k: statistics.median(b for n, _, b in a if n == k) for k in {n for n, _, _ in a}}
        pts = sorted((t, b / med[n], n) for n, t, b in a)
        use = [(t, r) for t, r, _ in pts if t >= tmin]
        mt = sum(t for t, _ in use) / len(use)
        mr = sum(r for _, r in use) / len(use)
        sxx = sum((t - mt) ** 2 for t, _ in use)
        slope = sum((t - mt) * (r - mr) for t, r in use) / sxx
        res = sum((r - mr - slope * (t - mt)) ** 2 for t, r in use)
        se = (res / (len(use) - 2) / sxx) ** 0.5
        print(f"{p}: {slope * 1e4:+.2f} +- {se * 1e4:.2f} % per 100 ms from {tmin:g} ms ({len(use)} actions)")
        print("  " + " ".join(f"{n[0]}@{t:.0f}:{r:.3f}" for t, r, n in pts))


def cmd_diff(a_path, b_path):
    def by_name(p):
        c = collections.defaultdict(lambda: [0.0, 0])
        for e in events(p):
            if e.get("cat") == "kernel" and "nccl" not in e["name"].lower():
                c[e["name"][:90]][0] += e["dur"] / 1e3
                c[e["name"][:90]][1] += 1
        return c
    a, b = by_name(a_path), by_name(b_path)
    rows = sorted(((b[k][0] - a[k][0], k) for k in set(a) | set(b)), key=lambda r: -abs(r[0]))
    print(f"kernel ms: A {sum(v[0] for v in a.values()):.1f}, B {sum(v[0] for v in b.values()):.1f}")
    for d, k in rows[:20]:
        print(f"{d:+8.2f}  A {a[k][0]:7.2f} ({a[k][1]:4d})  B {b[k][0]:7.2f} ({b[k][1]:4d})  {k}")


def kernels_beside_nccl(path):
    """(name and grid, duration us, time an NCCL kernel ran beside it us) per compute kernel; NCCL's total."""
    ks = [e for e in events(path) if e.get("cat") == "kernel"]
    nccl = sorted((e["ts"], e["ts"] + e["dur"]) for e in ks if "nccl" in e["name"].lower())
    out = []
    for e in ks:
        if "nccl" in e["name"].lower():
            continue
        s, f = e["ts"], e["ts"] + e["dur"]
        lo = bisect.bisect_left(nccl, (s - 5e5,))  # no NCCL kernel here lasts 0.5 s
        side = sum(max(0.0, min(f, b) - max(s, a)) for a, b in nccl[lo:bisect.bisect_right(nccl, (f, math.inf))])
        out.append(((e["name"], str(e["args"].get("grid"))), e["dur"], side))
    return out, sum(b - a for a, b in nccl)


def cmd_beside(ref_path, paths, per_kernel):
    ref = collections.defaultdict(list)
    for k, d, side in kernels_beside_nccl(ref_path)[0]:
        if side == 0:
            ref[k].append(d)
    med = {k: statistics.median(v) for k, v in ref.items() if len(v) >= 8 and statistics.median(v) >= 100}
    for p in paths:
        ks, nccl = kernels_beside_nccl(p)
        clear = [(d, med[k]) for k, d, side in ks if side == 0 and k in med]
        level = sum(d for d, _ in clear) / max(sum(m for _, m in clear), 1e-9)
        by = collections.defaultdict(lambda: [0.0, 0.0, 0])
        for k, d, side in ks:
            if side > 0 and k in med:
                x = by[k]
                x[0] += d - med[k] * level
                x[1] += side
                x[2] += 1
        extra, side = sum(x[0] for x in by.values()), sum(x[1] for x in by.values())
        share = f"p2p share {extra / side:.3f} ({extra / 1e3:.1f} ms)" if side >= 1e4 else "under 10 ms: no share"
        print(f"{p}: clock level {level:.3f} ({sum(m for _, m in clear) / 1e3:.0f} ms of REF's kernels clear of NCCL); "
              f"NCCL {nccl / 1e3:.0f} ms, beside it {side / 1e3:.0f} ms of compute: {share}")
        if per_kernel:
            for k, x in sorted(by.items(), key=lambda kv: -kv[1][1])[:12]:
                print(f"  {x[0] / x[1]:6.3f} on {x[1] / 1e3:6.1f} ms ({x[2]:3d})  median {med[k] / 1e3:.3f} ms  {k[0][:70]} {k[1]}")


def cmd_spans(dirs):
    for d in dirs:
        runs = json.load(open(f"{d}/pp_runs.json"))["ranks"][0]
        for name, run in runs.items():
            ks = [e for r in (0, 1) for e in events(f"{d}/pp_{name}_rank{r}.json.gz") if e.get("cat") == "kernel"]
            span = (max(e["ts"] + e["dur"] for e in ks) - min(e["ts"] for e in ks)) / 1e3
            steps = " ".join(f"{x:.1f}" for x in run.get("steps_ms", []))
            print(f"{d} {name:22s} profiled {span:7.1f} timed {run['step_ms']:7.1f} ({run['step_ms'] / span - 1:+.2%})"
                  f"  {steps}")


def main(argv):
    if len(argv) >= 3 and argv[0] == "actions":
        cmd_actions(float(argv[1]), argv[2:])
    elif len(argv) == 3 and argv[0] == "diff":
        cmd_diff(argv[1], argv[2])
    elif len(argv) >= 3 and argv[0] == "beside":
        per_kernel = "-k" in argv
        rest = [a for a in argv[1:] if a != "-k"]
        cmd_beside(rest[0], rest[1:], per_kernel)
    elif len(argv) >= 2 and argv[0] == "spans":
        cmd_spans(argv[1:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
