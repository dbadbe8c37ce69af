#include "cli/common.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/error.h"

namespace ppsim::cli {

double to_unit(Time t, const TimeScale& s) { return s.to_display(t); }

std::string fmt_time(Time t, const TimeScale& s) {
  if (t % s.ticks_per_unit == 0) return fmt::format("{}", t / s.ticks_per_unit);
  std::string out = fmt::format("{:.4f}", s.to_display(t));
  while (!out.empty() && out.back() == '0') out.pop_back();
  if (!out.empty() && out.back() == '.') out.pop_back();
  return out;
}

namespace {

// Writes `content` to a temporary name beside `path`; returns that name.
std::filesystem::path stage_output(const std::string& path, const std::string& content) {
  namespace fs = std::filesystem;
  const fs::path tmp = path + fmt::format(".tmp.{}", static_cast<long>(::getpid()));
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) throw InputError(SourceLoc{path, 0, 0}, "cannot open for writing", {}, kExitIo);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.flush();
  if (!out) {
    out.close();
    std::error_code ec;
    fs::remove(tmp, ec);
    throw InputError(SourceLoc{path, 0, 0}, "write failed", {}, kExitIo);
  }
  return tmp;
}

}  // namespace

void write_output(const std::string& path, const std::string& content) { write_outputs({{path, content}}); }

void write_outputs(const std::vector<std::pair<std::string, std::string>>& files) {
  namespace fs = std::filesystem;
  std::vector<std::pair<fs::path, std::string>> staged;  // (temporary, target)
  auto discard = [&staged] {
    std::error_code ec;
    for (const auto& [tmp, target] : staged) fs::remove(tmp, ec);
  };
  try {
    for (const auto& [path, content] : files)
      if (!path.empty() && path != "-") staged.emplace_back(stage_output(path, content), path);
  } catch (...) {
    discard();
    throw;
  }
  // A target that cannot take a file (a directory) fails before any rename; should a rename fail
  // all the same, the files this call created are removed again (ones it replaced stay replaced).
  auto fail = [&](const std::string& target) {
    discard();
    throw InputError(SourceLoc{target, 0, 0}, "cannot rename temporary file into place", {}, kExitIo);
  };
  std::vector<bool> existed;
  for (const auto& [tmp, target] : staged) {
    std::error_code ec;
    if (fs::is_directory(target, ec)) fail(target);
    existed.push_back(fs::exists(target, ec));
  }
  for (std::size_t i = 0; i < staged.size(); ++i) {
    std::error_code ec;
    fs::rename(staged[i].first, staged[i].second, ec);
    if (ec) {
      for (std::size_t j = 0; j < i; ++j)
        if (!existed[j]) fs::remove(staged[j].second, ec);
      staged.erase(staged.begin(), staged.begin() + static_cast<std::ptrdiff_t>(i));
      fail(staged.front().second);
    }
  }
  for (const auto& [path, content] : files) {
    if (!path.empty() && path != "-") continue;
    std::fwrite(content.data(), 1, content.size(), stdout);
    std::fflush(stdout);
  }
}

namespace {

// One table row as a CLI11 option writing into `v` under its Python keyword.
CLI::Option* add_row(CLI::App& sub, const api::Option& o, const std::shared_ptr<api::Values>& v) {
  const std::string key = api::python_name(o), names(o.names), help(o.help);
  auto put = [v, key](auto x) { v->set(key, std::move(x)); };
  switch (o.kind) {
    case api::Kind::Flag:
      return sub.add_flag_function(
          names, [put](std::int64_t n) { put(n > 0); }, help);
    case api::Kind::Int:
      return sub.add_option_function<int>(
          names, [put](int x) { put(static_cast<long long>(x)); }, help);
    case api::Kind::Int64:
      return sub.add_option_function<long long>(names, put, help);
    case api::Kind::Real:
      return sub.add_option_function<double>(names, put, help);
    case api::Kind::Text:
      return sub.add_option_function<std::string>(names, put, help);
    case api::Kind::Texts:
      return sub.add_option_function<std::vector<std::string>>(names, put, help);
    case api::Kind::Ints:
      return sub.add_option_function<std::vector<long long>>(names, put, help)->delimiter(',');
  }
  throw InternalError("unknown option kind");
}

}  // namespace

std::shared_ptr<api::Values> bind_options(CLI::App& sub, std::string_view command) {
  const api::CommandSpec& spec = api::command_spec(command);
  auto v = std::make_shared<api::Values>(spec);
  for (const api::Option& o : spec.options) {
    if (o.reach == api::Reach::Python) continue;
    CLI::Option* opt = add_row(sub, o, v);
    if (!o.def.empty() && o.kind != api::Kind::Flag) opt->default_str(std::string(o.def));
    if (o.strict) opt->check(CLI::IsMember(api::choice_list(o)));
    if (o.required) opt->required();
    if (o.positive) opt->check(CLI::PositiveNumber);
  }
  return v;
}

void print_notes(const api::Values& v) {
  for (const std::string& n : v.notes) std::fprintf(stderr, "ppsim: note: %s\n", printable(n).c_str());
  v.notes.clear();
}

bool stdout_taken(const std::vector<std::pair<std::string, std::string>>& files) {
  for (const auto& [path, content] : files)
    if (path == "-") return true;
  return false;
}

Format parse_format(const std::string& s, const std::vector<std::string>& allowed) {
  bool ok = false;
  for (const auto& a : allowed) ok |= a == s;
  if (!ok) {
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : "|") + a;
    throw InputError(fmt::format("--format: unknown format '{}' (one of {})", s, list), closest_match(s, allowed),
                     kExitUsage);
  }
  if (s == "json") return Format::Json;
  if (s == "csv") return Format::Csv;
  if (s == "text") return Format::Text;
  return Format::Table;
}

}  // namespace ppsim::cli
