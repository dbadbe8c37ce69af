// SM partitions (CUDA green contexts), as virtual ranks use them: a partition holds a multiple of
// the GPU's alignment (8 SMs on Hopper, per the CUDA documentation) and k of them fit the GPU; a
// chunk computes the same output on a partition's stream as on an ordinary one; a compute-bound
// forward confined to a quarter of the SMs takes more than twice as long; a replay whose ranks
// each own a partition is as consistent as a time-sliced one.
#include <cstdio>

#include "cuda_validate/chunk.h"
#include "cuda_validate/green.h"
#include "gpu_test_util.h"
#include "schedules/registry.h"

using namespace ppsim;
using namespace ppsim::gpu;
using namespace ppsim::gpu::test;

namespace {
#define PPSIM_REQUIRE_SM_SPLIT(k)                                                 \
  do {                                                                            \
    PPSIM_REQUIRE_GPU();                                                          \
    const std::string why_ = sm_partition_check(0, k);                           \
    if (!why_.empty()) PPSIM_SKIP("no SM partitions: " << why_);                  \
  } while (0)

ChunkShape heavy() {  // compute-bound: GEMMs of 2048 x 2048 x 8192
  ChunkShape s;
  s.hidden = 2048;
  s.heads = 16;
  s.kv_heads = 16;
  s.head_dim = 128;
  s.ffn_hidden = 8192;
  s.seq_len = 2048;
  s.micro_batch = 1;
  s.layers = 1;
  return s;
}
}  // namespace

TEST_CASE("SM partitions: sizes, same results, confined speed", "[gpu][green][profile]") {
  PPSIM_REQUIRE_SM_SPLIT(2);
  int sms = 0, all = 0;
  REQUIRE(sm_partition_check(0, 2, &sms, &all).empty());
  CHECK(sms >= 8);
  CHECK(sms % 8 == 0);
  CHECK(2 * sms <= all);
  CHECK(2 * sms > all - 16);  // as large as the alignment allows
  int sms4 = 0;
  REQUIRE(sm_partition_check(0, 4, &sms4, &all).empty());
  CHECK(4 * sms4 <= all);
  CHECK(sms4 % 8 == 0);
  std::printf("SM partitions: %d SMs; 2 x %d, 4 x %d\n", all, sms, sms4);

  // Same output on a partition's stream as on an ordinary stream (same kernels, same inputs).
  ChunkShape s = heavy();
  s.seq_len = 256;
  Chunk c(s, 11);
  gpu::Stream plain;
  c.fill_input(0, 5, plain.get());
  c.forward(0, plain.get());
  plain.sync();
  const std::size_t n = static_cast<std::size_t>(s.tokens() * s.hidden);
  const std::vector<float> ref = download_bf16(c.output(0), n);
  {
    SmPartitions parts(0, 2);
    auto green = gpu::Stream::adopt(parts.create_stream(1, 0));
    c.forward(0, green->get());
    green->sync();
    const std::vector<float> got = download_bf16(c.output(0), n);
    CHECK(rel_error(got, ref) < 1e-6);
  }

  // Confinement: a quarter of the SMs, a compute-bound forward at least twice as long.
  const double whole = profile_chunk(heavy(), 2, 5, 0, 0).f_ms;
  const double quarter = profile_chunk(heavy(), 2, 5, 0, 4).f_ms;
  std::printf("forward of a 2048 x 8192 layer, seq 2048: %.3f ms on all SMs, %.3f ms on %d\n", whole, quarter, sms4);
  CHECK(quarter > 2.0 * whole);
}
