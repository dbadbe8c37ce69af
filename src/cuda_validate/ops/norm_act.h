// Launchers for RMSNorm (forward, input-grad, gamma-grad) and SwiGLU (forward, backward).
// Shapes are row-major [rows, cols]; cols must be a multiple of 8 (RMSNorm) or 2 (SwiGLU).
#pragma once
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace ppsim::gpu {

inline constexpr float kRmsNormEps = 1e-6f;

// y = x * rstd * g; rstd[rows] (float) is kept for the backward.
void rmsnorm_fwd(__nv_bfloat16* y, float* rstd, const __nv_bfloat16* x, const __nv_bfloat16* g, std::int64_t rows,
                 int cols, cudaStream_t s);
// dx = resid + d(rmsnorm)/dx . dy; resid may be null or alias dx.
void rmsnorm_bwd_input(__nv_bfloat16* dx, const __nv_bfloat16* resid, const __nv_bfloat16* dy,
                       const __nv_bfloat16* x, const __nv_bfloat16* g, const float* rstd, std::int64_t rows, int cols,
                       cudaStream_t s);
// dg[cols] += sum_rows dy * x * rstd (float accumulator).
void rmsnorm_bwd_gamma(float* dg, const __nv_bfloat16* dy, const __nv_bfloat16* x, const float* rstd,
                       std::int64_t rows, int cols, cudaStream_t s);

// gu [rows, 2f] = [gate | up]; a [rows, f] = silu(gate) * up.
void swiglu_fwd(__nv_bfloat16* a, const __nv_bfloat16* gu, std::int64_t rows, int f, cudaStream_t s);
// dgu [rows, 2f] from da [rows, f] and the forward's gu.
void swiglu_bwd(__nv_bfloat16* dgu, const __nv_bfloat16* da, const __nv_bfloat16* gu, std::int64_t rows, int f,
                cudaStream_t s);

}  // namespace ppsim::gpu
