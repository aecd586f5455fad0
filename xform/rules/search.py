"""Searching and selecting with integer results (zero derivative): `searchsorted` of values in
stacks of sorted rows, and `argpartition`. Values are then taken with the index family, so
their derivatives come from gather."""
import numpy as np

from xform.ir.ad import move_to_front
from xform.ir.avals import ShapedArray
from xform.ir.core import Primitive
from xform.ir.registry import register
from xform.rules.helpers import zero_derivative

searchsorted_p = Primitive("searchsorted")


def _searchsorted_impl(sorted_rows, values, *, side, batch_ndim):
    if not batch_ndim:
        return np.searchsorted(sorted_rows, values, side=side)
    # one numpy search per row of the leading (batch) axes
    out = np.empty(values.shape, np.intp)
    for index in np.ndindex(values.shape[:batch_ndim]):
        out[index] = np.searchsorted(sorted_rows[index], values[index], side=side)
    return out


def _searchsorted_abstract_eval(sorted_rows, values, *, side, batch_ndim):
    if sorted_rows.ndim != batch_ndim + 1:
        raise ValueError(f"searchsorted: the sorted array must be 1-dimensional, got "
                         f"{sorted_rows.str_short()}")
    if sorted_rows.shape[:batch_ndim] != values.shape[:batch_ndim]:
        raise ValueError(f"searchsorted: batch axes of {sorted_rows.str_short()} and "
                         f"{values.str_short()} differ")
    return ShapedArray(values.shape, np.dtype(np.intp))


def _searchsorted_batch(size, args, dims, *, side, batch_ndim):
    sorted_rows, values = (move_to_front(x, d, size) for x, d in zip(args, dims))
    return searchsorted_p.bind(sorted_rows, values, side=side, batch_ndim=batch_ndim + 1), 0


register(searchsorted_p, impl=_searchsorted_impl, abstract_eval=_searchsorted_abstract_eval,
         **zero_derivative(searchsorted_p), batch=_searchsorted_batch, symbolic_zeros=True)


argpartition_p = Primitive("argpartition")


def _argpartition_abstract_eval(x, *, kth, axis):
    if not 0 <= axis < x.ndim:
        raise ValueError(f"argpartition: axis {axis} is out of bounds for an array of "
                         f"dimension {x.ndim}")
    if any(not 0 <= k < x.shape[axis] for k in kth):
        raise ValueError(f"argpartition: kth {kth} out of bounds for axis of size "
                         f"{x.shape[axis]}")
    return ShapedArray(x.shape, np.dtype(np.intp))


def _argpartition_batch(size, args, dims, *, kth, axis):
    return argpartition_p.bind(move_to_front(args[0], dims[0], size), kth=kth, axis=axis + 1), 0


register(argpartition_p, impl=lambda x, *, kth, axis: np.argpartition(x, kth, axis=axis),
         abstract_eval=_argpartition_abstract_eval, **zero_derivative(argpartition_p),
         batch=_argpartition_batch, symbolic_zeros=True)


__all__ = ["argpartition_p", "searchsorted_p"]
