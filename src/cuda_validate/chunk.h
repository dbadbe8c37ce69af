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
// Expert parallelism (shape.ep > 1): the chunk holds experts_local() experts, and dispatch and
// combine (forward and backward) are our all-to-all (ops/a2a.h) between the EP group's chunks,
// each running the same schedule on its own micro-batches with the same ids. Their receive
// buffers are allocated per (micro-batch id < ep_microbatches, layer) when the chunk is built, so
// that peers can be given their addresses before anything runs (connect_ep); an exchange's end
// spins on the GPU until every peer's begin has run, so the group's chunks must run on streams
// that can run at the same time (one stream each, or one GPU each), and one thread driving
// several of them enqueues each sub-op for all before the next sub-op of any (a host call that
// synchronises, such as a first allocation, between an end and the peer's begin would wait for
// ever). A receive buffer is written once per (micro-batch, layer) and iteration: iterations
// must not overlap. The receive buffers (4 x E*C rows per micro-batch and layer) are not part of
// the micro-batch sets that activation_bytes_peak() counts.
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
#include "cuda_validate/ops/a2a.h"
#include "cuda_validate/ops/attention.h"
#include "cuda_validate/ops/gemm.h"
#include "launch/ep_sync.h"

namespace ppsim::gpu {

struct MoeRouting;  // ops/moe.h

// The host side of an EP group's exchanges (launch/ep_sync.h): LocalEpGroupSync in one process,
// SharedEpGroupSync across the processes of a host; the chunk holds the interface.
using launch::EpGroupSync;

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
  // The backward of mb, split (backward_input now, backward_weight later: the output-grads that W
  // reads are kept per micro-batch from I to W) or fused (a B that is not split: layer by layer,
  // each layer's W right after its input-grads, through one layer's gradient buffers that the
  // chunk keeps; what a framework's backward holds). backward_input and backward begin theirs;
  // a caller driving the sub-ops says which with begin_backward (default: split).
  void backward_input(int mb, cudaStream_t s);
  void backward_weight(int mb, cudaStream_t s);  // accumulates into the fp32 weight-grads
  void backward(int mb, cudaStream_t s);         // fused: I then W, per layer
  void begin_backward(int mb, bool fused);
  // After mb's (split) input-grad pass: the forward tensors that only it read go back to the pool
  // once the work enqueued so far on `s` is done, as a framework frees them when I ends.
  void input_grad_done(int mb, cudaStream_t s);
  // In a replay: each layer's forward tensors go back to the pool as soon as that layer's
  // input-grads are enqueued, as autograd frees them (off: kept to input_grad_done or release, so
  // that the profiler and tests can repeat a backward).
  void give_back_during_backward(bool on) { give_back_early_ = on; }
  // Returns all of mb's buffers to the pools once the work enqueued so far on `s` is done.
  void release(int mb, cudaStream_t s);
  // From now on a new micro-batch takes a released set (waiting for it if need be) rather than
  // allocating another while one exists: the replay calls it after its warm-up iterations.
  void stop_growing() { grow_ = false; }
  // From now on every set belongs to one (micro-batch, layer) slot: given back, it waits there for
  // the same slot's next use instead of going to a pool (more memory: a set per micro-batch). Then
  // a micro-batch's buffers are the same from one iteration to the next, so an action captured
  // into a CUDA graph once can be launched again as it is (validate --launch graphs).
  void pin_sets() { pin_ = true; }
  // With pinned sets: what decides the addresses mb's ops use besides the slot (its keep set, and
  // the input and output-grad bound elsewhere), hashed; 0 when mb holds nothing. Equal values: an
  // op of mb captured before reads and writes the same buffers now.
  std::uint64_t buffer_signature(int mb) const;
  // The host's share of an op whose kernels ran as a captured graph, relaunched without calling
  // the op: the sets it takes and gives back, in its order (so that the memory counts stay those
  // of the op run: a forward's sets; per layer down, a split backward's grad set taken and the
  // forward set given back), each give-back after the work enqueued so far on `s`.
  void account_relaunched(OpKind kind, int mb, cudaStream_t s);

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

  // Expert parallelism (shape.ep > 1). This chunk's receive buffers, to hand to its peers
  // (directly in one process with peer access, or as CUDA IPC handles across processes), then
  // every EP rank's buffers (by rank, this one's included) as this chunk's device addresses them.
  // They lie in one allocation (ep_slab(): one IPC handle for all), buffer i of a chunk of shape
  // `sh` at A2aSlab::view_at(base, ep_slab_layout(sh), i) in any mapping of it.
  std::vector<A2aRecvBuffer> ep_receive_buffers() const;
  const A2aSlab* ep_slab() const { return ep_slab_.get(); }
  static ep::EpSlabLayout ep_slab_layout(const ChunkShape& sh);
  static std::size_t ep_buffer_count(const ChunkShape& sh);  // 4 per micro-batch id and layer
  void connect_ep(const std::vector<std::vector<A2aRecvBuffer>>& by_rank);
  // The group's host handshake (null: none): after an exchange's begin (ours) or before its
  // grouped send/recv (nccl), this chunk's thread waits until every shard has reached it.
  void set_ep_sync(std::shared_ptr<EpGroupSync> sync) { ep_sync_ = std::move(sync); }
  // a2a = nccl: the EP group's communicator, in which this chunk is rank ep_rank (not owned).
  void set_ep_comm(ncclComm_t comm) { ep_comm_ = comm; }
  // One process: connects every chunk of the group (by ep_rank) to all the others' buffers;
  // the caller has enabled peer access between their GPUs.
  // With `host_handshake` (a thread per chunk, as the replay runs them), the group's exchanges
  // also meet on the host (a LocalEpGroupSync); a single thread driving every chunk of the group
  // must not ask for it (a chunk would wait for a peer's begin its own thread has yet to enqueue).
  static std::shared_ptr<EpGroupSync> connect_ep_group(const std::vector<Chunk*>& group,
                                                       bool host_handshake = false);
  // 0 when every exchange so far completed; else 1000 + the EP rank whose rows a wait gave up on
  // (A2aCall::timeout_ns): the outputs since are not valid. Synchronises with the device.
  unsigned ep_status() const;
  // Since the last reset_ep_status: how long this chunk's exchange ends waited for their peers'
  // rows (block 0 of each, GPU clock), in ns. Synchronises with the device.
  unsigned long long ep_wait_ns() const;
  // Clears the status (in stream order on `s`): what ep_status() says after is about what follows.
  void reset_ep_status(cudaStream_t s);
  // How long an exchange's wait spins before it gives up (0: A2aCall's default, 20 s). The replay
  // shortens it in its warm-up, where a peer's first cuBLAS/cuDNN call or allocation can
  // synchronise its device and hold back the begin the wait needs.
  void set_ep_timeout_ns(unsigned long long ns) { ep_timeout_ns_ = ns; }
  // When on, every exchange (an all-to-all's begin through its end) is bracketed by two CUDA
  // events on its stream, kept in order until clear_exchanges(): the replay's measured exposed
  // communication. The events are reused from one clear to the next.
  struct ExchangeEvents {
    cudaEvent_t start = nullptr, end = nullptr;
    cudaStream_t stream = nullptr;
  };
  void record_exchanges(bool on) { record_exchanges_ = on; }
  std::size_t exchanges_recorded() const { return ex_next_; }
  const ExchangeEvents& exchange(std::size_t i) const { return ex_log_.at(i); }
  void clear_exchanges() { ex_next_ = 0; }

  // For tests and the profiler.
  const bf16* weight(Param p, int layer) const;
  const float* weight_grad(Param p, int layer) const;
  std::int64_t param_count(Param p) const;
  void zero_weight_grads(cudaStream_t s);
  // MoE: expert chosen by assignment t*top_k + j of `layer` in mb's last forward (copied to host).
  std::vector<int> routing(int mb, int layer);
  // MoE: assignments over capacity in mb's last forward, summed over layers (copied to host).
  std::int64_t dropped_assignments(int mb);
  // Memory. A micro-batch's buffers come in three sets, by lifetime (as a framework's autograd
  // frees them): from its forward to its release, the forward tensors W reads (the GEMMs' inputs)
  // and the stage's boundary tensors; from its forward to the end of its input-grad pass, the
  // rest of the forward; from its input-grad pass to W (split backward only), the output-grads W
  // reads. Besides, the chunk keeps one layer's backward scratch and fused-backward grads.
  std::size_t weight_bytes() const;
  std::size_t weight_grad_bytes() const;
  // The most bytes of micro-batch sets in use at once (taken to given back, in the order the
  // host enqueues, which is the schedule's: what a stream-ordered allocator would hold).
  std::size_t activation_bytes_peak() const { return counter_->peak; }
  // Every set allocated (in use or pooled): more than the peak, since the host runs ahead of the
  // GPU and takes a new set while a given-back one is still busy.
  std::size_t activation_bytes_allocated() const { return allocated_bytes_; }
  std::size_t microbatch_bytes() const { return microbatch_bytes_; }  // one micro-batch after its forward
  std::size_t workspace_bytes() const;  // the backward scratch and fused-backward grads (0 before one)
  // The chunks of one rank (driven by one thread, in schedule order, never two backwards at once)
  // count their sets in use together, so that the peak is the rank's, and share one backward
  // workspace where their layers have the same shape, as a framework's allocator reuses it.
  void share_with(Chunk& other);

 private:
  struct KeepLayer;
  struct GradLayer;
  struct KeepSet;
  struct FwdSet;
  struct GradSet;
  struct Workspace;
  struct Acts;
  struct Weights;
  struct Grads {  // the output-grads of a layer's backward (mb's GradSet, or the fused workspace)
    bf16 *dqkv, *dx1, *dgu, *dx, *dzp, *dlogits;
  };
  Acts& acts(int mb);
  KeepLayer& keep(int mb, int layer);
  FwdSet& fwd(int mb, int layer);
  Grads grads(int mb, int layer);
  const bf16* layer_input(int mb, int layer);        // layer 0: the chunk's input
  bf16* layer_output(int mb, int layer);             // the last layer: the chunk's output
  const bf16* layer_output_grad(int mb, int layer);  // the last layer: grad_output
  bf16* boundary(int mb, DeviceBuffer<bf16> KeepSet::*which);
  void layer_input_grads_done(int mb, int layer, cudaStream_t s);
  Workspace& workspace(bool fused);  // fused: with a fused backward's grads
  MoeRouting routing_of(FwdSet& F) const;
  std::unique_ptr<KeepSet> make_keep() const;
  std::unique_ptr<FwdSet> make_fwd(bool last) const;
  std::unique_ptr<GradSet> make_grad(bool first) const;
  void size_grads(GradLayer& L, bool with_dx) const;
  using Slot = std::pair<int, int>;  // (micro-batch, layer) of a pinned set (pin_sets)
  template <class Set>
  using Parked = std::map<Slot, std::unique_ptr<Set>>;
  template <class Set>
  Parked<Set>& parked();
  template <class Set, class Make>
  std::unique_ptr<Set> take(Slot slot, std::vector<std::unique_ptr<Set>>& pool, Make make);
  template <class Set>
  void give(std::vector<std::unique_ptr<Set>>& pool, std::unique_ptr<Set> set, cudaStream_t s, Slot slot);
  bool room_for(std::size_t bytes) const;

  ChunkShape shape_;
  AttentionShape attn_shape_;
  std::int64_t capacity_ = 0;
  Gemm gemm_;
  std::unique_ptr<Attention> attn_;
  std::string attn_note_;
  std::vector<std::unique_ptr<Weights>> weights_;  // per layer
  std::map<int, std::unique_ptr<Acts>> live_;
  std::vector<std::unique_ptr<KeepSet>> keep_pool_;  // given back, oldest first
  std::vector<std::unique_ptr<FwdSet>> fwd_pool_, fwd_last_pool_;     // the last layer's has no x2
  std::vector<std::unique_ptr<GradSet>> grad_pool_, grad_first_pool_;  // layer 0's has no dx
  std::shared_ptr<Workspace> ws_;
  bool ws_shared_ = false;        // ws_ belongs to the chunk it was shared from
  bool give_back_early_ = false;  // give_back_during_backward
  bool grow_ = true;  // may allocate a set while given-back ones are busy
  bool pin_ = false;  // pin_sets
  Parked<KeepSet> parked_keep_;
  Parked<FwdSet> parked_fwd_;
  Parked<GradSet> parked_grad_;
  struct LiveBytes {
    std::size_t live = 0, peak = 0;
  };
  std::shared_ptr<LiveBytes> counter_ = std::make_shared<LiveBytes>();
  std::size_t allocated_bytes_ = 0, microbatch_bytes_ = 0;
  std::size_t workspace_bytes_ = 0;  // this chunk's share (0 when another chunk allocated it)

  // EP receive buffers: dispatch forward (expert side), combine forward (source side), the
  // combine's gradient (expert side), the dispatch's gradient (source side).
  enum EpKind { kEpXp = 0, kEpZp, kEpDzp, kEpDxp, kEpKinds };
  bool ep() const { return shape_.ep > 1; }
  std::size_t ep_index(EpKind k, int mb, int layer) const;
  A2aRecvBuffer ep_mine(EpKind k, int mb, int layer) const;
  A2aPeerBuffers ep_peers(EpKind k, int mb, int layer) const;
  A2aCall ep_call(EpKind k, int mb, int layer);  // the next epoch of that buffer
  void ep_handshake(EpKind k, int mb, int layer, const A2aCall& c);
  // One exchange on buffer k: begin(call), the handshake, end(call), bracketed by the exchange
  // events (ours: the handshake between begin and end; nccl: before the grouped send/recv).
  template <class Begin, class End>
  void ep_exchange(EpKind k, int mb, int layer, cudaStream_t s, Begin&& begin, End&& end);
  std::shared_ptr<EpGroupSync> ep_sync_;
  ncclComm_t ep_comm_ = nullptr;
  DeviceBuffer<bf16> ep_staging_;                          // nccl: the gathering dispatch permutes here first
  std::unique_ptr<A2aSlab> ep_slab_;                       // every receive buffer, by ep_index
  std::vector<std::vector<A2aRecvBuffer>> ep_peer_views_;  // [rank][ep_index]
  std::vector<unsigned long long> ep_epochs_;              // by ep_index: exchanges so far
  DeviceBuffer<A2aStats> ep_stats_;                        // every exchange's blocks and timeout code
  unsigned long long ep_timeout_ns_ = 0;
  // Exchange timing (record_exchanges): event pairs, the first ex_next_ of them used this run.
  void exchange_started(cudaStream_t s);
  void exchange_ended(cudaStream_t s);
  bool record_exchanges_ = false;
  std::vector<ExchangeEvents> ex_log_;
  std::size_t ex_next_ = 0;
};

}  // namespace ppsim::gpu
