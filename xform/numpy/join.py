"""numpy's joining and splitting functions on tracers: concatenate, stack, hstack, vstack,
dstack, column_stack, array_split, split, hsplit, vsplit, dsplit, unstack."""
import numpy as np

from xform.errors import TypeCheckError, shape_error, unsupported_error
from xform.ir.ad import aval
from xform.numpy.axes import normalize_axis
from xform.numpy.protocol import implements
from xform.numpy.shape import (as_array, atleast_1d, atleast_2d, atleast_3d, expand_dims, ravel,
                               squeeze)
from xform.rules.shape import concatenate_p, split_p, static_slice
from xform.source_info import user_frame_info


@implements(np.concatenate)
def concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    """`np.concatenate` (no out=); axis=None flattens every array first."""
    if out is not None:
        raise unsupported_error("numpy.concatenate(..., out=...)")
    arrays = [as_array(x) for x in arrays]
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
        raise shape_error("need at least one array to concatenate")
    axis = normalize_axis(axis, max(len(aval(arrays[0]).shape), 1))
    if len(arrays) == 1 and aval(arrays[0]).shape:
        return arrays[0]
    return concatenate_p.bind(*arrays, axis=axis)


@implements(np.stack)
def stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    arrays = [as_array(x) for x in arrays]
    if not arrays:
        raise shape_error("need at least one array to stack")
    if len({aval(x).shape for x in arrays}) != 1:
        raise shape_error("all input arrays must have the same shape")
    axis = normalize_axis(axis, len(aval(arrays[0]).shape) + 1)
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
    arrays = [as_array(x) for x in tup]
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
    axis = normalize_axis(axis, len(shape))
    if not shape:
        raise shape_error("cannot split a 0-d array")
    n = shape[axis]
    try:
        indices = [int(i) for i in indices_or_sections]
    except TypeError:
        sections = int(indices_or_sections)
        if sections <= 0:
            raise shape_error("number sections must be larger than 0.") from None
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
        n = shape[normalize_axis(axis, len(shape))] if shape else 0
        sections = int(indices_or_sections)
        if sections > 0 and n % sections:
            raise shape_error("array split does not result in an equal division") from None
    return array_split(ary, indices_or_sections, axis)


@implements(np.hsplit)
def hsplit(ary, indices_or_sections):
    ndim = len(aval(ary).shape)
    if ndim == 0:
        raise shape_error("hsplit only works on arrays of 1 or more dimensions")
    return split(ary, indices_or_sections, 1 if ndim > 1 else 0)


@implements(np.vsplit)
def vsplit(ary, indices_or_sections):
    if len(aval(ary).shape) < 2:
        raise shape_error("vsplit only works on arrays of 2 or more dimensions")
    return split(ary, indices_or_sections, 0)


@implements(np.dsplit)
def dsplit(ary, indices_or_sections):
    if len(aval(ary).shape) < 3:
        raise shape_error("dsplit only works on arrays of 3 or more dimensions")
    return split(ary, indices_or_sections, 2)


@implements(np.unstack)
def unstack(x, /, *, axis=0):
    shape = aval(x).shape
    if not shape:
        raise shape_error("Input array must be at least 1-d.")
    axis = normalize_axis(axis, len(shape))
    pieces = split_p.bind(x, sizes=(1,) * shape[axis], axis=axis) if shape[axis] > 1 else [x]
    return tuple(squeeze(piece, axis) for piece in pieces)

