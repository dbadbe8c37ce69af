// `ppsim import-trace`: a PyTorch profiler (Kineto) trace in, a cost profile and a report out.
// A thin client: the reading, attribution and prediction are src/trace/ (docs/TRACES.md).
#include <fmt/format.h>

#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
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
  std::string layer_order = "auto";
  std::string comm_kernel;
  std::string format = "table";
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
  sub.add_option("--layer-order", a->layer_order,
                 "number layers by the order of sub-op ranges (the k-th 'attn(F)' is layer k): auto (where no name "
                 "numbers them), force, off")
      ->capture_default_str();
  sub.add_option("--comm-kernel", a->comm_kernel,
                 "kernels whose names match this regex are communication too (beside NCCL, DeepEP, NVSHMEM, ...)");
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
    const trace::ImportResult r = trace::import_trace_file(a->trace, io);
    std::string report;
    nlohmann::json j;
    if (f == Format::Json)
      j = trace::import_json(r);
    else
      report = trace::render_import_report(r);
    if (!a->predict.schedule.empty()) {
      const trace::Prediction p = trace::predict_traced(r, a->predict);
      if (f == Format::Json)
        j["prediction"] = trace::prediction_json(p);
      else
        report += trace::render_prediction(p);
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
    if (a->output == "-")
      std::fputs(report.c_str(), stderr);
    else
      write_output("-", report);
    return 0;
  };
}

}  // namespace ppsim::cli
