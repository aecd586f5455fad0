"""Linear algebra and sorting: the rule battery on well-conditioned stacked matrices, staged
results against numpy bit for bit, pinned derivatives (ties, zero norms) and error paths."""
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.rules import linalg
from xform.testing import check_grads, check_primitive
from xform.testing import strategies as xst

# -- argument makers: strategies of argument tuples ----------------------------------------

batch_shapes = xst.shapes(min_dims=0, max_dims=2, max_side=3)
sizes = st.integers(1, 4)


@st.composite
def general(draw, dtype=np.float64):
    """Diagonally dominant (so well conditioned), with either sign of determinant."""
    batch, n = draw(batch_shapes), draw(sizes)
    a = draw(xst.arrays(batch + (n, n), np.float64, -1, 1)) + n * np.eye(n)
    a[..., 0, :] *= draw(st.sampled_from([-1.0, 1.0]))
    return a.astype(dtype)


@st.composite
def spd(draw, dtype=np.float64):
    batch, n = draw(batch_shapes), draw(sizes)
    b = draw(xst.arrays(batch + (n, n), np.float64, -1, 1))
    return (b @ np.swapaxes(b, -1, -2) + n * np.eye(n)).astype(dtype)


@st.composite
def symmetric_distinct(draw, dtype=np.float64):
    """Q diag(w) Q^T with eigenvalue gaps of at least 0.4 (eigh's derivative needs gaps).

    Q is a generic rotation: at special ones (e.g. diagonal A) LAPACK's sign choice for the
    eigenvectors jumps under a small perturbation, so finite differences are meaningless.
    """
    batch, n = draw(batch_shapes), draw(sizes)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    q, _ = np.linalg.qr(rng.standard_normal(batch + (n, n)))
    w = np.arange(n) + 0.3 * draw(xst.arrays(batch + (n,), np.float64, -1, 1))
    return ((q * w[..., None, :]) @ np.swapaxes(q, -1, -2)).astype(dtype)


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
def solve_args(draw):
    a = draw(general())
    n = a.shape[-1]
    b_batch = draw(st.sampled_from([a.shape[:-2], a.shape[-3:-2], (2,) + a.shape[:-2]]))
    b = draw(xst.arrays(b_batch + (n, draw(st.integers(1, 3))), np.float64, -2, 2))
    return a, b


@st.composite
def gather_args(draw):
    x = draw(xst.arrays(draw(xst.shapes(min_dims=1, max_dims=3)), np.float64, -2, 2))
    axis = draw(st.integers(0, x.ndim - 1))
    perm = np.argsort(draw(xst.arrays(x.shape, np.float64, -1, 1)), axis=axis, kind="stable")
    return (x, perm), axis


# -- the case table ----------------------------------------------------------------------

OpCase = namedtuple("OpCase", "name prim args params linear_argnums order")

CASES = [
    OpCase("inv", linalg.inv_p, one(general()), {}, None, 2),
    OpCase("solve", linalg.solve_p, solve_args(), {}, (1,), 2),
    OpCase("det", linalg.det_p, one(general()), {}, None, 2),
    OpCase("slogdet", linalg.slogdet_p, one(general()), {}, None, 2),
    OpCase("cholesky", linalg.cholesky_p, one(spd()), {"upper": False}, None, 2),
    OpCase("cholesky_upper", linalg.cholesky_p, one(spd()), {"upper": True}, None, 1),
    OpCase("eigh", linalg.eigh_p, one(symmetric_distinct()), {"uplo": "L"}, None, 2),
    OpCase("eigh_upper", linalg.eigh_p, one(symmetric_distinct()), {"uplo": "U"}, None, 1),
    OpCase("sort", linalg.sort_p, one(distinct()), {"axis": -1}, None, 2),
    OpCase("argsort", linalg.argsort_p, one(distinct()), {"axis": 0, "kind": None}, None, 1),
    OpCase("sort_gather", linalg.sort_gather_p, None, {}, (0,), 2),
]


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
    check_primitive(case.prim, *args, params=params, order=case.order,
                    linear_argnums=case.linear_argnums)


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
    if isinstance(expected, tuple):
        assert type(staged) is type(expected)
    expected, staged = (expected, staged) if isinstance(expected, tuple) else \
        ((expected,), (staged,))
    for out_aval, got, want in zip(out_avals, staged, expected):
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


@given(x=distinct(min_dims=2))
def test_norm_grads(x):
    for ord_, axis in [(None, None), (2, -1), (1, 0), (np.inf, 1), ("fro", (0, 1)),
                       (1, (1, 0)), (np.inf, (0, 1))]:
        check_grads(lambda y: np.linalg.norm(y, ord_, axis), (x + 0.5,), order=2)


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


def test_eigh_and_cholesky_read_one_triangle():
    a = np.array([[4.0, 1.0], [1.0, 3.0]])
    # sum(w) = trace of the lower triangle's symmetric matrix: its gradient is the identity
    grad = xform.grad(lambda y: np.sum(np.linalg.eigh(y).eigenvalues))(a)
    np.testing.assert_allclose(grad, np.eye(2), atol=1e-12)
    grad = xform.grad(lambda y: np.sum(np.linalg.cholesky(y)))(a)
    assert grad[0, 1] == 0.0 and grad[1, 0] != 0.0


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
]


@pytest.mark.parametrize("fn, arg", ERRORS)
def test_bad_shapes_raise_shape_error(fn, arg):
    with pytest.raises(xform.ShapeError, match="test_linalg.py"):
        xform.jit(fn)(arg)


@pytest.mark.parametrize("fn", [lambda a: np.linalg.norm(a, 2),
                                lambda a: np.linalg.norm(a, 3, axis=0),
                                lambda a: np.sort(a, order="x")])
def test_unsupported_options(fn):
    with pytest.raises(xform.UnsupportedError, match="test_linalg.py"):
        xform.jit(fn)(np.ones((2, 2)))
