// Mapping rules (rules.h) and the documented defaults (docs/TRACES.md lists them: keep in step).
#include "trace/rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace ppsim::trace {

const char* subop_name(SubOp s) {
  static const char* kNames[] = {"attention", "mlp", "dispatch", "combine", "other"};
  return kNames[static_cast<int>(s)];
}
const char* pass_name(Pass p) {
  static const char* kNames[] = {"F", "I", "W"};
  return kNames[static_cast<int>(p)];
}

const std::vector<std::string>& Rules::default_rules() {
  // Order matters: the first rule that gives a part wins. Weight-grad names before the general
  // backward names; dispatch/combine before MLP (Megatron's token_dispatcher lives in the MoE layer).
  static const std::vector<std::string> kDefaults = {
      // passes: a letter alone between separators (layer3.attn.F, attn(B), mlp[W], x_I), or words
      R"((?:^|[._\-\s()\[\]:])(?:W|wgrad)(?:$|[._\-\s()\[\]:])|weight_grad|backward_w(?:eight)?\b|\bbwd_w\b|_w_chunk=:W)",
      R"((?:^|[._\-\s()\[\]:])(?:I|B|dgrad)(?:$|[._\-\s()\[\]:])|backward|bwd|input_grad|Backward=:I)",
      // "forward" but not "feed_forward" (a module name): not after an underscore unless a chunk.
      R"((?:^|[._\-\s()\[\]:])F(?:$|[._\-\s()\[\]:])|forward_chunk|(?:^|[^_])forward|fwd=:F)",
      // sub-ops (case ignored on user ranges: SelfAttention, MLP)
      R"(combine|unpermute=combine:)",
      R"(dispatch|permute=dispatch:)",
      R"(attn|attention|self_attention|mla\b|qkv=attention:)",
      R"(mlp|moe|expert|ffn|feed_forward|feedforward|router|gate|shared_experts=mlp:)",
      R"(layernorm|layer_norm|rmsnorm|rms_norm|norm\b|embedding|output_layer|loss=other:)",
  };
  return kDefaults;
}

namespace {

// The default sub-op rules ignore case on user ranges (`Attention`, `MLP`); the pass rules do
// not (a lone F, B or W; MmBackward0).
Rule parse_rule(const std::string& text, bool user) {
  const std::size_t eq = text.rfind('=');
  auto fail = [&](const std::string& why) -> Rule {
    throw InputError(fmt::format("--map '{}': {}", text, why), "e.g. --map 'self_attn=attention:F'",
                     user ? kExitUsage : kExitInternal);
  };
  if (eq == std::string::npos || eq == 0) return fail("expected REGEX=SUBOP:PASS");
  const std::string pattern = text.substr(0, eq), target = text.substr(eq + 1);
  const std::size_t colon = target.find(':');
  const std::string sub = target.substr(0, colon), pass = colon == std::string::npos ? "" : target.substr(colon + 1);
  Rule r;
  r.text = text;
  try {
    r.re = std::regex(pattern, std::regex::ECMAScript | std::regex::optimize);
    if (!user && target.find(':') != 0)
      r.re_icase.emplace(pattern, std::regex::ECMAScript | std::regex::optimize | std::regex::icase);
  } catch (const std::regex_error& e) {
    return fail(fmt::format("bad regular expression ({})", e.what()));
  }
  static const std::vector<std::string> kSub = {"attention", "mlp", "dispatch", "combine", "other"};
  if (sub == "attn")
    r.subop = SubOp::attention;
  else if (!sub.empty()) {
    bool found = false;
    for (std::size_t i = 0; i < kSub.size(); ++i)
      if (sub == kSub[i]) r.subop = static_cast<SubOp>(i), found = true;
    if (!found)
      throw InputError(
          fmt::format("--map '{}': unknown sub-op '{}' (attention, mlp, dispatch, combine, other)", text, sub),
          closest_match(sub, kSub), user ? kExitUsage : kExitInternal);
  }
  if (pass == "F")
    r.pass = Pass::F;
  else if (pass == "I" || pass == "B")
    r.pass = Pass::I;  // B: the backward for the input (B-input)
  else if (pass == "W")
    r.pass = Pass::W;
  else if (!pass.empty())
    throw InputError(
        fmt::format("--map '{}': unknown pass '{}' (F, I or B for the input-grad backward, W)", text, pass),
        closest_match(pass, {"F", "I", "B", "W"}), user ? kExitUsage : kExitInternal);
  if (!r.subop && !r.pass) return fail("names neither a sub-op nor a pass");
  r.module_scopes = user;
  return r;
}

}  // namespace

Rules::Rules(const std::vector<std::string>& user, bool no_defaults) {
  for (const auto& u : user) rules_.push_back(parse_rule(u, true));
  if (!no_defaults)
    for (const auto& d : default_rules()) rules_.push_back(parse_rule(d, false));
}

namespace {

bool ends_with(const std::string& s, const char* suffix) {
  const std::size_t n = std::char_traits<char>::length(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// The number of a layer in a name: after "layer"/"layers" (strong), else after "block"/"blocks",
// else (user ranges) between dots of a module path (transformer.h.3.attn, blocks of GPT-2).
void layer_number(const std::string& name, bool module_path, RangeMeaning& m) {
  static const std::regex kLayer(R"(layers?[._\[\s]?(\d+))", std::regex::icase | std::regex::optimize);
  static const std::regex kBlock(R"(blocks?[._\[\s]?(\d+))", std::regex::icase | std::regex::optimize);
  static const std::regex kPath(R"((?:^|\.)(\d+)(?:\.|$))", std::regex::optimize);
  std::smatch lm;
  const bool strong = std::regex_search(name, lm, kLayer);
  if (!strong && !std::regex_search(name, lm, kBlock) && !(module_path && std::regex_search(name, lm, kPath))) return;
  const std::string d = lm[1].str();
  if (d.size() < 7) m.layer = std::stoi(d), m.layer_strong = strong;
}

}  // namespace

std::optional<SubOp> module_role(const std::string& class_name) {
  std::string c = class_name;
  while (!c.empty() && std::isdigit(static_cast<unsigned char>(c.back())) != 0) c.pop_back();
  if (!c.empty() && c.back() == '_') c.pop_back();
  std::transform(c.begin(), c.end(), c.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  for (const char* s : {"attention", "attn"})
    if (ends_with(c, s)) return SubOp::attention;
  for (const char* s : {"mlp", "feedforward", "ffn", "moe", "moeblock", "experts", "expert", "router", "gate"})
    if (ends_with(c, s)) return SubOp::mlp;
  if (ends_with(c, "norm")) return SubOp::other;
  return std::nullopt;
}

RangeMeaning Rules::classify(const std::string& name, RangeKind kind) const {
  static const std::string kScope = "nn.Module: ";
  const bool scope = kind == RangeKind::python && name.rfind(kScope, 0) == 0;
  // A Python frame ("path/file.py(12): forward") by its function's name: its path names the
  // model's file (modeling_qwen2_moe.py) for every frame of the model.
  std::string text = name;
  if (kind == RangeKind::python && !scope)
    if (const std::size_t colon = name.find("): "); colon != std::string::npos) text = name.substr(colon + 3);
  RangeMeaning m;
  for (const Rule& r : rules_) {
    if (m.subop && m.pass) break;
    if (scope && !r.module_scopes) continue;
    if ((r.subop && !m.subop) || (r.pass && !m.pass)) {
      if (!std::regex_search(text, kind == RangeKind::user && r.re_icase ? *r.re_icase : r.re)) continue;
      if (r.subop && !m.subop) m.subop = r.subop;
      if (r.pass && !m.pass) m.pass = r.pass;
    }
  }
  if (scope && !m.subop) m.subop = module_role(name.substr(kScope.size()));
  if (kind != RangeKind::python || scope) layer_number(text, kind == RangeKind::user, m);
  return m;
}

bool Rules::is_comm_kernel(const std::string& k) {
  // NCCL/RCCL, DeepEP (deep_ep::, DeepSeek's dpsk::ep::), NVSHMEM, torch symmetric memory
  // (symm_mem, multimem/one_shot/two_shot all-reduce), and collectives by name.
  static const std::regex kComm(
      R"(nccl|rccl|all_?to_?all|alltoall|all_?gather|reduce_?scatter|all_?reduce|send_?recv|deep_?ep|dpsk::ep::|nvshmem|symm_?mem|symmetric_?memory|multimem|cross_device)",
      std::regex::icase | std::regex::optimize);
  return std::regex_search(k, kComm);
}

bool Rules::comm(const std::string& k) const {
  if (comm_extra_ && std::regex_search(k, *comm_extra_)) return true;
  return is_comm_kernel(k);
}

void Rules::set_comm_kernel(const std::string& regex) {
  if (regex.empty()) return;
  try {
    comm_extra_.emplace(regex, std::regex::ECMAScript | std::regex::optimize);
  } catch (const std::regex_error& e) {
    throw InputError(fmt::format("--comm-kernel '{}': bad regular expression ({})", regex, e.what()), {}, kExitUsage);
  }
}

}  // namespace ppsim::trace
