// `ppsim import-trace`: a PyTorch profiler (Kineto) trace in, a cost profile and a report out.
// A thin client: the reading, attribution and prediction are src/trace/ (docs/TRACES.md).
#include <fmt/format.h>

#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "report/html.h"
#include "trace/import.h"
#include "trace/predict.h"

namespace ppsim::cli {

namespace {
struct ImportArgs {
  std::string trace;
  std::string output;
  std::vector<std::string> map;
  bool no_default_rules = false;
  std::string step_range;
  std::string format = "table";
  std::string html;
  trace::PredictRequest predict;
};
}  // namespace

Runner setup_import_trace(CLI::App& sub) {
  auto a = std::make_shared<ImportArgs>();
  sub.add_option("trace", a->trace, "the trace: Chrome trace JSON from torch.profiler (.json or .json.gz)")->required();
  sub.add_option("--output,-o", a->output, "write the cost profile (YAML, version 2) here");
  sub.add_option("--map", a->map,
                 "a mapping rule REGEX=SUBOP:PASS (sub-ops: attention, mlp, dispatch, combine, other; passes: F, I "
                 "or B, W), tried before the defaults (repeatable)");
  sub.add_flag("--no-default-rules", a->no_default_rules, "use only the --map rules");
  sub.add_option("--step-range", a->step_range,
                 "the step to report and predict: GPU work launched under CPU ranges matching this regex (default: "
                 "all of the trace)");
  sub.add_option("--schedule,-s", a->predict.schedule,
                 "the schedule the trace ran (pair, or a family): print the traced step against the prediction");
  sub.add_option("--pp,-p", a->predict.pp, "with --schedule: pipeline ranks P")->capture_default_str();
  sub.add_option("--microbatches,-m", a->predict.microbatches, "with --schedule: micro-batches M")
      ->capture_default_str();
  sub.add_option("--vpp", a->predict.vpp, "with --schedule: chunks per rank (interleaved-1f1b)");
  sub.add_option("--devices", a->predict.devices, "with --schedule: GPUs the step ran on (ranks share them)")
      ->capture_default_str();
  sub.add_option("--layers-per-chunk", a->predict.layers_per_chunk,
                 "with --schedule: layers in one chunk (default: the trace's layers / stages; pair: all)");
  sub.add_option("--format", a->format, "the report: table or json")->capture_default_str();
  sub.add_option("--html", a->html, "write a self-contained HTML report: per-layer cells and streams as tables");
  sub.add_option("--comm-sms", a->predict.comm_sms, "linear rule fallback: SMs held by communication")
      ->capture_default_str();
  sub.add_option("--sms", a->predict.sms, "linear rule fallback: SMs per GPU")->capture_default_str();
  return [a]() {
    const Format f = parse_format(a->format, {"table", "json"});
    const trace::ImportResult r = trace::import_trace_file(a->trace, {a->map, a->no_default_rules, a->step_range});
    std::string report;
    nlohmann::json j;
    if (f == Format::Json || !a->html.empty()) j = trace::import_json(r);
    if (f != Format::Json) report = trace::render_import_report(r);
    if (!a->predict.schedule.empty()) {
      const trace::Prediction p = trace::predict_traced(r, a->predict);
      if (f == Format::Json || !a->html.empty()) j["prediction"] = trace::prediction_json(p);
      if (f != Format::Json) report += trace::render_prediction(p);
    }
    if (!a->output.empty()) {
      if (!r.profile.sub_ops)
        throw InputError(SourceLoc{a->trace, 0, 0},
                         "no work in a numbered layer was found, so there is no per-layer profile to write",
                         "name ranges like 'layer3.attention.F' or give --map rules (docs/TRACES.md)");
      write_output(a->output, trace::render_import_profile(r));
      if (a->output != "-" && f != Format::Json) report += fmt::format("\nwrote {}\n", a->output);
      if (f == Format::Json) j["profile_path"] = a->output;
    }
    if (f == Format::Json) report = j.dump(2) + "\n";
    if (!a->html.empty()) write_output(a->html, render_html(json_tables_html("import-trace", "ppsim import-trace " + a->trace, j)));
    if (a->output == "-")
      std::fputs(report.c_str(), stderr);
    else
      write_output("-", report);
    return 0;
  };
}

}  // namespace ppsim::cli
