"""One-input element-wise primitives: each through the check_primitive battery, each ufunc
staged against numpy bit for bit, and pinned kinks (sqrt, abs, conversions, stop_gradient)."""
import os
import warnings
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.ir.avals import dtype_short
from xform.numpy import UFUNCS
from xform.rules import unary as U
from xform.testing import check_primitive
from xform.testing import strategies as xst
from tests.rules.elementwise_checks import (DTYPE_GRID, aval_mismatch, equation_names,
                                            staging_mismatch)

THIS_FILE = os.path.basename(__file__)
FLOATS = (np.float32, np.float64)
INTS = (np.int64, np.int32, np.bool_)


def off_kinks(x):
    """Values n + 0.3: away from 0, the integers and the half-integers (the kinks of abs,
    sign, floor, ceil, rint, trunc, cbrt and reciprocal)."""
    return np.floor(x) + 0.3


# domain: (low, high) of the generated values; dtypes: what hypothesis draws from;
# order: derivative order checked; prepare: maps drawn values away from kinks. Bounds are
# exact in float32 (hypothesis requires it); batch checks scale inputs by up to 1.1, which
# the domains leave room for (arcsin: 0.875 * 1.1 + 0.02 < 1).
OpCase = namedtuple("OpCase", "primitive domain order dtypes params prepare",
                    defaults=(FLOATS, None, None))

CASES = [
    OpCase(U.sin_p, (-3, 3), 2),
    OpCase(U.cos_p, (-3, 3), 2),
    OpCase(U.tan_p, (-1.25, 1.25), 2),
    OpCase(U.arcsin_p, (-0.875, 0.875), 2),
    OpCase(U.arccos_p, (-0.875, 0.875), 2),
    OpCase(U.arctan_p, (-3, 3), 2),
    OpCase(U.sinh_p, (-2, 2), 2),
    OpCase(U.cosh_p, (-2, 2), 2),
    OpCase(U.tanh_p, (-2, 2), 2),
    OpCase(U.arcsinh_p, (-3, 3), 2),
    OpCase(U.arccosh_p, (1.125, 3), 2),
    OpCase(U.arctanh_p, (-0.875, 0.875), 2),
    OpCase(U.exp_p, (-2, 2), 2),
    OpCase(U.exp2_p, (-2, 2), 2),
    OpCase(U.expm1_p, (-2, 2), 2),
    OpCase(U.log_p, (0.125, 3), 2),
    OpCase(U.log2_p, (0.125, 3), 2),
    OpCase(U.log10_p, (0.125, 3), 2),
    OpCase(U.log1p_p, (-0.875, 3), 2),
    OpCase(U.sqrt_p, (0.125, 3), 2),
    OpCase(U.cbrt_p, (-3, 3), 2, prepare=off_kinks),
    OpCase(U.square_p, (-3, 3), 2),
    OpCase(U.reciprocal_p, (-3, 3), 2, prepare=off_kinks),
    OpCase(U.negative_p, (-3, 3), 2, FLOATS + INTS[:2]),
    OpCase(U.positive_p, (-3, 3), 2, FLOATS + INTS[:2]),
    OpCase(U.absolute_p, (-3, 3), 2, FLOATS + INTS, prepare=off_kinks),
    OpCase(U.fabs_p, (-3, 3), 2, FLOATS + INTS, prepare=off_kinks),
    OpCase(U.sign_p, (-3, 3), 2, FLOATS + INTS[:2], prepare=off_kinks),
    OpCase(U.floor_p, (-3, 3), 2, prepare=off_kinks),
    OpCase(U.ceil_p, (-3, 3), 2, prepare=off_kinks),
    OpCase(U.rint_p, (-3, 3), 2, prepare=off_kinks),
    OpCase(U.trunc_p, (-3, 3), 2, prepare=off_kinks),
    OpCase(U.isnan_p, (-3, 3), 1, FLOATS + INTS),
    OpCase(U.isfinite_p, (-3, 3), 1, FLOATS + INTS),
    OpCase(U.isinf_p, (-3, 3), 1, FLOATS + INTS),
    OpCase(U.signbit_p, (-3, 3), 1, FLOATS + INTS[:2]),
    OpCase(U.logical_not_p, (-3, 3), 1, FLOATS + INTS),
    OpCase(U.invert_p, (-3, 3), 1, INTS),
    OpCase(U.conjugate_p, (-3, 3), 2, FLOATS + INTS),
    OpCase(U.deg2rad_p, (-3, 3), 2),
    OpCase(U.rad2deg_p, (-3, 3), 2),
    OpCase(U.convert_p, (-3, 3), 2, params={"dtype": np.dtype(np.float64)}),
    OpCase(U.convert_p, (-3, 3), 2, params={"dtype": np.dtype(np.float32)}),
    OpCase(U.convert_p, (-3, 3), 1, FLOATS + INTS, params={"dtype": np.dtype(np.int32)}),
    OpCase(U.convert_p, (-3, 3), 1, FLOATS + INTS, params={"dtype": np.dtype(np.bool_)}),
    OpCase(U.convert_p, (-3, 3), 1, INTS, params={"dtype": np.dtype(np.float32)}),
    # stop_gradient's zero derivative is what finite differences cannot see: integer inputs
    # here, float inputs in test_stop_gradient
    OpCase(U.stop_gradient_p, (-3, 3), 1, INTS),
]


def case_id(case):
    if not case.params:
        return case.primitive.name
    dtypes = "-".join(dtype_short(d) for d in case.dtypes)
    return f"{case.primitive.name}-to-{dtype_short(case.params['dtype'])}-from-{dtypes}"


@pytest.mark.parametrize("case", CASES, ids=case_id)
@given(data=st.data())
def test_primitive(case, data):
    dtype = data.draw(st.sampled_from(case.dtypes), label="dtype")
    shape = data.draw(xst.shapes(), label="shape")
    x = data.draw(xst.arrays(shape, dtype, *case.domain), label="x")
    if case.prepare is not None and np.dtype(dtype).kind == "f":
        x = case.prepare(x)
    check_primitive(case.primitive, x, params=case.params, order=case.order)


def test_case_table_covers_every_primitive():
    covered = {case.primitive for case in CASES}
    assert set(U.UNARY_PRIMITIVES.values()) | {U.convert_p, U.stop_gradient_p} <= covered


# -- staged against numpy, bit for bit ----------------------------------------------------------

SPECIAL = [-2.5, -1.0, -0.5, -0.0, 0.0, 0.3, 0.5, 1.0, 1.5, 3.0, np.nan, np.inf, -np.inf]
INTEGERS = [-3, -1, 0, 1, 2, 7]

INPUTS = {
    "f32": np.array(SPECIAL, np.float32),
    "f64": np.array(SPECIAL),
    "f32_2d": np.array(SPECIAL[:12], np.float32).reshape(3, 4),
    "f64_0d": np.array(0.5),
    "empty": np.zeros((0, 3), np.float32),
    "i64": np.array(INTEGERS),
    "i32": np.array(INTEGERS, np.int32),
    "bool": np.array([True, False, True]),
    "py_float": 0.5,
    "py_int": 2,
    "py_bool": True,
    "np_f64": np.float64(0.5),
    "np_f32": np.float32(1.5),
    "np_i32": np.int32(3),
}

NUMPY_UFUNCS = [getattr(np, name) for name in U.UNARY_PRIMITIVES] + [np.radians, np.degrees]


def test_every_staged_one_input_ufunc_is_tested():
    staged = {ufunc for ufunc in UFUNCS if ufunc.nin == 1 and ufunc.signature is None
              and getattr(np, ufunc.__name__, None) is ufunc}    # SciPy's: tests/scipy_functions
    assert staged <= set(NUMPY_UFUNCS)


@pytest.mark.parametrize("ufunc", NUMPY_UFUNCS, ids=lambda u: u.__name__)
def test_staged_ufunc_matches_numpy(ufunc):
    failures = []
    for kind, x in INPUTS.items():
        problem = staging_mismatch(lambda a: ufunc(a), x)
        if problem:
            failures.append(f"{kind}: {problem}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("ufunc", NUMPY_UFUNCS, ids=lambda u: u.__name__)
def test_abstract_eval_matches_numpy_over_dtypes(ufunc):
    failures = []
    for dtype in DTYPE_GRID:
        for shape in [(), (2, 3), (0,)]:
            problem = aval_mismatch(lambda a: ufunc(a), np.ones(shape, dtype))
            if problem:
                failures.append(f"{np.dtype(dtype)}{list(shape)}: {problem}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_,
                                   np.complex128, np.uint8])
def test_staged_astype_matches_numpy(dtype):
    failures = []
    for kind, x in INPUTS.items():
        if not isinstance(x, (np.ndarray, np.generic)):
            continue
        problem = staging_mismatch(lambda a: a.astype(dtype), x)
        if problem:
            failures.append(f"{kind}: {problem}")
    assert not failures, "\n".join(failures)


def test_astype_to_the_same_dtype_stages_nothing():
    assert equation_names(lambda a: a.astype(np.float32), np.ones(3, np.float32)) == []
    # a Python float input is weak: astype makes it a strong float64
    assert equation_names(lambda a: a.astype(np.float64), 1.5) == ["convert"]


def test_staged_convert_of_python_scalar():
    out = xform.jit(lambda a: a.astype(np.float32))(1.5)
    assert np.asarray(out).dtype == np.float32 and out == np.float32(1.5)


# -- operators on tracers -----------------------------------------------------------------------

OPERATORS = [  # (id, function, primitive it must stage, input)
    ("neg", lambda a: -a, "negative", np.ones(3)),
    ("neg-int", lambda a: -a, "negative", np.ones(3, np.int32)),
    ("pos", lambda a: +a, "positive", np.ones(3)),
    ("abs", lambda a: abs(a), "absolute", np.ones(3)),
    ("abs-int", lambda a: abs(a), "absolute", np.ones(3, np.int64)),
    ("np.abs", lambda a: np.abs(a), "absolute", np.ones(3)),
    ("invert-bool", lambda a: ~a, "invert", np.ones(3, np.bool_)),
    ("invert-int", lambda a: ~a, "invert", np.ones(3, np.int32)),
    ("radians", lambda a: np.radians(a), "deg2rad", np.ones(3)),
    ("degrees", lambda a: np.degrees(a), "rad2deg", np.ones(3)),
    ("conj", lambda a: np.conj(a), "conjugate", np.ones(3)),
    ("astype", lambda a: a.astype(np.int32), "convert", np.ones(3)),
]


@pytest.mark.parametrize("op, name, x", [pytest.param(*row[1:], id=row[0]) for row in OPERATORS])
def test_operator_stages_primitive(op, name, x):
    assert equation_names(op, x) == [name]


def test_invert_of_float_raises_naming_this_file():
    with pytest.raises(xform.XformError, match=THIS_FILE):
        xform.make_graph(lambda a: ~a)(np.ones(3))


# The caller's buffer: a staged function never writes into it (an array the function makes
# itself, np.empty(3), takes `out=` as eagerly).
OUTSIDE = np.empty(3)


def test_ufunc_out_and_where_are_unsupported_naming_this_file():
    with pytest.raises(xform.UnsupportedError, match=THIS_FILE):
        xform.make_graph(lambda a: np.sin(a, out=OUTSIDE))(np.ones(3))
    with pytest.raises(xform.UnsupportedError, match=THIS_FILE):
        xform.make_graph(lambda a: np.sin(a, where=np.ones(3, bool)))(np.ones(3))


# -- kinks and pinned derivatives ---------------------------------------------------------------

def test_sqrt_derivative_at_positive_values():
    x = np.array([0.25, 1.0, 4.0, 9.0])
    np.testing.assert_allclose(xform.grad(lambda a: np.sum(np.sqrt(a)))(x), 0.5 / np.sqrt(x))
    assert xform.grad(xform.grad(np.sqrt))(4.0) == pytest.approx(-0.25 * 4.0 ** -1.5)


def test_sqrt_derivative_at_zero_is_inf():
    with np.errstate(divide="ignore"):
        assert xform.grad(np.sqrt)(0.0) == np.inf


@pytest.mark.parametrize("fn", [np.abs, np.fabs, abs], ids=["abs", "fabs", "builtin_abs"])
def test_abs_derivative(fn):
    x = np.array([-2.0, -0.5, 0.5, 3.0])
    np.testing.assert_array_equal(xform.grad(lambda a: np.sum(fn(a)))(x), [-1, -1, 1, 1])
    # at 0 the subgradient chosen is sign(0) = 0
    assert xform.grad(fn)(0.0) == 0.0


def test_abs_of_float32_keeps_its_dtype_in_the_gradient():
    g = xform.grad(lambda a: np.sum(np.abs(a)))(np.array([-1.0, 2.0], np.float32))
    assert g.dtype == np.float32


@pytest.mark.parametrize("fn", [np.floor, np.ceil, np.rint, np.trunc, np.sign])
def test_piecewise_constant_derivatives_are_zero(fn):
    x = np.array([-1.5, -0.2, 0.0, 0.7, 2.0])
    np.testing.assert_array_equal(xform.grad(lambda a: np.sum(fn(a)))(x), np.zeros(5))


def test_fabs_of_integers_is_floating_point():
    # fabs is its own primitive: absolute would keep int64
    x = np.array([-3, 2])
    out = xform.jit(np.fabs)(x)
    assert out.dtype == np.float64 and np.array_equal(out, [3.0, 2.0])


def test_stop_gradient():
    x = np.array([1.0, -2.0, 3.0])
    f = lambda a: np.sum(xform.stop_gradient(a) * a)  # noqa: E731
    np.testing.assert_array_equal(xform.jit(xform.stop_gradient)(x), x)
    np.testing.assert_array_equal(xform.grad(f)(x), x)
    _, tangent = xform.jvp(xform.stop_gradient, (x,), (np.ones(3),))
    np.testing.assert_array_equal(tangent, np.zeros(3))
    np.testing.assert_array_equal(xform.vmap(xform.stop_gradient)(np.ones((2, 3))),
                                  np.ones((2, 3)))


def test_convert_derivatives():
    x = np.array([0.5, -1.5], np.float32)
    g = xform.grad(lambda a: np.sum(a.astype(np.float64) ** 2))(x)
    assert g.dtype == np.float32 and np.array_equal(g, 2 * x)
    # into integers the derivative is zero, not an error
    g = xform.grad(lambda a: np.sum(a.astype(np.int32) * a))(np.array([1.5, 2.5]))
    np.testing.assert_array_equal(g, [1.0, 2.0])


def test_linear_unary_transposes():
    x = np.array([0.5, -1.0, 2.0])
    for fn, scale in [(np.negative, -1.0), (np.positive, 1.0), (np.conjugate, 1.0),
                      (np.deg2rad, np.pi / 180), (np.rad2deg, 180 / np.pi)]:
        _, pullback = xform.vjp(fn, x)
        np.testing.assert_allclose(pullback(np.ones(3))[0], np.full(3, scale), rtol=1e-15)


def test_no_runtime_warning_in_smooth_derivatives():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        xform.grad(lambda a: np.sum(np.log(a) + np.sqrt(a) + np.arccosh(a + 1)))(np.ones(3))
