// Helpers for the GPU tests: skip without a GPU, host bf16 rounding, random bf16 data made on
// the host (so the reference sees exactly the GPU's inputs), device upload/download, and the
// relative error ||got - ref|| / ||ref|| that every check uses (NaN anywhere fails).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cuda_bf16.h>

#include "catch.h"
#include "cuda_validate/device_buffer.h"
#include "cuda_validate/gpu_api.h"
#include "moe_reference.h"

#define PPSIM_REQUIRE_GPU()                                                              \
  do {                                                                                   \
    const std::string ppsim_why_ = ::ppsim::gpu::gpu_unavailable_reason();               \
    if (!ppsim_why_.empty()) PPSIM_SKIP("no GPU: " << ppsim_why_);                       \
  } while (0)

namespace ppsim::gpu::test {

using bf16 = __nv_bfloat16;

inline float bf16_bits_to_float(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline std::uint16_t float_to_bf16_bits(float f) {  // round to nearest even
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
inline float round_bf16(float f) { return bf16_bits_to_float(float_to_bf16_bits(f)); }

inline std::vector<float> to_float(const std::vector<bf16>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::uint16_t b;
    std::memcpy(&b, &v[i], sizeof b);
    out[i] = bf16_bits_to_float(b);
  }
  return out;
}
inline std::vector<bf16> to_bf16(const std::vector<float>& v) {
  std::vector<bf16> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::uint16_t b = float_to_bf16_bits(v[i]);
    std::memcpy(static_cast<void*>(&out[i]), &b, sizeof b);
  }
  return out;
}

// Uniform in [-scale, scale), rounded to bf16 (so host and device hold the same values).
inline std::vector<float> random_bf16_values(std::size_t n, float scale, std::uint32_t seed, float offset = 0.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = round_bf16(offset + u(rng));
  return v;
}

inline DeviceBuffer<bf16> upload_bf16(const std::vector<float>& v) {
  DeviceBuffer<bf16> d;
  d.from_host(to_bf16(v));
  return d;
}
inline DeviceBuffer<float> upload_f32(const std::vector<float>& v) {
  DeviceBuffer<float> d;
  d.from_host(v);
  return d;
}
inline std::vector<float> download(const DeviceBuffer<bf16>& d) {
  PPSIM_CUDA_CHECK(cudaDeviceSynchronize());
  return to_float(d.to_host());
}
inline std::vector<float> download(const DeviceBuffer<float>& d) {
  PPSIM_CUDA_CHECK(cudaDeviceSynchronize());
  return d.to_host();
}
inline std::vector<float> download_bf16(const bf16* p, std::size_t n) {
  PPSIM_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<bf16> h(n);
  PPSIM_CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(bf16), cudaMemcpyDeviceToHost));
  return to_float(h);
}
inline std::vector<float> download_f32(const float* p, std::size_t n) {
  PPSIM_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> h(n);
  PPSIM_CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}

// ||got - ref|| / ||ref||; +inf when got holds a NaN/inf or the sizes differ.
template <typename A, typename B>
double rel_error(const std::vector<A>& got, const std::vector<B>& ref) {
  if (got.size() != ref.size()) return INFINITY;
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]), r = static_cast<double>(ref[i]);
    if (!std::isfinite(g)) return INFINITY;
    num += (g - r) * (g - r);
    den += r * r;
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// A dense chunk small enough for a test of order and bytes (hidden 128, 4 heads over 2 kv heads,
// ffn 256, 64 tokens): the replay tests', the graph launch test's and the dense chunk test's.
inline ChunkShape tiny_dense_shape(int layers) {
  ChunkShape s;
  s.hidden = 128;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 32;
  s.ffn_hidden = 256;
  s.seq_len = 64;
  s.micro_batch = 1;
  s.layers = layers;
  return s;
}

// Relative error bounds: bf16 outputs of fp32-accumulated math, and fp32 outputs.
inline constexpr double kBf16Tol = 1e-2;
inline constexpr double kF32Tol = 1e-4;

}  // namespace ppsim::gpu::test
