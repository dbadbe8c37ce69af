// The engine in the HTML report's page: the same api::run as `ppsim compare` / `simulate`
// (generators, validator, simulator, metrics), compiled to WebAssembly by tools/build_wasm.sh.
// One entry point: a request as JSON in, the results (docs/JSON.md) and the compact timelines
// (src/report/html.h) out, or {"error": "..."} with the CLI's one-line message.
#include <string>

#include <emscripten/emscripten.h>
#include <nlohmann/json.hpp>

#include "api/request.h"
#include "api/times.h"
#include "core/error.h"
#include "report/html.h"

namespace {
std::string g_out;
}

extern "C" EMSCRIPTEN_KEEPALIVE const char* ppsim_simulate_json(const char* request) {
  using nlohmann::json;
  try {
    const json q = json::parse(request);
    ppsim::api::Request r;
    if (q.contains("pp") && q["pp"].get<int>() > 0) r.schedule.pp = q["pp"].get<int>();
    if (q.contains("m") && q["m"].get<int>() > 0) r.schedule.microbatches = q["m"].get<int>();
    r.families = q.value("schedules", std::string("all"));
    r.single = r.families != "all" && r.families.find(',') == std::string::npos;
    if (q.contains("times")) r.units.times = ppsim::api::parse_times(q["times"].get<std::string>(), "--times");
    r.units.p2p_latency = q.value("p2p_latency", 0.0);
    r.units.a2a = q.value("a2a", -1.0);
    r.timelines = !q.value("no_timelines", false);
    ppsim::api::Result res = ppsim::api::run(r);
    json out;
    out["results"] = ppsim::api::to_json(res);
    json tls = json::array();
    for (std::size_t i = 0; i < res.timelines.size(); ++i)
      tls.push_back(ppsim::compact_timeline({res.rows[i].metrics.schedule, &res.timelines[i], nullptr, static_cast<int>(i), {}}));
    out["timelines"] = std::move(tls);
    g_out = out.dump(-1, ' ', false, json::error_handler_t::replace);
  } catch (const ppsim::InputError& e) {
    g_out = json{{"error", e.one_line()}}.dump();
  } catch (const std::exception& e) {
    g_out = json{{"error", e.what()}}.dump();
  }
  return g_out.c_str();
}
