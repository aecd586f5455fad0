"""vmap of the numpy functions of xform.numpy's math, polynomial, rearrange, sequences and
statistics modules against a Python loop and np.stack (mapped data, weights, indices and
quantiles)."""
import numpy as np
import pytest

import xform

from tests.numpy_functions.support import assert_vmap_matches_loop

_RNG = np.random.default_rng(0)
Y = _RNG.standard_normal((3, 6))
W = _RNG.random((3, 6)) + 0.1

CASES = {
    "histogram": (lambda a: np.histogram(a, 3)[0], (Y,)),
    "histogram_weighted": (lambda a, b: np.histogram(a, 3, weights=b, density=True)[0],
                           (Y, W)),
    "bincount": (lambda b: np.bincount(np.array([0, 2, 2, 1, 0, 4]), b), (W,)),
    "choose": (lambda a: np.choose(np.array([0, 1, 1, 0, 1, 0]), [a, -a]), (Y,)),
    "resize": (lambda a: np.resize(a, (4, 2)), (Y,)),
    "unwrap": (lambda a: np.unwrap(np.cumsum(a * 3)), (Y,)),
    "nanmedian": (lambda a: np.nanmedian(np.where(a > 1, np.nan, a)), (Y,)),
    "isin": (lambda a: np.isin(a, a[:2]), (Y,)),
    "digitize": (lambda a, b: np.digitize(a, np.sort(b)), (Y, W)),
    "searchsorted": (lambda a, b: np.searchsorted(np.sort(b), a), (Y, W)),
    "cov": (lambda a: np.cov(a.reshape(2, 3)), (Y,)),
    "percentile_traced_q": (lambda a, q: np.percentile(a, q * 100), (Y, W[:, 0] - 0.1)),
    "linspace": (lambda a: np.linspace(a[0], a[1], 4), (Y,)),
    "meshgrid": (lambda a: np.meshgrid(a[:2], a[2:5])[0], (Y,)),
    "put_along_axis": (lambda a: xform.numpy.put_along_axis(a, np.array([2, 0]), a[:2] * 5,
                                                            0), (Y,)),
    "put_along_axis_traced": (lambda a, i: xform.numpy.put_along_axis(a, i, a[:1] * 5, 0),
                              (Y, np.array([[1], [3], [5]]))),
    "vander": (lambda a: np.vander(a, 3), (Y,)),
    "polyint": (lambda a: np.polyint(a, 1, k=a[0]), (Y,)),
    "ldexp": (lambda a: np.ldexp(a, 2), (Y,)),
    "heaviside": (np.heaviside, (np.round(Y), W)),
    "partition": (lambda a: np.partition(a, 2), (Y,)),
    "gradient": (lambda a: np.gradient(a, np.cumsum(W[0])), (Y,)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_vmap_matches_loop(name):
    fn, args = CASES[name]
    assert_vmap_matches_loop(fn, *args)
