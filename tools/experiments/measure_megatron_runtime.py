#!/usr/bin/env python3
"""Runs Megatron-LM's 1F1B and interleaved 1F1B with Megatron's blocking p2p calls on the GPUs of
one host, and times them (docs/FIDELITY-MEASURED.md, "Interleaved 1F1B against 1F1B"). One rank per GPU:

    torchrun --standalone --nproc-per-node 4 tools/experiments/measure_megatron_runtime.py --out DIR

The plans are tools/experiments/megatron_plan.py's (Megatron's two loops, checked for matching and deadlock
before anything runs). Every call is one dist.batch_isend_irecv of its sends and receives, a wait on
each, and with --sync (Megatron's default batch_p2p_sync) a torch.cuda.synchronize(); each rank
holds v chunks of GPT layers (pre-LayerNorm, causal SDPA attention, GELU MLP, bf16, no dropout)
for interleaved 1F1B, or one chunk of all of them for 1F1B; the last virtual stage's loss is the
mean square of its output. Defaults are the Zero Bubble paper's 1.5B layer (h 2304, 24 heads,
sequence 1024, micro-batch 6) and its 1F1B-I split of one layer per chunk (3 layers per rank,
v = 3).

Rank 0 writes DIR/megatron_runtime.json: for each schedule, micro-batch count and sync setting the
median step (slowest rank, CUDA-synchronized, after --warmup steps) and, from one more step with
CUDA events around every F, B and call, each rank's GPU timeline; one layer's F and full backward
times measured alone on rank 0 and on every GPU at once; and the link (a batched send/recv of one
activation between ranks 0 and 1, and of 4 KB; and Megatron's two call shapes with every rank in
one at once). It also writes DIR/profile.yaml (the layer alone on rank 0, version 1; the link's
bandwidth from the lone transfer and its latency from the ring-wide call) and DIR/ppsim_<M>.yaml,
configs for `ppsim compare DIR/ppsim_<M>.yaml -s 1f1b,interleaved-1f1b --vpp V` with Megatron's
p2p runtime, the profile's costs and no optimizer or DP traffic.

It also runs DeepSpeed's pipeline engine order (tools/experiments/megatron_plan.py plan_deepspeed:
TrainSchedule, one blocking send or receive per instruction, no synchronize) on the 1F1B chunk;
--report then prints it against Megatron's 1F1B without the synchronize, and ppsim's
`parallel.p2p_runtime: deepspeed` against `megatron` on the same costs.
"""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_plan  # noqa: E402
from cuda_timing import (init_torchrun, link_0_to_1, plan_ops, replay_args, replay_config, replay_profile,  # noqa: E402
                         timed_batched_call)


def parse_args():
    ap = replay_args(__doc__, hidden=2304, heads=24, ffn=9216, batch=6, layers_per_rank=3)
    ap.add_argument("--vpp", type=int, default=3)
    ap.add_argument("--microbatches", default="8,16")
    ap.add_argument("--sync", default="on,off", help="on, off or on,off: the torch.cuda.synchronize() after each call")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--timed", type=int, default=5)
    return ap.parse_args()


def report(a):
    """Measured against ppsim for each micro-batch count and sync setting: ppsim with the layer
    timed alone and the lone transfer's link; with the ring-wide call's link; and with each
    schedule's per-layer F and B as its own pipeline ran them (the CUDA events' means)."""
    import subprocess
    import tempfile
    d = a.report
    m = json.load(open(os.path.join(d, "megatron_runtime.json")))
    L = m["link"]
    gbps = L["gbps"]
    tx_ms = L["activation_bytes"] / (gbps * 1e9) * 1e3
    links = {"lone": (gbps, L["small_ms"] * 1e3), "ring": (gbps, (L["ring_call_one_ms"] - tx_ms) * 1e3)}
    tmp = tempfile.mkdtemp()

    def predict(sched, M, f, b, link, restart_us=0.0, runtime="megatron", eager_mb=0.0):
        with open(os.path.join(tmp, "p.yaml"), "w") as fh:
            fh.write(replay_profile(f, b, link[0], link[1]))
        cfg = open(os.path.join(d, f"ppsim_{M}.yaml")).read().replace("profile: profile.yaml", "profile: p.yaml")
        if restart_us > 0:
            cfg = cfg.replace("p2p_runtime: megatron", f"p2p_runtime: megatron, p2p_sync_us: {restart_us:.1f}")
        cfg = cfg.replace("p2p_runtime: megatron", f"p2p_runtime: {runtime}" + (f", p2p_eager_mb: {eager_mb:g}" if eager_mb else ""))
        with open(os.path.join(tmp, "c.yaml"), "w") as fh:
            fh.write(cfg)
        out = subprocess.run([a.ppsim, "compare", os.path.join(tmp, "c.yaml"), "-s", sched, "--vpp", str(m["vpp"]),
                              "--format", "json"], capture_output=True, text=True, check=True).stdout
        return json.loads(out)["results"][0]["makespan"]

    def in_pipeline(r):
        per = m["layers_per_rank"] // r["vpp"]
        fs = [(x[4] - x[3]) / per for d_ in r["per_rank"] for x in d_["timeline"] if x[0] == "F"]
        bs = [(x[4] - x[3]) / per for d_ in r["per_rank"] for x in d_["timeline"] if x[0] == "B"]
        return statistics.mean(fs), statistics.mean(bs)

    # The restart after a call's synchronize: how much later a one-layer chunk's F ends, counted
    # from the call, with the synchronize than without it (interleaved, every F follows a call).
    inter = {(r["microbatches"], r["sync"]): r for r in m["results"] if r["schedule"] == "interleaved-1f1b"}
    restart = statistics.mean(in_pipeline(inter[(M, True)])[0] - in_pipeline(inter[(M, False)])[0]
                              for M in sorted({k[0] for k in inter}) if (M, False) in inter and (M, True) in inter)
    restart_us = max(0.0, restart) * 1e3 * (m["layers_per_rank"] // m["vpp"])
    print(f"{m['device']} x {m['ranks']}, torch {m['torch']}, NCCL {m['nccl']}; layer alone F {m['layer_f_ms']:.3f} "
          f"B {m['layer_b_ms']:.3f} ms; lone transfer {L['activation_ms']:.3f} ms ({gbps:.0f} GB/s, 4 KB "
          f"{L['small_ms']:.3f} ms); ring-wide call {L['ring_call_one_ms']:.3f} ms, both neighbours {L['ring_call_both_ms']:.3f} ms; "
          f"restart after a synchronized call {restart_us:.0f} us")
    print("| M | sync | 1F1B ms | interleaved ms | interleaved gain | ppsim: layer alone, lone link | ring-call link | "
          "+ restart (p2p_sync_us) | per-layer costs as in each pipeline, ring-call link | those costs, F / B ms: 1F1B; interleaved |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    f0, b0 = m["layer_f_ms"], m["layer_b_ms"]
    for M in sorted({r["microbatches"] for r in m["results"]}):
        for sync in (True, False):
            pick = {r["schedule"]: r for r in m["results"] if r["microbatches"] == M and r["sync"] == sync}
            if len(pick) < 2:
                continue
            one, inter_r = pick["1f1b"], pick["interleaved-1f1b"]
            meas = one["step_ms"] / inter_r["step_ms"]
            cells = []
            for costs, link, rs in (("alone", "lone", 0.0), ("alone", "ring", 0.0), ("alone", "ring", restart_us if sync else 0.0),
                                    ("pipe", "ring", 0.0)):
                c1 = (f0, b0) if costs == "alone" else in_pipeline(one)
                ci = (f0, b0) if costs == "alone" else in_pipeline(inter_r)
                p1, pi = predict("1f1b", M, *c1, links[link], rs), predict("interleaved-1f1b", M, *ci, links[link], rs)
                g = p1 / pi
                cells.append(f"{100 * (g - 1):+.1f}% ({100 * (g - meas):+.1f} pp)")
            (f1, b1), (fi, bi) = in_pipeline(one), in_pipeline(inter_r)
            print(f"| {M} | {'on' if sync else 'off'} | {one['step_ms']:.1f} | {inter_r['step_ms']:.1f} | "
                  f"{100 * (meas - 1):+.1f}% | " + " | ".join(cells) + f" | {f1:.3f} / {b1:.3f}; {fi:.3f} / {bi:.3f} |")
    # DeepSpeed's TrainSchedule (one blocking send or receive per instruction, no synchronize)
    # against Megatron's 1F1B calls without the synchronize, both measured and both in ppsim.
    ds_rows = [r for r in m["results"] if r["schedule"] == "deepspeed-1f1b"]
    if ds_rows:
        print()
        print("| M | Megatron 1F1B ms (sync off) | DeepSpeed 1F1B ms | measured ratio | ppsim, layer alone: Megatron / DeepSpeed ms, "
              "ratio (pp) | ppsim, per-layer costs as in each pipeline | those, with eager sends (p2p_eager_mb 64) | "
              "DeepSpeed against measured: rendezvous; eager |")
        print("|---|---|---|---|---|---|---|---|")
        for ds in ds_rows:
            M = ds["microbatches"]
            mg = next(r for r in m["results"] if r["schedule"] == "1f1b" and r["microbatches"] == M and not r["sync"])
            meas = ds["step_ms"] / mg["step_ms"]
            cells = []
            errs = []
            for alone_costs, eager in ((True, 0.0), (False, 0.0), (False, 64.0)):
                cm = (f0, b0) if alone_costs else in_pipeline(mg)
                cd = (f0, b0) if alone_costs else in_pipeline(ds)
                pm = predict("1f1b", M, *cm, links["ring"], eager_mb=eager)
                pd = predict("1f1b", M, *cd, links["ring"], runtime="deepspeed", eager_mb=eager)
                cells.append(f"{pm:.1f} / {pd:.1f}, {pd / pm:.3f} ({100 * (pd / pm - meas):+.1f} pp)")
                if not alone_costs:
                    errs.append(f"{100 * (pd / ds['step_ms'] - 1):+.1f}%")
            print(f"| {M} | {mg['step_ms']:.1f} | {ds['step_ms']:.1f} | {meas:.3f} | " + " | ".join(cells) + " | " + "; ".join(errs) + " |")
    return 0


def main():
    a = parse_args()
    if a.report:
        return report(a)
    if not a.out:
        raise SystemExit("give --out DIR (the GPU run) or --report DIR")
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F

    rank, P, dev = init_torchrun(torch, dist)
    os.makedirs(a.out, exist_ok=True)
    if a.layers_per_rank % a.vpp:
        raise SystemExit(f"--layers-per-rank {a.layers_per_rank} is not a multiple of --vpp {a.vpp}")
    h, nh, s, b = a.hidden, a.heads, a.seq, a.batch
    shape = (b, s, h)

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(h)
            self.qkv = nn.Linear(h, 3 * h)
            self.proj = nn.Linear(h, h)
            self.ln2 = nn.LayerNorm(h)
            self.fc1 = nn.Linear(h, a.ffn)
            self.fc2 = nn.Linear(a.ffn, h)

        def forward(self, x):
            q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, nh, h // nh).permute(2, 0, 3, 1, 4)
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(att.transpose(1, 2).reshape(b, s, h))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    def chunk(n):
        return nn.Sequential(*[Layer() for _ in range(n)]).to(dev, torch.bfloat16)

    torch.manual_seed(1234 + rank)
    models = {"1f1b": [chunk(a.layers_per_rank)],
              "interleaved-1f1b": [chunk(a.layers_per_rank // a.vpp) for _ in range(a.vpp)]}
    models["deepspeed-1f1b"] = models["1f1b"]  # the same chunk, DeepSpeed's instruction order
    source = torch.randn(shape, device=dev, dtype=torch.bfloat16)

    def run_step(plan, chunks, v, sync, trace=None):
        recv = {}       # label -> received tensor
        saved = {}      # (chunk, mb) -> (input, output or loss)
        outbox = {}     # label -> tensor to send
        last_vs = P * v - 1
        for step in plan:
            if trace is not None:
                ev0 = torch.cuda.Event(enable_timing=True)
                ev0.record()
                c0 = time.perf_counter()
            if step[0] == "F":
                _, c, i = step
                vs = c * P + rank
                x = source if vs == 0 else recv.pop(("act", vs, i)).requires_grad_()
                y = chunks[c](x)
                if vs == last_vs:
                    saved[(c, i)] = (x, y.float().pow(2).mean())
                else:
                    saved[(c, i)] = (x, y)
                    outbox[("act", vs + 1, i)] = y.detach()
            elif step[0] == "B":
                _, c, i = step
                vs = c * P + rank
                x, y = saved.pop((c, i))
                if vs == last_vs:
                    torch.autograd.backward(y)
                else:
                    torch.autograd.backward(y, grad_tensors=recv.pop(("grad", vs + 1, i)))
                if vs > 0:
                    outbox[("grad", vs, i)] = x.grad
            else:
                ops, landed = plan_ops(torch, dist, dev, shape, step[1], outbox)
                for req in dist.batch_isend_irecv(ops):
                    req.wait()
                if sync:
                    torch.cuda.synchronize()
                for label, t in landed:
                    recv[label] = t
            if trace is not None:
                c1 = time.perf_counter()
                ev1 = torch.cuda.Event(enable_timing=True)
                ev1.record()
                trace.append((step, c1 - c0, ev0, ev1))
        assert not recv and not saved and not outbox, (recv.keys(), saved.keys(), outbox.keys())

    def timed_step(plan, chunks, v, sync):
        for m in chunks:
            m.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        run_step(plan, chunks, v, sync)
        torch.cuda.synchronize()
        t = torch.tensor([time.perf_counter() - t0], device=dev)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.item() * 1e3

    results = []
    for M in [int(x) for x in a.microbatches.split(",")]:
        plans = {"1f1b": (megatron_plan.plan_1f1b(P, M), 1),
                 "interleaved-1f1b": (megatron_plan.plan_interleaved(P, M, a.vpp), a.vpp),
                 "deepspeed-1f1b": (megatron_plan.plan_deepspeed(P, M), 1)}
        for name, (plan, v) in plans.items():
            megatron_plan.check(plan, P, v)
            # DeepSpeed's p2p has no synchronize after an instruction: its order runs without it
            for sync in [x == "on" for x in a.sync.split(",") if name != "deepspeed-1f1b" or x == "off"]:
                for _ in range(a.warmup):
                    timed_step(plan[rank], models[name], v, sync)
                ts = [timed_step(plan[rank], models[name], v, sync) for _ in range(a.timed)]
                calls = sum(1 for st in plan[rank] if st[0] == "call")
                # one more step with CUDA events around every step of the plan: per rank, the GPU
                # time and the host time of its F, B and calls (the events' own cost is small)
                trace = []
                for m in models[name]:
                    m.zero_grad(set_to_none=True)
                torch.cuda.synchronize()
                dist.barrier()
                ref = torch.cuda.Event(enable_timing=True)
                ref.record()
                run_step(plan[rank], models[name], v, sync, trace)
                torch.cuda.synchronize()
                mine = {"timeline": []}
                for step, host, e0, e1 in trace:
                    d = mine.setdefault(step[0], {"n": 0, "gpu_ms": 0.0, "host_ms": 0.0})
                    d["n"] += 1
                    d["gpu_ms"] += e0.elapsed_time(e1)
                    d["host_ms"] += host * 1e3
                    # each step's GPU start and end, ms after the reference event (recorded right
                    # after a barrier on every rank), and its host time: the GPU timeline per rank
                    what = [step[0], step[1], step[2]] if step[0] != "call" else ["call", len(step[1]), -1]
                    mine["timeline"].append(what + [ref.elapsed_time(e0), ref.elapsed_time(e1), host * 1e3])
                everyone = [None] * P
                dist.all_gather_object(everyone, mine)
                row = {"schedule": name, "microbatches": M, "vpp": v, "sync": sync, "step_ms": statistics.median(ts),
                       "steps_ms": ts, "calls_rank0": calls, "per_rank": everyone}
                results.append(row)
                if rank == 0:
                    print(f"{name:17} M={M:3} sync={'on ' if sync else 'off'} step {row['step_ms']:9.2f} ms  "
                          f"(min {min(ts):.2f}, max {max(ts):.2f}; {calls} calls on rank 0)", flush=True)
                    for r, d in enumerate(everyone):
                        print("    rank %d: " % r + "; ".join(
                            f"{k} x{x['n']} gpu {x['gpu_ms']:.1f} ms host {x['host_ms']:.1f} ms" for k, x in sorted(d.items())
                            if k != "timeline"), flush=True)

    # one layer alone: F, and the full backward (rank 0 with the other GPUs idle, then every rank
    # at once, each on its own GPU: what the GPUs' clocks and the shared host do to it)
    layer = models["interleaved-1f1b"][0][0]
    f_ms = b_ms = link = None
    dy = torch.ones_like(source)

    def alone():
        for _ in range(3):
            torch.autograd.backward(layer(source.detach().requires_grad_()), grad_tensors=dy)
        torch.cuda.synchronize()
        fs, bs = [], []
        for _ in range(20):
            x = source.detach().requires_grad_()
            e0, e1, e2 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
            e0.record()
            y = layer(x)
            e1.record()
            torch.autograd.backward(y, grad_tensors=dy)
            e2.record()
            torch.cuda.synchronize()
            fs.append(e0.elapsed_time(e1))
            bs.append(e1.elapsed_time(e2))
        return statistics.median(fs), statistics.median(bs)

    dist.barrier()
    if rank == 0:
        f_ms, b_ms = alone()
        print(f"one layer alone: F {f_ms:.3f} ms, full backward {b_ms:.3f} ms")
    dist.barrier()
    f_all, b_all = alone()
    together = [None] * P
    dist.all_gather_object(together, [f_all, b_all])
    if rank == 0:
        print("one layer on every GPU at once: " + "; ".join(f"rank {r}: F {x[0]:.3f} B {x[1]:.3f} ms" for r, x in enumerate(together)))

    def timed_call(ops):
        return timed_batched_call(torch, dist, dev, ops)

    # the link between ranks 0 and 1: one activation, and 4 KB, as one batched call each (+ sync)
    big, small, gbps = link_0_to_1(torch, dist, dev, rank, b * s * h)

    # Megatron's two call shapes with every rank in one at once (ring neighbours, one activation
    # each, then a synchronize): a steady-state 1F1B call (send to the next rank, receive from
    # it) and an interleaved one (send to and receive from both neighbours)
    def ring_call(both):
        bufs = [torch.empty(b * s * h, device=dev, dtype=torch.bfloat16) for _ in range(4)]
        nxt, prv = (rank + 1) % P, (rank - 1) % P
        ops = [dist.P2POp(dist.isend, bufs[0], nxt), dist.P2POp(dist.irecv, bufs[1], prv)]
        if both:
            ops += [dist.P2POp(dist.isend, bufs[2], prv), dist.P2POp(dist.irecv, bufs[3], nxt)]
        return timed_call(ops)

    call_one, call_both = ring_call(False), ring_call(True)
    if rank == 0:
        print(f"ring call, one activation each way to one neighbour: {call_one * 1e3:.3f} ms; "
              f"to both neighbours (interleaved's steady call): {call_both * 1e3:.3f} ms")
    if rank == 0:
        nbytes = b * s * h * 2
        link = {"activation_bytes": nbytes, "activation_ms": big * 1e3, "small_ms": small * 1e3, "gbps": gbps,
                "ring_call_one_ms": call_one * 1e3, "ring_call_both_ms": call_both * 1e3}
        print(f"link 0->1: {nbytes / 1e6:.1f} MB in {big * 1e3:.3f} ms, 4 KB in {small * 1e3:.3f} ms: {gbps:.0f} GB/s")
        out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
               "ranks": P, "hidden": h, "heads": nh, "ffn": a.ffn, "seq": s, "batch": b,
               "layers_per_rank": a.layers_per_rank, "vpp": a.vpp, "layer_f_ms": f_ms, "layer_b_ms": b_ms,
               "layer_all_gpus_ms": together,
               "link": link, "results": results}
        with open(os.path.join(a.out, "megatron_runtime.json"), "w") as fh:
            json.dump(out, fh, indent=1)
        with open(os.path.join(a.out, "profile.yaml"), "w") as fh:
            fh.write(f"version: 1\ndevice: \"{out['device']}\"\nsource: \"tools/experiments/measure_megatron_runtime.py, one layer alone on rank 0\"\n"
                     f"per_layer: true\nop_ms: {{F: {f_ms:.4f}, B: {b_ms:.4f}}}\n"
                     f"# the link: the lone transfer's bandwidth; as latency, what a ring-wide call of one activation\n"
                     f"# (every rank sending to its next, as Megatron's 1F1B calls) takes beyond it\n"
                     f"link: {{gbps: {gbps:.1f}, latency_us: {(call_one - nbytes / (gbps * 1e9)) * 1e6:.1f}}}\n")
        for M in [int(x) for x in a.microbatches.split(",")]:
            with open(os.path.join(a.out, f"ppsim_{M}.yaml"), "w") as fh:
                fh.write("# written by tools/experiments/measure_megatron_runtime.py: its run, for ppsim compare -s 1f1b,interleaved-1f1b\n"
                         + replay_config(P, a.layers_per_rank, h, nh, a.ffn, s, b, M, f"vpp: {a.vpp}, p2p_runtime: megatron, "))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
