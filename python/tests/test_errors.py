"""Bad input raises ppsim.Error with the CLI's one-line message (without the "ppsim: " prefix)
and its exit code (docs/CLI.md)."""
import pytest

import ppsim


def _cli_error(cli, *args):
    rc, out, err = cli(*args)
    assert rc != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ppsim: ")
    return rc, lines[0][len("ppsim: "):]


CASES = [
    (lambda: ppsim.compare(times="F=1,B=2,W=3"), ["compare", "--times", "F=1,B=2,W=3"]),
    (lambda: ppsim.compare(times={"F": 1, "X": 2}), ["compare", "--times", "F=1.0,X=2.0"]),
    (lambda: ppsim.compare(chunk_times="F=1"), ["compare", "--chunk-times", "F=1"]),
    (lambda: ppsim.compare(p2p_latency=-1), ["compare", "--p2p-latency", "-1"]),
    (lambda: ppsim.compare(overlap={"a2a": 0.5, "layers": 3}), ["compare", "--a2a", "0.5", "--layers", "3"]),
    (lambda: ppsim.compare("zb-h3"), ["compare", "-s", "zb-h3"]),
    (lambda: ppsim.simulate("dualpipe", pp=8, microbatches=10), ["simulate", "-s", "dualpipe", "-m", "10"]),
    (lambda: ppsim.generate("dualpipe", 8, 10), ["show", "dualpipe", "-m", "10"]),
    (lambda: ppsim.generate("1f1b", 0, 4), ["show", "1f1b", "--pp", "0", "-m", "4"]),
    (lambda: ppsim.Schedule.from_csv("/nonexistent.csv"), ["show", "--schedule-file", "/nonexistent.csv"]),
    (lambda: ppsim.load_config("configs/deepseek-v3.yaml", overrides={"parallel.pq": 4}),
     ["compare", "configs/deepseek-v3.yaml", "--set", "parallel.pq=4"]),
    (lambda: ppsim.plan("configs/deepseek-v3.yaml", shard="2/2"), ["plan", "configs/deepseek-v3.yaml", "--shard", "2/2"]),
]


@pytest.mark.parametrize("call,args", CASES, ids=[" ".join(a) for _, a in CASES])
def test_same_message_and_exit_code_as_cli(cli, call, args):
    rc, line = _cli_error(cli, *args)
    with pytest.raises(ppsim.Error) as e:
        call()
    assert str(e.value) == line
    assert e.value.exit_code == rc


def test_bad_csv_points_at_the_token():
    with pytest.raises(ppsim.Error) as e:
        ppsim.Schedule.from_actions([["0F0", "0X1"], ["1F0"]])
    assert str(e.value).startswith("<actions>:1:")
    assert e.value.exit_code == 3
