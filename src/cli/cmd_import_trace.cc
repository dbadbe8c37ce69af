// `ppsim import-trace`: a PyTorch profiler (Kineto) trace in, a cost profile and a report out.
// A thin client: the flags, then api::import_trace (src/api/import_trace.h: which of src/trace/'s
// steps run, the report), then every output written together or none (write_outputs).
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/import_trace.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "report/html.h"

namespace ppsim::cli {

namespace {
struct ImportArgs {
  std::vector<std::string> traces;
  std::string executed_csv;
  std::string output;
  bool moe_layers_only = false;
  bool inference = false;
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

Runner setup_import_trace(CLI::App& sub) {
  auto a = std::make_shared<ImportArgs>();
  sub.add_option("trace", a->traces,
                 "the trace: Chrome trace JSON from torch.profiler (.json or .json.gz); several (or a folder): one "
                 "per rank of one run")
      ->required();
  sub.add_option("--output,-o", a->output, "write the cost profile (YAML, version 2) here");
  sub.add_flag("--moe-layers-only", a->moe_layers_only,
               "with -o: the profile stands for a config's MoE layers only (applies_to: moe_layers), the rest stays derived");
  sub.add_flag("--inference", a->inference,
               "read a forward-only (inference) trace: its profile has F times only (without it such a trace is "
               "refused as a training profile)");
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
  sub.add_option("--p2p-runtime", a->predict.p2p_runtime,
                 "with --schedule executed: dataflow (each transfer starts when its producer ends) or torch "
                 "(PyTorch's sends and receives, one stream per rank)")
      ->capture_default_str();
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
    const api::ImportTraceOutcome r =
        api::import_trace({a->traces, io, a->predict, a->output, a->executed_csv, !a->html.empty(), a->moe_layers_only,
                           a->inference});
    // Every output together or none (write_outputs): the files, then the report on stdout, or on
    // stderr where a file went to stdout.
    std::vector<std::pair<std::string, std::string>> files;
    if (!a->output.empty()) files.emplace_back(a->output, *r.profile_yaml);
    if (!a->executed_csv.empty()) files.emplace_back(a->executed_csv, *r.executed_csv);
    if (!a->html.empty()) {
      nlohmann::json page = r.json;  // the page names the profile's path only with --format json, as it did
      if (f != Format::Json) page.erase("profile_path");
      files.emplace_back(a->html,
                         render_html(json_tables_html("import-trace", "ppsim import-trace " + r.paths[0], page)));
    }
    const std::string report = f == Format::Json ? r.json.dump(2) + "\n" : r.report;
    const bool report_to_stderr = a->output == "-" || a->executed_csv == "-";
    if (!report_to_stderr) files.emplace_back("-", report);
    write_outputs(files);
    if (report_to_stderr) std::fputs(report.c_str(), stderr);
    return 0;
  };
}

}  // namespace ppsim::cli
