"""The tiers of a transform's code per signature (xform.config.tier). A first call is
interpreted, with no passes, codegen or compile(), which cost several times what one run of
the graph does: a gradient is computed at once by its rules on concrete values, as autograd
computes it, with no reverse-mode graph built (xform.transforms.vjp.gradient_values); other
transforms' graphs are evaluated equation by equation. The next call of the same signature
compiles the graph, fully optimized, in its place (`FirstTier`).
"""
from __future__ import annotations

import threading
import weakref

from xform.runtime.config import config


def first_call_tier() -> str:
    """The tier a signature's first call runs in: "interpret" or "compile" (config.tier;
    debug mode compiles, since its checks of every value live in the generated code).

    >>> from xform.runtime.tiers import first_call_tier
    >>> first_call_tier()
    'interpret'
    """
    if config.tier == "compile" or config.debug:
        return "compile"
    return "interpret"


_making_locks = threading.Lock()   # (held only to make a first tier's own lock)


class FirstTier:
    """The function a cache entry holds after a signature's first call: it calls `run(args)`
    (the interpreter, returning the list of results), and on the first call after that one
    (in "auto" mode) calls `compile()` and puts the compiled code in the entry's value (in the
    form `compile` gives: xform.api.dispatch.steady_value), where the cached call path finds it
    directly from then on: the steady state pays nothing for the tiers.

    Thread-safe: threads that race on the first call each interpret (what `run` reads is
    shared and immutable); the compile runs once, under a lock, and the others wait for it. `attach
    (entry)` names the cache entry (whose `value` is `(this, unflatten)`) once it exists, held
    weakly: the entry holds this tier, and a cycle would leave both, with the graph they hold,
    to the garbage collector, whose collections cost a loop of first calls about 5%.
    """

    __slots__ = ("_run", "_first", "_compile", "_entry", "_ran", "_compiled", "_lock")

    def __init__(self, run, compile, first=None):
        self._run = run
        self._first = first     # the first call's run, given the values staging computed
        # () -> (the compiled function, of the full pipeline; the entry's value from then on)
        self._compile = compile
        self._entry = None
        self._ran = False
        self._compiled = None
        self._lock = None   # made by the first promotion: a tier never called again needs none

    def attach(self, entry) -> None:
        self._entry = weakref.ref(entry)

    def __call__(self, *args):
        compiled = self._compiled
        if compiled is not None:
            return compiled(*args)
        if not self._ran or config.tier == "interpret":
            first, self._first = self._first, None
            self._ran = True
            return (first or self._run)(args)
        return self.promote()(*args)

    def promote(self):
        """The compiled function, compiling it first if no call has: the entry's value
        then holds it in place of this tier."""
        lock = self._lock
        if lock is None:
            with _making_locks:
                lock = self._lock
                if lock is None:
                    lock = self._lock = threading.Lock()
        with lock:
            if self._compiled is None:
                compiled, steady = self._compile()
                entry = self._entry() if self._entry is not None else None
                if entry is not None and entry.value[0] is self:
                    entry.value = steady
                    entry.specialize()   # its dependencies' check, generated for the hits
                self._compiled = compiled
            return self._compiled
