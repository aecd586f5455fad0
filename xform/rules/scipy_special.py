"""SciPy's special functions as element-wise primitives (gammaln, erf, iv, gammainc, ...)
with jvp, vjp and batch rules, and its reductions logsumexp, softmax and log_softmax.
Imports SciPy, so xform.scipy loads it only once the user has imported scipy.special, never
`import xform`. Arguments SciPy has no derivative in (an order, an exponent, a shape) get a
NaN derivative (`_no_derivative`), except gammainc's and gammaincc's shape
(xform.rules.incomplete_gamma).
"""
import math

import numpy as np
import scipy.special as sc

from xform.ir.ad import NOT_MAPPED, move_to_front
from xform.ir.avals import ShapedArray
from xform.ir.core import Primitive
from xform.ir.registry import register
from xform.rules.incomplete_gamma import gammainc_da, gammainc_da2
from xform.rules.helpers import (defjvp, elementwise_abstract_eval, elementwise_batch,
                                 elementwise_rules, vectorized_batch)

SCIPY_SPECIAL_PRIMITIVES = {}  # name (scipy.special's, or riemann_zeta) -> primitive


def _elementwise(name, impl, *derivatives):
    prim = Primitive(name)
    batch = vectorized_batch(prim) if len(derivatives) == 1 else elementwise_batch(prim)
    register(prim, impl=impl, abstract_eval=elementwise_abstract_eval(impl),
             **elementwise_rules(prim, *derivatives), batch=batch, symbolic_zeros=True,
             elementwise=True)
    return prim


def _special(name, impl, *derivatives):
    prim = _elementwise(name, impl, *derivatives)
    SCIPY_SPECIAL_PRIMITIVES[name] = prim
    return prim


def _no_derivative(t, *primals, ans):
    """The derivative part of an argument SciPy has no derivative in: NaN wherever its
    tangent (or cotangent) is nonzero. Not an error, because a rule cannot tell a tangent the
    user asked for from the traced zero that jacfwd or hessian sends for an argument they
    differentiate nothing in; not zero, which would be silently wrong."""
    return t * np.where(t == 0, 0.0, np.nan)


# Rule bodies bind primitives rather than call SciPy on tracers: they also run where no
# stand-in is in place (transforms of staged graphs) and before the ufunc table is filled.
def _digamma(x):
    return digamma_p.bind(x)


def _gammaln(x):
    return gammaln_p.bind(x)


def _xlogy(x, y):
    return xlogy_p.bind(x, y)


_SQRT_PI = math.sqrt(math.pi)
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)

gammaln_p = _special("gammaln", sc.gammaln, lambda t, x, ans: t * _digamma(x))
gamma_p = _special("gamma", sc.gamma, lambda t, x, ans: t * (ans * _digamma(x)))
rgamma_p = _special("rgamma", sc.rgamma, lambda t, x, ans: t * (-ans * _digamma(x)))
# psi is digamma; polygamma is a Python function in SciPy, staged through a stand-in
digamma_p = _special("digamma", sc.digamma, lambda t, x, ans: t * polygamma_p.bind(1, x))
polygamma_p = _special("polygamma", sc.polygamma, _no_derivative,
                       lambda t, n, x, ans: t * polygamma_p.bind(n + 1, x))
erf_p = _special("erf", sc.erf, lambda t, x, ans: t * (2 / _SQRT_PI * np.exp(-x * x)))
erfc_p = _special("erfc", sc.erfc, lambda t, x, ans: t * (-2 / _SQRT_PI * np.exp(-x * x)))
erfinv_p = _special("erfinv", sc.erfinv,
                    lambda t, x, ans: t * (_SQRT_PI / 2 * np.exp(ans * ans)))
erfcinv_p = _special("erfcinv", sc.erfcinv,
                     lambda t, x, ans: t * (-_SQRT_PI / 2 * np.exp(ans * ans)))
expit_p = _special("expit", sc.expit, lambda t, x, ans: t * (ans * (1 - ans)))
logit_p = _special("logit", sc.logit, lambda t, x, ans: t / (x * (1 - x)))
log_expit_p = _special("log_expit", sc.log_expit, lambda t, x, ans: t * expit_p.bind(-x))
ndtr_p = _special("ndtr", sc.ndtr, lambda t, x, ans: t * np.exp(-0.5 * x * x - _LOG_SQRT_2PI))
# the normal density over the cdf, in logs: no 0/0 far in the left tail
log_ndtr_p = _special("log_ndtr", sc.log_ndtr,
                      lambda t, x, ans: t * np.exp(-0.5 * x * x - _LOG_SQRT_2PI - ans))
ndtri_p = _special("ndtri", sc.ndtri,
                   lambda t, x, ans: t * np.exp(0.5 * ans * ans + _LOG_SQRT_2PI))
entr_p = _special("entr", sc.entr, lambda t, x, ans: t * -(np.log(x) + 1))
xlogy_p = _special("xlogy", sc.xlogy, lambda t, x, y, ans: t * np.log(y),
                   lambda t, x, y, ans: t * (x / y))
xlog1py_p = _special("xlog1py", sc.xlog1py, lambda t, x, y, ans: t * np.log1p(y),
                     lambda t, x, y, ans: t * (x / (1 + y)))
rel_entr_p = _special("rel_entr", sc.rel_entr, lambda t, x, y, ans: t * (np.log(x / y) + 1),
                      lambda t, x, y, ans: t * (-x / y))
kl_div_p = _special("kl_div", sc.kl_div, lambda t, x, y, ans: t * np.log(x / y),
                    lambda t, x, y, ans: t * (1 - x / y))


def _beta_share(t, a, b, scale):
    return t * (scale * (_digamma(a) - _digamma(a + b)))


betaln_p = _special("betaln", sc.betaln, lambda t, a, b, ans: _beta_share(t, a, b, 1),
                    lambda t, a, b, ans: _beta_share(t, b, a, 1))
beta_p = _special("beta", sc.beta, lambda t, a, b, ans: _beta_share(t, a, b, ans),
                  lambda t, a, b, ans: _beta_share(t, b, a, ans))


def _riemann_zeta(x):
    return sc.zeta(x)


# Hurwitz zeta(s, q), d/dq = -s zeta(s + 1, q); Riemann's zeta(x) has no derivative in SciPy
zeta_p = _special("zeta", sc.zeta, _no_derivative,
                  lambda t, s, q, ans: t * (-s * zeta_p.bind(s + 1, q)))
riemann_zeta_p = _special("riemann_zeta", _riemann_zeta, _no_derivative)

# Bessel functions: d/dx I_v = (I_{v-1} + I_{v+1}) / 2, d/dx J_v = (J_{v-1} - J_{v+1}) / 2, and
# Y_v as J_v; the exponentially scaled ive(v, x) = iv(v, x) exp(-|x|) adds -sign(x) ive.
iv_p = _special("iv", sc.iv, _no_derivative,
                lambda t, v, x, ans: t * ((iv_p.bind(v - 1, x) + iv_p.bind(v + 1, x)) / 2))
ive_p = _special("ive", sc.ive, _no_derivative,
                 lambda t, v, x, ans: t * ((ive_p.bind(v - 1, x) + ive_p.bind(v + 1, x)) / 2
                                           - np.sign(x) * ans))
jv_p = _special("jv", sc.jv, _no_derivative,
                lambda t, v, x, ans: t * ((jv_p.bind(v - 1, x) - jv_p.bind(v + 1, x)) / 2))
yv_p = _special("yv", sc.yv, _no_derivative,
                lambda t, v, x, ans: t * ((yv_p.bind(v - 1, x) - yv_p.bind(v + 1, x)) / 2))
i0_p = _special("i0", sc.i0, lambda t, x, ans: t * i1_p.bind(x))
# I_2 as ive(2, x) e^|x|: SciPy's iv(2, x) is NaN at subnormal x, ive is not
i1_p = _special("i1", sc.i1, lambda t, x, ans: t * ((i0_p.bind(x) + ive_p.bind(2, x)
                                                     * np.exp(np.abs(x))) / 2))
i0e_p = _special("i0e", sc.i0e, lambda t, x, ans: t * (i1e_p.bind(x) - np.sign(x) * ans))
i1e_p = _special("i1e", sc.i1e, lambda t, x, ans: t * ((i0e_p.bind(x) + ive_p.bind(2, x)) / 2
                                                       - np.sign(x) * ans))
j0_p = _special("j0", sc.j0, lambda t, x, ans: t * -j1_p.bind(x))
j1_p = _special("j1", sc.j1, lambda t, x, ans: t * ((j0_p.bind(x) - jv_p.bind(2, x)) / 2))
y0_p = _special("y0", sc.y0, lambda t, x, ans: t * -y1_p.bind(x))
y1_p = _special("y1", sc.y1, lambda t, x, ans: t * ((y0_p.bind(x) - yv_p.bind(2, x)) / 2))


# Regularized incomplete gamma and beta functions, Student's t cdf: differentiable in the
# integration limit, by its density; SciPy has no derivative in the shapes.
def _gamma_density(a, x):
    return np.exp(_xlogy(a - 1, x) - x - _gammaln(a))


def _t_density(df, x):
    return np.exp(_gammaln((df + 1) / 2) - _gammaln(df / 2) - 0.5 * np.log(df * math.pi)
                  - (df + 1) / 2 * np.log1p(x * x / df))


def _beta_density(a, b, x):
    return np.exp(_xlogy(a - 1, x) + xlog1py_p.bind(b - 1, -x) - betaln_p.bind(a, b))


# P's first and second derivatives in a (SciPy has none) are primitives of their own; in x
# theirs are the density's in a; the third in a is NaN
gammainc_da2_p = _elementwise(
    "gammainc_da2", gammainc_da2, _no_derivative,
    lambda t, a, x, ans: t * _gamma_density(a, x)
    * ((np.log(x) - _digamma(a)) ** 2 - polygamma_p.bind(1, a)))
gammainc_da_p = _elementwise("gammainc_da", gammainc_da,
                             lambda t, a, x, ans: t * gammainc_da2_p.bind(a, x),
                             lambda t, a, x, ans: t * _gamma_density(a, x)
                             * (np.log(x) - _digamma(a)))
gammainc_p = _special("gammainc", sc.gammainc, lambda t, a, x, ans: t * gammainc_da_p.bind(a, x),
                      lambda t, a, x, ans: t * _gamma_density(a, x))
gammaincc_p = _special("gammaincc", sc.gammaincc,
                       lambda t, a, x, ans: t * -gammainc_da_p.bind(a, x),
                       lambda t, a, x, ans: t * -_gamma_density(a, x))
stdtr_p = _special("stdtr", sc.stdtr, _no_derivative,
                   lambda t, df, x, ans: t * _t_density(df, x))
betainc_p = _special("betainc", sc.betainc, _no_derivative, _no_derivative,
                     lambda t, a, b, x, ans: t * _beta_density(a, b, x))
betaincc_p = _special("betaincc", sc.betaincc, _no_derivative, _no_derivative,
                      lambda t, a, b, x, ans: t * -_beta_density(a, b, x))


# -- scipy.special's reductions: logsumexp, softmax, log_softmax -----------------------------
# Each impl is SciPy's own function, so that compiled code computes SciPy's bits (SciPy
# separates the largest term out of logsumexp's sum, which a composition would round
# differently). `axis` is SciPy's: None or a tuple; the batch rule makes it a tuple.

def _reduced(shape, axis, keepdims):
    axes = tuple(range(len(shape))) if axis is None else axis
    return tuple(1 if i in axes else n for i, n in enumerate(shape)) if keepdims else \
        tuple(n for i, n in enumerate(shape) if i not in axes)


def _keep(x, axis, ans, keepdims):
    """`ans` of a reduction over `axis` of x, with the reduced axes kept (length 1)."""
    return ans if keepdims else np.reshape(ans, _reduced(np.shape(x), axis, True))


def _scipy_abstract_eval(fn, out_shape):
    probes = {}     # (operands' ranks and dtypes, params) -> the probe's (shape, dtype)

    def abstract_eval(*xs, **params):
        key = (tuple((x.ndim, x.dtype) for x in xs), tuple(sorted(params.items())))
        found = probes.get(key)
        if found is None:
            # the dtype SciPy returns, from one-element arrays of the operands' rank (SciPy's
            # wrappers cost ~0.1 ms a call: once per kind of operands)
            probe = np.asarray(fn(*(np.zeros((1,) * x.ndim, x.dtype) for x in xs), **params))
            found = probes[key] = probe.shape, probe.dtype
        # (SciPy makes a 0-d input 1-d first, which keepdims then keeps)
        shape = out_shape(xs[0].shape, **params) if xs[0].ndim else found[0]
        return ShapedArray(shape, found[1])
    return abstract_eval


def _axis_batch(prim):
    def batch(size, args, dims, **params):
        args = [np.broadcast_to(x, (size, *np.shape(x))) if dim is NOT_MAPPED else
                move_to_front(x, dim, size) for x, dim in zip(args, dims)]
        axis = params["axis"]
        params["axis"] = tuple(range(1, args[0].ndim)) if axis is None else \
            tuple(a + 1 for a in axis)
        return prim.bind(*args, **params), 0
    return batch


scipy_logsumexp_p = Primitive("scipy_logsumexp")
"""scipy.special.logsumexp(a, axis, b=b, keepdims): its value (without the sign when
`return_sign`, which keeps log|sum| where the sum is negative); `b`, when given, has a's
shape."""
scipy_softmax_p = Primitive("scipy_softmax")
scipy_log_softmax_p = Primitive("scipy_log_softmax")


def _logsumexp_impl(a, *b, axis, keepdims, return_sign):
    out = sc.logsumexp(a, axis=axis, b=b[0] if b else None, keepdims=keepdims,
                       return_sign=return_sign)
    return out[0] if return_sign else out


def logsumexp_sign(a, b, out, axis, keepdims):
    """The sign of sum(b exp(a)) over `axis`, from logsumexp's value `out` = log|sum|."""
    return np.sign(np.sum(b * np.exp(a - _keep(a, axis, out, keepdims)), axis=axis,
                          keepdims=keepdims))


def _logsumexp_weights(a, b, ans, axis, keepdims):
    """d logsumexp / d (b exp(a)) per element: exp(a - ans), times the sum's sign."""
    weights = np.exp(a - _keep(a, axis, ans, keepdims))
    if not b:
        return weights
    return weights * _keep(a, axis, logsumexp_sign(a, b[0], ans, axis, keepdims), keepdims)


def _softmax_jvp(s, t, axis):
    return s * (t - np.sum(s * t, axis=axis, keepdims=True))


def _logsumexp_vjp(primals, ans, ct, *, axis, keepdims, return_sign):
    # the jvp's transpose, from the value computed already (a vjp through linearization
    # would compute SciPy's logsumexp again)
    a, *b = primals
    ct_weights = _keep(a, axis, ct, keepdims) * _logsumexp_weights(a, b, ans, axis, keepdims)
    return [ct_weights * b[0], ct_weights] if b else [ct_weights]


register(scipy_logsumexp_p, impl=_logsumexp_impl,
         abstract_eval=_scipy_abstract_eval(
             _logsumexp_impl, lambda shape, axis, keepdims, return_sign:
             _reduced(shape, axis, keepdims)),
         vjp=_logsumexp_vjp,
         jvp=defjvp(scipy_logsumexp_p,
                    lambda t, a, *b, ans, axis, keepdims, return_sign: np.sum(
                        t * (b[0] if b else 1) * _logsumexp_weights(a, b, ans, axis, keepdims),
                        axis=axis, keepdims=keepdims),
                    lambda t, a, b, ans, axis, keepdims, return_sign: np.sum(
                        t * _logsumexp_weights(a, (b,), ans, axis, keepdims), axis=axis,
                        keepdims=keepdims)),
         batch=_axis_batch(scipy_logsumexp_p), symbolic_zeros=True)
register(scipy_softmax_p, impl=sc.softmax,
         abstract_eval=_scipy_abstract_eval(sc.softmax, lambda shape, axis: shape),
         jvp=defjvp(scipy_softmax_p, lambda t, x, *, ans, axis: _softmax_jvp(ans, t, axis)),
         batch=_axis_batch(scipy_softmax_p), symbolic_zeros=True)
register(scipy_log_softmax_p, impl=sc.log_softmax,
         abstract_eval=_scipy_abstract_eval(sc.log_softmax, lambda shape, axis: shape),
         jvp=defjvp(scipy_log_softmax_p, lambda t, x, *, ans, axis:
                    t - np.sum(np.exp(ans) * t, axis=axis, keepdims=True)),
         batch=_axis_batch(scipy_log_softmax_p), symbolic_zeros=True)
