"""The extension API for library authors, one import away: `non_differentiable` and overlays
(definitions only staging sees) live here; the rest is re-exported by design from where it
lives: contexts (xform.ir.contexts), the default-only primitives softplus and logsumexp
(xform.rules.special, their ops xform.numpy.special), Zero/Undefined, loop_batch, and
`register`/`extend` with `Hooks`, the record of a primitive's pass hooks (xform.ir.registry)."""
from __future__ import annotations

import contextvars
import functools
import types

import numpy as np

from xform.errors import TypeCheckError, UnsupportedError
from xform.ir.ad import Undefined, Zero, aval
from xform.ir.avals import aval_of
from xform.ir.builder import current_builder, using_builder
from xform.ir.contexts import (CONTEXTS, bind_in_context, context, current_context,
                               primitives)
from xform.ir.core import Primitive
from xform.ir.registry import Hooks, extend, loop_batch, register
from xform.ir.tracer import Tracer
from xform.numpy import FUNCTIONS, UFUNCS, numpy_name
from xform.numpy.special import logsumexp, softplus
from xform.numpy.stand_ins import remove_stand_in, stand_in
from xform.rules.helpers import zero_derivative
from xform.rules.special import logsumexp_p, softplus_p
from xform.runtime.cache import clear_cache
from xform.source_info import user_frame_info
from xform.tree import tree_flatten, tree_leaves, tree_unflatten

# == non-differentiable marking ===================================================================

def _spec_zeros(spec):
    """A pytree of zero arrays shaped as `spec`, whose leaves are ShapedArrays (or anything
    with shape and dtype)."""
    if hasattr(spec, "shape") and hasattr(spec, "dtype"):
        return np.broadcast_to(np.zeros((), spec.dtype), spec.shape)
    if isinstance(spec, (tuple, list)):
        return type(spec)(_spec_zeros(s) for s in spec)
    if isinstance(spec, dict):
        return {k: _spec_zeros(s) for k, s in spec.items()}
    raise TypeCheckError(f"out_spec leaves must be ShapedArrays, got {type(spec).__name__}",
                         user_frame_info())


def non_differentiable(fun=None, *, out_spec=None):
    """Mark a primitive or a Python function as having a zero derivative (Mooncake's
    `@zero_adjoint`, ChainRules' `@non_differentiable`).

    A primitive gets zero jvp and vjp rules and is returned. A function becomes a primitive
    whose impl calls it on numpy values, so it may do anything numpy can (integer codes,
    np.asarray, Python control flow); its output types come from running it on zeros of the
    input types, or from `out_spec`: a pytree of ShapedArrays, or a function of the input
    avals (laid out as the arguments) returning one. Keyword arguments are static. vmap runs
    it once per example (see `xform.ir.registry.loop_batch`) unless a batch rule is added
    to `f.primitive`. Eager calls run `fun`.

    >>> @xform.non_differentiable
    ... def bucket(x):
    ...     return np.digitize(x, [0.0, 1.0])     # not differentiable, not stageable
    >>> xform.grad(lambda x: np.sum(x * bucket(x)))(np.array([0.5, 2.0]))
    array([1., 2.])
    """
    if fun is None:
        return functools.partial(non_differentiable, out_spec=out_spec)
    if isinstance(fun, Primitive):
        extend(fun, **zero_derivative(fun))
        return fun
    prim = Primitive(getattr(fun, "__name__", "non_differentiable"), multiple_results=True)
    out_types = {}

    def out_type(avals, in_tree, static):
        key = (tuple(avals), in_tree, static)
        if key not in out_types:
            if out_spec is None:
                with using_builder(None), np.errstate(all="ignore"):
                    out = fun(*tree_unflatten(in_tree, [np.zeros(a.shape, a.dtype)
                                                        for a in avals]), **dict(static))
            else:
                spec = (out_spec(*tree_unflatten(in_tree, list(avals)), **dict(static))
                        if callable(out_spec) else out_spec)
                out = _spec_zeros(spec)
            leaves, out_tree = tree_flatten(out)
            out_types[key] = ([aval_of(x).strengthen() for x in leaves], out_tree)
        return out_types[key]

    def impl(*leaves, in_tree, static):
        return tree_flatten(fun(*tree_unflatten(in_tree, leaves), **dict(static)))[0]

    def abstract_eval(*avals, in_tree, static):
        return out_type(avals, in_tree, static)[0]

    register(prim, impl=impl, abstract_eval=abstract_eval, **zero_derivative(prim))

    @functools.wraps(fun)
    def staged(*args, **kwargs):
        leaves, in_tree = tree_flatten(args)
        if current_builder() is None or not any(type(x) is Tracer for x in leaves):
            return fun(*args, **kwargs)
        if any(type(x) is Tracer for x in tree_leaves(kwargs)):
            raise TypeCheckError(f"keyword arguments of '{prim}' are static: pass traced "
                                 "values positionally", user_frame_info())
        static = tuple(sorted(kwargs.items()))
        outs = prim.bind(*leaves, in_tree=in_tree, static=static)
        return tree_unflatten(out_type([aval(x) for x in leaves], in_tree, static)[1], outs)
    staged.primitive = prim
    return staged


# == overlays ======================================================================================

_OVERLAYS: dict = {}  # target -> (replacement, original table entry or None)
_USER_OVERLAYS: dict = {}  # Python function -> replacement (a stand-in while staging)
_overlaid: contextvars.ContextVar[frozenset] = contextvars.ContextVar("xform_overlaid",
                                                                      default=frozenset())


def _inside(target, replacement, original):
    """Call `replacement`; a call of `target` made inside it means `original` (so an overlay
    may delegate to the definition it replaces, as a method calls super())."""
    def dispatch(*args, **kwargs):
        active = _overlaid.get()
        if target in active:
            if original is None:
                raise UnsupportedError(f"{numpy_name(target)} is not supported on traced "
                                       "values (its overlay called it)", user_frame_info())
            return original(*args, **kwargs)
        token = _overlaid.set(active | {target})
        try:
            return replacement(*args, **kwargs)
        finally:
            _overlaid.reset(token)
    return dispatch


def _numpy_table(target):
    if isinstance(target, np.ufunc):
        return UFUNCS
    if target in FUNCTIONS or hasattr(target, "_implementation"):
        return FUNCTIONS
    return None


def overlay(target, replacement=None):
    """Register `replacement` as the definition of `target` that only xform's staging sees
    (Mooncake's `@mooncake_overlay`): e.g. a numerically stable version, or one written with
    stageable operations. Use as a decorator, `@xform.overlay(np.linalg.norm)`, or call
    `overlay(target, replacement)`; `remove_overlay(target)` undoes it.

    `target` is a numpy function or ufunc, or any Python function (the user's or a
    library's). Numpy functions are reached through `__array_function__` /
    `__array_ufunc__` and the tables in xform.numpy, where the overlay takes precedence; a
    Python function through a stand-in (xform/numpy/stand_ins.py: its code is swapped while
    something is staged, so every reference to it sees the overlay, and calls outside staging
    or without traced arguments run the function itself). Inside the replacement, calling
    `target` means its original definition. Registering clears xform's cache so that cached
    stagings see the overlay.

    >>> def log1pexp(x):
    ...     return np.log(1 + np.exp(x))
    >>> @xform.overlay(log1pexp)
    ... def _(x):
    ...     return xform.extend.softplus(x)
    >>> xform.grad(log1pexp)(1000.0)    # staged through the overlay: 1.0, not nan
    np.float64(1.0)
    >>> xform.extend.remove_overlay(log1pexp)
    """
    if replacement is None:
        return functools.partial(overlay, target)
    if isinstance(target, types.FunctionType) and _numpy_table(target) is None:
        if target in _USER_OVERLAYS:
            remove_stand_in(target)
        stand_in(target, replacement)
        _USER_OVERLAYS[target] = replacement
    else:
        table = _numpy_table(target)
        if table is None:
            raise TypeCheckError(
                f"cannot overlay {getattr(target, '__name__', target)!r}: it is neither a "
                "numpy function nor a Python function", user_frame_info(),
                "overlay the Python function that calls it (a builtin's calls cannot be "
                "intercepted)")
        original = _OVERLAYS[target][1] if target in _OVERLAYS else table.get(target)
        _OVERLAYS[target] = (replacement, original)
        table[target] = _inside(target, replacement, original)
    clear_cache()
    return replacement


def remove_overlay(target) -> None:
    """Undo `overlay(target, ...)`: staging sees `target`'s own definition again.

    >>> _ = xform.overlay(np.linalg.norm, lambda x: np.sqrt(np.sum(x * x)))
    >>> xform.extend.remove_overlay(np.linalg.norm)    # xform's own np.linalg.norm again
    """
    if target in _USER_OVERLAYS:
        del _USER_OVERLAYS[target]
        remove_stand_in(target)
    elif target in _OVERLAYS:
        _, original = _OVERLAYS.pop(target)
        table = _numpy_table(target)
        if original is None:
            table.pop(target, None)
        else:
            table[target] = original
    else:
        raise TypeCheckError(f"{getattr(target, '__name__', target)!r} has no overlay",
                             user_frame_info())
    clear_cache()


__all__ = ["CONTEXTS", "Hooks", "Undefined", "Zero", "bind_in_context", "context",
           "current_context", "extend", "logsumexp", "logsumexp_p", "loop_batch",
           "non_differentiable", "overlay", "primitives", "register", "remove_overlay",
           "softplus", "softplus_p"]
