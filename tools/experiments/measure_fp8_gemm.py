#!/usr/bin/env python3
"""Measures, on one Hopper GPU, the fraction of the FP8 dense peak that FP8 GEMMs reach on
DeepSeek-V3's GEMM shapes, with per-tensor scales and with DeepSeek's fine-grained scaling
(1x128 activation tiles x 128x128 weight blocks), beside BF16 on the same shapes
(docs/FIDELITY-MEASURED.md, "FP8 GEMMs"; `efficiency.gemm_fp8`, docs/CONFIG.md).

Shapes: the forward GEMMs that DeepGEMM's first README (commit a6d97a1, 2025-02-25) times on an
H800 at 4096 tokens: MLA's fused q/kv down-projection (N 2112, K 7168), q up (24576 x 1536),
kv up (32768 x 512), the output projection (7168 x 16384), the shared expert's gate+up
(4096 x 7168) and down (7168 x 2048), and the routed experts' two, grouped 4 x 8192 tokens (here
four GEMMs one after another: a lower bound on a grouped kernel). Each line also prints that
README's DeepGEMM figure and the one it implies for DeepSeek's earlier kernels (over its speedup
column), as fractions of 1979 TFLOP/s, and the total over a MoE layer, each GEMM weighted by its
FLOPs per token (the routed ones x 8 experts).

Fine-grained scaling goes through torch._scaled_mm with a (M, K/128) scale for A and a
(K/128, N/128) scale for B (cuBLASLt's block scaling on Hopper); where this PyTorch refuses it, the
line says so. Each FP8 result is checked against BF16 on the dequantized inputs (relative error
under 5%), so a scale the kernel read differently from what was meant cannot pass as a timing.

`--wgrad` times each GEMM's weight gradient instead, dW = dY^T X (N x K, the inner dimension the
M tokens), as DeepSeek-V3 quantizes it (report 3.3.2: the activations and the output gradient both
in 1x128 tiles along the tokens, each side transposed before it is quantized): A = dY^T with a
(N, M/128) scale, B = X with one per 128 tokens of each input channel (cuBLASLt's 1x128 x 1x128
block scaling), beside BF16 and per-tensor FP8 on the same product. No accumulation into an FP32
gradient (efficiency.accum_exposed prices that apart).

`--shapes llama3-70b-tp4` / `llama3-8b` times a dense Llama 3 layer's GEMMs at 8192 tokens instead.

Usage: python3 tools/experiments/measure_fp8_gemm.py [--iters 20] [--shapes S] [--dgrad | --wgrad] [--json out.json]
"""
import argparse
import json
import sys

from cuda_timing import cuda_torch, median_ms as _median_ms

GRAPH = False  # --graph: each timed list of GEMMs replayed from one CUDA graph


def median_ms(torch, fn, iters):
    """The median time of fn(); with --graph, of one CUDA graph holding fn's kernels, so that the
    host's launches leave no gaps between small GEMMs."""
    if not GRAPH:
        return _median_ms(torch, fn, iters)
    fn()  # warm up outside the capture (cuBLAS workspaces, heuristics)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return _median_ms(torch, g.replay, iters)

PEAK_FP8 = 1979e12  # H100 / H800 / H200 SXM dense FP8 (datasheet)
PEAK_BF16 = 989e12
# name, M, N, K, groups, DeepGEMM TFLOP/s on H800, its speedup over DeepSeek's internal kernels,
# multiply-adds per token of one MoE layer (for the weighting)
SHAPES = [
    ("q_a+kv_a", 4096, 2112, 7168, 1, 1058, 1.1, 2112 * 7168),
    ("q_b", 4096, 24576, 1536, 1, 990, 1.0, 24576 * 1536),
    ("kv_b", 4096, 32768, 512, 1, 590, 1.0, 32768 * 512),
    ("o_proj", 4096, 7168, 16384, 1, 1358, 1.2, 7168 * 16384),
    ("shared gate+up", 4096, 4096, 7168, 1, 1304, 1.1, 4096 * 7168),
    ("shared down", 4096, 7168, 2048, 1, 1025, 1.1, 7168 * 2048),
    ("routed gate+up", 8192, 4096, 7168, 4, 1297, 1.2, 8 * 4096 * 7168),
    ("routed down", 8192, 7168, 2048, 4, 1099, 1.2, 8 * 7168 * 2048),
]
# Dense Llama 3 layers at one 8192-token sequence (no DeepGEMM figures): 70B with TP 4 (hidden 8192,
# 64 heads and 8 KV heads of 128, FFN 28672, each GEMM's TP share) and 8B without TP (hidden 4096,
# 32 and 8 heads, FFN 14336), gate and up fused as Megatron runs them.
LLAMA3_70B_TP4 = [
    ("qkv", 8192, (8192 + 2 * 1024) // 4, 8192, 1, None, None, (8192 + 2 * 1024) // 4 * 8192),
    ("o_proj", 8192, 8192, 8192 // 4, 1, None, None, 8192 * 8192 // 4),
    ("gate+up", 8192, 2 * 28672 // 4, 8192, 1, None, None, 2 * 28672 // 4 * 8192),
    ("down", 8192, 8192, 28672 // 4, 1, None, None, 8192 * 28672 // 4),
]
LLAMA3_8B = [
    ("qkv", 8192, 4096 + 2 * 1024, 4096, 1, None, None, (4096 + 2 * 1024) * 4096),
    ("o_proj", 8192, 4096, 4096, 1, None, None, 4096 * 4096),
    ("gate+up", 8192, 2 * 14336, 4096, 1, None, None, 2 * 14336 * 4096),
    ("down", 8192, 4096, 14336, 1, None, None, 4096 * 14336),
]
# Fine-grained experts, one rank's share at EP 8 with balanced routing of one sequence of 4096 tokens
# (GEMMs one after another: a lower bound on a grouped kernel): Qwen3-30B-A3B (hidden 2048, 128
# experts of 768, top-8: 16 local experts of 2048 tokens each), GPT-OSS 120B (hidden 2880, 128
# experts of 2880, top-4: 16 of 1024).
QWEN3_30B_EP8 = [
    ("routed gate+up", 2048, 2 * 768, 2048, 16, None, None, 8 * 2 * 768 * 2048),
    ("routed down", 2048, 2048, 768, 16, None, None, 8 * 2048 * 768),
]
GPT_OSS_120B_EP8 = [
    ("routed gate+up", 1024, 2 * 2880, 2880, 16, None, None, 4 * 2 * 2880 * 2880),
    ("routed down", 1024, 2880, 2880, 16, None, None, 4 * 2880 * 2880),
]
SHAPE_SETS = {"deepseek-v3": SHAPES, "llama3-70b-tp4": LLAMA3_70B_TP4, "llama3-8b": LLAMA3_8B,
              "qwen3-30b-a3b-ep8": QWEN3_30B_EP8, "gpt-oss-120b-ep8": GPT_OSS_120B_EP8}


def quant_blocks(torch, x, rows, cols):
    """x (R, C) in BF16 -> FP8 e4m3 and FP32 scales, one per rows x cols block (amax / 448); a
    last partial block of rows (N = 2112 is 16.5 blocks of 128) gets its own scale."""
    R, C = x.shape
    Rp = -(-R // rows) * rows
    xp = torch.nn.functional.pad(x.float(), (0, 0, 0, Rp - R))
    xb = xp.reshape(Rp // rows, rows, C // cols, cols)
    amax = xb.abs().amax(dim=(1, 3)).clamp(min=1e-4)
    scale = amax / 448.0
    q = (xb / scale[:, None, :, None]).reshape(Rp, C)[:R].to(torch.float8_e4m3fn)
    return q, scale


LAYOUTS = [  # (description, scale_a M-major?, scale_b K-major?)
    ("scale_a (M, K/128) M-major, scale_b (K/128, N/128) K-major", True, True),
    ("scale_a (M, K/128) M-major, scale_b (K/128, N/128) contiguous", True, False),
    ("scale_a (M, K/128) contiguous, scale_b (K/128, N/128) contiguous", False, False),
    ("scale_a (M, K/128) contiguous, scale_b (K/128, N/128) K-major", False, True),
]


def blockwise(torch, a_q, sa, w_q, sw, layout):
    """torch._scaled_mm with 1x128 (A) x 128x128 (B) scales laid out as LAYOUTS[layout]."""
    _, a_outer, b_kmajor = LAYOUTS[layout]
    s_a = sa.t().contiguous().t() if a_outer else sa.contiguous()  # (M, K/128), M the fast dimension or not
    s_b = sw.t() if b_kmajor else sw.t().contiguous()             # (K/128, N/128)
    b = w_q.t()  # (K, N), column-major as _scaled_mm wants
    return lambda: torch._scaled_mm(a_q, b, s_a, s_b, out_dtype=torch.bfloat16)


def first_layout(layouts, make, ref):
    """The first of `layouts` whose product make(i)() PyTorch accepts and is within 5% of `ref`
    (BF16 on the dequantized inputs). Returns (layout index, description, relative error) or
    (None, reasons, None)."""
    reasons = []
    for i, (desc, _, _) in enumerate(layouts):
        try:
            got = make(i)().float()
            err = ((got - ref).norm() / ref.norm()).item()
            if err > 0.05:
                reasons.append(f"{desc}: relative error {err:.3f} against the dequantized product (scales misread)")
                continue
            return i, desc, err
        except Exception as e:  # noqa: BLE001  (PyTorch raises RuntimeError or ValueError)
            reasons.append(str(e).splitlines()[0][:160])
    return None, "; ".join(reasons), None


def try_blockwise(torch, a_q, sa, w_q, sw, ref):
    """first_layout over LAYOUTS (1x128 x 128x128)."""
    return first_layout(LAYOUTS, lambda i: blockwise(torch, a_q, sa, w_q, sw, i), ref)


WGRAD_LAYOUTS = [  # (description, scale_a M-major?, scale_b transposed-contiguous?)
    ("scale_a (N, M/128) N-major, scale_b (M/128, K) contiguous", True, True),
    ("scale_a (N, M/128) contiguous, scale_b (M/128, K) contiguous", False, True),
    ("scale_a (N, M/128) N-major, scale_b (M/128, K) K-major", True, False),
    ("scale_a (N, M/128) contiguous, scale_b (M/128, K) K-major", False, False),
]


def wgrad_blockwise(torch, g_q, sg, x_q, sx, layout):
    """dW (N, K) = dY^T (N, M) . X (M, K) with 1x128 scales along the M tokens on both sides:
    g_q (N, M) FP8 row-major, sg (N, M/128); x_q = X^T (K, M) FP8 row-major, sx (K, M/128)."""
    _, a_outer, b_t = WGRAD_LAYOUTS[layout]
    s_a = sg.t().contiguous().t() if a_outer else sg.contiguous()
    s_b = sx.t().contiguous() if b_t else sx.contiguous().t()  # (M/128, K)
    return lambda: torch._scaled_mm(g_q, x_q.t(), s_a, s_b, out_dtype=torch.bfloat16)


def measure_wgrad(torch, a):
    """--wgrad: each shape's weight gradient; rows as main()'s."""
    rows = []
    for name, M, N, K, G, _, _, macs in SHAPE_SETS[a.shapes]:
        flops = 2.0 * M * N * K * G
        Np = -(-N // 128) * 128  # N 2112 is 16.5 blocks: zero rows added, FLOPs counted on the real N
        gs = [torch.nn.functional.pad(torch.randn(N, M, device="cuda", dtype=torch.bfloat16), (0, 0, 0, Np - N))
              for _ in range(G)]
        xs = [torch.randn(K, M, device="cuda", dtype=torch.bfloat16) for _ in range(G)]
        t_bf16 = median_ms(torch, lambda: [g @ x.t() for g, x in zip(gs, xs)], a.iters)
        one = torch.ones((), device="cuda", dtype=torch.float32)
        g8 = [g.to(torch.float8_e4m3fn) for g in gs]
        x8 = [x.to(torch.float8_e4m3fn) for x in xs]
        t_tensor = median_ms(torch, lambda: [torch._scaled_mm(g, x.t(), one, one, out_dtype=torch.bfloat16,
                                                               use_fast_accum=True) for g, x in zip(g8, x8)], a.iters)
        qs = []
        for g, x in zip(gs, xs):
            gq, sg = quant_blocks(torch, g, 1, 128)
            xq, sx = quant_blocks(torch, x, 1, 128)
            qs.append((gq, sg.reshape(Np, M // 128), xq, sx.reshape(K, M // 128)))
        gq0, sg0, xq0, sx0 = qs[0]
        gd = (gq0.float().reshape(Np, M // 128, 128) * sg0[:, :, None]).reshape(Np, M)
        xd = (xq0.float().reshape(K, M // 128, 128) * sx0[:, :, None]).reshape(K, M)
        ref = gd @ xd.t()
        del gd, xd
        layout, desc, err = first_layout(WGRAD_LAYOUTS, lambda i: wgrad_blockwise(torch, gq0, sg0, xq0, sx0, i), ref)
        del ref
        t_block = None
        if layout is not None:
            fns = [wgrad_blockwise(torch, gq, sg, xq, sx, layout) for gq, sg, xq, sx in qs]
            t_block = median_ms(torch, lambda: [f() for f in fns], a.iters)
        row = {"gemm": name + " wgrad", "m": M, "n": N, "k": K, "groups": G, "macs_per_token": macs,
               "bf16_ms": t_bf16, "fp8_tensor_ms": t_tensor, "fp8_block_ms": t_block, "block_scaling": desc,
               "block_rel_error": err,
               "eff_bf16": flops / (t_bf16 * 1e-3) / PEAK_BF16,
               "eff_fp8_tensor": flops / (t_tensor * 1e-3) / PEAK_FP8,
               "eff_fp8_block": None if t_block is None else flops / (t_block * 1e-3) / PEAK_FP8,
               "deepgemm_h800": None, "internal_h800": None}
        rows.append(row)
        blk_s = "-" if t_block is None else f"{row['eff_fp8_block']:.3f}"
        print(f"{name:15} dW {N:5}x{K:5}, {M:5} tokens x{G}  bf16 {row['eff_bf16']:.3f}  fp8/tensor "
              f"{row['eff_fp8_tensor']:.3f}  fp8/1x128+1x128 {blk_s}")
        if t_block is None:
            print(f"    fine-grained: {desc}")
        del gs, xs, g8, x8, qs
        torch.cuda.empty_cache()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--graph", action="store_true",
                    help="time each list of GEMMs as one CUDA graph (no launch gaps: for many small GEMMs)")
    ap.add_argument("--shapes", choices=sorted(SHAPE_SETS), default="deepseek-v3",
                    help="the GEMM shapes: DeepSeek-V3's (DeepGEMM's README), a dense Llama 3 layer's, or one "
                         "EP-8 rank's fine-grained experts")
    ap.add_argument("--json")
    ap.add_argument("--dgrad", action="store_true",
                    help="time each GEMM's input gradient instead (dX = dY W: M x K x N, the inner dimension "
                         "zero-padded to a multiple of 128 where it is not one; FLOPs counted on the real one)")
    ap.add_argument("--wgrad", action="store_true",
                    help="time each GEMM's weight gradient instead (dW = dY^T X, the M tokens the inner dimension, "
                         "1x128 scales along the tokens on both sides)")
    a = ap.parse_args()
    global GRAPH
    GRAPH = a.graph
    if a.dgrad and a.wgrad:
        ap.error("--dgrad and --wgrad: one at a time")
    torch = cuda_torch("measure_fp8_gemm")
    if torch is None:
        return 0
    if torch.cuda.get_device_capability() < (9, 0):
        print("SKIP measure_fp8_gemm: FP8 GEMMs need a Hopper (sm_90) GPU or newer", file=sys.stderr)
        return 0
    dev = torch.cuda.get_device_name()
    print(f"device: {dev}; torch {torch.__version__}; CUDA {torch.version.cuda}")
    torch.manual_seed(0)
    rows = measure_wgrad(torch, a) if a.wgrad else []
    for name, M, N, K, G, dg_tf, speedup, macs in ([] if a.wgrad else SHAPE_SETS[a.shapes]):
        if a.dgrad:
            N, K = K, N
        flops = 2.0 * M * N * K * G
        Kp = -(-K // 128) * 128
        x = torch.nn.functional.pad(torch.randn(M, K, device="cuda", dtype=torch.bfloat16), (0, Kp - K))
        ws = [torch.nn.functional.pad(torch.randn(N, K, device="cuda", dtype=torch.bfloat16) / K ** 0.5, (0, Kp - K))
              for _ in range(G)]
        K = Kp
        t_bf16 = median_ms(torch, lambda: [x @ w.t() for w in ws], a.iters)
        # per-tensor FP8 (one scale each), fast accumulation: cuBLAS's fastest FP8 path
        one = torch.ones((), device="cuda", dtype=torch.float32)
        x8 = x.to(torch.float8_e4m3fn)
        w8s = [w.to(torch.float8_e4m3fn) for w in ws]
        t_tensor = median_ms(torch, lambda: [torch._scaled_mm(x8, w.t(), one, one, out_dtype=torch.bfloat16,
                                                               use_fast_accum=True) for w in w8s], a.iters)
        # fine-grained: 1x128 tiles of X, 128x128 blocks of W
        xq, sx = quant_blocks(torch, x, 1, 128)
        sx = sx.reshape(M, K // 128)
        blk = []
        for w in ws:
            wq, sw = quant_blocks(torch, w, 128, 128)  # sw: (N/128, K/128)
            blk.append((wq, sw))
        wq0, sw0 = blk[0]
        xd = (xq.float().reshape(M, K // 128, 128) * sx[:, :, None]).reshape(M, K)
        wd = wq0.float().reshape(N, K // 128, 128) * sw0.repeat_interleave(128, dim=0)[:N, :, None]
        wd = wd.reshape(N, K)
        layout, desc, err = try_blockwise(torch, xq, sx, wq0, sw0, ref=xd @ wd.t())
        del xd, wd
        t_block = None
        if layout is not None:  # every group in the layout checked on the first
            fns = [blockwise(torch, xq, sx, wq_, sw_, layout) for wq_, sw_ in blk]
            t_block = median_ms(torch, lambda: [f() for f in fns], a.iters)
        row = {"gemm": name + (" dgrad" if a.dgrad else ""), "m": M, "n": N, "k": K, "groups": G, "macs_per_token": macs,
               "bf16_ms": t_bf16, "fp8_tensor_ms": t_tensor, "fp8_block_ms": t_block, "block_scaling": desc,
               "block_rel_error": err,
               "eff_bf16": flops / (t_bf16 * 1e-3) / PEAK_BF16,
               "eff_fp8_tensor": flops / (t_tensor * 1e-3) / PEAK_FP8,
               "eff_fp8_block": None if t_block is None else flops / (t_block * 1e-3) / PEAK_FP8,
               "deepgemm_h800": None if a.dgrad or dg_tf is None else dg_tf * 1e12 / PEAK_FP8,
               "internal_h800": None if a.dgrad or dg_tf is None else dg_tf / speedup * 1e12 / PEAK_FP8}
        rows.append(row)
        blk_s = "-" if t_block is None else f"{row['eff_fp8_block']:.3f}"
        print(f"{name:15} {M:5}x{N:5}x{K:5} x{G}  bf16 {row['eff_bf16']:.3f}  fp8/tensor {row['eff_fp8_tensor']:.3f}"
              f"  fp8/1x128+128x128 {blk_s}" + ("" if a.dgrad or dg_tf is None else
              f"  | H800 DeepGEMM {row['deepgemm_h800']:.3f} internal {row['internal_h800']:.3f}"))
        if t_block is None:
            print(f"    fine-grained: {desc}")
        del x, ws, w8s, blk
        torch.cuda.empty_cache()

    def weighted(key):
        if any(r[key] is None for r in rows):
            return None
        total = sum(r["macs_per_token"] for r in rows)
        return total / sum(r["macs_per_token"] / r[key] for r in rows)

    summary = {k: weighted(k) for k in ("eff_bf16", "eff_fp8_tensor", "eff_fp8_block", "deepgemm_h800", "internal_h800")}
    print(f"\n{a.shapes} layer, FLOP-weighted (fraction of peak: BF16 989, FP8 1979 TFLOP/s):")
    block = "FP8 1x128 x 1x128" if a.wgrad else "FP8 1x128 x 128x128"
    print(f"| device | BF16 | FP8 per-tensor | {block} | H800 DeepGEMM (README) | H800 internal kernels (README / speedup) |")
    print("|---|---|---|---|---|---|")
    fmt = lambda v: "-" if v is None else f"{v:.3f}"
    print(f"| {dev} | {fmt(summary['eff_bf16'])} | {fmt(summary['eff_fp8_tensor'])} | {fmt(summary['eff_fp8_block'])} | "
          f"{fmt(summary['deepgemm_h800'])} | {fmt(summary['internal_h800'])} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": dev, "torch": torch.__version__, "rows": rows, "moe_layer": summary}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
