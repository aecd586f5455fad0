"""Reductions and scans: sum, prod, max/min, any/all, argmax/argmin, cumsum/cumprod, and the
numpy functions built on them (mean, var, std, nansum, nanmean, ufunc.reduce/accumulate)."""
import math
import operator

import numpy as np

from xform.errors import ShapeError
from xform.ir.avals import ShapedArray
from xform.ir.core import Primitive
from xform.source_info import user_frame_info
from xform.ir.tracer import _unsupported, implements
from xform.ir.ad import aval, move_to_front
from xform.rules.helpers import defjvp, defvjp, linear_jvp, zero_derivative
from xform.ir.rules import register
from xform.rules.shape import broadcast_to, reshape, transpose


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
            raise ShapeError(f"axis {ax} is out of bounds for an array of dimension {ndim}",
                             user_frame_info())
        result.append(ax % ndim if ndim else 0)
    if len(set(result)) != len(result):
        raise ShapeError("duplicate value in 'axis'", user_frame_info())
    return tuple(sorted(result)) if ndim else ()


def _single_axis(axis, ndim):
    """numpy's one-axis argument (argmax, cumsum) normalized; None stays None."""
    if axis is None:
        return None
    axes = normalize_axes(operator.index(axis), ndim)
    return axes[0] if axes else 0


def reduced_shape(shape, axes, keepdims=False):
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def expand_reduced(ct, shape, axes):
    """Undo a reduction's shape change: put size-1 axes back at `axes`, then broadcast."""
    ct = reshape(ct, reduced_shape(shape, axes, keepdims=True))
    return broadcast_to(ct, shape)


def _reduction_dtype(numpy_fn, x, **kwargs):
    return np.result_type(numpy_fn(np.ones((1,) * max(x.ndim, 1), x.dtype), **kwargs))


def _reduction_abstract_eval(numpy_fn):
    def abstract_eval(x, *, axes, dtype=None):
        return ShapedArray(reduced_shape(x.shape, axes),
                           dtype if dtype is not None else _reduction_dtype(numpy_fn, x))
    return abstract_eval


def reduction_batch(prim):
    """Batch rule of a primitive reducing over `axes` (a tuple) or scanning along `axis`: the
    batch axis goes first and every other axis moves up by one."""
    def rule(size, args, dims, **params):
        x = move_to_front(args[0], dims[0], size)
        if "axes" in params:
            params["axes"] = tuple(a + 1 for a in params["axes"])
        else:
            params["axis"] = params["axis"] + 1
        return prim.bind(x, **params), 0
    return rule


def _keep(result, shape, axes, keepdims):
    return reshape(result, reduced_shape(shape, axes, keepdims=True)) if keepdims else result


def _no_options(name, **options):
    given = [key for key, value in options.items() if value is not None]
    if given:
        raise _unsupported(f"numpy.{name}(..., {', '.join(f'{k}=...' for k in given)})")


def _as(x, dtype):
    return x if dtype is None else x.astype(dtype)


# -- sum ---------------------------------------------------------------------------------------

sum_p = Primitive("sum")


def _sum_transpose(ct, x, *, axes, dtype=None):
    ct = expand_reduced(ct, x.aval.shape, axes)
    return (ct.astype(x.aval.dtype) if aval(ct).dtype != x.aval.dtype else ct,)


def _sum_impl(x, *, axes, dtype=None):
    # np.add.reduce is what np.sum runs, without its Python wrapper (a few us per call).
    return np.add.reduce(x, axis=axes, dtype=dtype)


register(sum_p, impl=_sum_impl,
         abstract_eval=_reduction_abstract_eval(np.sum), jvp=linear_jvp(sum_p),
         transpose=_sum_transpose, batch=reduction_batch(sum_p),
         symbolic_zeros=True, linear_in=(0,))


@implements(np.sum)
def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """`np.sum` (no out/initial/where)."""
    _no_options("sum", out=out, initial=initial, where=where)
    shape = aval(a).shape
    axes = normalize_axes(axis, len(shape))
    result = sum_p.bind(a, axes=axes, dtype=None if dtype is None else np.dtype(dtype))
    return _keep(result, shape, axes, keepdims)


@implements(np.nansum)
def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """`np.nansum`: NaNs count as zero."""
    _no_options("nansum", out=out, initial=initial, where=where)
    if aval(a).dtype.kind in "fc":
        a = np.where(np.isnan(a), 0, a)
    return sum(a, axis, dtype, keepdims=keepdims)


# -- mean, var, std: compositions of sum ------------------------------------------------------

def _count(shape, axes):
    return math.prod(shape[ax] for ax in axes)


def _accumulation_dtype(x_dtype, dtype):
    """The dtype numpy's mean and var sum in: float64 for integers and bools."""
    if dtype is None and x_dtype.kind in "biu":
        return np.dtype(np.float64)
    return None if dtype is None else np.dtype(dtype)


def _divide(total, count):
    """`total / count` in the total's dtype: numpy divides into the sum's own buffer."""
    result = total / count
    return result if aval(result).dtype == aval(total).dtype else result.astype(aval(total).dtype)


@implements(np.mean)
def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """`np.mean`: the sum (float64 for integers, float32 for float16) over the count."""
    _no_options("mean", out=out, where=where)
    x_aval = aval(a)
    float16 = dtype is None and x_aval.dtype == np.float16
    acc_dtype = np.dtype(np.float32) if float16 else _accumulation_dtype(x_aval.dtype, dtype)
    axes = normalize_axes(axis, x_aval.ndim, strict=True)
    result = _divide(sum(a, axes, acc_dtype, keepdims=keepdims), _count(x_aval.shape, axes))
    return result.astype(np.float16) if float16 else result


@implements(np.nanmean)
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """`np.nanmean`: the mean of the values that are not NaN."""
    _no_options("nanmean", out=out, where=where)
    if aval(a).dtype.kind not in "fc":
        return mean(a, axis, dtype, keepdims=keepdims)
    if dtype is not None and np.dtype(dtype).kind not in "fc":
        raise TypeError("If a is inexact, then dtype must be inexact")
    missing = np.isnan(a)
    total = sum(np.where(missing, 0, a), axis, dtype, keepdims=keepdims)
    return _divide(total, sum(np.logical_not(missing), axis, np.intp, keepdims=keepdims))


def _var(a, axis, dtype, ddof, keepdims, mean_, correction):
    """numpy's `_var` step for step, so that staged values equal numpy's bit for bit."""
    if correction is not None:
        if ddof != 0:
            raise ValueError("ddof and correction can't be provided simultaneously.")
        ddof = correction
    shape = aval(a).shape
    axes = normalize_axes(axis, len(shape), strict=True)
    dtype = _accumulation_dtype(aval(a).dtype, dtype)
    count = _count(shape, axes)
    if mean_ is None:
        mean_ = _divide(sum(a, axes, dtype, keepdims=True), count)
    centered = a - mean_
    return _divide(sum(centered * centered, axes, dtype, keepdims=keepdims),
                   max(count - ddof, 0))


@implements(np.var)
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
        correction=None):
    """`np.var` (`mean=` and `correction=` included; no out/where)."""
    _no_options("var", out=out, where=where)
    return _var(a, axis, dtype, ddof, keepdims, mean, correction)


@implements(np.std)
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
        correction=None):
    """`np.std`: the square root of `np.var`."""
    _no_options("std", out=out, where=where)
    return np.sqrt(_var(a, axis, dtype, ddof, keepdims, mean, correction))


# -- cumsum and cumprod: scans along one axis, optionally reversed or exclusive ---------------

def _scan_abstract_eval(numpy_fn):
    def abstract_eval(x, *, axis, reverse=False, exclusive=False):
        if not 0 <= axis < x.ndim:
            raise ValueError(f"axis {axis} is out of bounds for an array of dimension {x.ndim}")
        return ShapedArray(x.shape, _reduction_dtype(numpy_fn, x))
    return abstract_eval


def _scan_impl(numpy_fn, identity):
    """`numpy_fn` along `axis`; `reverse` scans from the end, `exclusive` leaves each element
    out of its own result (the first result is `identity`)."""
    def impl(x, *, axis, reverse=False, exclusive=False):
        if reverse:
            x = np.flip(x, axis)
        out = numpy_fn(x, axis=axis)
        if exclusive:
            widths = [(0, 0)] * out.ndim
            widths[axis] = (1, 0)
            keep = (slice(None),) * axis + (slice(0, out.shape[axis]),)
            out = np.pad(out, widths, constant_values=identity)[keep]
        return np.flip(out, axis) if reverse else out
    return impl


cumsum_p = Primitive("cumsum")


def _cumsum_transpose(ct, x, *, axis, reverse=False, exclusive=False):
    # A scan's matrix is triangular; its transpose scans the other way.
    return (cumsum_p.bind(ct, axis=axis, reverse=not reverse, exclusive=exclusive),)


register(cumsum_p, impl=_scan_impl(np.cumsum, 0), abstract_eval=_scan_abstract_eval(np.cumsum),
         jvp=linear_jvp(cumsum_p), transpose=_cumsum_transpose,
         batch=reduction_batch(cumsum_p), symbolic_zeros=True, linear_in=(0,))


cumprod_p = Primitive("cumprod")


def _cumprod_parts(x, params):
    # y * cumsum(t / x) would divide by zero. Per prefix: with no zero yet that formula is
    # safe on the values; with exactly one zero only that zero's tangent counts, times the
    # product of the nonzero values; with two or more zeros the derivative is zero. Exact to
    # first order; the derivative of this derivative drops terms at zeros (the masks are
    # constants), and values near the smallest normal numbers overflow t / x.
    is_zero = np.equal(x, 0)
    nonzero = np.where(is_zero, 1, x)
    scale = cumprod_p.bind(nonzero, **params)
    zeros_so_far = cumsum_p.bind(is_zero, **params)
    none = np.where(zeros_so_far == 0, scale, 0)
    one = np.where(zeros_so_far == 1, scale, 0)
    return is_zero, nonzero, none, one


def _cumprod_tangent(t, x, *, ans, **params):
    is_zero, nonzero, none, one = _cumprod_parts(x, params)
    return (none * cumsum_p.bind(t / nonzero, **params)
            + one * cumsum_p.bind(np.where(is_zero, t, 0), **params))


def _cumprod_cotangent(ct, x, *, ans, **params):
    is_zero, nonzero, none, one = _cumprod_parts(x, params)
    params = dict(params, reverse=not params.get("reverse", False))
    return (cumsum_p.bind(none * ct, **params) / nonzero
            + np.where(is_zero, cumsum_p.bind(one * ct, **params), 0))


register(cumprod_p, impl=_scan_impl(np.cumprod, 1),
         abstract_eval=_scan_abstract_eval(np.cumprod),
         jvp=defjvp(cumprod_p, _cumprod_tangent), vjp=defvjp(_cumprod_cotangent),
         batch=reduction_batch(cumprod_p), symbolic_zeros=True)


def _scan(prim, numpy_name, a, axis, dtype, out):
    _no_options(numpy_name, out=out)
    if dtype is not None:
        a = a.astype(dtype)  # a scan is sequential, so casting first matches numpy exactly
    shape = aval(a).shape
    axis = _single_axis(axis, len(shape))
    if axis is None or not shape:
        a, axis = reshape(a, (aval(a).size,)), 0  # numpy scans the flattened array
    return prim.bind(a, axis=axis, reverse=False, exclusive=False)


@implements(np.cumsum)
def cumsum(a, axis=None, dtype=None, out=None):
    """`np.cumsum`; axis None scans the flattened array."""
    return _scan(cumsum_p, "cumsum", a, axis, dtype, out)


@implements(np.cumprod)
def cumprod(a, axis=None, dtype=None, out=None):
    """`np.cumprod`; axis None scans the flattened array."""
    return _scan(cumprod_p, "cumprod", a, axis, dtype, out)


# -- prod ---------------------------------------------------------------------------------------

prod_p = Primitive("prod")


def _others_product(x, axes):
    """For each element, the product of the other elements of its reduced slice, from
    exclusive products both ways: no division by x, so zeros give exact derivatives (and the
    result is itself differentiable at zeros)."""
    shape = aval(x).shape
    kept = [i for i in range(len(shape)) if i not in axes]
    order = tuple(kept) + tuple(axes)
    moved = transpose(x, order)
    flat = reshape(moved, tuple(shape[i] for i in kept) + (_count(shape, axes),))
    scan = dict(axis=len(kept), exclusive=True)
    others = (cumprod_p.bind(flat, reverse=False, **scan)
              * cumprod_p.bind(flat, reverse=True, **scan))
    return transpose(reshape(others, aval(moved).shape), tuple(int(i) for i in np.argsort(order)))


def _prod_tangent(t, x, *, ans, axes, dtype=None):
    return np.sum(_as(t, dtype) * _others_product(_as(x, dtype), axes), axis=axes)


def _prod_cotangent(ct, x, *, ans, axes, dtype=None):
    return expand_reduced(ct, aval(x).shape, axes) * _others_product(_as(x, dtype), axes)


register(prod_p, impl=lambda x, *, axes, dtype=None: np.prod(x, axis=axes, dtype=dtype),
         abstract_eval=_reduction_abstract_eval(np.prod), jvp=defjvp(prod_p, _prod_tangent),
         vjp=defvjp(_prod_cotangent), batch=reduction_batch(prod_p), symbolic_zeros=True)


@implements(np.prod)
def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """`np.prod` (no out/initial/where)."""
    _no_options("prod", out=out, initial=initial, where=where)
    shape = aval(a).shape
    axes = normalize_axes(axis, len(shape))
    result = prod_p.bind(a, axes=axes, dtype=None if dtype is None else np.dtype(dtype))
    return _keep(result, shape, axes, keepdims)


# -- max and min --------------------------------------------------------------------------------

def _extremum_abstract_eval(name):
    def abstract_eval(x, *, axes):
        if any(x.shape[ax] == 0 for ax in axes):
            raise ValueError(f"zero-size array to reduction operation {name} which has no "
                             "identity")
        return ShapedArray(reduced_shape(x.shape, axes), x.dtype)
    return abstract_eval


def _tie_weights(x, ans, axes):
    # Tied extremes share the derivative equally (as np.maximum's do), so the weights of a
    # reduced slice sum to one: moving every tied value together moves the result as much.
    shape = aval(x).shape
    hit = np.equal(x, expand_reduced(ans, shape, axes)).astype(aval(x).dtype)
    return hit / expand_reduced(np.sum(hit, axis=axes), shape, axes)


def _extremum_rules(prim):
    def tangent(t, x, *, ans, axes):
        return np.sum(t * _tie_weights(x, ans, axes), axis=axes)

    def cotangent(ct, x, *, ans, axes):
        return expand_reduced(ct, aval(x).shape, axes) * _tie_weights(x, ans, axes)
    return {"jvp": defjvp(prim, tangent), "vjp": defvjp(cotangent)}


reduce_max_p = Primitive("reduce_max")
register(reduce_max_p, impl=lambda x, *, axes: np.max(x, axis=axes),
         abstract_eval=_extremum_abstract_eval("maximum"), **_extremum_rules(reduce_max_p),
         batch=reduction_batch(reduce_max_p), symbolic_zeros=True)

reduce_min_p = Primitive("reduce_min")
register(reduce_min_p, impl=lambda x, *, axes: np.min(x, axis=axes),
         abstract_eval=_extremum_abstract_eval("minimum"), **_extremum_rules(reduce_min_p),
         batch=reduction_batch(reduce_min_p), symbolic_zeros=True)


def _extremum(prim, name, a, axis, out, keepdims, initial, where):
    _no_options(name, out=out, initial=initial, where=where)
    shape = aval(a).shape
    axes = normalize_axes(axis, len(shape))
    return _keep(prim.bind(a, axes=axes), shape, axes, keepdims)


@implements(np.max)
@implements(np.amax)
def amax(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """`np.max` / `np.amax` (no out/initial/where); ties share the derivative equally."""
    return _extremum(reduce_max_p, "max", a, axis, out, keepdims, initial, where)


@implements(np.min)
@implements(np.amin)
def amin(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """`np.min` / `np.amin` (no out/initial/where); ties share the derivative equally."""
    return _extremum(reduce_min_p, "min", a, axis, out, keepdims, initial, where)


# -- argmax and argmin (zero derivative) --------------------------------------------------------

def _arg_abstract_eval(name):
    def abstract_eval(x, *, axis):
        if not 0 <= axis < x.ndim:
            raise ValueError(f"axis {axis} is out of bounds for an array of dimension {x.ndim}")
        if x.shape[axis] == 0:
            raise ValueError(f"attempt to get {name} of an empty sequence")
        return ShapedArray(reduced_shape(x.shape, (axis,)), np.intp)
    return abstract_eval


argmax_p = Primitive("argmax")
register(argmax_p, impl=lambda x, *, axis: np.argmax(x, axis=axis),
         abstract_eval=_arg_abstract_eval("argmax"), **zero_derivative(argmax_p),
         batch=reduction_batch(argmax_p), symbolic_zeros=True)

argmin_p = Primitive("argmin")
register(argmin_p, impl=lambda x, *, axis: np.argmin(x, axis=axis),
         abstract_eval=_arg_abstract_eval("argmin"), **zero_derivative(argmin_p),
         batch=reduction_batch(argmin_p), symbolic_zeros=True)


def _arg(prim, name, a, axis, out, keepdims):
    _no_options(name, out=out)
    shape = aval(a).shape
    axis = _single_axis(axis, len(shape))
    if axis is None or not shape:
        # numpy indexes the flattened array (a 0-d array counts as one element)
        result = prim.bind(reshape(a, (aval(a).size,)), axis=0)
        return reshape(result, (1,) * len(shape)) if keepdims and axis is None else result
    return _keep(prim.bind(a, axis=axis), shape, (axis,), keepdims)


@implements(np.argmax)
def argmax(a, axis=None, out=None, *, keepdims=False):
    """`np.argmax` (int64 indices, zero derivative); axis None indexes the flattened array."""
    return _arg(argmax_p, "argmax", a, axis, out, keepdims)


@implements(np.argmin)
def argmin(a, axis=None, out=None, *, keepdims=False):
    """`np.argmin` (int64 indices, zero derivative); axis None indexes the flattened array."""
    return _arg(argmin_p, "argmin", a, axis, out, keepdims)


# -- any and all (zero derivative) ----------------------------------------------------------------

def _logical_abstract_eval(x, *, axes):
    return ShapedArray(reduced_shape(x.shape, axes), np.bool_)


reduce_any_p = Primitive("reduce_any")
register(reduce_any_p, impl=lambda x, *, axes: np.any(x, axis=axes),
         abstract_eval=_logical_abstract_eval, **zero_derivative(reduce_any_p),
         batch=reduction_batch(reduce_any_p), symbolic_zeros=True)

reduce_all_p = Primitive("reduce_all")
register(reduce_all_p, impl=lambda x, *, axes: np.all(x, axis=axes),
         abstract_eval=_logical_abstract_eval, **zero_derivative(reduce_all_p),
         batch=reduction_batch(reduce_all_p), symbolic_zeros=True)


@implements(np.any)
def any_(a, axis=None, out=None, keepdims=False, *, where=None):
    """`np.any` (bool result, zero derivative)."""
    _no_options("any", out=out, where=where)
    shape = aval(a).shape
    axes = normalize_axes(axis, len(shape))
    return _keep(reduce_any_p.bind(a, axes=axes), shape, axes, keepdims)


@implements(np.all)
def all_(a, axis=None, out=None, keepdims=False, *, where=None):
    """`np.all` (bool result, zero derivative)."""
    _no_options("all", out=out, where=where)
    shape = aval(a).shape
    axes = normalize_axes(axis, len(shape))
    return _keep(reduce_all_p.bind(a, axes=axes), shape, axes, keepdims)


# -- ufunc methods numpy dispatches for tracers: np.add.reduce(x), np.multiply.accumulate(x) ---

def _ufunc_reduce(numpy_function, name):
    def reduce(a, axis=0, dtype=None, out=None, keepdims=False, initial=None, where=None):
        _no_options(f"{name}.reduce", out=out, initial=initial, where=where)
        if dtype is None:
            return numpy_function(a, axis=axis, keepdims=keepdims)
        return numpy_function(a, axis=axis, dtype=dtype, keepdims=keepdims)
    reduce.__name__ = f"{name}_reduce"
    reduce.__doc__ = f"`np.{name}.reduce` (default axis 0, as numpy's)."
    return reduce


def _ufunc_accumulate(numpy_function, name):
    def accumulate(a, axis=0, dtype=None, out=None):
        if not aval(a).shape:
            raise TypeError("cannot accumulate on a scalar")
        if axis is None:
            raise ValueError("accumulate does not allow multiple axes")
        return numpy_function(a, axis=axis, dtype=dtype, out=out)
    accumulate.__name__ = f"{name}_accumulate"
    accumulate.__doc__ = f"`np.{name}.accumulate` (default axis 0, as numpy's)."
    return accumulate


implements((np.add, "reduce"))(_ufunc_reduce(sum, "add"))
implements((np.multiply, "reduce"))(_ufunc_reduce(prod, "multiply"))
implements((np.maximum, "reduce"))(_ufunc_reduce(
    lambda a, axis, keepdims, dtype=None: _as(amax(a, axis, keepdims=keepdims), dtype),
    "maximum"))
implements((np.minimum, "reduce"))(_ufunc_reduce(
    lambda a, axis, keepdims, dtype=None: _as(amin(a, axis, keepdims=keepdims), dtype),
    "minimum"))
implements((np.add, "accumulate"))(_ufunc_accumulate(cumsum, "add"))
implements((np.multiply, "accumulate"))(_ufunc_accumulate(cumprod, "multiply"))
