// The host handshake of an EP group (launch/ep_sync.h), in one process and across processes
// (shared memory, a forked child standing in for the peer process); the EP exports' text form
// (launch/ep_exchange.h); when expert parallelism may run across processes. No GPU needed.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "catch.h"
#include "core/error.h"
#include "launch/ep_exchange.h"
#include "launch/ep_sync.h"
#include "launch/launch.h"

using namespace ppsim;
using namespace ppsim::launch;

namespace {

// A rank's wait for an exchange returns once every rank has begun it (its epoch or a later one),
// times out naming the rank behind, and wakes with an error when aborted: the contract both
// implementations keep. `peer` begins from another thread (or process) after 50 ms.
void check_contract(EpGroupSync& g, const std::function<void(int, std::size_t, unsigned long long)>& peer_begins_later) {
  g.begun(0, 3, 1);
  peer_begins_later(1, 3, 2);  // a later epoch counts too
  const auto t0 = std::chrono::steady_clock::now();
  g.wait_all(0, 3, 1, 5.0);
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(40));
  // Buffer 2: rank 1 never began epoch 1.
  g.begun(0, 2, 1);
  try {
    g.wait_all(0, 2, 1, 0.05);
    FAIL("no timeout");
  } catch (const InputError& e) {
    CHECK(e.exit_code() == kExitGpu);
    CHECK(e.message().find("EP rank 0 waited 0 s for EP rank 1 to begin exchange 1 of buffer 2") != std::string::npos);
  }
}

}  // namespace

TEST_CASE("LocalEpGroupSync: a rank waits for every peer's begin, names the one behind, wakes on abort", "[launch][ep]") {
  LocalEpGroupSync g(2, 4);
  std::thread peer;
  check_contract(g, [&](int rank, std::size_t buffer, unsigned long long epoch) {
    peer = std::thread([&g, rank, buffer, epoch] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      g.begun(rank, buffer, epoch);
    });
  });
  peer.join();
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    g.abort();
  });
  const auto t1 = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(g.wait_all(1, 0, 7, 10.0), InputError);
  aborter.join();
  CHECK(std::chrono::steady_clock::now() - t1 < std::chrono::seconds(5));
}

TEST_CASE("SharedEpGroupSync: the same handshake across processes through shared memory", "[launch][ep]") {
  // Two groups (stages) of 2 ranks with 4 and 3 buffers: group 0 at words 0..7, group 1 at 8..13.
  const std::vector<std::size_t> buffers{4, 3};
  CHECK(SharedEpGroupSync::shared_words(buffers, 2) == 14u);
  CHECK(SharedEpGroupSync::shared_base(buffers, 2, 1) == 8u);
  const std::string name = SharedFlags::unique_name();
  auto flags = std::make_shared<SharedFlags>(name, SharedEpGroupSync::shared_words(buffers, 2), true);
  SharedEpGroupSync g(flags, 0, 2, 4);
  SharedEpGroupSync g1(flags, 8, 2, 3);
  // Rank 1 of group 0 lives in a child process: it begins exchange 2 of buffer 3 after 50 ms.
  pid_t child = -1;
  check_contract(g, [&](int rank, std::size_t buffer, unsigned long long epoch) {
    child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      SharedFlags mine(name, SharedEpGroupSync::shared_words(buffers, 2), false);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      mine.store(static_cast<std::size_t>(rank) * 4 + buffer, epoch);  // word 0 + rank * 4 + buffer
      ::_exit(0);
    }
  });
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  // The groups' words are apart: group 1 rank 1 buffer 2 is word 8 + 1 * 3 + 2 = 13.
  g1.begun(1, 2, 5);
  CHECK(flags->load(13) == 5u);
  g1.begun(1, 2, 4);  // never back
  CHECK(flags->load(13) == 5u);
  CHECK_THROWS_AS(g1.begun(2, 0, 1), InputError);  // no rank 2
  CHECK_THROWS_AS(SharedEpGroupSync(flags, 10, 2, 3), InputError);  // 10 + 6 words > 14
  // Abort from another process: the waiter here wakes at once, and every group sees it.
  child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    SharedFlags mine(name, SharedEpGroupSync::shared_words(buffers, 2), false);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    mine.store(mine.abort_word(), 1);
    ::_exit(0);
  }
  const auto t1 = std::chrono::steady_clock::now();
  try {
    g.wait_all(1, 0, 7, 10.0);
    FAIL("no abort");
  } catch (const InputError& e) {
    CHECK(e.message().find("aborted while EP rank 1 waited") != std::string::npos);
  }
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(std::chrono::steady_clock::now() - t1 < std::chrono::seconds(5));
  CHECK_THROWS_AS(g1.wait_all(0, 0, 1, 10.0), InputError);
  flags->unlink();
}

TEST_CASE("EP exports: each chunk's stage, shard, slab size and IPC handle round-trip as text", "[launch][ep]") {
  EpExports e;
  std::string handle(64, '\0');
  for (int i = 0; i < 64; ++i) handle[static_cast<std::size_t>(i)] = static_cast<char>(i * 37 + 1);  // every byte kind
  e.chunks.push_back(EpExport{0, 1, 1 << 20, handle});
  e.chunks.push_back(EpExport{3, 1, 12345, std::string(64, '\xff')});
  const EpExports back = decode_ep_exports(encode_ep_exports(e));
  CHECK(back.ok);
  REQUIRE(back.chunks.size() == 2);
  CHECK(back.chunks[0].stage == 0);
  CHECK(back.chunks[0].shard == 1);
  CHECK(back.chunks[0].bytes == (1u << 20));
  CHECK(back.chunks[0].handle == handle);
  CHECK(back.chunks[1].handle == std::string(64, '\xff'));
  CHECK(find_ep_export(back, 3, 1) == &back.chunks[1]);
  CHECK(find_ep_export(back, 3, 0) == nullptr);
  // A process that could not make its part says so.
  EpExports bad;
  bad.ok = false;
  bad.error = "cudaIpcGetMemHandle failed";
  const EpExports bad_back = decode_ep_exports(encode_ep_exports(bad));
  CHECK_FALSE(bad_back.ok);
  CHECK(bad_back.error == "cudaIpcGetMemHandle failed");
  CHECK(bad_back.chunks.empty());
  // Text that is not an export list: one line, an internal error.
  for (const char* text : {"", "{}", "{\"ok\":true,\"error\":\"\",\"chunks\":[{\"stage\":0}]}",
                           "{\"ok\":true,\"error\":\"\",\"chunks\":[{\"stage\":0,\"shard\":0,\"bytes\":1,\"handle\":\"zz\"}]}"}) {
    INFO(text);
    try {
      decode_ep_exports(text);
      FAIL("accepted");
    } catch (const InputError& ex) {
      CHECK(ex.exit_code() == kExitInternal);
      CHECK(ex.message().find("malformed EP exports") != std::string::npos);
    }
  }
}

TEST_CASE("ep_launch_problem: expert parallelism across processes on one host, stage messages by ipc",
          "[launch][ep]") {
  CHECK(ep_launch_problem(1, 1, TransportKind::Peer).empty());
  CHECK(ep_launch_problem(1, 1, TransportKind::Nccl).empty());  // one process: the transport's own business
  CHECK(ep_launch_problem(2, 2, TransportKind::Ipc).empty());
  CHECK(ep_launch_problem(4, 2, TransportKind::Nccl) ==
        "expert parallelism across processes needs every process on one host (its receive buffers travel as CUDA IPC "
        "handles); 2 of 4 are on this one: start them on one host");
  CHECK(ep_launch_problem(2, 2, TransportKind::Nccl) ==
        "expert parallelism across processes moves stage messages by --transport ipc, not nccl: leave --transport out "
        "(auto) or give ipc");
}
