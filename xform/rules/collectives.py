"""Collectives over a named vmap axis (JAX's psum, pmax, all_gather under vmap): each takes
the value and the axis's lane index, a hidden input that `vmap(..., axis_name=)` maps. Their
batch rules reduce only at the level where the index is mapped (their own axis); at any other
level they are batched like their value."""
import numpy as np

from xform.errors import XformError
from xform.ir.ad import NOT_MAPPED, aval
from xform.ir.avals import ShapedArray
from xform.ir.core import Primitive
from xform.ir.registry import register
from xform.source_info import user_frame_info

psum_p = Primitive("psum")
pmax_p = Primitive("pmax")
all_gather_p = Primitive("all_gather")


def _outside_vmap(*args, **params):
    raise XformError("a collective ran outside the vmap that names its axis", user_frame_info())


def _moved(x, dim):
    return np.moveaxis(x, dim, 0)


def _psum_batch(size, args, dims):
    (x, index), (x_dim, index_dim) = args, dims
    if index_dim is NOT_MAPPED:
        return psum_p.bind(x, index), x_dim
    if x_dim is NOT_MAPPED:
        return x * size, NOT_MAPPED
    return np.sum(x, axis=x_dim), NOT_MAPPED


def _psum_jvp(primals, tangents):
    x, index = primals
    out = psum_p.bind(x, index)
    return out, psum_p.bind(tangents[0], index)


register(psum_p, impl=_outside_vmap, abstract_eval=lambda x, index: x, jvp=_psum_jvp,
         transpose=lambda ct, x, index: [psum_p.bind(ct, index), None],
         batch=_psum_batch, linear_in=(0,), construct="xform.psum")


def _pmax_batch(size, args, dims):
    (x, index), (x_dim, index_dim) = args, dims
    if index_dim is NOT_MAPPED:
        return pmax_p.bind(x, index), x_dim
    if x_dim is NOT_MAPPED:
        return x, NOT_MAPPED
    return np.max(x, axis=x_dim), NOT_MAPPED


def _pmax_jvp(primals, tangents):
    x, index = primals
    out = pmax_p.bind(x, index)
    # the mean of the tangents of the lanes that attain the maximum (ties share it)
    attains = (x == out).astype(aval(x).dtype)
    return out, (psum_p.bind(tangents[0] * attains, index) / psum_p.bind(attains, index))


register(pmax_p, impl=_outside_vmap, abstract_eval=lambda x, index: x, jvp=_pmax_jvp,
         batch=_pmax_batch, construct="xform.pmax")


def _gather_abstract_eval(x, index, *, size):
    return ShapedArray((size,) + x.shape, x.dtype, x.weak_type)


def _all_gather_batch(axis_size, args, dims, *, size):
    (x, index), (x_dim, index_dim) = args, dims
    if index_dim is NOT_MAPPED:
        out = all_gather_p.bind(x, index, size=size)
        return out, (NOT_MAPPED if x_dim is NOT_MAPPED else x_dim + 1)
    if x_dim is NOT_MAPPED:
        return np.broadcast_to(x, (axis_size,) + np.shape(x)), NOT_MAPPED
    return _moved(x, x_dim), NOT_MAPPED


def _all_gather_jvp(primals, tangents, *, size):
    x, index = primals
    out = all_gather_p.bind(x, index, size=size)
    return out, all_gather_p.bind(tangents[0], index, size=size)


def _all_gather_transpose(ct, x, index, *, size):
    # lane i's value is row i of every lane's result: its cotangent sums row i over the lanes
    return [np.take(psum_p.bind(ct, index), index, axis=0), None]


register(all_gather_p, impl=_outside_vmap, abstract_eval=_gather_abstract_eval,
         jvp=_all_gather_jvp, transpose=_all_gather_transpose, batch=_all_gather_batch,
         linear_in=(0,), construct="xform.all_gather")
