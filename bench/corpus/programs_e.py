"""More idioms: printing progress, math.floor, vectorize, Thomas algorithm, Gauss-Seidel,
Butcher tableaux in dicts, searchsorted tables, histogram, odeint, legacy np.random."""
import math
import numpy as np
import scipy.integrate
from bench.corpus.harness import prog


@prog([(2.0,), (7.0,)])
def newton_with_progress(a):
    x = a
    it = 0
    err = abs(x * x - a)
    while err > 1e-12:
        x = x - (x * x - a) / (2 * x)
        err = abs(x * x - a)
        it += 1
        print(f"iter {it}: x={x:.6f} err={err:.2e}", end="\r")
    print()
    return x


@prog([(0.37,), (2.61,)])
def floor_cell(x):
    n = 10
    cell = math.floor(x * n) % n
    frac = x * n - math.floor(x * n)
    table = np.linspace(0, 1, n + 1) ** 2
    return (1 - frac) * table[cell] + frac * table[cell + 1]


@prog([(np.array([0.3, -1.2, 2.5]),), (np.array([1.3, 0.2, -0.5]),)])
def vectorize_piecewise(x):
    def f(v):
        if v > 0:
            return v ** 2
        return -v
    return np.sum(np.vectorize(f)(x))


@prog([(np.array([1.0, 2.0, 0.5, 1.5, 3.0]),), (np.array([0.5, 0.5, 0.5, 2.0, 1.0]),)])
def thomas_tridiagonal(d):
    n = len(d)
    a = -np.ones(n)
    b = 4.0 * np.ones(n)
    c = -np.ones(n)
    cp = np.zeros(n)
    dp = np.zeros(n)
    cp[0] = c[0] / b[0]
    dp[0] = d[0] / b[0]
    for i in range(1, n):
        m = b[i] - a[i] * cp[i - 1]
        cp[i] = c[i] / m
        dp[i] = (d[i] - a[i] * dp[i - 1]) / m
    x = np.zeros(n)
    x[-1] = dp[-1]
    for i in range(n - 2, -1, -1):
        x[i] = dp[i] - cp[i] * x[i + 1]
    return np.sum(x ** 2)


@prog([(1.0,), (3.0,)], vmap=False)
def gauss_seidel_laplace(top):
    n = 6
    u = np.zeros((n, n))
    u[0, :] = top
    err = 1.0
    while err > 1e-4:
        err = 0.0
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                new = 0.25 * (u[i + 1, j] + u[i - 1, j] + u[i, j + 1] + u[i, j - 1])
                err = max(err, abs(new - u[i, j]))
                u[i, j] = new
    return u[n // 2, n // 2]


TABLEAU = {
    'a': [[], [0.5], [0.0, 0.5], [0.0, 0.0, 1.0]],
    'b': [1 / 6, 1 / 3, 1 / 3, 1 / 6],
    'c': [0.0, 0.5, 0.5, 1.0],
}


@prog([(np.array([1.0, 0.0]),), (np.array([0.3, -0.8]),)])
def butcher_rk(y0):
    def f(t, y):
        return np.array([y[1], -y[0] + 0.1 * np.cos(t)])
    y, t, h = y0, 0.0, 0.1
    for step in range(20):
        ks = []
        for i, ci in enumerate(TABLEAU['c']):
            yi = y + h * sum(aij * kj for aij, kj in zip(TABLEAU['a'][i], ks))
            ks.append(f(t + ci * h, yi))
        y = y + h * sum(bi * ki for bi, ki in zip(TABLEAU['b'], ks))
        t += h
    return y[0] ** 2 + y[1]


@prog([(np.array([0.13, 0.47, 0.92]),), (np.array([0.05, 0.55, 0.61]),)])
def searchsorted_table(xq):
    grid = np.linspace(0, 1, 9)
    vals = np.exp(grid)
    idx = np.searchsorted(grid, xq) - 1
    t = (xq - grid[idx]) / (grid[idx + 1] - grid[idx])
    return np.sum(vals[idx] * (1 - t) + vals[idx + 1] * t)


@prog([(np.array([0.1, 0.45, 0.52, 0.9, 0.33, 0.7]),), (np.array([0.2, 0.27, 0.8, 0.85, 0.6, 0.4]),)])
def histogram_weights(x):
    counts, edges = np.histogram(x, bins=4, range=(0, 1), weights=x ** 2)
    centers = 0.5 * (edges[1:] + edges[:-1])
    return np.sum(counts * centers)


@prog([(0.5,), (1.5,)], vmap=False, hess=False, jvpgrad=False)
def odeint_decay(k):
    t = np.linspace(0, 2, 11)
    sol = scipy.integrate.odeint(lambda y, t: -k * y + np.sin(t), 1.0, t)
    return sol[-1, 0]


@prog([(np.array([0.5, 1.0]),), (np.array([1.5, -0.3]),)])
def legacy_random(w):
    np.random.seed(0)
    x = np.random.randn(50)
    noise = np.random.normal(0, 0.1, 50)
    y = 2 * x + 1 + noise
    return np.mean((w[0] * x + w[1] - y) ** 2)


@prog([(np.array([0.5, 1.0, 2.0]),), (np.array([1.5, -0.3, 0.1]),)])
def tolist_loop(x):
    total = 0.0
    for v in x.tolist():
        total += v * v
    return total + np.sum(x)


@prog([(np.array([0.5, 1.0, 2.0]),), (np.array([1.5, -0.3, 0.1]),)])
def round_and_isclose(x):
    s = 0.0
    for v in x:
        if math.isclose(v, 1.0, rel_tol=1e-9):
            continue
        k = round(v)
        s += (v - k) ** 2 + np.float64(v) * 2
    return s


@prog([(np.array([1.0, 2.0, 3.0, 4.0]),), (np.array([2.0, 0.5, 1.0, 3.0]),)])
def state_dict_sim(p):
    state = {'pos': np.zeros(2), 'vel': p[:2].copy(), 't': 0.0}
    params = {'drag': p[2] * 0.1, 'g': np.array([0.0, -9.81])}
    trajectory = []
    while state['t'] < 0.5:
        acc = params['g'] - params['drag'] * state['vel']
        state['vel'] = state['vel'] + 0.05 * acc
        state['pos'] = state['pos'] + 0.05 * state['vel']
        state['t'] += 0.05
        trajectory.append(state['pos'].copy())
    return np.sum(np.array(trajectory)[:, 1]) + p[3] * state['pos'][0]


class Particle:
    def __init__(self, x, v):
        self.x = x
        self.v = v

    def step(self, dt, k):
        self.v = self.v - dt * k * self.x
        self.x = self.x + dt * self.v


@prog([(np.array([1.0, 0.0, 2.0]),), (np.array([0.5, 1.0, 0.7]),)])
def particles_objects(p):
    ps = [Particle(p[0], p[1]), Particle(-p[0], 0.5 * p[1])]
    for _ in range(30):
        for q in ps:
            q.step(0.05, p[2])
    return sum(q.x ** 2 + q.v ** 2 for q in ps)


@prog([(np.array([0.3, 0.5]),), (np.array([1.1, 0.2]),)])
def np_gradient_image(p):
    x = np.linspace(0, 1, 15)
    X, Y = np.meshgrid(x, x)
    img = np.exp(-((X - p[0]) ** 2 + (Y - 0.5) ** 2) / p[1])
    gy, gx = np.gradient(img, x[1] - x[0])
    return np.sum(np.hypot(gx, gy))
