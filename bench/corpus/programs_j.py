"""Distributions, root finders from SciPy, model classes with state, Monte Carlo option."""
import math
import numpy as np
import scipy.optimize
import scipy.stats
from bench.corpus.harness import prog

DATA = np.array([0.3, 1.2, 2.2, 0.8, 1.7, 3.1, 0.4])


@prog([(np.array([1.2, 0.8]),), (np.array([0.5, 1.5]),)])
def gamma_loglik(theta):
    shape, scale = np.exp(theta)
    return -np.sum(scipy.stats.gamma.logpdf(DATA, a=shape, scale=scale))


@prog([(0.5,), (2.0,)], hess=False, jvpgrad=False)
def brentq_root(c):
    root = scipy.optimize.brentq(lambda x: x ** 3 + c * x - 2.0, 0.0, 2.0)
    return root ** 2


@prog([(np.array([100.0, 0.2]),), (np.array([90.0, 0.3]),)], fresh=lambda: (np.random.default_rng(5),))
def mc_asian_option(p, rng):
    S0, sigma = p
    r, T, n_steps, n_paths = 0.02, 1.0, 12, 2000
    dt = T / n_steps
    z = rng.standard_normal((n_paths, n_steps))
    log_paths = np.cumsum((r - 0.5 * sigma ** 2) * dt + sigma * math.sqrt(dt) * z, axis=1)
    S = S0 * np.exp(log_paths)
    payoff = np.maximum(S.mean(axis=1) - 100.0, 0.0)
    return math.exp(-r * T) * payoff.mean()


class Spring:
    def __init__(self, k, rest):
        self.k = k
        self.rest = rest
        self.history = []

    def __call__(self, x):
        f = -self.k * (x - self.rest)
        self.history.append(f)
        return f


@prog([(np.array([2.0, 1.0]),), (np.array([0.5, 0.3]),)])
def model_class_with_history(p):
    spring = Spring(p[0], p[1])
    x, v = 0.0, 0.0
    for _ in range(40):
        v += 0.05 * spring(x)
        x += 0.05 * v
    return x + 0.01 * sum(spring.history)


@prog([(np.array([0.3, 0.7, 1.1]),), (np.array([2.0, 0.1, 0.5]),)])
def periodic_interp(xq):
    xp = np.linspace(0, 2 * np.pi, 9)[:-1]
    fp = np.sin(xp)
    return np.sum(np.interp(xq, xp, fp, period=2 * np.pi) * xq)


@prog([(np.array([[2.0, 1.0], [-1.0, 3.0]]),), (np.array([[1.0, 2.0], [-2.0, 1.0]]),)], vmap=False)
def eig_complex(A):
    w, V = np.linalg.eig(A)
    return np.sum(np.abs(w) ** 2) + np.real(w[0] * np.conj(w[1]))


@prog([(np.array([0.5, 1.0]),), (np.array([1.5, -0.5]),)])
def student_t_robust(w):
    x = np.linspace(-1, 1, 8)
    y = 0.7 * x + 0.2 + np.array([0.1, -0.05, 0.3, 2.0, -0.1, 0.05, 0.0, -0.2])
    r = y - (w[0] * x + w[1])
    return -np.sum(scipy.stats.t.logpdf(r, df=3.0, scale=0.3))
