"""The one home of graphs derived from a closed graph by the rules of higher-order primitives
(control flow, calls, custom rules, element-wise regions, threaded_map): their jvp, vjp, vjp
split into forward and backward parts, and batched forms, each built once per graph, kept while
the graph lives (and until the cache is cleared), and optimized (xform.ir.execute hooks)."""
from __future__ import annotations

import threading

from xform.ir.avals import is_differentiable, tangent_aval
from xform.ir.builder import GraphBuilder, using_builder
from xform.ir.core import Graph
from xform.ir.ad import instantiate, zero_tangent
from xform.ir.execute import build, optimized
from xform.transforms.batch import batch_graph
from xform.transforms.jvp import jvp_graph
from xform.transforms.vjp import split_graph, vjp_eval, vjp_graph


class DerivationCycle(RecursionError):
    """A derived graph was asked for while it is being built, in the same thread: a recursive
    callee whose derived graph calls itself (the passes then leave that call unopened)."""


_building = threading.local()


def memo(graph: Graph, key: tuple, make):
    """`make()`, built once per (`graph`, `key`).

    Notes: kept in the runtime's cache (weakly on `graph`, so a graph's derived graphs die with
    it, and cleared with it); a request for what is still being built raises DerivationCycle
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
    return build(graph, ("derived",) + key, guarded)


def derived_graph(graph: Graph, key: tuple, make) -> Graph:
    """The graph `make()` builds from `graph`, optimized, once per (`graph`, `key`): derived
    graphs are compiled and run as they are, often once per loop iteration."""
    return memo(graph, key, lambda: optimized(make()))


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
    return derived_graph(graph, ("vjp", live), lambda: _cotangent_graph(graph, live))


def _cotangent_graph(graph: Graph, live) -> Graph:
    builder = GraphBuilder()
    with using_builder(builder):
        ins = [builder.new_input(v.aval) for v in graph.inputs]
        # vjp_eval drops a zero seed before reading it: float0 or the primal dtype is alike.
        cts = [builder.new_input(tangent_aval(a.aval)) if is_live else zero_tangent(a.aval)
               for a, is_live in zip(graph.outputs, live)]
        _, cts_in = vjp_eval(graph, ins, cts)
        grads = [instantiate(ct) for ct, v in zip(cts_in, graph.inputs)
                 if is_differentiable(v.aval)]
    return builder.build(grads)


def vjp_parts_of(graph: Graph) -> tuple[Graph, Graph]:
    """(forward, backward), optimized and memoized: `vjp_graph(graph)` cut by `split_graph`.

    forward: inputs -> (outputs, residuals); backward: (residuals, cts of the differentiable
    outputs) -> cotangents of the differentiable inputs. Residual count is
    `len(forward.outputs) - len(graph.outputs)`.
    """
    def make():
        parts = split_graph(vjp_graph(graph), len(graph.inputs), len(graph.outputs))
        return tuple(optimized(part) for part in parts)
    return memo(graph, ("vjp_parts",), make)


def batch_of(graph: Graph, dims, size: int) -> Graph:
    """`xform.transforms.batch_graph(graph, dims, size)`, optimized and memoized."""
    dims = tuple(dims)
    return derived_graph(graph, ("batch", dims, size), lambda: batch_graph(graph, dims, size))


__all__ = ["DerivationCycle", "batch_of", "derived_graph", "jvp_of", "memo", "vjp_of",
           "vjp_parts_of"]
