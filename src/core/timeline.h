// The Timeline: what happened when, per rank and stream. The simulator produces one, and so
// does the GPU replay, so that every report and comparison works on both.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/op.h"
#include "core/time.h"

namespace ppsim {

enum class Stream : std::uint8_t { Compute = 0, Comm = 1 };

// Which part of an action an interval covers. Whole = the action as one block (the only part
// in the basic model); the others are the MoE sub-ops of the overlap model.
enum class Part : std::uint8_t {
  Whole = 0,
  Attn,      // attention (+ norms, projections); forward or input-grad
  Mlp,       // MLP / experts; forward or input-grad
  AttnW,     // attention weight-grad
  MlpW,      // MLP weight-grad
  Dispatch,  // all-to-all dispatch (forward) or its backward
  Combine,   // all-to-all combine (forward) or its backward
};
const char* part_name(Part p);

struct Interval {
  std::int32_t rank = 0;
  Stream stream = Stream::Compute;
  Part part = Part::Whole;
  std::int8_t op_index = -1;  // -1: the whole action; 0/1: which op of the action this part is
  Time start = 0;
  Time end = 0;
  Action action;
  Time duration() const { return end - start; }
};

// A point-to-point transfer of activations (after an F) or gradients (after a backward).
struct Transfer {
  std::int32_t src_rank = 0;
  std::int32_t dst_rank = 0;
  Time start = 0;   // when the link began carrying it
  Time end = 0;     // when it arrived
  Op producer;      // the op whose output travels
  Bytes bytes = 0;
};

struct MemSample {
  Time t = 0;
  std::int32_t activations = 0;  // live activations after this instant, in chunk-microbatches
};

// One stream of an action as measured: busy from start to end, of which the `comm` intervals ran
// communication (an all-to-all's kernels) and the rest computed.
struct StreamSpan {
  Time start = 0, end = 0;
  std::vector<std::pair<Time, Time>> comm;
};
// Exposed communication of one action: how long some stream communicated while no stream of the
// action computed, i.e. the measure of (union of comm) minus (union over streams of its busy span
// less its comm). One stream: all of its communication; two (an F&B pair): where both
// communicated at once, or one communicated while the other had ended.
Time exposed_communication(const std::vector<StreamSpan>& streams);

struct Timeline {
  int pp = 0;
  TimeScale scale;
  std::vector<Interval> intervals;                 // in start order per rank
  std::vector<Transfer> transfers;
  std::vector<std::vector<MemSample>> activations; // per rank, one sample per change
  Time start = 0;
  Time end = 0;
};

}  // namespace ppsim
