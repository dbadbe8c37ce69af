// Launchers of kernels/moe.cuh.
#include "cuda_validate/ops/moe.h"

#include <algorithm>

#include "cuda_validate/check.h"
#include "cuda_validate/kernels/moe.cuh"

namespace ppsim::gpu {
namespace {
int row_threads(int cols) { return std::clamp((cols / 8 + 31) / 32 * 32, 32, 256); }
unsigned warp_blocks(std::int64_t tokens) { return static_cast<unsigned>((tokens + 7) / 8); }  // 8 warps a block
}  // namespace

void moe_route(const MoeRouting& r, const __nv_bfloat16* logits, cudaStream_t s) {
  if (r.tokens <= 0) return;
  kernels::router_topk<<<warp_blocks(r.tokens), 256, 0, s>>>(r.probs, r.topk_idx, r.topk_w, logits, r.tokens,
                                                             r.experts, r.top_k);
  PPSIM_CUDA_CHECK_LAUNCH();
  kernels::assign_slots<<<static_cast<unsigned>(r.experts), 1024, 0, s>>>(
      r.slot_of, r.slot_token, r.counts, r.topk_idx, r.tokens * r.top_k, static_cast<int>(r.capacity));
  PPSIM_CUDA_CHECK_LAUNCH();
}

void moe_permute(__nv_bfloat16* xp, const __nv_bfloat16* x, const MoeRouting& r, int cols, cudaStream_t s) {
  const std::int64_t rows = r.capacity * r.experts;
  if (rows <= 0) return;
  kernels::permute_rows<<<static_cast<unsigned>(rows), row_threads(cols), 0, s>>>(xp, x, r.slot_token, r.top_k, cols);
  PPSIM_CUDA_CHECK_LAUNCH();
}

void moe_combine(__nv_bfloat16* out, const __nv_bfloat16* resid, const __nv_bfloat16* zp, const MoeRouting& r,
                 int cols, cudaStream_t s) {
  if (r.tokens <= 0) return;
  kernels::combine_rows<<<static_cast<unsigned>(r.tokens), row_threads(cols), 0, s>>>(out, resid, zp, r.slot_of,
                                                                                      r.topk_w, r.top_k, cols);
  PPSIM_CUDA_CHECK_LAUNCH();
}

void moe_combine_bwd(__nv_bfloat16* dzp, float* dw, const __nv_bfloat16* dout, const __nv_bfloat16* zp,
                     const MoeRouting& r, int cols, cudaStream_t s) {
  const std::int64_t rows = r.capacity * r.experts;
  if (rows <= 0) return;
  kernels::combine_rows_bwd<<<static_cast<unsigned>(rows), row_threads(cols), 0, s>>>(dzp, dw, dout, zp, r.slot_token,
                                                                                      r.topk_w, r.top_k, cols);
  PPSIM_CUDA_CHECK_LAUNCH();
}

void moe_permute_bwd(__nv_bfloat16* dx, const __nv_bfloat16* dxp, const MoeRouting& r, int cols, cudaStream_t s) {
  if (r.tokens <= 0) return;
  kernels::unpermute_rows_sum<<<static_cast<unsigned>(r.tokens), row_threads(cols), 0, s>>>(dx, dxp, r.slot_of,
                                                                                            r.top_k, cols);
  PPSIM_CUDA_CHECK_LAUNCH();
}

void moe_router_bwd(__nv_bfloat16* dlogits, const float* dw, const MoeRouting& r, cudaStream_t s) {
  if (r.tokens <= 0) return;
  kernels::router_bwd<<<warp_blocks(r.tokens), 256, 0, s>>>(dlogits, r.probs, r.topk_idx, r.slot_of, dw, r.tokens,
                                                            r.experts, r.top_k);
  PPSIM_CUDA_CHECK_LAUNCH();
}

}  // namespace ppsim::gpu
