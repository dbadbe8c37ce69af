// End to end: `show` on PyTorch CSVs of both dialects with comm actions (the dialect printed,
// `--format torch` round trips), and `ppsim model` (table, JSON, exit codes of docs/CLI.md).
#include <nlohmann/json.hpp>

#include "../robustness/run_ppsim.h"
#include "catch.h"

using namespace ppsim::robust;

namespace {
const std::string kHf = std::string(PPSIM_SOURCE_DIR) + "/configs/hf/";
}

TEST_CASE("show: a torch <= 2.5 file with comm actions round-trips through --format torch", "[cli][notation]") {
  Scratch s("dialects");
  const std::string old =
      "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0W0,0RECV_B1,0B1,0W1\n"
      "1RECV_F0,1F0,1RECV_F1,1BW0,1SEND_B0,1F1,1BW1,1SEND_B1\n";
  s.write("old.csv", old);
  Result r = run_ppsim(s, "show --schedule-file old.csv");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("dialect: torch <= 2.5") != std::string::npos);
  CHECK(r.out.find("comm actions: 8 (0 FSDP ones not modelled)") != std::string::npos);
  CHECK(r.out.find("rank  0: 0F0 0F1 0I0 0W0 0I1 0W1") != std::string::npos);
  r = run_ppsim(s, "show --schedule-file old.csv --format torch");
  REQUIRE(r.code == 0);
  CHECK(r.out == old);
  r = run_ppsim(s, "show --schedule-file old.csv --format torch --write-dialect 2.5 --csv-dialect 2.5");
  CHECK(r.out == old);
  // Written in today's dialect: I for the input grad, B for the full backward.
  r = run_ppsim(s, "show --schedule-file old.csv --format csv --write-dialect current --drop-comm");
  CHECK(r.out == "0F0,0F1,0I0,0W0,0I1,0W1\n1F0,1B0,1F1,1B1\n");
  r = run_ppsim(s, "compare --schedule-file old.csv --format json");
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["schedule_file"]["dialect"] == "2.5");
  CHECK(j["schedule_file"]["comm_actions"] == 8);
  CHECK(j["schedule_file"]["explicit_transfers"] == true);
  // A bad dialect name: exit 2 with the choices.
  r = run_ppsim(s, "show --schedule-file old.csv --csv-dialect 2.4");
  CHECK(r.code == 2);
  CHECK(r.one_error_line());
}

TEST_CASE("model: table and JSON for a config.json; exit codes", "[cli][model]") {
  Scratch s("model");
  Result r = run_ppsim(s, "model " + kHf + "llama-3-8b.json");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("  total                 8.03B        8.03B\n") != std::string::npos);
  r = run_ppsim(s, "model " + kHf + "mixtral-8x7b.json --format json --pp 4");
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["parameters"]["total"] == 46702792704LL);
  CHECK(j["parameters"]["active"] == 12879925248LL);
  CHECK(j["parameters"]["by_part"]["routed_experts"]["total"] == 32LL * 8 * 3 * 4096 * 14336);
  CHECK(j["stages"].size() == 4);
  // A YAML config: its own pp (configs/deepseek-v3.yaml: 16 stages, its layer split).
  r = run_ppsim(s, std::string("model ") + PPSIM_SOURCE_DIR + "/configs/deepseek-v3.yaml --format json");
  REQUIRE(r.code == 0);
  const auto d = nlohmann::json::parse(r.out);
  CHECK(d["stages"].size() == 16);
  CHECK(d["stages"][0]["layers"] == 3);
  CHECK(d["flops_per_token"]["seq_len"] == 4096);
  // Exit codes: a file that cannot be read 4, a bad config.json 3, a bad flag value 2.
  r = run_ppsim(s, "model missing.json");
  CHECK(r.code == 4);
  CHECK(r.one_error_line());
  s.write("bad.json", "{\"model_type\": \"llama\", \"num_hidden_layers\": 2}");
  r = run_ppsim(s, "model bad.json");
  CHECK(r.code == 3);
  CHECK(r.err ==
        "ppsim: bad.json: missing key 'hidden_size' (the hidden size; also read as n_embd, d_model, model_dim, dim) "
        "(model_type llama)\n");
  r = run_ppsim(s, "model " + kHf + "llama-3-8b.json --layer-split 10,10,10");
  CHECK(r.code == 2);
  CHECK(r.one_error_line());
}
