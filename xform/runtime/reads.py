"""What a Python function can run and read besides its arguments: its closure cells, the
globals its code (nested functions and lambdas included) names, its defaults, the functions
and the user's data those hold (`Reach`, the one walk, with one set of bounds, behind the
effects analysis, xform.runtime.effects, and the dependency recorder,
xform.runtime.dependencies); the mutable containers it reads directly, with fingerprints of
their contents (threaded_map's mutation check)."""
from __future__ import annotations

import hashlib
import inspect
import types
import weakref

import numpy as np

from xform.ir.bytecode import nested_codes, per_code

MISSING = object()  # what a namespace lookup of an unbound name gives
MUTABLE = (list, dict, set, bytearray, np.ndarray)


def named_globals(code: types.CodeType, namespace: dict) -> list:
    """(name, value) for each name `code` itself uses that `namespace` binds. Attribute names
    are among them (`co_names` does not tell the two apart): `np.sin` names `np` and `sin`.

    >>> [name for name, _ in named_globals((lambda: np.sin).__code__, {"np": np})]
    ['np']
    """
    found = []
    for name in code.co_names:
        value = namespace.get(name, MISSING)
        if value is not MISSING:
            found.append((name, value))
    return found


@per_code
def code_names(code: types.CodeType) -> tuple:
    """(code object, the names it uses: co_names) for `code` and each function and lambda
    defined in it (nested_codes), read once per code object."""
    return tuple((nested, nested.co_names) for nested in nested_codes(code))


def closure_cells(function: types.FunctionType):
    """(name, cell, value) for each closure cell of `function` that holds a value.

    >>> def scaled_by(w):
    ...     return lambda x: x * w[0]
    >>> [(name, value) for name, _, value in closure_cells(scaled_by([2.0]))]
    [('w', [2.0])]
    """
    for name, cell in zip(function.__code__.co_freevars, function.__closure__ or ()):
        try:
            value = cell.cell_contents
        except ValueError:  # a name of the enclosing scope not assigned yet
            continue
        yield name, cell, value


# The walk's bounds: what it costs is what a first call pays.
MAX_FUNCTION_DEPTH = 4  # function levels followed (the root's included), through what holds them
MAX_DATA_DEPTH = 8      # attribute and item levels followed into the data one function reads
MAX_OBJECTS = 2000      # objects, containers and functions visited per walk
MAX_ITEMS = 256         # items of one dict or list looked at
# Top-level packages whose state and functions are not the user's: never walked into.
LIBRARIES = frozenset({"numpy", "scipy", "xform", "builtins", "sys", "os", "random", "math",
                       "functools", "itertools", "collections", "typing", "types", "abc",
                       "threading", "contextlib", "attrs", "networkx", "pandas", "matplotlib",
                       "torch", "jax", "autograd", "hypothesis", "pytest", "_pytest"})
# Libraries whose functions run no code of the user's and no stand-in
# (xform.numpy.stand_ins) but what the names the user's code spells reach. numpy's and xform's
# own functions are not among them (np.polynomial's call np.array, xform's call the functions
# they hold), only their modules, through which code reaches what its names say.
_TRANSPARENT = frozenset({"builtins", "math", "cmath", "functools", "itertools", "operator",
                          "collections", "typing", "types", "abc"})
_TRANSPARENT_MODULES = frozenset({"numpy", "numpy.linalg", "numpy.fft", "xform"})
# Names through which code can reach a module's attributes by a computed name.
_DYNAMIC_LOOKUPS = frozenset({"getattr", "eval", "exec", "__import__", "import_module",
                              "__dict__", "vars", "globals", "locals", "__getattribute__",
                              "attrgetter", "methodcaller"})
# Values the walk does not look into: they hold no code and nothing of the user's that runs.
SKIPPED = (str, bytes, int, float, complex, bool, type(None), np.ndarray, np.generic,
           types.CodeType, range, slice)


def is_library(module) -> bool:
    """Whether a module name is a library's (numpy, SciPy, xform, the standard library's
    core): what holds no state of the user's."""
    return isinstance(module, str) and module.partition(".")[0] in LIBRARIES


def _transparent(name: str, module: bool) -> bool:
    top = name.partition(".")[0]
    if top == "numpy" or top == "xform":
        return module and name in _TRANSPARENT_MODULES
    return top in _TRANSPARENT


class Reach:
    """The one walk of what a function can run and read: its closure cells, defaults and the
    globals its code names; the functions those are (`MAX_FUNCTION_DEPTH` levels); the
    user's modules (the attributes the code names); the user's data (object attributes,
    class attributes, dict and list items, tuples and sets: `MAX_DATA_DEPTH` levels,
    `MAX_OBJECTS` objects). `walk.value(f, 0)` walks `f` (any callable or value).

    What it records, for every consumer: `functions`, the functions followed besides the
    root (callees first); `names`, what their code spells (co_names: globals and attributes
    alike); `unfollowed`, whether it met user code it did not follow (past its depth, a name
    looked up at run time: getattr, eval); `complete`, whether it followed every function
    the code can run (no library function that may call back, no unfollowed code); `clean`,
    whether it met functions and library modules only, when `checks` say what a later walk
    of the same code would read (`holds`). Consumers see each value before it is looked
    into (`met`) and each code's names (`spelled`): the effects analysis finds generators
    there (xform.runtime.effects), threaded_map's check mutable containers
    (`shared_containers`); the dependency recorder reads `functions`.
    """

    def __init__(self, root=None):
        self.root = root
        self.functions = []
        self.names = set()
        self.unfollowed = False
        self.opaque = False
        self.clean = True
        self.checks = []
        self.seen = set()
        self.level = 0              # functions being followed (the root is the first)
        self._names = frozenset()   # the names the code being walked spells (module attributes)

    @property
    def complete(self) -> bool:
        return self.clean and not self.opaque

    def met(self, value, depth, holder, key, kind) -> bool:
        """A consumer's look at `value`, found in `holder` at `key` (`kind`: "cell" (`key`
        its name), "attr" (a class's), "defaults" (`key` the position), "global" (a module's
        namespace), "item" (a dict, a list, an object's `__dict__`); None where no slot can
        be set: a tuple's item); True: the walk does not look into it. (Numbers, strings and
        arrays are not met: a consumer that wants arrays overrides `value`.)"""
        return False

    def spelled(self, function, names) -> None:
        """A consumer's look at the names one code object of `function` spells."""

    def value(self, value, depth: int, holder=None, key=None, kind=None) -> None:
        if isinstance(value, SKIPPED):
            return
        if type(value) is types.FunctionType:     # the common value: one test
            if not self.met(value, depth, holder, key, kind):
                self._follow(value)
            return
        if type(value) is not types.ModuleType or not is_library(value.__name__):
            self.clean = False
        elif not _transparent(value.__name__, module=True):
            self.opaque = True
        if self.met(value, depth, holder, key, kind) or inspect.isbuiltin(value):
            return
        if isinstance(value, types.FunctionType):
            self._follow(value)
        elif inspect.ismethod(value):
            self.value(value.__self__, depth)
            self.value(value.__func__, depth)
        elif depth >= MAX_DATA_DEPTH or len(self.seen) > MAX_OBJECTS or id(value) in self.seen:
            return
        elif isinstance(value, types.ModuleType):
            self._module(value, depth)
        else:
            self.seen.add(id(value))
            self._data(value, depth)

    def _follow(self, function) -> None:
        if self.level < MAX_FUNCTION_DEPTH:
            self.level += 1
            self.function(function, 0)      # what it reads: data levels counted from it
            self.level -= 1
        else:
            self.opaque = self.unfollowed = True

    def _module(self, module, depth: int) -> None:
        """A user's module the code names: the attributes the code names (`mylib.sample`)."""
        if is_library(module.__name__):
            return
        self.seen.add(id(module))
        namespace = vars(module)
        for name in self._names:
            if name in namespace:
                self.value(namespace[name], depth + 1, namespace, name, "global")

    def _data(self, value, depth: int) -> None:
        if isinstance(value, dict):
            for k, item in list(value.items())[:MAX_ITEMS]:
                self.value(item, depth + 1, value, k, "item")
        elif isinstance(value, list):
            for i, item in enumerate(value[:MAX_ITEMS]):
                self.value(item, depth + 1, value, i, "item")
        elif isinstance(value, (tuple, frozenset, set)):
            for item in list(value)[:MAX_ITEMS]:
                self.value(item, depth + 1)            # no slot to set
        elif isinstance(value, type):
            if not is_library(value.__module__):
                for k, item in list(vars(value).items()):
                    if not k.startswith("__"):
                        self.value(item, depth + 1, value, k, "attr")
        else:
            attributes = getattr(value, "__dict__", None)
            if isinstance(attributes, dict):
                for k, item in list(attributes.items())[:MAX_ITEMS]:
                    self.value(item, depth + 1, attributes, k, "item")
            if not is_library(type(value).__module__):
                self.value(type(value), depth + 1)     # class attributes, methods

    def function(self, function: types.FunctionType, depth: int) -> None:
        # (by identity: closures of one code hold different cells)
        if id(function) in self.seen:
            return
        module = getattr(function, "__module__", None)
        if is_library(module):
            if not _transparent(module, module=False):
                self.opaque = True
            return
        self.seen.add(id(function))
        # Checks read through the root, or a weak reference to a deeper function: a memo of
        # them must keep no function of the user's alive.
        held = None if function is self.root else weakref.ref(function)
        checks = self.checks
        if held is not None:
            checks.append((_CODE, held, None, function.__code__))
            self.functions.append(function)
        for i, cell in enumerate(function.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:  # a name of the enclosing scope not assigned yet
                checks.append((_CELL, held, i, _EMPTY))
                continue
            checks.append((_CELL, held, i, _expected(value)))
            self.value(value, depth, cell, function.__code__.co_freevars[i], "cell")
        defaults = function.__defaults__ or ()
        checks.append((_DEFAULTS, held, None, len(defaults)))
        for i, value in enumerate(defaults):
            checks.append((_DEFAULT, held, i, _expected(value)))
            self.value(value, depth, function, i, "defaults")
        if function.__kwdefaults__:
            self.clean = False
        for k, value in (function.__kwdefaults__ or {}).items():
            self.value(value, depth, function.__kwdefaults__, k, "item")
        namespace = function.__globals__
        for code, names in code_names(function.__code__):
            checks.extend((_GLOBAL, held, name, _expected(namespace.get(name, MISSING)))
                          for name in names)
            self.names.update(names)
            if not self.unfollowed and _DYNAMIC_LOOKUPS.intersection(names):
                self.opaque = self.unfollowed = True
            self.spelled(function, names)
            outer, self._names = self._names, frozenset(names)
            for name, value in named_globals(code, namespace):
                self.value(value, depth, namespace, name, "global")
            self._names = outer


# The kinds of `Reach.checks`: (kind, holder or None for the root, key, what it held).
_CODE, _CELL, _DEFAULTS, _DEFAULT, _GLOBAL = range(5)
_SKIP = object()    # held a value the walk skips (a number, an array): any such value will do
_EMPTY = object()   # an unassigned cell


def _expected(value):
    """What a check compares with: any skipped value will do; a function is held weakly."""
    if isinstance(value, SKIPPED):
        return _SKIP
    return weakref.ref(value) if type(value) is types.FunctionType else value


_WEAK_REFERENCE = weakref.ref


def held_functions(checks) -> tuple:
    """Weak references to the functions a walk with these `checks` followed."""
    return tuple(held for kind, held, _, _ in checks if kind == _CODE)


def compared_by_identity(checks) -> bool:
    """Whether `holds` compares every read of a walk with these `checks` by identity: none
    held a value the walk skips (a number, an array), which any other such value passes for."""
    return all(expected is not _SKIP for _, _, _, expected in checks)


def holds(checks, root) -> bool:
    """Whether every read of a clean walk of `root`'s code (its `checks`) gives what it gave
    then: a walk now would find the same."""
    try:
        for kind, holder, key, expected in checks:
            function = root if holder is None else holder()
            if function is None:
                return False
            if kind == _GLOBAL:     # (the most common kind first)
                value = function.__globals__.get(key, MISSING)
            elif kind == _CELL:
                try:
                    value = function.__closure__[key].cell_contents
                except ValueError:
                    value = _EMPTY
            elif kind == _DEFAULT:
                value = function.__defaults__[key]
            elif kind == _DEFAULTS:
                if len(function.__defaults__ or ()) != expected:
                    return False
                continue
            else:
                value = function.__code__
            if expected is _SKIP:
                if not isinstance(value, SKIPPED):
                    return False
            elif type(expected) is _WEAK_REFERENCE:
                if value is not expected():
                    return False
            elif value is not expected:
                return False
    except (IndexError, TypeError):
        return False
    return True


class _SharedState(Reach):
    """The walk collecting the mutable containers and the user's objects it meets."""

    def __init__(self, root):
        super().__init__(root)
        self.found = []

    def value(self, value, depth: int, holder=None, key=None, kind=None) -> None:
        if isinstance(value, np.ndarray):
            self.found.append((_described(key, kind), value))
        else:
            super().value(value, depth, holder, key, kind)

    def met(self, value, depth, holder, key, kind) -> bool:
        if isinstance(value, MUTABLE):
            self.found.append((_described(key, kind), value))
        elif (type(value) is not types.FunctionType and not isinstance(value, type)
              and not is_library(type(value).__module__)
              and isinstance(getattr(value, "__dict__", None), dict)):
            self.found.append((f"the attributes of {type(value).__name__}", value.__dict__))
        return False


def _described(key, kind) -> str:
    if kind == "cell":
        return f"'{key}', which it closes over"
    if kind == "defaults":
        return "a default argument"
    if kind == "global":
        return f"the global '{key}'"
    if kind == "attr":
        return f"the class attribute '{key}'"
    return f"'{key}', which it reads" if isinstance(key, str) else "a container it reads"


def shared_containers(f) -> list:
    """(description, object) for the mutable containers `f` can reach (to the walk's bounds,
    through the functions it calls too): lists, dicts, sets, bytearrays, arrays, and the
    attributes of the user's objects.

    >>> w = [2.0]
    >>> def scaled(x, b=[]): return x * w[0]
    >>> scaled.__module__ = "model"       # (a doctest's functions count as xform's own)
    >>> [what for what, _ in shared_containers(scaled)]
    ['a default argument', "the global 'w'"]
    """
    walk = _SharedState(f)
    walk.value(f, 0)
    return walk.found


_EXACT_HASH_BYTES = 80_000   # larger arrays: the universal hash, at ~2 elementwise passes
_BLOCK = 8192                # 64-bit words per block of the universal hash
_WEIGHTS = np.random.default_rng(0x5EED).integers(0, 2**63, size=_BLOCK, dtype=np.uint64)
_WEIGHTS = _WEIGHTS * np.uint64(2) + np.uint64(1)     # odd: no single change can vanish
_block_weights = _WEIGHTS[:0]


def _universal_hash(data: np.ndarray) -> tuple:
    """sum(w_i * word_i) mod 2**64 over the array's 64-bit words with odd random weights
    (per block, then per block again): a change of one word always changes it, and several
    changes cancel with probability 2**-64. A cryptographic hash of megabytes would cost
    ~10x more on every cache hit."""
    global _block_weights
    raw = data.view(np.uint8).ravel()
    words = raw[:raw.size // 8 * 8].view(np.uint64)
    n_blocks = words.size // _BLOCK
    if _block_weights.size < n_blocks:
        _block_weights = np.random.default_rng(0xB10C).integers(
            0, 2**63, size=max(n_blocks, 2 * _block_weights.size), dtype=np.uint64)
        _block_weights = _block_weights * np.uint64(2) + np.uint64(1)
    with np.errstate(over="ignore"):
        per_block = words[:n_blocks * _BLOCK].reshape(n_blocks, _BLOCK) @ _WEIGHTS
        rest = words[n_blocks * _BLOCK:]
        return (int(per_block @ _block_weights[:n_blocks]),
                int(rest @ _WEIGHTS[:rest.size]), raw[words.size * 8:].tobytes())


def fingerprint(container):
    """A value that differs once `container` (one of MUTABLE) is changed in place: the
    identities of its items, or a hash of an array's bytes (a universal hash for arrays
    over 80 kB).

    >>> w = [1.0]
    >>> before = fingerprint(w)
    >>> w.append(2.0)
    >>> fingerprint(w) == before
    False
    """
    if isinstance(container, np.ndarray):
        data = np.ascontiguousarray(container)
        if data.dtype.hasobject:
            return container.shape, tuple(map(id, data.ravel()))
        if data.nbytes > _EXACT_HASH_BYTES:
            return container.shape, container.dtype, _universal_hash(data)
        return (container.shape, container.dtype,
                hashlib.blake2b(data.view(np.uint8).ravel()).digest())
    if isinstance(container, dict):
        return tuple(map(id, container.keys())), tuple(map(id, container.values()))
    if isinstance(container, set):
        return frozenset(map(id, container))
    if isinstance(container, bytearray):
        return bytes(container)
    return tuple(map(id, container))


def mutation_watch(f):
    """A function telling, once called, which of the containers `f` can reach directly
    (`shared_containers`) has changed in place since `mutation_watch(f)` (its description),
    or None. (`f` is the user's: the walk skips library code, a doctest's included; tested
    in tests/rules/test_threaded_map.py.)
    """
    watched = [(what, obj, fingerprint(obj)) for what, obj in shared_containers(f)]

    def changed():
        for what, obj, before in watched:
            if fingerprint(obj) != before:
                return what
        return None
    return changed
