"""numpy's rearranging functions on tracers: rot90, rollaxis, broadcast_arrays, append, resize,
insert/delete (static indices), compress/extract (concrete conditions), choose, diagflat,
apply_along_axis/apply_over_axes, partition/argpartition, put_along_axis (functional: a traced
array is immutable), nonzero/flatnonzero/argwhere/trim_zeros (data-dependent sizes, guarded)."""
import numpy as np

from xform.errors import TypeCheckError, shape_error, unsupported_error
from xform.ir.ad import aval, ndim
from xform.ir.builder import call_back
from xform.ir.tracer import Tracer
from xform.numpy.axes import normalize_axis
from xform.numpy.construct import CONSTRUCTORS_GROUP
from xform.numpy.index import index_add, nonzero_positions, take, take_along_axis
from xform.numpy.protocol import implements, with_constants_read
from xform.numpy.shape import as_array, broadcast_to, flip, ravel, reshape, transpose
from xform.numpy.stand_ins import define_group, stand_in
from xform.rules.linalg import sort_gather_p
from xform.rules.search import argpartition_p
from xform.source_info import user_frame_info


@implements(np.rot90)
def rot90(m, k=1, axes=(0, 1)):
    """`np.rot90`: `k` quarter turns from the first axis towards the second, as flips and a
    transpose."""
    m = as_array(m)
    rank = ndim(m)
    axes = tuple(axes)
    if len(axes) != 2:
        raise shape_error("len(axes) must be 2.")
    if rank < 2:
        raise shape_error(f"Axes must be different and within range: got {axes} for an array "
                          f"of dimension {rank}")
    first, second = normalize_axis(axes[0], rank), normalize_axis(axes[1], rank)
    if first == second:
        raise shape_error("Axes must be different.")
    k %= 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, first), second)
    order = list(range(rank))
    order[first], order[second] = order[second], order[first]
    if k == 1:
        return transpose(flip(m, second), order)
    return flip(transpose(m, order), second)


@implements(np.rollaxis)
def rollaxis(a, axis, start=0):
    """`np.rollaxis`: `axis` moved to lie before position `start`."""
    rank = ndim(a)
    axis = normalize_axis(axis, rank)
    if not -rank <= start <= rank:
        raise shape_error(f"'start' arg requires {-rank} <= start < {rank + 1}, but {start} "
                          "was passed in")
    if start < 0:
        start += rank
    if axis < start:
        start -= 1
    if axis == start:
        return a
    order = [i for i in range(rank) if i != axis]
    order.insert(start, axis)
    return transpose(a, order)


@implements(np.broadcast_arrays)
def broadcast_arrays(*args, subok=False):
    """`np.broadcast_arrays`: every argument broadcast to their common shape (a tuple)."""
    args = [as_array(x) for x in args]
    shape = np.broadcast_shapes(*[aval(x).shape for x in args])
    return tuple(broadcast_to(x, shape) for x in args)


@implements(np.append)
def append(arr, values, axis=None):
    """`np.append` of arrays: flattened and joined, or joined along `axis`."""
    arr, values = as_array(arr), as_array(values)
    if axis is None:
        return np.concatenate([ravel(arr), ravel(values)])
    return np.concatenate([arr, values], axis)


def _static_indices(obj, name):
    obj = with_constants_read(obj)
    if type(obj) is Tracer:
        raise TypeCheckError(f"numpy.{name} needs concrete indices (the result's shape "
                             "depends on them); this index is traced", user_frame_info())
    return obj


@implements(np.insert)
def insert(arr, obj, values, axis=None):
    """`np.insert` with concrete indices: numpy's own insert run on element numbers gives
    which element of `arr` or `values` lands where, then one gather (so `values` broadcast
    as numpy broadcasts them, and repeated values get summed cotangents)."""
    obj = _static_indices(obj, "insert")
    arr = as_array(arr)
    values = as_array(values).astype(aval(arr).dtype)
    size = aval(arr).size
    numbers = np.arange(size).reshape(aval(arr).shape)
    value_numbers = size + np.arange(aval(values).size).reshape(aval(values).shape)
    layout = np.insert(numbers, obj, value_numbers, axis=axis)
    return take(np.concatenate([ravel(arr), ravel(values)]), layout)


@implements(np.delete)
def delete(arr, obj, axis=None):
    """`np.delete` with concrete indices (a slice, ints or a boolean mask), as one gather."""
    obj = _static_indices(obj, "delete")
    arr = as_array(arr)
    numbers = np.arange(aval(arr).size).reshape(aval(arr).shape)
    return take(ravel(arr), np.delete(numbers, obj, axis=axis))


@implements(np.resize)
def resize(a, new_shape):
    """`np.resize`: the flattened array repeated (or cut) to fill `new_shape`."""
    a = ravel(as_array(a))
    new_shape = tuple(new_shape) if isinstance(new_shape, (tuple, list)) else (new_shape,)
    new_shape = tuple(int(d) for d in new_shape)
    if any(d < 0 for d in new_shape):
        raise shape_error("all elements of `new_shape` must be non-negative")
    size, new_size = aval(a).size, int(np.prod(new_shape, dtype=np.int64))
    if size == 0 or new_size == 0:
        return np.zeros(new_shape, aval(a).dtype)
    repeats = -(-new_size // size)
    return reshape(np.concatenate([a] * repeats)[:new_size], new_shape)


def _concrete_condition(condition, name):
    """`condition`'s flat positions where it holds: concrete, or traced with the count
    decided from the staging's values (guarded)."""
    if type(condition) is Tracer:
        return flatnonzero(condition)
    return np.flatnonzero(np.asarray(condition))


@implements(np.compress)
def compress(condition, a, axis=None, out=None):
    """`np.compress`: the selected slices, one gather (a traced condition's count is
    decided from the staging's values, and guarded)."""
    if out is not None:
        raise unsupported_error("numpy.compress(..., out=...)")
    a = as_array(a)
    if axis is None:
        a, axis = ravel(a), 0
    axis = normalize_axis(axis, ndim(a))
    if ndim(condition) != 1:
        raise shape_error("condition must be a 1-d array")
    if aval(condition).size > aval(a).shape[axis]:
        raise shape_error(f"condition of length {aval(condition).size} is longer than axis "
                          f"{axis} of length {aval(a).shape[axis]}")
    return take(a, _concrete_condition(condition, "compress"), axis=axis)


@implements(np.extract)
def extract(condition, arr):
    """`np.extract`: the flattened elements where the condition holds."""
    return take(ravel(as_array(arr)), _concrete_condition(condition, "extract"))


@implements(np.trim_zeros)
def trim_zeros(filt, trim="fb", axis=None):
    """`np.trim_zeros`: `filt` cut to the box outside which it is zero, on the sides `trim`
    names; where the box starts and stops is decided from the staging's values (guards)."""
    filt = as_array(filt)
    trim = trim.lower()
    if trim not in {"fb", "bf", "f", "b"}:
        raise shape_error(f"unexpected character(s) in `trim`: {trim!r}")
    rank = ndim(filt)
    axes = range(rank) if axis is None else [normalize_axis(a, rank) for a in np.atleast_1d(axis)]
    positions = nonzero_positions(filt, "numpy.trim_zeros")
    slices = []
    for ax, where in enumerate(positions):
        if ax not in axes:
            slices.append(slice(None))
        elif aval(where).size == 0:
            slices.append(slice(0, 0))      # all zero: empty, as numpy's
        else:
            first, last = np.min(where), np.max(where)
            start = first.builder.decide(first, "index", "numpy.trim_zeros")
            stop = last.builder.decide(last, "index", "numpy.trim_zeros") + 1
            slices.append(slice(start if "f" in trim else None, stop if "b" in trim else None))
    return filt[tuple(slices)]


@implements(np.nonzero)
def nonzero(a):
    """`np.nonzero`: one index array per axis; the count is decided from the staging's
    values and guarded, so each path has fixed shapes."""
    return nonzero_positions(as_array(a), "numpy.nonzero")


@implements(np.flatnonzero)
def flatnonzero(a):
    """`np.flatnonzero`: the flat positions of the nonzero entries (count guarded)."""
    return nonzero(ravel(as_array(a)))[0]


@implements(np.argwhere)
def argwhere(a):
    """`np.argwhere`: the positions of the nonzero entries, one row each (count guarded)."""
    a = as_array(a)
    if ndim(a) == 0:
        return reshape(nonzero(reshape(a, (1,)))[0], (-1, 1))[:, :0]
    return np.stack(nonzero(a), axis=1)


def _indices_from(numpy_function, name):
    def indices_from(arr, k=0):
        if ndim(arr) != 2:
            raise shape_error("input array must be 2-d")
        return numpy_function(*aval(arr).shape, k)
    indices_from.__name__ = name
    indices_from.__doc__ = f"`np.{name}`: the indices of a traced array's shape (concrete)."
    return indices_from


implements(np.triu_indices_from)(_indices_from(
    lambda n, m, k: np.triu_indices(n, k, m), "triu_indices_from"))
implements(np.tril_indices_from)(_indices_from(
    lambda n, m, k: np.tril_indices(n, k, m), "tril_indices_from"))


@implements(np.diag_indices_from)
def diag_indices_from(arr):
    """`np.diag_indices_from`: the diagonal's indices of a traced array's shape (concrete)."""
    shape = aval(arr).shape
    if len(shape) < 2 or len(set(shape)) != 1:
        raise shape_error("input array must be at least 2-d and of equal length in every "
                          "dimension")
    return np.diag_indices(shape[0], len(shape))


@implements(np.lib.stride_tricks.sliding_window_view)
def sliding_window_view(x, window_shape, axis=None, *, subok=False, writeable=False):
    """`sliding_window_view`: a gather of `x` at its windows' positions, which numpy's own
    view of an array of positions gives (a read of every window, not a view to write)."""
    if writeable:
        raise unsupported_error("sliding_window_view(..., writeable=True) of a traced array")
    x = as_array(x)
    positions = np.arange(aval(x).size).reshape(aval(x).shape)
    return take(x, np.lib.stride_tricks.sliding_window_view(positions, window_shape, axis))


@implements(np.choose)
def choose(a, choices, out=None, mode="raise"):
    """`np.choose`: `choices[a[i]][i]`, all broadcast together (modes raise, wrap, clip;
    traced indices out of range under 'raise' are not checked)."""
    if out is not None:
        raise unsupported_error("numpy.choose(..., out=...)")
    index = as_array(a)
    if aval(index).dtype.kind not in "iub":
        raise TypeCheckError("Cannot cast array data to int64 according to the rule 'safe'",
                             user_frame_info())
    choices = broadcast_arrays(index, *choices)[1:]
    n = len(choices)
    if mode == "wrap":
        index = np.mod(index, n)
    elif mode == "clip":
        index = np.clip(index, 0, n - 1)
    elif mode != "raise":
        raise shape_error(f"clipmode must be one of 'clip', 'raise', or 'wrap' (got {mode!r})")
    elif type(index) is not Tracer and np.any((index < 0) | (index >= n)):
        raise shape_error("invalid entry in choice array")
    stacked = np.stack(choices)
    index = broadcast_to(index.astype(np.intp), aval(stacked).shape[1:])
    return take_along_axis(stacked, reshape(index, (1,) + aval(index).shape), 0)[0]


@implements(np.diagflat)
def diagflat(v, k=0):
    """`np.diagflat`: the flattened input on the k-th diagonal of a square matrix."""
    return np.diag(ravel(as_array(v)), k)


@implements(np.apply_along_axis)
def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """`np.apply_along_axis`: `func1d` on each 1-d slice along `axis`, as numpy runs it (one
    call per slice, so one staged copy of `func1d` per slice), results stacked in place of
    the axis."""
    arr = as_array(arr)
    rank = ndim(arr)
    axis = normalize_axis(axis, rank)
    moved = transpose(arr, [d for d in range(rank) if d != axis] + [axis])
    outer = aval(moved).shape[:-1]
    if 0 in outer:
        raise shape_error("Cannot apply_along_axis when any iteration dimensions are 0")
    results = [as_array(call_back(func1d, moved[index], *args, **kwargs))
               for index in np.ndindex(outer)]
    inner = aval(results[0]).shape
    stacked = reshape(np.stack(results), outer + inner)
    # numpy puts the function's output axes where `axis` was
    order = list(range(len(outer)))
    return transpose(stacked, order[:axis] + [len(outer) + i for i in range(len(inner))]
                     + order[axis:])


def _vectorized_call(vectorized, *args, **kwargs):
    """`np.vectorize(pyfunc)(*args)` on traced values: `pyfunc` on each element of the
    broadcast arguments, as numpy runs it (an element is a 0-d traced value, so a Python `if`
    in `pyfunc` is answered from the call's values), the results stacked; their dtype is
    `otypes` or, as numpy's, the first result's."""
    if vectorized.signature is not None:
        raise unsupported_error("numpy.vectorize(..., signature=...) of traced values")
    names = list(kwargs)
    values = list(args) + [kwargs[name] for name in names]
    keys = list(range(len(args))) + names
    mapped = [i for i, key in enumerate(keys) if key not in vectorized.excluded]
    arrays = np.broadcast_arrays(*[as_array(values[i]) for i in mapped])
    shape = aval(arrays[0]).shape if arrays else ()
    if 0 in shape:
        raise shape_error("cannot call `vectorize` on size 0 inputs unless `otypes` is set")
    results = []
    for index in np.ndindex(shape):
        for i, array in zip(mapped, arrays):
            values[i] = array[index]
        results.append(call_back(vectorized.pyfunc, *values[:len(args)],
                                 **dict(zip(names, values[len(args):]))))
    single = not isinstance(results[0], tuple)
    columns = [results] if single else list(zip(*results))
    outs = []
    for k, column in enumerate(columns):
        column = [as_array(value) for value in column]
        dtype = vectorized.otypes[k] if vectorized.otypes else aval(column[0]).dtype
        outs.append(reshape(np.stack(column), shape).astype(dtype))
    return outs[0] if single else tuple(outs)


# (in the constructors' group: a code that spells `vectorize` reaches it)
stand_in(np.vectorize.__call__, _vectorized_call, group=CONSTRUCTORS_GROUP)


@implements("object ufunc")
def object_ufunc(ufunc, inputs):
    """A ufunc of Python objects (`np.frompyfunc(f, nin, nout)`) called on traced values, as
    np.vectorize is: numpy runs `f` on each element of the broadcast inputs, here 0-d traced
    values held by object arrays (numpy does not dispatch on those), and the results are
    stacked in the inputs' shape, of their own dtype (numpy's would be object)."""
    arrays = np.broadcast_arrays(*[as_array(x) for x in inputs])
    shape = aval(arrays[0]).shape
    if 0 in shape:
        raise shape_error(f"{ufunc.__name__} of an empty traced array: the results' dtype "
                          "would be object")
    holders = []
    for array in arrays:
        holder = np.empty(shape, object)
        for index in np.ndindex(shape):
            holder[index] = array[index]
        holders.append(holder)
    results = call_back(ufunc, *holders)
    results = results if ufunc.nout > 1 else (results,)
    outs = [reshape(np.stack([as_array(value) for value in np.ravel(np.asarray(result,
                                                                               object))]),
                    shape) for result in results]
    return tuple(outs) if ufunc.nout > 1 else outs[0]


@implements(np.apply_over_axes)
def apply_over_axes(func, a, axes):
    """`np.apply_over_axes`: `func(a, axis)` for each axis in turn, keeping the dimensions."""
    value = as_array(a)
    rank = ndim(value)
    for axis in (axes,) if np.ndim(axes) == 0 else axes:
        axis = rank + axis if axis < 0 else axis
        result = as_array(call_back(func, value, axis))
        if ndim(result) != ndim(value):
            result = np.expand_dims(result, axis)
            if ndim(result) != ndim(value):
                raise shape_error("function is not returning an array of the correct shape")
        value = result
    return value


# numpy's own apply_along_axis, reached on a concrete array, puts the function's traced
# results into an array of its own (a filter kernel the function closes over): while staging,
# xform's runs instead on every array, and gives numpy's results on concrete ones
define_group("numpy.apply_along_axis")     # reached by its name
stand_in(np.apply_along_axis, apply_along_axis, when=lambda args, kwargs: True,
         group="numpy.apply_along_axis")


def _kth(kth, n):
    kth = np.atleast_1d(np.asarray(_static_indices(kth, "partition")))
    if kth.dtype.kind not in "iu":
        raise TypeCheckError("Partition index must be integer", user_frame_info())
    if np.any((kth < -n) | (kth >= n)):
        raise shape_error(f"kth(={int(kth.max())}) out of bounds ({n})")
    return tuple(sorted(int(k) % n for k in kth))


def _argpartition(a, kth, axis, name):
    a = as_array(a)
    if axis is None:
        a, axis = ravel(a), 0
    if ndim(a) == 0:
        raise shape_error(f"{name}: cannot partition a 0-d array")
    axis = normalize_axis(axis, ndim(a))
    return a, argpartition_p.bind(a, kth=_kth(kth, aval(a).shape[axis]), axis=axis), axis


@implements(np.argpartition)
def argpartition(a, kth, axis=-1, kind="introselect", order=None):
    """`np.argpartition` (concrete `kth`): integer result, zero derivative."""
    return _argpartition(a, kth, axis, "argpartition")[1]


@implements(np.partition)
def partition(a, kth, axis=-1, kind="introselect", order=None):
    """`np.partition` (concrete `kth`): numpy's arrangement exactly (taken with numpy's own
    argpartition, which moves elements as partition does); differentiable through the
    taken values."""
    a, index, axis = _argpartition(a, kth, axis, "partition")
    return sort_gather_p.bind(a, index, axis=axis)


def put_along_axis(arr, indices, values, axis):
    """numpy's `put_along_axis`, functionally: a new array with `values` written at
    `indices` along `axis` (`arr` is unchanged); with repeated indices the last write wins
    when the indices are concrete (as in numpy), and the written values add up when they are
    traced. Differentiable in `arr` and `values`.

    >>> xform.numpy.put_along_axis(np.zeros((2, 3)), np.array([[0], [2]]), 5.0, axis=1)
    array([[5., 0., 0.],
           [0., 0., 5.]])
    """
    arr = as_array(arr)
    indices = as_array(indices)
    if axis is None:
        if ndim(indices) != 1:
            raise shape_error("when axis=None, `indices` must have a single dimension.")
        arr_shape = aval(arr).shape
        flat = put_along_axis(ravel(arr), ravel(indices), ravel(as_array(values)), 0)
        return reshape(flat, arr_shape)
    if aval(indices).dtype.kind not in "iu":
        raise TypeCheckError("`indices` must be an integer array", user_frame_info())
    shape = aval(arr).shape
    if ndim(indices) != len(shape):
        raise shape_error("`indices` and `arr` must have the same number of dimensions")
    axis = normalize_axis(axis, len(shape))
    n = shape[axis]
    index_shape = tuple(aval(indices).shape[d] if d == axis else shape[d]
                        for d in range(len(shape)))
    indices = broadcast_to(indices, index_shape)
    values = broadcast_to(as_array(values).astype(aval(arr).dtype), index_shape)
    where = _along(indices, axis, shape)
    if type(indices) is Tracer:
        written = index_add(np.zeros(shape, np.intp), where, 1) > 0
    else:
        written = _written_mask(indices, axis, shape)
        # numpy's order of writes: of repeated positions the last wins
        flat = np.ravel_multi_index(tuple(np.broadcast_to(np.mod(w, n) if d == axis else w,
                                                          index_shape)
                                          for d, w in enumerate(where)), shape)
        _, from_end = np.unique(flat.ravel()[::-1], return_index=True)
        last = np.zeros(flat.size, bool)
        last[flat.size - 1 - from_end] = True
        values = np.where(last.reshape(index_shape), values, np.zeros((), aval(arr).dtype))
    kept = np.where(written, np.zeros((), aval(arr).dtype), arr)
    return index_add(kept, where, values)


def _along(indices, axis, shape):
    """The index tuple of take_along_axis/put_along_axis for `indices` along `axis`."""
    return tuple(indices if d == axis else
                 np.arange(n).reshape((1,) * d + (n,) + (1,) * (len(shape) - d - 1))
                 for d, n in enumerate(shape))


def _written_mask(indices, axis, shape):
    mask = np.zeros(shape, bool)
    np.put_along_axis(mask, indices, True, axis)
    return mask


__all__ = ["put_along_axis"]
