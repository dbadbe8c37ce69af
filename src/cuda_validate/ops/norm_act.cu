// Launchers of kernels/rmsnorm.cuh and kernels/swiglu.cuh.
#include "cuda_validate/ops/norm_act.h"

#include <algorithm>

#include "cuda_validate/check.h"
#include "cuda_validate/kernels/rmsnorm.cuh"
#include "cuda_validate/kernels/swiglu.cuh"

namespace ppsim::gpu {
namespace {
int row_threads(int cols) { return std::clamp((cols / 8 + 31) / 32 * 32, 32, 256); }
}  // namespace

void rmsnorm_fwd(__nv_bfloat16* y, float* rstd, const __nv_bfloat16* x, const __nv_bfloat16* g, std::int64_t rows,
                 int cols, cudaStream_t s) {
  if (rows <= 0) return;
  kernels::rmsnorm_fwd<<<static_cast<unsigned>(rows), row_threads(cols), 0, s>>>(y, rstd, x, g, cols, kRmsNormEps);
  PPSIM_CUDA_CHECK_LAUNCH();
}

void rmsnorm_bwd_input(__nv_bfloat16* dx, const __nv_bfloat16* resid, const __nv_bfloat16* dy,
                       const __nv_bfloat16* x, const __nv_bfloat16* g, const float* rstd, std::int64_t rows, int cols,
                       cudaStream_t s) {
  if (rows <= 0) return;
  kernels::rmsnorm_bwd_input<<<static_cast<unsigned>(rows), row_threads(cols), 0, s>>>(dx, resid, dy, x, g, rstd,
                                                                                       cols);
  PPSIM_CUDA_CHECK_LAUNCH();
}

void rmsnorm_bwd_gamma(float* dg, const __nv_bfloat16* dy, const __nv_bfloat16* x, const float* rstd,
                       std::int64_t rows, int cols, cudaStream_t s) {
  if (rows <= 0) return;
  constexpr int kRowsPerBlock = 64;
  const dim3 grid(static_cast<unsigned>((cols + 255) / 256), static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock));
  kernels::rmsnorm_bwd_gamma<<<grid, 256, 0, s>>>(dg, dy, x, rstd, rows, cols, kRowsPerBlock);
  PPSIM_CUDA_CHECK_LAUNCH();
}

void swiglu_fwd(__nv_bfloat16* a, const __nv_bfloat16* gu, std::int64_t rows, int f, cudaStream_t s) {
  const std::int64_t pairs = rows * (f / 2);
  if (pairs <= 0) return;
  const unsigned grid = static_cast<unsigned>(std::min<std::int64_t>((pairs + 255) / 256, 132 * 32));
  kernels::swiglu_fwd<<<grid, 256, 0, s>>>(a, gu, rows, f);
  PPSIM_CUDA_CHECK_LAUNCH();
}

void swiglu_bwd(__nv_bfloat16* dgu, const __nv_bfloat16* da, const __nv_bfloat16* gu, std::int64_t rows, int f,
                cudaStream_t s) {
  const std::int64_t pairs = rows * (f / 2);
  if (pairs <= 0) return;
  const unsigned grid = static_cast<unsigned>(std::min<std::int64_t>((pairs + 255) / 256, 132 * 32));
  kernels::swiglu_bwd<<<grid, 256, 0, s>>>(dgu, da, gu, rows, f);
  PPSIM_CUDA_CHECK_LAUNCH();
}

}  // namespace ppsim::gpu
