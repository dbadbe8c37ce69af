#!/usr/bin/env python3
"""Record PyTorch profiler traces of Hugging Face transformers models for `ppsim import-trace`.

Run on a machine with one CUDA GPU, torch and transformers installed (written for torch 2.11,
transformers 5, Python 3.12); nothing is downloaded: each model is built from a config in this
script, with random weights:

    python3 tools/experiments/record_hf_traces.py --out DIR

Two models, a dense one (Llama) and an MoE one (Mixtral), a training step each as users write it
(`loss = model(ids, labels=ids).loss; loss.backward()`: the backward runs through autograd, on
its own thread), each recorded three ways:
  {model}_stack.json.gz     with_stack=True only: module scopes (`nn.Module: LlamaDecoderLayer_3`),
                            no range of ours
  {model}_fwd.json.gz       one record_function range per decoder layer's forward
                            (`layers.{i}.forward`, opened and closed by module forward hooks);
                            no backward ranges
  {model}_fwdbwd.json.gz    the same, plus one range per decoder layer's backward
                            (`layers.{i}.backward`), opened and closed by tensor hooks on the
                            hidden state between layers, on autograd's thread: the ground truth
and ground_truth.json: per model, per layer, the forward and backward kernel time of one step
(kernels launched under that layer's range in the fwdbwd trace, summed by this script from the
trace itself, divided by the recorded steps), and the settings. `tools/experiments/compare_hf_traces.py`
imports each trace with ppsim and compares its per-layer F and B with it (docs/TRACES.md).
"""
import argparse
import gzip
import json
import os
import shutil
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="directory for the traces and ground_truth.json")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--ffn", type=int, default=1408, help="dense MLP width (Llama)")
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--expert-ffn", type=int, default=704)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=2, help="recorded steps per trace")
    ap.add_argument("--models", default="llama,mixtral")
    return ap.parse_args()


def build(name, a, torch):
    import transformers as tf

    common = dict(vocab_size=a.vocab, hidden_size=a.hidden, num_hidden_layers=a.layers,
                  num_attention_heads=a.heads, num_key_value_heads=a.heads,
                  max_position_embeddings=max(2048, a.seq), tie_word_embeddings=False)
    if name == "llama":
        cfg = tf.LlamaConfig(intermediate_size=a.ffn, **common)
    elif name == "mixtral":
        cfg = tf.MixtralConfig(intermediate_size=a.expert_ffn, num_local_experts=a.experts,
                               num_experts_per_tok=a.top_k, **common)
    else:
        raise SystemExit(f"unknown model {name}")
    try:
        cfg._attn_implementation = "sdpa"
    except Exception:
        pass
    torch.manual_seed(0)
    model = tf.AutoModelForCausalLM.from_config(cfg).to(device="cuda", dtype=torch.bfloat16)
    model.train()
    return model


def decoder_layers(model):
    for path in ("model.layers", "transformer.h", "layers"):
        m = model
        ok = True
        for part in path.split("."):
            if not hasattr(m, part):
                ok = False
                break
            m = getattr(m, part)
        if ok:
            return list(m)
    raise SystemExit("no decoder layer list found")


class Ranges:
    """Per-layer record_function ranges opened and closed by hooks (way b: forward; c: both)."""

    def __init__(self, torch, layers, backward):
        self.torch = torch
        self.open_f = {}
        self.open_b = {}
        self.handles = []
        self.L = len(layers)
        self.backward = backward
        for i, layer in enumerate(layers):
            self.handles.append(layer.register_forward_pre_hook(self._pre(i), with_kwargs=True))
            self.handles.append(layer.register_forward_hook(self._post(i), with_kwargs=True))

    def _rf(self, name):
        rf = self.torch.profiler.record_function(name)
        rf.__enter__()
        return rf

    def _close_b(self, i):
        rf = self.open_b.pop(i, None)
        if rf is not None:
            rf.__exit__(None, None, None)

    def _pre(self, i):
        def hook(module, args, kwargs):
            self.open_f[i] = self._rf(f"layers.{i}.forward")
            if self.backward and self.torch.is_grad_enabled():
                x = args[0] if args else kwargs.get("hidden_states")
                if x is not None and x.requires_grad:
                    # The gradient of layer i's input is ready: layer i's backward is over, and
                    # (its input being layer i-1's output) layer i-1's begins.
                    def on_input_grad(g, i=i):
                        self._close_b(i)
                        if i > 0:
                            self.open_b[i - 1] = self._rf(f"layers.{i - 1}.backward")
                    x.register_hook(on_input_grad)
            return None
        return hook

    def _post(self, i):
        def hook(module, args, kwargs, out):
            rf = self.open_f.pop(i, None)
            if rf is not None:
                rf.__exit__(None, None, None)
            if self.backward and i == self.L - 1 and self.torch.is_grad_enabled():
                y = out[0] if isinstance(out, (tuple, list)) else out
                if y is not None and getattr(y, "requires_grad", False):
                    def on_output_grad(g, i=i):
                        self.open_b[i] = self._rf(f"layers.{i}.backward")
                    y.register_hook(on_output_grad)
            return None
        return hook

    def remove(self):
        for h in self.handles:
            h.remove()
        for d in (self.open_f, self.open_b):
            for rf in d.values():
                rf.__exit__(None, None, None)
            d.clear()


def step(model, ids, torch):
    with torch.profiler.record_function("train_step"):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
    model.zero_grad(set_to_none=True)


def record(model, ids, a, torch, path, with_stack, ranges):
    from torch.profiler import ProfilerActivity, profile

    for _ in range(a.warmup):
        step(model, ids, torch)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], with_stack=with_stack) as prof:
        for _ in range(a.steps):
            step(model, ids, torch)
        torch.cuda.synchronize()
    if ranges is not None:
        ranges.remove()
    raw = path[:-3]
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as src, gzip.open(path, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(raw)
    return raw


def kernel_time_per_range(path, pattern):
    """Per (layer, pass) kernel time of the GPU work launched under `layers.{i}.{forward|backward}`
    ranges, from the trace itself: kernel -> launch (correlation id) -> the innermost such range
    open on the launching thread."""
    import re

    with gzip.open(path, "rt") as f:
        tr = json.load(f)
    ev = tr["traceEvents"] if isinstance(tr, dict) else tr
    rx = re.compile(pattern)
    launches = {}
    ranges = {}
    kernels = []
    for e in ev:
        if e.get("ph") != "X":
            continue
        cat = str(e.get("cat", "")).lower()
        args = e.get("args") or {}
        if cat in ("cuda_runtime", "cuda_driver", "runtime") and "correlation" in args:
            launches[args["correlation"]] = ((e.get("pid"), e.get("tid")), float(e["ts"]))
        elif cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            kernels.append((args.get("correlation"), float(e.get("dur", 0))))
        elif cat == "user_annotation":
            m = rx.fullmatch(str(e.get("name", "")))
            if m:
                ranges.setdefault((e.get("pid"), e.get("tid")), []).append(
                    (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), int(m.group(1)), m.group(2)))
    out = {}
    for corr, dur in kernels:
        if corr not in launches:
            continue
        th, ts = launches[corr]
        best = None
        for r in ranges.get(th, ()):
            if r[0] <= ts < r[1] and (best is None or r[0] >= best[0]):
                best = r
        if best is not None:
            key = (best[2], best[3])
            out[key] = out.get(key, 0.0) + dur
    return out


def main():
    a = parse_args()
    import torch

    os.makedirs(a.out, exist_ok=True)
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device")
    import transformers

    truth = {"torch": torch.__version__, "transformers": transformers.__version__,
             "device": torch.cuda.get_device_name(0), "settings": vars(a), "models": {}}
    for name in a.models.split(","):
        t0 = time.time()
        model = build(name, a, torch)
        layers = decoder_layers(model)
        g = torch.Generator(device="cuda")
        g.manual_seed(1)
        ids = torch.randint(0, a.vocab, (a.batch, a.seq), device="cuda", generator=g)
        files = {}
        for way in ("stack", "fwd", "fwdbwd"):
            ranges = None if way == "stack" else Ranges(torch, layers, backward=(way == "fwdbwd"))
            path = os.path.join(a.out, f"{name}_{way}.json.gz")
            record(model, ids, a, torch, path, with_stack=(way == "stack"), ranges=ranges)
            files[way] = os.path.basename(path)
            print(f"{name}: wrote {path} ({os.path.getsize(path) / 1e6:.1f} MB)", flush=True)
        per = kernel_time_per_range(os.path.join(a.out, files["fwdbwd"]), r"layers\.(\d+)\.(forward|backward)")
        rows = []
        for i in range(len(layers)):
            f = per.get((i, "forward"), 0.0) / a.steps / 1e3
            b = per.get((i, "backward"), 0.0) / a.steps / 1e3
            rows.append({"layer": i, "F_ms": f, "B_ms": b})
            print(f"{name}: layer {i}: F {f:.4f} ms, B {b:.4f} ms (kernel time per step)", flush=True)
        truth["models"][name] = {"class": type(model).__name__, "layers": rows, "traces": files,
                                 "params": sum(p.numel() for p in model.parameters()),
                                 "seconds": time.time() - t0}
        del model
        torch.cuda.empty_cache()
    with open(os.path.join(a.out, "ground_truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
    print("wrote", os.path.join(a.out, "ground_truth.json"))


if __name__ == "__main__":
    sys.exit(main())
