"""Shared fixtures: the ppsim CLI of the same build as the module (PPSIM_BINARY, else the
build directory that holds build/python/ppsim), run with JSON output."""
import json
import os
import pathlib
import subprocess

import pytest

import ppsim

REPO = pathlib.Path(__file__).resolve().parents[2]


def _binary():
    if os.environ.get("PPSIM_BINARY"):
        return os.environ["PPSIM_BINARY"]
    here = pathlib.Path(ppsim.__file__).resolve()
    beside = here.parent / "ppsim"  # pip install .: the binary inside the package
    return str(beside if beside.is_file() else here.parents[2] / "ppsim")


@pytest.fixture(scope="session")
def cli():
    """cli(*args) -> (returncode, stdout, stderr) of the ppsim binary, run in the repository root."""
    exe = _binary()
    if not os.path.exists(exe):
        pytest.fail(f"no ppsim binary at {exe} (set PPSIM_BINARY)")

    def run(*args):
        p = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, cwd=REPO)
        return p.returncode, p.stdout, p.stderr

    return run


@pytest.fixture(scope="session")
def cli_json(cli):
    def run(*args):
        rc, out, err = cli(*args, "--format", "json")
        assert rc == 0, err
        return json.loads(out)

    return run
