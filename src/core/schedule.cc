#include "core/schedule.h"

namespace ppsim {

std::string format_comm(const CommAction& c) {
  static const char* const kNames[] = {"SEND_F", "RECV_F", "SEND_B", "RECV_B", "UNSHARD", "RESHARD", "REDUCE_GRAD"};
  std::string out = std::to_string(c.stage) + kNames[static_cast<int>(c.kind)];
  if (c.microbatch >= 0) out += std::to_string(c.microbatch);
  return out;
}

std::size_t Schedule::num_ops() const {
  std::size_t n = 0;
  for (const auto& r : ranks)
    for (const auto& a : r) n += static_cast<std::size_t>(a.size());
  return n;
}

void layout_linear(Schedule& s, int pp, int v) {
  s.pp = pp;
  s.num_pipes = 1;
  s.stages_per_pipe = v * pp;
  s.chunks_per_rank = v;
  s.stage_rank.resize(static_cast<std::size_t>(v * pp));
  s.slice.resize(s.stage_rank.size());
  for (int st = 0; st < v * pp; ++st) {
    s.stage_rank[st] = st % pp;
    s.slice[st] = st;
  }
  s.ranks.assign(static_cast<std::size_t>(pp), {});
}

void layout_v_shape(Schedule& s, int pp) {
  s.pp = pp;
  s.num_pipes = 1;
  s.stages_per_pipe = 2 * pp;
  s.chunks_per_rank = 2;
  s.stage_rank.resize(static_cast<std::size_t>(2 * pp));
  s.slice.resize(s.stage_rank.size());
  for (int st = 0; st < 2 * pp; ++st) {
    s.stage_rank[st] = st < pp ? st : 2 * pp - 1 - st;
    s.slice[st] = st;
  }
  s.ranks.assign(static_cast<std::size_t>(pp), {});
}

void layout_bidirectional(Schedule& s, int pp) {
  s.pp = pp;
  s.num_pipes = 2;
  s.stages_per_pipe = pp;
  s.chunks_per_rank = 1;
  s.stage_rank.resize(static_cast<std::size_t>(2 * pp));
  s.slice.resize(s.stage_rank.size());
  for (int st = 0; st < pp; ++st) {
    s.stage_rank[st] = st;
    s.slice[st] = st;
    s.stage_rank[pp + st] = pp - 1 - st;
    s.slice[pp + st] = st;
  }
  s.ranks.assign(static_cast<std::size_t>(pp), {});
}

}  // namespace ppsim
