"""scipy.interpolate inside transformed functions (xform/scipy/interpolate.py,
xform/rules/interpolate.py): CubicSpline, make_interp_spline, interp1d, PchipInterpolator,
RegularGridInterpolator and griddata (linear), differentiable in the data values and the
query points. Values against SciPy's; derivatives against the interpolants' own derivatives
(closed forms of a spline in its query point), SciPy's interpolant of the perturbed data
(linear in the data: exact), and finite differences; under grad, jvp, vmap, second order.
Values of the 1-D interpolators are SciPy's own; griddata's and RegularGridInterpolator's of
traced values are a weight matrix times the values (SciPy's up to rounding)."""
import numpy as np
import pytest
import scipy.interpolate as si

import xform
from xform.errors import UnsupportedError
from xform.testing import check_grads

X = np.linspace(0.0, 1.0, 7)
QUERY = np.array([0.05, 0.33, 0.71, 0.98])

ONE_D = {
    "CubicSpline": lambda x, y: si.CubicSpline(x, y),
    "CubicSpline natural": lambda x, y: si.CubicSpline(x, y, bc_type="natural"),
    "make_interp_spline": lambda x, y: si.make_interp_spline(x, y),
    "make_interp_spline k=1": lambda x, y: si.make_interp_spline(x, y, k=1),
    "interp1d": lambda x, y: si.interp1d(x, y),
    "interp1d cubic": lambda x, y: si.interp1d(x, y, kind="cubic"),
    "interp1d quadratic": lambda x, y: si.interp1d(x, y, kind="quadratic"),
    "PchipInterpolator": lambda x, y: si.PchipInterpolator(x, y),
}


@pytest.mark.parametrize("name", sorted(ONE_D))
def test_one_dimensional_in_data_and_query(name):
    build = ONE_D[name]

    def f(a, q):
        return build(X, np.sin(3 * a * X) + X ** 2)(q)
    a = 0.9
    np.testing.assert_array_equal(xform.jit(f)(a, QUERY), f(a, QUERY))   # SciPy's own values
    check_grads(f, (a, QUERY), order=2 if "PchipInterpolator" not in name else 1,
                rtol=1e-6, atol=1e-8)
    # in the query points: the interpolant's own derivative
    if name.startswith(("CubicSpline", "make_interp_spline")):
        own = build(X, np.sin(3 * a * X) + X ** 2).derivative()(QUERY)
        np.testing.assert_allclose(xform.jacfwd(f, 1)(a, QUERY), np.diag(own), rtol=1e-12,
                                   atol=1e-12)
    queries = np.stack([QUERY, QUERY[::-1] * 0.9])
    np.testing.assert_allclose(xform.vmap(f, (None, 0))(a, queries),
                               np.stack([f(a, q) for q in queries]), rtol=1e-14, atol=1e-15)
    scales = np.array([0.5, 0.9, 1.4])
    np.testing.assert_allclose(xform.vmap(xform.jacrev(f), (0, None))(scales, QUERY),
                               np.stack([xform.jacrev(f)(v, QUERY) for v in scales]),
                               rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("name", ["CubicSpline", "interp1d", "make_interp_spline"])
def test_linear_in_the_data_exactly(name):
    """The jacobian in the data is SciPy's interpolant of each unit vector."""
    build = ONE_D[name]
    y = np.cos(2 * X)
    jacobian = xform.jacrev(lambda y: build(X, y)(QUERY))(y)
    want = np.stack([build(X, e)(QUERY) for e in np.eye(len(X))], 1)
    np.testing.assert_allclose(jacobian, want, rtol=1e-13, atol=1e-14)


def test_multidimensional_data_and_axis():
    y = np.stack([np.sin(X), np.cos(X), X ** 3], 0)   # interpolated along axis 1

    def f(scale, q):
        return si.CubicSpline(X, scale * y, axis=1)(q)
    want = si.CubicSpline(X, 1.5 * y, axis=1)(QUERY)
    assert xform.jit(f)(1.5, QUERY).shape == want.shape == (3, 4)
    np.testing.assert_array_equal(xform.jit(f)(1.5, QUERY), want)
    check_grads(f, (1.5, QUERY), order=1, rtol=1e-6, atol=1e-8)


def test_derivative_of_a_traced_spline_and_concrete_spline_at_traced_points():
    def slope(a):
        return np.sum(si.CubicSpline(X, np.sin(a * X)).derivative()(QUERY * a))
    check_grads(slope, (1.2,), order=2, rtol=1e-6, atol=1e-8)
    spline = si.CubicSpline(X, np.sin(X))        # made outside: concrete data
    second = xform.grad(xform.grad(lambda q: spline(q)))(0.4)
    assert second == pytest.approx(spline(0.4, 2), rel=1e-12)
    curve = si.make_interp_spline(X, np.sin(X), k=3)
    assert xform.grad(lambda q: curve(q))(0.4) == pytest.approx(curve(0.4, 1), rel=1e-12)
    table = si.interp1d(X, np.sin(X))
    assert xform.grad(lambda q: table(q))(0.4) == \
        pytest.approx((np.sin(X[3]) - np.sin(X[2])) / (X[3] - X[2]), rel=1e-12)


def test_pchip_matches_scipy_and_differences():
    y = np.array([0.0, 0.2, 0.1, 0.5, 0.9, 0.95, 1.4])

    def f(y):
        return si.PchipInterpolator(X, y)(QUERY)
    np.testing.assert_array_equal(xform.jit(f)(y), f(y))
    step = 1e-7
    for i in range(len(X)):
        e = np.eye(len(X))[i] * step
        np.testing.assert_allclose(xform.jacfwd(f)(y)[:, i], (f(y + e) - f(y - e)) / (2 * step),
                                   rtol=1e-6, atol=1e-8)


GRID = (np.linspace(0, 1, 5), np.linspace(0, 2, 4))
POINTS = np.array([[0.33, 0.5], [0.71, 1.2], [0.1, 1.9]])


@pytest.mark.parametrize("method", ["linear", "nearest", "cubic"])
def test_regular_grid_in_points(method):
    values = np.sin(GRID[0][:, None] + 2 * GRID[1][None, :])
    interpolator = si.RegularGridInterpolator(GRID, values, method=method)

    def f(points):
        return interpolator(points)
    np.testing.assert_array_equal(xform.jit(f)(POINTS), f(POINTS))
    check_grads(f, (POINTS,), order=2, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("method", ["linear", "slinear", "cubic_legacy"])
def test_regular_grid_in_values(method):
    grid = (np.linspace(0, 1, 7), np.linspace(0, 2, 6))

    def f(a, points):
        values = np.sin(a * grid[0][:, None] + 2 * grid[1][None, :])
        return si.RegularGridInterpolator(grid, values, method=method)(points)
    np.testing.assert_allclose(xform.jit(f)(0.8, POINTS), f(0.8, POINTS), rtol=1e-14)
    check_grads(lambda a: f(a, POINTS), (0.8,), order=2, rtol=1e-6, atol=1e-8)


def test_regular_grid_methods_refused_on_traced_values():
    def f(a, method):
        values = np.sin(a * GRID[0][:, None] + 2 * GRID[1][None, :])
        return si.RegularGridInterpolator(GRID, values, method=method)(POINTS)
    for method in ("cubic", "pchip"):     # an iterative solve; not linear in the values
        with pytest.raises(UnsupportedError, match=method):
            xform.grad(lambda a: np.sum(f(a, method)))(0.8)
    legacy = si.RegularGridInterpolator(GRID, np.ones((5, 4)), method="cubic_legacy")
    with pytest.raises(UnsupportedError, match="query points"):
        xform.grad(lambda p: np.sum(legacy(p)))(POINTS)


def test_regular_grid_in_values_and_points():
    def f(a, points):
        values = np.sin(a * GRID[0][:, None] + 2 * GRID[1][None, :])
        return si.RegularGridInterpolator(GRID, values)(points)
    np.testing.assert_allclose(xform.jit(f)(0.8, POINTS), f(0.8, POINTS), rtol=1e-14)
    check_grads(f, (0.8, POINTS), order=2, rtol=1e-6, atol=1e-8)
    points = np.stack([POINTS, POINTS * 0.5])
    np.testing.assert_allclose(xform.vmap(f, (None, 0))(0.8, points),
                               np.stack([f(0.8, p) for p in points]), rtol=1e-14)


def test_griddata_linear():
    rng = np.random.default_rng(0)
    points = rng.uniform(0, 1, (12, 2))
    points = np.concatenate([points, [[0, 0], [1, 0], [0, 1], [1, 1]]])
    xi = np.array([[0.3, 0.4], [0.6, 0.7], [0.25, 0.8]])

    def f(a, xi):
        return si.griddata(points, np.sin(a * points[:, 0]) + points[:, 1] ** 2, xi)
    np.testing.assert_allclose(xform.jit(f)(1.3, xi), f(1.3, xi), rtol=1e-14)
    check_grads(f, (1.3, xi), order=1, rtol=1e-6, atol=1e-8)
    xis = np.stack([xi, xi[::-1]])
    np.testing.assert_allclose(xform.vmap(f, (None, 0))(1.3, xis),
                               np.stack([f(1.3, v) for v in xis]), rtol=1e-14)


def test_the_rest_of_a_traced_spline_is_refused_by_name():
    with pytest.raises(UnsupportedError, match="integrate"):
        xform.grad(lambda a: si.CubicSpline(X, a * X).integrate(0, 1))(1.0)
    with pytest.raises(UnsupportedError, match="traced knots"):
        xform.grad(lambda a: si.CubicSpline(a * X, X)(0.5))(1.0)


def test_scipy_untouched_outside_staging():
    spline = si.CubicSpline(X, np.sin(X))
    before = spline(QUERY)
    xform.grad(lambda a: np.sum(si.CubicSpline(X, a * X)(QUERY)))(1.0)
    np.testing.assert_array_equal(si.CubicSpline(X, np.sin(X))(QUERY), before)
    assert type(si.CubicSpline(X, np.sin(X))) is si.CubicSpline


def test_the_compiled_tier_agrees_with_the_first_call():
    def f(a):
        return np.sum(si.PchipInterpolator(X, np.sin(a * X))(a * QUERY) ** 2)
    for transform in (xform.jit, xform.grad, xform.hessian):
        function = transform(f)
        calls = [function(0.9) for _ in range(3)]
        assert calls[0] == calls[1] == calls[2]
