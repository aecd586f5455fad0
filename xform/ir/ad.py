"""The values transforms pass to rules: symbolic zeros (`Zero`), linear inputs of transpose
rules (`Undefined`), the unmapped batch dimension (`NOT_MAPPED`), and their helpers: what
every transform and higher-order rule uses to fit and check a rule's (co)tangents."""
from __future__ import annotations

import attrs
import numpy as np
from numpy import ndarray   # (read per value: see xform.transforms.vjp)

from xform.errors import RuleError
from xform.ir.avals import (SCALAR_AVALS, ShapedArray, array_aval, aval_of, broadcast_shapes,
                            float0, is_differentiable, shaped_array)
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
    if kind is ndarray:
        return array_aval(value)
    found = SCALAR_AVALS.get(kind)
    if found is not None:
        return found
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
    # (buffer, offset and strides given by position: the constructor's parsing of keywords
    # costs as much as the rest of it)
    view = np.ndarray(shape, value.dtype, value, 0, (0,) * len(shape))
    if type(value) is np.ndarray:   # (a numpy scalar's buffer is read-only: so is the view)
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


def fit_tangent(tangent, primal_aval: ShapedArray):
    """Make a rule's tangent match its primal: broadcast, cast, or zero for integer values."""
    if not is_differentiable(primal_aval):
        return zero_tangent(primal_aval)
    if type(tangent) is Zero:
        return tangent
    tangent_aval_ = aval(tangent)
    if tangent_aval_.shape != primal_aval.shape:
        tangent = np.broadcast_to(tangent, primal_aval.shape)
    if tangent_aval_.dtype != primal_aval.dtype:
        if tangent_aval_.dtype.kind == "c" and primal_aval.dtype.kind != "c":
            tangent = np.real(tangent)   # a real value's part of a complex (co)tangent
        tangent = tangent.astype(primal_aval.dtype) if hasattr(tangent, "astype") else \
            np.asarray(tangent, primal_aval.dtype)
    return tangent


def check_rule_outputs(eqn, kind, values, avals, tangent=False):
    """Raise RuleError when a rule returns values that cannot stand for `avals`: the wrong
    count, a shape (tangents: one that does not broadcast to it) or a dtype kind that differs."""
    if len(values) != len(avals):
        raise RuleError(f"the {kind} rule of '{eqn.primitive}' returned {len(values)} values "
                        f"for {len(avals)} outputs", eqn.source)
    for value, expected in zip(values, avals):
        if type(value) is Zero or value is None:
            continue
        got = aval(value)
        if tangent:
            try:
                fits = broadcast_shapes(got.shape, expected.shape) == expected.shape
            except ValueError:
                fits = False
            fits = fits and (got.dtype.kind in "fc" or not is_differentiable(expected))
        else:
            fits = got.shape == expected.shape and (got.dtype == expected.dtype or
                                                    got.weak_type or expected.weak_type)
        if not fits:
            what = "tangent" if tangent else "output"
            raise RuleError(f"the {kind} rule of '{eqn.primitive}' returned a {what} "
                            f"{got.str_short()} where {expected.str_short()} was expected",
                            eqn.source, f"fix the {kind} rule of '{eqn.primitive}'")
