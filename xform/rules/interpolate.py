"""A concrete SciPy interpolant evaluated at traced query points: `interpolant(query)` is
`evaluate(query, nu)` of a fixed SciPy object (a PPoly, a BSpline, interp1d, a Delaunay
triangulation's barycentric weights), and its jvp the same object one derivative higher.
Interpolants of traced data are built on this (xform/scipy/interpolate.py): the ones linear in
their data are a weight matrix (this primitive, on the identity's interpolant) times the data.
"""
from __future__ import annotations

from typing import Callable

import attrs
import numpy as np

from xform.ir.ad import NOT_MAPPED, Zero, aval
from xform.ir.avals import ShapedArray
from xform.ir.core import Primitive
from xform.ir.rules import register

interpolant_p = Primitive("interpolant")


@attrs.frozen(eq=False)
class Interpolant:
    """`evaluate(query, nu)`: the nu-th derivative at each query point. `query_rank` is 0
    for 1-D interpolants (each query element is a point; the result has shape
    query.shape + out_shape) and 1 for n-dimensional ones (the last axis of the query holds
    a point's d coordinates; the result has shape query.shape[:-1] + out_shape + (d,) * nu,
    the partial derivatives last)."""

    evaluate: Callable
    out_shape: tuple
    name: str
    query_rank: int = 0

    def __repr__(self) -> str:
        return self.name


def _out_shape(query_shape, interpolant, nu):
    points = query_shape[:len(query_shape) - interpolant.query_rank]
    extra = query_shape[len(query_shape) - interpolant.query_rank:] * nu
    return tuple(points) + tuple(interpolant.out_shape) + tuple(extra)


def _interpolant_impl(query, *, interpolant, nu):
    out = interpolant.evaluate(np.asarray(query, np.float64), nu)
    return np.asarray(out, np.float64).reshape(_out_shape(np.shape(query), interpolant, nu))


def _interpolant_abstract_eval(query, *, interpolant, nu):
    return ShapedArray(_out_shape(query.shape, interpolant, nu), np.dtype(np.float64))


def _interpolant_jvp(primals, tangents, *, interpolant, nu):
    (query,), (query_dot,) = primals, tangents
    out = interpolant_p.bind(query, interpolant=interpolant, nu=nu)
    if type(query_dot) is Zero:
        return out, Zero(aval(out))
    slope = interpolant_p.bind(query, interpolant=interpolant, nu=nu + 1)
    n_points = aval(query).ndim - interpolant.query_rank
    n_out = len(interpolant.out_shape) + nu * interpolant.query_rank
    if interpolant.query_rank == 0:
        tangent = np.reshape(query_dot, aval(query).shape + (1,) * n_out)
        return out, slope * tangent
    # the last axis of slope pairs with the query point's coordinates
    tangent = np.reshape(query_dot, aval(query).shape[:n_points] + (1,) * n_out +
                         aval(query).shape[n_points:])
    return out, np.sum(slope * tangent, axis=-1)


def _interpolant_batch(size, args, dims, *, interpolant, nu):
    (query,), (dim,) = args, dims
    if dim is not NOT_MAPPED and interpolant.query_rank and dim == aval(query).ndim - 1:
        query, dim = np.moveaxis(query, dim, 0), 0
    return interpolant_p.bind(query, interpolant=interpolant, nu=nu), dim


register(interpolant_p, impl=_interpolant_impl, abstract_eval=_interpolant_abstract_eval,
         jvp=_interpolant_jvp, batch=_interpolant_batch, symbolic_zeros=True)


__all__ = ["Interpolant", "interpolant_p"]
