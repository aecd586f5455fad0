"""Per-call overhead of the cached call path: `xform.jit(f)` against calling `f` with numpy
directly (issue 2), and a cached `xform.grad(f)` on a float with and without the dependency
check that notices redefinitions (issue 5). Medians of round-robin samples.

The generated code alone is also timed under both scalar-math policies (xform.config
scalar_math: "exact", the default, and "fast", which may use `math` functions), in one
round-robin run.

`python -m bench.jit_overhead`
"""
import numpy as np

import xform
from bench.timing import compare, fmt, machine


def tiny(x):
    return np.sin(x) * x + 1.0


def _float_entry(transformed):
    """The cache entry the cached call path of `transformed` finds for one Python float."""
    return transformed._entries[float]


def main():
    x_array = np.linspace(0.0, 1.0, 8)
    jitted = xform.jit(tiny)
    grad_tiny = xform.grad(tiny)
    jitted(x_array), jitted(0.5), grad_tiny(0.5)
    # The entries the cached call path found: their generated code, timed alone, splits each
    # call into the code's own time and the call path's overhead.
    jit_entry, grad_entry = _float_entry(jitted), _float_entry(grad_tiny)
    jit_code, grad_code = jit_entry.value[0], grad_entry.value[0]
    results = compare({
        "numpy f(x[8])": lambda: tiny(x_array),
        "jit(f)(x[8])": lambda: jitted(x_array),
        "numpy f(float)": lambda: tiny(0.5),
        "jit(f)(float)": lambda: jitted(0.5),
        "jit code alone": lambda: jit_code(0.5),
        "grad(f)(float)": lambda: grad_tiny(0.5),
        "grad code alone": lambda: grad_code(0.5),
    }, samples=21)
    check = compare({"dependency check": grad_entry.dependencies.valid}, samples=21)
    valid = grad_entry.valid
    grad_entry.valid = lambda: True  # the same call path with the check skipped
    try:
        unchecked = compare({"numpy f(float)": lambda: tiny(0.5),
                             "grad(f)(float)": lambda: grad_tiny(0.5)}, samples=21)
    finally:
        grad_entry.valid = valid
    print(f"machine: {machine()}")
    for name, seconds in results.items():
        print(f"{name:>16}: {fmt(seconds)}")
    print(f"jit/numpy on x[8]:   {results['jit(f)(x[8])'] / results['numpy f(x[8])']:.2f}x")
    print(f"jit/numpy on float:  {results['jit(f)(float)'] / results['numpy f(float)']:.2f}x")
    print(f"grad/numpy on float: {results['grad(f)(float)'] / results['numpy f(float)']:.2f}x "
          f"with the dependency check, "
          f"{unchecked['grad(f)(float)'] / unchecked['numpy f(float)']:.2f}x without; "
          f"the check itself: {fmt(check['dependency check'])} "
          f"({len(grad_entry.dependencies)} bindings)")
    print("call path overhead (call minus its code alone): "
          f"jit {fmt(results['jit(f)(float)'] - results['jit code alone'])}, "
          f"grad {fmt(results['grad(f)(float)'] - results['grad code alone'])}")
    compare_policies(grad_tiny, results['grad(f)(float)'] - results['grad code alone'])


def compare_policies(grad_tiny, overhead):
    """grad's generated code under each scalar-math policy, with numpy f, in one run; the call
    path costs the same under both, so a call costs its code plus `overhead`."""
    policy = xform.config.scalar_math
    codes = {}
    try:
        for name in ("exact", "fast"):
            xform.config.update("scalar_math", name)     # clears the cache: rebuilt below
            grad_tiny(0.5)
            codes[name] = _float_entry(grad_tiny).value[0]
    finally:
        xform.config.update("scalar_math", policy)
    times = compare({"numpy f(float)": lambda: tiny(0.5),
                     **{f"grad code ({name})": (lambda c=code: c(0.5))
                        for name, code in codes.items()}}, samples=21)
    for name in codes:
        code = times[f"grad code ({name})"]
        print(f"scalar_math={name!r}: grad code {fmt(code)}, a call ~{fmt(code + overhead)}, "
              f"grad/numpy ~{(code + overhead) / times['numpy f(float)']:.2f}x")


if __name__ == "__main__":
    main()
