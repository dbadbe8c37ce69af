#include "cli/common.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <unistd.h>

#include <fmt/format.h>

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

void add_overlap_options(CLI::App& sub, api::UnitCosts& u) {
  sub.add_option("--a2a", u.a2a, "overlap model: time of one layer's all-to-all dispatch (and of its combine)");
  sub.add_option("--layers", u.layers, "overlap model: layers in one rank's share")->capture_default_str();
  sub.add_option("--attn-share", u.attn_share, "overlap model: share of F/b/W that is attention")->capture_default_str();
  sub.add_option("--comm-sms", u.comm_sms, "overlap model: SMs reserved for communication")->capture_default_str();
  sub.add_option("--sms", u.sms, "overlap model: SMs per GPU")->capture_default_str();
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
  sub.add_option("--csv-dialect", o.csv_dialect,
                 "PyTorch CSV dialect of an imported file: auto, current (torch >= 2.6: I, W, B full), 2.5 (B input-grad "
                 "beside W, BW full)")
      ->capture_default_str();
  sub.add_flag("--drop-comm", o.drop_comm,
               "ignore an imported file's SEND/RECV actions (each transfer then starts when its producer ends)");
  sub.add_option("--max-ops", o.max_ops, "refuse requests that would generate more ops (default 2e8)");
}

api::ScheduleChoice to_choice(const ScheduleOptions& o) {
  api::ScheduleChoice c;
  if (o.pp != ScheduleOptions::kUnset) c.pp = o.pp;
  if (o.microbatches != ScheduleOptions::kUnset) c.microbatches = o.microbatches;
  c.vpp = o.vpp;
  c.group_size = o.group_size;
  c.schedule_file = o.schedule_file;
  c.layout = o.layout;
  c.csv_dialect = o.csv_dialect;
  c.keep_comm = !o.drop_comm;
  c.max_ops = o.max_ops;
  return c;
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
