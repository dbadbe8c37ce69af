// MoE routing and token movement. Tokens pick top_k experts by softmax probability (weights are
// the selected probabilities, not renormalised). Assignment i = t*k + j of token t goes to
// expert e = idx[i] at position pos = #{i' < i : idx[i'] == e} (token order, deterministic);
// pos >= capacity C drops it. Expert e owns rows [e*C, (e+1)*C) of the permuted buffer;
// slot_token[row] = i or -1 (empty row, written as zeros so that padded rows stay finite and
// add nothing to weight-grads); slot_of[i] = row or -1 (dropped).
#pragma once
#include "cuda_validate/kernels/common.cuh"

namespace ppsim::gpu::kernels {

// One warp per token.
__global__ void router_topk(float* __restrict__ probs, int* __restrict__ idx, float* __restrict__ w,
                            const bf16* __restrict__ logits, std::int64_t tokens, int E, int k) {
  const std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (t >= tokens) return;
  const bf16* lr = logits + t * E;
  float* pr = probs + t * E;
  float m = -INFINITY;
  for (int e = lane; e < E; e += 32) m = fmaxf(m, to_f(lr[e]));
  m = warp_max(m);
  float sum = 0.f;
  for (int e = lane; e < E; e += 32) sum += __expf(to_f(lr[e]) - m);
  sum = warp_sum(sum);
  const float inv = 1.f / sum;
  for (int e = lane; e < E; e += 32) pr[e] = __expf(to_f(lr[e]) - m) * inv;
  __syncwarp();
  int chosen[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) chosen[j] = -1;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    if (j < k) {
      float best = -1.f;
      int best_e = 0x7fffffff;
      for (int e = lane; e < E; e += 32) {
        bool taken = false;
#pragma unroll
        for (int c = 0; c < 8; ++c) taken |= (chosen[c] == e);
        const float v = pr[e];
        if (!taken && (v > best || (v == best && e < best_e))) { best = v; best_e = e; }
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, best, o);
        const int oe = __shfl_xor_sync(0xffffffffu, best_e, o);
        if (ov > best || (ov == best && oe < best_e)) { best = ov; best_e = oe; }
      }
      if (best_e == 0x7fffffff) {
        // No probability compared (NaN logits, or +Inf ones whose softmax is NaN): take the
        // lowest free expert with weight 0, so that every index stays in [0, E) and every
        // assignment gets a slot or -1 (an index out of range used to leave slot_of unwritten,
        // and combine then read through whatever it held).
        best = 0.f;
        for (int e = 0; e < E && best_e == 0x7fffffff; ++e) {
          bool taken = false;
#pragma unroll
          for (int c = 0; c < 8; ++c) taken |= (chosen[c] == e);
          if (!taken) best_e = e;
        }
      }
      chosen[j] = best_e;
      if (lane == 0) {
        idx[t * k + j] = best_e;
        w[t * k + j] = best;
      }
    }
  }
}

// One block per expert (blockDim a multiple of 32, <= 1024). counts[e] = assignments before capacity.
__global__ void assign_slots(int* __restrict__ slot_of, int* __restrict__ slot_token, int* __restrict__ counts,
                             const int* __restrict__ idx, std::int64_t assignments, int capacity) {
  __shared__ int warp_tot[32];
  __shared__ int running;
  const int e = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  if (threadIdx.x == 0) running = 0;
  __syncthreads();
  for (std::int64_t base = 0; base < assignments; base += blockDim.x) {
    const std::int64_t i = base + threadIdx.x;
    const int flag = (i < assignments && idx[i] == e) ? 1 : 0;
    int incl = flag;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int v = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += v;
    }
    if (lane == 31) warp_tot[warp] = incl;
    __syncthreads();
    if (warp == 0) {
      int v = lane < nwarps ? warp_tot[lane] : 0;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int u = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v += u;
      }
      if (lane < nwarps) warp_tot[lane] = v;  // inclusive prefix of warp totals
    }
    __syncthreads();
    const int before = running + (warp > 0 ? warp_tot[warp - 1] : 0) + incl - flag;
    if (flag) {
      if (before < capacity) {
        slot_of[i] = e * capacity + before;
        slot_token[static_cast<std::int64_t>(e) * capacity + before] = static_cast<int>(i);
      } else {
        slot_of[i] = -1;
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) running += warp_tot[nwarps - 1];
    __syncthreads();
  }
  const int filled = running < capacity ? running : capacity;
  for (int p = filled + threadIdx.x; p < capacity; p += blockDim.x)
    slot_token[static_cast<std::int64_t>(e) * capacity + p] = -1;
  if (threadIdx.x == 0) counts[e] = running;
}

// Dispatch forward: one block per permuted row.
__global__ void permute_rows(bf16* __restrict__ xp, const bf16* __restrict__ x, const int* __restrict__ slot_token,
                             int k, int cols) {
  const std::int64_t row = blockIdx.x;
  const int i = slot_token[row];
  Bf16x8* dst = reinterpret_cast<Bf16x8*>(xp + row * cols);
  const int nvec = cols / 8;
  if (i < 0) {
    Bf16x8 z;
#pragma unroll
    for (int c = 0; c < 8; ++c) z.v[c] = to_bf(0.f);
    for (int v = threadIdx.x; v < nvec; v += blockDim.x) dst[v] = z;
  } else {
    const Bf16x8* src = reinterpret_cast<const Bf16x8*>(x + static_cast<std::int64_t>(i / k) * cols);
    for (int v = threadIdx.x; v < nvec; v += blockDim.x) dst[v] = src[v];
  }
}

// Combine forward: out[t] = resid[t] + sum_j w[t,j] * zp[slot_of[t,j]]; one block per token.
__global__ void combine_rows(bf16* out, const bf16* resid, const bf16* __restrict__ zp, const int* __restrict__ slot_of,
                             const float* __restrict__ w, int k, int cols) {
  const std::int64_t t = blockIdx.x;
  const int nvec = cols / 8;
  for (int v = threadIdx.x; v < nvec; v += blockDim.x) {
    float acc[8];
    const Bf16x8 r = reinterpret_cast<const Bf16x8*>(resid + t * cols)[v];
#pragma unroll
    for (int c = 0; c < 8; ++c) acc[c] = to_f(r.v[c]);
    for (int j = 0; j < k; ++j) {
      const int s = slot_of[t * k + j];
      if (s < 0) continue;
      const float wj = w[t * k + j];
      const Bf16x8 z = reinterpret_cast<const Bf16x8*>(zp + static_cast<std::int64_t>(s) * cols)[v];
#pragma unroll
      for (int c = 0; c < 8; ++c) acc[c] += wj * to_f(z.v[c]);
    }
    Bf16x8 o;
#pragma unroll
    for (int c = 0; c < 8; ++c) o.v[c] = to_bf(acc[c]);
    reinterpret_cast<Bf16x8*>(out + t * cols)[v] = o;
  }
}

// Combine backward, one block per permuted row: dzp[row] = w[i] * dout[t] (zeros for empty
// rows) and dw[i] = dout[t] . zp[row] for filled rows.
__global__ void combine_rows_bwd(bf16* __restrict__ dzp, float* __restrict__ dw, const bf16* __restrict__ dout,
                                 const bf16* __restrict__ zp, const int* __restrict__ slot_token,
                                 const float* __restrict__ w, int k, int cols) {
  __shared__ float scratch[32];
  const std::int64_t row = blockIdx.x;
  const int i = slot_token[row];
  const int nvec = cols / 8;
  Bf16x8* dst = reinterpret_cast<Bf16x8*>(dzp + row * cols);
  if (i < 0) {
    Bf16x8 z;
#pragma unroll
    for (int c = 0; c < 8; ++c) z.v[c] = to_bf(0.f);
    for (int v = threadIdx.x; v < nvec; v += blockDim.x) dst[v] = z;
    return;  // the whole block takes this branch
  }
  const float wi = w[i];
  const Bf16x8* d = reinterpret_cast<const Bf16x8*>(dout + static_cast<std::int64_t>(i / k) * cols);
  const Bf16x8* z = reinterpret_cast<const Bf16x8*>(zp + row * cols);
  float dot = 0.f;
  for (int v = threadIdx.x; v < nvec; v += blockDim.x) {
    const Bf16x8 dv = d[v], zv = z[v];
    Bf16x8 o;
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      dot += to_f(dv.v[c]) * to_f(zv.v[c]);
      o.v[c] = to_bf(wi * to_f(dv.v[c]));
    }
    dst[v] = o;
  }
  dot = block_sum(dot, scratch);
  if (threadIdx.x == 0) dw[i] = dot;
}

// Dispatch backward: dx[t] = sum_j dxp[slot_of[t,j]] (kept assignments); one block per token.
__global__ void unpermute_rows_sum(bf16* __restrict__ dx, const bf16* __restrict__ dxp, const int* __restrict__ slot_of,
                                   int k, int cols) {
  const std::int64_t t = blockIdx.x;
  const int nvec = cols / 8;
  for (int v = threadIdx.x; v < nvec; v += blockDim.x) {
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int j = 0; j < k; ++j) {
      const int s = slot_of[t * k + j];
      if (s < 0) continue;
      const Bf16x8 g = reinterpret_cast<const Bf16x8*>(dxp + static_cast<std::int64_t>(s) * cols)[v];
#pragma unroll
      for (int c = 0; c < 8; ++c) acc[c] += to_f(g.v[c]);
    }
    Bf16x8 o;
#pragma unroll
    for (int c = 0; c < 8; ++c) o.v[c] = to_bf(acc[c]);
    reinterpret_cast<Bf16x8*>(dx + t * cols)[v] = o;
  }
}

// Router backward, one warp per token: dprob[e] = sum of dw over kept assignments to e;
// dlogits = p * (dprob - sum_e p_e dprob_e).
__global__ void router_bwd(bf16* __restrict__ dlogits, const float* __restrict__ probs, const int* __restrict__ idx,
                           const int* __restrict__ slot_of, const float* __restrict__ dw, std::int64_t tokens, int E,
                           int k) {
  const std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (t >= tokens) return;
  const float* pr = probs + t * E;
  float dot = 0.f;
  for (int j = 0; j < k; ++j) {
    const std::int64_t i = t * k + j;
    if (slot_of[i] >= 0) dot += pr[idx[i]] * dw[i];
  }
  for (int e = lane; e < E; e += 32) {
    float dp = 0.f;
    for (int j = 0; j < k; ++j) {
      const std::int64_t i = t * k + j;
      if (idx[i] == e && slot_of[i] >= 0) dp += dw[i];
    }
    dlogits[t * E + e] = to_bf(pr[e] * (dp - dot));
  }
}

}  // namespace ppsim::gpu::kernels
