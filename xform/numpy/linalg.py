"""numpy's linear algebra and sorting on tracers: np.linalg's inv, solve, det, slogdet,
cholesky, eigh, matrix_transpose and norm; np.sort and np.argsort."""
import numpy as np

from xform.errors import shape_error, unsupported_error
from xform.ir.ad import aval
from xform.numpy.axes import normalize_axes
from xform.numpy.protocol import implements
from xform.numpy.shape import ravel, reshape, swapaxes
from xform.rules.linalg import (argsort_p, cholesky_p, det_p, eigh_p, inv_p, slogdet_p, solve_p,
                                sort_p)
from xform.rules.reduce import reduced_shape
from xform.rules.unary import astype

implements(np.linalg.inv)(inv_p.bind)
implements(np.linalg.det)(det_p.bind)


@implements(np.linalg.solve)
def solve(a, b):
    """`np.linalg.solve` with numpy 2's rule: b is a vector only when it is 1-D."""
    if aval(b).ndim == 1:
        x = solve_p.bind(a, reshape(b, aval(b).shape + (1,)))
        return reshape(x, aval(x).shape[:-1])
    return solve_p.bind(a, b)


@implements(np.linalg.slogdet)
def slogdet(a):
    """`np.linalg.slogdet`: a (sign, logabsdet) named tuple."""
    return np.linalg._linalg.SlogdetResult(*slogdet_p.bind(a))


@implements(np.linalg.cholesky)
def cholesky(a, /, *, upper=False):
    """`np.linalg.cholesky`: reads only the lower (upper=True: upper) triangle of `a`."""
    return cholesky_p.bind(a, upper=bool(upper))


@implements(np.linalg.eigh)
def eigh(a, UPLO="L"):
    """`np.linalg.eigh`: an (eigenvalues, eigenvectors) named tuple; reads one triangle."""
    if UPLO not in ("L", "U"):
        raise shape_error(f"UPLO argument must be 'L' or 'U', got {UPLO!r}")
    return np.linalg._linalg.EighResult(*eigh_p.bind(a, uplo=UPLO))


@implements(np.linalg.matrix_transpose)
def matrix_transpose(x, /):
    """`np.linalg.matrix_transpose`: swap the last two axes."""
    if aval(x).ndim < 2:
        raise shape_error(f"matrix_transpose: input array must be at least 2-dimensional, "
                          f"got shape {aval(x).shape}")
    return swapaxes(x, -1, -2)


implements(np.matrix_transpose)(matrix_transpose)


def _safe_sqrt(s):
    # sqrt'(0) is infinite: a zero vector's norm gets gradient 0 (a subgradient), not nan.
    zero = s == 0
    return np.where(zero, 0.0, np.sqrt(np.where(zero, 1.0, s)))


@implements(np.linalg.norm)
def norm(x, ord=None, axis=None, keepdims=False):
    """`np.linalg.norm`: vector ord None/2/1/inf, matrix ord None/'fro'/1/inf."""
    shape = aval(x).shape
    if aval(x).dtype.kind not in "fc":
        x = astype(x, np.float64)
    if aval(x).dtype.kind == "c":
        raise unsupported_error("numpy.linalg.norm of complex values")
    ndim = len(shape)
    if axis is None and (ord is None or (ord in ("f", "fro") and ndim == 2)
                         or (ord == 2 and ndim == 1)):
        flat = ravel(x)
        result = _safe_sqrt(np.dot(flat, flat))
        return reshape(result, (1,) * ndim) if keepdims else result
    if axis is None:
        axis = tuple(range(ndim))
    try:
        axes = tuple(int(a) for a in axis) if isinstance(axis, tuple) else (int(axis),)
        normalized = normalize_axes(axes, ndim)
    except (TypeError, ValueError) as err:
        raise shape_error(f"norm: {err}") from None
    if len(axes) == 1:
        if ord is None or ord == 2:
            return _safe_sqrt(np.sum(x * x, axis=axes, keepdims=keepdims))
        if ord == 1:
            return np.sum(np.abs(x), axis=axes, keepdims=keepdims)
        if ord == np.inf:
            return np.max(np.abs(x), axis=axes, keepdims=keepdims)
        raise unsupported_error(f"numpy.linalg.norm(..., ord={ord!r}) of vectors")
    if len(axes) != 2:
        raise shape_error("norm: improper number of dimensions to norm")
    row, col = (a % ndim for a in axes)
    if ord in (None, "f", "fro"):
        result = _safe_sqrt(np.sum(x * x, axis=axes))
    elif ord in (1, np.inf):
        # ord 1: largest column sum (sum over rows); inf: largest row sum
        summed, kept = (row, col) if ord == 1 else (col, row)
        result = np.max(np.sum(np.abs(x), axis=summed), axis=kept - (kept > summed))
    else:
        raise unsupported_error(f"numpy.linalg.norm(..., ord={ord!r}) of matrices")
    return reshape(result, reduced_shape(shape, normalized, keepdims=True)) if keepdims \
        else result


def _sort_axis(a, axis, name):
    """numpy's sort `axis`: None sorts the flattened array. Returns (array, axis)."""
    if axis is None:
        return ravel(a), 0
    ndim = aval(a).ndim
    if not -ndim <= axis < ndim:
        raise shape_error(f"{name}: axis {axis} is out of bounds for an array of dimension "
                          f"{ndim}")
    return a, int(axis) % ndim


@implements(np.sort)
def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    """`np.sort` (no `order`); the sorted values do not depend on `kind`."""
    if order is not None:
        raise unsupported_error("numpy.sort(..., order=...)")
    a, axis = _sort_axis(a, axis, "sort")
    return sort_p.bind(a, axis=axis)


@implements(np.argsort)
def argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    """`np.argsort` (no `order`); `kind` and `stable` choose the order of ties, as in numpy."""
    if order is not None:
        raise unsupported_error("numpy.argsort(..., order=...)")
    a, axis = _sort_axis(a, axis, "argsort")
    return argsort_p.bind(a, axis=axis, kind="stable" if stable else kind)
