#!/usr/bin/env python3
"""Record one PyTorch profiler trace per rank of a torch.distributed.pipelining run, for
`ppsim import-trace rank0.json.gz rank1.json.gz --schedule executed`.

Run on one host with 2 (or more) CUDA GPUs, torch 2.11 (nothing is downloaded):

    torchrun --standalone --nproc-per-node 2 tools/experiments/record_pp_traces.py --out DIR

Keep NCCL_NVLS_ENABLE=0 (and TORCH_SYMM_MEM_DISABLE_MULTICAST=1) set, as on the lent machines.
For each schedule of --schedules (default Interleaved1F1B, ZBVZeroBubble, DualPipeV: each holds
two stages per rank, so each runs through `_PipelineScheduleRuntime`, which wraps every action in
a `PP:{action}` range; 1F1B and GPipe, PyTorch's single-stage schedules, hold one stage per rank
with the same blocks, --stages-per-rank x --layers-per-stage, so that every schedule runs one model;
GPipe marks each action 'Forward i' / 'Backward i', and for 1F1B this script marks its stage's
forward and backward calls the same way; ZBV splits the backward into I and W, DualPipeV pairs F
with B as `PP:(aFm;bBn)OVERLAP_F_B`) the script runs a few warm-up steps, then records one step on every
rank (with --steady-s, after at least that long of steps and the timed steps, no idle GPU between) and writes DIR/pp_{schedule}_rank{r}.json.gz (Kineto writes distributedInfo.rank in each).
The model: --stages-per-rank x world stages, each --layers-per-stage residual MLP blocks
(bf16, hidden --hidden), fed --microbatches micro-batches of --batch x --seq tokens.
Rank 0 also writes DIR/pp_runs.json: the settings and each schedule's measured step time
(CUDA events, the mean of --timed steps after the recorded one, and each of them: steps_ms).
"""
import argparse
import gzip
import json
import math
import os
import shutil
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--schedules", default="Interleaved1F1B,ZBVZeroBubble,DualPipeV")
    ap.add_argument("--stages-per-rank", type=int, default=2)
    ap.add_argument("--layers-per-stage", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--block", choices=["mlp", "llama"], default="mlp",
                    help="mlp: residual GELU MLP blocks; llama: Llama-style layers (RMSNorm, causal attention through "
                         "SDPA with --heads, SwiGLU MLP of --ffn), no biases")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--ffn", type=int, default=11008)
    ap.add_argument("--batch", type=int, default=4, help="sequences per micro-batch")
    ap.add_argument("--seq", type=int, default=2048, help="(with --hidden 4096: ~7 ms per stage forward on an H100, so that the GPU, not the host, sets the step)")
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--timed", type=int, default=5)
    ap.add_argument("--steady-s", type=float, default=0.0,
                    help="measure in the power-limited steady state: warm up for at least this many seconds of "
                         "back-to-back steps (and --warmup steps), then time --timed steps, then profile the next "
                         "one, with no host synchronisation between them (0: the first form: --warmup steps, the "
                         "profiled step, its export with the GPU idle, then the timed steps from an idle GPU)")
    ap.add_argument("--layer-ranges", action="store_true",
                    help="wrap each layer's attention and MLP (each with its norm and residual add) in "
                         "'layers.{l}.attention.F' / 'layers.{l}.mlp.F' ranges, l the layer's number in the whole model, "
                         "so that `ppsim import-trace` and `ppsim calibrate` find per-layer work (docs/TRACES.md)")
    ap.add_argument("--orders", action="store_true",
                    help="rank 0 writes DIR/order_{schedule}.csv: PyTorch's own compute order of each multi-stage "
                         "schedule (`_dump_csv`), for `ppsim compare --schedule-file`")
    return ap.parse_args()


def main():
    a = parse_args()
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.distributed import pipelining as pp

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from cuda_timing import init_torchrun
    rank, world, dev = init_torchrun(torch, dist)
    os.makedirs(a.out, exist_ok=True)

    class Block(nn.Module):
        def __init__(self, h):
            super().__init__()
            self.norm = nn.LayerNorm(h)
            self.up = nn.Linear(h, 4 * h)
            self.down = nn.Linear(4 * h, h)

        def forward(self, x):
            return x + self.down(F.gelu(self.up(self.norm(x))))

    class LlamaBlock(nn.Module):
        def __init__(self, h):
            super().__init__()
            self.attn_norm = nn.RMSNorm(h)
            self.qkv = nn.Linear(h, 3 * h, bias=False)
            self.o = nn.Linear(h, h, bias=False)
            self.mlp_norm = nn.RMSNorm(h)
            self.gate_up = nn.Linear(h, 2 * a.ffn, bias=False)
            self.down = nn.Linear(a.ffn, h, bias=False)

        def forward(self, x):
            b, s, h = x.shape
            q, k, v = self.qkv(self.attn_norm(x)).view(b, s, 3, a.heads, h // a.heads).permute(2, 0, 3, 1, 4)
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, h)
            x = x + self.o(att)
            g, u = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
            return x + self.down(F.silu(g) * u)

        def ranged(self, x, layer):
            # The same work as forward, in two ranges: attention (norm, QKV, SDPA, output
            # projection, residual add) and MLP (norm, gate/up, SwiGLU, down, residual add).
            b, s, h = x.shape
            with record_function(f"layers.{layer}.attention.F"):
                q, k, v = self.qkv(self.attn_norm(x)).view(b, s, 3, a.heads, h // a.heads).permute(2, 0, 3, 1, 4)
                att = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, h)
                x = x + self.o(att)
            with record_function(f"layers.{layer}.mlp.F"):
                g, u = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
                return x + self.down(F.silu(g) * u)

    from torch.profiler import record_function

    class Stage(nn.Module):
        def __init__(self, h, n, first_layer):
            super().__init__()
            self.blocks = nn.ModuleList((LlamaBlock(h) if a.block == "llama" else Block(h)) for _ in range(n))
            self.first_layer = first_layer

        def forward(self, x):
            for i, b in enumerate(self.blocks):
                if a.layer_ranges and a.block == "llama":
                    x = b.ranged(x, self.first_layer + i)
                else:
                    x = b(x)
            return x

    def loss_fn(out, target):
        return F.mse_loss(out.float(), target.float())

    if a.steady_s > 0:
        # The profiler's first start initialises CUPTI (up to a second of host time): done here, so
        # that the profiled step below starts as fast as the next step would, the GPU still busy.
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]):
            torch.zeros(1, device=dev).add_(1)
        torch.cuda.synchronize()

    runs = {}
    for name in a.schedules.split(","):
        cls = getattr(pp, f"Schedule{name}")
        v_shape = name in ("ZBVZeroBubble", "DualPipeV")
        # PyTorch's single-stage schedules (1F1B, GPipe) take one stage per rank: it holds the
        # rank's --stages-per-rank x --layers-per-stage blocks, so every schedule runs one model.
        single = name in ("1F1B", "GPipe")
        per_rank = 1 if single else a.stages_per_rank
        layers = a.layers_per_stage * (a.stages_per_rank if single else 1)
        S = per_rank * world
        if single:
            ids = [rank]
        elif v_shape:
            ids = [rank, 2 * world - 1 - rank] if a.stages_per_rank == 2 else None
            if ids is None:
                raise SystemExit(f"{name}: two stages per rank")
        else:
            ids = [rank + k * world for k in range(a.stages_per_rank)]
        torch.manual_seed(1234)
        stages = []
        for s in ids:
            mod = Stage(a.hidden, layers, s * layers).to(device=dev, dtype=torch.bfloat16)
            stages.append(pp.PipelineStage(mod, s, S, dev))
        if name == "1F1B":
            # Schedule1F1B marks no ranges (ScheduleGPipe marks 'Forward i' / 'Backward i' around
            # each action and its calls): mark the stage's two compute calls the same way, so that
            # `ppsim import-trace` finds the actions; the calls between them stay outside.
            def marked(fn, label):
                def run(mb, *args, **kwargs):
                    with record_function(f"{label} {mb}"):
                        return fn(mb, *args, **kwargs)
                return run

            stages[0].forward_one_chunk = marked(stages[0].forward_one_chunk, "Forward")
            stages[0].backward_one_chunk = marked(stages[0].backward_one_chunk, "Backward")
        sched = cls(stages[0] if single else stages, n_microbatches=a.microbatches, loss_fn=loss_fn)
        first, last = 0 in ids, (S - 1) in ids
        if a.orders and rank == 0 and not single:
            try:
                sched._dump_csv(os.path.join(a.out, f"order_{name}.csv"))
            except Exception as e:  # a private API: report, keep measuring
                print(f"rank 0: {name}: no order written ({e!r})", flush=True)
        g = torch.Generator(device=dev)
        g.manual_seed(0)
        x = torch.randn(a.batch * a.microbatches, a.seq, a.hidden, device=dev, dtype=torch.bfloat16, generator=g)
        y = torch.randn(a.batch * a.microbatches, a.seq, a.hidden, device=dev, dtype=torch.bfloat16, generator=g)

        def step():
            losses = [] if last else None
            args = (x,) if first else ()
            sched.step(*args, target=y if last else None, losses=losses)
            for st in stages:
                st.submod.zero_grad(set_to_none=True)

        from torch.profiler import ProfilerActivity, profile

        def profiled_step():
            # One step under the profiler, its trace written (gzipped) once every rank has it.
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                step()
                torch.cuda.synchronize()
            raw = os.path.join(a.out, f"pp_{name}_rank{rank}.json")
            prof.export_chrome_trace(raw)
            with open(raw, "rb") as src, gzip.open(raw + ".gz", "wb", compresslevel=6) as dst:
                shutil.copyfileobj(src, dst)
            os.remove(raw)
            dist.barrier()
            return raw

        def timed_steps():
            # One event between consecutive steps (recording one does not wait): each timed step's own
            # time, so that the spread of one schedule's steps is known beside their mean.
            evs = [torch.cuda.Event(enable_timing=True) for _ in range(a.timed + 1)]
            evs[0].record()
            for i in range(a.timed):
                step()
                evs[i + 1].record()
            return evs

        warm_steps, t0 = 0, time.monotonic()
        for _ in range(max(a.warmup, 2 if a.steady_s > 0 else 0)):
            step()
            warm_steps += 1
            if warm_steps == 1 and a.steady_s > 0:
                torch.cuda.synchronize()
                t1 = time.monotonic()
        load_s = None
        if a.steady_s > 0:
            # Every rank must run the same steps: rank 0's step time (the first step, with its
            # allocations, left out) decides how many more make --steady-s seconds of load.
            torch.cuda.synchronize()
            per_step = (time.monotonic() - t1) / (warm_steps - 1)
            more = torch.tensor([max(0, math.ceil((a.steady_s - (time.monotonic() - t0)) / per_step))], device=dev)
            dist.broadcast(more, 0)
            for _ in range(int(more.item())):
                step()
                warm_steps += 1
            # Steady state: the timed steps and then the profiled one follow the warm-up with no idle
            # GPU between them (the power controller's warm start after an idle GPU is in neither).
            load_s = time.monotonic() - t0
            evs = timed_steps()
            raw = profiled_step()
        else:
            torch.cuda.synchronize()
            dist.barrier()
            raw = profiled_step()
            evs = timed_steps()
        torch.cuda.synchronize()
        steps = [evs[i].elapsed_time(evs[i + 1]) for i in range(a.timed)]
        runs[name] = {"stages": ids, "step_ms": sum(steps) / a.timed, "steps_ms": steps, "warmup_steps": warm_steps,
                      "warmup_load_s": load_s}
        print(f"rank {rank}: {name}: stages {ids}, step {runs[name]['step_ms']:.3f} ms, wrote {raw}.gz", flush=True)
        del sched, stages
        torch.cuda.empty_cache()
        # After every schedule, so that a later failure keeps the figures measured before it.
        all_runs = [None] * world
        dist.all_gather_object(all_runs, runs)
        if rank == 0:
            with open(os.path.join(a.out, "pp_runs.json"), "w") as f:
                json.dump({"torch": torch.__version__, "world": world, "settings": vars(a), "ranks": all_runs}, f,
                          indent=1)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
