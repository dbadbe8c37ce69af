// The options table (api/options.h), the values read through it, the requests built from them, and
// the one schedule-list parser (schedules/schedule_list.h).
#include "api/options.h"

#include <algorithm>
#include <functional>
#include <set>

#include "catch.h"
#include "core/error.h"
#include "schedules/schedule_list.h"

using namespace ppsim;

namespace {
std::vector<std::string> names_of(const std::vector<const Family*>& fams) {
  std::vector<std::string> out;
  for (const Family* f : fams) out.push_back(f->name);
  return out;
}

int exit_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.exit_code();
  }
  return 0;
}
}  // namespace

TEST_CASE("schedule lists: one rule for trimming, all, and torch's names", "[api][options]") {
  CHECK(split_schedule_names("1f1b, gpipe") == std::vector<std::string>{"1f1b", "gpipe"});
  CHECK(split_schedule_names(" 1f1b ,\tgpipe,, ") == std::vector<std::string>{"1f1b", "gpipe"});
  CHECK(split_schedule_names(" all ").empty());
  // all: every family but Megatron's EP all-to-all overlap, which runs when named.
  CHECK(parse_schedule_list(" all ").size() == families().size() - 1);
  CHECK(parse_schedule_list("").size() == families().size() - 1);
  CHECK(names_of(parse_schedule_list("combined-1f1b")) == std::vector<std::string>{"interleaved-1f1b-overlap"});
  // PyTorch's class names and get_schedule_class keys (case-insensitive, as torch reads them).
  CHECK(names_of(parse_schedule_list("Schedule1F1B, ScheduleGPipe,ScheduleInterleaved1F1B")) ==
        std::vector<std::string>{"1f1b", "gpipe", "interleaved-1f1b"});
  CHECK(names_of(parse_schedule_list("ZBVZeroBubble,ScheduleZBVZeroBubble,DualPipeV,ScheduleDualPipeV")) ==
        std::vector<std::string>{"zbv", "zbv", "dualpipev", "dualpipev"});
  // The two torch schedules without a generator here are refused as usage errors, not unknown.
  CHECK(exit_of([] { parse_schedule_list("ScheduleLoopedBFS"); }) == kExitUsage);
  CHECK(exit_of([] { parse_schedule_list("1f1b, nope"); }) == kExitUsage);
}

TEST_CASE("options table: names unique per command, defaults among their choices", "[api][options]") {
  for (const api::CommandSpec& c : api::command_specs()) {
    std::set<std::string> py, cli;
    for (const api::Option& o : c.options) {
      INFO(c.name << " " << o.names);
      CHECK(py.insert(api::python_name(o)).second);
      if (o.reach != api::Reach::Python) CHECK(cli.insert(api::option_name(o)).second);
      CHECK((o.kind != api::Kind::Flag || o.def.empty() || o.def == "true"));
      if (!o.choices.empty() && !o.def.empty()) {
        const std::vector<std::string> choices = api::choice_list(o);
        CHECK(std::find(choices.begin(), choices.end(), std::string(o.def)) != choices.end());
      }
    }
  }
  CHECK(&api::command_spec("compare") == &api::command_specs()[2]);
  CHECK_THROWS_AS(api::command_spec("nope"), InternalError);
}

TEST_CASE("values: the table's defaults, typed; requests built once with times parsed", "[api][options]") {
  api::Values v(api::command_spec("compare"));
  CHECK(v.integer("layers") == 1);
  CHECK(v.real("attn_share") == 0.5);
  CHECK_FALSE(v.integer("pp"));
  CHECK_FALSE(v.real("a2a"));
  CHECK(v.text("schedules") == "all");
  CHECK_FALSE(v.flag("drop_comm"));
  CHECK_THROWS_AS(v.text("no_such_option"), InternalError);

  api::Request r = api::run_request(v);
  // F=1,B=2,W=1,FB=3 in ticks; the overlap model off (a2a < 0); P, M unset.
  CHECK(r.units.times.f == kTicksPerUnit);
  CHECK(r.units.times.fb == 3 * kTicksPerUnit);
  CHECK_FALSE(r.units.chunk_times);
  CHECK(r.units.a2a < 0);
  CHECK_FALSE(r.schedule.pp);
  CHECK(r.schedule.keep_comm);
  CHECK(r.families == "all");

  v.set("pp", 4LL);
  v.set("chunk_times", std::string("F=0.5,B=1"));
  v.set("drop_comm", true);
  v.set("a2a", 0.25);
  r = api::run_request(v);
  CHECK(r.schedule.pp == 4);
  REQUIRE(r.units.chunk_times);
  CHECK(r.units.chunk_times->fb == 3 * kTicksPerUnit / 2);  // FB defaults to F + B
  CHECK_FALSE(r.schedule.keep_comm);
  CHECK(r.units.a2a == 0.25);

  api::Values s(api::command_spec("search"));
  CHECK_FALSE(api::search_call(s).memory_cap);  // "best": the best family's peak
  s.set("memory_cap", std::string("none"));
  CHECK(api::search_call(s).memory_cap == 0.0);
  s.set("memory_cap", std::string("-1"));
  CHECK(exit_of([&] { (void)api::search_call(s); }) == kExitUsage);
}
