"""Analyses of a graph that codegen's emitter reads: where values die, which `x[i]` patterns
become plain indexing, and which ufuncs may write into a dead input's buffer."""
from __future__ import annotations

import numpy as np

from xform.ir.core import Graph, Literal
from xform.ir.index_params import boxes_overlap
from xform.ir.registry import hooks_named, primitive_for, rule_for

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
    """reshape equation index -> (slice equation index, index tuple), for a reshape that only
    drops length-1 axes of a slice used by nothing else: `x[i, j]` gives a numpy scalar, and
    `u[t]` a row, for far less than slice + reshape. A scalar is a copy; a row is a view, as
    the slice and its reshape are. Results of the graph keep their own equations."""
    reshape_p, slice_p = primitive_for("reshape"), primitive_for("slice")
    equations = graph.equations
    made_by = {eqn.outputs[0]: i for i, eqn in enumerate(equations) if eqn.primitive is slice_p}
    if not made_by:
        return {}
    found = {}
    for index, eqn in enumerate(equations):
        if eqn.primitive is not reshape_p:
            continue
        (source,) = eqn.inputs
        producer = made_by.get(source)
        if (producer is None or reads[source] != 1 or source in outputs
                or eqn.outputs[0] in outputs):
            continue
        sliced = equations[producer]
        where = _dropping_unit_axes(sliced.params, source.aval.shape, eqn.params["shape"],
                                    sliced.inputs[0].aval.shape)
        if where is not None:
            found[index] = (producer, where)
    return found


def _dropping_unit_axes(params, shape, target, source_shape):
    """The basic index that reads what a slice (`params`, of result `shape`, of an array of
    `source_shape`) reshaped to `target` holds, when that reshape drops length-1 axes only
    (the leftmost ones, where there is a choice: the values come out alike); else None."""
    dropped = sum(n == 1 for n in shape) - sum(n == 1 for n in target)
    if not shape or dropped != len(shape) - len(target):
        return None
    where, kept, full = [], [], []
    for n, start, stop, step, length in zip(shape, params["starts"], params["stops"],
                                            params["steps"], source_shape):
        if n == 1 and dropped:
            where.append(start)
            dropped -= 1
        else:
            where.append(slice(start, stop, step))
            kept.append(n)
        full.append(n == length)
    if tuple(kept) != tuple(target):
        return None
    while len(where) > 1 and full[len(where) - 1] and type(where[-1]) is slice:
        where.pop()           # `u[t]` rather than `u[t, 0:n:1]`: numpy parses it faster
    return tuple(where)


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

class _Views:
    """The values that may be views of one buffer, each with the box of the buffer it may
    show (None: anywhere), filed by the first axis of the box, so that a write of a few rows
    looks at the views of those rows only (a loop's residual rows are hundreds of views)."""

    def __init__(self):
        self.by_start: dict = {}   # the box's first-axis start -> [(var, box)]
        self.anywhere: list = []   # views of no known box, or of a 0-d buffer
        self.longest = 1           # the longest first-axis extent filed

    def add(self, var, box) -> None:
        if not box:
            self.anywhere.append((var, box))
            return
        start, stop = box[0]
        self.by_start.setdefault(start, []).append((var, box))
        self.longest = max(self.longest, stop - start)

    def blocks(self, box, is_live) -> bool:
        """Whether a live view may show an element of `box` (views found dead are dropped)."""
        if box and len(range(box[0][0] - self.longest + 1, box[0][1])) < len(self.by_start):
            starts = range(box[0][0] - self.longest + 1, box[0][1])
        else:
            starts = list(self.by_start)
        for start in starts:
            views = self.by_start.get(start)
            if views and self._blocks(views, box, is_live):
                return True
        return self._blocks(self.anywhere, box, is_live)

    @staticmethod
    def _blocks(views, box, is_live) -> bool:
        views[:] = [(var, shown) for var, shown in views if is_live(var)]
        return any(boxes_overlap(shown, box) for _, shown in views)


def writes_in_place(graph: Graph, sequence: list, indexing: dict, outputs: set,
                    in_place: dict) -> set:
    """The equations, of primitives with an in-place impl (`in_place`: primitive -> impl, the
    rule hook "in_place", e.g. scatter; hook "in_place_applies", eqn -> bool, where only some
    of a primitive's equations have one), that may write into their first input's buffer:
    a buffer an in-place-capable equation, a ufunc or a copy of this graph made (never an
    argument, a constant or a view of one), whose value is read by nothing later, and of
    which no view is alive that may show an element the equation writes. A value that an
    equation which is no ufunc derived from the buffer may be a view; rule hook "region"
    (eqn -> the box of its first input that its result views, or that its update in place
    writes) narrows that to a box, so that the rows a loop keeps (a gradient's residuals
    `u[t]`) do not stop the writes of other rows. A view read by the writing equation itself
    counts as alive. `sequence` is the emitter's order, so that "later" is the order the code
    runs in."""
    equations = graph.equations
    if not any(eqn.primitive in in_place for eqn in equations):
        return set()
    applies, regions = hooks_named("in_place_applies"), hooks_named("region")
    reshape_p, copy_p = primitive_for("reshape"), primitive_for("copy")
    fresh = _fresh_arrays(equations)
    order = [i for item in sequence for i in (item if type(item) is list else (item,))]
    last_read: dict = {}
    position_of = {}
    for position, item in enumerate(sequence):
        for atom in item_inputs(graph, item, indexing):
            last_read[atom] = position
        for i in (item if type(item) is list else (item,)):
            position_of[i] = position
    buffer_of = {}      # a value an updating equation made -> its buffer (the first such value)
    views = {}          # a buffer -> _Views of it
    shows: dict = {}    # a value that may be a view -> [(buffer, box or None)]
    found = set()
    here = 0

    def is_live(var) -> bool:
        return var in outputs or last_read.get(var, -1) >= here

    def region(eqn):
        hook = regions.get(eqn.primitive)
        return None if hook is None else hook(eqn)

    for index in order:
        eqn = equations[index]
        prim = eqn.primitive
        if prim in in_place and eqn.inputs and type(eqn.inputs[0]) is not Literal:
            target, out = eqn.inputs[0], eqn.outputs[0]
            buffer = buffer_of.get(target)
            here = position_of[index]
            if (buffer is not None and target not in outputs
                    and last_read.get(target, -1) <= here
                    and (prim not in applies or applies[prim](eqn))
                    and not views[buffer].blocks(region(eqn), is_live)):
                found.add(index)
                buffer_of[out] = buffer
            else:
                buffer_of[out] = out
                views[out] = _Views()
            continue
        if fresh[index] or prim is copy_p:
            if eqn.outputs[0].aval.shape:       # a new array: this call's own buffer too
                buffer_of[eqn.outputs[0]] = eqn.outputs[0]
                views[eqn.outputs[0]] = _Views()
            continue
        # anything else may return a view of its array inputs
        if index in indexing:        # `x[i]` read from the slice's input directly
            sliced = equations[indexing[index][0]]
            source, box = sliced.inputs[0], region(sliced)
        else:
            source, box = eqn.inputs[0] if eqn.inputs else None, region(eqn)
        shown = []
        for atom in item_inputs(graph, index, indexing):
            if type(atom) is Literal or not atom.aval.shape:
                continue
            if atom in buffer_of:
                narrowed = box if atom is source else None
                shown.append((buffer_of[atom], narrowed))
            else:            # a view of a view: its boxes hold through a reshape only
                keeps = prim is reshape_p and index not in indexing
                shown.extend((buffer, within if keeps else None)
                             for buffer, within in shows.get(atom, ()))
        if shown:
            for var in eqn.outputs:
                shows[var] = shown
                for buffer, within in shown:
                    views[buffer].add(var, within)
    return found
