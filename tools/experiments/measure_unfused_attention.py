#!/usr/bin/env python3
"""Times an attention core without FlashAttention, kernel by kernel, on one GPU, against the model
ppsim prices it with (src/cost/derive.cc, `core()` with `model.flash_attention: false`):

  forward   QK^T, softmax, dropout, PV                 (batched GEMMs over all s^2 scores)
  backward  dP = dO V^T, dV = P^T dO, dropout, softmax, dQ = dS K, dK = dS^T Q

each GEMM on its own roofline, max(2 S d / (peak x gemm), 2 S bytes / (HBM x gemm)), the softmax
(forward: read + write, backward: read P and dP, write dS) and the dropout (read, write, a one-byte
mask) at HBM x elementwise, with S = b a s^2 scores. The shapes are the per-GPU attention cores of
Megatron-LM 2021's Table 1 rows (the micro-batch sizes of the authors' examples/sc21 scripts, the
heads over TP). The softmax here is PyTorch's (the causal mask not fused in, as Megatron's
scaled_upper_triang_masked_softmax fuses it): the mask is not timed. bf16 throughout.

Usage: python3 tools/experiments/measure_unfused_attention.py [--iters 10] [--gemm 0.65]
       [--elementwise 0.8] [--peak-tflops 989] [--hbm-gbps 4800] [--json out.json]
"""
import argparse
import json
import sys

from cuda_timing import cuda_torch, median_ms

# name, micro-batch b, heads per GPU a, sequence s, head dim d
SHAPES = [
    ("megatron 1.7B (TP1, b16)", 16, 24, 2048, 96),
    ("megatron 3.6B (TP2, b16)", 16, 16, 2048, 96),
    ("megatron 7.5B (TP4, b16)", 16, 8, 2048, 128),
    ("megatron 18.4B (TP8, b8)", 8, 6, 2048, 128),
    ("megatron 39.1B (TP8, b4)", 4, 8, 2048, 128),
    ("megatron 145.6B (TP8, b2)", 2, 12, 2048, 128),
    ("megatron 529.6B (TP8, b1)", 1, 16, 2048, 160),
]


def model_ms(b, a, s, d, peak, hbm, gemm, elem):
    """ppsim's unfused core, forward and backward, in ms (derive.cc's core())."""
    S = b * a * s * s
    bmm = max(2 * S * d / (peak * gemm), 2 * S / (hbm * gemm))
    io = 2 * b * s * a * d * 4 + 4 * b * s * a  # Q, K, V, O (bf16) and the log-sum-exp
    fwd = {"QK^T": bmm, "softmax": 4 * S / (hbm * elem), "dropout": 5 * S / (hbm * elem), "PV": bmm,
           "Q,K,V,O": io / (hbm * elem)}
    bwd = {"4 GEMMs": 4 * bmm, "softmax bwd": 6 * S / (hbm * elem), "dropout bwd": 5 * S / (hbm * elem),
           "Q,K,V,O": 2 * io / (hbm * elem)}
    return {k: v * 1e3 for k, v in fwd.items()}, {k: v * 1e3 for k, v in bwd.items()}


def measure(torch, b, a, s, d, iters):
    dev = "cuda"
    q, k, v = (torch.randn(b * a, s, d, device=dev, dtype=torch.bfloat16) for _ in range(3))
    scale = d ** -0.5
    scores = torch.bmm(q, k.transpose(1, 2))
    probs = torch.softmax(scores, dim=-1)
    dropped = torch.nn.functional.dropout(probs, 0.1)
    out = {
        "QK^T": median_ms(torch, lambda: torch.baddbmm(scores, q, k.transpose(1, 2), beta=0.0, alpha=scale), iters),
        "softmax": median_ms(torch, lambda: torch.softmax(scores, dim=-1), iters),
        "dropout": median_ms(torch, lambda: torch.nn.functional.dropout(probs, 0.1), iters),
        "PV": median_ms(torch, lambda: torch.bmm(dropped, v), iters),
    }
    del scores, probs, dropped
    qg, kg, vg = (t.clone().requires_grad_(True) for t in (q, k, v))

    def forward():
        sc = torch.baddbmm(torch.empty(b * a, s, s, device=dev, dtype=torch.bfloat16), qg, kg.transpose(1, 2),
                           beta=0.0, alpha=scale)
        return torch.bmm(torch.nn.functional.dropout(torch.softmax(sc, dim=-1), 0.1), vg)

    out["forward (chain)"] = median_ms(torch, forward, iters)
    dout = torch.randn(b * a, s, d, device=dev, dtype=torch.bfloat16)
    holder = {}

    def fwd_only():
        holder["o"] = forward()

    def bwd():
        holder["o"].backward(dout)

    # The backward alone: a fresh forward before each timed backward, outside the timed region.
    ts = []
    for i in range(iters + 3):
        fwd_only()
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        bwd()
        e1.record()
        torch.cuda.synchronize()
        if i >= 3:
            ts.append(e0.elapsed_time(e1))
        qg.grad = kg.grad = vg.grad = None
    ts.sort()
    out["backward (chain)"] = ts[len(ts) // 2]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--gemm", type=float, default=0.65, help="efficiency.gemm (Hopper preset 0.65)")
    ap.add_argument("--elementwise", type=float, default=0.8, help="efficiency.elementwise (0.8)")
    ap.add_argument("--peak-tflops", type=float, default=989.0, help="dense BF16 peak (H100/H200 989)")
    ap.add_argument("--hbm-gbps", type=float, default=4800.0, help="HBM GB/s (H200 4800, H100 3350)")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    torch = cuda_torch("measure_unfused_attention")
    if torch is None:
        return 0
    peak, hbm = args.peak_tflops * 1e12, args.hbm_gbps * 1e9
    rows = []
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}; model at gemm {args.gemm}, "
          f"elementwise {args.elementwise}, {args.peak_tflops:g} TFLOP/s, {args.hbm_gbps:g} GB/s")
    print(f"{'shape':28} {'kernel':16} {'measured ms':>12} {'model ms':>10} {'meas/model':>10}")
    for name, b, a, s, d in SHAPES:
        m = measure(torch, b, a, s, d, args.iters)
        fwd, bwd = model_ms(b, a, s, d, peak, hbm, args.gemm, args.elementwise)
        pairs = [("QK^T", m["QK^T"], fwd["QK^T"]), ("softmax", m["softmax"], fwd["softmax"]),
                 ("dropout", m["dropout"], fwd["dropout"]), ("PV", m["PV"], fwd["PV"]),
                 ("forward (chain)", m["forward (chain)"], sum(fwd.values())),
                 ("backward (chain)", m["backward (chain)"], sum(bwd.values()))]
        for kern, meas, mod in pairs:
            print(f"{name:28} {kern:16} {meas:12.3f} {mod:10.3f} {meas / mod:10.3f}")
            rows.append({"shape": name, "b": b, "a": a, "s": s, "d": d, "kernel": kern, "measured_ms": meas,
                         "model_ms": mod})
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "args": vars(args),
                       "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
