"""Shared checks of the numpy-function tests: staged values against eager numpy (values,
dtypes and Python types), vmap against a Python loop."""
import warnings

import numpy as np

import xform


def _leaves(value):
    return list(value) if isinstance(value, (tuple, list)) else [value]


def assert_matches_numpy(fun, *args, exact=True):
    """jit(fun)(*args) equals fun(*args) computed by numpy: bit for bit when `exact` (else
    allclose), with numpy's shapes, dtypes and result types (a scalar stays a scalar)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = fun(*args)
        got = xform.jit(fun)(*args)
    assert type(got) is type(want)
    for g, w in zip(_leaves(got), _leaves(want), strict=True):
        assert type(g) is type(w), (type(g), type(w))
        g, w = np.asarray(g), np.asarray(w)
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def assert_vmap_matches_loop(fun, *args, in_axes=0):
    """vmap(fun) over the leading axis of each mapped argument equals a loop and np.stack."""
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    size = next(np.shape(a)[0] for a, ax in zip(args, axes) if ax is not None)
    got = xform.vmap(fun, in_axes=in_axes)(*args)
    rows = [fun(*[a if ax is None else a[i] for a, ax in zip(args, axes)]) for i in range(size)]
    for k, g in enumerate(_leaves(got)):
        want = np.stack([np.asarray(_leaves(row)[k]) for row in rows])
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)
