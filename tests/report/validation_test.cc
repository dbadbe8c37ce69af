// Predicted-vs-measured statistics on timelines built by hand.
#include <tuple>

#include "catch.h"
#include "report/validation.h"

using namespace ppsim;

TEST_CASE("timeline statistics and the comparison's errors", "[report][validation]") {
  // Two ranks, ns ticks. Rank 0: F [0, 2ms], B [6ms, 10ms]; rank 1: F [2ms, 4ms], B [4ms, 6ms].
  Timeline t;
  t.pp = 2;
  t.start = 0;
  t.end = 10'000'000;
  auto iv = [](int rank, OpKind k, Time a, Time b) {
    Interval i;
    i.rank = rank;
    i.start = a;
    i.end = b;
    i.action = Action::single(Op{k, rank, 0});
    return i;
  };
  t.intervals = {iv(0, OpKind::F, 0, 2'000'000), iv(1, OpKind::F, 2'000'000, 4'000'000),
                 iv(1, OpKind::B, 4'000'000, 6'000'000), iv(0, OpKind::B, 6'000'000, 10'000'000)};
  const TimelineStats s = timeline_stats(t);
  REQUIRE(s.makespan == 10'000'000);
  REQUIRE(s.compute == std::vector<Time>{6'000'000, 4'000'000});
  REQUIRE(s.bubble == std::vector<Time>{4'000'000, 6'000'000});
  REQUIRE(s.mean_duration.at("F") == 2'000'000);
  REQUIRE(s.mean_duration.at("B") == 3'000'000);  // (2 + 4) / 2 ms
  // A measured run 10% slower everywhere: every error is -1/11.
  Timeline m = t;
  m.end = 11'000'000;
  for (auto& i : m.intervals) {
    i.start = i.start * 11 / 10;
    i.end = i.end * 11 / 10;
  }
  const auto rows = compare_timelines(s, timeline_stats(m));
  REQUIRE(rows.front().what == "makespan");
  REQUIRE(rows.front().predicted == 10.0);
  REQUIRE(rows.front().measured == 11.0);
  REQUIRE(std::abs(rows.front().error + 1.0 / 11.0) < 1e-12);
  const std::string table = render_validation_table("1f1b", rows, 0.05);
  REQUIRE(table.find("OUTSIDE target") != std::string::npos);
}

TEST_CASE("exposed communication given by the producer: beside the ops, or inside them", "[report][validation]") {
  // One rank: F [0, 2 ms], B [3 ms, 7 ms], makespan 8 ms; 1.5 ms of exposed communication.
  Timeline t;
  t.pp = 1;
  t.start = 0;
  t.end = 8'000'000;
  for (auto [k, a, b] : {std::tuple{OpKind::F, Time{0}, Time{2'000'000}}, std::tuple{OpKind::B, Time{3'000'000}, Time{7'000'000}}}) {
    Interval i;
    i.rank = 0;
    i.start = a;
    i.end = b;
    i.action = Action::single(Op{k, 0, 0});
    t.intervals.push_back(i);
  }
  // The simulator's: the communication runs beside the 6 ms of ops, in the 2 ms they leave idle.
  const TimelineStats beside = timeline_stats(t, {1'500'000});
  REQUIRE(beside.compute == std::vector<Time>{6'000'000});
  REQUIRE(beside.bubble == std::vector<Time>{500'000});  // 8 - 6 - 1.5
  // The replay's all-to-all waits: spent inside the op intervals, so 4.5 ms of compute, and the
  // idle time between and after the ops (2 ms) stays the bubble.
  const TimelineStats inside = timeline_stats(t, {1'500'000}, true);
  REQUIRE(inside.compute == std::vector<Time>{4'500'000});
  REQUIRE(inside.exposed_comm == std::vector<Time>{1'500'000});
  REQUIRE(inside.bubble == std::vector<Time>{2'000'000});
  REQUIRE(inside.mean_duration.at("B") == 4'000'000);  // op means are the intervals'
}

TEST_CASE("exposed communication of one action, from its streams' spans (hand-worked)", "[report][validation]") {
  // One stream, busy [0, 10), communicating [2, 3) and [6, 8): nothing else computes, so all 3 is
  // exposed; overlapping comm intervals count once.
  CHECK(exposed_communication({StreamSpan{0, 10, {{2, 3}, {6, 8}}}}) == 3);
  CHECK(exposed_communication({StreamSpan{0, 10, {{2, 5}, {4, 6}}}}) == 4);
  // An F&B pair: stream a [0, 10) communicates [2, 4) and [6, 7); stream b [0, 12) communicates
  // [3, 5) and [9, 11). Exposed where no stream computes: [3, 4) (both communicate) and [10, 11)
  // (a has ended, b communicates): 2. Hidden: [2, 3) and [6, 7) under b's compute, [4, 5) and
  // [9, 10) under a's.
  CHECK(exposed_communication({StreamSpan{0, 10, {{2, 4}, {6, 7}}}, StreamSpan{0, 12, {{3, 5}, {9, 11}}}}) == 2);
  // No communication, or none at all: 0.
  CHECK(exposed_communication({StreamSpan{0, 10, {}}, StreamSpan{0, 5, {}}}) == 0);
  CHECK(exposed_communication({}) == 0);
}
