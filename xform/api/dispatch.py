"""The dispatch every entry point shares: signature keys of flattened arguments, their
abstract values, and the cached call path (`CachedCall`, and `Transformed` for the transforms),
which finds compiled code per signature, builds it on a miss, and under an enclosing staging
re-emits the graph instead of running it.
"""
from __future__ import annotations

import collections.abc
import functools
import inspect
import operator
import sys
import types
import warnings
import weakref

import numpy as np

from xform.api.pipeline import (arguments_for_backend, backend_in_use, backend_unchanged,
                                checked_backend, finish_graph, first_tier_graph,
                                using_backend)
from xform.codegen.xla import DEVICE_ARRAY, is_device_array
from xform.errors import RestagingWarning, TypeCheckError, XformError, out_of_memory_error
from xform.ir.avals import ShapedArray, shaped_array
from xform.ir.builder import KnownValues, current_builder, known_values
from xform.ir.values import recording_decisions, staged_constants, staged_values
from xform.ir.interpret import eval_graph, run_concrete
from xform.ir.tracer import Tracer
from xform.numpy.random import note_unstaged, stand_in_for_static
from xform.runtime.cache import CACHE
from xform.runtime.effects import hidden_effects_found, walk_incomplete
from xform.runtime.paths import Path, Paths
from xform.runtime.tiers import FirstTier, first_call_tier
from xform.source_info import user_frame_info
from xform.tracebacks import hide_internal_frames
from xform.tree import keystr, tree_flatten, tree_flatten_with_path, tree_unflatten

_SCALAR_SIGNATURES = {
    float: ((), np.dtype(np.float64), True), int: ((), np.dtype(np.int64), True),
    bool: ((), np.dtype(bool), False), complex: ((), np.dtype(np.complex128), True),
    **{t: ((), np.dtype(t), False) for t in (np.float64, np.float32, np.int64, np.int32,
                                            np.bool_, np.complex128)}}


# The cached call path runs on every call, so it binds what it needs once: numpy's array
# type, the kinds of static values it keys by value. Its functions take the first argument as a
# parameter of its own, so that the common call, on one argument, packs no tuple; _NO_ARGUMENT
# is that parameter's value in a call without arguments.
_ndarray = np.ndarray
_NO_ARGUMENT = object()

# Static values the cached path keys by value; functions hash by identity (held by the key).
_VALUE_KEYED = frozenset({int, bool, str, types.FunctionType, types.BuiltinFunctionType,
                          types.MethodType, np.ufunc})
_STATIC_KEY = object()  # opens the key of a call with static values (`call_key`)


def call_key(args, by_value=False):
    """The cached call path's key of flat arguments: the tuple of their own keys, or None
    when one is not flat. An argument's own key is the type of a scalar (which fixes its
    signature), (shape, dtype) of an array, (type, shape, dtype) of a jax array (filed only
    for the XLA backend, which takes them as they are); with `by_value`, (type, value) of the
    `_VALUE_KEYED` kinds, so that an int a transform reads is keyed by its type and a static
    one by its value, and the key opens with `_STATIC_KEY`. A call on one argument is filed
    under that argument's own key (`CachedCall.__call__` computes it inline), not a tuple.

    Keys of different calls never meet: a `by_value` key opens with a marker no other key
    holds; several arguments' key is a tuple of their own keys, which are types or tuples
    opening with a type or a shape, so it is never one argument's type, its (shape, dtype)
    (a shape's items are ints) or its (jax type, shape, dtype) (a jax type is never an
    argument's own key)."""
    key = [_STATIC_KEY] if by_value else []
    for arg in args:
        kind = type(arg)
        if kind is _ndarray:
            key.append((arg.shape, arg.dtype))
        elif by_value and kind in _VALUE_KEYED:
            key.append((kind, arg))
        elif kind in _SCALAR_SIGNATURES:
            key.append(kind)
        elif kind is DEVICE_ARRAY[0]:
            key.append((kind, arg.shape, arg.dtype))
        else:
            return None
    return tuple(key)


# The build path keys a leaf by its aval's (shape, dtype, weak_type) instead: it takes any
# leaf (tracers, numpy scalars of every dtype, array subclasses) and names a wrong one in its
# error, while the cached path's key is the cheapest that fixes the aval of the few exact types
# it serves (a scalar's is its type, found with no work) and keys statics by value.
def leaf_signature(leaf):
    """A cheap hashable stand-in for a leaf's aval: the build path's key."""
    kind = type(leaf)
    if kind is np.ndarray:
        return (leaf.shape, leaf.dtype, False)
    signature = _SCALAR_SIGNATURES.get(kind)
    if signature is not None:
        return signature
    if kind is Tracer:
        aval = leaf.aval
        return (aval.shape, aval.dtype, aval.weak_type)
    if isinstance(leaf, np.generic) and leaf.dtype.kind in "biufc":
        return ((), leaf.dtype, False)
    if isinstance(leaf, np.ndarray):
        return (leaf.shape, leaf.dtype, False)
    if is_device_array(leaf):   # stays where it is under backend="xla"
        return (tuple(leaf.shape), np.dtype(leaf.dtype), False)
    raise TypeCheckError(f"argument of type {type(leaf).__name__} is not an array or scalar; "
                         "xform transforms take arrays, numbers and pytrees of them",
                         user_frame_info())


def not_a_leaf_hint(leaf, nested=False) -> str:
    """How to pass `leaf`, which is not an array (`nested`: inside a list, tuple or dict).
    Objects of the user's own classes are pytrees already (xform.tree); what reaches here is
    a library's object: registered, its arrays are differentiated; else it is passed as it
    is, static."""
    static = ("name it in static_argnums or static_argnames (jit, grad, jacobians); "
              "arguments grad does not differentiate may be any Python value")
    if nested:
        static = ("a setting kept with the parameters (a dict's 'activation': 'tanh') is not "
                  "one: pass it as its own argument (" + static + "), or keep settings in an "
                  "object of your class, whose strings and ints are static")
    if isinstance(leaf, collections.abc.Iterator):     # a generator's numbers, meant as data
        return ("make it an array first: np.fromiter(xs, dtype=float) or np.array(list(xs)) "
                "(an iterator is used up by one reading)")
    if not hasattr(leaf, "__dict__") or isinstance(leaf, type) or callable(leaf):
        return static
    name = type(leaf).__name__
    return (f"to differentiate its arrays, register {name} as a pytree: "
            f"xform.tree.register_pytree_node({name}, flatten, unflatten), flatten returning "
            f"(its arrays, the rest); to pass it unchanged, {static}")


def leaf_signatures(leaves, args, statics=None) -> tuple:
    """`leaf_signature` of each leaf of the flattened `args` (STATIC_SIGNATURE for the
    static ones); a leaf that is not an array is named by its key path, e.g. `args[1]['b']`."""
    try:
        if statics:
            return tuple(STATIC_SIGNATURE if j in statics else leaf_signature(leaf)
                         for j, leaf in enumerate(leaves))
        return tuple(map(leaf_signature, leaves))
    except TypeCheckError:
        for path, leaf in tree_flatten_with_path(args)[0]:
            try:
                leaf_signature(leaf)
            except TypeCheckError:
                raise TypeCheckError(
                    f"argument args{keystr(path)} of type {type(leaf).__name__} is not an "
                    "array or scalar; xform transforms take arrays, numbers and pytrees of "
                    "them", user_frame_info(), not_a_leaf_hint(leaf, len(path) > 1)) from None
        raise


def aval_of_signature(signature) -> ShapedArray:
    # From the aval memo: the avals of a signature's every first call are then one object,
    # which dict lookups keyed by avals match by identity.
    return shaped_array(*signature)


def normalize_argnums(argnums, n_args):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    result = []
    for i in nums:
        if not isinstance(i, int):
            raise TypeCheckError(f"argnums must be ints, got {argnums!r}", user_frame_info(),
                                 "positions are ints or tuples of ints, e.g. argnums=(0, 2); "
                                 "to name arguments, use static_argnames (jit)")
        if not -n_args <= i < n_args:
            raise TypeCheckError(f"argnums {argnums} out of range for {n_args} arguments",
                                 user_frame_info(), "argnums counts the positional "
                                 "arguments of the call from 0 (negative from the end)")
        result.append(i % n_args)
    return tuple(result)


def present_argnums(nums, n_args):
    """The static positions of a call with `n_args` arguments: those not passed (their
    defaults apply) are left out, as in JAX."""
    return tuple(i % n_args for i in nums if -n_args <= i < n_args)


def run(graph, args):
    """Run `graph`: re-emit it into the enclosing staging, or call its compiled code."""
    if current_builder() is not None:
        return eval_graph(graph, *args)
    return CACHE.compiled(graph)(*args)


class CachedCall:
    """The cached call path shared by `jit` and the transforms: flat arguments find their
    entry with no pytree work, one lookup of their `call_key` and one check (False once the
    entry has left the cache); anything else goes to `_build_and_call(args)`, which files what
    it builds with `_remember`. One argument, the common case, is keyed without building a
    tuple; the key of an argument that is not flat is never filed, so it misses. An entry's
    value is `(code, finish)`: the result is `finish(code(*args))`, or with no finish
    `code(*args)` (`steady_value`).

    One table holds every entry: those of calls with static values under their `by_value`
    key, as `(entry, static positions)`, looked up only when the other key found nothing and
    some were filed.
    """

    def __init__(self):
        self._entries = {}              # call_key -> entry, or (entry, static positions)
        self._static_entry_count = 0    # how many of them are keyed by static values

    def __call__(self, first=_NO_ARGUMENT, /, *rest):
        try:    # free while nothing is raised: no frame is added to the cached path
            if rest or first is _NO_ARGUMENT:
                return self._call_several(() if first is _NO_ARGUMENT else (first, *rest))
            # call_key of one argument, inlined: a scalar's key is its type, looked up first
            kind = type(first)
            entry = self._entries.get(kind)
            if entry is None:
                entry = self._entries.get(
                    (first.shape, first.dtype) if kind is _ndarray
                    else (kind, first.shape, first.dtype) if kind is DEVICE_ARRAY[0] else None)
            if entry is not None and entry.valid() and current_builder() is None:
                entry.hits += 1
                fn, finish = entry.value
                return fn(first) if finish is None else finish(fn(first))
            return self._build_and_call((first,))
        except Exception as err:
            hide_internal_frames(err)
            raise

    def _call_several(self, args):
        entry = self._entries.get(call_key(args))
        if entry is not None:
            if entry.valid() and current_builder() is None:
                entry.hits += 1
                fn, finish = entry.value
                return fn(*args) if finish is None else finish(fn(*args))
        elif self._static_entry_count:
            return self._call_with_statics(args)
        return self._build_and_call(args)

    def _call_with_statics(self, args):
        """The cached path of flat arguments some of which are static Python values (ints,
        bools, strings, functions): keyed by those values."""
        found = self._entries.get(call_key(args, by_value=True))
        if found is not None:
            entry, static_positions = found
            if entry.valid() and current_builder() is None:
                entry.hits += 1
                fn, finish = entry.value
                results = fn(*[False if i in static_positions else arg
                               for i, arg in enumerate(args)])
                return results if finish is None else finish(results)
        return self._build_and_call(args)

    def _build_and_call(self, args):
        raise NotImplementedError

    backend = None

    def _remember(self, args, statics, entry) -> None:
        """File `entry` for the cached path when `args` are flat (and, with jax arrays among
        them, XLA runs it: other backends read them into numpy first, on the uncached path).
        With `statics` (their positions), when there are several arguments and every static
        one is of a kind keyed by value (a static float is not: it misses), up to twice
        STATIC_RESTAGING_LIMIT such entries."""
        if not statics:
            key = call_key(args)
            # (the jax arrays of flat arguments are of the one type call_key files)
            if key is not None and (DEVICE_ARRAY[0] not in map(type, args)
                                    or backend_in_use(self.backend) == "xla"):
                self._entries[key[0] if len(args) == 1 else key] = entry
            return
        if backend_in_use(self.backend) != "xla" and any(map(is_device_array, args)):
            return
        if len(args) < 2 or self._static_entry_count >= 2 * STATIC_RESTAGING_LIMIT:
            return
        if any(type(args[j]) not in _VALUE_KEYED for j in statics):
            return
        key = call_key(args, by_value=True)
        if key is not None:
            self._static_entry_count += key not in self._entries
            self._entries[key] = (entry, frozenset(statics))


# -- static arguments ---------------------------------------------------------------------------
# A static argument is a Python value the function sees as it is (an int usable in a slice or
# `range`, a function, a string), keyed by value: a new value stages the function again. Where a
# transform does not differentiate or map an argument ("automatic" positions), its Python
# ints and bools and its non-array leaves are static; `static_argnums`/`static_argnames` make
# any argument static ("explicit" positions).

#: Stagings for new static values per function and transform before `RestagingWarning`.
STATIC_RESTAGING_LIMIT = 32
STATIC_SIGNATURE = ((), np.dtype(bool), False)  # a static leaf's unused graph input
_TRACED_LEAF_TYPES = (np.ndarray, np.generic, float, complex, Tracer)


class _StaticSlot:
    """Where an explicitly static argument sits while the others are flattened (a leaf)."""


_STATIC_SLOT = _StaticSlot()


class _ByIdentity:
    """The key of an unhashable static value: the object itself (held, so its id is not
    reused while the key lives)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __hash__(self):
        return id(self.value)

    def __eq__(self, other):
        return type(other) is _ByIdentity and other.value is self.value


def static_key(value):
    # The type is part of the key: 1, 1.0 and True are equal and hash alike.
    try:
        hash(value)
    except TypeError:
        return _ByIdentity(value)
    return (type(value), value)


def is_automatic_static(leaf) -> bool:
    """Whether a leaf at a position no transform reads is static: Python ints and bools, and
    whatever is not an array or a float (functions, strings, objects).

    >>> from xform.api.dispatch import is_automatic_static
    >>> [is_automatic_static(x) for x in (3, True, np.sin, "mode", 0.5, np.int64(3))]
    [True, True, True, True, False, False]
    """
    kind = type(leaf)
    return kind is int or kind is bool or not isinstance(leaf, _TRACED_LEAF_TYPES)


def split_static(args, explicit, automatic, is_leaf=None):
    """`(leaves, in_tree, statics)`: the arguments flattened (an explicit static argument as
    one leaf) and `{leaf index: value}` of the static leaves."""
    marked = tuple(_STATIC_SLOT if i in explicit else a for i, a in enumerate(args))
    leaves, in_tree = tree_flatten(marked, is_leaf=is_leaf)
    statics = {}
    start = 0
    for i, child in enumerate(in_tree.children):
        if i in explicit:
            statics[start] = args[i]
        elif i in automatic:
            for j in range(start, start + child.num_leaves):
                if is_automatic_static(leaves[j]):
                    statics[j] = leaves[j]
        start += child.num_leaves
    return leaves, in_tree, statics


def with_statics(fun, in_tree, statics, keywords=None):
    """`fun` taking the static leaves' values in place of its staged inputs (and, when given,
    the dict `keywords` as the last argument, passed by keyword)."""
    if not statics and keywords is None:
        return fun

    def staged(*args):
        leaves = tree_flatten(args)[0] if statics else None
        if statics:
            for j, value in statics.items():
                leaves[j] = stand_in_for_static(value)   # a generator: its draws staged
            args = tree_unflatten(in_tree, leaves)
        if keywords is not None:
            return fun(*args[:-1], **args[-1])
        return fun(*args)
    return staged


# function -> {transform kind: stagings for new static values}; functions that cannot be
# weakly referenced (builtins) are counted by id, which lives as long as they do.
_restagings = weakref.WeakKeyDictionary()
_restagings_by_id: dict = {}


def count_restaging(fun, kind) -> None:
    """Count a staging for new static values; past STATIC_RESTAGING_LIMIT, warn once."""
    try:
        counts = _restagings.setdefault(fun, {})
    except TypeError:
        counts = _restagings_by_id.setdefault(id(fun), {})
    count = counts[kind] = counts.get(kind, 0) + 1
    if count == STATIC_RESTAGING_LIMIT + 1:
        name = getattr(fun, "__name__", repr(fun))
        source = user_frame_info()
        message = (f"{kind} of '{name}' was staged for {count} different values of its static "
                   "arguments (Python ints and bools, and non-array objects, where nothing is "
                   "differentiated or mapped, and static_argnums): each new value stages it "
                   "again; pass a varying number as an array (np.asarray(i)) to trace it")
        if source is None:
            warnings.warn(message, RestagingWarning, stacklevel=3)
        else:
            warnings.warn_explicit(message, RestagingWarning, source.filename, source.lineno)


def static_positions(fun, static_argnums, static_argnames):
    """The explicit static positions (normalized per call) of `static_argnums` and of the
    positional parameters of `fun` named in `static_argnames`; and the keyword-only names."""
    if static_argnums is None:
        static_argnums = ()
    if static_argnums == () and not static_argnames:
        return (), ()
    nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    names = ((static_argnames,) if isinstance(static_argnames, str)
             else tuple(static_argnames or ()))
    keyword_only = ()
    if names:
        try:
            params = list(inspect.signature(fun).parameters.values())
        except (TypeError, ValueError):
            params = []
        positional = [p.name for p in params
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        nums += tuple(positional.index(n) for n in names if n in positional)
        keyword_only = tuple(n for n in names if n not in positional)
    return tuple(dict.fromkeys(nums)), keyword_only


def accepts_keywords(fun) -> bool:
    """Whether calls of `fun` are likely to pass keywords: it has keyword-only or **kwargs
    parameters or defaults, or is not a plain function (a partial, a callable object). Read
    from the code object: transforms are often made anew for each call."""
    code = getattr(fun, "__code__", None)
    if code is None:
        return True
    return bool(code.co_kwonlyargcount or code.co_flags & inspect.CO_VARKEYWORDS
                or getattr(fun, "__defaults__", None))


def bind_keywords(fun, args, kwargs):
    """`(args, keywords)`: keyword arguments moved to their positions; the keyword-only ones
    (or those of **kwargs) left in the dict `keywords`."""
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except TypeError as err:
        raise TypeCheckError(f"'{getattr(fun, '__name__', fun)}': {err}",
                             user_frame_info()) from None
    return tuple(bound.args), dict(bound.kwargs)


_NO_STATICS = ((), ())


class StaticPositions:
    """`(n_args) -> (explicit, automatic)`, the static positions `of(n_args)` gives (see
    `split_static`), remembered per argument count. A transform made anew for each call
    (`grad(f)(x)` in a loop) is given one shared by the transforms of the same options, so
    that its first call finds them at once."""

    __slots__ = ("_of", "_positions")

    def __init__(self, of):
        self._of = of
        self._positions = {}

    def __call__(self, n_args):
        positions = self._positions.get(n_args)
        if positions is None:
            positions = self._positions[n_args] = self._of(n_args)
        return positions


def _no_static_positions(n_args):
    return _NO_STATICS


class Transformed(CachedCall):
    """A transformed function with a per-signature cache of (graph, unflatten).

    `build(fun, in_tree, avals) -> (graph, captured, unflatten)` stages `fun` (the user's
    function with static values put in) on `avals` laid out as `in_tree`; the graph's inputs
    are the argument leaves followed by `captured`. A static leaf gets an unused input.
    `finish(graph)` is the graph compiled. `static(n_args) -> (explicit, automatic)` gives
    the static positions (see `split_static`); `static_keywords` names keyword-only
    arguments that are static; other keyword-only arguments form one more argument, static
    where `keywords_automatic` (the transform reads none of them) and traced otherwise.
    """

    def __init__(self, fun, kind, build, params=(), finish=finish_graph, static=None,
                 static_keywords=(), keywords_automatic=True, first_call=None, inline=False,
                 backend=None):
        super().__init__()
        self.backend = checked_backend(backend) if backend is not None else None
        self.fun = fun
        self.inline = inline
        self.kind = kind
        self.build = build
        self.first_call = first_call
        self.params = params
        self.finish = finish
        # (remembered per argument count: this is on the path of every first call)
        self._static_positions = (_no_static_positions if static is None
                                  else static if type(static) is StaticPositions
                                  else StaticPositions(static))
        self.static_keywords = static_keywords
        self.keywords_automatic = keywords_automatic
        functools.update_wrapper(self, fun, updated=())

    def __get__(self, instance, owner=None):
        # `@xform.jit` on a method binds as a function does: the object (a pytree when of the
        # user's class, its arrays traced) is the first argument
        return self if instance is None else types.MethodType(self, instance)

    def _build_and_call(self, args, keywords=None):
        explicit, automatic = self._static_positions(len(args))
        static_keywords = ()
        if keywords:
            static_keywords = tuple((name, static_key(keywords.pop(name)))
                                    for name in sorted(keywords) if name in self.static_keywords)
            n_args = len(args)
            args = (*args, keywords)
            if self.keywords_automatic:
                automatic = (*automatic, n_args)
        else:
            keywords = None
        if explicit or automatic:
            leaves, in_tree, statics = split_static(args, explicit, automatic)
        else:
            leaves, in_tree = tree_flatten(args)
            statics = {}
        signature = leaf_signatures(leaves, args, statics)
        if statics:
            leaves = [False if j in statics else leaf for j, leaf in enumerate(leaves)]
        static_values = tuple(statics.values()) if statics else ()
        fixed = None
        if static_keywords:
            fixed = {name: stand_in_for_static(k.value if type(k) is _ByIdentity else k[1])
                     for name, k in static_keywords}
            static_values += tuple(fixed.values())

        if current_builder() is not None:
            fun = _with_static_values(self.fun, in_tree, statics, fixed, keywords)
            if self.inline:     # jit inside a staging: the function's equations, as they are
                return unflatten_call(fun, leaves, in_tree)
            graph, captured, unflatten = self.build(fun, in_tree,
                                                    [aval_of_signature(s) for s in signature],
                                                    known_values(leaves))
            return unflatten(eval_graph(graph, *leaves, *captured))

        statics_key = ((tuple((j, static_key(v)) for j, v in statics.items()), static_keywords)
                       if statics or static_keywords else _NO_STATICS)
        backend = self.backend
        # jax arrays go to XLA whatever its cost model says (xform.codegen.xla.lower)
        jax_arrays = "jax" in sys.modules and any(map(is_device_array, leaves))
        device_inputs = jax_arrays and backend_in_use(backend) == "xla"
        key = (self.kind, self.params, backend, device_inputs, in_tree, signature, statics_key)
        staging = _Staging(self, device_inputs, in_tree, signature, statics, fixed, keywords,
                           key)
        # (staging computes its values with numpy: jax arrays read into numpy first)
        host_leaves = arguments_for_backend(leaves, "numpy") if jax_arrays else leaves
        entry = CACHE.build(self.fun, key,
                            functools.partial(in_backend, backend, device_inputs,
                                              staging.first_entry, self.fun, host_leaves),
                            arguments=static_values)
        fn, unflatten = entry.value
        if type(fn) is FirstTier or type(fn) is Paths:
            fn.attach(entry)
        try:
            results = fn(*arguments_for_backend(leaves, backend) if jax_arrays else leaves)
        except MemoryError as err:
            raise out_of_memory_error(err) from None
        if keywords is None and len(leaves) == len(args):   # filed once a call succeeded
            self._remember(args, statics, entry)
        return results if unflatten is None else unflatten(results)


def _with_static_values(fun, in_tree, statics, fixed, keywords):
    """The user's `fun` with the static values put in (`fixed`: static keywords')."""
    if fixed:
        fun = functools.partial(fun, **fixed)
    return with_statics(fun, in_tree, statics, keywords)


class _Staging:
    """The stagings of one signature of a Transformed: its first path (`first_entry`, the
    value of its cache entry) and each later one (`staged_in_backend`, xform.runtime.paths),
    for the backend chosen at its first call. What an entry keeps holds neither the
    Transformed nor the user's function, only a weak reference to it (`held`): the entry
    must leave the cache when the function dies. (A path's staging keeps this record; a
    first tier's promotion does not, nor the call's arguments it holds.)
    """

    __slots__ = ("kind", "build", "first_call", "finish", "backend", "device_inputs",
                 "in_tree", "signature", "statics", "fixed", "keywords", "key", "held")

    def __init__(self, transformed, device_inputs, in_tree, signature, statics, fixed,
                 keywords, key):
        self.kind, self.build = transformed.kind, transformed.build
        self.first_call, self.finish = transformed.first_call, transformed.finish
        self.backend, self.device_inputs = transformed.backend, device_inputs
        self.in_tree, self.signature, self.key = in_tree, signature, key
        self.statics, self.fixed, self.keywords = statics, fixed, keywords
        self.held = None

    def first_entry(self, fun, leaves):
        """The value of the entry: `(code, finish)` of the first path `leaves` (jax arrays
        read into numpy) take, or its Paths; for the backend chosen here (`in_backend`)."""
        if self.statics or self.fixed:
            count_restaging(fun, self.kind)
        staged = self._staged_function(fun)
        run, unflatten, decisions, generators, record = self.stage_path(staged, leaves)
        if _impure and impure(fun):    # found drawing where no equation stands for the draw
            hidden_effects_found(fun)
        elif walk_incomplete():
            # Code the walk could not follow may draw where no equation stands for the
            # draw: the next staging of this path tells.
            pure = verified_pure(fun, self.key, decisions, record)
            if pure is None:
                note_unstaged()     # this call's entry only: the next call stages again
            elif not pure:
                hidden_effects_found(fun)
                note_impure(fun)
        if not decisions:
            return run, unflatten
        self.held = weak_holder(fun)
        return guarded_paths(self.held, self.kind, self.staged_in_backend, run, unflatten,
                             decisions, generators), _results

    def staged_in_backend(self, path_leaves):
        """A later path's staging (what `stage_path` gives), for the backend chosen here."""
        return in_backend(self.backend, self.device_inputs, self.stage_path,
                          self._staged_function(self.held()),
                          arguments_for_backend(path_leaves, "numpy"))

    def _staged_function(self, fun):
        """The user's `fun` with this signature's static values put in."""
        if not (self.statics or self.fixed or self.keywords is not None):
            return fun      # (the common case: no wrapper)
        return _with_static_values(fun, self.in_tree, self.statics, self.fixed,
                                   self.keywords)

    def stage_path(self, fun, host_leaves):
        """(run, unflatten, decisions, generators, record) of the path the leaves of a call
        take (`host_leaves`: its jax arrays read into numpy, since staging computes its values
        with numpy)."""
        avals = list(map(aval_of_signature, self.signature))
        known = KnownValues.of(host_leaves)
        # XLA's code from the first call: an interpreted one would compute numpy's bits
        tier = "compile" if backend_in_use() == "xla" else first_call_tier()
        build, first_call, finish, in_tree = self.build, self.first_call, self.finish, \
            self.in_tree
        with recording_decisions() as record:
            first = None
            if tier == "compile" or first_call is None:
                graph, captured, unflatten = build(fun, in_tree, avals, known)
                run, graph_of = None, lambda: graph
            else:
                run, graph_of, captured, unflatten, first = first_call(
                    fun, in_tree, avals, known)
            if run is None and tier != "compile":
                graph = graph_of()
                first_graph = first_tier_graph(graph, finish)
                run = functools.partial(run_concrete, first_graph)
                values = staged_values(first_graph)
                if values is not None:      # what staging computed, not computed again
                    first = functools.partial(run_concrete_known, first_graph, values)
        if captured:
            raise XformError("a traced value was captured outside any staging",
                             user_frame_info())
        generators = tuple(g for g, _ in record.generators.values()) if record.generators \
            else ()
        if tier == "compile":
            run, unflatten = steady_value(finish(graph), unflatten)
        else:
            # (not `self`: the first tier keeps no argument of the first call's)
            run = FirstTier(run, functools.partial(in_backend, self.backend, self.device_inputs,
                                                   _promoted, finish, graph_of, unflatten),
                            first)
        return run, unflatten, record.decisions, generators, record


def in_backend(backend, device_inputs, make, *args):
    """`make(*args)` with the builds inside finishing for `backend` and arguments among which
    are jax arrays (`device_inputs`) or not (no scope where it would change nothing: the
    common case, numpy's)."""
    if backend_unchanged(backend, device_inputs):
        return make(*args)
    with using_backend(backend, device_inputs):
        return make(*args)


def _promoted(finish, graph_of, unflatten):
    """A first tier's promotion (xform.runtime.tiers): the compiled code's results function
    and the entry's value from then on."""
    steady = steady_value(finish(graph_of()), unflatten)
    return results_of(*steady), steady


#: The finish of a result that is a graph's one output.
FIRST_RESULT = operator.itemgetter(0)


def steady_value(graph, unflatten) -> tuple:
    """`(code, finish)`, the value of a cache entry running `graph`, compiled, whose results
    `unflatten` makes: for the one output as it is (FIRST_RESULT), code returning it bare and
    no finish, since building a list and unpacking it cost a scalar call a tenth of its time."""
    if unflatten is FIRST_RESULT and len(graph.outputs) == 1:
        return CACHE.compiled(graph, bare=True).fn, None
    return CACHE.compiled(graph).fn, unflatten


def results_of(code, finish):
    """A function of the arguments returning the results of an entry value `(code, finish)`,
    as a list when there is no finish."""
    if finish is None:
        return lambda *args: [code(*args)]
    return code


# id -> weak reference, of the functions with effects found by restaging: a plain dict, whose
# emptiness every first call tests in C (a WeakSet's would cost a frame)
_impure: dict = {}


def impure(fun) -> bool:
    held = _impure.get(id(fun))
    return held is not None and held() is fun


def note_impure(fun) -> None:
    key = id(fun)

    def forget(held):     # (`fun` died: its id may be another function's next)
        if _impure.get(key) is held:
            del _impure[key]
    try:
        _impure[key] = weakref.ref(fun, forget)
    except TypeError:
        pass


# function -> entry key -> a path's decisions -> the constants its last staging computed
_unverified: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def verified_pure(fun, key, decisions, record):
    """Whether `fun`, whose walk could not follow all the code it runs, computed the same
    constants (`staged_constants`) on the path `decisions` as its previous staging of that
    path: True when it did, False when not (an effect no equation stands for), None at the
    path's first staging, whose entry then serves its own call only, so that the next call
    stages again and tells. (Staging twice in one call would draw twice: the user's stream
    would lose a draw eager numpy makes.)"""
    constants = staged_constants(record)
    if constants is None:       # a staging without values: nothing to compare
        return True
    try:
        paths = _unverified.setdefault(fun, {}).setdefault(key, {})
    except TypeError:           # not weakly referable: staged on every call, as one drawing
        return None
    before = paths.pop(tuple(decisions), None)
    if before is None:
        paths[tuple(decisions)] = constants
        return None
    return len(before) == len(constants) and all(map(_same_bits, before, constants))


def _same_bits(x, y) -> bool:
    x, y = np.asarray(x), np.asarray(y)
    return x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()


def run_concrete_known(graph, known, args):
    return run_concrete(graph, args, known)


def _results(results):
    """The unflatten of an entry whose Paths unflatten each path's results themselves."""
    return results


def unflatten_call(fun, leaves, in_tree):
    return fun(*tree_unflatten(in_tree, leaves))


def weak_holder(fun):
    """`() -> fun`, holding `fun` weakly where it can be: an entry's later stagings reach
    the function through it, and a function's death takes its entries out of the cache."""
    try:
        return weakref.ref(fun)
    except TypeError:   # the cache holds such a function strongly anyway
        return lambda: fun


def guarded_paths(held, kind, stage_path, run, unflatten, decisions, generators):
    """The Paths of an entry whose first path (`run`, `unflatten`) decided `decisions`;
    `held() -> the function` (`weak_holder`)."""
    fun = held()

    def stage(leaves, entry):
        (path_run, path_unflatten, path_decisions, path_generators, _), keep = \
            CACHE.stage_path(held(), lambda: stage_path(leaves), entry)
        return finished(path_run, path_unflatten), path_decisions, path_generators, keep
    name = f"{kind} of '{getattr(fun, '__qualname__', getattr(fun, '__name__', repr(fun)))}'"
    return Paths(name, stage, Path(finished(run, unflatten), decisions, generators))


def finished(code, finish):
    """A function of the arguments returning the finished result of an entry value
    `(code, finish)`."""
    if finish is None:
        return code
    return lambda *args: finish(code(*args))


class KeywordCall:
    """The call of a CachedCall that takes keyword arguments (bound to their positions by
    the function's signature); mixed in before it, for functions whose calls are likely to
    pass keywords (`accepts_keywords`) or transforms given `static_argnames`. The others take
    positional arguments only, which keeps their cached call path free of a keyword dict."""

    def __call__(self, first=_NO_ARGUMENT, /, *rest, **kwargs):
        try:    # as CachedCall.__call__'s
            if kwargs:
                args = () if first is _NO_ARGUMENT else (first, *rest)
                args, keywords = bind_keywords(self.fun, args, kwargs)
                return self._build_and_call(args, keywords or None)
            # CachedCall.__call__'s path, repeated: calling it would cost a frame (about
            # 25% of grad's cached call on a float), and **kwargs on CachedCall.__call__ an
            # empty dict on every call of every transform (about 10%).
            if rest or first is _NO_ARGUMENT:
                return self._call_several(() if first is _NO_ARGUMENT else (first, *rest))
            kind = type(first)
            entry = self._entries.get(kind)
            if entry is None:
                entry = self._entries.get(
                    (first.shape, first.dtype) if kind is _ndarray
                    else (kind, first.shape, first.dtype) if kind is DEVICE_ARRAY[0] else None)
            if entry is not None and entry.valid() and current_builder() is None:
                entry.hits += 1
                fn, finish = entry.value
                return fn(first) if finish is None else finish(fn(first))
            return self._build_and_call((first,))
        except Exception as err:
            hide_internal_frames(err)
            raise


class KeywordTransformed(KeywordCall, Transformed):
    """A Transformed that takes keyword arguments."""


def transformed(fun, kind, build, params=(), finish=finish_graph, static=None,
                static_keywords=(), keywords_automatic=True, keywords=False, first_call=None,
                inline=False, backend=None):
    """A Transformed, taking keyword arguments when `keywords` or `fun` may need them."""
    cls = KeywordTransformed if keywords or accepts_keywords(fun) else Transformed
    return cls(fun, kind, build, params, finish, static, static_keywords, keywords_automatic,
               first_call, inline, backend)
