// Megatron-LM's point-to-point runtime for its two pipeline schedules (parallel.p2p_runtime:
// megatron, docs/CONFIG.md): the stage-to-stage transfers as the explicit, blocking calls its code
// makes (megatron/core/pipeline_parallel/schedules.py with the default batch_p2p_comm: one
// batch_isend_irecv per call, then a wait on all of it).
#pragma once
#include "core/schedule.h"

namespace ppsim {

// Returns `s` (family 1f1b or interleaved-1f1b, as Megatron orders them) with its communication
// listed as Megatron's calls: a rank's actions are cut into steps (each action alone; with several
// chunks per rank, a steady-state F followed by its B is one step, as forward_backward_pipelining_
// with_interleaving computes both before one send_forward_backward_recv_forward_backward). Between
// two steps one call sends what the step before produced and receives what the step after needs;
// the rank waits until every transfer of the call has arrived (Schedule::comm_waits), and a
// transfer starts when both of its ranks have posted it (the engine's explicit communication). So
// a receiver posts its receive when it reaches the call, not when its input is produced, and a
// sender waits for its receiver. InputError for other families.
//
// Non-interleaved 1F1B follows forward_backward_pipelining_without_interleaving call for call:
// its warm-up's send_forward and the next recv_forward are two calls (and the cool-down's
// recv_backward and send_backward), each posted when the one before has completed
// (CommAction::new_call). Both loops are checked against an independent implementation run on
// GPUs: tools/experiments/megatron_plan.py and tools/experiments/measure_megatron_runtime.py
// (docs/FIDELITY-MEASURED.md, "Interleaved 1F1B against 1F1B on four GPUs").
Schedule with_megatron_p2p(Schedule s);

}  // namespace ppsim
