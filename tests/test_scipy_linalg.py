"""scipy.linalg staged unmodified (xform/scipy/linalg.py): values against SciPy under
hypothesis, derivatives against autograd.scipy and finite differences (to second order), vmap
against a loop, import styles, errors and SciPy untouched outside staging."""
import autograd
import autograd.numpy as anp
import autograd.scipy.linalg as asla
import numpy as np
import pytest
import scipy.linalg
import scipy.linalg as sla
from hypothesis import given
from hypothesis import strategies as st
from scipy.linalg import cho_factor, cho_solve, solve_triangular

import xform
from xform.errors import UnsupportedError
from xform.testing import check_grads
from xform.testing import strategies as xst
from tests.symmetric import symmetrized

sizes = st.integers(1, 4)


@st.composite
def square(draw, shift=None):
    n = draw(sizes)
    return draw(xst.arrays((n, n), np.float64, -1, 1)) + (n + 1 if shift is None else shift) \
        * np.eye(n)


@st.composite
def spd(draw):
    n = draw(sizes)
    b = draw(xst.arrays((n, n), np.float64, -1, 1))
    return b @ b.T + n * np.eye(n)


@st.composite
def distinct_spd(draw):
    """Q diag(w) Q^T with eigenvalue gaps of at least 0.4 (eigenvalues are smooth there)."""
    n = draw(sizes)
    q, _ = np.linalg.qr(np.random.default_rng(draw(st.integers(0, 2**16))).standard_normal(
        (n, n)))
    w = 1 + np.arange(n) + 0.3 * draw(xst.arrays((n,), np.float64, -1, 1))
    return (q * w) @ q.T


@st.composite
def matrix_and_rhs(draw, make=square()):
    a = draw(make)
    shape = draw(st.sampled_from([(a.shape[0],), (a.shape[0], 2)]))
    return a, draw(xst.arrays(shape, np.float64, -2, 2))


def allclose(a, b, rtol=1e-10, atol=1e-10):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


# -- each function: (name, function of arrays, argument strategy) --------------------------

def _tri(a, b, trans=0, lower=True, unit=False):
    return solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit)


FUNCTIONS = [
    ("solve_triangular_lower", lambda a, b: _tri(a, b), matrix_and_rhs()),
    ("solve_triangular_upper_T", lambda a, b: _tri(a, b, trans="T", lower=False),
     matrix_and_rhs()),
    ("solve_triangular_unit", lambda a, b: _tri(a, b, trans=1, unit=True), matrix_and_rhs()),
    ("cholesky_upper", lambda a: sla.cholesky(a), spd().map(lambda a: (a,))),
    ("cholesky_lower", lambda a: scipy.linalg.cholesky(a, lower=True), spd().map(lambda a: (a,))),
    ("cho_solve_lower", lambda a, b: cho_solve(cho_factor(a, lower=True), b),
     matrix_and_rhs(spd())),
    ("cho_solve_upper", lambda a, b: cho_solve(cho_factor(a), b), matrix_and_rhs(spd())),
    ("lu_solve", lambda a, b: sla.lu_solve(sla.lu_factor(a), b), matrix_and_rhs()),
    ("lu_solve_T", lambda a, b: sla.lu_solve(sla.lu_factor(a), b, trans=1), matrix_and_rhs()),
    ("solve_gen", lambda a, b: sla.solve(a, b), matrix_and_rhs()),
    ("solve_pos", lambda a, b: sla.solve(a, b, assume_a="pos"), matrix_and_rhs(spd())),
    ("solve_sym", lambda a, b: sla.solve(a, b, assume_a="sym"), matrix_and_rhs(spd())),
    ("solve_lower_tri", lambda a, b: sla.solve(a, b, assume_a="lower triangular"),
     matrix_and_rhs()),
    ("solve_diagonal", lambda a, b: sla.solve(a, b, assume_a="diagonal"), matrix_and_rhs()),
    ("solve_transposed", lambda a, b: sla.solve(a, b, transposed=True), matrix_and_rhs()),
    ("inv", lambda a: sla.inv(a), square().map(lambda a: (a,))),
    ("det", lambda a: sla.det(a), square().map(lambda a: (a,))),
    ("expm", lambda a: sla.expm(a), square(shift=0).map(lambda a: (a,))),
    ("sqrtm", lambda a: sla.sqrtm(a), spd().map(lambda a: (a,))),
    ("solve_sylvester", lambda a, b, q: sla.solve_sylvester(a, b, q),
     st.tuples(spd(), spd()).flatmap(lambda ab: st.tuples(
         st.just(ab[0]), st.just(ab[1]),
         xst.arrays((ab[0].shape[0], ab[1].shape[0]), np.float64, -1, 1)))),
    ("block_diag", lambda a, b: sla.block_diag(a, b, 2.0 * a[0]), matrix_and_rhs()),
    ("eigvalsh", lambda a: sla.eigh(a, eigvals_only=True), distinct_spd().map(lambda a: (a,))),
    ("eigvalsh_generalised", lambda a, b: sla.eigh(a, b, eigvals_only=True),
     st.tuples(distinct_spd(), spd()).filter(lambda ab: ab[0].shape == ab[1].shape)),
]
IDS = [name for name, _, _ in FUNCTIONS]


@pytest.mark.parametrize("name, fn, args", FUNCTIONS, ids=IDS)
@given(data=st.data())
def test_values_match_scipy(name, fn, args, data):
    args = data.draw(args)
    originals = [np.copy(a) for a in args]
    allclose(xform.jit(fn)(*args), fn(*args), rtol=1e-9, atol=1e-9)
    for a, original in zip(args, originals):
        np.testing.assert_array_equal(a, original)


# SciPy's own routines as primitives: SciPy's bits, on the first call and the cached one
# (matrix_and_rhs draws vector and matrix right-hand sides)
EXACT = ["cho_solve_lower", "cho_solve_upper", "inv"]


@pytest.mark.parametrize("name", EXACT)
@given(data=st.data())
def test_values_are_scipys_bits(name, data):
    fn, args = next((fn, args) for n, fn, args in FUNCTIONS if n == name)
    args = data.draw(args)
    want = fn(*args)
    jitted = xform.jit(fn)
    for _ in range(2):
        np.testing.assert_array_equal(jitted(*args), want, strict=True)


# a smooth scalar of each function's output, so one gradient covers every entry
def _loss(fn):
    def loss(*args):
        out = fn(*args)
        return np.sum(np.sin(out) * np.arange(1, out.size + 1).reshape(np.shape(out)))
    return loss


@pytest.mark.parametrize("name, fn, args", FUNCTIONS, ids=IDS)
@given(data=st.data())
def test_derivatives_match_finite_differences(name, fn, args, data):
    args = data.draw(args)
    order = 1 if name in ("sqrtm", "eigvalsh_generalised", "expm") else 2
    fn = symmetrized(fn, SYMMETRIC_ARGUMENTS[name]) if name in SYMMETRIC_ARGUMENTS else fn
    check_grads(_loss(fn), args, order=order, rtol=1e-4, atol=1e-4)


# Arguments read from one triangle (tests/symmetric.py): differentiated as functions of their
# symmetric parts, so checked against finite differences of the function of those.
SYMMETRIC_ARGUMENTS = {"cholesky_upper": (0,), "cholesky_lower": (0,), "cho_solve_lower": (0,),
                       "cho_solve_upper": (0,), "solve_pos": (0,), "solve_sym": (0,),
                       "eigvalsh": (0,), "eigvalsh_generalised": (0, 1)}


@pytest.mark.parametrize("name, ours, theirs, args", [
    ("solve_triangular", lambda a, b: solve_triangular(a, b, lower=True),
     lambda a, b: asla.solve_triangular(a, b, lower=True), matrix_and_rhs()),
    ("solve_triangular_T", lambda a, b: solve_triangular(a, b, trans=1),
     lambda a, b: asla.solve_triangular(a, b, trans=1), matrix_and_rhs()),
    # autograd.scipy.linalg has no rules for these; its numpy versions compute the same
    ("cholesky", lambda a: sla.cholesky(a, lower=True), anp.linalg.cholesky,
     spd().map(lambda a: (a,))),
    ("inv", sla.inv, anp.linalg.inv, square().map(lambda a: (a,))),
    ("det", sla.det, anp.linalg.det, square().map(lambda a: (a,))),
    ("sqrtm", sla.sqrtm, asla.sqrtm, spd().map(lambda a: (a,))),
    ("solve_sylvester", sla.solve_sylvester, asla.solve_sylvester,
     st.tuples(spd(), spd(), st.just(None)).map(
         lambda t: (t[0], t[1], np.ones((t[0].shape[0], t[1].shape[0]))))),
], ids=lambda v: v if isinstance(v, str) else "")
@given(data=st.data())
def test_gradients_match_autograd(name, ours, theirs, args, data):
    args = data.draw(args)
    argnums = tuple(range(len(args)))

    def weights(out):
        return np.cos(np.arange(np.size(out))).reshape(np.shape(out))
    w = weights(theirs(*args))
    mine = xform.grad(lambda *a: np.sum(ours(*a) * w), argnums or 0)(*args)
    reference = autograd.grad(lambda *a: anp.sum(theirs(*a) * w), argnums or 0)(*args)
    for m, r in zip(mine, reference):
        allclose(m, r, 1e-7, 1e-8)


@given(st.lists(square(), min_size=1, max_size=1), st.integers(1, 3))
def test_vmap_matches_loop(mats, size):
    a = mats[0]
    n = a.shape[0]
    stack = np.stack([a + 0.1 * k * np.eye(n) for k in range(size)])
    rhs = np.arange(n, dtype=float)

    def f(m):
        low = sla.cholesky(m @ m.T + np.eye(n), lower=True)
        return (solve_triangular(low, rhs, lower=True) + sla.expm(0.1 * m).sum(0)
                + cho_solve((low, True), rhs) + sla.lu_solve(sla.lu_factor(m), rhs))
    allclose(xform.vmap(f)(stack), np.stack([f(m) for m in stack]))
    allclose(xform.vmap(xform.grad(lambda m: np.sum(f(m))))(stack),
             np.stack([xform.grad(lambda m: np.sum(f(m)))(m) for m in stack]))


def test_gp_log_marginal_likelihood_gradient():
    """The bench's GP row with solve_triangular and with np.linalg.solve: one gradient."""
    x = np.linspace(-3, 3, 12)
    y = np.sin(x)

    def lml(x, noise, triangular):
        k = np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2) + (noise ** 2 + 1e-3) * np.eye(12)
        chol = np.linalg.cholesky(k)
        alpha = (solve_triangular(chol, y, lower=True) if triangular
                 else np.linalg.solve(chol, y))
        return -0.5 * alpha @ alpha - np.sum(np.log(np.diag(chol)))
    for triangular in (True, False):
        check_grads(lambda x, s: lml(x, s, triangular), (x, 0.3), order=2, rtol=1e-4,
                    atol=1e-5)
    for tri, gen in zip(xform.grad(lambda x, s: lml(x, s, True), (0, 1))(x, 0.3),
                        xform.grad(lambda x, s: lml(x, s, False), (0, 1))(x, 0.3)):
        allclose(tri, gen)


def test_scipy_untouched_outside_staging():
    a = np.tril(np.ones((3, 3))) + np.eye(3)
    before = solve_triangular(a, np.ones(3), lower=True)
    xform.jit(lambda m: solve_triangular(m, np.ones(3), lower=True))(a)
    after = solve_triangular(a, np.ones(3), lower=True)
    np.testing.assert_array_equal(before, after)
    assert type(after) is np.ndarray
    assert scipy.linalg.solve_triangular is solve_triangular
    with pytest.raises(ValueError):     # SciPy's own checks still run on concrete values
        solve_triangular(a, np.ones(4))


def test_unsupported_option_names_scipy_function_and_user_line():
    def f(a):
        return sla.solve(a, np.ones(2), assume_a="banded")   # the user's line
    with pytest.raises(UnsupportedError) as info:
        xform.jit(f)(np.eye(2))
    assert "scipy.linalg.solve" in str(info.value)
    assert "test_scipy_linalg.py" in str(info.value) and "assume_a=\"banded\"" in str(info.value)


def test_helper_functions_and_late_imports():
    """Calls made inside a user's helper, with the module imported under another name."""
    import scipy.linalg as late

    def helper(m):
        return late.solve_triangular(m, np.ones(2), lower=True)

    def f(m):
        return np.sum(helper(m) ** 2)
    a = np.array([[2.0, 0.0], [1.0, 3.0]])
    np.testing.assert_allclose(xform.jit(f)(a), f(a))
    check_grads(f, (a,), order=1)


@pytest.mark.parametrize("form", ["L", "L.T", "U", "U.T"])
def test_solve_with_a_cholesky_factor_differentiates_by_triangular_solves(form):
    """np.linalg.solve(L, b) with L from cholesky (or its transpose, or the upper factor):
    right gradients, and no general solve in the gradient: only value_and_grad, which returns
    the value, keeps numpy's forward solve (xform.passes.simplify)."""
    rng = np.random.default_rng(1)
    m = rng.standard_normal((5, 5))
    k, b = m @ m.T + 5 * np.eye(5), rng.standard_normal(5)

    def f(k, b):
        factor = np.linalg.cholesky(k, upper=form.startswith("U"))
        factor = factor.T if form.endswith(".T") else factor
        return np.sum(np.sin(np.linalg.solve(factor, b)))
    check_grads(symmetrized(f), (k, b), order=2, rtol=1e-5, atol=1e-6)
    # optimized, as it runs (the jvp rule's repeated forward solve is merged by cse)
    for transform, solves in ((xform.grad, 0), (xform.value_and_grad, 1)):
        graph = xform.passes.optimize(xform.make_graph(transform(f, (0, 1)))(k, b),
                                      xform.passes.EXACT_PIPELINE)
        names = [str(eqn.primitive) for eqn in graph.equations]
        assert names.count("solve") == solves and "triangular_solve" in names
