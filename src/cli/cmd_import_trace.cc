// `ppsim import-trace`: a PyTorch profiler (Kineto) trace in, a cost profile and a report out.
// A thin client: the reading, attribution and prediction are src/trace/ (docs/TRACES.md).
#include <fmt/format.h>

#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "report/html.h"
#include "trace/import.h"
#include "trace/pipeline_run.h"
#include "trace/predict.h"
#include "trace/ranks.h"

namespace ppsim::cli {

namespace {
struct ImportArgs {
  std::vector<std::string> traces;
  std::string executed_csv;
  std::string output;
  std::vector<std::string> map;
  bool no_default_rules = false;
  std::string step_range;
  std::string layer_order = "auto";
  std::string comm_kernel;
  std::string format = "table";
  std::string html;
  trace::PredictRequest predict;
};
}  // namespace

// Several ranks' traces, or a pipeline run (--schedule executed, --executed-csv): the ranks
// merged and aligned (trace/ranks.h), the executed order and its simulation (trace/pipeline_run.h).
static int run_ranks(const ImportArgs& a, const trace::ImportOptions& io, const std::vector<std::string>& paths,
                     Format f) {
  const bool executed = a.predict.schedule == "executed";
  if (paths.size() > 1 && !a.predict.schedule.empty() && !executed)
    throw InputError(fmt::format("--schedule {}: with several traces only 'executed' (the order the ranks ran)",
                                 a.predict.schedule),
                     "--schedule executed", kExitUsage);
  if (paths.size() > 1 && !a.output.empty())
    throw InputError("--output: a cost profile comes from one rank's trace; import that trace alone", {}, kExitUsage);
  std::string report;
  nlohmann::json j;
  std::vector<trace::RankTrace> ranks(paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) {
    ranks[i].path = paths[i];
    ranks[i].trace = trace::read_kineto(paths[i]);
  }
  if (paths.size() == 1) {  // one rank: its own import report first, as without these flags
    const trace::ImportResult r =
        trace::import_trace(ranks[0].trace, io, paths[0]);
    if (f == Format::Json)
      j = trace::import_json(r);
    else
      report = trace::render_import_report(r);
    if (!a.output.empty()) {
      if (!r.profile.sub_ops)
        throw InputError(SourceLoc{paths[0], 0, 0},
                         "no work in a numbered layer was found, so there is no per-layer profile to write",
                         "name ranges like 'layer3.attention.F' or give --map rules (docs/TRACES.md)");
      write_output(a.output, trace::render_import_profile(r));
      if (a.output != "-" && f != Format::Json) report += fmt::format("\nwrote {}\n", a.output);
      if (f == Format::Json) j["profile_path"] = a.output;
    }
  }
  const trace::MultiRank m = trace::merge_ranks(std::move(ranks), io.comm_kernel);
  if (paths.size() > 1) {
    if (f == Format::Json)
      j["ranks"] = trace::ranks_json(m);
    else
      report += trace::render_ranks_report(m);
  }
  std::optional<trace::PipelineRun> run;
  if (executed || !a.executed_csv.empty()) {
    run = trace::rebuild_pipeline(m);  // refuses traces without pipeline ranges
  } else {
    try {
      run = trace::rebuild_pipeline(m);
    } catch (const InputError&) {
      if (f != Format::Json) report += "\nno pipeline action ranges (PP:{action}, Forward i / Backward i, Megatron's forward-compute): no executed order\n";
    }
  }
  if (run) {
    if (f == Format::Json)
      j["pipeline"] = trace::pipeline_run_json(*run);
    else
      report += trace::render_pipeline_run(*run);
    if (executed) {
      const trace::ExecutedComparison c = trace::compare_executed(*run);
      if (f == Format::Json)
        j["prediction"] = trace::executed_comparison_json(c);
      else
        report += trace::render_executed_comparison(c);
    }
    if (!a.executed_csv.empty()) {
      write_output(a.executed_csv, run->csv);
      if (a.executed_csv != "-" && f != Format::Json) report += fmt::format("\nwrote {}\n", a.executed_csv);
      if (f == Format::Json) j["executed_csv_path"] = a.executed_csv;
    }
  }
  if (f == Format::Json) report = j.dump(2) + "\n";
  if (a.output == "-" || a.executed_csv == "-")
    std::fputs(report.c_str(), stderr);
  else
    write_output("-", report);
  return 0;
}

Runner setup_import_trace(CLI::App& sub) {
  auto a = std::make_shared<ImportArgs>();
  sub.add_option("trace", a->traces,
                 "the trace: Chrome trace JSON from torch.profiler (.json or .json.gz); several (or a folder): one "
                 "per rank of one run")
      ->required();
  sub.add_option("--output,-o", a->output, "write the cost profile (YAML, version 2) here");
  sub.add_option("--map", a->map,
                 "a mapping rule REGEX=SUBOP:PASS (sub-ops: attention, mlp, dispatch, combine, other; passes: F, I "
                 "or B, W), tried before the defaults (repeatable)");
  sub.add_flag("--no-default-rules", a->no_default_rules, "use only the --map rules");
  sub.add_option("--step-range", a->step_range,
                 "the step to report and predict: GPU work launched under CPU ranges matching this regex (default: "
                 "all of the trace)");
  sub.add_option("--layer-order", a->layer_order,
                 "number layers by the order of sub-op ranges (the k-th 'attn(F)' is layer k): auto (where no name "
                 "numbers them), force, off")
      ->capture_default_str();
  sub.add_option("--comm-kernel", a->comm_kernel,
                 "kernels whose names match this regex are communication too (beside NCCL, DeepEP, NVSHMEM, ...)");
  sub.add_option("--schedule,-s", a->predict.schedule,
                 "the schedule the trace ran (pair, or a family): print the traced step against the prediction; "
                 "executed: the order the ranks ran (pipeline ranges), simulated with its own costs");
  sub.add_option("--executed-csv", a->executed_csv,
                 "write the executed order (pipeline ranges) as a schedule CSV (PyTorch's notation)");
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
    trace::ImportOptions io{a->map, a->no_default_rules, a->step_range};
    if (a->layer_order == "force")
      io.layer_order = trace::LayerOrder::force;
    else if (a->layer_order == "off")
      io.layer_order = trace::LayerOrder::off;
    else if (a->layer_order != "auto")
      throw InputError(fmt::format("--layer-order '{}': expected auto, force or off", a->layer_order),
                       closest_match(a->layer_order, {"auto", "force", "off"}), kExitUsage);
    io.comm_kernel = a->comm_kernel;
    const std::vector<std::string> paths = trace::expand_trace_paths(a->traces);
    const bool executed = a->predict.schedule == "executed";
    if (paths.size() > 1 || executed || !a->executed_csv.empty()) return run_ranks(*a, io, paths, f);
    const trace::ImportResult r = trace::import_trace_file(paths[0], io);
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
        throw InputError(SourceLoc{paths[0], 0, 0},
                         "no work in a numbered layer was found, so there is no per-layer profile to write",
                         "name ranges like 'layer3.attention.F' or give --map rules (docs/TRACES.md)");
      write_output(a->output, trace::render_import_profile(r));
      if (a->output != "-" && f != Format::Json) report += fmt::format("\nwrote {}\n", a->output);
      if (f == Format::Json) j["profile_path"] = a->output;
    }
    if (f == Format::Json) report = j.dump(2) + "\n";
    if (!a->html.empty()) write_output(a->html, render_html(json_tables_html("import-trace", "ppsim import-trace " + (a->traces.empty() ? std::string() : a->traces.front()), j)));
    if (a->output == "-")
      std::fputs(report.c_str(), stderr);
    else
      write_output("-", report);
    return 0;
  };
}

}  // namespace ppsim::cli
