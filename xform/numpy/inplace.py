"""In-place numpy on traced arrays: augmented operators (`x += v`), ufuncs with `out=` (and
`where=` with it), `ufunc.at` (add, subtract, multiply, divide, maximum, minimum), np.copyto,
np.fill_diagonal, np.put, np.put_along_axis, np.putmask, np.place, x.fill, x.sort, staged
as functional updates that the written tracer is rebound to (xform.numpy.views keeps its
views and bases current)."""
import numpy as np

from xform.errors import (ConcretizationError, TypeCheckError, UnsupportedError, shape_error,
                          unsupported_error)
from xform.ir.ad import aval
from xform.ir.avals import broadcast_shapes
from xform.ir.tracer import Tracer
from xform.numpy.index import fit_values, index_add, set_item, take
from xform.numpy.protocol import (FUNCTIONS, array_ufunc, implements, numpy_name,
                                   with_constants_read)
from xform.numpy.rearrange import put_along_axis
from xform.numpy.views import assign, base_of, writable_builder
from xform.source_info import user_frame_info


@implements("inplace")
def inplace(x, ufunc, other):
    """`x op= other` (Tracer.__iadd__ and the rest): numpy's `ufunc(x, other, out=x)`. A 0-d
    array that views nothing stands for the scalar numpy arithmetic returns, which is
    immutable: NotImplemented makes Python rebind the name to `x op other` instead."""
    if not x.shape and base_of(x) is None:
        return NotImplemented
    return ufunc_out(ufunc, "__call__", (x, other), {}, (x,))


@implements("assign")
def assign_whole(x, value):
    """All of `x` replaced by `value` (broadcast and cast as numpy's `x[...] = value`), as a
    whole-array update (x.fill, x.sort): allowed on an argument, which is rebound."""
    value = fit_values(x, x.shape, value)
    if type(value) is not Tracer:
        value = set_item(x, ..., value)
    return assign(x, value, whole=True)


def _write_result(out, result, where, casting, name):
    """Write ufunc `name`'s `result` into the traced array `out`, as numpy's out= does."""
    if type(out) is not Tracer:
        raise UnsupportedError(
            f"{name}(..., out=y) into a concrete numpy array y is not supported on "
            "traced values: numpy would write into y itself, which cannot be staged",
            user_frame_info(),
            "make y a traced array (y = np.zeros_like(x)), or use the returned value")
    result_aval, out_aval = aval(result), aval(out)
    if not np.can_cast(result_aval.dtype, out_aval.dtype, casting):
        raise TypeCheckError(
            f"Cannot cast ufunc '{name}' output from {result_aval.dtype!r} to "
            f"{out_aval.dtype!r} with casting rule {casting!r}", user_frame_info())
    try:
        fits = broadcast_shapes(result_aval.shape, out_aval.shape) == out_aval.shape
    except ValueError:
        fits = False
    if not fits:
        raise shape_error(f"non-broadcastable output operand with shape {out_aval.shape} "
                          f"doesn't match the broadcast shape {result_aval.shape}")
    if where is not True:
        result = np.where(where, result, out)
    return assign_whole(out, result)


@implements("ufunc out")
def ufunc_out(ufunc, method, inputs, kwargs, out):
    """`ufunc(*inputs, out=out, where=...)` when an input or `out` is traced (the `out=`
    path of Tracer.__array_ufunc__): computed functionally, then written into `out`."""
    if method != "__call__":
        raise unsupported_error(f"{numpy_name(ufunc)}.{method}(..., out=...)")
    kwargs = dict(kwargs)
    where = kwargs.pop("where", True)
    casting = kwargs.pop("casting", "same_kind")
    outs = out if isinstance(out, tuple) else (out,)
    results = array_ufunc(ufunc, method, inputs, kwargs)
    if ufunc.nout == 1:
        results = (results,)
    written = tuple(result if o is None else
                    _write_result(o, result, where, casting, numpy_name(ufunc))
                    for o, result in zip(outs, results))
    return written[0] if ufunc.nout == 1 else written


def _occurrence_rounds(positions):
    """For concrete flat `positions`: one boolean mask per round, the k-th marking each
    position's k-th occurrence (a round repeats no position)."""
    positions = np.asarray(positions)
    flat = positions.ravel()
    if np.unique(flat).size == flat.size:
        return [np.ones(positions.shape, bool)]
    order = np.argsort(flat, kind="stable")
    sorted_positions = flat[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_positions)) + 1]
    ranks = np.empty(flat.size, np.intp)
    ranks[order] = np.arange(flat.size) - np.repeat(starts, np.diff(np.r_[starts, flat.size]))
    return [(ranks == k).reshape(positions.shape) for k in range(ranks.max() + 1)]


def _is_traced_index(indices):
    items = indices if isinstance(indices, tuple) else (indices,)
    return any(type(item) is Tracer for item in items)


def _constant_indices(indices):
    """Index items the function made from constants (np.array([0, 5])) as their values."""
    if type(indices) is tuple:
        return tuple(with_constants_read(item) for item in indices)
    return with_constants_read(indices)


def _ufunc_at(ufunc, a, indices, values):
    """numpy's unbuffered `ufunc.at(a, indices, values)`, functionally: each selected element
    becomes `ufunc(element, value)` computed in the promoted dtype and cast back to a's (so
    an integer `a` plus a float truncates each result), repeated positions one after
    another. The index must be concrete: which positions repeat decides the order."""
    shape = aval(a).shape
    try:
        positions = np.arange(int(np.prod(shape, dtype=int))).reshape(shape)[indices]
    except IndexError as err:
        raise shape_error(str(err)) from None
    if type(values) is not Tracer:
        values = np.asarray(values)
    values = np.broadcast_to(values, positions.shape)
    flat = np.reshape(a, (-1,))
    for selected in _occurrence_rounds(positions):
        at = positions[selected]
        flat = set_item(flat, at, ufunc(flat[at], values[selected]))
    return np.reshape(flat, shape)


def _at(ufunc):
    name = numpy_name(ufunc)

    def at(a, indices, b=None):
        if type(a) is not Tracer:
            raise ConcretizationError(
                f"{name}.at into a concrete numpy array with traced values: numpy would "
                "write into the array itself, which cannot be staged",
                user_frame_info(), "use the functional form: a = xform.index_add(a, i, v)")
        if b is None:
            raise TypeCheckError("ufunc.at needs values for a binary ufunc", user_frame_info())
        writable_builder(a)
        indices = _constant_indices(indices)
        if not _is_traced_index(indices):
            assign(a, _ufunc_at(ufunc, a, indices, b))
            return
        # A traced index: which positions repeat is unknown, so only sums can be staged (a
        # scatter-add, which adds repeated positions' values in its own order).
        if ufunc not in (np.add, np.subtract):
            raise unsupported_error(f"{name}.at with a traced index")
        b_dtype = aval(b).dtype if type(b) is Tracer else np.asarray(b).dtype
        if np.result_type(aval(a).dtype, b_dtype) != aval(a).dtype:
            raise unsupported_error(f"{name}.at with a traced index and values of a wider "
                                    "dtype than the array's")
        assign(a, index_add(a, indices, b if ufunc is np.add else np.negative(b)))
    return at


# numpy's unbuffered in-place accumulation: repeated indices accumulate
for _ufunc in (np.add, np.subtract, np.multiply, np.divide, np.maximum, np.minimum):
    FUNCTIONS[(_ufunc, "at")] = _at(_ufunc)


def _traced_destination(a, name):
    if type(a) is not Tracer:
        raise ConcretizationError(
            f"numpy.{name} writing traced values into a concrete numpy array: numpy would "
            "write into the array itself, which cannot be staged", user_frame_info(),
            "make the destination a traced array: y = np.zeros_like(x)")


@implements(np.copyto)
def copyto(dst, src, casting="same_kind", where=True):
    """`np.copyto`: `dst[...] = src` where `where`, with numpy's casting check."""
    _traced_destination(dst, "copyto")
    if type(src) is not Tracer:
        src = np.asarray(src)
    _write_result(dst, src, where, casting, "numpy.copyto")


@implements(np.fill_diagonal)
def fill_diagonal(a, val, wrap=False):
    """`np.fill_diagonal`: values written along the main diagonal (repeated cyclically)."""
    _traced_destination(a, "fill_diagonal")
    if wrap or a.ndim < 2 or (a.ndim > 2 and len(set(a.shape)) != 1):
        raise unsupported_error("numpy.fill_diagonal of a tall matrix with wrap, or of an "
                                "array whose sides differ")
    n = min(a.shape)
    positions = np.arange(n)
    if type(val) is not Tracer:
        val = np.asarray(val)
    val = np.resize(val, n) if type(val) is not Tracer else \
        val.ravel()[np.arange(n) % val.size]
    a[(positions,) * a.ndim] = val


@implements(np.put_along_axis)
def put_along_axis_in_place(arr, indices, values, axis):
    """`np.put_along_axis`: writes into `arr` (`xform.numpy.put_along_axis` returns the
    updated array instead)."""
    _traced_destination(arr, "put_along_axis")
    assign(arr, put_along_axis(arr, indices, values, axis).astype(arr.dtype))


@implements(np.put)
def put(a, ind, v, mode="raise"):
    """`np.put`: values written at flat indices of `a` (v repeated cyclically)."""
    _traced_destination(a, "put")
    if mode != "raise":
        raise unsupported_error(f"numpy.put(..., mode={mode!r})")
    ind = ind if type(ind) is Tracer else np.asarray(ind)
    count = int(np.prod(np.shape(ind), dtype=int))
    if type(v) is not Tracer:
        v = np.asarray(v)
    v = v.ravel()[np.arange(count) % v.size] if v.size != count else v.ravel()
    if base_of(a) is not None:
        raise unsupported_error("numpy.put into a view")
    flat = a.ravel()        # a view of `a`: the write lands in `a`
    flat[ind.ravel()] = v


def _flat_values(values, positions, target, name):
    """values.flat[positions % values.size] (numpy's cycling of a short values array) in
    the dtype of `target`, which numpy casts to only safely."""
    values = values if type(values) is Tracer else np.asarray(values)
    if not np.can_cast(aval(values).dtype, target.dtype, "safe"):
        raise TypeCheckError(f"numpy.{name}: Cannot cast array data from "
                             f"{aval(values).dtype!r} to {target.dtype!r} according to the "
                             "rule 'safe'", user_frame_info())
    flat = np.ravel(values).astype(target.dtype)
    size = aval(flat).shape[0]
    if size == 0:
        raise shape_error("cannot take values from an empty array")
    return take(flat, positions % size)


@implements(np.putmask)
def putmask(a, mask, values):
    """`np.putmask`: a.flat[n] = values.flat[n % values.size] where mask.flat[n], as np.where
    (a traced mask too: which positions are written does not change the shapes)."""
    _traced_destination(a, "putmask")
    mask = mask if type(mask) is Tracer else np.asarray(mask, bool)
    if aval(mask).shape != a.shape:
        raise shape_error("putmask: mask and data must be the same size")
    full = np.reshape(_flat_values(values, np.arange(a.size), a, "putmask"), a.shape)
    assign(a, np.where(mask, full, a))


@implements(np.place)
def place(arr, mask, vals):
    """`np.place`: the k-th True position of `mask` takes vals.flat[k % vals.size], as
    np.where over a running count of the mask (a traced mask too)."""
    _traced_destination(arr, "place")
    mask = mask if type(mask) is Tracer else np.asarray(mask, bool)
    if aval(mask).shape != arr.shape:
        raise shape_error("place: mask and data must be the same size")
    ranks = np.cumsum(np.ravel(mask).astype(np.intp)) - 1
    full = np.reshape(_flat_values(vals, np.maximum(ranks, 0), arr, "place"), arr.shape)
    assign(arr, np.where(mask, full, arr))
