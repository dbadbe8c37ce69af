// GPU presence checks for the CLI; compiled only with the CUDA back-end.
#include <cuda_runtime.h>

#include <fmt/format.h>

#include "cuda_validate/check.h"
#include "cuda_validate/gpu_api.h"

namespace ppsim::gpu {

bool built_with_cuda() { return true; }

std::string gpu_unavailable_reason() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return fmt::format("no usable CUDA GPU: {} ({})", cudaGetErrorString(err), static_cast<int>(err));
  }
  if (n == 0) return "no CUDA GPU found";
  return {};
}

int device_count() {
  int n = 0;
  PPSIM_CUDA_CHECK(cudaGetDeviceCount(&n));
  return n;
}

std::string device_name(int device) {
  cudaDeviceProp prop{};
  PPSIM_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

}  // namespace ppsim::gpu
