"""numpy's miscellaneous math on tracers, each a composition of existing primitives written as
numpy writes it (so values agree with numpy's): sinc, round, fix, nan_to_num, the ufuncs
heaviside/ldexp/divmod/vecdot/matvec/vecmat with their keywords (axes, axis, keepdims),
np.linalg's array-API vecdot, matmul, outer, tensordot, trace, diagonal and cross,
differences (diff, ediff1d, gradient, trapezoid, unwrap, cumulative_sum/prod), cross, interp,
convolve/correlate, select, piecewise, and the boolean tests (isclose, allclose, array_equal,
array_equiv, isin, isposinf, isneginf, isreal, iscomplex); Python's math.isclose of traced
values."""
import math
import re

import numpy as np

from xform.errors import TypeCheckError, shape_error, unsupported_error
from xform.ir.ad import aval, ndim
from xform.ir.avals import broadcast_shapes
from xform.ir.builder import call_back
from xform.ir.tracer import Tracer
from xform.numpy.axes import normalize_axes, normalize_axis
from xform.numpy.index import take
from xform.numpy.protocol import array_ufunc, implements
from xform.numpy.shape import as_array, moveaxis, ravel, reshape
from xform.numpy.stand_ins import define_group, stand_in
from xform.rules.compare import isclose_p
from xform.rules.search import searchsorted_p
from xform.rules.signal import correlate_p
from xform.source_info import user_frame_info


def along(axis, index, rank):
    """The index tuple selecting `index` (an int or slice) along `axis` of a rank-`rank`
    array."""
    return (slice(None),) * axis + (index,) + (slice(None),) * (rank - axis - 1)


def scalar_result(x):
    """`x`, or for a 0-d `x` a final no-op ufunc: numpy returns 0-d results of ufuncs and
    reductions as scalars (np.float64), where a composition ending in np.where would give a
    0-d array."""
    if ndim(x) != 0:
        return x
    return np.logical_and(x, True) if aval(x).dtype == np.bool_ else np.positive(x)


@implements(np.sinc)
def sinc(x):
    """`np.sinc` as numpy computes it: sin(y) / y with y = pi x, and eps where x is 0."""
    x = np.pi * as_array(x)
    eps = np.finfo(aval(x).dtype).eps if aval(x).dtype.kind == "f" else 1e-20
    y = np.where(x != 0, x, eps)
    return np.sin(y) / y


@implements(np.round)
@implements(np.around)
def round_(a, decimals=0, out=None):
    """`np.round` as numpy computes it: scale by 10**decimals, round half to even, unscale."""
    if out is not None:
        raise unsupported_error("numpy.round(..., out=...)")
    a = as_array(a)
    decimals = int(decimals)
    dtype = aval(a).dtype
    if dtype.kind in "biu" and decimals >= 0:
        return np.copy(a)
    if dtype.kind == "c":
        raise unsupported_error("numpy.round of a complex value")
    if decimals == 0:
        return np.rint(a)
    # numpy multiplies by a Python float, so the integer case computes in float64 and casts
    scale = 10.0 ** abs(decimals)
    if decimals > 0:
        result = np.rint(a * scale) / scale
    else:
        result = np.rint(a / scale) * scale
    return result.astype(dtype) if aval(result).dtype != dtype else result


@implements(np.fix)
def fix(x, out=None):
    """`np.fix`: rounded towards zero (floor of the non-negative, ceil of the rest)."""
    if out is not None:
        raise unsupported_error("numpy.fix(..., out=...)")
    x = as_array(x)
    return scalar_result(np.where(np.greater_equal(x, 0), np.floor(x), np.ceil(x)))


_PYTHON_TYPES = {"b": bool, "i": int, "u": int, "f": float, "c": complex}


def _ufunc_loop(ufunc, *args):
    """The dtypes of the loop numpy picks for `ufunc` on `args` (Python scalars and weak
    tracers weakly typed, as NEP 50 says): (input dtypes..., output dtype)."""
    operands = []
    for x in args:
        if type(x) in (bool, int, float, complex):
            operands.append(type(x))
        elif type(x) is Tracer and x.aval.weak_type:
            operands.append(_PYTHON_TYPES[x.dtype.kind])
        else:
            operands.append(aval(as_array(x)).dtype)
    try:
        return ufunc.resolve_dtypes((*operands, None))
    except TypeError as err:
        raise TypeCheckError(str(err), user_frame_info()) from None


@implements(np.heaviside)
def heaviside(x1, x2):
    """The ufunc `np.heaviside`: 0 below zero, `x2` at zero, 1 above (NaN stays NaN), in the
    dtype of numpy's loop; differentiable in `x2`."""
    dtype = _ufunc_loop(np.heaviside, x1, x2)[-1]
    x1, x2 = as_array(x1).astype(dtype), as_array(x2).astype(dtype)
    out = np.where(x1 > 0, np.ones((), dtype), x2)
    out = np.where(x1 < 0, np.zeros((), dtype), out)
    return scalar_result(np.where(np.isnan(x1), x1, out))


@implements(np.ldexp)
def ldexp(x1, x2):
    """The ufunc `np.ldexp`: x1 * 2**x2, one exact scaling in the dtype of numpy's loop
    (results below the smallest normal number may round differently from numpy's ldexp)."""
    mantissa_dtype, exponent_dtype, dtype = _ufunc_loop(np.ldexp, x1, x2)
    x1, x2 = as_array(x1).astype(dtype), as_array(x2).astype(exponent_dtype)
    return np.multiply(x1, np.exp2(x2.astype(np.float64)).astype(dtype))


@implements(np.divmod)
def divmod_(x1, x2):
    """The ufunc `np.divmod`: (floor_divide, remainder)."""
    return np.floor_divide(x1, x2), np.remainder(x1, x2)


@implements(np.nan_to_num)
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """`np.nan_to_num`: NaN, +inf and -inf replaced (by 0 and the largest finite values unless
    given); the derivative is zero at the replaced entries."""
    x = as_array(x)
    dtype = aval(x).dtype
    if dtype.kind == "c":
        raise unsupported_error("numpy.nan_to_num of a complex value")
    if dtype.kind != "f":
        return x
    info = np.finfo(dtype)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    x = np.where(np.isnan(x), np.asarray(nan, dtype), x)
    x = np.where(x == np.inf, np.asarray(posinf, dtype), x)
    return scalar_result(np.where(x == -np.inf, np.asarray(neginf, dtype), x))


# -- differences ------------------------------------------------------------------------------

@implements(np.diff)
def diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    """`np.diff`: `n`-th differences along `axis` (booleans: not_equal), with numpy's
    prepend/append."""
    a = as_array(a)
    if n == 0:
        return a
    if n < 0:
        raise shape_error(f"order must be non-negative but got {n!r}")
    rank = ndim(a)
    if rank == 0:
        raise shape_error("diff requires input that is at least one dimensional")
    axis = normalize_axis(axis, rank)
    pieces = []
    for end in (prepend, a, append):
        if end is np._NoValue:
            continue
        if end is not a:
            end = as_array(end)
            if ndim(end) == 0:
                shape = list(aval(a).shape)
                shape[axis] = 1
                end = np.broadcast_to(end, tuple(shape))
        pieces.append(end)
    if len(pieces) > 1:
        a = np.concatenate(pieces, axis)
    subtract = np.not_equal if aval(a).dtype == np.bool_ else np.subtract
    for _ in range(n):
        a = subtract(a[along(axis, slice(1, None), rank)], a[along(axis, slice(None, -1), rank)])
    return a


@implements(np.ediff1d)
def ediff1d(ary, to_end=None, to_begin=None):
    """`np.ediff1d`: differences of the flattened array, with values before and after."""
    ary = ravel(as_array(ary))
    dtype = aval(ary).dtype
    pieces = [diff(ary)]
    for end, first in ((to_begin, True), (to_end, False)):
        if end is None:
            continue
        end = ravel(as_array(end))
        if not np.can_cast(aval(end).dtype, dtype, casting="same_kind"):
            raise TypeCheckError("dtype of `to_begin` or `to_end` must be compatible with "
                                 "input `ary` under the `same_kind` rule.", user_frame_info())
        end = end.astype(dtype)
        pieces.insert(0, end) if first else pieces.append(end)
    return np.concatenate(pieces) if len(pieces) > 1 else pieces[0]


def _spacing(distances, n):
    """One axis's spacing argument of gradient: a scalar, or the differences of 1-d
    coordinates (a scalar again when they are concrete and uniform, as numpy does)."""
    if ndim(distances) == 0:
        return distances
    distances = as_array(distances)
    if ndim(distances) != 1:
        raise shape_error("distances must be either scalars or 1d")
    if aval(distances).shape[0] != n:
        raise shape_error("when 1d, distances must match the length of the corresponding "
                          "dimension")
    if aval(distances).dtype.kind in "iu":
        distances = distances.astype(np.float64)
    steps = diff(distances)
    if type(steps) is not Tracer and (steps == steps[0]).all():
        return steps[0]
    return steps


def _gradient_axis(f, axis, dx, edge_order):
    """numpy's gradient along one axis: central differences inside, one-sided at the ends."""
    rank = ndim(f)

    def at(index):
        return f[along(axis, index, rank)]

    def shaped(coefficient):
        shape = [1] * rank
        shape[axis] = -1
        return reshape(coefficient, tuple(shape))

    uniform = ndim(dx) == 0
    if uniform:
        inner = (at(slice(2, None)) - at(slice(None, -2))) / (2. * dx)
    else:
        dx1, dx2 = dx[0:-1], dx[1:]
        a = shaped(-(dx2) / (dx1 * (dx1 + dx2)))
        b = shaped((dx2 - dx1) / (dx1 * dx2))
        c = shaped(dx1 / (dx2 * (dx1 + dx2)))
        inner = a * at(slice(None, -2)) + b * at(slice(1, -1)) + c * at(slice(2, None))
    if edge_order == 1:
        first = (at(slice(1, 2)) - at(slice(0, 1))) / (dx if uniform else dx[0])
        last = (at(slice(-1, None)) - at(slice(-2, -1))) / (dx if uniform else dx[-1])
    else:
        if uniform:
            a, b, c = -1.5 / dx, 2. / dx, -0.5 / dx
        else:
            dx1, dx2 = dx[0], dx[1]
            a = -(2. * dx1 + dx2) / (dx1 * (dx1 + dx2))
            b = (dx1 + dx2) / (dx1 * dx2)
            c = - dx1 / (dx2 * (dx1 + dx2))
        first = a * at(slice(0, 1)) + b * at(slice(1, 2)) + c * at(slice(2, 3))
        if uniform:
            a, b, c = 0.5 / dx, -2. / dx, 1.5 / dx
        else:
            dx1, dx2 = dx[-2], dx[-1]
            a = (dx2) / (dx1 * (dx1 + dx2))
            b = - (dx2 + dx1) / (dx1 * dx2)
            c = (2. * dx2 + dx1) / (dx2 * (dx1 + dx2))
        last = a * at(slice(-3, -2)) + b * at(slice(-2, -1)) + c * at(slice(-1, None))
    pieces = [first, inner, last] if aval(f).shape[axis] > 2 else [first, last]
    return np.concatenate([p.astype(aval(f).dtype) for p in pieces], axis)


@implements(np.gradient)
def gradient(f, *varargs, axis=None, edge_order=1):
    """`np.gradient`: second-order central differences inside, first- or second-order
    one-sided differences at the ends; spacings are scalars or (possibly traced)
    coordinates. Traced coordinates always take the uneven-spacing formula: numpy picks the
    even one when the values happen to be evenly spaced (equal to rounding)."""
    f = as_array(f)
    shape = aval(f).shape
    axes = normalize_axes(axis, len(shape)) if axis is not None else tuple(range(len(shape)))
    if axis is not None and not isinstance(axis, (tuple, list)):
        axes = (normalize_axis(axis, len(shape)),)
    if not varargs:
        spacings = [1.0] * len(axes)
    elif len(varargs) == 1 and ndim(varargs[0]) == 0:
        spacings = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacings = [_spacing(d, shape[ax]) for d, ax in zip(varargs, axes)]
    else:
        raise TypeCheckError("invalid number of arguments", user_frame_info())
    if edge_order not in (1, 2):
        raise shape_error("'edge_order' greater than 2 not supported")
    if aval(f).dtype.kind not in "fc":
        f = f.astype(np.float64)
    results = []
    for ax, dx in zip(axes, spacings):
        if shape[ax] < edge_order + 1:
            raise shape_error("Shape of array too small to calculate a numerical gradient, "
                              "at least (edge_order + 1) elements are required.")
        results.append(_gradient_axis(f, ax, dx, edge_order))
    return results[0] if len(results) == 1 else tuple(results)


@implements(np.trapezoid)
def trapezoid(y, x=None, dx=1.0, axis=-1):
    """`np.trapezoid`: the trapezoidal rule along `axis`, with sample points or a spacing."""
    y = as_array(y)
    rank = ndim(y)
    axis = normalize_axis(axis, rank)
    if x is None:
        d = dx
    else:
        x = as_array(x)
        if ndim(x) == 1:
            d = diff(x)
            shape = [1] * rank
            shape[axis] = aval(d).shape[0]
            d = reshape(d, tuple(shape))
        else:
            d = diff(x, axis=axis)
    upper = y[along(axis, slice(1, None), rank)]
    lower = y[along(axis, slice(None, -1), rank)]
    return np.sum(d * (upper + lower) / 2.0, axis)


@implements(np.cross)
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """`np.cross` of 3-vectors (and numpy's deprecated 2-vectors) along the given axes."""
    if axis is not None:
        axisa, axisb, axisc = (axis,) * 3
    a, b = as_array(a), as_array(b)
    if ndim(a) < 1 or ndim(b) < 1:
        raise shape_error("At least one array has zero dimension")
    a = moveaxis(a, normalize_axis(axisa, ndim(a)), -1)
    b = moveaxis(b, normalize_axis(axisb, ndim(b)), -1)
    na, nb = aval(a).shape[-1], aval(b).shape[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise shape_error("incompatible dimensions for cross product\n"
                          "(dimension must be 2 or 3)")
    dtype = np.promote_types(aval(a).dtype, aval(b).dtype)
    a, b = a.astype(dtype), b.astype(dtype)
    a0, a1, b0, b1 = a[..., 0], a[..., 1], b[..., 0], b[..., 1]
    z = a0 * b1 - a1 * b0
    if na == 2 and nb == 2:
        return np.copy(z) if ndim(z) == 0 else z  # numpy writes it into a 0-d array
    if na == 2:
        b2 = b[..., 2]
        x, y = a1 * b2, -(a0 * b2)
    elif nb == 2:
        a2 = a[..., 2]
        x, y = -(a2 * b1), a2 * b0
    else:
        a2, b2 = a[..., 2], b[..., 2]
        x, y = a1 * b2 - a2 * b1, a2 * b0 - a0 * b2
    shape = broadcast_shapes(aval(x).shape, aval(y).shape, aval(z).shape)
    result = np.stack([np.broadcast_to(c, shape) for c in (x, y, z)], -1)
    return moveaxis(result, -1, normalize_axis(axisc, len(shape) + 1))


# -- interpolation, convolution, polynomials ---------------------------------------------------

@implements(np.interp)
def interp(x, xp, fp, left=None, right=None, period=None):
    """`np.interp` (real): piecewise linear through (xp, fp), as numpy computes each value:
    slope * (x - xp[j]) + fp[j]; differentiable in x, xp and fp. With `period`, numpy's
    reduction of x and xp modulo the period, xp sorted and one point wrapped to each end."""
    x, xp, fp = (as_array(v) for v in (x, xp, fp))
    if any(aval(v).dtype.kind == "c" for v in (x, xp, fp)):
        raise unsupported_error("numpy.interp of complex values")
    x, xp, fp = (v.astype(np.float64) for v in (x, xp, fp))
    if ndim(xp) != 1 or ndim(fp) != 1:
        raise shape_error("object too deep for desired array")
    n = aval(xp).shape[0]
    if aval(fp).shape[0] != n:
        raise shape_error("fp and xp are not of the same length.")
    if n == 0:
        raise shape_error("array of sample points is empty")
    if period is not None:
        if period == 0:
            raise shape_error("period must be a non-zero value")
        period, left, right = abs(period), None, None
        x, xp = x % period, xp % period
        order = np.argsort(xp)
        xp, fp = take(xp, order), take(fp, order)
        xp = np.concatenate((xp[-1:] - period, xp, xp[0:1] + period))
        fp = np.concatenate((fp[-1:], fp, fp[0:1]))
        n += 2
    # j with xp[j] <= x < xp[j + 1]; j + 1 clamped, since x == xp[-1] gives fp[-1] exactly
    below = np.clip(searchsorted_p.bind(xp, x, side="right", batch_ndim=0) - 1, 0, n - 1)
    above = np.minimum(below + 1, n - 1)
    # xform's take: numpy dispatches np.take and xp[below] on xp alone, which may be concrete
    x_lo, x_hi, f_lo, f_hi = (take(v, i) for v, i in ((xp, below), (xp, above),
                                                          (fp, below), (fp, above)))
    step = x_hi - x_lo
    flat = step == 0
    slope = np.where(flat, 0.0, (f_hi - f_lo) / np.where(flat, 1.0, step))
    result = slope * (x - x_lo) + f_lo
    result = np.where(x < xp[0], fp[0] if left is None else left, result)
    return scalar_result(np.where(x > xp[-1], fp[-1] if right is None else right, result))


_MODES = {"valid": "valid", "same": "same", "full": "full", "v": "valid", "s": "same",
          "f": "full"}


def _correlate_1d(a, v, mode, name):
    a, v = as_array(a), as_array(v)
    if ndim(a) != 1 or ndim(v) != 1:
        raise shape_error(f"{name}: object too deep for desired array")
    n, m = aval(a).shape[0], aval(v).shape[0]
    if n == 0 or m == 0:
        raise shape_error(f"{name}: inputs cannot be empty")
    if mode not in _MODES:
        raise shape_error(f"mode must be one of 'valid', 'same', or 'full' (got {mode!r})")
    dtype = np.result_type(aval(a).dtype, aval(v).dtype)
    a, v = a.astype(dtype), v.astype(dtype)
    return correlate_p.bind(a, v, mode=_MODES[mode])


@implements(np.correlate)
def correlate(a, v, mode="valid"):
    """`np.correlate`: c[k] = sum_n a[n + k] conj(v[n]) ('valid', 'same' or 'full')."""
    return _correlate_1d(a, v, mode, "correlate")


@implements(np.convolve)
def convolve(a, v, mode="full"):
    """`np.convolve`: the correlation with the reversed shorter operand, as numpy does."""
    a, v = as_array(a), as_array(v)
    if ndim(a) == 1 and ndim(v) == 1 and aval(v).shape[0] > aval(a).shape[0]:
        a, v = v, a
    if ndim(v) == 1 and aval(v).dtype.kind == "c":
        v = np.conjugate(v)  # np.correlate conjugates it back (numpy's bits: tested)
    return _correlate_1d(a, np.flip(v) if ndim(v) == 1 else v, mode, "convolve")


# -- selection ---------------------------------------------------------------------------------

@implements(np.select)
def select(condlist, choicelist, default=0):
    """`np.select`: the first choice whose condition holds, else `default` (later conditions
    are overwritten by earlier ones, as numpy's reversed copyto)."""
    if len(condlist) != len(choicelist):
        raise shape_error("list of cases must be same length as list of conditions")
    if len(condlist) == 0:
        raise shape_error("select with an empty condition list is not possible")
    choices = [as_array(c) for c in choicelist] + [as_array(default)]
    dtype = np.result_type(*[aval(c).dtype for c in choices])
    conditions = [as_array(c) for c in condlist]
    for i, cond in enumerate(conditions):
        if aval(cond).dtype != np.bool_:
            raise TypeCheckError(f"invalid entry {i} in condlist: should be boolean ndarray",
                                 user_frame_info())
    shape = broadcast_shapes(*[aval(c).shape for c in choices + conditions])
    result = np.broadcast_to(choices[-1].astype(dtype), shape)
    for cond, choice in zip(conditions[::-1], choices[-2::-1]):
        result = np.where(cond, choice.astype(dtype), result)
    return result


def _is_array(value):
    return isinstance(value, (list, np.ndarray)) or type(value) is Tracer


@implements(np.piecewise)
def piecewise(x, condlist, funclist, *args, **kw):
    """`np.piecewise`: each function (or constant) where its condition holds, later ones
    winning, zero elsewhere.

    Unlike numpy, each function is evaluated on all of `x` and the results are selected (as
    jax.numpy does), so a function must accept every element (e.g. not divide by zero where
    its condition is false: its NaN would not show in the value, but can in a derivative).
    """
    x = as_array(x)
    if isinstance(condlist, (bool, np.bool_)) or (
            _is_array(condlist) and not isinstance(condlist, list) and
            ndim(condlist) <= 1 and ndim(x) != 0) or (
            isinstance(condlist, list) and condlist and not _is_array(condlist[0]) and
            ndim(x) != 0):
        condlist = [condlist]
    conditions = [as_array(c).astype(bool) for c in condlist]
    if len(conditions) == len(funclist) - 1:
        any_holds = conditions[0]
        for cond in conditions[1:]:
            any_holds = any_holds | cond
        conditions.append(np.logical_not(any_holds))
    elif len(conditions) != len(funclist):
        raise shape_error(f"with {len(conditions)} condition(s), either {len(conditions)} or "
                          f"{len(conditions) + 1} functions are expected")
    dtype = aval(x).dtype
    y = np.zeros_like(x)
    for cond, func in zip(conditions, funclist):
        value = call_back(func, x, *args, **kw) if callable(func) else func
        y = np.where(cond, as_array(value).astype(dtype), y)
    return y


# -- cumulative sums, unwrap, products of vectors ---------------------------------------------

def _cumulative(scan, fill, x, axis, dtype, include_initial):
    x = as_array(x)
    if axis is None:
        if ndim(x) != 1:
            raise shape_error("For arrays which have more than one dimension ``axis`` "
                              "argument is required.")
        axis = 0
    axis = normalize_axis(axis, ndim(x))
    result = scan(x, axis=axis, dtype=dtype)
    if include_initial:
        shape = list(aval(result).shape)
        shape[axis] = 1
        result = np.concatenate([np.full(shape, fill, aval(result).dtype), result], axis)
    return result


@implements(np.cumulative_sum)
def cumulative_sum(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    """`np.cumulative_sum`: cumsum, with an initial zero if asked."""
    if out is not None:
        raise unsupported_error("numpy.cumulative_sum(..., out=...)")
    return _cumulative(np.cumsum, 0, x, axis, dtype, include_initial)


@implements(np.cumulative_prod)
def cumulative_prod(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    """`np.cumulative_prod`: cumprod, with an initial one if asked."""
    if out is not None:
        raise unsupported_error("numpy.cumulative_prod(..., out=...)")
    return _cumulative(np.cumprod, 1, x, axis, dtype, include_initial)


@implements(np.unwrap)
def unwrap(p, discont=None, axis=-1, *, period=2 * np.pi):
    """`np.unwrap` of real phases, as numpy: jumps larger than `discont` corrected by
    multiples of `period`, accumulated along `axis`."""
    p = as_array(p)
    rank = ndim(p)
    axis = normalize_axis(axis, rank)
    dd = diff(p, axis=axis)
    if discont is None:
        discont = period / 2
    dtype = np.result_type(aval(dd).dtype, period)
    if dtype.kind in "iu":
        interval_high, rem = divmod(period, 2)
        boundary_ambiguous = rem == 0
    else:
        interval_high = period / 2
        boundary_ambiguous = True
    interval_low = -interval_high
    ddmod = np.mod(dd - interval_low, period) + interval_low
    if boundary_ambiguous:
        ddmod = np.where((ddmod == interval_low) & (dd > 0),
                         np.asarray(interval_high, aval(ddmod).dtype), ddmod)
    correction = ddmod - dd
    correction = np.where(np.abs(dd) < discont, np.zeros((), aval(correction).dtype),
                          correction)
    head = p[along(axis, slice(0, 1), rank)].astype(dtype)
    tail = (p[along(axis, slice(1, None), rank)] + np.cumsum(correction, axis)).astype(dtype)
    return np.concatenate([head, tail], axis)


@implements(np.vecdot)
def vecdot(x1, x2):
    """The gufunc `np.vecdot` (over the last axis; the first operand conjugated)."""
    x1, x2 = as_array(x1), as_array(x2)
    if aval(x1).dtype.kind == "c":
        x1 = np.conjugate(x1)
    return np.matmul(x1[..., None, :], x2[..., :, None])[..., 0, 0]


@implements(np.matvec)
def matvec(x1, x2):
    """The gufunc `np.matvec`: matrices times vectors over the last axes."""
    x1, x2 = as_array(x1), as_array(x2)
    return np.matmul(x1, x2[..., :, None])[..., 0]


@implements(np.vecmat)
def vecmat(x1, x2):
    """The gufunc `np.vecmat`: (conjugated) vectors times matrices over the last axes."""
    x1, x2 = as_array(x1), as_array(x2)
    if aval(x1).dtype.kind == "c":
        x1 = np.conjugate(x1)
    return np.matmul(x1[..., None, :], x2)[..., 0, :]


@implements(np.linalg.vecdot)
def linalg_vecdot(x1, x2, /, *, axis=-1):
    """`np.linalg.vecdot`: the gufunc over `axis`."""
    return np.vecdot(x1, x2, axis=axis)


@implements(np.linalg.matmul)
def linalg_matmul(x1, x2, /):
    """`np.linalg.matmul`: the array API's `np.matmul`."""
    return np.matmul(x1, x2)


@implements(np.linalg.outer)
def linalg_outer(x1, x2, /):
    """`np.linalg.outer`: `np.outer` of two vectors."""
    if ndim(x1) != 1 or ndim(x2) != 1:
        raise shape_error("Input arrays must be one-dimensional, but they are "
                          f"x1.ndim={ndim(x1)} and x2.ndim={ndim(x2)}.")
    return np.outer(x1, x2)


@implements(np.linalg.tensordot)
def linalg_tensordot(x1, x2, /, *, axes=2):
    """`np.linalg.tensordot`: `np.tensordot`."""
    return np.tensordot(x1, x2, axes=axes)


@implements(np.linalg.trace)
def linalg_trace(x, /, *, offset=0, dtype=None):
    """`np.linalg.trace`: the traces of the last two axes."""
    return np.trace(x, offset, axis1=-2, axis2=-1, dtype=dtype)


@implements(np.linalg.diagonal)
def linalg_diagonal(x, /, *, offset=0):
    """`np.linalg.diagonal`: the diagonals of the last two axes."""
    return np.diagonal(x, offset, axis1=-2, axis2=-1)


@implements(np.linalg.cross)
def linalg_cross(x1, x2, /, *, axis=-1):
    """`np.linalg.cross`: `np.cross` of 3-element vectors."""
    if aval(as_array(x1)).shape[axis] != 3 or aval(as_array(x2)).shape[axis] != 3:
        raise shape_error("Both input arrays must be (arrays of) 3-dimensional vectors")
    return np.cross(x1, x2, axis=axis)


def _core_counts(signature):
    """The number of core dimensions of each operand (inputs, then outputs) of a gufunc's
    signature: "(m,n),(n)->(m)" gives [2, 1, 1]. An optional dimension (matmul's "n?")
    counts: a 1-d matmul operand's own entry in `axes` says it has one fewer."""
    return [len([d for d in group.split(",") if d.strip()])
            for group in re.findall(r"\(([^)]*)\)", signature)]


def _operand_axes(ufunc, arrays, axes, axis, keepdims):
    """numpy's `axes`/`axis` of a gufunc call as one tuple of core axes per operand
    (inputs, then outputs), and under `keepdims` where the output keeps the reduced axes."""
    counts = _core_counts(ufunc.signature)
    if axis is not None:
        if any(count > 1 for count in counts) or len(set(counts[:ufunc.nin])) > 1:
            raise shape_error(f"{ufunc.__name__}: axis can only be used with a single shared "
                              f"core dimension, not with signature {ufunc.signature}")
        entries = [(axis,) if count == 1 else () for count in counts]
    elif axes is None:
        entries = [tuple(range(-count, 0)) for count in counts]
    else:
        entries = [(entry,) if isinstance(entry, (int, np.integer)) else tuple(entry)
                   for entry in axes]
        if len(entries) == ufunc.nin and not any(counts[ufunc.nin:]):
            entries += [()] * ufunc.nout    # scalar outputs' entries may be left out
        if len(entries) != ufunc.nin + ufunc.nout:
            raise shape_error(f"{ufunc.__name__}: axes should be a list with an entry for "
                              f"each of its {ufunc.nin + ufunc.nout} operands")
    for entry, array in zip(entries, arrays):
        if len(entry) > ndim(array):
            raise shape_error(f"{ufunc.__name__}: an operand of dimension {ndim(array)} has "
                              f"fewer than the {len(entry)} core axes {entry}")
    kept = None
    if keepdims:
        if any(counts[ufunc.nin:]) or len(set(map(len, entries[:ufunc.nin]))) > 1:
            raise shape_error(f"{ufunc.__name__}: keepdims can only be used for scalar "
                              f"outputs and inputs with the same number of core dimensions")
        given = entries[ufunc.nin] if axis is None and axes is not None else ()
        kept = (given or (entries[0] if axis is not None
                          else tuple(range(-len(entries[0]), 0))))
    return entries, kept


@implements("gufunc keywords")
def gufunc_keywords(ufunc, inputs, kwargs):
    """A generalized ufunc (vecdot, matvec, vecmat, matmul) called with its keywords: `axes`,
    `axis` and `keepdims` move the core axes to the end and the output's back (as numpy
    computes it); `order` and `subok` shape no value; `casting` checks `dtype` as numpy
    does."""
    kwargs = dict(kwargs)
    axes, axis = kwargs.pop("axes", None), kwargs.pop("axis", None)
    keepdims = kwargs.pop("keepdims", False)
    kwargs.pop("order", None)
    kwargs.pop("subok", None)
    casting = kwargs.pop("casting", "same_kind")
    dtype = kwargs.get("dtype")
    arrays = [as_array(x) for x in inputs]
    if dtype is not None:
        for array in arrays:
            if not np.can_cast(aval(array).dtype, dtype, casting):
                raise TypeCheckError(
                    f"{ufunc.__name__}: cannot cast an input from {aval(array).dtype} to "
                    f"{np.dtype(dtype)} with casting rule {casting!r}", user_frame_info())
    entries, kept = _operand_axes(ufunc, arrays, axes, axis, keepdims)
    moved = [moveaxis(array, entry, tuple(range(-len(entry), 0))) if entry else array
             for array, entry in zip(arrays, entries)]
    result = array_ufunc(ufunc, "__call__", moved, kwargs)
    if kept is not None:
        result = reshape(result, np.shape(result) + (1,) * len(kept))
        out_entry = kept
    else:
        loop_rank = max(ndim(array) - len(entry) for array, entry in zip(arrays, entries))
        core = ndim(result) - loop_rank
        out_entry = entries[ufunc.nin] if axes is not None else tuple(range(-core, 0))
        if len(out_entry) != core:
            raise shape_error(f"{ufunc.__name__}: the output has {core} core axes, but axes "
                              f"gives {len(out_entry)}: {out_entry}")
    if not out_entry:
        return result
    return moveaxis(result, tuple(range(-len(out_entry), 0)), out_entry)


# -- closeness ---------------------------------------------------------------------------------

@implements(np.isclose)
def isclose(a, b, rtol=1.e-5, atol=1.e-8, equal_nan=False):
    """`np.isclose`: numpy's own (one equation) for scalar tolerances; else staged as
    |a - b| <= atol + rtol |b| where b is finite, or a == b."""
    if _scalar_tolerance(rtol) and _scalar_tolerance(atol) and type(equal_nan) is bool:
        x = a if isinstance(a, (int, float, complex)) else as_array(a)
        y = b if isinstance(b, (int, float, complex)) else as_array(b)
        return isclose_p.bind(x, y, rtol=rtol, atol=atol, equal_nan=equal_nan)
    x = a if isinstance(a, (int, float, complex)) else as_array(a)
    y = b if isinstance(b, (int, float, complex)) else as_array(b)
    if not isinstance(y, (int, float, complex)):
        dtype = np.result_type(aval(y).dtype, 1.)
        y = y.astype(dtype) if aval(y).dtype != dtype else y
    elif isinstance(y, int):
        y = float(y)
    with np.errstate(invalid="ignore"):
        result = (np.less_equal(np.abs(x - y), atol + rtol * np.abs(y)) & np.isfinite(y)
                  | (x == y))
        if equal_nan:
            result = result | (np.isnan(x) & np.isnan(y))
    return scalar_result(result)


def _scalar_tolerance(tolerance) -> bool:
    """Whether an isclose tolerance is a real number known while staging (a param, kept as
    given: a numpy scalar's dtype takes part in numpy's promotion)."""
    return type(tolerance) in (int, float) or isinstance(tolerance, (np.floating, np.integer))


@implements(np.allclose)
def allclose(a, b, rtol=1.e-5, atol=1.e-8, equal_nan=False):
    """`np.allclose` staged as all(isclose(...)): a traced boolean (deciding a Python `if` on
    it needs a concrete value)."""
    return np.all(isclose(a, b, rtol, atol, equal_nan))


@implements(np.array_equal)
def array_equal(a1, a2, equal_nan=False):
    """`np.array_equal`: False for different shapes, else a traced all(a1 == a2)."""
    a1, a2 = as_array(a1), as_array(a2)
    if aval(a1).shape != aval(a2).shape:
        return False
    same = a1 == a2
    if equal_nan and np.result_type(aval(a1).dtype, aval(a2).dtype).kind in "fc":
        both_nan = np.isnan(a1) & np.isnan(a2)
        return np.all(np.isnan(a1) == np.isnan(a2)) & np.all(same | both_nan)
    return np.all(same)


@implements(np.array_equiv)
def array_equiv(a1, a2):
    """`np.array_equiv`: False for shapes that do not broadcast, else all(a1 == a2)."""
    a1, a2 = as_array(a1), as_array(a2)
    try:
        broadcast_shapes(aval(a1).shape, aval(a2).shape)
    except ValueError:
        return False
    return np.all(a1 == a2)


@implements(np.isin)
def isin(element, test_elements, assume_unique=False, invert=False, *, kind=None):
    """`np.isin`: whether each element equals one of `test_elements` (one comparison of every
    pair)."""
    element, test_elements = as_array(element), ravel(as_array(test_elements))
    found = np.any(element[..., None] == test_elements, axis=-1)
    return np.logical_not(found) if invert else found


def _real_infinity(x, name):
    x = as_array(x)
    if aval(x).dtype.kind == "c":
        raise TypeCheckError(f"numpy.{name} is not supported for complex values because it "
                             "would be ambiguous.", user_frame_info())
    return x


@implements(np.isposinf)
def isposinf(x, out=None):
    """`np.isposinf`: +inf."""
    x = _real_infinity(x, "isposinf")
    return np.logical_and(np.isinf(x), np.logical_not(np.signbit(x)))


@implements(np.isneginf)
def isneginf(x, out=None):
    """`np.isneginf`: -inf."""
    x = _real_infinity(x, "isneginf")
    return np.logical_and(np.isinf(x), np.signbit(x))


@implements(np.isreal)
def isreal(x):
    """`np.isreal`: a zero imaginary part."""
    return scalar_result(np.imag(as_array(x)) == 0)


@implements(np.iscomplex)
def iscomplex(x):
    """`np.iscomplex`: a nonzero imaginary part."""
    return scalar_result(np.imag(as_array(x)) != 0)


def _math_isclose(a, b, *, rel_tol=1e-09, abs_tol=0.0):
    """`math.isclose` of traced values: Python's test, asked of them (each comparison a
    guarded truth value), where Python's float() of a differentiated value would raise."""
    if rel_tol < 0.0 or abs_tol < 0.0:
        raise ValueError("tolerances must be non-negative")
    if a == b:
        return True
    if np.isinf(a) or np.isinf(b):
        return False
    difference = np.abs(b - a)
    return bool(difference <= np.abs(rel_tol * b) or difference <= np.abs(rel_tol * a)
                or difference <= abs_tol)


PYTHON_MATH_GROUP = "Python's math of traced values"
define_group(PYTHON_MATH_GROUP)
stand_in((math, "isclose"), _math_isclose, group=PYTHON_MATH_GROUP)
