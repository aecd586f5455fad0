"""The one home of graphs derived from a closed graph: their jvp, vjp, vjp and jvp split into
forward and backward parts, and batched forms. The splits (`vjp_split`, `jvp_split`) and
`tangent_graph`, over the transforms' own builders (`vjp_graph`, `jvp_graph`, `batch_graph`),
serve the public api, which caches per signature; the rules of higher-order primitives use
the optimized forms memoized per graph (`jvp_of`, `vjp_of`, `vjp_parts_of`, `batch_of`;
through the runtime record, xform.ir.execute.Runtime)."""
from __future__ import annotations

import threading

from xform.ir.avals import is_differentiable
from xform.ir.core import Graph, Var
from xform.ir.execute import runtime
from xform.ir.ad import NOT_MAPPED
from xform.ir.builder import GraphBuilder, using_builder
from xform.transforms.batch import batch_eval, batch_graph, batched_aval
from xform.transforms.jvp import jvp_graph
from xform.transforms.vjp import split_graph, vjp_graph


class DerivationCycle(RecursionError):
    """A derived graph was asked for while it is being built, in the same thread: a recursive
    callee whose derived graph calls itself (the passes then leave that call unopened)."""


_building = threading.local()


def memo(graph: Graph, key: tuple, make):
    """`make()`, built once per (`graph`, `key`).

    Notes: kept in the runtime's cache of derived graphs (weakly on `graph`, so a graph's
    derived graphs die with it; bounded apart from the entries per function, which never
    evict them; cleared with them); a request for what is still being built raises DerivationCycle
    rather than building it again inside itself until the stack runs out.
    """
    def guarded():
        building = _building.__dict__.setdefault("keys", set())
        token = (id(graph), key)
        if token in building:
            raise DerivationCycle(f"{key[0]} of a graph requested while it is being built")
        building.add(token)
        try:
            return make()
        finally:
            building.discard(token)
    return runtime().build(graph, ("derived",) + key, guarded)


def derived_graph(graph: Graph, key: tuple, make) -> Graph:
    """The graph `make()` builds from `graph`, optimized, once per (`graph`, `key`): derived
    graphs are compiled and run as they are, often once per loop iteration."""
    return memo(graph, key, lambda: runtime().optimize(make()))


def jvp_of(graph: Graph, nonzeros) -> Graph:
    """`xform.transforms.jvp_graph(graph, nonzeros)`, optimized and memoized.

    >>> from xform.transforms.derived import jvp_of
    >>> graph = xform.make_graph(np.sin)(1.0)
    >>> jvp_of(graph, (True,)) is jvp_of(graph, (True,))
    True
    """
    nonzeros = tuple(nonzeros)
    return derived_graph(graph, ("jvp", nonzeros), lambda: jvp_graph(graph, nonzeros))


def _live_outputs(graph: Graph, live):
    return (tuple(is_differentiable(a.aval) for a in graph.outputs) if live is None
            else tuple(live))


def vjp_of(graph: Graph, live=None) -> Graph:
    """(inputs, cotangents of the `live` outputs) -> cotangents of the differentiable inputs,
    optimized and memoized. `live` (default: the differentiable outputs) marks the outputs
    whose cotangents are inputs; the others' are zero."""
    live = _live_outputs(graph, live)
    return derived_graph(graph, ("vjp", live), lambda: vjp_graph(graph, live, kept=()))


def vjp_split(graph: Graph, live=None, wanted=None) -> tuple[Graph, Graph]:
    """`vjp_graph` keeping every output, cut by `split_graph` into forward: inputs ->
    (outputs, residuals) and backward: (residuals, cotangents of the live outputs) ->
    cotangents of the wanted differentiable inputs; not optimized."""
    combined = vjp_graph(graph, live, wanted)
    return split_graph(combined, len(graph.inputs), len(graph.outputs))


def vjp_parts_of(graph: Graph) -> tuple[Graph, Graph]:
    """(forward, backward) of `vjp_split(graph)`, optimized and memoized.

    forward: inputs -> (outputs, residuals); backward: (residuals, cts of the differentiable
    outputs) -> cotangents of the differentiable inputs. Residual count is
    `len(forward.outputs) - len(graph.outputs)`.
    """
    def make():
        return tuple(runtime().optimize(part) for part in vjp_split(graph))
    return memo(graph, ("vjp_parts",), make)


def tangent_graph(graph: Graph, nonzeros, n_captured: int = 0) -> Graph:
    """`jvp_graph(graph, nonzeros)` (primals, tangents of the `nonzeros` inputs) -> (outputs,
    tangents), with the last `n_captured` primal inputs (values an enclosing staging
    captured) moved after the tangents, where a transformed function's graph takes them."""
    jvp = jvp_graph(graph, nonzeros)
    if not n_captured:
        return jvp
    n_args = len(graph.inputs) - n_captured
    captured = jvp.inputs[n_args:len(graph.inputs)]
    inputs = jvp.inputs[:n_args] + jvp.inputs[len(graph.inputs):] + captured
    return Graph(inputs, jvp.consts, jvp.equations, jvp.outputs)


def jvp_split(graph: Graph, nonzeros) -> tuple[Graph | None, Graph]:
    """(forward, linear), not optimized: `jvp_graph(graph, nonzeros)` cut by `split_graph`
    into forward: primals -> (outputs, residuals) and linear: (residuals, tangents) ->
    output tangents. When a primitive's jvp yields primal and tangent outputs in one equation
    (cond, while_loop), it cannot be cut: forward is None, and linear is the whole jvp
    without its primal outputs (its residuals are the primals)."""
    combined = jvp_graph(graph, nonzeros)
    n_outs = len(graph.outputs)
    forward, linear = split_graph(combined, len(graph.inputs), n_outs)
    defined = set(forward.inputs) | {v for e in forward.equations for v in e.outputs}
    if all(type(a) is not Var or a in defined for a in forward.outputs):
        return forward, linear
    return None, Graph(combined.inputs, combined.consts, combined.equations,
                       combined.outputs[n_outs:])


def batch_of(graph: Graph, dims, size: int, out_axes=None) -> Graph:
    """`xform.transforms.batch_graph(graph, dims, size, out_axes)`, optimized and memoized."""
    dims = tuple(dims)
    if out_axes is None:
        return derived_graph(graph, ("batch", dims, size),
                             lambda: batch_graph(graph, dims, size))
    out_axes = tuple(out_axes)
    return derived_graph(graph, ("batch", dims, size, out_axes),
                         lambda: batch_graph(graph, dims, size, out_axes))


def batched_outputs(graph: Graph, dims, size: int) -> tuple:
    """Per output of `graph` batched along `dims`: whether it depends on the batch (memoized;
    no graph is kept)."""
    dims = tuple(dims)

    def make():
        builder = GraphBuilder()
        with using_builder(builder):
            args = [builder.new_input(batched_aval(v.aval, d, size))
                    for v, d in zip(graph.inputs, dims)]
            _, out_dims = batch_eval(graph, args, dims, size)
        return tuple(d is not NOT_MAPPED for d in out_dims)
    return memo(graph, ("batched outputs", dims, size), make)


__all__ = ["DerivationCycle", "batch_of", "batched_outputs", "derived_graph",
           "jvp_of", "jvp_split", "memo", "tangent_graph", "vjp_of", "vjp_parts_of",
           "vjp_split"]
