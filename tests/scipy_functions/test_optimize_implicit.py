"""scipy.optimize's solvers inside transformed functions (xform/scipy/optimize.py,
xform/rules/implicit.py): the solve is SciPy's own on concrete values, the derivative the
implicit function theorem's. Checked against closed forms (a root of a quadratic, ridge
regression, a linear least-squares fit), against the closed-form derivative at the solver's
own solution, and against finite differences of the solver's output, under grad, jvp, vmap and
second order; failures raise SolverError at the user's line."""
import numpy as np
import pytest
import scipy.optimize
import scipy.optimize as so

import xform
from tests.source_lines import assert_points_at
from xform.errors import SolverError, UnsupportedError
from xform.testing import check_grads

TIGHT = 1e-14


def central(f, x, eps=1e-5):
    """Central differences of f at x along each coordinate (x a float or 1-D array)."""
    x = np.asarray(x, np.float64)
    columns = []
    for i in range(x.size):
        step = np.zeros(x.size)
        step[i] = eps
        step = step.reshape(x.shape)
        columns.append((np.asarray(f(x + step)) - np.asarray(f(x - step))) / (2 * eps))
    return np.stack(columns, -1).reshape(np.shape(f(x)) + x.shape)


# -- scalar roots: the larger root of x^2 - 2 b x + c, b + sqrt(b^2 - c) ----------------------

def quadratic(x, b, c):
    return x ** 2 - 2 * b * x + c


SCALAR_ROOTS = {
    "brentq": lambda b, c: so.brentq(quadratic, b, 10.0, args=(b, c), xtol=TIGHT),
    "brenth": lambda b, c: so.brenth(quadratic, b, 10.0, args=(b, c), xtol=TIGHT),
    "ridder": lambda b, c: so.ridder(quadratic, b, 10.0, args=(b, c), xtol=TIGHT),
    "bisect": lambda b, c: so.bisect(quadratic, b, 10.0, args=(b, c), xtol=TIGHT),
    "newton": lambda b, c: so.newton(quadratic, 5.0, args=(b, c), tol=TIGHT),
    "newton fprime": lambda b, c: so.newton(lambda x: quadratic(x, b, c), 5.0,
                                            fprime=lambda x: 2 * x - 2 * b, tol=TIGHT),
    "halley": lambda b, c: so.newton(lambda x: quadratic(x, b, c), 5.0,
                                     fprime=lambda x: 2 * x - 2 * b,
                                     fprime2=lambda x: 2.0 + 0 * x, tol=TIGHT),
    "root_scalar brentq": lambda b, c: so.root_scalar(quadratic, (b, c), bracket=[b, 10.0],
                                                      xtol=TIGHT).root,
    "root_scalar toms748": lambda b, c: so.root_scalar(quadratic, (b, c), method="toms748",
                                                       bracket=[b, 10.0], xtol=TIGHT).root,
    "root_scalar newton fprime=True": lambda b, c: so.root_scalar(
        lambda x: (quadratic(x, b, c), 2 * x - 2 * b), x0=5.0, fprime=True,
        method="newton", xtol=TIGHT).root,
    "root_scalar halley fprime2=True": lambda b, c: so.root_scalar(
        lambda x: (quadratic(x, b, c), 2 * x - 2 * b, 2.0 + 0 * x), x0=5.0, fprime=True,
        fprime2=True, method="halley", xtol=TIGHT).root,
    "root_scalar halley callables": lambda b, c: so.root_scalar(
        quadratic, (b, c), x0=5.0, fprime=lambda x, b, c: 2 * x - 2 * b,
        fprime2=lambda x, b, c: 2.0 + 0 * x, method="halley", xtol=TIGHT).root,
    "root_scalar secant": lambda b, c: so.root_scalar(quadratic, (b, c), x0=5.0, x1=4.0,
                                                      method="secant", xtol=TIGHT).root,
}


def larger_root(b, c):
    return b + np.sqrt(b ** 2 - c)


def larger_root_grad(b, c):
    s = np.sqrt(b ** 2 - c)
    return np.array([1 + b / s, -0.5 / s])


@pytest.mark.parametrize("name", sorted(SCALAR_ROOTS))
def test_scalar_root_matches_the_closed_form(name):
    solve = SCALAR_ROOTS[name]
    b, c = 1.3, 0.4
    assert float(xform.jit(solve)(b, c)) == pytest.approx(larger_root(b, c), rel=1e-12)
    grads = xform.grad(solve, (0, 1))(b, c)
    np.testing.assert_allclose(grads, larger_root_grad(b, c), rtol=1e-9)
    tangent = xform.jvp(solve, (b, c), (0.3, -0.7))[1]
    np.testing.assert_allclose(tangent, larger_root_grad(b, c) @ [0.3, -0.7], rtol=1e-9)


@pytest.mark.parametrize("name", ["brentq", "newton", "root_scalar secant"])
def test_scalar_root_second_order_and_vmap(name):
    solve = SCALAR_ROOTS[name]
    b, c = 1.3, 0.4
    hessian = xform.hessian(solve, (0, 1))(b, c)
    want = central(lambda v: larger_root_grad(v[0], v[1]), np.array([b, c]), 1e-6)
    np.testing.assert_allclose(np.array(hessian, dtype=float).reshape(2, 2), want, rtol=1e-6)
    cs = np.array([0.1, 0.4, 0.9])
    np.testing.assert_allclose(xform.vmap(solve, (None, 0))(b, cs), larger_root(b, cs),
                               rtol=1e-12)
    np.testing.assert_allclose(xform.vmap(xform.grad(solve, 1), (None, 0))(b, cs),
                               larger_root_grad(b, cs)[1], rtol=1e-9)


def test_check_grads_through_a_closed_over_parameter():
    def cube_root(a):
        return so.brentq(lambda x: x ** 3 - a, 0.0, 4.0, xtol=TIGHT)   # closes over a
    check_grads(cube_root, (2.5,), order=2, rtol=1e-6, atol=1e-8)


# -- systems ----------------------------------------------------------------------------------

def system(x, p):
    return np.stack([x[0] ** 2 + x[1] - p[0], x[0] - x[1] ** 3 - p[1]])


@pytest.mark.parametrize("how", ["fsolve", "fsolve fprime", "hybr", "lm", "hybr jac=True",
                                 "krylov", "broyden1", "broyden2", "anderson", "df-sane"])
def test_system_root_against_finite_differences(how):
    def jac(x, p):
        return np.stack([np.stack([2 * x[0], np.ones(())]),
                         np.stack([np.ones(()), -3 * x[1] ** 2])])

    def solve(p):
        x0 = np.array([1.0, 0.5])
        if how == "fsolve":
            return so.fsolve(system, x0, args=(p,), xtol=1e-13)
        if how == "fsolve fprime":
            return so.fsolve(system, x0, args=(p,), fprime=jac, xtol=1e-13)
        if how == "hybr jac=True":
            return so.root(lambda x: (system(x, p), jac(x, p)), x0, jac=True, tol=1e-13).x
        if how in ("krylov", "broyden1", "broyden2", "anderson", "df-sane"):
            return so.root(system, x0, args=(p,), method=how, options={"fatol": 1e-12}).x
        return so.root(system, x0, args=(p,), method=how, tol=1e-13).x
    p = np.array([2.0, 0.3])
    x = solve(p)
    np.testing.assert_array_equal(xform.jit(solve)(p), x)
    jacobian = xform.jacfwd(solve)(p)
    # at the solver's own solution: dx/dp = J_x^-1 (F_p = -I)
    np.testing.assert_allclose(jacobian, np.linalg.inv(jac(x, p)), rtol=1e-8)
    np.testing.assert_allclose(xform.jacrev(solve)(p), jacobian, rtol=1e-12)
    # differences of the quasi-Newton solvers' output are as rough as their stopping rule
    rough = how in ("krylov", "broyden1", "broyden2", "anderson", "df-sane")
    np.testing.assert_allclose(jacobian, central(solve, p), rtol=1e-3 if rough else 1e-5,
                               atol=1e-7)


def test_root_result_carries_the_residual():
    def residual_norm(p):
        result = so.root(system, np.array([1.0, 0.5]), args=(p,), tol=1e-13)
        assert result.success
        return np.sum(result.fun ** 2) + np.sum(result.x)
    p = np.array([2.0, 0.3])
    assert abs(xform.jit(residual_norm)(p) - residual_norm(p)) < 1e-12


# -- minima -----------------------------------------------------------------------------------

def quartic(x, a):
    return np.sum((x - a) ** 2) + np.sum(x ** 4)


def quartic_gradient(x, a):
    return 2 * (x - a) + 4 * x ** 3


def quartic_hessian(x, a):
    return np.diag(2 + 12 * x ** 2)


def quartic_hvp(x, p, a):
    return (2 + 12 * x ** 2) * p


GRADIENT_FREE = ["Nelder-Mead", "Powell", "COBYLA", "COBYQA"]
WITH_GRADIENT = ["CG", "BFGS", "L-BFGS-B", "TNC", "SLSQP", "Newton-CG", "trust-constr"]
WITH_HESSIAN = ["dogleg", "trust-ncg", "trust-exact", "trust-krylov"]
OPTIONS = {"Nelder-Mead": {"xatol": 1e-13, "fatol": 1e-15, "maxiter": 20000},
           "Powell": {"xtol": 1e-13, "ftol": 1e-15}, "COBYLA": {"rhobeg": 0.5},
           "COBYQA": {}, "CG": {"gtol": 1e-8}, "BFGS": {"gtol": 1e-9},
           "L-BFGS-B": {"gtol": 1e-12, "ftol": 1e-15}, "TNC": {"gtol": 1e-12},
           "SLSQP": {"ftol": 1e-15}, "Newton-CG": {"xtol": 1e-13},
           "trust-constr": {"gtol": 1e-12, "xtol": 1e-14}}


@pytest.mark.parametrize("method", GRADIENT_FREE + WITH_GRADIENT + WITH_HESSIAN)
def test_minimize_every_method(method):
    def argmin(a):
        kwargs = {"options": OPTIONS.get(method, {}), "method": method}
        if method in WITH_GRADIENT + WITH_HESSIAN:
            kwargs["jac"] = quartic_gradient
        if method in WITH_HESSIAN:
            kwargs["hess"] = quartic_hessian
        if method == "COBYLA":
            kwargs["tol"] = 1e-12
        return so.minimize(quartic, np.zeros(3), args=(a,), **kwargs).x
    a = np.array([0.5, -1.0, 2.0])
    x = argmin(a)
    np.testing.assert_array_equal(xform.jit(argmin)(a), x)
    # The theorem at the solver's own solution: dx/da = diag(2 / (2 + 12 x^2)).
    want = np.diag(2 / (2 + 12 * x ** 2))
    np.testing.assert_allclose(xform.jacfwd(argmin)(a), want, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(xform.jacrev(argmin)(a), want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("given", ["jac=True", "hessp", "2-point"])
def test_minimize_with_the_users_derivatives(given):
    def argmin(a):
        if given == "jac=True":
            return so.minimize(lambda x: (quartic(x, a), quartic_gradient(x, a)), np.zeros(3),
                               jac=True, method="BFGS", options={"gtol": 1e-9}).x
        if given == "hessp":
            return so.minimize(quartic, np.zeros(3), args=(a,), jac=quartic_gradient,
                               hessp=quartic_hvp, method="trust-ncg",
                               options={"gtol": 1e-12}).x
        return so.minimize(quartic, np.zeros(3), args=(a,), jac="2-point", method="BFGS",
                           options={"gtol": 1e-8}).x
    a = np.array([0.5, -1.0, 2.0])
    x = argmin(a)
    np.testing.assert_allclose(xform.jacrev(argmin)(a), np.diag(2 / (2 + 12 * x ** 2)),
                               rtol=1e-9, atol=1e-12)


def ridge(A, y, lam):
    n = A.shape[1]
    return np.linalg.solve(A.T @ A + lam * np.eye(n), A.T @ y)


def test_bilevel_ridge_against_the_closed_form():
    """Outer loss on validation data of the inner argmin over weights: its gradient and
    second derivative in the regularisation strength, by the theorem, equal the closed form's
    (ridge regression), and vmap over strengths equals a loop."""
    rng = np.random.default_rng(0)
    A, y = rng.standard_normal((20, 4)), rng.standard_normal(20)
    A_val, y_val = rng.standard_normal((10, 4)), rng.standard_normal(10)

    def inner(w, lam):
        return np.sum((A @ w - y) ** 2) + lam * np.sum(w ** 2)

    def outer(lam):
        w = so.minimize(inner, np.zeros(4), args=(lam,), method="BFGS",
                        jac=lambda w, lam: 2 * A.T @ (A @ w - y) + 2 * lam * w,
                        options={"gtol": 1e-12}).x
        return np.sum((A_val @ w - y_val) ** 2)

    def outer_exact(lam):
        return np.sum((A_val @ ridge(A, y, lam) - y_val) ** 2)
    lam = 0.7
    np.testing.assert_allclose(xform.grad(outer)(lam), xform.grad(outer_exact)(lam), rtol=1e-8)
    np.testing.assert_allclose(xform.hessian(outer)(lam), xform.hessian(outer_exact)(lam),
                               rtol=1e-7)
    lams = np.array([0.1, 0.7, 3.0])
    np.testing.assert_allclose(xform.vmap(xform.grad(outer))(lams),
                               [xform.grad(outer_exact)(v) for v in lams], rtol=1e-8)


def test_minimize_without_the_users_gradient_gets_xforms_hessian():
    a = np.array([0.5, -1.0])

    def argmin(a):
        return so.minimize(quartic, np.zeros(2), args=(a,), method="Nelder-Mead",
                           options={"xatol": 1e-13, "fatol": 1e-16, "maxiter": 20000}).x
    x = argmin(a)
    # second order: d2x/da2 from differentiating dx/da = 2/(2 + 12 x^2) once more
    hessian = xform.jacfwd(xform.jacrev(argmin))(a)
    first = 2 / (2 + 12 * x ** 2)
    second = -2 * 24 * x * first / (2 + 12 * x ** 2) ** 2
    want = np.zeros((2, 2, 2))
    want[0, 0, 0], want[1, 1, 1] = second
    np.testing.assert_allclose(hessian, want, rtol=1e-8, atol=1e-12)


def test_minimize_scalar_methods():
    def argmin(a, method):
        if method == "bounded":
            return so.minimize_scalar(quartic, bounds=(-3.0, 3.0), args=(a,),
                                      method="bounded", options={"xatol": 1e-12}).x
        return so.minimize_scalar(quartic, args=(a,), method=method, tol=1e-14).x
    for method in ("brent", "golden", "bounded"):
        x = argmin(0.8, method)
        grad = xform.grad(lambda a: argmin(a, method))(0.8)
        assert grad == pytest.approx(2 / (2 + 12 * x ** 2), rel=1e-7), method


def test_active_bounds_pin_their_coordinates():
    def argmin(a):
        return so.minimize(lambda x: np.sum((x - a) ** 2), np.zeros(2), method="L-BFGS-B",
                           bounds=[(-0.5, 5.0), (-0.5, 5.0)]).x
    a = np.array([1.5, -2.0])          # the second coordinate rests on its lower bound
    np.testing.assert_allclose(argmin(a), [1.5, -0.5], atol=1e-8)
    np.testing.assert_allclose(xform.jacrev(argmin)(a), np.diag([1.0, 0.0]), atol=1e-12)
    np.testing.assert_allclose(xform.jacfwd(argmin)(a), np.diag([1.0, 0.0]), atol=1e-12)


def test_least_squares_linear_fit_matches_the_pseudo_inverse():
    t = np.linspace(0, 1, 8)
    A = np.stack([np.ones_like(t), t, t ** 2], 1)

    def fit(y, method):
        return so.least_squares(lambda p: A @ p - y, np.zeros(3), method=method,
                                xtol=1e-15, ftol=1e-15, gtol=1e-15).x
    y = np.cos(3 * t)
    for method in ("trf", "dogbox", "lm"):
        np.testing.assert_allclose(xform.jacrev(lambda y: fit(y, method))(y),
                                   np.linalg.pinv(A), atol=1e-10)
        np.testing.assert_allclose(xform.jacfwd(lambda y: fit(y, method))(y),
                                   np.linalg.pinv(A), atol=1e-10)


def test_least_squares_nonlinear_against_finite_differences():
    t = np.linspace(0, 2, 12)

    def fit(theta):
        data = theta[0] * np.exp(-theta[1] * t) + 0.05 * np.sin(5 * t)

        def residuals(p):
            return p[0] * np.exp(-p[1] * t) - data

        def jacobian(p):
            e = np.exp(-p[1] * t)
            return np.stack([e, -p[0] * t * e], 1)
        result = so.least_squares(residuals, np.array([1.0, 0.5]), jac=jacobian,
                                  xtol=1e-15, ftol=1e-15, gtol=1e-15)
        return result.x + result.cost
    theta = np.array([2.0, 0.7])
    np.testing.assert_allclose(xform.jacrev(fit)(theta), central(fit, theta, 1e-5),
                               rtol=1e-6, atol=1e-8)


# -- failures ---------------------------------------------------------------------------------

def test_no_convergence_raises_at_the_users_line():
    def root(c):
        return so.brentq(lambda x: x ** 2 - c, 0.0, 10.0, maxiter=2)  # line: brentq
    with pytest.raises(SolverError) as info:
        xform.grad(root)(2.0)
    assert "brentq did not converge" in str(info.value)
    assert_points_at(info.value, __file__, "brentq")

    def argmin(a):
        return so.minimize(quartic, np.zeros(2), args=(a,), method="BFGS",  # line: minimize
                           options={"maxiter": 1}).x
    with pytest.raises(SolverError) as info:
        xform.jit(argmin)(np.ones(2))
    assert_points_at(info.value, __file__, "minimize")


def test_a_singular_jacobian_says_so():
    def solve(c):
        # every point of the line x0 + x1 = c is a root: no isolated solution
        residual = lambda x: np.stack([x[0] + x[1] - c, 2 * x[0] + 2 * x[1] - 2 * c])  # noqa
        return so.fsolve(residual, np.zeros(2))  # line: fsolve
    np.testing.assert_allclose(np.sum(xform.jit(solve)(1.0)), 1.0)
    with pytest.raises(SolverError) as info:
        xform.grad(lambda c: np.sum(solve(c)))(1.0)
    assert "singular" in str(info.value)
    assert_points_at(info.value, __file__, "fsolve")


def test_constraints_are_refused_by_name():
    def argmin(a):
        return so.minimize(quartic, np.zeros(2), args=(a,), method="SLSQP",
                           constraints=[{"type": "eq", "fun": lambda x: x[0] - x[1]}])
    with pytest.raises(UnsupportedError, match="constraints"):
        xform.grad(lambda a: argmin(a).fun)(np.ones(2))


def test_scipy_untouched_outside_staging():
    before = so.brentq(lambda x: x - 1.0, 0.0, 2.0)
    xform.grad(lambda c: so.brentq(lambda x: x - c, 0.0, 2.0))(1.0)
    assert so.brentq(lambda x: x - 1.0, 0.0, 2.0) == before
    assert type(so.minimize(lambda x: np.sum(x ** 2), np.ones(2)).nit) is int
    assert scipy.optimize.brentq is so.brentq


def test_large_minimum_solves_with_hessian_vector_products():
    """Above DENSE_HESSIAN_MAX unknowns no Hessian is formed: the theorem's solve is MINRES on
    Hessian-vector products (hessian_solve), in both modes and at second order."""
    from xform.rules.implicit import DENSE_HESSIAN_MAX
    n = DENSE_HESSIAN_MAX + 20
    rng = np.random.default_rng(1)

    def coupled(x, a):
        return np.sum((x - a) ** 2) + np.sum(x ** 4) + 0.1 * np.sum(x[1:] * x[:-1])

    def coupled_gradient(x, a):
        shifted = np.concatenate([x[1:], [0.0]]) + np.concatenate([[0.0], x[:-1]])
        return 2 * (x - a) + 4 * x ** 3 + 0.1 * shifted

    def argmin(a):
        return so.minimize(coupled, np.zeros(n), args=(a,), jac=coupled_gradient,
                           method="L-BFGS-B", options={"gtol": 1e-12, "ftol": 1e-15}).x
    a, ct, t = rng.standard_normal((3, n))
    x = argmin(a)
    hessian = np.diag(2 + 12 * x ** 2) + 0.1 * (np.eye(n, k=1) + np.eye(n, k=-1))
    jacobian = np.linalg.solve(hessian, 2 * np.eye(n))
    grad = xform.grad(lambda a: argmin(a) @ ct)
    np.testing.assert_allclose(grad(a), jacobian.T @ ct, atol=1e-10)
    np.testing.assert_allclose(xform.jvp(argmin, (a,), (t,))[1], jacobian @ t, atol=1e-10)
    assert "hessian_solve" in str(xform.make_graph(grad)(a))

    def loss(a):
        return np.sum(argmin(a) ** 2)
    hvp = xform.jvp(xform.grad(loss), (a,), (t,))[1]
    eps = 1e-5
    differences = (xform.grad(loss)(a + eps * t) - xform.grad(loss)(a - eps * t)) / (2 * eps)
    np.testing.assert_allclose(hvp, differences, rtol=1e-5, atol=1e-5)


def test_shooting_through_solve_ivp_in_reverse_mode():
    """brentq around solve_ivp: the theorem's reverse mode takes vjps of the condition only
    (the ODE solve has reverse mode by its adjoint). y'' = -k y, y(0) = 0, y'(0) = s,
    y(1) = target: s = target sqrt(k) / sin(sqrt(k))."""
    from scipy.integrate import solve_ivp

    def shoot(k, target):
        def miss(s):
            sol = solve_ivp(lambda t, y: np.stack([y[1], -k * y[0]]), (0.0, 1.0),
                            np.stack([0.0, s]), t_eval=np.array([0.0, 1.0]), rtol=1e-11,
                            atol=1e-12)
            return sol.y[0, -1] - target
        return so.brentq(miss, 0.1, 10.0, xtol=1e-13)
    k, target = 2.0, 0.8
    w = np.sqrt(k)
    d_k = target * (np.sin(w) - w * np.cos(w)) / (2 * w * np.sin(w) ** 2)
    np.testing.assert_allclose(xform.grad(shoot, (0, 1))(k, target), [d_k, w / np.sin(w)],
                               rtol=1e-8)


@pytest.mark.parametrize("loss", ["soft_l1", "huber", "cauchy", "arctan"])
def test_least_squares_robust_losses(loss):
    """A non-linear loss: the solution is the minimum of SciPy's robust cost, which the
    result's cost reports as SciPy's does."""
    t = np.linspace(0, 2, 15)
    outliers = np.where(np.arange(15) % 5 == 0, 1.5, 0.0)

    def fit(theta):
        data = theta[0] * np.exp(-theta[1] * t) + outliers
        result = so.least_squares(lambda p: p[0] * np.exp(-p[1] * t) - data,
                                  np.array([1.0, 0.5]), loss=loss, f_scale=0.3,
                                  xtol=1e-15, ftol=1e-15, gtol=1e-15)
        return result.x, result.cost
    theta = np.array([2.0, 0.7])
    x, cost = xform.jit(fit)(theta)
    want_x, want_cost = fit(theta)
    np.testing.assert_allclose(x, want_x, rtol=1e-14)
    np.testing.assert_allclose(cost, want_cost, rtol=1e-12)

    # The theorem at the solver's own solution, by hand: -H^-1 d(grad)/d(theta), with H
    # and the mixed derivative of SciPy's robust cost written out in numpy.
    def cost_of(p, theta):
        r = p[0] * np.exp(-p[1] * t) - theta[0] * np.exp(-theta[1] * t) - outliers
        z = (r / 0.3) ** 2
        rho = {"soft_l1": 2 * (np.sqrt(1 + z) - 1), "cauchy": np.log1p(z),
               "arctan": np.arctan(z),
               "huber": np.where(z <= 1, z, 2 * np.sqrt(np.maximum(z, 1)) - 1)}[loss]
        return 0.5 * 0.3 ** 2 * np.sum(rho)
    hessian = xform.hessian(cost_of)(want_x, theta)
    mixed = xform.jacfwd(xform.grad(cost_of), 1)(want_x, theta)
    np.testing.assert_allclose(xform.jacrev(lambda th: fit(th)[0])(theta),
                               -np.linalg.solve(hessian, mixed), rtol=1e-9, atol=1e-12)


def test_the_compiled_tier_agrees_with_the_first_call():
    """A transformed function's second call compiles its graph (the solution equation's
    params hold a graph and a solver): every call gives the first call's bits."""
    def argmin_sum(a):
        return np.sum(so.minimize(quartic, np.zeros(2), args=(a,), jac=quartic_gradient,
                                  method="BFGS").x)
    for transform in (xform.jit, xform.grad, xform.hessian):
        function = transform(argmin_sum)
        calls = [function(np.array([0.5, -1.0])) for _ in range(3)]
        np.testing.assert_array_equal(calls[0], calls[1])
        np.testing.assert_array_equal(calls[0], calls[2])


def test_newton_on_arrays_is_elementwise():
    """newton on an array solves one scalar equation per element (SciPy's contract): the
    theorem's system is diagonal, one jvp (or the user's fprime), never an n x n matrix."""
    n = 3000

    def cube_roots(c, use_fprime):
        fprime = (lambda x: 3 * x ** 2) if use_fprime else None
        return so.newton(lambda x: x ** 3 - c, np.ones(n), fprime=fprime, tol=1e-14)
    c = np.linspace(0.5, 3.0, n)
    for use_fprime in (False, True):
        grad = xform.grad(lambda c: np.sum(cube_roots(c, use_fprime)))(c)
        np.testing.assert_allclose(grad, c ** (-2 / 3) / 3, rtol=1e-9)
        tangent = xform.jvp(lambda c: cube_roots(c, use_fprime), (c,), (np.ones(n),))[1]
        np.testing.assert_allclose(tangent, c ** (-2 / 3) / 3, rtol=1e-9)
    lanes = np.stack([c[:4], 2 * c[:4]])
    small = xform.vmap(xform.grad(lambda c: np.sum(so.newton(lambda x: x ** 3 - c, np.ones(4),
                                                             tol=1e-14))))(lanes)
    np.testing.assert_allclose(small, lanes ** (-2 / 3) / 3, rtol=1e-9)


def test_shapes_as_scipys():
    """fsolve, root, minimize and least_squares call the functions with a 1-D x and return
    one, also from a scalar start; minimize refuses a 2-D x0 as SciPy does."""
    def residual(x, c):
        assert np.ndim(x) == 1
        return x ** 2 - c
    for solve in (lambda c: so.fsolve(residual, 1.0, args=(c,)),
                  lambda c: so.root(residual, 1.0, args=(c,)).x,
                  lambda c: so.minimize(lambda x: np.sum(residual(x, c) ** 2), 1.0).x,
                  lambda c: so.least_squares(residual, 1.0, args=(c,)).x):
        assert solve(2.0).shape == xform.jit(solve)(2.0).shape == (1,)
        assert xform.jacrev(solve)(2.0).shape == (1,)
    with pytest.raises(xform.ShapeError, match="one dimension"):
        xform.jit(lambda a: so.minimize(lambda x: np.sum((x - a) ** 2), np.ones((2, 2))).x)(1.0)


def test_a_solve_of_constants_inside_a_staged_function_is_scipys_own():
    def f(a):
        result = so.minimize(lambda x: np.sum((x - 1.0) ** 2), np.zeros(2))   # constants
        assert type(result.nit) is int                  # SciPy's full result, counters too
        return a * np.sum(result.x)
    assert xform.grad(f)(2.0) == pytest.approx(2.0, rel=1e-6)
