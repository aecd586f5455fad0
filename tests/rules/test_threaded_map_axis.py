"""threaded_map with axis=0 (f gets one leading-axis slice of each mapped input): values
against vmap and the vectorized function, derivatives (check_grads, both modes, second order),
vmap of it, chunking, closures, out= and the errors."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform import threaded_map
from xform.testing import check_grads
from xform.testing import strategies as xst


def row_logistic(x, t, w):
    return np.logaddexp(0.0, -t * (x @ w))


def row_outer(x, w):
    """An array per slice, from a matrix slice: exercises non-scalar slices and results."""
    return np.tanh(x @ w) @ x


@st.composite
def rows_problem(draw):
    n, d = draw(st.integers(1, 9)), draw(st.integers(1, 4))
    X = draw(xst.arrays((n, d)))
    t = draw(xst.arrays((n,)))
    w = draw(xst.arrays((d,)))
    chunk = draw(st.one_of(st.none(), st.integers(1, 4)))
    return X, t, w, chunk


@given(rows_problem())
def test_values_and_gradients_match_vmap(problem):
    X, t, w, chunk = problem

    def mapped(X, t, w):
        return np.mean(threaded_map(lambda x, s: row_logistic(x, s, w), X, t, axis=0,
                                    chunk_size=chunk))

    def reference(X, t, w):
        return np.mean(xform.vmap(row_logistic, in_axes=(0, 0, None))(X, t, w))

    np.testing.assert_allclose(mapped(X, t, w), reference(X, t, w), rtol=1e-12)
    for argnums in (0, 1, 2):
        np.testing.assert_allclose(xform.grad(mapped, argnums)(X, t, w),
                                   xform.grad(reference, argnums)(X, t, w), rtol=1e-10,
                                   atol=1e-14)
    check_grads(mapped, (X, t, w), order=2)


@given(st.integers(1, 6), st.integers(1, 3), st.integers(1, 3), st.data())
def test_matrix_slices_and_array_results(n, p, q, data):
    X = data.draw(xst.arrays((n, p, q)))
    w = data.draw(xst.arrays((q,)))

    def mapped(X, w):
        return threaded_map(lambda x: row_outer(x, w), X, axis=0, chunk_size=2)

    expected = xform.vmap(row_outer, in_axes=(0, None))(X, w)
    assert mapped(X, w).shape == (n, q)
    np.testing.assert_allclose(mapped(X, w), expected, rtol=1e-12)
    check_grads(mapped, (X, w), order=2)


def test_vmap_of_the_map_matches_a_loop():
    rng = np.random.default_rng(0)
    X, t, W = rng.normal(size=(7, 3)), rng.normal(size=7), rng.normal(size=(4, 3))

    def loss(w, X):
        return np.sum(threaded_map(lambda x, s: row_logistic(x, s, w), X, t, axis=0,
                                   chunk_size=3))

    expected = np.array([np.sum(row_logistic(X, t, w)) for w in W])
    np.testing.assert_allclose(xform.vmap(loss, in_axes=(0, None))(W, X), expected,
                               rtol=1e-12)
    Xs = rng.normal(size=(2, 7, 3))  # a batch over the mapped input too
    np.testing.assert_allclose(xform.vmap(loss, in_axes=(None, 0))(W[0], Xs),
                               [np.sum(row_logistic(x, t, W[0])) for x in Xs], rtol=1e-12)
    np.testing.assert_allclose(xform.vmap(xform.grad(loss), in_axes=(0, None))(W, X),
                               [xform.grad(loss)(w, X) for w in W], rtol=1e-12)


def test_results_do_not_depend_on_threads_or_chunks():
    rng = np.random.default_rng(1)
    X, t, w = rng.normal(size=(101, 5)), rng.normal(size=101), rng.normal(size=5)

    def grad_with(chunk, threads):
        return xform.grad(lambda w: np.sum(threaded_map(
            lambda x, s: row_logistic(x, s, w), X, t, axis=0, chunk_size=chunk,
            num_threads=threads)))(w)

    one = grad_with(7, 1)
    np.testing.assert_array_equal(grad_with(7, 4), one)  # bit for bit across thread counts
    np.testing.assert_allclose(grad_with(None, 2), one, rtol=1e-12)


def test_out_receives_the_stack_and_is_untouched_on_error():
    X = np.arange(6.0).reshape(3, 2)
    out = np.full(3, -1.0)
    assert threaded_map(lambda r: r @ r, X, axis=0, out=out) is out
    np.testing.assert_array_equal(out, np.sum(X * X, axis=1))
    bad = np.full(4, -1.0)
    with pytest.raises(xform.errors.ShapeError, match="shape"):
        threaded_map(lambda r: r @ r, X, axis=0, out=bad)
    np.testing.assert_array_equal(bad, -1.0)


def test_errors_name_the_callers_line():
    X = np.ones((3, 2))
    with pytest.raises(xform.errors.TypeCheckError, match="axis must be None") as err:
        threaded_map(lambda r: r, X, axis=1)  # line: bad axis
    assert "line: bad axis" in str(err.value)
    with pytest.raises(xform.errors.ShapeError, match="equal leading sizes") as err:
        threaded_map(lambda r, s: r * s, X, np.ones(4), axis=0)  # line: sizes
    assert "line: sizes" in str(err.value)
    with pytest.raises(xform.errors.TypeCheckError, match="return one array") as err:
        threaded_map(lambda r: (r, r), X, axis=0)  # line: pytree
