// `ppsim plan config.yaml`: search schedules and layouts for a config under its plan: section's
// constraints, rank them, compare what-if variants (docs/PLAN.md). `--shard i/n` evaluates a
// deterministic slice of the candidates and `--merge` combines shard files into the ranking an
// unsharded run prints.
//
// Not obvious: nothing timing-dependent reaches stdout or the output file (the progress bar
// goes to stderr, and only when stderr is a terminal), so two runs print the same bytes.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "api/plan.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "plan/plan_json.h"
#include "plan/plan_report.h"
#include "report/html.h"

namespace ppsim::cli {

namespace {

// A one-line progress bar on stderr, redrawn in place.
class Progress {
 public:
  Progress() : start_(std::chrono::steady_clock::now()) {}
  void operator()(std::uint64_t done, std::uint64_t total) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const int width = 30;
    const int filled = total ? static_cast<int>(static_cast<double>(done) / static_cast<double>(total) * width) : width;
    std::fprintf(stderr, "\rplan [%s%s] %llu/%llu candidates  %.1f s", std::string(static_cast<std::size_t>(filled), '#').c_str(),
                 std::string(static_cast<std::size_t>(width - filled), '.').c_str(), static_cast<unsigned long long>(done),
                 static_cast<unsigned long long>(total), s);
    std::fflush(stderr);
    drawn_ = true;
  }
  void finish() {
    if (drawn_) std::fprintf(stderr, "\r%80s\r", "");
  }

 private:
  std::chrono::steady_clock::time_point start_;
  bool drawn_ = false;
};

int run(const api::Values& a) {
  const Format f = parse_format(a.text("format"), {"table", "json", "csv"});
  api::PlanRequest req = api::plan_request(a);
  print_notes(a);
  Progress bar;
  if (::isatty(2)) req.progress = [&bar](std::uint64_t done, std::uint64_t total) { bar(done, total); };
  const PlanResult result = api::plan(req);
  bar.finish();
  std::string text;
  switch (f) {
    case Format::Json: text = render_plan_json(result); break;
    case Format::Csv: text = render_plan_csv(result); break;
    default: text = render_plan_table(result); break;
  }
  std::vector<std::pair<std::string, std::string>> files;
  if (const std::string html = a.text("html"); !html.empty())
    files.emplace_back(html, render_html(plan_html(plan_to_json(result))));
  files.emplace_back(a.text("output"), text);
  write_outputs(files);  // all of them or none
  return 0;
}

}  // namespace

Runner setup_plan(CLI::App& sub) {
  auto a = bind_options(sub, "plan");
  return [a]() { return run(*a); };
}

}  // namespace ppsim::cli
