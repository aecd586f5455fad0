"""The default pipeline: PIPELINE order, optimize, trace_passes, and jit compiling its output."""
import numpy as np
import pytest
from hypothesis import given

import xform
from xform import passes
from xform.testing import strategies as xst

from tests.passes.support import primitives, run_pass, specialize


def test_pipeline_order_and_short_names():
    assert passes.PIPELINE == (passes.inline_calls, passes.fold_constants, passes.simplify,
                               passes.eliminate_common_subexpressions,
                               passes.accumulate_pads, passes.forward_writes,
                               passes.eliminate_dead_code)
    assert (passes.inline, passes.fold, passes.simplify, passes.cse, passes.accumulate,
            passes.writes, passes.dce) == passes.PIPELINE
    for number, run_pass_ in enumerate(passes.PIPELINE, 1):
        assert f"{number}. {run_pass_.__name__}: " in passes.__doc__


def _messy(x):
    y = np.sin(x) * 1.0 + np.sin(x)
    np.cos(x)  # dead
    return np.reshape(y, x.shape) + -0.0  # (+ 0.0 is not the identity for x = -0.0)


@given(x=xst.arrays((2, 3), np.float64))
def test_optimize_cleans_and_agrees(x):
    graph = xform.make_graph(_messy)(x)
    after = run_pass(passes.optimize, graph, x)
    assert primitives(after) == ["sin", "add"]
    np.testing.assert_array_equal(xform.jit(_messy)(x), _messy(x))


def test_trace_passes_records_each_step():
    graph = xform.make_graph(_messy)(np.ones(3))
    steps = passes.trace_passes(graph)
    assert [name for name, _, _ in steps] == [p.__name__ for p in passes.PIPELINE]
    assert steps[0][1] is graph
    for (_, _, after), (_, before, _) in zip(steps, steps[1:]):
        assert after is before
    assert str(steps[-1][2]) == str(passes.optimize(graph))


@pytest.mark.parametrize("p", [1.0, -1.0])
def test_known_branch_then_everything_else(p):
    graph = xform.make_graph(
        lambda p, x: xform.cond(p > 0, lambda: np.sin(x) + np.sin(x), lambda: x * 1.0))(
        p, np.float64(2.0))
    after = run_pass(passes.optimize, specialize(graph, 0, p), 0.3)
    # x * 1.0 would return the argument itself, where numpy returns a new array: it stays.
    assert primitives(after) == (["sin", "add"] if p > 0 else ["multiply"])


@given(x=xst.arrays((3,), np.float64))
def test_jit_of_gradients_and_hvp_agree_with_the_interpreter(x):
    def f(x):
        return np.sum(np.tanh(x) ** 2 * 1.0)
    grad = xform.grad(f)
    np.testing.assert_allclose(xform.jit(grad)(x), 2 * np.tanh(x) * (1 - np.tanh(x) ** 2))
    graph = xform.make_graph(grad)(x)
    run_pass(passes.optimize, graph, x)
    hvp = xform.make_graph(lambda x, v: xform.jvp(grad, (x,), (v,))[1])(x, x)
    run_pass(passes.optimize, hvp, x, np.ones(3))
