// Expert parallelism across processes, on the GPU, under mpirun (2 processes; tools/gpu_validate.sh
// runs it): each process builds EP shard `rank` of the small MoE chunk (ep = 2) on its GPU (process
// p on GPU p % GPUs: on one GPU both processes share it, as PPSIM_ALLOW_SHARED_GPU=1 lets the
// replay do), and EpWiring connects the two through CUDA IPC (each chunk's receive slab opened by
// the other process) with the host handshake in shared memory, and for `nccl` a communicator whose
// id travels over MPI. Both run forward, input-grad and weight-grad of their micro-batch 0 at once;
// each then checks, against one chunk holding every expert run in its own process on the same
// data (micro-batch r = shard r's), its output, its input-grad (both within kBf16Tol: the tolerance
// of tests/cuda_validate/chunk_ep_test.cc, which explains it) and its slice of the expert
// weight-grads (both processes' tokens reach them). Exit 0 when all holds, or when there is no GPU
// (or, for nccl, one GPU: NCCL cannot put two ranks of one communicator on it), which it says.
//   usage: mpirun -np 2 ep_ipc_check [ours|nccl]
#include <cmath>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <cuda_bf16.h>

#include "core/error.h"
#include "cuda_validate/chunk.h"
#include "cuda_validate/ep_wiring.h"
#include "launch/launch.h"
#include "launch/mpi.h"
#include "moe_reference.h"

using namespace ppsim;
using namespace ppsim::gpu;

namespace {

constexpr double kBf16Tol = 1e-2;

std::vector<float> bf16_to_host(const bf16* p, std::size_t n) {
  std::vector<__nv_bfloat16> h(n);
  PPSIM_CUDA_CHECK(cudaDeviceSynchronize());
  PPSIM_CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(bf16), cudaMemcpyDeviceToHost));
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = __bfloat162float(h[i]);
  return out;
}

std::vector<float> f32_to_host(const float* p, std::size_t n) {
  std::vector<float> h(n);
  PPSIM_CUDA_CHECK(cudaDeviceSynchronize());
  PPSIM_CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}

double rel_error(const std::vector<float>& got, const std::vector<float>& ref) {
  if (got.size() != ref.size()) return INFINITY;
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (static_cast<double>(got[i]) - ref[i]) * (static_cast<double>(got[i]) - ref[i]);
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

int failures = 0;
void expect(bool ok, const std::string& what) {
  std::fprintf(ok ? stdout : stderr, "ep_ipc_check process %d: %s: %s\n", mpi::world().rank, ok ? "ok" : "FAILED",
               what.c_str());
  if (!ok) ++failures;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string backend_name = argc > 1 ? argv[1] : "ours";
  try {
    const mpi::World& w = mpi::init_if_launched();
    const ep::A2aBackend backend = ep::parse_a2a_backend(backend_name);
    if (w.size != 2) {
      std::fprintf(stderr, "ep_ipc_check: run it as mpirun -np 2 (got %d process(es))\n", w.size);
      return 2;
    }
    // Every process decides alike whether to run (the same GPUs are visible to both).
    if (const std::string why = gpu_unavailable_reason(); !why.empty()) {
      if (w.rank == 0) std::printf("ep_ipc_check: skipped: no GPU: %s\n", why.c_str());
      return 0;
    }
    const int gpus = device_count();
    const std::vector<int> process_gpu = launch::gpus_of_processes(2, w.rank, w.local_rank, gpus, /*shared=*/true);
    if (backend == ep::A2aBackend::nccl)
      if (const std::string why = ep::nccl_a2a_problem(ep::place_across_processes(1, 2, process_gpu)); !why.empty()) {
        if (w.rank == 0) std::printf("ep_ipc_check nccl: skipped: %s\n", why.c_str());
        return 0;
      }
    const int device = process_gpu[static_cast<std::size_t>(w.rank)];
    PPSIM_CUDA_CHECK(cudaSetDevice(device));
    const int r = w.rank;  // EP shard
    const ChunkShape one = test::small_moe_shape();
    const std::uint64_t seed = 3;
    // The reference: one chunk with every expert, both micro-batches (shard s's is micro-batch s).
    Chunk single(one, seed);
    gpu::Stream s0;
    test::run_ep_reference(single, s0.get());

    ChunkShape sh = one;
    sh.ep = 2;
    sh.ep_rank = r;
    sh.comm_sms = 8;
    sh.ep_microbatches = 1;
    sh.a2a = backend;
    auto shard = std::make_unique<Chunk>(sh, seed);
    gpu::Stream st;
    auto wiring = std::make_unique<EpWiring>(1, 2, std::vector<int>{0, 1},
                                             std::vector<EpWiring::Member>{EpWiring::Member{0, r, device, shard.get()}},
                                             std::vector<ChunkShape>{sh}, /*across_processes=*/true, /*local_ok=*/true,
                                             /*handshake=*/true, backend);
    mpi::barrier();
    std::exception_ptr failed;
    try {
      shard->fill_input(0, 11 + static_cast<std::uint64_t>(r), st.get());
      shard->fill_grad_output(0, 21 + static_cast<std::uint64_t>(r), st.get());
      shard->forward(0, st.get());
      shard->backward_input(0, st.get());
      shard->backward_weight(0, st.get());
      st.sync();
    } catch (...) {
      failed = std::current_exception();
      wiring->abort();
    }
    if (mpi::any_of(failed != nullptr)) {
      if (failed) std::rethrow_exception(failed);
      throw InputError("the other process failed: see its message", {}, kExitGpu);
    }
    expect(shard->ep_status() == 0, "every exchange completed (status " + std::to_string(shard->ep_status()) + ")");
    const std::size_t act = static_cast<std::size_t>(one.tokens() * one.hidden);
    const double e_out = rel_error(bf16_to_host(shard->output(0), act), bf16_to_host(single.output(r), act));
    const double e_din = rel_error(bf16_to_host(shard->grad_input(0), act), bf16_to_host(single.grad_input(r), act));
    expect(e_out < kBf16Tol, "output against one chunk with every expert: rel error " + std::to_string(e_out));
    expect(e_din < kBf16Tol, "input-grad: rel error " + std::to_string(e_din));
    for (int l = 0; l < one.layers; ++l)
      for (Param p : {Param::Up, Param::Down}) {
        const auto n = static_cast<std::size_t>(shard->param_count(p));
        const auto ref = f32_to_host(single.weight_grad(p, l), 2 * n);
        const std::vector<float> want(ref.begin() + static_cast<std::ptrdiff_t>(r * n),
                                      ref.begin() + static_cast<std::ptrdiff_t>((r + 1) * n));
        const double e = rel_error(f32_to_host(shard->weight_grad(p, l), n), want);
        expect(e < kBf16Tol, "layer " + std::to_string(l) + (p == Param::Up ? " up" : " down") +
                                 " expert weight-grad slice: rel error " + std::to_string(e));
      }
    std::printf("ep_ipc_check process %d (%s, GPU %d of %d): output %.3g, input-grad %.3g (bound %.0e)\n", r,
                backend_name.c_str(), device, gpus, e_out, e_din, kBf16Tol);
    // Every process's kernels are done before any mapping closes, every mapping closed before the
    // chunks (the slabs' owners) go.
    mpi::barrier();
    wiring.reset();
    mpi::barrier();
    shard.reset();
  } catch (const InputError& e) {
    std::fprintf(stderr, "ep_ipc_check process %d: %s\n", mpi::world().rank, e.one_line().c_str());
    return 1;
  }
  const bool any = mpi::any_of(failures > 0);
  if (!any && mpi::world().rank == 0) std::printf("ep_ipc_check %s: ok (2 processes)\n", backend_name.c_str());
  return any ? 1 : 0;
}
