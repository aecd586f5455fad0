"""Factored linear algebra (xform/rules/linalg_scipy.py): the rule battery on well-conditioned
stacked matrices for triangular solves, LU factors, expm, sqrtm and Sylvester equations;
values against SciPy."""
from collections import namedtuple

import numpy as np
import pytest
import scipy.linalg
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.rules import linalg_scipy
from xform.testing import check_primitive
from xform.testing import strategies as xst
from tests.symmetric import check_symmetric_input_primitive

batch_shapes = xst.shapes(min_dims=0, max_dims=1, max_side=2)
sizes = st.integers(1, 4)


@st.composite
def triangular_args(draw):
    """A well-conditioned matrix (both triangles filled: only one may be read) and a stack of
    right-hand sides."""
    batch, n = draw(batch_shapes), draw(sizes)
    a = draw(xst.arrays(batch + (n, n), np.float64, -1, 1)) + 2 * np.eye(n)
    b_batch = draw(st.sampled_from([batch, (2,) + batch if batch else ()]))
    b = draw(xst.arrays(b_batch + (n, draw(st.integers(1, 3))), np.float64, -2, 2))
    return a, b


@st.composite
def general(draw):
    batch, n = draw(batch_shapes), draw(sizes)
    return (draw(xst.arrays(batch + (n, n), np.float64, -1, 1)) + (n + 1) * np.eye(n),)


@st.composite
def small(draw):
    batch, n = draw(batch_shapes), draw(sizes)
    return (draw(xst.arrays(batch + (n, n), np.float64, -1, 1)),)


@st.composite
def spd(draw):
    batch, n = draw(batch_shapes), draw(sizes)
    b = draw(xst.arrays(batch + (n, n), np.float64, -1, 1))
    return (b @ np.swapaxes(b, -1, -2) + n * np.eye(n),)


@st.composite
def cholesky_cotangent_args(draw):
    """A Cholesky factor (a stack, sometimes past the blocked recursion's leaf size) and a
    cotangent filling both triangles (only the lower one is read)."""
    batch = draw(batch_shapes)
    n = draw(st.sampled_from([1, 2, 3, 4, 67]) if not batch else sizes)
    b = draw(xst.arrays(batch + (n, n), np.float64, -1, 1))
    factor = np.linalg.cholesky(b @ np.swapaxes(b, -1, -2) + n * np.eye(n))
    ct_batch = draw(st.sampled_from([batch, (2,) + batch if batch else ()]))
    return factor, draw(xst.arrays(ct_batch + (n, n), np.float64, -2, 2))


@st.composite
def sylvester_args(draw):
    """A, B with positive spectra (A X + X B = Q is then well posed) and Q."""
    n, m = draw(sizes), draw(sizes)
    a = draw(xst.arrays((n, n), np.float64, -0.5, 0.5)) + n * np.eye(n)
    b = draw(xst.arrays((m, m), np.float64, -0.5, 0.5)) + m * np.eye(m)
    return a, b, draw(xst.arrays((n, m), np.float64, -2, 2))


@st.composite
def pivots(draw):
    n = draw(sizes)
    return (np.array([draw(st.integers(i, n - 1)) for i in range(n)], np.int32),)


@st.composite
def cho_solve_args(draw, lower):
    """A Cholesky factor whose other triangle holds noise (cho_solve reads one triangle) and a
    vector or matrix right-hand side."""
    n = draw(sizes)
    b = draw(xst.arrays((n, n), np.float64, -1, 1))
    factor = np.linalg.cholesky(b @ b.T + n * np.eye(n), upper=not lower)
    noise = draw(xst.arrays((n, n), np.float64, -1, 1))
    factor = factor + (np.triu(noise, 1) if lower else np.tril(noise, -1))
    rhs_shape = draw(st.sampled_from([(n,), (n, draw(st.integers(1, 3)))]))
    return factor, draw(xst.arrays(rhs_shape, np.float64, -2, 2))


OpCase = namedtuple("OpCase", "name prim args params linear_argnums order")

TRIANGULAR = [OpCase(f"triangular_solve_{'L' if lower else 'U'}{trans}{'u' if unit else ''}",
                     linalg_scipy.triangular_solve_p, triangular_args(),
                     {"lower": lower, "trans": trans, "unit_diagonal": unit}, (1,), 2)
              for lower in (True, False) for trans in (0, 1) for unit in (False, True)]

CASES = TRIANGULAR + [
    OpCase("cholesky_cotangent", linalg_scipy.cholesky_cotangent_p, cholesky_cotangent_args(),
           {}, (1,), 2),
    OpCase("lu_factor", linalg_scipy.lu_factor_p, general(), {}, None, 2),
    OpCase("lu_pivots_to_permutation", linalg_scipy.lu_pivots_to_permutation_p, pivots(), {},
           None, 1),
    OpCase("expm", linalg_scipy.expm_p, small(), {}, None, 2),
    OpCase("sqrtm", linalg_scipy.sqrtm_p, spd(), {}, None, 2),
    OpCase("sylvester", linalg_scipy.sylvester_p, sylvester_args(), {}, (2,), 2),
    OpCase("scipy_inv", linalg_scipy.scipy_inv_p, general(), {}, None, 2),
    OpCase("cho_solve_L", linalg_scipy.cho_solve_p, cho_solve_args(True), {"lower": True},
           (1,), 2),
    OpCase("cho_solve_U", linalg_scipy.cho_solve_p, cho_solve_args(False), {"lower": False},
           (1,), 2),
    OpCase("symmetric_from_lower", linalg_scipy.symmetric_from_triangle_p, general(),
           {"lower": True}, None, 2),
    OpCase("symmetric_from_upper", linalg_scipy.symmetric_from_triangle_p, general(),
           {"lower": False}, None, 1),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@given(data=st.data())
def test_primitive_battery(case, data):
    if case.prim is linalg_scipy.symmetric_from_triangle_p:
        check_symmetric_input_primitive(case.prim, *data.draw(case.args), params=case.params,
                                        order=case.order)
        return
    check_primitive(case.prim, *data.draw(case.args), params=case.params, order=case.order,
                    linear_argnums=case.linear_argnums)


def test_every_primitive_has_a_case():
    prims = {v for v in vars(linalg_scipy).values() if isinstance(v, xform.Primitive)}
    assert prims == {case.prim for case in CASES}


# -- values against SciPy ------------------------------------------------------------------

@given(triangular_args(), st.booleans(), st.sampled_from([0, 1]), st.booleans())
def test_triangular_solve_matches_scipy(args, lower, trans, unit):
    a, b = args
    got = linalg_scipy.triangular_solve(a, b, lower=lower, trans=trans, unit_diagonal=unit)
    a_b = np.broadcast_to(a, got.shape[:-2] + a.shape[-2:])
    b_b = np.broadcast_to(b, got.shape)
    for index in np.ndindex(got.shape[:-2]):
        want = scipy.linalg.solve_triangular(a_b[index], b_b[index], lower=lower, trans=trans,
                                             unit_diagonal=unit)
        np.testing.assert_allclose(got[index], want, rtol=1e-12, atol=1e-12)


@given(triangular_args(), st.booleans(), st.sampled_from([0, 1]), st.booleans(),
       st.sampled_from([np.float64, np.float32]))
def test_triangular_solve_of_one_column_matches_scipy(args, lower, trans, unit, dtype):
    """One right-hand side takes BLAS trsv rather than trsm."""
    a, b = args
    a, b = a.astype(dtype), b[..., :1].astype(dtype)
    got = linalg_scipy.triangular_solve(a, b, lower=lower, trans=trans, unit_diagonal=unit)
    assert got.dtype == np.result_type(a, b) and got.shape[-2:] == b.shape[-2:]
    a_b = np.broadcast_to(a, got.shape[:-2] + a.shape[-2:])
    b_b = np.broadcast_to(b, got.shape)
    for index in np.ndindex(got.shape[:-2]):
        want = scipy.linalg.solve_triangular(a_b[index], b_b[index], lower=lower, trans=trans,
                                             unit_diagonal=unit)
        tolerance = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got[index], want, rtol=tolerance, atol=tolerance)


@given(general())
def test_lu_solve_matches_numpy(args):
    a, = args
    rng = np.random.default_rng(0)
    b = rng.standard_normal(a.shape[:-1] + (2,))
    lu, piv = linalg_scipy.lu_factor_p.bind(a)
    perm = linalg_scipy.lu_pivots_to_permutation_p.bind(piv)
    for trans in (0, 1):
        want = np.linalg.solve(np.swapaxes(a, -1, -2) if trans else a, b)
        np.testing.assert_allclose(linalg_scipy.lu_solve(lu, perm, b, trans), want,
                                   rtol=1e-10, atol=1e-10)
    if a.ndim == 2:
        want_lu, want_piv = scipy.linalg.lu_factor(a)
        np.testing.assert_array_equal(lu, want_lu)
        np.testing.assert_array_equal(piv, want_piv)


@given(spd())
def test_sqrtm_and_expm_match_scipy(args):
    a, = args
    root = linalg_scipy.sqrtm_p.bind(a)
    np.testing.assert_allclose(root @ root, a, rtol=1e-9, atol=1e-9)
    scaled = a / (2 * a.shape[-1])
    np.testing.assert_allclose(linalg_scipy.expm_p.bind(scaled), scipy.linalg.expm(scaled),
                               rtol=1e-12, atol=1e-12)


# -- cholesky by potrf (the forward of plain grad): numpy's factor up to rounding -----------

@st.composite
def cholesky_potrf_args(draw):
    """A positive-definite (complex: Hermitian) matrix whose unread triangle is noise, in
    float64, float32 or complex128, in C or Fortran order or strided, and the `upper` flag."""
    batch, n = draw(batch_shapes), draw(sizes)
    dtype = draw(st.sampled_from([np.float64, np.float32, np.complex128]))
    b = draw(xst.arrays(batch + (n, n), np.float64, -1, 1))
    if dtype == np.complex128:
        b = b + 1j * draw(xst.arrays(batch + (n, n), np.float64, -1, 1))
    upper = draw(st.booleans())
    noise = draw(xst.arrays(batch + (n, n), np.float64, -9, 9))
    a = b @ np.conjugate(np.swapaxes(b, -1, -2)) + n * np.eye(n)
    a = (a + (np.tril(noise, -1) if upper else np.triu(noise, 1))).astype(dtype)
    layout = draw(st.sampled_from(["C", "F", "strided"]))
    if layout == "F":
        a = np.asfortranarray(a)
    elif layout == "strided":
        a = np.repeat(a, 2, axis=-1)[..., ::2]
    return a, upper


@given(cholesky_potrf_args())
def test_cholesky_potrf_is_numpys_factor_up_to_rounding(args):
    a, upper = args
    got = linalg_scipy.cholesky_potrf(a, upper=upper)
    want = np.linalg.cholesky(a, upper=upper)
    assert got.dtype == want.dtype and got.shape == want.shape
    other = np.tril(got, -1) if upper else np.triu(got, 1)
    np.testing.assert_array_equal(other, 0)
    tolerance = 1e-5 if a.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("matrix", [
    np.array([[1.0, 2.0], [2.0, 1.0]]),                                  # indefinite
    np.array([[1.0, 0.0], [np.inf, 1.0]]),                               # inf - inf
    np.stack([np.eye(3), -np.eye(3)]),                                   # one bad in a stack
], ids=["indefinite", "inf", "stack"])
def test_cholesky_potrf_raises_numpys_error(upper, matrix):
    matrix = matrix if not upper else np.swapaxes(matrix, -1, -2)
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        np.linalg.cholesky(matrix, upper=upper)
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        linalg_scipy.cholesky_potrf(matrix, upper=upper)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_potrf_gives_numpys_nans(upper):
    """LAPACK passes a nan below the first pivot on without an error, for numpy as for us."""
    for matrix in (np.array([[1.0, 0.0], [np.nan, 1.0]]), np.array([[np.nan, 0.0], [0, 1.0]])):
        matrix = matrix if not upper else matrix.T
        np.testing.assert_array_equal(linalg_scipy.cholesky_potrf(matrix, upper=upper),
                                      np.linalg.cholesky(matrix, upper=upper))


def test_gradient_of_a_cholesky_raises_numpys_error_on_an_indefinite_matrix():
    """Plain grad factors by potrf: an indefinite matrix raises numpy's LinAlgError, on the
    first (interpreted) call and on compiled ones, never returns garbage."""
    grad = xform.grad(lambda m: np.sum(np.log(np.diagonal(np.linalg.cholesky(m)))))
    bad = np.array([[1.0, 2.0], [2.0, 1.0]])
    for matrix in (bad, np.eye(2), np.eye(2), bad):   # the second good call compiles
        if matrix is bad:
            with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
                grad(matrix)
        else:
            np.testing.assert_allclose(grad(matrix), 0.5 * np.eye(2))


# -- cholesky's cotangent: Murray's blocked recursion against the formula and autograd -------

def _cotangent_by_formula(factor, ct):
    """phi(S + S^T), S = L^-T phi(L^T ct) L^-1, phi = lower triangle with half the diagonal."""
    n = factor.shape[-1]
    phi = np.tril(np.ones((n, n))) - 0.5 * np.eye(n)
    p = (factor.T @ ct) * phi
    s = scipy.linalg.solve_triangular(factor, p, lower=True, trans=1)        # L^-T P
    s = scipy.linalg.solve_triangular(factor, s.T, lower=True, trans=1).T    # (.) L^-1
    return (s + s.T) * phi


@given(st.sampled_from([1, 2, 5, 33, 63, 64, 65, 130, 200]), st.integers(0, 2 ** 16))
def test_cholesky_cotangent_matches_the_formula(n, seed):
    rng = np.random.default_rng(seed)
    b = rng.standard_normal((n, n))
    factor = np.linalg.cholesky(b @ b.T + n * np.eye(n))
    ct = rng.standard_normal((n, n))
    got = linalg_scipy.cholesky_cotangent(factor, ct)
    np.testing.assert_allclose(got, _cotangent_by_formula(factor, ct), rtol=1e-9, atol=1e-11)
    # only the lower triangles are read: the factor's and the cotangent's upper ones are free
    noisy = linalg_scipy.cholesky_cotangent(factor + np.triu(ct, 1), ct + np.triu(b, 1))
    np.testing.assert_array_equal(noisy, got)


@pytest.mark.parametrize("n", [3, 40, 70])
def test_cholesky_cotangent_of_a_singular_factor_is_not_finite(n):
    """A zero on the factor's diagonal gives infinities and nans, as solving with it does
    (the explicit inverses fall back to a solve), not an error or finite values."""
    rng = np.random.default_rng(n)
    b = rng.standard_normal((n, n))
    factor = np.linalg.cholesky(b @ b.T + n * np.eye(n))
    factor[n // 2, n // 2] = 0.0
    with np.errstate(all="ignore"):
        got = linalg_scipy.cholesky_cotangent(factor, rng.standard_normal((n, n)))
    assert not np.all(np.isfinite(got))


@pytest.mark.parametrize("upper", [False, True])
@given(st.sampled_from([1, 3, 64, 65, 130]), st.integers(0, 2 ** 16))
def test_cholesky_gradient_matches_autograd(upper, n, seed):
    """numpy's cholesky reads A's lower triangle (upper=True: its upper one); its gradient is
    autograd's (and JAX's): that of the function of A's symmetric part, symmetric."""
    import autograd
    import autograd.numpy as anp
    rng = np.random.default_rng(seed)
    b = rng.standard_normal((n, n))
    a, weights = b @ b.T + n * np.eye(n), rng.standard_normal((n, n))
    ours = xform.grad(lambda m: np.sum(weights * np.linalg.cholesky(m, upper=upper)))(a)
    theirs = autograd.grad(lambda m: anp.sum(
        weights * (anp.linalg.cholesky(m).T if upper else anp.linalg.cholesky(m))))(a)
    np.testing.assert_array_equal(ours, ours.T)
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-11)


def test_cholesky_gradient_is_one_cotangent_equation():
    """The gradient runs cholesky's vjp as one blocked primitive, not the transposed jvp's
    n x n products and solves."""
    a = np.array([[4.0, 1.0], [1.0, 3.0]])
    graph = xform.passes.optimize(xform.make_graph(xform.grad(
        lambda m: np.sum(np.sin(np.linalg.cholesky(m)))))(a))
    names = [str(eqn.primitive) for eqn in graph.equations]
    assert names.count("cholesky_cotangent") == 1
    assert "triangular_solve" not in names and "matmul" not in names


_CHOLESKY_GRADIENT_IN_A_FRESH_PROCESS = """
import sys
import numpy as np
import xform

def f(a):
    l = np.linalg.cholesky(a @ a.T + 3 * np.eye(3))
    return np.sum(np.log(np.diag(l))) + np.sum(np.linalg.solve(l, np.ones(3)))

a = np.arange(9.0).reshape(3, 3) / 10
first, second = xform.grad(f)(a), xform.grad(f)(a)
loaded = "scipy.linalg" in sys.modules, "scipy.linalg._flapack" in sys.modules
import scipy.linalg
same = (scipy.linalg.get_lapack_funcs(("potrf",), dtype=np.float64)[0]
        is linalg_scipy_routine("lapack", "potrf", np.float64))
print(loaded, np.array_equal(first, second), same)
"""


def test_a_cholesky_gradient_loads_lapack_without_importing_scipy_linalg():
    """A process's first Cholesky gradient loads SciPy's LAPACK module alone (importing
    scipy.linalg for it cost ~0.15 s), and the routines are those scipy.linalg hands out."""
    import subprocess
    import sys
    code = ("from xform.rules.linalg_scipy import _routine as linalg_scipy_routine\n"
            + _CHOLESKY_GRADIENT_IN_A_FRESH_PROCESS)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split("\n")[-2]
    assert out == "(False, True) True True"
