// libFuzzer target: bytes -> argv for the whole CLI (cli::run_main, in-process), split on NUL and
// newline: "compare\n--pp\n4" is `ppsim compare --pp 4`. Any exit code is fine; a crash, a
// sanitizer report, an escaping exception or a hang is a bug (docs/ROBUSTNESS.md).
//
// Not obvious:
// - The target works in a private temp dir (made at start-up, then the cwd), which before every
//   input is emptied and given fixtures the arguments may name: c.yaml (a config), s.csv (a
//   schedule), profile.yaml (a profile c.yaml does not use, for a --set profile=...).
//   Arguments holding '/' or a backslash (a YAML escape in --set can spell '/') are skipped, so
//   every file the CLI reads or writes is in that dir. Relative paths among libFuzzer's own
//   arguments (corpus dirs, -artifact_prefix=...) are made absolute first.
// - Arguments mentioning max-ops are skipped and the op limit is lowered to kFuzzMaxOps before
//   each input: a legal request near the default 2e8-op limit takes seconds and gigabytes.
// - stdout goes to /dev/null (PPSIM_FUZZ_STDOUT=1 keeps it); error lines still go to stderr
//   (tools/fuzz.sh passes -close_fd_mask=3 to silence both while fuzzing).
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/run_main.h"
#include "schedules/registry.h"

namespace {

namespace fs = std::filesystem;

constexpr long long kFuzzMaxOps = 50'000;
constexpr std::size_t kMaxArgs = 64;

const char* kConfig = R"(model: {layers: 8, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32,
        moe: {experts: 4, top_k: 2, expert_ffn_hidden: 32}, dense_layers_first: 2}
hardware: {name: h100}
parallel: {pp: 2, microbatches: 4, ep: 2, dp: 2, schedule: all}
)";
const char* kSchedule = "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n";
const char* kProfile = "version: 1\nop_ms: {F: 1, B: 2, W: 1}\n";

fs::path g_dir;
std::vector<std::string> g_args;  // libFuzzer's argv after Initialize: it keeps pointers into it
std::vector<char*> g_argv;

void write(const char* name, const char* text) { std::ofstream(g_dir / name, std::ios::binary) << text; }

void reset_dir() {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(g_dir, ec)) fs::remove_all(e.path(), ec);
  write("c.yaml", kConfig);
  write("s.csv", kSchedule);
  write("profile.yaml", kProfile);
}

std::string absolute(const std::string& p) { return p.empty() || p[0] == '/' ? p : fs::absolute(p).string(); }

// libFuzzer's path arguments, made absolute so that they survive the chdir.
std::string absolutize_arg(const std::string& arg) {
  if (arg.empty()) return arg;
  if (arg[0] != '-') return absolute(arg);
  for (const char* flag : {"-artifact_prefix=", "-exact_artifact_path=", "-dict=", "-features_dir="}) {
    const std::string f = flag;
    if (arg.rfind(f, 0) == 0) return f + absolute(arg.substr(f.size()));
  }
  return arg;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  g_args.assign(*argv, *argv + *argc);
  for (std::size_t i = 1; i < g_args.size(); ++i) g_args[i] = absolutize_arg(g_args[i]);
  for (auto& a : g_args) g_argv.push_back(a.data());
  g_argv.push_back(nullptr);
  *argv = g_argv.data();

  std::string tmpl = (fs::temp_directory_path() / "ppsim_fuzz_cli.XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::perror("fuzz_cli: mkdtemp");
    std::exit(1);
  }
  g_dir = tmpl;
  fs::current_path(g_dir);
  const char* keep = std::getenv("PPSIM_FUZZ_STDOUT");
  if (keep == nullptr || std::string(keep) != "1") {
    const int fd = ::open("/dev/null", O_WRONLY);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::close(fd);
    }
  }
  std::atexit([] {
    std::error_code ec;
    fs::remove_all(g_dir, ec);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> args{"ppsim"};
  if (!bytes.empty()) {
    const std::string seps("\0\n", 2);
    for (std::size_t pos = 0; pos <= bytes.size();) {
      std::size_t end = bytes.find_first_of(seps, pos);
      if (end == std::string::npos) end = bytes.size();
      args.push_back(bytes.substr(pos, end - pos));
      pos = end + 1;
    }
    if (seps.find(bytes.back()) != std::string::npos) args.pop_back();  // "show\n" is `ppsim show`
  }
  if (args.size() > kMaxArgs) return -1;
  for (const auto& a : args)
    if (a.find_first_of("/\\") != std::string::npos || a.find("max-ops") != std::string::npos) return -1;

  reset_dir();
  ppsim::limits() = ppsim::Limits{};
  ppsim::limits().max_ops = kFuzzMaxOps;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  (void)ppsim::cli::run_main(static_cast<int>(args.size()), argv.data());
  std::fflush(stdout);
  return 0;
}
