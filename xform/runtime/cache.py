"""The one cache of everything built: API entries (staged, transformed, optimized and compiled
graphs) per function and abstract signature, and compiled code per graph.

Entries carry the dependencies recorded while they were staged
(xform.runtime.dependencies); a hit re-checks them, so redefining a function the entry
reached rebuilds it. The cache is bounded (least recently used entries go first), holds
functions weakly, and builds an entry once even when many threads ask for it at the same
time. `xform.cache_info()` exposes the counters.
At import it installs the runtime record (xform.ir.execute.Runtime) through which the layers
below run compiled graphs, cache stagings and derived graphs, map threaded_map's chunks and
optimize.
"""
from __future__ import annotations

import gc
import itertools
import threading
import weakref
from collections import OrderedDict

from xform import passes
from xform.codegen import compile_graph
from xform.ir import contexts, execute
from xform.runtime.reads import mutation_watch
from xform.runtime.config import config
from xform.numpy.stand_ins import installed_count, staging_scope
from xform.runtime.dependencies import Dependencies, hook, note, recording, watches
from xform.runtime.effects import Watch, raise_shared_draws, staged_copy
from xform.runtime.executors import map_chunks, map_lazy
from xform.runtime.paths import Paths, paths_info
from xform.runtime.tiers import FirstTier


class collector_paused:
    """No cyclic garbage collection inside: staging, the passes and codegen make many small
    objects that all stay alive, and the collections they trigger would scan the growing
    graph again and again (a fifth of the build time at 10k equations; the passes were
    quadratic on large graphs). Re-enabled only if it was enabled, so that nested or
    concurrent pauses never leave it off. (A class, not a generator context manager: every
    build enters one.)"""

    __slots__ = ("_enabled",)

    def __enter__(self):
        self._enabled = gc.isenabled()
        if self._enabled:
            gc.disable()

    def __exit__(self, *exc_info):
        if self._enabled:
            gc.enable()


def _never_valid() -> bool:
    return False


_builds = threading.local()   # this thread's build in progress: nesting depth and its number
_build_numbers = itertools.count(1)


def _valid_during_this_build():
    """`valid` of an entry whose staging drew random numbers: it serves the build that made it
    (nested stagings of the same callee reuse its draws, as one eager call draws once), and no
    call after it, which stages and draws again."""
    number = _builds.number

    def valid() -> bool:
        return getattr(_builds, "depth", 0) > 0 and _builds.number == number
    return valid


# Orders an entry's `discard` and `specialize`. Reentrant: a collection while it is held (an
# allocation in `add_dependencies`) may run a dead function's weakref callback, which
# discards that function's entries on this very thread.
_validity = threading.RLock()


class staging_outside_a_build:
    """A staging that is no cache build of its own (make_graph, eval_shape): the entries its
    callees' stagings file (an @xform.function's, a custom rule's) leave with it if it fails,
    as a failed build's do (`Cache.build`)."""

    __slots__ = ("_depth",)

    def __enter__(self):
        self._depth = depth = getattr(_builds, "depth", 0)
        if depth == 0:
            _builds.number = next(_build_numbers)
            _builds.added = []
        _builds.depth = depth + 1

    def __exit__(self, kind, *exc_info):
        _builds.depth = self._depth
        if kind is not None and self._depth == 0:
            with CACHE._lock:
                for cache, added in _builds.added:
                    cache._unfile(added)


class Entry:
    """A built entry: `value` (what the API needs to run) and the dependencies behind it.

    `valid()` is the one check a hit makes: the dependencies' check while the entry is in the
    cache, False once it has left (`discard`), so copies held by the fast call paths notice
    too. `hits` counts the hits this entry served (`Cache.hits` sums them), so that a hit
    writes only to the entry it already holds.
    """

    # (weakly referable: what its value holds names it weakly, so that no cycle through the
    # entry leaves it to the garbage collector when it leaves the cache)
    __slots__ = ("value", "dependencies", "valid", "hits", "_general", "__weakref__")

    def __init__(self, value, dependencies):
        self.value = value
        self.dependencies = dependencies
        # generated when recording ended, or the general check until `specialize`
        self.valid = self._general = dependencies.valid
        self.hits = 0

    def discard(self) -> None:
        with _validity:
            self.valid = _never_valid

    def add_dependencies(self, dependencies) -> None:
        """Check `dependencies` too from now on (what staging one more path read)."""
        with _validity:
            if self.valid is _never_valid:
                return
            merged = self.dependencies.merged(dependencies)
            if self.valid is _never_valid:      # discarded by a collection while merging
                return
            self.dependencies = merged
            self.valid = self._general = merged.valid

    def specialize(self) -> None:
        """The generated check in place of the general one, unless the entry left the cache
        (or checks its validity its own way) meanwhile."""
        check = self.dependencies.specialize()
        with _validity:
            if self.valid is self._general:
                self.valid = check


class Cache:
    """LRU-bounded map (function, key) -> Entry; functions are held by weak reference.
    `lock` is shared by the caches that build inside each other's builds (one lock, so
    that no two threads can wait on each other's)."""

    def __init__(self, max_entries: int = 2048, lock=None):
        self.max_entries = max_entries
        self._entries: OrderedDict = OrderedDict()
        # function key -> the keys of its entries, so that a function's death (each first
        # call of a transform made anew lets the last one die) costs its entries, not a
        # scan of the whole cache
        self._keys_of: dict = {}
        self._compiled = weakref.WeakKeyDictionary()
        self._compiled_bare = weakref.WeakKeyDictionary()   # code returning the one output
        self._lock = lock or threading.RLock()
        self._retired_hits = 0  # hits of entries that have left the cache
        self.misses = 0
        self.builds = 0
        self.compiles = 0
        self.invalidations = 0
        self.evictions = 0

    @property
    def hits(self) -> int:
        with self._lock:
            return self._retired_hits + sum(entry.hits for entry in list(self._entries.values()))

    def _retire(self, entry) -> None:
        """`entry` has just been taken out of the cache: fast paths holding it must miss."""
        self._retired_hits += entry.hits
        entry.discard()

    def _file(self, full_key, entry) -> None:
        self._entries[full_key] = entry
        self._keys_of.setdefault(full_key[0], []).append(full_key)

    def _unfile(self, full_key) -> None:
        """Take the entry of `full_key` out of the cache (retired), if it is there."""
        entry = self._entries.pop(full_key, None)
        if entry is not None:
            keys = self._keys_of.get(full_key[0])
            if keys is not None:
                keys.remove(full_key)
                if not keys:
                    del self._keys_of[full_key[0]]
            self._retire(entry)

    def _evict_beyond(self, max_entries) -> None:
        while len(self._entries) > max_entries:
            self._unfile(next(iter(self._entries)))
            self.evictions += 1

    def _function_key(self, fun):
        try:
            return weakref.ref(fun, self._forget_function)
        except TypeError:  # builtins and some callables cannot be weakly referenced
            return fun

    def _forget_function(self, function_ref) -> None:
        with self._lock:
            for full_key in self._keys_of.pop(function_ref, ()):
                entry = self._entries.pop(full_key, None)
                if entry is not None:
                    self._retire(entry)

    def lookup(self, fun, key):
        """The usable entry for (fun, key), or None (a stale one is dropped)."""
        return self._lookup((self._function_key(fun), key))

    def _served(self, full_key, entry) -> bool:
        """Whether `entry`, found under `full_key`, is valid: then it serves this call (a hit,
        and the most recently used entry)."""
        if not entry.valid():
            return False
        entry.hits += 1
        try:
            self._entries.move_to_end(full_key)
        except KeyError:  # evicted by another thread meanwhile
            pass
        return True

    def _lookup(self, full_key):
        entry = self._entries.get(full_key)
        if entry is not None and self._served(full_key, entry):
            return entry
        with self._lock:    # (a miss, then a build: the lock costs nothing to speak of)
            if entry is not None:
                self.invalidations += 1
                if self._entries.get(full_key) is entry:
                    self._unfile(full_key)
            self.misses += 1
        return None

    def build(self, owner, key, make, record=True, arguments=()):
        """The entry for (owner, key), building it with `make()` if there is none;
        concurrent callers wait and share one build. `owner` is a function (what staging it
        reads is recorded, unless `record` is False; `arguments`, its static arguments, are
        watched for random generators with it) or a graph (for transformed graphs)."""
        full_key = (self._function_key(owner), key)   # (filed with the entry it builds)
        entry = self._entries.get(full_key)     # (a function's first call finds none)
        if entry is not None and self._served(full_key, entry):
            return entry
        with self._lock:    # (`_lookup`'s miss, and the build, under one acquisition)
            if entry is not None:
                self.invalidations += 1
            self.misses += 1
            # (an owner with no entries, as at a function's first call: not looked up again,
            # since hashing the full key is most of a lookup's cost)
            found = self._entries.get(full_key) if full_key[0] in self._keys_of else None
            if found is not None:
                if found is not entry and found.valid():    # another thread built it
                    return found
                self._unfile(full_key)     # the invalid entry found above
            nested = getattr(_builds, "depth", 0) > 0
            value, dependencies = self._recorded(owner, make, record, arguments)
            entry = Entry(value, dependencies)
            if dependencies.draws:
                # Its draws are constants of what was built: this call's only, so the next
                # call stages (and draws) again, as eager numpy would draw again.
                entry.valid = _valid_during_this_build()
            self.builds += 1
            if full_key[0] in self._keys_of and full_key in self._entries:
                self._unfile(full_key)      # filed by a nested build of the same key
            self._file(full_key, entry)
            if nested:
                _builds.added.append((self, full_key))
            if len(self._entries) > self.max_entries:
                self._evict_beyond(self.max_entries)
            return entry

    def stage_path(self, owner, make, entry):
        """`(make(), keep)`: one more path of `entry`, staged with what it reads recorded and
        added to the entry's checks (xform.runtime.paths); not `keep` when the staging drew
        random numbers it could not stage."""
        with self._lock:
            value, dependencies = self._recorded(owner, make, True, ())
        if dependencies.draws:
            return value, False
        if entry is not None:
            entry.add_dependencies(dependencies)
        return value, True

    def _recorded(self, owner, make, record, arguments):
        """`(make(), dependencies)`: a build, with what it reads recorded (`record`)."""
        depth = getattr(_builds, "depth", 0)
        if depth == 0:
            _builds.number = next(_build_numbers)
            _builds.added = []     # the nested builds' (cache, key), dropped if this one fails
        _builds.depth = depth + 1
        try:
            with collector_paused():
                if record:
                    watch = Watch(owner, arguments)
                    with recording(owner, watch.functions, watch.complete) as dependencies:
                        with watch:     # its draws staged, restored before recording ends
                            value = make()
                        dependencies.draws = dependencies.draws or watch.drew()
                    if not (type(value) is tuple and value
                            and type(value[0]) in (FirstTier, Paths)):
                        dependencies.specialize()   # a first tier's promotion does
                else:
                    dependencies, value = Dependencies(), make()
        except BaseException:
            if depth == 0:
                # A failed staging leaves the cache as it was, its callees' entries too.
                for cache, added in _builds.added:
                    cache._unfile(added)
            raise
        finally:
            _builds.depth = depth
        return value, dependencies

    def compiled(self, graph, bare=False):
        """The compiled code of `graph`, returning the list of its outputs (or with `bare`,
        its one output as it is: xform.codegen.compile_graph)."""
        memo = self._compiled_bare if bare else self._compiled
        compiled = memo.get(graph)
        if compiled is None:
            with self._lock:
                compiled = memo.get(graph)
                if compiled is None:
                    compiled = compile_graph(graph, config.debug, config.scalar_math, bare)
                    self.compiles += 1
                    memo[graph] = compiled
        return compiled

    def clear(self) -> None:
        with self._lock:
            # The entries die after the map is empty: their owners' weak reference callbacks
            # (_forget_function) then see a consistent map, not one half cleared.
            entries = list(self._entries.values())
            self._entries.clear()
            self._keys_of.clear()
            for entry in entries:
                self._retire(entry)
            self._compiled.clear()
            self._compiled_bare.clear()
            execute.forget_compiled()

    def info(self) -> dict:
        return {"hits": self.hits, "misses": self.misses, "builds": self.builds,
                "compiles": self.compiles, "invalidations": self.invalidations,
                "evictions": self.evictions, "entries": len(self._entries),
                "max_entries": self.max_entries, "paths": paths_info()}


CACHE = Cache()
# What is derived from graphs (their jvp, vjp, batched and optimized forms: loop bodies' and
# callees'), bounded apart, so that many user entries never evict them.
DERIVED = Cache(lock=CACHE._lock)


def cache_info() -> dict:
    """Counters of the global cache: hits, misses, builds (stagings and derived graphs),
    compiles, invalidations (entries rebuilt because something they read was redefined),
    evictions, entries (all of them), max_entries (the bound of the entries per function
    and signature), derived_entries (of those entries, the graphs derived from graphs,
    bounded apart); and `paths`, `{transform of function: paths kept}` for the functions
    that decide on data (xform.runtime.paths).

    >>> before = xform.cache_info()["builds"]
    >>> g = xform.grad(lambda x: x * x); _ = g(1.0), g(2.0)
    >>> xform.cache_info()["builds"] - before    # staged once, reused by the second call
    1
    """
    info, derived = CACHE.info(), DERIVED.info()
    for counter in ("hits", "misses", "builds", "invalidations", "evictions", "entries"):
        info[counter] += derived[counter]
    info["derived_entries"] = derived["entries"]
    return info


def clear_cache() -> None:
    """Forget every staged graph, transformed graph and compiled function.

    >>> xform.clear_cache(); xform.cache_info()["entries"]
    0
    """
    with CACHE._lock:
        CACHE.clear()
        DERIVED.clear()


config.on_change(clear_cache)  # compiled code differs with the options
contexts.on_switch(clear_cache)  # graphs staged in the other context differ


def set_cache_size(max_entries: int) -> None:
    """Bound the number of cached entries (least recently used go first).

    >>> old = xform.cache_info()["max_entries"]
    >>> xform.set_cache_size(512); xform.cache_info()["max_entries"]
    512
    >>> xform.set_cache_size(old)
    """
    with CACHE._lock:
        CACHE.max_entries = int(max_entries)
        CACHE._evict_beyond(CACHE.max_entries)


def _compiled_function(graph):
    return CACHE.compiled(graph).fn


def _build_staging(fun, key, make, shared_by=None):
    entry = CACHE.build(fun, key, make)
    if shared_by is not None and entry.dependencies.draws:
        raise_shared_draws(fun, shared_by)
    note(entry.dependencies)  # an enclosing staging depends on what this one read
    return entry.value


def _lookup_staging(fun, key):
    entry = CACHE.lookup(fun, key)
    if entry is None:
        return None
    note(entry.dependencies)
    return entry.value


# What runs below the runtime reaches the cache, the compiler, the configured pipelines and
# the executors through this record (xform.ir.execute), and staging the scopes it wraps user
# code in.
execute.install(execute.Runtime(
    compiled=_compiled_function,
    optimize=lambda graph: passes.optimize(graph, checks=config.checks),
    optimize_values=lambda graph: passes.optimize(graph, passes.pipeline_for(config.algebra),
                                                  checks=config.checks),
    build=lambda graph, key, make: DERIVED.build(graph, key, make, record=False).value,
    build_staging=_build_staging, lookup_staging=_lookup_staging,
    map_chunks=map_chunks, map_lazy=map_lazy, mutation_watch=mutation_watch,
    staging_scope=staging_scope, stand_ins_installed=installed_count, watches=watches,
    profile_hook=hook, staged_copy=staged_copy))
