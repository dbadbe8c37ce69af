// EpGroupSync, in one process and across the processes of a host (see ep_sync.h).
#include "launch/ep_sync.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"

namespace ppsim::launch {

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& hint) {
  throw InputError(fmt::format("{}\nhint: {}", what, hint), {}, kExitGpu);
}

[[noreturn]] void aborted(int rank) {
  fail(fmt::format("expert parallelism: aborted while EP rank {} waited for its peers' all-to-all begin", rank),
       "another rank failed first: see its message");
}

[[noreturn]] void timed_out(int rank, double timeout_s, int behind, unsigned long long epoch, std::size_t buffer) {
  fail(fmt::format("expert parallelism: EP rank {} waited {:.0f} s for EP rank {} to begin exchange {} of buffer {}",
                   rank, timeout_s, behind, epoch, buffer),
       "the EP group's chunks did not run the same exchanges in the same order");
}

}  // namespace

LocalEpGroupSync::LocalEpGroupSync(int ranks, std::size_t buffers)
    : begun_(static_cast<std::size_t>(ranks), std::vector<unsigned long long>(buffers, 0)) {}

void LocalEpGroupSync::begun(int rank, std::size_t buffer, unsigned long long epoch) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& b = begun_.at(static_cast<std::size_t>(rank)).at(buffer);
    b = std::max(b, epoch);
  }
  cv_.notify_all();
}

void LocalEpGroupSync::wait_all(int rank, std::size_t buffer, unsigned long long epoch, double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  int behind = -1;
  const bool met = cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] {
    if (aborted_) return true;
    for (std::size_t r = 0; r < begun_.size(); ++r)
      if (begun_[r].at(buffer) < epoch) {
        behind = static_cast<int>(r);
        return false;
      }
    return true;
  });
  if (aborted_) aborted(rank);
  if (!met) timed_out(rank, timeout_s, behind, epoch, buffer);
}

void LocalEpGroupSync::abort() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
  }
  cv_.notify_all();
}

SharedEpGroupSync::SharedEpGroupSync(std::shared_ptr<SharedFlags> flags, std::size_t base, int ranks,
                                     std::size_t buffers)
    : flags_(std::move(flags)), base_(base), ranks_(ranks), buffers_(buffers) {
  if (!flags_ || ranks < 1 || base + static_cast<std::size_t>(ranks) * buffers > flags_->size())
    throw InputError(fmt::format("EP group sync: {} ranks x {} buffers from word {} do not fit {} shared words", ranks,
                                 buffers, base, flags_ ? flags_->size() : 0),
                     {}, kExitInternal);
}

std::size_t SharedEpGroupSync::shared_words(const std::vector<std::size_t>& buffers_per_group, int ranks) {
  return shared_base(buffers_per_group, ranks, buffers_per_group.size());
}

std::size_t SharedEpGroupSync::shared_base(const std::vector<std::size_t>& buffers_per_group, int ranks,
                                           std::size_t group) {
  std::size_t base = 0;
  for (std::size_t g = 0; g < group && g < buffers_per_group.size(); ++g)
    base += static_cast<std::size_t>(ranks) * buffers_per_group[g];
  return base;
}

std::size_t SharedEpGroupSync::word(int rank, std::size_t buffer) const {
  if (rank < 0 || rank >= ranks_ || buffer >= buffers_)
    throw InputError(fmt::format("EP group sync: rank {} buffer {} outside {} x {}", rank, buffer, ranks_, buffers_),
                     {}, kExitInternal);
  return base_ + static_cast<std::size_t>(rank) * buffers_ + buffer;
}

void SharedEpGroupSync::begun(int rank, std::size_t buffer, unsigned long long epoch) {
  // Only this rank's thread writes its words, and its epochs of a buffer only grow.
  const std::size_t w = word(rank, buffer);
  if (flags_->load(w) < epoch) flags_->store(w, epoch);
}

void SharedEpGroupSync::wait_all(int rank, std::size_t buffer, unsigned long long epoch, double timeout_s) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  for (int r = 0; r < ranks_; ++r) {
    const std::size_t w = word(r, buffer);
    // Spin a little (a peer in another process is usually a few microseconds behind), then sleep
    // between looks so that waiting threads leave the host's cores to the ones enqueueing.
    for (int spins = 0; flags_->load(w) < epoch; ++spins) {
      if (flags_->load(flags_->abort_word()) != 0) aborted(rank);
      if (spins < 2000) {
        std::this_thread::yield();
        continue;
      }
      if (std::chrono::duration<double>(clock::now() - t0).count() > timeout_s)
        timed_out(rank, timeout_s, r, epoch, buffer);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  if (flags_->load(flags_->abort_word()) != 0) aborted(rank);
}

void SharedEpGroupSync::abort() { flags_->store(flags_->abort_word(), 1); }

}  // namespace ppsim::launch
