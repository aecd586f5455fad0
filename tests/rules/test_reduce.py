"""Reductions and scans: each primitive through the check_primitive battery, each numpy
function staged against numpy itself, and pinned cases (ties, zeros, bad axes)."""
import os
import warnings
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.ir.core import Primitive
from xform.numpy import FUNCTIONS
from xform.rules import reduce as R
from xform.testing import check_grads, check_primitive
from xform.testing import strategies as xst

THIS_FILE = os.path.basename(__file__)
FLOATS = (np.float32, np.float64)
ALL_DTYPES = (np.float32, np.float64, np.int64, np.bool_)


def axes_params(ndim):
    """`axes` of an axis-tuple reduction: any subset of the axes, sorted."""
    if ndim == 0:
        return st.just({"axes": ()})
    return st.sets(st.integers(0, ndim - 1)).map(lambda s: {"axes": tuple(sorted(s))})


def sum_params(ndim):
    return st.tuples(axes_params(ndim), st.sampled_from([None, np.dtype(np.float64)])).map(
        lambda pair: dict(pair[0], dtype=pair[1]))


def scan_params(ndim):
    return st.fixed_dictionaries({"axis": st.integers(0, ndim - 1), "reverse": st.booleans(),
                                  "exclusive": st.booleans()})


def arg_params(ndim):
    return st.fixed_dictionaries({"axis": st.integers(0, ndim - 1)})


def values(shape, dtype, kind):
    """Inputs: "any" in [-2, 2]; "distinct" (no ties, so max/min are smooth); "away" from 0
    (|x| >= 0.25, so the division in cumprod's derivative stays well scaled)."""
    if kind == "distinct" and np.dtype(dtype).kind == "f":
        size = int(np.prod(shape, dtype=np.int64))
        return st.permutations(list(range(size))).map(
            lambda p: ((np.array(p, np.float64).reshape(shape) - size / 2) / 4).astype(dtype))
    if kind == "away" and np.dtype(dtype).kind == "f":
        magnitudes = xst.arrays(shape, dtype, low=0.25, high=2.0)
        signs = xst.arrays(shape, np.bool_)
        return st.tuples(magnitudes, signs).map(lambda ms: np.where(ms[1], ms[0], -ms[0]))
    return xst.arrays(shape, dtype)


OpCase = namedtuple("OpCase", "primitive params min_dims dtypes values order")

CASES = [
    OpCase(R.sum_p, sum_params, 0, ALL_DTYPES, "any", 2),
    OpCase(R.prod_p, sum_params, 0, ALL_DTYPES, "any", 2),
    OpCase(R.reduce_max_p, axes_params, 0, ALL_DTYPES, "distinct", 2),
    OpCase(R.reduce_min_p, axes_params, 0, ALL_DTYPES, "distinct", 2),
    OpCase(R.reduce_any_p, axes_params, 0, ALL_DTYPES, "any", 1),
    OpCase(R.reduce_all_p, axes_params, 0, ALL_DTYPES, "any", 1),
    OpCase(R.argmax_p, arg_params, 1, ALL_DTYPES, "distinct", 1),
    OpCase(R.argmin_p, arg_params, 1, ALL_DTYPES, "distinct", 1),
    OpCase(R.cumsum_p, scan_params, 1, ALL_DTYPES, "any", 2),
    OpCase(R.cumprod_p, scan_params, 1, ALL_DTYPES, "away", 2),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.primitive.name)
@given(data=st.data())
def test_primitive(case, data):
    dtype = data.draw(st.sampled_from(case.dtypes), label="dtype")
    shape = data.draw(xst.shapes(min_dims=case.min_dims), label="shape")
    params = data.draw(case.params(len(shape)), label="params")
    x = data.draw(values(shape, dtype, case.values), label="x")
    check_primitive(case.primitive, x, params=params, order=case.order)


def test_case_table_covers_every_primitive():
    defined = {value for value in vars(R).values() if isinstance(value, Primitive)}
    # sum_options takes a mask operand: test_sum_options_primitive
    assert defined == {case.primitive for case in CASES} | {R.sum_options_p}


# -- the numpy functions, staged, against numpy ---------------------------------------------

FnCase = namedtuple("FnCase", "name fn axis_kind")

FUNCTION_CASES = [
    FnCase("sum", lambda x, axis, kd: np.sum(x, axis=axis, keepdims=kd), "axes"),
    FnCase("sum_dtype", lambda x, axis, kd: np.sum(x, axis, np.float32, keepdims=kd), "axes"),
    FnCase("nansum", lambda x, axis, kd: np.nansum(x, axis=axis, keepdims=kd), "axes"),
    FnCase("prod", lambda x, axis, kd: np.prod(x, axis=axis, keepdims=kd), "axes"),
    FnCase("prod_dtype", lambda x, axis, kd: np.prod(x, axis, np.float64, keepdims=kd), "axes"),
    FnCase("mean", lambda x, axis, kd: np.mean(x, axis=axis, keepdims=kd), "axes"),
    FnCase("mean_dtype", lambda x, axis, kd: np.mean(x, axis, np.float32, keepdims=kd), "axes"),
    FnCase("nanmean", lambda x, axis, kd: np.nanmean(x, axis=axis, keepdims=kd), "axes"),
    FnCase("var", lambda x, axis, kd: np.var(x, axis=axis, keepdims=kd), "axes"),
    FnCase("var_ddof", lambda x, axis, kd: np.var(x, axis=axis, ddof=1, keepdims=kd), "axes"),
    FnCase("std", lambda x, axis, kd: np.std(x, axis=axis, keepdims=kd), "axes"),
    FnCase("std_ddof", lambda x, axis, kd: np.std(x, axis=axis, ddof=1, keepdims=kd), "axes"),
    FnCase("max", lambda x, axis, kd: np.max(x, axis=axis, keepdims=kd), "axes"),
    FnCase("amax", lambda x, axis, kd: np.amax(x, axis=axis, keepdims=kd), "axes"),
    FnCase("min", lambda x, axis, kd: np.min(x, axis=axis, keepdims=kd), "axes"),
    FnCase("amin", lambda x, axis, kd: np.amin(x, axis=axis, keepdims=kd), "axes"),
    FnCase("any", lambda x, axis, kd: np.any(x, axis=axis, keepdims=kd), "axes"),
    FnCase("all", lambda x, axis, kd: np.all(x, axis=axis, keepdims=kd), "axes"),
    FnCase("argmax", lambda x, axis, kd: np.argmax(x, axis=axis, keepdims=kd), "axis"),
    FnCase("argmin", lambda x, axis, kd: np.argmin(x, axis=axis, keepdims=kd), "axis"),
    FnCase("cumsum", lambda x, axis, kd: np.cumsum(x, axis=axis), "axis"),
    FnCase("cumsum_dtype", lambda x, axis, kd: np.cumsum(x, axis, np.float32), "axis"),
    FnCase("cumprod", lambda x, axis, kd: np.cumprod(x, axis=axis), "axis"),
    FnCase("methods", lambda x, axis, kd: (x.sum(axis, keepdims=kd), x.prod(axis),
                                           x.mean(axis), x.var(axis, ddof=1), x.std(axis),
                                           x.max(axis), x.min(axis, keepdims=kd),
                                           x.any(axis), x.all(axis)), "axes"),
    # initial= and where= (a traced mask: numpy's masked reduction, bit for bit)
    FnCase("sum_where", lambda x, axis, kd: np.sum(x, axis=axis, keepdims=kd, where=x > 0),
           "axes"),
    FnCase("sum_initial", lambda x, axis, kd: np.sum(x, axis=axis, keepdims=kd, initial=2),
           "axes"),
    FnCase("nansum_where", lambda x, axis, kd: np.nansum(x, axis, where=x < 1, initial=-1),
           "axes"),
    FnCase("mean_where", lambda x, axis, kd: np.mean(x, axis=axis, keepdims=kd, where=x < 1),
           "axes"),
    FnCase("nanmean_where",
           lambda x, axis, kd: np.nanmean(x, axis=axis, keepdims=kd, where=x < 1), "axes"),
    FnCase("var_where", lambda x, axis, kd: np.var(x, axis=axis, keepdims=kd, where=x != 0),
           "axes"),
    FnCase("std_where", lambda x, axis, kd: np.std(x, axis, ddof=1, where=x > -1), "axes"),
    FnCase("prod_where", lambda x, axis, kd: np.prod(x, axis=axis, keepdims=kd, where=x > 0),
           "axes"),
    FnCase("max_initial", lambda x, axis, kd: np.max(x, axis=axis, keepdims=kd, initial=1),
           "axes"),
    FnCase("min_initial_where", lambda x, axis, kd: np.min(x, axis, initial=0, where=x != 0),
           "axes"),
    FnCase("any_where", lambda x, axis, kd: np.any(x, axis=axis, where=x < 1), "axes"),
    FnCase("all_where", lambda x, axis, kd: np.all(x, axis=axis, where=x < 1), "axes"),
    FnCase("add.reduce_where", lambda x, axis, kd: np.add.reduce(x, where=x > 0, initial=1),
           "none"),
    FnCase("maximum.reduce_where",
           lambda x, axis, kd: np.maximum.reduce(x, where=x > 0, initial=1), "none"),
    # the ufunc methods, as numpy dispatches them for tracers (default axis: see below)
    FnCase("add.reduce", lambda x, axis, kd: np.add.reduce(x), "none"),
    FnCase("multiply.reduce", lambda x, axis, kd: np.multiply.reduce(x), "none"),
    FnCase("maximum.reduce", lambda x, axis, kd: np.maximum.reduce(x), "none"),
    FnCase("minimum.reduce", lambda x, axis, kd: np.minimum.reduce(x), "none"),
    FnCase("add.accumulate", lambda x, axis, kd: np.add.accumulate(x), "none"),
    FnCase("multiply.accumulate", lambda x, axis, kd: np.multiply.accumulate(x), "none"),
]


def axis_arguments(ndim, kind):
    """numpy `axis` values: None, an int (maybe negative), and for reductions a tuple."""
    if kind == "none":
        return st.just(None)
    one = st.integers(-max(ndim, 1), max(ndim, 1) - 1)
    if kind == "axis":
        return st.one_of(st.none(), one)
    tuples = st.just(()) if ndim == 0 else st.lists(st.integers(-ndim, ndim - 1), max_size=ndim)
    tuples = tuples.map(tuple).filter(lambda t: len({a % max(ndim, 1) for a in t}) == len(t))
    return st.one_of(st.none(), one, tuples)


def _leaves(value):
    return [np.asarray(v) for v in (value if isinstance(value, tuple) else (value,))]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case", FUNCTION_CASES, ids=lambda c: c.name)
@given(data=st.data())
def test_staged_equals_numpy(case, dtype, data):
    min_dims = 1 if case.name.endswith("accumulate") else 0
    shape = data.draw(xst.shapes(min_dims=min_dims), label="shape")
    axis = data.draw(axis_arguments(len(shape), case.axis_kind), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    x = data.draw(xst.arrays(shape, dtype, low=-3, high=3), label="x")
    _assert_staged_equals_numpy(lambda x: case.fn(x, axis, keepdims), x)


def _assert_staged_equals_numpy(fn, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # var with ddof=1 of one value
        try:
            expected = _leaves(fn(x))
        except (ValueError, TypeError) as err:  # e.g. np.mean(0-d, axis=0): so must staging
            with pytest.raises(ValueError if isinstance(err, ValueError) else TypeError):
                xform.jit(fn)(x)
            return
        staged = _leaves(xform.jit(fn)(x))
    out_avals = xform.make_graph(fn)(x).out_avals
    for got, want, out_aval in zip(staged, expected, out_avals, strict=True):
        assert (out_aval.shape, out_aval.dtype) == (want.shape, want.dtype)
        assert (got.shape, got.dtype) == (want.shape, want.dtype)
        assert np.array_equal(got, want, equal_nan=True), (got, want)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case", FUNCTION_CASES, ids=lambda c: c.name)
def test_staged_equals_numpy_on_rough_values(case, dtype):
    # Hypothesis likes round numbers; bit-for-bit agreement needs values that round.
    x = (np.random.default_rng(5).standard_normal((3, 5, 6)) * 10).astype(dtype)
    axes = [None] if case.axis_kind == "none" else [None, 0, -1, 1]
    axes += [(0, 2), (-1, 1)] if case.axis_kind == "axes" else []
    for axis in axes:
        _assert_staged_equals_numpy(lambda x: case.fn(x, axis, axis == 1), x)


@pytest.mark.parametrize("method, numpy_fn, axis, keepdims", [
    ((np.add, "reduce"), np.add.reduce, 1, True),
    ((np.multiply, "reduce"), np.multiply.reduce, -1, False),
    ((np.maximum, "reduce"), np.maximum.reduce, None, False),
    ((np.minimum, "reduce"), np.minimum.reduce, (0, 1), True),
])
def test_ufunc_reduce_with_axis(method, numpy_fn, axis, keepdims):
    x = np.random.default_rng(1).standard_normal((2, 3))
    staged = xform.jit(lambda x: FUNCTIONS[method](x, axis=axis, keepdims=keepdims))(x)
    np.testing.assert_array_equal(staged, numpy_fn(x, axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("method, numpy_fn", [((np.add, "accumulate"), np.add.accumulate),
                                              ((np.multiply, "accumulate"),
                                               np.multiply.accumulate)])
def test_ufunc_accumulate_with_axis(method, numpy_fn):
    x = np.random.default_rng(2).standard_normal((2, 3)).astype(np.float32)
    staged = xform.jit(lambda x: FUNCTIONS[method](x, axis=1, dtype=np.float64))(x)
    want = numpy_fn(x, axis=1, dtype=np.float64)
    assert staged.dtype == want.dtype
    np.testing.assert_array_equal(staged, want)


def test_ufunc_reduce_axis_keyword_through_numpy():
    x = np.ones((2, 3))
    np.testing.assert_array_equal(xform.jit(lambda x: np.add.reduce(x, axis=1))(x),
                                  np.add.reduce(x, axis=1))


def test_var_mean_and_correction_arguments():
    x = np.random.default_rng(3).standard_normal((3, 4))
    center = np.mean(x, axis=1, keepdims=True)
    staged = xform.jit(lambda x, m: np.var(x, axis=1, mean=m, correction=1))(x, center)
    np.testing.assert_array_equal(staged, np.var(x, axis=1, mean=center, correction=1))
    with pytest.raises(ValueError, match="ddof and correction"):
        xform.jit(lambda x: np.var(x, ddof=1, correction=1))(x)


def test_reductions_under_vmap_and_grad_of_composites():
    x = np.random.default_rng(4).standard_normal((3, 4))
    np.testing.assert_allclose(xform.vmap(lambda r: np.std(r, ddof=1))(x),
                               np.std(x, axis=1, ddof=1), rtol=1e-12)
    for fn in (lambda x: np.std(x, axis=0).sum(), lambda x: np.var(x, ddof=1),
               lambda x: np.mean(x, axis=1).prod(), lambda x: np.cumsum(x).max(),
               lambda x: np.nanmean(x, axis=0).sum()):
        check_grads(fn, (x,), order=2)


# -- ties: the derivative is spread equally ------------------------------------------------

def test_max_and_min_share_derivative_over_ties():
    x = np.array([1.0, 3.0, 3.0, 2.0])
    np.testing.assert_array_equal(xform.grad(np.max)(x), [0, 0.5, 0.5, 0])
    np.testing.assert_array_equal(xform.grad(np.min)(-x), [0, 0.5, 0.5, 0])
    np.testing.assert_array_equal(xform.grad(np.max)(np.full(4, 7.0)), np.full(4, 0.25))
    _, t_out = xform.jvp(np.max, (x,), (np.ones(4),))
    assert t_out == 1.0  # moving every tied value together moves the max as much


def test_max_ties_along_an_axis():
    x = np.array([[2.0, 1.0, 5.0], [2.0, 5.0, 5.0]], np.float32)
    grad = xform.grad(lambda x: np.sum(np.max(x, axis=0) * np.array([1.0, 2.0, 3.0])))(x)
    np.testing.assert_array_equal(grad, [[0.5, 0, 1.5], [0.5, 2, 1.5]])
    assert grad.dtype == np.float32
    grad = xform.grad(lambda x: np.amin(x, axis=1, keepdims=True).sum())(-x)
    np.testing.assert_array_equal(grad, [[0, 0, 1], [0, 0.5, 0.5]])


# -- products with zeros: no division by x ------------------------------------------------

def products_of_others(x):
    return np.array([np.prod(np.delete(x, i)) for i in range(x.size)])


@pytest.mark.parametrize("x", [[1.5, 0.0, 3.0, -2.0], [0.0, 2.0, 0.0, 3.0], [0.0, 0.0],
                               [0.0]], ids=["one_zero", "two_zeros", "all_zero", "single"])
def test_prod_gradient_with_zeros(x):
    x = np.array(x)
    grad = xform.grad(np.prod)(x)
    assert not np.isnan(grad).any()
    np.testing.assert_array_equal(grad, products_of_others(x))
    # prod is a polynomial, so finite differences hold at zeros, to second order
    check_grads(np.prod, (x,), order=2)


def test_prod_hessian_with_one_zero():
    x = np.array([1.0, 0.0, 3.0, 2.0])
    hessian = xform.hessian(np.prod)(x)
    expected = np.array([[0.0 if i == j else np.prod(np.delete(x, [i, j])) for j in range(4)]
                         for i in range(4)])
    np.testing.assert_array_equal(hessian, expected)


def test_prod_gradient_with_zeros_along_axes():
    x = np.array([[[0.0, 2.0], [3.0, 4.0]], [[0.0, 0.0], [1.0, 5.0]]])
    grad = xform.grad(lambda x: np.sum(np.prod(x, axis=(1, 2))))(x)
    for b in range(2):
        np.testing.assert_array_equal(grad[b].ravel(), products_of_others(x[b].ravel()))
    check_grads(lambda x: np.prod(x, axis=0), (x,), order=2)


@pytest.mark.parametrize("x", [[1.5, 0.0, 3.0, -2.0], [2.0, 0.0, 0.0, 3.0]],
                         ids=["one_zero", "two_zeros"])
def test_cumprod_gradient_with_zeros(x):
    x = np.array(x)
    weights = np.array([1.0, -2.0, 0.5, 3.0])
    grad = xform.grad(lambda x: np.sum(np.cumprod(x) * weights))(x)
    expected = sum(w * np.concatenate([products_of_others(x[:i + 1]), np.zeros(3 - i)])
                   for i, w in enumerate(weights))
    np.testing.assert_array_equal(grad, expected)
    # first order only: at zeros the second derivative drops terms (see reduce.py)
    check_grads(lambda x: np.cumprod(x) * weights, (x,), order=1)


# -- argmax/any/all: integer and bool results with no derivative ------------------------------

def test_argmax_and_any_have_zero_derivative_and_numpy_dtypes():
    x = np.array([[0.5, 2.0], [3.0, -1.0]])

    def fn(x):
        return x.sum() + np.argmax(x, axis=1).sum() + np.any(x > 2.5) + np.all(x > 0)
    np.testing.assert_array_equal(xform.grad(fn)(x), np.ones((2, 2)))
    assert xform.jit(np.argmax)(x).dtype == np.int64
    assert xform.jit(np.all)(x).dtype == np.bool_


# -- errors name the user's line ------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda x: np.sum(x, axis=2), lambda x: np.max(x, axis=(0, -2)),
    lambda x: np.mean(x, axis=-3), lambda x: np.cumsum(x, axis=5),
    lambda x: np.argmax(x, axis=2), lambda x: np.var(x, axis=(0, 2)),
    lambda x: np.max(np.broadcast_to(x.sum(), (0, 2)), axis=0),
], ids=["sum", "max_duplicate", "mean", "cumsum", "argmax", "var", "max_empty"])
def test_bad_axis_names_this_file(fn):
    with pytest.raises(xform.ShapeError, match=THIS_FILE):
        xform.jit(fn)(np.ones((2, 3)))


def test_unsupported_options_name_this_file():
    with pytest.raises(xform.UnsupportedError, match=THIS_FILE):
        xform.jit(lambda x: np.prod(x, initial=2.0))(np.ones(3))
    with pytest.raises(xform.UnsupportedError, match=THIS_FILE):
        xform.jit(lambda x: np.max(x, initial=x[0]))(np.ones(3))
    with pytest.raises(xform.TypeCheckError, match="initial"):    # as numpy: no identity
        xform.jit(lambda x: np.max(x, where=x > 0))(np.ones(3))


@pytest.mark.parametrize("fn", [
    lambda x: np.sum(x, axis=1, where=x > 0.1),
    lambda x: np.sum(x, where=np.array([True, False, True]), initial=0.5),
    lambda x: np.mean(x, axis=0, where=x < 0.5, keepdims=True),
    lambda x: np.var(x, axis=1, where=np.array([[True, True, False]] * 4)),
    lambda x: np.std(x, axis=None, where=x > -0.8),
    lambda x: np.prod(x, axis=0, where=x > 0.0),
    lambda x: np.max(x, axis=1, initial=0.25),
    lambda x: np.min(x, axis=0, initial=0.1, where=x > -0.5),
], ids=["sum", "sum_initial", "mean", "var", "std", "prod", "max", "min"])
def test_where_and_initial_derivatives(fn):
    x = np.random.default_rng(3).uniform(-1, 1, (4, 3))
    check_grads(fn, (x,), order=2)


@given(data=st.data())
def test_sum_options_primitive(data):
    shape = data.draw(xst.shapes(min_dims=1), label="shape")
    params = dict(data.draw(axes_params(len(shape))), dtype=None,
                  initial=data.draw(st.sampled_from([None, 0.5, -2.0])))
    x = data.draw(xst.arrays(shape, np.float64), label="x")
    masked = data.draw(st.booleans())
    mask = (data.draw(xst.arrays(shape, np.bool_)),) if masked else ()
    # affine with an initial value: the transpose rule serves only its tangent (no initial)
    check_primitive(R.sum_options_p, x, *mask, params=params, order=2,
                    linear_argnums=(0,) if params["initial"] is None else ())
