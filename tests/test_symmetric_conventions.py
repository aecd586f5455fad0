"""Gradients of functions of symmetric matrices through functions that read one triangle
(np.linalg.cholesky, eigh, eigvalsh; scipy.linalg.cholesky, cho_factor, eigh, solve with
assume_a "sym"/"pos"): the values are numpy's and SciPy's, read from that triangle; the
gradients are JAX's and autograd's, symmetric (docs/differences.md). Checked against
autograd and against finite differences of the function of the symmetric part."""
import autograd
import autograd.numpy as anp
import numpy as np
import pytest
import scipy.linalg

import xform
from tests.symmetric import hermitian_part, symmetrized
from xform.testing import check_grads

RNG = np.random.default_rng(3)
_B = RNG.standard_normal((4, 4))
COVARIANCE = _B @ _B.T + 4 * np.eye(4)
WEIGHTS = RNG.standard_normal((4, 4))
RHS = RNG.standard_normal(4)

# name, xform's function (plain numpy/SciPy), autograd's counterpart (None: none to compare)
FUNCTIONS = [
    ("np cholesky", lambda a: np.sum(WEIGHTS * np.linalg.cholesky(a)),
     lambda a: anp.sum(WEIGHTS * anp.linalg.cholesky(a))),
    ("np cholesky upper", lambda a: np.sum(WEIGHTS * np.linalg.cholesky(a, upper=True)),
     lambda a: anp.sum(WEIGHTS * anp.linalg.cholesky(a).T)),
    ("np eigh values", lambda a: np.sum(np.sin(np.linalg.eigh(a)[0])),
     lambda a: anp.sum(anp.sin(anp.linalg.eigh(a)[0]))),
    ("np eigh upper", lambda a: np.sum(np.linalg.eigh(a, "U")[0] ** 3),
     lambda a: anp.sum(anp.linalg.eigh(a, "U")[0] ** 3)),
    ("np eigvalsh", lambda a: np.sum(np.linalg.eigvalsh(a) * np.arange(4)), None),
    ("log det by cholesky", lambda a: 2 * np.sum(np.log(np.diag(np.linalg.cholesky(a)))),
     lambda a: 2 * anp.sum(anp.log(anp.diag(anp.linalg.cholesky(a))))),
    ("scipy cholesky", lambda a: np.sum(WEIGHTS * scipy.linalg.cholesky(a)), None),
    ("scipy cho_solve", lambda a: np.sum(np.sin(scipy.linalg.cho_solve(
        scipy.linalg.cho_factor(a, lower=True), RHS))), None),
    ("scipy solve pos", lambda a: np.sum(scipy.linalg.solve(a, RHS, assume_a="pos") ** 2), None),
    ("scipy solve sym", lambda a: np.sum(scipy.linalg.solve(a, RHS, assume_a="sym") ** 2), None),
    ("scipy eigh", lambda a: np.sum(np.cos(scipy.linalg.eigh(a, eigvals_only=True))), None),
    ("scipy eigh generalised", lambda a: np.sum(scipy.linalg.eigh(
        a, COVARIANCE + np.eye(4), eigvals_only=True) ** 2), None),
]
IDS = [f[0] for f in FUNCTIONS]


@pytest.mark.parametrize("name, fn, theirs", FUNCTIONS, ids=IDS)
def test_gradient_is_symmetric_and_matches_the_symmetrized_function(name, fn, theirs):
    g = xform.grad(fn)(COVARIANCE)
    np.testing.assert_array_equal(g, g.T)
    # finite differences of f(sym(A)) in every direction: a symmetric and a skew one too
    check_grads(symmetrized(fn), (COVARIANCE,), order=1, rtol=1e-5, atol=1e-7)
    skew = np.triu(np.ones((4, 4)), 1) - np.tril(np.ones((4, 4)), -1)
    _, along_skew = xform.jvp(fn, (COVARIANCE,), (skew,))
    assert along_skew == 0.0


@pytest.mark.parametrize("name, fn, theirs", [f for f in FUNCTIONS if f[2] is not None],
                         ids=[f[0] for f in FUNCTIONS if f[2] is not None])
def test_gradient_matches_autograd(name, fn, theirs):
    ours = xform.grad(fn)(COVARIANCE)
    reference = autograd.grad(theirs)(COVARIANCE)
    if "eigh" in name:
        # autograd's eigh returns the gradient of the triangle it reads; its symmetric part
        # is JAX's and xform's
        reference = hermitian_part(reference)
    np.testing.assert_allclose(ours, reference, rtol=1e-9, atol=1e-12)


def test_values_still_read_one_triangle():
    """Only derivatives follow the convention: values are numpy's and SciPy's, bit for bit."""
    skewed = COVARIANCE + np.triu(np.full((4, 4), 7.0), 1)
    for fn in (np.linalg.cholesky, lambda a: np.linalg.eigh(a)[0],
               lambda a: scipy.linalg.cholesky(a, lower=True)):
        np.testing.assert_array_equal(xform.jit(fn)(skewed), fn(skewed))
    # SciPy's symmetric-indefinite solver and xform's LU round differently
    solve = lambda a: scipy.linalg.solve(a, RHS, assume_a="sym", lower=True)  # noqa: E731
    np.testing.assert_allclose(xform.jit(solve)(skewed), solve(skewed), rtol=1e-12)


def test_descent_on_a_covariance_matrix_keeps_it_symmetric():
    """The Gaussian negative log-likelihood through cholesky, descended from an identity."""
    data = RNG.standard_normal((20, 4)) @ _B.T

    def nll(cov):
        low = np.linalg.cholesky(cov)
        z = scipy.linalg.solve_triangular(low, data.T, lower=True)
        return np.sum(np.log(np.diag(low))) * len(data) + 0.5 * np.sum(z ** 2)
    cov = np.eye(4) * 5.0
    step = xform.grad(nll)
    for _ in range(20):
        cov = cov - 1e-3 * step(cov)
    np.testing.assert_array_equal(cov, cov.T)
    assert nll(cov) < nll(np.eye(4) * 5.0)
