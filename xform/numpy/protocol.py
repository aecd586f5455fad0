"""The numpy protocol tables: which xform function stages each numpy callable on tracers.

`UFUNCS` maps a ufunc to the op taking its positional inputs, `FUNCTIONS` maps numpy functions
(and ufunc methods such as `(np.add, "reduce")`, and "getitem"/"astype") to functions with
numpy's signature. `implements` fills them; the Tracer reaches them through the hooks
installed here (`xform.ir.tracer.install_numpy_protocol`).
"""
from __future__ import annotations

import itertools
import sys

import numpy as np

from xform.errors import unsupported_error
from xform.ir.avals import dummy
from xform.ir.builder import current_builder
from xform.ir.tracer import Tracer, install_numpy_protocol
from xform.numpy.stand_ins import install_pending
from xform.rules.shape import broadcast_to_p, reshape_p

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


_UFUNC_MODULES = ("numpy", "scipy.special")  # where a ufunc's public name is looked for


def numpy_name(func) -> str:
    """How error messages name a numpy or SciPy callable by its public module:
    "numpy.sum", "numpy.linalg.norm", "scipy.special.gammaln".

    >>> import scipy.special
    >>> xform.numpy.numpy_name(np.add.reduce), xform.numpy.numpy_name(scipy.special.erf)
    ('numpy.add.reduce', 'scipy.special.erf')
    """
    if isinstance(func, str):
        return f"the operation '{func}'"
    name = getattr(func, "__name__", repr(func))
    if isinstance(func, np.ufunc):  # ufuncs have no __module__: find the module holding it
        modules = [sys.modules.get(m) for m in _UFUNC_MODULES]
        module = next((m.__name__ for m in modules if getattr(m, name, None) is func), "numpy")
        return f"{module}.{name}"
    owner = getattr(func, "__self__", None)
    if isinstance(owner, np.ufunc):   # a ufunc method: np.add.reduce
        return f"{numpy_name(owner)}.{name}"
    module = getattr(func, "__module__", None) or "numpy"
    if module.startswith("numpy.core"):
        module = "numpy"
    # the public package above private submodules: numpy._core.x, scipy.special._basic
    parts = module.split(".")
    public = list(itertools.takewhile(lambda part: not part.startswith("_"), parts))
    return f"{'.'.join(public) or module}.{name}"


def _after_pending(table, key):
    """`table[key]` once pending installers ran (the user imported a SciPy module inside the
    function being staged); None if there still is none."""
    return table.get(key) if install_pending() else None


def function_for(numpy_function):
    """The xform function standing for `numpy_function`; UnsupportedError if there is none."""
    fn = FUNCTIONS.get(numpy_function)
    if fn is None:
        fn = _after_pending(FUNCTIONS, numpy_function)
        if fn is None:
            # a numpy builtin's stand-in, its module attribute while staging (np.dot's)
            wrapped = getattr(numpy_function, "__wrapped__", None)
            fn = FUNCTIONS.get(wrapped) if wrapped is not None else None
            if fn is None:
                raise unsupported_error(numpy_name(numpy_function))
    return fn


def array_ufunc(ufunc, method, inputs, kwargs):
    """`Tracer.__array_ufunc__`: stage `ufunc` (or its `method`, e.g. reduce) on `inputs`;
    with `out=`, write the result into it (xform.numpy.inplace)."""
    if not kwargs and method == "__call__":     # the common call, one lookup
        op = UFUNCS.get(ufunc)
        if op is not None:
            return op(*inputs)
    if kwargs.get("out") is not None:
        kwargs = dict(kwargs)
        return FUNCTIONS["ufunc out"](ufunc, method, inputs, kwargs, kwargs.pop("out"))
    if kwargs.get("where", True) is not True:
        if method != "reduce":      # a reduction's where= selects what it reduces
            raise unsupported_error(f"{numpy_name(ufunc)}(..., where=...) without out=")
    else:
        kwargs.pop("where", None)
    kwargs.pop("out", None)
    if method != "__call__":
        # numpy passes a ufunc method's arguments (axis, dtype, keepdims) as keywords.
        handler = FUNCTIONS.get((ufunc, method))
        if handler is None and method == "outer" and len(inputs) == 2:
            # any binary ufunc's outer: the first input's axes, then the second's
            first, second = inputs
            first = np.expand_dims(first, tuple(range(-np.ndim(second), 0)))
            return array_ufunc(ufunc, "__call__", (first, second), kwargs)
        if handler is None:
            if method in ("reduce", "accumulate") and ufunc.nin == 2 and ufunc in UFUNCS:
                return FUNCTIONS["ufunc fold"](ufunc, method, *inputs, **kwargs)
            raise unsupported_error(f"{numpy_name(ufunc)}.{method}")
        return handler(*inputs, **kwargs)
    if ufunc.signature is not None and kwargs.keys() - {"dtype"}:
        # a generalized ufunc's axes, axis, keepdims (np.vecdot(x, y, axis=0), in SciPy)
        return FUNCTIONS["gufunc keywords"](ufunc, inputs, kwargs)
    dtype = kwargs.pop("dtype", None)
    if kwargs:
        raise unsupported_error(f"{numpy_name(ufunc)}(..., {', '.join(kwargs)}=...)")
    op = UFUNCS.get(ufunc)
    if op is None:
        op = _after_pending(UFUNCS, ufunc)
        if op is None:
            if ufunc.types and all(set(t) <= set("O->") for t in ufunc.types):
                # np.frompyfunc's: its Python function on each element, as np.vectorize's
                return FUNCTIONS["object ufunc"](ufunc, inputs)
            raise unsupported_error(numpy_name(ufunc))
    if dtype is not None:
        # numpy computes in `dtype` (inputs cast first), not in the promoted type.
        inputs = [x.astype(dtype) if type(x) is Tracer else np.asarray(x).astype(dtype)
                  for x in inputs]
    return op(*inputs)


install_numpy_protocol(array_ufunc, function_for, UFUNCS, FUNCTIONS)


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
        return _full_like(a, fill, dtype, order, subok, shape)
    return like


def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, **kwargs):
    """A traced array of `fill_value`, so that writes into it stage as numpy performs them:
    a constant broadcast by an equation (no memory), which constant folding evaluates when
    nothing traced flows in."""
    shape = a.shape if shape is None else tuple(shape) if np.ndim(shape) else (int(shape),)
    dtype = a.dtype if dtype is None else np.dtype(dtype)
    if type(fill_value) is not Tracer:
        builder = current_builder()
        # numpy's cast of the fill value, as a graph constant the equation below reads
        fill_value = Tracer(builder, builder.atom(np.full((1,), fill_value, dtype=dtype)))
        if not shape:
            return reshape_p.bind(fill_value, shape=())
    elif fill_value.dtype != dtype:
        fill_value = fill_value.astype(dtype)
    return broadcast_to_p.bind(fill_value, shape=shape)


FUNCTIONS[np.zeros_like] = _like(0)
FUNCTIONS[np.ones_like] = _like(1)
FUNCTIONS[np.empty_like] = _like(0)
FUNCTIONS[np.full_like] = _full_like


def with_constants_read(x):
    """`x`, or its value when it is a traced array that depends on no input (one the staged
    function made from constants, np.arange(5) % 2 == 0): for the functions that need a
    concrete argument (indices that size a result, counts)."""
    if type(x) is Tracer:
        value = x.builder.constant_value(x)
        if value is not None:
            return value
    return x

