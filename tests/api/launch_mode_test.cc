// The launch mode's bookkeeping (cuda_validate/launch_mode.h), without a GPU: the mode's names,
// the graph keys the replay caches its action parts under, and where graphs cannot apply.
#include <cstdlib>
#include <set>
#include <string>

#include "catch.h"
#include "cuda_validate/gpu_api.h"

using namespace ppsim;
using namespace ppsim::gpu;

TEST_CASE("launch mode: names parse both ways, anything else is refused", "[launch_mode]") {
  for (LaunchMode m : {LaunchMode::streams, LaunchMode::graphs}) {
    const auto back = parse_launch_mode(launch_mode_name(m));
    REQUIRE(back.has_value());
    CHECK(*back == m);
  }
  CHECK_FALSE(parse_launch_mode("graph").has_value());
  CHECK_FALSE(parse_launch_mode("").has_value());
  CHECK_FALSE(parse_launch_mode("Graphs").has_value());
}

TEST_CASE("graph keys: one per (stage, kind, micro-batch, role), none shared", "[launch_mode]") {
  // 3 stage values x 4 kinds x 5 micro-batches x 2 roles = 120 parts, each its own key, including
  // the largest stage and micro-batch a key holds (2^24 - 1) beside 0 and 1.
  const int big = (1 << 24) - 1;
  std::set<std::uint64_t> keys;
  int parts = 0;
  for (int stage : {0, 1, big})
    for (OpKind k : {OpKind::F, OpKind::I, OpKind::W, OpKind::B})
      for (int mb : {0, 1, 2, 255, big})
        for (int role : {0, 1}) {
          keys.insert(graph_key(stage, k, mb, role));
          ++parts;
        }
  CHECK(parts == 3 * 4 * 5 * 2);
  CHECK(keys.size() == static_cast<std::size_t>(parts));
  // The same part gives the same key (a run's capture updates the previous run's executable).
  CHECK(graph_key(3, OpKind::W, 7, 1) == graph_key(3, OpKind::W, 7, 1));
  // Worked by hand: stage 1 at bit 32, micro-batch 2 at bit 8, kind I (1) at bit 1, role 1 at bit 0.
  CHECK(graph_key(1, OpKind::I, 2, 1) == (std::uint64_t{1} << 32) + (std::uint64_t{2} << 8) + 2 + 1);
}

TEST_CASE("graphs apply without expert parallelism only", "[launch_mode]") {
  CHECK(graphs_unavailable(1).empty());
  const std::string why = graphs_unavailable(2);
  CHECK_FALSE(why.empty());
  CHECK(why.find("expert parallelism") != std::string::npos);
}

namespace {
// One replay switch read from the environment (apply_replay_switches): off by default, `on` sets
// `field`, `off` clears it, `bad` is refused with exit 2 naming the variable and the value.
void check_switch(const char* name, const char* off, const char* on, const char* bad, bool ReplayConfig::*field) {
  ReplayConfig rc;
  CHECK_FALSE(rc.*field);  // off unless asked
  setenv(name, on, 1);
  apply_replay_switches(rc);
  CHECK(rc.*field);
  setenv(name, off, 1);
  apply_replay_switches(rc);
  CHECK_FALSE(rc.*field);
  setenv(name, bad, 1);
  const std::string given = std::string(name) + "=" + bad;
  try {
    apply_replay_switches(rc);
    FAIL(given + " was accepted");
  } catch (const InputError& e) {
    CHECK(e.exit_code() == kExitUsage);
    CHECK(std::string(e.what()).find(given) != std::string::npos);
  }
  unsetenv(name);
}
}  // namespace

TEST_CASE("PPSIM_REPLAY_LAUNCH switches the replay's graphs; an unknown value is refused", "[launch_mode]") {
  check_switch("PPSIM_REPLAY_LAUNCH", "streams", "graphs", "graph", &ReplayConfig::graphs);
}

TEST_CASE("PPSIM_REPLAY_PAIR: a pair's halves wait for their own input or for both", "[launch_mode]") {
  check_switch("PPSIM_REPLAY_PAIR", "own", "both", "each", &ReplayConfig::pair_waits_both);
}
