"""Tracer: a stand-in for an array while a function is staged.

It speaks numpy's protocols (`__array_ufunc__`, `__array_function__`, operators, methods), so
plain `import numpy as np` code stages. The protocol tables `UFUNCS` and `FUNCTIONS` map numpy
callables to xform ops; rule families fill them (`implements`).
"""
from __future__ import annotations

import numpy as np

from xform.ir.hooks import unwatched
from xform.errors import ConcretizationError, ShapeError, TypeCheckError, UnsupportedError
from xform.source_info import user_frame_info

UFUNCS: dict = {}     # np.sin -> xform op taking the ufunc's positional inputs
FUNCTIONS: dict = {}  # np.sum -> xform function with numpy's signature


def implements(numpy_function):
    """Decorator: the wrapped xform function handles `numpy_function` on tracers.

    >>> sinc_p = xform.Primitive("sinc"); _ = sinc_p.def_abstract_eval(lambda x: x)
    >>> @xform.implements(np.sinc)
    ... def sinc(x):
    ...     return sinc_p.bind(x)
    >>> xform.make_graph(np.sinc)(1.0).equations[0].primitive    # np.sinc(tracer) stages `sinc`
    sinc
    >>> from xform.ir.tracer import FUNCTIONS; del FUNCTIONS[np.sinc]    # undo: tables are global
    """
    def register(fn):
        # a ufunc's __call__ goes to UFUNCS; (ufunc, "reduce") and numpy functions to FUNCTIONS
        table = UFUNCS if isinstance(numpy_function, np.ufunc) else FUNCTIONS
        table[numpy_function] = fn
        return fn
    return register


def _numpy_name(func) -> str:
    if isinstance(func, str):
        return f"the operation '{func}'"
    module = getattr(func, "__module__", None) or "numpy"
    if module.startswith(("numpy._", "numpy.core")):
        module = "numpy"
    return f"{module}.{getattr(func, '__name__', repr(func))}"


def _unsupported(what: str) -> UnsupportedError:
    return UnsupportedError(
        f"{what} is not supported on traced values", user_frame_info(),
        "write it with supported operations, or register a primitive: "
        "p = xform.Primitive(...); p.def_impl(...); p.def_abstract_eval(...); "
        "then @xform.implements(<numpy function>)")


def shape_error(message: str) -> ShapeError:
    """A ShapeError naming the user's line, for argument checks outside abstract eval."""
    return ShapeError(message, user_frame_info())


def _concretization(what: str) -> ConcretizationError:
    return ConcretizationError(
        f"{what} needs a concrete value, but this value is traced", user_frame_info(),
        "use xform.cond / xform.while_loop or np.where for data-dependent choices, "
        "or mark the argument static with static_argnums")


def _fn(numpy_function):
    fn = FUNCTIONS.get(numpy_function)
    if fn is None:
        raise _unsupported(_numpy_name(numpy_function))
    return fn


class Tracer:
    """A traced array: `x.aval` is its ShapedArray; numpy calls on it emit equations."""

    __slots__ = ("builder", "graph_var")
    __array_priority__ = 1000

    def __init__(self, builder, var):
        self.builder = builder
        self.graph_var = var

    # -- abstract properties -------------------------------------------------------------
    @property
    def aval(self):
        return self.graph_var.aval

    @property
    def shape(self):
        return self.graph_var.aval.shape

    @property
    def dtype(self):
        return self.graph_var.aval.dtype

    @property
    def ndim(self):
        return len(self.graph_var.aval.shape)

    @property
    def size(self):
        return self.graph_var.aval.size

    def __len__(self):
        if not self.shape:
            raise TypeCheckError("len() of a 0-d traced value", user_frame_info())
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeCheckError("iteration over a 0-d traced value", user_frame_info())
        return (self[i] for i in range(self.shape[0]))

    def __repr__(self):
        return f"Tracer<{self.aval.str_short()}>"

    __hash__ = object.__hash__

    # -- numpy protocols --------------------------------------------------------------
    @unwatched
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if kwargs.get("out") is not None:
            raise _unsupported(f"numpy.{ufunc.__name__}(..., out=...)")
        if kwargs.get("where", True) is not True:
            raise _unsupported(f"numpy.{ufunc.__name__}(..., where=...)")
        kwargs.pop("out", None)
        kwargs.pop("where", None)
        if method != "__call__":
            # numpy passes a ufunc method's arguments (axis, dtype, keepdims) as keywords.
            handler = FUNCTIONS.get((ufunc, method))
            if handler is None:
                raise _unsupported(f"numpy.{ufunc.__name__}.{method}")
            return handler(*inputs, **kwargs)
        dtype = kwargs.pop("dtype", None)
        if kwargs:
            raise _unsupported(f"numpy.{ufunc.__name__}(..., {', '.join(kwargs)}=...)")
        op = UFUNCS.get(ufunc)
        if op is None:
            raise _unsupported(f"numpy.{ufunc.__name__}")
        if dtype is not None:
            # numpy computes in `dtype` (inputs cast first), not in the promoted type.
            inputs = [x.astype(dtype) if type(x) is Tracer else np.asarray(x).astype(dtype)
                      for x in inputs]
        return op(*inputs)

    @unwatched
    def __array_function__(self, func, types, args, kwargs):
        return _fn(func)(*args, **kwargs)

    def __array__(self, dtype=None, copy=None):
        raise _concretization("converting to a numpy array (np.asarray / np.array)")

    # -- concretization ---------------------------------------------------------------
    def __bool__(self):
        raise _concretization("Python control flow (`if`, `while`, `and`, `or`, bool())")

    def __float__(self):
        raise _concretization("float()")

    def __int__(self):
        raise _concretization("int()")

    def __complex__(self):
        raise _concretization("complex()")

    def __index__(self):
        raise _concretization("using a traced value as an index or size")

    def __setitem__(self, index, value):
        raise TypeCheckError("traced arrays are immutable; build a new array instead, e.g. "
                             "with np.where or xform.index_add", user_frame_info())

    # -- operators ----------------------------------------------------------------------
    def __add__(self, other): return np.add(self, other)
    def __radd__(self, other): return np.add(other, self)
    def __sub__(self, other): return np.subtract(self, other)
    def __rsub__(self, other): return np.subtract(other, self)
    def __mul__(self, other): return np.multiply(self, other)
    def __rmul__(self, other): return np.multiply(other, self)
    def __truediv__(self, other): return np.true_divide(self, other)
    def __rtruediv__(self, other): return np.true_divide(other, self)
    def __floordiv__(self, other): return np.floor_divide(self, other)
    def __rfloordiv__(self, other): return np.floor_divide(other, self)
    def __mod__(self, other): return np.remainder(self, other)
    def __rmod__(self, other): return np.remainder(other, self)
    def __pow__(self, other): return np.power(self, other)
    def __rpow__(self, other): return np.power(other, self)
    def __matmul__(self, other): return np.matmul(self, other)
    def __rmatmul__(self, other): return np.matmul(other, self)
    def __neg__(self): return np.negative(self)
    def __pos__(self): return np.positive(self)
    def __abs__(self): return np.absolute(self)
    def __invert__(self): return np.invert(self)
    def __and__(self, other): return np.bitwise_and(self, other)
    def __rand__(self, other): return np.bitwise_and(other, self)
    def __or__(self, other): return np.bitwise_or(self, other)
    def __ror__(self, other): return np.bitwise_or(other, self)
    def __lshift__(self, other): return np.left_shift(self, other)
    def __rlshift__(self, other): return np.left_shift(other, self)
    def __rshift__(self, other): return np.right_shift(self, other)
    def __rrshift__(self, other): return np.right_shift(other, self)
    def __xor__(self, other): return np.bitwise_xor(self, other)
    def __rxor__(self, other): return np.bitwise_xor(other, self)
    def __lt__(self, other): return np.less(self, other)
    def __le__(self, other): return np.less_equal(self, other)
    def __gt__(self, other): return np.greater(self, other)
    def __ge__(self, other): return np.greater_equal(self, other)
    def __eq__(self, other): return np.equal(self, other)
    def __ne__(self, other): return np.not_equal(self, other)

    @unwatched
    def __getitem__(self, index):
        return _fn("getitem")(self, index)

    # -- methods, forwarded to the numpy function tables ----------------------------
    @property
    def T(self):
        return _fn(np.transpose)(self)

    @property
    def mT(self):
        return _fn(np.swapaxes)(self, -1, -2)

    @property
    def real(self):
        return _fn(np.real)(self)

    @property
    def imag(self):
        return _fn(np.imag)(self)

    def astype(self, dtype, copy=True):
        return _fn("astype")(self, dtype)

    def reshape(self, *shape, order="C"):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return _fn(np.reshape)(self, shape, order=order)

    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return _fn(np.transpose)(self, axes or None)

    def conj(self): return np.conjugate(self)
    def conjugate(self): return np.conjugate(self)
    def copy(self): return _fn(np.copy)(self)
    def ravel(self, order="C"): return _fn(np.ravel)(self, order)
    def flatten(self, order="C"): return _fn(np.ravel)(self, order)
    def squeeze(self, axis=None): return _fn(np.squeeze)(self, axis)
    def swapaxes(self, a, b): return _fn(np.swapaxes)(self, a, b)
    def dot(self, other): return _fn(np.dot)(self, other)
    def clip(self, min=None, max=None): return _fn(np.clip)(self, min, max)
    def repeat(self, repeats, axis=None): return _fn(np.repeat)(self, repeats, axis)
    def diagonal(self, offset=0, axis1=0, axis2=1):
        return _fn(np.diagonal)(self, offset, axis1, axis2)
    def trace(self, offset=0, axis1=0, axis2=1): return _fn(np.trace)(self, offset, axis1, axis2)

    def sum(self, axis=None, dtype=None, keepdims=False):
        return _fn(np.sum)(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def prod(self, axis=None, dtype=None, keepdims=False):
        return _fn(np.prod)(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def mean(self, axis=None, dtype=None, keepdims=False):
        return _fn(np.mean)(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def var(self, axis=None, dtype=None, ddof=0, keepdims=False):
        return _fn(np.var)(self, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)

    def std(self, axis=None, dtype=None, ddof=0, keepdims=False):
        return _fn(np.std)(self, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)

    def max(self, axis=None, keepdims=False): return _fn(np.max)(self, axis=axis, keepdims=keepdims)
    def min(self, axis=None, keepdims=False): return _fn(np.min)(self, axis=axis, keepdims=keepdims)
    def argmax(self, axis=None): return _fn(np.argmax)(self, axis=axis)
    def argmin(self, axis=None): return _fn(np.argmin)(self, axis=axis)
    def cumsum(self, axis=None): return _fn(np.cumsum)(self, axis=axis)
    def cumprod(self, axis=None): return _fn(np.cumprod)(self, axis=axis)
    def any(self, axis=None, keepdims=False): return _fn(np.any)(self, axis=axis, keepdims=keepdims)
    def all(self, axis=None, keepdims=False): return _fn(np.all)(self, axis=axis, keepdims=keepdims)
    def sort(self, axis=-1):
        raise TypeCheckError("in-place x.sort() cannot be staged; use np.sort(x)",
                             user_frame_info())


# -- metadata functions: answered from the aval, nothing is staged --------------------------

def _as_dtype_stand_in(x):
    if type(x) is Tracer:
        from xform.ir.avals import dummy
        return dummy(x.aval)
    return x


FUNCTIONS[np.shape] = lambda a: a.shape
FUNCTIONS[np.ndim] = lambda a: a.ndim
FUNCTIONS[np.size] = lambda a, axis=None: a.size if axis is None else a.shape[axis]
FUNCTIONS[np.result_type] = lambda *xs: np.result_type(*map(_as_dtype_stand_in, xs))
FUNCTIONS[np.iscomplexobj] = lambda x: x.dtype.kind == "c"
FUNCTIONS[np.isrealobj] = lambda x: x.dtype.kind != "c"


def _like(fill):
    def like(a, dtype=None, order="K", subok=True, shape=None, **kwargs):
        shape = a.shape if shape is None else shape
        return np.full(shape, fill, dtype=a.dtype if dtype is None else dtype)
    return like


def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, **kwargs):
    shape = a.shape if shape is None else shape
    dtype = a.dtype if dtype is None else np.dtype(dtype)
    if type(fill_value) is Tracer:
        return np.broadcast_to(fill_value.astype(dtype), shape)
    return np.full(shape, fill_value, dtype=dtype)


# Arrays made from a traced value's shape and dtype alone are constants.
FUNCTIONS[np.zeros_like] = _like(0)
FUNCTIONS[np.ones_like] = _like(1)
FUNCTIONS[np.empty_like] = _like(0)
FUNCTIONS[np.full_like] = _full_like
