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

__all__ = ["Error", "UsageError", "InputError", "FileError", "GpuError", "LimitError", "InvariantError", "InternalError",
           "Schedule", "Config", "Result", "families", "generate", "simulate", "compare", "load_config",
           "plan", "search", "import_trace", "profile", "validate", "model", "fidelity", "calibrate", "__version__"]

try:
    import numpy as _np  # noqa: F401
    _HAVE_NUMPY = True
except ImportError:
    _HAVE_NUMPY = False

def families():
    """The schedule families, as `ppsim schedules --format json` lists them."""
    return _ppsim._families()


def _int_args(**values):
    """Integer arguments checked before the module sees them: a one-line UsageError naming the
    argument (pybind11's own TypeError lists every overload)."""
    for name, v in values.items():
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            try:
                import numbers
                if isinstance(v, numbers.Integral):
                    continue
            except ImportError:
                pass
            err = UsageError(f"{name}: expected an integer, got {v!r}")
            err.exit_code = 2
            raise err


def generate(family, pp, microbatches, **params):
    """A family's schedule for P = pp ranks and M = microbatches; params: vpp, group_size, max_ops."""
    unknown = set(params) - {"vpp", "group_size", "max_ops"}
    if unknown:
        raise TypeError(f"generate() got unexpected keyword(s) {sorted(unknown)} (vpp, group_size, max_ops)")
    _int_args(pp=pp, microbatches=microbatches, **params)
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
def compare(schedules=None, **kw):
    """Simulate several families on the same model, as `ppsim compare --format json`.

    schedules: "all", a comma list, or a list of names; None (not given): the config's
    parallel.schedule with a config, else all. Returns {"results": [...], "skipped": [...]}
    ("config" too with a config); with timelines=True also "timelines", one per result.
    """
    return Result(_ppsim._call("compare", kw if schedules is None else dict(kw, schedules=schedules)))


def load_config(path, overrides=None, calibration=None):
    """A validated YAML config; overrides {"parallel.pp": 4} act as `--set parallel.pp=4`;
    calibration (a file `ppsim calibrate` wrote) as `--calibration FILE` (docs/CALIBRATION.md)."""
    return _ppsim._load_config(str(path), _sets(overrides), "" if calibration is None else str(calibration))


@_keywords("plan")
def plan(config, **kw):
    """The planner on a config (a ppsim.Config or a path), as `ppsim plan --format json`."""
    return Result(_ppsim._call("plan", dict(kw, config=config)))


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


def _written(out, path, key):
    """The result of a call whose file the CLI writes with -o: out[key] written to `path` (when
    given), out as a Result."""
    if path is not None:
        with open(path, "w") as f:
            f.write(out[key])
    return Result(out)


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
    return _written(out, kw.get("output"), "profile_yaml")


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
    (docs/FIDELITY.md). overrides apply to every file (e.g. {"costs.dp_comm": False}); calibrate=
    "first" or "loso" as `--calibrate` (docs/CALIBRATION.md). The default dir is found from any folder
    (the package's own configs/published); on a terminal, progress goes to stderr."""
    return Result(_ppsim._call("fidelity", kw))


@_keywords("calibrate")
def calibrate(config, **kw):
    """`ppsim calibrate` (docs/CALIBRATION.md): fit a config's efficiencies to your own run, from
    traces (paths) or one step time / throughput. Returns {"fitted", "not_identified", "note",
    "yaml" (the calibration file), "text" (the table)}; writes the YAML to `output` when given.
    """
    out = _ppsim._call("calibrate", dict(kw, config=config))
    return _written(out, kw.get("output"), "yaml")


@_keywords("profile")
def profile(config, **kw):
    """`ppsim profile` on the GPU: {"yaml": the cost profile, "gpu", "op_ms": {F, B, W, FB}, ...}.

    Without a GPU (or the CUDA back-end): ppsim.Error with exit_code 5.
    """
    out = _ppsim._call("profile", dict(kw, config=config))
    return _written(out, kw.get("output"), "yaml")


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
            ("bubble.max", "bubble max"), ("bubble.ratio", "bubble ratio"),
            ("peak_activations.max", "peak act. (rank shares)"),
            ("throughput", "throughput"), ("step_time", "step time"), ("mfu", "MFU"),
            ("peak_memory_bytes.max", "peak memory (bytes)")]
# Where a result keeps its rows when it has no "results": fidelity's "rows", model's "stages",
# import_trace's "cells" (per layer), validate's "schedules".
_ROW_KEYS = ("results", "rows", "stages", "cells", "schedules", "ranking")
_ID_KEYS = ("schedule", "key", "stage", "layer", "name", "run")


def _rows_of(d):
    if isinstance(d.get("variants"), list):  # plan: each variant's ranked plans
        return [dict(r, variant=v.get("name", "")) for v in d["variants"] for r in v.get("ranking", [])]
    for k in _ROW_KEYS:
        v = d.get(k)
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            return v
    if "makespan" in d:
        return [d]
    if isinstance(d.get("pipeline"), dict):
        return _rows_of(d["pipeline"])
    return [d] if any(not isinstance(v, (dict, list)) for v in d.values()) else []


def _flat(row, prefix="", depth=0):
    """One result row's scalars, nested keys joined by '.' (bubble.max, ...); per-rank lists as
    their maximum under '<key>.max' where the row has none."""
    out = {}
    for k, v in row.items():
        key = prefix + k
        if isinstance(v, dict):
            if depth < 2:
                out.update(_flat(v, key + ".", depth + 1))
            pr = v.get("per_rank")
            if isinstance(pr, list) and pr and f"{key}.max" not in out:
                nums = [x for x in pr if isinstance(x, (int, float))]
                if nums:
                    out[f"{key}.max"] = max(nums)
        elif isinstance(v, (int, float, str, bool)) or v is None:
            out[key] = v
    return out


def _per_rank(row, prefix="", depth=0):
    """(key, list) for each per-rank list of numbers in a row (bubble.per_rank, ...)."""
    out = []
    for k, v in row.items():
        key = prefix + k
        if isinstance(v, dict) and depth < 2:
            out += _per_rank(v, key + ".", depth + 1)
        elif isinstance(v, list) and v and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v) \
                and (k == "per_rank" or k.endswith("_per_rank")):
            out.append((key, v))
    return out


def _timelines_of(d):
    """(name, timeline) for each timeline a result holds (simulate's "timeline", compare's
    "timelines" with timelines=True)."""
    if isinstance(d.get("timeline"), dict):
        return [(d.get("schedule", "timeline"), d["timeline"])]
    rows = d.get("results") if isinstance(d.get("results"), list) else []
    tls = d.get("timelines") if isinstance(d.get("timelines"), list) else []
    return [((rows[i].get("schedule") if i < len(rows) else str(i)), t)
            for i, t in enumerate(tls) if isinstance(t, dict)]


_KIND_COLORS = {"F": "#4c8bf5", "I": "#2bb673", "B": "#2bb673", "W": "#f5a623"}


def _timeline_svg(name, tl, width=720):
    """One timeline's intervals as SVG: a lane per rank, a bar per interval, coloured by pass."""
    import html
    iv = tl.get("intervals", {})
    ranks, starts, ends, actions = (list(iv.get(k, [])) for k in ("rank", "start", "end", "action"))
    if not starts:
        return ""
    t_end = max(float(e) for e in ends) or 1.0
    n = int(max(ranks)) + 1
    lane, left = 14, 52
    scale = (width - left - 4) / t_end
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{n * lane + 18}" font-size="10">',
           f'<text x="0" y="10">{html.escape(str(name))}: 0 .. {t_end:g}</text>']
    for r in range(n):
        out.append(f'<text x="0" y="{18 + r * lane + 10}">rank {r}</text>')
    for r, a, b, act in zip(ranks, starts, ends, actions):
        kind = str(act).lstrip("(0123456789")[:1]
        out.append(f'<rect x="{left + float(a) * scale:.2f}" y="{18 + int(r) * lane}" '
                   f'width="{max(0.5, (float(b) - float(a)) * scale - 0.3):.2f}" height="{lane - 2}" '
                   f'fill="{_KIND_COLORS.get(kind, "#9b59b6")}"><title>{html.escape(str(act))}</title></rect>')
    out.append("</svg>")
    return "".join(out)


class Result(dict):
    """A result: the dict of the CLI's JSON (docs/JSON.md), shown in notebooks as a table and its
    timelines (_repr_html_); rows() flat, to_pandas() long form. See python/ppsim/_results.pyi."""

    def rows(self):
        """Each row's scalars, nested keys joined by '.', per-rank lists as '<key>.max'."""
        return [_flat(r) for r in _rows_of(self)]

    def long_rows(self):
        """Long form: one dict per (row, quantity[, rank]): row, the row's id columns (schedule,
        key, ...), quantity, rank (None for a whole-row value) and value. Per-rank lists give one
        entry per rank."""
        out = []
        for i, row in enumerate(_rows_of(self)):
            flat = _flat(row)
            ids = {k: flat[k] for k in _ID_KEYS if k in flat}
            for k, v in flat.items():
                if k not in ids:
                    out.append({"row": i, **ids, "quantity": k, "rank": None, "value": v})
            for k, values in _per_rank(row):
                for rank, v in enumerate(values):
                    out.append({"row": i, **ids, "quantity": k, "rank": rank, "value": v})
        return out

    def to_pandas(self):
        """long_rows() as a DataFrame (pandas is not a ppsim dependency: apt install python3-pandas).
        `df.pivot_table(index=["row", "schedule"], columns="quantity", values="value", aggfunc="first")`
        gives the wide table back."""
        try:
            import pandas
        except ImportError as e:
            raise ImportError("to_pandas() needs pandas (not a ppsim dependency): apt install python3-pandas") from e
        return pandas.DataFrame(self.long_rows(), columns=None)

    def timelines_svg(self):
        """Each timeline the result holds (simulate, compare(timelines=True)) as SVG."""
        return [_timeline_svg(name, tl) for name, tl in _timelines_of(self)]

    def _repr_html_(self):
        import html
        rows = self.rows()
        if not rows:
            return "<p>(no rows)</p>"
        cols = [(k, h) for k, h in _COLUMNS if any(k in r for r in rows)]
        if len(cols) < 3:  # not a schedule result: its first dozen columns
            keys = []
            for r in rows:
                keys += [k for k in r if k not in keys]
            cols = [(k, k) for k in keys[:12]]

        def cell(v):
            if isinstance(v, float):
                return f"{v:,.6g}" if abs(v) < 1e6 else f"{v:,.0f}"
            if isinstance(v, int) and not isinstance(v, bool):
                return f"{v:,}"
            return html.escape("" if v is None else str(v))
        out = ["<table>", "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for _, h in cols) + "</tr>"]
        for r in rows:
            out.append("<tr>" + "".join(f"<td>{cell(r.get(k))}</td>" for k, _ in cols) + "</tr>")
        out.append("</table>")
        out += self.timelines_svg()
        return "\n".join(out)


# ---- typed errors ------------------------------------------------------------------------------
# The exit codes of docs/CLI.md as exception classes under ppsim.Error (which keeps str() as the
# CLI's one-line message and exit_code); pybind11's own argument TypeErrors become UsageError.

class UsageError(Error, ValueError, TypeError):
    """Exit code 2: a bad argument or value (unknown schedule, wrong type, ...)."""


class InputError(Error, ValueError):
    """Exit code 3: bad input (config, schedule file, a request a schedule's constraints forbid)."""


class FileError(Error, OSError):
    """Exit code 4: a file cannot be read or written."""


class GpuError(Error, RuntimeError):
    """Exit code 5: no GPU, a missing library or a CUDA/NCCL failure."""


class LimitError(Error, RuntimeError):
    """Exit code 6: over a resource limit (docs/ROBUSTNESS.md)."""


class InternalError(Error, RuntimeError):
    """Exit code 1: a broken invariant, a bug in ppsim."""


class InvariantError(Error, ValueError):
    """Exit code 8: the answer breaks an invariant (docs/INVARIANTS.md); the message names the input."""


_BY_CODE = {1: InternalError, 2: UsageError, 3: InputError, 4: FileError, 5: GpuError, 6: LimitError,
            8: InvariantError}


def _typed(e):
    code = getattr(e, "exit_code", 3)
    t = _BY_CODE.get(code, Error)
    out = t(str(e))
    out.exit_code = code
    return out


def _with_typed_errors(fn):
    import functools

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Error as e:
            if type(e) is not Error:
                raise
            raise _typed(e) from None
        except TypeError as e:
            text = str(e)
            if "incompatible function arguments" in text:  # pybind11's, several lines: one of ours
                invoked = text.split("Invoked with:", 1)[-1].strip().replace("\n", " ")
                text = f"{fn.__name__}(): an argument has the wrong type (invoked with: {invoked[:200]})"
            elif isinstance(e, Error):
                raise
            err = UsageError(text.splitlines()[0] if text else f"{fn.__name__}(): bad arguments")
            err.exit_code = 2
            raise err from None
    return call


for _name in ("families", "generate", "simulate", "compare", "load_config", "plan", "search", "import_trace", "model",
              "fidelity", "calibrate", "profile", "validate"):
    globals()[_name] = _with_typed_errors(globals()[_name])
for _name in ("from_actions", "from_pipeline_order", "from_csv", "from_csv_text"):
    setattr(Schedule, _name, staticmethod(_with_typed_errors(getattr(Schedule, _name))))
Schedule.lowered = _with_typed_errors(Schedule.lowered)
