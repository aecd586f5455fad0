"""Comparisons, logical and bitwise primitives, where and clip: each through the
check_primitive battery, each numpy function staged against numpy bit for bit, operators on
tracers, and pinned kinks (clip at its bounds, where with a mask)."""
import os
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.rules import compare as C
from xform.testing import check_primitive
from xform.testing import strategies as xst
from tests.rules.elementwise_checks import (DTYPE_GRID, operand_grid, aval_mismatch, equation_names,
                                            staging_mismatch)

THIS_FILE = os.path.basename(__file__)
FLOATS = (np.float32, np.float64)
INTS = (np.int64, np.int32, np.bool_)
NUMBERS = FLOATS + INTS


def grid(offset):
    """Values n + offset. clip draws x on n + 0.5, lo on n and hi on n + 0.25, so x never
    sits on a bound and lo never equals hi: the kinks stay out of finite differences."""
    return lambda x: (np.floor(x) + offset).astype(x.dtype)


# domains: (low, high) per argument; order: derivative order checked; dtypes: per argument,
# drawn independently; prepare: per argument, maps drawn float values away from kinks;
# linear_argnums: the inputs the transpose rule is linear in (None: every float input).
OpCase = namedtuple("OpCase", "primitive domains order dtypes prepare linear_argnums",
                    defaults=(None, None))
TWO = ((-3, 3), (-3, 3))
SHIFTS = ((-8, 8), (0, 3))

CASES = [
    OpCase(C.COMPARE_PRIMITIVES["less"], TWO, 1, (NUMBERS, NUMBERS)),
    OpCase(C.COMPARE_PRIMITIVES["less_equal"], TWO, 1, (NUMBERS, NUMBERS)),
    OpCase(C.COMPARE_PRIMITIVES["greater"], TWO, 1, (NUMBERS, NUMBERS)),
    OpCase(C.COMPARE_PRIMITIVES["greater_equal"], TWO, 1, (NUMBERS, NUMBERS)),
    OpCase(C.COMPARE_PRIMITIVES["equal"], TWO, 1, (NUMBERS, NUMBERS)),
    OpCase(C.COMPARE_PRIMITIVES["not_equal"], TWO, 1, (NUMBERS, NUMBERS)),
    OpCase(C.COMPARE_PRIMITIVES["logical_and"], TWO, 1, (NUMBERS, NUMBERS)),
    OpCase(C.COMPARE_PRIMITIVES["logical_or"], TWO, 1, (NUMBERS, NUMBERS)),
    OpCase(C.COMPARE_PRIMITIVES["logical_xor"], TWO, 1, (NUMBERS, NUMBERS)),
    OpCase(C.COMPARE_PRIMITIVES["bitwise_and"], TWO, 1, (INTS, INTS)),
    OpCase(C.COMPARE_PRIMITIVES["bitwise_or"], TWO, 1, (INTS, INTS)),
    OpCase(C.COMPARE_PRIMITIVES["bitwise_xor"], TWO, 1, (INTS, INTS)),
    OpCase(C.COMPARE_PRIMITIVES["left_shift"], SHIFTS, 1, (INTS[:2], INTS[:2])),
    OpCase(C.COMPARE_PRIMITIVES["right_shift"], SHIFTS, 1, (INTS[:2], INTS[:2])),
    OpCase(C.isclose_p, TWO, 1, (NUMBERS, NUMBERS)),
    OpCase(C.where_p, ((-3, 3),) * 3, 2, ((np.bool_,), NUMBERS, NUMBERS),
           linear_argnums=(1, 2)),
    OpCase(C.clip_p, ((-2, 2),) * 3, 2, (FLOATS, FLOATS, FLOATS),
           prepare=(grid(0.5), grid(0.0), grid(0.25))),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.primitive.name)
@given(data=st.data())
def test_primitive(case, data):
    first = data.draw(xst.shapes(), label="shape 0")
    shapes = [first] + [data.draw(xst.broadcastable_shapes(first), label=f"shape {i}")
                        for i in range(1, len(case.domains))]
    args = []
    for i, (shape, domain, dtypes) in enumerate(zip(shapes, case.domains, case.dtypes)):
        dtype = data.draw(st.sampled_from(dtypes), label=f"dtype {i}")
        x = data.draw(xst.arrays(shape, dtype, *domain), label=f"arg {i}")
        prepare = case.prepare[i] if case.prepare else None
        args.append(prepare(x) if prepare is not None and x.dtype.kind == "f" else x)
    check_primitive(case.primitive, *args, order=case.order,
                    linear_argnums=case.linear_argnums)


def test_case_table_covers_every_primitive():
    covered = {case.primitive for case in CASES}
    assert set(C.COMPARE_PRIMITIVES.values()) | {C.isclose_p, C.where_p, C.clip_p} <= covered


# -- staged against numpy, bit for bit ----------------------------------------------------------

LEFT, RIGHT = operand_grid(np.int64, without=("np_f32",))

NUMPY_UFUNCS = [getattr(np, name) for name in C.COMPARE_PRIMITIVES]


@pytest.mark.parametrize("ufunc", NUMPY_UFUNCS, ids=lambda u: u.__name__)
def test_staged_ufunc_matches_numpy(ufunc):
    failures = []
    for x_kind, x in LEFT.items():
        for y_kind, y in RIGHT.items():
            problem = staging_mismatch(lambda a, b: ufunc(a, b), x, y)
            if problem:
                failures.append(f"({x_kind}, {y_kind}): {problem}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("ufunc", NUMPY_UFUNCS, ids=lambda u: u.__name__)
def test_abstract_eval_matches_numpy_over_dtypes(ufunc):
    failures = []
    for x in [np.ones((2, 3), dtype) for dtype in DTYPE_GRID] + [2.0, 3, True]:
        for y in [np.ones(3, dtype) for dtype in DTYPE_GRID] + [2.0, 3, True]:
            problem = aval_mismatch(lambda a, b: ufunc(a, b), x, y)
            if problem:
                failures.append(f"({np.asarray(x).dtype}, {np.asarray(y).dtype}): {problem}")
    assert not failures, "\n".join(failures)


CONDITIONS = {
    "bool": np.array([True, False]),
    "bool_col": np.array([[True], [False], [True]]),
    "float": np.array([0.0, -1.5]),
    "py_bool": True,
    "np_bool": np.bool_(False),
}
BRANCHES = ["f32", "f64", "i64", "i32", "bool", "f32_0d", "py_float", "py_int", "py_bool",
            "np_f64"]


def test_staged_where_matches_numpy():
    failures = []
    for c_kind, c in CONDITIONS.items():
        for x_kind in BRANCHES:
            for y_kind in BRANCHES:
                x, y = LEFT[x_kind], RIGHT[y_kind]
                problem = staging_mismatch(lambda *a: np.where(*a), c, x, y)
                if problem:
                    failures.append(f"({c_kind}, {x_kind}, {y_kind}): {problem}")
    assert not failures, "\n".join(failures)


BOUNDS = {
    "none": None,
    "py_float": -0.5,
    "py_int": 1,
    "np_f64": np.float64(0.25),
    "f32_col": np.array([[-1.0], [0.5]], np.float32),
    "i64_col": np.array([[0], [2]]),
}


def test_staged_clip_matches_numpy():
    failures = []
    for x_kind, x in LEFT.items():
        for lo_kind, lo in BOUNDS.items():
            for hi_kind, hi in BOUNDS.items():
                problem = staging_mismatch(lambda a, b, c: np.clip(a, b, c), x, lo, hi)
                if problem is None and isinstance(x, (np.ndarray, np.generic)):
                    problem = staging_mismatch(lambda a, b, c: a.clip(b, c), x, lo, hi)
                if problem:
                    failures.append(f"({x_kind}, {lo_kind}, {hi_kind}): {problem}")
    assert not failures, "\n".join(failures)


# -- operators on tracers -----------------------------------------------------------------------

X = np.array([1.5, -2.0, 3.0])
N = np.array([3, -2, 5])
B = np.array([True, False, True])
OPERATORS = [  # (id, function, primitive it must stage, arguments)
    ("lt", lambda a, b: a < b, "less", (X, X)),
    ("le", lambda a, b: a <= b, "less_equal", (X, N)),
    ("gt", lambda a, b: a > b, "greater", (N, N)),
    ("ge", lambda a, b: a >= b, "greater_equal", (X, X)),
    ("eq", lambda a, b: a == b, "equal", (X, X)),
    ("ne", lambda a, b: a != b, "not_equal", (N, X)),
    ("reflected-lt", lambda a: 2.0 < a, "greater", (X,)),
    ("reflected-eq", lambda a: 2 == a, "equal", (N,)),
    ("and-bool", lambda a, b: a & b, "bitwise_and", (B, B)),
    ("or-bool", lambda a, b: a | b, "bitwise_or", (B, B)),
    ("xor-bool", lambda a, b: a ^ b, "bitwise_xor", (B, B)),
    ("and-int", lambda a, b: a & b, "bitwise_and", (N, N)),
    ("or-int", lambda a: a | 4, "bitwise_or", (N,)),
    ("rxor-int", lambda a: 6 ^ a, "bitwise_xor", (N,)),
    ("rand-bool", lambda a: True & a, "bitwise_and", (B,)),
    ("invert-bool", lambda a: ~a, "invert", (B,)),
    ("np.logical_and", lambda a, b: np.logical_and(a, b), "logical_and", (X, B)),
    ("np.left_shift", lambda a: np.left_shift(a, 2), "left_shift", (N,)),
    ("np.where", lambda c, a: np.where(c, a, 0.0), "where", (B, X)),
    ("np.clip", lambda a: np.clip(a, -1.0, 1.0), "clip", (X,)),
    ("clip-method", lambda a: a.clip(-1.0, 1.0), "clip", (X,)),
    ("clip-min", lambda a: np.clip(a, -1.0, None), "maximum", (X,)),
    ("clip-max", lambda a: np.clip(a, max=1.0), "minimum", (X,)),
]


@pytest.mark.parametrize("op, name, args", [pytest.param(*r[1:], id=r[0]) for r in OPERATORS])
def test_operator_stages_primitive(op, name, args):
    assert equation_names(op, *args) == [name]
    assert staging_mismatch(op, *args) is None


def test_shift_operators_stage_shifts():
    assert equation_names(lambda a: (a << 2) >> 1, N) == ["left_shift", "right_shift"]


def test_bitwise_operators_on_floats_raise_naming_this_file():
    for op in [lambda a, b: a & b, lambda a, b: a | b, lambda a, b: a ^ b]:
        with pytest.raises(xform.XformError, match=THIS_FILE):
            xform.make_graph(op)(X, X)


def test_comparison_of_mismatched_shapes_raises_naming_this_file():
    with pytest.raises(xform.ShapeError, match=THIS_FILE):
        xform.make_graph(lambda a, b: a < b)(np.ones(3), np.ones(2))


def test_where_argument_errors_name_this_file():
    # np.where(c) is np.nonzero(c): its size is read from values, which shapes do not have
    with pytest.raises(xform.ConcretizationError, match=THIS_FILE):
        xform.make_graph(lambda c: np.where(c))(xform.ShapedArray(B.shape, B.dtype))
    with pytest.raises(xform.TypeCheckError, match=f"both or neither(.|\\n)*{THIS_FILE}"):
        xform.make_graph(lambda c, a: np.where(c, a))(B, X)
    with pytest.raises(xform.ShapeError, match=THIS_FILE):
        xform.make_graph(lambda c, a: np.where(c, a, 0.0))(np.ones(2, bool), X)


def test_clip_unsupported_options_name_this_file():
    with pytest.raises(xform.UnsupportedError, match=THIS_FILE):
        xform.make_graph(lambda a: np.clip(a, 0.0, 1.0, out=np.empty(3)))(X)
    with pytest.raises(xform.UnsupportedError, match=THIS_FILE):
        xform.make_graph(lambda a: np.clip(a, 0.0, 1.0, dtype=np.float32))(X)


# -- kinks and pinned derivatives ---------------------------------------------------------------

def clip_gradients(x, lo, hi):
    return xform.grad(lambda a, b, c: np.sum(np.clip(a, b, c)), argnums=(0, 1, 2))(x, lo, hi)


def test_clip_derivative_at_the_bounds_goes_to_x():
    x = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    dx, dlo, dhi = clip_gradients(x, np.full(5, -1.0), np.full(5, 1.0))
    np.testing.assert_array_equal(dx, [0.0, 1.0, 1.0, 1.0, 0.0])
    np.testing.assert_array_equal(dlo, [1.0, 0.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(dhi, [0.0, 0.0, 0.0, 0.0, 1.0])


def test_clip_with_crossed_bounds_is_hi():
    # numpy's clip is minimum(maximum(x, lo), hi): with lo > hi the output is hi everywhere
    x = np.array([0.0, 1.5, 3.0])
    lo, hi = np.full(3, 2.0), np.full(3, 1.0)
    np.testing.assert_array_equal(xform.jit(np.clip)(x, lo, hi), np.clip(x, lo, hi))
    dx, dlo, dhi = clip_gradients(x, lo, hi)
    np.testing.assert_array_equal(dx, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(dlo, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(dhi, [1.0, 1.0, 1.0])


def test_clip_derivatives_sum_to_one_and_broadcast():
    # clip(x + t, lo + t, hi + t) = clip(x, lo, hi) + t, at the bounds too
    x = np.array([[-2.0, -1.0, 0.0, 1.0, 2.0]])
    dx, dlo, dhi = clip_gradients(x, -1.0, np.array([[1.0], [0.5]]))
    assert dx.shape == (1, 5) and np.shape(dhi) == (2, 1)
    assert np.sum(dx) + dlo + np.sum(dhi) == x.size * 2


def test_clip_with_nan_has_zero_derivative():
    dx, dlo, dhi = clip_gradients(np.array([np.nan, 0.5]), 0.0, 1.0)
    np.testing.assert_array_equal(dx, [0.0, 1.0])
    assert dlo == dhi == 0.0


def test_clip_of_int_with_float_bound():
    dlo = xform.grad(lambda b: np.sum(np.clip(np.array([0, 5]), b, 3)))(1.0)
    assert dlo == 1.0


def test_where_with_a_mask():
    mask = np.array([True, False, True, False])
    x, y = np.arange(4.0), -np.arange(4.0)
    dx, dy = xform.grad(lambda a, b: np.sum(np.where(mask, a, b) * 3.0), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(dx, 3.0 * mask)
    np.testing.assert_array_equal(dy, 3.0 * ~mask)


def test_where_with_a_traced_mask_and_broadcast_branches():
    x = np.array([-1.0, 0.5, 2.0])
    # relu written with where: the mask is computed from x, the scalar branch gets nothing
    np.testing.assert_array_equal(xform.grad(lambda a: np.sum(np.where(a > 0, a, 0.0)))(x),
                                  [0.0, 1.0, 1.0])
    # a scalar branch broadcast against the mask collects every selected cotangent
    dy = xform.grad(lambda b: np.sum(np.where(x > 0, x, b)), argnums=0)(5.0)
    assert dy == 1.0


def test_where_mixed_int_and_float_branches():
    mask = np.array([True, False])
    g = xform.grad(lambda b: np.sum(np.where(mask, np.array([1, 2]), b)))(np.array([0.5, 0.5]))
    np.testing.assert_array_equal(g, [0.0, 1.0])


def test_where_second_derivative():
    f = lambda a: np.sum(np.where(a > 0, a ** 3, -a ** 2))  # noqa: E731
    x = np.array([-2.0, 1.5])
    np.testing.assert_allclose(xform.hessian(f)(x), np.diag([-2.0, 9.0]))


def test_comparisons_have_zero_derivative():
    # a float input to a comparison gets a zero (not missing) cotangent
    g = xform.grad(lambda a: np.sum(np.where(a < 1.0, 2.0, 3.0) + (a > 0) * a))(X)
    np.testing.assert_array_equal(g, [1.0, 0.0, 1.0])
