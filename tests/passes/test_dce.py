"""eliminate_dead_code: drop unread equations and consts; Rules.dce trims multi-output ones."""
import attrs
import numpy as np
from hypothesis import given

import xform
from xform.ir.core import Graph, Primitive
from xform.passes import eliminate_dead_code
from xform.rules.binary import add_p, multiply_p
from xform.ir.registry import Hooks, register
from xform.rules.unary import cos_p, exp_p, sin_p
from xform.testing import strategies as xst

from tests.passes.support import Builder, lit, primitives, run_pass


def test_unread_equations_and_consts_go():
    b = Builder()
    x = b.input()
    unused = b.const(np.arange(3.0))
    b(sin_p, unused)
    dead = b(cos_p, x)
    b(exp_p, dead)
    live = b(sin_p, x)
    graph = b.graph(b(multiply_p, live, lit(2.0)))
    after = run_pass(eliminate_dead_code, graph, 0.5)
    assert primitives(after) == ["sin", "multiply"]
    assert after.consts == ()


def test_literal_and_input_outputs():
    b = Builder()
    x = b.input()
    b(sin_p, x)
    graph = b.graph(lit(3.0), x)
    after = run_pass(eliminate_dead_code, graph, 0.5)
    assert after.equations == ()


def test_order_is_kept():
    b = Builder()
    x, y = b.input(), b.input()
    outs = [b(sin_p, y), b(cos_p, x), b(exp_p, y), b(sin_p, x)]
    graph = b.graph(*outs)
    assert eliminate_dead_code(graph) is graph
    b(cos_p, y)
    graph = b.graph(*reversed(outs))
    assert eliminate_dead_code(graph).equations == graph.equations[:4]


@given(x=xst.arrays((3,), np.float64))
def test_staged_function_with_dead_code(x):
    def f(x):
        np.cos(x) * 3.0  # result unused
        return np.sin(x), x
    graph = xform.make_graph(f)(x)
    after = run_pass(eliminate_dead_code, graph, x)
    assert primitives(after) == ["sin"]


# -- Rules.dce for multi-output primitives --------------------------------------------------------

apply_p = Primitive("test_dce_apply", multiple_results=True)
trimmed = []


def _apply_dce(eqn, used_outputs):
    trimmed.append(used_outputs)
    body = eqn.params["body"]
    outs = [i for i, used in enumerate(used_outputs) if used]
    smaller = Graph(body.inputs, body.consts, body.equations, [body.outputs[i] for i in outs])
    return attrs.evolve(eqn, outputs=[eqn.outputs[i] for i in outs],
                        params={**eqn.params, "body": eliminate_dead_code(smaller)})


register(apply_p, impl=lambda *args, body: xform.eval_graph(body, *args),
         abstract_eval=lambda *avals, body: list(body.out_avals), hooks=Hooks(dce=_apply_dce))

keep_p = Primitive("test_dce_keep", multiple_results=True)
register(keep_p, impl=lambda *args, body: xform.eval_graph(body, *args),
         abstract_eval=lambda *avals, body: list(body.out_avals))


def _apply_graph(prim):
    body = xform.make_graph(lambda x, y: (np.sin(x), np.cos(y), x * y))(1.0, 1.0)
    b = Builder()
    x, y = b.input(), b.input()
    first, second, third = b(prim, x, y, body=body)
    return b.graph(b(add_p, first, third))


@given(x=xst.arrays((), np.float64), y=xst.arrays((), np.float64))
def test_dce_rule_drops_unused_outputs(x, y):
    trimmed.clear()
    graph = _apply_graph(apply_p)
    after = run_pass(eliminate_dead_code, graph, x, y)
    assert trimmed[0] == (True, False, True)
    eqn = after.equations[0]
    assert len(eqn.outputs) == 2
    assert [e.primitive.name for e in eqn.params["body"].equations] == ["sin", "multiply"]


def test_without_a_dce_rule_all_outputs_stay():
    graph = _apply_graph(keep_p)
    after = eliminate_dead_code(graph)
    assert after is graph
    assert len(after.equations[0].outputs) == 3


def test_fully_dead_multi_output_equation_goes_without_asking_the_rule():
    trimmed.clear()
    body = xform.make_graph(lambda x: (np.sin(x), x))(1.0)
    b = Builder()
    x = b.input()
    b(apply_p, x, body=body)
    after = eliminate_dead_code(b.graph(x))
    assert after.equations == () and trimmed == []
