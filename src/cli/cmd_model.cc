// `ppsim model FILE`: parameters (total, active per token) by part, FLOPs per token, and with
// --pp the parameters each stage holds, of a ppsim YAML config or a Hugging Face config.json.
#include <fmt/format.h>

#include "api/model.h"
#include "cli/commands.h"
#include "cli/common.h"

namespace ppsim::cli {

namespace {
// 8030261248 -> "8.03B", 525336576 -> "525.34M".
std::string human(double x) {
  if (x >= 1e9) return fmt::format("{:.2f}B", x / 1e9);
  if (x >= 1e6) return fmt::format("{:.2f}M", x / 1e6);
  if (x >= 1e3) return fmt::format("{:.2f}K", x / 1e3);
  return fmt::format("{:.0f}", x);
}
}  // namespace

Runner setup_model(CLI::App& sub) {
  auto a = bind_options(sub, "model");
  return [a]() {
    const Format f = parse_format(a->text("format"), {"table", "json"});
    const api::ModelRequest req = api::model_request(*a);
    const api::ModelReport r = api::model_report(req);
    std::string out;
    if (f == Format::Json) {
      out = api::model_json(r).dump(2) + "\n";
    } else {
      const ModelSpec& m = r.config.model;
      out += fmt::format("model: {} ({})\n", r.config.name, r.source);
      out +=
          fmt::format("  {} layers, hidden {}, {} heads ({} kv), vocab {}{}{}{}\n", m.layers, m.hidden, m.heads,
                      m.mla.enabled ? m.heads : m.kv_heads, m.vocab,
                      m.moe.enabled() ? fmt::format(", {} experts top-{} ({} shared) on {} layers", m.moe.experts,
                                                    m.moe.top_k, m.moe.shared_experts, m.layers - m.dense_layers_first)
                                      : "",
                      m.mla.enabled ? ", MLA" : "", m.mtp_depth > 0 ? fmt::format(", MTP depth {}", m.mtp_depth) : "");
      out += fmt::format("{:<16} {:>12} {:>12}\n", "parameters", "total", "active");
      for (const auto& p : r.parts)
        if (p.name != "mtp") out += fmt::format("  {:<14} {:>12} {:>12}\n", p.name, human(p.total), human(p.active));
      out += fmt::format("  {:<14} {:>12} {:>12}\n", "total", human(r.total), human(r.active));
      for (const auto& p : r.parts)
        if (p.name == "mtp")
          out +=
              fmt::format("  {:<14} {:>12} {:>12}  (apart from the total)\n", "mtp", human(p.total), human(p.active));
      out += fmt::format("FLOPs per token at seq_len {}: forward {:.3g}G, backward {:.3g}G\n", r.seq_len,
                         r.forward_flops_per_token / 1e9, r.backward_flops_per_token / 1e9);
      if (!r.stages.empty()) {
        out += fmt::format("{:<6} {:>7} {:>7} {:>12} {:>12}  holds\n", "stage", "layers", "first", "params", "experts");
        for (const auto& s : r.stages) {
          std::string row = fmt::format("{:<6} {:>7} {:>7} {:>12} {:>12}  {}", s.stage, s.layers, s.first_layer,
                                        human(s.params), human(s.expert_params),
                                        std::string(s.embedding ? "embedding" : "") + (s.embedding && s.head ? " " : "") +
                                            (s.head ? (m.mtp_depth > 0 ? "head mtp" : "head") : ""));
          while (!row.empty() && row.back() == ' ') row.pop_back();
          out += row + "\n";
        }
      }
    }
    write_output(a->text("output"), out);
    return 0;
  };
}

}  // namespace ppsim::cli
