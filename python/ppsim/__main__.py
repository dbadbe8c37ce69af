"""`python -m ppsim ...` and the `ppsim` console script: the ppsim CLI binary installed beside
this package (pip install .), else the one of the build tree the module comes from (build/ppsim),
with the same arguments, exit code and output."""
import os
import pathlib
import sys


def _binary():
    here = pathlib.Path(__file__).resolve().parent
    for p in (here / "ppsim", here.parents[1] / "ppsim"):
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return None


def main():
    exe = _binary()
    if exe is None:
        sys.stderr.write("ppsim: the ppsim binary is not installed beside the ppsim package (pip install .)\n")
        return 5
    sys.stdout.flush()
    os.execv(exe, ["ppsim", *sys.argv[1:]])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
