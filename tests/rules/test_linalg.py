"""Linear algebra and sorting: the rule battery on well-conditioned stacked real and complex
matrices, staged results against numpy bit for bit, pinned derivatives (ties, zero norms) and
error paths. tests/test_linalg_complex.py checks complex derivatives of the numpy functions.
"""
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import xform
from xform.rules import linalg
from xform.testing import check_grads, check_primitive
from xform.testing import strategies as xst
from tests.symmetric import check_symmetric_input_primitive, fixed_signs, symmetrized

# -- argument makers: strategies of argument tuples ----------------------------------------

batch_shapes = xst.shapes(min_dims=0, max_dims=2, max_side=3)
sizes = st.integers(1, 4)


def _noise(draw, shape, is_complex):
    x = draw(xst.arrays(shape, np.float64, -1, 1))
    return x + 1j * draw(xst.arrays(shape, np.float64, -1, 1)) if is_complex else x


def _rng(draw):
    return np.random.default_rng(draw(st.integers(0, 2**16)))


def _unitary(rng, batch, n, is_complex):
    """A generic rotation (unitary when complex): at special ones (e.g. the identity) LAPACK's
    choice of eigenvector signs jumps under a small perturbation, so finite differences are
    meaningless there."""
    z = rng.standard_normal(batch + (n, n))
    if is_complex:
        z = z + 1j * rng.standard_normal(batch + (n, n))
    return np.linalg.qr(z)[0]


@st.composite
def general(draw, is_complex=False):
    """Strictly diagonally dominant (so well conditioned: complex noise reaches modulus 0.71),
    with either sign of determinant."""
    batch, n = draw(batch_shapes), draw(sizes)
    a = 0.5 * _noise(draw, batch + (n, n), is_complex) + n * np.eye(n)
    a[..., 0, :] *= draw(st.sampled_from([-1.0, 1.0]))
    return a


@st.composite
def spd(draw, is_complex=False):
    batch, n = draw(batch_shapes), draw(sizes)
    b = _noise(draw, batch + (n, n), is_complex)
    return b @ np.conjugate(np.swapaxes(b, -1, -2)) + n * np.eye(n)


@st.composite
def symmetric_distinct(draw, is_complex=False):
    """Q diag(w) Q^H with eigenvalue gaps of at least 0.4 (eigh's derivative needs gaps)."""
    batch, n = draw(batch_shapes), draw(sizes)
    q = _unitary(_rng(draw), batch, n, is_complex)
    w = np.arange(n) + 0.3 * draw(xst.arrays(batch + (n,), np.float64, -1, 1))
    return (q * w[..., None, :]) @ np.conjugate(np.swapaxes(q, -1, -2))


@st.composite
def distinct_singular_values(draw, is_complex=False, square=False):
    """U diag(s) V^H, m x n, with singular values >= 0.7 and gaps of at least 0.4."""
    batch, m = draw(batch_shapes), draw(sizes)
    n = m if square else draw(sizes)
    k = min(m, n)
    rng = _rng(draw)
    u = _unitary(rng, batch, m, is_complex)[..., :k]
    v = _unitary(rng, batch, n, is_complex)[..., :k]
    s = 1 + np.arange(k)[::-1] + 0.3 * draw(xst.arrays(batch + (k,), np.float64, -1, 1))
    return (u * s[..., None, :]) @ np.conjugate(np.swapaxes(v, -1, -2))


@st.composite
def diagonalizable(draw, is_complex=False):
    """S diag(w) S^-1 with nonzero eigenvalues apart by at least 0.15, S a generic rotation
    times a matrix near the identity (at S = I or a zero eigenvalue LAPACK's eigenvector signs
    jump under a small perturbation); a real matrix of this kind has real eigenvalues,
    `random_real` gives complex pairs."""
    batch, n = draw(batch_shapes), draw(sizes)
    s = _unitary(_rng(draw), batch, n, is_complex) @ (
        np.eye(n) + 0.3 * _noise(draw, batch + (n, n), is_complex))
    w = 1 + np.arange(n) + 0.3 * _noise(draw, batch + (n,), is_complex)
    return (s * w[..., None, :]) @ np.linalg.inv(s)


@st.composite
def random_real(draw):
    batch, n = draw(batch_shapes), draw(sizes)
    return _rng(draw).standard_normal(batch + (n, n))


@st.composite
def distinct(draw, min_dims=1):
    """Arrays of distinct values (gaps of at least 0.8), so sorting is smooth."""
    shape = draw(xst.shapes(min_dims=min_dims, max_dims=3))
    size = int(np.prod(shape))
    perm = np.array(draw(st.permutations(range(size))), np.float64).reshape(shape)
    return perm + 0.1 * draw(xst.arrays(shape, np.float64, -1, 1))


def one(strategy):
    return strategy.map(lambda x: (x,))


@st.composite
def solve_args(draw, is_complex=False):
    a = draw(general(is_complex))
    n = a.shape[-1]
    b_batch = draw(st.sampled_from([a.shape[:-2], a.shape[-3:-2], (2,) + a.shape[:-2]]))
    return a, 2 * _noise(draw, b_batch + (n, draw(st.integers(1, 3))), is_complex)


@st.composite
def lstsq_args(draw, is_complex=False):
    a = draw(distinct_singular_values(is_complex))
    b_batch = draw(st.sampled_from([a.shape[:-2], a.shape[-3:-2]]))
    return a, _noise(draw, b_batch + (a.shape[-2], draw(st.integers(1, 3))), is_complex)


@st.composite
def gather_args(draw):
    x = draw(xst.arrays(draw(xst.shapes(min_dims=1, max_dims=3)), np.float64, -2, 2))
    axis = draw(st.integers(0, x.ndim - 1))
    perm = np.argsort(draw(xst.arrays(x.shape, np.float64, -1, 1)), axis=axis, kind="stable")
    return (x, perm), axis


# -- the case table ----------------------------------------------------------------------

OpCase = namedtuple("OpCase", "name prim args params linear_argnums order")

REAL_CASES = [
    OpCase("inv", linalg.inv_p, one(general()), {}, None, 2),
    OpCase("solve", linalg.solve_p, solve_args(), {}, (1,), 2),
    OpCase("det", linalg.det_p, one(general()), {}, None, 2),
    OpCase("slogdet", linalg.slogdet_p, one(general()), {}, None, 2),
    OpCase("cholesky", linalg.cholesky_p, one(spd()), {"upper": False}, None, 2),
    OpCase("cholesky_upper", linalg.cholesky_p, one(spd()), {"upper": True}, None, 1),
    OpCase("cholesky_lapack", linalg.cholesky_lapack_p, one(spd()), {"upper": False}, None, 2),
    OpCase("cholesky_lapack_upper", linalg.cholesky_lapack_p, one(spd()), {"upper": True},
           None, 1),
    OpCase("eigh", linalg.eigh_p, one(symmetric_distinct()), {"uplo": "L"}, None, 2),
    OpCase("eigh_upper", linalg.eigh_p, one(symmetric_distinct()), {"uplo": "U"}, None, 1),
    OpCase("sort", linalg.sort_p, one(distinct()), {"axis": -1}, None, 2),
    OpCase("argsort", linalg.argsort_p, one(distinct()), {"axis": 0, "kind": None}, None, 1),
    OpCase("sort_gather", linalg.sort_gather_p, None, {}, (0,), 2),
    OpCase("eigvalsh", linalg.eigvalsh_p, one(symmetric_distinct()), {"uplo": "L"}, None, 2),
    OpCase("eigvalsh_upper", linalg.eigvalsh_p, one(symmetric_distinct()), {"uplo": "U"}, None,
           1),
    OpCase("eig", linalg.eig_p, one(diagonalizable()), {}, None, 1),
    OpCase("eig_complex_pairs", linalg.eig_p, one(random_real()), {}, None, 1),
    OpCase("eigvals", linalg.eigvals_p, one(random_real()), {}, None, 2),
    OpCase("svd", linalg.svd_p, one(distinct_singular_values()),
           {"full_matrices": False, "compute_uv": True}, None, 1),
    OpCase("svd_full_square", linalg.svd_p, one(distinct_singular_values(square=True)),
           {"full_matrices": True, "compute_uv": True}, None, 1),
    OpCase("svd_values", linalg.svd_p, one(distinct_singular_values()),
           {"full_matrices": True, "compute_uv": False}, None, 2),
    OpCase("qr", linalg.qr_p, one(distinct_singular_values()), {"mode": "reduced"}, None, 2),
    OpCase("qr_complete_square", linalg.qr_p, one(distinct_singular_values(square=True)),
           {"mode": "complete"}, None, 1),
    OpCase("qr_r", linalg.qr_p, one(distinct_singular_values()), {"mode": "r"}, None, 1),
    OpCase("pinv", linalg.pinv_p, one(distinct_singular_values()),
           {"rcond": 1e-15, "hermitian": False}, None, 2),
    OpCase("lstsq", linalg.lstsq_p, lstsq_args(), {"rcond": None}, None, 2),
]

# complex rows: derivatives in the complex plane, except order 0 where the outputs are unique
# only up to a phase per column (eigh's and svd's vectors); tests/test_linalg_complex.py
# checks those derivatives through projectors, and every complex derivative against autograd
COMPLEX_CASES = [
    OpCase("inv", linalg.inv_p, one(general(True)), {}, None, 1),
    OpCase("solve", linalg.solve_p, solve_args(True), {}, (1,), 1),
    OpCase("det", linalg.det_p, one(general(True)), {}, None, 1),
    OpCase("slogdet", linalg.slogdet_p, one(general(True)), {}, None, 1),
    OpCase("cholesky", linalg.cholesky_p, one(spd(True)), {"upper": False}, None, 1),
    OpCase("eigh", linalg.eigh_p, one(symmetric_distinct(True)), {"uplo": "L"}, None, 0),
    OpCase("eigvalsh", linalg.eigvalsh_p, one(symmetric_distinct(True)), {"uplo": "U"}, None,
           1),
    OpCase("eig", linalg.eig_p, one(diagonalizable(True)), {}, None, 1),
    OpCase("eigvals", linalg.eigvals_p, one(diagonalizable(True)), {}, None, 1),
    OpCase("svd", linalg.svd_p, one(distinct_singular_values(True)),
           {"full_matrices": True, "compute_uv": True}, None, 0),
    OpCase("svd_values", linalg.svd_p, one(distinct_singular_values(True)),
           {"full_matrices": False, "compute_uv": False}, None, 1),
    # complete: Q's extra columns of a tall matrix are any basis (derivative refused)
    OpCase("qr", linalg.qr_p, one(distinct_singular_values(True)), {"mode": "reduced"}, None,
           1),
    OpCase("qr_complete_square", linalg.qr_p, one(distinct_singular_values(True, square=True)),
           {"mode": "complete"}, None, 1),
    OpCase("pinv", linalg.pinv_p, one(distinct_singular_values(True)),
           {"rcond": 1e-15, "hermitian": False}, None, 1),
    OpCase("lstsq", linalg.lstsq_p, lstsq_args(True), {"rcond": None}, None, 1),
]
CASES = REAL_CASES + [case._replace(name=case.name + "_complex") for case in COMPLEX_CASES]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@given(data=st.data())
def test_primitive_battery(case, data):
    params = dict(case.params)
    if case.prim is linalg.sort_gather_p:
        args, params["axis"] = data.draw(gather_args())
    else:
        args = data.draw(case.args)
    if params.get("axis") == -1:
        params["axis"] = args[0].ndim - 1
    if case.prim in SYMMETRIC_INPUT:
        output = ((lambda out: [out[0], fixed_signs(out[1])]) if case.prim is linalg.eigh_p
                  and not np.iscomplexobj(args[0]) else None)
        check_symmetric_input_primitive(case.prim, *args, params=params, order=case.order,
                                        output=output)
        return
    check_primitive(case.prim, *args, params=params, order=case.order,
                    linear_argnums=case.linear_argnums)


# read one triangle of a symmetric matrix; differentiated as functions of its symmetric part
SYMMETRIC_INPUT = {linalg.cholesky_p, linalg.cholesky_lapack_p, linalg.eigh_p, linalg.eigvalsh_p}


def test_every_primitive_has_a_case():
    prims = {v for v in vars(linalg).values() if isinstance(v, xform.Primitive)}
    assert prims == {case.prim for case in CASES}


# -- staged equals numpy, bit for bit, with numpy's shapes and dtypes ------------------------

FUNCTIONS = [
    ("inv", np.linalg.inv), ("det", np.linalg.det), ("slogdet", np.linalg.slogdet),
    ("cholesky", np.linalg.cholesky),
    ("cholesky_upper", lambda a: np.linalg.cholesky(a, upper=True)),
    ("eigh", np.linalg.eigh), ("eigh_U", lambda a: np.linalg.eigh(a, UPLO="U")),
    ("solve_vector", lambda a: np.linalg.solve(a, np.arange(3.0))),
    ("solve_matrix", lambda a: np.linalg.solve(a, np.swapaxes(a, -1, -2))),
    ("matrix_transpose", np.linalg.matrix_transpose),
    ("np.matrix_transpose", np.matrix_transpose),
    ("norm", np.linalg.norm), ("norm_keepdims", lambda a: np.linalg.norm(a, keepdims=True)),
    ("norm_fro_keepdims", lambda a: np.linalg.norm(a, "fro", (1, 2), True)),
    ("norm_axis", lambda a: np.linalg.norm(a, axis=-1)),
    ("norm_1", lambda a: np.linalg.norm(a, 1, axis=1, keepdims=True)),
    ("norm_inf", lambda a: np.linalg.norm(a, np.inf, axis=0)),
    ("norm_matrix_1", lambda a: np.linalg.norm(a, 1, axis=(2, 1))),
    ("norm_matrix_inf", lambda a: np.linalg.norm(a, np.inf, axis=(-1, 0), keepdims=True)),
    ("norm_vector_ords", lambda a: [np.linalg.norm(a, o, axis=1, keepdims=k) for o, k in [
        (0, False), (-np.inf, True), (3, False), (4, True), (-1, False), (-2, False),
        (0.5, False), (2, True)]]),
    ("norm_matrix_ords", lambda a: [np.linalg.norm(a, o, axis=x, keepdims=k) for o, x, k in [
        (2, (1, 2), False), (-2, (2, 1), True), ("nuc", (0, 2), False), (-1, (1, 2), False),
        (-np.inf, (2, 0), True), ("fro", (-2, -1), False)]]),
    ("norm_flat_ord", lambda a: np.linalg.norm(a[0], 2)),
    ("norm_nuc_2d", lambda a: np.linalg.norm(a[1], "nuc")),
    ("matrix_norm", lambda a: (np.linalg.matrix_norm(a), np.linalg.matrix_norm(a, ord=1),
                               np.linalg.matrix_norm(a, keepdims=True, ord=-2))),
    ("vector_norm", lambda a: (np.linalg.vector_norm(a), np.linalg.vector_norm(a, axis=1),
                               np.linalg.vector_norm(a, axis=(2, 0), keepdims=True, ord=3),
                               np.linalg.vector_norm(a, keepdims=True, ord=np.inf))),
    ("eigvalsh", np.linalg.eigvalsh), ("eigvalsh_U", lambda a: np.linalg.eigvalsh(a, "U")),
    ("svd", np.linalg.svd), ("svd_reduced", lambda a: np.linalg.svd(a[:, :2], False)),
    ("svd_values", lambda a: np.linalg.svd(a[..., :2], compute_uv=False)),
    ("svdvals", np.linalg.svdvals),
    ("svd_hermitian", lambda a: np.linalg.svd(a + np.swapaxes(a, -1, -2), hermitian=True)),
    ("svd_hermitian_values", lambda a: np.linalg.svd(a * 1.0 - np.swapaxes(a, -1, -2) + 1,
                                                     hermitian=True, compute_uv=False)),
    ("qr", np.linalg.qr), ("qr_complete", lambda a: np.linalg.qr(a[:, :, :2], "complete")),
    ("qr_r", lambda a: np.linalg.qr(a[:, :2], mode="r")),
    ("pinv", np.linalg.pinv), ("pinv_rcond", lambda a: np.linalg.pinv(a[:, :2], 0.1)),
    ("pinv_rtol", lambda a: np.linalg.pinv(a * 1.0, rtol=None)),
    ("pinv_hermitian", lambda a: np.linalg.pinv(a + np.swapaxes(a, -1, -2), hermitian=True)),
    ("lstsq_square", lambda a: np.linalg.lstsq(a[0], a[1])),
    ("lstsq_tall_vector", lambda a: np.linalg.lstsq(np.reshape(a, (6, 3)), np.arange(6.0))),
    ("lstsq_wide", lambda a: np.linalg.lstsq(a[0, :2], a[1, :2], rcond=0.01)),
    ("matrix_power", lambda a: [np.linalg.matrix_power(a, n) for n in (0, 1, 2, 3, 5, 6)]),
    ("matrix_power_negative", lambda a: np.linalg.matrix_power(a + 0.0, -3)),
    ("multi_dot", lambda a: np.linalg.multi_dot([a[0], a[1], a[0], a[1]])),
    ("multi_dot_three", lambda a: np.linalg.multi_dot([a[0], a[1, :, :2], a[0, :2]])),
    ("multi_dot_vectors", lambda a: np.linalg.multi_dot([a[0, 0], a[1], a[0], a[1, :, 0]])),
    ("multi_dot_two", lambda a: np.linalg.multi_dot([a[0], a[1, 0]])),
    ("cond", lambda a: [np.linalg.cond(a, p) for p in
                        (None, 2, -2, 1, -1, np.inf, -np.inf, "fro", "nuc")]),
    ("sort", np.sort), ("sort_axis0", lambda a: np.sort(a, axis=0)),
    ("sort_flat", lambda a: np.sort(a, axis=None)),
    ("argsort", np.argsort), ("argsort_stable", lambda a: np.argsort(a, axis=1, stable=True)),
    ("argsort_flat", lambda a: np.argsort(a, axis=None, kind="mergesort")),
]


def _example(dtype):
    """Two 3x3 matrices, positive definite also in their lower and upper triangles."""
    if dtype is np.bool_:
        return np.broadcast_to(np.eye(3, dtype=bool), (2, 3, 3)).copy()
    b = np.random.default_rng(1).integers(-1, 2, (2, 3, 3))
    a = b @ np.swapaxes(b, -1, -2) + 3 * np.eye(3, dtype=int)
    if dtype is np.int64:
        return a
    # non-symmetric and with ties-free values; each triangle stays positive definite
    return (a + np.linspace(-0.3, 0.3, a.size).reshape(a.shape)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_])
@pytest.mark.parametrize("name, fn", FUNCTIONS, ids=[f[0] for f in FUNCTIONS])
def test_staged_matches_numpy(name, fn, dtype):
    a = _example(dtype)
    expected = fn(a)
    staged = xform.jit(fn)(a)
    out_avals = xform.make_graph(fn)(a).out_avals
    assert type(staged) is type(expected) or not isinstance(expected, (tuple, list))
    for out_aval, got, want in zip(out_avals, xform.tree.tree_flatten(staged)[0],
                                   xform.tree.tree_flatten(expected)[0]):
        want = np.asarray(want)
        assert (out_aval.shape, out_aval.dtype) == (want.shape, want.dtype)
        assert np.asarray(got).dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@given(a=general(), k=st.integers(0, 2))
def test_solve_vector_b_under_vmap(a, k):
    # numpy 2: b is a vector only when 1-D, so a batched vector stays a vector per example
    a = np.broadcast_to(a.reshape((-1,) + a.shape[-2:])[:1], (3,) + a.shape[-2:])
    b = np.arange(3 * a.shape[-1], dtype=np.float64).reshape(3, -1) - k
    got = xform.vmap(np.linalg.solve)(a, b)
    np.testing.assert_allclose(got, np.stack([np.linalg.solve(x, y) for x, y in zip(a, b)]))
    got = xform.vmap(np.linalg.solve, in_axes=(None, 0))(a[0], b)
    np.testing.assert_allclose(got, np.linalg.solve(a[0], b[..., None])[..., 0])


# -- derivatives of the numpy functions -----------------------------------------------------

@given(a=general())
def test_solve_vector_grads(a):
    b = np.linspace(-1, 1, a.shape[-1])
    check_grads(np.linalg.solve, (a, b), order=2)


NORM_ORDS = [(None, None), (2, -1), (1, 0), (np.inf, 1), (-np.inf, 0), (0, 1), (-1, 0),
             (-2, 1), (3, 0), (4, -1), (0.5, 1), (-3.5, 0), ("fro", (0, 1)), (1, (1, 0)),
             (np.inf, (0, 1)), (-1, (0, 1)), (-np.inf, (1, 0)), (2, (0, 1)), (-2, (1, 0)),
             ("nuc", (0, 1)), (None, (1, 0))]


@pytest.mark.parametrize("ord_, axis", NORM_ORDS)
@given(x=distinct(min_dims=2))
def test_norm_grads(x, ord_, axis):
    # distinct values: no ties among maxima, no zero entries, distinct singular values
    x = x + 0.5
    if ord_ in (np.inf, -np.inf, 1, -1) and isinstance(axis, tuple):
        # a matrix norm picking the largest or smallest row (column) sum of |x|: two equal
        # sums are a kink, where the derivative is not defined (x = [[0.5, 3.5], [2.5, 1.5]])
        summed = axis[1] if ord_ in (np.inf, -np.inf) else axis[0]
        sums = np.sort(np.sum(np.abs(x), axis=summed), axis=None)
        assume(sums.size < 2 or np.min(np.diff(sums)) > 1e-3)
    check_grads(lambda y: np.linalg.norm(y, ord_, axis), (x,), order=2)


@given(a=distinct_singular_values(square=True))
def test_cond_and_friends_grads(a):
    functions = [np.linalg.cond, lambda b: np.linalg.cond(b, 1),
                 lambda b: np.linalg.cond(b, -2), lambda b: np.linalg.matrix_power(b, -3),
                 lambda b: np.linalg.matrix_power(b, 5), np.linalg.svdvals,
                 lambda b: np.linalg.vector_norm(b, axis=(-1, 0), ord=3),
                 lambda b: np.linalg.matrix_norm(b, ord="nuc")]
    if a.ndim == 2:
        functions.append(lambda b: np.linalg.multi_dot([b, b[..., :1], b[..., :1, :], b]))
    for fn in functions:
        check_grads(fn, (a,), order=1)


@given(a=symmetric_distinct())
def test_hermitian_svd_grads(a):
    # eigenvalues of alternating signs whose magnitudes differ by at least 0.4
    w, q = np.linalg.eigh(a)
    n = a.shape[-1]
    w = (-1.0) ** np.arange(n) * (1 + np.arange(n) + 0.3 * (w - np.arange(n)))
    a = (q * w[..., None, :]) @ np.swapaxes(q, -1, -2)
    # svd(hermitian=True) is eigh's: differentiated as a function of the symmetric part
    check_grads(symmetrized(lambda b: np.linalg.svd(b, hermitian=True, compute_uv=False)),
                (a,), order=2)
    check_grads(symmetrized(lambda b: np.linalg.svd(b, hermitian=True).U[..., :1] @ np.linalg.svd(
        b, hermitian=True).Vh[..., :1, :]), (a,), order=1)


@given(a=distinct_singular_values())
def test_lstsq_grads(a):
    b = np.linspace(-1, 1, a.shape[-2])
    if a.ndim == 2:
        check_grads(lambda x, y: np.linalg.lstsq(x, y)[:2] + np.linalg.lstsq(x, y)[3:],
                    (a, b), order=2)


@pytest.mark.parametrize("axis", [None, 0, (0, 1)])
def test_norm_gradient_at_zero_is_zero(axis):
    value, grad = xform.value_and_grad(lambda x: np.sum(np.linalg.norm(x, axis=axis)))(
        np.zeros((2, 3)))
    assert value == 0.0
    np.testing.assert_array_equal(grad, np.zeros((2, 3)))


def test_sort_tangent_at_ties_follows_stable_order():
    x = np.array([1.0, 0.0, 1.0])
    _, t_out = xform.jvp(np.sort, (x,), (np.array([10.0, 20.0, 30.0]),))
    np.testing.assert_array_equal(t_out, [20.0, 10.0, 30.0])
    grad = xform.grad(lambda y: np.sum(np.sort(y) * np.array([1.0, 2.0, 3.0])))(x)
    np.testing.assert_array_equal(grad, [2.0, 1.0, 3.0])


def test_argsort_and_slogdet_sign_have_zero_derivative():
    x = np.array([[3.0, 1.0], [0.5, -2.0]])
    _, t_out = xform.jvp(np.argsort, (x,), (np.ones_like(x),))
    assert t_out.dtype == xform.float0
    _, t_out = xform.jvp(lambda y: np.linalg.slogdet(y).sign, (x,), (np.ones_like(x),))
    np.testing.assert_array_equal(t_out, 0.0)


def test_eigh_and_cholesky_read_one_triangle_and_have_symmetric_gradients():
    a = np.array([[4.0, 1.0], [1.0, 3.0]])
    skewed = a + np.array([[0.0, 5.0], [0.0, 0.0]])     # the upper triangle is never read
    for fn in (lambda y: np.linalg.eigh(y).eigenvalues, np.linalg.cholesky):
        np.testing.assert_array_equal(xform.jit(fn)(skewed), fn(a))
    # sum(w) = trace: its gradient is the identity
    grad = xform.grad(lambda y: np.sum(np.linalg.eigh(y).eigenvalues))(a)
    np.testing.assert_allclose(grad, np.eye(2), atol=1e-12)
    # symmetric, as JAX's and autograd's: a descent step keeps the matrix symmetric
    grad = xform.grad(lambda y: np.sum(np.linalg.cholesky(y)))(a)
    assert grad[0, 1] == grad[1, 0] != 0.0
    for upper in (False, True):
        grad = xform.grad(lambda y: np.sum(np.sin(np.linalg.cholesky(y, upper=upper))))(a)
        np.testing.assert_array_equal(grad, grad.T)


# -- errors name the user's line -------------------------------------------------------------

ERRORS = [
    (np.linalg.inv, np.ones((2, 3))),
    (np.linalg.det, np.ones(3)),
    (np.linalg.slogdet, np.ones((2, 3, 2))),
    (np.linalg.cholesky, np.ones((3, 2))),
    (np.linalg.eigh, np.ones((1, 2))),
    (lambda a: np.linalg.solve(a, np.ones(2)), np.eye(3)),
    (lambda a: np.linalg.solve(np.ones((2, 3)), a), np.ones(2)),
    (lambda a: np.sort(a, axis=2), np.ones((2, 3))),
    (lambda a: np.argsort(a), np.float64(1.0)),
    (lambda a: np.linalg.norm(a, axis=3), np.ones((2, 3))),
    (lambda a: np.linalg.norm(a, axis=(0, 1, 2)), np.ones((2, 3, 4))),
    (np.linalg.matrix_transpose, np.ones(3)),
    (np.linalg.svd, np.ones(3)), (np.linalg.qr, np.ones(3)), (np.linalg.eig, np.ones((2, 3))),
    (np.linalg.eigvals, np.ones((2, 3))), (np.linalg.eigvalsh, np.ones((2, 3))),
    (np.linalg.pinv, np.ones(3)), (lambda a: np.linalg.lstsq(a, a), np.ones((2, 2, 2))),
    (lambda a: np.linalg.lstsq(a, np.ones(3)), np.ones((2, 2))),
    (lambda a: np.linalg.matrix_power(a, 2), np.ones((2, 3))),
    (lambda a: np.linalg.matrix_power(a, 1.5), np.ones((2, 2))),
    (lambda a: np.linalg.multi_dot([a, a, a]), np.ones((2, 2, 2))),
    (lambda a: np.linalg.multi_dot([a]), np.ones((2, 2))),
    (np.linalg.cond, np.ones(3)), (lambda a: np.linalg.cond(a, 1), np.ones((2, 3))),
    (lambda a: np.linalg.norm(a, "nuc", axis=0), np.ones((2, 3))),
    (lambda a: np.linalg.norm(a, 3, axis=(0, 1)), np.ones((2, 3))),
    (lambda a: np.linalg.pinv(a, 0.1, rtol=0.1), np.ones((2, 2))),
]


@pytest.mark.parametrize("fn, arg", ERRORS)
def test_bad_shapes_raise_shape_error(fn, arg):
    with pytest.raises(xform.ShapeError, match="test_linalg.py"):
        xform.jit(fn)(arg)


@pytest.mark.parametrize("fn", [lambda a: np.linalg.qr(a, mode="raw"),
                                lambda a: np.linalg.pinv(a, rcond=np.array([0.1, 0.2])),
                                lambda a: np.linalg.multi_dot([a, a, a], out=a),
                                lambda a: np.sort(a, order="x")])
def test_unsupported_options(fn):
    with pytest.raises(xform.UnsupportedError, match="test_linalg.py"):
        xform.jit(fn)(np.ones((2, 2)))


@pytest.mark.parametrize("fn", [
    lambda a: xform.jvp(lambda b: np.linalg.svd(b)[0], (a,), (a,)),
    lambda a: xform.grad(lambda b: np.sum(np.linalg.qr(b, mode="complete")[0]))(a),
])
def test_derivatives_of_non_unique_factors_are_refused(fn):
    # the extra columns of U (svd) and Q (qr) of a tall matrix are any orthonormal basis
    with pytest.raises(xform.UnsupportedError, match="not unique"):
        fn(np.arange(6.0).reshape(3, 2) ** 2)


# -- where staging must differ from numpy: shapes and dtypes that depend on values ----------

def test_lstsq_residuals_of_a_rank_deficient_tall_matrix():
    # numpy returns no residuals when rank < n; a staged shape cannot depend on the rank, so
    # xform returns the residuals of numpy's own solution
    a = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
    b = np.array([1.0, 0.0, 2.0])
    x, residuals, rank, s = xform.jit(np.linalg.lstsq)(a, b)
    x_np, residuals_np, rank_np, s_np = np.linalg.lstsq(a, b)
    assert residuals_np.size == 0 and rank == rank_np == 1
    np.testing.assert_array_equal(x, x_np)
    np.testing.assert_array_equal(s, s_np)
    np.testing.assert_allclose(residuals, [np.sum((b - a @ x_np) ** 2)], rtol=1e-14)


def test_eig_is_complex_even_when_numpy_returns_real():
    a = np.array([[2.0, 1.0], [0.0, 3.0]])
    w, v = xform.jit(np.linalg.eig)(a)
    w_np, v_np = np.linalg.eig(a)
    assert w_np.dtype == np.float64 and w.dtype == v.dtype == np.complex128
    np.testing.assert_array_equal(w, w_np)
    np.testing.assert_array_equal(v, v_np)
