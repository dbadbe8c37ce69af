// Causal attention forward/backward (ops/attention.h), cuDNN's fused graph and the cuBLAS +
// softmax reference, against a double-precision CPU reference on the packed QKV layout, for
// grouped-query (heads = 2 kv_heads) and plain multi-head shapes.
#include "cuda_validate/ops/attention.h"

#include <cmath>
#include <cstdio>
#include <memory>

#include "core/error.h"
#include "cuda_validate/ops/gemm.h"
#include "cpu_reference.h"
#include "gpu_test_util.h"

using namespace ppsim::gpu;
using namespace ppsim::gpu::test;

namespace {

void check_attention(Attention& attn, const AttentionShape& sh, std::uint32_t seed) {
  const std::size_t nqkv = static_cast<std::size_t>(sh.tokens() * sh.qkv_width());
  const std::size_t no = static_cast<std::size_t>(sh.tokens() * sh.heads * sh.head_dim);
  auto qkv = random_bf16_values(nqkv, 1.5f, seed);
  auto dout = random_bf16_values(no, 1.f, seed + 1);
  auto d_qkv = upload_bf16(qkv), d_dout = upload_bf16(dout);
  DeviceBuffer<bf16> o(no), dqkv(nqkv);
  DeviceBuffer<float> lse(static_cast<std::size_t>(sh.batch) * sh.heads * sh.seq);
  o.poison();
  lse.poison();
  dqkv.poison();
  attn.forward(o.get(), lse.get(), d_qkv.get(), nullptr);
  attn.backward(dqkv.get(), d_dout.get(), d_qkv.get(), o.get(), lse.get(), nullptr);
  const cpu::Attention ref{sh.batch, sh.seq, sh.heads, sh.kv_heads, sh.head_dim};
  cpu::Vec ro, rlse;
  ref.forward(cpu::from(qkv), ro, rlse);
  const cpu::Vec rdqkv = ref.backward(cpu::from(qkv), cpu::from(dout));
  const double eo = rel_error(download(o), ro), el = rel_error(download(lse), rlse),
               eg = rel_error(download(dqkv), rdqkv);
  INFO(attn.name() << ": rel error O " << eo << ", lse " << el << ", dQKV " << eg);
  std::printf("attention %-9s b%d s%d h%d/%d d%d: rel error O %.2e, lse %.2e, dQKV %.2e\n", attn.name(), sh.batch,
              sh.seq, sh.heads, sh.kv_heads, sh.head_dim, eo, el, eg);
  CHECK(eo < 2e-2);
  CHECK(el < 1e-3);
  CHECK(eg < 3e-2);
}

const AttentionShape kShapes[] = {
    {2, 128, 4, 2, 64},   // GQA: two query heads per KV head
    {1, 256, 4, 4, 128},  // MHA
};

}  // namespace

TEST_CASE("cuDNN fused attention (backend graph API) matches a CPU reference", "[gpu]") {
  PPSIM_REQUIRE_GPU();
  for (const auto& sh : kShapes) {
    INFO("batch " << sh.batch << " seq " << sh.seq << " heads " << sh.heads << "/" << sh.kv_heads << " d " << sh.head_dim);
    std::unique_ptr<Attention> attn;
    try {
      attn = make_cudnn_attention(sh);
    } catch (const ppsim::InputError& e) {
      FAIL("cuDNN attention could not be built: " << e.what());
    }
    check_attention(*attn, sh, 41);
  }
}

TEST_CASE("reference attention (cuBLAS + softmax kernels) matches a CPU reference", "[gpu]") {
  PPSIM_REQUIRE_GPU();
  Gemm gemm;
  for (const auto& sh : kShapes) {
    INFO("batch " << sh.batch << " seq " << sh.seq << " heads " << sh.heads << "/" << sh.kv_heads << " d " << sh.head_dim);
    auto attn = make_reference_attention(sh, gemm);
    check_attention(*attn, sh, 51);
  }
}
