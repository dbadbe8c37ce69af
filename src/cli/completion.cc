#include "cli/completion.h"

#include <fmt/format.h>

#include "api/options.h"
#include "core/error.h"
#include "schedules/registry.h"

namespace ppsim::cli {

namespace {

// The words an option's value completes to: its choices, the families, or "" for files.
std::string value_words(const api::Option& o) {
  if (!o.choices.empty()) {
    std::string w;
    for (const std::string& c : api::choice_list(o)) w += (w.empty() ? "" : " ") + c;
    return w;
  }
  const std::string name = api::option_name(o);
  if (name == "schedule" || name == "schedules" || name == "family") {
    std::string w = name == "schedules" ? "all" : "";
    for (const Family& f : families()) w += (w.empty() ? "" : " ") + f.name;
    return w;
  }
  return {};
}

bool numeric(const api::Option& o) {
  return o.kind == api::Kind::Int || o.kind == api::Kind::Int64 || o.kind == api::Kind::Real;
}

// Every spelling of an option, space-separated: "--pp -p".
std::string spellings(const api::Option& o) {
  std::string out(o.names);
  for (char& c : out)
    if (c == ',') c = ' ';
  return out;
}

std::string bash_script() {
  std::string cmds, cases;
  for (const api::CommandSpec& c : api::command_specs()) {
    cmds += std::string(cmds.empty() ? "" : " ") + std::string(c.name);
    std::string flags, prev;
    for (const api::Option& o : c.options) {
      if (o.reach == api::Reach::Python || api::positional(o)) continue;
      flags += (flags.empty() ? "" : " ") + spellings(o);
      if (o.kind == api::Kind::Flag) continue;
      std::string pattern = spellings(o);
      for (char& ch : pattern)
        if (ch == ' ') ch = '|';
      const std::string words = value_words(o);
      if (numeric(o) && words.empty()) {  // a number: nothing to offer
        prev += fmt::format("        {}) COMPREPLY=(); return;;\n", pattern);
        continue;
      }
      prev += words.empty()
                  ? fmt::format("        {}) COMPREPLY=($(compgen -f -- \"$cur\")); return;;\n", pattern)
                  : fmt::format("        {}) COMPREPLY=($(compgen -W \"{}\" -- \"$cur\")); return;;\n", pattern, words);
    }
    cases += fmt::format("    {})\n      case \"$prev\" in\n{}      esac\n      opts=\"{} --help\";;\n", c.name, prev,
                         flags);
  }
  return fmt::format(R"(# bash completion for ppsim (ppsim --completion bash; generated from src/api/options.cc)
_ppsim() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}" opts=""
  if [[ $COMP_CWORD -eq 1 ]]; then
    COMPREPLY=($(compgen -W "{} --help --version --completion --dump-options" -- "$cur"))
    return
  fi
  case "${{COMP_WORDS[1]}}" in
{}  esac
  if [[ "$cur" == -* ]]; then COMPREPLY=($(compgen -W "$opts" -- "$cur")); else COMPREPLY=($(compgen -f -- "$cur")); fi
}}
complete -o filenames -F _ppsim ppsim
)",
                     cmds, cases);
}

// Help text safe inside a zsh _arguments spec: no brackets, colons or single quotes; one clause.
std::string zsh_help(std::string_view help) {
  std::string out(help.substr(0, help.find_first_of(";(")));
  for (char& c : out) {
    if (c == '[') c = '(';
    if (c == ']') c = ')';
    if (c == ':') c = ' ';
    if (c == '\'') c = '`';  // no quote can be escaped inside zsh's single quotes
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::string zsh_script() {
  std::string cmds, cases;
  for (const api::CommandSpec& c : api::command_specs()) {
    cmds += fmt::format("    '{}:{}'\n", c.name, zsh_help(c.help));
    std::string specs;
    for (const api::Option& o : c.options) {
      if (o.reach == api::Reach::Python) continue;
      const std::string words = value_words(o);
      const std::string action = o.kind == api::Kind::Flag ? ""
                                 : !words.empty()          ? ":value:(" + words + ")"
                                 : numeric(o)              ? ":number: "
                                                           : ":value:_files";
      if (api::positional(o)) {
        specs +=
            fmt::format(" \\\n        '*:{}:{}'", api::option_name(o), words.empty() ? "_files" : "(" + words + ")");
        continue;
      }
      const std::string names = spellings(o), spec = "[" + zsh_help(o.help) + "]" + action;
      if (names.find(' ') == std::string::npos) {
        specs += " \\\n        '" + names + spec + "'";
      } else {
        std::string braces = names;
        for (char& ch : braces)
          if (ch == ' ') ch = ',';
        specs += " \\\n        '(" + names + ")'{" + braces + "}'" + spec + "'";
      }
    }
    cases += fmt::format("    {})\n      _arguments -s{};;\n", c.name, specs);
  }
  return fmt::format(R"(#compdef ppsim
# zsh completion for ppsim (ppsim --completion zsh; generated from src/api/options.cc)
_ppsim() {{
  local -a commands
  commands=(
{}  )
  if (( CURRENT == 2 )); then
    _describe 'command' commands
    return
  fi
  local cmd=$words[2]
  shift words
  (( CURRENT-- ))
  case $cmd in
{}  esac
}}
compdef _ppsim ppsim
)",
                     cmds, cases);
}

}  // namespace

std::string completion_script(const std::string& shell) {
  if (shell == "bash") return bash_script();
  if (shell == "zsh") return zsh_script();
  throw InputError(fmt::format("--completion: expected bash or zsh, got '{}'", shell),
                   closest_match(shell, {"bash", "zsh"}), kExitUsage);
}

nlohmann::json dump_options(const CLI::App& app) {
  static constexpr const char* kKinds[] = {"flag", "int", "int64", "real", "text", "texts", "ints"};
  static constexpr const char* kReach[] = {"both", "cli", "python"};
  nlohmann::json out = nlohmann::json::array();
  for (const api::CommandSpec& c : api::command_specs()) {
    nlohmann::json cmd = {{"name", c.name}, {"help", c.help}, {"python", c.py}, {"options", nlohmann::json::array()}};
    for (const api::Option& o : c.options)
      cmd["options"].push_back({{"names", o.names},
                                {"name", api::option_name(o)},
                                {"python", api::python_name(o)},
                                {"kind", kKinds[static_cast<int>(o.kind)]},
                                {"default", o.def},
                                {"unit", o.unit},
                                {"help", o.help},
                                {"reach", kReach[static_cast<int>(o.reach)]},
                                {"choices", o.choices},
                                {"required", o.required},
                                {"positional", api::positional(o)}});
    nlohmann::json cli = nlohmann::json::array();
    for (const CLI::Option* o : app.get_subcommand(std::string(c.name))->get_options()) {
      const std::string name = o->get_lnames().empty() ? o->get_name() : o->get_lnames().front();
      if (name == "help") continue;
      cli.push_back({{"name", name}, {"default", o->get_default_str()}, {"flag", o->get_expected_min() == 0}});
    }
    cmd["cli"] = std::move(cli);
    out.push_back(std::move(cmd));
  }
  return out;
}

}  // namespace ppsim::cli
