// `ppsim compare` and `ppsim simulate`: simulate schedules on the same model and print makespan,
// bubbles per rank, the published formula beside the truth, memory and throughput.
//
// --times are one rank's share of the model (1/P of the layers); a schedule that cuts that share
// into v chunks (interleaved: v = vpp; ZB-V, DualPipeV: v = 2) gives each chunk 1/v of the times,
// so every schedule in one table runs the same model. --chunk-times sets per-chunk costs directly.
// The options are the tables of src/api/options.cc; the request is api::run_request's.
#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/compare_run.h"
#include "core/error.h"
#include "report/chart.h"
#include "report/results.h"

namespace ppsim::cli {

namespace {

// The report, then (table format, stdout free) each rank's peak memory; the exit code: kExitInput
// when every schedule asked for was skipped (nothing ran).
int finish(const api::Values& v, const RunOutput& out, Format f) {
  const bool stdout_free = emit_results(out, f, v.text("output"));
  if (stdout_free && v.flag("memory") && f == Format::Table)
    write_output("-", render_memory_table(out.rows, out.scale));
  return out.rows.empty() && !out.skipped.empty() ? kExitInput : 0;
}

// `simulate dualpipe`, as `show dualpipe`: the family may come first; a YAML config (an existing
// file, or a name ending in .yaml/.yml) may follow, or stand alone as compare's.
void place_positionals(api::Values& v) {
  for (const std::string& p : v.texts("family_or_config")) {
    const bool is_config = std::filesystem::exists(p) || p.ends_with(".yaml") || p.ends_with(".yml");
    const std::string key = is_config ? "config" : "schedule";
    const std::string slot = v.text(key);
    if (!slot.empty())
      throw InputError(
          is_config ? fmt::format("simulate takes one config, got '{}' and '{}'", slot, p)
                    : fmt::format("simulate takes one family, got '{}' and '{}' (compare takes several)", slot, p),
          {}, kExitUsage);
    v.set(key, p);
  }
}

}  // namespace

Runner setup_compare(CLI::App& sub) {
  auto v = bind_options(sub, "compare");
  return [v]() {
    const Format f = parse_format(v->text("format"), {"table", "json", "csv"});
    const api::Request req = api::run_request(*v);
    print_notes(*v);
    return finish(*v, run_schedules(*v, req, v->flag("memory")), f);  // --memory dates each rank's peak
  };
}

Runner setup_simulate(CLI::App& sub) {
  auto v = bind_options(sub, "simulate");
  return [v]() {
    const Format f = parse_format(v->text("format"), {"table", "json", "csv"});
    place_positionals(*v);
    if (v->text("schedule").empty() && v->text("schedule_file").empty())
      throw InputError("simulate needs --schedule FAMILY or --schedule-file FILE", {}, kExitUsage);
    const api::Request req = api::run_request(*v);
    print_notes(*v);
    const bool chart = v->flag("chart");
    const RunOutput out = run_schedules(*v, req, chart || v->flag("memory"));
    const int code = finish(*v, out, f);
    if (chart && f == Format::Table && !out.timelines.empty() && !stdout_taken(out.side_files))
      write_output("-",
                   "\n" + render_step_chart(out.timelines.front(), use_color(v->text("color"), v->text("output"))));
    return code;
  };
}

}  // namespace ppsim::cli
