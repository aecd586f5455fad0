"""Two-input element-wise primitives: each through the check_primitive battery with
broadcasting shapes, each ufunc staged against numpy bit for bit over dtype pairs (NEP 50
weak scalars included), operators on tracers, and pinned kinks (ties, power at 0)."""
import os
import warnings
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.numpy import UFUNCS
from xform.rules import binary as B
from xform.rules.compare import COMPARE_PRIMITIVES
from xform.testing import check_primitive
from xform.testing import strategies as xst
from tests.numpy_functions.test_math import COMPOSED_UFUNCS
from tests.rules.elementwise_checks import (DTYPE_GRID, operand_grid, aval_mismatch, equation_names,
                                            staging_mismatch)

THIS_FILE = os.path.basename(__file__)
FLOATS = (np.float32, np.float64)
NUMBERS = FLOATS + (np.int64, np.int32)


def grid(offset):
    """Values n + offset: with offsets 0.3 away from 0 and from sign changes (divisors,
    copysign, hypot, arctan2); with offsets 0.25 and 0.75 for x and y, never tied."""
    return lambda x: (np.floor(x) + offset).astype(x.dtype)


def powers_of_two(y):
    """y in {+-0.5, +-1, +-2}: with x = n + 0.3, x / y is exact and at least 0.15 away from
    an integer, where remainder, fmod and floor_divide jump."""
    magnitude = 2.0 ** np.clip(np.round(y), -1, 1)
    return np.where(y >= 0, magnitude, -magnitude).astype(y.dtype)


# domains: ((low, high) of x, (low, high) of y); order: derivative order checked; dtypes:
# drawn independently for x and y; prepare: (map of x, map of y) moving drawn float values
# away from kinks;
# linear_argnums: the inputs the transpose rule is linear in (None: every float input).
OpCase = namedtuple("OpCase", "primitive domains order dtypes prepare linear_argnums",
                    defaults=(FLOATS, (None, None), None))
ANY = ((-2, 2), (-2, 2))
OFF_KINKS = (grid(0.3), grid(0.3))
OFF_TIES = (grid(0.25), grid(0.75))
OFF_INTEGER_QUOTIENTS = (grid(0.3), powers_of_two)

CASES = [
    OpCase(B.add_p, ANY, 2, NUMBERS),
    OpCase(B.subtract_p, ANY, 2, NUMBERS),
    OpCase(B.multiply_p, ANY, 2, NUMBERS),
    OpCase(B.divide_p, ANY, 2, prepare=(None, grid(0.3)), linear_argnums=(0,)),
    OpCase(B.power_p, ((0.125, 3), (-2, 2)), 2),
    OpCase(B.float_power_p, ((0.125, 3), (-2, 2)), 2),
    OpCase(B.maximum_p, ANY, 2, NUMBERS, prepare=OFF_TIES),
    OpCase(B.minimum_p, ANY, 2, NUMBERS, prepare=OFF_TIES),
    OpCase(B.fmax_p, ANY, 2, NUMBERS, prepare=OFF_TIES),
    OpCase(B.fmin_p, ANY, 2, NUMBERS, prepare=OFF_TIES),
    OpCase(B.arctan2_p, ANY, 2, prepare=OFF_KINKS),
    OpCase(B.hypot_p, ANY, 2, prepare=OFF_KINKS),
    OpCase(B.logaddexp_p, ANY, 2),
    OpCase(B.logaddexp2_p, ANY, 2),
    OpCase(B.remainder_p, ANY, 2, prepare=OFF_INTEGER_QUOTIENTS),
    OpCase(B.fmod_p, ANY, 2, prepare=OFF_INTEGER_QUOTIENTS),
    OpCase(B.floor_divide_p, ANY, 1, prepare=OFF_INTEGER_QUOTIENTS),
    OpCase(B.copysign_p, ANY, 2, prepare=OFF_KINKS),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.primitive.name)
@given(data=st.data())
def test_primitive(case, data):
    x_shape = data.draw(xst.shapes(), label="x_shape")
    y_shape = data.draw(xst.broadcastable_shapes(x_shape), label="y_shape")
    if data.draw(st.booleans(), label="swap shapes"):
        x_shape, y_shape = y_shape, x_shape
    x_dtype = data.draw(st.sampled_from(case.dtypes), label="x_dtype")
    y_dtype = data.draw(st.sampled_from(case.dtypes), label="y_dtype")
    x = data.draw(xst.arrays(x_shape, x_dtype, *case.domains[0]), label="x")
    y = data.draw(xst.arrays(y_shape, y_dtype, *case.domains[1]), label="y")
    x, y = [prepare(v) if prepare is not None and v.dtype.kind == "f" else v
            for prepare, v in zip(case.prepare, (x, y))]
    if y.shape == () and y.dtype == np.float64 and data.draw(st.booleans(), label="weak y"):
        y = float(y)  # a Python scalar: weakly typed under NEP 50
    check_primitive(case.primitive, x, y, order=case.order,
                    linear_argnums=case.linear_argnums)


def test_case_table_covers_every_primitive():
    assert set(B.BINARY_PRIMITIVES.values()) <= {case.primitive for case in CASES}


# -- staged against numpy, bit for bit ----------------------------------------------------------

LEFT, RIGHT = operand_grid(np.float32)


def right_operands(ufunc):
    if ufunc is np.power:
        # integers to negative integer powers raise in numpy by value, which abstract
        # evaluation cannot see; such a staged call raises numpy's error at run time
        return {k: np.abs(v) if np.asarray(v).dtype.kind == "i" else v
                for k, v in RIGHT.items()}
    return RIGHT


NUMPY_UFUNCS = [getattr(np, name) for name in B.BINARY_PRIMITIVES]


def test_every_staged_two_input_ufunc_is_tested():
    # here, for comparisons and bitwise ops in test_compare.py, for compositions in
    # tests/numpy_functions/test_math.py (SciPy's: tests/scipy_functions)
    staged = {ufunc for ufunc in UFUNCS if ufunc.nin == 2 and ufunc.signature is None
              and getattr(np, ufunc.__name__, None) is ufunc}
    assert staged <= set(NUMPY_UFUNCS) | {getattr(np, name) for name in COMPARE_PRIMITIVES} \
        | set(COMPOSED_UFUNCS)


@pytest.mark.parametrize("ufunc", NUMPY_UFUNCS, ids=lambda u: u.__name__)
def test_staged_ufunc_matches_numpy(ufunc):
    failures = []
    for x_kind, x in LEFT.items():
        for y_kind, y in right_operands(ufunc).items():
            problem = staging_mismatch(lambda a, b: ufunc(a, b), x, y)
            if problem:
                failures.append(f"({x_kind}, {y_kind}): {problem}")
    assert not failures, "\n".join(failures)


GRID_OPERANDS = ([np.ones((2, 3), dtype) for dtype in DTYPE_GRID]
                 + [np.ones((), dtype) for dtype in DTYPE_GRID] + [2.0, 3, True, 1j])


@pytest.mark.parametrize("ufunc", NUMPY_UFUNCS, ids=lambda u: u.__name__)
def test_abstract_eval_matches_numpy_over_dtypes(ufunc):
    failures = []
    for x in GRID_OPERANDS:
        for y in [np.ones(3, dtype) for dtype in DTYPE_GRID] + [2.0, 3, True]:
            problem = aval_mismatch(lambda a, b: ufunc(a, b), x, y)
            if problem:
                failures.append(f"({np.asarray(x).dtype}, {np.asarray(y).dtype}): {problem}")
    assert not failures, "\n".join(failures)


def test_mismatched_shapes_raise_shape_error_naming_this_file():
    with pytest.raises(xform.ShapeError, match=THIS_FILE):
        xform.make_graph(lambda a, b: a + b)(np.ones(3), np.ones(4))
    with pytest.raises(xform.ShapeError, match=THIS_FILE):
        xform.make_graph(lambda a, b: np.power(a, b))(np.ones((2, 3)), np.ones((2,)))


# The caller's buffer: a staged function never writes into it (an array the function makes
# itself, np.empty(3), takes `out=` as eagerly).
OUTSIDE = np.empty(3)


def test_ufunc_out_and_where_are_unsupported_naming_this_file():
    x, y, mask = np.ones(3), np.ones(3), np.array([True, False, True])
    with pytest.raises(xform.UnsupportedError, match=THIS_FILE):
        xform.make_graph(lambda a, b: np.add(a, b, where=mask))(x, y)
    with pytest.raises(xform.UnsupportedError, match=THIS_FILE):
        xform.make_graph(lambda a, b: np.multiply(a, b, out=OUTSIDE))(x, y)


def test_ufunc_of_weak_inputs_is_strong():
    # numpy returns a strong numpy scalar even from Python scalars (np.sin(2.0) is a float64),
    # so staged avals must not keep the inputs' weak type: they would promote differently
    x32 = np.ones(3, np.float32)
    for fn in [lambda a, b: np.sin(a) * b, lambda a, b: (np.sin(a) * b).astype(np.float32),
               lambda a, b: np.add(a, 1.0) * b]:
        assert staging_mismatch(fn, 2.0, x32) is None


def test_ufunc_dtype_argument_computes_in_that_dtype():
    # 1 + (2**-24 + 2**-50): float64 then cast rounds up; float32 inputs tie to even, to 1
    x, y = np.array([1.0]), np.array([2.0 ** -24 + 2.0 ** -50])
    assert staging_mismatch(lambda a, b: np.add(a, b, dtype=np.float32), x, y) is None


# -- operators on tracers -----------------------------------------------------------------------

X = np.array([1.5, -2.0, 3.0])
N = np.array([3, -2, 5])
OPERATORS = [  # (id, function, primitive it must stage, arguments)
    ("add", lambda a, b: a + b, "add", (X, X)),
    ("radd", lambda a: 2.0 + a, "add", (X,)),
    ("sub", lambda a, b: a - b, "subtract", (X, X)),
    ("rsub", lambda a: 2 - a, "subtract", (N,)),
    ("mul", lambda a, b: a * b, "multiply", (X, N)),
    ("rmul", lambda a: 3 * a, "multiply", (X,)),
    ("truediv", lambda a, b: a / b, "divide", (X, X)),
    ("truediv-int", lambda a, b: a / b, "divide", (N, N)),
    ("rtruediv", lambda a: 1.0 / a, "divide", (X,)),
    ("floordiv", lambda a, b: a // b, "floor_divide", (N, N)),
    ("rfloordiv", lambda a: 7.0 // a, "floor_divide", (X,)),
    ("mod", lambda a, b: a % b, "remainder", (X, X)),
    ("rmod", lambda a: 7 % a, "remainder", (N,)),
    ("pow", lambda a, b: a ** b, "power", (X, X)),
    ("pow-int", lambda a: a ** 2, "power", (N,)),
    ("rpow", lambda a: 2.0 ** a, "power", (X,)),
    ("np.divide", lambda a, b: np.divide(a, b), "divide", (X, X)),
    ("np.mod", lambda a, b: np.mod(a, b), "remainder", (X, X)),
]


@pytest.mark.parametrize("op, name, args", [pytest.param(*r[1:], id=r[0]) for r in OPERATORS])
def test_operator_stages_primitive(op, name, args):
    assert equation_names(op, *args) == [name]
    assert staging_mismatch(op, *args) is None


# -- kinks and pinned derivatives ---------------------------------------------------------------

@pytest.mark.parametrize("ufunc", [np.maximum, np.minimum, np.fmax, np.fmin])
def test_ties_split_the_derivative(ufunc):
    grads = xform.grad(lambda a, b: np.sum(ufunc(a, b)), argnums=(0, 1))
    dx, dy = grads(np.array([1.0, 2.0, -1.0]), np.array([1.0, 0.0, 3.0]))
    larger = ufunc in (np.maximum, np.fmax)
    np.testing.assert_array_equal(dx, [0.5, 1.0 if larger else 0.0, 0.0 if larger else 1.0])
    np.testing.assert_array_equal(dy, [0.5, 0.0 if larger else 1.0, 1.0 if larger else 0.0])


def test_maximum_tie_against_a_broadcast_scalar():
    # relu at 0: the tie is split, and the half going to the constant is dropped
    g = xform.grad(lambda a: np.sum(np.maximum(a, 0.0)))(np.array([-1.0, 0.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 0.5, 1.0])


def test_nan_in_maximum_and_fmax():
    # maximum propagates the nan: neither input is the output
    grads = xform.grad(lambda a, b: np.maximum(a, b), argnums=(0, 1))
    assert grads(np.nan, 1.0) == (0.0, 0.0)
    # fmax ignores it: the other input is the output
    grads = xform.grad(lambda a, b: np.fmax(a, b), argnums=(0, 1))
    assert grads(np.nan, 1.0) == (0.0, 1.0)


@pytest.mark.parametrize("exponent, slopes", [
    (0, (0.0, 0.0, 0.0)), (1, (1.0, 0.0, 0.0)), (2, (0.0, 2.0, 0.0)), (3, (0.0, 0.0, 6.0)),
    (0.0, (0.0, 0.0, 0.0)), (1.0, (1.0, 0.0, 0.0)), (2.0, (0.0, 2.0, 0.0)),
])
def test_power_derivatives_at_zero_base(exponent, slopes):
    f = lambda x: x ** exponent  # noqa: E731
    first = xform.grad(f)
    second = xform.grad(first)
    third = xform.grad(second)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no 0 * inf computed anywhere, even masked
        assert (first(0.0), second(0.0), third(0.0)) == slopes
        assert xform.jacfwd(xform.jacrev(f))(0.0) == slopes[1]


def test_power_derivative_with_array_exponent_at_zero_base():
    g = xform.grad(lambda x: np.sum(x ** np.array([0, 1, 2, 3])))(np.zeros(4))
    np.testing.assert_array_equal(g, [0.0, 1.0, 0.0, 0.0])


@pytest.mark.parametrize("ufunc", [np.power, np.float_power])
def test_power_derivative_in_exponent_at_zero_base_is_zero(ufunc):
    for exponent in [0.5, 1.0, 2.0, 3.5]:
        assert xform.grad(lambda y: ufunc(0.0, y))(exponent) == 0.0
        assert xform.grad(lambda x, y: ufunc(x, y), argnums=1)(0.0, exponent) == 0.0
    assert xform.grad(xform.grad(lambda y: ufunc(0.0, y)))(2.0) == 0.0


def test_power_derivatives_keep_float32():
    x = np.array([0.5, 2.0], np.float32)
    dx, dy = xform.grad(lambda a, b: np.sum(a ** b), argnums=(0, 1))(x, x)
    assert dx.dtype == dy.dtype == np.float32
    np.testing.assert_allclose(dx, x * x ** (x - 1), rtol=1e-6)
    np.testing.assert_allclose(dy, x ** x * np.log(x), rtol=1e-6)


def test_remainder_and_fmod_derivatives():
    remainder = xform.grad(lambda a, b: np.remainder(a, b), argnums=(0, 1))
    fmod = xform.grad(lambda a, b: np.fmod(a, b), argnums=(0, 1))
    assert remainder(5.5, 2.0) == (1.0, -2.0)    # -floor(2.75)
    assert remainder(-5.5, 2.0) == (1.0, 3.0)    # -floor(-2.75)
    assert fmod(-5.5, 2.0) == (1.0, 2.0)         # -trunc(-2.75)


def test_copysign_derivative():
    grads = xform.grad(lambda a, b: np.sum(np.copysign(a, b)), argnums=(0, 1))
    dx, dy = grads(np.array([2.0, -2.0, 2.0]), np.array([-1.0, -1.0, 1.0]))
    np.testing.assert_array_equal(dx, [-1.0, 1.0, 1.0])
    np.testing.assert_array_equal(dy, [0.0, 0.0, 0.0])


def test_broadcast_gradients_are_summed():
    dx, dy = xform.grad(lambda a, b: np.sum(a * b), argnums=(0, 1))(np.ones((2, 3)),
                                                                    np.arange(3.0))
    np.testing.assert_array_equal(dx, np.broadcast_to(np.arange(3.0), (2, 3)))
    np.testing.assert_array_equal(dy, [2.0, 2.0, 2.0])


def test_bool_operands_follow_numpy():
    b = np.array([True, False, True])
    # numpy computes remainder and floor_divide of bools in int8; subtract refuses them
    for ufunc in [np.remainder, np.floor_divide, np.power, np.add, np.multiply]:
        assert staging_mismatch(lambda x, y: ufunc(x, y), b, b[::-1].copy()) is None
    with pytest.raises(xform.XformError, match=THIS_FILE):
        xform.make_graph(lambda x, y: x - y)(b, b)


@pytest.mark.parametrize("ufunc", [np.logaddexp, np.logaddexp2])
def test_logaddexp_derivatives_at_infinities(ufunc):
    x = np.array([-np.inf, -np.inf, np.inf, np.inf, 1.0])
    y = np.array([-np.inf, 1.0, 1.0, np.inf, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no inf - inf computed, even masked
        _, pullback = xform.vjp(lambda a, b: ufunc(a, b), x, y)
        dx, dy = pullback(np.ones(5))
    # the input equal to the output takes the derivative; ties split it
    np.testing.assert_allclose(dx, [0.5, 0.0, 1.0, 0.5, 0.5], rtol=1e-15)
    np.testing.assert_allclose(dy, [0.5, 1.0, 0.0, 0.5, 0.5], rtol=1e-15)
