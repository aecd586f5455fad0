"""The derivatives of the regularized incomplete gamma function P(a, x) in its shape `a`,
which SciPy does not provide: numpy code (the impls of scipy_special's `gammainc_da` and
`gammainc_da2` primitives), exact to rounding where its expansion converges and NaN where it
does not.
"""
import numpy as np
import scipy.special as sc

_EPS = 1e-16
_TINY = 1e-300
_MAX_TERMS = 2000


def gammainc_da(a, x):
    """d/da P(a, x). NaN for a <= 0 (SciPy's P is NaN there) and where the expansion did
    not converge.

    >>> round(float(gammainc_da(2.0, 1.5)), 12)      # mpmath: -0.3134886378250793...
    -0.313488637825
    """
    return _shape_derivatives(a, x)[0]


def gammainc_da2(a, x):
    """d^2/da^2 P(a, x), likewise.

    >>> round(float(gammainc_da2(2.0, 1.5)), 12)     # mpmath: 0.1005891983925435...
    0.100589198393
    """
    return _shape_derivatives(a, x)[1]


# Second-order forward mode by hand: a value is (v, v', v'') in a.

def _mul(p, q):
    return p[0] * q[0], p[1] * q[0] + p[0] * q[1], p[2] * q[0] + 2 * p[1] * q[1] + p[0] * q[2]


def _reciprocal(p):
    r = 1 / p[0]
    return r, -p[1] * r * r, (2 * p[1] * p[1] * r - p[2]) * r * r


def _add(p, q):
    return p[0] + q[0], p[1] + q[1], p[2] + q[2]


def _shape_derivatives(a, x):
    """(P', P''): P's series (x < a + 1) or the continued fraction of Q = 1 - P (x >= a + 1,
    modified Lentz), each differentiated term by term in `a`."""
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    first, second = np.full(a.shape, np.nan), np.full(a.shape, np.nan)
    valid = (a > 0) & np.isfinite(a) & (x >= 0)
    edge = valid & ((x == 0) | (x == np.inf))      # P is 0 or 1 for every a
    first[edge], second[edge] = 0.0, 0.0
    inside = valid & (x > 0) & np.isfinite(x)
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        for expansion, where in ((_series, inside & (x < a + 1)),
                                 (_fraction, inside & (x >= a + 1))):
            if where.any():
                first[where], second[where] = expansion(a[where], x[where])
    if first.ndim == 0:
        return first[()], second[()]
    return first, second


def _scaled(prefactor_log_da, prefactor_log_da2, prefactor, total):
    """(d/da, d2/da2) of prefactor * total, from the derivatives of log(prefactor)."""
    u, v = prefactor_log_da, prefactor_log_da2
    value, total_da, total_da2 = total
    return (prefactor * (u * value + total_da),
            prefactor * ((u * u + v) * value + 2 * u * total_da + total_da2))


def _series(a, x):
    """P = x^a e^-x / Gamma(a + 1) * sum_n x^n / ((a + 1) ... (a + n))."""
    zeros = np.zeros_like(a)
    term, log_da, log_da2 = np.ones_like(a), zeros, zeros
    total = (np.ones_like(a), zeros, zeros)
    done = np.zeros(a.shape, bool)
    for n in range(1, _MAX_TERMS):
        term = term * (x / (a + n))
        log_da, log_da2 = log_da - 1 / (a + n), log_da2 + 1 / (a + n) ** 2
        step = (term, term * log_da, term * (log_da * log_da + log_da2))
        total = tuple(np.where(done, t, t + s) for t, s in zip(total, step))
        done |= (step[0] < _EPS * total[0]) & (np.abs(step[1]) <= _EPS * np.abs(total[1])) \
            & (np.abs(step[2]) <= _EPS * np.abs(total[2]))
        if done.all():
            break
    prefactor = np.exp(a * np.log(x) - x - sc.gammaln(a + 1))
    first, second = _scaled(np.log(x) - sc.digamma(a + 1), -sc.polygamma(1, a + 1),
                            prefactor, total)
    return np.where(done, first, np.nan), np.where(done, second, np.nan)


def _fraction(a, x):
    """Q = x^a e^-x / Gamma(a) / (x + 1 - a - 1 (1 - a) / (x + 3 - a - ...)); P = 1 - Q."""
    zeros = np.zeros_like(a)
    b = (x + 1 - a, -np.ones_like(a), zeros)
    c = (np.full_like(a, 1 / _TINY), zeros, zeros)
    d = _reciprocal(b)
    h = d
    done = np.zeros(a.shape, bool)
    for i in range(1, _MAX_TERMS):
        an = (-i * (i - a), np.full_like(a, float(i)), zeros)
        b = (b[0] + 2, b[1], b[2])
        denominator = _add(_mul(an, d), b)
        denominator = (np.where(np.abs(denominator[0]) < _TINY, _TINY, denominator[0]),
                       *denominator[1:])
        c = _add(b, _mul(an, _reciprocal(c)))
        c = (np.where(np.abs(c[0]) < _TINY, _TINY, c[0]), *c[1:])
        d = _reciprocal(denominator)
        step = _mul(d, c)
        h = tuple(np.where(done, old, new) for old, new in zip(h, _mul(h, step)))
        scale = np.maximum(1, np.abs(h[1] / h[0]) + np.abs(h[2] / h[0]))
        done |= (np.abs(step[0] - 1) < _EPS) & (np.abs(step[1]) + np.abs(step[2])
                                                 < _EPS * scale)
        if done.all():
            break
    prefactor = np.exp(a * np.log(x) - x - sc.gammaln(a))
    first, second = _scaled(np.log(x) - sc.digamma(a), -sc.polygamma(1, a), prefactor, h)
    return np.where(done, -first, np.nan), np.where(done, -second, np.nan)
