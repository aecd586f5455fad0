"""pad_sum through check_primitive (random windows, overlapping ones too), its impl against an
independent sum of zero-padded numpy arrays, and its error paths."""
import os
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.ir.core import Primitive
from xform.rules import accumulate
from xform.rules.accumulate import pad_sum, pad_sum_p
from xform.testing import check_primitive
from xform.testing import strategies as xst

THIS_FILE = os.path.basename(__file__)

OpCase = namedtuple("OpCase", "name prim example order")


@st.composite
def _window(draw, shape, single=False):
    window = []
    for n in shape:
        start = draw(st.integers(0, max(n - 1, 0) if single else n))
        step = draw(st.integers(1, 3))
        most = len(range(start, n, step))
        length = min(most, 1) if single else draw(st.integers(0, most))
        window.append((start, start + (length - 1) * step + 1 if length else start, step))
    return tuple(window)


def _operand_shape(window):
    shape = tuple(len(range(*bounds)) for bounds in window)
    return () if int(np.prod(shape)) == 1 else shape


@st.composite
def _pad_sum_example(draw, min_dims=0, single=False, with_int=False, rows=False):
    """Operands and params; with `single`, every window holds one element (scalar operands);
    with `rows`, every window is one row, whose operand may leave out its leading axis."""
    shape = draw(xst.shapes(min_dims=min_dims))
    count = draw(st.integers(1, 6 if single else 4))
    windows = tuple(draw(_window(shape, single)) for _ in range(count))
    if rows:
        windows = tuple(((start, start + 1, 1),) + window[1:]
                        for window, start in zip(windows, draw(st.lists(
                            st.integers(0, shape[0] - 1), min_size=count, max_size=count))))
    operands = []
    for i, window in enumerate(windows):
        dtype = np.int64 if with_int and i == 0 else draw(xst.float_dtypes)
        operand_shape = _operand_shape(window)
        if rows and operand_shape and draw(st.booleans()):
            operand_shape = operand_shape[1:]       # the row as `u[t]` reads it
        operands.append(draw(xst.arrays(operand_shape, dtype)))
    dtype = np.result_type(*[x.dtype for x in operands])
    return tuple(operands), {"shape": shape, "dtype": dtype, "windows": windows}


CASES = [
    OpCase("pad_sum", pad_sum_p, _pad_sum_example(), 2),
    OpCase("pad_sum_scalars", pad_sum_p, _pad_sum_example(min_dims=1, single=True), 2),
    OpCase("pad_sum_int", pad_sum_p, _pad_sum_example(min_dims=1, with_int=True), 1),
    OpCase("pad_sum_rows", pad_sum_p, _pad_sum_example(min_dims=1, rows=True), 2),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
@given(data=st.data())
def test_primitive(case, data):
    args, params = data.draw(case.example)
    check_primitive(case.prim, *args, params=params, order=case.order)


def test_every_accumulate_primitive_has_a_case():
    defined = {value for value in vars(accumulate).values() if isinstance(value, Primitive)}
    assert defined == {case.prim for case in CASES}


# -- the impl against zero-padded numpy arrays added in order ------------------------------

def _reference(operands, shape, dtype, windows):
    total = np.zeros(shape, dtype)
    for x, window in zip(operands, windows):
        term = np.zeros(shape, dtype)
        term[tuple(slice(*bounds) for bounds in window)] = np.asarray(x, dtype).reshape(
            [len(range(*bounds)) for bounds in window])
        total = total + term
    return total


@pytest.mark.parametrize("single", [False, True], ids=["blocks", "scalars"])
@given(data=st.data())
def test_impl_equals_a_sum_of_padded_arrays(single, data):
    operands, params = data.draw(_pad_sum_example(min_dims=1, single=single))
    got = pad_sum_p.bind(*operands, **params)
    expected = _reference(operands, **params)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    # Added in the same order: bit for bit, overlaps included.
    assert np.array_equal(got, expected)


@pytest.mark.parametrize("single", [False, True], ids=["blocks", "scalars"])
@given(data=st.data())
def test_the_in_place_form_adds_the_other_terms_into_operand_0(single, data):
    # what compiled code calls when operand 0 is a whole buffer nothing reads later
    operands, params = data.draw(_pad_sum_example(min_dims=1, single=single,
                                                  rows=data.draw(st.booleans())))
    shape, dtype = params["shape"], params["dtype"]
    if int(np.prod(shape)) <= 1:
        return                    # a one-element whole window is a scalar: no buffer to add into
    base = data.draw(xst.arrays(shape, dtype))
    params["windows"] = (tuple((0, n, 1) for n in shape),) + params["windows"]
    expected = pad_sum_p.bind(base, *operands, **params)
    order = data.draw(st.sampled_from(["C", "F"]))
    buffer = np.array(base, order=order)
    got = accumulate._pad_sum_in_place(buffer, *operands, **params)
    assert got is buffer and np.array_equal(got, expected)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.int32])
def test_scalars_at_repeated_positions_add_up(dtype):
    rng = np.random.default_rng(0)
    values = [dtype(v) for v in rng.integers(-5, 5, 50)]
    positions = rng.integers(0, 3, 50)
    windows = tuple(((int(p), int(p) + 1, 1), (1, 2, 1)) for p in positions)
    got = pad_sum_p.bind(*values, shape=(3, 2), dtype=np.dtype(dtype), windows=windows)
    expected = np.zeros((3, 2), dtype)
    np.add.at(expected[:, 1], positions, values)
    assert got.dtype == np.dtype(dtype) and np.array_equal(got, expected)


def test_python_floats_and_numpy_scalars_are_both_operands():
    windows = (((0, 1, 1),), ((2, 3, 1),), ((2, 3, 1),))
    got = pad_sum_p.bind(1.5, np.float64(2.0), np.array(0.25), shape=(3,),
                         dtype=np.dtype(np.float64), windows=windows)
    assert np.array_equal(got, [1.5, 0.0, 2.25])


def test_compiled_graph_takes_python_float_operands():
    f = xform.jit(lambda a, b: pad_sum([a, b, a * b], [((0, 1, 1),), ((2, 3, 1),),
                                                        ((0, 1, 1),)], (3,)))
    assert np.array_equal(f(2.0, 3.0), [8.0, 0.0, 3.0])


def test_mixed_scalar_and_block_terms():
    block = np.arange(6.0).reshape(2, 3)
    got = pad_sum([7.0, block, -1.0], [((0, 1, 1), (0, 1, 1)), ((1, 5, 2), (0, 3, 1)),
                                       ((3, 4, 1), (2, 3, 1))], (5, 3))
    expected = np.zeros((5, 3))
    expected[0, 0] += 7.0
    expected[1:5:2, :] += block
    expected[3, 2] += -1.0
    assert np.array_equal(got, expected)


def test_zero_operands_give_zeros():
    got = pad_sum_p.bind(shape=(2, 2), dtype=np.dtype(np.float32), windows=())
    assert got.dtype == np.float32 and np.array_equal(got, np.zeros((2, 2)))


def test_gradient_of_each_operand_is_its_window():
    weights = np.arange(12.0).reshape(3, 4)

    def f(a, b):
        out = pad_sum([a, b], [((1, 2, 1), (2, 3, 1)), ((0, 3, 2), (1, 4, 2))], (3, 4))
        return np.sum(out * weights)
    grad_a, grad_b = xform.grad(f, (0, 1))(1.0, np.ones((2, 2)))
    assert grad_a == weights[1, 2]
    assert np.array_equal(grad_b, weights[0:3:2, 1:4:2])


# -- errors -----------------------------------------------------------------------------------

ErrCase = namedtuple("ErrCase", "name windows operand_shape")

ERR_CASES = [
    ErrCase("window_past_the_end", (((2, 5, 1),),), (3,)),
    ErrCase("window_rank", (((0, 1, 1), (0, 1, 1)),), ()),
    ErrCase("operand_shape", (((0, 2, 1),),), (3,)),
    ErrCase("one_element_window_needs_a_scalar", (((1, 2, 1),),), (1,)),
    ErrCase("zero_step", (((0, 2, 0),),), (2,)),
    ErrCase("more_operands_than_windows", (), (2,)),
]


@pytest.mark.parametrize("case", ERR_CASES, ids=lambda case: case.name)
def test_bad_params_raise_shape_error_at_the_users_line(case):
    def f(x):
        return pad_sum_p.bind(x, shape=(4,), dtype=np.dtype(np.float64), windows=case.windows)
    with pytest.raises(xform.ShapeError, match=THIS_FILE):
        xform.jit(f)(np.ones(case.operand_shape))


def test_an_operand_that_does_not_cast_raises_shape_error():
    def f(x):
        return pad_sum_p.bind(x, shape=(2,), dtype=np.dtype(np.int32), windows=(((0, 2, 1),),))
    with pytest.raises(xform.ShapeError, match="cannot be added"):
        xform.jit(f)(np.ones(2))
