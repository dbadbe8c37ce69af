// Expert-parallel row geometry: where a token's hidden state lies on its way to an expert on
// another EP rank and back. Shared by the host plan (ep_plan.h), the all-to-all kernels
// (cuda_validate/kernels/a2a.cuh) and the tests, so that there is one formula for each offset.
//
// Not obvious: capacity is per (source rank, expert), C rows, the single-GPU chunk's capacity
// for the source's own tokens. So a source rank assigns slots exactly as one GPU does
// (kernels/moe.cuh: assignment i to expert e at position pos = #{i' < i : idx[i'] == e}, dropped
// when pos >= C) and no counts have to be exchanged before the data moves: every sender knows
// the offset of every row it writes. A destination holds, per local expert, one block of C rows
// from each source: [experts_per_rank][ep][C] rows, E * C in all, the same size as a source's
// permuted buffer [E][C]. Rows of a block past the source's count are padding (zero).
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define PPSIM_HD __host__ __device__
#else
#define PPSIM_HD
#endif

namespace ppsim::ep {

struct EpGeometry {
  int ep = 1;                 // EP ranks of one stage (the all-to-all's participants)
  int experts = 0;            // routed experts of the layer, E; ep divides E
  int top_k = 0;              // experts per token
  std::int64_t tokens = 0;    // tokens of each EP rank's micro-batch, T
  std::int64_t capacity = 0;  // rows per (source rank, expert), C
  int hidden = 0;             // elements per row (bf16: 2 bytes each)

  PPSIM_HD int experts_per_rank() const { return experts / ep; }
  // The EP rank that owns global expert e (contiguous blocks of experts_per_rank experts).
  PPSIM_HD int owner(int e) const { return e / experts_per_rank(); }
  PPSIM_HD int local_expert(int e) const { return e % experts_per_rank(); }
  // Source side: the single-GPU permuted layout [E][C].
  PPSIM_HD std::int64_t send_row(int e, std::int64_t pos) const {
    return static_cast<std::int64_t>(e) * capacity + pos;
  }
  // Expert side: [experts_per_rank][ep][C]; the block of (local expert le, source src) is contiguous.
  PPSIM_HD std::int64_t recv_row(int le, int src, std::int64_t pos) const {
    return (static_cast<std::int64_t>(le) * ep + src) * capacity + pos;
  }
  PPSIM_HD std::int64_t rows() const { return static_cast<std::int64_t>(experts) * capacity; }  // both sides
  PPSIM_HD std::int64_t row_bytes() const { return static_cast<std::int64_t>(hidden) * 2; }
};

}  // namespace ppsim::ep
