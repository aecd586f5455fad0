"""Constant folding: evaluate equations whose inputs are all known, let `Hooks.fold` hooks
replace higher-order equations (a `cond` with a known predicate becomes its taken branch),
and apply the peepholes to a fixed point: those the primitives' algebraic traits give (x * 1
-> x: `identity`, `casts_operands`) and their own `Hooks.peephole` hooks (`peepholes`).

The peepholes run inside the folding walk, not only in simplify, because what they return can
be folded next (sum(c * 1) of a constant c too large to fold is sum(c), which folds), and
because fused regions are cleaned by fold alone (xform.passes.fuse.clean_region)."""
from __future__ import annotations

import operator
from collections import deque
from itertools import repeat

import attrs
import numpy as np

from xform.ir.builder import using_builder
from xform.ir.core import Equation, Graph, Literal, Var
from xform.ir.nx import live_equations
from xform.ir.registry import RULES, UNKNOWN, derived, has_effects, hooks_named
from xform.passes.rewrite import GraphRewriter, literal_of

MAX_FOLDED_SIZE = 10_000  # elements: larger results stay staged rather than bloat the consts
_MAX_SPLICES = 10_000  # fold-hook replacements per pass: a hook that re-creates itself stops
_MAX_PEEPHOLES = 100  # rewrites of one equation: more means two rules undo each other


_SCALAR_TYPES = (float, int, bool, np.float64, np.float32, np.int64, np.int32, np.bool_)


def _is_all(value, scalar) -> bool:
    if type(value) in _SCALAR_TYPES:   # most literals: skip numpy's array machinery
        return bool(value == scalar)
    return value is not UNKNOWN and bool(np.all(np.asarray(value) == scalar))


def is_identity(value, identity, dtype) -> bool:
    """Whether every element of `value` (UNKNOWN: no) is `identity` for a result of `dtype`,
    a floating zero with its sign (x + 0.0 turns -0.0 into +0.0; x + -0.0 keeps x).

    Notes: of complex results only a zero identity is assumed, in both parts: complex
    addition acts part by part, multiplication mixes them ((a + bj) * (1 + 0j) has a nan real
    part for an infinite b); a real operand's imaginary part is +0.0."""
    if not _is_all(value, identity):
        return False
    if dtype.kind not in "fc" or identity != 0:
        return dtype.kind != "c"
    value, sign = np.asarray(value), np.signbit(identity)
    if not np.all(np.signbit(value.real) == sign):
        return False
    return dtype.kind != "c" or bool(np.all(np.signbit(np.imag(value)) == sign))


def _sides(hooks) -> tuple:
    """(kept operand, identity operand) positions an identity may take."""
    return ((0, 1), (1, 0)) if hooks.commutative else ((0, 1),)


def _identity_peephole(identity, sides):
    """op(x, identity) -> x, when the result has x's type."""
    def peephole(eqn, value_of, producer):
        out = eqn.outputs[0].aval
        for keep, other in sides:
            if (is_identity(value_of(eqn.inputs[other]), identity, out.dtype)
                    and eqn.inputs[keep].aval == out):
                return (eqn.inputs[keep],)
        return None
    return peephole


def _strengthened_operand_peephole(eqn, value_of, producer):
    """op(g(a, e), y) -> op(a, y) for an op that casts its operands (`casts_operands`), when
    `g(a, e)` (e g's identity) only made a weakly typed `a` (a Python scalar argument) strong
    and `y` already has the result's type: `g(a, e)` is `a` bit for bit, and `op(a, y)` has the
    same type. Reverse mode makes such products: the cotangent 1.0 of `x * f(x)` times a Python
    float `x`."""
    out = eqn.outputs[0].aval
    for position, atom in enumerate(eqn.inputs):
        other = eqn.inputs[1 - position]
        inner = producer.get(atom)
        if other.aval != out or inner is None:
            continue
        hooks = RULES[inner.primitive].hooks
        if hooks.identity is None:
            continue
        for keep, identity_at in _sides(hooks):
            a = inner.inputs[keep]
            # (not complex: (a + bj) * (1 + 0j) turns an infinite b's real part into nan)
            if (a.aval.weak_type and a.aval.dtype.kind in "fiu"
                    and a.aval.shape == atom.aval.shape and a.aval.dtype == atom.aval.dtype
                    and is_identity(value_of(inner.inputs[identity_at]), hooks.identity,
                                    a.aval.dtype)):
                inputs = list(eqn.inputs)
                inputs[position] = a
                return attrs.evolve(eqn, inputs=tuple(inputs))
    return None


def _first_of(steps):
    if len(steps) == 1:
        return steps[0]

    def peephole(eqn, value_of, producer):
        for step in steps:
            result = step(eqn, value_of, producer)
            if result is not None:
                return result
        return None
    return peephole


@derived
def peepholes() -> dict:
    """primitive -> its peephole `fn(eqn, value_of, producer) -> None | atoms | Equation`:
    the rewrites its algebraic traits give (`identity`, `casts_operands`: see
    xform.ir.registry.Hooks), then its `Hooks.peephole` hook, the first that matches."""
    table = {}
    for prim, rules in RULES.items():
        hooks = rules.hooks
        steps = []
        if hooks.identity is not None:
            steps.append(_identity_peephole(hooks.identity, _sides(hooks)))
        if hooks.casts_operands:
            steps.append(_strengthened_operand_peephole)
        if hooks.peephole is not None:
            steps.append(hooks.peephole)
        if steps:
            table[prim] = _first_of(steps)
    return table


def _simplify(eqn, value_of, producer, peepholes):
    """Apply the `peepholes` (returning None, the atoms standing for the outputs, or a new
    Equation) to `eqn` until none matches: the final Equation, or the atoms that now stand
    for its outputs."""
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
    """Evaluate what is known at pass time, apply `Hooks.fold` hooks and the peepholes.

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
    table = peepholes()
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
        if eqn.primitive in table:
            result = _simplify(eqn, value_of, producer, table)
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


__all__ = ["MAX_FOLDED_SIZE", "fold_constants", "is_identity", "peepholes"]
