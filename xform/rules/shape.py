"""Shape primitives (reshape, broadcast_to, transpose, concatenate, split, slice, pad, flip,
roll, repeat, diagonal, copy) and the lax-like ops rule bodies build on them (static_slice,
diag_embed); numpy's shape functions over them are in xform.numpy."""
import math

import numpy as np
from numpy import float64, ndarray   # (read per value: see xform.transforms.vjp)

from xform.errors import shape_error
from xform.ir.avals import ShapedArray, broadcast_shapes, is_differentiable, shaped_array
from xform.ir.core import Primitive
from xform.ir.index_params import slice_box
from xform.ir.ad import (NOT_MAPPED, Undefined, Zero, aval, instantiate, move_to_front,
                         zero_tangent, zeros)
from xform.rules.helpers import (linear_jvp, reshape_peephole, transpose_peephole, unbroadcast,
                                  vectorized_batch)
from xform.ir.registry import Hooks, register


# -- reshape ---------------------------------------------------------------------------------

reshape_p = Primitive("reshape")


def _reshape_abstract_eval(x, *, shape):
    if math.prod(shape) != x.size:
        raise ValueError(f"cannot reshape an array of size {x.size} into shape {shape}")
    return shaped_array(tuple(shape), x.dtype, x.weak_type and not shape)


def _reshape_batch(size, args, dims, *, shape):
    x = move_to_front(args[0], dims[0], size)
    return reshape_p.bind(x, shape=(size,) + shape), 0


def _reshape_impl(x, *, shape):
    # (the method costs a third of np.reshape's dispatch: reverse mode reshapes per element;
    # a numpy scalar's is what np.reshape calls too)
    kind = type(x)
    if kind is ndarray or kind is float64:
        return x.reshape(shape)
    return np.reshape(x, shape)


register(reshape_p, impl=_reshape_impl,
         abstract_eval=_reshape_abstract_eval, jvp=linear_jvp(reshape_p),
         transpose=lambda ct, x, *, shape: (reshape_p.bind(ct, shape=x.aval.shape),),
         batch=_reshape_batch, symbolic_zeros=True, linear_in=(0,), role="reshape",
         hooks=Hooks(peephole=reshape_peephole))


# -- broadcast_to ----------------------------------------------------------------------------

broadcast_to_p = Primitive("broadcast_to")


def _broadcast_to_abstract_eval(x, *, shape):
    if broadcast_shapes(x.shape, shape) != tuple(shape):
        raise ValueError(f"cannot broadcast shape {x.shape} to {shape}")
    return ShapedArray(shape, x.dtype, x.weak_type and not shape)


def _broadcast_to_batch(size, args, dims, *, shape):
    x = move_to_front(args[0], dims[0], size)
    x_shape = aval(x).shape
    x = np.reshape(x, (size,) + (1,) * (len(shape) - len(x_shape) + 1) + x_shape[1:])
    return broadcast_to_p.bind(x, shape=(size,) + shape), 0


register(broadcast_to_p, impl=lambda x, *, shape: np.broadcast_to(x, shape),
         abstract_eval=_broadcast_to_abstract_eval, jvp=linear_jvp(broadcast_to_p),
         transpose=lambda ct, x, *, shape: (unbroadcast(ct, x.aval),),
         batch=_broadcast_to_batch, symbolic_zeros=True, linear_in=(0,), role="broadcast_to")


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
         symbolic_zeros=True, linear_in=(0,), hooks=Hooks(peephole=transpose_peephole),
         role="transpose")


# -- copy: a real copy, so that a staged np.copy never hands back an alias of its input -----

copy_p = Primitive("copy")

def _copy_impl(x, *, order="K"):
    # The memory order is numpy's (np.copy keeps a Fortran array's, the method makes C): a
    # later reduction's bits depend on it. (The method costs less than np.array's
    # conversion: cotangent rows copy many.)
    return x.copy(order=order) if type(x) is np.ndarray else np.array(x, copy=True, order=order)


register(copy_p, impl=_copy_impl, abstract_eval=lambda x, order="K": x,
         jvp=linear_jvp(copy_p), transpose=lambda ct, x, order="K": (ct,),
         batch=vectorized_batch(copy_p), symbolic_zeros=True, linear_in=(0,), role="copy")


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
    before, after = first.shape[:axis], first.shape[axis + 1:]
    dtype, length, weak_type = first.dtype, 0, True
    for x in xs:    # (operands that fit, in one pass; the loop below says which does not)
        shape = x.shape
        if shape[:axis] != before or shape[axis + 1:] != after or x.ndim != first.ndim:
            break
        if dtype is not x.dtype:
            dtype = None
        length += shape[axis]
        weak_type = weak_type and x.weak_type
    else:
        if dtype is None or not (dtype.isnative and dtype.kind in "biufc"):
            dtype = np.result_type(*[x.dtype for x in xs])
        return ShapedArray(before + (length,) + after, dtype, weak_type)
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
    raise AssertionError("operands that fit were taken as not fitting")


def _concatenate_jvp(primals, tangents, *, axis):
    ans = concatenate_p.bind(*primals, axis=axis)
    out_aval = aval(ans)
    if not is_differentiable(out_aval):
        return ans, zero_tangent(out_aval)
    tangents = [zeros(ShapedArray(aval(x).shape, out_aval.dtype)) if type(t) is Zero else t
                for x, t in zip(primals, tangents)]
    return ans, concatenate_p.bind(*tangents, axis=axis)


def _split_cotangent(ct, avals, wanted, axis):
    """The cotangents of concatenated operands of `avals` (None where not `wanted`)."""
    pieces = split_p.bind(ct, sizes=tuple([x.shape[axis] for x in avals]), axis=axis)
    return tuple([unbroadcast(piece, x) if want else None
                  for piece, x, want in zip(pieces, avals, wanted)])


def _concatenate_transpose(ct, *xs, axis):
    avals = [x.aval if type(x) is Undefined else aval(x) for x in xs]
    return _split_cotangent(ct, avals, [type(x) is Undefined for x in xs], axis)


def _concatenate_batch(size, args, dims, *, axis):
    args = [move_to_front(x, d, size) for x, d in zip(args, dims)]
    return concatenate_p.bind(*args, axis=axis + 1), 0


def _concatenate_vjp(xs, ans, ct, *, axis):
    # Linear in every input, which linear_in cannot list for a variadic primitive: without
    # this, reverse mode would linearize and transpose a small graph per concatenate.
    avals = [aval(x) for x in xs]
    return _split_cotangent(ct, avals, [is_differentiable(x) for x in avals], axis)


register(concatenate_p, impl=lambda *xs, axis: np.concatenate(xs, axis),
         abstract_eval=_concatenate_abstract_eval, jvp=_concatenate_jvp,
         transpose=_concatenate_transpose, vjp=_concatenate_vjp, batch=_concatenate_batch,
         symbolic_zeros=True)


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
    if type(x) is not np.ndarray:
        return np.split(x, np.cumsum(sizes[:-1], dtype=np.int64), axis)
    # np.split's views, sliced directly (its Python layer cost ~5x the slicing)
    lead = (slice(None),) * axis
    pieces, start = [], 0
    for size in sizes:
        pieces.append(x[lead + (slice(start, start + size),)])
        start += size
    return pieces


register(split_p, impl=_split_impl, abstract_eval=_split_abstract_eval, jvp=linear_jvp(split_p),
         transpose=_split_transpose, batch=_split_batch, symbolic_zeros=True, linear_in=(0,))



slice_p = Primitive("slice")


def _slice_abstract_eval(x, *, starts, stops, steps):
    if not len(starts) == len(stops) == len(steps) == len(x.shape):
        raise ValueError(f"slice needs one start, stop and step per axis of {x.shape}")
    lengths = []
    for n, a, b, c in zip(x.shape, starts, stops, steps):
        if not (0 <= a <= b <= n and c >= 1):
            raise ValueError(f"bad slice {a}:{b}:{c} of an axis of length {n}")
        lengths.append(-(-(b - a) // c))    # ceil((b - a) / c), >= 0 since a <= b
    shape = tuple(lengths)
    return shaped_array(shape, x.dtype, x.weak_type and not shape)


def _slice_transpose(ct, x, *, starts, stops, steps):
    ct_aval = ct if type(ct) is ndarray else aval(ct)   # (an array: its shape and dtype)
    widths = []
    for n, a, c, m in zip(x.aval.shape, starts, steps, ct_aval.shape):
        if m > 1:
            widths.append((a, n - a - (m - 1) * c - 1, c - 1))
        else:
            widths.append((a, n - a - m, 0))
    return (_pad(ct, plus_zero(ct_aval.dtype), tuple(widths)),)


def _slice_batch(size, args, dims, *, starts, stops, steps):
    x = move_to_front(args[0], dims[0], size)
    return slice_p.bind(x, starts=(0,) + starts, stops=(size,) + stops, steps=(1,) + steps), 0


register(slice_p,
         impl=lambda x, *, starts, stops, steps: x[tuple(map(slice, starts, stops, steps))],
         abstract_eval=_slice_abstract_eval, jvp=linear_jvp(slice_p),
         transpose=_slice_transpose, batch=_slice_batch, symbolic_zeros=True, linear_in=(0,),
         role="slice", hooks=Hooks(region=lambda eqn: slice_box(**eqn.params)))


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
        raise shape_error(f"static_slice needs one start, stop and step per axis of {shape}")
    lo, hi, strides, flips = [], [], [], []
    for axis, (n, a, b, c) in enumerate(zip(shape, starts, stops, steps)):
        if c == 0:
            raise shape_error("slice step cannot be zero")
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


def _padded_length(n, lo, hi, interior):
    return lo + hi + n + (n - 1) * interior if n else lo + hi


def _padded_shape(shape, widths):
    return tuple([_padded_length(n, *triple) for n, triple in zip(shape, widths)])


def _unpadded_slice(n, lo, interior):
    """Where the original elements sit along one padded axis."""
    return lo, (lo + (n - 1) * (interior + 1) + 1 if n else lo), interior + 1


_PLUS_ZEROS: dict = {}    # dtype -> its read-only 0-d +0


def plus_zero(dtype) -> np.ndarray:
    """A shared read-only 0-d +0 of `dtype`: the padding of cotangents (reverse mode pads once
    per slice it transposes), which the pad impl knows by identity."""
    zero = _PLUS_ZEROS.get(dtype)
    if zero is None:
        zero = np.zeros((), dtype)
        zero.flags.writeable = False
        zero = _PLUS_ZEROS.setdefault(zero.dtype, zero)
        _PLUS_ZEROS[dtype] = zero
    return zero


def _is_plus_zero(value):
    if type(value) is ndarray and _PLUS_ZEROS.get(value.dtype) is value:
        return True
    value = np.asarray(value)
    return value.dtype.kind in "biuf" and value == 0 and not np.signbit(value)


def _pad_impl(x, value, *, widths):
    if type(x) is not ndarray:
        x = np.asarray(x)
    shape, window = [], []
    for n, (lo, hi, interior) in zip(x.shape, widths):
        shape.append(_padded_length(n, lo, hi, interior))
        window.append(slice(*_unpadded_slice(n, lo, interior)))
    # zeros (a cotangent's usual padding) come zeroed from the allocator: 3x faster than full
    out = np.zeros(shape, x.dtype) if _is_plus_zero(value) else np.full(shape, value, x.dtype)
    out[tuple(window)] = x
    return out


def _pad_abstract_eval(x, value, *, widths):
    if value.ndim != 0:
        raise ValueError(f"the padding value must be a scalar, got shape {value.shape}")
    if len(widths) != x.ndim or any(w < 0 for triple in widths for w in triple):
        raise ValueError(f"pad widths {widths} do not fit an array of shape {x.shape}")
    return shaped_array(_padded_shape(x.shape, widths), x.dtype, x.weak_type)


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
    value = np.reshape(move_to_front(value, value_dim, size).astype(dtype),
                       (size,) + (1,) * len(widths))
    return np.where(mask, padded, value), 0


register(pad_p, impl=_pad_impl, abstract_eval=_pad_abstract_eval, jvp=_pad_jvp,
         transpose=_pad_transpose, batch=_pad_batch, symbolic_zeros=True, linear_in=(0, 1),
         role="pad")


# -- flip and repeat -------------------------------------------------------------------------

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


roll_p = Primitive("roll")
"""np.roll(x, shifts, axes): one equation (as split and concatenate per axis it was two, and
two more in its reverse pass); the shifts are in [1, length) and the axes distinct."""


def _roll_abstract_eval(x, *, shifts, axes):
    if any(not 0 <= a < x.ndim for a in axes) or len(set(axes)) != len(axes) \
            or len(shifts) != len(axes):
        raise ValueError(f"axes {axes} and shifts {shifts} don't fit an array of dimension "
                         f"{x.ndim}")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def _roll_impl(x, *, shifts, axes):
    # the two pieces of each axis joined the other way: np.roll's bits, at a third of its
    # Python overhead (compiled code calls this once per roll)
    for shift, axis in zip(shifts, axes):
        cut = x.shape[axis] - shift
        lead = (slice(None),) * axis
        x = np.concatenate((x[lead + (slice(cut, None),)], x[lead + (slice(None, cut),)]), axis)
    return x


def _roll_transpose(ct, x, *, shifts, axes):
    back = tuple(x.aval.shape[a] - s for a, s in zip(axes, shifts))
    return (roll_p.bind(ct, shifts=back, axes=axes),)


def _roll_batch(size, args, dims, *, shifts, axes):
    x = move_to_front(args[0], dims[0], size)
    return roll_p.bind(x, shifts=shifts, axes=tuple(a + 1 for a in axes)), 0


register(roll_p, impl=_roll_impl,
         abstract_eval=_roll_abstract_eval, jvp=linear_jvp(roll_p), transpose=_roll_transpose,
         batch=_roll_batch, symbolic_zeros=True, linear_in=(0,))


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


# -- diagonals ----------------------------------------------------------------------------------

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


def diag_embed(v, n1, n2, offset):
    """The (n1, n2) matrices, over `v`'s leading axes, with `v`'s last axis on diagonal
    `offset` and zeros elsewhere: interior padding puts element i at i * (m + 1) of a flat
    m * m square, then edge padding places that square."""
    shape = aval(v).shape
    lead, m = shape[:-1], shape[-1]
    zero = plus_zero(aval(v).dtype)
    keep = ((0, 0, 0),) * len(lead)
    square = np.reshape(_pad(v, zero, keep + ((0, 0, m if m > 1 else 0),)), lead + (m, m))
    row, col = min(max(0, -offset), n1), min(max(0, offset), n2)
    return _pad(square, zero, keep + ((row, n1 - m - row, 0), (col, n2 - m - col, 0)))


def _diagonal_transpose(ct, x, *, offset, axis1, axis2):
    shape = x.aval.shape
    full = diag_embed(ct, shape[axis1], shape[axis2], offset)
    return (np.moveaxis(full, (-2, -1), (axis1, axis2)),)


def _diagonal_batch(size, args, dims, *, offset, axis1, axis2):
    x = move_to_front(args[0], dims[0], size)
    return diagonal_p.bind(x, offset=offset, axis1=axis1 + 1, axis2=axis2 + 1), 0


register(diagonal_p,
         impl=lambda x, *, offset, axis1, axis2: np.diagonal(x, offset, axis1, axis2),
         abstract_eval=_diagonal_abstract_eval, jvp=linear_jvp(diagonal_p),
         transpose=_diagonal_transpose, batch=_diagonal_batch, symbolic_zeros=True, linear_in=(0,))


__all__ = ["broadcast_to_p", "concatenate_p", "copy_p", "diag_embed", "diagonal_p", "flip_p",
           "pad_p", "repeat_p", "reshape_p", "slice_p", "split_p", "static_slice", "transpose_p"]
