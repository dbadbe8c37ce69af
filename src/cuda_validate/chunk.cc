// Chunk: wiring of the ops into a transformer layer stack (see chunk.h for the layer and the
// sub-op split). GEMM shapes, with T = tokens, h = hidden, W = (heads + 2 kv_heads) head_dim,
// A = heads head_dim, f = ffn_hidden, E = experts, C = capacity, fe = expert_ffn_hidden:
//   QKV  [T,h] -> [T,W]      Out  [T,A] -> [T,h] (+ residual)   Router [T,h] -> [T,E]
//   Up   [T,h] -> [T,2f]     Down [T,f] -> [T,h]                experts: E batches of [C,h] -> [C,2fe] -> [C,h]
#include "cuda_validate/chunk.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "cuda_validate/ops/elementwise.h"
#include "cuda_validate/ops/moe.h"
#include "cuda_validate/ops/norm_act.h"

namespace ppsim::gpu {

struct Chunk::Weights {
  DeviceBuffer<bf16> w[kNumParams];
  DeviceBuffer<float> g[kNumParams];
};

struct Chunk::LayerActs {
  // forward
  DeviceBuffer<bf16> xn1, qkv, o, x1, xn2, gu, a, x2;
  DeviceBuffer<float> rstd1, lse, rstd2;
  // MoE forward
  DeviceBuffer<bf16> logits, xp, zp;
  DeviceBuffer<float> probs, topk_w;
  DeviceBuffer<int> topk_idx, slot_of, slot_token, counts;
  // backward (kept until W)
  DeviceBuffer<bf16> da, dgu, dxn2, dx1, dout, dqkv, dxn1, dx;
  DeviceBuffer<bf16> dzp, dxp, dlogits;
  DeviceBuffer<float> dw;
  // EP only (xp, zp and dzp are then receive buffers, Chunk::ep_bufs_): the experts' output
  // before it travels back, and w * dout before it travels to the experts.
  DeviceBuffer<bf16> ze, dzp_src;
};

struct Chunk::Acts {
  DeviceBuffer<bf16> input, grad_output;
  // Bound elsewhere (a transport's receive buffer), until release: read there instead.
  const bf16* input_at = nullptr;
  const bf16* grad_output_at = nullptr;
  const bf16* in() const { return input_at ? input_at : input.get(); }
  const bf16* dy() const { return grad_output_at ? grad_output_at : grad_output.get(); }
  std::vector<LayerActs> layers;
  Event free_after{false};  // recorded by release(); the next owner waits for it
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
    const std::size_t n = static_cast<std::size_t>(kEpKinds) * static_cast<std::size_t>(shape.ep_microbatches) *
                          static_cast<std::size_t>(shape.layers);
    for (std::size_t i = 0; i < n; ++i)
      ep_bufs_.push_back(std::make_unique<A2aBufferSet>(geometry_of(shape, capacity_)));
    ep_epochs_.assign(n, 0);
    ep_stats_.resize(1);
    ep_stats_.zero();
  }
  PPSIM_CUDA_CHECK(cudaDeviceSynchronize());
}

Chunk::~Chunk() = default;

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

std::size_t Chunk::activation_bytes_per_microbatch() const {
  const std::size_t T = static_cast<std::size_t>(rows_of(shape_)), h = static_cast<std::size_t>(shape_.hidden);
  const std::size_t W = static_cast<std::size_t>(shape_.qkv_width());
  const std::size_t A = static_cast<std::size_t>(shape_.heads) * static_cast<std::size_t>(shape_.head_dim);
  std::size_t per_layer = 2 * (T * h * 6 + T * W * 2 + T * A * 2 + T * h * 3);
  if (shape_.is_moe()) {
    const std::size_t R = static_cast<std::size_t>(capacity_) * static_cast<std::size_t>(shape_.experts);
    const std::size_t fe = static_cast<std::size_t>(shape_.expert_ffn_hidden);
    per_layer += 2 * (R * h * 4 + R * fe * 3 * 2);
  } else {
    per_layer += 2 * T * static_cast<std::size_t>(shape_.ffn_hidden) * 6;
  }
  return per_layer * static_cast<std::size_t>(shape_.layers) + 4 * T * h;
}

Chunk::Acts& Chunk::acts(int mb) {
  auto it = live_.find(mb);
  if (it != live_.end()) return *it->second;
  // A released set whose previous owner's work (any stream) is done; else a new set while memory
  // lasts and growing is allowed; else the oldest released set, once its owner is done. Waiting
  // here stalls this rank's thread (and the messages it posts) until its GPU catches up, and the
  // GPU then idles while the thread enqueues the next op; allocating a set (cudaMalloc, the
  // poison) stalls it too, for milliseconds: so the pool grows during warm-up, then stops.
  std::unique_ptr<Acts> a;
  for (auto p = pool_.begin(); p != pool_.end(); ++p) {
    if ((*p)->free_after.done()) {
      a = std::move(*p);
      pool_.erase(p);
      break;
    }
  }
  if (!a && !pool_.empty() && (!grow_ || !room_for_another())) {
    a = std::move(pool_.front());
    pool_.erase(pool_.begin());
    a->free_after.sync();
  }
  if (!a) {
    a = std::make_unique<Acts>();
    const std::size_t T = static_cast<std::size_t>(rows_of(shape_)), h = static_cast<std::size_t>(shape_.hidden);
    const std::size_t W = static_cast<std::size_t>(shape_.qkv_width());
    const std::size_t A = static_cast<std::size_t>(shape_.heads) * static_cast<std::size_t>(shape_.head_dim);
    a->input.resize(T * h);
    a->grad_output.resize(T * h);
    a->layers.resize(static_cast<std::size_t>(shape_.layers));
    for (auto& L : a->layers) {
      for (auto* b : {&L.xn1, &L.x1, &L.xn2, &L.x2, &L.dxn2, &L.dx1, &L.dxn1, &L.dx}) b->resize(T * h);
      L.qkv.resize(T * W);
      L.dqkv.resize(T * W);
      L.o.resize(T * A);
      L.dout.resize(T * A);
      L.rstd1.resize(T);
      L.rstd2.resize(T);
      L.lse.resize(static_cast<std::size_t>(shape_.micro_batch) * shape_.heads * shape_.seq_len);
      if (shape_.is_moe()) {
        const std::size_t E = static_cast<std::size_t>(shape_.experts), k = static_cast<std::size_t>(shape_.top_k);
        const std::size_t R = static_cast<std::size_t>(capacity_) * E, fe = static_cast<std::size_t>(shape_.expert_ffn_hidden);
        L.logits.resize(T * E);
        L.dlogits.resize(T * E);
        L.probs.resize(T * E);
        L.topk_idx.resize(T * k);
        L.topk_w.resize(T * k);
        L.slot_of.resize(T * k);
        L.dw.resize(T * k);
        L.slot_token.resize(R);
        L.counts.resize(E);
        if (ep()) {
          for (auto* b : {&L.ze, &L.dzp_src, &L.dxp}) b->resize(R * h);  // E*C rows on both sides
        } else {
          for (auto* b : {&L.xp, &L.zp, &L.dzp, &L.dxp}) b->resize(R * h);
        }
        L.gu.resize(R * 2 * fe);
        L.dgu.resize(R * 2 * fe);
        L.a.resize(R * fe);
        L.da.resize(R * fe);
      } else {
        const std::size_t f = static_cast<std::size_t>(shape_.ffn_hidden);
        L.gu.resize(T * 2 * f);
        L.dgu.resize(T * 2 * f);
        L.a.resize(T * f);
        L.da.resize(T * f);
      }
    }
    // Poison once: a read of anything no op wrote shows up as NaN in the outputs.
    a->input.poison();
    a->grad_output.poison();
    for (auto& L : a->layers) {
      for (auto* b : {&L.xn1, &L.qkv, &L.o, &L.x1, &L.xn2, &L.gu, &L.a, &L.x2, &L.logits, &L.xp, &L.zp, &L.da, &L.dgu,
                      &L.dxn2, &L.dx1, &L.dout, &L.dqkv, &L.dxn1, &L.dx, &L.dzp, &L.dxp, &L.dlogits, &L.ze,
                      &L.dzp_src})
        b->poison();
      for (auto* b : {&L.rstd1, &L.lse, &L.rstd2, &L.probs, &L.topk_w, &L.dw}) b->poison();
    }
    // The poison goes out on the legacy stream, which the compute streams (non-blocking) do not
    // wait for: it must land before the set is handed out, or it could overwrite real data.
    PPSIM_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    acts_bytes_ = acts_bytes(*a);
  }
  auto& ref = *a;
  live_.emplace(mb, std::move(a));
  max_live_ = std::max(max_live_, live_.size());
  return ref;
}

std::size_t Chunk::acts_bytes(const Acts& a) {
  std::size_t n = a.input.bytes() + a.grad_output.bytes();
  for (const auto& L : a.layers) {
    for (auto* b : {&L.xn1, &L.qkv, &L.o, &L.x1, &L.xn2, &L.gu, &L.a, &L.x2, &L.logits, &L.xp, &L.zp, &L.da, &L.dgu,
                    &L.dxn2, &L.dx1, &L.dout, &L.dqkv, &L.dxn1, &L.dx, &L.dzp, &L.dxp, &L.dlogits, &L.ze, &L.dzp_src})
      n += b->bytes();
    for (auto* b : {&L.rstd1, &L.lse, &L.rstd2, &L.probs, &L.topk_w, &L.dw}) n += b->bytes();
    for (auto* b : {&L.topk_idx, &L.slot_of, &L.slot_token, &L.counts}) n += b->bytes();
  }
  return n;
}

// Another set fits with a quarter of the GPU's memory (and at least 1 GiB) left over.
bool Chunk::room_for_another() const {
  std::size_t free = 0, total = 0;
  PPSIM_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  const std::size_t reserve = std::max<std::size_t>(total / 4, std::size_t{1} << 30);
  return free > acts_bytes_ + reserve;
}

Chunk::LayerActs& Chunk::layer_acts(int mb, int layer) { return acts(mb).layers.at(static_cast<std::size_t>(layer)); }

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

bf16* Chunk::input(int mb) { return acts(mb).input.get(); }
void Chunk::bind_input(int mb, const bf16* at) { acts(mb).input_at = at; }
void Chunk::bind_grad_output(int mb, const bf16* at) { acts(mb).grad_output_at = at; }
const bf16* Chunk::output(int mb) { return acts(mb).layers.back().x2.get(); }
bf16* Chunk::grad_output(int mb) { return acts(mb).grad_output.get(); }
const bf16* Chunk::grad_input(int mb) { return acts(mb).layers.front().dx.get(); }

void Chunk::fill_input(int mb, std::uint64_t seed, cudaStream_t s) {
  fill_uniform(input(mb), rows_of(shape_) * shape_.hidden, 1.0f, seed, s);
}
void Chunk::fill_grad_output(int mb, std::uint64_t seed, cudaStream_t s) {
  fill_uniform(grad_output(mb), rows_of(shape_) * shape_.hidden, 1.0f, seed, s);
}

void Chunk::release(int mb, cudaStream_t s) {
  auto it = live_.find(mb);
  if (it == live_.end()) return;
  it->second->free_after.record(s);
  it->second->input_at = nullptr;
  it->second->grad_output_at = nullptr;
  pool_.push_back(std::move(it->second));
  live_.erase(it);
}

// ---- forward ---------------------------------------------------------------------------------

void Chunk::attn_forward(int mb, int layer, cudaStream_t s) {
  Acts& A = acts(mb);
  LayerActs& L = A.layers.at(static_cast<std::size_t>(layer));
  Weights& W = *weights_.at(static_cast<std::size_t>(layer));
  const bf16* x = layer == 0 ? A.in() : A.layers[static_cast<std::size_t>(layer - 1)].x2.get();
  const std::int64_t T = rows_of(shape_), h = shape_.hidden;
  const std::int64_t Aw = static_cast<std::int64_t>(shape_.heads) * shape_.head_dim;
  rmsnorm_fwd(L.xn1.get(), L.rstd1.get(), x, W.w[static_cast<int>(Param::Norm1)].get(), T, shape_.hidden, s);
  gemm_.linear_fwd(L.qkv.get(), L.xn1.get(), W.w[static_cast<int>(Param::Qkv)].get(), T, h, shape_.qkv_width(), s);
  attn_->forward(L.o.get(), L.lse.get(), L.qkv.get(), s);
  gemm_.linear_fwd(L.x1.get(), L.o.get(), W.w[static_cast<int>(Param::Out)].get(), T, Aw, h, s, 1, x);
  if (shape_.is_moe()) {
    rmsnorm_fwd(L.xn2.get(), L.rstd2.get(), L.x1.get(), W.w[static_cast<int>(Param::Norm2)].get(), T, shape_.hidden, s);
    gemm_.linear_fwd(L.logits.get(), L.xn2.get(), W.w[static_cast<int>(Param::Router)].get(), T, h, shape_.experts, s);
    MoeRouting r{L.probs.get(), L.topk_idx.get(), L.topk_w.get(), L.slot_of.get(), L.slot_token.get(),
                 L.counts.get(), T, shape_.experts, shape_.top_k, capacity_};
    moe_route(r, L.logits.get(), s);
  }
}

void Chunk::dispatch_forward(int mb, int layer, cudaStream_t s) {
  if (!shape_.is_moe()) return;
  LayerActs& L = layer_acts(mb, layer);
  if (ep()) {
    const A2aCall c = ep_call(kEpXp, mb, layer);
    a2a_dispatch_begin(c, ep_peers(kEpXp, mb, layer), L.xn2.get(), true, L.slot_token.get(), L.counts.get(), nullptr, s);
    a2a_dispatch_end(c, ep_mine(kEpXp, mb, layer), s);
    return;
  }
  MoeRouting r{L.probs.get(), L.topk_idx.get(), L.topk_w.get(), L.slot_of.get(), L.slot_token.get(),
               L.counts.get(), rows_of(shape_), shape_.experts, shape_.top_k, capacity_};
  moe_permute(L.xp.get(), L.xn2.get(), r, shape_.hidden, s);
}

void Chunk::mlp_forward(int mb, int layer, cudaStream_t s) {
  LayerActs& L = layer_acts(mb, layer);
  Weights& W = *weights_.at(static_cast<std::size_t>(layer));
  const std::int64_t h = shape_.hidden;
  if (shape_.is_moe()) {
    // Per local expert: C rows (one GPU) or one C-row block from each EP rank (ep * C rows).
    const std::int64_t C = capacity_ * shape_.ep, fe = shape_.expert_ffn_hidden;
    const int E = shape_.experts_local();
    const bf16* xp = ep() ? ep_mine(kEpXp, mb, layer).rows : L.xp.get();
    bf16* zp = ep() ? L.ze.get() : L.zp.get();
    gemm_.linear_fwd(L.gu.get(), xp, W.w[static_cast<int>(Param::Up)].get(), C, h, 2 * fe, s, E);
    swiglu_fwd(L.a.get(), L.gu.get(), C * E, static_cast<int>(fe), s);
    gemm_.linear_fwd(zp, L.a.get(), W.w[static_cast<int>(Param::Down)].get(), C, fe, h, s, E);
  } else {
    const std::int64_t T = rows_of(shape_), f = shape_.ffn_hidden;
    rmsnorm_fwd(L.xn2.get(), L.rstd2.get(), L.x1.get(), W.w[static_cast<int>(Param::Norm2)].get(), T, shape_.hidden, s);
    gemm_.linear_fwd(L.gu.get(), L.xn2.get(), W.w[static_cast<int>(Param::Up)].get(), T, h, 2 * f, s);
    swiglu_fwd(L.a.get(), L.gu.get(), T, static_cast<int>(f), s);
    gemm_.linear_fwd(L.x2.get(), L.a.get(), W.w[static_cast<int>(Param::Down)].get(), T, f, h, s, 1, L.x1.get());
  }
}

void Chunk::combine_forward(int mb, int layer, cudaStream_t s) {
  if (!shape_.is_moe()) return;
  LayerActs& L = layer_acts(mb, layer);
  if (ep()) {
    const A2aCall c = ep_call(kEpZp, mb, layer);
    a2a_combine_begin(c, ep_peers(kEpZp, mb, layer), L.ze.get(), ep_mine(kEpXp, mb, layer).counts, s);
    a2a_combine_end(c, ep_mine(kEpZp, mb, layer), L.x2.get(), L.x1.get(), L.slot_of.get(), L.topk_w.get(), s);
    return;
  }
  MoeRouting r{L.probs.get(), L.topk_idx.get(), L.topk_w.get(), L.slot_of.get(), L.slot_token.get(),
               L.counts.get(), rows_of(shape_), shape_.experts, shape_.top_k, capacity_};
  moe_combine(L.x2.get(), L.x1.get(), L.zp.get(), r, shape_.hidden, s);
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

void Chunk::combine_backward(int mb, int layer, cudaStream_t s) {
  if (!shape_.is_moe()) return;
  Acts& A = acts(mb);
  LayerActs& L = A.layers.at(static_cast<std::size_t>(layer));
  const bf16* dx2 = layer + 1 == shape_.layers ? A.dy() : A.layers[static_cast<std::size_t>(layer + 1)].dx.get();
  MoeRouting r{L.probs.get(), L.topk_idx.get(), L.topk_w.get(), L.slot_of.get(), L.slot_token.get(),
               L.counts.get(), rows_of(shape_), shape_.experts, shape_.top_k, capacity_};
  if (ep()) {
    // w * dout in the source's [E][C] layout (and dw, from the expert outputs that came back),
    // then to the experts' ranks.
    moe_combine_bwd(L.dzp_src.get(), L.dw.get(), dx2, ep_mine(kEpZp, mb, layer).rows, r, shape_.hidden, s);
    const A2aCall c = ep_call(kEpDzp, mb, layer);
    a2a_dispatch_begin(c, ep_peers(kEpDzp, mb, layer), L.dzp_src.get(), false, L.slot_token.get(), L.counts.get(),
                       nullptr, s);
    a2a_dispatch_end(c, ep_mine(kEpDzp, mb, layer), s);
    return;
  }
  moe_combine_bwd(L.dzp.get(), L.dw.get(), dx2, L.zp.get(), r, shape_.hidden, s);
}

void Chunk::mlp_backward_input(int mb, int layer, cudaStream_t s) {
  Acts& A = acts(mb);
  LayerActs& L = A.layers.at(static_cast<std::size_t>(layer));
  Weights& W = *weights_.at(static_cast<std::size_t>(layer));
  const std::int64_t h = shape_.hidden;
  const bf16* dx2 = layer + 1 == shape_.layers ? A.dy() : A.layers[static_cast<std::size_t>(layer + 1)].dx.get();
  if (shape_.is_moe()) {
    const std::int64_t C = capacity_ * shape_.ep, fe = shape_.expert_ffn_hidden;
    const int E = shape_.experts_local();
    const bf16* dzp = ep() ? ep_mine(kEpDzp, mb, layer).rows : L.dzp.get();
    gemm_.linear_bwd_input(L.da.get(), dzp, W.w[static_cast<int>(Param::Down)].get(), C, fe, h, s, 0.f, E);
    swiglu_bwd(L.dgu.get(), L.da.get(), L.gu.get(), C * E, static_cast<int>(fe), s);
    gemm_.linear_bwd_input(L.dxp.get(), L.dgu.get(), W.w[static_cast<int>(Param::Up)].get(), C, h, 2 * fe, s, 0.f, E);
  } else {
    const std::int64_t T = rows_of(shape_), f = shape_.ffn_hidden;
    gemm_.linear_bwd_input(L.da.get(), dx2, W.w[static_cast<int>(Param::Down)].get(), T, f, h, s);
    swiglu_bwd(L.dgu.get(), L.da.get(), L.gu.get(), T, static_cast<int>(f), s);
    gemm_.linear_bwd_input(L.dxn2.get(), L.dgu.get(), W.w[static_cast<int>(Param::Up)].get(), T, h, 2 * f, s);
    rmsnorm_bwd_input(L.dx1.get(), dx2, L.dxn2.get(), L.x1.get(), W.w[static_cast<int>(Param::Norm2)].get(),
                      L.rstd2.get(), T, shape_.hidden, s);
  }
}

void Chunk::dispatch_backward(int mb, int layer, cudaStream_t s) {
  if (!shape_.is_moe()) return;
  LayerActs& L = layer_acts(mb, layer);
  MoeRouting r{L.probs.get(), L.topk_idx.get(), L.topk_w.get(), L.slot_of.get(), L.slot_token.get(),
               L.counts.get(), rows_of(shape_), shape_.experts, shape_.top_k, capacity_};
  if (ep()) {
    // The experts' input-grads go back to their sources and are summed into each token.
    const A2aCall c = ep_call(kEpDxp, mb, layer);
    a2a_combine_begin(c, ep_peers(kEpDxp, mb, layer), L.dxp.get(), ep_mine(kEpXp, mb, layer).counts, s);
    a2a_combine_end(c, ep_mine(kEpDxp, mb, layer), L.dxn2.get(), nullptr, L.slot_of.get(), nullptr, s);
    return;
  }
  moe_permute_bwd(L.dxn2.get(), L.dxp.get(), r, shape_.hidden, s);
}

void Chunk::attn_backward_input(int mb, int layer, cudaStream_t s) {
  Acts& A = acts(mb);
  LayerActs& L = A.layers.at(static_cast<std::size_t>(layer));
  Weights& W = *weights_.at(static_cast<std::size_t>(layer));
  const std::int64_t T = rows_of(shape_), h = shape_.hidden;
  const std::int64_t Aw = static_cast<std::int64_t>(shape_.heads) * shape_.head_dim;
  const bf16* x = layer == 0 ? A.in() : A.layers[static_cast<std::size_t>(layer - 1)].x2.get();
  if (shape_.is_moe()) {
    const bf16* dx2 =
        layer + 1 == shape_.layers ? A.dy() : A.layers[static_cast<std::size_t>(layer + 1)].dx.get();
    MoeRouting r{L.probs.get(), L.topk_idx.get(), L.topk_w.get(), L.slot_of.get(), L.slot_token.get(),
                 L.counts.get(), T, shape_.experts, shape_.top_k, capacity_};
    moe_router_bwd(L.dlogits.get(), L.dw.get(), r, s);
    gemm_.linear_bwd_input(L.dxn2.get(), L.dlogits.get(), W.w[static_cast<int>(Param::Router)].get(), T, h,
                           shape_.experts, s, 1.f);
    rmsnorm_bwd_input(L.dx1.get(), dx2, L.dxn2.get(), L.x1.get(), W.w[static_cast<int>(Param::Norm2)].get(),
                      L.rstd2.get(), T, shape_.hidden, s);
  }
  gemm_.linear_bwd_input(L.dout.get(), L.dx1.get(), W.w[static_cast<int>(Param::Out)].get(), T, Aw, h, s);
  attn_->backward(L.dqkv.get(), L.dout.get(), L.qkv.get(), L.o.get(), L.lse.get(), s);
  gemm_.linear_bwd_input(L.dxn1.get(), L.dqkv.get(), W.w[static_cast<int>(Param::Qkv)].get(), T, h, shape_.qkv_width(), s);
  rmsnorm_bwd_input(L.dx.get(), L.dx1.get(), L.dxn1.get(), x, W.w[static_cast<int>(Param::Norm1)].get(), L.rstd1.get(),
                    T, shape_.hidden, s);
}

void Chunk::backward_input(int mb, cudaStream_t s) {
  for (int l = shape_.layers - 1; l >= 0; --l) {
    combine_backward(mb, l, s);
    mlp_backward_input(mb, l, s);
    dispatch_backward(mb, l, s);
    attn_backward_input(mb, l, s);
  }
}

// ---- backward: weight-grad ---------------------------------------------------------------------

void Chunk::attn_backward_weight(int mb, int layer, cudaStream_t s) {
  Acts& A = acts(mb);
  LayerActs& L = A.layers.at(static_cast<std::size_t>(layer));
  Weights& W = *weights_.at(static_cast<std::size_t>(layer));
  const std::int64_t T = rows_of(shape_), h = shape_.hidden;
  const std::int64_t Aw = static_cast<std::int64_t>(shape_.heads) * shape_.head_dim;
  const bf16* x = layer == 0 ? A.in() : A.layers[static_cast<std::size_t>(layer - 1)].x2.get();
  auto g = [&](Param p) { return W.g[static_cast<int>(p)].get(); };
  gemm_.linear_bwd_weight(g(Param::Qkv), DType::F32, L.dqkv.get(), L.xn1.get(), T, h, shape_.qkv_width(), s);
  gemm_.linear_bwd_weight(g(Param::Out), DType::F32, L.dx1.get(), L.o.get(), T, Aw, h, s);
  rmsnorm_bwd_gamma(g(Param::Norm1), L.dxn1.get(), x, L.rstd1.get(), T, shape_.hidden, s);
  if (shape_.is_moe()) {
    gemm_.linear_bwd_weight(g(Param::Router), DType::F32, L.dlogits.get(), L.xn2.get(), T, h, shape_.experts, s);
    rmsnorm_bwd_gamma(g(Param::Norm2), L.dxn2.get(), L.x1.get(), L.rstd2.get(), T, shape_.hidden, s);
  }
}

void Chunk::mlp_backward_weight(int mb, int layer, cudaStream_t s) {
  Acts& A = acts(mb);
  LayerActs& L = A.layers.at(static_cast<std::size_t>(layer));
  Weights& W = *weights_.at(static_cast<std::size_t>(layer));
  const std::int64_t h = shape_.hidden;
  auto g = [&](Param p) { return W.g[static_cast<int>(p)].get(); };
  if (shape_.is_moe()) {
    const std::int64_t C = capacity_ * shape_.ep, fe = shape_.expert_ffn_hidden;
    const int E = shape_.experts_local();
    const bf16* xp = ep() ? ep_mine(kEpXp, mb, layer).rows : L.xp.get();
    const bf16* dzp = ep() ? ep_mine(kEpDzp, mb, layer).rows : L.dzp.get();
    gemm_.linear_bwd_weight(g(Param::Up), DType::F32, L.dgu.get(), xp, C, h, 2 * fe, s, 1.f, E);
    gemm_.linear_bwd_weight(g(Param::Down), DType::F32, dzp, L.a.get(), C, fe, h, s, 1.f, E);
  } else {
    const std::int64_t T = rows_of(shape_), f = shape_.ffn_hidden;
    const bf16* dx2 =
        layer + 1 == shape_.layers ? A.dy() : A.layers[static_cast<std::size_t>(layer + 1)].dx.get();
    gemm_.linear_bwd_weight(g(Param::Up), DType::F32, L.dgu.get(), L.xn2.get(), T, h, 2 * f, s);
    gemm_.linear_bwd_weight(g(Param::Down), DType::F32, dx2, L.a.get(), T, f, h, s);
    rmsnorm_bwd_gamma(g(Param::Norm2), L.dxn2.get(), L.x1.get(), L.rstd2.get(), T, shape_.hidden, s);
  }
}

void Chunk::backward_weight(int mb, cudaStream_t s) {
  for (int l = 0; l < shape_.layers; ++l) {
    attn_backward_weight(mb, l, s);
    mlp_backward_weight(mb, l, s);
  }
}

// ---- inspection ----------------------------------------------------------------------------------

std::vector<int> Chunk::routing(int mb, int layer) {
  if (!shape_.is_moe()) return {};
  PPSIM_CUDA_CHECK(cudaDeviceSynchronize());
  return layer_acts(mb, layer).topk_idx.to_host();
}

std::int64_t Chunk::dropped_assignments(int mb) {
  if (!shape_.is_moe()) return 0;
  PPSIM_CUDA_CHECK(cudaDeviceSynchronize());
  std::int64_t dropped = 0;
  for (auto& L : acts(mb).layers)
    for (int c : L.counts.to_host()) dropped += c > capacity_ ? c - capacity_ : 0;
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

A2aRecvBuffer Chunk::ep_mine(EpKind k, int mb, int layer) const { return ep_bufs_.at(ep_index(k, mb, layer))->view(); }

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

void Chunk::reset_ep_status(cudaStream_t s) {
  if (ep()) ep_stats_.zero(s);
}

std::vector<A2aRecvBuffer> Chunk::ep_receive_buffers() const {
  std::vector<A2aRecvBuffer> v;
  for (const auto& b : ep_bufs_) v.push_back(b->view());
  return v;
}

void Chunk::connect_ep(const std::vector<std::vector<A2aRecvBuffer>>& by_rank) {
  PPSIM_CHECK(ep(), "connect_ep on a chunk without expert parallelism (ep = {})", shape_.ep);
  PPSIM_CHECK(static_cast<int>(by_rank.size()) == shape_.ep, "connect_ep: {} ranks' buffers for ep = {}",
              by_rank.size(), shape_.ep);
  for (const auto& v : by_rank)
    PPSIM_CHECK(v.size() == ep_bufs_.size(), "connect_ep: a peer has {} receive buffers, this chunk {}", v.size(),
                ep_bufs_.size());
  ep_peer_views_ = by_rank;
}

void Chunk::connect_ep_group(const std::vector<Chunk*>& group) {
  std::vector<std::vector<A2aRecvBuffer>> all(group.size());
  for (const Chunk* c : group) {
    PPSIM_CHECK(c->shape_.ep == static_cast<int>(group.size()) && c->shape_.ep_rank >= 0 &&
                    c->shape_.ep_rank < static_cast<int>(group.size()),
                "connect_ep_group: a chunk with ep {} and ep_rank {} in a group of {}", c->shape_.ep, c->shape_.ep_rank,
                group.size());
    all[static_cast<std::size_t>(c->shape_.ep_rank)] = c->ep_receive_buffers();
  }
  for (Chunk* c : group) c->connect_ep(all);
}

}  // namespace ppsim::gpu
