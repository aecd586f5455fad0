"""check_graph: every var defined once before use, avals equal to what each rule promises."""
from __future__ import annotations

from xform.errors import GraphCheckError
from xform.ir.core import Graph, Literal, subgraphs
from xform.ir.pprint import pprint_graph


def _fail(graph: Graph, index: int, message: str):
    lines = pprint_graph(graph).splitlines()
    lo, hi = max(1, index - 4), min(len(lines), index + 7)
    context = "\n".join(("--> " if i == index + 1 else "    ") + lines[i]
                        for i in range(lo, hi))
    eqn = graph.equations[index] if 0 <= index < len(graph.equations) else None
    raise GraphCheckError(f"{message}\n{context}", eqn.source if eqn is not None else None)


def check_graph(graph: Graph) -> None:
    """Raise GraphCheckError (listing the equations around the bad one) if `graph` is malformed."""
    from xform.rules.registry import RULES
    defined = set()

    def define(var, index):
        if var in defined:
            _fail(graph, index, f"variable defined twice ({var.aval.str_short()})")
        defined.add(var)

    for var in graph.inputs:
        define(var, -1)
    for var, value in graph.consts:
        define(var, -1)
        if tuple(value.shape) != var.aval.shape or value.dtype != var.aval.dtype:
            _fail(graph, -1, f"constant of shape {value.shape} {value.dtype} bound to "
                             f"{var.aval.str_short()}")
    for index, eqn in enumerate(graph.equations):
        for atom in eqn.inputs:
            if type(atom) is not Literal and atom not in defined:
                _fail(graph, index, f"'{eqn.primitive}' uses a variable before it is defined")
        for sub in subgraphs(eqn.params):
            check_graph(sub)
        rules = RULES.get(eqn.primitive)
        if rules is not None and rules.abstract_eval is not None:
            expected = rules.abstract_eval(*[a.aval for a in eqn.inputs], **eqn.params)
            expected = expected if eqn.primitive.multiple_results else [expected]
            got = [v.aval for v in eqn.outputs]
            if [(e.shape, e.dtype) for e in expected] != [(g.shape, g.dtype) for g in got]:
                _fail(graph, index, f"'{eqn.primitive}' outputs {got} but its abstract eval "
                                    f"gives {list(expected)}")
        for var in eqn.outputs:
            define(var, index)
    for atom in graph.outputs:
        if type(atom) is not Literal and atom not in defined:
            _fail(graph, len(graph.equations), "an output is never defined")
