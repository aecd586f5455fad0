"""numpy's shape functions on tracers: reshape, ravel, squeeze, broadcast_to, transpose,
moveaxis, swapaxes, copy, pad, flip, roll, tile, repeat, diagonal, diag, trace, tril/triu,
atleast_*d, real/imag; each checks numpy's arguments, then binds the shape primitives."""
import numpy as np

from xform.errors import TypeCheckError, shape_error, unsupported_error
from xform.ir.ad import aval
from xform.ir.concrete import calls_method
from xform.ir.tracer import Tracer
from xform.numpy.axes import normalize_axes, normalize_axis
from xform.numpy.protocol import implements
from xform.rules.shape import (broadcast_to_p, concatenate_p, copy_p, diag_embed, diagonal_p,
                               flip_p, pad_p, repeat_p, reshape_p, split_p, transpose_p)
from xform.source_info import user_frame_info


def _resolve_shape(size, shape):
    shape = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    if shape.count(-1) > 1:
        raise shape_error("can only specify one unknown dimension")
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if known == 0 or size % known:
            raise shape_error(f"cannot reshape an array of size {size} into shape {shape}")
        shape = tuple(size // known if d == -1 else d for d in shape)
    return shape


def _index_order(order, name):
    """numpy's `order` of a reshape: "C" (last index fastest) or "F" (first index fastest);
    "A" and "K" follow the memory layout, which a traced array does not have."""
    if order not in ("C", "F"):
        raise unsupported_error(f"numpy.{name}(..., order={order!r})")
    return order


@implements(np.reshape)
def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    """`np.reshape` in index order "C" or "F" (the "F" reshape of `a` is the "C" reshape of
    its transpose, transposed back)."""
    order = _index_order(order, "reshape")
    shape = _resolve_shape(aval(a).size, newshape if shape is None else shape)
    if shape == aval(a).shape:
        return a
    if order == "F":
        return transpose(reshape_p.bind(transpose(a), shape=shape[::-1]))
    return reshape_p.bind(a, shape=shape)


@implements(np.ravel)
def ravel(a, order="C"):
    return reshape(a, (aval(a).size,), _index_order(order, "ravel"))


@implements(np.expand_dims)
def expand_dims(a, axis):
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    shape = list(aval(a).shape)
    ndim = len(shape) + len(axes)
    for ax in sorted(normalize_axis(ax, ndim) for ax in axes):
        shape.insert(ax, 1)
    return reshape(a, tuple(shape))


@implements(np.squeeze)
def squeeze(a, axis=None):
    shape = aval(a).shape
    if axis is None:
        axes = {i for i, d in enumerate(shape) if d == 1}
    else:
        axes = {normalize_axis(ax, len(shape))
                for ax in (axis if isinstance(axis, (tuple, list)) else (axis,))}
        if any(shape[ax] != 1 for ax in axes):
            raise shape_error("cannot select an axis to squeeze out which has size not "
                              "equal to one")
    return reshape(a, tuple(d for i, d in enumerate(shape) if i not in axes))


@implements(np.broadcast_to)
def broadcast_to(array, shape, subok=False):
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (int(shape),)
    if aval(array).shape == shape:
        return array
    return broadcast_to_p.bind(array, shape=shape)


@implements(np.transpose)
def transpose(a, axes=None):
    ndim = len(aval(a).shape)
    axes = tuple(reversed(range(ndim))) if axes is None else \
        tuple(normalize_axis(ax, ndim) for ax in axes)
    if axes == tuple(range(ndim)):
        return a
    return transpose_p.bind(a, axes=axes)


@implements(np.moveaxis)
def moveaxis(a, source, destination):
    ndim = len(aval(a).shape)
    source = source if isinstance(source, (tuple, list)) else (source,)
    destination = destination if isinstance(destination, (tuple, list)) else (destination,)
    source = [normalize_axis(s, ndim) for s in source]
    destination = [normalize_axis(d, ndim) for d in destination]
    order = [n for n in range(ndim) if n not in source]
    for dest, src in sorted(zip(destination, source)):
        order.insert(dest, src)
    return transpose(a, order)


@implements(np.swapaxes)
def swapaxes(a, axis1, axis2):
    ndim = len(aval(a).shape)
    order = list(range(ndim))
    i, j = normalize_axis(axis1, ndim), normalize_axis(axis2, ndim)
    order[i], order[j] = order[j], order[i]
    return transpose(a, order)


@implements(np.copy)
def copy(a, order="K", subok=False):
    return copy_p.bind(a) if order == "K" else copy_p.bind(a, order=order)


@implements(np.may_share_memory)
def may_share_memory(a, b, max_work=None):
    """`np.may_share_memory` asked by numpy's compiled `permutation` of a traced array, called
    on the user's line by a generator made in the function: may (so numpy copies it first, then
    shuffles the copy's numbers). Asked by other code, refused as before: what such code goes
    on to do with a Tracer does not stage."""
    caller = (a if type(a) is Tracer else b).builder.entry_caller
    if caller is None or not calls_method(caller, "permutation"):
        raise unsupported_error("numpy.may_share_memory")
    return True


def as_array(x):
    """`x` itself when traced, else `np.asarray(x)`: numpy's array coercion of an operand."""
    return x if type(x) is Tracer else np.asarray(x)


def _pairs(value, ndim, name):
    """numpy's per-axis (before, after) pairs of a pad argument, as a concrete array."""
    try:
        return np.broadcast_to(np.asarray(value), (ndim, 2))
    except ValueError:
        raise shape_error(f"{name} {value!r} does not fit an array of dimension "
                          f"{ndim}") from None


# Modes whose padding copies elements: each axis is a gather of source positions, which are
# numpy's own padding of the positions 0..n-1 (so repeated reflections match numpy's).
_COPYING_MODES = ("edge", "wrap", "reflect", "symmetric")


def _pad_by_copies(array, widths, mode, options):
    if options.get("reflect_type", "even") != "even":
        raise unsupported_error(f"numpy.pad(..., mode={mode!r}, "
                                f"reflect_type={options['reflect_type']!r})")
    for axis, (lo, hi) in enumerate(widths):
        if not lo and not hi:
            continue
        try:
            sources = np.pad(np.arange(aval(array).shape[axis]), (lo, hi), mode=mode)
        except ValueError as err:
            raise shape_error(str(err)) from None
        array = np.take(array, sources, axis=axis)
    return array


def _pad_linear_ramp(array, widths, end_values):
    """numpy's linear_ramp axis by axis: from each end value to the edge (of the array padded
    along the axes before), by np.linspace in the array's dtype, as numpy computes it."""
    dtype = aval(array).dtype
    for axis, ((lo, hi), (end_lo, end_hi)) in enumerate(zip(widths, end_values)):
        if not lo and not hi:
            continue
        n = aval(array).shape[axis]
        if n == 0:
            raise shape_error(f"can't extend empty axis {axis} using modes other than "
                              "'constant' or 'empty'")
        index = [slice(None)] * aval(array).ndim
        pieces = []
        for width, end, edge in ((lo, end_lo, 0), (hi, end_hi, n - 1)):
            index[axis] = edge
            ramp = np.linspace(end, array[tuple(index)], num=width, endpoint=False,
                               dtype=dtype, axis=axis)
            pieces.append(ramp)
        index[axis] = slice(None, None, -1)
        pieces[1] = pieces[1][tuple(index)]
        array = concatenate_p.bind(pieces[0], array, pieces[1], axis=axis)
    return array


@implements(np.pad)
def pad(array, pad_width, mode="constant", **kwargs):
    """`np.pad` with modes "constant" (one scalar value, which may be traced), "edge",
    "wrap", "reflect" and "symmetric" (gathers of numpy's own source positions), and
    "linear_ramp" (concrete end values)."""
    array = as_array(array)
    ndim = len(aval(array).shape)
    widths = np.asarray(pad_width)
    if widths.dtype.kind not in "iu":
        raise TypeCheckError("`pad_width` must be of integral type.", user_frame_info())
    widths = _pairs(widths, ndim, "pad_width")
    if np.any(widths < 0):
        raise shape_error("index can't contain negative values")
    widths = tuple((int(lo), int(hi)) for lo, hi in widths)
    if mode in _COPYING_MODES:
        return _pad_by_copies(array, widths, mode, kwargs)
    if mode == "linear_ramp":
        end_values = kwargs.pop("end_values", 0)
        if kwargs:
            raise unsupported_error(f"numpy.pad(..., {', '.join(kwargs)}=...)")
        if type(end_values) is Tracer:
            raise unsupported_error("numpy.pad(..., mode='linear_ramp') with traced "
                                    "end_values")
        return _pad_linear_ramp(array, widths, _pairs(end_values, ndim, "end_values"))
    if mode != "constant":
        raise unsupported_error(f"numpy.pad(..., mode={mode!r})")
    value = kwargs.pop("constant_values", 0)
    if kwargs:
        raise unsupported_error(f"numpy.pad(..., {', '.join(kwargs)}=...)")
    if type(value) is not Tracer and np.ndim(value):
        values = np.asarray(value)
        if not np.all(values == values.flat[0]):
            raise unsupported_error("numpy.pad with different constant_values per side")
        value = values.flat[0]
    if aval(value).shape:
        raise unsupported_error("numpy.pad with a non-scalar traced constant_values")
    if not any(lo or hi for lo, hi in widths):
        return array
    return pad_p.bind(array, value, widths=tuple((lo, hi, 0) for lo, hi in widths))


@implements(np.flip)
def flip(m, axis=None):
    axes = normalize_axes(axis, len(aval(m).shape))
    return flip_p.bind(m, axes=axes) if axes else m


@implements(np.fliplr)
def fliplr(m):
    if len(aval(m).shape) < 2:
        raise shape_error("Input must be >= 2-d.")
    return flip_p.bind(m, axes=(1,))


@implements(np.flipud)
def flipud(m):
    if len(aval(m).shape) < 1:
        raise shape_error("Input must be >= 1-d.")
    return flip_p.bind(m, axes=(0,))


@implements(np.roll)
def roll(a, shift, axis=None):
    """`np.roll` with static shifts: per axis, split in two and concatenate the other way."""
    shape = aval(a).shape
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), shape)
    try:
        pairs = np.broadcast(shift, axis)
    except ValueError:
        raise shape_error("'shift' and 'axis' should be scalars or 1D sequences") from None
    shifts = {}
    for s, ax in pairs:
        ax = normalize_axis(ax, len(shape))
        shifts[ax] = shifts.get(ax, 0) + int(s)
    for ax, s in shifts.items():
        n = shape[ax]
        s %= n or 1
        if s:
            head, tail = split_p.bind(a, sizes=(n - s, s), axis=ax)
            a = concatenate_p.bind(tail, head, axis=ax)
    return a


@implements(np.tile)
def tile(A, reps):
    """`np.tile` as broadcast_to over interleaved size-1 axes, then one reshape."""
    try:
        reps = tuple(int(r) for r in reps)
    except TypeError:
        reps = (int(reps),)
    A = as_array(A)
    shape = aval(A).shape
    ndim = max(len(shape), len(reps))
    shape = (1,) * (ndim - len(shape)) + shape
    reps = (1,) * (ndim - len(reps)) + reps
    if any(r < 0 for r in reps):
        raise shape_error(f"negative dimensions are not allowed: reps {reps}")
    if all(r == 1 for r in reps):
        return reshape(A, shape)
    interleaved = reshape(A, sum(((1, n) for n in shape), ()))
    tiled = broadcast_to(interleaved, sum(((r, n) for r, n in zip(reps, shape)), ()))
    return reshape(tiled, tuple(r * n for r, n in zip(reps, shape)))


def _repeat_each(x, count, axis):
    """Every element `count` times along `axis`: broadcast a new axis after it, merge."""
    if count == 1:
        return x
    shape = aval(x).shape
    x = reshape(x, shape[:axis + 1] + (1,) + shape[axis + 1:])
    x = broadcast_to(x, shape[:axis + 1] + (count,) + shape[axis + 1:])
    return reshape(x, shape[:axis] + (shape[axis] * count,) + shape[axis + 1:])


@implements(np.repeat)
def repeat(a, repeats, axis=None):
    """`np.repeat` with static repeats: one count, or one count per element along `axis`."""
    if axis is None:
        a, axis = ravel(a), 0
    shape = aval(a).shape
    if not shape:
        raise shape_error(f"axis {axis} is out of bounds for an array of dimension 0")
    axis = normalize_axis(axis, len(shape))
    counts = np.asarray(repeats)
    if counts.dtype.kind not in "iub":
        raise TypeCheckError(f"repeats must be integers, got {counts.dtype}", user_frame_info())
    if counts.ndim > 1 or counts.size not in (1, shape[axis]):
        raise shape_error(f"operands could not be broadcast together with shape "
                          f"({shape[axis]},) ({counts.size},)")
    counts = tuple(int(c) for c in counts.reshape(-1))
    if any(c < 0 for c in counts):
        raise shape_error("repeats may not contain negative values.")
    if len(set(counts)) <= 1:
        return _repeat_each(a, counts[0] if counts else 1, axis)
    return repeat_p.bind(a, repeats=counts, axis=axis)


@implements(np.diagonal)
def diagonal(a, offset=0, axis1=0, axis2=1):
    ndim = len(aval(a).shape)
    if ndim < 2:
        raise shape_error("diag requires an array of at least two dimensions")
    axis1, axis2 = normalize_axis(axis1, ndim), normalize_axis(axis2, ndim)
    if axis1 == axis2:
        raise shape_error("axis1 and axis2 cannot be the same")
    if axis1 > axis2:   # the same values; the derivative then needs no transpose
        axis1, axis2, offset = axis2, axis1, -offset
    return diagonal_p.bind(a, offset=int(offset), axis1=axis1, axis2=axis2)


@implements(np.diag)
def diag(v, k=0):
    """`np.diag`: a 1-d array becomes a square matrix, a 2-d array gives its diagonal."""
    shape = aval(v).shape
    if len(shape) == 1:
        n = shape[0] + abs(int(k))
        return diag_embed(v, n, n, int(k))
    if len(shape) == 2:
        return diagonal(v, k)
    raise shape_error("Input must be 1- or 2-d.")


@implements(np.trace)
def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    if out is not None:
        raise unsupported_error("numpy.trace(..., out=...)")
    return np.sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def _triangle(m, k, lower):
    shape = aval(m).shape
    if not shape:
        raise shape_error("tril/triu need an array of at least 1 dimension")
    # numpy's own construction (so 1-d input gives a matrix): a where() over np.tri's mask.
    zero = np.zeros(1, aval(m).dtype)
    if lower:
        return np.where(np.tri(*shape[-2:], k=k, dtype=bool), m, zero)
    return np.where(np.tri(*shape[-2:], k=k - 1, dtype=bool), zero, m)


@implements(np.tril)
def tril(m, k=0):
    return _triangle(m, k, lower=True)


@implements(np.triu)
def triu(m, k=0):
    return _triangle(m, k, lower=False)


# -- at least n dimensions; real and imaginary parts of real values ---------------------------

def _atleast(arys, expand):
    results = []
    for x in arys:
        x = as_array(x)
        results.append(reshape(x, expand(aval(x).shape)))
    return results[0] if len(results) == 1 else tuple(results)


@implements(np.atleast_1d)
def atleast_1d(*arys):
    return _atleast(arys, lambda shape: shape or (1,))


@implements(np.atleast_2d)
def atleast_2d(*arys):
    return _atleast(arys, lambda shape: (1,) * (2 - len(shape)) + shape)


@implements(np.atleast_3d)
def atleast_3d(*arys):
    expand = {0: lambda s: (1, 1, 1), 1: lambda s: (1,) + s + (1,), 2: lambda s: s + (1,)}
    return _atleast(arys, lambda shape: expand.get(len(shape), lambda s: s)(shape))
