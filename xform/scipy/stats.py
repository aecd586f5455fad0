"""scipy.stats on tracers: densities, distribution functions and their logs written as
numpy + scipy.special compositions (as jax.scipy.stats does), so every derivative comes from
the primitives' rules. Stood in for the methods of rv_continuous and rv_discrete (dispatching
on the distribution's class), and of multivariate_normal and dirichlet with their frozen
forms. Imported by the installer in xform.scipy once the user has imported scipy.stats.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import scipy.special as sc
import scipy.stats as st
from scipy.stats._distn_infrastructure import rv_continuous, rv_discrete, rv_generic
from scipy.stats._multivariate import (dirichlet_frozen, dirichlet_gen,
                                       multivariate_normal_frozen, multivariate_normal_gen)

import xform.scipy.special  # noqa: F401  (the compositions below stage scipy.special ufuncs)
from xform.errors import ShapeError, UnsupportedError, XformError
from xform.ir.ad import aval
from xform.ir.tracer import Tracer
from xform.numpy.stand_ins import stand_in
from xform.source_info import user_frame_info

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
_LOG_2 = math.log(2.0)
_LOG_PI = math.log(math.pi)


def _float(x):
    """`x` in SciPy's working precision: float64 at least."""
    if type(x) is Tracer:
        dtype = np.promote_types(aval(x).dtype, np.float64)
        return x if aval(x).dtype == dtype else x.astype(dtype)
    return np.asarray(x, np.promote_types(np.asarray(x).dtype, np.float64))


def _inside(mask, z, safe):
    """`z` where `mask`, else the harmless `safe`: the formula evaluated off the support then
    has finite derivatives, which np.where would otherwise multiply by zero into NaN."""
    return np.where(mask, z, safe)


# No attrs classes here: the module is imported by a process's first staging after SciPy's
# import (xform.scipy), and an attrs class costs that call ~0.35 ms, a NamedTuple 0.07-0.23
# ms (its annotations are evaluated), a plain class ~0.015. The frozen distributions users
# get (below) stay NamedTuples, which flatten as tuples; this internal record is plain.
class Standard:
    """A location-scale family in its standard form: functions of `z = (x - loc) / scale`
    and the shape parameters. `logcdf`, `sf` and `logsf` default to the log or complement of
    `cdf`; `valid(*shapes)` says where SciPy's shape parameters are admissible. `ppf` (for
    q strictly inside (0, 1)) gives ppf and isf (isf(q) = ppf(1 - q), computed as `ppf(q,
    upper=True)` where 1 - q would lose digits); q = 0 and 1 map to the `support`'s ends.

    >>> import scipy.stats
    >>> from xform.scipy.stats import CONTINUOUS
    >>> float(CONTINUOUS[type(scipy.stats.logistic)].cdf(0.0))
    0.5
    """

    __slots__ = ("logpdf", "cdf", "logcdf", "sf", "logsf", "valid", "ppf", "support")

    def __init__(self, logpdf, cdf, logcdf=None, sf=None, logsf=None, valid=None):
        self.logpdf, self.cdf, self.logcdf, self.sf, self.logsf = logpdf, cdf, logcdf, sf, logsf
        self.valid = valid
        self.ppf = None     # the closed-form quantile function, where there is one (QUANTILES)
        self.support = (-math.inf, math.inf)


def _norm_logpdf(z):
    return -0.5 * z * z - _LOG_SQRT_2PI


def _t_logpdf(z, df):
    return (sc.gammaln((df + 1) / 2) - sc.gammaln(df / 2) - 0.5 * np.log(df * math.pi)
            - (df + 1) / 2 * np.log1p(z * z / df))


def _gamma_logpdf(z, a):
    zs = _inside(z >= 0, z, 1.0)
    return np.where(z >= 0, sc.xlogy(a - 1, zs) - zs - sc.gammaln(a), -np.inf)


def _gamma_cdf(z, a):
    return np.where(z >= 0, sc.gammainc(a, _inside(z >= 0, z, 1.0)), 0.0)


def _gamma_sf(z, a):
    return np.where(z >= 0, sc.gammaincc(a, _inside(z >= 0, z, 1.0)), 1.0)


def _unit(z):
    return (z >= 0) & (z <= 1)


def _beta_logpdf(z, a, b):
    zs = _inside(_unit(z), z, 0.5)
    return np.where(_unit(z), sc.xlogy(a - 1, zs) + sc.xlog1py(b - 1, -zs) - sc.betaln(a, b),
                    -np.inf)


def _beta_cdf(z, a, b):
    return np.where(z < 0, 0.0, np.where(z > 1, 1.0, sc.betainc(a, b, _inside(_unit(z), z, 0.5))))


def _beta_sf(z, a, b):
    return np.where(z < 0, 1.0,
                    np.where(z > 1, 0.0, sc.betainc(b, a, 1 - _inside(_unit(z), z, 0.5))))


def _expon_logpdf(z):
    return np.where(z >= 0, -z, -np.inf)


def _expon_cdf(z):
    return np.where(z >= 0, -np.expm1(-_inside(z >= 0, z, 1.0)), 0.0)


def _expon_logcdf(z):
    return np.where(z > 0, np.log(-np.expm1(-_inside(z > 0, z, 1.0))), -np.inf)


def _expon_sf(z):
    return np.where(z >= 0, np.exp(-_inside(z >= 0, z, 0.0)), 1.0)


def _expon_logsf(z):
    return np.where(z >= 0, -z, 0.0)


def _laplace_logcdf(z):
    # log(exp(z) / 2) left of 0, log(1 - exp(-z) / 2) right of it: each side only sees its z
    left, right = np.minimum(z, 0), np.maximum(z, 0)
    return np.where(z <= 0, left - _LOG_2, np.log1p(-0.5 * np.exp(-right)))


def _laplace_cdf(z):
    left, right = np.minimum(z, 0), np.maximum(z, 0)
    return np.where(z <= 0, 0.5 * np.exp(left), 1 - 0.5 * np.exp(-right))


def _lognorm_logpdf(z, s):
    zs = _inside(z > 0, z, 1.0)
    log_z = np.log(zs)
    return np.where(z > 0, -0.5 * (log_z / s) ** 2 - np.log(s) - log_z - _LOG_SQRT_2PI,
                    -np.inf)


def _lognorm_cdf(z, s, sign=1):
    return np.where(z > 0, sc.ndtr(sign * np.log(_inside(z > 0, z, 1.0)) / s),
                    0.0 if sign > 0 else 1.0)


def _lognorm_logcdf(z, s, sign=1):
    return np.where(z > 0, sc.log_ndtr(sign * np.log(_inside(z > 0, z, 1.0)) / s),
                    -np.inf if sign > 0 else 0.0)


def _uniform_logpdf(z):
    return np.where(_unit(z), 0.0 * z, -np.inf)


def _chi2_logpdf(z, df):
    return _gamma_logpdf(z / 2, df / 2) - _LOG_2


def _weibull_logpdf(z, c):
    zs = _inside(z > 0, z, 1.0)
    # at z = 0 SciPy's xlogy(c - 1, 0): 0 for c = 1, -inf above it, inf below
    at_zero = np.where(c == 1, 0.0, np.where(c > 1, -np.inf, np.inf))
    return np.where(z > 0, np.log(c) + sc.xlogy(c - 1, zs) - zs ** c,
                    np.where(z == 0, np.log(c) + at_zero, -np.inf))


def _weibull_logsf(z, c):
    return np.where(z > 0, -_inside(z > 0, z, 1.0) ** c, 0.0)


def _halfnorm_logpdf(z):
    return np.where(z >= 0, 0.5 * math.log(2 / math.pi) - 0.5 * z * z, -np.inf)


def _pareto_logpdf(z, b):
    zs = _inside(z >= 1, z, 1.0)
    return np.where(z >= 1, np.log(b) - (b + 1) * np.log(zs), -np.inf)


def _pareto_logsf(z, b):
    return np.where(z >= 1, -b * np.log(_inside(z >= 1, z, 1.0)), 0.0)


def _invgamma_logpdf(z, a):
    zs = _inside(z > 0, z, 1.0)
    return np.where(z > 0, -(a + 1) * np.log(zs) - sc.gammaln(a) - 1 / zs, -np.inf)


def _invgamma_cdf(z, a):
    return np.where(z > 0, sc.gammaincc(a, 1 / _inside(z > 0, z, 1.0)), 0.0)


def _invgamma_sf(z, a):
    return np.where(z > 0, sc.gammainc(a, 1 / _inside(z > 0, z, 1.0)), 1.0)


def _skewnorm_logpdf(z, a):
    # SciPy picks norm's logpdf at a == 0 (the same value, to rounding); one formula keeps the
    # derivative in a there, which that branch would make zero
    return _LOG_2 + _norm_logpdf(z) + sc.log_ndtr(a * z)


def _no_cdf(name, how):
    def refuse(z, *shapes):
        raise UnsupportedError(f"scipy.stats.{name}'s distribution functions are not "
                               "supported on traced values", user_frame_info(),
                               f"SciPy computes them with {how}, which xform does not stage; "
                               "its logpdf and pdf are staged")
    return refuse


def _vonmises_logpdf(z, kappa):
    # SciPy's kappa cosm1(z) - log(2 pi i0e(kappa)) (periodic: no support's ends), with
    # cos(z) - 1 as -2 sin^2(z/2)
    half_sine = np.sin(z / 2)
    return -2 * kappa * half_sine * half_sine - math.log(2 * math.pi) - np.log(sc.i0e(kappa))


def _log_ndtr_of_bound(x):
    """log Phi(x) of a bound that may be infinite: -inf or 0 there, with finite derivatives
    (log_ndtr's grows without bound)."""
    finite = np.isfinite(x)
    return np.where(finite, sc.log_ndtr(_inside(finite, x, 0.0)),
                    np.where(x > 0, 0.0, -np.inf))


def _log_gauss_mass(a, b):
    """log(Phi(b) - Phi(a)) as SciPy's truncnorm computes it: in the left tail (b <= 0) from
    log_ndtr's difference, the right tail mirrored, the middle as log1p of the two tails."""
    left, right = b <= 0, a > 0
    lo = np.where(right, -b, a)
    hi = np.where(right, -a, b)
    log_hi, log_lo = _log_ndtr_of_bound(hi), _log_ndtr_of_bound(lo)
    tail = log_hi + np.log(-np.expm1(np.minimum(log_lo - log_hi, -1e-300)))
    middle = np.log1p(-sc.ndtr(a) - sc.ndtr(-b))
    return np.where(left | right, tail, middle)


def _within(z, a, b):
    """(a < z < b, z there and a point strictly inside elsewhere): the formulas below are
    then finite, with finite derivatives, wherever np.where discards them."""
    finite_a, finite_b = np.isfinite(a), np.isfinite(b)
    middle = (_inside(finite_a, a, 0.0) + _inside(finite_b, b, 0.0)) / 2
    inner = np.where(finite_a & finite_b, middle,
                     np.where(finite_a, a + 1, np.where(finite_b, b - 1, 0.0)))
    strictly = (z > a) & (z < b)
    return strictly, _inside(strictly, z, inner)


def _truncnorm_logpdf(z, a, b):
    strictly, zs = _within(z, a, b)
    value = _norm_logpdf(zs) - _log_gauss_mass(a, b)
    return np.where(strictly | (z == a) | (z == b), value, -np.inf)


def _truncnorm_logcdf(z, a, b):
    """SciPy's: log of the mass below z, or log1p(-sf) where that is near 0 (> -0.1)."""
    strictly, zs = _within(z, a, b)
    mass = _log_gauss_mass(a, b)
    below, above = _log_gauss_mass(a, zs) - mass, _log_gauss_mass(zs, b) - mass
    value = np.where(below > -0.1, np.log1p(-np.exp(above)), below)
    return np.where(z <= a, -np.inf, np.where(z >= b, 0.0, value))


def _truncnorm_logsf(z, a, b):
    return _truncnorm_logcdf(-z, -b, -a)


def _positive(*shapes):
    valid = True
    for shape in shapes:
        valid = valid & (shape > 0)
    return valid


def _log(value):
    """log(value), -inf (without numpy's warning, with finite derivatives) where it is 0."""
    positive = value > 0
    return np.where(positive, np.log(_inside(positive, value, 1.0)), -np.inf)


def _log_of(probability, complement):
    """log(p) given p and 1 - p: near p = 1, log1p(-(1 - p)) keeps the digits log(p) loses."""
    return np.where(probability > 0.5, np.log1p(-_inside(probability > 0.5, complement, 0.0)),
                    _log(probability))


def _complement(fn):
    return lambda z, *shapes: 1 - fn(z, *shapes)


def _mirror(fn):
    return lambda z, *shapes: fn(-z, *shapes)


CONTINUOUS = {   # the generator class of each supported scipy.stats distribution
    type(st.norm): Standard(_norm_logpdf, sc.ndtr, sc.log_ndtr, _mirror(sc.ndtr),
                            _mirror(sc.log_ndtr)),
    type(st.t): Standard(_t_logpdf, lambda z, df: sc.stdtr(df, z),
                         sf=lambda z, df: sc.stdtr(df, -z), valid=_positive),
    type(st.gamma): Standard(_gamma_logpdf, _gamma_cdf, sf=_gamma_sf, valid=_positive),
    type(st.beta): Standard(_beta_logpdf, _beta_cdf, sf=_beta_sf, valid=_positive),
    type(st.expon): Standard(_expon_logpdf, _expon_cdf, _expon_logcdf, _expon_sf, _expon_logsf),
    type(st.laplace): Standard(lambda z: -np.abs(z) - _LOG_2, _laplace_cdf, _laplace_logcdf,
                               _mirror(_laplace_cdf), _mirror(_laplace_logcdf)),
    type(st.logistic): Standard(lambda z: sc.log_expit(z) + sc.log_expit(-z), sc.expit,
                                sc.log_expit, _mirror(sc.expit), _mirror(sc.log_expit)),
    type(st.lognorm): Standard(_lognorm_logpdf, _lognorm_cdf, _lognorm_logcdf,
                               lambda z, s: _lognorm_cdf(z, s, -1),
                               lambda z, s: _lognorm_logcdf(z, s, -1), valid=_positive),
    type(st.cauchy): Standard(lambda z: -_LOG_PI - np.log1p(z * z),
                              lambda z: 0.5 + np.arctan(z) / math.pi,
                              sf=lambda z: 0.5 - np.arctan(z) / math.pi),
    type(st.uniform): Standard(_uniform_logpdf, lambda z: np.clip(z, 0.0, 1.0),
                               sf=lambda z: 1 - np.clip(z, 0.0, 1.0)),
    type(st.chi2): Standard(_chi2_logpdf, lambda z, df: _gamma_cdf(z / 2, df / 2),
                            sf=lambda z, df: _gamma_sf(z / 2, df / 2), valid=_positive),
    # survival times, extreme values, heavy tails, and the half- and inverse families of
    # hierarchical models' scale priors
    type(st.weibull_min): Standard(_weibull_logpdf, lambda z, c: -np.expm1(_weibull_logsf(z, c)),
                                   sf=lambda z, c: np.exp(_weibull_logsf(z, c)),
                                   logsf=_weibull_logsf, valid=_positive),
    type(st.gumbel_r): Standard(lambda z: -z - np.exp(-z), lambda z: np.exp(-np.exp(-z)),
                                lambda z: -np.exp(-z), lambda z: -np.expm1(-np.exp(-z))),
    type(st.halfnorm): Standard(_halfnorm_logpdf,
                                lambda z: np.where(z >= 0, sc.erf(z / math.sqrt(2)), 0.0),
                                sf=lambda z: np.where(z >= 0, sc.erfc(z / math.sqrt(2)), 1.0)),
    type(st.halfcauchy): Standard(
        lambda z: np.where(z >= 0, math.log(2 / math.pi) - np.log1p(z * z), -np.inf),
        lambda z: np.where(z >= 0, 2 / math.pi * np.arctan(z), 0.0)),
    type(st.pareto): Standard(_pareto_logpdf, lambda z, b: -np.expm1(_pareto_logsf(z, b)),
                              sf=lambda z, b: np.exp(_pareto_logsf(z, b)), logsf=_pareto_logsf,
                              valid=_positive),
    type(st.invgamma): Standard(_invgamma_logpdf, _invgamma_cdf, sf=_invgamma_sf,
                                valid=_positive),
    type(st.skewnorm): Standard(_skewnorm_logpdf, _no_cdf("skewnorm", "Owen's T function"),
                                valid=lambda a: np.isfinite(a)),
    type(st.vonmises): Standard(_vonmises_logpdf, _no_cdf("vonmises", "a series in Cython"),
                                valid=lambda kappa: kappa >= 0),
    type(st.truncnorm): Standard(_truncnorm_logpdf,
                                 lambda z, a, b: np.exp(_truncnorm_logcdf(z, a, b)),
                                 _truncnorm_logcdf,
                                 lambda z, a, b: np.exp(_truncnorm_logsf(z, a, b)),
                                 _truncnorm_logsf, valid=lambda a, b: a < b),
}


def _laplace_ppf(q, upper=False):
    # the lower tail's quantile, mirrored for the upper one: log(2q) below the median
    low = np.minimum(q, 1 - q)
    z = np.log(2 * low)
    return np.where((q <= 0.5) != upper, z, -z)


def _norm_ppf(q, upper=False):
    z = sc.ndtri(q)
    return -z if upper else z


def _expon_ppf(q, upper=False):
    return -np.log(q) if upper else -np.log1p(-q)


def _logistic_ppf(q, upper=False):
    z = sc.logit(q)
    return -z if upper else z


def _cauchy_ppf(q, upper=False):
    # tan(pi (q - 1/2)) in the middle (q - 1/2 is exact there); in the tails -cot(pi q) and
    # cot(pi (1 - q)), which keep the digits it loses, and are smooth away from the median
    z = np.where(q < 0.25, -1 / np.tan(math.pi * q),
                 np.where(q > 0.75, 1 / np.tan(math.pi * (1 - q)), np.tan(math.pi * (q - 0.5))))
    return -z if upper else z


def _uniform_ppf(q, upper=False):
    return 1 - q if upper else q


QUANTILES = {   # closed-form ppf (isf by upper=True) and the standard support's ends
    type(st.norm): (_norm_ppf, (-math.inf, math.inf)),
    type(st.expon): (_expon_ppf, (0.0, math.inf)),
    type(st.logistic): (_logistic_ppf, (-math.inf, math.inf)),
    type(st.laplace): (_laplace_ppf, (-math.inf, math.inf)),
    type(st.cauchy): (_cauchy_ppf, (-math.inf, math.inf)),
    type(st.uniform): (_uniform_ppf, (0.0, 1.0)),
}
for _kind, (_ppf, _support) in QUANTILES.items():
    CONTINUOUS[_kind].ppf, CONTINUOUS[_kind].support = _ppf, _support


def _is_count(k):
    return (k >= 0) & (np.floor(k) == k)


def _poisson_logpmf(k, mu):
    ks = _inside(_is_count(k), k, 0.0)
    return np.where(_is_count(k), sc.xlogy(ks, mu) - mu - sc.gammaln(ks + 1), -np.inf)


def _poisson_cdf(k, mu):
    kf = np.floor(k)
    return np.where(k >= 0, sc.gammaincc(_inside(k >= 0, kf, 0.0) + 1, mu), 0.0)


def _poisson_sf(k, mu):
    kf = np.floor(k)
    return np.where(k >= 0, sc.gammainc(_inside(k >= 0, kf, 0.0) + 1, mu), 1.0)


def _binom_logpmf(k, n, p):
    inside = _is_count(k) & (k <= n)
    ks = _inside(inside, k, 0.0)
    return np.where(inside, sc.gammaln(n + 1) - sc.gammaln(ks + 1) - sc.gammaln(n - ks + 1)
                    + sc.xlogy(ks, p) + sc.xlog1py(n - ks, -p), -np.inf)


def _binom_cdf(k, n, p):
    kf = np.floor(k)
    inside = (kf >= 0) & (kf < n)
    ks = _inside(inside, kf, 0.0)
    return np.where(kf < 0, 0.0, np.where(kf >= n, 1.0, sc.betainc(n - ks, ks + 1, 1 - p)))


def _binom_sf(k, n, p):
    kf = np.floor(k)
    inside = (kf >= 0) & (kf < n)
    ks = _inside(inside, kf, 0.0)
    return np.where(kf < 0, 1.0, np.where(kf >= n, 0.0, sc.betainc(ks + 1, n - ks, p)))


def _nbinom_logpmf(k, n, p):
    ks = _inside(_is_count(k), k, 0.0)
    return np.where(_is_count(k), sc.gammaln(ks + n) - sc.gammaln(n) - sc.gammaln(ks + 1)
                    + sc.xlogy(n, p) + sc.xlog1py(ks, -p), -np.inf)


def _nbinom_cdf(k, n, p):
    kf = np.floor(k)
    return np.where(kf >= 0, sc.betainc(n, _inside(kf >= 0, kf, 0.0) + 1, p), 0.0)


def _nbinom_sf(k, n, p):
    kf = np.floor(k)
    return np.where(kf >= 0, sc.betainc(_inside(kf >= 0, kf, 0.0) + 1, n, 1 - p), 1.0)


def _bernoulli_logpmf(k, p):
    inside = (k == 0) | (k == 1)
    ks = _inside(inside, k, 0.0)
    return np.where(inside, sc.xlogy(ks, p) + sc.xlog1py(1 - ks, -p), -np.inf)


def _bernoulli_cdf(k, p):
    return np.where(k < 0, 0.0, np.where(k < 1, 1 - p, 1.0))


def _geom_logpmf(k, p):
    inside = _is_count(k) & (k >= 1)
    ks = _inside(inside, k, 1.0)
    return np.where(inside, sc.xlog1py(ks - 1, -p) + np.log(p), -np.inf)


def _geom_logsf(k, p):
    return np.where(k >= 1, np.floor(k) * np.log1p(-p), 0.0)


def _betabinom_logpmf(k, n, a, b):
    inside = _is_count(k) & (k <= n)
    ks = _inside(inside, k, 0.0)
    combination = -np.log(n + 1) - sc.betaln(n - ks + 1, ks + 1)     # SciPy's formula
    return np.where(inside, combination + sc.betaln(ks + a, n - ks + b) - sc.betaln(a, b),
                    -np.inf)


def _betabinom_cdf(k, n, a, b):
    """The pmf summed over 0..k, as SciPy's rv_discrete sums it (there is no closed form):
    over the counts up to the largest k below n (a guard where k or n is traced)."""
    kf = np.floor(k)
    last = int(min(np.max(kf), np.max(n) - 1))
    counts = np.arange(max(last, 0) + 1.0)
    kept = np.expand_dims(kf, -1) >= counts
    terms = np.exp(_betabinom_logpmf(counts, *(np.expand_dims(s, -1) for s in (n, a, b))))
    below = np.sum(np.where(kept, terms, 0.0), axis=-1)
    return np.where(kf < 0, 0.0, np.where(kf >= n, 1.0, below))


def _probability(n, p):
    return (n >= 0) & (p >= 0) & (p <= 1)


DISCRETE = {     # logpmf, cdf and sf of k - loc, and where the shapes are admissible
    type(st.poisson): (_poisson_logpmf, _poisson_cdf, _poisson_sf, lambda mu: mu >= 0),
    type(st.binom): (_binom_logpmf, _binom_cdf, _binom_sf,
                     lambda n, p: _probability(n, p) & (np.floor(n) == n)),
    type(st.nbinom): (_nbinom_logpmf, _nbinom_cdf, _nbinom_sf,
                      lambda n, p: (n > 0) & (p > 0) & (p <= 1)),
    type(st.bernoulli): (_bernoulli_logpmf, _bernoulli_cdf,
                         lambda k, p: 1 - _bernoulli_cdf(k, p), lambda p: _probability(1, p)),
    type(st.betabinom): (_betabinom_logpmf, _betabinom_cdf,
                         lambda k, n, a, b: 1 - _betabinom_cdf(k, n, a, b),
                         lambda n, a, b: (n >= 0) & (np.floor(n) == n) & (a > 0) & (b > 0)),
    type(st.geom): (_geom_logpmf, lambda k, p: -np.expm1(_geom_logsf(k, p)),
                    lambda k, p: np.exp(_geom_logsf(k, p)), lambda p: (p > 0) & (p <= 1)),
}


def _unsupported(dist, method):
    return UnsupportedError(f"scipy.stats.{dist.name}.{method} is not supported on traced "
                            "values", user_frame_info(),
                            "xform stages logpdf, pdf, logcdf, cdf, logsf and sf of norm, t, "
                            "gamma, beta, expon, laplace, logistic, lognorm, cauchy, uniform, "
                            "chi2, weibull_min, gumbel_r, halfnorm, halfcauchy, pareto, "
                            "invgamma, truncnorm, skewnorm and vonmises (their logpdf and "
                            "pdf) (ppf, isf and interval of norm, expon, logistic, "
                            "laplace, cauchy and uniform); logpmf, pmf and cdf of poisson, "
                            "binom, nbinom, betabinom, bernoulli and geom")


def _continuous_value(method, dist, x, args, kwds):
    family = CONTINUOUS.get(type(dist))
    if family is None:
        raise _unsupported(dist, method)
    shapes, loc, scale = dist._parse_args(*args, **kwds)
    x, loc, scale = _float(x), _float(loc), _float(scale)
    shapes = [_float(s) for s in shapes]
    if method in ("ppf", "isf"):
        if family.ppf is None:
            raise _unsupported(dist, method)
        return _quantile(family, method == "isf", x, loc, scale)
    z = (x - loc) / scale
    if method in ("logpdf", "pdf"):
        value = family.logpdf(z, *shapes) - _log(scale)
        value = np.exp(value) if method == "pdf" else value
    elif method == "cdf":
        value = family.cdf(z, *shapes)
    else:
        cdf, sf = family.cdf, family.sf or _complement(family.cdf)
        if method == "logcdf":
            value = (family.logcdf or (lambda *a: _log_of(cdf(*a), sf(*a))))(z, *shapes)
        elif method == "sf":
            value = sf(z, *shapes)
        else:
            value = (family.logsf or (lambda *a: _log_of(sf(*a), cdf(*a))))(z, *shapes)
    valid = scale > 0
    if family.valid is not None and shapes:
        valid = valid & family.valid(*shapes)
    # SciPy's answer for inadmissible parameters
    return np.where(valid, value, np.nan)


def _quantile(family, upper, q, loc, scale):
    """ppf (isf when `upper`) as SciPy's rv_continuous gives it: loc + scale * z, the ends of
    the support at q = 0 and 1, NaN outside [0, 1] or for scale <= 0."""
    inside = (q > 0) & (q < 1)
    z = family.ppf(_inside(inside, q, 0.5), upper=upper)
    low, high = family.support
    z = np.where(q == 0, high if upper else low, np.where(q == 1, low if upper else high, z))
    value = loc + scale * z
    return np.where((scale > 0) & (q >= 0) & (q <= 1), value, np.nan)


def _discrete_value(method, dist, k, args, kwds):
    family = DISCRETE.get(type(dist))
    if family is None:
        raise _unsupported(dist, method)
    logpmf, cdf, sf, valid = family
    shapes, loc, _ = dist._parse_args(*args, **kwds)
    shapes = [_float(s) for s in shapes]
    k = _float(k) - _float(loc)
    if method in ("logpmf", "pmf"):
        value = logpmf(k, *shapes)
        value = np.exp(value) if method == "pmf" else value
    elif method == "cdf":
        value = cdf(k, *shapes)
    elif method == "sf":
        value = sf(k, *shapes)
    elif method == "logcdf":
        value = _log_of(cdf(k, *shapes), sf(k, *shapes))
    else:
        value = _log_of(sf(k, *shapes), cdf(k, *shapes))
    return np.where(valid(*shapes), value, np.nan)


def _method(value, method):
    def stand_in_method(self, x, *args, **kwds):
        return value(method, self, x, args, kwds)
    stand_in_method.__name__ = method
    return stand_in_method


# -- multivariate_normal and dirichlet -----------------------------------------------------

def _mvn_logpdf(x, mean=None, cov=1, allow_singular=False):
    if allow_singular:
        raise UnsupportedError("scipy.stats.multivariate_normal(..., allow_singular=True) is not "
                               "supported on traced values", user_frame_info(),
                               "pass a positive definite cov")
    x, cov = _float(x), _float(cov)
    # SciPy's reading of the dimension: from mean if given, else from cov
    if mean is None:
        dim = np.shape(cov)[0] if np.ndim(cov) else 1
        mean = np.zeros(dim)
    else:
        mean = _float(mean)
        dim = int(np.size(mean))
        mean = np.reshape(mean, (dim,))
    if np.ndim(cov) == 0:
        cov = cov * np.eye(dim)
    elif np.ndim(cov) == 1:
        cov = cov * np.eye(dim)          # a vector is the diagonal
    if np.shape(cov) != (dim, dim):
        raise ShapeError(f"scipy.stats.multivariate_normal: cov of shape {np.shape(cov)} for "
                         f"dimension {dim}", user_frame_info())
    # SciPy's reading of x: a scalar or a vector is one point, unless the dimension is 1.
    if np.ndim(x) == 0:
        x = np.reshape(x, (1, 1) if dim == 1 else (1,))
    elif np.ndim(x) == 1:
        x = np.reshape(x, (-1, 1)) if dim == 1 else np.reshape(x, (1, -1))
    lead = np.shape(x)[:-1]
    chol = np.linalg.cholesky(cov)
    diff = np.reshape(x - mean, (-1, dim))
    white = np.linalg.solve(chol, np.transpose(diff))
    maha = np.reshape(np.sum(white * white, axis=0), lead)
    log_det = 2 * np.sum(np.log(np.diagonal(chol)))
    out = -0.5 * (dim * math.log(2 * math.pi) + log_det + maha)
    return _squeeze(out)


def _squeeze(out):
    return np.squeeze(out) if np.ndim(out) else out


def _dirichlet_logpdf(x, alpha):
    x, alpha = _float(x), _float(alpha)
    if np.ndim(alpha) != 1:
        raise ShapeError("scipy.stats.dirichlet: alpha must be one-dimensional",
                         user_frame_info())
    k = np.shape(alpha)[0]
    if np.shape(x)[0] == k - 1:   # the last component is implied
        x = np.concatenate([x, 1 - np.sum(x, axis=0, keepdims=True)], axis=0)
    weights = np.reshape(alpha - 1, (k,) + (1,) * (np.ndim(x) - 1))
    log_beta = np.sum(sc.gammaln(alpha)) - sc.gammaln(np.sum(alpha))
    return _squeeze(np.sum(sc.xlogy(weights, x), axis=0) - log_beta)


class FrozenMultivariateNormal(NamedTuple):
    """`multivariate_normal(mean, cov)` with traced parameters.

    >>> from scipy.stats import multivariate_normal
    >>> def f(mean):
    ...     return multivariate_normal(mean, np.eye(2)).logpdf(np.zeros(2))
    >>> xform.grad(f)(np.array([1.0, -2.0]))    # -(mean - x)
    array([-1.,  2.])
    """

    mean: object
    cov: object = 1
    allow_singular: bool = False

    def logpdf(self, x):
        return _mvn_logpdf(x, self.mean, self.cov, self.allow_singular)

    def pdf(self, x):
        return np.exp(self.logpdf(x))


class FrozenDirichlet(NamedTuple):
    """`dirichlet(alpha)` with a traced `alpha`.

    >>> from scipy.stats import dirichlet
    >>> x = np.array([0.2, 0.8])
    >>> bool(np.isclose(xform.jit(lambda a: dirichlet(a).pdf(x))(np.ones(2)), 1.0))
    True
    """

    alpha: object

    def logpdf(self, x):
        return _dirichlet_logpdf(x, self.alpha)

    def pdf(self, x):
        return np.exp(self.logpdf(x))


def _mvn_call(self, mean=None, cov=1, allow_singular=False, seed=None, **kwds):
    return FrozenMultivariateNormal(mean, cov, allow_singular)


def _scipy_frozen_mvn(method):
    def logpdf(self, x):
        value = _mvn_logpdf(x, self.mean, self.cov)
        return np.exp(value) if method == "pdf" else value
    return logpdf


def _scipy_frozen_dirichlet(method):
    def logpdf(self, x):
        value = _dirichlet_logpdf(x, self.alpha)
        return np.exp(value) if method == "pdf" else value
    return logpdf


def _refuse(method):
    def refuse(self, *args, **kwds):
        raise _unsupported(self, method)
    return refuse


# Methods that need concrete values: a traced argument raises naming the SciPy method. A few
# only, as every stand-in costs each staging a swap in and out.
_REFUSED = ("rvs", "entropy")


def _interval(self, confidence, *args, **kwds):
    """rv_generic.interval as SciPy computes it: the ppf of the two tails (a continuous
    distribution's; a discrete one has no staged ppf)."""
    if not isinstance(self, rv_continuous):
        raise _unsupported(self, "interval")
    if np.any((confidence > 1) | (confidence < 0)):    # a guard where confidence is traced
        raise ValueError("alpha must be between 0 and 1 inclusive")
    lower = _continuous_value("ppf", self, (1.0 - confidence) / 2, args, kwds)
    upper = _continuous_value("ppf", self, (1.0 + confidence) / 2, args, kwds)
    return lower, upper



for _method_name in ("logpdf", "pdf", "logcdf", "cdf", "logsf", "sf", "ppf", "isf"):
    stand_in(getattr(rv_continuous, _method_name), _method(_continuous_value, _method_name))
stand_in(rv_continuous.interval, _interval)     # rv_generic's, discrete distributions' too
for _method_name in ("ppf", "isf"):
    stand_in(getattr(rv_discrete, _method_name), _refuse(_method_name))
for _method_name in ("logpmf", "pmf", "logcdf", "cdf", "logsf", "sf"):
    stand_in(getattr(rv_discrete, _method_name), _method(_discrete_value, _method_name))
for _function, _method_name in {getattr(owner, name): name for owner in (rv_continuous, rv_discrete)
                                for name in _REFUSED}.items():
    stand_in(_function, _refuse(_method_name))

stand_in(multivariate_normal_gen.__call__, _mvn_call)
stand_in(multivariate_normal_gen.logpdf, lambda self, *a, **k: _mvn_logpdf(*a, **k))
stand_in(multivariate_normal_gen.pdf, lambda self, *a, **k: np.exp(_mvn_logpdf(*a, **k)))
stand_in(multivariate_normal_frozen.logpdf, _scipy_frozen_mvn("logpdf"))
stand_in(multivariate_normal_frozen.pdf, _scipy_frozen_mvn("pdf"))
stand_in(dirichlet_gen.__call__, lambda self, alpha, seed=None: FrozenDirichlet(alpha))
stand_in(dirichlet_gen.logpdf, lambda self, x, alpha: _dirichlet_logpdf(x, alpha))
stand_in(dirichlet_gen.pdf, lambda self, x, alpha: np.exp(_dirichlet_logpdf(x, alpha)))
stand_in(dirichlet_frozen.logpdf, _scipy_frozen_dirichlet("logpdf"))
stand_in(dirichlet_frozen.pdf, _scipy_frozen_dirichlet("pdf"))


def _stats(self, *args, **kwds):
    """rv_generic.stats (so mean, var, std, and the frozen distributions' too) of traced
    parameters: the distribution's own closed-form moments (its `_stats`, numpy code),
    moved by loc and scale as SciPy moves them; NaN where the parameters are inadmissible.
    A moment SciPy would integrate numerically (no closed form) is refused by name."""
    shapes, loc, scale, moments = self._parse_args_stats(*args, **kwds)
    shapes = [_float(s) for s in shapes]
    loc, scale = _float(loc), _float(scale)
    if self._stats_has_moments:
        closed = self._stats(*shapes, moments=moments)
    else:
        closed = self._stats(*shapes)
    valid = (scale > 0) & (loc == loc)
    if shapes:      # the tables' admissible shapes (SciPy's _argcheck converts with asarray)
        family = CONTINUOUS.get(type(self)) or DISCRETE.get(type(self))
        admissible = getattr(family, "valid", None) if isinstance(family, Standard) else \
            family[3] if family else self._argcheck
        valid = valid & admissible(*shapes) if admissible else valid
    moved = {"m": lambda mu: mu * scale + loc, "v": lambda mu2: mu2 * scale * scale,
             "s": lambda g1: g1, "k": lambda g2: g2}
    mu, mu2 = closed[:2]
    if ("m" in moments or "v" in moments) and mu is None:
        mu = _raw_moment(self, 1, shapes)
    if "v" in moments and mu2 is None:      # SciPy's: E[x^2] - mean^2 (inf for an inf mean)
        mu2 = np.where(~np.isinf(mu), _raw_moment(self, 2, shapes) - mu ** 2, np.inf)
    output = []
    for moment, value in zip("mvsk", (mu, mu2) + tuple(closed[2:])):
        if moment not in moments:
            continue
        if value is None:
            raise _no_closed_moment(self, moments)
        output.append(np.where(valid, moved[moment](_float(value)), np.nan))
    return output[0] if len(output) == 1 else tuple(output)


def _no_closed_moment(dist, moments):
    return UnsupportedError(f"scipy.stats.{dist.name}.stats(..., moments={moments!r}) of "
                            "traced parameters is not supported", user_frame_info(),
                            "xform stages the moments SciPy writes as formulas of the "
                            "parameters (and the mean and variance from raw moments); ask "
                            "for moments='mv', or compute this one on concrete values")


def _raw_moment(dist, n, shapes):
    """E[x^n] by the distribution's `_munp` where it is a formula (weibull_min's gammas)."""
    try:
        return dist._munp(n, *shapes)
    except XformError:
        raise _no_closed_moment(dist, "mv") from None


stand_in(rv_generic.stats, _stats)


# -- ranks ------------------------------------------------------------------------------------

def _rankdata(a, method="average", *, axis=None, nan_policy="propagate"):
    """scipy.stats.rankdata of traced values (spearmanr ranks with it): from one stable sort,
    each value's tie group (its first and last sorted positions) gives every method's rank.
    Ranks are piecewise constant: their derivative is zero. A NaN makes its slice's ranks
    NaN, as SciPy's (whether one is present is read from the call's values: a guard)."""
    if method not in ("average", "min", "max", "dense", "ordinal"):
        raise ValueError(f"unknown method '{method}'")
    if nan_policy not in ("propagate", "raise"):
        raise UnsupportedError(f"scipy.stats.rankdata(..., nan_policy={nan_policy!r}) of traced "
                               "values", user_frame_info(), "use nan_policy='propagate'")
    x = np.ravel(a) if axis is None else np.moveaxis(np.asarray(a), axis, -1)
    n = np.shape(x)[-1]
    order = np.argsort(x, axis=-1, kind="stable")
    ordered = np.take_along_axis(x, order, axis=-1)
    starts = np.concatenate([np.ones(np.shape(x)[:-1] + (1,), bool),
                             ordered[..., 1:] != ordered[..., :-1]], axis=-1)
    position = np.broadcast_to(np.arange(n), np.shape(x))
    first = np.maximum.accumulate(np.where(starts, position, 0), axis=-1)
    ends = np.concatenate([starts[..., 1:], np.ones(np.shape(x)[:-1] + (1,), bool)], axis=-1)
    last = n - 1 - np.maximum.accumulate(np.where(ends, n - 1 - position, 0)[..., ::-1],
                                         axis=-1)[..., ::-1]
    ranked = {"average": (first + last) / 2 + 1, "min": first + 1, "max": last + 1,
              "dense": np.cumsum(starts, axis=-1), "ordinal": position + 1}[method]
    ranks = np.take_along_axis(ranked, np.argsort(order, axis=-1), axis=-1)
    if np.issubdtype(aval(x).dtype if type(x) is Tracer else np.asarray(x).dtype, np.inexact):
        missing = np.any(np.isnan(x), axis=-1, keepdims=True)
        if np.any(missing):         # a guard: numpy's result type depends on it
            if nan_policy == "raise":
                raise ValueError("The input contains nan values")
            ranks = np.where(missing, np.nan, ranks.astype(np.float64))
    ranks = ranks if method == "average" or ranks.dtype.kind == "f" else ranks.astype(np.int64)
    return ranks if axis is None else np.moveaxis(ranks, -1, axis)


stand_in(st.rankdata, _rankdata)
