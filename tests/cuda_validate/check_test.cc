// The check macros turn library failures into InputError(kExitGpu) with file:line and a hint;
// ChunkShape validation. These run without a GPU (tag [cuda]: built only with the CUDA back-end).
#include <string>

#include "catch.h"
#include "core/error.h"
#include "cuda_validate/check.h"
#include "cuda_validate/gpu_api.h"

namespace {

std::string failure_of(void (*fn)()) {
  try {
    fn();
  } catch (const ppsim::InputError& e) {
    CHECK(e.exit_code() == ppsim::kExitGpu);
    return e.message();
  }
  return "(no exception)";
}

}  // namespace

TEST_CASE("CUDA check macro throws InputError with file, line and hint", "[cuda]") {
  const std::string m = failure_of([] { PPSIM_CUDA_CHECK(cudaErrorMemoryAllocation); });
  INFO(m);
  CHECK(m.find("check_test.cc:") != std::string::npos);
  CHECK(m.find("cudaErrorMemoryAllocation") != std::string::npos);  // the failing expression
  CHECK(m.find("\nhint: ") != std::string::npos);
  CHECK(m.find("smaller shape") != std::string::npos);
}

TEST_CASE("cuBLAS, cuDNN and NCCL check macros name the library and hint at its log variable", "[cuda]") {
  const std::string b = failure_of([] { PPSIM_CUBLAS_CHECK(CUBLAS_STATUS_NOT_SUPPORTED); });
  INFO(b);
  CHECK(b.find("cuBLAS") != std::string::npos);
  CHECK(b.find("CUBLASLT_LOG_LEVEL") != std::string::npos);
  const std::string d = failure_of([] { PPSIM_CUDNN_CHECK(CUDNN_STATUS_NOT_SUPPORTED); });
  INFO(d);
  CHECK(d.find("cuDNN") != std::string::npos);
  CHECK(d.find("CUDNN_LOGERR_DBG") != std::string::npos);
  CHECK(d.find("PPSIM_ATTENTION=reference") != std::string::npos);
  const std::string n = failure_of([] { PPSIM_NCCL_CHECK(ncclInvalidArgument); });
  INFO(n);
  CHECK(n.find("NCCL_DEBUG=INFO") != std::string::npos);
  // Success statuses pass through.
  PPSIM_CUDA_CHECK(cudaSuccess);
  PPSIM_CUBLAS_CHECK(CUBLAS_STATUS_SUCCESS);
  PPSIM_CUDNN_CHECK(CUDNN_STATUS_SUCCESS);
  PPSIM_NCCL_CHECK(ncclSuccess);
}

TEST_CASE("ChunkShape names its first problem", "[cuda]") {
  ppsim::gpu::ChunkShape s;
  CHECK(s.problem().empty());
  s.kv_heads = 5;  // 32 heads
  CHECK(s.problem().find("multiple of kv_heads") != std::string::npos);
  s = {};
  s.experts = 8;
  s.top_k = 0;
  CHECK(s.problem().find("top_k") != std::string::npos);
  s.top_k = 2;
  s.expert_ffn_hidden = 2048;
  CHECK(s.problem().empty());
  // capacity = ceil(1.25 * 4096 tokens * 2 / 8) = 1280, already a multiple of 16
  CHECK(s.expert_capacity() == 1280);
  s.capacity_factor = 1.0;
  s.seq_len = 100;  // 100 * 2 / 8 = 25 -> rounded up to 32
  CHECK(s.expert_capacity() == 32);
}
