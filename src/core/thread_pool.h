// A fixed set of std::threads that run `body(i)` for i in [0, n), each index exactly once,
// workers taking the next index from one atomic counter.
//
// Not obvious: the order in which indices run depends on the thread count and on timing, so a
// caller that needs identical results for any --jobs writes each result to its own slot (index
// i) and never appends. The first exception a worker throws stops the others from taking new
// indices; the one with the lowest index is rethrown on the calling thread after all joined.
#pragma once
#include <cstddef>
#include <functional>

namespace ppsim {

// Threads to use for `jobs` (0: std::thread::hardware_concurrency(), at least 1).
int resolve_jobs(int jobs);

// Runs body(0..n-1) on min(jobs, n) threads. `tick`, when given, is called on the calling thread
// about every `tick_ms` while the workers run, and once at the end.
void parallel_for(std::size_t n, int jobs, const std::function<void(std::size_t)>& body,
                  const std::function<void()>& tick = {}, int tick_ms = 100);

}  // namespace ppsim
