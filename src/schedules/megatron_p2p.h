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
// One simplification against Megatron's code: its non-interleaved 1F1B makes the warm-up's
// send_forward and the next recv_forward two calls (and the cool-down's send_backward and
// recv_backward), where this puts each such pair in one call (P=4, M=8: ranks 1 and 2 make 21 and
// 19 calls in Megatron, 17 here). The interleaved calls are Megatron's, call for call. Measured:
// tools/measure_megatron_runtime.py replays Megatron's own loops on four GPUs (docs/FIDELITY.md,
// "Interleaved 1F1B against 1F1B on four GPUs").
Schedule with_megatron_p2p(Schedule s);

}  // namespace ppsim
