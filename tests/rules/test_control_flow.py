"""cond/switch, while_loop, fori_loop and scan: values, both derivative modes, vmap, errors."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform import cond, fori_loop, scan, switch, while_loop
from xform.testing import check_grads
from xform.testing import strategies as xst

THIS_FILE = "test_control_flow.py"


def piecewise(x):
    return cond(np.sum(x) > 0, lambda x: np.sin(x) * x, lambda x: x ** 3 - 1.0, x)


def piecewise_reference(x):
    return np.sin(x) * x if np.sum(x) > 0 else x ** 3 - 1.0


def three_way(i, x):
    return switch(i, [lambda x: x * 2.0, lambda x: np.exp(x), lambda x: np.cos(x) * x], x)


def newton_sqrt(a, x0):
    """Newton iterations for sqrt(a) to tolerance: the trip count depends on the data."""
    def not_converged(state):
        x, previous = state
        return np.abs(x - previous) > 1e-10

    def step(state):
        x, _ = state
        return 0.5 * (x + a / x), x
    return while_loop(not_converged, step, (x0, x0 + 1.0))[0]


# -- cond / switch -----------------------------------------------------------------------------

@given(xst.arrays((3,), low=-2.0, high=2.0))
def test_cond_values_and_gradients_both_modes(x):
    np.testing.assert_allclose(xform.jit(piecewise)(x), piecewise_reference(x))
    if abs(np.sum(x)) > 1e-3:  # away from the switching point finite differences hold
        check_grads(lambda x: np.sum(piecewise(x)), (x,), order=2)


@pytest.mark.parametrize("index", [-1, 0, 1, 2, 5])
def test_switch_clamps_and_differentiates(index):
    x = np.array([0.3, -0.7])
    reference = [lambda x: x * 2.0, np.exp, lambda x: np.cos(x) * x][min(max(index, 0), 2)]
    traced_index = xform.jit(lambda i, x: three_way(i, x))(np.int64(index), x)
    np.testing.assert_allclose(traced_index, reference(x))
    check_grads(lambda x: np.sum(three_way(np.int64(index), x)), (x,), order=2)


def test_cond_with_batched_predicate_selects_per_lane():
    xs = np.array([[1.0, 2.0], [-3.0, 0.5], [-1.0, -1.0]])
    expected = np.stack([piecewise_reference(x) for x in xs])
    np.testing.assert_allclose(xform.vmap(piecewise)(xs), expected)
    grads = xform.vmap(xform.grad(lambda x: np.sum(piecewise(x))))(xs)
    for x, g in zip(xs, grads):
        np.testing.assert_allclose(g, xform.grad(lambda x: np.sum(piecewise(x)))(x))


def test_vmap_switch_with_batched_index():
    indices = np.array([0, 2, 1, 7])
    x = np.array([0.5, 1.5])
    got = xform.vmap(three_way, in_axes=(0, None))(indices, x)
    expected = np.stack([xform.jit(three_way)(np.int64(i), x) for i in indices])
    np.testing.assert_allclose(got, expected)


def test_cond_closure_over_traced_value_is_differentiated():
    def f(a, x):
        return cond(x > 0, lambda: a * x, lambda: a * a)
    assert xform.grad(f)(3.0, 2.0) == pytest.approx(2.0)
    assert xform.grad(f)(3.0, -2.0) == pytest.approx(6.0)
    assert xform.grad(f, argnums=1)(3.0, 2.0) == pytest.approx(3.0)


def test_concrete_predicate_stages_only_the_taken_branch():
    def unstageable(x):
        raise AssertionError("the branch that is not taken must not be staged")
    graph = xform.make_graph(lambda x: cond(True, np.sin, unstageable, x))(1.0)
    assert [e.primitive.name for e in graph.equations] == ["sin"]


def test_cond_is_one_equation_with_indented_branches():
    text = str(xform.make_graph(piecewise)(np.ones(3)))
    assert "cond[branches=(" in text
    assert "\n        { lambda" in text  # sub-graphs are printed indented


def test_cond_errors_name_the_user_line():
    with pytest.raises(xform.ShapeError, match="different types") as info:
        xform.make_graph(lambda x: cond(x > 0, lambda x: x, lambda x: np.ones(2), x))(1.0)
    assert THIS_FILE in str(info.value)
    with pytest.raises(xform.TypeCheckError, match="scalar boolean") as info:
        xform.make_graph(lambda x: cond(x, lambda x: x, lambda x: x, x))(1.0)
    assert THIS_FILE in str(info.value)
    with pytest.raises(xform.TypeCheckError, match="scalar boolean"):
        xform.make_graph(lambda x: cond(x > 0, lambda x: x, lambda x: x, x))(np.ones(2))
    with pytest.raises(xform.TypeCheckError, match="structures"):
        xform.make_graph(lambda x: cond(x > 0, lambda x: (x, x), lambda x: [x, x], x))(1.0)


# -- while_loop --------------------------------------------------------------------------------

@given(st.floats(0.5, 4.0), st.floats(0.5, 3.0))
def test_newton_while_loop_with_data_dependent_trip_count(a, x0):
    assert xform.jit(newton_sqrt)(a, x0) == pytest.approx(np.sqrt(a), rel=1e-9)
    # d sqrt(a)/da = 1 / (2 sqrt(a)); the converged result does not depend on x0.
    assert xform.grad(newton_sqrt)(a, x0) == pytest.approx(0.5 / np.sqrt(a), rel=1e-6)
    assert xform.grad(newton_sqrt, argnums=1)(a, x0) == pytest.approx(0.0, abs=1e-6)
    _, tangent = xform.jvp(newton_sqrt, (a, x0), (1.0, 0.0))
    assert tangent == pytest.approx(0.5 / np.sqrt(a), rel=1e-6)


def test_while_loop_reverse_mode_matches_python_loop_and_finite_differences():
    def f(x, scale):
        def body(state):
            i, y = state
            return i + 1, np.sin(y) * scale + y
        return while_loop(lambda s: np.sum(s[1]) < 6.0, body, (0, x))[1]

    x = np.array([0.4, 0.9])
    check_grads(lambda x, s: np.sum(f(x, s)), (x, 1.3), order=1, modes=("rev",))
    check_grads(lambda x, s: np.sum(f(x, s)), (x, 1.3), order=1, modes=("fwd",))


def test_while_loop_vmap_freezes_finished_lanes():
    starts = np.array([1.0, 3.0, 20.0, 0.1])
    got = xform.vmap(lambda x: while_loop(lambda c: c < 10.0, lambda c: c * 2.0, x))(starts)
    expected = []
    for x in starts:
        while x < 10.0:
            x *= 2.0
        expected.append(x)
    np.testing.assert_allclose(got, expected)
    grads = xform.vmap(xform.grad(newton_sqrt))(np.array([1.0, 4.0, 9.0]), np.ones(3))
    np.testing.assert_allclose(grads, 0.5 / np.sqrt([1.0, 4.0, 9.0]), rtol=1e-6)


def test_while_loop_errors():
    with pytest.raises(xform.ShapeError, match="changes the carry") as info:
        xform.make_graph(lambda x: while_loop(lambda c: True, lambda c: c.astype(np.float32),
                                              x))(1.0)
    assert THIS_FILE in str(info.value)
    with pytest.raises(xform.TypeCheckError, match="scalar boolean"):
        xform.make_graph(lambda x: while_loop(lambda c: c, lambda c: c, x))(1.0)


# -- fori_loop and scan ---------------------------------------------------------------------------

def test_fori_loop_static_bounds_is_a_scan_and_differentiates_twice():
    def f(x):
        return fori_loop(0, 5, lambda i, c: np.sin(c) * x + i, x)
    graph = xform.make_graph(f)(0.3)
    assert [e.primitive.name for e in graph.equations] == ["scan"]
    reference = 0.3
    for i in range(5):
        reference = np.sin(reference) * 0.3 + i
    assert xform.jit(f)(0.3) == pytest.approx(reference)
    check_grads(f, (0.3,), order=2)


def test_fori_loop_traced_bounds_is_a_while_loop():
    def f(x, n):
        return fori_loop(0, n, lambda i, c: c * x, 1.0)
    assert xform.jit(f)(1.5, np.int64(3)) == pytest.approx(1.5 ** 3)
    assert xform.grad(f)(1.5, np.int64(3)) == pytest.approx(3 * 1.5 ** 2)


@given(st.integers(1, 5), st.booleans())
def test_scan_matches_python_loop_and_differentiates(length, reverse):
    xs = np.linspace(0.1, 1.0, length)

    def step(c, x):
        return np.sin(c) + x, c * x

    def reference(c, xs):
        ys = [None] * len(xs)
        for i in (reversed(range(len(xs))) if reverse else range(len(xs))):
            c, ys[i] = step(c, xs[i])
        return c, np.array(ys)

    carry, ys = xform.jit(lambda c, xs: scan(step, c, xs, reverse=reverse))(0.5, xs)
    ref_carry, ref_ys = reference(0.5, xs)
    assert carry == pytest.approx(ref_carry)
    np.testing.assert_allclose(ys, ref_ys)
    check_grads(lambda c, xs: scan(step, c, xs, reverse=reverse)[1].sum()
                + scan(step, c, xs, reverse=reverse)[0], (0.5, xs), order=2)


def test_scan_over_pytrees_and_vmap():
    def f(w, xs):
        def step(carry, x):
            h, total = carry
            h = np.tanh(h * w + x["a"])
            return (h, total + np.sum(h * x["b"])), h
        (_, total), hs = scan(step, (np.zeros(2), 0.0), xs)
        return total + np.sum(hs)
    xs = {"a": np.linspace(-1, 1, 8).reshape(4, 2), "b": np.ones((4, 2))}
    check_grads(f, (0.7, xs), order=1)
    ws = np.array([0.1, 0.5, 0.9])
    np.testing.assert_allclose(xform.vmap(f, in_axes=(0, None))(ws, xs),
                               [xform.jit(f)(w, xs) for w in ws])


def test_scan_length_mismatch_error():
    with pytest.raises(xform.ShapeError, match="inconsistent lengths") as info:
        xform.make_graph(lambda a, b: scan(lambda c, x: (c, x[0] + x[1]), 0.0, (a, b)))(
            np.ones(3), np.ones(4))
    assert THIS_FILE in str(info.value)


# -- constant propagation of branches and loops ---------------------------------------------------

def test_loop_that_never_runs_disappears():
    # (A cond with a known predicate: tests/passes/test_pipeline.py.)
    def f(x, n):
        return while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, np.sin(c[1])), (0, x))[1]
    never = xform.passes.optimize(xform.make_graph(f, static_argnums=1)(np.ones(3), 0))
    assert never.equations == () and never.outputs == never.inputs
    runs = xform.passes.optimize(xform.make_graph(f, static_argnums=1)(np.ones(3), 2))
    assert [e.primitive.name for e in runs.equations] == ["while_loop"]
    np.testing.assert_allclose(xform.jit(f, static_argnums=1)(np.ones(3), 2),
                               np.sin(np.sin(np.ones(3))))



def test_linearize_through_cond_and_while_loop():
    out, f_jvp = xform.linearize(lambda x: cond(x > 0, np.sin, np.cos, x), 1.0)
    assert out == pytest.approx(np.sin(1.0)) and f_jvp(2.0) == pytest.approx(2 * np.cos(1.0))
    out, f_jvp = xform.linearize(
        lambda x: while_loop(lambda c: c < 10.0, lambda c: c * 2.0, x), 1.0)
    assert out == 16.0 and f_jvp(1.0) == pytest.approx(16.0)
