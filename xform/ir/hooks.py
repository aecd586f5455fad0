"""What staging lets an upper layer watch: the scope user code runs in while it is staged
(`user_code_scope`, entered by `stage_function`), and `unwatched`, which pauses that layer's
profile hook inside xform's own entry points. xform.runtime.dependencies installs both with
`install_watcher`; by default nothing is watched.
"""
from __future__ import annotations

import contextlib
import functools
import sys

_scope = contextlib.nullcontext
# Never a profile function, so that until one is installed `unwatched` pauses nothing.
_profile_hook = object()


def install_watcher(scope, profile_hook) -> None:
    """Run staged user code inside `scope()`, which may install `profile_hook` with
    `sys.setprofile`; xform's entry points (`unwatched`) then pause `profile_hook`."""
    global _scope, _profile_hook
    _scope, _profile_hook = scope, profile_hook


def user_code_scope():
    """The context in which `stage_function` calls the function it stages."""
    return _scope()


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
