"""One options table (src/api/options.cc) for the CLI and Python: for every command, the options
the CLI's parser really has (outputs and colours aside) and the keywords the Python function really
takes are the same set with the same defaults; the generated stubs match the functions; and the
CLI items that came with it (`-` as an output, exit 3 when nothing ran, torch's names, NO_COLOR)."""
import ast
import inspect
import json
import os
import pathlib
import pty
import subprocess

import pytest

import ppsim

from conftest import REPO, _binary

PYI = pathlib.Path(ppsim.__file__).resolve().parent / "__init__.pyi"
if not PYI.is_file():
    PYI = REPO / "python" / "ppsim" / "__init__.pyi"


@pytest.fixture(scope="module")
def dump(cli):
    rc, out, err = cli("--dump-options", "json")
    assert rc == 0, err
    return json.loads(out)


def _same_default(cli_default, kind, py_default):
    """The CLI's default text (as CLI11 shows it) against a Python default."""
    if py_default is inspect.Parameter.empty:
        return cli_default == ""
    if kind == "flag":
        return py_default is (cli_default == "true")
    if cli_default == "":
        return py_default is None
    if kind in ("int", "int64"):
        return py_default == int(cli_default) and type(py_default) is int
    if kind == "real":
        return py_default == float(cli_default) and type(py_default) is float
    return py_default == cli_default


def mismatches(cmd, signature):
    """What differs between the CLI's parser (cmd["cli"]: the options CLI11 holds) and a Python
    signature, both read through the command's table (cmd["options"]) for names and reach."""
    rows_cli = {o["name"]: o for o in cmd["options"] if o["reach"] != "python"}
    rows_py = {o["python"]: o for o in cmd["options"] if o["reach"] != "cli"}
    problems, cli_side, py_side = [], {}, {}
    for opt in cmd["cli"]:
        row = rows_cli.get(opt["name"])
        if row is None:
            problems.append(f"CLI option --{opt['name']} is not in the table")
        elif row["reach"] == "both":
            cli_side[row["python"]] = ("false" if opt["flag"] else opt["default"], row["kind"])
    for name, p in signature.parameters.items():
        if p.kind == p.VAR_KEYWORD:
            continue
        row = rows_py.get(name)
        if row is None:
            problems.append(f"Python keyword {name} is not in the table")
        elif row["reach"] == "both":
            py_side[name] = p.default
    for name in sorted(set(cli_side) ^ set(py_side)):
        problems.append(f"{name}: only in {'the CLI' if name in cli_side else 'Python'}")
    for name in sorted(set(cli_side) & set(py_side)):
        default, kind = cli_side[name]
        if not _same_default(default, kind, py_side[name]):
            problems.append(f"{name}: CLI default {default!r}, Python {py_side[name]!r}")
    return problems


def test_every_command_same_options_and_defaults_in_cli_and_python(dump):
    checked = 0
    for cmd in dump:
        if not cmd["python"]:
            continue
        fn = getattr(ppsim, cmd["python"])
        assert mismatches(cmd, inspect.signature(fn)) == [], cmd["name"]
        checked += 1
    assert checked == 10  # compare simulate plan profile validate import_trace search model fidelity calibrate


def test_the_check_fails_when_one_side_drifts(dump):
    cmd = next(c for c in dump if c["name"] == "compare")
    sig = inspect.signature(ppsim.compare)
    # A CLI option added outside the table, a Python keyword the CLI lacks, a default changed.
    extra_cli = dict(cmd, cli=cmd["cli"] + [{"name": "sneaky", "default": "", "flag": False}])
    assert mismatches(extra_cli, sig) == ["CLI option --sneaky is not in the table"]
    params = list(sig.parameters.values())
    drop_layers = sig.replace(parameters=[p for p in params if p.name != "layers"])
    assert mismatches(cmd, drop_layers) == ["layers: only in the CLI"]
    changed = sig.replace(parameters=[p.replace(default=2) if p.name == "layers" else p for p in params])
    assert mismatches(cmd, changed) == ["layers: CLI default '1', Python 2"]


def test_stubs_match_the_functions():
    tree = ast.parse(PYI.read_text())
    stubs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    for name in ("compare", "simulate", "plan", "search", "import_trace", "model", "fidelity", "profile", "validate"):
        sig = inspect.signature(getattr(ppsim, name))
        a = stubs[name].args
        stub = [(x.arg, None) for x in a.args[:len(a.args) - len(a.defaults)]]
        stub += [(x.arg, ast.literal_eval(d)) for x, d in zip(a.args[len(a.args) - len(a.defaults):], a.defaults)]
        stub += [(x.arg, ast.literal_eval(d)) for x, d in zip(a.kwonlyargs, a.kw_defaults)]
        real = [(p.name, None if p.default is inspect.Parameter.empty else p.default) for p in sig.parameters.values()]
        assert stub == real, name


def test_python_takes_the_keywords_it_lacked(cli_json):
    want = cli_json("compare", "--pp", 4, "--microbatches", 8, "--a2a", 0.5, "--layers", 2, "--comm-sms", 24,
                    "--attn-share", 0.4, "--group-size", 4)
    assert ppsim.compare(pp=4, microbatches=8, a2a=0.5, layers=2, comm_sms=24, attn_share=0.4, group_size=4) == want
    with pytest.raises(ppsim.Error, match=r"--layer-order 'sideways': expected auto, force or off"):
        ppsim.import_trace("missing.json", layer_order="sideways")
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'ppp' \(did you mean 'pp'\?\)"):
        ppsim.compare(ppp=4)
    with pytest.raises(TypeError, match=r"compare\(\): pp must be an int, got str"):
        ppsim.compare(pp="4")


def test_a_schedule_list_with_spaces_in_a_config(cli_json):
    got = cli_json("compare", "configs/deepseek-v3.yaml", "--set", "parallel.schedule=1f1b, gpipe")
    assert [r["schedule"] for r in got["results"]] == ["1f1b", "gpipe"]
    py = ppsim.compare(config="configs/deepseek-v3.yaml", overrides={"parallel.schedule": "1f1b, gpipe"})
    assert py == got


def test_torch_names_are_aliases(cli_json):
    want = cli_json("compare", "-p", 4, "-m", 8, "-s", "1f1b,zbv,dualpipev")
    got = cli_json("compare", "-p", 4, "-m", 8, "-s", "Schedule1F1B, ZBVZeroBubble,ScheduleDualPipeV")
    assert got == want


def test_dash_writes_only_that_artifact(cli):
    rc, out, _ = cli("simulate", "-s", "1f1b", "-p", 2, "-m", 4, "--trace", "-")
    assert rc == 0
    trace = json.loads(out)  # nothing after the trace
    assert len([e for e in trace["traceEvents"] if e.get("ph") == "X"]) >= 2 * 4 * 2  # F and B per rank and mb
    rc, out, _ = cli("compare", "-s", "1f1b,gpipe", "-p", 2, "-m", 4, "--svg", "-")
    assert rc == 0 and out.startswith("<?xml") and out.count("<svg") == 1 and out.endswith("</svg>\n")


def test_nothing_ran_exits_3(cli):
    # Chimera and DualPipe need an even P: at P = 3 both are skipped, so nothing ran.
    rc, out, _ = cli("compare", "-s", "chimera,dualpipe", "-p", 3, "-m", 6)
    assert rc == 3
    assert "chimera needs an even number of ranks" in out
    assert cli("compare", "-s", "chimera,1f1b", "-p", 3, "-m", 6)[0] == 0


def _on_a_terminal(env):
    """`ppsim show 1f1b` with stdout on a pseudo-terminal: its output."""
    main, sub = pty.openpty()
    p = subprocess.run([_binary(), "show", "1f1b", "-p", "2", "-m", "2"], stdout=sub, stderr=subprocess.PIPE,
                       env=env, cwd=REPO)
    os.close(sub)
    data = b""
    try:
        while chunk := os.read(main, 65536):
            data += chunk
    except OSError:
        pass
    os.close(main)
    assert p.returncode == 0
    return data


def test_no_color_is_honoured():
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    assert b"\x1b[" in _on_a_terminal(env)
    assert b"\x1b[" not in _on_a_terminal(dict(env, NO_COLOR="1"))
