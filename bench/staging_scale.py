"""Staging cost against program size: per-equation time of each phase of a first gradient
call (stage, transform = fusion + reverse mode, passes, codegen) for straight-line scalar
code and for array programs written as a new user would (rolls, where, indexing, reductions
in a Python loop), from 1k to 100k equations. Linear staging shows a flat us/equation column.

`python -m bench.staging_scale [--sizes 1000,10000,100000] [--programs scalar,relax,...]`
"""
import argparse
import time

import numpy as np

import xform
from bench.timing import machine
from xform.api.pipeline import finish_graph, fuse_if_enabled
from xform.codegen import compile_graph
from xform.transforms.vjp import vjp_graph


def scalar(steps):
    def f(x):
        y = x
        for i in range(steps):
            y = y * 1.0001 + 0.5 if i % 2 else np.sin(y) * 0.9
        return y
    return f, np.float64(0.3)


def relax(steps):
    """The grid relaxation of issue 17: rolls and element-wise updates."""
    def f(occ):
        p, o = np.ones_like(occ), 1 - occ
        for _ in range(steps):
            num = np.roll(p, 1, 0) * np.roll(o, 1, 0) + np.roll(p, -1, 1) * np.roll(o, -1, 1)
            p = p * o + (1 - o) * num / 2.0
        return np.sum(p ** 2)
    return f, np.full((8, 8), 0.1)


def where_index_reduce(steps):
    """where, indexing, reductions and a transcendental function in a loop."""
    def f(x):
        acc = x
        for i in range(steps):
            acc = np.where(acc > 0.5, np.tanh(acc), acc * 1.1)
            acc = acc + acc[i % 4] * 0.01 - np.mean(acc, axis=0) * 0.1
        return np.sum(acc)
    return f, np.linspace(0.1, 0.9, 32).reshape(4, 8)


PROGRAMS = {"scalar": (scalar, 2.0), "relax": (relax, 16.0),
            "where_index_reduce": (where_index_reduce, 12.0)}


def phases(f, x) -> tuple:
    """(equations staged, seconds per phase) of one gradient build."""
    t0 = time.perf_counter()
    graph = xform.make_graph(f)(x)
    t1 = time.perf_counter()
    grad_graph = vjp_graph(fuse_if_enabled(graph), (True,), [0], (), seed_ones=True,
                           adopt=True)
    t2 = time.perf_counter()
    finished = finish_graph(grad_graph, fuse=True)
    t3 = time.perf_counter()
    compiled = compile_graph(finished)
    t4 = time.perf_counter()
    compiled(x)
    return len(graph.equations), (t1 - t0, t2 - t1, t3 - t2, t4 - t3)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--programs", default=",".join(PROGRAMS))
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    print(f"machine: {machine()} (loaded: medians of {options.repeats} builds)")
    print("| program | equations | stage | transform | passes | codegen | total us/equation |")
    print("|---|---|---|---|---|---|---|")
    for name in options.programs.split(","):
        make, equations_per_step = PROGRAMS[name]
        for size in (int(s) for s in options.sizes.split(",")):
            f, x = make(max(1, int(size / equations_per_step)))
            runs = [phases(f, x) for _ in range(options.repeats)]
            n = runs[0][0]
            medians = [float(np.median([r[1][k] for r in runs])) for k in range(4)]
            cells = " | ".join(f"{m / n * 1e6:.0f} us" for m in medians)
            print(f"| {name} | {n} | {cells} | {sum(medians) / n * 1e6:.0f} |", flush=True)


if __name__ == "__main__":
    main()
