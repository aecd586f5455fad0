"""Common machinery of the higher-order rules (control flow, custom rules): the types of closed
sub-graphs and how to describe them in errors, staging a flat function, per-lane masks, and
transpose rules from vjp rules."""
from __future__ import annotations

import numpy as np

from xform.ir.ad import NOT_MAPPED, Undefined, Zero, aval, instantiate, move_to_front, zeros
from xform.ir.builder import stage_function
from xform.ir.core import Graph
from xform.ir.tracer import Tracer
from xform.tree import tree_flatten


def out_avals(graph: Graph) -> list:
    return [a.aval for a in graph.outputs]


def same_types(avals_a, avals_b) -> bool:
    """Equal shapes and dtypes, one by one (weak types may differ)."""
    return [(a.shape, a.dtype) for a in avals_a] == [(b.shape, b.dtype) for b in avals_b]


def describe_types(avals) -> str:
    """`(f64[3], i64[])`, for error messages."""
    return "(" + ", ".join(a.str_short() for a in avals) + ")"


def is_concrete(x) -> bool:
    return type(x) is not Tracer


def stage_flat(fun, avals) -> Graph:
    """`fun` of one argument per aval, staged; it must close over nothing traced."""
    leaves_tree = tree_flatten(tuple(range(len(avals))))[1]
    graph, captured, _ = stage_function(fun, leaves_tree, avals)
    assert not captured
    return graph


def lane_mask(mask, like, size):
    """`mask` of shape (size,) shaped to broadcast against batched `like`."""
    return np.reshape(mask, (size,) + (1,) * (len(aval(like).shape) - 1))


def batch_by_loop(prim):
    """A batch rule binding `prim` once per lane and stacking: for primitives whose impl runs
    an adaptive solver of SciPy's (each lane is its own solve, with its own steps)."""
    def batch(size, args, dims, **params):
        lanes = [move_to_front(x, d, size) if d is not NOT_MAPPED else None
                 for x, d in zip(args, dims)]
        outs = [prim.bind(*[x if lane is None else lane[i] for x, lane in zip(args, lanes)],
                          **params) for i in range(size)]
        if prim.multiple_results:
            return [np.stack(parts) for parts in zip(*outs)], [0] * len(outs[0])
        return np.stack(outs), 0
    return batch


def transpose_from_vjp(vjp, abstract_eval):
    """The transpose rule of a higher-order primitive used linearly (a call, loop or custom
    function inside a linear graph being transposed, such as a custom_vjp bwd that forward
    mode transposes), from its vjp rule: a map linear in the undefined inputs is its own
    vjp at any point, so the vjp is taken where they are zero."""
    def transpose(cts, *args, **params):
        primals = [zeros(x.aval) if type(x) is Undefined else x for x in args]
        outs = [Zero(a) for a in abstract_eval(*[aval(x) for x in primals], **params)]
        cts = [instantiate(ct) if ct is not None else ct for ct in cts]
        cts_in = vjp(primals, outs, cts, **params)
        return [ct if type(x) is Undefined else None for ct, x in zip(cts_in, args)]
    return transpose
