"""The numpy protocol tables: which xform function stages each numpy callable on tracers.

`UFUNCS` maps a ufunc to the op taking its positional inputs, `FUNCTIONS` maps numpy functions
(and ufunc methods such as `(np.add, "reduce")`, and "getitem"/"astype") to functions with
numpy's signature. `implements` fills them; the Tracer reaches them through the hooks
installed here (`xform.ir.tracer.install_numpy_protocol`).
"""
from __future__ import annotations

import numpy as np

from xform.errors import unsupported_error
from xform.ir.avals import dummy
from xform.ir.tracer import Tracer, install_numpy_protocol

UFUNCS: dict = {}     # np.sin -> xform op taking the ufunc's positional inputs
FUNCTIONS: dict = {}  # np.sum -> xform function with numpy's signature


def implements(numpy_function):
    """Decorator: the wrapped xform function handles `numpy_function` on tracers.

    >>> i0_p = xform.Primitive("i0"); _ = i0_p.def_abstract_eval(lambda x: x)
    >>> @xform.implements(np.i0)
    ... def i0(x):
    ...     return i0_p.bind(x)
    >>> xform.make_graph(np.i0)(1.0).equations[0].primitive    # np.i0(tracer) stages `i0`
    i0
    >>> from xform.numpy import FUNCTIONS; del FUNCTIONS[np.i0]    # undo: tables are global
    """
    def register(fn):
        # a ufunc's __call__ goes to UFUNCS; (ufunc, "reduce") and numpy functions to FUNCTIONS
        table = UFUNCS if isinstance(numpy_function, np.ufunc) else FUNCTIONS
        table[numpy_function] = fn
        return fn
    return register


def numpy_name(func) -> str:
    """How error messages name a numpy callable: "numpy.sum", "numpy.linalg.norm"."""
    if isinstance(func, str):
        return f"the operation '{func}'"
    module = getattr(func, "__module__", None) or "numpy"
    if module.startswith(("numpy._", "numpy.core")):
        module = "numpy"
    return f"{module}.{getattr(func, '__name__', repr(func))}"


def function_for(numpy_function):
    """The xform function standing for `numpy_function`; UnsupportedError if there is none."""
    fn = FUNCTIONS.get(numpy_function)
    if fn is None:
        raise unsupported_error(numpy_name(numpy_function))
    return fn


def array_ufunc(ufunc, method, inputs, kwargs):
    """`Tracer.__array_ufunc__`: stage `ufunc` (or its `method`, e.g. reduce) on `inputs`."""
    if kwargs.get("out") is not None:
        raise unsupported_error(f"numpy.{ufunc.__name__}(..., out=...)")
    if kwargs.get("where", True) is not True:
        raise unsupported_error(f"numpy.{ufunc.__name__}(..., where=...)")
    kwargs.pop("out", None)
    kwargs.pop("where", None)
    if method != "__call__":
        # numpy passes a ufunc method's arguments (axis, dtype, keepdims) as keywords.
        handler = FUNCTIONS.get((ufunc, method))
        if handler is None:
            raise unsupported_error(f"numpy.{ufunc.__name__}.{method}")
        return handler(*inputs, **kwargs)
    dtype = kwargs.pop("dtype", None)
    if kwargs:
        raise unsupported_error(f"numpy.{ufunc.__name__}(..., {', '.join(kwargs)}=...)")
    op = UFUNCS.get(ufunc)
    if op is None:
        raise unsupported_error(f"numpy.{ufunc.__name__}")
    if dtype is not None:
        # numpy computes in `dtype` (inputs cast first), not in the promoted type.
        inputs = [x.astype(dtype) if type(x) is Tracer else np.asarray(x).astype(dtype)
                  for x in inputs]
    return op(*inputs)


install_numpy_protocol(array_ufunc, function_for)


# -- metadata functions: answered from the aval, nothing is staged --------------------------

def _as_dtype_stand_in(x):
    return dummy(x.aval) if type(x) is Tracer else x


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
