"""Comparisons, logical and bitwise ops (zero derivative), `where` and `clip`."""
import numpy as np

from xform.errors import TypeCheckError
from xform.ir.core import Primitive
from xform.source_info import user_frame_info
from xform.ir.tracer import _concretization, _unsupported, implements
from xform.ir.ad import Undefined, Zero, aval
from xform.rules.helpers import define_op, elementwise_abstract_eval, elementwise_batch, unbroadcast, zero_derivative
from xform.ir.rules import register
from xform.rules.unary import astype

COMPARE_PRIMITIVES = {}

for _ufunc in (np.less, np.less_equal, np.greater, np.greater_equal, np.equal, np.not_equal,
               np.logical_and, np.logical_or, np.logical_xor, np.bitwise_and, np.bitwise_or,
               np.bitwise_xor, np.left_shift, np.right_shift):
    _prim = Primitive(_ufunc.__name__)
    define_op(_prim, _ufunc)
    register(_prim, impl=_ufunc, abstract_eval=elementwise_abstract_eval(_ufunc),
             **zero_derivative(_prim), batch=elementwise_batch(_prim), symbolic_zeros=True,
             elementwise=True)
    COMPARE_PRIMITIVES[_ufunc.__name__] = _prim


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
         symbolic_zeros=True, elementwise=True)


@implements(np.where)
def where(condition, x=None, y=None):
    """`np.where(c, x, y)`; the one-argument form needs concrete values."""
    if (x is None) != (y is None):
        raise TypeCheckError("np.where: either both or neither of x and y should be given",
                             user_frame_info())
    if x is None:
        raise _concretization("np.where(condition) with one argument (its size depends on data)")
    return where_p.bind(condition, x, y)


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
         elementwise=True)


@implements(np.clip)
def clip(a, a_min=None, a_max=None, out=None, **kwargs):
    """`np.clip`; a missing bound is a plain maximum/minimum, no bound np.positive, as in
    numpy."""
    if out is not None:
        raise _unsupported("numpy.clip(..., out=...)")
    a_min = kwargs.pop("min", a_min)
    a_max = kwargs.pop("max", a_max)
    if kwargs:
        raise _unsupported(f"numpy.clip(..., {', '.join(kwargs)}=...)")
    # numpy takes `a` as an array: a Python scalar is not weakly typed there
    a = astype(a, aval(a).dtype)
    if a_min is None and a_max is None:
        return np.positive(a)
    if a_min is None:
        return np.minimum(a, a_max)
    if a_max is None:
        return np.maximum(a, a_min)
    return clip_p.bind(a, a_min, a_max)
