"""Forward-over-reverse Hessians through `while_loop` against the same function written as a
Python loop (staged, unrolled): `xform.hessian` (jacfwd of grad) and a Hessian-vector product
(jvp of grad). Medians of round-robin samples, same run.

Through while_loop the Hessian is one while_loop_grad over the loop carrying the tangents of
all n directions at once (its batch rule), not one loop per direction.

`python -m bench.while_hessian [n] [iterations]`
"""
import sys

import numpy as np

import xform
from bench.timing import compare, fmt, machine


def body(y):
    return np.sin(y) * 0.9 + 0.05 * y * y


def with_while(x, iterations):
    state = xform.while_loop(lambda s: s[0] < iterations, lambda s: (s[0] + 1, body(s[1])),
                             (0, x))
    return np.sum(state[1] * state[1])


def with_python_loop(x, iterations):
    y = x
    for _ in range(iterations):
        y = body(y)
    return np.sum(y * y)


def main(argv=()):
    n = int(argv[0]) if argv else 10
    iterations = int(argv[1]) if len(argv) > 1 else 100
    x = np.linspace(0.1, 1.0, n)
    v = np.linspace(-1.0, 1.0, n)
    candidates = {}
    for name, fun in (("while_loop", with_while), ("python loop", with_python_loop)):
        # jit: the cached call path (a bare hessian stages its inner transforms per call).
        hessian = xform.jit(xform.hessian(lambda x, fun=fun: fun(x, iterations)))
        grad = xform.grad(lambda x, fun=fun: fun(x, iterations))
        hvp = xform.jit(lambda x, v, grad=grad: xform.jvp(grad, (x,), (v,))[1])
        candidates[f"hessian, {name}"] = lambda h=hessian: h(x)
        candidates[f"hvp, {name}"] = lambda h=hvp: h(x, v)
    reference = xform.hessian(lambda x: with_python_loop(x, iterations))(x)
    np.testing.assert_allclose(xform.hessian(lambda x: with_while(x, iterations))(x),
                               reference, rtol=1e-9, atol=1e-12)
    times = compare(candidates, samples=11)
    print(f"machine: {machine()}")
    print(f"n = {n}, {iterations} iterations\n")
    print("| | while_loop | Python loop (unrolled) | ratio |")
    print("|---|---|---|---|")
    for kind in ("hessian", "hvp"):
        a, b = times[f"{kind}, while_loop"], times[f"{kind}, python loop"]
        print(f"| {kind} | {fmt(a)} | {fmt(b)} | {a / b:.2f}x |")


if __name__ == "__main__":
    main(sys.argv[1:])
