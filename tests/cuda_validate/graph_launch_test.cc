// GraphCache (cuda_validate/graph_launch.h): a chunk's ops captured into CUDA graphs and launched
// as one compute the same bytes as the same ops launched one kernel at a time, and a cached
// executable updated with another micro-batch's buffers computes that micro-batch.
#include "cuda_validate/graph_launch.h"

#include <cstring>
#include <vector>

#include "core/op.h"
#include "cuda_validate/check.h"
#include "cuda_validate/chunk.h"
#include "gpu_test_util.h"

using namespace ppsim;
using namespace ppsim::gpu;
using namespace ppsim::gpu::test;

namespace {

std::vector<unsigned char> bytes_of(const void* p, std::size_t n) {
  std::vector<unsigned char> h(n);
  PPSIM_CUDA_CHECK(cudaMemcpy(h.data(), p, n, cudaMemcpyDeviceToHost));
  return h;
}

}  // namespace

TEST_CASE("graph launch: a chunk's forward and input-grads as graphs give the streams' bytes", "[gpu]") {
  PPSIM_REQUIRE_GPU();
  PPSIM_CUDA_CHECK(cudaSetDevice(0));
  const ChunkShape sh = tiny_dense_shape(2);
  const std::size_t n = static_cast<std::size_t>(sh.tokens() * sh.hidden) * 2;
  Chunk c(sh, 3);
  gpu::Stream st;
  const cudaStream_t s = st.get();
  for (int mb : {0, 1}) {
    c.fill_input(mb, 11 + static_cast<std::uint64_t>(mb), s);
    c.fill_grad_output(mb, 21 + static_cast<std::uint64_t>(mb), s);
  }
  // One kernel launch at a time (the forward and input-grads can be repeated: the chunk is not a
  // replay's, so nothing goes back to the pools).
  std::vector<unsigned char> out[2], gin[2];
  for (int mb : {0, 1}) {
    c.forward(mb, s);
    c.backward_input(mb, s);
    PPSIM_CUDA_CHECK(cudaStreamSynchronize(s));
    out[mb] = bytes_of(c.output(mb), n);
    gin[mb] = bytes_of(c.grad_input(mb), n);
  }
  const std::uint64_t kf = graph_key(0, OpKind::F, 0, 0), ki = graph_key(0, OpKind::I, 0, 0);
  GraphCache g;
  for (int mb : {0, 1}) {  // poisoned outputs first: the graph must write them
    PPSIM_CUDA_CHECK(cudaMemsetAsync(const_cast<bf16*>(c.output(mb)), 0xff, n, s));
    PPSIM_CUDA_CHECK(cudaMemsetAsync(const_cast<bf16*>(c.grad_input(mb)), 0xff, n, s));
  }
  // Micro-batch 0 instantiates both executables; micro-batch 1 under the same keys updates them
  // with its own buffers (what the replay does from one run to the next).
  for (int mb : {0, 1}) {
    g.launch(kf, s, [&] { c.forward(mb, s); });
    g.launch(ki, s, [&] { c.backward_input(mb, s); });
    PPSIM_CUDA_CHECK(cudaStreamSynchronize(s));
    INFO("micro-batch " << mb);
    CHECK(bytes_of(c.output(mb), n) == out[mb]);
    CHECK(bytes_of(c.grad_input(mb), n) == gin[mb]);
  }
  CHECK(out[0] != out[1]);  // the inputs differ, so an executable left on mb 0's buffers would show
  CHECK(g.stats().captures == 4);
  CHECK(g.stats().instantiations == 2);
  CHECK(g.stats().updates == 2);
  // Inside a larger capture the cache adds its work to that graph (no capture of its own).
  GraphCache outer;
  outer.launch(7, s, [&] { g.launch(kf, s, [&] { c.forward(0, s); }); });
  PPSIM_CUDA_CHECK(cudaStreamSynchronize(s));
  CHECK(bytes_of(c.output(0), n) == out[0]);
  CHECK(g.stats().captures == 4);
  CHECK(outer.stats().instantiations == 1);
  // Reuse: the same signature launches the executable again without running the enqueue; another
  // signature captures again.
  GraphCache r;
  int enqueued = 0;
  auto forward0 = [&] {
    ++enqueued;
    c.forward(0, s);
  };
  CHECK(r.launch(kf, s, forward0, 5));
  PPSIM_CUDA_CHECK(cudaMemsetAsync(const_cast<bf16*>(c.output(0)), 0xff, n, s));
  CHECK_FALSE(r.launch(kf, s, forward0, 5));
  PPSIM_CUDA_CHECK(cudaStreamSynchronize(s));
  CHECK(bytes_of(c.output(0), n) == out[0]);  // the reused graph wrote it, with no enqueue
  CHECK(enqueued == 1);
  CHECK(r.launch(kf, s, forward0, 6));
  CHECK(enqueued == 2);
  CHECK(r.stats().reused == 1);
  CHECK(r.stats().captures == 2);
}
