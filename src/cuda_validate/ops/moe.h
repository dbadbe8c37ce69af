// Launchers for MoE routing and token movement (kernels/moe.cuh has the contract: token-order
// positions, fixed capacity per expert, empty rows zero-filled). Assignments are flattened as
// i = token * top_k + j.
#pragma once
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace ppsim::gpu {

struct MoeRouting {
  float* probs = nullptr;      // [tokens, experts], softmax of the router logits
  int* topk_idx = nullptr;     // [tokens * top_k]
  float* topk_w = nullptr;     // [tokens * top_k]
  int* slot_of = nullptr;      // [tokens * top_k], permuted row or -1 (dropped)
  int* slot_token = nullptr;   // [experts * capacity], assignment index or -1 (empty)
  int* counts = nullptr;       // [experts], assignments before capacity
  std::int64_t tokens = 0;
  int experts = 0, top_k = 0;
  std::int64_t capacity = 0;
};

// Softmax + top-k of logits [tokens, experts], then token-order slot assignment.
void moe_route(const MoeRouting& r, const __nv_bfloat16* logits, cudaStream_t s);
// Dispatch forward: xp [experts*capacity, cols] from x [tokens, cols].
void moe_permute(__nv_bfloat16* xp, const __nv_bfloat16* x, const MoeRouting& r, int cols, cudaStream_t s);
// Combine forward: out = resid + sum_j w_j * zp[slot_j]; out may alias resid.
void moe_combine(__nv_bfloat16* out, const __nv_bfloat16* resid, const __nv_bfloat16* zp, const MoeRouting& r,
                 int cols, cudaStream_t s);
// Combine backward: dzp [experts*capacity, cols] and dw [tokens*top_k] (defined for kept assignments).
void moe_combine_bwd(__nv_bfloat16* dzp, float* dw, const __nv_bfloat16* dout, const __nv_bfloat16* zp,
                     const MoeRouting& r, int cols, cudaStream_t s);
// Dispatch backward: dx [tokens, cols] = sum over the token's kept slots of dxp.
void moe_permute_bwd(__nv_bfloat16* dx, const __nv_bfloat16* dxp, const MoeRouting& r, int cols, cudaStream_t s);
// Router backward: dlogits [tokens, experts] from dw through top-k and softmax.
void moe_router_bwd(__nv_bfloat16* dlogits, const float* dw, const MoeRouting& r, cudaStream_t s);

}  // namespace ppsim::gpu
