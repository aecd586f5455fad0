"""Captured arrays indexed by traced values (xform/numpy/captured.py): a semi-Lagrangian march
whose departure cells change on every call (tests/test_captured_gather.py), its cached `jit`
and `grad` calls against eager numpy, with the number of stagings; and what the staged copies
cost a first call: `grad`'s first call of a function calling a helper 60 times, gathering from
a global table by `TABLE[idx]` (copies) or `np.take` (with and without the copies), in the
same run. Medians of samples.

`python -m bench.captured_gather`
"""
import time

import attrs
import numpy as np

import xform
from bench.timing import compare, fmt, machine
from tests.test_captured_gather import SPEEDS, U0, march
from xform.ir import execute
from xform.numpy import captured

TABLE = np.linspace(0.0, 1.0, 64)


def helper(u, k):
    return np.sin(u) * k + np.cos(u)


def body(x):
    y = x
    for _ in range(60):
        y = helper(y, 0.5) + np.tanh(y)
    return np.sum(y * TABLE[(x * 63).astype(int)])


def body_take(x):
    y = x
    for _ in range(60):
        y = helper(y, 0.5) + np.tanh(y)
    return np.sum(y * np.take(TABLE, (x * 63).astype(int)))


def _first_grad(function, copy, x) -> float:
    original = execute.runtime()
    execute.install(attrs.evolve(original, staged_copy=copy))
    try:
        xform.clear_cache()
        start = time.perf_counter()
        xform.grad(function)(x)
        return time.perf_counter() - start
    finally:
        execute.install(original)


def _as_it_is(function):
    return function, None


def main():
    staged, gradient = xform.jit(march), xform.grad(march, argnums=1)
    builds = xform.cache_info()["builds"]
    calls = iter(range(10**9))

    def speed():
        return SPEEDS[next(calls) % (len(SPEEDS) - 1)]   # other cells on every call
    results = compare({
        "numpy march": lambda: march(U0, speed()),
        "jit": lambda: staged(U0, speed()),
        "grad": lambda: gradient(U0, speed()),
    }, samples=15)
    print(f"machine: {machine()}")
    for name, seconds in results.items():
        print(f"{name:>24}: {fmt(seconds)}")
    print(f"stagings over all these calls: {xform.cache_info()['builds'] - builds}")

    x = np.linspace(0.0, 1.0, 8)
    cases = {"copies, TABLE[idx]": (body, captured.copy_for_staging),
             "copies, np.take": (body_take, captured.copy_for_staging),
             "no copies, np.take": (body_take, _as_it_is)}
    samples = {name: [] for name in cases}
    names = list(cases)
    for round_ in range(15):
        for name in names[round_ % 3:] + names[:round_ % 3]:    # each order in turn
            samples[name].append(_first_grad(*cases[name], x))
    first = {name: np.median(times) for name, times in samples.items()}
    print("\n".join(f"grad's first call, {name}: {fmt(seconds)}"
                    for name, seconds in first.items()))
    ratio = first["copies, np.take"] / first["no copies, np.take"]
    print(f"copies / no copies (np.take both): {ratio:.2f}")


if __name__ == "__main__":
    main()
