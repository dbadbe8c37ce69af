// The event queue: a binary heap ordered by (time, insertion sequence), so that events at
// equal times run in the order they were scheduled and the same input gives the same trace.
#pragma once
#include <cstdint>
#include <queue>
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

class EventQueue {
 public:
  void push(Time t, std::int32_t kind, std::int32_t rank) { heap_.push(Event{t, next_seq_++, kind, rank}); }
  bool empty() const { return heap_.empty(); }
  // Pops the next event and checks that time never runs backwards.
  Event pop() {
    Event e = heap_.top();
    heap_.pop();
    PPSIM_CHECK(e.t >= now_, "event at t={} popped after t={}", e.t, now_);
    now_ = e.t;
    return e;
  }
  Time now() const { return now_; }
  std::uint64_t scheduled() const { return next_seq_; }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const { return a.t != b.t ? a.t > b.t : a.seq > b.seq; }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  std::uint64_t next_seq_ = 0;
  Time now_ = 0;
};

}  // namespace ppsim
