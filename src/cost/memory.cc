// Parameter counts and memory per rank (memory.h explains the activation model and lists the tensors).
#include "cost/memory.h"

#include <algorithm>

#include "cost/step_costs.h"

namespace ppsim {

namespace {

double norm_params(const ModelSpec& m, double width) { return m.norm == NormKind::layernorm ? 2 * width : width; }
// A gated MLP (SwiGLU, GeGLU) has three h x f matrices, a plain one two; biases: f on each
// up-projection, h on the down-projection.
double mlp_params(const ModelSpec& m, double h, double f) {
  const double up = m.mlp == MlpKind::swiglu ? 2.0 : 1.0;
  return (up + 1) * h * f + (m.mlp_bias ? up * f + h : 0);
}

// The attention projections of one layer, with their biases, q/k norms and sinks.
double attention_params(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden), a = m.heads;
  if (m.mla.enabled) {
    // MLA: the low-rank paths and their norms.
    const MlaSpec& q = m.mla;
    const double dn = static_cast<double>(q.qk_nope_head_dim), dr = static_cast<double>(q.qk_rope_head_dim);
    const double dv = static_cast<double>(q.v_head_dim), qr = static_cast<double>(q.q_lora_rank);
    const double kvr = static_cast<double>(q.kv_lora_rank);
    double p = qr > 0 ? h * qr + qr * a * (dn + dr) + norm_params(m, qr) : h * a * (dn + dr);
    p += h * (kvr + dr) + kvr * a * (dn + dv) + norm_params(m, kvr) + a * dv * h;
    return p + (m.out_bias ? h : 0);
  }
  // GQA: h(a+2g)d + a d h, biases (a+2g)d and h, q/k norms over one head (2d) or all ((a+g)d).
  const double d = static_cast<double>(m.head_dim), g = m.kv_heads;
  double p = h * (a + 2 * g) * d + a * d * h;
  if (m.qkv_bias) p += (a + 2 * g) * d;
  if (m.out_bias) p += h;
  if (m.qk_norm == ModelSpec::QkNorm::per_head) p += norm_params(m, 2 * d);
  if (m.qk_norm == ModelSpec::QkNorm::full) p += norm_params(m, (a + g) * d);
  if (m.attention_sinks) p += a;
  return p;
}

}  // namespace

LayerParamParts layer_param_parts(const ModelSpec& m, int layer) {
  const double h = static_cast<double>(m.hidden);
  LayerParamParts p;
  p.attention = attention_params(m);
  p.norms = m.norms_per_layer * norm_params(m, h);  // before attention and before the MLP (Gemma-2: after too)
  if (!m.layer_is_moe(layer)) {
    p.dense_mlp = mlp_params(m, h, static_cast<double>(m.ffn_hidden));
  } else {
    const double fe = static_cast<double>(m.moe.expert_ffn_hidden);
    p.router = h * m.moe.experts + (m.moe.router_bias ? m.moe.experts : 0);
    p.shared_experts = m.moe.shared_experts * mlp_params(m, h, static_cast<double>(m.moe.shared_width()));
    p.routed_experts = m.moe.experts * mlp_params(m, h, fe);
  }
  return p;
}

double final_norm_params(const ModelSpec& m) { return norm_params(m, static_cast<double>(m.hidden)); }

double mtp_projection_params(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden);
  return 2 * h * h + 3 * norm_params(m, h);
}

ParamCount layer_params(const ModelSpec& m, int layer) {
  const LayerParamParts parts = layer_param_parts(m, layer);
  return ParamCount{parts.dense(), parts.routed_experts};
}

double embedding_params(const ModelSpec& m) {
  return static_cast<double>(m.vocab + m.learned_positions) * static_cast<double>(m.hidden);
}

double head_params(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden);
  return static_cast<double>(m.vocab) * h + final_norm_params(m);
}

double model_params(const ModelSpec& m) {
  double sum = embedding_params(m) + head_params(m);
  if (m.tied_embeddings) sum -= static_cast<double>(m.vocab) * static_cast<double>(m.hidden);
  for (int l = 0; l < m.layers; ++l) sum += layer_params(m, l).total();
  return sum;
}

ParamCount mtp_module_params(const ModelSpec& m) {
  ParamCount p = layer_params(m, m.layers - 1);
  p.dense += mtp_projection_params(m);
  return p;
}

namespace {

double gemm_in(const ModelConfigData& c) { return cache_bytes_per_elem(c.precision.gemm_input_cache); }

void add(std::vector<ActTensor>& v, const char* name, double elems, double bytes, unsigned dropped_by = 0,
         bool w_reads = false) {
  if (elems > 0) v.push_back(ActTensor{name, elems, bytes, dropped_by, w_reads});
}
constexpr bool kWReads = true;

// The activation function's tensors for one MLP of width f: its inputs (`in_bytes` each) and
// its output, the next GEMM's input. names: SwiGLU gate, up, product; GELU input, output.
struct ActNames {
  const char *gate, *up, *product, *gelu_in, *gelu_out;
};
constexpr ActNames kMlpNames{"mlp.gate", "mlp.up", "mlp.swiglu_out", "mlp.gelu_in", "mlp.gelu_out"};
constexpr ActNames kRoutedNames{"moe.routed.gate", "moe.routed.up", "moe.routed.swiglu_out", "moe.routed.gelu_in",
                                "moe.routed.gelu_out"};
constexpr ActNames kSharedNames{"moe.shared.gate", "moe.shared.up", "moe.shared.swiglu_out", "moe.shared.gelu_in",
                                "moe.shared.gelu_out"};

void add_act_fn(std::vector<ActTensor>& v, const ActNames& n, const ModelConfigData& c, double f, double in_bytes,
                double copies) {
  if (c.model.mlp == MlpKind::swiglu) {
    add(v, n.gate, copies * f, in_bytes);
    add(v, n.up, copies * f, in_bytes);
    add(v, n.product, copies * f, gemm_in(c), kRecomputeActFn, kWReads);
  } else {
    add(v, n.gelu_in, copies * f, in_bytes);
    add(v, n.gelu_out, copies * f, gemm_in(c), kRecomputeActFn, kWReads);
  }
}

// Without sequence parallelism (parallel.sequence_parallel false) every TP rank keeps the
// hidden-sized per-token tensors whole: t times what a 1/t share holds.
double whole_on_tp(const ModelConfigData& c) {
  return c.parallel.sequence_parallel ? 1.0 : static_cast<double>(c.parallel.tp);
}

}  // namespace

std::vector<ActTensor> layer_tensors(const ModelConfigData& c, int layer) {
  const ModelSpec& m = c.model;
  const double a = m.heads, s = static_cast<double>(m.seq_len);
  const double h = static_cast<double>(m.hidden) * whole_on_tp(c);  // the hidden-sized tensors
  const double attn_out = cache_bytes_per_elem(c.precision.attention_out_cache);
  std::vector<ActTensor> v;
  // Attention block.
  add(v, "attn.norm_in", h, 2);
  if (!m.mla.enabled) {
    const double d = static_cast<double>(m.head_dim), g = m.kv_heads;
    add(v, "attn.qkv_in", h, gemm_in(c), kRecomputeNorm, kWReads);
    add(v, "attn.q", a * d, 2);
    add(v, "attn.k", g * d, 2);
    add(v, "attn.v", g * d, 2);
    add(v, "attn.out_proj_in", a * d, attn_out, 0, kWReads);
  } else {
    const MlaSpec& q = m.mla;
    const double dqk = static_cast<double>(q.qk_nope_head_dim + q.qk_rope_head_dim), dv = static_cast<double>(q.v_head_dim);
    const double qr = static_cast<double>(q.q_lora_rank), kvr = static_cast<double>(q.kv_lora_rank);
    add(v, "attn.down_proj_in", h, gemm_in(c), kRecomputeNorm, kWReads);
    add(v, "attn.q_latent", qr, 2);
    add(v, "attn.q_latent_norm_out", qr, gemm_in(c), kRecomputeNorm, kWReads);
    add(v, "attn.kv_latent", kvr, 2);
    add(v, "attn.kv_latent_norm_out", kvr, gemm_in(c), kRecomputeNorm, kWReads);
    add(v, "attn.k_rope", static_cast<double>(q.qk_rope_head_dim), 2);
    add(v, "attn.q", a * dqk, 2, kRecomputeMlaUp);
    add(v, "attn.k", a * dqk, 2, kRecomputeMlaUp);
    add(v, "attn.v", a * dv, 2, kRecomputeMlaUp);
    add(v, "attn.out_proj_in", a * dv, attn_out, 0, kWReads);
  }
  // The core: flash attention keeps the fp32 log-sum-exp per head; a materialized softmax keeps
  // its output (2as per token) and, with dropout, the mask and the dropped output (5as).
  if (m.flash_attention) {
    add(v, "attn.lse", a, 4);
  } else {
    add(v, "attn.softmax_out", a * s, 2, kRecomputeAttnCore);
    if (m.dropout) {
      add(v, "attn.softmax_dropout_mask", a * s, 1, kRecomputeAttnCore);
      add(v, "attn.softmax_dropout_out", a * s, 2, kRecomputeAttnCore);
    }
  }
  if (m.dropout) add(v, "attn.dropout_mask", h, 1);
  // MLP block.
  add(v, "mlp.norm_in", h, 2);
  if (!m.layer_is_moe(layer)) {
    add(v, "mlp.fc1_in", h, gemm_in(c), kRecomputeNorm, kWReads);
    add_act_fn(v, kMlpNames, c, static_cast<double>(m.ffn_hidden), 2, 1);
  } else {
    const double fe = static_cast<double>(m.moe.expert_ffn_hidden);
    const double copies = m.moe.top_k * m.moe.capacity_factor;
    const double act_in = cache_bytes_per_elem(c.precision.expert_act_cache);
    add(v, "moe.norm_out", h, 2, kRecomputeNorm, kWReads);  // router, shared experts and dispatch read it
    add(v, "moe.router_probs", m.moe.experts, 4);
    add(v, "moe.routed.dispatched_in", copies * h, gemm_in(c), 0, kWReads);
    add_act_fn(v, kRoutedNames, c, fe, act_in, copies);
    // The routing weights' gradient dg = dy . e needs the expert output e, unless the weights
    // are applied inside the expert, to the activation function's output (Megatron-LM's
    // weighted SwiGLU with the permuted probabilities): then dg = d(g a) . a and each copy
    // keeps its fp32 weight instead.
    if (m.moe.keep_expert_output) add(v, "moe.routed.expert_out", copies * h, 2);
    else add(v, "moe.routed.prob", copies, 4);
    add_act_fn(v, kSharedNames, c, static_cast<double>(m.moe.shared_width()), act_in, m.moe.shared_experts);
  }
  if (m.dropout) add(v, "mlp.dropout_mask", h, 1);
  return v;
}

double layer_wgrad_per_token(const ModelConfigData& c, int layer) {
  const ModelSpec& m = c.model;
  const double h = static_cast<double>(m.hidden), a = m.heads;
  double inputs = 0;
  for (const ActTensor& x : layer_tensors(c, layer))
    if (x.w_reads) inputs += x.bytes();
  const double h_out = h * whole_on_tp(c);  // a hidden-sized output grad, whole without sequence parallelism
  double out = h_out;                       // the attention's output projection
  if (!m.mla.enabled) {
    out += (a + 2.0 * m.kv_heads) * static_cast<double>(m.head_dim);
  } else {
    const MlaSpec& q = m.mla;
    out += static_cast<double>(q.q_lora_rank + q.kv_lora_rank + q.qk_rope_head_dim) +
           a * static_cast<double>(q.qk_nope_head_dim + q.qk_rope_head_dim) +
           a * static_cast<double>(q.qk_nope_head_dim + q.v_head_dim);
  }
  const double up = m.mlp == MlpKind::swiglu ? 2.0 : 1.0;  // fc1 / expert up-projection width, in f
  double router = 0;                                       // the router's GEMM stays bf16
  if (!m.layer_is_moe(layer)) {
    out += up * static_cast<double>(m.ffn_hidden) + h_out;
  } else {
    const double fe = static_cast<double>(m.moe.expert_ffn_hidden);
    const double copies = m.moe.top_k * m.moe.capacity_factor;
    out += copies * (up * fe + h) + m.moe.shared_experts * (up * static_cast<double>(m.moe.shared_width()) + h);
    router = m.moe.experts;
  }
  return inputs + cache_bytes_per_elem(c.precision.output_grad_cache) * out + 2 * router;
}

double kept_per_token(const std::vector<ActTensor>& t, unsigned ops) {
  double sum = 0;
  for (const ActTensor& x : t)
    if ((x.dropped_by & ops) == 0) sum += x.bytes();
  return sum;
}

double layer_activation_bytes_stored(const ModelConfigData& c, int layer) {
  return kept_per_token(layer_tensors(c, layer), 0) * static_cast<double>(c.model.tokens_per_microbatch()) / (static_cast<double>(c.parallel.tp) * c.parallel.cp);
}

namespace {

// Full recompute keeps the layer's input, 2h bytes per token of the rank's sequence shard (all
// the tokens without sequence parallelism: Megatron-LM's checkpoint before 2022, unless
// --distribute-checkpointed-activations, which ppsim does not model).
double full_recompute_bytes(const ModelConfigData& c) {
  return 2 * static_cast<double>(c.model.hidden) * whole_on_tp(c) *
         static_cast<double>(c.model.tokens_per_microbatch()) / (static_cast<double>(c.parallel.tp) * c.parallel.cp);
}

}  // namespace

double layer_activation_bytes(const ModelConfigData& c, int layer) {
  const double T = static_cast<double>(c.model.tokens_per_microbatch());
  if (c.parallel.recompute == Recompute::full) return full_recompute_bytes(c);
  return kept_per_token(layer_tensors(c, layer), c.parallel.recompute_ops) * T / (static_cast<double>(c.parallel.tp) * c.parallel.cp);
}

double embedding_activation_bytes(const ModelConfigData& c) {
  // Megatron's theoretical memory: 8sb for the input ids and sbh for the embedding dropout mask.
  const double T = static_cast<double>(c.model.tokens_per_microbatch());
  return (8.0 + (c.model.dropout ? static_cast<double>(c.model.hidden) * whole_on_tp(c) : 0.0)) * T /
         (static_cast<double>(c.parallel.tp) * c.parallel.cp);
}

double head_activation_bytes(const ModelConfigData& c) {
  // Megatron: 4sbh(1 + V/h) = final norm input and head input (2h each) + fp32 logits (4V).
  const double T = static_cast<double>(c.model.tokens_per_microbatch());
  return (4.0 * static_cast<double>(c.model.hidden) * whole_on_tp(c) + 4.0 * static_cast<double>(c.model.vocab)) * T /
         (static_cast<double>(c.parallel.tp) * c.parallel.cp);
}

double mtp_activation_bytes(const ModelConfigData& c) {
  const double T = static_cast<double>(c.model.tokens_per_microbatch()), h = static_cast<double>(c.model.hidden);
  // Norm inputs of the hidden state and of the next token's embedding (2h each), the
  // projection's input (their concatenation, 2 * 2h), then a layer and a head.
  return (4 * h + 4 * h) * T / (static_cast<double>(c.parallel.tp) * c.parallel.cp) + layer_activation_bytes(c, c.model.layers - 1) + head_activation_bytes(c);
}

namespace {

// Megatron's block method: the first recompute_layers layers of each stage are fully recomputed.
bool fully_recomputed(const ModelConfigData& c, const SliceLayout& s, int layer) {
  if (c.parallel.recompute != Recompute::full) return false;
  return c.parallel.recompute_layers < 0 || layer - s.first_layer < c.parallel.recompute_layers;
}

// Per-layer bytes (kept with the config's recompute_ops, and stored with none) depend only on
// whether the layer is dense or MoE: computed once per kind (the planner asks per candidate).
struct LayerBytes {
  explicit LayerBytes(const ModelConfigData& cfg) : c(cfg) {}
  const ModelConfigData& c;
  bool have[2] = {false, false};
  double kept[2] = {0, 0}, stored[2] = {0, 0}, wgrad[2] = {0, 0};
  int kind(int layer) {
    const int k = c.model.layer_is_moe(layer) ? 1 : 0;
    if (!have[k]) {
      const std::vector<ActTensor> t = layer_tensors(c, layer);
      const double scale = static_cast<double>(c.model.tokens_per_microbatch()) / (static_cast<double>(c.parallel.tp) * c.parallel.cp);
      kept[k] = kept_per_token(t, c.parallel.recompute_ops) * scale;
      stored[k] = kept_per_token(t, 0) * scale;
      wgrad[k] = layer_wgrad_per_token(c, layer) * scale;
      have[k] = true;
    }
    return k;
  }
  double in_slice(const SliceLayout& s, int layer) {
    if (fully_recomputed(c, s, layer)) return full_recompute_bytes(c);
    return kept[kind(layer)];
  }
  double workspace(const SliceLayout& s, int layer) {
    const int k = kind(layer);
    return fully_recomputed(c, s, layer) ? stored[k] : stored[k] - kept[k];
  }
};

}  // namespace

namespace {

double slice_bytes_with(LayerBytes& lb, const SliceLayout& s) {
  const ModelConfigData& c = lb.c;
  double sum = 0;
  for (int l = s.first_layer; l < s.first_layer + s.layers; ++l) sum += lb.in_slice(s, l);
  if (s.embedding) sum += embedding_activation_bytes(c);
  if (s.head) sum += head_activation_bytes(c) + c.model.mtp_depth * mtp_activation_bytes(c);
  return sum;
}

double slice_wgrad_with(LayerBytes& lb, const SliceLayout& s) {
  const ModelConfigData& c = lb.c;
  double sum = 0;
  for (int l = s.first_layer; l < s.first_layer + s.layers; ++l) sum += lb.wgrad[lb.kind(l)];
  if (s.embedding) sum += embedding_activation_bytes(c);
  if (s.head) sum += head_activation_bytes(c) + c.model.mtp_depth * mtp_activation_bytes(c);
  return sum;
}

double slice_workspace_with(LayerBytes& lb, const SliceLayout& s) {
  double ws = 0;
  for (int l = s.first_layer; l < s.first_layer + s.layers; ++l) ws = std::max(ws, lb.workspace(s, l));
  return ws;
}

// Per slice: (activation bytes of one micro-batch, recompute workspace, and optionally the
// weight-grad state between a split backward's I and W).
void slice_memory(const ModelConfigData& c, const std::vector<SliceLayout>& slices, std::vector<double>& chunk,
                  std::vector<double>& ws, std::vector<double>* wgrad = nullptr) {
  LayerBytes lb(c);
  chunk.clear();
  ws.clear();
  if (wgrad) wgrad->clear();
  for (const SliceLayout& l : slices) {
    chunk.push_back(slice_bytes_with(lb, l));
    ws.push_back(slice_workspace_with(lb, l));
    if (wgrad) wgrad->push_back(slice_wgrad_with(lb, l));
  }
}

}  // namespace

double slice_activation_bytes(const ModelConfigData& c, const SliceLayout& s) {
  LayerBytes lb(c);
  return slice_bytes_with(lb, s);
}

double slice_wgrad_bytes(const ModelConfigData& c, const SliceLayout& s) {
  LayerBytes lb(c);
  return slice_wgrad_with(lb, s);
}

std::vector<double> slice_w_hold(const ModelConfigData& c, const std::vector<SliceLayout>& slices) {
  LayerBytes lb(c);
  std::vector<double> out;
  for (const SliceLayout& l : slices) {
    const double kept = slice_bytes_with(lb, l);
    out.push_back(kept > 0 ? std::clamp(slice_wgrad_with(lb, l) / kept, 0.0, 1.0) : 1.0);
  }
  return out;
}

double slice_recompute_workspace(const ModelConfigData& c, const SliceLayout& s) {
  LayerBytes lb(c);
  return slice_workspace_with(lb, s);
}

namespace {

// One set of all-to-all receive buffers for a MoE layer: dispatch and combine, each sized for
// capacity_factor * top_k copies of every token, bf16 (the backward's all-to-alls are bf16).
double a2a_buffer_set(const ModelConfigData& c) {
  const ModelSpec& m = c.model;
  const double copies = static_cast<double>(m.tokens_per_microbatch()) * m.moe.top_k * m.moe.capacity_factor;
  return 2 * copies * static_cast<double>(m.hidden) * 2 / (static_cast<double>(c.parallel.tp) * c.parallel.cp);
}

}  // namespace

namespace {

// FSDP2's gathered weights per rank (parameters, after the tp / ep x etp split): at pp 1 its two
// largest layers (the one computing and the one prefetched), at pp > 1 everything it holds.
std::vector<double> fsdp_gathered_params(const ModelConfigData& c, const std::vector<int>& stage_rank,
                                         const std::vector<int>& stage_slice, const std::vector<SliceLayout>& slices,
                                         int ranks) {
  std::vector<double> all(static_cast<std::size_t>(ranks), 0), first(all), second(all);
  if (!c.parallel.fsdp) return all;
  const double tp = c.parallel.tp, etp = static_cast<double>(c.parallel.ep) * c.parallel.expert_tp();
  for (std::size_t st = 0; st < stage_rank.size(); ++st) {
    const auto r = static_cast<std::size_t>(stage_rank[st]);
    if (stage_rank[st] < 0 || stage_rank[st] >= ranks) continue;
    const SliceLayout& s = slices[static_cast<std::size_t>(stage_slice[st])];
    auto add = [&](double n) {
      all[r] += n;
      if (n > first[r]) {
        second[r] = first[r];
        first[r] = n;
      } else {
        second[r] = std::max(second[r], n);
      }
    };
    for (int l = s.first_layer; l < s.first_layer + s.layers; ++l) {
      const ParamCount pc = layer_params(c.model, l);
      add(pc.dense / tp + pc.expert / etp);
    }
    if (s.embedding) add(embedding_params(c.model) / tp);
    if (s.head) add(head_params(c.model) / tp);
  }
  if (c.parallel.pp == 1)
    for (std::size_t r = 0; r < all.size(); ++r) all[r] = first[r] + second[r];
  return all;
}

}  // namespace

std::vector<RankMemory> rank_memory(const ModelConfigData& c, const std::vector<int>& stage_rank,
                                    const std::vector<int>& stage_slice, const std::vector<SliceLayout>& slices,
                                    const std::vector<int>& peak_activations) {
  const ParallelSpec& p = c.parallel;
  const int ranks = static_cast<int>(peak_activations.size());
  std::vector<RankMemory> out(static_cast<std::size_t>(ranks));
  std::vector<double> dense(out.size(), 0), expert(out.size(), 0), act_chunk(out.size(), 0), work_set(out.size(), 0);
  std::vector<bool> has_embedding(out.size(), false), has_head(out.size(), false), has_moe(out.size(), false);
  std::vector<double> slice_bytes, slice_ws;
  slice_memory(c, slices, slice_bytes, slice_ws);
  for (std::size_t st = 0; st < stage_rank.size(); ++st) {
    const int r = stage_rank[st];
    if (r < 0 || r >= ranks) continue;
    const SliceLayout& s = slices[static_cast<std::size_t>(stage_slice[st])];
    for (int l = s.first_layer; l < s.first_layer + s.layers; ++l) {
      const ParamCount pc = layer_params(c.model, l);
      dense[r] += pc.dense;
      expert[r] += pc.expert;
      has_moe[r] = has_moe[r] || c.model.layer_is_moe(l);
    }
    if (s.head && c.model.mtp_depth > 0) has_moe[r] = has_moe[r] || c.model.layer_is_moe(c.model.layers - 1);
    if (s.embedding) dense[r] += embedding_params(c.model);
    if (s.head) dense[r] += head_params(c.model);
    if (s.head && c.model.mtp_depth > 0 && !has_head[r]) {
      const ParamCount mtp = mtp_module_params(c.model);
      dense[r] += c.model.mtp_depth * mtp.dense;
      expert[r] += c.model.mtp_depth * mtp.expert;
    }
    has_embedding[r] = has_embedding[r] || s.embedding;
    has_head[r] = has_head[r] || s.head;
    const std::size_t si = static_cast<std::size_t>(stage_slice[st]);
    act_chunk[r] = std::max(act_chunk[r], slice_bytes[si]);
    work_set[r] = std::max(work_set[r], slice_ws[si]);
  }
  // The MTP modules share the embedding: a rank holding them without it holds a copy.
  for (int r = 0; r < ranks; ++r)
    if (c.model.mtp_depth > 0 && has_head[r] && !has_embedding[r]) dense[r] += embedding_params(c.model);
  // Sharding: dense weights over tp, routed experts over ep*etp; ZeRO shards the optimizer
  // states (1), also the gradients (2), also the weights (3), over the ranks holding copies:
  // dp x cp for dense weights, dp x cp x tp / (ep x etp) for routed experts.
  const double edp = std::max(1, p.expert_zero_dp());
  // FSDP2: the fp32 shard is the master copy the optimizer counts (fp32 params: no master, so 4 more).
  const double opt = c.precision.optimizer_bytes_per_param() + (p.fsdp && c.precision.params == Dtype::fp32 ? 4.0 : 0);
  const std::vector<double> gathered = fsdp_gathered_params(c, stage_rank, stage_slice, slices, ranks);
  // A reduction deferred to the last micro-batch holds the unsharded gradients until then:
  // parallel.dp_sync no_sync (FSDP1's no_sync(): _finalize_params keeps .grad unsharded; DDP's the
  // same), and FSDP2 reducing once a step (PyTorch's pipelining: with set_requires_gradient_sync
  // off, FSDPParamGroup.post_backward keeps each unsharded_accumulated_grad, in the reduce dtype;
  // pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py).
  const DpSync sync = dp_sync_of(p, p.pp);
  const bool unsharded_grads = sync == DpSync::no_sync || (p.fsdp && sync == DpSync::step);
  for (int r = 0; r < ranks; ++r) {
    const double d = dense[r] / p.tp, e = expert[r] / (static_cast<double>(p.ep) * p.expert_tp());
    auto sharded = [&](int stage) { return p.zero >= stage ? d / p.zero_dp() + e / edp : d + e; };
    RankMemory& m = out[static_cast<std::size_t>(r)];
    // FSDP2: the fp32 shard is counted with the optimizer (its master copy); the weights are the
    // gathered ones in flight.
    m.weights = (p.fsdp ? gathered[static_cast<std::size_t>(r)] : sharded(3)) * dtype_bytes(c.precision.params);
    m.grads = (unsharded_grads ? d + e : sharded(2)) * dtype_bytes(c.precision.grads);
    m.host_optimizer = c.precision.optimizer_on_host() * sharded(1) * opt;
    m.optimizer = (1 - c.precision.optimizer_on_host()) * sharded(1) * opt;
    if (c.precision.ema == StateLocation::host) m.host_ema = sharded(1) * 4;
    if (c.precision.ema == StateLocation::device) m.ema = sharded(1) * 4;
    m.activations = peak_activations[static_cast<std::size_t>(r)] * act_chunk[r];
    m.workspace = work_set[r];
    m.comm_buffers = has_moe[r] ? a2a_buffer_set(c) : 0;  // a rank of dense layers runs no all-to-all
  }
  return out;
}

std::vector<RankPeak> predict_rank_memory(const ModelConfigData& c, const Schedule& s, const SimResult* sim) {
  const std::vector<SliceLayout> slices = slice_layouts(c, s.stages_per_pipe);
  std::vector<double> chunk, ws, wg;
  slice_memory(c, slices, chunk, ws, &wg);
  const std::vector<RankMemory> fixed = rank_memory(c, s.stage_rank, s.slice, slices, std::vector<int>(static_cast<std::size_t>(s.pp), 0));
  std::vector<RankPeak> out(static_cast<std::size_t>(s.pp));
  for (int r = 0; r < s.pp; ++r) {
    RankPeak& pk = out[static_cast<std::size_t>(r)];
    pk.parts = fixed[static_cast<std::size_t>(r)];
    bool pairs = false;
    double cur = 0, best = -1;
    int alive = 0;
    const auto& actions = s.ranks[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      pairs = pairs || a.overlapped;
      double w = 0, grow = 0;  // grow: an I's weight-grad state beyond the forward bytes it frees
      for (int k = 0; k < a.size(); ++k) {
        const Op& op = a.op(k);
        const std::size_t sl = static_cast<std::size_t>(s.slice[static_cast<std::size_t>(op.stage)]);
        if (op.kind == OpKind::F) {
          cur += chunk[sl];
          ++alive;
        }
        if (op.kind == OpKind::B || op.kind == OpKind::I) w = std::max(w, ws[sl]);
        if (op.kind == OpKind::I) grow += std::max(0.0, wg[sl] - chunk[sl]);
      }
      if (cur + grow + w > best) {
        best = cur + grow + w;
        pk.parts.activations = cur + grow;
        pk.parts.workspace = w;
        pk.action = static_cast<int>(i);
        pk.chunks = alive;
      }
      for (int k = 0; k < a.size(); ++k) {
        const Op& op = a.op(k);
        const std::size_t sl = static_cast<std::size_t>(s.slice[static_cast<std::size_t>(op.stage)]);
        if (op.kind == OpKind::I) cur += wg[sl] - chunk[sl];
        if (op.kind == OpKind::B) cur -= chunk[sl];
        if (op.kind == OpKind::W) cur -= wg[sl];
        if (op.kind == OpKind::B || op.kind == OpKind::W) --alive;
      }
    }
    if (pk.action >= 0) pk.op = format_action(actions[static_cast<std::size_t>(pk.action)]);
    // A forward chunk's and a backward chunk's all-to-alls are in flight at once in a pair.
    if (pairs) pk.parts.comm_buffers *= 2;
    if (sim != nullptr && pk.action >= 0) {
      const Action& a = actions[static_cast<std::size_t>(pk.action)];
      for (const Interval& iv : sim->timeline.intervals)
        if (iv.rank == r && iv.action == a && (pk.time < 0 || iv.start < pk.time)) pk.time = iv.start;
    }
  }
  return out;
}

std::vector<std::vector<MemorySample>> memory_curve(const ModelConfigData& c, const Schedule& s, const Timeline& t) {
  const std::vector<SliceLayout> slices = slice_layouts(c, s.stages_per_pipe);
  std::vector<double> chunk, ws, wg;
  slice_memory(c, slices, chunk, ws, &wg);
  const std::vector<RankPeak> peaks = predict_rank_memory(c, s, nullptr);
  std::vector<std::vector<MemorySample>> out(static_cast<std::size_t>(s.pp));
  for (int r = 0; r < s.pp; ++r) {
    const RankMemory& f = peaks[static_cast<std::size_t>(r)].parts;
    const double base = f.weights + f.grads + f.optimizer + f.ema + f.comm_buffers;
    // Each action's span: its intervals on this rank are contiguous in start order, since a
    // rank runs its actions one after another.
    std::vector<std::pair<Action, std::pair<Time, Time>>> spans;
    for (const Interval& iv : t.intervals) {
      if (iv.rank != r) continue;
      if (spans.empty() || !(spans.back().first == iv.action)) spans.push_back({iv.action, {iv.start, iv.end}});
      else spans.back().second.second = std::max(spans.back().second.second, iv.end);
    }
    std::vector<std::pair<Time, double>> ev;  // (time, delta)
    for (const auto& [a, span] : spans) {
      double w = 0, add_at_start = 0, free_at_end = 0;
      for (int k = 0; k < a.size(); ++k) {
        const Op& op = a.op(k);
        const std::size_t sl = static_cast<std::size_t>(s.slice[static_cast<std::size_t>(op.stage)]);
        if (op.kind == OpKind::F) add_at_start += chunk[sl];
        if (op.kind == OpKind::B || op.kind == OpKind::I) w = std::max(w, ws[sl]);
        if (op.kind == OpKind::B) free_at_end += chunk[sl];
        if (op.kind == OpKind::W) free_at_end += wg[sl];
        if (op.kind == OpKind::I) {  // while it runs, the larger state; after, the weight-grad state
          add_at_start += std::max(0.0, wg[sl] - chunk[sl]);
          free_at_end += std::max(0.0, wg[sl] - chunk[sl]) - (wg[sl] - chunk[sl]);
        }
      }
      ev.push_back({span.first, add_at_start + w});
      ev.push_back({span.second, -(w + free_at_end)});
    }
    std::stable_sort(ev.begin(), ev.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    auto& v = out[static_cast<std::size_t>(r)];
    v.push_back({t.start, base});
    double cur = base;
    for (const auto& [time, d] : ev) {
      cur += d;
      if (!v.empty() && v.back().t == time) v.back().bytes = cur;
      else v.push_back({time, cur});
    }
  }
  return out;
}

}  // namespace ppsim
