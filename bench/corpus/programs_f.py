"""More: spectra, solvers, filters, statistics with generators, dataclasses, scipy pieces."""
import dataclasses
import functools
import math
import numpy as np
import scipy.interpolate
import scipy.integrate
import scipy.signal
import scipy.stats
from bench.corpus.harness import prog


@prog([(np.array([0.0, 0.8, 0.9, 0.1, -0.5, 0.3]),), (np.array([1.0, 0.2, -0.4, 0.6, 0.0, 0.9]),)])
def cubic_spline_scipy(y):
    x = np.linspace(0, 1, 6)
    cs = scipy.interpolate.CubicSpline(x, y)
    xs = np.linspace(0, 1, 17)
    return np.sum(cs(xs) ** 2) + cs(0.33, 1)


@prog([(1.0,), (2.5,)])
def particle_in_box(V0):
    n = 30
    L = 1.0
    h = L / (n + 1)
    H = np.zeros((n, n))
    for i in range(n):
        x = (i + 1) * h
        H[i, i] = 2.0 / h ** 2 + (V0 if 0.4 < x < 0.6 else 0.0)
        if i > 0:
            H[i, i - 1] = H[i - 1, i] = -1.0 / h ** 2
    evals, evecs = np.linalg.eigh(H)
    return evals[0] + evals[1]


@prog([(np.array([0.0, 0.0, 1.1, 0.1, 0.2, 1.0, 1.3, 1.2]),), (np.array([0.0, 0.1, 0.9, 0.0, 0.1, 1.05, 1.0, 1.0]),)])
def lennard_jones_cutoff(flat):
    pos = flat.reshape(4, 2)
    i, j = np.triu_indices(len(pos), k=1)
    d = np.linalg.norm(pos[i] - pos[j], axis=1)
    rc = 1.5
    d = d[d < rc]
    return np.sum(4 * (d ** -12 - d ** -6))


@prog([(100.0,), (120.0,)])
def black_scholes_call(S):
    K, r, sigma, T = 110.0, 0.03, 0.25, 0.5
    d1 = (np.log(S / K) + (r + 0.5 * sigma ** 2) * T) / (sigma * math.sqrt(T))
    d2 = d1 - sigma * math.sqrt(T)
    return S * scipy.stats.norm.cdf(d1) - K * math.exp(-r * T) * scipy.stats.norm.cdf(d2)


def _bs(S, K, r, sigma, T):
    d1 = (np.log(S / K) + (r + 0.5 * sigma ** 2) * T) / (sigma * np.sqrt(T))
    d2 = d1 - sigma * np.sqrt(T)
    return S * scipy.stats.norm.cdf(d1) - K * np.exp(-r * T) * scipy.stats.norm.cdf(d2)


@prog([(10.0,), (15.0,)])
def implied_vol(price):
    S, K, r, T = 100.0, 105.0, 0.01, 1.0
    sigma = 0.2
    for it in range(100):
        diff = _bs(S, K, r, sigma, T) - price
        if abs(diff) < 1e-12:
            break
        d1 = (np.log(S / K) + (r + 0.5 * sigma ** 2) * T) / (sigma * np.sqrt(T))
        vega = S * scipy.stats.norm.pdf(d1) * np.sqrt(T)
        sigma = sigma - diff / vega
    return sigma


@prog([(0.5,), (2.0,)])
def crank_nicolson(kappa):
    n = 20
    dx = 1.0 / (n + 1)
    dt = 0.01
    r = kappa * dt / (2 * dx ** 2)
    A = np.diag((1 + 2 * r) * np.ones(n)) + np.diag(-r * np.ones(n - 1), 1) + np.diag(-r * np.ones(n - 1), -1)
    B = np.diag((1 - 2 * r) * np.ones(n)) + np.diag(r * np.ones(n - 1), 1) + np.diag(r * np.ones(n - 1), -1)
    u = np.sin(np.pi * np.linspace(dx, 1 - dx, n))
    for step in range(10):
        u = np.linalg.solve(A, B @ u)
    return u.sum()


@prog([(np.array([0.9, 0.1]),), (np.array([0.5, 0.5]),)])
def kalman_filter(params):
    a, q = params
    zs = [1.0, 1.3, 0.7, 1.1, 0.9, 1.5]
    x, P = 0.0, 1.0
    R = 0.2
    nll = 0.0
    for z in zs:
        x = a * x
        P = a * P * a + q ** 2
        S = P + R
        K = P / S
        nll += 0.5 * (math.log(2 * math.pi) + np.log(S) + (z - x) ** 2 / S)
        x = x + K * (z - x)
        P = (1 - K) * P
    return nll


@prog([(np.array([1.0, 0.5]),), (np.array([1.5, 0.8]),)], vmap=False, hess=False, jvpgrad=False)
def lotka_volterra_ivp(p):
    def rhs(t, z):
        x, y = z
        return [p[0] * x - 0.4 * x * y, -p[1] * y + 0.1 * x * y]
    t = np.linspace(0, 5, 11)
    sol = scipy.integrate.solve_ivp(rhs, (0, 5), [10.0, 5.0], t_eval=t, rtol=1e-8, atol=1e-10)
    return sol.y[0, -1] + sol.y[1].mean()


@prog([(np.array([0.2, 1.1, -0.4, 0.8, 2.0, 0.3]),), (np.array([1.2, 0.1, 0.4, -0.8, 1.0, 0.7]),)])
def bootstrap_choice(data):
    rng = np.random.default_rng(4)
    means = []
    for b in range(20):
        sample = rng.choice(data, size=len(data), replace=True)
        means.append(sample.mean())
    means = np.sort(means)
    return means[-2] - means[1]


@prog([(0.3,), (1.2,)])
def periodic_diffusion_roll(D):
    n = 32
    x = np.linspace(0, 1, n, endpoint=False)
    u = np.exp(-((x - 0.5) / 0.1) ** 2)
    for _ in range(20):
        u = u + D * 0.2 * (np.roll(u, 1) - 2 * u + np.roll(u, -1))
    return np.max(u)


@prog([(np.array([[0.1, 0.2, 0.1], [0.2, 0.4, 0.2], [0.1, 0.2, 0.1]]),), (np.array([[0.0, 0.5, 0.0], [0.5, 1.0, 0.5], [0.0, 0.5, 0.0]]),)], vmap=False, hess=False)
def convolve2d_kernel(k):
    img = np.outer(np.sin(np.linspace(0, 3, 9)), np.cos(np.linspace(0, 2, 8)))
    out = scipy.signal.convolve2d(img, k, mode='same', boundary='symm')
    return np.sum(out ** 2)


@prog([(np.array([3.0, 1.0, 2.5, 0.2]),), (np.array([0.5, 2.2, 1.0, 4.0]),)])
def builtin_key_functions(x):
    best = max(range(len(x)), key=lambda i: x[i])
    worst = min(range(len(x)), key=lambda i: x[i])
    ranked = sorted(zip(x, range(len(x))), key=lambda t: t[0], reverse=True)
    top2 = sum(v for v, _ in ranked[:2])
    return x[best] * 2 - x[worst] + top2 + sum(reversed([v * v for v in x]))


@dataclasses.dataclass
class State:
    pos: np.ndarray
    vel: np.ndarray
    t: float = 0.0


@prog([(np.array([1.0, 0.0, 0.0, 1.0]),), (np.array([0.5, 0.2, -0.3, 0.8]),)])
def dataclass_state(p):
    s = State(pos=p[:2], vel=p[2:])
    for _ in range(20):
        acc = -s.pos / np.linalg.norm(s.pos) ** 3
        s = dataclasses.replace(s, vel=s.vel + 0.01 * acc)
        s = dataclasses.replace(s, pos=s.pos + 0.01 * s.vel, t=s.t + 0.01)
    return np.sum(s.pos ** 2) + s.t


@prog([(np.array([0.5, -1.2, 2.0, 0.1]),), (np.array([-0.5, 1.2, -2.0, 0.3]),)])
def piecewise_select(x):
    y = np.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v ** 2])
    z = np.select([x < -1, x > 1], [x ** 3, np.sqrt(np.abs(x))], default=x)
    return np.sum(y) + np.sum(z)


@prog([(np.array([1.0, 0.0, 2.0, 1.0, 0.5]),), (np.array([0.0, 1.0, 0.5, 3.0, 1.0]),)])
def discounted_returns(rewards):
    gamma = 0.9
    G = np.zeros_like(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        running = rewards[t] + gamma * running
        G[t] = running
    disc = (gamma ** np.arange(len(rewards)) * rewards)[::-1].cumsum()[::-1]
    return np.sum(G ** 2) + np.sum(disc)


@prog([(np.array([1.0, 0.5, 0.25]),), (np.array([0.2, 1.0, -0.5]),)])
def matrix_chain_reduce(a):
    mats = [np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]) for t in a]
    M = functools.reduce(lambda A, B: A @ B, mats)
    return M[0, 1] + np.trace(M)


@prog([(np.array([0.3, 1.1]),), (np.array([1.3, -0.4]),)])
def fourier_series_complex(c):
    x = np.linspace(0, 2 * np.pi, 40, endpoint=False)
    f = c[0] * np.exp(1j * x) + c[1] * np.exp(2j * x)
    spec = np.fft.fft(f) / len(x)
    return np.abs(spec[1]) ** 2 + np.real(spec[2]) + np.angle(f[3])
