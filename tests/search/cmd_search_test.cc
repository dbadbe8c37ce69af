// `ppsim search` end to end: the schedule file it writes replays with `simulate --schedule-file`
// to the makespan it printed, and bad flags are one line with the documented exit code and no
// output file.
#include <catch.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "robustness/run_ppsim.h"

using ppsim::robust::run_ppsim;
using ppsim::robust::Scratch;

TEST_CASE("ppsim search: the written CSV simulates to the printed makespan", "[search][cli]") {
  Scratch s("search_cli");
  // P=4, M=8, W-heavy: ZB-H1's bubble formula fails (W > b); cap 4 = 1F1B's rank 0 peak.
  const auto r = run_ppsim(s, "search -p 4 -m 8 --times F=1,B=3,W=2 --memory-cap 4 -j 2 -q --out s.csv --svg s.svg");
  INFO(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(std::filesystem::exists(s.path("s.csv")));
  REQUIRE(std::filesystem::exists(s.path("s.svg")));
  // The "searched" row's makespan, then the replay's.
  const auto row = r.out.find("\nsearched");
  REQUIRE(row != std::string::npos);
  std::string mk;
  {
    std::size_t i = r.out.find_first_not_of(' ', row + 9);
    mk = r.out.substr(i, r.out.find(' ', i) - i);
  }
  const auto sim = run_ppsim(s, "simulate --schedule-file s.csv --times F=1,B=3,W=2 --format csv");
  INFO(sim.out);
  REQUIRE(sim.code == 0);
  REQUIRE(sim.out.find("," + mk + ",") != std::string::npos);
}

TEST_CASE("ppsim search with the overlap model: the written CSV simulates to the printed makespan", "[search][cli]") {
  // The unit overlap flags, as compare takes them: each F and backward carries 4 layers'
  // dispatch and combine (0.3 each), exposed unless a pair hides them.
  Scratch s("search_cli_overlap");
  const char* flags = "--times F=1,B=2,W=1 --a2a 0.3 --layers 4";
  const auto r = run_ppsim(s, std::string("search -p 4 -m 8 ") + flags + " -j 2 -q --out s.csv");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto row = r.out.find("\nsearched");
  REQUIRE(row != std::string::npos);
  const std::size_t i = r.out.find_first_not_of(' ', row + 9);
  const std::string mk = r.out.substr(i, r.out.find(' ', i) - i);
  const auto sim = run_ppsim(s, std::string("simulate --schedule-file s.csv --format csv ") + flags);
  INFO(sim.out);
  REQUIRE(sim.code == 0);
  REQUIRE(sim.out.find("," + mk + ",") != std::string::npos);
  // Without the overlap flags the same file is faster: the all-to-alls were in the makespan.
  const auto plain = run_ppsim(s, "simulate --schedule-file s.csv --format csv --times F=1,B=2,W=1");
  REQUIRE(plain.code == 0);
  REQUIRE(plain.out.find("," + mk + ",") == std::string::npos);
}

TEST_CASE("ppsim search: bad flags are one line, exit 2, no file", "[search][cli]") {
  Scratch s("search_cli_bad");
  for (const char* args :
       {"search -p 4 -m 8 --placement diagonal --out s.csv", "search -p 4 -m 8 --memory-cap -1 --out s.csv",
        "search -p 4 -m 8 --time-limit 0 --out s.csv", "search -p 4 -m 8 --format yaml --out s.csv",
        "search -p 4 -m 8 --objective fastest --out s.csv",
        // 3 layers do not split into a V's or two pipes' 2 chunks per rank; --a2a with a config
        "search -p 4 -m 8 --a2a 0.3 --layers 3 --out s.csv",
        "search " PPSIM_SOURCE_DIR "/configs/small-2gpu.yaml --a2a 0.3 --out s.csv"}) {
    const auto r = run_ppsim(s, args);
    INFO(args << "\n" << r.err);
    REQUIRE(r.code == 2);
    REQUIRE(r.one_error_line());
    REQUIRE_FALSE(std::filesystem::exists(s.path("s.csv")));
  }
  // A cap below one micro-batch: no schedule fits: bad input (3), no file.
  const auto r = run_ppsim(s, "search -p 4 -m 8 --memory-cap 0.5 -q --out s.csv");
  INFO(r.err);
  REQUIRE(r.code == 3);
  REQUIRE(r.one_error_line());
  REQUIRE_FALSE(std::filesystem::exists(s.path("s.csv")));
}

TEST_CASE("ppsim search: one vocabulary: --format is the report, --out-format the file's dialect", "[search][cli]") {
  Scratch s("search_cli_vocab");
  // The old spelling of the dialect: one line, exit 2, a suggestion, no file.
  auto r = run_ppsim(s, "search -p 4 -m 8 -q --format torch --out s.csv");
  REQUIRE(r.code == 2);
  REQUIRE(r.one_error_line());
  REQUIRE(r.err.find("did you mean --out-format torch?") != std::string::npos);
  REQUIRE_FALSE(std::filesystem::exists(s.path("s.csv")));
  r = run_ppsim(s, "search -p 4 -m 8 -q --out-format yaml --out s.csv");
  REQUIRE(r.code == 2);
  REQUIRE(r.one_error_line());
  // --out-format torch writes the same file as csv (both are PyTorch's compute-only CSV).
  const auto a = run_ppsim(s, "search -p 4 -m 8 --times F=1,B=2,W=1 -j 1 -q --out-format torch --out t.csv");
  const auto b = run_ppsim(s, "search -p 4 -m 8 --times F=1,B=2,W=1 -j 1 -q --out c.csv");
  REQUIRE(a.code == 0);
  REQUIRE(b.code == 0);
  auto slurp = [&s](const char* name) {
    std::ifstream in(s.path(name));
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  REQUIRE_FALSE(slurp("t.csv").empty());
  REQUIRE(slurp("t.csv") == slurp("c.csv"));
  // --format json: docs/JSON.md's results, the searched row first, then the best family's.
  const auto j = run_ppsim(s, "search -p 4 -m 8 --times F=1,B=2,W=1 -j 1 -q --format json");
  INFO(j.err);
  REQUIRE(j.code == 0);
  REQUIRE(j.out.find("\"schedule\": \"searched\"") != std::string::npos);
  REQUIRE(j.out.find("\"makespan\":") != std::string::npos);
  REQUIRE(j.out.find("\"memory_cap_source\": \"best family\"") != std::string::npos);
  // The table's searched makespan is the JSON's: the JSON carries it as a number of the same
  // value (an integer one as "n.0").
  const auto row = b.out.find("\nsearched");
  REQUIRE(row != std::string::npos);
  const std::size_t i = b.out.find_first_not_of(' ', row + 9);
  const std::string mk = b.out.substr(i, b.out.find(' ', i) - i);
  REQUIRE(j.out.find("\"makespan\": " + mk + (mk.find('.') == std::string::npos ? ".0" : "")) != std::string::npos);
  const auto c = run_ppsim(s, "search -p 4 -m 8 --times F=1,B=2,W=1 -j 1 -q --format csv");
  REQUIRE(c.code == 0);
  REQUIRE(c.out.rfind("schedule,", 0) == 0);  // the CSV header first
  REQUIRE(c.out.find("\nsearched,") != std::string::npos);
}

TEST_CASE("ppsim search: the default cap is the best family's peak; --memory-cap none lifts it", "[search][cli]") {
  // The issue's case: P=4 M=12 F=1 B=3 W=1.5. DualPipe (the best family, makespan 50) holds 5
  // activations per rank at its peak; uncapped, the search held 12 (all micro-batches) to win.
  Scratch s("search_cli_cap");
  // --placement all: DualPipe's two copies are compared (the default, torch, holds one).
  const std::string base = "search -p 4 -m 12 --times F=1,B=3,W=1.5 -j 1 -q --time-limit 5 --placement all ";
  const auto d = run_ppsim(s, base, 90);
  INFO(d.err);
  REQUIRE(d.code == 0);
  REQUIRE(d.out.find("cap 5 rank shares (the best family's peak)") != std::string::npos);
  REQUIRE(d.out.find("best family: dualpipe ") != std::string::npos);
  // Every schedule in the table fits the cap: the searched row's peak column is at most 5.
  const auto row = d.out.find("\nsearched");
  REQUIRE(row != std::string::npos);
  std::string line = d.out.substr(row + 1, d.out.find('\n', row + 1) - row - 1);
  double peak = 0;
  {
    // columns: name, makespan, bubble(max), peak, ...
    std::istringstream in(line);
    std::string name, mk, bub;
    in >> name >> mk >> bub >> peak;
  }
  REQUIRE(peak <= 5.0);
  const auto n = run_ppsim(s, base + "--memory-cap none", 90);
  REQUIRE(n.code == 0);
  REQUIRE(n.out.find(" cap none ") != std::string::npos);
  // A cap that is neither a number nor none: one line, exit 2.
  const auto bad = run_ppsim(s, base + "--memory-cap lots");
  REQUIRE(bad.code == 2);
  REQUIRE(bad.one_error_line());
}

TEST_CASE("ppsim search: no progress line when stderr is not a terminal", "[search][cli]") {
  Scratch s("search_cli_progress");
  // run_ppsim sends stderr to a file: without -q, stderr stays empty.
  const auto r = run_ppsim(s, "search -p 4 -m 8 --times F=1,B=2,W=1 -j 1 --time-limit 2");
  REQUIRE(r.code == 0);
  REQUIRE(r.err.empty());
}

TEST_CASE("ppsim search --objective span: every rank's own span down to its work (P=4 M=8, F=I=W=1)", "[search][cli]") {
  // As tests/search/search_test.cc: a rank's work is 8 x 3 = 24 and the span objective reaches it.
  Scratch s("search_cli_span");
  const auto r = run_ppsim(s, "search -p 4 -m 8 --times F=1,B=2,W=1 --memory-cap none --placement linear -j 1 -q "
                              "--objective span --format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["search"]["objective"] == "span");
  CHECK(j["search"]["longest_span"].get<double>() == 24.0);
  const auto t = run_ppsim(s, "search -p 4 -m 8 --times F=1,B=2,W=1 --memory-cap none --placement linear -j 1 -q --objective span");
  CHECK(t.out.find("objective: the longest rank's own span") != std::string::npos);
}

TEST_CASE("ppsim search with hardware.clock: each row run at its own duty's clock", "[search][cli]") {
  // No communication (links of 1e9 GB/s, no latency) and F = b = W = 1 ms on P = 4, M = 8: every
  // rank computes 24 ms, and every compute duration scales alike, so the duty d = 24 / step is
  // the same at any clock and the step is the base one times 1 + (d - 0.5) with slope 1 from 0.5.
  Scratch s("search_cli_clock");
  const std::string cfg = R"(model: {layers: 8, hidden: 1024, ffn_hidden: 4096, heads: 8, vocab: 1000, seq_len: 256}
hardware: {name: test, peak_tflops: {bf16: 100}, hbm_gbps: 1000, hbm_gb: 1000, nvlink_gbps: 1000000000,
           nvlink_latency_us: 0, network_gbps: 1000000000, network_latency_us: 0, gpus: 4}
parallel: {pp: 4, microbatches: 8}
times: {F: 1, B: 2, W: 1}
)";
  s.write("base.yaml", cfg);
  const std::string flags = " --memory-cap none --placement linear -j 1 -q --seed 1 --time-limit 5 --format json";
  const auto base = run_ppsim(s, "search base.yaml" + flags);
  const auto hot =
      run_ppsim(s, "search base.yaml --set hardware.clock.duty_slope=1 --set hardware.clock.duty_ref=0.5" + flags);
  INFO(base.err << hot.err);
  REQUIRE(base.code == 0);
  REQUIRE(hot.code == 0);
  const nlohmann::json b = nlohmann::json::parse(base.out), h = nlohmann::json::parse(hot.out);
  CHECK_FALSE(b["search"]["clocked"].get<bool>());
  CHECK(h["search"]["clocked"].get<bool>());
  REQUIRE(b["results"].size() == 2);  // the searched order and the best family
  REQUIRE(h["results"].size() == 2);
  for (std::size_t i = 0; i < b["results"].size(); ++i) {
    const double step = b["results"][i]["makespan"].get<double>();
    INFO(b["results"][i]["schedule"]);
    CHECK(step >= 24.0);
    CHECK_THAT(h["results"][i]["makespan"].get<double>(), Catch::Matchers::WithinRel(step * (1 + 24.0 / step - 0.5), 1e-5));
  }
  const auto text = run_ppsim(s, "search base.yaml --set hardware.clock.duty_slope=1 --memory-cap none --placement linear -j 1 -q --seed 1 --time-limit 5");
  CHECK(text.out.find("clock (hardware.clock): ranked at the base clock") != std::string::npos);
  CHECK(text.out.find("at the base clock") != std::string::npos);
}

TEST_CASE("ppsim search by default: one parameter copy (linear and V, as PyTorch runs), and says so", "[search][cli]") {
  // P=4, M=8, F=1, B=2, W=1: DualPipe (two copies) is among the nine families; the default search
  // neither returns a two-pipe schedule nor compares with one, and its JSON names the placement.
  Scratch s("search_cli_torch");
  const auto r = run_ppsim(s, "search -p 4 -m 8 --times F=1,B=2,W=1 -j 1 -q --time-limit 2 --format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["search"]["placement"] == "torch");
  REQUIRE(j["results"].size() == 2);
  for (const auto& row : j["results"]) CHECK(row["parameter_copies"].get<int>() == 1);
  CHECK(j["search"]["searched_placement"] != "bidirectional");
  const auto all = run_ppsim(s, "search -p 4 -m 8 --times F=1,B=2,W=1 -j 1 -q --time-limit 2 --placement all --format json");
  REQUIRE(all.code == 0);
  CHECK(nlohmann::json::parse(all.out)["search"]["placement"] == "all");
  const auto text = run_ppsim(s, "search -p 4 -m 8 --times F=1,B=2,W=1 -j 1 -q --time-limit 2");
  CHECK(text.out.find("placement torch (linear and v: one parameter copy") != std::string::npos);
  CHECK(text.out.find("not compared: dualpipe: 2 parameter copies") != std::string::npos);
}

TEST_CASE("search --memory-cap and compare count activations alike, in rank shares", "[search][cli]") {
  // P=4, M=8, F=1, B=2, W=1, cap 4 = P rank shares: the families whose compare peak (JSON max,
  // rank shares) exceeds it are exactly those search leaves out as over the cap. By the formulas:
  // GPipe M = 8, ZB-H2 2P-1 = 7, DualPipe PP+1 = 5, DualPipeV (2P+1 chunks)/2 = 4.5, interleaved
  // (11 chunks)/2 = 5.5 are over; 1F1B and ZB-H1 P = 4, ZB-V 2P chunks / 2 = 4 fit.
  Scratch s("search_cap_units");
  const auto cmp = run_ppsim(s, "compare -p 4 -m 8 --times F=1,B=2,W=1 --format json");
  REQUIRE(cmp.code == 0);
  const auto srch =
      run_ppsim(s, "search -p 4 -m 8 --times F=1,B=2,W=1 --memory-cap 4 --placement all -j 2 -q --format json");
  INFO(srch.err);
  REQUIRE(srch.code == 0);
  const auto c = nlohmann::json::parse(cmp.out), j = nlohmann::json::parse(srch.out);
  std::set<std::string> over_by_compare, over_by_search;
  for (const auto& r : c["results"])
    if (r["peak_activations"]["max"].get<double>() > 4 + 1e-9) over_by_compare.insert(r["schedule"].get<std::string>());
  for (const auto& sk : j["skipped"])
    if (sk["reason"].get<std::string>().find("over the cap") != std::string::npos)
      over_by_search.insert(sk["schedule"].get<std::string>());
  const std::set<std::string> want{"gpipe", "zb-h2", "dualpipe", "dualpipev", "interleaved-1f1b"};
  CHECK(over_by_compare == want);
  CHECK(over_by_search == want);
}
