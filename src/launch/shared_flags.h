// SharedFlags: an array of 64-bit words in POSIX shared memory that the processes of one host map
// together. The IPC transport uses one word per cross-process message: the producer stores the
// iteration's number into it (release) after enqueueing the copy and recording the message's
// interprocess CUDA event; the consumer loads it (acquire) to learn that the event it is about to
// wait on belongs to this iteration. One more word, abort_word(), says that some process gave up.
// Not obvious: cudaStreamWaitEvent on an event that was not yet recorded waits for nothing, so the
// consumer must learn that the record happened before it waits; these words carry exactly that and
// nothing else (the data and its ordering stay on the GPUs).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ppsim::launch {

class SharedFlags {
 public:
  // A name no other live job uses (this process's id and a counter), for the creator to broadcast.
  static std::string unique_name();
  // create: make the segment (zeroed) under `name`; else open the one another process made.
  // Throws InputError(kExitGpu) with the system's reason when that fails.
  SharedFlags(const std::string& name, std::size_t words, bool create);
  ~SharedFlags();
  SharedFlags(const SharedFlags&) = delete;
  SharedFlags& operator=(const SharedFlags&) = delete;

  // Removes the name (the mapping stays valid): call once every process has opened it, so that
  // nothing is left behind in /dev/shm however the job ends.
  void unlink();
  std::size_t size() const { return words_; }
  void store(std::size_t i, std::uint64_t v) { at(i).store(v, std::memory_order_release); }
  std::uint64_t load(std::size_t i) const { return at(i).load(std::memory_order_acquire); }
  // The extra word after the `words` message words.
  std::size_t abort_word() const { return words_; }

 private:
  std::atomic<std::uint64_t>& at(std::size_t i) const;
  std::string name_;
  std::size_t words_ = 0;
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  bool owner_ = false;
};

}  // namespace ppsim::launch
