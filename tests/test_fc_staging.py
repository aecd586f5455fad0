"""Staging with values on a first call (issue 30, part 5): arithmetic on np.float64 scalars
computed by numpy's scalar operators instead of its ufuncs (xform.ir.values.compute_values),
with the ufuncs' bits, types and warnings."""
import itertools
import warnings

import numpy as np
import pytest

import xform

_SPECIAL = [0.0, -0.0, 0.7, -3.5, 1e308, -1e308, 5e-324, np.inf, -np.inf, np.nan]


def _arithmetic(x, y):
    return (x * y - y) / x + y


def _by_ufuncs(x, y):
    return np.add(np.divide(np.subtract(np.multiply(x, y), y), x), y)


def _bits(value):
    return np.asarray(value).tobytes()


@pytest.mark.parametrize("x, y", list(itertools.product(_SPECIAL, repeat=2)))
def test_scalar_arithmetic_while_staging_keeps_the_ufuncs_bits_and_types(x, y):
    f = xform.value_and_grad(_arithmetic, argnums=(0, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = _by_ufuncs(np.float64(x), y)
        first = f(np.float64(x), y)         # y: a Python float, weakly typed
        later = f(np.float64(x), y)         # compiled
    assert type(first[0]) is np.float64
    assert _bits(first[0]) == _bits(expected) == _bits(later[0])
    assert all(_bits(a) == _bits(b) for a, b in zip(first[1], later[1]))


def test_python_floats_alone_still_give_a_numpy_scalar():
    # (an operator of two Python floats gives a Python float, where numpy gives np.float64)
    value, grad = xform.value_and_grad(lambda x: x * x + 0.5)(0.7)
    assert type(value) is np.float64 and value == np.multiply(0.7, 0.7) + 0.5
    assert type(grad) is np.float64


@pytest.mark.parametrize("f, messages", [
    (lambda x: x * 1e308 - x, ["overflow encountered in multiply"]),
    # (the second: the derivative's quotient rule, 1 / (x - x))
    (lambda x: (x - x) / (x - x) + x, ["invalid value encountered in divide",
                                       "divide by zero encountered in scalar divide"]),
])
def test_a_warning_of_scalar_arithmetic_while_staging_is_raised_once_by_the_run(f, messages):
    # noted while staging (numpy's scalar operators honour the error state, as its ufuncs
    # do), so the run computes the values again and raises the warning, once
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        xform.value_and_grad(f)(np.float64(10.0))
    assert [str(w.message) for w in caught] == messages
