// Expert parallelism, host side: which GPU holds which (stage, EP shard) rank, and for one MoE
// layer's routing, how many rows each source rank sends to each expert of each destination rank,
// where each lands, and where it comes back (ep_rows.h has the row formulas).
//
// Not obvious: the same plan serves F and B. Forward, dispatch moves token rows to the experts
// and combine brings expert outputs back to send_row and sums them, weighted, into the token;
// backward, the combine's gradient (w * dout, laid out by send_row) travels the dispatch's way
// and the dispatch's gradient (dxp, by recv_row) travels the combine's way, summed into the token.
// Ranks: rank = stage * ep + shard; GPU = rank % gpus. On 2 GPUs with PP x EP = 2 x 2, GPU g
// holds shard g of every stage (two virtual ranks), stage-to-stage transfers stay on a GPU, and
// every all-to-all crosses GPUs; with one rank per GPU (gpus = pp * ep) all of them cross.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ep/ep_rows.h"

namespace ppsim::ep {

struct EpLayout {
  int pp = 1, ep = 1, gpus = 1;

  int ranks() const { return pp * ep; }
  int rank_of(int stage, int shard) const { return stage * ep + shard; }
  int stage_of(int rank) const { return rank / ep; }
  int shard_of(int rank) const { return rank % ep; }
  int device_of(int rank) const { return rank % gpus; }
  bool virtual_ranks() const { return gpus < ranks(); }  // several ranks share a GPU
  // The ranks of `stage`'s all-to-all, by shard.
  std::vector<int> ep_group(int stage) const;
  // True when the shards of every stage sit on distinct GPUs (each all-to-all crosses GPUs
  // between every pair); false when some share one (then part of it stays on a GPU).
  bool ep_groups_span_gpus() const { return gpus % ep == 0; }
  // "" when usable, else the first problem: pp, ep, gpus positive; the ranks fill the GPUs
  // evenly (gpus divides pp * ep); an EP group's shards either on distinct GPUs (ep divides
  // gpus) or packed evenly (gpus divides ep).
  std::string problem() const;
};
// Throws InputError (kExitInput) naming the problem.
EpLayout make_ep_layout(int pp, int ep, int gpus);

// Rows per (source rank, expert) for T tokens: ceil(capacity_factor * T * top_k / E) rounded
// up to 16 (the single-GPU chunk's rule, ChunkShape::expert_capacity).
std::int64_t ep_capacity(std::int64_t tokens, int top_k, int experts, double capacity_factor);

// One token -> expert assignment i = token * top_k + j of source rank `src`.
struct EpAssignment {
  int src = 0;  // source EP rank (shard)
  std::int64_t token = 0;
  int j = 0;                   // which of the token's top_k choices
  int expert = 0;              // global expert
  int dst = 0;                 // EP rank owning the expert
  std::int64_t pos = 0;        // position among src's assignments to `expert`, in token order
  bool kept = false;           // pos < capacity
  std::int64_t send_row = -1;  // row of src's [E][C] buffer (kept only)
  std::int64_t recv_row = -1;  // row of dst's [E/ep][ep][C] buffer (kept only)
};

struct EpRoutingPlan {
  EpGeometry geometry;
  std::vector<EpAssignment> assignments;  // by src, then i = token * top_k + j
  // By (src, dst, local expert): index (src * ep + dst) * experts_per_rank + le.
  std::vector<std::int64_t> counts;  // assignments before capacity
  std::vector<std::int64_t> kept;    // min(count, capacity): rows that travel
  // Per source rank, as the GPU's routing kernels produce them (kernels/moe.cuh):
  std::vector<std::vector<int>> slot_of;     // [src][T * top_k]: send_row or -1 (dropped)
  std::vector<std::vector<int>> slot_token;  // [src][E * C]: assignment index or -1 (empty)

  std::size_t index(int src, int dst, int le) const {
    return (static_cast<std::size_t>(src) * static_cast<std::size_t>(geometry.ep) + static_cast<std::size_t>(dst)) *
               static_cast<std::size_t>(geometry.experts_per_rank()) +
           static_cast<std::size_t>(le);
  }
  std::int64_t count(int src, int dst, int le) const { return counts[index(src, dst, le)]; }
  std::int64_t kept_rows(int src, int dst, int le) const { return kept[index(src, dst, le)]; }
  // First row of the (src, le) block in dst's receive buffer.
  std::int64_t offset(int src, int dst, int le) const {
    (void)dst;
    return geometry.recv_row(le, src, 0);
  }
  // Rows src sends to dst (one way: dispatch forward; the combine returns as many).
  std::int64_t rows_sent(int src, int dst) const;
  // Bytes src sends to other ranks in one dispatch (bf16 rows; its own rows excluded).
  std::int64_t remote_bytes(int src) const;
  std::int64_t dropped(int src) const;  // assignments over capacity
};

// topk_idx[src] = source rank src's expert choices [T * top_k] (the router's output); every
// index in [0, E). Throws InputError when the geometry or an index is out of range.
EpRoutingPlan plan_routing(const EpGeometry& g, const std::vector<std::vector<int>>& topk_idx);

// The receive buffers one rank needs per MoE layer and micro-batch. Each buffer is E * C rows
// with its arrival flags and counts beside it:
//   expert side: dispatch forward (xp) and the combine's gradient (dzp);
//   source side: combine forward (zp, expert outputs) and the dispatch's gradient (dxp).
// Flags are one 64-bit word per (source rank, sender block); senders store a per-call epoch, so
// nothing is reset between calls (the epoch only grows).
struct EpBufferPlan {
  std::int64_t rows = 0;             // per buffer: E * C
  std::int64_t row_bytes = 0;        // hidden * 2
  std::int64_t data_bytes = 0;       // per buffer: rows * row_bytes
  std::int64_t flag_words = 0;       // per buffer: ep * max_blocks
  std::int64_t count_words = 0;      // per buffer: ep * experts_per_rank (int32 kept counts)
  std::int64_t buffers = 4;          // per layer and micro-batch (the four above)
  std::int64_t bytes_per_layer = 0;  // buffers * (data + 8 * flag_words + 4 * count_words)
  // Bytes a rank sends per dispatch when every slot is full (the largest transfer), and its
  // remote share (ep - 1) / ep.
  std::int64_t max_send_bytes = 0, max_remote_bytes = 0;
};
EpBufferPlan plan_buffers(const EpGeometry& g, int max_blocks);

// All of one chunk's receive buffers in one allocation, so that a peer process needs one CUDA IPC
// handle per chunk: every buffer's rows first, then every buffer's counts, then every buffer's
// flags, each buffer's part padded to kAlign bytes. The offsets follow from the geometry and the
// buffer count alone: a peer finds buffer i at the same offsets in its mapping of the allocation.
// Two memsets prepare it: rows NaN, counts and flags zero.
struct EpSlabLayout {
  static constexpr std::size_t kAlign = 256;
  std::size_t buffers = 0;
  std::size_t rows_stride = 0, counts_stride = 0, flags_stride = 0;  // bytes per buffer, padded

  std::size_t rows_offset(std::size_t i) const { return i * rows_stride; }
  std::size_t counts_offset(std::size_t i) const { return buffers * rows_stride + i * counts_stride; }
  std::size_t flags_offset(std::size_t i) const { return buffers * (rows_stride + counts_stride) + i * flags_stride; }
  std::size_t rows_region() const { return buffers * rows_stride; }  // [0, rows_region): rows
  std::size_t total_bytes() const { return buffers * (rows_stride + counts_stride + flags_stride); }
};
// `buffers` receive buffers of plan_buffers(g, max_blocks)'s sizes.
EpSlabLayout plan_slab(const EpGeometry& g, int max_blocks, std::size_t buffers);

}  // namespace ppsim::ep
