#!/usr/bin/env python3
"""One step of Llama-style layers at several sequence lengths, the tokens per micro-batch fixed, so
that the GEMMs stay the same and only the attention core changes (docs/FIDELITY-MEASURED.md,
"Attention by shape"): what `costs.attention_shape` predicts. The layers of
configs/torch-pp-2gpu-llama.yaml (hidden 4096, 32 heads of 128, SwiGLU 11008, RMSNorm, bf16, causal
scaled_dot_product_attention), 4 of them, 16384 tokens per step as micro_batch_size x seq_len;
forward + backward, CUDA events, median of --iters after warm-up; the SDPA backend torch picks and,
with --flash, FlashAttention-2 forced.

Usage: python3 tools/experiments/measure_layer_seq.py [--iters 10] [--layers 4] [--tokens 16384] [--json out.json]
"""
import argparse
import json
import sys

from cuda_timing import cuda_torch, median_ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    torch = cuda_torch("measure_layer_seq")
    if torch is None:
        return 0
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    h, heads, d, ffn = 4096, 32, 128, 11008

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = nn.RMSNorm(h), nn.RMSNorm(h)
            self.qkv, self.o = nn.Linear(h, 3 * h, bias=False), nn.Linear(h, h, bias=False)
            self.up, self.down = nn.Linear(h, 2 * ffn, bias=False), nn.Linear(ffn, h, bias=False)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(self.n1(x)).view(b, s, 3, heads, d).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.o(y.transpose(1, 2).reshape(b, s, h))
            g, u = self.up(self.n2(x)).chunk(2, dim=-1)
            return x + self.down(F.silu(g) * u)

    model = nn.Sequential(*[Layer() for _ in range(a.layers)]).cuda().to(torch.bfloat16)
    rows = []
    for backend in ("default", "flash"):
        for s in (1024, 2048, 4096, 8192, 16384):
            b = a.tokens // s
            x = torch.randn(b, s, h, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            go = torch.randn_like(x)

            def step():
                if backend == "flash":
                    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                        y = model(x)
                else:
                    y = model(x)
                torch.autograd.backward(y, go)

            ms = median_ms(torch, step, a.iters)
            rows.append({"backend": backend, "seq_len": s, "micro_batch_size": b, "step_ms": ms})
            print(f"{backend:8s} seq {s:6d} x {b:3d}: {ms:8.3f} ms", flush=True)
            model.zero_grad(set_to_none=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "layers": a.layers,
                       "tokens": a.tokens, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
