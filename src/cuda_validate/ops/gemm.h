// GEMMs through cuBLASLt, described in row-major terms (the layout of every activation and
// weight here): C[M,N] = alpha * op(A)[M,K] . op(B)[K,N] + beta * C, optionally batched with
// element strides. A is stored [M,K] (or [K,M] when a_trans), B [K,N] (or [N,K] when b_trans).
// The three calls of a linear layer y = x w^T (w stored [out,in], as in PyTorch):
//   forward       y[T,out]   = x[T,in] . w^T        cuBLAS "TN"
//   input-grad    dx[T,in]   = dy[T,out] . w        cuBLAS "NN"
//   weight-grad   dw[out,in] = dy^T . x  (+= dw)    cuBLAS "NT", fp32 or bf16 dw
// Not obvious: cuBLAS is column-major, so each call runs as C^T = op(B)^T op(A)^T. Plans
// (descriptors + algorithm) are cached per shape. By default the algorithm is cuBLASLt's
// heuristic first pick; with autotuning (PPSIM_GEMM_AUTOTUNE=1, or Gemm(true)) the first call of
// a shape times up to kCandidates picks on the real operands (synchronising the stream once) and
// keeps the fastest. On H200s autotuning sped 4096^3 NN/NT products up by ~10% but slowed some
// 4096 x 14336 ones by ~10% in the steady-state benchmark (short tuning bursts do not see
// sustained-load clocks), so it is opt-in; bench/gpu_kernel_bench reports both (docs/GPU.md).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "cuda_validate/device_buffer.h"

namespace ppsim::gpu {

using bf16 = __nv_bfloat16;

enum class DType : std::uint8_t { BF16, F32 };

struct GemmArgs {
  std::int64_t m = 0, n = 0, k = 0;
  bool a_trans = false, b_trans = false;
  std::int64_t lda = 0, ldb = 0, ldc = 0;  // row strides (elements) of A, B, C as stored
  DType c_type = DType::BF16;               // A and B are bf16
  int batch = 1;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // between batches, elements
  float alpha = 1.f, beta = 0.f;
};

class Gemm {
 public:
  Gemm();                         // autotuning from PPSIM_GEMM_AUTOTUNE (default off)
  explicit Gemm(bool autotune);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // c_in: the C read when beta != 0 (same layout as the output); null = the output itself.
  void run(const GemmArgs& g, void* c, const bf16* a, const bf16* b, cudaStream_t stream, const void* c_in = nullptr);

  // Linear-layer helpers (see the file comment). `batch` > 1: per-batch strides are the
  // packed sizes (rows*cols) of each operand, e.g. one weight matrix per expert.
  // resid (optional, [rows, out]): y = x w^T + resid, the residual add fused into the GEMM.
  void linear_fwd(bf16* y, const bf16* x, const bf16* w, std::int64_t rows, std::int64_t in, std::int64_t out,
                  cudaStream_t s, int batch = 1, const bf16* resid = nullptr);
  void linear_bwd_input(bf16* dx, const bf16* dy, const bf16* w, std::int64_t rows, std::int64_t in,
                        std::int64_t out, cudaStream_t s, float beta = 0.f, int batch = 1);
  void linear_bwd_weight(void* dw, DType dw_type, const bf16* dy, const bf16* x, std::int64_t rows,
                         std::int64_t in, std::int64_t out, cudaStream_t s, float beta = 1.f, int batch = 1);

  static constexpr std::size_t kWorkspaceBytes = 32u << 20;
  static constexpr int kCandidates = 12;

 private:
  struct Plan;
  struct Operands {
    const bf16* a;
    const bf16* b;
    const void* c_in;
    void* workspace;
    cudaStream_t stream;
  };
  using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, bool, bool, std::int64_t, std::int64_t,
                         std::int64_t, int, int, std::int64_t, std::int64_t, std::int64_t, bool, int>;
  Plan& plan_for(const GemmArgs& g, int align, const Operands& ops);
  cublasLtMatmulAlgo_t fastest(const Plan& p, const GemmArgs& g, const cublasLtMatmulHeuristicResult_t* results,
                               int found, const Operands& ops);
  void* workspace_for(cudaStream_t s);

  cublasLtHandle_t lt_ = nullptr;
  bool autotune_ = false;
  std::mutex mu_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  std::map<cudaStream_t, DeviceBuffer<char>> workspaces_;
};

}  // namespace ppsim::gpu
