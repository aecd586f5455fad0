"""xform.numpy.math: staged values against numpy (bit for bit where numpy's own formula is
followed), derivatives against finite differences (check_grads) and autograd, vmap against a
loop, and the error paths."""
import autograd
import autograd.numpy as anp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.testing import check_grads
from xform.testing import strategies as xst

from tests.numpy_functions.support import assert_matches_numpy, assert_vmap_matches_loop
from tests.rules.elementwise_checks import operand_grid, staging_mismatch

THIS_FILE = "test_math.py"


@st.composite
def array_and_axis(draw, min_dims=1, min_side=1, low=-2.0, high=2.0, dtype=np.float64):
    shape = draw(xst.shapes(min_dims=min_dims, max_dims=3, min_side=min_side))
    x = draw(xst.arrays(shape, dtype, low, high))
    return x, draw(st.integers(-x.ndim, x.ndim - 1)) if x.ndim else None


@st.composite
def sorted_distinct(draw, size):
    """`size` increasing points at least 0.2 apart (interp's kinks stay away from samples)."""
    steps = draw(xst.arrays((size,), np.float64, 0.2, 1.0))
    return np.cumsum(steps) - 1.0


# -- values against numpy ------------------------------------------------------------------------

@given(xs=array_and_axis(), n=st.integers(0, 2))
def test_diff_matches_numpy(xs, n):
    x, axis = xs
    assert_matches_numpy(lambda a: np.diff(a, n, axis), x)
    assert_matches_numpy(lambda a: np.diff(a, 1, axis, prepend=0.5, append=a), x)
    assert_matches_numpy(lambda a: np.diff(a > 0, axis=axis), x)


@given(xs=array_and_axis())
def test_ediff1d_matches_numpy(xs):
    x, _ = xs
    assert_matches_numpy(np.ediff1d, x)
    assert_matches_numpy(lambda a: np.ediff1d(a, to_end=[1.0, 2.0], to_begin=a[..., :1]), x)


@given(xs=array_and_axis(min_side=3), edge_order=st.sampled_from([1, 2]), data=st.data())
def test_gradient_matches_numpy(xs, edge_order, data):
    x, axis = xs
    n = x.shape[axis]
    coords = data.draw(sorted_distinct(n))
    assert_matches_numpy(lambda f: np.gradient(f, edge_order=edge_order), x)
    assert_matches_numpy(lambda f: np.gradient(f, 0.5, axis=axis, edge_order=edge_order), x)
    assert_matches_numpy(lambda f: np.gradient(f, coords, axis=axis, edge_order=edge_order), x)
    # numpy takes its uniform-spacing formula when the coordinates happen to be evenly
    # spaced, a choice by value that traced coordinates cannot make: equal to rounding then
    uniform = np.all(np.diff(coords) == np.diff(coords)[0])
    assert_matches_numpy(lambda f, c: np.gradient(f, c, axis=axis, edge_order=edge_order),
                         x, coords, exact=not uniform)
    assert_matches_numpy(lambda f: np.gradient(f.astype(np.int64), axis=axis), x * 10)


@given(xs=array_and_axis(min_side=2), data=st.data())
def test_trapezoid_matches_numpy(xs, data):
    y, axis = xs
    x = data.draw(sorted_distinct(y.shape[axis]))
    assert_matches_numpy(lambda a: np.trapezoid(a, axis=axis), y)
    assert_matches_numpy(lambda a: np.trapezoid(a, dx=0.3, axis=axis), y)
    assert_matches_numpy(lambda a, b: np.trapezoid(a, b, axis=axis), y, x)
    assert_matches_numpy(lambda a: np.trapezoid(a, a * 2, axis=axis), y)


@given(data=st.data(), na=st.sampled_from([2, 3]), nb=st.sampled_from([2, 3]))
def test_cross_matches_numpy(data, na, nb):
    batch = data.draw(xst.shapes(min_dims=0, max_dims=2, max_side=3))
    a = data.draw(xst.arrays(batch + (na,)))
    b = data.draw(xst.arrays((nb,)))
    with pytest.warns(DeprecationWarning) if 2 in (na, nb) else _no_warning():
        assert_matches_numpy(np.cross, a, b)
    if na == nb == 3 and a.ndim == 2:
        assert_matches_numpy(lambda u, v: np.cross(u, v, axisa=0, axisc=0), a.T, b)


class _no_warning:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@given(xp=sorted_distinct(6), data=st.data())
def test_interp_matches_numpy(xp, data):
    fp = data.draw(xst.arrays((6,)))
    x = np.concatenate([data.draw(xst.arrays((5,), np.float64, -3, 5)), xp])
    assert_matches_numpy(np.interp, x, xp, fp)
    assert_matches_numpy(lambda a: np.interp(a, xp, fp, left=-7.0, right=9.0), x)
    assert_matches_numpy(lambda a: np.interp(a.reshape(-1, 1), xp, fp), x)
    assert_matches_numpy(lambda a: np.interp(a[0], xp, fp), x)
    # a repeated sample point (zero step) takes numpy's value at the point
    assert_matches_numpy(np.interp, x, np.sort(np.r_[xp, xp[2]]), np.r_[fp, fp[2]])


@given(data=st.data(), mode=st.sampled_from(["valid", "same", "full"]))
def test_convolve_and_correlate_match_numpy(data, mode):
    a = data.draw(xst.arrays((data.draw(st.integers(1, 7)),)))
    v = data.draw(xst.arrays((data.draw(st.integers(1, 7)),)))
    # one primitive running numpy's own loop: numpy's bits, the first call and later ones
    for _ in range(2):
        assert_matches_numpy(lambda x, y: np.convolve(x, y, mode), a, v)
        assert_matches_numpy(lambda x, y: np.correlate(x, y, mode), a, v)
        assert_matches_numpy(lambda x: np.convolve(x, v), a)
        assert_matches_numpy(lambda x: np.correlate(x, x[:3], "full"), a)
    z = a + 1j * a[::-1]
    assert_matches_numpy(lambda x, y: np.convolve(x, y, mode), z, v)
    assert_matches_numpy(lambda x, y: np.correlate(x, y, mode), v, z)


def test_correlate_of_an_inf_meets_no_zero_padding():
    a = np.array([0.5, 0.5, np.inf, 1.0])
    # numpy sums only the overlapping products; inf * 0 (padding) would be nan
    np.testing.assert_array_equal(np.correlate(a, a[:3], "full"),
                                  [np.inf, np.inf, np.inf, np.inf, np.inf, 0.5])
    for _ in range(2):
        assert_matches_numpy(lambda x: np.correlate(x, x[:3], mode="full"), a)
        assert_matches_numpy(lambda x: np.convolve(x[:3], x), a)


@given(xs=array_and_axis())
def test_sinc_round_nan_to_num_match_numpy(xs):
    x, _ = xs
    x = np.where(np.abs(x) < 0.3, 0.0, x)      # sinc at 0
    assert_matches_numpy(np.sinc, x)
    assert_matches_numpy(np.sinc, x.astype(np.float32))
    for decimals in (-1, 0, 1, 3):
        assert_matches_numpy(lambda a: np.round(a * 100, decimals), x)
        assert_matches_numpy(lambda a: np.around(a.astype(np.float32) * 100, decimals), x)
    assert_matches_numpy(lambda a: np.round(np.floor(a * 50).astype(np.int64), -1), x)
    special = x.copy().reshape(-1)
    special[::3] = np.nan
    special[1::3] = np.inf
    special[2::5] = -np.inf
    assert_matches_numpy(np.nan_to_num, special)
    assert_matches_numpy(lambda a: np.nan_to_num(a, nan=1.5, posinf=2.5, neginf=-3.5), special)
    assert_matches_numpy(lambda a: np.nan_to_num(a.astype(np.float32)), special)


def test_zero_dimensional_results_are_numpy_scalars():
    assert_matches_numpy(np.sinc, 0.0)
    assert_matches_numpy(np.nan_to_num, np.float64(np.inf))
    assert_matches_numpy(np.interp, 0.5, np.array([0.0, 1.0]), np.array([1.0, 3.0]))
    assert_matches_numpy(np.isclose, 1.0, 1.0 + 1e-9)


@given(xs=array_and_axis())
def test_select_and_piecewise_match_numpy(xs):
    x, _ = xs
    assert_matches_numpy(lambda a: np.select([a > 1, a < 0], [a, a * 2], -1.0), x)
    assert_matches_numpy(lambda a: np.select([a > 0], [np.int64(3)]), x)
    assert_matches_numpy(lambda a: np.piecewise(a, [a < 0, a > 0.5],
                                                [lambda v: -v, lambda v: v ** 2, 7.0]), x)
    assert_matches_numpy(lambda a: np.piecewise(a, a < 0, [np.sin, 1.0]), x.reshape(-1))
    assert_matches_numpy(lambda a: np.piecewise(a, [a < 0, a > -1], [np.cos, np.exp]), x)


@given(xs=array_and_axis(), scale=st.sampled_from([0.0, 1e-9, 1e-3]))
def test_isclose_and_allclose_match_numpy(xs, scale):
    x, _ = xs
    y = x + scale
    y.reshape(-1)[0] = np.nan
    assert_matches_numpy(np.isclose, x, y)
    assert_matches_numpy(lambda a, b: np.isclose(a, b, equal_nan=True, atol=1e-6), y, y)
    assert_matches_numpy(lambda a: np.isclose(a, 1), x)
    # tolerances of numpy's dtypes take part in its promotion; an array of them is staged
    assert_matches_numpy(lambda a, b: np.isclose(a, b, rtol=np.float64(1e-3)), x.astype(np.float32),
                         y.astype(np.float32))
    assert_matches_numpy(lambda a, b: np.isclose(a, b, atol=np.full(x.shape, 1e-6)), x, y)
    got = xform.jit(lambda a, b: np.allclose(a, b))(x, x + scale)
    assert bool(got) == np.allclose(x, x + scale)


def test_a_convergence_test_by_allclose_stages_one_isclose_per_iteration():
    def jacobi(c):
        a = np.array([[4.0, 1.0, 0.0], [1.0, 5.0, 1.0], [0.0, 1.0, 3.0]])
        b = np.array([1.0, c, 2.0])
        x = np.zeros(3)
        while True:
            x_new = (b - (a - np.diag(np.diag(a))) @ x) / np.diag(a)
            if np.allclose(x_new, x, rtol=0, atol=1e-12):
                return x_new @ x_new
            x = x_new
    graph = xform.make_graph(jacobi)(0.5)
    names = [eqn.primitive.name for eqn in graph.equations]
    assert names.count("isclose") == names.count("guard") > 10
    assert "absolute" not in names
    grad = xform.grad(jacobi)
    for c in (0.5, 1.5, 0.5):
        h = 1e-6
        assert np.isclose(grad(c), (jacobi(c + h) - jacobi(c - h)) / (2 * h), rtol=1e-6)


@given(shape_a=xst.shapes(max_dims=3), data=st.data())
def test_logaddexp_on_any_shapes(shape_a, data):
    shape_b = data.draw(xst.broadcastable_shapes(shape_a))
    a, b = data.draw(xst.arrays(shape_a)), data.draw(xst.arrays(shape_b))
    assert_matches_numpy(np.logaddexp, a, b)
    check_grads(np.logaddexp, (a, b), order=2)


@given(a=xst.arrays((3, 2)), b=xst.arrays((4,)))
def test_outer_matches_numpy_and_differentiates(a, b):
    assert_matches_numpy(np.outer, a, b)
    check_grads(np.outer, (a, b), order=2)


# -- derivatives ------------------------------------------------------------------------------

@given(xs=array_and_axis(min_side=3), data=st.data())
def test_difference_derivatives(xs, data):
    x, axis = xs
    coords = data.draw(sorted_distinct(x.shape[axis]))
    check_grads(lambda a: np.diff(a, 2, axis, prepend=np.sum(a)), (x,), order=2)
    check_grads(lambda a: np.ediff1d(a, to_begin=a.sum()), (x,), order=1)
    check_grads(lambda f, c: np.gradient(f, c, axis=axis, edge_order=1), (x, coords), order=1)
    check_grads(lambda f, c: np.trapezoid(f, c, axis=axis), (x, coords), order=1)


@given(xp=sorted_distinct(5), data=st.data())
def test_interp_derivatives(xp, data):
    fp = data.draw(xst.arrays((5,)))
    # sample points between the knots (the derivative jumps at them)
    x = (xp[:-1] + xp[1:]) / 2 + np.array([-0.05, 0.0, 0.05, 0.02])
    x = np.concatenate([x, [xp[0] - 1.0, xp[-1] + 1.0]])
    check_grads(np.interp, (x, xp, fp), order=2)
    check_grads(lambda a, f: np.interp(a, xp, f, left=f[1] * 2, right=-1.0), (x, fp), order=1)


@given(data=st.data())
def test_convolve_cross_derivatives(data):
    a, v = data.draw(xst.arrays((5,))), data.draw(xst.arrays((3,)))
    for mode in ("valid", "same", "full"):
        check_grads(lambda x, y: np.convolve(x, y, mode), (a, v), order=1)
        check_grads(lambda x, y: np.correlate(y, x, mode), (a, v), order=1)
    check_grads(np.cross, (data.draw(xst.arrays((2, 3))), v), order=1)


@given(xs=array_and_axis())
def test_sinc_select_piecewise_derivatives(xs):
    x, _ = xs
    x = np.where(np.abs(x) < 0.1, 0.3, x)        # sinc's one-sided steps at 0 cross eps
    check_grads(np.sinc, (x,), order=2)
    x = np.where(np.abs(np.abs(x) - 0.5) < 0.05, 0.7, x)   # away from the conditions' edges
    check_grads(lambda a: np.select([a > 0.5, a < -0.5], [a ** 2, np.sin(a)], a), (x,),
                order=1)
    check_grads(lambda a: np.piecewise(a, [a < -0.5, a > 0.5], [np.sin, np.exp, 2.0]), (x,),
                order=1)
    # away from round's jumps (x * 10 half-way between integers), where differences blow up
    x = np.where(np.abs(np.abs(x * 10) % 1 - 0.5) < 0.1, x + 0.03, x)
    check_grads(lambda a: np.nan_to_num(a) * np.round(a, 1), (x,), order=1)


def test_sinc_derivative_at_zero():
    grad = xform.grad(lambda x: np.sum(np.sinc(x)))(np.array([0.0, 1e-30]))
    np.testing.assert_array_equal(grad, [0.0, 0.0])


ORACLE = [  # autograd differentiates these numpy functions: its gradients must agree
    ("diff", lambda m, x: m.diff(x, 2, axis=0)),
    ("gradient", lambda m, x: m.gradient(x, axis=1)),
    ("cross", lambda m, x: m.cross(x[:, :3], x[:, 1:4])),
    ("sinc", lambda m, x: m.sinc(x)),
    ("nan_to_num", lambda m, x: m.nan_to_num(x)),
]


@pytest.mark.parametrize("name, fn", ORACLE, ids=[name for name, _ in ORACLE])
@given(x=xst.arrays((3, 4), np.float64, 0.1, 2.0))
def test_gradients_agree_with_autograd(name, fn, x):
    got = xform.grad(lambda a: np.sum(np.sin(fn(np, a))))(x)
    want = autograd.grad(lambda a: anp.sum(anp.sin(fn(anp, a))))(x)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


# -- batching ---------------------------------------------------------------------------------

@given(data=st.data())
def test_vmap_matches_loop(data):
    x = data.draw(xst.arrays((3, 5)))
    xp = np.sort(data.draw(xst.arrays((3, 4), np.float64, -2, 2)), axis=1)
    xp = xp + np.arange(4) * 1e-3
    assert_vmap_matches_loop(lambda a: np.gradient(a, edge_order=2), x)
    assert_vmap_matches_loop(lambda a, b: np.interp(a, b, b ** 2), x, xp)
    assert_vmap_matches_loop(lambda a: np.interp(a, xp[0], xp[1]), x)
    assert_vmap_matches_loop(lambda b: np.interp(x[0], b, x[1, :4]), xp)
    assert_vmap_matches_loop(lambda a, b: np.convolve(a, b, "same"), x, xp)
    assert_vmap_matches_loop(lambda a: np.cross(a[:3], a[2:]), x)
    assert_vmap_matches_loop(lambda a: np.select([a > 0], [a]), x)
    assert_vmap_matches_loop(lambda a: np.trapezoid(a, a ** 2), x)


# -- errors -----------------------------------------------------------------------------------

def test_errors_name_the_users_line():
    x = np.ones(4)
    with pytest.raises(xform.ShapeError, match=THIS_FILE):
        xform.jit(lambda a: np.diff(a[0]))(x)
    with pytest.raises(xform.ShapeError, match=THIS_FILE):
        xform.jit(lambda a: np.gradient(a[:1]))(x)
    with pytest.raises(xform.ShapeError, match=THIS_FILE):
        xform.jit(lambda a: np.cross(a, a))(x)
    with pytest.raises(xform.UnsupportedError, match=THIS_FILE):
        xform.jit(lambda a: np.interp(a, a, a * 1j))(x)     # (period= is supported now)
    with pytest.raises(xform.TypeCheckError, match=THIS_FILE):
        xform.jit(lambda a: np.select([a], [a]))(x)
    with pytest.raises(xform.ShapeError, match=THIS_FILE):
        xform.jit(lambda a: np.correlate(a, a, "middle"))(x)
    with pytest.raises(xform.ConcretizationError, match=THIS_FILE):    # without values
        xform.make_graph(lambda a: 1.0 if np.allclose(a, 1.0) else 0.0)(
            xform.ShapedArray(x.shape, x.dtype))


# -- the functions jax.numpy differentiates beyond the list ---------------------------

# two-input ufuncs written as compositions (tests/rules/test_binary.py checks the rest)
COMPOSED_UFUNCS = {np.heaviside: [lambda a, b: np.heaviside(a, b)],
                   np.ldexp: [lambda a, b: np.ldexp(a, b)],
                   np.divmod: [lambda a, b: np.divmod(a, b)[0], lambda a, b: np.divmod(a, b)[1]]}


@pytest.mark.parametrize("ufunc", list(COMPOSED_UFUNCS), ids=lambda u: u.__name__)
def test_composed_ufuncs_match_numpy_on_the_dtype_grid(ufunc):
    left, right = operand_grid(np.float32)
    failures = []
    for fn in COMPOSED_UFUNCS[ufunc]:
        for x_kind, x in left.items():
            for y_kind, y in right.items():
                problem = staging_mismatch(fn, x, y)
                if problem:
                    failures.append(f"({x_kind}, {y_kind}): {problem}")
    assert not failures, "\n".join(failures)


@given(xs=array_and_axis())
def test_more_ufuncs_match_numpy(xs):
    x, _ = xs
    special = np.where(np.abs(x) < 0.5, 0.0, x * 3)
    special.reshape(-1)[::4] = np.nan
    assert_matches_numpy(np.fix, x * 3)
    assert_matches_numpy(np.fix, np.floor(x * 3).astype(np.int64))
    assert_matches_numpy(np.heaviside, special, x)
    assert_matches_numpy(lambda a: np.heaviside(a, 1), special)
    assert_matches_numpy(np.ldexp, x, np.arange(x.shape[-1]) - 2)
    assert_matches_numpy(np.ldexp, x.astype(np.float32), np.arange(x.shape[-1]) - 2)
    assert_matches_numpy(np.divmod, x * 5, 1.5)
    assert_matches_numpy(np.divmod, np.floor(x * 5).astype(np.int64), 3)
    infinite = np.where(x > 1, np.inf, np.where(x < -1, -np.inf, x))
    for fn in (np.isposinf, np.isneginf, np.isreal, np.iscomplex):
        assert_matches_numpy(fn, infinite)


@given(xs=array_and_axis(), include_initial=st.booleans())
def test_cumulative_and_unwrap_match_numpy(xs, include_initial):
    x, axis = xs
    assert_matches_numpy(lambda a: np.cumulative_sum(a, axis=axis,
                                                     include_initial=include_initial), x)
    assert_matches_numpy(lambda a: np.cumulative_prod(a, axis=axis,
                                                      include_initial=include_initial), x)
    phases = np.cumsum(x * 3, axis=axis)
    assert_matches_numpy(lambda a: np.unwrap(a, axis=axis), phases)
    assert_matches_numpy(lambda a: np.unwrap(a, discont=1.0, axis=axis, period=5.0), phases)
    assert_matches_numpy(lambda a: np.unwrap(a, period=6), np.floor(phases * 3).astype(int))


@given(a=xst.arrays((3, 4)), b=xst.arrays((4,)))
def test_vector_gufuncs_match_numpy(a, b):
    assert_matches_numpy(np.vecdot, a, b, exact=False)
    assert_matches_numpy(np.matvec, a, b, exact=False)
    assert_matches_numpy(np.vecmat, a[:, 0], a, exact=False)
    check_grads(np.vecdot, (a, b), order=1)
    check_grads(np.matvec, (a, b), order=1)
    check_grads(np.vecmat, (a[:, 0], a), order=1)


@given(xs=array_and_axis())
def test_boolean_tests_match_numpy(xs):
    x, _ = xs
    y = x.copy()
    y.reshape(-1)[0] = np.nan
    for equal_nan in (False, True):
        got = xform.jit(lambda a, b: np.array_equal(a, b, equal_nan=equal_nan))(y, y)
        assert bool(got) == np.array_equal(y, y, equal_nan=equal_nan)
    assert xform.jit(lambda a: np.array_equal(a, a[..., :1]))(np.ones((2, 2))) is False
    assert bool(xform.jit(lambda a: np.array_equiv(a, a[..., :1]))(x)) == \
        np.array_equiv(x, x[..., :1])
    assert_matches_numpy(lambda a: np.isin(a, a.reshape(-1)[:2]), x)
    assert_matches_numpy(lambda a: np.isin(np.round(a), [0.0, 1.0], invert=True), x)


@given(x=xst.arrays((3, 4)))
def test_more_derivatives(x):
    away_from_zero = np.where(np.abs(x) < 0.1, 0.5, x)      # heaviside jumps at 0
    check_grads(lambda a, b: np.heaviside(a, b) * a, (away_from_zero, x), order=1)
    check_grads(lambda a: np.ldexp(a, np.arange(4)), (x,), order=1)
    check_grads(lambda a: np.unwrap(np.cumsum(a * 3, axis=1)), (x,), order=1)
    # cumprod's rules divide by nonzero values, so values whose reciprocal overflows are out
    # of their domain (xform/rules/reduce.py, _cumprod_parts)
    tame = np.where(np.abs(x) < 1e-150, 0.0, x)
    check_grads(lambda a: np.cumulative_prod(a, axis=1, include_initial=True), (tame,), order=1)


def test_the_documented_power_exceptions_stay_within_an_ulp():
    # docs/ARCHITECTURE.md, "What compiled code promises": complex `z ** 2` (numpy's operator
    # squares) and `**` of 0-d numpy scalars (the C library's pow) are staged as np.power;
    # np.power itself is numpy's bits.
    rng = np.random.default_rng(7)
    x = rng.standard_normal(40)
    z = x + 0.5j * np.sin(x)
    for _ in range(2):
        np.testing.assert_array_equal(xform.jit(lambda z: np.power(z, 2))(z), np.power(z, 2))
        np.testing.assert_allclose(xform.jit(lambda z: z ** 2)(z), z ** 2, rtol=1e-15, atol=0)
        np.testing.assert_array_equal(xform.jit(lambda x: x ** 2)(x), x ** 2)
    bases, exponents = rng.uniform(0.5, 2.0, 40), rng.uniform(-3.0, 3.0, 40)
    power = xform.jit(lambda b, e: b ** e)
    for b, e in zip(bases, exponents):
        b, e = np.float64(b), np.float64(e)
        np.testing.assert_allclose(power(b, e), b ** e, rtol=1e-15, atol=0)
        assert power(np.array(b), np.array(e)) == np.power(b, e)    # 0-d arrays: np.power
