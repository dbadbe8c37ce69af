// Causal self-attention forward and backward on the packed token-major layout of a chunk:
//   qkv  [batch*seq, (heads + 2*kv_heads) * head_dim]  per token: Q heads, then K heads, then V heads
//   o    [batch*seq, heads * head_dim]
//   lse  [batch, heads, seq] float: log-sum-exp of the scaled scores of each query (the softmax stats)
//   dqkv like qkv.
// Two implementations: cuDNN's fused flash attention, built as an operation graph through the
// cuDNN 9 backend C API (attention_cudnn.cc), and a reference of cuBLASLt GEMMs + softmax kernels
// (attention_ref.cu) that materialises the scores a block of heads at a time. make_attention()
// picks cuDNN unless PPSIM_ATTENTION=reference, and falls back to the reference (saying so on
// stderr) when cuDNN cannot build a plan for the shape.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace ppsim::gpu {

class Gemm;

struct AttentionShape {
  int batch = 1, seq = 1, heads = 1, kv_heads = 1, head_dim = 64;
  std::int64_t qkv_width() const { return static_cast<std::int64_t>(heads + 2 * kv_heads) * head_dim; }
  std::int64_t tokens() const { return static_cast<std::int64_t>(batch) * seq; }
  float scale() const;  // 1/sqrt(head_dim)
};

class Attention {
 public:
  virtual ~Attention() = default;
  virtual const char* name() const = 0;  // "cudnn" or "reference"
  virtual void forward(__nv_bfloat16* o, float* lse, const __nv_bfloat16* qkv, cudaStream_t s) = 0;
  virtual void backward(__nv_bfloat16* dqkv, const __nv_bfloat16* dout, const __nv_bfloat16* qkv,
                        const __nv_bfloat16* o, const float* lse, cudaStream_t s) = 0;
};

std::unique_ptr<Attention> make_cudnn_attention(const AttentionShape& shape);
std::unique_ptr<Attention> make_reference_attention(const AttentionShape& shape, Gemm& gemm);
// cuDNN unless PPSIM_ATTENTION=reference; `note` (if given) receives why the reference was chosen.
std::unique_ptr<Attention> make_attention(const AttentionShape& shape, Gemm& gemm, std::string* note = nullptr);

}  // namespace ppsim::gpu
