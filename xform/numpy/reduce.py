"""numpy's reductions and scans on tracers: sum, nansum, mean, nanmean, var, std, prod,
max/min, argmax/argmin, any/all, cumsum/cumprod, and the ufunc methods numpy dispatches
(np.add.reduce, np.multiply.accumulate, ...)."""
import math

import numpy as np

from xform.errors import TypeCheckError, shape_error, unsupported_error
from xform.ir.ad import aval
from xform.ir.tracer import Tracer
from xform.numpy.axes import normalize_axes, single_axis
from xform.numpy.protocol import implements
from xform.numpy.shape import reshape
from xform.rules.reduce import (argmax_p, argmin_p, cumprod_p, cumsum_p, prod_p, reduce_all_p,
                                reduce_any_p, reduce_max_p, reduce_min_p, reduced_shape, sum_p,
                                sum_options_p)
from xform.source_info import user_frame_info


def _keep(result, shape, axes, keepdims):
    return reshape(result, reduced_shape(shape, axes, keepdims=True)) if keepdims else result


def _no_options(name, **options):
    given = [key for key, value in options.items() if value is not None]
    if given:
        raise unsupported_error(f"numpy.{name}(..., {', '.join(f'{k}=...' for k in given)})")


def _mask(a, where):
    """numpy's `where=` of a reduction over `a`: None (every element), or a boolean array of
    a's shape (concrete or traced)."""
    if where is None or where is True:
        return None
    if type(where) is not Tracer:
        where = np.asarray(where)
    if aval(where).dtype != np.bool_:
        raise TypeCheckError(f"where= must be a boolean array, got {aval(where).dtype}",
                             user_frame_info())
    return np.broadcast_to(where, aval(a).shape)


def _initial(name, initial):
    """numpy's `initial=` as a Python scalar: it is part of the staged program."""
    if initial is None:
        return None
    if type(initial) is Tracer:
        raise unsupported_error(f"numpy.{name}(..., initial=<a traced value>)")
    value = np.asarray(initial)
    if value.ndim:
        raise shape_error(f"numpy.{name}: initial= must be a scalar")
    return value.item()


def _accumulated(prim, name, a, axis, dtype, out, keepdims, initial=None, where=None):
    """A sum-like reduction (`sum_p`, `prod_p`) with numpy's axis/dtype/keepdims."""
    if out is not None:
        _no_options(name, out=out)
    shape = aval(a).shape
    axes = normalize_axes(axis, len(shape))
    dtype = None if dtype is None else np.dtype(dtype)
    result = prim.bind(a, axes=axes, dtype=dtype)
    return _keep(result, shape, axes, keepdims) if keepdims else result


@implements(np.sum)
def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """`np.sum` (no out); with `initial=` or `where=`, numpy's masked reduction itself."""
    if initial is None and (where is None or where is True):    # (_mask's and _initial's None)
        return _accumulated(sum_p, "sum", a, axis, dtype, out, keepdims)
    mask, initial = _mask(a, where), _initial("sum", initial)
    _no_options("sum", out=out)
    shape = aval(a).shape
    axes = normalize_axes(axis, len(shape))
    result = sum_options_p.bind(a, *(() if mask is None else (mask,)), axes=axes,
                                dtype=None if dtype is None else np.dtype(dtype),
                                initial=initial)
    return _keep(result, shape, axes, keepdims)


@implements(np.nansum)
def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """`np.nansum`: NaNs count as zero."""
    _no_options("nansum", out=out)
    if aval(a).dtype.kind in "fc":
        a = np.where(np.isnan(a), 0, a)
    return sum(a, axis, dtype, keepdims=keepdims, initial=initial, where=where)


# -- mean, var, std: compositions of sum ------------------------------------------------------

def _count(shape, axes):
    return math.prod(shape[ax] for ax in axes)


def _accumulation_dtype(x_dtype, dtype):
    """The dtype numpy's mean and var sum in: float64 for integers and bools."""
    if dtype is None and x_dtype.kind in "biu":
        return np.dtype(np.float64)
    return None if dtype is None else np.dtype(dtype)


def _divide(total, count):
    """`total / count` in the total's dtype: numpy divides into the sum's own buffer, by an
    intp count, so complex64 divides in complex128 (complex division is not correctly
    rounded: the wider one rounds differently)."""
    if aval(total).dtype == np.complex64:
        return (total.astype(np.complex128) / count).astype(np.complex64)
    result = total / count
    return result if aval(result).dtype == aval(total).dtype else result.astype(aval(total).dtype)


def _selected_count(shape, axes, mask, keepdims):
    """How many elements each reduction over `axes` takes: an int, or with a mask numpy's
    count per result (an intp array)."""
    if mask is None:
        return _count(shape, axes)
    return sum(mask, axes, np.intp, keepdims=keepdims)


@implements(np.mean)
def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """`np.mean`: the sum (float64 for integers, float32 for float16) over the count."""
    _no_options("mean", out=out)
    x_aval = aval(a)
    mask = _mask(a, where)
    float16 = dtype is None and x_aval.dtype == np.float16
    acc_dtype = np.dtype(np.float32) if float16 else _accumulation_dtype(x_aval.dtype, dtype)
    # numpy counts masked items by a reduction, which takes a 0-d array's axis 0
    axes = normalize_axes(axis, x_aval.ndim, strict=mask is None)
    total = sum(a, axes, acc_dtype, keepdims=keepdims, where=mask)
    result = _divide(total, _selected_count(x_aval.shape, axes, mask, keepdims))
    return result.astype(np.float16) if float16 else result


@implements(np.nanmean)
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """`np.nanmean`: the mean of the values that are not NaN (and `where=` selects)."""
    _no_options("nanmean", out=out)
    if aval(a).dtype.kind not in "fc":
        return mean(a, axis, dtype, keepdims=keepdims, where=where)
    if dtype is not None and np.dtype(dtype).kind not in "fc":
        raise TypeError("If a is inexact, then dtype must be inexact")
    missing = np.isnan(a)
    total = sum(np.where(missing, 0, a), axis, dtype, keepdims=keepdims, where=where)
    count = sum(np.logical_not(missing), axis, np.intp, keepdims=keepdims, where=where)
    return _divide(total, count)


def _var(a, axis, dtype, ddof, keepdims, mean_, correction, where=None):
    """numpy's `_var` step for step, so that staged values equal numpy's bit for bit."""
    if correction is not None:
        if ddof != 0:
            raise ValueError("ddof and correction can't be provided simultaneously.")
        ddof = correction
    shape = aval(a).shape
    mask = _mask(a, where)
    axes = normalize_axes(axis, len(shape), strict=mask is None)
    dtype = _accumulation_dtype(aval(a).dtype, dtype)
    count = _selected_count(shape, axes, mask, keepdims)
    if mean_ is None:
        divisor = count if mask is None else \
            reshape(count, reduced_shape(shape, axes, keepdims=True))
        mean_ = _divide(sum(a, axes, dtype, keepdims=True, where=mask), divisor)
    centered = a - mean_
    if aval(centered).dtype.kind == "c":
        # numpy squares the parts and adds them: |x - mean|**2, a real result
        squares = np.square(np.real(centered)) + np.square(np.imag(centered))
    else:
        squares = centered * centered
    total = sum(squares, axes, dtype, keepdims=keepdims, where=mask)
    return _divide(total, max(count - ddof, 0) if mask is None else np.maximum(count - ddof, 0))


@implements(np.var)
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
        correction=None):
    """`np.var` (`mean=`, `correction=` and `where=` included; no out)."""
    _no_options("var", out=out)
    return _var(a, axis, dtype, ddof, keepdims, mean, correction, where)


@implements(np.std)
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
        correction=None):
    """`np.std`: the square root of `np.var`."""
    _no_options("std", out=out)
    return np.sqrt(_var(a, axis, dtype, ddof, keepdims, mean, correction, where))



def _scan(prim, numpy_name, a, axis, dtype, out):
    _no_options(numpy_name, out=out)
    if dtype is not None:
        a = a.astype(dtype)  # a scan is sequential, so casting first matches numpy exactly
    shape = aval(a).shape
    axis = single_axis(axis, len(shape))
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


@implements(np.prod)
def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """`np.prod` (no out/initial); `where=` as ones where masked (a product is sequential,
    so multiplying by 1.0 rounds nothing)."""
    _no_options("prod", initial=initial)
    mask = _mask(a, where)
    if mask is not None:
        a = np.where(mask, a, np.ones((), aval(a).dtype))
    return _accumulated(prod_p, "prod", a, axis, dtype, out, keepdims)


def _extremum(prim, ufunc, name, a, axis, out, keepdims, initial, where):
    """max or min; `initial=` joins every result (maximum(max(a), initial): exact), `where=`
    (which numpy accepts only with `initial=`) puts `initial` where masked."""
    _no_options(name, out=out)
    mask, initial = _mask(a, where), _initial(name, initial)
    if mask is not None and initial is None:
        raise TypeCheckError(f"reduction operation '{ufunc.__name__}' does not have an "
                             "identity, so to use a where mask one has to specify 'initial'",
                             user_frame_info())
    shape, dtype = aval(a).shape, aval(a).dtype
    axes = normalize_axes(axis, len(shape))
    if initial is not None:
        fill = np.asarray(initial, dtype)       # numpy casts `initial` to a's dtype
        if any(shape[ax] == 0 for ax in axes):
            return np.full(reduced_shape(shape, axes, keepdims), fill)
        if mask is not None:
            a = np.where(mask, a, fill)
    result = prim.bind(a, axes=axes)
    if initial is not None:
        result = ufunc(result, fill)
    return _keep(result, shape, axes, keepdims)


@implements(np.max)
@implements(np.amax)
def amax(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """`np.max` / `np.amax` (no out); ties share the derivative equally."""
    return _extremum(reduce_max_p, np.maximum, "max", a, axis, out, keepdims, initial, where)


@implements(np.min)
@implements(np.amin)
def amin(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """`np.min` / `np.amin` (no out); ties share the derivative equally."""
    return _extremum(reduce_min_p, np.minimum, "min", a, axis, out, keepdims, initial, where)


def _arg(prim, name, a, axis, out, keepdims):
    _no_options(name, out=out)
    shape = aval(a).shape
    axis = single_axis(axis, len(shape))
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


def _logical(prim, name, a, axis, out, keepdims, where):
    _no_options(name, out=out)
    mask = _mask(a, where)
    if mask is not None:        # masked elements are the reduction's identity
        a = np.where(mask, a, np.asarray(prim is reduce_all_p, aval(a).dtype))
    shape = aval(a).shape
    axes = normalize_axes(axis, len(shape))
    return _keep(prim.bind(a, axes=axes), shape, axes, keepdims)


@implements(np.any)
def any_(a, axis=None, out=None, keepdims=False, *, where=None):
    """`np.any` (bool result, zero derivative)."""
    return _logical(reduce_any_p, "any", a, axis, out, keepdims, where)


@implements(np.all)
def all_(a, axis=None, out=None, keepdims=False, *, where=None):
    """`np.all` (bool result, zero derivative)."""
    return _logical(reduce_all_p, "all", a, axis, out, keepdims, where)


# -- ufunc methods numpy dispatches for tracers: np.add.reduce(x), np.multiply.accumulate(x) ---

def _ufunc_reduce(numpy_function, name):
    def reduce(a, axis=0, dtype=None, out=None, keepdims=False, initial=None, where=True):
        _no_options(f"{name}.reduce", out=out)
        options = {} if initial is None else {"initial": initial}
        if where is not True:
            options["where"] = where
        if dtype is None:
            return numpy_function(a, axis=axis, keepdims=keepdims, **options)
        return numpy_function(a, axis=axis, dtype=dtype, keepdims=keepdims, **options)
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


def _running(extremum, name):
    """`np.maximum.accumulate` (`minimum`): the running extremum, by doubling steps (after
    the step of shift k, each element holds the extremum of the 2k elements ending there).
    Exact: an extremum does not round."""
    def accumulate(a, axis=0, dtype=None, out=None):
        _no_options(f"{name}.accumulate", out=out)
        if not aval(a).shape:
            raise TypeError("cannot accumulate on a scalar")
        if axis is None:
            raise ValueError("accumulate does not allow multiple axes")
        axis = single_axis(axis, aval(a).ndim)
        x = np.moveaxis(a if dtype is None else a.astype(dtype), axis, 0)
        n, shift = aval(x).shape[0], 1
        while shift < n:
            x = np.concatenate([x[:shift], extremum(x[shift:], x[:-shift])])
            shift *= 2
        return np.moveaxis(x, 0, axis)
    accumulate.__name__ = f"{name}_accumulate"
    return accumulate


def _cast_after(extremum):
    """max/min take no dtype: the ufunc's reduce with a dtype casts the result."""
    def reduce(a, axis, keepdims, dtype=None, **options):
        result = extremum(a, axis, keepdims=keepdims, **options)
        return result if dtype is None else result.astype(dtype)
    return reduce


implements((np.add, "reduce"))(_ufunc_reduce(sum, "add"))
implements((np.multiply, "reduce"))(_ufunc_reduce(prod, "multiply"))
implements((np.maximum, "reduce"))(_ufunc_reduce(_cast_after(amax), "maximum"))
implements((np.minimum, "reduce"))(_ufunc_reduce(_cast_after(amin), "minimum"))
implements((np.add, "accumulate"))(_ufunc_accumulate(cumsum, "add"))
implements((np.multiply, "accumulate"))(_ufunc_accumulate(cumprod, "multiply"))
implements((np.maximum, "accumulate"))(_running(np.maximum, "maximum"))
implements((np.minimum, "accumulate"))(_running(np.minimum, "minimum"))


# numpy's own reductions of these are not the left fold of their calls (or not of its dtype)
_NOT_A_LEFT_FOLD = frozenset({np.arctan2, np.power, np.logical_and, np.logical_or,
                              np.logical_xor})


@implements("ufunc fold")
def ufunc_fold(ufunc, method, a, axis=0, dtype=None, out=None, keepdims=False, initial=None,
               where=None):
    """`reduce` / `accumulate` of a binary ufunc that has no reduction of its own
    (`np.logaddexp.reduce(z, axis=1)`): numpy's left fold along one axis, unrolled, so the same
    operations in numpy's order give numpy's bits."""
    if ufunc.signature is not None or ufunc in _NOT_A_LEFT_FOLD:
        raise unsupported_error(f"numpy.{ufunc.__name__}.{method}")
    _no_options(f"{ufunc.__name__}.{method}", out=out, where=where)
    a = a.astype(dtype) if dtype is not None else a
    shape = aval(a).shape
    if axis is None and len(shape) == 1 or isinstance(axis, tuple) and len(axis) == 1:
        axis = 0 if axis is None else axis[0]
    if not isinstance(axis, (int, np.integer)):
        raise unsupported_error(f"numpy.{ufunc.__name__}.{method} over several axes")
    axis = single_axis(axis, len(shape))
    rows = np.moveaxis(a, axis, 0)
    if shape[axis] == 0 or method == "accumulate" and initial is not None:
        raise unsupported_error(f"numpy.{ufunc.__name__}.{method} of an empty axis or with "
                                "initial=")
    folded = [rows[0] if initial is None else ufunc(initial, rows[0])]
    for row in rows[1:]:
        folded.append(ufunc(folded[-1], row))
    if method == "accumulate":
        return np.moveaxis(np.stack(folded), 0, axis)
    return np.expand_dims(folded[-1], axis) if keepdims else folded[-1]
