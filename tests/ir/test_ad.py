"""xform.ir.ad's concrete helpers against numpy: broadcast_scalar is np.broadcast_to of a 0-d
value (the same values, shape, zero strides, read-only), and zeros() is a zero view."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from xform.ir.ad import broadcast_scalar, zeros
from xform.ir.avals import ShapedArray, float0

DTYPES = [np.float64, np.float32, np.complex128, np.int64, np.int32, np.bool_, np.uint8]
shapes = st.lists(st.integers(0, 4), max_size=3).map(tuple)


@given(st.sampled_from(DTYPES), shapes, st.integers(-3, 3), st.booleans())
def test_broadcast_scalar_is_numpys_broadcast_to(dtype, shape, value, as_array):
    scalar = np.asarray(value).astype(dtype)
    zero_d = scalar if as_array else scalar[()]
    got, want = broadcast_scalar(zero_d, shape), np.broadcast_to(zero_d, shape)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.strides == (0,) * len(shape)
    np.testing.assert_array_equal(got, want)
    assert not got.flags.writeable
    if got.size:
        with pytest.raises(ValueError):
            got[(0,) * len(shape)] = 1
    assert scalar == np.asarray(value).astype(dtype)   # the value it views is untouched


def test_broadcast_scalar_of_a_value_with_no_buffer_is_numpys():
    obj = np.array(None, dtype=object)
    got = broadcast_scalar(obj, (2, 3))
    assert got.shape == (2, 3) and got.dtype == object and not got.flags.writeable


@given(st.sampled_from([np.float64, np.float32, np.complex128]), shapes)
def test_zeros_is_a_read_only_zero_view(dtype, shape):
    got = zeros(ShapedArray(shape, dtype))
    assert got.shape == shape and got.dtype == dtype and not np.any(got)
    if shape:
        assert not got.flags.writeable


def test_zeros_of_float0():
    got = zeros(ShapedArray((2,), float0))
    assert got.shape == (2,) and got.dtype == float0
