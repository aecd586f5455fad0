"""Arrays built from Python containers of traced values: `np.array([x, 2 * x])`,
`np.asarray([[a, b], [c, d]])`, `np.r_[...]`, `np.c_[...]`, `np.block`, `np.full(shape, x)`,
and lists mixing tracers and constants in `np.stack`/`np.append`. numpy converts such
containers itself, calling `Tracer.__array__`; these stand-ins (xform/numpy/stand_ins.py) stage
them instead, as stacks, concatenations and broadcasts.
"""
from __future__ import annotations

import dis
import os
import sys

import numpy as np

from xform.errors import UnsupportedError
from xform.ir.builder import current_builder
from xform.ir.bytecode import instruction_argument, per_code
from xform.ir.tracer import Tracer
from xform.source_info import is_users_code, user_frame_info
from xform.numpy.captured import CapturedArray
from xform.numpy.join import concatenate, stack
from xform.numpy.stand_ins import SEQUENCES, contains_tracer, define_group, stand_in
from xform.numpy.protocol import function_for, implements
from xform.numpy.shape import copy


def staged_array(obj):
    """`obj` as an array: a Tracer as itself, a (nested) list, tuple or deque holding
    tracers as their stack, anything else as `np.asarray(obj)`."""
    if type(obj) is Tracer:
        return obj
    if type(obj) in SEQUENCES and contains_tracer(obj):
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
    return _copy_if(x, obj, copy, order)


def _copy_if(x, obj, wanted, order="K"):
    # SciPy's array-API layer passes numpy's _CopyMode enum, which refuses bool()
    wanted = wanted == np._CopyMode.ALWAYS if isinstance(wanted, np._CopyMode) else wanted
    return copy(x, order) if wanted and x is obj else x


def _asarray(a, dtype=None, order=None, *, device=None, copy=None, like=None):
    x = _with_dtype(staged_array(a), dtype)
    return _copy_if(x, a, copy, "K" if order is None else order)


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


# Arrays made fresh by numpy's constructors in the user's own code, while staging, are
# traced constants: writes of traced values into them stage (`u = np.zeros((T, n))`, then
# `u[t + 1] = u[t] + dt * f(u[t])`), as numpy's own write into a concrete array cannot. A
# library's calls (numpy's, SciPy's) get numpy's arrays, as ever. A traced size or count
# (`np.zeros(n)`) is read as `int(n)`: from the staging's values, guarded, where there are.
_FRESH = ("zeros", "ones", "empty", "full", "eye", "identity", "arange", "tri", "linspace",
          "logspace", "geomspace", "zeros_like", "ones_like", "empty_like", "full_like", "array",
          "asarray")
# The stand-ins below, a group a staging does without when its code cannot reach them
# (xform.runtime.effects.Watch): code that spells none of their names, nor the name of a numpy
# callable that runs numpy's own Python on its arguments (np.polynomial's functions call
# np.array; np.vectorize, np.ma, ...).
CONSTRUCTORS_GROUP = "numpy constructors"
_CONSTRUCTOR_NAMES = frozenset({
    "asarray", "asanyarray", "ascontiguousarray", "asfortranarray", "append", "fromiter", "r_",
    "c_",
    "stack", "hstack", "vstack", "dstack", "column_stack", "row_stack", *_FRESH})


def _passes_to_xform(value) -> bool:
    """Whether calling (or reading) numpy's `value` with traced values reaches xform without
    running numpy's own Python: a ufunc, a function numpy dispatches (`__array_function__`),
    a scalar type or dtype, a constant, the linalg and fft modules of such functions."""
    return (isinstance(value, np.ufunc) or type(value).__name__ == "_ArrayFunctionDispatcher"
            or (isinstance(value, type) and (issubclass(value, np.generic) or value is np.dtype))
            or isinstance(value, (int, float, complex, str, bytes, type(None)))
            or value is np.linalg or value is np.fft)


# numpy's submodules load on first use (np.polynomial): by name, not from its namespace
_SUBMODULE_NAMES = (frozenset({"polynomial", "ma", "char", "rec", "strings", "lib", "testing",
                               "ctypeslib", "matlib", "emath", "core"})
                    | frozenset(getattr(np, "__numpy_submodules__", ()))) - {"linalg", "fft"}
# The names classified so far, and those of them through which code reaches numpy's
# constructors. Decided per name as stagings spell them: classifying all of numpy's ~600
# names at once cost a process's first gradient call about a quarter of a millisecond.
_classified: set = set()
_reaching: set = set()


# SciPy's modules whose functions run SciPy's own Python on traced arguments, making arrays
# with numpy's constructors (scipy.signal.hilbert's np.zeros, resample's): a name one of them
# holds reaches the constructors, once the user has imported it
_SCIPY_MODULES = ("scipy.signal",)
# code importing one, or spelling it, reaches them too (imported while the code runs)
_SCIPY_NAMES = frozenset(_SCIPY_MODULES) | {name.rpartition(".")[2] for name in _SCIPY_MODULES}
_scipy_loaded: list = []


def _reaches_constructors(names) -> bool:
    """Whether code spelling `names` can reach numpy's constructors: it names one, a numpy
    submodule, a numpy callable that runs numpy's own Python on its arguments, a module of
    _SCIPY_MODULES or a name one of them holds once imported."""
    loaded = [sys.modules[name] for name in _SCIPY_MODULES if name in sys.modules]
    if len(loaded) != len(_scipy_loaded):
        # a SciPy module imported since: the names classified as not reaching, anew
        _scipy_loaded[:] = loaded
        _classified.intersection_update(_reaching)
    for name in set(names).difference(_classified):
        if name in _CONSTRUCTOR_NAMES or name in _SUBMODULE_NAMES or name in _SCIPY_NAMES or any(
                name in vars(namespace) and not _passes_to_xform(vars(namespace)[name])
                for namespace in (np, np.linalg, np.fft)) or any(
                name in vars(module) for module in _scipy_loaded):
            _reaching.add(name)
        _classified.add(name)
    return not _reaching.isdisjoint(names)


define_group(CONSTRUCTORS_GROUP, _reaches_constructors)

for _name, _replacement in [("asanyarray", _asarray), ("ascontiguousarray", _ascontiguousarray),
                            ("asfortranarray", _ascontiguousarray)]:
    stand_in((np, _name), _replacement, group=CONSTRUCTORS_GROUP)
stand_in(np.append, lambda arr, values, axis=None: np.append(staged_array(arr),
                                                            staged_array(values), axis),
         group=CONSTRUCTORS_GROUP)
stand_in(type(np.r_).__mro__[1].__getitem__, _axis_concatenate, group=CONSTRUCTORS_GROUP)

_numpy_fromiter = np.fromiter


def _fromiter(iterable, dtype, count=-1, **kwargs):
    """`np.fromiter` while staging: an iterable yielding traced values (`v * v for v in x`)
    is their stack; numpy's own array otherwise (numpy would ask each value for a float)."""
    items = list(iterable) if count < 0 else [item for _, item in zip(range(count), iterable)]
    if not contains_tracer(items):
        return _numpy_fromiter(items, dtype, count, **kwargs)
    if count > len(items):
        raise ValueError(f"iterator too short: Expected {count} but iterator had only "
                         f"{len(items)} items.")
    return _with_dtype(staged_array(items), dtype)


stand_in((np, "fromiter"), _fromiter, when=lambda args, kwargs: True, group=CONSTRUCTORS_GROUP)
for _function in (np.stack, np.hstack, np.vstack, np.dstack, np.column_stack):
    stand_in(_function, _staged_items(_function), group=CONSTRUCTORS_GROUP)


# Given a tracer, these reach xform through numpy's own dispatch (their traced argument is an
# array, not a size).
_DISPATCHED = frozenset({"zeros_like", "ones_like", "empty_like", "full_like", "linspace",
                         "logspace", "geomspace"})


# numpy.polynomial's functions fill arrays they make (polyder's der[j - 1] = j * c[j]) as a
# user's code does: theirs are traced too, so traced coefficients differentiate
_POLYNOMIAL_CODE = os.path.dirname(np.polynomial.__file__) + os.sep


def _traced_or_users(name):
    """Whether a call of the constructor `name` is staged: on tracers, or from the user's
    own code. (A library's compiled code, SciPy's or numpy's Cython, has no frame: the
    frame below the stand-in then belongs to whoever called that library, so the call
    that frame is making must be of `name` itself: `_called_name`.)"""
    def when(args, kwargs) -> bool:
        if contains_tracer(args) or contains_tracer(kwargs):
            return True
        if current_builder() is None:
            return False
        frame = sys._getframe(3)  # (the frames: this test, the route, the stand-in)
        code = frame.f_code
        return (name in code.co_names and (is_users_code(code.co_filename)
                                           or code.co_filename.startswith(_POLYNOMIAL_CODE))
                and _called_name(code, frame.f_lasti) in (name, None))
    return when


_OPS = dis.opmap
_CALLS = frozenset(_OPS[name] for name in ("CALL", "CALL_FUNCTION_EX", "CALL_KW")
                   if name in _OPS)
_PRECALL, _CACHE = _OPS.get("PRECALL"), _OPS["CACHE"]
# loads naming their callee: opcode -> (the table of names, how far the index is shifted)
_NAME_LOADS = {_OPS["LOAD_GLOBAL"]: ("co_names", 1), _OPS["LOAD_NAME"]: ("co_names", 0),
               _OPS["LOAD_ATTR"]: ("co_names", 1 if sys.version_info >= (3, 12) else 0),
               _OPS["LOAD_FAST"]: ("co_varnames", 0)}
if "LOAD_METHOD" in _OPS:
    _NAME_LOADS[_OPS["LOAD_METHOD"]] = ("co_names", 0)


@per_code
def _calls_of(code):
    """(its code units, their source positions, {offset: callee name} as asked)."""
    return code.co_code, list(code.co_positions()), {}


def _called_name(code, offset):
    """The name through which the call `code` makes at `offset` names its callee (`zeros` in
    `np.zeros(n)`; "" for a callee that is no name, or no call), or None where the code has
    no source positions to tell (python -X no_debug_ranges)."""
    units, positions, names = _calls_of(code)
    name = names.get(offset, _UNKNOWN)
    if name is _UNKNOWN:
        name = names[offset] = _callee_name(code, units, positions, offset // 2)
    return name


_UNKNOWN = object()


def _callee_name(code, units, positions, at):
    """The last name loaded by an instruction that starts where the call at unit `at`
    starts in the source and ends before it does: the callee is the call's leading
    expression; its arguments start after it, what precedes the call before it."""
    # A calling frame says the call's offset, its last inline cache entry (a call of a
    # Python function), or in CPython 3.11 the PRECALL before it (a call of a builtin).
    while at > 0 and units[2 * at] == _CACHE:
        at -= 1
    if units[2 * at] == _PRECALL:
        at += 1
        while units[2 * at] == _CACHE:
            at += 1
    if units[2 * at] not in _CALLS:
        return ""
    line, end_line, column, end_column = positions[at]
    if line is None or column is None:
        return None
    start, end = (line, column), (end_line, end_column)
    name, name_end = "", None
    for unit in range(at - 1, -1, -1):
        line, end_line, column, end_column = positions[unit]
        if line is None or column is None or units[2 * unit] == _CACHE:
            continue
        if (line, column) < start:
            break
        load = _NAME_LOADS.get(units[2 * unit])
        if (load is not None and (line, column) == start and (end_line, end_column) < end
                and (name_end is None or (end_line, end_column) > name_end)):
            table, shift = load
            name, name_end = getattr(code, table)[instruction_argument(units, unit) >> shift], (
                end_line, end_column)
    return name


def _fresh(original):
    def made_fresh(*args, **kwargs):
        if contains_tracer(args) or contains_tracer(kwargs):
            made = original(*_sizes(args), **_sizes(kwargs))
        else:
            made = original(*args, **kwargs)
        if type(made) is CapturedArray:   # np.empty_like(GRID) of a captured GRID: new memory
            made = made.view(np.ndarray)
        if type(made) is np.ndarray and made.ndim:
            builder = current_builder()
            return Tracer(builder, builder.atom(made))
        return made
    return made_fresh


def _sizes(args):
    """Shapes, sizes and counts given as traced values, as Python ints (guarded)."""
    def size(value):
        if type(value) is Tracer:
            return value.builder.decide(value, "index", "numpy.zeros")
        if type(value) in (tuple, list):
            return type(value)(size(v) for v in value)
        return value
    if type(args) is dict:
        return {k: size(v) for k, v in args.items()}
    return tuple(size(v) for v in args)


def _fresh_or_staged(name):
    original = getattr(np, name)
    staged = {"array": _array, "asarray": _asarray, "full": _full}.get(name)

    def route(*args, **kwargs):
        traced = contains_tracer(args) or contains_tracer(kwargs)
        if not traced and name == "asarray" and type(
                args[0] if args else kwargs.get("a")) not in SEQUENCES:
            # np.asarray(A) is A itself (writes into it reach A): fresh only from a sequence
            return original(*args, **kwargs)
        if traced and staged is not None:
            made = staged(*args, **kwargs)
            if type(made) is Tracer:
                return made
        elif traced and name in _DISPATCHED:
            return original(*args, **kwargs)    # numpy dispatches it to xform
        return _fresh(original)(*args, **kwargs)
    return route


for _name in _FRESH:
    _function = getattr(np, _name)
    # numpy's Python functions by their code, so that a name imported before xform stands in
    # too; its builtins (np.zeros, np.array) by the module attribute
    _python = hasattr(getattr(_function, "_implementation", _function), "__code__")
    stand_in(_function if _python else (np, _name), _fresh_or_staged(_name),
             when=_traced_or_users(_name), group=CONSTRUCTORS_GROUP)


# numpy's functions of an array-like see a list where one holds tracers (np.sum([a, b * b]),
# np.linalg.norm([a, b]), np.max([x, 0.0])), so numpy's dispatch never reaches xform: while
# staging, these stand in and stage the list as an array. (np.take dispatches on its array
# alone: a concrete array taken at traced indices reaches xform only so.)
CONTAINERS_GROUP = "numpy functions of lists"
_OF_LISTS = [getattr(np, name) for name in (
    "sum", "mean", "prod", "max", "min", "amax", "amin", "std", "var", "median", "average",
    "cumsum", "cumprod", "sort", "argmax", "argmin", "all", "any", "diff", "clip", "round",
    "ptp", "nansum", "nanmean", "nanmax", "nanmin", "dot", "inner", "outer", "abs",
    "transpose", "reshape", "ravel", "squeeze", "flip", "roll", "trace", "diag", "cross",
    "interp", "polyval", "var", "cov", "corrcoef", "exp", "log", "sqrt", "sin", "cos", "take")
    if hasattr(getattr(getattr(np, name), "_implementation", None), "__code__")] + [
        np.linalg.norm, np.linalg.det, np.linalg.inv, np.linalg.solve]


def _with_lists_staged(numpy_function):
    def staged(*args, **kwargs):
        args = [staged_array(a) if type(a) in SEQUENCES and contains_tracer(a) else a
                for a in args]
        kwargs = {k: staged_array(v) if type(v) in SEQUENCES and contains_tracer(v) else v
                  for k, v in kwargs.items()}
        return function_for(numpy_function)(*args, **kwargs)
    return staged


define_group(CONTAINERS_GROUP)     # each reached by its name: code spelling `sum` reaches np.sum
for _function in dict.fromkeys(_OF_LISTS):
    stand_in(_function, _with_lists_staged(_function), group=CONTAINERS_GROUP)
# numpy's compiled dot (np.dot(weights, window), the window a list or deque of samples): by its
# module attribute
stand_in((np, "dot"), _with_lists_staged(np.dot), group=CONTAINERS_GROUP)
# np.isscalar, numpy's Python, sees the Tracer: it answers as isinstance does in the user's code,
# for eager numpy's value (a 0-d result is numpy's scalar)
define_group("numpy.isscalar")    # reached by its name
stand_in(np.isscalar, lambda element: element.ndim == 0, group="numpy.isscalar")
