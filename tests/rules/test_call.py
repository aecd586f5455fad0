"""@xform.function: call boundaries, lazily built rules, recursion."""
import numpy as np
import pytest

import xform
from xform.testing import check_grads


@xform.function
def doubling(x, n):
    """2**n * x, recursively: the recursion ends through cond."""
    return xform.cond(n > 0, lambda: 2.0 * doubling(x, n - 1), lambda: x)


@xform.function
def power_series(x, n):
    """sum_{k<=n} x**k, recursively."""
    return xform.cond(n > 0, lambda: 1.0 + x * power_series(x, n - 1), lambda: np.ones_like(x))


def test_call_is_one_equation_naming_the_callee():
    graph = xform.make_graph(lambda x: doubling(x, 3))(1.5)
    assert [e.primitive.name for e in graph.equations] == ["call"]
    assert "callee=doubling" in str(graph)


@pytest.mark.parametrize("n", [0, 1, 4])
def test_recursive_function_runs_and_differentiates_in_both_modes(n):
    assert xform.jit(doubling)(1.5, n) == pytest.approx(1.5 * 2 ** n)
    assert xform.grad(doubling)(1.5, n) == pytest.approx(2.0 ** n)
    assert xform.jvp(lambda x: doubling(x, n), (1.5,), (1.0,))[1] == pytest.approx(2.0 ** n)
    x = np.array([0.3, -0.4])
    check_grads(lambda x: np.sum(power_series(x, n)), (x,), order=2)


def test_recursion_under_vmap_and_second_order():
    xs = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(xform.vmap(doubling, in_axes=(0, None))(xs, 3), xs * 8)
    assert xform.grad(xform.grad(lambda x: doubling(x * x, 2)))(1.5) == pytest.approx(8.0)
    assert xform.hessian(lambda x: doubling(x ** 3, 1))(1.5) == pytest.approx(2 * 6 * 1.5)


def test_same_callee_called_twice_is_staged_once():
    @xform.function
    def square(x):
        return x * x
    xform.jit(lambda x: square(x) + square(x + 1.0))(np.ones(3))
    assert square.ref.stage_count == 1
    xform.jit(lambda x: square(x) * 2.0)(np.ones(3))
    assert square.ref.stage_count == 1
    xform.jit(lambda x: square(x))(np.ones(4))  # a new signature stages again
    assert square.ref.stage_count == 2


def test_a_call_in_a_branch_never_taken_is_never_staged_or_differentiated():
    @xform.function
    def unstageable(x):
        raise AssertionError("never staged")

    def f(x):
        return xform.cond(False, lambda: unstageable(x), lambda: np.sin(x))
    assert xform.grad(f)(0.5) == pytest.approx(np.cos(0.5))
    assert unstageable.ref.stage_count == 0


def test_transformed_callee_built_only_when_needed():
    @xform.function
    def g(x):
        return np.sin(x) * x
    xform.jit(lambda x: g(x))(1.0)
    assert g.ref._derived == {}  # no jvp/vjp/batch graph was built for a plain call
    xform.grad(lambda x: g(x))(1.0)
    assert list(g.ref._derived) == [("vjp",)]


def test_derived_graphs_of_a_recursive_callee_are_built_once():
    @xform.function
    def halving(x, n):
        return xform.cond(n > 0, lambda: 0.5 * halving(x, n - 1), lambda: x)
    builds = xform.cache_info()["builds"]
    assert xform.grad(halving)(1.0, 3) == 0.125
    # The staging, the callee and the vjps of it, its graph and its branches, and the callee
    # compiled once to compute its value while staging: the optimizer asking for
    # vjp(halving) inside vjp(halving) leaves that call unopened, not rebuilt.
    assert xform.cache_info()["builds"] - builds < 15


def test_recursive_call_typed_from_the_base_case_is_checked():
    @xform.function
    def bad(x, n):
        # The recursive call is typed like the base case (f64[]), but bad returns f64[2].
        return xform.cond(n > 0, lambda: bad(x, n - 1), lambda: x) * np.ones(2)
    with pytest.raises(xform.TypeCheckError, match="recursive"):
        xform.jit(bad)(np.float64(1.0), 2)
