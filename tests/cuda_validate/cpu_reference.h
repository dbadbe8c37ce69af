// Double-precision CPU references of the chunk's math for the GPU tests. Row-major tensors;
// weights [out, in] as in PyTorch. Each function is the plain textbook formula.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace ppsim::gpu::test::cpu {

using Vec = std::vector<double>;

inline Vec from(const std::vector<float>& v) { return Vec(v.begin(), v.end()); }

// y[T,out] = x[T,in] w[out,in]^T
inline Vec linear(const Vec& x, const Vec& w, std::int64_t T, std::int64_t in, std::int64_t out) {
  Vec y(static_cast<std::size_t>(T * out), 0.0);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t o = 0; o < out; ++o) {
      double acc = 0;
      for (std::int64_t i = 0; i < in; ++i) acc += x[static_cast<std::size_t>(t * in + i)] * w[static_cast<std::size_t>(o * in + i)];
      y[static_cast<std::size_t>(t * out + o)] = acc;
    }
  return y;
}
// dx[T,in] = dy[T,out] w[out,in]
inline Vec linear_bwd_input(const Vec& dy, const Vec& w, std::int64_t T, std::int64_t in, std::int64_t out) {
  Vec dx(static_cast<std::size_t>(T * in), 0.0);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t o = 0; o < out; ++o) {
      const double g = dy[static_cast<std::size_t>(t * out + o)];
      for (std::int64_t i = 0; i < in; ++i) dx[static_cast<std::size_t>(t * in + i)] += g * w[static_cast<std::size_t>(o * in + i)];
    }
  return dx;
}
// dw[out,in] = dy[T,out]^T x[T,in]
inline Vec linear_bwd_weight(const Vec& dy, const Vec& x, std::int64_t T, std::int64_t in, std::int64_t out) {
  Vec dw(static_cast<std::size_t>(out * in), 0.0);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t o = 0; o < out; ++o) {
      const double g = dy[static_cast<std::size_t>(t * out + o)];
      for (std::int64_t i = 0; i < in; ++i) dw[static_cast<std::size_t>(o * in + i)] += g * x[static_cast<std::size_t>(t * in + i)];
    }
  return dw;
}

inline Vec rmsnorm(const Vec& x, const Vec& g, std::int64_t rows, std::int64_t cols, Vec& rstd, double eps) {
  Vec y(x.size());
  rstd.assign(static_cast<std::size_t>(rows), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (std::int64_t c = 0; c < cols; ++c) ss += x[static_cast<std::size_t>(r * cols + c)] * x[static_cast<std::size_t>(r * cols + c)];
    const double rs = 1.0 / std::sqrt(ss / static_cast<double>(cols) + eps);
    rstd[static_cast<std::size_t>(r)] = rs;
    for (std::int64_t c = 0; c < cols; ++c)
      y[static_cast<std::size_t>(r * cols + c)] = x[static_cast<std::size_t>(r * cols + c)] * rs * g[static_cast<std::size_t>(c)];
  }
  return y;
}
// dx = d(rmsnorm)/dx . dy (no residual); dg accumulates sum_rows dy x rstd.
inline Vec rmsnorm_bwd(const Vec& dy, const Vec& x, const Vec& g, const Vec& rstd, std::int64_t rows, std::int64_t cols,
                       Vec& dg) {
  Vec dx(x.size());
  dg.resize(static_cast<std::size_t>(cols), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const double rs = rstd[static_cast<std::size_t>(r)];
    double dot = 0;
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::size_t i = static_cast<std::size_t>(r * cols + c);
      dot += g[static_cast<std::size_t>(c)] * dy[i] * x[i];
      dg[static_cast<std::size_t>(c)] += dy[i] * x[i] * rs;
    }
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::size_t i = static_cast<std::size_t>(r * cols + c);
      dx[i] = rs * g[static_cast<std::size_t>(c)] * dy[i] - x[i] * rs * rs * rs * dot / static_cast<double>(cols);
    }
  }
  return dx;
}

// gu [rows, 2f] = [gate | up] -> a [rows, f]
inline Vec swiglu(const Vec& gu, std::int64_t rows, std::int64_t f) {
  Vec a(static_cast<std::size_t>(rows * f));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < f; ++c) {
      const double z = gu[static_cast<std::size_t>(r * 2 * f + c)], u = gu[static_cast<std::size_t>(r * 2 * f + f + c)];
      a[static_cast<std::size_t>(r * f + c)] = z / (1.0 + std::exp(-z)) * u;
    }
  return a;
}
inline Vec swiglu_bwd(const Vec& da, const Vec& gu, std::int64_t rows, std::int64_t f) {
  Vec dgu(static_cast<std::size_t>(rows * 2 * f));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < f; ++c) {
      const double z = gu[static_cast<std::size_t>(r * 2 * f + c)], u = gu[static_cast<std::size_t>(r * 2 * f + f + c)];
      const double s = 1.0 / (1.0 + std::exp(-z)), d = da[static_cast<std::size_t>(r * f + c)];
      dgu[static_cast<std::size_t>(r * 2 * f + c)] = d * u * s * (1.0 + z * (1.0 - s));
      dgu[static_cast<std::size_t>(r * 2 * f + f + c)] = d * z * s;
    }
  return dgu;
}

// Causal attention on the packed token-major layout (see ops/attention.h).
struct Attention {
  int batch, seq, heads, kv_heads, head_dim;
  std::int64_t width() const { return static_cast<std::int64_t>(heads + 2 * kv_heads) * head_dim; }
  std::int64_t tokens() const { return static_cast<std::int64_t>(batch) * seq; }

  void forward(const Vec& qkv, Vec& o, Vec& lse) const {
    run(qkv, nullptr, &o, &lse, nullptr);
  }
  Vec backward(const Vec& qkv, const Vec& dout) const {
    Vec o, lse, dqkv;
    run(qkv, &dout, &o, &lse, &dqkv);
    return dqkv;
  }

 private:
  void run(const Vec& qkv, const Vec* dout, Vec* o_out, Vec* lse_out, Vec* dqkv_out) const {
    const int B = batch, S = seq, H = heads, Hk = kv_heads, D = head_dim, G = H / Hk;
    const std::int64_t W = width(), A = static_cast<std::int64_t>(H) * D;
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    Vec& o = *o_out;
    o.assign(static_cast<std::size_t>(tokens() * A), 0.0);
    lse_out->assign(static_cast<std::size_t>(B) * H * S, 0.0);
    if (dqkv_out) dqkv_out->assign(qkv.size(), 0.0);
    auto at = [&](int b, int t) { return static_cast<std::size_t>((static_cast<std::int64_t>(b) * S + t) * W); };
    auto ot = [&](int b, int t) { return static_cast<std::size_t>((static_cast<std::int64_t>(b) * S + t) * A); };
    std::vector<double> p(static_cast<std::size_t>(S)), dp(static_cast<std::size_t>(S));
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h) {
        const std::size_t qo = static_cast<std::size_t>(h) * D, ko = static_cast<std::size_t>(H + h / G) * D,
                          vo = static_cast<std::size_t>(H + Hk + h / G) * D;
        for (int i = 0; i < S; ++i) {
          double m = -INFINITY;
          for (int j = 0; j <= i; ++j) {
            double s = 0;
            for (int d = 0; d < D; ++d) s += qkv[at(b, i) + qo + d] * qkv[at(b, j) + ko + d];
            p[static_cast<std::size_t>(j)] = s * scale;
            m = std::max(m, s * scale);
          }
          double z = 0;
          for (int j = 0; j <= i; ++j) z += std::exp(p[static_cast<std::size_t>(j)] - m);
          for (int j = 0; j <= i; ++j) p[static_cast<std::size_t>(j)] = std::exp(p[static_cast<std::size_t>(j)] - m) / z;
          (*lse_out)[(static_cast<std::size_t>(b) * H + h) * S + i] = m + std::log(z);
          for (int d = 0; d < D; ++d) {
            double acc = 0;
            for (int j = 0; j <= i; ++j) acc += p[static_cast<std::size_t>(j)] * qkv[at(b, j) + vo + d];
            o[ot(b, i) + qo + d] = acc;
          }
          if (!dqkv_out) continue;
          // dp_j = dO_i . v_j; ds_j = scale * p_j (dp_j - dO_i . o_i)
          const Vec& dO = *dout;
          Vec& dq = *dqkv_out;
          double dsum = 0;
          for (int d = 0; d < D; ++d) dsum += dO[ot(b, i) + qo + d] * o[ot(b, i) + qo + d];
          for (int j = 0; j <= i; ++j) {
            double acc = 0;
            for (int d = 0; d < D; ++d) acc += dO[ot(b, i) + qo + d] * qkv[at(b, j) + vo + d];
            dp[static_cast<std::size_t>(j)] = acc;
          }
          for (int j = 0; j <= i; ++j) {
            const double pj = p[static_cast<std::size_t>(j)];
            const double ds = pj * (dp[static_cast<std::size_t>(j)] - dsum) * scale;
            for (int d = 0; d < D; ++d) {
              dq[at(b, j) + vo + d] += pj * dO[ot(b, i) + qo + d];
              dq[at(b, i) + qo + d] += ds * qkv[at(b, j) + ko + d];
              dq[at(b, j) + ko + d] += ds * qkv[at(b, i) + qo + d];
            }
          }
        }
      }
  }
};

}  // namespace ppsim::gpu::test::cpu
