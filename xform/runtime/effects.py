"""Random draws and other effects the cache would freeze. Staging runs a function once and
caches what it built; a draw made while staging would be a constant of every later call.

So while a function is staged for the cache (`Watch`, a context manager around staging), the
numpy generators it can reach are found by the one walk of what a function reads
(xform.runtime.reads.Reach, with its bounds): in closure cells, defaults, the globals its code
names, the functions those are, the user's modules it names (their attributes the code
names) and the user's data (object attributes, class attributes, dict and list items). Each RandomState or Generator found is replaced,
where it sits, by a proxy (xform.numpy.random) whose draws stage `random_draw` equations; the
holders get the real generator back when staging ends. The compiled function then draws from
the generator itself on every call, in program order, bit for bit as eager numpy would.

What cannot be staged falls back to staging on every call (so each call draws, from the real
generator, what eager numpy draws): a generator also held where no proxy can go (a tuple, a
frozen object), Python's `random` module, a BitGenerator used directly, numpy's global
generator reached by SciPy's `rvs`, seeding or reading a generator's state while staged,
shuffling a concrete array, a generator made inside the function (`default_rng()`), and code
that reads a clock, a file or the environment (`time.time()`, `open`, `os.environ`). The
walk snapshots the states of every generator it found and compares them after staging.

The walk also tells which stand-ins (xform.numpy.stand_ins) a staging needs: numpy.random's
module functions (`np.random.randn`, which stage their draws) and numpy's constructors
(`np.array` of traced values) are about seventy attributes and code objects set and reset
around each staging. A staging goes without a group of them when the walk followed every
function its code can run (nothing too deep, no object's method, no library's function, no
name looked up at run time: `getattr`, `eval`) and none of that code spells a name through
which the group is reached ("random"; "array", "stack", "polynomial", ...).

Static arguments and keywords (what a transform does not trace: `f(x, np.random.randn)`) are
walked with the function.

Limits: a generator the walk does not reach (deeper than its bounds, behind getattr) is
drawn from while staging; a plain function whose walk met such code is staged again on the
next call taking the same path, and different constants make it staged per call, with a
warning (`walk_incomplete`, `hidden_effects_found`, xform.api.dispatch.verified_pure). `threaded_map` refuses a function that draws
(xform.errors.UnsupportedError): its elements run concurrently.
"""
from __future__ import annotations

import inspect
import sys
import types
import warnings
import weakref
from contextvars import ContextVar

import numpy as np

from xform.errors import UnstagedEffectWarning, UnsupportedError
from xform.numpy.captured import copy_for_staging
from xform.runtime.reads import MAX_OBJECTS, Reach, compared_by_identity, held_functions, holds
from xform.numpy.random import (DRAWS, PROXY_TYPES, BoundDraw, note_unstaged, proxy_for,
                                 reset_unstaged, unproxied, unstaged_effects)
from xform.numpy.stand_ins import groups_unreached, without_group
from xform.rules.random import raw_state, set_raw_state
from xform.source_info import user_frame_info

# Names whose call makes a fresh generator: its draws cannot be seen through a state we hold.
_CONSTRUCTORS = frozenset({"default_rng", "RandomState", "Generator", "SeedSequence",
                           "MT19937", "PCG64", "PCG64DXSM", "Philox", "SFC64"})
# Names through which code reaches numpy's global legacy generator (`np.random.randn`, SciPy's
# `rvs` without a random_state): its state costs ~30 us to read, so only then is it watched.
_GLOBAL_DRAWS = frozenset({"random", "rvs"})
# Modules whose functions read the world (clocks, files, the environment): a function that
# names one is staged on every call.
_EFFECT_MODULES = frozenset({"time", "datetime", "os", "io", "pathlib", "uuid", "secrets"})
_EFFECT_BUILTINS = frozenset({"open", "input"})


_ALL_GENERATOR_TYPES: tuple = ()


def _generator_types():
    global _ALL_GENERATOR_TYPES
    if _ALL_GENERATOR_TYPES:     # both modules imported: the answer cannot change
        return _ALL_GENERATOR_TYPES
    python_random = sys.modules.get("random")
    types_ = (python_random.Random,) if python_random else ()
    random = sys.modules.get("numpy.random")   # not imported: nothing can have drawn from it
    if random is None:
        return types_
    types_ += (random.RandomState, random.Generator, random.BitGenerator)
    if python_random:
        _ALL_GENERATOR_TYPES = types_
    return types_


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


class _Place:
    """Where a generator (or a draw bound to it) sits: a slot that can be set and restored."""

    __slots__ = ("holder", "key", "kind", "original", "method", "stand_in")

    def __init__(self, holder, key, kind, original, method=None):
        self.holder, self.key, self.kind = holder, key, kind
        self.original, self.method, self.stand_in = original, method, None

    def get(self):
        if self.kind == "cell":
            return self.holder.cell_contents
        if self.kind == "attr":
            return getattr(self.holder, self.key)
        if self.kind == "defaults":
            return self.holder.__defaults__[self.key]
        return self.holder[self.key]

    def set(self, value) -> None:
        if self.kind == "cell":
            self.holder.cell_contents = value
        elif self.kind == "attr":
            setattr(self.holder, self.key, value)
        elif self.kind == "defaults":
            defaults = list(self.holder.__defaults__)
            defaults[self.key] = value
            self.holder.__defaults__ = tuple(defaults)
        else:                                   # "item": a dict, a list, a module's globals
            self.holder[self.key] = value

    def swap(self, proxy) -> None:
        self.stand_in = BoundDraw(self.original) if self.method else proxy
        self.set(self.stand_in)

    def restore(self) -> None:
        try:
            now = self.get()
        except (LookupError, AttributeError, ValueError):
            return
        if now is self.stand_in:
            self.set(self.original)
        elif unproxied(now) is not now:
            self.set(unproxied(now))    # the staged code put another generator's stand-in
        # else: the staged code put something else there, which stays


class _Effects(Reach):
    """The walk (xform.runtime.reads.Reach) looking for the generators a function can reach and
    where they sit, and for code that makes fresh generators or reads the world."""

    def __init__(self, root, types_):
        super().__init__(root)
        self.types = types_
        self.generators = {}        # id -> generator
        self.places = []            # _Place of the generators that can be swapped for proxies
        self.fixed = set()          # ids of generators found somewhere no proxy can go
        self.constructs = False     # makes a fresh generator, or reads a clock or a file
        self.global_draws = False

    def _found(self, generator, holder, key, kind, original, method=None) -> None:
        self.generators[id(generator)] = generator
        if kind is None or proxy_for(generator) is None:
            self.fixed.add(id(generator))
        else:
            self.places.append((generator, _Place(holder, key, kind, original, method)))

    def met(self, value, depth, holder, key, kind) -> bool:
        if type(value) is types.FunctionType:     # the common value: one test
            if _reads_the_world(value):
                self.constructs = True
                return True
            return False
        if isinstance(value, PROXY_TYPES) or type(value) is BoundDraw:
            # another staging's stand-in: watch the real generator
            real = unproxied(value)
            real = getattr(real, "__self__", real)
            self.generators[id(real)] = real
            self.fixed.add(id(real))
        elif isinstance(value, self.types):
            self._found(value, holder, key, kind, value)
        elif _reads_the_world(value):
            self.constructs = True
        elif type(value) is types.ModuleType and value.__name__ == "random":
            self.value(getattr(value, "_inst", None), depth)     # random.random()
        elif inspect.isbuiltin(value):                 # a bound draw: `randn = rs.randn`
            owner = getattr(value, "__self__", None)
            if isinstance(owner, self.types):
                name = getattr(value, "__name__", None)
                self._found(owner, holder, key, kind if name in DRAWS else None, value, name)
        else:
            return False
        return True

    def spelled(self, function, names) -> None:
        if not self.constructs and _CONSTRUCTORS.intersection(names):
            self.constructs = True
        if not self.global_draws and _GLOBAL_DRAWS.intersection(names):
            self.global_draws = True
        if not self.constructs and any(name not in function.__globals__
                                       for name in _EFFECT_BUILTINS.intersection(names)):
            self.constructs = True


# id(code object) -> (the code object, the checks of a clean walk of a function with that
# code, the stand-in groups a staging of it does without, whether the walk saw all the code
# it can run, weak references to the functions it followed, whether it met code it did not
# follow, and when the checks compare every read by identity, `[whether a staged copy of
# such a function is the function itself]` (`staged_copy`)): keyed by id, since a code
# object's hash is computed anew on every lookup (bounded: a function redefined in a loop
# makes new code objects)
_clean_walks: dict = {}


def _state(generator):
    """A comparable snapshot of where `generator` is in its stream."""
    if hasattr(generator, "getstate"):                  # Python's random.Random
        return generator.getstate()
    if hasattr(generator, "get_state"):                 # RandomState (of any bit generator)
        return _frozen(generator.get_state(legacy=False))
    bit_generator = getattr(generator, "bit_generator", generator)
    return _frozen(bit_generator.state)


def _frozen(value):
    if isinstance(value, dict):
        return tuple((k, _frozen(v)) for k, v in value.items())
    if hasattr(value, "tobytes"):
        return value.tobytes()
    return value


class Watch:
    """Before staging: find the generators `function` can reach. As a context manager (around
    staging): their holders hold proxies whose draws are staged as `random_draw` equations,
    restored on exit. Afterwards `drew()` says whether staging drew anyway (a generator no
    proxy could stand for moved, a fresh generator, a clock, a seed): then the function must
    be staged on every call. Inside, stagings go without the stand-in groups the function
    cannot reach; `functions` lists the functions the walk followed (besides `function`),
    and `complete` says whether they are every function it can run."""

    __slots__ = ("_loaded", "_generators", "_before", "_constructs", "_raw", "_places",
                 "_swapped", "_unstaged", "_token", "_skip", "complete", "functions",
                 "_incomplete_token", "root_is_function", "unfollowed", "_root",
                 "_copied_as_is")

    def __init__(self, function, arguments=()):
        """`arguments`: what `function` is called with besides traced values (static
        arguments, keywords), walked as what it holds."""
        generator_types = _ALL_GENERATOR_TYPES or _generator_types()
        self._loaded = bool(generator_types)
        self._raw = None
        self._swapped = ()
        self._unstaged = ()
        self._token = None
        self.root_is_function = type(function) is types.FunctionType
        self.unfollowed = False
        self._root = function
        self._copied_as_is = None     # the memo's answer for staged_copy, where it has one
        code = getattr(function, "__code__", None) if self.root_is_function else None
        remembered = _clean_walks.get(id(code)) if code is not None and not arguments else None
        if remembered is not None and remembered[0] is code and holds(remembered[1], function):
            # The same code reading the same objects: the walk would find nothing again.
            self._constructs, self._generators, self._before, self._places = False, (), (), ()
            self._skip = without_group(*remembered[2]) if remembered[2] else None
            self.complete = remembered[3]
            self.functions = [held() for held in remembered[4]] if remembered[4] else ()
            self.unfollowed = remembered[5]
            self._copied_as_is = remembered[6]
            return
        walk = _Effects(function, generator_types)
        # Any callable: a function, a method, a transformed function (its `fun`), a partial
        walk.value(function, 0)
        for argument in arguments:
            walk.value(argument, 0)
        legacy = _legacy_generator() if walk.global_draws else None
        if legacy is not None:
            walk.generators[id(legacy)] = legacy
        self._constructs = walk.constructs
        self._generators = list(walk.generators.values())
        self._before = [_state(g) for g in self._generators]
        # A generator also held where no proxy can go keeps its real draws everywhere: part
        # staged, part drawn while staging would put its draws out of order.
        self._places = [(g, place) for g, place in walk.places if id(g) not in walk.fixed]
        # The functions the walk followed, and whether they are every function the staged code
        # can run (then a recording needs no profile hook: xform.runtime.dependencies)
        self.complete = walk.complete
        self.unfollowed = walk.unfollowed
        self.functions = walk.functions
        # The stand-ins a staging can do without: those of the groups none of whose names the
        # code spells, once the walk has seen all the code can run
        unreached = (groups_unreached(walk.names) if self.complete
                     and not walk.global_draws and not walk.generators else frozenset())
        self._skip = without_group(*unreached) if unreached else None
        if (code is not None and not arguments and walk.clean and not walk.constructs
                and not walk.global_draws
                and not walk.generators and generator_types is _ALL_GENERATOR_TYPES
                and len(walk.seen) <= MAX_OBJECTS):
            if len(_clean_walks) >= 1024:
                _clean_walks.clear()
            # (a walk that followed every function: the copy check reads nothing it did not)
            self._copied_as_is = ([None] if self.complete and compared_by_identity(walk.checks)
                                  else None)
            _clean_walks[id(code)] = (code, tuple(walk.checks), unreached, self.complete,
                                      held_functions(walk.checks), walk.unfollowed,
                                      self._copied_as_is)

    def __enter__(self) -> "Watch":
        self._unstaged, self._token = unstaged_effects()
        self._incomplete_token = _incomplete.set(self)
        if self._skip is not None:
            self._skip.__enter__()
        if self._places:
            self._swap()
        return self

    def _swap(self) -> None:
        proxies = {}
        self._swapped = []
        try:
            for generator, place in self._places:
                proxy = proxies.get(id(generator))
                if proxy is None:
                    proxy = proxies[id(generator)] = proxy_for(generator)
                place.swap(proxy)
                self._swapped.append(place)
        except Exception:   # noqa: BLE001 (a read-only attribute, a frozen object)
            note_unstaged()  # what was swapped stays so: its draws are staged; others watched

    def __exit__(self, *exc_info) -> None:
        if self._swapped:
            for place in reversed(self._swapped):
                place.restore()
            self._swapped = ()
        reset_unstaged(self._token)
        _incomplete.reset(self._incomplete_token)
        if self._skip is not None:
            self._skip.__exit__()

    def keep_states(self) -> "Watch":
        """Also keep the states in the form `rewind` can restore (before staging)."""
        self._raw = [raw_state(g) for g in self._generators]
        return self

    def rewind(self) -> None:
        """Put every watched generator back where it was (needs `keep_states`)."""
        for generator, state in zip(self._generators, self._raw):
            set_raw_state(generator, state)

    def drew(self) -> bool:
        """Whether staging drew (or read the world) in a way no equation stands for."""
        if self._constructs or self._unstaged:
            return True
        if not self._loaded and "numpy.random" in sys.modules:
            return True     # numpy.random first imported while staging: assume a draw
        return bool(self._generators) and any(
            _state(g) != before for g, before in zip(self._generators, self._before))


# The Watch of the staging under way.
_incomplete: ContextVar = ContextVar("xform_watch", default=None)


def staged_copy(fun):
    """`copy_for_staging(fun)` (xform.numpy.captured), remembered for the code of the function
    the staging under way watches: when its walk was remembered (`Watch`) with checks that
    compare every read by identity, the copy check, which reads the same objects again, gives
    the same answer. (Only the answer "no copy" is kept: a copy holds the state of its reads.)
    """
    watch = _incomplete.get()
    if (watch is None or watch._root is not fun or watch._copied_as_is is None
            or type(fun.__globals__) is not dict):    # (a staged copy's own: its globals)
        return copy_for_staging(fun)
    if watch._copied_as_is[0]:
        return fun, None
    staged, undo = copy_for_staging(fun)
    watch._copied_as_is[0] = staged is fun and undo is None
    return staged, undo


def walk_incomplete() -> bool:
    """Whether the Watch of the staging under way could not follow the user's code a plain
    function runs (a function past its depth, getattr or eval) and has seen no draw: a draw
    there is not seen, and the next staging must tell (xform.api.dispatch). (Callable objects,
    bound methods and library functions, which the walk does not follow either, are left to
    the recorder of what staging reads: staging every model object, or every function that
    calls SciPy, twice would double its first call.)"""
    watch = _incomplete.get()
    return (watch is not None and watch.unfollowed and watch.root_is_function
            and not watch.drew())


_told: "weakref.WeakSet" = weakref.WeakSet()    # functions warned about once


def hidden_effects_found(function) -> None:
    """Staged on two calls taking one path, `function` computed different constants: an effect
    no equation stands for (a draw from a generator the walk did not find). Its staging
    counts as drawing from now on (staged anew on every call, as numpy would draw anew), and
    the user is told once."""
    note_unstaged()
    try:
        if function in _told:
            return
        _told.add(function)
    except TypeError:
        pass
    name = getattr(function, "__qualname__", getattr(function, "__name__", repr(function)))
    message = (f"'{name}' computed different constants on two calls taking the same path: it "
               "has an effect xform cannot stage (a random draw from a generator held where "
               "xform could not look: deeper than its walk, in a library's object, through "
               "getattr). It is staged anew on every call, as eager numpy draws anew (right, "
               "at about autograd's cost); pass the generator as an argument (static "
               "under jit: static_argnums), or draw outside the function, to have it "
               "compiled")
    source = user_frame_info()
    if source is None:
        warnings.warn(message, UnstagedEffectWarning, stacklevel=2)
    else:
        warnings.warn_explicit(message, UnstagedEffectWarning, source.filename, source.lineno)


def raise_shared_draws(function, construct: str):
    """The error for a function that draws random numbers where one staging of it serves
    many elements (vmap, threaded_map)."""
    name = getattr(function, "__name__", repr(function))
    raise UnsupportedError(
        f"{construct} of '{name}', which draws random numbers: xform draws while staging, "
        f"once, so every element would get the same draws", user_frame_info(),
        "draw outside and pass the draws in as a mapped argument (one row per element)")


__all__ = ["Watch", "hidden_effects_found", "raise_shared_draws", "staged_copy",
           "walk_incomplete"]
