// Errors. Input errors (YAML, CLI flags, schedule files, impossible requests) are one type that
// carries where (file:line:col, any part may be absent), a short lower-case message and an
// optional suggestion; the CLI prints them as one line and exits with a documented code.
// Internal invariants use PPSIM_CHECK, always on, printing the condition and the values.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace ppsim {

// Exit codes, documented in docs/CLI.md.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;   // a bug: an invariant failed
inline constexpr int kExitUsage = 2;      // unknown command/flag, bad flag value
inline constexpr int kExitInput = 3;      // bad config, schedule file, or impossible request
inline constexpr int kExitIo = 4;         // cannot read or write a file
inline constexpr int kExitGpu = 5;        // no GPU, missing library, CUDA/NCCL failure, timeout
inline constexpr int kExitLimit = 6;      // request over a resource limit
// 7: `ppsim fidelity --check` past a threshold (src/api/fidelity.h)
inline constexpr int kExitInvariant = 8;  // the answer breaks an invariant (cost/invariants.h); names the input

struct SourceLoc {
  std::string file;  // empty: not from a file
  int line = 0;      // 1-based; 0 = unknown
  int col = 0;       // 1-based; 0 = unknown
};

class InputError : public std::runtime_error {
 public:
  InputError(SourceLoc loc, std::string message, std::string suggestion = {}, int exit_code = kExitInput);
  explicit InputError(std::string message, std::string suggestion = {}, int exit_code = kExitInput)
      : InputError(SourceLoc{}, std::move(message), std::move(suggestion), exit_code) {}
  const SourceLoc& loc() const { return loc_; }
  const std::string& message() const { return message_; }
  const std::string& suggestion() const { return suggestion_; }
  int exit_code() const { return exit_code_; }
  // "file:line:col: message, did you mean 'x'?" (parts that are unknown are left out)
  std::string one_line() const;

 private:
  SourceLoc loc_;
  std::string message_;
  std::string suggestion_;
  int exit_code_;
};

// A broken invariant: a bug in ppsim, never the user's input. The CLI prints it and exits 1.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// `text` made safe for a one-line message: control characters (newlines included) and bytes
// that are not valid UTF-8 are written as \xNN, so that hostile input cannot split or garble the
// line the CLI prints.
std::string printable(const std::string& text);

// The closest candidate by edit distance, or "" when none is close enough to suggest.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);
// Levenshtein distance: the fewest characters inserted, deleted or changed to turn a into b.
std::size_t edit_distance(const std::string& a, const std::string& b);

[[noreturn]] void check_failed(const char* cond, const char* file, int line, const std::string& detail);

}  // namespace ppsim

#define PPSIM_CHECK(cond, ...)                                                           \
  do {                                                                                   \
    if (!(cond)) ::ppsim::check_failed(#cond, __FILE__, __LINE__, fmt::format(__VA_ARGS__)); \
  } while (0)
