"""When does element-wise fusion pay? Per-call time of a gradient compiled with fusion on
against the same gradient compiled with it off (both built in this process, timed
round-robin: `bench.timing.compare`), for region kinds x array sizes. The answer is encoded
in xform/passes/fuse.py (`FUSION_MIN_SIZE`, `_pays`).

`python -m bench.fusion_breakeven [--samples N] [--sizes 64,4096,...]`
"""
from __future__ import annotations

import argparse

import numpy as np

import xform
from bench.timing import compare, fmt, machine
from xform.api.reverse import _finish_fused
from xform.codegen import compile_graph


def arithmetic(x):
    """relax's update: + - * / only (their vjp needs no residual the tape lacks)."""
    p, o = np.ones_like(x), 1 - x
    for _ in range(4):
        num = np.roll(p, 1, 0) * np.roll(o, 1, 0) + np.roll(p, -1, 1) * np.roll(o, -1, 1)
        p = p * o + (1 - o) * num / 2.0
    return np.sum(p ** 2)


def transcendental(x):
    """A chain of transcendental functions of one input (NDual's best case)."""
    return np.sum(np.sin(np.cos(np.exp(x * 0.1))) * x)


def mixed(x):
    """A GP-like kernel: exp of a product, times and plus arrays."""
    return np.sum(np.exp(-0.5 * (x - 0.3) ** 2) * x + np.tanh(x))


KINDS = {"arithmetic": arithmetic, "transcendental": transcendental, "mixed": mixed}


def compiled_gradient(fn, x, fusion: bool):
    """The gradient's compiled code as xform builds it with `fusion` (config restored)."""
    previous = xform.config.fusion
    xform.config.update("fusion", fusion)
    try:
        graph = _finish_fused(xform.make_graph(xform.grad(fn))(x))
        return compile_graph(graph).fn, graph
    finally:
        xform.config.update("fusion", previous)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=9)
    parser.add_argument("--sizes", default="8,32,64,128,256,512")
    options = parser.parse_args()
    print(f"machine: {machine()} (2 cores shared with other jobs: medians, same-run ratios)")
    print("| region kind | array | fused regions | on | off | on/off |")
    print("|---|---|---|---|---|---|")
    for name, fn in KINDS.items():
        for side in (int(s) for s in options.sizes.split(",")):
            x = np.random.default_rng(0).uniform(0.05, 0.5, (side, side))
            on, graph = compiled_gradient(fn, x, True)
            off, _ = compiled_gradient(fn, x, False)
            np.testing.assert_allclose(on(x)[0], off(x)[0], rtol=1e-9)
            regions = sum(e.primitive.name == "elementwise" for e in graph.equations)
            times = compare({"on": lambda: on(x), "off": lambda: off(x)},
                            samples=options.samples)
            print(f"| {name} | {side}x{side} | {regions} | {fmt(times['on'])} | "
                  f"{fmt(times['off'])} | {times['on'] / times['off']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
