"""scipy.fft on tracers: SciPy's FFT functions are uarray multimethods, so xform registers a
uarray backend for them (the first time something is staged after scipy.fft is imported); a
call with a traced argument runs numpy.fft's function on it (xform's implementations), every
other call is declined and SciPy's own backend runs it as before. The multimethod objects are
reached however they were imported (`from scipy.fft import fft` before `import xform` too).
The helpers `fftshift`/`ifftshift` are plain functions, stood in while staging.
"""
from __future__ import annotations

import numpy as np

from xform.errors import unsupported_error
from xform.numpy.stand_ins import contains_tracer, stand_in, stand_in_when_imported
from xform.scipy import SCIPY_GROUP

# scipy.fft name -> the numpy.fft function computing the same (SciPy's extra keywords
# `overwrite_x`, `workers`, `plan` do not change values and are dropped)
SAME_AS_NUMPY = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2",
                 "irfft2", "fftn", "ifftn", "rfftn", "irfftn", "fftshift", "ifftshift")
_HELPERS = ("fftshift", "ifftshift")   # plain Python functions, not multimethods
_DROPPED = ("overwrite_x", "workers", "plan")


def _as_numpy(name):
    numpy_function = getattr(np.fft, name)

    def staged(*args, **kwargs):
        if kwargs.get("plan") is not None:
            raise unsupported_error(f"scipy.fft.{name}(..., plan=...)")
        for key in _DROPPED:
            kwargs.pop(key, None)
        return numpy_function(*args, **kwargs)
    staged.__name__ = name
    return staged


_STAGED = {name: _as_numpy(name) for name in SAME_AS_NUMPY}


class StagingBackend:
    """The uarray backend of scipy.fft's multimethods under staging. Registered backends are
    tried before SciPy's own (SciPy sets its global backend with `try_last=True`); declining
    (NotImplemented) costs a call without tracers one Python call and a type check.

    >>> import scipy.fft
    >>> x = np.array([1.0, 2.0, 0.0])
    >>> g = xform.grad(lambda x: np.sum(np.abs(scipy.fft.fft(x)) ** 2))(x)   # Parseval: 2 n x
    >>> np.allclose(g, 6 * x)
    True
    """

    __ua_domain__ = "numpy.scipy.fft"

    @staticmethod
    def __ua_function__(method, args, kwargs):
        if not (contains_tracer(args) or contains_tracer(kwargs)):
            return NotImplemented
        staged = _STAGED.get(method.__name__)
        if staged is None:
            raise unsupported_error(f"scipy.fft.{method.__name__}")
        return staged(*args, **kwargs)


def _install():
    import scipy.fft
    scipy.fft.register_backend(StagingBackend)
    for name in _HELPERS:
        stand_in(getattr(scipy.fft, name), _STAGED[name])


stand_in_when_imported("scipy.fft", _install, SCIPY_GROUP)
