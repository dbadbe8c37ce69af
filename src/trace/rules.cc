// Mapping rules (rules.h) and the documented defaults (docs/TRACES.md lists them: keep in step).
#include "trace/rules.h"

#include <fmt/format.h>

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
      // sub-ops
      R"(combine|unpermute=combine:)",
      R"(dispatch|permute=dispatch:)",
      R"(attn|attention|self_attention|mla\b|qkv=attention:)",
      R"(mlp|moe|expert|ffn|feed_forward|feedforward|router|gate|shared_experts=mlp:)",
      R"(layernorm|layer_norm|rmsnorm|rms_norm|norm\b|embedding|output_layer|loss=other:)",
  };
  return kDefaults;
}

namespace {

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
  return r;
}

}  // namespace

Rules::Rules(const std::vector<std::string>& user, bool no_defaults) {
  for (const auto& u : user) rules_.push_back(parse_rule(u, true));
  if (!no_defaults)
    for (const auto& d : default_rules()) rules_.push_back(parse_rule(d, false));
}

RangeMeaning Rules::classify(const std::string& name) const {
  RangeMeaning m;
  for (const Rule& r : rules_) {
    if (m.subop && m.pass) break;
    if ((r.subop && !m.subop) || (r.pass && !m.pass)) {
      if (!std::regex_search(name, r.re)) continue;
      if (r.subop && !m.subop) m.subop = r.subop;
      if (r.pass && !m.pass) m.pass = r.pass;
    }
  }
  // "layer" numbers (layer3, layers.3, model.layers.3, decoder.layers.3, nn.Module: XDecoderLayer_3)
  // before "block" numbers (blocks.3, block3: torchvision, or a module inside a layer).
  static const std::regex kLayer(R"(layers?[._\[\s]?(\d+))", std::regex::icase | std::regex::optimize);
  static const std::regex kBlock(R"(blocks?[._\[\s]?(\d+))", std::regex::icase | std::regex::optimize);
  std::smatch lm;
  if (std::regex_search(name, lm, kLayer)) {
    const std::string d = lm[1].str();
    if (d.size() < 7) m.layer = std::stoi(d), m.layer_strong = true;
  } else if (std::regex_search(name, lm, kBlock)) {
    const std::string d = lm[1].str();
    if (d.size() < 7) m.layer = std::stoi(d);
  }
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
    throw InputError(fmt::format("--comm-kernel '{}': bad regular expression ({})", regex, e.what()),
                     "e.g. --comm-kernel 'my_a2a|fused_send'", kExitUsage);
  }
}

}  // namespace ppsim::trace
