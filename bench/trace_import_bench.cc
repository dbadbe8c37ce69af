// Trace import throughput: writes a synthetic Kineto trace of the requested size (default 1 GB,
// shaped like a 1F1B step of an MoE model: per sub-op a record_function range, an aten op, a
// runtime launch, its kernel and the ac2g flow pair), then imports it (`ppsim import-trace`'s
// library call), repeating; prints min/median/max wall time, MB/s of JSON, events/s and the
// process's peak RSS (getrusage). Targets (issue 20): 1 GB in under a minute, under 2 GB RAM.
// Usage: trace_import_bench [MB] [reps] [--gz] [--keep PATH]
#include <fmt/format.h>
#include <sys/resource.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "trace/import.h"

using namespace ppsim;

namespace {

// Streams events to a plain or gzip file; returns the uncompressed bytes written.
std::uint64_t write_trace(const std::string& path, std::uint64_t target_bytes, bool gz) {
  gzFile g = gz ? gzopen(path.c_str(), "wb1") : nullptr;
  std::FILE* f = gz ? nullptr : std::fopen(path.c_str(), "wb");
  if ((gz && g == nullptr) || (!gz && f == nullptr)) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
  std::uint64_t bytes = 0;
  auto put = [&](const std::string& s) {
    if (gz)
      gzwrite(g, s.data(), static_cast<unsigned>(s.size()));
    else
      std::fwrite(s.data(), 1, s.size(), f);
    bytes += s.size();
  };
  put(R"({"schemaVersion":1,"deviceProperties":[{"id":0,"name":"NVIDIA H100","numSms":132}],"traceEvents":[)"
      "\n");
  static const char* kSub[] = {"attn.F", "dispatch.F", "mlp.F",      "combine.F", "combine.B",
                               "mlp.I",  "mlp.W",      "dispatch.B", "attn.I",    "attn.W"};
  static const char* kKernel =
      "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_"
      "cublas";
  double cpu = 1.7e12, gpu = 1.7e12 + 50;  // us, as Kineto's epoch-based timestamps
  long corr = 1;
  std::string buf;
  bool first = true;
  for (long unit = 0; bytes < target_bytes; ++unit) {
    const int layer = static_cast<int>(unit / 10 % 16);
    const char* sub = kSub[unit % 10];
    buf.clear();
    buf += first ? "" : ",\n";
    first = false;
    buf += fmt::format(
        R"({{"ph":"X","cat":"user_annotation","name":"layer{}.{}","pid":4242,"tid":4242,"ts":{:.3f},"dur":9.5,"args":{{"External id":{}}}}},)"
        "\n",
        layer, sub, cpu, corr);
    buf += fmt::format(
        R"({{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":4242,"tid":4242,"ts":{:.3f},"dur":6.25,"args":{{"External id":{},"Sequence number":{}}}}},)"
        "\n",
        cpu + 1, corr, unit);
    buf += fmt::format(
        R"({{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":4242,"tid":4242,"ts":{:.3f},"dur":3.1,"args":{{"cbid":211,"correlation":{}}}}},)"
        "\n",
        cpu + 2, corr);
    const double dur = 40 + (unit % 7);
    buf += fmt::format(
        R"({{"ph":"X","cat":"kernel","name":"{}","pid":0,"tid":7,"ts":{:.3f},"dur":{:.3f},"args":{{"queued":0,"device":0,"context":1,"stream":{},"correlation":{},"registers per thread":168,"shared memory":213248,"blocks per SM":1.0,"warps per SM":8.0,"grid":[132,1,1],"block":[384,1,1],"est. achieved occupancy %":13}}}},)"
        "\n",
        kKernel, gpu, dur, unit % 10 == 1 || unit % 10 == 3 ? 20 : 7, corr);
    buf += fmt::format(R"({{"ph":"s","id":{},"pid":4242,"tid":4242,"ts":{:.3f},"cat":"ac2g","name":"ac2g"}},)"
                       "\n",
                       corr, cpu + 2);
    buf += fmt::format(R"({{"ph":"f","id":{},"pid":0,"tid":7,"ts":{:.3f},"cat":"ac2g","name":"ac2g","bp":"e"}})", corr,
                       gpu);
    put(buf);
    cpu += 12;
    gpu += dur + 1;
    ++corr;
  }
  put("\n]}\n");
  if (gz)
    gzclose(g);
  else
    std::fclose(f);
  return bytes;
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

}  // namespace

int main(int argc, char** argv) {
  double mb = 1000;
  int reps = 1;
  bool gz = false;
  std::string keep;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--gz") == 0)
      gz = true;
    else if (std::strcmp(argv[i], "--keep") == 0 && i + 1 < argc)
      keep = argv[++i];
    else
      pos.emplace_back(argv[i]);
  }
  if (!pos.empty()) mb = std::atof(pos[0].c_str());
  if (pos.size() > 1) reps = std::max(1, std::atoi(pos[1].c_str()));
  const std::string path = !keep.empty() ? keep
                                         : (std::filesystem::temp_directory_path() /
                                            fmt::format("ppsim_trace_bench_{}.json{}", ::getpid(), gz ? ".gz" : ""))
                                               .string();
  const auto w0 = std::chrono::steady_clock::now();
  const std::uint64_t bytes = write_trace(path, static_cast<std::uint64_t>(mb * 1e6), gz);
  const double wsec = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  std::printf("wrote %.1f MB of JSON%s to %s in %.1f s (%.1f MB on disk); peak RSS so far %.0f MB\n", bytes / 1e6,
              gz ? " (gzip)" : "", path.c_str(), wsec, std::filesystem::file_size(path) / 1e6, peak_rss_mb());
  std::vector<double> t;
  trace::ImportResult r;
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    r = trace::import_trace_file(path, {});
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  const double med = t[t.size() / 2];
  std::printf(
      "import: min %.2f s, median %.2f s, max %.2f s over %d run(s); %.0f MB/s of JSON, %.2f M events/s; %d GPU "
      "events, "
      "%d layers, unmapped %.3f ms\n",
      t.front(), med, t.back(), reps, bytes / 1e6 / med, static_cast<double>(r.events) / 1e6 / med, r.gpu_events,
      r.layers, static_cast<double>(r.unmapped) / 1e6);
  std::printf("peak RSS %.0f MB (target: < 2048 MB); time target: < 60 s for 1 GB -> %s\n", peak_rss_mb(),
              (med * 1000 / (bytes / 1e6) < 60 && peak_rss_mb() < 2048) ? "met" : "NOT met");
  if (keep.empty()) std::filesystem::remove(path);
  return 0;
}
