"""A last batch: random walks, queueing, heat with boundary flux, optimisation loops."""
import math
import numpy as np
from bench.corpus.harness import prog


@prog([(np.array([0.1, 0.3]),), (np.array([-0.2, 0.5]),)], fresh=lambda: (np.random.default_rng(11),))
def random_walk_cumsum(theta, rng):
    steps = theta[0] + theta[1] * rng.standard_normal(200)
    path = np.cumsum(steps)
    hit = np.argmax(path > 2.0) if np.any(path > 2.0) else len(path) - 1
    return path[hit] + np.max(path) - np.min(path)


@prog([(np.array([1.0, 1.5]),), (np.array([0.7, 2.0]),)], fresh=lambda: (np.random.default_rng(2),))
def queue_simulation(rates, rng):
    lam, mu = rates
    t, n, area = 0.0, 0, 0.0
    u = rng.uniform(size=(300, 2))
    for k in range(300):
        ta = -np.log(u[k, 0]) / lam
        ts = -np.log(u[k, 1]) / mu if n > 0 else np.inf
        dt = min(ta, ts)
        area += n * dt
        t += dt
        n = n + 1 if ta < ts else n - 1
    return area / t


@prog([(2.0,), (0.5,)])
def heat_neumann_flux(q):
    n = 20
    dx = 1.0 / n
    u = np.zeros(n + 1)
    r = 0.4
    for step in range(100):
        un = u.copy()
        u[1:-1] = un[1:-1] + r * (un[2:] - 2 * un[1:-1] + un[:-2])
        u[0] = u[1] + q * dx          # flux boundary
        u[-1] = 0.0
    return u[0] + np.trapezoid(u, dx=dx)


@prog([(np.array([1.0, 1.0]),), (np.array([-1.2, 1.0]),)], hess=False, jvpgrad=False)
def newton_rosenbrock_inside(x0):
    x = x0.copy()
    for it in range(50):
        g = np.array([-2 * (1 - x[0]) - 400 * x[0] * (x[1] - x[0] ** 2), 200 * (x[1] - x[0] ** 2)])
        H = np.array([[2 - 400 * x[1] + 1200 * x[0] ** 2, -400 * x[0]], [-400 * x[0], 200.0]])
        dx = np.linalg.solve(H, -g)
        x = x + dx
        if np.linalg.norm(dx) < 1e-12:
            break
    return np.sum(x) + np.sum(x0 ** 2)


@prog([(np.array([0.4, 0.6, 0.2, 0.9]),), (np.array([0.1, 0.2, 0.3, 0.4]),)])
def entropy_softmax(logits):
    z = logits - max(logits)
    p = [math.exp(v) if False else np.exp(v) for v in z]
    s = sum(p)
    p = [pi / s for pi in p]
    return -sum(pi * np.log(pi) for pi in p if pi > 1e-12)


@prog([(np.array([3.0, 4.0]),), (np.array([1.0, -2.0]),)])
def complex_roots_mag(c):
    z = complex(1.0, 0.0) * c[0] + 1j * c[1]
    w = z ** 2 + np.conj(z)
    return abs(w) + np.angle(z) + (z * np.conj(z)).real
