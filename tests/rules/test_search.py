"""The search family (searchsorted, argpartition): the rule battery, including batching over
stacks of sorted rows, on sorted rows with ties and values between and on the samples."""
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.rules import search
from xform.testing import check_primitive
from xform.testing import strategies as xst


@st.composite
def searchsorted_args(draw):
    batch = draw(st.sampled_from([(), (2,), (2, 3)]))
    n = draw(st.integers(1, 5))
    rows = np.sort(np.round(draw(xst.arrays(batch + (n,), np.float64, -2, 2)), 1), axis=-1)
    values = np.round(draw(xst.arrays(batch + draw(xst.shapes(max_dims=2)), np.float64, -3, 3)),
                      1)
    return (rows, values), {"side": draw(st.sampled_from(["left", "right"])),
                            "batch_ndim": len(batch)}


@st.composite
def argpartition_args(draw):
    x = np.round(draw(xst.arrays(draw(xst.shapes(min_dims=1)), np.float64, -2, 2)), 1)
    axis = draw(st.integers(0, x.ndim - 1))
    kth = tuple(sorted(set(draw(st.lists(st.integers(0, x.shape[axis] - 1), min_size=1,
                                         max_size=3)))))
    return (x,), {"kth": kth, "axis": axis}


OpCase = namedtuple("OpCase", "name prim args")

CASES = [
    OpCase("searchsorted", search.searchsorted_p, searchsorted_args()),
    OpCase("argpartition", search.argpartition_p, argpartition_args()),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@given(data=st.data())
def test_primitive_battery(case, data):
    args, params = data.draw(case.args)
    check_primitive(case.prim, *args, params=params, order=1)


def test_every_primitive_has_a_case():
    prims = {v for v in vars(search).values() if isinstance(v, xform.Primitive)}
    assert prims == {case.prim for case in CASES}


@given(data=st.data())
def test_searchsorted_batches_match_numpy_per_row(data):
    (rows, values), params = data.draw(searchsorted_args())
    got = search.searchsorted_p.bind(rows, values, **params)
    flat_rows = rows.reshape((-1, rows.shape[-1]))
    flat_values = values.reshape((len(flat_rows), -1)) if params["batch_ndim"] else [values]
    want = [np.searchsorted(r, v, side=params["side"]) for r, v in zip(flat_rows, flat_values)]
    np.testing.assert_array_equal(np.reshape(got, -1), np.reshape(want, -1))


def test_zero_derivative():
    x = np.array([0.3, -1.0, 2.0])
    assert np.all(xform.grad(lambda a: np.sum(np.argpartition(a, 1) * a))(x)
                  == np.argpartition(x, 1))
    assert xform.grad(lambda a: np.sum(np.searchsorted(np.sort(a), a) * a))(x).tolist() == \
        np.searchsorted(np.sort(x), x).tolist()
