"""An ellipsis followed by full slices keeps spanning only the axes before them."""
import numpy as np
import pytest

import xform

INDICES = [(Ellipsis, slice(None, 1), slice(None)), (Ellipsis, 0, slice(None)),
           (Ellipsis, slice(1, None), slice(None), slice(None)), (Ellipsis, slice(None))]


@pytest.mark.parametrize("index", INDICES)
def test_ellipsis_before_full_slices(index):
    x = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(xform.jit(lambda a: a[index])(x), x[index])
    grad = xform.grad(lambda a: np.sum(a[index] ** 2))(x)
    expected = np.zeros_like(x)
    expected[index] = 2 * x[index]
    np.testing.assert_array_equal(grad, expected)
