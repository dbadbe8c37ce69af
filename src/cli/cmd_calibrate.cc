// `ppsim calibrate CONFIG (TRACE... | --step-ms X | --tokens-per-s X) -o cal.yaml`: the user's own
// run in, a calibration file out (api/calibrate.h; docs/CALIBRATION.md). A thin client: the flags,
// api::calibrate, then the file and the report written together or not at all.
#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/calibrate.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"

namespace ppsim::cli {

namespace {
struct CalibrateArgs {
  std::string config;
  std::vector<std::string> traces;
  std::vector<std::string> sets;
  std::string schedule;
  int vpp = 0;
  double step_ms = 0, tokens_per_s = 0;
  std::string step_range;
  std::string output;
  std::string format = "table";
};
}  // namespace

Runner setup_calibrate(CLI::App& sub) {
  auto a = std::make_shared<CalibrateArgs>();
  sub.add_option("config", a->config, "the YAML config of the run you measured (its layout, batch and GPU type)")
      ->required();
  sub.add_option("trace", a->traces,
                 "PyTorch profiler (Kineto) traces of that run: fit per-op efficiencies from their kernels");
  sub.add_option("--step-ms", a->step_ms, "the run's measured step time in ms: fit one compute scale");
  sub.add_option("--tokens-per-s", a->tokens_per_s, "the run's measured throughput in tokens/s: fit one compute scale");
  sub.add_option("--schedule,-s", a->schedule,
                 "the schedule family the run used (default: the config's parallel.schedule)");
  sub.add_option("--vpp,-v", a->vpp, "chunks per rank of an interleaved run (default: the config's)");
  sub.add_option("--set", a->sets, "override a config key: key.path=value (repeatable)");
  sub.add_option("--step-range", a->step_range,
                 "with traces: the step is the GPU work under CPU ranges matching this regex");
  sub.add_option("--output,-o", a->output, "write the calibration YAML here")->required();
  sub.add_option("--format", a->format, "the report: table or json")->capture_default_str();
  return [a]() {
    const Format f = parse_format(a->format, {"table", "json"});
    api::CalibrateRequest req;
    req.config = a->config;
    req.traces = a->traces;
    req.sets = a->sets;
    req.schedule = a->schedule;
    req.vpp = a->vpp;
    req.trace_options.step_range = a->step_range;
    if (a->step_ms != 0) req.step_ms = a->step_ms;
    if (a->tokens_per_s != 0) req.tokens_per_s = a->tokens_per_s;
    const api::CalibrateOutcome out = api::calibrate(req);
    const std::string report =
        f == Format::Json ? out.json.dump(2) + "\n" : out.report + fmt::format("wrote {}\n", a->output);
    write_outputs({{a->output, out.yaml}, {"-", report}});
    return 0;
  };
}

void add_calibration_option(CLI::App& sub, std::string& path) {
  sub.add_option("--calibration", path,
                 "apply a calibration file (ppsim calibrate -o) over the config's presets, as calibration: FILE in it");
}

void add_calibration_set(const std::string& path, std::vector<std::string>& sets) {
  // Absolute, so that it is not read relative to the config's folder.
  if (!path.empty()) sets.push_back("calibration=" + std::filesystem::absolute(path).string());
}

}  // namespace ppsim::cli
