"""xform.numpy.rearrange: rot90, rollaxis, broadcast_arrays, append, resize, insert/delete,
compress/extract, choose, diagflat, apply_along_axis/apply_over_axes, partition/argpartition
and the functional put_along_axis, against numpy bit for bit, with derivatives, vmap and the
errors (numpy's in-place put_along_axis, data-dependent sizes)."""
import autograd
import autograd.numpy as anp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.testing import check_grads
from xform.testing import strategies as xst

from tests.numpy_functions.support import assert_matches_numpy, assert_vmap_matches_loop

THIS_FILE = "test_rearrange.py"


@st.composite
def arrays_with_rank(draw, min_dims=1, max_dims=3):
    shape = draw(xst.shapes(min_dims=min_dims, max_dims=max_dims))
    return draw(xst.arrays(shape))


@given(x=arrays_with_rank(min_dims=2), k=st.integers(-5, 5), data=st.data())
def test_rot90_and_rollaxis_match_numpy(x, k, data):
    first, second = data.draw(st.permutations(range(x.ndim)))[:2]
    assert_matches_numpy(lambda a: np.rot90(a, k, axes=(first, second)), x)
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    start = data.draw(st.integers(-x.ndim, x.ndim))
    assert_matches_numpy(lambda a: np.rollaxis(a, axis, start), x)


@given(x=arrays_with_rank(), data=st.data())
def test_append_insert_delete_match_numpy(x, data):
    axis = data.draw(st.integers(0, x.ndim - 1))
    n = x.shape[axis]
    index = data.draw(st.integers(-n, n - 1))
    indices = data.draw(st.lists(st.integers(0, n), min_size=1, max_size=3))
    row = np.take(x, [0], axis=axis)
    assert_matches_numpy(lambda a: np.append(a, a), x)
    assert_matches_numpy(lambda a: np.append(a, a * 2, axis=axis), x)
    assert_matches_numpy(lambda a: np.insert(a, index, 5.0), x)
    assert_matches_numpy(lambda a: np.insert(a, index, 7.0, axis=axis), x)
    assert_matches_numpy(lambda a, r: np.insert(a, indices, r, axis=axis), x, row)
    assert_matches_numpy(lambda a: np.insert(a, slice(0, n, 2), -1.0, axis=axis), x)
    assert_matches_numpy(lambda a: np.delete(a, index, axis=axis), x)
    assert_matches_numpy(lambda a: np.delete(a, np.s_[::2], axis=axis), x)
    assert_matches_numpy(lambda a: np.delete(a, [i % n for i in indices]), x)
    assert_matches_numpy(lambda a: np.delete(a, np.arange(n) % 2 == 0, axis=axis), x)
    assert_matches_numpy(lambda a: np.broadcast_arrays(a, a[..., :1], 2.0), x)


@given(x=arrays_with_rank(), data=st.data())
def test_partition_matches_numpy(x, data):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    n = x.shape[axis]
    kth = data.draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=3))
    x = np.round(x, 1)      # ties
    assert_matches_numpy(lambda a: np.partition(a, kth, axis=axis), x)
    assert_matches_numpy(lambda a: np.argpartition(a, kth[0], axis=axis), x)
    assert_matches_numpy(lambda a: np.partition(a, 0, axis=None), x)


@st.composite
def put_args(draw):
    x = draw(arrays_with_rank(min_dims=2, max_dims=2))
    axis = draw(st.integers(0, 1))
    k = draw(st.integers(1, 3))
    shape = (k, x.shape[1]) if axis == 0 else (x.shape[0], k)
    indices = draw(xst.arrays(shape, np.int64, -x.shape[axis], x.shape[axis] - 1))
    values = draw(xst.arrays(shape))
    return x, indices, values, axis


def _numpy_put(x, indices, values, axis):
    out = x.copy()
    np.put_along_axis(out, indices, values, axis)
    return out


@given(args=put_args())
def test_functional_put_along_axis_matches_numpy(args):
    x, indices, values, axis = args
    want = _numpy_put(x, indices, values, axis)
    put = xform.numpy.put_along_axis
    np.testing.assert_array_equal(xform.jit(lambda a, v: put(a, indices, v, axis))(x, values),
                                  want)
    np.testing.assert_array_equal(put(x, indices, values, axis), want)
    before = x.copy()
    put(x, indices, values, axis)
    np.testing.assert_array_equal(x, before)            # the argument is not written
    flat = indices.reshape(-1)[:2]
    np.testing.assert_array_equal(put(x, flat, values.reshape(-1)[:2], None),
                                  _numpy_put(x, flat, values.reshape(-1)[:2], None))


@given(args=put_args())
def test_put_along_axis_with_traced_distinct_indices(args):
    x, _, values, axis = args
    n = x.shape[axis]
    rng = np.random.default_rng(n)
    distinct = np.argsort(rng.random(x.shape), axis=axis)[:1] if axis == 0 else \
        np.argsort(rng.random(x.shape), axis=axis)[:, :1]
    values = np.take(values, [0], axis=axis)
    got = xform.jit(lambda a, i, v: xform.numpy.put_along_axis(a, i, v, axis))(x, distinct,
                                                                                values)
    np.testing.assert_array_equal(got, _numpy_put(x, distinct, values, axis))


# -- derivatives and batching -----------------------------------------------------------------

@st.composite
def distinct_values(draw):
    shape = draw(xst.shapes(min_dims=2, max_dims=2, min_side=2))
    perm = np.array(draw(st.permutations(range(int(np.prod(shape))))), np.float64)
    return perm.reshape(shape) / 4


@given(x=distinct_values(), args=put_args())
def test_derivatives(x, args):
    check_grads(lambda a: np.rot90(a, 3) * np.rollaxis(a, 1), (x,), order=2)
    check_grads(lambda a: np.insert(a, [1, 0], a[:, :1] * 2, axis=1), (x,), order=1)
    check_grads(lambda a: np.delete(a, 0, axis=0), (x,), order=1)
    check_grads(lambda a: np.append(a, a[0] ** 2), (x,), order=1)
    check_grads(lambda a: np.partition(a, (0, 1), axis=0), (x,), order=2)
    y, indices, values, axis = args
    check_grads(lambda a, v: xform.numpy.put_along_axis(a, indices, v, axis), (y, values),
                order=1)


@given(x=distinct_values())
def test_partition_gradient_agrees_with_autograd(x):
    # autograd's partition gradient is for 1-d arrays only
    got = xform.grad(lambda a: np.sum(np.sin(np.partition(a[0], 1))))(x)
    want = autograd.grad(lambda a: anp.sum(anp.sin(anp.partition(a[0], 1))))(x)
    np.testing.assert_allclose(got, want)
    got = xform.grad(lambda a: np.sum(np.sin(np.rot90(a) + np.rollaxis(a, 1, 0))))(x)
    want = autograd.grad(lambda a: anp.sum(anp.sin(anp.rot90(a) + anp.rollaxis(a, 1, 0))))(x)
    np.testing.assert_allclose(got, want)


@given(x=distinct_values())
def test_vmap_matches_loop(x):
    assert_vmap_matches_loop(lambda a: np.partition(a, 1), x)
    assert_vmap_matches_loop(lambda a: np.argpartition(a, -1), x)
    assert_vmap_matches_loop(lambda a: np.insert(a, 1, a[0]), x)
    assert_vmap_matches_loop(lambda a: xform.numpy.put_along_axis(a, np.array([1]), a[:1] * 3,
                                                                  0), x)


# -- errors -----------------------------------------------------------------------------------

def in_place_put_along_axis(a, v):
    out = a.copy()
    np.put_along_axis(out, np.array([[0], [2]]), v * 3.0, 1)    # writes into `out`
    return out * v


def test_in_place_put_along_axis_writes_into_a_traced_copy():
    a, v = np.arange(6.0).reshape(2, 3), 0.7
    np.testing.assert_array_equal(xform.jit(in_place_put_along_axis)(a, v),
                                  in_place_put_along_axis(a, v))
    check_grads(in_place_put_along_axis, (a, v), order=2)
    with pytest.raises(xform.TypeCheckError, match="copy"):      # the caller's array
        xform.jit(lambda a: np.put_along_axis(a, np.array([[0]]), 1.0, 1))(np.ones((2, 2)))


def test_errors_name_the_users_line():
    x = np.ones((2, 3))
    with pytest.raises(xform.ShapeError, match=THIS_FILE):
        xform.jit(lambda a: np.rot90(a, axes=(0, 0)))(x)
    with pytest.raises(xform.TypeCheckError, match=THIS_FILE):
        xform.jit(lambda a, i: np.delete(a, i))(x, 1)
    with pytest.raises(xform.ShapeError, match=THIS_FILE):
        xform.jit(lambda a: np.partition(a, 5))(x)
    with pytest.raises(xform.ShapeError, match=THIS_FILE):
        xform.jit(lambda a: xform.numpy.put_along_axis(a, np.zeros((2, 2), int), 1.0,
                                                       None))(x)


@given(x=arrays_with_rank(), data=st.data())
def test_resize_compress_extract_choose_diagflat_match_numpy(x, data):
    shape = data.draw(xst.shapes(min_dims=0, max_dims=2, min_side=0, max_side=5))
    axis = data.draw(st.integers(0, x.ndim - 1))
    condition = data.draw(st.lists(st.booleans(), min_size=1, max_size=x.shape[axis]))
    mask = x > 0
    assert_matches_numpy(lambda a: np.resize(a, shape), x)
    assert_matches_numpy(lambda a: np.compress(condition, a, axis=axis), x)
    assert_matches_numpy(lambda a: np.compress(condition, a), x)
    assert_matches_numpy(lambda a: np.extract(mask, a), x)
    index = data.draw(xst.arrays(x.shape[-1:], np.int64, -1, 3))
    for mode in ("wrap", "clip"):
        assert_matches_numpy(lambda a: np.choose(index, [a, -a, 2.0], mode=mode), x)
    assert_matches_numpy(lambda a, i: np.choose(i, [a, a * 3]), x, mask.astype(int))
    assert_matches_numpy(lambda a: np.diagflat(a[..., :3], -1), x)
    check_grads(lambda a: np.resize(a, (2, 5)) + np.choose(index % 3, [a, -a, 2.0]).sum(),
                (x,), order=1)


def test_ellipsis_then_newaxis_keeps_numpy_layout():
    x = np.arange(24.0).reshape(2, 3, 4)
    for index in [(Ellipsis, None, slice(None)), (0, Ellipsis, None, slice(None)),
                  (Ellipsis, [0, 1], slice(None)), (Ellipsis, slice(1, None), slice(None))]:
        np.testing.assert_array_equal(xform.jit(lambda a: a[index])(x), x[index])


def test_data_dependent_sizes_name_the_fix():
    # Staged with values, the size is read (tests/test_values.py); without, it is refused.
    x = xform.ShapedArray((3,), np.float64)
    for fn in (np.nonzero, np.flatnonzero, np.argwhere,
               lambda a: np.compress(a > 0, a), lambda a: np.extract(a > 0, a)):
        with pytest.raises(xform.ConcretizationError, match=THIS_FILE) as info:
            xform.make_graph(fn)(x)
        assert "np.where" in info.value.hint


@given(x=arrays_with_rank(min_dims=2), data=st.data())
def test_apply_along_and_over_axes_match_numpy(x, data):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    assert_matches_numpy(lambda a: np.apply_along_axis(np.cumsum, axis, a), x)
    assert_matches_numpy(lambda a: np.apply_along_axis(lambda v: np.sum(v ** 2), axis, a), x)
    assert_matches_numpy(lambda a: np.apply_along_axis(lambda v: np.outer(v, v), axis, a), x)
    assert_matches_numpy(lambda a: np.apply_along_axis(np.percentile, axis, a, 30.0), x)
    assert_matches_numpy(lambda a: np.apply_over_axes(np.sum, a, [0, -1]), x)
    check_grads(lambda a: np.apply_along_axis(lambda v: np.outer(v, v), axis, a), (x,),
                order=1)
