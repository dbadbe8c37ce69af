#!/usr/bin/env python3
"""Record PyTorch profiler (Kineto) traces of a small MoE model for `ppsim import-trace`.

Run on a machine with one CUDA GPU and torch installed (written for torch 2.11, Python 3.12):

    python3 tools/experiments/record_moe_trace.py --out DIR

It writes into DIR
  pair_trace.json        two overlapped chunks as DualPipe runs them (range "pair"): the forward
                         of micro-batch 1 and the full backward of micro-batch 0 through the same
                         L MoE layers, compute sub-ops on one CUDA stream, dispatch/combine on a
                         second one, in DeepSeek's order (the order ppsim's overlap model uses,
                         src/sim/overlap.h); before it a plain F of micro-batch 0 ("warmup.F"),
                         after it a plain B of micro-batch 1 ("cooldown.B"), which show each
                         kernel away from communication
  onef1b_trace.json.gz   one whole 1F1B step (P virtual stages on this one GPU, M micro-batches),
                         run in one valid serial order on one stream
  pair_config.yaml, pair.csv   a config naming pair_profile.yaml (written by import-trace) and the
                         one-rank schedule F(0), (F(1); B(0)), B(1), for `ppsim simulate`
  measured.json          the figures to compare with: the pair's span and its compute stream's busy
                         time, the 1F1B step time (each from CUDA events and from the trace's
                         kernels), and the commands that check them
and prints what it wrote. docs/TRACES.md says what the figures mean and what ppsim must reproduce.

The model, per layer: attention (QKV and output projections, causal softmax attention written out
as matmuls), a router (expert-choice: each expert takes its top-C tokens, so every shape is fixed
and nothing waits on the host), dispatch (an index gather: the permute an all-to-all would do),
experts (a SwiGLU-free SiLU MLP per expert, batched), combine (an index add back: the un-permute).
The backward is written by hand (no autograd), so that its input-grad (I) and weight-grad (W)
parts are separate record_function ranges, launched from this thread: ranges named
`layer{l}.{attn,router,dispatch,mlp,combine}.{F,I,W,B}`, which import-trace's default rules map.
The router's own gradient is left out (its gates are treated as constants).
"""
import argparse
import gzip
import json
import os
import sys
import time
import traceback


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="directory for the traces and measured.json")
    ap.add_argument("--layers", type=int, default=8, help="MoE layers of the 1F1B model (a multiple of --pp)")
    ap.add_argument("--pair-layers", type=int, default=4, help="layers in each chunk of the F&B pair")
    ap.add_argument("--pp", type=int, default=4, help="virtual pipeline stages of the 1F1B step")
    ap.add_argument("--microbatches", type=int, default=8, help="micro-batches of the 1F1B step")
    ap.add_argument("--batch", type=int, default=16, help="sequences per micro-batch (16 x 1024 tokens: kernels long enough that the trace is not host-bound; docs/TRACES.md)")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--expert-ffn", type=int, default=4096)
    return ap.parse_args()


class Moe:
    """Weights, saved activations and the hand-written passes of an MoE transformer."""

    def __init__(self, torch, args, layers, device):
        self.t = torch
        self.B, self.S, self.H = args.batch, args.seq, args.hidden
        self.nh = args.heads
        self.hd = self.H // self.nh
        self.T = self.B * self.S
        self.E = args.experts
        self.C = self.T * args.top_k // self.E  # tokens per expert (expert-choice capacity)
        self.Fe = args.expert_ffn
        self.dt = torch.bfloat16
        self.dev = device
        self.scale = 1.0 / (self.hd ** 0.5)
        g = torch.Generator(device=device)
        g.manual_seed(0)

        def w(*shape, std=0.02):
            return (torch.randn(*shape, device=device, generator=g, dtype=torch.float32) * std).to(self.dt)

        self.p = []
        for _ in range(layers):
            H, E, Fe = self.H, self.E, self.Fe
            self.p.append({
                "wq": w(H, H), "wk": w(H, H), "wv": w(H, H), "wo": w(H, H), "wr": w(H, E),
                "w1": w(E, H, Fe), "w2": w(E, Fe, H),
            })
        self.g = [{k: torch.zeros_like(v) for k, v in p.items() if k != "wr"} for p in self.p]
        self.mask = torch.full((self.S, self.S), float("-inf"), device=device, dtype=self.dt).triu(1)

    def rf(self, name):
        return self.t.profiler.record_function(name)

    def heads(self, x):  # [T, H] -> [B, nh, S, hd]
        return x.view(self.B, self.S, self.nh, self.hd).transpose(1, 2)

    def flat(self, x):  # [B, nh, S, hd] -> [T, H]
        return x.transpose(1, 2).reshape(self.T, self.H)

    # ---- forward sub-ops (each returns what the next needs; `sv` collects saved tensors) ------
    def attn_f(self, l, x, sv):
        t, p = self.t, self.p[l]
        with self.rf(f"layer{l}.attn.F"):
            q, k, v = self.heads(x @ p["wq"]), self.heads(x @ p["wk"]), self.heads(x @ p["wv"])
            s = (q @ k.transpose(-1, -2)) * self.scale + self.mask
            pr = t.softmax(s.float(), dim=-1).to(self.dt)
            o2 = self.flat(pr @ v)
            h = x + o2 @ p["wo"]
        with self.rf(f"layer{l}.router.F"):
            scores = t.softmax((h @ p["wr"]).float(), dim=-1)  # [T, E]
            gates, idx = t.topk(scores.t(), self.C, dim=-1)     # [E, C]: expert-choice
            gates = gates.to(self.dt)
        sv.update(x=x, q=q, k=k, v=v, pr=pr, o2=o2, h=h, idx=idx.reshape(-1), gates=gates)
        return h

    def dispatch_f(self, l, sv):
        with self.rf(f"layer{l}.dispatch.F"):
            sv["xe"] = sv["h"].index_select(0, sv["idx"]).view(self.E, self.C, self.H)

    def mlp_f(self, l, sv):
        t, p = self.t, self.p[l]
        with self.rf(f"layer{l}.mlp.F"):
            a = t.bmm(sv["xe"], p["w1"])
            act = t.nn.functional.silu(a)
            he = t.bmm(act, p["w2"]) * sv["gates"].unsqueeze(-1)
        sv.update(a=a, act=act, he=he)

    def combine_f(self, l, sv):
        with self.rf(f"layer{l}.combine.F"):
            y = sv["h"].index_add(0, sv["idx"], sv.pop("he").view(-1, self.H))
        return y

    # ---- backward sub-ops: input grad (I), weight grad (W) ---------------------------------
    def combine_b(self, l, sv, dy):
        with self.rf(f"layer{l}.combine.B"):
            sv["dhe"] = dy.index_select(0, sv["idx"]).view(self.E, self.C, self.H) * sv["gates"].unsqueeze(-1)
            sv["dy_out"] = dy

    def mlp_i(self, l, sv):
        t, p = self.t, self.p[l]
        with self.rf(f"layer{l}.mlp.I"):
            dact = t.bmm(sv["dhe"], p["w2"].transpose(1, 2))
            sig = t.sigmoid(sv["a"])
            da = dact * (sig * (1 + sv["a"] * (1 - sig)))
            sv["dxe"] = t.bmm(da, p["w1"].transpose(1, 2))
            sv["da"] = da

    def mlp_w(self, l, sv):
        g = self.g[l]
        with self.rf(f"layer{l}.mlp.W"):
            g["w2"].baddbmm_(sv["act"].transpose(1, 2), sv["dhe"])
            g["w1"].baddbmm_(sv["xe"].transpose(1, 2), sv["da"])

    def dispatch_b(self, l, sv):
        with self.rf(f"layer{l}.dispatch.B"):
            sv["dh"] = sv["dy_out"].index_add(0, sv["idx"], sv["dxe"].view(-1, self.H))

    def attn_i(self, l, sv):
        p = self.p[l]
        with self.rf(f"layer{l}.attn.I"):
            dh = sv["dh"]
            do = self.heads(dh @ p["wo"].t())
            dp = do @ sv["v"].transpose(-1, -2)
            dv = sv["pr"].transpose(-1, -2) @ do
            ds = sv["pr"] * (dp - (dp * sv["pr"]).sum(-1, keepdim=True)) * self.scale
            dq, dk = ds @ sv["k"], ds.transpose(-1, -2) @ sv["q"]
            dqf, dkf, dvf = self.flat(dq), self.flat(dk), self.flat(dv)
            dx = dh + dqf @ p["wq"].t() + dkf @ p["wk"].t() + dvf @ p["wv"].t()
        sv.update(dqf=dqf, dkf=dkf, dvf=dvf)
        return dx

    def attn_w(self, l, sv):
        g = self.g[l]
        with self.rf(f"layer{l}.attn.W"):
            g["wo"].addmm_(sv["o2"].t(), sv["dh"])
            g["wq"].addmm_(sv["x"].t(), sv["dqf"])
            g["wk"].addmm_(sv["x"].t(), sv["dkf"])
            g["wv"].addmm_(sv["x"].t(), sv["dvf"])

    # ---- whole layers, serial on the current stream -----------------------------------------
    def layer_f(self, l, x):
        sv = {}
        self.attn_f(l, x, sv)
        self.dispatch_f(l, sv)
        self.mlp_f(l, sv)
        return self.combine_f(l, sv), sv

    def layer_b(self, l, sv, dy):
        """Full backward (I then W), in the overlap model's order for a plain B."""
        self.combine_b(l, sv, dy)
        self.mlp_i(l, sv)
        self.mlp_w(l, sv)
        self.dispatch_b(l, sv)
        dx = self.attn_i(l, sv)
        self.attn_w(l, sv)
        sv.clear()
        return dx


def load_events(trace_path):
    opener = gzip.open if trace_path.endswith(".gz") else open
    with opener(trace_path, "rt") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def launches_in(trace_path, range_name):
    """Correlation ids of the runtime launches made inside the CPU range `range_name`."""
    events = load_events(trace_path)
    spans = [(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in events
             if e.get("ph") == "X" and e.get("name") == range_name and e.get("cat") == "user_annotation"]
    if not spans:
        raise RuntimeError(f"{trace_path}: no '{range_name}' range in the trace")
    a, b = spans[0]
    return {(e.get("args") or {}).get("correlation") for e in events
            if e.get("ph") == "X" and str(e.get("cat", "")).lower() in ("cuda_runtime", "cuda_driver")
            and a <= float(e["ts"]) <= b}


def kernel_figures(trace_path, within=None):
    """Span, per-stream busy time (union of kernel intervals) from a Chrome trace, in ms; only the
    kernels whose correlation id is in `within` when given."""
    events = load_events(trace_path)
    by_stream = {}
    for e in events:
        if e.get("ph") != "X" or str(e.get("cat", "")).lower() not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        if within is not None and (e.get("args") or {}).get("correlation") not in within:
            continue
        s = (e.get("args") or {}).get("stream", e.get("tid"))
        by_stream.setdefault(s, []).append((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))))
    if not by_stream:
        raise RuntimeError(f"{trace_path}: no GPU kernels in the trace")

    def union(iv):
        iv.sort()
        tot, cur_s, cur_e = 0.0, None, None
        for s, e in iv:
            if cur_e is None or s > cur_e:
                if cur_e is not None:
                    tot += cur_e - cur_s
                cur_s, cur_e = s, e
            else:
                cur_e = max(cur_e, e)
        return tot + ((cur_e - cur_s) if cur_e is not None else 0.0)

    busy = {str(s): union(list(iv)) / 1e3 for s, iv in by_stream.items()}
    first = min(s for iv in by_stream.values() for s, _ in iv)
    last = max(e for iv in by_stream.values() for _, e in iv)
    return {"span_ms": (last - first) / 1e3, "busy_ms_by_stream": busy}


def record_pair(torch, args, out, figures):
    L = args.pair_layers
    m = Moe(torch, args, L, "cuda")
    # Two created streams (not the legacy default stream, which would serialize with the other).
    comp, comm = torch.cuda.Stream(), torch.cuda.Stream()
    x0 = torch.randn(m.T, m.H, device="cuda", dtype=m.dt)
    dy_top = torch.randn(m.T, m.H, device="cuda", dtype=m.dt) * 1e-3

    def forward_all(x):
        saved = []
        for l in range(L):
            x, sv = m.layer_f(l, x)
            saved.append(sv)
        return x, saved

    def pair(saved_b):
        """F of micro-batch 1 (layers 0..L-1) with the full B of micro-batch 0 (layers L-1..0).

        DeepSeek's order per layer (src/sim/overlap.cc): combine(B), attention(F), MLP(B),
        dispatch(F), dispatch(B), MLP(W), MLP(F), attention(B), attention(W), combine(F);
        compute on `comp`, dispatch/combine on `comm`, cross-stream edges as CUDA events."""
        def ev(stream):
            e = torch.cuda.Event()
            e.record(stream)
            return e

        x_f, dy_b = x0, dy_top
        saved_f = []
        f_prev = None   # event: the previous F layer's combine done (on comm)
        b_prev = None   # event: the previous B layer's attention input-grad done (on comp)
        comm.wait_stream(comp)
        for i in range(L):  # runs with `comp` as the current stream (see run_step)
            lb = L - 1 - i
            svf, svb = {}, saved_b[lb]
            saved_f.append(svf)
            with torch.cuda.stream(comm):                    # combine(B)
                if b_prev is not None:
                    comm.wait_event(b_prev)
                m.combine_b(lb, svb, dy_b)
                e_comb_b = ev(comm)
            if f_prev is not None:                            # attention(F) + router
                comp.wait_event(f_prev)
            m.attn_f(i, x_f, svf)
            e_attn_f = ev(comp)
            comp.wait_event(e_comb_b)                         # MLP(B) input-grad
            m.mlp_i(lb, svb)
            e_mlp_b = ev(comp)
            with torch.cuda.stream(comm):                    # dispatch(F), dispatch(B)
                comm.wait_event(e_attn_f)
                m.dispatch_f(i, svf)
                e_disp_f = ev(comm)
                comm.wait_event(e_mlp_b)
                m.dispatch_b(lb, svb)
                e_disp_b = ev(comm)
            m.mlp_w(lb, svb)                                  # MLP(W)
            comp.wait_event(e_disp_f)                         # MLP(F)
            m.mlp_f(i, svf)
            e_mlp_f = ev(comp)
            comp.wait_event(e_disp_b)                         # attention(B), attention(W)
            dy_b = m.attn_i(lb, svb)
            m.attn_w(lb, svb)
            b_prev = ev(comp)
            with torch.cuda.stream(comm):                    # combine(F)
                comm.wait_event(e_mlp_f)
                x_f = m.combine_f(i, svf)
                f_prev = ev(comm)
        comp.wait_event(f_prev)                               # join: the pair ends on comp
        return x_f, saved_f

    def run_step(start=None, end=None):
        """As DualPipe's steady state around one pair: a plain F of micro-batch 0, the pair (F of
        1 with B of 0), a plain B of 1. The plain ops run each kernel away from communication,
        the pair beside it: the importer reads the slowdown from the two (docs/TRACES.md)."""
        comp.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(comp):
            with torch.profiler.record_function("warmup.F"):
                _, saved0 = forward_all(x0)
            with torch.profiler.record_function("pair"):
                if start is not None:
                    start.record(comp)
                _, saved1 = pair(saved0)
                if end is not None:
                    end.record(comp)
            with torch.profiler.record_function("cooldown.B"):
                dy = dy_top
                for l in reversed(range(L)):
                    dy = m.layer_b(l, saved1[l], dy)
        torch.cuda.synchronize()

    for _ in range(2):  # warm-up: cuBLAS heuristics, allocator
        run_step()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        run_step(start, end)
    path = os.path.join(out, "pair_trace.json")
    prof.export_chrome_trace(path)
    k = kernel_figures(path, within=(launches_in(path, "pair")))
    busy = k["busy_ms_by_stream"]
    comp_stream = max(busy, key=busy.get)  # the compute stream holds most of the kernel time
    figures["pair"] = {
        "trace": path, "layers_per_chunk": L,
        "span_ms_cuda_events": start.elapsed_time(end),
        "span_ms_trace": k["span_ms"],
        "compute_stream": comp_stream,
        "compute_busy_ms_trace": busy[comp_stream],
        "busy_ms_by_stream": busy,
    }
    print(f"wrote {path}: F&B pair of {L} layers per chunk, span {k['span_ms']:.3f} ms "
          f"(CUDA events {start.elapsed_time(end):.3f} ms), compute stream {comp_stream} busy {busy[comp_stream]:.3f} ms")


def onef1b_order(P, M):
    """Per-rank 1F1B order (Megatron): warm-up min(P-1-r, M) F, then (F, B) pairs, then B."""
    orders = []
    for r in range(P):
        w = min(P - 1 - r, M)
        o = [("F", m) for m in range(w)]
        for i in range(M - w):
            o += [("F", w + i), ("B", i)]
        o += [("B", m) for m in range(M - w, M)]
        orders.append(o)
    return orders


def record_1f1b(torch, args, out, figures):
    P, M, L = args.pp, args.microbatches, args.layers
    if L % P != 0:
        raise ValueError(f"--layers {L} must be a multiple of --pp {P}")
    per = L // P
    m = Moe(torch, args, L, "cuda")
    x0 = torch.randn(m.T, m.H, device="cuda", dtype=m.dt)
    dy_top = torch.randn(m.T, m.H, device="cuda", dtype=m.dt) * 1e-3
    orders = onef1b_order(P, M)

    def step():
        # One valid serial order on one stream: sweep the ranks, each running its next op once
        # its input is there (F(s, m) after F(s-1, m); B(s, m) after B(s+1, m), the last stage
        # after its own F), until every op ran.
        nxt = [0] * P
        acts, grads, saved = {}, {}, {}
        done_f, done_b = set(), set()
        left = sum(len(o) for o in orders)
        while left:
            progressed = False
            for s in range(P):
                if nxt[s] >= len(orders[s]):
                    continue
                kind, mb = orders[s][nxt[s]]
                if kind == "F" and (s == 0 or (s - 1, mb) in done_f):
                    x = x0 if s == 0 else acts.pop((s - 1, mb))
                    svs = []
                    with m.rf(f"1f1b.stage{s}.F.mb{mb}"):
                        for l in range(s * per, (s + 1) * per):
                            x, sv = m.layer_f(l, x)
                            svs.append(sv)
                    saved[(s, mb)] = svs
                    acts[(s, mb)] = x
                    done_f.add((s, mb))
                elif kind == "B" and ((s == P - 1 and (s, mb) in done_f) or (s + 1, mb) in done_b):
                    dy = dy_top if s == P - 1 else grads.pop((s + 1, mb))
                    if s == P - 1:
                        acts.pop((s, mb), None)
                    svs = saved.pop((s, mb))
                    with m.rf(f"1f1b.stage{s}.B.mb{mb}"):
                        for l in reversed(range(s * per, (s + 1) * per)):
                            dy = m.layer_b(l, svs[l - s * per], dy)
                    grads[(s, mb)] = dy
                    done_b.add((s, mb))
                else:
                    continue
                nxt[s] += 1
                left -= 1
                progressed = True
            if not progressed:
                raise RuntimeError("1F1B order deadlocked (a bug in this script)")

    step()  # warm-up
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        start.record()
        step()
        end.record()
        torch.cuda.synchronize()
    plain = os.path.join(out, "onef1b_trace.json")
    prof.export_chrome_trace(plain)
    path = plain + ".gz"
    with open(plain, "rb") as src, gzip.open(path, "wb", compresslevel=6) as dst:
        dst.write(src.read())
    os.remove(plain)
    k = kernel_figures(path)
    figures["1f1b"] = {
        "trace": path, "pp": P, "microbatches": M, "layers": L, "layers_per_chunk": per,
        "step_ms_cuda_events": start.elapsed_time(end),
        "step_ms_trace": k["span_ms"],
        "busy_ms_by_stream": k["busy_ms_by_stream"],
    }
    print(f"wrote {path}: 1F1B step, P={P} virtual stages on one GPU, M={M}, {L} layers, "
          f"step {k['span_ms']:.3f} ms (CUDA events {start.elapsed_time(end):.3f} ms)")


def main():
    args = parse_args()
    t0 = time.time()
    os.makedirs(args.out, exist_ok=True)
    try:
        import torch
    except ImportError:
        print("record_moe_trace: torch is not installed (pip install torch)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("record_moe_trace: no CUDA device: nothing recorded", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = True
    figures = {
        "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
        "model": {k: getattr(args, k) for k in ("batch", "seq", "hidden", "heads", "experts", "top_k", "expert_ffn")},
    }
    failed = []
    for name, fn in (("pair", record_pair), ("1f1b", record_1f1b)):
        try:
            with torch.no_grad():
                fn(torch, args, args.out, figures)
        except Exception as e:  # keep what the other recording wrote
            failed.append(name)
            figures[name + "_error"] = f"{type(e).__name__}: {e}"
            traceback.print_exc()
            print(f"record_moe_trace: the {name} recording failed: {e}", file=sys.stderr)
        torch.cuda.empty_cache()
    d = args.out
    # A config for `ppsim simulate` of the pair with the imported profile (pipeline of one rank:
    # F(0), the pair (F(1); B(0)), B(1); the pair's duration is the JSON's fb_pair_time).
    with open(os.path.join(d, "pair_config.yaml"), "w") as f:
        f.write(
            "# the pair's model for `ppsim simulate` (costs from the imported profile)\n"
            f"model: {{layers: {args.pair_layers}, hidden: {args.hidden}, heads: {args.heads}, vocab: 32000, "
            f"seq_len: {args.seq}, moe: {{experts: {args.experts}, top_k: {args.top_k}, "
            f"expert_ffn_hidden: {args.expert_ffn}}}}}\n"
            "hardware: {name: h100}\n"
            "parallel: {pp: 1, microbatches: 2, embedding_on_first: false, head_on_last: false}\n"
            "profile: pair_profile.yaml\n")
    with open(os.path.join(d, "pair.csv"), "w") as f:
        f.write("0F0,(0F1;0B0)OVERLAP_F_B,0B1\n")
    figures["check"] = [
        f"ppsim import-trace {d}/pair_trace.json -o {d}/pair_profile.yaml --step-range '^pair$' --schedule pair",
        f"ppsim import-trace {d}/onef1b_trace.json.gz -o {d}/onef1b_profile.yaml --schedule 1f1b "
        f"--pp {args.pp} --microbatches {args.microbatches} --devices 1",
        f"ppsim simulate {d}/pair_config.yaml --schedule-file {d}/pair.csv --format json  # fb_pair_time",
    ]
    figures["seconds"] = round(time.time() - t0, 1)
    path = os.path.join(d, "measured.json")
    with open(path, "w") as f:
        json.dump(figures, f, indent=2)
    print(f"wrote {path} ({figures['seconds']} s in all)")
    print("check with:\n  " + "\n  ".join(figures["check"]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
