// Memory per rank: parameters, gradients, optimizer states, activations.
//
// Activations follow Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
// Transformer Models", Table 2): a GPT layer with a GELU MLP of 4h, dropout and a materialized
// softmax stores s*b*h*(34 + 5*a*s/h) bytes at tp = 1; selective recompute drops the 5as/h term,
// which is Megatron's theoretical-memory figure s*b*h*(18 + 4*ffn/h). We count the same
// tensors per op, so other shapes follow (tests/cost/memory_test.cc checks both published
// forms):
//   GQA: Q is stored as 2*a*d bytes per token, K and V as 2*g*d each (g kv heads);
//   SwiGLU: gate, up and their product (6*f bytes per token, GELU 4*f);
//   flash attention: no s x s tensors, the fp32 log-sum-exp instead (4*a per token);
//   MoE: router probabilities (fp32, 4E), and per routed copy its input, the expert's
//   activation-function tensors and its output (kept for the gate-weight gradient):
//   k*(2h + 6fe + 2h); shared experts 6fe each, their input being the router's;
//   tp > 1 divides everything by t (sequence parallel).
#pragma once
#include <vector>

#include "cost/config.h"
#include "cost/layer_split.h"

namespace ppsim {

struct ParamCount {
  double dense = 0;   // replicated over data parallel, split over tp
  double expert = 0;  // routed experts: split over ep and tp
  double total() const { return dense + expert; }
};

// Whole-model counts (not sharded).
ParamCount layer_params(const ModelSpec& m, int layer);
double embedding_params(const ModelSpec& m);
double head_params(const ModelSpec& m);  // vocab projection + final norm
// Everything, the embedding once when tied.
double model_params(const ModelSpec& m);

// Bytes one micro-batch leaves on one rank (tp shard) until its backward, per layer, with
// the config's recompute applied ("full": the layer's input only).
double layer_activation_bytes(const ModelConfigData& c, int layer);
// The same with no recompute: what a layer holds while it runs (the full-recompute working set).
double layer_activation_bytes_stored(const ModelConfigData& c, int layer);
double embedding_activation_bytes(const ModelConfigData& c);  // ids (8 bytes per token), dropout mask
double head_activation_bytes(const ModelConfigData& c);       // 4sbh + 4sbV (fp32 logits)
double slice_activation_bytes(const ModelConfigData& c, const SliceLayout& s);

struct RankMemory {
  double weights = 0;
  double grads = 0;
  double optimizer = 0;
  double activations = 0;
  double total() const { return weights + grads + optimizer + activations; }
};

// Per rank r: the slices of every stage it holds (both pipes of DualPipe/Chimera, both arms of
// a V: this is the schedule's parameter copies), and peak_activations[r] chunks of one
// micro-batch, each sized as the rank's largest slice.
std::vector<RankMemory> rank_memory(const ModelConfigData& c, const std::vector<int>& stage_rank,
                                    const std::vector<int>& stage_slice, const std::vector<SliceLayout>& slices,
                                    const std::vector<int>& peak_activations);

}  // namespace ppsim
