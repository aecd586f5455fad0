"""Hooks through which ir, transforms and rules use what the layers above them provide: running
a graph, mapping a scalar graph over chunks, caching stagings and what is built from graphs,
and the passes a derived graph goes through. xform.runtime.cache installs the compiled, cached
versions at import; until then graphs are interpreted and nothing is cached or optimized."""
from __future__ import annotations

import threading
import weakref

import numpy as np

from xform.ir.builder import using_builder
from xform.ir.interpret import eval_graph


def _interpreted(graph):
    def run(*args):
        with using_builder(None):
            return eval_graph(graph, *args)
    return run


def _serial_map(graph, n_mapped, operands, dests, num_threads, chunk_size, axis=None,
                summed=()) -> None:
    run = _compiled(graph)
    mapped = [np.ravel(x) if axis is None else np.asarray(x) for x in operands[:n_mapped]]
    extras = operands[n_mapped:]
    summed = summed or (False,) * len(dests)
    for dest, is_summed in zip(dests, summed):
        if is_summed:
            dest[...] = 0
    for i in range(mapped[0].shape[0] if mapped else 0):
        for dest, is_summed, value in zip(dests, summed, run(*[x[i] for x in mapped], *extras)):
            if is_summed:
                dest += value
            else:
                dest[i] = value


def _no_lazy_backend(*args, **kwargs):
    raise NotImplementedError("mapping over dask arrays needs xform.runtime (import xform)")


_memo_lock = threading.RLock()
_memos: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _weak_memo(owner, key, make):
    with _memo_lock:
        table = _memos.setdefault(owner, {})
        if key not in table:
            table[key] = make()
        return table[key]


def _uncached(fun, key, make, shared_by=None):
    return make()


def _not_found(fun, key):
    return None


def _as_is(graph, *args, **kwargs):
    return graph


_compiled = _interpreted
_map_chunks = _serial_map
_map_lazy = _no_lazy_backend
_build = _weak_memo
_build_staging = _uncached
_lookup_staging = _not_found
_optimize = _optimize_values = _clean = _prune = _inline = _as_is


_HOOKS = ("compiled", "map_chunks", "map_lazy", "build", "build_staging", "lookup_staging",
          "optimize", "optimize_values", "clean", "prune", "inline")


def install(**hooks) -> None:
    """Replace hooks by name (the runtime does, at import). `compiled(graph) -> callable(*args)
    -> list`; `map_chunks(graph, n_mapped, operands, dests, num_threads, chunk_size)` writes a
    scalar graph mapped over the operands into 1-d `dests`; `build(owner, key, make)` and
    `build_staging(fun, key, make)` return `make()` built once per (owner, key), the second
    recording what staging `fun` read; `lookup_staging(fun, key)` the value built if still
    valid, else None; `optimize`, `optimize_values` (the pipeline compiled code gets, which
    keeps numpy's bits unless configured otherwise), `clean` (no fusion), `prune` (dead code
    only) and `inline(graph, max_equations)` are passes."""
    unknown = set(hooks) - set(_HOOKS)
    if unknown:
        raise KeyError(f"no hook named {', '.join(sorted(unknown))}; hooks: {', '.join(_HOOKS)}")
    globals().update({f"_{name}": hook for name, hook in hooks.items()})


def compiled(graph):
    """A callable running `graph`: `compiled(graph)(*args) -> list of outputs`.

    >>> from xform.ir.execute import compiled
    >>> compiled(xform.make_graph(lambda x: x * 2)(1.0))(3.0)
    [np.float64(6.0)]
    """
    return _compiled(graph)


def map_chunks(graph, n_mapped, operands, dests, num_threads, chunk_size, axis=None,
               summed=()) -> None:
    """Write the scalar `graph` mapped over `operands` (`n_mapped` equal-shape arrays, then
    scalars) into the 1-d arrays `dests`, one per output (threaded_map's executor). With
    `axis=0`, `graph` takes one leading-axis slice of each mapped array (the others whole) and
    `dests` are the stacked results, or their sums over the slices where `summed` says so."""
    _map_chunks(graph, n_mapped, operands, dests, num_threads, chunk_size, axis, summed)


def map_lazy(graph, n_mapped, operands, num_threads, chunk_size, axis, summed, lazy) -> list:
    """`graph` mapped over operands of which some are dask arrays, by the runtime's dask
    backend: dask arrays if `lazy` (numpy for the `summed` outputs), else all numpy."""
    return _map_lazy(graph, n_mapped, operands, num_threads, chunk_size, axis, summed, lazy)


def build(owner, key, make):
    """`make()`, built once per (`owner`, `key`) and kept while `owner` (a graph) lives and
    until the cache is cleared: for what is derived from a graph."""
    return _build(owner, key, make)


def build_staging(fun, key, make, shared_by=None):
    """`make()` (a staging of `fun`), built once per (`fun`, `key`) and rebuilt when anything
    it read is redefined; an enclosing staging depends on what it read too. `shared_by` names
    the construct that applies one staging to many elements (e.g. "threaded_map"), where a
    function that draws random numbers is refused (it would draw once for all)."""
    return _build_staging(fun, key, make, shared_by)


def lookup_staging(fun, key):
    """The value `build_staging(fun, key, ...)` built, if it is still valid; else None."""
    return _lookup_staging(fun, key)


def optimized(graph):
    """`graph` through the default pass pipeline (xform.passes.optimize)."""
    return _optimize(graph)


def compiled_optimized(graph):
    """`compiled` of `graph` after the passes compiled code gets, the optimized graph made
    once per graph: for the graphs no pass reaches through params (a call's callee, a custom
    rule's primal), which run as their own compiled functions.

    >>> from xform.ir.execute import compiled_optimized
    >>> compiled_optimized(xform.make_graph(lambda x: np.sin(x) * 1.0)(1.0))(0.0)
    [np.float64(0.0)]
    """
    return _compiled(_build(graph, ("optimized for values",), lambda: _optimize_values(graph)))


def cleaned(graph):
    """`graph` folded, CSE'd and DCE'd, but not fused."""
    return _clean(graph)


def pruned(graph):
    """`graph` without dead code."""
    return _prune(graph)


def inlined(graph, max_equations):
    """`graph` with its non-recursive calls of at most `max_equations` equations opened."""
    return _inline(graph, max_equations)


_compiled_memos: list = []


def compiled_memo() -> "weakref.WeakKeyDictionary":
    """A weak table graph -> what was made from `compiled(graph)`, emptied whenever compiled
    code is dropped (`forget_compiled`, called by the cache when it is cleared)."""
    table = weakref.WeakKeyDictionary()
    _compiled_memos.append(table)
    return table


def forget_compiled() -> None:
    for table in _compiled_memos:
        table.clear()


__all__ = ["build", "build_staging", "cleaned", "compiled", "compiled_memo", "compiled_optimized",
           "forget_compiled", "inlined", "install", "lookup_staging", "map_chunks", "map_lazy",
           "optimized", "pruned"]
