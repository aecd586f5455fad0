"""eliminate_common_subexpressions: merge equal equations (primitive, inputs, params)."""
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given

import xform
from xform.ir.avals import ShapedArray
from xform.ir.core import Primitive
from xform.passes import eliminate_common_subexpressions as cse
from xform.passes import eliminate_dead_code
from xform.rules.binary import add_p, multiply_p
from xform.rules.reduce import sum_p
from xform.ir.registry import register
from xform.rules.unary import cos_p, sin_p
from xform.testing import strategies as xst

from tests.passes.support import F64, Builder, lit, primitives, run_pass

M23 = ShapedArray((2, 3), np.float64)

# name, input aval, build(b, x) -> outputs, primitives left after cse (and dce)
CseCase = namedtuple("CseCase", "name aval build left")

CASES = [
    CseCase("same unary twice", F64, lambda b, x: b(add_p, b(sin_p, x), b(sin_p, x)),
            ["sin", "add"]),
    CseCase("merges cascade", F64,
            lambda b, x: b(add_p, b(cos_p, b(sin_p, x)), b(cos_p, b(sin_p, x))),
            ["sin", "cos", "add"]),
    CseCase("different primitives stay", F64, lambda b, x: b(add_p, b(sin_p, x), b(cos_p, x)),
            ["sin", "cos", "add"]),
    CseCase("equal literals", F64,
            lambda b, x: b(add_p, b(multiply_p, x, lit(2.0)), b(multiply_p, x, lit(2.0))),
            ["multiply", "add"]),
    CseCase("literals differing in value", F64,
            lambda b, x: b(add_p, b(multiply_p, x, lit(2.0)), b(multiply_p, x, lit(3.0))),
            ["multiply", "multiply", "add"]),
    # 2.0 (weak) and float64(2.0) promote differently, so they are different literals.
    CseCase("literals differing in type", ShapedArray((), np.float32),
            lambda b, x: b(add_p, b(multiply_p, x, lit(2.0)),
                           b(multiply_p, x, lit(np.float64(2.0)))),
            ["multiply", "multiply", "add"]),
    # x * 0.0 and x * -0.0 differ in the sign of zero results.
    CseCase("signed zeros", F64,
            lambda b, x: b(add_p, b(multiply_p, x, lit(0.0)), b(multiply_p, x, lit(-0.0))),
            ["multiply", "multiply", "add"]),
    CseCase("nan literals are equal", F64,
            lambda b, x: b(add_p, b(add_p, x, lit(np.nan)), b(add_p, x, lit(np.nan))),
            ["add", "add"]),
    CseCase("operand order matters", F64,
            lambda b, x: b(add_p, b(multiply_p, x, lit(2.0)), b(multiply_p, lit(2.0), x)),
            ["multiply", "multiply", "add"]),
    CseCase("equal params", M23,
            lambda b, x: b(add_p, b(sum_p, x, axes=(0,), dtype=None),
                           b(sum_p, x, axes=(0,), dtype=None)),
            ["sum", "add"]),
    CseCase("different params", M23,
            lambda b, x: (b(sum_p, x, axes=(0,), dtype=None), b(sum_p, x, axes=(1,), dtype=None)),
            ["sum", "sum"]),
    CseCase("a merged output is a graph output", F64, lambda b, x: (b(sin_p, x), b(sin_p, x)),
            ["sin"]),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@given(data=xst.st.data())
def test_cse_case(case, data):
    b = Builder()
    x = b.input(case.aval)
    out = case.build(b, x)
    graph = b.graph(*(out if isinstance(out, tuple) else (out,)))
    arg = data.draw(xst.arrays(case.aval.shape, case.aval.dtype))
    after = run_pass(cse, graph, arg)
    assert primitives(eliminate_dead_code(after)) == case.left


def test_merged_outputs_read_the_first_equation():
    b = Builder()
    x = b.input()
    first, second = b(sin_p, x), b(sin_p, x)
    graph = b.graph(b(add_p, first, second), second)
    after = cse(graph).check()
    assert after.outputs[1] is first
    assert after.equations[1].inputs == (first, first)


# -- sub-graphs in params compare by identity ---------------------------------------------------

apply_p = Primitive("test_cse_apply", multiple_results=True)
register(apply_p, impl=lambda *args, body: xform.eval_graph(body, *args),
         abstract_eval=lambda *avals, body: list(body.out_avals))


def test_subgraphs_compare_by_identity():
    body = xform.make_graph(lambda x: (np.sin(x), x * 2.0))(1.0)
    twin = xform.make_graph(lambda x: (np.sin(x), x * 2.0))(1.0)
    b = Builder()
    x = b.input()
    first, second, third = (b(apply_p, x, body=g) for g in (body, body, twin))
    graph = b.graph(*first, *second, *third)
    after = run_pass(cse, graph, 0.5)
    assert primitives(after) == ["test_cse_apply", "test_cse_apply"]
    assert after.outputs[2:4] == after.outputs[0:2]


@given(x=xst.arrays((2, 3), np.float64))
def test_staged_gradient_graph_agrees(x):
    def f(x):
        return np.sum(np.sin(x) * np.sin(x)) + np.sum(np.sin(x))
    xform.config.update("fusion", False)   # keep the three sins as separate equations
    try:
        graph = xform.make_graph(xform.value_and_grad(f))(x)
    finally:
        xform.config.update("fusion", True)
    assert primitives(graph).count("sin") == primitives(graph).count("cos") == 3
    after = run_pass(cse, graph, x)
    assert primitives(after).count("sin") == primitives(after).count("cos") == 1
    assert len(after.equations) == len(graph.equations) - 4


def test_unchanged_graph_is_returned_as_is():
    graph = xform.make_graph(lambda x: np.sin(x) * np.cos(x))(1.0)
    assert cse(graph) is graph
