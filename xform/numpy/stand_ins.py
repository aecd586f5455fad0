"""Stand-ins: xform functions put in place of numpy and SciPy callables that cannot dispatch
on tracers (`np.array` of a list, `np.full`, `scipy.special.logsumexp`, ...), only while a
function is being staged. Outside staging every callable is the original, untouched.

Two ways to stand in, chosen by what the callable is:
- a Python function (`np.full`, `scipy.linalg.solve_triangular`, `rv_continuous.logpdf`):
  its `__code__` is swapped for a trampoline, so every reference to the function object sees
  the stand-in, however it was imported (`from scipy.special import logsumexp` before
  `import xform` included);
- a builtin (`np.array`, `np.asarray`): the module attribute is replaced, so `np.array(...)`
  sees it (a name imported with `from numpy import array` keeps the original).
Either way the stand-in routes a call to xform only when a Tracer is among its arguments
(looked for inside lists, tuples and dicts); any other call, from any thread, runs the
original with the original arguments, and so does a call made inside the replacement.
`xform.overlay` registers users' replacements of their own functions here too.

A stand-in may belong to a `group` that a staging can do without (numpy.random's ~50 module
functions, numpy's constructors), defined with the names through which code reaches it
(`define_group`): a caller that has shown the staged code cannot reach a group
(xform.runtime.effects, whose walk saw all the code a function can run and the names it
spells: `groups_unreached`) stages inside `without_group(...)`, and the scope then leaves
that group alone: setting and resetting the stand-ins is most of its cost. In a group whose
stand-ins are each reached by their own function's name (numpy's ~45 functions of lists:
`np.sum([a, b])`), code that spells `sum` has the stand-in of `np.sum` only.
"""
from __future__ import annotations

import collections
import contextvars
import functools
import sys
import threading
import types

from xform.ir.tracer import Tracer

_MAX_DEPTH = 8  # how deep into nested lists a tracer is looked for
# what numpy reads as a sequence of elements (a deque: a filter's delay line, a history window)
_DEQUE = collections.deque
SEQUENCES = (list, tuple, _DEQUE)


def contains_tracer(obj, depth: int = 0) -> bool:
    """Whether a Tracer is `obj` or sits inside its lists, tuples, deques or dict values."""
    kind = type(obj)
    if kind is Tracer:
        return True
    if depth < _MAX_DEPTH:
        if kind is list or kind is tuple or kind is _DEQUE:
            return any(contains_tracer(item, depth + 1) for item in obj)
        if kind is dict:
            return any(contains_tracer(item, depth + 1) for item in obj.values())
    return False


def _has_tracer(args, kwargs) -> bool:
    return contains_tracer(args) or contains_tracer(kwargs)


def _routed(original, replacement, when=_has_tracer):
    inside = contextvars.ContextVar("xform_stand_in_inside", default=False)

    def route(args, kwargs):
        # Inside its own replacement, the function is its original (as a method calls super())
        if inside.get() or not when(args, kwargs):
            return original(*args, **kwargs)
        token = inside.set(True)
        try:
            return replacement(*args, **kwargs)
        finally:
            inside.reset(token)
    return route


_ROUTE_PLACEHOLDER = "xform: the route of this stand-in"


def _trampoline_code(code: types.CodeType, route) -> types.CodeType:
    """A code object with `code`'s name and free variables whose body is
    `return route(args, kwargs)`: assignable to the function's `__code__`."""
    trampoline, at = _compiled_trampoline(code.co_freevars)
    # The route is the one constant no source can spell; it replaces the placeholder string.
    consts = list(trampoline.co_consts)
    consts[at] = route
    return trampoline.replace(co_consts=tuple(consts), co_name=code.co_name,
                              co_qualname=code.co_qualname, co_filename=code.co_filename)


@functools.lru_cache(maxsize=None)
def _compiled_trampoline(free: tuple) -> tuple:
    """(the trampoline's code for the free variables `free`, the position of the route's
    placeholder among its constants): compiled once per set of free variables' names, since
    compiling costs ~25 us a stand-in (SciPy's ~80 are set up on a first call)."""
    touch = f"        ({', '.join(free)},)\n" if free else ""
    source = (
        "def outer():\n"
        + "".join(f"    {name} = None\n" for name in free)
        + "    def trampoline(*args, **kwargs):\n"
        + touch
        + f"        route = {_ROUTE_PLACEHOLDER!r}\n"
        + "        return route(args, kwargs)\n"
        + "    return trampoline\n")
    namespace: dict = {}
    exec(compile(source, "<xform stand-in>", "exec"), namespace)  # noqa: S102 - fixed source
    trampoline = namespace["outer"]().__code__
    if trampoline.co_freevars != free:
        raise AssertionError(f"a stand-in's trampoline for free variables {free}: they differ")
    return trampoline, trampoline.co_consts.index(_ROUTE_PLACEHOLDER)


class _CodeSwap:
    def __init__(self, function, replacement, when):
        code = function.__code__
        original = types.FunctionType(code, function.__globals__, function.__name__,
                                      function.__defaults__, function.__closure__)
        original.__kwdefaults__ = function.__kwdefaults__
        self.function, self.code, self.target = function, code, function
        self.name = function.__name__
        self.trampoline = _trampoline_code(code, _routed(original, replacement, when))
        _original_codes[id(self.trampoline)] = (self.trampoline, code_outside_staging(function))

    def apply(self):
        self.function.__code__ = self.trampoline

    def restore(self):
        self.function.__code__ = self.code

    def settings(self):
        """(object, attribute, staged value, original value): staging_scope's flat form."""
        return self.function, "__code__", self.trampoline, self.code


class _AttributeSwap:
    def __init__(self, owner, name, replacement, when):
        self.owner, self.name, self.target = owner, name, (owner, name)
        self.original = getattr(owner, name)
        route = _routed(self.original, replacement, when)

        def stand_in(*args, **kwargs):
            return route(args, kwargs)
        stand_in.__name__ = getattr(self.original, "__name__", name)
        stand_in.__doc__ = getattr(self.original, "__doc__", None)
        # (what xform's protocol looks np.dot up by while the stand-in is np.dot: Tracer.dot)
        stand_in.__wrapped__ = self.original
        self.stand_in = stand_in

    def apply(self):
        setattr(self.owner, self.name, self.stand_in)

    def restore(self):
        setattr(self.owner, self.name, self.original)

    def settings(self):
        return self.owner, self.name, self.stand_in, self.original


_swaps: list = []          # every registered swap, applied while anything is staged
# What staging_scope sets on entry and resets on exit: per plain module, the attributes as
# one mapping for its __dict__ (one update), and (owner, name, value) for each of the rest
# (functions' __code__, classes' attributes), in `_swaps` order; for the swaps of no group,
# and per group.
_NO_SETTINGS = ((), ())
_staged_settings: tuple = _NO_SETTINGS
_original_settings: tuple = _NO_SETTINGS
# A group's settings are filed under its name, those of a group reached by name under
# (group, name) per stand-in (the `key` of its swaps).
_group_settings: dict = {}   # key -> (staged settings, original settings)
_changed_keys: set = set()   # the keys whose stand-ins changed since their settings were made
_group_depth: dict = {}      # key -> stagings in progress that use it, over all threads
_skipped = threading.local() # .groups: the groups this thread's stagings do without now
_NO_GROUPS = frozenset()
_groups_without: dict = {}   # skipped groups -> the groups a staging then uses
_reached_by: dict = {}       # group -> names -> whether code spelling them can reach it
_by_name: set = set()        # the groups whose stand-ins are reached by their own names
_members: dict = {}          # such a group -> the names of its stand-ins
# id(trampoline code) -> (it, the code it stands in for): by id, since a code object's hash is
# computed anew on every lookup (the trampolines are held, so their ids stay theirs)
_original_codes: dict = {}
_pending: dict = {}        # module name -> (installer, group)s waiting for its import
_installed = 0             # installers run so far
_modules_seen = 0          # len(sys.modules) when install_pending last looked
_lock = threading.RLock()  # re-entered: installers call stand_in
_installing = False        # install_pending is running installers (under _lock)
_installers_group = None   # the group of the installer running: its stand-ins' default
_depth = 0                 # stagings in progress, over all threads


def stand_in(function, replacement, when=_has_tracer, group=None) -> None:
    """While staging, calls of `function` (a Python function, or a builtin given as
    `(owner, "name")`) with a Tracer among their arguments run `replacement` instead
    (`when(args, kwargs)` decides instead, for callables taking functions that close over
    traced values). A stand-in of a `group` is left out of stagings inside
    `without_group(group)`.

    >>> from xform.numpy.stand_ins import stand_in, remove_stand_in
    >>> def halve(x): return x / 2
    >>> stand_in(halve, lambda x: x * 0.5 + 1)          # a visible stand-in, for the example
    >>> float(xform.jit(halve)(2.0)), halve(2.0)          # staged: the stand-in; eager: halve
    (2.0, 1.0)
    >>> remove_stand_in(halve)
    """
    if group is None:
        group = _installers_group
    if isinstance(function, tuple):
        swap = _AttributeSwap(*function, replacement, when)
    else:
        swap = _CodeSwap(getattr(function, "_implementation", function), replacement, when)
    swap.group = group
    # The scope sets a group's stand-ins together; those of a group reached by name one by one
    swap.key = (group, swap.name) if group in _by_name else group
    with _lock:
        _swaps.append(swap)
        _changed_keys.add(swap.key)
        if not _installing:
            _update_settings()
        if (_depth if group is None else _group_depth.get(swap.key)):
            swap.apply()


def code_outside_staging(function) -> types.CodeType:
    """`function.__code__` as it is while nothing is staged: what a cache entry staged now
    must compare with later (a stand-in's trampoline is in place only during staging).

    >>> from xform.numpy.stand_ins import code_outside_staging, stand_in, remove_stand_in
    >>> def halve(x): return x / 2
    >>> stand_in(halve, lambda x: x * 0.5)
    >>> code_outside_staging(halve) is halve.__code__    # nothing is staged now
    True
    >>> remove_stand_in(halve)
    """
    code = function.__code__
    swapped = _original_codes.get(id(code))
    return code if swapped is None else swapped[1]


def remove_stand_in(function) -> None:
    """Undo the latest `stand_in(function, ...)`; an earlier one for it is in force again."""
    target = function if isinstance(function, tuple) else getattr(function, "_implementation",
                                                                    function)
    with _lock:
        same = [swap for swap in _swaps if swap.target == target]
        if not same:
            return
        _swaps.remove(same[-1])
        _changed_keys.add(same[-1].key)
        _update_settings()
        group = same[-1].group
        if (_depth if group is None else _group_depth.get(same[-1].key)):
            same[-1].restore()
            if len(same) > 1:
                same[-2].apply()


def stand_in_when_imported(module_name: str, install, group=None) -> None:
    """Run `install()` (which calls `stand_in`) the first time something is staged after
    `module_name` is imported (at `import xform`, when it was imported before): SciPy's
    modules are only paid for by users who import them. The stand-ins it registers without a
    group of their own are of `group`."""
    _pending.setdefault(module_name, []).append((install, group))


def install_pending() -> bool:
    """Run the installers whose module is imported by now; whether any ran. Staging calls it
    on entry; the numpy protocol again before calling something unsupported (a SciPy module
    imported inside the staged function)."""
    global _installed, _modules_seen, _installing, _installers_group
    ran = False
    _modules_seen = len(sys.modules)
    with _lock:
        # The settings are made once for all the stand-ins installed here: each made
        # anew for each cost SciPy's ~90 a quarter of a second (quadratic).
        _installing = True
        try:
            for module_name in [m for m in _pending if m in sys.modules]:
                for install, _installers_group in _pending.pop(module_name):
                    install()
                    _installed += 1
                    ran = True
        finally:
            _installing = False
            _installers_group = None
            if ran:
                _update_settings()
    return ran


def installed_count(install_new=False) -> int:
    """How many installers have run (after running those whose module is imported by now,
    with `install_new`)."""
    if install_new and _pending:
        install_pending()
    return _installed


def _update_settings() -> None:
    """Make the settings of the keys whose stand-ins changed anew (those of the others stay:
    SciPy's installers, on a first call, add to the stand-ins of no group only)."""
    global _staged_settings, _original_settings
    changed = {key: [] for key in _changed_keys}
    _changed_keys.clear()
    for swap in _swaps:
        found = changed.get(swap.key)
        if found is not None:
            found.append(swap.settings())
    for key, settings in changed.items():
        made = None
        if settings:
            made = (_grouped([(owner, name, value) for owner, name, value, _ in settings]),
                    _grouped([(owner, name, value) for owner, name, _, value in settings]))
        if key is None:
            _staged_settings, _original_settings = made or (_NO_SETTINGS, _NO_SETTINGS)
        elif made is None:
            _group_settings.pop(key, None)
        else:
            _group_settings[key] = made
    if any(key is not None for key in changed):
        _groups_without.clear()
        _members.clear()
        for key in _group_settings:
            if type(key) is tuple:
                _members.setdefault(key[0], set()).add(key[1])
        for group, names in _members.items():
            _members[group] = frozenset(names)


def _grouped(assignments):
    """(module dict updates, the other assignments) for (owner, name, value) assignments; a
    later assignment of the same attribute wins, as a later setattr would."""
    updates, others = {}, []
    for owner, name, value in assignments:
        if type(owner) is types.ModuleType:
            updates.setdefault(id(owner), (vars(owner), {}))[1][name] = value
        else:
            others.append((owner, name, value))
    return tuple(updates.values()), tuple(others)


def _set_all(settings) -> None:
    # A staging sets a few to about 70 attributes and resets them: a module's at once, the
    # others one by one (a loop costs less than the C loop `deque(map(setattr, ...))`'s
    # deque, ~0.5 us, up to 25 attributes at least).
    updates, others = settings
    for namespace, values in updates:
        namespace.update(values)
    for owner, name, value in others:
        setattr(owner, name, value)


def define_group(group: str, reached_by=None) -> None:
    """Name a group of stand-ins (before its first `stand_in`): `reached_by(names)` says
    whether code that spells those names (globals and attributes alike, a code object's
    co_names) can call one of them; without it, each stand-in of the group is reached by the
    name of the function it stands in for, and a staging has those its code spells."""
    if reached_by is None:
        _by_name.add(group)
    else:
        _reached_by[group] = reached_by


def groups_unreached(names) -> frozenset:
    """The groups that code spelling only `names` cannot reach (if it runs no other code);
    of a group reached by name that the names reach in part, `(group, the names reached)`:
    the group's other stand-ins are unreached.

    >>> from xform.numpy.stand_ins import groups_unreached
    >>> unreached = groups_unreached({"np", "sum", "sin"})
    >>> ("numpy functions of lists", frozenset({"sum"})) in unreached, "numpy.random" in unreached
    (True, True)
    >>> ["numpy constructors" in groups_unreached(names)
    ...  for names in ({"np", "sum"}, {"np", "array"})]
    [True, False]
    """
    unreached = [group for group, reached_by in _reached_by.items() if not reached_by(names)]
    for group, members in _members.items():
        reached = members.intersection(names)
        if not reached:
            unreached.append(group)
        elif len(reached) < len(members):
            unreached.append((group, reached))
    return frozenset(unreached)


def _keys_used(skipped) -> tuple:
    """The settings keys a staging uses that skips the groups `skipped` (groups_unreached)."""
    only = {entry[0]: entry[1] for entry in skipped if type(entry) is tuple}
    return tuple(key for key in _group_settings
                 if key not in skipped and (type(key) is not tuple or key[0] not in skipped
                                            and key[1] in only.get(key[0], (key[1],))))


class without_group:
    """Stagings this thread starts inside leave the stand-ins of `group` out (see the
    module's docstring); nested, the innermost says.

    >>> from xform.numpy.stand_ins import without_group
    >>> with without_group("numpy.random"):
    ...     float(xform.jit(lambda x: x + 1)(1.0))
    2.0
    """

    __slots__ = ("_groups", "_before")

    def __init__(self, *groups):
        self._groups = frozenset(groups)

    def __enter__(self):
        self._before = getattr(_skipped, "groups", _NO_GROUPS)
        _skipped.groups = self._groups

    def __exit__(self, *exc_info):
        _skipped.groups = self._before


class staging_scope:
    """The scope of staged user code: the stand-ins are in place while any thread stages,
    a group's while any staging that uses it does.
    (A class, not a generator context manager: every staging enters one.)"""

    __slots__ = ("_groups",)

    def __enter__(self):
        global _depth
        if _pending and len(sys.modules) != _modules_seen:   # a module imported since
            install_pending()
        skipped = getattr(_skipped, "groups", _NO_GROUPS)
        with _lock:
            groups = _groups_without.get(skipped)
            if groups is None:
                if len(_groups_without) >= 1024:    # (one per set of list functions' names)
                    _groups_without.clear()
                groups = _groups_without[skipped] = _keys_used(skipped)
            self._groups = groups
            _depth += 1
            if _depth == 1 and _staged_settings is not _NO_SETTINGS:
                _set_all(_staged_settings)
            for group in groups:
                depth = _group_depth[group] = _group_depth.get(group, 0) + 1
                if depth == 1:
                    _set_all(_group_settings[group][0])

    def __exit__(self, *exc_info):
        global _depth
        with _lock:
            if self._groups:
                for group in reversed(self._groups):
                    depth = _group_depth[group] = _group_depth[group] - 1
                    if depth == 0 and group in _group_settings:
                        _set_all(_group_settings[group][1])
            _depth -= 1
            if _depth == 0 and _original_settings is not _NO_SETTINGS:
                _set_all(_original_settings)
