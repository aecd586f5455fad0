"""Where the user's code is: the first stack frame outside xform (and numpy's and SciPy's own
Python)."""
from __future__ import annotations

import dis
import functools
import importlib.util
import linecache
import os
import sys
import sysconfig

import attrs
import numpy as np

_XFORM_DIR = os.path.dirname(os.path.abspath(__file__))
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))
# SciPy's directory without importing it: found from its import spec
_SCIPY_SPEC = importlib.util.find_spec("scipy")
_SCIPY_DIR = os.path.dirname(os.path.abspath(_SCIPY_SPEC.origin)) if _SCIPY_SPEC else _NUMPY_DIR
_EXCLUDED = (_XFORM_DIR + os.sep, _NUMPY_DIR + os.sep, _SCIPY_DIR + os.sep, "<frozen ")
# Test helpers in xform.testing count as xform; the user's tests do not.


@attrs.frozen
class SourceInfo:
    """A user source location, e.g. `model.py:12 (loss): return np.sin(x) * w`."""

    filename: str
    lineno: int
    function: str

    @property
    def line(self) -> str:
        return linecache.getline(self.filename, self.lineno).strip()

    def __str__(self) -> str:
        text = self.line
        where = f"{self.filename}:{self.lineno} ({self.function})"
        return f"{where}: {text}" if text else where


def _per_file(answer):
    """`answer(filename)`, remembered per file name: staging asks it of every equation and
    function it meets (bounded: a notebook's cells make new file names). The answers so far
    are `.known` (a dict, for loops that look them up inline)."""
    known: dict = {}

    def remembered(filename: str) -> bool:
        found = known.get(filename)
        if found is None:
            if len(known) >= 65536:
                known.clear()
            found = known[filename] = answer(filename)
        return found
    remembered.known = known
    return functools.update_wrapper(remembered, answer)


@_per_file
def is_excluded(filename: str) -> bool:
    """Whether `filename` is xform's or numpy's own code (never the user's line)."""
    return filename.startswith(_EXCLUDED) or filename.startswith("<xform")


# Code that is not the user's: the standard library and installed packages.
_INSTALLED_PREFIXES = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib",
                                                                "purelib", "platlib")})


@_per_file
def is_users_file(filename: str) -> bool:
    """Whether code in `filename` is the user's own: not xform's, numpy's, SciPy's, the
    standard library's, an installed package's, or generated (`<...>`)."""
    return not (filename.startswith("<") or filename.startswith(_INSTALLED_PREFIXES)
                or is_excluded(filename))


# Generated code that is a library's, not the user's (the user's: a notebook cell, a doctest,
# exec'd source).
_LIBRARY_GENERATED = ("<xform", "<frozen", "<attrs", "<makefun", "<decorator")


@_per_file
def is_users_code(filename: str) -> bool:
    """is_users_file, and also source the user generated or typed (`<ipython-input-3>`,
    `<doctest ...>`, exec'd text), but not a library's generated code."""
    if filename.startswith("<"):
        return not filename.startswith(_LIBRARY_GENERATED)
    return is_users_file(filename)


_users_classes: dict = {}  # class -> whether the user's code defines it


def is_users_class(cls) -> bool:
    """Whether the user's code defines the class `cls` (its module's file is the user's, or
    it has none: __main__ of a notebook or the REPL)."""
    known = _users_classes.get(cls)
    if known is None:
        module = sys.modules.get(getattr(cls, "__module__", ""), None)
        filename = getattr(module, "__file__", None)
        known = _users_classes[cls] = (cls.__module__ != "builtins" if filename is None
                                       else is_users_file(filename))
    return known


def user_frame(start=None):
    """The innermost stack frame that belongs to the user (at `start` or above it, when
    given); None when there is none."""
    frame = sys._getframe(1) if start is None else start
    # Staging walks several of xform's frames per equation: each step is one lookup of the
    # file name (whose hash a string keeps; a code object's is computed on every lookup).
    excluded_files = is_excluded.known
    while frame is not None:
        filename = frame.f_code.co_filename
        excluded = excluded_files.get(filename)
        if excluded is None:
            excluded = is_excluded(filename)
        if not excluded:
            return frame
        frame = frame.f_back
    return None


def scipy_callee(user) -> str | None:
    """The SciPy function the user's frame `user` called, as "scipy.stats.foo.logpdf", when the
    current call stack passes through SciPy below it; else None."""
    if _SCIPY_SPEC is None:
        return None
    frame, called = sys._getframe(1), None
    while frame is not None and frame is not user:
        if frame.f_code.co_filename.startswith(_SCIPY_DIR + os.sep):
            called = frame          # the outermost SciPy frame seen so far
        frame = frame.f_back
    if called is None or frame is None:
        return None
    return scipy_callee_name(called, user)


def scipy_call_raising(tb):
    """(the user's frame, the SciPy function it called) for an exception whose traceback
    `tb` ends inside SciPy (numpy's and Cython's frames below it aside), called from the
    user's code; else None."""
    if _SCIPY_SPEC is None:
        return None
    entries = _frames(tb)
    if entries and _current_opname(entries[-1]) == "RAISE_VARARGS":
        return None     # a `raise` of numpy's or SciPy's own Python: about the values
    inner = [f for f in entries if not (f.f_code.co_filename.startswith(_NUMPY_DIR + os.sep)
                                        or _is_cython(f.f_code.co_filename))]
    if not inner or not inner[-1].f_code.co_filename.startswith(_SCIPY_DIR + os.sep):
        return None
    for user, called in zip(reversed(inner[:-1]), reversed(inner[1:])):
        if not is_excluded(user.f_code.co_filename):
            if not called.f_code.co_filename.startswith(_SCIPY_DIR + os.sep):
                return None
            return user, called
    return None


def compiled_call_raising(tb):
    """The user's frame for an exception whose traceback `tb` ends in compiled code its
    current call reached (frames of Cython's own sources aside); else None."""
    frames = _frames(tb)
    while frames and _is_cython(frames[-1].f_code.co_filename):
        frames.pop()
    if not frames or is_excluded(frames[-1].f_code.co_filename):
        return None
    return frames[-1] if _current_opname(frames[-1]) == "CALL" else None


def _frames(tb) -> list:
    """The frames of traceback `tb`, outermost first."""
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return frames


def _is_cython(filename: str) -> bool:
    return filename == "<stringsource>" or filename.endswith((".pyx", ".pxd", ".pxi"))


def _current_opname(frame) -> str | None:
    """The name of the bytecode instruction `frame` is at (None for compiled code's frames)."""
    return next((i.opname for i in dis.get_instructions(frame.f_code)
                 if i.offset == frame.f_lasti), None)


def scipy_callee_name(called, user) -> str:
    """The public name of SciPy's function `called`, as "scipy.signal.lfilter"."""
    if "<locals>" in called.f_code.co_qualname:
        # a decorator's wrapper (SciPy's statistics functions are called through one): the
        # name is the one the user's call spells
        return called_name(user) or "a SciPy function"
    module = called.f_globals.get("__name__", "scipy")
    public = ".".join(part for part in module.split(".") if not part.startswith("_"))
    return f"{public}.{called.f_code.co_qualname}"


def called_name(frame) -> str:
    """What the call `frame` is making now spells before its arguments ("st.entropy"), when
    it sits on one line; else ""."""
    positions = list(frame.f_code.co_positions())[frame.f_lasti // 2]
    lineno, end_lineno, start, end = positions
    if lineno is None or lineno != end_lineno or start is None:
        return ""
    text = linecache.getline(frame.f_code.co_filename, lineno)[start:end]
    return text.partition("(")[0].strip() if "(" in text else ""


def user_frame_info(start=None) -> SourceInfo | None:
    """Where the innermost frame that belongs to the user (at `start` or above, when given)
    is; None when there is none."""
    frame = user_frame(sys._getframe(1) if start is None else start)
    if frame is None:
        return None
    # One SourceInfo per user line, shared by its equations: staging asks once per equation.
    code = frame.f_code
    key = (code.co_filename, frame.f_lineno, code.co_name)
    info = _infos.get(key)
    if info is None:
        if len(_infos) >= 65536:    # bounded: a notebook's cells make new file names
            _infos.clear()
        info = _infos[key] = SourceInfo(*key)
    return info


_infos: dict = {}
