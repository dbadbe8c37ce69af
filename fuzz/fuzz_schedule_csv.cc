// libFuzzer target: bytes -> the PyTorch CSV importer (import_csv, P and M inferred). When a file
// imports, it is a validated schedule, so three more things must hold, and the harness aborts
// (a crash for libFuzzer) when one does not:
//   1. it simulates with unit costs without a deadlock (the validator rejects dependency cycles),
//      and its metrics and pictures render;
//   2. schedule_to_csv exports it, and the export imports again (layout inferred again);
//   3. the re-import is the same schedule, and exports to the same text (a fixed point).
// InputError from the first import is the expected outcome for most inputs.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "report/svg.h"
#include "report/trace.h"
#include "schedules/notation.h"
#include "schedules/registry.h"
#include "sim/engine.h"
#include "sim/metrics.h"

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_schedule_csv: %s: %s\n", what, detail.c_str());
  std::abort();
}

bool same(const ppsim::Schedule& a, const ppsim::Schedule& b) {
  return a.pp == b.pp && a.microbatches == b.microbatches && a.num_pipes == b.num_pipes &&
         a.stages_per_pipe == b.stages_per_pipe && a.chunks_per_rank == b.chunks_per_rank &&
         a.parameter_copies == b.parameter_copies && a.stage_rank == b.stage_rank && a.slice == b.slice &&
         a.ranks == b.ranks;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ppsim;
  const std::string text(reinterpret_cast<const char*>(data), size);
  limits() = Limits{};
  Schedule s;
  try {
    s = import_csv(text, "fuzz.csv", 0, 0);
  } catch (const InputError&) {
    return 0;
  }

  // 1. Unit costs: F = 1, B = 2, W = 1, pair 2.5 units, a small latency so links matter.
  SliceCosts c;
  c.f = kTicksPerUnit;
  c.b = 2 * kTicksPerUnit;
  c.w = kTicksPerUnit;
  c.fb = 5 * kTicksPerUnit / 2;
  SimCosts costs = uniform_costs(s.stages_per_pipe, c);
  costs.link.latency = kTicksPerUnit / 4;
  SimOptions opt;
  opt.record_timeline = s.num_ops() <= 4096;
  SimResult r;
  try {
    r = simulate(s, costs, opt);
  } catch (const InputError& e) {
    fail("a validated schedule did not simulate", e.one_line());
  }
  const ScheduleParams params{s.pp, s.microbatches, s.chunks_per_rank, s.pp};
  (void)compute_metrics(s, r, costs, nullptr, params);
  if (opt.record_timeline) {
    const std::vector<NamedTimeline> named{{"file", &r.timeline}};
    (void)render_trace(named);
    (void)render_svg(named);
  }

  // 2. and 3. Export, re-import, compare.
  const std::string csv = schedule_to_csv(s);
  Schedule back;
  try {
    back = import_csv(csv, "export.csv", 0, 0);
  } catch (const InputError& e) {
    fail("the export of an imported schedule does not import", e.one_line() + "\n--- export:\n" + csv);
  }
  if (!same(s, back)) fail("the re-imported schedule differs", "--- export:\n" + csv);
  if (schedule_to_csv(back) != csv) fail("export is not a fixed point", "--- export:\n" + csv);
  return 0;
}
