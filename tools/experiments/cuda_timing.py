"""Shared by the measurement scripts in tools/experiments/ (measure_gpt_head_layer.py,
measure_gemm_efficiency.py, and the torchrun ones): PyTorch on CUDA or a printed reason to skip, a
median time, and a rank's setup under torchrun."""
import statistics
import sys
import time


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


def timed_batched_call(torch, dist, dev, ops, slowest=True):
    """Median of 20 (after 3) of one batch_isend_irecv of `ops` (torch.distributed P2POps), a wait
    on each and a synchronize, every rank starting together after a barrier: the slowest rank's
    median (an all-reduce), or this rank's. Seconds."""
    ts = []
    for it in range(23):
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        for req in (dist.batch_isend_irecv(ops) if ops else []):
            req.wait()
        torch.cuda.synchronize()
        if it >= 3:
            ts.append(time.perf_counter() - t0)
    if not slowest:
        return statistics.median(ts)
    t = torch.tensor([statistics.median(ts)], device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def link_0_to_1(torch, dist, dev, rank, elems):
    """The link from rank 0 to rank 1 as one batched call each of `elems` bf16 values and of 4 KB
    (the other ranks join the barriers only): (seconds for elems, seconds for 4 KB, GB/s read off
    their difference), timed on this rank; exits with a reason where the two are too close to read
    a bandwidth from (a negative or huge figure would land in a profile)."""
    def ping(n):
        t = torch.empty(n, device=dev, dtype=torch.bfloat16)
        return timed_batched_call(torch, dist, dev, [dist.P2POp(dist.isend, t, 1)] if rank == 0 else
                                  [dist.P2POp(dist.irecv, t, 0)] if rank == 1 else [], slowest=False)

    big, small = ping(elems), ping(2048)
    nbytes = elems * 2
    if rank == 0 and big <= small * 1.05:
        sys.exit(f"link 0->1: {nbytes} bytes took {big * 1e3:.3f} ms, 4 KB {small * 1e3:.3f} ms: too close to read "
                 "a bandwidth from; send more")
    return big, small, (nbytes - 4096) / max(big - small, 1e-12) / 1e9


def replay_args(doc, hidden, heads, ffn, batch, layers_per_rank):
    """The argument parser the pipeline replays share (measure_megatron_runtime.py,
    measure_zb_runtime.py): --out or --report, the ppsim binary, and the GPT layer's shape with
    the given defaults (sequence 1024); each script adds its own."""
    import argparse
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--out", help="folder for the results (the GPU run)")
    ap.add_argument("--report", metavar="DIR", help="no GPU: print measured against ppsim from DIR's results")
    ap.add_argument("--ppsim", default="build/ppsim", help="with --report: the ppsim binary")
    ap.add_argument("--hidden", type=int, default=hidden)
    ap.add_argument("--heads", type=int, default=heads)
    ap.add_argument("--ffn", type=int, default=ffn)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=batch, help="sequences per micro-batch")
    ap.add_argument("--layers-per-rank", type=int, default=layers_per_rank)
    return ap


def plan_ops(torch, dist, dev, shape, step_ops, outbox):
    """A plan's call (tools/experiments/megatron_plan.py: (op, peer, label) triples) as P2POps: each send takes
    its tensor out of `outbox` by label, each receive gets a new bf16 tensor of `shape`. Returns
    (ops, [(label, tensor received)])."""
    ops, landed = [], []
    for op, peer, label in step_ops:
        if op == "send":
            ops.append(dist.P2POp(dist.isend, outbox.pop(label), peer))
        else:
            t = torch.empty(shape, device=dev, dtype=torch.bfloat16)
            ops.append(dist.P2POp(dist.irecv, t, peer))
            landed.append((label, t))
    return ops, landed


def replay_profile(f_ms, b_ms, gbps, latency_us, w_ms=None):
    """A version-1 ppsim profile of one GPT layer of a pipeline replay: F, the whole backward B
    (and its W where given), per micro-batch, and the stage-to-stage link."""
    w = "" if w_ms is None else f", W: {w_ms:.4f}"
    return (f"version: 1\nper_layer: true\nop_ms: {{F: {f_ms:.4f}, B: {b_ms:.4f}{w}}}\n"
            f"link: {{gbps: {gbps:.2f}, latency_us: {latency_us:.2f}}}\n")


def replay_config(ranks, layers_per_rank, hidden, heads, ffn, seq, batch, microbatches, parallel="",
                  profile="profile.yaml"):
    """The ppsim config of a pipeline replay (measure_megatron_runtime.py, measure_zb_runtime.py):
    its GPT layers as the model, `ranks` stages, no DP traffic or optimizer step, the costs from
    `profile`; `parallel`: further parallel keys, each followed by ", " ("vpp: 3, p2p_runtime:
    megatron, ")."""
    return f"""model: {{layers: {ranks * layers_per_rank}, hidden: {hidden}, heads: {heads}, ffn_hidden: {ffn}, vocab: 32000, seq_len: {seq},
        micro_batch_size: {batch}, mlp: gelu, norm: layernorm, dropout: false, flash_attention: true}}
cluster: {{gpu: h100, gpus: {ranks}}}
costs: {{dp_comm: false, optimizer_step: false}}
parallel: {{pp: {ranks}, microbatches: {microbatches}, {parallel}embedding_on_first: false, head_on_last: false}}
profile: {profile}
"""


def write_json(torch, path, rows, **meta):
    """The measurement's rows with the GPU's name and PyTorch's version (and `meta`) as JSON at
    `path`; nothing when `path` is empty."""
    if not path:
        return
    import json
    with open(path, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, **meta, "rows": rows}, f,
                  indent=1)
