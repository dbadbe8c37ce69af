// Planner throughput on the DeepSeek-V3 config (configs/deepseek-v3.yaml, 30,720 candidates):
// its own plan, then the same space with the memory and batch constraints lifted so that every
// candidate the schedules allow reaches the simulator (the worst case). Repeats each, prints
// min/median/max wall time and candidates/s. Target (docs/PERFORMANCE.md, "Planner"): >= 10,000
// candidates in < 10 s on 2 cores.
//
//   plan_bench [config.yaml] [--jobs N] [--reps R]   (default: every core, 3 repetitions)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "cost/cost_model.h"
#include "plan/planner.h"
#include "core/thread_pool.h"

using namespace ppsim;

namespace {

struct Stat {
  double min, median, max;
};

Stat stat(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return {t.front(), t[t.size() / 2], t.back()};
}

void bench(const char* label, const std::string& path, const std::vector<std::string>& sets, int jobs, int reps) {
  const ModelConfig cfg = load_config(path, sets);
  PlanOptions opt;
  opt.jobs = jobs;
  std::vector<double> wall;
  PlanResult r;
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    r = run_plan(cfg, opt);
    wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  const Stat s = stat(wall);
  std::uint64_t feasible = 0;
  for (const auto& v : r.variants) feasible += v.feasible.size();
  const PlanStats& k = r.stats;
  std::printf("%-26s jobs=%d candidates=%llu simulated=%llu (simulations %llu, configs %llu, schedules %llu) feasible=%llu\n", label,
              resolve_jobs(jobs), static_cast<unsigned long long>(k.candidates), static_cast<unsigned long long>(k.simulated),
              static_cast<unsigned long long>(k.simulations), static_cast<unsigned long long>(k.configs),
              static_cast<unsigned long long>(k.schedules), static_cast<unsigned long long>(feasible));
  std::printf("%-26s wall min %.3f s  median %.3f s  max %.3f s  -> %.0f candidates/s, %.0f simulated/s (median)   [target: >= 10,000 "
              "candidates in < 10 s]\n",
              "", s.min, s.median, s.max, static_cast<double>(k.candidates) / s.median, static_cast<double>(k.simulated) / s.median);
}

}  // namespace

int main(int argc, char** argv) {
  // CMake compiles with absolute source paths: the repository is two levels above this file.
  std::string path = (std::filesystem::path(__FILE__).parent_path().parent_path() / "configs" / "deepseek-v3.yaml").string();
  if (!std::filesystem::exists(path)) path = "configs/deepseek-v3.yaml";
  int jobs = 0, reps = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--jobs" && i + 1 < argc) jobs = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else path = a;
  }
  try {
    std::printf("ppsim planner benchmark: %s, %d threads\n", path.c_str(), resolve_jobs(jobs));
    bench("plan as configured", path, {}, jobs, reps);
    bench("every candidate simulated", path, {"plan.constraints={memory_gb: 100000}"}, jobs, reps);
  } catch (const InputError& e) {
    std::fprintf(stderr, "plan_bench: %s\n", e.one_line().c_str());
    return e.exit_code();
  }
  return 0;
}
