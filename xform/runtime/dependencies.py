"""What a staging read, and the cheap check that it still holds: the Python analogue of
Mooncake's backedges. While a function is staged, every Python function that runs is seen
through `sys.setprofile`; the globals its code names, the code objects of functions bound to
them, and the root function's closure cells are recorded with the objects they held. A cache
hit re-checks those bindings by identity; any change means the entry is stale. When the one
walk of what the function reads (xform.runtime.reads.Reach, run by the cache's
xform.runtime.effects.Watch) followed every function the code can run, those are recorded at
once and no hook is installed: its events cost more than the walk's answer (`recording`);
under another profiler, which is left in place, the walk's functions are recorded instead.
The profile hook runs only while staged user code does: `watches` says whether the staged call
is to be seen, a field of the Runtime record runtime/cache.py installs (xform.ir.execute), and
xform's own entry points pause the hook (xform.ir.execute.unwatched).
"""
from __future__ import annotations

import sys
import threading
import types
import warnings
import weakref

import numpy as np

from xform.errors import CapturedArrayWarning, SideEffectError, captured_write_error
from xform.runtime.reads import MISSING, closure_cells, code_names, fingerprint
from xform.numpy.captured import CapturedArray, CapturedGlobals, original_array
from xform.numpy.random import unproxied
from xform.numpy.stand_ins import code_outside_staging
from xform.source_info import SourceInfo, is_users_class, is_users_file, user_frame_info


# Not looked into by the content guards: their attributes are code, not state a staging reads
# as a value.
_OPAQUE = (types.ModuleType, type, types.FunctionType, types.MethodType,
           types.BuiltinFunctionType, np.ndarray)
_MAX_GUARDED_ITEMS = 1000  # a larger container is not guarded (its check would cost per call)

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
        # id of each guarded one -> an array's fingerprint when staging first saw it (None
        # for a container)
        self._seen_containers = {}
        self.draws = False  # staging drew random numbers: rebuild on every call (effects.py)
        self.static = False  # recorded at once, with no profile hook (`recording`)
        # id -> code object whose globals are recorded (held, so that its id stays its own;
        # by id: a code object's hash is computed anew on every lookup, over its nested code)
        self._seen_codes = {}
        self._added = set()  # ids of the functions recorded (the root's too)
        self._coded = {}    # id -> code object checked, of the functions in `codes` (held there)
        self.walked = ()    # the functions the walk of the root found (`recording`)

    def freeze(self) -> None:
        """Snapshot the guarded containers and arrays as they are when recording ends."""
        for container in self._guarded:
            if type(container) is np.ndarray:
                now = fingerprint(container)
                self.arrays.append((container, now))
                if now != self._seen_containers[id(container)]:
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
        # (taken out of its own globals: a cycle would leave it to the garbage collector)
        self.valid = namespace.pop("valid")
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
        value = original_array(value)
        if type(value) is np.ndarray:
            # Read by plain numpy while staging (x[i] * C[i]: C[i] is computed then), an
            # array's values are in the graph; it is hashed on every hit (xform.runtime.reads).
            if value.flags.writeable:
                self._guard(value)
                if value.nbytes >= LARGE_CHECK_BYTES:
                    _warn_large_check(value)
            return
        if type(value) is dict or type(value) is list:
            container = value
        elif isinstance(value, _OPAQUE) or not is_users_class(type(value)):
            return
        else:
            container = getattr(value, "__dict__", None)
            if type(container) is not dict or len(container) > _MAX_GUARDED_ITEMS:
                return
            self._guard(container)
            for item in list(container.values()):    # and the containers it holds, one level
                if type(item) in (dict, list, np.ndarray, CapturedArray):
                    self.add_contents(item)
            return
        if len(container) <= _MAX_GUARDED_ITEMS:
            self._guard(container)

    def _guard(self, container) -> None:
        if id(container) not in self._seen_containers:
            self._seen_containers[id(container)] = (fingerprint(container)
                                                    if type(container) is np.ndarray else None)
            self._guarded.append(container)

    def _side_effect_error(self, array) -> SideEffectError:
        """Staging wrote into `array`: the cached calls would not (see SideEffectError)."""
        names = [name for _, name, value in self.globals if value is array]
        names += [cell_name for cell_name, cell, value in self._named_cells() if value is array]
        frame = sys._getframe(1)
        while frame is not None and not is_users_file(frame.f_code.co_filename):
            frame = frame.f_back
        source = None if frame is None else SourceInfo(frame.f_code.co_filename, frame.f_lineno,
                                                       frame.f_code.co_name)
        return captured_write_error(array, names[0] if names else None, source)

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
        if type(function) is types.MethodType:
            self.add_contents(function.__self__)
            function = function.__func__
        if type(function) is not types.FunctionType:    # (neither type has subclasses)
            return
        self.root, self.root_code = weakref.ref(function), code_outside_staging(function)
        self._added.add(id(function))
        self._add_closure_and_globals(function, self.root_code)
        for value in function.__defaults__ or ():
            self.add_contents(value)

    def add_function(self, function) -> None:
        """The function's code, its closure cells, and the globals its code names."""
        if type(function) is not types.FunctionType or id(function) in self._added:
            return
        self._added.add(id(function))
        self._add_closure_and_globals(function, self._add_code_check(function))

    def _add_code_check(self, function) -> types.CodeType:
        """Check `function`'s code from now on; its code outside staging."""
        code = self._coded.get(id(function))
        if code is None:
            code = self._coded[id(function)] = code_outside_staging(function)
            self.codes.append((function, code))
        return code

    def _add_closure_and_globals(self, function, code) -> None:
        # (`function` is in `_added` already: one whose closure holds itself stops there)
        self.add_code(code, function.__globals__)
        if function.__closure__ is None:    # (the common case: no cells, no generator to start)
            return
        for cell in function.__closure__:
            try:
                value = cell.cell_contents
            except ValueError:  # a name of the enclosing scope not assigned yet
                continue
            if type(value) is types.FunctionType:   # (the common value: no contents)
                self.cells.append((cell, value))
                self.add_function(value)    # (by identity: closures of one code differ)
                continue
            value = unproxied(value)    # a generator stands in a proxy only while staged
            self.cells.append((cell, value))
            self.add_contents(value)

    def add_code(self, code, namespace) -> None:
        """The globals `code` and the functions defined in it name (modules excepted)."""
        seen = self._seen_codes
        if id(code) in seen:  # first: the profile hook calls this on every call
            return
        if type(namespace) is CapturedGlobals:  # a staged copy's: record the module's own
            namespace = namespace.module
        for nested, names in code_names(code):
            # A code seen before was walked with everything defined in it.
            if id(nested) in seen:
                continue
            seen[id(nested)] = nested
            for name in names:
                value = namespace.get(name, MISSING)
                # (a function, the common value, is no stand-in and has no contents to guard)
                if type(value) is types.FunctionType:
                    self.globals.append((namespace, name, value))
                    self._add_code_check(value)
                elif value is not MISSING and not isinstance(value, types.ModuleType):
                    value = unproxied(value)
                    self.globals.append((namespace, name, value))
                    self.add_contents(value)

    def add_walked(self) -> None:
        """The functions the walk of the root found, where no profile hook can see which
        run (they are more: what the root's data holds, run or not)."""
        for function in self.walked:
            self.add_function(function)

    def merge(self, other: "Dependencies") -> None:
        self.draws = self.draws or other.draws
        self.globals.extend(other.globals)
        self.codes.extend(other.codes)
        self.cells.extend(other.cells)
        for container in other._guarded:
            self._guard(container)


def _recorders():
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


_users_files = is_users_file.known


def hook(frame, event, arg):
    """The profile function installed around a staged call that `watches` (paused by
    xform.ir.execute.unwatched)."""
    if event != "call":
        return
    code = frame.f_code
    user = _users_files.get(code.co_filename)     # (inline: a per-call check)
    if user is None:
        user = is_users_file(code.co_filename)
    if user:
        for recorder in _local.stack:
            recorder.add_code(code, frame.f_globals)


class recording:
    """Record what staging `function` reads; `with recording(f) as dependencies` gives the
    Dependencies being filled, frozen when the block ends without an error.

    `functions` are those the walk of `function` found (xform.runtime.effects.Watch). When
    they are every function the staging can run (`complete`), they are recorded at once and
    no profile hook is needed. Otherwise the functions that run inside a staged call (when
    `watches()`) are recorded as the hook sees them, so transforms, passes and
    codegen run at full speed; where no hook can be installed, the walk's functions.
    (A class, not a generator context manager: every build enters one.)
    """

    __slots__ = ("_function", "_dependencies", "_stack", "_functions", "_complete")

    def __init__(self, function, functions=(), complete=False):
        self._function = function
        self._functions = functions
        self._complete = complete

    def __enter__(self) -> Dependencies:
        dependencies = self._dependencies = Dependencies()
        dependencies.add_root(self._function)
        dependencies.walked = self._functions
        if self._complete:
            dependencies.static = True
            if self._functions:
                dependencies.add_walked()
        stack = self._stack = getattr(_local, "stack", None)
        if stack is None:
            stack = self._stack = _recorders()
        stack.append(dependencies)
        return dependencies

    def __exit__(self, kind, value, traceback):
        self._stack.pop()
        dependencies = self._dependencies
        dependencies.walked = ()    # an entry must not keep the functions alive
        if kind is None and dependencies._guarded:
            dependencies.freeze()


def watches() -> bool:
    """Whether the Python functions the staged call runs are to be seen, for every active
    recording: whether `hook` should be installed around it
    (xform.ir.hooks.user_code_scope.call). (A function, not a scope: it holds nothing to
    undo, and every staging asks.)

    Notes: a profiler that is already active (cProfile, another library's) is left alone,
    since one installed from C cannot be restored from Python; then each recording has what
    the walk of its function found (the functions its code, closures, defaults and data
    hold, to the walk's bounds).
    """
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
            recorder.add_walked()
        return False
    return True


def note(dependencies: Dependencies) -> None:
    """Add `dependencies` (of a cached callee used now) to every active recording."""
    for recorder in getattr(_local, "stack", ()):
        recorder.merge(dependencies)
