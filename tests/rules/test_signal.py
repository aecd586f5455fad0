"""Convolution (xform/rules/signal.py): the rule battery in both modes, n-d, both methods;
the IIR filter's battery."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.rules import signal
from xform.testing import check_primitive
from xform.testing import strategies as xst


@st.composite
def operands(draw, valid):
    ndim = draw(st.integers(1, 2))
    big = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    small = tuple(draw(st.integers(1, side)) for side in big) if valid else \
        tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    return (draw(xst.arrays(big, np.float64, -2, 2)), draw(xst.arrays(small, np.float64, -2, 2)))


@pytest.mark.parametrize("mode", ["full", "valid"])
@pytest.mark.parametrize("method", ["direct", "fft"])
@given(data=st.data())
def test_primitive_battery(mode, method, data):
    check_primitive(signal.convolve_p, *data.draw(operands(mode == "valid")),
                    params={"mode": mode, "method": method}, order=2)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@given(data=st.data())
def test_correlate_battery(mode, dtype, data):
    a, v = (data.draw(xst.arrays((data.draw(st.integers(1, 5)),), dtype, -2, 2))
            for _ in range(2))
    check_primitive(signal.correlate_p, a, v, params={"mode": mode}, order=2)


@given(data=st.data())
def test_lfilter_battery(data):
    taps = data.draw(st.integers(1, 3))
    b = data.draw(xst.arrays((taps,), np.float64, -2, 2))
    # a[0] away from zero, the feedback small: a stable filter
    a = np.concatenate([[data.draw(st.sampled_from([1.0, -1.5, 2.0]))],
                        data.draw(xst.arrays((data.draw(st.integers(0, 2)),), np.float64,
                                             -0.4, 0.4))])
    x = data.draw(xst.arrays((data.draw(st.integers(1, 2)), data.draw(st.integers(1, 6))),
                             np.float64, -2, 2))
    check_primitive(signal.lfilter_p, b, a, x, order=2, linear_argnums=(0, 2))


def test_every_primitive_has_a_case():
    prims = {v for v in vars(signal).values() if isinstance(v, xform.Primitive)}
    assert prims == {signal.convolve_p, signal.correlate_p, signal.lfilter_p}
