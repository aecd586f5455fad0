"""SciPy and numpy functions called with traced values that raised before (walls the statistics
audit left): each checked against eager SciPy/numpy and finite differences, one transformed
object called alternately at two points."""
import numpy as np
import pytest
import scipy.stats as st

import xform
from xform.testing import check_grads
from tests.source_lines import assert_points_at
from tests.test_programs_stats import assert_matches_eager_and_differences
from tests.test_values import fresh_cache  # noqa: F401 (autouse: a fresh cache per test)

_RNG = np.random.RandomState(7)
_X = np.array([0.3, 1.2, 2.1, 2.9, 4.2, 5.1])
_Y = np.array([1.0, 2.5, 2.4, 4.1, 5.3, 5.0])


# -- generalized ufuncs' keywords: np.vecdot(x, y, axis=...) (pearsonr) -----------------------

_A = np.arange(12.0).reshape(3, 4)
_B = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
_CUBE = np.arange(60.0).reshape(3, 4, 5)


@pytest.mark.parametrize("ufunc, operands, keywords", [
    (np.vecdot, (_A, _B), dict(axis=0)),
    (np.vecdot, (_A, _B), dict(axis=0, keepdims=True)),
    (np.vecdot, (_A, _B), dict(keepdims=True)),
    (np.vecdot, (_A, _B), dict(axes=[0, 0])),
    (np.vecdot, (_A, _B), dict(axes=[0, 0], keepdims=True)),
    (np.vecdot, (_A, _B), dict(axes=[(0,), (0,), (1,)], keepdims=True)),
    (np.vecdot, (_A, _B), dict(axis=-1, dtype=np.float32, order="C", subok=True)),
    (np.linalg.vecdot, (_A, _B), dict(axis=0)),
    (np.matvec, (_CUBE[..., :2], _A[:2]), dict(axes=[(0, 1), (1,), (1,)])),
    (np.vecmat, (_A[:, 0], _A.T), dict(axes=[0, (1, 0), 0])),
    (np.matmul, (_CUBE, np.arange(120.0).reshape(4, 6, 5)), dict(axes=[(0, 1), (0, 1), (0, 1)])),
    (np.matmul, (_CUBE, np.arange(4.0)), dict(axes=[(0, 1), (0,), (0,)])),
])
def test_generalized_ufunc_keywords_match_numpy(ufunc, operands, keywords):
    def product(a, b):
        return ufunc(a, b, **keywords)
    expected = product(*operands)
    staged = xform.jit(product)(*operands)
    assert np.shape(staged) == expected.shape and staged.dtype == expected.dtype
    np.testing.assert_array_equal(staged, expected)


def test_vecdot_over_an_axis_differentiates_in_both_operands():
    def weighted(a, b):
        return np.sum(np.vecdot(a, np.sin(b), axis=0, keepdims=True) ** 2)
    check_grads(weighted, (_A / 10, _B), order=2)


def test_a_gufunc_axis_where_the_signature_has_two_core_dimensions_names_the_line():
    def product(m, v):
        return np.matvec(m, v, axis=0)  # line: matvec axis
    with pytest.raises(xform.errors.ShapeError, match="single shared core dimension") as info:
        xform.jit(product)(_CUBE[..., :3], _A[:, :3])
    assert_points_at(info.value, __file__, "matvec axis")


_STACK = _RNG.standard_normal((2, 3, 3))


@pytest.mark.parametrize("function, operands, keywords", [
    (np.linalg.matmul, (_A, _B.T), {}), (np.linalg.outer, (_A[0], _B[1]), {}),
    (np.linalg.tensordot, (_STACK, _STACK.T), dict(axes=1)),
    (np.linalg.tensordot, (_STACK, _STACK.T), {}),
    (np.linalg.trace, (_STACK,), dict(offset=1)), (np.linalg.diagonal, (_STACK,), dict(offset=-1)),
    (np.linalg.cross, (_STACK, _STACK[::-1]), dict(axis=1))])
def test_the_array_api_linalg_functions_match_numpy(function, operands, keywords):
    def applied(*xs):
        return function(*xs, **keywords)
    staged, expected = xform.jit(applied)(*operands), applied(*operands)
    np.testing.assert_array_equal(staged, expected)
    assert staged.dtype == expected.dtype
    check_grads(lambda *xs: np.sum(np.sin(applied(*xs))), operands, order=1)


def correlation_loss(y):
    """A correlation to maximise and its p-value, as a calibration loss writes them."""
    result = st.pearsonr(_X, y)
    return -result.statistic + 0.1 * result.pvalue


def test_pearsonr_statistic_and_pvalue_match_scipy_and_finite_differences():
    points = [_Y, _Y[::-1] + _X]
    assert_matches_eager_and_differences(correlation_loss, points, value_rtol=1e-14)


def test_pearsonr_along_an_axis_with_both_samples_traced():
    rows_x = _RNG.standard_normal((3, 7))
    rows_y = rows_x + _RNG.standard_normal((3, 7))

    def total_correlation(x, y):
        return np.sum(st.pearsonr(x, y, axis=1).statistic)
    np.testing.assert_allclose(xform.jit(total_correlation)(rows_x, rows_y),
                               total_correlation(rows_x, rows_y), rtol=1e-14)
    check_grads(total_correlation, (rows_x, rows_y), order=1)




@pytest.mark.parametrize("method", ["average", "min", "max", "dense", "ordinal"])
@pytest.mark.parametrize("values, axis", [
    (np.array([3.0, 1.0, 2.0, 1.0]), None), (np.array([3.0, 1.0, np.nan, 1.0]), None),
    (np.array([[3.0, 1.0, np.nan], [1.0, 1.0, 2.0]]), 1),
    (_RNG.randint(0, 4, (3, 7)).astype(float), 0), (_RNG.randint(0, 4, (3, 7)).astype(float), -1)])
def test_rankdata_of_traced_values_is_scipys_bit_for_bit(method, values, axis):
    def ranks(x):
        return st.rankdata(x, method=method, axis=axis)
    staged, expected = xform.jit(ranks)(values), ranks(values)
    np.testing.assert_array_equal(staged, expected)
    assert staged.dtype == expected.dtype


def rank_weighted(y):
    """A Spearman correlation scaling a sum: ranks carry no derivative, the sum does."""
    result = st.spearmanr(_X, y)
    return result.statistic * np.sum(y) + result.pvalue


def test_spearmanr_matches_scipy_with_the_ranks_derivative_zero():
    points = [_Y, _Y[::-1] + 0.3 * _X]
    # SciPy divides by zero under its own np.errstate, which staging does not keep (sharp bits)
    with np.errstate(divide="ignore", invalid="ignore"):
        assert_matches_eager_and_differences(rank_weighted, points)
    table = _RNG.standard_normal((20, 3))
    np.testing.assert_array_equal(xform.jit(lambda m: st.spearmanr(m).statistic)(table),
                                  st.spearmanr(table).statistic)



def test_chi_square_distribution_functions_are_scipys_and_chisquare_stages():
    import scipy.special as sc
    df = np.array([0.5, 1.0, 2.5, 3.0, 10.0, 0.0, -1.0, 4.0])
    x = np.array([0.3, 2.0, 4.1, 0.0, 7.5, 1.0, 1.0, -1.0])
    for function in (sc.chdtr, sc.chdtrc):
        np.testing.assert_array_equal(xform.jit(function)(df, x), function(df, x))

    def goodness_of_fit(log_counts):
        counts = np.exp(log_counts)
        return st.chisquare(counts, np.full(5, np.sum(counts) / 5)).pvalue
    assert_matches_eager_and_differences(goodness_of_fit, [_Y[:5], _Y[::-1][:5] * 0.5],
                                         value_rtol=1e-14)


# -- scipy.stats.betabinom: "not supported" before ------------------------------------------

_SUCCESSES = np.array([3.0, 7.0, 0.0, 10.0, 5.0])
_TRIALS = 10


def betabinomial_nll(log_ab):
    """An overdispersed count model's negative log-likelihood, in log a and log b."""
    a, b = np.exp(log_ab)
    return -np.sum(st.betabinom.logpmf(_SUCCESSES, _TRIALS, a, b))


def test_betabinom_likelihood_matches_scipy_and_finite_differences():
    points = [np.array([0.4, 0.9]), np.array([-0.3, 0.2])]
    assert_matches_eager_and_differences(betabinomial_nll, points)
    check_grads(betabinomial_nll, (points[0],), order=2)


@pytest.mark.parametrize("method", ["pmf", "logpmf", "cdf", "sf", "logcdf", "logsf"])
def test_betabinom_methods_match_scipy_inside_and_outside_the_support(method):
    counts = np.array([-1.0, 0.0, 2.5, 3.0, 5.0, 10.0, 12.0])

    def value(ab):
        return getattr(st.betabinom, method)(counts, _TRIALS, ab[0], ab[1])
    jit = xform.jit(value)
    for ab in [np.array([1.5, 2.0]), np.array([0.6, 4.0])] * 2:
        with np.errstate(divide="ignore"):
            np.testing.assert_allclose(jit(ab), value(ab), rtol=1e-13, atol=1e-16)
    finite = np.isfinite(value(np.array([1.5, 2.0])))
    check_grads(lambda ab: value(ab)[finite], (np.array([1.5, 2.0]),), order=1)


def test_frozen_betabinom_cdf_in_its_shapes_with_a_location():
    def tail(a):
        return np.sum(st.betabinom(np.array([5, 8]), a, 3.0, loc=1).cdf(np.array([2, 4])))
    assert_matches_eager_and_differences(tail, [1.5, 2.5], value_rtol=1e-14)



def summary_of_a_fitted_family(params):
    """Means, variances and standard deviations of families in traced parameters (mean,
    var, std, stats, frozen), as a moment-matching loss writes them."""
    shape, scale = np.exp(params)
    moments = st.gamma.stats(shape, loc=0.2, scale=scale, moments="mvsk")
    return (st.gamma.mean(shape, scale=scale) + st.beta.var(shape, scale) + sum(moments)
            + st.weibull_min(shape + 1, scale=scale).std() + st.lognorm.mean(shape)
            + st.betabinom.mean(12, shape, scale) + st.binom.var(10, scale / 3)
            + st.poisson.std(shape) + st.norm(shape, scale).var())


def test_distribution_moments_in_traced_parameters_match_scipy_and_finite_differences():
    points = [np.array([-0.2, 0.5]), np.array([0.4, -0.1])]
    assert_matches_eager_and_differences(summary_of_a_fitted_family, points,
                                         value_rtol=1e-14)


def test_moments_of_inadmissible_parameters_are_nan_and_numerical_ones_name_the_line():
    np.testing.assert_array_equal(xform.jit(lambda a: st.gamma.mean(a))(-1.0), np.nan)

    def skewness(c):
        return st.weibull_min.stats(c, moments="s")  # line: numerical moment
    with pytest.raises(xform.UnsupportedError, match="moments='s'") as info:
        xform.jit(skewness)(1.5)
    assert_points_at(info.value, __file__, "numerical moment")



def adjusted_last(x):
    """SciPy's multinomial idiom: q[i, -1] = r[i] with a 0-d traced mask i, selecting the
    entry or nothing, and the values read through the same mask (one or none)."""
    q = np.stack([x, 2 * x])
    closing = 1 - np.sum(q[..., :-1], axis=-1)
    adjust = np.sum(x) > 1
    q[adjust, -1] = closing[adjust][..., :1]
    return np.sum(q ** 2)


def test_a_write_through_a_0d_traced_mask_selects_one_entry_or_none():
    points = [np.array([0.2, 0.3, 0.9]), np.array([0.1, 0.2, 0.3])]    # the mask True, False
    assert_matches_eager_and_differences(adjusted_last, points)


def test_multinomial_in_traced_probabilities_matches_scipy_and_finite_differences():
    import scipy.special as sc

    def log_likelihood(logits):
        return st.multinomial.logpmf([2, 3, 5], 10, sc.softmax(logits))
    assert_matches_eager_and_differences(log_likelihood, [np.array([0.1, 0.5, -0.3]),
                                                          np.array([-1.0, 0.0, 2.0])],
                                         value_rtol=1e-14)



_DRAWS = np.array([-3.0, -1.2, -0.5, 0.0, 0.4, 1.1, 2.5, 6.0])


@pytest.mark.parametrize("bounds", [(-1.0, 1.0), (-10.0, -2.0), (2.0, 8.0), (-0.5, np.inf),
                                    (-np.inf, 0.3), (-np.inf, np.inf)])
@pytest.mark.parametrize("method", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"])
def test_truncnorm_in_its_location_and_scale_matches_scipy(bounds, method):
    """Inside, outside and in either tail: SciPy's values to rounding; derivatives finite
    everywhere (zero outside the support) and equal to central differences."""
    def value(params):
        return getattr(st.truncnorm, method)(_DRAWS, *bounds, loc=params[0], scale=params[1])
    point = np.array([0.2, 1.3])
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(xform.jit(value)(point), value(point), rtol=1e-10)
    jacobian = xform.jacfwd(value)(point)
    assert np.all(np.isfinite(jacobian))
    finite = np.isfinite(value(point))
    check_grads(lambda p: value(p)[finite], (point,), order=1)


def skewed_likelihood(params):
    """A skew-normal likelihood in its shape and location."""
    return np.sum(st.skewnorm.logpdf(_DRAWS, params[0], loc=params[1]) +
                  st.skewnorm.pdf(_DRAWS, params[0], loc=params[1]))


def circular_likelihood(params):
    """A von Mises likelihood of angles, in its concentration and mean direction."""
    kappa, mu = np.exp(params[0]), params[1]
    return np.sum(st.vonmises.logpdf(_DRAWS, kappa, loc=mu) + st.vonmises.pdf(_DRAWS, kappa))


@pytest.mark.parametrize("likelihood, points, name", [
    (skewed_likelihood, [np.array([2.0, 0.3]), np.array([0.0, -0.5])], "skewnorm"),
    (circular_likelihood, [np.array([0.7, 0.1]), np.array([3.4, -0.2])], "vonmises")])
def test_a_density_whose_cdf_has_no_staged_form_matches_scipy(likelihood, points, name):
    """Its logpdf and pdf are SciPy's; its cdf (Owen's T, a Cython series) names the line."""
    assert_matches_eager_and_differences(likelihood, points, value_rtol=1e-13)

    def tail(shape):
        return getattr(st, name).cdf(0.5, shape)  # line: cdf without a staged form
    with pytest.raises(xform.UnsupportedError, match=f"{name}'s distribution functions") \
            as info:
        xform.jit(tail)(1.0)
    assert_points_at(info.value, __file__, "cdf without a staged form")


# -- scipy.stats.gaussian_kde of traced data, weights or bandwidth, at traced points ---------

_CLOUD = _RNG.standard_normal((2, 30))
_QUERIES = _RNG.standard_normal((2, 5))


def kde_log_likelihood(data):
    """A held-out log-likelihood under a KDE of the (traced) data."""
    return np.sum(st.gaussian_kde(data).logpdf(_QUERIES))


def test_kde_of_traced_data_matches_scipy_and_finite_differences():
    assert_matches_eager_and_differences(kde_log_likelihood, [_CLOUD, _CLOUD[::-1] * 0.7],
                                         value_rtol=1e-13, atol=1e-7)


def test_kde_of_concrete_data_at_traced_points_by_every_evaluation_method():
    kde = st.gaussian_kde(_CLOUD[0], bw_method="silverman")

    def density(x):
        return np.sum(kde(x) + kde.pdf(x) + kde.evaluate(x) + kde.logpdf(x))
    points = [np.array([0.1, -1.3, 2.0]), np.array([0.5, 0.0, -0.4])]
    assert_matches_eager_and_differences(density, points, value_rtol=1e-13)
    check_grads(density, (points[0],), order=2)


def test_kde_in_its_weights_and_a_traced_bandwidth():
    weights = np.linspace(0.5, 1.5, 30)

    def weighted(w):
        return np.sum(st.gaussian_kde(_CLOUD, weights=w).pdf(_QUERIES))

    def bandwidth_cv(h):
        """A bandwidth chosen by likelihood: given to the constructor, then set again."""
        kde = st.gaussian_kde(_CLOUD[0], bw_method=h)
        first = np.sum(kde.logpdf(_CLOUD[1]))
        kde.set_bandwidth(2 * h)
        return first + np.sum(kde.logpdf(_CLOUD[1]))
    assert_matches_eager_and_differences(weighted, [weights, weights[::-1]], value_rtol=1e-13)
    assert_matches_eager_and_differences(bandwidth_cv, [0.4, 0.25], value_rtol=1e-13)


def test_kde_of_one_point_as_a_row_vector_and_a_dimension_mismatch():
    kde = st.gaussian_kde(_CLOUD)
    point = np.array([0.1, 0.2])
    np.testing.assert_allclose(xform.jit(kde)(point), kde(point), rtol=1e-13)

    def density(x):
        return kde(x)  # line: kde of 3-d points
    with pytest.raises(ValueError, match="points have dimension 3, dataset has dimension 2") \
            as info:
        xform.jit(density)(np.zeros((3, 2)))
    assert_points_at(info.value, __file__, "kde of 3-d points")


# -- numpy: lexsort, histogram2d/histogramdd, frompyfunc, nditer on traced values -------------

_GROUPS = np.array([2.0, 0.0, 1.0, 0.0, 2.0, 1.0])


@pytest.mark.parametrize("keys, axis", [
    (lambda a, b, c: (a, b), -1), (lambda a, b, c: [c, a, b], 0),
    (lambda a, b, c: np.stack([a, b]), 1), (lambda a, b, c: (a, c, b), -2)])
def test_lexsort_of_traced_keys_matches_numpy(keys, axis):
    a, b = _RNG.randint(0, 3, (2, 5, 4)).astype(float)
    c = _RNG.standard_normal((5, 4))

    def order(a, b, c):
        return np.lexsort(keys(a, b, c), axis=axis)
    staged = xform.jit(order)(a, b, c)
    np.testing.assert_array_equal(staged, order(a, b, c))
    assert staged.dtype == np.intp


def sorted_by_group_then_value(y):
    """Values ordered by group, ties by value, weighted by rank: the order changes with y."""
    return np.sum(y[np.lexsort((y, _GROUPS))] * np.arange(1.0, 7.0))


def test_a_lexsort_gather_follows_the_order_of_each_call_and_differentiates():
    points = [_Y, _Y[::-1].copy()]
    assert_matches_eager_and_differences(sorted_by_group_then_value, points)


_PAIRS = _RNG.standard_normal((2, 40))
_PAIR_WEIGHTS = _RNG.uniform(0.5, 1.5, 40)


@pytest.mark.parametrize("options", [
    dict(bins=3), dict(bins=[3, 4]), dict(bins=np.linspace(-2.0, 2.0, 6)),
    dict(bins=[np.linspace(-2.0, 2.0, 4), np.array([-3.0, 0.0, 3.0])]),
    dict(bins=4, range=[[-1.0, 1.0], [-2.0, 2.0]]), dict(bins=3, density=True),
    dict(bins=(3, 2), density=True, weights=True), dict(bins=3, weights=True)])
def test_histogram2d_of_traced_data_and_weights_matches_numpy_bit_for_bit(options):
    options = dict(options)
    weighted = options.pop("weights", False)

    def histogram(x, y, w):
        return np.histogram2d(x, y, weights=w if weighted else None, **options)
    expected = histogram(*_PAIRS, _PAIR_WEIGHTS)
    staged = xform.jit(histogram)(*_PAIRS, _PAIR_WEIGHTS)
    for got, want in zip(staged, expected):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype


def test_histogramdd_of_a_traced_sample_matches_numpy():
    sample = _RNG.standard_normal((30, 3))

    def histogram(s, w):
        return np.histogramdd(s, bins=(2, 3, 2), weights=w)
    counts, edges = xform.jit(histogram)(sample, _PAIR_WEIGHTS[:30])
    want_counts, want_edges = histogram(sample, _PAIR_WEIGHTS[:30])
    np.testing.assert_array_equal(counts, want_counts)
    for got, want in zip(edges, want_edges):
        np.testing.assert_array_equal(got, want)


def weighted_occupancy(w):
    """A squared weighted 2-d histogram, as a smoothness penalty on the weights."""
    counts, _, _ = np.histogram2d(_PAIRS[0], _PAIRS[1], bins=3, weights=w)
    return np.sum(counts ** 2)


def test_histogram2d_differentiates_in_the_weights_and_in_the_edges():
    assert_matches_eager_and_differences(weighted_occupancy,
                                         [_PAIR_WEIGHTS, _PAIR_WEIGHTS[::-1].copy()])

    def span(x):
        """The automatic edges follow the data's minimum and maximum."""
        _, x_edges, _ = np.histogram2d(x, _PAIRS[1], bins=3)
        return np.sum(x_edges ** 2)
    assert_matches_eager_and_differences(span, [_PAIRS[0]])


_CLAMP = np.frompyfunc(lambda v: v * v if v > 2 else v, 1, 1)
_SUM_AND_PRODUCT = np.frompyfunc(lambda a, b: (a + b, a * b), 2, 2)


def clamped_energy(y):
    """An object ufunc with a Python `if`, made at module level (np.frompyfunc)."""
    total, product = _SUM_AND_PRODUCT(y, np.arange(6.0))
    return np.sum(_CLAMP(y).astype(float)) + np.sum(total * product)


def test_frompyfunc_runs_its_function_per_element_as_vectorize_does():
    assert_matches_eager_and_differences(clamped_energy, [_Y, _Y - 2.0])
    staged = xform.jit(lambda y: _CLAMP(np.reshape(y, (2, 3))))(_Y)
    np.testing.assert_array_equal(staged, _CLAMP(np.reshape(_Y, (2, 3))).astype(float))


def iterated(x):
    """np.nditer's orders, indices and operands, read as numpy reads them."""
    total = 0.0
    for value in np.nditer(x):
        total = total + value * value
    visited = [value * 1.0 for value in np.nditer(x.T)]      # memory order: x's, not x.T's
    total = total + np.sum(np.stack(visited) * np.arange(len(visited)))
    it = np.nditer(x[:, ::-1], flags=["multi_index", "c_index"])
    while not it.finished:
        total = total + it[0] * (it.multi_index[1] + 10 * it.index)
        it.iternext()
    with np.nditer([x, np.arange(3.0)]) as pairs:
        total = total + sum(a * b for a, b in pairs)
    chunks = np.nditer(x.T, flags=["external_loop"], order="C")
    return total + sum(np.sum(chunk * k) for k, chunk in enumerate(chunks))


def test_nditer_reads_traced_elements_in_numpys_order():
    points = [np.arange(6.0).reshape(2, 3) + 1, _RNG.standard_normal((2, 3))]
    assert_matches_eager_and_differences(iterated, points, value_rtol=1e-15)


def test_nditer_writing_into_a_traced_array_names_the_line_and_the_fix():
    def scaled(x):
        for value in np.nditer(x, op_flags=["readwrite"]):  # line: nditer write
            value[...] = 2 * value
        return x
    with pytest.raises(xform.UnsupportedError, match="writing") as info:
        xform.jit(scaled)(np.ones(3))
    assert_points_at(info.value, __file__, "nditer write")
    assert "y[i] = ..." in str(info.value)


# -- scipy.optimize.curve_fit of traced data: the implicit function theorem -------------------

import scipy.optimize as so  # noqa: E402

_TIMES = np.linspace(0.0, 4.0, 25)
_DECAY = 2.5 * np.exp(-1.3 * _TIMES) + 0.5 + 0.05 * _RNG.standard_normal(25)
_ERRORS = 0.05 + 0.02 * _TIMES


def decay(t, amplitude, rate, offset):
    return amplitude * np.exp(-rate * t) + offset


def quadratic(t, a, b, c):
    return a + b * t + c * t * t


def quadratic_jacobian(t, a, b, c):
    return np.stack([np.ones_like(t), t, t * t], axis=-1)


def fitted_quadratic(y):
    """A weighted polynomial fit with its exact Jacobian: SciPy's fit is then exact to
    rounding, so central differences of popt and pcov are accurate."""
    popt, pcov = so.curve_fit(quadratic, _TIMES, y, sigma=_ERRORS, jac=quadratic_jacobian)
    return popt[1] + 10 * pcov[0, 1]


def test_curve_fit_of_traced_data_matches_scipy_and_finite_differences():
    points = [_DECAY, _DECAY[::-1].copy()]
    assert_matches_eager_and_differences(fitted_quadratic, points, value_rtol=1e-12)


def test_curve_fit_in_the_sample_points_and_a_sigma_covariance():
    covariance = np.diag(_ERRORS ** 2) + 1e-3 * np.exp(-np.abs(_TIMES[:, None] - _TIMES))

    def slope(t):
        return so.curve_fit(quadratic, t, _DECAY, sigma=covariance,
                            jac=quadratic_jacobian)[0][1]
    assert_matches_eager_and_differences(slope, [_TIMES, _TIMES ** 1.1], value_rtol=1e-9)


def implicit_derivative(popt, y, sigma=1.0):
    """d popt / d y by hand for `decay`, residuals r = (f - y) / sigma:
    (J^T J + sum_i r_i H_i)^-1 J^T / sigma at the fit (J, H of the weighted residuals)."""
    amplitude, rate, offset = popt
    e = np.exp(-rate * _TIMES) / sigma
    jacobian = np.stack([e, -amplitude * _TIMES * e, np.ones_like(e) / sigma], axis=-1)
    residual = (decay(_TIMES, *popt) - y) / sigma
    curvature = np.zeros((3, 3))
    curvature[0, 1] = curvature[1, 0] = np.sum(residual * -_TIMES * e)
    curvature[1, 1] = np.sum(residual * amplitude * _TIMES ** 2 * e)
    return np.linalg.solve(jacobian.T @ jacobian + curvature, jacobian.T / sigma)


@pytest.mark.parametrize("options, pcov_rtol", [
    (dict(p0=[1.0, 1.0, 0.0]), 3e-4), (dict(), 3e-4), (dict(method="trf"), 1e-6),
    (dict(bounds=([0.0, 0.0, 0.0], [10.0, 10.0, 10.0])), 1e-6),
    (dict(p0=[1.0, 1.0, 0.0], sigma=_ERRORS, absolute_sigma=True), 3e-4)])
def test_a_nonlinear_fit_is_scipys_with_the_implicit_derivative(options, pcov_rtol):
    """popt is SciPy's bit for bit; its derivative the implicit function theorem's (central
    differences of a solver stopping at its tolerance are too noisy to check it); pcov
    SciPy's to the accuracy of SciPy's difference Jacobian (xform's is exact)."""
    def fit(y):
        return so.curve_fit(decay, _TIMES, y, **options)
    jit, jacobian = xform.jit(fit), xform.jacrev(lambda y: fit(y)[0])
    for y in [_DECAY, _DECAY * 1.2 + 0.1] * 2:
        popt, pcov = jit(y)
        expected_popt, expected_pcov = fit(y)
        np.testing.assert_array_equal(popt, expected_popt)
        np.testing.assert_allclose(pcov, expected_pcov, rtol=pcov_rtol)
        np.testing.assert_allclose(jacobian(y),
                                   implicit_derivative(popt, y, options.get("sigma", 1.0)),
                                   rtol=1e-9, atol=1e-12)


def test_curve_fit_with_the_users_jacobian_and_full_output():
    def model_jacobian(t, amplitude, rate, offset):
        e = np.exp(-rate * t)
        return np.stack([e, -amplitude * t * e, np.ones_like(t)], axis=-1)

    def fit(y):
        return so.curve_fit(decay, _TIMES, y, p0=[1.0, 1.0, 0.0], jac=model_jacobian,
                            full_output=True)

    def fit_and_residuals(y):
        popt, _, info, message, ier = fit(y)
        assert isinstance(message, str) and ier in (1, 2, 3, 4)
        return popt, info["fvec"]
    popt, residuals = xform.jit(fit_and_residuals)(_DECAY)
    np.testing.assert_array_equal(popt, fit(_DECAY)[0])
    np.testing.assert_allclose(residuals, decay(_TIMES, *popt) - _DECAY, atol=1e-14)
    np.testing.assert_allclose(xform.jacrev(lambda y: fit(y)[0])(_DECAY),
                               implicit_derivative(popt, _DECAY), rtol=1e-9, atol=1e-12)


def test_curve_fit_omitting_nans_of_traced_data_names_the_line():
    def fit(y):
        return so.curve_fit(quadratic, _TIMES, y, nan_policy="omit")  # line: nan_policy
    with pytest.raises(xform.UnsupportedError, match="nan_policy") as info:
        xform.jit(fit)(_DECAY)
    assert_points_at(info.value, __file__, "nan_policy")



# -- scipy.interpolate's FITPACK splines: linear ones of traced y; smoothing refused by name ---

import scipy.interpolate as si  # noqa: E402

_KNOTS = np.linspace(0.0, 5.0, 12)
_SAMPLES = np.sin(_KNOTS) + 0.1 * _KNOTS
_QUERY = np.array([0.3, 1.7, 2.2, 4.9, 5.5, -0.2])


@pytest.mark.parametrize("make", [
    lambda y: si.UnivariateSpline(_KNOTS, y, s=0),
    lambda y: si.InterpolatedUnivariateSpline(_KNOTS, y, k=1),
    lambda y: si.InterpolatedUnivariateSpline(_KNOTS, y, ext=3),
    lambda y: si.InterpolatedUnivariateSpline(_KNOTS, y, ext=1).derivative(),
    lambda y: si.LSQUnivariateSpline(_KNOTS, y, [1.5, 2.5, 3.5], w=np.linspace(1.0, 2.0, 12)),
])
def test_a_fitpack_spline_of_traced_values_matches_scipy_and_finite_differences(make):
    def energy(y):
        spline = make(y)
        return np.sum(spline(_QUERY) ** 2) + np.sum(spline(_QUERY[:3], 1))
    assert_matches_eager_and_differences(energy, [_SAMPLES, _SAMPLES[::-1] * 2.0],
                                         value_rtol=1e-15, atol=1e-7)


def test_a_smoothing_spline_of_concrete_data_at_traced_points():
    spline = si.UnivariateSpline(_KNOTS, _SAMPLES)

    def energy(q):
        return np.sum(spline(q) ** 2 + spline(q, 1) + spline.derivative(2)(q))
    assert_matches_eager_and_differences(energy, [_QUERY[:4], _QUERY[:4] + 0.5],
                                         value_rtol=1e-15, atol=1e-7)


def test_a_smoothing_spline_of_traced_values_names_the_line_and_the_linear_alternatives():
    def smoothed(y):
        return si.UnivariateSpline(_KNOTS, y)(_QUERY)  # line: smoothing spline
    with pytest.raises(xform.UnsupportedError, match="FITPACK picks its knots") as info:
        xform.grad(lambda y: np.sum(smoothed(y)))(_SAMPLES)
    assert_points_at(info.value, __file__, "smoothing spline")
    assert "LSQUnivariateSpline(x, y, t)" in str(info.value)
    assert "CubicSpline(x, y)" in str(info.value)


def test_a_traced_fitpack_spline_refuses_the_rest_of_its_interface_by_name():
    def coefficients(y):
        return si.InterpolatedUnivariateSpline(_KNOTS, y).get_coeffs()
    with pytest.raises(xform.UnsupportedError, match="get_coeffs on traced data"):
        xform.jit(coefficients)(_SAMPLES)


# -- every transformed program under vmap ----------------------------------------------------

@pytest.mark.parametrize("program, batch", [
    (correlation_loss, np.stack([_Y, _Y[::-1] + _X])),
    (betabinomial_nll, np.array([[0.4, 0.9], [-0.3, 0.2]])),
    (kde_log_likelihood, np.stack([_CLOUD, _CLOUD * 0.5])),
    (sorted_by_group_then_value, np.stack([_Y, _Y[::-1]])),
    (weighted_occupancy, np.stack([_PAIR_WEIGHTS, _PAIR_WEIGHTS[::-1]])),
    (clamped_energy, np.stack([_Y, _Y - 2.0])),
    (iterated, np.stack([np.arange(6.0).reshape(2, 3), _RNG.standard_normal((2, 3))])),
    (fitted_quadratic, np.stack([_DECAY, _DECAY[::-1]])),
    (lambda y: np.sum(si.UnivariateSpline(_KNOTS, y, s=0)(_QUERY) ** 2),
     np.stack([_SAMPLES, -_SAMPLES])),
])
def test_vmap_of_the_value_and_the_gradient_is_each_lane_alone(program, batch):
    np.testing.assert_allclose(xform.vmap(program)(batch), [program(x) for x in batch],
                               rtol=1e-14)
    grad = xform.grad(program)
    np.testing.assert_allclose(xform.vmap(grad)(batch), [grad(x) for x in batch], rtol=1e-14)


@pytest.mark.parametrize("program, point", [
    (correlation_loss, _Y), (lambda d: kde_log_likelihood(d), _CLOUD[:, :8].copy()),
    (fitted_quadratic, _DECAY),
    (lambda p: np.sum(st.truncnorm.logcdf(_DRAWS, -1.0, 2.0, loc=p[0], scale=p[1])),
     np.array([0.2, 1.3]))])
def test_second_derivatives_match_central_differences_of_the_gradient(program, point):
    hessian, grad = xform.hessian(program)(point), xform.grad(program)
    flat, step = point.ravel(), 1e-5
    columns = [(grad(np.reshape(flat + step * e, point.shape))
                - grad(np.reshape(flat - step * e, point.shape))).ravel() / (2 * step)
               for e in np.eye(flat.size)]
    np.testing.assert_allclose(np.reshape(hessian, (flat.size, flat.size)),
                               np.stack(columns), rtol=1e-6, atol=1e-8)
