#!/usr/bin/env python3
"""Writes python/examples/ppsim_tour.ipynb (no outputs): a tour calling every function
docs/PYTHON.md documents, each result shown as a table and a timeline. tools/check_notebook.sh
executes it with Debian's jupyter-nbconvert. Run this after editing the cells below."""
import json
import pathlib

CELLS = [
    ("markdown", "# ppsim from Python\nEvery documented call (docs/PYTHON.md), each result as a table and a timeline."),
    ("code", """import json, pathlib, tempfile
from IPython.display import HTML, SVG, display
import ppsim
# The repository's configs (the notebook runs from python/examples/ or anywhere below the root).
ROOT = next(p for p in [pathlib.Path.cwd(), *pathlib.Path.cwd().parents]
            if (p / "configs" / "small-4gpu.yaml").is_file())
TMP = pathlib.Path(tempfile.mkdtemp())
def timeline(schedule, **kw):  # a schedule's timeline at unit times, or the given costs
    display(SVG(schedule.svg(**kw)))
ppsim.__version__"""),
    ("markdown", "## families, generate, a Schedule"),
    ("code", """fams = ppsim.Result(results=ppsim.families())
display(fams.to_pandas().query("quantity == 'name'")[["row", "value"]].head(9))
s = ppsim.generate("dualpipev", 4, 8)
print(s, s.ranks[0][:6], s.to_actions()[1][:4])
s  # a Schedule shows as its timeline"""),
    ("code", """a = ppsim.Schedule.from_actions([["0F0", "0F1", "0B0", "0B1"], [None, "1F0", "1B0", "1F1", "1B1"]])
o = ppsim.Schedule.from_pipeline_order({0: ["0F0", "0F1", None, "0B0", "0B1"], 1: [None, "1F0", "1B0", "1F1", "1B1"]})
csv = s.to_csv(TMP / "s.csv")
c1, c2 = ppsim.Schedule.from_csv(TMP / "s.csv"), ppsim.Schedule.from_csv_text(csv)
print(a, o, c1, c2, sep="\\n")
print(ppsim.generate("1f1b", 2, 2).lowered("torch")[0])
display(ppsim.simulate(o, times="F=1,B=2", timeline=False))
timeline(o)"""),
    ("markdown", "## simulate and compare"),
    ("code", """r = ppsim.simulate(s, times="F=1,B=2,W=1", p2p_latency=0.1)
display(r)  # the table, then the timeline
r.to_pandas().query("rank == rank").head()  # per-rank rows kept (long form)"""),
    ("code", """res = ppsim.compare(pp=8, microbatches=20, times={"F": 1, "B": 2, "W": 1, "FB": 3}, timelines=True)
res"""),
    ("markdown", "## configs: load_config and plan"),
    ("code", """cfg = ppsim.load_config(ROOT / "configs/small-4gpu.yaml", overrides={"parallel.microbatches": 8})
p = ppsim.plan(cfg, top=3)
display(p)
best = p["variants"][0]["ranking"][0]
vpp = best.get("vpp", 0) if best["schedule"] == "interleaved-1f1b" else 0
timeline(ppsim.generate(best["schedule"], best["pp"], best["microbatches"], vpp=vpp))"""),
    ("markdown", "## search"),
    ("code", """sr = ppsim.search(pp=4, microbatches=8, times="F=1,B=2,W=1", time_limit=2, threads=1)
display(sr)
print(sr["search"]["placement"], [row["parameter_copies"] for row in sr["results"]])
timeline(sr["schedule"])"""),
    ("markdown", "## import_trace: a small profiler trace written here"),
    ("code", """events, corr, ts = [], 1, 0
for layer in (0, 1):
    for sub, dur in (("attention", 40), ("mlp", 60)):
        for pas in ("F", "B"):
            x = {"ph": "X", "pid": 100, "tid": 1}
            events += [dict(x, cat="user_annotation", name=f"layer{layer}.{sub}.{pas}", ts=ts, dur=100),
                       dict(x, cat="cuda_runtime", name="cudaLaunchKernel", ts=ts + 5, dur=2,
                            args={"correlation": corr}),
                       dict(x, cat="kernel", name="gemm", pid=0, tid=7, ts=ts + 10, dur=dur,
                            args={"stream": 7, "device": 0, "correlation": corr})]
            corr, ts = corr + 1, ts + 100
(TMP / "trace.json").write_text(json.dumps({"schemaVersion": 1, "traceEvents": events,
                                           "deviceProperties": [{"id": 0, "name": "GPU", "numSms": 132}]}))
tr = ppsim.import_trace(str(TMP / "trace.json"))
display(tr)
timeline(ppsim.generate("1f1b", 2, 4), times="F=1,B=2")  # the cells' schedule at their F and B"""),
    ("markdown", "## model and fidelity"),
    ("code", """m = ppsim.model(ROOT / "configs/hf/deepseek-v3.json", pp=16)
display(m)
timeline(ppsim.generate("dualpipev", 16, 32))"""),
    ("code", """f = ppsim.fidelity(files=[str(ROOT / "configs/published/bloom-176b.yaml")])
display(f)
timeline(ppsim.generate(f["rows"][0]["schedule"], 4, 8))"""),
    ("markdown", "## GPU calls and errors: typed, one line"),
    ("code", """errors = []
for name, call in (("profile", lambda: ppsim.profile(cfg)), ("validate", lambda: ppsim.validate(cfg)),
                   ("simulate dualpipe M=10", lambda: ppsim.simulate("dualpipe", pp=8, microbatches=10)),
                   ("simulate pp='four'", lambda: ppsim.simulate("1f1b", pp="four", microbatches=8))):
    try:
        display(call())  # on a GPU machine: the result
    except ppsim.Error as e:  # GpuError (5) without a GPU; InputError (3); UsageError (2)
        errors.append({"call": name, "error": type(e).__name__, "exit_code": e.exit_code, "message": str(e)})
display(ppsim.Result(results=errors))
timeline(ppsim.generate("dualpipe", 8, 16))"""),
]


def main():
    nb = {"nbformat": 4, "nbformat_minor": 5,
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "cells": []}
    for i, (kind, text) in enumerate(CELLS):
        cell = {"cell_type": kind, "id": f"c{i}", "metadata": {}, "source": text.splitlines(keepends=True)}
        if kind == "code":
            cell.update(execution_count=None, outputs=[])
        nb["cells"].append(cell)
    out = pathlib.Path(__file__).with_name("ppsim_tour.ipynb")
    out.write_text(json.dumps(nb, indent=1) + "\n")
    print(out)


if __name__ == "__main__":
    main()
