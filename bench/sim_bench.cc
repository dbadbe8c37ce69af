// Simulator throughput: DualPipe P=64, M=1024 and 1F1B P=128, M=4096 (the cases), plus
// a sweep over M to show time is linear in the number of ops. Repeats each case, prints
// min/median/max wall time and ops simulated per second (target: >= 10 million on one core).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "schedules/registry.h"
#include "sim/engine.h"

using namespace ppsim;

namespace {

struct Stat {
  double min, median, max;
};

Stat time_it(const Schedule& s, const SimCosts& c, int reps, std::uint64_t& ops) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    const SimResult r = simulate(s, c);
    const auto b = std::chrono::steady_clock::now();
    ops = r.ops;
    t.push_back(std::chrono::duration<double>(b - a).count());
  }
  std::sort(t.begin(), t.end());
  return {t.front(), t[t.size() / 2], t.back()};
}

void bench(const char* family, int p, int m, int reps, Time latency = 0) {
  const auto g0 = std::chrono::steady_clock::now();
  const Schedule s = make_schedule(family, ScheduleParams{p, m, 0, 0});
  const double gen = std::chrono::duration<double>(std::chrono::steady_clock::now() - g0).count();
  SliceCosts sc;
  sc.f = kTicksPerUnit;
  sc.b = 2 * kTicksPerUnit;
  sc.w = kTicksPerUnit;
  sc.fb = 3 * kTicksPerUnit;
  SimCosts c = uniform_costs(s.stages_per_pipe, sc);
  c.link.latency = latency;
  std::uint64_t ops = 0;
  const Stat st = time_it(s, c, reps, ops);
  std::printf("%-10s P=%-4d M=%-5d lat=%-3s ops=%9llu  sim min %.4f s  median %.4f s  max %.4f s  -> %5.1f M ops/s best, %5.1f median"
              "   [generate+validate %.3f s]\n",
              family, p, m, latency ? "0.1" : "0", static_cast<unsigned long long>(ops), st.min, st.median, st.max, ops / st.min / 1e6,
              ops / st.median / 1e6, gen);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 || argc == 6) {  // one case: sim_bench <family> <P> <M> <reps> [lat] (for profilers)
    bench(argv[1], std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]), argc == 6 ? kTicksPerUnit / 10 : 0);
    return 0;
  }
  std::printf("ppsim simulator benchmark (one core; target >= 10 M ops/s, time linear in ops)\n");
  bench("dualpipe", 64, 1024, 5);
  bench("1f1b", 128, 4096, 5);
  std::printf("-- with a stage-to-stage latency of 0.1 (every transfer becomes an event):\n");
  bench("dualpipe", 64, 1024, 5, kTicksPerUnit / 10);
  bench("1f1b", 128, 4096, 5, kTicksPerUnit / 10);
  std::printf("-- growth with M (1f1b, P=64):\n");
  for (int m : {512, 1024, 2048, 4096, 8192}) bench("1f1b", 64, m, 3);
  std::printf("-- growth with M (dualpipe, P=32):\n");
  for (int m : {256, 512, 1024, 2048}) bench("dualpipe", 32, m, 3);
  return 0;
}
