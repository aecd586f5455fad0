"""Analyses of a graph that codegen's emitter reads: where values die, which `x[i]` patterns
become plain indexing, and which ufuncs may write into a dead input's buffer."""
from __future__ import annotations

import numpy as np

from xform.ir.core import Graph, Literal
from xform.ir.rules import primitive_for, rule_for

def item_inputs(graph: Graph, item, indexing: dict):
    if type(item) is list:
        return [a for i in item for a in graph.equations[i].inputs]
    if item in indexing:
        return graph.equations[indexing[item][0]].inputs
    return graph.equations[item].inputs


def value_deaths(graph: Graph, sequence: list, indexing: dict, deletable: set) -> dict:
    """position in `sequence` -> the `deletable` vars to delete after that item: the inputs
    whose last use it is, and its outputs that nobody uses."""
    last = {}
    for position, item in enumerate(sequence):
        for atom in item_inputs(graph, item, indexing):
            if atom in deletable:
                last[atom] = position
        if type(item) is not list:
            for var in graph.equations[item].outputs:
                if var in deletable:
                    last.setdefault(var, position)
    deaths: dict = {}
    for var, position in last.items():
        deaths.setdefault(position, []).append(var)
    return deaths


# -- x[i] as plain indexing (the primitives of roles "slice" and "reshape") ------------------------

def plain_indexing(graph: Graph, reads: dict, outputs: set) -> dict:
    """reshape equation index -> (slice equation index, index tuple), for `reshape[shape=()]`
    of a size-1 slice used by nothing else: `x[i, j]` gives a numpy scalar, which costs far less
    than slice + reshape and, being a copy, is never a view of the user's array. Results of the
    graph keep their 0-d array."""
    reshape_p, slice_p = primitive_for("reshape"), primitive_for("slice")
    equations = graph.equations
    reshapes = [i for i, eqn in enumerate(equations)
                if eqn.primitive is reshape_p and eqn.params["shape"] == ()]
    if not reshapes:
        return {}
    made_by = {eqn.outputs[0]: i for i, eqn in enumerate(equations) if eqn.primitive is slice_p}
    found = {}
    for index in reshapes:
        eqn = equations[index]
        (source,) = eqn.inputs
        if type(source) is Literal or source in outputs or eqn.outputs[0] in outputs:
            continue
        producer = made_by.get(source)
        if producer is None or reads[source] != 1:
            continue
        sliced = equations[producer]
        if sliced.primitive is slice_p and sliced.params["starts"] and source.aval.size == 1:
            found[index] = (producer, tuple(sliced.params["starts"]))
    return found


# -- writing into dead buffers --------------------------------------------------------------------

# Below this size a fresh array costs less than passing `out=`.
_REUSE_MIN_SIZE = 1024


def _fresh_arrays(equations) -> list:
    """Per equation: whether it is a one-output ufunc on arrays (its result is a new array,
    never a view). Each primitive's impl is looked at once."""
    one_output_ufunc: dict = {}
    fresh = []
    for eqn in equations:
        ufunc = one_output_ufunc.get(eqn.primitive)
        if ufunc is None:
            impl = rule_for(eqn, "impl")
            ufunc = one_output_ufunc[eqn.primitive] = (isinstance(impl, np.ufunc)
                                                       and impl.nout == 1)
        fresh.append(ufunc and len(eqn.outputs) == 1 and eqn.outputs[0].aval.shape != ()
                     and not eqn.params)
    return fresh


def buffer_reuse(graph: Graph, outputs: set) -> dict:
    """equation index -> position of the input whose buffer the equation's ufunc writes into.

    Only buffers made by a ufunc of this graph qualify, and only when every reader of that
    value is a ufunc (so no view of it exists) and this equation is its last reader."""
    equations = graph.equations
    large = [i for i, eqn in enumerate(equations)
             if len(eqn.outputs) == 1 and eqn.outputs[0].aval.shape
             and eqn.outputs[0].aval.size >= _REUSE_MIN_SIZE]
    if not large:
        return {}
    fresh = _fresh_arrays(equations)
    # Only values made by a fresh ufunc can qualify: the tables hold those alone (each entry
    # of a table over the whole graph costs the more, the larger the graph).
    made_fresh = set()
    last_reader = {}                 # such a value -> the last equation reading it
    viewed = set()                   # such values some other equation reads
    for index, eqn in enumerate(equations):
        is_fresh = fresh[index]
        for atom in eqn.inputs:
            if atom in made_fresh:
                last_reader[atom] = index
                if not is_fresh:
                    viewed.add(atom)
        if is_fresh:
            made_fresh.add(eqn.outputs[0])
    reuse = {}
    for index in large:
        if not fresh[index]:
            continue
        out = equations[index].outputs[0].aval
        for position, atom in enumerate(equations[index].inputs):
            if (atom not in made_fresh       # an argument or a constant: the user's array
                    or atom in outputs or atom.aval.shape != out.shape
                    or atom.aval.dtype != out.dtype):
                continue
            if atom not in viewed and last_reader[atom] == index:
                reuse[index] = position
                break
    return reuse


# -- updates in place (`u[t + 1] = ...` in a loop) -------------------------------------------------

def writes_in_place(graph: Graph, sequence: list, indexing: dict, outputs: set,
                    in_place: dict) -> set:
    """The equations, of primitives with an in-place impl (`in_place`: primitive -> impl, the
    rule hook "in_place", e.g. scatter), that may write into their first input's buffer: an
    array an in-place-capable equation of this graph made (never an argument, a constant or a
    view of one), read by nothing later, and of which no view is alive (a value derived from
    it by an equation that is no ufunc may be a view; it must be read no later either).
    `sequence` is the emitter's order, so that "later" is the order the code runs in."""
    equations = graph.equations
    if not any(eqn.primitive in in_place for eqn in equations):
        return set()
    fresh = _fresh_arrays(equations)
    order = [i for item in sequence for i in (item if type(item) is list else (item,))]
    last_read: dict = {}
    for position, item in enumerate(sequence):
        for atom in item_inputs(graph, item, indexing):
            last_read[atom] = position
    position_of = {}
    for position, item in enumerate(sequence):
        for i in (item if type(item) is list else (item,)):
            position_of[i] = position
    owned = set()       # arrays an updating equation made: this call's own buffers
    aliases: dict = {}  # var -> the vars that may share its buffer (itself included)
    found = set()
    for index in order:
        eqn = equations[index]
        if eqn.primitive in in_place and eqn.inputs and type(eqn.inputs[0]) is not Literal:
            target = eqn.inputs[0]
            here = position_of[index]
            if (target in owned and target not in outputs
                    and all(last_read.get(v, -1) <= here and v not in outputs
                            for v in aliases.get(target, (target,)))):
                found.add(index)
            owned.add(eqn.outputs[0])
            continue
        if fresh[index]:
            continue
        # anything else may return a view of its array inputs
        shared = set()
        for atom in eqn.inputs:
            if type(atom) is not Literal and atom.aval.shape:
                shared |= aliases.get(atom, {atom})
        if shared:
            for var in eqn.outputs:
                group = shared | {var}
                for member in group:
                    aliases[member] = aliases.get(member, {member}) | group
    return found
