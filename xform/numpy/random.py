"""numpy's random API while staging: a draw (`rs.normal(mu, 1.0, 3)`, `np.random.randn(3)`)
becomes a `random_draw` equation on the generator (xform.rules.random). numpy's generators are
C types that cannot be patched, so draws are seen through stand-ins: the legacy module
functions (`np.random.randn`), and `proxy_for(generator)`, an object of a subclass of the
generator's type that xform.runtime.effects puts where the staged function finds the
generator (a closure cell, a global, an attribute, a dict) while it is staged. Outside staging
(another thread, no builder) a stand-in calls the real generator. A RandomState's `seed`
is staged too, in program order. What staging cannot stage
(reading or setting the state, shuffling a concrete array) is noted (`note_unstaged`): the
function then falls back to being staged on every call.
"""
from __future__ import annotations

import functools
from contextvars import ContextVar

import numpy as np

from xform.errors import UnsupportedError, shape_error
from xform.ir.avals import ShapedArray
from xform.ir.builder import current_builder
from xform.ir.tracer import Tracer
from xform.numpy.stand_ins import define_group, stand_in
from xform.numpy.views import assign
from xform.rules.random import GeneratorRef, Operand, call_method, draw_p, reseed_p
from xform.source_info import user_frame_info

# The methods staged as draws (numpy's distributions and samplers, both generator kinds).
DRAWS = frozenset({
    "beta", "binomial", "chisquare", "choice", "dirichlet", "exponential", "f", "gamma",
    "geometric", "gumbel", "hypergeometric", "integers", "laplace", "logistic", "lognormal",
    "logseries", "multinomial", "multivariate_hypergeometric", "multivariate_normal",
    "negative_binomial", "noncentral_chisquare", "noncentral_f", "normal", "pareto",
    "permutation", "permuted", "poisson", "power", "rand", "randint", "randn", "random",
    "random_integers", "random_sample", "ranf", "rayleigh", "sample", "standard_cauchy",
    "standard_exponential", "standard_gamma", "standard_normal", "standard_t", "tomaxint",
    "triangular", "uniform", "vonmises", "wald", "weibull", "zipf", "shuffle"})
# Legacy module functions that are not draws but touch the global generator's state.
_STATEFUL = ("seed", "set_state", "get_state", "bytes")

_unstaged: ContextVar = ContextVar("xform_unstaged_effects", default=None)


def note_unstaged() -> None:
    """An effect staging could not stage happened (the enclosing watch then restages)."""
    seen = _unstaged.get()
    if seen is not None:
        seen.append(True)


def unstaged_effects():
    """Start collecting `note_unstaged` calls: returns (the list, a token for `reset`)."""
    seen = []
    return seen, _unstaged.set(seen)


def reset_unstaged(token) -> None:
    _unstaged.reset(token)


# -- staging one draw ----------------------------------------------------------------------------

_scratch: dict = {}   # generator type -> a generator used only to find output shapes


def _scratch_for(generator):
    kind = np.random.RandomState if isinstance(generator, np.random.RandomState) \
        else np.random.Generator
    if kind not in _scratch:
        _scratch[kind] = (np.random.RandomState(0) if kind is np.random.RandomState
                          else np.random.default_rng(0))
    return _scratch[kind]


def _dummy(shape, dtype, position, attempt):
    if attempt == 0:
        return np.ones(shape, dtype)
    if attempt == 1:        # probabilities: a distribution along the last axis
        return np.full(shape, 1.0 / (shape[-1] if shape else 1), dtype)
    if attempt == 2:        # ordered arguments (triangular's left < mode < right)
        return np.full(shape, position + 1, dtype)
    if len(shape) >= 2 and shape[-1] == shape[-2]:   # a covariance: the identity
        return np.broadcast_to(np.eye(shape[-1], dtype=dtype), shape)
    return np.zeros(shape, dtype)


def _out_aval(generator, method, args, kwargs, operands):
    """The aval of the draw: numpy's own result on stand-in values of the traced operands'
    shapes (valid parameters for every distribution: four kinds are tried), drawn from a
    scratch generator of the same kind, never the user's."""
    scratch = _scratch_for(generator)
    error = None
    for attempt in range(4):
        values = [x if type(x) is not Tracer else _dummy(x.shape, x.dtype, i, attempt)
                  for i, x in enumerate(operands)]
        try:
            result = call_method(scratch, method, args, kwargs, values)
        except (ValueError, TypeError) as err:
            error = err
            continue
        weak = isinstance(result, (int, float)) and not isinstance(result, np.generic)
        array = np.asarray(result)
        return ShapedArray(array.shape, array.dtype, weak)
    raise UnsupportedError(f"cannot stage the random draw {method}: {error}",
                           user_frame_info(), "draw outside the function and pass the draws "
                           "in as an argument")


def _is_operand(value) -> bool:
    return type(value) is Tracer or isinstance(value, np.ndarray)


def stage_draw(generator, method, args, kwargs):
    """`generator.method(*args, **kwargs)`: staged as a `random_draw` when staging, else run."""
    if current_builder() is None:
        return getattr(generator, method)(*args, **kwargs)
    if method == "shuffle":
        return _shuffle(generator, args, kwargs)
    selected = _selection(generator, method, args, kwargs)
    if selected is not None:
        return selected
    operands = []

    def placed(value):
        if _is_operand(value):
            operands.append(value)
            return Operand(len(operands) - 1)
        if isinstance(value, list):
            return tuple(value)
        return value
    template = tuple(placed(a) for a in args)
    keywords = tuple((k, placed(v)) for k, v in sorted(kwargs.items()))
    aval = _out_aval(generator, method, template, keywords, operands)
    return draw_p.bind(*operands, method=method, generator=GeneratorRef(generator),
                       args=template, kwargs=keywords, aval=aval)


def _selection(generator, method, args, kwargs):
    """`choice(a, ...)` and `permutation(x)` of a traced array: the draw of the indices,
    then the selection along `axis`, which is what numpy computes (it draws for an array
    what it draws for its length, then takes): differentiable in the array, as indexing is.
    None for other draws."""
    name = {"choice": "a", "permutation": "x"}.get(method)
    if name is None:
        return None
    x = args[0] if args else kwargs.get(name)
    if type(x) is not Tracer or not x.shape:
        return None
    if method == "choice" and isinstance(generator, np.random.RandomState) and x.ndim != 1:
        raise shape_error("a must be 1-dimensional")     # (the legacy choice's own check)
    args, kwargs = args[1:], {k: v for k, v in kwargs.items() if k != name}
    axis_position = 3 if method == "choice" else 0     # after size, replace, p
    axis = args[axis_position] if len(args) > axis_position else kwargs.get("axis", 0)
    indices = stage_draw(generator, method, (x.shape[axis],) + args, kwargs)
    return np.take(x, indices, axis=axis)


def _shuffle(generator, args, kwargs):
    """`shuffle(x)` in place: a traced `x` is rebound to its permutation (the same draws);
    a concrete array would be shuffled once, while staging: that falls back to restaging."""
    x = args[0] if args else kwargs.get("x")
    if type(x) is not Tracer:
        note_unstaged()
        return getattr(generator, "shuffle")(*args, **kwargs)
    axis = kwargs.get("axis", args[1] if len(args) > 1 else 0)
    if axis != 0 and isinstance(generator, np.random.Generator):
        shuffled = stage_draw(generator, "permuted", (x,), {"axis": axis})
    else:
        shuffled = stage_draw(generator, "permutation", (x,), {})
    assign(x, shuffled, whole=True)
    return None


def _seed(generator):
    """`generator.seed` (a RandomState's) while staging: staged in program order among the
    draws; a seed that is traced, an array or given by keyword is noted as unstaged."""
    def seed(*args, **kwargs):
        if current_builder() is None:
            return generator.seed(*args, **kwargs)
        if kwargs or not all(value is None or type(value) is int for value in args):
            note_unstaged()
            return generator.seed(*args, **kwargs)
        reseed_p.bind(generator=GeneratorRef(generator), args=args)
        return None
    return seed


# -- proxies: the generator's type, every draw staged -------------------------------------------

def _draw_method(generator, name):
    method = functools.partial(stage_draw, generator, name)

    def draw(*args, **kwargs):
        return method(args, kwargs)
    draw.__name__ = name
    return draw


_STATE_DUNDERS = frozenset({"__getstate__", "__setstate__", "__reduce__", "__reduce_ex__",
                            "__deepcopy__", "__copy__"})


class _Proxy:
    """What a generator's holder holds while a function is staged."""

    def __getattribute__(self, name):
        real = object.__getattribute__(self, "_xform_real")
        if name in DRAWS:
            return _draw_method(real, name)
        if name == "_xform_real":
            return real
        if name == "seed" and isinstance(real, np.random.RandomState):
            return _seed(real)
        if (name[0] != "_" or name in _STATE_DUNDERS) and current_builder() is not None:
            note_unstaged()     # seeding, reading the state, spawning: not staged
        return getattr(real, name)

    def __repr__(self):
        return repr(object.__getattribute__(self, "_xform_real"))


class RandomStateProxy(_Proxy, np.random.RandomState):
    pass


class GeneratorProxy(_Proxy, np.random.Generator):
    pass


PROXY_TYPES = (RandomStateProxy, GeneratorProxy)
_spare_bits: dict = {}


def proxy_for(generator):
    """A stand-in of `generator` (RandomState or Generator) whose draws are staged, or None
    for another kind of generator."""
    if isinstance(generator, np.random.RandomState):
        proxy_type, bits = RandomStateProxy, np.random.MT19937
    elif isinstance(generator, np.random.Generator):
        proxy_type, bits = GeneratorProxy, np.random.PCG64
    else:
        return None
    if bits not in _spare_bits:
        _spare_bits[bits] = bits(0)  # its state is never used: every attribute is forwarded
    proxy = proxy_type(_spare_bits[bits])
    object.__setattr__(proxy, "_xform_real", generator)
    return proxy


def stand_in_for_static(value):
    """What a function staged with `value` as a static argument gets: a proxy for a numpy
    generator (so its draws are staged from that generator), else `value` itself.

    >>> from xform.numpy.random import stand_in_for_static
    >>> type(stand_in_for_static(np.random.default_rng(0))).__name__, stand_in_for_static(2)
    ('GeneratorProxy', 2)
    """
    if type(value) in (np.random.RandomState, np.random.Generator):
        return proxy_for(value)
    return value


class BoundDraw:
    """What stands for a bound draw (`randn = rs.randn`) while its holder is staged."""

    __slots__ = ("_xform_real", "_generator", "_name")

    def __init__(self, bound):
        self._xform_real, self._generator, self._name = bound, bound.__self__, bound.__name__

    def __call__(self, *args, **kwargs):
        return stage_draw(self._generator, self._name, args, kwargs)


_STAND_INS = (RandomStateProxy, GeneratorProxy, BoundDraw)


def unproxied(value):
    """The generator (or bound draw) `value` stands for, if it is a staging stand-in; else
    `value`: what a record of the values staging read must hold."""
    if type(value) in _STAND_INS:
        return object.__getattribute__(value, "_xform_real")
    return value


# -- numpy's legacy module functions (the global RandomState) ------------------------------------

# The stand-ins of the module functions (`np.random.randn`), a group a staging does without
# when its function provably cannot reach them (xform.runtime.effects.Watch).
LEGACY_GROUP = "numpy.random"
define_group(LEGACY_GROUP, lambda names: any("random" in name for name in names))


def _legacy_draw(name):
    def replacement(*args, **kwargs):
        return stage_draw(np.random.mtrand._rand, name, args, kwargs)
    return replacement


def _legacy_stateful(name):
    original = getattr(np.random, name)

    def replacement(*args, **kwargs):
        note_unstaged()
        return original(*args, **kwargs)
    return replacement


def _staging(args, kwargs) -> bool:
    return current_builder() is not None


for _name in sorted(DRAWS):
    if callable(getattr(np.random, _name, None)) and \
            getattr(getattr(np.random, _name), "__self__", None) is np.random.mtrand._rand:
        stand_in((np.random, _name), _legacy_draw(_name), when=_staging, group=LEGACY_GROUP)
for _name in _STATEFUL:
    stand_in((np.random, _name), _seed(np.random.mtrand._rand) if _name == "seed"
             else _legacy_stateful(_name), when=_staging, group=LEGACY_GROUP)

__all__ = ["DRAWS", "LEGACY_GROUP", "PROXY_TYPES", "BoundDraw", "note_unstaged", "proxy_for",
           "stand_in_for_static", "unproxied",
           "reset_unstaged", "stage_draw", "unstaged_effects"]
