// Launchers for elementwise kernels: reproducible random fills and the residual add.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace ppsim::gpu {

// out[i] = offset + scale * u(seed, first_index + i), u uniform in [-1, 1): a slice starting at
// first_index of the tensor that first_index = 0 fills (an EP rank's experts).
void fill_uniform(__nv_bfloat16* out, std::int64_t n, float scale, std::uint64_t seed, cudaStream_t s,
                  float offset = 0.f, std::int64_t first_index = 0);
void fill_uniform(float* out, std::int64_t n, float scale, std::uint64_t seed, cudaStream_t s, float offset = 0.f);
// out = a + b; out may alias a or b.
void add(__nv_bfloat16* out, const __nv_bfloat16* a, const __nv_bfloat16* b, std::int64_t n, cudaStream_t s);

// Holds stream `s` for `us` microseconds (one thread of one block, sleeping): work enqueued behind
// it, on `s` or on streams that wait for it, starts together once it ends.
void hold_stream(cudaStream_t s, double us);

// Spins one thread for `us` microseconds and writes out[0] = SM clock cycles, out[1] = ns passed
// (device memory): the SM clock sustained meanwhile is out[0] / out[1] GHz.
void clock_probe(cudaStream_t s, double us, unsigned long long* out);

// *out += the checksum of `bytes` bytes at p (a multiple of 4; kernels::checksum_words).
void checksum(const void* p, std::size_t bytes, unsigned long long* out, cudaStream_t s);
// Holds stream `s` until *word >= value (pinned host memory, mapped) or timeout_s passed.
void wait_word(const std::uint32_t* word, std::uint32_t value, double timeout_s, cudaStream_t s);

}  // namespace ppsim::gpu
