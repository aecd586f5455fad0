"""Tracer: a stand-in for an array while a function is staged.

It speaks numpy's protocols (`__array_ufunc__`, `__array_function__`, operators, methods), so
plain `import numpy as np` code stages. What each numpy callable stages is looked up through
the hooks xform.numpy installs (`install_numpy_protocol`).
"""
from __future__ import annotations

import abc
import sys

import numpy as np

from xform.ir.avals import SCALAR_AVALS
from xform.ir.execute import unwatched
from xform.errors import TypeCheckError, unsupported_error
from xform.ir.concrete import calls_method, concretization
from xform.source_info import is_users_code, user_frame_info

# The numpy protocol (the tables mapping numpy callables to xform functions) sits above the
# rule families, in xform.numpy, which installs these two hooks when it is imported.

def _no_ufunc(ufunc, method, inputs, kwargs):
    raise unsupported_error(f"numpy.{ufunc.__name__}")


def _no_function(numpy_function):
    raise unsupported_error(getattr(numpy_function, "__name__", repr(numpy_function)))


_ABC_INSTANCECHECK = abc.ABCMeta.__instancecheck__.__code__
_array_ufunc = _no_ufunc  # (ufunc, method, inputs, kwargs) -> the staged result
_fn = _no_function        # numpy function, "getitem", "setitem", ... -> the xform function
_ufunc_ops: dict = {}     # ufunc -> the op staging its plain call (read before _array_ufunc)
_functions: dict = {}     # numpy function, "getitem", ... -> the xform function (read before _fn)


def install_numpy_protocol(array_ufunc, function_for, ufunc_ops=None, functions=None) -> None:
    """Hook: `array_ufunc(ufunc, method, inputs, kwargs)` serves `__array_ufunc__`, and
    `function_for(f)` returns the xform function standing for numpy function `f` (or raises
    UnsupportedError); xform.numpy installs them at import. `ufunc_ops`, a live table of the
    ops taking a ufunc's positional inputs, serves its plain calls without `array_ufunc`;
    `functions`, a live table of what `function_for` finds, serves the numpy functions and
    indexing without its call (`function_for` answers what the table does not hold)."""
    global _array_ufunc, _fn, _ufunc_ops, _functions
    _array_ufunc, _fn = array_ufunc, function_for
    _ufunc_ops = {} if ufunc_ops is None else ufunc_ops
    _functions = {} if functions is None else functions


def _entered(builder, caller, function, *args):
    """`function(*args)`, an entry from numpy's C code into staging, which names its caller
    to the builder: that frame is where the search for the user's line of the equations
    staged inside starts."""
    outer, builder.entry_caller = builder.entry_caller, caller
    try:
        return function(*args)
    finally:
        builder.entry_caller = outer


def _dispatch(what, args, kwargs):
    """The xform function standing for `what` (a numpy function, "getitem", ...) on `args`."""
    return _fn(what)(*args, **kwargs)


def _operate(tracer, ufunc, *inputs):
    """`ufunc(*inputs)` for an operator of `tracer`: what numpy's dispatch to
    `tracer.__array_ufunc__` would stage, without that dispatch (operators stage most
    equations), when the tracer is the override numpy asks first: the leftmost input, or
    after a scalar (a reflected operator). Otherwise numpy's route (another library's array
    on the left may override the ufunc first), and with a profile function installed (its
    entry pauses a watcher's hook)."""
    first = type(inputs[0])
    if sys.getprofile() is not None or first is not Tracer and first not in SCALAR_AVALS:
        return ufunc(*inputs)
    builder = tracer.builder
    outer, builder.entry_caller = builder.entry_caller, sys._getframe(1)
    try:
        op = _ufunc_ops.get(ufunc)
        if op is not None:
            return op(*inputs)
        return _array_ufunc(ufunc, "__call__", inputs, {})
    finally:
        builder.entry_caller = outer


_entered_unwatched = unwatched(_entered)
_dispatch_unwatched = unwatched(_dispatch)




class Tracer:
    """A traced array: `x.aval` is its ShapedArray; numpy calls on it emit equations.

    Writes (`x[i] = v`, `x += v`, `out=x`) rebind `graph_var` to the updated value; a view
    (`x[1:3]`, `x.T`, ...) remembers its base in `_base` and a base its live views in
    `_views` (both unset until a view is made), so that writes are seen as numpy's shared
    memory would show them (xform.numpy.views).
    """

    __slots__ = ("builder", "graph_var", "_base", "_views", "__weakref__")
    __array_priority__ = 1000

    def __init__(self, builder, var):
        self.builder = builder
        self.graph_var = var

    # -- abstract properties -------------------------------------------------------------
    @property
    def aval(self):
        return self.graph_var.aval

    @property
    def shape(self):
        return self.graph_var.aval.shape

    @property
    def dtype(self):
        return self.graph_var.aval.dtype

    @property
    def ndim(self):
        return len(self.graph_var.aval.shape)

    @property
    def size(self):
        return self.graph_var.aval.size

    def __len__(self):
        if not self.shape:
            raise TypeCheckError("len() of a 0-d traced value", user_frame_info(),
                                 "a scalar has no length: use np.size(x) or np.shape(x), "
                                 "which are concrete (and take a Python float too)")
        if len(self.shape) > 1 and calls_method(sys._getframe(1), "shuffle"):
            # numpy's shuffle of what is not numpy's array swaps rows as views: rows repeat
            raise unsupported_error(
                "shuffle of a traced array of 2 or more dimensions by a generator made in the "
                "function (numpy's own shuffle, which would repeat rows)",
                "x = x[rng.permutation(len(x))] draws the same numbers and stages; or make the "
                "generator outside the function, where xform stages its draws")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeCheckError("iteration over a 0-d traced value", user_frame_info(),
                                 "a scalar has no elements: iterate over np.atleast_1d(x), "
                                 "or use the value itself")
        return (self[i] for i in range(self.shape[0]))

    def __repr__(self):
        # with this call's value where the staging has it, as autograd's boxes show theirs
        value = self.builder.known_value(self)
        if value is None:
            return f"Tracer<{self.aval.str_short()}>"
        return self._noted(f"{np.asarray(value)}", f"Tracer<{self.aval.str_short()}: {{}}>")

    # `print(loss)` and `f"{loss:.3f}"` while staging with values show this call's value, as
    # eager numpy prints it
    def __str__(self):
        value = self._shown()
        return repr(self) if value is None else self._noted(str(value))

    def __format__(self, spec):
        value = self._shown()
        if value is None:
            if not spec:
                return repr(self)
            raise concretization("format")
        if spec and np.ndim(value):
            raise TypeCheckError(f"format spec {spec!r} of a traced array of shape "
                                 f"{self.shape}", user_frame_info(),
                                 "numpy formats only 0-d arrays with a spec: index it first")
        return self._noted(format(value, spec))

    def _noted(self, text, template="{}"):
        """`template` holding `text`, the text of this call's value; noted where the value
        depends on the inputs, for a string among the results holding it to be guarded
        (xform.ir.builder.stage_function)."""
        builder = self.builder
        if self.graph_var in builder.dependent and builder.is_live():
            builder.shown_texts.append((self, text, user_frame_info()))
        return template.format(text)

    def _shown(self):
        """This call's value as text shows it (None without values). A 0-d integer or truth
        value is answered and guarded, as int() is: its text may pick something
        (`params[f"w{i}"]`), which the cached path must not freeze; a float's text is for
        reading, shown unguarded (a guard would stage a path per value of a logged loss)."""
        value = self.builder.known_value(self)
        if value is None or self.shape or self.dtype.kind not in "biu":
            return value
        return self.builder.decide(self, "bool" if self.dtype.kind == "b" else "int")

    def __hash__(self):
        # `groups[v > 0]`, `counts[label]` in your code: a 0-d bool or integer hashes as eager
        # numpy's scalar does, by its value (answered and guarded); a float by identity (a
        # cache keyed by it, an lru_cache's, would hand back a value without its derivative),
        # and so does an array, and any value in xform's and libraries' code
        if (self.aval.shape or self.aval.dtype.kind not in "biu"
                or not is_users_code(sys._getframe(1).f_code.co_filename)):
            return object.__hash__(self)
        return self.builder.decide(self, "hash")

    # `isinstance(x, np.ndarray)` in your code answers as for the value eager numpy would
    # hold (an ndarray; numpy's scalar type where 0-d, as np.sum returns), so your code takes
    # eager numpy's branch. xform's and the libraries' code see the Tracer.
    @property
    def __class__(self):
        caller = sys._getframe(1)
        if caller.f_code is _ABC_INSTANCECHECK:     # isinstance(x, numbers.Real): abc's frame
            caller = caller.f_back
        if is_users_code(caller.f_code.co_filename):
            return np.ndarray if self.shape else self.dtype.type
        return Tracer

    # -- numpy protocols --------------------------------------------------------------
    # The entries from numpy's C code name their caller to their builder, as `_entered` does,
    # inline (most staged equations come through them: each frame less counts). With a
    # profile function installed they go through `_entered_unwatched`, which pauses the
    # watcher's hook.
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if sys.getprofile() is not None:
            return _entered_unwatched(self.builder, sys._getframe(1), _array_ufunc, ufunc,
                                      method, inputs, kwargs)
        builder = self.builder
        outer, builder.entry_caller = builder.entry_caller, sys._getframe(1)
        try:
            if method == "__call__" and not kwargs:
                op = _ufunc_ops.get(ufunc)
                if op is not None:
                    return op(*inputs)
            return _array_ufunc(ufunc, method, inputs, kwargs)
        finally:
            builder.entry_caller = outer

    def __array_function__(self, func, types, args, kwargs):
        if sys.getprofile() is not None:
            return _entered_unwatched(self.builder, sys._getframe(1), _dispatch, func, args,
                                      kwargs)
        builder = self.builder
        outer, builder.entry_caller = builder.entry_caller, sys._getframe(1)
        try:
            function = _functions.get(func)
            if function is None:
                function = _fn(func)
            return function(*args, **kwargs)
        finally:
            builder.entry_caller = outer

    def __array__(self, dtype=None, copy=None):
        # a constant's value (np.zeros made while staging, read by a library); a value that
        # depends on the inputs would be frozen into numpy's array
        value = self.builder.constant_value(self)
        if value is None:
            raise concretization("array")
        return np.array(value, dtype=dtype)

    # -- questions Python asks: answered from the staging's values and guarded, or the
    # error that names the construct and its fix (xform.ir.values, xform.ir.concrete) ------
    def __bool__(self):
        return self.builder.decide(self, "bool")

    def __float__(self):
        return self.builder.decide(self, "float")

    def __int__(self):
        return self.builder.decide(self, "int")

    def __complex__(self):
        return self.builder.decide(self, "complex")

    def __index__(self):
        return self.builder.decide(self, "index")

    def item(self, *index):
        element = self[index] if index else self
        if element.size != 1:
            raise TypeCheckError("item() of a traced array of more than one element",
                                 user_frame_info(), "index it first: x[i].item()")
        kind = {"b": "bool", "i": "int", "u": "int", "c": "complex"}.get(self.dtype.kind,
                                                                       "float")
        return self.builder.decide(element.reshape(()), kind)

    def tolist(self):
        """numpy's nested lists, of traced elements where the value depends on the inputs
        (so `for v in x.tolist()` keeps their derivatives, and no value is guarded)."""
        value = self.builder.constant_value(self)
        if value is not None:
            return value.tolist()
        return [element.tolist() for element in self] if self.shape else self

    # copy.copy and copy.deepcopy of an array give a new array, as numpy's do
    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def as_integer_ratio(self):
        # Python's statistics module sums exact fractions of its data: name the line that
        # called it, not the standard library's
        caller = sys._getframe(1)
        while caller is not None and not is_users_code(caller.f_code.co_filename):
            caller = caller.f_back
        raise TypeCheckError("exact fractions of a traced value (Python's statistics module "
                             "computes with them)", user_frame_info(caller),
                             "use numpy's statistics of an array: np.mean(np.array(values)), "
                             "np.median, np.std, np.var")

    # -- writes: staged as functional updates, with numpy's view semantics --------------
    def __setitem__(self, index, value):
        if sys.getprofile() is not None:
            _dispatch_unwatched("setitem", (self, index, value), {})
        else:
            _fn("setitem")(self, index, value)

    # An in-place operator writes into the array, as numpy's does (a 0-d result of numpy
    # arithmetic is an immutable scalar: there `x += 1` rebinds the name, as in numpy).
    def __iadd__(self, other): return _fn("inplace")(self, np.add, other)
    def __isub__(self, other): return _fn("inplace")(self, np.subtract, other)
    def __imul__(self, other): return _fn("inplace")(self, np.multiply, other)
    def __itruediv__(self, other): return _fn("inplace")(self, np.true_divide, other)
    def __ifloordiv__(self, other): return _fn("inplace")(self, np.floor_divide, other)
    def __imod__(self, other): return _fn("inplace")(self, np.remainder, other)
    def __ipow__(self, other): return _fn("inplace")(self, np.power, other)
    def __imatmul__(self, other): return _fn("inplace")(self, np.matmul, other)
    def __iand__(self, other): return _fn("inplace")(self, np.bitwise_and, other)
    def __ior__(self, other): return _fn("inplace")(self, np.bitwise_or, other)
    def __ixor__(self, other): return _fn("inplace")(self, np.bitwise_xor, other)
    def __ilshift__(self, other): return _fn("inplace")(self, np.left_shift, other)
    def __irshift__(self, other): return _fn("inplace")(self, np.right_shift, other)

    def fill(self, value):
        _fn("assign")(self, value)

    # -- operators: what numpy's ufunc would do with a tracer, without its dispatch ----------
    def __add__(self, other): return _operate(self, np.add, self, other)
    def __radd__(self, other): return _operate(self, np.add, other, self)
    def __sub__(self, other): return _operate(self, np.subtract, self, other)
    def __rsub__(self, other): return _operate(self, np.subtract, other, self)
    def __mul__(self, other): return _operate(self, np.multiply, self, other)
    def __rmul__(self, other): return _operate(self, np.multiply, other, self)
    def __truediv__(self, other): return _operate(self, np.true_divide, self, other)
    def __rtruediv__(self, other): return _operate(self, np.true_divide, other, self)
    def __floordiv__(self, other): return _operate(self, np.floor_divide, self, other)
    def __rfloordiv__(self, other): return _operate(self, np.floor_divide, other, self)
    def __mod__(self, other): return _operate(self, np.remainder, self, other)
    def __divmod__(self, other): return _operate(self, np.divmod, self, other)
    def __rdivmod__(self, other): return _operate(self, np.divmod, other, self)
    def __rmod__(self, other): return _operate(self, np.remainder, other, self)
    def __pow__(self, other): return _operate(self, np.power, self, other)
    def __rpow__(self, other): return _operate(self, np.power, other, self)
    def __matmul__(self, other): return _operate(self, np.matmul, self, other)
    def __rmatmul__(self, other): return _operate(self, np.matmul, other, self)
    def __neg__(self): return _operate(self, np.negative, self)
    def __pos__(self): return _operate(self, np.positive, self)
    def __abs__(self): return _operate(self, np.absolute, self)
    def __invert__(self): return _operate(self, np.invert, self)
    def __and__(self, other): return _operate(self, np.bitwise_and, self, other)
    def __rand__(self, other): return _operate(self, np.bitwise_and, other, self)
    def __or__(self, other): return _operate(self, np.bitwise_or, self, other)
    def __ror__(self, other): return _operate(self, np.bitwise_or, other, self)
    def __lshift__(self, other): return _operate(self, np.left_shift, self, other)
    def __rlshift__(self, other): return _operate(self, np.left_shift, other, self)
    def __rshift__(self, other): return _operate(self, np.right_shift, self, other)
    def __rrshift__(self, other): return _operate(self, np.right_shift, other, self)
    def __xor__(self, other): return _operate(self, np.bitwise_xor, self, other)
    def __rxor__(self, other): return _operate(self, np.bitwise_xor, other, self)
    def __lt__(self, other): return _operate(self, np.less, self, other)
    def __le__(self, other): return _operate(self, np.less_equal, self, other)
    def __gt__(self, other): return _operate(self, np.greater, self, other)
    def __ge__(self, other): return _operate(self, np.greater_equal, self, other)
    def __eq__(self, other):
        # a 0-d integer hashes by its value, so a dict or an lru_cache may keep a Tracer of a
        # finished staging as a key: it stands for no value of a later call, never equal
        if not self.builder.is_live() or type(other) is Tracer and not other.builder.is_live():
            return False
        return _operate(self, np.equal, self, other)
    def __ne__(self, other): return _operate(self, np.not_equal, self, other)

    # As numpy's scalars answer them (an ndarray does not): round(x), math.floor(x),
    # math.ceil(x) and math.trunc(x) are integers, traced (a step function: zero derivative;
    # guarded only where Python asks for the int), round(x, n) a traced float.
    def __round__(self, ndigits=None):
        if ndigits is None:
            return self._integer(np.round, "round")
        self._scalar_only("round")
        return _fn(np.round)(self, ndigits)

    def __floor__(self): return self._integer(np.floor, "math.floor")
    def __ceil__(self): return self._integer(np.ceil, "math.ceil")
    def __trunc__(self): return self._integer(np.trunc, "math.trunc")

    def _integer(self, rounding, name):
        self._scalar_only(name)
        return rounding(self).astype(np.int64)

    def _scalar_only(self, name):
        if self.shape:
            raise TypeCheckError(f"{name}() of a traced array", user_frame_info(),
                                 "use np.round(x, decimals), np.floor, np.ceil or np.trunc, "
                                 "which round each element")

    def __getitem__(self, index):
        if sys.getprofile() is not None:
            return _dispatch_unwatched("getitem", (self, index), {})
        return _functions["getitem"](self, index)

    # -- methods, forwarded to the numpy function tables ----------------------------
    @property
    def T(self):
        return _fn(np.transpose)(self)

    @property
    def mT(self):
        return _fn(np.swapaxes)(self, -1, -2)

    @property
    def device(self):
        return "cpu"    # numpy's: SciPy's array-API code asks before it converts

    @property
    def real(self):
        return _fn(np.real)(self)

    @property
    def imag(self):
        return _fn(np.imag)(self)

    def astype(self, dtype, copy=True):
        return _fn("astype")(self, dtype)

    def reshape(self, *shape, order="C"):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return _fn(np.reshape)(self, shape, order=order)

    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return _fn(np.transpose)(self, axes or None)

    def conj(self): return np.conjugate(self)
    def conjugate(self): return np.conjugate(self)
    def copy(self, order="C"): return _fn(np.copy)(self, order)   # (np.copy's is "K")
    def ravel(self, order="C"): return _fn(np.ravel)(self, order)
    def flatten(self, order="C"): return _fn("flatten")(self, order)
    def squeeze(self, axis=None): return _fn(np.squeeze)(self, axis)
    def swapaxes(self, a, b): return _fn(np.swapaxes)(self, a, b)
    def dot(self, other): return _fn(np.dot)(self, other)
    def clip(self, min=None, max=None): return _fn(np.clip)(self, min, max)
    def repeat(self, repeats, axis=None): return _fn(np.repeat)(self, repeats, axis)
    @property
    def itemsize(self): return self.dtype.itemsize

    @property
    def nbytes(self): return self.size * self.dtype.itemsize

    def diagonal(self, offset=0, axis1=0, axis2=1):
        return _fn(np.diagonal)(self, offset, axis1, axis2)
    def trace(self, offset=0, axis1=0, axis2=1): return _fn(np.trace)(self, offset, axis1, axis2)

    def put(self, indices, values, mode="raise"): _fn(np.put)(self, indices, values, mode)
    def choose(self, choices, mode="raise"): return _fn(np.choose)(self, choices, mode=mode)
    def argpartition(self, kth, axis=-1, kind="introselect", order=None):
        return _fn(np.argpartition)(self, kth, axis=axis, kind=kind, order=order)
    def partition(self, kth, axis=-1):
        _fn("assign")(self, _fn(np.partition)(self, kth, axis=axis))

    def sum(self, axis=None, dtype=None, keepdims=False):
        return _fn(np.sum)(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def prod(self, axis=None, dtype=None, keepdims=False):
        return _fn(np.prod)(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def mean(self, axis=None, dtype=None, keepdims=False):
        return _fn(np.mean)(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def var(self, axis=None, dtype=None, ddof=0, keepdims=False):
        return _fn(np.var)(self, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)

    def std(self, axis=None, dtype=None, ddof=0, keepdims=False):
        return _fn(np.std)(self, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)

    def max(self, axis=None, keepdims=False): return _fn(np.max)(self, axis=axis, keepdims=keepdims)
    def min(self, axis=None, keepdims=False): return _fn(np.min)(self, axis=axis, keepdims=keepdims)
    def argmax(self, axis=None): return _fn(np.argmax)(self, axis=axis)
    def argmin(self, axis=None): return _fn(np.argmin)(self, axis=axis)
    def cumsum(self, axis=None): return _fn(np.cumsum)(self, axis=axis)
    # ndarray's methods of the numpy functions xform implements (numpy's own Python calls
    # them too: Generator.choice(a) takes `a.take(indices)`)
    def take(self, indices, axis=None, out=None, mode="raise"):
        return _fn(np.take)(self, indices, axis=axis, out=out, mode=mode)
    def argsort(self, axis=-1, kind=None, order=None):
        return _fn(np.argsort)(self, axis=axis, kind=kind, order=order)
    def searchsorted(self, v, side="left", sorter=None):
        return _fn(np.searchsorted)(self, v, side=side, sorter=sorter)
    def round(self, decimals=0, out=None): return _fn(np.round)(self, decimals, out)
    def nonzero(self): return _fn(np.nonzero)(self)
    def compress(self, condition, axis=None, out=None):
        return _fn(np.compress)(condition, self, axis=axis, out=out)
    def cumprod(self, axis=None): return _fn(np.cumprod)(self, axis=axis)
    def any(self, axis=None, keepdims=False): return _fn(np.any)(self, axis=axis, keepdims=keepdims)
    def all(self, axis=None, keepdims=False): return _fn(np.all)(self, axis=axis, keepdims=keepdims)
    def sort(self, axis=-1, kind=None, order=None):
        _fn("assign")(self, _fn(np.sort)(self, axis=axis, kind=kind, order=order))

    @property
    def flat(self):
        return _FlatIndexer(self)


class _FlatIndexer:
    """`x.flat` of a traced array, numpy's flatiter: flat (C-order) positions read and
    written as the multi-indices they stand for, so writes reach `x` (through views too);
    an iterator of the elements with its `coords` and `index` (np.ndenumerate reads them)."""

    __slots__ = ("array", "index")

    def __init__(self, array):
        self.array, self.index = array, 0

    def _at(self, index):
        shape = self.array.shape
        return np.unravel_index(np.arange(int(np.prod(shape, dtype=np.int64)))[index], shape)

    def __getitem__(self, index):
        return self.array[self._at(index)]

    def __setitem__(self, index, value):
        self.array[self._at(index)] = value

    def __len__(self):
        return self.array.size

    def __iter__(self):
        return self

    def __next__(self):
        if self.index >= self.array.size:
            raise StopIteration
        element = self.array[self.coords]
        self.index += 1
        return element

    @property
    def coords(self):
        shape = self.array.shape
        if self.index >= self.array.size:      # past the end, as numpy's: (shape[0], 0, ...)
            return (shape[0],) + (0,) * (len(shape) - 1)
        return tuple(int(i) for i in np.unravel_index(self.index, shape))

