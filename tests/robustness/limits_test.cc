// Hostile and absurd input, one class at a time (docs/ROBUSTNESS.md): YAML configs, schedule
// CSVs, CLI flags and output files. Each class ends in one line on stderr and a documented
// non-zero exit code (docs/CLI.md), before any large allocation or simulation; never a crash.
// Messages are checked through the library API (exact text), exit codes through the binary.
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "catch.h"
#include "core/error.h"
#include "cost/config.h"
#include "cost/cost_model.h"
#include "cuda_validate/gpu_api.h"
#include "robustness/run_ppsim.h"
#include "schedules/notation.h"
#include "schedules/registry.h"

using namespace ppsim;
using ppsim::robust::Result;
using ppsim::robust::Scratch;

namespace {

const std::string kModel = "model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}\n";
const std::string kRest = "hardware: {name: h100}\nparallel: {pp: 2, microbatches: 4}\n";

// The one line the CLI would print for the error loading `text` raises; "" when it loads.
std::string config_error(const std::string& text, const std::vector<std::string>& sets = {}) {
  try {
    (void)load_config_text(text, "t.yaml", sets);
  } catch (const InputError& e) {
    return e.one_line();
  }
  return "";
}

std::string csv_error(const std::string& text, int* exit_code = nullptr) {
  try {
    (void)import_csv(text, "s.csv", 0, 0);
  } catch (const InputError& e) {
    if (exit_code != nullptr) *exit_code = e.exit_code();
    return e.one_line();
  }
  return "";
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// The "billion laughs" shape: a0 = 9 strings, a(i) = 9 references to a(i-1); a9 would expand to
// 9^10 (about 3.5e9) strings.
std::string laughs(const std::string& indent) {
  std::string y = indent + "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i <= 9; ++i) {
    y += fmt::format("{}a{}: &a{} [", indent, i, i);
    for (int k = 0; k < 9; ++k) y += fmt::format("{}*a{}", k ? ", " : "", i - 1);
    y += "]\n";
  }
  return y;
}

}  // namespace

// ---- YAML ----------------------------------------------------------------------------------

TEST_CASE("yaml: huge values are refused at their node, before any work", "[robustness]") {
  // layers = 10^9 (limit 2^16), seq_len = 10^12 (limit 2^24), a value past 64 bits.
  CHECK(config_error("model: {layers: 1000000000, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}\n" + kRest) ==
        "t.yaml:1:17: model.layers must be in [1, 65536], got 1000000000");
  CHECK(config_error("model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 1000000000000}\n" + kRest) ==
        "t.yaml:1:81: model.seq_len must be in [1, 16777216], got 1000000000000");
  CHECK(config_error("model: {layers: 4, hidden: 99999999999999999999999, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}\n" +
                     kRest) == "t.yaml:1:28: model.hidden must be in [1, 1048576], got 99999999999999999999999");
  CHECK(config_error(kModel + "hardware: {name: h100}\nparallel: {pp: 1000000, microbatches: 4}\n") ==
        "t.yaml:3:16: parallel.pp must be in [1, 4096], got 1000000");
  CHECK(config_error(kModel + "hardware: {name: h100}\nparallel: {pp: 2, microbatches: 1000000000}\n") ==
        "t.yaml:3:33: parallel.microbatches must be in [1, 1048576], got 1000000000");
  CHECK(config_error(kModel + kRest + "times: {F: 1e300, B: 1}\n") == "t.yaml:4:12: times.F must be in [0, 1000000], got 1e300");
  CHECK(config_error(kModel + kRest + "times: {F: nan, B: 1}\n") == "t.yaml:4:12: times.F must be a finite number, got 'nan'");
  CHECK(config_error(kModel + kRest + "times: {F: .nan, B: 1}\n") == "t.yaml:4:12: times.F must be a number, got '.nan'");

  Scratch s("yaml_huge");
  s.write("c.yaml", "model: {layers: 1000000000, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}\n" + kRest);
  const Result r = run_ppsim(s, "compare c.yaml");
  CHECK(r.code == kExitInput);
  CHECK(r.err == "ppsim: c.yaml:1:17: model.layers must be in [1, 65536], got 1000000000\n");
}

TEST_CASE("yaml: deep nesting is an error, not a stack overflow", "[robustness]") {
  // 100,000 levels of flow sequences, then of flow maps: yaml-cpp's depth guard stops both.
  const std::string seqs = "model: " + repeat("[", 100000) + repeat("]", 100000) + "\n";
  const std::string maps = "model: " + repeat("{a: ", 100000) + "1" + repeat("}", 100000) + "\n";
  for (const std::string& text : {seqs, maps}) {
    const std::string e = config_error(text);
    INFO(e);
    CHECK(e.rfind("t.yaml:1:", 0) == 0);
    CHECK(e.find("invalid YAML: nested more than ") != std::string::npos);
    CHECK(e.find(" levels deep") != std::string::npos);
  }
  // Block-style maps: 100 levels parse, and the schema refuses the first unknown key; 1,000
  // levels stop at yaml-cpp's depth guard, which trips on line 499.
  auto block = [](int levels) {
    std::string y = "model:\n";
    for (int i = 0; i < levels; ++i) y += std::string(static_cast<std::size_t>(2 * (i + 1)), ' ') + "a:\n";
    return y;
  };
  CHECK(config_error(block(100)) == "t.yaml:2:3: unknown key 'a' in 'model'");
  CHECK(config_error(block(1000)) == "t.yaml:499:999: invalid YAML: nested more than 499 levels deep");

  Scratch s("yaml_deep");
  s.write("c.yaml", seqs);
  const Result r = run_ppsim(s, "compare c.yaml");
  CHECK(r.code == kExitInput);
  CHECK(r.one_error_line());
}

TEST_CASE("yaml: alias bombs (billion laughs) are never expanded", "[robustness]") {
  // Under plan: (stored, not walked) the config loads; yaml-cpp shares aliased nodes.
  CHECK(config_error(kModel + kRest + "plan:\n" + laughs("  ")) == "");
  // Where the schema walks, the first wrong node is the error; an alias's errors point at the
  // node it names (a8's list on line 10, a9's on line 11).
  CHECK(config_error(laughs("")) == "t.yaml:1:1: unknown top-level key 'a0'");
  // (An alias must follow its anchor: plan: comes first.)
  const std::string split = "plan:\n" + laughs("  ") + kModel + "hardware: {name: h100}\nparallel: {pp: 2, microbatches: 4, layer_split: *a9}\n";
  CHECK(config_error(split) == "t.yaml:10:7: parallel.layer_split[0] must be an integer, got a list");
  const std::string model = "plan:\n" + laughs("  ") + "model: *a9\n" + kRest;
  CHECK(config_error(model) == "t.yaml:11:7: model must be a map, got a list");
}

TEST_CASE("yaml: binary garbage, NUL bytes, control characters: one printable line", "[robustness]") {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int trial = 0; trial < 200; ++trial) {
    std::string text(static_cast<std::size_t>(1 + trial * 7), '\0');
    for (auto& c : text) c = static_cast<char>(byte(rng));
    const std::string e = config_error(text);
    INFO("trial " << trial << ": " << e);
    CHECK(!e.empty());
    CHECK(e.find('\n') == std::string::npos);
    CHECK(e.find('\r') == std::string::npos);
    CHECK(e.find('\0') == std::string::npos);
  }
  // A key spelt with YAML escapes (a newline, a bell) is printed escaped, on one line.
  CHECK(config_error("\"mo\\ndel\\a\": 1\n") == "t.yaml:1:1: unknown top-level key 'mo\\x0Adel\\x07', did you mean 'model'?");

  Scratch s("yaml_binary");
  std::string bin(4096, '\0');
  for (auto& c : bin) c = static_cast<char>(byte(rng));
  s.write("c.yaml", bin);
  const Result r = run_ppsim(s, "compare c.yaml");
  CHECK(r.code == kExitInput);
  CHECK(r.one_error_line());
}

TEST_CASE("yaml: an empty file, a directory, a missing file", "[robustness]") {
  CHECK(config_error("") == "t.yaml: model is required (the model's dimensions)");
  CHECK(config_error("\n\n# only a comment\n") == "t.yaml: model is required (the model's dimensions)");
  Scratch s("yaml_files");
  s.write("empty.yaml", "");
  Result r = run_ppsim(s, "compare empty.yaml");
  CHECK(r.code == kExitInput);
  CHECK(r.err == "ppsim: empty.yaml: model is required (the model's dimensions)\n");
  std::filesystem::create_directories(s.path("dir.yaml"));
  r = run_ppsim(s, "compare dir.yaml");
  CHECK(r.code == kExitIo);
  CHECK(r.err == "ppsim: dir.yaml: cannot read the file (it is a directory)\n");
  r = run_ppsim(s, "compare missing.yaml");
  CHECK(r.code == kExitIo);
  CHECK(r.err == "ppsim: missing.yaml: cannot read the file\n");
}

TEST_CASE("files over the size limits are refused unread: exit 6", "[robustness]") {
  // Sparse files: a YAML config over 16 MiB, a schedule CSV over 64 MiB (read up to the limit).
  Scratch s("sizes");
  s.write("big.yaml", "");
  std::filesystem::resize_file(s.path("big.yaml"), (16u << 20) + 1);
  Result r = run_ppsim(s, "compare big.yaml");
  CHECK(r.code == kExitLimit);
  CHECK(r.err == "ppsim: big.yaml: the file is 16777217 bytes, over the limit of 16777216 for a YAML file\n");
  s.write("big.csv", "");
  std::filesystem::resize_file(s.path("big.csv"), (64u << 20) + 1);
  r = run_ppsim(s, "show --schedule-file big.csv");
  CHECK(r.code == kExitLimit);
  CHECK(r.err == "ppsim: big.csv: schedule file larger than 64 MiB\n");
}

TEST_CASE("yaml: a BOM and CRLF line ends load like plain LF", "[robustness]") {
  std::string crlf;
  for (char c : kModel + kRest) {
    if (c == '\n') crlf += '\r';
    crlf += c;
  }
  CHECK(config_error("\xEF\xBB\xBF" + kModel + kRest) == "");
  CHECK(config_error(crlf) == "");
}

// ---- CSV -----------------------------------------------------------------------------------

TEST_CASE("csv: huge numbers are refused with the limit, before any allocation", "[robustness]") {
  int code = 0;
  // Micro-batch 10^8: over the 2^20 micro-batch limit (exit 6).
  CHECK(csv_error("0F100000000,0B100000000\n", &code) == "s.csv: micro-batch 100000000 is over the limit of 1048576");
  CHECK(code == kExitLimit);
  // Past 10^8 the parser stops reading digits.
  CHECK(csv_error("0F99999999999999999999,0B0\n", &code) ==
        "s.csv:1:1: bad action '0F99999999999999999999': stage and micro-batch numbers must be at most 100000000");
  CHECK(code == kExitInput);
  // Stage 10^6 on one rank: more than 64 stages per rank.
  CHECK(csv_error("1000000F0,1000000B0\n") == "s.csv: stage 1000000 is out of range for 1 ranks");
  // 5,000 rank lines: over the 4,096-rank limit (exit 6).
  CHECK(csv_error(repeat("0F0\n", 5000), &code) == "s.csv: the file has 5000 rank lines, over the limit of 4096 ranks (docs/ROBUSTNESS.md)");
  CHECK(code == kExitLimit);

  Scratch s("csv_huge");
  s.write("s.csv", "0F100000000,0B100000000\n");
  const Result r = run_ppsim(s, "show --schedule-file s.csv");
  CHECK(r.code == kExitLimit);
  CHECK(r.err == "ppsim: s.csv: micro-batch 100000000 is over the limit of 1048576\n");
}

TEST_CASE("csv: a million empty fields, a million blank lines", "[robustness]") {
  CHECK(csv_error(repeat(",", 1000000) + "\n") == "s.csv: the file has no actions");
  CHECK(csv_error(repeat("\n", 1000000)) == "s.csv: no ranks: the file has no action lines");
  CHECK(csv_error(repeat("None,", 200000) + "\n") == "s.csv: the file has no actions");
}

TEST_CASE("csv: CRLF line ends and a UTF-8 BOM import like plain LF", "[robustness]") {
  const std::string lf = "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n";
  const Schedule plain = import_csv(lf, "s.csv", 0, 0);
  const Schedule crlf = import_csv("0F0,0F1,0B0,0B1\r\n1F0,1B0,1F1,1B1\r\n", "s.csv", 0, 0);
  const Schedule bom = import_csv("\xEF\xBB\xBF" + lf, "s.csv", 0, 0);
  CHECK(crlf.ranks == plain.ranks);
  CHECK(bom.ranks == plain.ranks);
  CHECK(schedule_to_csv(bom) == lf);
}

TEST_CASE("csv: unbalanced parentheses and broken pairs", "[robustness]") {
  CHECK(csv_error("(0F0;0B0,0B0\n") == "s.csv:1:1: bad action '(0F0;0B0': an overlapped pair is written (aFm;bBn)OVERLAP_F_B");
  CHECK(csv_error("0F0;0B0)OVERLAP_F_B\n") ==
        "s.csv:1:1: bad action '0F0;0B0)OVERLAP_F_B': expected {stage}{F|I|W|B}{micro-batch}, e.g. 3F7");
  CHECK(csv_error("((0F0;0B0)OVERLAP_F_B\n") ==
        "s.csv:1:1: bad action '((0F0;0B0)OVERLAP_F_B': each op is {stage}{F|I|W|B}{micro-batch}, e.g. 3F7");
  CHECK(csv_error("(0F0)OVERLAP_F_B\n") == "s.csv:1:1: bad action '(0F0)OVERLAP_F_B': an overlapped pair needs two ops separated by ';'");
  CHECK(csv_error("(0B0;0F0)OVERLAP_F_B\n") ==
        "s.csv:1:1: bad action '(0B0;0F0)OVERLAP_F_B': an overlapped pair is a forward then a backward, e.g. (0F7;7B3)OVERLAP_F_B");
  // Control characters inside a token are printed escaped: the message stays one line.
  CHECK(csv_error("0F0,0\vB0\n") == "s.csv:1:5: bad action '0\\x0BB0': expected {stage}{F|I|W|B}{micro-batch}, e.g. 3F7");
}

TEST_CASE("csv: a directory, a missing file, an empty file", "[robustness]") {
  Scratch s("csv_files");
  std::filesystem::create_directories(s.path("dir.csv"));
  Result r = run_ppsim(s, "show --schedule-file dir.csv");
  CHECK(r.code == kExitIo);
  CHECK(r.err == "ppsim: dir.csv: cannot open the schedule file (it is a directory)\n");
  r = run_ppsim(s, "show --schedule-file missing.csv");
  CHECK(r.code == kExitIo);
  CHECK(r.err == "ppsim: missing.csv: cannot open the schedule file\n");
  s.write("empty.csv", "");
  r = run_ppsim(s, "show --schedule-file empty.csv");
  CHECK(r.code == kExitInput);
  CHECK(r.err == "ppsim: empty.csv: no ranks: the file has no action lines\n");
}

// ---- CLI -----------------------------------------------------------------------------------

TEST_CASE("cli: huge numbers", "[robustness]") {
  Scratch s("cli_huge");
  Result r = run_ppsim(s, "show gpipe --pp 99999999999999999999");
  CHECK(r.code == kExitUsage);
  CHECK(r.err == "ppsim: Could not convert: --pp = 99999999999999999999 (see 'ppsim show --help')\n");
  r = run_ppsim(s, "show gpipe --pp 4 --microbatches 1000000000");
  CHECK(r.code == kExitLimit);
  CHECK(r.err == "ppsim: M=1000000000 is over the limit of 1048576 micro-batches (docs/ROBUSTNESS.md)\n");
  r = run_ppsim(s, "compare --p2p-latency 1e400");
  CHECK(r.code == kExitUsage);
  CHECK(r.err == "ppsim: --p2p-latency: expected a number in [0, 1e9], got inf\n");
  r = run_ppsim(s, "compare --times F=1e10,B=1");
  CHECK(r.code == kExitUsage);
  CHECK(r.err == "ppsim: --times: F = 1e10 is too large (at most 1e9 units)\n");
}

TEST_CASE("cli: negative numbers", "[robustness]") {
  Scratch s("cli_negative");
  Result r = run_ppsim(s, "show gpipe --pp -3");
  CHECK(r.code == kExitUsage);
  CHECK(r.err == "ppsim: --pp: P must be >= 1, got -3\n");
  r = run_ppsim(s, "show gpipe --microbatches -1");
  CHECK(r.code == kExitUsage);
  CHECK(r.err == "ppsim: --microbatches: M must be >= 1, got -1\n");
  r = run_ppsim(s, "compare --p2p-latency -1");
  CHECK(r.code == kExitUsage);
  CHECK(r.err == "ppsim: --p2p-latency: expected a number in [0, 1e9], got -1\n");
  r = run_ppsim(s, "compare --times F=-1,B=2");
  CHECK(r.code == kExitUsage);
  CHECK(r.err == "ppsim: --times: F must be >= 0, got -1\n");
  r = run_ppsim(s, "compare --max-ops -1");
  CHECK(r.code == kExitUsage);
  CHECK(r.err == "ppsim: --max-ops: expected a count >= 1, got -1\n");
  r = run_ppsim(s, "plan --max-ops -1 x.yaml");  // used to be ignored silently
  CHECK(r.code == kExitUsage);
  CHECK(r.err == "ppsim: --max-ops: expected a count >= 1, got -1\n");
  // INT_MIN was once the options' "not given" marker: given, it must not pass for an absent flag
  // (it used to run the default P = 8); it is refused as any P < 1 is.
  r = run_ppsim(s, "show 1f1b --pp -2147483648 -m 4");
  CHECK(r.code == kExitUsage);
  CHECK(r.err == "ppsim: --pp: P must be >= 1, got -2147483648\n");
  CHECK(r.out.empty());
  r = run_ppsim(s, "compare -m -2147483648");
  CHECK(r.code == kExitUsage);
  CHECK(r.err == "ppsim: --microbatches: M must be >= 1, got -2147483648\n");
}

TEST_CASE("cli: NaN for floats", "[robustness]") {
  Scratch s("cli_nan");
  Result r = run_ppsim(s, "compare --p2p-latency nan");
  CHECK(r.code == kExitUsage);
  CHECK(r.err == "ppsim: --p2p-latency: expected a number in [0, 1e9], got nan\n");
  // --a2a nan used to switch the overlap model off silently (exit 0).
  r = run_ppsim(s, "compare --a2a nan");
  CHECK(r.code == kExitUsage);
  CHECK(r.err == "ppsim: --a2a: expected a number, got nan\n");
  r = run_ppsim(s, "compare --a2a 1 --attn-share nan");
  CHECK(r.code == kExitUsage);
  CHECK(r.err == "ppsim: --attn-share: expected a number, got nan\n");
  r = run_ppsim(s, "compare --times F=nan,B=1");
  CHECK(r.code == kExitUsage);
  CHECK(r.err == "ppsim: --times: F must be a number, got 'nan'\n");
}

TEST_CASE("cli: repeated flags", "[robustness]") {
  Scratch s("cli_repeat");
  Result r = run_ppsim(s, "compare --pp 4 --pp 8");
  CHECK(r.code == kExitUsage);
  CHECK(r.err == "ppsim: --pp: At Most 1 required but received 2 (see 'ppsim compare --help')\n");
  r = run_ppsim(s, "show gpipe --format json --format csv");
  CHECK(r.code == kExitUsage);
  CHECK(r.err == "ppsim: --format: At Most 1 required but received 2 (see 'ppsim show --help')\n");
}

TEST_CASE("cli: the op limit holds on the config path, and --max-ops overrides it", "[robustness]") {
  Scratch s("cli_config_limit");
  // P = 4096, M = 2^20: 1F1B needs about 3*4096*2*2^20 = 25,769,803,776 ops (the estimate
  // counts F, I, W and 2 chunks per rank).
  s.write("big.yaml", "model: {layers: 4096, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}\n"
                      "hardware: {name: h100}\nparallel: {pp: 4096, microbatches: 1048576, schedule: 1f1b}\n");
  Result r = run_ppsim(s, "compare big.yaml");
  CHECK(r.code == kExitLimit);
  CHECK(r.err == "ppsim: 1f1b with P=4096, M=1048576 would generate about 25769803776 ops, over the limit of 200000000 "
                 "(raise it with --max-ops)\n");
  // P = 4, M = 64: 3*4*2*64 = 1,536 ops. Under --max-ops 1000 refused; under 2000 it runs.
  s.write("small.yaml", "model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}\n"
                        "hardware: {name: h100}\nparallel: {pp: 4, microbatches: 64, schedule: 1f1b}\n");
  r = run_ppsim(s, "compare small.yaml --max-ops 1000");
  CHECK(r.code == kExitLimit);
  CHECK(r.err == "ppsim: 1f1b with P=4, M=64 would generate about 1536 ops, over the limit of 1000 (raise it with --max-ops)\n");
  r = run_ppsim(s, "compare small.yaml --max-ops 2000");
  CHECK(r.code == kExitOk);
  CHECK(r.err.empty());
}

// ---- output files --------------------------------------------------------------------------

TEST_CASE("output files: a failing command leaves no file, partial or whole", "[robustness]") {
  Scratch s("outputs");
  const std::string outputs = "-o out.json --svg t.svg --trace t.trace --timeline t.tl";
  auto left = [&]() {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(s.dir())) names.push_back(e.path().filename().string());
    return names;
  };
  // Constraint failure (chimera needs an even P), then a bad flag value: nothing is written.
  Result r = run_ppsim(s, "simulate -s chimera --pp 3 --microbatches 6 " + outputs);
  CHECK(r.code == kExitInput);
  CHECK(left().empty());
  r = run_ppsim(s, "simulate -s 1f1b --a2a nan " + outputs);
  CHECK(r.code == kExitUsage);
  CHECK(left().empty());
  // A write that fails (the target is a directory): exit 4, the directory is untouched and
  // no temporary file is left beside it.
  std::filesystem::create_directories(s.path("taken"));
  r = run_ppsim(s, "compare -s 1f1b --pp 2 --microbatches 2 --format json -o taken");
  CHECK(r.code == kExitIo);
  CHECK(r.err == "ppsim: taken: cannot rename temporary file into place\n");
  CHECK(std::filesystem::is_directory(s.path("taken")));
  CHECK(left() == std::vector<std::string>{"taken"});
  // The same failure on the main output after the side outputs: those are not left behind
  // either (they used to be written first, and stayed).
  r = run_ppsim(s, "simulate -s 1f1b --pp 2 --microbatches 2 -o taken --svg t.svg --trace t.trace --timeline t.tl");
  CHECK(r.code == kExitIo);
  CHECK(r.err == "ppsim: taken: cannot rename temporary file into place\n");
  CHECK(left() == std::vector<std::string>{"taken"});
  std::filesystem::remove(s.path("taken"));
  // An existing output file keeps its old content when the command fails.
  s.write("out.json", "old");
  r = run_ppsim(s, "compare --pp -1 -o out.json");
  CHECK(r.code == kExitUsage);
  CHECK(ppsim::test::read_file(s.path("out.json")) == "old");
  // And the same command that succeeds writes every file.
  std::filesystem::remove(s.path("out.json"));
  r = run_ppsim(s, "simulate -s 1f1b --pp 2 --microbatches 2 " + outputs);
  CHECK(r.code == kExitOk);
  for (const char* f : {"out.json", "t.svg", "t.trace", "t.tl"}) CHECK(std::filesystem::file_size(s.path(f)) > 0);
}

// ---- GPU commands without a GPU ------------------------------------------------------------

TEST_CASE("profile and validate without a GPU: one line, exit 5", "[robustness]") {
  const std::string why = gpu::gpu_unavailable_reason();
  if (why.empty()) PPSIM_SKIP("a usable GPU is present: the no-GPU path cannot be reached here");
  Scratch s("no_gpu");
  s.write("c.yaml", kModel + kRest);
  for (const std::string cmd : {"profile", "validate"}) {
    const Result r = run_ppsim(s, cmd + " c.yaml");
    INFO(r.err);
    CHECK(r.code == kExitGpu);
    CHECK(r.err == "ppsim: " + cmd + ": " + why + "\n");
    CHECK(r.one_error_line());
  }
}
