"""Peak memory and time of `grad` of a long scan whose body makes a large intermediate, with
and without a checkpointed body (issue 16 target: >= 10x less peak memory, time <= 1.5x).

The body: a carry of 1,000 floats, an intermediate `tanh(outer(c, w) * s)` of `elements`
floats, and the carry's update from it. Without checkpoint, reverse mode stacks the body's
residuals (intermediates of `elements` floats) for every step; with `xform.checkpoint(body)`
it stacks one carry per step and recomputes the body in the backward pass.

Each case runs in its own subprocess: peak is tracemalloc's (numpy reports its buffers to
it) during one gradient call, above what was allocated before it; time is the median of
`repeats` calls without tracemalloc.

`python -m bench.checkpoint_memory [steps elements [cases...]]`
(default: the table of bench/CHECKPOINT.md; the plain case at 1,000 steps of 1,000,000
elements would need about 48 GB, so it is measured at fewer steps: its peak grows linearly
with the steps)
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
import tracemalloc

import numpy as np

CARRY = 1000
CASES = ("plain", "checkpoint", "checkpoint, dots_saveable")


def loss_function(case: str, steps: int, elements: int):
    import xform
    columns = max(elements // CARRY, 1)
    w = np.linspace(0.0, 0.5, columns)
    v = np.linspace(-1.0, 1.0, columns) / columns
    xs = np.linspace(0.5, 1.0, steps)

    def step(c, s):
        h = np.tanh(np.outer(c, w) * s)
        return c + 0.1 * (h @ v), None

    if case == "checkpoint":
        step = xform.checkpoint(step)
    elif case == "checkpoint, dots_saveable":
        step = xform.checkpoint(step, policy=xform.checkpoint_policies.dots_saveable)

    def loss(c):
        return np.sum(xform.scan(step, c, xs)[0])
    return xform.grad(loss)


def measure(case: str, steps: int, elements: int, repeats: int = 3) -> dict:
    grad = loss_function(case, steps, elements)
    c = np.linspace(-1.0, 1.0, CARRY)
    result = grad(c)   # stage, transform and compile outside the measurement
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        grad(c)
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    grad(c)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return {"case": case, "steps": steps, "elements": elements, "peak_bytes": peak,
            "seconds": statistics.median(times), "checksum": float(np.sum(result))}


def run_case(case: str, steps: int, elements: int) -> dict:
    out = subprocess.run([sys.executable, "-m", "bench.checkpoint_memory", "--case", case,
                          str(steps), str(elements)], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.splitlines()[-1])


def table(configs) -> None:
    print("| steps | body elements | case | peak above inputs | time (median) |")
    print("|---|---|---|---|---|")
    for steps, elements, cases in configs:
        results = {case: run_case(case, steps, elements) for case in cases}
        plain = results.get("plain")
        for case, r in results.items():
            ratio = ""
            if plain is not None and case != "plain":
                assert np.isclose(r["checksum"], plain["checksum"], rtol=1e-9)
                ratio = (f" ({plain['peak_bytes'] / r['peak_bytes']:.0f}x less;"
                         f" time {r['seconds'] / plain['seconds']:.2f}x)")
            print(f"| {steps:,} | {elements:,} | {case} | {r['peak_bytes'] / 1e6:,.1f} MB"
                  f"{ratio} | {r['seconds']:.2f} s |", flush=True)


def main(argv=()):
    if argv and argv[0] == "--case":
        print(json.dumps(measure(argv[1], int(argv[2]), int(argv[3]))))
        return
    if argv:
        table([(int(argv[0]), int(argv[1]), tuple(argv[2:]) or CASES)])
        return
    from bench.timing import machine
    print(f"machine: {machine()}\n")
    table([(1000, 10_000, CASES), (200, 100_000, CASES), (20, 1_000_000, CASES),
           (1000, 1_000_000, CASES[1:])])


if __name__ == "__main__":
    main(sys.argv[1:])
