// SwiGLU over rows of gu = [gate (f) | up (f)]: a = silu(gate) * up, silu(z) = z * sigmoid(z).
//   backward: d_gate = da * up * sigmoid(z) * (1 + z * (1 - sigmoid(z))), d_up = da * silu(z)
// Two elements per thread (bf16x2); f must be even.
#pragma once
#include "cuda_validate/kernels/common.cuh"

namespace ppsim::gpu::kernels {

__device__ __forceinline__ float sigmoidf(float z) { return 1.f / (1.f + __expf(-z)); }

// Element pair p of the rows: its row, its column c (even), and the gate and up values there.
struct SwigluPair {
  std::int64_t row;
  int c;
  float g[2], u[2];
};
__device__ __forceinline__ SwigluPair swiglu_pair(const bf16* __restrict__ gu, std::int64_t p, int f) {
  SwigluPair q;
  q.row = p / (f / 2);
  q.c = static_cast<int>(p % (f / 2)) * 2;
  const __nv_bfloat162 g = *reinterpret_cast<const __nv_bfloat162*>(gu + q.row * 2 * f + q.c);
  const __nv_bfloat162 u = *reinterpret_cast<const __nv_bfloat162*>(gu + q.row * 2 * f + f + q.c);
  q.g[0] = __low2float(g), q.g[1] = __high2float(g), q.u[0] = __low2float(u), q.u[1] = __high2float(u);
  return q;
}

__global__ void swiglu_fwd(bf16* __restrict__ a, const bf16* __restrict__ gu, std::int64_t rows, int f) {
  const std::int64_t pairs = rows * (f / 2);
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < pairs;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const SwigluPair q = swiglu_pair(gu, p, f);
    const float a0 = q.g[0] * sigmoidf(q.g[0]) * q.u[0], a1 = q.g[1] * sigmoidf(q.g[1]) * q.u[1];
    *reinterpret_cast<__nv_bfloat162*>(a + q.row * f + q.c) = __floats2bfloat162_rn(a0, a1);
  }
}

__global__ void swiglu_bwd(bf16* __restrict__ dgu, const bf16* __restrict__ da, const bf16* __restrict__ gu,
                           std::int64_t rows, int f) {
  const std::int64_t pairs = rows * (f / 2);
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < pairs;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const SwigluPair q = swiglu_pair(gu, p, f);
    const __nv_bfloat162 d = *reinterpret_cast<const __nv_bfloat162*>(da + q.row * f + q.c);
    const float dz[2] = {__low2float(d), __high2float(d)};
    float dg[2], du[2];
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const float s = sigmoidf(q.g[k]);
      du[k] = dz[k] * q.g[k] * s;
      dg[k] = dz[k] * q.u[k] * s * (1.f + q.g[k] * (1.f - s));
    }
    *reinterpret_cast<__nv_bfloat162*>(dgu + q.row * 2 * f + q.c) = __floats2bfloat162_rn(dg[0], dg[1]);
    *reinterpret_cast<__nv_bfloat162*>(dgu + q.row * 2 * f + f + q.c) = __floats2bfloat162_rn(du[0], du[1]);
  }
}

}  // namespace ppsim::gpu::kernels
