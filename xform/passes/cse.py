"""Common-subexpression elimination: an equation that repeats an earlier one (same primitive,
same inputs, equal params) is dropped and its outputs read the earlier outputs."""
from __future__ import annotations

import struct

import numpy as np

from xform.ir.core import Graph, Literal
from xform.ir.registry import has_effects
from xform.passes.rewrite import GraphRewriter


_pack_double = struct.Struct("<d").pack


def _atom_key(atom):
    if type(atom) is Literal:
        # Bytes, not ==: 0.0 and -0.0 differ (x * -0.0 is not x * 0.0) and nan equals itself.
        value = atom.value
        if type(value) is float or type(value) is np.float64:   # most literals, quickly
            return (Literal, type(value), atom.aval, _pack_double(value))
        value = np.asarray(value, atom.aval.dtype)
        return (Literal, type(atom.value), atom.aval, value.tobytes())
    return atom


def _key(eqn):
    """What makes two equations interchangeable; sub-graphs in params compare by identity.
    (Vars are their own keys: only Literals need `_atom_key`, which most equations lack.)"""
    inputs, outputs = eqn.inputs, eqn.outputs
    if Literal in map(type, inputs):
        inputs = tuple(map(_atom_key, inputs))
    avals = outputs[0].aval if len(outputs) == 1 else tuple([v.aval for v in outputs])
    return eqn.primitive, inputs, eqn.params, avals


def eliminate_common_subexpressions(graph: Graph) -> Graph:
    """Merge repeated equations into their first occurrence (effects, such as draws, stay).

    >>> from xform.passes import eliminate_common_subexpressions
    >>> g = xform.make_graph(lambda x: np.sin(x) + np.sin(x))(1.0)
    >>> print(eliminate_common_subexpressions(g))   # one `sin`, read twice
    { lambda a:~f64[] . let
        b:f64[] = sin a
        c:f64[] = add b b
      in (c) }
    """
    rewriter = GraphRewriter(graph)
    seen = {}
    for eqn in graph.equations:
        eqn = rewriter.substituted(eqn)
        key = _key(eqn)
        try:
            first = seen.setdefault(key, eqn)
        except (TypeError, ValueError):
            # Params holding arrays cannot be compared; such an equation is kept as it is.
            first = eqn
        if first is eqn or has_effects(eqn):    # two draws are two different values
            rewriter.emit(eqn)
        else:
            for var, earlier in zip(eqn.outputs, first.outputs):
                rewriter.replace(var, earlier)
    return rewriter.build()


__all__ = ["eliminate_common_subexpressions"]
