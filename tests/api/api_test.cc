// The library's request/result API (src/api/): what compare, simulate, plan and the Python module
// call. Expected figures are worked out here from the schedules' closed forms.
#include <array>

#include "api/gpu_costs.h"
#include "api/options.h"
#include "api/plan.h"
#include "api/request.h"
#include "api/schedule_source.h"
#include "api/times.h"
#include "catch.h"
#include "core/error.h"
#include "schedules/notation.h"
#include "sim/costs.h"
#include "sim/engine.h"
#include "test_util.h"

using namespace ppsim;

namespace {
constexpr Time U = kTicksPerUnit;

using test::error_of;
}  // namespace

TEST_CASE("parse_times: units to ticks, FB defaults to F+B, errors name the flag", "[api]") {
  const UniformTimes t = api::parse_times("F=1,b=2.5,W=0.5", "--times");
  CHECK(t.f == U);
  CHECK(t.b == 5 * U / 2);
  CHECK(t.w == U / 2);
  CHECK(t.fb == t.f + t.b);  // 3.5 units: no pair saving when FB is not given
  CHECK(api::parse_times("F=1,B=2,F&B=2.5", "--times").fb == 5 * U / 2);
  CHECK(error_of([] { api::parse_times("F=1,B=2,W=3", "--chunk-times"); }) ==
        std::pair<int, std::string>{kExitUsage, "--chunk-times: W is part of the full backward B, so W <= B is needed, got W > B"});
  // A pair runs both ops: it cannot take less than the longer one.
  CHECK(error_of([] { api::parse_times("F=1,B=2,FB=1.5", "--times"); }) ==
        std::pair<int, std::string>{kExitUsage,
                                    "--times: an F&B pair runs both ops, so FB >= max(F, B) is needed, got FB < max(F, B)"});
  // The engine's pair of an F with an input-grad I: F + I - saving, where the saving (F + B - FB
  // = 1 here) can exceed what the I leaves: F=1, B=2, W=1.8, FB=2: 1 + 0.2 - 1 = 0.2 < F, so F.
  SliceCosts c;
  c.f = 10;
  c.b = 20;
  c.w = 18;
  c.fb = 20;
  CHECK(pair_duration(c, c, OpKind::I) == 10);
  CHECK(pair_duration(c, c, OpKind::B) == 20);  // 10 + 20 - 10
  CHECK(error_of([] { api::parse_times("F=1,BB=2", "--times"); }).second ==
        "--times: unknown time 'BB' (keys: F, B, W, FB), did you mean 'B'?");
  CHECK(error_of([] { api::units_to_ticks(-1, "--p2p-latency"); }).first == kExitUsage);
}

TEST_CASE("chunk_costs: a rank's share cut into v chunks", "[api]") {
  // F=1, B=2, W=1, FB=3 for the rank; v = 2: each chunk 0.5, 1, 0.5, 1.5.
  const SliceCosts c = api::chunk_costs(api::parse_times("F=1,B=2,W=1,FB=3", "--times"), 2);
  CHECK(c.f == U / 2);
  CHECK(c.b == U);
  CHECK(c.w == U / 2);
  CHECK(c.fb == 3 * U / 2);
}

TEST_CASE("run: 1f1b and gpipe makespans from the closed form; a constraint skips, single throws", "[api]") {
  api::Request req;
  req.schedule.pp = 4;
  req.schedule.microbatches = 8;
  req.families = "1f1b,gpipe,dualpipe";
  req.units.times = api::parse_times("F=1,B=2", "--times");
  const api::Result r = api::run(req);
  // 1F1B and GPipe: makespan (M + P - 1)(F + B) = (8 + 4 - 1) * 3 = 33 units; bubble (P-1)(F+B) = 9.
  REQUIRE(r.rows.size() == 3);
  for (int i : {0, 1}) {
    CHECK(r.rows[static_cast<std::size_t>(i)].metrics.makespan == 33 * U);
    CHECK(r.rows[static_cast<std::size_t>(i)].metrics.bubble_max == 9 * U);
  }
  CHECK(r.skipped.empty());
  CHECK(std::string(r.scale.unit) == "units");
  const nlohmann::json j = api::to_json(r);
  CHECK(j["results"][0]["schedule"] == "1f1b");
  CHECK(j["results"][0]["makespan"].get<double>() == 33.0);

  // DualPipe needs M even and >= 2P: with M = 6, P = 4 it is skipped, not an error...
  req.schedule.microbatches = 6;
  const api::Result r2 = api::run(req);
  REQUIRE(r2.skipped.size() == 1);
  CHECK(r2.skipped[0].schedule == "dualpipe");
  CHECK(r2.rows.size() == 2);
  // ...but asked for alone with single = true it is the request's error (exit 3).
  req.families = "dualpipe";
  req.single = true;
  CHECK(error_of([&] { api::run(req); }).first == kExitInput);
  // A bad time stops the request where it is parsed, at the edge, before any schedule (exit 2),
  // naming the flag; it does not skip them all.
  api::Values v(api::command_spec("compare"));
  v.set("times", std::string("F=1"));
  CHECK(error_of([&] { (void)api::run_request(v); }) ==
        std::pair<int, std::string>{kExitUsage, "--times: F and B are required, got 'F=1'"});
}

TEST_CASE("run: an imported schedule simulates as the family it came from", "[api]") {
  const Schedule gen = make_schedule("zbv", ScheduleParams{4, 8, 2, 4});
  api::Request req;
  req.schedule.schedule = import_csv(schedule_to_csv(gen), "mem", 0, 0);
  req.units.times = api::parse_times("F=1,B=2,W=1", "--times");
  req.timelines = true;
  const api::Result imported = api::run(req);
  api::Request fam;
  fam.schedule.pp = 4;
  fam.schedule.microbatches = 8;
  fam.families = "zbv";
  fam.units.times = api::parse_times("F=1,B=2,W=1", "--times");
  const api::Result generated = api::run(fam);
  REQUIRE(imported.rows.size() == 1);
  REQUIRE(imported.timelines.size() == 1);
  CHECK(imported.rows[0].metrics.makespan == generated.rows[0].metrics.makespan);
  CHECK(imported.rows[0].metrics.bubble == generated.rows[0].metrics.bubble);
  // Every op of the schedule appears once in the timeline (no overlapped pairs in ZB-V).
  CHECK(imported.timelines[0].intervals.size() == gen.num_ops());
}

TEST_CASE("overlap settings from units: layers must split into chunks", "[api]") {
  api::UnitCosts u;
  u.a2a = 0.5;
  u.layers = 3;
  const Schedule s = make_schedule("zbv", ScheduleParams{4, 8, 2, 4});
  CHECK(error_of([&] { api::unit_costs(s, u); }).second == "--layers: 3 layers do not split into 2 chunks per rank");
  u.layers = 4;  // 2 layers per chunk; chunk F = 1/2 unit: attention 1/2 * 1/2 / 2 = 1/8 per layer
  const SimCosts c = api::unit_costs(s, u);
  REQUIRE(c.moe.size() == c.slice.size());
  CHECK(c.moe[0].layers == 2);
  CHECK(c.moe[0].attn_f == U / 8);
  CHECK(c.moe[0].dispatch == U / 2);
  CHECK(c.comm_sm_fraction == 20.0 / 132.0);
}

TEST_CASE("load_schedule: defaults P = 8, M = 20; a family and a file exclude each other", "[api]") {
  api::ScheduleChoice c;
  const Schedule s = api::load_schedule("1f1b", c);
  CHECK(s.pp == 8);
  CHECK(s.microbatches == 20);
  c.schedule_file = "x.csv";
  CHECK(error_of([&] { api::load_schedule("1f1b", c); }).first == kExitUsage);
  c.schedule_file.clear();
  c.pp = 0;  // an explicit 0 reaches the registry's check: not the default
  CHECK(error_of([&] { api::load_schedule("1f1b", c); }).first != 0);
}

TEST_CASE("profiled_costs: an I action at the input grad timed alone, when longer than B - W", "[api]") {
  const ModelConfig cfg = load_config(std::string(PPSIM_SOURCE_DIR) + "/configs/small-2gpu.yaml", {});
  const Schedule s = make_schedule("zb-h1", ScheduleParams{2, 4, 0, 0});
  // B 1.0 ms, W 0.4: B - W = 0.6 ms; the input grad alone 0.65 ms: an I action 0.65, B and W unchanged.
  const SimCosts c = api::profiled_costs(cfg, s, api::ProfiledOps{0.3, 1.0, 0.4, 0, 0.65});
  CHECK(c.slice[0].i_apart == 50'000);
  CHECK(op_duration(c.slice[0], OpKind::I) == 650'000);
  CHECK(op_duration(c.slice[0], OpKind::B) == 1'000'000);
  CHECK(op_duration(c.slice[0], OpKind::W) == 400'000);
  // A pair with an I pays it too: F 0.3 + I 0.65, nothing saved without an F&B figure.
  CHECK(pair_duration(c.slice[0], c.slice[1], OpKind::I) == 950'000);
  // Timed alone shorter than B - W, or not timed: B - W stands.
  CHECK(api::profiled_costs(cfg, s, api::ProfiledOps{0.3, 1.0, 0.4, 0, 0.55}).slice[0].i_apart == 0);
  CHECK(op_duration(api::profiled_costs(cfg, s, api::ProfiledOps{0.3, 1.0, 0.4, 0}).slice[0], OpKind::I) == 600'000);
}

TEST_CASE("validate's prediction costs from measured figures", "[api]") {
  SimCosts c = uniform_costs(4, SliceCosts{}, TimeScale::millis());
  // Four ranks on two GPUs: rank r on GPU r % 2; a step below 1 is clamped (never faster beside another).
  api::share_devices(c, 4, 2, 0.9, nullptr);
  CHECK(c.rank_device == std::vector<int>{0, 1, 0, 1});
  CHECK(c.share_slowdown == 1.0);
  CHECK(c.share_copies == 1);
  // EP 2 (PP 2): on one GPU each rank's other shard is beside it; on two, shard 1 is on the other
  // GPU ((r ep + 1) % 2 = 1) and shard 0's ranks share GPU 0; on four, every shard has its own.
  SimCosts e = uniform_costs(2, SliceCosts{}, TimeScale::millis());
  api::share_devices(e, 2, 1, 1.2, nullptr, 2);
  CHECK(e.rank_device == std::vector<int>{0, 0});
  CHECK(e.share_copies == 2);
  // Costs profiled with the copy beside: every rank's F, I, W at 1 / 1.2 (alone); none without copies.
  api::unshare_profiled_copies(e, 2);
  REQUIRE(e.rank_kind_scale.size() == 6u);
  for (double x : e.rank_kind_scale) CHECK(x == Approx(1 / 1.2));
  api::share_devices(e, 2, 2, 1.2, nullptr, 2);
  CHECK(e.rank_device == std::vector<int>{0, 0});
  CHECK(e.share_copies == 1);
  api::share_devices(e, 2, 4, 1.2, nullptr, 2);
  CHECK(e.rank_device == std::vector<int>{0, 2});
  CHECK(e.share_copies == 1);
  e.rank_kind_scale.clear();
  api::unshare_profiled_copies(e, 2);
  CHECK(e.rank_kind_scale.empty());
  // Partition 1 runs F 10% slower and I, W as partition 0: ranks 2, 3 (r / 2 = 1) scale F by 1.1.
  api::scale_rank_speeds(c, 4, 2, {std::array<double, 3>{1.0, 2.0, 1.0}, std::array<double, 3>{1.1, 2.0, 1.0}});
  CHECK(c.rank_kind_scale[0] == 1.0);
  CHECK(c.rank_kind_scale[3 * 2 + 0] == Approx(1.1));
  CHECK(c.rank_kind_scale[3 * 3 + 1] == 1.0);
  // Probe: 30 us measured for 1e6 bytes over 100 bytes/ns (10 us on the wire): latency 20 us.
  c.link.bytes_per_tick = 100;
  api::apply_link_probe(c, 30.0, 1'000'000);
  CHECK(c.link.latency == 20'000);
  api::apply_link_probe(c, 5.0, 1'000'000);  // faster than the wire: latency 0, not negative
  CHECK(c.link.latency == 0);
  CHECK(api::middle_run({1400.0, 20.0, 22.0}) == 22.0);
  CHECK(api::middle_run({3.0, 1.0, 4.0, 2.0}) == 2.0);  // an even count: the lower middle
  {
    // The replay's own delays, from a hand-made measured timeline (us): rank 0 runs 0F0 [0,100],
    // 0F1 [106,206], 0B0 [400,500]; rank 1 runs 1F0 [130,230], 1B0 [237,337]. 0F0's message is
    // copied 108..120, 1B0's 345..390. Sends: 8 and 8 after their producers' ends; receives: 1F0
    // (a first action) and 0B0 (its rank idle since 206) start 10 after their arrivals; gaps: 0F1
    // 6 after 0F0 (it receives nothing), 1B0 7 after 1F0; 0B0 waited for its message, no gap.
    auto us = [](double v) { return static_cast<Time>(v * 1e3); };
    auto at = [&](int rank, OpKind k, int stage, int mb, double a, double b) {
      Interval iv;
      iv.rank = rank;
      iv.start = us(a);
      iv.end = us(b);
      iv.action = Action::single(Op{k, stage, mb});
      return iv;
    };
    Timeline t;
    t.pp = 2;
    t.intervals = {at(0, OpKind::F, 0, 0, 0, 100), at(0, OpKind::F, 0, 1, 106, 206), at(0, OpKind::B, 0, 0, 400, 500),
                   at(1, OpKind::F, 1, 0, 130, 230), at(1, OpKind::B, 1, 0, 237, 337)};
    t.transfers = {Transfer{0, 1, us(108), us(120), Op{OpKind::F, 0, 0}, 1'000'000},
                   Transfer{1, 0, us(345), us(390), Op{OpKind::B, 1, 0}, 1'000'000}};
    const api::ReplayDelays d = api::replay_delays(make_schedule("1f1b", ScheduleParams{2, 2, 0, 0}), t);
    CHECK(d.sends == 2);
    CHECK(d.send_us == Approx(8));
    CHECK(d.receives == 2);
    CHECK(d.receive_us == Approx(10));
    CHECK(d.gaps == 2);
    CHECK(d.gap_us == Approx(7));  // the upper median of {6, 7}
    // 12 us of copy for 1e6 bytes over 100 bytes/ns (10 on the wire), with both delays: latency
    // 12 + 8 + 10 - 10 = 20 us; the gap between actions 7 us.
    api::apply_link_probe(c, 12.0, 1'000'000, d);
    CHECK(c.link.latency == 20'000);
    CHECK(c.action_gap == 7'000);
    api::apply_link_probe(c, 12.0, 1'000'000);  // without them: the copy alone, no gap
    CHECK(c.link.latency == 2'000);
    CHECK(c.action_gap == 0);
  }
  // Profiled sub-ops (summed over a 2-layer chunk) become each slice's per-layer overlap costs.
  api::profiled_overlap_costs(c, {{"attn_fwd", 2.0}, {"dispatch_fwd", 0.5}, {"mlp_w", 3.0}}, 2, 20.0 / 32);
  REQUIRE(c.moe.size() == c.slice.size());
  CHECK(c.moe[3].layers == 2);
  CHECK(c.moe[3].attn_f == 1'000'000);  // ns per layer
  CHECK(c.moe[3].dispatch == 250'000);
  CHECK(c.moe[3].mlp_w == 1'500'000);
  CHECK(c.moe[3].combine == 0);
  CHECK(c.comm_sm_fraction == 0.625);
  CHECK_THROWS_AS(api::profiled_overlap_costs(c, {{"attn_forward", 1.0}}, 2, 0.1), InputError);
}

TEST_CASE("validate's EP prediction: the probe's GPU and the EP group's pace", "[api]") {
  // Shard 0's rank r is on GPU (r ep) % gpus: PP 2 x EP 2 on two GPUs puts both stages on GPU 0
  // (0 and 2 % 2), so its messages stay within that GPU; on four GPUs rank 1 is on GPU 2.
  CHECK(api::pipeline_on_one_gpu(2, 2, 2));
  CHECK(api::pipeline_on_one_gpu(4, 2, 2));  // 0, 2, 4, 6 % 2 = 0
  CHECK(api::pipeline_on_one_gpu(2, 4, 2));  // 0, 4 % 2
  CHECK_FALSE(api::pipeline_on_one_gpu(2, 2, 4));
  CHECK_FALSE(api::pipeline_on_one_gpu(4, 2, 4));  // GPUs 0, 2, 0, 2
  CHECK_FALSE(api::pipeline_on_one_gpu(2, 1, 2));  // no EP: ranks 0 and 1 on GPUs 0 and 1
  CHECK_FALSE(api::pipeline_on_one_gpu(2, 2, 1));  // one GPU: not the case the probe changes for
  // The pace: a fed step of 2.2 ms over held F + I + W = 0.5 + 1.0 + 0.5 = 2.0 ms is 1.1x; a fed
  // step faster than the held ops (noise) and a missing figure give 1.
  CHECK(api::ep_pace_factor(2.2, 0.5, 1.0, 0.5) == Approx(1.1));
  CHECK(api::ep_pace_factor(1.9, 0.5, 1.0, 0.5) == 1.0);
  CHECK(api::ep_pace_factor(0.0, 0.5, 1.0, 0.5) == 1.0);
  CHECK(api::ep_pace_factor(2.2, 0.5, 0.0, 0.5) == 1.0);
  // Every rank's ops at that pace: 1F1B, P = 2, M = 4, F = 1, B = 2 units, no communication:
  // makespan (M + P - 1)(F + B) = 15 units, 16.5 at 1.1x; on top of a partition's speed (rank 1's F
  // 1.2x, set first) the scales multiply.
  SimCosts c = uniform_costs(2, SliceCosts{1 * U, 2 * U, 1 * U});
  const Schedule s = make_schedule("1f1b", ScheduleParams{2, 4, 0, 0});
  CHECK(simulate(s, c).makespan() == 15 * U);
  api::scale_every_rank(c, 2, 1.1);
  REQUIRE(c.rank_kind_scale.size() == 6u);
  CHECK(static_cast<double>(simulate(s, c).makespan()) == Approx(16.5 * U).epsilon(1e-9));
  c.rank_kind_scale = {1.0, 1.0, 1.0, 1.2, 1.0, 1.0};
  api::scale_every_rank(c, 2, 1.1);
  CHECK(c.rank_kind_scale[3] == Approx(1.32));
  CHECK(c.rank_kind_scale[0] == Approx(1.1));
  CHECK_THROWS(api::scale_every_rank(c, 2, 0.0));
}

TEST_CASE("plan requests: shard syntax and exclusive sources", "[api]") {
  int i = 0, n = 0;
  api::parse_shard("3/16", i, n);
  CHECK(i == 3);
  CHECK(n == 16);
  CHECK(error_of([&] { api::parse_shard("2/2", i, n); }).first == kExitUsage);
  api::PlanRequest req;
  req.config = "a.yaml";
  req.merge = {"s.json"};
  CHECK(error_of([&] { api::plan(req); }).second == "give a config or --merge shard files, not both");
  api::PlanRequest none;
  CHECK(error_of([&] { api::plan(none); }).second == "plan needs a config file (or --merge shard files)");
}

TEST_CASE("replay_memory: the parts a replay holds, without embedding, head and optimizer", "[api]") {
  const std::string cfg = std::string(PPSIM_SOURCE_DIR) + "/configs/small-1gpu.yaml";
  const Schedule s = make_schedule("1f1b", ScheduleParams{2, 8, 0, 0});
  const auto replay = api::replay_memory(cfg, {}, s, nullptr);
  const auto full = predicted_memory(load_config(cfg, {}), s, nullptr);
  REQUIRE(replay.size() == 2);
  REQUIRE(full.size() == 2);
  for (std::size_t r = 0; r < 2; ++r) {
    const MemoryBreakdown& m = replay[r].parts;
    INFO("rank " << r);
    // The total is exactly the five parts; no optimizer or EMA in it.
    CHECK(replay[r].total == m.weights + m.gradients + m.activations + m.comm_buffers + m.workspace);
    CHECK(replay[r].total < full[r].total);
    // Rank 0 holds the embedding, rank 1 the head, in the full model: both weigh less here.
    CHECK(m.weights < full[r].weights);
    // Activations: the same micro-batches held (1F1B rank r of P=2 holds P - r = 2 - r at its peak).
    CHECK(m.chunks == 2 - static_cast<int>(r));
  }
}
