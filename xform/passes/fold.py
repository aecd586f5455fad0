"""Constant folding: evaluate equations whose inputs are all known, let `Hooks.fold` hooks
replace higher-order equations (a `cond` with a known predicate becomes its taken branch),
and simplify with the primitives' peephole hooks (x * 1 -> x, ...) run to a fixed point."""
from __future__ import annotations

import operator
from collections import deque
from itertools import repeat

import numpy as np

from xform.ir.builder import using_builder
from xform.ir.core import Equation, Graph, Literal, Var
from xform.ir.nx import live_equations
from xform.ir.registry import RULES, UNKNOWN, derived, has_effects, hooks_named
from xform.passes.rewrite import GraphRewriter, literal_of

MAX_FOLDED_SIZE = 10_000  # elements: larger results stay staged rather than bloat the consts
_MAX_SPLICES = 10_000  # fold-hook replacements per pass: a hook that re-creates itself stops
_MAX_PEEPHOLES = 100  # rewrites of one equation: more means two rules undo each other


def _simplify(eqn, value_of, producer, peepholes):
    """Apply the peephole hooks (`Hooks.peephole`: `fn(eqn, value_of, producer)`
    returns None, the atoms standing for the outputs, or a new Equation) to `eqn` until none
    matches: the final Equation, or the atoms that now stand for its outputs."""
    for _ in range(_MAX_PEEPHOLES):
        rule = peepholes.get(eqn.primitive)
        result = rule(eqn, value_of, producer) if rule is not None else None
        if result is None:
            return eqn
        if type(result) is not Equation:
            return result
        eqn = result
    raise RuntimeError(f"peephole rewrites of '{eqn.primitive}' did not reach a fixed point")


# -- evaluation --------------------------------------------------------------------------------

def _evaluate(eqn, known, returned):
    """The output values of `eqn` computed now with its impl, or None to leave it staged."""
    rules = RULES.get(eqn.primitive)
    if rules is None or rules.impl is None or has_effects(eqn):  # a draw draws at each call
        return None
    for var in eqn.outputs:
        if var.aval.size > MAX_FOLDED_SIZE:
            return None
        if var.aval.shape and var in returned:
            # Compiled code would hand every caller the same (mutable) constant array.
            return None
    with using_builder(None), np.errstate(all="raise"):
        try:
            outs = rules.impl(*known, **eqn.params)
        except Exception:  # noqa: BLE001
            # Left staged, the equation raises or warns at run time, as it did before.
            return None
    outs = list(outs) if eqn.primitive.multiple_results else [outs]
    if len(outs) != len(eqn.outputs):
        return None
    for var, value in zip(eqn.outputs, outs):
        if np.shape(value) != var.aval.shape or np.asarray(value).dtype != var.aval.dtype:
            return None
    return outs


def fold_constants(graph: Graph) -> Graph:
    """Evaluate what is known at pass time, apply `Hooks.fold` hooks and peephole hooks.

    Known values are Literals, graph consts and the results of folded equations; 0-d results
    become Literals, arrays become consts (results over MAX_FOLDED_SIZE elements stay staged).
    A hook `fold(eqn, known)` sees `known[i]` (a value or UNKNOWN) and returns None or
    `(graph, atoms)`: the closed `graph` applied to `atoms` replaces `eqn`, and its equations
    are folded in turn.
    >>> from xform.passes import fold_constants, inline_calls
    >>> @xform.function
    ... def scale(x, a):
    ...     return x * np.sin(a)
    >>> graph = inline_calls(xform.make_graph(lambda x: scale(x, 0.5))(1.0))  # b = sin 0.5 ...
    >>> print(fold_constants(graph))  # doctest: +ELLIPSIS
    { lambda a:~f64[] . let
        b:f64[] = multiply a 0.4794255386...
      in (b) }
    """
    rewriter = GraphRewriter(graph)
    values = {var: value for var, value in graph.consts}
    returned = {a for a in graph.outputs if type(a) is Var}
    producer = {}
    # Dead equations are left for dce: evaluating them would only cost time (or never end).
    live = live_equations(graph)
    queue = deque((eqn, index in live) for index, eqn in enumerate(graph.equations))
    splices = 0
    peepholes = hooks_named("peephole")
    folds = hooks_named("fold")

    def value_of(atom):
        if type(atom) is Literal:
            return atom.value
        return values.get(atom, UNKNOWN)

    while queue:
        eqn, is_live = queue.popleft()
        eqn = rewriter.substituted(eqn)
        if not is_live:
            rewriter.emit(eqn)
            continue
        # (written out: this runs once per equation)
        known = [a.value if type(a) is Literal else values.get(a, UNKNOWN) for a in eqn.inputs]
        if not any(map(operator.is_, known, repeat(UNKNOWN))):
            outs = _evaluate(eqn, known, returned)
            if outs is not None:
                for var, value in zip(eqn.outputs, outs):
                    if var.aval.shape:
                        rewriter.add_const(var, value)
                        values[var] = value
                    else:
                        rewriter.replace(var, literal_of(value, var.aval))
                continue
        hook = folds.get(eqn.primitive)
        if hook is not None and splices < _MAX_SPLICES:
            found = hook(eqn, known)
            if found is not None:
                body, atoms = found
                splices += 1
                spliced = rewriter.splice(body, atoms, eqn.outputs)
                queue.extendleft((new, True) for new in reversed(spliced))
                continue
        if eqn.primitive in peepholes:
            result = _simplify(eqn, value_of, producer, peepholes)
            if type(result) is not Equation and rewriter.returns_an_input(eqn.outputs, result):
                result = eqn
        else:
            result = eqn
        if type(result) is Equation:
            rewriter.emit(result)
            for var in result.outputs:
                producer[var] = result
        else:
            for var, atom in zip(eqn.outputs, result):
                rewriter.replace(var, atom)
    return rewriter.build()


__all__ = ["MAX_FOLDED_SIZE", "fold_constants"]
