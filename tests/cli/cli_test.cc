// The ppsim binary end to end: exit codes, one-line errors with suggestions, no partial output
// files, the embedded default, and the JSON schema of `compare` (docs/JSON.md).
#include <sys/wait.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "catch.h"
#include "test_util.h"

namespace {

struct Result {
  int code = -1;
  std::string out, err;
};

Result run_ppsim(const std::string& args) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("ppsim_cli_{}", ::getpid());
  fs::create_directories(dir);
  const std::string out = (dir / "out").string(), err = (dir / "err").string();
  const std::string cmd = fmt::format("{} {} >{} 2>{}", PPSIM_BINARY, args, out, err);
  const int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ppsim::test::read_file(out);
  r.err = ppsim::test::read_file(err);
  return r;
}

std::string tmp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / fmt::format("ppsim_cli_{}_{}", ::getpid(), name)).string();
}

}  // namespace

TEST_CASE("help and version exit 0", "[cli]") {
  REQUIRE(run_ppsim("--help").code == 0);
  REQUIRE(run_ppsim("--version").out == "ppsim 0.1.0\n");
  for (const char* cmd : {"schedules", "show", "compare", "simulate", "plan", "profile", "validate"}) {
    INFO(cmd);
    const Result r = run_ppsim(std::string(cmd) + " --help");
    REQUIRE(r.code == 0);
    REQUIRE(r.out.find("--help") != std::string::npos);
  }
}

TEST_CASE("unknown commands and flags: one line, a suggestion, exit 2", "[cli]") {
  Result r = run_ppsim("compar");
  REQUIRE(r.code == 2);
  REQUIRE(r.err == "ppsim: unknown command 'compar', did you mean 'compare'? (see 'ppsim --help')\n");
  r = run_ppsim("compare --pps 3");
  REQUIRE(r.code == 2);
  REQUIRE(r.err == "ppsim: unknown argument '--pps', did you mean '--pp'?\n");
  r = run_ppsim("compare --schedules dualpip");
  REQUIRE(r.code == 2);
  REQUIRE(r.err == "ppsim: unknown schedule 'dualpip', did you mean 'dualpipe'?\n");
  r = run_ppsim("compare --times F=1,B=x");
  REQUIRE(r.code == 2);
  REQUIRE(r.err == "ppsim: --times: B must be a number, got 'x'\n");
  r = run_ppsim("compare --times F=1,Q=2");
  REQUIRE(r.code == 2);
  REQUIRE(r.err.rfind("ppsim: --times: unknown time 'Q'", 0) == 0);
  r = run_ppsim("show dualpipe --format xml");
  REQUIRE(r.code == 2);
}

TEST_CASE("validate: bad option values are refused before any GPU is looked for, exit 2", "[cli]") {
  // Each value set is checked by the parser: one line naming the flag, the value and the choices.
  struct Case { const char* args; const char* want; };
  const Case cases[] = {
      {"--sharing foo", "ppsim: --sharing: foo not in {replay,kind,uniform} (see 'ppsim validate --help')\n"},
      {"--rank-speeds fast", "ppsim: --rank-speeds: fast not in {profiled,equal} (see 'ppsim validate --help')\n"},
      {"--sm-split maybe", "ppsim: --sm-split: maybe not in {auto,on,off} (see 'ppsim validate --help')\n"},
      {"--transport ring", "ppsim: --transport: ring not in {auto,peer,ipc,nccl} (see 'ppsim validate --help')\n"},
      {"--a2a nvshmem", "ppsim: --a2a: nvshmem not in {ours,nccl} (see 'ppsim validate --help')\n"},
      {"--co-run on", "ppsim: --co-run: on not in {sustained,full,held,off} (see 'ppsim validate --help')\n"},
      {"--launch graph", "ppsim: --launch: graph not in {graphs,streams} (see 'ppsim validate --help')\n"},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    const Result r = run_ppsim(fmt::format("validate {}/configs/small-1gpu.yaml {}", PPSIM_SOURCE_DIR, c.args));
    CHECK(r.code == 2);
    CHECK(r.err == c.want);
    CHECK(r.out.empty());
  }
}

TEST_CASE("validate: a transport that cannot reach the peers, or a timeout <= 0, is refused before any GPU work",
          "[cli]") {
  // One process (no mpirun): ipc has no other process to reach; the suggestion is peer.
  Result r = run_ppsim(fmt::format("validate {}/configs/small-1gpu.yaml --transport ipc", PPSIM_SOURCE_DIR));
  CHECK(r.code == 2);
  CHECK(r.err ==
        "ppsim: --transport ipc connects several processes (mpirun/srun), but this is the only one, did you mean "
        "'--transport peer'?\n");
  CHECK(r.out.empty());
  r = run_ppsim(fmt::format("validate {}/configs/small-1gpu.yaml --timeout 0", PPSIM_SOURCE_DIR));
  CHECK(r.code == 2);
  CHECK(r.err.rfind("ppsim: --timeout: ", 0) == 0);
  CHECK(r.err.find('\n') == r.err.size() - 1);
}

TEST_CASE("validate --replays and --reps below 1 are refused before any GPU work, exit 2", "[cli]") {
  Result r = run_ppsim(fmt::format("validate {}/configs/small-1gpu.yaml --replays 0", PPSIM_SOURCE_DIR));
  CHECK(r.code == 2);
  CHECK(r.err == "ppsim: --replays 0: give at least 1\n");
  CHECK(r.out.empty());
  r = run_ppsim(fmt::format("validate {}/configs/small-1gpu.yaml --reps -2", PPSIM_SOURCE_DIR));
  CHECK(r.code == 2);
  CHECK(r.err == "ppsim: --reps -2: give at least 1\n");
}

TEST_CASE("validate --a2a nccl: refused before any GPU work where it cannot run, exit 2", "[cli]") {
  // No EP replay asked for: no all-to-all to run.
  Result r = run_ppsim(fmt::format("validate {}/configs/small-2gpu-ep.yaml --a2a nccl", PPSIM_SOURCE_DIR));
  CHECK(r.code == 2);
  CHECK(r.err ==
        "ppsim: --a2a nccl: there is no all-to-all to run: it moves tokens only with --ep-replay on an MoE config with "
        "parallel.ep > 1\n");
  CHECK(r.out.empty());
  // PP 2 x EP 2 on the one GPU asked for: both shards of every stage on GPU 0, where NCCL cannot
  // put two ranks of one communicator (the GPU count comes from --devices: no GPU looked for).
  r = run_ppsim(fmt::format("validate {}/configs/small-2gpu-ep.yaml --ep-replay --a2a nccl --devices 1", PPSIM_SOURCE_DIR));
  CHECK(r.code == 2);
  CHECK(r.err ==
        "ppsim: --a2a nccl: EP shards 0 and 1 of pipeline rank 0 would share GPU 0, and NCCL cannot put two ranks of "
        "one communicator on one GPU: use --a2a ours, or at least ep (2) GPUs\n");
  CHECK(r.out.empty());
  // profile checks the value too.
  r = run_ppsim(fmt::format("profile {}/configs/small-2gpu-ep.yaml --a2a ncl", PPSIM_SOURCE_DIR));
  CHECK(r.code == 2);
  CHECK(r.err.rfind("ppsim: --a2a: ncl not in {ours,nccl}", 0) == 0);
}

TEST_CASE("impossible requests name the rule and the values, exit 3", "[cli]") {
  const Result r = run_ppsim("show dualpipe --pp 8 --microbatches 10");
  REQUIRE(r.code == 3);
  REQUIRE(r.err == "ppsim: dualpipe needs an even number of micro-batches >= 2*P (P=8), got 10\n");
  const Result c = run_ppsim("simulate -s chimera --pp 3 --microbatches 6");
  REQUIRE(c.code == 3);
  REQUIRE(c.err == "ppsim: chimera needs an even number of ranks, got P=3\n");
}

TEST_CASE("absurd requests are refused before any work, exit 6", "[cli]") {
  Result r = run_ppsim("show gpipe --pp 1000000 --microbatches 1000000000");
  REQUIRE(r.code == 6);
  REQUIRE(r.err == "ppsim: P=1000000 is over the limit of 4096 ranks (docs/ROBUSTNESS.md)\n");
  r = run_ppsim("compare -s 1f1b --pp 4096 --microbatches 1000000");
  REQUIRE(r.code == 6);
  REQUIRE(r.err.find("over the limit of 200000000") != std::string::npos);
}

TEST_CASE("bad schedule files: file:line:col, exit 3, and no partial output file", "[cli]") {
  const std::string bad = tmp_path("bad.csv");
  std::ofstream(bad) << "0F0,0B0\n1F0, 1Q0\n";
  const std::string out = tmp_path("never.json");
  const Result r = run_ppsim(fmt::format("show --schedule-file {} --format json -o {}", bad, out));
  REQUIRE(r.code == 3);
  REQUIRE(r.err == fmt::format("ppsim: {}:2:6: bad action '1Q0': expected {{stage}}{{F|I|W|B}}{{micro-batch}}, e.g. 3F7\n", bad));
  REQUIRE(!std::filesystem::exists(out));
  std::ofstream(bad) << "0F0,0B0\n1F0\n";
  const Result m = run_ppsim(fmt::format("show --schedule-file {}", bad));
  REQUIRE(m.code == 3);
  REQUIRE(m.err == fmt::format("ppsim: {}: missing op 1B0 (every stage and micro-batch needs one F and one backward)\n", bad));
}

TEST_CASE("the embedded default: compare on the DualPipe paper's setting", "[cli]") {
  const Result r = run_ppsim("compare --format json");
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  // Every family that applies to P=8, M=20 runs; interleaved (20 mod 8 = 4 < P) and chimera
  // (20 mod 8 != 0) are skipped with their reasons.
  REQUIRE(j["results"].size() == 7);
  REQUIRE(j["skipped"].size() == 2);
  bool saw_dualpipe = false;
  for (const auto& res : j["results"]) {
    for (const char* key : {"schedule", "pp", "microbatches", "makespan", "bubble", "published_bubble", "published_holds",
                            "peak_activations", "parameter_copies", "chunk_times", "compute_time", "exposed_comm",
                            "fb_pair_time"})
      REQUIRE(res.contains(key));
    for (const char* key : {"per_rank", "max", "mean", "ratio"}) REQUIRE(res["bubble"].contains(key));
    REQUIRE(res["bubble"]["per_rank"].size() == 8);
    if (res["schedule"] == "dualpipe") {
      saw_dualpipe = true;
      REQUIRE(res["makespan"].get<double>() == 66.0);
      REQUIRE(res["bubble"]["max"].get<double>() == 6.0);
      REQUIRE(res["fb_pair_time"].get<double>() == 3.0);
      // Rank shares: DualPipe's chunks are whole stages (1 each): PP + 1 = 9, its README's figure.
      REQUIRE(res["peak_activations"]["per_rank"][0].get<double>() == 9.0);
      REQUIRE(res["peak_activations"]["max"].get<double>() == 9.0);
      REQUIRE(res["published_activations"]["per_rank"][0].get<double>() == 9.0);
    }
    if (res["schedule"] == "zbv") {
      // ZB-V cuts the rank's share into 2 chunks: per-chunk F = 0.5, B = 1, W = 0.5, FB = 1.5.
      REQUIRE(res["chunk_times"]["F"].get<double>() == 0.5);
      REQUIRE(res["chunk_times"]["FB"].get<double>() == 1.5);
      // 2P = 16 chunks of half a rank's layers = P = 8 rank shares (the Zero Bubble paper's P M_B).
      for (const auto& a : res["peak_activations"]["per_rank"]) REQUIRE(a.get<double>() == 8.0);
      REQUIRE(res["published_activations"]["per_rank"][0].get<double>() == 8.0);
    }
  }
  REQUIRE(saw_dualpipe);
}

TEST_CASE("show: csv round-trips through --schedule-file", "[cli]") {
  const std::string csv = tmp_path("dp.csv");
  Result r = run_ppsim(fmt::format("show dualpipe --pp 4 --microbatches 8 --format csv -o {}", csv));
  REQUIRE(r.code == 0);
  r = run_ppsim(fmt::format("show --schedule-file {} --format csv", csv));
  REQUIRE(r.code == 0);
  REQUIRE(r.out == ppsim::test::read_file(csv));
  r = run_ppsim(fmt::format("compare --schedule-file {} --format json", csv));
  REQUIRE(r.code == 0);
  REQUIRE(nlohmann::json::parse(r.out)["results"][0]["pp"].get<int>() == 4);
}

TEST_CASE("compare --memory: each rank's peak by part, dated, after the table", "[cli]") {
  const Result r = run_ppsim(fmt::format("compare {}/configs/deepseek-v3.yaml -s dualpipe --memory", PPSIM_SOURCE_DIR));
  REQUIRE(r.code == 0);
  const std::size_t at = r.out.find("dualpipe: peak device memory per rank, GB");
  REQUIRE(at != std::string::npos);
  CHECK(r.out.find("workspace", at) != std::string::npos);
  // 16 rank rows, each naming the action at its peak (DualPipe's F&B pairs on rank 0).
  CHECK(r.out.find("OVERLAP_F_B", at) != std::string::npos);
  int lines = 0;  // newlines from the title on: the title, the column header, 16 ranks
  for (std::size_t p = r.out.find('\n', at); p != std::string::npos; p = r.out.find('\n', p + 1)) lines += 1;
  CHECK(lines == 1 + 1 + 16);
  // Without a config there is no memory to break down: the table alone.
  const Result u = run_ppsim("compare --memory");
  REQUIRE(u.code == 0);
  CHECK(u.out.find("peak device memory") == std::string::npos);
}

TEST_CASE("fidelity: a table, JSON, exit 7 past a threshold, one-line errors", "[cli][fidelity]") {
  const std::string cfg = std::string(PPSIM_SOURCE_DIR) + "/configs/published/megatron-18.4b.yaml";
  Result r = run_ppsim("fidelity " + cfg);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("megatron-18.4b/1f1b") != std::string::npos);
  r = run_ppsim("fidelity --format json " + cfg);
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  REQUIRE(j["rows"].size() == 1);
  const double err = j["rows"][0]["error"].get<double>();
  // A threshold just above the error passes; one below it exits 7 and says which row.
  const std::string th = tmp_path("thresholds.txt");
  std::ofstream(th) << "megatron-18.4b/1f1b " << std::abs(err) * 100 + 0.05 << "\n";
  CHECK(run_ppsim("fidelity --check " + th + " " + cfg).code == 0);
  std::ofstream(th) << "megatron-18.4b/1f1b " << std::abs(err) * 100 / 2 << "\n";
  r = run_ppsim("fidelity --check " + th + " " + cfg);
  CHECK(r.code == 7);
  CHECK(r.out.find("PAST THRESHOLD") != std::string::npos);
  // A missing thresholds file: exit 4, one line.
  r = run_ppsim("fidelity --check /nonexistent/th.txt " + cfg);
  CHECK(r.code == 4);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  // A directory without configs: exit 4.
  CHECK(run_ppsim("fidelity --dir /nonexistent").code == 4);
  // A file that cannot be predicted is skipped, the others' rows printed, and the exit code is the
  // skipped file's (3: a bad config), so that a script notices the source that dropped out.
  const std::string bad = tmp_path("bad.yaml");
  std::ofstream(bad) << "model: {layers: 4}\n";
  r = run_ppsim("fidelity " + cfg + " " + bad);
  CHECK(r.code == 3);
  CHECK(r.out.find("megatron-18.4b/1f1b") != std::string::npos);
  CHECK(r.out.find("1 of 2 files skipped") != std::string::npos);
}

TEST_CASE("simulate FAMILY is simulate -s FAMILY, as show FAMILY", "[cli]") {
  const Result pos = run_ppsim("simulate dualpipe --pp 4 --microbatches 8 --format csv");
  const Result flag = run_ppsim("simulate -s dualpipe --pp 4 --microbatches 8 --format csv");
  REQUIRE(pos.code == 0);
  REQUIRE(flag.code == 0);
  REQUIRE(pos.out == flag.out);
  REQUIRE(pos.out.find("\ndualpipe,") != std::string::npos);
  // With a config after the family (a .yaml name): the config's costs, as with -s.
  const std::string cfg = std::string(PPSIM_SOURCE_DIR) + "/configs/small-2gpu.yaml";
  const Result pc = run_ppsim("simulate 1f1b " + cfg + " --format csv");
  const Result fc = run_ppsim("simulate -s 1f1b " + cfg + " --format csv");
  REQUIRE(pc.code == 0);
  REQUIRE(pc.out == fc.out);
  // Two families, or the family both ways: one line, exit 2.
  Result r = run_ppsim("simulate dualpipe 1f1b --pp 4 --microbatches 8");
  REQUIRE(r.code == 2);
  REQUIRE(r.err == "ppsim: simulate takes one family, got 'dualpipe' and '1f1b' (compare takes several)\n");
  r = run_ppsim("simulate dualpipe -s gpipe --pp 4 --microbatches 8");
  REQUIRE(r.code == 2);
  // An unknown name is the unknown family it always was (exit 2, with a suggestion).
  r = run_ppsim("simulate dualpip --pp 4 --microbatches 8");
  REQUIRE(r.code == 2);
  REQUIRE(r.err.find("dualpipe") != std::string::npos);
}

TEST_CASE("show --lower torch: the sends, receives and FSDP-style actions PyTorch's runtime lists", "[cli]") {
  // interleaved-1f1b P=2 M=2, lowered by hand in tests/sim/engine_test.cc ("one stream per rank").
  const Result r = run_ppsim("show interleaved-1f1b -p 2 -m 2 --lower torch --format torch");
  REQUIRE(r.code == 0);
  CHECK(r.out ==
        "0UNSHARD,2UNSHARD,0F0,0SEND_F0,2RECV_F0,0F1,0SEND_F1,2RECV_F1,2F0,2SEND_F0,2F1,2SEND_F1,2RECV_B0,2B0,2SEND_B0,"
        "2RECV_B1,2B1,2SEND_B1,2REDUCE_GRAD,2RESHARD,0RECV_B0,0B0,0RECV_B1,0B1,0REDUCE_GRAD,0RESHARD\n"
        "1UNSHARD,3UNSHARD,1RECV_F0,1F0,1SEND_F0,1RECV_F1,1F1,1SEND_F1,3RECV_F0,3F0,3RECV_F1,3B0,3SEND_B0,1RECV_B0,3F1,3B1,"
        "3SEND_B1,1RECV_B1,3REDUCE_GRAD,3RESHARD,1B0,1SEND_B0,1B1,1SEND_B1,1REDUCE_GRAD,1RESHARD\n");
  // JSON: each rank's lowered list beside its compute order.
  const Result j = run_ppsim("show interleaved-1f1b -p 2 -m 2 --lower torch --format json");
  REQUIRE(j.code == 0);
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  CHECK(doc["lowered"][1][2] == "1RECV_F0");
  CHECK(doc["lowered"][0].size() == 26);
  CHECK(doc["ranks"][0].size() == 8);
  // A value it does not know: exit 2 with the nearest; two pipes: exit 3, the reason.
  const Result bad = run_ppsim("show zbv -p 2 -m 4 --lower torh");
  CHECK(bad.code == 2);
  CHECK(bad.err.find("did you mean 'torch'") != std::string::npos);
  const Result two = run_ppsim("show dualpipe -p 4 -m 8 --lower torch");
  CHECK(two.code == 3);
  CHECK(two.err.find("2 pipes") != std::string::npos);
  // Schedule1F1B.__init__ raises for fewer micro-batches than stages: so does its lowering.
  const Result few = run_ppsim("show 1f1b -p 4 -m 2 --lower torch");
  CHECK(few.code == 3);
  CHECK_THAT(few.err, PPSIM_CONTAINS("PyTorch's Schedule1F1B refuses 2 micro-batches for 4 stages"));
}

TEST_CASE("compare: peak activations in rank shares in the table, CSV and JSON alike", "[cli]") {
  // Interleaved 1F1B, P=4, v=2, M=8 (G=P): rank 0 holds 2(P-1)+(v-1)P+1 = 11 chunks of half its
  // layers = 5.5 rank shares; 1F1B's rank 0 holds min(P, M) = 4 whole-rank micro-batches.
  const std::string flags = " -s interleaved-1f1b,1f1b --pp 4 -m 8 --times F=1,B=2,W=1";
  const Result json = run_ppsim("compare" + flags + " --format json");
  REQUIRE(json.code == 0);
  const auto j = nlohmann::json::parse(json.out);
  REQUIRE(j["results"][0]["schedule"] == "interleaved-1f1b");
  REQUIRE(j["results"][0]["peak_activations"]["per_rank"][0].get<double>() == 5.5);
  REQUIRE(j["results"][0]["peak_activations"]["max"].get<double>() == 5.5);
  REQUIRE(j["results"][1]["peak_activations"]["max"].get<double>() == 4.0);
  // The CSV's column names its unit and holds the same figure.
  const Result csv = run_ppsim("compare" + flags + " --format csv");
  REQUIRE(csv.code == 0);
  const std::string header = csv.out.substr(0, csv.out.find('\n'));
  const std::size_t at = header.find("peak_activations_max_rank_shares");
  REQUIRE(at != std::string::npos);
  const auto column = std::count(header.begin(), header.begin() + static_cast<std::ptrdiff_t>(at), ',');
  std::string cell = csv.out.substr(header.size() + 1);
  for (std::ptrdiff_t k = 0; k < column; ++k) cell = cell.substr(cell.find(',') + 1);
  REQUIRE(cell.substr(0, cell.find(',')) == "5.5");
  const Result table = run_ppsim("compare" + flags);
  REQUIRE(table.code == 0);
  REQUIRE_THAT(table.out, PPSIM_CONTAINS("peak act (rank shares)"));
  REQUIRE_THAT(table.out, PPSIM_CONTAINS(" 5.5 "));
}

TEST_CASE("compare with a config: --pp and -m are its parallel keys; -s all runs every family", "[cli]") {
  // 8 GPUs, tp 1, pp 2 and dp 4 stated: --pp 4 would need 4 x 1 x 4 = 16 GPUs, refused as --set
  // parallel.pp=4 is (it once ran pp 4 over dp 4, tokens/s of 16 GPUs from 8).
  const std::string base =
      "model: {layers: 8, hidden: 512, heads: 8, ffn_hidden: 2048, vocab: 1000, seq_len: 512}\n"
      "hardware: {name: h100, gpus: 8}\n";
  const std::string stated = tmp_path("pp_stated.yaml"), derived = tmp_path("pp_derived.yaml");
  std::ofstream(stated) << base << "parallel: {pp: 2, dp: 4, microbatches: 8, schedule: 1f1b}\n";
  std::ofstream(derived) << base << "parallel: {pp: 2, microbatches: 8, schedule: 1f1b}\n";
  const Result refused = run_ppsim("compare " + stated + " --pp 4 -m 8");
  CHECK(refused.code == 3);
  CHECK_THAT(refused.err, PPSIM_CONTAINS("parallel.pp*tp*dp = 4*1*4 = 16 GPUs, but hardware.gpus = 8"));
  // dp not stated: derived from the GPUs (8 / 4 = 2), the same answer as --set.
  const Result flags = run_ppsim("compare " + derived + " --pp 4 -m 8 --format json");
  const Result sets =
      run_ppsim("compare " + derived + " --set parallel.pp=4 --set parallel.microbatches=8 --format json");
  REQUIRE(flags.code == 0);
  REQUIRE(sets.code == 0);
  const auto jf = nlohmann::json::parse(flags.out), js = nlohmann::json::parse(sets.out);
  CHECK(jf["results"][0]["pp"] == 4);
  CHECK(jf["results"][0]["tokens_per_second"] == js["results"][0]["tokens_per_second"]);
  // The config names 1f1b: without -s, that one; with -s all, every family runs or is skipped.
  const auto one = nlohmann::json::parse(run_ppsim("compare " + derived + " --format json").out);
  CHECK(one["results"].size() == 1);
  const auto all = nlohmann::json::parse(run_ppsim("compare " + derived + " -s all --format json").out);
  CHECK(all["results"].size() + all["skipped"].size() == 9);
  std::filesystem::remove(stated);
  std::filesystem::remove(derived);
}
