"""Sums of zero-padded pieces become one `pad_sum`: the cotangent of a loop over `x[i]` is one
`pad` of a scalar per use, summed by a chain of full-size `add`s (O(n^2) work and two numpy
calls per use); afterwards it is one equation that adds the scalars into one array."""
from __future__ import annotations

import operator

import numpy as np

from xform.ir.avals import ShapedArray
from xform.ir.core import Equation, Graph, Literal, Params, Var
from xform.ir.nx import with_equations
from xform.ir.registry import primitive_for
from xform.ir.window_params import fits, full_window, term_shape

_SUMMABLE_KINDS = "fciu"  # not bool: add is `or` there, and no cotangent is boolean
_primitive_of = operator.attrgetter("primitive")


class _Primitives:
    """What the pass recognises and emits, by role (xform.ir.registry.primitive_for)."""

    def __init__(self):
        self.add, self.pad = primitive_for("add"), primitive_for("pad")
        self.pad_sum, self.reshape = primitive_for("pad_sum"), primitive_for("reshape")
        self.slice, self.scatter = primitive_for("slice"), primitive_for("scatter")


def _is_sum_node(eqn, add_p) -> bool:
    """`add` of two Vars of exactly its output's shape and dtype (no broadcasting)."""
    if eqn.primitive is not add_p or len(eqn.inputs) != 2:
        return False
    out = eqn.outputs[0].aval
    return out.dtype.kind in _SUMMABLE_KINDS and all(
        type(a) is Var and a.aval.shape == out.shape and a.aval.dtype == out.dtype
        for a in eqn.inputs)


def _is_positive_zero(value, dtype) -> bool:
    value = np.asarray(value, dtype)
    return value.shape == () and not any(value.tobytes())


def _pad_window(eqn, pad_p):
    """The window a zero-valued pad puts its operand in (None for any other equation)."""
    if eqn.primitive is not pad_p:
        return None
    x, value = eqn.inputs
    if type(value) is not Literal or not _is_positive_zero(value.value, x.aval.dtype):
        return None
    return tuple((lo, lo + (n - 1) * (interior + 1) + 1 if n else lo, interior + 1)
                 for n, (lo, _, interior) in zip(x.aval.shape, eqn.params["widths"]))


def accumulate_pads(graph: Graph) -> Graph:
    """Replace each tree of `add`s whose leaves include zero-valued `pad`s (or `pad_sum`s)
    by one `pad_sum` of the pads' operands, the other leaves added over the whole array.

    A tree is a maximal set of same-shape `add`s whose intermediate sums are read only by
    the next `add` up; its `pad_sum` takes the root's place (every operand is defined before
    the root) and the tree's equations go. A pad read elsewhere too stays for those readers
    and its operand still joins the sum; the scalar reshapes feeding removed pads are left to
    eliminate_dead_code. One sweep with use counts: linear in the size of the graph.

    Notes: the terms are added in the tree's left-to-right order, which is the order the
    adds computed for the left-leaning chains that reverse mode accumulates. For other trees
    with overlapping windows the sum is reassociated and may differ in the last bit, and a
    zero that the chain of adds gave as -0.0 comes out as +0.0: acceptable for cotangents,
    which these sums are.

    >>> from xform.passes import accumulate_pads
    >>> g = xform.make_graph(xform.grad(lambda x: sum(np.sin(x[i]) for i in range(3))))(np.ones(3))
    >>> g.equations[-1], accumulate_pads(g).equations[-1]    # 3 pads, 2 adds -> one pad_sum
    (Equation(add, 2 in, 1 out), Equation(pad_sum, 3 in, 1 out))
    """
    equations = graph.equations
    prims = _Primitives()
    if not {prims.pad, prims.pad_sum} & set(map(_primitive_of, equations)):
        return graph            # no tree has a pad among its leaves
    # Only the values of the primitives a tree walk visits are followed (few of a graph's),
    # so the tables stay small: each entry costs the more, the larger the graph.
    walked = {prims.add, prims.pad, prims.pad_sum, prims.reshape}
    producer: dict = {}  # such a value -> the index of the equation defining it
    reader: dict = {}    # such a value -> the index of its only reader; -1 if read twice or
    for index, eqn in enumerate(equations):    # returned, -2 if not read yet
        for atom in eqn.inputs:
            seen = reader.get(atom)
            if seen is not None:
                reader[atom] = index if seen == -2 else -1
        if eqn.primitive in walked:
            for var in eqn.outputs:
                producer[var] = index
                reader[var] = -2
    for atom in graph.outputs:
        if type(atom) is Var:
            reader[atom] = -1
    add_p = prims.add
    sum_nodes = [eqn.primitive is add_p and _is_sum_node(eqn, add_p) for eqn in equations]

    def absorbed(var) -> bool:
        """Whether `var`'s only reader is a sum node, which makes it part of that tree."""
        index = reader.get(var, -1)
        return index >= 0 and sum_nodes[index]

    removed = [False] * len(equations)
    replacements = {}  # root index -> equations emitted in its place
    for root, eqn in enumerate(equations):
        if not sum_nodes[root] or absorbed(eqn.outputs[0]):
            continue
        shape = eqn.outputs[0].aval.shape
        terms, dead, placed = [], [], 0
        stack = list(reversed(eqn.inputs))
        while stack:
            atom = stack.pop()
            index = producer.get(atom)
            if index is None:   # an input, a constant, or made by another primitive
                terms.append((atom, full_window(shape)))
                continue
            leaf = equations[index]
            single = absorbed(atom)
            if single and sum_nodes[index]:
                dead.append(index)
                stack.extend(reversed(leaf.inputs))
                continue
            window = _pad_window(leaf, prims.pad)
            if window is not None:
                terms.append((leaf.inputs[0], window))
                placed += 1
                if single:
                    dead.append(index)
            elif single and leaf.primitive is prims.pad_sum:
                terms.extend(zip(leaf.inputs, leaf.params["windows"]))
                placed += 1
                dead.append(index)
            else:
                terms.append((atom, full_window(shape)))
        if not placed:
            continue
        for index in dead:
            removed[index] = True
        replacements[root] = _pad_sum_equations(eqn, terms, producer, equations, prims)
    if not replacements:
        return graph
    kept = []
    for index, eqn in enumerate(equations):
        if index in replacements:
            kept.extend(replacements[index])
        elif not removed[index]:
            kept.append(eqn)
    return with_equations(graph, kept)


def _pad_sum_equations(root, terms, producer, equations, prims) -> list:
    """The `pad_sum` standing for `root`, after any reshapes its one-element operands need to
    be 0-d (and the chains of `_scalar_chains`)."""
    emitted, scalar_terms = [], []
    for atom, window in terms:
        if atom.aval.shape != term_shape(window):
            atom = _as_scalar(atom, root, producer, equations, emitted, prims.reshape)
        else:
            atom = _without_unit_axes(atom, window, producer, equations, prims)
        scalar_terms.append((atom, window))
    scalar_terms = _scalar_chains(scalar_terms, root, emitted, prims.add)
    update = _window_update(root, scalar_terms, prims)
    if update is not None:
        return emitted + update
    out = root.outputs[0]
    params = Params({"shape": out.aval.shape, "dtype": out.aval.dtype,
                     "windows": tuple(window for _, window in scalar_terms)})
    emitted.append(Equation(prims.pad_sum, [atom for atom, _ in scalar_terms], root.outputs,
                            params, root.source, root.origin))
    return emitted


def _window_update(root, terms, prims):
    """`x[w] = x[w] + a + b` for a sum of a whole array `x` and terms of one window `w` (a
    row's cotangents added into a loop's cotangent array), as equations: compiled code writes
    it into x's buffer when that is dead, where a pad_sum makes a new array. The same adds in
    the same order (pad_sum's starts from +0.0, so a -0.0 of x stays -0.0 here). None for
    any other sum."""
    out = root.outputs[0].aval
    (whole, first), rest = terms[0], terms[1:]
    if (not rest or first != full_window(out.shape) or whole.aval != out
            or term_shape(first) != out.shape):
        return None
    window, shape = rest[0][1], rest[0][0].aval.shape
    if any(w != window or a.aval.shape != shape or a.aval.dtype != out.dtype
           for a, w in rest):
        return None
    dropped = len(window) - len(shape)     # the leading length-1 axes the terms leave out
    index = [start for start, _, _ in window[:dropped]] + list(window[dropped:])
    while len(index) > dropped and index[-1] == (0, out.shape[len(index) - 1], 1):
        index.pop()      # `x[t]` rather than `x[t, 0:n:1]`: numpy parses it faster
    index = tuple(index)
    starts, stops, steps = zip(*window)
    source, origin = root.source, root.origin
    read = Var(ShapedArray(tuple(len(range(*bounds)) for bounds in window), out.dtype))
    emitted = [Equation(prims.slice, (whole,), (read,),
                        Params({"starts": starts, "stops": stops, "steps": steps}),
                        source, origin)]
    if read.aval.shape != shape:
        row = Var(ShapedArray(shape, out.dtype))
        emitted.append(Equation(prims.reshape, (read,), (row,), Params({"shape": shape}),
                                source, origin))
        read = row
    for term, _ in rest:
        total = Var(ShapedArray(shape, out.dtype))
        emitted.append(Equation(prims.add, (read, term), (total,), Params({}), source,
                                origin))
        read = total
    emitted.append(Equation(prims.scatter, (whole, read), root.outputs,
                            Params({"index": index}), source, origin))
    return emitted


_F64 = np.dtype(np.float64)


def _scalar_chains(terms, root, emitted, add_p) -> list:
    """`terms` with the 0-d float64 terms of each element added up first by a chain of `add`s
    in their order, when every term is one (pad_sum adds each element's terms in order from
    +0.0, so the chain plus pad_sum's +0.0 gives the same bits, -0.0 included).

    Why: a loop reading `x[i]` many times gives many terms per element (400 for one loop of
    400 products); generated code computes 0-d float64 adds as Python floats, where the
    chain costs less than converting each term for pad_sum, and its non-finite check is one
    check of the total. Other dtypes keep one pad_sum: their adds would be numpy calls."""
    if any(atom.aval.shape or atom.aval.dtype != _F64 for atom, _ in terms):
        return terms
    chains: dict = {}      # the element's starts -> [its total so far, its window]
    for atom, window in terms:
        element = tuple(start for start, _, _ in window)
        chain = chains.get(element)
        if chain is None:
            chains[element] = [atom, window]
            continue
        total = Var(ShapedArray((), _F64))
        emitted.append(Equation(add_p, (chain[0], atom), (total,), Params({}), root.source,
                                root.origin))
        chain[0] = total
    if len(chains) == len(terms):
        return terms
    return [(total, window) for total, window in chains.values()]


def _without_unit_axes(atom, window, producer, equations, prims):
    """The value a reshape gave `atom` its leading length-1 axes from, when it fits `window`
    without them (the cotangent of a row `u[t]` is its reshape to (1, n): no reshape per use
    then), else `atom`."""
    index = producer.get(atom)
    if index is None or equations[index].primitive is not prims.reshape:
        return atom
    source = equations[index].inputs[0]
    return source if type(source) is Var and fits(source.aval.shape, window) else atom


def _as_scalar(atom, root, producer, equations, emitted, reshape_p):
    """`atom` (one element) as a 0-d value: the scalar a reshape made it from when there is
    one (the cotangent of `x[i]` is `reshape(scalar)`), else a new reshape."""
    index = producer.get(atom)
    if index is not None and equations[index].primitive is reshape_p:
        source = equations[index].inputs[0]
        if not source.aval.shape:
            return source
    scalar = Var(ShapedArray((), atom.aval.dtype))
    emitted.append(Equation(reshape_p, (atom,), (scalar,), Params({"shape": ()}),
                            root.source, root.origin))
    return scalar


__all__ = ["accumulate_pads"]
