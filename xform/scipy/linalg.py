"""scipy.linalg on tracers: solve_triangular, cholesky, cho_factor/cho_solve, lu_factor/lu_solve,
solve (assume_a), inv, det, expm, sqrtm, solve_sylvester, block_diag, eigh (also generalised),
svd, lstsq and the structured matrices toeplitz, hankel, circulant, written over xform's
linear-algebra primitives and stood in for SciPy's own while staging, once the user has
imported scipy.linalg.
"""
from __future__ import annotations

import numpy as np

from xform.errors import shape_error, unsupported_error
from xform.ir.ad import aval
from xform.numpy.construct import staged_array
from xform.numpy.stand_ins import stand_in, stand_in_when_imported
from xform.rules.linalg_scipy import (cho_solve_p, expm_p, lu_factor_p,
                                      lu_pivots_to_permutation_p, lu_solve as _lu_solve,
                                      scipy_inv_p, sqrtm_p, sylvester_p,
                                      symmetric_from_triangle_p, triangular_solve)
from xform.scipy import SCIPY_GROUP

_TRANS = {0: 0, 1: 1, 2: 1, "N": 0, "T": 1, "C": 1, "n": 0, "t": 1, "c": 1}


def _trans_code(trans, name):
    if trans not in _TRANS:
        raise shape_error(f"scipy.linalg.{name}: unknown trans {trans!r}")
    return _TRANS[trans]


def _as_matrix_rhs(b):
    """(b as a matrix, undo): a 1-d right-hand side becomes one column."""
    b = staged_array(b)
    if aval(b).ndim == 1:
        return b[:, None], lambda x: x[..., 0]
    return b, lambda x: x


def _float(x):
    x = staged_array(x)
    return x if aval(x).dtype.kind in "fc" else x.astype(np.float64)


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     check_finite=True):
    """scipy.linalg.solve_triangular: op(a) x = b reading one triangle of `a`."""
    rhs, undo = _as_matrix_rhs(b)
    return undo(triangular_solve(_float(a), rhs, lower=lower,
                                 trans=_trans_code(trans, "solve_triangular"),
                                 unit_diagonal=unit_diagonal))


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """scipy.linalg.cholesky: the upper factor by default (reads that triangle of `a`)."""
    return np.linalg.cholesky(_float(a), upper=not lower)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """scipy.linalg.cho_factor: (factor, lower); the factor's other triangle holds zeros
    (SciPy leaves arbitrary values there; cho_solve reads only the factor's triangle)."""
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """scipy.linalg.cho_solve: A^-1 b from A's Cholesky factor (a stack of factors: by two
    triangular solves)."""
    factor, lower = c_and_lower
    factor = _float(factor)
    b = staged_array(b)
    if aval(factor).ndim == 2 and aval(b).ndim in (1, 2):
        # SciPy's own routine (LAPACK potrs): its bits
        return cho_solve_p.bind(factor, b, lower=bool(lower))
    rhs, undo = _as_matrix_rhs(b)
    # A = L L^T (lower) or U^T U (upper)
    first = triangular_solve(factor, rhs, lower=lower, trans=0 if lower else 1)
    return undo(triangular_solve(factor, first, lower=lower, trans=1 if lower else 0))


def lu_factor(a, overwrite_a=False, check_finite=True):
    """scipy.linalg.lu_factor: (lu, piv) as LAPACK's getrf packs them."""
    lu, piv = lu_factor_p.bind(_float(a))
    return lu, piv


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """scipy.linalg.lu_solve: op(A)^-1 b from lu_factor's result."""
    lu, piv = lu_and_piv
    rhs, undo = _as_matrix_rhs(b)
    perm = lu_pivots_to_permutation_p.bind(staged_array(piv))
    return undo(_lu_solve(staged_array(lu), perm, rhs, trans=_trans_code(trans, "lu_solve")))


def _symmetric_from(a, lower):
    """The symmetric matrix whose `lower` (or upper) triangle is that of `a` (differentiated
    as (a + a^T) / 2, as cholesky and eigh are)."""
    return symmetric_from_triangle_p.bind(a, lower=bool(lower))


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
          assume_a=None, transposed=False):
    """scipy.linalg.solve with assume_a general, symmetric/hermitian (one triangle read),
    positive definite (Cholesky), diagonal, upper/lower triangular."""
    a = _float(a)
    if transposed:
        a = np.swapaxes(a, -1, -2)
    kind = {None: "gen", "general": "gen", "symmetric": "sym", "hermitian": "her",
            "positive definite": "pos"}.get(assume_a, assume_a)
    if kind == "gen":
        return np.linalg.solve(a, b)
    if kind in ("sym", "her"):
        return np.linalg.solve(_symmetric_from(a, lower), b)
    if kind == "pos":
        return cho_solve(cho_factor(a, lower=lower), b)
    if kind in ("upper triangular", "lower triangular"):
        return solve_triangular(a, b, lower=kind == "lower triangular")
    if kind == "diagonal":
        rhs, undo = _as_matrix_rhs(b)
        return undo(rhs / np.diagonal(a, 0, -2, -1)[..., :, None])
    raise unsupported_error(f"scipy.linalg.solve(..., assume_a={assume_a!r})")


def inv(a, overwrite_a=False, check_finite=True):
    """scipy.linalg.inv, SciPy's own routine (numpy's inv rounds differently)."""
    return scipy_inv_p.bind(_float(a))


def det(a, overwrite_a=False, check_finite=True):
    """scipy.linalg.det."""
    return np.linalg.det(_float(a))


def expm(A):
    """scipy.linalg.expm; its derivative is a Frechet derivative (an expm of a block matrix)."""
    return expm_p.bind(_float(A))


def sqrtm(A, disp=True, blocksize=64):
    """scipy.linalg.sqrtm of a matrix with a real principal square root; its derivative
    solves a Sylvester equation."""
    return sqrtm_p.bind(_float(A))


def solve_sylvester(a, b, q):
    """scipy.linalg.solve_sylvester: x with a x + x b = q."""
    return sylvester_p.bind(_float(a), _float(b), _float(q))


def block_diag(*arrs):
    """scipy.linalg.block_diag: the arrays (0-d, 1-d as rows, 2-d) along a diagonal."""
    blocks = [staged_array(a) for a in arrs]
    blocks = [b.reshape((1, 1)) if aval(b).ndim == 0 else
              b.reshape((1, -1)) if aval(b).ndim == 1 else b for b in blocks]
    if any(aval(b).ndim != 2 for b in blocks):
        raise shape_error("scipy.linalg.block_diag: arguments must have 2 or fewer "
                          "dimensions")
    dtype = np.result_type(*(aval(b).dtype for b in blocks))
    width = sum(aval(b).shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        height, cols = aval(b).shape
        rows.append(np.concatenate([np.zeros((height, left), dtype), b.astype(dtype),
                                    np.zeros((height, width - left - cols), dtype)], axis=1))
        left += cols
    return np.concatenate(rows, axis=0)


def eigh(a, b=None, *, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False,
         type=1, check_finite=True, subset_by_index=None, subset_by_value=None, driver=None):
    """scipy.linalg.eigh, also the generalised problem a v = w b v (type 1) by a Cholesky
    reduction: eigenvalues ascending, eigenvectors b-orthonormal."""
    if type != 1 or subset_by_index is not None or subset_by_value is not None:
        raise unsupported_error("scipy.linalg.eigh with type/subset_by_index/subset_by_value")
    uplo = "L" if lower else "U"
    a = _float(a)
    if b is None:
        w, v = np.linalg.eigh(a, UPLO=uplo)
    else:
        factor = np.linalg.cholesky(_float(b), upper=not lower)
        low = factor if lower else np.swapaxes(factor, -1, -2)
        # C = L^-1 A L^-T is symmetric with the same eigenvalues; v = L^-T (C's vectors)
        half = triangular_solve(low, _symmetric_from(a, lower), lower=True)
        c = triangular_solve(low, np.swapaxes(half, -1, -2), lower=True)
        w, u = np.linalg.eigh(c)
        v = triangular_solve(low, u, lower=True, trans=1)
    return w if eigvals_only else (w, v)


def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
        lapack_driver="gesdd"):
    """scipy.linalg.svd, as numpy.linalg.svd computes it."""
    return np.linalg.svd(_float(a), full_matrices=full_matrices, compute_uv=compute_uv)


def _vectors(name, *arrays):
    vectors = [np.atleast_1d(staged_array(a)) for a in arrays]
    if any(aval(v).ndim != 1 for v in vectors):
        raise unsupported_error(f"scipy.linalg.{name} of arrays of more than one dimension "
                                "(a batch) on traced values")
    return vectors


def toeplitz(c, r=None):
    """scipy.linalg.toeplitz: T[i, j] = c[i - j] below the diagonal, r[j - i] above; SciPy's
    strided view of (c reversed, r[1:]) as a gather of it."""
    c, = _vectors("toeplitz", c)
    r = np.conj(c) if r is None else _vectors("toeplitz", r)[0]
    values = np.concatenate((c[::-1], r[1:]))
    m, n = aval(c).shape[0], aval(r).shape[0]
    return values[(m - 1) - np.arange(m)[:, None] + np.arange(n)[None, :]]


def hankel(c, r=None):
    """scipy.linalg.hankel: H[i, j] = (c, r[1:])[i + j]."""
    c, = _vectors("hankel", c)
    r = np.zeros_like(c) if r is None else _vectors("hankel", r)[0]
    values = np.concatenate((c, r[1:]))
    m, n = aval(c).shape[0], aval(r).shape[0]
    return values[np.arange(m)[:, None] + np.arange(n)[None, :]]


def circulant(c):
    """scipy.linalg.circulant: C[i, j] = c[(i - j) mod n]."""
    c, = _vectors("circulant", c)
    n = aval(c).shape[0]
    return c[(np.arange(n)[:, None] - np.arange(n)[None, :]) % n]


def lstsq(a, b, cond=None, overwrite_a=False, overwrite_b=False, check_finite=True,
          lapack_driver=None):
    """scipy.linalg.lstsq as numpy's lstsq (the same cutoff `cond`): (x, residues, rank, s),
    the residues a number for a 1-d b, as SciPy gives them."""
    a, b = staged_array(a), staged_array(b)
    x, residues, rank, singular = np.linalg.lstsq(a, b, rcond=cond)
    if aval(b).ndim == 1 and aval(residues).shape == (1,):
        residues = residues[0]
    return x, residues, rank, singular


STAND_INS = ("solve_triangular", "cholesky", "cho_factor", "cho_solve", "lu_factor",
             "lu_solve", "solve", "inv", "det", "expm", "sqrtm", "solve_sylvester",
             "block_diag", "eigh", "svd", "toeplitz", "hankel", "circulant", "lstsq")


def _install():
    import scipy.linalg
    for name in STAND_INS:
        stand_in(getattr(scipy.linalg, name), globals()[name])


stand_in_when_imported("scipy.linalg", _install, SCIPY_GROUP)
