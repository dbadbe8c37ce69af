#!/usr/bin/env python3
"""PyTorch's own schedules through ppsim: on a machine with torch (the GPU machine: Python 3.12,
torch 2.11), build torch.distributed.pipelining's ScheduleInterleavedZeroBubble and
ScheduleDualPipeV for P = 4, M = 8 with stand-in stage objects (no process group, no GPU), feed
their pipeline_order to ppsim and check the makespan against `ppsim compare` for the matching
family with the same times. One line per schedule; exit 1 when one differs.

  cmake -S . -B build -G Ninja && cmake --build build        # builds build/python/ppsim
  PYTHONPATH=build/python python3 tools/torch_check.py [--ppsim build/ppsim]

ScheduleDualPipeV is compared with `ppsim compare -s dualpipev`; ppsim has no interleaved
zero-bubble family, so ScheduleInterleavedZeroBubble (2 stages per rank, linear layout) is
compared with `-s zbv` (the V-shaped zero-bubble schedule: the same per-chunk work and, at
F = I = W per chunk, the same zero bubble), and with its own order written to CSV and run by
`ppsim simulate --schedule-file`, which must agree exactly.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

P, M, TIMES = 4, 8, "F=1,B=2,W=1"


class _Stage:
    """The few attributes the schedule classes read from a PipelineStage when they build their
    order (as /work/shared/reference/README.md's generator did)."""

    def __init__(self, index, num_stages):
        self.stage_index = index
        self.num_stages = num_stages
        self.is_first = index == 0
        self.is_last = index == num_stages - 1
        self.has_backward = True
        self.submod = None


def _torch_order(cls_name):
    import torch.distributed.pipelining.schedules as sch
    cls = getattr(sch, cls_name)
    num_stages = 2 * P
    # Rank 0's stages: interleaved (linear) 0 and P; V-shaped (DualPipeV) 0 and 2P - 1.
    ids = [0, P] if cls_name == "ScheduleInterleavedZeroBubble" else [0, 2 * P - 1]
    stages = [_Stage(i, num_stages) for i in ids]
    for s in stages:
        s.group_rank, s.group_size = 0, P
    try:
        obj = cls(stages, n_microbatches=M, loss_fn=lambda out, target: out)
    except Exception as e:  # the stand-in lacks what this torch version reads: say which
        sys.exit(f"torch_check: {cls_name}(stand-in stages) failed: {type(e).__name__}: {e} "
                 f"(add the attribute to _Stage in tools/torch_check.py)")
    return {r: [None if x is None else str(x) for x in a] for r, a in obj.pipeline_order.items()}


def _torch_order_in_child(cls_name):
    """torch and the ppsim module are never loaded in one process (seen on the GPU machine: torch
    imported beside the module aborted with free(): invalid pointer). The child prints the order as
    the actions' string form, which is all ppsim reads."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--torch-order", cls_name], capture_output=True,
                         text=True)
    if out.returncode:
        sys.exit(f"torch_check: torch's {cls_name} failed: {out.stderr.strip() or out.stdout.strip()}")
    return {int(r): a for r, a in json.loads(out.stdout).items()}


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--torch-order":  # the child: torch only
        print(json.dumps(_torch_order(sys.argv[2])))
        return 0
    import ppsim  # the parent: ppsim only

    ap = argparse.ArgumentParser()
    ap.add_argument("--ppsim", default=os.path.join(os.path.dirname(ppsim.__file__), "..", "..", "ppsim"))
    a = ap.parse_args()
    exe = os.path.normpath(a.ppsim)

    def cli_makespan(*args):
        out = subprocess.run([exe, *args, "--times", TIMES, "--format", "json"], capture_output=True, text=True)
        if out.returncode:
            sys.exit(f"{exe} {' '.join(args)}: {out.stderr.strip()}")
        return json.loads(out.stdout)["results"][0]["makespan"]

    bad = 0
    for cls_name, family in [("ScheduleInterleavedZeroBubble", "zbv"), ("ScheduleDualPipeV", "dualpipev")]:
        order = _torch_order_in_child(cls_name)
        s = ppsim.Schedule.from_pipeline_order(order)
        got = ppsim.simulate(s, times=TIMES, timeline=False)["makespan"]
        want = cli_makespan("compare", "-p", str(P), "-m", str(M), "-s", family)
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write(s.to_csv())
        try:
            via_file = cli_makespan("simulate", "--schedule-file", f.name)
        finally:
            os.unlink(f.name)
        ok = got == want == via_file
        bad += not ok
        print(f"{cls_name:<30} P={P} M={M} {TIMES}: torch order {got:g}, ppsim compare -s {family} {want:g}, "
              f"CLI on the exported CSV {via_file:g}  {'OK' if ok else 'DIFFERENT'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
