"""scipy.ndimage's filters on tracers: correlate1d/convolve1d, correlate/convolve, the
Gaussian, uniform, Sobel, Prewitt and Laplace filters (linear: sums of shifted copies of the
input extended at its edges as `mode` says), and the median, minimum and maximum filters
over a box (an order statistic of the shifted copies). Float inputs; SciPy's values up to
rounding (the sums run in another order)."""
from __future__ import annotations

import numpy as np

from xform.errors import shape_error, unsupported_error
from xform.ir.ad import aval
from xform.numpy.construct import staged_array
from xform.numpy.stand_ins import stand_in

# ndimage's edge modes -> np.pad's
_MODES = {"reflect": "symmetric", "grid-mirror": "symmetric", "mirror": "reflect",
          "nearest": "edge", "wrap": "wrap", "grid-wrap": "wrap", "constant": "constant",
          "grid-constant": "constant"}


def _float_input(input, name):
    x = staged_array(input)
    if aval(x).dtype.kind != "f":
        raise unsupported_error(f"scipy.ndimage.{name} of a {aval(x).dtype} array (xform's "
                                f"version filters floats)")
    return x


def _extended(x, axis, before, after, mode, cval):
    """`x` extended along `axis` by `before` and `after` elements, as ndimage's `mode`."""
    if mode not in _MODES:
        raise shape_error(f"scipy.ndimage: boundary mode not supported: {mode!r}")
    widths = [(0, 0)] * aval(x).ndim
    widths[axis] = (before, after)
    options = {"constant_values": cval} if _MODES[mode] == "constant" else {}
    return np.pad(x, widths, mode=_MODES[mode], **options)


def _shifted(x, axis, size, origin, mode, cval):
    """The copies of `x` shifted by each of a window's `size` positions along `axis`: the
    j-th holds x[i + j - centre] at i (centre = size // 2 + origin)."""
    centre = size // 2 + origin
    if not 0 <= centre < size:
        raise shape_error("scipy.ndimage: invalid origin")
    padded = _extended(x, axis, centre, size - 1 - centre, mode, cval)
    n = aval(x).shape[axis]
    return [np.take(padded, np.arange(j, j + n), axis=axis) for j in range(size)]


def correlate1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    """scipy.ndimage.correlate1d: sum_j weights[j] x[i + j - centre] along `axis`."""
    if output is not None:
        raise unsupported_error("scipy.ndimage.correlate1d(..., output=...)")
    x, weights = _float_input(input, "correlate1d"), staged_array(weights)
    if aval(weights).ndim != 1 or aval(weights).shape[0] == 0:
        raise shape_error("scipy.ndimage.correlate1d: no filter weights given")
    axis = axis % aval(x).ndim
    copies = _shifted(x, axis, aval(weights).shape[0], origin, mode, cval)
    return sum(weights[j] * copy for j, copy in enumerate(copies))


def convolve1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    """scipy.ndimage.convolve1d: correlate1d with the weights reversed (and the origin with
    them, as SciPy moves it)."""
    weights = np.flip(staged_array(weights))
    origin = -origin - (1 if aval(weights).shape[0] % 2 == 0 else 0)
    return correlate1d(input, weights, axis, output, mode, cval, origin)


def correlate(input, weights, output=None, mode="reflect", cval=0.0, origin=0):
    """scipy.ndimage.correlate: sum over the kernel's positions of weight times the input
    shifted there."""
    if output is not None:
        raise unsupported_error("scipy.ndimage.correlate(..., output=...)")
    x, weights = _float_input(input, "correlate"), staged_array(weights)
    rank = aval(x).ndim
    if aval(weights).ndim != rank:
        raise shape_error("scipy.ndimage.correlate: filter weights array has incorrect shape.")
    origins = np.broadcast_to(origin, (rank,))
    # shifted copies along each axis in turn: copies[(j0, j1, ...)] = x[i + j - centre]
    copies = {(): x}
    for axis in range(rank):
        size = aval(weights).shape[axis]
        copies = {key + (j,): shifted for key, value in copies.items()
                  for j, shifted in enumerate(_shifted(value, axis, size, int(origins[axis]),
                                                       mode, cval))}
    return sum(weights[key] * copy for key, copy in copies.items())


def convolve(input, weights, output=None, mode="reflect", cval=0.0, origin=0):
    """scipy.ndimage.convolve: correlate with the kernel reversed on every axis."""
    weights = staged_array(weights)
    origins = np.broadcast_to(origin, (aval(weights).ndim,))
    origins = [-o - (1 if n % 2 == 0 else 0) for o, n in zip(origins, aval(weights).shape)]
    return correlate(input, np.flip(weights), output, mode, cval, origins)


def _axes_of(x, axes):
    rank = aval(x).ndim
    return list(range(rank)) if axes is None else [a % rank for a in np.atleast_1d(axes)]


def gaussian_filter1d(input, sigma, axis=-1, order=0, output=None, mode="reflect", cval=0.0,
                      truncate=4.0, *, radius=None):
    """scipy.ndimage.gaussian_filter1d: correlation with SciPy's own Gaussian kernel."""
    from scipy.ndimage._filters import _gaussian_kernel1d
    sd = float(sigma)
    lw = int(truncate * sd + 0.5) if radius is None else radius
    weights = _gaussian_kernel1d(sigma, order, lw)[::-1]
    return correlate1d(input, weights, axis, output, mode, cval, 0)


def gaussian_filter(input, sigma, order=0, output=None, mode="reflect", cval=0.0,
                    truncate=4.0, *, radius=None, axes=None):
    """scipy.ndimage.gaussian_filter: the 1-d filter along each axis in turn."""
    x = _float_input(input, "gaussian_filter")
    axes = _axes_of(x, axes)
    per_axis = [np.broadcast_to(value, (len(axes),)) if value is not None else [None] * len(axes)
                for value in (sigma, order, mode, radius)]
    for axis, sd, derivative, edge, extent in zip(axes, *per_axis):
        if sd > 1e-15:
            x = gaussian_filter1d(x, sd, axis, int(derivative), None, str(edge), cval,
                                  truncate, radius=None if extent is None else int(extent))
    return x


def uniform_filter1d(input, size, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    """scipy.ndimage.uniform_filter1d: the mean over a window of `size`."""
    if size < 1:
        raise shape_error("scipy.ndimage.uniform_filter1d: incorrect filter size")
    return correlate1d(input, np.full(size, 1.0 / size), axis, output, mode, cval, origin)


def uniform_filter(input, size=3, output=None, mode="reflect", cval=0.0, origin=0, *,
                   axes=None):
    """scipy.ndimage.uniform_filter: the 1-d filter along each axis in turn."""
    x = _float_input(input, "uniform_filter")
    axes = _axes_of(x, axes)
    sizes, origins = (np.broadcast_to(v, (len(axes),)) for v in (size, origin))
    for axis, n, shift in zip(axes, sizes, origins):
        if n > 1:
            x = uniform_filter1d(x, int(n), axis, None, mode, cval, int(shift))
    return x


def _derivative_filter(name, smoothing):
    def derivative(input, axis=-1, output=None, mode="reflect", cval=0.0):
        x = _float_input(input, name)
        axis = axis % aval(x).ndim
        x = correlate1d(x, [-1.0, 0.0, 1.0], axis, output, mode, cval)
        for other in range(aval(x).ndim):
            if other != axis:
                x = correlate1d(x, smoothing, other, output, mode, cval)
        return x
    derivative.__name__ = name
    derivative.__doc__ = (f"scipy.ndimage.{name}: the central difference along `axis`, "
                          f"smoothed by {smoothing} along the others.")
    return derivative


sobel = _derivative_filter("sobel", [1.0, 2.0, 1.0])
prewitt = _derivative_filter("prewitt", [1.0, 1.0, 1.0])


def laplace(input, output=None, mode="reflect", cval=0.0, *, axes=None):
    """scipy.ndimage.laplace: the second differences summed over the axes."""
    x = _float_input(input, "laplace")
    return sum(correlate1d(x, [1.0, -2.0, 1.0], axis, output, mode, cval)
               for axis in _axes_of(x, axes))


def _box_filter(name, reduce):
    def box(input, size=None, footprint=None, output=None, mode="reflect", cval=0.0,
            origin=0, *, axes=None):
        if footprint is not None or size is None or output is not None or axes is not None:
            raise unsupported_error(f"scipy.ndimage.{name} other than over a box `size`")
        x = _float_input(input, name)
        rank = aval(x).ndim
        sizes, origins = (np.broadcast_to(v, (rank,)) for v in (size, origin))
        copies = [x]
        for axis in range(rank):
            copies = [shifted for copy in copies for shifted in
                      _shifted(copy, axis, int(sizes[axis]), int(origins[axis]), mode, cval)]
        return reduce(np.stack(copies), axis=0)
    box.__name__ = name
    box.__doc__ = f"scipy.ndimage.{name} over a box `size`: the {name[:-7]} of its window."
    return box


def _middle(window, axis):
    """The element at rank size // 2 of the sorted window: the median for an odd window, the
    upper of the two middle elements for an even one (SciPy's rank, not numpy's mean)."""
    return np.sort(window, axis=axis)[aval(window).shape[axis] // 2]


median_filter = _box_filter("median_filter", _middle)
minimum_filter = _box_filter("minimum_filter", np.min)
maximum_filter = _box_filter("maximum_filter", np.max)

STAND_INS = ("correlate1d", "convolve1d", "correlate", "convolve", "gaussian_filter1d",
             "gaussian_filter", "uniform_filter1d", "uniform_filter", "sobel", "prewitt",
             "laplace", "median_filter", "minimum_filter", "maximum_filter")


def _install():
    import scipy.ndimage
    for name in STAND_INS:
        stand_in(getattr(scipy.ndimage, name), globals()[name])


_install()
