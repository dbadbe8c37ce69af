// Device code of the reference attention (cuBLAS GEMMs + these kernels): gathering heads out of
// the packed token-major QKV into [batch*heads, seq, head_dim], scattering them back (summing
// the query heads of a group for GQA's dK/dV), and the causal softmax forward/backward on
// float scores. Causal = query i sees keys j <= i (sequences of equal length).
#pragma once
#include "cuda_validate/kernels/common.cuh"

namespace ppsim::gpu::kernels {

// dst[((b*H + h)*S + t)*D + d] = src[(b*S + t)*ld + col0 + (h / rep)*D + d], h in [0, H).
__global__ void gather_heads(bf16* __restrict__ dst, const bf16* __restrict__ src, int batch, int S, int H, int D,
                             int rep, std::int64_t ld, std::int64_t col0) {
  const std::int64_t n = static_cast<std::int64_t>(batch) * H * S * D;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int d = static_cast<int>(i % D);
    const std::int64_t rest = i / D;
    const int t = static_cast<int>(rest % S);
    const std::int64_t bh = rest / S;
    const int h = static_cast<int>(bh % H);
    const std::int64_t b = bh / H;
    dst[i] = src[(b * S + t) * ld + col0 + static_cast<std::int64_t>(h / rep) * D + d];
  }
}

// dst[(b*S + t)*ld + col0 + g*D + d] = sum_{j<rep} src[((b*H + g*rep + j)*S + t)*D + d], g in [0, H/rep).
__global__ void scatter_heads_sum(bf16* __restrict__ dst, const bf16* __restrict__ src, int batch, int S, int H,
                                  int D, int rep, std::int64_t ld, std::int64_t col0) {
  const int G = H / rep;
  const std::int64_t n = static_cast<std::int64_t>(batch) * G * S * D;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int d = static_cast<int>(i % D);
    std::int64_t rest = i / D;
    const int g = static_cast<int>(rest % G);
    rest /= G;
    const int t = static_cast<int>(rest % S);
    const std::int64_t b = rest / S;
    float acc = 0.f;
    for (int j = 0; j < rep; ++j) acc += to_f(src[((b * H + g * rep + j) * S + t) * D + d]);
    dst[(b * S + t) * ld + col0 + static_cast<std::int64_t>(g) * D + d] = to_bf(acc);
  }
}

// One block per row of scores s[row, 0..S); row's query index = row % S. Writes p (bf16, zero
// where masked) and lse[row] = log(sum_j exp(scale * s_j)) over the visible keys.
__global__ void causal_softmax_fwd(bf16* __restrict__ p, float* __restrict__ lse, const float* __restrict__ s,
                                   int S, float scale) {
  __shared__ float scratch[32];
  const std::int64_t row = blockIdx.x;
  const int qi = static_cast<int>(row % S);
  const float* sr = s + row * S;
  bf16* pr = p + row * S;
  float m = -INFINITY;
  for (int j = threadIdx.x; j <= qi; j += blockDim.x) m = fmaxf(m, sr[j] * scale);
  m = block_max(m, scratch);
  float sum = 0.f;
  for (int j = threadIdx.x; j <= qi; j += blockDim.x) sum += __expf(sr[j] * scale - m);
  sum = block_sum(sum, scratch);
  const float inv = 1.f / sum;
  for (int j = threadIdx.x; j < S; j += blockDim.x) pr[j] = to_bf(j <= qi ? __expf(sr[j] * scale - m) * inv : 0.f);
  if (threadIdx.x == 0) lse[row] = m + logf(sum);
}

// ds = scale * p * (dp - sum_j p_j dp_j), one block per row; ds is bf16 for the next GEMMs.
__global__ void softmax_bwd(bf16* __restrict__ ds, const bf16* __restrict__ p, const float* __restrict__ dp, int S,
                            float scale) {
  __shared__ float scratch[32];
  const std::int64_t row = blockIdx.x;
  const bf16* pr = p + row * S;
  const float* dpr = dp + row * S;
  float dot = 0.f;
  for (int j = threadIdx.x; j < S; j += blockDim.x) dot += to_f(pr[j]) * dpr[j];
  dot = block_sum(dot, scratch);
  for (int j = threadIdx.x; j < S; j += blockDim.x) ds[row * S + j] = to_bf(scale * to_f(pr[j]) * (dpr[j] - dot));
}

}  // namespace ppsim::gpu::kernels
