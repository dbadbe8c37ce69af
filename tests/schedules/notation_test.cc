// PyTorch CSV dialects (torch <= 2.5: B input-grad beside W, BW full backward; today's: I, W, B
// full) and comm actions (SEND/RECV as explicit transfers, the FSDP ones kept for export), with
// the effect of comm actions on a timeline worked out by hand.
#include "schedules/notation.h"

#include "catch.h"
#include "core/error.h"
#include "test_util.h"

using namespace ppsim;
using namespace ppsim::test;

namespace {
std::string ranks_text(const Schedule& s) {
  std::string out;
  for (const auto& r : s.ranks) {
    for (const auto& a : r) out += format_action(a) + " ";
    out += "| ";
  }
  return out;
}
std::string import_error(const std::string& csv, Dialect d = Dialect::Auto) {
  try {
    (void)import_csv(csv, "s.csv", 0, 0, Layout::Auto, d);
  } catch (const InputError& e) {
    return e.one_line();
  }
  return "no error";
}
SimResult simulate_file(const Schedule& s, double latency) {
  SimCosts costs = uniform_costs(s.stages_per_pipe, unit_costs(1, 2, 0));
  costs.link.latency = static_cast<Time>(latency * U);
  SimOptions opt;
  opt.record_timeline = true;
  return simulate(s, costs, opt);
}
Time interval_start(const SimResult& r, int rank, const std::string& op) {
  for (const auto& iv : r.timeline.intervals)
    if (iv.rank == rank && format_action(iv.action) == op) return iv.start;
  return -1;
}
}  // namespace

TEST_CASE("csv dialect: torch <= 2.5 (B beside W is the input grad, BW the full backward)", "[schedules][notation]") {
  // Rank 0 splits its backward (B then W per micro-batch), rank 1 runs full backwards (BW).
  const std::string old = "0F0,0F1,0B0,0W0,0B1,0W1\n1F0,1BW0,1F1,1BW1\n";
  const Schedule s = import_csv(old, "old.csv", 0, 0);
  CHECK(s.dialect == "2.5");
  CHECK(ranks_text(s) == "0F0 0F1 0I0 0W0 0I1 0W1 | 1F0 1B0 1F1 1B1 | ");
  // Round trip: written back in the dialect it was read in, and in today's on request.
  CHECK(schedule_to_csv(s) == old);
  CHECK(schedule_to_csv(s, Dialect::Torch25) == old);
  CHECK(schedule_to_csv(s, Dialect::Current) == "0F0,0F1,0I0,0W0,0I1,0W1\n1F0,1B0,1F1,1B1\n");
}

TEST_CASE("csv dialect: B and W of one (stage, mb) without BW is torch <= 2.5 (PyTorch's zb1p compute artifact)",
          "[schedules][notation]") {
  // The artifact's shape: empty fields, B then W of the same op, no I anywhere.
  const std::string csv = "0F0,0F1,,0B0,0W0,0B1,0W1\n,1F0,1B0,1W0,1F1,1B1,1W1\n";
  const Schedule s = import_csv(csv, "zb.csv", 0, 0);
  CHECK(s.dialect == "2.5");
  CHECK(ranks_text(s) == "0F0 0F1 0I0 0W0 0I1 0W1 | 1F0 1I0 1W0 1F1 1I1 1W1 | ");
  // Empty fields are not kept: the file written back has none.
  CHECK(schedule_to_csv(s) == "0F0,0F1,0B0,0W0,0B1,0W1\n1F0,1B0,1W0,1F1,1B1,1W1\n");
  // A B without a W (rank 1's micro-batch 1) stays the full backward in torch <= 2.5.
  const Schedule mixed = import_csv("0F0,0F1,0B0,0W0,0B1,0W1\n1F0,1B0,1W0,1F1,1B1\n", "m.csv", 0, 0);
  CHECK(ranks_text(mixed) == "0F0 0F1 0I0 0W0 0I1 0W1 | 1F0 1I0 1W0 1F1 1B1 | ");
}

TEST_CASE("csv dialect: today's (I, W, B full) and files both read alike", "[schedules][notation]") {
  const Schedule s = import_csv("0F0,0I0,0W0\n1F0,1B0\n", "new.csv", 0, 0);
  CHECK(s.dialect == "current");
  CHECK(ranks_text(s) == "0F0 0I0 0W0 | 1F0 1B0 | ");
  // Only F and B: the same in both dialects, reported as today's.
  CHECK(import_csv("0F0,0B0\n1F0,1B0\n", "fb.csv", 0, 0).dialect == "current");
  // Forcing 2.5 on a file with I, or today's on one with BW, names the token and the fix.
  CHECK(import_error("0F0,0I0,0W0\n1F0,1B0\n", Dialect::Torch25) ==
        "s.csv:1:5: I is not an action of torch <= 2.5's dialect (its input-grad is B), did you mean '--csv-dialect "
        "current'?");
  CHECK(import_error("0F0,0BW0\n1F0,1BW0\n", Dialect::Current) ==
        "s.csv:1:5: BW is torch <= 2.5's full backward, not an action of today's dialect, did you mean '--csv-dialect "
        "2.5'?");
  CHECK(import_error("0F0,0BW0\n1F0,1I0,1W0\n") ==
        "s.csv:2:5: this file mixes torch <= 2.5's BW (full backward) with today's I (input-grad); pass --csv-dialect "
        "to say "
        "which it is");
  // Forced today's on a B-beside-W file: the old error (both a full and a split backward).
  CHECK(import_error("0F0,0B0,0W0\n1F0,1B0\n", Dialect::Current).find("0B0") != std::string::npos);
  CHECK(parse_dialect("2.6") == Dialect::Current);
  CHECK_THROWS_AS(parse_dialect("2.4"), InputError);
}

TEST_CASE("comm actions: read, written back in place, checked", "[schedules][notation]") {
  const std::string csv = "0UNSHARD,0F0,0SEND_F0,0RECV_B0,0BW0,0REDUCE_GRAD,0RESHARD\n1RECV_F0,1F0,1BW0,1SEND_B0\n";
  const Schedule s = import_csv(csv, "c.csv", 0, 0);
  CHECK(s.dialect == "2.5");
  CHECK(ranks_text(s) == "0F0 0B0 | 1F0 1B0 | ");
  REQUIRE(s.comm.size() == 2);
  REQUIRE(s.comm[0].size() == 5);
  // `after` counts the compute actions listed before: UNSHARD 0, SEND_F 1, RECV_B 1, then 2, 2.
  CHECK(s.comm[0][0].kind == CommKind::Unshard);
  CHECK(s.comm[0][0].microbatch == -1);
  CHECK(s.comm[0][0].after == 0);
  CHECK(s.comm[0][1].after == 1);
  CHECK(s.comm[0][2].after == 1);
  CHECK(s.comm[0][3].after == 2);
  CHECK(s.comm[1][0].after == 0);
  CHECK(s.comm[1][1].after == 2);
  CHECK(schedule_to_csv(s) == csv);
  // Dropped on request.
  CHECK(import_csv(csv, "c.csv", 0, 0, Layout::Auto, Dialect::Auto, false).comm.empty());
  // Errors point at the token.
  CHECK(import_error("0F0,0SEND_F0,0B0\n1F0,1SEND_F0,1B0\n") ==
        "s.csv:2:5: 1SEND_F0: stage 1 is the last of its pipe, it has no next stage");
  CHECK(import_error("0F0,0RECV_F0,0B0\n1F0,1B0\n") ==
        "s.csv:1:5: 0RECV_F0: stage 0 is the first of its pipe, it has no previous stage");
  CHECK(import_error("0F0,1SEND_B0,0B0\n1F0,1B0\n") ==
        "s.csv:1:5: 1SEND_B0 is on rank 0, but stage 1 lives on rank 1 in this layout");
  CHECK(import_error("0F0,0SEND_F0,0SEND_F0,0B0\n1F0,1B0\n") ==
        "s.csv:1:14: 0SEND_F0 is listed twice (first at line 1, column 5)");
  CHECK(import_error("0F0,0SEND_F3,0B0\n1F0,1B0\n") ==
        "s.csv:1:5: 0SEND_F3 names micro-batch 3, but the file's ops use 0..0");
  CHECK(import_error("0F0,0SEND_X0,0B0\n1F0,1B0\n") ==
        "s.csv:1:5: bad action '0SEND_X0': expected {stage}{F|I|W|B}{micro-batch}, e.g. 3F7");
}

TEST_CASE("comm actions: a transfer starts when its producer ended and both sides are posted (hand-worked)",
          "[schedules][notation][sim]") {
  // P=2, M=2, F=1, B=2, latency 0.5, infinite bandwidth. Rank 0 posts its sends only after both
  // forwards; rank 1 posts the receive of micro-batch 1 only after F0.
  const std::string csv =
      "0F0,0F1,0SEND_F0,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
      "1RECV_F0,1F0,1RECV_F1,1F1,1B0,1SEND_B0,1B1,1SEND_B1\n";
  // Explicit:
  //   rank 0: F0 [0,1], F1 [1,2]; SEND_F0, SEND_F1, RECV_B0 posted at 2.
  //   F0's transfer: max(F0 end 1, send 2, recv 0) = 2, arrives 2.5 -> rank 1 F0 [2.5,3.5].
  //   RECV_F1 posted at 3.5: F1's transfer starts max(2, 2, 3.5) = 3.5, arrives 4 -> F1 [4,5].
  //   rank 1: B0 [5,7]; SEND_B0 posted at 7 -> arrives 7.5; B1 [7,9], SEND_B1 at 9.
  //   rank 0: B0 [7.5,9.5]; RECV_B1 posted at 9.5 -> B1's gradient leaves at 9.5, arrives 10;
  //   B1 [10,12]. Makespan 12.
  const Schedule s = import_csv(csv, "c.csv", 0, 0);
  const SimResult e = simulate_file(s, 0.5);
  CHECK(e.makespan() == 12 * U);
  CHECK(interval_start(e, 1, "1F0") == static_cast<Time>(2.5 * U));
  CHECK(interval_start(e, 1, "1F1") == 4 * U);
  CHECK(interval_start(e, 1, "1B0") == 5 * U);
  CHECK(interval_start(e, 0, "0B0") == static_cast<Time>(7.5 * U));
  CHECK(interval_start(e, 0, "0B1") == 10 * U);
  REQUIRE(e.timeline.transfers.size() == 4);
  std::vector<Time> starts;
  for (const auto& t : e.timeline.transfers) starts.push_back(t.start);
  CHECK(starts == std::vector<Time>{2 * U, static_cast<Time>(3.5 * U), 7 * U, static_cast<Time>(9.5 * U)});
  // Dropped: each transfer leaves when its producer ends.
  //   rank 0 F0 [0,1], F1 [1,2]; rank 1 F0 [1.5,2.5], F1 [2.5,3.5], B0 [3.5,5.5], B1 [5.5,7.5];
  //   rank 0 B0 [6,8], B1 [8,10]. Makespan 10.
  const Schedule d = import_csv(csv, "c.csv", 0, 0, Layout::Auto, Dialect::Auto, false);
  const SimResult i = simulate_file(d, 0.5);
  CHECK(i.makespan() == 10 * U);
  CHECK(interval_start(i, 1, "1F0") == static_cast<Time>(1.5 * U));
  CHECK(interval_start(i, 0, "0B1") == 8 * U);
  // A file whose comm actions sit right beside their compute ops times as the implicit model.
  const std::string tight =
      "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0RECV_B1,0B0,0B1\n"
      "1RECV_F0,1RECV_F1,1F0,1F1,1B0,1SEND_B0,1B1,1SEND_B1\n";
  CHECK(simulate_file(import_csv(tight, "t.csv", 0, 0), 0.5).makespan() == 10 * U);
  // FSDP actions alone change nothing.
  CHECK(simulate_file(import_csv("0UNSHARD,0F0,0F1,0B0,0B1,0RESHARD\n1F0,1F1,1B0,1B1\n", "u.csv", 0, 0), 0.5)
            .makespan() == 10 * U);
}

TEST_CASE("csv: an op listed twice, or both backwards of one micro-batch, are refused at line:col",
          "[schedules][notation]") {
  // 1B1 twice on line 2: the second at column 17 (1F0,1B0,1F1,1B1, is 16 characters), the first at 13.
  CHECK(import_error("0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1,1B1\n") == "s.csv:2:17: op 1B1 appears twice (first at 2:13)");
  // Today's dialect: B (full) and I of stage 1's micro-batch 0; the I at 2:9, the B at 2:5.
  CHECK(import_error("0F0,0B0\n1F0,1B0,1I0,1W0\n", Dialect::Current) ==
        "s.csv:2:9: stage 1 micro-batch 0 has both a full backward 1B0 and a split one (the other at 2:5)");
}
