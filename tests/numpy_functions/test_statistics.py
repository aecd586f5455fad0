"""xform.numpy.statistics: order statistics, nan-reductions, averages and covariances against
numpy bit for bit (or to rounding where numpy's summation order differs), derivatives by
check_grads, vmap against a loop, integer results (searchsorted, digitize, bincount,
histogram) and the errors of data-dependent sizes."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.testing import check_grads
from xform.testing import strategies as xst

from tests.numpy_functions.support import assert_matches_numpy, assert_vmap_matches_loop

THIS_FILE = "test_statistics.py"

METHODS = ["linear", "lower", "higher", "nearest", "midpoint"]
AXES = [None, 0, -1, (0, 1)]


@st.composite
def matrices(draw, dtype=np.float64, nans=False, min_side=1):
    shape = draw(xst.shapes(min_dims=2, max_dims=3, min_side=min_side))
    x = draw(xst.arrays(shape, np.float64, -3, 3))
    if nans:
        x.reshape(-1)[draw(st.lists(st.integers(0, x.size - 1), max_size=x.size))] = np.nan
        if draw(st.booleans()):
            x[0] = np.nan       # an all-NaN slice along the other axes
    return x.astype(dtype) if dtype is not np.int64 else np.floor(x * 3).astype(np.int64)


@st.composite
def quantiles(draw):
    return draw(st.one_of(st.sampled_from([0.0, 0.5, 1.0]), st.floats(0, 1),
                          st.floats(0, 1).map(np.float32),
                          xst.arrays((2,), np.float64, 0, 1)))


dtypes = st.sampled_from([np.float64, np.float32, np.int64])


@given(data=st.data(), dtype=dtypes, method=st.sampled_from(METHODS),
       axis=st.sampled_from(AXES), nans=st.booleans())
def test_quantile_family_matches_numpy(data, dtype, method, axis, nans):
    # float64 only with NaNs: for float32, numpy's result dtype then depends on the data
    # (the NaN a slice returns is float32, its other results float64)
    x = data.draw(matrices(dtype, nans and dtype is np.float64))
    q = data.draw(quantiles())
    assert_matches_numpy(lambda a: np.quantile(a, q, axis=axis, method=method), x)
    assert_matches_numpy(lambda a: np.nanquantile(a, q, axis=axis, method=method,
                                                  keepdims=True), x)
    assert_matches_numpy(lambda a: np.percentile(a, np.multiply(q, 100), axis=axis,
                                                 method=method), x)
    assert_matches_numpy(lambda a: np.nanpercentile(a, np.multiply(q, 100), axis=axis), x)


@given(data=st.data(), dtype=dtypes, axis=st.sampled_from(AXES), nans=st.booleans())
def test_median_ptp_and_nan_reductions_match_numpy(data, dtype, axis, nans):
    x = data.draw(matrices(dtype, nans and dtype is not np.int64))
    assert_matches_numpy(lambda a: np.median(a, axis=axis), x)
    assert_matches_numpy(lambda a: np.nanmedian(a, axis=axis, keepdims=True), x)
    assert_matches_numpy(lambda a: np.ptp(a, axis=axis), x)
    for fn in (np.nanmax, np.nanmin, np.nanprod, np.nanvar, np.nanstd):
        assert_matches_numpy(lambda a: fn(a, axis=axis), x)
    assert_matches_numpy(lambda a: np.nanvar(a, axis=axis, ddof=1, keepdims=True), x)
    assert_matches_numpy(lambda a: np.nancumsum(a, axis=-1), x)
    assert_matches_numpy(lambda a: np.nancumprod(a), x)
    if not nans:   # numpy raises on an all-NaN slice
        assert_matches_numpy(lambda a: np.nanargmax(a, axis=0), x)
        assert_matches_numpy(lambda a: np.nanargmin(a), x)


@given(data=st.data(), dtype=dtypes)
def test_average_matches_numpy(data, dtype):
    x = data.draw(matrices(dtype))
    w_last = data.draw(xst.arrays(x.shape[-1:], np.float64, 0.1, 1))
    w_full = data.draw(xst.arrays(x.shape, np.float64, 0.1, 1))
    assert_matches_numpy(np.average, x)
    assert_matches_numpy(lambda a: np.average(a, axis=(0, -1), returned=True), x)
    assert_matches_numpy(lambda a, w: np.average(a, axis=-1, weights=w), x, w_last)
    assert_matches_numpy(lambda a, w: np.average(a, weights=w, returned=True), x, w_full)
    assert_matches_numpy(lambda a: np.average(a, axis=-1, weights=w_last, keepdims=True,
                                              returned=True), x)


@given(data=st.data(), dtype=dtypes, rowvar=st.booleans(), bias=st.booleans())
def test_cov_and_corrcoef_match_numpy(data, dtype, rowvar, bias):
    x = data.draw(xst.arrays((3, 5), np.float64, -3, 3)).astype(dtype)
    x[:, 0] += 4    # no constant row or column
    samples = x.shape[1] if rowvar else x.shape[0]
    aweights = data.draw(xst.arrays((samples,), np.float64, 0.1, 1))
    fweights = data.draw(st.lists(st.integers(1, 3), min_size=samples, max_size=samples))
    # numpy's dot sums in another order: equal to rounding
    close = dict(exact=False)
    assert_matches_numpy(lambda a: np.cov(a, rowvar=rowvar, bias=bias), x, **close)
    assert_matches_numpy(lambda a, w: np.cov(a, rowvar=rowvar, aweights=w), x, aweights,
                         **close)
    assert_matches_numpy(lambda a: np.cov(a, rowvar=rowvar, fweights=fweights,
                                          aweights=aweights, ddof=2), x, **close)
    assert_matches_numpy(lambda a: np.cov(a[0], a[1]), x, **close)
    assert_matches_numpy(lambda a: np.cov(a[0]), x, **close)
    assert_matches_numpy(lambda a: np.corrcoef(a, rowvar=rowvar), x, **close)
    assert_matches_numpy(lambda a: np.corrcoef(a[0], a[1]), x, **close)


# -- derivatives ------------------------------------------------------------------------------

@st.composite
def distinct_matrices(draw):
    """Values at least 0.1 apart, so sorting (and so every order statistic) is smooth."""
    shape = draw(xst.shapes(min_dims=2, max_dims=2, min_side=2))
    perm = np.array(draw(st.permutations(range(int(np.prod(shape))))), np.float64)
    return (perm.reshape(shape) + 0.05 * draw(xst.arrays(shape, np.float64, -1, 1))) / 3


@given(x=distinct_matrices(), q=xst.arrays((2,), np.float64, 0.05, 0.95))
def test_order_statistic_derivatives(x, q):
    # q (n - 1) at least 0.1 from an integer: the interpolation's kinks in q
    position = q * (x.shape[0] - 1)
    q = (np.floor(position) + 0.1 + 0.8 * (position - np.floor(position))) / (x.shape[0] - 1)
    check_grads(lambda a: np.quantile(a, 0.3, axis=1), (x,), order=2)
    check_grads(lambda a, p: np.quantile(a, p, axis=0), (x, q), order=1)
    check_grads(lambda a: np.percentile(a, [20.0, 70.0]), (x,), order=1)
    check_grads(lambda a: np.median(a, axis=0) + np.ptp(a, axis=1).sum(), (x,), order=1)
    y = x.copy()
    y[0, 0] = np.nan
    check_grads(lambda a: np.nanquantile(a, 0.3, axis=1), (y,), order=1)
    check_grads(lambda a: np.nanmedian(a, axis=0), (y,), order=1)


@given(x=distinct_matrices(), data=st.data())
def test_reduction_and_covariance_derivatives(x, data):
    w = data.draw(xst.arrays(x.shape[1:], np.float64, 0.2, 1))
    y = np.vstack([x, x[:1] + 10])      # two values besides the NaN in every column
    y[-1, -1] = np.nan
    for fn in (np.nanmax, np.nanmin, np.nanprod, np.nanvar, np.nanstd):
        check_grads(lambda a: fn(a, axis=0), (y,), order=1)
    check_grads(lambda a: np.nancumprod(a, axis=1) + np.nancumsum(a, axis=1), (y,), order=1)
    check_grads(lambda a, v: np.average(a, axis=1, weights=v), (x, w), order=1)
    check_grads(lambda a, v: np.cov(a, aweights=v), (x, w), order=2)
    check_grads(np.corrcoef, (x + np.arange(x.shape[1]) ** 2,), order=1)


@given(x=distinct_matrices())
def test_vmap_matches_loop(x):
    assert_vmap_matches_loop(lambda a: np.quantile(a, [0.2, 0.5]), x)
    assert_vmap_matches_loop(lambda a: np.median(a), x)
    assert_vmap_matches_loop(lambda a: np.nanvar(a), x)
    assert_vmap_matches_loop(lambda a, q: np.quantile(x[0], q), x, np.full(x.shape[0], 0.3),
                             in_axes=(None, 0))


# -- integer results --------------------------------------------------------------------------

@st.composite
def sorted_with_values(draw):
    a = np.sort(draw(xst.arrays((draw(st.integers(1, 6)),), np.float64, -2, 2)))
    v = draw(xst.arrays(draw(xst.shapes(max_dims=2)), np.float64, -3, 3))
    v.reshape(-1)[:min(v.size, a.size)] = a[:v.size]       # ties with the sorted values
    return a, v


@given(av=sorted_with_values(), side=st.sampled_from(["left", "right"]))
def test_searchsorted_and_digitize_match_numpy(av, side):
    a, v = av
    assert_matches_numpy(lambda s, x: np.searchsorted(s, x, side=side), a, v)
    assert_matches_numpy(lambda x: np.searchsorted(a, x, side=side), v)
    assert_matches_numpy(lambda s, x: np.searchsorted(s, x, side, sorter=np.argsort(s)),
                         a[::-1].copy(), v)
    for right in (False, True):
        for bins in (a, a[::-1].copy()):
            assert_matches_numpy(lambda x, b: np.digitize(x, b, right), v, bins)
            assert_matches_numpy(lambda x: np.digitize(x, bins, right), v)


@given(av=sorted_with_values())
def test_searchsorted_vmap_over_the_sorted_array(av):
    a, v = av
    rows = np.stack([a, a + 0.5, a * 2])
    for side in ("left", "right"):
        assert_vmap_matches_loop(lambda s, x: np.searchsorted(s, x, side), rows,
                                 np.stack([v, v, -v]))
        assert_vmap_matches_loop(lambda s: np.searchsorted(s, v, side), rows)


@given(data=st.data(), bins=st.sampled_from([1, 3, 10, "edges"]),
       limits=st.sampled_from([None, (-1.0, 1.0)]))
def test_histogram_matches_numpy(data, bins, limits):
    x = data.draw(xst.arrays(data.draw(xst.shapes(min_dims=1)), np.float64, -2, 2))
    w = data.draw(xst.arrays(x.shape, np.float64, 0, 1))
    if bins == "edges":
        bins = np.sort(data.draw(xst.arrays((4,), np.float64, -2, 2))) + np.arange(4) * 1e-3
        limits = None
    assert_matches_numpy(lambda a: np.histogram(a, bins, range=limits), x)
    # with edges numpy sums the weights as differences of a cumulative sum: equal to rounding
    assert_matches_numpy(lambda a, b: np.histogram(a, bins, range=limits, weights=b), x, w,
                         exact=isinstance(bins, int))
    assert_matches_numpy(lambda a: np.histogram(a, bins, range=limits, density=True), x,
                         exact=False)
    assert_matches_numpy(lambda a: np.histogram(a * 0 + 1.0, bins), x)   # all values equal
    if not isinstance(bins, int):
        assert_matches_numpy(lambda a, b: np.histogram(a, b), x, bins)


@given(w=xst.arrays((5,), np.float64, 0.1, 1))
def test_bincount_with_differentiable_weights(w):
    counts = np.array([0, 3, 1, 3, 5])
    assert_matches_numpy(lambda v: np.bincount(counts, v), w)
    assert_matches_numpy(lambda v: np.bincount(counts, v, minlength=9), w)
    check_grads(lambda v: np.bincount(counts, v), (w,), order=1)
    check_grads(lambda v: np.histogram(counts, 3, weights=v, density=True)[0], (w,),
                order=1)


def test_data_dependent_sizes_name_the_fix_and_the_line():
    with pytest.raises(xform.ConcretizationError, match=THIS_FILE) as info:  # no values
        xform.make_graph(np.unique)(xform.ShapedArray((3,), np.float64))
    assert "call the transform on arrays" in info.value.hint
    with pytest.raises(xform.ConcretizationError, match=THIS_FILE) as info:
        xform.jit(np.bincount)(np.arange(3))
    assert "weights may be traced" in info.value.hint
    with pytest.raises(xform.UnsupportedError, match=THIS_FILE):
        xform.jit(lambda a: np.quantile(a, 0.5, method="hazen"))(np.ones(3))
    with pytest.raises(xform.ShapeError, match=THIS_FILE):
        xform.jit(lambda a: np.quantile(a, 1.5))(np.ones(3))
    with pytest.raises(xform.ShapeError, match=THIS_FILE):
        xform.jit(lambda a: np.digitize(a, [1.0, 0.0, 2.0]))(np.ones(3))


@given(x=distinct_matrices())
def test_count_nonzero_and_histogram_bin_edges(x):
    assert_matches_numpy(lambda a: np.count_nonzero(a > 0.5), x)
    assert_matches_numpy(lambda a: np.count_nonzero(a > 0.5, axis=0, keepdims=True), x)
    assert_matches_numpy(np.histogram_bin_edges, x)
    assert_matches_numpy(lambda a: np.histogram_bin_edges(a, 4, range=(0.0, 1.0)), x)
    check_grads(lambda a: np.histogram_bin_edges(a, 3), (x,), order=1)


def test_unique_of_traced_values_reads_their_count():
    x = np.array([3.0, 1.0, 3.0, 2.0, 1.0])
    for fn in (np.unique, np.unique_values, lambda a: np.unique(a, return_index=True)[1]):
        np.testing.assert_array_equal(xform.jit(fn)(x), fn(x))
    np.testing.assert_array_equal(xform.grad(lambda a: np.sum(np.unique(a) ** 2))(x),
                                  [6.0, 2.0, 0.0, 4.0, 0.0])   # the first of each value


@pytest.mark.parametrize("name", ["unique_counts", "unique_inverse", "unique_all"])
def test_unique_family_needs_concrete_values(name):
    with pytest.raises(xform.ConcretizationError, match=THIS_FILE) as info:
        xform.jit(getattr(np, name))(np.ones(3))
    assert f"np.{name}" in info.value.hint
