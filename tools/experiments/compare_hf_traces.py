#!/usr/bin/env python3
"""Compare `ppsim import-trace` on the traces of tools/experiments/record_hf_traces.py with their ground truth.

    python3 tools/experiments/compare_hf_traces.py DIR [--ppsim build/ppsim] [--held-out phi3] [--markdown]

DIR holds the traces and meta.json. The ground truth is in each trace: ranges no rule of ppsim
reads (`gt:3:f`: decoder layer 3's first forward, `gt:3:a` its attention module's forward,
`gt:3:r` the layer's forward re-run inside the backward, `gt:3:b` its backward). Each GPU event
goes, through its launch (correlation id), to the ground-truth ranges open on the launching
thread; a layer's F is the kernel time under its `f`, its B under its `b`, its attention forward
under its `a`, per recorded step; the recompute inside B is what was launched under its `r` by a
forward op (non-reentrant checkpointing stops a recompute early and leaves `r` open).

ppsim's figures (`import-trace TRACE --format json`): a layer's F is the sum over its sub-op cells
of pass F of busy time per execution, its B the same over passes I and W, the attention forward
the attention cell of pass F. Prints one row per trace (worst layer errors) and exits 1 when a
layer's F or B is off by more than --tolerance (10%) or an attention forward by more than
--attn-tolerance (15%).
"""
import argparse
import gzip
import json
import os
import re
import subprocess
import sys

GT = re.compile(r"gt:(\d+):(f|a|ar|r|b)")


def truth(path, steps):
    """{layer: {"F", "B", "R", "A"}} in ms per step, from the trace's gt ranges."""
    with gzip.open(path, "rt") as f:
        tr = json.load(f)
    ev = tr["traceEvents"] if isinstance(tr, dict) else tr
    launches, ranges, kernels, fwd_ops = {}, {}, [], {}
    for e in ev:
        if e.get("ph") != "X":
            continue
        cat = str(e.get("cat", "")).lower()
        args = e.get("args") or {}
        if cat in ("cuda_runtime", "cuda_driver", "runtime") and "correlation" in args:
            launches[args["correlation"]] = ((e.get("pid"), e.get("tid")), float(e["ts"]))
        elif cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            kernels.append((args.get("correlation"), float(e.get("dur", 0))))
        elif cat == "cpu_op" and "Sequence number" in args and not args.get("Fwd thread id"):
            t0 = float(e["ts"])  # a forward op (autograd numbers ops only with grad mode on)
            fwd_ops.setdefault((e.get("pid"), e.get("tid")), []).append((t0, t0 + float(e.get("dur", 0))))
        elif cat == "user_annotation":
            m = GT.fullmatch(str(e.get("name", "")))
            if m:
                t0 = float(e["ts"])
                ranges.setdefault((e.get("pid"), e.get("tid")), []).append(
                    (t0, t0 + float(e.get("dur", 0)), int(m.group(1)), m.group(2)))
    out = {}
    for corr, dur in kernels:
        if corr not in launches:
            continue
        th, ts = launches[corr]
        tags = {(r[2], r[3]) for r in ranges.get(th, ()) if r[0] <= ts < r[1]}
        for layer in {t[0] for t in tags}:
            row = out.setdefault(layer, {"F": 0.0, "B": 0.0, "R": 0.0, "A": 0.0})
            if (layer, "f") in tags:
                row["F"] += dur
            if (layer, "a") in tags:
                row["A"] += dur
            # B: from the gradient of the layer's output to that of its input; the recompute inside
            # it: launched under `r` by a forward op (a recompute stopped early leaves `r` open, over
            # the backward proper, whose ops autograd does not number).
            if (layer, "b") in tags:
                row["B"] += dur
                if (layer, "r") in tags and any(a <= ts < b for a, b in fwd_ops.get(th, ())):
                    row["R"] += dur
    return {k: {p: v / steps / 1e3 for p, v in row.items()} for k, row in out.items()}


def imported(ppsim, trace, extra=()):
    p = subprocess.run([ppsim, "import-trace", trace, "--format", "json", *extra], capture_output=True, text=True)
    if p.returncode != 0:
        return None, (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
    j = json.loads(p.stdout)
    per = {}
    for c in j.get("cells", []):
        layer = c.get("layer")
        if layer is None or c.get("executions", 0) <= 0:
            continue
        row = per.setdefault(layer, {"F": 0.0, "B": 0.0, "A": 0.0})
        v = c["busy_ms"] / c["executions"]
        row["F" if c["pass"] == "F" else "B"] += v
        if c["pass"] == "F" and c["subop"] == "attention":
            row["A"] += v
    return per, j


def err(got, want):
    return (got - want) / want if want > 0 else float("inf")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--ppsim", default=os.path.join(os.path.dirname(__file__), "..", "..", "build", "ppsim"))
    ap.add_argument("--tolerance", type=float, default=0.10)
    ap.add_argument("--attn-tolerance", type=float, default=0.15)
    ap.add_argument("--held-out", default="phi3", help="the architecture kept out of the tuning (marked)")
    ap.add_argument("--verbose", action="store_true", help="one row per layer too")
    a = ap.parse_args()
    meta = json.load(open(os.path.join(a.dir, "meta.json")))
    steps = meta["settings"]["steps"]
    print(f"ground truth: {meta['device']}, torch {meta['torch']}, transformers {meta['transformers']}")
    print("| model | checkpointing | way | F (truth) | F error | B (truth) | B error | recompute in B: said (truth) "
          "| attention F (truth) | error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    ok = True
    for model, m in meta["models"].items():
        for fname, case in m["cases"].items():
            path = os.path.join(a.dir, fname)
            gt = truth(path, steps)
            per, j = imported(a.ppsim, path)
            name = model + (" (held out)" if model == a.held_out else "")
            if per is None:
                print(f"| {name} | {case['checkpointing']} | {case['way']} | import failed: {j} |")
                ok = False
                continue
            worst = {"F": 0.0, "B": 0.0, "A": 0.0}
            for layer, t in sorted(gt.items()):
                got = per.get(layer, {"F": 0.0, "B": 0.0, "A": 0.0})
                for k in worst:
                    e = err(got[k], t[k])
                    if abs(e) > abs(worst[k]):
                        worst[k] = e
                if a.verbose:
                    print(f"|   layer {layer} | | | {got['F']:.3f} ({t['F']:.3f}) | {100 * err(got['F'], t['F']):+.1f}% | "
                          f"{got['B']:.3f} ({t['B']:.3f}) | {100 * err(got['B'], t['B']):+.1f}% | R {t['R']:.3f} | "
                          f"{got['A']:.3f} ({t['A']:.3f}) {100 * err(got['A'], t['A']):+.1f}% |")
            passed = abs(worst["F"]) <= a.tolerance and abs(worst["B"]) <= a.tolerance and \
                abs(worst["A"]) <= a.attn_tolerance
            ok &= passed
            mf = sum(t["F"] for t in gt.values()) / max(1, len(gt))
            mb = sum(t["B"] for t in gt.values()) / max(1, len(gt))
            rc = (j.get("recompute", {}) or {}).get("per_layer_ms", 0)
            mr = sum(t["R"] for t in gt.values()) / max(1, len(gt))
            said = (f"{rc:.3f} ms ({mr:.3f})" if rc else f"not said ({mr:.3f})") if mr or rc else "none"
            ma = sum(t["A"] for t in gt.values()) / max(1, len(gt))
            print(f"| {name} | {'on' if case['checkpointing'] else 'off'} | {case['way']} | {mf:.3f} ms | "
                  f"{100 * worst['F']:+.1f}% | {mb:.3f} ms | {100 * worst['B']:+.1f}% | {said} | {ma:.3f} ms | "
                  f"{100 * worst['A']:+.1f}%{'' if passed else ' MISSED'} |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
