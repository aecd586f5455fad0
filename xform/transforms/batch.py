"""Vectorization: `batch_graph(graph, in_dims, size)` maps a graph over a batch axis."""
from __future__ import annotations

import numpy as np

from xform.errors import TypeCheckError
from xform.ir.avals import ShapedArray
from xform.ir.builder import GraphBuilder, bind, source_scope, using_builder
from xform.ir.core import Literal
from xform.ir.ad import NOT_MAPPED, move_to_front
from xform.ir.registry import rule_for
from xform.source_info import user_frame_info


def batched_aval(aval: ShapedArray, dim, size: int) -> ShapedArray:
    if dim is NOT_MAPPED:
        return aval
    shape = list(aval.shape)
    shape.insert(dim, size)
    return ShapedArray(tuple(shape), aval.dtype, aval.weak_type)


def batch_graph(graph, in_dims, size: int, out_axes=None):
    """A graph over inputs batched along `in_dims` (NOT_MAPPED = shared); each output is
    batched along its `out_axes` entry (default 0; None: not batched, which the output must
    not be).

    >>> print(xform.batch_graph(xform.make_graph(np.sin)(np.zeros(3)), (0,), 5))
    { lambda a:f64[5,3] . let
        b:f64[5,3] = sin a
      in (b) }
    """
    builder = GraphBuilder()
    with using_builder(builder):
        args = [builder.new_input(batched_aval(v.aval, d, size))
                for v, d in zip(graph.inputs, in_dims)]
        outs, out_dims = batch_eval(graph, args, in_dims, size)
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


def batch_eval(graph, args, dims, size: int):
    """Emit the batched graph into the current builder; returns (outs, out_dims)."""
    env = {var: (value, NOT_MAPPED) for var, value in graph.consts}
    env.update((var, (x, d)) for var, x, d in zip(graph.inputs, args, dims))

    def read(atom):
        return (atom.value, NOT_MAPPED) if type(atom) is Literal else env[atom]

    for eqn in graph.equations:
        ins, in_dims = zip(*map(read, eqn.inputs)) if eqn.inputs else ((), ())
        with source_scope(eqn.source, f"batch of {eqn.primitive}"):
            if all(d is NOT_MAPPED for d in in_dims):
                outs = bind(eqn.primitive, *ins, **eqn.params)
                out_dims = ([NOT_MAPPED] * len(eqn.outputs) if eqn.primitive.multiple_results
                            else NOT_MAPPED)
            else:
                outs, out_dims = rule_for(eqn, "batch")(size, list(ins), list(in_dims),
                                                        **eqn.params)
        if not eqn.primitive.multiple_results:
            outs, out_dims = [outs], [out_dims]
        _check_batched(eqn, outs, out_dims, size)
        env.update((var, (x, d)) for var, x, d in zip(eqn.outputs, outs, out_dims))
    results = [read(a) for a in graph.outputs]
    return [x for x, _ in results], [d for _, d in results]





def _check_batched(eqn, outs, out_dims, size):
    """A batch rule must return each output batched as its dim says."""
    from xform.errors import RuleError
    from xform.ir.ad import aval
    for var, out, dim in zip(eqn.outputs, outs, out_dims):
        expected = batched_aval(var.aval, dim, size)
        if aval(out).shape != expected.shape:
            raise RuleError(f"the batch rule of '{eqn.primitive}' returned shape "
                            f"{aval(out).shape} with batch dim {dim}, expected "
                            f"{expected.shape}", eqn.source,
                            f"fix the batch rule of '{eqn.primitive}'")
