// parallel_for (thread_pool.h): workers pull indices from an atomic counter; the calling thread
// only waits (and ticks the progress display), so `jobs` threads do all the work.
#include "core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

namespace ppsim {

int resolve_jobs(int jobs) {
  if (jobs > 0) return jobs;
  const unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(hc);
}

void parallel_for(std::size_t n, int jobs, const std::function<void(std::size_t)>& body,
                  const std::function<void()>& tick, int tick_ms) {
  if (n == 0) {
    if (tick) tick();
    return;
  }
  const std::size_t threads = std::min<std::size_t>(static_cast<std::size_t>(resolve_jobs(jobs)), n);
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::condition_variable cv;
  std::size_t running = threads;
  std::size_t error_index = std::numeric_limits<std::size_t>::max();
  std::exception_ptr error;

  auto worker = [&] {
    for (;;) {
      if (stop.load(std::memory_order_relaxed)) break;
      const std::size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= n) break;
      try {
        body(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (i < error_index) {
          error_index = i;
          error = std::current_exception();
        }
        stop.store(true, std::memory_order_relaxed);
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    --running;
    cv.notify_all();
  };

  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (std::size_t t = 0; t < threads; ++t) pool.emplace_back(worker);
  {
    std::unique_lock<std::mutex> lock(mu);
    while (running > 0) {
      cv.wait_for(lock, std::chrono::milliseconds(std::max(1, tick_ms)));
      if (tick && running > 0) {
        lock.unlock();
        tick();
        lock.lock();
      }
    }
  }
  for (auto& t : pool) t.join();
  if (tick) tick();
  if (error) std::rethrow_exception(error);
}

}  // namespace ppsim
