"""Shared by the measurement scripts in tools/ (measure_gpt_head_layer.py, measure_gemm_efficiency.py,
and the torchrun ones): PyTorch on CUDA or a printed reason to skip, a median time, and a rank's
setup under torchrun."""
import statistics
import sys


def cuda_torch(tool):
    """torch when it is installed and sees a CUDA device; else None, with a SKIP line on stderr."""
    try:
        import torch
    except ImportError:
        print(f"SKIP {tool}: PyTorch is not installed", file=sys.stderr)
        return None
    if not torch.cuda.is_available():
        print(f"SKIP {tool}: no CUDA device", file=sys.stderr)
        return None
    return torch


def median_ms(torch, fn, iters, warmup=5):
    """Median of `iters` runs of fn() in milliseconds, timed with CUDA events after `warmup` runs."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1))
    return statistics.median(ts)


def init_torchrun(torch, dist):
    """Under torchrun: this rank's GPU (LOCAL_RANK) as the current device and an NCCL process
    group bound to it. Returns (rank, world size, device)."""
    import os
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=dev)
    return rank, world, dev
