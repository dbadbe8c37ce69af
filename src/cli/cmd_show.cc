// `ppsim show`: one schedule's per-rank op order as readable text with a compact time-step
// chart, PyTorch's CSV (`csv` or `torch`: the same file, in the dialect --write-dialect names;
// auto writes an imported file's own), or JSON. An imported file's dialect is printed.
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/schedule_source.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "report/chart.h"
#include "schedules/notation.h"
#include "schedules/torch_p2p.h"

namespace ppsim::cli {

Runner setup_show(CLI::App& sub) {
  auto a = bind_options(sub, "show");
  return [a]() {
    const std::string lower = a->text("lower"), format = a->text("format"), color = a->text("color");
    const std::string output = a->text("output");
    if (lower != "none" && lower != "torch")
      throw InputError(fmt::format("--lower '{}': expected none or torch", lower),
                       closest_match(lower, {"none", "torch"}), kExitUsage);
    const Format f = format == "torch" ? Format::Csv : parse_format(format, {"text", "csv", "torch", "json"});
    const Dialect dialect = parse_dialect(a->text("write_dialect"));
    Schedule s = api::load_schedule(a->text("family"), api::schedule_choice(*a));
    if (lower == "torch") s = with_torch_p2p(std::move(s));
    std::string out;
    if (f == Format::Csv) {
      out = schedule_to_csv(s, dialect);
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
      if (!s.dialect.empty()) j["schedule_file"] = api::import_info(s);
      if (lower == "torch") j["lowered"] = schedule_tokens(s, dialect);  // each rank's list, comm actions in order
      out = j.dump(2) + "\n";
    } else {
      out += fmt::format("{}: P={} M={} stages={} pipes={} ops={}\n", s.family, s.pp, s.microbatches, s.num_stages(),
                         s.num_pipes, s.num_ops());
      if (!s.dialect.empty()) {
        const nlohmann::json info = api::import_info(s);
        out += fmt::format("dialect: {}\n", describe_dialect(s.dialect == "2.5" ? Dialect::Torch25 : Dialect::Current));
        if (info["comm_actions"].get<std::size_t>() > 0)
          out += fmt::format("comm actions: {} ({} FSDP ones not modelled); SEND/RECV kept as explicit transfers\n",
                             info["comm_actions"].get<std::size_t>(), info["fsdp_actions_ignored"].get<std::size_t>());
      }
      const std::vector<std::vector<std::string>> lowered =
          lower == "torch" ? schedule_tokens(s, dialect) : std::vector<std::vector<std::string>>{};
      for (int r = 0; r < s.pp; ++r) {
        out += fmt::format("rank {:>2}:", r);
        if (lower == "torch") {  // the lowered list, comm actions among the compute
          for (const std::string& tok : lowered[static_cast<std::size_t>(r)]) out += " " + tok;
        } else {
          for (const auto& act : s.ranks[r]) out += " " + format_action(act);
        }
        out += "\n";
      }
      out += "\ntime steps (F=1, I=1, W=1, B=2, F&B=3):\n";
      out += render_step_chart(api::unit_step_timeline(s), use_color(color, output));
    }
    write_output(output, out);
    return 0;
  };
}

}  // namespace ppsim::cli
