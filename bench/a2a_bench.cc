// Expert-parallel all-to-all benchmark (built only with the CUDA back-end): our SM-bounded
// kernels (ops/a2a.h) against NCCL's grouped send/recv at the same SM budget, from 1 MiB to
// 256 MiB per rank, and how much a 4096^3 bf16 GEMM loop slows beside each, against the share
// of SMs the all-to-all holds. Prints min/median/max and GB/s; exits 5 without a GPU.
//   a2a_bench [--sms 20,8,4] [--mib 1,2,...,256] [--a2a ours|nccl|both] [--reps 20 --warmup 5]
//             [--overlap-mib 64] [--gemm-iters 30] [--hidden 4096]
// Two EP ranks: on GPUs 0 and 1 (peer access) when two are visible, else both on GPU 0 (then
// only ours runs - NCCL needs a GPU per rank - and the figures are HBM copies, not NVLink).
// Not obvious: NCCL's SM budget is its CTA count, capped per communicator with ncclConfig_t
// maxCTAs (a communicator per SM count); NCCL_MAX_NCHANNELS, read once per process, caps it
// too when set (tools/a2a_bench.sh runs one process per SM count with it).
// Every slot is full (token t -> expert t / C, top_k 1): ours and NCCL move the same bytes.
// algbw = bytes a rank sends (its own share included) / time; remote = the (ep-1)/ep that
// crosses to the other rank / time, the NVLink figure (NVLink 4 on H100/H200: 450 GB/s each way).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"
#include "cuda_validate/device_buffer.h"
#include "cuda_validate/peer.h"
#include "cuda_validate/gpu_api.h"
#include "cuda_validate/ops/a2a.h"
#include "cuda_validate/ops/elementwise.h"
#include "cuda_validate/ops/gemm.h"
#include "ep/ep_plan.h"

using namespace ppsim;
using namespace ppsim::gpu;

namespace {

constexpr int kEp = 2, kExperts = 8;

struct Stats {
  double min = 0, med = 0, max = 0;
};
Stats stats_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v.front(), v[v.size() / 2], v.back()};
}

struct Rank {
  int device = 0;
  std::unique_ptr<gpu::Stream> stream;
  DeviceBuffer<bf16> src, rows_out;
  DeviceBuffer<int> slot_token, expert_counts, slot_of;
  std::unique_ptr<A2aBufferSet> dispatch_buf, combine_buf;
  ncclComm_t comm = nullptr;
};

struct Setup {
  std::vector<int> devices;
  ep::EpGeometry g;
  std::vector<Rank> ranks;
  unsigned long long epoch = 0;
};

void set_dev(const Rank& r) { PPSIM_CUDA_CHECK(cudaSetDevice(r.device)); }

// Full routing for `bytes` per rank: rows = bytes / row_bytes, C = rows / E, T = rows, top_k 1.
std::unique_ptr<Setup> make_setup(const std::vector<int>& devices, std::int64_t bytes, int hidden) {
  auto S = std::make_unique<Setup>();
  S->devices = devices;
  const std::int64_t rows = std::max<std::int64_t>(kExperts, bytes / (2LL * hidden) / kExperts * kExperts);
  S->g = ep::EpGeometry{kEp, kExperts, 1, rows, rows / kExperts, hidden};
  std::vector<int> slot_token(static_cast<std::size_t>(rows)), counts(kExperts, static_cast<int>(rows / kExperts));
  std::iota(slot_token.begin(), slot_token.end(), 0);  // row r = token r = assignment r
  S->ranks.resize(kEp);
  int greatest = 0, least = 0;
  for (int r = 0; r < kEp; ++r) {
    Rank& R = S->ranks[static_cast<std::size_t>(r)];
    R.device = devices[static_cast<std::size_t>(r)];
    set_dev(R);
    PPSIM_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    R.stream = std::make_unique<gpu::Stream>(greatest);  // communication first, as DeepEP's
    R.src.resize(static_cast<std::size_t>(rows * hidden));
    fill_uniform(R.src.get(), rows * hidden, 1.f, 7 + static_cast<std::uint64_t>(r), nullptr);
    R.rows_out.resize(static_cast<std::size_t>(rows * hidden));
    R.slot_token.from_host(slot_token);
    R.slot_of.from_host(slot_token);
    R.expert_counts.from_host(counts);
    R.dispatch_buf = std::make_unique<A2aBufferSet>(S->g);
    R.combine_buf = std::make_unique<A2aBufferSet>(S->g);
    PPSIM_CUDA_CHECK(cudaDeviceSynchronize());
  }
  return S;
}

void make_nccl(Setup& S, int sms) {
  ncclUniqueId id;
  PPSIM_NCCL_CHECK(ncclGetUniqueId(&id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.maxCTAs = sms;
  config.minCTAs = 1;
  PPSIM_NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < kEp; ++r) {
    set_dev(S.ranks[static_cast<std::size_t>(r)]);
    PPSIM_NCCL_CHECK(ncclCommInitRankConfig(&S.ranks[static_cast<std::size_t>(r)].comm, kEp, id, r, &config));
  }
  PPSIM_NCCL_CHECK(ncclGroupEnd());
}

void free_nccl(Setup& S) {
  for (auto& R : S.ranks)
    if (R.comm) {
      set_dev(R);
      (void)ncclCommDestroy(R.comm);
      R.comm = nullptr;
    }
}

A2aCall call_of(const Setup& S, A2aBackend b, int r, int sms) {
  A2aCall c;
  c.backend = b;
  c.g = S.g;
  c.rank = r;
  c.comm_sms = sms;
  c.epoch = S.epoch;
  c.comm = S.ranks[static_cast<std::size_t>(r)].comm;
  return c;
}

A2aPeerBuffers peers(const Setup& S, bool dispatch) {
  A2aPeerBuffers p;
  for (int r = 0; r < kEp; ++r)
    p.rank[r] = (dispatch ? S.ranks[static_cast<std::size_t>(r)].dispatch_buf
                          : S.ranks[static_cast<std::size_t>(r)].combine_buf)
                    ->view();
  return p;
}

// Enqueues one dispatch (or combine) of every rank; ours: begins then ends; nccl: one group.
void enqueue(Setup& S, A2aBackend b, bool dispatch, int sms) {
  ++S.epoch;
  if (b == A2aBackend::nccl) PPSIM_NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < kEp; ++r) {
    Rank& R = S.ranks[static_cast<std::size_t>(r)];
    set_dev(R);
    if (dispatch)
      a2a_dispatch_begin(call_of(S, b, r, sms), peers(S, true), R.src.get(), false, R.slot_token.get(),
                         R.expert_counts.get(), nullptr, R.stream->get());
    else
      a2a_combine_begin(call_of(S, b, r, sms), peers(S, false), R.src.get(), R.dispatch_buf->view().counts,
                        R.stream->get());
  }
  if (b == A2aBackend::nccl) {
    PPSIM_NCCL_CHECK(ncclGroupEnd());
    return;  // NCCL's receive is complete in stream order; the local reduce is not communication
  }
  for (int r = 0; r < kEp; ++r) {
    Rank& R = S.ranks[static_cast<std::size_t>(r)];
    set_dev(R);
    if (dispatch)
      a2a_dispatch_end(call_of(S, b, r, sms), R.dispatch_buf->view(), R.stream->get());
    else  // ours: the wait and the reduce (a copy here: one row per token); NCCL's reduce is not timed
      a2a_combine_end(call_of(S, b, r, sms), R.combine_buf->view(), R.rows_out.get(), nullptr, R.slot_of.get(), nullptr,
                      R.stream->get());
  }
}

// Median-of-reps timing of one exchange: each rank's time between events around it (both
// streams held 50 us first so both start together); a rep's time is the slower rank's.
std::vector<double> time_exchange(Setup& S, A2aBackend b, bool dispatch, int sms, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) enqueue(S, b, dispatch, sms);
  std::vector<std::vector<std::unique_ptr<Event>>> ev(static_cast<std::size_t>(kEp));
  for (int i = 0; i < reps; ++i) {
    for (int r = 0; r < kEp; ++r) {
      Rank& R = S.ranks[static_cast<std::size_t>(r)];
      set_dev(R);
      hold_stream(R.stream->get(), 50);
      ev[static_cast<std::size_t>(r)].push_back(std::make_unique<Event>());
      ev[static_cast<std::size_t>(r)].back()->record(R.stream->get());
    }
    enqueue(S, b, dispatch, sms);
    for (int r = 0; r < kEp; ++r) {
      Rank& R = S.ranks[static_cast<std::size_t>(r)];
      set_dev(R);
      ev[static_cast<std::size_t>(r)].push_back(std::make_unique<Event>());
      ev[static_cast<std::size_t>(r)].back()->record(R.stream->get());
    }
  }
  std::vector<double> us(static_cast<std::size_t>(reps), 0.0);
  for (int r = 0; r < kEp; ++r) {
    set_dev(S.ranks[static_cast<std::size_t>(r)]);
    S.ranks[static_cast<std::size_t>(r)].stream->sync();
    for (int i = 0; i < reps; ++i) {
      const auto& e = ev[static_cast<std::size_t>(r)];
      us[static_cast<std::size_t>(i)] =
          std::max(us[static_cast<std::size_t>(i)],
                   1e3 * e[static_cast<std::size_t>(2 * i + 1)]->ms_since(*e[static_cast<std::size_t>(2 * i)]));
    }
  }
  return us;
}

// GEMM loop (4096^3 bf16, cuBLASLt) on GPU devices[0]: ms for `iters` products.
struct GemmLoop {
  std::unique_ptr<gpu::Stream> stream;
  Gemm gemm{false};
  DeviceBuffer<bf16> a, b, c;
  int iters;
  explicit GemmLoop(int iters_) : iters(iters_) {
    stream = std::make_unique<gpu::Stream>();
    const std::size_t n = 4096ull * 4096ull;
    for (auto* x : {&a, &b, &c}) x->resize(n);
    fill_uniform(a.get(), static_cast<std::int64_t>(n), 1.f, 1, nullptr);
    fill_uniform(b.get(), static_cast<std::int64_t>(n), 1.f, 2, nullptr);
    PPSIM_CUDA_CHECK(cudaDeviceSynchronize());
  }
  // Enqueues the loop between two events; returns them.
  std::pair<std::unique_ptr<Event>, std::unique_ptr<Event>> enqueue() {
    auto e0 = std::make_unique<Event>(), e1 = std::make_unique<Event>();
    e0->record(stream->get());
    for (int i = 0; i < iters; ++i) gemm.linear_fwd(c.get(), a.get(), b.get(), 4096, 4096, 4096, stream->get());
    e1->record(stream->get());
    return {std::move(e0), std::move(e1)};
  }
  double run_alone_ms() {
    auto [e0, e1] = enqueue();
    e1->sync();
    return e1->ms_since(*e0);
  }
};

std::vector<int> int_list(const std::string& s) {
  std::vector<int> v;
  std::size_t p = 0;
  while (p < s.size()) {
    const std::size_t q = s.find(',', p);
    v.push_back(std::stoi(s.substr(p, q == std::string::npos ? std::string::npos : q - p)));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"expert-parallel all-to-all: ours vs NCCL, and a GEMM beside it", "a2a_bench"};
  std::string sms_s = "20,8,4", mib_s = "1,2,4,8,16,32,64,128,256", which = "both";
  int reps = 20, warmup = 5, overlap_mib = 64, gemm_iters = 30, hidden = 4096;
  app.add_option("--sms", sms_s, "SM budgets (comm_sms; NCCL's maxCTAs)")->capture_default_str();
  app.add_option("--mib", mib_s, "MiB each rank sends per exchange")->capture_default_str();
  app.add_option("--a2a", which, "ours | nccl | both")->capture_default_str();
  app.add_option("--reps", reps)->capture_default_str();
  app.add_option("--warmup", warmup)->capture_default_str();
  app.add_option("--overlap-mib", overlap_mib, "size of the all-to-all beside the GEMM loop")->capture_default_str();
  app.add_option("--gemm-iters", gemm_iters)->capture_default_str();
  app.add_option("--hidden", hidden, "row width (bf16 elements)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    if (auto why = gpu_unavailable_reason(); !why.empty()) {
      std::fprintf(stderr, "a2a_bench: no GPU: %s\n", why.c_str());
      return kExitGpu;
    }
    const std::vector<int> sms_list = int_list(sms_s), mib_list = int_list(mib_s);
    std::vector<A2aBackend> backends;
    if (which == "both")
      backends = {A2aBackend::ours, A2aBackend::nccl};
    else
      backends = {parse_a2a_backend(which)};
    std::vector<int> devices = {0, 0};
    bool two = false;
    if (device_count() >= 2) {
      int a = 0, b = 0;
      PPSIM_CUDA_CHECK(cudaDeviceCanAccessPeer(&a, 0, 1));
      PPSIM_CUDA_CHECK(cudaDeviceCanAccessPeer(&b, 1, 0));
      if (a && b) {
        two = true;
        devices = {0, 1};
        for (int d : {0, 1}) (void)ppsim::gpu::enable_peer_access(d, 1 - d);
      }
    }
    if (!two) {
      std::printf(
          "# one GPU (or no peer access): both EP ranks on GPU 0, ours only (NCCL needs two GPUs, one per "
          "rank); bandwidth here is HBM-to-HBM, not NVLink\n");
      backends.erase(std::remove(backends.begin(), backends.end(), A2aBackend::nccl), backends.end());
    }
    int device_sms = 0;
    PPSIM_CUDA_CHECK(cudaDeviceGetAttribute(&device_sms, cudaDevAttrMultiProcessorCount, 0));
    std::printf("# %s x%d, %d SMs; EP 2, %d experts, hidden %d, reps %d (warm-up %d)\n", device_name(0).c_str(),
                two ? 2 : 1, device_sms, kExperts, hidden, reps, warmup);
    if (const char* env = std::getenv("NCCL_MAX_NCHANNELS")) std::printf("# NCCL_MAX_NCHANNELS=%s\n", env);
    std::printf("%-8s %-5s %4s %8s %10s %10s %10s %10s %10s\n", "op", "a2a", "sms", "MiB/rank", "min_us", "med_us",
                "max_us", "algbw_GBs", "remote_GBs");
    for (int sms : sms_list) {
      for (int mib : mib_list) {
        auto S = make_setup(devices, static_cast<std::int64_t>(mib) << 20, hidden);
        const double bytes = static_cast<double>(S->g.rows() * S->g.row_bytes());
        for (A2aBackend b : backends) {
          if (b == A2aBackend::nccl) make_nccl(*S, sms);
          for (bool dispatch : {true, false}) {
            const Stats st = stats_of(time_exchange(*S, b, dispatch, sms, warmup, reps));
            std::printf("%-8s %-5s %4d %8.1f %10.1f %10.1f %10.1f %10.1f %10.1f\n", dispatch ? "dispatch" : "combine",
                        a2a_backend_name(b), sms, bytes / (1 << 20), st.min, st.med, st.max, bytes / st.med / 1e3,
                        bytes * (kEp - 1) / kEp / st.med / 1e3);
          }
          if (b == A2aBackend::nccl) free_nccl(*S);
        }
        std::fflush(stdout);
      }
    }

    // GEMM beside the all-to-all, on GPU 0.
    std::printf("\n# 4096^3 bf16 GEMM loop (%d products) on GPU 0 beside dispatch+combine of %d MiB/rank\n", gemm_iters,
                overlap_mib);
    std::printf("%-5s %4s %10s %10s %9s %10s %12s\n", "a2a", "sms", "alone_ms", "beside_ms", "slowdown", "sm_share",
                "target<=");
    PPSIM_CUDA_CHECK(cudaSetDevice(0));
    GemmLoop loop(gemm_iters);
    std::vector<double> alone;
    for (int i = 0; i < 5; ++i) alone.push_back(loop.run_alone_ms());
    const double alone_ms = stats_of(alone).med;
    const int ranks_on_gpu0 = two ? 1 : 2;
    for (int sms : sms_list) {
      auto S = make_setup(devices, static_cast<std::int64_t>(overlap_mib) << 20, hidden);
      for (A2aBackend b : backends) {
        if (b == A2aBackend::nccl) make_nccl(*S, sms);
        const auto one = time_exchange(*S, b, true, sms, 2, 5);
        const double per_pair_ms = 2e-3 * stats_of(one).med;                                   // dispatch + combine
        const int pairs = static_cast<int>(alone_ms * 1.5 / std::max(per_pair_ms, 1e-3)) + 2;  // outlasts the loop
        std::vector<double> beside;
        for (int rep = 0; rep < 3; ++rep) {
          for (int i = 0; i < pairs; ++i) {
            enqueue(*S, b, true, sms);
            enqueue(*S, b, false, sms);
          }
          PPSIM_CUDA_CHECK(cudaSetDevice(0));
          auto [e0, e1] = loop.enqueue();
          e1->sync();
          beside.push_back(e1->ms_since(*e0));
          for (auto& R : S->ranks) {
            set_dev(R);
            R.stream->sync();
          }
          PPSIM_CUDA_CHECK(cudaSetDevice(0));
        }
        const double beside_ms = stats_of(beside).med;
        const double share = static_cast<double>(sms * ranks_on_gpu0) / device_sms;
        // The target: no more than the SMs given up (1 / (1 - share)) plus 5%.
        std::printf("%-5s %4d %10.3f %10.3f %8.3fx %9.1f%% %11.3fx\n", a2a_backend_name(b), sms, alone_ms, beside_ms,
                    beside_ms / alone_ms, 100 * share, 1.0 / (1.0 - share) + 0.05);
        if (b == A2aBackend::nccl) free_nccl(*S);
      }
      std::fflush(stdout);
    }
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "a2a_bench: %s\n", e.one_line().c_str());
    return e.exit_code();
  }
}
