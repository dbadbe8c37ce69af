// A schedule is data: for each rank, the ordered list of actions it runs.
//
// Stages are numbered as in PyTorch's notation. A schedule has `num_pipes` pipes (1, or 2 for
// DualPipe and Chimera), each a chain of `stages_per_pipe` stages; pipe p owns stages
// [p*S, (p+1)*S). Data flows stage s -> s+1 inside a pipe, gradients back. Micro-batches are
// numbered from 0 within each pipe, so a pipe carries microbatches / num_pipes of them.
// `stage_rank[s]` says which rank holds stage s; `slice[s]` which slice of the model's layers
// it computes (the reverse pipe of DualPipe computes the same slices as the forward pipe, in
// reverse rank order), so that costs are given per slice.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/op.h"

namespace ppsim {

// A communication action of PyTorch's notation (`3SEND_F7`, `1RECV_B2`, `0UNSHARD`): imported
// schedules may list them between the compute actions. `after` counts the compute actions of
// its rank listed before it. SEND/RECV make the stage-to-stage transfer start no earlier than
// both are posted (the engine's explicit communication); the FSDP kinds are kept for export only.
enum class CommKind : std::uint8_t { SendF, RecvF, SendB, RecvB, Unshard, Reshard, ReduceGrad };
struct CommAction {
  CommKind kind = CommKind::SendF;
  std::int32_t stage = 0;
  std::int32_t microbatch = -1;  // -1 for UNSHARD, RESHARD, REDUCE_GRAD
  std::size_t after = 0;
  // With Schedule::comm_waits: this action opens a new blocking call, posted only once the call
  // before it (at the same position) has completed (Megatron's 1F1B warm-up sends, then
  // receives, in two calls). With Schedule::comm_in_order: it opens a new batch on the rank's
  // stream. False: it joins the call (batch) of the action before it at its position (PyTorch's
  // Schedule1F1B fuses a send with a receive in one batch_isend_irecv: both start together, and
  // what follows on the stream waits for both).
  bool new_call = false;
  // With Schedule::comm_in_order: the compute action (its index in the rank's list) that starts
  // only once this action's transfer has arrived, as PyTorch's single-stage schedules wait on a
  // send's work (kNotWaited: none; a receive holds its consumer through the data anyway).
  static constexpr std::size_t kNotWaited = static_cast<std::size_t>(-1);
  std::size_t waited_by = kNotWaited;
};
std::string format_comm(const CommAction& c);

struct Schedule {
  std::string family;          // registry name, or "file" for an imported schedule
  int pp = 0;                  // ranks
  int microbatches = 0;        // total across pipes
  int num_pipes = 1;
  int stages_per_pipe = 0;     // S
  int chunks_per_rank = 1;     // stages a rank holds per pipe (v for interleaved/V schedules)
  int parameter_copies = 1;    // copies of a rank's share of the weights (2 for DualPipe, Chimera)
  std::vector<int> stage_rank; // size num_pipes * S
  std::vector<int> slice;      // size num_pipes * S; model slice (0..S-1) a stage computes
  std::vector<std::vector<Action>> ranks;
  // Imported files only: per rank, the communication actions listed (empty: transfers are
  // implicit, each issued when its producer ends), and the CSV dialect the file was read in.
  std::vector<std::vector<CommAction>> comm;
  std::string dialect;
  // The comm actions a rank lists at one position are one blocking call: the rank starts nothing
  // more until all of their transfers have arrived (Megatron-LM's batched p2p and its wait;
  // schedules/megatron_p2p.h). False: posting never holds the rank back.
  bool comm_waits = false;
  // A rank's comm actions run one batch at a time in list order, as on one stream: a batch is
  // posted only once every compute action listed before it has ended and the batch before it has
  // completed (its transfers arrived). PyTorch's pipelining runtime issues every send and receive
  // of a rank on its process group's one NCCL stream (schedules/torch_p2p.h).
  bool comm_in_order = false;

  int num_stages() const { return num_pipes * stages_per_pipe; }
  int mb_per_pipe() const { return microbatches / num_pipes; }
  int pipe_of(int stage) const { return stage / stages_per_pipe; }
  bool is_first_stage(int stage) const { return stage % stages_per_pipe == 0; }
  bool is_last_stage(int stage) const { return stage % stages_per_pipe == stages_per_pipe - 1; }
  std::size_t num_ops() const;
};

// Fills stage_rank/slice for the common layouts.
//   linear:      S = v*P stages, stage s on rank s % P (GPipe, 1F1B, ZB-H1/H2, interleaved).
//   v_shape:     S = 2P stages, stage s on rank s (s < P) or 2P-1-s (ZB-V, DualPipeV).
//   bidirectional: 2 pipes of S = P; forward pipe stage s on rank s, reverse pipe stage P+s on
//                rank P-1-s, computing slice s (DualPipe, Chimera).
void layout_linear(Schedule& s, int pp, int v);
void layout_v_shape(Schedule& s, int pp);
void layout_bidirectional(Schedule& s, int pp);

}  // namespace ppsim
