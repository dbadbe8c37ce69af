// Generate + validate throughput: how many ops per second make_schedule (a family's generator,
// then the validator) turns out, on one core. The schedule search checks every candidate it
// simulates, so this must keep pace with the simulator (target >= 10 M ops/s, issue 21).
// Also times validate_schedule alone on the same schedule, to split the two costs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "schedules/registry.h"
#include "schedules/validator.h"

using namespace ppsim;

namespace {

struct Stat {
  double min, median, max;
};

template <class F>
Stat time_it(int reps, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return {t.front(), t[t.size() / 2], t.back()};
}

void bench(const char* family, int p, int m, int reps) {
  std::size_t ops = 0;
  const Stat gen = time_it(reps, [&] { ops = make_schedule(family, ScheduleParams{p, m, 0, 0}).num_ops(); });
  const Schedule s = make_schedule(family, ScheduleParams{p, m, 0, 0});
  const Stat val = time_it(reps, [&] { validate_schedule(s); });
  std::printf(
      "%-18s P=%-4d M=%-5d ops=%8zu  generate+validate min %.4f s median %.4f s max %.4f s -> %5.1f M ops/s best,"
      " %5.1f median   [validate alone %.4f s -> %5.1f M ops/s]\n",
      family, p, m, ops, gen.min, gen.median, gen.max, ops / gen.min / 1e6, ops / gen.median / 1e6, val.min,
      ops / val.min / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5) {  // one case: schedule_bench <family> <P> <M> <reps> (for profilers)
    bench(argv[1], std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]));
    return 0;
  }
  std::printf("ppsim generate+validate benchmark (one core; target >= 10 M ops/s)\n");
  bench("1f1b", 32, 1024, 7);
  bench("1f1b", 128, 4096, 3);
  bench("zb-h2", 32, 1024, 7);
  bench("zb-v", 32, 1024, 7);
  bench("interleaved-1f1b", 32, 1024, 7);
  bench("dualpipe", 64, 1024, 5);
  bench("dualpipev", 32, 1024, 7);
  bench("chimera", 32, 1024, 7);
  return 0;
}
