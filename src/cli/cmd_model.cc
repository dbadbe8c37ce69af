// `ppsim model FILE`: parameters (total, active per token) by part, FLOPs per token, and with
// --pp the parameters each stage holds, of a ppsim YAML config or a Hugging Face config.json.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "api/model.h"
#include "cli/commands.h"
#include "cli/common.h"

namespace ppsim::cli {

namespace {
using api::short_count;
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
      out += fmt::format(
          "  {} layers ({} dense, {} MoE), hidden {}, {} heads ({} kv), vocab {}{}{}{}\n", m.layers, r.dense_layers,
          r.moe_layers, m.hidden, m.heads, m.mla.enabled ? m.heads : m.kv_heads, m.vocab,
          m.moe.enabled()
              ? fmt::format(", {} experts top-{} ({} shared)", m.moe.experts, m.moe.top_k, m.moe.shared_experts)
              : "",
          m.mla.enabled ? ", MLA" : "", m.mtp_depth > 0 ? fmt::format(", MTP depth {}", m.mtp_depth) : "");
      if (!r.read_as.empty()) out += "  read as: " + fmt::format("{}", fmt::join(r.read_as, "; ")) + "\n";
      out += fmt::format("{:<16} {:>12} {:>12}  made of\n", "parameters", "total", "active");
      for (const auto& p : r.parts)
        if (p.name != "mtp")
          out += fmt::format("  {:<14} {:>12} {:>12}  {}\n", p.name, short_count(p.total), short_count(p.active),
                             p.made_of);
      out += fmt::format("  {:<14} {:>12} {:>12}\n", "total", short_count(r.total), short_count(r.active));
      for (const auto& p : r.parts)
        if (p.name == "mtp")
          out += fmt::format("  {:<14} {:>12} {:>12}  (apart from the total) {}\n", "mtp", short_count(p.total),
                             short_count(p.active), p.made_of);
      if (r.other_params > 0)
        out += fmt::format("  {:<14} {:>12} {:>12}  (apart) {}\n", "other", short_count(r.other_params), "", r.other);
      else if (!r.other.empty())
        out += "  other: " + r.other + "\n";
      if (!r.not_counted.empty()) out += "  not counted: " + fmt::format("{}", fmt::join(r.not_counted, "; ")) + "\n";
      out += fmt::format("FLOPs per token at seq_len {} ({}): forward {:.3g}G, backward {:.3g}G\n", r.seq_len,
                         r.seq_len_why, r.forward_flops_per_token / 1e9, r.backward_flops_per_token / 1e9);
      if (!r.stages.empty()) {
        // A rank of several stages (vpp, or a V) lists its chunks of layers: "0-1,8-9".
        const bool chunked =
            std::any_of(r.stages.begin(), r.stages.end(), [](const auto& s) { return s.chunks.size() > 1; });
        out += fmt::format("{:<6} {:>7} {:>7} {:>12} {:>12}  holds\n", chunked ? "rank" : "stage", "layers",
                           chunked ? "at" : "first", "params", "experts");
        for (const auto& s : r.stages) {
          std::vector<std::string> at;
          for (const auto& ch : s.chunks)
            at.push_back(ch[1] <= 1 ? fmt::format("{}", ch[0]) : fmt::format("{}-{}", ch[0], ch[0] + ch[1] - 1));
          std::string row =
              fmt::format("{:<6} {:>7} {:>7} {:>12} {:>12}  {}", s.stage, s.layers,
                          chunked ? fmt::format("{}", fmt::join(at, ",")) : std::to_string(s.first_layer),
                          short_count(s.params), short_count(s.expert_params),
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
