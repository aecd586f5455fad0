"""The NDual width threshold (seed 001's open question): gradient time of one fused region of
N = 1..16 differentiable inputs, NDual vjp against the per-equation rules ("tape", no fusion)
and against the in-rule fallback (fused, trace-through), for two region shapes and several
region and array sizes.

`python -m bench.ndual_sweep [--quick]` prints the markdown table of bench/NDUAL.md.
"""
from __future__ import annotations

import sys

import attrs
import numpy as np

import xform
from bench.timing import compare, fmt, machine
from xform.runtime.cache import CACHE
from xform.ir.builder import GraphBuilder, using_builder
from xform.passes import optimize
from xform.passes.fuse import fuse_elementwise
from xform.rules.elementwise import elementwise_p
from xform.transforms import vjp_eval

WIDE = 64  # a pass width no region of the sweep reaches: every region fused whole


def reverse(fun, args, fusion=True, max_width=WIDE, vjp_width=None):
    """The compiled value-and-gradient of scalar `fun` w.r.t. every argument, built the way
    the API builds it; with `fusion`, regions are fused before reverse mode and merged with
    their NDual forms after it. `vjp_width` overrides the regions' NDual threshold."""
    graph = xform.make_graph(fun)(*args)
    if fusion:
        graph = fuse_elementwise(graph, max_width=max_width)
        if vjp_width is not None:
            graph = _with_vjp_width(graph, vjp_width)
    builder = GraphBuilder()
    with using_builder(builder):
        ins = [builder.new_input(v.aval) for v in graph.inputs]
        outs, cts = vjp_eval(graph, ins, [np.ones((), graph.outputs[0].aval.dtype)[()]])
    combined = optimize(builder.build(list(outs) + cts))
    if fusion:
        combined = fuse_elementwise(combined, max_width=max_width)
    compiled = CACHE.compiled(combined)
    return lambda: compiled(*args)


def _with_vjp_width(graph, vjp_width):
    equations = [attrs.evolve(eqn, params={**eqn.params, "max_width": vjp_width})
                 if eqn.primitive is elementwise_p else eqn for eqn in graph.equations]
    return xform.Graph(graph.inputs, graph.consts, equations, graph.outputs)


def late(n_inputs, steps_per_input):
    """Inputs enter one by one: `acc = tanh(acc) * x + sin(x)`, x cycling over the N inputs
    for steps_per_input * N steps (4 equations each); `sum(acc)`. Input i's tangent is zero
    until step i, so NDual carries about N / 2 live directions on average."""
    def f(*xs):
        acc = xs[0]
        for step in range(steps_per_input * n_inputs):
            x = xs[step % n_inputs]
            acc = np.tanh(acc) * x + np.sin(x)
        return np.sum(acc)
    return f


def early(n_inputs, steps_per_input):
    """Inputs enter first: `acc = x1 * ... * xN`, then steps_per_input * N steps of
    `acc = tanh(acc) * 0.5 + sin(acc)`; `sum(acc)`. Every step carries all N directions:
    NDual's worst case for a given width."""
    def f(*xs):
        acc = xs[0]
        for x in xs[1:]:
            acc = acc * x
        for _ in range(steps_per_input * n_inputs):
            acc = np.tanh(acc) * 0.5 + np.sin(acc)
        return np.sum(acc)
    return f


FAMILIES = {"late": late, "early": early}


def sweep(widths, configs, samples):
    rows = []
    rng = np.random.default_rng(0)
    for family, size, k, widest in configs:
        for n in (n for n in widths if n <= widest):
            fun = FAMILIES[family](n, k)
            args = [rng.uniform(0.1, 1.0, size) for _ in range(n)]
            candidates = {"tape": reverse(fun, args, fusion=False),
                          "ndual": reverse(fun, args),
                          "fallback": reverse(fun, args, vjp_width=0)}
            want = candidates["tape"]()
            for name in ("ndual", "fallback"):
                got = candidates[name]()
                assert all(np.allclose(a, b, rtol=1e-10) for a, b in zip(got, want)), name
            n_eqns = len(xform.make_graph(fun)(*args).equations) - 1  # not the sum
            times = compare(candidates, samples=samples)
            rows.append((family, size, n_eqns, n, times))
            print(_row(rows[-1]), flush=True)
    return rows


def _row(row):
    family, size, n_eqns, n, times = row
    return (f"| {family} | {size} | {n_eqns} | {n} | {fmt(times['tape'])} | "
            f"{fmt(times['ndual'])} | {times['ndual'] / times['tape']:.2f} | "
            f"{times['fallback'] / times['tape']:.2f} |")


def _geometric_mean(values):
    return float(np.exp(np.mean(np.log(values))))


def summary(rows):
    """Per N: (geometric mean, max) of NDual/tape over the configurations measured."""
    ratios = {}
    for _, _, _, n, times in rows:
        ratios.setdefault(n, []).append(times["ndual"] / times["tape"])
    return {n: (_geometric_mean(r), max(r)) for n, r in sorted(ratios.items())}


def threshold(rows, tolerance=1.05) -> int:
    """The largest N up to which NDual is, over all configurations (geometric mean), no
    slower than the tape: within `tolerance`, the noise between repeated medians here."""
    best = 0
    for n, (mean, _) in summary(rows).items():
        if mean > tolerance:
            break
        best = n
    return best


# (family, array size, steps per input, widest N): small arrays measure per-equation
# overhead, large ones memory traffic; 4 steps per input make a region 4 times as long for the
# same width; the widest large-array regions are left out (minutes per sample).
CONFIGS = (("late", 10, 1, 16), ("late", 10_000, 1, 16), ("late", 10_000, 4, 16),
           ("late", 1_000_000, 1, 8), ("early", 10, 1, 16), ("early", 10_000, 1, 16),
           ("early", 10_000, 4, 16), ("early", 1_000_000, 1, 8))
WIDTHS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16)


def main(argv=()):
    quick = "--quick" in argv
    widths = (1, 2, 4, 8) if quick else WIDTHS
    configs = (("late", 1000, 1, 8), ("early", 1000, 1, 8)) if quick else CONFIGS
    samples = 5 if quick else 9
    print(f"machine: {machine()}\n")
    print("| region | array size | equations | N | tape | NDual | NDual/tape | "
          "fallback/tape |")
    print("|---|---|---|---|---|---|---|---|")
    rows = sweep(widths, configs, samples)
    print("\n| N | NDual/tape, geometric mean | NDual/tape, worst |\n|---|---|---|")
    for n, (mean, worst) in summary(rows).items():
        print(f"| {n} | {mean:.2f} | {worst:.2f} |")
    print(f"\nthreshold: NDual no slower than the tape (geometric mean within 5%) up to "
          f"N = {threshold(rows)}")


if __name__ == "__main__":
    main(sys.argv[1:])
