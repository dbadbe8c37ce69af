"""Schedules as PyTorch action lists: round trips through actions and CSV, a hand-built
pipeline_order, and PyTorch 2.11's own orders (golden data in /work/shared/reference or
tests/golden)."""
import json
import os
import pathlib

import pytest

import ppsim

GOLDEN = [pathlib.Path(__file__).resolve().parents[2] / "tests/golden/torch_pipeline_orders.json",
          pathlib.Path("/work/shared/reference/torch_pipeline_orders.json")]


@pytest.mark.parametrize("pp,m", [(2, 4), (4, 8), (4, 12)])
def test_actions_and_csv_round_trip(pp, m, tmp_path):
    for fam in ppsim.families():
        try:
            s = ppsim.generate(fam["name"], pp, m)
        except ppsim.Error as e:
            assert e.exit_code == 3  # only the family's own constraint
            continue
        again = ppsim.Schedule.from_actions(s.ranks)
        assert again == s, fam["name"]
        assert again.ranks == s.ranks
        assert ppsim.Schedule.from_csv_text(s.to_csv()) == s
        path = tmp_path / f"{fam['name']}.csv"
        s.to_csv(path)
        assert ppsim.Schedule.from_csv(path) == s
        # An imported schedule simulates to the same makespan as the generated one.
        t = "F=1,B=2,W=1,FB=2.5"
        assert ppsim.simulate(again, times=t, timeline=False)["makespan"] == \
            ppsim.simulate(s, times=t, timeline=False)["makespan"]


def test_overlapped_pairs_use_pytorch_notation():
    s = ppsim.generate("dualpipe", 4, 8)
    pairs = [a for rank in s.ranks for a in rank if a.startswith("(")]
    assert pairs and all(a.endswith(")OVERLAP_F_B") and ";" in a for a in pairs)


class _Action:
    """What torch.distributed.pipelining's _Action looks like from outside: only str() is used."""

    def __init__(self, stage, kind, mb):
        self.stage, self.kind, self.mb = stage, kind, mb

    def __str__(self):
        return f"{self.stage}{self.kind}{self.mb}"


def test_hand_built_pipeline_order_imports():
    # 1F1B, P = 2, M = 2, with the idle steps (None) PyTorch puts in its grid:
    # rank 0: F0 F1 . B0 B1     rank 1: . F0 B0 F1 B1
    order = {
        0: [_Action(0, "F", 0), _Action(0, "F", 1), None, _Action(0, "B", 0), _Action(0, "B", 1)],
        1: [None, _Action(1, "F", 0), _Action(1, "B", 0), _Action(1, "F", 1), _Action(1, "B", 1)],
    }
    s = ppsim.Schedule.from_pipeline_order(order)
    assert s.ranks == [["0F0", "0F1", "0B0", "0B1"], ["1F0", "1B0", "1F1", "1B1"]]
    assert s == ppsim.generate("1f1b", 2, 2)
    # F = 1, B = 2: makespan (M + P - 1)(F + B) = 3 * 3 = 9.
    assert ppsim.simulate(s, times="F=1,B=2", timeline=False)["makespan"] == 9


def test_pipeline_order_needs_ranks_from_zero():
    with pytest.raises(ppsim.Error):
        ppsim.Schedule.from_pipeline_order({1: ["1F0"], 2: ["2F0"]})


def _golden():
    for p in GOLDEN:
        if p.exists():
            return json.loads(p.read_text())["orders"]
    pytest.skip("no torch_pipeline_orders.json (tests/golden or /work/shared/reference)")


# PyTorch's class -> the ppsim family with the same per-rank order (Interleaved1F1B: for M a
# multiple of P, where Megatron and PyTorch group micro-batches alike).
SAME_ORDER = {"ScheduleInterleaved1F1B": "interleaved-1f1b", "ScheduleZBVZeroBubble": "zbv",
              "ScheduleDualPipeV": "dualpipev"}


def test_pytorch_orders_import_and_match_ppsim():
    orders = _golden()
    matched = 0
    for key, order in orders.items():
        cls, pp, m, _ = key.split("|")
        pp, m = int(pp[3:]), int(m[2:])
        s = ppsim.Schedule.from_pipeline_order({int(r): a for r, a in order.items()})
        assert s.pp == pp and s.microbatches == m, key
        assert s.chunks_per_rank == 2, key
        fam = SAME_ORDER.get(cls)
        if fam is None or (fam == "interleaved-1f1b" and m % pp):
            continue
        mine = ppsim.generate(fam, pp, m)
        assert s.ranks == mine.ranks, key
        t = "F=1,B=2,W=1,FB=2.5"
        assert ppsim.simulate(s, times=t, timeline=False)["makespan"] == \
            ppsim.simulate(mine, times=t, timeline=False)["makespan"], key
        matched += 1
    assert matched == 47  # 15 interleaved (M a multiple of P), 18 ZB-V, 14 DualPipeV


def test_lowered_is_the_clis_and_schedule1f1b_calls():
    # Schedule1F1B at P = 2, M = 2: rank 0 sends each forward's output, then receives each
    # backward's gradient; rank 1 receives, computes F0 B0, then sends B0's gradient and receives
    # F1's input (one fused batch), as its _step_microbatches issues them.
    s = ppsim.generate("1f1b", 2, 2)
    low = s.lowered()
    assert low == [["0F0", "0SEND_F0", "0F1", "0SEND_F1", "0RECV_B0", "0B0", "0RECV_B1", "0B1"],
                   ["1RECV_F0", "1F0", "1B0", "1SEND_B0", "1RECV_F1", "1F1", "1B1", "1SEND_B1"]]
    # Interleaved: PyTorch's runtime lowering, with its FSDP-style actions first.
    inter = ppsim.generate("interleaved-1f1b", 2, 2, vpp=2).lowered()
    assert inter[0][:4] == ["0UNSHARD", "2UNSHARD", "0F0", "0SEND_F0"]
    # Compute actions keep their order: dropping the comm tokens gives the schedule back.
    for rank, toks in enumerate(inter):
        assert [t for t in toks if "SEND" not in t and "RECV" not in t and "SHARD" not in t and "REDUCE" not in t] == \
            ppsim.generate("interleaved-1f1b", 2, 2, vpp=2).ranks[rank]
    with pytest.raises(ppsim.Error):
        ppsim.generate("dualpipe", 4, 8).lowered()
    with pytest.raises(ppsim.Error):
        s.lowered("megatron")
