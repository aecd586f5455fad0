"""scipy.signal on tracers: convolve and correlate (modes full/same/valid, n-d, any method),
fftconvolve and oaconvolve, convolve2d and correlate2d (every boundary), over xform's
convolution primitive; lfilter (with `zi` too), sosfilt and filtfilt over its filter
primitive (xform/rules/signal.py); welch and periodogram of real signals, from numpy's FFT;
dlsim's state-space recursion; find_peaks by height."""
from __future__ import annotations

import warnings

import numpy as np

from xform.errors import shape_error, unsupported_error
from xform.ir.ad import aval
from xform.ir.tracer import Tracer
from xform.numpy.construct import staged_array
from xform.numpy.stand_ins import contains_tracer, stand_in, stand_in_when_imported
from xform.rules.signal import convolve_p, lfilter_p
from xform.scipy import SCIPY_GROUP

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


def lfilter(b, a, x, axis=-1, zi=None):
    """scipy.signal.lfilter of real values: from rest, or from the state `zi` (then also the
    final state, as SciPy's direct form II transposed leaves it)."""
    b, a, x = staged_array(b), staged_array(a), staged_array(x)
    if any(aval(v).dtype.kind == "c" for v in (b, a, x)):
        raise unsupported_error("scipy.signal.lfilter of complex values")
    if aval(b).ndim != 1 or aval(a).ndim != 1:
        raise shape_error("scipy.signal.lfilter: the coefficients b and a must be 1-d")
    signal = np.moveaxis(x, axis, -1)
    y = lfilter_p.bind(b, a, signal)
    if zi is None:
        return np.moveaxis(y, -1, axis)
    order = max(aval(a).shape[0], aval(b).shape[0]) - 1
    length = aval(signal).shape[-1]
    state = np.moveaxis(staged_array(zi), axis, -1)
    if aval(state).shape[-1] != order or length < order:
        raise shape_error(f"scipy.signal.lfilter: zi must hold {order} states along the axis "
                          f"of a signal at least as long")
    # SciPy's coefficients divided by a[0], padded to one length
    b = np.pad(b, (0, order + 1 - aval(b).shape[0])) / a[0]
    a = np.pad(a, (0, order + 1 - aval(a).shape[0])) / a[0]
    # the state's response: 1/a of the states as the first samples
    widths = [(0, 0)] * (aval(state).ndim - 1) + [(0, length - order)]
    y = y + lfilter_p.bind(np.ones(1), a, np.broadcast_to(np.pad(state, widths),
                                                         aval(y).shape))
    tail_x, tail_y = np.flip(signal[..., length - order:], -1), np.flip(y[..., length - order:], -1)
    final = np.stack([np.sum(b[i + 1:] * tail_x[..., :order - i]
                             - a[i + 1:] * tail_y[..., :order - i], axis=-1)
                      for i in range(order)], axis=-1)
    return np.moveaxis(y, -1, axis), np.moveaxis(final, -1, axis)


def sosfilt(sos, x, axis=-1, zi=None):
    """scipy.signal.sosfilt from rest: the second-order sections one after another."""
    if zi is not None:
        raise unsupported_error("scipy.signal.sosfilt(..., zi=...)")
    sos = staged_array(sos)
    if aval(sos).ndim != 2 or aval(sos).shape[1] != 6:
        raise shape_error("scipy.signal.sosfilt: sos array must be shape (n_sections, 6)")
    for section in range(aval(sos).shape[0]):
        x = lfilter(sos[section, :3], sos[section, 3:], x, axis)
    return x


def filtfilt(b, a, x, axis=-1, padtype="odd", padlen=None, method="pad", irlen=None):
    """scipy.signal.filtfilt, method "pad": the signal extended at both ends as `padtype`
    says, filtered forwards and backwards from SciPy's steady states, the extension cut."""
    import scipy.signal
    from scipy.signal._arraytools import const_ext, even_ext, odd_ext
    if method != "pad":
        raise unsupported_error(f"scipy.signal.filtfilt(..., method={method!r})")
    b, a = staged_array(b), staged_array(a)
    if type(b) is Tracer or type(a) is Tracer:
        raise unsupported_error("scipy.signal.filtfilt of traced coefficients")
    x = np.moveaxis(staged_array(x), axis, -1)
    extensions = {"odd": odd_ext, "even": even_ext, "constant": const_ext, None: None}
    if padtype not in extensions:
        raise shape_error(f"Unknown value '{padtype}' given to padtype.  padtype must be "
                          f"'even', 'odd', 'constant', or None.")
    edge = 0 if padtype is None else 3 * max(len(a), len(b)) if padlen is None else padlen
    if aval(x).shape[-1] <= edge:
        raise shape_error(f"The length of the input vector x must be greater than padlen, "
                          f"which is {edge}.")
    extended = extensions[padtype](x, edge, axis=-1) if edge > 0 else x
    steady = scipy.signal.lfilter_zi(b, a)
    y, _ = lfilter(b, a, extended, zi=steady * extended[..., :1])
    y, _ = lfilter(b, a, np.flip(y, -1), zi=steady * y[..., -1:])
    y = np.flip(y, -1)
    return np.moveaxis(y[..., edge:aval(y).shape[-1] - edge], -1, axis)


def welch(x, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
          detrend="constant", return_onesided=True, scaling="density", axis=-1,
          average="mean"):
    """scipy.signal.welch of a real signal: the mean (or median) of the windowed segments'
    periodograms, as SciPy scales them."""
    import scipy.signal
    x = np.moveaxis(staged_array(x), axis, -1)
    if aval(x).dtype.kind == "c":
        raise unsupported_error("scipy.signal.welch of a complex signal")
    if detrend not in ("constant", False) or average not in ("mean", "median") or \
            scaling not in ("density", "spectrum"):
        raise unsupported_error(f"scipy.signal.welch(..., detrend={detrend!r}, "
                                f"scaling={scaling!r}, average={average!r})")
    length = aval(x).shape[-1]
    if nperseg is None:
        nperseg = 256 if isinstance(window, (str, tuple)) else len(window)
    if nperseg > length:
        warnings.warn(f"nperseg = {nperseg:d} is greater than input length  = {length:d}, "
                      f"using nperseg = {length:d}", stacklevel=2)
        nperseg = length
    taper = scipy.signal.get_window(window, nperseg) if isinstance(window, (str, tuple)) \
        else np.asarray(window, float)
    noverlap = nperseg // 2 if noverlap is None else noverlap
    nfft = nperseg if nfft is None else nfft
    step = nperseg - noverlap
    segments = np.stack([x[..., start:start + nperseg]
                         for start in range(0, length - nperseg + 1, step)], axis=-2)
    if detrend == "constant":
        segments = segments - np.mean(segments, axis=-1, keepdims=True)
    scale = 1.0 / (fs * np.sum(taper * taper)) if scaling == "density" else \
        1.0 / np.sum(taper) ** 2
    if return_onesided:
        spectra = np.abs(np.fft.rfft(segments * taper, nfft)) ** 2 * scale
        doubled = np.ones(nfft // 2 + 1)
        doubled[1:(nfft + 1) // 2] = 2.0        # all but DC and an even length's Nyquist
        spectra = spectra * doubled
        freqs = np.fft.rfftfreq(nfft, 1 / fs)
    else:
        spectra = np.abs(np.fft.fft(segments * taper, nfft)) ** 2 * scale
        freqs = np.fft.fftfreq(nfft, 1 / fs)
    if average == "mean":
        power = np.mean(spectra, axis=-2)
    else:
        # SciPy's median, corrected by its bias for the number of segments
        power = np.median(spectra, axis=-2) / scipy.signal._spectral_py._median_bias(
            aval(spectra).shape[-2])
    return freqs, np.moveaxis(power, -1, axis)


def periodogram(x, fs=1.0, window="boxcar", nfft=None, detrend="constant",
                return_onesided=True, scaling="density", axis=-1):
    """scipy.signal.periodogram: welch's estimate with one segment, the whole signal."""
    length = aval(staged_array(x)).shape[axis]
    return welch(x, fs, window, length, 0, nfft, detrend, return_onesided, scaling, axis)


def find_peaks(x, height=None, threshold=None, distance=None, prominence=None, width=None,
               wlen=None, rel_height=0.5, plateau_size=None):
    """scipy.signal.find_peaks of a traced 1-d signal, by `height` only: the samples above both
    neighbours (their count read from the call's values, a guard), as SciPy finds them where
    no two neighbours are equal (a flat peak, SciPy's midpoint, is refused at the line)."""
    if any(v is not None for v in (threshold, distance, prominence, width, wlen,
                                   plateau_size)):
        raise unsupported_error("scipy.signal.find_peaks with other conditions than height")
    x = staged_array(x)
    if aval(x).ndim != 1:
        raise shape_error("scipy.signal.find_peaks: `x` must be a 1-D array")
    if bool(np.any(x[1:] == x[:-1])):
        raise unsupported_error("scipy.signal.find_peaks of a signal with two equal "
                                "neighbours (a flat peak)")
    middle = x[1:-1]
    found = (middle > x[:-2]) & (middle > x[2:])
    properties = {}
    if height is not None:
        low, high = height if isinstance(height, tuple) else (height, None)
        if low is not None:
            found = found & (middle >= low)
        if high is not None:
            found = found & (middle <= high)
    peaks = np.nonzero(found)[0] + 1
    if height is not None:
        properties["peak_heights"] = x[peaks]
    return peaks, properties


def _state_space(system):
    """(A, B, C, D, dt) of a discrete system: a dlti object, or SciPy's tuple forms."""
    import scipy.signal
    if isinstance(system, tuple) and len(system) == 5:
        return tuple(np.atleast_2d(staged_array(m)) for m in system[:4]) + (system[4],)
    if isinstance(system, tuple):
        if contains_tracer(system):
            raise unsupported_error("scipy.signal.dlsim of a traced transfer function or "
                                    "zeros-poles-gain tuple (a state-space tuple stages)")
        system = scipy.signal.dlti(*system[:-1], dt=system[-1])
    if not isinstance(system, scipy.signal.StateSpace):
        system = system._as_ss()
    return system.A, system.B, system.C, system.D, system.dt


def dlsim(system, u, t=None, x0=None):
    """scipy.signal.dlsim at the system's own sample times: (t, y, x) of the state-space
    recursion x[k+1] = A x[k] + B u[k], y[k] = C x[k] + D u[k] (x of a state-space system)."""
    if t is not None:
        raise unsupported_error("scipy.signal.dlsim(..., t=...) (an input resampled onto t)")
    import scipy.signal
    a, b, c, d, dt = _state_space(system)
    u = staged_array(u)
    inputs = u[:, None] if aval(u).ndim == 1 else u
    samples = aval(inputs).shape[0]
    state = np.zeros(aval(a).shape[0]) if x0 is None else staged_array(x0)
    states, outputs = [], []
    for k in range(samples):
        states.append(state)
        outputs.append(c @ state + d @ inputs[k])
        state = a @ state + b @ inputs[k]
    times = np.linspace(0.0, (samples - 1) * dt, num=samples)
    # as SciPy's: the states only of a system given in state-space form
    given_states = (isinstance(system, tuple) and len(system) == 5) or isinstance(
        system, scipy.signal.StateSpace)
    return (times, np.stack(outputs), np.stack(states)) if given_states else (
        times, np.stack(outputs))


STAND_INS = ("convolve", "correlate", "fftconvolve", "oaconvolve", "convolve2d",
             "correlate2d", "lfilter", "sosfilt", "filtfilt", "welch", "periodogram",
             "find_peaks")


def _install():
    import scipy.signal
    for name in STAND_INS:
        stand_in(getattr(scipy.signal, name), globals()[name])
    # a system object holds its traced matrices where no argument shows them
    stand_in(scipy.signal.dlsim, dlsim, when=lambda args, kwargs: True)


stand_in_when_imported("scipy.signal", _install, SCIPY_GROUP)
