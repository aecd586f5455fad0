"""Staging cost against program size: per-equation time of each phase of a first gradient
call for straight-line scalar code and for array programs written as a new user would
(rolls, where, indexing, reductions in a Python loop), from 1k to 100k equations. Phases:
stage (make_graph), simplify, fuse (before reverse mode), reverse (vjp_graph), the passes of
`finish_graph` as its `optimize` runs them (inside sub-graphs once, then each pass on the
graph; then fusion after reverse mode), codegen (graph_source), compile (Python's compile
and exec). Linear staging shows a flat us/equation column.

`python -m bench.staging_scale [--sizes 1000,10000,100000] [--programs scalar,relax,...]`
"""
import argparse
import gc
import time

import numpy as np

import xform
from bench.timing import machine
from xform.codegen.emit import _define, graph_source
from xform.passes import optimize, pipeline_for
from xform.passes.fuse import fuse_elementwise
from xform.passes.nested import optimize_subgraphs
from xform.passes.simplify import simplify
from xform.runtime.config import config
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


def _laplacian(a):
    return np.roll(a, 1, 0) + np.roll(a, -1, 0) + np.roll(a, 1, 1) + np.roll(a, -1, 1) - 4 * a


def fluid(steps):
    """A small fluid step on a 32x32 grid, as issue 17's: diffusion, a divergence, Jacobi
    iterations for the pressure, its gradient, walls by `where`, advection of a density."""
    wall = np.zeros((32, 32), bool)
    wall[0], wall[-1], wall[:, 0], wall[:, -1] = True, True, True, True

    def f(u0):
        u, v, d = u0, u0.T * 0.5, np.ones_like(u0)
        for _ in range(steps):
            u, v = u + 0.1 * _laplacian(u), v + 0.1 * _laplacian(v)
            div = 0.5 * (np.roll(u, -1, 1) - np.roll(u, 1, 1)
                         + np.roll(v, -1, 0) - np.roll(v, 1, 0))
            p = np.zeros_like(div)
            for _ in range(3):
                p = (_laplacian(p) + 4 * p - div) / 4
            u = np.where(wall, 0.0, u - 0.5 * (np.roll(p, -1, 1) - np.roll(p, 1, 1)))
            v = np.where(wall, 0.0, v - 0.5 * (np.roll(p, -1, 0) - np.roll(p, 1, 0)))
            d = d - 0.1 * (u * (np.roll(d, -1, 1) - np.roll(d, 1, 1))
                           + v * (np.roll(d, -1, 0) - np.roll(d, 1, 0)))
            d = d / np.max(d[1:-1, 1:-1])
        return np.sum(d ** 2) + np.sum(u[1] ** 2)
    return f, np.linspace(-1, 1, 32 * 32).reshape(32, 32)


# name -> (program, equations per step, as staged)
PROGRAMS = {"scalar": (scalar, 2.0), "relax": (relax, 16.0),
            "where_index_reduce": (where_index_reduce, 12.0), "fluid": (fluid, 129.0)}


def _timed(times, name, fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    times[name] = times.get(name, 0.0) + time.perf_counter() - start
    return result


def phases(f, x) -> tuple:
    """(equations staged, {phase: seconds}) of one gradient build: the steps of `xform.grad`'s
    first call one by one, with the cyclic collector paused as the cache pauses it while it
    builds an entry."""
    gc.collect()
    gc.disable()
    try:
        return _phases(f, x)
    finally:
        gc.enable()


def _phases(f, x) -> tuple:
    times = {}
    graph = _timed(times, "stage", xform.make_graph(f), x)
    # as pipeline.fuse_if_enabled for a gradient (only derivatives are returned)
    level = "gradient" if config.algebra == "exact" else config.algebra
    simplified = _timed(times, "simplify", simplify, graph, level=level)
    fused = (_timed(times, "fuse", fuse_elementwise, simplified) if config.fusion
             else simplified)
    grad_graph = _timed(times, "reverse", vjp_graph, fused, (True,), [0], (), seed_ones=True,
                        adopt=True)
    # finish_graph's optimize: the passes inside sub-graphs once, then each pass on the graph
    passes = pipeline_for(config.algebra)
    grad_graph = _timed(times, "subgraphs", optimize_subgraphs, grad_graph,
                        lambda sub: optimize(sub, passes), {})
    for run_pass in passes:
        grad_graph = _timed(times, run_pass.__name__, run_pass, grad_graph)
    if config.fusion:
        grad_graph = _timed(times, "fuse", fuse_elementwise, grad_graph)
    source, namespace = _timed(times, "codegen", graph_source, grad_graph)
    compiled, _ = _timed(times, "compile", _define, source, namespace)
    compiled(x)
    return len(graph.equations), times


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--programs", default=",".join(PROGRAMS))
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    print(f"machine: {machine()} (loaded: medians of {options.repeats} builds)")
    header = None
    for name in options.programs.split(","):
        make, equations_per_step = PROGRAMS[name]
        for size in (int(s) for s in options.sizes.split(",")):
            f, x = make(max(1, round(size / equations_per_step)))
            runs = [phases(f, x) for _ in range(options.repeats)]
            n, names = runs[0][0], list(runs[0][1])
            if header is None:
                header = names
                print("| program | equations | " + " | ".join(names) + " | total us/eq |")
                print("|---" * (len(names) + 3) + "|")
            medians = {k: float(np.median([r[1].get(k, 0.0) for r in runs])) for k in header}
            cells = " | ".join(f"{medians[k] / n * 1e6:.1f}" for k in header)
            total = sum(medians.values()) / n * 1e6
            print(f"| {name} | {n} | {cells} | {total:.0f} |", flush=True)


if __name__ == "__main__":
    main()
