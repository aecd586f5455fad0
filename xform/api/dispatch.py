"""The dispatch every entry point shares: signature keys of flattened arguments, their
abstract values, and the cached call path (`CachedCall`, and `Transformed` for the transforms),
which finds compiled code per signature, builds it on a miss, and under an enclosing staging
re-emits the graph instead of running it.
"""
from __future__ import annotations

import functools

import numpy as np

from xform.api.pipeline import finish_graph
from xform.errors import TypeCheckError
from xform.ir.avals import ShapedArray
from xform.ir.builder import current_builder
from xform.ir.interpret import eval_graph
from xform.ir.tracer import Tracer
from xform.runtime.cache import CACHE
from xform.source_info import user_frame_info
from xform.tree import tree_flatten

_SCALAR_SIGNATURES = {
    float: ((), np.dtype(np.float64), True), int: ((), np.dtype(np.int64), True),
    bool: ((), np.dtype(bool), False), complex: ((), np.dtype(np.complex128), True),
    **{t: ((), np.dtype(t), False) for t in (np.float64, np.float32, np.int64, np.int32,
                                            np.bool_, np.complex128)}}


# The cached call path runs on every call, so it binds what it needs once: the current
# builder's getter without the current_builder() call around it, numpy's array type. Its
# functions take the first argument as a parameter of its own, so that the common call, on one
# argument, packs no tuple; _NO_ARGUMENT is that parameter's value in a call without arguments.
_ndarray = np.ndarray
_NO_ARGUMENT = object()


def _arg_key(arg):
    """The cached call path's key of one flat argument, or None when it is not flat: the
    type of a scalar (which fixes its signature), (shape, dtype) of an array."""
    kind = type(arg)
    if kind is _ndarray:
        return (arg.shape, arg.dtype)
    return kind if kind in _SCALAR_SIGNATURES else None


def _flat_signature(args):
    """The cached call path's key of several flat arguments (arrays and scalars only), or
    None: their `_arg_key`s, computed in one pass."""
    signature = []
    for arg in args:
        kind = type(arg)
        if kind is _ndarray:
            signature.append((arg.shape, arg.dtype))
        elif kind in _SCALAR_SIGNATURES:
            signature.append(kind)
        else:
            return None
    return tuple(signature)


def leaf_signature(leaf):
    """A cheap hashable stand-in for a leaf's aval (the cached call path uses it)."""
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
    raise TypeCheckError(f"argument of type {type(leaf).__name__} is not an array or scalar; "
                         "xform transforms take arrays, numbers and pytrees of them",
                         user_frame_info())


def aval_of_signature(signature) -> ShapedArray:
    shape, dtype, weak = signature
    return ShapedArray(shape, dtype, weak)


def normalize_argnums(argnums, n_args):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    result = []
    for i in nums:
        if not -n_args <= i < n_args:
            raise TypeCheckError(f"argnums {argnums} out of range for {n_args} arguments",
                                 user_frame_info())
        result.append(i % n_args)
    return tuple(result)


def run(graph, args):
    """Run `graph`: re-emit it into the enclosing staging, or call its compiled code."""
    if current_builder() is not None:
        return eval_graph(graph, *args)
    return CACHE.compiled(graph)(*args)


class CachedCall:
    """The cached call path shared by `jit` and the transforms: flat arguments find their
    entry with no pytree work, one lookup and one check (False once the entry has left the
    cache); anything else goes to `_build_and_call(args)`, which files what it builds with
    `_remember`. One argument, the common case, is keyed without building a tuple; the key
    of an argument that is not flat is never filed, so it misses.
    """

    def __init__(self):
        self._one_arg_entries = {}  # an argument's `_arg_key` -> entry
        self._flat_entries = {}     # several arguments' `_flat_signature` -> entry

    def __call__(self, first=_NO_ARGUMENT, /, *rest):
        if rest or first is _NO_ARGUMENT:
            return self._call_several(() if first is _NO_ARGUMENT else (first, *rest))
        kind = type(first)
        entry = self._one_arg_entries.get((first.shape, first.dtype) if kind is _ndarray
                                          else kind)
        if entry is not None and entry.valid() and current_builder() is None:
            entry.hits += 1
            fn, finish = entry.value
            return finish(fn(first))
        return self._build_and_call((first,))

    def _call_several(self, args):
        entry = self._flat_entries.get(_flat_signature(args))
        if entry is not None and entry.valid() and current_builder() is None:
            entry.hits += 1
            fn, finish = entry.value
            return finish(fn(*args))
        return self._build_and_call(args)

    def _build_and_call(self, args):
        raise NotImplementedError

    def _remember(self, args, entry) -> None:
        """File `entry` for the cached path when `args` are flat."""
        if len(args) == 1:
            key = _arg_key(args[0])
            if key is not None:
                self._one_arg_entries[key] = entry
        else:
            signature = _flat_signature(args)
            if signature is not None:
                self._flat_entries[signature] = entry


class Transformed(CachedCall):
    """A transformed function with a per-signature cache of (graph, unflatten).

    `build(in_tree, avals) -> (graph, captured, unflatten)`; the graph's inputs are the
    argument leaves followed by `captured`. `finish(graph)` is the graph compiled.
    """

    def __init__(self, fun, kind, build, params=(), finish=finish_graph):
        super().__init__()
        self.fun = fun
        self.kind = kind
        self.build = build
        self.params = params
        self.finish = finish
        functools.update_wrapper(self, fun, updated=())

    def _build_and_call(self, args):
        leaves, in_tree = tree_flatten(args)
        signature = tuple(map(leaf_signature, leaves))
        if current_builder() is not None:
            graph, captured, unflatten = self.build(in_tree,
                                                    [aval_of_signature(s) for s in signature])
            return unflatten(eval_graph(graph, *leaves, *captured))

        def make():
            graph, captured, unflatten = self.build(in_tree,
                                                    [aval_of_signature(s) for s in signature])
            assert not captured, "nothing can be captured outside any staging"
            return CACHE.compiled(self.finish(graph)).fn, unflatten
        entry = CACHE.build(self.fun, (self.kind, self.params, in_tree, signature), make)
        self._remember(args, entry)
        fn, unflatten = entry.value
        return unflatten(fn(*leaves))
