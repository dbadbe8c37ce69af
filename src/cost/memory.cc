// Parameter counts and memory per rank (memory.h explains the activation model).
#include "cost/memory.h"

#include <algorithm>

namespace ppsim {

namespace {

double norm_params(const ModelSpec& m, double width) { return m.norm == NormKind::layernorm ? 2 * width : width; }
double mlp_params(MlpKind k, double h, double f) { return (k == MlpKind::swiglu ? 3.0 : 2.0) * h * f; }
double act_fn_stored(MlpKind k, double f) { return (k == MlpKind::swiglu ? 6.0 : 4.0) * f; }

}  // namespace

ParamCount layer_params(const ModelSpec& m, int layer) {
  const double h = static_cast<double>(m.hidden), a = m.heads;
  ParamCount p;
  // Attention projections. GQA: h(a+2g)d + a d h. MLA: the low-rank paths and their norms.
  if (!m.mla.enabled) {
    const double d = static_cast<double>(m.head_dim), g = m.kv_heads;
    p.dense += h * (a + 2 * g) * d + a * d * h;
  } else {
    const MlaSpec& q = m.mla;
    const double dn = static_cast<double>(q.qk_nope_head_dim), dr = static_cast<double>(q.qk_rope_head_dim);
    const double dv = static_cast<double>(q.v_head_dim), qr = static_cast<double>(q.q_lora_rank);
    const double kvr = static_cast<double>(q.kv_lora_rank);
    p.dense += qr > 0 ? h * qr + qr * a * (dn + dr) + norm_params(m, qr) : h * a * (dn + dr);
    p.dense += h * (kvr + dr) + kvr * a * (dn + dv) + norm_params(m, kvr) + a * dv * h;
  }
  p.dense += 2 * norm_params(m, h);  // before attention and before the MLP
  if (!m.layer_is_moe(layer)) {
    p.dense += mlp_params(m.mlp, h, static_cast<double>(m.ffn_hidden));
  } else {
    const double fe = static_cast<double>(m.moe.expert_ffn_hidden);
    p.dense += h * m.moe.experts;                                  // router
    p.dense += m.moe.shared_experts * mlp_params(m.mlp, h, fe);    // shared experts
    p.expert += m.moe.experts * mlp_params(m.mlp, h, fe);          // routed experts
  }
  return p;
}

double embedding_params(const ModelSpec& m) { return static_cast<double>(m.vocab) * static_cast<double>(m.hidden); }

double head_params(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden);
  return static_cast<double>(m.vocab) * h + norm_params(m, h);
}

double model_params(const ModelSpec& m) {
  double sum = embedding_params(m) + head_params(m);
  if (m.tied_embeddings) sum -= embedding_params(m);
  for (int l = 0; l < m.layers; ++l) sum += layer_params(m, l).total();
  return sum;
}

namespace {

// Bytes per token stored by a layer's forward for its backward (tp = 1), and the part that is
// the s x s attention core (what selective recompute drops).
struct LayerActs {
  double per_token = 0;
  double core_per_token = 0;
};

LayerActs layer_acts(const ModelSpec& m, int layer) {
  const double h = static_cast<double>(m.hidden), a = m.heads, s = static_cast<double>(m.seq_len);
  LayerActs r;
  double x = 0;
  // Attention block. Korthikanti's 11sbh + 5as^2b (+ 2sbh of its norm) for g = a, a*d = h:
  //   norm input 2h, QKV input 2h, Q 2ad, K 2gd, V 2gd, out-proj input 2ad, dropout mask h.
  x += 2 * h + 2 * h;
  if (!m.mla.enabled) {
    const double d = static_cast<double>(m.head_dim), g = m.kv_heads;
    x += 2 * a * d + 2 * g * d + 2 * g * d + 2 * a * d;
  } else {
    const MlaSpec& q = m.mla;
    const double dqk = static_cast<double>(q.qk_nope_head_dim + q.qk_rope_head_dim), dv = static_cast<double>(q.v_head_dim);
    const double qr = static_cast<double>(q.q_lora_rank), kvr = static_cast<double>(q.kv_lora_rank);
    x += 2 * (2 * qr) + 2 * (2 * kvr);                 // latents: norm input and up-projection input
    x += 2 * a * dqk + 2 * a * dqk + 2 * a * dv + 2 * a * dv;  // Q, K, V, out-proj input
  }
  if (m.dropout) x += h;
  // The core: flash attention keeps the fp32 log-sum-exp per head; a materialized softmax keeps
  // its output (2as per token) and, with dropout, the mask and the dropped output (5as).
  if (m.flash_attention) x += 4 * a;
  else r.core_per_token = (m.dropout ? 5.0 : 2.0) * a * s;
  // MLP block. Korthikanti's 19sbh (+ 2sbh norm) for GELU, f = 4h:
  //   norm input 2h, fc1 input 2h, GELU input 2f and output 2f, dropout mask h.
  x += 2 * h;
  if (!m.layer_is_moe(layer)) {
    x += 2 * h + act_fn_stored(m.mlp, static_cast<double>(m.ffn_hidden));
  } else {
    const double fe = static_cast<double>(m.moe.expert_ffn_hidden), k = m.moe.top_k;
    x += 2 * h;                                            // router and shared-expert input
    x += 4.0 * m.moe.experts;                              // router probabilities, fp32
    x += k * (2 * h + act_fn_stored(m.mlp, fe) + 2 * h);   // routed copies: input, act, output
    x += m.moe.shared_experts * act_fn_stored(m.mlp, fe);
  }
  if (m.dropout) x += h;
  r.per_token = x + r.core_per_token;
  return r;
}

}  // namespace

double layer_activation_bytes_stored(const ModelConfigData& c, int layer) {
  const LayerActs a = layer_acts(c.model, layer);
  return a.per_token * static_cast<double>(c.model.tokens_per_microbatch()) / c.parallel.tp;
}

double layer_activation_bytes(const ModelConfigData& c, int layer) {
  const double T = static_cast<double>(c.model.tokens_per_microbatch());
  const LayerActs a = layer_acts(c.model, layer);
  double per_token = a.per_token;
  switch (c.parallel.recompute) {
    case Recompute::none: break;
    case Recompute::selective: per_token -= a.core_per_token; break;
    case Recompute::full: per_token = 2 * static_cast<double>(c.model.hidden); break;  // the layer's input
  }
  return per_token * T / c.parallel.tp;
}

double embedding_activation_bytes(const ModelConfigData& c) {
  // Megatron's theoretical memory: 8sb for the input ids and sbh for the embedding dropout mask.
  const double T = static_cast<double>(c.model.tokens_per_microbatch());
  return (8.0 + (c.model.dropout ? static_cast<double>(c.model.hidden) : 0.0)) * T / c.parallel.tp;
}

double head_activation_bytes(const ModelConfigData& c) {
  // Megatron: 4sbh(1 + V/h) = final norm input and head input (2h each) + fp32 logits (4V).
  const double T = static_cast<double>(c.model.tokens_per_microbatch());
  return (4.0 * static_cast<double>(c.model.hidden) + 4.0 * static_cast<double>(c.model.vocab)) * T / c.parallel.tp;
}

double slice_activation_bytes(const ModelConfigData& c, const SliceLayout& s) {
  double sum = 0;
  for (int l = s.first_layer; l < s.first_layer + s.layers; ++l) sum += layer_activation_bytes(c, l);
  if (s.embedding) sum += embedding_activation_bytes(c);
  if (s.head) sum += head_activation_bytes(c);
  return sum;
}

std::vector<RankMemory> rank_memory(const ModelConfigData& c, const std::vector<int>& stage_rank,
                                    const std::vector<int>& stage_slice, const std::vector<SliceLayout>& slices,
                                    const std::vector<int>& peak_activations) {
  const ParallelSpec& p = c.parallel;
  const int ranks = static_cast<int>(peak_activations.size());
  std::vector<RankMemory> out(static_cast<std::size_t>(ranks));
  std::vector<double> dense(out.size(), 0), expert(out.size(), 0), act_chunk(out.size(), 0), work_set(out.size(), 0);
  for (std::size_t st = 0; st < stage_rank.size(); ++st) {
    const int r = stage_rank[st];
    if (r < 0 || r >= ranks) continue;
    const SliceLayout& s = slices[static_cast<std::size_t>(stage_slice[st])];
    for (int l = s.first_layer; l < s.first_layer + s.layers; ++l) {
      const ParamCount pc = layer_params(c.model, l);
      dense[r] += pc.dense;
      expert[r] += pc.expert;
      if (p.recompute == Recompute::full) work_set[r] = std::max(work_set[r], layer_activation_bytes_stored(c, l));
    }
    if (s.embedding) dense[r] += embedding_params(c.model);
    if (s.head) dense[r] += head_params(c.model);
    act_chunk[r] = std::max(act_chunk[r], slice_activation_bytes(c, s));
  }
  // Sharding: dense weights over tp, routed experts over ep*tp; ZeRO shards the optimizer
  // states (1), also the gradients (2), also the weights (3), over the ranks holding copies:
  // dp for dense weights, dp/ep for routed experts.
  const double edp = std::max(1, p.expert_dp());
  const double opt = c.precision.optimizer_bytes_per_param();
  for (int r = 0; r < ranks; ++r) {
    const double d = dense[r] / p.tp, e = expert[r] / (static_cast<double>(p.ep) * p.tp);
    auto sharded = [&](int stage) { return p.zero >= stage ? d / p.dp + e / edp : d + e; };
    RankMemory& m = out[static_cast<std::size_t>(r)];
    m.weights = sharded(3) * dtype_bytes(c.precision.params);
    m.grads = sharded(2) * dtype_bytes(c.precision.grads);
    m.optimizer = sharded(1) * opt;
    m.activations = peak_activations[static_cast<std::size_t>(r)] * act_chunk[r] + work_set[r];
  }
  return out;
}

}  // namespace ppsim
