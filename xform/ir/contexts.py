"""Contexts: the primitive set staging uses, "default" (every primitive) or "minimal" (the
primitives that declare a `decomposition` stage as it). A switch calls the `on_switch`
callbacks; xform.runtime.cache registers `clear_cache` there, since cached graphs were staged
in the other context."""
from __future__ import annotations

import contextvars

from xform.errors import TypeCheckError
from xform.ir.registry import RULES
from xform.source_info import user_frame_info

CONTEXTS = ("minimal", "default")
"""The primitive sets `xform.extend.context` switches between."""
_context: contextvars.ContextVar[str] = contextvars.ContextVar("xform_context",
                                                               default="default")
_on_switch: list = []


def on_switch(callback) -> None:
    """Call `callback()` whenever the context changes."""
    _on_switch.append(callback)


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
    if old != new:
        for callback in _on_switch:
            callback()


def _check_name(name: str) -> None:
    if name not in CONTEXTS:
        raise TypeCheckError(f"unknown context {name!r}; contexts: {', '.join(CONTEXTS)}",
                             user_frame_info())


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
    _check_name(name)
    return _ContextSwitch(name)


def primitives(name: str | None = None) -> frozenset:
    """The registered primitives of context `name` (default: the current one); the minimal
    set leaves out every primitive that declares a `decomposition`.

    >>> xform.extend.logsumexp_p in xform.extend.primitives("minimal")
    False
    """
    name = current_context() if name is None else name
    _check_name(name)
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
