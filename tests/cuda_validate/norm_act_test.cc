// RMSNorm and SwiGLU kernels (ops/norm_act.h) against double-precision CPU references on random
// bf16 data, outputs poisoned (NaN) before each run.
#include "cuda_validate/ops/norm_act.h"

#include "gpu_test_util.h"

using namespace ppsim::gpu;
using namespace ppsim::gpu::test;

TEST_CASE("RMSNorm forward, input-grad and gamma-grad match a CPU reference", "[gpu]") {
  PPSIM_REQUIRE_GPU();
  for (auto [rows, cols] : {std::pair<int, int>{37, 520}, {130, 4096}}) {
    INFO("rows " << rows << " cols " << cols);
    const std::size_t n = static_cast<std::size_t>(rows) * cols;
    auto x = random_bf16_values(n, 2.f, 21);
    auto g = random_bf16_values(static_cast<std::size_t>(cols), 0.2f, 22, 1.f);
    auto dy = random_bf16_values(n, 1.f, 23);
    auto resid = random_bf16_values(n, 1.f, 24);
    auto dx_ = upload_bf16(x), dg_ = upload_bf16(g), ddy = upload_bf16(dy), dres = upload_bf16(resid);
    DeviceBuffer<bf16> y(n), dx(n);
    DeviceBuffer<float> rstd(static_cast<std::size_t>(rows));
    y.poison();
    rstd.poison();
    dx.poison();
    rmsnorm_fwd(y.get(), rstd.get(), dx_.get(), dg_.get(), rows, cols, nullptr);
    rmsnorm_bwd_input(dx.get(), dres.get(), ddy.get(), dx_.get(), dg_.get(), rstd.get(), rows, cols, nullptr);
    auto start = random_bf16_values(static_cast<std::size_t>(cols), 1.f, 25);
    DeviceBuffer<float> dgamma = upload_f32(start);
    rmsnorm_bwd_gamma(dgamma.get(), ddy.get(), dx_.get(), rstd.get(), rows, cols, nullptr);

    std::vector<double> ry(n), rr(static_cast<std::size_t>(rows)), rdx(n), rdg(start.begin(), start.end());
    for (int r = 0; r < rows; ++r) {
      double ss = 0, dot = 0;
      for (int c = 0; c < cols; ++c) {
        const std::size_t i = static_cast<std::size_t>(r) * cols + c;
        ss += double(x[i]) * x[i];
        dot += double(g[c]) * dy[i] * x[i];
      }
      const double rs = 1.0 / std::sqrt(ss / cols + kRmsNormEps);
      rr[static_cast<std::size_t>(r)] = rs;
      for (int c = 0; c < cols; ++c) {
        const std::size_t i = static_cast<std::size_t>(r) * cols + c;
        ry[i] = x[i] * rs * g[c];
        // dx = rstd g dy - x rstd^3 / cols * sum(g dy x), plus the residual
        rdx[i] = resid[i] + rs * g[c] * dy[i] - x[i] * rs * rs * rs * dot / cols;
        rdg[static_cast<std::size_t>(c)] += double(dy[i]) * x[i] * rs;
      }
    }
    CHECK(rel_error(download(y), ry) < kBf16Tol);
    CHECK(rel_error(download(rstd), rr) < kF32Tol);
    CHECK(rel_error(download(dx), rdx) < kBf16Tol);
    CHECK(rel_error(download(dgamma), rdg) < 1e-3);  // sums of bf16-rounded products in fp32
  }
}

TEST_CASE("SwiGLU forward and backward match a CPU reference", "[gpu]") {
  PPSIM_REQUIRE_GPU();
  const int rows = 45, f = 392;
  const std::size_t n = static_cast<std::size_t>(rows) * f;
  auto gu = random_bf16_values(2 * n, 4.f, 31);
  auto da = random_bf16_values(n, 1.f, 32);
  auto dgu_ = upload_bf16(gu), dda = upload_bf16(da);
  DeviceBuffer<bf16> a(n), dgu(2 * n);
  a.poison();
  dgu.poison();
  swiglu_fwd(a.get(), dgu_.get(), rows, f, nullptr);
  swiglu_bwd(dgu.get(), dda.get(), dgu_.get(), rows, f, nullptr);
  std::vector<double> ra(n), rdg(2 * n);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < f; ++c) {
      const std::size_t gi = static_cast<std::size_t>(r) * 2 * f + c, ui = gi + f, ai = static_cast<std::size_t>(r) * f + c;
      const double z = gu[gi], u = gu[ui], s = 1.0 / (1.0 + std::exp(-z));
      ra[ai] = z * s * u;
      rdg[gi] = da[ai] * u * s * (1.0 + z * (1.0 - s));
      rdg[ui] = da[ai] * z * s;
    }
  CHECK(rel_error(download(a), ra) < kBf16Tol);
  CHECK(rel_error(download(dgu), rdg) < kBf16Tol);
}
