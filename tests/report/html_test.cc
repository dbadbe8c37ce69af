// The HTML report's writer (src/report/html.cc, html_data.cc): the compact timeline encoding
// decoded by hand, the data kept inside its <script> element, the page assets present.
#include <string>

#include "catch.h"
#include "report/html.h"

namespace ppsim {
namespace {

Interval iv(int rank, Stream st, Action a, Time s, Time e) {
  Interval x;
  x.rank = rank;
  x.stream = st;
  x.start = s;
  x.end = e;
  x.action = a;
  return x;
}

TEST_CASE("compact timeline: quantum, flags, per-rank deltas", "[html]") {
  Timeline t;
  t.pp = 2;
  t.scale = TimeScale::units();
  const Time u = kTicksPerUnit;
  // rank 1 listed first and out of order: the encoding sorts each rank by start.
  t.intervals.push_back(iv(1, Stream::Compute, Action::single({OpKind::W, 1, 0}), 4 * u, 5 * u));
  t.intervals.push_back(iv(1, Stream::Compute, Action::single({OpKind::F, 1, 0}), u, 2 * u));
  t.intervals.push_back(iv(0, Stream::Compute, Action::single({OpKind::F, 0, 0}), 0, u));
  t.intervals.push_back(iv(0, Stream::Compute, Action::pair({OpKind::F, 0, 1}, {OpKind::B, 0, 0}), 3 * u, 6 * u));
  t.activations = {{{0, 1}, {6 * u, 0}}, {{u, 1}, {5 * u, 0}}};
  const nlohmann::json j = compact_timeline({"x", &t, nullptr, 0, {}});
  CHECK(j["q"] == u);  // gcd of 0, u, 2u, ..., 6u
  CHECK(j["tpu"] == kTicksPerUnit);
  // rank 0: F0 mb0 at 0 for 1; the pair (F0 mb1; B0 mb0): flags = F<<6 | 1<<8 | B(3)<<9, at 3 for 3.
  const int whole = 0;  // stream compute, part whole, op_index -1 (stored +1), kind F
  CHECK(j["ranks"][0] == nlohmann::json({whole | 0, 0, 0, 0, 1,  //
                                          (whole | (1 << 8) | (3 << 9)), 0, 1, 0, 0, 3, 3}));
  // rank 1: F1 mb0 at 1 (delta 1), W1 mb0 at 4 (delta 3).
  CHECK(j["ranks"][1] == nlohmann::json({whole, 1, 0, 1, 1, whole | (2 << 6), 1, 0, 3, 1}));
  CHECK(j["mem"]["unit"] == "rank shares");  // one stage per rank: a chunk is a whole rank's share
  CHECK(j["mem"]["ranks"][0] == nlohmann::json({0, 1, 6, 0}));
  CHECK(j["mem"]["ranks"][1] == nlohmann::json({1, 1, 4, 0}));
  CHECK(j["spp"] == 2);  // one pipe of 2 stages
}

TEST_CASE("compact timeline: two pipes are told from a V by micro-batch 0's first F", "[html]") {
  // Stages 0,1 (pipe 0) and 2,3 (pipe 1); stage 2's F of mb 0 starts at 0, before stage 1's
  // F of mb 0 ends: two pipes of 2 stages. Shifted after it, a V of 4 stages.
  for (const bool two : {true, false}) {
    Timeline t;
    t.pp = 2;
    const Time s2 = two ? 0 : 2;
    t.intervals.push_back(iv(0, Stream::Compute, Action::single({OpKind::F, 0, 0}), 0, 1));
    t.intervals.push_back(iv(1, Stream::Compute, Action::single({OpKind::F, 1, 0}), 1, 2));
    t.intervals.push_back(iv(1, Stream::Compute, Action::single({OpKind::F, 2, 0}), s2, s2 + 1));
    t.intervals.push_back(iv(0, Stream::Compute, Action::single({OpKind::F, 3, 0}), s2 + 1, s2 + 2));
    t.activations = {{{0, 1}}, {{1, 2}}};
    const nlohmann::json j = compact_timeline({"x", &t, nullptr, -1, {}});
    CHECK(j["spp"] == (two ? 2 : 4));
    // Live activations in rank shares: two pipes of P stages hold whole-rank chunks (1 each); a V
    // of 2P stages holds 2 chunks per rank, each half a rank's layers (1/2 each).
    const double share = two ? 1.0 : 0.5;
    CHECK(j["mem"]["ranks"][0] == nlohmann::json({0, 1 * share}));
    CHECK(j["mem"]["ranks"][1] == nlohmann::json({1, 2 * share}));
  }
}

TEST_CASE("html report: one file, data inside its script element", "[html]") {
  Timeline t;
  t.pp = 1;
  t.intervals.push_back(iv(0, Stream::Compute, Action::single({OpKind::F, 0, 0}), 0, 10));
  HtmlReport r;
  r.kind = "compare";
  r.title = "a <b> & c";
  r.results = {{"results", nlohmann::json::array({{{"schedule", "</script><script>alert(1)"}}})}};
  r.timelines.push_back({"t", &t, nullptr, 0, {}});
  const std::string page = render_html(r);
  CHECK(page.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(page.find("<title>a &lt;b&gt; &amp; c</title>") != std::string::npos);
  // The schedule name's "</script>" is written "<\/script>": exactly the page's own closing tags remain.
  const auto data_at = page.find("<script id=\"ppsim-data\" type=\"application/json\">");
  REQUIRE(data_at != std::string::npos);
  const auto data_end = page.find("</script>", data_at);
  CHECK(page.substr(data_at, data_end - data_at).find("<\\/script><script>alert(1)") != std::string::npos);
  // No network: no script, style or font comes from elsewhere.
  CHECK(page.find("<script src") == std::string::npos);
  CHECK(page.find("<link") == std::string::npos);
  CHECK(page.find("@import") == std::string::npos);
  if (!html_has_engine()) CHECK(page.find("http") == std::string::npos);
  CHECK(page.find("ppsimReport") != std::string::npos);  // web/report.js is in
}

}  // namespace
}  // namespace ppsim
