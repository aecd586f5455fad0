"""Arrays built from lists of traced values (xform/numpy/construct.py): values against eager
numpy for every constructor under jit and vmap, derivatives by check_grads (finite differences
and the dot-product identity), with hypothesis choosing shapes and values."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.testing import check_grads
from xform.testing import strategies as xst

# Each builds an array from the traced `x` (any shape) and constants, as users write it.
CONSTRUCTIONS = {
    "array of a list": lambda x: np.array([x, 2 * x, np.sin(x)]),
    "array of a tuple, dtype": lambda x: np.array((x, x * x), dtype=np.float32),
    "asarray nested": lambda x: np.asarray([[x, np.ones_like(x)], [x * 3, x]]),
    "array mixing constants": lambda x: np.array([x, np.full(np.shape(x), 2.0)]),
    "array ndmin": lambda x: np.array(x, ndmin=3),
    "asarray of a tracer": lambda x: np.asarray(x) * 2,
    "asanyarray": lambda x: np.asanyarray([x, x]),
    "ascontiguousarray": lambda x: np.ascontiguousarray(x) + 1,
    "full with a traced fill": lambda x: np.full((2,) + np.shape(x), x),
    "full of a sum": lambda x: np.full(3, np.sum(x), dtype=np.float64),
    "r_": lambda x: np.r_[np.ravel(x), 1.0, 0:2, np.ravel(x) * 2],
    "c_": lambda x: np.c_[np.ravel(x), np.ravel(x) ** 2],
    "append a list": lambda x: np.append(np.ones(2), [np.sum(x), np.mean(x * x)]),
    "append arrays on an axis": lambda x: np.append(np.atleast_2d(x), np.atleast_2d(x), axis=0),
    "hstack mixing": lambda x: np.hstack([np.ravel(x), 1.0, [2.0, 3.0]]),
    "stack of nested lists": lambda x: np.stack([[np.sum(x), 1.0], [2.0, np.prod(x)]]),
    "vstack of a nested list": lambda x: np.vstack([[np.sum(x), 1.0], np.ones(2)]),
    "block": lambda x: np.block([[np.sum(x), 1.0], [np.ones(2)]]),
}


def values(shape):
    return xst.arrays(shape, np.float64, -2.0, 2.0)


@pytest.mark.parametrize("name", CONSTRUCTIONS)
@given(data=st.data())
def test_staged_values_equal_eager_numpy(name, data):
    construct = CONSTRUCTIONS[name]
    x = data.draw(values(data.draw(xst.shapes(max_dims=2, max_side=3))))
    want = construct(x)
    got = xform.jit(construct)(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", CONSTRUCTIONS)
@given(data=st.data())
def test_derivatives(name, data):
    construct = CONSTRUCTIONS[name]
    x = data.draw(values(data.draw(xst.shapes(max_dims=2, max_side=3))))
    check_grads(lambda x: construct(x).astype(np.float64), (x,), order=2)


@pytest.mark.parametrize("name", ["array of a list", "asarray nested", "full with a traced fill",
                                  "r_", "stack of nested lists", "block"])
def test_vmap_equals_a_loop(name):
    construct = CONSTRUCTIONS[name]
    xs = np.linspace(-1.0, 1.0, 8).reshape(4, 2)
    want = np.stack([construct(x) for x in xs])
    np.testing.assert_array_equal(xform.vmap(construct)(xs), want)


def test_grad_through_a_list_of_scalars_matches_autograd():
    import autograd
    import autograd.numpy as anp

    def loss(np_):
        def f(w):
            v = np_.array([w[0] * w[1], np_.sin(w[0]), w[1] ** 2])
            return np_.sum(v * v)
        return f
    w = np.array([0.3, -1.2])
    np.testing.assert_allclose(xform.grad(loss(np))(w), autograd.grad(loss(anp))(w),
                               rtol=1e-12)


def test_np_array_copies_and_asarray_does_not():
    x = np.arange(3.0)
    staged = xform.make_graph(lambda x: (np.array(x), np.asarray(x)))(x)
    copy, same = staged.outputs
    assert same is staged.inputs[0] and copy is not staged.inputs[0]


def test_string_directive_of_r_names_the_fix():
    with pytest.raises(xform.UnsupportedError, match="string directive") as info:
        xform.jit(lambda x: np.r_["0,2", x, x])(np.ones(2))
    assert "np.concatenate" in info.value.hint


def test_a_librarys_compiled_constructor_call_from_a_users_line_gets_numpy_arrays():
    # numpy.random.default_rng's Cython calls np.zeros with no frame of its own: the frame
    # below is the user's line `np.random.default_rng(0)`, in a function that spells `zeros`
    # on another line. Only the call the user's line makes is the user's.
    def noisy_fill(x):
        rng = np.random.default_rng(0)
        u = np.zeros(3)
        u[0] = x
        u[1] = x * x
        return np.sum(u) + rng.normal()
    staged = xform.jit(noisy_fill)
    for x in (1.5, -0.5, 1.5):
        assert staged(x) == noisy_fill(x)
    assert xform.grad(noisy_fill)(1.5) == pytest.approx(1.0 + 2 * 1.5, rel=1e-12)
    check_grads(noisy_fill, (0.7,), order=1)


def test_the_constructor_call_is_found_on_lines_with_several_calls():
    def nested(x):
        u = np.zeros(2).reshape(1, 2)     # the inner call is zeros, the outer reshape
        v = np.ones(
            2)                              # a call spanning lines
        u[0, 1] = x
        v[0] = x * 2
        return np.sum(u) + np.sum(v)
    assert xform.jit(nested)(1.25) == nested(1.25)
    assert xform.grad(nested)(1.25) == 3.0
