"""xform.map (lax.map) against a Python loop, and xform.associative_scan against a Python
cumulative loop; derivatives of both by check_grads, under jit and vmap too."""
import autograd
import autograd.numpy as anp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.testing import check_grads


def _body(x):
    return np.sin(x) * x[::-1] + np.exp(0.2 * x)


def _loop_map(f, xs):
    return np.stack([f(x) for x in xs])


@given(length=st.integers(1, 9), width=st.integers(1, 4),
       batch_size=st.one_of(st.none(), st.integers(1, 11)), seed=st.integers(0, 2 ** 16))
def test_map_matches_a_python_loop(length, width, batch_size, seed):
    xs = np.random.default_rng(seed).normal(size=(length, width))
    got = xform.map(_body, xs, batch_size=batch_size)
    np.testing.assert_allclose(got, _loop_map(_body, xs), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("batch_size", [None, 1, 2, 4, 9])
def test_map_derivatives(batch_size):
    xs = np.random.default_rng(1).normal(size=(5, 2))
    check_grads(lambda xs: xform.map(_body, xs, batch_size=batch_size), (xs,), order=2)
    want = autograd.grad(lambda xs: anp.sum(anp.sin(xs) * xs[:, ::-1] + anp.exp(0.2 * xs)))(xs)
    got = xform.grad(lambda xs: np.sum(xform.map(_body, xs, batch_size=batch_size)))(xs)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_map_pytrees_in_and_out_under_jit_and_vmap():
    def f(p):
        return {"s": np.sum(p["a"] * p["b"]), "v": np.cos(p["a"])}
    xs = {"a": np.arange(8.0).reshape(4, 2) / 5, "b": np.linspace(-1, 1, 4)[:, None] * np.ones(2)}
    want = [f({"a": a, "b": b}) for a, b in zip(xs["a"], xs["b"])]
    for batch_size in (None, 3):
        got = xform.jit(lambda xs: xform.map(f, xs, batch_size=batch_size))(xs)
        np.testing.assert_allclose(got["s"], [w["s"] for w in want], rtol=1e-13)
        np.testing.assert_allclose(got["v"], np.stack([w["v"] for w in want]), rtol=1e-13)
    stacked = np.stack([xs["a"], 2 * xs["a"]])
    got = xform.vmap(lambda a: xform.map(np.sin, a, batch_size=3))(stacked)
    np.testing.assert_allclose(got, np.sin(stacked), rtol=1e-13)
    check_grads(lambda a, b: xform.map(f, {"a": a, "b": b}, batch_size=3)["s"],
                (xs["a"], xs["b"]), order=2)


def test_map_errors_name_the_cause():
    with pytest.raises(xform.TypeCheckError, match="batch_size"):
        xform.map(np.sin, np.ones((3, 2)), batch_size=0)
    with pytest.raises(xform.ShapeError, match="different lengths"):
        xform.map(lambda p: p[0] + p[1], (np.ones(3), np.ones(4)))


# == associative_scan ===========================================================================

def _matmul_pairs(a, b):
    """2x2 matrices as a pytree of four entry arrays: a @ b elementwise along the scan axis."""
    (a00, a01, a10, a11), (b00, b01, b10, b11) = a, b
    return (a00 * b00 + a01 * b10, a00 * b01 + a01 * b11,
            a10 * b00 + a11 * b10, a10 * b01 + a11 * b11)


def _loop_scan(fn, elems, reverse, axis):
    """The Python cumulative loop: out[i] = e[0] o ... o e[i] (reverse: e[n-1] o ... o e[i])."""
    leaves, tree = xform.tree.tree_flatten(elems)
    n = leaves[0].shape[axis]
    take = lambda i: xform.tree.tree_unflatten(tree, [np.take(x, i, axis) for x in leaves])
    order = range(n - 1, -1, -1) if reverse else range(n)
    outs, acc = {}, None
    for i in order:
        acc = take(i) if acc is None else fn(acc, take(i))
        outs[i] = xform.tree.tree_flatten(acc)[0]
    return xform.tree.tree_unflatten(tree, [np.stack([outs[i][k] for i in range(n)], axis)
                                           for k in range(len(leaves))])


OPERATORS = {"add": np.add, "multiply": np.multiply, "max": np.maximum,
             "matmul": _matmul_pairs}


def _elems(op, shape, rng):
    if op == "matmul":
        return tuple(rng.normal(size=shape) * 0.7 for _ in range(4))
    return rng.uniform(0.5, 1.5, size=shape) * rng.choice([-1, 1], size=shape)


@pytest.mark.parametrize("op", list(OPERATORS))
@given(length=st.integers(1, 11), other=st.integers(1, 3), axis=st.sampled_from([0, 1, -1]),
       reverse=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_associative_scan_matches_a_cumulative_loop(op, length, other, axis, reverse, seed):
    shape = (length, other) if axis == 0 else (other, length)
    elems = _elems(op, shape, np.random.default_rng(seed))
    got = xform.associative_scan(OPERATORS[op], elems, reverse=reverse, axis=axis)
    want = _loop_scan(OPERATORS[op], elems, reverse, axis % 2)
    for g, w in zip(xform.tree.tree_leaves(got), xform.tree.tree_leaves(want)):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_associative_scan_cumulative_sum_and_product_are_numpys():
    x = np.random.default_rng(3).uniform(0.5, 1.5, 13)
    np.testing.assert_allclose(xform.associative_scan(np.add, x), np.cumsum(x), rtol=1e-13)
    np.testing.assert_allclose(xform.jit(lambda x: xform.associative_scan(np.multiply, x))(x),
                               np.cumprod(x), rtol=1e-13)


@pytest.mark.parametrize("op", list(OPERATORS))
@pytest.mark.parametrize("reverse", [False, True])
def test_associative_scan_derivatives(op, reverse):
    # max is checked away from ties: distinct magnitudes.
    elems = _elems(op, (6,), np.random.default_rng(7))
    if op == "matmul":
        check_grads(lambda *e: xform.associative_scan(_matmul_pairs, e, reverse=reverse),
                    elems, order=2)
    else:
        check_grads(lambda e: xform.associative_scan(OPERATORS[op], e, reverse=reverse),
                    (elems,), order=2)


def test_associative_scan_gradient_matches_autograd():
    x = np.random.default_rng(5).uniform(0.5, 1.5, 7)
    got = xform.grad(lambda x: np.sum(np.sin(xform.associative_scan(np.add, x * x))))(x)
    want = autograd.grad(lambda x: anp.sum(anp.sin(anp.cumsum(x * x))))(x)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_associative_scan_under_vmap():
    xs = np.random.default_rng(2).normal(size=(3, 6))
    got = xform.vmap(lambda x: xform.associative_scan(np.add, x))(xs)
    np.testing.assert_allclose(got, np.cumsum(xs, axis=1), rtol=1e-12, atol=1e-12)


def test_associative_scan_errors_name_the_cause():
    with pytest.raises(xform.ShapeError, match="axis=2"):
        xform.associative_scan(np.add, np.ones((3, 2)), axis=2)
    with pytest.raises(xform.ShapeError, match="different lengths"):
        xform.associative_scan(lambda a, b: a, (np.ones(3), np.ones(4)))
    with pytest.raises(xform.TypeCheckError, match="structure"):
        xform.associative_scan(lambda a, b: (a[0] + b[0],), (np.ones(3), np.ones(3)))
