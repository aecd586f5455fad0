"""The values transforms pass to rules: symbolic zeros (`Zero`), linear inputs of transpose
rules (`Undefined`), the unmapped batch dimension (`NOT_MAPPED`), and their helpers."""
from __future__ import annotations

import attrs
import numpy as np

from xform.ir.avals import (SCALAR_AVALS, ShapedArray, array_aval, aval_of, float0,
                             is_differentiable, shaped_array)
from xform.ir.tracer import Tracer

NOT_MAPPED = None  # batch dimension of an argument that is the same for every example


@attrs.frozen(eq=False)
class Zero:
    """A symbolic zero tangent/cotangent of `aval`: never materialised unless asked to."""

    aval: ShapedArray


@attrs.frozen(eq=False)
class Undefined:
    """A linear input of a transpose rule: its value is unknown, only its cotangent is wanted."""

    aval: ShapedArray


def aval(value) -> ShapedArray:
    """The abstract value of a tracer, a symbolic zero, an undefined linear input or a
    concrete value. (Rules ask several times per equation: the common kinds come first.)"""
    kind = type(value)
    if kind is Tracer or kind is Zero or kind is Undefined:
        return value.aval
    if kind is np.ndarray:
        return array_aval(value)
    found = SCALAR_AVALS.get(kind)
    if found is not None:
        return found
    if isinstance(value, (Zero, Undefined)):
        return value.aval
    return aval_of(value)


def ndim(value) -> int:
    return len(aval(value).shape)


def broadcast_scalar(value, shape: tuple):
    """`np.broadcast_to(value, shape)` of a concrete 0-d `value` (a numpy scalar or a 0-d
    array): the same read-only view with zero strides, made by the ndarray constructor.
    np.broadcast_to's Python-level checks cost several times that, and a first call's
    reverse mode broadcasts every full reduction's cotangent (a sum's)."""
    if value.dtype.kind not in "biufc":     # (no buffer to view: objects, float0)
        return np.broadcast_to(value, shape)
    view = np.ndarray(shape, value.dtype, buffer=value, strides=(0,) * len(shape))
    view.flags.writeable = False
    return view


def zeros(aval_: ShapedArray):
    """A concrete zero array of `aval_` that costs no memory (a broadcast view)."""
    dtype = aval_.dtype if aval_.dtype != float0 else float0
    if not aval_.shape:
        return np.zeros((), dtype)[()] if dtype != float0 else np.zeros((), float0)
    return broadcast_scalar(np.zeros((), dtype), aval_.shape)


def instantiate(value):
    return zeros(value.aval) if type(value) is Zero else value


def zero_tangent(aval_: ShapedArray) -> Zero:
    return Zero(shaped_array(aval_.shape, aval_.dtype if is_differentiable(aval_) else float0))


def add_tangents(a, b):
    if type(a) is Zero:
        return b
    if type(b) is Zero:
        return a
    return a + b


def move_to_front(x, dim, size):
    """`x` with its batch dimension first; an unmapped `x` is broadcast to `size` first."""
    if dim is NOT_MAPPED:
        return np.broadcast_to(x, (size,) + aval(x).shape)
    if dim == 0:
        return x
    return np.moveaxis(x, dim, 0)
