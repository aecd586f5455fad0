"""Algebraic simplification: a table of rewrite rules (data) and one small driver. A rule
matches an equation by primitive, reads its producers, and returns the equations standing
for it; rules that change floating-point rounding are marked and run only under
`xform.config.algebra == "reassociate"` (the default, as XLA does; "exact" keeps numpy's
bits). Each rule is tested for value equality in tests/passes/test_simplify.py."""
from __future__ import annotations

import attrs
import numpy as np

from xform.ir.avals import ShapedArray
from xform.ir.core import Equation, Graph, Params, Var
from xform.ir.rules import elementwise_primitives
from xform.passes.rewrite import GraphRewriter


@attrs.frozen
class Rule:
    """`rewrite(eqn, producer) -> list of Equations | None`: the equations computing `eqn`'s
    outputs (the same Vars), or None when it does not match. `exact`: whether the rewrite
    gives numpy's bits on every input (False: it reassociates sums or products)."""

    name: str
    primitive: str
    rewrite: object
    exact: bool
    doc: str


def _full_sum(eqn) -> bool:
    """A sum over every axis of a floating array, in its own dtype."""
    x, out = eqn.inputs[0], eqn.outputs[0]
    return (type(x) is Var and len(eqn.params["axes"]) == x.aval.ndim
            and out.aval.dtype == x.aval.dtype and x.aval.dtype.kind == "f")


def _multiply_p():
    return next(p for p in elementwise_primitives() if p.name == "multiply")


def _sum_of(sum_p, x: Var, out: Var | None = None) -> Equation:
    out = out if out is not None else Var(ShapedArray((), x.aval.dtype))
    return Equation(sum_p, [x], [out],
                    Params({"axes": tuple(range(x.aval.ndim)), "dtype": None}))


def _sum_of_reshape(eqn, producer):
    if not _full_sum(eqn):
        return None
    inner = producer.get(eqn.inputs[0])
    if inner is None or inner.primitive.name != "reshape" or type(inner.inputs[0]) is not Var:
        return None
    return [_sum_of(eqn.primitive, inner.inputs[0], eqn.outputs[0])]


def _sum_of_outer_product(eqn, producer):
    if not _full_sum(eqn):
        return None
    inner = producer.get(eqn.inputs[0])
    if inner is None or inner.primitive.name != "multiply":
        return None
    a, b = inner.inputs
    if type(a) is not Var or type(b) is not Var or a.aval.ndim != b.aval.ndim:
        return None
    if a.aval.dtype != b.aval.dtype or a.aval.dtype != eqn.outputs[0].aval.dtype:
        return None
    # Each axis spans at most one operand: the product's sum is the product of the sums.
    if any(m > 1 and n > 1 for m, n in zip(a.aval.shape, b.aval.shape)):
        return None
    sum_a, sum_b = _sum_of(eqn.primitive, a), _sum_of(eqn.primitive, b)
    product = Equation(inner.primitive, [sum_a.outputs[0], sum_b.outputs[0]],
                       [eqn.outputs[0]])
    return [sum_a, sum_b, product]


def _sum_of_broadcast(eqn, producer):
    if not _full_sum(eqn):
        return None
    inner = producer.get(eqn.inputs[0])
    if inner is None or inner.primitive.name != "broadcast_to" or type(inner.inputs[0]) is not Var:
        return None
    x = inner.inputs[0]
    if x.aval.dtype != eqn.outputs[0].aval.dtype:
        return None
    copies = eqn.inputs[0].aval.size // max(x.aval.size, 1)
    total = _sum_of(eqn.primitive, x)
    scale = Equation(_multiply_p(),
                     [total.outputs[0], _literal(copies, x.aval.dtype)], [eqn.outputs[0]])
    return [total, scale]


def _literal(value, dtype):
    from xform.passes.rewrite import literal_of
    return literal_of(value, ShapedArray((), dtype))


RULES = (
    Rule("sum of a reshape", "sum", _sum_of_reshape, exact=False,
         doc="sum(reshape(x)) = sum(x): numpy's pairwise order follows the shape"),
    Rule("sum of an outer product", "sum", _sum_of_outer_product, exact=False,
         doc="sum(x * y) = sum(x) * sum(y) when no axis spans both (kron, outer): the "
             "product is never built; the rounding of one sum of products changes"),
    Rule("sum of a broadcast", "sum", _sum_of_broadcast, exact=False,
         doc="sum(broadcast_to(x)) = sum(x) * copies: one multiply for repeated additions"),
)


def simplify(graph: Graph, exact: bool = False, rules=RULES) -> Graph:
    """Apply `rules` (only the exact ones with `exact`) to each equation of `graph`, in
    order, until none matches; rewrites feed later matches (producers are the rewritten
    equations). Returns `graph` itself when nothing matched; dead producers stay for DCE.

    >>> from xform.passes.simplify import simplify
    >>> graph = xform.make_graph(lambda a, b: np.sum(np.kron(a, b)))(np.ones((2, 2)), np.ones(3))
    >>> [e.primitive.name for e in xform.passes.dce(simplify(graph)).equations]
    ['sum', 'sum', 'multiply']
    """
    table = {}
    for rule in rules:
        if rule.exact or not exact:
            table.setdefault(rule.primitive, []).append(rule)
    if not table or not any(eqn.primitive.name in table for eqn in graph.equations):
        return graph
    rewriter = GraphRewriter(graph)
    producer = {}

    def emit(eqn, depth=0):
        for rule in table.get(eqn.primitive.name, ()) if depth < 8 else ():
            new = rule.rewrite(eqn, producer)
            if new is not None:
                for item in new:
                    emit(item, depth + 1)
                return
        rewriter.emit(eqn)
        producer.update((v, eqn) for v in eqn.outputs)

    for eqn in graph.equations:
        emit(rewriter.substituted(eqn))
    return rewriter.build()


def simplify_exactly(graph: Graph) -> Graph:
    """`simplify` with only the rules that keep numpy's bits (xform.config.algebra "exact")."""
    return simplify(graph, exact=True)


__all__ = ["RULES", "Rule", "simplify", "simplify_exactly"]
