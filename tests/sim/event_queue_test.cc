// The event queue against a plain model of it: one pending event per rank, a new one replacing
// the old, popped in (time, insertion sequence) order.
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "catch.h"
#include "sim/event_queue.h"

using namespace ppsim;

namespace {

// The model: per rank (time, sequence, kind) or none; pop takes the least (time, sequence).
struct Model {
  struct Pending { Time t; std::uint64_t seq; int kind; };
  std::map<int, Pending> pending;
  std::uint64_t seq = 0;
  void set(int r, Time t, int kind) { pending[r] = Pending{t, seq++, kind}; }
  bool pop(Event& e) {
    if (pending.empty()) return false;
    auto best = pending.begin();
    for (auto it = pending.begin(); it != pending.end(); ++it)
      if (it->second.t < best->second.t || (it->second.t == best->second.t && it->second.seq < best->second.seq)) best = it;
    e = Event{best->second.t, best->second.seq, best->second.kind, best->first};
    pending.erase(best);
    return true;
  }
};

}  // namespace

TEST_CASE("event queue: equal times pop in insertion order, a new event replaces the rank's old one", "[sim][queue]") {
  RankEventQueue q(3);
  q.set(2, 5, 0);
  q.set(0, 5, 1);
  q.set(1, 3, 0);
  q.set(1, 7, 1);  // replaces rank 1's event at 3
  REQUIRE(q.pending(1) == 7);
  Event e;
  REQUIRE(q.pop(e));
  CHECK((e.t == 5 && e.rank == 2 && e.kind == 0));
  CHECK(q.pending(2) == kNever);  // popped: nothing pending for that rank any more
  REQUIRE(q.pop(e));
  CHECK((e.t == 5 && e.rank == 0 && e.kind == 1));
  REQUIRE(q.pop(e));
  CHECK((e.t == 7 && e.rank == 1 && e.kind == 1));
  CHECK_FALSE(q.pop(e));
  CHECK(q.scheduled() == 4);
}

TEST_CASE("event queue: random sets and pops agree with the model", "[sim][queue]") {
  for (int ranks : {1, 2, 3, 5, 8, 13, 64, 100}) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(ranks) * 7919u);
    RankEventQueue q(ranks);
    Model m;
    Time now = 0;
    int pops = 0;
    for (int step = 0; step < 20000; ++step) {
      const auto roll = rng() % 10;
      if (roll < 6) {  // schedule at now or a little later (ties are common)
        const int r = static_cast<int>(rng() % static_cast<std::uint64_t>(ranks));
        const Time t = now + static_cast<Time>(rng() % 4);
        const int kind = static_cast<int>(rng() % 2);
        q.set(r, t, kind);
        m.set(r, t, kind);
      } else {
        Event a, b;
        const bool got = q.pop(a);
        REQUIRE(got == m.pop(b));
        if (!got) continue;
        ++pops;
        REQUIRE(a.t == b.t);
        REQUIRE(a.seq == b.seq);
        REQUIRE(a.rank == b.rank);
        REQUIRE(a.kind == b.kind);
        now = a.t;
      }
      for (int r = 0; r < ranks; ++r) {
        const auto it = m.pending.find(r);
        REQUIRE(q.pending(r) == (it == m.pending.end() ? kNever : it->second.t));
      }
    }
    CHECK(pops > 1000);
  }
}
