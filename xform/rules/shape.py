"""Shape primitives (reshape, broadcast_to, transpose, concatenate, split, slice, pad, flip,
repeat, diagonal, copy) and the numpy functions built on them: stacking, splitting, tiling,
rolling, diagonals, triangles, padding."""
import numpy as np

from xform.errors import ShapeError, TypeCheckError
from xform.ir.avals import ShapedArray, is_differentiable
from xform.ir.core import Primitive
from xform.source_info import user_frame_info
from xform.ir.tracer import Tracer, _unsupported, implements
from xform.ir.ad import NOT_MAPPED, Undefined, Zero, aval, instantiate, move_to_front, zero_tangent, zeros
from xform.rules.helpers import (linear_jvp, reshape_peephole, transpose_peephole, unbroadcast,
                                  vectorized_batch)
from xform.ir.rules import register


def _shape_error(message):
    return ShapeError(message, user_frame_info())


def _normalize_axis(axis, ndim):
    axis = int(axis)
    if not -ndim <= axis < max(ndim, 1):
        raise _shape_error(f"axis {axis} is out of bounds for an array of dimension {ndim}")
    return axis % ndim if ndim else 0


# -- reshape ---------------------------------------------------------------------------------

reshape_p = Primitive("reshape")


def _reshape_abstract_eval(x, *, shape):
    if int(np.prod(shape, dtype=np.int64)) != x.size:
        raise ValueError(f"cannot reshape an array of size {x.size} into shape {shape}")
    return ShapedArray(shape, x.dtype, x.weak_type and not shape)


def _reshape_batch(size, args, dims, *, shape):
    x = move_to_front(args[0], dims[0], size)
    return reshape_p.bind(x, shape=(size,) + shape), 0


register(reshape_p, impl=lambda x, *, shape: np.reshape(x, shape),
         abstract_eval=_reshape_abstract_eval, jvp=linear_jvp(reshape_p),
         transpose=lambda ct, x, *, shape: (reshape_p.bind(ct, shape=x.aval.shape),),
         batch=_reshape_batch, symbolic_zeros=True, linear_in=(0,), role="reshape",
         hooks={"peephole": reshape_peephole})


def _resolve_shape(size, shape):
    shape = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    if shape.count(-1) > 1:
        raise _shape_error("can only specify one unknown dimension")
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if known == 0 or size % known:
            raise _shape_error(f"cannot reshape an array of size {size} into shape {shape}")
        shape = tuple(size // known if d == -1 else d for d in shape)
    return shape


@implements(np.reshape)
def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    """`np.reshape` (C order only)."""
    if order != "C":
        raise _unsupported(f"numpy.reshape(..., order={order!r})")
    shape = _resolve_shape(aval(a).size, newshape if shape is None else shape)
    if shape == aval(a).shape:
        return a
    return reshape_p.bind(a, shape=shape)


@implements(np.ravel)
def ravel(a, order="C"):
    return reshape(a, (aval(a).size,), order)


@implements(np.expand_dims)
def expand_dims(a, axis):
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    shape = list(aval(a).shape)
    ndim = len(shape) + len(axes)
    for ax in sorted(_normalize_axis(ax, ndim) for ax in axes):
        shape.insert(ax, 1)
    return reshape(a, tuple(shape))


@implements(np.squeeze)
def squeeze(a, axis=None):
    shape = aval(a).shape
    if axis is None:
        axes = {i for i, d in enumerate(shape) if d == 1}
    else:
        axes = {_normalize_axis(ax, len(shape))
                for ax in (axis if isinstance(axis, (tuple, list)) else (axis,))}
        if any(shape[ax] != 1 for ax in axes):
            raise _shape_error("cannot select an axis to squeeze out which has size not "
                               "equal to one")
    return reshape(a, tuple(d for i, d in enumerate(shape) if i not in axes))


# -- broadcast_to ----------------------------------------------------------------------------

broadcast_to_p = Primitive("broadcast_to")


def _broadcast_to_abstract_eval(x, *, shape):
    if np.broadcast_shapes(x.shape, shape) != tuple(shape):
        raise ValueError(f"cannot broadcast shape {x.shape} to {shape}")
    return ShapedArray(shape, x.dtype, x.weak_type and not shape)


def _broadcast_to_batch(size, args, dims, *, shape):
    x = move_to_front(args[0], dims[0], size)
    x_shape = aval(x).shape
    x = reshape(x, (size,) + (1,) * (len(shape) - len(x_shape) + 1) + x_shape[1:])
    return broadcast_to_p.bind(x, shape=(size,) + shape), 0


register(broadcast_to_p, impl=lambda x, *, shape: np.broadcast_to(x, shape),
         abstract_eval=_broadcast_to_abstract_eval, jvp=linear_jvp(broadcast_to_p),
         transpose=lambda ct, x, *, shape: (unbroadcast(ct, x.aval),),
         batch=_broadcast_to_batch, symbolic_zeros=True, linear_in=(0,))


@implements(np.broadcast_to)
def broadcast_to(array, shape, subok=False):
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (int(shape),)
    if aval(array).shape == shape:
        return array
    return broadcast_to_p.bind(array, shape=shape)


# -- transpose -------------------------------------------------------------------------------

transpose_p = Primitive("transpose")


def _transpose_abstract_eval(x, *, axes):
    if sorted(axes) != list(range(x.ndim)):
        raise ValueError(f"axes {axes} don't match an array of dimension {x.ndim}")
    return ShapedArray(tuple(x.shape[a] for a in axes), x.dtype, x.weak_type)


def _transpose_batch(size, args, dims, *, axes):
    x = move_to_front(args[0], dims[0], size)
    return transpose_p.bind(x, axes=(0,) + tuple(a + 1 for a in axes)), 0


def _transpose_transpose(ct, x, *, axes):
    return (transpose_p.bind(ct, axes=tuple(int(a) for a in np.argsort(axes))),)


def _transpose_impl(x, *, axes):
    return np.transpose(x, axes)


register(transpose_p, impl=_transpose_impl,
         abstract_eval=_transpose_abstract_eval, jvp=linear_jvp(transpose_p),
         transpose=_transpose_transpose, batch=_transpose_batch,
         symbolic_zeros=True, linear_in=(0,), hooks={"peephole": transpose_peephole})


@implements(np.transpose)
def transpose(a, axes=None):
    ndim = len(aval(a).shape)
    axes = tuple(reversed(range(ndim))) if axes is None else \
        tuple(_normalize_axis(ax, ndim) for ax in axes)
    if axes == tuple(range(ndim)):
        return a
    return transpose_p.bind(a, axes=axes)


@implements(np.moveaxis)
def moveaxis(a, source, destination):
    ndim = len(aval(a).shape)
    source = source if isinstance(source, (tuple, list)) else (source,)
    destination = destination if isinstance(destination, (tuple, list)) else (destination,)
    source = [_normalize_axis(s, ndim) for s in source]
    destination = [_normalize_axis(d, ndim) for d in destination]
    order = [n for n in range(ndim) if n not in source]
    for dest, src in sorted(zip(destination, source)):
        order.insert(dest, src)
    return transpose(a, order)


@implements(np.swapaxes)
def swapaxes(a, axis1, axis2):
    ndim = len(aval(a).shape)
    order = list(range(ndim))
    i, j = _normalize_axis(axis1, ndim), _normalize_axis(axis2, ndim)
    order[i], order[j] = order[j], order[i]
    return transpose(a, order)


# -- copy: a real copy, so that a staged np.copy never hands back an alias of its input -----

copy_p = Primitive("copy")

register(copy_p, impl=lambda x: np.array(x, copy=True), abstract_eval=lambda x: x,
         jvp=linear_jvp(copy_p), transpose=lambda ct, x: (ct,),
         batch=vectorized_batch(copy_p), symbolic_zeros=True, linear_in=(0,))


@implements(np.copy)
def copy(a, order="K", subok=False):
    return copy_p.bind(a)


# -- concatenate (and split, its transpose) ---------------------------------------------------

concatenate_p = Primitive("concatenate")


def _concatenate_abstract_eval(*xs, axis):
    if not xs:
        raise ValueError("need at least one array to concatenate")
    first = xs[0]
    if first.ndim == 0:
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    if not 0 <= axis < first.ndim:
        raise ValueError(f"axis {axis} is out of bounds for an array of dimension {first.ndim}")
    for i, x in enumerate(xs[1:], 1):
        if x.ndim != first.ndim:
            raise ValueError(
                "all the input arrays must have same number of dimensions, but the array at "
                f"index 0 has {first.ndim} dimension(s) and the array at index {i} has "
                f"{x.ndim} dimension(s)")
        for d, (n0, n) in enumerate(zip(first.shape, x.shape)):
            if d != axis and n0 != n:
                raise ValueError(
                    "all the input array dimensions except for the concatenation axis must "
                    f"match exactly, but along dimension {d}, the array at index 0 has size "
                    f"{n0} and the array at index {i} has size {n}")
    shape = list(first.shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    return ShapedArray(tuple(shape), np.result_type(*[x.dtype for x in xs]),
                       all(x.weak_type for x in xs))


def _concatenate_jvp(primals, tangents, *, axis):
    ans = concatenate_p.bind(*primals, axis=axis)
    out_aval = aval(ans)
    if not is_differentiable(out_aval):
        return ans, zero_tangent(out_aval)
    tangents = [zeros(ShapedArray(aval(x).shape, out_aval.dtype)) if type(t) is Zero else t
                for x, t in zip(primals, tangents)]
    return ans, concatenate_p.bind(*tangents, axis=axis)


def _concatenate_transpose(ct, *xs, axis):
    sizes = tuple(aval(x).shape[axis] for x in xs)
    pieces = split_p.bind(ct, sizes=sizes, axis=axis)
    return tuple(unbroadcast(piece, x.aval) if type(x) is Undefined else None
                 for piece, x in zip(pieces, xs))


def _concatenate_batch(size, args, dims, *, axis):
    args = [move_to_front(x, d, size) for x, d in zip(args, dims)]
    return concatenate_p.bind(*args, axis=axis + 1), 0


register(concatenate_p, impl=lambda *xs, axis: np.concatenate(xs, axis),
         abstract_eval=_concatenate_abstract_eval, jvp=_concatenate_jvp,
         transpose=_concatenate_transpose, batch=_concatenate_batch, symbolic_zeros=True)


split_p = Primitive("split", multiple_results=True)


def _split_abstract_eval(x, *, sizes, axis):
    if not 0 <= axis < x.ndim:
        raise ValueError(f"axis {axis} is out of bounds for an array of dimension {x.ndim}")
    if any(s < 0 for s in sizes) or sum(sizes) != x.shape[axis]:
        raise ValueError(f"sizes {sizes} do not split an axis of length {x.shape[axis]}")
    return [ShapedArray(x.shape[:axis] + (s,) + x.shape[axis + 1:], x.dtype, x.weak_type)
            for s in sizes]


def _split_transpose(cts, x, *, sizes, axis):
    return (concatenate_p.bind(*[instantiate(ct) for ct in cts], axis=axis),)


def _split_batch(size, args, dims, *, sizes, axis):
    x = move_to_front(args[0], dims[0], size)
    return split_p.bind(x, sizes=sizes, axis=axis + 1), [0] * len(sizes)


def _split_impl(x, *, sizes, axis):
    return np.split(x, np.cumsum(sizes[:-1], dtype=np.int64), axis)


register(split_p, impl=_split_impl, abstract_eval=_split_abstract_eval, jvp=linear_jvp(split_p),
         transpose=_split_transpose, batch=_split_batch, symbolic_zeros=True, linear_in=(0,))


def _as_array(x):
    return x if type(x) is Tracer else np.asarray(x)


@implements(np.concatenate)
def concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    """`np.concatenate` (no out=); axis=None flattens every array first."""
    if out is not None:
        raise _unsupported("numpy.concatenate(..., out=...)")
    arrays = [_as_array(x) for x in arrays]
    if dtype is not None:
        dtype = np.dtype(dtype)
        for x in arrays:
            if not np.can_cast(aval(x).dtype, dtype, casting):
                raise TypeCheckError(f"cannot cast array data from {aval(x).dtype} to {dtype} "
                                     f"according to the rule {casting!r}", user_frame_info())
        arrays = [x.astype(dtype) for x in arrays]
    if axis is None:
        arrays = [ravel(x) for x in arrays]
        axis = 0
    if not arrays:
        raise _shape_error("need at least one array to concatenate")
    axis = _normalize_axis(axis, max(len(aval(arrays[0]).shape), 1))
    if len(arrays) == 1 and aval(arrays[0]).shape:
        return arrays[0]
    return concatenate_p.bind(*arrays, axis=axis)


@implements(np.stack)
def stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    arrays = [_as_array(x) for x in arrays]
    if not arrays:
        raise _shape_error("need at least one array to stack")
    if len({aval(x).shape for x in arrays}) != 1:
        raise _shape_error("all input arrays must have the same shape")
    axis = _normalize_axis(axis, len(aval(arrays[0]).shape) + 1)
    return concatenate([expand_dims(x, axis) for x in arrays], axis, out, dtype=dtype,
                       casting=casting)


@implements(np.hstack)
def hstack(tup, *, dtype=None, casting="same_kind"):
    arrays = [atleast_1d(x) for x in tup]
    axis = 0 if arrays and len(aval(arrays[0]).shape) == 1 else 1
    return concatenate(arrays, axis, dtype=dtype, casting=casting)


@implements(np.vstack)
def vstack(tup, *, dtype=None, casting="same_kind"):
    arrays = [atleast_2d(x) for x in tup]
    return concatenate(arrays, 0, dtype=dtype, casting=casting)


@implements(np.dstack)
def dstack(tup):
    return concatenate([atleast_3d(x) for x in tup], 2)


@implements(np.column_stack)
def column_stack(tup):
    arrays = [_as_array(x) for x in tup]
    arrays = [expand_dims(atleast_1d(x), 1) if len(aval(x).shape) < 2 else x for x in arrays]
    return concatenate(arrays, 1)


def _axis_slice(x, axis, start, stop):
    shape = aval(x).shape
    starts = tuple(start if i == axis else 0 for i in range(len(shape)))
    stops = tuple(stop if i == axis else n for i, n in enumerate(shape))
    return static_slice(x, starts, stops)


@implements(np.array_split)
def array_split(ary, indices_or_sections, axis=0):
    """`np.array_split`: sections (sizes may differ by one) or split indices along `axis`."""
    shape = aval(ary).shape
    axis = _normalize_axis(axis, len(shape))
    if not shape:
        raise _shape_error("cannot split a 0-d array")
    n = shape[axis]
    try:
        indices = [int(i) for i in indices_or_sections]
    except TypeError:
        sections = int(indices_or_sections)
        if sections <= 0:
            raise _shape_error("number sections must be larger than 0.") from None
        each, extra = divmod(n, sections)
        sizes = (each + 1,) * extra + (each,) * (sections - extra)
        indices = list(np.cumsum(sizes[:-1], dtype=np.int64))
    bounds = [slice(a, b).indices(n)[:2] for a, b in zip([0] + indices, indices + [n])]
    bounds = [(a, max(a, b)) for a, b in bounds]
    if len(bounds) == 1:
        return [ary]
    contiguous = all(a == b for (_, b), (a, _) in zip(bounds[:-1], bounds[1:]))
    if contiguous and bounds[0][0] == 0 and bounds[-1][1] == n:
        return split_p.bind(ary, sizes=tuple(b - a for a, b in bounds), axis=axis)
    # Unsorted indices give overlapping or empty pieces, which one split cannot express.
    return [_axis_slice(ary, axis, a, b) for a, b in bounds]


@implements(np.split)
def split(ary, indices_or_sections, axis=0):
    """`np.split`: equal sections (else ShapeError) or split indices along `axis`."""
    try:
        len(indices_or_sections)
    except TypeError:
        shape = aval(ary).shape
        n = shape[_normalize_axis(axis, len(shape))] if shape else 0
        sections = int(indices_or_sections)
        if sections > 0 and n % sections:
            raise _shape_error("array split does not result in an equal division") from None
    return array_split(ary, indices_or_sections, axis)


@implements(np.hsplit)
def hsplit(ary, indices_or_sections):
    ndim = len(aval(ary).shape)
    if ndim == 0:
        raise _shape_error("hsplit only works on arrays of 1 or more dimensions")
    return split(ary, indices_or_sections, 1 if ndim > 1 else 0)


@implements(np.vsplit)
def vsplit(ary, indices_or_sections):
    if len(aval(ary).shape) < 2:
        raise _shape_error("vsplit only works on arrays of 2 or more dimensions")
    return split(ary, indices_or_sections, 0)


@implements(np.dsplit)
def dsplit(ary, indices_or_sections):
    if len(aval(ary).shape) < 3:
        raise _shape_error("dsplit only works on arrays of 3 or more dimensions")
    return split(ary, indices_or_sections, 2)


@implements(np.unstack)
def unstack(x, /, *, axis=0):
    shape = aval(x).shape
    if not shape:
        raise _shape_error("Input array must be at least 1-d.")
    axis = _normalize_axis(axis, len(shape))
    pieces = split_p.bind(x, sizes=(1,) * shape[axis], axis=axis) if shape[axis] > 1 else [x]
    return tuple(squeeze(piece, axis) for piece in pieces)


# -- slice (static start/stop/step; its transpose pads back with interior padding) ----------

slice_p = Primitive("slice")


def _slice_length(start, stop, step):
    return max(0, -(-(stop - start) // step))


def _slice_abstract_eval(x, *, starts, stops, steps):
    if not len(starts) == len(stops) == len(steps) == x.ndim:
        raise ValueError(f"slice needs one start, stop and step per axis of {x.shape}")
    for n, a, b, c in zip(x.shape, starts, stops, steps):
        if not (0 <= a <= b <= n and c >= 1):
            raise ValueError(f"bad slice {a}:{b}:{c} of an axis of length {n}")
    shape = tuple(_slice_length(a, b, c) for a, b, c in zip(starts, stops, steps))
    return ShapedArray(shape, x.dtype, x.weak_type and not shape)


def _slice_transpose(ct, x, *, starts, stops, steps):
    widths = []
    for n, a, c, m in zip(x.aval.shape, starts, steps, aval(ct).shape):
        last = a + (m - 1) * c + 1 if m else a
        widths.append((a, n - last, c - 1 if m > 1 else 0))
    return (_pad(ct, np.zeros((), aval(ct).dtype), tuple(widths)),)


def _slice_batch(size, args, dims, *, starts, stops, steps):
    x = move_to_front(args[0], dims[0], size)
    return slice_p.bind(x, starts=(0,) + starts, stops=(size,) + stops, steps=(1,) + steps), 0


register(slice_p,
         impl=lambda x, *, starts, stops, steps: x[tuple(map(slice, starts, stops, steps))],
         abstract_eval=_slice_abstract_eval, jvp=linear_jvp(slice_p),
         transpose=_slice_transpose, batch=_slice_batch, symbolic_zeros=True, linear_in=(0,),
         role="slice")


def static_slice(x, starts, stops, steps=None):
    """`x[starts[0]:stops[0]:steps[0], ...]` with Python slice semantics per axis (None,
    negative and out-of-range bounds, negative steps), staged as one `slice` equation (plus a
    `flip` for negative steps); `x` itself when nothing is sliced away.

    >>> from xform.rules.shape import static_slice
    >>> x = np.arange(6.0).reshape(2, 3)
    >>> static_slice(x, (1, None), (None, None), (1, -1))    # x[1:, ::-1]
    array([[5., 4., 3.]])
    """
    shape = aval(x).shape
    steps = (None,) * len(shape) if steps is None else tuple(steps)
    if not len(starts) == len(stops) == len(steps) == len(shape):
        raise _shape_error(f"static_slice needs one start, stop and step per axis of {shape}")
    lo, hi, strides, flips = [], [], [], []
    for axis, (n, a, b, c) in enumerate(zip(shape, starts, stops, steps)):
        if c == 0:
            raise _shape_error("slice step cannot be zero")
        a, b, c = slice(a, b, c).indices(n)
        m = len(range(a, b, c))
        if m == 0:
            a, c = 0, 1
        elif c < 0:
            a, c = a + (m - 1) * c, -c
            flips.append(axis)
        lo.append(a)
        hi.append(a + (m - 1) * c + 1 if m else 0)
        strides.append(c)
    if (tuple(lo), tuple(hi), tuple(strides)) != ((0,) * len(shape), shape, (1,) * len(shape)):
        x = slice_p.bind(x, starts=tuple(lo), stops=tuple(hi), steps=tuple(strides))
    if flips:
        x = flip_p.bind(x, axes=tuple(flips))
    return x


# -- pad (constant value, possibly traced; interior padding serves slice's transpose) --------

pad_p = Primitive("pad")


def _padded_shape(shape, widths):
    return tuple(lo + hi + n + max(n - 1, 0) * interior
                 for n, (lo, hi, interior) in zip(shape, widths))


def _unpadded_slice(n, lo, interior):
    """Where the original elements sit along one padded axis."""
    return lo, (lo + (n - 1) * (interior + 1) + 1 if n else lo), interior + 1


def _pad_impl(x, value, *, widths):
    x = np.asarray(x)
    out = np.full(_padded_shape(x.shape, widths), value, x.dtype)
    out[tuple(slice(*_unpadded_slice(n, lo, interior))
              for n, (lo, _, interior) in zip(x.shape, widths))] = x
    return out


def _pad_abstract_eval(x, value, *, widths):
    if value.ndim != 0:
        raise ValueError(f"the padding value must be a scalar, got shape {value.shape}")
    if len(widths) != x.ndim or any(w < 0 for triple in widths for w in triple):
        raise ValueError(f"pad widths {widths} do not fit an array of shape {x.shape}")
    return ShapedArray(_padded_shape(x.shape, widths), x.dtype, x.weak_type)


def _pad_jvp(primals, tangents, *, widths):
    x, value = primals
    ans = pad_p.bind(x, value, widths=widths)
    out_aval = aval(ans)
    t_x, t_value = tangents
    if not is_differentiable(out_aval) or (type(t_x) is Zero and type(t_value) is Zero):
        return ans, zero_tangent(out_aval)
    t_x = zeros(out_aval.update(shape=aval(x).shape)) if type(t_x) is Zero else t_x
    t_value = np.zeros((), out_aval.dtype) if type(t_value) is Zero else t_value
    return ans, pad_p.bind(t_x, t_value, widths=widths)


def _pad(x, value, widths):
    return pad_p.bind(x, value, widths=widths) if any(map(any, widths)) else x


def _unpad(ct, shape, widths):
    if not any(map(any, widths)):
        return ct
    starts, stops, steps = zip(*[_unpadded_slice(n, lo, interior)
                                 for n, (lo, _, interior) in zip(shape, widths)])
    return slice_p.bind(ct, starts=starts, stops=stops, steps=steps)


def _pad_transpose(ct, x, value, *, widths):
    shape = aval(x).shape
    inner = _unpad(ct, shape, widths)
    ct_x = inner if type(x) is Undefined else None
    ct_value = None
    if type(value) is Undefined:
        ct_value = unbroadcast(np.sum(ct) - np.sum(inner), value.aval)
    return ct_x, ct_value


def _pad_batch(size, args, dims, *, widths):
    x, value = args
    x_dim, value_dim = dims
    x = move_to_front(x, x_dim, size)
    batched_widths = ((0, 0, 0),) + widths
    if value_dim is NOT_MAPPED:
        return pad_p.bind(x, value, widths=batched_widths), 0
    # One padding value per example: pad with zeros, then fill the padding through a mask.
    dtype = aval(x).dtype
    padded = pad_p.bind(x, np.zeros((), dtype), widths=batched_widths)
    mask = _pad_impl(np.ones(aval(x).shape[1:], bool), False, widths=widths)
    value = reshape(move_to_front(value, value_dim, size).astype(dtype),
                    (size,) + (1,) * len(widths))
    return np.where(mask, padded, value), 0


register(pad_p, impl=_pad_impl, abstract_eval=_pad_abstract_eval, jvp=_pad_jvp,
         transpose=_pad_transpose, batch=_pad_batch, symbolic_zeros=True, role="pad")


@implements(np.pad)
def pad(array, pad_width, mode="constant", **kwargs):
    """`np.pad` with mode="constant" and one scalar constant value (which may be traced)."""
    if mode != "constant":
        raise _unsupported(f"numpy.pad(..., mode={mode!r})")
    value = kwargs.pop("constant_values", 0)
    if kwargs:
        raise _unsupported(f"numpy.pad(..., {', '.join(kwargs)}=...)")
    if type(value) is not Tracer and np.ndim(value):
        values = np.asarray(value)
        if not np.all(values == values.flat[0]):
            raise _unsupported("numpy.pad with different constant_values per side")
        value = values.flat[0]
    if aval(value).shape:
        raise _unsupported("numpy.pad with a non-scalar traced constant_values")
    ndim = len(aval(array).shape)
    widths = np.asarray(pad_width)
    if widths.dtype.kind not in "iu":
        raise TypeCheckError("`pad_width` must be of integral type.", user_frame_info())
    try:
        widths = np.broadcast_to(widths, (ndim, 2))
    except ValueError:
        raise _shape_error(f"pad_width {pad_width!r} does not fit an array of dimension "
                           f"{ndim}") from None
    if np.any(widths < 0):
        raise _shape_error("index can't contain negative values")
    if not np.any(widths):
        return array
    return pad_p.bind(array, value, widths=tuple((int(lo), int(hi), 0) for lo, hi in widths))


# -- flip, and roll/tile/repeat built from shape primitives -----------------------------------

flip_p = Primitive("flip")


def _flip_abstract_eval(x, *, axes):
    if any(not 0 <= a < x.ndim for a in axes) or len(set(axes)) != len(axes):
        raise ValueError(f"axes {axes} don't fit an array of dimension {x.ndim}")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def _flip_batch(size, args, dims, *, axes):
    x = move_to_front(args[0], dims[0], size)
    return flip_p.bind(x, axes=tuple(a + 1 for a in axes)), 0


register(flip_p, impl=lambda x, *, axes: np.flip(x, axes), abstract_eval=_flip_abstract_eval,
         jvp=linear_jvp(flip_p), transpose=lambda ct, x, *, axes: (flip_p.bind(ct, axes=axes),),
         batch=_flip_batch, symbolic_zeros=True, linear_in=(0,))


@implements(np.flip)
def flip(m, axis=None):
    from xform.rules.reduce import normalize_axes  # reduce builds on this module
    axes = normalize_axes(axis, len(aval(m).shape))
    return flip_p.bind(m, axes=axes) if axes else m


@implements(np.fliplr)
def fliplr(m):
    if len(aval(m).shape) < 2:
        raise _shape_error("Input must be >= 2-d.")
    return flip_p.bind(m, axes=(1,))


@implements(np.flipud)
def flipud(m):
    if len(aval(m).shape) < 1:
        raise _shape_error("Input must be >= 1-d.")
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
        raise _shape_error("'shift' and 'axis' should be scalars or 1D sequences") from None
    shifts = {}
    for s, ax in pairs:
        ax = _normalize_axis(ax, len(shape))
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
    A = _as_array(A)
    shape = aval(A).shape
    ndim = max(len(shape), len(reps))
    shape = (1,) * (ndim - len(shape)) + shape
    reps = (1,) * (ndim - len(reps)) + reps
    if any(r < 0 for r in reps):
        raise _shape_error(f"negative dimensions are not allowed: reps {reps}")
    if all(r == 1 for r in reps):
        return reshape(A, shape)
    interleaved = reshape(A, sum(((1, n) for n in shape), ()))
    tiled = broadcast_to(interleaved, sum(((r, n) for r, n in zip(reps, shape)), ()))
    return reshape(tiled, tuple(r * n for r, n in zip(reps, shape)))


repeat_p = Primitive("repeat")


def _repeat_abstract_eval(x, *, repeats, axis):
    if not 0 <= axis < x.ndim or len(repeats) != x.shape[axis] or min(repeats, default=0) < 0:
        raise ValueError(f"repeats {repeats} do not fit axis {axis} of shape {x.shape}")
    shape = x.shape[:axis] + (sum(repeats),) + x.shape[axis + 1:]
    return ShapedArray(shape, x.dtype, x.weak_type and not shape)


def _repeat_transpose(ct, x, *, repeats, axis):
    # Sum each run of copies; an empty run (repeat 0) sums to zero.
    runs = split_p.bind(ct, sizes=repeats, axis=axis)
    sums = [np.sum(run, axis=axis, keepdims=True) for run in runs]
    return (concatenate_p.bind(*sums, axis=axis),)


def _repeat_batch(size, args, dims, *, repeats, axis):
    x = move_to_front(args[0], dims[0], size)
    return repeat_p.bind(x, repeats=repeats, axis=axis + 1), 0


register(repeat_p, impl=lambda x, *, repeats, axis: np.repeat(x, repeats, axis),
         abstract_eval=_repeat_abstract_eval, jvp=linear_jvp(repeat_p),
         transpose=_repeat_transpose, batch=_repeat_batch, symbolic_zeros=True, linear_in=(0,))


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
        raise _shape_error(f"axis {axis} is out of bounds for an array of dimension 0")
    axis = _normalize_axis(axis, len(shape))
    counts = np.asarray(repeats)
    if counts.dtype.kind not in "iub":
        raise TypeCheckError(f"repeats must be integers, got {counts.dtype}", user_frame_info())
    if counts.ndim > 1 or counts.size not in (1, shape[axis]):
        raise _shape_error(f"operands could not be broadcast together with shape "
                           f"({shape[axis]},) ({counts.size},)")
    counts = tuple(int(c) for c in counts.reshape(-1))
    if any(c < 0 for c in counts):
        raise _shape_error("repeats may not contain negative values.")
    if len(set(counts)) <= 1:
        return _repeat_each(a, counts[0] if counts else 1, axis)
    return repeat_p.bind(a, repeats=counts, axis=axis)


# -- diagonals and triangles -------------------------------------------------------------------

diagonal_p = Primitive("diagonal")


def _diagonal_length(n1, n2, offset):
    return max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))


def _diagonal_abstract_eval(x, *, offset, axis1, axis2):
    if x.ndim < 2:
        raise ValueError("diag requires an array of at least two dimensions")
    if not (0 <= axis1 < x.ndim and 0 <= axis2 < x.ndim) or axis1 == axis2:
        raise ValueError(f"bad axes {axis1}, {axis2} for an array of dimension {x.ndim}")
    rest = tuple(n for i, n in enumerate(x.shape) if i not in (axis1, axis2))
    length = _diagonal_length(x.shape[axis1], x.shape[axis2], offset)
    return ShapedArray(rest + (length,), x.dtype, x.weak_type)


def _diag_embed(v, n1, n2, offset):
    """The (n1, n2) matrices, over `v`'s leading axes, with `v`'s last axis on diagonal
    `offset` and zeros elsewhere: interior padding puts element i at i * (m + 1) of a flat
    m * m square, then edge padding places that square."""
    shape = aval(v).shape
    lead, m = shape[:-1], shape[-1]
    zero = np.zeros((), aval(v).dtype)
    keep = ((0, 0, 0),) * len(lead)
    square = reshape(_pad(v, zero, keep + ((0, 0, m if m > 1 else 0),)), lead + (m, m))
    row, col = min(max(0, -offset), n1), min(max(0, offset), n2)
    return _pad(square, zero, keep + ((row, n1 - m - row, 0), (col, n2 - m - col, 0)))


def _diagonal_transpose(ct, x, *, offset, axis1, axis2):
    shape = x.aval.shape
    full = _diag_embed(ct, shape[axis1], shape[axis2], offset)
    return (moveaxis(full, (-2, -1), (axis1, axis2)),)


def _diagonal_batch(size, args, dims, *, offset, axis1, axis2):
    x = move_to_front(args[0], dims[0], size)
    return diagonal_p.bind(x, offset=offset, axis1=axis1 + 1, axis2=axis2 + 1), 0


register(diagonal_p,
         impl=lambda x, *, offset, axis1, axis2: np.diagonal(x, offset, axis1, axis2),
         abstract_eval=_diagonal_abstract_eval, jvp=linear_jvp(diagonal_p),
         transpose=_diagonal_transpose, batch=_diagonal_batch, symbolic_zeros=True, linear_in=(0,))


@implements(np.diagonal)
def diagonal(a, offset=0, axis1=0, axis2=1):
    ndim = len(aval(a).shape)
    if ndim < 2:
        raise _shape_error("diag requires an array of at least two dimensions")
    axis1, axis2 = _normalize_axis(axis1, ndim), _normalize_axis(axis2, ndim)
    if axis1 == axis2:
        raise _shape_error("axis1 and axis2 cannot be the same")
    return diagonal_p.bind(a, offset=int(offset), axis1=axis1, axis2=axis2)


@implements(np.diag)
def diag(v, k=0):
    """`np.diag`: a 1-d array becomes a square matrix, a 2-d array gives its diagonal."""
    shape = aval(v).shape
    if len(shape) == 1:
        n = shape[0] + abs(int(k))
        return _diag_embed(v, n, n, int(k))
    if len(shape) == 2:
        return diagonal(v, k)
    raise _shape_error("Input must be 1- or 2-d.")


@implements(np.trace)
def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    if out is not None:
        raise _unsupported("numpy.trace(..., out=...)")
    return np.sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def _triangle(m, k, lower):
    shape = aval(m).shape
    if not shape:
        raise _shape_error("tril/triu need an array of at least 1 dimension")
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
        x = _as_array(x)
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


def _real_only(x, name):
    if aval(x).dtype.kind == "c":
        raise _unsupported(f"numpy.{name} of a complex value")


@implements(np.real)
def real(val):
    _real_only(val, "real")
    return val


@implements(np.imag)
def imag(val):
    _real_only(val, "imag")
    return zeros(aval(val).strengthen())


__all__ = ["NOT_MAPPED", "array_split", "atleast_1d", "atleast_2d", "atleast_3d",
           "broadcast_to", "column_stack", "concatenate", "copy", "diag", "diagonal", "dsplit",
           "dstack", "expand_dims", "flip", "fliplr", "flipud", "hsplit", "hstack", "imag",
           "moveaxis", "pad", "ravel", "real", "repeat", "reshape", "roll", "split",
           "squeeze", "stack", "static_slice", "swapaxes", "tile", "trace", "transpose",
           "tril", "triu", "unstack", "vsplit", "vstack"]
