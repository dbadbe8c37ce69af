#!/usr/bin/env python3
"""Measures, with PyTorch on one GPU, the fraction of the datasheet peak that the GEMMs and the
attention of the published H100/H800 runs reach (docs/FIDELITY-MEASURED.md, "GPU-type figures"), to set
against the `h100` / `h800` efficiency set of src/cost/config.cc (GEMM 0.65, attention 0.45 of
the BF16 or FP8 dense peak). Shapes: Llama 3 405B's per-GPU GEMMs under TP 8 with sequence
parallelism (8192 tokens, h 16384, ffn 53248, GQA 8 kv heads of 128), DeepSeek-V3's dense
projections and one expert's grouped GEMMs (FP8 where torch has `_scaled_mm`), and causal flash
attention (scaled_dot_product_attention) at Llama 3's 8192 and DeepSeek-V3's 4096 tokens.
Each is timed with CUDA events, median of `--iters` after warm-up; forward shapes only.

Usage: python3 tools/experiments/measure_gemm_efficiency.py [--iters 30] [--peak-bf16 989] [--peak-fp8 1979] [--json out.json]
       python3 tools/experiments/measure_gemm_efficiency.py --sweep-tokens [--json out.json]
--sweep-tokens: BF16 weight-gradient GEMMs (dW = dY^T X, reduced over the micro-batch's tokens)
and the forward GEMMs of the same layers at 512 to 16384 tokens: how the efficiency depends on
the reduction length.
       python3 tools/experiments/measure_gemm_efficiency.py --sustained 30 [--json out.json]
--sustained S: Llama 3's four layer GEMMs (QKV, attention out, MLP up+gate, down; TP 8, 8192
tokens) back to back for S seconds with nothing between them, as a busy training step keeps the
GPU: TFLOP/s per one-second window, the first (the GPU cold, at its top clock, as the other modes
time it) against the last half (sustained). Sample the clock beside it with
`nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 100`.
"""
import argparse
import json
import sys

from cuda_timing import cuda_torch, median_ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--peak-bf16", type=float, default=989.0, help="dense BF16 TFLOP/s (H100/H800 SXM datasheet)")
    ap.add_argument("--peak-fp8", type=float, default=1979.0, help="dense FP8 TFLOP/s (H100/H800 SXM datasheet)")
    ap.add_argument("--json", default="")
    ap.add_argument("--sweep-tokens", action="store_true")
    ap.add_argument("--sustained", type=float, default=0, help="seconds of Llama 3's layer GEMMs back to back")
    a = ap.parse_args()
    torch = cuda_torch("measure_gemm_efficiency")
    if torch is None:
        return 0
    import torch.nn.functional as F
    dev = "cuda"

    def timed(fn):
        return median_ms(torch, fn, a.iters) / 1e3  # s

    rows = []

    def gemm(name, m, n, k, fp8=False):
        x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
        if fp8:
            if not hasattr(torch, "_scaled_mm"):
                return
            xf, wf = x.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
            one = torch.ones((), device=dev)
            fn = lambda: torch._scaled_mm(xf, wf.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        else:
            fn = lambda: x @ w.t()
        t = timed(fn)
        tf = 2.0 * m * n * k / t / 1e12
        peak = a.peak_fp8 if fp8 else a.peak_bf16
        rows.append({"op": name, "dtype": "fp8" if fp8 else "bf16", "shape": [m, n, k], "ms": t * 1e3,
                     "tflops": tf, "efficiency": tf / peak})

    def attention(name, s, heads, kv_heads, d_qk, d_v):
        q = torch.randn(1, heads, s, d_qk, device=dev, dtype=torch.bfloat16)
        k = torch.randn(1, kv_heads, s, d_qk, device=dev, dtype=torch.bfloat16)
        v = torch.randn(1, kv_heads, s, d_v, device=dev, dtype=torch.bfloat16)
        gqa = kv_heads != heads
        fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        try:
            t = timed(fn)
        except Exception as e:  # a backend without this head size
            print(f"skip {name}: {e}", file=sys.stderr)
            return
        flops = 2.0 * s * s * heads * (d_qk + d_v) / 2  # causal: half of QK^T and PV
        tf = flops / t / 1e12
        rows.append({"op": name, "dtype": "bf16", "shape": [s, heads, kv_heads, d_qk, d_v], "ms": t * 1e3,
                     "tflops": tf, "efficiency": tf / a.peak_bf16})

    if a.sweep_tokens:
        shapes = [("QKV 5120", 5120, 3 * 5120), ("out 5120", 5120, 5120), ("MLP up 5120", 5120, 4 * 5120),
                  ("MLP down 5120", 4 * 5120, 5120), ("QKV 2304", 2304, 3 * 2304), ("MLP up 2304", 2304, 4 * 2304)]
        for tokens in (512, 1024, 2048, 4096, 8192, 16384):
            for name, fin, fout in shapes:
                x = torch.randn(tokens, fin, device=dev, dtype=torch.bfloat16)
                dy = torch.randn(tokens, fout, device=dev, dtype=torch.bfloat16)
                w = torch.randn(fout, fin, device=dev, dtype=torch.bfloat16)
                flops = 2.0 * tokens * fin * fout
                for kind, fn in (("wgrad", lambda: dy.t() @ x), ("fwd", lambda: x @ w.t())):
                    t = timed(fn)
                    rows.append({"op": f"{kind} {name} T={tokens}", "dtype": "bf16", "shape": [tokens, fin, fout],
                                 "ms": t * 1e3, "tflops": flops / t / 1e12, "efficiency": flops / t / 1e12 / a.peak_bf16})
                del x, dy, w
        out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "rows": rows}
        if a.json:
            with open(a.json, "w") as fh:
                json.dump(out, fh, indent=1)
        print(f"{out['device']}: efficiency of the BF16 peak by tokens (the weight gradient's reduction length)")
        names = [n for n, _, _ in shapes]
        for kind in ("wgrad", "fwd"):
            print(f"{kind:6} {'tokens':>7} " + " ".join(f"{n:>13}" for n in names))
            for tokens in (512, 1024, 2048, 4096, 8192, 16384):
                vals = [next(r["efficiency"] for r in rows if r["op"] == f"{kind} {n} T={tokens}") for n in names]
                print(f"{kind:6} {tokens:7d} " + " ".join(f"{v:13.3f}" for v in vals))
        return 0

    # Llama 3 405B, TP 8, one 8192-token sequence (tokens gathered by sequence parallelism).
    T, h, f, t = 8192, 16384, 53248, 8
    if a.sustained > 0:
        import time
        layer = [(T, (h + 2 * 8 * 128) // t, h), (T, h, h // t), (T, 2 * f // t, h), (T, h, f // t)]
        ops = [(torch.randn(m, k, device=dev, dtype=torch.bfloat16), torch.randn(n, k, device=dev, dtype=torch.bfloat16))
               for m, n, k in layer]
        flops_layer = sum(2.0 * m * n * k for m, n, k in layer)
        windows = []
        end = time.time() + a.sustained
        while time.time() < end:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            n = 0
            w_end = time.time() + 1.0
            while time.time() < w_end:  # enqueue about a second of work, then wait for it
                for x, w in ops:
                    x @ w.t()
                n += 1
                if n % 20 == 0:
                    torch.cuda.synchronize()
            e1.record()
            torch.cuda.synchronize()
            sec = e0.elapsed_time(e1) / 1e3
            windows.append({"layers": n, "s": sec, "tflops": n * flops_layer / sec / 1e12})
        for wd in windows:
            wd["efficiency"] = wd["tflops"] / a.peak_bf16
        late = windows[len(windows) // 2:]
        sustained = sum(w["tflops"] for w in late) / len(late)
        out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "windows": windows,
               "first_tflops": windows[0]["tflops"], "sustained_tflops": sustained,
               "first_efficiency": windows[0]["tflops"] / a.peak_bf16, "sustained_efficiency": sustained / a.peak_bf16}
        if a.json:
            with open(a.json, "w") as fh:
                json.dump(out, fh, indent=1)
        print(f"{out['device']}, torch {out['torch']}: Llama 3 TP8 layer GEMMs back to back, one-second windows")
        print(" ".join(f"{w['tflops']:.0f}" for w in windows))
        print(f"first window {out['first_tflops']:.1f} TFLOP/s ({out['first_efficiency']:.3f} of {a.peak_bf16:g}); "
              f"last {len(late)} windows {sustained:.1f} ({out['sustained_efficiency']:.3f})")
        return 0
    gemm("llama3 QKV (TP8)", T, (h + 2 * 8 * 128) // t, h)
    gemm("llama3 attn out (TP8)", T, h, h // t)
    gemm("llama3 MLP up+gate (TP8)", T, 2 * f // t, h)
    gemm("llama3 MLP down (TP8)", T, h, f // t)
    gemm("llama3 head (TP8)", T, 128256 // t, h)
    attention("llama3 attention 8K (16 q heads/GPU, 1 kv)", 8192, 128 // t, 8 // t, 128, 128)
    # DeepSeek-V3: 4096 tokens per micro-batch, h 7168; routed experts: 8192 tokens per expert.
    for fp8 in (False, True):
        gemm("dsv3 q_a proj", 4096, 1536, 7168, fp8)
        gemm("dsv3 expert up+gate", 8192, 2 * 2048, 7168, fp8)
        gemm("dsv3 expert down", 8192, 7168, 2048, fp8)
        gemm("dsv3 dense MLP up+gate", 4096, 2 * 18432, 7168, fp8)
    attention("dsv3 attention 4K (128 heads, d 192/128)", 4096, 128, 128, 192, 128)

    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "rows": rows}
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=1)
    print(f"{out['device']}, torch {out['torch']}: median of {a.iters}; efficiency = TFLOP/s / dense peak "
          f"({a.peak_bf16:g} bf16, {a.peak_fp8:g} fp8)")
    print(f"{'op':46} {'dtype':5} {'ms':>8} {'TFLOP/s':>8} {'eff':>6}")
    for r in rows:
        print(f"{r['op']:46} {r['dtype']:5} {r['ms']:8.3f} {r['tflops']:8.1f} {r['efficiency']:6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
