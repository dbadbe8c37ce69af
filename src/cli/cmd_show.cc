// `ppsim show`: one schedule's per-rank op order as readable text with a compact time-step
// chart, PyTorch's compute-only CSV, or JSON.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/schedule_source.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "report/chart.h"
#include "schedules/notation.h"

namespace ppsim::cli {

namespace {
struct ShowArgs {
  std::string family;
  ScheduleOptions so;
  std::string format = "text";
  std::string output = "-";
  std::string color = "auto";
};
}  // namespace

Runner setup_show(CLI::App& sub) {
  auto a = std::make_shared<ShowArgs>();
  sub.add_option("family", a->family, "schedule family (ppsim schedules lists them)");
  add_schedule_options(sub, a->so);
  sub.add_option("--format", a->format, "text, csv (PyTorch compute-only) or json")->capture_default_str();
  sub.add_option("--output,-o", a->output, "write to this file instead of stdout");
  sub.add_option("--color", a->color, "auto, always or never")->capture_default_str();
  return [a]() {
    const Format f = parse_format(a->format, {"text", "csv", "json"});
    const Schedule s = api::load_schedule(a->family, to_choice(a->so));
    std::string out;
    if (f == Format::Csv) {
      out = schedule_to_csv(s);
    } else if (f == Format::Json) {
      nlohmann::json j;
      j["schedule"] = s.family;
      j["pp"] = s.pp;
      j["microbatches"] = s.microbatches;
      j["pipes"] = s.num_pipes;
      j["stages"] = s.num_stages();
      j["stage_rank"] = s.stage_rank;
      j["ranks"] = nlohmann::json::array();
      for (const auto& r : s.ranks) {
        nlohmann::json row = nlohmann::json::array();
        for (const auto& act : r) row.push_back(format_action(act));
        j["ranks"].push_back(row);
      }
      out = j.dump(2) + "\n";
    } else {
      out += fmt::format("{}: P={} M={} stages={} pipes={} ops={}\n", s.family, s.pp, s.microbatches, s.num_stages(),
                         s.num_pipes, s.num_ops());
      for (int r = 0; r < s.pp; ++r) {
        out += fmt::format("rank {:>2}:", r);
        for (const auto& act : s.ranks[r]) out += " " + format_action(act);
        out += "\n";
      }
      out += "\ntime steps (F=1, I=1, W=1, B=2, F&B=3):\n";
      out += render_step_chart(api::unit_step_timeline(s), use_color(a->color, a->output));
    }
    write_output(a->output, out);
    return 0;
  };
}

}  // namespace ppsim::cli
