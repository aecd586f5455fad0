"""scipy.special-style functions on arrays and tracers, over the default-only primitives of
xform.rules.special: softplus and logsumexp (each binds its primitive, or in the minimal
context stages its decomposition)."""
import numpy as np

from xform.errors import TypeCheckError
from xform.ir.ad import aval
from xform.ir.contexts import bind_in_context
from xform.ir.tracer import Tracer
from xform.numpy.axes import normalize_axes
from xform.rules.reduce import reduced_shape
from xform.rules.special import logsumexp_p, softplus_p
from xform.source_info import user_frame_info


def _as_real_float(x):
    """Integers and booleans are computed in float64, as np.logaddexp(0.0, x) does."""
    if type(x) is not Tracer and not isinstance(x, (float, np.ndarray, np.generic)):
        x = np.asarray(x)
    kind = aval(x).dtype.kind
    if kind == "c":
        raise TypeCheckError("complex input is not supported", user_frame_info())
    if kind != "f":
        x = x.astype(np.float64) if type(x) is Tracer else np.asarray(x, np.float64)
    return x


def softplus(x):
    """`log(1 + exp(x))` element-wise, without overflow; integers are computed in float64.

    One `softplus` equation in the default context, its decomposition in the minimal one.
    >>> xform.extend.softplus(np.array([-1000.0, 1000.0]))    # np.log1p(np.exp(1000.0)) is inf
    array([   0., 1000.])
    """
    return bind_in_context(softplus_p, _as_real_float(x))


def logsumexp(a, axis=None, keepdims=False):
    """`log(sum(exp(a), axis))` without overflow (scipy.special.logsumexp without `b` and
    `return_sign`); integers are computed in float64.

    One `logsumexp` equation in the default context, its decomposition in the minimal one.
    >>> xform.extend.logsumexp(np.array([1000.0, 1000.0]))    # 1000 + log(2)
    np.float64(1000.6931471805599)
    """
    x = _as_real_float(a)
    shape = aval(x).shape
    axes = normalize_axes(axis, len(shape))
    out = bind_in_context(logsumexp_p, x, axes=axes)
    return np.reshape(out, reduced_shape(shape, axes, keepdims=True)) if keepdims else out
