"""Per-call overhead of the cached call path: `xform.jit(f)` against calling `f` with numpy
directly (issue 2), and a cached `xform.grad(f)` on a float with and without the dependency
check that notices redefinitions (issue 5). Medians of round-robin samples.

`python -m bench.jit_overhead`
"""
import numpy as np

import xform
from bench.timing import compare, fmt, machine
from xform.cache import CACHE
from xform.dependencies import Dependencies


def tiny(x):
    return np.sin(x) * x + 1.0


def main():
    x_array = np.linspace(0.0, 1.0, 8)
    jitted = xform.jit(tiny)
    grad_tiny = xform.grad(tiny)
    jitted(x_array), jitted(0.5), grad_tiny(0.5)
    results = compare({
        "numpy f(x[8])": lambda: tiny(x_array),
        "jit(f)(x[8])": lambda: jitted(x_array),
        "numpy f(float)": lambda: tiny(0.5),
        "jit(f)(float)": lambda: jitted(0.5),
        "grad(f)(float)": lambda: grad_tiny(0.5),
    }, samples=21)
    entry = CACHE.lookup(grad_tiny.fun, next(k for _, k in CACHE._entries if k[0] == "grad"))
    check = compare({"dependency check": entry.dependencies.valid}, samples=21)
    valid = Dependencies.valid
    Dependencies.valid = lambda self: True  # the same call path with the check skipped
    try:
        unchecked = compare({"numpy f(float)": lambda: tiny(0.5),
                             "grad(f)(float)": lambda: grad_tiny(0.5)}, samples=21)
    finally:
        Dependencies.valid = valid
    print(f"machine: {machine()}")
    for name, seconds in results.items():
        print(f"{name:>16}: {fmt(seconds)}")
    print(f"jit/numpy on x[8]:   {results['jit(f)(x[8])'] / results['numpy f(x[8])']:.2f}x")
    print(f"jit/numpy on float:  {results['jit(f)(float)'] / results['numpy f(float)']:.2f}x")
    print(f"grad/numpy on float: {results['grad(f)(float)'] / results['numpy f(float)']:.2f}x "
          f"with the dependency check, "
          f"{unchecked['grad(f)(float)'] / unchecked['numpy f(float)']:.2f}x without; "
          f"the check itself: {fmt(check['dependency check'])} "
          f"({len(entry.dependencies)} bindings)")


if __name__ == "__main__":
    main()
