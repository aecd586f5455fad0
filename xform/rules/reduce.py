"""Reductions: sum (linear) and the numpy functions built on it."""
import numpy as np

from xform.ir.avals import ShapedArray
from xform.ir.core import Primitive
from xform.ir.tracer import implements
from xform.rules.helpers import aval, linear_jvp, move_to_front
from xform.rules.registry import register
from xform.rules.shape import broadcast_to, reshape


def normalize_axes(axis, ndim):
    """numpy's `axis` argument as a sorted tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    result = []
    for ax in axes:
        ax = int(ax)
        if not -ndim <= ax < max(ndim, 1) or (ndim == 0 and ax not in (0, -1)):
            raise ValueError(f"axis {ax} is out of bounds for an array of dimension {ndim}")
        result.append(ax % ndim if ndim else 0)
    if len(set(result)) != len(result):
        raise ValueError("duplicate value in 'axis'")
    return tuple(sorted(result)) if ndim else ()


def reduced_shape(shape, axes, keepdims=False):
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def expand_reduced(ct, shape, axes):
    """Undo a reduction's shape change: put size-1 axes back at `axes`, then broadcast."""
    ct = reshape(ct, reduced_shape(shape, axes, keepdims=True))
    return broadcast_to(ct, shape)


def _reduction_dtype(numpy_fn, x, **kwargs):
    return np.result_type(numpy_fn(np.ones((1,) * max(x.ndim, 1), x.dtype), **kwargs))


# -- sum ---------------------------------------------------------------------------------------

sum_p = Primitive("sum")


def _sum_abstract_eval(x, *, axes, dtype=None):
    return ShapedArray(reduced_shape(x.shape, axes),
                       dtype if dtype is not None else _reduction_dtype(np.sum, x))


def _sum_transpose(ct, x, *, axes, dtype=None):
    ct = expand_reduced(ct, x.aval.shape, axes)
    return (ct.astype(x.aval.dtype) if aval(ct).dtype != x.aval.dtype else ct,)


def _sum_batch(size, args, dims, *, axes, dtype=None):
    x = move_to_front(args[0], dims[0], size)
    return sum_p.bind(x, axes=tuple(a + 1 for a in axes), dtype=dtype), 0


register(sum_p, impl=lambda x, *, axes, dtype=None: np.sum(x, axis=axes, dtype=dtype),
         abstract_eval=_sum_abstract_eval, jvp=linear_jvp(sum_p), transpose=_sum_transpose,
         batch=_sum_batch)


@implements(np.sum)
def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """`np.sum` (no out/initial/where)."""
    if out is not None or initial is not None or where is not None:
        from xform.ir.tracer import _unsupported
        raise _unsupported("numpy.sum(..., out/initial/where=...)")
    shape = aval(a).shape
    axes = normalize_axes(axis, len(shape))
    result = sum_p.bind(a, axes=axes, dtype=None if dtype is None else np.dtype(dtype))
    if keepdims:
        result = reshape(result, reduced_shape(shape, axes, keepdims=True))
    return result


def _add_reduce(a, axis=0, dtype=None, keepdims=False):
    return sum(a, axis=axis, dtype=dtype, keepdims=keepdims)


implements((np.add, "reduce"))(_add_reduce)
