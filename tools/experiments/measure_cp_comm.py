#!/usr/bin/env python3
"""What PyTorch's context parallelism moves per attention, forward and backward. Several GPUs:

    torchrun --standalone --nproc-per-node 4 tools/experiments/measure_cp_comm.py [--json FILE]

Causal SDPA on q, k, v of [1, heads, seq, 128] bf16, sharded over the ranks by
torch.distributed.tensor.experimental.context_parallel (torchtitan's path; load-balanced chunks
i and 2cp-1-i), with each rotate method. Every functional collective the attention calls is
logged (the function, elements, dtype, forward or backward) by wrapping those functions in
torch.distributed._functional_collectives, which the CP code calls through its module; the NCCL
kernels of each pass are timed with the profiler. ppsim's two CP backwards (parallel.cp_runtime,
docs/CONFIG.md): te moves twice the forward's all-gather bytes, torch the all-gather again plus
the local dK, dV in fp32 passed cp times. Rank 0 prints a table and, with --json, writes it.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_timing import init_torchrun  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seq", type=int, default=32768, help="whole sequence, split over the ranks")
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--json", help="rank 0 writes the results here")
    a = ap.parse_args()
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as ft_c
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.experimental import context_parallel
    try:
        from torch.distributed.tensor.experimental._attention import set_rotate_method
    except ImportError:  # newer layouts
        from torch.distributed.tensor.experimental import set_rotate_method

    rank, cp, dev = init_torchrun(torch, dist)
    mesh = init_device_mesh("cuda", (cp,), mesh_dim_names=("cp",))
    log = []
    phase = {"now": "setup"}
    depth = {"n": 0}

    def wrap(name):
        fn = getattr(ft_c, name, None)
        if fn is None:
            return

        def logged(t, *args, **kw):
            # Only the outermost call (permute_tensor runs all_to_all_single inside).
            if phase["now"] in ("fwd", "bwd") and depth["n"] == 0:
                log.append({"phase": phase["now"], "fn": name, "elems": t.numel(), "dtype": str(t.dtype).replace("torch.", ""),
                            "bytes": t.numel() * t.element_size()})
            depth["n"] += 1
            try:
                return fn(t, *args, **kw)
            finally:
                depth["n"] -= 1
        setattr(ft_c, name, logged)

    for n in ("all_gather_tensor", "all_gather_tensor_autograd", "permute_tensor", "all_to_all_single",
              "all_to_all_single_autograd", "reduce_scatter_tensor", "reduce_scatter_tensor_autograd"):
        wrap(n)

    b, h, s, d = 1, a.heads, a.seq, a.head_dim
    results = []
    for method in ("allgather", "alltoall"):
        set_rotate_method(method)
        rows = {}
        for it in range(4):  # three warm-ups, the last one logged and profiled
            last = it == 3
            torch.manual_seed(0)
            # As PyTorch's own CP tests: plain tensors sharded in place, grads switched on inside.
            q, k, v, dout = (torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16) for _ in range(4))
            with context_parallel(mesh, buffers=[q, k, v, dout], buffer_seq_dims=[2, 2, 2, 2]):
                for x in (q, k, v):
                    x.requires_grad_(True)
                for ph in ("fwd", "bwd"):
                    torch.cuda.synchronize()
                    dist.barrier()
                    phase["now"] = ph if last else "warm"
                    acts = [torch.profiler.ProfilerActivity.CUDA]
                    with torch.profiler.profile(activities=acts) as prof:
                        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        start.record()
                        if ph == "fwd":
                            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                        else:
                            out.backward(dout)
                        end.record()
                        torch.cuda.synchronize()
                    phase["now"] = "setup"
                    if last:
                        nccl = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
                                and "nccl" in e.name.lower()]
                        dt = lambda e: getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
                        rows[ph] = {"ms": start.elapsed_time(end),
                                    "nccl_kernels": len(nccl),
                                    "nccl_ms": sum(dt(e) for e in nccl) / 1e3,
                                    "nccl_names": sorted({e.name.split("(")[0][:60] for e in nccl})}
                for x in (q, k, v):
                    x.requires_grad_(False)
                    x.grad = None
                del out
        mine = list(log)
        log.clear()
        for ph in ("fwd", "bwd"):
            calls = [x for x in mine if x["phase"] == ph]
            rows[ph]["calls"] = calls
            rows[ph]["bytes_sent"] = sum(x["bytes"] for x in calls)
        results.append({"rotate_method": method, "cp": cp, "seq": s, "heads": h, "head_dim": d, **rows})
    if rank == 0:
        local_kv = 2 * b * h * (s // cp) * d * 2  # this rank's K and V, bf16
        print(f"CP over {cp} GPUs ({torch.cuda.get_device_name(dev)}, torch {torch.__version__}): q, k, v [1, {h}, {s}, {d}] bf16; "
              f"this rank's K and V {local_kv / 1e6:.2f} MB")
        print(f"{'method':<10} {'pass':<4} {'ms':>7} {'nccl kernels':>12} {'nccl ms':>8}  collectives called (elements, dtype)")
        for r in results:
            for ph in ("fwd", "bwd"):
                x = r[ph]
                calls = "; ".join(f"{c['fn']} {c['elems']} {c['dtype']}" for c in x["calls"]) or "-"
                print(f"{r['rotate_method']:<10} {ph:<4} {x['ms']:7.3f} {x['nccl_kernels']:12d} {x['nccl_ms']:8.3f}  {calls}")
        # The bytes each rank receives: an all-gather (cp - 1) of its input, a permute all of it.
        def received(calls):
            return sum(c["bytes"] * ((cp - 1) if c["fn"].startswith("all_gather") else 1) for c in calls)
        for r in results:
            f, bw = received(r["fwd"]["calls"]), received(r["bwd"]["calls"])
            r["received_fwd"], r["received_bwd"] = f, bw
            print(f"{r['rotate_method']}: received forward {f / 1e6:.1f} MB, backward {bw / 1e6:.1f} MB ({bw / f:.2f} x); "
                  f"ppsim's cp_runtime te: 2.00 x, torch: {1 + 2 * cp / (cp - 1):.2f} x")
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"device": torch.cuda.get_device_name(dev), "torch": torch.__version__, "results": results}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
