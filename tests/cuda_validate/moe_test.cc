// MoE routing and token movement (ops/moe.h) against a CPU reference: softmax + top-k, the
// token-order slot assignment with capacity drops, dispatch (permute), combine, and their
// backward passes including the router's gradient.
#include "cuda_validate/ops/moe.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "gpu_test_util.h"

using namespace ppsim::gpu;
using namespace ppsim::gpu::test;

TEST_CASE("MoE routing, dispatch and combine (forward and backward) match a CPU reference", "[gpu]") {
  PPSIM_REQUIRE_GPU();
  const int T = 100, E = 8, k = 2, cols = 264;
  const int C = 16;  // 200 assignments over 8 experts: 25 on average, so some are dropped
  // Distinct logits per token (a shuffled ladder of exact bf16 values): top-k has no ties.
  std::vector<float> logits(static_cast<std::size_t>(T * E));
  std::mt19937 rng(61);
  for (int t = 0; t < T; ++t) {
    std::vector<int> perm(E);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int e = 0; e < E; ++e) logits[static_cast<std::size_t>(t * E + e)] = 0.25f * static_cast<float>(perm[static_cast<std::size_t>(e)] - E / 2);
  }
  auto x = random_bf16_values(static_cast<std::size_t>(T) * cols, 1.f, 62);
  auto resid = random_bf16_values(static_cast<std::size_t>(T) * cols, 1.f, 63);
  auto zp = random_bf16_values(static_cast<std::size_t>(E * C) * cols, 1.f, 64);
  auto dout = random_bf16_values(static_cast<std::size_t>(T) * cols, 1.f, 65);
  auto dxp = random_bf16_values(static_cast<std::size_t>(E * C) * cols, 1.f, 66);

  DeviceBuffer<float> probs(static_cast<std::size_t>(T * E)), w(static_cast<std::size_t>(T * k)), dw(static_cast<std::size_t>(T * k));
  DeviceBuffer<int> idx(static_cast<std::size_t>(T * k)), slot_of(static_cast<std::size_t>(T * k)),
      slot_token(static_cast<std::size_t>(E * C)), counts(static_cast<std::size_t>(E));
  for (auto* b : {&probs, &w, &dw}) b->poison();
  for (auto* b : {&idx, &slot_of, &slot_token, &counts}) b->poison();
  MoeRouting r{probs.get(), idx.get(), w.get(), slot_of.get(), slot_token.get(), counts.get(), T, E, k, C};
  auto d_logits = upload_bf16(logits), d_x = upload_bf16(x), d_resid = upload_bf16(resid), d_zp = upload_bf16(zp),
       d_dout = upload_bf16(dout), d_dxp = upload_bf16(dxp);
  DeviceBuffer<bf16> xp(static_cast<std::size_t>(E * C) * cols), out(static_cast<std::size_t>(T) * cols),
      dzp(static_cast<std::size_t>(E * C) * cols), dx(static_cast<std::size_t>(T) * cols), dlogits(static_cast<std::size_t>(T * E));
  for (auto* b : {&xp, &out, &dzp, &dx, &dlogits}) b->poison();

  moe_route(r, d_logits.get(), nullptr);
  moe_permute(xp.get(), d_x.get(), r, cols, nullptr);
  moe_combine(out.get(), d_resid.get(), d_zp.get(), r, cols, nullptr);
  moe_combine_bwd(dzp.get(), dw.get(), d_dout.get(), d_zp.get(), r, cols, nullptr);
  moe_permute_bwd(dx.get(), d_dxp.get(), r, cols, nullptr);
  moe_router_bwd(dlogits.get(), dw.get(), r, nullptr);

  // ---- CPU reference ----
  std::vector<double> rp(static_cast<std::size_t>(T * E));
  std::vector<int> ridx(static_cast<std::size_t>(T * k)), rslot_of(static_cast<std::size_t>(T * k)),
      rslot_token(static_cast<std::size_t>(E * C), -1), rcount(static_cast<std::size_t>(E), 0);
  std::vector<double> rw(static_cast<std::size_t>(T * k));
  for (int t = 0; t < T; ++t) {
    double m = -INFINITY, z = 0;
    for (int e = 0; e < E; ++e) m = std::max(m, double(logits[static_cast<std::size_t>(t * E + e)]));
    for (int e = 0; e < E; ++e) z += std::exp(logits[static_cast<std::size_t>(t * E + e)] - m);
    for (int e = 0; e < E; ++e) rp[static_cast<std::size_t>(t * E + e)] = std::exp(logits[static_cast<std::size_t>(t * E + e)] - m) / z;
    std::vector<int> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return logits[static_cast<std::size_t>(t * E + a)] > logits[static_cast<std::size_t>(t * E + b)];
    });
    for (int j = 0; j < k; ++j) {
      ridx[static_cast<std::size_t>(t * k + j)] = order[static_cast<std::size_t>(j)];
      rw[static_cast<std::size_t>(t * k + j)] = rp[static_cast<std::size_t>(t * E + order[static_cast<std::size_t>(j)])];
    }
  }
  for (int i = 0; i < T * k; ++i) {
    const int e = ridx[static_cast<std::size_t>(i)];
    const int pos = rcount[static_cast<std::size_t>(e)]++;
    rslot_of[static_cast<std::size_t>(i)] = pos < C ? e * C + pos : -1;
    if (pos < C) rslot_token[static_cast<std::size_t>(e * C + pos)] = i;
  }
  const auto g_idx = idx.to_host(), g_slot_of = slot_of.to_host(), g_slot_token = slot_token.to_host(),
             g_counts = counts.to_host();
  CHECK(g_idx == ridx);
  CHECK(g_slot_of == rslot_of);
  CHECK(g_slot_token == rslot_token);
  CHECK(g_counts == rcount);
  CHECK(rel_error(download(probs), rp) < kF32Tol);
  CHECK(rel_error(download(w), rw) < kF32Tol);
  int dropped = 0;
  for (int c : rcount) dropped += std::max(0, c - C);
  CHECK(dropped > 0);  // the capacity path is exercised

  std::vector<double> rxp(static_cast<std::size_t>(E * C) * cols, 0.0), rout(resid.begin(), resid.end()),
      rdzp(static_cast<std::size_t>(E * C) * cols, 0.0), rdw(static_cast<std::size_t>(T * k), 0.0),
      rdx(static_cast<std::size_t>(T) * cols, 0.0), rdl(static_cast<std::size_t>(T * E), 0.0);
  for (int row = 0; row < E * C; ++row) {
    const int i = rslot_token[static_cast<std::size_t>(row)];
    if (i < 0) continue;
    const int t = i / k;
    double dot = 0;
    for (int c = 0; c < cols; ++c) {
      const std::size_t pr = static_cast<std::size_t>(row) * cols + c, tr = static_cast<std::size_t>(t) * cols + c;
      rxp[pr] = x[tr];
      rout[tr] += rw[static_cast<std::size_t>(i)] * zp[pr];
      rdzp[pr] = rw[static_cast<std::size_t>(i)] * dout[tr];
      rdx[tr] += dxp[pr];
      dot += double(dout[tr]) * zp[pr];
    }
    rdw[static_cast<std::size_t>(i)] = dot;
  }
  for (int t = 0; t < T; ++t) {
    double s = 0;
    std::vector<double> dprob(static_cast<std::size_t>(E), 0.0);
    for (int j = 0; j < k; ++j) {
      const int i = t * k + j;
      if (rslot_of[static_cast<std::size_t>(i)] < 0) continue;
      dprob[static_cast<std::size_t>(ridx[static_cast<std::size_t>(i)])] += rdw[static_cast<std::size_t>(i)];
    }
    for (int e = 0; e < E; ++e) s += rp[static_cast<std::size_t>(t * E + e)] * dprob[static_cast<std::size_t>(e)];
    for (int e = 0; e < E; ++e)
      rdl[static_cast<std::size_t>(t * E + e)] = rp[static_cast<std::size_t>(t * E + e)] * (dprob[static_cast<std::size_t>(e)] - s);
  }
  CHECK(rel_error(download(xp), rxp) == 0.0);  // a copy, empty rows zero
  CHECK(rel_error(download(out), rout) < kBf16Tol);
  CHECK(rel_error(download(dzp), rdzp) < kBf16Tol);
  CHECK(rel_error(download(dx), rdx) < kBf16Tol);
  // dw is only defined for kept assignments
  auto gdw = download(dw);
  std::vector<double> gdw_kept, rdw_kept;
  for (int i = 0; i < T * k; ++i)
    if (rslot_of[static_cast<std::size_t>(i)] >= 0) {
      gdw_kept.push_back(gdw[static_cast<std::size_t>(i)]);
      rdw_kept.push_back(rdw[static_cast<std::size_t>(i)]);
    }
  CHECK(rel_error(gdw_kept, rdw_kept) < kF32Tol);
  CHECK(rel_error(download(dlogits), rdl) < kBf16Tol);
}

TEST_CASE("MoE routing with non-finite logits keeps every index and slot in range", "[gpu]") {
  PPSIM_REQUIRE_GPU();
  // Token 0: all NaN; token 1: one +Inf (its softmax is NaN); token 2: finite. slot_of starts as
  // 0x7f7f7f7f, a large positive index as a reused pool buffer may hold, so an entry that routing
  // leaves unwritten shows (and combine would read through it).
  const int T = 3, E = 4, k = 2, cols = 8, C = 8;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {nan, nan, nan, nan, 0.5f, inf, 0.25f, 0.f, 0.75f, 0.5f, 0.25f, 0.f};
  DeviceBuffer<float> probs(static_cast<std::size_t>(T * E)), w(static_cast<std::size_t>(T * k));
  DeviceBuffer<int> idx(static_cast<std::size_t>(T * k)), slot_of(static_cast<std::size_t>(T * k)),
      slot_token(static_cast<std::size_t>(E * C)), counts(static_cast<std::size_t>(E));
  PPSIM_CUDA_CHECK(cudaMemset(slot_of.get(), 0x7f, static_cast<std::size_t>(T * k) * sizeof(int)));
  MoeRouting r{probs.get(), idx.get(), w.get(), slot_of.get(), slot_token.get(), counts.get(), T, E, k, C};
  auto d_logits = upload_bf16(logits);
  auto x = random_bf16_values(static_cast<std::size_t>(T) * cols, 1.f, 71);
  auto resid = random_bf16_values(static_cast<std::size_t>(T) * cols, 1.f, 72);
  auto zp = random_bf16_values(static_cast<std::size_t>(E * C) * cols, 1.f, 73);
  auto d_x = upload_bf16(x), d_resid = upload_bf16(resid), d_zp = upload_bf16(zp);
  DeviceBuffer<bf16> xp(static_cast<std::size_t>(E * C) * cols), out(static_cast<std::size_t>(T) * cols);
  moe_route(r, d_logits.get(), nullptr);
  moe_permute(xp.get(), d_x.get(), r, cols, nullptr);
  moe_combine(out.get(), d_resid.get(), d_zp.get(), r, cols, nullptr);
  PPSIM_CUDA_CHECK(cudaDeviceSynchronize());
  const auto g_idx = idx.to_host(), g_slot_of = slot_of.to_host();
  for (int i = 0; i < T * k; ++i) {
    CHECK(g_idx[static_cast<std::size_t>(i)] >= 0);
    CHECK(g_idx[static_cast<std::size_t>(i)] < E);
    CHECK(g_slot_of[static_cast<std::size_t>(i)] >= -1);
    CHECK(g_slot_of[static_cast<std::size_t>(i)] < E * C);
  }
  // The two choices of one token differ; the all-NaN token falls back to experts 0 and 1.
  for (int t = 0; t < T; ++t) CHECK(g_idx[static_cast<std::size_t>(2 * t)] != g_idx[static_cast<std::size_t>(2 * t + 1)]);
  CHECK(g_idx[0] == 0);
  CHECK(g_idx[1] == 1);
  CHECK(g_idx[4] == 0);  // the finite token: its two largest logits
  CHECK(g_idx[5] == 1);
}
