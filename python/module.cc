// ppsim._ppsim: the pybind11 binding of the library layer (src/api/). The Python package
// (python/ppsim/__init__.py) wraps it with keyword arguments and PyTorch's pipeline_order.
//
// Not obvious: results are built as the CLI's JSON objects (api::to_json, render_plan_json) and
// converted to Python objects, so Python and `--format json` agree by construction; the GIL is
// released while schedules are generated, imported and simulated, never while Python objects
// are touched.
#include <optional>
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "api/calibrate.h"
#include "api/fidelity.h"
#include "api/gpu.h"
#include "api/import_trace.h"
#include "api/model.h"
#include "api/plan.h"
#include "api/request.h"
#include "api/schedule_source.h"
#include "api/search.h"
#include "core/error.h"
#include "plan/plan_json.h"
#include "ppsim_version.h"
#include "report/trace.h"
#include "report/svg.h"
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

// The overlap model's keyword arguments (simulate, compare, search) into the request's unit costs.
void set_overlap(api::UnitCosts& u, double a2a, double attn_share, int layers, int comm_sms, int sms) {
  u.a2a = a2a;
  u.attn_share = attn_share;
  u.layers = layers;
  u.comm_sms = comm_sms;
  u.sms = sms;
}

py::object to_py(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return py::none();
    case nlohmann::json::value_t::boolean: return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return py::int_(j.get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned: return py::int_(j.get<std::uint64_t>());
    case nlohmann::json::value_t::number_float: return py::float_(j.get<double>());
    case nlohmann::json::value_t::string: return py::str(j.get_ref<const std::string&>());
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
    default: return py::none();
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
  ivs["stream"] = str_column(iv.size(), [&](std::size_t i) { return iv[i].stream == Stream::Compute ? "compute" : "comm"; });
  ivs["part"] = str_column(iv.size(), [&](std::size_t i) { return part_name(iv[i].part); });
  ivs["start"] = column<double>(iv.size(), numpy, [&](std::size_t i) { return d(iv[i].start); });
  ivs["end"] = column<double>(iv.size(), numpy, [&](std::size_t i) { return d(iv[i].end); });
  ivs["action"] = str_column(iv.size(), [&](std::size_t i) { return format_action(iv[i].action); });
  ivs["op_index"] = column<std::int32_t>(iv.size(), numpy, [&](std::size_t i) { return static_cast<std::int32_t>(iv[i].op_index); });
  out["intervals"] = ivs;
  const auto& tr = t.transfers;
  py::dict trs;
  trs["src_rank"] = column<std::int32_t>(tr.size(), numpy, [&](std::size_t i) { return tr[i].src_rank; });
  trs["dst_rank"] = column<std::int32_t>(tr.size(), numpy, [&](std::size_t i) { return tr[i].dst_rank; });
  trs["start"] = column<double>(tr.size(), numpy, [&](std::size_t i) { return d(tr[i].start); });
  trs["end"] = column<double>(tr.size(), numpy, [&](std::size_t i) { return d(tr[i].end); });
  trs["producer"] = str_column(tr.size(), [&](std::size_t i) { return format_op(tr[i].producer); });
  trs["bytes"] = column<std::int64_t>(tr.size(), numpy, [&](std::size_t i) { return static_cast<std::int64_t>(tr[i].bytes); });
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

ScheduleHandle generate(const std::string& family, int pp, int microbatches, int vpp, int group_size, long long max_ops) {
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

// One request (api::Request) from keyword values; returns the JSON object and the timelines.
py::dict run(std::optional<ScheduleHandle> schedule, const std::string& families, bool single, std::optional<int> pp,
             std::optional<int> microbatches, int vpp, int group_size, const std::string& times,
             const std::string& chunk_times, double p2p_latency, double a2a, double attn_share, int layers, int comm_sms,
             int sms, std::optional<ConfigHandle> config, bool timelines, bool numpy, long long max_ops) {
  api::Request req;
  if (schedule) {
    req.schedule.schedule = schedule->s;
    req.schedule.generated_with = schedule->params;
  }
  req.schedule.pp = pp;
  req.schedule.microbatches = microbatches;
  req.schedule.vpp = vpp;
  req.schedule.group_size = group_size;
  req.schedule.max_ops = max_ops;
  req.families = families;
  req.single = single;
  req.units.times = times;
  req.units.chunk_times = chunk_times;
  req.units.p2p_latency = p2p_latency;
  set_overlap(req.units, a2a, attn_share, layers, comm_sms, sms);
  if (config) {
    req.loaded_config = config->cfg;
    req.config_name = config->path;
  }
  req.timelines = timelines;
  api::Result r;
  {
    py::gil_scoped_release nogil;
    r = api::run(req);
  }
  py::dict out = to_py(api::to_json(r)).cast<py::dict>();
  if (timelines) {
    py::list tl;
    for (const auto& t : r.timelines) tl.append(timeline_to_py(t, numpy));
    out["timelines"] = tl;
  }
  return out;
}

py::object plan(const ConfigHandle& config, int top, int jobs, const std::string& shard, long long max_ops) {
  api::PlanRequest req;
  req.loaded_config = config.cfg;
  req.sets = config.sets;
  req.top = top;
  req.jobs = jobs;
  req.shard = shard;
  req.max_ops = max_ops;
  std::string text;
  {
    py::gil_scoped_release nogil;
    text = render_plan_json(api::plan(req));
  }
  return to_py(nlohmann::json::parse(text));
}

// ppsim.search: api::search (as `ppsim search --format json`), with the table, the searched
// schedule and the best family's.
py::dict search_call(const std::string& config, const std::vector<std::string>& sets, std::optional<int> pp,
                std::optional<int> microbatches, const std::string& times, const std::string& chunk_times,
                double p2p_latency, double a2a, double attn_share, int layers, int comm_sms, int sms,
                std::optional<double> memory_cap, const std::string& placement, std::uint64_t seed, double time_limit,
                int threads, const std::string& objective, std::optional<double> w_hold) {
  api::SearchCall c;
  c.config = config;
  c.sets = sets;
  c.pp = pp;
  c.microbatches = microbatches;
  if (!times.empty()) c.times = times;
  c.chunk_times = chunk_times;
  c.p2p_latency = p2p_latency;
  set_overlap(c.overlap, a2a, attn_share, layers, comm_sms, sms);
  c.memory_cap = memory_cap;
  c.w_hold = w_hold;
  c.placement = placement;
  c.seed = seed;
  c.time_limit = time_limit;
  c.threads = threads;
  c.objective = objective;
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

// ppsim.import_trace: api::import_trace, as `ppsim import-trace --format json` (one trace, or one
// per rank of a run; the prediction too with a schedule, "executed" for a pipeline run), the
// version-2 profile's YAML text under "profile_yaml" (one trace with per-layer work) and the
// executed order's CSV under "executed_csv" (where a pipeline run was rebuilt). `output` only
// names the profile (refused where the CLI refuses -o); the caller writes it.
py::dict import_trace_call(const std::vector<std::string>& traces, const std::vector<std::string>& map,
                           bool no_default_rules, const std::string& step_range, const std::string& schedule, int pp,
                           int microbatches, int vpp, int devices, int layers_per_chunk, int comm_sms, int sms,
                           const std::string& output, bool moe_layers_only, const std::string& p2p_runtime) {
  api::ImportTraceCall c;
  c.traces = traces;
  c.options = {map, no_default_rules, step_range};
  c.predict.schedule = schedule;
  if (pp > 0) c.predict.pp = pp;
  if (microbatches > 0) c.predict.microbatches = microbatches;
  if (vpp > 0) c.predict.vpp = vpp;
  if (devices > 0) c.predict.devices = devices;
  if (layers_per_chunk > 0) c.predict.layers_per_chunk = layers_per_chunk;
  if (comm_sms > 0) c.predict.comm_sms = comm_sms;
  if (sms > 0) c.predict.sms = sms;
  c.predict.p2p_runtime = p2p_runtime;
  c.output = output;
  c.moe_layers_only = moe_layers_only;
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

// ppsim.profile: api::profile (`ppsim profile`): the profile's YAML and one layer's medians.
py::dict profile_call(const std::string& config, const std::vector<std::string>& sets, int warmup, int reps, int device,
                 const std::string& a2a) {
  api::ProfileRequest req{config, sets, warmup, reps, device, a2a};
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
  for (const auto& [k, v] : r.layer.sub_ops_ms) sub[py::str(k)] = v;
  out["sub_ops_ms"] = sub;
  return out;
}

// ppsim.validate: api::validate (`ppsim validate --format json`), with the table report as "text".
py::dict validate_call(const api::ValidateRequest& req) {
  api::ValidateOutcome r;
  {
    py::gil_scoped_release nogil;
    r = api::validate(req);
  }
  py::dict out = to_py(r.json).cast<py::dict>();
  out["text"] = r.text;
  return out;
}

// The timeline of a schedule at unit times (F=1, B=2, W=1, FB=3, as `ppsim show`'s chart), as the
// SVG `ppsim simulate --svg` draws: a notebook's picture of a Schedule.
std::string schedule_svg(const ScheduleHandle& h, const std::string& times) {
  py::gil_scoped_release nogil;
  api::UnitCosts u;
  if (!times.empty()) u.times = times;
  SimOptions opt;
  opt.record_timeline = true;
  const SimResult r = simulate(h.s, api::unit_costs(h.s, u), opt);
  return render_svg({{h.s.family, &r.timeline}});
}

// `ppsim model`: parameters by part, FLOPs per token, parameters per stage (api/model.h).
py::object model_call(const std::string& path, std::optional<int> pp, const std::vector<int>& layer_split,
                      std::optional<std::int64_t> seq_len, const std::vector<std::string>& sets) {
  api::ModelRequest req;
  req.path = path;
  req.pp = pp;
  req.layer_split = layer_split;
  req.seq_len = seq_len;
  req.sets = sets;
  return to_py(api::model_json(api::model_report(req)));
}

// `ppsim fidelity`: every published run against its source (api/fidelity.h).
py::object fidelity_call(const std::string& dir, const std::vector<std::string>& files,
                         const std::vector<std::string>& sets, const std::string& thresholds,
                         const std::string& calibrate) {
  api::FidelityRequest req;
  if (!dir.empty()) req.dir = dir;
  req.files = files;
  req.sets = sets;
  req.thresholds = thresholds;
  req.calibrate = calibrate;
  return to_py(api::fidelity_json(api::fidelity(req)));
}

// `ppsim calibrate`: the calibration's JSON, its YAML ("yaml") and the table ("text").
py::object calibrate_call(const std::string& config, const std::vector<std::string>& sets,
                          const std::vector<std::string>& traces, std::optional<double> step_ms,
                          std::optional<double> tokens_per_s, const std::string& schedule, int vpp) {
  api::CalibrateRequest req;
  req.config = config;
  req.sets = sets;
  req.traces = traces;
  req.step_ms = step_ms;
  req.tokens_per_s = tokens_per_s;
  req.schedule = schedule;
  req.vpp = vpp;
  const api::CalibrateOutcome out = [&] {
    py::gil_scoped_release nogil;
    return api::calibrate(req);
  }();
  nlohmann::json j = out.json;
  j["yaml"] = out.yaml;
  j["text"] = out.report;
  return to_py(j);
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
      .def_property_readonly("ranks", [](const ScheduleHandle& s) { return ranks_of(s.s); },
                             "per rank, its actions in PyTorch's notation ('0F1', '(0F7;7B3)OVERLAP_F_B')")
      .def("_csv", [](const ScheduleHandle& s) { return schedule_to_csv(s.s); })
      .def("_lowered_torch", [](const ScheduleHandle& s) { return schedule_tokens(with_torch_p2p(s.s)); })
      .def("__eq__", [](const ScheduleHandle& a, const ScheduleHandle& b) {
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
  m.def("_load_config", [](const std::string& path, const std::vector<std::string>& sets) {
    py::gil_scoped_release nogil;
    return ConfigHandle{load_config(path, sets), path, sets};
  });
  m.def("_run", &run);
  m.def("_plan", &plan);
  m.def("_search", &search_call);
  m.def("_model", &model_call);
  m.def("_fidelity", &fidelity_call);
  m.def("_calibrate", &calibrate_call);
  m.def("_import_trace", &import_trace_call);
  m.def("_profile", &profile_call);
  m.def("_validate", [](const std::string& config, const std::vector<std::string>& sets, const std::string& schedules,
                        const std::string& schedule_file, int devices, int reps, double target, bool no_link_probe,
                        bool ep_replay, const std::string& a2a, const std::string& transport, double timeout_s,
                        const std::string& sm_split, const std::string& sharing, const std::string& rank_speeds) {
    api::ValidateRequest req;
    req.config = config;
    req.sets = sets;
    req.schedules = schedules;
    req.schedule_file = schedule_file;
    req.devices = devices;
    req.reps = reps;
    req.target = target;
    req.no_link_probe = no_link_probe;
    req.ep_replay = ep_replay;
    req.a2a = a2a;
    req.transport = transport;
    req.timeout_s = timeout_s;
    req.sm_split = sm_split;
    req.sharing = sharing;
    req.rank_speeds = rank_speeds;
    return validate_call(req);
  });
  m.def("_schedule_svg", &schedule_svg);
}
