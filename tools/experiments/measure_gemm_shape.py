#!/usr/bin/env python3
"""Measures, on one GPU, the fraction of the dense peak that BF16 (and per-tensor FP8) GEMMs reach
over a grid of shapes: rows M per group, output width N, inner dimension K, and G groups of the
same shape run as one grouped GEMM (torch._grouped_mm, the experts of one MoE rank) or G = 1 as
one plain GEMM. Each timed call is replayed from one CUDA graph, so the host's launches leave no
gaps (ppsim prices the GPU's time; docs/FIDELITY-MEASURED.md, "GEMMs by shape"). The grid is
what cost/gemm_shape.h's tile model is checked against: the shapes of dense layers (M 2048 to
16384, N and K 1024 to 28672) and of fine-grained experts (M 128 to 4096 rows per expert, N 768
to 4096, K 768 to 7168).

The shapes run in a shuffled order (--seed), each followed by an 8192^3 reference GEMM: the
shape's fraction over the reference's cancels the clock's drift as the GPU heats. Each CUDA graph
holds 10 calls back to back (a busy stream's pace, no launch gaps).

Usage: python3 tools/experiments/measure_gemm_shape.py [--iters 20] [--fp8] [--seed 1] [--json out.json]
Prints one line per shape: M N K G, ms, TFLOP/s, fraction of the peak, the reference's and the
ratio; the JSON holds the same.
"""
import argparse
import random
import sys

from cuda_timing import cuda_torch, median_ms, write_json

DENSE = [  # (M, N, K), G = 1
    (m, n, k)
    for m in (2048, 4096, 8192, 16384)
    for (n, k) in ((1024, 1024), (2048, 2048), (4096, 4096), (8192, 8192), (3072, 4096), (4096, 14336),
                   (28672, 8192), (8192, 28672), (1536, 2048), (2048, 768), (7168, 2048), (2048, 7168),
                   (16384, 16384), (6144, 4096))
]
EXPERTS = [  # (M rows per group, N, K, G)
    (m, n, k, g)
    for m in (128, 256, 512, 1024, 2048, 4096)
    for (n, k, g) in ((1536, 2048, 16), (2048, 768, 16), (4096, 7168, 4), (7168, 2048, 4), (5760, 2880, 4),
                      (2880, 2880, 4), (1536, 4096, 8), (4096, 1536, 8))
]


SWEEPS = (  # one dimension at a time around 8192^3: (M, N, K), G = 1
    [(8192, 8192, k) for k in (256, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 12288, 16384)]
    + [(m, 8192, 8192) for m in (128, 256, 512, 768, 1024, 1536, 3072)]
    + [(8192, n, 8192) for n in (128, 256, 512, 768, 1024, 1536, 3072)]
)
REF = (8192, 8192, 8192)  # timed after every shape: its ratio to this cancels the clock's drift
REPEATS = 10  # calls per CUDA graph: back to back, as a busy stream runs them


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--peak-bf16", type=float, default=989.0, help="dense BF16 TFLOP/s (H100/H200 SXM datasheet)")
    ap.add_argument("--peak-fp8", type=float, default=1979.0)
    ap.add_argument("--fp8", action="store_true", help="also per-tensor FP8 (torch._scaled_mm), plain GEMMs only")
    ap.add_argument("--seed", type=int, default=1, help="the shapes' order (shuffled: the clock's drift is not a shape's)")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    torch = cuda_torch("measure_gemm_shape")
    if torch is None:
        return 0
    dev = "cuda"

    def graphed_ms(fn):
        fn()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(REPEATS):
                fn()
        return median_ms(torch, g.replay, a.iters) / REPEATS

    rx = torch.randn(REF[0], REF[2], device=dev, dtype=torch.bfloat16)
    rw = torch.randn(REF[1], REF[2], device=dev, dtype=torch.bfloat16)
    ref_flops = 2.0 * REF[0] * REF[1] * REF[2]

    def ref_fraction():
        return ref_flops / (graphed_ms(lambda: rx @ rw.t()) * 1e-3) / 1e12 / a.peak_bf16

    rows = []

    def record(kind, m, n, k, g, ms, peak):
        flops = 2.0 * m * n * k * g
        tf = flops / (ms * 1e-3) / 1e12
        ref = ref_fraction()
        rows.append({"kind": kind, "m": m, "n": n, "k": k, "groups": g, "ms": ms, "tflops": tf,
                     "fraction": tf / peak, "ref_fraction": ref})
        print(f"{kind:5s} M {m:6d} N {n:6d} K {k:6d} G {g:3d}  {ms:8.4f} ms  {tf:7.1f} TFLOP/s  {tf / peak:.3f}"
              f"  ref {ref:.3f}  ratio {tf / peak / ref:.3f}", flush=True)

    def dense(m, n, k):
        x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
        record("bf16", m, n, k, 1, graphed_ms(lambda: x @ w.t()), a.peak_bf16)
        if a.fp8 and hasattr(torch, "_scaled_mm"):
            xf, wf = x.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
            one = torch.ones((), device=dev)
            fn = lambda: torch._scaled_mm(xf, wf.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            record("fp8", m, n, k, 1, graphed_ms(fn), a.peak_fp8)

    def experts(m, n, k, g):
        if not hasattr(torch, "_grouped_mm"):
            return
        x = torch.randn(m * g, k, device=dev, dtype=torch.bfloat16)
        w = torch.randn(g, k, n, device=dev, dtype=torch.bfloat16)
        offs = torch.arange(1, g + 1, device=dev, dtype=torch.int32) * m
        record("group", m, n, k, g, graphed_ms(lambda: torch._grouped_mm(x, w, offs=offs)), a.peak_bf16)
        # the weight gradient, dW_g = X_g^T dY_g (K x N per group, reduced over the group's M rows)
        dy = torch.randn(m * g, n, device=dev, dtype=torch.bfloat16)
        xt = x.t().contiguous().t()  # column-major view of X: X^T is row-major (K, M*G)
        try:
            record("wgrad", m, n, k, g, graphed_ms(lambda: torch._grouped_mm(xt.t(), dy, offs=offs)), a.peak_bf16)
        except (RuntimeError, TypeError) as e:
            print(f"SKIP wgrad M {m} N {n} K {k} G {g}: {str(e).splitlines()[0]}", file=sys.stderr)
        # the same G GEMMs one after another (a framework without a grouped kernel)
        xs = [x[i * m:(i + 1) * m] for i in range(g)]
        record("loop", m, n, k, g, graphed_ms(lambda: [xs[i] @ w[i] for i in range(g)]), a.peak_bf16)

    if not hasattr(torch, "_grouped_mm"):
        print("SKIP grouped: this PyTorch has no torch._grouped_mm", file=sys.stderr)
    order = [("dense", s) for s in DENSE + SWEEPS] + [("experts", s) for s in EXPERTS]
    random.Random(a.seed).shuffle(order)
    for kind, shape in order:
        if kind == "dense":
            dense(*shape)
        else:
            experts(*shape)
    write_json(torch, a.json, rows, repeats=REPEATS, ref=REF)
    return 0


if __name__ == "__main__":
    sys.exit(main())
