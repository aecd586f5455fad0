"""solve_ivp without t_eval (the ends of t_span), with dense_output=True (sol.sol(t)), every
method; forward mode and second order through solve_ivp; events refused by name. Values
against SciPy's, derivatives against the closed form of a harmonic oscillator and finite
differences (xform/scipy/integrate.py, xform/rules/ode.py)."""
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import xform
from xform.errors import UnsupportedError

TOL = dict(rtol=1e-10, atol=1e-10)
METHODS = ["RK45", "RK23", "DOP853", "Radau", "BDF", "LSODA"]


def oscillator(t, y, k):
    return np.stack([y[1], -k * y[0]])


def position_exact(k, t):
    """y'' = -k y from (1, 0): cos(sqrt(k) t); its derivative in k."""
    w = np.sqrt(k)
    return np.cos(w * t), -np.sin(w * t) * t / (2 * w)


@pytest.mark.parametrize("method", METHODS)
def test_final_state_without_t_eval(method):
    def final(k, end):
        sol = solve_ivp(oscillator, (0.0, end), np.array([1.0, 0.0]), method=method,
                        args=(k,), **TOL)
        return sol.y[:, -1]
    k, end = 1.7, 2.0
    eager = final(k, end)
    np.testing.assert_allclose(xform.jit(final)(k, end), eager, rtol=1e-14, atol=1e-15)
    _, d_k = position_exact(k, end)
    loose = 1e-5 if method in ("RK23", "LSODA", "BDF") else 1e-6
    assert xform.jacfwd(final)(k, end)[0] == pytest.approx(d_k, rel=loose)
    assert xform.jacrev(final)(k, end)[0] == pytest.approx(d_k, rel=loose)
    # the end of t_span: d y(T) / dT = f(y(T))
    np.testing.assert_allclose(xform.jacrev(final, 1)(k, end), oscillator(end, eager, k),
                               rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("method", ["RK45", "Radau"])
def test_dense_output_at_given_times(method):
    times = np.array([0.3, 0.9, 1.6])

    def positions(k, times):
        sol = solve_ivp(oscillator, (0.0, 2.0), np.array([1.0, 0.0]), method=method,
                        args=(k,), dense_output=True, **TOL)
        return sol.sol(times)[0]
    k = 1.7
    np.testing.assert_allclose(xform.jit(positions)(k, times), positions(k, times),
                               rtol=1e-13, atol=1e-14)
    want, d_k = position_exact(k, times)
    np.testing.assert_allclose(positions(k, times), want, rtol=1e-7)
    np.testing.assert_allclose(xform.jacrev(positions)(k, times), d_k, rtol=1e-5)
    np.testing.assert_allclose(xform.jacfwd(positions)(k, times), d_k, rtol=1e-5)
    scalar = xform.grad(lambda k: solve_ivp(oscillator, (0.0, 2.0), np.array([1.0, 0.0]),
                                            args=(k,), dense_output=True, **TOL).sol(0.9)[0])(k)
    assert scalar == pytest.approx(position_exact(k, 0.9)[1], rel=1e-5)


def test_second_order_through_solve_ivp():
    def final_position(k):
        return solve_ivp(oscillator, (0.0, 2.0), np.array([1.0, 0.0]), args=(k,),
                         method="DOP853", rtol=1e-12, atol=1e-12).y[0, -1]
    k = 1.7
    w = np.sqrt(k)
    # d2/dk2 cos(2 sqrt(k)) = -cos(2w)/k + sin(2w)/(2 k w)
    want = -np.cos(2 * w) / k + np.sin(2 * w) / (2 * k * w)
    assert xform.hessian(final_position)(k) == pytest.approx(want, rel=1e-6)
    assert xform.jacfwd(xform.jacfwd(final_position))(k) == pytest.approx(want, rel=1e-6)
    assert xform.jacrev(xform.jacrev(final_position))(k) == pytest.approx(want, rel=1e-6)


def test_vmap_of_adaptive_solves():
    def final(k):
        return solve_ivp(oscillator, (0.0, 2.0), np.array([1.0, 0.0]), args=(k,),
                         **TOL).y[0, -1]
    ks = np.array([0.5, 1.0, 2.0])
    np.testing.assert_allclose(xform.vmap(final)(ks), [final(k) for k in ks], rtol=1e-13)
    np.testing.assert_allclose(xform.vmap(xform.grad(final))(ks), position_exact(ks, 2.0)[1],
                               rtol=1e-6)


def test_the_solvers_own_times_and_events_are_refused_by_name():
    def all_states(k):
        return solve_ivp(oscillator, (0.0, 2.0), np.array([1.0, 0.0]), args=(k,)).y[0, 3]
    with pytest.raises(UnsupportedError, match="t_eval"):
        xform.grad(all_states)(1.0)
    for use in (len, np.asarray, lambda y: y.shape):
        with pytest.raises(UnsupportedError, match="t_eval"):
            xform.jit(lambda k: use(solve_ivp(oscillator, (0.0, 2.0), np.array([1.0, 0.0]),
                                              args=(k,)).y))(1.0)

    def with_events(k):
        return solve_ivp(oscillator, (0.0, 2.0), np.array([1.0, 0.0]), args=(k,),
                         events=lambda t, y, k: y[0]).y[0, -1]
    with pytest.raises(UnsupportedError, match="events"):
        xform.grad(with_events)(1.0)
