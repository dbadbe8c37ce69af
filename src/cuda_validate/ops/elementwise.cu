// Launchers of kernels/elementwise.cuh.
#include "cuda_validate/ops/elementwise.h"

#include <algorithm>

#include "cuda_validate/check.h"
#include "cuda_validate/kernels/elementwise.cuh"

namespace ppsim::gpu {
namespace {
unsigned grid_for(std::int64_t n) { return static_cast<unsigned>(std::min<std::int64_t>((n + 255) / 256, 132 * 16)); }
}  // namespace

void fill_uniform(__nv_bfloat16* out, std::int64_t n, float scale, std::uint64_t seed, cudaStream_t s, float offset,
                  std::int64_t first_index) {
  if (n <= 0) return;
  kernels::fill_uniform_bf16<<<grid_for(n), 256, 0, s>>>(out, n, scale, offset, seed, first_index);
  PPSIM_CUDA_CHECK_LAUNCH();
}

void fill_uniform(float* out, std::int64_t n, float scale, std::uint64_t seed, cudaStream_t s, float offset) {
  if (n <= 0) return;
  kernels::fill_uniform_f32<<<grid_for(n), 256, 0, s>>>(out, n, scale, offset, seed);
  PPSIM_CUDA_CHECK_LAUNCH();
}

void add(__nv_bfloat16* out, const __nv_bfloat16* a, const __nv_bfloat16* b, std::int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  kernels::add_bf16<<<grid_for(n), 256, 0, s>>>(out, a, b, n);
  PPSIM_CUDA_CHECK_LAUNCH();
}

void hold_stream(cudaStream_t s, double us) {
  kernels::hold_ns<<<1, 1, 0, s>>>(static_cast<std::uint64_t>(std::max(0.0, us) * 1e3));
  PPSIM_CUDA_CHECK_LAUNCH();
}

void clock_probe(cudaStream_t s, double us, unsigned long long* out) {
  kernels::clock_probe<<<1, 1, 0, s>>>(static_cast<std::uint64_t>(std::max(0.0, us) * 1e3), out);
  PPSIM_CUDA_CHECK_LAUNCH();
}

void checksum(const void* p, std::size_t bytes, unsigned long long* out, cudaStream_t s) {
  const std::int64_t n = static_cast<std::int64_t>(bytes / 4);
  if (n <= 0) return;
  kernels::checksum_words<<<std::min<unsigned>(grid_for(n), 264), 256, 0, s>>>(static_cast<const std::uint32_t*>(p), n,
                                                                               out);
  PPSIM_CUDA_CHECK_LAUNCH();
}

void wait_word(const std::uint32_t* word, std::uint32_t value, double timeout_s, cudaStream_t s) {
  kernels::wait_word<<<1, 1, 0, s>>>(word, value, static_cast<std::uint64_t>(timeout_s * 1e9));
  PPSIM_CUDA_CHECK_LAUNCH();
}

}  // namespace ppsim::gpu
