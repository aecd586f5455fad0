"""scipy.ndimage's filters on tracers: correlate1d/convolve1d, correlate/convolve, the
Gaussian, uniform, Sobel, Prewitt and Laplace filters (linear: sums of shifted copies of the
input extended at its edges as `mode` says), and the median, minimum and maximum filters
over a box (an order statistic of the shifted copies); map_coordinates, shift and zoom of
order 1 (linear interpolation, in the image and the coordinates). Float inputs; SciPy's
values up to rounding (the sums run in another order)."""
from __future__ import annotations

import numpy as np

from xform.errors import shape_error, unsupported_error
from xform.ir.ad import aval
from xform.numpy.construct import staged_array
from xform.numpy.index import take
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

def _corner_index(k, n, mode):
    """The input index of extended position `k` (an integer array) along an axis of length
    `n`, as ndimage extends it; None where it is off the input (cval's)."""
    if mode == "reflect":           # ... x1 x0 | x0 x1 ... x(n-1) | x(n-1) ...
        k = np.mod(k, 2 * n)
        return np.where(k >= n, 2 * n - 1 - k, k)
    if mode == "mirror":            # ... x2 x1 | x0 x1 ... x(n-1) | x(n-2) ...
        period = max(2 * (n - 1), 1)
        k = np.mod(k, period)
        return np.where(k >= n, period - k, k)
    return np.clip(k, 0, n - 1)     # nearest, and the constant modes' inside


def map_coordinates(input, coordinates, output=None, order=3, mode="constant", cval=0.0,
                    prefilter=True):
    """scipy.ndimage.map_coordinates of order 1: the input interpolated linearly between its
    2^d neighbours at each (traced or concrete) coordinate, extended as `mode` says."""
    if order != 1 or output is not None:
        raise unsupported_error(f"scipy.ndimage.map_coordinates(..., order={order}) (xform's "
                                f"version interpolates linearly: order=1)")
    if mode not in ("constant", "grid-constant", "nearest", "reflect", "mirror"):
        raise unsupported_error(f"scipy.ndimage.map_coordinates(..., mode={mode!r})")
    x, coordinates = _float_input(input, "map_coordinates"), staged_array(coordinates)
    rank, shape = aval(x).ndim, aval(x).shape
    if aval(coordinates).shape[0] != rank:
        raise shape_error("scipy.ndimage.map_coordinates: invalid shape for coordinate array")
    inside = None
    lows, fractions = [], []
    for axis in range(rank):
        c, n = coordinates[axis].astype(float), shape[axis]
        if mode == "nearest":
            c = np.clip(c, 0, n - 1)
        if mode in ("constant", "nearest"):
            # inside [0, n - 1], the last sample the upper end of the last interval
            low = np.clip(np.floor(c), 0, max(n - 2, 0))
            if mode == "constant":
                valid = (c >= 0) & (c <= n - 1)
                inside = valid if inside is None else inside & valid
        else:
            low = np.floor(c)
        lows.append(low.astype(np.intp))
        fractions.append(c - low)
    result = 0.0
    for corner in np.ndindex(*(2,) * rank):
        weight, index, on_input = 1.0, [], None
        for axis, step in enumerate(corner):
            k = lows[axis] + step
            weight = weight * (fractions[axis] if step else 1 - fractions[axis])
            index.append(_corner_index(k, shape[axis], mode))
            if mode == "grid-constant":
                valid = (k >= 0) & (k <= shape[axis] - 1)
                on_input = valid if on_input is None else on_input & valid
        # a gather by flat positions: the image may be concrete, the positions traced
        flat = sum(i * int(np.prod(shape[axis + 1:])) for axis, i in enumerate(index))
        value = take(x, flat)      # xform's: numpy's take dispatches on the array only
        if on_input is not None:
            value = np.where(on_input, value, cval)
        result = result + weight * value
    return result if inside is None else np.where(inside, result, cval)


def _grid(shape):
    return np.stack(np.meshgrid(*[np.arange(float(n)) for n in shape], indexing="ij"))


def shift(input, shift, output=None, order=3, mode="constant", cval=0.0, prefilter=True):
    """scipy.ndimage.shift of order 1: the input at each output position less `shift`."""
    x = _float_input(input, "shift")
    rank = aval(x).ndim
    offsets = np.broadcast_to(staged_array(shift), (rank,))
    coordinates = _grid(aval(x).shape) - np.reshape(offsets, (rank,) + (1,) * rank)
    return map_coordinates(x, coordinates, output, order, mode, cval, prefilter)


def zoom(input, zoom, output=None, order=3, mode="constant", cval=0.0, prefilter=True, *,
         grid_mode=False):
    """scipy.ndimage.zoom of order 1 (grid_mode False): the output's corners on the input's,
    the samples between evenly spaced."""
    if grid_mode:
        raise unsupported_error("scipy.ndimage.zoom(..., grid_mode=True)")
    x = _float_input(input, "zoom")
    shape = aval(x).shape
    factors = np.broadcast_to(zoom, (len(shape),))
    out_shape = tuple(int(round(n * z)) for n, z in zip(shape, factors))
    steps = [(n - 1) / max(m - 1, 1) for n, m in zip(shape, out_shape)]
    coordinates = _grid(out_shape) * np.reshape(steps, (len(shape),) + (1,) * len(shape))
    return map_coordinates(x, coordinates, output, order, mode, cval, prefilter)


def _binary(name, combine, border):
    def morphology(input, structure=None, iterations=1, mask=None, output=None,
                   border_value=0, origin=0, brute_force=False, *, axes=None):
        import scipy.ndimage
        x = staged_array(input)
        rank = aval(x).ndim
        structure = (scipy.ndimage.generate_binary_structure(rank, 1) if structure is None
                     else np.asarray(structure, bool))
        if mask is not None or output is not None or axes is not None or np.any(origin) or \
                not np.array_equal(structure, np.flip(structure)) or iterations < 1 or \
                structure.ndim != rank or (border is not None and border_value):
            raise unsupported_error(f"scipy.ndimage.{name} other than by a symmetric "
                                    f"structure of the input's rank, at origin 0, without mask "
                                    f"(a dilation's border 0)")
        x = x != 0
        for _ in range(iterations):
            copies = [x]
            for axis in range(rank):
                copies = [shifted for copy in copies for shifted in
                          _shifted(copy, axis, structure.shape[axis], 0, "constant",
                                   bool(border_value) if border is None else False)]
            x = combine(np.stack([copy for copy, on in zip(copies, structure.ravel()) if on]),
                        axis=0)
        return x
    morphology.__name__ = name
    morphology.__doc__ = (f"scipy.ndimage.{name} by a symmetric structure: the "
                          f"{combine.__name__} of the input shifted to its elements.")
    return morphology


# (the border outside the image: False for a dilation, `border_value` for an erosion)
binary_dilation = _binary("binary_dilation", np.any, False)
binary_erosion = _binary("binary_erosion", np.all, None)


STAND_INS = ("correlate1d", "convolve1d", "correlate", "convolve", "gaussian_filter1d",
             "gaussian_filter", "uniform_filter1d", "uniform_filter", "sobel", "prewitt",
             "laplace", "median_filter", "minimum_filter", "maximum_filter", "map_coordinates",
             "shift", "zoom", "binary_dilation", "binary_erosion")


def _install():
    import scipy.ndimage
    for name in STAND_INS:
        stand_in(getattr(scipy.ndimage, name), globals()[name])


_install()
