// The host-side entry points of the CUDA back-end that the CLI calls. Implemented in
// src/cuda_validate/ when built with CUDA, and by no_cuda.cc otherwise.
#pragma once
#include <string>

namespace ppsim::gpu {

bool built_with_cuda();
// "" when a usable GPU is present; otherwise one line saying why not.
std::string gpu_unavailable_reason();

}  // namespace ppsim::gpu
