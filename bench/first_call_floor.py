"""The floor of a staged first call (issue 30, part 5): how fast a gradient's first call could
be if everything around its staging were free.

For each row, three candidates, timed on fresh functions, round-robin, medians:
- `xform`: `xform.grad(f)(x)`, the first call as it is (cache entry, dependency recording,
  the random-draw watch, paths, the algebraic and fusion passes, the first tier);
- `staging only`: the same function staged with this call's values (`stage_function`, inside
  the stand-ins' scope the first call uses) and its gradient computed from the staged values
  (`gradient_values`): no cache entry, nothing recorded, no pass. It is not a usable first
  call (its result could not be cached or replayed); it is a lower bound on any first call
  that stages;
- `autograd`: `autograd.grad(f)(x)`.

`python -m bench.first_call_floor [--samples N]` (OMP_NUM_THREADS=1 for one BLAS thread).
Rows: the bench rows whose first call is mostly fixed cost (bench/suite.py) and issue 30's
branchy and newton_sqrt (bench/values.py).
"""
from __future__ import annotations

import argparse
import statistics
import time
import types

import numpy as np

import xform
from bench import suite, values
from bench.timing import machine
from xform.api.dispatch import aval_of_signature, leaf_signatures
from xform.ir.builder import KnownValues, stage_function
from xform.ir.values import recording_decisions, staged_values
from xform.runtime.effects import Watch
from xform.transforms.vjp import gradient_values
from xform.tree import tree_flatten

SUITE_ROWS = ("sum_1000", "sum_sin_1000", "broadcast_sin_cos_exp", "tiny_scalar")


def _rows():
    """name -> (function of one argument for xform, the same for autograd, the argument)."""
    import autograd.numpy as anp
    table = {}
    rows = suite._rows(np.random.default_rng(0))
    for name in SUITE_ROWS:
        row, args, _, _ = rows[name]
        table[name] = (_bound(row, np), _bound(row, anp), args[0])
    table["branchy"] = (values.branchy, values.branchy, 1.5)
    table["newton_sqrt"] = (values.newton_sqrt, values.newton_sqrt, 2.0)
    return table


def _bound(row, xp):
    return lambda x: row(xp, x)


def _fresh(f):
    """A new function object of `f`'s code: nothing cached for it."""
    return types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__,
                              f.__closure__)


def staging_only(f, x):
    """`f`'s gradient at `x` by staging alone: the lower bound described above."""
    leaves, in_tree = tree_flatten((x,))
    avals = [aval_of_signature(s) for s in leaf_signatures(leaves, (x,), {})]
    with Watch(f), recording_decisions():    # (the watch: the stand-ins the staging needs)
        graph, _, _ = stage_function(f, in_tree, avals, KnownValues.of(leaves, perturbed=(0,)))
    return gradient_values(graph, leaves, live=(True,), wanted=(0,), kept=(),
                           known=staged_values(graph))[0]


def _timed(call):
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def measure(samples):
    import autograd
    print(f"{machine()}; medians of {samples} fresh functions per candidate, round-robin")
    print("| row | xform | staging only | autograd | xform / autograd | staging only / autograd |")
    print("|---|---|---|---|---|---|")
    for name, (f, f_autograd, x) in _rows().items():
        expected = autograd.grad(f_autograd)(x)
        assert np.allclose(staging_only(_fresh(f), x), expected)
        assert np.allclose(xform.grad(_fresh(f))(x), expected)
        candidates = {
            "xform": lambda: xform.grad(_fresh(f))(x),
            "staging": lambda: staging_only(_fresh(f), x),
            "autograd": lambda: autograd.grad(_fresh(f_autograd))(x),
        }
        for call in candidates.values():     # warm-up: a process's first first-calls run cold
            for _ in range(20):
                call()
        times = {key: [] for key in candidates}
        for _ in range(samples):
            for key, call in candidates.items():
                times[key].append(_timed(call))
        t = {key: statistics.median(v) for key, v in times.items()}
        print(f"| {name} | {t['xform'] * 1e6:.1f} us | {t['staging'] * 1e6:.1f} us | "
              f"{t['autograd'] * 1e6:.1f} us | {t['xform'] / t['autograd']:.2f}x | "
              f"{t['staging'] / t['autograd']:.2f}x |")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=301)
    measure(parser.parse_args().samples)


if __name__ == "__main__":
    main()
