"""Staging with values on a first call (issue 30, part 5): arithmetic on np.float64 scalars
computed by numpy's scalar operators instead of its ufuncs (xform.ir.values.compute_values),
with the ufuncs' bits, types and warnings."""
import itertools
import warnings

import numpy as np
import pytest

import xform
from xform.ir.registry import RULES, ScalarMath, register
from xform.rules.helpers import elementwise_abstract_eval

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


def test_a_library_scalar_function_giving_a_python_float_still_gives_a_numpy_scalar():
    # its template spells the operator, but its function answers a Python float on np.float64
    # operands: the staged value is numpy's type, as the impl's (np.add) would be
    plus_p = xform.Primitive("library_plus_by_python_floats")
    register(plus_p, impl=np.add, abstract_eval=elementwise_abstract_eval(np.add),
             jvp=lambda primals, tangents: (plus_p.bind(*primals), tangents[0] + tangents[1]),
             scalar_math=ScalarMath(lambda a, b: float(a) + float(b), "{0} + {1}", exact=True,
                                    monotone=(0, 1)))
    try:
        f = xform.value_and_grad(lambda x: plus_p.bind(x * 3.0, x))
        first, later = f(np.float64(0.1)), f(np.float64(0.1))
    finally:
        del RULES[plus_p]
    assert type(first[0]) is np.float64 and _bits(first[0]) == _bits(np.add(0.1 * 3.0, 0.1))
    assert _bits(first[0]) == _bits(later[0]) and first[1] == later[1] == 4.0
