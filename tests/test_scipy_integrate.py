"""scipy.integrate staged unmodified (xform/scipy/integrate.py, xform/rules/ode.py): odeint
and solve_ivp values against SciPy; gradients in y0, the time points, args and closed-over
values against autograd's odeint (the same adjoint method) and finite differences; vmap
against a loop; forward mode and second order against reverse mode and differences."""
import autograd
import autograd.numpy as anp
import numpy as np
import pytest
import scipy.integrate
from autograd.builtins import tuple as autograd_tuple
from autograd.scipy.integrate import odeint as autograd_odeint
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import odeint, solve_ivp

import xform
from xform.testing import strategies as xst

TOL = dict(rtol=1e-10, atol=1e-10)


def damped(y, t, k, c):
    """A forced, damped linear system (y of length 2)."""
    return np.stack([y[1], -k[0] * y[0] - k[1] * y[1] + c * np.sin(t)])


def autograd_damped(y, t, k, c):
    return anp.array([y[1], -k[0] * y[0] - k[1] * y[1] + c * anp.sin(t)])


@st.composite
def problems(draw):
    y0 = draw(xst.arrays((2,), np.float64, -1, 1))
    steps = draw(xst.arrays((draw(st.integers(2, 4)),), np.float64, 0.2, 1.0))
    t = np.concatenate([[draw(st.floats(-0.5, 0.5))], steps]).cumsum()
    k = draw(xst.arrays((2,), np.float64, 0.2, 2.0))
    return y0, t, k, draw(st.floats(-1, 1))


def check_gradient_by_differences(f, args, rtol, atol, eps=1e-5):
    """xform.grad of scalar `f` against central differences along one random direction per
    argument (check_grads would also run forward mode, which odeint refuses)."""
    grads = xform.grad(f, tuple(range(len(args))))(*args)
    rng = np.random.default_rng(0)
    for i, (arg, grad) in enumerate(zip(args, grads)):
        direction = rng.standard_normal(np.shape(arg))
        if i == 1 and np.ndim(arg) == 1:   # time points: keep them increasing
            direction = direction * 0.1
        moved = [list(args), list(args)]
        moved[0][i] = arg + eps * direction
        moved[1][i] = arg - eps * direction
        numeric = (f(*moved[0]) - f(*moved[1])) / (2 * eps)
        np.testing.assert_allclose(np.sum(grad * direction), numeric, rtol=rtol, atol=atol)


def loss(y0, t, k, c):
    ys = odeint(damped, y0, t, args=(k, c), **TOL)
    return np.sum(ys ** 2 * np.arange(1, ys.size + 1).reshape(ys.shape))


def autograd_loss(y0, t, k, c):
    ys = autograd_odeint(autograd_damped, y0, t, autograd_tuple((k, c)), **TOL)
    return anp.sum(ys ** 2 * np.arange(1, ys.size + 1).reshape(ys.shape))


@settings(max_examples=10)
@given(problems())
def test_odeint_values_match_scipy(problem):
    y0, t, k, c = problem
    np.testing.assert_allclose(xform.jit(lambda *a: odeint(damped, a[0], a[1], args=a[2:],
                                                           **TOL))(y0, t, k, c),
                               odeint(damped, y0, t, args=(k, c), **TOL), rtol=1e-12,
                               atol=1e-12)


@settings(max_examples=10)
@given(problems())
def test_odeint_gradient_matches_autograd(problem):
    mine = xform.grad(loss, (0, 1, 2, 3))(*problem)
    theirs = autograd.grad(autograd_loss, (0, 1, 2, 3))(*problem)
    for m, r in zip(mine, theirs):
        np.testing.assert_allclose(m, r, rtol=1e-7, atol=1e-8)


@settings(max_examples=5)
@given(problems())
def test_odeint_gradient_matches_finite_differences(problem):
    # tolerances follow the solver's 1e-10 and the differences' step
    check_gradient_by_differences(loss, problem, rtol=1e-5, atol=1e-5)


def test_closed_over_values_and_helpers_get_gradients():
    y0, t = np.array([1.0, 0.0]), np.linspace(0.0, 2.0, 4)

    def simulate(k):
        def rhs(y, s):          # closes over the traced k
            return np.stack([y[1], -k * y[0]])
        return odeint(rhs, y0, t, **TOL)

    def fit(k):
        return np.sum(simulate(k)[:, 0])
    check_gradient_by_differences(fit, (1.3,), rtol=1e-5, atol=1e-6)
    exact = np.sum(np.cos(np.sqrt(1.3) * t))
    np.testing.assert_allclose(xform.jit(fit)(1.3), exact, rtol=1e-8)


@pytest.mark.parametrize("method", ["RK45", "DOP853", "LSODA", "Radau"])
def test_solve_ivp_with_t_eval(method):
    y0, k = np.array([1.0, -0.5]), np.array([0.8, 0.3])
    t_eval = np.linspace(0.5, 2.0, 5)

    def final(y0, t_eval, k):
        result = solve_ivp(lambda s, y, k: damped(y, s, k, 0.2), (0.0, 3.0), y0,
                           method=method, t_eval=t_eval, args=(k,), **TOL)
        return np.sum(result.y ** 2)
    want = solve_ivp(lambda s, y, k: damped(y, s, k, 0.2), (0.0, 3.0), y0, method=method,
                     t_eval=t_eval, args=(k,), **TOL).y
    got = xform.jit(lambda *a: solve_ivp(lambda s, y: damped(y, s, a[2], 0.2), (0.0, 3.0),
                                         a[0], method=method, t_eval=a[1], **TOL).y)(
        y0, t_eval, k)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    check_gradient_by_differences(final, (y0, t_eval, k), rtol=1e-4, atol=1e-5)


def test_solve_ivp_span_ending_at_t_eval():
    t_eval = np.linspace(0.0, 1.0, 4)
    want = solve_ivp(lambda s, y: -y, (0.0, 1.0), np.ones(2), t_eval=t_eval, **TOL).y
    got = xform.jit(lambda te: solve_ivp(lambda s, y: -y, (0.0, 1.0), np.ones(2), t_eval=te,
                                         **TOL).y)(t_eval)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_vmap_matches_loop():
    y0s = np.array([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])
    t, k = np.linspace(0, 1, 3), np.array([1.0, 0.5])

    def f(y0):
        return odeint(damped, y0, t, args=(k, 0.1), **TOL)
    np.testing.assert_allclose(xform.vmap(f)(y0s), np.stack([f(y) for y in y0s]),
                               rtol=1e-12)
    g = xform.grad(lambda y0: np.sum(f(y0) ** 2))
    np.testing.assert_allclose(xform.vmap(g)(y0s), np.stack([g(y) for y in y0s]),
                               rtol=1e-12)


def test_forward_mode_and_second_order_against_reverse_and_differences():
    """jvp solves the tangent with the state; the adjoint is made of odeint equations, so
    hessian (forward over the adjoint) and jacrev of jacrev exist too."""
    y0, t, k, c = np.array([1.0, -0.5]), np.linspace(0.0, 1.5, 4), np.array([0.8, 0.3]), 0.2
    for forward, reverse in zip(xform.jacfwd(loss, (0, 1, 2))(y0, t, k, c),
                                xform.jacrev(loss, (0, 1, 2))(y0, t, k, c)):
        np.testing.assert_allclose(forward, reverse, rtol=1e-6, atol=1e-8)
    hessian = xform.hessian(loss, 2)(y0, t, k, c)
    np.testing.assert_allclose(hessian, hessian.T, rtol=1e-6)
    step = 1e-5
    differences = np.stack([(xform.grad(loss, 2)(y0, t, k + e, c) -
                             xform.grad(loss, 2)(y0, t, k - e, c)) / (2 * step)
                            for e in np.eye(2) * step])
    np.testing.assert_allclose(hessian, differences, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(xform.jacrev(xform.jacrev(loss, 2), 2)(y0, t, k, c), hessian,
                               rtol=1e-6, atol=1e-8)


def test_scipy_untouched_outside_staging():
    t = np.linspace(0, 1, 3)
    before = odeint(lambda y, s: -y, np.ones(2), t)
    xform.grad(lambda a: np.sum(odeint(lambda y, s: -a * y, np.ones(2), t)))(1.0)
    after = odeint(lambda y, s: -y, np.ones(2), t)
    np.testing.assert_array_equal(before, after)
    assert scipy.integrate.odeint is odeint
    assert type(solve_ivp(lambda s, y: -y, (0, 1), np.ones(2)).y) is np.ndarray


def test_odeint_args_hold_a_list_of_arrays_of_different_shapes():
    """A neural ODE's parameters as autograd's example passes them: odeint(f, y0, t,
    args=(params,)) with params a list of a matrix and a vector; values as SciPy's,
    gradients against finite differences."""
    def dynamics(y, t, params):
        weights, bias = params
        return np.tanh(weights @ y + bias) - 0.1 * y

    y0, t = np.array([1.0, 0.5]), np.array([0.0, 0.5, 1.0])
    params = [np.array([[0.5, -0.3], [0.2, 0.4]]), np.array([0.1, -0.2])]

    def loss(params, y0):
        ys = scipy.integrate.odeint(dynamics, y0, t, args=(params,), rtol=1e-10, atol=1e-12)
        return np.sum(ys ** 2)
    np.testing.assert_allclose(xform.jit(loss)(params, y0), loss(params, y0), rtol=1e-9)
    grads = xform.grad(loss)(params, y0)
    assert [g.shape for g in grads] == [(2, 2), (2,)]
    _assert_matches_central_differences(lambda p: loss(p, y0), params, grads)
    # solve_ivp passes args the same way

    def loss_ivp(params):
        sol = scipy.integrate.solve_ivp(lambda s, y, p: dynamics(y, s, p), (0.0, 1.0), y0,
                                        t_eval=t, args=(params,), rtol=1e-10, atol=1e-12)
        return np.sum(sol.y ** 2)
    _assert_matches_central_differences(loss_ivp, params, xform.grad(loss_ivp)(params))


def _assert_matches_central_differences(f, arrays, grads, h=1e-6):
    """Each entry of `grads` (one array per entry of the list `arrays`) against a central
    difference of `f` (reverse mode only: forward mode does not go through an ODE solve)."""
    for k, (array, grad) in enumerate(zip(arrays, grads)):
        for index in np.ndindex(array.shape):
            step = np.zeros_like(array)
            step[index] = h
            plus = [a + step if j == k else a for j, a in enumerate(arrays)]
            minus = [a - step if j == k else a for j, a in enumerate(arrays)]
            np.testing.assert_allclose(grad[index], (f(plus) - f(minus)) / (2 * h),
                                       rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("y0", [1.0, np.array([1.0, 2.0])], ids=["number", "vector"])
def test_odeint_of_a_number_gives_one_column_as_scipy_does(y0):
    # SciPy's odeint works on y0 as a vector: a number gives rows of one element, and func
    # is called on such a vector
    t = np.linspace(0.0, 1.0, 4)

    def solve(k):
        return odeint(lambda y, s: -k * y * (y.ndim == 1), y0, t, **TOL)
    np.testing.assert_allclose(xform.jit(solve)(0.7), solve(0.7), rtol=1e-10, atol=1e-12)
    assert xform.grad(lambda k: solve(k)[-1, 0])(0.7) == pytest.approx(
        -np.ravel(y0)[0] * np.exp(-0.7), rel=1e-6)
