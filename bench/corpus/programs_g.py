"""Iterative solvers, optimizers inside, polynomial classes, SDEs, dict parameters."""
import math
import numpy as np
import scipy.optimize
from bench.corpus.harness import prog

A_SPD = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])


@prog([(np.array([1.0, 2.0, 3.0]),), (np.array([-1.0, 0.5, 0.2]),)])
def conjugate_gradient(b):
    x = np.zeros_like(b)
    r = b - A_SPD @ x
    p = r.copy()
    rs = r @ r
    while np.sqrt(rs) > 1e-10:
        Ap = A_SPD @ p
        alpha = rs / (p @ Ap)
        x = x + alpha * p
        r = r - alpha * Ap
        rs_new = r @ r
        p = r + (rs_new / rs) * p
        rs = rs_new
    return np.sum(x ** 2)


@prog([(np.array([[2.0, 1.0], [1.0, 3.0]]),), (np.array([[5.0, 0.5], [0.5, 1.0]]),)], vmap=False)
def power_iteration(M):
    v = np.ones(len(M)) / np.sqrt(len(M))
    lam = 0.0
    for _ in range(500):
        w = M @ v
        lam_new = v @ w
        v = w / np.linalg.norm(w)
        if abs(lam_new - lam) < 1e-13:
            break
        lam = lam_new
    return lam_new


@prog([(1.3,), (0.4,)])
def golden_section(a):
    f = lambda x: (x - a) ** 2 + 0.1 * x ** 4
    lo, hi = -3.0, 3.0
    gr = (math.sqrt(5) - 1) / 2
    c, d = hi - gr * (hi - lo), lo + gr * (hi - lo)
    while abs(hi - lo) > 1e-10:
        if f(c) < f(d):
            hi = d
        else:
            lo = c
        c, d = hi - gr * (hi - lo), lo + gr * (hi - lo)
    xmin = (lo + hi) / 2
    return f(xmin)


@prog([(np.array([1.0, 2.0]),), (np.array([0.3, -0.5]),)])
def gd_with_backtracking(target):
    def loss(x):
        return np.sum((x - target) ** 2) + 0.5 * np.sum(x ** 4)
    x = np.zeros(2)
    for it in range(30):
        g = 2 * (x - target) + 2 * x ** 3
        t = 1.0
        while loss(x - t * g) > loss(x) - 0.5 * t * (g @ g):
            t *= 0.5
        x = x - t * g
    return loss(x)


@prog([(2.0,), (3.5,)])
def gauss_legendre(a):
    nodes, weights = np.polynomial.legendre.leggauss(8)
    x = 0.5 * a * (nodes + 1)
    return 0.5 * a * np.sum(weights * np.exp(-x) * np.cos(x))


@prog([(np.array([0.1, 0.4, 0.9, 1.6, 2.5, 3.6]),), (np.array([1.0, 0.8, 1.1, 1.9, 3.2, 5.0]),)])
def polynomial_class_fit(y):
    x = np.linspace(0, 1, 6)
    p = np.polynomial.Polynomial.fit(x, y, 2)
    return p(0.5) + p.deriv()(0.2)


@prog([(np.array([1.0, 0.5, -0.3, 0.2]),), (np.array([0.2, -0.1, 0.4, 1.0]),)])
def chebyshev_series(c):
    x = np.linspace(-1, 1, 9)
    return np.sum(np.polynomial.chebyshev.chebval(x, c) ** 2)


@prog([(np.array([0.9, 0.2]),), (np.array([0.6, 0.5]),)])
def markov_stationary(p):
    P = np.array([[p[0], 1 - p[0], 0.0], [0.1, 1 - 0.1 - p[1], p[1]], [0.3, 0.3, 0.4]])
    pi = np.ones(3) / 3
    for _ in range(200):
        pi = pi @ P
    P50 = np.linalg.matrix_power(P, 50)
    return pi[0] + P50[1, 2]


@prog([(np.array([0.5, 1.0]),), (np.array([1.5, 0.2]),)], fresh=lambda: (np.random.default_rng(7),))
def euler_maruyama(theta, rng):
    mu, sigma = theta
    x = 1.0
    dt = 0.01
    path = [x]
    for n in range(100):
        dW = rng.standard_normal() * np.sqrt(dt)
        x = x + mu * x * dt + sigma * x * dW
        path.append(x)
    return np.mean(path)


@prog([(np.array([2.0, -1.0, 0.5, 3.0, -0.2]),), (np.array([-1.0, 0.3, 0.7, -2.0, 1.1]),)])
def where_index_loop(x):
    total = 0.0
    for i in np.where(x > 0)[0]:
        total += x[i] ** 2
    n = np.count_nonzero(x < 0)
    return total + n * np.sum(x[x < 0])


@prog([(0.5,), (2.0,)], vmap=False)
def jacobi_allclose(c):
    A = np.array([[4.0, 1.0, 0.0], [1.0, 5.0, 1.0], [0.0, 1.0, 3.0]])
    b = np.array([1.0, c, 2.0])
    x = np.zeros(3)
    D = np.diag(A)
    R = A - np.diagflat(D)
    while True:
        x_new = (b - R @ x) / D
        if np.allclose(x_new, x, rtol=0, atol=1e-12):
            break
        x = x_new
    return x_new @ x_new


@prog([(np.array([1.0, 2.0]),), (np.array([-0.5, 0.3]),)], hess=False, jvpgrad=False)
def inner_minimize(a):
    res = scipy.optimize.minimize(lambda z: np.sum((z - a) ** 2) + np.sum(z ** 4), np.zeros(2))
    return res.fun + np.sum(res.x)


def _penalties(params):
    total = 0.0
    for name, value in params.items():
        if name.startswith('w'):
            total += np.sum(value ** 2)
        else:
            total += np.sum(np.abs(value))
    return total


@prog([(np.array([1.0, -2.0, 0.5]),), (np.array([0.1, 0.3, -0.7]),)])
def dict_params(v):
    params = {'w1': v[:2], 'b1': v[2:], 'w2': v * 2}
    return _penalties(params) + sum(np.sum(p) for p in params.values())


@prog([(np.array([1.0, 0.0]),), (np.array([0.5, 0.5]),)])
def method_switch_string(y0):
    def step(y, h, method):
        f = lambda z: np.array([z[1], -z[0]])
        if method == "euler":
            return y + h * f(y)
        elif method == "midpoint":
            return y + h * f(y + 0.5 * h * f(y))
        raise ValueError(method)
    y = y0
    for method in ["euler", "midpoint"] * 10:
        y = step(y, 0.05, method)
    return y[0]


@prog([(np.array([1.0, 2.0, 0.5]),), (np.array([0.3, 0.2, 1.5]),)])
def kron_outer_build(v):
    K = np.kron(np.outer(v, v), np.eye(2))
    L = np.linalg.cholesky(K + 3 * np.eye(6))
    return np.sum(np.log(np.diag(L)))


@prog([(np.array([0.5, 1.5, 2.5]),), (np.array([1.0, 2.0, 0.1]),)])
def richardson(h0):
    def D(h):
        return (np.sin(1 + h) - np.sin(1 - h)) / (2 * h)
    out = 0.0
    for h in h0:
        table = [[D(h / 2 ** i)] for i in range(4)]
        for j in range(1, 4):
            for i in range(j, 4):
                table[i].append(table[i][j - 1] + (table[i][j - 1] - table[i - 1][j - 1]) / (4 ** j - 1))
        out += table[3][3] * h
    return out
