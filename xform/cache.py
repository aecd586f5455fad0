"""The cache of everything built: per-function entries keyed by signature, and compiled code
keyed by graph identity. Counters make hits and builds observable (`xform.cache_info()`)."""
from __future__ import annotations

import threading
import weakref

from xform.codegen import compile_graph


class Cache:
    """Entries live in a weak dictionary per function, so dead functions free their entries."""

    def __init__(self):
        self._by_function = weakref.WeakKeyDictionary()
        self._strong = {}  # functions that cannot be weakly referenced (e.g. builtins)
        self._compiled = weakref.WeakKeyDictionary()
        self._lock = threading.RLock()
        self.hits = 0
        self.misses = 0
        self.compiles = 0

    def _table(self, fun):
        try:
            return self._by_function.setdefault(fun, {})
        except TypeError:
            return self._strong.setdefault(id(fun), {})

    def get(self, fun, key):
        entry = self._table(fun).get(key)
        if entry is None:
            self.misses += 1
        else:
            self.hits += 1
        return entry

    def put(self, fun, key, entry) -> None:
        with self._lock:
            self._table(fun)[key] = entry

    def compiled(self, graph):
        compiled = self._compiled.get(graph)
        if compiled is None:
            compiled = compile_graph(graph)
            self.compiles += 1
            self._compiled[graph] = compiled
        return compiled

    def clear(self) -> None:
        with self._lock:
            self._by_function.clear()
            self._strong.clear()
            self._compiled.clear()

    def info(self) -> dict:
        return {"hits": self.hits, "misses": self.misses, "compiles": self.compiles,
                "functions": len(self._by_function) + len(self._strong)}


CACHE = Cache()


def cache_info() -> dict:
    """Counters of the global cache: hits, misses, compiles, functions with entries."""
    return CACHE.info()


def clear_cache() -> None:
    """Forget every staged graph, transformed graph and compiled function."""
    CACHE.clear()
