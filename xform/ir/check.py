"""check_graph: every var defined once before use, avals equal to what each rule promises."""
from __future__ import annotations

import numpy as np

from xform.errors import GraphCheckError
from xform.ir.core import Graph, Literal, Var, subgraphs
from xform.ir.pprint import Names, listing

_CONTEXT = 5  # equations shown on each side of the bad one


def _fail(graph: Graph, index: int, message: str, var=None):
    """Raise GraphCheckError for equation `index` (-1: the inputs, len(equations): the
    outputs). `{var}` in `message` becomes `var`'s name in the listing shown."""
    names = Names()
    head, equations, tail = listing(graph, names)
    entries = [head, *equations, tail]
    mark = index + 1
    lo, hi = max(0, mark - _CONTEXT), min(len(entries), mark + _CONTEXT + 1)
    lines = ["    ..."] if lo > 0 else []
    for i in range(lo, hi):
        first, *rest = entries[i].splitlines()
        lines.append(("--> " if i == mark else "    ") + first)
        lines.extend("    " + line for line in rest)
    if hi < len(entries):
        lines.append("    ...")
    if var is not None:
        message = message.replace("{var}", f"{names(var)}:{var.aval.str_short()}")
    eqn = graph.equations[index] if 0 <= index < len(graph.equations) else None
    raise GraphCheckError(f"{message}\n" + "\n".join(lines),
                          eqn.source if eqn is not None else None)


def _same_type(expected, got) -> bool:
    # weak_type is a staging-time promotion hint that passes may drop; shape and dtype are
    # what the generated code relies on.
    return (len(expected) == len(got)
            and all(e.shape == g.shape and e.dtype == g.dtype for e, g in zip(expected, got)))


def check_graph(graph: Graph) -> None:
    """Raise GraphCheckError (listing the equations around the bad one) if `graph` is malformed.

    >>> from xform.ir.check import check_graph
    >>> check_graph(xform.make_graph(np.sin)(1.0))    # well formed: returns None
    """
    from xform.ir.registry import RULES
    defined = set()

    def define(var, index):
        if type(var) is not Var:
            _fail(graph, index, f"a binder is not a Var: {var!r}")
        if var in defined:
            _fail(graph, index, "variable {var} is defined twice", var)
        defined.add(var)

    def use(atom, index, what):
        if type(atom) is Literal:
            value_shape = np.shape(atom.value)
            if value_shape != atom.aval.shape:
                _fail(graph, index, f"{what}: literal {atom.value!r} of shape {value_shape} "
                                    f"has type {atom.aval.str_short()}")
        elif type(atom) is not Var:
            _fail(graph, index, f"{what}: an input is neither a Var nor a Literal: {atom!r}")
        elif atom not in defined:
            _fail(graph, index, f"{what} uses {{var}} before it is defined", atom)

    for var in graph.inputs:
        define(var, -1)
    for var, value in graph.consts:
        define(var, -1)
        shape, dtype = np.shape(value), np.asarray(value).dtype
        if shape != var.aval.shape or dtype != var.aval.dtype:
            _fail(graph, -1, f"constant of shape {shape} {dtype} bound to {{var}}", var)
    for index, eqn in enumerate(graph.equations):
        for atom in eqn.inputs:
            use(atom, index, f"'{eqn.primitive}'")
        for sub in subgraphs(eqn.params):
            check_graph(sub)
        rules = RULES.get(eqn.primitive)
        if rules is not None and rules.abstract_eval is not None:
            try:
                expected = rules.abstract_eval(*[a.aval for a in eqn.inputs], **eqn.params)
            except Exception as err:  # noqa: BLE001  (any rule failure is a malformed eqn)
                _fail(graph, index, f"'{eqn.primitive}' rejects its inputs: "
                                    f"{type(err).__name__}: {err}")
            expected = list(expected) if eqn.primitive.multiple_results else [expected]
            got = [v.aval for v in eqn.outputs]
            if not _same_type(expected, got):
                _fail(graph, index, f"'{eqn.primitive}' outputs {got} but its abstract eval "
                                    f"gives {expected}")
        for var in eqn.outputs:
            define(var, index)
    for atom in graph.outputs:
        use(atom, len(graph.equations), "an output")
