// libFuzzer target: bytes -> the YAML config loader (load_config_text) and, when a config loads,
// the cost model for the schedules it names: derive_costs, a simulation and physical_result.
// InputError is the expected outcome; anything else escaping (InternalError, a yaml-cpp
// exception, bad_alloc), a sanitizer report, a crash or a hang is a bug (docs/ROBUSTNESS.md).
//
// Input: YAML text, then optionally NUL-separated --set assignments ("key.path=value"), which
// go through apply_set like `ppsim compare --set`.
//
// Not obvious: inputs that mention "profile" and hold '/' or a backslash (a YAML escape can
// spell '/') are skipped, so that `profile:` can only name a file in the working directory (a
// FIFO or /dev/stdin elsewhere would block); tools/fuzz.sh runs each target in a fresh temp dir
// and puts a valid profile.yaml there. And the harness lowers the op limit, so that one input
// costs milliseconds, not the seconds a legal 2e8-op request takes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "cost/cost_model.h"
#include "schedules/registry.h"
#include "sim/engine.h"

namespace {

constexpr long long kFuzzMaxOps = 20'000;

// The families parallel.schedule names ("all", one name, or a comma-separated list).
std::vector<std::string> named_families(const std::string& list) {
  std::vector<std::string> out;
  if (list == "all" || list.empty()) {
    for (const auto& f : ppsim::families()) out.push_back(f.name);
    return out;
  }
  std::size_t pos = 0;
  while (pos <= list.size()) {
    std::size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    std::string name = list.substr(pos, comma - pos);
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (!name.empty()) out.push_back(name);
    pos = comma + 1;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ppsim;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  if (bytes.find("profile") != std::string::npos && bytes.find_first_of("/\\") != std::string::npos)
    return -1;  // keep profile paths inside the cwd
  std::vector<std::string> parts;
  for (std::size_t pos = 0; pos <= bytes.size();) {
    std::size_t nul = bytes.find('\0', pos);
    if (nul == std::string::npos) nul = bytes.size();
    parts.push_back(bytes.substr(pos, nul - pos));
    pos = nul + 1;
  }
  const std::string text = parts.front();
  const std::vector<std::string> sets(parts.begin() + 1, parts.end());

  limits() = Limits{};
  limits().max_ops = kFuzzMaxOps;
  ModelConfig cfg;
  try {
    cfg = load_config_text(text, "fuzz.yaml", sets);
  } catch (const InputError&) {
    return 0;
  }
  int pp = 0, m = 0, v = 0;
  apply_config_parallel(cfg, pp, m, v);
  for (const std::string& name : named_families(config_schedules(cfg))) {
    try {
      const Family& fam = find_family(name);
      const Schedule s = make_schedule(fam.name, resolve_params(fam, ScheduleParams{pp, m, v, 0}));
      const SimCosts costs = derive_costs(cfg, s);
      const SimResult r = simulate(s, costs);
      (void)physical_result(cfg, s, r);
    } catch (const InputError&) {
      // refused: constraints, limits, derived times out of range
    }
  }
  return 0;
}
