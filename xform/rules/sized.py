"""Primitives whose result's size depends on values (`np.nonzero`, `np.unique`), staged with
that size fixed: the numpy functions over them first decide the size from the staging's
values, which guards it (xform.ir.values), so each staged path has static shapes. Their
outputs are integer positions: values are gathered at them, so derivatives flow through the
gather."""
import numpy as np

from xform.errors import XformError
from xform.ir.ad import NOT_MAPPED
from xform.ir.avals import ShapedArray
from xform.ir.core import Primitive
from xform.rules.helpers import zero_derivative
from xform.ir.registry import register

nonzero_p = Primitive("nonzero", multiple_results=True)
unique_index_p = Primitive("unique_index")

_INTP = np.dtype(np.intp)


def _check_size(found, count, name):
    # The guard on the size runs before this equation: a mismatch is xform's own error.
    if found != count:
        raise XformError(f"{name}: {found} results where the staged path has {count}", None)


def _nonzero_impl(x, *, count):
    positions = np.nonzero(x)
    _check_size(positions[0].size if positions else int(bool(x)), count, "nonzero")
    return list(positions)


def _nonzero_abstract_eval(x, *, count):
    return [ShapedArray((count,), _INTP)] * max(x.ndim, 1)


def _per_lane(prim, size, args, dims, **params):
    """A size-fixed primitive batched: each lane's result, stacked (every lane has the
    guarded size, or its guard fails first)."""
    lanes = np.moveaxis(args[0], dims[0], 0)
    outs = [prim.bind(lanes[i], **params) for i in range(size)]
    if prim.multiple_results:
        return [np.stack([o[k] for o in outs]) for k in range(len(outs[0]))], \
            [0] * len(outs[0])
    return np.stack(outs), 0


def _nonzero_batch(size, args, dims, **params):
    x, = args
    if dims[0] is NOT_MAPPED:
        outs = nonzero_p.bind(x, **params)
        return outs, [NOT_MAPPED] * len(outs)
    return _per_lane(nonzero_p, size, args, dims, **params)


register(nonzero_p, impl=_nonzero_impl, abstract_eval=_nonzero_abstract_eval,
         **zero_derivative(nonzero_p), batch=_nonzero_batch)


def _unique_index_impl(x, *, count):
    _, first = np.unique(x, return_index=True)
    _check_size(first.size, count, "unique")
    return first


def _unique_index_abstract_eval(x, *, count):
    return ShapedArray((count,), _INTP)


def _unique_index_batch(size, args, dims, **params):
    x, = args
    if dims[0] is NOT_MAPPED:
        return unique_index_p.bind(x, **params), NOT_MAPPED
    return _per_lane(unique_index_p, size, args, dims, **params)


register(unique_index_p, impl=_unique_index_impl, abstract_eval=_unique_index_abstract_eval,
         **zero_derivative(unique_index_p), batch=_unique_index_batch)

__all__ = ["nonzero_p", "unique_index_p"]
