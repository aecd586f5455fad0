"""Scientific programs as a newcomer writes them (ODE steppers, PDE grids, tables, option
trees, fits, Monte Carlo), run unmodified through xform's transforms: each one a wall or a
wrong value found by trying such programs, checked against eager numpy, finite differences
and autograd where autograd runs the program."""
import math
import warnings

import autograd
import autograd.numpy as anp
import numpy as np
import pytest

import xform
from xform.testing import check_grads
from tests.test_values import central_difference


@pytest.fixture(autouse=True)
def fresh_cache():
    xform.clear_cache()
    yield
    xform.clear_cache()


# -- Monte Carlo: a Jacobian's directions are one evaluation, drawing once -------------------

def exponential_mean(theta, rng):
    """The mean of shifted exponential samples, drawn from the generator passed in."""
    u = rng.uniform(size=500)
    samples = theta[0] - np.log(u) / theta[1] ** 2
    return samples.mean()


def _exponential_mean_hessian(theta, u):
    d22 = -6 * np.mean(np.log(u)) / theta[1] ** 4
    return np.array([[0.0, 0.0], [0.0, d22]])


@pytest.mark.parametrize("transform", [
    xform.hessian,
    lambda f: xform.jacfwd(xform.grad(f)),
    lambda f: xform.jacfwd(xform.jacrev(f)),
])
def test_hessian_of_a_monte_carlo_estimate_draws_once(transform):
    hessian = transform(exponential_mean)
    for theta in [np.array([0.2, 1.5]), np.array([1.0, 0.7])] * 2:
        rng, reference = np.random.default_rng(3), np.random.default_rng(3)
        got = hessian(theta, rng)
        u = reference.uniform(size=500)
        np.testing.assert_allclose(got, _exponential_mean_hessian(theta, u), rtol=1e-12)
        # the generator is where one call of the function leaves it
        assert rng.uniform() == reference.uniform()


def test_jacfwd_of_a_function_drawing_from_a_global_generator():
    state = {"rng": np.random.default_rng(5)}

    def noisy_readout(gains):
        noise = state["rng"].standard_normal(4)
        return gains[0] * noise + gains[1] ** 2 * noise

    jacobian = xform.jacfwd(noisy_readout)
    for gains in [np.array([1.0, 2.0]), np.array([-0.5, 0.3])] * 2:
        state["rng"] = np.random.default_rng(5)
        got = jacobian(gains)
        noise = np.random.default_rng(5).standard_normal(4)
        np.testing.assert_array_equal(got, np.stack([noise, 2 * gains[1] * noise], axis=1))
    # vmap's lanes are calls: each draws its own
    state["rng"] = np.random.default_rng(5)
    lanes = xform.vmap(noisy_readout)(np.ones((2, 2)))
    assert not np.array_equal(lanes[0], lanes[1])


# -- int() of a differentiated value: a step function, zero derivative at every order --------

XS = np.linspace(0, 1, 11)
YS = np.sin(2 * np.pi * XS)


def table_interpolation(xq):
    """Linear interpolation in a table, the cell found with int()."""
    out = 0.0
    for x in xq:
        i = int(x * 10)
        t = (x - XS[i]) / (XS[i + 1] - XS[i])
        out += ((1 - t) * YS[i] + t * YS[i + 1]) * x
    return out


def _table_interpolation_hessian(xq):
    cells = (xq * 10).astype(int)
    slopes = (YS[cells + 1] - YS[cells]) / 0.1
    return np.diag(2 * slopes)


def test_hessian_through_int_of_a_traced_value():
    hessian, hvp = xform.hessian(table_interpolation), xform.grad(table_interpolation)
    for xq in [np.array([0.15, 0.62, 0.87]), np.array([0.05, 0.33, 0.71])] * 2:
        np.testing.assert_allclose(hessian(xq), _table_interpolation_hessian(xq), rtol=1e-12,
                                   atol=1e-12)
        _, tangent = xform.jvp(hvp, (xq,), (np.ones(3),))
        np.testing.assert_allclose(tangent, _table_interpolation_hessian(xq).sum(1),
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(hvp(xq), central_difference(table_interpolation, xq),
                                   rtol=1e-6)


def test_float_of_a_value_a_second_derivative_flows_through_is_still_refused():
    def scaled(x, c):
        return x ** 2 * float(c)    # c is not differentiated by grad: float() is fine there

    assert xform.grad(scaled)(1.5, 2.0) == 6.0
    with pytest.raises(xform.XformError, match=r"float\(\)") as info:
        xform.jvp(lambda c: xform.grad(scaled)(1.5, c), (2.0,), (1.0,))
    assert "float(c)" in str(info.value)


# -- arrays the function makes with np.*_like of a global table, then fills -----------------

SIGNAL = np.sin(np.linspace(0, 6, 32)) + 0.1 * np.cos(np.linspace(0, 40, 32))


def first_order_filter(ab):
    """y[n] = a x[n] + b y[n-1], the output preallocated like the input signal."""
    a, b = ab
    y = np.empty_like(SIGNAL)
    previous = 0.0
    for n, xn in enumerate(SIGNAL):
        previous = a * xn + b * previous
        y[n] = previous
    return np.mean(y ** 2)


def test_preallocated_like_a_global_array_takes_traced_writes():
    grad, jit = xform.grad(first_order_filter), xform.jit(first_order_filter)
    for ab in [np.array([1.0, 0.5]), np.array([0.3, -0.2])] * 2:
        assert jit(ab) == first_order_filter(ab)
        np.testing.assert_allclose(grad(ab), central_difference(first_order_filter, ab),
                                   rtol=1e-7)
    check_grads(first_order_filter, (np.array([0.7, 0.4]),), order=2)
    assert type(SIGNAL) is np.ndarray and SIGNAL[0] == np.sin(0.0) + 0.1   # untouched


def test_zeros_like_and_full_like_of_a_global_array_fill_under_vmap():
    def running_energy(scale):
        energy = np.zeros_like(SIGNAL)
        offset = np.full_like(SIGNAL, 0.5)
        for n in range(1, len(SIGNAL)):
            energy[n] = energy[n - 1] + (scale * SIGNAL[n]) ** 2 + offset[n]
        return energy[-1]

    scales = np.array([0.5, 2.0, -1.0])
    np.testing.assert_allclose(xform.vmap(running_energy)(scales),
                               [running_energy(s) for s in scales], rtol=1e-14)
    np.testing.assert_allclose(xform.vmap(xform.grad(running_energy))(scales),
                               2 * scales * np.sum(SIGNAL[1:] ** 2), rtol=1e-12)


# -- np.polyfit -------------------------------------------------------------------------------

X6 = np.linspace(0, 1, 6)


def quadratic_fit_at_half(y):
    coefficients = np.polyfit(X6, y, 2)
    return np.polyval(coefficients, 0.5) + coefficients[0]


@pytest.mark.parametrize("y", [np.array([0.1, 0.4, 0.9, 1.6, 2.5, 3.6]),
                               np.array([1.0, 0.8, 1.1, 1.9, 3.2, 5.0])])
def test_polyfit_of_traced_data(y):
    np.testing.assert_array_equal(xform.jit(quadratic_fit_at_half)(y), quadratic_fit_at_half(y))
    np.testing.assert_allclose(xform.grad(quadratic_fit_at_half)(y),
                               central_difference(quadratic_fit_at_half, y), rtol=1e-7)
    # linear in y: the fit's gradient is a row of the scaled pseudo-inverse, at every y
    np.testing.assert_allclose(xform.grad(quadratic_fit_at_half)(y),
                               xform.grad(quadratic_fit_at_half)(2 * y + 1), rtol=1e-12)


def test_polyfit_in_the_abscissae_weights_and_full_output():
    y = np.cos(3 * X6)
    weights = np.linspace(1.0, 2.0, 6)

    def fit_residual(x):
        coefficients, residuals, rank, singular, rcond = np.polyfit(x, y, 2, w=weights,
                                                                     full=True)
        return residuals[0] + np.sum(coefficients ** 2)

    x = X6 + 0.01 * np.sin(7 * X6)
    got = xform.jit(lambda x: np.polyfit(x, np.stack([y, y ** 2], 1), 3, w=weights,
                                         full=True))(x)
    want = np.polyfit(x, np.stack([y, y ** 2], 1), 3, w=weights, full=True)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(xform.grad(fit_residual)(x), central_difference(fit_residual, x),
                               rtol=1e-6, atol=1e-9)
    with pytest.raises(xform.UnsupportedError, match="cov"):
        xform.jit(lambda y: np.polyfit(X6, y, 1, cov=True))(y)


# -- np.maximum.accumulate (a running maximum: drawdowns, envelopes) ---------------------------

def max_drawdown(log_returns):
    wealth = np.exp(np.cumsum(log_returns))
    peak = np.maximum.accumulate(wealth)
    return np.max(1 - wealth / peak) + np.sum(np.minimum.accumulate(log_returns) ** 2)


def test_running_maximum_and_minimum():
    rng = np.random.default_rng(0)
    grad, jit = xform.grad(max_drawdown), xform.jit(max_drawdown)
    for _ in range(3):
        r = 0.05 * rng.standard_normal(12)
        assert jit(r) == max_drawdown(r)
        np.testing.assert_allclose(grad(r), central_difference(max_drawdown, r), rtol=1e-6,
                                   atol=1e-9)
        np.testing.assert_allclose(grad(r), autograd.grad(_max_drawdown_autograd)(r),
                                   rtol=1e-12, atol=1e-15)
    for shape, axis in [((5, 9), 1), ((9, 4), 0), ((3, 6, 5), -1), ((1,), 0)]:
        a = rng.standard_normal(shape)
        for ufunc in (np.maximum, np.minimum):
            np.testing.assert_array_equal(
                xform.jit(lambda a: ufunc.accumulate(a, axis=axis))(a),
                ufunc.accumulate(a, axis=axis))
    with_nan = np.array([1.0, np.nan, 0.5, 3.0])
    np.testing.assert_array_equal(xform.jit(np.maximum.accumulate)(with_nan),
                                  np.maximum.accumulate(with_nan))


def _max_drawdown_autograd(log_returns):
    # autograd has no maximum.accumulate: the same running extrema by a loop
    wealth = anp.exp(anp.cumsum(log_returns))
    peaks, lows = [wealth[0]], [log_returns[0]]
    for k in range(1, len(wealth)):
        peaks.append(anp.maximum(peaks[-1], wealth[k]))
        lows.append(anp.minimum(lows[-1], log_returns[k]))
    return anp.max(1 - wealth / anp.stack(peaks)) + anp.sum(anp.stack(lows) ** 2)


# -- np.random.seed inside the function: in program order among the draws ---------------------

def noisy_line_loss(w):
    """A synthetic regression set made with the legacy global generator, reseeded per use."""
    np.random.seed(0)
    x = np.random.randn(50)
    np.random.seed(0)
    noise = 0.1 * np.random.randn(50)      # the same numbers as x: eager numpy reseeded
    y = 2 * x + 1 + noise
    return np.mean((w[0] * x + w[1] - y) ** 2)


def _noisy_line_loss_grad(w):
    x = np.random.RandomState(0).randn(50)
    residual = w[0] * x + w[1] - (2.1 * x + 1)
    return np.array([np.mean(2 * residual * x), np.mean(2 * residual)])


def test_seeding_the_global_generator_between_draws():
    ws = [np.array([0.5, 1.0]), np.array([1.5, -0.3])]
    grad, jit = xform.grad(noisy_line_loss), xform.jit(noisy_line_loss)
    for w in ws * 2:
        assert jit(w) == noisy_line_loss(w)
        np.testing.assert_allclose(grad(w), _noisy_line_loss_grad(w), rtol=1e-12)
        after_call = np.random.rand()
        noisy_line_loss(w)
        assert after_call == np.random.rand()     # the global generator where eager leaves it
    lanes = xform.vmap(noisy_line_loss)(np.stack(ws))
    np.testing.assert_allclose(lanes, [noisy_line_loss(w) for w in ws], rtol=1e-14)
    np.testing.assert_allclose(xform.hessian(noisy_line_loss)(ws[0]),
                               xform.jacfwd(_noisy_line_loss_grad)(ws[0]), rtol=1e-12)


def test_seeding_a_random_state_between_draws_of_a_hessian():
    rs = np.random.RandomState(1)

    def energy(w):
        a = rs.normal(size=2)
        rs.seed(7)
        b = rs.normal(size=2)
        return np.sum(w * a + w ** 3 * b)

    hessian = xform.hessian(energy)
    for w in [1.5, -0.5]:
        rs.seed(1)
        got = hessian(w)
        reference = np.random.RandomState(7)
        np.testing.assert_allclose(got, np.sum(6 * w * reference.normal(size=2)), rtol=1e-14)
        assert rs.rand() == reference.rand()    # the generator where one call leaves it


# -- scipy.integrate.odeint of a scalar state: SciPy's shapes ---------------------------------

def decay_at_end(k):
    import scipy.integrate

    t = np.linspace(0, 2, 11)
    seen = []

    def rhs(y, t):
        seen.append(np.shape(y))
        return -k * y + np.sin(t)
    solution = scipy.integrate.odeint(rhs, 1.0, t)
    assert set(seen) == {(1,)}          # SciPy's func sees the state as a vector
    return solution[-1, 0]              # one column per state


def test_odeint_of_a_scalar_initial_state_has_scipys_shapes():
    grad, jit = xform.grad(decay_at_end), xform.jit(decay_at_end)
    for k in [0.5, 1.5] * 2:
        np.testing.assert_allclose(jit(k), decay_at_end(k), rtol=1e-6)
        np.testing.assert_allclose(grad(k), central_difference(decay_at_end, k, eps=1e-4),
                                   rtol=1e-4)


# -- Python's number protocols on traced scalars, as np.float64 answers them ----------------

PROGRESS = []


def newton_with_progress(a):
    """Newton's square root, logging its progress with format specs."""
    x = a
    err = abs(x * x - a)
    while err > 1e-12:
        x = x - (x * x - a) / (2 * x)
        err = abs(x * x - a)
        PROGRESS.append(f"x={x:.6f} err={err:.2e}")
    return x


def test_progress_lines_format_the_values_of_the_call_being_staged():
    for a in [2.0, 7.0, 2.0]:
        PROGRESS.clear()
        newton_with_progress(a)
        eager_log = list(PROGRESS)
        PROGRESS.clear()
        np.testing.assert_allclose(xform.grad(newton_with_progress)(a), 0.5 / np.sqrt(a),
                                   rtol=1e-12)
        assert PROGRESS in ([], eager_log)      # logged while staged: the eager lines, or none
    PROGRESS.clear()
    assert xform.jit(newton_with_progress)(3.0) == newton_with_progress(3.0)
    assert PROGRESS[0] == "x=2.000000 err=1.00e+00"


def cell_interpolation(x):
    """A periodic table looked up with math.floor, rounded coordinates with round()."""
    n = 10
    cell = math.floor(x * n) % n
    frac = x * n - math.floor(x * n)
    table = np.linspace(0, 1, n + 1) ** 2
    nearest = round(x * n) + math.ceil(x) + math.trunc(-x)
    return (1 - frac) * table[cell] + frac * table[cell + 1] + nearest * round(x, 1)


def test_math_floor_ceil_trunc_and_round_of_differentiated_scalars():
    grad, hessian, jit = (xform.grad(cell_interpolation), xform.hessian(cell_interpolation),
                          xform.jit(cell_interpolation))
    for x in [0.37, 2.61, 0.37, -1.23]:
        assert jit(x) == cell_interpolation(x)
        np.testing.assert_allclose(grad(x), central_difference(cell_interpolation, x),
                                   rtol=1e-6)
        assert hessian(x) == 0.0      # piecewise linear
    with pytest.raises(xform.TypeCheckError, match="round"):
        xform.jit(lambda v: round(v))(np.ones(2))


def sum_of_squares_by_list(x):
    total = 0.0
    for v in x.tolist():
        total += v * v
    return total + np.sum(x)


def test_tolist_of_a_differentiated_array_keeps_its_derivatives():
    for x in [np.array([0.5, 1.0, 2.0]), np.array([1.5, -0.3, 0.1])]:
        np.testing.assert_allclose(xform.grad(sum_of_squares_by_list)(x), 2 * x + 1,
                                   rtol=1e-15)
        assert xform.jit(sum_of_squares_by_list)(x) == sum_of_squares_by_list(x)
        np.testing.assert_allclose(xform.vmap(sum_of_squares_by_list)(np.stack([x, 2 * x])),
                                   [sum_of_squares_by_list(x), sum_of_squares_by_list(2 * x)])
    rows = xform.grad(lambda m: sum(sum(v * v for v in row) for row in m.tolist()))
    np.testing.assert_allclose(rows(np.array([[1.5, -0.3], [0.1, 4.0]])),
                               [[3.0, -0.6], [0.2, 8.0]], rtol=1e-15)


def skip_the_pole(x):
    """Sum of 1/(v - 1) over the entries, skipping those at the pole (math.isclose)."""
    total = 0.0
    for v in x:
        if math.isclose(v, 1.0, rel_tol=1e-9, abs_tol=1e-12):
            continue
        total += 1.0 / (v - 1.0)
    return total


def test_math_isclose_of_differentiated_values():
    grad = xform.grad(skip_the_pole)
    for x in [np.array([0.5, 1.0, 2.0]), np.array([1.5, -0.3, 0.1]), np.array([1.0, 3.0, 1.0])]:
        pole = np.isclose(x, 1.0, rtol=0, atol=1e-12)
        want = np.where(pole, 0.0, -1.0 / np.where(pole, 2.0, x - 1.0) ** 2)
        np.testing.assert_allclose(grad(x), want, rtol=1e-14)
        np.testing.assert_allclose(grad(x), autograd.grad(_skip_the_pole_by_abs)(x),
                                   rtol=1e-14)


def _skip_the_pole_by_abs(x):
    total = 0.0
    for v in x:
        if abs(v - 1.0) <= 1e-12:
            continue
        total = total + 1.0 / (v - 1.0)
    return total


@pytest.mark.parametrize("transform, expected", [(xform.jit, 1.0), (xform.grad, [0.0, -1.0])])
def test_a_failed_guard_runs_nothing_of_its_path(transform, expected):
    # compiled code whose guard fails must not have computed the path's later work first:
    # 1 / (v - 1) at v = 1 warns (raises, as errors) where eager numpy skips it
    fun = transform(_skip_the_pole_by_abs)
    for _ in range(2):      # the second call compiles the path of v != 1
        fun(np.array([0.5, 2.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(fun(np.array([1.0, 2.0])), expected)


# -- np.vectorize of a Python function with branches ------------------------------------------

@np.vectorize
def _soft_threshold(v, level):
    if v > level:
        return v - level
    if v < -level:
        return v + level
    return 0.0


def lasso_penalty(x):
    return np.sum(_soft_threshold(x, 0.5) ** 2) + np.sum(np.vectorize(abs)(x) * x)


def test_vectorize_of_a_branching_python_function():
    grad, jit = xform.grad(lasso_penalty), xform.jit(lasso_penalty)
    for x in [np.array([[0.3, 1.2], [-0.9, 0.7]]), np.array([[2.0, -0.2], [0.1, -1.5]])] * 2:
        assert jit(x) == lasso_penalty(x)
        np.testing.assert_allclose(grad(x), central_difference(lasso_penalty, x), rtol=1e-7)
    typed = np.vectorize(lambda a, b: a * b + 1, otypes=[np.float32])
    x = np.array([[0.3, 1.2], [-0.9, 0.7]])
    got = xform.jit(lambda x: typed(x, np.arange(2)))(x)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, typed(x, np.arange(2)))


# -- bootstrap resampling: choice and permutation of the data, differentiable in it ----------

def bootstrap_spread(data, rng):
    """The spread of bootstrap means, resampled from the generator passed in."""
    means = []
    for _ in range(20):
        sample = rng.choice(data, size=len(data), replace=True)
        means.append(sample.mean())
    means = np.sort(means)
    shuffled = rng.permutation(data)
    return means[-2] - means[1] + shuffled[0] * 0.1


def test_bootstrap_with_a_generator_passed_in_or_made_inside():
    data = np.array([0.2, 1.1, -0.4, 0.8, 2.0, 0.3])
    grad = xform.grad(bootstrap_spread)
    jit = xform.jit(bootstrap_spread, static_argnums=1)
    for seed in [4, 5, 4]:
        want = bootstrap_spread(data, np.random.default_rng(seed))
        assert jit(data, np.random.default_rng(seed)) == want
        rng = np.random.default_rng(seed)
        got = grad(data, rng)
        step = lambda d: bootstrap_spread(d, np.random.default_rng(seed))
        np.testing.assert_allclose(got, central_difference(step, data), rtol=1e-7, atol=1e-9)
        reference = np.random.default_rng(seed)
        bootstrap_spread(data, reference)
        assert rng.random() == reference.random()      # drawn once, as eager numpy draws
    made_inside = xform.grad(lambda d: bootstrap_spread(d, np.random.default_rng(4)))
    np.testing.assert_array_equal(made_inside(data), grad(data, np.random.default_rng(4)))


def test_choice_and_permutation_along_an_axis_draw_what_numpy_draws():
    table = np.arange(12.0).reshape(3, 4)
    state = {}

    def picks(a):
        r = state["rng"]
        return [r.choice(a, 5, axis=1), r.choice(a, 2, replace=False, shuffle=False),
                r.permutation(a, axis=1), r.permutation(a[0]),
                r.choice(a[1], 4, p=np.full(4, 0.25)), r.choice(a, size=(2, 2))]

    jit = xform.jit(picks)
    for seed in [3, 8]:
        state["rng"] = np.random.default_rng(seed)
        got = jit(table)
        after = state["rng"].random()
        state["rng"] = np.random.default_rng(seed)
        for g, w in zip(got, picks(table)):
            np.testing.assert_array_equal(g, w)
        assert after == state["rng"].random()
    legacy = np.random.RandomState(2)
    weights = xform.grad(lambda x: np.sum(legacy.choice(x, 3) * legacy.permutation(x)[:3]))
    legacy.seed(2)
    got = weights(np.arange(1.0, 6.0))
    legacy.seed(2)
    chosen, order = legacy.choice(5, 3), legacy.permutation(5)
    want = np.zeros(5)
    np.add.at(want, chosen, np.arange(1.0, 6.0)[order[:3]])
    np.add.at(want, order[:3], np.arange(1.0, 6.0)[chosen])
    np.testing.assert_array_equal(got, want)


def test_ndarray_methods_of_traced_arrays():
    x = np.array([3.0, 1.0, 2.5, 0.2])
    methods = [lambda x: x.take([2, 0]), lambda x: x.argsort(), lambda x: x.round(1) * x,
               lambda x: x.nonzero()[0], lambda x: np.sort(x).searchsorted(1.5),
               lambda x: x.compress(x > 1), lambda x: x.take(1)]
    for method in methods:
        got, want = xform.jit(method)(x), method(x)
        np.testing.assert_array_equal(got, want)
        assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(xform.grad(lambda x: np.sum(x.take([2, 0, 2])))(x),
                                  [0.0, 0.0, 2.0, 0.0] + np.array([1.0, 0, 0, 0]))


# -- SciPy's interpolators on grids the function makes -----------------------------------------

def spline_energy(y):
    import scipy.interpolate

    x = np.linspace(0, 1, 6)        # knots made in the function: constants
    spline = scipy.interpolate.CubicSpline(x, y)
    return np.sum(spline(np.linspace(0, 1, 17)) ** 2) + spline(0.33, 1)


def test_cubic_spline_with_knots_made_by_linspace_in_the_function():
    for y in [np.array([0.0, 0.8, 0.9, 0.1, -0.5, 0.3]), np.array([1.0, 0.2, -0.4, 0.6, 0, 0.9])]:
        np.testing.assert_allclose(xform.jit(spline_energy)(y), spline_energy(y), rtol=1e-13)
        np.testing.assert_allclose(xform.grad(spline_energy)(y),
                                   central_difference(spline_energy, y), rtol=1e-6)


def test_regular_grid_interpolator_points_made_in_the_function_and_vector_queries():
    import scipy.interpolate

    def lookup(values, query):
        grid = (np.linspace(0, 1, 3), np.linspace(0, 2, 4))
        return scipy.interpolate.RegularGridInterpolator(grid, values)(query)

    values = np.arange(12.0).reshape(3, 4) ** 1.5
    for query in ([0.3, 0.5], np.array([[0.3, 0.5], [0.1, 1.2]]), np.array([[[0.3, 0.5]]])):
        want = lookup(values, query)
        by_values = xform.jit(lambda v: lookup(v, query))(values)
        by_points = xform.jit(lambda q: lookup(values, q))(np.asarray(query))
        assert by_values.shape == by_points.shape == want.shape
        np.testing.assert_allclose(by_values, want, rtol=1e-14)
        np.testing.assert_allclose(by_points, want, rtol=1e-14)
    line = xform.jit(lambda y: scipy.interpolate.RegularGridInterpolator(
        (np.linspace(0, 1, 5),), y)([0.3]))
    assert line(np.arange(5.0)).shape == (1,)


def test_a_scipy_function_without_an_xform_version_names_itself():
    import scipy.signal

    # (savgol_filter and periodogram, named here once, stage now)
    with pytest.raises(xform.UnsupportedError, match="scipy.signal.stft"):
        xform.grad(lambda y: np.abs(scipy.signal.stft(y, nperseg=4)[2]).sum())(
            np.linspace(0, 1, 6))


# -- image filters: scipy.signal.convolve2d / correlate2d with every boundary ------------------

def test_convolve2d_and_correlate2d_match_scipy_and_differentiate():
    import itertools

    import scipy.signal

    rng = np.random.default_rng(0)
    for (h, w), (kh, kw) in [((9, 8), (3, 3)), ((7, 10), (2, 4)), ((6, 6), (6, 6))]:
        image, kernel = rng.standard_normal((h, w)), rng.standard_normal((kh, kw))
        for filter2d, mode, boundary, fill in itertools.product(
                (scipy.signal.convolve2d, scipy.signal.correlate2d), ("full", "same", "valid"),
                ("fill", "symm", "wrap"), (0, 1.5)):
            def apply(a, b):
                return filter2d(a, b, mode=mode, boundary=boundary, fillvalue=fill)
            want = apply(image, kernel)
            got = xform.jit(apply)(image, kernel)
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)

    def blur_energy(kernel):
        blurred = scipy.signal.convolve2d(image, kernel, mode="same", boundary="symm")
        return np.sum(blurred ** 2)

    check_grads(blur_energy, (kernel,), order=2)


# -- np.where(condition) and np.polynomial's classes -------------------------------------------

def positive_energy(x):
    total = 0.0
    for i in np.where(x > 0)[0]:
        total += x[i] ** 2
    rows, cols = np.where(np.outer(x, x) < 0)
    return total + np.sum(x[rows] * x[cols])


def test_where_with_one_argument_is_nonzero():
    grad, jit = xform.grad(positive_energy), xform.jit(positive_energy)
    for x in [np.array([2.0, -1.0, 0.5, 3.0, -0.2]), np.array([-1.0, 0.3, 0.7, -2.0, 1.1])] * 2:
        assert jit(x) == positive_energy(x)
        np.testing.assert_allclose(grad(x), central_difference(positive_energy, x), rtol=1e-8)
        np.testing.assert_allclose(grad(x), autograd.grad(positive_energy)(x), rtol=1e-14)


def fitted_at_half(y):
    x = np.linspace(0, 1, 6)
    return np.polynomial.Polynomial.fit(x, y, 2)(0.5)


def test_polynomial_fit_class_of_traced_data():
    for y in [np.arange(6.0) ** 1.5, np.array([1.0, 0.8, 1.1, 1.9, 3.2, 5.0])]:
        np.testing.assert_allclose(xform.jit(fitted_at_half)(y), fitted_at_half(y), rtol=1e-14)
        np.testing.assert_allclose(xform.grad(fitted_at_half)(y),
                                   central_difference(fitted_at_half, y), rtol=1e-7)


def test_flat_reads_and_writes_of_a_grid_reach_the_grid():
    def scatter(values):
        grid = np.zeros((3, 4))
        grid.T.flat[[0, 5, 11]] = values        # through a transposed view, as numpy's
        grid.flat[2:4] = values[:2] * 2
        return np.sum(grid ** 2) + grid.flat[7] + sum(list(grid.flat)[:3])

    for values in [np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 0.25])]:
        assert xform.jit(scatter)(values) == scatter(values)
        np.testing.assert_allclose(xform.grad(scatter)(values),
                                   central_difference(scatter, values), rtol=1e-7)


def test_periodic_interpolation_of_angles():
    rng = np.random.default_rng(0)
    xp, fp = rng.uniform(0, 360, 7), rng.standard_normal(7)
    x = rng.uniform(-400, 800, 20)
    for period in (360, -360.0, 90):
        def wrapped(x, xp, fp):
            return np.interp(x, xp, fp, period=period)
        np.testing.assert_array_equal(xform.jit(wrapped)(x, xp, fp), wrapped(x, xp, fp))

    def energy(fp):
        return np.sum(np.interp(x, xp, fp, period=360) ** 2)
    check_grads(energy, (fp,), order=2)
    heading = xform.grad(lambda q: np.sum(np.interp(q, xp, fp, period=360.0)))
    np.testing.assert_allclose(heading(np.array([10.0, 200.0])),
                               central_difference(lambda q: np.sum(np.interp(
                                   q, xp, fp, period=360.0)), np.array([10.0, 200.0])),
                               rtol=1e-6)


def slope_of_fit(y):
    """The fitted quadratic's slope and area, with numpy.polynomial's classes."""
    x = np.linspace(0, 1, 6)
    fit = np.polynomial.Polynomial.fit(x, y, 2)
    area = np.polynomial.Chebyshev.fit(x, y, 3).integ(lbnd=0.0)(1.0)
    return fit.deriv()(0.3) + area + np.polynomial.legendre.legder(y, 2).sum()


def test_numpy_polynomial_derivatives_and_integrals_of_traced_coefficients():
    for y in [np.array([1.0, 0.5, -0.3, 0.2, 0.8, 1.1]), np.arange(6.0) ** 1.5]:
        np.testing.assert_allclose(xform.jit(slope_of_fit)(y), slope_of_fit(y), rtol=1e-12)
        np.testing.assert_allclose(xform.grad(slope_of_fit)(y),
                                   central_difference(slope_of_fit, y), rtol=1e-6, atol=1e-8)


def test_divmod_of_traced_scalars_and_the_statistics_module():
    def phase(x):
        turns, angle = divmod(x[0], 0.3)
        return angle * 2 + divmod(2.0, x[1])[0] * x[1] + turns

    x = np.array([0.7, 0.9])
    assert xform.jit(phase)(x) == phase(x)
    np.testing.assert_allclose(xform.grad(phase)(x), central_difference(phase, x), rtol=1e-7)

    def centre(x):
        import statistics
        return statistics.mean([x[0], x[1]]) * x[0]

    with pytest.raises(xform.TypeCheckError, match="np.mean") as info:
        xform.grad(centre)(x)
    assert "test_programs_science.py" in str(info.value)


def pairwise_energy(positions):
    """Pairwise soft-core energy from np.subtract.outer differences, with np.ndenumerate."""
    dx = np.subtract.outer(positions, positions)
    energy = 0.0
    for (i, j), d in np.ndenumerate(dx):
        if i < j:
            energy += 1.0 / (1.0 + d ** 2)
    return energy + np.sum(np.multiply.outer(positions, positions[:2]))


def test_ufunc_outer_and_ndenumerate_of_traced_arrays():
    for x in [np.array([0.0, 0.8, 2.1]), np.array([1.5, -0.3, 0.2])]:
        assert xform.jit(pairwise_energy)(x) == pairwise_energy(x)
        np.testing.assert_allclose(xform.grad(pairwise_energy)(x),
                                   central_difference(pairwise_energy, x), rtol=1e-7)
        np.testing.assert_allclose(xform.grad(pairwise_energy)(x),
                                   autograd.grad(_pairwise_energy_autograd)(x), rtol=1e-14)


def _pairwise_energy_autograd(positions):
    dx = positions[:, None] - positions[None, :]
    n = len(positions)
    energy = sum(1.0 / (1.0 + dx[i, j] ** 2) for i in range(n) for j in range(i + 1, n))
    return energy + anp.sum(positions[:, None] * positions[None, :2])


def ar_log_likelihood(autocovariance):
    """A Gaussian AR log-likelihood from the Toeplitz covariance of a stationary series."""
    import scipy.linalg

    series = np.array([0.3, -0.1, 0.4, 0.2])
    cov = scipy.linalg.toeplitz(autocovariance)
    sign, logdet = np.linalg.slogdet(cov)
    corner = scipy.linalg.hankel(autocovariance[:2], autocovariance[1:3])[0, 0]
    mix = scipy.linalg.circulant(autocovariance[:3]) + corner
    return -0.5 * (logdet + series @ np.linalg.solve(cov, series)) + np.trace(mix)


def test_structured_matrices_of_scipy_linalg():
    import scipy.linalg

    for gamma in [np.array([1.0, 0.5, 0.2, 0.05]), np.array([2.0, -0.3, 0.1, 0.0])]:
        np.testing.assert_allclose(xform.jit(ar_log_likelihood)(gamma), ar_log_likelihood(gamma),
                                   rtol=1e-14)
        np.testing.assert_allclose(xform.grad(ar_log_likelihood)(gamma),
                                   central_difference(ar_log_likelihood, gamma), rtol=1e-7)
    c, r, z = np.array([1.0, 2.0, 3.0]), np.array([1.0, 4.0, 5.0, 6.0]), np.array([1.0, 2 + 3j])
    for build in (lambda c, r: scipy.linalg.toeplitz(c, r), lambda c, r: scipy.linalg.toeplitz(c),
                  lambda c, r: scipy.linalg.hankel(c, r), lambda c, r: scipy.linalg.hankel(c),
                  lambda c, r: scipy.linalg.circulant(c)):
        got, want = xform.jit(build)(c, r), build(c, r)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(xform.jit(scipy.linalg.toeplitz)(z), scipy.linalg.toeplitz(z))


def moving_average_residual(signal):
    """A 5-point moving average by numpy's sliding windows, and a 2-D box filter."""
    from numpy.lib.stride_tricks import sliding_window_view

    smooth = sliding_window_view(signal, 5).mean(axis=-1)
    boxes = sliding_window_view(signal.reshape(4, 6), (2, 3)).sum(axis=(-2, -1))
    return np.sum((signal[2:-2] - smooth) ** 2) + np.sum(boxes ** 2) * 1e-3


def test_sliding_window_moving_averages():
    from numpy.lib.stride_tricks import sliding_window_view

    for signal in [np.sin(np.linspace(0, 3, 24)), np.linspace(-1, 1, 24) ** 3]:
        np.testing.assert_allclose(xform.jit(moving_average_residual)(signal),
                                   moving_average_residual(signal), rtol=1e-14)
        np.testing.assert_allclose(xform.grad(moving_average_residual)(signal),
                                   central_difference(moving_average_residual, signal),
                                   rtol=1e-6, atol=1e-9)
    grid = np.arange(24.0).reshape(4, 6)
    for window, axis in [(3, None), ((2, 3), None), (3, 1), ((2, 2), (1, 0)), (2, -2)]:
        def view(x):
            return sliding_window_view(x if axis is not None or window != 3 else x[0],
                                       window, axis=axis)
        np.testing.assert_array_equal(xform.jit(view)(grid), view(grid))
