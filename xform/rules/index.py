"""Indexing: `x[index]` with numpy's basic and advanced rules, np.take, np.take_along_axis and
`index_add` (a functional np.add.at). One `gather` primitive holds the static part of an index
in its params and the integer index arrays as inputs; `scatter_add` is its transpose.
"""
import operator

import numpy as np

from xform.errors import ConcretizationError, TypeCheckError
from xform.ir.avals import ShapedArray
from xform.ir.core import Primitive
from xform.source_info import user_frame_info
from xform.ir.tracer import Tracer, _unsupported, implements, shape_error
from xform.rules import shape as shape_rules
from xform.ir.ad import NOT_MAPPED, aval, move_to_front, ndim
from xform.rules.helpers import linear_jvp
from xform.rules.reduce import normalize_axes
from xform.ir.rules import register
from xform.rules.shape import broadcast_to, ravel, reshape, static_slice

# An index param is a tuple of entries: an int, None (newaxis), Ellipsis, a slice as a
# (start, stop, step) tuple, or ARRAY, which stands for the next integer-array input.
ARRAY = "array"
FULL = (None, None, None)


def numpy_index(index, arrays):
    """The numpy index that the `index` param and its `arrays` inputs stand for.

    >>> from xform.rules.index import ARRAY, numpy_index
    >>> numpy_index((0, (1, None, None), ARRAY), [np.array([2, 0])])
    (0, slice(1, None, None), array([2, 0]))
    """
    arrays = iter(arrays)
    return tuple(next(arrays) if entry == ARRAY else slice(*entry) if type(entry) is tuple
                 else entry for entry in index)


def index_layout(shape, index, array_shapes):
    """(result shape, start of the broadcast advanced-index block or None, the block's rank).

    numpy's rule: the advanced entries (arrays, and ints when any array is present) broadcast
    to one block, which replaces them in place when they are adjacent in the index and goes
    first otherwise. None and Ellipsis separate them even when the Ellipsis spans no axis.
    >>> from xform.rules.index import ARRAY, FULL, index_layout
    >>> index_layout((3, 4, 5), (FULL, ARRAY), [(2,)])
    ((3, 2, 5), 1, 1)
    """
    if sum(entry is Ellipsis for entry in index) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(entry is not None and entry is not Ellipsis for entry in index)
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
        block = np.broadcast_shapes(*block_shapes)
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


register(gather_p, impl=_gather_impl, abstract_eval=_gather_abstract_eval,
         jvp=linear_jvp(gather_p), transpose=_gather_transpose, batch=_gather_batch,
         symbolic_zeros=True, linear_in=(0,))


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


def _scatter_add_batch(size, args, dims, *, index, shape):
    updates, arrays = args[0], args[1:]
    updates = move_to_front(updates, dims[0], size)
    if all(d is NOT_MAPPED for d in dims[1:]):
        index = (FULL,) + index
        _, at, block = index_layout((size,) + shape, index, [aval(a).shape for a in arrays])
        if at == 0 and block:
            updates = np.moveaxis(updates, 0, block)
    else:
        _, at, block = index_layout(shape, index, _example_shapes(arrays, dims[1:]))
        arrays, rank = _batch_index_arrays(size, arrays, dims[1:])
        arrays = [_batch_positions(size, rank)] + arrays
        index = (ARRAY,) + index
        # the batched index puts (size, *block) first; one example had its block at `at`
        if at:
            updates = np.moveaxis(updates, tuple(range(1 + at, 1 + at + block)),
                                  tuple(range(1, 1 + block)))
    return scatter_add_p.bind(updates, *arrays, index=index, shape=(size,) + shape), 0


register(scatter_add_p, impl=_scatter_add_impl, abstract_eval=_scatter_add_abstract_eval,
         jvp=linear_jvp(scatter_add_p), transpose=_scatter_add_transpose,
         batch=_scatter_add_batch, symbolic_zeros=True, linear_in=(0,))


# -- numpy's index argument -> (index param, index arrays) ------------------------------------

_VALID = ("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer "
          "or boolean arrays are valid indices")


def _slice_entry(item):
    entry = tuple(None if v is None else operator.index(v)
                  for v in (item.start, item.stop, item.step))
    if entry[2] == 0:
        raise shape_error("slice step cannot be zero")
    return entry


def _classify(item):
    """One index item as an entry, a concrete integer array, a traced one, or a bool mask."""
    if item is None or item is Ellipsis:
        return item
    if isinstance(item, slice):
        return _slice_entry(item)
    if type(item) is Tracer:
        if item.dtype.kind == "b":
            raise ConcretizationError(
                "boolean mask indexing x[mask] needs a concrete mask, but this mask is traced "
                "(the result's size would depend on the data)", user_frame_info(),
                "use np.where(mask, x, 0) to keep the shape, or pass the mask as a concrete "
                "numpy array (e.g. a closure constant or static argument)")
        if item.dtype.kind not in "iu":
            raise TypeCheckError(_VALID, user_frame_info())
        return item
    if isinstance(item, (bool, np.bool_)):
        raise _unsupported("indexing with a scalar boolean (x[True])")
    if isinstance(item, (int, np.integer)):
        return int(item)
    array = np.asarray(item)
    if array.size == 0 and isinstance(item, (list, tuple)):
        array = array.astype(np.intp)
    if array.dtype.kind == "b" and array.ndim == 0:
        raise _unsupported("indexing with a scalar boolean (x[True])")
    if array.dtype.kind not in "iub":
        raise TypeCheckError(_VALID, user_frame_info())
    return int(array) if array.ndim == 0 else array


def _is_mask(item):
    return isinstance(item, np.ndarray) and item.dtype.kind == "b"


def parse_index(shape, index):
    """numpy's `index` for an array of `shape` as (index param, index arrays); concrete masks
    become their nonzero() arrays and concrete arrays are bounds-checked here.

    >>> from xform.rules.index import parse_index
    >>> parse_index((3, 4), (slice(1, None), [0, 2]))
    (((1, None, None), 'array'), [array([0, 2])])
    """
    items = [_classify(item) for item in (index if isinstance(index, tuple) else (index,))]
    if sum(item is Ellipsis for item in items) > 1:
        raise shape_error("an index can only have a single ellipsis ('...')")
    consumed = sum(item.ndim if _is_mask(item) else 1 for item in items
                   if item is not None and item is not Ellipsis)
    if consumed > len(shape):
        raise shape_error(f"too many indices for array: array is {len(shape)}-dimensional, "
                          f"but {consumed} were indexed")
    entries, arrays = [], []
    axis = 0
    for item in items:
        if item is None:
            entries.append(None)
        elif item is Ellipsis:
            entries.append(Ellipsis)
            axis += len(shape) - consumed
        elif _is_mask(item):
            if item.shape != shape[axis:axis + item.ndim]:
                raise shape_error(f"boolean index of shape {item.shape} does not match the "
                                  f"indexed axes {shape[axis:axis + item.ndim]}")
            positions = np.nonzero(item)
            entries.extend([ARRAY] * len(positions))
            arrays.extend(positions)
            axis += item.ndim
        elif isinstance(item, np.ndarray) or type(item) is Tracer:
            if isinstance(item, np.ndarray) and item.size:
                low, high = int(item.min()), int(item.max())
                if low < -shape[axis] or high >= shape[axis]:
                    bad = high if high >= shape[axis] else low
                    raise shape_error(f"index {bad} is out of bounds for axis {axis} with "
                                      f"size {shape[axis]}")
            entries.append(ARRAY)
            arrays.append(item)
            axis += 1
        else:
            entries.append(item)
            axis += 1
    while entries and entries[-1] == FULL:
        entries.pop()
    return tuple(entries), arrays


def _basic_getitem(x, index):
    """A basic index (ints, slices, None, Ellipsis) as the shape family's slice and reshape."""
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
    return reshape(static_slice(x, *zip(*bounds)) if bounds else x, out_shape)


@implements("getitem")
def getitem(x, index):
    """`x[index]` for every numpy index: ints, slices, None, Ellipsis, integer arrays (concrete
    or traced) and concrete boolean masks, with numpy's result shape."""
    shape = aval(x).shape
    if type(index) is int and shape and -shape[0] <= index < shape[0]:
        # x[i], what element-by-element Python loops stage: the equations the general path
        # makes (slice unless the axis has one element, then reshape), without parsing.
        start, rest = index % shape[0], shape[1:]
        if shape[0] != 1:
            x = shape_rules.slice_p.bind(x, starts=(start,) + (0,) * len(rest),
                             stops=(start + 1,) + rest, steps=(1,) * len(shape))
        return shape_rules.reshape_p.bind(x, shape=rest)
    index, arrays = parse_index(shape, index)
    if not arrays:
        try:
            return _basic_getitem(x, index)
        except IndexError as err:
            raise shape_error(str(err)) from None
    return gather_p.bind(x, *arrays, index=index)


@implements(np.take)
def take(a, indices, axis=None, out=None, mode="raise"):
    """`np.take` (mode 'raise', 'wrap' or 'clip'; no out)."""
    if out is not None:
        raise _unsupported("numpy.take(..., out=...)")
    if axis is None:
        a, axis = ravel(a), 0
    shape = aval(a).shape
    axis = normalize_axes(axis, len(shape))[0]
    if type(indices) is not Tracer:
        indices = np.asarray(indices)
    if aval(indices).dtype.kind == "b":
        indices = indices.astype(np.intp)
    if mode == "wrap":
        indices = np.mod(indices, shape[axis])
    elif mode == "clip":
        indices = np.clip(indices, 0, shape[axis] - 1)
    elif mode != "raise":
        raise shape_error(f"clipmode must be one of 'clip', 'raise', or 'wrap', not {mode!r}")
    return getitem(a, (slice(None),) * axis + (indices,))


@implements(np.take_along_axis)
def take_along_axis(arr, indices, axis=-1):
    """`np.take_along_axis`: `arr[i..., indices[i..., j, k...], k...]`."""
    if type(indices) is not Tracer:
        indices = np.asarray(indices)
    if aval(indices).dtype.kind not in "iu":
        raise TypeCheckError("`indices` must be an integer array", user_frame_info())
    if axis is None:
        arr, axis = ravel(arr), 0
    shape = aval(arr).shape
    if ndim(indices) != len(shape):
        raise shape_error("`indices` and `arr` must have the same number of dimensions")
    axis = normalize_axes(axis, len(shape))[0]
    index = tuple(indices if d == axis else
                  np.arange(n).reshape((1,) * d + (n,) + (1,) * (len(shape) - d - 1))
                  for d, n in enumerate(shape))
    return getitem(arr, index)


def index_add(x, index, values):
    """Functional `np.add.at(x, index, values)`: a new array, `x` is unchanged, and values at
    repeated indices accumulate. Works on concrete and traced values, and is differentiable.

    >>> xform.index_add(np.zeros(3), [0, 0, 2], 1.0)    # index 0 twice: added twice
    array([2., 0., 1.])
    """
    shape = aval(x).shape
    index, arrays = parse_index(shape, index)
    try:
        selected, _, _ = index_layout(shape, index, [aval(a).shape for a in arrays])
    except IndexError as err:
        raise shape_error(str(err)) from None
    if type(values) is not Tracer:
        values = np.asarray(values)
    try:
        fits = np.broadcast_shapes(aval(values).shape, selected) == selected
    except ValueError:
        fits = False
    if not fits:
        raise shape_error(f"values of shape {aval(values).shape} do not broadcast to the "
                          f"selected shape {selected}")
    values = broadcast_to(values, selected)
    if aval(values).dtype != aval(x).dtype:
        values = values.astype(aval(x).dtype)
    return x + scatter_add_p.bind(values, *arrays, index=index, shape=shape)


__all__ = ["ARRAY", "FULL", "gather_p", "getitem", "index_add", "index_layout", "numpy_index",
           "parse_index", "scatter_add_p", "take", "take_along_axis"]
