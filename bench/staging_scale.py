"""Stage + transform (grad) + optimize + compile time of a straight-line scalar program of n
equations, for n = 1k, 10k, 100k (issue 7: under 2 s at 10k, linear growth).

`python -m bench.staging_scale [n ...]`
"""
import sys
import time

import numpy as np

import xform
from bench.timing import machine


def chain(n):
    def f(x):
        y = x
        for i in range(n // 2):
            y = y * 1.0001 + 0.5 if i % 2 else np.sin(y) * 0.9
        return y
    return f


def main(sizes=(1_000, 10_000, 100_000)):
    print(f"machine: {machine()}")
    for n in sizes:
        f = chain(n)
        start = time.perf_counter()
        graph = xform.make_graph(f)(np.float64(0.3))
        staged = time.perf_counter()
        value = xform.grad(f)(np.float64(0.3))
        done = time.perf_counter()
        print(f"n={len(graph.equations):>7} equations: staging {staged - start:.2f} s, "
              f"stage+grad+optimize+compile {done - staged:.2f} s "
              f"({(done - staged) / len(graph.equations) * 1e6:.0f} us/equation); "
              f"grad = {value:.6g}")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or (1_000, 10_000))
