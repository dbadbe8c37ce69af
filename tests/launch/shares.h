// Test helpers shared by launch_test.cc and mpi_check.cc: a simulated timeline with transfers,
// and its split into per-process shares the way the replay records them (a process keeps its
// ranks, the start of each message it sends to another process, the end of each it receives).
#pragma once
#include <stdexcept>
#include <vector>

#include "launch/launch.h"
#include "sim/engine.h"

namespace ppsim::launch::test {

// `s` simulated with F=10, B=20, W=8, FB=26 ticks per chunk and a 3-tick link.
inline Timeline simulated(const Schedule& s) {
  SimCosts c = uniform_costs(s.stages_per_pipe, SliceCosts{10, 20, 8, 26}, TimeScale::millis());
  c.link.latency = 3;
  for (auto& sl : c.slice) sl.act_bytes = sl.grad_bytes = 4096;
  SimOptions opt;
  opt.record_timeline = true;
  return simulate(s, c, opt).timeline;
}

inline std::vector<TimelinePart> split(const Timeline& tl, const Schedule& s, int w) {
  std::vector<TimelinePart> parts(static_cast<std::size_t>(w));
  for (TimelinePart& p : parts) {
    p.local.pp = s.pp;
    p.local.activations.resize(static_cast<std::size_t>(s.pp));
  }
  for (int r = 0; r < s.pp; ++r) {
    TimelinePart& part = parts[static_cast<std::size_t>(process_of_rank(r, w))];
    part.ranks.push_back(r);
    part.local.activations[static_cast<std::size_t>(r)] = tl.activations[static_cast<std::size_t>(r)];
  }
  for (const Interval& iv : tl.intervals)
    parts[static_cast<std::size_t>(process_of_rank(iv.rank, w))].local.intervals.push_back(iv);
  for (const Transfer& t : tl.transfers) {
    const int ps = process_of_rank(t.src_rank, w), pd = process_of_rank(t.dst_rank, w);
    if (ps == pd) {
      parts[static_cast<std::size_t>(ps)].local.transfers.push_back(t);
      continue;
    }
    MsgKey key;
    if (!output_message(s, t.producer, key)) throw std::logic_error("a transfer whose producer sends nothing");
    parts[static_cast<std::size_t>(ps)].sends.push_back(SendHalf{key, t.src_rank, t.dst_rank, t.start, t.producer, t.bytes});
    parts[static_cast<std::size_t>(pd)].receives.push_back(RecvHalf{key, t.end});
  }
  return parts;
}

}  // namespace ppsim::launch::test
