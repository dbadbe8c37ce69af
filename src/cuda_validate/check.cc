// The throwing half of check.h: builds "file:line: call failed: reason" plus a `hint:` line.
#include "cuda_validate/check.h"

#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "core/error.h"

namespace ppsim::gpu {
namespace {

std::string base_name(const char* file) {
  std::string f = file;
  const auto pos = f.find("src/cuda_validate/");
  return pos == std::string::npos ? f : f.substr(pos);
}

[[noreturn]] void raise(const char* lib, const char* expr, const char* file, int line, const std::string& reason,
                        const std::string& hint) {
  throw InputError(fmt::format("{}:{}: {} call '{}' failed: {}\nhint: {}: {}", base_name(file), line, lib, expr,
                               reason, current_gpu_label(), hint),
                   {}, kExitGpu);
}

}  // namespace

std::string current_gpu_label() {
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return "GPU ?";
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return fmt::format("GPU {}", dev);
  }
  return fmt::format("GPU {} ({}, sm_{}{})", dev, prop.name, prop.major, prop.minor);
}

void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  std::string hint;
  switch (err) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
      hint = "check nvidia-smi and CUDA_VISIBLE_DEVICES; the driver must support the CUDA runtime ppsim was built with";
      break;
    case cudaErrorMemoryAllocation:
      hint = "out of GPU memory: use a smaller shape (fewer layers, --micro-batch, --seq-len) or free the GPU "
             "(nvidia-smi lists its processes)";
      break;
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
      hint = "ppsim's kernels were built for another GPU: reconfigure with -DCMAKE_CUDA_ARCHITECTURES=<this GPU's sm, "
             "e.g. 90a for H100/H200>";
      break;
    default:
      hint = "rerun with CUDA_LAUNCH_BLOCKING=1 (or under compute-sanitizer) to find the failing kernel";
  }
  raise("CUDA", expr, file, line, fmt::format("{} ({})", cudaGetErrorString(err), static_cast<int>(err)), hint);
}

void throw_cublas_error(cublasStatus_t st, const char* expr, const char* file, int line) {
  std::string hint = "set CUBLASLT_LOG_LEVEL=5 to have cuBLASLt print the failing call";
  if (st == CUBLAS_STATUS_NOT_SUPPORTED)
    hint = "no cuBLASLt kernel for this GEMM's types/layout on this GPU; " + hint;
  else if (st == CUBLAS_STATUS_ALLOC_FAILED)
    hint = "out of GPU memory: use a smaller shape";
  raise("cuBLAS", expr, file, line, fmt::format("{} ({})", cublasLtGetStatusString(st), static_cast<int>(st)), hint);
}

void throw_cudnn_error(cudnnStatus_t st, const char* expr, const char* file, int line) {
  char detail[512] = {0};
  cudnnGetLastErrorString(detail, sizeof(detail));
  std::string reason = fmt::format("{} ({})", cudnnGetErrorString(st), static_cast<int>(st));
  if (detail[0] != '\0') reason += fmt::format(": {}", detail);
  raise("cuDNN", expr, file, line, reason,
        fmt::format("cuDNN {} loaded; CUDNN_LOGERR_DBG=1 CUDNN_LOGDEST_DBG=stderr prints cuDNN's reason; "
                    "PPSIM_ATTENTION=reference uses the cuBLAS + softmax attention instead",
                    cudnnGetVersion()));
}

void throw_nccl_error(ncclResult_t st, const char* expr, const char* file, int line) {
  raise("NCCL", expr, file, line, fmt::format("{} ({})", ncclGetErrorString(st), static_cast<int>(st)),
        "set NCCL_DEBUG=INFO for NCCL's reason; NCCL_P2P_DISABLE=1 rules out peer-to-peer paths");
}

void throw_gpu_failure(const std::string& what, const std::string& hint) {
  throw InputError(fmt::format("{}\nhint: {}: {}", what, current_gpu_label(), hint), {}, kExitGpu);
}

}  // namespace ppsim::gpu
