#!/usr/bin/env python3
"""Compare `ppsim import-trace` on the traces of tools/experiments/record_hf_traces.py with their ground truth.

    python3 tools/experiments/compare_hf_traces.py DIR [--ppsim build/ppsim] [--tolerance 0.05]

DIR holds the six traces and ground_truth.json. Each trace is imported with the default rules
(`ppsim import-trace TRACE --format json`); a layer's imported F is the sum over its sub-op cells
of pass F of busy time per execution, its B the same over passes I and W (kernel time, as the
ground truth). Prints one row per (model, way, layer) with both figures and the error, and a
summary line per (model, way); exits 1 when any layer is off by more than the tolerance (or has
no imported time), 0 otherwise.
"""
import argparse
import json
import os
import subprocess
import sys


def imported_layers(ppsim, trace):
    p = subprocess.run([ppsim, "import-trace", trace, "--format", "json"], capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
    j = json.loads(p.stdout)
    per = {}
    for c in j.get("cells", []):
        layer = c.get("layer")
        if layer is None or c.get("executions", 0) <= 0:
            continue
        key = "F" if c["pass"] == "F" else "B"
        per.setdefault(layer, {"F": 0.0, "B": 0.0})[key] += c["busy_ms"] / c["executions"]
    extra = {k: j.get(k) for k in ("outside_layers_ms", "unmapped_ms", "unlinked_ms", "layers", "executions")}
    return per, extra


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--ppsim", default=os.path.join(os.path.dirname(__file__), "..", "..", "build", "ppsim"))
    ap.add_argument("--tolerance", type=float, default=0.05)
    a = ap.parse_args()
    truth = json.load(open(os.path.join(a.dir, "ground_truth.json")))
    ok = True
    print(f"ground truth: {truth.get('device')}, torch {truth.get('torch')}, transformers {truth.get('transformers')}")
    print(f"{'model':<8} {'way':<7} {'layer':>5} {'F ms':>8} {'truth':>8} {'err':>8} {'B ms':>8} {'truth':>8} {'err':>8}")
    summary = []
    for model, m in truth["models"].items():
        for way, fname in m["traces"].items():
            per, extra = imported_layers(a.ppsim, os.path.join(a.dir, fname))
            if per is None:
                print(f"{model:<8} {way:<7} import failed: {extra}")
                summary.append(f"{model} {way}: import failed")
                ok = False
                continue
            worst = 0.0
            for row in m["layers"]:
                i = row["layer"]
                got = per.get(i, {"F": 0.0, "B": 0.0})
                errs = []
                for k in ("F", "B"):
                    t = row[f"{k}_ms"]
                    errs.append((got[k] - t) / t if t > 0 else float("inf"))
                worst = max(worst, *(abs(e) for e in errs))
                print(f"{model:<8} {way:<7} {i:>5} {got['F']:>8.4f} {row['F_ms']:>8.4f} {100 * errs[0]:>7.1f}% "
                      f"{got['B']:>8.4f} {row['B_ms']:>8.4f} {100 * errs[1]:>7.1f}%")
            passed = worst <= a.tolerance
            ok &= passed
            summary.append(f"{model} {way}: worst layer error {100 * worst:.1f}% ({'within' if passed else 'NOT within'} "
                           f"{100 * a.tolerance:.0f}%); layers found {extra['layers']}, executions {extra['executions']}, "
                           f"outside layers {extra['outside_layers_ms']:.3f} ms, unmapped {extra['unmapped_ms']:.3f} ms")
    print()
    for s in summary:
        print(s)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
