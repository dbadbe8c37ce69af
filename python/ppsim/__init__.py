"""ppsim from Python: generate, import, simulate and compare pipeline-parallel schedules.

The same library the `ppsim` CLI calls (src/api/); results are plain Python objects with the
names of the CLI's JSON (docs/JSON.md), errors are ppsim.Error with the CLI's one-line message
and exit code. See docs/PYTHON.md.

Not obvious: times may be given as the CLI's strings ("F=1,B=2,W=1") or as dicts
({"F": 1, "B": 2}); a dict is written as that string with each number's repr, which round-trips a
float exactly, so both reach the simulator as the same ticks. Error messages name the CLI's
flags (--times, --chunk-times, ...), as the CLI prints them.
"""
import os as _os
import sys as _sys

# With the CUDA back-end, ppsim.profile/validate open libppsim_gpu.so (beside _ppsim), which binds
# to the core symbols _ppsim exports, as the ppsim binary's: they must be global for that.
_flags = _sys.getdlopenflags()
_sys.setdlopenflags(_flags | _os.RTLD_GLOBAL)
try:
    from . import _ppsim
finally:
    _sys.setdlopenflags(_flags)
from ._ppsim import Config, Error, Schedule, __version__  # noqa: E402

__all__ = ["Error", "Schedule", "Config", "Result", "families", "generate", "simulate", "compare", "load_config",
           "plan", "search", "import_trace", "profile", "validate", "model", "fidelity", "calibrate", "__version__"]

try:
    import numpy as _np  # noqa: F401
    _HAVE_NUMPY = True
except ImportError:
    _HAVE_NUMPY = False

def families():
    """The schedule families, as `ppsim schedules --format json` lists them."""
    return _ppsim._families()


def generate(family, pp, microbatches, **params):
    """A family's schedule for P = pp ranks and M = microbatches; params: vpp, group_size, max_ops."""
    unknown = set(params) - {"vpp", "group_size", "max_ops"}
    if unknown:
        raise TypeError(f"generate() got unexpected keyword(s) {sorted(unknown)} (vpp, group_size, max_ops)")
    return _ppsim._generate(family, pp, microbatches, params.get("vpp", 0), params.get("group_size", 0),
                            params.get("max_ops", 0))


def _from_actions(ranks, pp=0, microbatches=0, layout="auto", name="<actions>"):
    """A schedule from per-rank action lists in PyTorch's notation (None entries are idle steps)."""
    lines = []
    for r in ranks:
        if r is None:
            r = []
        lines.append(",".join(str(a) for a in r if a is not None))
    return _ppsim._import_text("\n".join(lines) + "\n", name, pp, microbatches, layout)


def _from_pipeline_order(order, pp=0, microbatches=0, layout="auto"):
    """A schedule from a torch.distributed.pipelining schedule's `pipeline_order`: a dict
    rank -> list of actions (None for idle steps), read by each action's str(); torch itself is
    not imported. Ranks must be 0..P-1."""
    keys = sorted(order)
    if keys != list(range(len(keys))):
        raise Error(f"pipeline_order: ranks must be 0..P-1, got {keys}")
    return _from_actions([order[k] for k in keys], pp, microbatches, layout, "<pipeline_order>")


def _from_csv(path, pp=0, microbatches=0, layout="auto"):
    """A schedule from PyTorch's compute-only CSV file (as `--schedule-file`)."""
    return _ppsim._import_file(str(path), pp, microbatches, layout)


def _from_csv_text(text, pp=0, microbatches=0, layout="auto", name="<csv>"):
    return _ppsim._import_text(text, name, pp, microbatches, layout)


def _to_csv(self, path=None):
    """PyTorch's compute-only CSV text; written to `path` too when given."""
    text = self._csv()
    if path is not None:
        with open(path, "w") as f:
            f.write(text)
    return text


def _to_actions(self):
    return self.ranks


def _lowered(self, runtime="torch"):
    """Per rank, the order with the communication a framework's runtime issues for it, in
    PyTorch's notation (as `ppsim show --lower torch`): PyTorch's runtime lowering
    ('0SEND_F0', '2RECV_B1', '0UNSHARD', ...), or for Schedule1F1B's and ScheduleGPipe's orders the
    calls their single-stage schedules make. Two pipes raise ppsim.Error."""
    if runtime != "torch":
        raise Error(f"lowered: runtime '{runtime}': expected 'torch'")
    return self._lowered_torch()


Schedule.from_actions = staticmethod(_from_actions)
Schedule.from_pipeline_order = staticmethod(_from_pipeline_order)
Schedule.from_csv = staticmethod(_from_csv)
Schedule.from_csv_text = staticmethod(_from_csv_text)
Schedule.to_csv = _to_csv
Schedule.to_actions = _to_actions
Schedule.lowered = _lowered


def _times_spec(times):
    if times is None:
        return ""
    if isinstance(times, str):
        return times
    if isinstance(times, dict):
        def num(v):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                try:
                    import numbers
                    if isinstance(v, numbers.Real) and not isinstance(v, bool):
                        return repr(float(v))
                except Exception:
                    pass
                return str(v)
            return repr(float(v))
        return ",".join(f"{k}={num(v)}" for k, v in times.items())
    raise TypeError(f"times must be a string like 'F=1,B=2,W=1' or a dict, got {type(times).__name__}")


def _keywords(command, *first):
    """Gives a function the Python keywords of its command's options table (src/api/options.cc):
    `first` (explicit parameters of the function) keep their place; the rest are keyword-only.
    The C++ side (_ppsim._call) accepts exactly these; python/ppsim/__init__.pyi is generated from
    the same table."""
    import inspect

    def wrap(fn):
        own = inspect.signature(fn).parameters
        params = [p for p in own.values() if p.kind != p.VAR_KEYWORD]
        for name, default, _kind, _help in _ppsim._keywords(command):
            if name not in own:
                params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default))
        fn.__signature__ = inspect.Signature(params)
        return fn
    return wrap


@_keywords("simulate")
def simulate(schedule, **kw):
    """Simulate one schedule: a Schedule, or a family name with pp=, microbatches= (vpp=, group_size=).

    times: one rank's share ("F=1,B=2,W=1,FB=3" or a dict), cut into v chunks for V/interleaved
    layouts; chunk_times: per-chunk times instead; p2p_latency: per stage-to-stage transfer;
    a2a, layers, attn_share, comm_sms, sms: the overlap model (or overlap={...} with those keys);
    config: a ppsim.Config (or a path) whose cost model gives the costs instead.
    Returns the result (docs/JSON.md's names) with "timeline" when timeline=True.
    """
    return Result(_ppsim._call("simulate", dict(kw, schedule=schedule)))


@_keywords("compare")
def compare(schedules="all", **kw):
    """Simulate several families on the same model, as `ppsim compare --format json`.

    schedules: "all", a comma list, or a list of names. Returns {"results": [...], "skipped":
    [...]} ("config" too with a config); with timelines=True also "timelines", one per result.
    """
    return Result(_ppsim._call("compare", dict(kw, schedules=schedules)))


def load_config(path, overrides=None, calibration=None):
    """A validated YAML config; overrides {"parallel.pp": 4} act as `--set parallel.pp=4`;
    calibration (a file `ppsim calibrate` wrote) as `--calibration FILE` (docs/CALIBRATION.md)."""
    cal = [] if calibration is None else [f"calibration={_os.path.abspath(str(calibration))}"]
    return _ppsim._load_config(str(path), _sets(overrides) + cal)


@_keywords("plan")
def plan(config, **kw):
    """The planner on a config (a ppsim.Config or a path), as `ppsim plan --format json`."""
    return _ppsim._call("plan", dict(kw, config=config))


def _sets(overrides):
    sets = []
    for k, v in (overrides or {}).items():
        if isinstance(v, bool):
            v = "true" if v else "false"
        sets.append(f"{k}={v}")
    return sets


@_keywords("search")
def search(**kw):
    """The schedule search, as `ppsim search --format json` (docs/SEARCH.md).

    objective: "makespan", "span" (the longest rank's own span: the step period under Zero Bubble's
    optimizer post-validation) or None (span when the config sets parallel.post_validation).

    memory_cap: activations per rank in rank shares; "best" (the default): the best family's peak,
    so that a win is at equal memory; "none" or 0: no cap. w_hold: the share of a micro-batch's
    activations its W still holds after its I (Zero Bubble's M_W / M_B), in [0, 1]; None: 1 with
    times, the memory model's with a config. Returns a Result with "results" (the
    searched schedule's, then the best family's, docs/JSON.md's names), "skipped", "search"
    (cap, bound, gap, ...), "table" (the CLI's report) and "schedule" (the searched ppsim.Schedule;
    "best_family_schedule" too when a family fits the cap).
    """
    return Result(_ppsim._call("search", kw))


@_keywords("import-trace")
def import_trace(trace, **kw):
    """A PyTorch profiler (Kineto) trace, as `ppsim import-trace --format json` (docs/TRACES.md).

    `trace`: one trace (a path), or a list of paths (one trace per rank of one run, or folders of
    them), as the CLI's several TRACE arguments: the ranks merged and aligned ("ranks") and the
    executed order rebuilt ("pipeline"); schedule="executed" adds it simulated ("prediction").
    With schedule= pair or a family (one trace) the traced step against the prediction.
    "profile_yaml" is the version-2 cost profile (None without per-layer work, or with several
    traces); written to `output` when given. "executed_csv" is the executed order as a schedule
    CSV (None where no pipeline run was rebuilt). moe_layers_only=True (with output=) writes the
    profile with `applies_to: moe_layers`: a config's MoE layers take its times, the rest stays
    derived (docs/CONFIG.md). p2p_runtime="torch" (with schedule="executed") simulates the order
    with PyTorch's sends and receives, one stream per rank (docs/CONFIG.md parallel.p2p_runtime).
    """
    traces = [str(t) for t in trace] if isinstance(trace, (list, tuple)) else [str(trace)]
    out = _ppsim._call("import-trace", dict(kw, trace=traces))
    if kw.get("output") is not None:
        with open(kw["output"], "w") as f:
            f.write(out["profile_yaml"])
    return Result(out)


@_keywords("model")
def model(path, **kw):
    """What ppsim understood of a model, as `ppsim model --format json` (docs/CLI.md): a ppsim YAML
    or a Hugging Face config.json; "parameters": {"total", "active", "by_part"} in counts,
    "flops_per_token", and with pp= (or a YAML's parallel.pp) "stages".
    """
    return Result(_ppsim._call("model", dict(kw, path=str(path))))


@_keywords("fidelity")
def fidelity(**kw):
    """Every published run predicted against its source, as `ppsim fidelity --format json`
    (docs/FIDELITY.md). overrides apply to every file (e.g. {"costs.dp_comm": False})."""
    return Result(_ppsim._call("fidelity", kw))


@_keywords("calibrate")
def calibrate(config, **kw):
    """`ppsim calibrate` (docs/CALIBRATION.md): fit a config's efficiencies to your own run, from
    traces (paths) or one step time / throughput. Returns {"fitted", "not_identified", "note",
    "yaml" (the calibration file), "text" (the table)}; writes the YAML to `output` when given.
    """
    out = _ppsim._call("calibrate", dict(kw, config=config))
    if kw.get("output") is not None:
        with open(kw["output"], "w") as f:
            f.write(out["yaml"])
    return Result(out)


@_keywords("profile")
def profile(config, **kw):
    """`ppsim profile` on the GPU: {"yaml": the cost profile, "gpu", "op_ms": {F, B, W, FB}, ...}.

    Without a GPU (or the CUDA back-end): ppsim.Error with exit_code 5.
    """
    out = _ppsim._call("profile", dict(kw, config=config))
    if kw.get("output") is not None:
        with open(kw["output"], "w") as f:
            f.write(out["yaml"])
    return Result(out)


@_keywords("validate")
def validate(config, **kw):
    """`ppsim validate --format json` on the GPUs (docs/JSON.md), the table report under "text".

    Without a GPU (or the CUDA back-end): ppsim.Error with exit_code 5.
    """
    return Result(_ppsim._call("validate", dict(kw, config=config)))


# ---- notebooks -----------------------------------------------------------------------------------

def _schedule_svg(self, times=""):
    """The schedule's timeline as SVG (unit times F=1, B=2, W=1 unless times= is given), as
    `ppsim simulate --svg` draws it; Jupyter shows it for a Schedule."""
    return _ppsim._schedule_svg(self, _times_spec(times))


Schedule.svg = _schedule_svg
Schedule._repr_svg_ = lambda self: _ppsim._schedule_svg(self, "")


_COLUMNS = [("schedule", "schedule"), ("pp", "P"), ("microbatches", "M"), ("makespan", "makespan"),
            ("bubble.max", "bubble max"), ("bubble.ratio", "bubble ratio"), ("peak_activations.max", "peak act."),
            ("throughput", "throughput"), ("step_time", "step time"), ("mfu", "MFU"),
            ("peak_memory_bytes.max", "peak memory (bytes)")]


def _rows_of(d):
    if "results" in d and isinstance(d["results"], list):
        return d["results"]
    if "makespan" in d:
        return [d]
    return []


def _flat(row):
    """One result row's scalars, nested keys joined by '.' (bubble.max, ...); per-rank lists as
    their maximum under '<key>.max' where the row has none."""
    out = {}
    for k, v in row.items():
        if isinstance(v, dict):
            for k2, v2 in v.items():
                if isinstance(v2, (int, float, str, bool)) or v2 is None:
                    out[f"{k}.{k2}"] = v2
            pr = v.get("per_rank")
            if isinstance(pr, list) and pr and f"{k}.max" not in out:
                nums = [x for x in pr if isinstance(x, (int, float))]
                if nums:
                    out[f"{k}.max"] = max(nums)
        elif isinstance(v, (int, float, str, bool)) or v is None:
            out[k] = v
    return out


class Result(dict):
    """A result: the dict of the CLI's JSON (docs/JSON.md), shown as a table in notebooks
    (_repr_html_), and as a pandas DataFrame by to_pandas() when pandas is installed."""

    def rows(self):
        return [_flat(r) for r in _rows_of(self)]

    def to_pandas(self):
        try:
            import pandas
        except ImportError as e:
            raise ImportError("to_pandas() needs pandas (not a ppsim dependency): apt install python3-pandas") from e
        return pandas.DataFrame(self.rows())

    def _repr_html_(self):
        import html
        rows = self.rows()
        if not rows:
            return None
        cols = [(k, h) for k, h in _COLUMNS if any(k in r for r in rows)]

        def cell(v):
            if isinstance(v, float):
                return f"{v:.6g}"
            return html.escape("" if v is None else str(v))
        out = ["<table>", "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for _, h in cols) + "</tr>"]
        for r in rows:
            out.append("<tr>" + "".join(f"<td>{cell(r.get(k))}</td>" for k, _ in cols) + "</tr>")
        out.append("</table>")
        return "\n".join(out)
