"""The paths of a cache entry whose function decides on data (xform.ir.values): each path is
the code staged for one sequence of decisions, with guards that raise GuardFailure when a call
decides otherwise. A call runs the path that served the last call; on a failure it runs the
path that took this call's decision at the failing guard (a decision trie: each path is a
sequence of (guard, outcome), and the guards that passed before the failing one are the common
prefix), and stages a new path when none did. At most `config.max_paths` paths are kept per
signature; past the bound, each call is staged and interpreted anew, with one warning naming
the decision that keeps changing (or PathLimitError under `config.path_limit = "raise"`).

Notes: a path that fails reruns its prefix (the work before the failing guard) in the next
path; random draws made by that prefix are undone first, so every call draws what eager
numpy draws.
"""
from __future__ import annotations

import logging
import threading
import warnings
import weakref

from xform.errors import PathLimitError, PathLimitWarning, XformError
from xform.ir.values import GuardFailure
from xform.runtime.config import config
from xform.rules.random import raw_state, set_raw_state

_log = logging.getLogger("xform.paths")
_all_paths: "weakref.WeakSet[Paths]" = weakref.WeakSet()


class Path:
    """One path: `run(*leaves) -> results` and its decisions, `{guard key: outcome}` with
    their order."""

    __slots__ = ("run", "decisions", "order", "generators")

    def __init__(self, run, decisions, generators=()):
        self.run = run
        self.order = [key for key, _ in decisions]
        self.decisions = dict(decisions)
        self.generators = generators

    def takes(self, prefix, key, outcome) -> bool:
        """Whether this path decides as `prefix` (a path's decisions before `key`) and then
        `outcome` at `key`."""
        decisions = self.decisions
        if key not in decisions or decisions[key] != outcome:
            return False
        return all(decisions.get(k, _ABSENT) == v for k, v in prefix)


_ABSENT = object()


def _describe(outcome) -> str:
    return "the lanes disagreed" if outcome is None else repr(outcome)


def _NO_ENTRY():
    """The entry of Paths not attached to one."""
    return None


class Paths:
    """The callable a guarded entry holds: `paths(*leaves)` returns the unflattened
    results. `stage(leaves, entry) -> (run, decisions, generators, keep)` stages the path
    this call's values take (`keep`: whether it may be cached); `name` names the function in
    warnings and logs. `attach(entry)` names the cache entry holding it (weakly, as a first
    tier does: xform.runtime.tiers)."""

    def __init__(self, name, stage, first):
        self.name = name
        self._stage = stage
        self._entry = _NO_ENTRY
        self._paths = [first]
        self._last = first
        self._lock = threading.Lock()
        self._warned = False
        self._calls = 0
        self.overflows = 0      # calls past the bound, staged anew
        _all_paths.add(self)

    def __len__(self):
        return len(self._paths)

    def attach(self, entry) -> None:
        self._entry = weakref.ref(entry)

    def __call__(self, *leaves):
        path = self._last
        if self._calls < 2:     # from the second call on, the steady state: the entry's
            self._calls += 1    # checks in their generated form, as a first tier's are
            entry = self._entry()
            if self._calls == 2 and entry is not None:
                entry.specialize()
        states = _saved(path.generators)
        try:
            return path.run(*leaves)
        except GuardFailure as failure:
            _restore(states)
            return self._switch(path, failure, leaves)

    def _switch(self, path, failure, leaves):
        tried = {id(path)}
        while True:
            candidate = self._candidate(path, failure, tried)
            if candidate is None:
                break
            tried.add(id(candidate))
            states = _saved(candidate.generators)
            try:
                results = candidate.run(*leaves)
            except GuardFailure as next_failure:
                _restore(states)
                path, failure = candidate, next_failure
                continue
            self._last = candidate
            return results
        return self._new_path(failure, leaves)

    def _candidate(self, path, failure, tried):
        if failure.outcome is None:     # a batched guard: no lane's decision to follow
            return next((p for p in self._paths if id(p) not in tried), None)
        key = failure.key
        if key in path.decisions:
            prefix = [(k, path.decisions[k]) for k in path.order[:path.order.index(key)]]
        else:
            prefix = []
        for candidate in self._paths:
            if id(candidate) not in tried and candidate.takes(prefix, key, failure.outcome):
                return candidate
        if prefix:
            # Guards of independent equations may run out of staging order (two calls of a
            # checkpointed function): one taking this outcome here, its guards checking the rest
            for candidate in self._paths:
                if id(candidate) not in tried and candidate.takes((), key, failure.outcome):
                    return candidate
        return None

    def _new_path(self, failure, leaves):
        site = failure.site
        where = f"{site.filename}:{site.lineno} ({site.line})" if site is not None else \
            "a decision on data"
        change = (f"the guard at {where} was {_describe(failure.expected)}, now "
                  f"{_describe(failure.outcome)}")
        with self._lock:
            full = len(self._paths) >= config.max_paths
        if full:
            self._over_limit(where, change)
        elif config.explain_paths:
            _log.warning("xform: %s staged again: %s", self.name, change)
        entry = self._entry()
        run, decisions, generators, keep = self._stage(leaves, entry)
        path = Path(run, decisions, generators)
        if keep and not full:
            with self._lock:
                if len(self._paths) < config.max_paths:
                    self._paths.append(path)
                    self._last = path
            if entry is not None:
                entry.specialize()    # the checks of what the new path read too
        try:
            return path.run(*leaves)
        except GuardFailure as again:
            raise XformError(
                f"{self.name} decided differently when its path ran than when it was staged "
                f"on the same values, at {again.site}", again.site,
                "a decision on data must depend only on the arguments: a function that "
                "reads state it changes itself (a global counter, a time) cannot be staged "
                "with values") from None

    def _over_limit(self, where, change) -> None:
        self.overflows += 1
        message = (f"{self.name} took more than {config.max_paths} paths for one signature "
                   f"(config.max_paths); the decision that keeps changing: {change}. Each "
                   "further call is staged and interpreted anew. Stage the decision instead: "
                   "np.where(c, a, b) or xform.cond for a choice, xform.while_loop or "
                   "xform.fori_loop for a loop whose trip count changes")
        if config.path_limit == "raise":
            raise PathLimitError(message.split(". Each further")[0], None,
                                 "stage the decision: np.where(c, a, b), xform.cond, "
                                 "xform.while_loop or xform.fori_loop; or raise "
                                 "xform.config max_paths")
        if not self._warned:
            self._warned = True
            warnings.warn(message, PathLimitWarning, stacklevel=4)


def _saved(generators):
    if not generators:
        return None
    return [(g, raw_state(g)) for g in generators]


def _restore(states) -> None:
    if states:
        for generator, state in states:
            set_raw_state(generator, state)


def paths_info() -> dict:
    """`{function name: paths kept}` for the functions whose cache entries hold paths."""
    counts: dict = {}
    for paths in list(_all_paths):
        entry = paths._entry()
        if entry is not None and entry.valid():     # (not one that left the cache)
            counts[paths.name] = counts.get(paths.name, 0) + len(paths)
    return counts


__all__ = ["Path", "Paths", "paths_info"]
