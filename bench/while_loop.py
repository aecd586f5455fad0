"""Reverse mode through a `while_loop` of 1000 iterations of a small body, against its
forward pass (issue 4 target: at most 4x). Medians of round-robin samples, same run.

`python -m bench.while_loop`
"""
import numpy as np

import xform
from bench.timing import compare, fmt, machine


def loop(x, scale):
    def body(state):
        i, y = state
        return i + 1, np.sin(y) * scale + 0.01 * y
    return np.sum(xform.while_loop(lambda s: s[0] < 1000, body, (0, x))[1])


def main():
    x = np.linspace(0.1, 1.0, 4)
    forward = xform.jit(loop)
    backward = xform.grad(loop, argnums=(0, 1))
    forward(x, 0.9)
    backward(x, 0.9)
    times = compare({"forward": lambda: forward(x, 0.9), "grad": lambda: backward(x, 0.9)},
                    samples=11)
    print(f"machine: {machine()}")
    print(f"forward {fmt(times['forward'])}, grad {fmt(times['grad'])}, "
          f"ratio {times['grad'] / times['forward']:.2f}x")


if __name__ == "__main__":
    main()
