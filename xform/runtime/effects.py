"""Random draws and other effects the cache would freeze. Staging runs a function once and
caches what it built; a draw made while staging would be a constant of every later call
(silently wrong: every Monte-Carlo estimate the same). So the cache watches the random
generators a function can reach: numpy's global legacy generator (`np.random.randn` and
friends, and SciPy's `rvs`, when the code names them), Python's `random` module, and the
RandomState, Generator, BitGenerator and `random.Random` objects in the function's closure
cells, defaults and the globals its code names, following the functions it names and one
attribute level into objects. It snapshots their states, stages, and compares. A state that
moved means the function drew, and its entries are then rebuilt on every call: each call
draws anew from the same generator, in eager numpy's order, bit for bit (the draws are
numpy's own, made while staging).

A function that creates a generator (`np.random.default_rng()`, `RandomState(...)`) is
treated the same way, since its draws come from a generator no one else holds; so is one that
reads a clock or a file (`time.time()`, `perf_counter`, `datetime.now()`, `open`,
`os.urandom`, `os.environ`): it is staged on every call, so it reads the value of that call.

Limits: a generator or clock reachable only deeper (an attribute of an attribute, a library's
own module state) is not seen. `vmap` stages such a function once per element
(`rewind` puts the generators back after its first, shape-finding staging);
`threaded_map`, whose elements run concurrently, refuses it (xform.errors.UnsupportedError).
"""
from __future__ import annotations

import inspect
import sys
import types

from xform.errors import UnsupportedError
from xform.ir.reads import closure_cells, named_globals, nested_codes
from xform.source_info import user_frame_info

# Names whose call makes a fresh generator: its draws cannot be seen through a state we hold.
_CONSTRUCTORS = frozenset({"default_rng", "RandomState", "Generator", "SeedSequence",
                           "MT19937", "PCG64", "PCG64DXSM", "Philox", "SFC64"})
# Names through which code reaches numpy's global legacy generator (`np.random.randn`, SciPy's
# `rvs` without a random_state): its state costs ~30 us to read, so only then is it watched.
_GLOBAL_DRAWS = frozenset({"random", "rvs"})
_MAX_DEPTH = 4  # functions followed through the globals they name
# Modules whose functions read the world (clocks, files, the environment): a function that
# names one is staged on every call.
_EFFECT_MODULES = frozenset({"time", "datetime", "os", "io", "pathlib", "uuid", "secrets"})
_EFFECT_BUILTINS = frozenset({"open", "input"})


def _generator_types():
    python_random = sys.modules.get("random")
    types_ = (python_random.Random,) if python_random else ()
    random = sys.modules.get("numpy.random")   # not imported: nothing can have drawn from it
    if random is None:
        return types_
    return types_ + (random.RandomState, random.Generator, random.BitGenerator)


def _reads_the_world(value) -> bool:
    if isinstance(value, types.ModuleType):
        return value.__name__.partition(".")[0] in _EFFECT_MODULES
    module = getattr(value, "__module__", None)
    if isinstance(value, type) and module == "datetime":
        return True                 # datetime.now(), date.today()
    return callable(value) and isinstance(module, str) and (
        module.partition(".")[0] in _EFFECT_MODULES or module == "posix")


def _legacy_generator():
    mtrand = sys.modules.get("numpy.random.mtrand")
    return getattr(mtrand, "_rand", None)


class _Walk:
    """The generators and fresh-generator constructor names reachable from a function."""

    def __init__(self, types_):
        self.types = types_
        self.generators = {}        # id -> generator
        self.constructs = False     # makes a fresh generator, or reads a clock or a file
        self.global_draws = False
        self._seen = set()

    def value(self, value, depth: int) -> None:
        if isinstance(value, self.types):
            self.generators[id(value)] = value
        elif _reads_the_world(value):
            self.constructs = True
        elif type(value) is types.ModuleType and value.__name__ == "random":
            self.value(getattr(value, "_inst", None), depth)     # random.random()
        elif inspect.isbuiltin(value):                 # a bound draw: `randn = rs.randn`
            owner = getattr(value, "__self__", None)
            if isinstance(owner, self.types):
                self.generators[id(owner)] = owner
        elif isinstance(value, types.FunctionType) and depth < _MAX_DEPTH:
            self.function(value, depth + 1)
        elif inspect.ismethod(value):
            self.value(value.__self__, depth)
            self.value(value.__func__, depth)
        elif isinstance(value, (types.ModuleType, type)) or depth >= _MAX_DEPTH:
            return
        else:
            attributes = getattr(value, "__dict__", None)
            if isinstance(attributes, dict) and id(value) not in self._seen:
                self._seen.add(id(value))
                for item in list(attributes.values()):
                    if isinstance(item, self.types):
                        self.generators[id(item)] = item
                    elif inspect.ismethod(item) or isinstance(item, types.FunctionType):
                        self.value(item, depth + 1)

    def function(self, function: types.FunctionType, depth: int) -> None:
        if function.__code__ in self._seen:
            return
        self._seen.add(function.__code__)
        for _, _, value in closure_cells(function):
            self.value(value, depth)
        for value in function.__defaults__ or ():
            self.value(value, depth)
        for code in nested_codes(function.__code__):
            names = code.co_names
            if not self.constructs and _CONSTRUCTORS.intersection(names):
                self.constructs = True
            if not self.global_draws and _GLOBAL_DRAWS.intersection(names):
                self.global_draws = True
            if not self.constructs and any(name in _EFFECT_BUILTINS and
                                           name not in function.__globals__ for name in names):
                self.constructs = True
            for _, value in named_globals(code, function.__globals__):
                self.value(value, depth)


def _raw_state(generator):
    """Where `generator` is in its stream, in the form its setter takes back."""
    if hasattr(generator, "get_state"):                 # numpy's RandomState
        return generator.get_state(legacy=False)
    if hasattr(generator, "getstate"):                  # Python's random.Random
        return generator.getstate()
    return getattr(generator, "bit_generator", generator).state


def _set_raw_state(generator, state) -> None:
    if hasattr(generator, "set_state"):
        generator.set_state(state)
    elif hasattr(generator, "setstate"):
        generator.setstate(state)
    else:
        getattr(generator, "bit_generator", generator).state = state


def _state(generator):
    """A comparable snapshot of where `generator` is in its stream."""
    if hasattr(generator, "getstate"):                  # Python's random.Random
        return generator.getstate()
    if hasattr(generator, "get_state"):                 # RandomState
        name, key, pos, has_gauss, gauss = generator.get_state(legacy=True)
        return name, key.tobytes(), pos, has_gauss, gauss
    bit_generator = getattr(generator, "bit_generator", generator)
    return _frozen(bit_generator.state)


def _frozen(value):
    if isinstance(value, dict):
        return tuple((k, _frozen(v)) for k, v in value.items())
    if hasattr(value, "tobytes"):
        return value.tobytes()
    return value


class Watch:
    """Snapshot before staging; `drew()` afterwards says whether the function drew."""

    __slots__ = ("_loaded", "_generators", "_before", "_constructs", "_raw")

    def __init__(self, function):
        generator_types = _generator_types()
        self._loaded = bool(generator_types)
        walk = _Walk(generator_types)
        if isinstance(function, (types.FunctionType, types.MethodType)):
            walk.value(function, 0)
        legacy = _legacy_generator()
        if legacy is not None and walk.global_draws:
            walk.generators[id(legacy)] = legacy
        self._constructs = walk.constructs
        self._generators = list(walk.generators.values())
        self._before = [_state(g) for g in self._generators]
        self._raw = None

    def keep_states(self) -> "Watch":
        """Also keep the states in the form `rewind` can restore (before staging)."""
        self._raw = [_raw_state(g) for g in self._generators]
        return self

    def rewind(self) -> None:
        """Put every watched generator back where it was (needs `keep_states`)."""
        for generator, state in zip(self._generators, self._raw):
            _set_raw_state(generator, state)

    def drew(self) -> bool:
        if self._constructs:
            return True
        if not self._loaded and "numpy.random" in sys.modules:
            return True     # numpy.random first imported while staging: assume a draw
        return any(_state(g) != before for g, before in zip(self._generators, self._before))


def raise_shared_draws(function, construct: str):
    """The error for a function that draws random numbers where one staging of it serves
    many elements (vmap, threaded_map)."""
    name = getattr(function, "__name__", repr(function))
    raise UnsupportedError(
        f"{construct} of '{name}', which draws random numbers: xform draws while staging, "
        f"once, so every element would get the same draws", user_frame_info(),
        "draw outside and pass the draws in as a mapped argument (one row per element)")


__all__ = ["Watch", "raise_shared_draws"]
