"""The scope user code runs in while it is staged (`user_code_scope`, entered by
`stage_function`). What fills it (the stand-ins' scope, the watcher and its profile hook, the
staged copy of a function) are fields of the one runtime record (xform.ir.execute.Runtime),
which xform.runtime.cache installs; xform.ir.execute.unwatched pauses the profile hook inside
xform's own entry points.
"""
from __future__ import annotations

import sys

from xform.ir.execute import runtime


class user_code_scope:
    """The context in which `stage_function` calls the function it stages, through `call`:
    the runtime's `staging_scope`, in which its `watches()` says whether the watcher's
    profile hook sees the call; `as` gives `stand_ins_installed()` as the staging scope left
    it. The hook (each of whose events CPython 3.11 pays with a frame object and a dict of its
    locals) is installed by `call` right around the user's function, so that it sees little
    besides the user's code: not these scopes' own frames. (A class, not a generator context
    manager: every staging enters one.)"""

    __slots__ = ("_staging", "_hook", "_copy")

    def __enter__(self) -> int:
        current = runtime()
        self._copy = current.staged_copy
        staging = self._staging = current.staging_scope()
        staging.__enter__()
        try:
            installed = current.stand_ins_installed()
            self._hook = current.profile_hook if current.watches() else None
        except BaseException:
            staging.__exit__(*sys.exc_info())
            raise
        return installed

    def call(self, fun, args):
        """`fun(*args)` (through its staged copy), seen by the watcher's profile hook if it
        asked to see it."""
        fun, undo = self._copy(fun)
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
        self._staging.__exit__(*exc_info)
