// FLOP and byte counts (see flops.h for the backward rule).
//
// Symbols: b micro-batch size, s sequence length, T = b*s tokens, h hidden, a heads, g kv
// heads, d head dim, f dense FFN width, E routed experts, k top-k, e shared experts, fe expert
// FFN width, V vocab, t tensor parallel, ep expert parallel. A GEMM [m x k] x [k x n] costs
// 2mnk FLOPs. Tensor parallelism splits the head and FFN dimensions by t (Megatron's column
// then row parallel pair) and, with parallel.sequence_parallel (the default), the tokens of the
// hidden-sized elementwise ops; without it every TP rank runs those on all T tokens.
#include "cost/flops.h"

#include <algorithm>

#include "cost/flash_shape.h"

namespace ppsim {

double BlockWork::gemm_flops() const {
  double sum = 0;
  for (const auto& g : gemms) sum += g.flops();
  return sum;
}

namespace {

// Sequence-parallel TP moves the block's input in (all-gather) and its output out
// (reduce-scatter): each (t-1)/t of T*h activations per rank. Without sequence parallelism the
// block's output is all-reduced instead (a ring all-reduce is a reduce-scatter and an all-gather:
// the same bytes) and the input grad's in the backward.
double tp_block_bytes(double tokens, double h, int t) {
  if (t <= 1) return 0;
  return 2.0 * tokens * h * kActivationBytes * (t - 1) / t;
}

// The TP ranks that share the hidden-sized per-token ops of a block: t with sequence
// parallelism (each runs its T/t tokens), 1 without (each runs all T).
double seq_shards(const ModelConfigData& c, Shard sh) { return c.parallel.sequence_parallel ? sh.tp : 1; }

BlockWork attention_block(const ModelConfigData& c, int layer, Shard sh) {
  const ModelSpec& m = c.model;
  const double t = sh.tp, cp = sh.cp;
  // Context parallel: the rank's T = b s / cp tokens (chunks i and 2cp-1-i of each sequence, so
  // every rank has the same share of the causal mask); K and V of the whole sequence.
  const double b = m.micro_batch_size, s = static_cast<double>(m.seq_len), T = b * s / cp;
  const double h = static_cast<double>(m.hidden);
  const double a = m.heads;
  BlockWork w;
  double dqk = 0, dv = 0, g = 0, rope_elems = 0;
  if (!m.mla.enabled) {
    // GQA: Q has a*d columns, K and V g*d each.
    //   qkv: [T x h] x [h x (a+2g)d/t]   -> 2 T h (a+2g) d / t FLOPs
    //   out: [T x a d/t] x [a d/t x h]   -> 2 T a d h / t
    const double d = static_cast<double>(m.head_dim);
    g = m.kv_heads;
    dqk = dv = d;
    w.gemms.push_back({"qkv", T, (a + 2 * g) * d / t, h});
    w.gemms.push_back({"out", T, h, a * d / t});
    rope_elems = (a + g) * d / t;  // rotated elements per token on this rank
  } else {
    // MLA (DeepSeek-V2/V3): low-rank query and key/value paths; per head, keys have
    // nope+rope dims and values v dims. The down projections are replicated over TP.
    //   q_down: [T x h] x [h x qr]                 (when q_lora_rank > 0)
    //   q_up:   [T x qr] x [qr x a(dn+dr)/t]        (or q: [T x h] x [h x a(dn+dr)/t])
    //   kv_down:[T x h] x [h x (kvr+dr)]
    //   kv_up:  [T x kvr] x [kvr x a(dn+dv)/t]
    //   out:    [T x a dv/t] x [a dv/t x h]
    const MlaSpec& q = m.mla;
    const double dn = static_cast<double>(q.qk_nope_head_dim), dr = static_cast<double>(q.qk_rope_head_dim);
    dqk = dn + dr;
    dv = static_cast<double>(q.v_head_dim);
    g = a;
    if (q.q_lora_rank > 0) {
      const double qr = static_cast<double>(q.q_lora_rank);
      w.gemms.push_back({"q_down", T, qr, h});
      w.gemms.push_back({"q_up", T, a * dqk / t, qr});
    } else {
      w.gemms.push_back({"q", T, a * dqk / t, h});
    }
    const double kvr = static_cast<double>(q.kv_lora_rank);
    w.gemms.push_back({"kv_down", T, kvr + dr, h});
    w.gemms.back().input_shared = q.q_lora_rank > 0;  // the same hidden states as q_down
    w.gemms.push_back({"kv_up", T, a * (dn + dv) / t, kvr});
    w.gemms.push_back({"out", T, h, a * dv / t});
    rope_elems = (a / t + 1) * dr;
  }
  // Attention core per head and sequence: QK^T is 2 s^2 dqk FLOPs, (softmax) V is 2 s^2 dv.
  // Causal: a kernel that skips the masked upper triangle does half of that (FlashAttention
  // does), so we count half of the s^2 terms (s^2/2, not the exact s(s+1)/2).
  //   core = 2 b (a/t) pairs (dqk + dv),  pairs = s^2/2 causal, s^2 otherwise
  //   with cp: the rank's s/cp queries against all s keys -> 1/cp of it
  //   local attention (a window of w keys, model.sliding_window): causal, query i sees min(i+1, w)
  //   keys, s w - w^2/2 in all for w < s (s^2/2 otherwise); bidirectional, min(s, w) each
  const double win = m.layer_is_local(layer) ? static_cast<double>(m.sliding_window) : s;
  const double pairs = m.causal ? (win >= s ? 0.5 * s * s : s * win - 0.5 * win * win) : s * std::min(s, win);
  w.core_flops = 2.0 * b * (a / t) * pairs / cp * (dqk + dv);
  // One flash kernel's rate at this shape against efficiency.attention's reference shape.
  if (m.flash_attention && c.costs.attention_shape)
    w.core_rate =
        flash_shape_factor({b * a / t, s, sh.cp, m.causal, m.layer_is_local(layer) ? win : 0}, c.hardware.sms);
  // HBM traffic of the core: read Q, K, V and write O (bf16), plus the fp32 log-sum-exp per
  // row; without flash attention the s x s scores are written, read, written as
  // probabilities and read again (8 bytes per element; +5 for a dropout mask and its output).
  // The backward without flash attention, per score: dP written (2), the (dropped) probabilities
  // and dS each read by a GEMM (2 + 2 + 2), the softmax's gradient reading P and dP and writing
  // dS (6), the dropout's reading its mask and gradient and writing (5): 14 bytes, +5 with
  // dropout; Q, K, V, O and their gradients twice the forward's.
  const double io = kActivationBytes * T * (a * dqk + g * dqk + g * dv + a * dv) / t + 4.0 * T * a / t;
  w.core_bytes = io;
  if (!m.flash_attention) {
    // Megatron-LM's CoreAttention (megatron/model/transformer.py, 2021-2023): torch.baddbmm for the
    // scores Q K^T over the whole [b a/t, s, s] (the causal mask is applied after, by the softmax),
    // FusedScaleMaskSoftmax, the attention dropout, torch.bmm for P V. The two batched GEMMs, per
    // head of the rank: [s/cp x dqk] x [dqk x s] and [s/cp x s] x [s x dv], each 2 (s/cp) s d
    // FLOPs, timed as GEMMs (their reads and writes of the scores included); between them, per
    // score element: the softmax reads the scores and writes the probabilities (4 bytes), the
    // dropout reads them and writes its output and a 1-byte mask (5). Backward: dP = dO V^T and
    // dV = P^T dO, the dropout's backward (read dP' and the mask, write: 5), the softmax's
    // (read P and dP, write dS: 6), dQ = dS K and dK = dS^T Q.
    const double heads = b * a / t, queries = s / cp;
    w.core_gemms.push_back({"qk", queries, s, dqk, heads});
    w.core_gemms.push_back({"pv", queries, dv, s, heads});
    const double scores = heads * queries * s;
    w.core_bytes = (4.0 + (m.dropout ? 5.0 : 0.0)) * scores;
    w.core_bwd_bytes = (6.0 + (m.dropout ? 5.0 : 0.0)) * scores;
  }
  // Elementwise (per token, bytes): norm 2h read + 2h write; residual add 2x2h read + 2h write;
  // rope read + write of the rotated dims; dropout 2h read, 2h write, h mask.
  // Per rank: the hidden-sized ops run on the T/t tokens of its sequence shard (on all T without
  // sequence parallelism), rope on all T tokens of its 1/t of the heads.
  const double per_token = 4 * h + 6 * h + (m.dropout ? 5 * h : 0);
  w.elem_bytes = per_token * T / seq_shards(c, sh) + 2 * kActivationBytes * rope_elems * T;
  w.tp_comm_bytes = tp_block_bytes(T, h, sh.tp);
  // CP (Llama 3's, section 3.3.2): all-gather K and V before the core; the rank receives the
  // other (cp-1)/cp of the sequence's K and V for its g/t heads:
  //   2 bytes * b s * g (dqk + dv) / t * (cp-1)/cp
  if (sh.cp > 1) w.cp_comm_bytes = kActivationBytes * b * s * g * (dqk + dv) / t * (cp - 1) / cp;
  return w;
}

double act_fn_bytes(MlpKind k, double width) {
  // SwiGLU reads gate and up and writes their product: 6 bytes per element of width (bf16);
  // GELU reads and writes one tensor: 4.
  return (k == MlpKind::swiglu ? 6.0 : 4.0) * width;
}

// The GEMMs of one MLP of width `f` on `m` tokens: SwiGLU has three (gate, up, down),
// GELU two (fc1, fc2). Returns 2 m h f * (3 or 2) FLOPs per instance.
// `input_fp8`: the up (and gate) input arrives in FP8 (the routed experts after an FP8 dispatch).
void mlp_gemms(std::vector<Gemm>& out, MlpKind kind, double m, double h, double f, double count, const char* prefix_up,
               const char* prefix_gate, const char* prefix_down, bool input_fp8 = false) {
  if (kind == MlpKind::swiglu) out.push_back({prefix_gate, m, f, h, count});
  out.push_back({prefix_up, m, f, h, count});
  out.back().input_shared = kind == MlpKind::swiglu;  // gate and up read the same X
  if (input_fp8) out[out.size() - (kind == MlpKind::swiglu ? 2 : 1)].input_fp8 = out.back().input_fp8 = true;
  out.push_back({prefix_down, m, h, f, count});
}

BlockWork mlp_block(const ModelConfigData& c, int layer, Shard sh) {
  const ModelSpec& m = c.model;
  const double t = sh.tp;
  const double T = static_cast<double>(m.tokens_per_microbatch()) / sh.cp;
  const double h = static_cast<double>(m.hidden);
  BlockWork w;
  // Per rank: norm, residual and dropout on the T/t tokens of its sequence shard (per_token; all T
  // without sequence parallelism), the activation function on all T tokens of its 1/t of the width
  // (width_bytes).
  double per_token = 4 * h + 6 * h + (m.dropout ? 5 * h : 0);
  double width_bytes = 0;
  if (!m.layer_is_moe(layer)) {
    // Dense MLP, SwiGLU: gate, up [T x h] x [h x f/t], down [T x f/t] x [f/t x h]
    //   -> 3 * 2 T h f / t FLOPs (GELU: 2 * 2 T h f / t)
    const double f = static_cast<double>(m.ffn_hidden);
    mlp_gemms(w.gemms, m.mlp, T, h, f / t, 1, "fc_up", "fc_gate", "fc_down");
    width_bytes = act_fn_bytes(m.mlp, f / t) * T;
  } else {
    // MoE: router [T/t x h] x [h x E] (each TP rank routes its sequence shard), then every
    // token visits k routed experts and the e shared experts.
    //   routed, per rank: E/ep experts, each split over x = etp ranks (tp, or 1), each on
    //     (T/t) x k ep / E tokens (balanced routing: every rank dispatches its T/t, an etp group
    //     gathers its members'), width fe/x -> k * 3 * 2 T h fe / t FLOPs (SwiGLU) for any x
    //   shared: one MLP of width e*fe/t on all T tokens -> e * 3 * 2 T h fe / t
    //   router: 2 T h E / t
    const MoeSpec& moe = m.moe;
    const double E = moe.experts, k = moe.top_k, fe = static_cast<double>(moe.expert_ffn_hidden);
    const double ep = sh.ep;
    w.gemms.push_back({"router", T / t, E, h, 1, true});
    const bool fp8_dispatch = c.precision.gemm == Dtype::fp8;
    const double x = sh.expert_tp();
    mlp_gemms(w.gemms, m.mlp, T / t * x * k * ep / E, h, fe / x, E / ep, "expert_up", "expert_gate", "expert_down",
              fp8_dispatch);
    if (moe.shared_experts > 0)
      mlp_gemms(w.gemms, m.mlp, T, h, moe.shared_experts * static_cast<double>(moe.shared_width()) / t, 1, "shared_up",
                "shared_gate", "shared_down");
    // Router softmax/top-k (fp32 logits read and written), permute and unpermute of the k
    // token copies (read + write, both ways), the experts' activation function, and the
    // weighted combine (read k copies, write one).
    per_token += 8 * E + 8 * k * h + kActivationBytes * (k + 1) * h;
    // The FP8 dispatch's input is quantized once (read 2, write 1 + a 4-byte scale per 128: DeepSeek-V3
    // report 3.3.1-3.3.3); with shared experts that is their up GEMM's input quantization, counted there.
    if (fp8_dispatch && moe.shared_experts == 0 && c.costs.fp8_quant) per_token += kFp8QuantBytes * h;
    width_bytes = act_fn_bytes(m.mlp, (k * fe + moe.shared_experts * static_cast<double>(moe.shared_width())) / t) * T;
    // All-to-all, per rank: its T/t tokens go to k experts each; of the ep ranks holding
    // experts, 1/ep is the rank itself, so (ep-1)/ep of the copies leave the rank.
    //   dispatch = T/t * k * h * bytes * (ep-1)/ep  (fp8 when the GEMMs are fp8, as DeepSeek-V3)
    //   combine  = T/t * k * h * 2     * (ep-1)/ep  (bf16)
    // The backward sends the combine's gradient out as a dispatch (bf16) and brings the
    // dispatch's gradient back as a combine.
    const double leave = (ep - 1) / ep;
    const double copies = T / t * k * h * leave;
    w.dispatch_bytes = copies * (c.precision.gemm == Dtype::fp8 ? 1.0 : kActivationBytes);
    w.combine_bytes = copies * kActivationBytes;
    w.dispatch_grad_bytes = copies * kActivationBytes;
    w.combine_grad_bytes = copies * kActivationBytes;
  }
  w.elem_bytes = per_token * T / seq_shards(c, sh) + width_bytes;
  // Whole experts (etp 1) run on each rank's own sequence shard: no TP collective in the block,
  // unless shared experts (split over tp as a dense MLP) need the gathered tokens.
  const bool whole_experts = m.layer_is_moe(layer) && sh.expert_tp() == 1 && m.moe.shared_experts == 0;
  w.tp_comm_bytes = whole_experts ? 0.0 : tp_block_bytes(T, h, sh.tp);
  return w;
}

}  // namespace

LayerWork layer_work(const ModelConfigData& c, int layer, Shard shard) {
  LayerWork w;
  w.moe = c.model.layer_is_moe(layer);
  w.attention = attention_block(c, layer, shard);
  w.mlp = mlp_block(c, layer, shard);
  return w;
}

BlockWork embedding_work(const ModelConfigData& c, Shard sh) {
  // A lookup: no FLOPs. Forward reads the T rows and writes them (2h + 2h bytes per token)
  // plus the int64 token ids; the weight grad scatter-adds T rows of bf16 gradient into the
  // fp32 main grad (2h read, 4h read, 4h write). Vocab-parallel over TP: each rank looks up
  // its share, then a reduce-scatter.
  const ModelSpec& m = c.model;
  const double T = static_cast<double>(m.tokens_per_microbatch()) / sh.cp, h = static_cast<double>(m.hidden);
  BlockWork w;
  w.elem_bytes = (4 * h + 8) * T / sh.tp;
  w.wgrad_elem_bytes = 10 * h * T / sh.tp;
  w.tp_comm_bytes = sh.tp > 1 ? T * h * kActivationBytes * (sh.tp - 1) / sh.tp : 0;
  return w;
}

BlockWork head_work(const ModelConfigData& c, Shard sh) {
  // Final norm (4h bytes per token forward, 8h backward), the vocab GEMM [T x h] x [h x V/t]
  // -> 2 T h V / t FLOPs, and the cross-entropy as Megatron-LM computes it
  // (megatron/core/tensor_parallel/cross_entropy.py, _VocabParallelCrossEntropy, called on
  // logits.float()), per logit of the rank's V/t: forward, the fp32 cast (read 2 bytes, write 4),
  // the max (read 4), the subtraction (read 4, write 4), exp in place (8), the sum (read 4) and
  // the division in place (8): 38 bytes; backward, the saved softmax scaled in place (8) and the
  // cast back to bf16 (read 4, write 2): 14 bytes. With TP, its three all-reduces of one fp32 per
  // token (the max, the target logit, the sum of exponentials), and the all-gather of the norm
  // output before the vocab-parallel GEMM.
  const ModelSpec& m = c.model;
  const double T = static_cast<double>(m.tokens_per_microbatch()) / sh.cp, h = static_cast<double>(m.hidden);
  const double V = static_cast<double>(m.vocab);
  BlockWork w;
  w.gemms.push_back({"head", T, V / sh.tp, h, 1, true});
  // costs.megatron_loss false: ppsim's earlier count, 6 bytes per logit forward and twice that back.
  const bool mega = c.costs.megatron_loss;
  // The final norm on the rank's T/t tokens (all T without sequence parallelism), the loss on its V/t.
  const double norm_tokens = T / seq_shards(c, sh), loss_tokens = T / sh.tp;
  w.elem_bytes = 4 * h * norm_tokens + (mega ? 38 : 6) * V * loss_tokens;
  w.bwd_elem_bytes = 8 * h * norm_tokens + (mega ? 14 : 12) * V * loss_tokens;
  w.tp_comm_bytes = sh.tp > 1 ? T * h * kActivationBytes * (sh.tp - 1) / sh.tp : 0;
  if (sh.tp > 1 && mega) {
    w.tp_small_allreduces = 3;
    w.tp_small_allreduce_bytes = 2.0 * 4.0 * T * (sh.tp - 1) / sh.tp;  // ring all-reduce of T fp32 values
  }
  return w;
}

double model_flops_per_microbatch(const ModelConfigData& c) {
  // The whole model for one micro-batch: shard {1, 1}. With expert parallelism a rank does the
  // routed work of T tokens (balanced), so {1, ep} would give the same FLOPs.
  const Shard whole{1, 1};
  double sum = 0;
  for (int l = 0; l < c.model.layers; ++l) {
    const LayerWork w = layer_work(c, l, whole);
    sum += w.forward_flops() + w.backward_flops();
  }
  const BlockWork head = head_work(c, whole);
  sum += head.forward_flops() + head.backward_flops();
  return sum;
}

double a2a_inter_node_fraction(const ModelConfigData& c) {
  // An ep group is ep ranks at stride etp (Megatron's expert order etp, ep, dp, pp: stride tp,
  // or 1 with whole experts): a node holds n = min(ep, gpus_per_node / etp) of them. Of the (ep-1)
  // peers a rank sends to, n-1 share its node, so (ep - n) / (ep - 1) of the leaving bytes cross
  // the network.
  const int ep = c.parallel.ep;
  if (ep <= 1) return 0;
  const int per_node = std::max(1, c.hardware.gpus_per_node / std::max(1, c.parallel.expert_tp()));
  const int n = std::min(ep, per_node);
  return static_cast<double>(ep - n) / (ep - 1);
}

}  // namespace ppsim
