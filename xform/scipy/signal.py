"""scipy.signal on tracers: convolve and correlate (modes full/same/valid, n-d, any method),
fftconvolve and oaconvolve, convolve2d and correlate2d (every boundary), over xform's
convolution primitive (xform/rules/signal.py)."""
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


# SciPy's boundary names -> np.pad's modes
_BOUNDARIES = {"fill": "constant", "pad": "constant", "symm": "symmetric",
               "symmetric": "symmetric", "wrap": "wrap", "circular": "wrap"}


def _extended(in1, in2, mode, boundary, fillvalue, name, centre):
    """SciPy's 2-d convolution of in1 extended past its edges as `boundary` says (padded by
    the kernel's extent less one: the "valid" part is SciPy's "full"); "same" is the window
    of in1's shape whose start `centre` gives from the spare length."""
    x, k = staged_array(in1), staged_array(in2)
    if aval(x).ndim != 2 or aval(k).ndim != 2:
        raise shape_error(f"scipy.signal.{name}: in1 and in2 should both be 2-D arrays")
    if boundary not in _BOUNDARIES:
        raise shape_error(f"scipy.signal.{name}: acceptable boundary flags are 'fill', "
                          f"'wrap' and 'symm', got {boundary!r}")
    if mode == "valid":
        return convolve(x, k, mode)
    if mode not in ("full", "same"):
        raise shape_error(f"scipy.signal.{name}: acceptable mode flags are 'valid', "
                          f"'same', or 'full', got {mode!r}")
    widths = [(n - 1, n - 1) for n in aval(k).shape]
    options = {"constant_values": fillvalue} if _BOUNDARIES[boundary] == "constant" else {}
    full = convolve(np.pad(x, widths, mode=_BOUNDARIES[boundary], **options), k, "valid")
    if mode == "full":
        return full
    starts = [centre(f - n) for f, n in zip(aval(full).shape, aval(x).shape)]
    return full[tuple(slice(s, s + n) for s, n in zip(starts, aval(x).shape))]


def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0):
    """scipy.signal.convolve2d, every mode and boundary."""
    return _extended(in1, in2, mode, boundary, fillvalue, "convolve2d", lambda n: n // 2)


def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0):
    """scipy.signal.correlate2d: convolve2d with the second input reversed (and conjugated),
    its "same" window starting half a sample later where the spare length is odd."""
    k = staged_array(in2)
    flipped = np.conj(np.flip(k)) if aval(k).dtype.kind == "c" else np.flip(k)
    return _extended(in1, flipped, mode, boundary, fillvalue, "correlate2d",
                     lambda n: (n + 1) // 2)


STAND_INS = ("convolve", "correlate", "fftconvolve", "oaconvolve", "convolve2d",
             "correlate2d")


def _install():
    import scipy.signal
    for name in STAND_INS:
        stand_in(getattr(scipy.signal, name), globals()[name])


stand_in_when_imported("scipy.signal", _install)
