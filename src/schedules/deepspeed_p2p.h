// DeepSpeed's pipeline engine runtime for its one training schedule (parallel.p2p_runtime:
// deepspeed, docs/CONFIG.md): the stage-to-stage transfers as TrainSchedule's instructions
// (deepspeed/runtime/pipe/schedule.py), each a blocking send or receive of its own
// (deepspeed/runtime/pipe/p2p.py: dist.send / dist.recv, or a two-rank broadcast in older
// releases, waited on before the next instruction).
#pragma once
#include "core/schedule.h"

namespace ppsim {

// Returns `s` (family 1f1b, one pipe, one chunk per rank) with its communication listed as
// TrainSchedule's instructions. Each stage alternates a forward step and a backward step,
// 2 (M + P - 1) steps in all, a step's micro-batch out of range leaving it without compute. A
// forward step first sends the gradient of the previous step's backward (SendGrad) and then
// receives its own input (RecvActivation); a backward step first receives its output-grad
// (RecvGrad) and then sends the output of the previous step's forward (SendActivation). So a
// stage's F output leaves only at its next backward step, after that step's gradient has arrived.
// Each instruction is one call: it is posted when the one before it has completed, and the rank
// starts nothing until it has (Schedule::comm_waits, CommAction::new_call). The compute order is
// 1F1B's (P - s forwards before stage s's first backward); InputError for another family, and
// InternalError if the schedule's actions are not in that order.
Schedule with_deepspeed_p2p(Schedule s);

}  // namespace ppsim
