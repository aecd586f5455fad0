"""Reads through writes. A static slice of a value a `scatter` made takes the written value
when it reads exactly the positions written (by that scatter or an earlier one of its chain,
with no write to those positions in between); then a scatter none of whose written elements
is read is dropped (its input stands for its result), with the copy that guarded a read of
its box. A loop filling a preallocated array then computes what one keeping its rows in a
list does: `u[t + 1] = f(u[t])` reads back what it wrote, and a gradient's reverse pass
zeroes the cotangent's rows (the transpose of each write) that nothing reads again."""
from __future__ import annotations

import attrs

from xform.ir.core import Equation, Graph, Literal, Params
from xform.ir.index_params import boxes_overlap, index_window, slice_box, slice_window
from xform.ir.nx import with_equations
from xform.ir.registry import hooks_named, primitive_for

_ALL = ()        # read everywhere (a box has one (start, stop) per axis; a 0-d value has none)
_MAX_WALK = 64   # scatters a read steps over one by one (a chain's box bounds the rest)


class _Roles:
    def __init__(self):
        self.scatter, self.slice = primitive_for("scatter"), primitive_for("slice")
        self.reshape, self.copy = primitive_for("reshape"), primitive_for("copy")
        self.regions, self.writers = hooks_named("region"), hooks_named("in_place")


def forward_writes(graph: Graph) -> Graph:
    """`graph` with reads of written values forwarded and unread writes dropped (see the
    module docstring). The values are unchanged; only which equations compute them.

    >>> def fill(x):
    ...     u = np.zeros((3, 2)); u[0] = x
    ...     u[1] = u[0] * 2.0
    ...     return u[1] + u[0]
    >>> from xform.passes import forward_writes, eliminate_dead_code
    >>> print(eliminate_dead_code(forward_writes(xform.make_graph(fill)(np.ones(2)))))
    { lambda a:f64[2] . let
        b:f64[2] = multiply a 2.0
        c:f64[2] = add b a
      in (c) }
    """
    roles = _Roles()
    if not any(eqn.primitive is roles.scatter for eqn in graph.equations):
        return graph
    equations, outputs = _reads_through_writes(graph, roles)
    equations, outputs = _without_unread_writes(equations, outputs, roles)
    if len(equations) == len(graph.equations) and all(
            a is b for a, b in zip(equations, graph.equations)):
        return graph
    return with_equations(graph, equations, outputs)


def _reads_through_writes(graph, roles):
    """One forward sweep: the equations with each read of a written value forwarded, and the
    graph's outputs (some now other atoms)."""
    writes = {}     # scatter result -> (input, updates, window, box, the box its chain wrote)
    same = {}       # var -> the atom now standing for it
    forwarded = {}  # a read replaced by a reshape of the written value -> that value
    results = {a for a in graph.outputs if type(a) is not Literal}
    # a read returned (itself or reshaped) stays a read of an argument's value: numpy's result
    # is a new array (a view of the buffer), never one sharing the caller's memory
    returned = results | {eqn.inputs[0] for eqn in graph.equations
                          if eqn.primitive is roles.reshape and eqn.outputs[0] in results}
    arguments = set(graph.inputs) | {var for var, _ in graph.consts}
    kept = []

    def resolved(atom):
        while type(atom) is not Literal and atom in same:
            atom = same[atom]
        return atom

    for eqn in graph.equations:
        read = eqn.inputs[0] if eqn.inputs else None
        inputs = tuple(resolved(a) for a in eqn.inputs)
        if inputs != eqn.inputs:
            eqn = attrs.evolve(eqn, inputs=inputs)
        prim, out = eqn.primitive, eqn.outputs[0] if eqn.outputs else None
        if prim is roles.scatter and len(inputs) == 2 and type(inputs[0]) is not Literal:
            x, updates = inputs
            window = index_window(x.aval.shape, eqn.params["index"])
            box = roles.regions[prim](eqn)
            chain = writes.get(x)
            writes[out] = (x, updates, window, box,
                           box if chain is None else _union(chain[4], box))
        elif prim is roles.slice and inputs[0] in writes:
            value = _read(writes, inputs[0], slice_window(**eqn.params),
                          slice_box(**eqn.params))
            if value is not None and not (out in returned and value in arguments):
                forwarded[out] = value
                if type(value) is not Literal and value.aval == out.aval:
                    same[out] = value
                    continue
                eqn = Equation(roles.reshape, (value,), (out,),
                               Params({"shape": out.aval.shape}), eqn.source, eqn.origin)
        elif prim is roles.reshape and read in forwarded:
            value = forwarded[out] = forwarded[read]     # a read `u[t]`: slice, then reshape
            if type(value) is not Literal and value.aval == out.aval:
                same[out] = value
                continue
            eqn = attrs.evolve(eqn, inputs=(value,))
        elif prim is roles.copy and read in forwarded and out not in returned:
            # it copied a read out of the buffer (the transpose of a write does, before it
            # zeroes the row): the written value itself needs no copy
            same[out] = inputs[0]
            continue
        kept.append(eqn)
    return kept, [resolved(a) for a in graph.outputs]


def _read(writes, source, window, box):
    """The value a scatter wrote at exactly `window` (bounded by `box`) into `source` or an
    earlier value of its chain of scatters, with no write in between touching the box; None
    when there is none. (A read of a box none of them wrote keeps reading `source`: read
    from an earlier value, it would keep that alive past the writes that could otherwise go
    in place.)"""
    for _ in range(_MAX_WALK):
        found = writes.get(source)
        if found is None:
            return None
        x, updates, written_window, written_box, chain_box = found
        if not boxes_overlap(box, chain_box):
            return None
        if window == written_window:
            return updates
        if boxes_overlap(box, written_box):
            return None
        source = x
    return None


def _union(seen, box):
    """The bounding box of two (None: nothing; _ALL: everything)."""
    if seen is None:
        return box
    if box is None:
        return seen
    if seen is _ALL or box is _ALL or len(seen) != len(box):
        return _ALL
    return tuple((min(a, c), max(b, d)) for (a, b), (c, d) in zip(seen, box))


def _within(box, region) -> bool:
    """Whether `box` lies inside `region` (both boxes)."""
    return (box is not _ALL and region is not None and len(box) == len(region)
            and all(c <= a and b <= d or a >= b for (a, b), (c, d) in zip(box, region)))


def _without_unread_writes(equations, outputs, roles):
    """The equations without the scatters none of whose written elements is read, and the
    copies of reads of their boxes that are no result: a backward sweep bounds, per value,
    the box its readers look at (a slice or a gather without index arrays: its box, rule hook
    "region"; a scatter: what its readers look at outside the box it writes; anything else:
    everything)."""
    seen = {a: _ALL for a in outputs if type(a) is not Literal}
    dropped = {}                 # a dropped scatter's result -> its input
    written = {}                 # a dropped scatter's input -> the boxes written into it
    regions, writers = roles.regions, roles.writers
    for eqn in reversed(equations):
        out = eqn.outputs[0] if len(eqn.outputs) == 1 else None
        looked = seen.get(out) if out is not None else _ALL
        prim = eqn.primitive
        first = eqn.inputs[0] if eqn.inputs else None
        box = regions[prim](eqn) if prim in regions else None
        rest = eqn.inputs
        if prim is roles.scatter and box is not None and type(first) is not Literal:
            rest = eqn.inputs[1:]
            if looked is None or (looked is not _ALL and not boxes_overlap(looked, box)):
                dropped[out] = first
                written.setdefault(first, []).append(box)
                seen[first] = _union(seen.get(first), looked)
                continue
            seen[first] = _union(seen.get(first), None if _within(looked, box) else looked)
        elif prim in regions and prim not in writers and type(first) is not Literal:
            rest = eqn.inputs[1:]
            if looked is not None:
                seen[first] = _union(seen.get(first), _ALL if box is None else box)
        for atom in rest:
            if type(atom) is not Literal:
                seen[atom] = _ALL
    if not dropped:
        return equations, outputs
    same = dict(dropped)
    same.update(_unguarded_copies(equations, written, outputs, roles))

    def resolved(atom):
        while type(atom) is not Literal and atom in same:
            atom = same[atom]
        return atom

    kept = []
    for eqn in equations:
        if eqn.outputs and eqn.outputs[0] in same:
            continue
        inputs = tuple(resolved(a) for a in eqn.inputs)
        kept.append(eqn if inputs == eqn.inputs else attrs.evolve(eqn, inputs=inputs))
    return kept, [resolved(a) for a in outputs]


def _unguarded_copies(equations, written, outputs, roles) -> dict:
    """copy result -> the read it copied, for the copies of a read (a slice, or a reshape of
    one) inside a box a dropped write would have written: the compiled code copied only so
    that the write could go in place while the read was in use."""
    results = {a for a in outputs if type(a) is not Literal}
    read_box = {}                # a read of a written value -> its box
    found = {}
    for eqn in equations:
        prim = eqn.primitive
        if prim in roles.regions and prim not in roles.writers and eqn.inputs[0] in written:
            box = roles.regions[prim](eqn)
            if box is not None and any(_within(box, w) for w in written[eqn.inputs[0]]):
                read_box[eqn.outputs[0]] = box
        elif prim is roles.reshape and eqn.inputs[0] in read_box:
            read_box[eqn.outputs[0]] = read_box[eqn.inputs[0]]
        elif prim is roles.copy and eqn.inputs[0] in read_box and eqn.outputs[0] not in results:
            found[eqn.outputs[0]] = eqn.inputs[0]
    return found


__all__ = ["forward_writes"]
