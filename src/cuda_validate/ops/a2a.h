// Expert-parallel all-to-all launchers: ours (kernels/a2a.cuh: SM-bounded, peer stores,
// flags) and NCCL's (grouped ncclSend/ncclRecv on one communicator) behind one interface,
// picked by A2aCall::backend (`--a2a ours|nccl`). Row geometry and the plan: ep/ep_rows.h,
// ep/ep_plan.h.
//
// Each exchange is two calls, begin (send) and end (wait and finish on the receiver):
//   dispatch: begin sends each kept row of the [E][C] layout to its expert's rank; end waits
//             for every source and zeroes the receive buffer's padding rows.
//   combine:  begin sends each filled expert row back to its source's [E][C] buffer; end waits
//             for every expert rank and sums the rows into tokens (weighted, plus a residual,
//             forward; unweighted for the dispatch's gradient).
// Not obvious: ours never blocks the host, but an end spins on the GPU until every peer's
// begin has run. A rank driving its own stream calls begin then end. One thread driving
// several ranks calls every rank's begin before any end (on one stream, an end enqueued
// before a peer's begin waits forever - up to A2aCall::timeout_ns, then stats->status says so);
// with NCCL it wraps the begins of all ranks in ncclGroupStart/ncclGroupEnd.
// A receive buffer must not be written by a new call while its consumer still reads the last
// one: the caller orders that (the chunk uses one buffer per micro-batch and layer).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <string>

#include "cuda_validate/device_buffer.h"
#include "ep/ep_placement.h"
#include "ep/ep_plan.h"
#include "ep/ep_rows.h"

namespace ppsim::gpu {

inline constexpr int kA2aMaxRanks = 8;     // EP ranks of one group
inline constexpr int kA2aMaxBlocks = 160;  // comm_sms at most (flag slots per source)
inline constexpr int kA2aThreads = 512;    // threads per block of every a2a kernel

// The backend's name and parser live with the host plan (ep/ep_placement.h), which the CLI uses.
using ep::A2aBackend;
using ep::a2a_backend_name;
using ep::parse_a2a_backend;

// One receive buffer of one EP rank (in that rank's device memory): E * C rows, the kept
// counts per (source, local expert) that a dispatch delivers, and arrival flags
// [source][sender block] (64-bit; zero when allocated).
struct A2aRecvBuffer {
  __nv_bfloat16* rows = nullptr;
  int* counts = nullptr;
  unsigned long long* flags = nullptr;
};

// Owns one receive buffer on the current device.
class A2aBufferSet {
 public:
  explicit A2aBufferSet(const ep::EpGeometry& g);
  A2aRecvBuffer view() const { return {rows_.get(), counts_.get(), flags_.get()}; }
  const DeviceBuffer<__nv_bfloat16>& rows() const { return rows_; }
  const DeviceBuffer<int>& counts() const { return counts_; }

 private:
  DeviceBuffer<__nv_bfloat16> rows_;
  DeviceBuffer<int> counts_;
  DeviceBuffer<unsigned long long> flags_;
};

// All of one chunk's receive buffers in one allocation on the current device (ep::EpSlabLayout:
// one CUDA IPC handle exports them all): rows NaN until rows arrive, counts and flags zero.
class A2aSlab {
 public:
  A2aSlab(const ep::EpGeometry& g, std::size_t buffers);
  ~A2aSlab();
  A2aSlab(const A2aSlab&) = delete;
  A2aSlab& operator=(const A2aSlab&) = delete;
  static ep::EpSlabLayout layout_for(const ep::EpGeometry& g, std::size_t buffers) {
    return ep::plan_slab(g, kA2aMaxBlocks, buffers);
  }
  // Buffer i of a slab of this layout at `base` (this process's, or a peer's mapped by CUDA IPC).
  static A2aRecvBuffer view_at(void* base, const ep::EpSlabLayout& l, std::size_t i);
  A2aRecvBuffer view(std::size_t i) const { return view_at(base_, layout_, i); }
  void* base() const { return base_; }
  const ep::EpSlabLayout& layout() const { return layout_; }
  std::size_t buffers() const { return layout_.buffers; }

 private:
  ep::EpSlabLayout layout_;
  void* base_ = nullptr;
};

// The same receive buffer on every rank of the EP group, as pointers this rank's device can
// write: another buffer on the same GPU, a peer GPU's (cudaDeviceEnablePeerAccess done), or a
// CUDA IPC mapping. Only rows are used by the NCCL path.
struct A2aPeerBuffers {
  A2aRecvBuffer rank[kA2aMaxRanks];
};

// Device-side counters a test or benchmark may pass (A2aStats::make): blocks that ran, the
// SM each ran on, and a timeout code.
struct A2aStats {
  unsigned int blocks = 0;
  unsigned int status = 0;  // 0 ok; 1000 + r: a wait for rank r's flags timed out
  int smid[kA2aMaxBlocks] = {};
  unsigned long long wait_ns = 0;  // summed over calls: how long block 0 of each end spun for peers' flags
};

struct A2aCall {
  A2aBackend backend = A2aBackend::ours;
  ep::EpGeometry g;
  int rank = 0;       // this rank's place in the EP group
  int comm_sms = 20;  // ours: blocks of every launch (all ranks of a group use the same)
  // ours: this call's flag value; > 0 and larger than every earlier call's on the same buffers.
  unsigned long long epoch = 1;
  unsigned long long timeout_ns = 20'000'000'000ull;  // ours: a wait gives up after this
  A2aStats* stats = nullptr;                          // device pointer, or null
  ncclComm_t comm = nullptr;                          // nccl: the EP group's communicator (rank = rank)
};
// Throws InputError naming the first problem with the call (ranks, comm_sms, geometry).
void check_a2a_call(const A2aCall& c);

// Dispatch. gather: `src` is [T, hidden] tokens and row r of [E][C] is token slot_token[r] /
// top_k (forward); otherwise `src` is [E*C, hidden] in that layout already (the combine's
// gradient). slot_token [E*C] and expert_counts [E] are this rank's routing (MoeRouting).
// nccl: `staging` [E*C, hidden] receives the permuted rows first when gathering (empty rows
// zero), and full C-row blocks travel (counts are not exchanged).
void a2a_dispatch_begin(const A2aCall& c, const A2aPeerBuffers& to, const __nv_bfloat16* src, bool gather,
                        const int* slot_token, const int* expert_counts, __nv_bfloat16* staging, cudaStream_t s);
// `mine` = to.rank[c.rank] as this rank sees it.
void a2a_dispatch_end(const A2aCall& c, const A2aRecvBuffer& mine, cudaStream_t s);

// Combine. `rows_in` [E*C, hidden] in the expert-side layout; `counts` = the kept counts the
// dispatch delivered to this rank (its dispatch buffer's counts).
void a2a_combine_begin(const A2aCall& c, const A2aPeerBuffers& to, const __nv_bfloat16* rows_in, const int* counts,
                       cudaStream_t s);
// out [T, hidden] = resid (null: 0) + sum over kept j of w[t,j] (null: 1) * mine.rows[slot_of[t,j]].
void a2a_combine_end(const A2aCall& c, const A2aRecvBuffer& mine, __nv_bfloat16* out, const __nv_bfloat16* resid,
                     const int* slot_of, const float* w, cudaStream_t s);

}  // namespace ppsim::gpu
