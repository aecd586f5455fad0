"""numpy's statistics on tracers, as numpy computes them: order statistics (median, quantile,
percentile and their nan- forms, ptp), weighted averages, cov/corrcoef, the nan-reductions
numpy.reduce lacks, and the counting functions with integer results (searchsorted, digitize,
bincount, histogram, histogramdd, histogram2d, unique)."""
import math

import numpy as np

from xform.errors import (ConcretizationError, TypeCheckError, concretization_error, shape_error,
                          unsupported_error)
from xform.ir.ad import aval, ndim
from xform.ir.tracer import Tracer
from xform.numpy.axes import normalize_axes
from xform.numpy.index import index_add, take, take_along_axis
from xform.numpy.math import scalar_result
from xform.numpy.protocol import implements, with_constants_read
from xform.numpy.shape import as_array, broadcast_to, ravel, reshape, transpose
from xform.rules.sized import unique_index_p
from xform.rules.reduce import reduced_shape
from xform.rules.search import searchsorted_p
from xform.source_info import user_frame_info


def _no_out(name, out):
    if out is not None:
        raise unsupported_error(f"numpy.{name}(..., out=...)")


def _keep(result, shape, axes, keepdims, lead=()):
    """`result` (reduced over `axes` of `shape`, `lead` axes in front) with keepdims."""
    if not keepdims:
        return scalar_result(result)
    return reshape(result, tuple(lead) + reduced_shape(shape, axes, keepdims=True))


def _axis_first(a, axis):
    """`a` with the reduced axes merged into axis 0 (numpy's _ureduce), and those axes."""
    shape = aval(a).shape
    axes = normalize_axes(axis, len(shape), strict=True) if axis is not None else \
        tuple(range(len(shape)))
    rest = [d for d in range(len(shape)) if d not in axes]
    a = transpose(a, list(axes) + rest)
    n = int(np.prod([shape[d] for d in axes], dtype=np.int64))
    return reshape(a, (n,) + tuple(shape[d] for d in rest)), axes


# -- order statistics --------------------------------------------------------------------------

_INTEGER_METHODS = {"lower": np.floor, "higher": np.ceil, "nearest": np.around}


def _sorted_along_0(a):
    """Sorted along axis 0, NaNs last (numpy's partition puts them there too)."""
    return np.sort(a, axis=0)


def _gather_rows(sorted_, index):
    """sorted_[index[q..., r...], r...] for an index of shape q.shape + rest."""
    rest = aval(sorted_).shape[1:]
    q_shape = aval(index).shape[:ndim(index) - len(rest)]
    flat = reshape(index, (-1,) + rest)
    if aval(flat).shape[0] == 0:
        raise shape_error("quantiles of an empty list")
    taken = take_along_axis(sorted_, flat, axis=0)
    return reshape(taken, q_shape + rest)


def _quantile_sorted(sorted_, count, q, method, weak_q):
    """numpy's `_quantile` on `sorted_` (sorted along axis 0, NaNs last) for quantiles `q`
    (concrete or traced), `count` valid leading entries (an int, or an array per column for
    the nan- forms)."""
    rest = aval(sorted_).shape[1:]
    q_shape = aval(q).shape
    if type(count) is not int and aval(q).dtype.kind == "f":
        count = count.astype(aval(q).dtype)  # numpy's count is a Python int (weakly typed)
    # virtual indices per quantile and column: shape q.shape + rest
    q_full = reshape(q, q_shape + (1,) * len(rest))
    virtual = (count - 1) * q_full
    n_max = aval(sorted_).shape[0]
    if method in _INTEGER_METHODS:
        index = _INTEGER_METHODS[method](virtual).astype(np.intp)
        index = np.clip(index, 0, n_max - 1)
        return _gather_rows(sorted_, broadcast_to(index, q_shape + rest))
    if method == "midpoint":
        virtual = 0.5 * (np.floor(virtual) + np.ceil(virtual))
    elif method != "linear":
        raise unsupported_error(f"numpy.quantile(..., method={method!r}): 'linear' (the "
                                "default), 'lower', 'higher', 'nearest' and 'midpoint' are "
                                "supported")
    floor = np.floor(virtual)
    top = count - 1
    above = virtual >= top
    previous = np.where(above, top, np.where(virtual < 0, 0, floor)).astype(np.intp)
    following = np.where(above | (virtual < 0), previous, previous + 1)
    previous = np.clip(previous, 0, n_max - 1)
    following = np.clip(following, 0, n_max - 1)
    gamma = virtual - np.where(above, -1, np.where(virtual < 0, 0, floor))
    if method == "midpoint":
        gamma = np.where(virtual % 1 == 0, 0.0, 0.5).astype(aval(virtual).dtype)
    gamma_full_precision = gamma
    lower = _gather_rows(sorted_, broadcast_to(previous, q_shape + rest))
    upper = _gather_rows(sorted_, broadcast_to(following, q_shape + rest))
    difference = upper - lower
    complement = 1 - gamma
    if weak_q and aval(lower).dtype.kind == "f":
        # numpy's Python-float gamma: rounded to the values' dtype in each product
        dtype = aval(lower).dtype
        gamma, complement = gamma.astype(dtype), complement.astype(dtype)
    result = lower + difference * gamma
    return np.where(gamma_full_precision >= 0.5, upper - difference * complement, result)


def _nan_last_check(sorted_, result):
    """numpy's NaN rule: a column with any NaN (sorted last) gives NaN."""
    if aval(sorted_).dtype.kind not in "fc":
        return result
    return np.where(np.isnan(sorted_[-1]), sorted_[-1], result)


def _quantile(name, a, q, axis, out, method, keepdims, weak_q, interpolation, weights,
              ignore_nan):
    _no_out(name, out)
    if interpolation is not None:
        raise unsupported_error(f"numpy.{name}(..., interpolation=...); use method=")
    if weights is not None:
        raise unsupported_error(f"numpy.{name}(..., weights=...)")
    a = as_array(a)
    if aval(a).dtype.kind == "c":
        raise TypeCheckError("a must be an array of real numbers", user_frame_info())
    q = as_array(q)
    if type(q) is not Tracer and not (np.all(q >= 0) and np.all(q <= 1)):
        raise shape_error("Quantiles must be in the range [0, 1]")
    shape = aval(a).shape
    columns, axes = _axis_first(a, axis)
    sorted_ = _sorted_along_0(columns)
    if ignore_nan and aval(a).dtype.kind == "f":
        count = np.sum(np.logical_not(np.isnan(columns)), axis=0)
        result = _quantile_sorted(sorted_, count, q, method, weak_q)
    else:
        result = _nan_last_check(sorted_, _quantile_sorted(sorted_, aval(columns).shape[0], q,
                                                           method, weak_q))
    return _keep(result, shape, axes, keepdims, aval(q).shape)


def _is_weak(q):
    return type(q) in (int, float)


@implements(np.quantile)
def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None, interpolation=None):
    """`np.quantile` (methods linear, lower, higher, nearest, midpoint); `q` may be traced.
    Differentiable in `a` (through the sorted values taken) and in `q`."""
    return _quantile("quantile", a, q, axis, out, method, keepdims, _is_weak(q),
                     interpolation, weights, ignore_nan=False)


@implements(np.percentile)
def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None, interpolation=None):
    """`np.percentile`: the quantile at q / 100."""
    weak = _is_weak(q)
    return _quantile("percentile", a, np.true_divide(as_array(q), 100), axis, out, method,
                     keepdims, weak, interpolation, weights, ignore_nan=False)


@implements(np.nanquantile)
def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None, interpolation=None):
    """`np.nanquantile`: the quantile of the values that are not NaN. (For float32 data with
    an all-NaN slice numpy's result dtype depends on the data; xform gives the dtype numpy
    gives without NaNs.)"""
    return _quantile("nanquantile", a, q, axis, out, method, keepdims, _is_weak(q),
                     interpolation, weights, ignore_nan=True)


@implements(np.nanpercentile)
def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None, interpolation=None):
    """`np.nanpercentile`: the nanquantile at q / 100."""
    weak = _is_weak(q)
    return _quantile("nanpercentile", a, np.true_divide(as_array(q), 100), axis, out, method,
                     keepdims, weak, interpolation, weights, ignore_nan=True)


@implements(np.median)
def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """`np.median` as numpy computes it: the mean of the middle one or two sorted values (NaN
    where a column has a NaN)."""
    _no_out("median", out)
    a = as_array(a)
    shape = aval(a).shape
    columns, axes = _axis_first(a, axis)
    n = aval(columns).shape[0]
    sorted_ = _sorted_along_0(columns)
    middle = sorted_[n // 2:n // 2 + 1] if n % 2 else sorted_[n // 2 - 1:n // 2 + 1]
    result = _nan_last_check(sorted_, np.mean(middle, axis=0))
    return _keep(result, shape, axes, keepdims)


@implements(np.nanmedian)
def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """`np.nanmedian`: (low + high) / 2 of the middle values that are not NaN, as numpy's
    masked median."""
    _no_out("nanmedian", out)
    a = as_array(a)
    if aval(a).dtype.kind != "f":
        return median(a, axis, keepdims=keepdims)
    shape = aval(a).shape
    columns, axes = _axis_first(a, axis)
    sorted_ = _sorted_along_0(columns)
    count = np.sum(np.logical_not(np.isnan(columns)), axis=0, keepdims=True)
    high = count // 2
    low = np.where(count % 2 == 1, high, high - 1)
    n = aval(columns).shape[0]
    index = np.clip(np.concatenate([low, high]), 0, max(n - 1, 0))
    pair = take_along_axis(sorted_, index, axis=0)
    result = np.true_divide(pair[0] + pair[1], 2.).astype(aval(a).dtype)
    return _keep(result, shape, axes, keepdims)


@implements(np.ptp)
def ptp(a, axis=None, out=None, keepdims=False):
    """`np.ptp`: maximum minus minimum."""
    _no_out("ptp", out)
    return np.subtract(np.max(a, axis=axis, keepdims=keepdims),
                       np.min(a, axis=axis, keepdims=keepdims))


# -- nan-reductions ------------------------------------------------------------------------------

def _nan_extremum(name, reduce, fill, a, axis, out, keepdims, initial, where):
    _no_out(name, out)
    if initial is not None or where is not None:
        raise unsupported_error(f"numpy.{name}(..., initial=/where=)")
    a = as_array(a)
    if aval(a).dtype.kind != "f":
        return reduce(a, axis=axis, keepdims=keepdims)
    missing = np.isnan(a)
    result = reduce(np.where(missing, np.asarray(fill, aval(a).dtype), a), axis=axis,
                    keepdims=keepdims)
    # an all-NaN slice gives NaN, as numpy's fmax.reduce
    return scalar_result(np.where(np.all(missing, axis=axis, keepdims=keepdims), np.nan, result)
                         .astype(aval(a).dtype))


@implements(np.nanmax)
def nanmax(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """`np.nanmax`: the maximum ignoring NaNs (NaN for an all-NaN slice)."""
    return _nan_extremum("nanmax", np.max, -np.inf, a, axis, out, keepdims, initial, where)


@implements(np.nanmin)
def nanmin(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """`np.nanmin`: the minimum ignoring NaNs (NaN for an all-NaN slice)."""
    return _nan_extremum("nanmin", np.min, np.inf, a, axis, out, keepdims, initial, where)


def _nan_arg(name, reduce, fill, a, axis, out, keepdims):
    _no_out(name, out)
    a = as_array(a)
    if aval(a).dtype.kind == "f":
        a = np.where(np.isnan(a), np.asarray(fill, aval(a).dtype), a)
    return reduce(a, axis=axis, keepdims=keepdims)


@implements(np.nanargmax)
def nanargmax(a, axis=None, out=None, *, keepdims=False):
    """`np.nanargmax` (an all-NaN slice, numpy's ValueError, needs concrete values)."""
    return _nan_arg("nanargmax", np.argmax, -np.inf, a, axis, out, keepdims)


@implements(np.nanargmin)
def nanargmin(a, axis=None, out=None, *, keepdims=False):
    """`np.nanargmin` (an all-NaN slice, numpy's ValueError, needs concrete values)."""
    return _nan_arg("nanargmin", np.argmin, np.inf, a, axis, out, keepdims)


def _without_nan(a, fill):
    a = as_array(a)
    return np.where(np.isnan(a), np.asarray(fill, aval(a).dtype), a) \
        if aval(a).dtype.kind in "fc" else a


@implements(np.nanprod)
def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """`np.nanprod`: NaNs count as one."""
    _no_out("nanprod", out)
    if initial is not None or where is not None:
        raise unsupported_error("numpy.nanprod(..., initial=/where=)")
    return np.prod(_without_nan(a, 1), axis=axis, dtype=dtype, keepdims=keepdims)


@implements(np.nancumsum)
def nancumsum(a, axis=None, dtype=None, out=None):
    """`np.nancumsum`: NaNs count as zero."""
    _no_out("nancumsum", out)
    return np.cumsum(_without_nan(a, 0), axis=axis, dtype=dtype)


@implements(np.nancumprod)
def nancumprod(a, axis=None, dtype=None, out=None):
    """`np.nancumprod`: NaNs count as one."""
    _no_out("nancumprod", out)
    return np.cumprod(_without_nan(a, 1), axis=axis, dtype=dtype)


@implements(np.nanvar)
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           mean=None, correction=None):
    """`np.nanvar` as numpy's `_nanvar` computes it (NaN where the degrees of freedom are not
    positive)."""
    _no_out("nanvar", out)
    if where is not None or mean is not None:
        raise unsupported_error("numpy.nanvar(..., where=/mean=)")
    if correction is not None:
        if ddof != 0:
            raise shape_error("ddof and correction can't be provided simultaneously.")
        ddof = correction
    a = as_array(a)
    if aval(a).dtype.kind not in "fc":
        return np.var(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)
    missing = np.isnan(a)
    arr = np.where(missing, np.zeros((), aval(a).dtype), a)
    count = np.sum(np.logical_not(missing), axis=axis, dtype=np.intp, keepdims=True)
    avg = np.sum(arr, axis=axis, dtype=dtype, keepdims=True)
    avg = (avg / count).astype(aval(avg).dtype)
    deviation = np.where(missing, np.zeros((), aval(a).dtype), (arr - avg).astype(aval(a).dtype))
    if aval(a).dtype.kind == "c":
        square = np.real(deviation * np.conjugate(deviation))
    else:
        square = deviation * deviation
    var = np.sum(square, axis=axis, dtype=dtype, keepdims=keepdims)
    if not keepdims:
        count = reshape(count, aval(var).shape)
    dof = count - ddof
    var = (var / dof).astype(aval(var).dtype)
    return scalar_result(np.where(dof <= 0, np.asarray(np.nan, aval(var).dtype), var))


@implements(np.nanstd)
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           mean=None, correction=None):
    """`np.nanstd`: the square root of nanvar."""
    return np.sqrt(nanvar(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean,
                          correction=correction))


# -- weighted averages, covariance ---------------------------------------------------------------

@implements(np.average)
def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """`np.average` with (possibly traced) weights; numpy's ZeroDivisionError for weights
    summing to zero needs concrete weights (traced ones give inf or NaN)."""
    a = as_array(a)
    shape = aval(a).shape
    axes = None if axis is None else normalize_axes(axis, len(shape), strict=True)
    if weights is None:
        avg = np.mean(a, axis=axes, keepdims=keepdims)
        scale = aval(avg).dtype.type(aval(a).size / max(aval(avg).size, 1))
    else:
        w = as_array(weights)
        if aval(w).shape != shape:
            if axes is None:
                raise TypeCheckError("Axis must be specified when shapes of a and weights "
                                     "differ.", user_frame_info())
            w_shape = tuple(shape[ax] for ax in axes)
            if aval(w).shape != w_shape:
                raise shape_error("Shape of weights must be consistent with shape of a along "
                                  "specified axis.")
            # the weights' axes in order, the other axes of `a` as ones
            w = reshape(w, tuple(shape[d] if d in axes else 1 for d in range(len(shape))))
        if aval(a).dtype.kind in "biu":
            result_dtype = np.result_type(aval(a).dtype, aval(w).dtype, "f8")
        else:
            result_dtype = np.result_type(aval(a).dtype, aval(w).dtype)
        scale = np.sum(broadcast_to(w, shape) if aval(w).shape != shape else w, axis=axes,
                       dtype=result_dtype, keepdims=keepdims)
        if type(scale) is not Tracer and np.any(scale == 0.0):
            raise ZeroDivisionError("Weights sum to zero, can't be normalized")
        avg = np.sum(np.multiply(a.astype(result_dtype), w.astype(result_dtype)), axis=axes,
                     keepdims=keepdims) / scale
    if returned:
        if aval(scale).shape != aval(avg).shape:
            scale = np.copy(broadcast_to(scale, aval(avg).shape))
        return avg, scale
    return avg


@implements(np.cov)
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    """`np.cov` as numpy computes it; `m`, `y` and `aweights` may be traced (`fweights` and
    numpy's checks of the weights need concrete values)."""
    if ddof is not None and ddof != int(ddof):
        raise shape_error("ddof must be integer")
    m = as_array(m)
    if ndim(m) > 2:
        raise shape_error("m has more than 2 dimensions")
    if y is not None:
        y = as_array(y)
        if ndim(y) > 2:
            raise shape_error("y has more than 2 dimensions")
    if dtype is None:
        dtypes = [aval(m).dtype] + ([] if y is None else [aval(y).dtype])
        dtype = np.result_type(*dtypes, np.float64)
    X = reshape(m, (1,) * (2 - ndim(m)) + aval(m).shape).astype(dtype)
    if not rowvar and ndim(m) != 1:
        X = transpose(X)
    if y is not None:
        Y = reshape(y, (1,) * (2 - ndim(y)) + aval(y).shape).astype(dtype)
        if not rowvar and aval(Y).shape[0] != 1:
            Y = transpose(Y)
        X = np.concatenate((X, Y), axis=0)
    if ddof is None:
        ddof = 1 if bias == 0 else 0
    samples = aval(X).shape[1]
    w = None
    if fweights is not None:
        if type(fweights) is Tracer:
            raise concretization_error("numpy.cov's fweights (checked to be integers)")
        fweights = np.asarray(fweights, dtype=float)
        if not np.all(fweights == np.around(fweights)):
            raise TypeCheckError("fweights must be integer", user_frame_info())
        if fweights.ndim > 1 or fweights.shape[0] != samples or np.any(fweights < 0):
            raise shape_error("fweights must be non-negative, 1-d and one per observation")
        w = fweights
    if aweights is not None:
        aweights = as_array(aweights).astype(float)
        if ndim(aweights) > 1 or aval(aweights).shape[0] != samples:
            raise shape_error("aweights must be 1-d and one per observation")
        if type(aweights) is not Tracer and np.any(aweights < 0):
            raise shape_error("aweights cannot be negative")
        w = aweights if w is None else w * aweights
    avg, w_sum = average(X, axis=1, weights=w, returned=True)
    w_sum = w_sum[0]
    if w is None:
        fact = samples - ddof
    elif ddof == 0:
        fact = w_sum
    elif aweights is None:
        fact = w_sum - ddof
    else:
        fact = w_sum - ddof * np.sum(w * aweights) / w_sum
    if type(fact) is not Tracer and fact <= 0:
        fact = 0.0
    X = X - avg[:, None]
    X_T = transpose(X) if w is None else transpose(X * w)
    c = np.dot(X, np.conjugate(X_T) if aval(X_T).dtype.kind == "c" else X_T)
    c = c * np.true_divide(1, fact)
    return np.squeeze(c)


@implements(np.corrcoef)
def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    """`np.corrcoef`: the covariance over the product of standard deviations, clipped to
    [-1, 1] as numpy does (real values)."""
    c = cov(x, y, rowvar, dtype=dtype)
    if ndim(c) == 0:
        return c / c
    if aval(c).dtype.kind == "c":
        raise unsupported_error("numpy.corrcoef of complex values")
    stddev = np.sqrt(np.diagonal(c))
    c = c / stddev[:, None]
    c = c / stddev[None, :]
    return np.clip(c, -1, 1)


# -- integer results: searching and counting ---------------------------------------------------

@implements(np.searchsorted)
def searchsorted(a, v, side="left", sorter=None):
    """`np.searchsorted`: integer positions (zero derivative), staged on traced values."""
    if side not in ("left", "right"):
        raise shape_error(f"side must be 'left' or 'right' (got {side!r})")
    a, v = as_array(a), as_array(v)
    if ndim(a) != 1:
        raise shape_error("object too deep for desired array")
    if sorter is not None:
        a = take(a, as_array(sorter))
    dtype = np.result_type(aval(a).dtype, aval(v).dtype)
    return searchsorted_p.bind(a.astype(dtype), v.astype(dtype), side=side, batch_ndim=0)


@implements(np.digitize)
def digitize(x, bins, right=False):
    """`np.digitize`: bin numbers for increasing or decreasing (possibly traced) bins."""
    x, bins = as_array(x), as_array(bins)
    if aval(x).dtype.kind == "c":
        raise TypeCheckError("x may not be complex", user_frame_info())
    if ndim(bins) != 1:
        raise shape_error("bins must be one-dimensional")
    side = "left" if right else "right"
    if type(bins) is not Tracer:
        steps = np.diff(bins)
        if not (np.all(steps >= 0) or np.all(steps <= 0)):
            raise shape_error("bins must be monotonically increasing or decreasing")
        if np.all(steps >= 0):
            return searchsorted(bins, x, side=side)
        return len(bins) - searchsorted(bins[::-1], x, side=side)
    increasing = searchsorted(bins, x, side=side)
    decreasing = aval(bins).shape[0] - searchsorted(np.flip(bins), x, side=side)
    return scalar_result(np.where(bins[-1] >= bins[0], increasing, decreasing))


def _data_dependent_size(name, fix):
    return ConcretizationError(f"numpy.{name} of a traced array: its result's size depends on "
                               "the values", user_frame_info(), fix)


def _concrete_counts(x, name):
    x = with_constants_read(x)
    if type(x) is Tracer:
        raise _data_dependent_size(name, "pass the integers to count as a concrete array (a "
                                   "closure constant or static argument); the weights may "
                                   "be traced")
    return np.asarray(x)


@implements(np.bincount)
def bincount(x, weights=None, minlength=0):
    """`np.bincount` of concrete integers with (possibly traced, differentiable) weights."""
    x = _concrete_counts(x, "bincount")
    length = max(int(x.max()) + 1 if x.size else 0, int(minlength))
    if weights is None:
        return np.bincount(x, minlength=minlength)
    weights = as_array(weights)
    if aval(weights).shape != x.shape:
        raise shape_error("The weights and list don't have the same length.")
    return index_add(np.zeros(length), x, weights.astype(np.float64))


def _unique_refusal(name):
    def refuse(ar, *args, **kwargs):
        raise _data_dependent_size(name, f"call np.{name} on concrete values (a closure "
                                   "constant or static argument), outside the staged function")
    refuse.__doc__ = f"`np.{name}` needs concrete values: the number of distinct values " \
                     "sizes the result."
    return refuse


for _name in ("unique_counts", "unique_inverse", "unique_all"):
    implements(getattr(np, _name))(_unique_refusal(_name))


@implements(np.unique)
def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, sorted=True):
    """`np.unique` of traced values (flattened; `return_index`, `return_inverse`,
    `return_counts` too): the number of distinct values is decided from the staging's values
    and guarded, so each path has fixed shapes; each value is gathered from its first
    position, so derivatives flow to it; the inverse and the counts are integers."""
    if axis is not None or not equal_nan:
        raise unsupported_error("numpy.unique(..., axis= / equal_nan=False) of a traced array")
    ar = as_array(ar)
    flat = ravel(ar)
    ordered = np.sort(flat)
    differs = ordered[1:] != ordered[:-1]
    if aval(flat).dtype.kind in "fc":
        # equal_nan: numpy's NaNs, sorted last, are one value
        differs = differs & ~(np.isnan(ordered[1:]) & np.isnan(ordered[:-1]))
    distinct = np.sum(differs, dtype=np.intp) + (aval(flat).size > 0)
    count = distinct.builder.decide(distinct, "index", "size of numpy.unique")
    first = unique_index_p.bind(flat, count=count)
    values = take(flat, first)
    results = [values] + [first] * return_index
    if return_inverse or return_counts:
        inverse = searchsorted(values, flat)    # (a NaN finds the one NaN, sorted last)
        if return_inverse:
            results.append(reshape(inverse, aval(ar).shape))
        if return_counts:
            results.append(index_add(np.zeros(count, np.intp), inverse,
                                     np.ones(aval(flat).size, np.intp)))
    return tuple(results) if len(results) > 1 else values


@implements(np.unique_values)
def unique_values(x):
    """`np.unique_values`: np.unique's values (count guarded)."""
    return unique(x)


@implements(np.count_nonzero)
def count_nonzero(a, axis=None, *, keepdims=False):
    """`np.count_nonzero`: the number of nonzero entries (an integer, zero derivative)."""
    return np.sum(as_array(a) != 0, axis=axis, dtype=np.intp, keepdims=keepdims)


def _histogram_edges(a, bins, range, name="histogram"):
    """(edges, number of bins) of np.histogram's `bins` and `range` for the flat data `a`:
    from a static number of bins (and the data's min and max, or `range`), or concrete or
    traced edges."""
    if isinstance(bins, str):
        raise unsupported_error(f"numpy.{name}(..., bins={bins!r})")
    if ndim(bins) == 0:
        count = int(bins)
        if count < 1:
            raise shape_error("`bins` must be positive, when an integer")
        if range is None:
            first, last = np.min(a), np.max(a)
        else:
            first, last = (as_array(r) for r in range)
            if type(first) is not Tracer and type(last) is not Tracer and first > last:
                raise shape_error("max must be larger than min in range parameter.")
        bin_type = np.result_type(aval(as_array(first)).dtype, aval(as_array(last)).dtype,
                                  aval(a).dtype)
        if bin_type.kind in "biu":
            bin_type = np.result_type(bin_type, float)
        # numpy widens an empty range by 0.5 on each side
        same = first == last
        first = np.where(same, first - 0.5, first).astype(bin_type)
        last = np.where(same, last + 0.5, last).astype(bin_type)
        return np.linspace(first, last, count + 1, endpoint=True, dtype=bin_type), count
    edges = as_array(bins)
    if type(edges) is not Tracer and np.any(edges[:-1] > edges[1:]):
        raise shape_error("`bins` must increase monotonically, when an array")
    return edges, aval(edges).shape[0] - 1


def _bin_positions(a, edges, count):
    """(the bin of each of `a`, whether it is inside the edges); a bin outside is 0."""
    # bin i holds edges[i] <= x < edges[i + 1]; the last bin is closed; outside is dropped
    position = searchsorted_p.bind(edges, a.astype(np.result_type(aval(edges).dtype,
                                                                  aval(a).dtype)),
                                   side="right", batch_ndim=0) - 1
    position = np.where(a == edges[-1], count - 1, position)
    inside = (position >= 0) & (position < count)
    return np.where(inside, position, 0), inside


@implements(np.histogram)
def histogram(a, bins=10, range=None, density=None, weights=None):
    """`np.histogram` on traced data and weights: a static number of bins (or concrete or
    traced edges). Counts are integers (zero derivative); weighted counts, density and
    automatic edges (from the data's min and max) are differentiable."""
    a = ravel(as_array(a))
    edges, count = _histogram_edges(a, bins, range)
    position, inside = _bin_positions(a, edges, count)
    if weights is None:
        amount = inside.astype(np.intp)
        hist = index_add(np.zeros(count, np.intp), position, amount)
    else:
        weights = ravel(as_array(weights))
        if aval(weights).shape != aval(a).shape:
            raise shape_error("weights should have the same shape as a.")
        hist = index_add(np.zeros(count, aval(weights).dtype), position,
                         np.where(inside, weights, np.zeros((), aval(weights).dtype)))
    if density:
        widths = np.diff(edges)
        return hist / widths / np.sum(hist), edges
    return hist, edges


@implements(np.histogramdd)
def histogramdd(sample, bins=10, range=None, density=None, weights=None):
    """`np.histogramdd` on traced samples and weights: each dimension binned as np.histogram
    bins it; the counts are floats, as numpy's (zero derivative in the samples), weighted
    counts, density and automatic edges differentiable."""
    if isinstance(sample, (list, tuple)):      # D sequences of N coordinates
        sample = np.stack([as_array(column) for column in sample], axis=-1)
    sample = as_array(sample)
    if ndim(sample) != 2:
        sample = np.atleast_2d(sample).T
    n, dims = aval(sample).shape
    per_dim_bins = bins if isinstance(bins, (list, tuple)) or np.ndim(bins) else [bins] * dims
    if len(per_dim_bins) != dims:
        raise shape_error("The dimension of bins must be equal to the dimension of the sample x.")
    ranges = [None] * dims if range is None else range
    flat_bin = np.zeros(n, np.intp)
    inside_all = np.ones(n, bool)
    all_edges, counts = [], []
    for dim, (dim_bins, dim_range) in enumerate(zip(per_dim_bins, ranges)):
        column = sample[:, dim]
        edges, count = _histogram_edges(column, dim_bins, dim_range, "histogramdd")
        position, inside = _bin_positions(column, edges, count)
        flat_bin = flat_bin * count + position
        inside_all = inside_all & inside
        all_edges.append(edges)
        counts.append(count)
    total = math.prod(counts)
    if weights is None:
        amount = inside_all.astype(np.float64)
    else:
        weights = ravel(as_array(weights)).astype(np.float64)
        if aval(weights).shape != (n,):
            raise shape_error("weights should have the same length as the sample.")
        amount = np.where(inside_all, weights, 0.0)
    hist = reshape(index_add(np.zeros(total), np.where(inside_all, flat_bin, 0), amount),
                   tuple(counts))
    if density:
        whole = np.sum(hist)
        for dim, edges in enumerate(all_edges):
            shape = [1] * dims
            shape[dim] = counts[dim]
            hist = hist / reshape(np.diff(edges), tuple(shape))
        hist = hist / whole
    return hist, all_edges


@implements(np.histogram2d)
def histogram2d(x, y, bins=10, range=None, density=None, weights=None):
    """`np.histogram2d`: np.histogramdd of the pairs (x, y)."""
    if (isinstance(bins, (list, tuple)) or np.ndim(bins)) and len(bins) not in (1, 2):
        bins = [bins, bins]       # one array of edges for both
    hist, (x_edges, y_edges) = histogramdd([x, y], bins, range, density, weights)
    return hist, x_edges, y_edges


@implements(np.histogram_bin_edges)
def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """`np.histogram_bin_edges`: the edges `np.histogram` uses (differentiable in the data
    when they come from its minimum and maximum)."""
    return histogram(a, bins, range, weights=weights)[1]
