"""scipy.spatial.distance on tracers: cdist and pdist (kernels, nearest neighbours, t-SNE)
of the common metrics or a Python function of two rows, from numpy's element-wise operations:
the same distances as SciPy's C loops, up to rounding. Imported (xform/scipy/__init__.py) once
the user has imported scipy.spatial.distance."""
from __future__ import annotations

import numpy as np
import scipy.spatial.distance

from xform.errors import shape_error, unsupported_error
from xform.ir.ad import aval
from xform.numpy.construct import staged_array
from xform.numpy.stand_ins import stand_in


def _distance(u, v, metric, p):
    """The distance between rows `u` and `v` (broadcast together) along the last axis."""
    if metric == "sqeuclidean":
        return np.sum((u - v) ** 2, axis=-1)
    if metric == "euclidean":
        return np.sqrt(np.sum((u - v) ** 2, axis=-1))
    if metric == "cityblock":
        return np.sum(np.abs(u - v), axis=-1)
    if metric == "chebyshev":
        return np.max(np.abs(u - v), axis=-1)
    if metric == "minkowski":
        return np.sum(np.abs(u - v) ** p, axis=-1) ** (1.0 / p)
    if metric == "cosine":
        norms = np.sqrt(np.sum(u * u, axis=-1) * np.sum(v * v, axis=-1))
        return 1.0 - np.sum(u * v, axis=-1) / norms
    raise unsupported_error(f"scipy.spatial.distance with metric={metric!r} (staged: "
                            "euclidean, sqeuclidean, cityblock, chebyshev, minkowski, cosine, "
                            "or a Python function of two rows)")


def _rows(name, x):
    x = staged_array(x)
    if aval(x).ndim != 2:
        raise shape_error(f"scipy.spatial.distance.{name}: the array must be 2-dimensional")
    return x


def _options(name, kwargs):
    p = kwargs.pop("p", 2.0)
    if kwargs:
        raise unsupported_error(f"scipy.spatial.distance.{name}(..., {', '.join(kwargs)}=...)")
    return p


def cdist(XA, XB, metric="euclidean", *, out=None, **kwargs):
    """scipy.spatial.distance.cdist: the distance of every row of XA to every row of XB."""
    XA, XB = _rows("cdist", XA), _rows("cdist", XB)
    if aval(XA).shape[1] != aval(XB).shape[1]:
        raise shape_error("scipy.spatial.distance.cdist: XA and XB must have the same number "
                          "of columns")
    if out is not None:
        raise unsupported_error("scipy.spatial.distance.cdist(..., out=...)")
    p = _options("cdist", kwargs)
    if callable(metric):
        return np.array([[metric(a, b) for b in XB] for a in XA])
    return _distance(XA[:, None, :], XB[None, :, :], metric, p)


def pdist(X, metric="euclidean", *, out=None, **kwargs):
    """scipy.spatial.distance.pdist: the condensed distances of the pairs i < j of rows of X,
    each computed from its own two rows (a derivative never meets the zero distance of a row
    to itself)."""
    X = _rows("pdist", X)
    if out is not None:
        raise unsupported_error("scipy.spatial.distance.pdist(..., out=...)")
    p = _options("pdist", kwargs)
    first, second = np.triu_indices(aval(X).shape[0], 1)
    if callable(metric):
        return np.array([metric(X[i], X[j]) for i, j in zip(first, second)])
    return _distance(X[first], X[second], metric, p)


stand_in(scipy.spatial.distance.cdist, cdist)
stand_in(scipy.spatial.distance.pdist, pdist)
