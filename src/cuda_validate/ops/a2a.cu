// Launchers of kernels/a2a.cuh (ours) and the NCCL comparison path (ops/a2a.h has the contract).
// The host-only parts (names, checks, buffers) are in a2a_host.cc, compiled by the host compiler.
#include <algorithm>

#include "cuda_validate/check.h"
#include "cuda_validate/kernels/a2a.cuh"
#include "cuda_validate/ops/a2a.h"
#include "cuda_validate/ops/moe.h"

namespace ppsim::gpu {

static_assert(kA2aMaxRanks == kernels::kA2aMaxRanksDev && kA2aMaxBlocks == kernels::kA2aMaxBlocksDev,
              "host and device limits of the all-to-all differ");
static_assert(sizeof(A2aStats) == sizeof(kernels::A2aStatsDev), "A2aStats layout differs from the device's");

namespace {

kernels::A2aPeersDev peers_of(const A2aPeerBuffers& b, int ep) {
  kernels::A2aPeersDev p{};
  for (int r = 0; r < ep; ++r) {
    p.rows[r] = b.rank[r].rows;
    p.counts[r] = b.rank[r].counts;
    p.flags[r] = b.rank[r].flags;
  }
  return p;
}

kernels::A2aStatsDev* stats_of(const A2aCall& c) { return reinterpret_cast<kernels::A2aStatsDev*>(c.stats); }

dim3 grid_of(const A2aCall& c) { return dim3(static_cast<unsigned>(c.comm_sms)); }

std::size_t block_elems(const ep::EpGeometry& g) {
  return static_cast<std::size_t>(g.capacity) * static_cast<std::size_t>(g.hidden);
}

}  // namespace

void a2a_dispatch_begin(const A2aCall& c, const A2aPeerBuffers& to, const __nv_bfloat16* src, bool gather,
                        const int* slot_token, const int* expert_counts, __nv_bfloat16* staging, cudaStream_t s) {
  check_a2a_call(c);
  const auto& g = c.g;
  if (c.backend == A2aBackend::ours) {
    const auto peers = peers_of(to, g.ep);
    if (gather)
      kernels::a2a_dispatch_send<true>
          <<<grid_of(c), kA2aThreads, 0, s>>>(peers, src, slot_token, expert_counts, g, c.rank, c.epoch, stats_of(c));
    else
      kernels::a2a_dispatch_send<false>
          <<<grid_of(c), kA2aThreads, 0, s>>>(peers, src, slot_token, expert_counts, g, c.rank, c.epoch, stats_of(c));
    PPSIM_CUDA_CHECK_LAUNCH();
    return;
  }
  // NCCL: permute locally, then one C-row block per (destination, local expert) each way.
  const __nv_bfloat16* rows = src;
  if (gather) {
    if (staging == nullptr)
      throw_gpu_failure("a2a_dispatch_begin: the nccl path needs a staging buffer to permute into",
                        "pass a [E*C, hidden] buffer as `staging`, or gather = false");
    MoeRouting r{};
    r.slot_token = const_cast<int*>(slot_token);
    r.tokens = g.tokens;
    r.experts = g.experts;
    r.top_k = g.top_k;
    r.capacity = g.capacity;
    moe_permute(staging, src, r, g.hidden, s);
    rows = staging;
  }
  const int El = g.experts_per_rank();
  const std::size_t n = block_elems(g);
  PPSIM_NCCL_CHECK(ncclGroupStart());
  for (int d = 0; d < g.ep; ++d)
    for (int le = 0; le < El; ++le) {
      PPSIM_NCCL_CHECK(ncclSend(rows + g.send_row(d * El + le, 0) * g.hidden, n, ncclBfloat16, d, c.comm, s));
      PPSIM_NCCL_CHECK(ncclRecv(to.rank[c.rank].rows + g.recv_row(le, d, 0) * g.hidden, n, ncclBfloat16, d, c.comm, s));
    }
  PPSIM_NCCL_CHECK(ncclGroupEnd());
}

void a2a_dispatch_end(const A2aCall& c, const A2aRecvBuffer& mine, cudaStream_t s) {
  check_a2a_call(c);
  if (c.backend == A2aBackend::nccl) return;  // full blocks arrived, padding included
  kernels::a2a_dispatch_recv<<<grid_of(c), kA2aThreads, 0, s>>>(mine.rows, mine.counts, mine.flags, c.g, c.comm_sms,
                                                                c.epoch, c.timeout_ns, stats_of(c));
  PPSIM_CUDA_CHECK_LAUNCH();
}

void a2a_combine_begin(const A2aCall& c, const A2aPeerBuffers& to, const __nv_bfloat16* rows_in, const int* counts,
                       cudaStream_t s) {
  check_a2a_call(c);
  const auto& g = c.g;
  if (c.backend == A2aBackend::ours) {
    kernels::a2a_combine_send<<<grid_of(c), kA2aThreads, 0, s>>>(peers_of(to, g.ep), rows_in, counts, g, c.rank,
                                                                 c.epoch, stats_of(c));
    PPSIM_CUDA_CHECK_LAUNCH();
    return;
  }
  const int El = g.experts_per_rank();
  const std::size_t n = block_elems(g);
  PPSIM_NCCL_CHECK(ncclGroupStart());
  for (int src = 0; src < g.ep; ++src)
    for (int le = 0; le < El; ++le) {
      PPSIM_NCCL_CHECK(ncclSend(rows_in + g.recv_row(le, src, 0) * g.hidden, n, ncclBfloat16, src, c.comm, s));
      PPSIM_NCCL_CHECK(
          ncclRecv(to.rank[c.rank].rows + g.send_row(src * El + le, 0) * g.hidden, n, ncclBfloat16, src, c.comm, s));
    }
  PPSIM_NCCL_CHECK(ncclGroupEnd());
}

void a2a_combine_end(const A2aCall& c, const A2aRecvBuffer& mine, __nv_bfloat16* out, const __nv_bfloat16* resid,
                     const int* slot_of, const float* w, cudaStream_t s) {
  check_a2a_call(c);
  // NCCL delivered in stream order: epoch 0 skips the wait. Its reduce runs on comm_sms blocks
  // too when given, else one block per 16 tokens (it is not the bounded path).
  const bool ours = c.backend == A2aBackend::ours;
  const unsigned blocks = ours ? static_cast<unsigned>(c.comm_sms)
                               : static_cast<unsigned>(std::max<std::int64_t>(1, (c.g.tokens + 15) / 16));
  kernels::a2a_combine_recv<<<blocks, kA2aThreads, 0, s>>>(
      out, resid, mine.rows, slot_of, w, mine.flags, c.g, c.comm_sms, ours ? c.epoch : 0ull, c.timeout_ns, stats_of(c));
  PPSIM_CUDA_CHECK_LAUNCH();
}

}  // namespace ppsim::gpu
