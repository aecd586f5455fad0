"""Staging the functions a SciPy solver is given (objective, integrand, derivatives) as one
closed graph: the solver's own variables first, then the array leaves of the user's `args`,
then what the functions close over (traced values of the enclosing staging); and a stood-in
SciPy call's arguments by name."""
from __future__ import annotations

import functools
import inspect
import types

import numpy as np

from xform.ir.ad import aval
from xform.ir.avals import ShapedArray
from xform.ir.builder import stage_function
from xform.ir.tracer import Tracer
from xform.numpy.construct import staged_array
from xform.numpy.stand_ins import code_outside_staging
from xform.tree import tree_flatten, tree_unflatten

F64 = np.dtype(np.float64)


def as_float(x):
    """`x` staged as a float64 array (SciPy's solvers compute in float64)."""
    x = staged_array(x)
    return x if aval(x).dtype == F64 else x.astype(F64)


@functools.lru_cache(maxsize=None)
def _signature(function) -> inspect.Signature:
    # the function's own code: while staging, its __code__ is the stand-in's trampoline
    if hasattr(function, "__wrapped__"):      # a decorated one: the inner function's
        return inspect.signature(function.__wrapped__)
    original = types.FunctionType(code_outside_staging(function), function.__globals__,
                                  function.__name__, function.__defaults__,
                                  function.__closure__)
    original.__kwdefaults__ = function.__kwdefaults__
    return inspect.signature(original)


def arguments(function, args, kwargs) -> dict:
    """A call of SciPy's `function` (stood in while staging) by argument name, defaults
    filled in: its own signature, not its stand-in's."""
    bound = _signature(function).bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def _is_operand(leaf) -> bool:
    return type(leaf) is Tracer or isinstance(leaf, (np.ndarray, np.generic, float, int)) \
        and not isinstance(leaf, bool)


def stage_with_args(together, leading, args):
    """(graph, operands): `together(*leading values, args) -> tuple of outputs` staged on
    the avals `leading`, with `args`' array leaves as inputs (other leaves stay as they
    are); `operands` are what the graph takes after the leading inputs."""
    leaves, tree = tree_flatten(args)
    where = [i for i, leaf in enumerate(leaves) if _is_operand(leaf)]
    operands = [staged_array(leaves[i]) for i in where]
    avals = list(leading) + [ShapedArray(aval(o).shape, aval(o).dtype) for o in operands]

    def flat(*values):
        full = list(leaves)
        for i, value in zip(where, values[len(leading):]):
            full[i] = value
        outs = together(*values[:len(leading)], tree_unflatten(tree, full))
        return tuple(as_float(out) for out in outs)
    in_tree = tree_flatten(tuple(range(len(avals))))[1]
    graph, captured, _ = stage_function(flat, in_tree, avals)
    return graph, operands + list(captured)


__all__ = ["F64", "arguments", "as_float", "stage_with_args"]
