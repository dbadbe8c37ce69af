// cuBLASLt GEMMs (ops/gemm.h) against a double-precision CPU product on random bf16 data:
// the three calls of a linear layer, batched (one weight per expert), fused residual, and the
// fp32 weight-grad that accumulates (beta = 1).
#include "cuda_validate/ops/gemm.h"

#include "gpu_test_util.h"

using namespace ppsim::gpu;
using namespace ppsim::gpu::test;

namespace {

// C[b][i][j] = sum_k A(i,k) B(k,j) with A(i,k) = a[b*sa + (at ? k*M + i : i*K + k)], likewise B.
std::vector<double> ref_gemm(const std::vector<float>& a, const std::vector<float>& b, int batch, std::int64_t M,
                             std::int64_t N, std::int64_t K, bool at, bool bt) {
  std::vector<double> c(static_cast<std::size_t>(batch * M * N), 0.0);
  for (int p = 0; p < batch; ++p)
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (std::int64_t k = 0; k < K; ++k) {
          const double av = a[static_cast<std::size_t>(p * M * K + (at ? k * M + i : i * K + k))];
          const double bv = b[static_cast<std::size_t>(p * K * N + (bt ? j * K + k : k * N + j))];
          acc += av * bv;
        }
        c[static_cast<std::size_t>(p * M * N + i * N + j)] = acc;
      }
  return c;
}

}  // namespace

TEST_CASE("linear layer GEMMs match a CPU reference (forward, input-grad, weight-grad, batched)", "[gpu]") {
  PPSIM_REQUIRE_GPU();
  Gemm gemm;
  for (int batch : {1, 3}) {
    const std::int64_t T = 120, in = 136, out = 88;
    INFO("batch " << batch);
    auto x = random_bf16_values(static_cast<std::size_t>(batch * T * in), 1.f, 1 + batch);
    auto w = random_bf16_values(static_cast<std::size_t>(batch * out * in), 0.5f, 2 + batch);
    auto dy = random_bf16_values(static_cast<std::size_t>(batch * T * out), 1.f, 3 + batch);
    auto dx_x = upload_bf16(x), dw_w = upload_bf16(w), d_dy = upload_bf16(dy);

    // forward: y = x w^T
    DeviceBuffer<bf16> y(static_cast<std::size_t>(batch * T * out));
    y.poison();
    gemm.linear_fwd(y.get(), dx_x.get(), dw_w.get(), T, in, out, nullptr, batch);
    CHECK(rel_error(download(y), ref_gemm(x, w, batch, T, out, in, false, true)) < kBf16Tol);

    // input-grad: dx = dy w
    DeviceBuffer<bf16> dx(static_cast<std::size_t>(batch * T * in));
    dx.poison();
    gemm.linear_bwd_input(dx.get(), d_dy.get(), dw_w.get(), T, in, out, nullptr, 0.f, batch);
    CHECK(rel_error(download(dx), ref_gemm(dy, w, batch, T, in, out, false, false)) < kBf16Tol);

    // weight-grad, fp32, accumulating onto a random start value
    auto start = random_bf16_values(static_cast<std::size_t>(batch * out * in), 3.f, 4 + batch);
    DeviceBuffer<float> dw = upload_f32(start);
    gemm.linear_bwd_weight(dw.get(), DType::F32, d_dy.get(), dx_x.get(), T, in, out, nullptr, 1.f, batch);
    auto ref = ref_gemm(dy, x, batch, out, in, T, true, false);
    for (std::size_t i = 0; i < ref.size(); ++i) ref[i] += start[i];
    CHECK(rel_error(download(dw), ref) < kF32Tol);

    // weight-grad, bf16, overwriting
    DeviceBuffer<bf16> dwb(static_cast<std::size_t>(batch * out * in));
    dwb.poison();
    gemm.linear_bwd_weight(dwb.get(), DType::BF16, d_dy.get(), dx_x.get(), T, in, out, nullptr, 0.f, batch);
    CHECK(rel_error(download(dwb), ref_gemm(dy, x, batch, out, in, T, true, false)) < kBf16Tol);
  }
}

TEST_CASE("forward GEMM with a fused residual adds it", "[gpu]") {
  PPSIM_REQUIRE_GPU();
  Gemm gemm;
  const std::int64_t T = 64, in = 96, out = 40;
  auto x = random_bf16_values(static_cast<std::size_t>(T * in), 1.f, 11);
  auto w = random_bf16_values(static_cast<std::size_t>(out * in), 0.5f, 12);
  auto r = random_bf16_values(static_cast<std::size_t>(T * out), 2.f, 13);
  auto dx = upload_bf16(x), dw = upload_bf16(w), dr = upload_bf16(r);
  DeviceBuffer<bf16> y(static_cast<std::size_t>(T * out));
  y.poison();
  gemm.linear_fwd(y.get(), dx.get(), dw.get(), T, in, out, nullptr, 1, dr.get());
  auto ref = ref_gemm(x, w, 1, T, out, in, false, true);
  for (std::size_t i = 0; i < ref.size(); ++i) ref[i] += r[i];
  CHECK(rel_error(download(y), ref) < kBf16Tol);
  // the residual input is left as it was
  CHECK(rel_error(download(dr), r) == 0.0);
}
