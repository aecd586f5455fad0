"""numpy.fft on tracers: fft, ifft, rfft, irfft and their 2-d and n-d forms (one `fft`
primitive each, with numpy's `n`/`s`, `axes` and `norm`), hfft and ihfft (as numpy writes
them over irfft and rfft), fftshift and ifftshift. fftfreq and
rfftfreq need nothing: numpy computes them with ufuncs, which stage a traced `d`."""
import numpy as np

from xform.errors import shape_error, unsupported_error
from xform.ir.ad import aval
from xform.numpy.axes import normalize_axis
from xform.numpy.protocol import implements
from xform.numpy.shape import roll
from xform.rules.fft import fft_p
from xform.rules.unary import astype

_NORMS = {None: "backward", "backward": "backward", "ortho": "ortho", "forward": "forward"}


def _transform(name, kind, a, s, axes, norm, out):
    """Check numpy's arguments of `numpy.fft.<name>`, then bind one `fft` equation."""
    if out is not None:
        raise unsupported_error(f"numpy.fft.{name}(..., out=...)")
    if norm not in _NORMS:
        raise shape_error(f'{name}: invalid norm value {norm}; should be "backward", '
                          '"ortho" or "forward".')
    shape = aval(a).shape
    if axes is None:
        axes = tuple(range(len(shape))) if s is None else tuple(range(-len(s), 0))
    axes = tuple(normalize_axis(int(ax), len(shape)) for ax in axes)
    if len(set(axes)) != len(axes):
        raise unsupported_error(f"numpy.fft.{name} with a repeated axis")
    if not axes:
        raise unsupported_error(f"numpy.fft.{name} over no axes")
    if s is None:
        s = [shape[ax] for ax in axes]
        if kind == "irfft":
            s[-1] = 2 * (s[-1] - 1)
    elif len(s) != len(axes):
        raise shape_error(f"{name}: shape and axes have different lengths")
    lengths = tuple(int(n) for n in s)
    if any(n < 1 for n in lengths):
        raise shape_error(f"{name}: invalid number of data points ({min(lengths)}) specified")
    dtype = aval(a).dtype
    if kind == "rfft" and dtype.kind == "c":
        raise shape_error(f"{name}: input must be real, got {dtype}")
    if dtype.kind not in "fc":
        a = astype(a, np.float64)
    return fft_p.bind(a, kind=kind, axes=axes, lengths=lengths, norm=_NORMS[norm])


def _one_axis(name, kind):
    def transform(a, n=None, axis=-1, norm=None, out=None):
        return _transform(name, kind, a, None if n is None else (n,), (axis,), norm, out)
    transform.__name__ = name
    transform.__doc__ = f"`numpy.fft.{name}` along one axis, with numpy's `n` and `norm`."
    return transform


def _many_axes(name, kind, default_axes):
    def transform(a, s=None, axes=default_axes, norm=None, out=None):
        return _transform(name, kind, a, s, axes, norm, out)
    transform.__name__ = name
    transform.__doc__ = f"`numpy.fft.{name}` over `axes`, with numpy's `s` and `norm`."
    return transform


for _kind in ("fft", "ifft", "rfft", "irfft"):
    implements(getattr(np.fft, _kind))(_one_axis(_kind, _kind))
    implements(getattr(np.fft, _kind + "2"))(_many_axes(_kind + "2", _kind, (-2, -1)))
    implements(getattr(np.fft, _kind + "n"))(_many_axes(_kind + "n", _kind, None))


# numpy's hfft/ihfft: irfft/rfft of the conjugate, normalised the other way round
_SWAPPED_NORM = {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}


def _swapped_norm(norm):
    if norm not in _SWAPPED_NORM:
        raise shape_error(f'invalid norm value {norm}; should be "backward", "ortho" or '
                          '"forward".')
    return _SWAPPED_NORM[norm]


@implements(np.fft.hfft)
def hfft(a, n=None, axis=-1, norm=None, out=None):
    """`numpy.fft.hfft`: the real spectrum of a Hermitian-symmetric signal (n defaults to
    2 (m - 1)), numpy's irfft of the conjugate."""
    if out is not None:
        raise unsupported_error("numpy.fft.hfft(..., out=...)")
    return np.fft.irfft(np.conjugate(a), n, axis, norm=_swapped_norm(norm))


@implements(np.fft.ihfft)
def ihfft(a, n=None, axis=-1, norm=None, out=None):
    """`numpy.fft.ihfft`: the inverse of hfft, numpy's conjugated rfft."""
    if out is not None:
        raise unsupported_error("numpy.fft.ihfft(..., out=...)")
    return np.conjugate(np.fft.rfft(a, n, axis, norm=_swapped_norm(norm)))


def _shift(x, axes, sign):
    shape = aval(x).shape
    if axes is None:
        axes = tuple(range(len(shape)))
    elif isinstance(axes, (int, np.integer)):
        axes = (int(axes),)
    shifts = [sign * (shape[normalize_axis(int(ax), len(shape))] // 2) for ax in axes]
    return roll(x, shifts, tuple(axes))


@implements(np.fft.fftshift)
def fftshift(x, axes=None):
    """`numpy.fft.fftshift`: the zero frequency to the centre (a roll by half of each axis).

    >>> xform.jit(np.fft.fftshift)(np.arange(5.0))
    array([3., 4., 0., 1., 2.])
    """
    return _shift(x, axes, 1)


@implements(np.fft.ifftshift)
def ifftshift(x, axes=None):
    """`numpy.fft.ifftshift`: the inverse of fftshift (a roll by minus half of each axis)."""
    return _shift(x, axes, -1)
