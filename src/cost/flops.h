// FLOP, byte and communication counts of one transformer layer, the embedding and the head, for
// one micro-batch (T = micro_batch_size * seq_len tokens) on one rank.
//
// A block's work is stated for the forward pass; the backward follows from it (the rule
// derive.cc times and tests/cost/flops_test.cc checks):
//   input grad  = every GEMM again (dX = dY W^T, same FLOPs) + 2.5x the attention core
//                 (dQ, dK, dV, dP and the recomputed P: 5 matmuls for the forward's 2; its
//                 bytes twice the forward's, or core_bwd_bytes without flash attention)
//                 + 2x the elementwise bytes + the TP collectives again + the all-to-alls again
//   weight grad = every GEMM again (dW = X^T dY, same FLOPs) + wgrad_elem_bytes
// so a layer's full backward is 2x its GEMM FLOPs + 2.5x its attention core.
#pragma once
#include <vector>

#include "cost/config.h"

namespace ppsim {

inline constexpr double kAttentionBackwardFactor = 2.5;
inline constexpr double kActivationBytes = 2;  // bf16 activations and gradients between ops
// Quantizing one BF16 element to FP8 in 1x128 tiles: read 2 bytes, write 1, and a 4-byte scale per
// 128 elements (DeepSeek-V3 report 3.3.1 and 3.5.2: read from HBM, written back, read again by the GEMM).
inline constexpr double kFp8QuantBytes = 3 + 4.0 / 128;

// [m x k] x [k x n], `count` identical instances (a rank's experts). `keep_bf16`: stays in BF16
// when precision.gemm is fp8 (the router and the output head, as in DeepSeek-V3's FP8 recipe).
struct Gemm {
  const char* name = "";
  double m = 0, n = 0, k = 0;
  double count = 1;
  bool keep_bf16 = false;
  // FP8 quantization (costs.fp8_quant): the input X is the same tensor as the previous GEMM's
  // (SwiGLU's up after its gate, MLA's kv_down after q_down), so it is quantized, and transposed
  // for the weight grad, once for both; or it arrives in FP8 (the routed experts after an FP8
  // dispatch, quantized before it), so the forward quantizes nothing.
  bool input_shared = false;
  bool input_fp8 = false;
  double flops() const { return 2.0 * m * n * k * count; }
};

// How the work is shared: tensor parallel degree and expert parallel degree.
struct Shard {
  int tp = 1;
  int ep = 1;
  int cp = 1;   // context parallel: a rank computes seq_len / cp tokens of each sequence
  int etp = 0;  // ranks splitting a routed expert's width: 0 is tp (ParallelSpec::etp)
  int expert_tp() const { return etp > 0 ? etp : tp; }
};

struct BlockWork {
  std::vector<Gemm> gemms;
  double core_flops = 0;        // attention core, forward
  double core_bytes = 0;        // its HBM traffic, forward
  double core_bwd_bytes = -1;   // its HBM traffic, input grad; < 0: twice the forward's
  double core_rate = 1;  // flash attention: its rate at this shape over efficiency.attention's (cost/flash_shape.h)
  // Without flash attention (model.flash_attention false): the core as the separate kernels of
  // Megatron-LM's CoreAttention, each batched GEMM over the whole s x s scores (no causal skip),
  // forward shapes (QK^T, then PV), timed as GEMMs; core_bytes and core_bwd_bytes are then only
  // the passes over the scores between them (softmax, dropout), at elementwise efficiency.
  // Empty: the core is one kernel, core_flops and core_bytes on one roofline.
  std::vector<Gemm> core_gemms;
  double elem_bytes = 0;        // elementwise HBM traffic, forward (norms, residuals, rope, activation, loss)
  double bwd_elem_bytes = -1;   // elementwise HBM traffic, input grad; < 0: twice the forward's
  double wgrad_elem_bytes = 0;  // elementwise part of the weight grad (the embedding's scatter-add)
  double tp_comm_bytes = 0;     // TP collectives per rank, forward (the backward moves as much again)
  int tp_small_allreduces = 0;  // forward only: latency-bound all-reduces over the TP group (the loss's)
  double tp_small_allreduce_bytes = 0;  // bytes each of them moves per rank
  double cp_comm_bytes = 0;     // CP: K and V received by the all-gather, forward (backward: K, V gathered again and dK, dV reduce-scattered, twice as much)
  double dispatch_bytes = 0;    // all-to-all bytes leaving this rank, forward (MoE)
  double combine_bytes = 0;
  double dispatch_grad_bytes = 0;  // backward: the combine's gradient goes out as a dispatch
  double combine_grad_bytes = 0;   // backward: the dispatch's gradient comes back as a combine

  double gemm_flops() const;
  double forward_flops() const { return gemm_flops() + core_flops; }
  double input_grad_flops() const { return gemm_flops() + kAttentionBackwardFactor * core_flops; }
  double weight_grad_flops() const { return gemm_flops(); }
  double backward_flops() const { return input_grad_flops() + weight_grad_flops(); }
};

struct LayerWork {
  bool moe = false;
  BlockWork attention;  // norm, QKV, core, output projection, residual
  BlockWork mlp;        // norm, dense MLP or router + routed + shared experts, residual
  double forward_flops() const { return attention.forward_flops() + mlp.forward_flops(); }
  double backward_flops() const { return attention.backward_flops() + mlp.backward_flops(); }
};

LayerWork layer_work(const ModelConfigData& c, int layer, Shard shard);
BlockWork embedding_work(const ModelConfigData& c, Shard shard);
BlockWork head_work(const ModelConfigData& c, Shard shard);  // final norm, vocab GEMM, loss

// FLOPs of one micro-batch through the whole model, forward + full backward, no recompute
// ("model FLOPs" for MFU): sum over layers + head.
double model_flops_per_microbatch(const ModelConfigData& c);

// Fraction of the all-to-all bytes of an ep group that leave the node, given the group's
// placement (ep ranks at stride tp, gpus_per_node per node).
double a2a_inter_node_fraction(const ModelConfigData& c);

}  // namespace ppsim
