"""PDEs, semi-Lagrangian, interpolation, quadrature, Monte Carlo."""
import math
import numpy as np
from bench.corpus.harness import prog

X = np.linspace(0, 1, 21)


@prog([(0.1,), (0.5,)])
def heat_explicit(kappa):
    nx, nt = 21, 50
    dx = 1.0 / (nx - 1)
    dt = 0.2 * dx * dx
    u = np.zeros((nt + 1, nx))
    u[0] = np.sin(np.pi * np.linspace(0, 1, nx))
    for n in range(nt):
        for i in range(1, nx - 1):
            u[n + 1, i] = u[n, i] + kappa * dt / dx ** 2 * (u[n, i + 1] - 2 * u[n, i] + u[n, i - 1])
    return u[-1].sum()


@prog([(np.sin(np.pi * X),), (np.exp(-((X - 0.3) / 0.1) ** 2),)])
def heat_slices(u0):
    u = u0.copy()
    r = 0.4
    for n in range(30):
        u[1:-1] = u[1:-1] + r * (u[2:] - 2 * u[1:-1] + u[:-2])
    return np.sum(u ** 2)


@prog([(0.7,), (-0.7,)])
def advection_upwind(c):
    nx = 30
    x = np.linspace(0, 1, nx)
    u = np.exp(-((x - 0.5) / 0.1) ** 2)
    dx = x[1] - x[0]
    dt = 0.5 * dx
    for n in range(10):
        un = u.copy()
        for i in range(1, nx - 1):
            if c > 0:
                u[i] = un[i] - c * dt / dx * (un[i] - un[i - 1])
            else:
                u[i] = un[i] - c * dt / dx * (un[i + 1] - un[i])
    return np.sum(u * x)


@prog([(1.0,), (0.5,)])
def wave_leapfrog(c):
    nx = 25
    x = np.linspace(0, 1, nx)
    dx = x[1] - x[0]
    dt = 0.5 * dx
    u_prev = np.sin(np.pi * x)
    u = u_prev.copy()
    C2 = (c * dt / dx) ** 2
    for n in range(20):
        u_next = np.empty_like(u)
        u_next[0] = 0.0
        u_next[-1] = 0.0
        u_next[1:-1] = 2 * u[1:-1] - u_prev[1:-1] + C2 * (u[2:] - 2 * u[1:-1] + u[:-2])
        u_prev, u = u, u_next
    return u @ u


@prog([(0.3,), (2.7,), (-1.9,)])
def semi_lagrangian(c):
    n = 40
    grid = np.linspace(0.0, 1.0, n, endpoint=False)
    u = np.exp(-((grid - 0.5) / 0.1) ** 2)
    dt = 0.05
    for step in range(5):
        xd = (grid - c * dt) % 1.0
        j = (xd * n).astype(int)
        w = xd * n - j
        u = (1 - w) * u[j] + w * u[(j + 1) % n]
    return np.sum(u ** 2)


@prog([(np.array([0.15, 0.62, 0.87]),), (np.array([0.05, 0.33, 0.71]),)])
def table_lookup_interp(xq):
    xs = np.linspace(0, 1, 11)
    ys = np.sin(2 * np.pi * xs)
    out = 0.0
    for x in xq:
        i = int(x * 10)
        t = (x - xs[i]) / (xs[i + 1] - xs[i])
        out += (1 - t) * ys[i] + t * ys[i + 1]
    return out


@prog([(np.array([0.15, 0.62, 0.87]),), (np.array([0.05, 0.33, 0.71]),)])
def np_interp(xq):
    xs = np.linspace(0, 1, 11)
    ys = xs ** 2
    return np.sum(np.interp(xq, xs, ys) * xq)


@prog([(1.0,), (2.5,)])
def trapz_by_hand(a):
    n = 50
    x = np.linspace(0, a, n + 1)
    y = np.exp(-x ** 2) * np.cos(a * x)
    h = a / n
    s = 0.5 * (y[0] + y[-1])
    for i in range(1, n):
        s += y[i]
    return s * h


@prog([(1.0,), (2.5,)])
def simpson_by_hand(a):
    n = 40
    h = a / n
    total = 0.0
    for i in range(n + 1):
        x = i * h
        w = 1 if i == 0 or i == n else (4 if i % 2 == 1 else 2)
        total += w * math.exp(-x) * x if False else w * np.exp(-x) * np.sin(a * x)
    return total * h / 3


@prog([(1.0,), (2.5,)])
def np_trapezoid(a):
    x = np.linspace(0.0, a, 101)
    return np.trapezoid(np.sqrt(1 + a * x ** 2), x)


@prog([(np.array([0.2, 1.5]),), (np.array([1.0, 0.3]),)])
def monte_carlo_inside(theta):
    rng = np.random.default_rng(42)
    z = rng.standard_normal(2000)
    x = theta[0] + theta[1] * z
    return np.mean(np.maximum(x, 0.0) ** 2)


RNG_GLOBAL = np.random.default_rng(7)


@prog([(np.array([0.2, 1.5]),), (np.array([1.0, 0.3]),)], fresh=lambda: (np.random.default_rng(3),))
def monte_carlo_passed(theta, rng):
    u = rng.uniform(size=1000)
    samples = theta[0] - np.log(u) / theta[1] ** 2
    return samples.mean()


@prog([(1.0,), (3.0,)])
def mc_pi_area(r):
    rng = np.random.default_rng(0)
    pts = rng.uniform(-1, 1, size=(500, 2))
    inside = np.sum(pts ** 2, axis=1) <= 1.0
    frac = inside.mean()
    return frac * 4 * r ** 2
