"""What a staging read, and the cheap check that it still holds: the Python analogue of
Mooncake's backedges. While a function is staged, every Python function that runs is seen
through `sys.setprofile`; the globals its code names, the code objects of functions bound to
them, and the root function's closure cells (found by the walk in xform.ir.reads) are recorded
with the objects they held. A cache hit re-checks those bindings by identity; any change means
the entry is stale. The profile hook runs only while staged user code does: `watching` is
installed into ir at import as the scope of that code (xform.ir.hooks), and xform's own entry
points pause the hook. When the cache's walk of the function (xform.runtime.effects) followed
every function it can run, those are recorded at once instead, and no hook is installed: its
events cost more than the walk's answer (`recording`).
"""
from __future__ import annotations

import sys
import threading
import types
import warnings
import weakref

import numpy as np

from xform.errors import CapturedArrayWarning, SideEffectError
from xform.ir.hooks import install_watcher
from xform.ir.reads import MISSING, closure_cells, fingerprint, named_globals, nested_codes
from xform.numpy.random import unproxied
from xform.numpy.stand_ins import code_outside_staging
from xform.source_info import SourceInfo, is_users_file, user_frame_info


# Not looked into by the content guards: their attributes are code, not state a staging reads
# as a value.
_OPAQUE = (types.ModuleType, type, types.FunctionType, types.MethodType,
           types.BuiltinFunctionType, np.ndarray)
_STATIC_DEPTH = 4  # function levels recorded statically when another profiler is active
_MAX_GUARDED_ITEMS = 1000  # a larger container is not guarded (its check would cost per call)

_users_classes: dict = {}  # class -> whether the user's code defines it


def _is_users_class(cls) -> bool:
    known = _users_classes.get(cls)
    if known is None:
        module = sys.modules.get(getattr(cls, "__module__", ""), None)
        filename = getattr(module, "__file__", None)
        # No file: __main__ of a notebook or the REPL, the user's too.
        known = _users_classes[cls] = (cls.__module__ != "builtins" if filename is None
                                       else is_users_file(filename))
    return known


_local = threading.local()  # the recorders active in this thread (profiling is per thread)


# A captured array this large costs a cached call about a millisecond or more to hash.
LARGE_CHECK_BYTES = 8 << 20
_warned_arrays: dict = {}   # id(array) -> the array, for the warnings given once


def _warn_large_check(array) -> None:
    if _warned_arrays.get(id(array)) is array:
        return
    if len(_warned_arrays) >= 256:
        _warned_arrays.clear()
    _warned_arrays[id(array)] = array
    source = user_frame_info()
    message = (f"a staged function reads a writeable array it captures "
               f"({array.dtype}{list(array.shape)}, {array.nbytes / 2**20:.0f} MB): every "
               "cached call hashes it, to notice a change in place, which costs more than a "
               "small call itself. Pass it as an argument, or make it read-only "
               "(a.flags.writeable = False) if it never changes")
    if source is None:
        warnings.warn(message, CapturedArrayWarning, stacklevel=3)
    else:
        warnings.warn_explicit(message, CapturedArrayWarning, source.filename, source.lineno)


class Dependencies:
    """Identity checks: global bindings, function code objects and closure cells."""

    # (no __slots__: `specialize` replaces the `valid` method with a generated function)

    def __init__(self):
        self.root = None        # weak reference to the staged function: the cache must not
        self.root_code = None   # keep it alive (its entries go when it dies)
        self.globals = []   # (globals dict, name, object)
        self.codes = []     # (function, code object)
        self.cells = []     # (cell, object)
        self.contents = []  # (container, its items then): what staging may have read inside
        self.arrays = []    # (small writeable array, fingerprint of its bytes then)
        self._guarded = []  # containers and arrays to snapshot when recording ends
        self._prints_when_seen = {}  # id(array) -> its fingerprint when staging first saw it
        self._seen_containers = set()
        self.draws = False  # staging drew random numbers: rebuild on every call (effects.py)
        self.static = False  # recorded at once, with no profile hook (`recording`)
        self._seen_codes = set()
        self._added = set()  # ids of the functions recorded (the root's too)

    def freeze(self) -> None:
        """Snapshot the guarded containers and arrays as they are when recording ends."""
        for container in self._guarded:
            if type(container) is np.ndarray:
                self.arrays.append((container, fingerprint(container)))
                if self.arrays[-1][1] != self._prints_when_seen.get(id(container),
                                                                    self.arrays[-1][1]):
                    raise self._side_effect_error(container)
            else:
                # A nested staging ends while the generators stand in proxies: record them.
                self.contents.append((container, tuple((k, unproxied(v)) for k, v in
                                                       container.items())
                                      if type(container) is dict
                                      else tuple(unproxied(v) for v in container)))

    def merged(self, other: "Dependencies") -> "Dependencies":
        """The checks of both (an entry's paths are staged one by one, each reading what its
        own decisions reach)."""
        both = Dependencies()
        both.root, both.root_code = self.root or other.root, self.root_code or other.root_code
        for name in ("globals", "codes", "cells", "contents", "arrays"):
            setattr(both, name, getattr(self, name) + getattr(other, name))
        both.draws = self.draws or other.draws
        both.static = self.static and other.static
        return both

    def specialize(self):
        """Replace `valid` by one generated expression with every binding inlined, and return
        it: the check runs on every cache hit, so it should cost little more than a function
        call; generating it costs a compile(), which only entries hit again repay (the
        cache asks for it when an entry's code is compiled, xform.runtime.tiers).

        Notes: a root that died reads as None, which has no `__code__`, and an emptied cell
        raises ValueError on `cell_contents`: both mean the entry is stale, so the
        expression runs inside one `try` (free in CPython 3.11 until something raises)
        instead of testing for them on every hit."""
        if "valid" in self.__dict__:
            return self.valid
        namespace = {"MISSING": MISSING}
        terms = []
        if self.root is not None:
            namespace["root"], namespace["root_code"] = self.root, self.root_code
            terms.append("root().__code__ is root_code")
        for i, (namespace_dict, name, value) in enumerate(self.globals):
            namespace[f"g{i}"], namespace[f"n{i}"], namespace[f"v{i}"] = \
                namespace_dict, name, value
            terms.append(f"g{i}.get(n{i}, MISSING) is v{i}")
        for i, (function, code) in enumerate(self.codes):
            namespace[f"f{i}"], namespace[f"c{i}"] = function, code
            terms.append(f"f{i}.__code__ is c{i}")
        for i, (cell, value) in enumerate(self.cells):
            namespace[f"k{i}"], namespace[f"w{i}"] = cell, value
            terms.append(f"k{i}.cell_contents is w{i}")
        if self.contents or self.arrays:
            namespace["contents_valid"] = self._contents_valid
            terms.append("contents_valid()")
        source = ("def valid():\n    try:\n        return " + (" and ".join(terms) or "True")
                  + "\n    except (AttributeError, ValueError):\n        return False\n")
        exec(compile(source, "<xform-dependencies>", "exec"), namespace)
        self.valid = namespace["valid"]
        return self.valid

    def _cells_valid(self) -> bool:
        for cell, value in self.cells:
            try:
                if cell.cell_contents is not value:
                    return False
            except ValueError:
                return False
        return True

    def _contents_valid(self) -> bool:
        for array, then in self.arrays:
            if fingerprint(array) != then:
                return False
        for container, items in self.contents:
            now = container.items() if type(container) is dict else container
            if len(now) != len(items):
                return False
            for item, then in zip(now, items):
                if type(item) is tuple:     # a dict's (key, value)
                    if item[0] is not then[0] or item[1] is not then[1]:
                        return False
                elif item is not then:
                    return False
        return True

    def add_contents(self, value) -> None:
        """Guard what staging may read inside `value`: a dict's or list's items, or the
        attributes of an instance of a class the user's code defines (a library's objects,
        xform's, modules, classes and functions are not looked into: their attributes hold
        caches that change as they work). The items are read when recording ends (so what
        staging itself changed counts as read), then compared by identity on every hit, and
        held, so that their ids cannot be reused by new objects."""
        if type(value) is np.ndarray:
            # Read by plain numpy while staging (x[i] * C[i]: C[i] is computed then), an
            # array's values are in the graph; it is hashed on every hit (xform.ir.reads).
            if value.flags.writeable:
                self._guard(value)
                if value.nbytes >= LARGE_CHECK_BYTES:
                    _warn_large_check(value)
            return
        if type(value) is dict or type(value) is list:
            container = value
        elif isinstance(value, _OPAQUE) or not _is_users_class(type(value)):
            return
        else:
            container = getattr(value, "__dict__", None)
            if type(container) is not dict or len(container) > _MAX_GUARDED_ITEMS:
                return
            self._guard(container)
            for item in list(container.values()):    # and the containers it holds, one level
                if type(item) in (dict, list, np.ndarray):
                    self.add_contents(item)
            return
        if len(container) <= _MAX_GUARDED_ITEMS:
            self._guard(container)

    def _guard(self, container) -> None:
        if id(container) not in self._seen_containers:
            self._seen_containers.add(id(container))
            self._guarded.append(container)
            if type(container) is np.ndarray:
                self._prints_when_seen[id(container)] = fingerprint(container)

    def _side_effect_error(self, array) -> SideEffectError:
        """Staging wrote into `array`: the cached calls would not (see SideEffectError)."""
        names = [name for _, name, value in self.globals if value is array]
        names += [cell_name for cell_name, cell, value in self._named_cells() if value is array]
        what = f"'{names[0]}' ({array.dtype}{list(array.shape)})" if names else \
            f"of shape {array.shape}"
        frame = sys._getframe(1)
        while frame is not None and not is_users_file(frame.f_code.co_filename):
            frame = frame.f_back
        source = None if frame is None else SourceInfo(frame.f_code.co_filename, frame.f_lineno,
                                                       frame.f_code.co_name)
        return SideEffectError(
            f"the staged function wrote into a numpy array it captured, {what}: the write "
            "happens once, while staging, not on the cached calls", source,
            "pass the array as an argument and return the new values (y = np.where(...), "
            "xform.index_add), or do the write outside the staged function")

    def _named_cells(self):
        root = self.root() if self.root is not None else None
        return closure_cells(root) if root is not None else ()

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
        return self._cells_valid() and self._contents_valid()

    def __len__(self):
        return (len(self.globals) + len(self.codes) + len(self.cells) + len(self.contents)
                + len(self.arrays))

    def add_root(self, function) -> None:
        """The staged function itself, held weakly (a bound method: its instance's attributes
        are guarded too)."""
        if isinstance(function, types.MethodType):
            self.add_contents(function.__self__)
            function = function.__func__
        if not isinstance(function, types.FunctionType):
            return
        self.root, self.root_code = weakref.ref(function), code_outside_staging(function)
        self._added.add(id(function))
        self._add_closure_and_globals(function)
        for value in function.__defaults__ or ():
            self.add_contents(value)

    def add_function(self, function) -> None:
        """The function's code, its closure cells, and the globals its code names."""
        if not isinstance(function, types.FunctionType) or id(function) in self._added:
            return
        self._added.add(id(function))
        self.codes.append((function, code_outside_staging(function)))
        self._add_closure_and_globals(function)

    def _add_closure_and_globals(self, function) -> None:
        # (`function` is in `_added` already: one whose closure holds itself stops there)
        self.add_code(code_outside_staging(function), function.__globals__)
        for _, cell, value in closure_cells(function):
            value = unproxied(value)    # a generator stands in a proxy only while staged
            self.cells.append((cell, value))
            self.add_contents(value)
            self.add_function(value)    # (by identity: closures of one code differ)

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
                value = unproxied(value)
                self.globals.append((namespace, name, value))
                self.add_contents(value)
                if isinstance(value, types.FunctionType):
                    self.codes.append((value, code_outside_staging(value)))

    def add_reachable(self, depth: int = _STATIC_DEPTH) -> None:
        """Without the profile hook: the functions the root's code and closure name, and the
        ones theirs name, `depth` levels deep (methods reached through objects are missed)."""
        root = self.root() if self.root is not None else None
        frontier = [root] if root is not None else []
        seen = {id(root)}
        for _ in range(depth):
            # (by identity: closures of one code hold different cells)
            functions = [value for function in frontier
                         for value in _named_functions(function) if id(value) not in seen]
            for function in functions:
                seen.add(id(function))
                self.add_function(function)
            frontier = functions

    def merge(self, other: "Dependencies") -> None:
        self.draws = self.draws or other.draws
        self.globals.extend(other.globals)
        self.codes.extend(other.codes)
        self.cells.extend(other.cells)
        for container in other._guarded:
            self._guard(container)


def _named_functions(function) -> list:
    named = [value for code in nested_codes(function.__code__)
             for _, value in named_globals(code, function.__globals__)]
    named += [value for _, _, value in closure_cells(function)]
    named += function.__defaults__ or ()
    named += (function.__kwdefaults__ or {}).values()
    return [value for value in named if isinstance(value, types.FunctionType)]


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
        user = _user_files[code.co_filename] = is_users_file(code.co_filename)
    if user:
        for recorder in _local.stack:
            recorder.add_code(code, frame.f_globals)


class recording:
    """Record what staging `function` reads; `with recording(f) as dependencies` gives the
    Dependencies being filled, frozen when the block ends without an error.

    Only user code running inside `watching()` (the calls of staged functions) is seen, so
    transforms, passes and codegen run at full speed. With `functions` (every function
    besides the root that the staging can run, known to the caller:
    xform.runtime.effects.Watch.complete), those are recorded at once and no profile hook
    is needed. (A class, not a generator context manager: every build enters one.)
    """

    __slots__ = ("_function", "_dependencies", "_stack", "_functions")

    def __init__(self, function, functions=None):
        self._function = function
        self._functions = functions

    def __enter__(self) -> Dependencies:
        dependencies = self._dependencies = Dependencies()
        dependencies.add_root(self._function)
        if self._functions is not None:
            dependencies.static = True
            for function in self._functions:
                dependencies.add_function(function)
        self._stack = _recorders()
        self._stack.append(dependencies)
        return dependencies

    def __exit__(self, kind, value, traceback):
        self._stack.pop()
        if kind is None:
            self._dependencies.freeze()


class watching:
    """Whether the Python functions that run inside are to be seen, for every active
    recording: `__enter__` says whether the staged call should run with `hook` installed
    (xform.ir.hooks.user_code_scope.call). (A class, not a generator context manager: every
    staging enters one.)

    Notes: a profiler that is already active (cProfile, another library's) is left alone,
    since one installed from C cannot be restored from Python; then what each recording's
    function can reach statically is recorded instead (`add_reachable`): the functions named
    by its code and closures, and theirs, a few levels deep.
    """

    __slots__ = ()

    def __enter__(self) -> bool:
        stack = getattr(_local, "stack", None)
        if not stack:
            return False
        for recorder in stack:
            if not recorder.static:
                break
        else:
            return False    # every recorder has what the hook would see
        if sys.getprofile() is not None:
            for recorder in stack:
                recorder.add_reachable()
            return False
        return True

    def __exit__(self, *exc_info):
        pass


install_watcher(watching, hook)


def note(dependencies: Dependencies) -> None:
    """Add `dependencies` (of a cached callee used now) to every active recording."""
    for recorder in getattr(_local, "stack", ()):
        recorder.merge(dependencies)
