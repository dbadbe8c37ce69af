// `ppsim schedules`: the registry as a table or JSON.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "api/schedule_source.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "schedules/registry.h"

namespace ppsim::cli {

Runner setup_schedules(CLI::App& sub) {
  auto v = bind_options(sub, "schedules");
  return [v]() {
    const Format f = parse_format(v->text("format"), {"table", "json"});
    std::string out;
    if (f == Format::Json) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& info : api::family_infos()) j.push_back(api::family_json(info));
      out = j.dump(2) + "\n";
    } else {
      for (const auto& [famp, pb] : api::family_infos()) {
        const Family& fam = *famp;
        out += fmt::format("{:<17} {}\n", fam.name, fam.description);
        out += fmt::format("{:<17}   aliases: {}\n", "", fmt::join(fam.aliases, ", "));
        out += fmt::format("{:<17}   needs: {}; params {}x; chunks/rank {}\n", "", fam.constraints, fam.parameter_copies,
                           fam.default_vpp);
        out += pb.available ? fmt::format("{:<17}   bubble: {}  [exact when {}]\n", "", pb.formula, pb.condition)
                            : fmt::format("{:<17}   bubble: none published\n", "");
        if (!family_in_all(fam)) out += fmt::format("{:<17}   run when named (`all` leaves it out)\n", "");
        out += fmt::format("{:<17}   activations/rank: {}\n", "", fam.activation_formula);
      }
    }
    write_output("-", out);
    return 0;
  };
}

}  // namespace ppsim::cli
