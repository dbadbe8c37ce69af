#!/usr/bin/env python3
"""Regenerates the results table of docs/FIDELITY.md and the ablation and runtime tables of
docs/FIDELITY-MEASURED.md (between the BEGIN/END markers) from
`ppsim fidelity --format json`, and with --thresholds rewrites tools/fidelity_thresholds.txt
from the current errors (each |error| rounded up, plus 0.5 points, so CI fails on a regression).

Usage: tools/fidelity_table.py [--ppsim build/ppsim] [--thresholds]
Standard library only. The ablation table reruns fidelity with each cost piece switched off
(`--set costs.X=false`, and the like), which measures what each piece does to each run's error.
"""
import argparse
import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "FIDELITY.md")
PIECES_DOC = os.path.join(ROOT, "docs", "FIDELITY-MEASURED.md")
THRESHOLDS = os.path.join(ROOT, "tools", "fidelity_thresholds.txt")
PIECES = [("TP comm", "costs.tp_comm=false"), ("DP comm", "costs.dp_comm=false"),
          ("optimizer step", "costs.optimizer_step=false"), ("head and loss", "parallel.head_on_last=false"),
          ("embedding", "parallel.embedding_on_first=false"), ("node-limited routing", "model.moe.max_nodes=0"),
          ("CP comm", "costs.cp_comm=false"),
          ("attention by shape", "costs.attention_shape=false"),
          ("GEMMs by shape", "costs.gemm_shape=false"),
          ("accumulation exposed", "hardware.efficiency.accum_exposed=0"),
          ("FP8 quantization", "costs.fp8_quant=false"),
          ("FP8 wgrad at the forward's efficiency", "hardware.efficiency.gemm_fp8_wgrad=0.52"),
          ("FP8 GEMMs at the BF16 efficiency", ("hardware.efficiency.gemm_fp8=0.65", "hardware.efficiency.gemm_fp8_wgrad=0.65")),
          # The runs whose software had no sequence parallelism (sequence_parallel: false) run with it.
          ("no sequence parallelism", "parallel.sequence_parallel=true")]
# The Zero Bubble configs (tp = dp = 1, embedding and head alone on their slices, the schedule
# search in each run) are left out of the ablation: no piece but the optimizer step applies.
ABLATION_SKIP = "zero-bubble-"
# Their runtimes instead, measured on the schedule-relative claims (and throughput): Zero Bubble's
# optimizer post-validation (the ZB-1p/2p rows) and Megatron-LM's blocking p2p calls (the 1F1B and
# 1F1B-I rows), each switched off for every row, and the loss as Megatron computes it replaced by
# 6 bytes per logit forward and 12 backward, no all-reduce (costs.megatron_loss=false), and the
# per-node p2p links replaced by the network for every hop (costs.p2p_per_node=false), and the
# weight gradients' FP32 accumulation wholly hidden under the wgrad GEMMs
# (hardware.efficiency.accum_exposed=0).
# And the search cap counting a whole share until its W (costs.w_hold=false).
# And one piece switched on instead: the power-limited clock measured on four H200s
# (hardware.clock.duty_slope=0.5 from duty 0.8; off in every GPU type, docs/FIDELITY-MEASURED.md
# "ZB-H1 against 1F1B on four GPUs").
RUNTIME_PIECES = [("post-validation off", "parallel.post_validation=false"),
                  ("dataflow p2p (Megatron's or DeepSpeed's calls off)", "parallel.p2p_runtime=dataflow"),
                  ("Megatron's loss traffic off", "costs.megatron_loss=false"),
                  ("one link for every hop", "costs.p2p_per_node=false"),
                  ("accumulation exposed off", "hardware.efficiency.accum_exposed=0"),
                  ("search cap: whole shares until W", "costs.w_hold=false"),
                  ("H200's duty-cycle clock on", "hardware.clock.duty_slope=0.5")]
PUBLISHED = os.path.join(ROOT, "configs", "published")


def run_file(ppsim, path, sets=()):
    cmd = [ppsim, "fidelity", path, "--format", "json"]
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None  # the piece cannot be switched off for this config (e.g. a slice left empty)
    return json.loads(p.stdout)["rows"]


def run(ppsim, sets=(), counts=None, skip=None):
    """Rows of every published config; None for the rows of a config that refused the override
    (`counts`: rows per config, from the run without overrides)."""
    rows = []
    names = sorted(n for n in os.listdir(PUBLISHED) if n.endswith(".yaml"))
    for i, name in enumerate(names):
        path = os.path.join(PUBLISHED, name)
        if skip and name.startswith(skip):
            rows.append(["skip"] * counts[i])
            continue
        got = run_file(ppsim, path, sets)
        if got is None:
            if counts is None:
                raise SystemExit(f"ppsim fidelity {path} failed")
            got = [None] * counts[i]
        rows.append(got)
    return rows


def pct(x):
    return f"{100 * x:+.1f}%"


def main_table(rows):
    lines = ["| result | source | published | published tok/s | predicted tok/s | error | bubble | DP / opt s | memory GB (pred / stated) | vs baseline: published / predicted (pp) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        mem = f"{r['predicted_memory_gb']:.1f}"
        if r["published_memory_gb"] is not None:
            mem += f" / {r['published_memory_gb']:.0f}"
        elif r["fits_gb"] is not None:
            mem += f" / fits {r['fits_gb']:.0f} ({r['fits_limit_gb']:.1f})" + ("" if r["fits"] else " (over!)")
        rel = "-"
        if r["relative_diff_pp"] is not None:
            rel = f"{r['published_relative']:.3f} / {r['predicted_relative']:.3f} ({r['relative_diff_pp']:+.1f})"
        lines.append(f"| `{r['key']}` | {r['source']} | {r['published']} | {r['published_tokens_per_s']:.4g} | "
                     f"{r['predicted_tokens_per_s']:.4g} | {pct(r['error'])} | {r['bubble_ratio']:.3f} | "
                     f"{r['dp_exposed_s']:.3f} / {r['optimizer_s']:.3f} | {mem} | {rel} |")
    return "\n".join(lines)


def ablation_table(base, offs):
    head = "| result | error, all pieces on | " + " | ".join(f"{p} off" for p, _ in PIECES) + " |"
    lines = [head, "|---|---|" + "---|" * len(PIECES)]
    for i, r in enumerate(base):
        if offs and offs[0][i] == "skip":
            continue
        cells = ["n/a" if o[i] is None else pct(o[i]["error"]) for o in offs]
        lines.append(f"| `{r['key']}` | {pct(r['error'])} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def runtime_table(base, offs):
    head = "| result | all on: error / vs baseline (pp) | " + " | ".join(p for p, _ in RUNTIME_PIECES) + " |"
    lines = [head, "|---|---|" + "---|" * len(RUNTIME_PIECES)]

    def cell(r):
        if r is None:
            return "n/a"
        rel = "" if r["relative_diff_pp"] is None else f" / {r['relative_diff_pp']:+.1f}"
        return pct(r["error"]) + rel
    for i, r in enumerate(base):
        if not r["key"].startswith(ABLATION_SKIP):
            continue
        lines.append(f"| `{r['key']}` | {cell(r)} | " + " | ".join(cell(o[i]) for o in offs) + " |")
    return "\n".join(lines)


def replace_between(text, name, body):
    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    a, b = text.index(begin) + len(begin), text.index(end)
    return text[:a] + "\n" + body + "\n" + text[b:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ppsim", default=os.path.join(ROOT, "build", "ppsim"))
    ap.add_argument("--thresholds", action="store_true", help="rewrite tools/fidelity_thresholds.txt")
    a = ap.parse_args()
    per_file = run(a.ppsim)
    counts = [len(r) for r in per_file]
    base = [r for rows in per_file for r in rows]
    as_list = lambda s: list(s) if isinstance(s, tuple) else [s]  # a piece: one --set or several
    offs = [[r for rows in run(a.ppsim, as_list(s), counts, ABLATION_SKIP) for r in rows] for _, s in PIECES]
    zoffs = [[r for rows in run(a.ppsim, [s], counts) for r in rows] for _, s in RUNTIME_PIECES]
    text = open(DOC).read()
    text = replace_between(text, "TABLE", main_table(base))
    open(DOC, "w").write(text)
    text = open(PIECES_DOC).read()
    text = replace_between(text, "ABLATION", ablation_table(base, offs))
    text = replace_between(text, "RUNTIME", runtime_table(base, zoffs))
    open(PIECES_DOC, "w").write(text)
    if a.thresholds:
        with open(THRESHOLDS, "w") as f:
            f.write("# <result key> <max |error| %> [<max |relative difference| pp>]\n")
            f.write("# Written by tools/fidelity_table.py --thresholds from the errors in docs/FIDELITY.md\n")
            f.write("# (each rounded up, plus 0.5); `ppsim fidelity --check` (CTest fidelity_check) fails past them.\n")
            for r in base:
                line = f"{r['key']} {math.ceil(abs(100 * r['error']) * 10) / 10 + 0.5:.1f}"
                if r["relative_diff_pp"] is not None:
                    line += f" {math.ceil(abs(r['relative_diff_pp']) * 10) / 10 + 0.5:.1f}"
                f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
