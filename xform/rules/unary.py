"""One-input element-wise primitives: the math ufuncs and dtype conversion."""
import math
import operator

import numpy as np

from xform.ir.avals import ShapedArray, is_differentiable
from xform.ir.core import Primitive
from xform.ir.ad import Zero, aval, zero_tangent
from xform.ir.rules import ScalarMath, register
from xform.rules.helpers import (elementwise_abstract_eval, elementwise_rules, vectorized_batch,
                                 zero_derivative)

UNARY_PRIMITIVES = {}


def _unary(ufunc, derivative=None, *, linear=False, zero=False, **traits):
    prim = Primitive(ufunc.__name__)
    if zero:
        rules = zero_derivative(prim)
    else:
        rules = elementwise_rules(prim, derivative)
    if linear:
        rules["transpose"] = lambda ct, x: (derivative(ct, x, ans=None),)
    register(prim, impl=ufunc, abstract_eval=elementwise_abstract_eval(ufunc), **rules,
             batch=vectorized_batch(prim), symbolic_zeros=True, elementwise=True, **traits)
    UNARY_PRIMITIVES[ufunc.__name__] = prim
    return prim


_LN2 = math.log(2.0)
_LN10 = math.log(10.0)

sin_p = _unary(np.sin, lambda t, x, ans: t * np.cos(x), scalar_math=ScalarMath(math.sin))
cos_p = _unary(np.cos, lambda t, x, ans: -t * np.sin(x), scalar_math=ScalarMath(math.cos))
tan_p = _unary(np.tan, lambda t, x, ans: t * (1 + ans * ans), scalar_math=ScalarMath(math.tan))
arcsin_p = _unary(np.arcsin, lambda t, x, ans: t / np.sqrt(1 - x * x),
                  scalar_math=ScalarMath(math.asin))
arccos_p = _unary(np.arccos, lambda t, x, ans: -t / np.sqrt(1 - x * x),
                  scalar_math=ScalarMath(math.acos))
arctan_p = _unary(np.arctan, lambda t, x, ans: t / (1 + x * x), scalar_math=ScalarMath(math.atan))
sinh_p = _unary(np.sinh, lambda t, x, ans: t * np.cosh(x), scalar_math=ScalarMath(math.sinh))
cosh_p = _unary(np.cosh, lambda t, x, ans: t * np.sinh(x), scalar_math=ScalarMath(math.cosh))
tanh_p = _unary(np.tanh, lambda t, x, ans: t * (1 - ans * ans), scalar_math=ScalarMath(math.tanh))
arcsinh_p = _unary(np.arcsinh, lambda t, x, ans: t / np.sqrt(x * x + 1),
                   scalar_math=ScalarMath(math.asinh))
arccosh_p = _unary(np.arccosh, lambda t, x, ans: t / np.sqrt(x * x - 1),
                   scalar_math=ScalarMath(math.acosh))
arctanh_p = _unary(np.arctanh, lambda t, x, ans: t / (1 - x * x),
                   scalar_math=ScalarMath(math.atanh))
exp_p = _unary(np.exp, lambda t, x, ans: t * ans, scalar_math=ScalarMath(math.exp))
exp2_p = _unary(np.exp2, lambda t, x, ans: t * (ans * _LN2), scalar_math=ScalarMath(math.exp2))
expm1_p = _unary(np.expm1, lambda t, x, ans: t * (ans + 1), scalar_math=ScalarMath(math.expm1))
log_p = _unary(np.log, lambda t, x, ans: t / x, scalar_math=ScalarMath(math.log))
log2_p = _unary(np.log2, lambda t, x, ans: t / (x * _LN2), scalar_math=ScalarMath(math.log2))
log10_p = _unary(np.log10, lambda t, x, ans: t / (x * _LN10), scalar_math=ScalarMath(math.log10))
log1p_p = _unary(np.log1p, lambda t, x, ans: t / (1 + x), scalar_math=ScalarMath(math.log1p))
sqrt_p = _unary(np.sqrt, lambda t, x, ans: t / (2 * ans),
                scalar_math=ScalarMath(math.sqrt, exact=True))
cbrt_p = _unary(np.cbrt, lambda t, x, ans: t / (3 * ans * ans), scalar_math=ScalarMath(math.cbrt))
square_p = _unary(np.square, lambda t, x, ans: t * (2 * x),
                  scalar_math=ScalarMath(lambda a: a * a, "{0} * {0}", exact=True, monotone=(0,)))
reciprocal_p = _unary(np.reciprocal, lambda t, x, ans: -t * (ans * ans))
negative_p = _unary(np.negative, lambda t, x, ans: -t, linear=True,
                    scalar_math=ScalarMath(operator.neg, "-{0}", exact=True, monotone=(0,)))
positive_p = _unary(np.positive, lambda t, x, ans: +t, linear=True)
absolute_p = _unary(np.absolute, lambda t, x, ans: t * np.sign(x),
                    scalar_math=ScalarMath(math.fabs, exact=True))
sign_p = _unary(np.sign, zero=True)
floor_p = _unary(np.floor, zero=True)
ceil_p = _unary(np.ceil, zero=True)
rint_p = _unary(np.rint, zero=True)
trunc_p = _unary(np.trunc, zero=True)
isnan_p = _unary(np.isnan, zero=True)
isfinite_p = _unary(np.isfinite, zero=True)
isinf_p = _unary(np.isinf, zero=True)
signbit_p = _unary(np.signbit, zero=True)
logical_not_p = _unary(np.logical_not, zero=True)
invert_p = _unary(np.invert, zero=True)
# fabs is not absolute: it computes in floating point (int64 -> float64, bool -> float16).
fabs_p = _unary(np.fabs, lambda t, x, ans: t * np.sign(x),
                scalar_math=ScalarMath(math.fabs, exact=True))
conjugate_p = _unary(np.conjugate, lambda t, x, ans: np.conjugate(t), linear=True)
deg2rad_p = _unary(np.deg2rad, lambda t, x, ans: t * (math.pi / 180), linear=True)
rad2deg_p = _unary(np.rad2deg, lambda t, x, ans: t * (180 / math.pi), linear=True)


# -- dtype conversion: linear between inexact dtypes, constant into integers -------------

convert_p = Primitive("convert")


def astype(x, dtype):
    """`x.astype(dtype)`, staged as one `convert` equation (none when the dtype is unchanged)."""
    dtype = np.dtype(dtype)
    if aval(x).dtype == dtype and not aval(x).weak_type:
        return x
    return convert_p.bind(x, dtype=dtype)


def _convert_impl(x, *, dtype):
    # A numpy scalar stays a scalar, as with numpy's own astype; Python scalars have none.
    return x.astype(dtype) if isinstance(x, (np.ndarray, np.generic)) else np.asarray(x, dtype)


def _convert_abstract_eval(x, *, dtype):
    return ShapedArray(x.shape, dtype)


def _convert_jvp(primals, tangents, *, dtype):
    ans = convert_p.bind(primals[0], dtype=dtype)
    t = tangents[0]
    out_aval = aval(ans)
    if type(t) is Zero or not is_differentiable(out_aval):
        return ans, zero_tangent(out_aval)
    return ans, convert_p.bind(t, dtype=dtype)


def _convert_transpose(ct, x, *, dtype):
    return (convert_p.bind(ct, dtype=x.aval.dtype),)


register(convert_p, impl=_convert_impl, abstract_eval=_convert_abstract_eval, jvp=_convert_jvp,
         transpose=_convert_transpose, batch=vectorized_batch(convert_p), symbolic_zeros=True,
         elementwise=True)


# -- stop_gradient: the identity with a zero derivative ------------------------------------

stop_gradient_p = Primitive("stop_gradient")
register(stop_gradient_p, impl=lambda x: x, abstract_eval=lambda x: x,
         **zero_derivative(stop_gradient_p), batch=vectorized_batch(stop_gradient_p),
         symbolic_zeros=True, elementwise=True)


def stop_gradient(x):
    """`x`, with no derivative flowing through it (JAX's `lax.stop_gradient`), leaf-wise.

    >>> xform.grad(lambda x: x * xform.stop_gradient(x))(3.0)    # not 2 * x
    np.float64(3.0)
    """
    from xform.tree import tree_map
    return tree_map(stop_gradient_p.bind, x)
