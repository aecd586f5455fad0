"""Linear algebra on stacked matrices (inv, solve, det, slogdet, cholesky, eigh) and sorting
(sort, argsort, and the `sort_gather` their derivatives use). Every matrix primitive acts on
the last two axes; leading axes are a stack, as in numpy.
"""
import numpy as np

from xform.ir.avals import ShapedArray
from xform.ir.core import Primitive
from xform.ir.ad import Undefined, Zero, aval, move_to_front, zero_tangent
from xform.rules.helpers import elementwise_batch, linear_jvp, unbroadcast, zero_derivative
from xform.rules.linalg_scipy import triangular_solve
from xform.rules import shape
from xform.ir.tracer import Tracer
from xform.ir.rules import register

_DTYPE_CACHE: dict = {}


def _result_dtypes(numpy_fn, *dtypes):
    """The dtypes numpy's `numpy_fn` returns for 1x1 matrices of `dtypes` (cached)."""
    key = (numpy_fn, dtypes)
    result = _DTYPE_CACHE.get(key)
    if result is None:
        with np.errstate(all="ignore"):
            out = numpy_fn(*[np.eye(1, dtype=d) for d in dtypes])
        result = tuple(np.asarray(o).dtype for o in (out if isinstance(out, tuple) else (out,)))
        _DTYPE_CACHE[key] = result
    return result


def _check_square(x, name):
    if x.ndim < 2:
        raise ValueError(f"{name}: {x.ndim}-dimensional array given; array must be at least "
                         "two-dimensional")
    if x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{name}: last 2 dimensions of the array must be square, got "
                         f"shape {x.shape}")


def _square_abstract_eval(numpy_fn, out_shapes):
    """Abstract eval of a one-matrix primitive; `out_shapes(shape)` lists the result shapes."""
    def abstract_eval(x, **params):
        _check_square(x, numpy_fn.__name__)
        dtypes = _result_dtypes(numpy_fn, x.dtype)
        avals = [ShapedArray(s, d) for s, d in zip(out_shapes(x.shape), dtypes)]
        return avals if len(avals) > 1 else avals[0]
    return abstract_eval


def _stacked_batch(prim):
    """Batch rule of a stacked-matrix primitive: the batch axis becomes a leading stack axis
    (numpy broadcasts leading axes like element-wise ops, so that batch rule fits)."""
    rule = elementwise_batch(prim)

    def batch(size, args, dims, **params):
        outs, dim = rule(size, args, dims, **params)
        return outs, [dim] * len(outs) if prim.multiple_results else dim
    return batch


def _mT(x):
    return np.swapaxes(x, -1, -2)


def _symmetrize(t, uplo):
    """The symmetric matrix LAPACK sees when it reads only the `uplo` triangle of `t`."""
    if uplo == "U":
        t = _mT(t)
    n, dtype = aval(t).shape[-1], aval(t).dtype
    return t * np.tril(np.ones((n, n), dtype)) + _mT(t * np.tril(np.ones((n, n), dtype), -1))


# -- inv: d inv(A) = -inv(A) dA inv(A) -----------------------------------------------------

inv_p = Primitive("inv")


def _inv_jvp(primals, tangents):
    ans = inv_p.bind(primals[0])
    if type(tangents[0]) is Zero:
        return ans, Zero(aval(ans))
    return ans, -np.matmul(ans, np.matmul(tangents[0], ans))


register(inv_p, impl=np.linalg.inv,
         abstract_eval=_square_abstract_eval(np.linalg.inv, lambda s: [s]),
         jvp=_inv_jvp, batch=_stacked_batch(inv_p), symbolic_zeros=True)


# -- solve(A, B) for matrix B (..., M, K); xform.numpy.linalg.solve reshapes a vector b -----

solve_p = Primitive("solve")


def _solve_abstract_eval(a, b):
    _check_square(a, "solve")
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise ValueError(f"solve: b of shape {b.shape} does not fit a of shape {a.shape}")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return ShapedArray(batch + b.shape[-2:], _result_dtypes(np.linalg.solve, a.dtype, b.dtype)[0])


def _known_triangle(a):
    """"lower" or "upper" when traced `a` is a Cholesky factor (or its transpose), else None:
    the derivatives of solve(L, b) then need triangular solves only."""
    if type(a) is not Tracer:
        return None
    var, swapped = a.graph_var, False
    for eqn in reversed(a.builder.equations):
        if var not in eqn.outputs:
            continue
        if eqn.primitive is shape.transpose_p and not swapped:
            axes = eqn.params["axes"]
            if tuple(axes[-2:]) != (len(axes) - 1, len(axes) - 2) or \
                    tuple(axes[:-2]) != tuple(range(len(axes) - 2)):
                return None
            var, swapped = eqn.inputs[0], True
            continue
        if eqn.primitive is cholesky_p:
            return "lower" if eqn.params["upper"] == swapped else "upper"
        return None
    return None


def _solve_jvp(primals, tangents):
    a, b = primals
    t_a, t_b = tangents
    ans = solve_p.bind(a, b)
    if type(t_a) is Zero and type(t_b) is Zero:
        return ans, Zero(aval(ans))
    # dX = A^-1 (dB - dA X): differentiate A X = B
    if type(t_a) is Zero:
        rhs = t_b
    elif type(t_b) is Zero:
        rhs = -np.matmul(t_a, ans)
    else:
        rhs = t_b - np.matmul(t_a, ans)
    triangle = _known_triangle(a)
    if triangle is not None:
        return ans, triangular_solve(a, rhs, lower=triangle == "lower")
    return ans, solve_p.bind(a, rhs)


def _solve_transpose(ct, a, b):
    assert type(a) is not Undefined, "solve is linear in b only"
    return None, unbroadcast(solve_p.bind(_mT(a), ct), b.aval)


register(solve_p, impl=np.linalg.solve, abstract_eval=_solve_abstract_eval, jvp=_solve_jvp,
         transpose=_solve_transpose, batch=_stacked_batch(solve_p), symbolic_zeros=True)


# -- det and slogdet: d log|det A| = tr(A^-1 dA) ---------------------------------------------

def _trace_inv_times(a, t):
    return np.sum(_mT(np.linalg.inv(a)) * t, axis=(-2, -1))


det_p = Primitive("det")


def _det_jvp(primals, tangents):
    ans = det_p.bind(primals[0])
    if type(tangents[0]) is Zero:
        return ans, Zero(aval(ans))
    return ans, ans * _trace_inv_times(primals[0], tangents[0])


register(det_p, impl=np.linalg.det,
         abstract_eval=_square_abstract_eval(np.linalg.det, lambda s: [s[:-2]]),
         jvp=_det_jvp, batch=_stacked_batch(det_p), symbolic_zeros=True)

slogdet_p = Primitive("slogdet", multiple_results=True)


def _slogdet_jvp(primals, tangents):
    sign, logabsdet = slogdet_p.bind(primals[0])
    if type(tangents[0]) is Zero:
        return [sign, logabsdet], [zero_tangent(aval(sign)), Zero(aval(logabsdet))]
    # the sign is piecewise constant: zero derivative
    return [sign, logabsdet], [zero_tangent(aval(sign)),
                               _trace_inv_times(primals[0], tangents[0])]


register(slogdet_p, impl=lambda a: list(np.linalg.slogdet(a)),
         abstract_eval=_square_abstract_eval(np.linalg.slogdet, lambda s: [s[:-2], s[:-2]]),
         jvp=_slogdet_jvp, batch=_stacked_batch(slogdet_p), symbolic_zeros=True)


# -- cholesky: dL = L phi(L^-1 dA L^-T), phi = lower triangle with half the diagonal -------

cholesky_p = Primitive("cholesky")


def _cholesky_jvp(primals, tangents, *, upper):
    ans = cholesky_p.bind(primals[0], upper=upper)
    if type(tangents[0]) is Zero:
        return ans, Zero(aval(ans))
    lower = _mT(ans) if upper else ans
    n, dtype = aval(ans).shape[-1], aval(ans).dtype
    sym = _symmetrize(tangents[0], "U" if upper else "L")
    # L^-1 (L^-1 dA)^T = L^-1 dA L^-T because dA is symmetric; triangular solves, no LU
    x = triangular_solve(lower, _mT(triangular_solve(lower, sym, lower=True)), lower=True)
    phi = np.tril(np.ones((n, n), dtype)) - 0.5 * np.eye(n, dtype=dtype)
    t_lower = np.matmul(lower, x * phi)
    return ans, _mT(t_lower) if upper else t_lower


register(cholesky_p, impl=lambda a, *, upper: np.linalg.cholesky(a, upper=upper),
         abstract_eval=_square_abstract_eval(np.linalg.cholesky, lambda s: [s]),
         jvp=_cholesky_jvp, batch=_stacked_batch(cholesky_p), symbolic_zeros=True)


# -- eigh: dw = diag(V^T dA V), dV = V (F o V^T dA V), F_ij = 1 / (w_j - w_i) -----------------

eigh_p = Primitive("eigh", multiple_results=True)


def _eigh_jvp(primals, tangents, *, uplo):
    w, v = eigh_p.bind(primals[0], uplo=uplo)
    if type(tangents[0]) is Zero:
        return [w, v], [Zero(aval(w)), Zero(aval(v))]
    n, dtype = aval(v).shape[-1], aval(v).dtype
    eye = np.eye(n, dtype=dtype)
    m = np.matmul(_mT(v), np.matmul(_symmetrize(tangents[0], uplo), v))
    # Assumes distinct eigenvalues; the diagonal gap is 1 (masked out), never a division by 0.
    gaps = np.expand_dims(w, -2) - np.expand_dims(w, -1) + eye
    return [w, v], [np.sum(m * eye, axis=-1), np.matmul(v, (1 - eye) / gaps * m)]


register(eigh_p, impl=lambda a, *, uplo: list(np.linalg.eigh(a, UPLO=uplo)),
         abstract_eval=_square_abstract_eval(np.linalg.eigh, lambda s: [s[:-1], s]),
         jvp=_eigh_jvp, batch=_stacked_batch(eigh_p), symbolic_zeros=True)


# -- sort, argsort and sort_gather (take_along_axis with a permutation) ---------------------

def _axis_abstract_eval(name, dtype=None):
    def abstract_eval(x, *more, axis, **params):
        if x.ndim == 0:
            raise ValueError(f"{name}: cannot sort a 0-d array")
        if not 0 <= axis < x.ndim:
            raise ValueError(f"{name}: axis {axis} is out of bounds for an array of "
                             f"dimension {x.ndim}")
        return ShapedArray(x.shape, x.dtype if dtype is None else dtype)
    return abstract_eval


def _axis_batch(prim):
    def batch(size, args, dims, *, axis, **params):
        args = [move_to_front(x, d, size) for x, d in zip(args, dims)]
        return prim.bind(*args, axis=axis + 1, **params), 0
    return batch


argsort_p = Primitive("argsort")
register(argsort_p, impl=lambda x, *, axis, kind: np.argsort(x, axis=axis, kind=kind),
         abstract_eval=_axis_abstract_eval("argsort", np.dtype(np.intp)),
         **zero_derivative(argsort_p), batch=_axis_batch(argsort_p), symbolic_zeros=True)

sort_gather_p = Primitive("sort_gather")


def _sort_gather_abstract_eval(x, index, *, axis):
    if x.shape != index.shape or index.dtype.kind not in "iu":
        raise ValueError(f"sort_gather: index {index.str_short()} does not fit {x.str_short()}")
    return _axis_abstract_eval("sort_gather")(x, axis=axis)


def _sort_gather_transpose(ct, x, index, *, axis):
    # index is a permutation along axis, so the transpose gathers by its inverse
    inverse = argsort_p.bind(index, axis=axis, kind="stable")
    return sort_gather_p.bind(ct, inverse, axis=axis), None


register(sort_gather_p,
         impl=lambda x, index, *, axis: np.take_along_axis(x, index, axis=axis),
         abstract_eval=_sort_gather_abstract_eval, jvp=linear_jvp(sort_gather_p),
         transpose=_sort_gather_transpose, batch=_axis_batch(sort_gather_p),
         symbolic_zeros=True, linear_in=(0,))

sort_p = Primitive("sort")


def _sort_jvp(primals, tangents, *, axis):
    ans = sort_p.bind(primals[0], axis=axis)
    if type(tangents[0]) is Zero:
        return ans, Zero(aval(ans))
    # tied values take the tangent of the first in a stable order (one valid choice)
    index = argsort_p.bind(primals[0], axis=axis, kind="stable")
    return ans, sort_gather_p.bind(tangents[0], index, axis=axis)


register(sort_p, impl=lambda x, *, axis: np.sort(x, axis=axis),
         abstract_eval=_axis_abstract_eval("sort"), jvp=_sort_jvp,
         batch=_axis_batch(sort_p), symbolic_zeros=True)


__all__ = ["argsort_p", "cholesky_p", "det_p", "eigh_p", "inv_p", "slogdet_p", "solve_p",
           "sort_gather_p", "sort_p"]
