"""First gradient calls counted in machine instructions, xform against autograd: the same rows
as bench/first_call.py, each first call of a fresh function run under valgrind's callgrind,
which counts the instructions executed. Unlike a timing, the count is the same from run to
run and whatever else the machine is doing, so small changes show and a loaded machine
measures the same as an idle one; the ratio of counts tracks the ratio of times closely on
these Python-heavy calls (within a few percent where both were measured, bench/FIRSTCALL.md).

Only the measured calls are counted: they run inside functools.reduce, and callgrind collects
only inside that C function (--collect-atstart=no --toggle-collect=functools_reduce), so the
imports and warm-up calls are left out. Needs valgrind on the PATH.

`python -m bench.instructions [--rows a,b] [--samples N] [--markdown PATH]`
"""
from __future__ import annotations

import argparse
import functools
import os
import re
import subprocess
import sys

from bench.timing import report

FAST_ROWS_SAMPLES = 100    # sub-millisecond rows: counted over this many first calls
SLOW_ROW_CALLS = {"_sum_1000": 3, "_sum_sin_1000": 2, "large_single_block": 5,
                  "naive_map_sin_cos_exp": 5, "map_sin_cos_exp": 5, "relax_800": 1}


def _inner(row_name: str, candidate: str, samples: int) -> None:
    """Under callgrind: warm up, then `samples` first calls of fresh functions inside
    functools.reduce (the only code counted)."""
    import numpy as np

    from bench import first_call
    row, args, nums = first_call.rows()[row_name]
    row(np, *args)
    if candidate == "autograd":
        import autograd
        import autograd.numpy as anp

        def first(_acc, _i):
            autograd.grad(lambda *a: row(anp, *a), nums)(*args)
    else:
        import xform

        def first(_acc, _i):
            xform.grad(lambda *a: row(np, *a), nums)(*args)
    for _ in range(5):      # once-per-process costs (imports, first use of each rule)
        first(None, None)
    functools.reduce(first, range(samples), None)


def count(row_name: str, candidate: str, samples: int) -> float:
    """Instructions per first call of `candidate` ("xform" or "autograd") on `row_name`."""
    command = ["valgrind", "--tool=callgrind", "--collect-atstart=no",
               "--toggle-collect=functools_reduce", "--callgrind-out-file=/dev/null",
               sys.executable, "-m", "bench.instructions", "--inner", row_name, candidate,
               str(samples)]
    env = {**os.environ, "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from callgrind:\n{done.stderr[-2000:]}")
    return int(found.group(1)) / samples


def run(only=None, samples=FAST_ROWS_SAMPLES):
    from bench import first_call
    results = []
    for name in first_call.rows():
        if only and name not in only:
            continue
        n = SLOW_ROW_CALLS.get(name, samples)
        try:
            autograd = count(name, "autograd", n)
        except subprocess.CalledProcessError:   # a row autograd cannot differentiate
            autograd = None
        xform = count(name, "xform", n)
        results.append((name, xform, autograd))
        ratio = f"{xform / autograd:.2f}" if autograd else "n/a"
        print(f"{name:24s} xform {xform / 1e3:10.0f}k  autograd "
              f"{(autograd or 0) / 1e3:10.0f}k  ratio {ratio}", flush=True)
    return results


def markdown(results) -> str:
    lines = ["| row | xform (instructions per first call) | autograd | xform / autograd |",
             "|---|---|---|---|"]
    for name, xform, autograd in results:
        ratio = f"{xform / autograd:.2f}" if autograd else "n/a (autograd cannot)"
        lines.append(f"| {name} | {xform / 1e3:,.0f}k | "
                     f"{f'{autograd / 1e3:,.0f}k' if autograd else 'n/a'} | {ratio} |")
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--inner":
        _inner(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", default="")
    parser.add_argument("--samples", type=int, default=FAST_ROWS_SAMPLES)
    parser.add_argument("--markdown", default="")
    options = parser.parse_args()
    results = run([r for r in options.rows.split(",") if r], options.samples)
    report(markdown(results), options.markdown)


if __name__ == "__main__":
    main()
