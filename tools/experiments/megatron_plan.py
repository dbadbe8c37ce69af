"""Megatron-LM's two pipeline schedules as per-rank plans of compute and blocking p2p calls, for
tools/experiments/measure_megatron_runtime.py (standard library only, so that it can be checked anywhere).

Megatron-LM (megatron/core/pipeline_parallel/schedules.py, the Zero Bubble paper's fork) runs
non-interleaved 1F1B (forward_backward_pipelining_without_interleaving) and interleaved 1F1B
(forward_backward_pipelining_with_interleaving, without overlap_p2p_comm) as a loop of compute
steps and p2p calls; each call (p2p_communication.py with batch_p2p_comm) is one
batch_isend_irecv of its sends and receives, a wait on all of them and, with the default
batch_p2p_sync, a torch.cuda.synchronize(). A plan is, per rank, a list of

  ("F", chunk, microbatch)  forward of the rank's model chunk on that micro-batch
  ("B", chunk, microbatch)  its backward (input and weight gradients together)
  ("call", [(op, peer, label), ...])  op "send" or "recv"; label names the tensor:
        ("act", virtual stage, microbatch) enters virtual stage s; ("grad", s, mb) leaves s's input.

`check(plan, P)` replays the calls with rendezvous semantics (a call finishes when every op in it
has met its peer's op, in order per pair of ranks and direction) and returns the number of calls,
or raises on a deadlock, a label mismatch, or a compute step whose input never arrived.
"""


def _call(ops):
    return ("call", [op for op in ops if op is not None])


def plan_1f1b(P, M):
    """Non-interleaved 1F1B: one chunk per rank (virtual stage = rank)."""
    plans = []
    for r in range(P):
        first, last = r == 0, r == P - 1
        steps = []
        warmup = min(P - r - 1, M)
        remaining = M - warmup
        fwd = iter(range(M))
        bwd = iter(range(M))

        def recv_fwd(i):
            return None if first else ("recv", r - 1, ("act", r, i))

        def send_fwd(i):
            return None if last else ("send", r + 1, ("act", r + 1, i))

        def recv_bwd(i):
            return None if last else ("recv", r + 1, ("grad", r + 1, i))

        def send_bwd(i):
            return None if first else ("send", r - 1, ("grad", r, i))

        for _ in range(warmup):
            i = next(fwd)
            steps.append(_call([recv_fwd(i)]))
            steps.append(("F", 0, i))
            steps.append(_call([send_fwd(i)]))
        if remaining:
            i = next(fwd)
            steps.append(_call([recv_fwd(i)]))
        for k in range(remaining):
            steps.append(("F", 0, i))
            j = next(bwd)
            steps.append(_call([send_fwd(i), recv_bwd(j)]))
            steps.append(("B", 0, j))
            if k == remaining - 1:
                steps.append(_call([send_bwd(j)]))
            else:
                i = next(fwd)
                steps.append(_call([send_bwd(j), recv_fwd(i)]))
        for _ in range(warmup):
            j = next(bwd)
            steps.append(_call([recv_bwd(j)]))
            steps.append(("B", 0, j))
            steps.append(_call([send_bwd(j)]))
        plans.append([s for s in steps if s[0] != "call" or s[1]])
    return plans


def plan_deepspeed(P, M):
    """DeepSpeed's pipeline engine (deepspeed/runtime/pipe/schedule.py TrainSchedule, p2p.py): one
    chunk per rank; each stage alternates forward and backward steps, 2 (M + P - 1) in all, a step
    whose micro-batch is out of range computing nothing. A forward step sends the previous
    backward's gradient (SendGrad), then receives its input (RecvActivation); a backward step
    receives its output-grad (RecvGrad), then sends the previous forward's output
    (SendActivation). Each instruction is a blocking call of its own (ppsim's
    parallel.p2p_runtime: deepspeed, src/schedules/deepspeed_p2p.cc, written apart from this)."""
    def step_mb(t, r):
        if t % 2 == 0 and r % 2 == 0:
            return t // 2 - r // 2, True
        if t % 2 == 1 and r % 2 == 1:
            return (t - 1) // 2 - r // 2, True
        if t % 2 == 0:
            return t // 2 - P + (r + 1) // 2, False
        return (t - 1) // 2 - P + 1 + r // 2, False

    plans = []
    for r in range(P):
        steps, prev = [], -1
        ok = lambda i: 0 <= i < M  # noqa: E731
        for t in range(2 * (M + P - 1)):
            i, fwd = step_mb(t, r)
            if fwd:
                if ok(prev) and r > 0:
                    steps.append(_call([("send", r - 1, ("grad", r, prev))]))
                if ok(i) and r > 0:
                    steps.append(_call([("recv", r - 1, ("act", r, i))]))
            else:
                if ok(i) and r < P - 1:
                    steps.append(_call([("recv", r + 1, ("grad", r + 1, i))]))
                if ok(prev) and r < P - 1:
                    steps.append(_call([("send", r + 1, ("act", r + 1, prev))]))
            if ok(i):
                steps.append(("F" if fwd else "B", 0, i))
            prev = i
        plans.append(steps)
    return plans


def plan_interleaved(P, M, v):
    """Interleaved 1F1B: v chunks per rank, chunk c of rank r is virtual stage c * P + r; M a
    multiple of P (Megatron asserts it)."""
    if M % P:
        raise ValueError(f"interleaved 1F1B needs M ({M}) to be a multiple of P ({P})")
    total = M * v
    plans = []
    for r in range(P):
        steps = []

        def chunk(k, forward):
            c = (k % (P * v)) // P
            return c if forward else v - c - 1

        def mb(k):
            return (k // (P * v)) * P + k % P

        def vs(c):
            return c * P + r

        def send_next(c, k):  # the forward output of virtual stage vs(c)
            if vs(c) == P * v - 1:
                return None
            return ("send", (r + 1) % P, ("act", vs(c) + 1, mb(k)))

        def recv_prev(c, k):  # the forward input of virtual stage vs(c)
            if vs(c) == 0:
                return None
            return ("recv", (r - 1) % P, ("act", vs(c), mb(k)))

        def send_prev(c, k):  # the input grad of virtual stage vs(c)
            if vs(c) == 0:
                return None
            return ("send", (r - 1) % P, ("grad", vs(c), mb(k)))

        def recv_next(c, k):  # the output grad of virtual stage vs(c)
            if vs(c) == P * v - 1:
                return None
            return ("recv", (r + 1) % P, ("grad", vs(c) + 1, mb(k)))

        warmup = min((P - r - 1) * 2 + (v - 1) * P, total)
        all_warmup = warmup == total
        remaining = total - warmup
        steps.append(_call([recv_prev(0, 0)]))
        for k in range(warmup):
            c = chunk(k, True)
            steps.append(("F", c, mb(k)))
            ops = [send_next(c, k)]
            if k + 1 < total:
                ops.append(recv_prev(chunk(k + 1, True), k + 1))
            if k == warmup - 1 and not all_warmup:
                ops.append(recv_next(v - 1, 0))  # the first backward's output grad
            steps.append(_call(ops))
        for k in range(remaining):
            fk, bk = k + warmup, k
            fc, bc = chunk(fk, True), chunk(bk, False)
            steps.append(("F", fc, mb(fk)))
            steps.append(("B", bc, mb(bk)))
            ops = [send_next(fc, fk), send_prev(bc, bk)]
            if k < remaining - 1:
                ops.append(recv_prev(chunk(fk + 1, True), fk + 1))
            if bk + 1 < total:
                ops.append(recv_next(chunk(bk + 1, False), bk + 1))
            steps.append(_call(ops))
        if all_warmup:
            steps.append(_call([recv_next(v - 1, 0)]))
        for k in range(remaining, total):
            c = chunk(k, False)
            steps.append(("B", c, mb(k)))
            ops = [send_prev(c, k)]
            if k + 1 < total:
                ops.append(recv_next(chunk(k + 1, False), k + 1))
            steps.append(_call(ops))
        plans.append([s for s in steps if s[0] != "call" or s[1]])
    return plans


def parse_order(ranks):
    """A per-rank order as `ppsim show FAMILY --format json` writes it ("2I5": stage 2, input grad
    of micro-batch 5) as lists of (kind, microbatch), kind F, I (input grad) or W (weight grad)."""
    import re
    out = []
    for r, ops in enumerate(ranks):
        mine = []
        for op in ops:
            m = re.fullmatch(r"(\d+)([FIW])(\d+)", op)
            if not m or int(m.group(1)) != r:
                raise ValueError(f"rank {r}: {op!r} is not an F, I or W of stage {r} (one stage per rank)")
            mine.append((m.group(2), int(m.group(3))))
        out.append(mine)
    return out


def plan_zb(order, P, cost):
    """The Zero Bubble fork's runtime (its first commit, 425b42e5: auto_schedule.ilp_results and
    zb_schedules.ZeroBubbleScheduler) for a per-rank order of F, I and W (one stage per rank).
    ilp_results puts a SEND after every F (to the next stage) and every I (to the previous one) at
    the compute's completion time, and the matching RECV on the consumer at the same time; each
    rank's nodes are sorted by (start time, comm before compute, comm id). The runtime batches
    consecutive comm nodes into one batch_isend_irecv, flushed before a compute or right after a
    RECV the next compute consumes; a compute waits (on the GPU, not the host) for the batch of
    the receive it consumes. The times are a list schedule of the order with `cost` (kind -> time;
    the fork times its F, B, W at run time). Returns per rank a list of ("F" | "I" | "W", 0, mb)
    and ("post", [(op, peer, label), ...]) steps; labels as plan_1f1b's."""
    # list-schedule the order: F needs the previous stage's F, I the next stage's I, W its own I
    done = {}
    pos, free = [0] * P, [0.0] * P
    start = {}
    while any(pos[r] < len(order[r]) for r in range(P)):
        moved = False
        for r in range(P):
            while pos[r] < len(order[r]):
                k, i = order[r][pos[r]]
                dep = (("F", r - 1, i) if k == "F" and r > 0 else ("I", r + 1, i) if k == "I" and r < P - 1
                       else ("I", r, i) if k == "W" else None)
                if dep is not None and dep not in done:
                    break
                t0 = max(free[r], done.get(dep, 0.0))
                start[(k, r, i)] = t0
                free[r] = done[(k, r, i)] = t0 + cost[k]
                pos[r] += 1
                moved = True
        if not moved:
            raise ValueError(f"order deadlocks at {[order[r][pos[r]] if pos[r] < len(order[r]) else None for r in range(P)]}")
    nodes = [[] for _ in range(P)]  # (time, tie, step)
    big = 1 << 30
    for r in range(P):
        for k, i in order[r]:
            nodes[r].append((start[(k, r, i)], big, (k, 0, i)))
    comm_id = 0
    for r in range(P):
        for k, i in order[r]:
            t = done[(k, r, i)]
            if k == "F" and r < P - 1:
                nodes[r].append((t, comm_id, ("send", r + 1, ("act", r + 1, i))))
                nodes[r + 1].append((t, comm_id, ("recv", r, ("act", r + 1, i))))
                comm_id += 1
            if k == "I" and r > 0:
                nodes[r].append((t, comm_id, ("send", r - 1, ("grad", r, i))))
                nodes[r - 1].append((t, comm_id, ("recv", r, ("grad", r, i))))
                comm_id += 1
    plans = []
    for r in range(P):
        seq = [n[2] for n in sorted(nodes[r], key=lambda n: (n[0], n[1]))]
        steps, batch = [], []
        for idx, st in enumerate(seq):
            if st[0] in ("F", "I", "W"):
                steps.append(st)
                continue
            batch.append(st)
            nxt = seq[idx + 1] if idx + 1 < len(seq) else None
            nxt_compute = next((x for x in seq[idx + 1:] if x[0] in ("F", "I", "W")), None)
            consumed = (st[0] == "recv" and nxt_compute is not None and nxt_compute[2] == st[2][2] and
                        ((st[2][0] == "act" and nxt_compute[0] == "F") or (st[2][0] == "grad" and nxt_compute[0] == "I")))
            if nxt is None or nxt[0] in ("F", "I", "W") or consumed:
                steps.append(("post", batch))
                batch = []
        plans.append(steps)
    return plans


def check(plans, P, v=1):
    """Replays the plans with blocking calls; returns the number of calls. Raises ValueError on a
    deadlock, a mismatched label, or a compute step whose input has not arrived."""
    # the Zero Bubble runtime's batches ("post") meet their peers in order on each rank's NCCL
    # stream as blocking calls do; I is a backward (input grad), W needs its I
    plans = [[("call", st[1]) if st[0] == "post" else st for st in p] for p in plans]
    pos = [0] * P
    have = [set() for _ in range(P)]  # labels received (or local inputs) per rank
    fired = [set() for _ in range(P)]  # indices of ops of the current call that met their peer
    sent = [dict() for _ in range(P)]  # per rank: (peer, direction) -> ops matched so far
    calls = 0
    done_f = [set() for _ in range(P)]
    done_i = [set() for _ in range(P)]

    def runnable(r):
        nonlocal calls
        progressed = False
        while pos[r] < len(plans[r]) and plans[r][pos[r]][0] != "call":
            kind, c, i = plans[r][pos[r]]
            s = c * P + r
            if kind == "F":
                if s > 0 and ("act", s, i) not in have[r]:
                    raise ValueError(f"rank {r}: F of chunk {c} mb {i} before its input arrived")
                done_f[r].add((c, i))
            elif kind == "W":
                if (c, i) not in done_i[r]:
                    raise ValueError(f"rank {r}: W of chunk {c} mb {i} before its I")
            else:
                if (c, i) not in done_f[r]:
                    raise ValueError(f"rank {r}: {kind} of chunk {c} mb {i} before its F")
                if s < P * v - 1 and ("grad", s + 1, i) not in have[r]:
                    raise ValueError(f"rank {r}: {kind} of chunk {c} mb {i} before its output grad arrived")
                done_i[r].add((c, i))
            pos[r] += 1
            progressed = True
        return progressed

    while True:
        progressed = any([runnable(r) for r in range(P)])
        # match ops between ranks that sit at calls
        for r in range(P):
            if pos[r] >= len(plans[r]):
                continue
            ops = plans[r][pos[r]][1]
            for idx, (op, peer, label) in enumerate(ops):
                if op != "send" or idx in fired[r] or pos[peer] >= len(plans[peer]):
                    continue
                if plans[peer][pos[peer]][0] != "call":
                    continue
                # the peer's first unfired recv from r must carry the same label
                pops = plans[peer][pos[peer]][1]
                for j, (op2, peer2, label2) in enumerate(pops):
                    if op2 == "recv" and peer2 == r and j not in fired[peer]:
                        if label2 != label:
                            raise ValueError(f"rank {r} sends {label} to {peer}, which receives {label2}")
                        fired[r].add(idx)
                        fired[peer].add(j)
                        have[peer].add(label)
                        progressed = True
                        break
        for r in range(P):
            if pos[r] < len(plans[r]) and plans[r][pos[r]][0] == "call" and len(fired[r]) == len(plans[r][pos[r]][1]):
                pos[r] += 1
                fired[r] = set()
                calls += 1
                progressed = True
        if all(pos[r] >= len(plans[r]) for r in range(P)):
            return calls
        if not progressed:
            stuck = {r: plans[r][pos[r]] for r in range(P) if pos[r] < len(plans[r])}
            raise ValueError(f"deadlock: {stuck}")


def self_test():
    """Every plan for P in 2, 4, 8 passes the check; interleaved P=4 M=8 v=3 makes Megatron's
    37, 37, 35, 33 calls ([r > 0] + w + (Mv - w) + w - [r = 0], w = 2(P-1-r) + (v-1)P); and plans
    broken on purpose (two calls of a rank swapped, a receive dropped) are refused."""
    for P in (2, 4, 8):
        for M in (P, 2 * P, 3 * P):
            check(plan_1f1b(P, M), P)
            for v in (2, 3):
                check(plan_interleaved(P, M, v), P, v)
    P, M, v = 4, 8, 3
    calls = [sum(1 for st in p if st[0] == "call") for p in plan_interleaved(P, M, v)]
    want = [(r > 0) + (2 * (P - 1 - r) + (v - 1) * P) + M * v - (r == 0) for r in range(P)]
    if calls != want:
        raise SystemExit(f"interleaved calls per rank {calls}, Megatron's loop makes {want}")
    # DeepSpeed's TrainSchedule: 2M calls per neighbour, one transfer each, and 1F1B's compute order.
    for P_, M_ in ((2, 2), (4, 8), (5, 3), (8, 24)):
        ds, mg = plan_deepspeed(P_, M_), plan_1f1b(P_, M_)
        check(ds, P_)
        for r in range(P_):
            n = sum(1 for st in ds[r] if st[0] == "call")
            if n != 2 * M_ * ((r > 0) + (r < P_ - 1)):
                raise SystemExit(f"deepspeed P={P_} M={M_} rank {r}: {n} calls")
            if [st for st in ds[r] if st[0] != "call"] != [st for st in mg[r] if st[0] != "call"]:
                raise SystemExit(f"deepspeed P={P_} M={M_} rank {r}: not 1F1B's compute order")
    # The Zero Bubble runtime on ZB-H1 (P 4, M 8: `ppsim show zb-h1 -p 4 -m 8 --format json`):
    # the plan keeps each rank's order, passes the check, and a receive comes before its consumer.
    zb_h1 = [[f"{r}{op}" for op in ops.split()] for r, ops in enumerate([
        "F0 F1 F2 F3 I0 W0 F4 I1 W1 F5 I2 W2 F6 I3 W3 F7 I4 W4 I5 W5 I6 W6 I7 W7",
        "F0 F1 F2 I0 F3 I1 W0 F4 I2 W1 F5 I3 W2 F6 I4 W3 F7 I5 W4 I6 W5 I7 W6 W7",
        "F0 F1 I0 F2 I1 F3 I2 W0 F4 I3 W1 F5 I4 W2 F6 I5 W3 F7 I6 W4 I7 W5 W6 W7",
        "F0 I0 F1 I1 F2 I2 F3 I3 W0 F4 I4 W1 F5 I5 W2 F6 I6 W3 F7 I7 W4 W5 W6 W7"])]
    order = parse_order(zb_h1)
    for cost in ({"F": 1, "I": 1, "W": 1}, {"F": 1.0, "I": 1.3, "W": 0.7}):
        zb = plan_zb(order, 4, cost)
        check(zb, 4)
        for r in range(4):
            if [(st[0], st[2]) for st in zb[r] if st[0] != "post"] != order[r]:
                raise SystemExit(f"plan_zb rank {r}: not the order given")
            seen = set()
            for st in zb[r]:
                if st[0] == "post":
                    seen |= {op[2] for op in st[1] if op[0] == "recv"}
                elif st[0] == "F" and r > 0 and ("act", r, st[2]) not in seen:
                    raise SystemExit(f"plan_zb rank {r}: F{st[2]} before its receive is posted")
                elif st[0] == "I" and r < 3 and ("grad", r + 1, st[2]) not in seen:
                    raise SystemExit(f"plan_zb rank {r}: I{st[2]} before its receive is posted")
    try:
        plan_zb(parse_order([["0I0", "0F0"], ["1F0", "1I0"]]), 2, {"F": 1, "I": 1, "W": 1})
        raise SystemExit("plan_zb accepted an I before its F's output grad could exist")
    except ValueError:
        pass
    broken = []
    p = plan_1f1b(4, 8)
    idx = [i for i, st in enumerate(p[1]) if st[0] == "call"]
    p[1][idx[0]], p[1][idx[1]] = p[1][idx[1]], p[1][idx[0]]
    broken.append(("two calls of rank 1 swapped", p, 4, 1))
    p = plan_interleaved(4, 8, 2)
    i = next(i for i, st in enumerate(p[2]) if st[0] == "call" and any(op[0] == "recv" for op in st[1]))
    p[2][i] = ("call", [op for op in p[2][i][1] if op[0] != "recv"])
    broken.append(("a receive of rank 2 dropped", p, 4, 2))
    for what, plan, P_, v_ in broken:
        try:
            check(plan, P_, v_)
        except ValueError:
            continue
        raise SystemExit(f"check passed a broken plan: {what}")
    print("megatron_plan self-test: plans checked for P = 2, 4, 8; call counts as Megatron's; DeepSpeed's TrainSchedule "
          "checked; the Zero Bubble runtime on ZB-H1 checked; broken plans refused")
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(self_test())
