// Expert-parallel host plan (src/ep/): the PP x EP layout over GPUs, and for a routing the
// per-(source, destination, expert) counts, the receive-buffer offsets, where each assignment
// lands and comes back, and the buffer sizes. Examples worked by hand in the comments; random
// routings checked against invariants that a wrong offset breaks.
#include "ep/ep_plan.h"

#include <algorithm>
#include <random>
#include <set>

#include "catch.h"
#include "core/error.h"
#include "cuda_validate/gpu_api.h"

using namespace ppsim;
using namespace ppsim::ep;

TEST_CASE("EP layout: PP x EP ranks over GPUs", "[ep]") {
  // 2 GPUs, PP x EP = 2 x 2: rank = stage*2 + shard, GPU = rank % 2:
  //   (stage 0, shard 0) = rank 0 -> GPU 0   (stage 0, shard 1) = rank 1 -> GPU 1
  //   (stage 1, shard 0) = rank 2 -> GPU 0   (stage 1, shard 1) = rank 3 -> GPU 1
  // so each GPU holds one shard of every stage, and the stage 0 -> 1 hop (rank 0 -> 2, 1 -> 3)
  // stays on a GPU while each stage's all-to-all (0 <-> 1, 2 <-> 3) crosses GPUs.
  const EpLayout two = make_ep_layout(2, 2, 2);
  CHECK(two.ranks() == 4);
  CHECK(two.virtual_ranks());
  CHECK(two.ep_groups_span_gpus());
  CHECK(two.device_of(0) == 0);
  CHECK(two.device_of(1) == 1);
  CHECK(two.device_of(2) == 0);
  CHECK(two.device_of(3) == 1);
  CHECK(two.ep_group(1) == std::vector<int>{2, 3});
  for (int shard = 0; shard < 2; ++shard)
    CHECK(two.device_of(two.rank_of(0, shard)) == two.device_of(two.rank_of(1, shard)));  // stage hop on-GPU
  CHECK(two.device_of(two.rank_of(0, 0)) != two.device_of(two.rank_of(0, 1)));            // all-to-all crosses

  // 4 GPUs, 2 x 2: one rank per GPU; 8 GPUs, PP x EP = 4 x 2 or 2 x 4: the same.
  for (auto [pp, ep, gpus] : {std::tuple{2, 2, 4}, std::tuple{4, 2, 8}, std::tuple{2, 4, 8}}) {
    const EpLayout l = make_ep_layout(pp, ep, gpus);
    CHECK_FALSE(l.virtual_ranks());
    for (int r = 0; r < l.ranks(); ++r) {
      CHECK(l.device_of(r) == r);
      CHECK(l.rank_of(l.stage_of(r), l.shard_of(r)) == r);
    }
  }
  // One GPU holding both shards (the single-GPU kernel test): valid, the group shares the GPU.
  const EpLayout one = make_ep_layout(2, 2, 1);
  CHECK_FALSE(one.ep_groups_span_gpus());
  CHECK(one.device_of(3) == 0);

  // 2 x 2 = 4 ranks over 3 GPUs is uneven; ep = 3 over 2 GPUs neither spans nor packs.
  CHECK_THROWS_AS(make_ep_layout(2, 2, 3), InputError);
  CHECK_THROWS_AS(make_ep_layout(2, 3, 2), InputError);
  CHECK_THROWS_AS(make_ep_layout(2, 0, 2), InputError);
  CHECK(EpLayout{2, 3, 2}.problem().find("distinct GPUs") != std::string::npos);
}

TEST_CASE("EP capacity follows the single-GPU chunk's rule", "[ep]") {
  // ceil(1.25 * 1024 * 2 / 8) = 320 (a multiple of 16); ceil(1.0 * 100 * 2 / 8) = 25 -> 32.
  CHECK(ep_capacity(1024, 2, 8, 1.25) == 320);
  CHECK(ep_capacity(100, 2, 8, 1.0) == 32);
  CHECK(ep_capacity(1, 1, 64, 1.0) == 16);
  for (auto [t, k, e, cf] : {std::tuple{4096, 8, 256, 1.25}, std::tuple{1000, 3, 7, 0.9}, std::tuple{33, 1, 2, 2.0}}) {
    gpu::ChunkShape s;
    s.seq_len = t;
    s.top_k = k;
    s.experts = e;
    s.capacity_factor = cf;
    CHECK(ep_capacity(t, k, e, cf) == s.expert_capacity());
  }
}

TEST_CASE("EP routing plan: counts, offsets and rows worked by hand", "[ep]") {
  // ep = 2, E = 4 (rank 0 owns experts 0, 1; rank 1 owns 2, 3), top_k = 2, T = 3, C = 2.
  const EpGeometry g{2, 4, 2, 3, 2, 8};
  // Source 0: t0 -> {0, 2}, t1 -> {0, 3}, t2 -> {0, 1}. Assignments i = 2t + j:
  //   i0 e0 pos0, i1 e2 pos0, i2 e0 pos1, i3 e3 pos0, i4 e0 pos2 (dropped: 2 >= C), i5 e1 pos0.
  // Source 1: t0 -> {3, 2}, t1 -> {2, 3}, t2 -> {1, 3}:
  //   i0 e3 pos0, i1 e2 pos0, i2 e2 pos1, i3 e3 pos1, i4 e1 pos0, i5 e3 pos2 (dropped).
  const EpRoutingPlan p = plan_routing(g, {{0, 2, 0, 3, 0, 1}, {3, 2, 2, 3, 1, 3}});
  // counts (src, dst, le): s0 -> d0: e0 3, e1 1; s0 -> d1: e2 1, e3 1;
  //                        s1 -> d0: e0 0, e1 1; s1 -> d1: e2 2, e3 3.
  CHECK(p.count(0, 0, 0) == 3);
  CHECK(p.kept_rows(0, 0, 0) == 2);
  CHECK(p.count(0, 0, 1) == 1);
  CHECK(p.count(0, 1, 0) == 1);
  CHECK(p.count(0, 1, 1) == 1);
  CHECK(p.count(1, 0, 0) == 0);
  CHECK(p.count(1, 0, 1) == 1);
  CHECK(p.count(1, 1, 0) == 2);
  CHECK(p.count(1, 1, 1) == 3);
  CHECK(p.kept_rows(1, 1, 1) == 2);
  CHECK(p.dropped(0) == 1);
  CHECK(p.dropped(1) == 1);
  // Receive rows (le * ep + src) * C + pos: the (le, src) blocks start at 0, 2, 4, 6.
  CHECK(p.offset(0, 1, 0) == 0);
  CHECK(p.offset(1, 1, 0) == 2);
  CHECK(p.offset(0, 1, 1) == 4);
  CHECK(p.offset(1, 1, 1) == 6);
  // Rows sent: s0 -> d0: 2 + 1 = 3, s0 -> d1: 1 + 1 = 2; s1 -> d0: 0 + 1 = 1, s1 -> d1: 2 + 2 = 4.
  CHECK(p.rows_sent(0, 0) == 3);
  CHECK(p.rows_sent(0, 1) == 2);
  CHECK(p.rows_sent(1, 0) == 1);
  CHECK(p.rows_sent(1, 1) == 4);
  // Remote bytes, hidden 8 bf16 = 16 bytes a row: s0 sends 2 rows away = 32, s1 sends 1 = 16.
  CHECK(p.remote_bytes(0) == 32);
  CHECK(p.remote_bytes(1) == 16);
  // Where individual assignments land and come back:
  //   s0 i5 (t2 -> e1): d0, local expert 1, block (1, 0) = rows 4-5, pos 0 -> recv row 4; send row 1*2+0 = 2.
  const EpAssignment& a = p.assignments[5];
  CHECK(a.token == 2);
  CHECK(a.dst == 0);
  CHECK(a.recv_row == 4);
  CHECK(a.send_row == 2);
  //   s1 i3 (t1 -> e3): d1, le 1, block (1, 1) = rows 6-7, pos 1 -> recv row 7; send row 3*2+1 = 7.
  const EpAssignment& b = p.assignments[6 + 3];
  CHECK(b.src == 1);
  CHECK(b.token == 1);
  CHECK(b.dst == 1);
  CHECK(b.recv_row == 7);
  CHECK(b.send_row == 7);
  //   s0 i4 (t2 -> e0, pos 2) is dropped: no rows.
  CHECK_FALSE(p.assignments[4].kept);
  CHECK(p.assignments[4].recv_row == -1);
  CHECK(p.slot_of[0] == std::vector<int>{0, 4, 1, 6, -1, 2});
  // s1's permuted rows [E][C]: e0 {-, -}, e1 {i4, -}, e2 {i1, i2}, e3 {i0, i3}.
  CHECK(p.slot_token[1] == std::vector<int>{-1, -1, 4, -1, 1, 2, 0, 3});
}

namespace {

// Invariants of any plan: counts add up to T * top_k per source; kept = min(count, C); each
// kept assignment's rows lie in its block and no two share a receive row or a send row; every
// receive row of a (src, le) block below kept is used, none above.
void check_invariants(const EpRoutingPlan& p) {
  const EpGeometry& g = p.geometry;
  const int El = g.experts_per_rank();
  for (int s = 0; s < g.ep; ++s) {
    std::int64_t total = 0;
    for (int d = 0; d < g.ep; ++d)
      for (int le = 0; le < El; ++le) {
        total += p.count(s, d, le);
        CHECK(p.kept_rows(s, d, le) == std::min(p.count(s, d, le), g.capacity));
      }
    CHECK(total == g.tokens * g.top_k);
  }
  std::set<std::pair<int, std::int64_t>> recv_used, send_used;
  for (const auto& a : p.assignments) {
    if (!a.kept) continue;
    const int le = g.local_expert(a.expert);
    CHECK(a.recv_row >= p.offset(a.src, a.dst, le));
    CHECK(a.recv_row < p.offset(a.src, a.dst, le) + g.capacity);
    CHECK(a.recv_row - p.offset(a.src, a.dst, le) < p.kept_rows(a.src, a.dst, le));
    CHECK(a.send_row == a.expert * g.capacity + a.pos);
    CHECK(recv_used.insert({a.dst, a.recv_row}).second);
    CHECK(send_used.insert({a.src, a.send_row}).second);
  }
  std::int64_t kept_total = 0;
  for (auto k : p.kept) kept_total += k;
  CHECK(static_cast<std::int64_t>(recv_used.size()) == kept_total);
}

std::vector<std::vector<int>> random_routing(const EpGeometry& g, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int>> idx(static_cast<std::size_t>(g.ep));
  std::vector<int> experts(static_cast<std::size_t>(g.experts));
  for (int e = 0; e < g.experts; ++e) experts[static_cast<std::size_t>(e)] = e;
  for (auto& r : idx)
    for (std::int64_t t = 0; t < g.tokens; ++t) {
      std::shuffle(experts.begin(), experts.end(), rng);  // top_k distinct experts per token
      r.insert(r.end(), experts.begin(), experts.begin() + g.top_k);
    }
  return idx;
}

}  // namespace

TEST_CASE("EP routing plan: random routing keeps the invariants", "[ep]") {
  for (auto [ep, E, k, T, C] :
       {std::tuple{2, 8, 2, 100, 16}, std::tuple{4, 16, 4, 257, 48}, std::tuple{8, 64, 8, 64, 16}}) {
    const EpGeometry g{ep, E, k, T, C, 64};
    const EpRoutingPlan p = plan_routing(g, random_routing(g, static_cast<std::uint32_t>(ep * 1000 + T)));
    check_invariants(p);
    // Buffer plan: E * C rows of 128 bytes, the remote share (ep - 1) / ep of them.
    const EpBufferPlan b = plan_buffers(g, 20);
    CHECK(b.rows == E * C);
    CHECK(b.data_bytes == E * C * 128);
    CHECK(b.max_remote_bytes * ep == b.data_bytes * (ep - 1));
    CHECK(b.flag_words == ep * 20);
    CHECK(b.bytes_per_layer == 4 * (b.data_bytes + 8 * ep * 20 + 4 * ep * (E / ep)));
    for (int s = 0; s < ep; ++s) CHECK(p.remote_bytes(s) <= b.max_remote_bytes);
  }
}

TEST_CASE("EP routing plan: skewed routing, every token to expert 0", "[ep]") {
  // ep = 2, E = 4, top_k = 1, T = 40, C = 16: both sources send all 40 tokens to expert 0 on
  // rank 0; 16 are kept, 24 dropped each. Source 1 sends 16 rows (16 x 32 bytes = 512) away;
  // source 0 sends nothing away. Rank 1 receives nothing.
  const EpGeometry g{2, 4, 1, 40, 16, 16};
  const EpRoutingPlan p = plan_routing(g, {std::vector<int>(40, 0), std::vector<int>(40, 0)});
  check_invariants(p);
  for (int s = 0; s < 2; ++s) {
    CHECK(p.count(s, 0, 0) == 40);
    CHECK(p.kept_rows(s, 0, 0) == 16);
    CHECK(p.dropped(s) == 24);
    CHECK(p.rows_sent(s, 1) == 0);
  }
  CHECK(p.remote_bytes(0) == 0);
  CHECK(p.remote_bytes(1) == 16 * 32);
  // Tokens 0..15 of source 1 land in rank 0's block (le 0, src 1) = rows 16..31, in order.
  for (int t = 0; t < 16; ++t) CHECK(p.assignments[static_cast<std::size_t>(40 + t)].recv_row == 16 + t);
  CHECK_FALSE(p.assignments[40 + 16].kept);
}

TEST_CASE("EP routing plan: tokens with no remote expert", "[ep]") {
  // ep = 2, E = 4, top_k = 2: source 0 only picks experts {0, 1} (its own), source 1 only {2, 3}.
  // Nothing crosses ranks: remote bytes 0, and every kept row of source s lands on rank s.
  const EpGeometry g{2, 4, 2, 10, 16, 16};
  std::vector<std::vector<int>> idx(2);
  for (int t = 0; t < 10; ++t) {
    idx[0].insert(idx[0].end(), {t % 2, 1 - t % 2});
    idx[1].insert(idx[1].end(), {2 + t % 2, 3 - t % 2});
  }
  const EpRoutingPlan p = plan_routing(g, idx);
  check_invariants(p);
  for (int s = 0; s < 2; ++s) {
    CHECK(p.remote_bytes(s) == 0);
    CHECK(p.rows_sent(s, s) == 20);  // 10 tokens x 2 choices, each expert 10 <= C
    CHECK(p.rows_sent(s, 1 - s) == 0);
  }
  for (const auto& a : p.assignments) CHECK(a.dst == a.src);
}

TEST_CASE("EP routing plan refuses bad input with one line", "[ep]") {
  const EpGeometry g{2, 4, 1, 2, 16, 8};
  CHECK_THROWS_AS(plan_routing(g, {{0, 1}}), InputError);          // one rank's routing for ep = 2
  CHECK_THROWS_AS(plan_routing(g, {{0, 1}, {0}}), InputError);     // wrong length
  CHECK_THROWS_AS(plan_routing(g, {{0, 4}, {0, 1}}), InputError);  // expert out of range
  CHECK_THROWS_AS(plan_routing(EpGeometry{3, 4, 1, 2, 16, 8}, {{0, 1}, {0, 1}, {0, 1}}),
                  InputError);  // 3 does not divide 4
}
