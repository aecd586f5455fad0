"""Abstract values: the shape and dtype a traced value promises, and numpy 2's promotion.

Python scalars are *weakly typed* (NEP 50): `float32_array * 2.0` stays float32. A weak aval
remembers that its dtype came from a Python scalar so promotion can defer to the other operand.
"""
from __future__ import annotations

import math

import attrs
import numpy as np

# JAX's tangent dtype for integer and boolean values: zero-size, carries no information.
float0 = np.dtype([("float0", np.void, 0)])
"""The dtype of the gradient of an integer or boolean input (`allow_int=True`), as JAX's."""


def broadcast_shapes(*shapes) -> tuple:
    """numpy's np.broadcast_shapes on tuples of ints, in Python: numpy's makes an empty array
    per shape (~3 us, and while staging each goes through the constructors' stand-in), where
    staging asks per equation.

    >>> from xform.ir.avals import broadcast_shapes
    >>> broadcast_shapes((3, 1), (4,)), broadcast_shapes((0,), (1,)), broadcast_shapes()
    ((3, 4), (0,), ())
    """
    if len(shapes) == 2 and shapes[0] == shapes[1]:    # (most often)
        return tuple(shapes[0])
    ndim = max(map(len, shapes), default=0)
    result, setters = [1] * ndim, [0] * ndim    # (setters: which shape gave each length)
    for j, shape in enumerate(shapes):
        offset = ndim - len(shape)
        for i, n in enumerate(shape, offset):
            if n != result[i] and n != 1:
                if result[i] != 1:
                    k = setters[i]
                    raise ValueError(
                        "shape mismatch: objects cannot be broadcast to a single shape.  "
                        f"Mismatch is between arg {k} with shape {tuple(shapes[k])} and arg "
                        f"{j} with shape {tuple(shape)}.")
                result[i], setters[i] = n, j
    return tuple(result)


@attrs.frozen(cache_hash=True)  # avals key many dicts while staging and optimizing
class ShapedArray:
    """The abstract value of an array: shape, dtype, and whether the dtype is weak (it came
    from a Python scalar and defers to the other operand's, as numpy 2 does).

    >>> xform.ShapedArray((3,), np.float64), xform.ShapedArray((), np.float64, weak_type=True)
    (f64[3], ~f64[])
    """

    shape: tuple[int, ...] = attrs.field(converter=tuple)
    dtype: np.dtype = attrs.field(converter=np.dtype)
    weak_type: bool = False

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def str_short(self) -> str:
        weak = "~" if self.weak_type else ""
        dims = ",".join(str(d) for d in self.shape)
        return f"{weak}{dtype_short(self.dtype)}[{dims}]"

    def strengthen(self) -> "ShapedArray":
        return ShapedArray(self.shape, self.dtype) if self.weak_type else self

    def update(self, **changes) -> "ShapedArray":
        return attrs.evolve(self, **changes)

    def __repr__(self) -> str:
        return self.str_short()


_SHORT = {"b": "bool", "i": "i", "u": "u", "f": "f", "c": "c"}


def dtype_short(dtype: np.dtype) -> str:
    """`float64 -> f64`, `int32 -> i32`, `bool -> bool`, float0 -> `float0`."""
    dtype = np.dtype(dtype)
    if dtype == float0:
        return "float0"
    if dtype.kind == "b":
        return "bool"
    prefix = _SHORT.get(dtype.kind)
    return f"{prefix}{dtype.itemsize * 8}" if prefix else str(dtype)



def is_differentiable(aval: ShapedArray) -> bool:
    """Inexact values have tangents; integers and booleans get float0 zeros."""
    return aval.dtype.kind in "fc"


def tangent_aval(aval: ShapedArray) -> ShapedArray:
    """Tangents are numpy values at run time, never Python scalars, so they are strong."""
    if is_differentiable(aval):
        return aval if not aval.weak_type else shaped_array(aval.shape, aval.dtype)
    return shaped_array(aval.shape, float0)


_PY_SCALARS = {bool: np.dtype(bool), int: np.dtype(np.int64), float: np.dtype(np.float64),
               complex: np.dtype(np.complex128)}


def aval_of(value) -> ShapedArray:
    """The abstract value of a concrete value; Python scalars are weak."""
    kind = type(value)
    aval = SCALAR_AVALS.get(kind)
    if aval is not None:
        return aval
    if isinstance(value, np.ndarray):
        return array_aval(value)
    if isinstance(value, np.generic):
        return ShapedArray((), value.dtype)
    array = np.asarray(value)
    return ShapedArray(array.shape, array.dtype)


def array_aval(array: np.ndarray) -> ShapedArray:
    """aval_of an ndarray."""
    return shaped_array(array.shape, array.dtype)


def shaped_array(shape: tuple, dtype: np.dtype, weak_type: bool = False) -> ShapedArray:
    """`ShapedArray(shape, dtype, weak_type)` for a tuple `shape` and an np.dtype, memoized:
    a first call's reverse mode asks for one per cotangent and abstract evals one per
    equation, and making a ShapedArray (its converters) costs several dict lookups' time."""
    key = (shape, dtype, weak_type)
    aval = _SHAPED.get(key)
    if aval is None:
        if len(_SHAPED) >= 4096:   # bounded: a program may meet many shapes
            _SHAPED.clear()
        aval = _SHAPED[key] = ShapedArray(shape, dtype, weak_type)
    return aval


_SHAPED: dict = {}


# Scalar types' avals, made once: staging asks for them on every literal.
SCALAR_AVALS = {kind: ShapedArray((), dtype, weak_type=kind is not bool)
                for kind, dtype in _PY_SCALARS.items()}
SCALAR_AVALS.update({kind: ShapedArray((), np.dtype(kind))
                     for kind in (np.float64, np.float32, np.int64, np.int32, np.bool_,
                                  np.complex128)})


def is_valid_value(value) -> bool:
    """Whether `value` can stand as an array argument (arrays, numpy and Python scalars)."""
    if type(value) in _PY_SCALARS or isinstance(value, (np.ndarray, np.generic)):
        return np.asarray(value).dtype.kind in "biufc"
    return False


def dummy(aval: ShapedArray):
    """A 0-d stand-in with `aval`'s dtype and weakness, for asking numpy a result dtype."""
    if aval.weak_type:
        return aval.dtype.type(1).item()
    return np.ones((), aval.dtype)
