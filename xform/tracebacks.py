"""Tracebacks and warnings that show the user's code.

Errors: an error raised for the user's program leaves the
public entry point with xform's own frames removed from its traceback, as JAX filters its
frames. What remains is the user's frames (and library frames between two of them, e.g.
`scipy.optimize` calling the user's objective) and the message with its hint.

Which errors: xform's own (`XformError`), and any exception raised by the user's code while
xform ran it (its innermost frame outside xform, numpy and SciPy). Any other exception is a
fault inside xform and keeps every frame. `xform.config.update("traceback_filtering", "off")`,
or XFORM_TRACEBACK_FILTERING=off in the environment, keeps every frame of every error.

How: the entry point's `except` rewrites the traceback in place and re-raises with a bare
`raise`, which adds no entry for the entry point's own frame (it is already in the traceback,
and filtered out). Its callers, the user's frames, are added as the error travels on. An entry
point that is a method on the cached call path holds the `try` in its own body (free in
Python 3.11 while nothing is raised); others are wrapped by `api_boundary` (one frame).

Warnings: numpy's RuntimeWarnings (a division by zero, an invalid value) raised while xform
runs a graph, a derivative's above all, would name the line of xform's rule or generated code
that called numpy (as would SciPy's, e.g. odeint's ODEintWarning); warnings about xform's own
code (deprecations) stay where they are. They are issued again with `warnings.warn_explicit`
at the user's line: the source of the equation being run, which an interpreter holds (the
first call of a signature) and compiled code finds in its module's line table (the cached
calls: `statement_source`), else the user's line that called the transformed function.
The hook sits in front of `warnings._showwarnmsg`, which the warnings machinery calls only
for a warning it shows, so nothing runs on a call that warns of nothing, and no call changes
the warnings state (as `catch_warnings` would, which is not thread-safe).
"""
from __future__ import annotations

import functools
import os
import sys
import types
import warnings

from xform.codegen.emit import statement_source
from xform.errors import XformError
from xform.runtime.config import config
from xform.source_info import is_excluded, user_frame

_XFORM_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep

NOTE = "(xform's own frames are hidden; XFORM_TRACEBACK_FILTERING=off shows them)"


def is_internal(filename: str) -> bool:
    """Whether `filename` is xform's code: its package, or code it generated (`<xform...>`)."""
    return filename.startswith(_XFORM_DIR) or filename.startswith("<xform")


def _is_library(filename: str) -> bool:
    """numpy's or SciPy's own Python (never the user's line, but not xform's either)."""
    return is_excluded(filename) and not is_internal(filename)


def _entries(tb) -> list:
    out = []
    while tb is not None:
        out.append(tb)
        tb = tb.tb_next
    return out


def raised_for_user(err: BaseException) -> bool:
    """Whether `err` reports the user's code: xform's error, or one raised in the user's code
    (the innermost frame outside numpy and SciPy is not xform's)."""
    if isinstance(err, XformError):
        return True
    for entry in reversed(_entries(err.__traceback__)):
        filename = entry.tb_frame.f_code.co_filename
        if not _is_library(filename):
            return not is_internal(filename)
    return False


def filter_traceback(tb):
    """`tb` without xform's frames, and without library frames below the innermost frame
    that is neither xform's nor a library's (numpy's dispatch into xform); new traceback
    objects, `tb` is left as it is."""
    entries = [e for e in _entries(tb) if not is_internal(e.tb_frame.f_code.co_filename)]
    while entries and _is_library(entries[-1].tb_frame.f_code.co_filename):
        entries.pop()
    filtered = None
    for entry in reversed(entries):
        filtered = types.TracebackType(filtered, entry.tb_frame, entry.tb_lasti,
                                       entry.tb_lineno)
    return filtered


def hide_internal_frames(err: BaseException) -> None:
    """Filter `err`'s traceback in place, and those of the exceptions chained to it, when it
    is raised for the user's code and filtering is on; the caller re-raises with `raise`."""
    if config.traceback_filtering == "off" or not raised_for_user(err):
        return
    if NOTE not in getattr(err, "__notes__", ()):
        err.add_note(NOTE)
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if err.__traceback__ is not None:
            err.__traceback__ = filter_traceback(err.__traceback__)
        err = err.__cause__ if err.__cause__ is not None else (
            None if err.__suppress_context__ else err.__context__)


def api_boundary(fun):
    """`fun`, whose errors raised for the user's code leave it with xform's frames hidden."""
    @functools.wraps(fun)
    def boundary(*args, **kwargs):
        try:
            return fun(*args, **kwargs)
        except Exception as err:
            hide_internal_frames(err)
            raise
    return boundary


def _user_location(frame):
    """(filename, lineno) of the user's line a warning at `frame` belongs to: the source of
    the equation that compiled code above is at (its statement's), or that an interpreter
    loop above is running (its local `eqn`), else the innermost frame of the user's."""
    scan = frame
    while scan is not None:
        filename = scan.f_code.co_filename
        if is_internal(filename):
            source = (statement_source(scan) if filename.startswith("<xform")
                      else getattr(scan.f_locals.get("eqn"), "source", None))
            if source is not None and hasattr(source, "lineno"):
                return source.filename, source.lineno
        scan = scan.f_back
    user = user_frame(frame)
    return (user.f_code.co_filename, user.f_lineno) if user is not None else None


# Warnings about xform's own code, shown where they are: the others raised inside xform
# (numpy's RuntimeWarnings, SciPy's ODEintWarning from a solve) are about the user's program.
_ABOUT_XFORMS_CODE = (DeprecationWarning, PendingDeprecationWarning, ImportWarning,
                      ResourceWarning, SyntaxWarning)


def _show_at_users_line(show):
    def showwarnmsg(msg):
        if (config.traceback_filtering == "on" and is_internal(msg.filename or "")
                and not issubclass(msg.category, _ABOUT_XFORMS_CODE)):
            location = _user_location(sys._getframe(1))
            if location is not None:
                # issued anew: the user's filters and registry see the user's line
                warnings.warn_explicit(msg.message, msg.category, *location,
                                       module=os.path.splitext(os.path.basename(location[0]))[0])
                return
        show(msg)
    showwarnmsg.xform_hook = True
    return showwarnmsg


if not getattr(warnings._showwarnmsg, "xform_hook", False):
    warnings._showwarnmsg = _show_at_users_line(warnings._showwarnmsg)
