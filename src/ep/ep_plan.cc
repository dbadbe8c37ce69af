// Expert parallelism, host side (see ep_plan.h). Slot positions follow kernels/moe.cuh's
// assign_slots: token order within each source rank, so the host plan and the GPU agree row
// for row (tests/ep/ep_plan_test.cc works examples by hand; the GPU a2a test compares).
#include "ep/ep_plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace ppsim::ep {

std::vector<int> EpLayout::ep_group(int stage) const {
  std::vector<int> g;
  for (int s = 0; s < ep; ++s) g.push_back(rank_of(stage, s));
  return g;
}

std::string EpLayout::problem() const {
  if (pp < 1) return fmt::format("pp must be positive (got {})", pp);
  if (ep < 1) return fmt::format("ep must be positive (got {})", ep);
  if (gpus < 1) return fmt::format("gpus must be positive (got {})", gpus);
  if (ranks() % gpus != 0)
    return fmt::format("pp x ep = {} x {} = {} ranks do not spread evenly over {} GPUs", pp, ep, ranks(), gpus);
  if (gpus % ep != 0 && ep % gpus != 0)
    return fmt::format(
        "ep={} and {} GPUs: an EP group must sit on distinct GPUs (ep divides gpus) or pack evenly "
        "(gpus divides ep)",
        ep, gpus);
  return {};
}

EpLayout make_ep_layout(int pp, int ep, int gpus) {
  EpLayout l{pp, ep, gpus};
  if (auto p = l.problem(); !p.empty()) throw InputError("expert-parallel layout: " + p, {}, kExitInput);
  return l;
}

std::int64_t ep_capacity(std::int64_t tokens, int top_k, int experts, double capacity_factor) {
  if (experts <= 0) return 0;
  const double per_expert = capacity_factor * static_cast<double>(tokens) * top_k / experts;
  auto c = static_cast<std::int64_t>(per_expert);
  if (static_cast<double>(c) < per_expert) ++c;
  return (c + 15) / 16 * 16;
}

std::int64_t EpRoutingPlan::rows_sent(int src, int dst) const {
  std::int64_t n = 0;
  for (int le = 0; le < geometry.experts_per_rank(); ++le) n += kept_rows(src, dst, le);
  return n;
}

std::int64_t EpRoutingPlan::remote_bytes(int src) const {
  std::int64_t n = 0;
  for (int d = 0; d < geometry.ep; ++d)
    if (d != src) n += rows_sent(src, d);
  return n * geometry.row_bytes();
}

std::int64_t EpRoutingPlan::dropped(int src) const {
  std::int64_t n = 0;
  for (int d = 0; d < geometry.ep; ++d)
    for (int le = 0; le < geometry.experts_per_rank(); ++le) n += count(src, d, le) - kept_rows(src, d, le);
  return n;
}

EpRoutingPlan plan_routing(const EpGeometry& g, const std::vector<std::vector<int>>& topk_idx) {
  if (g.ep < 1 || g.experts < 1 || g.experts % g.ep != 0)
    throw InputError(fmt::format("ep={} must divide the {} experts", g.ep, g.experts), {}, kExitInput);
  if (g.top_k < 1 || g.top_k > g.experts)
    throw InputError(fmt::format("top_k={} must be in 1..{}", g.top_k, g.experts), {}, kExitInput);
  if (g.tokens < 0 || g.capacity < 0) throw InputError("tokens and capacity must not be negative", {}, kExitInput);
  if (static_cast<int>(topk_idx.size()) != g.ep)
    throw InputError(fmt::format("routing for {} ranks, expected ep={}", topk_idx.size(), g.ep), {}, kExitInput);
  const int El = g.experts_per_rank();
  EpRoutingPlan p;
  p.geometry = g;
  p.counts.assign(static_cast<std::size_t>(g.ep) * static_cast<std::size_t>(g.ep) * static_cast<std::size_t>(El), 0);
  p.kept = p.counts;
  p.slot_of.resize(static_cast<std::size_t>(g.ep));
  p.slot_token.resize(static_cast<std::size_t>(g.ep));
  const std::int64_t A = g.tokens * g.top_k;
  for (int s = 0; s < g.ep; ++s) {
    const auto& idx = topk_idx[static_cast<std::size_t>(s)];
    if (static_cast<std::int64_t>(idx.size()) != A)
      throw InputError(fmt::format("rank {}: {} expert choices, expected tokens x top_k = {}", s, idx.size(), A), {},
                       kExitInput);
    auto& slot_of = p.slot_of[static_cast<std::size_t>(s)];
    auto& slot_token = p.slot_token[static_cast<std::size_t>(s)];
    slot_of.assign(static_cast<std::size_t>(A), -1);
    slot_token.assign(static_cast<std::size_t>(g.rows()), -1);
    std::vector<std::int64_t> seen(static_cast<std::size_t>(g.experts), 0);
    for (std::int64_t i = 0; i < A; ++i) {
      const int e = idx[static_cast<std::size_t>(i)];
      if (e < 0 || e >= g.experts)
        throw InputError(fmt::format("rank {} assignment {}: expert {} out of range [0, {})", s, i, e, g.experts), {},
                         kExitInput);
      EpAssignment a;
      a.src = s;
      a.token = i / g.top_k;
      a.j = static_cast<int>(i % g.top_k);
      a.expert = e;
      a.dst = g.owner(e);
      a.pos = seen[static_cast<std::size_t>(e)]++;
      a.kept = a.pos < g.capacity;
      const std::size_t k = p.index(s, a.dst, g.local_expert(e));
      ++p.counts[k];
      if (a.kept) {
        ++p.kept[k];
        a.send_row = g.send_row(e, a.pos);
        a.recv_row = g.recv_row(g.local_expert(e), s, a.pos);
        slot_of[static_cast<std::size_t>(i)] = static_cast<int>(a.send_row);
        slot_token[static_cast<std::size_t>(a.send_row)] = static_cast<int>(i);
      }
      p.assignments.push_back(a);
    }
  }
  return p;
}

EpBufferPlan plan_buffers(const EpGeometry& g, int max_blocks) {
  EpBufferPlan b;
  b.rows = g.rows();
  b.row_bytes = g.row_bytes();
  b.data_bytes = b.rows * b.row_bytes;
  b.flag_words = static_cast<std::int64_t>(g.ep) * max_blocks;
  b.count_words = static_cast<std::int64_t>(g.ep) * g.experts_per_rank();
  b.bytes_per_layer = b.buffers * (b.data_bytes + 8 * b.flag_words + 4 * b.count_words);
  b.max_send_bytes = b.data_bytes;
  b.max_remote_bytes = b.data_bytes / g.ep * (g.ep - 1);
  return b;
}

EpSlabLayout plan_slab(const EpGeometry& g, int max_blocks, std::size_t buffers) {
  const EpBufferPlan b = plan_buffers(g, max_blocks);
  auto padded = [](std::int64_t bytes) {
    const auto n = static_cast<std::size_t>(std::max<std::int64_t>(bytes, 0));
    return (n + EpSlabLayout::kAlign - 1) / EpSlabLayout::kAlign * EpSlabLayout::kAlign;
  };
  EpSlabLayout l;
  l.buffers = buffers;
  l.rows_stride = padded(b.data_bytes);
  l.counts_stride = padded(4 * b.count_words);
  l.flags_stride = padded(8 * b.flag_words);
  return l;
}

}  // namespace ppsim::ep
