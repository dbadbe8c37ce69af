#!/usr/bin/env python3
"""One fine-grained MoE transformer layer in PyTorch, timed on one GPU, against ppsim's figure.

The layer is Qwen3-30B-A3B's (hidden 2048, 32 query heads and 4 KV heads of 128, q/k RMSNorm,
128 routed experts of width 768, top-8, no shared expert), on one micro-batch of 4096 tokens in
BF16, every expert on the one GPU (expert parallelism 1): RMSNorm, fused QKV, per-head q/k norms,
rotary embedding, causal SDPA (flash, GQA), output projection, residual; RMSNorm, the router (fp32
softmax, top-8, renormalised), the tokens permuted by expert (argsort, gather), the experts'
gate+up and down projections as grouped GEMMs (torch._grouped_mm), SwiGLU, the routing weights,
the rows summed back to their tokens (index_add_), residual. Routing is force-balanced (token t's
j-th choice is expert (8t + j) mod 128: 256 rows per expert), as NVIDIA's MoE benchmarks force it.

Timed: forward, and forward + backward, of the whole layer and of its attention and MoE halves,
launched eagerly and replayed as one CUDA graph each; median of --reps after --warmup. The MoE
half is split further (router + permute + unpermute against the grouped GEMMs alone).

ppsim's figure for the same layer (docs/FIDELITY-MEASURED.md "A fine-grained MoE layer in
PyTorch" gives the command): F 1.53 ms, F + B 5.58 ms on the h200 type.

Usage: python3 measure_moe_layer.py [--tokens 4096] [--reps 20] [--warmup 5] [--json out.json]
"""
import argparse
import json
import sys

from cuda_timing import cuda_torch, median_ms

torch = cuda_torch("measure_moe_layer.py")
if torch is None:
    sys.exit(0)
import torch.nn.functional as F  # noqa: E402 - after the CUDA check

H, HEADS, KV, D = 2048, 32, 4, 128
E, K, FE = 128, 8, 768


def rope(x, cos, sin):
    x1, x2 = x[..., : D // 2], x[..., D // 2 :]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class Layer(torch.nn.Module):
    def __init__(self, tokens, dev):
        super().__init__()
        bf = dict(device=dev, dtype=torch.bfloat16)
        s = 0.02
        self.n1 = torch.nn.Parameter(torch.ones(H, **bf))
        self.qkv = torch.nn.Parameter(torch.randn(H, (HEADS + 2 * KV) * D, **bf) * s)
        self.qn = torch.nn.Parameter(torch.ones(D, **bf))
        self.kn = torch.nn.Parameter(torch.ones(D, **bf))
        self.o = torch.nn.Parameter(torch.randn(HEADS * D, H, **bf) * s)
        self.n2 = torch.nn.Parameter(torch.ones(H, **bf))
        self.router = torch.nn.Parameter(torch.randn(H, E, **bf) * s)
        self.w13 = torch.nn.Parameter(torch.randn(E, H, 2 * FE, **bf) * s)
        self.w2 = torch.nn.Parameter(torch.randn(E, FE, H, **bf) * s)
        pos = torch.arange(tokens, device=dev, dtype=torch.float32)
        inv = 1.0 / (1e6 ** (torch.arange(0, D, 2, device=dev, dtype=torch.float32) / D))
        ang = torch.outer(pos, inv)
        self.cos = torch.cat((ang.cos(), ang.cos()), -1)[:, : D // 2].to(torch.bfloat16)
        self.sin = torch.cat((ang.sin(), ang.sin()), -1)[:, : D // 2].to(torch.bfloat16)
        t = torch.arange(tokens, device=dev)
        self.choice = (8 * t[:, None] + torch.arange(K, device=dev)[None, :]) % E  # balanced
        rows = tokens * K
        self.offs = torch.arange(1, E + 1, device=dev, dtype=torch.int32) * (rows // E)

    def attention(self, x):
        T = x.shape[0]
        h = F.rms_norm(x, (H,), self.n1)
        qkv = h @ self.qkv
        q, k, v = qkv.split([HEADS * D, KV * D, KV * D], dim=-1)
        q = F.rms_norm(q.view(T, HEADS, D), (D,), self.qn)
        k = F.rms_norm(k.view(T, KV, D), (D,), self.kn)
        q = rope(q, self.cos[:, None, :], self.sin[:, None, :]).transpose(0, 1)[None]
        k = rope(k, self.cos[:, None, :], self.sin[:, None, :]).transpose(0, 1)[None]
        v = v.view(T, KV, D).transpose(0, 1)[None]
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return x + a[0].transpose(0, 1).reshape(T, HEADS * D) @ self.o

    def route(self, h):
        logits = (h @ self.router).float()
        probs = logits.softmax(-1)
        probs.topk(K, dim=-1)  # the router's top-k is run (and timed); the balanced choice is used
        w = probs.gather(1, self.choice)
        w = (w / w.sum(-1, keepdim=True)).to(torch.bfloat16)
        order = self.choice.flatten().argsort(stable=True)
        return w, order

    def experts(self, xp):
        gu = torch._grouped_mm(xp, self.w13, offs=self.offs)
        g, u = gu.chunk(2, dim=-1)
        return torch._grouped_mm(F.silu(g) * u, self.w2, offs=self.offs)

    def moe(self, x):
        T = x.shape[0]
        h = F.rms_norm(x, (H,), self.n2)
        w, order = self.route(h)
        token = order // K
        y = self.experts(h[token]) * w.flatten()[order][:, None]
        return x + torch.zeros_like(x).index_add_(0, token, y)

    def forward(self, x):
        return self.moe(self.attention(x))


def timed(fn, reps, warmup):
    return median_ms(torch, fn, reps, warmup)


def graphed(fn, warmup):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g.replay


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    layer = Layer(a.tokens, dev)
    x = torch.randn(a.tokens, H, device=dev, dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn_like(x)
    h = F.rms_norm(x.detach(), (H,), layer.n2)
    w, order = layer.route(h)
    xp = h[order // K].detach().requires_grad_(True)
    dxp = torch.randn(xp.shape[0], H, device=dev, dtype=torch.bfloat16)

    def fwd(f, inp):
        def run():
            with torch.no_grad():
                f(inp)
        return run

    def fwd_bwd(f, inp, grad):
        def run():
            inp.grad = None
            for p in layer.parameters():
                p.grad = None
            f(inp).backward(grad)
        return run

    parts = {
        "layer": (layer.forward, x, dy),
        "attention half": (layer.attention, x, dy),
        "MoE half": (layer.moe, x, dy),
        "grouped GEMMs (gate+up, SwiGLU, down)": (layer.experts, xp, dxp),
    }
    rows = []
    for name, (f, inp, grad) in parts.items():
        row = {"part": name}
        for mode, make in (("F", lambda: fwd(f, inp)), ("F+B", lambda: fwd_bwd(f, inp, grad))):
            try:
                row[mode + " eager ms"] = timed(make(), a.reps, a.warmup)
            except Exception as e:  # noqa: BLE001
                row[mode + " eager ms"] = row[mode + " graph ms"] = None
                row[mode + " eager error"] = str(e).splitlines()[0][:120]
                continue
            try:
                row[mode + " graph ms"] = timed(graphed(make(), a.warmup), a.reps, a.warmup)
            except Exception as e:  # noqa: BLE001 - a part that cannot be captured says so
                row[mode + " graph ms"] = None
                row[mode + " graph error"] = str(e).splitlines()[0][:120]
        rows.append(row)
    props = torch.cuda.get_device_properties(0)
    info = {"gpu": props.name, "torch": torch.__version__, "tokens": a.tokens, "rows": rows}
    cols = ["F eager ms", "F graph ms", "F+B eager ms", "F+B graph ms"]
    print(f"{props.name}, torch {torch.__version__}, {a.tokens} tokens, median of {a.reps}")
    print(f"{'part':40s}" + "".join(f"{c:>14s}" for c in cols))
    for r in rows:
        print(f"{r['part']:40s}" + "".join(f"{r[c]:14.3f}" if r[c] is not None else f"{'-':>14s}" for c in cols))
        for c in ("F eager error", "F graph error", "F+B eager error", "F+B graph error"):
            if c in r:
                print(f"   {c}: {r[c]}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(info, fh, indent=1)


if __name__ == "__main__":
    main()
