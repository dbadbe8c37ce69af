#!/usr/bin/env python3
"""Measures, on one GPU, how much of the gradient accumulation's traffic Megatron-LM's fused
weight-gradient GEMM hides (docs/FIDELITY.md, "The backward's split").

Megatron-LM with `--gradient-accumulation-fusion` (and the Zero Bubble fork, which defers the
same call to its W pass) computes each linear layer's weight gradient with apex's
`fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32`: one `cublasGemmEx` with BF16 inputs, an
FP32 output and beta = 1, accumulating dW = dY^T X straight into the FP32 `main_grad` (read and
written: 8 bytes per weight). This script makes that same call through ctypes, on PyTorch's own
cuBLAS handle, and times for each weight-gradient shape:

  plain   the same GEMM with a BF16 output and beta = 0 (the GEMM alone: ppsim's FLOP time)
  fused   GemmEx BF16 x BF16 -> FP32, beta = 1 (Megatron's W)
  unfused the plain GEMM, then main_grad += dW in FP32 (PyTorch eager's accumulation)
  traffic main_grad.mul_(1): 8 bytes per weight through HBM and nothing else

and prints exposed = (fused - plain) / traffic: 0 when the accumulation's traffic is wholly
hidden under the GEMM's math (ppsim's roofline before), 1 when it is paid after it.

Shapes: the four GEMMs of a GPT layer (QKV, attention projection, MLP up, MLP down) of the Zero
Bubble paper's models at their micro-batch (tokens = micro-batch x 1024), Megatron-LM Table 1's
layers under TP 8 at 2048 tokens, Llama 3 405B's under TP 8 at 8192 tokens, and a sweep of the
14.6B layer over 1024 to 8192 tokens.

Usage: python3 tools/experiments/measure_wgrad_accum.py [--iters 20] [--json out.json]
"""
import argparse
import ctypes
import json
import sys

from cuda_timing import cuda_torch, median_ms

CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
CUDA_R_32F, CUDA_R_16BF = 0, 14
CUBLAS_COMPUTE_32F = 68
CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99


def load_cublas(torch):
    """The libcublas that PyTorch itself loaded (found in /proc/self/maps after one matmul)."""
    a = torch.ones(16, 16, device="cuda")
    (a @ a).sum().item()
    with open("/proc/self/maps") as f:
        paths = sorted({line.split()[-1] for line in f if "libcublas.so" in line and "Lt" not in line.split()[-1]})
    if not paths:
        raise RuntimeError("libcublas is not mapped into this process")
    lib = ctypes.CDLL(paths[0])
    lib.cublasGemmEx.restype = ctypes.c_int
    lib.cublasGemmEx.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                 ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                 ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                 ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                 ctypes.c_int, ctypes.c_int]
    return lib, paths[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    torch = cuda_torch("measure_wgrad_accum")
    if torch is None:
        return 0
    lib, path = load_cublas(torch)
    one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)

    def gemm_ex(x, dy, out, beta):
        """apex's wgrad_gemm_accum call: out[n_out, n_in] (+)= dy^T x, column-major in cuBLAS terms."""
        tokens, n_in = x.shape
        n_out = dy.shape[1]
        handle = ctypes.c_void_p(torch.cuda.current_blas_handle())
        ctype = CUDA_R_32F if out.dtype == torch.float32 else CUDA_R_16BF
        st = lib.cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_T, n_in, n_out, tokens,
                              ctypes.byref(one), ctypes.c_void_p(x.data_ptr()), CUDA_R_16BF, n_in,
                              ctypes.c_void_p(dy.data_ptr()), CUDA_R_16BF, n_out,
                              ctypes.byref(beta), ctypes.c_void_p(out.data_ptr()), ctype, n_in,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP)
        if st != 0:
            raise RuntimeError(f"cublasGemmEx returned {st}")

    dev = "cuda"
    rows = []

    def layer(model, h, ffn, tokens, tp=1, kv=None):
        qkv = h + 2 * (kv if kv else h)
        for name, n_in, n_out in (("qkv", h, qkv // tp), ("proj", h // tp, h), ("mlp_up", h, ffn // tp),
                                  ("mlp_down", ffn // tp, h)):
            x = torch.randn(tokens, n_in, device=dev, dtype=torch.bfloat16)
            dy = torch.randn(tokens, n_out, device=dev, dtype=torch.bfloat16)
            main_grad = torch.zeros(n_out, n_in, device=dev, dtype=torch.float32)
            dw = torch.empty(n_out, n_in, device=dev, dtype=torch.bfloat16)
            # Check the call once: the fused accumulation equals the plain product added in FP32.
            gemm_ex(x, dy, main_grad, one)
            ref = (dy.float().t() @ x.float())
            err = ((main_grad - ref).abs().max() / ref.abs().max()).item()
            t_plain = median_ms(torch, lambda: gemm_ex(x, dy, dw, zero), a.iters)
            t_fused = median_ms(torch, lambda: gemm_ex(x, dy, main_grad, one), a.iters)
            t_unfused = median_ms(torch, lambda: (gemm_ex(x, dy, dw, zero), main_grad.add_(dw)), a.iters)
            t_traffic = median_ms(torch, lambda: main_grad.mul_(1.0), a.iters)
            flops = 2.0 * tokens * n_in * n_out
            r = {"model": model, "gemm": name, "tokens": tokens, "n_in": n_in, "n_out": n_out,
                 "plain_ms": t_plain, "fused_ms": t_fused, "unfused_ms": t_unfused, "traffic_ms": t_traffic,
                 "plain_tflops": flops / t_plain / 1e9, "exposed": (t_fused - t_plain) / t_traffic,
                 "check_rel_err": err}
            if not rows:  # which cuBLAS kernels run (their names tell the kernel family)
                from torch.profiler import profile, ProfilerActivity
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    gemm_ex(x, dy, dw, zero)
                    gemm_ex(x, dy, main_grad, one)
                    torch.cuda.synchronize()
                names = [e.name for e in prof.events() if e.device_type.name == "CUDA"]
                print("kernels (plain, fused):", names, flush=True)
                r["kernels"] = names
            rows.append(r)
            print(f"{model:>10} {name:>8} T={tokens:5d} {n_in:5d}x{n_out:5d}  plain {t_plain:7.3f}  fused {t_fused:7.3f}"
                  f"  unfused {t_unfused:7.3f}  traffic {t_traffic:6.3f} ms  {r['plain_tflops']:6.1f} TFLOP/s"
                  f"  exposed {r['exposed']:5.2f}  (check {err:.1e})", flush=True)
            del x, dy, main_grad, dw

    # Zero Bubble paper Table 3 (the layer shapes, sequence 1024, micro-batch 6 / 3 / 1 / 1).
    layer("zb-1.5b", 2304, 4 * 2304, 6 * 1024)
    layer("zb-6.2b", 4096, 4 * 4096, 3 * 1024)
    layer("zb-14.6b", 5120, 4 * 5120, 1024)
    layer("zb-28.3b", 6144, 4 * 6144, 1024)
    # Megatron-LM Table 1 (TP 8, sequence 2048, micro-batch 1): the 18.4B, 145.6B and 1T layers.
    layer("mt-18.4b", 6144, 4 * 6144, 2048, tp=8)
    layer("mt-145.6b", 12288, 4 * 12288, 2048, tp=8)
    layer("mt-1t", 25600, 4 * 25600, 2048, tp=8)
    # Llama 3 405B (TP 8, 8192 tokens, GQA 8 kv heads of 128).
    layer("llama3-405b", 16384, 53248, 8192, tp=8, kv=8 * 128)
    # The 14.6B layer over the reduction length.
    for t in (2048, 4096, 8192):
        layer("zb-14.6b", 5120, 4 * 5120, t)

    def summary(sel):
        f = [r for r in rows if sel(r)]
        pl = sum(r["plain_ms"] for r in f)
        fu = sum(r["fused_ms"] for r in f)
        tr = sum(r["traffic_ms"] for r in f)
        return fu / pl, (fu - pl) / tr
    print("\nper layer (sum of its four GEMMs): fused / plain, exposed share of the traffic")
    seen = []
    for r in rows:
        key = (r["model"], r["tokens"])
        if key in seen:
            continue
        seen.append(key)
        ratio, exp = summary(lambda q: (q["model"], q["tokens"]) == key)
        print(f"  {key[0]:>12} T={key[1]:5d}: fused/plain {ratio:5.3f}, exposed {exp:5.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cublas": path,
                       "iters": a.iters, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
