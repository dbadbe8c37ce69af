// Helpers for the robustness tests: run the ppsim binary in a private scratch dir and capture
// its exit code, stdout and stderr; check the "one line on stderr" rule of docs/CLI.md.
#pragma once
#include <sys/wait.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "test_util.h"

namespace ppsim::robust {

// A scratch dir per test process (ctest runs each test case as its own process), emptied on
// construction and removed on destruction.
class Scratch {
 public:
  explicit Scratch(const std::string& tag)
      : dir_(std::filesystem::temp_directory_path() / fmt::format("ppsim_robust_{}_{}", tag, ::getpid())) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& content) const {
    std::ofstream(dir_ / name, std::ios::binary) << content;
    return path(name);
  }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

struct Result {
  int code = -1;
  std::string out, err;
  // Exactly one line on stderr, "ppsim: ..." (docs/CLI.md).
  bool one_error_line() const {
    return err.rfind("ppsim: ", 0) == 0 && !err.empty() && err.back() == '\n' && err.find('\n') == err.size() - 1;
  }
};

// Runs `ppsim <args>` with `scratch` as the working directory, under coreutils' `timeout`: a
// run that hangs is killed and reads as exit code 124, so that a hang fails a test instead of
// stalling the suite.
inline Result run_ppsim(const Scratch& scratch, const std::string& args, int timeout_s = 60) {
  const std::string out = scratch.path(".stdout"), err = scratch.path(".stderr");
  const std::string cmd = fmt::format("cd '{}' && timeout {} {} {} >'{}' 2>'{}'", scratch.dir().string(), timeout_s,
                                      PPSIM_BINARY, args, out, err);
  const int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ppsim::test::read_file(out);
  r.err = ppsim::test::read_file(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

}  // namespace ppsim::robust
