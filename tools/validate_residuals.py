#!/usr/bin/env python3
"""Where a validate run's error sits: op time or idle time, per schedule, from `ppsim validate --trace`.

    python3 tools/validate_residuals.py TRACE.json      (tools/gpu_replay_check.sh with TRACES=1 writes them)
    python3 tools/validate_residuals.py --self-test

For each schedule of the trace, predicted against measured:
  - per action kind (F, B, I, W, a pair as F+B ...): the mean duration and the difference;
  - per rank: busy and idle time; how many of its actions started after a gap (> 0.5 us) that no
    message explains (the action's inputs, if any, had landed before the previous action ended),
    with their median and sum;
  - measured only: the median from a producer's end to its message's copy start, and from a
    message's arrival to the start of a consumer that waited for it (its rank idle before the
    arrival): the replay's own delays around a message, which `validate` also measures in its link
    probe (docs/VALIDATION.md, "What is left at the small shape").
"""
import json
import statistics
import sys
from collections import defaultdict


def kind_of(args):
    k = args.get("kind", "?")
    return f"{k}+{args.get('backward_kind', '')}" if args.get("overlapped") else k


def ops_of(args):
    """The (kind, stage, micro-batch) ops of an action's slice."""
    ops = [(args.get("kind", "?")[:1], args.get("stage"), args.get("microbatch"))]
    if args.get("overlapped"):
        ops.append((args.get("backward_kind", "?"), args.get("backward_stage"), args.get("backward_microbatch")))
    return ops


def consumes(q, p):
    """Whether op q reads what op p produced: the next stage's F of an F, the previous stage's backward of one."""
    if q[2] != p[2]:
        return False
    if p[0] == "F":
        return q[0] == "F" and q[1] == p[1] + 1
    return p[0] in ("B", "I") and q[0] in ("B", "I") and q[1] == p[1] - 1


def timelines(events):
    """{schedule: {"predicted"|"measured": {"ranks": {r: [slices]}, "sends": [slices]}}}"""
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    out = defaultdict(lambda: defaultdict(lambda: {"ranks": defaultdict(list), "sends": []}))
    for e in events:
        if e.get("ph") != "X" or e.get("pid") not in names:
            continue
        words = names[e["pid"]].split()
        if len(words) < 4 or words[-2] != "rank" or words[-3] not in ("predicted", "measured"):
            continue
        sched, which, rank = " ".join(words[:-3]), words[-3], int(words[-1])
        t = out[sched][which]
        if e.get("cat") == "compute" and e.get("tid", 0) == 0:
            t["ranks"][rank].append(e)
        elif e.get("cat") == "transfer":
            t["sends"].append(e)
    for s in out.values():
        for t in s.values():
            for v in t["ranks"].values():
                v.sort(key=lambda e: e["ts"])
    return out


def analyse(t):
    ranks, sends = t["ranks"], t["sends"]
    if not ranks:
        return None
    t0 = min(v[0]["ts"] for v in ranks.values())
    t1 = max(e["ts"] + e["dur"] for v in ranks.values() for e in v)
    # Per slice (rank, index): the latest arrival of a message it consumes.
    arrival = {}
    send_delays, receive_delays = [], []
    for x in sends:
        a = x.get("args", {})
        src, dst = a.get("src_rank"), a.get("dst_rank")
        p = (a.get("kind", "?")[:1], a.get("stage"), a.get("microbatch"))
        for e in ranks.get(src, []):
            if p in ops_of(e["args"]):
                send_delays.append(x["ts"] - (e["ts"] + e["dur"]))
        land = x["ts"] + x["dur"]
        v = ranks.get(dst, [])
        for i, e in enumerate(v):
            if any(consumes(q, p) for q in ops_of(e["args"])):
                arrival[(dst, i)] = max(arrival.get((dst, i), land), land)
                if i == 0 or v[i - 1]["ts"] + v[i - 1]["dur"] < land:
                    receive_delays.append(e["ts"] - land)
    by_kind = defaultdict(list)
    per_rank = {}
    for r, v in sorted(ranks.items()):
        busy = sum(e["dur"] for e in v)
        gaps = []
        for i in range(1, len(v)):
            prev_end = v[i - 1]["ts"] + v[i - 1]["dur"]
            if arrival.get((r, i), prev_end) <= prev_end:
                g = v[i]["ts"] - prev_end
                if g > 0.5:
                    gaps.append(g)
        per_rank[r] = {"busy": busy, "idle": (t1 - t0) - busy, "gaps": gaps, "actions": len(v)}
        for e in v:
            by_kind[kind_of(e["args"])].append(e["dur"])
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    return {"span": t1 - t0, "ranks": per_rank, "kinds": {k: sum(d) / len(d) for k, d in by_kind.items()},
            "send_us": med(send_delays), "receive_us": med(receive_delays), "sends": len(send_delays),
            "receives": len(receive_delays)}


def report(path_or_events):
    events = path_or_events
    if isinstance(path_or_events, str):
        with open(path_or_events) as f:
            events = json.load(f)
    if isinstance(events, dict):
        events = events.get("traceEvents", [])
    lines = []
    for sched, t in timelines(events).items():
        p, m = analyse(t.get("predicted", {"ranks": {}, "sends": []})), analyse(t.get("measured", {"ranks": {}, "sends": []}))
        if not p or not m:
            continue
        lines.append(f"{sched}: makespan {p['span']:.0f} / {m['span']:.0f} us ({100 * (p['span'] / m['span'] - 1):+.1f}%)"
                     "  (predicted / measured)")
        kinds = " ".join(f"{k} {p['kinds'][k]:.1f}/{m['kinds'][k]:.1f} ({100 * (m['kinds'][k] / p['kinds'][k] - 1):+.1f}%)"
                         for k in sorted(p["kinds"]) if k in m["kinds"] and p["kinds"][k] > 0)
        lines.append(f"  mean us per action kind: {kinds}")
        for r in sorted(m["ranks"]):
            pr, mr = p["ranks"].get(r), m["ranks"][r]
            g = mr["gaps"]
            lines.append(f"  rank {r}: busy {pr['busy'] if pr else 0:.0f}/{mr['busy']:.0f}, idle {pr['idle'] if pr else 0:.0f}/"
                         f"{mr['idle']:.0f}; measured gaps no message explains: {len(g)} of {mr['actions'] - 1}, median "
                         f"{statistics.median(g) if g else 0:.1f}, sum {sum(g):.0f}")
        lines.append(f"  measured delays: producer end to copy {m['send_us']:.1f} us ({m['sends']}), arrival to a "
                     f"waiting consumer {m['receive_us']:.1f} us ({m['receives']})")
    return "\n".join(lines)


def self_test():
    # Two ranks, 1F1B-like: predicted F 100 / B 200 back to back; measured with a 6 us gap before
    # every action that had its input, a message copied 10 us after its producer and a consumer
    # starting 8 us after the copy lands.
    def meta(pid, name):
        return {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": name}}

    def op(pid, kind, stage, mb, ts, dur):
        return {"name": f"{stage}{kind}{mb}", "cat": "compute", "ph": "X", "pid": pid, "tid": 0, "ts": ts, "dur": dur,
                "args": {"stage": stage, "microbatch": mb, "kind": kind, "overlapped": False}}

    def send(pid, kind, stage, mb, src, dst, ts, dur):
        return {"name": f"send {stage}{kind}{mb}", "cat": "transfer", "ph": "X", "pid": pid, "tid": 1, "ts": ts,
                "dur": dur, "args": {"src_rank": src, "dst_rank": dst, "stage": stage, "microbatch": mb, "kind": kind}}

    ev = [meta(0, "x predicted rank 0"), meta(1, "x predicted rank 1"), meta(1000, "x measured rank 0"),
          meta(1001, "x measured rank 1"),
          op(0, "F", 0, 0, 0, 100), op(0, "F", 0, 1, 100, 100), op(1, "F", 1, 0, 100, 100), op(1, "B", 1, 0, 200, 200),
          # measured: rank 0 F0 [0,100], F1 [106,206] (a gap of 6, no input); 0F0's copy 110..120,
          # rank 1 F0 starts 128 (waited: receive 8), B0 [234,434] (gap 6 after 228).
          op(1000, "F", 0, 0, 0, 100), op(1000, "F", 0, 1, 106, 100), op(1001, "F", 1, 0, 128, 100),
          op(1001, "B", 1, 0, 234, 200), send(1000, "F", 0, 0, 0, 1, 110, 10)]
    text = report({"traceEvents": ev})
    m = analyse(timelines(ev)["x"]["measured"])
    assert abs(m["send_us"] - 10) < 1e-9, m
    assert abs(m["receive_us"] - 8) < 1e-9, m
    assert m["ranks"][0]["gaps"] == [6] and m["ranks"][1]["gaps"] == [6], m
    assert m["ranks"][1]["idle"] == 434 - 300, m  # span 434, busy 300
    assert "F 100.0/100.0 (+0.0%)" in text and "B 200.0/200.0 (+0.0%)" in text, text
    print("validate_residuals self-test: ok")


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "--self-test":
        self_test()
    elif len(sys.argv) == 2:
        print(report(sys.argv[1]))
    else:
        sys.exit(__doc__)
