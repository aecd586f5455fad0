"""inline_calls: open non-recursive small calls (Rules.inline); recursive callees stay calls.

The toy `call_p` below has params {"callee": key, "body": graph or a thunk giving it}; a
thunk is how mutually recursive bodies refer to each other (graphs are immutable).
"""
import numpy as np
import pytest
from hypothesis import given

import xform
from xform.ir.core import Equation, Graph, Primitive, Var
from xform.ir.nx import call_graph, recursive_nodes
from xform.passes import eliminate_dead_code, inline_calls
from xform.ir.registry import Hooks, register
from xform.testing import strategies as xst

from tests.passes.support import F64, Builder, primitives, run_pass

call_p = Primitive("test_call", multiple_results=True)


def _resolve(body) -> Graph:
    return body if isinstance(body, Graph) else body()


def _call_inline(eqn):
    if eqn.params["callee"] == "opaque":
        return None
    if eqn.params["callee"] == "broken":
        raise RuntimeError("this callee cannot be staged")
    return _resolve(eqn.params["body"])


register(call_p, impl=lambda *args, callee, body: xform.eval_graph(_resolve(body), *args),
         abstract_eval=lambda *avals, callee, body: list(_resolve(body).out_avals),
         hooks=Hooks(inline=_call_inline))


def call(key, body, *args):
    return call_p.bind(*args, callee=key, body=body)


SQUARE = xform.make_graph(lambda x: x * x)(1.0)
QUAD = xform.make_graph(lambda x: call("square", SQUARE, call("square", SQUARE, x)[0])[0])(1.0)
# Outputs that are an input, a Literal and a const-reading value of the body.
MIXED = xform.make_graph(lambda x, y: (y, 2.0, x * np.arange(3.0)))(1.0, 1.0)

# -- mutual recursion: even calls odd calls even --------------------------------------------------


def _recursive_body(callee_key, callee_body):
    x = Var(F64)
    out = Var(F64)
    return Graph([x], [], [Equation(call_p, [x], [out], {"callee": callee_key,
                                                          "body": callee_body})], [out])


EVEN = _recursive_body("odd", lambda: ODD)
ODD = _recursive_body("even", lambda: EVEN)

# -- self recursion hidden in a sub-graph of a primitive that is not a call -----------------------

apply_p = Primitive("test_inline_apply", multiple_results=True)
register(apply_p, impl=lambda *args, body: xform.eval_graph(body, *args),
         abstract_eval=lambda *avals, body: list(body.out_avals))


def _self_recursive():
    x, out, inner = Var(F64), Var(F64), Var(F64)
    branch = Graph([x], [], [Equation(call_p, [x], [inner],
                                      {"callee": "loop", "body": lambda: LOOP})], [inner])
    y = Var(F64)
    return Graph([y], [], [Equation(apply_p, [y], [out], {"body": branch})], [out])


LOOP = _self_recursive()


@given(x=xst.arrays((), np.float64))
def test_call_is_replaced_by_its_body(x):
    graph = xform.make_graph(lambda x: call("square", SQUARE, x)[0] + 1.0)(1.0)
    after = run_pass(inline_calls, graph, x)
    assert primitives(after) == ["multiply", "add"]


@given(x=xst.arrays((), np.float64))
def test_nested_calls_open_transitively_with_fresh_variables(x):
    graph = xform.make_graph(
        lambda x: call("quad", QUAD, x)[0] + call("square", SQUARE, x)[0])(1.0)
    after = run_pass(inline_calls, graph, x)
    assert primitives(after) == ["multiply", "multiply", "multiply", "add"]


@given(x=xst.arrays((), np.float64), y=xst.arrays((), np.float64))
def test_outputs_that_are_inputs_literals_or_read_consts(x, y):
    graph = xform.make_graph(lambda x, y: tuple(call("mixed", MIXED, x, y)) + (x,))(x, y)
    after = run_pass(inline_calls, graph, x, y)
    assert primitives(after) == ["multiply"]
    assert after.outputs[0] is after.inputs[1]
    assert after.outputs[1].value == 2.0
    assert after.outputs[3] is after.inputs[0]
    assert len(after.consts) == 1


def test_size_limit():
    graph = xform.make_graph(lambda x: call("quad", QUAD, x)[0])(1.0)
    assert primitives(inline_calls(graph, max_equations=1)) == ["test_call"]
    assert primitives(inline_calls(graph)) == ["multiply", "multiply"]


def test_mutually_recursive_callees_are_not_inlined():
    b = Builder()
    x = b.input()
    (even,) = b(call_p, x, callee="even", body=EVEN)
    (square,) = b(call_p, even, callee="square", body=SQUARE)
    graph = b.graph(square)
    calls = call_graph(graph)
    assert recursive_nodes(calls) == {"even", "odd"}
    after = inline_calls(graph).check()
    print(after)
    assert primitives(after) == ["test_call", "multiply"]
    assert after.equations[0] is graph.equations[0]
    assert inline_calls(after) is after


def test_recursion_through_a_sub_graph_is_found():
    graph = xform.make_graph(lambda x: call("loop", LOOP, x)[0])(1.0)
    assert recursive_nodes(call_graph(graph)) == {"loop"}
    assert inline_calls(graph) is graph


@pytest.mark.parametrize("key", ["opaque", "broken"])
def test_callee_without_a_body_stays(key):
    graph = xform.make_graph(lambda x: call(key, SQUARE, x)[0])(1.0)
    assert inline_calls(graph) is graph


# -- @xform.function ------------------------------------------------------------------------------

@xform.function
def _scaled(x):
    return np.sin(x) * 3.0


@xform.function
def _doubling(x, n):
    return xform.cond(n > 0, lambda: 2.0 * _doubling(x, n - 1), lambda: x)


@given(x=xst.arrays((3,), np.float64))
def test_xform_function_calls(x):
    def f(x):
        return _doubling(_scaled(x), 2) + _scaled(x)
    graph = xform.make_graph(f)(x)
    after = run_pass(inline_calls, graph, x)
    assert primitives(eliminate_dead_code(after)) == ["sin", "multiply", "call", "sin",
                                                      "multiply", "add"]
    np.testing.assert_allclose(xform.jit(f)(x), np.sin(x) * 3.0 * 5.0)
