"""Issue 30's figures: programs that decide on data and fill preallocated arrays.

    python -m bench.values [--samples 7]

Per call (medians of `--samples` runs, ratios within one run):
- `march` (a preallocated (T, n) array filled in a loop, T = 400) per gradient call, against the
  same program written with a list and np.stack: target <= 1.2x;
- a 1,000-step write loop under jit against eager numpy: target <= 3x;
- the three programs of the issue (branch, Newton's square root, march), each transform's
  steady call against numpy's and autograd's;
First calls: a new transform's first call (staging with values, then the values' run) against
autograd's first call, in this process after warm-up (bench/fresh_call.py: in fresh processes).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import xform
from bench.timing import compare


def branchy(a):
    if a > 0:
        return a * 3.0
    return a * 2.0


def newton_sqrt(a):
    x = a
    while abs(x * x - a) > 1e-12:
        x = 0.5 * (x + a / x)
    return x


def march(u0, T=400, dt=0.01):
    u = np.zeros((T, u0.size))
    u[0] = u0
    for t in range(T - 1):
        u[t + 1] = u[t] + dt * (-u[t] ** 3)
    return np.sum(u[-1])


def march_stacked(u0, T=400, dt=0.01):
    rows = [u0]
    for t in range(T - 1):
        rows.append(rows[t] + dt * (-rows[t] ** 3))
    u = np.stack(rows)
    return np.sum(u[-1])


def write_loop(x, steps=1000):
    out = np.zeros(steps)
    for i in range(steps):
        out[i] = x[i % x.size] * i
    return out


def _first_call(make, arg, repeats):
    """Median time of a fresh transform's first call (a new function object each time, as
    a fresh definition would be)."""
    times = []
    for _ in range(repeats):
        fn = make()
        start = time.perf_counter()
        fn(arg)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--first-calls", action="store_true", help="only the first calls")
    args = parser.parse_args(argv)
    samples = args.samples
    u0 = np.linspace(0.2, 1.0, 8)
    try:
        import autograd
    except ImportError:
        autograd = None
    rows = [("branchy", branchy, 1.5), ("newton_sqrt", newton_sqrt, 2.0), ("march", march, u0)]
    if not args.first_calls:
        _per_call(samples, u0, autograd, rows)
    _first_calls(samples, autograd, rows)


def _per_call(samples, u0, autograd, rows):
    print("per call (median of", samples, "runs)")
    g_fill, g_stack = xform.grad(march), xform.grad(march_stacked)
    g_fill(u0), g_fill(u0), g_stack(u0), g_stack(u0)
    times = compare({"fill": lambda: g_fill(u0), "stack": lambda: g_stack(u0)}, samples)
    t_fill, t_stack = times["fill"], times["stack"]
    print(f"  march T=400 grad: preallocated {t_fill * 1e3:.2f} ms, stacked "
          f"{t_stack * 1e3:.2f} ms, ratio {t_fill / t_stack:.2f} (target <= 1.2)")

    x = np.linspace(0.0, 1.0, 7)
    jitted = xform.jit(write_loop)
    jitted(x), jitted(x)
    times = compare({"jit": lambda: jitted(x), "eager": lambda: write_loop(x)}, samples)
    t_jit, t_eager = times["jit"], times["eager"]
    print(f"  1,000 writes under jit {t_jit * 1e3:.2f} ms, eager {t_eager * 1e3:.2f} ms, "
          f"ratio {t_jit / t_eager:.2f} (target <= 3)")

    for name, fn, arg in rows:
        grad = xform.grad(fn)
        grad(arg), grad(arg)
        candidates = {"grad": lambda: grad(arg), "primal": lambda: fn(arg)}
        if autograd is not None:
            agrad = autograd.grad(fn if name != "march" else march_stacked)
            candidates["autograd"] = lambda: agrad(arg)
        times = compare(candidates, samples)
        t_grad = times["grad"]
        line = (f"  {name}: grad {t_grad * 1e6:.1f} us = {t_grad / times['primal']:.2f}x "
                "the primal")
        if autograd is not None:
            line += (f", autograd {times['autograd'] * 1e6:.1f} us "
                     f"({times['autograd'] / t_grad:.1f}x xform)")
        print(line)


def _first_calls(samples, autograd, rows):
    print("first calls (medians of", samples, "rounds of 3 fresh transforms each, xform and "
          "autograd alternately, after warm-up)")
    for name, fn, arg in rows:
        def make(fn=fn):
            return xform.grad(lambda a: fn(a))
        reference = fn if name != "march" else march_stacked
        firsts, autos = [], []
        for _ in range(2):      # the libraries' and the interpreter's warm-up: dropped
            _first_call(make, arg, 5)
            if autograd is not None:
                _first_call(lambda: autograd.grad(lambda a: reference(a)), arg, 5)
        for _ in range(samples):    # round-robin: a drift of the machine's load reaches both
            firsts.append(_first_call(make, arg, 3))
            if autograd is not None:
                autos.append(_first_call(lambda: autograd.grad(lambda a: reference(a)), arg, 3))
        t_first = float(np.median(firsts))
        line = f"  {name}: xform {t_first * 1e3:.3f} ms"
        if autograd is not None:
            t_auto = float(np.median(autos))
            line += f", autograd {t_auto * 1e3:.3f} ms, ratio {t_first / t_auto:.2f}"
        print(line)


if __name__ == "__main__":
    main()
