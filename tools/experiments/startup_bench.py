#!/usr/bin/env python3
"""Start-up cost of CPU commands: wall time and peak RSS of `ppsim --version` and
`ppsim schedules`, each run N times (os.wait4 gives each child's own rusage). Target (issue 22):
<= 10 ms and <= 20 MB, since sweeps call the CLI thousands of times. Also lists the CUDA
libraries the process maps (none expected: the GPU back-end is dlopen'ed by GPU commands only).

  python3 tools/experiments/startup_bench.py [build/ppsim] [runs]
"""
import os
import statistics
import sys
import time

exe = sys.argv[1] if len(sys.argv) > 1 else "build/ppsim"
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 50


def once(args):
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.execv(exe, [exe, *args])
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    assert os.waitstatus_to_exitcode(status) == 0, args
    return wall * 1e3, ru.ru_maxrss / 1024  # ms, MB


fail = False
for args in (["--version"], ["schedules"]):
    once(args)  # page cache warm
    ms, mb = zip(*(once(args) for _ in range(runs)))
    med_ms, max_mb = statistics.median(ms), max(mb)
    ok = med_ms <= 10 and max_mb <= 20
    fail |= not ok
    print(f"ppsim {' '.join(args):<10} {runs} runs: wall min/median/max {min(ms):.2f}/{med_ms:.2f}/{max(ms):.2f} ms, "
          f"peak RSS max {max_mb:.1f} MB  (target <= 10 ms, <= 20 MB: {'met' if ok else 'MISSED'})")
libs = os.popen(f"ldd {exe}").read()
gpu = [l.split()[0] for l in libs.splitlines() if any(k in l for k in ("cuda", "cublas", "cudnn", "nccl"))]
print("CUDA libraries linked at start:", ", ".join(gpu) if gpu else "none")
sys.exit(1 if fail or gpu else 0)
