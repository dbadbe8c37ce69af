#!/usr/bin/env python3
"""How the efficiency of causal flash attention depends on how many keys each query sees
(docs/FIDELITY-MEASURED.md, "Attention and the keys per query"). Llama 3 405B's per-GPU heads under
TP 8 (16 query heads, one K/V head, head dim 128), batch 1:

- self-attention, causal, at 1K to 64K tokens (each query sees s/2 keys on average);
- context parallelism as Llama 3 trained 131K tokens (CP 16, K/V all-gathered, section 3.3.2; the
  sequence in 2 x 16 chunks of 4096, rank j holding chunks j and 31 - j): each chunk's queries
  against the keys up to its end, causal at the lower right, one kernel per chunk (as Transformer
  Engine's all-gather CP calls flash attention).

Forward and forward + backward, CUDA events, median of --iters after warm-up. FLOPs counted as ppsim
counts them (src/cost/flops.cc): 4 d h per query-key pair the query sees, forward; the backward 2.5x.
Prints the TFLOP/s and the fraction of --peak per row, and the fit of time = rows (c0 + c1 L), L the
mean keys per query: efficiency = e_inf L / (L + L0).

Usage: python3 tools/experiments/measure_attention_length.py [--iters 10] [--peak 989] [--json out.json]
"""
import argparse
import json
import sys

from cuda_timing import cuda_torch, median_ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--peak", type=float, default=989.0, help="dense BF16 TFLOP/s (H100/H200 SXM datasheet)")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=1)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--max-seq", type=int, default=65536)
    ap.add_argument("--grid", action="store_true",
                    help="causal self-attention at 16, 64 and 128 query heads (1 K/V head per 16), 2K to 16K tokens")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    torch = cuda_torch("measure_attention_length")
    if torch is None:
        return 0
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.bias import causal_lower_right

    dev, dt = "cuda", torch.bfloat16
    hq, hk, d = a.heads, a.kv_heads, a.head_dim
    rows = []

    def run(q_len, kv_len, backend, hq=hq, hk=hk):
        q = torch.randn(1, hq, q_len, d, device=dev, dtype=dt, requires_grad=True)
        k = torch.randn(1, hk, kv_len, d, device=dev, dtype=dt, requires_grad=True)
        v = torch.randn(1, hk, kv_len, d, device=dev, dtype=dt, requires_grad=True)
        mask = None if q_len == kv_len else causal_lower_right(q_len, kv_len)

        def fwd():
            with sdpa_kernel([backend]):
                if mask is None:
                    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=hk != hq)
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=hk != hq)

        go = torch.randn(1, hq, q_len, d, device=dev, dtype=dt)

        def fwd_bwd():
            o = fwd()
            torch.autograd.backward(o, go)

        f = median_ms(torch, fwd, a.iters)
        fb = median_ms(torch, fwd_bwd, a.iters)
        return f, fb

    def pairs(q_len, kv_len):  # query-key pairs seen, causal at the lower right (s^2/2 for a square)
        return q_len * (kv_len - q_len) + 0.5 * q_len * q_len

    def record(name, parts, backend, hq=hq, hk=hk):
        fwd_ms = bwd_ms = 0.0
        n_pairs = 0.0
        for q_len, kv_len in parts:
            f, fb = run(q_len, kv_len, backend, hq, hk)
            fwd_ms += f
            bwd_ms += fb - f
            n_pairs += pairs(q_len, kv_len)
        flops = 4.0 * d * hq * n_pairs
        queries = sum(q for q, _ in parts)
        row = {
            "name": name, "backend": backend.name, "heads": hq, "queries": queries, "mean_keys": n_pairs / queries,
            "fwd_ms": fwd_ms, "bwd_ms": bwd_ms,
            "fwd_eff": flops / (fwd_ms * 1e-3) / (a.peak * 1e12),
            "bwd_eff": 2.5 * flops / (bwd_ms * 1e-3) / (a.peak * 1e12),
        }
        rows.append(row)
        print("%-26s %-16s L %8.0f  fwd %8.3f ms %.3f  bwd %8.3f ms %.3f  fwd+bwd %.3f" % (
            name, row["backend"], row["mean_keys"], fwd_ms, row["fwd_eff"], bwd_ms, row["bwd_eff"],
            3.5 * flops / ((fwd_ms + bwd_ms) * 1e-3) / (a.peak * 1e12)), flush=True)

    backends = [SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION]
    if a.grid:
        for backend in backends:
            for heads in (16, 64, 128):
                for s in (2048, 4096, 8192, 16384):
                    record(f"grid h={heads} s={s}", [(s, s)], backend, heads, max(1, heads // 16))
                torch.cuda.empty_cache()
        backends = []
    for backend in backends:
        s = 1024
        while s <= a.max_seq:
            try:
                record(f"causal s={s}", [(s, s)], backend)
            except RuntimeError as e:
                print(f"causal s={s} {backend.name}: {str(e).splitlines()[0]}", flush=True)
                break
            s *= 2
        # Llama 3's 131K rows: CP 16, chunks of 4096, rank j: chunks j and 31 - j.
        for j in (0, 7, 15):
            parts = [(4096, 4096 * (j + 1)), (4096, 4096 * (32 - j))]
            try:
                record(f"cp16 131K rank {j}", parts, backend)
            except RuntimeError as e:
                print(f"cp16 rank {j} {backend.name}: {str(e).splitlines()[0]}", flush=True)
                break
        torch.cuda.empty_cache()

    # Fit time per query row = c0 + c1 L (self-attention rows of each backend): eff = e_inf L/(L+L0).
    for backend in backends:
        pts = [r for r in rows if r["backend"] == backend.name and r["name"].startswith("causal")]
        if len(pts) < 3:
            continue
        for part in ("fwd", "bwd"):
            xs = [r["mean_keys"] for r in pts]
            ys = [r[part + "_ms"] / r["queries"] for r in pts]
            n = len(xs)
            mx, my = sum(xs) / n, sum(ys) / n
            c1 = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
            c0 = my - c1 * mx
            e_inf = (2.5 if part == "bwd" else 1.0) * 4.0 * d * hq / (c1 * 1e-3) / (a.peak * 1e12)
            print("fit %s %s: L0 = %.0f keys, e_inf = %.3f" % (backend.name, part, c0 / c1, e_inf))
            for r in pts:
                r.setdefault("fit", {})[part] = {"L0": c0 / c1, "e_inf": e_inf}
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
