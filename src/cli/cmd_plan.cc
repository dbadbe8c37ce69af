// `ppsim plan config.yaml`: search schedules and layouts for a config under its plan: section's
// constraints, rank them, compare what-if variants (docs/PLAN.md). `--shard i/n` evaluates a
// deterministic slice of the candidates and `--merge` combines shard files into the ranking an
// unsharded run prints.
//
// Not obvious: nothing timing-dependent reaches stdout or the output file (the progress bar
// goes to stderr, and only when stderr is a terminal), so two runs print the same bytes.
#include <chrono>
#include <cstdio>
#include <unistd.h>

#include <fmt/format.h>

#include "api/plan.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/megatron_flag.h"
#include "plan/plan_json.h"
#include "plan/plan_report.h"
#include "report/html.h"

namespace ppsim::cli {

namespace {

struct PlanArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string calibration;
  std::string megatron_args;
  std::vector<std::string> merge;
  std::string format = "table";
  std::string output = "-";
  std::string shard;
  std::string html;
  int top = 0;
  int jobs = 0;
  long long max_ops = 0;
};

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

int run(const PlanArgs& a) {
  const Format f = parse_format(a.format, {"table", "json", "csv"});
  api::PlanRequest req;
  req.config = a.config;
  req.sets = a.sets;
  add_calibration_set(a.calibration, req.sets);
  add_megatron_set(a.megatron_args, req.sets);
  req.merge = a.merge;
  req.shard = a.shard;
  req.top = a.top;
  req.jobs = a.jobs;
  req.max_ops = a.max_ops;
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
  if (!a.html.empty()) files.emplace_back(a.html, render_html(plan_html(plan_to_json(result))));
  files.emplace_back(a.output, text);
  write_outputs(files);  // all of them or none
  return 0;
}

}  // namespace

Runner setup_plan(CLI::App& sub) {
  auto a = std::make_shared<PlanArgs>();
  sub.add_option("config", a->config, "YAML config with a plan: section");
  sub.add_option("--set", a->sets, "override a config key: key.path=value (repeatable)");
  add_calibration_option(sub, a->calibration);
  sub.add_option("--megatron-args", a->megatron_args, "model, parallelism and batch from a Megatron-LM argument list");
  sub.add_option("--format", a->format, "table, json or csv")->capture_default_str();
  sub.add_option("--output,-o", a->output, "write the report to this file");
  sub.add_option("--html", a->html, "write a self-contained HTML report: ranked plans and what ruled candidates out");
  sub.add_option("--top", a->top, "plans to list per variant (default: plan.top_k, else 10)");
  sub.add_option("--jobs,-j", a->jobs, "threads (default: every core)");
  sub.add_option("--shard", a->shard, "evaluate only candidates with id % n == i (i/n); write --format json for --merge");
  sub.add_option("--merge", a->merge, "merge shard JSON files into the full ranking");
  sub.add_option("--max-ops", a->max_ops, "refuse schedules that would generate more ops (default 2e8)");
  return [a]() { return run(*a); };
}

}  // namespace ppsim::cli
