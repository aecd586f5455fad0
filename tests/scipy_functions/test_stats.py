"""scipy.stats on tracers, called as users call it (`norm.logpdf(x, mu, s)`, frozen
`norm(mu, s).logpdf(x)`): values against SciPy, derivatives against autograd.scipy.stats and
finite differences, vmap against a loop, and SciPy untouched outside staging."""
from collections import namedtuple

import autograd
import autograd.numpy as anp
import autograd.scipy.stats as ast
import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import multivariate_normal, norm

import xform
from tests.source_lines import assert_points_at
from xform.testing import check_grads
from xform.testing import strategies as xst

METHODS = ("logpdf", "pdf", "logcdf", "cdf", "logsf", "sf")

# name, shape domains, x domain (beyond the support, so -inf, 0 and 1 are checked too), and the
# methods whose shapes SciPy has no derivative in (those shapes are held constant there)
Dist = namedtuple("Dist", "name shapes x_domain fixed_shapes_in")
CONTINUOUS = [
    Dist("norm", [], (-4, 4), ()),
    Dist("t", [(1.5, 6)], (-4, 4), ("logcdf", "cdf", "logsf", "sf")),
    Dist("gamma", [(0.8, 4)], (-1, 6), ("logcdf", "cdf", "logsf", "sf")),
    Dist("beta", [(0.8, 4), (0.8, 4)], (-0.2, 1.2), ("logcdf", "cdf", "logsf", "sf")),
    Dist("expon", [], (-1, 5), ()),
    Dist("laplace", [], (-4, 4), ()),
    Dist("logistic", [], (-4, 4), ()),
    Dist("lognorm", [(0.4, 2)], (-1, 5), ()),
    Dist("cauchy", [], (-4, 4), ()),
    Dist("uniform", [], (-0.5, 1.5), ()),
    Dist("chi2", [(1.5, 6)], (-1, 8), ("logcdf", "cdf", "logsf", "sf")),
]
BY_NAME = {d.name: d for d in CONTINUOUS}


@st.composite
def continuous_args(draw, dist, inside=False):
    """(x, shapes, loc, scale); with `inside`, x away from the support's ends (for FD)."""
    n = draw(st.integers(1, 4))
    loc = draw(st.floats(-1, 1))
    scale = draw(st.floats(0.5, 2))
    shapes = [draw(st.floats(low, high)) for low, high in dist.shapes]
    low, high = dist.x_domain
    z = draw(xst.arrays((n,), np.float64, low, high))
    if inside:
        z = inner_points(dist, z, shapes)
    return loc + scale * z, shapes, loc, scale


def inner_points(dist, z, shapes):
    """Standardized points inside the support, at least 0.1 from its ends and kinks."""
    if dist.name in ("gamma", "expon", "lognorm", "chi2"):
        z = 0.1 + np.abs(z)
    if dist.name in ("beta", "uniform"):
        z = 0.1 + 0.8 * np.clip(np.abs(z), 0, 1)
    if dist.name == "laplace":
        z = np.where(np.abs(z) < 0.1, 0.5, z)
    return z


def value_atol(method):
    """Near log(1) = 0 SciPy's log(cdf) loses digits that our log1p(-sf) keeps: an absolute
    tolerance there, in log space."""
    return 1e-14 if method.startswith("log") else 1e-300


@pytest.mark.parametrize("name", sorted(BY_NAME))
@given(data=st.data())
def test_values_equal_scipy(name, data):
    dist = BY_NAME[name]
    x, shapes, loc, scale = data.draw(continuous_args(dist))
    family = getattr(scipy.stats, name)

    def every_method(x, loc, scale, *shapes):
        return [getattr(family, method)(x, *shapes, loc, scale) for method in METHODS]
    with np.errstate(all="ignore"):
        expected = every_method(x, loc, scale, *shapes)
    got = xform.jit(every_method)(x, loc, scale, *shapes)
    for method, g, e in zip(METHODS, got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-9, atol=value_atol(method), err_msg=method)


@pytest.mark.parametrize("name", sorted(BY_NAME))
@settings(max_examples=4)    # up to five parameters, six methods: each example is slow
@given(data=st.data())
def test_derivatives_in_every_parameter(name, data):
    dist = BY_NAME[name]
    x, shapes, loc, scale = data.draw(continuous_args(dist, inside=True))
    family = getattr(scipy.stats, name)
    constant_shapes = shapes

    def every_method(x, loc, scale, *shapes):
        return [getattr(family, method)(
            x, *(constant_shapes if method in dist.fixed_shapes_in else shapes), loc, scale)
            for method in METHODS]
    check_grads(every_method, (x, loc, scale, *shapes), order=1, rtol=1e-4, atol=1e-6)
    check_grads(lambda x, loc, scale, *shapes: family.logpdf(x, *shapes, loc, scale),
                (x, loc, scale, *shapes), order=2, rtol=1e-4, atol=1e-6)


# autograd.scipy.stats: (our function, theirs), both positional in SciPy's order
AUTOGRAD_CASES = {
    "norm.logpdf": ((-2, 2), [], ast.norm.logpdf),
    "norm.pdf": ((-2, 2), [], ast.norm.pdf),
    "norm.cdf": ((-2, 2), [], ast.norm.cdf),
    "norm.logcdf": ((-2, 2), [], ast.norm.logcdf),
    "norm.sf": ((-2, 2), [], ast.norm.sf),
    "norm.logsf": ((-2, 2), [], ast.norm.logsf),
    "t.logpdf": ((-2, 2), [(1.5, 6)], ast.t.logpdf),
    "t.pdf": ((-2, 2), [(1.5, 6)], ast.t.pdf),
    "gamma.logpdf": ((0.2, 4), [(0.8, 4)], ast.gamma.logpdf),
    "beta.logpdf": ((0.1, 0.9), [(0.8, 4), (0.8, 4)], ast.beta.logpdf),
    "chi2.logpdf": ((0.2, 6), [(1.5, 6)], ast.chi2.logpdf),
}
AUTOGRAD_ARGNUMS = {"chi2.logpdf": (0,)}   # where autograd differentiates fewer arguments
INTEGER_SHAPES = {"chi2.logpdf"}   # autograd's chi2 gradient is 0 at a non-integer df


@pytest.mark.parametrize("case", sorted(AUTOGRAD_CASES))
@given(data=st.data())
def test_gradients_agree_with_autograd(case, data):
    (low, high), shape_domains, theirs = AUTOGRAD_CASES[case]
    name, method = case.split(".")
    x = data.draw(xst.arrays((3,), np.float64, low, high))
    shapes = [data.draw(st.floats(a, b)) for a, b in shape_domains]
    if case in INTEGER_SHAPES:
        shapes = [float(round(s)) for s in shapes]
    loc, scale = (data.draw(st.floats(-0.05, 0.05)), data.draw(st.floats(0.9, 1.1))) \
        if name == "norm" or name == "t" else (0.0, 1.0)
    args = (x, *shapes, loc, scale) if name in ("norm", "t") else (x, *shapes)
    ours = getattr(getattr(scipy.stats, name), method)
    argnums = AUTOGRAD_ARGNUMS.get(case, tuple(range(len(args))))
    got = xform.grad(lambda *a: np.sum(ours(*a)), argnums=argnums)(*args)
    expected = autograd.grad(lambda *a: anp.sum(theirs(*a)), argnums)(*args)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-7, atol=1e-10)


# -- discrete distributions: differentiable in their rate or probability --------------------

@st.composite
def discrete_args(draw, name):
    k = draw(xst.arrays((draw(st.integers(1, 4)),), np.int64, -1, 12)).astype(np.float64)
    if name == "poisson":
        return k, [draw(st.floats(0.3, 6))]
    n = float(draw(st.integers(1, 10))) if name == "binom" else draw(st.floats(0.5, 5))
    return k, [n, draw(st.floats(0.05, 0.95))]


DISCRETE_METHODS = ("logpmf", "pmf", "cdf", "sf", "logcdf", "logsf")


@pytest.mark.parametrize("name", ("poisson", "binom", "nbinom"))
@given(data=st.data())
def test_discrete_values_and_derivatives(name, data):
    k, shapes = data.draw(discrete_args(name))
    family = getattr(scipy.stats, name)

    def every_method(k, *shapes):
        return [getattr(family, method)(k, *shapes) for method in DISCRETE_METHODS]
    with np.errstate(all="ignore"):
        expected = every_method(k, *shapes)
    got = xform.jit(every_method)(k, *shapes)
    for method, g, e in zip(DISCRETE_METHODS, got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-9, atol=value_atol(method), err_msg=method)
    k_inside = np.clip(k, 0, shapes[0] - 1 if name == "binom" else None)
    # the rate or probability is differentiable; binom's and nbinom's n stays constant
    check_grads(lambda p: every_method(k_inside, *shapes[:-1], p), (shapes[-1],), order=1,
                rtol=1e-4, atol=1e-6)
    check_grads(lambda p: family.logpmf(k_inside, *shapes[:-1], p), (shapes[-1],), order=2,
                rtol=1e-4, atol=1e-6)


def test_poisson_logpmf_gradient_agrees_with_autograd():
    k, mu = np.array([0.0, 1.0, 4.0, 7.0]), 2.7
    np.testing.assert_allclose(
        xform.grad(lambda mu: np.sum(scipy.stats.poisson.logpmf(k, mu)))(mu),
        autograd.grad(lambda mu: anp.sum(ast.poisson.logpmf(k, mu)))(mu), rtol=1e-12)


# -- multivariate_normal and dirichlet ------------------------------------------------------

@st.composite
def mvn_args(draw):
    dim = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    root = rng.standard_normal((dim, dim))
    cov = root @ root.T + dim * np.eye(dim)
    mean = rng.standard_normal(dim)
    x = rng.standard_normal(draw(st.sampled_from([(dim,), (2, dim), (2, 3, dim)])))
    return x, mean, cov


@given(mvn_args())
def test_multivariate_normal_values_and_gradients(args):
    x, mean, cov = args
    for method in ("logpdf", "pdf"):
        expected = getattr(multivariate_normal, method)(x, mean, cov)
        got = xform.jit(getattr(multivariate_normal, method))(x, mean, cov)
        np.testing.assert_allclose(got, expected, rtol=1e-10)
        assert np.shape(got) == np.shape(expected)
        frozen = xform.jit(lambda x, m, c: getattr(multivariate_normal(m, c), method)(x))
        np.testing.assert_allclose(frozen(x, mean, cov), expected, rtol=1e-10)
    check_grads(lambda x, m, c: multivariate_normal.logpdf(x, m, (c + c.T) / 2),
                (x, mean, cov), order=2, rtol=1e-4, atol=1e-6)
    if x.ndim > 2:
        return    # autograd's multivariate_normal takes one or a list of points only
    ours = xform.grad(lambda x, m, c: np.sum(multivariate_normal.logpdf(x, m, c)),
                      argnums=(0, 1, 2))(x, mean, cov)
    theirs = autograd.grad(lambda x, m, c: anp.sum(ast.multivariate_normal.logpdf(x, m, c)),
                           (0, 1, 2))(x, mean, cov)
    for o, t in zip(ours[:2], theirs[:2]):
        np.testing.assert_allclose(o, t, rtol=1e-9, atol=1e-12)
    # autograd's cov gradient is symmetric; ours (with cov read as given) has the same
    # symmetric part
    np.testing.assert_allclose((ours[2] + ours[2].T) / 2, (theirs[2] + theirs[2].T) / 2,
                               rtol=1e-9, atol=1e-12)


def test_multivariate_normal_scalar_and_diagonal_cov_and_a_concrete_frozen_one():
    x = np.array([[0.3, -0.2], [1.0, 0.5]])
    for cov in (2.0, np.array([1.5, 0.7])):
        np.testing.assert_allclose(
            xform.jit(lambda x, m: multivariate_normal.logpdf(x, m, cov))(x, np.zeros(2)),
            multivariate_normal.logpdf(x, np.zeros(2), cov), rtol=1e-12)
    frozen = multivariate_normal(np.array([0.1, 0.2]), np.array([[2.0, 0.3], [0.3, 1.0]]))
    np.testing.assert_allclose(xform.jit(frozen.logpdf)(x), frozen.logpdf(x), rtol=1e-12)


@given(st.integers(2, 4), st.integers(0, 2 ** 16), st.booleans())
def test_dirichlet_values_and_gradients(k, seed, implied_last):
    rng = np.random.default_rng(seed)
    alpha = rng.uniform(0.5, 3.0, k)
    x = rng.dirichlet(np.ones(k))
    x_given = x[:-1] if implied_last else x
    for method in ("logpdf", "pdf"):
        bound = getattr(scipy.stats.dirichlet, method)
        np.testing.assert_allclose(xform.jit(bound)(x_given, alpha), bound(x_given, alpha),
                                   rtol=1e-10)
        np.testing.assert_allclose(
            xform.jit(lambda x, a: getattr(scipy.stats.dirichlet(a), method)(x))(x_given, alpha),
            bound(x_given, alpha), rtol=1e-10)
    # finite differences in alpha (SciPy refuses an x moved off the simplex), autograd in both
    check_grads(lambda a: scipy.stats.dirichlet.logpdf(x_given, a), (alpha,), order=2,
                rtol=1e-4, atol=1e-6)
    for argnum in (0, 1):
        np.testing.assert_allclose(
            xform.grad(scipy.stats.dirichlet.logpdf, argnums=argnum)(x, alpha),
            autograd.grad(ast.dirichlet.logpdf, argnum)(x, alpha), rtol=1e-10)


# -- frozen distributions, helpers, vmap, SciPy untouched -----------------------------------

def log_likelihood(mu, s, x):
    """A user's helper: frozen and unfrozen calls, keywords and positions mixed."""
    frozen = norm(mu, s)
    return (np.sum(frozen.logpdf(x)) + np.sum(norm.logcdf(x, loc=mu, scale=s))
            + np.sum(scipy.stats.gamma(2.0, scale=s).logpdf(np.abs(x) + 0.1))
            + np.sum(scipy.stats.poisson(s).logpmf(np.array([0, 2, 3]))))


def test_frozen_distributions_and_helpers_stage():
    x = np.array([0.2, -0.7, 1.4])
    np.testing.assert_allclose(xform.jit(log_likelihood)(0.3, 1.2, x),
                               log_likelihood(0.3, 1.2, x), rtol=1e-12)
    check_grads(log_likelihood, (0.3, 1.2, x), order=2)


def test_a_frozen_distribution_with_concrete_parameters_takes_a_traced_x():
    frozen = scipy.stats.t(3.0, 0.5, 2.0)
    x = np.array([0.1, 2.0])
    np.testing.assert_allclose(xform.jit(frozen.cdf)(x), frozen.cdf(x), rtol=1e-12)
    np.testing.assert_allclose(xform.grad(lambda x: np.sum(frozen.logcdf(x)))(x),
                               frozen.pdf(x) / frozen.cdf(x), rtol=1e-10)


def test_vmap_equals_a_loop():
    mus = np.array([-0.5, 0.0, 0.7])

    def f(mu):
        return (norm(mu, 1.5).logpdf(np.array([0.1, 0.4])) + scipy.stats.beta.cdf(0.3, 2.0, 3.0,
                                                                                    loc=mu / 10)
                + multivariate_normal.logpdf(np.array([0.1, mu]), np.zeros(2), np.eye(2)))
    np.testing.assert_allclose(xform.vmap(f)(mus), np.stack([f(mu) for mu in mus]), rtol=1e-12)


def test_inadmissible_parameters_give_nan_as_scipy_does():
    def f(s, a):
        return np.stack([norm.logpdf(0.5, 0.0, s), scipy.stats.gamma.logpdf(1.0, a)])
    with np.errstate(all="ignore"):
        expected = f(-1.0, -2.0)
    got = xform.jit(f)(-1.0, -2.0)
    assert np.all(np.isnan(expected)) and np.all(np.isnan(got))


def test_outside_staging_scipy_stats_is_untouched():
    methods = [scipy.stats.rv_continuous.logpdf, scipy.stats.rv_discrete.pmf,
               type(multivariate_normal).__call__, type(multivariate_normal).logpdf,
               type(scipy.stats.dirichlet).logpdf]
    codes = [m.__code__ for m in methods]
    before = (norm.logpdf(0.3, 0.1, 2.0), norm(0.1, 2.0).cdf(0.3),
              multivariate_normal.logpdf([0.1, 0.2], [0.0, 0.0], np.eye(2)))
    xform.grad(log_likelihood)(0.3, 1.2, np.array([0.2, -0.7]))
    after = (norm.logpdf(0.3, 0.1, 2.0), norm(0.1, 2.0).cdf(0.3),
             multivariate_normal.logpdf([0.1, 0.2], [0.0, 0.0], np.eye(2)))
    assert [m.__code__ for m in methods] == codes
    assert type(multivariate_normal(np.zeros(2), np.eye(2))).__name__ == \
        "multivariate_normal_frozen"
    for b, a in zip(before, after):
        assert type(b) is type(a) and b == a


def test_an_unsupported_distribution_names_itself_at_the_user_line():
    def f(c):
        return scipy.stats.rice.logpdf(1.0, c)  # line: rice
    with pytest.raises(xform.UnsupportedError,
                       match=r"scipy\.stats\.rice\.logpdf is not supported") as info:
        xform.jit(f)(1.5)
    assert_points_at(info.value, __file__, "rice")


def test_an_unsupported_method_names_itself():
    # no closed-form quantile (t), a discrete quantile (poisson), a method never staged (rvs)
    with pytest.raises(xform.UnsupportedError, match=r"scipy\.stats\.t\.ppf is not"):
        xform.jit(lambda mu: scipy.stats.t(3.0, mu).ppf(0.3))(0.2)
    with pytest.raises(xform.UnsupportedError, match=r"scipy\.stats\.poisson\.isf is not"):
        xform.jit(lambda mu: scipy.stats.poisson.isf(0.3, mu))(2.0)
    with pytest.raises(xform.UnsupportedError, match=r"scipy\.stats\.norm\.rvs is not"):
        xform.jit(lambda mu: norm(mu, 1.0).rvs())(0.2)


# -- ppf and isf, where the quantile has a closed form --------------------------------------

QUANTILE_FAMILIES = ("norm", "expon", "logistic", "laplace", "cauchy", "uniform")


@pytest.mark.parametrize("name", QUANTILE_FAMILIES)
@given(q=xst.arrays((5,), np.float64, -0.1, 1.1), ends=st.booleans(),
       loc=st.floats(-1, 1), scale=st.floats(-0.5, 2))
def test_quantiles_equal_scipy(name, q, ends, loc, scale):
    """Both call forms; q = 0 and 1 give the support's ends, q outside [0, 1] or scale <= 0
    NaN, and the tails keep their digits (q = 1e-12 and 1 - 1e-12)."""
    if ends:
        q = np.concatenate([q, [0.0, 1.0, 1e-12, 1 - 1e-12, 0.5]])
    family = getattr(scipy.stats, name)

    def quantiles(q, loc, scale):
        return [family.ppf(q, loc, scale), family.isf(q, loc=loc, scale=scale),
                family(loc, scale).ppf(q), family(loc=loc, scale=scale).isf(q)]
    with np.errstate(all="ignore"):
        expected = quantiles(q, loc, scale)
    for got, want in zip(xform.jit(quantiles)(q, loc, scale), expected):
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-14)


@pytest.mark.parametrize("name", QUANTILE_FAMILIES)
@settings(max_examples=10)
@given(q=xst.arrays((3,), np.float64, 0.02, 0.98), loc=st.floats(-1, 1),
       scale=st.floats(0.5, 2))
def test_quantile_derivatives(name, q, loc, scale):
    """Finite differences to second order in (q, loc, scale), and d ppf / dq = 1 / pdf(ppf):
    the density, SciPy's, as the oracle (autograd has no quantiles)."""
    if name == "laplace":   # its quantile has a kink at the median
        q = np.where(np.abs(q - 0.5) < 0.05, 0.3, q)
    family = getattr(scipy.stats, name)
    check_grads(lambda q, loc, scale: family.ppf(q, loc, scale) + family.isf(q, loc, scale)
                * family.ppf(0.4, loc, scale), (q, loc, scale), order=2, rtol=1e-4, atol=1e-6)
    slope = xform.vmap(xform.grad(lambda q: family.ppf(q, loc, scale)))(q)
    np.testing.assert_allclose(slope, 1 / family.pdf(family.ppf(q, loc, scale), loc, scale),
                               rtol=1e-9)
    slope = xform.vmap(xform.grad(lambda q: family(loc, scale).isf(q)))(q)
    np.testing.assert_allclose(slope, -1 / family.pdf(family.isf(q, loc, scale), loc, scale),
                               rtol=1e-9)


def test_a_statistics_function_names_itself_when_it_fails_on_a_tracer():
    # (a staging without values: with values, SciPy's own checks read them)
    with pytest.raises(xform.XformError, match=r"^scipy\.stats\.entropy \(which has no xform"):
        xform.make_graph(lambda p: scipy.stats.entropy(p))(xform.ShapedArray((2,), np.float64))


def test_a_statistics_function_behind_scipys_decorator_is_named_as_the_user_calls_it():
    y = np.array([1.0, 3.0, 2.0])

    def tau(a):
        return scipy.stats.kendalltau(a, y)[0]  # line: kendalltau
    with pytest.raises(xform.ConcretizationError,
                       match=r"^scipy\.stats\.kendalltau \(which has no xform version\)") as info:
        xform.jit(tau)(np.array([1.0, 2.0, 4.0]))
    assert_points_at(info.value, __file__, "kendalltau")
