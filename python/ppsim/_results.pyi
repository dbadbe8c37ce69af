# Type stubs for ppsim's results and errors (hand-written; python/ppsim/__init__.py). The
# generated __init__.pyi (the CLI options table) re-exports these names.
from typing import Any, Dict, List

from ._ppsim import Error as Error

class Result(Dict[str, Any]):
    """The dict of the CLI's JSON (docs/JSON.md) for simulate, compare, search, plan, import_trace,
    model, fidelity, profile and validate."""
    def rows(self) -> List[Dict[str, Any]]: ...
    def long_rows(self) -> List[Dict[str, Any]]: ...
    def to_pandas(self) -> Any: ...  # pandas.DataFrame: row, id columns, quantity, rank, value
    def timelines_svg(self) -> List[str]: ...
    def _repr_html_(self) -> str: ...

class UsageError(Error, ValueError, TypeError):
    exit_code: int
class InputError(Error, ValueError):
    exit_code: int
class FileError(Error, OSError):
    exit_code: int
class GpuError(Error, RuntimeError):
    exit_code: int
class LimitError(Error, RuntimeError):
    exit_code: int
class InternalError(Error, RuntimeError):
    exit_code: int

def _rows_of(d: Dict[str, Any]) -> List[Dict[str, Any]]: ...
def _timeline_svg(name: str, tl: Dict[str, Any], width: int = ...) -> str: ...
