// Run under mpiexec (CTest: mpi_check, 3 processes): MPI starts from the launcher's environment,
// the collectives the replay uses move the right bytes, and a Timeline measured in shares (each
// process holding the ranks r % 3 == its rank, as the replay deals them) merges into the whole
// on every process. Exit code 0 when all holds; each failure prints one line.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "launch/launch.h"
#include "launch/mpi.h"
#include "schedules/registry.h"
#include "shares.h"

using namespace ppsim;

namespace {
int failures = 0;
void expect(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "mpi_check process %d: FAILED: %s\n", mpi::world().rank, what.c_str());
  ++failures;
}
}  // namespace

int main(int argc, char** argv) {
  const int want = argc > 1 ? std::atoi(argv[1]) : 0;
  try {
    const mpi::World& w = mpi::init_if_launched();
    expect(mpi::built_with_mpi(), "built with MPI");
    expect(w.active, "MPI started (launcher '" + w.launcher + "')");
    expect(w.size == want, "world size " + std::to_string(w.size) + " == " + std::to_string(want));
    expect(w.rank >= 0 && w.rank < w.size, "rank in range");
    expect(w.local_size == w.size, "all processes on this node");
    expect(w.local_rank == w.rank, "local rank = rank on one node");

    unsigned char id[128];
    for (int i = 0; i < 128; ++i) id[i] = static_cast<unsigned char>(w.rank == 0 ? (7 * i + 3) & 0xff : 0);
    mpi::bcast(id, sizeof id, 0);
    bool same = true;
    for (int i = 0; i < 128; ++i) same = same && id[i] == static_cast<unsigned char>((7 * i + 3) & 0xff);
    expect(same, "bcast delivers process 0's bytes");

    const auto all = mpi::allgather(std::string(static_cast<std::size_t>(w.rank) + 1, static_cast<char>('a' + w.rank)));
    expect(static_cast<int>(all.size()) == w.size, "allgather: one string per process");
    for (int p = 0; p < static_cast<int>(all.size()); ++p)
      expect(all[static_cast<std::size_t>(p)] == std::string(static_cast<std::size_t>(p) + 1, static_cast<char>('a' + p)),
             "allgather: process " + std::to_string(p) + "'s string in its place");
    expect(mpi::any_of(w.rank == w.size - 1), "any_of: true when one process says so");
    expect(!mpi::any_of(false), "any_of: false when none does");

    // A simulated DualPipe timeline, measured in shares: this process keeps its ranks, the
    // transfers it sends (their start) and receives (their end); every process's share merges.
    const Schedule s = make_schedule("dualpipe", ScheduleParams{4, 8, 0, 0});
    const Timeline whole = launch::test::simulated(s);
    const launch::TimelinePart part = launch::test::split(whole, s, w.size).at(static_cast<std::size_t>(w.rank));
    const Timeline merged = launch::merge_parts(mpi::allgather(launch::encode_part(part, s)), s);
    expect(merged.end == whole.end, "merged makespan");
    expect(merged.intervals.size() == whole.intervals.size(), "merged intervals");
    expect(merged.transfers.size() == whole.transfers.size(), "merged transfers");
  } catch (const InputError& e) {
    std::fprintf(stderr, "mpi_check: %s\n", e.one_line().c_str());
    return 1;
  }
  if (failures == 0 && mpi::world().rank == 0) std::printf("mpi_check: ok (%d processes)\n", mpi::world().size);
  return failures == 0 ? 0 : 1;
}
