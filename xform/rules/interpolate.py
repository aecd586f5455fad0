"""SciPy interpolants at traced query points. `interpolant(query)` is `evaluate(query, nu)`
of a fixed SciPy object (a PPoly, a BSpline, interp1d, a Delaunay triangulation's barycentric
weights); its jvp is the same object one derivative higher. `interpolant_of_data(query,
data)` builds SciPy's interpolator from concrete data and evaluates it (SciPy's own values);
its derivative in the data is a weight matrix (`interpolant` on the identity's interpolator:
these interpolators are linear in their data, PCHIP in its values and slopes) times the data's
tangent, its derivative in the query the interpolator one derivative higher.
"""
from __future__ import annotations

from typing import Any, Callable

import attrs
import numpy as np

from xform.errors import UnsupportedError
from xform.ir.ad import NOT_MAPPED, Zero, aval
from xform.ir.avals import ShapedArray
from xform.ir.core import Primitive
from xform.ir.registry import register
from xform.rules.subgraphs import batch_by_loop
from xform.source_info import user_frame_info

interpolant_p = Primitive("interpolant")


@attrs.frozen(eq=False)
class Interpolant:
    """`evaluate(query, nu)`: the nu-th derivative at each query point. `query_rank` is 0
    for 1-D interpolants (each query element is a point; the result has shape
    query.shape + out_shape) and 1 for n-dimensional ones (the last axis of the query holds
    a point's d coordinates; the result has shape query.shape[:-1] + out_shape + (d,) * nu,
    the partial derivatives last). `max_nu` (None: any) is the highest derivative SciPy
    computes; asking for more is refused by name."""

    evaluate: Callable
    out_shape: tuple
    name: str
    query_rank: int = 0
    max_nu: Any = None

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
    if interpolant.max_nu is not None and nu + 1 > interpolant.max_nu:
        raise UnsupportedError(f"the derivative of {interpolant.name} in its query points "
                               "(SciPy computes none for this method)", user_frame_info())
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


interpolant_of_data_p = Primitive("interpolant_of_data")


@attrs.frozen(eq=False)
class DataInterpolator:
    """An interpolator SciPy builds from the data: `evaluate(data, query, nu)` builds it from
    concrete data (the user's layout, interpolated along `axis`) and evaluates it there, as
    eagerly. `weights` is the Interpolant of the identity's data (n outputs);
    `data_tangent(data, data_dot)` (data and tangent with the axis first, flattened to (n, K))
    gives what the weights multiply: the tangent itself for interpolators linear in their
    data (None), values and slopes' tangents stacked for PCHIP."""

    evaluate: Callable
    weights: Interpolant
    axis: int
    name: str
    data_tangent: Callable = None

    def __repr__(self) -> str:
        return self.name


def query_axes_at(out, n_query, axis):
    """`out` (query axes first, then the data's other axes) with the query axes where SciPy
    puts them: in place of the data's interpolation axis."""
    if axis == 0 or n_query == 0:
        return out
    return np.moveaxis(out, tuple(range(n_query)), tuple(range(axis, axis + n_query)))


def _of_data_shape(query_shape, data_shape, axis):
    return tuple(data_shape[:axis]) + tuple(query_shape) + tuple(data_shape[axis + 1:])


def _of_data_impl(query, data, *, interpolator, nu):
    out = interpolator.evaluate(np.asarray(data, np.float64), np.asarray(query, np.float64),
                                nu)
    return np.asarray(out, np.float64).reshape(
        _of_data_shape(np.shape(query), np.shape(data), interpolator.axis))


def _of_data_abstract_eval(query, data, *, interpolator, nu):
    return ShapedArray(_of_data_shape(query.shape, data.shape, interpolator.axis),
                       np.dtype(np.float64))


def _flat_along(x, axis):
    moved = np.moveaxis(x, axis, 0)
    return np.reshape(moved, (aval(moved).shape[0], -1)), aval(moved).shape[1:]


def _of_data_jvp(primals, tangents, *, interpolator, nu):
    (query, data), (query_dot, data_dot) = primals, tangents
    out = interpolant_of_data_p.bind(query, data, interpolator=interpolator, nu=nu)
    axis, parts = interpolator.axis, []
    if type(data_dot) is not Zero:
        moved, trailing = _flat_along(data_dot, axis)
        if interpolator.data_tangent is not None:
            moved = interpolator.data_tangent(_flat_along(data, axis)[0], moved)
        weights = interpolant_p.bind(query, interpolant=interpolator.weights, nu=nu)
        linear = np.reshape(np.matmul(weights, moved), aval(query).shape + trailing)
        parts.append(query_axes_at(linear, aval(query).ndim, axis))
    if type(query_dot) is not Zero:
        slope = interpolant_of_data_p.bind(query, data, interpolator=interpolator, nu=nu + 1)
        rest = aval(data).ndim - 1 - axis
        parts.append(slope * np.reshape(query_dot, (1,) * axis + aval(query).shape +
                                        (1,) * rest))
    if not parts:
        return out, Zero(aval(out))
    return out, parts[0] if len(parts) == 1 else parts[0] + parts[1]


register(interpolant_of_data_p, impl=_of_data_impl, abstract_eval=_of_data_abstract_eval,
         jvp=_of_data_jvp, batch=batch_by_loop(interpolant_of_data_p), symbolic_zeros=True)


__all__ = ["DataInterpolator", "Interpolant", "interpolant_of_data_p", "interpolant_p",
           "query_axes_at"]
