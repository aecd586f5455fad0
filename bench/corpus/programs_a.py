"""ODE steppers, root finding, iterations."""
import math
import numpy as np
from bench.corpus.harness import prog


@prog([(np.array([1.0, 0.5]),), (np.array([-0.3, 2.0]),)])
def euler_decay(y0):
    k = np.array([0.5, 1.5])
    y = y0.copy()
    dt = 0.01
    for _ in range(100):
        y = y + dt * (-k * y + np.sin(y))
    return np.sum(y ** 2)


@prog([(np.array([1.0, 0.0]),), (np.array([0.2, 1.0]),)])
def rk4_pendulum(state):
    def f(s):
        theta, omega = s
        return np.array([omega, -9.81 * np.sin(theta)])
    h = 0.01
    s = state
    for i in range(50):
        k1 = f(s)
        k2 = f(s + h / 2 * k1)
        k3 = f(s + h / 2 * k2)
        k4 = f(s + h * k3)
        s = s + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    theta, omega = s
    return 0.5 * omega ** 2 + 9.81 * (1 - np.cos(theta))


@prog([(0.5,), (2.0,)], vmap=True)
def adaptive_rk(k):
    # Heun/Euler embedded pair with step rejection, while t < T
    t, T, y, h = 0.0, 1.0, 1.0, 0.1
    tol = 1e-6
    while t < T:
        if t + h > T:
            h = T - t
        f0 = -k * y
        y_e = y + h * f0
        y_h = y + h / 2 * (f0 + (-k * y_e))
        err = abs(y_h - y_e)
        if err < tol:
            t += h
            y = y_h
        h = 0.9 * h * min(2.0, max(0.2, math.sqrt(tol / max(err, 1e-16))))
    return y


@prog([(2.0,), (10.0,)])
def newton_sqrt(a):
    x = a
    while abs(x * x - a) > 1e-12 * a:
        x = 0.5 * (x + a / x)
    return x


@prog([(0.3,), (1.7,)])
def bisection_root(c):
    # root of x^3 + c x - 1 on [0, 1]
    lo, hi = 0.0, 1.0
    f = lambda x: x ** 3 + c * x - 1
    while hi - lo > 1e-12:
        mid = 0.5 * (lo + hi)
        if f(lo) * f(mid) <= 0:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


@prog([(0.5,), (1.5,)])
def secant_kepler(e):
    # Kepler: E - e sin E = M
    M = 1.0
    x0, x1 = M, M + 0.1
    for it in range(50):
        f0 = x0 - e * np.sin(x0) - M
        f1 = x1 - e * np.sin(x1) - M
        if abs(f1 - f0) < 1e-15:
            break
        x0, x1 = x1, x1 - f1 * (x1 - x0) / (f1 - f0)
        if abs(x1 - x0) < 1e-13:
            break
    return x1


@prog([(0.3,), (0.8,)])
def fixed_point_cos(a):
    x = 0.0
    err = 1.0
    n = 0
    while err > 1e-12 and n < 500:
        xn = a * math.cos(x) + (1 - a) * 0.5
        err = abs(xn - x)
        x = xn
        n += 1
    return x


@prog([(np.array([1.0, 2.0, 3.0]),), (np.array([0.5, -1.0, 0.2]),)])
def newton_system(p):
    # solve x + p * x**3 = 1 elementwise with vector Newton and a norm stop
    x = np.zeros_like(p)
    for it in range(100):
        r = x + p * x ** 3 - 1.0
        if np.linalg.norm(r) < 1e-12:
            break
        J = np.diag(1 + 3 * p * x ** 2)
        x = x - np.linalg.solve(J, r)
    return np.sum(x * np.arange(1, 4))


@prog([(np.array([1.0, 0.0, 0.0, 0.3]),), (np.array([0.5, 0.2, -0.1, 0.4]),)])
def two_body(s):
    # Velocity Verlet, planar orbit, energy at end
    pos = s[:2].copy()
    vel = s[2:].copy()
    dt = 0.01
    def acc(r):
        d = np.sqrt(r @ r)
        return -r / d ** 3
    a = acc(pos)
    for _ in range(40):
        pos = pos + dt * vel + 0.5 * dt ** 2 * a
        a_new = acc(pos)
        vel = vel + 0.5 * dt * (a + a_new)
        a = a_new
    return 0.5 * vel @ vel - 1.0 / np.linalg.norm(pos)


@prog([(np.array([0.0, 1.0]),), (np.array([1.0, -0.5]),)])
def euler_traj_prealloc(y0):
    T = 60
    dt = 0.05
    Y = np.zeros((T, 2))
    Y[0] = y0
    for t in range(T - 1):
        x, v = Y[t]
        Y[t + 1, 0] = x + dt * v
        Y[t + 1, 1] = v + dt * (-x - 0.1 * v)
    return Y[:, 0].sum() * dt


@prog([(0.4,), (1.2,)])
def implicit_euler_scalar(k):
    # backward Euler for y' = -k y^3 with Newton at each step
    y = 1.0
    h = 0.1
    for n in range(20):
        z = y
        for it in range(20):
            g = z - y + h * k * z ** 3
            dg = 1 + 3 * h * k * z ** 2
            step = g / dg
            z -= step
            if abs(step) < 1e-14:
                break
        y = z
    return y


@prog([(np.array([1.0, 1.0, 1.0]),), (np.array([2.0, 0.5, -1.0]),)])
def lorenz_euler_list(x0):
    sigma, rho, beta = 10.0, 28.0, 8.0 / 3.0
    traj = [x0]
    dt = 0.002
    x = x0
    for i in range(100):
        dx = np.array([sigma * (x[1] - x[0]), x[0] * (rho - x[2]) - x[1], x[0] * x[1] - beta * x[2]])
        x = x + dt * dx
        traj.append(x)
    traj = np.array(traj)
    return traj[:, 2].mean()
