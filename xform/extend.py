"""The extension API for library authors: contexts (the minimal and the default primitive
sets), the default-only primitives `logsumexp` and `softplus`, `non_differentiable`, and
overlays (definitions only staging sees)."""
from __future__ import annotations

import contextvars
import functools

import numpy as np

from xform.errors import TypeCheckError, UnsupportedError
from xform.ir.avals import ShapedArray, aval_of
from xform.ir.builder import current_builder, using_builder
from xform.ir.core import Primitive
from xform.source_info import user_frame_info
from xform.ir.tracer import Tracer
from xform.ir.ad import Undefined, Zero, aval
from xform.numpy import FUNCTIONS, UFUNCS, numpy_name
from xform.numpy.axes import normalize_axes
from xform.rules.helpers import defjvp, defvjp, elementwise_abstract_eval, elementwise_rules, vectorized_batch, zero_derivative
from xform.rules.reduce import expand_reduced, reduced_shape, reduction_batch
from xform.ir.rules import RULES, extend, loop_batch, register
from xform.rules.unary import stop_gradient
from xform.tree import tree_flatten, tree_leaves, tree_unflatten

# == contexts ===================================================================================

CONTEXTS = ("minimal", "default")
_context: contextvars.ContextVar[str] = contextvars.ContextVar("xform_context",
                                                               default="default")


def current_context() -> str:
    """The name of the active context: "default" unless switched with `context`."""
    return _context.get()


class _ContextSwitch:
    """Returned by `context`: the switch is made at once, and undone on leaving a `with`."""

    def __init__(self, name: str):
        self.name = name
        self._previous = _context.get()
        self._token = _context.set(name)
        _switched(self._previous, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        _context.reset(self._token)
        _switched(self.name, self._previous)


def _switched(old: str, new: str) -> None:
    # Cached graphs were staged in the other context (same values, other primitives).
    if old != new:
        from xform.runtime.cache import clear_cache
        clear_cache()


def context(name: str) -> _ContextSwitch:
    """Switch the primitive set staging uses: "default" (every primitive) or "minimal" (only
    what staging needs to be correct: default-only primitives such as `logsumexp` stage as
    their decomposition). Works as a statement or as a context manager.

    Mooncake's MinimalCtx/DefaultCtx. A switch clears xform's cache, so later calls re-stage;
    graphs of `@xform.function` callees staged before are kept (their values agree).
    >>> with xform.context("minimal"):
    ...     graph = xform.make_graph(xform.extend.softplus)(1.0)
    >>> [eqn.primitive.name for eqn in graph.equations]    # one `softplus` in "default"
    ['maximum', 'absolute', 'negative', 'exp', 'log1p', 'add']
    """
    if name not in CONTEXTS:
        raise TypeCheckError(f"unknown context {name!r}; contexts: {', '.join(CONTEXTS)}",
                             user_frame_info())
    return _ContextSwitch(name)


def primitives(name: str | None = None) -> frozenset:
    """The registered primitives of context `name` (default: the current one); the minimal
    set leaves out every primitive that declares a `decomposition`.

    >>> xform.extend.logsumexp_p in xform.extend.primitives("minimal")
    False
    """
    name = current_context() if name is None else name
    if name not in CONTEXTS:
        raise TypeCheckError(f"unknown context {name!r}; contexts: {', '.join(CONTEXTS)}",
                             user_frame_info())
    return frozenset(prim for prim, rules in RULES.items()
                     if name == "default" or rules.decomposition is None)


def bind_in_context(prim, *args, **params):
    """`prim.bind(*args, **params)`, or in the minimal context its decomposition: what the op
    of a default-only primitive calls.

    >>> from xform.extend import bind_in_context, softplus_p
    >>> def softplus(x): return bind_in_context(softplus_p, x)
    >>> softplus(np.array([-1000.0, 1000.0]))
    array([   0., 1000.])
    """
    rules = RULES.get(prim)
    if _context.get() == "minimal" and rules is not None and rules.decomposition is not None:
        return rules.decomposition(*args, **params)
    return prim.bind(*args, **params)


# == default-only primitives (each with its trace-through definition) =============================

def _as_real_float(x):
    """Integers and booleans are computed in float64, as np.logaddexp(0.0, x) does."""
    if type(x) is not Tracer and not isinstance(x, (float, np.ndarray, np.generic)):
        x = np.asarray(x)
    kind = aval(x).dtype.kind
    if kind == "c":
        raise TypeCheckError("complex input is not supported", user_frame_info())
    if kind != "f":
        x = x.astype(np.float64) if type(x) is Tracer else np.asarray(x, np.float64)
    return x


softplus_p = Primitive("softplus")


def _softplus_decomposition(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def _softplus_impl(x):
    if not (isinstance(x, np.ndarray) and x.ndim and x.dtype.kind == "f"):
        return _softplus_decomposition(x)
    # The same arithmetic in place on its own temporary: one allocation instead of five.
    out = np.abs(x)
    np.negative(out, out=out)
    np.exp(out, out=out)
    np.log1p(out, out=out)
    out += np.maximum(x, 0)
    return out


# d/dx = sigmoid(x) = e^(x - softplus(x)): the exponent is never positive, so never overflows.
register(softplus_p, impl=_softplus_impl, abstract_eval=elementwise_abstract_eval(_softplus_impl),
         **elementwise_rules(softplus_p, lambda t, x, ans: t * np.exp(x - ans)),
         batch=vectorized_batch(softplus_p), decomposition=_softplus_decomposition,
         symbolic_zeros=True, elementwise=True)


def softplus(x):
    """`log(1 + exp(x))` element-wise, without overflow; integers are computed in float64.

    One `softplus` equation in the default context, its decomposition in the minimal one.
    >>> xform.extend.softplus(np.array([-1000.0, 1000.0]))    # np.log1p(np.exp(1000.0)) is inf
    array([   0., 1000.])
    """
    return bind_in_context(softplus_p, _as_real_float(x))


logsumexp_p = Primitive("logsumexp")


def _logsumexp_impl(x, *, axes):
    shift = np.maximum.reduce(x, axis=axes, keepdims=True)
    shift = np.where(np.isfinite(shift), shift, 0)
    shifted = np.subtract(x, shift)
    # exp in place on the temporary; log(0) = -inf is right for a slice of -inf only.
    with np.errstate(divide="ignore"):
        out = np.log(np.add.reduce(np.exp(shifted, out=shifted) if shifted.ndim
                                   else np.exp(shifted), axis=axes))
    return out + np.reshape(shift, np.shape(out))


def _logsumexp_abstract_eval(x, *, axes):
    if any(x.shape[ax] == 0 for ax in axes):
        raise ValueError("logsumexp of a zero-size array: it has no maximum to shift by")
    return ShapedArray(reduced_shape(x.shape, axes), x.dtype)


def _softmax(x, ans, axes):
    return np.exp(x - expand_reduced(ans, aval(x).shape, axes))


def _logsumexp_decomposition(x, *, axes):
    # Shifting by the maximum avoids overflow; its derivative cancels, so it is not traced.
    shift = np.max(x, axis=axes, keepdims=True)
    shift = stop_gradient(np.where(np.isfinite(shift), shift, 0))
    out = np.log(np.sum(np.exp(x - shift), axis=axes))
    return out + np.reshape(shift, reduced_shape(np.shape(x), axes))


register(logsumexp_p, impl=_logsumexp_impl, abstract_eval=_logsumexp_abstract_eval,
         jvp=defjvp(logsumexp_p, lambda t, x, *, ans, axes:
                    np.sum(t * _softmax(x, ans, axes), axis=axes)),
         vjp=defvjp(lambda ct, x, *, ans, axes:
                    expand_reduced(ct, aval(x).shape, axes) * _softmax(x, ans, axes)),
         batch=reduction_batch(logsumexp_p), decomposition=_logsumexp_decomposition,
         symbolic_zeros=True)


def logsumexp(a, axis=None, keepdims=False):
    """`log(sum(exp(a), axis))` without overflow (scipy.special.logsumexp without `b` and
    `return_sign`); integers are computed in float64.

    One `logsumexp` equation in the default context, its decomposition in the minimal one.
    >>> xform.extend.logsumexp(np.array([1000.0, 1000.0]))    # 1000 + log(2)
    np.float64(1000.6931471805599)
    """
    x = _as_real_float(a)
    shape = aval(x).shape
    axes = normalize_axes(axis, len(shape))
    out = bind_in_context(logsumexp_p, x, axes=axes)
    return np.reshape(out, reduced_shape(shape, axes, keepdims=True)) if keepdims else out


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
    it once per example (see `xform.rules.registry.loop_batch`) unless a batch rule is added
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
_USER_OVERLAYS: dict = {}  # overlayable wrapper -> replacement
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


def overlayable(fun):
    """Let `fun` be overlaid: the returned function calls the overlay registered for it while
    xform stages, and `fun` otherwise (and until one is registered).

    >>> @xform.extend.overlayable
    ... def log1pexp(x):
    ...     return np.log(1 + np.exp(x))
    >>> log1pexp(0.0) == np.log(2.0)    # no overlay registered: `fun` itself runs
    np.True_
    """
    # Keyed by `fun`, not by `dispatch`: a function closing over itself would make the
    # dependency recorder (xform.dependencies) recurse forever.
    @functools.wraps(fun)
    def dispatch(*args, **kwargs):
        replacement = _USER_OVERLAYS.get(fun)
        if replacement is None or current_builder() is None:
            return fun(*args, **kwargs)
        return _inside(fun, replacement, fun)(*args, **kwargs)
    dispatch.overlayable = True
    return dispatch


def overlay(target, replacement=None):
    """Register `replacement` as the definition of `target` that only xform's staging sees
    (Mooncake's `@mooncake_overlay`): e.g. a numerically stable version, or one written with
    stageable operations. Use as a decorator, `@xform.overlay(np.linalg.norm)`, or call
    `overlay(target, replacement)`; `remove_overlay(target)` undoes it.

    `target` is a numpy function or ufunc, or a function made `overlayable`. Numpy functions
    need no cooperation: staging reaches them through `__array_function__` /
    `__array_ufunc__` and the tables in xform.numpy, where the overlay takes precedence.
    Python offers no such hook for an arbitrary function (Julia's method table, which
    Mooncake's interpreter consults, has no analogue), so a user function opts in with
    `@xform.extend.overlayable`; rebinding module attributes instead would miss `from m import
    f` copies and change the function outside staging too. Inside the replacement, calling
    `target` means its original definition. Registering clears xform's cache so that cached
    stagings see the overlay.

    >>> log1pexp = xform.extend.overlayable(lambda x: np.log(1 + np.exp(x)))
    >>> @xform.overlay(log1pexp)
    ... def _(x):
    ...     return xform.extend.softplus(x)
    >>> xform.grad(log1pexp)(1000.0)    # staged through the overlay: 1.0, not nan
    np.float64(1.0)
    >>> xform.extend.remove_overlay(log1pexp)
    """
    if replacement is None:
        return functools.partial(overlay, target)
    from xform.runtime.cache import clear_cache
    if getattr(target, "overlayable", False):
        _USER_OVERLAYS[target.__wrapped__] = replacement
    else:
        table = _numpy_table(target)
        if table is None:
            raise TypeCheckError(
                f"cannot overlay {getattr(target, '__name__', target)!r}: it is neither a "
                "numpy function nor decorated with @xform.extend.overlayable",
                user_frame_info(), "decorate the function's definition with "
                "@xform.extend.overlayable (Python cannot intercept calls of other functions)")
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
    from xform.runtime.cache import clear_cache
    if getattr(target, "overlayable", False) and target.__wrapped__ in _USER_OVERLAYS:
        del _USER_OVERLAYS[target.__wrapped__]
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


__all__ = ["CONTEXTS", "Undefined", "Zero", "bind_in_context", "context", "current_context",
           "logsumexp", "logsumexp_p", "loop_batch", "non_differentiable", "overlay",
           "overlayable", "primitives", "remove_overlay", "softplus", "softplus_p"]
