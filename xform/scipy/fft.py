"""scipy.fft on tracers: each function is numpy.fft's on traced values (xform's numpy.fft
implementations), stood in as a module attribute while staging. SciPy's FFT functions are
uarray multimethods, not Python functions, so `scipy.fft.fft(x)` and `sf.fft(x)` are covered;
a name imported with `from scipy.fft import fft` keeps SciPy's own.
"""
from __future__ import annotations

import numpy as np

from xform.errors import unsupported_error
from xform.numpy.stand_ins import stand_in, stand_in_when_imported

# scipy.fft name -> the numpy.fft function computing the same (SciPy's extra keywords
# `overwrite_x`, `workers`, `plan` do not change values and are dropped)
SAME_AS_NUMPY = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2",
                 "irfft2", "fftn", "ifftn", "rfftn", "irfftn", "fftshift", "ifftshift")
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


def _install():
    import scipy.fft
    for name in SAME_AS_NUMPY:
        stand_in((scipy.fft, name), _as_numpy(name))


stand_in_when_imported("scipy.fft", _install)
