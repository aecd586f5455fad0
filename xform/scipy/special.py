"""scipy.special on tracers: its ufuncs enter the numpy protocol's UFUNCS table (they reach
`Tracer.__array_ufunc__` by themselves), and its Python functions (logsumexp, softmax,
log_softmax, polygamma, multigammaln, zeta) are stood in while staging. Imported by the
installer in xform.scipy once the user has imported scipy.special.

The family's primitives (xform.rules.scipy_special) are registered when a staging first
reaches one of its functions, not by this import: each registration makes the tables derived
from the rule table anew, which a first call reaching none of them (scipy.stats.norm's
density, written with numpy alone) need not pay.
"""
from __future__ import annotations

import importlib
import math
import sys
import threading

import numpy as np
import scipy.special as sc

from xform.errors import UnsupportedError
from xform.ir.execute import unwatched
from xform.ir.tracer import Tracer
from xform.numpy.axes import normalize_axes
from xform.numpy.protocol import UFUNCS
from xform.numpy.stand_ins import stand_in
from xform.source_info import user_frame_info

# scipy.special's Python functions, each staged as a primitive by a stand-in below.
_PYTHON_LEVEL = ("polygamma", "zeta", "riemann_zeta")
# The ufuncs xform.rules.scipy_special makes a primitive of, by scipy.special's names (named
# here so that the table's entries need not register the family; tests/test_fc_fresh.py checks
# that the two agree).
_UFUNC_NAMES = (
    "gammaln", "gamma", "rgamma", "digamma", "erf", "erfc", "erfinv", "erfcinv", "expit",
    "logit", "log_expit", "ndtr", "log_ndtr", "ndtri", "entr", "xlogy", "xlog1py", "rel_entr",
    "kl_div", "betaln", "beta", "iv", "ive", "jv", "yv", "i0", "i1", "i0e", "i1e", "j0", "j1",
    "y0", "y1", "gammainc", "gammaincc", "stdtr", "betainc", "betaincc")
_RULES = "xform.rules.scipy_special"
_registering = threading.Lock()
_waiting: dict = {}     # scipy.special's name -> its ufunc's table entry, registering the family


def _family():
    """xform.rules.scipy_special with its primitives registered (by its import, on the first
    call); the ufunc table's entries then stage each ufunc directly."""
    rules = sys.modules.get(_RULES)
    if rules is not None and not _waiting:
        return rules
    return _registered_family()


@unwatched      # (reached from staged user code: no profile hook need see the registrations)
def _registered_family():
    with _registering:
        rules = importlib.import_module(_RULES)
        for name, entry in _waiting.items():
            ufunc = getattr(sc, name)
            if UFUNCS.get(ufunc) is entry:      # (not when an overlay has replaced it)
                UFUNCS[ufunc] = rules.SCIPY_SPECIAL_PRIMITIVES[name].bind
        _waiting.clear()
    return rules


def _registering_entry(name):
    """The ufunc table's entry for scipy.special's `name` until the family is registered."""
    def stage(*inputs):
        return _family().SCIPY_SPECIAL_PRIMITIVES[name].bind(*inputs)
    return stage


def polygamma(n, x):
    """scipy.special.polygamma: digamma's n-th derivative, differentiable in `x`.

    >>> import scipy.special
    >>> round(float(xform.grad(lambda x: scipy.special.polygamma(1, x))(1.0)), 10)  # -2 zeta(3)
    -2.4041138063
    """
    return _family().SCIPY_SPECIAL_PRIMITIVES["polygamma"].bind(n, x)


def zeta(x, q=None, out=None):
    """scipy.special.zeta: Riemann's zeta(x), or Hurwitz's zeta(x, q), differentiable in `q`.

    >>> import scipy.special
    >>> round(float(xform.grad(lambda q: scipy.special.zeta(2.0, q))(1.0)), 10)    # -2 zeta(3)
    -2.4041138063
    """
    if out is not None:
        raise UnsupportedError("scipy.special.zeta(..., out=...) is not supported on traced "
                               "values", user_frame_info())
    primitives = _family().SCIPY_SPECIAL_PRIMITIVES
    if q is None:
        return primitives["riemann_zeta"].bind(x)
    return primitives["zeta"].bind(x, q)


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
    rules = _family()
    out = rules.scipy_logsumexp_p.bind(*operands, axis=axis, keepdims=bool(keepdims),
                                       return_sign=bool(return_sign))
    if not return_sign:
        return out
    if b is None:
        return out, np.ones_like(out)
    return out, rules.logsumexp_sign(*operands, out, axis, bool(keepdims))


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
    return _family().scipy_softmax_p.bind(_staged(x), axis=_axis(x, axis))


def log_softmax(x, axis=None):
    """scipy.special.log_softmax: `x - logsumexp(x, axis, keepdims=True)`, SciPy's own
    function as one primitive.

    >>> import scipy.special
    >>> np.exp(xform.jit(scipy.special.log_softmax)(np.log(np.array([1.0, 3.0]))))
    array([0.25, 0.75])
    """
    return _family().scipy_log_softmax_p.bind(_staged(x), axis=_axis(x, axis))


for _name in _UFUNC_NAMES:
    UFUNCS[getattr(sc, _name)] = _waiting[_name] = _registering_entry(_name)
# the chi-square distribution functions are the regularized gammas at half their arguments,
# as SciPy computes them (the same bits; chisquare's p-value)
UFUNCS[sc.chdtr] = lambda v, x: sc.gammainc(v / 2, x / 2)
UFUNCS[sc.chdtrc] = lambda v, x: sc.gammaincc(v / 2, x / 2)

_STAGED = [(sc.polygamma, polygamma), (sc.zeta, zeta), (sc.multigammaln, multigammaln),
           (sc.logsumexp, logsumexp), (sc.softmax, softmax), (sc.log_softmax, log_softmax)]
for _function, _replacement in _STAGED:
    stand_in(_function, _replacement)
