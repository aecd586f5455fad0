"""scipy.special on tracers: its ufuncs enter the numpy protocol's UFUNCS table (they reach
`Tracer.__array_ufunc__` by themselves), and its Python functions (logsumexp, softmax,
log_softmax, polygamma, multigammaln, zeta) are stood in while staging. Imported by the
installer in xform.scipy once the user has imported scipy.special.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.special as sc

from xform.errors import UnsupportedError
from xform.ir.tracer import Tracer
from xform.numpy.protocol import implements
from xform.numpy.axes import normalize_axes
from xform.numpy.stand_ins import stand_in
from xform.rules.scipy_special import SCIPY_SPECIAL_PRIMITIVES as _PRIMITIVES
from xform.rules.scipy_special import (logsumexp_sign, scipy_log_softmax_p,
                                       scipy_logsumexp_p, scipy_softmax_p)
from xform.source_info import user_frame_info

# scipy.special's Python functions, each staged as a primitive by a stand-in below.
_PYTHON_LEVEL = ("polygamma", "zeta", "riemann_zeta")
for _name, _prim in _PRIMITIVES.items():
    if _name not in _PYTHON_LEVEL:
        implements(getattr(sc, _name))(_prim.bind)


def polygamma(n, x):
    """scipy.special.polygamma: digamma's n-th derivative, differentiable in `x`.

    >>> import scipy.special
    >>> round(float(xform.grad(lambda x: scipy.special.polygamma(1, x))(1.0)), 10)  # -2 zeta(3)
    -2.4041138063
    """
    return _PRIMITIVES["polygamma"].bind(n, x)


def zeta(x, q=None, out=None):
    """scipy.special.zeta: Riemann's zeta(x), or Hurwitz's zeta(x, q), differentiable in `q`.

    >>> import scipy.special
    >>> round(float(xform.grad(lambda q: scipy.special.zeta(2.0, q))(1.0)), 10)    # -2 zeta(3)
    -2.4041138063
    """
    if out is not None:
        raise UnsupportedError("scipy.special.zeta(..., out=...) is not supported on traced "
                               "values", user_frame_info())
    if q is None:
        return _PRIMITIVES["riemann_zeta"].bind(x)
    return _PRIMITIVES["zeta"].bind(x, q)


def multigammaln(a, d):
    """scipy.special.multigammaln: log of the multivariate gamma function of dimension `d`
    (a concrete integer): sum over j < d of gammaln(a - j/2), plus d(d-1)/4 log(pi).

    >>> import scipy.special
    >>> a = np.array([2.5, 4.0])
    >>> bool(np.allclose(xform.jit(lambda a: scipy.special.multigammaln(a, 3))(a),
    ...                  scipy.special.multigammaln(a, 3)))
    True
    """
    if type(d) is Tracer:
        raise UnsupportedError("scipy.special.multigammaln needs a concrete dimension d",
                               user_frame_info())
    d = int(d)
    offsets = np.arange(d).reshape((d,) + (1,) * np.ndim(a)) / 2
    return np.sum(sc.gammaln(a - offsets), axis=0) + d * (d - 1) / 4 * math.log(math.pi)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """scipy.special.logsumexp: `log(sum(b * exp(a), axis))` without overflow, SciPy's own
    function as one primitive; with `return_sign`, `(log|s|, sign(s))` as SciPy gives them.

    >>> import scipy.special
    >>> float(xform.grad(lambda a: scipy.special.logsumexp(a, b=np.array([1.0, 3.0])))(
    ...     np.zeros(2))[1])
    0.75
    """
    a = _staged(a)
    operands = (a,) if b is None else tuple(np.broadcast_arrays(a, _staged(b)))
    axis = _axis(operands[0], axis)
    out = scipy_logsumexp_p.bind(*operands, axis=axis, keepdims=bool(keepdims),
                                 return_sign=bool(return_sign))
    if not return_sign:
        return out
    if b is None:
        return out, np.ones_like(out)
    return out, logsumexp_sign(*operands, out, axis, bool(keepdims))


def _staged(x):
    return x if type(x) is Tracer else np.asarray(x)


def _axis(x, axis):
    """SciPy's `axis` as the primitives take it: None (every axis) or a tuple."""
    return None if axis is None else normalize_axes(axis, np.ndim(x))


def softmax(x, axis=None):
    """scipy.special.softmax: `exp(x - max) / sum(exp(x - max))` over `axis`, SciPy's own
    function as one primitive.

    >>> import scipy.special
    >>> xform.jit(scipy.special.softmax)(np.log(np.array([1.0, 3.0])))
    array([0.25, 0.75])
    """
    return scipy_softmax_p.bind(_staged(x), axis=_axis(x, axis))


def log_softmax(x, axis=None):
    """scipy.special.log_softmax: `x - logsumexp(x, axis, keepdims=True)`, SciPy's own
    function as one primitive.

    >>> import scipy.special
    >>> np.exp(xform.jit(scipy.special.log_softmax)(np.log(np.array([1.0, 3.0]))))
    array([0.25, 0.75])
    """
    return scipy_log_softmax_p.bind(_staged(x), axis=_axis(x, axis))


_STAGED = [(sc.polygamma, polygamma), (sc.zeta, zeta), (sc.multigammaln, multigammaln),
           (sc.logsumexp, logsumexp), (sc.softmax, softmax), (sc.log_softmax, log_softmax)]
for _function, _replacement in _STAGED:
    stand_in(_function, _replacement)
