// Check macros for every CUDA, cuBLAS(Lt), cuDNN and NCCL call of the back-end. A failure
// throws ppsim::InputError(kExitGpu) whose message names the call, file:line and the library's
// error, followed by a `hint:` line (which GPU, which environment variable or flag helps);
// nothing here aborts. Kernel launches are followed by PPSIM_CUDA_CHECK_LAUNCH().
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <string>

namespace ppsim::gpu {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t st, const char* expr, const char* file, int line);
[[noreturn]] void throw_cudnn_error(cudnnStatus_t st, const char* expr, const char* file, int line);
[[noreturn]] void throw_nccl_error(ncclResult_t st, const char* expr, const char* file, int line);
// A GPU-side failure that is not a library status (a timeout, an unsupported shape).
[[noreturn]] void throw_gpu_failure(const std::string& what, const std::string& hint);

// "GPU 0 (NVIDIA H100 80GB HBM3, sm_90)"; never throws (falls back to "GPU ?").
std::string current_gpu_label();

}  // namespace ppsim::gpu

#define PPSIM_CUDA_CHECK(expr)                                                            \
  do {                                                                                    \
    const cudaError_t ppsim_err_ = (expr);                                                \
    if (ppsim_err_ != cudaSuccess) ::ppsim::gpu::throw_cuda_error(ppsim_err_, #expr, __FILE__, __LINE__); \
  } while (0)

#define PPSIM_CUDA_CHECK_LAUNCH() PPSIM_CUDA_CHECK(cudaGetLastError())

#define PPSIM_CUBLAS_CHECK(expr)                                                          \
  do {                                                                                    \
    const cublasStatus_t ppsim_st_ = (expr);                                              \
    if (ppsim_st_ != CUBLAS_STATUS_SUCCESS) ::ppsim::gpu::throw_cublas_error(ppsim_st_, #expr, __FILE__, __LINE__); \
  } while (0)

#define PPSIM_CUDNN_CHECK(expr)                                                           \
  do {                                                                                    \
    const cudnnStatus_t ppsim_st_ = (expr);                                               \
    if (ppsim_st_ != CUDNN_STATUS_SUCCESS) ::ppsim::gpu::throw_cudnn_error(ppsim_st_, #expr, __FILE__, __LINE__); \
  } while (0)

#define PPSIM_NCCL_CHECK(expr)                                                            \
  do {                                                                                    \
    const ncclResult_t ppsim_st_ = (expr);                                                \
    if (ppsim_st_ != ncclSuccess && ppsim_st_ != ncclInProgress)                          \
      ::ppsim::gpu::throw_nccl_error(ppsim_st_, #expr, __FILE__, __LINE__);               \
  } while (0)
