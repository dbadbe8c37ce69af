"""ppsim from Python: generate, import, simulate and compare pipeline-parallel schedules.

The same library the `ppsim` CLI calls (src/api/); results are plain Python objects with the
names of the CLI's JSON (docs/JSON.md), errors are ppsim.Error with the CLI's one-line message
and exit code. See docs/PYTHON.md.

Not obvious: times may be given as the CLI's strings ("F=1,B=2,W=1") or as dicts
({"F": 1, "B": 2}); a dict is written as that string with each number's repr, which round-trips a
float exactly, so both reach the simulator as the same ticks. Error messages name the CLI's
flags (--times, --chunk-times, ...), as the CLI prints them.
"""
from . import _ppsim
from ._ppsim import Config, Error, Schedule, __version__

__all__ = ["Error", "Schedule", "Config", "families", "generate", "simulate", "compare", "load_config", "plan",
           "__version__"]

try:
    import numpy as _np  # noqa: F401
    _HAVE_NUMPY = True
except ImportError:
    _HAVE_NUMPY = False

_OVERLAP_KEYS = {"a2a", "layers", "attn_share", "comm_sms", "sms"}


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


Schedule.from_actions = staticmethod(_from_actions)
Schedule.from_pipeline_order = staticmethod(_from_pipeline_order)
Schedule.from_csv = staticmethod(_from_csv)
Schedule.from_csv_text = staticmethod(_from_csv_text)
Schedule.to_csv = _to_csv
Schedule.to_actions = _to_actions


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


def _request(schedule=None, families="all", single=False, pp=None, microbatches=None, vpp=0, group_size=0,
             times=None, chunk_times=None, p2p_latency=0.0, overlap=None, config=None, timelines=False, max_ops=0):
    if isinstance(config, str):
        config = load_config(config)
    ov = dict(overlap or {})
    unknown = set(ov) - _OVERLAP_KEYS
    if unknown:
        raise TypeError(f"overlap: unknown key(s) {sorted(unknown)} (a2a, layers, attn_share, comm_sms, sms)")
    if overlap is not None and "a2a" not in ov:
        raise TypeError("overlap needs 'a2a' (the time of one layer's all-to-all)")
    t = _times_spec(times) or ("" if chunk_times is not None else "F=1,B=2,W=1,FB=3")
    return _ppsim._run(schedule, families, single, pp, microbatches, vpp, group_size, t, _times_spec(chunk_times),
                       float(p2p_latency), float(ov.get("a2a", -1)), float(ov.get("attn_share", 0.5)),
                       int(ov.get("layers", 1)), int(ov.get("comm_sms", 20)), int(ov.get("sms", 132)), config,
                       timelines, _HAVE_NUMPY, max_ops)


def simulate(schedule, times=None, chunk_times=None, p2p_latency=0.0, overlap=None, config=None, timeline=True,
             **params):
    """Simulate one schedule: a Schedule, or a family name with pp=, microbatches= (vpp=, group_size=).

    times: one rank's share ("F=1,B=2,W=1,FB=3" or a dict), cut into v chunks for V/interleaved
    layouts; chunk_times: per-chunk times instead; p2p_latency: per stage-to-stage transfer;
    overlap: the overlap model, {"a2a": t, "layers": L, "attn_share": s, "comm_sms": n, "sms": N};
    config: a ppsim.Config (or a path) whose cost model gives the costs instead.
    Returns the result (docs/JSON.md's names) with "timeline" when timeline=True.
    """
    if isinstance(schedule, Schedule):
        out = _request(schedule=schedule, times=times, chunk_times=chunk_times, p2p_latency=p2p_latency,
                       overlap=overlap, config=config, timelines=timeline, max_ops=params.pop("max_ops", 0))
        if params:
            raise TypeError(f"simulate() of a Schedule takes no {sorted(params)}")
    else:
        out = _request(families=str(schedule), single=True, times=times, chunk_times=chunk_times,
                       p2p_latency=p2p_latency, overlap=overlap, config=config, timelines=timeline, **params)
    row = out["results"][0]
    if timeline:
        row["timeline"] = out["timelines"][0]
    return row


def compare(schedules="all", pp=None, microbatches=None, times=None, chunk_times=None, p2p_latency=0.0,
            overlap=None, config=None, timelines=False, **params):
    """Simulate several families on the same model, as `ppsim compare --format json`.

    schedules: "all", a comma list, or a list of names. Returns {"results": [...], "skipped":
    [...]} ("config" too with a config); with timelines=True also "timelines", one per result.
    """
    if not isinstance(schedules, str):
        schedules = ",".join(schedules)
    return _request(families=schedules, pp=pp, microbatches=microbatches, times=times, chunk_times=chunk_times,
                    p2p_latency=p2p_latency, overlap=overlap, config=config, timelines=timelines, **params)


def load_config(path, overrides=None):
    """A validated YAML config; overrides {"parallel.pp": 4} act as `--set parallel.pp=4`."""
    sets = []
    for k, v in (overrides or {}).items():
        if isinstance(v, bool):
            v = "true" if v else "false"
        sets.append(f"{k}={v}")
    return _ppsim._load_config(str(path), sets)


def plan(config, top=0, jobs=0, shard=None, max_ops=0):
    """The planner on a config (a ppsim.Config or a path), as `ppsim plan --format json`."""
    if isinstance(config, str):
        config = load_config(config)
    return _ppsim._plan(config, top, jobs, shard or "", max_ops)
