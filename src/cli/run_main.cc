// The CLI's body (cli/run_main.h): builds the CLI from the command table, turns every error into
// one line and a documented exit code (docs/CLI.md). It returns, never exits, so that it can run
// in-process many times (fuzz/fuzz_cli.cc).
#include "cli/run_main.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "api/options.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/completion.h"
#include "core/error.h"
#include "ppsim_version.h"

namespace {

std::string unknown_flag_line(const CLI::App& app, const std::vector<std::string>& extras) {
  const std::string flag = extras.empty() ? std::string{} : extras.front();
  std::vector<std::string> names;
  const CLI::App* scope = &app;
  for (const CLI::App* sub : app.get_subcommands()) scope = sub;
  for (const CLI::Option* o : scope->get_options()) {
    for (const auto& l : o->get_lnames()) names.push_back("--" + l);
    for (const auto& s : o->get_snames()) names.push_back("-" + s);
  }
  std::string base = flag.substr(0, flag.find('='));
  std::string line = fmt::format("unknown argument '{}'", flag);
  if (auto s = ppsim::closest_match(base, names); !s.empty()) line += fmt::format(", did you mean '{}'?", s);
  return line;
}

}  // namespace

namespace ppsim::cli {

namespace {

// `ppsim --completion bash|zsh` and `ppsim --dump-options json`.
int print_generated(const CLI::App& app, std::string_view what, const std::string& arg) {
  try {
    if (what == "--completion") {
      write_output("-", completion_script(arg));
    } else {
      if (arg != "json") throw InputError(fmt::format("--dump-options: expected json, got '{}'", arg), {}, kExitUsage);
      write_output("-", dump_options(app).dump(2) + "\n");
    }
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "ppsim: %s\n", e.one_line().c_str());
    return e.exit_code();
  }
}

}  // namespace

int run_main(int argc, char** argv) {
  CLI::App app{"ppsim: simulate, compare, plan and validate pipeline-parallel training schedules", "ppsim"};
  app.set_version_flag("--version", std::string("ppsim ") + PPSIM_VERSION);
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, Runner>> runners;
  std::vector<std::string> names;
  app.footer("Shell completion: ppsim --completion bash|zsh. Every command's options: ppsim --dump-options json.");
  for (const auto& c : kCommands) {
    CLI::App* sub = app.add_subcommand(c.name, std::string(api::command_spec(c.name).help));
    sub->footer("");  // the top level's footer is about ppsim, not each command
    runners.emplace_back(sub, c.setup(*sub));
    names.emplace_back(c.name);
  }
  if (argc == 3 && (std::string_view(argv[1]) == "--completion" || std::string_view(argv[1]) == "--dump-options"))
    return print_generated(app, argv[1], argv[2]);
  // An unknown command gets its own line with a suggestion (CLI11 would list extras).
  if (argc > 1 && argv[1][0] != '-') {
    const std::string cmd = argv[1];
    bool known = false;
    for (const auto& n : names) known |= n == cmd;
    if (!known) {
      std::string line = fmt::format("ppsim: unknown command '{}'", cmd);
      if (auto s = closest_match(cmd, names); !s.empty()) line += fmt::format(", did you mean '{}'?", s);
      std::fprintf(stderr, "%s (see 'ppsim --help')\n", printable(line).c_str());
      return kExitUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ExtrasError& e) {
    // CLI11 says "The following argument(s) were not expected: --x ..."; keep the first.
    std::string what = e.what();
    std::vector<std::string> extras;
    if (auto pos = what.find(": "); pos != std::string::npos) {
      std::string rest = what.substr(pos + 2);
      extras.push_back(rest.substr(0, rest.find(' ')));
    }
    std::fprintf(stderr, "ppsim: %s\n", printable(unknown_flag_line(app, extras)).c_str());
    return kExitUsage;
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    for (auto& ch : msg)
      if (ch == '\n') ch = ' ';
    const std::string scope = app.get_subcommands().empty() ? "" : app.get_subcommands().front()->get_name() + " ";
    std::fprintf(stderr, "ppsim: %s (see 'ppsim %s--help')\n", printable(msg).c_str(), scope.c_str());
    return kExitUsage;
  }
  try {
    for (auto& [sub, run] : runners)
      if (sub->parsed()) return run();
    return kExitUsage;
  } catch (const InputError& e) {
    std::fprintf(stderr, "ppsim: %s\n", e.one_line().c_str());
    return e.exit_code();
  } catch (const InternalError& e) {
    std::fprintf(stderr, "ppsim: internal error: %s (please report this)\n", printable(e.what()).c_str());
    return kExitInternal;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "ppsim: out of memory (try a smaller request)\n");
    return kExitLimit;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ppsim: internal error: %s (please report this)\n", printable(e.what()).c_str());
    return kExitInternal;
  }
}

}  // namespace ppsim::cli
