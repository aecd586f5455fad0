"""A gradient of a preallocated array filled in a loop does O(T n) work, not O(T^2 n): reads
of written rows take the values written, the cotangent rows its reverse pass zeroes are never
read again (xform.passes.writes), and the writes and sums that stay go in place, except where
a live view would see them (xform.codegen.analyses.writes_in_place). Every transform agrees
with finite differences, in the first (interpreted) call and in the compiled ones."""
import numpy as np
import pytest

import xform
from xform.api.pipeline import finish_graph
from xform.codegen import compile_graph
from xform.rules.accumulate import pad_sum

from tests.test_values import march, march_eager


def two_step(u0, T=12, dt=0.1):
    # reads two earlier rows per step: each step's cotangent goes into two windows
    u = np.zeros((T, u0.size))
    u[0] = u0
    u[1] = u0 * 1.5
    for t in range(1, T - 1):
        u[t + 1] = u[t] + dt * np.sin(u[t - 1]) * u[t]
    return np.sum(u ** 2)


def central_difference(f, x, eps=1e-6):
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = eps
        grad[i] = (f(x + step) - f(x - step)) / (2 * eps)
    return grad


@pytest.fixture(autouse=True)
def fresh_cache():
    xform.clear_cache()
    yield
    xform.clear_cache()


POINTS = [np.array([0.5, -1.0, 2.0]), np.array([1.0, 1.0, -0.5])]


@pytest.mark.parametrize("fn", [march, two_step])
def test_every_transform_of_a_fill_loop_matches_finite_differences(fn):
    # one transformed object each, called alternately: the first call of each signature is
    # interpreted, the later ones run compiled code
    grad, jit, hessian = xform.grad(fn), xform.jit(fn), xform.hessian(fn)
    batched = xform.vmap(grad)
    for _ in range(3):
        for u0 in POINTS:
            assert jit(u0) == pytest.approx(fn(u0), rel=1e-14)
            np.testing.assert_allclose(grad(u0), central_difference(fn, u0), rtol=1e-6)
            np.testing.assert_allclose(hessian(u0),
                                       [central_difference(lambda u: grad(u)[i], u0)
                                        for i in range(3)], rtol=1e-5, atol=1e-8)
        np.testing.assert_allclose(batched(np.array(POINTS)), [grad(u) for u in POINTS],
                                   rtol=1e-14)


def test_the_fill_loop_gradient_equals_the_list_forms():
    grad, reference = xform.grad(march), xform.grad(march_eager)
    for _ in range(3):
        for u0 in POINTS:
            np.testing.assert_allclose(grad(u0), reference(u0), rtol=1e-14)


def _compiled(fn, *args):
    graph = finish_graph(xform.make_graph(fn)(*args))
    return compile_graph(graph, False, "exact")


def _impl_calls(compiled, name) -> int:
    """How many statements call the impl named `name` (e.g. a copying `_scatter_impl`)."""
    namespace = compiled.fn.__globals__
    called = {key for key, value in namespace.items()
              if getattr(getattr(value, "func", value), "__name__", None) == name}
    return sum(f" = {key}(" in line for line in compiled.source.splitlines() for key in called)


@pytest.mark.parametrize("steps", [8, 40])
def test_a_fill_loop_gradient_copies_no_array_per_step(steps):
    # A copying write or a new cotangent array costs O(T n) each: at most one of each
    # (the constant zeros, the first cotangent), however many steps there are.
    compiled = _compiled(xform.grad(lambda u: march(u, T=steps)), POINTS[0])
    assert _impl_calls(compiled, "_scatter_impl") <= 1
    assert _impl_calls(compiled, "_pad_sum_impl") <= 1
    np.testing.assert_allclose(compiled(POINTS[0])[0],
                               xform.grad(march_eager)(POINTS[0], steps), rtol=1e-14)


def test_two_windows_per_step_add_in_place():
    compiled = _compiled(xform.grad(two_step), POINTS[0])
    assert _impl_calls(compiled, "_scatter_impl") <= 2
    assert _impl_calls(compiled, "_pad_sum_in_place") >= 8
    np.testing.assert_allclose(compiled(POINTS[0])[0],
                               central_difference(two_step, POINTS[0]), rtol=1e-6)


# -- no write under a live view ----------------------------------------------------------------

def block_rewritten(x, rows=6):
    # The gradient keeps a view of rows 0-1 (the residual of `u[0:2] ** 2`) until its
    # backward pass, while the forward pass writes row 1 again: that write must copy, and
    # the writes of the other rows need not.
    u = np.zeros((rows, x.size))
    u[0] = x
    u[1] = np.sin(x)
    kept = np.sum(u[0:2] ** 2)
    u[1] = u[1] * 3.0
    for t in range(1, rows - 1):
        u[t + 1] = u[t] * 0.5 + u[0]
    return kept + np.sum(u * u[2])


def test_a_residual_view_stops_only_the_write_it_would_see():
    x = np.array([1.0, -2.0, 0.5])
    compiled = _compiled(xform.grad(block_rewritten), x)
    expected = central_difference(block_rewritten, x)
    np.testing.assert_allclose(compiled(x)[0], expected, rtol=1e-6)
    grad = xform.grad(block_rewritten)
    for _ in range(3):        # interpreted, then compiled
        np.testing.assert_allclose(grad(x), expected, rtol=1e-6)
    # the first write copies the constant zeros, the second write of row 1 its buffer
    assert _impl_calls(compiled, "_scatter_impl") == 2


def added_under_a_live_view(x, window):
    u = np.zeros((4, x.size))
    u[0] = x
    block = u[0:2]            # a view: must not see the terms added into u's buffer below
    v = x * 2.0
    total = pad_sum([u, v, x], [((0, 4, 1), (0, x.size, 1)), window, window], u.shape)
    return total, block * 1.0


@pytest.mark.parametrize("window, in_place", [(((1, 2, 1), (0, 3, 1)), False),
                                              (((2, 3, 1), (0, 3, 1)), True)])
def test_terms_are_added_in_place_only_where_no_live_view_shows_them(window, in_place):
    x = np.array([1.0, -2.0, 0.5])
    fn = lambda x: added_under_a_live_view(x, window)    # noqa: E731
    compiled = _compiled(fn, x)
    expected = fn(x)
    for got, want in zip(compiled(x), expected):
        np.testing.assert_array_equal(got, want)
    assert (_impl_calls(compiled, "_pad_sum_in_place") == 1) == in_place
