"""Random draws as effectful primitives: `random_draw` calls one method of a numpy generator
(RandomState, Generator) held by reference in its params, so each run of compiled code draws
anew from that generator, in program order; `nondifferentiable` stands for a derivative
through a draw's parameters, and raises if it is ever computed."""
from __future__ import annotations

import copy
import itertools

import numpy as np

from xform.errors import UnsupportedError
from xform.ir.ad import NOT_MAPPED, Zero, aval
from xform.ir.avals import ShapedArray, is_differentiable, tangent_aval
from xform.ir.builder import rewritten_source
from xform.ir.core import Primitive
from xform.ir.registry import Hooks, register
from xform.ir.values import generator_kind, spare_copy

draw_p = Primitive("random_draw")
nondifferentiable_p = Primitive("nondifferentiable")

_numbers = itertools.count(1)
_names: dict = {}   # id(generator) -> its number in printed graphs


class GeneratorRef:
    """A generator as an equation holds it: by reference (never copied), equal to another
    reference to the same object, printed as `RandomState#1`.

    >>> from xform.rules.random import GeneratorRef
    >>> rs = np.random.RandomState(0)
    >>> GeneratorRef(rs) == GeneratorRef(rs), repr(GeneratorRef(rs)).startswith("RandomState#")
    (True, True)
    """

    __slots__ = ("generator",)

    def __init__(self, generator):
        self.generator = generator

    def __eq__(self, other):
        return type(other) is GeneratorRef and other.generator is self.generator

    def __hash__(self):
        return id(self.generator)

    def __repr__(self):
        number = _names.get(id(self.generator))
        if number is None or number[1] is not self.generator:
            number = _names[id(self.generator)] = (next(_numbers), self.generator)
        return f"{type(self.generator).__name__}#{number[0]}"


class Operand:
    """Where a draw's array argument goes among the method's arguments (params keep the rest)."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __eq__(self, other):
        return type(other) is Operand and other.index == self.index

    def __hash__(self):
        return hash((Operand, self.index))

    def __repr__(self):
        return f"${self.index}"


def _filled(template, operands):
    return tuple(operands[item.index] if type(item) is Operand else item for item in template)


def call_method(generator, method, args, kwargs, operands):
    """`generator.method(*args, **kwargs)` with the operands put back in their places."""
    keywords = dict(zip((k for k, _ in kwargs), _filled([v for _, v in kwargs], operands)))
    return getattr(generator, method)(*_filled(args, operands), **keywords)


def _draw_impl(*operands, method, generator, args, kwargs, aval):
    return call_method(generator.generator, method, args, kwargs, operands)


def _draw_speculative_impl(copies, *operands, method, generator, args, kwargs, aval):
    """The draw's value while staging (xform.ir.values), from a copy of the generator kept
    in `copies` for the whole staging: the user's generator advances only when the staged
    code runs."""
    original = generator.generator
    entry = copies.get(id(original))
    if entry is None:
        entry = copies[id(original)] = (original, _copy(original))
    return call_method(entry[1], method, args, kwargs, operands)


def _copy(generator):
    """A generator that draws what `generator` draws next: a spare copy given its state where
    there is one, else a deep copy."""
    spare = spare_copy(generator_kind(generator))
    if spare is not None:
        try:
            set_raw_state(spare, raw_state(generator))
            return spare
        except (TypeError, ValueError):     # a bit generator of the user's own that refuses
            pass
    return copy.deepcopy(generator)


def raw_state(generator):
    """Where `generator` is in its stream, in the form its setter takes back."""
    if hasattr(generator, "get_state"):                 # numpy's RandomState
        return generator.get_state(legacy=False)
    if hasattr(generator, "getstate"):                  # Python's random.Random
        return generator.getstate()
    return getattr(generator, "bit_generator", generator).state


def set_raw_state(generator, state) -> None:
    if hasattr(generator, "set_state"):
        generator.set_state(state)
    elif hasattr(generator, "setstate"):
        generator.setstate(state)
    else:
        getattr(generator, "bit_generator", generator).state = state


def _draw_abstract_eval(*avals, method, generator, args, kwargs, aval):
    return aval


def _poisoned(values, like, params, what):
    # Transforms emit under the rewritten equation's source: the user's line of the draw.
    return nondifferentiable_p.bind(values, shape=like.shape, dtype=like.dtype,
                                    method=params["method"], what=what,
                                    source=rewritten_source())


def _draw_jvp(primals, tangents, **params):
    out = draw_p.bind(*primals, **params)
    out_aval = params["aval"]
    live = [t for t in tangents if type(t) is not Zero]
    if not live or not is_differentiable(out_aval):
        return out, Zero(tangent_aval(out_aval))
    # A derivative in the draw's parameters: an error if anything computes it.
    return out, _poisoned(live[0], tangent_aval(out_aval), params, "a tangent")


def _draw_vjp(primals, outs, cts, **params):
    if type(cts) is Zero:
        return [None] * len(primals)
    return [_poisoned(cts, tangent_aval(aval(x)), params, "a gradient")
            if is_differentiable(aval(x)) else None for x in primals]


def _draw_batch(size, operands, dims, **params):
    """Mapped parameters: one draw per element, in element order (what a Python loop over
    the elements draws). Unmapped ones: one draw for all, as the unbatched function makes
    one (a jacobian's basis directions share the primal's draw)."""
    if all(d is NOT_MAPPED for d in dims):
        return draw_p.bind(*operands, **params), NOT_MAPPED
    outs = []
    for i in range(size):
        element = [a if d is NOT_MAPPED else np.take(a, i, axis=d)
                   for a, d in zip(operands, dims)]
        outs.append(draw_p.bind(*element, **params))
    return np.stack(outs), 0


register(draw_p, impl=_draw_impl, abstract_eval=_draw_abstract_eval, jvp=_draw_jvp,
         vjp=_draw_vjp, batch=_draw_batch, symbolic_zeros=True, effectful=True,
         hooks=Hooks(speculative_impl=_draw_speculative_impl), construct="numpy.random draw")


# `rs.seed(0)` / `np.random.seed(0)` while staging: an effect in program order among the draws
# (seeded while staging, it would come before every staged draw, those before it too).
reseed_p = Primitive("random_seed", multiple_results=True)


def _reseed_impl(*, generator, args):
    generator.generator.seed(*args)
    return []


def _reseed_speculative_impl(copies, *, generator, args):
    original = generator.generator
    entry = copies.get(id(original))
    if entry is None:
        entry = copies[id(original)] = (original, _copy(original))
    entry[1].seed(*args)
    return []


register(reseed_p, impl=_reseed_impl, abstract_eval=lambda **params: [],
         jvp=lambda primals, tangents, **params: (reseed_p.bind(**params), []),
         vjp=lambda primals, outs, cts, **params: [],
         batch=lambda size, operands, dims, **params: (reseed_p.bind(**params), []),
         effectful=True, hooks=Hooks(speculative_impl=_reseed_speculative_impl),
         construct="numpy.random seed")


def _raise_nondifferentiable(x, *, shape, dtype, method, what, source):
    raise UnsupportedError(
        f"{what} of a random draw ({method}) with respect to its parameters was asked for: "
        f"draws are not differentiable in their parameters", source,
        "reparameterise: draw from the standard distribution and transform it with "
        "traced values, e.g. mu + sigma * rs.standard_normal(size) for rs.normal(mu, sigma)")


def _nondiff_abstract_eval(x, *, shape, dtype, method, what, source):
    return ShapedArray(shape, dtype)


def _nondiff_jvp(primals, tangents, **params):
    out = nondifferentiable_p.bind(primals[0], **params)
    tangent = tangents[0]
    return out, (tangent if type(tangent) is Zero
                 else nondifferentiable_p.bind(tangent, **params))


def _nondiff_transpose(ct, x, **params):
    if type(ct) is Zero:
        return [None]
    like = tangent_aval(aval(x))
    return [nondifferentiable_p.bind(ct, **{**params, "shape": like.shape,
                                            "dtype": like.dtype})]


def _nondiff_batch(size, args, dims, *, shape, **params):
    return nondifferentiable_p.bind(args[0], shape=(size,) + tuple(shape), **params), 0


register(nondifferentiable_p, impl=_raise_nondifferentiable,
         abstract_eval=_nondiff_abstract_eval, jvp=_nondiff_jvp,
         transpose=_nondiff_transpose, batch=_nondiff_batch, symbolic_zeros=True,
         linear_in=(0,), construct="a derivative of a random draw")

__all__ = ["GeneratorRef", "Operand", "call_method", "draw_p", "nondifferentiable_p",
           "raw_state", "reseed_p", "set_raw_state"]
