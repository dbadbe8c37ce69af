// The small MoE chunk of the MoE and EP tests, and the one-chunk reference that EP shards are
// checked against. No Catch here, so that tests/cuda_validate/ep_ipc_check.cc (a program run
// under mpirun) shares it with the Catch tests (gpu_test_util.h includes it).
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "cuda_validate/chunk.h"
#include "cuda_validate/gpu_api.h"

namespace ppsim::gpu::test {

// 8 experts top-2 over 2 x 64 tokens, capacity factor 1, so 256 assignments meet a capacity of 32
// per expert and some drop.
inline ChunkShape small_moe_shape() {
  ChunkShape s;
  s.hidden = 128;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 32;
  s.seq_len = 64;
  s.micro_batch = 2;
  s.layers = 2;
  s.experts = 8;
  s.top_k = 2;
  s.expert_ffn_hidden = 64;
  s.capacity_factor = 1.0;
  return s;
}

// One chunk with every expert runs micro-batches 0 and 1 (input seed 11 + mb, output-grad seed
// 21 + mb) through forward, input-grad and weight-grad: EP shard r, fed micro-batch r's data as
// its micro-batch 0, must give micro-batch r's output and input-grad, and its expert weight-grads
// must be slice r of these (both micro-batches' tokens reach every expert).
inline void run_ep_reference(Chunk& single, cudaStream_t s) {
  for (int mb = 0; mb < 2; ++mb) {
    single.fill_input(mb, 11 + static_cast<std::uint64_t>(mb), s);
    single.fill_grad_output(mb, 21 + static_cast<std::uint64_t>(mb), s);
    single.forward(mb, s);
    single.backward_input(mb, s);
    single.backward_weight(mb, s);
  }
  PPSIM_CUDA_CHECK(cudaStreamSynchronize(s));
}

}  // namespace ppsim::gpu::test
