// The SVG writer (src/report/svg.cc): well-formed XML (xmllint), one op cell per compute
// interval, escaped names, one memory line per rank, the two shades of DualPipe's pipes, and a
// headless-Chromium render of the DualPipe figure case that must not come out blank.
// xmllint (libxml2-utils) and chromium come from tools/install-test-extras.sh; without them
// those checks are skipped.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "catch.h"
#include "report/svg.h"
#include "schedules/registry.h"
#include "sim/costs.h"
#include "sim/engine.h"

using namespace ppsim;
namespace fs = std::filesystem;

namespace {

constexpr Time kU = kTicksPerUnit;

struct Case {
  Schedule s;
  SimResult r;
};

Case simulate_case(const std::string& family, int p, int m, double f, double b, double w, double fb, Time latency = 0) {
  Case c;
  c.s = make_schedule(family, ScheduleParams{p, m, 0, 0});
  SliceCosts sc;
  sc.f = static_cast<Time>(f * kU);
  sc.b = static_cast<Time>(b * kU);
  sc.w = static_cast<Time>(w * kU);
  sc.fb = static_cast<Time>(fb * kU);
  SimCosts costs = uniform_costs(c.s.stages_per_pipe, sc);
  costs.link.latency = latency;
  c.r = simulate(c.s, costs, SimOptions{true});
  return c;
}

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + needle.size())) ++n;
  return n;
}

std::size_t compute_intervals(const Timeline& t) {
  std::size_t n = 0;
  for (const auto& iv : t.intervals) n += iv.stream == Stream::Compute ? 1 : 0;
  return n;
}

// A fresh directory under the system temp dir, removed when the test ends.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "ppsim-svg-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool have(const char* path) { return ::access(path, X_OK) == 0; }

// xmllint's verdict on `svg`; "" when well-formed, else its messages.
std::string xmllint_errors(const std::string& svg) {
  TempDir dir;
  const fs::path file = dir.path() / "picture.svg", log = dir.path() / "xmllint.log";
  write_file(file, svg);
  const int rc = std::system(("/usr/bin/xmllint --noout " + quote(file.string()) + " 2> " + quote(log.string())).c_str());
  return rc == 0 ? std::string() : "xmllint failed: " + read_file(log);
}

// The width and height attributes of the root element.
std::pair<int, int> svg_size(const std::string& svg) {
  auto attr = [&](const std::string& name) {
    const std::size_t root = svg.find("<svg");
    const std::size_t pos = svg.find(" " + name + "=\"", root);
    return pos == std::string::npos ? 0 : std::atoi(svg.c_str() + pos + name.size() + 3);
  };
  return {attr("width"), attr("height")};
}

// Renders `svg` in headless Chromium at 1600x900 and returns the PNG's bytes ("" on failure).
std::string screenshot(const fs::path& dir, const std::string& stem, const std::string& svg) {
  const fs::path file = dir / (stem + ".svg"), png = dir / (stem + ".png"), profile = dir / (stem + "-profile");
  write_file(file, svg);
  fs::create_directories(profile);
  const std::string cmd = "timeout 60 /usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
                          "--disable-background-networking --disable-component-update --disable-sync --hide-scrollbars "
                          "--user-data-dir=" + quote(profile.string()) + " --screenshot=" + quote(png.string()) +
                          " --window-size=1600,900 " + quote("file://" + file.string()) + " > /dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0 || !fs::exists(png)) return {};
  return read_file(png);
}

// Width and height from a PNG's IHDR chunk (bytes 16..23, big-endian); {0, 0} if not a PNG.
std::pair<unsigned, unsigned> png_size(const std::string& png) {
  if (png.size() < 24 || png.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0 || png.compare(12, 4, "IHDR") != 0) return {0, 0};
  auto be32 = [&](std::size_t at) {
    unsigned v = 0;
    for (std::size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<unsigned char>(png[at + i]);
    return v;
  };
  return {be32(16), be32(20)};
}

}  // namespace

TEST_CASE("svg: one op cell per compute interval, one memory line per rank", "[report][svg]") {
  // 1F1B, P=2, M=2, F=1, B=2, latency 0.5: 8 compute intervals (2 ranks x 2 mb x F, B).
  const Case c = simulate_case("1f1b", 2, 2, 1, 2, 0, 0, kU / 2);
  REQUIRE(compute_intervals(c.r.timeline) == 8);
  const std::string svg = render_svg({{"1f1b", &c.r.timeline}});
  REQUIRE(count(svg, "class=\"op\"") == 8);
  REQUIRE(count(svg, "<polyline class=\"mem\"") == 2);
  // Latency makes the transfers take time: one transfer bar per transfer, 4.
  REQUIRE(count(svg, "class=\"xfer\"") == c.r.timeline.transfers.size());
  // Micro-batch numbers are the cells' text.
  REQUIRE(count(svg, ">0</text>") == 4 + 1);  // 0F0 0B0 1F0 1B0, and the time axis's 0
  REQUIRE(count(svg, ">1</text>") >= 4);      // 0F1 0B1 1F1 1B1 (and maybe an axis label)
}

TEST_CASE("svg: well-formed XML with escaped names (xmllint)", "[report][svg]") {
  const Case c = simulate_case("1f1b", 2, 2, 1, 2, 0, 0);
  const std::string svg = render_svg({{"a<b & \"c\" 'd'", &c.r.timeline}, {"zb-h1", &c.r.timeline}});
  REQUIRE(svg.find("a&lt;b &amp; &quot;c&quot; &apos;d&apos;") != std::string::npos);
  REQUIRE(svg.find("a<b") == std::string::npos);
  // Two blocks of 8 cells.
  REQUIRE(count(svg, "class=\"op\"") == 16);
  if (!have("/usr/bin/xmllint")) PPSIM_SKIP("/usr/bin/xmllint not found (apt-get install libxml2-utils)");
  REQUIRE(xmllint_errors(svg).empty());
}

TEST_CASE("svg: the DualPipe figure case, cells and the two pipes' shades", "[report][svg]") {
  // The DualPipe paper's figure: P=8, M=20, F=1, B=2, W=1, F&B=3.
  const Case c = simulate_case("dualpipe", 8, 20, 1, 2, 1, 3);
  std::size_t actions = 0;
  for (const auto& rank : c.s.ranks) actions += rank.size();
  REQUIRE(compute_intervals(c.r.timeline) == actions);
  const std::string svg = render_svg({{"dualpipe", &c.r.timeline}});
  REQUIRE(count(svg, "class=\"op\"") == actions);
  REQUIRE(count(svg, "<polyline class=\"mem\"") == 8);
  // One fill per (kind, pipe): the reverse pipe (stage >= P) is a darker shade of its kind.
  std::set<std::pair<std::string, bool>> shades;
  for (const auto& iv : c.r.timeline.intervals) {
    const Action& a = iv.action;
    shades.insert({a.overlapped ? std::string("FB") : std::string(1, op_kind_char(a.first.kind)), a.first.stage >= 8});
  }
  std::set<std::string> fills;
  for (std::size_t pos = svg.find("<rect class=\"op\""); pos != std::string::npos; pos = svg.find("<rect class=\"op\"", pos + 1)) {
    const std::size_t f = svg.find("fill=\"", pos) + 6;
    fills.insert(svg.substr(f, svg.find('"', f) - f));
  }
  REQUIRE(fills.size() == shades.size());
  if (!have("/usr/bin/xmllint")) PPSIM_SKIP("/usr/bin/xmllint not found (apt-get install libxml2-utils)");
  REQUIRE(xmllint_errors(svg).empty());
}

TEST_CASE("svg: headless Chromium renders the DualPipe figure, not a blank page", "[report][svg][chromium]") {
  if (!have("/usr/bin/chromium")) PPSIM_SKIP("/usr/bin/chromium not found (tools/install-test-extras.sh installs it)");
  const Case c = simulate_case("dualpipe", 8, 20, 1, 2, 1, 3);
  const std::string svg = render_svg({{"dualpipe", &c.r.timeline}});
  const auto [w, h] = svg_size(svg);
  REQUIRE(w > 0);
  REQUIRE(h > 0);
  // The baseline: an empty white picture of the same size, rendered the same way.
  const std::string blank_svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(w) + "\" height=\"" +
                                std::to_string(h) + "\"><rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/></svg>\n";
  TempDir dir;
  REQUIRE(!dir.path().empty());
  const std::string blank = screenshot(dir.path(), "blank", blank_svg);
  const std::string figure = screenshot(dir.path(), "figure", svg);
  if (blank.empty() || figure.empty()) PPSIM_SKIP("chromium --headless --screenshot produced no PNG");
  REQUIRE(png_size(figure) == std::pair<unsigned, unsigned>{1600, 900});
  REQUIRE(png_size(blank) == std::pair<unsigned, unsigned>{1600, 900});
  // White compresses to almost nothing; some 400 coloured, numbered cells do not.
  INFO("figure PNG " << figure.size() << " bytes, blank PNG " << blank.size() << " bytes");
  REQUIRE(figure.size() > 4 * blank.size());
  REQUIRE(figure.size() > blank.size() + 20000);
}
