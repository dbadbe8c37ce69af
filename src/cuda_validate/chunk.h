// Chunk: one pipeline chunk (`layers` transformer layers) in bf16 on one GPU, owning its weights,
// fp32 weight-grads and, per micro-batch, the activations that the backward needs.
//
// A layer (pre-norm):  x1 = x + Attn(RMSNorm1(x));  x2 = x1 + Mlp(RMSNorm2(x1))
//   dense Mlp = Wd . SwiGLU(Wgu . h);  MoE Mlp = combine(experts(dispatch(h))) with top-k routing.
// Sub-ops follow ppsim's overlap model (core/timeline.h Part): per layer, attention (norm1, QKV,
// attention, output projection; for MoE also norm2 and the router) -> dispatch (MoE: permute
// tokens to experts) -> mlp (dense: norm2 + MLP; MoE: the expert GEMMs) -> combine (MoE:
// unpermute, weight, residual). The backward runs them in reverse as input-grad ops; every
// weight-grad GEMM is deferred to backward_weight (W), so F, I (backward_input) and W are
// separate stream-ordered launches, as zero-bubble schedules need.
//
// Not obvious: every call only enqueues work on the given stream (no host synchronisation), and
// a micro-batch's buffers come from a pool; release(mb, stream) returns them after the stream's
// work, and the next user of the buffers waits for that point on its own stream.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "cuda_validate/device_buffer.h"
#include "cuda_validate/gpu_api.h"
#include "cuda_validate/ops/attention.h"
#include "cuda_validate/ops/gemm.h"

namespace ppsim::gpu {

// Which weight of a layer. Shapes ([out, in] as in PyTorch, E = experts):
//   Norm1, Norm2 [hidden]; Qkv [(heads + 2 kv_heads) head_dim, hidden]; Out [hidden, heads head_dim];
//   Router [E, hidden]; Up: dense [2 ffn, hidden], MoE [E, 2 expert_ffn, hidden] (gate rows first);
//   Down: dense [hidden, ffn], MoE [E, hidden, expert_ffn].
enum class Param : std::uint8_t { Norm1, Qkv, Out, Norm2, Router, Up, Down };
inline constexpr int kNumParams = 7;

class Chunk {
 public:
  // Weights are drawn from `seed` (uniform, scaled 1/sqrt(fan_in)); weight-grads start at zero.
  explicit Chunk(const ChunkShape& shape, std::uint64_t seed = 1);
  ~Chunk();
  Chunk(const Chunk&) = delete;
  Chunk& operator=(const Chunk&) = delete;

  const ChunkShape& shape() const { return shape_; }
  const char* attention_backend() const { return attn_->name(); }
  const std::string& attention_note() const { return attn_note_; }

  // Micro-batch buffers [tokens, hidden], allocated on first use.
  bf16* input(int mb);               // set before forward(mb) (from the previous stage)
  const bf16* output(int mb);        // valid after forward(mb)
  bf16* grad_output(int mb);         // set before backward_input(mb) (from the next stage or a loss)
  const bf16* grad_input(int mb);    // valid after backward_input(mb)
  // The input (or output gradient) of mb lies at `at` instead, until release(mb): a transport's
  // receive buffer, read in place rather than copied in.
  void bind_input(int mb, const bf16* at);
  void bind_grad_output(int mb, const bf16* at);
  void fill_input(int mb, std::uint64_t seed, cudaStream_t s);
  void fill_grad_output(int mb, std::uint64_t seed, cudaStream_t s);

  void forward(int mb, cudaStream_t s);
  void backward_input(int mb, cudaStream_t s);
  void backward_weight(int mb, cudaStream_t s);  // accumulates into the fp32 weight-grads
  // Returns mb's buffers to the pool once the work enqueued so far on `s` is done.
  void release(int mb, cudaStream_t s);
  // From now on a new micro-batch takes a released set (waiting for it if need be) rather than
  // allocating another while one exists: the replay calls it after its warm-up iterations.
  void stop_growing() { grow_ = false; }

  // Sub-ops of layer `layer` (see the file comment); dispatch/combine do nothing for a dense chunk.
  void attn_forward(int mb, int layer, cudaStream_t s);
  void dispatch_forward(int mb, int layer, cudaStream_t s);
  void mlp_forward(int mb, int layer, cudaStream_t s);
  void combine_forward(int mb, int layer, cudaStream_t s);
  void combine_backward(int mb, int layer, cudaStream_t s);
  void mlp_backward_input(int mb, int layer, cudaStream_t s);
  void dispatch_backward(int mb, int layer, cudaStream_t s);
  void attn_backward_input(int mb, int layer, cudaStream_t s);
  void attn_backward_weight(int mb, int layer, cudaStream_t s);
  void mlp_backward_weight(int mb, int layer, cudaStream_t s);

  // For tests and the profiler.
  const bf16* weight(Param p, int layer) const;
  const float* weight_grad(Param p, int layer) const;
  std::int64_t param_count(Param p) const;
  void zero_weight_grads(cudaStream_t s);
  // MoE: expert chosen by assignment t*top_k + j of `layer` in mb's last forward (copied to host).
  std::vector<int> routing(int mb, int layer);
  // MoE: assignments over capacity in mb's last forward, summed over layers (copied to host).
  std::int64_t dropped_assignments(int mb);
  std::size_t activation_bytes_per_microbatch() const;
  // What this chunk holds on its GPU: parameters (bf16) and their gradients (fp32), and the
  // activation sets allocated so far (sets are kept for reuse, never freed before the chunk is:
  // after a run, their number is the most micro-batches this chunk held at once).
  std::size_t weight_bytes() const;
  std::size_t weight_grad_bytes() const;
  std::size_t activation_sets() const { return live_.size() + pool_.size(); }
  std::size_t activation_set_bytes() const { return acts_bytes_; }
  // The most sets in use at once (first use to release, in the order the host enqueues, which is
  // the schedule's): what a stream-ordered allocator would hold. activation_sets() can be more,
  // since the host runs ahead of the GPU and takes a new set while a released one is still busy.
  std::size_t activation_sets_live_peak() const { return max_live_; }

 private:
  struct LayerActs;
  struct Acts;
  struct Weights;
  Acts& acts(int mb);
  LayerActs& layer_acts(int mb, int layer);

  ChunkShape shape_;
  AttentionShape attn_shape_;
  std::int64_t capacity_ = 0;
  Gemm gemm_;
  std::unique_ptr<Attention> attn_;
  std::string attn_note_;
  std::vector<std::unique_ptr<Weights>> weights_;  // per layer
  std::map<int, std::unique_ptr<Acts>> live_;
  std::vector<std::unique_ptr<Acts>> pool_;  // released, oldest first
  std::size_t acts_bytes_ = 0;               // one set's device memory
  bool grow_ = true;                         // may allocate a set while released ones are busy
  std::size_t max_live_ = 0;
  static std::size_t acts_bytes(const Acts& a);
  bool room_for_another() const;
};

}  // namespace ppsim::gpu
