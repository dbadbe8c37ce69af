// PyTorch's pipelining runtime (torch.distributed.pipelining, _PipelineScheduleRuntime) for a
// compute order (parallel.p2p_runtime: torch, docs/CONFIG.md): the sends and receives as its
// lowering places them, each rank's run one at a time on one stream.
#pragma once
#include "core/schedule.h"

namespace ppsim {

// Returns `s` with its communication listed as PyTorch's `_add_send_recv` lowers a compute-only
// order (torch/distributed/pipelining/schedules.py): in rounds, each rank in rank order places its
// next compute action once its input is there (its receive already placed on this rank, or its
// producer placed here when both stages share the rank); after an action whose output crosses to
// another rank it places the send, and at that moment appends the matching receive to the
// consumer rank's list, however far behind that rank's own compute is. So receives are posted
// early. The FSDP-style actions PyTorch adds first (UNSHARD and RESHARD as a window of three
// stages moves, REDUCE_GRAD after a stage's last backward) take a round each and are listed as
// comm actions that take no time. The lists match PyTorch 2.11's own, action for action, for
// Interleaved1F1B (2 and 4 stages per rank), ZBVZeroBubble and DualPipeV at P = 4
// (tests/sim/engine_test.cc). The runtime issues each send and receive as its own
// batch_isend_irecv on the process group, whose point-to-point runs on one NCCL stream per rank in
// issue order (each waiting for the
// compute issued before it), and a compute action waits for its receive; sends are waited on only
// at the step's end (Schedule::comm_in_order). A receive posted before its data exists therefore
// holds every later send of its rank: measured on four H200s with PyTorch's Interleaved1F1B
// (docs/FIDELITY-MEASURED.md, "PyTorch's own pipelining runtime on four GPUs").
//
// For single-pipe schedules; an F&B pair is PyTorch's OVERLAP_F_B (placed once both of its ops'
// inputs are there, each op's send after it). InputError for two pipes (DualPipe, Chimera); an
// order that cannot be lowered (a rank's next action never gets its input) is an InputError
// naming the rank and action.
//
// An order of one stage per rank (stage r on rank r) that is Schedule1F1B's or ScheduleGPipe's
// runs through PyTorch's single-stage schedules instead, whose `_step_microbatches` issue the
// calls themselves: 1F1B fuses the last forward's send with the next backward's receive (and that
// backward's send with the next forward's receive) in one batch_isend_irecv, which the compute
// waits on whole, and waits on each warm-up send (cool-down send) before the compute action after
// the next; GPipe receives before and sends after each action, waiting on the forward sends
// before the first backward (CommAction::new_call, CommAction::waited_by). The batches per rank
// are the NCCL calls of PyTorch 2.11's own traces (tests/sim/engine_test.cc).
//
// `runtime` chooses: automatic (the single-stage schedules where the order is theirs, else the
// runtime), multi_stage (the runtime whatever the order: a trace whose actions carry PP: ranges
// ran there), single_stage (an InputError unless the order is Schedule1F1B's or ScheduleGPipe's).
enum class TorchRuntime { automatic, multi_stage, single_stage };
Schedule with_torch_p2p(Schedule s, TorchRuntime runtime = TorchRuntime::automatic);

}  // namespace ppsim
