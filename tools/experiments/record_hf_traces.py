#!/usr/bin/env python3
"""Record PyTorch profiler traces of Hugging Face transformers models for `ppsim import-trace`.

Run on a machine with one CUDA GPU, torch and transformers installed (written for torch 2.11,
transformers 5); nothing is downloaded: each model is built from a config in this script, with
random weights (bf16, SDPA attention):

    python3 tools/experiments/record_hf_traces.py --out DIR [--models llama,qwen2,gpt2,qwen2_moe,phi3]

Each model's training step is written as users write it (`model(ids, labels=ids).loss.backward()`;
the backward runs through autograd, on its own thread), with and without activation checkpointing
(transformers' `gradient_checkpointing_enable()`), each recorded three ways:
  {model}_{ck}_stack.json.gz   with_stack=True only: module scopes (`nn.Module: Qwen2Attention_0`)
  {model}_{ck}_sub.json.gz     the user's record_function ranges around each layer's attention and
                               MLP forward, named by module path (`model.layers.3.self_attn.forward`,
                               `transformer.h.3.mlp.forward`), opened and closed by module hooks
  {model}_{ck}_subbwd.json.gz  the same plus explicit backward ranges (`....self_attn.backward`),
                               opened and closed by tensor hooks on autograd's thread
where {ck} is `plain` or `ckpt`. Plus `inference.json.gz` (a forward-only step under no_grad) and
`slowed_profiler.json.gz` (a tiny model recorded with record_shapes, with_stack and
profile_memory: the host, not the GPU, sets its step) and `slowed_sleep.json.gz` (a host sleep
before each layer).

The ground truth is in every trace, as ranges no rule of ppsim reads (`gt:3:f` the first forward
of decoder layer 3, `gt:3:a` its attention module's forward, `gt:3:r` the layer's forward re-run
inside the backward (recompute), `gt:3:b` its backward: from the gradient of its output to the
gradient of its input, tensor hooks outside the checkpoint). tools/experiments/compare_hf_traces.py sums each
layer's kernels under them from the trace itself (kernel -> launch by correlation id -> the ranges
open on the launching thread) and compares ppsim's import with them. meta.json: versions, settings,
the unprofiled step time (CUDA events) per case.
"""
import argparse
import gzip
import json
import os
import shutil
import sys
import threading
import time
import traceback


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="directory for the traces and meta.json")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--ffn", type=int, default=2816, help="dense MLP width")
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--expert-ffn", type=int, default=704)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2, help="recorded steps per trace")
    ap.add_argument("--models", default="llama,qwen2,gpt2,qwen2_moe,phi3")
    ap.add_argument("--ways", default="stack,sub,subbwd")
    ap.add_argument("--extras", default="inference,slowed", help="inference, slowed (comma list, or none)")
    ap.add_argument("--deadline", type=float, default=0, help="seconds: start no model after this (0: none)")
    return ap.parse_args()


def config(name, a, tf, hidden=None, layers=None):
    h = hidden or a.hidden
    n = layers or a.layers
    common = dict(vocab_size=a.vocab, hidden_size=h, num_hidden_layers=n, num_attention_heads=a.heads,
                  num_key_value_heads=a.heads, max_position_embeddings=max(2048, a.seq),
                  tie_word_embeddings=False)
    ffn = a.ffn * h // a.hidden
    if name == "llama":
        return tf.LlamaConfig(intermediate_size=ffn, **common)
    if name == "qwen2":
        return tf.Qwen2Config(intermediate_size=ffn, **common)
    if name == "phi3":
        return tf.Phi3Config(intermediate_size=ffn, pad_token_id=0, bos_token_id=1, eos_token_id=2, **common)
    if name == "qwen2_moe":
        return tf.Qwen2MoeConfig(intermediate_size=ffn, moe_intermediate_size=a.expert_ffn, num_experts=a.experts,
                                 num_experts_per_tok=a.top_k, shared_expert_intermediate_size=2 * a.expert_ffn,
                                 decoder_sparse_step=1, mlp_only_layers=[], **common)
    if name == "mixtral":
        return tf.MixtralConfig(intermediate_size=a.expert_ffn, num_local_experts=a.experts,
                                num_experts_per_tok=a.top_k, **common)
    if name == "gpt2":
        return tf.GPT2Config(vocab_size=a.vocab, n_embd=h, n_layer=n, n_head=a.heads, n_positions=max(1024, a.seq),
                             n_inner=4 * h)
    raise SystemExit(f"unknown model {name}")


def build(name, a, torch, hidden=None, layers=None):
    import transformers as tf

    cfg = config(name, a, tf, hidden, layers)
    torch.manual_seed(0)
    try:
        model = tf.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    except Exception:
        model = tf.AutoModelForCausalLM.from_config(cfg)
    return model.to(device="cuda", dtype=torch.bfloat16).train()


def find(model, paths):
    for path in paths:
        m = model
        for part in path.split("."):
            m = getattr(m, part, None)
            if m is None:
                break
        if m is not None:
            return path, m
    return None, None


def structure(model):
    """(layer path prefix, layers, final norm, [(path, attention, mlp) per layer])."""
    lp, layers = find(model, ("model.layers", "transformer.h", "model.decoder.layers"))
    _, final = find(model, ("model.norm", "transformer.ln_f", "model.decoder.final_layer_norm"))
    if layers is None or final is None:
        raise SystemExit(f"{type(model).__name__}: no decoder layers or final norm found")
    subs = []
    for i, layer in enumerate(layers):
        an = "self_attn" if hasattr(layer, "self_attn") else "attn"
        subs.append((f"{lp}.{i}", an, getattr(layer, an), getattr(layer, "mlp")))
    return lp, list(layers), final, subs


def first_tensor(x):
    if isinstance(x, (tuple, list)):
        return x[0] if x else None
    return x


def in_backward():
    return threading.current_thread() is not threading.main_thread()


class Hooks:
    """Ranges opened and closed by hooks; `gt` the ground truth's, `user` the user's sub-module ranges."""

    def __init__(self, torch, model, user_fwd, user_bwd):
        self.torch = torch
        self.open = {}
        self.handles = []
        _, layers, final, subs = structure(model)
        self.L = len(layers)
        for i, layer in enumerate(layers):
            self.handles.append(layer.register_forward_pre_hook(self._layer_pre(i), with_kwargs=True))
            self.handles.append(layer.register_forward_hook(self._layer_post(i), with_kwargs=True))
        self.handles.append(final.register_forward_pre_hook(self._final_pre(), with_kwargs=True))
        for i, (path, an, attn, mlp) in enumerate(subs):
            self._sub(attn, f"gt:{i}:a", None, False, gt_only=True)
            if user_fwd:
                self._sub(attn, f"{path}.{an}.forward", f"{path}.{an}.backward", user_bwd)
                self._sub(mlp, f"{path}.mlp.forward", f"{path}.mlp.backward", user_bwd)

    def _enter(self, key, name):
        rf = self.torch.profiler.record_function(name)
        rf.__enter__()
        self.open.setdefault(key, []).append(rf)

    def _exit(self, key):
        lst = self.open.get(key)
        if lst:
            lst.pop().__exit__(None, None, None)

    def _grad_hook(self, t, fn):
        if t is not None and getattr(t, "requires_grad", False):
            t.register_hook(lambda g: (fn(), None)[1])

    def _sub(self, m, fname, bname, bwd, gt_only=False):
        def pre(module, args, kwargs):
            x = args[0] if args else kwargs.get("hidden_states")
            if gt_only:  # the attention module's first forward (a recompute is told apart)
                self._enter(("a",), fname + ("r" if in_backward() else ""))
                return None
            self._enter(("f", fname), fname)
            if bwd and self.torch.is_grad_enabled():
                self._grad_hook(x, lambda: self._exit(("b", bname)))
            return None

        def post(module, args, kwargs, out):
            if gt_only:
                self._exit(("a",))
                return None
            self._exit(("f", fname))
            if bwd and self.torch.is_grad_enabled():
                self._grad_hook(first_tensor(out), lambda: self._enter(("b", bname), bname))
            return None

        self.handles.append(m.register_forward_pre_hook(pre, with_kwargs=True))
        self.handles.append(m.register_forward_hook(post, with_kwargs=True))

    def _layer_pre(self, i):
        def hook(module, args, kwargs):
            x = args[0] if args else kwargs.get("hidden_states")
            if in_backward():  # the forward re-run inside the backward: recompute
                self._enter(("l", i), f"gt:{i}:r")
                return None
            self._enter(("l", i), f"gt:{i}:f")

            # The gradient of layer i's input (outside any checkpoint) ends layer i's backward and
            # begins layer i-1's.
            def on_input_grad(i=i):
                self._exit(("gb", i))
                if i > 0:
                    self._enter(("gb", i - 1), f"gt:{i - 1}:b")
            self._grad_hook(x, on_input_grad)
            return None
        return hook

    def _layer_post(self, i):
        def hook(module, args, kwargs, out):
            self._exit(("l", i))
            return None
        return hook

    def _final_pre(self):
        def hook(module, args, kwargs):
            if in_backward():
                return None
            x = args[0] if args else kwargs.get("hidden_states")
            self._grad_hook(x, lambda: self._enter(("gb", self.L - 1), f"gt:{self.L - 1}:b"))
            return None
        return hook

    def remove(self):
        for h in self.handles:
            h.remove()
        for lst in self.open.values():
            while lst:
                lst.pop().__exit__(None, None, None)
        self.open.clear()


def train_step(model, ids, torch):
    with torch.profiler.record_function("train_step"):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
    model.zero_grad(set_to_none=True)


def timed(fn, torch, n=3):
    """Mean wall time of fn() over n calls, ms (CUDA events, unprofiled)."""
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    s.record()
    for _ in range(n):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / n


def record(fn, a, torch, path, **kw):
    """Warm-up steps, the unprofiled step time (returned, ms), then the recorded steps."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(a.warmup):
        fn()
    unprofiled = timed(fn, torch)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], **kw) as prof:
        for _ in range(a.steps):
            fn()
        torch.cuda.synchronize()
    raw = path[:-3]
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as src, gzip.open(path, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(raw)
    print(f"wrote {path} ({os.path.getsize(path) / 1e6:.1f} MB; unprofiled step {unprofiled:.2f} ms)", flush=True)
    return unprofiled


def ids_for(a, torch, batch=None, seq=None):
    g = torch.Generator(device="cuda")
    g.manual_seed(1)
    return torch.randint(0, a.vocab, (batch or a.batch, seq or a.seq), device="cuda", generator=g)


def record_model(name, a, torch, meta):
    ids = ids_for(a, torch)
    model = build(name, a, torch)
    info = meta["models"].setdefault(name, {"class": type(model).__name__, "cases": {}})
    info["params"] = sum(p.numel() for p in model.parameters())
    info["layer_path"] = structure(model)[0]
    for ck in ("plain", "ckpt"):
        if ck == "ckpt":
            model.gradient_checkpointing_enable()
        for way in a.ways.split(","):
            t0 = time.time()
            hooks = Hooks(torch, model, user_fwd=way != "stack", user_bwd=way == "subbwd")
            path = os.path.join(a.out, f"{name}_{ck}_{way}.json.gz")
            try:
                step = lambda: train_step(model, ids, torch)  # noqa: E731
                unprofiled = record(step, a, torch, path, with_stack=(way == "stack"))
                info["cases"][os.path.basename(path)] = {"checkpointing": ck == "ckpt", "way": way,
                                                         "unprofiled_step_ms": unprofiled,
                                                         "seconds": time.time() - t0}
            finally:
                hooks.remove()
    del model
    torch.cuda.empty_cache()


def record_extras(a, torch, meta):
    extras = a.extras.split(",")
    if "inference" in extras:
        model = build("llama", a, torch).eval()
        ids = ids_for(a, torch)

        def infer():
            with torch.no_grad(), torch.profiler.record_function("infer_step"):
                model(input_ids=ids)
        ms = record(infer, a, torch, os.path.join(a.out, "inference.json.gz"))
        meta["extras"]["inference.json.gz"] = {"model": "llama", "unprofiled_step_ms": ms}
        del model
    if "slowed" in extras:
        # A tiny model: the host (Python, the dispatcher, and the profiler's shapes, stacks and
        # memory records) takes longer per op than the GPU.
        model = build("llama", a, torch, hidden=256, layers=2)
        ids = ids_for(a, torch, batch=2, seq=64)
        step = lambda: train_step(model, ids, torch)  # noqa: E731
        ms = record(step, a, torch, os.path.join(a.out, "slowed_profiler.json.gz"), record_shapes=True,
                    with_stack=True, profile_memory=True)
        meta["extras"]["slowed_profiler.json.gz"] = {"model": "llama tiny", "unprofiled_step_ms": ms}
        del model
        # A host sleep of 2 ms before each decoder layer's forward, on the normal-size model.
        model = build("llama", a, torch)
        ids = ids_for(a, torch)
        hs = [layer.register_forward_pre_hook(lambda m, x: time.sleep(0.002)) for layer in structure(model)[1]]
        step = lambda: train_step(model, ids, torch)  # noqa: E731
        ms = record(step, a, torch, os.path.join(a.out, "slowed_sleep.json.gz"))
        for h in hs:
            h.remove()
        meta["extras"]["slowed_sleep.json.gz"] = {"model": "llama", "unprofiled_step_ms": ms,
                                                  "host_sleep_ms_per_layer": 2}
        del model
    torch.cuda.empty_cache()


def main():
    a = parse_args()
    import torch
    import transformers

    os.makedirs(a.out, exist_ok=True)
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device")
    meta = {"torch": torch.__version__, "transformers": transformers.__version__,
            "device": torch.cuda.get_device_name(0), "settings": vars(a), "models": {}, "extras": {},
            "errors": []}

    def save():
        with open(os.path.join(a.out, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
    jobs = [(n, lambda n=n: record_model(n, a, torch, meta)) for n in a.models.split(",") if n]
    if a.extras != "none":  # before the last model (the held-out one comes last in the defaults)
        jobs.insert(max(0, len(jobs) - 1), ("extras", lambda: record_extras(a, torch, meta)))
    start = time.time()
    for name, job in jobs:
        if a.deadline and time.time() - start > a.deadline:
            meta["errors"].append(f"{name}: not recorded (--deadline {a.deadline:.0f} s passed)")
            continue
        try:
            job()
        except Exception as e:  # one model's failure must not cost the others' traces
            traceback.print_exc()
            meta["errors"].append(f"{name}: {type(e).__name__}: {e}")
        save()
    print("wrote", os.path.join(a.out, "meta.json"))
    return 1 if meta["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
