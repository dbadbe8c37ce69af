// Elementwise kernels: random fills (for weights and test data) and the residual add.
#pragma once
#include "cuda_validate/kernels/common.cuh"

namespace ppsim::gpu::kernels {

__global__ void fill_uniform_bf16(bf16* out, std::int64_t n, float scale, float offset, std::uint64_t seed,
                                  std::int64_t first) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = to_bf(offset + scale * hash_uniform(seed, static_cast<std::uint64_t>(first + i)));
}

__global__ void fill_uniform_f32(float* out, std::int64_t n, float scale, float offset, std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = offset + scale * hash_uniform(seed, static_cast<std::uint64_t>(i));
}

// out = a + b (bf16, accumulated in float); out may alias a or b.
__global__ void add_bf16(bf16* out, const bf16* a, const bf16* b, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = to_bf(to_f(a[i]) + to_f(b[i]));
}

// One thread that returns `ns` nanoseconds (GPU global timer) after it starts: holds a stream
// while the host enqueues work behind it.
__global__ void hold_ns(std::uint64_t ns) {
  std::uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

// One thread that spins `ns` nanoseconds of the global timer and writes the SM clock cycles
// (clock64) and the nanoseconds that passed: their ratio is the clock the SM ran at meanwhile.
__global__ void clock_probe(std::uint64_t ns, unsigned long long* out) {
  std::uint64_t t0, t;
  const long long c0 = clock64();
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
  out[0] = static_cast<unsigned long long>(clock64() - c0);
  out[1] = t - t0;
}

// A message's checksum: sum over its 32-bit words w[i] of (w[i] + 1) * (2i + 1), modulo 2^64
// (order-free, so blocks add their parts with one atomic each; a word moved or changed changes it).
__global__ void checksum_words(const std::uint32_t* w, std::int64_t n, unsigned long long* out) {
  unsigned long long acc = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    acc += (static_cast<unsigned long long>(w[i]) + 1ull) * (2ull * static_cast<unsigned long long>(i) + 1ull);
  for (int off = 16; off > 0; off /= 2) acc += __shfl_down_sync(0xffffffffu, acc, off);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);
}

// One thread that returns once *word >= value (a word in pinned host memory the host sets), or
// after timeout_ns: holds a stream until the host releases every GPU at once.
__global__ void wait_word(const volatile std::uint32_t* word, std::uint32_t value, std::uint64_t timeout_ns) {
  std::uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    if (*word >= value) return;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < timeout_ns);
}

}  // namespace ppsim::gpu::kernels
