// Inputs that crashed, hung or exhausted memory, each fed again through the API (or the binary)
// that met it, with the one line it must now end in (docs/ROBUSTNESS.md lists how each was found
// and fixed). Inputs that once hung run through the binary first, under `timeout` (run_ppsim.h),
// so that a regression fails the test (exit 124) instead of hanging the suite.
#include <string>

#include "catch.h"
#include "core/error.h"
#include "cost/cost_model.h"
#include "robustness/run_ppsim.h"
#include "schedules/notation.h"
#include "schedules/registry.h"

using namespace ppsim;
using ppsim::robust::Result;
using ppsim::robust::Scratch;

namespace {

std::string config_error(const std::string& text) {
  try {
    (void)load_config_text(text, "fuzz.yaml", {});
  } catch (const InputError& e) {
    return e.one_line();
  }
  return "";
}

}  // namespace

TEST_CASE("regression: a lone ',' made YAML::LoadAll loop forever (fuzz_config timeout)", "[robustness]") {
  // fuzz-out/fuzz_config/timeout-161092e37b956678ff8153db2c9ad0feb36d3378, 44 bytes. yaml-cpp
  // 0.7's LoadAll kept returning an empty document for the unconsumed ',' (jbeder/yaml-cpp#1040),
  // allocating a node each time. yaml_reader now loads one document with YAML::Load and looks
  // for a second with the event parser, two documents at most.
  const std::string input = ", vocab: 1000,ql_see n: 21, dropblocking_p2p";
  Scratch s("reg_comma");
  s.write("c.yaml", input);
  s.write("comma.yaml", ",");
  Result r = run_ppsim(s, "compare c.yaml", 20);
  REQUIRE(r.code == kExitInput);
  CHECK(r.err == "ppsim: c.yaml:1:1: model is required (the model's dimensions)\n");
  r = run_ppsim(s, "compare comma.yaml", 20);
  REQUIRE(r.code == kExitInput);
  CHECK(config_error(input) == "fuzz.yaml:1:1: model is required (the model's dimensions)");
  CHECK(config_error(",") == "fuzz.yaml:1:1: model is required (the model's dimensions)");
  // A real second document is still refused, at its first node.
  CHECK(config_error("a: 1\n---\nb: 2\n") == "fuzz.yaml:3:1: expected one YAML document, found a second one");
}

TEST_CASE("regression: a 15-byte CSV asked for a 2 GB (stage, micro-batch) table", "[robustness]") {
  // Stage 63 and micro-batch 10^6 on one rank: 64 x 1,000,001 entries, four 8-byte tables in
  // the validator (11 s and 2 GB before). import_csv now compares the table with the file's
  // op count first: a complete file lists an F and a backward per entry.
  int code = 0;
  std::string line;
  try {
    (void)import_csv("0F0,63B1000000\n", "s.csv", 0, 0);
  } catch (const InputError& e) {
    line = e.one_line();
    code = e.exit_code();
  }
  CHECK(line == "s.csv: the file lists 2 ops, but 64 stages x 1000001 micro-batches need 128000128 (one F and one "
                "backward each): ops are missing");
  CHECK(code == kExitInput);
  // Small tables still get the validator's exact missing op.
  try {
    (void)import_csv("0F0,0B0,0F3\n", "s.csv", 0, 0);
    FAIL("imported");
  } catch (const InputError& e) {
    CHECK(e.one_line() == "s.csv: missing op 0F1 (every stage and micro-batch needs one F and one backward)");
  }
}

TEST_CASE("regression: --layers 10^9 with the overlap model hung the simulator", "[robustness]") {
  // Every action became 10^9 layers of sub-ops. The overlap model's work (ops x layers per
  // chunk) now counts against the op limit before any work: 1F1B, P=2, M=2 has 8 ops.
  Scratch s("reg_layers");
  const Result r = run_ppsim(s, "compare --a2a 1 --layers 1000000000 -s 1f1b -p 2 -m 2", 20);
  CHECK(r.code == kExitLimit);
  CHECK(r.err == "ppsim: 1f1b: the overlap model would simulate 8 ops x 1000000000 layers per chunk = 8000000000 layer "
                 "steps, over the limit of 200000000 (raise it with --max-ops)\n");
  // The config path: an MoE model of 65,536 layers on one rank, M = 4,096 (1F1B: 8,192 ops).
  const ModelConfig cfg = load_config_text(
      "model: {layers: 65536, hidden: 64, heads: 4, vocab: 1000, seq_len: 32, moe: {experts: 4, top_k: 2, "
      "expert_ffn_hidden: 32}}\nhardware: {name: h100}\nparallel: {pp: 1, microbatches: 4096}\n",
      "moe.yaml", {});
  const Schedule sched = make_schedule("1f1b", ScheduleParams{1, 4096, 0, 0});
  std::string line;
  try {
    (void)derive_costs(cfg, sched);
  } catch (const InputError& e) {
    line = e.one_line();
    CHECK(e.exit_code() == kExitLimit);
  }
  CHECK(line == "1f1b: the overlap model would simulate 8192 ops x 65536 layers per chunk = 536870912 layer steps, over "
                "the limit of 200000000 (raise it with --max-ops)");
}
