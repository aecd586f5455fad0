"""Statistics programs as a newcomer writes them (likelihoods, standardised features, SciPy's
helpers inside a loss), run unmodified through xform's transforms: each one a wall or a wrong
value found by trying such programs, checked against eager numpy/SciPy and finite
differences."""
import numpy as np
import pytest
import scipy.stats as st

import xform
from xform.testing import check_grads
from tests.source_lines import assert_points_at
from tests.test_values import central_difference


@pytest.fixture(autouse=True)
def fresh_cache():
    xform.clear_cache()
    yield
    xform.clear_cache()


_RNG = np.random.RandomState(3)
_FEATURES = _RNG.standard_normal((30, 2))
_OBSERVED = _RNG.standard_normal(30) + 1.0


def assert_matches_eager_and_differences(program, points, value_rtol=0.0, atol=1e-8):
    """One jit and one grad, called alternately at each point twice: the values equal eager
    SciPy's (to `value_rtol`), the gradients central differences (to `atol`)."""
    jit, grad = xform.jit(program), xform.grad(program)
    for point in points + points:
        np.testing.assert_allclose(jit(point), program(point), rtol=value_rtol)
        np.testing.assert_allclose(grad(point), central_difference(program, point),
                                   rtol=1e-6, atol=atol)


# -- SciPy's array-API code writes into its own intermediates (xpx.at(z, mask).set(nan)): its
# -- helper refused a Tracer with a bare "Can't update read-only array" (zscore, zmap, iqr)

def standardized_regression(theta):
    """Standardise a linear predictor, then a squared loss against standardised data."""
    z = st.zscore(_FEATURES @ theta + 0.5 * _OBSERVED ** 2)
    target = st.zmap(_OBSERVED, _OBSERVED[:20], ddof=1)
    return np.sum((z - target) ** 2 * np.linspace(0.5, 1.5, 30))


def test_zscore_and_zmap_inside_a_loss_match_scipy_and_finite_differences():
    points = [np.array([0.2, -0.4]), np.array([1.0, 0.5])]
    jit, grad = xform.jit(standardized_regression), xform.grad(standardized_regression)
    for theta in points + points:
        assert jit(theta) == standardized_regression(theta)
        assert np.array_equal(xform.value_and_grad(standardized_regression)(theta)[1],
                              grad(theta))
    check_grads(standardized_regression, (points[0],), order=2)


def test_zscore_of_a_constant_slice_is_nan_as_in_scipy():
    rows = np.array([[1.0, 2.0, 3.0], [4.0, 4.0, 4.0]])

    def standardized(scale):
        return st.zscore(scale * rows, axis=1, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        np.testing.assert_array_equal(xform.jit(standardized)(2.0), standardized(2.0))


def test_zscore_omitting_nans_matches_scipy():
    data = np.array([0.3, np.nan, 1.2, -0.7, 2.0])

    def standardized(shift):
        return st.zscore(data + shift, nan_policy="omit")
    np.testing.assert_array_equal(xform.jit(standardized)(0.5), standardized(0.5))
    with pytest.raises(ValueError, match="nan"):
        xform.jit(lambda s: st.zscore(data + s, nan_policy="raise"))(0.5)


def robust_fit(beta):
    """A residual scale by the interquartile range, as a robust regression divides by."""
    residuals = _OBSERVED - beta[0] - beta[1] * _FEATURES[:, 0]
    scale = st.iqr(residuals) / 1.349
    return np.sum(np.log1p((residuals / scale) ** 2)) + np.log(scale)


def test_iqr_scaled_loss_matches_scipy_and_finite_differences():
    assert_matches_eager_and_differences(robust_fit, [np.array([0.5, 1.0]),
                                                      np.array([-0.3, 0.2])])


# -- scipy.stats distributions of survival and hierarchical models: "not supported" before ----

_TIMES = np.array([0.4, 1.3, 2.2, 0.9, 3.1, 0.2, 1.8])
_EVENT = np.array([True, True, False, True, False, True, True])


def censored_nll(distribution):
    """A survival model's negative log-likelihood: events by their density, censored times
    by the survival function, in log shape and log scale."""
    def nll(params):
        shape, scale = np.exp(params)
        observed = distribution.logpdf(_TIMES, shape, scale=scale)
        censored = distribution.logsf(_TIMES, shape, scale=scale)
        return -np.sum(np.where(_EVENT, observed, censored))
    return nll


weibull_censored_nll = censored_nll(st.weibull_min)


def test_weibull_survival_likelihood_matches_scipy_and_finite_differences():
    points = [np.array([0.3, 0.1]), np.array([-0.4, 0.6])]
    assert_matches_eager_and_differences(weibull_censored_nll, points, value_rtol=1e-14)
    check_grads(weibull_censored_nll, (points[1],), order=2)


def hierarchical_log_posterior(params):
    """Scale priors (half-normal, half-Cauchy, inverse gamma), Gumbel and Pareto terms, and
    Bernoulli and geometric counts, from a dict of parameters."""
    theta = {"mu": params[0], "tau": np.exp(params[1]), "sigma": np.exp(params[2])}
    lp = st.halfnorm.logpdf(theta["tau"], scale=2.0) + st.halfcauchy.logpdf(theta["sigma"])
    lp += st.invgamma.logpdf(theta["sigma"] ** 2, 3.0, scale=2.0)
    lp += np.sum(st.gumbel_r.logpdf(_OBSERVED[:5], loc=theta["mu"], scale=theta["tau"]))
    lp += st.pareto.logsf(1.5 + theta["sigma"], 2.5)
    p = 1 / (1 + np.exp(-theta["mu"]))
    lp += np.sum(st.bernoulli.logpmf([0, 1, 1, 0], p)) + np.sum(st.geom.logpmf([1, 3, 2], p))
    return lp


def test_hierarchical_priors_match_scipy_and_finite_differences():
    points = [np.array([0.3, 0.1, -0.2]), np.array([-0.5, 0.4, 0.3])]
    jit = xform.jit(hierarchical_log_posterior)
    for params in points + points:
        np.testing.assert_allclose(jit(params), hierarchical_log_posterior(params), rtol=1e-13)
    check_grads(hierarchical_log_posterior, (points[0],), order=2)


# -- a scalar boolean index (SciPy's apply_where: x[cond], x[~cond] of 0-d values) ---------

def dispersion_penalty(theta):
    """A coefficient of variation and a trimmed mean of a fitted curve, as penalties."""
    fitted = theta[0] + theta[1] * _FEATURES[:, 0] + 3.0
    return st.variation(fitted) ** 2 + st.tmean(fitted, (2.0, 4.5)) + st.tmean(fitted * theta[1])


def test_variation_and_tmean_match_scipy_and_finite_differences():
    points = [np.array([0.2, 0.5]), np.array([-0.3, 0.9])]
    assert_matches_eager_and_differences(dispersion_penalty, points, value_rtol=1e-14)
    vmapped = xform.vmap(dispersion_penalty)(np.stack(points))
    np.testing.assert_allclose(vmapped, [dispersion_penalty(theta) for theta in points],
                               rtol=1e-14)


@pytest.mark.parametrize("mask", [True, False, np.True_, np.array(False)])
def test_a_scalar_boolean_index_reads_and_writes_as_numpy(mask):
    def program(x):
        y = x * 2.0
        picked = y[mask]            # a copy with a new axis of one element, or of none
        picked[...] = -1.0
        y[mask] = y + 1.0
        return y, picked
    x = np.array([0.5, 1.5])
    got, want = xform.jit(program)(x), program(x)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_array_equal(g, w)


# -- interval: the ppf of the two tails (refused before) -----------------------------------

def interval_calibration(params):
    """Fit loc and scale so that the central intervals match target ranges."""
    dist = st.norm(params[0], np.exp(params[1]))
    low90, high90 = dist.interval(0.9)
    low50, high50 = st.logistic.interval(0.5, loc=params[0], scale=np.exp(params[1]))
    return (low90 + 1.0) ** 2 + (high90 - 2.5) ** 2 + (high50 - low50 - 1.2) ** 2


def test_interval_in_a_calibration_loss_matches_scipy_and_finite_differences():
    assert_matches_eager_and_differences(interval_calibration, [np.array([0.3, 0.1]),
                                                                np.array([-0.2, 0.5])])
    with pytest.raises(ValueError, match="between 0 and 1"):
        xform.jit(lambda c: st.norm.interval(c, 0.0)[1])(1.5)


# -- the incomplete gamma function's derivative in its shape (NaN before) -------------------

# the shape enters the survival function's gammaincc
gamma_survival_nll = censored_nll(st.gamma)


def test_censored_gamma_likelihood_differentiates_in_the_shape_twice():
    points = [np.array([0.3, 0.1]), np.array([-0.5, 0.7]), np.array([1.5, -0.3])]
    grad = xform.grad(gamma_survival_nll)
    first = [grad(params) for params in points]     # staged and interpreted, then compiled
    for params, interpreted in zip(points, first):
        assert xform.jit(gamma_survival_nll)(params) == gamma_survival_nll(params)
        np.testing.assert_array_equal(grad(params), interpreted)
        np.testing.assert_allclose(interpreted, central_difference(gamma_survival_nll, params),
                                   rtol=1e-6)
    check_grads(gamma_survival_nll, (points[0],), order=2)


@pytest.mark.parametrize("a, x", [(0.05, 0.01), (0.5, 1.5), (2.0, 1.5), (7.0, 3.0),
                                  (7.0, 30.0), (150.0, 160.0), (1000.0, 990.0)])
def test_gammainc_shape_derivative_matches_finite_differences(a, x):
    """Both expansions (the series below x = a + 1, the continued fraction above), P and Q,
    against a fourth-order central difference of SciPy's own functions."""
    import scipy.special as sc

    def central(f, h):
        return (-f(a + 2 * h) + 8 * f(a + h) - 8 * f(a - h) + f(a - 2 * h)) / (12 * h)
    h = 1e-3 * a
    for f in (lambda s: sc.gammainc(s, x), lambda s: sc.gammaincc(s, x)):
        np.testing.assert_allclose(xform.grad(f)(a), central(f, h), rtol=1e-7, atol=1e-14)
    # second derivatives: against central differences of the first
    hessian = xform.hessian(lambda ax: sc.gammainc(ax[0], ax[1]))(np.array([a, x]))
    mixed = central(lambda s: xform.grad(lambda y: sc.gammainc(s, y))(x), h)
    np.testing.assert_allclose(hessian[0, 1], mixed, rtol=1e-6, atol=1e-14)
    in_shape = central(xform.grad(lambda s: sc.gammainc(s, x)), h)
    np.testing.assert_allclose(hessian[0, 0], in_shape, rtol=1e-6, atol=1e-14)


def test_the_shape_derivative_primitives_pass_the_rule_battery():
    from xform.rules.scipy_special import gammainc_da2_p, gammainc_da_p
    from xform.testing import check_primitive
    a, x = np.array([0.7, 2.0, 4.5]), np.array([0.3, 1.7, 3.9])
    check_primitive(gammainc_da_p, a, x, order=1, rtol=1e-4, atol=1e-6)
    # the third derivative in the shape is NaN by design: a integer, undifferentiated
    check_primitive(gammainc_da2_p, np.array([1, 2, 4]), x, order=2, rtol=1e-4, atol=1e-6)


# -- a draw with a traced parameter from a generator made inside the function ---------------

def test_a_draw_from_a_generator_made_inside_names_the_draw_and_the_fix():
    def elbo(params):
        rng = np.random.default_rng(11)
        z = rng.normal(params[0], np.exp(params[1]), size=50)  # line: inner draw
        return np.mean(z ** 2)
    with pytest.raises(xform.ConcretizationError, match=r"rng\.normal\(\.\.\.\) of a traced "
                       r"parameter, from a generator made inside") as info:
        xform.jit(elbo)(np.array([0.5, 0.1]))
    assert_points_at(info.value, __file__, "inner draw")
    assert "mu + sigma * rng.standard_normal(size)" in str(info.value)


def test_a_float_taken_inside_scipy_names_the_scipy_function_not_a_float_to_drop():
    data = np.array([0.3, 1.2, 0.7, 2.1, 0.9, 1.5])
    with pytest.raises(xform.ConcretizationError,
                       match=r"scipy\.stats\.boxcox_llf \(which has no xform version\) takes "
                             r"float\(\) of a value that is being differentiated") as info:
        xform.grad(lambda lmb: st.boxcox_llf(lmb, data))(1.3)  # line: boxcox
    assert_points_at(info.value, __file__, "boxcox")
    assert "drop the float()" not in str(info.value)
    # where nothing is differentiated SciPy's own code runs, on the staging's values
    assert xform.jit(lambda lmb: st.boxcox_llf(lmb, data))(1.3) == st.boxcox_llf(1.3, data)
