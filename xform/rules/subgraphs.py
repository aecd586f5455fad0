"""Common machinery of the higher-order rules (control flow, custom rules): the types of closed
sub-graphs and how to describe them in errors, staging a flat function, per-lane masks."""
from __future__ import annotations

import numpy as np

from xform.ir.ad import aval
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
