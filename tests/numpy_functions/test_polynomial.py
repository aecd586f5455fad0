"""xform.numpy.polynomial: polyval, polyadd/polysub/polymul, polyder/polyint and vander against
numpy, with derivatives against finite differences."""
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from xform.testing import check_grads
from xform.testing import strategies as xst

from tests.numpy_functions.support import assert_matches_numpy


@given(p=xst.arrays((4,)), q=xst.arrays((2,)), x=xst.arrays((3, 2)), m=st.integers(0, 3))
def test_polynomials_match_numpy(p, q, x, m):
    # numpy's polymul trims leading zeros (a data-dependent length): keep them nonzero
    p[0], q[0] = 1 + abs(p[0]), -1 - abs(q[0])
    assert_matches_numpy(np.polyval, p, x)
    assert_matches_numpy(lambda v: np.polyval([1.0, -2.0, 3.0], v), x)
    assert_matches_numpy(np.polyadd, p, q)
    assert_matches_numpy(np.polysub, q, p)
    assert_matches_numpy(np.polymul, p, q, exact=False)
    assert_matches_numpy(lambda c: np.polyder(c, m), p)
    assert_matches_numpy(lambda c: np.polyint(c, m), p)
    assert_matches_numpy(lambda c, k: np.polyint(c, m, k=k), p, 1.5)
    assert_matches_numpy(lambda c: np.polyint(c, m, k=[1.0, 2.0, 3.0]), p)


@given(x=xst.arrays((4,)), n=st.sampled_from([None, 0, 1, 3, 6]), increasing=st.booleans())
def test_vander_matches_numpy(x, n, increasing):
    assert_matches_numpy(lambda v: np.vander(v, n, increasing), x)
    assert_matches_numpy(lambda v: np.vander(v, n, increasing), np.arange(4))


@given(p=xst.arrays((4,)), x=xst.arrays((3,)))
def test_polynomial_derivatives(p, x):
    check_grads(np.polyval, (p, x), order=2)
    check_grads(lambda a, b: np.polyint(np.polymul(a, b), 2, k=b[:2]), (p, x), order=1)
    check_grads(lambda a: np.polyder(np.polysub(a, a[:2] ** 2), 2), (p,), order=1)
    check_grads(lambda a: np.vander(a, 4), (x,), order=1)
