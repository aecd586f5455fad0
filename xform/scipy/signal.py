"""scipy.signal on tracers: convolve and correlate (modes full/same/valid, n-d, any method),
fftconvolve and oaconvolve, over xform's convolution primitive (xform/rules/signal.py)."""
from __future__ import annotations

import numpy as np

from xform.errors import shape_error, unsupported_error
from xform.ir.ad import aval
from xform.numpy.construct import staged_array
from xform.numpy.stand_ins import stand_in, stand_in_when_imported
from xform.rules.signal import convolve_p

_METHODS = ("auto", "direct", "fft")


def convolve(in1, in2, mode="full", method="auto"):
    """scipy.signal.convolve: "same" is the centre of "full"; "valid" takes the larger input
    first (convolution commutes), as SciPy does."""
    x, k = staged_array(in1), staged_array(in2)
    if method not in _METHODS:
        raise shape_error(f"scipy.signal.convolve: unknown method {method!r}")
    if aval(x).ndim != aval(k).ndim:
        raise shape_error("scipy.signal.convolve: in1 and in2 should have the same "
                          "dimensionality")
    if aval(x).ndim == 0:
        return x * k
    if mode == "valid":
        small = all(a <= b for a, b in zip(aval(x).shape, aval(k).shape))
        if small and aval(x).shape != aval(k).shape:
            x, k = k, x
        elif not all(a >= b for a, b in zip(aval(x).shape, aval(k).shape)):
            raise shape_error("scipy.signal.convolve: for 'valid' mode, one must be at least "
                              "as large as the other in every dimension")
        return convolve_p.bind(x, k, mode="valid", method=method)
    if mode not in ("full", "same"):
        raise shape_error(f"scipy.signal.convolve: acceptable mode flags are 'valid', "
                          f"'same', or 'full', got {mode!r}")
    full = convolve_p.bind(x, k, mode="full", method=method)
    if mode == "full":
        return full
    starts = [(f - n) // 2 for f, n in zip(aval(full).shape, aval(x).shape)]
    return full[tuple(slice(s, s + n) for s, n in zip(starts, aval(x).shape))]


def correlate(in1, in2, mode="full", method="auto"):
    """scipy.signal.correlate: convolution with the second input reversed (and conjugated)."""
    k = staged_array(in2)
    return convolve(in1, np.conj(np.flip(k)) if aval(k).dtype.kind == "c" else np.flip(k),
                    mode, method)


def fftconvolve(in1, in2, mode="full", axes=None):
    """scipy.signal.fftconvolve (over all axes)."""
    if axes is not None:
        raise unsupported_error("scipy.signal.fftconvolve(..., axes=...)")
    return convolve(in1, in2, mode, "fft")


def oaconvolve(in1, in2, mode="full", axes=None):
    """scipy.signal.oaconvolve (over all axes), computed as fftconvolve."""
    if axes is not None:
        raise unsupported_error("scipy.signal.oaconvolve(..., axes=...)")
    return convolve(in1, in2, mode, "fft")


STAND_INS = ("convolve", "correlate", "fftconvolve", "oaconvolve")


def _install():
    import scipy.signal
    for name in STAND_INS:
        stand_in(getattr(scipy.signal, name), globals()[name])


stand_in_when_imported("scipy.signal", _install)
