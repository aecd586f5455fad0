"""Factored linear algebra, SciPy's LAPACK underneath: triangular solves, LU factors (and the
solves that reuse them), the matrix exponential and Sylvester equations. Matrix primitives act
on the last two axes; leading axes are a stack. SciPy is imported by the impls, on first use.
"""
import importlib.machinery
import importlib.util
import os
import sys

import numpy as np

from xform.ir.ad import NOT_MAPPED, Undefined, Zero, aval, zero_tangent
from xform.ir.avals import ShapedArray, broadcast_shapes
from xform.ir.core import Primitive
from xform.ir.registry import register
from xform.rules import contract
from xform.rules.helpers import elementwise_batch, unbroadcast, zero_derivative


def _scipy_linalg():
    import scipy.linalg
    return scipy.linalg


_ROUTINES: dict = {}


def _routine(kind, name, dtype):
    """SciPy's BLAS or LAPACK (`kind`) routine `name` for `dtype`, cached: SciPy's own lookup
    takes 0.5-0.7 us, a tenth of a triangular solve with one right-hand side."""
    key = (kind, name, dtype)
    found = _ROUTINES.get(key)
    if found is None:
        module = _fortran_module("_fblas" if kind == "blas" else "_flapack")
        found = getattr(module, _PREFIXES.get(np.dtype(dtype).char, "d") + name, None)
        if found is None:       # an alias SciPy's lookup knows (cnrm2 -> scnrm2, ...)
            linalg = _scipy_linalg()
            lookup = linalg.get_blas_funcs if kind == "blas" else linalg.get_lapack_funcs
            found = lookup((name,), dtype=dtype)[0]
        _ROUTINES[key] = found
    return found


_PREFIXES = {"f": "s", "d": "d", "F": "c", "D": "z"}   # BLAS/LAPACK's letter per dtype


def _fortran_module(name):
    """SciPy's compiled BLAS or LAPACK module (`_fblas`, `_flapack`), loaded by itself:
    importing scipy.linalg for it cost a process's first Cholesky gradient ~0.15 s; this
    ~5 ms. It is the module scipy.linalg itself uses (imported later, it finds it loaded)."""
    full = "scipy.linalg." + name
    module = sys.modules.get(full)
    if module is None:
        scipy_spec = importlib.util.find_spec("scipy")
        found = scipy_spec and importlib.machinery.PathFinder.find_spec(
            full, [os.path.join(path, "linalg")
                   for path in scipy_spec.submodule_search_locations or ()])
        if not found:
            return importlib.import_module(full)
        module = importlib.util.module_from_spec(found)
        found.loader.exec_module(module)
        module = sys.modules.setdefault(full, module)
    return module


def _mT(x):
    return np.swapaxes(x, -1, -2)


def _stacked(fn, n_matrices):
    """`fn` on 2-d matrices, looped over the broadcast leading axes of its first arguments."""
    def impl(*args, **params):
        mats, rest = args[:n_matrices], args[n_matrices:]
        if all(type(m) is np.ndarray and m.ndim == 2 for m in mats):
            return fn(*mats, *rest, **params)
        lead = broadcast_shapes(*(np.shape(m)[:-2] for m in mats))
        if not lead:
            return fn(*mats, *rest, **params)
        mats = [np.broadcast_to(m, lead + np.shape(m)[-2:]) for m in mats]
        results = [fn(*(m[index] for m in mats), *rest, **params) for index in np.ndindex(lead)]
        if isinstance(results[0], tuple):
            return [np.stack(r).reshape(lead + np.shape(r[0])) for r in zip(*results)]
        return np.stack(results).reshape(lead + np.shape(results[0]))
    return impl


_DTYPES: dict = {}


def _float_dtype(*dtypes):
    """The floating dtype LAPACK computes in for inputs of `dtypes` (float32 stays float32)."""
    key = dtypes
    if key not in _DTYPES:
        dtype = np.result_type(*dtypes)
        _DTYPES[key] = dtype if dtype.kind in "fc" else np.dtype(np.float64)
    return _DTYPES[key]


def _check_square(a, name):
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{name}: expected square matrices in the last two axes, got shape "
                         f"{a.shape}")


def _tri(n, dtype, k=0):
    return np.tril(np.ones((n, n), dtype), k)


# -- triangular_solve: op(A) X = B, op = identity (trans=0) or transpose (trans=1) --------

triangular_solve_p = Primitive("triangular_solve")


def _triangular_solve_2d(a, b, *, lower, trans, unit_diagonal):
    # BLAS trsm on Fortran-order views, so nothing is copied: a C-order `a` is the Fortran
    # matrix a^T (the other triangle, the other transpose flag); a C-order `b` is solved
    # from the right (X^T op(A)^T = B^T), a Fortran-order `b` (a transposed view) directly.
    a = np.ascontiguousarray(a)
    if a.dtype != b.dtype or b.size == 0:
        dtype = np.result_type(a, b, np.float32)
        if b.size == 0:
            return np.zeros(b.shape, dtype)
        a, b = a.astype(dtype), b.astype(dtype)
    if b.shape[-1] == 1:
        # one right-hand side: BLAS-2 trsv, a third of trsm's time at n = 128
        trsv = _routine("blas", "trsv", a.dtype)
        return trsv(a.T, b[:, 0], lower=not lower, trans=1 - trans,
                    diag=int(unit_diagonal))[:, None]
    trsm = _routine("blas", "trsm", a.dtype)
    if b.flags.f_contiguous and not b.flags.c_contiguous:
        return trsm(1.0, a.T, b, side=0, lower=not lower, trans_a=1 - trans,
                    diag=int(unit_diagonal))
    b = np.ascontiguousarray(b)
    return trsm(1.0, a.T, b.T, side=1, lower=not lower, trans_a=trans,
                diag=int(unit_diagonal)).T


def _triangular_solve_abstract_eval(a, b, **params):
    _check_square(a, "triangular_solve")
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise ValueError(f"triangular_solve: b of shape {b.shape} does not fit a of shape "
                         f"{a.shape}")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return ShapedArray(batch + b.shape[-2:], _float_dtype(a.dtype, b.dtype))


def triangle_of(a, *, lower, unit_diagonal):
    """The part of `a` a triangular solve reads (a tangent or cotangent of its matrix)."""
    n = aval(a).shape[-1]
    offset = -1 if unit_diagonal else 0
    mask = _tri(n, aval(a).dtype, offset)
    return a * (mask if lower else _mT(mask))


def _triangular_solve_jvp(primals, tangents, *, lower, trans, unit_diagonal):
    a, b = primals
    t_a, t_b = tangents
    params = dict(lower=lower, trans=trans, unit_diagonal=unit_diagonal)
    ans = triangular_solve_p.bind(a, b, **params)
    if type(t_a) is Zero and type(t_b) is Zero:
        return ans, Zero(aval(ans))
    # op(A) X = B: op(A) dX = dB - op(dA) X
    rhs = None if type(t_b) is Zero else t_b
    if type(t_a) is not Zero:
        t_a = triangle_of(t_a, lower=lower, unit_diagonal=unit_diagonal)
        term = -np.matmul(_mT(t_a) if trans else t_a, ans)
        rhs = term if rhs is None else rhs + term
    return ans, triangular_solve_p.bind(a, rhs, **params)


def _triangular_solve_transpose(ct, a, b, *, lower, trans, unit_diagonal):
    assert type(a) is not Undefined, "triangular_solve is linear in b only"
    ct_b = triangular_solve_p.bind(a, ct, lower=lower, trans=1 - trans,
                                   unit_diagonal=unit_diagonal)
    return None, unbroadcast(ct_b, b.aval)


def _outer_product(left, right):
    """left right^T for (stacks of) columns, by einsum: 13 us at n = 128 where numpy's
    broadcast product takes 22 (one product per element either way; zeros come out +0.0)."""
    batch = "".join(contract.fresh_letters("ijk", aval(left).ndim - 2))
    return contract.einsum_p.bind(left, right, subscripts=f"{batch}ik,{batch}jk->{batch}ij")


def _triangular_solve_vjp(primals, ans, ct, *, lower, trans, unit_diagonal):
    a, b = primals
    if type(ct) is Zero:
        return None, None
    ct_b = triangular_solve_p.bind(a, ct, lower=lower, trans=1 - trans,
                                   unit_diagonal=unit_diagonal)
    # op(A) X = B: A's cotangent is -ct_B X^T (trans: -X ct_B^T), on the triangle A is read
    left, right = (ans, ct_b) if trans else (ct_b, ans)
    if aval(ans).shape[-1] == 1:
        outer = _outer_product(left, -right)     # one right-hand side: not a matmul
    else:
        outer = -np.matmul(left, _mT(right))
    ct_a = triangle_of(outer, lower=lower, unit_diagonal=unit_diagonal)
    return unbroadcast(ct_a, aval(a)), unbroadcast(ct_b, aval(b))


register(triangular_solve_p, impl=_stacked(_triangular_solve_2d, 2),
         abstract_eval=_triangular_solve_abstract_eval, jvp=_triangular_solve_jvp,
         transpose=_triangular_solve_transpose, vjp=_triangular_solve_vjp,
         batch=elementwise_batch(triangular_solve_p), symbolic_zeros=True,
         role="triangular_solve")


def triangular_solve(a, b, *, lower, trans=0, unit_diagonal=False):
    """op(a)^-1 b for triangular `a` (only its `lower` or upper triangle is read; op is the
    transpose when `trans`); `b` is a matrix or stack of matrices.

    >>> from xform.rules.linalg_scipy import triangular_solve
    >>> triangular_solve(np.array([[2.0, 0.0], [1.0, 1.0]]), np.array([[2.0], [3.0]]),
    ...                  lower=True).ravel()
    array([1., 2.])
    """
    return triangular_solve_p.bind(a, b, lower=bool(lower), trans=int(trans),
                                   unit_diagonal=bool(unit_diagonal))


# -- cholesky_cotangent: the vjp of L = cholesky(A), real matrices -----------------------
# With S = L^-T phi(L^T Lbar) L^-1 (phi: the lower triangle, half the diagonal), cholesky's
# vjp reading A's lower triangle is phi(S + S^T). Computed by Murray's (2016) blocked
# recursion, which halves the matrix until the blocks are small and there uses that formula:
# about a third of the BLAS-3 work of the formula on the whole matrix (bench/SCIPY.md). The
# solves by L^-1 are products with an explicit inverse (BLAS trmm): OpenBLAS's trsm takes
# two to three times trmm's time on blocks of 64 rows, and the inverse of a diagonal block
# serves both its leaf and the solve of the block below it.

cholesky_cotangent_p = Primitive("cholesky_cotangent")

_LEAF_SIZE = 64      # blocks this small take the formula
_INVERSE_BASE = 32   # trtri is unblocked below 64 rows: larger inverses are built from halves
_PHI: dict = {}


def _phi(n, dtype):
    """The lower-triangle mask with 0.5 on the diagonal (cached)."""
    key = (n, dtype)
    if key not in _PHI:
        _PHI[key] = np.tril(np.ones((n, n), dtype)) - 0.5 * np.eye(n, dtype=dtype)
    return _PHI[key]


def _upper_inverse(factor, trmm, trtri):
    """L^-T, Fortran order, of the lower factor L (C order): BLAS reads factor.T as U = L^T,
    and U^-1 = [[U11^-1, -U11^-1 U12 U22^-1], [0, U22^-1]]."""
    n = factor.shape[0]
    if n <= _INVERSE_BASE:
        inverse, info = trtri(factor.T, lower=0)
        if info > 0:   # a zero on the diagonal: the infinities and nans a solve gives
            trsm = _routine("blas", "trsm", factor.dtype)
            return trsm(1.0, factor.T, np.eye(n, dtype=factor.dtype, order="F"), lower=0)
        return inverse
    h = n // 2
    inverse = np.zeros((n, n), factor.dtype, order="F")
    inverse[:h, :h] = top = _upper_inverse(factor[:h, :h], trmm, trtri)
    inverse[h:, h:] = bottom = _upper_inverse(factor[h:, h:], trmm, trtri)
    product = trmm(-1.0, top, factor[h:, :h].T, side=0, lower=0)
    inverse[:h, h:] = trmm(1.0, bottom, product, side=1, lower=0, overwrite_b=1)
    return inverse


def _cholesky_cotangent_leaf(factor, ct, inverse, out, trmm):
    # BLAS sees a C-order array as its transpose, so factor.T is the upper matrix U = L^T,
    # `inverse` is U^-1 = L^-T, and each product below is the transposed one, on fresh
    # Fortran-order buffers.
    phi = _phi(factor.shape[0], factor.dtype)
    m_t = trmm(1.0, factor.T, ct.T, side=1, lower=0, trans_a=1)          # (L^T Lbar)^T
    m_t.T[...] *= phi                                                     # P^T
    x_t = trmm(1.0, inverse, m_t, side=1, lower=0, trans_a=1, overwrite_b=1)   # P^T L^-1
    s_t = trmm(1.0, inverse, x_t, side=0, lower=0, overwrite_b=1)             # S^T
    total = s_t.T + s_t
    np.multiply(total, phi, out=out)
    return total


def _cholesky_cotangent_blocked(factor, ct, inverse, out, trmm, trtri):
    """Writes the cotangent phi(T) into `out` and returns the symmetric T when it has it
    (a leaf), else None; `inverse`: factor's _upper_inverse, or None."""
    n = factor.shape[0]
    if n <= _LEAF_SIZE:
        if inverse is None:
            inverse = _upper_inverse(factor, trmm, trtri)
        return _cholesky_cotangent_leaf(factor, ct, inverse, out, trmm)
    # L = [[L11, 0], [L21, L22]] with L22 = chol(A22 - L21 L21^T), L21 = A21 L11^-T
    h = n // 2
    lower_right = out[h:, h:]
    total = _cholesky_cotangent_blocked(factor[h:, h:], ct[h:, h:],
                                        None if inverse is None else inverse[h:, h:],
                                        lower_right, trmm, trtri)
    if total is None:
        total = lower_right + lower_right.T
    l21 = factor[h:, :h]
    ct21 = ct[h:, :h] - np.matmul(total, l21)
    top = _upper_inverse(factor[:h, :h], trmm, trtri) if inverse is None else inverse[:h, :h]
    # A21's cotangent H = ct21 L11^-1, computed as H^T = L11^-T ct21^T
    h_t = trmm(1.0, top, ct21.T, side=0, lower=0, overwrite_b=1)
    out[h:, :h] = h_t.T
    out[:h, h:] = 0
    _cholesky_cotangent_blocked(factor[:h, :h], ct[:h, :h] - np.matmul(h_t, l21), top,
                                out[:h, :h], trmm, trtri)


def _cholesky_cotangent_2d(factor, ct):
    dtype = _float_dtype(factor.dtype, ct.dtype)
    factor = np.ascontiguousarray(factor, dtype)
    ct = np.ascontiguousarray(ct, dtype)
    out = np.empty(factor.shape, dtype)
    if factor.size == 0:
        return out
    trmm, trtri = _routine("blas", "trmm", dtype), _routine("lapack", "trtri", dtype)
    _cholesky_cotangent_blocked(factor, ct, None, out, trmm, trtri)
    return out


def _cholesky_cotangent_abstract_eval(factor, ct):
    _check_square(factor, "cholesky_cotangent")
    if ct.shape[-2:] != factor.shape[-2:]:
        raise ValueError(f"cholesky_cotangent: cotangent of shape {ct.shape} does not fit a "
                         f"factor of shape {factor.shape}")
    if _float_dtype(factor.dtype, ct.dtype).kind == "c":
        raise ValueError("cholesky_cotangent: real matrices only")
    batch = broadcast_shapes(factor.shape[:-2], ct.shape[:-2])
    return ShapedArray(batch + factor.shape[-2:], _float_dtype(factor.dtype, ct.dtype))


def _cotangent_formula_terms(factor, ct):
    """(S, L^-T (.) L^-1) of the formula, in primitives (for derivatives of the cotangent)."""
    def sandwich(x):     # L^-T x L^-1
        return _mT(triangular_solve(factor, _mT(triangular_solve(factor, x, lower=True,
                                                                 trans=1)),
                                    lower=True, trans=1))
    phi = _phi(aval(factor).shape[-1], aval(factor).dtype)
    return sandwich(np.matmul(_mT(factor), ct) * phi), sandwich, phi


def _cholesky_cotangent_jvp(primals, tangents):
    factor, ct = primals
    t_factor, t_ct = tangents
    ans = cholesky_cotangent_p.bind(factor, ct)
    tangent = Zero(aval(ans)) if type(t_ct) is Zero else cholesky_cotangent_p.bind(factor, t_ct)
    if type(t_factor) is Zero:
        return ans, tangent
    # S = L^-T P L^-1: dS = L^-T (phi(dL^T Lbar) - dL^T S L - L^T S dL) L^-1
    t_factor = triangle_of(t_factor, lower=True, unit_diagonal=False)
    s, sandwich, phi = _cotangent_formula_terms(factor, ct)
    s_factor = np.matmul(s, factor)
    inner = (np.matmul(_mT(t_factor), ct) * phi - np.matmul(_mT(t_factor), s_factor)
             - np.matmul(_mT(factor), np.matmul(s, t_factor)))
    d_s = sandwich(inner)
    term = (d_s + _mT(d_s)) * phi
    return ans, term if type(tangent) is Zero else tangent + term


def _cholesky_cotangent_transpose(ct_out, factor, ct):
    assert type(factor) is not Undefined, "cholesky_cotangent is linear in its cotangent only"
    # the adjoint of Lbar -> phi(S + S^T) is cholesky's jvp: L phi(L^-1 sym(T) L^-T)
    phi = _phi(aval(factor).shape[-1], aval(factor).dtype)
    sym = ct_out * phi
    sym = sym + _mT(sym)
    x = triangular_solve(factor, _mT(triangular_solve(factor, sym, lower=True)), lower=True)
    return None, unbroadcast(np.matmul(factor, x * phi), ct.aval)


register(cholesky_cotangent_p, impl=_stacked(_cholesky_cotangent_2d, 2),
         abstract_eval=_cholesky_cotangent_abstract_eval, jvp=_cholesky_cotangent_jvp,
         transpose=_cholesky_cotangent_transpose,
         batch=elementwise_batch(cholesky_cotangent_p), symbolic_zeros=True)


def cholesky_cotangent(factor, ct):
    """The cotangent of A in L = cholesky(A) (numpy's: A's lower triangle is read) for the
    cotangent `ct` of the lower factor `factor`; real matrices or stacks of them.

    >>> from xform.rules.linalg_scipy import cholesky_cotangent
    >>> cholesky_cotangent(np.array([[2.0]]), np.array([[1.0]]))   # d sqrt(a) / da at a = 4
    array([[0.25]])
    """
    return cholesky_cotangent_p.bind(factor, ct)


# -- cholesky by LAPACK potrf, without numpy's copies (the impl of linalg's cholesky_lapack) --

_STRICT_LOWER: dict = {}


def _cholesky_potrf_2d(a, *, upper):
    # A C-order `a` is the Fortran matrix a^T: potrf of its other triangle reads the triangle
    # numpy reads, and the Fortran factor's transpose is numpy's factor, C-order, no copies.
    # Rounding differs from numpy's (which factors a Fortran copy from the other side).
    dtype = _float_dtype(a.dtype)
    a = np.ascontiguousarray(a, dtype)
    n = a.shape[-1]
    if n == 0:
        return np.zeros(a.shape, dtype)
    potrf = _routine("lapack", "potrf", dtype)
    # LAPACK's `clean` zeroes the other triangle quickly only below an upper factor
    factor, info = potrf(a.T, lower=int(upper), clean=int(not upper))
    if info > 0:
        raise np.linalg.LinAlgError("Matrix is not positive definite")   # numpy's words
    assert info == 0, f"potrf: illegal argument {-info}"
    if upper:
        key = (n, dtype)
        if key not in _STRICT_LOWER:
            _STRICT_LOWER[key] = np.tri(n, n, -1, bool)
        np.copyto(factor.T, 0, where=_STRICT_LOWER[key])
    return factor.T


cholesky_potrf = _stacked(_cholesky_potrf_2d, 1)
"""np.linalg.cholesky(a, upper=upper) by LAPACK potrf on a's memory as it is: 3x faster at
n = 128, equal to numpy's factor up to rounding; a matrix that is not positive definite
raises numpy's LinAlgError.

>>> from xform.rules.linalg_scipy import cholesky_potrf
>>> cholesky_potrf(np.array([[4.0, 2.0], [2.0, 2.0]]), upper=False)
array([[2., 0.],
       [1., 1.]])
"""


# -- lu_factor: A = P L U, packed as SciPy's (lu, piv) -----------------------------------

lu_factor_p = Primitive("lu_factor", multiple_results=True)
lu_pivots_to_permutation_p = Primitive("lu_pivots_to_permutation")


def _lu_factor_2d(a):
    return _scipy_linalg().lu_factor(a, check_finite=False)


def _lu_factor_abstract_eval(a):
    _check_square(a, "lu_factor")
    return [ShapedArray(a.shape, _float_dtype(a.dtype)),
            ShapedArray(a.shape[:-1], np.dtype(np.int32))]


def _pivots_to_permutation(piv):
    """LAPACK's row swaps (row i was swapped with row piv[i], in order) as a permutation:
    P^T A = A[perm]."""
    perm = np.empty(piv.shape, np.intp)
    for index in np.ndindex(piv.shape[:-1]):
        row = list(range(piv.shape[-1]))
        for i, p in enumerate(piv[index].tolist()):
            row[i], row[p] = row[p], row[i]
        perm[index] = row
    return perm


register(lu_pivots_to_permutation_p, impl=_pivots_to_permutation,
         abstract_eval=lambda piv: ShapedArray(piv.shape, np.dtype(np.intp)),
         **zero_derivative(lu_pivots_to_permutation_p),
         batch=lambda size, args, dims: (lu_pivots_to_permutation_p.bind(
             np.moveaxis(args[0], dims[0], 0)), 0))


def permute_rows(x, perm):
    """x[..., perm, :] for a (stacked) permutation `perm`; differentiable in `x`."""
    lead = broadcast_shapes(aval(perm).shape[:-1], aval(x).shape[:-2])
    if aval(x).shape[:-2] != lead:
        x = np.broadcast_to(x, lead + aval(x).shape[-2:])
    index = np.broadcast_to(np.expand_dims(perm, -1), aval(x).shape)
    return np.take_along_axis(x, index, axis=-2)


def lu_solve(lu, perm, b, trans=0):
    """op(A)^-1 b from A's packed LU factors and row permutation (`perm` of
    `lu_pivots_to_permutation`): two triangular solves, no new factorization.

    >>> from xform.rules.linalg_scipy import lu_factor_p, lu_pivots_to_permutation_p, lu_solve
    >>> a = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> lu, piv = lu_factor_p.bind(a)
    >>> lu_solve(lu, lu_pivots_to_permutation_p.bind(piv), np.array([[5.0], [6.0]])).ravel()
    array([-4. ,  4.5])
    """
    if trans:
        # A^T x = b with P^T A = L U: U^T L^T P^T x = b
        z = triangular_solve(lu, b, lower=False, trans=1)
        w = triangular_solve(lu, z, lower=True, trans=1, unit_diagonal=True)
        return permute_rows(w, np.argsort(perm, axis=-1))
    z = triangular_solve(lu, permute_rows(b, perm), lower=True, unit_diagonal=True)
    return triangular_solve(lu, z, lower=False)


def _lu_factor_jvp(primals, tangents):
    lu, piv = lu_factor_p.bind(primals[0])
    t_a = tangents[0]
    if type(t_a) is Zero:
        return [lu, piv], [Zero(aval(lu)), zero_tangent(aval(piv))]
    n, dtype = aval(lu).shape[-1], aval(lu).dtype
    perm = lu_pivots_to_permutation_p.bind(piv)
    # M = L^-1 P^T dA U^-1; dL = L strict_lower(M), dU = upper(M) U
    x = triangular_solve(lu, permute_rows(t_a, perm), lower=True, unit_diagonal=True)
    m = _mT(triangular_solve(lu, _mT(x), lower=False, trans=1))
    strict = _tri(n, dtype, -1)
    l_factor = lu * strict + np.eye(n, dtype=dtype)
    u_factor = lu * _mT(_tri(n, dtype))
    t_lu = np.matmul(l_factor, m * strict) + np.matmul(m * _mT(_tri(n, dtype)), u_factor)
    return [lu, piv], [t_lu, zero_tangent(aval(piv))]


def _lu_factor_batch(size, args, dims):
    x = np.moveaxis(args[0], dims[0], 0)
    return lu_factor_p.bind(x), [0, 0]


register(lu_factor_p, impl=_stacked(_lu_factor_2d, 1), abstract_eval=_lu_factor_abstract_eval,
         jvp=_lu_factor_jvp, batch=_lu_factor_batch, symbolic_zeros=True)


# -- expm: the Frechet derivative is the upper-right block of expm([[A, E], [0, A]]) -------

expm_p = Primitive("expm")


def _frechet(a, e):
    """L(A, E), the Frechet derivative of expm at A in direction E (Higham's block form)."""
    n = aval(a).shape[-1]
    zeros = np.zeros_like(a)
    block = np.concatenate([np.concatenate([a, e], axis=-1),
                            np.concatenate([zeros, a], axis=-1)], axis=-2)
    return expm_p.bind(block)[..., :n, n:]


def _expm_jvp(primals, tangents):
    a, = primals
    ans = expm_p.bind(a)
    if type(tangents[0]) is Zero:
        return ans, Zero(aval(ans))
    return ans, _frechet(a, tangents[0])


def _expm_vjp(primals, ans, ct):
    a, = primals
    if type(ct) is Zero:
        return (None,)
    # <ct, L(A, E)> = <L(A^T, ct), E>
    return (_frechet(_mT(a), ct),)


def _expm_abstract_eval(a):
    _check_square(a, "expm")
    return ShapedArray(a.shape, _float_dtype(a.dtype))


register(expm_p, impl=lambda a: _scipy_linalg().expm(a), abstract_eval=_expm_abstract_eval,
         jvp=_expm_jvp, vjp=_expm_vjp, batch=lambda size, args, dims: (
             expm_p.bind(np.moveaxis(args[0], dims[0], 0)), 0), symbolic_zeros=True)


# -- sylvester: A X + X B = Q ------------------------------------------------------------

sylvester_p = Primitive("sylvester")


def _sylvester_abstract_eval(a, b, q):
    _check_square(a, "solve_sylvester")
    _check_square(b, "solve_sylvester")
    if q.ndim < 2 or q.shape[-2:] != (a.shape[-1], b.shape[-1]):
        raise ValueError(f"solve_sylvester: q of shape {q.shape} does not fit a {a.shape} "
                         f"and b {b.shape}")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2], q.shape[:-2])
    return ShapedArray(batch + q.shape[-2:], _float_dtype(a.dtype, b.dtype, q.dtype))


def _sylvester_jvp(primals, tangents):
    a, b, q = primals
    t_a, t_b, t_q = tangents
    ans = sylvester_p.bind(a, b, q)
    # A dX + dX B = dQ - dA X - X dB
    rhs = Zero(aval(ans))
    for term in ([] if type(t_q) is Zero else [t_q]) + \
            ([] if type(t_a) is Zero else [-np.matmul(t_a, ans)]) + \
            ([] if type(t_b) is Zero else [-np.matmul(ans, t_b)]):
        rhs = term if type(rhs) is Zero else rhs + term
    if type(rhs) is Zero:
        return ans, rhs
    return ans, sylvester_p.bind(a, b, rhs)


def _sylvester_transpose(ct, a, b, q):
    assert type(a) is not Undefined and type(b) is not Undefined, "linear in q only"
    return None, None, unbroadcast(sylvester_p.bind(_mT(a), _mT(b), ct), q.aval)


register(sylvester_p, impl=_stacked(lambda a, b, q: _scipy_linalg().solve_sylvester(a, b, q),
                                     3),
         abstract_eval=_sylvester_abstract_eval, jvp=_sylvester_jvp,
         transpose=_sylvester_transpose, batch=elementwise_batch(sylvester_p),
         symbolic_zeros=True)


# -- sqrtm: X X = A, so X dX + dX X = dA: a Sylvester equation -------------------------------

sqrtm_p = Primitive("sqrtm")


def _sqrtm_2d(a):
    root = _scipy_linalg().sqrtm(a)
    if np.iscomplexobj(root) and not np.iscomplexobj(a):
        if np.any(np.abs(root.imag) > 1e-10 * max(1.0, float(np.max(np.abs(root.real))))):
            raise ValueError("sqrtm: the matrix has no real square root (use a complex input)")
        root = root.real
    return root


def _sqrtm_jvp(primals, tangents):
    ans = sqrtm_p.bind(primals[0])
    if type(tangents[0]) is Zero:
        return ans, Zero(aval(ans))
    return ans, sylvester_p.bind(ans, ans, tangents[0])


register(sqrtm_p, impl=_stacked(_sqrtm_2d, 1), abstract_eval=_expm_abstract_eval,
         jvp=_sqrtm_jvp, batch=lambda size, args, dims: (
             sqrtm_p.bind(np.moveaxis(args[0], dims[0], 0)), 0), symbolic_zeros=True)


# -- symmetric_from_triangle: the symmetric matrix whose `lower` (or upper) triangle is a's --
# What SciPy reads of `a` in eigh(a, b) and solve(a, b, assume_a="sym"). Its value is that
# triangle's, its derivative that of (a + a^T) / 2, as cholesky's and eigh's (linalg.py):
# the tangent's symmetric part, so that gradients are symmetric.

symmetric_from_triangle_p = Primitive("symmetric_from_triangle")


def _symmetric_from_triangle(a, *, lower):
    n = a.shape[-1]
    keep = np.tril(np.ones((n, n), a.dtype)) if lower else np.triu(np.ones((n, n), a.dtype))
    strict = keep - np.eye(n, dtype=a.dtype)
    return a * keep + np.swapaxes(a * strict, -1, -2)


def _symmetric_from_triangle_jvp(primals, tangents, *, lower):
    ans = symmetric_from_triangle_p.bind(primals[0], lower=lower)
    if type(tangents[0]) is Zero:
        return ans, Zero(aval(ans))
    return ans, (tangents[0] + np.swapaxes(tangents[0], -1, -2)) * 0.5


def _symmetric_from_triangle_abstract_eval(a, *, lower):
    _check_square(a, "symmetric_from_triangle")
    return ShapedArray(a.shape, a.dtype)


register(symmetric_from_triangle_p, impl=_symmetric_from_triangle,
         abstract_eval=_symmetric_from_triangle_abstract_eval,
         jvp=_symmetric_from_triangle_jvp, batch=lambda size, args, dims, *, lower: (
             symmetric_from_triangle_p.bind(np.moveaxis(args[0], dims[0], 0), lower=lower), 0),
         symbolic_zeros=True)


__all__ = ["cholesky_cotangent", "cholesky_cotangent_p", "cholesky_potrf", "expm_p",
           "lu_factor_p", "lu_pivots_to_permutation_p", "lu_solve", "permute_rows", "sqrtm_p",
           "sylvester_p", "symmetric_from_triangle_p", "triangle_of", "triangular_solve",
           "triangular_solve_p"]


# -- scipy.linalg's inv and cho_solve, SciPy's own routines (its LAPACK: getrf+getri, potrs),
# so that compiled code computes SciPy's bits; numpy's inv (gesv) rounds differently --------

scipy_inv_p = Primitive("scipy_inv")


def inverse_jvp(prim):
    """The jvp of a matrix inverse `prim`: d inv(A) = -inv(A) dA inv(A)."""
    def jvp(primals, tangents):
        ans = prim.bind(primals[0])
        if type(tangents[0]) is Zero:
            return ans, Zero(aval(ans))
        return ans, -np.matmul(ans, np.matmul(tangents[0], ans))
    return jvp


def inverse_vjp(primals, ans, ct):
    """The vjp of a matrix inverse: its jvp's transpose, -inv(A)^T ct inv(A)^T, in the order
    transposing the linearized jvp computes it (the same bits, without staging that graph)."""
    return (np.matmul(np.matmul(np.swapaxes(ans, -1, -2), -ct), np.swapaxes(ans, -1, -2)),)


register(scipy_inv_p, impl=lambda a: _scipy_linalg().inv(a), abstract_eval=_expm_abstract_eval,
         jvp=inverse_jvp(scipy_inv_p), vjp=inverse_vjp, batch=lambda size, args, dims: (
             scipy_inv_p.bind(np.moveaxis(args[0], dims[0], 0)), 0), symbolic_zeros=True)


cho_solve_p = Primitive("cho_solve")
"""A^-1 b from a 2-d Cholesky factor `c` of A (only its `lower` or upper triangle is read;
A = c c^H or c^H c), b a vector or a matrix: scipy.linalg.cho_solve."""


def _cho_solve_abstract_eval(c, b, *, lower):
    _check_square(c, "cho_solve")
    if c.ndim != 2 or b.ndim not in (1, 2) or b.shape[0] != c.shape[0]:
        raise ValueError(f"cho_solve: b of shape {b.shape} does not fit c of shape {c.shape}")
    return ShapedArray(b.shape, _float_dtype(c.dtype, b.dtype))


def _conj(x):
    return np.conjugate(x) if aval(x).dtype.kind == "c" else x


def _cho_solve_jvp(primals, tangents, *, lower):
    c, b = primals
    t_c, t_b = tangents
    ans = cho_solve_p.bind(c, b, lower=lower)
    if type(t_c) is Zero and type(t_b) is Zero:
        return ans, Zero(aval(ans))
    # A x = b: A dx = db - dA x, with A = L L^H (L = c's lower triangle; upper: U^H U)
    rhs = None if type(t_b) is Zero else t_b
    if type(t_c) is not Zero:
        n = aval(c).shape[0]
        mask = _tri(n, aval(c).dtype) if lower else _mT(_tri(n, aval(c).dtype))
        low, t_low = c * mask, t_c * mask
        if not lower:   # U^H U = L L^H with L = U^H
            low, t_low = _conj(_mT(low)), _conj(_mT(t_low))
        t_a = np.matmul(t_low, _conj(_mT(low))) + np.matmul(low, _conj(_mT(t_low)))
        term = -np.matmul(t_a, ans)
        rhs = term if rhs is None else rhs + term
    return ans, cho_solve_p.bind(c, rhs, lower=lower)


def _cho_solve_transpose(ct, c, b, *, lower):
    assert type(c) is not Undefined, "cho_solve is linear in b only"
    # A is Hermitian: A^-T ct = conj(A^-1 conj(ct))
    return None, _conj(cho_solve_p.bind(c, _conj(ct), lower=lower))


def _cho_solve_batch(size, args, dims, *, lower):
    rows = [[arg if dim is NOT_MAPPED else np.moveaxis(arg, dim, 0)[i]
             for arg, dim in zip(args, dims)] for i in range(size)]
    return np.stack([cho_solve_p.bind(c, b, lower=lower) for c, b in rows]), 0


register(cho_solve_p, impl=lambda c, b, *, lower: _scipy_linalg().cho_solve((c, lower), b),
         abstract_eval=_cho_solve_abstract_eval, jvp=_cho_solve_jvp,
         transpose=_cho_solve_transpose, batch=_cho_solve_batch, symbolic_zeros=True,
         linear_in=(1,))
