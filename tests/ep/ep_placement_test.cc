// Where a replay's EP shards run (one process, or processes of one host), the rule that refuses
// --a2a nccl where an EP group's shards share a GPU, the all-to-all's names, and the receive
// slab's offsets (one allocation per chunk: what a peer process maps through one IPC handle).
// Placements and offsets worked by hand in the comments.
#include "ep/ep_placement.h"

#include "catch.h"
#include "core/error.h"
#include "ep/ep_plan.h"

using namespace ppsim;
using namespace ppsim::ep;

TEST_CASE("EP placement in one process: slot r * ep + e on GPU slot % GPUs", "[ep]") {
  // PP x EP = 2 x 2 on 2 GPUs: slots 0..3 on GPUs 0, 1, 0, 1 - shard e of both ranks on GPU e.
  const EpPlacement two = place_in_process(2, 2, 2);
  CHECK(two.gpu == std::vector<int>{0, 1, 0, 1});
  CHECK(two.process == std::vector<int>{0, 0, 0, 0});
  CHECK_FALSE(two.across_processes);
  CHECK(two.gpu_of(1, 0) == 0);
  CHECK(two.gpu_of(1, 1) == 1);
  // 8 GPUs visible for 4 slots: only 4 are used, one slot each.
  CHECK(place_in_process(2, 2, 8).gpu == std::vector<int>{0, 1, 2, 3});
  // One GPU: every slot on it.
  CHECK(place_in_process(2, 2, 1).gpu == std::vector<int>{0, 0, 0, 0});
  // 3 GPUs cannot hold 4 slots evenly: refused as make_ep_layout refuses.
  CHECK_THROWS_AS(place_in_process(2, 2, 3), InputError);
  // ep 1 (dense): rank r on GPU r % GPUs, also unevenly.
  CHECK(place_in_process(3, 1, 2).gpu == std::vector<int>{0, 1, 0});
}

TEST_CASE("EP placement across processes: slot r * ep + e in process slot % processes, on its GPU", "[ep]") {
  // 2 processes on GPUs 0 and 1, PP x EP = 2 x 2: slots 0 (r0 e0), 2 (r1 e0) in process 0;
  // 1 (r0 e1), 3 (r1 e1) in process 1: each process one shard of every stage.
  const EpPlacement p = place_across_processes(2, 2, {0, 1});
  CHECK(p.across_processes);
  CHECK(p.process == std::vector<int>{0, 1, 0, 1});
  CHECK(p.gpu == std::vector<int>{0, 1, 0, 1});
  CHECK(p.process_of(1, 0) == 0);
  CHECK(p.process_of(1, 1) == 1);
  // Two processes sharing GPU 0 (PPSIM_ALLOW_SHARED_GPU=1 on a one-GPU host).
  CHECK(place_across_processes(2, 2, {0, 0}).gpu == std::vector<int>{0, 0, 0, 0});
  // 4 processes: one slot each; process 2 holds rank 1's shard 0.
  const EpPlacement four = place_across_processes(2, 2, {0, 1, 2, 3});
  CHECK(four.process == std::vector<int>{0, 1, 2, 3});
  CHECK(four.gpu_of(1, 0) == 2);
  // Dense (ep 1): process r % processes, as launch::process_of_rank deals ranks.
  CHECK(place_across_processes(4, 1, {0, 1}).process == std::vector<int>{0, 1, 0, 1});
  CHECK_THROWS_AS(place_across_processes(2, 2, {}), InputError);
}

TEST_CASE("nccl_a2a_problem: --a2a nccl is refused where an EP group's shards share a GPU, with what works", "[ep]") {
  // Distinct GPUs per group: NCCL can carry it.
  CHECK(nccl_a2a_problem(place_in_process(2, 2, 2)).empty());
  CHECK(nccl_a2a_problem(place_in_process(2, 2, 4)).empty());
  CHECK(nccl_a2a_problem(place_across_processes(2, 2, {0, 1})).empty());
  // One GPU with virtual ranks: shards 0 and 1 of rank 0 both on GPU 0.
  CHECK(nccl_a2a_problem(place_in_process(2, 2, 1)) ==
        "--a2a nccl: EP shards 0 and 1 of pipeline rank 0 would share GPU 0, and NCCL cannot put two ranks of one "
        "communicator on one GPU: use --a2a ours, or at least ep (2) GPUs");
  // Two processes sharing one GPU.
  CHECK(nccl_a2a_problem(place_across_processes(2, 2, {0, 0})) ==
        "--a2a nccl: EP shards 0 and 1 of pipeline rank 0 would share GPU 0 (processes 0 and 1), and NCCL cannot put "
        "two ranks of one communicator on one GPU: use --a2a ours, or at least ep (2) GPUs, one process each");
  // ep 4 on 2 GPUs: shards 0 and 2 of rank 0 meet on GPU 0.
  CHECK(nccl_a2a_problem(place_in_process(1, 4, 2)).find("shards 0 and 2 of pipeline rank 0 would share GPU 0") !=
        std::string::npos);
  // ep 1: no group, nothing to refuse.
  CHECK(nccl_a2a_problem(place_in_process(4, 1, 1)).empty());
}

TEST_CASE("a2a backend names parse; a wrong one is refused with the choices, exit 2", "[ep]") {
  CHECK(parse_a2a_backend("ours") == A2aBackend::ours);
  CHECK(parse_a2a_backend("nccl") == A2aBackend::nccl);
  CHECK(std::string(a2a_backend_name(A2aBackend::nccl)) == "nccl");
  try {
    parse_a2a_backend("ncl");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.exit_code() == kExitUsage);
    CHECK(e.one_line() == "unknown all-to-all 'ncl': choose ours or nccl, did you mean 'nccl'?");
  }
}

TEST_CASE("EP receive slab: every buffer's rows, then counts, then flags, each padded to 256 bytes", "[ep]") {
  // ep 2, 8 experts, capacity 32, hidden 128: rows E*C = 256 of 256 bytes = 65536 (a multiple of
  // 256); counts ep * E/ep = 8 ints = 32 bytes -> 256; flags ep * 160 blocks * 8 = 2560 (= 10 * 256).
  const EpGeometry g{2, 8, 2, 128, 32, 128};
  const EpSlabLayout l = plan_slab(g, 160, 3);
  CHECK(l.rows_stride == 65536u);
  CHECK(l.counts_stride == 256u);
  CHECK(l.flags_stride == 2560u);
  CHECK(l.rows_offset(0) == 0u);
  CHECK(l.rows_offset(2) == 2u * 65536u);
  CHECK(l.rows_region() == 3u * 65536u);
  CHECK(l.counts_offset(0) == 3u * 65536u);
  CHECK(l.counts_offset(1) == 3u * 65536u + 256u);
  CHECK(l.flags_offset(0) == 3u * 65536u + 3u * 256u);
  CHECK(l.flags_offset(2) == 3u * 65536u + 3u * 256u + 2u * 2560u);
  CHECK(l.total_bytes() == 3u * (65536u + 256u + 2560u));
  // Odd sizes are padded: hidden 8 (16-byte rows), capacity 16, 4 experts, ep 4: rows 64 * 16 =
  // 1024; counts 4 * 1 ints = 16 -> 256; flags 4 * 3 * 8 = 96 -> 256.
  const EpSlabLayout s = plan_slab(EpGeometry{4, 4, 1, 16, 16, 8}, 3, 2);
  CHECK(s.rows_stride == 1024u);
  CHECK(s.counts_stride == 256u);
  CHECK(s.flags_stride == 256u);
  CHECK(s.total_bytes() == 2u * (1024u + 256u + 256u));
  // Every part starts 256-byte aligned (16-byte vector stores, 8-byte flags).
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t off : {l.rows_offset(i), l.counts_offset(i), l.flags_offset(i)}) CHECK(off % 256 == 0);
}
