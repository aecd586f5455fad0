"""The derivative of the regularized incomplete gamma function P(a, x) in its shape `a`,
which SciPy does not provide: numpy code (the impl of scipy_special's `gammainc_da`
primitive), exact to rounding where its expansion converges and NaN where it does not.
"""
import numpy as np
import scipy.special as sc

_EPS = 1e-16
_TINY = 1e-300
_MAX_TERMS = 2000


def gammainc_da(a, x):
    """d/da P(a, x): P's series (x < a + 1) or the continued fraction of Q = 1 - P (x >= a +
    1, modified Lentz), each differentiated term by term in `a` (forward mode by hand). NaN
    for a <= 0 (SciPy's P is NaN there) and where the expansion did not converge.

    >>> round(float(gammainc_da(2.0, 1.5)), 12)      # mpmath: -0.3134886378250793...
    -0.313488637825
    """
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    out = np.full(a.shape, np.nan)
    valid = (a > 0) & np.isfinite(a) & (x >= 0)
    out[valid & ((x == 0) | (x == np.inf))] = 0.0
    inside = valid & (x > 0) & np.isfinite(x)
    series, fraction = inside & (x < a + 1), inside & (x >= a + 1)
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        if series.any():
            out[series] = _series(a[series], x[series])
        if fraction.any():
            out[fraction] = _fraction(a[fraction], x[fraction])
    return out[()] if out.ndim == 0 else out


def _series(a, x):
    """P = x^a e^-x / Gamma(a + 1) * sum_n x^n / ((a + 1) ... (a + n))."""
    term, log_term_da = np.ones_like(a), np.zeros_like(a)
    total, total_da = np.ones_like(a), np.zeros_like(a)
    done = np.zeros(a.shape, bool)
    for n in range(1, _MAX_TERMS):
        term = term * (x / (a + n))
        log_term_da = log_term_da - 1 / (a + n)
        term_da = term * log_term_da
        total = np.where(done, total, total + term)
        total_da = np.where(done, total_da, total_da + term_da)
        done |= (term < _EPS * total) & (np.abs(term_da) < _EPS * np.abs(total_da))
        if done.all():
            break
    prefactor = np.exp(a * np.log(x) - x - sc.gammaln(a + 1))
    value_da = prefactor * (total * (np.log(x) - sc.digamma(a + 1)) + total_da)
    return np.where(done, value_da, np.nan)


def _fraction(a, x):
    """Q = x^a e^-x / Gamma(a) * 1 / (x + 1 - a - 1 (1 - a) / (x + 3 - a - ...)); P' = -Q'."""
    b, b_da = x + 1 - a, -1.0
    c, c_da = np.full_like(a, 1 / _TINY), np.zeros_like(a)
    d = 1 / b
    d_da = -b_da * d * d
    h, h_da = d, d_da
    done = np.zeros(a.shape, bool)
    for i in range(1, _MAX_TERMS):
        an, an_da = -i * (i - a), float(i)
        b = b + 2
        denominator = an * d + b
        denominator_da = an_da * d + an * d_da + b_da
        denominator = np.where(np.abs(denominator) < _TINY, _TINY, denominator)
        c, c_da = b + an / c, b_da + (an_da * c - an * c_da) / (c * c)
        c = np.where(np.abs(c) < _TINY, _TINY, c)
        d, d_da = 1 / denominator, -denominator_da / (denominator * denominator)
        step, step_da = d * c, d_da * c + d * c_da
        h_next, h_da_next = h * step, h_da * step + h * step_da
        h, h_da = np.where(done, h, h_next), np.where(done, h_da, h_da_next)
        done |= (np.abs(step - 1) < _EPS) & (
            np.abs(step_da) < _EPS * np.maximum(1, np.abs(h_da / h)))
        if done.all():
            break
    prefactor = np.exp(a * np.log(x) - x - sc.gammaln(a))
    q_da = prefactor * (h * (np.log(x) - sc.digamma(a)) + h_da)
    return np.where(done, -q_da, np.nan)
