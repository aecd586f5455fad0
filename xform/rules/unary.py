"""One-input element-wise primitives: the math ufuncs, dtype conversion and the real and
imaginary parts of complex values."""
import math
import operator

import numpy as np

from xform.ir.avals import ShapedArray, is_differentiable
from xform.ir.core import Primitive
from xform.ir.ad import Zero, aval, zero_tangent
from xform.ir.registry import Hooks, ScalarMath, register
from xform.rules.helpers import (defvjp, elementwise_abstract_eval, elementwise_rules,
                                 with_arithmetic_derivative,
                                 linear_jvp, vectorized_batch, zero_derivative)

UNARY_PRIMITIVES = {}


def _unary(ufunc, derivative=None, *, linear=False, zero=False, cotangent=None, jvp=None,
           vjp=None, arithmetic=False, **traits):
    """The primitive of `ufunc`. `derivative(t, x, ans)` is its jvp term and, applied to a
    cotangent, its vjp term (a diagonal Jacobian; multiplication by f'(x) for a holomorphic
    f); `cotangent` is the vjp term where that does not hold (abs of complex values); `jvp`
    and `vjp` replace whole rules; `arithmetic`: the derivative is arithmetic on `x`
    (Hooks.arithmetic_derivative, so is a zero or linear one)."""
    prim = Primitive(ufunc.__name__)
    if zero or linear or arithmetic:
        traits["hooks"] = with_arithmetic_derivative(traits.get("hooks"))
    if zero:
        rules = zero_derivative(prim)
    else:
        rules = elementwise_rules(prim, derivative)
    if cotangent is not None:
        rules["vjp"] = defvjp(cotangent)
    if jvp is not None:
        rules["jvp"] = jvp(prim)
    if vjp is not None:
        rules["vjp"] = vjp
    if linear:
        rules["transpose"] = lambda ct, x: (derivative(ct, x, ans=None),)
    register(prim, impl=ufunc, abstract_eval=elementwise_abstract_eval(ufunc), **rules,
             batch=vectorized_batch(prim), symbolic_zeros=True, elementwise=True,
             role=ufunc.__name__, **traits)
    UNARY_PRIMITIVES[ufunc.__name__] = prim
    return prim


def _is_complex(x) -> bool:
    return aval(x).dtype.kind == "c"


def _nonzero(r):
    # |x| with zeros replaced by 1: abs's derivative is then 0 at x == 0 (conj(x) vanishes
    # there), as in JAX and autograd, rather than nan.
    return np.where(r == 0, 1, r)


def _inverse_or_zero(r):
    return np.where(r == 0, 0, 1 / _nonzero(r))


# Complex inputs: a holomorphic function's rule `t * f'(x)` serves both its jvp and (as `ct *
# f'(x)`) its vjp, since cotangents pair with tangents by Re(sum(ct * t)), as in JAX and
# autograd. abs and sign are not holomorphic: their jvp and vjp differ.

def _abs_derivative(t, x, ans):
    if _is_complex(x):   # d|x| = Re(conj(x) dx) / |x|
        return np.real(t * np.conjugate(x)) / _nonzero(ans)
    return t * np.sign(x)


def _abs_cotangent(ct, x, ans):
    if _is_complex(x):
        return ct * np.conjugate(x) / _nonzero(ans)
    return ct * np.sign(x)


def _sign_jvp(prim):
    # sign(x) = x / |x| for complex x (numpy 2) varies along the circle; real sign is flat.
    def rule(primals, tangents):
        (x,), (t,) = primals, tangents
        ans = prim.bind(x)
        if not _is_complex(x):
            return ans, zero_tangent(aval(ans))
        return ans, (t - ans * np.real(np.conjugate(ans) * t)) * _inverse_or_zero(np.absolute(x))
    return rule


def _sign_vjp(primals, ans, ct):
    (x,) = primals
    if not _is_complex(x):
        return (None,)
    return ((ct - np.real(ct * ans) * np.conjugate(ans)) * _inverse_or_zero(np.absolute(x)),)


def _arccosh_derivative(t, x, ans):
    if _is_complex(x):   # 1 / sqrt(x*x - 1) has the wrong sign where Re(x) < 0
        return t / (np.sqrt(x - 1) * np.sqrt(x + 1))
    return t / np.sqrt(x * x - 1)


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
arccosh_p = _unary(np.arccosh, _arccosh_derivative,
                   scalar_math=ScalarMath(math.acosh))
arctanh_p = _unary(np.arctanh, lambda t, x, ans: t / (1 - x * x),
                   scalar_math=ScalarMath(math.atanh))
exp_p = _unary(np.exp, lambda t, x, ans: t * ans, scalar_math=ScalarMath(math.exp))
exp2_p = _unary(np.exp2, lambda t, x, ans: t * (ans * _LN2), scalar_math=ScalarMath(math.exp2))
expm1_p = _unary(np.expm1, lambda t, x, ans: t * (ans + 1), scalar_math=ScalarMath(math.expm1))
log_p = _unary(np.log, lambda t, x, ans: t / x, scalar_math=ScalarMath(math.log),
               hooks=Hooks(inverted_by=exp_p))
log2_p = _unary(np.log2, lambda t, x, ans: t / (x * _LN2), scalar_math=ScalarMath(math.log2))
log10_p = _unary(np.log10, lambda t, x, ans: t / (x * _LN10), scalar_math=ScalarMath(math.log10))
log1p_p = _unary(np.log1p, lambda t, x, ans: t / (1 + x), scalar_math=ScalarMath(math.log1p))
sqrt_p = _unary(np.sqrt, lambda t, x, ans: t / (2 * ans),
                scalar_math=ScalarMath(math.sqrt, exact=True))
cbrt_p = _unary(np.cbrt, lambda t, x, ans: t / (3 * ans * ans), scalar_math=ScalarMath(math.cbrt))
square_p = _unary(np.square, lambda t, x, ans: t * (2 * x), arithmetic=True,
                  scalar_math=ScalarMath(lambda a: a * a, "{0} * {0}", exact=True, monotone=(0,)))
reciprocal_p = _unary(np.reciprocal, lambda t, x, ans: -t * (ans * ans), arithmetic=True)
negative_p = _unary(np.negative, lambda t, x, ans: -t, linear=True,
                    scalar_math=ScalarMath(operator.neg, "-{0}", exact=True, monotone=(0,)))
positive_p = _unary(np.positive, lambda t, x, ans: +t, linear=True)
absolute_p = _unary(np.absolute, _abs_derivative, cotangent=_abs_cotangent, arithmetic=True,
                    scalar_math=ScalarMath(math.fabs, exact=True))
sign_p = _unary(np.sign, jvp=_sign_jvp, vjp=_sign_vjp, arithmetic=True)
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
fabs_p = _unary(np.fabs, lambda t, x, ans: t * np.sign(x), arithmetic=True,
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


def _cast_linear(t, dtype):
    """`t` as `dtype` for a tangent or cotangent: complex -> real keeps the real part (the
    transpose of the embedding of the reals, without numpy's ComplexWarning)."""
    if aval(t).dtype.kind == "c" and dtype.kind != "c":
        t = real_p.bind(t)
    return t if aval(t).dtype == dtype else convert_p.bind(t, dtype=dtype)


def _convert_jvp(primals, tangents, *, dtype):
    ans = convert_p.bind(primals[0], dtype=dtype)
    t = tangents[0]
    out_aval = aval(ans)
    if type(t) is Zero or not is_differentiable(out_aval):
        return ans, zero_tangent(out_aval)
    return ans, _cast_linear(t, dtype)


def _convert_transpose(ct, x, *, dtype):
    return (_cast_linear(ct, x.aval.dtype),)


register(convert_p, impl=_convert_impl, abstract_eval=_convert_abstract_eval, jvp=_convert_jvp,
         transpose=_convert_transpose, batch=vectorized_batch(convert_p), symbolic_zeros=True,
         elementwise=True, hooks=with_arithmetic_derivative())


# -- real and imag parts of complex values (numpy's functions return real values as they are) -

def _part_abstract_eval(x):
    return ShapedArray(x.shape, np.empty(0, x.dtype).real.dtype)


def _complex_part(name, impl, to_complex):
    """A primitive taking a part of a complex value; real-linear, its transpose embeds the
    (real) cotangent back as `to_complex(ct)`: Re(ct * Re(t)) = Re(ct * t) and
    ct * Im(t) = Re(-1j * ct * t)."""
    prim = Primitive(name)

    def transpose(ct, x):
        ct = to_complex(ct)
        return (ct if aval(ct).dtype == x.aval.dtype else convert_p.bind(ct, dtype=x.aval.dtype),)
    register(prim, impl=impl, abstract_eval=_part_abstract_eval, jvp=linear_jvp(prim),
             transpose=transpose, batch=vectorized_batch(prim), symbolic_zeros=True,
             elementwise=True, linear_in=(0,), hooks=with_arithmetic_derivative())
    return prim


real_p = _complex_part("real", np.real, lambda ct: ct)
imag_p = _complex_part("imag", np.imag, lambda ct: ct * -1j)


# -- stop_gradient: the identity with a zero derivative ------------------------------------

stop_gradient_p = Primitive("stop_gradient")
register(stop_gradient_p, impl=lambda x: x, abstract_eval=lambda x: x,
         **zero_derivative(stop_gradient_p), batch=vectorized_batch(stop_gradient_p),
         symbolic_zeros=True, elementwise=True, hooks=with_arithmetic_derivative())


def stop_gradient(x):
    """`x`, with no derivative flowing through it (JAX's `lax.stop_gradient`), leaf-wise.

    >>> xform.grad(lambda x: x * xform.stop_gradient(x))(3.0)    # not 2 * x
    np.float64(3.0)
    """
    from xform.tree import tree_map
    return tree_map(stop_gradient_p.bind, x)
