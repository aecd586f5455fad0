"""numpy's polynomial functions on tracers (coefficients highest power first, as np.polyval):
polyval, polyadd, polysub, polymul, polyder, polyint, vander, polyfit and roots, computed as
numpy does."""
import numpy as np

from xform.errors import shape_error, unsupported_error
from xform.ir.ad import aval, ndim
from xform.numpy.protocol import implements
from xform.numpy.shape import as_array, atleast_1d


@implements(np.polyval)
def polyval(p, x):
    """`np.polyval` by Horner's rule, as numpy: y = y * x + p[i]."""
    p, x = as_array(p), as_array(x)
    y = np.zeros_like(x)
    for i in range(aval(p).shape[0] if ndim(p) else 1):
        y = y * x + (p[i] if ndim(p) else p)
    return y


def _aligned(a1, a2):
    """Both coefficient vectors, the shorter padded with leading zeros (numpy's polyadd)."""
    a1, a2 = atleast_1d(as_array(a1)), atleast_1d(as_array(a2))
    difference = aval(a2).shape[0] - aval(a1).shape[0]
    if difference > 0:
        a1 = np.concatenate((np.zeros(difference, aval(a1).dtype), a1))
    elif difference < 0:
        a2 = np.concatenate((np.zeros(-difference, aval(a2).dtype), a2))
    return a1, a2


@implements(np.polyadd)
def polyadd(a1, a2):
    """`np.polyadd`: the sum of two polynomials."""
    a1, a2 = _aligned(a1, a2)
    return a1 + a2


@implements(np.polysub)
def polysub(a1, a2):
    """`np.polysub`: the difference of two polynomials."""
    a1, a2 = _aligned(a1, a2)
    return a1 - a2


@implements(np.polymul)
def polymul(a1, a2):
    """`np.polymul`: the product of two polynomials, numpy's convolution of coefficients.
    numpy first trims leading zero coefficients, which makes the result's length depend on
    the values; traced coefficients are kept (as jax.numpy.polymul does by default)."""
    return np.convolve(atleast_1d(as_array(a1)), atleast_1d(as_array(a2)))


@implements(np.polyder)
def polyder(p, m=1):
    """`np.polyder`: the m-th derivative (coefficients times their powers, m times)."""
    m = int(m)
    if m < 0:
        raise shape_error("Order of derivative must be positive (see polyint)")
    p = as_array(p)
    for _ in range(m):
        n = aval(p).shape[0] - 1
        p = p[:-1] * np.arange(n, 0, -1)
    return p


@implements(np.polyint)
def polyint(p, m=1, k=None):
    """`np.polyint`: the m-th antiderivative with integration constants `k` (may be
    traced)."""
    m = int(m)
    if m < 0:
        raise shape_error("Order of integral must be positive (see polyder)")
    k = np.zeros(m, float) if k is None else atleast_1d(as_array(k))
    if aval(k).shape[0] == 1 and m > 1:
        k = k[0] * np.ones(m, float)
    if aval(k).shape[0] < m:
        raise shape_error("k must be a scalar or a rank-1 array of length 1 or >m.")
    p = as_array(p)
    for i in range(m):
        n = aval(p).shape[0]
        p = np.concatenate((p / np.arange(n, 0, -1), np.reshape(k[i], (1,))))
    return p


@implements(np.vander)
def vander(x, N=None, increasing=False):
    """`np.vander`: columns of powers of `x`, as numpy builds them: a running product."""
    x = as_array(x)
    if ndim(x) != 1:
        raise shape_error("x must be a one-dimensional array or sequence.")
    n = aval(x).shape[0]
    N = n if N is None else int(N)
    dtype = np.promote_types(aval(x).dtype, int)
    columns = [np.ones((n, min(N, 1)), dtype)]
    if N > 1:
        columns.append(np.cumprod(np.broadcast_to(x.astype(dtype)[:, None], (n, N - 1)),
                                  axis=1))
    powers = np.concatenate(columns, axis=1)
    return powers if increasing else np.flip(powers, 1)


@implements(np.polyfit)
def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """`np.polyfit` as numpy computes it: least squares on the column-scaled Vandermonde
    matrix (weighted rows with `w`). Without numpy's RankWarning: the rank is a traced
    value (`full=True` returns it)."""
    if cov:
        raise unsupported_error("numpy.polyfit(..., cov=True)",
                                "fit with full=True and form the covariance from its residuals")
    order = int(deg) + 1
    x, y = as_array(x) + 0.0, as_array(y) + 0.0
    if order < 1:
        raise shape_error("expected deg >= 0")
    if ndim(x) != 1 or ndim(y) not in (1, 2) or aval(x).shape[0] != aval(y).shape[0]:
        raise shape_error(f"polyfit: x must be 1-dimensional and y 1- or 2-dimensional with "
                          f"as many rows, got {aval(x).shape} and {aval(y).shape}")
    if rcond is None:
        rcond = aval(x).shape[0] * np.finfo(aval(x).dtype).eps
    lhs, rhs = vander(x, order), y
    if w is not None:
        w = as_array(w) + 0.0
        lhs = lhs * w[:, None]
        rhs = rhs * (w if ndim(y) == 1 else w[:, None])
    scale = np.sqrt(np.sum(lhs * lhs, axis=0))
    c, residuals, rank, s = np.linalg.lstsq(lhs / scale, rhs, rcond)
    c = c / (scale if ndim(y) == 1 else scale[:, None])
    return (c, residuals, rank, s, rcond) if full else c



@implements(np.roots)
def roots(p):
    """`np.roots` as numpy computes it: the eigenvalues of the companion matrix of the
    coefficients with leading and trailing zeros cut (where they end is read from the call's
    values, a guard), then a zero root per trailing zero; complex, as xform's eigvals are."""
    p = atleast_1d(as_array(p))
    if ndim(p) != 1:
        raise shape_error("Input must be a rank-1 array.")
    leading_cut = np.trim_zeros(p, "f")
    p = np.trim_zeros(leading_cut, "b")
    trailing = aval(leading_cut).shape[0] - aval(p).shape[0]
    if not np.issubdtype(aval(p).dtype, np.inexact):
        p = p.astype(float)
    degree = aval(p).shape[0] - 1
    if degree < 1:
        found = np.zeros(0, complex)
    else:
        # the companion matrix: -p[1:] / p[0] on the first row, ones below the diagonal
        companion = np.concatenate([(-p[1:] / p[0])[None, :], np.eye(degree - 1, degree)])
        found = np.linalg.eigvals(companion)
    return np.concatenate([found, np.zeros(trailing, aval(found).dtype)])
