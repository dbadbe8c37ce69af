// Expert-parallel all-to-all, device code: dispatch and combine that write rows straight into
// the receiving rank's buffer (a peer pointer: another buffer on this GPU, a peer GPU's memory
// with peer access, or a CUDA IPC mapping; the kernels cannot tell them apart), on exactly the
// grid the launcher gives (the config's comm_sms blocks, each looping over its share of rows),
// and arrival flags in the receiver's memory. Row geometry: ep/ep_rows.h.
//
// Not obvious, the protocol: each sender block, after its last row store, stores `epoch` into
// flags[sender rank][block] of every destination with st.release.sys (after a __syncthreads, so
// the release covers every thread's stores of the block: bar.sync orders them before it and
// release is cumulative). A receiver waits until every flag of every source it needs is >= epoch
// with ld.acquire.sys (then __syncthreads, so the whole block may read). The epoch grows with
// every call on a buffer, so flags are never reset; a flag already past the epoch (a sender a
// call ahead) also counts. A wait gives up after timeout_ns (globaltimer) and leaves
// 1000 + source rank in stats->status instead of hanging the GPU; the rows are then not valid.
//
// What each PTX form buys (measured: see docs/VALIDATION.md; -DPPSIM_A2A_PLAIN=1 builds the
// baseline without them, and A2A_PLAIN=1 tools/a2a_check.sh benchmarks it):
//  - ld.global.nc.L1::no_allocate.L2::256B (source rows; read-only for the kernel's life): the
//    non-coherent read-only path, no L1 allocation (streamed once, so it evicts nothing that the
//    block's other loads reuse) and a 256-byte L2 prefetch per request, fewer L2 round trips.
//  - st.global.L1::no_allocate (row stores, most to a peer GPU): no L1 line for data never read
//    back by this SM.
//  - 16-byte vectors (int4): a warp moves 512 contiguous bytes per instruction, the fewest
//    NVLink/L2 transactions per byte.
//  - st.release.sys / ld.acquire.sys (flags): one ordered store per block and destination instead
//    of a __threadfence_system() by every thread, and the receiver needs no fence after seeing it.
#pragma once
#include "cuda_validate/kernels/common.cuh"
#include "ep/ep_rows.h"

namespace ppsim::gpu::kernels {

inline constexpr int kA2aMaxRanksDev = 8;
inline constexpr int kA2aMaxBlocksDev = 160;

// Receive buffers of the EP group, by rank (pointers valid on this device).
struct A2aPeersDev {
  bf16* rows[kA2aMaxRanksDev];
  int* counts[kA2aMaxRanksDev];
  unsigned long long* flags[kA2aMaxRanksDev];
};

struct A2aStatsDev {
  unsigned int blocks;  // blocks that ran (each adds one)
  unsigned int status;  // 0, or 1000 + the source rank a wait timed out on (first one sticks)
  int smid[kA2aMaxBlocksDev];
  unsigned long long wait_ns;  // summed over calls: how long block 0 of each end spun for peers' flags
};

#if defined(PPSIM_A2A_PLAIN)
// The baseline the PTX forms are measured against (tools/a2a_check.sh with A2A_PLAIN=1 builds
// it): plain 16-byte loads and stores, a __threadfence_system() before a volatile flag store,
// and a volatile flag load followed by one.
__device__ __forceinline__ int4 ld_nc_no_alloc(const int4* p) { return *p; }
__device__ __forceinline__ void st_no_alloc(int4* p, const int4& v) { *p = v; }
__device__ __forceinline__ void st_release_sys(unsigned long long* p, unsigned long long v) {
  __threadfence_system();
  *reinterpret_cast<volatile unsigned long long*>(p) = v;
}
__device__ __forceinline__ unsigned long long ld_acquire_sys(const unsigned long long* p) {
  const unsigned long long v = *reinterpret_cast<const volatile unsigned long long*>(p);
  __threadfence_system();
  return v;
}
#else
__device__ __forceinline__ int4 ld_nc_no_alloc(const int4* p) {
  int4 v;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800  // the L2 prefetch size hint needs sm_80
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.s32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
#else
  asm volatile("ld.global.nc.L1::no_allocate.v4.s32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
#endif
  return v;
}
__device__ __forceinline__ void st_no_alloc(int4* p, const int4& v) {
  asm volatile("st.global.L1::no_allocate.v4.s32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}
__device__ __forceinline__ void st_release_sys(unsigned long long* p, unsigned long long v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ unsigned long long ld_acquire_sys(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
#endif  // PPSIM_A2A_PLAIN

__device__ __forceinline__ unsigned long long global_timer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ int sm_id() {
  int id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

__device__ __forceinline__ void count_block(A2aStatsDev* stats) {
  if (stats != nullptr && threadIdx.x == 0) {
    atomicAdd(&stats->blocks, 1u);
    if (blockIdx.x < kA2aMaxBlocksDev) stats->smid[blockIdx.x] = sm_id();
  }
}

// One warp a row: this warp's first row and the number of warps in the grid (the stride).
__device__ __forceinline__ std::int64_t warp_row0() {
  return blockIdx.x * static_cast<std::int64_t>(blockDim.x / 32) + threadIdx.x / 32;
}
__device__ __forceinline__ std::int64_t grid_warps() {
  return static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
}

// Row r of an expert rank's [E/ep][ep][C] buffer: (local expert le, source src, position pos),
// and whether a token fills it (pos < counts[src][le], the counts its dispatch received).
struct BlockRow {
  std::int64_t pos;
  int src, le;
  bool filled;
};
__device__ __forceinline__ BlockRow block_row(const ep::EpGeometry& g, const int* counts, std::int64_t r) {
  const std::int64_t pos = r % g.capacity, blk = r / g.capacity;
  const int src = static_cast<int>(blk % g.ep), le = static_cast<int>(blk / g.ep);
  return {pos, src, le, pos < counts[src * g.experts_per_rank() + le]};
}

// One warp copies one row of `nvec` 16-byte vectors, four loads in flight per lane before the
// stores (a row of hidden 4096 is 512 vectors: 16 per lane).
__device__ __forceinline__ void copy_row(int4* __restrict__ dst, const int4* __restrict__ src, int nvec, int lane) {
  constexpr int kUnroll = 4;
  for (int base = lane; base < nvec; base += 32 * kUnroll) {
    int4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + 32 * u < nvec) v[u] = ld_nc_no_alloc(src + base + 32 * u);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + 32 * u < nvec) st_no_alloc(dst + base + 32 * u, v[u]);
  }
}

__device__ __forceinline__ void zero_row(int4* dst, int nvec, int lane) {
  const int4 z = make_int4(0, 0, 0, 0);
  for (int v = lane; v < nvec; v += 32) dst[v] = z;
}

// After the block's last store: every destination's flag [rank][block] = epoch (release).
__device__ __forceinline__ void signal_all(const A2aPeersDev& peers, int ep, int rank, unsigned long long epoch) {
  __syncthreads();
  if (threadIdx.x < ep)
    st_release_sys(peers.flags[threadIdx.x] + static_cast<std::int64_t>(rank) * kA2aMaxBlocksDev + blockIdx.x, epoch);
}

// Waits until flags[src][b] >= epoch for every source src < ep and sender block b < sender_blocks.
// Returns false (and sets stats->status) on timeout.
__device__ __forceinline__ bool wait_all(const unsigned long long* flags, int ep, int sender_blocks,
                                         unsigned long long epoch, unsigned long long timeout_ns, A2aStatsDev* stats) {
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  __syncthreads();
  const unsigned long long start = global_timer_ns();
  for (int f = threadIdx.x; f < ep * sender_blocks; f += blockDim.x) {
    const int src = f / sender_blocks, b = f % sender_blocks;
    const unsigned long long* p = flags + static_cast<std::int64_t>(src) * kA2aMaxBlocksDev + b;
    while (ld_acquire_sys(p) < epoch) {
      if (global_timer_ns() - start > timeout_ns) {
        if (stats != nullptr) atomicCAS(&stats->status, 0u, 1000u + static_cast<unsigned>(src));
        failed = 1;
        break;
      }
    }
  }
  __syncthreads();
  // The time this end waited for its peers (block 0; every block waits for every flag): the
  // replay's measured exposed communication (one globaltimer read and one atomic per call).
  if (stats != nullptr && blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&stats->wait_ns, global_timer_ns() - start);
  return failed == 0;
}

// Dispatch, sender side (source rank `rank`): every kept row r = e*C + pos of the [E][C] layout
// (slot_token[r] = assignment i, or -1 for an empty row, which is skipped) goes to the owner of
// expert e at recv_row(le, rank, pos). kGather: the row is token i / top_k of `src` [T, hidden]
// (forward dispatch); otherwise row r of `src` [E*C, hidden] (the combine's gradient, already in
// the [E][C] layout). Block 0 also writes this rank's kept counts min(expert_counts[e], C) into
// every destination's counts[rank][le] before its flags.
template <bool kGather>
__global__ void __launch_bounds__(512)
    a2a_dispatch_send(A2aPeersDev peers, const bf16* __restrict__ src, const int* __restrict__ slot_token,
                      const int* __restrict__ expert_counts, ep::EpGeometry g, int rank, unsigned long long epoch,
                      A2aStatsDev* stats) {
  count_block(stats);
  const int El = g.experts_per_rank();
  if (blockIdx.x == 0) {
    for (int e = threadIdx.x; e < g.experts; e += blockDim.x) {
      const int c = expert_counts[e];
      peers.counts[g.owner(e)][rank * El + g.local_expert(e)] = c < g.capacity ? c : static_cast<int>(g.capacity);
    }
  }
  const int lane = threadIdx.x & 31;
  const int nvec = g.hidden / 8;
  const std::int64_t rows = g.rows();
  for (std::int64_t r = warp_row0(); r < rows; r += grid_warps()) {
    const int i = slot_token[r];
    if (i < 0) continue;
    const int e = static_cast<int>(r / g.capacity);
    const std::int64_t pos = r % g.capacity;
    const int d = g.owner(e);
    const std::int64_t from = kGather ? static_cast<std::int64_t>(i / g.top_k) : r;
    copy_row(reinterpret_cast<int4*>(peers.rows[d] + g.recv_row(g.local_expert(e), rank, pos) * g.hidden),
             reinterpret_cast<const int4*>(src + from * g.hidden), nvec, lane);
  }
  signal_all(peers, g.ep, rank, epoch);
}

// Dispatch, receiver side (expert rank): waits for every source's flags, then zeroes the padding
// rows of each (local expert, source) block, pos >= counts[src][le], so that the expert GEMMs
// see finite rows that add nothing to the weight-grads.
__global__ void __launch_bounds__(512)
    a2a_dispatch_recv(bf16* rows_buf, const int* counts, const unsigned long long* flags, ep::EpGeometry g,
                      int sender_blocks, unsigned long long epoch, unsigned long long timeout_ns, A2aStatsDev* stats) {
  count_block(stats);
  if (!wait_all(flags, g.ep, sender_blocks, epoch, timeout_ns, stats)) return;
  const int lane = threadIdx.x & 31;
  const int nvec = g.hidden / 8;
  for (std::int64_t r = warp_row0(); r < g.rows(); r += grid_warps())
    if (!block_row(g, counts, r).filled) zero_row(reinterpret_cast<int4*>(rows_buf + r * g.hidden), nvec, lane);
}

// Combine, sender side (expert rank `rank`): each filled row (le, src, pos), pos < counts[src][le]
// (the counts its dispatch received), of `rows_in` [E/ep][ep][C] goes back to source src at
// send_row(rank * E/ep + le, pos).
__global__ void __launch_bounds__(512)
    a2a_combine_send(A2aPeersDev peers, const bf16* __restrict__ rows_in, const int* __restrict__ counts,
                     ep::EpGeometry g, int rank, unsigned long long epoch, A2aStatsDev* stats) {
  count_block(stats);
  const int lane = threadIdx.x & 31;
  const int nvec = g.hidden / 8;
  const int El = g.experts_per_rank();
  for (std::int64_t r = warp_row0(); r < g.rows(); r += grid_warps()) {
    const BlockRow b = block_row(g, counts, r);
    if (!b.filled) continue;
    copy_row(reinterpret_cast<int4*>(peers.rows[b.src] + g.send_row(rank * El + b.le, b.pos) * g.hidden),
             reinterpret_cast<const int4*>(rows_in + r * g.hidden), nvec, lane);
  }
  signal_all(peers, g.ep, rank, epoch);
}

// Combine, receiver side (source rank): waits for every expert rank's flags (none when epoch is
// 0: NCCL already delivered), then out[t] = resid[t] (or 0) + sum_j w_j zp[slot_of[t, j]] over
// kept assignments; w == nullptr sums unweighted (the dispatch's gradient). One warp per token;
// out may alias resid.
__global__ void __launch_bounds__(512)
    a2a_combine_recv(bf16* out, const bf16* resid, const bf16* zp, const int* __restrict__ slot_of,
                     const float* __restrict__ w, const unsigned long long* flags, ep::EpGeometry g, int sender_blocks,
                     unsigned long long epoch, unsigned long long timeout_ns, A2aStatsDev* stats) {
  count_block(stats);
  if (epoch > 0 && !wait_all(flags, g.ep, sender_blocks, epoch, timeout_ns, stats)) return;
  const int lane = threadIdx.x & 31;
  const int nvec = g.hidden / 8;
  for (std::int64_t t = warp_row0(); t < g.tokens; t += grid_warps()) {
    for (int v = lane; v < nvec; v += 32) {
      float acc[8];
      if (resid != nullptr) {
        const Bf16x8 r = reinterpret_cast<const Bf16x8*>(resid + t * g.hidden)[v];
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[c] = to_f(r.v[c]);
      } else {
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[c] = 0.f;
      }
      for (int j = 0; j < g.top_k; ++j) {
        const int s = slot_of[t * g.top_k + j];
        if (s < 0) continue;
        const float wj = w != nullptr ? w[t * g.top_k + j] : 1.f;
        const Bf16x8 z = reinterpret_cast<const Bf16x8*>(zp + static_cast<std::int64_t>(s) * g.hidden)[v];
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[c] += wj * to_f(z.v[c]);
      }
      Bf16x8 o;
#pragma unroll
      for (int c = 0; c < 8; ++c) o.v[c] = to_bf(acc[c]);
      reinterpret_cast<Bf16x8*>(out + t * g.hidden)[v] = o;
    }
  }
}

}  // namespace ppsim::gpu::kernels
