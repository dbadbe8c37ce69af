// ppsim._ppsim: the pybind11 binding of the library layer (src/api/). The Python package
// (python/ppsim/__init__.py) wraps it with keyword arguments and PyTorch's pipeline_order.
//
// Not obvious: results are built as the CLI's JSON objects (api::to_json, render_plan_json) and
// converted to Python objects, so Python and `--format json` agree by construction; the GIL is
// released while schedules are generated, imported and simulated, never while Python objects
// are touched.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "api/calibrate.h"
#include "api/fidelity.h"
#include "api/gpu.h"
#include "api/import_trace.h"
#include "api/model.h"
#include "api/options.h"
#include "api/plan.h"
#include "api/request.h"
#include "api/schedule_source.h"
#include "api/search.h"
#include "api/times.h"
#include "core/error.h"
#include "plan/plan_json.h"
#include "ppsim_version.h"
#include "report/svg.h"
#include "report/trace.h"
#include "schedules/notation.h"
#include "schedules/torch_p2p.h"
#include "sim/engine.h"

namespace py = pybind11;
using namespace ppsim;

namespace {

// A schedule and, when generated from a family, the parameters it was generated with.
struct ScheduleHandle {
  Schedule s;
  std::optional<ScheduleParams> params;
};

// A loaded config: the handle, and what results and the planner need to name it.
struct ConfigHandle {
  ModelConfig cfg;
  std::string path;
  std::vector<std::string> sets;
};

py::object to_py(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return py::none();
    case nlohmann::json::value_t::boolean:
      return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return py::int_(j.get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return py::int_(j.get<std::uint64_t>());
    case nlohmann::json::value_t::number_float:
      return py::float_(j.get<double>());
    case nlohmann::json::value_t::string:
      return py::str(j.get_ref<const std::string&>());
    case nlohmann::json::value_t::array: {
      py::list l;
      for (const auto& e : j) l.append(to_py(e));
      return l;
    }
    case nlohmann::json::value_t::object: {
      py::dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d[py::str(it.key())] = to_py(it.value());
      return d;
    }
    default:
      return py::none();
  }
}

// A column of numbers: a NumPy array when asked for (numpy importable), else a list.
template <class T, class F>
py::object column(std::size_t n, bool numpy, F&& at) {
  if (numpy) {
    py::array_t<T> a(static_cast<py::ssize_t>(n));
    auto m = a.template mutable_unchecked<1>();
    for (std::size_t i = 0; i < n; ++i) m(static_cast<py::ssize_t>(i)) = at(i);
    return a;
  }
  py::list l(n);
  for (std::size_t i = 0; i < n; ++i) l[i] = py::cast(at(i));
  return l;
}
template <class F>
py::list str_column(std::size_t n, F&& at) {
  py::list l(n);
  for (std::size_t i = 0; i < n; ++i) l[i] = py::str(at(i));
  return l;
}

// The timeline with the names of `ppsim simulate --timeline` (render_timeline_json), intervals
// and transfers as columns (one list or array per field), in the timeline's time unit.
py::dict timeline_to_py(const Timeline& t, bool numpy) {
  auto d = [&](Time x) { return t.scale.to_display(x); };
  py::dict out;
  out["pp"] = t.pp;
  out["time_unit"] = t.scale.unit;
  out["start"] = d(t.start);
  out["end"] = d(t.end);
  const auto& iv = t.intervals;
  py::dict ivs;
  ivs["rank"] = column<std::int32_t>(iv.size(), numpy, [&](std::size_t i) { return iv[i].rank; });
  ivs["stream"] =
      str_column(iv.size(), [&](std::size_t i) { return iv[i].stream == Stream::Compute ? "compute" : "comm"; });
  ivs["part"] = str_column(iv.size(), [&](std::size_t i) { return part_name(iv[i].part); });
  ivs["start"] = column<double>(iv.size(), numpy, [&](std::size_t i) { return d(iv[i].start); });
  ivs["end"] = column<double>(iv.size(), numpy, [&](std::size_t i) { return d(iv[i].end); });
  ivs["action"] = str_column(iv.size(), [&](std::size_t i) { return format_action(iv[i].action); });
  ivs["op_index"] =
      column<std::int32_t>(iv.size(), numpy, [&](std::size_t i) { return static_cast<std::int32_t>(iv[i].op_index); });
  out["intervals"] = ivs;
  const auto& tr = t.transfers;
  py::dict trs;
  trs["src_rank"] = column<std::int32_t>(tr.size(), numpy, [&](std::size_t i) { return tr[i].src_rank; });
  trs["dst_rank"] = column<std::int32_t>(tr.size(), numpy, [&](std::size_t i) { return tr[i].dst_rank; });
  trs["start"] = column<double>(tr.size(), numpy, [&](std::size_t i) { return d(tr[i].start); });
  trs["end"] = column<double>(tr.size(), numpy, [&](std::size_t i) { return d(tr[i].end); });
  trs["producer"] = str_column(tr.size(), [&](std::size_t i) { return format_op(tr[i].producer); });
  trs["bytes"] =
      column<std::int64_t>(tr.size(), numpy, [&](std::size_t i) { return static_cast<std::int64_t>(tr[i].bytes); });
  out["transfers"] = trs;
  py::list act;
  for (const auto& rank : t.activations) {
    py::dict r;
    r["t"] = column<double>(rank.size(), numpy, [&](std::size_t i) { return d(rank[i].t); });
    r["activations"] = column<std::int32_t>(rank.size(), numpy, [&](std::size_t i) { return rank[i].activations; });
    act.append(r);
  }
  out["activations"] = act;
  return out;
}

std::vector<std::vector<std::string>> ranks_of(const Schedule& s) {
  std::vector<std::vector<std::string>> out;
  for (const auto& r : s.ranks) {
    std::vector<std::string> row;
    row.reserve(r.size());
    for (const auto& a : r) row.push_back(format_action(a));
    out.push_back(std::move(row));
  }
  return out;
}

ScheduleHandle generate(const std::string& family, int pp, int microbatches, int vpp, int group_size,
                        long long max_ops) {
  api::ScheduleChoice c;
  c.pp = pp;
  c.microbatches = microbatches;
  c.vpp = vpp;
  c.group_size = group_size;
  c.max_ops = max_ops;
  py::gil_scoped_release nogil;
  api::apply_limits(c);
  const Family& fam = find_family(family);
  const ScheduleParams p = api::params_for(fam, c);
  return ScheduleHandle{make_schedule(fam.name, p), p};
}

ScheduleHandle import_text(const std::string& text, const std::string& name, int pp, int microbatches,
                           const std::string& layout) {
  py::gil_scoped_release nogil;
  return ScheduleHandle{import_csv(text, name, pp, microbatches, parse_layout(layout)), std::nullopt};
}

ScheduleHandle import_file(const std::string& path, int pp, int microbatches, const std::string& layout) {
  py::gil_scoped_release nogil;
  return ScheduleHandle{import_csv_file(path, pp, microbatches, parse_layout(layout)), std::nullopt};
}

// ---- keyword arguments through the options table (src/api/options.cc) ------------------------------

// "F=1,B=2" from a dict {"F": 1, "B": 2}: each number as its repr, which round-trips a float.
std::string times_text(const py::handle& x) {
  if (!py::isinstance<py::dict>(x)) return py::str(x);
  std::string out;
  for (auto [k, v] : py::reinterpret_borrow<py::dict>(x)) {
    const bool number = py::isinstance<py::float_>(v) || (py::isinstance<py::int_>(v) && !py::isinstance<py::bool_>(v));
    out += fmt::format("{}{}={}", out.empty() ? "" : ",", std::string(py::str(k)),
                       std::string(number ? py::repr(py::float_(py::reinterpret_borrow<py::object>(v))) : py::str(v)));
  }
  return out;
}

// --set's "key=value" from a dict {"parallel.pp": 4} (bools as true/false) or a list of strings.
std::vector<std::string> texts_of(const py::handle& x) {
  std::vector<std::string> out;
  if (py::isinstance<py::str>(x) || py::isinstance<py::bytes>(x)) return {py::str(x)};
  if (py::isinstance<py::dict>(x)) {
    for (auto [k, v] : py::reinterpret_borrow<py::dict>(x))
      out.push_back(
          fmt::format("{}={}", std::string(py::str(k)),
                      py::isinstance<py::bool_>(v) ? (v.cast<bool>() ? "true" : "false") : std::string(py::str(v))));
    return out;
  }
  for (const py::handle item : x) out.push_back(py::str(item));
  return out;
}

[[noreturn]] void type_error(const std::string& fn, const api::Option& o, const char* want, const py::handle& x) {
  throw py::type_error(fmt::format("{}(): {} must be {}, got {}", fn, api::python_name(o), want,
                                   std::string(py::str(py::type::handle_of(x).attr("__name__")))));
}

// One keyword's value as the table's kind says.
api::Value value_of(const std::string& fn, const api::Option& o, const py::handle& x) {
  if (x.is_none()) return std::monostate{};
  const bool is_bool = py::isinstance<py::bool_>(x);
  switch (o.kind) {
    case api::Kind::Flag:
      if (!is_bool) type_error(fn, o, "a bool", x);
      return x.cast<bool>();
    case api::Kind::Int:
    case api::Kind::Int64:
      if (is_bool || !py::isinstance<py::int_>(x)) type_error(fn, o, "an int", x);
      return x.cast<long long>();
    case api::Kind::Real: {
      if (is_bool || !(py::isinstance<py::int_>(x) || py::isinstance<py::float_>(x))) type_error(fn, o, "a number", x);
      const double d = x.cast<double>();
      if (o.positive && !(d > 0))
        throw InputError(fmt::format("--{}: {} is not a positive number", api::option_name(o), d), {}, kExitUsage);
      return d;
    }
    case api::Kind::Text: {
      if (py::isinstance<py::dict>(x)) return times_text(x);
      if (py::isinstance<py::list>(x) || py::isinstance<py::tuple>(x)) {  // schedules=["1f1b", "gpipe"]
        std::string out;
        for (const std::string& t : texts_of(x)) out += (out.empty() ? "" : ",") + t;
        return out;
      }
      std::string t = py::str(x);
      api::check_choice(o, t);
      return t;
    }
    case api::Kind::Texts:
      return texts_of(x);
    case api::Kind::Ints: {
      std::vector<long long> out;
      for (const py::handle item : x) {
        if (!py::isinstance<py::int_>(item) || py::isinstance<py::bool_>(item))
          type_error(fn, o, "a list of ints", item);
        out.push_back(item.cast<long long>());
      }
      return out;
    }
  }
  throw InternalError("unknown option kind");
}

// The keyword arguments as the command's values: exactly the table's Python keywords (TypeError
// with a suggestion otherwise). Handles (Config, Schedule) are left to the caller.
api::Values values_of(const api::CommandSpec& c, const py::dict& kw) {
  const std::string fn(c.py);
  api::Values v(c);
  std::vector<std::string> names;
  for (const api::Option& o : c.options)
    if (o.reach != api::Reach::Cli) names.push_back(api::python_name(o));
  for (auto [k, x] : kw) {
    const std::string key = py::str(k);
    const api::Option* o = api::find_option(c, key);
    if (!o || o->reach == api::Reach::Cli) {
      const std::string near = closest_match(key, names);
      throw py::type_error(fmt::format("{}() got an unexpected keyword argument '{}'{}", fn, key,
                                       near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near)));
    }
    if (py::isinstance<ConfigHandle>(x) || py::isinstance<ScheduleHandle>(x) || key == "overlap") continue;
    v.set(key, value_of(fn, *o, x));
  }
  return v;
}

// config= as a ppsim.Config: its path, and its overrides before any given with the call.
void take_config(api::Values& v, const py::dict& kw) {
  if (!kw.contains("config") || !py::isinstance<ConfigHandle>(kw["config"])) return;
  const ConfigHandle& h = kw["config"].cast<const ConfigHandle&>();
  std::vector<std::string> sets = h.sets;
  for (std::string& s : v.texts("overrides")) sets.push_back(std::move(s));
  v.set("config", h.path);
  v.set("overrides", sets);
}

// overlap={"a2a": .., "layers": ..}: the overlap keywords as one dict (given keywords win).
void take_overlap(api::Values& v, const py::dict& kw) {
  if (!kw.contains("overlap") || kw["overlap"].is_none()) return;
  const py::dict ov = kw["overlap"].cast<py::dict>();
  if (!ov.contains("a2a")) throw py::type_error("overlap needs 'a2a' (the time of one layer's all-to-all)");
  for (auto [k, x] : ov) {
    const std::string key = py::str(k);
    const api::Option* o = key == "overlap" ? nullptr : api::find_option(v.command(), key);
    if (!o || (key != "a2a" && key != "layers" && key != "attn_share" && key != "comm_sms" && key != "sms"))
      throw py::type_error(fmt::format("overlap: unknown key '{}' (a2a, layers, attn_share, comm_sms, sms)", key));
    if (!v.given(key)) v.set(key, value_of(std::string(v.command().py), *o, x));
  }
}

void warn_notes(const api::Values& v) {
  for (const std::string& n : v.notes) PyErr_WarnEx(PyExc_UserWarning, n.c_str(), 1);
  v.notes.clear();
}

bool have_numpy() {
  try {
    py::module_::import("numpy");
    return true;
  } catch (const py::error_already_set&) {
    return false;
  }
}

// compare and simulate: api::run as `--format json`, with the timelines when asked for; simulate
// returns its one result (with "timeline").
py::object run_call(const api::Values& v, const py::dict& kw) {
  api::Request req = api::run_request(v);
  warn_notes(v);
  const bool simulate = v.command().name == "simulate";
  if (simulate && kw.contains("schedule") && py::isinstance<ScheduleHandle>(kw["schedule"])) {
    const ScheduleHandle& h = kw["schedule"].cast<const ScheduleHandle&>();
    req.schedule.schedule = h.s;
    req.schedule.generated_with = h.params;
  }
  req.timelines = simulate ? v.flag("timeline") : v.flag("timelines");
  api::Result r;
  {
    py::gil_scoped_release nogil;
    r = api::run(req);
  }
  py::dict out = to_py(api::to_json(r)).cast<py::dict>();
  py::list tl;
  for (const auto& t : r.timelines) tl.append(timeline_to_py(t, have_numpy()));
  if (!simulate) {
    if (req.timelines) out["timelines"] = tl;
    return out;
  }
  py::dict row = out["results"].cast<py::list>()[0].cast<py::dict>();
  if (req.timelines) row["timeline"] = tl[0];
  return row;
}

py::object search_py(const api::Values& v) {
  api::SearchCall c = api::search_call(v);
  warn_notes(v);
  api::SearchOutcome r;
  {
    py::gil_scoped_release nogil;
    r = api::search(c);
  }
  py::dict out = to_py(r.json).cast<py::dict>();
  out["table"] = r.table;
  out["schedule"] = ScheduleHandle{r.searched, std::nullopt};
  if (r.has_family) out["best_family_schedule"] = ScheduleHandle{r.best_family, std::nullopt};
  return out;
}

py::object plan_py(const api::Values& v) {
  const api::PlanRequest req = api::plan_request(v);
  warn_notes(v);
  std::string text;
  {
    py::gil_scoped_release nogil;
    text = render_plan_json(api::plan(req));
  }
  return to_py(nlohmann::json::parse(text));
}

// import_trace: as `--format json`, the version-2 profile's YAML under "profile_yaml" and the
// executed order's CSV under "executed_csv" (None where there is none); the caller writes output.
py::object import_trace_py(const api::Values& v) {
  const api::ImportTraceCall c = api::import_trace_call(v);
  api::ImportTraceOutcome r;
  {
    py::gil_scoped_release nogil;
    r = api::import_trace(c);
  }
  py::dict out = to_py(r.json).cast<py::dict>();
  auto text = [](const std::optional<std::string>& t) { return t ? py::object(py::str(*t)) : py::object(py::none()); };
  out["profile_yaml"] = text(r.profile_yaml);
  out["executed_csv"] = text(r.executed_csv);
  return out;
}

// profile: the profile's YAML and one layer's medians.
py::object profile_py(const api::Values& v) {
  const api::ProfileRequest req = api::profile_request(v);
  api::ProfileOutcome r;
  {
    py::gil_scoped_release nogil;
    r = api::profile(req);
  }
  py::dict out;
  out["yaml"] = r.yaml;
  out["gpu"] = r.layer.gpu;
  out["reps"] = r.layer.reps;
  py::dict ops;
  ops["F"] = r.layer.f_ms;
  ops["B"] = r.layer.b_ms;
  ops["W"] = r.layer.w_ms;
  ops["FB"] = r.layer.fb_ms;
  out["op_ms"] = ops;
  out["input_grad_ms"] = r.layer.input_grad_ms;
  py::dict sub;
  for (const auto& [k, x] : r.layer.sub_ops_ms) sub[py::str(k)] = x;
  out["sub_ops_ms"] = sub;
  return out;
}

// validate: as `--format json`, the table report as "text".
py::object validate_py(const api::Values& v) {
  const api::ValidateRequest req = api::validate_request(v);
  api::ValidateOutcome r;
  {
    py::gil_scoped_release nogil;
    r = api::validate(req);
  }
  py::dict out = to_py(r.json).cast<py::dict>();
  out["text"] = r.text;
  return out;
}

// ppsim.calibrate: the calibration's JSON, its YAML ("yaml") and the table ("text").
py::object calibrate_py(const api::Values& v) {
  const api::CalibrateRequest req = api::calibrate_request(v);
  const api::CalibrateOutcome out = [&] {
    py::gil_scoped_release nogil;
    return api::calibrate(req);
  }();
  nlohmann::json j = out.json;
  j["yaml"] = out.yaml;
  j["text"] = out.report;
  return to_py(j);
}

// ppsim.<command>(**kw): the keywords through the table, the request built as the CLI builds it.
py::object call(const std::string& command, const py::dict& kw) {
  const api::CommandSpec& c = api::command_spec(command);
  api::Values v = values_of(c, kw);
  take_config(v, kw);
  if (api::find_option(c, "overlap")) take_overlap(v, kw);
  if (command == "compare" || command == "simulate") return run_call(v, kw);
  if (command == "search") return search_py(v);
  if (command == "plan") return plan_py(v);
  if (command == "import-trace") return import_trace_py(v);
  if (command == "model") return to_py(api::model_json(api::model_report(api::model_request(v))));
  if (command == "fidelity") {
    api::FidelityRequest req = api::fidelity_request(v);
    req.progress = api::terminal_progress();
    const api::FidelityResult r = api::fidelity(req);
    api::end_terminal_progress();
    return to_py(api::fidelity_json(r));
  }
  if (command == "calibrate") return calibrate_py(v);
  if (command == "profile") return profile_py(v);
  if (command == "validate") return validate_py(v);
  throw InternalError(fmt::format("no Python call for '{}'", command));
}

// The default a keyword has in Python: the table's, typed; "" is None.
py::object py_default(const api::Option& o) {
  if (o.kind == api::Kind::Flag) return py::bool_(o.def == "true");
  if (o.def.empty()) return py::none();
  const std::string d(o.def);
  if (o.kind == api::Kind::Int || o.kind == api::Kind::Int64) return py::int_(std::stoll(d));
  if (o.kind == api::Kind::Real) return py::float_(std::stod(d));
  return py::str(d);
}

// [(keyword, default, kind, help)] of a command's Python keywords, in the table's order.
py::list keywords(const std::string& command) {
  static constexpr const char* kKinds[] = {"flag", "int", "int64", "real", "text", "texts", "ints"};
  py::list out;
  for (const api::Option& o : api::command_spec(command).options)
    if (o.reach != api::Reach::Cli)
      out.append(
          py::make_tuple(api::python_name(o), py_default(o), kKinds[static_cast<int>(o.kind)], std::string(o.help)));
  return out;
}

// The timeline of a schedule at unit times (F=1, B=2, W=1, FB=3, as `ppsim show`'s chart), as the
// SVG `ppsim simulate --svg` draws: a notebook's picture of a Schedule.
std::string schedule_svg(const ScheduleHandle& h, const std::string& times) {
  py::gil_scoped_release nogil;
  api::UnitCosts u;
  if (!times.empty()) u.times = api::parse_times(times, "--times");
  SimOptions opt;
  opt.record_timeline = true;
  const SimResult r = simulate(h.s, api::unit_costs(h.s, u), opt);
  return render_svg({{h.s.family, &r.timeline}});
}

}  // namespace

PYBIND11_MODULE(_ppsim, m) {
  m.doc() = "ppsim's library layer (src/api/); use the ppsim package, not this module";
  m.attr("__version__") = PPSIM_VERSION;
  // ppsim.Error: the CLI's one-line message (without "ppsim: ") and its exit code (docs/CLI.md).
  static py::exception<InputError> error(m, "Error");
  py::register_exception_translator([](std::exception_ptr p) {
    auto raise = [](const std::string& msg, int code) {
      py::object inst = py::reinterpret_borrow<py::object>(error.ptr())(msg);
      inst.attr("exit_code") = code;
      PyErr_SetObject(error.ptr(), inst.ptr());
    };
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InputError& e) {
      raise(e.one_line(), e.exit_code());
    } catch (const InternalError& e) {
      raise(fmt::format("internal error: {} (please report this)", printable(e.what())), kExitInternal);
    }
  });

  py::class_<ScheduleHandle>(m, "Schedule")
      .def_property_readonly("family", [](const ScheduleHandle& s) { return s.s.family; })
      .def_property_readonly("pp", [](const ScheduleHandle& s) { return s.s.pp; })
      .def_property_readonly("microbatches", [](const ScheduleHandle& s) { return s.s.microbatches; })
      .def_property_readonly("num_pipes", [](const ScheduleHandle& s) { return s.s.num_pipes; })
      .def_property_readonly("stages_per_pipe", [](const ScheduleHandle& s) { return s.s.stages_per_pipe; })
      .def_property_readonly("stages", [](const ScheduleHandle& s) { return s.s.num_stages(); })
      .def_property_readonly("chunks_per_rank", [](const ScheduleHandle& s) { return s.s.chunks_per_rank; })
      .def_property_readonly("parameter_copies", [](const ScheduleHandle& s) { return s.s.parameter_copies; })
      .def_property_readonly("stage_rank", [](const ScheduleHandle& s) { return s.s.stage_rank; })
      .def_property_readonly("num_ops", [](const ScheduleHandle& s) { return s.s.num_ops(); })
      .def_property_readonly(
          "ranks", [](const ScheduleHandle& s) { return ranks_of(s.s); },
          "per rank, its actions in PyTorch's notation ('0F1', '(0F7;7B3)OVERLAP_F_B')")
      .def("_csv", [](const ScheduleHandle& s) { return schedule_to_csv(s.s); })
      .def("_lowered_torch", [](const ScheduleHandle& s) { return schedule_tokens(with_torch_p2p(s.s)); })
      .def("__eq__",
           [](const ScheduleHandle& a, const ScheduleHandle& b) {
             return a.s.pp == b.s.pp && a.s.microbatches == b.s.microbatches && a.s.num_pipes == b.s.num_pipes &&
                    a.s.stage_rank == b.s.stage_rank && a.s.ranks == b.s.ranks;
           })
      .def("__repr__", [](const ScheduleHandle& s) {
        return fmt::format("<ppsim.Schedule {} P={} M={} stages={} ops={}>", s.s.family, s.s.pp, s.s.microbatches,
                           s.s.num_stages(), s.s.num_ops());
      });

  py::class_<ConfigHandle>(m, "Config")
      .def_property_readonly("path", [](const ConfigHandle& c) { return c.path; })
      .def_property_readonly("overrides", [](const ConfigHandle& c) { return c.sets; })
      .def("__repr__", [](const ConfigHandle& c) { return fmt::format("<ppsim.Config {}>", c.path); });

  m.def("_families", [] {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& info : api::family_infos()) j.push_back(api::family_json(info));
    return to_py(j);
  });
  m.def("_generate", &generate);
  m.def("_import_text", &import_text);
  m.def("_import_file", &import_file);
  m.def("_load_config", [](const std::string& path, std::vector<std::string> sets, const std::string& calibration) {
    if (!calibration.empty()) sets.push_back(api::calibration_set(calibration));
    py::gil_scoped_release nogil;
    return ConfigHandle{load_config(path, sets), path, sets};
  });
  m.def("_call", &call, "one command with keyword arguments (the options table: src/api/options.cc)");
  m.def("_keywords", &keywords, "the Python keywords of a command: (name, default, kind, help) each");
  m.def("_schedule_svg", &schedule_svg);
}
