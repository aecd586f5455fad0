"""scipy.integrate's integrals inside transformed functions (xform/scipy/integrate.py,
xform/rules/quadrature.py): quad, quad_vec and dblquad integrate a staged integrand with
SciPy and differentiate under the integral and at the limits (Leibniz's rule, infinite limits
included); fixed_quad, simpson, trapezoid and cumulative_trapezoid run as numpy. Checked
against closed forms and finite differences under grad, jvp, vmap and second order."""
import warnings

import numpy as np
import pytest
import scipy.integrate as si

import xform
from xform.errors import UnsupportedError
from xform.testing import check_grads

SQRT_PI = np.sqrt(np.pi)


def gaussian_mass(a):
    return si.quad(lambda t, a: np.exp(-a * t ** 2), -np.inf, np.inf, args=(a,),
                   epsabs=1e-13, epsrel=1e-13)[0]


def test_gaussian_over_the_real_line_matches_the_closed_form():
    a = 1.3
    assert xform.jit(gaussian_mass)(a) == pytest.approx(SQRT_PI / np.sqrt(a), rel=1e-12)
    assert xform.grad(gaussian_mass)(a) == pytest.approx(-SQRT_PI / (2 * a ** 1.5), rel=1e-10)
    assert xform.jvp(gaussian_mass, (a,), (2.0,))[1] == \
        pytest.approx(-SQRT_PI / a ** 1.5, rel=1e-10)
    assert xform.hessian(gaussian_mass)(a) == pytest.approx(3 * SQRT_PI / (4 * a ** 2.5),
                                                             rel=1e-9)
    a_s = np.array([0.5, 1.0, 2.0])
    np.testing.assert_allclose(xform.vmap(xform.grad(gaussian_mass))(a_s),
                               -SQRT_PI / (2 * a_s ** 1.5), rtol=1e-10)


def test_leibniz_rule_at_finite_limits():
    def erf_like(lower, upper):
        return si.quad(lambda t: np.exp(-t ** 2), lower, upper, epsabs=1e-13)[0]
    lower, upper = -0.3, 1.1
    np.testing.assert_allclose(xform.grad(erf_like, (0, 1))(lower, upper),
                               [-np.exp(-lower ** 2), np.exp(-upper ** 2)], rtol=1e-12)
    # second order: d2/du2 = -2u exp(-u^2)
    assert xform.grad(xform.grad(erf_like, 1), 1)(lower, upper) == \
        pytest.approx(-2 * upper * np.exp(-upper ** 2), rel=1e-10)


def test_parameters_and_limits_together_by_check_grads():
    def moment(a, b, w):
        value, _ = si.quad(lambda t: np.sin(w[0] * t) * np.exp(-a * t) + w[1] * t ** 2, 0.2, b,
                           epsabs=1e-13, epsrel=1e-13)
        return value
    check_grads(moment, (0.7, 1.9, np.array([1.5, 0.3])), order=2, rtol=1e-6, atol=1e-8)


def test_an_infinite_limit_with_a_moving_finite_one():
    def tail(lower, a):
        return si.quad(lambda t: np.exp(-a * t), lower, np.inf, epsabs=1e-14)[0]
    # exp(-a lower) / a
    lower, a = 0.4, 1.7
    np.testing.assert_allclose(xform.grad(tail, (0, 1))(lower, a),
                               [-np.exp(-a * lower), -np.exp(-a * lower) * (lower * a + 1) /
                                a ** 2], rtol=1e-10)


def test_quad_vec_vector_integrand():
    def moments(a):
        return si.quad_vec(lambda t: np.stack([np.ones(()), t, t ** 2]) * np.exp(-a * t),
                           0.0, 1.0, epsrel=1e-13)[0]
    a = 0.9

    def exact(a):
        # closed forms of the first three moments of exp(-a t) over [0, 1]
        e = np.exp(-a)
        return np.array([(1 - e) / a, (1 - e * (1 + a)) / a ** 2,
                         (2 - e * (a ** 2 + 2 * a + 2)) / a ** 3])
    np.testing.assert_allclose(xform.jit(moments)(a), exact(a), rtol=1e-12)
    step = 1e-6
    want = (exact(a + step) - exact(a - step)) / (2 * step)
    np.testing.assert_allclose(xform.jacfwd(moments)(a), want, rtol=1e-7)
    np.testing.assert_allclose(xform.jacrev(moments)(a), want, rtol=1e-7)


def test_dblquad_with_moving_limits():
    def mass(a, c):
        # the triangle 0 <= y <= x <= a, with density exp(-c x y)
        return si.dblquad(lambda y, x: np.exp(-c * x * y), 0.0, a, lambda x: 0.0,
                          lambda x: x, epsabs=1e-13, epsrel=1e-13)[0]
    a, c = 1.2, 0.8
    check_grads(mass, (a, c), order=1, rtol=1e-6, atol=1e-8)
    # d/da: the inner integral at x = a, int_0^a exp(-c a y) dy
    assert xform.grad(mass)(a, c) == pytest.approx((1 - np.exp(-c * a * a)) / (c * a),
                                                   rel=1e-10)


@pytest.mark.parametrize("rule", ["trapezoid", "simpson", "fixed_quad",
                                  "cumulative_trapezoid"])
def test_fixed_rules(rule):
    t = np.linspace(0.0, 2.0, 9)

    def integral(a):
        if rule == "fixed_quad":
            return si.fixed_quad(lambda s: np.sin(a * s), 0.0, a, n=7)[0]
        if rule == "cumulative_trapezoid":
            return si.cumulative_trapezoid(np.sin(a * t), t, initial=0)
        return getattr(si, rule)(np.sin(a * t), x=t)
    a = 1.3
    np.testing.assert_allclose(xform.jit(integral)(a), integral(a), rtol=1e-14)
    check_grads(integral, (a,), order=2, rtol=1e-6, atol=1e-9)
    a_s = np.array([0.5, 1.3])
    np.testing.assert_allclose(xform.vmap(xform.jacfwd(integral))(a_s),
                               np.stack([xform.jacfwd(integral)(v) for v in a_s]), rtol=1e-12)


def test_vmap_of_quad_is_a_loop_of_solves():
    def f(a, b):
        return si.quad(lambda t: np.cos(a * t), 0.0, b)[0]
    a_s, b_s = np.array([0.5, 1.0, 2.0]), np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(xform.vmap(f)(a_s, b_s), np.sin(a_s * b_s) / a_s, rtol=1e-10)
    np.testing.assert_allclose(xform.vmap(xform.grad(f, 1))(a_s, b_s), np.cos(a_s * b_s),
                               rtol=1e-10)


def test_scipys_warning_as_eagerly():
    def f(a):
        return si.quad(lambda t: a / np.sqrt(np.abs(t - 0.3)) * np.sin(1 / (t + 1e-3)), 0.0,
                       1.0, limit=3)[0]
    with warnings.catch_warnings(record=True) as eager:
        warnings.simplefilter("always")
        f(1.0)
    with warnings.catch_warnings(record=True) as staged:
        warnings.simplefilter("always")
        xform.jit(f)(1.0)
    assert [type(w.message) for w in eager] == [type(w.message) for w in staged]
    assert eager


def test_unsupported_options_are_named():
    with pytest.raises(UnsupportedError, match="weight"):
        xform.grad(lambda a: si.quad(lambda t: a * t, 0, 1, weight="cos", wvar=2.0)[0])(1.0)


def test_scipy_untouched_outside_staging():
    before = si.quad(np.exp, 0, 1)
    xform.grad(lambda a: si.quad(lambda t: a * t, 0, 1)[0])(1.0)
    assert si.quad(np.exp, 0, 1) == before
    assert type(si.quad(np.exp, 0, 1)[0]) is float


def test_the_compiled_tier_agrees_with_the_first_call():
    for transform in (xform.jit, xform.grad, xform.hessian):
        function = transform(gaussian_mass)
        calls = [function(1.3) for _ in range(3)]
        assert calls[0] == calls[1] == calls[2]


def test_an_integral_of_constants_inside_a_staged_function_is_scipys_own():
    def f(a):
        value, error = si.quad(np.exp, 0.0, 1.0)      # nothing traced: SciPy's own call
        assert type(value) is float and type(error) is float
        return a * value
    assert xform.grad(f)(2.0) == pytest.approx(np.e - 1, rel=1e-12)


def test_quad_vec_of_a_scalar_integrand():
    def f(a):
        return si.quad_vec(lambda t: np.exp(-a * t), 0.0, 1.0, epsrel=1e-12, norm="max")[0]
    a = 0.7
    assert xform.jit(f)(a) == f(a)
    assert xform.grad(f)(a) == pytest.approx((np.exp(-a) * (a + 1) - 1) / a ** 2, rel=1e-9)
