// Memory per rank: parameters, gradients, optimizer states, activations, communication
// buffers and the backward's recompute workspace, from a stated tensor list.
//
// Activations are a list of tensors per layer (layer_tensors), each with its elements per token,
// the bytes it is cached in, and the recompute op classes that drop it. At tp = 1, bf16, no
// recompute, they sum to Korthikanti et al. 2022 (Table 2) for a GPT layer with a GELU MLP of
// 4h, dropout and a materialized softmax: s*b*h*(34 + 5*a*s/h) bytes; dropping the attention
// core (selective) leaves Megatron's theoretical-memory figure s*b*h*(18 + 4*ffn/h).
// Per token (2 = bf16 bytes; "gemm-in" tensors are cached as precision.gemm_input_cache):
//   attention, GQA: norm input 2h; QKV input h gemm-in [norm]; Q 2ad, K 2gd, V 2gd (kept for the
//     attention backward); attention output a*d as attention_out_cache; flash attention: fp32
//     log-sum-exp 4a, else the softmax output 2as [+ mask as + dropped output 2as] [attn_core];
//     dropout mask h (1 byte).
//   attention, MLA: norm input 2h; down-projection input h gemm-in [norm]; q latent 2qr and its
//     norm output qr gemm-in [norm]; kv latent 2kvr and its norm output kvr gemm-in [norm]; the
//     rope key 2dr; Q 2a(dn+dr), K 2a(dn+dr), V 2a*dv [mla_up_proj]; output, LSE, mask as GQA.
//   dense MLP: norm input 2h; fc1 input h gemm-in [norm]; GELU input 2f and output f gemm-in
//     [act_fn]; SwiGLU gate 2f, up 2f and product f gemm-in [act_fn]; dropout mask h.
//   MoE MLP: norm input 2h; norm output 2h (bf16: the router's GEMM stays bf16) [norm]; router
//     probabilities 4E (fp32); per routed copy (top_k * capacity_factor per token): dispatched
//     input h gemm-in, the activation function's inputs as expert_act_cache (SwiGLU 2fe, GELU fe)
//     and its output fe gemm-in [act_fn], the expert output 2h (keep_expert_output; else the
//     routing weight, applied to the activation output inside the expert, 4 bytes); per shared
//     expert the same activation-function tensors (its input is the norm output); mask h.
// [x] = dropped by recompute op class x. Full recompute keeps the layer input 2h only.
// tp > 1 divides everything by t (sequence parallel). Without sequence parallelism
// (parallel.sequence_parallel false) the hidden-sized tensors (norm inputs and outputs, dropout
// masks, the full recompute's layer input, MoE's per-copy h) are whole on every TP rank:
// layer_tensors states them t times, so that a GPT layer keeps Korthikanti et al.'s
// s*b*h*(10 + 24/t + 5*a*s/(h*t)) against s*b*h*(34/t + 5*a*s/(h*t)) with it.
// tests/cost/memory_test.cc derives a GPT and a Llama layer by hand for every setting.
#pragma once
#include <string>
#include <vector>

#include "core/schedule.h"
#include "cost/config.h"
#include "cost/layer_split.h"
#include "sim/engine.h"
#include "sim/physical.h"

namespace ppsim {

struct ParamCount {
  double dense = 0;   // replicated over data parallel, split over tp
  double expert = 0;  // routed experts: split over ep and tp
  double total() const { return dense + expert; }
};

// One layer's parameters by part (whole model, not sharded); layer_params sums them.
struct LayerParamParts {
  double attention = 0;       // projections (MLA: its low-rank paths and their norms)
  double norms = 0;           // the pre-attention and pre-MLP norms
  double dense_mlp = 0;
  double router = 0;
  double shared_experts = 0;
  double routed_experts = 0;  // all routed experts (one of them: routed_experts / experts)
  double dense() const { return attention + norms + dense_mlp + router + shared_experts; }
};
LayerParamParts layer_param_parts(const ModelSpec& m, int layer);
double final_norm_params(const ModelSpec& m);
// An MTP module's own parts beside its layer: the 2h x h projection and 3 norms.
double mtp_projection_params(const ModelSpec& m);

// Whole-model counts (not sharded).
ParamCount layer_params(const ModelSpec& m, int layer);
double embedding_params(const ModelSpec& m);
double head_params(const ModelSpec& m);  // vocab projection + final norm
// One multi-token-prediction module: a layer like the last one, a 2h x h projection, 3 norms
// (the embedding and head are shared with the main model).
ParamCount mtp_module_params(const ModelSpec& m);
// Everything, the embedding once when tied, MTP modules not included (DeepSeek's 671B).
double model_params(const ModelSpec& m);

// One tensor a layer's forward keeps for its backward, per token at tp = 1.
struct ActTensor {
  const char* name = "";     // e.g. "attn.q", "moe.routed.gate"
  double elems = 0;          // per token
  double bytes_per_elem = 2;
  unsigned dropped_by = 0;   // RecomputeOp bits: recomputing any of them drops this tensor
  bool w_reads = false;      // a GEMM's input: the weight-grad pass (W) reads it
  double bytes() const { return elems * bytes_per_elem; }
};
std::vector<ActTensor> layer_tensors(const ModelConfigData& c, int layer);
// Bytes per token kept when the op classes `ops` are recomputed.
double kept_per_token(const std::vector<ActTensor>& t, unsigned ops);

// What a layer holds between its input-grads (I) and its weight-grads (W) when the backward is
// split (Zero Bubble's M_W), per token at tp = 1: the GEMMs' inputs (w_reads; recomputed ones
// were rebuilt by I and are kept for W) and the GEMMs' output-grads in bf16: attention GQA: QKV
// out (a + 2g)d, projection out h; MLA: down-projection out qr + kvr + dr, q up a(dn + dr), kv up
// a(dn + dv), projection out h; dense MLP: fc1 out 2f (SwiGLU) or f, fc2 out h; MoE: router out E
// (bf16), per routed copy and per shared expert up out 2fe (or fe) and down out h; the others as
// precision.output_grad_cache. A GPT layer: 32h bytes (the paper's 32sbh).
double layer_wgrad_per_token(const ModelConfigData& c, int layer);
// The same for a slice (the embedding, head and MTP module are not split: as their activations).
double slice_wgrad_bytes(const ModelConfigData& c, const SliceLayout& s);
// Per slice, slice_wgrad_bytes over slice_activation_bytes, clamped to [0, 1] (1 for a slice
// that keeps nothing): the Zero Bubble paper's M_W / M_B, SliceCosts::w_hold. One pass over the
// layer kinds for all slices.
std::vector<double> slice_w_hold(const ModelConfigData& c, const std::vector<SliceLayout>& slices);

// Bytes one micro-batch leaves on one rank (tp shard) until its backward, per layer, with the
// config's recompute applied (recompute: full = the layer's input only, whatever
// recompute_layers says: slice_activation_bytes applies that).
double layer_activation_bytes(const ModelConfigData& c, int layer);
// The same with no recompute: what a layer holds while its backward runs after a full recompute.
double layer_activation_bytes_stored(const ModelConfigData& c, int layer);
double embedding_activation_bytes(const ModelConfigData& c);  // ids (8 bytes per token), dropout mask
double head_activation_bytes(const ModelConfigData& c);       // 4sbh + 4sbV (fp32 logits)
// One MTP module: its layer (as the config recomputes it), norm inputs 2*2h, projection input
// 2*2h, and a head's 4h + 4V.
double mtp_activation_bytes(const ModelConfigData& c);
double slice_activation_bytes(const ModelConfigData& c, const SliceLayout& s);
// The backward's transient: the largest layer of the slice's recomputed tensors (all of its
// tensors for a fully recomputed layer), live while that layer's backward runs.
double slice_recompute_workspace(const ModelConfigData& c, const SliceLayout& s);

struct RankMemory {
  double weights = 0;
  double grads = 0;
  double optimizer = 0;      // moments + master weights on the device (0 when on the host)
  double ema = 0;            // EMA on the device
  double activations = 0;
  double comm_buffers = 0;   // MoE all-to-all receive buffers
  double workspace = 0;      // the backward's recompute transient
  double host_optimizer = 0; // on the host: 0 GPU bytes, named in the breakdown
  double host_ema = 0;
  double total() const { return weights + grads + optimizer + ema + activations + comm_buffers + workspace; }
};

// Per rank r: the slices of every stage it holds (both pipes of DualPipe/Chimera, both arms of
// a V: this is the schedule's parameter copies), and peak_activations[r] chunks of one
// micro-batch, each sized as the rank's largest slice, plus the workspace of the rank's slices.
// Comm buffers are for one all-to-all set (no schedule here). predict_rank_memory is exact.
std::vector<RankMemory> rank_memory(const ModelConfigData& c, const std::vector<int>& stage_rank,
                                    const std::vector<int>& stage_slice, const std::vector<SliceLayout>& slices,
                                    const std::vector<int>& peak_activations);

// A rank's predicted peak device memory and where it happens.
struct RankPeak {
  RankMemory parts;      // at the peak
  int action = -1;       // index in the rank's action list of the action running at the peak
  std::string op;        // that action in PyTorch's notation, e.g. "(0F12;31B3)OVERLAP_F_B"
  Time time = -1;        // its start in ns, when the simulation recorded a timeline; else -1
  int chunks = 0;        // micro-batch chunks alive then
};

// The per-rank peak for a config and a schedule: weights, gradients, optimizer states, EMA
// (sharded by ZeRO, EP carved out of DP for the routed experts), the activations of the chunks
// alive (each sized by its own slice), the recompute workspace while a backward runs, and the
// all-to-all buffers (two sets on ranks that run F&B pairs). Activations: a chunk's forward bytes
// from its F's start to its full B's end, or, with the backward split, to its I's end, where they
// become the chunk's weight-grad state (slice_wgrad_bytes) until its W ends; while an I runs, the
// larger of the two is counted (the state builds up layer by layer as the forward's is freed).
// The engine counts chunks with the same rule (+1 at F, -1 at W or full B). A rank runs its
// actions in order, so the bytes alive at each action do not depend on timing: `sim` (optional)
// only dates the peak, from its timeline when recorded.
std::vector<RankPeak> predict_rank_memory(const ModelConfigData& c, const Schedule& s, const SimResult* sim = nullptr);

// Bytes alive on each rank over time (one sample per change), from a recorded timeline:
// activations + workspace while a backward runs, on top of the rank's fixed parts. For the
// SVG/trace memory track.
std::vector<std::vector<MemorySample>> memory_curve(const ModelConfigData& c, const Schedule& s, const Timeline& t);

}  // namespace ppsim
