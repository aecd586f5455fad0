"""Peak memory of reverse mode on `sum(sin(cos(exp(x))) * x)`, n = 10^7 float64, with and
without fusion. Each case runs in its own subprocess, so one case's arrays never lower the
next one's peak; the peak is tracemalloc's (numpy reports its buffers to it) during one
gradient call, above what was allocated before it (x itself).

"fused, one block" runs each region on whole arrays (no blocking), to separate what the NDual
residuals save from what blocked evaluation saves.

`python -m bench.ndual_memory [n]`
"""
from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc

import numpy as np

CASES = ("xform.grad", "tape", "fused", "fused, one block")


def f(x):
    return np.sum(np.sin(np.cos(np.exp(x))) * x)


def measure(case: str, n: int) -> dict:
    import xform
    from bench.ndual_sweep import reverse
    from xform.rules import elementwise
    if case == "fused, one block":
        elementwise.BLOCK = n  # the whole region at once: NDual's residuals alone
    x = np.random.default_rng(0).uniform(0.1, 1.0, n)
    if case == "xform.grad":
        grad = xform.grad(f)

        def run():
            return grad(x)
    else:
        run = reverse(f, [x], fusion=case != "tape")
    run()  # stage, transform and compile outside the measurement
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    run()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return {"case": case, "n": n, "peak_bytes": peak}


def main(argv=()):
    if argv and argv[0] == "--case":
        print(json.dumps(measure(argv[1], int(argv[2]))))
        return
    n = int(argv[0]) if argv else 10 ** 7
    array = 8 * n
    results = {}
    for case in CASES:
        out = subprocess.run([sys.executable, "-m", "bench.ndual_memory", "--case", case,
                              str(n)], capture_output=True, text=True, check=True)
        results[case] = json.loads(out.stdout.splitlines()[-1])["peak_bytes"]
    print(f"n = {n} (one array: {array / 1e6:.0f} MB)\n")
    print("| reverse mode | peak above inputs | arrays of n |")
    print("|---|---|---|")
    for case, peak in results.items():
        print(f"| {case} | {peak / 1e6:.0f} MB | {peak / array:.2f} |")
    print(f"\nfused / tape: {results['fused'] / results['tape']:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
