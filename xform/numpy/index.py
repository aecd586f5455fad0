"""numpy's indexing on tracers: `x[index]` with numpy's basic and advanced rules (the index
argument parsed into the `gather` primitive's form; basic indices give views), `x[index] = v`
(the `scatter` primitive), np.take, np.take_along_axis and `index_add` (a functional
np.add.at)."""
import operator

import numpy as np

from xform.errors import ConcretizationError, TypeCheckError, shape_error, unsupported_error
from xform.ir.ad import aval, ndim
from xform.ir.avals import broadcast_shapes
from xform.ir.tracer import Tracer
from xform.numpy.axes import normalize_axes
from xform.numpy.protocol import implements
from xform.numpy.shape import broadcast_to, ravel, reshape
from xform.numpy.views import ViewKind, assign, base_of, link, writable_builder
from xform.rules.index import (ARRAY, FULL, basic_read, gather_p, index_layout,
                                scatter_add_p, scatter_p)
from xform.rules.shape import reshape_p, slice_p
from xform.rules.sized import nonzero_p
from xform.source_info import user_frame_info


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
            return TracedMask(item)
        if item.dtype.kind not in "iu":
            raise TypeCheckError(_VALID, user_frame_info())
        return item
    if isinstance(item, (bool, np.bool_)):
        raise unsupported_error("indexing with a scalar boolean (x[True])")
    if isinstance(item, (int, np.integer)):
        return int(item)
    array = np.asarray(item)
    if array.size == 0 and isinstance(item, (list, tuple)):
        array = array.astype(np.intp)
    if array.dtype.kind == "b" and array.ndim == 0:
        raise unsupported_error("indexing with a scalar boolean (x[True])")
    if array.dtype.kind not in "iub":
        raise TypeCheckError(_VALID, user_frame_info())
    return int(array) if array.ndim == 0 else array


class TracedMask:
    """A traced boolean mask in an index: its positions are staged (np.nonzero), their count
    decided from the staging's values and guarded, as numpy's size is the count."""

    __slots__ = ("mask", "ndim", "shape")

    def __init__(self, mask):
        self.mask, self.ndim, self.shape = mask, mask.ndim, mask.shape

    def positions(self):
        if self.ndim == 0:
            raise unsupported_error("indexing with a traced scalar boolean (x[b])")
        return nonzero_positions(self.mask, "boolean mask indexing x[mask]")


def nonzero_positions(a, what):
    """np.nonzero of traced `a`: one index array per axis, whose length, the number of
    nonzero entries, is decided from the staging's values (a guard) so that each staged path
    has fixed shapes; `what` names the construct in the error of a staging without values."""
    if a.ndim == 0:
        raise shape_error("Calling nonzero on 0d arrays is not allowed. Use "
                          "np.atleast_1d(scalar).nonzero() instead.")
    count = np.sum(a != 0, dtype=np.intp)
    return tuple(nonzero_p.bind(a, count=count.builder.decide(count, "index",
                                                              f"size of {what}")))


def _is_mask(item):
    return (isinstance(item, np.ndarray) and item.dtype.kind == "b") or type(item) is TracedMask


def parse_index(shape, index):
    """numpy's `index` for an array of `shape` as (index param, index arrays); concrete masks
    become their nonzero() arrays and concrete arrays are bounds-checked here.

    >>> from xform.numpy.index import parse_index
    >>> parse_index((3, 4), (slice(1, None), [0, 2]))
    (((1, None, None), 'array'), [array([0, 2])])
    """
    index = _constants_as_values(index)
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
            positions = item.positions() if type(item) is TracedMask else np.nonzero(item)
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
    # trailing full slices are implied, unless an Ellipsis before them would take their axes
    while entries and entries[-1] == FULL and Ellipsis not in entries:
        entries.pop()
    return tuple(entries), arrays


def _select(x, index):
    """`x[index]` and whether numpy would return a view of x (a basic index that is not all
    integers: those give numpy a scalar copy)."""
    shape = aval(x).shape
    if type(index) is int and shape and -shape[0] <= index < shape[0]:
        # x[i], what element-by-element Python loops stage: the equations the general path
        # makes (slice unless the axis has one element, then reshape), without parsing.
        start, rest = index % shape[0], shape[1:]
        if shape[0] != 1:
            x = slice_p.bind(x, starts=(start,) + (0,) * len(rest),
                             stops=(start + 1,) + rest, steps=(1,) * len(shape))
        return reshape_p.bind(x, shape=rest), len(shape) > 1
    index, arrays = parse_index(shape, index)
    if arrays:
        return gather_p.bind(x, *arrays, index=index), False
    try:
        out = basic_read(x, index)
    except IndexError as err:
        raise shape_error(str(err)) from None
    scalar = len(index) == len(shape) and all(type(entry) is int for entry in index)
    return out, not scalar


def _scalar_mask(index):
    """A lone scalar boolean index as a Python bool (a traced one decided from its value and
    guarded, as an `if` is), else None: SciPy's apply_where reads and writes x[cond] and
    x[~cond] of 0-d values."""
    index = _constants_as_values(index)
    if type(index) is Tracer:
        return bool(index) if index.ndim == 0 and index.dtype.kind == "b" else None
    if isinstance(index, (bool, np.bool_)) or (
            isinstance(index, np.ndarray) and index.dtype == bool and index.ndim == 0):
        return bool(index)
    return None


@implements("getitem")
def getitem(x, index):
    """`x[index]` for every numpy index: ints, slices, None, Ellipsis, integer arrays (concrete
    or traced) and concrete boolean masks, with numpy's result shape. A basic index gives a
    view of a traced `x`, as in numpy: writes through it are seen in `x` and back."""
    selects = _scalar_mask(index)
    if selects is not None:
        # a new axis of one element for True, of none for False; a copy, as numpy's
        out, _ = _select(x, None)
        return out if selects else _select(out, slice(0, 0))[0]
    out, view = _select(x, index)
    if view and type(out) is Tracer and out is not x:
        link(out, x, _INDEX_VIEW, index)
    return out


def fit_values(x, selected, values):
    """`values` broadcast to the `selected` shape and cast to x's dtype (ShapeError if it
    does not broadcast)."""
    if type(values) is not Tracer:
        values = np.asarray(values)
    try:
        fits = broadcast_shapes(aval(values).shape, selected) == selected
    except ValueError:
        fits = False
    if not fits:
        raise shape_error(f"values of shape {aval(values).shape} do not broadcast to the "
                          f"selected shape {selected}")
    values = broadcast_to(values, selected)
    if aval(values).dtype != aval(x).dtype:
        values = values.astype(aval(x).dtype)
    return values


def _strip_leading_ones(values, rank):
    """numpy's assignment drops leading length-1 axes of values beyond the target's rank."""
    if type(values) is not Tracer:
        values = np.asarray(values)
    shape = aval(values).shape
    extra = len(shape) - rank
    if extra > 0 and all(n == 1 for n in shape[:extra]):
        return reshape(values, shape[extra:])
    return values


def _constants_as_values(index):
    """An index whose traced items that depend on no input (an array the function made
    from constants: `y[np.array([True, False])]`) are their values, as eager numpy has them."""
    if type(index) is Tracer:
        value = index.builder.constant_value(index)
        return index if value is None else value
    if type(index) is tuple and any(type(item) is Tracer for item in index):
        return tuple(_constants_as_values(item) for item in index)
    return index


def _set_where(x, mask, values, before=0):
    """`x[mask] = values` for a traced boolean `mask` over x's axes from `before` on, as
    np.where when values do not depend on how many entries are True (one value, or one per
    position of the unmasked axes); at the mask's positions otherwise (their count read
    from the staging's values, and guarded)."""
    shape = aval(x).shape
    lead, rest = shape[:before], shape[before + mask.ndim:]
    if mask.shape != shape[before:before + mask.ndim]:
        raise shape_error(f"boolean index of shape {mask.shape} does not match the indexed "
                          f"axes {shape[before:before + mask.ndim]}")
    # numpy's selection: the lead axes, one axis of the True entries, the rest
    values = _strip_leading_ones(values, len(lead) + 1 + len(rest))
    value_shape = aval(values).shape
    if len(value_shape) > len(rest):
        value_shape = (1,) * (len(lead) + 1 + len(rest) - len(value_shape)) + value_shape
        if value_shape[before] != 1:
            if mask.ndim == 0:
                # a 0-d mask selects its entry or nothing (SciPy's multinomial writes
                # p[i, -1] = q[i] so): no values write nothing, where the mask is False
                if value_shape[before] == 0 and not mask:       # (a guard)
                    return x
                raise shape_error(f"shape mismatch: value array of shape {value_shape} "
                                  "could not be broadcast to the entry a 0-d mask selects")
            if before:
                raise ConcretizationError(
                    "x[..., mask] = values with a traced mask needs values that do not depend "
                    "on the number of True entries (one value, or one per unmasked "
                    "position)", user_frame_info(), "use np.where(mask, new_values, x)")
            # one value per True entry: at the mask's positions, whose count the staging's
            # values decide (a guard)
            return set_item(x, nonzero_positions(mask, "x[mask] = values, one per True "
                                                 "entry"), values)
        values = reshape(values, value_shape[:before] + (1,) * mask.ndim +
                         value_shape[before + 1:])
    values = fit_values(x, shape, values)
    return np.where(reshape(mask, (1,) * before + mask.shape + (1,) * len(rest)), values, x)


def _is_traced_mask(item):
    return type(item) is Tracer and item.dtype.kind == "b"


def _set_where_within(x, index, values):
    """`x[index] = values` for an index of one traced boolean mask among basic items (ints,
    slices, Ellipsis, None), as np.where inside the region the index selects with the
    mask's axes taken whole: `x[1, mask] = v`, `x[..., mask] = v`."""
    items = list(index)
    at = next(i for i, item in enumerate(items) if _is_traced_mask(item))
    mask = items[at]
    if any(_is_traced_mask(item) or not (item is None or item is Ellipsis or
                                         isinstance(item, (slice, int, np.integer)))
           for i, item in enumerate(items) if i != at):
        raise unsupported_error("an index mixing a traced boolean mask with arrays or other "
                                "masks, in an assignment")
    consumed = sum(mask.ndim if i == at else 1 for i, item in enumerate(items)
                   if item is not None and item is not Ellipsis)
    ellipsis = next((i for i, item in enumerate(items) if item is Ellipsis), None)
    if ellipsis is not None:        # (`in` would compare the traced mask with ==)
        items[ellipsis:ellipsis + 1] = [slice(None)] * (aval(x).ndim - consumed)
        at = next(i for i, item in enumerate(items) if _is_traced_mask(item))
    items[at:at + 1] = [slice(None)] * mask.ndim
    region_index = tuple(items)
    region = _select(x, region_index)[0]
    # the region keeps every slice and None axis: the mask's axes follow those before it
    before = sum(1 for item in items[:at] if item is None or isinstance(item, slice))
    return set_item(x, region_index, _set_where(region, mask, values, before))


def set_item(x, index, values):
    """Functional `x[index] = values`: a new array, with numpy's assignment semantics (values
    broadcast to the selection and cast to x's dtype; of repeated indices the last wins)."""
    shape = aval(x).shape
    index = _constants_as_values(index)
    if _is_traced_mask(index):
        return _set_where(x, index, values)
    selects = _scalar_mask(index)
    if selects is not None:
        selected = (int(selects),) + shape
        values = fit_values(x, selected, _strip_leading_ones(values, len(selected)))
        return values.reshape(shape) if selects else x
    if isinstance(index, tuple) and any(_is_traced_mask(item) for item in index):
        return _set_where_within(x, index, values)
    index, arrays = parse_index(shape, index)
    try:
        selected, _, _ = index_layout(shape, index, [aval(a).shape for a in arrays])
    except IndexError as err:
        raise shape_error(str(err)) from None
    values = fit_values(x, selected, _strip_leading_ones(values, len(selected)))
    return scatter_p.bind(x, values, *arrays, index=index)


_INDEX_VIEW = ViewKind(lambda base, index: _select(base, index)[0],
                       lambda base, new, index: set_item(base, index, new),
                       lambda array, index: array[index])


@implements("setitem")
def setitem(x, index, values):
    """`x[index] = values` on a traced array (Tracer.__setitem__): x is rebound to its new
    value, and so are the arrays it views and their views (xform.numpy.views)."""
    writable_builder(x)
    written = base_of(values) if type(values) is Tracer else None
    if (written is not None and written[0] is x and written[1] is _INDEX_VIEW
            and written[2] is index):
        # `x[i] += v`: the in-place add wrote through the view x[i] already
        return
    assign(x, set_item(x, index, values))


@implements(np.take)
def take(a, indices, axis=None, out=None, mode="raise"):
    """`np.take` (mode 'raise', 'wrap' or 'clip'; no out)."""
    if out is not None:
        raise unsupported_error("numpy.take(..., out=...)")
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
    return _select(a, (slice(None),) * axis + (indices,))[0]


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
    return _select(arr, index)[0]


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
    values = fit_values(x, selected, values)
    return x + scatter_add_p.bind(values, *arrays, index=index, shape=shape)

