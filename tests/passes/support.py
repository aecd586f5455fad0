"""Shared checks for the pass tests: run a pass, print before/after, and hold it to the pass
contract (check() passes, same results interpreted and compiled, idempotent, input intact)."""
import numpy as np

import xform
from xform.codegen import compile_graph
from xform.ir.avals import ShapedArray, aval_of
from xform.ir.core import Equation, Graph, Literal, Var
from xform.passes.rewrite import GraphRewriter, literal_of
from xform.ir.registry import RULES

F64 = ShapedArray((), np.float64)


def assert_same_results(before: Graph, after: Graph, *args):
    want = xform.eval_graph(before, *args)
    for got in (xform.eval_graph(after, *args), compile_graph(after)(*args)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
            assert np.asarray(g).dtype == np.asarray(w).dtype


def run_pass(run, graph: Graph, *args, **options) -> Graph:
    """`run(graph)` after checking the contract of a pass on it (for these `args`)."""
    text = str(graph)
    after = run(graph, **options)
    print(f"before:\n{graph}\nafter {run.__name__}:\n{after}")
    assert str(graph) == text, "the pass changed its input graph"
    after.check()
    assert_same_results(graph, after, *args)
    again = run(after, **options)
    assert str(again) == str(after), "the pass is not idempotent"
    assert again is after, "a second run found something to change but returned it equal"
    return after


def lit(value) -> Literal:
    """A Literal as staging makes it (Python scalars are weakly typed)."""
    return Literal(value, aval_of(value))


class Builder:
    """Hand-built graphs: `b = Builder(); x = b.input(F64); y = b(sin_p, x); b.graph(y)`."""

    def __init__(self):
        self.inputs, self.consts, self.equations = [], [], []

    def input(self, aval=F64) -> Var:
        self.inputs.append(Var(aval))
        return self.inputs[-1]

    def const(self, value) -> Var:
        value = np.asarray(value)
        self.consts.append((Var(ShapedArray(value.shape, value.dtype)), value))
        return self.consts[-1][0]

    def __call__(self, prim, *inputs, **params):
        out = RULES[prim].abstract_eval(*[a.aval for a in inputs], **params)
        outs = [Var(a) for a in out] if prim.multiple_results else [Var(out)]
        self.equations.append(Equation(prim, inputs, outs, params))
        return outs if prim.multiple_results else outs[0]

    def graph(self, *outputs) -> Graph:
        return Graph(self.inputs, self.consts, self.equations, outputs).check()


def primitives(graph: Graph) -> list:
    return [eqn.primitive.name for eqn in graph.equations]


def specialize(graph: Graph, index: int, value) -> Graph:
    """`graph` with input `index` replaced by the Literal `value` (what a known argument
    looks like after, e.g., a static argument or a folded transform)."""
    var = graph.inputs[index]
    rewriter = GraphRewriter(graph)
    rewriter.replace(var, literal_of(value, var.aval))
    for eqn in graph.equations:
        rewriter.emit(rewriter.substituted(eqn))
    outputs = [rewriter.read(a) for a in graph.outputs]
    inputs = graph.inputs[:index] + graph.inputs[index + 1:]
    return Graph(inputs, graph.consts, rewriter.equations, outputs)


__all__ = ["Builder", "F64", "assert_same_results", "lit", "primitives", "run_pass",
           "specialize"]
