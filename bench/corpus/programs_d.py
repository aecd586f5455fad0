"""Signal processing, images, polynomial fits, matrices, objects."""
import math
import numpy as np
from bench.corpus.harness import prog

SIG = np.sin(np.linspace(0, 6, 32)) + 0.1 * np.cos(np.linspace(0, 40, 32))


@prog([(np.array([0.25, 0.5, 0.25]),), (np.array([0.1, 0.7, 0.2]),)])
def conv_loop(h):
    x = SIG
    n, m = len(x), len(h)
    y = np.zeros(n + m - 1)
    for i in range(n):
        for j in range(m):
            y[i + j] += x[i] * h[j]
    return np.sum(y ** 2)


@prog([(np.array([0.25, 0.5, 0.25]),), (np.array([0.1, 0.7, 0.2]),)])
def np_convolve_same(h):
    y = np.convolve(SIG, h, mode='same')
    return np.sum(np.abs(y) ** 1.5)


@prog([(2.0,), (5.0,)])
def fft_lowpass(cut):
    X = np.fft.rfft(SIG)
    freqs = np.fft.rfftfreq(len(SIG), d=1.0)
    H = 1.0 / (1.0 + (freqs * 32 / cut) ** 4)
    y = np.fft.irfft(X * H, n=len(SIG))
    return np.sum((y - SIG) ** 2)


@prog([(np.array([1.0, 0.5]),), (np.array([0.3, -0.2]),)])
def iir_filter(ab):
    a, b = ab
    y = np.empty_like(SIG)
    prev = 0.0
    for n, xn in enumerate(SIG):
        prev = a * xn + b * prev
        y[n] = prev
    return np.mean(y ** 2)


IMG = np.outer(np.sin(np.linspace(0, 3, 12)), np.cos(np.linspace(0, 2, 10)))


@prog([(IMG,), (IMG ** 2 + 0.1,)], vmap=False, hess=False)
def image_tv(img):
    gx = img[:, 1:] - img[:, :-1]
    gy = img[1:, :] - img[:-1, :]
    return np.sum(np.sqrt(gx[:-1, :] ** 2 + gy[:, :-1] ** 2 + 1e-6))


@prog([(IMG,), (IMG * 3,)], vmap=False, hess=False)
def image_clip_blur(img):
    c = np.clip(img, -0.5, 0.8)
    k = np.array([[1, 2, 1], [2, 4, 2], [1, 2, 1]]) / 16.0
    H, W = c.shape
    out = np.zeros((H - 2, W - 2))
    for i in range(H - 2):
        for j in range(W - 2):
            out[i, j] = np.sum(c[i:i + 3, j:j + 3] * k)
    return np.sum(out ** 2)


@prog([(np.array([0.1, 0.4, 0.9, 1.6, 2.5, 3.6]),), (np.array([1.0, 0.8, 1.1, 1.9, 3.2, 5.0]),)])
def polyfit_eval(y):
    x = np.linspace(0, 1, 6)
    coef = np.polyfit(x, y, 2)
    return np.polyval(coef, 0.5) + coef[0]


@prog([(np.array([0.1, 0.4, 0.9, 1.6, 2.5, 3.6]),), (np.array([1.0, 0.8, 1.1, 1.9, 3.2, 5.0]),)])
def vandermonde_lstsq(y):
    x = np.linspace(0, 1, 6)
    A = np.vander(x, 3)
    c, res, rank, sv = np.linalg.lstsq(A, y, rcond=None)
    return c @ c


@prog([(np.array([1.0, 2.0, 0.5]),), (np.array([0.3, 0.3, 1.5]),)])
def stiffness_matrix(k):
    n = len(k)
    K = np.zeros((n, n))
    for e in range(n):
        K[e, e] += k[e]
        if e + 1 < n:
            K[e, e] += k[e + 1] if False else 0.0
            K[e + 1, e + 1] += k[e]
            K[e, e + 1] -= k[e]
            K[e + 1, e] -= k[e]
    K += np.eye(n)
    f = np.ones(n)
    u = np.linalg.solve(K, f)
    return f @ u


@prog([(0.5,), (1.5,)])
def poisson_1d_fd(a):
    n = 20
    h = 1.0 / (n + 1)
    A = np.zeros((n, n))
    b = np.zeros(n)
    for i in range(n):
        A[i, i] = 2.0 / h ** 2 + a
        if i > 0:
            A[i, i - 1] = -1.0 / h ** 2
        if i < n - 1:
            A[i, i + 1] = -1.0 / h ** 2
        b[i] = math.sin(math.pi * (i + 1) * h)
    u = np.linalg.solve(A, b)
    return np.max(u) + u.mean()


class Oscillator:
    def __init__(self, k, c):
        self.k = k
        self.c = c

    def rhs(self, x, v):
        return v, -self.k * x - self.c * v

    def simulate(self, x0, dt=0.05, steps=40):
        x, v = x0, 0.0
        for _ in range(steps):
            dx, dv = self.rhs(x, v)
            x, v = x + dt * dx, v + dt * dv
        return x


@prog([(np.array([1.0, 0.1]),), (np.array([2.0, 0.5]),)])
def oscillator_class(p):
    osc = Oscillator(p[0], p[1])
    return osc.simulate(1.0)


@prog([(np.array([1.0, 0.1]),), (np.array([2.0, 0.5]),)])
def params_dict(p):
    cfg = {'k': p[0], 'c': p[1], 'steps': 30}
    x = 1.0
    v = 0.0
    hist = {'x': [], 'v': []}
    for _ in range(cfg['steps']):
        a = -cfg['k'] * x - cfg['c'] * v
        v += 0.05 * a
        x += 0.05 * v
        hist['x'].append(x)
        hist['v'].append(v)
    return np.sum(np.array(hist['x']) ** 2) + max(hist['v'])


@prog([(np.array([0.5, 1.5, -0.3, 2.2]),), (np.array([2.0, -1.0, 0.4, 0.1]),)])
def masks_and_where(x):
    y = x.copy()
    y[y < 0] = 0.0
    big = x > 1
    s = np.sum(x[big] ** 2) if big.any() else 0.0
    return s + np.sum(np.where(x > 0.3, np.log1p(np.abs(x)), x ** 3)) + y.sum()


@prog([(np.array([0.5, 1.5, -0.3, 2.2]),), (np.array([2.0, -1.0, 0.4, 0.1]),)])
def cumulative_stats(x):
    cs = np.cumsum(x)
    running_max = np.maximum.accumulate(x)
    d = np.diff(x)
    return cs[-1] * 0.1 + running_max.sum() + np.sum(d ** 2) + np.prod(1 + 0.1 * x)
