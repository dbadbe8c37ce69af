# Type stubs of the ppsim package. The command functions at the end are generated from the
# options table (src/api/options.cc) by tools/gen_options.py; CTest options_generated fails when
# they differ from it. Above the cut: the hand-written part (the classes; the result classes'
# stubs go here).
import os
from typing import Any, Mapping, Optional, Sequence

__version__: str

class Error(Exception):
    exit_code: int

class Schedule:
    family: str
    pp: int
    microbatches: int
    num_pipes: int
    stages_per_pipe: int
    stages: int
    chunks_per_rank: int
    parameter_copies: int
    stage_rank: list[int]
    num_ops: int
    ranks: list[list[str]]
    @staticmethod
    def from_actions(ranks: Sequence[Optional[Sequence[object]]], pp: int = 0, microbatches: int = 0,
                     layout: str = "auto", name: str = "<actions>") -> Schedule: ...
    @staticmethod
    def from_pipeline_order(order: Mapping[int, Sequence[object]], pp: int = 0, microbatches: int = 0,
                            layout: str = "auto") -> Schedule: ...
    @staticmethod
    def from_csv(path: str | os.PathLike[str], pp: int = 0, microbatches: int = 0, layout: str = "auto") -> Schedule: ...
    @staticmethod
    def from_csv_text(text: str, pp: int = 0, microbatches: int = 0, layout: str = "auto",
                      name: str = "<csv>") -> Schedule: ...
    def to_csv(self, path: Optional[str | os.PathLike[str]] = None) -> str: ...
    def to_actions(self) -> list[list[str]]: ...
    def lowered(self, runtime: str = "torch") -> list[list[str]]: ...
    def svg(self, times: str | Mapping[str, float] = "") -> str: ...

class Config:
    path: str
    overrides: list[str]

# ---- results (the install helper's part: result classes, to_pandas, _repr_html_) ----
class Result(dict[str, Any]):
    def rows(self) -> list[dict[str, Any]]: ...
    def to_pandas(self) -> Any: ...
    def _repr_html_(self) -> Optional[str]: ...

def families() -> list[dict[str, Any]]: ...
def generate(family: str, pp: int, microbatches: int, *, vpp: int = 0, group_size: int = 0,
             max_ops: int = 0) -> Schedule: ...
def load_config(path: str | os.PathLike[str], overrides: Optional[Mapping[str, object]] = None) -> Config: ...

# ---- generated from src/api/options.cc by tools/gen_options.py: do not edit below ----

def compare(
    schedules: str | Sequence[str] = None,
    *,
    config: str | os.PathLike[str] | Config | None = None,
    pp: int | None = None,
    microbatches: int | None = None,
    vpp: int = 0,
    group_size: int = 0,
    schedule_file: str | None = None,
    layout: str = "auto",
    csv_dialect: str = "auto",
    drop_comm: bool = False,
    max_ops: int = 0,
    overrides: Mapping[str, object] | Sequence[str] | None = None,
    calibration: str | None = None,
    megatron_args: str | None = None,
    megatron_env: Sequence[str] | None = None,
    times: str | Mapping[str, float] = "F=1,B=2,W=1,FB=3",
    chunk_times: str | Mapping[str, float] | None = None,
    p2p_latency: float = 0.0,
    a2a: float | None = None,
    layers: int = 1,
    attn_share: float = 0.5,
    comm_sms: int = 20,
    sms: int = 132,
    timelines: bool = False,
    overlap: Mapping[str, float] | None = None,
) -> Result:
    """simulate schedules side by side: makespan, bubbles, memory, throughput."""
    ...


def simulate(
    schedule: str | Schedule,
    *,
    config: str | os.PathLike[str] | Config | None = None,
    pp: int | None = None,
    microbatches: int | None = None,
    vpp: int = 0,
    group_size: int = 0,
    schedule_file: str | None = None,
    layout: str = "auto",
    csv_dialect: str = "auto",
    drop_comm: bool = False,
    max_ops: int = 0,
    overrides: Mapping[str, object] | Sequence[str] | None = None,
    calibration: str | None = None,
    megatron_args: str | None = None,
    megatron_env: Sequence[str] | None = None,
    times: str | Mapping[str, float] = "F=1,B=2,W=1,FB=3",
    chunk_times: str | Mapping[str, float] | None = None,
    p2p_latency: float = 0.0,
    a2a: float | None = None,
    layers: int = 1,
    attn_share: float = 0.5,
    comm_sms: int = 20,
    sms: int = 132,
    timeline: bool = True,
    overlap: Mapping[str, float] | None = None,
) -> Result:
    """simulate one schedule and write its timeline."""
    ...


def plan(
    config: str | os.PathLike[str] | Config,
    *,
    overrides: Mapping[str, object] | Sequence[str] | None = None,
    calibration: str | None = None,
    megatron_args: str | None = None,
    megatron_env: Sequence[str] | None = None,
    top: int = 0,
    jobs: int = 0,
    shard: str | None = None,
    merge: Sequence[str] | None = None,
    max_ops: int = 0,
) -> dict[str, Any]:
    """search schedules and layouts for a YAML config under memory and GPU limits."""
    ...


def profile(
    config: str | os.PathLike[str] | Config,
    *,
    overrides: Mapping[str, object] | Sequence[str] | None = None,
    output: str | os.PathLike[str] | None = None,
    warmup: int = 5,
    reps: int = 20,
    device: int = 0,
    a2a: str = "ours",
) -> Result:
    """time a config's ops on the GPU and write a cost profile."""
    ...


def validate(
    config: str | os.PathLike[str] | Config,
    *,
    overrides: Mapping[str, object] | Sequence[str] | None = None,
    calibration: str | None = None,
    schedules: str | None = None,
    schedule_file: str | None = None,
    devices: int = 0,
    reps: int = 10,
    replays: int = 3,
    target: float = 0.0,
    transport: str = "auto",
    timeout: float = 120.0,
    sm_split: str = "auto",
    sharing: str = "replay",
    rank_speeds: str = "profiled",
    co_run: str = "sustained",
    launch: str = "graphs",
    ep_replay: bool = False,
    a2a: str = "ours",
    no_link_probe: bool = False,
) -> Result:
    """replay a schedule on the GPUs and compare measured with predicted."""
    ...


def import_trace(
    trace: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    output: str | os.PathLike[str] | None = None,
    moe_layers_only: bool = False,
    inference: bool = False,
    map: Sequence[str] | None = None,
    no_default_rules: bool = False,
    step_range: str | None = None,
    layer_order: str = "auto",
    comm_kernel: str | None = None,
    schedule: str | None = None,
    p2p_runtime: str = "dataflow",
    pp: int = 1,
    microbatches: int = 1,
    vpp: int = 0,
    devices: int = 1,
    layers_per_chunk: int = 0,
    comm_sms: int = 20,
    sms: int = 132,
) -> Result:
    """read a PyTorch profiler (Kineto) trace and write a cost profile."""
    ...


def search(
    *,
    config: str | os.PathLike[str] | Config | None = None,
    overrides: Mapping[str, object] | Sequence[str] | None = None,
    calibration: str | None = None,
    pp: int | None = None,
    microbatches: int | None = None,
    times: str | Mapping[str, float] = "F=1,B=2,W=1",
    chunk_times: str | Mapping[str, float] | None = None,
    p2p_latency: float = 0.0,
    a2a: float | None = None,
    layers: int = 1,
    attn_share: float = 0.5,
    comm_sms: int = 20,
    sms: int = 132,
    memory_cap: str = "best",
    w_hold: float | None = None,
    placement: str = "torch",
    seed: int = 1,
    time_limit: float = 10.0,
    objective: str | None = None,
    threads: int = 0,
    overlap: Mapping[str, float] | None = None,
) -> Result:
    """search per-rank op orders for your costs under a memory cap; beside the best family."""
    ...


def model(
    path: str | os.PathLike[str],
    *,
    pp: int | None = None,
    layer_split: Sequence[int] | None = None,
    seq_len: int | None = None,
    overrides: Mapping[str, object] | Sequence[str] | None = None,
) -> Result:
    """parameters (total, active) by part, FLOPs per token, params per stage of a config or config.json."""
    ...


def fidelity(
    *,
    files: Sequence[str | os.PathLike[str]] | None = None,
    dir: str = "configs/published",
    overrides: Mapping[str, object] | Sequence[str] | None = None,
    calibration: str | None = None,
    calibrate: str | None = None,
    thresholds: str | None = None,
) -> Result:
    """predict every configs/published/ run and compare with its source (docs/FIDELITY.md)."""
    ...


def calibrate(
    config: str | os.PathLike[str] | Config,
    *,
    traces: Sequence[str | os.PathLike[str]] | None = None,
    step_ms: float | None = None,
    tokens_per_s: float | None = None,
    schedule: str | None = None,
    vpp: int = 0,
    overrides: Mapping[str, object] | Sequence[str] | None = None,
    step_range: str | None = None,
    output: str | os.PathLike[str] | None = None,
) -> Result:
    """fit a config's efficiencies to your own run (traces, or a step time) and write a calibration file."""
    ...
