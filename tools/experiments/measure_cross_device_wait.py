#!/usr/bin/env python3
"""Does anything of the replay's receive path slow the receiving GPU's compute? (docs/VALIDATION.md,
"Two GPUs: the receive path": on two GPUs of one process, ops ran 10-15% longer than profiled while messages
arrived into their GPU.) On two GPUs, GPU 0 runs a loop of bf16 GEMMs on its main stream, timed
with CUDA events, beside each of:

  alone          nothing else
  pending wait   a second stream of GPU 0 waits on an event of GPU 1 that GPU 1 records only
                 after a long sleep kernel (a cross-device event wait left pending, as the
                 replay's comm stream holds one for the next message)
  same-GPU wait  the control: the second stream waits on an event of a third stream of GPU 0,
                 recorded after a long sleep kernel there (one block of one SM)
  value wait     the second stream waits with a stream memory operation (cuStreamWaitValue32,
                 through libcuda) for a word in pinned host memory that the host sets only after
                 the GEMMs: a pending wait on a flag instead of on another device's event
  incoming push  GPU 1's stream copies 2 MiB into GPU 0's memory again and again (its copy
                 engine, the replay's peer path), with a short sleep between copies
  incoming pull  the same copies issued on a second stream of GPU 0

and prints each one's GEMM time against alone (median of 5 rounds of 50 GEMMs).
Usage: python3 tools/experiments/measure_cross_device_wait.py [--n 4096] [--json out.json]
"""
import argparse
import json
import statistics
import sys

from cuda_timing import cuda_torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4096, help="GEMM size n x n x n")
    ap.add_argument("--json")
    a = ap.parse_args()
    torch = cuda_torch("measure_cross_device_wait")
    if torch is None:
        return 0
    if torch.cuda.device_count() < 2:
        print("SKIP measure_cross_device_wait: needs two GPUs", file=sys.stderr)
        return 0
    d0, d1 = torch.device("cuda:0"), torch.device("cuda:1")
    x = torch.randn(a.n, a.n, device=d0, dtype=torch.bfloat16)
    y = torch.randn(a.n, a.n, device=d0, dtype=torch.bfloat16)
    main_s, side0 = torch.cuda.Stream(d0), torch.cuda.Stream(d0)
    s1 = torch.cuda.Stream(d1)
    msg = 1 << 20  # bf16 elements: 2 MiB, the replay's message at the small configs
    dst0 = torch.empty(msg, device=d0, dtype=torch.bfloat16)
    src1 = torch.randn(msg, device=d1, dtype=torch.bfloat16)

    def gemms(k=50):
        with torch.cuda.device(d0), torch.cuda.stream(main_s):
            st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            st.record(main_s)
            for _ in range(k):
                torch.mm(x, y)
            en.record(main_s)
        en.synchronize()
        return st.elapsed_time(en) / k

    def settle():
        torch.cuda.synchronize(d0)
        torch.cuda.synchronize(d1)

    def alone():
        return gemms()

    third0 = torch.cuda.Stream(d0)

    def event_wait(dev, stream):
        """GPU 0's second stream waits on an event that `stream` (of `dev`) records after a long
        sleep kernel; the GEMMs run while that wait is pending."""
        ev = torch.cuda.Event()
        with torch.cuda.device(dev), torch.cuda.stream(stream):
            torch.cuda._sleep(400_000_000)  # about 0.2 s of GPU cycles
            ev.record(stream)
        side0.wait_event(ev)
        with torch.cuda.device(d0), torch.cuda.stream(side0):
            dst0.add_(0)  # something behind the wait, as the replay's arrived event
        t = gemms()
        settle()
        return t

    import ctypes
    try:
        cu = ctypes.CDLL("libcuda.so.1")
        wait_value = cu.cuStreamWaitValue32_v2
        wait_value.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
        wait_value.restype = ctypes.c_int
    except (OSError, AttributeError) as e:
        wait_value = None
        print(f"value wait: skipped ({e})", file=sys.stderr)
    flag = torch.zeros(1, dtype=torch.int32, pin_memory=True)
    generation = [0]

    def value_wait():
        generation[0] += 1
        # CU_STREAM_WAIT_VALUE_GEQ = 0: until the word is at least this round's number
        rc = wait_value(ctypes.c_void_p(side0.cuda_stream), ctypes.c_uint64(flag.data_ptr()), generation[0], 0)
        if rc != 0:
            raise RuntimeError(f"cuStreamWaitValue32 returned {rc}")
        with torch.cuda.device(d0), torch.cuda.stream(side0):
            dst0.add_(0)
        t = gemms()
        flag[0] = generation[0]  # the host releases the wait
        settle()
        return t

    def incoming(pull):
        s = side0 if pull else s1
        dev = d0 if pull else d1
        with torch.cuda.device(dev), torch.cuda.stream(s):
            for _ in range(400):
                dst0.copy_(src1, non_blocking=True)
                torch.cuda._sleep(100_000)  # ~50 us between messages
        t = gemms()
        settle()
        return t

    cases = [("alone", alone), ("pending wait", lambda: event_wait(d1, s1)),
             ("same-GPU wait", lambda: event_wait(d0, third0)),
             ("incoming push", lambda: incoming(False)), ("incoming pull", lambda: incoming(True))]
    if wait_value is not None:
        cases.append(("value wait", value_wait))
    gemms()
    settle()
    out = {"device": torch.cuda.get_device_name(0), "n": a.n, "ms": {}}
    for name, fn in cases:
        fn()
        settle()
        out["ms"][name] = statistics.median(fn() for _ in range(5))
    base = out["ms"]["alone"]
    print(f"{out['device']} x2, torch {torch.__version__}: bf16 GEMM {a.n}^3 on GPU 0, ms per GEMM (median of 5 x 50)")
    for name, _ in cases:
        print(f"  {name:14s} {out['ms'][name]:.4f}  x{out['ms'][name] / base:.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
