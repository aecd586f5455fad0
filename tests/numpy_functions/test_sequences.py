"""xform.numpy.sequences: linspace/logspace/geomspace with traced endpoints and meshgrid,
against numpy bit for bit, with derivatives and vmap."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.testing import check_grads
from xform.testing import strategies as xst

from tests.numpy_functions.support import assert_matches_numpy, assert_vmap_matches_loop

THIS_FILE = "test_sequences.py"


@st.composite
def endpoints(draw):
    """A start and a stop: Python floats, numpy scalars (float32 too) or arrays."""
    kind = draw(st.sampled_from(["floats", "float32", "arrays", "int"]))
    low, high = draw(st.floats(0.1, 2)), draw(st.floats(0.1, 2))
    if kind == "float32":
        return np.float32(low), high
    if kind == "int":
        return np.float64(low), int(high * 3) + 1
    if kind == "arrays":
        shape = draw(xst.shapes(max_dims=2, max_side=3))
        return draw(xst.arrays(shape, np.float64, 0.1, 2)), high
    return low, high


@given(ends=endpoints(), num=st.integers(0, 6), endpoint=st.booleans(), axis=st.integers(-1, 0))
def test_linspace_logspace_geomspace_match_numpy(ends, num, endpoint, axis):
    start, stop = ends
    assert_matches_numpy(lambda a, b: np.linspace(a, b, num, endpoint, axis=axis), start, stop)
    assert_matches_numpy(lambda a, b: np.linspace(a, b, num, endpoint, retstep=True), start,
                         stop)
    assert_matches_numpy(lambda a, b: np.linspace(a, b * 9, num, endpoint, dtype=int), start,
                         stop)
    assert_matches_numpy(lambda a, b: np.logspace(a, b, num, endpoint, base=2.0, axis=axis),
                         start, stop)
    assert_matches_numpy(lambda a: np.logspace(a, 1.0, num, endpoint, base=np.array([2.0, 3.0]),
                                               axis=-1), np.float64(np.min(start)))
    assert_matches_numpy(lambda a, b: np.geomspace(a, b, num, endpoint, axis=axis), start, stop)
    assert_matches_numpy(lambda a, b: np.geomspace(-a, -b, num, endpoint), start, stop)


@given(a=xst.arrays((3,)), b=xst.arrays((2,)), indexing=st.sampled_from(["xy", "ij"]),
       sparse=st.booleans())
def test_meshgrid_matches_numpy(a, b, indexing, sparse):
    assert_matches_numpy(lambda x, y: np.meshgrid(x, y, indexing=indexing, sparse=sparse), a, b)
    assert_matches_numpy(lambda x, y: np.meshgrid(x, y, x, indexing=indexing, sparse=sparse),
                         a, b)
    assert_matches_numpy(lambda x: np.meshgrid(x, indexing=indexing), a)


@given(start=xst.arrays((2,), np.float64, 0.5, 2), stop=st.floats(0.5, 2))
def test_derivatives_and_vmap(start, stop):
    check_grads(lambda a, b: np.linspace(a, b, 5), (start, stop), order=2)
    check_grads(lambda a, b: np.logspace(a, b, 4, base=3.0, axis=-1), (start, stop), order=1)
    check_grads(lambda a, b: np.geomspace(a, b, 4, endpoint=False), (start, stop), order=1)
    check_grads(lambda a, b: np.meshgrid(a, b * start)[1], (start, stop), order=1)
    assert_vmap_matches_loop(lambda a: np.linspace(a, stop, 4), start)
    assert_vmap_matches_loop(lambda a: np.geomspace(stop, a, 3), start)


def test_errors_name_the_users_line():
    with pytest.raises(xform.ShapeError, match=THIS_FILE):
        xform.jit(lambda a: np.linspace(a, 1.0, -1))(0.0)
    with pytest.raises(xform.ShapeError, match=THIS_FILE):
        xform.jit(lambda a: np.meshgrid(a, indexing="yx"))(np.ones(2))
