#!/usr/bin/env python3
"""Times PyTorch on the shapes of bench/gpu_kernel_bench, for tools/gpu_check.sh's comparison.

Rows (same names as ours): for each linear layer of a chunk (qkv, out, up, down) the forward
GEMM  x @ w.T  ("_F"), the input-grad  dy @ w  ("_B") and the weight-grad  dy.T @ x  ("_W"), all
bf16; then causal attention forward and backward through torch's cuDNN SDPA backend
(torch.nn.attention.sdpa_kernel(SDPBackend.CUDNN_ATTENTION)) on the token-major layout
[batch, seq, heads, head_dim] viewed as [batch, heads, seq, head_dim]. Each row is the median of
`--reps` CUDA-event timings after `--warmup` runs. CSV columns:
name,kind,m,n,k,batch,heads,seq,head_dim,ms,tflops
"""
import argparse
import sys


def median_ms(torch, fn, warmup, reps):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    return times[len(times) // 2]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--ffn", type=int, default=14336)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--csv", default="")
    a = p.parse_args()

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if not torch.cuda.is_available():
        print("torch_reference: no CUDA GPU visible to torch", file=sys.stderr)
        return 5
    dev = "cuda"
    bf = torch.bfloat16
    T = a.seq * a.micro_batch
    h, A, W = a.hidden, a.heads * a.head_dim, (a.heads + 2 * a.kv_heads) * a.head_dim
    rows = []
    gen = torch.Generator(device=dev).manual_seed(0)

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, device=dev, generator=gen, dtype=torch.float32) * scale).to(bf)

    for name, fin, fout in (("qkv", h, W), ("out", A, h), ("up", h, 2 * a.ffn), ("down", a.ffn, h)):
        x, w, dy = randn(T, fin), randn(fout, fin, scale=0.02), randn(T, fout)
        flops = 2.0 * T * fin * fout
        for suffix, fn, (m, n, k) in (
            ("F", lambda: torch.matmul(x, w.t()), (T, fout, fin)),
            ("B", lambda: torch.matmul(dy, w), (T, fin, fout)),
            ("W", lambda: torch.matmul(dy.t(), x), (fout, fin, T)),
        ):
            ms = median_ms(torch, fn, a.warmup, a.reps)
            rows.append((f"{name}_{suffix}", "gemm", m, n, k, 1, 0, 0, 0, ms, flops / (ms * 1e-3) / 1e12))
        del x, w, dy

    b, s, H, Hk, d = a.micro_batch, a.seq, a.heads, a.kv_heads, a.head_dim
    q = randn(b, s, H, d).transpose(1, 2).requires_grad_()
    k = randn(b, s, Hk, d).transpose(1, 2).requires_grad_()
    v = randn(b, s, Hk, d).transpose(1, 2).requires_grad_()
    do = randn(b, s, H, d).transpose(1, 2)
    fwd_flops = 2.0 * 2.0 * b * H * s * s * d / 2.0
    note = ""
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        def attn(qq, kk, vv):
            if H == Hk:
                return F.scaled_dot_product_attention(qq, kk, vv, is_causal=True)
            try:
                return F.scaled_dot_product_attention(qq, kk, vv, is_causal=True, enable_gqa=True)
            except (RuntimeError, TypeError):
                return None

        probe = attn(q, k, v)
        if probe is None:  # this torch's cuDNN backend has no GQA: repeat K/V per query head
            note = " (K/V repeated to all query heads: torch's cuDNN SDPA has no GQA here)"
            g = H // Hk
            k2 = k.detach().repeat_interleave(g, dim=1).requires_grad_()
            v2 = v.detach().repeat_interleave(g, dim=1).requires_grad_()
            kk, vv = k2, v2
        else:
            kk, vv = k, v
        del probe
        with torch.no_grad():
            ms = median_ms(torch, lambda: F.scaled_dot_product_attention(
                q, kk, vv, is_causal=True, **({"enable_gqa": True} if (H != Hk and kk is k) else {})), a.warmup, a.reps)
        rows.append(("attn_fwd", "attention", 0, 0, 0, b, H, s, d, ms, fwd_flops / (ms * 1e-3) / 1e12))
        o = F.scaled_dot_product_attention(q, kk, vv, is_causal=True,
                                           **({"enable_gqa": True} if (H != Hk and kk is k) else {}))
        ms = median_ms(torch, lambda: torch.autograd.grad(o, (q, kk, vv), do, retain_graph=True), a.warmup, a.reps)
        rows.append(("attn_bwd", "attention", 0, 0, 0, b, H, s, d, ms, 2.5 * fwd_flops / (ms * 1e-3) / 1e12))

    print(f"torch {torch.__version__} (cuDNN {torch.backends.cudnn.version()}) on {torch.cuda.get_device_name()}"
          f", tokens {T}{note}")
    print(f"{'name':14} {'kind':10} {'ms':>10} {'TFLOP/s':>9}")
    lines = ["name,kind,m,n,k,batch,heads,seq,head_dim,ms,tflops"]
    for r in rows:
        print(f"{r[0]:14} {r[1]:10} {r[9]:10.4f} {r[10]:9.1f}")
        lines.append(",".join(str(x) for x in r[:9]) + f",{r[9]:.5f},{r[10]:.2f}")
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
