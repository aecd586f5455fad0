"""Arrays a staged function captures, read while it is staged: `table[idx]` with a traced
`idx` stages a gather of the constant `table`, so that a later call with other indices runs
the same code.

numpy's own `ndarray.__getitem__` would ask the traced index for its values, which would have
to be guarded (a path per index pattern). Staging instead runs a copy of the user's function
(`copy_for_staging`) that reads its captured arrays as `CapturedArray` views: those of the
globals its code names, its closure cells and defaults, and the array attributes of the
user's objects it reaches there or through `self`; the user's functions it reaches through
its globals are copied alike. A view is the array's memory (writes reach the captured array,
as in eager numpy, and the cache's checks of captured arrays see them), differing from the
array only in indexing by traced values and in refusing writes while staging. A function
that captures no array, directly or through the user's functions it reaches, is staged as
it is: its copy would read what it reads.
"""
from __future__ import annotations

import builtins
import dis
import functools
import os
import types

import numpy as np

from xform.errors import captured_write_error
from xform.ir.builder import current_builder
from xform.ir.concrete import concretization
from xform.ir.execute import unwatched
from xform.ir.bytecode import instruction_argument, nested_codes, per_code
from xform.ir.tracer import Tracer
from xform.numpy.stand_ins import contains_tracer
from xform.source_info import is_users_class, is_users_code, user_frame_info


class CapturedArray(np.ndarray):
    """A view of an array the staged function captures, or one numpy computed from such views
    while staging (`0.5 * np.sin(GRID)`; a constant too): indexed by traced values, a staged
    gather of the array as a graph constant; otherwise numpy's array."""

    def __getitem__(self, index):
        if contains_tracer(index):
            builder = current_builder()
            if builder is not None:
                return Tracer(builder, builder.atom(self.staged_constant))[index]
        return super().__getitem__(index)

    # numpy's methods that read at traced positions, as indexing does (np.take, np.searchsorted
    # of them dispatch to xform by themselves)
    def take(self, indices, axis=None, out=None, mode="raise"):
        builder = current_builder()
        if out is None and builder is not None and contains_tracer(indices):
            return Tracer(builder, builder.atom(self.staged_constant)).take(indices, axis,
                                                                             mode=mode)
        return super().take(indices, axis, out, mode)

    def searchsorted(self, v, side="left", sorter=None):
        builder = current_builder()
        if builder is not None and contains_tracer(v):
            return np.searchsorted(self.staged_constant, v, side, sorter)
        return super().searchsorted(v, side, sorter)

    def __setitem__(self, index, value):
        if current_builder() is None:
            return super().__setitem__(index, value)
        if _depends_on_inputs(index) or _depends_on_inputs(value):
            raise concretization("array")    # numpy's own write: the error it would raise
        root = _captured_root(self)
        if root is not None:
            raise captured_write_error(root.captured, root.name, user_frame_info())
        super().__setitem__(index, value)

    def __array_wrap__(self, array, context=None, return_scalar=False):
        if return_scalar:   # a reduction's 0-d result: numpy's scalar, as of the array itself
            return array.view(np.ndarray)[()]
        return super().__array_wrap__(array, context, return_scalar)

    @property
    def staged_constant(self) -> np.ndarray:
        """The plain array a graph holds for this one (xform.ir.builder's `atom`)."""
        plain = self.__dict__.get("plain")
        if plain is None:
            plain = self.__dict__["plain"] = self.view(np.ndarray)
        return plain

    def __repr__(self):
        return repr(self.view(np.ndarray))

    def __str__(self):
        return str(self.view(np.ndarray))


def original_array(value):
    """The captured array `value` is a view of (while staging, a captured object's attribute
    is one), else `value`: what a record of what staging read must hold."""
    if type(value) is CapturedArray:
        return value.__dict__.get("captured", value)
    return value


def _depends_on_inputs(obj) -> bool:
    """Whether `obj` is, or holds in its tuples and lists, a traced value that is not a
    constant of the staging."""
    if type(obj) is Tracer:
        return obj.builder.constant_value(obj) is None
    if type(obj) is tuple or type(obj) is list:
        return any(map(_depends_on_inputs, obj))
    return False


def _captured_view(array: np.ndarray, name) -> CapturedArray:
    """A view of the captured `array`, read through `name` (None: unnamed), for errors."""
    view = array.view(CapturedArray)
    view.plain = view.captured = array
    view.name = name
    return view


def _captured_root(view: CapturedArray):
    """The view `_captured_view` made whose memory `view` is (itself, or one it is a view of:
    numpy's `base` of a view of a view stops at the first of another type), or None."""
    while type(view) is CapturedArray:
        if "captured" in view.__dict__:
            return view
        view = view.base
    return None


def _is_captured_array(value) -> bool:
    return type(value) is np.ndarray and value.ndim > 0 and value.dtype.kind in "biufc"


def _is_users_function(value) -> bool:
    return type(value) is types.FunctionType and is_users_code(value.__code__.co_filename)


class _Reads:
    """What the copies one staging runs share: the views, copies and namespaces made (one
    per captured object), and the attributes of the user's objects set to views, which
    `finish` sets back when the staged call ends."""

    __slots__ = ("_made", "_swapped")

    def __init__(self):
        self._made = {}      # id(object read) -> (it, what the staging reads instead)
        self._swapped = []   # (an object's __dict__, name, the view set, the array)

    def read(self, value, name=None):
        """What the staged copies read for `value` (read through `name`): a view of an
        array, a copy of a user's function; a user's object, whose array attributes are views
        while the call runs."""
        if _read_as_it_is(value):
            return value
        made = self._made.get(id(value))
        if made is None or made[0] is not value:
            made = self._made[id(value)] = (value, self._replacement(value, name))
        return made[1]

    def _replacement(self, value, name):
        if type(value) is np.ndarray:
            return _captured_view(value, name)
        if type(value) is types.FunctionType:
            return self.copy(value)
        attributes = getattr(value, "__dict__", None)
        if type(attributes) is dict:
            # (an object may be read while staging in another thread, so a view must do all
            # the array does: it does, but for indexing by traced values)
            for attribute, item in list(attributes.items()):
                if _is_captured_array(item):
                    attributes[attribute] = view = _captured_view(item, attribute)
                    self._swapped.append((attributes, attribute, view, item))
        return value

    def finish(self) -> None:
        """Set the objects' attributes back, and forget what was made: a copy and the
        namespace it reads refer to each other, and would keep the user's functions alive
        until the next garbage collection (a copy that outlives the call reads anew)."""
        for attributes, attribute, view, array in reversed(self._swapped):
            if attributes.get(attribute) is view:   # (unless the staged code assigned it)
                attributes[attribute] = array
        self._swapped.clear()
        for _, made in self._made.values():
            if type(made) is CapturedGlobals:
                dict.clear(made)
        self._made.clear()

    def namespace(self, module: dict):
        """The globals a copy of a function of `module` reads."""
        made = self._made.get(id(module))
        if made is None:
            made = self._made[id(module)] = (module, CapturedGlobals(module, self))
        return made[1]

    def copy(self, fun):
        """`fun` over its module's CapturedGlobals (its module's own globals where it
        assigns them or reads them otherwise than by name: `_code_facts`), with its captured
        arrays as views and its captured objects' array attributes too."""
        code = fun.__code__
        own_globals, assigned_cells = _code_facts(code)
        namespace = fun.__globals__
        if not own_globals and type(namespace) is not CapturedGlobals:
            namespace = self.namespace(namespace)
        closure = fun.__closure__
        if closure is not None:
            # (a cell the function assigns stays shared: the assignment must reach it)
            closure = tuple(
                cell if name in assigned_cells else self._cell(cell, name)
                for name, cell in zip(code.co_freevars, closure))
        defaults = fun.__defaults__
        if defaults is not None:
            parameters = code.co_varnames[code.co_argcount - len(defaults):code.co_argcount]
            defaults = tuple(map(self.read, defaults, parameters))
        kwdefaults = fun.__kwdefaults__
        if kwdefaults is not None:
            kwdefaults = {name: self.read(value, name) for name, value in kwdefaults.items()}
        copy = types.FunctionType(code, namespace, fun.__name__, defaults, closure)
        copy.__kwdefaults__ = kwdefaults
        copy.__dict__ = fun.__dict__
        copy.__module__, copy.__qualname__, copy.__doc__ = (fun.__module__, fun.__qualname__,
                                                            fun.__doc__)
        return copy

    def _cell(self, cell, name):
        value = _cell_contents(cell)
        read = self.read(value, name)
        return cell if read is value else types.CellType(read)


class CapturedGlobals(dict):
    """A module's globals as the staged copy of a function reads them: each name the module
    (or the builtins) binds, read once through `_Reads.read` (arrays as views, functions as
    copies) and kept, so that later reads cost what a dict's do. Only reads go through it (a
    function that assigns globals keeps the module's dict); `get`, `in` and iteration answer
    for the module's dict, as the cache's walks of the function (xform.runtime.reads) expect.

    Notes: a global the staged call itself rebinds after reading it keeps the value read
    (staging runs the function once: its assignments to globals, as all its side effects
    but random draws, are not repeated by the cached calls anyway)."""

    __slots__ = ("module", "_reads")

    def __init__(self, module: dict, reads: _Reads):
        super().__init__()
        self.module = module
        self._reads = reads

    @unwatched
    def __missing__(self, name):
        module = self.module
        if name in module:
            value = self._reads.read(module[name], name)
        else:
            space = module.get("__builtins__", builtins)
            space = space if type(space) is dict else vars(space)
            value = space[name]     # KeyError: LOAD_GLOBAL raises the NameError
        dict.__setitem__(self, name, value)
        return value

    def get(self, name, default=None):
        return self.module.get(name, default)

    def __contains__(self, name):
        return name in self.module

    def __iter__(self):
        return iter(self.module)

    def __len__(self):
        return len(self.module)

    def keys(self):
        return self.module.keys()

    def values(self):
        return self.module.values()

    def items(self):
        return self.module.items()


# Code that writes globals, or reads them other than by LOAD_GLOBAL (a class body's LOAD_NAME,
# eval, exec, globals()), which would not see the module's names in a CapturedGlobals.
_OWN_GLOBALS = (dis.opmap["STORE_GLOBAL"], dis.opmap["DELETE_GLOBAL"], dis.opmap["LOAD_NAME"])
_OWN_GLOBALS_NAMES = frozenset({"eval", "exec", "globals", "vars", "locals"})
_STORES_CELL = (dis.opmap["STORE_DEREF"], dis.opmap["DELETE_DEREF"])


@per_code
def _code_facts(code: types.CodeType):
    """(whether `code` or a function defined in it needs its module's own globals, the cell
    names they assign), read from the bytecode's opcodes (every other byte)."""
    own_globals, assigned_cells = False, set()
    for nested in nested_codes(code):
        units = nested.co_code
        opcodes = units[::2]
        own_globals = (own_globals or any(op in opcodes for op in _OWN_GLOBALS)
                       or not _OWN_GLOBALS_NAMES.isdisjoint(nested.co_names)
                       and _OWN_GLOBALS_NAMES.intersection(_globals_loaded(nested, units)))
        if any(op in opcodes for op in _STORES_CELL):
            assigned_cells.update(_cell_name(nested, units, unit)
                                  for unit, op in enumerate(opcodes) if op in _STORES_CELL)
    return own_globals, frozenset(assigned_cells)


_LOAD_GLOBAL = dis.opmap["LOAD_GLOBAL"]


def _globals_loaded(code, units):
    """The names `code` loads as globals (not `model.eval`'s attribute)."""
    return {code.co_names[instruction_argument(units, unit) >> 1]
            for unit in range(len(units) // 2) if units[2 * unit] == _LOAD_GLOBAL}


def _cell_name(code, units, unit) -> str:
    argument = instruction_argument(units, unit)
    name_of = getattr(code, "_varname_from_oparg", None)    # CPython 3.11 and later
    if name_of is not None:
        return name_of(argument)
    return next(i.argval for i in dis.get_instructions(code) if i.offset == 2 * unit)


@per_code
def _global_reads(code: types.CodeType):
    """(whether `code` or a function defined in it needs its module's own globals, the names
    they load as globals)."""
    names = set()
    for nested in nested_codes(code):
        names |= _globals_loaded(nested, nested.co_code)
    return _code_facts(code)[0], tuple(names)


_UNBOUND = object()
_MAX_FUNCTIONS_LOOKED_AT = 64   # more: copied, however little they capture


def _copy_reads_the_same(fun, looked_at: set) -> bool:
    """Whether a staged copy of the user's function `fun` would read what `fun` reads: no
    captured array (nor user's object, user's function copied for one) among the globals
    it loads, its closure cells, defaults and keyword defaults, and no global it would read
    from its module's own dict or that is unbound now (bound while staging, it might be an
    array). Then staging runs `fun` itself: the copy would cost a small gradient's first
    call about a twentieth of its time for nothing."""
    own_globals, names = _global_reads(fun.__code__)
    namespace = fun.__globals__
    if own_globals or type(namespace) is not dict:
        return False
    for name in names:
        value = namespace.get(name, _UNBOUND)
        if type(value) is types.ModuleType:     # (the most common value: no call)
            continue
        if value is _UNBOUND:
            if name not in _builtin_names(namespace):
                return False
        elif not _reads_the_same(value, looked_at):
            return False
    closure = fun.__closure__
    if closure is not None:
        for cell in closure:
            if not _reads_the_same(_cell_contents(cell), looked_at):
                return False
    for value in fun.__defaults__ or ():
        if not _reads_the_same(value, looked_at):
            return False
    keyword_defaults = fun.__kwdefaults__
    if keyword_defaults:
        for value in keyword_defaults.values():
            if not _reads_the_same(value, looked_at):
                return False
    return True


def _builtin_names(namespace: dict) -> dict:
    names = namespace.get("__builtins__", builtins)
    return names if type(names) is dict else vars(names)


def _read_as_it_is(value) -> bool:
    """Whether the staged copies read `value` itself (`_Reads.read`): what is not a captured
    array, a user's function or a user's object."""
    kind = type(value)
    if kind is types.ModuleType:    # (the most common value first)
        return True
    if kind is np.ndarray:
        return not _is_captured_array(value)
    if kind is types.FunctionType:
        return not is_users_code(value.__code__.co_filename)
    return not is_users_class(kind)


def _reads_the_same(value, looked_at: set) -> bool:
    """Whether a copy reading `value` reads what the function reads: `value` is read as it
    is, or is a user's function whose copy reads the same (`_copy_reads_the_same`)."""
    if _read_as_it_is(value):
        return True
    if type(value) is not types.FunctionType:
        return False
    if id(value) in looked_at:
        return True
    if len(looked_at) >= _MAX_FUNCTIONS_LOOKED_AT:
        return False
    looked_at.add(id(value))
    return _copy_reads_the_same(value, looked_at)


def copy_for_staging(fun):
    """(what staging runs for `fun`, the function that undoes what reading it set up, or
    None): a copy of the user's function that reads its captured arrays as CapturedArray
    views (`_Reads`), or `fun` itself when it is not the user's or reads no captured array
    (`_copy_reads_the_same`)."""
    if (type(fun) is types.FunctionType and is_users_code(fun.__code__.co_filename)
            and _copy_reads_the_same(fun, {id(fun)})):
        return fun, None
    reads = _Reads()
    staged = _staged(fun, reads)
    return (fun, None) if staged is fun else (staged, reads.finish)


_XFORM_FILES = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_WRAPPER_DEPTH = 4   # how many of xform's own wrappers are looked through


def _staged(fun, reads: _Reads, depth: int = 0):
    if type(fun) is types.MethodType:
        function = _staged(fun.__func__, reads, depth)
        if function is fun.__func__:
            return fun
        reads.read(fun.__self__)
        return types.MethodType(function, fun.__self__)
    if type(fun) is functools.partial:
        function = _staged(fun.func, reads, depth)
        return fun if function is fun.func else functools.partial(function, *fun.args,
                                                                  **fun.keywords)
    if type(fun) is types.FunctionType:
        if is_users_code(fun.__code__.co_filename):
            return reads.read(fun)
        if (fun.__closure__ and depth < _WRAPPER_DEPTH
                and fun.__code__.co_filename.startswith(_XFORM_FILES)):
            return _through_wrapper(fun, reads, depth + 1)
        return fun
    call = getattr(type(fun), "__call__", None)
    if not _is_users_function(call):
        return fun
    reads.read(fun)     # an instance of the user's callable class
    return types.MethodType(reads.read(call), fun)


def _through_wrapper(wrapper, reads: _Reads, depth: int):
    """xform's own `wrapper` (a transform's closure over the user's function: jacfwd's,
    make_graph's static arguments) over the staged copies of the functions it closes over."""
    cells = wrapper.__closure__
    staged = [_staged(_cell_contents(cell), reads, depth) for cell in cells]
    if all(new is _cell_contents(cell) for new, cell in zip(staged, cells)):
        return wrapper
    closure = tuple(cell if new is _cell_contents(cell) else types.CellType(new)
                    for new, cell in zip(staged, cells))
    copy = types.FunctionType(wrapper.__code__, wrapper.__globals__, wrapper.__name__,
                              wrapper.__defaults__, closure)
    copy.__kwdefaults__ = wrapper.__kwdefaults__
    return copy


def _cell_contents(cell):
    try:
        return cell.cell_contents
    except ValueError:  # a name of the enclosing scope not assigned yet
        return None
