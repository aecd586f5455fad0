"""scipy.optimize with xform's derivatives: gradients, value-and-gradient, Hessians and
Hessian-vector products (forward over reverse) drive SciPy's minimizers to the optimum."""
import numpy as np
import pytest
import scipy.optimize
from hypothesis import given, settings
from scipy.optimize import minimize

import xform
from xform.testing import strategies as xst


def rosenbrock(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


starts = xst.arrays((4,), np.float64, -1.5, 1.5)
# made once: each is staged on its first call and then runs from the cache
gradient = xform.grad(rosenbrock)
hessian = xform.hessian(rosenbrock)


def hessp(x, p):
    """Hessian-vector product, forward over reverse."""
    return xform.jvp(gradient, (x,), (p,))[1]


@given(starts)
def test_derivatives_match_scipys_rosenbrock(x):
    np.testing.assert_allclose(xform.grad(rosenbrock)(x), scipy.optimize.rosen_der(x),
                               rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(xform.hessian(rosenbrock)(x), scipy.optimize.rosen_hess(x),
                               rtol=1e-12, atol=1e-9)
    p = np.arange(1.0, 5.0)
    hvp = xform.jvp(xform.grad(rosenbrock), (x,), (p,))[1]
    np.testing.assert_allclose(hvp, scipy.optimize.rosen_hess_prod(x, p), rtol=1e-12,
                               atol=1e-9)


@settings(max_examples=5)
@given(starts)
@pytest.mark.parametrize("how", ["jac", "jac=True", "hess", "hessp"])
def test_minimize_reaches_the_optimum(how, x0):
    if how == "jac":
        result = minimize(rosenbrock, x0, jac=gradient, method="BFGS",
                          options={"gtol": 1e-10})
    elif how == "jac=True":
        result = minimize(xform.value_and_grad(rosenbrock), x0, jac=True, method="L-BFGS-B",
                          options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 2000})
    elif how == "hess":
        result = minimize(rosenbrock, x0, jac=gradient, hess=hessian, method="trust-exact")
    else:
        result = minimize(rosenbrock, x0, jac=gradient, hessp=hessp,
                          method="trust-ncg", options={"gtol": 1e-10})
    # Rosenbrock in 4-d has a second, local minimum near (-0.78, 0.61, 0.38, 0.15)
    local = np.array([-0.7757, 0.6130, 0.3820, 0.1459])
    assert result.success, result.message
    assert np.allclose(result.x, 1.0, atol=1e-4) or np.allclose(result.x, local, atol=1e-3)
    np.testing.assert_allclose(gradient(result.x), 0.0, atol=1e-4)


def test_least_squares_fit_with_jacobian():
    """curve fitting: scipy.optimize.least_squares with jac=xform.jacrev of the residuals."""
    t = np.linspace(0, 3, 30)
    true = np.array([2.0, 0.7])
    data = true[0] * np.exp(-true[1] * t)

    def residuals(p):
        return p[0] * np.exp(-p[1] * t) - data
    result = scipy.optimize.least_squares(residuals, np.array([1.0, 0.1]),
                                          jac=xform.jacrev(residuals))
    np.testing.assert_allclose(result.x, true, rtol=1e-8)
