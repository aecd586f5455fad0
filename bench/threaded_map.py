"""threaded_map against vectorized numpy: gradient and primal of
`sum(tanh(x) * exp(-x*x) + sin(x))` over 2,000,000 float64 values, with 1, 2 and 4 threads,
medians of round-robin samples in one process.

`python -m bench.threaded_map [--samples 15] [--chunks]`
"""
from __future__ import annotations

import argparse

import numpy as np

import xform
from bench.timing import compare, fmt, machine
from xform.runtime.executors import DEFAULT_CHUNK_SIZE, default_num_threads

N = 2_000_000
THREADS = (1, 2, 4)


def f(x):
    return np.tanh(x) * np.exp(-x * x) + np.sin(x)


def threaded_loss(num_threads, chunk_size=None):
    def loss(v):
        return np.sum(xform.threaded_map(f, v, num_threads=num_threads, chunk_size=chunk_size))
    return loss


def vectorized_loss(v):
    return np.sum(f(v))


def candidates(x):
    """name -> zero-argument callable; the vectorized ones run on one thread (numpy's own)."""
    grad_vectorized = xform.grad(vectorized_loss)
    grads = {n: xform.grad(threaded_loss(n)) for n in THREADS}
    np.testing.assert_allclose(grads[2](x), grad_vectorized(x), rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(xform.threaded_map(f, x, num_threads=2), f(x))
    table = {"grad vectorized": lambda: grad_vectorized(x)}
    table.update({f"grad threaded_map {n}T": (lambda g=grads[n]: g(x)) for n in THREADS})
    table["primal vectorized"] = lambda: f(x)
    table.update({f"primal threaded_map {n}T":
                  (lambda n=n: xform.threaded_map(f, x, num_threads=n)) for n in THREADS})
    return table


def chunk_candidates(x):
    table = {}
    for chunk in (2048, 8192, 16384, 65536, 262144):
        grad = xform.grad(threaded_loss(2, chunk))
        table[f"grad 2T chunk {chunk}"] = lambda g=grad: g(x)
        table[f"primal 2T chunk {chunk}"] = (
            lambda c=chunk: xform.threaded_map(f, x, num_threads=2, chunk_size=c))
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--chunks", action="store_true", help="also sweep chunk_size")
    args = parser.parse_args()
    x = np.random.default_rng(0).standard_normal(N)
    print(machine())
    print(f"n = {N:,} float64, default_num_threads() = {default_num_threads()}, "
          f"chunk_size = {DEFAULT_CHUNK_SIZE}, {args.samples} samples (medians)")
    times = compare(candidates(x), samples=args.samples, target=0.2)
    for name, seconds in times.items():
        print(f"  {name:28s} {fmt(seconds)}")
    for kind in ("grad", "primal"):
        base = times[f"{kind} vectorized"]
        ratios = ", ".join(f"{n}T {base / times[f'{kind} threaded_map {n}T']:.2f}x"
                           for n in THREADS)
        scaling = times[f"{kind} threaded_map 1T"] / times[f"{kind} threaded_map 2T"]
        print(f"{kind}: vectorized / threaded_map = {ratios}; 1T / 2T = {scaling:.2f}")
    if args.chunks:
        for name, seconds in compare(chunk_candidates(x), samples=args.samples,
                                     target=0.2).items():
            print(f"  {name:28s} {fmt(seconds)}")


if __name__ == "__main__":
    main()
