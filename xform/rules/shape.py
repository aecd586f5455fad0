"""Shape primitives: reshape, broadcast_to, transpose, and the numpy functions built on them."""
import numpy as np

from xform.ir.avals import ShapedArray
from xform.ir.core import Primitive
from xform.ir.tracer import implements
from xform.rules.helpers import NOT_MAPPED, aval, linear_jvp, move_to_front, unbroadcast
from xform.rules.registry import register


def _normalize_axis(axis, ndim):
    if not -ndim <= axis < max(ndim, 1):
        raise ValueError(f"axis {axis} is out of bounds for an array of dimension {ndim}")
    return axis % ndim if ndim else 0


# -- reshape ---------------------------------------------------------------------------------

reshape_p = Primitive("reshape")


def _reshape_abstract_eval(x, *, shape):
    if int(np.prod(shape, dtype=np.int64)) != x.size:
        raise ValueError(f"cannot reshape an array of size {x.size} into shape {shape}")
    return ShapedArray(shape, x.dtype, x.weak_type)


def _reshape_batch(size, args, dims, *, shape):
    x = move_to_front(args[0], dims[0], size)
    return reshape_p.bind(x, shape=(size,) + shape), 0


register(reshape_p, impl=lambda x, *, shape: np.reshape(x, shape),
         abstract_eval=_reshape_abstract_eval, jvp=linear_jvp(reshape_p),
         transpose=lambda ct, x, *, shape: (reshape_p.bind(ct, shape=x.aval.shape),),
         batch=_reshape_batch)


def _resolve_shape(size, shape):
    shape = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    if shape.count(-1) > 1:
        raise ValueError("can only specify one unknown dimension")
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape an array of size {size} into shape {shape}")
        shape = tuple(size // known if d == -1 else d for d in shape)
    return shape


@implements(np.reshape)
def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    """`np.reshape` (C order only)."""
    if order != "C":
        from xform.ir.tracer import _unsupported
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
            raise ValueError("cannot select an axis to squeeze out which has size not "
                             "equal to one")
    return reshape(a, tuple(d for i, d in enumerate(shape) if i not in axes))


# -- broadcast_to ----------------------------------------------------------------------------

broadcast_to_p = Primitive("broadcast_to")


def _broadcast_to_abstract_eval(x, *, shape):
    if np.broadcast_shapes(x.shape, shape) != tuple(shape):
        raise ValueError(f"cannot broadcast shape {x.shape} to {shape}")
    return ShapedArray(shape, x.dtype, x.weak_type)


def _broadcast_to_batch(size, args, dims, *, shape):
    x = move_to_front(args[0], dims[0], size)
    x_shape = aval(x).shape
    x = reshape(x, (size,) + (1,) * (len(shape) - len(x_shape) + 1) + x_shape[1:])
    return broadcast_to_p.bind(x, shape=(size,) + shape), 0


register(broadcast_to_p, impl=lambda x, *, shape: np.broadcast_to(x, shape),
         abstract_eval=_broadcast_to_abstract_eval, jvp=linear_jvp(broadcast_to_p),
         transpose=lambda ct, x, *, shape: (unbroadcast(ct, x.aval),),
         batch=_broadcast_to_batch)


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


register(transpose_p, impl=lambda x, *, axes: np.transpose(x, axes),
         abstract_eval=_transpose_abstract_eval, jvp=linear_jvp(transpose_p),
         transpose=lambda ct, x, *, axes: (transpose_p.bind(ct, axes=tuple(np.argsort(axes))),),
         batch=_transpose_batch)


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


__all__ = ["NOT_MAPPED", "broadcast_to", "expand_dims", "moveaxis", "ravel", "reshape",
           "squeeze", "swapaxes", "transpose"]
