#!/usr/bin/env python3
"""Writes what the options table (src/api/options.cc) gives besides the parser:

- docs/CLI.md: every command's option table, between the markers <!-- options:begin --> and
  <!-- options:end -->;
- python/ppsim/__init__.pyi: the type stubs of the command functions, below the hand-written part
  (the classes: Schedule, Config, Error, Result), which is kept as it is.

Usage: tools/gen_options.py [--binary build/ppsim] [--check]
--check writes nothing and exits 1 (with a diff) when a committed file differs from what the table
generates (CTest options_generated).
"""
import argparse
import difflib
import json
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
CLI_MD = REPO / "docs" / "CLI.md"
PYI = REPO / "python" / "ppsim" / "__init__.pyi"
BEGIN, END = "<!-- options:begin -->", "<!-- options:end -->"
PYI_CUT = "# ---- generated from src/api/options.cc by tools/gen_options.py: do not edit below ----"

# The Python functions' explicit leading parameters (python/ppsim/__init__.py; the rest are the
# table's keywords, keyword-only), required ones marked "!"; test_options.py checks the stubs
# against the functions.
FIRST = {"compare": ["schedules"], "simulate": ["schedule!"], "plan": ["config!"], "search": [],
         "import_trace": ["trace!"], "model": ["path!"], "fidelity": [], "profile": ["config!"],
         "validate": ["config!"], "calibrate": ["config!"]}
RETURNS = {"plan": "dict[str, Any]"}
PATH = "str | os.PathLike[str]"
# Python-shaped types where the table's kind says less.
TYPES = {
    "times": "str | Mapping[str, float]", "chunk_times": "str | Mapping[str, float] | None",
    "config": f"{PATH} | Config", "overrides": "Mapping[str, object] | Sequence[str] | None",
    "overlap": "Mapping[str, float] | None", "trace": f"{PATH} | Sequence[{PATH}]",
    "output": f"{PATH} | None", "path": PATH, "files": f"Sequence[{PATH}] | None",
    "traces": f"Sequence[{PATH}] | None",
}
KIND_TYPES = {"flag": "bool", "int": "int", "int64": "int", "real": "float", "text": "str", "texts": "Sequence[str]",
              "ints": "Sequence[int]"}


def dump(binary):
    out = subprocess.run([binary, "--dump-options", "json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def cell(text):
    return str(text).replace("|", "\\|")


def cli_md_block(commands):
    lines = [BEGIN, "", "<!-- generated from src/api/options.cc by tools/gen_options.py; edit the table there -->",
             ""]
    for c in commands:
        lines += [f"### `ppsim {c['name']}`", "", cell(c["help"]) + ".", ""]
        py = c["python"]
        lines.append(f"Python: `ppsim.{py}(...)`." if py else "Python: none.")
        lines += ["", "| option | type | default | unit | Python keyword | meaning |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for o in c["options"]:
            if o["reach"] == "python":
                continue
            names = (f"`{o['name']}` (positional)" if o["positional"]
                     else ", ".join(f"`{n}`" for n in o["names"].split(",")))
            kind = o["kind"] + (f": {cell(o['choices'])}" if o["choices"] else "")
            default = f"`{cell(o['default'])}`" if o["default"] else ""
            keyword = "(CLI only)" if o["reach"] == "cli" or not py else f"`{o['python']}`"
            lines.append(f"| {names} | {kind} | {default} | {cell(o['unit'])} | {keyword} | {cell(o['help'])} |")
        py_only = [o for o in c["options"] if o["reach"] == "python"]
        if py_only:
            lines += ["", "Python only: " + "; ".join(f"`{o['python']}` ({cell(o['help'])})" for o in py_only) + "."]
        lines.append("")
    lines.append(END)
    return "\n".join(lines)


def new_cli_md(commands):
    text = CLI_MD.read_text()
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    return head + cli_md_block(commands) + tail


def py_default(o):
    if o["kind"] == "flag":
        return "True" if o["default"] == "true" else "False"
    if o["default"] == "":
        return "None"
    if o["kind"] in ("int", "int64"):
        return str(int(o["default"]))
    if o["kind"] == "real":
        return repr(float(o["default"]))
    return json.dumps(o["default"])


def py_type(o, name):
    t = TYPES.get(name, KIND_TYPES[o["kind"]])
    if o["default"] == "" and o["kind"] != "flag" and "None" not in t and name not in ("trace", "path"):
        t += " | None"
    return t


def stub(c):
    fn = c["python"]
    by_name = {o["python"]: o for o in c["options"] if o["reach"] != "cli"}
    params, first = [], [n.rstrip("!") for n in FIRST[fn]]
    for spec in FIRST[fn]:
        name = spec.rstrip("!")
        o = by_name[name]
        t = "str | Schedule" if (fn, name) == ("simulate", "schedule") else py_type(o, name)
        t = "str | Sequence[str]" if (fn, name) == ("compare", "schedules") else t
        t = t.replace(" | None", "") if spec.endswith("!") else t
        params.append(f"{name}: {t}" + ("" if spec.endswith("!") else f" = {py_default(o)}"))
    if len(by_name) > len(first):
        params.append("*")
    for name, o in by_name.items():
        if name not in first:
            params.append(f"{name}: {py_type(o, name)} = {py_default(o)}")
    doc = c["help"].replace('"', "'")
    lines = [f"def {fn}("] + [f"    {p}," for p in params]
    lines += [f") -> {RETURNS.get(fn, 'Result')}:", f'    """{doc}."""', "    ..."]
    return "\n".join(lines)


def new_pyi(commands):
    head = PYI.read_text().split(PYI_CUT, 1)[0]
    stubs = [stub(c) for c in commands if c["python"]]
    return head + PYI_CUT + "\n\n" + "\n\n\n".join(stubs) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=str(REPO / "build" / "ppsim"))
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    commands = dump(args.binary)
    stale = 0
    for path, text in ((CLI_MD, new_cli_md(commands)), (PYI, new_pyi(commands))):
        old = path.read_text()
        if old == text:
            continue
        if args.check:
            stale += 1
            diff = difflib.unified_diff(old.splitlines(True), text.splitlines(True), str(path), "generated")
            sys.stdout.writelines(diff)
        else:
            path.write_text(text)
            print(f"wrote {path.relative_to(REPO)}")
    if stale:
        print(f"\n{stale} file(s) differ from the options table: run tools/gen_options.py", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
