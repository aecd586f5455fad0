"""What staging lets upper layers wrap: the scope user code runs in while it is staged
(`user_code_scope`, entered by `stage_function`), and `unwatched`, which pauses the watcher's
profile hook inside xform's own entry points. xform.runtime.dependencies installs the watcher
(`install_watcher`), xform.numpy the stand-ins for numpy and SciPy callables
(`install_staging_scope`); by default nothing is watched or replaced.
"""
from __future__ import annotations

import contextlib
import functools
import sys

_scope = contextlib.nullcontext
# Never a profile function, so that until one is installed `unwatched` pauses nothing.
_profile_hook = object()


def install_watcher(scope, profile_hook) -> None:
    """Run staged user code inside `scope()`, whose `__enter__` says whether `profile_hook`
    should see it: the call is then made with `profile_hook` installed by `sys.setprofile`
    (`user_code_scope.call`), and xform's entry points (`unwatched`) pause it."""
    global _scope, _profile_hook
    _scope, _profile_hook = scope, profile_hook


_staging_scope = contextlib.nullcontext


def install_staging_scope(scope) -> None:
    """Run staged user code inside `scope()` too (outside the watcher's scope)."""
    global _staging_scope
    _staging_scope = scope


def _as_it_is(fun):
    return fun, None


_staged_copy = _as_it_is


def install_staged_copy(copy) -> None:
    """Stage `copy(fun)[0]` in place of `fun`, and call `copy(fun)[1]` (unless None) when it
    returns (xform.numpy.captured: a copy of the user's function that reads its captured
    arrays so that traced indices stage a gather, and the undo of what it set up)."""
    global _staged_copy
    _staged_copy = copy


def _no_stand_ins(install_new=False) -> int:
    return 0


stand_ins_installed = _no_stand_ins


def install_stand_in_count(count) -> None:
    """`count(install_new=False)` returns how many stand-in installers have run so far,
    first running those of modules imported since (with `install_new`): a staging during
    which the count grew failed before they were in place (a SciPy module imported inside
    the staged function), and runs again."""
    global stand_ins_installed
    stand_ins_installed = count


class user_code_scope:
    """The context in which `stage_function` calls the function it stages, through `call`:
    the staging scope, then the watcher's; `as` gives `stand_ins_installed()` as the staging
    scope left it. The watcher's profile hook (each of whose events CPython 3.11 pays with a
    frame object and a dict of its locals) is installed by `call` right around the user's
    function, so that it sees little besides the user's code: not these scopes' own frames.
    (A class, not a generator context manager: every staging enters one.)"""

    __slots__ = ("_staging", "_watching", "_hook")

    def __enter__(self) -> int:
        self._staging = _staging_scope()
        self._staging.__enter__()
        try:
            installed = stand_ins_installed()
            self._watching = _scope()
            self._hook = _profile_hook if self._watching.__enter__() else None
        except BaseException:
            self._staging.__exit__(*sys.exc_info())
            raise
        return installed

    def call(self, fun, args):
        """`fun(*args)` (through its staged copy), seen by the watcher's profile hook if it
        asked to see it."""
        fun, undo = _staged_copy(fun)
        hook = self._hook
        try:
            if hook is None:
                return fun(*args)
            sys.setprofile(hook)    # (no event: nothing is installed yet)
            try:
                return fun(*args)
            finally:
                sys.setprofile(None)
        finally:
            if undo is not None:
                undo()

    def __exit__(self, *exc_info):
        try:
            self._watching.__exit__(*exc_info)
        finally:
            self._staging.__exit__(*exc_info)


def unwatched(function):
    """`function` with the installed profile hook paused while it runs: for xform's own entry
    points (tracer operations, staging an equation), below which only xform runs, so the
    hook would only cost time. User functions staged below them re-arm it
    (`user_code_scope`). Notes: one identity check per call, since this is on the
    per-equation path."""
    @functools.wraps(function)
    def paused(*args, **kwargs):
        if sys.getprofile() is not _profile_hook:
            return function(*args, **kwargs)
        sys.setprofile(None)
        try:
            return function(*args, **kwargs)
        finally:
            sys.setprofile(_profile_hook)
    return paused
