"""The runtime as the layers below it see it: one `Runtime` record of what xform.runtime
provides to ir, transforms and rules (compiled code, the staging cache, the memo of derived
graphs, threaded_map's executors, the optimizing pipelines, and what staging wraps user code
in: xform.numpy's stand-ins and captured arrays, the dependency watcher), installed once by
xform.runtime.cache when xform is imported. A rule writes `runtime().compiled(graph)(*args)`;
the fields' documentation is the contract, and runtime/cache.py's `install(Runtime(...))` is
the one place that names what fills it. (The passes themselves sit below the rules and are
imported directly.)"""
from __future__ import annotations

import functools
import sys
import weakref
from typing import Callable

import attrs


@attrs.frozen(kw_only=True)
class Runtime:
    """What the layers below xform.runtime call in it.

    compiled: `compiled(graph)(*args) -> list of outputs`, the graph's generated code (made
        once per graph).
    optimize, optimize_values: `Graph -> Graph`, the default pass pipeline, and the one
        compiled code gets (which keeps numpy's bits unless configured otherwise), each with
        the configured checks.
    build: `build(graph, key, make) -> make()`, built once per (graph, key) and kept while
        the graph lives and until the cache is cleared: for what is derived from a graph.
    build_staging: `build_staging(fun, key, make, shared_by=None) -> make()` (a staging of
        `fun`), built once per (`fun`, `key`) and rebuilt when anything it read is redefined;
        an enclosing staging depends on what it read too. `shared_by` names the construct
        that applies one staging to many elements (e.g. "threaded_map"), where a function
        that draws random numbers is refused (it would draw once for all).
    lookup_staging: `lookup_staging(fun, key)`, the value `build_staging(fun, key, ...)`
        built if it is still valid, else None.
    map_chunks: `map_chunks(graph, n_mapped, operands, dests, num_threads, chunk_size,
        axis=None, summed=())` writes the scalar `graph` mapped over `operands` (`n_mapped`
        equal-shape arrays, then scalars) into the 1-d arrays `dests`, one per output
        (threaded_map's executor). With `axis=0`, `graph` takes one leading-axis slice of
        each mapped array (the others whole) and `dests` are the stacked results, or their
        sums over the slices where `summed` says so.
    map_lazy: `map_lazy(graph, n_mapped, operands, num_threads, chunk_size, axis, summed,
        lazy) -> list`, `graph` mapped over operands of which some are dask arrays: dask
        arrays if `lazy` (numpy for the `summed` outputs), else all numpy.
    mutation_watch: `mutation_watch(f)() -> str or None`, which of the containers `f`
        reaches directly (closure cells, defaults, globals its code names) was changed in
        place since `mutation_watch(f)` was called, described for an error message.

    What staging wraps user code in (read by xform.ir.hooks.user_code_scope and `unwatched`):
    staging_scope: `staging_scope()`, the context manager entered first around each staging
        of user code; xform.numpy's stand-ins for numpy and SciPy callables are in place
        inside it.
    stand_ins_installed: `stand_ins_installed(install_new=False) -> int`, how many stand-in
        installers have run so far, first running those of modules imported since (with
        `install_new`): a staging during which the count grew failed before they were in
        place (a SciPy module imported inside the staged function), and runs again.
    watches: `watches() -> bool`, asked inside `staging_scope()`: whether `profile_hook`
        should see the staged call (xform.runtime.dependencies).
    profile_hook: the profile function `sys.setprofile` installs right around the staged
        call when `watches()` says so; xform's entry points pause it (`unwatched`).
    staged_copy: `staged_copy(fun) -> (staged, undo or None)`: staging calls `staged` in
        place of `fun`, then `undo()` (xform.numpy.captured: a copy of the user's function
        reading its captured arrays so that traced indices stage a gather).
    """

    compiled: Callable
    optimize: Callable
    optimize_values: Callable
    build: Callable
    build_staging: Callable
    lookup_staging: Callable
    map_chunks: Callable
    map_lazy: Callable
    mutation_watch: Callable
    staging_scope: Callable
    stand_ins_installed: Callable
    watches: Callable
    profile_hook: Callable
    staged_copy: Callable


_runtime: Runtime | None = None   # installed by xform.runtime.cache, imported by xform first


def install(installed: Runtime) -> None:
    """Make `installed` the runtime (xform.runtime.cache does, at import; tests may swap it)."""
    global _runtime
    _runtime = installed


def runtime() -> Runtime:
    """The installed runtime.

    >>> from xform.ir.execute import runtime
    >>> runtime().compiled(xform.make_graph(lambda x: x * 2)(1.0))(3.0)
    [np.float64(6.0)]
    """
    return _runtime


def unwatched(function):
    """`function` with the runtime's profile hook paused while it runs: for xform's own entry
    points (tracer operations, staging an equation), below which only xform runs, so the
    hook would only cost time. User functions staged below them re-arm it
    (xform.ir.hooks.user_code_scope). Another profiler (cProfile) is left on.

    Notes: with no profile function set (the usual case) one check per call, since this is on
    the per-equation path; the record is read directly, not through `runtime()`, whose call
    the hook would see."""
    @functools.wraps(function)
    def paused(*args, **kwargs):
        hook = sys.getprofile()
        if hook is None or hook is not _runtime.profile_hook:
            return function(*args, **kwargs)
        sys.setprofile(None)
        try:
            return function(*args, **kwargs)
        finally:
            sys.setprofile(hook)
    return paused


def compiled_optimized(graph):
    """The compiled code of `graph` after the passes compiled code gets, the optimized graph
    made once per graph: for the graphs no pass reaches through params (a call's callee, a
    custom rule's primal), which run as their own compiled functions.

    >>> from xform.ir.execute import compiled_optimized
    >>> compiled_optimized(xform.make_graph(lambda x: np.sin(x) * 1.0)(1.0))(0.0)
    [np.float64(0.0)]
    """
    current = runtime()
    return current.compiled(current.build(graph, ("optimized for values",),
                                          lambda: current.optimize_values(graph)))


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


__all__ = ["Runtime", "compiled_memo", "compiled_optimized", "forget_compiled", "install",
           "runtime", "unwatched"]
