"""tools/experiments/pp_trace_clock.py beside: the clock level of the kernels clear of NCCL and the p2p share of
those beside it, on two hand-made traces whose figures follow from their durations."""
import gzip
import json
import subprocess
import sys

from conftest import REPO

TOOL = REPO / "tools" / "experiments" / "pp_trace_clock.py"


def _trace(path, kernels):
    """kernels: (name, ts us, dur us); a name with "nccl" in it is a communication kernel."""
    ev = [{"ph": "X", "cat": "kernel", "name": n, "ts": ts, "dur": d, "args": {"grid": [132, 1, 1]}}
          for n, ts, d in kernels]
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": ev}, f)


def _beside(tmp_path, kernels, *flags):
    ref, run = tmp_path / "ref.json.gz", tmp_path / "run.json.gz"
    # The calibration trace: eight GEMMs of 1000 us, none beside NCCL (median 1000 us).
    _trace(ref, [("gemm", i * 2000, 1000) for i in range(8)])
    _trace(run, kernels)
    out = subprocess.run([sys.executable, str(TOOL), "beside", *flags, str(ref), str(run)],
                         capture_output=True, text=True, check=True)
    return out.stdout


def test_level_and_share(tmp_path):
    # Four GEMMs clear of NCCL at 1020 us: level 1.02. Twenty at 1224 us, each with an NCCL kernel from 612 us into
    # it to past its end: 612 us beside each, 12.24 ms in all; each runs 1224 - 1.02 x 1000 = 204 us beyond the
    # level, so the share is 204 / 612 = 1/3.
    ks = [("gemm", i * 2000, 1020) for i in range(4)]
    for j in range(20):
        t = 100000 + j * 5000
        ks += [("gemm", t, 1224), ("ncclDevKernel_SendRecv", t + 612, 2000)]
    out = _beside(tmp_path, ks)
    assert "clock level 1.020" in out
    assert "NCCL 40 ms, beside it 12 ms of compute: p2p share 0.333 (4.1 ms)" in out
    per_kernel = _beside(tmp_path, ks, "-k")
    assert " 0.333 on   12.2 ms ( 20)  median 1.000 ms  gemm [132, 1, 1]" in per_kernel


def test_too_little_beside_nccl_gives_no_share(tmp_path):
    # One GEMM beside NCCL for 612 us: under the 10 ms the share needs.
    ks = [("gemm", 0, 1000), ("gemm", 5000, 1224), ("ncclDevKernel_SendRecv", 5612, 2000)]
    out = _beside(tmp_path, ks)
    assert "clock level 1.000" in out
    assert "under 10 ms: no share" in out
