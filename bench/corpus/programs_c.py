"""Physics, finance, statistics."""
import math
import numpy as np
from bench.corpus.harness import prog

rng0 = np.random.default_rng(0)
POS0 = rng0.standard_normal((5, 2))


@prog([(POS0.ravel(),), (POS0.ravel() * 1.3,)])
def nbody_energy(flat):
    pos = flat.reshape(-1, 2)
    n = len(pos)
    E = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            d = pos[i] - pos[j]
            r = math.sqrt(d[0] ** 2 + d[1] ** 2) if False else np.sqrt(d @ d)
            E += 1.0 / r ** 12 - 2.0 / r ** 6
    return E


@prog([(np.array([0.0, 1.1, 2.3, 2.9]),), (np.array([0.0, 0.8, 1.5, 3.5]),)])
def spring_chain(x):
    k, L = 2.0, 1.0
    energy = 0
    for a, b in zip(x[:-1], x[1:]):
        stretch = abs(b - a) - L
        energy += 0.5 * k * stretch ** 2
    return energy


@prog([(np.array([0.3, 0.0]),), (np.array([2.5, 0.5]),)])
def pendulum_energy(state):
    g, l, m = 9.81, 1.0, 2.0
    theta, omega = state
    KE = 0.5 * m * (l * omega) ** 2
    PE = m * g * l * (1 - np.cos(theta))
    return KE + PE


@prog([(101.3,), (90.0,)])
def call_payoff_builtin(S):
    K = 95.0
    payoffs = []
    for z in [-1.0, -0.3, 0.2, 0.8, 1.5]:
        ST = S * math.exp(0.2 * z - 0.02) if False else S * np.exp(0.2 * z - 0.02)
        payoffs.append(max(0.0, ST - K))
    return sum(payoffs) / len(payoffs)


@prog([(101.3,), (83.7,)])
def binomial_tree(S0):
    K, r, sigma, T, N = 100.0, 0.05, 0.2, 1.0, 30
    dt = T / N
    u = np.exp(sigma * np.sqrt(dt))
    d = 1 / u
    p = (np.exp(r * dt) - d) / (u - d)
    V = np.zeros(N + 1)
    for j in range(N + 1):
        V[j] = max(S0 * u ** j * d ** (N - j) - K, 0.0)
    for i in range(N - 1, -1, -1):
        for j in range(i + 1):
            V[j] = np.exp(-r * dt) * (p * V[j + 1] + (1 - p) * V[j])
    return V[0]


@prog([(101.3,), (83.7,)])
def american_put_tree(S0):
    K, r, sigma, T, N = 100.0, 0.05, 0.3, 1.0, 20
    dt = T / N
    u = math.exp(sigma * math.sqrt(dt))
    d = 1 / u
    p = (math.exp(r * dt) - d) / (u - d)
    disc = math.exp(-r * dt)
    V = [max(K - S0 * u ** j * d ** (N - j), 0.0) for j in range(N + 1)]
    for i in range(N - 1, -1, -1):
        for j in range(i + 1):
            cont = disc * (p * V[j + 1] + (1 - p) * V[j])
            exercise = K - S0 * u ** j * d ** (i - j)
            V[j] = max(cont, exercise)
    return V[0]


@prog([(np.array([0.5, 1.2]),), (np.array([-0.3, 0.7]),)])
def gaussian_loglik(params):
    data = np.array([0.1, -0.4, 1.3, 0.8, 2.1, -0.2])
    mu, log_sigma = params
    sigma = np.exp(log_sigma)
    n = len(data)
    ll = -n * np.log(sigma) - 0.5 * n * np.log(2 * np.pi)
    for x in data:
        ll -= (x - mu) ** 2 / (2 * sigma ** 2)
    return -ll


@prog([(np.array([0.5, 1.0]),), (np.array([2.0, -0.3]),)])
def huber_regression(w):
    X = np.array([[1, 0.1], [1, 0.5], [1, 1.2], [1, 2.0], [1, 3.1]])
    y = np.array([0.3, 0.9, 5.0, 2.2, 3.0])
    delta = 1.0
    total = 0.0
    for xi, yi in zip(X, y):
        r = yi - xi @ w
        if abs(r) < delta:
            total += 0.5 * r ** 2
        else:
            total += delta * (abs(r) - 0.5 * delta)
    return total


@prog([(np.array([0.5, 1.0]),), (np.array([2.0, -0.3]),)])
def bootstrap_mean_loss(w):
    rng = np.random.default_rng(1)
    data = np.linspace(-1, 2, 20)
    losses = []
    for b in range(10):
        idx = rng.integers(0, len(data), size=len(data))
        sample = data[idx]
        losses.append(np.mean((sample * w[0] - w[1]) ** 2))
    return np.mean(losses)


@prog([(np.array([1.0, 0.5, 2.0]),), (np.array([0.2, 0.3, 0.9]),)])
def poisson_nll(lam):
    counts = np.array([3, 0, 5])
    nll = 0.0
    for k, l in zip(counts, lam):
        nll += l - k * np.log(l) + math.lgamma(k + 1)
    return nll


@prog([(np.array([0.2, -0.5, 1.0]),), (np.array([-1.0, 0.3, 0.1]),)])
def logistic_regression_loop(w):
    X = np.array([[1.0, 0.5, -1.2], [0.3, -0.7, 2.0], [-1.5, 0.2, 0.4], [0.9, 1.1, -0.3]])
    y = [1, 0, 1, 0]
    loss = 0.0
    for i, (xi, yi) in enumerate(zip(X, y)):
        z = xi.dot(w)
        p = 1 / (1 + np.exp(-z))
        loss += -(yi * np.log(p) + (1 - yi) * np.log(1 - p))
    return loss / len(y)


@prog([(np.array([3.0, 1.0, 2.0, 5.0, 4.0]),), (np.array([1.0, 4.0, 2.5, 0.5, 3.0]),)])
def trimmed_mean_sorted(x):
    s = sorted(x)
    k = 1
    kept = s[k:len(s) - k]
    return sum(kept) / len(kept)


@prog([(np.array([3.1, 1.2, 2.05, 5.3, 4.45]),), (np.array([1.1, 4.0, 2.5, 0.5, 3.3]),)])
def median_abs_dev(x):
    m = np.median(x)
    return np.median(np.abs(x - m)) + np.percentile(x, 75) - np.percentile(x, 25)
