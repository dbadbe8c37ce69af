#include "cost/megatron_model_config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <optional>
#include <vector>

namespace ppsim {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

SourceLoc loc_of(const std::string& name, const YAML::Mark& m) { return SourceLoc{name, m.line + 1, m.column + 1}; }

std::string trimmed(const std::string& s) {
  const std::size_t a = s.find_first_not_of(" \t\n\r");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\n\r") - a + 1);
}

bool is_true(const std::string& v) { return v == "true" || v == "True" || v == "TRUE"; }
bool is_false(const std::string& v) { return v == "false" || v == "False" || v == "FALSE"; }

// One MODEL_ARGS value as the runner writes it after its key (_run_training.sh's cases, in
// order); nullopt: the flag is left out ("").
std::optional<std::string> runner_words(const std::string& name, const std::string& flag, const YAML::Node& v) {
  if (v.IsSequence()) {
    std::string out;
    for (const YAML::Node& item : v) out += (out.empty() ? "" : " ") + (item.IsScalar() ? item.Scalar() : "");
    return out;
  }
  if (!v.IsScalar())
    throw InputError(loc_of(name, v.Mark()),
                     fmt::format("MODEL_ARGS {}: {}; write true for a switch, or its value", flag,
                                 v.IsNull() ? "no value (the runner would pass 'null')" : "a map, not a value"));
  const std::string value = trimmed(v.Scalar());
  if (value.empty()) return std::nullopt;
  if (is_true(value)) return std::string();
  if (is_false(value))
    throw InputError(loc_of(name, v.Mark()),
                     fmt::format("MODEL_ARGS {}: false: the runner passes '{} false', which Megatron's argparse "
                                 "refuses after a switch; remove the line, or write true",
                                 flag, flag));
  if (value.size() >= 2 && value.front() == '(' && value.back() == ')') return "\"" + value + "\"";
  if (value.size() >= 2 && value.front() == '[' && value.back() == ']') return value.substr(1, value.size() - 2);
  if (value.find_first_of(" |()") != std::string::npos) return "\"" + value + "\"";
  return value;
}

// `words` written into `lines` at (line, column), after what the line holds.
void place(std::vector<std::string>& lines, std::size_t line, std::size_t column, const std::string& words) {
  if (lines.size() <= line) lines.resize(line + 1);
  std::string& l = lines[line];
  if (l.size() < column) l.append(column - l.size(), ' ');
  if (!l.empty() && l.back() != ' ') l += ' ';
  l += words;
}

}  // namespace

bool is_model_config_yaml(const std::string& text, const std::string& name) {
  return ends_with(name, ".yaml") || ends_with(name, ".yml") || text.rfind("MODEL_ARGS:", 0) == 0 ||
         text.find("\nMODEL_ARGS:") != std::string::npos;
}

std::string model_config_args(const std::string& text, const std::string& name, ScriptEnv& env) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError(loc_of(name, e.mark), fmt::format("not valid YAML: {}", e.msg));
  }
  const YAML::Node args = root.IsMap() ? root["MODEL_ARGS"] : YAML::Node();
  if (!args || !args.IsMap())
    throw InputError(SourceLoc{name, 0, 0},
                     args ? "MODEL_ARGS must be a map of --flag: value"
                          : "a YAML file without MODEL_ARGS is not an argument list (megatron_args reads a launch "
                            "script, an argument list, or a Megatron-LM functional test's model_config.yaml, whose "
                            "MODEL_ARGS map holds the flags)");
  const YAML::Node vars = root["ENV_VARS"];
  if (vars && vars.IsMap())
    for (auto it = vars.begin(); it != vars.end(); ++it)
      if (it->first.IsScalar() && it->second.IsScalar() && !env.count(it->first.Scalar()))
        env[it->first.Scalar()] = it->second.Scalar();
  std::vector<std::string> lines;
  for (auto it = args.begin(); it != args.end(); ++it) {
    const std::string flag = it->first.Scalar();
    const std::optional<std::string> words = runner_words(name, flag, it->second);
    if (!words) continue;
    const YAML::Mark k = it->first.Mark(), v = it->second.Mark();
    place(lines, static_cast<std::size_t>(k.line), static_cast<std::size_t>(k.column), flag);
    if (!words->empty())
      place(lines, static_cast<std::size_t>(k.line), v.line == k.line ? static_cast<std::size_t>(v.column) : 0, *words);
  }
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

}  // namespace ppsim
