// GPU presence checks for the CLI; compiled only with the CUDA back-end.
#include <cuda_runtime.h>

#include <fmt/format.h>

#include "cuda_validate/gpu_api.h"

namespace ppsim::gpu {

bool built_with_cuda() { return true; }

std::string gpu_unavailable_reason() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess)
    return fmt::format("no usable CUDA GPU: {} ({})", cudaGetErrorString(err), static_cast<int>(err));
  if (n == 0) return "no CUDA GPU found";
  return {};
}

}  // namespace ppsim::gpu
