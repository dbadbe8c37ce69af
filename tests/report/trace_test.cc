// The Chrome trace writer (src/report/trace.cc) and the plain timeline JSON: parsed back with
// nlohmann::json and checked against a 1F1B timeline worked out by hand, and against DualPipe's
// overlapped pairs.
#include <cmath>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "catch.h"
#include "report/svg.h"
#include "report/trace.h"
#include "schedules/registry.h"
#include "sim/costs.h"
#include "sim/engine.h"

using namespace ppsim;
using nlohmann::json;

namespace {

constexpr Time kU = kTicksPerUnit;  // one display unit; the trace shows it as 1000 us

// 1F1B, P=2, M=2, F=1, B=2, W=0, latency 0.5 (times in units):
//   rank 0: 0F0 [0,1]  0F1 [1,2]                              0B0 [5,7]  0B1 [8,10]
//   rank 1:            1F0 [1.5,2.5] 1B0 [2.5,4.5] 1F1 [4.5,5.5] 1B1 [5.5,7.5]
struct Case {
  Schedule s;
  SimResult r;
};

Case one_f_one_b() {
  Case c;
  c.s = make_schedule("1f1b", ScheduleParams{2, 2, 0, 0});
  SliceCosts sc;
  sc.f = 1 * kU;
  sc.b = 2 * kU;
  SimCosts costs = uniform_costs(c.s.stages_per_pipe, sc);
  costs.link.latency = kU / 2;
  c.r = simulate(c.s, costs, SimOptions{true});
  return c;
}

// Trace times are doubles computed from integer ticks; equal to well within a nanosecond.
bool near(double a, double b) { return std::fabs(a - b) < 1e-6; }

std::size_t count_actions(const Schedule& s) {
  std::size_t n = 0;
  for (const auto& rank : s.ranks) n += rank.size();
  return n;
}

std::vector<json> events_with(const json& trace, const std::string& ph) {
  std::vector<json> out;
  for (const auto& e : trace.at("traceEvents"))
    if (e.at("ph") == ph) out.push_back(e);
  return out;
}

}  // namespace

TEST_CASE("trace: parses, one complete event per action on the compute tracks", "[report][trace]") {
  const Case c = one_f_one_b();
  const json t = json::parse(render_trace({{"1f1b", &c.r.timeline}}));
  REQUIRE(t.at("displayTimeUnit") == "ns");
  REQUIRE(t.at("traceEvents").is_array());

  // Single ops only: actions = ops = 2 ranks x 2 micro-batches x (F + B) = 8.
  REQUIRE(count_actions(c.s) == 8);
  REQUIRE(c.s.num_ops() == 8);
  int compute = 0;
  std::set<std::string> names;
  for (const auto& e : events_with(t, "X")) {
    if (e.at("tid") != 0) continue;
    ++compute;
    names.insert(e.at("name").get<std::string>());
    const auto& a = e.at("args");
    REQUIRE(a.contains("stage"));
    REQUIRE(a.contains("microbatch"));
    REQUIRE((a.at("kind") == "F" || a.at("kind") == "B"));
    REQUIRE(a.at("overlapped") == false);
  }
  REQUIRE(compute == 8);
  REQUIRE(names == std::set<std::string>{"0F0", "0F1", "0B0", "0B1", "1F0", "1F1", "1B0", "1B1"});
}

TEST_CASE("trace: timestamps in us, 1 unit = 1000 us, rank 1 starts at F + latency", "[report][trace]") {
  const Case c = one_f_one_b();
  const json t = json::parse(render_trace({{"1f1b", &c.r.timeline}}));
  // Single timeline: pid = rank. Rank 1's first op 1F0 starts when 0F0's output arrives:
  // F + latency = 1 + 0.5 = 1.5 units = 1500 us; it lasts F = 1 unit = 1000 us.
  double first_ts = 1e300;
  json first;
  for (const auto& e : events_with(t, "X"))
    if (e.at("pid") == 1 && e.at("tid") == 0 && e.at("ts").get<double>() < first_ts) {
      first_ts = e.at("ts").get<double>();
      first = e;
    }
  REQUIRE(first.at("name") == "1F0");
  REQUIRE(near(first_ts, 1500.0));
  REQUIRE(near(first.at("dur").get<double>(), 1000.0));
  REQUIRE(first.at("args").at("stage") == 1);
  REQUIRE(first.at("args").at("microbatch") == 0);
}

TEST_CASE("trace: one flow start and end per transfer, ids matching, and a send slice", "[report][trace]") {
  const Case c = one_f_one_b();
  // Transfers: each F of stage 0 and each B of stage 1 crosses the link: 2 + 2 = 4.
  const auto& transfers = c.r.timeline.transfers;
  REQUIRE(transfers.size() == 4);
  const json t = json::parse(render_trace({{"1f1b", &c.r.timeline}}));
  const auto starts = events_with(t, "s"), ends = events_with(t, "f");
  REQUIRE(starts.size() == transfers.size());
  REQUIRE(ends.size() == transfers.size());
  std::map<long long, json> by_id;
  for (const auto& s : starts) {
    REQUIRE(s.at("tid") == 0);
    REQUIRE(by_id.emplace(s.at("id").get<long long>(), s).second);  // ids unique
  }
  std::set<long long> ended;
  for (const auto& f : ends) {
    const long long id = f.at("id").get<long long>();
    REQUIRE(by_id.count(id) == 1);
    REQUIRE(ended.insert(id).second);
    REQUIRE(f.at("bp") == "e");
    REQUIRE(f.at("tid") == 0);
    const json& s = by_id.at(id);
    REQUIRE(s.at("pid") != f.at("pid"));        // across ranks
    REQUIRE(s.at("name") == f.at("name"));      // v1 flows pair by (id, cat, name)
    REQUIRE(s.at("cat") == f.at("cat"));
  }
  // 0F1 [1,2] is sent at 2 and arrives at 2.5, but rank 1 uses it only in 1F1 [4.5,5.5]. The
  // flow events sit inside the slices they bind to, at their middles: 1.5 and 5 units, i.e.
  // 1500 us on rank 0 and 5000 us on rank 1.
  bool found = false;
  for (const auto& f : ends) {
    const json& s = by_id.at(f.at("id").get<long long>());
    if (s.at("pid") == 0 && near(s.at("ts").get<double>(), 1500.0) && s.at("name") == "activations") {
      found = true;
      REQUIRE(f.at("pid") == 1);
      REQUIRE(near(f.at("ts").get<double>(), 5000.0));
    }
  }
  REQUIRE(found);
  // The transfer's own span: a "send" slice on the sender's communication track, 0.5 = 500 us.
  int sends = 0;
  for (const auto& e : events_with(t, "X"))
    if (e.at("name").get<std::string>().rfind("send ", 0) == 0) {
      ++sends;
      REQUIRE(e.at("tid").get<int>() >= 1);
      REQUIRE(near(e.at("dur").get<double>(), 500.0));
    }
  REQUIRE(sends == 4);
}

TEST_CASE("trace: process and thread names, and an activation counter per rank", "[report][trace]") {
  const Case c = one_f_one_b();
  const json t = json::parse(render_trace({{"a", &c.r.timeline}, {"b", &c.r.timeline}}));
  // Two timelines: pid = index * 1000 + rank.
  std::map<int, std::string> process;
  std::map<std::pair<int, int>, std::string> thread;
  for (const auto& e : events_with(t, "M")) {
    if (e.at("name") == "process_name") process[e.at("pid")] = e.at("args").at("name");
    if (e.at("name") == "thread_name") thread[{e.at("pid"), e.at("tid")}] = e.at("args").at("name");
  }
  REQUIRE(process == std::map<int, std::string>{{0, "a rank 0"}, {1, "a rank 1"}, {1000, "b rank 0"}, {1001, "b rank 1"}});
  for (int pid : {0, 1, 1000, 1001}) {
    REQUIRE(thread[{pid, 0}] == "compute");
    REQUIRE(thread[{pid, 1}] == "communication");
  }
  // Every X event sits in a named process; compute events per timeline = 8 actions.
  std::map<int, int> compute_per_block;
  for (const auto& e : events_with(t, "X")) {
    REQUIRE(process.count(e.at("pid").get<int>()) == 1);
    if (e.at("tid") == 0) ++compute_per_block[e.at("pid").get<int>() / 1000];
  }
  REQUIRE(compute_per_block == std::map<int, int>{{0, 8}, {1, 8}});
  // Counters: rank 0 holds 2 activations at its peak (two Fs before its first B), rank 1 one.
  std::map<int, int> peak;
  for (const auto& e : events_with(t, "C")) {
    REQUIRE(e.at("name") == "activations");
    peak[e.at("pid")] = std::max(peak[e.at("pid")], e.at("args").at("activations").get<int>());
  }
  REQUIRE(peak == std::map<int, int>{{0, 2}, {1, 1}, {1000, 2}, {1001, 1}});
}

TEST_CASE("trace: DualPipe's overlapped pairs are one event of kind FB", "[report][trace]") {
  const Schedule s = make_schedule("dualpipe", ScheduleParams{4, 8, 0, 0});
  SliceCosts sc;
  sc.f = 1 * kU;
  sc.b = 2 * kU;
  sc.w = 1 * kU;
  sc.fb = 3 * kU;
  const SimResult r = simulate(s, uniform_costs(s.stages_per_pipe, sc), SimOptions{true});
  std::size_t pairs = 0;
  for (const auto& rank : s.ranks)
    for (const auto& a : rank) pairs += a.overlapped ? 1 : 0;
  REQUIRE(pairs > 0);
  const json t = json::parse(render_trace({{"dualpipe", &r.timeline}}));
  std::size_t compute = 0, fb = 0;
  for (const auto& e : events_with(t, "X")) {
    if (e.at("tid") != 0) continue;
    ++compute;
    if (e.at("args").at("kind") == "FB") {
      ++fb;
      REQUIRE(e.at("args").at("overlapped") == true);
      REQUIRE(e.at("name").get<std::string>().find("OVERLAP_F_B") != std::string::npos);
    }
  }
  REQUIRE(compute == count_actions(s));
  REQUIRE(fb == pairs);
  // No latency: every transfer still has its flow pair.
  REQUIRE(events_with(t, "s").size() == r.timeline.transfers.size());
  REQUIRE(events_with(t, "f").size() == r.timeline.transfers.size());
}

TEST_CASE("trace: every flow event lies strictly inside a compute slice of its rank", "[report][trace]") {
  // Viewers bind a flow event to the slice enclosing it; at a slice's edge the neighbour could
  // win. DualPipe P=4, M=8 with latency 0.25, so that arrivals fall between ops.
  const Schedule s = make_schedule("dualpipe", ScheduleParams{4, 8, 0, 0});
  SliceCosts sc;
  sc.f = 1 * kU;
  sc.b = 2 * kU;
  sc.w = 1 * kU;
  sc.fb = 3 * kU;
  SimCosts costs = uniform_costs(s.stages_per_pipe, sc);
  costs.link.latency = kU / 4;
  const SimResult r = simulate(s, costs, SimOptions{true});
  const json t = json::parse(render_trace({{"dualpipe", &r.timeline}}));
  const auto slices = events_with(t, "X");
  std::size_t flows = 0;
  for (const char* ph : {"s", "f"})
    for (const auto& e : events_with(t, ph)) {
      ++flows;
      const double ts = e.at("ts").get<double>();
      int enclosing = 0;
      for (const auto& x : slices) {
        if (x.at("pid") != e.at("pid") || x.at("tid") != 0) continue;
        const double a = x.at("ts").get<double>(), b = a + x.at("dur").get<double>();
        enclosing += a < ts && ts < b ? 1 : 0;
      }
      INFO(e.dump());
      REQUIRE(enclosing == 1);
    }
  REQUIRE(flows == 2 * r.timeline.transfers.size());
}

TEST_CASE("timeline json: intervals, transfers and activations in display units", "[report][trace]") {
  const Case c = one_f_one_b();
  const json j = json::parse(render_timeline_json(c.r.timeline));
  REQUIRE(j.at("pp") == 2);
  REQUIRE(j.at("time_unit") == "units");
  REQUIRE(near(j.at("start").get<double>(), 0.0));
  REQUIRE(near(j.at("end").get<double>(), 10.0));  // makespan 10, see the table above
  REQUIRE(j.at("intervals").size() == 8);
  bool found = false;
  for (const auto& iv : j.at("intervals"))
    if (iv.at("action") == "1F0") {
      found = true;
      REQUIRE(iv.at("rank") == 1);
      REQUIRE(iv.at("stream") == "compute");
      REQUIRE(iv.at("part") == "whole");
      REQUIRE(near(iv.at("start").get<double>(), 1.5));
      REQUIRE(near(iv.at("end").get<double>(), 2.5));
    }
  REQUIRE(found);
  REQUIRE(j.at("transfers").size() == 4);
  REQUIRE(j.at("transfers")[0].at("producer") == "0F0");
  REQUIRE(near(j.at("transfers")[0].at("end").get<double>(), 1.5));
  REQUIRE(j.at("activations").size() == 2);
  REQUIRE(near(j.at("activations")[0][0].at("t").get<double>(), 0.0));
  REQUIRE(j.at("activations")[0][0].at("activations") == 1);
}

TEST_CASE("trace and SVG: device memory in GB when a config gave bytes", "[report][trace]") {
  const Case c = one_f_one_b();
  // Rank 0 holds 10 GB from the start, 14 GB at t = 1 unit, back to 10 GB at t = 10 units.
  const std::vector<std::vector<MemorySample>> mem{{{0, 10e9}, {kU, 14e9}, {10 * kU, 10e9}}, {{0, 5e9}}};
  const json t = json::parse(render_trace({{"1f1b", &c.r.timeline, &mem}}));
  std::vector<std::pair<double, double>> rank0;  // (ts in us, GB)
  int rank1 = 0;
  for (const auto& e : t["traceEvents"])
    if (e["name"] == "memory GB") {
      if (e["pid"] == 0) rank0.emplace_back(e["ts"].get<double>(), e["args"]["GB"].get<double>());
      if (e["pid"] == 1) ++rank1;
    }
  REQUIRE(rank0.size() == 3);
  CHECK(rank0[1] == std::pair<double, double>{1000.0, 14.0});  // 1 unit = 1000 us
  CHECK(rank0[2] == std::pair<double, double>{10000.0, 10.0});
  CHECK(rank1 == 1);
  const std::string svg = render_svg({{"1f1b", &c.r.timeline, &mem}});
  CHECK(svg.find("device memory per rank (GB, peak 14.0)") != std::string::npos);
  // Without bytes: activations in rank shares; 1F1B at P=2, M=2 holds min(P, M) = 2 on rank 0.
  CHECK(render_svg({{"1f1b", &c.r.timeline}}).find("activation memory per rank (rank shares, peak 2)") !=
        std::string::npos);
}
