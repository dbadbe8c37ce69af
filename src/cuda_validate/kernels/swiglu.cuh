// SwiGLU over rows of gu = [gate (f) | up (f)]: a = silu(gate) * up, silu(z) = z * sigmoid(z).
//   backward: d_gate = da * up * sigmoid(z) * (1 + z * (1 - sigmoid(z))), d_up = da * silu(z)
// Two elements per thread (bf16x2); f must be even.
#pragma once
#include "cuda_validate/kernels/common.cuh"

namespace ppsim::gpu::kernels {

__device__ __forceinline__ float sigmoidf(float z) { return 1.f / (1.f + __expf(-z)); }

__global__ void swiglu_fwd(bf16* __restrict__ a, const bf16* __restrict__ gu, std::int64_t rows, int f) {
  const std::int64_t pairs = rows * (f / 2);
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < pairs;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = p / (f / 2);
    const int c = static_cast<int>(p % (f / 2)) * 2;
    const __nv_bfloat162 g = *reinterpret_cast<const __nv_bfloat162*>(gu + row * 2 * f + c);
    const __nv_bfloat162 u = *reinterpret_cast<const __nv_bfloat162*>(gu + row * 2 * f + f + c);
    const float g0 = __low2float(g), g1 = __high2float(g);
    const float a0 = g0 * sigmoidf(g0) * __low2float(u), a1 = g1 * sigmoidf(g1) * __high2float(u);
    *reinterpret_cast<__nv_bfloat162*>(a + row * f + c) = __floats2bfloat162_rn(a0, a1);
  }
}

__global__ void swiglu_bwd(bf16* __restrict__ dgu, const bf16* __restrict__ da, const bf16* __restrict__ gu,
                           std::int64_t rows, int f) {
  const std::int64_t pairs = rows * (f / 2);
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < pairs;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = p / (f / 2);
    const int c = static_cast<int>(p % (f / 2)) * 2;
    const __nv_bfloat162 g = *reinterpret_cast<const __nv_bfloat162*>(gu + row * 2 * f + c);
    const __nv_bfloat162 u = *reinterpret_cast<const __nv_bfloat162*>(gu + row * 2 * f + f + c);
    const __nv_bfloat162 d = *reinterpret_cast<const __nv_bfloat162*>(da + row * f + c);
    float dg[2], du[2];
    const float gz[2] = {__low2float(g), __high2float(g)};
    const float uz[2] = {__low2float(u), __high2float(u)};
    const float dz[2] = {__low2float(d), __high2float(d)};
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const float s = sigmoidf(gz[k]);
      du[k] = dz[k] * gz[k] * s;
      dg[k] = dz[k] * uz[k] * s * (1.f + gz[k] * (1.f - s));
    }
    *reinterpret_cast<__nv_bfloat162*>(dgu + row * 2 * f + c) = __floats2bfloat162_rn(dg[0], dg[1]);
    *reinterpret_cast<__nv_bfloat162*>(dgu + row * 2 * f + f + c) = __floats2bfloat162_rn(du[0], du[1]);
  }
}

}  // namespace ppsim::gpu::kernels
