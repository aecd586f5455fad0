"""SciPy and numpy functions called with traced values that raised before (walls the statistics
audit left): each checked against eager SciPy/numpy and finite differences, one transformed
object called alternately at two points."""
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


_RNG = np.random.RandomState(7)
_X = np.array([0.3, 1.2, 2.1, 2.9, 4.2, 5.1])
_Y = np.array([1.0, 2.5, 2.4, 4.1, 5.3, 5.0])


def assert_matches_eager_and_differences(program, points, value_rtol=0.0, atol=1e-8):
    """One jit and one grad, called alternately at each point twice: the values equal eager
    SciPy's (to `value_rtol`), the gradients central differences."""
    jit, grad = xform.jit(program), xform.grad(program)
    for point in points + points:
        np.testing.assert_allclose(jit(point), program(point), rtol=value_rtol)
        np.testing.assert_allclose(grad(point), central_difference(program, point),
                                   rtol=1e-6, atol=atol)


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


def test_linalg_matmul_is_matmul():
    np.testing.assert_array_equal(xform.jit(np.linalg.matmul)(_A, _B.T), _A @ _B.T)


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
