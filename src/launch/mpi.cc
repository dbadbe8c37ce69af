// MPI wrapper (see mpi.h). Compiled with PPSIM_HAVE_MPI=1 when CMake found MPI.
#include "launch/mpi.h"

#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "launch/launch.h"

#ifdef PPSIM_HAVE_MPI
#include <mpi.h>
#endif

namespace ppsim::mpi {

namespace {
World g_world;
bool g_started = false;

#ifdef PPSIM_HAVE_MPI
void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw InputError(fmt::format("MPI: {} failed: {}", what, text), {}, kExitGpu);
}
int as_count(std::size_t n) {
  if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw InputError("MPI: a message over 2 GiB", {}, kExitLimit);
  return static_cast<int>(n);
}
#endif
}  // namespace

bool built_with_mpi() {
#ifdef PPSIM_HAVE_MPI
  return true;
#else
  return false;
#endif
}

const World& world() { return g_world; }

const World& init_if_launched() {
  if (g_started) return g_world;
  g_started = true;
  const launch::LaunchEnv env = launch::detect_launch();
  g_world.launcher = env.launcher;
  if (env.launcher.empty()) return g_world;
#ifdef PPSIM_HAVE_MPI
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  });
  if (provided < MPI_THREAD_SERIALIZED)
    throw InputError("MPI: this MPI library cannot be called from more than one thread (MPI_THREAD_SERIALIZED)", {}, kExitGpu);
  g_world.active = true;
  check(MPI_Comm_rank(MPI_COMM_WORLD, &g_world.rank), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &g_world.size), "MPI_Comm_size");
  MPI_Comm node = MPI_COMM_NULL;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_world.rank, MPI_INFO_NULL, &node),
        "MPI_Comm_split_type");
  check(MPI_Comm_rank(node, &g_world.local_rank), "MPI_Comm_rank");
  check(MPI_Comm_size(node, &g_world.local_size), "MPI_Comm_size");
  MPI_Comm_free(&node);
#else
  if (const std::string why = launch::launch_problem(env, false); !why.empty())
    throw InputError(why + ": install OpenMPI (libopenmpi-dev) and rebuild, or run one ppsim process (it uses every "
                           "visible GPU)",
                     {}, kExitUsage);
#endif
  return g_world;
}

void barrier() {
#ifdef PPSIM_HAVE_MPI
  if (g_world.active) check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
#endif
}

void bcast(void* data, std::size_t bytes, int root) {
#ifdef PPSIM_HAVE_MPI
  if (g_world.active) check(MPI_Bcast(data, as_count(bytes), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
#else
  (void)data, (void)bytes, (void)root;
#endif
}

std::vector<std::string> allgather(const std::string& mine) {
#ifdef PPSIM_HAVE_MPI
  if (g_world.active && g_world.size > 1) {
    const int n = g_world.size;
    int len = as_count(mine.size());
    std::vector<int> lens(static_cast<std::size_t>(n)), offs(static_cast<std::size_t>(n));
    check(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
    std::size_t total = 0;
    for (int i = 0; i < n; ++i) {
      offs[static_cast<std::size_t>(i)] = as_count(total);
      total += static_cast<std::size_t>(lens[static_cast<std::size_t>(i)]);
    }
    std::string all(total, '\0');
    check(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR, MPI_COMM_WORLD),
          "MPI_Allgatherv");
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i)
      out.push_back(all.substr(static_cast<std::size_t>(offs[static_cast<std::size_t>(i)]),
                               static_cast<std::size_t>(lens[static_cast<std::size_t>(i)])));
    return out;
  }
#endif
  return {mine};
}

bool any_of(bool mine) {
#ifdef PPSIM_HAVE_MPI
  if (g_world.active && g_world.size > 1) {
    int in = mine ? 1 : 0, out = 0;
    check(MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
    return out != 0;
  }
#endif
  return mine;
}

void abort_job(int code) {
#ifdef PPSIM_HAVE_MPI
  if (g_world.active && g_world.size > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::_Exit(code);
}

}  // namespace ppsim::mpi
