"""Per-call overhead of `xform.jit(f)` against calling `f` with numpy directly (issue 2) and of
a cached `xform.grad(f)` on a float (issue 5): medians and ratios, same run."""
import numpy as np

import xform
from bench.timing import compare, fmt, machine


def tiny(x):
    return np.sin(x) * x + 1.0


def main():
    x_array = np.linspace(0.0, 1.0, 8)
    jitted = xform.jit(tiny)
    grad_tiny = xform.grad(tiny)
    x_float = 0.5
    results = compare({
        "numpy f(x[8])": lambda: tiny(x_array),
        "jit(f)(x[8])": lambda: jitted(x_array),
        "numpy f(float)": lambda: tiny(x_float),
        "jit(f)(float)": lambda: jitted(x_float),
        "grad(f)(float)": lambda: grad_tiny(x_float),
    })
    print(f"machine: {machine()}")
    for name, seconds in results.items():
        print(f"{name:>16}: {fmt(seconds)}")
    print(f"jit/numpy on x[8]:  {results['jit(f)(x[8])'] / results['numpy f(x[8])']:.2f}x")
    print(f"jit/numpy on float: {results['jit(f)(float)'] / results['numpy f(float)']:.2f}x")
    print(f"grad/numpy on float: {results['grad(f)(float)'] / results['numpy f(float)']:.2f}x")


if __name__ == "__main__":
    main()
