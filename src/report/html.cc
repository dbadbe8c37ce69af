#include "report/html.h"

#include <algorithm>

#include "ppsim_web_assets.h"  // generated from web/ by cmake/embed_web.cmake
#include "report/svg.h"

namespace ppsim {

namespace {

// JSON inside <script>: "</" would end the element; "<\/" is the same JSON string.
std::string script_safe(std::string s) {
  for (std::size_t i = 0; (i = s.find("</", i)) != std::string::npos; i += 3) s.replace(i, 2, "<\\/");
  return s;
}

// The timelines the page carries: in full up to kPageIntervals intervals in all (the first one
// always); past that budget (compare at P=64, M=1024: 1.4 million intervals, 30 MB) a stub
// {name, row, omitted: its interval count}, which the page simulates on request with its engine.
constexpr std::size_t kPageIntervals = 200000;

nlohmann::json page_timelines(const std::vector<HtmlTimeline>& timelines) {
  nlohmann::json tls = nlohmann::json::array();
  std::size_t total = 0;
  for (const HtmlTimeline& t : timelines) {
    if (!t.timeline) continue;
    const std::size_t n = t.timeline->intervals.size();
    if (!tls.empty() && total + n > kPageIntervals) {
      nlohmann::json stub{{"name", t.name}, {"omitted", n}};
      if (t.row >= 0) stub["row"] = t.row;
      if (!t.label.empty()) stub["label"] = t.label;
      tls.push_back(std::move(stub));
      continue;
    }
    total += n;
    tls.push_back(compact_timeline(t));
  }
  return tls;
}

}  // namespace

HtmlReport plan_html(const nlohmann::json& plan) {
  HtmlReport r;
  r.kind = "plan";
  r.title = "ppsim plan " + plan.value("config", std::string());
  int i = 0;
  for (const nlohmann::json& v : plan.value("variants", nlohmann::json::array())) {
    const std::string name = v.value("name", std::string());
    const std::string tag = name.empty() ? std::string() : " (" + name + ")";
    const std::string note = std::to_string(v.value("evaluated", 0)) + " of " + std::to_string(v.value("candidates", 0)) +
                             " candidates evaluated, " + std::to_string(v.value("feasible", 0)) + " feasible";
    r.sections.push_back({{"title", "Ranked plans" + tag}, {"id", "plan-ranking-" + std::to_string(i)}, {"note", note},
                          {"objects", v.value("ranking", nlohmann::json::array())}});
    r.sections.push_back({{"title", "Best plan per schedule" + tag}, {"id", "plan-best-" + std::to_string(i)},
                          {"objects", v.value("best_per_schedule", nlohmann::json::array())}});
    r.sections.push_back({{"title", "What ruled candidates out" + tag}, {"id", "plan-rejected-" + std::to_string(i)},
                          {"objects", v.value("rejected", nlohmann::json::array())}});
    r.sections.push_back({{"title", "Ruled out, per schedule" + tag}, {"id", "plan-rejected-by-schedule-" + std::to_string(i)},
                          {"objects", v.value("rejected_by_schedule", nlohmann::json::array())}});
    ++i;
  }
  if (plan.contains("whatif") && plan["whatif"].is_array())
    r.sections.push_back({{"title", "What-if variants"}, {"id", "plan-whatif"}, {"objects", plan["whatif"]}});
  return r;
}

HtmlReport json_tables_html(const std::string& kind, const std::string& title, const nlohmann::json& j) {
  HtmlReport r;
  r.kind = kind;
  r.title = title;
  auto is_table = [](const nlohmann::json& v) {
    return v.is_array() && !v.empty() && std::all_of(v.begin(), v.end(), [](const nlohmann::json& x) { return x.is_object(); });
  };
  nlohmann::json scalars = nlohmann::json::object();
  for (const auto& [k, v] : j.items()) {
    if (is_table(v)) {
      r.sections.push_back({{"title", k}, {"id", "t-" + k}, {"objects", v}});
    } else if (v.is_object()) {
      for (const auto& [k2, v2] : v.items())
        if (is_table(v2)) r.sections.push_back({{"title", k + "." + k2}, {"id", "t-" + k + "-" + k2}, {"objects", v2}});
    } else if (!v.is_array()) {
      scalars[k] = v;
    }
  }
  if (!scalars.empty())
    r.sections.insert(r.sections.begin(), nlohmann::json{{"title", "summary"}, {"id", "t-summary"},
                                                         {"objects", nlohmann::json::array({scalars})}});
  return r;
}

bool html_has_engine() { return !web::kEngineJs.empty(); }

std::string render_html(const HtmlReport& r) {
  nlohmann::json data;
  data["kind"] = r.kind;
  data["title"] = r.title;
  data["results"] = r.results;
  data["timelines"] = page_timelines(r.timelines);
  data["inputs"] = r.inputs;
  data["sections"] = r.sections;
  data["engine"] = html_has_engine();

  std::string o;
  o.reserve(1 << 20);
  o += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
       "<meta name=\"generator\" content=\"ppsim\">\n<title>";
  o += xml_escape(r.title);
  o += "</title>\n<style>\n";
  o += web::kReportCss;
  o += "</style>\n</head>\n<body>\n<header><h1>";
  o += xml_escape(r.title);
  o += "</h1><span class=\"cmd\" id=\"subtitle\"></span><span class=\"spacer\"></span><button id=\"theme\" type=\"button\">light / dark</button></header>\n"
       "<div id=\"main\"></div>\n<div id=\"tip\"></div>\n<script id=\"ppsim-data\" type=\"application/json\">";
  o += script_safe(data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  o += "</script>\n";
  if (!web::kEngineJs.empty() && !r.inputs.is_null()) {
    o += "<script>\n";
    o += web::kEngineJs;
    o += "\n</script>\n";
  }
  o += "<script>\n";
  o += web::kReportJs;
  o += "</script>\n</body>\n</html>\n";
  return o;
}

}  // namespace ppsim
