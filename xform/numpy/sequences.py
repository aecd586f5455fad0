"""numpy's sequences with traced endpoints (linspace, logspace, geomspace) and coordinate grids
(meshgrid), written as numpy computes them so that values agree."""
import operator

import numpy as np

from xform.errors import shape_error, unsupported_error
from xform.ir.ad import aval, ndim
from xform.ir.avals import broadcast_shapes
from xform.ir.tracer import Tracer
from xform.numpy.axes import normalize_axis
from xform.numpy.protocol import implements
from xform.numpy.shape import as_array, broadcast_to, moveaxis, reshape


def _inexact_dtype(*values):
    """numpy's result type of the endpoints (Python scalars weakly typed), made inexact."""
    dtype = np.result_type(*[v if type(v) in (int, float, complex, Tracer) else as_array(v)
                             for v in values])
    return dtype if dtype.kind in "fc" else np.result_type(dtype, np.float64)


@implements(np.linspace)
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
    """`np.linspace` with traced (array) endpoints: start + arange(num) * step, the last
    sample exactly `stop`; differentiable in both endpoints."""
    num = operator.index(num)
    if num < 0:
        raise shape_error(f"Number of samples, {num}, must be non-negative.")
    div = (num - 1) if endpoint else num
    computed = _inexact_dtype(start, stop)
    start, stop = as_array(start).astype(computed), as_array(stop).astype(computed)
    delta = stop - start
    rank = ndim(delta)
    steps = np.arange(0, num, dtype=computed).reshape((-1,) + (1,) * rank)
    if div > 0:
        step = delta / div
        # numpy scales by delta / div, or where any step is 0 (denormal deltas) divides
        # first and multiplies by delta, for every sample
        any_zero = np.any(step == 0)
        if type(any_zero) is Tracer:
            y = np.where(any_zero, (steps / div) * delta, steps * step) + start
        else:
            y = ((steps / div) * delta if any_zero else steps * step) + start
    else:
        step = float("nan")  # numpy: the step of 0 or 1 samples is undefined
        y = steps * delta + start
    if endpoint and num > 1:
        shape = (num,) + broadcast_shapes(aval(y).shape[1:], aval(stop).shape)
        y = np.concatenate([broadcast_to(y, shape)[:-1],
                            reshape(broadcast_to(stop, shape[1:]), (1,) + shape[1:])])
    if axis != 0:
        y = moveaxis(y, 0, normalize_axis(axis, ndim(y)))
    if dtype is not None:
        if np.dtype(dtype).kind in "iu":
            y = np.floor(y)
        y = y.astype(dtype)
    return (y, step) if retstep else y


@implements(np.logspace)
def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """`np.logspace`: base ** linspace(start, stop); traced endpoints and base."""
    if not isinstance(base, (float, int)) and ndim(base):
        # an array base is broadcast with the endpoints (it may change what `axis` means)
        start, stop, base = (as_array(v) for v in (start, stop, base))
        rank = max(ndim(start), ndim(stop), ndim(base))
        start, stop, base = (reshape(v, (1,) * (rank - ndim(v)) + aval(v).shape)
                             for v in (start, stop, base))
        base = np.expand_dims(base, axis)
    y = linspace(start, stop, num=num, endpoint=endpoint, axis=axis)
    result = np.power(base, y)
    return result if dtype is None else result.astype(dtype)


@implements(np.geomspace)
def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """`np.geomspace` for real endpoints of either sign (numpy's ValueError for a zero
    endpoint needs concrete values: a traced zero gives NaN or inf)."""
    start, stop = as_array(start) * 1.0, as_array(stop) * 1.0
    computed = np.result_type(aval(start).dtype, aval(stop).dtype, float(num))
    if computed.kind == "c":
        raise unsupported_error("numpy.geomspace with complex endpoints")
    start, stop = start.astype(computed), stop.astype(computed)
    sign = np.sign(start)
    start = start / sign
    stop = stop / sign
    result = logspace(np.log10(start), np.log10(stop), num=num, endpoint=endpoint,
                      base=10.0, dtype=computed)
    # numpy writes the endpoints back, since 10 ** log10(x) need not be x
    if num > 0:
        shape = aval(result).shape
        ends = [reshape(broadcast_to(start, shape[1:]), (1,) + shape[1:])]
        middle = result[1:]
        if num > 1 and endpoint:
            ends.append(reshape(broadcast_to(stop, shape[1:]), (1,) + shape[1:]))
            middle = result[1:-1]
        result = np.concatenate([ends[0], middle] + ends[1:])
    result = result * sign
    if axis != 0:
        result = moveaxis(result, 0, normalize_axis(axis, ndim(result)))
    return result if dtype is None else result.astype(dtype)


@implements(np.meshgrid)
def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """`np.meshgrid`: each coordinate vector along its own axis ('xy' swaps the first two),
    broadcast to the full grid unless `sparse`."""
    if indexing not in ("xy", "ij"):
        raise shape_error("Valid values for `indexing` are 'xy' and 'ij'.")
    rank = len(xi)
    grids = []
    for i, x in enumerate(xi):
        shape = [1] * rank
        shape[i] = -1
        grids.append(reshape(as_array(x), tuple(shape)))
    if indexing == "xy" and rank > 1:
        grids[0] = reshape(grids[0], (1, -1) + (1,) * (rank - 2))
        grids[1] = reshape(grids[1], (-1, 1) + (1,) * (rank - 2))
    if not sparse:
        shape = broadcast_shapes(*[aval(g).shape for g in grids])
        grids = [broadcast_to(g, shape) for g in grids]
        if copy:
            grids = [np.copy(g) for g in grids]
    return tuple(grids)
