// EpGroupSync: the host side of an EP group's all-to-all exchanges, each shard's chunk driven by
// its own thread (in this process or another one of the host). After enqueuing an exchange's
// begin, a shard's thread says so (begun) and waits until every shard of the group has begun the
// same exchange (wait_all), and only then enqueues the end, which spins on the GPU until every
// peer's begin has run. A GPU then never spins on a begin its host has not yet enqueued: with the
// threads also waiting for messages (the transport) and for their own GPU (a pooled set), such a
// spin could close a cycle and hold until the GPU-side timeout (the EP replay's failures of
// sessions 5-7). Exchanges are named by (buffer, epoch): the chunk's receive buffer and how many
// exchanges it has carried, the same count on every shard.
//
// Two implementations behind one interface, so that the chunk does not care which:
//   LocalEpGroupSync   one process: a mutex and a condition variable
//   SharedEpGroupSync  processes of one host: one word per (shard, buffer) in shared memory
//                      (launch::SharedFlags) holding the last epoch that shard began, polled;
//                      the SharedFlags' abort word wakes every waiter of every process
// Both bound every wait (it throws one line naming the shard behind) and wake on abort().
#pragma once
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "launch/shared_flags.h"

namespace ppsim::launch {

class EpGroupSync {
 public:
  virtual ~EpGroupSync() = default;
  virtual void begun(int rank, std::size_t buffer, unsigned long long epoch) = 0;
  // Until every rank has begun `epoch` of `buffer` (or a later one); throws InputError(kExitGpu)
  // after `timeout_s` or once aborted.
  virtual void wait_all(int rank, std::size_t buffer, unsigned long long epoch, double timeout_s) = 0;
  virtual void abort() = 0;  // wakes every waiter, which then throws
};

class LocalEpGroupSync final : public EpGroupSync {
 public:
  LocalEpGroupSync(int ranks, std::size_t buffers);
  void begun(int rank, std::size_t buffer, unsigned long long epoch) override;
  void wait_all(int rank, std::size_t buffer, unsigned long long epoch, double timeout_s) override;
  void abort() override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::vector<unsigned long long>> begun_;  // [rank][buffer]: last epoch begun
  bool aborted_ = false;
};

class SharedEpGroupSync final : public EpGroupSync {
 public:
  // The group's words are flags[base + rank * buffers + buffer] (every process maps the same
  // segment and computes the same base for the group: shared_words() lays groups out in order).
  SharedEpGroupSync(std::shared_ptr<SharedFlags> flags, std::size_t base, int ranks, std::size_t buffers);
  // Words for groups of `ranks` shards with buffers_per_group[g] buffers each, one after another;
  // group g starts at shared_base(buffers_per_group, ranks, g).
  static std::size_t shared_words(const std::vector<std::size_t>& buffers_per_group, int ranks);
  static std::size_t shared_base(const std::vector<std::size_t>& buffers_per_group, int ranks, std::size_t group);
  void begun(int rank, std::size_t buffer, unsigned long long epoch) override;
  void wait_all(int rank, std::size_t buffer, unsigned long long epoch, double timeout_s) override;
  void abort() override;

 private:
  std::size_t word(int rank, std::size_t buffer) const;
  std::shared_ptr<SharedFlags> flags_;
  std::size_t base_;
  int ranks_;
  std::size_t buffers_;
};

}  // namespace ppsim::launch
