// RMSNorm, y = x * rstd * g with rstd = 1/sqrt(mean(x^2) + eps), over rows of `cols` elements.
// Forward and input-grad use one block per row with 16-byte (8 x bf16) accesses, so cols must be
// a multiple of 8; the gamma-grad sums column slices of `rows_per_block` rows and adds them into
// a float accumulator with atomics.
//   input-grad: dx = rstd * g * dy - x * rstd^3 / cols * sum_j(g_j dy_j x_j)
#pragma once
#include "cuda_validate/kernels/common.cuh"

namespace ppsim::gpu::kernels {

__global__ void rmsnorm_fwd(bf16* __restrict__ y, float* __restrict__ rstd, const bf16* __restrict__ x,
                            const bf16* __restrict__ g, int cols, float eps) {
  __shared__ float scratch[32];
  const std::int64_t row = blockIdx.x;
  const Bf16x8* xr = reinterpret_cast<const Bf16x8*>(x + row * cols);
  const Bf16x8* gr = reinterpret_cast<const Bf16x8*>(g);
  Bf16x8* yr = reinterpret_cast<Bf16x8*>(y + row * cols);
  const int nvec = cols / 8;
  float ss = 0.f;
  for (int i = threadIdx.x; i < nvec; i += blockDim.x) {
    const Bf16x8 xv = xr[i];
#pragma unroll
    for (int k = 0; k < 8; ++k) ss += to_f(xv.v[k]) * to_f(xv.v[k]);
  }
  ss = block_sum(ss, scratch);
  const float r = rsqrtf(ss / cols + eps);
  if (threadIdx.x == 0) rstd[row] = r;
  for (int i = threadIdx.x; i < nvec; i += blockDim.x) {
    const Bf16x8 xv = xr[i], gv = gr[i];
    Bf16x8 out;
#pragma unroll
    for (int k = 0; k < 8; ++k) out.v[k] = to_bf(to_f(xv.v[k]) * r * to_f(gv.v[k]));
    yr[i] = out;
  }
}

// dx_out = resid + input-grad; resid may be null; dx_out may alias resid.
__global__ void rmsnorm_bwd_input(bf16* dx_out, const bf16* resid, const bf16* __restrict__ dy,
                                  const bf16* __restrict__ x, const bf16* __restrict__ g,
                                  const float* __restrict__ rstd, int cols) {
  __shared__ float scratch[32];
  const std::int64_t row = blockIdx.x;
  const Bf16x8* xr = reinterpret_cast<const Bf16x8*>(x + row * cols);
  const Bf16x8* dyr = reinterpret_cast<const Bf16x8*>(dy + row * cols);
  const Bf16x8* gr = reinterpret_cast<const Bf16x8*>(g);
  const int nvec = cols / 8;
  float dot = 0.f;
  for (int i = threadIdx.x; i < nvec; i += blockDim.x) {
    const Bf16x8 xv = xr[i], dv = dyr[i], gv = gr[i];
#pragma unroll
    for (int k = 0; k < 8; ++k) dot += to_f(gv.v[k]) * to_f(dv.v[k]) * to_f(xv.v[k]);
  }
  dot = block_sum(dot, scratch);
  const float r = rstd[row];
  const float c = r * r * r * dot / cols;
  Bf16x8* outr = reinterpret_cast<Bf16x8*>(dx_out + row * cols);
  const Bf16x8* resr = resid ? reinterpret_cast<const Bf16x8*>(resid + row * cols) : nullptr;
  for (int i = threadIdx.x; i < nvec; i += blockDim.x) {
    const Bf16x8 xv = xr[i], dv = dyr[i], gv = gr[i];
    Bf16x8 base;
    if (resr) base = resr[i];
    Bf16x8 out;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      float v = r * to_f(gv.v[k]) * to_f(dv.v[k]) - to_f(xv.v[k]) * c;
      if (resr) v += to_f(base.v[k]);
      out.v[k] = to_bf(v);
    }
    outr[i] = out;
  }
}

// dg[j] += sum over rows of dy[r, j] * x[r, j] * rstd[r]. Grid: (ceil(cols/blockDim), row slices).
__global__ void rmsnorm_bwd_gamma(float* __restrict__ dg, const bf16* __restrict__ dy, const bf16* __restrict__ x,
                                  const float* __restrict__ rstd, std::int64_t rows, int cols, int rows_per_block) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * rows_per_block;
  const std::int64_t r1 = r0 + rows_per_block < rows ? r0 + rows_per_block : rows;
  float acc = 0.f;
  for (std::int64_t r = r0; r < r1; ++r) acc += to_f(dy[r * cols + col]) * to_f(x[r * cols + col]) * rstd[r];
  atomicAdd(dg + col, acc);
}

}  // namespace ppsim::gpu::kernels
