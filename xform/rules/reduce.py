"""Reductions and scans: sum, prod, max/min, any/all, argmax/argmin, cumsum/cumprod, and the
reduction helpers other rules share (reduced_shape, expand_reduced, reduction_batch); numpy's
reduction functions over them are in xform.numpy."""
import math

import numpy as np
from numpy import ndarray   # (read per value: see xform.transforms.vjp)

from xform.ir.avals import ShapedArray, shaped_array
from xform.ir.core import Primitive
from xform.ir.ad import NOT_MAPPED, Zero, aval, broadcast_scalar, move_to_front
from xform.rules.helpers import defjvp, defvjp, linear_jvp, zero_derivative
from xform.ir.registry import register


def reduced_shape(shape, axes, keepdims=False):
    if len(axes) == len(shape) and not keepdims:    # (a full reduction: the most common)
        return ()
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def expand_reduced(ct, shape, axes):
    """Undo a reduction's shape change: put size-1 axes back at `axes`, then broadcast (a
    0-d cotangent, a full reduction's, broadcasts as it is)."""
    if aval(ct).shape:
        ct = np.reshape(ct, reduced_shape(shape, axes, keepdims=True))
    elif isinstance(ct, (np.ndarray, np.generic)):
        return broadcast_scalar(ct, shape)
    return np.broadcast_to(ct, shape)


_REDUCTION_DTYPES: dict = {}


def _reduction_dtype(numpy_fn, x):
    """The dtype `numpy_fn` reduces `x`'s dtype to (asked of numpy once per dtype)."""
    key = (numpy_fn, x.dtype)
    dtype = _REDUCTION_DTYPES.get(key)
    if dtype is None:
        dtype = _REDUCTION_DTYPES[key] = np.result_type(numpy_fn(np.ones(1, x.dtype)))
    return dtype


def _reduction_abstract_eval(numpy_fn):
    def abstract_eval(x, *, axes, dtype=None):
        return shaped_array(reduced_shape(x.shape, axes),
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


def _as(x, dtype):
    return x if dtype is None else x.astype(dtype)


# -- sum ---------------------------------------------------------------------------------------

sum_p = Primitive("sum")


def _sum_transpose(ct, x, *, axes, dtype=None):
    ct = expand_reduced(ct, x.aval.shape, axes)
    x_dtype = x.aval.dtype
    ct_dtype = ct.dtype if type(ct) is ndarray else aval(ct).dtype   # (concrete: no aval)
    return (ct.astype(x_dtype) if ct_dtype != x_dtype else ct,)


def _sum_impl(x, *, axes, dtype=None):
    # np.add.reduce is what np.sum runs, without its Python wrapper (a few us per call).
    return np.add.reduce(x, axis=axes, dtype=dtype)


register(sum_p, impl=_sum_impl,
         abstract_eval=_reduction_abstract_eval(np.sum), jvp=linear_jvp(sum_p),
         transpose=_sum_transpose, batch=reduction_batch(sum_p),
         symbolic_zeros=True, linear_in=(0,), role="sum")


# -- sum with numpy's `initial=` and `where=`: numpy's own masked reduction (its pairwise sums
# run over the selected elements only, and start from `initial`, so no composition of where
# and sum rounds as it does). `initial` is a Python scalar or None; a mask, when given, is
# the second operand, broadcast to x's shape. Affine in x: the tangent drops `initial`. ------

sum_options_p = Primitive("sum_options")


def _sum_options_impl(x, *mask, axes, dtype, initial):
    # (an explicit initial=None would tell numpy the sum has no identity)
    options = {} if initial is None else {"initial": initial}
    if mask:
        options["where"] = mask[0]
    return np.add.reduce(x, axis=axes, dtype=dtype, **options)


def _sum_options_abstract_eval(x, *mask, axes, dtype, initial):
    if mask and mask[0].shape != x.shape:
        raise ValueError(f"sum_options: the mask's shape {mask[0].shape} is not x's {x.shape}")
    probe = _sum_options_impl(np.ones((1,) * x.ndim, x.dtype), axes=axes, dtype=dtype,
                              initial=initial)
    return shaped_array(reduced_shape(x.shape, axes), np.result_type(probe))


def _sum_options_jvp(primals, tangents, *, axes, dtype, initial):
    ans = sum_options_p.bind(*primals, axes=axes, dtype=dtype, initial=initial)
    t = tangents[0]
    if type(t) is Zero:
        return ans, Zero(aval(ans))
    return ans, sum_options_p.bind(t, *primals[1:], axes=axes, dtype=dtype, initial=None)


def _sum_options_transpose(ct, x, *mask, axes, dtype, initial):
    assert initial is None, "sum_options is linear in x only without an initial value"
    ct = expand_reduced(ct, x.aval.shape, axes)
    if mask:
        ct = np.where(mask[0], ct, np.zeros((), aval(ct).dtype))
    return (ct.astype(x.aval.dtype) if aval(ct).dtype != x.aval.dtype else ct,
            *(None for _ in mask))


def _sum_options_batch(size, args, dims, *, axes, **params):
    args = [move_to_front(a, d, size) if d is not NOT_MAPPED else
            np.broadcast_to(a, (size, *aval(a).shape)) for a, d in zip(args, dims)]
    return sum_options_p.bind(*args, axes=tuple(a + 1 for a in axes), **params), 0


register(sum_options_p, impl=_sum_options_impl, abstract_eval=_sum_options_abstract_eval,
         jvp=_sum_options_jvp, transpose=_sum_options_transpose, batch=_sum_options_batch,
         symbolic_zeros=True)


# -- cumsum and cumprod: scans along one axis, optionally reversed or exclusive ---------------

def _scan_abstract_eval(numpy_fn):
    def abstract_eval(x, *, axis, reverse=False, exclusive=False):
        if not 0 <= axis < x.ndim:
            raise ValueError(f"axis {axis} is out of bounds for an array of dimension {x.ndim}")
        return shaped_array(x.shape, _reduction_dtype(numpy_fn, x))
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


# -- prod ---------------------------------------------------------------------------------------

prod_p = Primitive("prod")


def _others_product(x, axes):
    """For each element, the product of the other elements of its reduced slice, from
    exclusive products both ways: no division by x, so zeros give exact derivatives (and the
    result is itself differentiable at zeros)."""
    shape = aval(x).shape
    kept = [i for i in range(len(shape)) if i not in axes]
    order = tuple(kept) + tuple(axes)
    moved = np.transpose(x, order)
    flat = np.reshape(moved, tuple(shape[i] for i in kept) + (math.prod(shape[i] for i in axes),))
    scan = dict(axis=len(kept), exclusive=True)
    others = (cumprod_p.bind(flat, reverse=False, **scan)
              * cumprod_p.bind(flat, reverse=True, **scan))
    return np.transpose(np.reshape(others, aval(moved).shape),
                        tuple(int(i) for i in np.argsort(order)))


def _prod_tangent(t, x, *, ans, axes, dtype=None):
    return np.sum(_as(t, dtype) * _others_product(_as(x, dtype), axes), axis=axes)


def _prod_cotangent(ct, x, *, ans, axes, dtype=None):
    return expand_reduced(ct, aval(x).shape, axes) * _others_product(_as(x, dtype), axes)


register(prod_p, impl=lambda x, *, axes, dtype=None: np.prod(x, axis=axes, dtype=dtype),
         abstract_eval=_reduction_abstract_eval(np.prod), jvp=defjvp(prod_p, _prod_tangent),
         vjp=defvjp(_prod_cotangent), batch=reduction_batch(prod_p), symbolic_zeros=True)


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
         batch=reduction_batch(reduce_max_p), symbolic_zeros=True, role="reduce_max")

reduce_min_p = Primitive("reduce_min")
register(reduce_min_p, impl=lambda x, *, axes: np.min(x, axis=axes),
         abstract_eval=_extremum_abstract_eval("minimum"), **_extremum_rules(reduce_min_p),
         batch=reduction_batch(reduce_min_p), symbolic_zeros=True, role="reduce_min")


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


__all__ = ["argmax_p", "argmin_p", "cumprod_p", "cumsum_p", "expand_reduced", "prod_p",
           "reduce_all_p", "reduce_any_p", "reduce_max_p", "reduce_min_p", "reduced_shape",
           "reduction_batch", "sum_p"]
