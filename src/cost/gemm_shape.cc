// A GEMM's speed by shape (see gemm_shape.h).
#include "cost/gemm_shape.h"

#include <algorithm>
#include <cmath>

namespace ppsim {

namespace {

struct Fit {
  double rows, cols, inner, gflop;  // R, C, K0, F0 of gemm_shape.h
};
constexpr Fit kBf16{100, 100, 128, 2};
constexpr Fit kFp8{100, 100, 384, 4};
constexpr Fit kBf16Grouped{100, 100, 192, 8};
constexpr GemmShape kReference{8192, 8192, 8192, 1, false};

double saturate(double x, double scale) { return 1 - std::exp(-x / scale); }

double raw(const GemmShape& s, const Fit& f) {
  const double gflop = 2e-9 * s.rows * s.cols * s.inner * s.groups;
  return saturate(s.rows, f.rows) * saturate(s.cols, f.cols) * s.inner / (s.inner + f.inner) * gflop /
         (gflop + f.gflop);
}

// One GEMM's figure at the shape over the same kernel's at the reference.
double relative(const GemmShape& s, const Fit& f) { return raw(s, f) / raw(kReference, f); }

}  // namespace

double gemm_shape_factor(const GemmShape& s) {
  if (s.rows <= 0 || s.cols <= 0 || s.inner <= 0 || s.groups <= 0) return 1;
  double f = 0;
  if (s.groups <= 1) {
    f = relative(s, s.fp8 ? kFp8 : kBf16);
  } else {
    // Grouped kernels were timed against one BF16 GEMM at the reference.
    f = raw(s, kBf16Grouped) / raw(kReference, kBf16);
    if (s.fp8) {
      GemmShape one = s;
      one.groups = 1;
      f *= relative(one, kFp8) / relative(one, kBf16);
    }
  }
  return std::clamp(f, 1e-3, 1.0);
}

}  // namespace ppsim
