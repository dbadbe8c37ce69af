// `ppsim calibrate CONFIG (TRACE... | --step-ms X | --tokens-per-s X) -o cal.yaml`: the user's own
// run in, a calibration file out (api/calibrate.h; docs/CALIBRATION.md). A thin client: the options
// (api/options.cc), api::calibrate, then the file and the report written together or not at all.
#include <fmt/format.h>

#include "api/calibrate.h"
#include "api/options.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"

namespace ppsim::cli {

Runner setup_calibrate(CLI::App& sub) {
  auto a = bind_options(sub, "calibrate");
  return [a]() {
    const Format f = parse_format(a->text("format"), {"table", "json"});
    const std::string output = a->text("output");
    if (output.empty()) throw InputError("calibrate: give -o FILE, where the calibration YAML goes", {}, kExitUsage);
    const api::CalibrateOutcome out = api::calibrate(api::calibrate_request(*a));
    const std::string report =
        f == Format::Json ? out.json.dump(2) + "\n" : out.report + fmt::format("wrote {}\n", output);
    write_outputs({{output, out.yaml}, {"-", report}});
    return 0;
  };
}

}  // namespace ppsim::cli
