#!/usr/bin/env python3
"""Measures, on one GPU with PyTorch, a Megatron-style GPT layer against the embedding and the
output head with its cross-entropy, for the Zero Bubble paper's four models (arXiv 2401.10241,
Table 3: hidden, heads, micro-batch; sequence 1024; GPT-2 vocabulary 50,304 padded as Megatron
does). docs/FIDELITY.md uses the ratio (embedding + head) / layer to check ppsim's cost model where
the paper's 1.5B rows are decided by its last stage (two layers and the head).

The layer is Megatron-LM's GPT layer as the paper ran it (no flash attention, dropout 0.1): layer
norm, QKV projection, attention with the s x s scores materialized (causal mask, softmax, dropout),
output projection, bias-dropout-add, layer norm, h -> 4h GELU MLP, bias-dropout-add. The head is
the final layer norm, the vocabulary projection and the cross-entropy in fp32 (Megatron computes
it on the logits cast to float). Each part runs forward and backward (bf16), timed with CUDA events,
median of `--iters` after warm-up. `--compile` also times torch.compile'd versions (fused
elementwise kernels, closer to Megatron's fused softmax and bias-GELU).

Usage: python3 tools/experiments/measure_gpt_head_layer.py [--iters 20] [--compile] [--json out.json]
       python3 tools/experiments/measure_gpt_head_layer.py --ppsim build/ppsim [--gpu h100] [--measured out.json]
The second form needs no GPU: ppsim's figures for the same shapes (one stage, one micro-batch,
gpipe; a layer = the makespan with 2 layers minus with 1), beside a measured JSON if given.
Both also give the layer's split of the backward: I (the input gradient alone,
torch.autograd.grad with respect to the layer's input) and W = B - I (the weight gradients), the
split zero-bubble schedules move around; ppsim's from its chunk_times.
"""
import argparse
import json
import sys

from cuda_timing import cuda_torch, median_ms

MODELS = {  # name: (hidden, heads, micro-batch)  -- Zero Bubble paper, Table 3
    "1.5b": (2304, 24, 6),
    "6.2b": (4096, 32, 3),
    "14.6b": (5120, 40, 1),
    "28.3b": (6144, 48, 1),
}
SEQ, VOCAB = 1024, 50304


def predict(ppsim, gpu, measured):
    import os
    import subprocess
    import tempfile
    meas = json.load(open(measured))["models"] if measured else {}
    print(f"ppsim {gpu}: forward + backward per micro-batch, ms")
    print(f"{'model':8} {'layer':>8} {'emb+head':>9} {'ratio':>7}" + ("   measured eager layer / emb+head / ratio" if meas else ""))
    for name, (h, heads, b) in MODELS.items():
        ms = {}
        for layers in (1, 2):
            text = (f"model: {{layers: {layers}, heads: {heads}, hidden: {h}, ffn_hidden: {4 * h}, vocab: {VOCAB}, "
                    f"seq_len: {SEQ}, micro_batch_size: {b}, mlp: gelu, norm: layernorm, dropout: true, "
                    f"flash_attention: false}}\n"
                    "precision: {gemm: bf16, params: bf16, grads: fp32, optimizer: fp32}\n"
                    f"cluster: {{gpu: {gpu}, gpus: 1}}\n"
                    "costs: {tp_comm: false, dp_comm: false, optimizer_step: false}\n"
                    "parallel: {pp: 1, microbatches: 1}\n")
            with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
                f.write(text)
            try:
                out = subprocess.run([ppsim, "compare", f.name, "--schedules", "gpipe", "--format", "json"],
                                     capture_output=True, text=True, check=True).stdout
            finally:
                os.unlink(f.name)
            ms[layers] = json.loads(out)["results"][0]["chunk_times"]
        lay = {k: ms[2][k] - ms[1][k] for k in ("F", "B", "W")}
        layer = lay["F"] + lay["B"]
        rest = ms[1]["F"] + ms[1]["B"] - layer
        line = (f"{name:8} {layer:8.2f} {rest:9.2f} {rest / layer:7.3f}   F {lay['F']:.2f} I {lay['B'] - lay['W']:.2f} "
                f"W {lay['W']:.2f} (I/W {(lay['B'] - lay['W']) / lay['W']:.2f})")
        if name in meas:
            e = meas[name]["eager"]
            line += f"   measured: {e['layer_ms']:.2f} / {e['head_ms'] + e['embedding_ms']:.2f} / {e['ratio']:.3f}"
            if "split" in meas[name]:
                sp = meas[name]["split"]
                line += f"; F {sp['F_ms']:.2f} I {sp['I_ms']:.2f} W {sp['W_ms']:.2f} (I/W {sp['I_ms'] / sp['W_ms']:.2f})"
        print(line)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--json", default="")
    ap.add_argument("--ppsim", default="", help="print ppsim's figures instead (no GPU needed)")
    ap.add_argument("--gpu", default="h100", help="ppsim's GPU type for --ppsim")
    ap.add_argument("--measured", default="", help="a measured --json file to print beside --ppsim's figures")
    a = ap.parse_args()
    if a.ppsim:
        return predict(a.ppsim, a.gpu, a.measured)
    torch = cuda_torch("measure_gpt_head_layer")
    if torch is None:
        return 0
    import torch.nn as nn
    import torch.nn.functional as F
    dev = torch.device("cuda")
    dt = torch.bfloat16

    class Layer(nn.Module):
        def __init__(self, h, heads):
            super().__init__()
            self.h, self.heads = h, heads
            self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
            self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
            self.fc1, self.fc2 = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

        def forward(self, x):  # x: [s, b, h] as Megatron
            s, b, h = x.shape
            d = h // self.heads
            q, k, v = self.qkv(self.ln1(x)).view(s, b * self.heads, 3 * d).split(d, dim=-1)
            scores = torch.baddbmm(torch.empty(b * self.heads, s, s, dtype=x.dtype, device=x.device),
                                   q.transpose(0, 1), k.transpose(0, 1).transpose(1, 2), beta=0.0, alpha=d ** -0.5)
            mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
            p = F.dropout(torch.softmax(scores.masked_fill(mask, float("-inf")).float(), dim=-1).to(x.dtype), 0.1, True)
            ctx = torch.bmm(p, v.transpose(0, 1)).transpose(0, 1).reshape(s, b, h)
            x = x + F.dropout(self.proj(ctx), 0.1, True)
            return x + F.dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)))), 0.1, True)

    class Head(nn.Module):
        def __init__(self, h):
            super().__init__()
            self.ln = nn.LayerNorm(h)
            self.out = nn.Linear(h, VOCAB, bias=False)

        def forward(self, x, target):
            logits = self.out(self.ln(x))
            return F.cross_entropy(logits.float().view(-1, VOCAB), target.view(-1))

    class Embedding(nn.Module):
        def __init__(self, h):
            super().__init__()
            self.word, self.pos = nn.Embedding(VOCAB, h), nn.Embedding(SEQ, h)

        def forward(self, tokens):  # tokens: [s, b]
            pos = torch.arange(tokens.shape[0], device=tokens.device)[:, None]
            return F.dropout(self.word(tokens) + self.pos(pos), 0.1, True)

    def timed(fn):
        return median_ms(torch, fn, a.iters)

    results = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "models": {}}
    for name, (h, heads, b) in MODELS.items():
        row = {}
        for mode in (["eager", "compile"] if a.compile else ["eager"]):
            layer = Layer(h, heads).to(dev, dt)
            head = Head(h).to(dev, dt)
            emb = Embedding(h).to(dev, dt)
            lf, hf, ef = layer, head, emb
            if mode == "compile":
                lf, hf, ef = torch.compile(layer), torch.compile(head), torch.compile(emb)
            x = torch.randn(SEQ, b, h, device=dev, dtype=dt, requires_grad=True)
            tok = torch.randint(0, VOCAB, (SEQ, b), device=dev)

            def run_layer():
                lf(x).backward(torch.ones_like(x))

            def run_head():
                hf(x, tok).backward()

            def run_emb():
                ef(tok).backward(torch.ones(SEQ, b, h, device=dev, dtype=dt))

            t_layer, t_head, t_emb = timed(run_layer), timed(run_head), timed(run_emb)
            row[mode] = {"layer_ms": t_layer, "head_ms": t_head, "embedding_ms": t_emb,
                         "ratio": (t_head + t_emb) / t_layer}
            if mode == "eager":
                # The backward's split: each timed on a fresh forward (not timed).
                g = torch.ones_like(x)
                state = {}

                def fwd():
                    state["y"] = layer(x)

                def grad_input():
                    torch.autograd.grad(state["y"], x, g)

                def grad_all():
                    state["y"].backward(g)

                def split_time(fn):
                    ts = []
                    for _ in range(a.iters):
                        fwd()
                        torch.cuda.synchronize()
                        ts.append(median_ms(torch, fn, 1, warmup=0))
                    return sorted(ts)[len(ts) // 2]
                fwd()
                grad_all()  # warm-up
                t_f = median_ms(torch, fwd, a.iters)
                t_i, t_b = split_time(grad_input), split_time(grad_all)
                row["split"] = {"F_ms": t_f, "I_ms": t_i, "B_ms": t_b, "W_ms": t_b - t_i}
            del layer, head, emb, lf, hf, ef, x
            torch.cuda.empty_cache()
        results["models"][name] = row
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    print(f"{results['device']}, torch {results['torch']}: forward + backward per micro-batch, ms (median of {a.iters})")
    print(f"{'model':8} {'mode':8} {'layer':>8} {'head+CE':>8} {'embed':>8} {'(emb+head)/layer':>17}")
    for name, row in results["models"].items():
        for mode, r in row.items():
            if mode == "split":
                continue
            print(f"{name:8} {mode:8} {r['layer_ms']:8.3f} {r['head_ms']:8.3f} {r['embedding_ms']:8.3f} {r['ratio']:17.3f}")
    print("the layer's backward split (eager), ms: F, I (input grad), W = B - I")
    for name, row in results["models"].items():
        sp = row.get("split")
        if sp:
            print(f"{name:8} F {sp['F_ms']:7.3f}  I {sp['I_ms']:7.3f}  W {sp['W_ms']:7.3f}  I/W {sp['I_ms'] / sp['W_ms']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
