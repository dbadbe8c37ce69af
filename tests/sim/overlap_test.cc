// The overlap model (sim/overlap.h): F&B pairs whose duration emerges from sub-ops on two
// streams with SM sharing, exposed all-to-all in plain schedules, and the what-ifs.
#include <cstdlib>

#include "catch.h"
#include "sim/overlap.h"
#include "test_util.h"

using namespace ppsim;
using namespace ppsim::test;

namespace {

const double kSigma = 20.0 / 132.0;  // DeepSeek: 20 of 132 SMs for communication

MoeSliceCosts layer(double attn, double mlp, double a2a, int layers = 1) {
  MoeSliceCosts m;
  m.layers = layers;
  m.attn_f = m.attn_b = m.attn_w = static_cast<Time>(attn * U);
  m.mlp_f = m.mlp_b = m.mlp_w = static_cast<Time>(mlp * U);
  m.dispatch = m.combine = m.dispatch_b = m.combine_b = static_cast<Time>(a2a * U);
  return m;
}

const Action kPair = Action::pair(Op{OpKind::F, 0, 1}, Op{OpKind::B, 1, 0});

// Unit costs with the overlap model: per chunk, attention and MLP each half of F, b, W.
SimCosts moe_costs(int slices, double f, double b, double w, double a2a, int layers) {
  SimCosts c = uniform_costs(slices, unit_costs(f, b, w));
  MoeSliceCosts m;
  m.layers = layers;
  m.attn_f = m.mlp_f = static_cast<Time>(f / 2 / layers * U);
  m.attn_b = m.mlp_b = static_cast<Time>((b - w) / 2 / layers * U);
  m.attn_w = m.mlp_w = static_cast<Time>(w / 2 / layers * U);
  m.dispatch = m.combine = m.dispatch_b = m.combine_b = static_cast<Time>(a2a * U);
  c.moe.assign(static_cast<std::size_t>(slices), m);
  c.comm_sm_fraction = kSigma;
  return c;
}

Time makespan(const char* family, int p, int m, const SimCosts& c) {
  const Schedule s = make_schedule(family, ScheduleParams{p, m, 0, 0});
  SimCosts cc = c;
  cc.slice.resize(static_cast<std::size_t>(s.stages_per_pipe), c.slice[0]);
  cc.moe.resize(static_cast<std::size_t>(s.stages_per_pipe), c.moe[0]);
  return simulate(s, cc).makespan();
}

}  // namespace

TEST_CASE("zero communication: F&B = F + B", "[sim][overlap]") {
  // attention 1 and MLP 2 per op: F = 3, full B = b + W = 3 + 3 = 6, so F&B = 9.
  const ActionCost c = overlap_action_cost(kPair, layer(1, 2, 0), layer(1, 2, 0), kSigma);
  REQUIRE(c.duration == 9 * U);
  REQUIRE(c.exposed_comm == 0);
}

TEST_CASE("communication fully hidden: F&B = compute + sigma * communication", "[sim][overlap]") {
  // Six compute sub-ops of 1 unit; four all-to-alls of 0.01 units, each beside compute. While
  // communication runs compute has 1 - sigma of the SMs, so the pair takes
  // 6 + sigma * 4 * 0.01 units.
  const ActionCost c = overlap_action_cost(kPair, layer(1, 1, 0.01), layer(1, 1, 0.01), kSigma);
  const double expected = 6.0 * U + kSigma * 4 * 0.01 * U;
  REQUIRE(std::llabs(c.duration - static_cast<Time>(expected + 0.5)) <= 1);
  REQUIRE(c.exposed_comm == 0);
}

TEST_CASE("communication-bound pairs grow with the all-to-all time", "[sim][overlap]") {
  // With all-to-alls much longer than compute the communication stream is the critical path:
  // combine(B), dispatch(F), dispatch(B), combine(F) back to back, so F&B = 4 * a2a.
  const ActionCost a = overlap_action_cost(kPair, layer(0.1, 0.1, 10), layer(0.1, 0.1, 10), kSigma);
  const ActionCost b = overlap_action_cost(kPair, layer(0.1, 0.1, 20), layer(0.1, 0.1, 20), kSigma);
  REQUIRE(a.duration == 40 * U);
  REQUIRE(b.duration == 80 * U);
  REQUIRE(b.exposed_comm > a.exposed_comm);
}

TEST_CASE("a single op exposes its all-to-all", "[sim][overlap]") {
  // F: attention 1, dispatch 0.5, MLP 2, combine 0.5 in sequence: 4 units, 1 exposed.
  const ActionCost f = overlap_action_cost(Action::single(Op{OpKind::F, 0, 0}), layer(1, 2, 0.5), layer(1, 2, 0.5), kSigma);
  REQUIRE(f.duration == 4 * U);
  REQUIRE(f.exposed_comm == U);
}

TEST_CASE("at a large all-to-all volume DualPipe beats 1F1B and ZB-H1, at zero the formulas' order holds", "[sim][overlap]") {
  // Zero volume, F=1, B=2, W=1: makespans 1F1B (M+P-1)(F+B) = 81, ZB-H1 81-14 = 67, DualPipe 66.
  const SimCosts zero = moe_costs(8, 1, 2, 1, 0, 2);
  REQUIRE(makespan("1f1b", 8, 20, zero) == 81 * U);
  REQUIRE(makespan("zb-h1", 8, 20, zero) == 67 * U);
  REQUIRE(makespan("dualpipe", 8, 20, zero) == 66 * U);
  const SimCosts heavy = moe_costs(8, 1, 2, 1, 0.5, 2);
  const Time dp = makespan("dualpipe", 8, 20, heavy);
  REQUIRE(dp < makespan("1f1b", 8, 20, heavy));
  REQUIRE(dp < makespan("zb-h1", 8, 20, heavy));
}

TEST_CASE("halving the all-to-all bandwidth moves 1F1B by the arithmetic's amount", "[sim][overlap]") {
  // 1F1B exposes every all-to-all: each F and each B gains 2 * layers * a2a. With P=4, M=8,
  // 1 layer per chunk: makespan = (M+P-1)(F+B + 4 a2a), so a2a 0.25 -> 0.5 (half the bandwidth)
  // adds 11 * 4 * 0.25 = 11 units.
  const Time before = makespan("1f1b", 4, 8, moe_costs(4, 1, 2, 1, 0.25, 1));
  const Time after = makespan("1f1b", 4, 8, moe_costs(4, 1, 2, 1, 0.5, 1));
  REQUIRE(before == 11 * (3 * U + U));
  REQUIRE(after - before == 11 * U);
}

TEST_CASE("profiled slowdown replaces the linear rule beside communication", "[sim][overlap]") {
  // As above, but compute beside communication measured 1.25x slower (a profile's comm_slowdown):
  // speed 1 / 1.25 = 0.8, so each all-to-all of 0.01 costs 0.01 * (1 - 0.8) = 0.002 extra:
  // F&B = 6 + 4 * 0.002 = 6.008 units, whatever sigma says; compute is busy all of it.
  MoeSliceCosts m = layer(1, 1, 0.01);
  m.attn_comm_slowdown = m.mlp_comm_slowdown = 1.25;
  const ActionCost c = overlap_action_cost(kPair, m, m, kSigma);
  const double expected = 6.0 * U + 4 * 0.01 * (1 - 1 / 1.25) * U;
  REQUIRE(std::llabs(c.duration - static_cast<Time>(expected + 0.5)) <= 1);
  REQUIRE(c.compute_busy == c.duration);
  // Only the sub-op kind with a measured slowdown changes: attention measured, MLP on the rule.
  // Which compute runs beside which all-to-all depends on the order, so only bounds here:
  // between the all-linear and the all-profiled durations.
  MoeSliceCosts half = layer(1, 1, 0.01);
  half.attn_comm_slowdown = 1.25;
  const ActionCost h = overlap_action_cost(kPair, half, half, kSigma);
  const Time linear = overlap_action_cost(kPair, layer(1, 1, 0.01), layer(1, 1, 0.01), kSigma).duration;
  REQUIRE(h.duration > std::min(linear, c.duration));
  REQUIRE(h.duration < std::max(linear, c.duration));
}
