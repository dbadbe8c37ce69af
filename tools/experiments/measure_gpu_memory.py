#!/usr/bin/env python3
"""What an "80 GB" GPU holds, in bytes: the capacity the driver reports and what a process has left.

NVIDIA's memory sizes are binary and rounded (an H100 "80GB" reports 81,559 MiB), while ppsim
counts 1 GB = 1e9 bytes. This script prints, for GPU 0:
  - total: cudaMemGetInfo's total (the figure nvidia-smi shows), in MiB and in GB of 1e9;
  - free after a CUDA context;  free after a cuBLAS handle and one GEMM;  free after NCCL's
    communicator on one rank (its buffers), when torch.distributed can start one.
The gap between total and the last "free" is what a training process spends before its first
tensor: memory ppsim does not count (docs/CONFIG.md, "Memory").

Usage: python3 tools/experiments/measure_gpu_memory.py        (one GPU; prints one table)
"""
import os
import sys


def main() -> int:
    try:
        import torch
    except ImportError:
        print("measure_gpu_memory: skipped (no torch)")
        return 0
    if not torch.cuda.is_available():
        print("measure_gpu_memory: skipped (no CUDA device)")
        return 0
    rows = []
    torch.cuda.init()
    free, total = torch.cuda.mem_get_info(0)
    name = torch.cuda.get_device_name(0)
    rows.append(("CUDA context", free))
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    (a @ a).sum().item()
    del a
    torch.cuda.empty_cache()
    rows.append(("+ cuBLAS handle and one GEMM", torch.cuda.mem_get_info(0)[0]))
    try:
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29531")
        dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
        t = torch.ones(1 << 20, device="cuda")
        dist.all_reduce(t)
        torch.cuda.synchronize()
        del t
        torch.cuda.empty_cache()
        rows.append(("+ NCCL communicator (1 rank) and one all-reduce", torch.cuda.mem_get_info(0)[0]))
        dist.destroy_process_group()
    except Exception as e:  # noqa: BLE001 - a measurement that cannot be made is reported, not hidden
        print(f"measure_gpu_memory: NCCL row not measured: {e}", file=sys.stderr)
    print(f"| {name} | bytes | MiB | GB (1e9) | used so far, GB |")
    print("|---|---|---|---|---|")
    print(f"| total (cudaMemGetInfo) | {total} | {total / 2**20:.0f} | {total / 1e9:.2f} | - |")
    for label, f in rows:
        print(f"| free after {label} | {f} | {f / 2**20:.0f} | {f / 1e9:.2f} | {(total - f) / 1e9:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
