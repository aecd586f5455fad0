"""numpy.linalg on complex matrices: values against numpy, derivatives against finite
differences in the complex plane (jvp) and the dot-product identity (vjp), and against
autograd's vjp where autograd differentiates the function.

Eigenvectors and singular vectors are unique only up to a phase: eig's follow LAPACK's
normalization (unit norm, largest-modulus entry real), so they are checked directly; eigh's
and svd's are checked through functions that do not depend on the phase (projectors)."""
import autograd
import autograd.numpy as anp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from tests.symmetric import hermitian_part, symmetrized
from xform.testing import check_grads


def _rng(draw):
    return np.random.default_rng(draw(st.integers(0, 2**16)))


def _gaussian(rng, *shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def _unitary(rng, n):
    return np.linalg.qr(_gaussian(rng, n, n))[0]


@st.composite
def matrices(draw, kind, m=None, n=None):
    """A complex matrix of `kind`, conditioned for its derivatives to exist."""
    rng = _rng(draw)
    m = draw(st.integers(1, 4)) if m is None else m
    n = draw(st.integers(1, 4)) if n is None else n
    if kind == "general":
        return _gaussian(rng, m, m) + 3 * m * np.eye(m)
    if kind == "hermitian":
        q = _unitary(rng, m)
        w = np.arange(m) - 1.0 + 0.3 * rng.uniform(-1, 1, m)
        return (q * w) @ q.conj().T
    if kind == "positive":
        b = _gaussian(rng, m, m)
        return b @ b.conj().T + m * np.eye(m)
    if kind == "diagonalizable":
        s = np.eye(m) + 0.3 * _gaussian(rng, m, m)
        w = np.arange(m) + 0.3 * _gaussian(rng, m)
        return (s * w) @ np.linalg.inv(s)
    assert kind == "rectangular"
    k = min(m, n)
    s = 1 + np.arange(k)[::-1] + 0.3 * rng.uniform(-1, 1, k)
    return (_unitary(rng, m)[:, :k] * s) @ _unitary(rng, n)[:, :k].conj().T


def _random_like(rng, x):
    real = rng.standard_normal(np.shape(x))
    return real + 1j * rng.standard_normal(np.shape(x)) if np.iscomplexobj(x) else real


def _projector(vectors, i=0):
    return vectors[..., :, i:i + 1] @ np.conjugate(vectors[..., :, i:i + 1]).T


# name, function of the numpy module (numpy or autograd.numpy), argument kinds, autograd?
CASES = [
    ("inv", lambda m: m.linalg.inv, ["general"], True),
    ("solve", lambda m: m.linalg.solve, ["general", "rectangular"], True),
    ("solve_vector", lambda m: lambda a: m.linalg.solve(a, m.arange(len(a)) + 1j), ["general"],
     True),
    ("det", lambda m: m.linalg.det, ["general"], True),
    ("slogdet", lambda m: lambda a: m.linalg.slogdet(a)[1], ["general"], True),
    ("slogdet_sign", lambda m: lambda a: m.linalg.slogdet(a)[0], ["general"], False),
    ("cholesky", lambda m: m.linalg.cholesky, ["positive"], False),
    ("cholesky_upper", lambda m: lambda a: m.linalg.cholesky(a, upper=True), ["positive"],
     False),
    ("eigh_values", lambda m: lambda a: m.linalg.eigh(a)[0], ["hermitian"], True),
    ("eigh_projector", lambda m: lambda a: _projector(m.linalg.eigh(a)[1]), ["hermitian"],
     False),
    ("eigh_upper", lambda m: lambda a: _projector(m.linalg.eigh(a, "U")[1], -1),
     ["hermitian"], False),
    ("eigvalsh", lambda m: m.linalg.eigvalsh, ["hermitian"], False),
    ("eig", lambda m: m.linalg.eig, ["diagonalizable"], False),
    ("eig_values", lambda m: lambda a: m.linalg.eig(a)[0], ["diagonalizable"], True),
    ("eigvals", lambda m: m.linalg.eigvals, ["diagonalizable"], False),
    ("svd_values", lambda m: lambda a: m.linalg.svd(a, compute_uv=False), ["rectangular"],
     True),
    ("svd_pairs", lambda m: lambda a: m.linalg.svd(a, False)[0][:, -1:] @ m.linalg.svd(
        a, False)[2][-1:], ["rectangular"], True),
    ("svd_projector", lambda m: lambda a: _projector(m.linalg.svd(a, False)[0]),
     ["rectangular"], False),
    ("qr", lambda m: m.linalg.qr, ["rectangular"], False),
    ("qr_r", lambda m: lambda a: m.linalg.qr(a, "r"), ["rectangular"], False),
    # autograd's pinv vjp transposes where it should conjugate-transpose (complex only)
    ("pinv", lambda m: m.linalg.pinv, ["rectangular"], False),
    ("lstsq", lambda m: lambda a, b: m.linalg.lstsq(a, b)[:2] + m.linalg.lstsq(a, b)[3:],
     ["rectangular", "rectangular"], False),
    ("matrix_power", lambda m: lambda a: m.linalg.matrix_power(a, -3), ["general"], False),
    # autograd's multi_dot returns zero cotangents (it does not trace through the list)
    ("multi_dot", lambda m: lambda a, b: m.linalg.multi_dot([a, b, b.T, a]),
     ["general", "rectangular"], False),
    ("norm", lambda m: m.linalg.norm, ["rectangular"], True),
    ("norm_vector_3", lambda m: lambda a: m.linalg.norm(a, 3, axis=0), ["general"], True),
    # autograd's norm differentiates ord None, 2, 'fro', 'nuc' and p-norms only
    ("norm_vector_ords", lambda m: lambda a: [m.linalg.norm(a, o, axis=1) for o in
                                              (1, -1, 2, -2, 0.5)], ["general"], False),
    ("norm_vector_max", lambda m: lambda a: m.linalg.norm(a[0], np.inf), ["general"], False),
    ("norm_matrix_ords", lambda m: lambda a: [m.linalg.norm(a, o) for o in (1, -1, np.inf)],
     ["rectangular"], False),
    ("norm_matrix_fro_nuc", lambda m: lambda a: m.linalg.norm(a, "fro", (1, 0))
     + 2 * m.linalg.norm(a, "nuc", (1, 0)), ["rectangular"], True),
    ("norm_matrix_2", lambda m: lambda a: m.linalg.norm(a, 2) + m.linalg.norm(a, -2),
     ["rectangular"], False),
    ("cond", lambda m: lambda a: [m.linalg.cond(a, p) for p in (None, 1, "fro")],
     ["general"], False),
]


HERMITIAN_INPUT = {"cholesky", "cholesky_upper", "eigh_values", "eigh_projector", "eigh_upper",
                   "eigvalsh"}
SECOND_ORDER = {"inv", "det", "slogdet", "cholesky", "eigh_values", "eig", "svd_values", "qr",
                "pinv", "norm"}


@pytest.mark.parametrize("name, make, kinds, with_autograd", CASES, ids=[c[0] for c in CASES])
@given(data=st.data())
def test_complex_derivatives(name, make, kinds, with_autograd, data):
    m, n = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    if "general" in kinds or kinds == ["rectangular", "rectangular"]:
        n = m    # a second argument shares the first one's row count
    args = tuple(data.draw(matrices(kind, m, n if i == 0 or kind != "rectangular" else 2))
                 for i, kind in enumerate(kinds))
    fn = make(np)
    expected = fn(*args)
    staged = xform.jit(fn)(*args)
    for got, want in zip(xform.tree.tree_flatten(staged)[0],
                         xform.tree.tree_flatten(expected)[0]):
        want = np.asarray(want)
        if name in ("eig", "eig_values", "eigvals") and want.dtype.kind == "f":
            want = want.astype(complex)    # xform's eig is always complex
        assert np.asarray(got).dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # one triangle read: derivatives of the function of the Hermitian part (tests/symmetric.py)
    check_grads(symmetrized(fn) if name in HERMITIAN_INPUT else fn, args,
                order=2 if name in SECOND_ORDER else 1, subject=name)
    if with_autograd:
        out, pullback = xform.vjp(fn, *args)
        rng = np.random.default_rng(0)
        cts = xform.tree.tree_map(lambda o: _random_like(rng, o), out)
        in_cts = pullback(cts)
        for i in range(len(args)):
            def of_one(x, i=i):
                return make(anp)(*args[:i], x, *args[i + 1:])
            want = autograd.make_vjp(of_one)(args[i])[0](cts)
            if name in HERMITIAN_INPUT:
                # autograd's eigh returns the gradient of the triangle it reads (JAX's and
                # xform's are Hermitian): the same Hermitian part (docs/differences.md)
                want = hermitian_part(want)
            np.testing.assert_allclose(in_cts[i], want, rtol=1e-8, atol=1e-10)


def test_grad_follows_the_jax_autograd_convention():
    # d/dA |det A|^2 through a complex determinant: grad is the conjugate of the gradient of
    # steepest ascent, as JAX and autograd define it (grad |z|^2 = 2 conj(z))
    a = np.array([[1.0 + 2.0j, 0.5], [0.25j, 2.0 - 1.0j]])
    got = xform.vjp(np.linalg.det, a)[1](np.conjugate(np.linalg.det(a)) * 2)[0]
    want = autograd.grad(lambda b: anp.abs(anp.linalg.det(b)) ** 2)(a)
    np.testing.assert_allclose(got, want, rtol=1e-12)
