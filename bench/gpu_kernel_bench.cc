// GPU kernel benchmark: our cuBLASLt GEMMs and cuDNN attention on a chunk's shapes (median,
// TFLOP/s), compared with PyTorch by tools/gpu_check.sh. Hidden mode `--profile PATH` writes
// the chunk's cost profile (F, B, W, FB and sub-ops) instead. Without the CUDA back-end or a GPU
// it prints why and exits with ppsim's GPU exit code (5).
//   gpu_kernel_bench [--csv out.csv] [--hidden 4096 --heads 32 --kv-heads 8 --head-dim 128
//                    --ffn 14336 --seq 4096 --micro-batch 1] [--warmup 10 --reps 50]
//   gpu_kernel_bench --profile profile.yaml [--layers 2 --experts 8 --top-k 2 --expert-ffn 2048]
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "cuda_validate/gpu_api.h"

int main(int argc, char** argv) {
  using namespace ppsim;
  CLI::App app{"ppsim GPU kernel benchmark (GEMMs and attention) and chunk profiler", "gpu_kernel_bench"};
  gpu::ChunkShape shape;
  std::string csv, profile_path;
  int warmup = 10, reps = 50, device = 0;
  app.add_option("--csv", csv, "write the benchmark rows as CSV");
  app.add_option("--profile", profile_path, "profile a chunk and write its cost-profile YAML here instead")
      ->group("");  // hidden mode
  app.add_option("--hidden", shape.hidden);
  app.add_option("--heads", shape.heads);
  app.add_option("--kv-heads", shape.kv_heads);
  app.add_option("--head-dim", shape.head_dim);
  app.add_option("--ffn", shape.ffn_hidden);
  app.add_option("--seq", shape.seq_len);
  app.add_option("--micro-batch", shape.micro_batch);
  app.add_option("--layers", shape.layers);
  app.add_option("--experts", shape.experts);
  app.add_option("--top-k", shape.top_k);
  app.add_option("--expert-ffn", shape.expert_ffn_hidden);
  app.add_option("--capacity-factor", shape.capacity_factor);
  app.add_option("--warmup", warmup);
  app.add_option("--reps", reps);
  app.add_option("--device", device);
  CLI11_PARSE(app, argc, argv);
  try {
    if (!profile_path.empty()) {
      gpu::ProfileRequest req{shape, warmup, reps, device, profile_path};
      return gpu::run_profile(req);
    }
    gpu::KernelBenchRequest req{shape, warmup, reps, device, csv};
    return gpu::run_kernel_bench(req);
  } catch (const InputError& e) {
    std::fprintf(stderr, "gpu_kernel_bench: %s\n", e.one_line().c_str());
    return e.exit_code();
  }
}
