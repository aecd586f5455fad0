"""Special functions computed without overflow: softplus and logsumexp. Both are default-only
primitives: each declares the trace-through `decomposition` that the minimal context
(xform.ir.contexts) stages instead. Their ops are in xform.numpy.special."""
import numpy as np

from xform.ir.ad import aval
from xform.ir.avals import ShapedArray
from xform.ir.core import Primitive
from xform.ir.registry import register
from xform.rules.helpers import (defjvp, defvjp, elementwise_abstract_eval, elementwise_rules,
                                 vectorized_batch)
from xform.rules.reduce import expand_reduced, reduced_shape, reduction_batch
from xform.rules.unary import stop_gradient

softplus_p = Primitive("softplus")
"""`log(1 + exp(x))` as one primitive (default context; `minimal` stages its decomposition)."""


def _softplus_decomposition(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def _softplus_impl(x):
    if not (isinstance(x, np.ndarray) and x.ndim and x.dtype.kind == "f"):
        return _softplus_decomposition(x)
    # The same arithmetic in place on its own temporary: one allocation instead of five.
    out = np.abs(x)
    np.negative(out, out=out)
    np.exp(out, out=out)
    np.log1p(out, out=out)
    out += np.maximum(x, 0)
    return out


# d/dx = sigmoid(x) = e^(x - softplus(x)): the exponent is never positive, so never overflows.
register(softplus_p, impl=_softplus_impl, abstract_eval=elementwise_abstract_eval(_softplus_impl),
         **elementwise_rules(softplus_p, lambda t, x, ans: t * np.exp(x - ans)),
         batch=vectorized_batch(softplus_p), decomposition=_softplus_decomposition,
         symbolic_zeros=True, elementwise=True)


logsumexp_p = Primitive("logsumexp")
"""`log(sum(exp(x)))` over axes as one primitive (default context; `minimal` stages its
decomposition)."""


def _logsumexp_impl(x, *, axes):
    shift = np.maximum.reduce(x, axis=axes, keepdims=True)
    shift = np.where(np.isfinite(shift), shift, 0)
    shifted = np.subtract(x, shift)
    # exp in place on the temporary; log(0) = -inf is right for a slice of -inf only.
    with np.errstate(divide="ignore"):
        out = np.log(np.add.reduce(np.exp(shifted, out=shifted) if shifted.ndim
                                   else np.exp(shifted), axis=axes))
    return out + np.reshape(shift, np.shape(out))


def _logsumexp_abstract_eval(x, *, axes):
    if any(x.shape[ax] == 0 for ax in axes):
        raise ValueError("logsumexp of a zero-size array: it has no maximum to shift by")
    return ShapedArray(reduced_shape(x.shape, axes), x.dtype)


def _softmax(x, ans, axes):
    return np.exp(x - expand_reduced(ans, aval(x).shape, axes))


def _logsumexp_decomposition(x, *, axes):
    # Shifting by the maximum avoids overflow; its derivative cancels, so it is not traced.
    shift = np.max(x, axis=axes, keepdims=True)
    shift = stop_gradient(np.where(np.isfinite(shift), shift, 0))
    out = np.log(np.sum(np.exp(x - shift), axis=axes))
    return out + np.reshape(shift, reduced_shape(np.shape(x), axes))


register(logsumexp_p, impl=_logsumexp_impl, abstract_eval=_logsumexp_abstract_eval,
         jvp=defjvp(logsumexp_p, lambda t, x, *, ans, axes:
                    np.sum(t * _softmax(x, ans, axes), axis=axes)),
         vjp=defvjp(lambda ct, x, *, ans, axes:
                    expand_reduced(ct, aval(x).shape, axes) * _softmax(x, ans, axes)),
         batch=reduction_batch(logsumexp_p), decomposition=_logsumexp_decomposition,
         symbolic_zeros=True)
