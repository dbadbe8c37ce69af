// Several ranks' traces (src/trace/ranks.h) and the pipeline run rebuilt from them
// (src/trace/pipeline_run.h): hand-built 2-rank traces whose clock offset, waiting and timeline
// are worked out below.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "catch.h"
#include "core/error.h"
#include "robustness/run_ppsim.h"
#include "trace/pipeline_run.h"
#include "trace/rank_builder.h"
#include "trace/ranks.h"

using namespace ppsim;
using namespace ppsim::trace;

namespace {

constexpr Time kUs = 1000;

using ppsim::test::RankBuilder;

const char* kP2p = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)";

// 1F1B, P = 2, M = 2, F 10 us and B 20 us on each rank, point-to-point transfers of 2 us, as
// torch.distributed.pipelining records it (PP:{action} ranges; each backward's kernels launched
// from autograd's thread, tid 2, while the action's range is open on the main thread). The true
// GPU timeline (us, from 100):
//   rank 0: 0F0 [100,110) 0F1 [110,120)                 0B0 [144,164)            0B1 [174,194)
//           send F0 [110,112) send F1 [120,122) recv B0 [122,144) recv B1 [164,174)
//   rank 1: 1F0 [112,122) 1B0 [122,142) 1F1 [142,152) 1B1 [152,172)
//           recv F0 [105,112) recv F1 [118,122) send B0 [142,144) send B1 [172,174)
// The k-th SendRecv of one rank is the k-th of the other, and the two end together. Rank 1's
// clock runs 5000 us ahead.
// Two ranks' builders: rank 1 in its own process on device 1, its clock 5000 us ahead.
std::pair<RankBuilder, RankBuilder> two_ranks() {
  RankBuilder r0, r1;
  r0.rank = 0;
  r1.rank = 1;
  r1.pid = 200;
  r1.device = 1;
  r1.shift = 5000;
  return {r0, r1};
}

std::pair<RankBuilder, RankBuilder> one_f_one_b() {
  auto [r0, r1] = two_ranks();
  r0.range("PP:0F0", 0, 2);
  r0.launched("gemm_fwd", 1, 100, 10);
  r0.range("PP:0SEND_F0", 2, 2);
  r0.launched(kP2p, 3, 110, 2, 20);
  r0.range("PP:0F1", 4, 2);
  r0.launched("gemm_fwd", 5, 110, 10);
  r0.range("PP:0SEND_F1", 6, 2);
  r0.launched(kP2p, 7, 120, 2, 20);
  r0.range("PP:0RECV_B0", 8, 2);
  r0.launched(kP2p, 9, 122, 22, 20);
  r0.range("PP:0B0", 10, 4);
  r0.launched("gemm_bwd", 12, 144, 20, 7, 2);
  r0.range("PP:0RECV_B1", 14, 2);
  r0.launched(kP2p, 15, 164, 10, 20);
  r0.range("PP:0B1", 16, 4);
  r0.launched("gemm_bwd", 18, 174, 20, 7, 2);
  r0.launched("optimizer_step", 30, 195, 2);  // under no action: not in the step
  r1.range("PP:1RECV_F0", 0, 2);
  r1.launched(kP2p, 1, 105, 7, 20);
  r1.range("PP:1F0", 2, 2);
  r1.launched("gemm_fwd", 3, 112, 10);
  r1.range("PP:1RECV_F1", 4, 2);
  r1.launched(kP2p, 5, 118, 4, 20);
  r1.range("PP:1B0", 6, 4);
  r1.launched("gemm_bwd", 8, 122, 20, 7, 2);
  r1.range("PP:1SEND_B0", 10, 2);
  r1.launched(kP2p, 11, 142, 2, 20);
  r1.range("PP:1F1", 12, 2);
  r1.launched("gemm_fwd", 13, 142, 10);
  r1.range("PP:1B1", 14, 4);
  r1.launched("gemm_bwd", 16, 152, 20, 7, 2);
  r1.range("PP:1SEND_B1", 18, 2);
  r1.launched(kP2p, 19, 172, 2, 20);
  return {r0, r1};
}

// One rank with per-layer work and no pipeline ranges, as plain.json.
void write_plain_rank(robust::Scratch& dir) {
  RankBuilder g;
  g.range("layer0.attn.F", 0, 2);
  g.launched("k", 1, 100, 3);
  dir.write("plain.json", g.json());
}

}  // namespace

TEST_CASE("pipeline range names: PP:{action}, GPipe's and Megatron's", "[trace][ranks]") {
  auto pr = parse_pipeline_range("PP:0F3");
  REQUIRE(pr);
  REQUIRE(pr->kind == PipelineRange::Kind::compute);
  REQUIRE(format_action(pr->action) == "0F3");
  REQUIRE(format_action(parse_pipeline_range("PP:1I2")->action) == "1I2");
  REQUIRE(format_action(parse_pipeline_range("PP:2W0")->action) == "2W0");
  pr = parse_pipeline_range("PP:(0F7;7B3)OVERLAP_F_B");
  REQUIRE(pr);
  REQUIRE(pr->action.overlapped);
  REQUIRE(format_action(pr->action) == "(0F7;7B3)OVERLAP_F_B");
  REQUIRE(parse_pipeline_range("PP:1SEND_F3")->kind == PipelineRange::Kind::comm);
  REQUIRE(parse_pipeline_range("PP:0RECV_B2")->kind == PipelineRange::Kind::comm);
  REQUIRE(parse_pipeline_range("PP:0UNSHARD")->kind == PipelineRange::Kind::comm);
  REQUIRE(parse_pipeline_range("PP:0REDUCE_GRAD")->kind == PipelineRange::Kind::comm);
  pr = parse_pipeline_range("Backward 4");
  REQUIRE(pr);
  REQUIRE(pr->action.first.kind == OpKind::B);
  REQUIRE(pr->action.first.microbatch == 4);
  REQUIRE(parse_pipeline_range("forward-compute")->kind == PipelineRange::Kind::megatron_f);
  REQUIRE(parse_pipeline_range("backward-compute")->kind == PipelineRange::Kind::megatron_b);
  REQUIRE_FALSE(parse_pipeline_range("PP:hello"));
  REQUIRE_FALSE(parse_pipeline_range("layers.3.forward"));
  REQUIRE_FALSE(parse_pipeline_range("Forward pass"));
}

TEST_CASE("two ranks: merged by distributedInfo.rank, clock offset from collectives' ends, waiting split",
          "[trace][ranks]") {
  auto [b0, b1] = one_f_one_b();
  // Given rank 1 first: the order comes from distributedInfo, not the command line.
  const MultiRank m = merge_ranks({b1.read("r1.json"), b0.read("r0.json")});
  REQUIRE(m.ranks.size() == 2);
  REQUIRE(m.ranks[0].rank == 0);
  REQUIRE(m.ranks[0].path == "r0.json");
  REQUIRE(m.ranks[1].rank == 1);
  // Rank 1's clock is 5000 us ahead: every matched pair ends 5000 us later there.
  REQUIRE(m.ranks[0].offset == 0);
  REQUIRE(m.ranks[1].offset == -5000 * kUs);
  REQUIRE(m.ranks[1].residual == 0);
  REQUIRE(m.ranks[1].support == 4);
  REQUIRE(m.matched_groups == 4);
  // Waiting: each pair transfers from the later start to the common end.
  //   k0: [110,112) / [105,112): rank 1 waited 5;  k1: [120,122) / [118,122): rank 1 waited 2;
  //   k2: [122,144) / [142,144): rank 0 waited 20; k3: [164,174) / [172,174): rank 0 waited 8.
  REQUIRE(m.ranks[0].comm_total == 36 * kUs);
  REQUIRE(m.ranks[0].comm_wait == 28 * kUs);
  REQUIRE(m.ranks[0].comm_transfer == 8 * kUs);
  REQUIRE(m.ranks[1].comm_total == 15 * kUs);
  REQUIRE(m.ranks[1].comm_wait == 7 * kUs);
  REQUIRE(m.ranks[1].comm_transfer == 8 * kUs);
}

TEST_CASE("one all-reduce whose ranks' ends spread past the tolerance in small steps is one collective",
          "[trace][ranks]") {
  // Four ranks, one clock. All-reduce A starts at 900, 950, 990, 960 us and ends at 1000, 1002, 1004,
  // 1007: 7 us from first to last end, above the 5 us tolerance, but each end within 3 us of the one
  // before: one collective, each rank transferring from the last start (990) to its end: 10, 12,
  // 14, 17 us. Then three that start at 1990 and end at 2000 (3000, 4000) on every rank: 10 each.
  const char* kAr = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)";
  const double start[] = {900, 950, 990, 960}, end[] = {1000, 1002, 1004, 1007};
  std::vector<RankTrace> traces;
  for (int r = 0; r < 4; ++r) {
    RankBuilder b;
    b.rank = r;
    b.pid = 100 + r;
    b.device = r;
    b.launched(kAr, 1, start[r], end[r] - start[r], 20);
    for (int k = 1; k <= 3; ++k) b.launched(kAr, 1 + k, 990 + 1000 * k, 10, 20);
    traces.push_back(b.read(fmt::format("r{}.json", r)));
  }
  const MultiRank m = merge_ranks(std::move(traces));
  CHECK(m.matched_groups == 4);
  const double transfer_a[] = {10, 12, 14, 17};
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    CHECK(m.ranks[r].matched_kernels == 4);
    CHECK(m.ranks[r].comm_transfer == static_cast<Time>((transfer_a[r] + 3 * 10) * kUs));
  }
}

TEST_CASE("a rank given twice, or a mix of traces with and without a rank, is refused", "[trace][ranks]") {
  auto [b0, b1] = one_f_one_b();
  b1.rank = 0;
  REQUIRE_THROWS_WITH(merge_ranks({b0.read("a.json"), b1.read("b.json")}),
                      PPSIM_CONTAINS("distributedInfo.rank 0 is also the rank of a.json"));
  b1.rank = -1;
  REQUIRE_THROWS_WITH(merge_ranks({b0.read("a.json"), b1.read("b.json")}),
                      PPSIM_CONTAINS("has no distributedInfo.rank"));
}

TEST_CASE("no rank in the traces: the command line's order; a kernel no peer matched counts as transfer",
          "[trace][ranks]") {
  auto [b0, b1] = one_f_one_b();
  b0.rank = b1.rank = -1;
  b1.launched(kP2p, 40, 300, 3, 20);  // a fifth SendRecv on rank 1 only, ending at 303: no partner
  const MultiRank m = merge_ranks({b0.read("r0.json"), b1.read("r1.json")});
  REQUIRE(m.ranks[1].rank == 1);
  REQUIRE_FALSE(m.ranks[1].rank_from_trace);
  REQUIRE(m.ranks[1].offset == -5000 * kUs);
  REQUIRE(m.ranks[1].support == 4);
  REQUIRE(m.matched_groups == 4);
  REQUIRE(m.ranks[1].comm_wait == 7 * kUs);
  REQUIRE(m.ranks[1].comm_transfer == (8 + 3) * kUs);
}

TEST_CASE("traces with no communication and no rank: not called ranks of one run, nothing aligned", "[trace][ranks]") {
  // Two single-GPU runs given together: a GEMM each, no collective, no distributedInfo. Nothing can
  // align their clocks, and nothing says they are one run: the note asks.
  RankBuilder a, b;
  b.pid = 200, b.device = 1;
  a.launched("gemm", 1, 100, 10);
  b.launched("gemm", 1, 100, 10);
  const MultiRank m = merge_ranks({a.read("a.json"), b.read("b.json")});
  CHECK(m.matched_groups == 0);
  CHECK_THAT(m.note, PPSIM_CONTAINS("no trace has a communication kernel or a distributedInfo rank"));
  CHECK_THAT(m.note, PPSIM_CONTAINS("2 separate runs"));
}

TEST_CASE("three ranks of a pipeline: rank 2 aligns through rank 1, its only peer", "[trace][ranks]") {
  // Rank 0 talks to rank 1 only, rank 1 to both, rank 2 to rank 1 only (point-to-point kernels).
  // True ends: 0<->1 at 110, 150; 1<->2 at 130, 185. Clocks: rank 1 +300 us, rank 2 -700 us.
  // Against rank 0, rank 2's ends fit at best 110 and 165 (15 us off); against rank 1, exactly.
  RankBuilder a, b, c;
  a.rank = 0, b.rank = 1, c.rank = 2;
  b.pid = 200, b.device = 1, b.shift = 300;
  c.pid = 300, c.device = 2, c.shift = -700;
  a.launched(kP2p, 1, 100, 10, 20);  // ends 110
  a.launched(kP2p, 2, 140, 10, 20);  // ends 150
  b.launched(kP2p, 1, 105, 5, 20);   // ends 110, waited for nothing: started after rank 0
  b.launched(kP2p, 2, 120, 10, 20);  // ends 130
  b.launched(kP2p, 3, 145, 5, 20);   // ends 150
  b.launched(kP2p, 4, 183, 2, 20);   // ends 185
  c.launched(kP2p, 1, 110, 20, 20);  // ends 130: waited 10 for rank 1 (joined at 120)
  c.launched(kP2p, 2, 175, 10, 20);  // ends 185: waited 8 (rank 1 joined at 183)
  const MultiRank m = merge_ranks({a.read("a.json"), b.read("b.json"), c.read("c.json")});
  REQUIRE(m.ranks[1].offset == -300 * kUs);
  REQUIRE(m.ranks[1].aligned_to == 0);
  REQUIRE(m.ranks[2].offset == 700 * kUs);
  REQUIRE(m.ranks[2].aligned_to == 1);
  REQUIRE(m.ranks[2].support == 2);
  REQUIRE(m.matched_groups == 4);
  REQUIRE(m.ranks[2].comm_wait == 18 * kUs);
  // Rank 0 waited 5 (joined at 100, rank 1 at 105) and 5 (140 against 145).
  REQUIRE(m.ranks[0].comm_wait == 10 * kUs);
  REQUIRE(m.ranks[1].comm_wait == 0);
}

TEST_CASE("a pipelining run: executed order, op times, measured bubble and exposed communication",
          "[trace][ranks]") {
  auto [b0, b1] = one_f_one_b();
  const PipelineRun p = rebuild_pipeline(merge_ranks({b0.read("r0.json"), b1.read("r1.json")}));
  REQUIRE(p.csv == "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  REQUIRE(p.schedule.pp == 2);
  REQUIRE(p.schedule.microbatches == 2);
  REQUIRE(p.ranks[0].source == "PP:");
  // The backward's kernel came from autograd's thread, under the main thread's PP:0B0.
  REQUIRE(p.ranks[0].actions[2].compute == 20 * kUs);
  REQUIRE(p.ranks[0].actions[2].kernels == 1);
  // Rank 1's actions on rank 0's clock: 1F0 ran [112, 122).
  REQUIRE(p.ranks[1].actions[0].gpu_start == 112 * kUs);
  REQUIRE(p.ranks[1].actions[0].gpu_end == 122 * kUs);
  // The step: 0F0's start (100) to 0B1's end (194); the optimizer kernel after it is not in it.
  REQUIRE(p.makespan() == 94 * kUs);
  REQUIRE(p.ranks[0].compute == 60 * kUs);
  REQUIRE(p.ranks[1].compute == 60 * kUs);
  // Exposed: the transfer parts [110,112) [120,122) [142,144) [172,174) on rank 0, of which
  // [110,112) ran beside 0F1: 6 us; on rank 1 [110,112) [120,122) [142,144) [172,174), of which
  // [120,122) beside 1F0 and [142,144) beside 1F1: 4 us.
  REQUIRE(p.ranks[0].exposed_comm == 6 * kUs);
  REQUIRE(p.ranks[1].exposed_comm == 4 * kUs);
  REQUIRE(p.ranks[0].bubble == (94 - 60 - 6) * kUs);
  REQUIRE(p.ranks[1].bubble == (94 - 60 - 4) * kUs);
  REQUIRE(p.ranks[0].comm_wait == 28 * kUs);
  // Costs: F 10, B 20 per slice; links: the mean transfer, 2 us.
  REQUIRE(p.costs.slice.size() == 2);
  REQUIRE(p.costs.slice[0].f == 10 * kUs);
  REQUIRE(p.costs.slice[1].b == 20 * kUs);
  REQUIRE(p.costs.slice[1].w == 0);
  REQUIRE(p.costs.link.latency == 2 * kUs);
}

TEST_CASE("schedule executed: the order simulated with its own costs gives the measured step", "[trace][ranks]") {
  auto [b0, b1] = one_f_one_b();
  const PipelineRun p = rebuild_pipeline(merge_ranks({b0.read("r0.json"), b1.read("r1.json")}));
  const ExecutedComparison c = compare_executed(p);
  // Simulated by hand: 0F0 [0,10) 0F1 [10,20); 1F0 at 10 + 2 = 12, [12,22); 1B0 [22,42); its
  // gradient at 44: 0B0 [44,64); 1F1 [42,52) 1B1 [52,72); 0B1 at 74, [74,94): 94 us, as measured.
  REQUIRE(c.measured_makespan == 94 * kUs);
  REQUIRE(c.simulated_makespan == 94 * kUs);
  REQUIRE(c.ranks[0].simulated_compute == 60 * kUs);
  // The links do not block: the simulated wait is bubble, none of it exposed communication.
  REQUIRE(c.ranks[0].simulated_exposed == 0);
  REQUIRE(c.ranks[0].simulated_bubble == 34 * kUs);
  REQUIRE(c.ranks[1].simulated_bubble == 34 * kUs);
  REQUIRE(c.ranks[0].measured_bubble + c.ranks[0].measured_exposed == 34 * kUs);
  // With PyTorch's sends and receives (schedules/torch_p2p.h), lowered: rank 0 0SEND_F0,
  // 0SEND_F1, 0RECV_B0, 0RECV_B1 after 1, 2, 2, 3 of its actions; rank 1 1RECV_F0, 1RECV_F1,
  // 1SEND_B0, 1SEND_B1 after 0, 1, 2, 4. One at a time per rank: F0's output leaves at 10, lands
  // 12; 0SEND_F1 (ready at 20) waits for 1RECV_F1's turn at 22 (after 1F0 [12,22)), lands 24;
  // 0RECV_B0 (24) meets 1SEND_B0 at 42, lands 44: 0B0 [44,64); 1F1 [42,52), 1B1 [52,72); 0RECV_B1
  // (64) meets 1SEND_B1 at 72, lands 74: 0B1 [74,94). With one peer each, the stream holds nothing
  // back: 94 us again.
  const ExecutedComparison t = compare_executed(p, true);
  REQUIRE(t.torch_runtime);
  REQUIRE(t.simulated_makespan == 94 * kUs);
  REQUIRE(t.ranks[1].simulated_bubble == 34 * kUs);
}

TEST_CASE("Schedule1F1B's traces: calls between the compute ranges, a long wait paired with its peer", "[trace][ranks]") {
  // PyTorch's single-stage 1F1B, P = 2, M = 2, F 10 ms and B 20 ms, marked 'Forward i' /
  // 'Backward i' around the compute only (tools/experiments/record_pp_traces.py): its calls run between the
  // ranges. True GPU times (ms); rank 1's clock 5 ms ahead.
  //   rank 0: F0 [100,110) F1 [110,120) B0 [140.67,160.67) B1 [170.93,190.93)
  //           SEND_F0 [110,110.3)  SEND_F1+RECV_B0 [120,140.67)  RECV_B1 [160.67,170.93)
  //   rank 1: F0 [110.3,120.3) B0 [120.3,140.3) F1 [140.6,150.6) B1 [150.6,170.6)
  //           RECV_F0 [105,110.3)  SEND_B0+RECV_F1 [140.3,140.6)  SEND_B1 [170.6,170.93)
  // Rank 0's fused batch waited 20 ms for rank 1's and ended 70 us after it; the other two pairs
  // end together. The clocks fit on those two (median difference 0: kernels of one transfer end
  // within 5 us), so the first pass leaves the fused pair apart and the second pairs it (within
  // the fit's 100 us): its transfer is 140.67 - 140.3 = 0.37 ms on rank 0, 0.3 on rank 1.
  auto [r0, r1] = two_ranks();
  r0.range("Forward 0", 0, 2);
  r0.launched("gemm_fwd", 1, 100000, 10000);
  r0.launched(kP2p, 3, 110000, 300, 20);
  r0.range("Forward 1", 4, 2);
  r0.launched("gemm_fwd", 5, 110000, 10000);
  r0.launched(kP2p, 7, 120000, 20670, 20);
  r0.range("Backward 0", 8, 4);
  r0.launched("gemm_bwd", 10, 140670, 20000);
  r0.launched(kP2p, 13, 160670, 10260, 20);
  r0.range("Backward 1", 14, 4);
  r0.launched("gemm_bwd", 16, 170930, 20000);
  r1.launched(kP2p, 0, 105000, 5300, 20);
  r1.range("Forward 0", 2, 2);
  r1.launched("gemm_fwd", 3, 110300, 10000);
  r1.range("Backward 0", 5, 4);
  r1.launched("gemm_bwd", 7, 120300, 20000);
  r1.launched(kP2p, 10, 140300, 300, 20);
  r1.range("Forward 1", 11, 2);
  r1.launched("gemm_fwd", 12, 140600, 10000);
  r1.range("Backward 1", 14, 4);
  r1.launched("gemm_bwd", 16, 150600, 20000);
  r1.launched(kP2p, 19, 170600, 330, 20);
  const MultiRank m = merge_ranks({r0.read("r0.json"), r1.read("r1.json")});
  REQUIRE(m.ranks[1].offset == -5000 * kUs);
  REQUIRE(m.matched_groups == 3);
  // Rank 0's kernels of 0.3, 20.67 and 10.26 ms held 0.3, 0.37 and 0.33 of transfer.
  REQUIRE(m.ranks[0].comm_transfer == (300 + 370 + 330) * kUs);
  REQUIRE(m.ranks[0].comm_wait == (20670 - 370 + 10260 - 330) * kUs);
  REQUIRE(m.ranks[1].comm_transfer == (300 + 300 + 330) * kUs);
  const PipelineRun p = rebuild_pipeline(m);
  REQUIRE(p.csv == "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  REQUIRE(p.ranks[0].source == "Forward i");
  REQUIRE(p.makespan() == 90930 * kUs);
  // The calls count although no range was open at their launch: the link is their mean transfer,
  // (0.3 + 0.3 + 0.37 + 0.3 + 0.33 + 0.33) / 6 ms.
  const Time L = (300 + 300 + 370 + 300 + 330 + 330) * kUs / 6;
  REQUIRE(p.costs.link.latency == L);
  // Simulated with its own costs (F 10, B 20): links that do not wait give rank 0's B1 at
  // 3F + 3B + 2L; Schedule1F1B's calls (rank 1 receives F1's input only after its B0) 3F + 3B + 3L.
  REQUIRE(compare_executed(p).simulated_makespan == 90000 * kUs + 2 * L);
  REQUIRE(compare_executed(p, true).simulated_makespan == 90000 * kUs + 3 * L);
  // Every action ran its slice's mean here: replayed at its own time, the same.
  REQUIRE(compare_executed(p, true).replayed_makespan == 90000 * kUs + 3 * L);
}

TEST_CASE("GPipe's and Megatron's ranges give the rank's stage and the micro-batch", "[trace][ranks]") {
  RankBuilder a, b;
  a.rank = 0;
  b.rank = 1;
  b.pid = 200;
  b.device = 1;
  // Megatron on both ranks: forward-compute x2 then backward-compute x2 (GPipe-like order).
  double t = 0;
  for (const char* n : {"forward-compute", "forward-compute", "backward-compute", "backward-compute"}) {
    a.range(n, t, 2);
    a.launched("k", t + 1, 100 + 10 * t, 3);
    b.range(n, t, 2);
    b.launched("k", t + 1, 130 + 10 * t, 3);
    t += 4;
  }
  const PipelineRun p = rebuild_pipeline(merge_ranks({a.read("a.json"), b.read("b.json")}));
  REQUIRE(p.csv == "0F0,0F1,0B0,0B1\n1F0,1F1,1B0,1B1\n");
  REQUIRE(p.ranks[1].source == "Megatron");
  RankBuilder g;
  g.range("Forward 0", 0, 2);
  g.launched("k", 1, 100, 3);
  g.range("Backward 0", 4, 2);
  g.launched("k", 5, 110, 6);
  const PipelineRun q = rebuild_pipeline(merge_ranks({g.read("g.json")}));
  REQUIRE(q.csv == "0F0,0B0\n");
  REQUIRE(q.ranks[0].source == "Forward i");
  REQUIRE(q.makespan() == 16 * kUs);
}

TEST_CASE("a trace without pipeline ranges is refused for the executed order", "[trace][ranks]") {
  RankBuilder g;
  g.range("layer0.attn.F", 0, 2);
  g.launched("k", 1, 100, 3);
  REQUIRE_THROWS_WITH(rebuild_pipeline(merge_ranks({g.read("g.json")})),
                      PPSIM_CONTAINS("no pipeline action ranges"));
}

TEST_CASE("import-trace CLI: several ranks, a folder, --schedule executed, --executed-csv, refusals",
          "[trace][ranks][cli]") {
  robust::Scratch dir("trace_ranks_cli");
  auto [b0, b1] = one_f_one_b();
  std::filesystem::create_directories(dir.path("run"));
  dir.write("run/r1.json", b1.json());
  dir.write("run/r0.json", b0.json());
  const robust::Result r =
      robust::run_ppsim(dir, "import-trace run/r1.json run/r0.json --schedule executed --executed-csv order.csv");
  REQUIRE(r.code == 0);
  REQUIRE(ppsim::test::read_file(dir.path("order.csv")) == "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  REQUIRE(r.out.find("makespan: measured 0.094 ms, simulated 0.094 ms (+0.0%)") != std::string::npos);
  // The folder: the same two traces; JSON for scripts.
  const robust::Result js = robust::run_ppsim(dir, "import-trace run --schedule executed --format json");
  REQUIRE(js.code == 0);
  const nlohmann::json j = nlohmann::json::parse(js.out);
  REQUIRE(j["ranks"]["ranks"][1]["offset_ms"].get<double>() == Approx(-5.0));
  REQUIRE(j["ranks"]["ranks"][0]["waiting_ms"].get<double>() == Approx(0.028));
  REQUIRE(j["pipeline"]["per_rank"][1]["exposed_communication_ms"].get<double>() == Approx(0.004));
  REQUIRE(j["prediction"]["per_rank"][0]["simulated"]["bubble_ms"].get<double>() == Approx(0.034));
  // One rank alone: its import report, then its executed order (P = 1).
  const robust::Result one = robust::run_ppsim(dir, "import-trace run/r0.json --executed-csv -");
  REQUIRE(one.code == 0);
  REQUIRE(one.out == "0F0,0F1,0B0,0B1\n");
  // Refusals: -o or another --schedule with several traces (2); an empty folder (3); no
  // pipeline ranges with --schedule executed (3). One line each, no output file.
  const robust::Result o = robust::run_ppsim(dir, "import-trace run -o p.yaml");
  REQUIRE(o.code == kExitUsage);
  REQUIRE(o.one_error_line());
  REQUIRE_FALSE(std::filesystem::exists(dir.path("p.yaml")));
  REQUIRE(robust::run_ppsim(dir, "import-trace run --schedule 1f1b").code == kExitUsage);
  // --p2p-runtime: torch simulates the executed order with PyTorch's runtime; another name, or
  // torch without --schedule executed, is one usage line.
  const robust::Result tr = robust::run_ppsim(dir, "import-trace run --schedule executed --p2p-runtime torch");
  REQUIRE(tr.code == 0);
  REQUIRE(tr.out.find("PyTorch's sends and receives, one stream per rank") != std::string::npos);
  REQUIRE(tr.out.find("simulated 0.094 ms (+0.0%)") != std::string::npos);
  const robust::Result bad = robust::run_ppsim(dir, "import-trace run --schedule executed --p2p-runtime tourch");
  REQUIRE(bad.code == kExitUsage);
  REQUIRE(bad.one_error_line());
  REQUIRE(bad.err.find("did you mean 'torch'") != std::string::npos);
  REQUIRE(robust::run_ppsim(dir, "import-trace run --p2p-runtime torch").code == kExitUsage);
  std::filesystem::create_directories(dir.path("empty"));
  const robust::Result e = robust::run_ppsim(dir, "import-trace empty");
  REQUIRE(e.code == kExitInput);
  REQUIRE(e.one_error_line());
  write_plain_rank(dir);
  const robust::Result n = robust::run_ppsim(dir, "import-trace plain.json --schedule executed --executed-csv x.csv");
  REQUIRE(n.code == kExitInput);
  REQUIRE(n.one_error_line());
  REQUIRE_FALSE(std::filesystem::exists(dir.path("x.csv")));
}

TEST_CASE("import-trace CLI: a pipeline run's outputs are written together or not at all", "[trace][ranks][cli]") {
  robust::Scratch dir("trace_ranks_outputs");
  auto b0 = one_f_one_b().first;
  b0.range("layer0.attention.F", 0, 2);  // 0F0's kernel is layer 0's attention too: a profile
  b0.range("layer0.attention.B", 10, 4, 2);  // and 0B0's its backward (a forward alone is no training profile)
  std::filesystem::create_directories(dir.path("run"));
  dir.write("run/r0.json", b0.json());
  // One rank with per-layer work but no pipeline ranges: --schedule executed fails (exit 3)
  // after the profile was made, and the profile is not written.
  write_plain_rank(dir);
  const robust::Result n = robust::run_ppsim(dir, "import-trace plain.json -o p.yaml --schedule executed");
  REQUIRE(n.code == kExitInput);
  REQUIRE(n.one_error_line());
  REQUIRE_FALSE(std::filesystem::exists(dir.path("p.yaml")));
  // One rank's profile and executed order: the order cannot be written (no such folder), exit 4,
  // no profile.
  const robust::Result w = robust::run_ppsim(dir, "import-trace run/r0.json -o p.yaml --executed-csv nodir/o.csv");
  REQUIRE(w.code == kExitIo);
  REQUIRE(w.one_error_line());
  REQUIRE(w.err.find("nodir/o.csv") != std::string::npos);
  REQUIRE(w.out.empty());
  REQUIRE_FALSE(std::filesystem::exists(dir.path("p.yaml")));
  // Both writable: both there, the report naming each after the part it belongs to.
  const robust::Result ok = robust::run_ppsim(dir, "import-trace run/r0.json -o p.yaml --executed-csv o.csv");
  REQUIRE(ok.code == 0);
  REQUIRE(ok.out.find("\nwrote p.yaml\n") != std::string::npos);
  REQUIRE(ok.out.find("\nwrote p.yaml\n") < ok.out.find("\nwrote o.csv\n"));
  REQUIRE(ppsim::test::read_file(dir.path("o.csv")) == "0F0,0F1,0B0,0B1\n");
  REQUIRE(std::filesystem::exists(dir.path("p.yaml")));
}

TEST_CASE("an F&B pair and a split backward: their costs, and the order simulated as measured", "[trace][ranks]") {
  // One rank holding both stages of a V (DualPipeV on one GPU), M = 2, one stream, back to back
  // from 100 us: 0F0 10, 1F0 12, 0F1 10, 1B0 20, (1F1;0B0) 27 (two kernels, 12 + 15), 1B1 20,
  // 0I1 8, 0W1 10: 117 us.
  RankBuilder r;
  double cpu = 0, gpu = 100;
  auto act = [&](const std::string& name, std::vector<double> kernels) {
    r.range(name, cpu, 3);
    for (double k : kernels) {
      r.launched("k", cpu + 1, gpu, k, 7, 2);
      gpu += k;
    }
    cpu += 4;
  };
  act("PP:0F0", {10});
  act("PP:1F0", {12});
  act("PP:0F1", {10});
  act("PP:1B0", {20});
  act("PP:(1F1;0B0)OVERLAP_F_B", {12, 15});
  act("PP:1B1", {20});
  act("PP:0I1", {8});
  act("PP:0W1", {10});
  const PipelineRun p = rebuild_pipeline(merge_ranks({r.read("v.json")}));
  REQUIRE(p.csv == "0F0,1F0,0F1,1B0,(1F1;0B0)OVERLAP_F_B,1B1,0I1,0W1\n");
  REQUIRE(p.schedule.stage_rank == std::vector<int>{0, 0});
  REQUIRE(p.ranks[0].actions[4].compute == 27 * kUs);
  // Slice 0: F 10, its backward only split: B = I + W = 18, W 10. Slice 1: F 12, B 20.
  REQUIRE(p.costs.slice[0].f == 10 * kUs);
  REQUIRE(p.costs.slice[0].b == 18 * kUs);
  REQUIRE(p.costs.slice[0].w == 10 * kUs);
  REQUIRE(p.costs.slice[1].f == 12 * kUs);
  REQUIRE(p.costs.slice[1].b == 20 * kUs);
  // The pair saved 12 + 18 - 27 = 3 us: each slice's F&B is its F + B - 3.
  REQUIRE(p.costs.slice[0].fb == 25 * kUs);
  REQUIRE(p.costs.slice[1].fb == 29 * kUs);
  const ExecutedComparison c = compare_executed(p);
  REQUIRE(c.measured_makespan == 117 * kUs);
  REQUIRE(c.simulated_makespan == 117 * kUs);
  REQUIRE(c.ranks[0].measured_bubble == 0);
}

TEST_CASE("import-trace CLI: several ranks, each rank's host-bound step named", "[trace][ranks][cli]") {
  robust::Scratch dir("trace_ranks_host");
  auto [b0, b1] = two_ranks();
  b0.launched("gemm", 1, 100, 10);
  b0.launched("gemm", 2, 110, 10);  // queued behind the first: no idle time
  b1.launched("gemm", 1, 100, 10);
  b1.launched("gemm", 200, 205, 10);  // launched after the first ended at 110: idle [110, 205) for the host
  dir.write("r0.json", b0.json());
  dir.write("r1.json", b1.json());
  const robust::Result r = robust::run_ppsim(dir, "import-trace r0.json r1.json --format json");
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  // Rank 1: span [100, 215) = 115 us, 95 us of it idle with nothing queued (83%), 20 us without.
  REQUIRE(j["host_bound"].size() == 1);
  CHECK(j["host_bound"]["r1.json"] ==
        "host-bound: the GPU was idle 83% of the step with nothing queued (its next kernel not yet launched); the "
        "kernels alone take 0.020 ms of the 0.115 ms step");
  const robust::Result t = robust::run_ppsim(dir, "import-trace r0.json r1.json");
  CHECK(t.out.find("\nr1.json: host-bound: the GPU was idle 83%") != std::string::npos);
  CHECK(t.out.find("r0.json: host-bound") == std::string::npos);
}
