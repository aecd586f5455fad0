"""Which 0-d float64 equations generated code computes as Python floats, and in what order.

`scalar_equations` picks the connected groups of admitted operations (xform.codegen.scalar)
whose estimated savings exceed their conversions and checks; `schedule` orders emission so
that they gather in few runs, each converting and checking once.
"""
from __future__ import annotations

import numpy as np

from xform.codegen.scalar import scalar_operation
from xform.ir.core import Graph, Literal
from xform.ir.registry import RULES, hooks_named

_F64 = np.dtype(np.float64)


def literal_float(literal) -> float | None:
    """The Python float numpy would use for a literal operand of a float64 operation."""
    aval = literal.aval
    if aval.shape != ():
        return None
    if aval.dtype == _F64:
        return float(literal.value)
    exact_int = type(literal.value) is int and abs(literal.value) <= 2 ** 53
    if aval.weak_type and aval.dtype.kind in "iu" and exact_int:
        return float(literal.value)
    return None


# Rough costs in ns on this project's x86 machines (python -m timeit): what a Python float
# operator saves against numpy's scalar operator, and a `math` call against a ufunc call on a
# scalar; what the conversions cost; and the check of values that leave the Python floats.
_SAVED_BY_OPERATOR_NS = 50
_SAVED_BY_CALL_NS = 150
_TO_FLOAT_NS = 40
_TO_NUMPY_NS = 110
_CHECK_NS = 35
_CHECK_PER_VALUE_NS = 15


def scalar_equations(graph: Graph, outputs: set, scalar_math: str) -> dict:
    """equation index -> ScalarOp for the equations computed on Python floats: each connected
    group of candidate equations whose estimated savings exceed its conversions and checks.

    One pass over the equations (they are many, and each pass costs): groups are merged as
    reads join them, and each group's savings and inputs are merged along."""
    equations = graph.equations
    candidates = {}
    made_by = {}                     # a candidate's value -> its index
    group = {}                       # union-find over candidate indices
    size = {}                        # a root's group: its size
    saved = {}                       # a root's group: its estimated savings
    inputs = {}                      # a root's group: the values it converts
    leaving = set()                  # candidates' values read by other equations
    converted = set()                # of them, those read as numpy values (to_f64 each)
    takes_floats = hooks_named("takes_floats")

    def root(i):
        while group[i] != i:
            group[i] = group[group[i]]
            i = group[i]
        return i
    for index, eqn in enumerate(equations):
        op = None
        outs = eqn.outputs
        if len(outs) == 1:
            aval = outs[0].aval
            if not aval.shape and (aval.dtype is _F64 or aval.dtype == _F64):
                op = scalar_operation(eqn.primitive, scalar_math)
        if op is not None:
            for atom in eqn.inputs:
                aval = atom.aval
                if aval.shape or (aval.dtype is not _F64 and aval.dtype != _F64):
                    if type(atom) is not Literal or literal_float(atom) is None:
                        op = None
                        break
        if op is None:
            read = [atom for atom in eqn.inputs if atom in made_by]
            leaving.update(read)
            if eqn.primitive not in takes_floats:
                converted.update(read)
            continue
        candidates[index] = op
        made_by[outs[0]] = index
        group[index] = top = index
        size[index] = 1
        saved[index] = (_SAVED_BY_CALL_NS if op.function is not None or len(eqn.inputs) == 1
                        else _SAVED_BY_OPERATOR_NS)
        inputs[index] = set()
        for atom in eqn.inputs:
            maker = made_by.get(atom)
            if maker is None:
                if type(atom) is not Literal:
                    inputs[top].add(atom)
                continue
            other = root(maker)
            if other != top:  # the smaller group joins the larger: shallow trees
                if size[other] < size[top]:
                    other, top = top, other
                group[top] = other
                size[other] += size.pop(top)
                saved[other] += saved.pop(top)
                into, more = inputs[other], inputs.pop(top)
                if len(into) < len(more):
                    into, more = more, into
                into |= more
                inputs[other] = into
                top = other
    leaving.update(v for v in outputs if v in made_by)
    converted.update(v for v in outputs if v in made_by)
    escaping: dict = {}              # root -> [values converted, values checked]
    for var in leaving:
        index = made_by[var]
        counts = escaping.setdefault(root(index), [0, 0])
        counts[0] += var in converted
        counts[1] += candidates[index].tracked
    worth_it = set()
    for top, total in saved.items():
        conversions, checked = escaping.get(top, (0, 0))
        cost = (_TO_FLOAT_NS * len(inputs[top]) + _TO_NUMPY_NS * conversions
                + (_CHECK_NS + _CHECK_PER_VALUE_NS * checked if checked else 0))
        if total > cost:
            worth_it.add(top)
    return {i: op for i, op in candidates.items() if root(i) in worth_it}


def schedule(graph: Graph, scalar: dict, skipped: set) -> list:
    """The order of emission: equation indices, and runs (lists of scalar equation indices).

    A scalar equation moves up to just after the last equation it depends on, so scalar
    equations gather in few runs: each run converts and checks once. None moves above a
    guard (a `kept` equation) that precedes it: past a failed guard nothing of the path runs,
    as in eager numpy, where the other branch's `1 / (v - 1)` would not warn."""
    if not scalar:
        return [i for i in range(len(graph.equations)) if i not in skipped]
    if len(scalar) == len(graph.equations):
        return [list(scalar)]        # no numpy statement: one run
    numpy_items = []
    runs: dict = {}
    slot = {}
    barrier = -1        # the slot of the last guard so far
    for index, eqn in enumerate(graph.equations):
        if index in skipped:
            continue
        if index in scalar:
            after = barrier
            for atom in eqn.inputs:
                if type(atom) is not Literal:
                    after = max(after, slot.get(atom, -1))
            runs.setdefault(after, []).append(index)
        else:
            after = len(numpy_items)
            numpy_items.append(index)
        for var in eqn.outputs:
            slot[var] = after
        rules = RULES.get(eqn.primitive)
        if rules is not None and rules.kept:
            barrier = after
    sequence = [runs[-1]] if -1 in runs else []
    for position, index in enumerate(numpy_items):
        sequence.append(index)
        if position in runs:
            sequence.append(runs[position])
    return sequence
