"""Two-input element-wise primitives with numpy broadcasting: arithmetic and its relatives."""
import operator

import numpy as np

from xform.ir.core import Primitive
from xform.ir.ad import Undefined, aval
from xform.ir.registry import Hooks, ScalarMath, register
from xform.ir.tracer import Tracer
from xform.rules.helpers import (elementwise_abstract_eval, elementwise_batch, elementwise_rules,
                                 with_arithmetic_derivative, unbroadcast, zero_derivative)

BINARY_PRIMITIVES = {}


def _binary(ufunc, dx=None, dy=None, *, transpose=None, zero=False, arithmetic=False,
            **traits):
    """The primitive of `ufunc`; `arithmetic`: its derivative is arithmetic on its operands
    (Hooks.arithmetic_derivative, so is a zero one)."""
    prim = Primitive(ufunc.__name__)
    if zero or arithmetic:
        traits["hooks"] = with_arithmetic_derivative(traits.get("hooks"))
    rules = zero_derivative(prim) if zero else elementwise_rules(prim, dx, dy)
    if transpose is not None:
        rules["transpose"] = transpose
    register(prim, impl=ufunc, abstract_eval=elementwise_abstract_eval(ufunc), **rules,
             batch=elementwise_batch(prim), symbolic_zeros=True, elementwise=True,
             role=ufunc.__name__, **traits)
    BINARY_PRIMITIVES[ufunc.__name__] = prim
    return prim


def _linear_transpose(sign_y):
    def transpose(ct, x, y):
        ct_x = unbroadcast(ct, x.aval) if type(x) is Undefined else None
        ct_y = None
        if type(y) is Undefined:
            ct_y = unbroadcast(ct if sign_y > 0 else -ct, y.aval)
        return ct_x, ct_y
    return transpose


def _multiply_transpose(ct, x, y):
    if type(x) is Undefined:
        return unbroadcast(ct * y, x.aval), None
    return None, unbroadcast(x * ct, y.aval)


def _divide_transpose(ct, x, y):
    return unbroadcast(ct / y, x.aval), None


def _power_dy(t, x, y, ans):
    # A real base of a complex power is complex there (log(-2) = log(2) + i pi), not nan.
    if aval(ans).dtype.kind == "c" and aval(x).dtype.kind != "c":
        x = x.astype(aval(ans).dtype)
    return t * (ans * _safe_log(x))


def _safe_log(x):
    # d(x**y)/dy at x == 0 is 0 (JAX's choice), not 0 * -inf = nan: log(1) = 0 there.
    return np.log(np.where(x == 0, 1, x))


def _power_dx(t, x, y, ans):
    # y * x**(y-1), except that x**0 has derivative 0 at x == 0 too: there the base is 1, so
    # the result is 0 * 1 rather than 0 * inf, and so are its own derivatives (no nan is
    # computed and then masked, which would leak into reverse mode). Constant exponents
    # that are never 0 (x ** 2) skip the mask.
    if type(y) is int or type(y) is float:
        never_zero = y != 0     # (np.any's dispatch costs 20x the comparison)
    else:
        never_zero = isinstance(y, (np.generic, np.ndarray)) and not np.any(y == 0)
    if never_zero:
        return t * (y * np.power(x, y - 1))
    return t * (y * np.power(np.where((x == 0) & (y == 0), 1, x), y - 1))


def _select_mask(x, y, ans):
    # Ties share the derivative equally, as autograd's balanced_eq does.
    mask = np.where(x == ans, 1.0, 0.0) / np.where(x == y, 2.0, 1.0)
    return mask.astype(aval(ans).dtype)


def _logaddexp_share(x, y, ans, exp):
    # exp(x - ans), the share of x in the sum. Where ans is infinite that would be
    # exp(inf - inf) = nan, which poisons log-space code padded with -inf: there the input
    # equal to ans takes the whole share, and a tie splits it (the limit along x == y).
    finite = np.isfinite(ans)
    if type(finite) is not Tracer and finite.all():
        # values with no infinity (a first call's): the same bits, without the masks
        return exp(np.asarray(x) - ans)
    share = exp(np.where(finite, x, 0) - np.where(finite, ans, 0))
    return np.where(finite, share, _select_mask(x, y, ans))


add_p = _binary(np.add, lambda t, x, y, ans: t, lambda t, x, y, ans: t,
                transpose=_linear_transpose(+1), arithmetic=True,
                scalar_math=ScalarMath(operator.add, "{0} + {1}", exact=True, monotone=(0, 1)),
                hooks=Hooks(identity=-0.0, commutative=True, casts_operands=True))
subtract_p = _binary(np.subtract, lambda t, x, y, ans: t, lambda t, x, y, ans: -t,
                     transpose=_linear_transpose(-1), arithmetic=True,
                     scalar_math=ScalarMath(operator.sub, "{0} - {1}", exact=True,
                                            monotone=(0, 1)),
                     hooks=Hooks(identity=0.0, casts_operands=True, equal_operands=0))
multiply_p = _binary(np.multiply, lambda t, x, y, ans: t * y, lambda t, x, y, ans: x * t,
                     transpose=_multiply_transpose, arithmetic=True,
                     scalar_math=ScalarMath(operator.mul, "{0} * {1}", exact=True,
                                            monotone=(0, 1)),
                     hooks=Hooks(identity=1, commutative=True, casts_operands=True))
divide_p = _binary(np.true_divide, lambda t, x, y, ans: t / y,
                   lambda t, x, y, ans: -t * ans / y, transpose=_divide_transpose, arithmetic=True,
                   scalar_math=ScalarMath(operator.truediv, "{0} / {1}", exact=True,
                                          monotone=(0,)),
                   hooks=Hooks(casts_operands=True))
power_p = _binary(np.power, _power_dx, _power_dy, arithmetic=True,
                  hooks=Hooks(identity=1))
float_power_p = _binary(np.float_power, _power_dx, _power_dy, arithmetic=True)
maximum_p = _binary(np.maximum, lambda t, x, y, ans: t * _select_mask(x, y, ans),
                    lambda t, x, y, ans: t * _select_mask(y, x, ans), arithmetic=True)
minimum_p = _binary(np.minimum, lambda t, x, y, ans: t * _select_mask(x, y, ans),
                    lambda t, x, y, ans: t * _select_mask(y, x, ans), arithmetic=True)
fmax_p = _binary(np.fmax, lambda t, x, y, ans: t * _select_mask(x, y, ans),
                 lambda t, x, y, ans: t * _select_mask(y, x, ans), arithmetic=True)
fmin_p = _binary(np.fmin, lambda t, x, y, ans: t * _select_mask(x, y, ans),
                 lambda t, x, y, ans: t * _select_mask(y, x, ans), arithmetic=True)
arctan2_p = _binary(np.arctan2, lambda t, y, x, ans: t * x / (x * x + y * y),
                    lambda t, y, x, ans: -t * y / (x * x + y * y))
hypot_p = _binary(np.hypot, lambda t, x, y, ans: t * x / ans, lambda t, x, y, ans: t * y / ans)
logaddexp_p = _binary(np.logaddexp, lambda t, x, y, ans: t * _logaddexp_share(x, y, ans, np.exp),
                      lambda t, x, y, ans: t * _logaddexp_share(y, x, ans, np.exp))
logaddexp2_p = _binary(np.logaddexp2,
                       lambda t, x, y, ans: t * _logaddexp_share(x, y, ans, np.exp2),
                       lambda t, x, y, ans: t * _logaddexp_share(y, x, ans, np.exp2))
remainder_p = _binary(np.remainder, lambda t, x, y, ans: t,
                      lambda t, x, y, ans: -t * np.floor_divide(x, y))
fmod_p = _binary(np.fmod, lambda t, x, y, ans: t, lambda t, x, y, ans: -t * np.trunc(x / y))
floor_divide_p = _binary(np.floor_divide, zero=True)
copysign_p = _binary(np.copysign, lambda t, x, y, ans: t * np.sign(x) * np.sign(ans), None,
                     arithmetic=True)
