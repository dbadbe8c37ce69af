// The cost model (cost/cost_model.h): configs in, SimCosts and physical results out.
//
// Per slice, in ns for one micro-batch on one rank:
//   F = sum over its layers of attention + MLP forward (+ all-to-alls) [+ embedding] [+ head]
//   B = full backward: input grad + weight grad (flops.h gives the rule) [+ recompute]
//   W = weight grad
//   FB = F + B (overlapped_pair_time is the hook for the overlap model)
// `times:` in the config replaces F, B, W, FB with one rank's share cut into v chunks, as
// `ppsim compare --times` does; `profile:` with measured per-layer (or per-share) times.
#include "cost/derive.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string_view>

#include "core/intervals.h"
#include "cost/clock_response.h"
#include "cost/flops.h"
#include "cost/gemm_shape.h"
#include "cost/invariants.h"
#include "cost/memory.h"
#include "cost/step_costs.h"
#include "cost/w_deferral.h"
#include "cost/yaml_reader.h"
#include "schedules/deepspeed_p2p.h"
#include "schedules/megatron_p2p.h"
#include "schedules/registry.h"
#include "schedules/torch_p2p.h"

namespace ppsim {

namespace {

constexpr double kMaxOpNs = 1e12;  // 1000 s for one op of one micro-batch: the config is surely wrong

// ---- rooflines ------------------------------------------------------------------------------

struct Roofline {
  const ModelConfigData& c;
  // FLOP/ns = TFLOP/s * 1e3; bytes/ns = GB/s.
  Dtype gemm_type(const Gemm& g) const { return g.keep_bf16 ? Dtype::bf16 : c.precision.gemm; }
  // The GEMM's achieved FLOP/ns; `wgrad`: as a weight-gradient GEMM (efficiency.gemm_fp8_wgrad).
  double gemm_peak(const Gemm& g, bool wgrad = false) const {
    const bool fp8 = gemm_type(g) == Dtype::fp8;
    const EfficiencySpec& e = c.hardware.efficiency;
    return c.hardware.peak_tflops(gemm_type(g)) * 1e3 * (wgrad ? e.wgrad_at(fp8) : e.gemm_at(fp8));
  }
  // The pass's shape factor (costs.gemm_shape; cost/gemm_shape.h): rows x cols of its output,
  // `inner` its reduction; an expert's GEMMs (count > 1) are one grouped GEMM of `count` groups.
  double shaped(const Gemm& g, double rows, double cols, double inner) const {
    if (!c.costs.gemm_shape) return 1;
    return gemm_shape_factor({rows, cols, inner, g.count, gemm_type(g) == Dtype::fp8});
  }
  double gemm_hbm() const { return c.hardware.hbm_gbps * c.hardware.efficiency.gemm; }
  double in_bytes(const Gemm& g) const { return dtype_bytes(gemm_type(g)); }

  // Forward Y[m,n] = X[m,k] W[k,n]; input grad dX[m,k] = dY[m,n] W^T; weight grad
  // dW[k,n] = X^T dY, accumulated into the fp32 main grad (read + write, 8 bytes per weight):
  // the GEMM's roofline on its inputs, then efficiency.accum_exposed of the accumulation's
  // traffic at HBM x elementwise (what the fused GEMM does not hide, measured on an H100).
  double gemm_fwd(const Gemm& g) const {
    const double bytes = ((g.m * g.k + g.k * g.n) * in_bytes(g) + g.m * g.n * kActivationBytes) * g.count;
    return std::max(g.flops() / (gemm_peak(g) * shaped(g, g.m, g.n, g.k)), bytes / gemm_hbm());
  }
  double gemm_dgrad(const Gemm& g) const {
    const double bytes = ((g.m * g.n + g.n * g.k) * in_bytes(g) + g.m * g.k * kActivationBytes) * g.count;
    return std::max(g.flops() / (gemm_peak(g) * shaped(g, g.m, g.k, g.n)), bytes / gemm_hbm());
  }
  double gemm_wgrad(const Gemm& g) const {
    const double bytes = (g.k * g.m + g.m * g.n) * in_bytes(g) * g.count;
    const double accum_bytes = g.k * g.n * 8.0 * g.count;
    const double peak = gemm_peak(g, true) * shaped(g, g.k, g.n, g.m);
    return std::max(g.flops() / peak, bytes / gemm_hbm()) +
           c.hardware.efficiency.accum_exposed * elementwise(accum_bytes);
  }
  // FP8 quantization traffic of one GEMM (costs.fp8_quant; CostSwitches::fp8_quant says what).
  bool quantized(const Gemm& g) const { return c.costs.fp8_quant && gemm_type(g) == Dtype::fp8; }
  double quant_fwd(const Gemm& g) const {
    return quantized(g) && !g.input_shared && !g.input_fp8 ? elementwise(kFp8QuantBytes * g.m * g.k * g.count) : 0;
  }
  double quant_dgrad(const Gemm& g) const { return quantized(g) ? elementwise(4.0 * g.m * g.n * g.count) : 0; }
  double quant_wgrad(const Gemm& g) const {
    return quantized(g) && !g.input_shared ? elementwise(2.0 * g.m * g.k * g.count) : 0;
  }
  // The flash core on one roofline at efficiency.attention, times its shape's rate (BlockWork::core_rate),
  // at most the peak: a calibrated figure near 1 at a shape faster than the reference would pass it.
  double core(double flops, double bytes, double rate) const {
    const double eff = std::min(1.0, c.hardware.efficiency.attention * rate);
    return std::max(flops / (c.hardware.peak_bf16_tflops * 1e3 * eff), bytes / (c.hardware.hbm_gbps * eff));
  }
  double elementwise(double bytes) const { return bytes / (c.hardware.hbm_gbps * c.hardware.efficiency.elementwise); }
  // A batched GEMM of the attention core without flash attention (BlockWork::core_gemms): 16-bit
  // inputs and output, no weights, at the BF16 GEMM figures (a 16-bit core also under FP8 GEMMs).
  double bmm(const Gemm& g) const {
    const double bytes = (g.m * g.k + g.k * g.n + g.m * g.n) * kActivationBytes * g.count;
    const double peak = c.hardware.peak_bf16_tflops * 1e3 * c.hardware.efficiency.gemm_at(false);
    return std::max(g.flops() / peak, bytes / gemm_hbm());
  }
  // The attention core, forward: one roofline (flash attention), or its batched GEMMs and the
  // passes over the scores between them, their times added.
  double core_fwd(const BlockWork& w) const {
    if (w.core_gemms.empty()) return core(w.core_flops, w.core_bytes, w.core_rate);
    double ns = elementwise(w.core_bytes);
    for (const Gemm& g : w.core_gemms) ns += bmm(g);
    return ns;
  }
  // Input grad: 2.5x the forward's FLOPs (flash attention recomputes P) on one roofline; or, per
  // forward GEMM Y[m,n] = X[m,k] W[k,n], dX = dY W^T ([m x n] x [n x k]) and dW = X^T dY
  // ([k x m] x [m x n]), and the backward passes over the scores.
  double core_bwd(const BlockWork& w) const {
    if (w.core_gemms.empty())
      return core(kAttentionBackwardFactor * w.core_flops, w.core_bwd_bytes >= 0 ? w.core_bwd_bytes : 2 * w.core_bytes,
                  w.core_rate);
    double ns = elementwise(w.core_bwd_bytes);
    for (const Gemm& g : w.core_gemms) {
      ns += bmm({g.name, g.m, g.k, g.n, g.count});
      ns += bmm({g.name, g.k, g.n, g.m, g.count});
    }
    return ns;
  }
  // Ring collectives inside a TP group: NVLink (one direction) when the group fits in a node.
  // costs.tp_comm off: not counted; costs.tp_overlap: that fraction hidden under the GEMMs
  // (Megatron-LM's --tp-comm-overlap, Transformer Engine's userbuffers).
  double tp_comm(double bytes) const {
    if (bytes <= 0 || !c.costs.tp_comm) return 0;
    return (1.0 - c.costs.tp_overlap) * tp_comm_exposed(bytes);
  }
  // One CP collective of K/V (or dK/dV) bytes: the cp ranks sit at stride tp (order
  // tp, cp, pp, dp), NVLink when tp * cp fits a node. costs.cp_overlap: the fraction hidden.
  double cp_comm(double bytes) const {
    if (bytes <= 0 || !c.costs.cp_comm) return 0;
    const bool intra = static_cast<long long>(c.parallel.tp) * c.parallel.cp <= c.hardware.gpus_per_node;
    const double bw = (intra ? c.hardware.nvlink_bytes_per_ns_one_way() : c.hardware.network_gbps) * c.hardware.efficiency.comm;
    return (1.0 - c.costs.cp_overlap) *
           (bytes / bw + 1e3 * (intra ? c.hardware.nvlink_latency_us : c.hardware.network_latency_us));
  }
  // CP's backward, from the forward all-gather's bytes (the other cp - 1 ranks' K and V). Both
  // gather K and V again: the forward keeps only the rank's own (Transformer Engine's
  // AttnFuncWithCPAndKVAllGather, Llama 3's scheme; PyTorch's ring backward's kv_rotater).
  // te: then one reduce-scatter of dK, dV (bf16, as many bytes). torch (parallel.cp_runtime):
  // PyTorch's _templated_ring_attention_backward passes the local dK, dV (1/cp of the sequence,
  // fp32 with its default convert_to_f32) to the next rank cp times, each its own transfer.
  double cp_backward(double fwd_bytes) const {
    if (fwd_bytes <= 0) return 0;
    if (!c.parallel.cp_torch) return 2 * cp_comm(fwd_bytes);
    const double local_fp32 = 2 * fwd_bytes / (c.parallel.cp - 1);
    return cp_comm(fwd_bytes) + c.parallel.cp * cp_comm(local_fp32);
  }
  double tp_comm_exposed(double bytes) const {
    const bool intra = c.parallel.tp <= c.hardware.gpus_per_node;
    const double bw = (intra ? c.hardware.nvlink_bytes_per_ns_one_way() : c.hardware.network_gbps) * c.hardware.efficiency.comm;
    return bytes / bw + 1e3 * (intra ? c.hardware.nvlink_latency_us : c.hardware.network_latency_us);
  }
  // An all-to-all of `bytes` leaving a rank, a fraction x of them over the network: the NVLink
  // and network parts run at once, so the slower one decides, plus one latency.
  double a2a(double bytes, double x, double intra_share) const {
    if (bytes <= 0) return 0;
    const double eff = c.hardware.efficiency.comm;
    const double intra = bytes * intra_share / (c.hardware.nvlink_bytes_per_ns_one_way() * eff);
    const double inter = bytes * x / (c.hardware.network_gbps * eff);
    const double lat = 1e3 * (x > 0 ? c.hardware.network_latency_us : c.hardware.nvlink_latency_us);
    return std::max(intra, inter) + lat;
  }

  // A block without its all-to-alls.
  PassNs block(const BlockWork& w) const {
    PassNs t;
    double fwd = 0, dgrad = 0, wgrad = 0;
    for (const auto& g : w.gemms) {
      fwd += gemm_fwd(g) + quant_fwd(g);
      dgrad += gemm_dgrad(g) + quant_dgrad(g);
      wgrad += gemm_wgrad(g) + quant_wgrad(g);
    }
    fwd += core_fwd(w) + elementwise(w.elem_bytes) + tp_comm(w.tp_comm_bytes) + cp_comm(w.cp_comm_bytes);
    for (int i = 0; i < w.tp_small_allreduces; ++i) fwd += tp_comm(w.tp_small_allreduce_bytes);
    // Input grad: the core's backward, 2x the elementwise bytes (unless given).
    dgrad += core_bwd(w) + elementwise(w.bwd_elem_bytes >= 0 ? w.bwd_elem_bytes : 2 * w.elem_bytes) +
             tp_comm(w.tp_comm_bytes) + cp_backward(w.cp_comm_bytes);
    wgrad += elementwise(w.wgrad_elem_bytes);
    t.f = fwd;
    t.w = wgrad;
    t.b = dgrad + wgrad;
    return t;
  }
};

LayerFigures layer_figures(const ModelConfigData& c, int layer, const Roofline& rl) {
  const Shard sh{c.parallel.tp, c.parallel.ep, c.parallel.cp, c.parallel.etp};
  const LayerWork w = layer_work(c, layer, sh);
  LayerFigures f;
  f.layer = layer;
  f.moe = w.moe;
  f.attention = rl.block(w.attention);
  f.mlp = rl.block(w.mlp);
  f.dispatch_bytes = w.mlp.dispatch_bytes;
  f.combine_bytes = w.mlp.combine_bytes;
  f.dispatch_grad_bytes = w.mlp.dispatch_grad_bytes;
  f.combine_grad_bytes = w.mlp.combine_grad_bytes;
  f.inter_node_fraction = a2a_inter_node_fraction(c);
  f.intra_node_share = 1 - f.inter_node_fraction;
  if (c.model.moe.max_nodes > 0 && f.inter_node_fraction > 0) {
    // Node-limited routing: of the k (ep-1)/ep copies a token sends, x would cross the network;
    // with at most max_nodes destination nodes and one transfer per node (forwarded over NVLink
    // there), at most max_nodes (N-1)/N do, N the ep group's nodes. Every copy still crosses
    // NVLink once (sent there directly, or forwarded by the node's receiving GPU).
    const int ep = c.parallel.ep;
    const int per_node = std::max(1, c.hardware.gpus_per_node / std::max(1, c.parallel.expert_tp()));
    const double nodes = std::ceil(static_cast<double>(ep) / per_node);
    const double leave = c.model.moe.top_k * (ep - 1.0) / ep;
    const double sends = std::min(leave * f.inter_node_fraction, c.model.moe.max_nodes * (nodes - 1) / nodes);
    f.inter_node_fraction = sends / leave;
    f.intra_node_share = 1;
  }
  f.dispatch_ns = rl.a2a(f.dispatch_bytes, f.inter_node_fraction, f.intra_node_share);
  f.combine_ns = rl.a2a(f.combine_bytes, f.inter_node_fraction, f.intra_node_share);
  f.dispatch_grad_ns = rl.a2a(f.dispatch_grad_bytes, f.inter_node_fraction, f.intra_node_share);
  f.combine_grad_ns = rl.a2a(f.combine_grad_bytes, f.inter_node_fraction, f.intra_node_share);
  f.flops_f = w.forward_flops();
  f.flops_b = w.backward_flops();
  f.flops_w = w.attention.weight_grad_flops() + w.mlp.weight_grad_flops();
  return f;
}

// The op classes of parallel.recompute_ops, re-run before a layer's backward: the attention
// core when it is materialized (with flash attention its backward recomputes it anyway, inside
// the 2.5x), MLA's up-projection GEMMs, each norm (read its input, write its output: 4 bytes
// per element) and the activation function (read its two inputs, write the product: 6 bytes
// per element; GELU 4).
double recompute_ops_ns(const ModelConfigData& c, int layer, const LayerWork& w, const Roofline& rl) {
  const unsigned ops = c.parallel.recompute_ops;
  const ModelSpec& m = c.model;
  const double T = static_cast<double>(m.tokens_per_microbatch()) / (static_cast<double>(c.parallel.tp) * c.parallel.cp), h = static_cast<double>(m.hidden);
  // The norms run on the rank's sequence shard, T/t tokens; on all T without sequence parallelism.
  const double norm_tokens = c.parallel.sequence_parallel ? T : T * c.parallel.tp;
  double ns = 0;
  if ((ops & kRecomputeAttnCore) && !m.flash_attention) ns += rl.core_fwd(w.attention);
  if (ops & kRecomputeMlaUp)
    for (const Gemm& g : w.attention.gemms)
      if (std::string_view(g.name) == "q_up" || std::string_view(g.name) == "kv_up") ns += rl.gemm_fwd(g);
  if (ops & kRecomputeNorm) {
    double width = 2 * h;  // before attention and before the MLP
    if (m.mla.enabled) width += static_cast<double>(m.mla.q_lora_rank + m.mla.kv_lora_rank);
    ns += rl.elementwise(4 * width * norm_tokens);
  }
  if (ops & kRecomputeActFn) {
    const double per = m.mlp == MlpKind::swiglu ? 6.0 : 4.0;
    const double routed = m.moe.top_k * m.moe.capacity_factor * static_cast<double>(m.moe.expert_ffn_hidden);
    const double elems = m.layer_is_moe(layer)
                             ? routed + m.moe.shared_experts * static_cast<double>(m.moe.shared_width())
                             : static_cast<double>(m.ffn_hidden);
    ns += rl.elementwise(per * elems * T);
  }
  return ns;
}

// PyTorch's split backward (p2p_runtime torch): a W action runs stage_backward_weight
// (torch/distributed/pipelining/_backward.py), which before its autograd.grad sums each parameter
// group's saved output gradients with Python's sum(), `summed_grad = sum(non_none_grads)`: with one
// gradient that is 0 + g, one more kernel that reads and writes the whole gradient (bf16: 4 bytes
// per element), at the elementwise figure. A group per weight GEMM (its output gradient, m x n per
// instance), per norm weight (its output's: the T/t tokens of the rank's sequence shard x width:
// hidden before attention and before the MLP, MLA's q and kv ranks); the head's vocab GEMM and
// final norm on the head's slice. Not the first stage (the embedding's): its W is a full backward
// (torch_first_stage_split). A full backward (B) sums nothing; any
// other runtime: 0. (PyTorch 2.11; an older _backward.py, pytorch/pytorch 060ca5d, passed the saved
// gradients on without summing.)
// Measured (docs/CALIBRATION.md): 192 such kernels per rank and M = 8 step, T (7h + 2 ffn) elements
// per Llama layer and micro-batch, exactly these.
double torch_split_w_ns(const ModelConfigData& c, const SliceFigures& f, const Roofline& rl) {
  if (c.parallel.p2p_runtime != P2pRuntime::torch) return 0;
  const ModelSpec& m = c.model;
  const Shard sh{c.parallel.tp, c.parallel.ep, c.parallel.cp, c.parallel.etp};
  const double T = static_cast<double>(m.tokens_per_microbatch()) / sh.cp, h = static_cast<double>(m.hidden);
  auto outputs = [](const BlockWork& w) {
    double e = 0;
    for (const Gemm& g : w.gemms) e += g.m * g.n * g.count;
    return e;
  };
  double norm_width = 2 * h;
  if (m.mla.enabled) norm_width += static_cast<double>(m.mla.q_lora_rank + m.mla.kv_lora_rank);
  double elems = 0, dense = -1, moe = -1;
  for (const LayerFigures& l : f.layers) {
    double& cached = l.moe ? moe : dense;
    if (cached < 0) {
      const LayerWork w = layer_work(c, l.layer, sh);
      cached = outputs(w.attention) + outputs(w.mlp) + norm_width * T / sh.tp;
    }
    elems += cached;
  }
  if (f.layout.head) elems += (1.0 + m.mtp_depth) * (outputs(head_work(c, sh)) + T * h / sh.tp);
  return rl.elementwise(2.0 * kActivationBytes * elems);
}

// PyTorch's split backward on its first stage (p2p_runtime torch, stage index 0): the stage's
// inputs need no gradient, so its I action computes nothing (backward_one_chunk with
// full_backward=False skips the input backward `if not self.is_first`) and its W action runs the
// whole backward instead (backward_weight_one_chunk: stage_index 0 calls the "full" backward, no
// summed gradient copy); torch/distributed/pipelining/stage.py, PyTorch 2.11. Measured: the
// first stage's I actions launch no kernel, its W actions take a full backward's time
// (docs/CALIBRATION.md). A full B, every other stage and every other runtime: unchanged.
SliceCosts torch_first_stage_split(const ModelConfigData& c, int slice, SliceCosts sc) {
  if (c.parallel.p2p_runtime != P2pRuntime::torch || slice != 0) return sc;
  sc.w = sc.b;
  sc.w_apart = 0;
  sc.w_hold = 1.0;  // the whole graph is held until the W
  return sc;
}

Time to_ticks(double ns, const char* what, int slice) {
  if (!std::isfinite(ns) || ns > kMaxOpNs)
    throw InputError(fmt::format("derived {} time of slice {} is {:.3g} ms, over the limit of {:.3g} ms; check the model and "
                                 "hardware figures", what, slice, ns / 1e6, kMaxOpNs / 1e6));
  return static_cast<Time>(std::llround(ns));
}

SliceCosts scaled_share(const OpTimes& share, int v) {
  // One rank's share cut into v chunks (as cli::chunk_costs for --times).
  SliceCosts c;
  c.f = share.f / v;
  c.b = share.b / v;
  c.w = share.w / v;
  c.fb = share.fb > 0 ? share.fb / v : c.f + c.b;
  return c;
}

SliceCosts profile_slice(const CostProfile& p, const ModelConfigData& c, const SliceLayout& s) {
  SliceCosts out;
  Time fb_sum = 0;
  bool have_fb = true;
  for (int l = s.first_layer; l < s.first_layer + s.layers; ++l) {
    const OpTimes& t = (!c.model.layer_is_moe(l) && c.model.moe.enabled() && p.dense_op) ? *p.dense_op : p.op;
    out.f += t.f;
    out.b += t.b;
    out.w += t.w;
    if (t.fb > 0) fb_sum += t.fb;
    else have_fb = false;
  }
  for (const auto& [on, t] : {std::pair{s.embedding, p.embedding}, std::pair{s.head, p.head}}) {
    if (!on) continue;
    out.f += t.f;
    out.b += t.b;
    out.w += t.w;
    fb_sum += t.f + t.b;
  }
  out.fb = have_fb && s.layers > 0 ? fb_sum : out.f + out.b;
  return out;
}

// Every op run back to back, each followed by its transfer, bounds the makespan; keep that
// bound inside the 64-bit ns range so that the simulator's sums cannot overflow.
void check_step_bound(const Schedule& s, const SimCosts& costs) {
  double worst = 0;
  const LinkModel& slow = costs.rank_node.empty() ? costs.link : costs.inter_node_link;
  for (const auto& x : costs.slice)
    worst = std::max(worst, static_cast<double>(x.f + x.b) +
                                2.0 * (slow.bytes_per_tick > 0 ? static_cast<double>(x.act_bytes) / slow.bytes_per_tick : 0.0) +
                                2.0 * static_cast<double>(slow.latency));
  const double bound = worst * static_cast<double>(s.num_ops());
  if (bound > 4e18)
    throw InputError(fmt::format("{}: a step could last up to {:.3g} s, beyond the simulator's time range; check the model, "
                                 "hardware and micro-batch figures", s.family, bound / 1e9));
}

const ModelConfigData& data(const ModelConfig& cfg) {
  PPSIM_CHECK(cfg.data != nullptr, "{}", "empty ModelConfig");
  return *cfg.data;
}

}  // namespace

PassNs LayerFigures::serial() const {
  PassNs t = attention;
  t += mlp;
  t.f += dispatch_ns + combine_ns;
  t.b += dispatch_grad_ns + combine_grad_ns;
  return t;
}

namespace {
LinkModel link_of(const ModelConfigData& c, bool intra) {
  const HardwareSpec& h = c.hardware;
  LinkModel l;
  l.bytes_per_tick = (intra ? h.nvlink_bytes_per_ns_one_way() : h.network_gbps) * h.efficiency.comm;
  l.latency = static_cast<Time>(std::llround(1e3 * (intra ? h.nvlink_latency_us : h.network_latency_us)));
  l.blocking = c.parallel.blocking_p2p;
  return l;
}
}  // namespace

LinkModel p2p_link(const ModelConfigData& c, int pp) {
  const bool intra = static_cast<long long>(pp) * c.parallel.tp * c.parallel.cp * c.parallel.dp <= c.hardware.gpus_per_node;
  LinkModel l = link_of(c, intra);
  if (c.profile.present) {
    if (c.profile.link_gbps) l.bytes_per_tick = *c.profile.link_gbps;
    if (c.profile.link_latency_us) l.latency = static_cast<Time>(std::llround(1e3 * *c.profile.link_latency_us));
  }
  return l;
}

void set_p2p_links(const ModelConfigData& c, int pp, SimCosts& out) {
  out.link = p2p_link(c, pp);
  out.rank_node.clear();
  // Megatron-LM's rank order (tp, cp, dp, pp: the pipeline outermost): pipeline rank r's GPUs are
  // the span=tp cp dp consecutive ones from r x span. Where a node holds several pipeline ranks
  // but not all, hops inside a node run on NVLink and hops between nodes on the network. A
  // measured profile's link stands for every hop.
  const long long span = static_cast<long long>(c.parallel.tp) * c.parallel.cp * c.parallel.dp;
  const long long gpn = std::max(1, c.hardware.gpus_per_node);
  if (!c.costs.p2p_per_node || c.profile.replaces_all() || pp <= 1 || span >= gpn || pp * span <= gpn) return;
  out.link = link_of(c, true);
  out.inter_node_link = link_of(c, false);
  for (long long r = 0; r < pp; ++r) out.rank_node.push_back(static_cast<int>(r * span / gpn));
}

CostFigures cost_figures(const ModelConfigData& c, int slices) {
  const Roofline rl{c};
  CostFigures out;
  out.compute_sm_fraction = static_cast<double>(c.hardware.sms - c.hardware.comm_sms) / c.hardware.sms;
  out.link = p2p_link(c, c.parallel.pp);
  const Shard sh{c.parallel.tp, c.parallel.ep, c.parallel.cp, c.parallel.etp};
  // Layers of one kind have equal figures: compute the first dense and the first MoE layer once.
  std::vector<LayerFigures> cache;
  auto figures_of = [&](int layer) {
    const bool moe = c.model.layer_is_moe(layer);
    for (const auto& f : cache)
      if (f.moe == moe) {
        LayerFigures copy = f;
        copy.layer = layer;
        return copy;
      }
    cache.push_back(layer_figures(c, layer, rl));
    if (moe && c.profile.moe_layers_only) {
      // A measured MoE layer (profile applies_to: moe_layers): its sub-op times replace the
      // derived ones; FLOPs and bytes stay the config's.
      const MoeSliceCosts& so = *c.profile.sub_ops;
      LayerFigures& f = cache.back();
      auto ns = [](Time t) { return static_cast<double>(t); };
      f.attention = PassNs{ns(so.attn_f), ns(so.attn_b + so.attn_w), ns(so.attn_w)};
      f.mlp = PassNs{ns(so.mlp_f), ns(so.mlp_b + so.mlp_w), ns(so.mlp_w)};
      f.dispatch_ns = ns(so.dispatch);
      f.combine_ns = ns(so.combine);
      f.dispatch_grad_ns = ns(so.dispatch_b);
      f.combine_grad_ns = ns(so.combine_b);
    }
    return cache.back();
  };
  auto measured_recompute = [&](int layer) {
    return c.profile.moe_layers_only && c.profile.recompute_included && c.model.layer_is_moe(layer);
  };
  const BlockWork emb = embedding_work(c, sh);
  const BlockWork head = head_work(c, sh);
  const Bytes p2p = static_cast<Bytes>(std::llround(static_cast<double>(c.model.tokens_per_microbatch()) *
                                                    static_cast<double>(c.model.hidden) * kActivationBytes / c.parallel.tp / c.parallel.cp));
  for (const SliceLayout& lay : slice_layouts(c, slices)) {
    SliceFigures s;
    s.layout = lay;
    s.p2p_bytes = p2p;
    for (int l = lay.first_layer; l < lay.first_layer + lay.layers; ++l) {
      s.layers.push_back(figures_of(l));
      const LayerFigures& f = s.layers.back();
      s.total += f.serial();
      s.flops_f += f.flops_f;
      s.flops_b += f.flops_b;
      s.flops_w += f.flops_w;
      // Recompute: full re-runs the layer's forward (all-to-alls included) before its backward;
      // selective re-runs the attention core when its s x s tensors were not kept (with flash
      // attention the backward kernel recomputes them anyway, inside the 2.5x).
      const bool full = c.parallel.recompute == Recompute::full &&
                        (c.parallel.recompute_layers < 0 || l - lay.first_layer < c.parallel.recompute_layers);
      if (measured_recompute(l)) {
        // a measured MoE layer whose backward already holds the run's recompute (profile
        // recompute: included): nothing added
      } else if (full) {
        s.recompute_ns += f.serial().f;
      } else if (c.parallel.recompute_ops != 0) {
        s.recompute_ns += recompute_ops_ns(c, l, layer_work(c, l, sh), rl);
      }
    }
    if (lay.embedding) {
      s.embedding = rl.block(emb);
      s.total += s.embedding;
    }
    if (lay.head) {
      // Multi-token prediction (model.mtp_depth): each module is one more layer like the last
      // one and one more pass through the shared head, on the head's slice. Its 2h x h
      // projection (2% of the layer's FLOPs in DeepSeek-V3) is not timed.
      for (int d = 0; d < c.model.mtp_depth; ++d) {
        s.layers.push_back(figures_of(c.model.layers - 1));
        const LayerFigures& f = s.layers.back();
        s.total += f.serial();
        s.flops_f += f.flops_f;
        s.flops_b += f.flops_b;
        s.flops_w += f.flops_w;
        if (c.parallel.recompute == Recompute::full && !measured_recompute(c.model.layers - 1))
          s.recompute_ns += f.serial().f;
      }
      const double passes = 1.0 + c.model.mtp_depth;
      s.head = rl.block(head);
      s.head.f *= passes;
      s.head.b *= passes;
      s.head.w *= passes;
      s.total += s.head;
      s.flops_f += passes * head.forward_flops();
      s.flops_b += passes * head.backward_flops();
      s.flops_w += passes * head.weight_grad_flops();
    }
    s.total.b += s.recompute_ns;
    out.slices.push_back(std::move(s));
  }
  return out;
}

Time overlapped_pair_time(const SliceFigures&, const CostFigures&) { return 0; }

// ---- cost_model.h ---------------------------------------------------------------------------

ModelConfig load_config(const std::string& path, const std::vector<std::string>& sets) {
  const std::string text = read_yaml_file(path);
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return ModelConfig{std::make_shared<const ModelConfigData>(parse_config(text, path, dir, sets))};
}

ModelConfig load_config_text(const std::string& text, const std::string& name, const std::vector<std::string>& sets) {
  return ModelConfig{std::make_shared<const ModelConfigData>(parse_config(text, name, "", sets))};
}

void apply_config_parallel(const ModelConfig& cfg, int& pp, int& microbatches, int& vpp) {
  const ParallelSpec& p = data(cfg).parallel;
  pp = p.pp;
  microbatches = p.microbatches;
  if (p.has_vpp) vpp = p.vpp;
}

std::string config_schedules(const ModelConfig& cfg) { return data(cfg).parallel.schedule; }

SimCosts derive_costs(const ModelConfig& cfg, const Schedule& s) {
  const ModelConfigData& c = data(cfg);
  const int slices = s.stages_per_pipe;
  SimCosts out;
  out.scale = TimeScale::millis();
  set_p2p_links(c, s.pp, out);
  out.call_restart = static_cast<Time>(std::llround(1e3 * c.parallel.p2p_sync_us));
  out.eager_bytes = static_cast<Bytes>(std::llround(1e6 * c.parallel.p2p_eager_mb));
  if (c.times.present) {
    // Explicit times: one rank's share, each of its v chunks 1/v of it; layout still checked.
    (void)slice_layouts(c, slices);
    SliceCosts sc = scaled_share(c.times.share, std::max(1, s.chunks_per_rank));
    const Bytes p2p = static_cast<Bytes>(std::llround(static_cast<double>(c.model.tokens_per_microbatch()) *
                                                      static_cast<double>(c.model.hidden) * kActivationBytes / c.parallel.tp / c.parallel.cp));
    sc.act_bytes = sc.grad_bytes = p2p;
    out.slice.assign(static_cast<std::size_t>(slices), sc);
    check_step_bound(s, out);
    return out;
  }
  const CostFigures fig = cost_figures(c, slices);
  // The Zero Bubble paper's M_W / M_B per slice, for the search's cap (costs.w_hold).
  std::vector<double> w_hold(static_cast<std::size_t>(slices), 1.0);
  if (c.costs.w_hold) {
    std::vector<SliceLayout> layouts;
    for (const SliceFigures& f : fig.slices) layouts.push_back(f.layout);
    w_hold = slice_w_hold(c, layouts);
  }
  for (int i = 0; i < slices; ++i) {
    const SliceFigures& f = fig.slices[static_cast<std::size_t>(i)];
    SliceCosts sc;
    if (c.profile.replaces_all()) {
      sc = c.profile.per_layer ? profile_slice(c.profile, c, f.layout) : scaled_share(c.profile.op, std::max(1, s.chunks_per_rank));
    } else {
      sc.f = to_ticks(f.total.f, "forward", i);
      sc.b = to_ticks(f.total.b, "backward", i);
      sc.w = std::min(sc.b, to_ticks(f.total.w, "weight-grad", i));
      const Time pair = overlapped_pair_time(f, fig);
      sc.fb = pair > 0 ? pair : sc.f + sc.b;
      sc.w_apart = to_ticks(torch_split_w_ns(c, f, Roofline{c}), "split weight-grad", i);
    }
    sc.act_bytes = sc.grad_bytes = f.p2p_bytes;
    sc.w_hold = w_hold[static_cast<std::size_t>(i)];
    out.slice.push_back(torch_first_stage_split(c, i, sc));
  }
  const bool profiled_overlap = c.profile.replaces_all() && c.profile.sub_ops &&
                                (c.model.moe.enabled() || c.profile.sub_ops->dispatch + c.profile.sub_ops->combine +
                                                                  c.profile.sub_ops->dispatch_b + c.profile.sub_ops->combine_b > 0);
  if (profiled_overlap) {
    // A version-2 profile of an MoE model (or one with all-to-all times): the overlap model on the
    // measured sub-op times of one layer (a dense model keeps its measured FB pair). Dense
    // layers of an MoE model (dense_op_ms) keep the attention times, the rest of their time is
    // MLP and they have no all-to-all; embedding and head fold into attention (per-layer means,
    // as for derived costs below), so the slice's totals are kept.
    const MoeSliceCosts& so = *c.profile.sub_ops;
    for (int i = 0; i < slices; ++i) {
      const SliceLayout& lay = fig.slices[static_cast<std::size_t>(i)].layout;
      const double n = std::max(1, lay.layers);
      double af = 0, ab = 0, aw = 0, mf = 0, mb = 0, mw = 0, d = 0, cb = 0, db = 0, cf = 0;
      for (int l = lay.first_layer; l < lay.first_layer + lay.layers; ++l) {
        af += static_cast<double>(so.attn_f);
        ab += static_cast<double>(so.attn_b);
        aw += static_cast<double>(so.attn_w);
        if (c.model.moe.enabled() && !c.model.layer_is_moe(l) && c.profile.dense_op) {
          const OpTimes& t = *c.profile.dense_op;
          mf += std::max<double>(0, static_cast<double>(t.f - so.attn_f));
          mw += std::max<double>(0, static_cast<double>(t.w - so.attn_w));
          mb += std::max<double>(0, static_cast<double>(t.b - t.w - so.attn_b));
          continue;
        }
        mf += static_cast<double>(so.mlp_f);
        mb += static_cast<double>(so.mlp_b);
        mw += static_cast<double>(so.mlp_w);
        d += static_cast<double>(so.dispatch);
        cf += static_cast<double>(so.combine);
        db += static_cast<double>(so.dispatch_b);
        cb += static_cast<double>(so.combine_b);
      }
      for (const auto& [on, t] : {std::pair{lay.embedding, c.profile.embedding}, std::pair{lay.head, c.profile.head}}) {
        if (!on) continue;
        af += static_cast<double>(t.f);
        ab += static_cast<double>(t.b - t.w);
        aw += static_cast<double>(t.w);
      }
      auto per_layer = [&](double v) { return static_cast<Time>(std::llround(v / n)); };
      MoeSliceCosts m;
      m.layers = static_cast<int>(n);
      m.attn_f = per_layer(af);
      m.attn_b = per_layer(ab);
      m.attn_w = per_layer(aw);
      m.mlp_f = per_layer(mf);
      m.mlp_b = per_layer(mb);
      m.mlp_w = per_layer(mw);
      m.dispatch = per_layer(d);
      m.combine = per_layer(cf);
      m.dispatch_b = per_layer(db);
      m.combine_b = per_layer(cb);
      m.attn_comm_slowdown = c.profile.attn_comm_slowdown;
      m.mlp_comm_slowdown = c.profile.mlp_comm_slowdown;
      out.moe.push_back(m);
    }
    // The linear rule's sigma (for sub-ops without a profiled slowdown): the SM share the
    // profile saw the communication kernels hold, else the config's comm_sms / sms.
    out.comm_sm_fraction = c.profile.comm_sm_fraction > 0 ? c.profile.comm_sm_fraction : 1.0 - fig.compute_sm_fraction;
    check_overlap_work(s, out);
  } else if (!c.profile.replaces_all() && c.model.moe.enabled()) {
    // The overlap model (sim/overlap.h): each slice's layers as attention / MLP / all-to-all
    // sub-ops. Sub-op costs are the slice's per-layer means (dense layers count zero all-to-all;
    // embedding, head and recompute are folded into attention), so the slice's totals are kept.
    for (int i = 0; i < slices; ++i) {
      const SliceFigures& f = fig.slices[static_cast<std::size_t>(i)];
      const double n = static_cast<double>(std::max<std::size_t>(1, f.layers.size()));
      PassNs attn = f.embedding, mlp;
      attn += f.head;
      attn.b += f.recompute_ns;
      double disp = 0, comb = 0, disp_b = 0, comb_b = 0;
      for (const LayerFigures& l : f.layers) {
        attn += l.attention;
        mlp += l.mlp;
        disp += l.dispatch_ns;
        comb += l.combine_ns;
        disp_b += l.dispatch_grad_ns;
        comb_b += l.combine_grad_ns;
      }
      auto per_layer = [&](double v) { return static_cast<Time>(std::llround(v / n)); };
      MoeSliceCosts m;
      m.layers = static_cast<int>(n);
      m.attn_f = per_layer(attn.f);
      m.attn_b = per_layer(attn.b - attn.w);
      m.attn_w = per_layer(attn.w);
      m.mlp_f = per_layer(mlp.f);
      m.mlp_b = per_layer(mlp.b - mlp.w);
      m.mlp_w = per_layer(mlp.w);
      m.dispatch = per_layer(disp);
      m.combine = per_layer(comb);
      m.dispatch_b = per_layer(disp_b);
      m.combine_b = per_layer(comb_b);
      if (c.profile.moe_layers_only) {
        // The measured MoE layer's SM sharing, as with a whole profile.
        m.attn_comm_slowdown = c.profile.attn_comm_slowdown;
        m.mlp_comm_slowdown = c.profile.mlp_comm_slowdown;
      }
      out.moe.push_back(m);
    }
    out.comm_sm_fraction = c.profile.moe_layers_only && c.profile.comm_sm_fraction > 0 ? c.profile.comm_sm_fraction
                                                                                       : 1.0 - fig.compute_sm_fraction;
    check_overlap_work(s, out);
  }
  check_step_bound(s, out);
  return out;
}

namespace {
// The ranks' mean compute duty over the step period: the makespan, or with post-validation the
// longest rank's own span.
double duty_of(const ModelConfigData& c, const SimResult& r) {
  const Time period = c.parallel.post_validation ? r.longest_span() : r.makespan();
  if (r.ranks.empty() || period <= 0) return 0;
  double busy = 0;
  for (const RankStats& x : r.ranks) busy += static_cast<double>(x.busy);
  return busy / (static_cast<double>(r.ranks.size()) * static_cast<double>(period));
}

// Every compute duration of `base` times `factor` (links, all-to-alls and step costs as they are).
SimCosts clocked(const SimCosts& base, double factor) {
  SimCosts out = base;
  auto scale = [factor](Time& t) { t = static_cast<Time>(std::llround(static_cast<double>(t) * factor)); };
  for (SliceCosts& x : out.slice) {
    scale(x.f);
    scale(x.b);
    scale(x.w);
    scale(x.w_apart);
    scale(x.fb);
  }
  for (MoeSliceCosts& m : out.moe)
    for (Time* t : {&m.attn_f, &m.attn_b, &m.attn_w, &m.mlp_f, &m.mlp_b, &m.mlp_w}) scale(*t);
  return out;
}
}  // namespace

namespace {
// Per rank, how long each of its actions (in its order) ran beside the spans `on` gives its rank.
std::vector<std::vector<Time>> beside(const Schedule& s, const SimResult& r, const std::vector<Intervals>& on) {
  std::vector<std::vector<Time>> out(static_cast<std::size_t>(s.pp));
  std::vector<Intervals> merged(static_cast<std::size_t>(s.pp));
  for (std::size_t q = 0; q < on.size() && q < merged.size(); ++q) merged[q] = merge_intervals(on[q]);
  for (const Interval& iv : r.timeline.intervals) {
    if (iv.stream != Stream::Compute || iv.op_index >= 0) continue;
    out[static_cast<std::size_t>(iv.rank)].push_back(
        covered(merged[static_cast<std::size_t>(iv.rank)], iv.start, iv.end));
  }
  return out;
}

// Per rank, each action's factor from the clock's response (cost/clock_response.h) at its start in `r`'s
// timeline, with steps back to back (period: the makespan): 1 everywhere when the response is off.
std::vector<std::vector<double>> response_factors(const Schedule& s, const SimResult& r, const ClockResponse& clk) {
  std::vector<std::vector<std::pair<Time, Time>>> spans(static_cast<std::size_t>(s.pp));
  for (const Interval& iv : r.timeline.intervals)
    if (iv.stream == Stream::Compute && iv.op_index < 0)
      spans[static_cast<std::size_t>(iv.rank)].push_back({iv.start, iv.end});
  std::vector<std::vector<double>> out(spans.size());
  for (std::size_t q = 0; q < spans.size(); ++q) {
    if (!clk.on()) {
      out[q].assign(spans[q].size(), 1.0);
      continue;
    }
    for (double tau : busy_tau_ms(spans[q], clk.reset_idle_ms, r.makespan())) out[q].push_back(clk.factor(tau));
  }
  return out;
}

// The clock's fixed point (hardware.clock): f = 1 + k max(0, d(f) - d_ref), where d(f) is the duty
// with every compute duration f times the base. d rises with f (links keep their time), so the
// factor is iterated from the base run's until it moves by less than kClockTolerance.
SimResult with_clock(const ModelConfigData& c, const Schedule& s, SimCosts& costs, const SimOptions& opt, SimResult r) {
  const HardwareSpec& h = c.hardware;
  if (h.clock_duty_slope <= 0) return r;
  auto factor_at = [&](const SimResult& x) {
    return 1.0 + h.clock_duty_slope * std::max(0.0, duty_of(c, x) - h.clock_duty_ref);
  };
  constexpr double kClockTolerance = 1e-4;
  constexpr int kClockIterations = 30;
  double f = factor_at(r);
  if (f <= 1.0) return r;
  const SimCosts base = costs;
  for (int i = 0; i < kClockIterations; ++i) {
    costs = clocked(base, f);
    r = simulate(s, costs, opt);
    const double next = factor_at(r);
    if (std::abs(next - f) < kClockTolerance) break;
    f = next;
  }
  return r;
}
}  // namespace

SimResult with_action_effects(const Schedule& s, SimCosts& costs, const SimOptions& opt, double share,
                              const ResidentSpans& resident, const ClockResponse& clk, SimResult r) {
  constexpr int kActionIterations = 40;
  SimOptions rec = opt;
  rec.record_timeline = true;
  if (!opt.record_timeline) r = simulate(s, costs, rec);
  std::vector<std::vector<Time>> base(static_cast<std::size_t>(s.pp));
  for (const Interval& iv : r.timeline.intervals)
    if (iv.stream == Stream::Compute && iv.op_index < 0)
      base[static_cast<std::size_t>(iv.rank)].push_back(iv.duration());
  for (int i = 0; i < kActionIterations; ++i) {
    std::vector<std::vector<Time>> o(base.size());
    if (share > 0) o = beside(s, r, resident(r));
    const std::vector<std::vector<double>> f = response_factors(s, r, clk);
    std::vector<std::vector<Time>> next = base;
    for (std::size_t q = 0; q < next.size(); ++q)
      for (std::size_t k = 0; k < next[q].size(); ++k) {
        const double side = k < o[q].size() ? share * static_cast<double>(o[q][k]) : 0.0;
        const double clock = k < f[q].size() ? f[q][k] : 1.0;
        next[q][k] = static_cast<Time>(std::llround(static_cast<double>(next[q][k]) * clock + side));
      }
    Time moved = 0;
    if (!costs.action_time.empty())
      for (std::size_t q = 0; q < next.size(); ++q)
        for (std::size_t k = 0; k < next[q].size(); ++k) {
          const Time was = costs.action_time[q][k];
          next[q][k] = was + (next[q][k] - was) / 2;
          moved = std::max(moved, std::abs(next[q][k] - was));
        }
    if (!costs.action_time.empty() && moved <= 1) break;
    costs.action_time = std::move(next);
    r = simulate(s, costs, rec);
  }
  if (!opt.record_timeline) {
    r.timeline = Timeline{};
    r.comm_resident.clear();
  }
  return r;
}

SimResult simulate_config(const ModelConfig& cfg, const Schedule& s, SimCosts& costs, const SimOptions& opt) {
  const ModelConfigData& c = data(cfg);
  SimResult r = with_clock(c, s, costs, opt, simulate(s, costs, opt));
  const double share = s.comm_in_order ? c.parallel.p2p_sm_share : 0.0;
  const ClockResponse clk = clock_response(c.hardware);
  // Whole actions only: the overlap model (costs.moe) times its sub-ops itself.
  if ((share > 0 || clk.on()) && costs.action_time.empty() && costs.moe.empty())
    r = with_action_effects(
        s, costs, opt, share, [](const SimResult& x) { return x.comm_resident; }, clk, std::move(r));
  return r;
}

bool post_validation(const ModelConfig& cfg) { return data(cfg).parallel.post_validation; }

Schedule as_run(const ModelConfig& cfg, const Schedule& given) {
  if (!given.comm.empty()) return given;  // an imported order keeps its own communication
  const Schedule s = with_w_deferral(data(cfg), given);
  switch (data(cfg).parallel.p2p_runtime) {
    case P2pRuntime::megatron:
      return s.family == "1f1b" || s.family == "interleaved-1f1b" ? with_megatron_p2p(s) : s;
    case P2pRuntime::deepspeed:
      return s.family == "1f1b" ? with_deepspeed_p2p(s) : s;
    case P2pRuntime::torch:
      return with_torch_p2p(s);  // 1F1B and GPipe with one stage per rank: PyTorch's single-stage schedules
    case P2pRuntime::dataflow:
      break;
  }
  return s;
}

PhysicalResult physical_result(const ModelConfig& cfg, const Schedule& given, const SimResult& r) {
  const ModelConfigData& c = data(cfg);
  std::string deferral_note;
  const Schedule s = with_w_deferral(c, given, &deferral_note);  // the order as_run simulated, for its memory
  PhysicalResult p;
  p.available = true;
  p.schedule_note = std::move(deferral_note);
  // 1 tick = 1 ns with TimeScale::millis().
  p.step_time_s = static_cast<double>(r.makespan()) / 1e9;
  // costs.dp_comm / costs.optimizer_step: the step's DP collectives and optimizer after the
  // pipeline (cost/step_costs.h).
  if (c.parallel.post_validation) {
    // Zero Bubble's optimizer post-validation (arXiv 2401.10241, section 4; its Megatron fork's
    // --enable-optimizer-post-validation): no pipeline-wide all-reduce before the optimizer step, so
    // rank r steps its optimizer when its own last action ends and starts the next step's first
    // forward after it. Steps repeat with period max over r of (r's own span + r's DP and optimizer
    // time): with every rank's start shifted by the period, each dependency inside a step is met
    // exactly as in one step, and no rank runs two steps at once.
    const StepCosts sc = step_costs(c, s);
    double period = 0;
    for (std::size_t q = 0; q < r.ranks.size(); ++q) {
      if (r.ranks[q].first_start == kNever) continue;
      const double added = q < sc.ranks.size() ? sc.ranks[q].added_ns : 0.0;
      period = std::max(period, static_cast<double>(r.ranks[q].span()) + added);
    }
    p.step_time_s = period / 1e9;
  } else if (c.costs.any_step_piece()) {
    std::vector<double> busy;
    for (const auto& rank : r.ranks) busy.push_back(static_cast<double>(rank.busy));
    p.step_time_s += step_costs(c, s, &busy).added_ns / 1e9;
  }
  const double tokens = static_cast<double>(s.microbatches) * static_cast<double>(c.model.tokens_per_microbatch()) * c.parallel.dp;
  const double gpus = static_cast<double>(s.pp) * c.parallel.tp * c.parallel.cp * c.parallel.dp;
  const double peak = c.hardware.peak_tflops(c.precision.gemm) * 1e12;
  if (p.step_time_s > 0) {
    p.tokens_per_second = tokens / p.step_time_s;
    const double flops = model_flops_per_microbatch(c) * s.microbatches * c.parallel.dp;
    p.mfu = peak > 0 ? flops / (gpus * peak * p.step_time_s) : 0;
  }
  p.memory = predicted_memory(cfg, s, &r);
  for (const MemoryBreakdown& b : p.memory) p.peak_memory_bytes.push_back(b.total);
  p.memory_capacity_bytes = c.hardware.hbm_gb * 1e9;
  p.over_capacity_ranks = over_capacity_ranks(p.peak_memory_bytes, p.memory_capacity_bytes);
  if (!r.timeline.intervals.empty()) p.memory_curve = memory_curve(c, s, r.timeline);
  return p;
}

std::vector<MemoryBreakdown> predicted_memory(const ModelConfig& cfg, const Schedule& s, const SimResult* r) {
  std::vector<MemoryBreakdown> out;
  for (const RankPeak& pk : predict_rank_memory(data(cfg), s, r)) {
    const RankMemory& m = pk.parts;
    MemoryBreakdown b;
    b.weights = m.weights;
    b.gradients = m.grads;
    b.optimizer = m.optimizer;
    b.ema = m.ema;
    b.activations = m.activations;
    b.comm_buffers = m.comm_buffers;
    b.workspace = m.workspace;
    b.host_optimizer = m.host_optimizer;
    b.host_ema = m.host_ema;
    b.total = m.total();
    b.peak_op = pk.op;
    b.peak_time = pk.time;
    b.chunks = pk.chunks;
    out.push_back(std::move(b));
  }
  return out;
}

nlohmann::json cost_summary(const ModelConfig& cfg, const Schedule& s, const SimResult* r) {
  const ModelConfigData& c = data(cfg);
  nlohmann::json j;
  j["name"] = c.name;
  j["params"] = model_params(c.model);
  j["gpus"] = s.pp * c.parallel.tp * c.parallel.cp * c.parallel.dp;
  j["model_flops_per_microbatch"] = model_flops_per_microbatch(c);
  j["tokens_per_microbatch"] = c.model.tokens_per_microbatch();
  const SimCosts costs = derive_costs(cfg, s);
  nlohmann::json sl = nlohmann::json::array();
  for (const auto& x : costs.slice)
    sl.push_back({{"F_ms", x.f / 1e6}, {"B_ms", x.b / 1e6}, {"W_ms", x.w / 1e6}, {"FB_ms", x.fb / 1e6}, {"p2p_bytes", x.act_bytes}});
  j["slices"] = sl;
  j["link"] = {{"gbps", costs.link.bytes_per_tick}, {"latency_us", costs.link.latency / 1e3}};
  if (!costs.rank_node.empty()) {
    j["inter_node_link"] = {{"gbps", costs.inter_node_link.bytes_per_tick}, {"latency_us", costs.inter_node_link.latency / 1e3}};
    j["rank_node"] = costs.rank_node;
  }
  if (r != nullptr) {
    nlohmann::json mem = nlohmann::json::array();
    for (const RankPeak& pk : predict_rank_memory(c, s, r)) {
      const RankMemory& m = pk.parts;
      mem.push_back({{"weights", m.weights}, {"grads", m.grads}, {"optimizer", m.optimizer}, {"activations", m.activations},
                     {"comm_buffers", m.comm_buffers}, {"workspace", m.workspace}, {"ema", m.ema}, {"total", m.total()}});
    }
    j["memory_per_rank_bytes"] = mem;
  }
  return j;
}

}  // namespace ppsim
