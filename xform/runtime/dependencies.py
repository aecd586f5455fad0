"""What a staging read, and the cheap check that it still holds: the Python analogue of
Mooncake's backedges. While a function is staged, every Python function that runs is seen
through `sys.setprofile`; the globals its code names, the code objects of functions bound to
them, and the root function's closure cells (found by the walk in xform.ir.reads) are recorded
with the objects they held. A cache hit re-checks those bindings by identity; any change means
the entry is stale. The profile hook runs only while staged user code does: `watching` is
installed into ir at import as the scope of that code (xform.ir.hooks), and xform's own entry
points pause the hook.
"""
from __future__ import annotations

import contextlib
import sys
import threading
import types
import weakref

import sysconfig

from xform.ir.hooks import install_watcher
from xform.ir.reads import MISSING, closure_cells, named_globals, nested_codes
from xform.source_info import is_excluded

# Code that is not the user's: the standard library, installed packages, generated code.
_STABLE_PREFIXES = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib",
                                                             "purelib", "platlib")})


def _is_user_code(filename: str) -> bool:
    return not (filename.startswith("<") or filename.startswith(_STABLE_PREFIXES)
                or is_excluded(filename))

_local = threading.local()  # the recorders active in this thread (profiling is per thread)


class Dependencies:
    """Identity checks: global bindings, function code objects and closure cells."""

    # (no __slots__: `freeze` replaces the `valid` method with a generated function)

    def __init__(self):
        self.root = None        # weak reference to the staged function: the cache must not
        self.root_code = None   # keep it alive (its entries go when it dies)
        self.globals = []   # (globals dict, name, object)
        self.codes = []     # (function, code object)
        self.cells = []     # (cell, object)
        self.draws = False  # staging drew random numbers: rebuild on every call (effects.py)
        self._seen_codes = set()

    def freeze(self) -> None:
        """Replace `valid` by one generated expression with every binding inlined: the
        check runs on every cache hit, so it should cost little more than a function call."""
        namespace = {"MISSING": MISSING}
        terms = []
        if self.root is not None:
            namespace["root"], namespace["root_code"] = self.root, self.root_code
            terms.append("(root() is not None and root().__code__ is root_code)")
        for i, (namespace_dict, name, value) in enumerate(self.globals):
            namespace[f"g{i}"], namespace[f"n{i}"], namespace[f"v{i}"] = \
                namespace_dict, name, value
            terms.append(f"g{i}.get(n{i}, MISSING) is v{i}")
        for i, (function, code) in enumerate(self.codes):
            namespace[f"f{i}"], namespace[f"c{i}"] = function, code
            terms.append(f"f{i}.__code__ is c{i}")
        if self.cells:
            # An emptied cell raises on access, so cells keep the general check.
            namespace["cells_valid"] = self._cells_valid
            terms.append("cells_valid()")
        source = "def valid():\n    return " + (" and ".join(terms) or "True") + "\n"
        exec(compile(source, "<xform-dependencies>", "exec"), namespace)
        self.valid = namespace["valid"]

    def _cells_valid(self) -> bool:
        for cell, value in self.cells:
            try:
                if cell.cell_contents is not value:
                    return False
            except ValueError:
                return False
        return True

    def valid(self) -> bool:
        if self.root is not None:
            root = self.root()
            if root is None or root.__code__ is not self.root_code:
                return False
        for namespace, name, value in self.globals:
            if namespace.get(name, MISSING) is not value:
                return False
        for function, code in self.codes:
            if function.__code__ is not code:
                return False
        return self._cells_valid()

    def __len__(self):
        return len(self.globals) + len(self.codes) + len(self.cells)

    def add_root(self, function) -> None:
        """The staged function itself, held weakly."""
        if not isinstance(function, types.FunctionType):
            return
        self.root, self.root_code = weakref.ref(function), function.__code__
        self._add_closure_and_globals(function)

    def add_function(self, function) -> None:
        """The function's code, its closure cells, and the globals its code names."""
        if not isinstance(function, types.FunctionType):
            return
        self.codes.append((function, function.__code__))
        self._add_closure_and_globals(function)

    def _add_closure_and_globals(self, function) -> None:
        # The code first: a function whose closure holds itself is then seen as visited.
        self.add_code(function.__code__, function.__globals__)
        for _, cell, value in closure_cells(function):
            self.cells.append((cell, value))
            if isinstance(value, types.FunctionType) and value.__code__ not in self._seen_codes:
                self.add_function(value)

    def add_code(self, code, namespace) -> None:
        """The globals `code` and the functions defined in it name (modules excepted)."""
        if code in self._seen_codes:  # first: the profile hook calls this on every call
            return
        for nested in nested_codes(code):
            # A code seen before was walked with everything defined in it.
            if nested in self._seen_codes:
                continue
            self._seen_codes.add(nested)
            for name, value in named_globals(nested, namespace):
                if isinstance(value, types.ModuleType):
                    continue
                self.globals.append((namespace, name, value))
                if isinstance(value, types.FunctionType):
                    self.codes.append((value, value.__code__))

    def merge(self, other: "Dependencies") -> None:
        self.draws = self.draws or other.draws
        self.globals.extend(other.globals)
        self.codes.extend(other.codes)
        self.cells.extend(other.cells)


def _recorders():
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


_user_files: dict = {}  # filename -> whether it is the user's code (a per-call check)


def hook(frame, event, arg):
    """The profile function `watching` installs (xform.ir.hooks.unwatched pauses it)."""
    if event != "call":
        return
    code = frame.f_code
    user = _user_files.get(code.co_filename)
    if user is None:
        user = _user_files[code.co_filename] = _is_user_code(code.co_filename)
    if user:
        for recorder in _local.stack:
            recorder.add_code(code, frame.f_globals)


@contextlib.contextmanager
def recording(function):
    """Record what staging `function` reads; yields the Dependencies being filled.

    Only user code running inside `watching()` (the calls of staged functions) is seen, so
    transforms, passes and codegen run at full speed.
    """
    dependencies = Dependencies()
    dependencies.add_root(function)
    stack = _recorders()
    stack.append(dependencies)
    try:
        yield dependencies
    finally:
        stack.pop()
    dependencies.freeze()


@contextlib.contextmanager
def watching():
    """See the Python functions that run inside, for every active recording.

    Notes: a profiler that is already active (cProfile, coverage) is left alone, since one
    installed from C cannot be restored from Python; then only the recorded functions
    themselves, their closures and the globals their own code names are recorded.
    """
    stack = getattr(_local, "stack", None)
    if not stack or sys.getprofile() is not None:
        yield
        return
    sys.setprofile(hook)
    try:
        yield
    finally:
        sys.setprofile(None)


install_watcher(watching, hook)


def note(dependencies: Dependencies) -> None:
    """Add `dependencies` (of a cached callee used now) to every active recording."""
    for recorder in getattr(_local, "stack", ()):
        recorder.merge(dependencies)
