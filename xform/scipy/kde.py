"""scipy.stats.gaussian_kde on tracers: a kernel density estimate of traced data (or weights,
or a traced scalar bandwidth), evaluated by `kde(x)`, `evaluate`, `pdf` and `logpdf` at traced
or concrete points, differentiable in all of them. SciPy's own Python sets the bandwidth and
the kernel covariance (numpy's cov, scipy.linalg's cholesky: staged); its Cython kernel sums
are written in numpy here: data and points whitened by the kernel's Cholesky factor, then the
weighted Gaussians of their squared distances summed (by logsumexp for logpdf). Imported by
the installer in xform.scipy once the user has imported scipy.stats.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.linalg
import scipy.special
from scipy.stats import gaussian_kde

from xform.errors import shape_error
from xform.ir.tracer import Tracer
from xform.numpy.stand_ins import contains_tracer, stand_in


def _traced_kde(args, kwargs) -> bool:
    """A call to route to xform: a traced argument, or a KDE whose own arrays are traced (a
    KDE of traced data evaluated at concrete points)."""
    if contains_tracer(args) or contains_tracer(kwargs):
        return True
    own = getattr(args[0], "__dict__", {}) if args else {}
    return any(type(value) is Tracer for value in own.values())


def _init(self, dataset, bw_method=None, weights=None):
    """gaussian_kde.__init__ on traced data or weights, checked as SciPy checks them (a
    ShapeError is a ValueError, as SciPy's)."""
    self.dataset = np.atleast_2d(np.asarray(dataset))
    if not np.size(self.dataset) > 1:
        raise shape_error("`dataset` input should have multiple elements.")
    self.d, self.n = np.shape(self.dataset)
    if weights is not None:
        weights = np.atleast_1d(weights).astype(float)
        self._weights = weights / np.sum(weights)
        if np.ndim(self._weights) != 1:
            raise shape_error("`weights` input should be one-dimensional.")
        if len(self._weights) != self.n:
            raise shape_error("`weights` input should be of length n")
        self._neff = 1 / np.vecdot(self._weights, self._weights)
    if self.d > self.n:
        raise shape_error("Number of dimensions is greater than number of samples: "
                         "gaussian_kde takes each *column* of `dataset` as a point; consider "
                         "transposing the input to `dataset`.")
    self.set_bandwidth(bw_method=bw_method)


def _set_bandwidth(self, bw_method=None):
    """gaussian_kde.set_bandwidth, also of a traced scalar factor (SciPy's np.isscalar does
    not take a Tracer for a number)."""
    if type(bw_method) is Tracer and np.ndim(bw_method) == 0:
        self._bw_method = "use constant"
        self.covariance_factor = lambda: bw_method
        self._compute_covariance()
    else:
        gaussian_kde.set_bandwidth(self, bw_method)     # inside its stand-in: SciPy's own


def _points(self, points):
    """The points as a (d, m) array, a row vector of one d-dimensional point allowed."""
    points = np.atleast_2d(np.asarray(points))
    d, m = np.shape(points)
    if d != self.d:
        if d == 1 and m == self.d:
            return np.reshape(points, (self.d, 1))
        raise shape_error(f"points have dimension {d}, dataset has dimension {self.d}")
    return points


def _exponents(self, points):
    """(m, n): half the squared distance of each point to each datum, in the coordinates
    where the kernel is the standard normal; and the log of the kernel's normalisation."""
    cho_cov = self.cho_cov
    data = scipy.linalg.solve_triangular(cho_cov, self.dataset, lower=True)
    at = scipy.linalg.solve_triangular(cho_cov, _points(self, points), lower=True)
    half_squared = np.sum((data[:, None, :] - at[:, :, None]) ** 2, axis=0) / 2
    log_norm = -self.d / 2 * math.log(2 * math.pi) - np.sum(np.log(np.diagonal(cho_cov)))
    return half_squared, log_norm


def _evaluate(self, points):
    half_squared, log_norm = _exponents(self, points)
    return np.exp(-half_squared) @ self.weights * np.exp(log_norm)


def _logpdf(self, x):
    half_squared, log_norm = _exponents(self, x)
    return scipy.special.logsumexp(np.log(self.weights) - half_squared, axis=1) + log_norm


stand_in(gaussian_kde.__init__, _init, when=_traced_kde)
stand_in(gaussian_kde.set_bandwidth, _set_bandwidth, when=_traced_kde)
stand_in(gaussian_kde.evaluate, _evaluate, when=_traced_kde)     # also __call__ and pdf
stand_in(gaussian_kde.logpdf, _logpdf, when=_traced_kde)
