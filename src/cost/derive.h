// From FLOPs and bytes to times: the roofline per op, per-layer and per-slice figures, and the
// simulator's SimCosts. Also the per-layer MoE figures (attention / MLP times, all-to-all bytes
// and times) that the sub-op overlap model builds on.
//
// Roofline, per GEMM and per block part (the category's efficiency on both ceilings):
//   t = max(flops / (peak * eff), bytes / (hbm_bandwidth * eff))
// GEMMs use the peak of precision.gemm (the router and the head stay BF16) and efficiency.gemm
// (FP8 GEMMs efficiency.gemm_fp8 where it is set; the HBM ceiling stays at efficiency.gemm);
// the attention core the BF16 peak and efficiency.attention; elementwise ops are
// bytes / (hbm * efficiency.elementwise); collectives bytes / (link * efficiency.comm).
// Times are in ns (1 tick = 1 ns).
//
// Not obvious: without the overlap model (issue "F&B overlap"), an MoE layer's all-to-alls are
// exposed: they are part of F and of the input-grad part of B. The figures below keep them
// apart so that the overlap model can hide them under the other chunk's compute.
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

#include "core/schedule.h"
#include "cost/config.h"
#include "cost/cost_model.h"
#include "cost/layer_split.h"
#include "sim/costs.h"

namespace ppsim {

// Durations in ns (double, rounded once when they become SliceCosts).
struct PassNs {
  double f = 0;
  double b = 0;  // full backward: input grad + weight grad
  double w = 0;  // weight grad
  PassNs& operator+=(const PassNs& o) {
    f += o.f;
    b += o.b;
    w += o.w;
    return *this;
  }
};

// One transformer layer, one micro-batch, one rank.
struct LayerFigures {
  int layer = 0;
  bool moe = false;
  PassNs attention;  // norm, projections, core, residual, TP collectives
  PassNs mlp;        // norm, dense MLP or router + routed + shared experts, residual, TP collectives
  // All-to-all (MoE layers), bytes leaving this rank: tokens * top_k * hidden * bytes * (ep-1)/ep.
  double dispatch_bytes = 0;       // forward (fp8 with fp8 GEMMs)
  double combine_bytes = 0;        // forward (bf16)
  double dispatch_grad_bytes = 0;  // backward: the combine's gradient, sent like a dispatch
  double combine_grad_bytes = 0;   // backward: the dispatch's gradient, returned like a combine
  double inter_node_fraction = 0;  // of those bytes, the part that crosses the network
  double intra_node_share = 0;     // and the part that crosses NVLink (1 - inter, or 1 with model.moe.max_nodes)
  // The same as times on idle links (latency included).
  double dispatch_ns = 0, combine_ns = 0, dispatch_grad_ns = 0, combine_grad_ns = 0;
  double flops_f = 0, flops_b = 0, flops_w = 0;  // b = full backward

  // Serialized: attention, dispatch, MLP, combine (forward), and the reverse (backward).
  PassNs serial() const;
};

struct SliceFigures {
  SliceLayout layout;
  std::vector<LayerFigures> layers;
  PassNs embedding;
  PassNs head;
  double recompute_ns = 0;  // added to the backward's input-grad part
  PassNs total;             // what the simulator gets
  double flops_f = 0, flops_b = 0, flops_w = 0;  // model FLOPs of the slice (no recompute)
  Bytes p2p_bytes = 0;      // activations sent to the next stage (and gradients back)
};

struct CostFigures {
  std::vector<SliceFigures> slices;
  // Compute speed while a communication kernel holds hardware.comm_sms SMs:
  // (sms - comm_sms) / sms. The overlap model slows compute beside all-to-alls by this.
  double compute_sm_fraction = 1;
  LinkModel link;  // stage-to-stage P2P
};

// Figures for `slices` slices of the model (slice_layouts' rules).
CostFigures cost_figures(const ModelConfigData& c, int slices);

// The stage-to-stage link: NVLink (one direction) when the whole pipeline replica sits on one
// node (pp * tp * dp <= gpus_per_node, Megatron's rank order puts pp outermost), else the
// network; bandwidth times efficiency.comm, the link's latency.
LinkModel p2p_link(const ModelConfigData& c, int pp);
// The stage-to-stage links of a pp-rank pipeline: p2p_link for every hop, or, where a node holds
// several pipeline ranks but not all (Megatron's order, the pipeline outermost), NVLink inside a
// node and the network between nodes (SimCosts::rank_node, inter_node_link).
void set_p2p_links(const ModelConfigData& c, int pp, SimCosts& out);

// Hook for the overlap model (issue "F&B overlap"): the duration of an overlapped F&B pair
// when both chunks are of this slice. 0 means "no gain": the simulator then uses f + b.
Time overlapped_pair_time(const SliceFigures& slice, const CostFigures& all);

// Per-rank memory and the costs summarized as JSON (for `--format json`'s extra section):
// params, FLOPs per micro-batch, per-slice times in ms, memory parts per rank in bytes.
nlohmann::json cost_summary(const ModelConfig& cfg, const Schedule& s, const SimResult* r = nullptr);

}  // namespace ppsim
