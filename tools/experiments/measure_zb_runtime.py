#!/usr/bin/env python3
"""ZB-H1 with the Zero Bubble fork's runtime against 1F1B with Megatron-LM's calls, on the GPUs of
one host (docs/FIDELITY-MEASURED.md, "ZB-H1 against 1F1B on four GPUs"). One rank per GPU:

    for M in 12 16 32; do ppsim show zb-h1 -p 4 -m $M --format json > zb_h1_$M.json; done
    torchrun --standalone --nproc-per-node 4 tools/experiments/measure_zb_runtime.py --out DIR --orders zb_h1_*.json
    python3 tools/experiments/measure_zb_runtime.py --report DIR          # here: measured against ppsim

Any zero-bubble order `ppsim show` writes runs the same way, named by its family (e.g. zb-h2);
1F1B runs once per micro-batch count. --report also gives each run's duty cycle and ppsim's gain
with hardware.clock on (--clock-slope, from duty 0.8).

The Zero Bubble paper's ZB-1p claims (Table 4) set the fork's ZB-1p, run by its own runtime,
against its Megatron-LM 1F1B. ppsim simulates ZB-1p as ZB-H1 (the paper's Table 5 gives them the
same bubble) with the dataflow runtime, and 1F1B with Megatron's calls; where W is largest it
puts ZB-1p's gain 3.4 to 5.6 points above the paper's. This replays both on real layers:

  - 1F1B: tools/experiments/megatron_plan.py plan_1f1b, each call one batch_isend_irecv, a wait on each and a
    torch.cuda.synchronize() (Megatron's batch_p2p_sync), the backward whole (input and weight
    gradients together);
  - ZB-H1: the order ppsim writes (--orders, one file per micro-batch count) run as the fork's
    runtime does (megatron_plan.plan_zb: a send at each F's and I's completion, the receive on the
    consumer at the same time, consecutive comm nodes as one batch_isend_irecv, the consumer's
    wait on the GPU stream, no synchronize); the backward split as the fork splits it: every
    Linear's input gradient in I, its weight gradient (input^T . output grad, and the bias's)
    deferred to W (the fork's WeightGradStore); LayerNorm's small gradients stay in I.

The layer is a GPT layer (pre-LayerNorm, causal SDPA attention, GELU MLP, bf16, no dropout), the
defaults the paper's 6.2B one (h 4096, 32 heads, sequence 1024, micro-batch 3), --layers-per-rank
of them per rank. Rank 0 writes DIR/zb_runtime.json: per schedule and micro-batch count the median
step (slowest rank, after --warmup steps), one layer's F, I, W and whole backward timed alone on
rank 0, and the link (one activation, and 4 KB, as one batched call between ranks 0 and 1). With
an `nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader,nounits
-lms 20` log beside it as DIR/clocks.csv, --report also prints each run's mean SM clock and power.
"""
import functools
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_plan  # noqa: E402
from cuda_timing import replay_args, replay_config, replay_profile  # noqa: E402


def parse_args():
    ap = replay_args(__doc__, hidden=4096, heads=32, ffn=16384, batch=3, layers_per_rank=4)
    ap.add_argument("--orders", nargs="*", default=[], help="ppsim show zb-h1 -p P -m M --format json, one per M")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--timed", type=int, default=5)
    ap.add_argument("--no-single-ops", dest="single_ops", action="store_false",
                    help="skip the run of each order with every send and receive its own batch")
    ap.add_argument("--clock-slope", type=float, default=0.5,
                    help="--report: hardware.clock.duty_slope for the clock column (duty_ref 0.8)")
    return ap.parse_args()


def report(a):
    """Measured ZB-H1 / 1F1B against ppsim's, each M: ppsim with the layer's F, I, W timed alone,
    1F1B with Megatron's calls (with and without the restart after each call's synchronize, at
    the figure session 13 measured: 147 us) and ZB-H1 with the dataflow runtime."""
    import subprocess
    import tempfile
    d = a.report
    m = json.load(open(os.path.join(d, "zb_runtime.json")))
    L = m["link"]
    tmp = tempfile.mkdtemp()
    f, i, w = m["layer_f_ms"], m["layer_i_ms"], m["layer_w_ms"]
    whole = m["layer_b_ms"]

    @functools.lru_cache(maxsize=None)  # 1F1B's rows repeat for every schedule run at the same M
    def predict(sched, M, runtime, costs, restart_us=0.0, sets=()):
        """ppsim's step for one layer's (F, I, W) ms (`sets`: a tuple of --set flags for ppsim)."""
        cf, ci, cw = costs
        with open(os.path.join(tmp, "p.yaml"), "w") as fh:
            fh.write(replay_profile(cf, ci + cw, L["gbps"], L["small_ms"] * 1e3, w_ms=cw))
        extra = f", p2p_sync_us: {restart_us:.0f}" if restart_us else ""
        with open(os.path.join(tmp, "c.yaml"), "w") as fh:
            fh.write(replay_config(m["ranks"], m["layers_per_rank"], m["hidden"], m["heads"], m["ffn"], m["seq"], m["batch"],
                                   M, f"p2p_runtime: {runtime}{extra}, ", "p.yaml"))
        flags = [x for kv in sets for x in ("--set", kv)]
        out = subprocess.run([a.ppsim, "compare", os.path.join(tmp, "c.yaml"), "-s", sched, "--format", "json", *flags],
                             capture_output=True, text=True, check=True).stdout
        return json.loads(out)["results"][0]["makespan"]

    clocks = os.path.join(d, "clocks.csv")
    if os.path.exists(clocks):
        # nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader,nounits -lms 20
        import datetime
        samples = []
        for line in open(clocks):
            parts = [x.strip() for x in line.split(",")]
            if len(parts) < 4:
                continue
            try:
                # nvidia-smi writes the device's local time: to Unix time with its UTC offset
                dt = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f")
                t = dt.replace(tzinfo=datetime.timezone.utc).timestamp() - m.get("gmtoff_s", 0)
                samples.append((t, int(parts[1]), float(parts[2]), float(parts[3])))
            except ValueError:
                continue
        print("| schedule | M | SM clock MHz, mean over the timed steps (GPU 0; GPUs 0-3) | power W (GPU 0; GPUs 0-3) |")
        print("|---|---|---|---|")
        for r in m["results"]:
            t0, t1 = r["timed_unix_s"]
            inside = [x for x in samples if t0 <= x[0] <= t1]
            g0 = [x for x in inside if x[1] == 0]
            if not g0:
                continue
            print(f"| {r['schedule']} | {r['microbatches']} | {statistics.mean(x[2] for x in g0):.0f}; "
                  f"{statistics.mean(x[2] for x in inside):.0f} | {statistics.mean(x[3] for x in g0):.0f}; "
                  f"{statistics.mean(x[3] for x in inside):.0f} |")
        print()
    print(f"{m['device']} x {m['ranks']}, torch {m['torch']}, NCCL {m['nccl']}; layer alone F {f:.3f}, I {i:.3f}, W {w:.3f} ms "
          f"(I + W {i + w:.3f}; whole backward {whole:.3f}); link {L['gbps']:.0f} GB/s, 4 KB {L['small_ms']:.3f} ms")
    lp = m["layers_per_rank"]

    def in_pipeline(row):
        """Per-layer mean GPU time of each compute kind as the pipeline ran it (CUDA events after
        the step's wait for its input), over every rank."""
        per = {}
        for tl in row["timeline"]:
            for k, _, t0, t1 in tl:
                if k in ("F", "B", "I", "W"):
                    per.setdefault(k, []).append((t1 - t0) / lp)
        return {k: statistics.mean(v) for k, v in per.items()}

    def duty(row):
        """Mean over the ranks of compute time over the step's span (first start to last end)."""
        spans = [t for tl in row["timeline"] for _, _, *t in tl]
        span = max(t[1] for t in spans) - min(t[0] for t in spans)
        return statistics.mean(sum(t1 - t0 for k, _, t0, t1 in tl if k in ("F", "B", "I", "W")) / span
                               for tl in row["timeline"])

    print("| schedule | M | 1F1B ms (Megatron calls, sync) | ms (fork runtime) | each op its own batch | measured gain "
          "| duty 1F1B / this | ppsim, layer alone: 1F1B / this ms, gain (pp) | with the 147 us restart on 1F1B's calls "
          f"| clock on (slope {a.clock_slope:g} from 0.8) | per-layer costs as each pipeline ran them "
          "| those costs, F / B; F / I / W ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for M in sorted({r["microbatches"] for r in m["results"]}):
        pick = {r["schedule"]: r for r in m["results"] if r["microbatches"] == M}
        if "1f1b" not in pick:
            continue
        for name in sorted(n for n in pick if n != "1f1b" and not n.endswith("-single-ops")):
            meas = pick["1f1b"]["step_ms"] / pick[name]["step_ms"]
            cells = []
            c1, cz = in_pipeline(pick["1f1b"]), in_pipeline(pick[name])
            # (1F1B's in-pipeline F and B already hold the restart after each synchronized call: the
            # GPU idles from the call's end until the host has launched the step's first kernels;
            # its whole B is split as the layer alone splits it)
            clock = (f"hardware.clock.duty_slope={a.clock_slope}", "hardware.clock.duty_ref=0.8")
            for one, zb, restart, sets in (((f, i, w), (f, i, w), 0.0, ()), ((f, i, w), (f, i, w), 147.0, ()),
                                           ((f, i, w), (f, i, w), 0.0, clock),
                                           ((c1["F"], c1["B"] * i / (i + w), c1["B"] * w / (i + w)), (cz["F"], cz["I"], cz["W"]), 0.0, ())):
                p1 = predict("1f1b", M, "megatron", one, restart, sets)
                pz = predict(name, M, "dataflow", zb, 0.0, sets)
                g = p1 / pz
                cells.append(f"{p1:.1f} / {pz:.1f}, {100 * (g - 1):+.1f}% ({100 * (g - meas):+.1f} pp)")
            single = pick.get(name + "-single-ops", {}).get("step_ms", float("nan"))
            print(f"| {name} | {M} | {pick['1f1b']['step_ms']:.1f} | {pick[name]['step_ms']:.1f} | {single:.1f} | {100 * (meas - 1):+.1f}% | "
                  f"{duty(pick['1f1b']):.2f} / {duty(pick[name]):.2f} | " + " | ".join(cells) +
                  f" | {c1['F']:.3f} / {c1['B']:.3f}; {cz['F']:.3f} / {cz['I']:.3f} / {cz['W']:.3f} |")
    return 0


def main():
    a = parse_args()
    if a.report:
        return report(a)
    if not a.out or not a.orders:
        raise SystemExit("give --out DIR and --orders FILE... (the GPU run), or --report DIR")
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from cuda_timing import init_torchrun, link_0_to_1, plan_ops

    rank, P, dev = init_torchrun(torch, dist)
    os.makedirs(a.out, exist_ok=True)
    h, nh, s, b = a.hidden, a.heads, a.seq, a.batch
    shape = (b, s, h)

    class Store:
        """The fork's WeightGradStore: with `split`, each Linear's weight gradient waits for W."""
        split = False
        pending = []

    class LinFn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, bias):
            ctx.save_for_backward(x, weight, bias)
            return F.linear(x, weight, bias)

        @staticmethod
        def backward(ctx, g):
            x, weight, bias = ctx.saved_tensors

            def wgrad():
                g2, x2 = g.reshape(-1, g.shape[-1]), x.reshape(-1, x.shape[-1])
                gw, gb = g2.t() @ x2, g2.sum(0)
                if weight.grad is None:
                    weight.grad, bias.grad = gw, gb
                else:
                    weight.grad.add_(gw)
                    bias.grad.add_(gb)

            if Store.split:
                Store.pending.append(wgrad)
            else:
                wgrad()
            return g @ weight, None, None

    class Linear(nn.Module):
        def __init__(self, n_in, n_out):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(n_out, n_in) * n_in ** -0.5)
            self.bias = nn.Parameter(torch.zeros(n_out))

        def forward(self, x):
            return LinFn.apply(x, self.weight, self.bias)

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
            self.qkv, self.proj = Linear(h, 3 * h), Linear(h, h)
            self.fc1, self.fc2 = Linear(h, a.ffn), Linear(a.ffn, h)

        def forward(self, x):
            q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, nh, h // nh).permute(2, 0, 3, 1, 4)
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(att.transpose(1, 2).reshape(b, s, h))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    torch.manual_seed(1234 + rank)
    model = nn.Sequential(*[Layer() for _ in range(a.layers_per_rank)]).to(dev, torch.bfloat16)
    source = torch.randn(shape, device=dev, dtype=torch.bfloat16)

    def run_step(plan, split, trace=None):
        recv, saved, outbox, wq, sends = {}, {}, {}, {}, []
        for step in plan:
            kind = step[0]
            if trace is not None:
                ev0 = torch.cuda.Event(enable_timing=True)
                ev0.record()
            if kind == "F":
                i = step[2]
                if rank == 0:
                    x = source
                else:
                    t, works = recv.pop(("act", rank, i))
                    for wk in works:
                        wk.wait()
                    if trace is not None:
                        ev0.record()  # the step's GPU time starts after its wait for the input
                    x = t.requires_grad_()
                y = model(x)
                saved[i] = (x, y.float().pow(2).mean() if rank == P - 1 else y)
                if rank < P - 1:
                    outbox[("act", rank + 1, i)] = y.detach()
            elif kind in ("B", "I"):
                i = step[2]
                x, y = saved.pop(i)
                Store.split = kind == "I"
                if rank == P - 1:
                    torch.autograd.backward(y)
                else:
                    t, works = recv.pop(("grad", rank + 1, i))
                    for wk in works:
                        wk.wait()
                    if trace is not None:
                        ev0.record()
                    torch.autograd.backward(y, grad_tensors=t)
                Store.split = False
                if kind == "I":
                    wq[i], Store.pending = Store.pending, []
                if rank > 0:
                    outbox[("grad", rank, i)] = x.grad
            elif kind == "W":
                for fn in wq.pop(step[2]):
                    fn()
            else:  # "call" (Megatron: blocking, synchronized) or "post" (the fork: waited by the consumer)
                ops, landed = plan_ops(torch, dist, dev, shape, step[1], outbox)
                works = dist.batch_isend_irecv(ops)
                if kind == "call":
                    for wk in works:
                        wk.wait()
                    torch.cuda.synchronize()
                    works = []
                else:
                    sends.append(works)
                for label, t in landed:
                    recv[label] = (t, works)
            if trace is not None:
                ev1 = torch.cuda.Event(enable_timing=True)
                ev1.record()
                trace.append((kind, step[2] if kind in ("F", "B", "I", "W") else len(step[1]), ev0, ev1))
        for works in sends:
            for wk in works:
                wk.wait()
        assert not recv and not saved and not outbox and not wq, (recv.keys(), saved.keys(), outbox.keys(), wq.keys())

    def timed_step(plan):
        model.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        run_step(plan, True)
        torch.cuda.synchronize()
        t = torch.tensor([time.perf_counter() - t0], device=dev)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.item() * 1e3

    # one layer alone (rank 0, the others idle): F, I, W, whole backward, CUDA events, median of 20
    layer = model[0]
    dy = torch.ones_like(source)
    f_ms = i_ms = w_ms = b_ms = None
    dist.barrier()
    if rank == 0:
        fs, is_, ws, bs = [], [], [], []
        for it in range(23):
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(6)]
            x = source.detach().requires_grad_()
            ev[0].record()
            y = layer(x)
            ev[1].record()
            Store.split = True
            torch.autograd.backward(y, grad_tensors=dy)
            Store.split = False
            ev[2].record()
            for fn in Store.pending:
                fn()
            Store.pending = []
            ev[3].record()
            x = source.detach().requires_grad_()
            y = layer(x)
            ev[4].record()
            torch.autograd.backward(y, grad_tensors=dy)
            ev[5].record()
            torch.cuda.synchronize()
            if it >= 3:
                fs.append(ev[0].elapsed_time(ev[1]))
                is_.append(ev[1].elapsed_time(ev[2]))
                ws.append(ev[2].elapsed_time(ev[3]))
                bs.append(ev[4].elapsed_time(ev[5]))
        f_ms, i_ms, w_ms, b_ms = (statistics.median(v) for v in (fs, is_, ws, bs))
        print(f"one layer alone: F {f_ms:.3f} ms, I {i_ms:.3f}, W {w_ms:.3f} (I + W {i_ms + w_ms:.3f}), whole backward {b_ms:.3f}",
              flush=True)
    layer.zero_grad(set_to_none=True)
    costs = torch.tensor([f_ms or 0.0, i_ms or 0.0, w_ms or 0.0], device=dev)
    dist.broadcast(costs, 0)
    cost = {"F": costs[0].item(), "I": costs[1].item(), "W": costs[2].item()}

    results = []
    baseline_done = set()
    for path in a.orders:
        spec = json.load(open(path))
        if spec["pp"] != P:
            raise SystemExit(f"{path}: pp {spec['pp']}, but {P} ranks run")
        M = spec["microbatches"]
        name_zb = spec.get("schedule", "zb-h1")  # the order's family: zb-h1, zb-h2, ...
        zb = megatron_plan.plan_zb(megatron_plan.parse_order(spec["ranks"]), P, cost)
        plans = {} if M in baseline_done else {"1f1b": megatron_plan.plan_1f1b(P, M)}
        baseline_done.add(M)
        plans[name_zb] = zb
        if a.single_ops:
            # the same order with each send and receive its own batch_isend_irecv (no batch couples
            # a consumer to a send): what the fork's batching costs
            plans[name_zb + "-single-ops"] = [[x for st in r_ for x in ([("post", [op]) for op in st[1]] if st[0] == "post" else [st])]
                                              for r_ in zb]
        for name, plan in plans.items():
            megatron_plan.check(plan, P)
            for _ in range(a.warmup):
                timed_step(plan[rank])
            t_from = time.time()
            ts = [timed_step(plan[rank]) for _ in range(a.timed)]
            t_to = time.time()
            # one more step with CUDA events around every step: each rank's GPU timeline
            trace = []
            model.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            dist.barrier()
            ref = torch.cuda.Event(enable_timing=True)
            ref.record()
            run_step(plan[rank], True, trace)
            torch.cuda.synchronize()
            mine = [[k, x, ref.elapsed_time(e0), ref.elapsed_time(e1)] for k, x, e0, e1 in trace]
            everyone = [None] * P
            dist.all_gather_object(everyone, mine)
            row = {"schedule": name, "microbatches": M, "step_ms": statistics.median(ts), "steps_ms": ts,
                   "comm_steps_rank0": sum(1 for st in plan[0] if st[0] in ("call", "post")), "timeline": everyone,
                   "timed_unix_s": [t_from, t_to]}
            results.append(row)
            if rank == 0:
                print(f"{name:6} M={M:3} step {row['step_ms']:9.2f} ms (min {min(ts):.2f}, max {max(ts):.2f}; "
                      f"{row['comm_steps_rank0']} batches on rank 0)", flush=True)

    big, small, gbps = link_0_to_1(torch, dist, dev, rank, b * s * h)
    if rank == 0:
        nbytes = b * s * h * 2
        print(f"link 0->1: {nbytes / 1e6:.1f} MB in {big * 1e3:.3f} ms, 4 KB in {small * 1e3:.3f} ms: {gbps:.0f} GB/s", flush=True)
        out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
               "nccl": ".".join(map(str, torch.cuda.nccl.version())), "ranks": P, "hidden": h, "heads": nh, "ffn": a.ffn,
               "seq": s, "batch": b, "layers_per_rank": a.layers_per_rank, "gmtoff_s": time.localtime().tm_gmtoff, "layer_f_ms": f_ms, "layer_i_ms": i_ms,
               "layer_w_ms": w_ms, "layer_b_ms": b_ms,
               "link": {"activation_bytes": nbytes, "activation_ms": big * 1e3, "small_ms": small * 1e3, "gbps": gbps},
               "results": results}
        with open(os.path.join(a.out, "zb_runtime.json"), "w") as fh:
            json.dump(out, fh, indent=1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
