"""Arrays built from Python containers of traced values: `np.array([x, 2 * x])`,
`np.asarray([[a, b], [c, d]])`, `np.r_[...]`, `np.c_[...]`, `np.block`, `np.full(shape, x)`,
and lists mixing tracers and constants in `np.stack`/`np.append`. numpy converts such
containers itself, calling `Tracer.__array__`; these stand-ins (xform/numpy/stand_ins.py) stage
them instead, as stacks, concatenations and broadcasts.
"""
from __future__ import annotations

import functools

import numpy as np

from xform.errors import UnsupportedError
from xform.ir.concrete import concretization
from xform.ir.tracer import Tracer
from xform.source_info import user_frame_info
from xform.numpy.join import concatenate, stack
from xform.numpy.stand_ins import contains_tracer, define_group, stand_in
from xform.numpy.protocol import implements
from xform.numpy.shape import copy


def staged_array(obj):
    """`obj` as an array: a Tracer as itself, a (nested) list or tuple holding tracers as
    their stack, anything else as `np.asarray(obj)`."""
    if type(obj) is Tracer:
        return obj
    if type(obj) in (list, tuple) and contains_tracer(obj):
        return stack([staged_array(item) for item in obj])
    return np.asarray(obj)


def _with_dtype(x, dtype):
    return x if dtype is None or x.dtype == np.dtype(dtype) else x.astype(dtype)


def _with_ndmin(x, ndmin):
    missing = ndmin - x.ndim
    return x.reshape((1,) * missing + x.shape) if missing > 0 else x


def _array(obj, dtype=None, *, copy=True, order="K", subok=False, ndmin=0, like=None):
    x = _with_ndmin(_with_dtype(staged_array(obj), dtype), ndmin)
    # np.array copies: a later in-place write must not reach `obj`
    return _copy_if(x, obj, copy)


def _copy_if(x, obj, wanted):
    # SciPy's array-API layer passes numpy's _CopyMode enum, which refuses bool()
    wanted = wanted == np._CopyMode.ALWAYS if isinstance(wanted, np._CopyMode) else wanted
    return copy(x) if wanted and x is obj else x


def _asarray(a, dtype=None, order=None, *, device=None, copy=None, like=None):
    x = _with_dtype(staged_array(a), dtype)
    return _copy_if(x, a, copy)


def _ascontiguousarray(a, dtype=None, *, like=None):
    return _with_ndmin(_with_dtype(staged_array(a), dtype), 1)


def _full(shape, fill_value, dtype=None, order="C", *, device=None, like=None):
    fill = staged_array(fill_value)
    dtype = fill.dtype if dtype is None else np.dtype(dtype)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    # a copy, not the broadcast view, so that writes into the result stay in it
    return copy(np.broadcast_to(_with_dtype(fill, dtype), shape))


def _axis_concatenate(self, key):
    """np.r_[...] and np.c_[...] (numpy's AxisConcatenator) with traced items."""
    key = key if isinstance(key, tuple) else (key,)
    if self.matrix or any(isinstance(item, str) for item in key):
        raise UnsupportedError("numpy.r_ / numpy.c_ with a string directive is not supported "
                               "on traced values", user_frame_info(),
                               "join the pieces with np.concatenate or np.stack")
    parts = []
    for item in key:
        if isinstance(item, slice):
            parts.append(np.r_[item])   # concrete: an arange or linspace
            continue
        part = staged_array(item)
        given_ndim = part.ndim
        part = _with_ndmin(part, self.ndmin)
        if self.trans1d != -1 and given_ndim < self.ndmin:
            # numpy moves the item's own axes to position trans1d (np.c_: 1-d items -> columns)
            axes = list(range(self.ndmin))
            k1, k2 = self.trans1d % self.ndmin, self.ndmin - given_ndim
            part = part.transpose(axes[:k1] + axes[k2:] + axes[k1:k2])
        parts.append(part)
    return concatenate(parts, axis=self.axis)


def _staged_items(fn):
    """numpy function `fn(arrays, ...)` over a list whose nested lists hold tracers."""
    def with_items_staged(arrays, *args, **kwargs):
        return fn([staged_array(item) for item in arrays], *args, **kwargs)
    return with_items_staged


@implements(np.block)
def block(arrays):
    """np.block: nested lists of arrays joined along the last axes, innermost list last."""
    def depth(x):
        return 1 + depth(x[0]) if type(x) is list and x else 0

    def join(x, level, total):
        if type(x) is not list:
            x = staged_array(x)
            return x.reshape((1,) * (total - x.ndim) + x.shape) if x.ndim < total else x
        return concatenate([join(item, level + 1, total) for item in x], axis=level - total)

    levels = depth(arrays)
    leaves_ndim = max(_leaf_ndims(arrays), default=0)
    total = max(levels, leaves_ndim)
    return join(arrays, total - levels, total) if levels else staged_array(arrays)


def _leaf_ndims(x):
    if type(x) is list:
        for item in x:
            yield from _leaf_ndims(item)
    else:
        yield np.ndim(x)


# The stand-ins below, a group a staging does without when its code cannot reach them
# (xform.runtime.effects.Watch): code that spells none of their names, nor the name of a numpy
# callable that runs numpy's own Python on its arguments (np.polynomial's functions call
# np.array; np.vectorize, np.ma, ...).
CONSTRUCTORS_GROUP = "numpy constructors"
_CONSTRUCTOR_NAMES = frozenset({
    "array", "asarray", "asanyarray", "ascontiguousarray", "asfortranarray", "full", "append",
    "r_", "c_", "stack", "hstack", "vstack", "dstack", "column_stack", "row_stack", "zeros",
    "ones", "empty", "arange", "eye", "identity", "tri"})


def _passes_to_xform(value) -> bool:
    """Whether calling (or reading) numpy's `value` with traced values reaches xform without
    running numpy's own Python: a ufunc, a function numpy dispatches (`__array_function__`),
    a scalar type or dtype, a constant, the linalg and fft modules of such functions."""
    return (isinstance(value, np.ufunc) or type(value).__name__ == "_ArrayFunctionDispatcher"
            or (isinstance(value, type) and (issubclass(value, np.generic) or value is np.dtype))
            or isinstance(value, (int, float, complex, str, bytes, type(None)))
            or value is np.linalg or value is np.fft)


@functools.cache
def _reaching_names() -> frozenset:
    # numpy's submodules load on first use (np.polynomial): by name, not from its namespace
    names = set(_CONSTRUCTOR_NAMES) | {"polynomial", "ma", "char", "rec", "strings", "lib",
                                       "testing", "ctypeslib", "matlib", "emath", "core"}
    names.update(getattr(np, "__numpy_submodules__", ()))
    names -= {"linalg", "fft"}
    for namespace in (np, np.linalg, np.fft):
        names.update(name for name, value in vars(namespace).items()
                     if not _passes_to_xform(value))
    return frozenset(names)


define_group(CONSTRUCTORS_GROUP, lambda names: not _reaching_names().isdisjoint(names))

for _name, _replacement in [("array", _array), ("asarray", _asarray),
                            ("asanyarray", _asarray), ("ascontiguousarray", _ascontiguousarray),
                            ("asfortranarray", _ascontiguousarray)]:
    stand_in((np, _name), _replacement, group=CONSTRUCTORS_GROUP)
stand_in(np.full, _full, group=CONSTRUCTORS_GROUP)
stand_in(np.append, lambda arr, values, axis=None: np.append(staged_array(arr),
                                                            staged_array(values), axis),
         group=CONSTRUCTORS_GROUP)
stand_in(type(np.r_).__mro__[1].__getitem__, _axis_concatenate, group=CONSTRUCTORS_GROUP)
for _function in (np.stack, np.hstack, np.vstack, np.dstack, np.column_stack):
    stand_in(_function, _staged_items(_function), group=CONSTRUCTORS_GROUP)


def _needs_a_concrete_shape(name):
    def refuse(*args, **kwargs):
        raise concretization(f"numpy.{name}")
    return refuse


# numpy reads their shape with __index__ and replaces our error by its own TypeError
for _name in ("zeros", "ones", "empty", "arange", "eye", "identity", "tri"):
    stand_in((np, _name), _needs_a_concrete_shape(_name), group=CONSTRUCTORS_GROUP)
