// Chunk: wiring of the ops into a transformer layer stack (see chunk.h for the layer and the
// sub-op split). GEMM shapes, with T = tokens, h = hidden, W = (heads + 2 kv_heads) head_dim,
// A = heads head_dim, f = ffn_hidden, E = experts, C = capacity, fe = expert_ffn_hidden:
//   QKV  [T,h] -> [T,W]      Out  [T,A] -> [T,h] (+ residual)   Router [T,h] -> [T,E]
//   Up   [T,h] -> [T,2f]     Down [T,f] -> [T,h]                experts: E batches of [C,h] -> [C,2fe] -> [C,h]
#include "cuda_validate/chunk.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "cuda_validate/graph_launch.h"
#include "cuda_validate/ops/elementwise.h"
#include "cuda_validate/ops/moe.h"
#include "cuda_validate/ops/norm_act.h"

namespace ppsim::gpu {

struct Chunk::Weights {
  DeviceBuffer<bf16> w[kNumParams];
  DeviceBuffer<float> g[kNumParams];
};

// A micro-batch's buffers, by lifetime (chunk.h, "Memory"). Each kind of set is pooled.
struct Chunk::KeepLayer {
  DeviceBuffer<bf16> xn1, o, xn2, a;  // inputs of QKV, Out, Up (and Router), Down
  DeviceBuffer<bf16> xp;              // MoE, one GPU: the experts' input (EP: a receive buffer)
};

struct Chunk::KeepSet {  // first use -> release (after W, or B): the forward tensors W reads
  // The stage's boundary tensors: input and grad_output (allocated on first use: a transport's
  // receive buffer, bound in place, needs neither), output (the last layer's), grad_in (layer 0's
  // input-grad): each a message to or from a neighbour.
  DeviceBuffer<bf16> input, grad_output, output, grad_in;
  std::vector<KeepLayer> layers;
  Event free_after{false};  // recorded when given back; the next owner waits for it
  std::size_t bytes = 0;
};

struct Chunk::FwdSet {  // one layer, F -> the end of that layer's input-grads: only they read it
  DeviceBuffer<bf16> qkv, x1, gu, x2;  // x2: not the last layer's (KeepSet::output)
  DeviceBuffer<float> rstd1, lse, rstd2;
  DeviceBuffer<bf16> logits, zp, ze;  // MoE (ze: EP, the experts' output before it travels back)
  DeviceBuffer<float> probs, topk_w;
  DeviceBuffer<int> topk_idx, slot_of, slot_token, counts;
  Event free_after{false};
  std::size_t bytes = 0;
};

struct Chunk::GradLayer {
  DeviceBuffer<bf16> dqkv, dx1, dgu, dx, dzp, dlogits;  // dx: not layer 0's (KeepSet::grad_in)
};

struct Chunk::GradSet {  // one layer, split backward: its input-grads -> W, the output-grads W reads
  GradLayer g;
  Event free_after{false};
  std::size_t bytes = 0;
};

// The chunk's, one layer at a time: the input-grad pass's scratch, and (allocated on the first
// fused backward) a fused backward's output-grads (W runs right after I, layer by layer; dx lives
// two layers: by parity).
struct Chunk::Workspace {
  DeviceBuffer<bf16> da, dout, dxn1, dxn2, dxp, dzp_src;
  DeviceBuffer<float> dw;
  GradLayer fused;
  DeviceBuffer<bf16> fused_dx[2];
  std::size_t bytes = 0;
};

struct Chunk::Acts {
  std::unique_ptr<KeepSet> keep;
  std::vector<std::unique_ptr<FwdSet>> fwd;   // by layer; null once given back
  std::vector<std::unique_ptr<GradSet>> grad;  // by layer; taken by a split backward's input-grads
  bool fused = false;                          // the backward in progress is fused
  // Bound elsewhere (a transport's receive buffer), until release: read there instead.
  const bf16* input_at = nullptr;
  const bf16* grad_output_at = nullptr;
};

namespace {

std::int64_t rows_of(const ChunkShape& s) { return s.tokens(); }

ep::EpGeometry geometry_of(const ChunkShape& s, std::int64_t capacity) {
  return ep::EpGeometry{s.ep, s.experts, s.top_k, s.tokens(), capacity, s.hidden};
}

}  // namespace

Chunk::Chunk(const ChunkShape& shape, std::uint64_t seed) : shape_(shape) {
  if (auto p = shape.problem(); !p.empty()) throw InputError("chunk shape: " + p, {}, kExitInput);
  attn_shape_ = AttentionShape{shape.micro_batch, shape.seq_len, shape.heads, shape.kv_heads, shape.head_dim};
  capacity_ = shape.expert_capacity();
  attn_ = make_attention(attn_shape_, gemm_, &attn_note_);
  const std::int64_t h = shape.hidden;
  for (int l = 0; l < shape.layers; ++l) {
    auto w = std::make_unique<Weights>();
    for (int p = 0; p < kNumParams; ++p) {
      const std::int64_t n = param_count(static_cast<Param>(p));
      if (n == 0) continue;
      w->w[p].resize(static_cast<std::size_t>(n));
      w->g[p].resize(static_cast<std::size_t>(n));
      w->g[p].zero();
      const std::uint64_t s = seed * 1000003ull + static_cast<std::uint64_t>(l) * 16 + static_cast<std::uint64_t>(p);
      const auto param = static_cast<Param>(p);
      if (param == Param::Norm1 || param == Param::Norm2) {
        fill_uniform(w->w[p].get(), n, 0.1f, s, nullptr, 1.0f);
      } else {
        std::int64_t fan_in = h;
        if (param == Param::Out) fan_in = static_cast<std::int64_t>(shape.heads) * shape.head_dim;
        if (param == Param::Down) fan_in = shape.is_moe() ? shape.expert_ffn_hidden : shape.ffn_hidden;
        const float scale = (param == Param::Router ? 4.0f : 1.0f) / std::sqrt(static_cast<float>(fan_in));
        // EP: this rank's experts are the slice [ep_rank * n, (ep_rank + 1) * n) of the tensor one
        // chunk with every expert draws, so an EP group computes what one GPU does.
        const bool expert_param = shape.ep > 1 && (param == Param::Up || param == Param::Down);
        fill_uniform(w->w[p].get(), n, scale, s, nullptr, 0.f, expert_param ? shape.ep_rank * n : 0);
      }
    }
    weights_.push_back(std::move(w));
  }
  if (ep()) {
    const std::size_t n = ep_buffer_count(shape);
    ep_slab_ = std::make_unique<A2aSlab>(geometry_of(shape, capacity_), n);
    ep_epochs_.assign(n, 0);
    ep_stats_.resize(1);
    ep_stats_.zero();
    if (shape.a2a == A2aBackend::nccl) {  // [E*C, hidden]: the gathering dispatch's rows, permuted, before they travel
      ep_staging_.resize(static_cast<std::size_t>(capacity_) * static_cast<std::size_t>(shape.experts) *
                         static_cast<std::size_t>(shape.hidden));
      ep_staging_.zero();
    }
  }
  PPSIM_CUDA_CHECK(cudaDeviceSynchronize());
}

Chunk::~Chunk() {
  for (const ExchangeEvents& e : ex_log_) {
    (void)cudaEventDestroy(e.start);
    (void)cudaEventDestroy(e.end);
  }
}

void Chunk::exchange_started(cudaStream_t s) {
  if (!record_exchanges_) return;
  if (ex_next_ == ex_log_.size()) {
    ExchangeEvents e;
    PPSIM_CUDA_CHECK(cudaEventCreate(&e.start));
    PPSIM_CUDA_CHECK(cudaEventCreate(&e.end));
    ex_log_.push_back(e);
  }
  ExchangeEvents& e = ex_log_[ex_next_];
  e.stream = s;
  PPSIM_CUDA_CHECK(cudaEventRecord(e.start, s));
}

void Chunk::exchange_ended(cudaStream_t s) {
  if (!record_exchanges_) return;
  PPSIM_CUDA_CHECK(cudaEventRecord(ex_log_.at(ex_next_).end, s));
  ++ex_next_;
}

std::int64_t Chunk::param_count(Param p) const {
  const std::int64_t h = shape_.hidden, E = shape_.experts;
  switch (p) {
    case Param::Norm1:
    case Param::Norm2: return h;
    case Param::Qkv: return static_cast<std::int64_t>(shape_.qkv_width()) * h;
    case Param::Out: return h * shape_.heads * shape_.head_dim;
    case Param::Router: return shape_.is_moe() ? E * h : 0;
    case Param::Up: return shape_.is_moe() ? shape_.experts_local() * 2LL * shape_.expert_ffn_hidden * h : 2LL * shape_.ffn_hidden * h;
    case Param::Down: return shape_.is_moe() ? shape_.experts_local() * h * shape_.expert_ffn_hidden : h * shape_.ffn_hidden;
  }
  return 0;
}

const bf16* Chunk::weight(Param p, int layer) const { return weights_.at(static_cast<std::size_t>(layer))->w[static_cast<int>(p)].get(); }
const float* Chunk::weight_grad(Param p, int layer) const {
  return weights_.at(static_cast<std::size_t>(layer))->g[static_cast<int>(p)].get();
}

void Chunk::zero_weight_grads(cudaStream_t s) {
  for (auto& w : weights_)
    for (auto& g : w->g) g.zero(s);
}

// ---- buffers -------------------------------------------------------------------------------------

namespace {

template <class... B>
std::size_t bytes_of(const B&... b) {
  return (b.bytes() + ...);
}
template <class... B>
void poison_all(B&... b) {
  (b.poison(), ...);
}

}  // namespace

std::unique_ptr<Chunk::KeepSet> Chunk::make_keep() const {
  auto k = std::make_unique<KeepSet>();
  const std::size_t T = static_cast<std::size_t>(rows_of(shape_)), h = static_cast<std::size_t>(shape_.hidden);
  const std::size_t A = static_cast<std::size_t>(shape_.heads) * static_cast<std::size_t>(shape_.head_dim);
  for (auto* b : {&k->output, &k->grad_in}) b->resize(T * h);
  poison_all(k->output, k->grad_in);
  k->bytes = bytes_of(k->output, k->grad_in);
  k->layers.resize(static_cast<std::size_t>(shape_.layers));
  for (auto& L : k->layers) {
    L.xn1.resize(T * h);
    L.o.resize(T * A);
    L.xn2.resize(T * h);
    if (shape_.is_moe()) {
      const std::size_t R = static_cast<std::size_t>(capacity_) * static_cast<std::size_t>(shape_.experts);
      L.a.resize(R * static_cast<std::size_t>(shape_.expert_ffn_hidden));
      if (!ep()) L.xp.resize(R * h);
    } else {
      L.a.resize(T * static_cast<std::size_t>(shape_.ffn_hidden));
    }
    poison_all(L.xn1, L.o, L.xn2, L.a, L.xp);
    k->bytes += bytes_of(L.xn1, L.o, L.xn2, L.a, L.xp);
  }
  return k;
}

std::unique_ptr<Chunk::FwdSet> Chunk::make_fwd(bool last) const {
  auto f = std::make_unique<FwdSet>();
  FwdSet& L = *f;
  const std::size_t T = static_cast<std::size_t>(rows_of(shape_)), h = static_cast<std::size_t>(shape_.hidden);
  L.qkv.resize(T * static_cast<std::size_t>(shape_.qkv_width()));
  L.x1.resize(T * h);
  if (!last) L.x2.resize(T * h);
  L.rstd1.resize(T);
  L.rstd2.resize(T);
  L.lse.resize(static_cast<std::size_t>(shape_.micro_batch) * shape_.heads * shape_.seq_len);
  if (shape_.is_moe()) {
    const std::size_t E = static_cast<std::size_t>(shape_.experts), k = static_cast<std::size_t>(shape_.top_k);
    const std::size_t R = static_cast<std::size_t>(capacity_) * E, fe = static_cast<std::size_t>(shape_.expert_ffn_hidden);
    L.logits.resize(T * E);
    L.probs.resize(T * E);
    L.topk_idx.resize(T * k);
    L.topk_w.resize(T * k);
    L.slot_of.resize(T * k);
    L.slot_token.resize(R);
    L.counts.resize(E);
    L.gu.resize(R * 2 * fe);
    (ep() ? L.ze : L.zp).resize(R * h);  // E*C rows
  } else {
    L.gu.resize(T * 2 * static_cast<std::size_t>(shape_.ffn_hidden));
  }
  poison_all(L.qkv, L.x1, L.gu, L.x2, L.rstd1, L.lse, L.rstd2, L.logits, L.zp, L.ze, L.probs, L.topk_w);
  L.bytes = bytes_of(L.qkv, L.x1, L.gu, L.x2, L.rstd1, L.lse, L.rstd2, L.logits, L.zp, L.ze, L.probs, L.topk_w,
                     L.topk_idx, L.slot_of, L.slot_token, L.counts);
  return f;
}

void Chunk::size_grads(GradLayer& L, bool with_dx) const {
  const std::size_t T = static_cast<std::size_t>(rows_of(shape_)), h = static_cast<std::size_t>(shape_.hidden);
  L.dqkv.resize(T * static_cast<std::size_t>(shape_.qkv_width()));
  L.dx1.resize(T * h);
  if (with_dx) L.dx.resize(T * h);
  if (shape_.is_moe()) {
    const std::size_t E = static_cast<std::size_t>(shape_.experts);
    const std::size_t R = static_cast<std::size_t>(capacity_) * E, fe = static_cast<std::size_t>(shape_.expert_ffn_hidden);
    L.dgu.resize(R * 2 * fe);
    L.dlogits.resize(T * E);
    if (!ep()) L.dzp.resize(R * h);  // EP: a receive buffer
  } else {
    L.dgu.resize(T * 2 * static_cast<std::size_t>(shape_.ffn_hidden));
  }
  poison_all(L.dqkv, L.dx1, L.dgu, L.dx, L.dzp, L.dlogits);
}

std::unique_ptr<Chunk::GradSet> Chunk::make_grad(bool first) const {
  auto g = std::make_unique<GradSet>();
  size_grads(g->g, !first);
  g->bytes = bytes_of(g->g.dqkv, g->g.dx1, g->g.dgu, g->g.dx, g->g.dzp, g->g.dlogits);
  return g;
}

Chunk::Workspace& Chunk::workspace(bool fused) {
  if (!ws_) {
    auto w = std::make_shared<Workspace>();
    const std::size_t T = static_cast<std::size_t>(rows_of(shape_)), h = static_cast<std::size_t>(shape_.hidden);
    const std::size_t A = static_cast<std::size_t>(shape_.heads) * static_cast<std::size_t>(shape_.head_dim);
    w->dout.resize(T * A);
    w->dxn1.resize(T * h);
    w->dxn2.resize(T * h);
    if (shape_.is_moe()) {
      const std::size_t E = static_cast<std::size_t>(shape_.experts), k = static_cast<std::size_t>(shape_.top_k);
      const std::size_t R = static_cast<std::size_t>(capacity_) * E, fe = static_cast<std::size_t>(shape_.expert_ffn_hidden);
      w->da.resize(R * fe);
      w->dxp.resize(R * h);
      if (ep()) w->dzp_src.resize(R * h);
      w->dw.resize(T * k);
    } else {
      w->da.resize(T * static_cast<std::size_t>(shape_.ffn_hidden));
    }
    poison_all(w->da, w->dout, w->dxn1, w->dxn2, w->dxp, w->dzp_src, w->dw);
    w->bytes = bytes_of(w->da, w->dout, w->dxn1, w->dxn2, w->dxp, w->dzp_src, w->dw);
    // The poison goes out on the legacy stream, which the compute streams (non-blocking) do not
    // wait for: it must land before the buffers are used, or it could overwrite real data.
    PPSIM_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    ws_ = std::move(w);
  }
  if (fused && ws_->fused_dx[0].bytes() == 0) {
    Workspace& w = *ws_;
    const std::size_t T = static_cast<std::size_t>(rows_of(shape_)), h = static_cast<std::size_t>(shape_.hidden);
    size_grads(w.fused, false);
    for (auto& d : w.fused_dx) {
      d.resize(T * h);
      d.poison();
    }
    w.bytes += bytes_of(w.fused.dqkv, w.fused.dx1, w.fused.dgu, w.fused.dzp, w.fused.dlogits, w.fused_dx[0],
                        w.fused_dx[1]);
    PPSIM_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }
  return *ws_;
}

void Chunk::share_with(Chunk& other) {
  counter_ = other.counter_;
  const ChunkShape &a = shape_, &b = other.shape_;
  const bool same_layer = a.hidden == b.hidden && a.heads == b.heads && a.kv_heads == b.kv_heads &&
                          a.head_dim == b.head_dim && a.seq_len == b.seq_len && a.micro_batch == b.micro_batch &&
                          a.ffn_hidden == b.ffn_hidden && a.is_moe() == b.is_moe() && a.experts == b.experts &&
                          a.top_k == b.top_k && a.expert_ffn_hidden == b.expert_ffn_hidden && a.ep == b.ep &&
                          capacity_ == other.capacity_;
  if (same_layer && !ws_) {
    other.workspace(false);
    ws_ = other.ws_;
    ws_shared_ = true;
  }
}

// A released set whose previous owner's work (any stream) is done; else a new set while memory
// lasts and growing is allowed; else the oldest released set, once its owner is done. Waiting here
// stalls this rank's thread (and the messages it posts) until its GPU catches up, and the GPU then
// idles while the thread enqueues the next op; allocating a set (cudaMalloc, the poison) stalls it
// too, for milliseconds: so the pools grow during warm-up, then stop.
template <>
Chunk::Parked<Chunk::KeepSet>& Chunk::parked<Chunk::KeepSet>() {
  return parked_keep_;
}
template <>
Chunk::Parked<Chunk::FwdSet>& Chunk::parked<Chunk::FwdSet>() {
  return parked_fwd_;
}
template <>
Chunk::Parked<Chunk::GradSet>& Chunk::parked<Chunk::GradSet>() {
  return parked_grad_;
}

template <class Set, class Make>
std::unique_ptr<Set> Chunk::take(Slot slot, std::vector<std::unique_ptr<Set>>& pool, Make make) {
  std::unique_ptr<Set> a;
  if (pin_) {  // the slot's own set (its last use is done: one use per slot and iteration)
    auto it = parked<Set>().find(slot);
    if (it != parked<Set>().end()) {
      a = std::move(it->second);
      parked<Set>().erase(it);
    }
  }
  for (auto p = pool.begin(); p != pool.end() && !a; ++p) {
    if ((*p)->free_after.done()) {
      a = std::move(*p);
      pool.erase(p);
      break;
    }
  }
  if (!a && !pool.empty() && !pin_ && (!grow_ || !room_for(pool.front()->bytes))) {
    a = std::move(pool.front());
    pool.erase(pool.begin());
    a->free_after.sync();
  }
  if (!a) {
    a = make();
    // The poison went out on the legacy stream (see workspace()).
    PPSIM_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    allocated_bytes_ += a->bytes;
  }
  counter_->live += a->bytes;
  counter_->peak = std::max(counter_->peak, counter_->live);
  return a;
}

template <class Set>
void Chunk::give(std::vector<std::unique_ptr<Set>>& pool, std::unique_ptr<Set> set, cudaStream_t s, Slot slot) {
  if (!set) return;
  record_in_capture(set->free_after.get(), s);  // inside a captured action too (graph_launch.h)
  counter_->live -= set->bytes;
  if (pin_)
    parked<Set>()[slot] = std::move(set);
  else
    pool.push_back(std::move(set));
}

Chunk::Acts& Chunk::acts(int mb) {
  auto it = live_.find(mb);
  if (it != live_.end()) return *it->second;
  auto a = std::make_unique<Acts>();
  a->keep = take(Slot{mb, 0}, keep_pool_, [this] { return make_keep(); });
  const int L = shape_.layers;
  std::size_t bytes = a->keep->bytes;
  for (int l = 0; l < L; ++l) {
    const bool last = l + 1 == L;
    a->fwd.push_back(take(Slot{mb, l}, last ? fwd_last_pool_ : fwd_pool_, [this, last] { return make_fwd(last); }));
    bytes += a->fwd.back()->bytes;
  }
  a->grad.resize(static_cast<std::size_t>(L));
  microbatch_bytes_ = bytes;
  auto& ref = *a;
  live_.emplace(mb, std::move(a));
  return ref;
}

Chunk::KeepLayer& Chunk::keep(int mb, int layer) { return acts(mb).keep->layers.at(static_cast<std::size_t>(layer)); }

Chunk::FwdSet& Chunk::fwd(int mb, int layer) {
  Acts& A = acts(mb);
  FwdSet* f = A.fwd.at(static_cast<std::size_t>(layer)).get();
  PPSIM_CHECK(f != nullptr,
              "chunk: micro-batch {}'s forward tensors of layer {} were given back after its input-grads, and "
              "something still reads them",
              mb, layer);
  return *f;
}

Chunk::Grads Chunk::grads(int mb, int layer) {
  Acts& A = acts(mb);
  const auto l = static_cast<std::size_t>(layer);
  Grads g;
  if (A.fused) {
    Workspace& w = workspace(true);
    g = Grads{w.fused.dqkv.get(), w.fused.dx1.get(), w.fused.dgu.get(), w.fused_dx[l % 2].get(), w.fused.dzp.get(),
              w.fused.dlogits.get()};
  } else {
    auto& set = A.grad.at(l);
    if (!set)
      set = take(Slot{mb, layer}, layer == 0 ? grad_first_pool_ : grad_pool_,
                 [this, layer] { return make_grad(layer == 0); });
    GradLayer& L = set->g;
    g = Grads{L.dqkv.get(), L.dx1.get(), L.dgu.get(), L.dx.get(), L.dzp.get(), L.dlogits.get()};
  }
  if (layer == 0) g.dx = A.keep->grad_in.get();
  return g;
}

const bf16* Chunk::layer_input(int mb, int layer) {
  if (layer > 0) return fwd(mb, layer - 1).x2.get();
  Acts& A = acts(mb);
  return A.input_at ? A.input_at : A.keep->input.get();
}

bf16* Chunk::layer_output(int mb, int layer) {
  return layer + 1 == shape_.layers ? acts(mb).keep->output.get() : fwd(mb, layer).x2.get();
}

const bf16* Chunk::layer_output_grad(int mb, int layer) {
  if (layer + 1 < shape_.layers) return grads(mb, layer + 1).dx;
  Acts& A = acts(mb);
  return A.grad_output_at ? A.grad_output_at : A.keep->grad_output.get();
}

// A boundary buffer of mb's keep set, allocated on first use (and then kept with the set).
bf16* Chunk::boundary(int mb, DeviceBuffer<bf16> KeepSet::*which) {
  KeepSet& k = *acts(mb).keep;
  DeviceBuffer<bf16>& b = k.*which;
  if (b.bytes() == 0) {
    b.resize(static_cast<std::size_t>(rows_of(shape_) * shape_.hidden));
    b.poison();
    PPSIM_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    k.bytes += b.bytes();
    allocated_bytes_ += b.bytes();
    counter_->live += b.bytes();
    counter_->peak = std::max(counter_->peak, counter_->live);
  }
  return b.get();
}

// After layer `layer`'s input-grads (in a replay, which gives memory back as it goes): that
// layer's forward set, which nothing reads any more (the next layer down reads its own set and
// this layer's input, which is the layer below's x2).
void Chunk::layer_input_grads_done(int mb, int layer, cudaStream_t s) {
  if (!give_back_early_) return;
  Acts& A = acts(mb);
  give(layer + 1 == shape_.layers ? fwd_last_pool_ : fwd_pool_, std::move(A.fwd.at(static_cast<std::size_t>(layer))), s,
       Slot{mb, layer});
}

// Another set of `bytes` fits with a quarter of the GPU's memory (and at least 1 GiB) left over.
bool Chunk::room_for(std::size_t bytes) const {
  std::size_t free = 0, total = 0;
  PPSIM_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  const std::size_t reserve = std::max<std::size_t>(total / 4, std::size_t{1} << 30);
  return free > bytes + reserve;
}

std::size_t Chunk::weight_bytes() const {
  std::size_t n = 0;
  for (const auto& W : weights_)
    for (const auto& b : W->w) n += b.bytes();
  return n;
}
std::size_t Chunk::weight_grad_bytes() const {
  std::size_t n = 0;
  for (const auto& W : weights_)
    for (const auto& b : W->g) n += b.bytes();
  return n;
}
std::size_t Chunk::workspace_bytes() const { return ws_ && !ws_shared_ ? ws_->bytes : 0; }

bf16* Chunk::input(int mb) { return boundary(mb, &KeepSet::input); }
void Chunk::bind_input(int mb, const bf16* at) { acts(mb).input_at = at; }
void Chunk::bind_grad_output(int mb, const bf16* at) { acts(mb).grad_output_at = at; }
const bf16* Chunk::output(int mb) { return acts(mb).keep->output.get(); }
bf16* Chunk::grad_output(int mb) { return boundary(mb, &KeepSet::grad_output); }
const bf16* Chunk::grad_input(int mb) { return acts(mb).keep->grad_in.get(); }

void Chunk::fill_input(int mb, std::uint64_t seed, cudaStream_t s) {
  fill_uniform(input(mb), rows_of(shape_) * shape_.hidden, 1.0f, seed, s);
}
void Chunk::fill_grad_output(int mb, std::uint64_t seed, cudaStream_t s) {
  fill_uniform(grad_output(mb), rows_of(shape_) * shape_.hidden, 1.0f, seed, s);
}

std::uint64_t Chunk::buffer_signature(int mb) const {
  const auto it = live_.find(mb);
  if (it == live_.end()) return 0;
  const Acts& A = *it->second;
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the three addresses
  for (const void* p : {static_cast<const void*>(A.keep.get()), static_cast<const void*>(A.input_at),
                        static_cast<const void*>(A.grad_output_at)})
    h = (h ^ static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p))) * 1099511628211ull;
  return h;
}

void Chunk::account_relaunched(OpKind kind, int mb, cudaStream_t s) {
  if (kind == OpKind::F) {
    (void)acts(mb);
    return;
  }
  if (kind == OpKind::W) return;
  begin_backward(mb, kind == OpKind::B);
  for (int l = shape_.layers - 1; l >= 0; --l) {
    (void)grads(mb, l);
    layer_input_grads_done(mb, l, s);
  }
}

void Chunk::input_grad_done(int mb, cudaStream_t s) {
  auto it = live_.find(mb);
  if (it == live_.end()) return;
  const int L = shape_.layers;
  for (int l = 0; l < L; ++l)
    give(l + 1 == L ? fwd_last_pool_ : fwd_pool_, std::move(it->second->fwd[static_cast<std::size_t>(l)]), s,
         Slot{mb, l});
}

void Chunk::release(int mb, cudaStream_t s) {
  auto it = live_.find(mb);
  if (it == live_.end()) return;
  Acts& A = *it->second;
  const int L = shape_.layers;
  give(keep_pool_, std::move(A.keep), s, Slot{mb, 0});
  for (int l = 0; l < L; ++l) {
    give(l + 1 == L ? fwd_last_pool_ : fwd_pool_, std::move(A.fwd[static_cast<std::size_t>(l)]), s, Slot{mb, l});
    give(l == 0 ? grad_first_pool_ : grad_pool_, std::move(A.grad[static_cast<std::size_t>(l)]), s, Slot{mb, l});
  }
  live_.erase(it);
}

// ---- forward ---------------------------------------------------------------------------------

MoeRouting Chunk::routing_of(FwdSet& F) const {
  return MoeRouting{F.probs.get(),  F.topk_idx.get(), F.topk_w.get(), F.slot_of.get(),  F.slot_token.get(),
                    F.counts.get(), rows_of(shape_),  shape_.experts, shape_.top_k,      capacity_};
}

void Chunk::attn_forward(int mb, int layer, cudaStream_t s) {
  KeepLayer& K = keep(mb, layer);
  FwdSet& F = fwd(mb, layer);
  Weights& W = *weights_.at(static_cast<std::size_t>(layer));
  const bf16* x = layer_input(mb, layer);
  const std::int64_t T = rows_of(shape_), h = shape_.hidden;
  const std::int64_t Aw = static_cast<std::int64_t>(shape_.heads) * shape_.head_dim;
  rmsnorm_fwd(K.xn1.get(), F.rstd1.get(), x, W.w[static_cast<int>(Param::Norm1)].get(), T, shape_.hidden, s);
  gemm_.linear_fwd(F.qkv.get(), K.xn1.get(), W.w[static_cast<int>(Param::Qkv)].get(), T, h, shape_.qkv_width(), s);
  attn_->forward(K.o.get(), F.lse.get(), F.qkv.get(), s);
  gemm_.linear_fwd(F.x1.get(), K.o.get(), W.w[static_cast<int>(Param::Out)].get(), T, Aw, h, s, 1, x);
  if (shape_.is_moe()) {
    rmsnorm_fwd(K.xn2.get(), F.rstd2.get(), F.x1.get(), W.w[static_cast<int>(Param::Norm2)].get(), T, shape_.hidden, s);
    gemm_.linear_fwd(F.logits.get(), K.xn2.get(), W.w[static_cast<int>(Param::Router)].get(), T, h, shape_.experts, s);
    moe_route(routing_of(F), F.logits.get(), s);
  }
}

void Chunk::dispatch_forward(int mb, int layer, cudaStream_t s) {
  if (!shape_.is_moe()) return;
  KeepLayer& K = keep(mb, layer);
  FwdSet& F = fwd(mb, layer);
  if (ep()) {
    ep_exchange(
        kEpXp, mb, layer, s,
        [&](const A2aCall& c) {
          a2a_dispatch_begin(c, ep_peers(kEpXp, mb, layer), K.xn2.get(), true, F.slot_token.get(), F.counts.get(),
                             ep_staging_.get(), s);
        },
        [&](const A2aCall& c) { a2a_dispatch_end(c, ep_mine(kEpXp, mb, layer), s); });
    return;
  }
  moe_permute(K.xp.get(), K.xn2.get(), routing_of(F), shape_.hidden, s);
}

void Chunk::mlp_forward(int mb, int layer, cudaStream_t s) {
  KeepLayer& K = keep(mb, layer);
  FwdSet& F = fwd(mb, layer);
  Weights& W = *weights_.at(static_cast<std::size_t>(layer));
  const std::int64_t h = shape_.hidden;
  if (shape_.is_moe()) {
    // Per local expert: C rows (one GPU) or one C-row block from each EP rank (ep * C rows).
    const std::int64_t C = capacity_ * shape_.ep, fe = shape_.expert_ffn_hidden;
    const int E = shape_.experts_local();
    const bf16* xp = ep() ? ep_mine(kEpXp, mb, layer).rows : K.xp.get();
    bf16* zp = ep() ? F.ze.get() : F.zp.get();
    gemm_.linear_fwd(F.gu.get(), xp, W.w[static_cast<int>(Param::Up)].get(), C, h, 2 * fe, s, E);
    swiglu_fwd(K.a.get(), F.gu.get(), C * E, static_cast<int>(fe), s);
    gemm_.linear_fwd(zp, K.a.get(), W.w[static_cast<int>(Param::Down)].get(), C, fe, h, s, E);
  } else {
    const std::int64_t T = rows_of(shape_), f = shape_.ffn_hidden;
    rmsnorm_fwd(K.xn2.get(), F.rstd2.get(), F.x1.get(), W.w[static_cast<int>(Param::Norm2)].get(), T, shape_.hidden, s);
    gemm_.linear_fwd(F.gu.get(), K.xn2.get(), W.w[static_cast<int>(Param::Up)].get(), T, h, 2 * f, s);
    swiglu_fwd(K.a.get(), F.gu.get(), T, static_cast<int>(f), s);
    gemm_.linear_fwd(layer_output(mb, layer), K.a.get(), W.w[static_cast<int>(Param::Down)].get(), T, f, h, s, 1, F.x1.get());
  }
}

void Chunk::combine_forward(int mb, int layer, cudaStream_t s) {
  if (!shape_.is_moe()) return;
  FwdSet& F = fwd(mb, layer);
  if (ep()) {
    ep_exchange(
        kEpZp, mb, layer, s,
        [&](const A2aCall& c) {
          a2a_combine_begin(c, ep_peers(kEpZp, mb, layer), F.ze.get(), ep_mine(kEpXp, mb, layer).counts, s);
        },
        [&](const A2aCall& c) {
          a2a_combine_end(c, ep_mine(kEpZp, mb, layer), layer_output(mb, layer), F.x1.get(), F.slot_of.get(),
                          F.topk_w.get(), s);
        });
    return;
  }
  moe_combine(layer_output(mb, layer), F.x1.get(), F.zp.get(), routing_of(F), shape_.hidden, s);
}

void Chunk::forward(int mb, cudaStream_t s) {
  for (int l = 0; l < shape_.layers; ++l) {
    attn_forward(mb, l, s);
    dispatch_forward(mb, l, s);
    mlp_forward(mb, l, s);
    combine_forward(mb, l, s);
  }
}

// ---- backward: input-grad ----------------------------------------------------------------------
// Norm weight-grads (a [hidden] reduction each) are taken here, while the norm's input and the
// grad of its output exist, as frameworks do; W holds only the GEMMs' weight-grads.

void Chunk::begin_backward(int mb, bool fused) { acts(mb).fused = fused; }

void Chunk::combine_backward(int mb, int layer, cudaStream_t s) {
  if (!shape_.is_moe()) return;
  FwdSet& F = fwd(mb, layer);
  Workspace& S = workspace(false);
  const Grads G = grads(mb, layer);
  const bf16* dx2 = layer_output_grad(mb, layer);
  if (ep()) {
    // w * dout in the source's [E][C] layout (and dw, from the expert outputs that came back),
    // then to the experts' ranks.
    moe_combine_bwd(S.dzp_src.get(), S.dw.get(), dx2, ep_mine(kEpZp, mb, layer).rows, routing_of(F), shape_.hidden, s);
    ep_exchange(
        kEpDzp, mb, layer, s,
        [&](const A2aCall& c) {
          a2a_dispatch_begin(c, ep_peers(kEpDzp, mb, layer), S.dzp_src.get(), false, F.slot_token.get(),
                             F.counts.get(), nullptr, s);
        },
        [&](const A2aCall& c) { a2a_dispatch_end(c, ep_mine(kEpDzp, mb, layer), s); });
    return;
  }
  moe_combine_bwd(G.dzp, S.dw.get(), dx2, F.zp.get(), routing_of(F), shape_.hidden, s);
}

void Chunk::mlp_backward_input(int mb, int layer, cudaStream_t s) {
  FwdSet& F = fwd(mb, layer);
  Workspace& S = workspace(false);
  const Grads G = grads(mb, layer);
  Weights& W = *weights_.at(static_cast<std::size_t>(layer));
  const std::int64_t h = shape_.hidden;
  const bf16* dx2 = layer_output_grad(mb, layer);
  if (shape_.is_moe()) {
    const std::int64_t C = capacity_ * shape_.ep, fe = shape_.expert_ffn_hidden;
    const int E = shape_.experts_local();
    const bf16* dzp = ep() ? ep_mine(kEpDzp, mb, layer).rows : G.dzp;
    gemm_.linear_bwd_input(S.da.get(), dzp, W.w[static_cast<int>(Param::Down)].get(), C, fe, h, s, 0.f, E);
    swiglu_bwd(G.dgu, S.da.get(), F.gu.get(), C * E, static_cast<int>(fe), s);
    gemm_.linear_bwd_input(S.dxp.get(), G.dgu, W.w[static_cast<int>(Param::Up)].get(), C, h, 2 * fe, s, 0.f, E);
  } else {
    const std::int64_t T = rows_of(shape_), f = shape_.ffn_hidden;
    gemm_.linear_bwd_input(S.da.get(), dx2, W.w[static_cast<int>(Param::Down)].get(), T, f, h, s);
    swiglu_bwd(G.dgu, S.da.get(), F.gu.get(), T, static_cast<int>(f), s);
    gemm_.linear_bwd_input(S.dxn2.get(), G.dgu, W.w[static_cast<int>(Param::Up)].get(), T, h, 2 * f, s);
    rmsnorm_bwd_input(G.dx1, dx2, S.dxn2.get(), F.x1.get(), W.w[static_cast<int>(Param::Norm2)].get(),
                      F.rstd2.get(), T, shape_.hidden, s);
    rmsnorm_bwd_gamma(W.g[static_cast<int>(Param::Norm2)].get(), S.dxn2.get(), F.x1.get(), F.rstd2.get(), T,
                      shape_.hidden, s);
  }
}

void Chunk::dispatch_backward(int mb, int layer, cudaStream_t s) {
  if (!shape_.is_moe()) return;
  FwdSet& F = fwd(mb, layer);
  Workspace& S = workspace(false);
  if (ep()) {
    // The experts' input-grads go back to their sources and are summed into each token.
    ep_exchange(
        kEpDxp, mb, layer, s,
        [&](const A2aCall& c) {
          a2a_combine_begin(c, ep_peers(kEpDxp, mb, layer), S.dxp.get(), ep_mine(kEpXp, mb, layer).counts, s);
        },
        [&](const A2aCall& c) {
          a2a_combine_end(c, ep_mine(kEpDxp, mb, layer), S.dxn2.get(), nullptr, F.slot_of.get(), nullptr, s);
        });
    return;
  }
  moe_permute_bwd(S.dxn2.get(), S.dxp.get(), routing_of(F), shape_.hidden, s);
}

void Chunk::attn_backward_input(int mb, int layer, cudaStream_t s) {
  KeepLayer& K = keep(mb, layer);
  FwdSet& F = fwd(mb, layer);
  Workspace& S = workspace(false);
  const Grads G = grads(mb, layer);
  Weights& W = *weights_.at(static_cast<std::size_t>(layer));
  const std::int64_t T = rows_of(shape_), h = shape_.hidden;
  const std::int64_t Aw = static_cast<std::int64_t>(shape_.heads) * shape_.head_dim;
  const bf16* x = layer_input(mb, layer);
  if (shape_.is_moe()) {
    const bf16* dx2 = layer_output_grad(mb, layer);
    moe_router_bwd(G.dlogits, S.dw.get(), routing_of(F), s);
    gemm_.linear_bwd_input(S.dxn2.get(), G.dlogits, W.w[static_cast<int>(Param::Router)].get(), T, h,
                           shape_.experts, s, 1.f);
    rmsnorm_bwd_input(G.dx1, dx2, S.dxn2.get(), F.x1.get(), W.w[static_cast<int>(Param::Norm2)].get(),
                      F.rstd2.get(), T, shape_.hidden, s);
    rmsnorm_bwd_gamma(W.g[static_cast<int>(Param::Norm2)].get(), S.dxn2.get(), F.x1.get(), F.rstd2.get(), T,
                      shape_.hidden, s);
  }
  gemm_.linear_bwd_input(S.dout.get(), G.dx1, W.w[static_cast<int>(Param::Out)].get(), T, Aw, h, s);
  attn_->backward(G.dqkv, S.dout.get(), F.qkv.get(), K.o.get(), F.lse.get(), s);
  gemm_.linear_bwd_input(S.dxn1.get(), G.dqkv, W.w[static_cast<int>(Param::Qkv)].get(), T, h, shape_.qkv_width(), s);
  rmsnorm_bwd_input(G.dx, G.dx1, S.dxn1.get(), x, W.w[static_cast<int>(Param::Norm1)].get(), F.rstd1.get(), T,
                    shape_.hidden, s);
  rmsnorm_bwd_gamma(W.g[static_cast<int>(Param::Norm1)].get(), S.dxn1.get(), x, F.rstd1.get(), T, shape_.hidden, s);
  layer_input_grads_done(mb, layer, s);
}

void Chunk::backward_input(int mb, cudaStream_t s) {
  begin_backward(mb, false);
  for (int l = shape_.layers - 1; l >= 0; --l) {
    combine_backward(mb, l, s);
    mlp_backward_input(mb, l, s);
    dispatch_backward(mb, l, s);
    attn_backward_input(mb, l, s);
  }
}

// ---- backward: weight-grad ---------------------------------------------------------------------

void Chunk::attn_backward_weight(int mb, int layer, cudaStream_t s) {
  KeepLayer& K = keep(mb, layer);
  const Grads G = grads(mb, layer);
  Weights& W = *weights_.at(static_cast<std::size_t>(layer));
  const std::int64_t T = rows_of(shape_), h = shape_.hidden;
  const std::int64_t Aw = static_cast<std::int64_t>(shape_.heads) * shape_.head_dim;
  auto g = [&](Param p) { return W.g[static_cast<int>(p)].get(); };
  gemm_.linear_bwd_weight(g(Param::Qkv), DType::F32, G.dqkv, K.xn1.get(), T, h, shape_.qkv_width(), s);
  gemm_.linear_bwd_weight(g(Param::Out), DType::F32, G.dx1, K.o.get(), T, Aw, h, s);
  if (shape_.is_moe())
    gemm_.linear_bwd_weight(g(Param::Router), DType::F32, G.dlogits, K.xn2.get(), T, h, shape_.experts, s);
}

void Chunk::mlp_backward_weight(int mb, int layer, cudaStream_t s) {
  KeepLayer& K = keep(mb, layer);
  const Grads G = grads(mb, layer);
  Weights& W = *weights_.at(static_cast<std::size_t>(layer));
  const std::int64_t h = shape_.hidden;
  auto g = [&](Param p) { return W.g[static_cast<int>(p)].get(); };
  if (shape_.is_moe()) {
    const std::int64_t C = capacity_ * shape_.ep, fe = shape_.expert_ffn_hidden;
    const int E = shape_.experts_local();
    const bf16* xp = ep() ? ep_mine(kEpXp, mb, layer).rows : K.xp.get();
    const bf16* dzp = ep() ? ep_mine(kEpDzp, mb, layer).rows : G.dzp;
    gemm_.linear_bwd_weight(g(Param::Up), DType::F32, G.dgu, xp, C, h, 2 * fe, s, 1.f, E);
    gemm_.linear_bwd_weight(g(Param::Down), DType::F32, dzp, K.a.get(), C, fe, h, s, 1.f, E);
  } else {
    const std::int64_t T = rows_of(shape_), f = shape_.ffn_hidden;
    gemm_.linear_bwd_weight(g(Param::Up), DType::F32, G.dgu, K.xn2.get(), T, h, 2 * f, s);
    gemm_.linear_bwd_weight(g(Param::Down), DType::F32, layer_output_grad(mb, layer), K.a.get(), T, f, h, s);
  }
}

void Chunk::backward_weight(int mb, cudaStream_t s) {
  for (int l = 0; l < shape_.layers; ++l) {
    attn_backward_weight(mb, l, s);
    mlp_backward_weight(mb, l, s);
  }
}

void Chunk::backward(int mb, cudaStream_t s) {
  begin_backward(mb, true);
  for (int l = shape_.layers - 1; l >= 0; --l) {
    combine_backward(mb, l, s);
    mlp_backward_input(mb, l, s);
    dispatch_backward(mb, l, s);
    attn_backward_input(mb, l, s);
    attn_backward_weight(mb, l, s);
    mlp_backward_weight(mb, l, s);
  }
}

// ---- inspection ----------------------------------------------------------------------------------

std::vector<int> Chunk::routing(int mb, int layer) {
  if (!shape_.is_moe()) return {};
  PPSIM_CUDA_CHECK(cudaDeviceSynchronize());
  return fwd(mb, layer).topk_idx.to_host();
}

std::int64_t Chunk::dropped_assignments(int mb) {
  if (!shape_.is_moe()) return 0;
  PPSIM_CUDA_CHECK(cudaDeviceSynchronize());
  std::int64_t dropped = 0;
  for (int l = 0; l < shape_.layers; ++l)
    for (int c : fwd(mb, l).counts.to_host()) dropped += c > capacity_ ? c - capacity_ : 0;
  return dropped;
}

// ---- expert parallelism -----------------------------------------------------------------------

std::size_t Chunk::ep_index(EpKind k, int mb, int layer) const {
  if (mb < 0 || mb >= shape_.ep_microbatches)
    throw InputError(fmt::format("expert parallelism: micro-batch {} has no receive buffers (ep_microbatches = {})",
                                 mb, shape_.ep_microbatches),
                     {}, kExitInput);
  return (static_cast<std::size_t>(k) * static_cast<std::size_t>(shape_.ep_microbatches) +
          static_cast<std::size_t>(mb)) * static_cast<std::size_t>(shape_.layers) + static_cast<std::size_t>(layer);
}

A2aRecvBuffer Chunk::ep_mine(EpKind k, int mb, int layer) const { return ep_slab_->view(ep_index(k, mb, layer)); }

A2aPeerBuffers Chunk::ep_peers(EpKind k, int mb, int layer) const {
  PPSIM_CHECK(static_cast<int>(ep_peer_views_.size()) == shape_.ep,
              "EP chunk (rank {} of {}) used before connect_ep gave it its peers' buffers", shape_.ep_rank, shape_.ep);
  A2aPeerBuffers p;
  const std::size_t i = ep_index(k, mb, layer);
  for (int r = 0; r < shape_.ep; ++r) p.rank[r] = ep_peer_views_[static_cast<std::size_t>(r)][i];
  return p;
}

A2aCall Chunk::ep_call(EpKind k, int mb, int layer) {
  A2aCall c;
  c.backend = shape_.a2a;
  c.comm = ep_comm_;
  c.g = geometry_of(shape_, capacity_);
  c.rank = shape_.ep_rank;
  c.comm_sms = shape_.comm_sms;
  c.stats = ep_stats_.get();
  // Every rank of the group makes the same exchanges on each buffer in the same order, so
  // counting them gives senders and receiver the same epoch without talking.
  c.epoch = ++ep_epochs_.at(ep_index(k, mb, layer));
  if (ep_timeout_ns_ > 0) c.timeout_ns = ep_timeout_ns_;
  return c;
}

unsigned Chunk::ep_status() const {
  if (!ep()) return 0;
  return ep_stats_.to_host().at(0).status;
}

unsigned long long Chunk::ep_wait_ns() const {
  if (!ep()) return 0;
  return ep_stats_.to_host().at(0).wait_ns;
}

void Chunk::reset_ep_status(cudaStream_t s) {
  if (ep()) ep_stats_.zero(s);
}

std::vector<A2aRecvBuffer> Chunk::ep_receive_buffers() const {
  std::vector<A2aRecvBuffer> v;
  for (std::size_t i = 0; ep_slab_ && i < ep_slab_->buffers(); ++i) v.push_back(ep_slab_->view(i));
  return v;
}

std::size_t Chunk::ep_buffer_count(const ChunkShape& sh) {
  return static_cast<std::size_t>(kEpKinds) * static_cast<std::size_t>(std::max(0, sh.ep_microbatches)) *
         static_cast<std::size_t>(sh.layers);
}

ep::EpSlabLayout Chunk::ep_slab_layout(const ChunkShape& sh) {
  return A2aSlab::layout_for(geometry_of(sh, sh.expert_capacity()), ep_buffer_count(sh));
}

void Chunk::connect_ep(const std::vector<std::vector<A2aRecvBuffer>>& by_rank) {
  PPSIM_CHECK(ep(), "connect_ep on a chunk without expert parallelism (ep = {})", shape_.ep);
  PPSIM_CHECK(static_cast<int>(by_rank.size()) == shape_.ep, "connect_ep: {} ranks' buffers for ep = {}",
              by_rank.size(), shape_.ep);
  for (const auto& v : by_rank)
    PPSIM_CHECK(v.size() == ep_epochs_.size(), "connect_ep: a peer has {} receive buffers, this chunk {}", v.size(),
                ep_epochs_.size());
  ep_peer_views_ = by_rank;
}

void Chunk::ep_handshake(EpKind k, int mb, int layer, const A2aCall& c) {
  if (!ep_sync_) return;
  const std::size_t i = ep_index(k, mb, layer);
  ep_sync_->begun(shape_.ep_rank, i, c.epoch);
  ep_sync_->wait_all(shape_.ep_rank, i, c.epoch, 20.0);
}

// Ours: the begin's stores need no peer, the end spins for every peer's begin, so the threads meet
// in between. NCCL: the grouped send/recv is begin and wait in one kernel, so they meet before it.
template <class Begin, class End>
void Chunk::ep_exchange(EpKind k, int mb, int layer, cudaStream_t s, Begin&& begin, End&& end) {
  const A2aCall c = ep_call(k, mb, layer);
  exchange_started(s);
  if (c.backend == A2aBackend::nccl) ep_handshake(k, mb, layer, c);
  begin(c);
  if (c.backend == A2aBackend::ours) ep_handshake(k, mb, layer, c);
  end(c);
  exchange_ended(s);
}

std::shared_ptr<EpGroupSync> Chunk::connect_ep_group(const std::vector<Chunk*>& group, bool host_handshake) {
  std::vector<std::vector<A2aRecvBuffer>> all(group.size());
  for (const Chunk* c : group) {
    PPSIM_CHECK(c->shape_.ep == static_cast<int>(group.size()) && c->shape_.ep_rank >= 0 &&
                    c->shape_.ep_rank < static_cast<int>(group.size()),
                "connect_ep_group: a chunk with ep {} and ep_rank {} in a group of {}", c->shape_.ep, c->shape_.ep_rank,
                group.size());
    all[static_cast<std::size_t>(c->shape_.ep_rank)] = c->ep_receive_buffers();
  }
  for (Chunk* c : group) c->connect_ep(all);
  if (!host_handshake) return nullptr;
  auto sync = std::make_shared<launch::LocalEpGroupSync>(static_cast<int>(group.size()), group.front()->ep_epochs_.size());
  for (Chunk* c : group) c->ep_sync_ = sync;
  return sync;
}

}  // namespace ppsim::gpu
