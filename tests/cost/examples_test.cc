// Every example config in configs/ loads, and simulates with at least one schedule family,
// giving a positive step time and memory for every rank.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "catch.h"
#include "cost/config.h"
#include "cost/cost_model.h"
#include "schedules/registry.h"
#include "sim/engine.h"

using namespace ppsim;

TEST_CASE("every config in configs/ loads and simulates", "[cost]") {
  const std::filesystem::path dir = std::filesystem::path(PPSIM_SOURCE_DIR) / "configs";
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 6);
  for (const auto& path : files) {
    INFO(path.string());
    const ModelConfig cfg = load_config(path.string(), {});
    int pp = 0, m = 0, v = 0;
    apply_config_parallel(cfg, pp, m, v);
    const std::string list = config_schedules(cfg);
    int simulated = 0;
    for (const Family& fam : families()) {
      if (list != "all" && list.find(fam.name) == std::string::npos) continue;
      Schedule s;
      try {
        s = make_schedule(fam.name, resolve_params(fam, ScheduleParams{pp, m, v, 0}));
      } catch (const InputError&) {
        continue;  // the family's constraints (e.g. M mod P) do not hold for this config
      }
      SimCosts costs;
      try {
        costs = derive_costs(cfg, s);
      } catch (const InputError& e) {
        INFO(fam.name << ": " << e.message());
        continue;  // the layer split does not fit this layout
      }
      const SimResult r = simulate(s, costs);
      const PhysicalResult p = physical_result(cfg, s, r);
      CHECK(p.step_time_s > 0);
      CHECK(p.tokens_per_second > 0);
      CHECK(p.mfu > 0);
      CHECK(p.mfu < 1);
      REQUIRE(static_cast<int>(p.peak_memory_bytes.size()) == s.pp);
      for (double b : p.peak_memory_bytes) CHECK(b > 0);
      ++simulated;
    }
    CHECK(simulated >= 3);
  }
}

TEST_CASE("the what-if example keeps its plan variants", "[cost]") {
  const ModelConfig cfg = load_config(std::string(PPSIM_SOURCE_DIR) + "/configs/whatif-h800-vs-h100.yaml", {});
  REQUIRE(cfg.data->plan.IsMap());
  CHECK(cfg.data->plan["whatif"]["h100"]["hardware.nvlink_gbps"].as<int>() == 900);
}
