#!/usr/bin/env python3
"""One training step's compute of MosaicML's MPT models on one GPU, as llm-foundry builds them
(docs/FIDELITY.md "The held-out set": configs/heldout/mpt-h100.yaml): LayerNorm with bias, fused QKV
with bias, causal scaled_dot_product_attention (flash), output projection with bias, GELU MLP of 4h
with biases, a learned position table, the embedding tied to the output, cross-entropy over the
50368-entry vocabulary in fp32. bf16 weights (FSDP's gathered copy under MixedPrecision), no
recompute, no optimizer, no data parallelism: what ppsim's compute for the same model and micro-batch
on this GPU type should be, apart from FSDP's traffic. Forward + backward, CUDA events, median of
--iters after warm-up; each size at the micro-batch sizes of its rows in mpt-h100.yaml that are
not checkpointed, and the blocks alone beside (the step less embedding, head and loss).

Usage: python3 tools/experiments/measure_mpt_step.py [--iters 5] [--sizes 760m,1b,3b,7b,13b] [--json out.json]
"""
import argparse
import json
import sys

from cuda_timing import cuda_torch, median_ms

# llm-foundry's scripts/train/yamls/pretrain/mpt-<size>.yaml: d_model, n_heads, n_layers; the rows'
# MicroBatchSize values (configs/heldout/mpt-h100.yaml) without activation checkpointing.
SIZES = {
    "760m": (1536, 12, 24, (24,)),
    "1b": (2048, 16, 24, (20, 14)),
    "3b": (2560, 20, 32, (6, 10)),
    "7b": (4096, 32, 32, (6,)),
    "13b": (5120, 40, 40, (2,)),
}
VOCAB, SEQ = 50368, 2048


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--sizes", default=",".join(SIZES))
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    torch = cuda_torch("measure_mpt_step")
    if torch is None:
        return 0
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self, h, heads):
            super().__init__()
            self.h, self.heads = h, heads
            self.n1, self.n2 = nn.LayerNorm(h), nn.LayerNorm(h)
            self.qkv, self.o = nn.Linear(h, 3 * h), nn.Linear(h, h)
            self.up, self.down = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

        def forward(self, x):
            b, s, h = x.shape
            q, k, v = self.qkv(self.n1(x)).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.o(y.transpose(1, 2).reshape(b, s, h))
            return x + self.down(F.gelu(self.up(self.n2(x))))

    class Mpt(nn.Module):
        def __init__(self, h, heads, layers):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(VOCAB, h), nn.Embedding(SEQ, h)
            self.blocks = nn.Sequential(*[Block(h, heads) for _ in range(layers)])
            self.norm = nn.LayerNorm(h)

        def forward(self, ids, targets):
            x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))
            x = self.norm(self.blocks(x))
            logits = F.linear(x, self.wte.weight)
            return F.cross_entropy(logits.float().view(-1, VOCAB), targets.view(-1))

    rows = []
    for name in a.sizes.split(","):
        h, heads, layers, mbss = SIZES[name]
        model = Mpt(h, heads, layers).cuda().to(torch.bfloat16)
        for b in mbss:
            ids = torch.randint(0, VOCAB, (b, SEQ), device="cuda")
            tgt = torch.randint(0, VOCAB, (b, SEQ), device="cuda")
            x = torch.randn(b, SEQ, h, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            go = torch.randn_like(x)

            def step():
                model(ids, tgt).backward()

            def blocks():
                torch.autograd.backward(model.blocks(x), go)

            ms = median_ms(torch, step, a.iters, warmup=3)
            ms_blocks = median_ms(torch, blocks, a.iters, warmup=3)
            model.zero_grad(set_to_none=True)
            tokens = b * SEQ
            rows.append({"size": name, "hidden": h, "layers": layers, "micro_batch_size": b, "step_ms": ms,
                         "blocks_ms": ms_blocks, "tokens_per_s": tokens / ms * 1e3})
            print(f"{name:5s} mbs {b:3d}: step {ms:9.3f} ms  blocks {ms_blocks:9.3f} ms  "
                  f"{tokens / ms * 1e3:10.0f} tokens/s", flush=True)
        del model
        torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "seq_len": SEQ,
                       "vocab": VOCAB, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
