"""numpy's axis arguments, normalized and checked before any primitive is bound (so errors
name the user's line): one axis, a tuple of axes, or None."""
import operator

from xform.errors import shape_error


def normalize_axis(axis, ndim):
    """numpy's one-axis argument (concatenate, stack, moveaxis) as a non-negative axis."""
    axis = int(axis)
    if not -ndim <= axis < max(ndim, 1):
        raise shape_error(f"axis {axis} is out of bounds for an array of dimension {ndim}")
    return axis % ndim if ndim else 0


def normalize_axes(axis, ndim, strict=False):
    """numpy's `axis` argument as a sorted tuple of non-negative axes.

    Like numpy's reductions, a 0-d array takes a bare axis 0 or -1 unless `strict` (as mean,
    var and std are). A bad axis raises ShapeError naming the user's line: the numpy
    functions call this before any primitive is bound, so bind cannot attach the line.
    """
    if axis is None:
        return tuple(range(ndim))
    listed = isinstance(axis, (tuple, list))
    axes = axis if listed else (axis,)
    bound = ndim if strict or listed else max(ndim, 1)
    result = []
    for ax in axes:
        ax = int(ax)
        if not -bound <= ax < bound:
            raise shape_error(f"axis {ax} is out of bounds for an array of dimension {ndim}")
        result.append(ax % ndim if ndim else 0)
    if len(set(result)) != len(result):
        raise shape_error("duplicate value in 'axis'")
    return tuple(sorted(result)) if ndim else ()


def single_axis(axis, ndim):
    """numpy's one-axis argument (argmax, cumsum) normalized; None stays None."""
    if axis is None:
        return None
    axes = normalize_axes(operator.index(axis), ndim)
    return axes[0] if axes else 0
