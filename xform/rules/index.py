"""Indexing primitives: one `gather` holds the static part of an index in its params and the
integer index arrays as inputs; `scatter_add` is its transpose; `scatter` is numpy's
assignment `x[index] = updates` as a functional update (what in-place writes stage). numpy's
index argument is parsed into that form by xform.numpy.index (`x[index]`, np.take, `index_add`,
`x[index] = v`).
"""
import numpy as np

from xform.ir.avals import ShapedArray, broadcast_shapes, is_differentiable
from xform.ir.core import Primitive
from xform.ir.index_params import (ARRAY, FULL, index_box,  # noqa: F401  (re-exported)
                                   numpy_index)
from xform.ir.ad import (NOT_MAPPED, Undefined, Zero, aval, instantiate, move_to_front, ndim,
                         zero_tangent, zeros)
from xform.ir.tracer import Tracer
from xform.rules.helpers import linear_jvp
from xform.rules import shape as shape_rules
from xform.ir.registry import Hooks, register


def index_layout(shape, index, array_shapes):
    """(result shape, start of the broadcast advanced-index block or None, the block's rank).

    numpy's rule: the advanced entries (arrays, and ints when any array is present) broadcast
    to one block, which replaces them in place when they are adjacent in the index and goes
    first otherwise. None and Ellipsis separate them even when the Ellipsis spans no axis.
    >>> from xform.rules.index import ARRAY, FULL, index_layout
    >>> index_layout((3, 4, 5), (FULL, ARRAY), [(2,)])
    ((3, 2, 5), 1, 1)
    """
    ellipses = index.count(Ellipsis)
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = len(index) - index.count(None) - ellipses
    if consumed > len(shape):
        raise IndexError(f"too many indices for array: array is {len(shape)}-dimensional, "
                         f"but {consumed} were indexed")
    has_arrays = ARRAY in index
    array_shapes = iter(array_shapes)
    dims, block_shapes, positions, starts = [], [], [], []
    axis = 0
    for position, entry in enumerate(index):
        if entry is None:
            dims.append(1)
            continue
        if entry is Ellipsis:
            spanned = len(shape) - consumed
            dims.extend(shape[axis:axis + spanned])
            axis += spanned
            continue
        size = shape[axis]
        if type(entry) is int and not -size <= entry < size:
            raise IndexError(f"index {entry} is out of bounds for axis {axis} with size {size}")
        if entry == ARRAY or (has_arrays and type(entry) is int):
            block_shapes.append(next(array_shapes) if entry == ARRAY else ())
            positions.append(position)
            starts.append(len(dims))
        elif type(entry) is tuple:
            dims.append(len(range(*slice(*entry).indices(size))))
        axis += 1
    dims.extend(shape[axis:])
    if not positions:
        return tuple(dims), None, 0
    try:
        block = broadcast_shapes(*block_shapes)
    except ValueError:
        raise IndexError("shape mismatch: indexing arrays could not be broadcast together "
                         f"with shapes {' '.join(map(str, block_shapes))}") from None
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    at = starts[0] if adjacent else 0
    return tuple(dims[:at]) + block + tuple(dims[at:]), at, len(block)


def _check_index_arrays(arrays):
    for array in arrays:
        if array.dtype.kind not in "iu":
            raise TypeError(f"index arrays must have an integer dtype, got {array.dtype}")


def _example_shapes(arrays, dims):
    return [aval(a).shape if d is NOT_MAPPED else aval(a).shape[:d] + aval(a).shape[d + 1:]
            for a, d in zip(arrays, dims)]


def _batch_index_arrays(size, arrays, dims):
    """Index arrays with their batch axis first, padded so they broadcast with the unbatched
    ones. Returns (arrays, rank of one example's broadcast index block)."""
    rank = max(ndim(a) - (d is not NOT_MAPPED) for a, d in zip(arrays, dims))
    result = []
    for array, dim in zip(arrays, dims):
        if dim is not NOT_MAPPED:
            array = move_to_front(array, dim, size)
            shape = aval(array).shape
            array = np.reshape(array, (size,) + (1,) * (rank + 1 - len(shape)) + shape[1:])
        result.append(array)
    return result, rank


def _batch_positions(size, rank):
    """arange(size) shaped to index the batch axis alongside batched index arrays."""
    return np.arange(size).reshape((size,) + (1,) * rank)


def basic_read(x, index):
    """`x[index]` for an index param without ARRAY entries (ints, slices, None, Ellipsis) as
    the shape family's slice and reshape: numpy's view, and what compiled code reads with
    numpy's own indexing (xform.codegen.analyses.plain_indexing)."""
    shape = aval(x).shape
    out_shape, _, _ = index_layout(shape, index, [])
    bounds = []
    for entry in index:
        if entry is Ellipsis:
            spanned = len(shape) - sum(e is not None and e is not Ellipsis for e in index)
            bounds.extend([FULL] * spanned)
        elif type(entry) is int:
            start = entry % shape[len(bounds)]
            bounds.append((start, start + 1, 1))
        elif entry is not None:
            bounds.append(entry)
    bounds.extend([FULL] * (len(shape) - len(bounds)))
    out = shape_rules.static_slice(x, *zip(*bounds)) if bounds else x
    return (out if aval(out).shape == out_shape
            else shape_rules.reshape_p.bind(out, shape=out_shape))


# -- gather: x[index] --------------------------------------------------------------------------

gather_p = Primitive("gather")


def _gather_impl(x, *arrays, index):
    return np.asarray(x)[numpy_index(index, arrays)]


def _gather_abstract_eval(x, *arrays, index):
    _check_index_arrays(arrays)
    shape, _, _ = index_layout(x.shape, index, [a.shape for a in arrays])
    return ShapedArray(shape, x.dtype, x.weak_type)


def _gather_transpose(ct, x, *arrays, index):
    ct_x = scatter_add_p.bind(ct, *arrays, index=index, shape=x.aval.shape)
    return (ct_x,) + (None,) * len(arrays)


def _gather_batch(size, args, dims, *, index):
    x, arrays = args[0], args[1:]
    if all(d is NOT_MAPPED for d in dims[1:]):
        x = move_to_front(x, dims[0], size)
        index = (FULL,) + index
        _, at, block = index_layout(aval(x).shape, index, [aval(a).shape for a in arrays])
        # a block that cannot stay in place goes first, in front of the batch axis
        return gather_p.bind(x, *arrays, index=index), block if at == 0 else 0
    x_shape = aval(x).shape
    if dims[0] is not NOT_MAPPED:
        x_shape = x_shape[:dims[0]] + x_shape[dims[0] + 1:]
    _, at, block = index_layout(x_shape, index, _example_shapes(arrays, dims[1:]))
    arrays, rank = _batch_index_arrays(size, arrays, dims[1:])
    if dims[0] is NOT_MAPPED:
        # one example's block at `at` becomes (size, *block) there
        return gather_p.bind(x, *arrays, index=index), at
    x = move_to_front(x, dims[0], size)
    arrays = [_batch_positions(size, rank)] + arrays
    out = gather_p.bind(x, *arrays, index=(ARRAY,) + index)
    # the batched index puts (size, *block) first; one example had its block at `at`
    if at:
        out = np.moveaxis(out, tuple(range(1, 1 + block)), tuple(range(1 + at, 1 + at + block)))
    return out, 0


def _region(eqn):
    """The box of its first input that a gather (a view) or a scatter (written in place)
    touches (codegen's writes_in_place); None with index arrays."""
    return index_box(eqn.inputs[0].aval.shape, eqn.params["index"])


register(gather_p, impl=_gather_impl, abstract_eval=_gather_abstract_eval,
         jvp=linear_jvp(gather_p), transpose=_gather_transpose, batch=_gather_batch,
         symbolic_zeros=True, linear_in=(0,), hooks=Hooks(region=_region))


# -- scatter_add: zeros of `shape` with `updates` added at index (np.add.at) -----------------

scatter_add_p = Primitive("scatter_add")


def _scatter_add_impl(updates, *arrays, index, shape):
    out = np.zeros(shape, np.asarray(updates).dtype)
    where = numpy_index(index, arrays)
    if arrays:
        np.add.at(out, where, updates)
    else:
        # basic indexing never selects an element twice, so plain assignment accumulates
        out[where] = updates
    return out


def _scatter_add_abstract_eval(updates, *arrays, index, shape):
    _check_index_arrays(arrays)
    selected, _, _ = index_layout(shape, index, [a.shape for a in arrays])
    if updates.shape != selected:
        raise ValueError(f"updates of shape {updates.shape} for an index selecting {selected}")
    return ShapedArray(shape, updates.dtype)


def _scatter_add_transpose(ct, updates, *arrays, index, shape):
    return (gather_p.bind(ct, *arrays, index=index),) + (None,) * len(arrays)


def _batch_scatter_index(size, shape, updates, arrays, dims, index):
    """A scatter's (updates, arrays, index) for one example of `shape`, batched: `updates`
    batched at 0, the result's batch axis first. Shared by scatter_add and scatter."""
    if all(d is NOT_MAPPED for d in dims):
        index = (FULL,) + index
        _, at, block = index_layout((size,) + shape, index, [aval(a).shape for a in arrays])
        if at == 0 and block:
            updates = np.moveaxis(updates, 0, block)
        return updates, arrays, index
    _, at, block = index_layout(shape, index, _example_shapes(arrays, dims))
    arrays, rank = _batch_index_arrays(size, arrays, dims)
    # the batched index puts (size, *block) first; one example had its block at `at`
    if at:
        updates = np.moveaxis(updates, tuple(range(1 + at, 1 + at + block)),
                              tuple(range(1, 1 + block)))
    return updates, [_batch_positions(size, rank)] + arrays, (ARRAY,) + index


def _scatter_add_batch(size, args, dims, *, index, shape):
    updates = move_to_front(args[0], dims[0], size)
    updates, arrays, index = _batch_scatter_index(size, shape, updates, args[1:], dims[1:],
                                                  index)
    return scatter_add_p.bind(updates, *arrays, index=index, shape=(size,) + shape), 0


register(scatter_add_p, impl=_scatter_add_impl, abstract_eval=_scatter_add_abstract_eval,
         jvp=linear_jvp(scatter_add_p), transpose=_scatter_add_transpose,
         batch=_scatter_add_batch, symbolic_zeros=True, linear_in=(0,))


# -- scatter: x with x[index] = updates (numpy's assignment: the last repeated index wins) -----

scatter_p = Primitive("scatter")


def _scatter_impl(x, updates, *arrays, index):
    # (the method, in np.array's memory order, costs less than np.array's conversion)
    out = x.copy(order="K") if type(x) is np.ndarray else np.array(x, copy=True)
    out[numpy_index(index, arrays)] = updates
    return out


def _scatter_in_place(x, updates, *arrays, index):
    # codegen's form when `x` is a buffer of this call that nothing reads later
    # (xform.codegen.analyses.writes_in_place): the write without the copy
    x[numpy_index(index, arrays)] = updates
    return x


def _scatter_static_index(eqn):
    """The numpy index of a scatter without index arrays (codegen then writes `x[i] = v`)."""
    return numpy_index(eqn.params["index"], ()) if len(eqn.inputs) == 2 else None


def _scatter_abstract_eval(x, updates, *arrays, index):
    _check_index_arrays(arrays)
    selected, _, _ = index_layout(x.shape, index, [a.shape for a in arrays])
    if updates.shape != selected:
        raise ValueError(f"updates of shape {updates.shape} for an index selecting {selected}")
    if updates.dtype != x.dtype:
        raise TypeError(f"updates of dtype {updates.dtype} written into {x.dtype}")
    return x


def _scatter_jvp(primals, tangents, *, index):
    ans = scatter_p.bind(*primals, index=index)
    t_x, t_updates = tangents[:2]
    if not is_differentiable(aval(ans)) or (type(t_x) is Zero and type(t_updates) is Zero):
        return ans, zero_tangent(aval(ans))
    return ans, scatter_p.bind(instantiate(t_x), instantiate(t_updates), *primals[2:],
                               index=index)


def _winners(shape, selected, arrays, index):
    """Where each update of a scatter survives: False for one overwritten by a later update
    at the same position (numpy's assignment keeps the last). None when all survive."""
    if not arrays:
        return None  # a basic index selects each position once
    ids = np.arange(int(np.prod(selected, dtype=int)), dtype=np.intp).reshape(selected)
    owner = scatter_p.bind(np.full(shape, -1, np.intp), ids, *arrays, index=index)
    won = gather_p.bind(owner, *arrays, index=index) == ids
    if type(won) is not Tracer and won.all():
        return None  # concrete indices without repeats: nothing to mask
    return won


def _scatter_transpose(ct, x, updates, *arrays, index):
    ct_x = ct_updates = None
    if type(updates) is Undefined and arrays:
        ct_updates = gather_p.bind(ct, *arrays, index=index)
        won = _winners(aval(ct).shape, aval(updates).shape, arrays, index)
        if won is not None:
            ct_updates = np.where(won, ct_updates, zeros(aval(updates)))
    elif type(updates) is Undefined and type(ct) is not Tracer:
        ct_updates = gather_p.bind(ct, index=index)    # computed at once: one numpy read
    elif type(updates) is Undefined:
        # staged as `ct[i]`, which compiled code reads with numpy's indexing, and copied out
        # before `ct_x` may zero the row in place (xform.passes.writes drops both where
        # nothing reads the row again)
        ct_updates = basic_read(ct, index)
        if type(x) is Undefined and aval(ct_updates).shape:
            ct_updates = shape_rules.copy_p.bind(ct_updates)
    if type(x) is Undefined:
        ct_x = scatter_p.bind(ct, zeros(aval(updates)), *arrays, index=index)
    return (ct_x, ct_updates) + (None,) * len(arrays)


def _scatter_batch(size, args, dims, *, index):
    x, updates, arrays = args[0], args[1], args[2:]
    x = move_to_front(x, dims[0], size)
    updates = move_to_front(updates, dims[1], size)
    updates, arrays, index = _batch_scatter_index(size, aval(x).shape[1:], updates, arrays,
                                                  dims[2:], index)
    return scatter_p.bind(x, updates, *arrays, index=index), 0


register(scatter_p, impl=_scatter_impl, abstract_eval=_scatter_abstract_eval,
         jvp=_scatter_jvp, transpose=_scatter_transpose, batch=_scatter_batch,
         symbolic_zeros=True, linear_in=(0, 1), role="scatter",
         hooks=Hooks(in_place=_scatter_in_place, in_place_index=_scatter_static_index,
                     region=_region))


__all__ = ["ARRAY", "FULL", "basic_read", "gather_p", "index_layout", "numpy_index",
           "scatter_add_p", "scatter_p"]
