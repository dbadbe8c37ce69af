// The kernel benchmark behind bench/gpu_kernel_bench: each GEMM of a chunk (forward "F",
// input-grad "B", weight-grad "W", all with bf16 outputs so that torch.matmul is the same work;
// each with cuBLASLt's first pick and, as "<name>_tuned", autotuned)
// and attention forward/backward (cuDNN fused, and the cuBLAS + softmax reference), each the
// median of `reps` event-timed runs after `warmup`. tools/torch_reference.py times the same rows
// with PyTorch; tools/gpu_check.sh joins the two CSVs.
//   GEMM FLOPs = 2 m n k;  causal attention forward = 2 * 2 b h s^2 d / 2, backward = 2.5 x forward.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "cuda_validate/check.h"
#include "cuda_validate/device_buffer.h"
#include "cuda_validate/gpu_api.h"
#include "cuda_validate/ops/attention.h"
#include "cuda_validate/ops/elementwise.h"
#include "cuda_validate/ops/gemm.h"

namespace ppsim::gpu {
namespace {

struct Row {
  std::string name, kind;
  std::int64_t m = 0, n = 0, k = 0;
  int batch = 0, heads = 0, seq = 0, head_dim = 0;
  double ms = 0, flops = 0;
};

double median_ms(const std::function<void()>& fn, cudaStream_t s, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) fn();
  PPSIM_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<Event> st(static_cast<std::size_t>(reps)), en(static_cast<std::size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    st[static_cast<std::size_t>(i)].record(s);
    fn();
    en[static_cast<std::size_t>(i)].record(s);
  }
  PPSIM_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) ms.push_back(en[static_cast<std::size_t>(i)].ms_since(st[static_cast<std::size_t>(i)]));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int run_kernel_bench(const KernelBenchRequest& req) {
  if (auto why = gpu_unavailable_reason(); !why.empty()) throw InputError("kernel bench: " + why, {}, kExitGpu);
  const ChunkShape& sh = req.shape;
  if (auto p = sh.problem(); !p.empty()) throw InputError("kernel bench: chunk shape: " + p, {}, kExitInput);
  if (req.reps < 1 || req.warmup < 0)
    throw InputError("kernel bench: --reps must be >= 1 and --warmup >= 0", {}, kExitUsage);
  PPSIM_CUDA_CHECK(cudaSetDevice(req.device));
  Stream stream;
  const cudaStream_t s = stream.get();
  Gemm gemm(false), tuned(true);  // cuBLASLt's first pick (the default) and autotuned
  std::vector<Row> rows;

  // ---- GEMMs: y[T,out] = x[T,in] w^T; dx = dy w; dw = dy^T x ----
  const std::int64_t T = sh.tokens(), h = sh.hidden;
  const std::int64_t A = static_cast<std::int64_t>(sh.heads) * sh.head_dim;
  const std::int64_t f = sh.is_moe() ? sh.expert_ffn_hidden : sh.ffn_hidden;
  struct Lin {
    const char* name;
    std::int64_t in, out;
  };
  const Lin lins[] = {{"qkv", h, sh.qkv_width()}, {"out", A, h}, {"up", h, 2 * f}, {"down", f, h}};
  std::int64_t max_in = 0, max_out = 0;
  for (const auto& l : lins) {
    max_in = std::max(max_in, l.in);
    max_out = std::max(max_out, l.out);
  }
  DeviceBuffer<bf16> x(static_cast<std::size_t>(T * max_in)), w(static_cast<std::size_t>(max_in * max_out));
  DeviceBuffer<bf16> y(static_cast<std::size_t>(T * max_out)), dx(static_cast<std::size_t>(T * max_in));
  DeviceBuffer<bf16> dw(static_cast<std::size_t>(max_in * max_out));
  fill_uniform(x.get(), static_cast<std::int64_t>(x.size()), 1.f, 11, s);
  fill_uniform(w.get(), static_cast<std::int64_t>(w.size()), 0.02f, 12, s);
  fill_uniform(y.get(), static_cast<std::int64_t>(y.size()), 1.f, 13, s);
  // Each GEMM twice: the default Gemm and the autotuned one, alternating run by run so that
  // clock drift affects both alike ("<name>" and "<name>_tuned" rows).
  auto ab = [&](Row base, const std::function<void(Gemm&)>& fn) {
    fn(gemm);
    fn(tuned);  // first calls build (and tune) the plans
    std::vector<float> a_ms, b_ms;
    for (int i = 0; i < req.warmup; ++i) {
      fn(gemm);
      fn(tuned);
    }
    std::vector<Event> marks(static_cast<std::size_t>(2 * req.reps + 1));  // back to back, no host sync
    marks[0].record(s);
    for (int i = 0; i < req.reps; ++i) {
      fn(gemm);
      marks[static_cast<std::size_t>(2 * i + 1)].record(s);
      fn(tuned);
      marks[static_cast<std::size_t>(2 * i + 2)].record(s);
    }
    marks.back().sync();
    for (int i = 0; i < req.reps; ++i) {
      const auto k = static_cast<std::size_t>(2 * i);
      a_ms.push_back(marks[k + 1].ms_since(marks[k]));
      b_ms.push_back(marks[k + 2].ms_since(marks[k + 1]));
    }
    std::sort(a_ms.begin(), a_ms.end());
    std::sort(b_ms.begin(), b_ms.end());
    Row t = base;
    base.ms = a_ms[a_ms.size() / 2];
    t.name += "_tuned";
    t.ms = b_ms[b_ms.size() / 2];
    rows.push_back(base);
    rows.push_back(t);
  };
  for (const auto& l : lins) {
    const double fl = 2.0 * static_cast<double>(T) * static_cast<double>(l.in) * static_cast<double>(l.out);
    ab(Row{fmt::format("{}_F", l.name), "gemm", T, l.out, l.in, 1, 0, 0, 0, 0, fl},
       [&](Gemm& g) { g.linear_fwd(y.get(), x.get(), w.get(), T, l.in, l.out, s); });
    ab(Row{fmt::format("{}_B", l.name), "gemm", T, l.in, l.out, 1, 0, 0, 0, 0, fl},
       [&](Gemm& g) { g.linear_bwd_input(dx.get(), y.get(), w.get(), T, l.in, l.out, s); });
    ab(Row{fmt::format("{}_W", l.name), "gemm", l.out, l.in, T, 1, 0, 0, 0, 0, fl},
       [&](Gemm& g) { g.linear_bwd_weight(dw.get(), DType::BF16, y.get(), x.get(), T, l.in, l.out, s, 0.f); });
  }
  x.resize(0);
  w.resize(0);
  y.resize(0);
  dx.resize(0);
  dw.resize(0);

  // ---- attention ----
  const AttentionShape ash{sh.micro_batch, sh.seq_len, sh.heads, sh.kv_heads, sh.head_dim};
  const double attn_fwd_flops =
      2.0 * 2.0 * sh.micro_batch * sh.heads * static_cast<double>(sh.seq_len) * sh.seq_len * sh.head_dim / 2.0;
  DeviceBuffer<bf16> qkv(static_cast<std::size_t>(T * ash.qkv_width())), dqkv(static_cast<std::size_t>(T * ash.qkv_width()));
  DeviceBuffer<bf16> o(static_cast<std::size_t>(T * A)), dout(static_cast<std::size_t>(T * A));
  DeviceBuffer<float> lse(static_cast<std::size_t>(T * sh.heads));
  fill_uniform(qkv.get(), static_cast<std::int64_t>(qkv.size()), 1.f, 21, s);
  fill_uniform(dout.get(), static_cast<std::int64_t>(dout.size()), 1.f, 22, s);
  auto bench_attention = [&](Attention& at, const std::string& prefix) {
    Row rf{prefix + "_fwd", "attention", 0, 0, 0, sh.micro_batch, sh.heads, sh.seq_len, sh.head_dim, 0, attn_fwd_flops};
    rf.ms = median_ms([&] { at.forward(o.get(), lse.get(), qkv.get(), s); }, s, req.warmup, req.reps);
    rows.push_back(rf);
    Row rb{prefix + "_bwd", "attention", 0, 0, 0, sh.micro_batch, sh.heads, sh.seq_len, sh.head_dim, 0,
           2.5 * attn_fwd_flops};
    rb.ms = median_ms([&] { at.backward(dqkv.get(), dout.get(), qkv.get(), o.get(), lse.get(), s); }, s, req.warmup,
                      req.reps);
    rows.push_back(rb);
  };
  try {
    auto cudnn = make_cudnn_attention(ash);
    bench_attention(*cudnn, "attn");
  } catch (const InputError& e) {
    std::fprintf(stderr, "kernel bench: cuDNN attention failed: %s\n", e.what());
  }
  {
    auto ref = make_reference_attention(ash, gemm);
    bench_attention(*ref, "attn_ref");
  }

  // ---- report ----
  std::printf("kernel bench on %s, tokens %lld (micro_batch %d x seq %d); median of %d after %d warm-up\n",
              device_name(req.device).c_str(), static_cast<long long>(T), sh.micro_batch, sh.seq_len, req.reps,
              req.warmup);
  std::printf("%-14s %-10s %28s %10s %9s\n", "name", "kind", "shape", "ms", "TFLOP/s");
  std::string csv = "name,kind,m,n,k,batch,heads,seq,head_dim,ms,tflops\n";
  for (const auto& r : rows) {
    const double tf = r.flops / (r.ms * 1e-3) / 1e12;
    const std::string shape = r.kind == "gemm" ? fmt::format("m{} n{} k{}", r.m, r.n, r.k)
                                               : fmt::format("b{} h{} s{} d{}", r.batch, r.heads, r.seq, r.head_dim);
    std::printf("%-14s %-10s %28s %10.4f %9.1f\n", r.name.c_str(), r.kind.c_str(), shape.c_str(), r.ms, tf);
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{:.5f},{:.2f}\n", r.name, r.kind, r.m, r.n, r.k, r.batch, r.heads,
                       r.seq, r.head_dim, r.ms, tf);
  }
  if (!req.csv_path.empty()) {
    std::ofstream out(req.csv_path, std::ios::trunc);
    if (!out) throw InputError(SourceLoc{req.csv_path, 0, 0}, "cannot write the benchmark csv", {}, kExitIo);
    out << csv;
  }
  return kExitOk;
}

}  // namespace ppsim::gpu
