// `ppsim compare` and `ppsim simulate`: simulate schedules on the same model and print makespan,
// bubbles per rank, the published formula beside the truth, memory and throughput.
//
// --times are one rank's share of the model (1/P of the layers); a schedule that cuts that share
// into v chunks (interleaved: v = vpp; ZB-V, DualPipeV: v = 2) gives each chunk 1/v of the times,
// so every schedule in one table runs the same model. --chunk-times sets per-chunk costs directly.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "core/error.h"
#include "cli/megatron_flag.h"
#include "cli/common.h"
#include "cli/compare_run.h"
#include "report/chart.h"
#include "report/results.h"
#include "schedules/registry.h"

namespace ppsim::cli {

namespace {

struct CompareArgs {
  ScheduleOptions so;
  std::string times = "F=1,B=2,W=1,FB=3";
  std::string chunk_times;
  double p2p_latency = 0;
  api::UnitCosts overlap;  // its --a2a ... --sms (the times and latency are the fields above)
  bool blocking = false;
  std::string schedules = "all";
  std::string format = "table";
  std::string output = "-";
  std::string config;
  std::vector<std::string> sets;
  std::string calibration;
  std::string megatron_args;
  std::string trace;
  std::string svg;
  std::string timeline;
  std::string html;
  std::string color = "auto";
  bool memory = false;
};

void add_common(CLI::App& sub, CompareArgs& a, bool config_positional = true) {
  add_schedule_options(sub, a.so);
  if (config_positional) sub.add_option("config", a.config, "YAML config (model, hardware, parallel); optional");
  sub.add_option("--set", a.sets, "override a config key: key.path=value (repeatable)");
  add_calibration_option(sub, a.calibration);
  sub.add_option("--megatron-args", a.megatron_args, "model, parallelism and batch from a Megatron-LM argument list (with a config)");
  sub.add_option("--times", a.times, "one rank's share: F=..,B=..(full backward),W=..,FB=..(pair); FB defaults to F+B")
      ->capture_default_str();
  sub.add_option("--chunk-times", a.chunk_times, "per-chunk times instead of --times (same keys)");
  sub.add_option("--p2p-latency", a.p2p_latency, "latency of each stage-to-stage transfer, in the time unit");
  add_overlap_options(sub, a.overlap);
  sub.add_option("--format", a.format, "table, json or csv")->capture_default_str();
  sub.add_option("--output,-o", a.output, "write the results to this file");
  sub.add_option("--trace", a.trace, "write a Chrome/Perfetto trace (JSON) of the timeline(s)");
  sub.add_option("--svg", a.svg, "write an SVG timeline");
  sub.add_option("--html", a.html, "write a self-contained interactive HTML report (timelines, table, in-page engine)");
  sub.add_option("--color", a.color, "terminal colours: auto, always, never")->capture_default_str();
  sub.add_flag("--memory", a.memory, "with a config: print each rank's peak memory by part, and the op at the peak");
}

RunRequest to_request(const CompareArgs& a) {
  RunRequest req;
  req.so = a.so;
  req.times = a.times;
  req.chunk_times = a.chunk_times;
  req.p2p_latency = a.p2p_latency;
  req.a2a = a.overlap.a2a;
  req.attn_share = a.overlap.attn_share;
  req.layers = a.overlap.layers;
  req.comm_sms = a.overlap.comm_sms;
  req.sms = a.overlap.sms;
  req.config = a.config;
  req.sets = a.sets;
  add_calibration_set(a.calibration, req.sets);
  add_megatron_set(a.megatron_args, req.sets);
  req.trace = a.trace;
  req.svg = a.svg;
  req.timeline_path = a.timeline;
  req.html = a.html;
  return req;
}

}  // namespace

Runner setup_compare(CLI::App& sub) {
  auto a = std::make_shared<CompareArgs>();
  add_common(sub, *a);
  sub.add_option("--schedules,-s", a->schedules, "all, or a comma-separated list of families")->capture_default_str();
  return [a]() {
    const Format f = parse_format(a->format, {"table", "json", "csv"});
    RunRequest req = to_request(*a);
    req.schedules = a->schedules;
    req.keep_timeline = a->memory;  // dates each rank's peak
    const RunOutput out = run_schedules(req);
    emit_results(out, f, a->output);
    if (a->memory && f == Format::Table) write_output("-", render_memory_table(out.rows, out.scale));
    return 0;
  };
}

Runner setup_simulate(CLI::App& sub) {
  auto a = std::make_shared<CompareArgs>();
  auto family = std::make_shared<std::string>();
  auto positional = std::make_shared<std::vector<std::string>>();
  sub.add_option("--schedule,-s", *family, "schedule family")->capture_default_str();
  // `simulate dualpipe`, as `show dualpipe`: the family may come first; a YAML config (an existing
  // file, or a name ending in .yaml/.yml) may follow, or stand alone as compare's.
  sub.add_option("family_or_config", *positional, "[FAMILY] [CONFIG]: a schedule family and/or a YAML config")
      ->expected(0, 2);
  add_common(sub, *a, false);
  sub.add_option("--timeline", a->timeline, "write the simulated timeline (intervals per rank) as JSON");
  auto chart = std::make_shared<bool>(false);
  sub.add_flag("--chart", *chart, "print a time-step chart of the timeline after the table");
  return [a, family, chart, positional]() {
    const Format f = parse_format(a->format, {"table", "json", "csv"});
    for (const std::string& p : *positional) {
      const bool is_config = std::filesystem::exists(p) || p.ends_with(".yaml") || p.ends_with(".yml");
      std::string& slot = is_config ? a->config : *family;
      if (!slot.empty())
        throw InputError(is_config ? fmt::format("simulate takes one config, got '{}' and '{}'", slot, p)
                                   : fmt::format("simulate takes one family, got '{}' and '{}' (compare takes several)",
                                                 slot, p),
                         {}, kExitUsage);
      slot = p;
    }
    RunRequest req = to_request(*a);
    if (family->empty() && a->so.schedule_file.empty())
      throw InputError("simulate needs --schedule FAMILY or --schedule-file FILE", {}, kExitUsage);
    req.schedules = family->empty() ? std::string{} : *family;
    req.single = true;
    req.kind = "simulate";
    req.keep_timeline = *chart || !a->timeline.empty() || a->memory;
    const RunOutput out = run_schedules(req);
    emit_results(out, f, a->output);
    if (a->memory && f == Format::Table) write_output("-", render_memory_table(out.rows, out.scale));
    if (*chart && f == Format::Table && !out.timelines.empty())
      write_output("-", "\n" + render_step_chart(out.timelines.front(), use_color(a->color, a->output)));
    return 0;
  };
}

}  // namespace ppsim::cli
