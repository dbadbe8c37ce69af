// The reference attention: gather heads into [batch*heads, seq, head_dim], then per block of
// heads S = Q K^T (fp32), P = causal softmax(scale * S), O = P V; backward recomputes P and runs
// dV = P^T dO, dP = dO V^T, dS = scale * P (dP - rowsum(P dP)), dQ = dS K, dK = dS^T Q, summing the
// query heads of each KV group. Memory: the scores of at most kScoreBytes per block.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "cuda_validate/device_buffer.h"
#include "cuda_validate/kernels/attention_ref.cuh"
#include "cuda_validate/ops/attention.h"
#include "cuda_validate/ops/gemm.h"

namespace ppsim::gpu {

float AttentionShape::scale() const { return 1.0f / std::sqrt(static_cast<float>(head_dim)); }

namespace {

constexpr std::size_t kScoreBytes = 256u << 20;

unsigned grid_for(std::int64_t n) { return static_cast<unsigned>(std::min<std::int64_t>((n + 255) / 256, 132 * 32)); }

class ReferenceAttention final : public Attention {
 public:
  ReferenceAttention(const AttentionShape& sh, Gemm& gemm) : sh_(sh), gemm_(gemm) {
    const std::int64_t bh = static_cast<std::int64_t>(sh.batch) * sh.heads;
    const std::int64_t s = sh.seq;
    block_ = static_cast<int>(std::clamp<std::int64_t>(static_cast<std::int64_t>(kScoreBytes) / (s * s * 4), 1, bh));
  }
  const char* name() const override { return "reference"; }

  // Forward and backward have separate scratch: an overlapped F&B pair runs them concurrently.
  void forward(bf16* o, float* lse, const bf16* qkv, cudaStream_t st) override {
    Scratch& x = fwd_;
    x.ensure(sh_, block_, false);
    gather_qkv(x, qkv, st);
    const std::int64_t bh = static_cast<std::int64_t>(sh_.batch) * sh_.heads, s = sh_.seq, d = sh_.head_dim;
    for (std::int64_t i0 = 0; i0 < bh; i0 += block_) {
      const int n = static_cast<int>(std::min<std::int64_t>(block_, bh - i0));
      scores(x.scores.get(), x.qh.get() + i0 * s * d, x.kh.get() + i0 * s * d, n, st);
      kernels::causal_softmax_fwd<<<static_cast<unsigned>(n * s), 256, 0, st>>>(x.probs.get(), lse + i0 * s,
                                                                                 x.scores.get(), sh_.seq, sh_.scale());
      PPSIM_CUDA_CHECK_LAUNCH();
      gemm_.linear_bwd_input(x.oh.get() + i0 * s * d, x.probs.get(), x.vh.get() + i0 * s * d, s, d, s, st, 0.f, n);
    }
    kernels::scatter_heads_sum<<<grid_for(bh * s * d), 256, 0, st>>>(o, x.oh.get(), sh_.batch, sh_.seq, sh_.heads,
                                                                      sh_.head_dim, 1, sh_.heads * d, 0);
    PPSIM_CUDA_CHECK_LAUNCH();
  }

  void backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* /*o*/, const float* /*lse*/,
                cudaStream_t st) override {
    Scratch& x = bwd_;
    x.ensure(sh_, block_, true);
    const std::int64_t bh = static_cast<std::int64_t>(sh_.batch) * sh_.heads, s = sh_.seq, d = sh_.head_dim;
    gather_qkv(x, qkv, st);
    kernels::gather_heads<<<grid_for(bh * s * d), 256, 0, st>>>(x.doh.get(), dout, sh_.batch, sh_.seq, sh_.heads,
                                                                sh_.head_dim, 1, sh_.heads * d, 0);
    PPSIM_CUDA_CHECK_LAUNCH();
    for (std::int64_t i0 = 0; i0 < bh; i0 += block_) {
      const int n = static_cast<int>(std::min<std::int64_t>(block_, bh - i0));
      const std::int64_t off = i0 * s * d;
      scores(x.scores.get(), x.qh.get() + off, x.kh.get() + off, n, st);
      kernels::causal_softmax_fwd<<<static_cast<unsigned>(n * s), 256, 0, st>>>(x.probs.get(), x.lse.get(),
                                                                                 x.scores.get(), sh_.seq, sh_.scale());
      PPSIM_CUDA_CHECK_LAUNCH();
      // dV = P^T dO
      gemm_.linear_bwd_weight(x.dvh.get() + off, DType::BF16, x.probs.get(), x.doh.get() + off, s, d, s, st, 0.f, n);
      // dP = dO V^T (fp32), then dS = scale * P (dP - rowsum(P dP))
      scores(x.dprobs.get(), x.doh.get() + off, x.vh.get() + off, n, st);
      kernels::softmax_bwd<<<static_cast<unsigned>(n * s), 256, 0, st>>>(x.dscores.get(), x.probs.get(),
                                                                          x.dprobs.get(), sh_.seq, sh_.scale());
      PPSIM_CUDA_CHECK_LAUNCH();
      // dQ = dS K, dK = dS^T Q
      gemm_.linear_bwd_input(x.dqh.get() + off, x.dscores.get(), x.kh.get() + off, s, d, s, st, 0.f, n);
      gemm_.linear_bwd_weight(x.dkh.get() + off, DType::BF16, x.dscores.get(), x.qh.get() + off, s, d, s, st, 0.f, n);
    }
    const int rep = sh_.heads / sh_.kv_heads;
    const std::int64_t w = sh_.qkv_width();
    kernels::scatter_heads_sum<<<grid_for(bh * s * d), 256, 0, st>>>(dqkv, x.dqh.get(), sh_.batch, sh_.seq, sh_.heads,
                                                                      sh_.head_dim, 1, w, 0);
    PPSIM_CUDA_CHECK_LAUNCH();
    kernels::scatter_heads_sum<<<grid_for(bh * s * d), 256, 0, st>>>(dqkv, x.dkh.get(), sh_.batch, sh_.seq, sh_.heads,
                                                                      sh_.head_dim, rep, w, sh_.heads * d);
    PPSIM_CUDA_CHECK_LAUNCH();
    kernels::scatter_heads_sum<<<grid_for(bh * s * d), 256, 0, st>>>(
        dqkv, x.dvh.get(), sh_.batch, sh_.seq, sh_.heads, sh_.head_dim, rep, w,
        static_cast<std::int64_t>(sh_.heads + sh_.kv_heads) * d);
    PPSIM_CUDA_CHECK_LAUNCH();
  }

 private:
  struct Scratch {
    DeviceBuffer<bf16> qh, kh, vh, oh, doh, dqh, dkh, dvh, probs, dscores;
    DeviceBuffer<float> scores, dprobs, lse;
    void ensure(const AttentionShape& sh, int block, bool backward) {
      if (qh.size()) return;
      const std::int64_t s = sh.seq;
      const std::size_t per_head = static_cast<std::size_t>(static_cast<std::int64_t>(sh.batch) * sh.heads * s * sh.head_dim);
      const std::size_t sq = static_cast<std::size_t>(block) * static_cast<std::size_t>(s * s);
      for (auto* b : {&qh, &kh, &vh}) b->resize(per_head);
      scores.resize(sq);
      probs.resize(sq);
      if (!backward) {
        oh.resize(per_head);
        return;
      }
      for (auto* b : {&doh, &dqh, &dkh, &dvh}) b->resize(per_head);
      dprobs.resize(sq);
      dscores.resize(sq);
      lse.resize(static_cast<std::size_t>(block) * static_cast<std::size_t>(s));
    }
  };

  void gather_qkv(Scratch& x, const bf16* qkv, cudaStream_t st) {
    const std::int64_t n = static_cast<std::int64_t>(sh_.batch) * sh_.heads * sh_.seq * sh_.head_dim;
    const int rep = sh_.heads / sh_.kv_heads;
    const std::int64_t w = sh_.qkv_width(), d = sh_.head_dim;
    kernels::gather_heads<<<grid_for(n), 256, 0, st>>>(x.qh.get(), qkv, sh_.batch, sh_.seq, sh_.heads, sh_.head_dim, 1,
                                                       w, 0);
    PPSIM_CUDA_CHECK_LAUNCH();
    kernels::gather_heads<<<grid_for(n), 256, 0, st>>>(x.kh.get(), qkv, sh_.batch, sh_.seq, sh_.heads, sh_.head_dim,
                                                       rep, w, sh_.heads * d);
    PPSIM_CUDA_CHECK_LAUNCH();
    kernels::gather_heads<<<grid_for(n), 256, 0, st>>>(x.vh.get(), qkv, sh_.batch, sh_.seq, sh_.heads, sh_.head_dim,
                                                       rep, w, static_cast<std::int64_t>(sh_.heads + sh_.kv_heads) * d);
    PPSIM_CUDA_CHECK_LAUNCH();
  }
  // out[n, s, s] (fp32) = a[n, s, d] . b[n, s, d]^T
  void scores(float* out, const bf16* a, const bf16* b, int n, cudaStream_t st) {
    GemmArgs g;
    g.m = sh_.seq; g.n = sh_.seq; g.k = sh_.head_dim;
    g.b_trans = true;
    g.lda = sh_.head_dim; g.ldb = sh_.head_dim; g.ldc = sh_.seq;
    g.c_type = DType::F32;
    g.batch = n;
    g.stride_a = static_cast<std::int64_t>(sh_.seq) * sh_.head_dim;
    g.stride_b = g.stride_a;
    g.stride_c = static_cast<std::int64_t>(sh_.seq) * sh_.seq;
    gemm_.run(g, out, a, b, st);
  }

  AttentionShape sh_;
  Gemm& gemm_;
  int block_ = 1;
  Scratch fwd_, bwd_;
};

}  // namespace

std::unique_ptr<Attention> make_reference_attention(const AttentionShape& shape, Gemm& gemm) {
  return std::make_unique<ReferenceAttention>(shape, gemm);
}

}  // namespace ppsim::gpu
