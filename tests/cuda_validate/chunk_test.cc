// A whole Chunk (dense and MoE) against a CPU model of the same layers: forward output,
// input-grad and every weight-grad, for two micro-batches whose weight-grads accumulate (one
// backward split into I and W, one fused). The CPU
// model reads the GPU's bf16 weights and rounds to bf16 where the GPU stores bf16, so the
// remaining difference is accumulation order (fp32 vs double). MoE routing decisions are taken
// from the GPU (a near-tie could flip between the two otherwise); the weights follow from them.
#include "cuda_validate/chunk.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "cpu_reference.h"
#include "cuda_validate/ops/norm_act.h"
#include "gpu_test_util.h"

using namespace ppsim::gpu;
using namespace ppsim::gpu::test;
using cpu::Vec;

namespace {

Vec rb(Vec v) {
  for (auto& x : v) x = round_bf16(static_cast<float>(x));
  return v;
}
Vec add(const Vec& a, const Vec& b) {
  Vec c(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) c[i] = a[i] + b[i];
  return c;
}
void accumulate(Vec& into, const Vec& v) {
  if (into.empty()) into.assign(v.size(), 0.0);
  for (std::size_t i = 0; i < v.size(); ++i) into[i] += v[i];
}
Vec slice(const Vec& v, std::size_t offset, std::size_t n) {
  return Vec(v.begin() + static_cast<std::ptrdiff_t>(offset), v.begin() + static_cast<std::ptrdiff_t>(offset + n));
}
void put(Vec& v, std::size_t offset, const Vec& part) { std::copy(part.begin(), part.end(), v.begin() + static_cast<std::ptrdiff_t>(offset)); }

struct LayerW {
  Vec w[kNumParams];
};

// CPU model of a chunk; grads[layer][param] accumulate over micro-batches.
class CpuChunk {
 public:
  CpuChunk(const ChunkShape& s, std::vector<LayerW> w) : s_(s), w_(std::move(w)), grads_(w_.size()) {}

  // Runs forward and backward for one micro-batch; returns {output, grad_input}.
  std::pair<Vec, Vec> run(const Vec& input, const Vec& grad_output, const std::vector<std::vector<int>>& routing) {
    const std::int64_t T = s_.tokens(), h = s_.hidden, W = s_.qkv_width(),
                       A = static_cast<std::int64_t>(s_.heads) * s_.head_dim;
    const cpu::Attention att{s_.micro_batch, s_.seq_len, s_.heads, s_.kv_heads, s_.head_dim};
    struct Saved {
      Vec x, xn1, rstd1, qkv, o, x1, xn2, rstd2, gu, a, x2;
      Vec logits, probs, xp, zp;
      std::vector<int> idx, slot_of, slot_token;
    };
    std::vector<Saved> sv(w_.size());
    Vec x = input;
    for (std::size_t l = 0; l < w_.size(); ++l) {
      Saved& S = sv[l];
      const Vec* P = w_[l].w;
      S.x = x;
      S.xn1 = rb(cpu::rmsnorm(x, P[int(Param::Norm1)], T, h, S.rstd1, kRmsNormEps));
      S.qkv = rb(cpu::linear(S.xn1, P[int(Param::Qkv)], T, h, W));
      Vec lse;
      att.forward(S.qkv, S.o, lse);
      S.o = rb(S.o);
      S.x1 = rb(add(x, cpu::linear(S.o, P[int(Param::Out)], T, A, h)));
      S.xn2 = rb(cpu::rmsnorm(S.x1, P[int(Param::Norm2)], T, h, S.rstd2, kRmsNormEps));
      if (!s_.is_moe()) {
        const std::int64_t f = s_.ffn_hidden;
        S.gu = rb(cpu::linear(S.xn2, P[int(Param::Up)], T, h, 2 * f));
        S.a = rb(cpu::swiglu(S.gu, T, f));
        S.x2 = rb(add(S.x1, cpu::linear(S.a, P[int(Param::Down)], T, f, h)));
      } else {
        const int E = s_.experts, k = s_.top_k;
        const std::int64_t C = s_.expert_capacity(), fe = s_.expert_ffn_hidden;
        S.logits = rb(cpu::linear(S.xn2, P[int(Param::Router)], T, h, E));
        S.probs.assign(static_cast<std::size_t>(T * E), 0.0);
        for (std::int64_t t = 0; t < T; ++t) {
          double m = -INFINITY, z = 0;
          for (int e = 0; e < E; ++e) m = std::max(m, S.logits[static_cast<std::size_t>(t * E + e)]);
          for (int e = 0; e < E; ++e) z += std::exp(S.logits[static_cast<std::size_t>(t * E + e)] - m);
          for (int e = 0; e < E; ++e)
            S.probs[static_cast<std::size_t>(t * E + e)] = std::exp(S.logits[static_cast<std::size_t>(t * E + e)] - m) / z;
        }
        S.idx = routing[l];
        S.slot_of.assign(static_cast<std::size_t>(T * k), -1);
        S.slot_token.assign(static_cast<std::size_t>(E * C), -1);
        std::vector<std::int64_t> count(static_cast<std::size_t>(E), 0);
        for (std::int64_t i = 0; i < T * k; ++i) {
          const int e = S.idx[static_cast<std::size_t>(i)];
          const std::int64_t pos = count[static_cast<std::size_t>(e)]++;
          if (pos < C) {
            S.slot_of[static_cast<std::size_t>(i)] = static_cast<int>(e * C + pos);
            S.slot_token[static_cast<std::size_t>(e * C + pos)] = static_cast<int>(i);
          }
        }
        S.xp.assign(static_cast<std::size_t>(E * C * h), 0.0);
        for (std::int64_t row = 0; row < E * C; ++row)
          if (int i = S.slot_token[static_cast<std::size_t>(row)]; i >= 0)
            put(S.xp, static_cast<std::size_t>(row * h), slice(S.xn2, static_cast<std::size_t>(i / k * h), static_cast<std::size_t>(h)));
        S.gu.assign(static_cast<std::size_t>(E * C * 2 * fe), 0.0);
        S.a.assign(static_cast<std::size_t>(E * C * fe), 0.0);
        S.zp.assign(static_cast<std::size_t>(E * C * h), 0.0);
        for (int e = 0; e < E; ++e) {
          const Vec xe = slice(S.xp, static_cast<std::size_t>(e * C * h), static_cast<std::size_t>(C * h));
          const Vec w1 = slice(P[int(Param::Up)], static_cast<std::size_t>(e * 2 * fe * h), static_cast<std::size_t>(2 * fe * h));
          const Vec w2 = slice(P[int(Param::Down)], static_cast<std::size_t>(e * h * fe), static_cast<std::size_t>(h * fe));
          const Vec gu = rb(cpu::linear(xe, w1, C, h, 2 * fe));
          const Vec a = rb(cpu::swiglu(gu, C, fe));
          put(S.gu, static_cast<std::size_t>(e * C * 2 * fe), gu);
          put(S.a, static_cast<std::size_t>(e * C * fe), a);
          put(S.zp, static_cast<std::size_t>(e * C * h), rb(cpu::linear(a, w2, C, fe, h)));
        }
        S.x2 = S.x1;
        for (std::int64_t i = 0; i < T * k; ++i) {
          const int row = S.slot_of[static_cast<std::size_t>(i)];
          if (row < 0) continue;
          const double wi = S.probs[static_cast<std::size_t>(i / k * E + S.idx[static_cast<std::size_t>(i)])];
          for (std::int64_t c = 0; c < h; ++c)
            S.x2[static_cast<std::size_t>(i / k * h + c)] += wi * S.zp[static_cast<std::size_t>(row * h + c)];
        }
        S.x2 = rb(S.x2);
      }
      x = S.x2;
    }
    const Vec output = x;

    Vec dx2 = grad_output;
    for (std::size_t li = w_.size(); li-- > 0;) {
      Saved& S = sv[li];
      const Vec* P = w_[li].w;
      Vec* G = grads_[li].w;
      Vec dxn2, dx1, dg;
      if (!s_.is_moe()) {
        const std::int64_t f = s_.ffn_hidden;
        const Vec da = rb(cpu::linear_bwd_input(dx2, P[int(Param::Down)], T, f, h));
        const Vec dgu = rb(cpu::swiglu_bwd(da, S.gu, T, f));
        dxn2 = rb(cpu::linear_bwd_input(dgu, P[int(Param::Up)], T, h, 2 * f));
        accumulate(G[int(Param::Up)], cpu::linear_bwd_weight(dgu, S.xn2, T, h, 2 * f));
        accumulate(G[int(Param::Down)], cpu::linear_bwd_weight(dx2, S.a, T, f, h));
      } else {
        const int E = s_.experts, k = s_.top_k;
        const std::int64_t C = s_.expert_capacity(), fe = s_.expert_ffn_hidden;
        Vec dzp(static_cast<std::size_t>(E * C * h), 0.0), dw(static_cast<std::size_t>(T * k), 0.0);
        for (std::int64_t row = 0; row < E * C; ++row) {
          const int i = S.slot_token[static_cast<std::size_t>(row)];
          if (i < 0) continue;
          const std::int64_t t = i / k;
          const double wi = S.probs[static_cast<std::size_t>(t * E + S.idx[static_cast<std::size_t>(i)])];
          double dot = 0;
          for (std::int64_t c = 0; c < h; ++c) {
            dzp[static_cast<std::size_t>(row * h + c)] = wi * dx2[static_cast<std::size_t>(t * h + c)];
            dot += dx2[static_cast<std::size_t>(t * h + c)] * S.zp[static_cast<std::size_t>(row * h + c)];
          }
          dw[static_cast<std::size_t>(i)] = dot;
        }
        dzp = rb(dzp);
        Vec dxp(static_cast<std::size_t>(E * C * h), 0.0);
        Vec gw1(static_cast<std::size_t>(E * 2 * fe * h)), gw2(static_cast<std::size_t>(E * h * fe));
        for (int e = 0; e < E; ++e) {
          const Vec w1 = slice(P[int(Param::Up)], static_cast<std::size_t>(e * 2 * fe * h), static_cast<std::size_t>(2 * fe * h));
          const Vec w2 = slice(P[int(Param::Down)], static_cast<std::size_t>(e * h * fe), static_cast<std::size_t>(h * fe));
          const Vec dze = slice(dzp, static_cast<std::size_t>(e * C * h), static_cast<std::size_t>(C * h));
          const Vec gue = slice(S.gu, static_cast<std::size_t>(e * C * 2 * fe), static_cast<std::size_t>(C * 2 * fe));
          const Vec ae = slice(S.a, static_cast<std::size_t>(e * C * fe), static_cast<std::size_t>(C * fe));
          const Vec xe = slice(S.xp, static_cast<std::size_t>(e * C * h), static_cast<std::size_t>(C * h));
          const Vec da = rb(cpu::linear_bwd_input(dze, w2, C, fe, h));
          const Vec dgu = rb(cpu::swiglu_bwd(da, gue, C, fe));
          put(dxp, static_cast<std::size_t>(e * C * h), rb(cpu::linear_bwd_input(dgu, w1, C, h, 2 * fe)));
          put(gw1, static_cast<std::size_t>(e * 2 * fe * h), cpu::linear_bwd_weight(dgu, xe, C, h, 2 * fe));
          put(gw2, static_cast<std::size_t>(e * h * fe), cpu::linear_bwd_weight(dze, ae, C, fe, h));
        }
        accumulate(G[int(Param::Up)], gw1);
        accumulate(G[int(Param::Down)], gw2);
        dxn2.assign(static_cast<std::size_t>(T * h), 0.0);
        for (std::int64_t i = 0; i < T * k; ++i)
          if (int row = S.slot_of[static_cast<std::size_t>(i)]; row >= 0)
            for (std::int64_t c = 0; c < h; ++c)
              dxn2[static_cast<std::size_t>(i / k * h + c)] += dxp[static_cast<std::size_t>(row * h + c)];
        dxn2 = rb(dxn2);
        Vec dlogits(static_cast<std::size_t>(T * E), 0.0);
        for (std::int64_t t = 0; t < T; ++t) {
          std::vector<double> dprob(static_cast<std::size_t>(E), 0.0);
          for (int j = 0; j < k; ++j) {
            const std::int64_t i = t * k + j;
            if (S.slot_of[static_cast<std::size_t>(i)] >= 0)
              dprob[static_cast<std::size_t>(S.idx[static_cast<std::size_t>(i)])] += dw[static_cast<std::size_t>(i)];
          }
          double sdot = 0;
          for (int e = 0; e < E; ++e) sdot += S.probs[static_cast<std::size_t>(t * E + e)] * dprob[static_cast<std::size_t>(e)];
          for (int e = 0; e < E; ++e)
            dlogits[static_cast<std::size_t>(t * E + e)] =
                S.probs[static_cast<std::size_t>(t * E + e)] * (dprob[static_cast<std::size_t>(e)] - sdot);
        }
        dlogits = rb(dlogits);
        dxn2 = rb(add(dxn2, cpu::linear_bwd_input(dlogits, P[int(Param::Router)], T, h, E)));
        accumulate(G[int(Param::Router)], cpu::linear_bwd_weight(dlogits, S.xn2, T, h, E));
      }
      dx1 = rb(add(dx2, cpu::rmsnorm_bwd(dxn2, S.x1, P[int(Param::Norm2)], S.rstd2, T, h, dg)));
      accumulate(G[int(Param::Norm2)], dg);
      const Vec dout = rb(cpu::linear_bwd_input(dx1, P[int(Param::Out)], T, A, h));
      accumulate(G[int(Param::Out)], cpu::linear_bwd_weight(dx1, S.o, T, A, h));
      const Vec dqkv = rb(att.backward(S.qkv, dout));
      accumulate(G[int(Param::Qkv)], cpu::linear_bwd_weight(dqkv, S.xn1, T, h, W));
      const Vec dxn1 = rb(cpu::linear_bwd_input(dqkv, P[int(Param::Qkv)], T, h, W));
      dg.clear();
      dx2 = rb(add(dx1, cpu::rmsnorm_bwd(dxn1, S.x, P[int(Param::Norm1)], S.rstd1, T, h, dg)));
      accumulate(G[int(Param::Norm1)], dg);
    }
    return {output, dx2};
  }
  const Vec& grad(int layer, Param p) const { return grads_[static_cast<std::size_t>(layer)].w[int(p)]; }

 private:
  ChunkShape s_;
  std::vector<LayerW> w_;
  std::vector<LayerW> grads_;
};

void check_chunk(const ChunkShape& shape) {
  Chunk chunk(shape, 3);
  INFO("attention backend: " << chunk.attention_backend() << " " << chunk.attention_note());
  const std::int64_t T = shape.tokens(), h = shape.hidden;
  const std::size_t n = static_cast<std::size_t>(T * h);
  std::vector<LayerW> weights(static_cast<std::size_t>(shape.layers));
  for (int l = 0; l < shape.layers; ++l)
    for (int p = 0; p < kNumParams; ++p) {
      const auto cnt = static_cast<std::size_t>(chunk.param_count(static_cast<Param>(p)));
      if (cnt) weights[static_cast<std::size_t>(l)].w[p] = cpu::from(download_bf16(chunk.weight(static_cast<Param>(p), l), cnt));
    }
  CpuChunk ref(shape, weights);
  // As the replay runs it: each layer's forward tensors go back once its input-grads are
  // enqueued (a read of one after that throws), output and grad_in stay to the release.
  chunk.give_back_during_backward(true);

  // Two micro-batches, forward both, then backward in reverse order on another stream.
  Stream s1, s2;
  std::map<int, std::pair<std::vector<float>, std::vector<float>>> data;
  for (int mb : {0, 1}) {
    data[mb] = {random_bf16_values(n, 1.f, 70 + static_cast<std::uint32_t>(mb)),
                random_bf16_values(n, 1.f, 80 + static_cast<std::uint32_t>(mb))};
    PPSIM_CUDA_CHECK(cudaMemcpy(chunk.input(mb), to_bf16(data[mb].first).data(), n * sizeof(bf16), cudaMemcpyHostToDevice));
    PPSIM_CUDA_CHECK(cudaMemcpy(chunk.grad_output(mb), to_bf16(data[mb].second).data(), n * sizeof(bf16),
                                cudaMemcpyHostToDevice));
    chunk.forward(mb, s1.get());
  }
  s1.sync();
  std::map<int, std::vector<std::vector<int>>> routing;  // read now: the backward gives it back
  for (int mb : {0, 1})
    for (int l = 0; l < shape.layers; ++l) routing[mb].push_back(chunk.routing(mb, l));
  // Micro-batch 1 split (I, then W from the grads kept for it), micro-batch 0 fused (a B: each
  // layer's W right after its I, through the chunk's one-layer workspace).
  chunk.backward_input(1, s2.get());
  chunk.backward_weight(1, s2.get());
  chunk.backward(0, s2.get());
  s2.sync();

  for (int mb : {0, 1}) {
    INFO("micro-batch " << mb);
    auto [out, din] = ref.run(cpu::from(data[mb].first), cpu::from(data[mb].second), routing[mb]);
    const double eo = rel_error(download_bf16(chunk.output(mb), n), out);
    const double ei = rel_error(download_bf16(chunk.grad_input(mb), n), din);
    INFO("rel error output " << eo << ", grad_input " << ei);
    std::printf("chunk (%s, attention %s) mb %d: rel error output %.2e, grad_input %.2e\n",
                shape.is_moe() ? "moe" : "dense", chunk.attention_backend(), mb, eo, ei);
    CHECK(eo < 2e-2);
    CHECK(ei < 3e-2);
  }
  double worst = 0;
  for (int l = 0; l < shape.layers; ++l)
    for (int p = 0; p < kNumParams; ++p) {
      const auto param = static_cast<Param>(p);
      const auto cnt = static_cast<std::size_t>(chunk.param_count(param));
      if (!cnt) continue;
      const double e = rel_error(download_f32(chunk.weight_grad(param, l), cnt), ref.grad(l, param));
      INFO("layer " << l << " param " << p << " weight-grad rel error " << e);
      worst = std::max(worst, e);
      CHECK(e < (param == Param::Router ? 6e-2 : 3e-2));
    }
  std::printf("chunk (%s): worst weight-grad rel error %.2e over %d layers x %d params\n",
              shape.is_moe() ? "moe" : "dense", worst, shape.layers, kNumParams);
  for (int mb : {0, 1}) chunk.release(mb, s2.get());
}

}  // namespace

TEST_CASE("dense chunk: forward, input-grad and weight-grads match a CPU model", "[gpu]") {
  PPSIM_REQUIRE_GPU();
  ChunkShape s = tiny_dense_shape(2);
  s.micro_batch = 2;
  check_chunk(s);
}

TEST_CASE("MoE chunk: forward, input-grad and weight-grads match a CPU model", "[gpu]") {
  PPSIM_REQUIRE_GPU();
  check_chunk(small_moe_shape());  // 256 assignments over 8 experts: capacity 32, some dropped
}

TEST_CASE("released micro-batch buffers are reused without clobbering live ones", "[gpu]") {
  PPSIM_REQUIRE_GPU();
  ChunkShape s;
  s.hidden = 64;
  s.heads = 2;
  s.kv_heads = 2;
  s.head_dim = 32;
  s.ffn_hidden = 128;
  s.seq_len = 32;
  s.micro_batch = 1;
  s.layers = 1;
  Chunk chunk(s, 5);
  Stream st;
  chunk.fill_input(0, 1, st.get());
  chunk.forward(0, st.get());
  const auto first = download_bf16(chunk.output(0), static_cast<std::size_t>(s.tokens() * s.hidden));
  chunk.release(0, st.get());
  chunk.fill_input(7, 1, st.get());  // takes the released buffers, same input
  chunk.forward(7, st.get());
  const auto again = download_bf16(chunk.output(7), static_cast<std::size_t>(s.tokens() * s.hidden));
  CHECK(rel_error(again, first) == 0.0);
}

// The memory a chunk's micro-batches hold, by lifetime (chunk.h, "Memory"), derived here from the
// buffer list of a dense layer (bf16 = 2 bytes, fp32 = 4; T tokens, h hidden, A = heads*head_dim,
// W = qkv width, f = ffn, L layers):
//   keep (first use -> release): output, grad_in, and input, grad_output once used (T h each);
//     per layer xn1, o, xn2, a (the GEMM inputs W reads)
//   forward, per layer (F -> its input-grads): qkv, x1, gu (2f), x2 (not the last layer's: that
//     is the output); fp32 rstd1, rstd2 (T each), lse (b * heads * s)
//   grads, per layer (split backward: its input-grads -> W): dqkv, dx1, dgu; dx (not layer 0's:
//     that is grad_in)
//   workspace (the chunk's): da (T f), dout (T A), dxn1, dxn2; with a fused backward also one
//     layer's dqkv, dx1, dgu and two dx
struct MemShape {
  std::size_t T = 64, h = 64, A = 64, W = (2 + 2 * 1) * 32, f = 192, L = 3;
  std::size_t keep() const { return 2 * 4 * T * h + L * 2 * (T * h + T * A + T * h + T * f); }
  std::size_t fwd() const { return 2 * (T * W + T * h + T * 2 * f + T * h) + 4 * (T + T + 2 * 2 * 32); }
  std::size_t fwd_last() const { return fwd() - 2 * T * h; }
  std::size_t grad() const { return 2 * (T * W + T * h + T * 2 * f + T * h); }
  std::size_t grad0() const { return grad() - 2 * T * h; }
  std::size_t mb() const { return keep() + (L - 1) * fwd() + fwd_last(); }
  std::size_t grads() const { return (L - 1) * grad() + grad0(); }
  std::size_t ws() const { return 2 * (T * f + T * A + 2 * T * h); }
  std::size_t ws_fused() const { return ws() + 2 * (T * W + T * h + T * 2 * f + 2 * T * h); }
  static ChunkShape shape() {
    ChunkShape s;
    s.hidden = 64;
    s.heads = 2;
    s.kv_heads = 1;
    s.head_dim = 32;
    s.ffn_hidden = 192;
    s.seq_len = 32;
    s.micro_batch = 2;
    s.layers = 3;
    return s;
  }
};

// Micro-batches 0 and 1: inputs and output-grads filled, forward run.
void forward_two(Chunk& c, Stream& st) {
  for (int mb : {0, 1}) {
    c.fill_input(mb, 10 + static_cast<std::uint64_t>(mb), st.get());
    c.fill_grad_output(mb, 20 + static_cast<std::uint64_t>(mb), st.get());
    c.forward(mb, st.get());
  }
}

// F0, F1, I0 (split), its end, W0 + release, B1 (fused) + release: the peak is at I0, with two
// micro-batches' forward sets and micro-batch 0's grads; after all, nothing is in use.
TEST_CASE("a chunk's micro-batch buffers: sets by lifetime, peak in program order", "[gpu]") {
  PPSIM_REQUIRE_GPU();
  const MemShape m;
  Chunk c(MemShape::shape(), 9);
  Stream st;
  forward_two(c, st);
  CHECK(c.microbatch_bytes() == m.mb() - 2 * 2 * m.T * m.h);  // at its first use: before input, grad_output
  CHECK(c.activation_bytes_peak() == 2 * m.mb());
  c.backward_input(0, st.get());
  c.input_grad_done(0, st.get());
  c.backward_weight(0, st.get());
  c.release(0, st.get());
  CHECK(c.workspace_bytes() == m.ws());
  c.backward(1, st.get());
  c.release(1, st.get());
  st.sync();
  CHECK(c.activation_bytes_peak() == 2 * m.mb() + m.grads());
  CHECK(c.workspace_bytes() == m.ws_fused());
  // Sets are pooled, never freed: two keep sets and two forward sets per layer, one grad set each.
  CHECK(c.activation_bytes_allocated() == 2 * m.mb() + m.grads());
  // A micro-batch after release takes pooled sets: nothing new is allocated, the peak holds.
  c.fill_input(5, 30, st.get());
  c.forward(5, st.get());
  c.release(5, st.get());
  st.sync();
  CHECK(c.activation_bytes_allocated() == 2 * m.mb() + m.grads());
  CHECK(c.activation_bytes_peak() == 2 * m.mb() + m.grads());
}

// Giving back as it goes (the replay's mode): I0 takes layer 2's grads (+grad) then gives its
// forward set back (-fwd_last), takes layer 1's (+grad), gives (-fwd), takes layer 0's (+grad0),
// gives (-fwd). grad - fwd_last = 2Th - 4(2T + b heads s) > 0 and grad0 < fwd, so the peak is
// at layer 1's take: 2 mb + grad - fwd_last + grad. A fused backward afterwards (B1) holds no
// grad sets and gives back as it goes too: the peak stays.
TEST_CASE("a chunk that gives forward sets back during the backward peaks one layer in", "[gpu]") {
  PPSIM_REQUIRE_GPU();
  const MemShape m;
  REQUIRE(m.grad() > m.fwd_last());
  REQUIRE(m.grad0() < m.fwd());
  Chunk c(MemShape::shape(), 9);
  c.give_back_during_backward(true);
  Stream st;
  forward_two(c, st);
  c.backward_input(0, st.get());
  c.input_grad_done(0, st.get());  // nothing left to give
  c.backward_weight(0, st.get());
  c.release(0, st.get());
  c.backward(1, st.get());
  c.release(1, st.get());
  st.sync();
  CHECK(c.activation_bytes_peak() == 2 * m.mb() + 2 * m.grad() - m.fwd_last());
}
