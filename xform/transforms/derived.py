"""The one home of graphs derived from a closed graph: their jvp, vjp, vjp and jvp split into
forward and backward parts, and batched forms. The builders (`cotangent_graph`, `vjp_split`,
`tangent_graph`, `jvp_split`, `batched_graph`) serve the public transforms, which cache per
signature; the rules of higher-order primitives use the optimized forms memoized per graph
(`jvp_of`, `vjp_of`, `vjp_parts_of`, `batch_of`; xform.ir.execute hooks)."""
from __future__ import annotations

import threading

import numpy as np

from xform.errors import TypeCheckError
from xform.ir.ad import NOT_MAPPED, instantiate, move_to_front, zero_tangent
from xform.ir.avals import is_differentiable, tangent_aval
from xform.ir.builder import GraphBuilder, using_builder
from xform.ir.core import Graph, Var
from xform.ir.execute import build, optimized
from xform.source_info import user_frame_info
from xform.transforms.batch import batch_eval, batched_aval
from xform.transforms.jvp import jvp_graph
from xform.transforms.vjp import split_graph, vjp_eval


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
    return derived_graph(graph, ("vjp", live), lambda: cotangent_graph(graph, live))


def cotangent_graph(graph: Graph, live=None, wanted=None, kept=(), seed_ones=False,
                    adopt=False) -> Graph:
    """The one builder of reverse-mode graphs: (inputs, cotangents of the `live` outputs) ->
    (the outputs at indices `kept`, cotangents of the differentiable inputs among `wanted`).

    `live` defaults to the differentiable outputs, `wanted` to every input. With `seed_ones`,
    the live outputs' cotangents are 1 (a gradient) rather than inputs. With `adopt`, the new
    graph's inputs are `graph`'s own Vars and its forward pass is `graph`'s equations as they
    are (no re-emitting: the fast path of a gradient of a graph just staged).
    """
    live = _live_outputs(graph, live)
    wanted = range(len(graph.inputs)) if wanted is None else wanted
    builder = GraphBuilder()
    with using_builder(builder):
        ins = (builder.adopt_inputs(graph) if adopt
               else [builder.new_input(v.aval) for v in graph.inputs])
        # vjp_eval drops a zero seed before reading it: float0 or the primal dtype is alike.
        cts = [(np.ones((), a.aval.dtype)[()] if seed_ones
                else builder.new_input(tangent_aval(a.aval))) if is_live
               else zero_tangent(a.aval) for a, is_live in zip(graph.outputs, live)]
        outs, cts_in = vjp_eval(graph, ins, cts)
        grads = [instantiate(cts_in[i]) for i in wanted
                 if is_differentiable(graph.inputs[i].aval)]
    return builder.build([outs[i] for i in kept] + grads)


def vjp_split(graph: Graph, live=None, wanted=None) -> tuple[Graph, Graph]:
    """`cotangent_graph` keeping every output, cut by `split_graph` into forward: inputs ->
    (outputs, residuals) and backward: (residuals, cotangents of the live outputs) ->
    cotangents of the wanted differentiable inputs; not optimized."""
    combined = cotangent_graph(graph, live, wanted, kept=range(len(graph.outputs)))
    return split_graph(combined, len(graph.inputs), len(graph.outputs))


def vjp_parts_of(graph: Graph) -> tuple[Graph, Graph]:
    """(forward, backward) of `vjp_split(graph)`, optimized and memoized.

    forward: inputs -> (outputs, residuals); backward: (residuals, cts of the differentiable
    outputs) -> cotangents of the differentiable inputs. Residual count is
    `len(forward.outputs) - len(graph.outputs)`.
    """
    def make():
        return tuple(optimized(part) for part in vjp_split(graph))
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


def batched_graph(graph: Graph, dims, size: int, out_axes=None) -> Graph:
    """The one builder of batched graphs: inputs batched along `dims` (NOT_MAPPED: shared),
    each output along its `out_axes` entry (default 0; None: not batched, which the output
    must not be)."""
    builder = GraphBuilder()
    with using_builder(builder):
        args = [builder.new_input(batched_aval(v.aval, d, size))
                for v, d in zip(graph.inputs, dims)]
        outs, out_dims = batch_eval(graph, args, dims, size)
        if out_axes is None:
            out_axes = [0] * len(outs)
        results = []
        for x, d, axis in zip(outs, out_dims, out_axes):
            if axis is None:
                if d is not NOT_MAPPED:
                    raise TypeCheckError("vmap out_axes=None for an output that depends "
                                         "on the mapped axis", user_frame_info())
                results.append(x)
            else:
                x = move_to_front(x, d, size)
                results.append(x if axis == 0 else np.moveaxis(x, 0, axis))
    return builder.build(results)


def batch_of(graph: Graph, dims, size: int) -> Graph:
    """`batched_graph(graph, dims, size)` (as `xform.transforms.batch_graph`), optimized and
    memoized."""
    dims = tuple(dims)
    return derived_graph(graph, ("batch", dims, size), lambda: batched_graph(graph, dims, size))


__all__ = ["DerivationCycle", "batch_of", "batched_graph", "cotangent_graph", "derived_graph",
           "jvp_of", "jvp_split", "memo", "tangent_graph", "vjp_of", "vjp_parts_of",
           "vjp_split"]
