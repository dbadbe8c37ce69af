// Built instead of the CUDA back-end when nvcc is absent (PPSIM_CUDA=OFF): the GPU commands
// exist and fail with one clear line.
#include "cuda_validate/gpu_api.h"

#include "core/error.h"

namespace ppsim::gpu {

bool built_with_cuda() { return false; }

std::string gpu_unavailable_reason() {
  return "this ppsim was built without the CUDA back-end (PPSIM_CUDA=OFF or no nvcc at build time)";
}

}  // namespace ppsim::gpu
