"""Rule helpers shared by every family: symbolic zeros, unbroadcasting, jvp and batch makers.

Rule bodies use numpy's own API on their arguments: under a builder the arguments are tracers
and each call emits an equation, so every rule is itself differentiable and batchable.
"""
from __future__ import annotations

import attrs
import numpy as np
from numpy import float64, ndarray   # (read per value: see xform.transforms.vjp)

from xform.ir.ad import (NOT_MAPPED, Undefined, Zero, add_tangents, aval, move_to_front, ndim,
                         zero_tangent)
from xform.ir.avals import (ShapedArray, broadcast_shapes, is_differentiable, shaped_array,
                            tangent_aval)
from xform.ir.core import Params
from xform.ir.registry import Hooks

def unbroadcast(ct, target: ShapedArray):
    """Sum `ct` over the axes that broadcasting added to reach `target`'s shape and dtype."""
    kind = type(ct)
    if ((kind is ndarray or kind is float64) and ct.shape == target.shape
            and ct.dtype == target.dtype):
        return ct   # (a first call's reverse mode, on concrete values: most often so)
    ct_aval = aval(ct)
    if ct_aval.shape != target.shape:
        shape = ct_aval.shape
        lead = len(shape) - len(target.shape)
        axes = tuple(range(lead)) + tuple(
            i + lead for i, d in enumerate(target.shape) if d == 1 and shape[i + lead] != 1)
        if axes:
            ct = np.sum(ct, axis=axes)
        if aval(ct).shape != target.shape:
            ct = np.reshape(ct, target.shape)
        ct_aval = aval(ct)
    if ct_aval.dtype != target.dtype and is_differentiable(target):
        if ct_aval.dtype.kind == "c" and target.dtype.kind != "c":
            ct = np.real(ct)   # transposes the embedding of a real input into complex
        ct = ct.astype(target.dtype)
    return ct


# -- jvp makers ---------------------------------------------------------------------------

def defjvp(prim, *derivatives):
    """A jvp rule from one function per input: `derivative(t, *primals, ans, **params)`.

    Each returns that input's contribution to the output tangent; None marks an input the
    output does not depend on differentiably (JAX's `defjvp`).
    """
    def tangent(primals, tangents, ans, params):
        t_out = Zero(aval(ans))
        for derivative, t in zip(derivatives, tangents):
            if derivative is None or type(t) is Zero:
                continue
            t_out = add_tangents(t_out, derivative(t, *primals, ans=ans, **params))
        return t_out

    def rule(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        return ans, tangent(primals, tangents, ans, params)
    # the tangent alone, of an output computed already (NDual on a first call's values)
    rule.tangent = tangent
    return rule


def linear_jvp(prim):
    """The jvp of a primitive linear in its (single differentiable) first argument. Register
    it with `linear_in=(0,)`, so reverse mode applies the transpose rule directly."""
    def rule(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        t = tangents[0]
        if type(t) is Zero:
            return ans, Zero(aval(ans))
        return ans, prim.bind(t, *primals[1:], **params)
    return rule


def with_arithmetic_derivative(hooks=None) -> Hooks:
    """`hooks` (a Hooks, or none) saying the primitive's derivative is arithmetic on what it
    reads (Hooks.arithmetic_derivative)."""
    return attrs.evolve(hooks if hooks is not None else Hooks(), arithmetic_derivative=True)


def zero_derivative(prim):
    """jvp and vjp rules for a primitive whose outputs do not vary differentiably."""
    def jvp(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        if prim.multiple_results:
            return ans, [zero_tangent(aval(a)) for a in ans]
        return ans, zero_tangent(aval(ans))

    def vjp(primals, outs, cts, **params):
        return (None,) * len(primals)
    return {"jvp": jvp, "vjp": vjp, "no_derivative": True}


def defvjp(*cotangents):
    """A vjp rule from one function per input: `cotangent(ct, *primals, ans, **params)`
    (a `needed_vjp`)."""
    def needed_only(primals, ans, ct, params, needed):
        result = []
        for i, (make, x) in enumerate(zip(cotangents, primals)):
            if make is None or needed is not None and not needed[i]:
                result.append(None)
                continue
            kind = type(x)
            if kind is float64 or kind is float or kind is ndarray:
                # A first call's concrete values: unbroadcast's first test, without x's aval
                if kind is ndarray and x.dtype.kind not in "fc":
                    result.append(None)
                    continue
                ct_x = _cotangent_of(make, ct, primals, ans, params)
                if kind is ndarray:
                    kind = type(ct_x)
                    fits = ((kind is ndarray or kind is float64)
                            and ct_x.shape == x.shape and ct_x.dtype == x.dtype)
                else:   # a float64 scalar's
                    fits = type(ct_x) is float64
                result.append(ct_x if fits else unbroadcast(ct_x, aval(x)))
                continue
            x_aval = aval(x)
            result.append(None if x_aval.dtype.kind not in "fc" else
                          unbroadcast(make(ct, *primals, ans=ans, **params), x_aval))
        return tuple(result)

    return needed_vjp(needed_only)


def needed_vjp(needed_only):
    """The vjp rule `rule(primals, ans, ct, **params)` of `needed_only(primals, ans, ct,
    params, needed)`, which computes only the cotangents of the inputs `needed[i]` says
    (None: all), the others None; reverse mode calls `rule.needed_only` to skip those of
    constants (`2.0 * x`'s of 2.0), which it would drop."""
    def rule(primals, ans, ct, **params):
        return needed_only(primals, ans, ct, params, None)
    rule.needed_only = needed_only
    return rule


def multilinear_vjp(transpose):
    """The vjp rule of a primitive linear in each operand apart (a product: matmul, dot,
    einsum, convolve), from its `transpose` rule: an operand's cotangent is the transpose
    with that operand undefined and the others' values given. That is what transposing its
    linearized jvp computes (the same operations, the same bits), without staging that
    small linear graph per equation; the last operand's comes first, as there (a
    `needed_vjp`)."""
    def needed_only(primals, ans, ct, params, needed):
        cts = [None] * len(primals)
        for i in reversed(range(len(primals))):
            if needed is not None and not needed[i]:
                continue
            x_aval = aval(primals[i])
            if x_aval.dtype.kind in "fc":
                operands = list(primals)
                operands[i] = Undefined(tangent_aval(x_aval))
                cts[i] = transpose(ct, *operands, **params)[i]
        return tuple(cts)
    return needed_vjp(needed_only)


def _cotangent_of(make, ct, primals, ans, params):
    """`make(ct, *primals, ans=ans, **params)`, with no argument list unpacked for the
    commonest calls (one or two primals, no params: an unpacking costs twice the call)."""
    if not params:
        if len(primals) == 2:
            return make(ct, primals[0], primals[1], ans=ans)
        if len(primals) == 1:
            return make(ct, primals[0], ans=ans)
    return make(ct, *primals, ans=ans, **params)


# -- batch makers -------------------------------------------------------------------------

def vectorized_batch(prim):
    """Batch rule of a one-input element-wise primitive: the batch axis passes through."""
    def rule(size, args, dims, **params):
        return prim.bind(*args, **params), dims[0]
    return rule


def elementwise_batch(prim):
    """Batch rule of a broadcasting element-wise primitive: align batch axes at the front."""
    def rule(size, args, dims, **params):
        ranks = [ndim(a) - (d is not NOT_MAPPED) for a, d in zip(args, dims)]
        out_rank = max(ranks)
        aligned = []
        for x, d, rank in zip(args, dims, ranks):
            if d is NOT_MAPPED:
                aligned.append(x)
                continue
            x = move_to_front(x, d, size)
            if rank < out_rank:
                x = np.reshape(x, (size,) + (1,) * (out_rank - rank) + aval(x).shape[1:])
            aligned.append(x)
        return prim.bind(*aligned, **params), 0
    return rule


# -- peephole hooks of fold_constants: fn(eqn, value_of, producer) -> None | atoms | Equation ----

def reshape_peephole(eqn, value_of, producer):
    """A reshape to the same type is its operand; a reshape of a reshape reshapes once."""
    x = eqn.inputs[0]
    if x.aval == eqn.outputs[0].aval:
        return (x,)
    inner = producer.get(x)
    if inner is not None and inner.primitive is eqn.primitive:
        return attrs.evolve(eqn, inputs=inner.inputs)
    return None


def transpose_peephole(eqn, value_of, producer):
    """The identity permutation is its operand; two transposes compose into one."""
    x, axes = eqn.inputs[0], eqn.params["axes"]
    if tuple(axes) == tuple(range(len(axes))):
        return (x,)
    inner = producer.get(x)
    if inner is not None and inner.primitive is eqn.primitive:
        inner_axes = inner.params["axes"]
        composed = tuple(inner_axes[a] for a in axes)
        return attrs.evolve(eqn, inputs=inner.inputs,
                            params=Params({**eqn.params, "axes": composed}))
    return None


# -- abstract eval of element-wise primitives ---------------------------------------------

_DTYPE_CACHE: dict = {}
_MAX_CACHED_RESULTS = 4096  # per primitive: distinct shape combinations seen while staging


def elementwise_abstract_eval(numpy_fn):
    """Abstract eval asking numpy itself for the result dtype (on 0-d stand-ins, cached), so
    promotion follows numpy 2 exactly. Results are strong: numpy returns numpy scalars even
    for Python-scalar inputs, and those no longer defer to the other operand's dtype."""
    from xform.ir.avals import dummy

    results = {}  # (avals, params) -> result: staging asks the same question many times

    def abstract_eval(*avals, **params):
        key = (avals, tuple(sorted(params.items())) if params else ())
        result = results.get(key)
        if result is not None:
            return result
        dtype_key = (numpy_fn, tuple((a.dtype, a.weak_type) for a in avals), key[1])
        dtype = _DTYPE_CACHE.get(dtype_key)
        if dtype is None:
            with np.errstate(all="ignore"):
                dtype = np.result_type(numpy_fn(*[dummy(a) for a in avals], **params))
            _DTYPE_CACHE[dtype_key] = dtype
        shape = broadcast_shapes(*[a.shape for a in avals])
        # (from the aval memo: the next equation's key then holds the same object, which
        # tuple comparison matches by identity, not by ShapedArray.__eq__)
        result = shaped_array(shape, dtype)
        if len(results) >= _MAX_CACHED_RESULTS:
            results.clear()
        results[key] = result
        return result
    return abstract_eval


def elementwise_rules(prim, *derivatives):
    """jvp and vjp of an element-wise primitive from one derivative per input.

    `derivative(t, *primals, ans)` must be `t` times the partial derivative, so the same
    function applied to a cotangent (then unbroadcast) is the vjp: the Jacobian is diagonal.
    """
    return {"jvp": defjvp(prim, *derivatives), "vjp": defvjp(*derivatives)}
