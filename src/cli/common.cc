#include "cli/common.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <unistd.h>

#include <fmt/format.h>

#include "core/error.h"

namespace ppsim::cli {

namespace {
std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Time parse_amount(const std::string& text, const std::string& what, const std::string& flag) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || !std::isfinite(v))
    throw InputError(fmt::format("{}: {} must be a number, got '{}'", flag, what, text), {}, kExitUsage);
  if (v < 0) throw InputError(fmt::format("{}: {} must be >= 0, got {}", flag, what, text), {}, kExitUsage);
  if (v > 1e9) throw InputError(fmt::format("{}: {} = {} is too large (at most 1e9 units)", flag, what, text), {}, kExitUsage);
  return static_cast<Time>(std::llround(v * static_cast<double>(kTicksPerUnit)));
}
}  // namespace

UniformTimes parse_times(const std::string& spec, const std::string& flag) {
  UniformTimes t;
  bool have_f = false, have_b = false, have_fb = false;
  std::size_t pos = 0;
  while (pos <= spec.size()) {
    std::size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) {
      if (comma == spec.size()) break;
      continue;
    }
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw InputError(fmt::format("{}: expected KEY=VALUE, got '{}' (keys: F, B, W, FB)", flag, item), {}, kExitUsage);
    const std::string key = lower(item.substr(0, eq));
    const Time v = parse_amount(item.substr(eq + 1), item.substr(0, eq), flag);
    if (key == "f") { t.f = v; have_f = true; }
    else if (key == "b") { t.b = v; have_b = true; }
    else if (key == "w") t.w = v;
    else if (key == "fb" || key == "f&b") { t.fb = v; have_fb = true; }
    else {
      auto s = closest_match(key, {"f", "b", "w", "fb"});
      for (auto& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      throw InputError(fmt::format("{}: unknown time '{}' (keys: F, B, W, FB)", flag, item.substr(0, eq)), s, kExitUsage);
    }
  }
  if (!have_f || !have_b) throw InputError(fmt::format("{}: F and B are required, got '{}'", flag, spec), {}, kExitUsage);
  if (t.w > t.b) throw InputError(fmt::format("{}: W is part of the full backward B, so W <= B is needed, got W > B", flag), {}, kExitUsage);
  if (t.f + t.b == 0) throw InputError(fmt::format("{}: F + B must be > 0", flag), {}, kExitUsage);
  if (!have_fb) t.fb = t.f + t.b;
  return t;
}

SliceCosts to_slice(const UniformTimes& t) {
  SliceCosts c;
  c.f = t.f;
  c.b = t.b;
  c.w = t.w;
  c.fb = t.fb;
  return c;
}

SliceCosts chunk_costs(const UniformTimes& share, int v) {
  SliceCosts c = to_slice(share);
  c.f /= v;
  c.b /= v;
  c.w /= v;
  c.fb /= v;
  return c;
}

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

void add_schedule_options(CLI::App& sub, ScheduleOptions& o, bool with_family_counts) {
  if (with_family_counts) {
    // kUnset marks "not given"; the one int equal to it is refused here as the out-of-range value
    // it is, so that it can never pass for an absent flag.
    auto count_option = [&sub](const char* names, const char* flag, const char* what, int& target, const char* help) {
      sub.add_option_function<int>(
          names,
          [flag, what, &target](int v) {
            if (v == ScheduleOptions::kUnset) throw CLI::ValidationError(flag, fmt::format("{} must be >= 1, got {}", what, v));
            target = v;
          },
          help);
    };
    count_option("--pp,-p", "--pp", "P", o.pp, "pipeline ranks P (default 8, or the config's parallel.pp)");
    count_option("--microbatches,-m", "--microbatches", "M", o.microbatches,
                 "micro-batches M per step (default 20, or the config's)");
  }
  sub.add_option("--vpp", o.vpp, "chunks per rank for interleaved-1f1b (default 2)");
  sub.add_option("--group-size", o.group_size, "interleaved-1f1b micro-batch group G (default P)");
  sub.add_option("--schedule-file", o.schedule_file, "import a schedule from PyTorch's compute-only CSV");
  sub.add_option("--layout", o.layout, "stage layout of an imported file: auto, linear, v, bidirectional")
      ->capture_default_str();
  sub.add_option("--max-ops", o.max_ops, "refuse requests that would generate more ops (default 2e8)");
}

void apply_limits(const ScheduleOptions& o) {
  if (o.max_ops < 0) throw InputError(fmt::format("--max-ops: expected a count >= 1, got {}", o.max_ops), {}, kExitUsage);
  if (o.max_ops > 0) limits().max_ops = o.max_ops;
}

ScheduleParams params_for(const Family& fam, const ScheduleOptions& o) {
  ScheduleParams p;
  p.pp = o.pp != ScheduleOptions::kUnset ? o.pp : ScheduleOptions::kDefaultPp;
  p.microbatches = o.microbatches != ScheduleOptions::kUnset ? o.microbatches : ScheduleOptions::kDefaultMicrobatches;
  p.vpp = o.vpp;
  p.group_size = o.group_size;
  return resolve_params(fam, p);
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
