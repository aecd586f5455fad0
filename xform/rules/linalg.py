"""Linear algebra on stacked real or complex matrices (inv, solve, det, slogdet, cholesky,
eigh, eigvalsh, eig, eigvals, svd, qr, pinv, lstsq) and sorting (sort, argsort, and the
`sort_gather` their derivatives use). Every matrix primitive acts on the last two axes;
leading axes are a stack, as in numpy. Complex derivatives follow JAX's and autograd's
convention (a vjp transposes the R-linear jvp under Re(sum(a * b))).
"""
import numpy as np

from xform.ir.avals import ShapedArray, broadcast_shapes
from xform.ir.core import Equation, Primitive, Var
from xform.errors import unsupported_error
from xform.ir.ad import Undefined, Zero, add_tangents, aval, move_to_front, zero_tangent
from xform.rules.helpers import (elementwise_batch, linear_jvp, needed_vjp, unbroadcast,
                                 zero_derivative)
from xform.rules.linalg_scipy import (cholesky_cotangent, cholesky_potrf, inverse_jvp,
                                      inverse_vjp, triangular_solve)
from xform.ir.registry import register
from xform.transforms.vjp import vjp_from_jvp

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


def _is_complex(x):
    return aval(x).dtype.kind == "c"


def _mH(x):
    """The conjugate transpose (the transpose of a real matrix)."""
    return np.conjugate(_mT(x)) if _is_complex(x) else _mT(x)


def _real(x):
    return np.real(x) if _is_complex(x) else x


def _hermitian_part(x):
    """(x + conj(x)) / 2: Re(x), kept in x's (complex) dtype."""
    return (x + np.conjugate(x)) * 0.5 if _is_complex(x) else x


def _anti_hermitian_part(x):
    """(x - conj(x)) / 2: i Im(x), in x's dtype (0 for real x)."""
    return (x - np.conjugate(x)) * 0.5


def _eye_like(x):
    n = aval(x).shape[-1]
    return np.eye(n, dtype=aval(x).dtype)


# Functions of a symmetric (Hermitian) matrix that read one triangle of it (cholesky, eigh,
# eigvalsh): their values are numpy's, read from that triangle, but their derivatives are
# those of the function of the matrix's Hermitian part (A + A^H) / 2, as JAX's and autograd's:
# a tangent enters as its Hermitian part, so a gradient is Hermitian too and a descent step
# keeps a covariance matrix symmetric (docs/differences.md).

def _hermitian_matrix_part(t):
    """(t + t^H) / 2 over the last two axes (real: the symmetric part)."""
    return (t + _mH(t)) * 0.5


# -- inv: d inv(A) = -inv(A) dA inv(A) -----------------------------------------------------

inv_p = Primitive("inv")

register(inv_p, impl=np.linalg.inv,
         abstract_eval=_square_abstract_eval(np.linalg.inv, lambda s: [s]),
         jvp=inverse_jvp(inv_p), vjp=inverse_vjp, batch=_stacked_batch(inv_p),
         symbolic_zeros=True)


# -- solve(A, B) for matrix B (..., M, K); xform.numpy.linalg.solve reshapes a vector b -----

solve_p = Primitive("solve")


def _solve_abstract_eval(a, b, *, triangle=None):
    _check_square(a, "solve")
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise ValueError(f"solve: b of shape {b.shape} does not fit a of shape {a.shape}")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return ShapedArray(batch + b.shape[-2:], _result_dtypes(np.linalg.solve, a.dtype, b.dtype)[0])


# `triangle` ("lower" or "upper"), a param only where a pass knows `a` is triangular (a
# Cholesky factor or its transpose, xform.passes.simplify): the value is still numpy's LU
# solve, for numpy's bits; the derivatives solve by substitution. Rules decide from it, never
# from where `a` came from, so that a gradient computed at once decides as its graph does.

def _solve_impl(a, b, *, triangle=None):
    return np.linalg.solve(a, b)


def _solve_jvp(primals, tangents, *, triangle=None):
    a, b = primals
    t_a, t_b = tangents
    ans = solve_p.bind(a, b, **_triangle_param(triangle))
    if type(t_a) is Zero and type(t_b) is Zero:
        return ans, Zero(aval(ans))
    # dX = A^-1 (dB - dA X): differentiate A X = B
    if type(t_a) is Zero:
        rhs = t_b
    elif type(t_b) is Zero:
        rhs = -np.matmul(t_a, ans)
    else:
        rhs = t_b - np.matmul(t_a, ans)
    if triangle is not None:
        # numpy's LU keeps the primal's bits; a derivative has none to keep
        return ans, triangular_solve(a, rhs, lower=triangle == "lower")
    return ans, solve_p.bind(a, rhs)


def _solve_transpose(ct, a, b, *, triangle=None):
    assert type(a) is not Undefined, "solve is linear in b only"
    flipped = {"lower": "upper", "upper": "lower"}.get(triangle)
    return None, unbroadcast(solve_p.bind(_mT(a), ct, **_triangle_param(flipped)), b.aval)


def _solve_vjp(primals, ans, ct, params, needed):
    """The transpose of solve's jvp, in the order transposing its linearized jvp computes it
    (the same bits, without staging that graph): with `a` not differentiated, the transpose
    in `b`; else ct_rhs = a^-T ct, b's cotangent ct_rhs, a's -ct_rhs x^T."""
    a, b = primals
    need_a = (needed is None or needed[0]) and aval(a).dtype.kind in "fc"
    need_b = (needed is None or needed[1]) and aval(b).dtype.kind in "fc"
    triangle = params.get("triangle")
    if not need_a:
        if not need_b:
            return None, None
        return _solve_transpose(ct, a, Undefined(aval(b)), triangle=triangle)
    if triangle is not None:
        ct_rhs = triangular_solve(a, ct, lower=triangle == "lower", trans=1)
    else:
        ct_rhs = solve_p.bind(_mT(a), ct)
    ct_a = unbroadcast(np.matmul(-ct_rhs, _mT(ans)), aval(a))
    return ct_a, unbroadcast(ct_rhs, aval(b)) if need_b else None


def _triangle_param(triangle) -> dict:
    """solve's params: `triangle` only where known, so that other solves keep no param."""
    return {} if triangle is None else {"triangle": triangle}


register(solve_p, impl=_solve_impl, abstract_eval=_solve_abstract_eval, jvp=_solve_jvp,
         transpose=_solve_transpose, vjp=needed_vjp(_solve_vjp), batch=_stacked_batch(solve_p),
         symbolic_zeros=True,
         role="solve")


# -- det and slogdet: d log|det A| = tr(A^-1 dA) ---------------------------------------------

def _trace_inv_times(a, t):
    return np.sum(_mT(np.linalg.inv(a)) * t, axis=(-2, -1))


det_p = Primitive("det")


def _det_jvp(primals, tangents):
    ans = det_p.bind(primals[0])
    if type(tangents[0]) is Zero:
        return ans, Zero(aval(ans))
    return ans, ans * _trace_inv_times(primals[0], tangents[0])


def _det_vjp(primals, ans, ct):
    # the transpose of _det_jvp: inv(A)^T (det A ct), as transposing its linearized jvp
    # computes it (the same bits, without staging that graph)
    return (_mT(np.linalg.inv(primals[0])) * (ans * ct)[..., None, None],)


register(det_p, impl=np.linalg.det,
         abstract_eval=_square_abstract_eval(np.linalg.det, lambda s: [s[:-2]]),
         jvp=_det_jvp, vjp=_det_vjp, batch=_stacked_batch(det_p), symbolic_zeros=True)

slogdet_p = Primitive("slogdet", multiple_results=True)


def _slogdet_jvp(primals, tangents):
    sign, logabsdet = slogdet_p.bind(primals[0])
    if type(tangents[0]) is Zero:
        return [sign, logabsdet], [zero_tangent(aval(sign)), Zero(aval(logabsdet))]
    trace = _trace_inv_times(primals[0], tangents[0])
    if not _is_complex(sign):
        # the sign of a real determinant is piecewise constant: zero derivative
        return [sign, logabsdet], [zero_tangent(aval(sign)), trace]
    # d log det = tr(A^-1 dA): its real part moves log|det|, its imaginary part the phase
    return [sign, logabsdet], [sign * _anti_hermitian_part(trace), np.real(trace)]


register(slogdet_p, impl=lambda a: list(np.linalg.slogdet(a)),
         abstract_eval=_square_abstract_eval(np.linalg.slogdet, lambda s: [s[:-2], s[:-2]]),
         jvp=_slogdet_jvp, batch=_stacked_batch(slogdet_p), symbolic_zeros=True)


# -- cholesky: dL = L phi(L^-1 dA L^-H), phi = lower triangle with half the diagonal -------
# cholesky_lapack: the same factor by LAPACK potrf directly, 3x faster than numpy's at
# n = 128 but not numpy's bits: what xform.passes.simplify puts in gradients (not returned).

cholesky_p = Primitive("cholesky")
cholesky_lapack_p = Primitive("cholesky_lapack")


def _cholesky_jvp_of(prim):
    def jvp(primals, tangents, *, upper):
        ans = prim.bind(primals[0], upper=upper)
        if type(tangents[0]) is Zero:
            return ans, Zero(aval(ans))
        lower = _mH(ans) if upper else ans
        n, dtype = aval(ans).shape[-1], aval(ans).dtype
        sym = _hermitian_matrix_part(tangents[0])
        # L^-1 (L^-1 dA)^H = L^-1 dA L^-H because dA is Hermitian; triangular solves, no LU
        x = triangular_solve(lower, _mH(triangular_solve(lower, sym, lower=True)), lower=True)
        phi = np.tril(np.ones((n, n), dtype)) - 0.5 * np.eye(n, dtype=dtype)
        t_lower = np.matmul(lower, x * phi)
        return ans, _mH(t_lower) if upper else t_lower
    return jvp


def _cholesky_vjp_of(prim):
    def vjp(primals, ans, ct, *, upper):
        if type(ct) is Zero:
            return (None,)
        if _is_complex(ans):
            # the transposed jvp, as for a primitive without a vjp rule
            eqn = Equation(prim, [], [Var(aval(ans))], {"upper": upper})
            return vjp_from_jvp(eqn, primals, ct)
        # one primitive (blocked, BLAS in place) for what the transposed jvp does in ~15; it
        # gives the cotangent of the triangle read, whose symmetric part is the convention's
        if upper:
            return (_hermitian_matrix_part(cholesky_cotangent(_mT(ans), _mT(ct))),)
        return (_hermitian_matrix_part(cholesky_cotangent(ans, ct)),)
    return vjp


register(cholesky_p, impl=lambda a, *, upper: np.linalg.cholesky(a, upper=upper),
         abstract_eval=_square_abstract_eval(np.linalg.cholesky, lambda s: [s]),
         jvp=_cholesky_jvp_of(cholesky_p), vjp=_cholesky_vjp_of(cholesky_p),
         batch=_stacked_batch(cholesky_p), symbolic_zeros=True, role="cholesky")
register(cholesky_lapack_p, impl=cholesky_potrf,
         abstract_eval=_square_abstract_eval(np.linalg.cholesky, lambda s: [s]),
         jvp=_cholesky_jvp_of(cholesky_lapack_p), vjp=_cholesky_vjp_of(cholesky_lapack_p),
         batch=_stacked_batch(cholesky_lapack_p), symbolic_zeros=True, role="cholesky_lapack")


# -- eigh: dw = diag(V^H dA V), dV = V (F o V^H dA V), F_ij = 1 / (w_j - w_i) -----------------

eigh_p = Primitive("eigh", multiple_results=True)


def _reciprocal_gaps(w):
    """F_ij = 1 / (w_j - w_i) off the diagonal, 0 on it. Assumes distinct eigenvalues; the
    diagonal gap is 1 (masked out), never a division by 0."""
    eye = np.eye(aval(w).shape[-1], dtype=aval(w).dtype)
    return (1 - eye) / (np.expand_dims(w, -2) - np.expand_dims(w, -1) + eye)


def _eigh_jvp(primals, tangents, *, uplo):
    w, v = eigh_p.bind(primals[0], uplo=uplo)
    if type(tangents[0]) is Zero:
        return [w, v], [Zero(aval(w)), Zero(aval(v))]
    m = np.matmul(_mH(v), np.matmul(_hermitian_matrix_part(tangents[0]), v))
    # complex eigenvectors: the phase of each is free; this picks Im(v^H dv) = 0, as JAX does
    return [w, v], [_real(np.sum(m * _eye_like(m), axis=-1)),
                    np.matmul(v, _reciprocal_gaps(w) * m)]


register(eigh_p, impl=lambda a, *, uplo: list(np.linalg.eigh(a, UPLO=uplo)),
         abstract_eval=_square_abstract_eval(np.linalg.eigh, lambda s: [s[:-1], s]),
         jvp=_eigh_jvp, batch=_stacked_batch(eigh_p), symbolic_zeros=True)


eigvalsh_p = Primitive("eigvalsh")


def _eigvalsh_jvp(primals, tangents, *, uplo):
    # one eigh gives the values and the vectors their derivative needs
    (w, _), (dw, _) = _eigh_jvp(primals, tangents, uplo=uplo)
    return w, dw


register(eigvalsh_p, impl=lambda a, *, uplo: np.linalg.eigvalsh(a, UPLO=uplo),
         abstract_eval=_square_abstract_eval(np.linalg.eigvalsh, lambda s: [s[:-1]]),
         jvp=_eigvalsh_jvp, batch=_stacked_batch(eigvalsh_p), symbolic_zeros=True)


# -- eig: dw = diag(V^-1 dA V), dV = V (F o V^-1 dA V) + V diag(c), c fixing LAPACK's gauge ----

def _complex_dtype(dtype):
    return np.result_type(dtype, np.complex64)


def _complex(x):
    return x.astype(_complex_dtype(x.dtype), copy=False)


def _eig_impl(a):
    # numpy returns real arrays when every eigenvalue happens to be real; a staged dtype
    # cannot depend on values, so eig is always complex (as in JAX)
    w, v = np.linalg.eig(a)
    return [_complex(w), _complex(v)]


def _eig_abstract_eval(a):
    _check_square(a, "eig")
    dtype = _complex_dtype(_result_dtypes(np.linalg.eigvals, a.dtype)[0])
    return [ShapedArray(a.shape[:-1], dtype), ShapedArray(a.shape, dtype)]


eig_p = Primitive("eig", multiple_results=True)


def _eig_parts(a, t):
    w, v = eig_p.bind(a)
    t = t.astype(aval(v).dtype) if aval(t).dtype != aval(v).dtype else t
    return w, v, solve_p.bind(v, np.matmul(t, v))


def _eig_jvp(primals, tangents):
    if type(tangents[0]) is Zero:
        w, v = eig_p.bind(primals[0])
        return [w, v], [Zero(aval(w)), Zero(aval(v))]
    w, v, m = _eig_parts(primals[0], tangents[0])
    eye = _eye_like(m)
    dw = np.sum(m * eye, axis=-1)
    du = np.matmul(v, (1 - eye) / (np.expand_dims(w, -2) - np.expand_dims(w, -1) + eye) * m)
    # LAPACK's gauge: each eigenvector has unit norm and its largest-modulus entry is real,
    # so dv = du + c v with Re(v^H dv) = 0 and Im(dv_p) = 0 at that entry p
    largest = np.expand_dims(np.argmax(np.abs(v), axis=-2), -2)
    v_p = np.take_along_axis(v, largest, axis=-2)
    du_p = np.take_along_axis(du, largest, axis=-2)
    along = _hermitian_part(np.sum(np.conjugate(v) * du, axis=-2, keepdims=True))
    return [w, v], [dw, du - v * (along + _anti_hermitian_part(du_p) / v_p)]


register(eig_p, impl=_eig_impl, abstract_eval=_eig_abstract_eval, jvp=_eig_jvp,
         batch=_stacked_batch(eig_p), symbolic_zeros=True)

eigvals_p = Primitive("eigvals")


def _eigvals_jvp(primals, tangents):
    if type(tangents[0]) is Zero:
        w = eigvals_p.bind(primals[0])
        return w, Zero(aval(w))
    w, _, m = _eig_parts(primals[0], tangents[0])
    return w, np.sum(m * _eye_like(m), axis=-1)


register(eigvals_p,
         impl=lambda a: _complex(np.linalg.eigvals(a)),
         abstract_eval=lambda a: _eig_abstract_eval(a)[0], jvp=_eigvals_jvp,
         batch=_stacked_batch(eigvals_p), symbolic_zeros=True)


# -- svd: ds = Re diag(U^H dA V); dU, dV as JAX's rule (distinct nonzero singular values) -----

svd_p = Primitive("svd", multiple_results=True)


def _svd_impl(a, *, full_matrices, compute_uv):
    out = np.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    return list(out) if compute_uv else [out]


def _svd_abstract_eval(a, *, full_matrices, compute_uv):
    if a.ndim < 2:
        raise ValueError(f"svd: {a.ndim}-dimensional array given; array must be at least "
                         "two-dimensional")
    *batch, m, n = a.shape
    k = min(m, n)
    dtype = _result_dtypes(np.linalg.inv, a.dtype)[0]
    s = ShapedArray(tuple(batch) + (k,), np.finfo(dtype).dtype)
    if not compute_uv:
        return [s]
    rows, cols = (m, n) if full_matrices else (k, k)
    return [ShapedArray(tuple(batch) + (m, rows), dtype), s,
            ShapedArray(tuple(batch) + (cols, n), dtype)]


def _svd_jvp(primals, tangents, *, full_matrices, compute_uv):
    a, t = primals[0], tangents[0]
    *_, m, n = aval(a).shape
    if type(t) is Zero:
        outs = svd_p.bind(a, full_matrices=full_matrices, compute_uv=compute_uv)
        return outs, [Zero(aval(o)) for o in outs]
    if compute_uv and full_matrices and m != n:
        raise unsupported_error("the derivative of numpy.linalg.svd(..., full_matrices=True) "
                                "of a non-square matrix (the extra singular vectors are not "
                                "unique); use full_matrices=False")
    # the primal's own parameters where they give the same factors (square full_matrices)
    u, s, vh = svd_p.bind(a, full_matrices=compute_uv and full_matrices, compute_uv=True)
    v = _mH(vh)
    m_ = np.matmul(_mH(u), np.matmul(t, v))
    ds = _real(np.sum(m_ * _eye_like(m_), axis=-1))
    if not compute_uv:
        return [s], [ds]
    s_row = np.expand_dims(s, -2)
    gaps = (s_row + _mT(s_row)) * (s_row - _mT(s_row))
    eye = np.eye(aval(s).shape[-1], dtype=aval(s).dtype)
    f = (1 - eye) / (gaps + eye)
    s_inv = np.where(s == 0, 0.0, 1 / np.where(s == 0, 1.0, s))
    ds_s, s_ds = m_ * s_row, _mT(s_row) * m_
    du = np.matmul(u, f * (ds_s + _mH(ds_s)) + _anti_hermitian_part(m_ * eye)
                   * np.expand_dims(s_inv, -2))
    dv = np.matmul(v, f * (s_ds + _mH(s_ds)))
    if m > n:
        t_v = np.matmul(t, v)
        du = du + (t_v - np.matmul(u, np.matmul(_mH(u), t_v))) * np.expand_dims(s_inv, -2)
    if n > m:
        t_u = np.matmul(_mH(t), u)
        dv = dv + (t_u - np.matmul(v, np.matmul(vh, t_u))) * np.expand_dims(s_inv, -2)
    return [u, s, vh], [du, ds, _mH(dv)]


register(svd_p, impl=_svd_impl, abstract_eval=_svd_abstract_eval, jvp=_svd_jvp,
         batch=_stacked_batch(svd_p), symbolic_zeros=True)


# -- qr: JAX's rule for m >= n; a wide matrix [X | Y] is qr(X) and R_Y = Q^H Y -----------------

qr_p = Primitive("qr", multiple_results=True)


def _qr_abstract_eval(a, *, mode):
    if a.ndim < 2:
        raise ValueError(f"qr: {a.ndim}-dimensional array given; array must be at least "
                         "two-dimensional")
    *batch, m, n = a.shape
    k = min(m, n)
    dtype = _result_dtypes(np.linalg.inv, a.dtype)[0]
    q_cols, r_rows = (m, m) if mode == "complete" else (k, k)
    r = ShapedArray(tuple(batch) + (r_rows, n), dtype)
    return [r] if mode == "r" else [ShapedArray(tuple(batch) + (m, q_cols), dtype), r]


def _qr_square_jvp(q, r, t):
    """dQ, dR of A = QR for A with at least as many rows as columns (R square)."""
    t_rinv = _mT(solve_p.bind(_mT(r), _mT(t)))
    m_ = np.matmul(_mH(q), t_rinv)
    lower = np.tril(m_, -1)
    omega = lower - _mH(lower) + _anti_hermitian_part(m_) * _eye_like(m_)
    return np.matmul(q, omega - m_) + t_rinv, np.matmul(m_ - omega, r)


def _qr_jvp(primals, tangents, *, mode):
    a, t = primals[0], tangents[0]
    *_, m, n = aval(a).shape
    if type(t) is Zero:
        outs = qr_p.bind(a, mode=mode)
        return outs, [Zero(aval(o)) for o in outs]
    if mode == "complete" and m > n:
        raise unsupported_error("the derivative of numpy.linalg.qr(..., mode='complete') of a "
                                "tall matrix (the extra columns of Q are not unique); use "
                                "mode='reduced'")
    q, r = qr_p.bind(a, mode="reduced")
    if m >= n:
        dq, dr = _qr_square_jvp(q, r, t)
    else:
        dq, dr_left = _qr_square_jvp(q, r[..., :, :m], t[..., :, :m])
        dr_right = np.matmul(_mH(dq), a[..., :, m:]) + np.matmul(_mH(q), t[..., :, m:])
        dr = np.concatenate([dr_left, dr_right], axis=-1)
    return ([r], [dr]) if mode == "r" else ([q, r], [dq, dr])


register(qr_p, impl=lambda a, *, mode: list(np.linalg.qr(a, mode=mode)) if mode != "r"
         else [np.linalg.qr(a, mode=mode)],
         abstract_eval=_qr_abstract_eval, jvp=_qr_jvp, batch=_stacked_batch(qr_p),
         symbolic_zeros=True)


# -- pinv: dP = -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P (constant rank) ----------

pinv_p = Primitive("pinv")


def _pinv_abstract_eval(a, **params):
    if a.ndim < 2:
        raise ValueError(f"pinv: {a.ndim}-dimensional array given; array must be at least "
                         "two-dimensional")
    dtype = _result_dtypes(np.linalg.inv, a.dtype)[0]
    return ShapedArray(a.shape[:-2] + a.shape[-2:][::-1], dtype)


def _pinv_jvp(primals, tangents, **params):
    a, t = primals[0], tangents[0]
    p = pinv_p.bind(a, **params)
    if type(t) is Zero:
        return p, Zero(aval(p))
    return p, pinv_tangent(a, p, t)


def pinv_tangent(a, p, t):
    """The derivative of the pseudo-inverse `p` of `a` along `t` (Golub and Pereyra): valid
    where the rank is locally constant, with no new decomposition."""
    t_h = _mH(t)
    p_h = _mH(p)
    left = np.matmul(np.matmul(p, p_h), t_h - np.matmul(t_h, np.matmul(a, p)))
    right = np.matmul(t_h - np.matmul(np.matmul(p, a), t_h), np.matmul(p_h, p))
    return -np.matmul(p, np.matmul(t, p)) + left + right


register(pinv_p, impl=lambda a, *, rcond, hermitian: np.linalg.pinv(a, rcond, hermitian),
         abstract_eval=_pinv_abstract_eval, jvp=_pinv_jvp, batch=_stacked_batch(pinv_p),
         symbolic_zeros=True)


# -- lstsq(a, b) for matrix b: x, residuals and singular values (the rank is counted from them)

lstsq_p = Primitive("lstsq", multiple_results=True)


def lstsq_cutoff(rcond, m, n):
    """numpy's relative singular-value cutoff: LAPACK's gelsd runs in double precision."""
    return np.finfo(np.float64).eps * max(m, n) if rcond is None else rcond


def _lstsq_one(a, b, rcond):
    x, residuals, _, s = np.linalg.lstsq(a, b, rcond=rcond)
    m, n = a.shape
    if m > n and residuals.size == 0:
        # numpy drops the residuals when rank < n; a staged shape cannot depend on the rank
        residuals = np.sum(np.abs(b - a @ x) ** 2, axis=0).astype(s.dtype)
    return [x, residuals, s]


def _lstsq_impl(a, b, *, rcond):
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if not batch:
        return _lstsq_one(a, b, rcond)
    a = np.broadcast_to(a, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    results = [_lstsq_one(a[i], b[i], rcond) for i in np.ndindex(*batch)]
    return [np.stack(r).reshape(batch + r[0].shape) for r in zip(*results)]


def _lstsq_abstract_eval(a, b, *, rcond):
    if a.ndim < 2 or b.ndim < 2 or b.shape[-2] != a.shape[-2]:
        raise ValueError(f"lstsq: b of shape {b.shape} does not fit a of shape {a.shape}")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    *_, m, n = a.shape
    dtype = _result_dtypes(np.linalg.solve, a.dtype, b.dtype)[0]
    real = np.finfo(dtype).dtype
    return [ShapedArray(batch + (n, b.shape[-1]), dtype),
            ShapedArray(batch + ((b.shape[-1],) if m > n else (0,)), real),
            ShapedArray(batch + (min(m, n),), real)]


def _lstsq_jvp(primals, tangents, *, rcond):
    a, b = primals
    t_a, t_b = tangents
    x, residuals, s = outs = lstsq_p.bind(a, b, rcond=rcond)
    if type(t_a) is Zero and type(t_b) is Zero:
        return outs, [Zero(aval(o)) for o in outs]
    *_, m, n = aval(a).shape
    # one SVD gives the pseudo-inverse lstsq applies (its rank cut) and ds
    u, s_uv, vh = svd_p.bind(a, full_matrices=False, compute_uv=True)
    kept = s_uv > lstsq_cutoff(rcond, m, n) * s_uv[..., :1]
    s_inv = np.where(kept, 1 / np.where(kept, s_uv, 1.0), 0.0)
    p = np.matmul(_mH(vh) * np.expand_dims(s_inv, -2), _mH(u))
    dx, d_residual, ds = Zero(aval(x)), Zero(aval(b)), Zero(aval(s))
    if type(t_b) is not Zero:
        dx, d_residual = np.matmul(p, t_b), t_b
    if type(t_a) is not Zero:
        dx = add_tangents(dx, np.matmul(pinv_tangent(a, p, t_a), b))    # x = P b
        m_ = np.matmul(_mH(u), np.matmul(t_a, _mH(vh)))
        ds = _real(np.sum(m_ * _eye_like(m_), axis=-1))
        d_residual = add_tangents(d_residual, -np.matmul(t_a, x))
    d_residuals = Zero(aval(residuals))
    if m > n:
        residual = b - np.matmul(a, x)
        d_residual = d_residual - np.matmul(a, dx)
        d_residuals = 2 * _real(np.sum(np.conjugate(residual) * d_residual, axis=-2))
    return outs, [dx, d_residuals, ds]


register(lstsq_p, impl=_lstsq_impl, abstract_eval=_lstsq_abstract_eval, jvp=_lstsq_jvp,
         batch=_stacked_batch(lstsq_p), symbolic_zeros=True)


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


__all__ = ["argsort_p", "cholesky_lapack_p", "cholesky_p", "det_p", "eig_p", "eigh_p",
           "eigvals_p", "eigvalsh_p", "inv_p", "lstsq_cutoff", "lstsq_p", "pinv_p", "pinv_tangent",
           "qr_p", "slogdet_p", "solve_p", "sort_gather_p", "sort_p", "svd_p"]
