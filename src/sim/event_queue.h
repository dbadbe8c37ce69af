// The event queue. Events are ordered by (time, insertion sequence), so events at equal times
// run in the order they were scheduled and the same input gives the same trace.
//
// In the engine every pending event belongs to one rank, and a rank has at most one that matters:
// the end of its running action, or, while idle, the earliest time it should look at its next
// action again. So the queue holds one slot per rank, and scheduling an event for a rank replaces
// what that rank had pending (a later wake, superseded). The minimum over the slots is kept by a
// winner tree over the ranks that holds the keys themselves: updating a slot walks up its root
// path until a node's value does not change (one 128-bit compare per level), finding the minimum
// reads the root.
#pragma once
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/time.h"

namespace ppsim {

struct Event {
  Time t = 0;
  std::uint64_t seq = 0;
  std::int32_t kind = 0;
  std::int32_t rank = 0;
};

class RankEventQueue {
 public:
  static constexpr int kMaxRanks = 1 << 16;

  explicit RankEventQueue(int ranks) {
    PPSIM_CHECK(ranks >= 1 && ranks <= kMaxRanks, "event queue over {} ranks", ranks);
    while (n_ < ranks) n_ *= 2;
    key_.assign(2 * static_cast<std::size_t>(n_), kEmpty);
    kind_.assign(n_, 0);
  }

  // Schedules `kind` at time t for `rank`, replacing that rank's pending event, if any.
  void set(int rank, Time t, std::int32_t kind) {
    PPSIM_CHECK(t >= now_, "event at t={} scheduled at t={}", t, now_);
    PPSIM_CHECK(next_seq_ < (std::uint64_t{1} << 48), "{} events: the sequence no longer fits its 48 bits", next_seq_);
    kind_[rank] = kind;
    update(static_cast<std::size_t>(n_ + rank),
           (static_cast<Key>(static_cast<std::uint64_t>(t)) << 64) | (next_seq_++ << 16) | static_cast<std::uint64_t>(rank));
    if (rank == stale_) stale_ = -1;
  }
  // The pending event of `rank`, as its time (kNever when none).
  Time pending(int rank) const {
    const Key k = key_[static_cast<std::size_t>(n_ + rank)];
    return k == kEmpty ? kNever : static_cast<Time>(k >> 64);
  }

  // Takes the earliest event; false when none is left. Time never runs backwards.
  bool pop(Event& e) {
    if (stale_ >= 0) update(static_cast<std::size_t>(n_ + stale_), kEmpty);  // redo its path
    stale_ = -1;
    const Key k = key_[1];
    if (k == kEmpty) return false;
    e.t = static_cast<Time>(k >> 64);
    e.seq = static_cast<std::uint64_t>(k) >> 16;
    e.rank = static_cast<std::int32_t>(static_cast<std::uint64_t>(k) & 0xffff);
    e.kind = kind_[e.rank];
    now_ = e.t;
    // The slot empties at once (pending() reads it); its root path still holds this key, the
    // least of all, and is redone by set() for this rank, which usually follows at once, or by
    // the next pop. Updates of other slots meanwhile stop where they meet that path, whose
    // nodes keep this key, so they leave nothing stale that the redo does not cover.
    key_[static_cast<std::size_t>(n_ + e.rank)] = kEmpty;
    stale_ = e.rank;
    return true;
  }
  Time now() const { return now_; }
  std::uint64_t scheduled() const { return next_seq_; }

 private:
  // (time << 64) | (sequence << 16) | rank: unique, ordered as (time, sequence).
  using Key = unsigned __int128;
  static constexpr Key kEmpty = ~static_cast<Key>(0);

  // Node i (1 <= i < n) holds the least key of its two children; leaves are n + rank. A node
  // whose value does not change leaves everything above it as it was.
  void update(std::size_t i, Key k) {
    Key* key = key_.data();
    key[i] = k;
    while (i > 1) {
      const Key sib = key[i ^ 1];
      if (sib < k) k = sib;
      i >>= 1;
      if (key[i] == k) break;
      key[i] = k;
    }
  }

  int n_ = 1;               // leaves: a power of two >= ranks
  std::vector<Key> key_;    // the winner tree, 1-based; key_[n + rank] is rank's pending event
  std::vector<std::int32_t> kind_;
  int stale_ = -1;          // a rank whose popped slot is still to be emptied
  std::uint64_t next_seq_ = 0;
  Time now_ = 0;
};

}  // namespace ppsim
