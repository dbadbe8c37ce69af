#!/usr/bin/env python3
"""Does a blocking NCCL send wait for its receiver? Two GPUs of one host:

    torchrun --standalone --nproc-per-node 2 tools/experiments/measure_p2p_rendezvous.py [--json FILE]

For each message size, rank 1 keeps its GPU busy for --delay-ms (torch.cuda._sleep) before it
posts the matching receive; rank 0 posts its send at once, waits on it (the stream wait that
DeepSpeed's p2p.send and Megatron's calls make) and records an event. Rank 0's time from the send
to that event is the transfer alone when NCCL finishes the send into the receiver's buffers
(eager), and the receiver's delay plus the transfer when the send waits for the receive
(rendezvous). Both ways of sending are timed: dist.send (PyTorch's own two-rank communicator per
peer pair, as DeepSpeed's p2p.send) and dist.batch_isend_irecv of one op (Megatron's calls).
ppsim's explicit-communication runtimes (parallel.p2p_runtime megatron and deepspeed) assume
rendezvous: a sender starts nothing until its receiver has posted and the transfer has landed.
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_timing import init_torchrun  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes-mb", default="0.25,1,4,16,28,64,256")
    ap.add_argument("--delay-ms", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", help="rank 0 writes the table here")
    a = ap.parse_args()
    import torch
    import torch.distributed as dist
    rank, P, dev = init_torchrun(torch, dist)
    if P != 2:
        raise SystemExit("run with --nproc-per-node 2")
    # cycles of torch.cuda._sleep per ms on this GPU (after a first launch: its lazy loading would
    # sit between the events and shrink the figure)
    torch.cuda._sleep(1000)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    torch.cuda._sleep(20_000_000)
    e1.record()
    torch.cuda.synchronize()
    cycles_per_ms = 20_000_000 / e0.elapsed_time(e1)
    def p2p(how, buf, send):
        """One blocking send (rank 0) or receive (rank 1): dist.send / dist.recv, or a one-op
        batch_isend_irecv and a wait on it."""
        peer = 1 - rank
        if how == "send":
            (dist.send if send else dist.recv)(buf, peer)
        else:
            for w in dist.batch_isend_irecv([dist.P2POp(dist.isend if send else dist.irecv, buf, peer)]):
                w.wait()

    rows = []
    for mb in [float(x) for x in a.sizes_mb.split(",")]:
        n = int(mb * 1e6) // 2
        buf = torch.ones(n, device=dev, dtype=torch.bfloat16)
        row = {"mb": mb}
        for how in ("send", "batch"):
            ts = []
            for _ in range(a.repeat + 1):
                torch.cuda.synchronize()
                dist.barrier()
                s0, s1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                if rank == 1:  # the receiver: busy for --delay-ms, then the receive
                    s0.record()
                    torch.cuda._sleep(int(a.delay_ms * cycles_per_ms))
                    s1.record()
                else:
                    s0.record()
                p2p(how, buf, send=rank == 0)
                if rank == 0:
                    s1.record()
                torch.cuda.synchronize()
                ts.append(s0.elapsed_time(s1))
            # rank 1's delay as its GPU ran it, to rank 0
            got = torch.tensor([statistics.median(ts[1:])], device=dev)
            both = [torch.zeros_like(got) for _ in range(2)]
            dist.all_gather(both, got)
            row[how + "_ms"] = both[0].item()
            row[how + "_delay_ms"] = both[1].item()
        rows.append(row)
    if rank == 0:
        print(f"{torch.cuda.get_device_name()} x 2, torch {torch.__version__}, NCCL "
              f"{'.'.join(map(str, torch.cuda.nccl.version()))}; the receiver posts {a.delay_ms:g} ms late")
        print("| MB | dist.send: sender's stream free after (ms) | batch_isend_irecv (ms) | receiver's delay as run (ms) |")
        print("|---|---|---|---|")
        for r in rows:
            print(f"| {r['mb']:g} | {r['send_ms']:.3f} | {r['batch_ms']:.3f} | {r['send_delay_ms']:.2f} / {r['batch_delay_ms']:.2f} |")
        if a.json:
            with open(a.json, "w") as fh:
                json.dump({"device": torch.cuda.get_device_name(), "delay_ms": a.delay_ms, "rows": rows}, fh, indent=1)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
