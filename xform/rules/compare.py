"""Comparisons, logical and bitwise ops (zero derivative), `where` and `clip`."""
import numpy as np

from xform.ir.core import Primitive
from xform.ir.ad import Undefined, Zero, aval
from xform.rules.helpers import (elementwise_abstract_eval, elementwise_batch, unbroadcast,
                                 with_arithmetic_derivative,
                                 zero_derivative)
from xform.ir.registry import register

COMPARE_PRIMITIVES = {}

for _ufunc in (np.less, np.less_equal, np.greater, np.greater_equal, np.equal, np.not_equal,
               np.logical_and, np.logical_or, np.logical_xor, np.bitwise_and, np.bitwise_or,
               np.bitwise_xor, np.left_shift, np.right_shift):
    _prim = Primitive(_ufunc.__name__)
    register(_prim, impl=_ufunc, abstract_eval=elementwise_abstract_eval(_ufunc),
             **zero_derivative(_prim), batch=elementwise_batch(_prim), symbolic_zeros=True,
             elementwise=True, hooks=with_arithmetic_derivative(), role=_ufunc.__name__)
    COMPARE_PRIMITIVES[_ufunc.__name__] = _prim


# -- isclose(a, b): numpy's own, one equation (as |a - b| <= atol + rtol |b| & ... it was ten,
# and a convergence test `while not np.allclose(x_new, x)` stages one per iteration)

isclose_p = Primitive("isclose")

register(isclose_p, impl=np.isclose, abstract_eval=elementwise_abstract_eval(np.isclose),
         **zero_derivative(isclose_p), batch=elementwise_batch(isclose_p), symbolic_zeros=True,
         role="isclose")


# -- where(cond, x, y): linear in x and y ---------------------------------------------------

where_p = Primitive("where")


def _where_jvp(primals, tangents):
    cond, x, y = primals
    ans = where_p.bind(cond, x, y)
    _, t_x, t_y = tangents
    if type(t_x) is Zero and type(t_y) is Zero:
        return ans, Zero(aval(ans))
    zero = np.zeros((), aval(ans).dtype)
    t_x = zero if type(t_x) is Zero else t_x
    t_y = zero if type(t_y) is Zero else t_y
    return ans, where_p.bind(cond, t_x, t_y)


def _where_transpose(ct, cond, x, y):
    zero = np.zeros((), aval(ct).dtype)
    ct_x = unbroadcast(where_p.bind(cond, ct, zero), x.aval) if type(x) is Undefined else None
    ct_y = unbroadcast(where_p.bind(cond, zero, ct), y.aval) if type(y) is Undefined else None
    return None, ct_x, ct_y


register(where_p, impl=np.where, abstract_eval=elementwise_abstract_eval(np.where),
         jvp=_where_jvp, transpose=_where_transpose, batch=elementwise_batch(where_p),
         symbolic_zeros=True, linear_in=(1, 2), elementwise=True,
         hooks=with_arithmetic_derivative(), role="where")


# -- clip(x, lo, hi) --------------------------------------------------------------------------

clip_p = Primitive("clip")


def _clip_masks(x, lo, hi):
    # Which input the output is, as np.clip = minimum(maximum(x, lo), hi) decides: x at the
    # bounds (ties go to x, as in torch.clamp), hi everywhere when lo > hi.
    return (x >= lo) & (x <= hi), (x < lo) & (lo <= hi), (x > hi) | (lo > hi)


def _clip_jvp(primals, tangents):
    x, lo, hi = primals
    ans = clip_p.bind(x, lo, hi)
    t_out = Zero(aval(ans))
    zero = np.zeros((), aval(ans).dtype)
    for t, mask in zip(tangents, _clip_masks(x, lo, hi)):
        if type(t) is not Zero:
            term = np.where(mask, t, zero)
            t_out = term if type(t_out) is Zero else t_out + term
    return ans, t_out


def _clip_vjp(primals, ans, ct):
    zero = np.zeros((), aval(ct).dtype)
    return tuple(
        unbroadcast(np.where(mask, ct, zero), aval(v)) if aval(v).dtype.kind in "fc" else None
        for v, mask in zip(primals, _clip_masks(*primals)))


register(clip_p, impl=np.clip, abstract_eval=elementwise_abstract_eval(np.clip),
         jvp=_clip_jvp, vjp=_clip_vjp, batch=elementwise_batch(clip_p), symbolic_zeros=True,
         elementwise=True, hooks=with_arithmetic_derivative())


__all__ = ["COMPARE_PRIMITIVES", "clip_p", "where_p"]
